//! The peers `pushit promql` and `pushit influxql` compare chingest with,
//! each a child process on a free loopback port with a temporary data
//! directory, killed when dropped (and, for a cold start, restarted on it
//! with the page cache dropped): a Prometheus whose TSDB blocks
//! `promtool` backfilled from OpenMetrics files of the scrapes, a
//! VictoriaMetrics loaded by the same remote-write requests chingest was,
//! and an InfluxDB 1.x (`influxd`) with only its HTTP service. They are
//! measured only once idle: Prometheus after its first compaction (a
//! minute after it starts, as a Prometheus holding a day has compacted its
//! blocks), VictoriaMetrics after its flush and merges, InfluxDB after
//! its writes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::prom::{flush_victoriametrics, write_all};
use super::promql_data::{Data, Kind, Requests, INTERVAL_MS, LOAD_CONNECTIONS};
use super::server::{http_client, Endpoints};
use super::{check_stored, per_second};
use crate::Context;

/// A peer server this process started.
pub(super) struct Peer {
    name: &'static str,
    binary: PathBuf,
    /// Its flags, as [`Peer::start`] made them.
    flags: Vec<String>,
    ready_path: &'static str,
    child: Child,
    pub(super) url: String,
    log: PathBuf,
    /// Removed after the child is killed (fields drop after `drop`).
    dir: tempfile::TempDir,
}

