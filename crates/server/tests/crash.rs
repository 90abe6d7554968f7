//! Kill -9 under load: the real `chingest` binary, in its default
//! durability mode (fsync), takes concurrent writes and is killed with
//! SIGKILL at a random moment, then restarted on the same data directory —
//! over and over. After every restart:
//!
//! - every request that was answered 204 is stored, exactly once;
//! - no request is torn: each one's rows (in two tables) are all there or
//!   none;
//! - every fact row has its series row.
//!
//! The server runs as a child process (the engine is process-global), so
//! this test binary does not open an engine itself.

use std::collections::{BTreeMap, HashSet};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TRIALS: usize = 10;
const WRITERS: usize = 4;
/// Lines per request in each of the two measurements.
const LINES: usize = 200;
const DB: &str = "crash";

struct Server {
    child: Child,
    url: String,
}

/// A failing test must not leave a server behind (it would also hold the
/// test's output pipe open).
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(data_dir: &Path) -> Server {
    let (http, grpc) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_chingest"))
        .args(["serve", "--log", "warn", "--data-dir"])
        .arg(data_dir)
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
        .args(["--clickhouse-http-addr", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the server binary");
    Server {
        child,
        url: format!("http://127.0.0.1:{http}"),
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn wait_ready(server: &Server) {
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

async fn sql(server: &Server, query: &str) -> String {
    let r = client()
        .post(format!("{}/sql?format=TabSeparated", server.url))
        .body(query.to_owned())
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{query}: {status} {text}");
    text
}

/// The body of request `id`: `LINES` lines in each of two measurements,
/// on series new to the database every few requests.
fn body(writer: usize, id: u64) -> String {
    let mut body = String::new();
    for m in ["crash_a", "crash_b"] {
        for line in 0..LINES {
            let ts = id * LINES as u64 + line as u64;
            body.push_str(&format!(
                "{m},w={writer},s={} req={id}i,line={line}i {ts}\n",
                (id / 3) * 10 + (line % 10) as u64
            ));
        }
    }
    body
}

/// Posts requests until told to stop; records the ids answered 204.
async fn writer(url: String, writer: usize, next: Arc<Mutex<u64>>, acked: Arc<Mutex<Vec<u64>>>) {
    let client = client();
    loop {
        let id = {
            let mut next = next.lock().unwrap();
            *next += 1;
            *next
        };
        let sent = client
            .post(format!("{url}/write?db={DB}"))
            .body(body(writer, id))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == reqwest::StatusCode::NO_CONTENT => {
                acked.lock().unwrap().push(id)
            }
            Ok(r) => panic!("request {id}: {}", r.status()),
            // The server was killed.
            Err(_) => return,
        }
    }
}

/// Rows per request id in a measurement.
async fn counts(server: &Server, measurement: &str) -> BTreeMap<u64, u64> {
    let text = sql(
        server,
        &format!("SELECT req, count() FROM {DB}.{measurement} GROUP BY req"),
    )
    .await;
    text.lines()
        .map(|line| {
            let (req, count) = line.split_once('\t').unwrap();
            (req.parse().unwrap(), count.parse().unwrap())
        })
        .collect()
}

async fn check(server: &Server, acked: &[u64], trial: usize) {
    let a = counts(server, "crash_a").await;
    let b = counts(server, "crash_b").await;
    for id in acked {
        assert_eq!(
            (a.get(id), b.get(id)),
            (Some(&(LINES as u64)), Some(&(LINES as u64))),
            "trial {trial}: acknowledged request {id} must be stored exactly once"
        );
    }
    let ids: HashSet<_> = a.keys().chain(b.keys()).collect();
    for id in ids {
        assert_eq!(
            (a.get(id), b.get(id)),
            (Some(&(LINES as u64)), Some(&(LINES as u64))),
            "trial {trial}: request {id} is torn or duplicated"
        );
    }
    for measurement in ["crash_a", "crash_b"] {
        let orphans = sql(
            server,
            &format!(
                "SELECT count() FROM {DB}.`{measurement}.autogen` \
                 WHERE series_id NOT IN (SELECT series_id FROM {DB}._series)"
            ),
        )
        .await;
        assert_eq!(orphans, "0\n", "trial {trial}: facts without series rows");
    }
}

#[test]
fn acknowledged_writes_survive_kill_9_exactly_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(Mutex::new(0));
    // A deterministic spread of kill moments, 150 ms to 1.2 s into the load.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for trial in 0..TRIALS {
        let mut server = start(dir.path());
        runtime.block_on(async {
            wait_ready(&server).await;
            if trial == 0 {
                // Request 0 creates the tables, so that every check can
                // read them.
                let r = client()
                    .post(format!("{}/write?db={DB}&durability=visible", server.url))
                    .body(body(0, 0))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), reqwest::StatusCode::NO_CONTENT);
                acked.lock().unwrap().push(0);
            }
            let acked_so_far = acked.lock().unwrap().clone();
            check(&server, &acked_so_far, trial).await;
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    tokio::spawn(writer(
                        server.url.clone(),
                        w,
                        Arc::clone(&next),
                        Arc::clone(&acked),
                    ))
                })
                .collect();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            tokio::time::sleep(Duration::from_millis(150 + seed % 1050)).await;
            server.child.kill().expect("SIGKILL");
            server.child.wait().unwrap();
            for writer in writers {
                writer.await.unwrap();
            }
        });
    }
    let server = start(dir.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        let acked = acked.lock().unwrap().clone();
        assert!(
            acked.len() >= TRIALS,
            "only {} requests were acknowledged",
            acked.len()
        );
        check(&server, &acked, TRIALS).await;
    });
}
