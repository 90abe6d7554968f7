//! The engine's connections and their pools: each connection counted
//! until it is closed, lent out as a [`Pooled`], and given back to its pool
//! or closed ([`discard`]) when its statement did not run to its end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use chdb_rust::connection::Connection;
use deadpool::managed::{self, Metrics, RecycleResult};

use crate::engine::queue::QuerySlot;
use crate::error::{Error, Result};

/// A connection lent by a pool: back to it when dropped (see [`discard`]).
pub(crate) type Pooled = managed::Object<ConnectionManager>;

/// Creates connections to the engine's data path, with extra
/// connection-level settings.
#[derive(Debug)]
pub(crate) struct ConnectionManager {
    args: Vec<String>,
    /// The engine's connections still open, of every pool.
    open: Arc<AtomicUsize>,
}

impl managed::Manager for ConnectionManager {
    type Type = CountedConnection;
    type Error = Error;

    async fn create(&self) -> Result<CountedConnection> {
        let args = self.args.clone();
        let conn = tokio::task::spawn_blocking(move || {
            Connection::open(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .map_err(|e| Error::Engine(format!("connection task failed: {e}")))?
        .map_err(Error::from)?;
        self.open.fetch_add(1, Ordering::SeqCst);
        Ok(CountedConnection {
            conn: Some(conn),
            open: Arc::clone(&self.open),
        })
    }

    async fn recycle(&self, _: &mut CountedConnection, _: &Metrics) -> RecycleResult<Error> {
        Ok(())
    }
}

/// A connection counted among its engine's open ones until it is
/// dropped. A pool closes only the connections it holds; one lent out is
/// dropped when its user is done, and the engine takes another data path
/// only once every connection to this one is gone
/// ([`Engine::close`](crate::engine::Engine::close) waits for that).
#[derive(Debug)]
pub(crate) struct CountedConnection {
    /// Always `Some` until dropped.
    conn: Option<Connection>,
    open: Arc<AtomicUsize>,
}

impl std::ops::Deref for CountedConnection {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("a connection until dropped")
    }
}

impl std::ops::DerefMut for CountedConnection {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("a connection until dropped")
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        // Closed first, then no longer counted.
        drop(self.conn.take());
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A pool of up to `size` connections opened with `args`, counted in
/// `open`.
pub(super) fn connection_pool(
    args: Vec<String>,
    size: usize,
    open: &Arc<AtomicUsize>,
) -> Result<managed::Pool<ConnectionManager>> {
    let open = Arc::clone(open);
    managed::Pool::builder(ConnectionManager { args, open })
        .max_size(size)
        .build()
        .map_err(|e| Error::Config(format!("connection pool: {e}")))
}

pub(super) fn pool_error(err: managed::PoolError<Error>) -> Error {
    match err {
        managed::PoolError::Backend(err) => err,
        managed::PoolError::Closed => Error::Closed,
        other => Error::Engine(format!("connection pool: {other}")),
    }
}

/// Ends an untrusted statement: its read-only connection back to the pool
/// (or closed if the statement did not run to its end, see [`discard`]),
/// then its slot to the next statement, which so finds a connection too.
/// Called before the statement's caller is answered: a client that asks
/// again as soon as it has the answer finds the slot free.
pub(crate) fn release(conn: Pooled, slot: QuerySlot, whole: bool) {
    match whole {
        true => drop(conn),
        false => discard(conn),
    }
    drop(slot);
}

/// Closes a pooled connection instead of returning it to its pool. A
/// statement that failed or was cut off part-way can leave the output it had
/// begun in the connection, and the engine prepends that to the next
/// statement's answer there — which may be another caller's. The pool opens
/// a fresh connection when it needs one.
pub(crate) fn discard(conn: managed::Object<ConnectionManager>) {
    drop(managed::Object::take(conn));
}