impl Peer {
    /// Starts `binary` with the flags `flags` makes of its directory and
    /// a free port, and waits until `ready_path` answers 200.
    pub(super) async fn start(
        name: &'static str,
        binary: &Path,
        dir: tempfile::TempDir,
        flags: impl FnOnce(&Path, u16) -> Vec<String>,
        ready_path: &'static str,
    ) -> anyhow::Result<Peer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = dir.path().join(format!("{name}.log"));
        let flags = flags(dir.path(), port);
        let child = spawn(binary, &flags, &log)?;
        let peer = Peer {
            name,
            binary: binary.to_owned(),
            flags,
            ready_path,
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            dir,
        };
        peer.wait_ready().await?;
        Ok(peer)
    }

    /// Waits until its `ready_path` answers 200, for up to 2 min.
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let client = http_client()?;
        let give_up = Instant::now() + Duration::from_secs(120);
        loop {
            let answer = client
                .get(format!("{}{}", self.url, self.ready_path))
                .send()
                .await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if Instant::now() > give_up {
                bail!("{} not ready in 2 min:\n{}", self.name, self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its temporary directory.
    pub(super) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A cold start: stops it (SIGTERM, as a service manager does; killed
    /// after a minute), empties the kernel's page cache where this process
    /// may (as root), and starts it again on the same directory and port
    /// with its flags and `more_flags`; returns whether the page cache was
    /// emptied.
    pub(super) async fn restart(&mut self, more_flags: &[String]) -> anyhow::Result<bool> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let give_up = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > give_up {
                let _ = self.child.kill();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = Command::new("sync").status();
        let dropped = std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok();
        let flags: Vec<String> = self.flags.iter().chain(more_flags).cloned().collect();
        self.child = spawn(&self.binary, &flags, &self.log)?;
        self.wait_ready().await?;
        Ok(dropped)
    }

    /// How the measurements reach it: no database, no token.
    pub(super) fn endpoints(&self) -> Endpoints {
        Endpoints {
            http: self.url.clone(),
            grpc: None,
            clickhouse: None,
            token: None,
        }
    }

    /// The end of its log, for errors.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log[log.len().saturating_sub(3_000)..].to_owned()
    }

    /// Its private resident memory now (Linux's `RssAnon`), bytes.
    pub(super) fn rss_anon(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("RssAnon:"))?;
        let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kib * 1024)
    }

    /// The CPU time it has used (user and system), seconds.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // The fields after the command's closing parenthesis start at the
        // 3rd; utime and stime are the 14th and 15th, in Linux's USER_HZ
        // (100 a second).
        let after = &stat[stat.rfind(')').context("no command in /proc stat")? + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |field: usize| -> anyhow::Result<u64> {
            Ok(fields
                .get(field - 3)
                .context("a short /proc stat")?
                .parse()?)
        };
        Ok((ticks(14)? + ticks(15)?) as f64 / 100.0)
    }

    /// The sum of `metric` over its series on `/metrics`.
    async fn metric(&self, client: &reqwest::Client, metric: &str) -> anyhow::Result<f64> {
        let text = client
            .get(format!("{}/metrics", self.url))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        Ok(text
            .lines()
            .filter_map(|line| sample_of(line, metric))
            .sum())
    }

    /// Waits until it uses under 5% of a core for 3 s running (its
    /// background work done), for up to 5 min, then `--pause`.
    pub(super) async fn wait_idle(&self, ctx: &Context) -> anyhow::Result<()> {
        let give_up = Instant::now() + Duration::from_secs(300);
        let (mut quiet, mut cpu) = (0, self.cpu_seconds()?);
        while quiet < 3 && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = self.cpu_seconds()?;
            quiet = if now - cpu < 0.05 { quiet + 1 } else { 0 };
            cpu = now;
        }
        if quiet < 3 {
            ctx.progress(format!("{} still busy after 5 min", self.name));
        }
        tokio::time::sleep(Duration::from_secs_f64(ctx.common.pause.max(0.0))).await;
        Ok(())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `binary` with `flags`, its output appended to `log`.
fn spawn(binary: &Path, flags: &[String], log: &Path) -> anyhow::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    Command::new(binary)
        .args(flags)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

/// The value of `line` (of the text exposition format) if it is a sample
/// of `metric`.
pub(super) fn sample_of(line: &str, metric: &str) -> Option<f64> {
    let rest = line.strip_prefix(metric)?;
    let rest = match rest.strip_prefix('{') {
        Some(labels) => &labels[labels.find('}')? + 1..],
        None if rest.starts_with(' ') => rest,
        None => return None,
    };
    rest.split_whitespace().next()?.parse().ok()
}

/// An InfluxDB 1.x (`binary`, Debian's `influxd`) on free loopback ports
/// with only its HTTP service and no background work (no monitor store,
/// retention or continuous queries), not yet written to.
pub(super) async fn influxdb(binary: &Path) -> anyhow::Result<Peer> {
    let dir = tempfile::Builder::new()
        .prefix("pushit-influxdb-")
        .tempdir()?;
    let rpc = super::server::free_port()?;
    let config = dir.path().join("influxdb.conf");
    let flags = |home: &Path, port: u16| {
        let home = home.display();
        let text = format!(
            "reporting-disabled = true\nbind-address = \"127.0.0.1:{rpc}\"\n\
             [meta]\n  dir = \"{home}/meta\"\n  logging-enabled = false\n\
             [data]\n  dir = \"{home}/data\"\n  wal-dir = \"{home}/wal\"\n  query-log-enabled = false\n\
             [monitor]\n  store-enabled = false\n[subscriber]\n  enabled = false\n\
             [continuous_queries]\n  enabled = false\n[retention]\n  enabled = false\n\
             [http]\n  bind-address = \"127.0.0.1:{port}\"\n  log-enabled = false\n\
             [logging]\n  level = \"warn\"\n  suppress-logo = true\n"
        );
        // A config that cannot be written shows as influxd's own error.
        let _ = std::fs::write(&config, text);
        vec!["-config".to_owned(), config.display().to_string()]
    };
    Peer::start("influxdb", binary, dir, flags, "/ping").await
}

/// A chingest server (`binary`, `chingest serve`) as a child process with
/// its shipped settings on its own data directory, so that it can be
/// restarted: the HTTP and gRPC APIs on free loopback ports, no ClickHouse
/// interface.
pub(super) async fn chingest(binary: &Path) -> anyhow::Result<Peer> {
    let dir = tempfile::Builder::new()
        .prefix("pushit-chingest-")
        .tempdir()?;
    let grpc = super::server::free_port()?;
    let flags = |dir: &Path, port: u16| {
        let data = dir.join("data").display().to_string();
        let flags = [
            "serve",
            "--data-dir",
            &data,
            "--http-addr",
            &format!("127.0.0.1:{port}"),
            "--grpc-addr",
            &format!("127.0.0.1:{grpc}"),
            "--clickhouse-http-addr",
            "off",
            "--log",
            "warn",
        ];
        flags.map(str::to_owned).to_vec()
    };
    Peer::start("chingest", binary, dir, flags, "/ready").await
}

/// A Prometheus (`binary`, `promtool` beside it) on blocks backfilled from
/// `data`, idle after its first compaction.
pub(super) async fn prometheus(ctx: &Context, binary: &Path, data: &Data) -> anyhow::Result<Peer> {
    let promtool = binary.with_file_name("promtool");
    let dir = tempfile::Builder::new()
        .prefix("pushit-prometheus-")
        .tempdir()?;
    let tsdb = dir.path().join("data");
    let started = Instant::now();
    // One file per block (promtool's blocks are 2 h, aligned): promtool
    // reads its whole input once per block it makes.
    let mut scrapes = 0..data.scrapes;
    let mut blocks = 0;
    while !scrapes.is_empty() {
        let block = data.time_ms(scrapes.start) / BLOCK_MS;
        let in_block: Vec<usize> = scrapes
            .clone()
            .take_while(|&scrape| data.time_ms(scrape) / BLOCK_MS == block)
            .collect();
        scrapes.start += in_block.len();
        let file = dir.path().join("block.om");
        write_openmetrics(&file, data, &in_block)?;
        let status = Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
            .arg(&file)
            .arg(&tsdb)
            .status()
            .with_context(|| format!("running {}", promtool.display()))?;
        if !status.success() {
            bail!(
                "{} create-blocks-from openmetrics: {status}",
                promtool.display()
            );
        }
        std::fs::remove_file(&file)?;
        blocks += 1;
    }
    ctx.progress(format!(
        "promql: prometheus: {blocks} blocks backfilled in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    std::fs::write(dir.path().join("prometheus.yml"), "scrape_configs: []\n")?;
    let flags = |dir: &Path, port: u16| {
        vec![
            format!("--config.file={}", dir.join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            // Blocks past the retention would be deleted on start.
            "--storage.tsdb.retention.time=100y".to_owned(),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ]
    };
    let peer = Peer::start("prometheus", binary, dir, flags, "/-/ready").await?;
    ctx.progress("promql: prometheus: waiting for its first compaction (a minute after start)");
    let client = http_client()?;
    let give_up = Instant::now() + Duration::from_secs(180);
    while peer
        .metric(&client, "prometheus_tsdb_compactions_triggered_total")
        .await?
        < 1.0
    {
        if Instant::now() > give_up {
            bail!("prometheus did not compact in 3 min:\n{}", peer.log_tail());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    peer.wait_idle(ctx).await?;
    let loaded = peer
        .metric(&client, "prometheus_tsdb_blocks_loaded")
        .await?;
    ctx.progress(format!(
        "promql: prometheus: {loaded} blocks after compaction"
    ));
    Ok(peer)
}

/// promtool's block length, ms.
const BLOCK_MS: i64 = 2 * 3_600_000;

/// `scrapes` of `data` as an OpenMetrics file, in time order: each
/// metric's `# TYPE` first (a counter's family is its name without
/// `_total`), then every series at each scrape. Each scrape interleaves
/// the families, which promtool's parser takes; time first is the order
/// its block writer appends in.
fn write_openmetrics(file: &Path, data: &Data, scrapes: &[usize]) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
    for (metric, kind) in &data.metrics {
        match kind {
            Kind::Counter => {
                let family = metric.strip_suffix("_total").unwrap_or(metric);
                writeln!(out, "# TYPE {family} counter")?;
            }
            Kind::Gauge => writeln!(out, "# TYPE {metric} gauge")?,
        }
    }
    for &scrape in scrapes {
        let seconds = data.time_ms(scrape) / 1000;
        for (series, labels) in data.series.iter().enumerate() {
            let (name, labels) = labels.split_first().context("a series without a name")?;
            let labels: Vec<String> = labels
                .iter()
                .map(|(label, value)| format!("{label}=\"{value}\""))
                .collect();
            writeln!(
                out,
                "{}{{{}}} {} {seconds}",
                name.1,
                labels.join(","),
                data.value(series, scrape)
            )?;
        }
    }
    writeln!(out, "# EOF")?;
    out.flush()?;
    Ok(())
}

/// A VictoriaMetrics (`binary` with `extra_flags`), called `name`, loaded
/// with `requests`, flushed, its sample count checked, and idle.
pub(super) async fn victoriametrics(
    ctx: &Context,
    name: &'static str,
    binary: &Path,
    extra_flags: &[&str],
    requests: Requests,
    data: &Data,
) -> anyhow::Result<Peer> {
    let dir = tempfile::Builder::new()
        .prefix("pushit-victoriametrics-")
        .tempdir()?;
    let flags = |dir: &Path, port: u16| {
        let mut flags = vec![
            format!("-storageDataPath={}", dir.join("data").display()),
            format!("-httpListenAddr=127.0.0.1:{port}"),
            "-loggerLevel=WARN".to_owned(),
            // Its default (300,000) refuses the count of a million series
            // that checks the load; queries select far fewer.
            "-search.maxUniqueTimeseries=10000000".to_owned(),
        ];
        flags.extend(extra_flags.iter().map(|flag| flag.to_string()));
        flags
    };
    let peer = Peer::start(name, binary, dir, flags, "/health").await?;
    let name_for_progress = format!("promql/{name}");
    let sent = write_all(
        ctx,
        &name_for_progress,
        &peer.endpoints(),
        "/api/v1/write",
        requests,
        LOAD_CONNECTIONS,
    )
    .await?;
    let client = http_client()?;
    let samples = data.samples() as u64;
    let count = format!(
        "sum(count_over_time({{__name__=~\".+\"}}[{}s]))",
        data.scrapes as i64 * INTERVAL_MS / 1000
    );
    let stored = flush_victoriametrics(&client, &peer.url, &count, data.end_ms(), samples).await?;
    check_stored(name, samples, stored)?;
    ctx.progress(format!(
        "promql: {name}: {:.0} samples/s written, {:.1} s until queryable",
        per_second(sent.rows, sent.elapsed),
        sent.started.elapsed().as_secs_f64()
    ));
    peer.wait_idle(ctx).await?;
    Ok(peer)
}

#[cfg(test)]
mod tests {
    use super::sample_of;

    #[test]
    fn samples_of_one_metric() {
        let metric = "process_cpu_seconds_total";
        assert_eq!(
            sample_of("process_cpu_seconds_total 1.5", metric),
            Some(1.5)
        );
        assert_eq!(
            sample_of(
                r#"http_requests_total{code="200"} 2"#,
                "http_requests_total"
            ),
            Some(2.0)
        );
        assert_eq!(sample_of("process_cpu_seconds_total_x 1", metric), None);
        assert_eq!(
            sample_of("# TYPE process_cpu_seconds_total counter", metric),
            None
        );
    }
}
