//! The ClickHouse side of the cluster mode's tests: server nodes of the
//! engine library's own code (`clickhouse_node.py`), and Apache ZooKeeper
//! as their Keeper, each a process on free loopback ports, killed when
//! dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A ClickHouse node on loopback ports over `dir`, killed (-9) when
/// dropped.
pub(crate) struct ClickHouseNode {
    /// The process, and how to start it again ([`ensure_up`](Self::ensure_up)).
    child: std::sync::Mutex<Child>,
    start: std::sync::Mutex<Command>,
    /// Its standard output and error: the tail is shown when a test
    /// panics with the node up (the node's own fatal errors end there).
    log: PathBuf,
    pub(crate) http: String,
    pub(crate) tcp_port: u16,
}

impl ClickHouseNode {
    /// A node on a free HTTP port and a free native port.
    pub(crate) async fn start_new(dir: &Path) -> ClickHouseNode {
        ClickHouseNode::start(dir, free_port(), free_port()).await
    }

    /// The node's address as chingest's shard list takes it.
    pub(crate) fn shard_url(&self) -> String {
        format!("{}?native_port={}", self.http, self.tcp_port)
    }

    pub(crate) async fn start(dir: &Path, http_port: u16, tcp_port: u16) -> ClickHouseNode {
        ClickHouseNode::start_configured(dir, http_port, tcp_port, None).await
    }

    /// [`start`](Self::start), the node reading `config` (the body of its
    /// `<clickhouse>` configuration) if given.
    pub(crate) async fn start_configured(
        dir: &Path,
        http_port: u16,
        tcp_port: u16,
        config: Option<&str>,
    ) -> ClickHouseNode {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let library: PathBuf = root.join("engine/lib/libchdb.so");
        let script = root.join("crates/server/tests/support/clickhouse_node.py");
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let mut command = Command::new("python3");
        command
            .arg(&script)
            .arg(&library)
            .arg(dir)
            .arg(tcp_port.to_string())
            .arg(http_port.to_string());
        if let Some(config) = config {
            let file = dir.with_extension("xml");
            std::fs::write(&file, format!("<clickhouse>{config}</clickhouse>")).unwrap();
            command.arg(file);
        }
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let node = ClickHouseNode {
            child: std::sync::Mutex::new(command.spawn().unwrap()),
            start: std::sync::Mutex::new(command),
            log: dir.with_extension("log"),
            http: format!("http://127.0.0.1:{http_port}"),
            tcp_port,
        };
        for _ in 0..600 {
            if node
                .query("SELECT 1")
                .await
                .is_ok_and(|answer| answer == "1\n")
            {
                return node;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "ClickHouse node not up after 30 s: {}",
            std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default()
        );
    }

    /// Starts the node again, on its directory and ports, if it stopped
    /// answering: the engine library's server mode has been seen to shut
    /// down its servers ("a fatal error", nothing in its log) after a
    /// chingest node was killed while its statements ran, which a real
    /// server's restart then recovers from.
    pub(crate) async fn ensure_up(&self) {
        for _ in 0..20 {
            if self.query("SELECT 1").await.is_ok_and(|a| a == "1\n") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "ClickHouse node {} stopped answering: started again",
            self.http
        );
        {
            let mut child = self.child.lock().unwrap();
            let _ = child.kill();
            let _ = child.wait();
            *child = self.start.lock().unwrap().spawn().unwrap();
        }
        for _ in 0..600 {
            if self.query("SELECT 1").await.is_ok_and(|a| a == "1\n") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("ClickHouse node {} not up again after 30 s", self.http);
    }

    /// A statement's answer (TSV), or its error.
    pub(crate) async fn query(&self, sql: &str) -> Result<String, String> {
        post(&self.http, None, sql.as_bytes().to_vec()).await
    }
}

impl Drop for ClickHouseNode {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!("ClickHouse node {} ended its log with:\n{tail}", self.http);
        }
        let child = self.child.get_mut().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// POSTs `body` to the HTTP interface: the statement, or its data with
/// the statement as `query`.
pub(crate) async fn post(url: &str, query: Option<&str>, body: Vec<u8>) -> Result<String, String> {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut request = client.post(url);
    if let Some(query) = query {
        request = request.query(&[("query", query)]);
    }
    let response = request.body(body).send().await.map_err(|e| e.to_string())?;
    let ok = response.status().is_success();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if ok {
        Ok(text)
    } else {
        Err(text)
    }
}

/// Apache ZooKeeper (Debian's `zookeeper` package) on a free loopback
/// port over `dir`, killed when dropped: the Keeper of replicated tables.
pub(crate) struct ZooKeeper {
    child: Child,
    pub(crate) port: u16,
}

impl ZooKeeper {
    pub(crate) async fn start(dir: &Path) -> ZooKeeper {
        std::fs::create_dir_all(dir).unwrap();
        let port = free_port();
        let config = dir.join("zoo.cfg");
        std::fs::write(
            &config,
            format!(
                "tickTime=500\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\n4lw.commands.whitelist=ruok\n",
                dir.join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("zookeeper.log")).unwrap();
        let child = Command::new("java")
            .args(["-cp", "/usr/share/java/zookeeper.jar"])
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("java (ZooKeeper needs it; make test-setup installs Debian's zookeeper)");
        let keeper = ZooKeeper { child, port };
        for _ in 0..600 {
            if keeper.answers_ruok() {
                return keeper;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "ZooKeeper not up after 30 s: {}",
            std::fs::read_to_string(dir.join("zookeeper.log")).unwrap_or_default()
        );
    }

    /// Whether the server answers ZooKeeper's `ruok` with `imok`.
    fn answers_ruok(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut answer = String::new();
        stream.write_all(b"ruok").is_ok()
            && stream.read_to_string(&mut answer).is_ok()
            && answer == "imok"
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
