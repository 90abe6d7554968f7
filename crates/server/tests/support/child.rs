//! The `chingest` binary as a child process on a data directory of the
//! test's: started, asked over HTTP, killed. For tests that crash or
//! restart servers, or run several (the engine is process-global, so a
//! test binary that opens none runs any number of servers this way).

#![allow(dead_code)] // Each test binary uses its part.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
    /// `http://<its gRPC API>`.
    pub(crate) grpc_url: String,
}

/// A failing test must not leave a server behind (it would also hold the
/// test's output pipe open).
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.exited_within(Duration::from_secs(60));
    }
}

impl Server {
    /// kill -9, and the process gone. A process on forgetfs whose file
    /// system stopped answering cannot finish dying (its threads wait in
    /// the kernel for the answer), and neither could this test: it aborts,
    /// which ends the file system's connection, instead of hanging.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        if !self.exited_within(Duration::from_secs(60)) {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "the server did not exit within 60 s of kill -9: its file system \
                 stopped answering; aborting"
            );
            std::process::abort();
        }
    }

    pub(crate) fn exited_within(&mut self, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn start(data_dir: &Path) -> Server {
    start_with(data_dir, &[])
}

/// Starts the server on `data_dir` with `args` besides the addresses.
pub(crate) fn start_with(data_dir: &Path, args: &[&std::ffi::OsStr]) -> Server {
    spawn(data_dir, "warn", args, Stdio::null())
}

/// Starts the server on `data_dir` logging at `log` (`--log`) into a pipe,
/// `child.stdout` (where its log goes), read once it is killed (a test's
/// few lines fit the pipe).
pub(crate) fn start_logged(data_dir: &Path, log: &str) -> Server {
    spawn(data_dir, log, &[], Stdio::piped())
}

fn spawn(data_dir: &Path, log: &str, args: &[&std::ffi::OsStr], stdout: Stdio) -> Server {
    let (http, grpc) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_chingest"))
        .args(["serve", "--log", log, "--data-dir"])
        .arg(data_dir)
        .args(args)
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
        .args(["--clickhouse-http-addr", "off"])
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the server binary");
    Server {
        child,
        url: format!("http://127.0.0.1:{http}"),
        grpc_url: format!("http://127.0.0.1:{grpc}"),
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub(crate) async fn wait_ready(server: &Server) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(r) = client().get(format!("{}/ready", server.url)).send().await {
            if r.status() == reqwest::StatusCode::OK {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the server did not become ready");
}

/// GET `path` of the server: its status and text.
pub(crate) async fn get(server: &Server, path: &str) -> (reqwest::StatusCode, String) {
    let r = client()
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

pub(crate) async fn sql(server: &Server, query: &str) -> String {
    try_sql(server, query)
        .await
        .unwrap_or_else(|(status, text)| panic!("{query}: {status} {text}"))
}

/// `query`'s TabSeparated answer, or the status and text of its refusal.
pub(crate) async fn try_sql(
    server: &Server,
    query: &str,
) -> Result<String, (reqwest::StatusCode, String)> {
    let r = client()
        .post(format!("{}/sql?format=TabSeparated", server.url))
        .body(query.to_owned())
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    match status.is_success() {
        true => Ok(text),
        false => Err((status, text)),
    }
}

/// `text` as one component of a URL's query string.
pub(crate) fn urlencode(text: &str) -> String {
    serde_urlencoded::to_string([("", text)]).unwrap()[1..].to_owned()
}
