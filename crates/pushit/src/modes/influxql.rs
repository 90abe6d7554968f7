//! `pushit influxql`: what a Grafana InfluxDB dashboard asks, on chingest
//! and on InfluxDB 1.x (Debian's `influxd`, 1.6) holding the same rows.
//! The data: TSBS cpu-only rows of `--hosts` hosts every 10 s over the
//! `--hours` before the last whole minute (a live dashboard's data, as
//! the panels' ranges are recent), or before `--back` hours earlier, the
//! same line-protocol bodies written to both. The panels: each asked over
//! a moving range, its request k asking host k mod hosts with the hour
//! ending k minutes before the data's end, round and round over the last
//! hour, so consecutive requests differ. Each panel's first answer is
//! compared between the servers (floats within a relative 1e-9) before any
//! clock starts; then each server takes each panel on `--connections`
//! keep-alive connections for `--seconds`, one server at a time.
//!
//! `--age` asks the panels over rows of every age instead: the data ends
//! now, and the panels' range is 6 h, 24 h or 7 d (at Grafana's
//! `$__interval`, as `pushit promql --age` steps), now and `--back` hours
//! back (48 by default). Before the warm runs, each group of panels (one
//! range at one position) is asked once at once right after both servers
//! restarted with the page cache emptied: cold. chingest then runs as a
//! child process (its release binary, `--chingest`) so that it can be
//! restarted.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context as _};
use pushit::report::{column, Format};
use serde_json::{json, Value};

use super::grafana::{step, BACK_HOURS, RANGES};
use super::peers::{self, influxdb, Peer};
use super::query::{hammer, Measured};
use super::server::{authorized, http_client, with_server, Endpoints, ServerArgs};
use super::{millis_at, per_second};
use crate::Context;

/// Flags of `pushit influxql`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts (series of `cpu`), each with TSBS's 10 integer fields.
    #[arg(long, default_value_t = 100)]
    hosts: usize,
    /// Hours of data before the last whole minute, one row per host every
    /// 10 s (at least 2: the ranges move over the last hour).
    #[arg(long, default_value_t = 3)]
    hours: usize,
    /// The data, and every panel's range with it, moved this many hours
    /// back from the last whole minute: panels over older rows, e.g.
    /// `--back 72` asks about three days ago, past the recent samples
    /// (26 h by default). With --age: where the groups moved back end
    /// (default 48), the data ending now.
    #[arg(long)]
    back: Option<usize>,
    /// The panels over rows of every age instead (e.g. a week: `--age
    /// --hours 168`): ranges of 6 h, 24 h and 7 d, now and `--back` hours
    /// back, each group cold (both servers restarted, the page cache
    /// emptied) and then warm; chingest run as a child process.
    #[arg(long, conflicts_with_all = ["url", "no_influxdb"])]
    age: bool,
    /// With --age: the chingest binary to run, by default the one beside
    /// pushit.
    #[arg(long, value_name = "PATH", requires = "age")]
    chingest: Option<PathBuf>,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds each panel runs on each server.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// The InfluxDB 1.x server to compare with.
    #[arg(long, value_name = "PATH", default_value = "/usr/bin/influxd")]
    influxd: PathBuf,
    /// Measure chingest alone.
    #[arg(long)]
    no_influxdb: bool,
    /// Ask the panels of InfluxQL's other functions instead (one host:
    /// arithmetic, top, count(distinct), mode, integral, moving and
    /// exponential averages, Holt-Winters, a subquery).
    #[arg(long, conflicts_with = "age")]
    functions: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// Seconds between a host's rows (TSBS's interval).
const STEP_S: i64 = 10;
/// Positions of a moving range: an hour of minutes.
const POSITIONS: i64 = 60;

/// The panels: name, and the InfluxQL a Grafana panel sends, with `{host}`,
/// the range (`{start}`, `{end}`, ms) and its intervals (`{interval}`, and
/// `{fleet}` for the fleet's coarser one) filled per request. A name with
/// `{range}` gets the range and the interval the panel uses.
const PANELS: &[(&str, &str)] = &[
    (
        "one host, mean, {range} @ {interval}",
        "SELECT mean(usage_user) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time({interval}) fill(null)",
    ),
    (
        "one host, 3 fields, {range} @ {interval}",
        "SELECT mean(usage_user), max(usage_system), min(usage_idle) FROM cpu \
         WHERE hostname = '{host}' AND time >= {start}ms AND time <= {end}ms \
         GROUP BY time({interval}) fill(null)",
    ),
    (
        "stat, last value",
        "SELECT last(usage_user) FROM cpu WHERE hostname = '{host}' AND time >= {start}ms",
    ),
    (
        "fleet, mean by host, {range} @ {fleet}",
        "SELECT mean(usage_user) FROM cpu WHERE time >= {start}ms AND time <= {end}ms \
         GROUP BY time({fleet}), hostname fill(null)",
    ),
    (
        "variable, host names",
        "SHOW TAG VALUES FROM cpu WITH KEY = \"hostname\"",
    ),
];

/// The panels of `--functions`: InfluxQL's other functions over one
/// host's range, as Grafana's query editor writes them.
const FUNCTION_PANELS: &[(&str, &str)] = &[
    (
        "one host, math on means, {range} @ {interval}",
        "SELECT mean(usage_user) * 2 + 1, max(usage_system) - min(usage_system) FROM cpu \
         WHERE hostname = '{host}' AND time >= {start}ms AND time <= {end}ms \
         GROUP BY time({interval}) fill(null)",
    ),
    (
        "one host, top 5, {range}",
        "SELECT top(usage_user, 5) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms",
    ),
    (
        "one host, distinct count and mode, {range} @ {interval}",
        "SELECT count(distinct(usage_user)), mode(usage_idle) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time({interval}) fill(null)",
    ),
    (
        "one host, integral, {range} @ {interval}",
        "SELECT integral(usage_user, 1m) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time({interval})",
    ),
    (
        "one host, moving average of mean, {range} @ {interval}",
        "SELECT moving_average(mean(usage_user), 5) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time({interval})",
    ),
    (
        "one host, exponential moving average, {range} @ {interval}",
        "SELECT exponential_moving_average(mean(usage_user), 5) FROM cpu \
         WHERE hostname = '{host}' AND time >= {start}ms AND time <= {end}ms \
         GROUP BY time({interval})",
    ),
    (
        "one host, holt_winters, {range} @ {interval}",
        "SELECT holt_winters(mean(usage_user), 10, 0) FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time({interval})",
    ),
    (
        "one host, max of means (subquery), {range} @ {interval}",
        "SELECT max(m) FROM (SELECT mean(usage_user) AS m FROM cpu WHERE hostname = '{host}' \
         AND time >= {start}ms AND time <= {end}ms GROUP BY time({interval}))",
    ),
];

impl Args {
    /// The panels asked: the dashboard's, or `--functions`'.
    fn panels(&self) -> &'static [(&'static str, &'static str)] {
        match self.functions {
            true => FUNCTION_PANELS,
            false => PANELS,
        }
    }
}

/// The panels over one range at one position.
struct Group {
    /// `""` (the default run's one group), or e.g. `48 h back, 7 d`.
    name: String,
    /// Where the range of request 0 ends, ms.
    last_ms: i64,
    range_s: i64,
    /// Seconds of the panels' `GROUP BY time` (Grafana's `$__interval`),
    /// and of the fleet panel's (a twelfth of the range).
    interval_s: i64,
    fleet_s: i64,
}

impl Group {
    fn new(name: String, last_ms: i64, range_s: i64, interval_s: i64) -> Group {
        Group {
            name,
            last_ms,
            range_s,
            interval_s,
            fleet_s: range_s / 12,
        }
    }

    /// Panel `panel`'s name in the group.
    fn title(&self, panel: &str) -> String {
        let title = panel
            .replace("{range}", &duration_text(self.range_s))
            .replace("{interval}", &duration_text(self.interval_s))
            .replace("{fleet}", &duration_text(self.fleet_s));
        match self.name.is_empty() {
            true => title,
            false => format!("{}: {title}", self.name),
        }
    }

    /// Panel `template`'s query k: host k mod `hosts`, its range ending
    /// k minutes before the group's last, round and round over the hour.
    fn query(&self, template: &str, hosts: usize, k: i64) -> String {
        let end = self.last_ms - (k % POSITIONS) * 60_000;
        template
            .replace("{host}", &format!("host_{}", k as usize % hosts))
            .replace("{start}", &(end - self.range_s * 1000).to_string())
            .replace("{end}", &end.to_string())
            .replace("{interval}", &format!("{}s", self.interval_s))
            .replace("{fleet}", &format!("{}s", self.fleet_s))
    }
}

/// `seconds` as a panel's name says it: `20 s`, `1 m`, `6 h`, `7 d`.
fn duration_text(seconds: i64) -> String {
    match seconds {
        s if s < 60 || s % 60 != 0 => format!("{s} s"),
        s if s < 3_600 || s % 3_600 != 0 => format!("{} m", s / 60),
        s if s % 86_400 == 0 && s > 86_400 => format!("{} d", s / 86_400),
        s => format!("{} h", s / 3_600),
    }
}

/// The groups `args` ask for over data ending at `end_ms`: the last hour
/// at 1 m (the fleet's at 5 m); with --age, each range of [`RANGES`] the
/// data holds, now and `--back` hours back.
fn groups(args: &Args, end_ms: i64) -> Vec<Group> {
    let last_ms = end_ms - STEP_S * 1000;
    if !args.age {
        return vec![Group::new(String::new(), last_ms, 3_600, 60)];
    }
    let back_hours = args.back.unwrap_or(BACK_HOURS);
    let mut groups = Vec::new();
    for back in [0, back_hours] {
        let position = match back {
            0 => "now".to_owned(),
            back => format!("{back} h back"),
        };
        for range_s in RANGES
            .into_iter()
            .filter(|&s| s <= args.hours as i64 * 3_600)
        {
            let name = format!("{position}, {}", duration_text(range_s));
            let last = last_ms - back as i64 * 3_600_000;
            groups.push(Group::new(name, last, range_s, step(range_s)));
        }
    }
    groups
}

/// A server the panels are asked of: its name, where, its database.
struct Side {
    name: &'static str,
    endpoints: Endpoints,
    db: String,
}

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    if args.hosts == 0 || args.hours < 2 || args.connections == 0 || args.seconds <= 0.0 {
        bail!("--hosts, --connections and --seconds must be positive, --hours at least 2");
    }
    let back_ms = match args.age {
        true => 0,
        false => args.back.unwrap_or(0) as i64 * 3_600_000,
    };
    let end_ms = last_whole_minute_ms()? - back_ms;
    let steps = args.hours * 3600 / STEP_S as usize;
    let start_ms = end_ms - steps as i64 * STEP_S * 1000;
    ctx.progress(format!(
        "influxql: generating {} rows ({} hosts, {} h)",
        args.hosts * steps,
        args.hosts,
        args.hours
    ));
    let bodies = bodies(args.hosts, steps, start_ms);
    let groups = groups(args, end_ms);
    let db = format!("pushit_influxql_{}", std::process::id());
    let runtime = tokio::runtime::Runtime::new()?;
    let admit_all = |config: &mut chingest_server::config::ServerConfig| {
        config.query.max_concurrent = config.query.max_concurrent.max(args.connections);
    };
    let mut report = ctx.report(
        "influxql",
        vec![
            column("panel", "panel", Format::Text),
            column("side", "side", Format::Text),
            column("QPS", "qps", Format::Count),
            column("p50", "p50_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("÷ influxdb", "over_influxdb", Format::Ratio),
        ],
    );
    runtime.block_on(async {
        let mut influxdb = match args.no_influxdb {
            true => None,
            false => {
                let peer = influxdb(&args.influxd)
                    .await
                    .with_context(|| format!("starting {}", args.influxd.display()))?;
                ctx.progress("influxql: loading influxdb");
                load(&peer.endpoints(), "pushit", &bodies, true).await?;
                peer.wait_idle(ctx).await?;
                Some(peer)
            }
        };
        if args.age {
            let binary = match &args.chingest {
                Some(path) => path.clone(),
                None => std::env::current_exe()?.with_file_name("chingest"),
            };
            let mut chingest = peers::chingest(&binary).await?;
            ctx.progress(format!("influxql: loading chingest into {db}"));
            load(&chingest.endpoints(), &db, &bodies, false).await?;
            chingest.wait_idle(ctx).await?;
            let mut servers = vec![("chingest", &mut chingest, db.as_str())];
            if let Some(peer) = influxdb.as_mut() {
                servers.push(("influxdb", peer, "pushit"));
            }
            ask_cold(ctx, args, &groups, &mut servers).await?;
            let sides = servers
                .iter()
                .map(|(name, peer, db)| Side {
                    name,
                    endpoints: peer.endpoints(),
                    db: db.to_string(),
                })
                .collect::<Vec<_>>();
            return ask_warm(ctx, args, &groups, &sides, &mut report).await;
        }
        with_server(ctx, &args.server, admit_all, async |endpoints| {
            ctx.progress(format!("influxql: loading chingest into {db}"));
            load(endpoints, &db, &bodies, false).await?;
            let mut sides = vec![Side {
                name: "chingest",
                endpoints: endpoints.clone(),
                db: db.clone(),
            }];
            if let Some(peer) = &influxdb {
                sides.push(Side {
                    name: "influxdb",
                    endpoints: peer.endpoints(),
                    db: "pushit".to_owned(),
                });
            }
            ask_warm(ctx, args, &groups, &sides, &mut report).await
        })
        .await
    })?;
    report.finish();
    Ok(())
}

/// Each group's panels, once at once (as Grafana asks a dashboard's), on
/// each of `servers` right after a restart with the page cache emptied;
/// reported as `influxql-age-cold`.
async fn ask_cold(
    ctx: &Context,
    args: &Args,
    groups: &[Group],
    servers: &mut [(&'static str, &mut Peer, &str)],
) -> anyhow::Result<()> {
    let mut report = ctx.report(
        "influxql-age-cold",
        vec![
            column("panels", "panels", Format::Text),
            column("side", "side", Format::Text),
            column("took", "took_ms", Format::Millis),
            column("÷ influxdb", "over_influxdb", Format::Ratio),
        ],
    );
    let client = http_client()?;
    for group in groups {
        let mut took_ms = Vec::new();
        for (side, server, db) in servers.iter_mut() {
            server.restart(&[]).await?;
            server.wait_idle(ctx).await?;
            ctx.progress(format!("influxql: {side}: cold: {}", group.name));
            let endpoints = server.endpoints();
            let started = Instant::now();
            let asked: Vec<_> = args
                .panels()
                .iter()
                .map(|(_, template)| {
                    let q = group.query(template, args.hosts, 0);
                    tokio::spawn(answer(query_request(&client, &endpoints, db, &q)))
                })
                .collect();
            for answered in asked {
                answered.await??;
            }
            took_ms.push((*side, started.elapsed().as_secs_f64() * 1e3));
        }
        let influxdb = took_ms.iter().find(|(side, _)| *side == "influxdb");
        for (side, took) in &took_ms {
            report.push(json!({
                "panels": format!("{}: the {} panels at once", group.name, args.panels().len()),
                "side": side,
                "took_ms": took,
                "over_influxdb": influxdb.map(|(_, theirs)| theirs / took),
            }));
        }
    }
    report.finish();
    Ok(())
}

/// Each group's panels on each side: the first answers compared, then
/// each side asked for `--seconds`.
async fn ask_warm(
    ctx: &Context,
    args: &Args,
    groups: &[Group],
    sides: &[Side],
    report: &mut pushit::report::Report,
) -> anyhow::Result<()> {
    let client = http_client()?;
    for group in groups {
        for (name, template) in args.panels() {
            let name = group.title(name);
            let requests = |client: &reqwest::Client, side: &Side| {
                (0..POSITIONS * args.hosts as i64)
                    .map(|k| {
                        let q = group.query(template, args.hosts, k);
                        query_request(client, &side.endpoints, &side.db, &q)
                    })
                    .collect::<Vec<_>>()
            };
            if let [ours, theirs] = sides {
                let first = |side| answer(requests(&client, side).remove(0));
                let (ours, theirs) = (first(ours).await?, first(theirs).await?);
                if !same(&ours, &theirs) {
                    bail!("{name}: the answers differ:\nchingest: {ours:.2000}\ninfluxdb: {theirs:.2000}");
                }
            }
            let mut measured: Vec<(&str, Measured)> = Vec::new();
            for side in sides {
                ctx.progress(format!("influxql: {name} on {}", side.name));
                let built = |client: &reqwest::Client| Some(requests(client, side));
                let m = hammer(args.connections, args.seconds, built, |_| 0)
                    .await?
                    .context("no requests")?;
                measured.push((side.name, m));
            }
            let qps = |m: &Measured| per_second(m.queries, m.elapsed);
            let peer_qps = measured
                .iter()
                .find(|(side, _)| *side == "influxdb")
                .map(|(_, m)| qps(m));
            for (side, m) in &measured {
                report.push(json!({
                    "panel": name,
                    "side": side,
                    "connections": args.connections,
                    "queries": m.queries,
                    "qps": qps(m),
                    "p50_ms": millis_at(&m.latencies, 0.50),
                    "p99_ms": millis_at(&m.latencies, 0.99),
                    "over_influxdb": peer_qps.map(|p| qps(m) / p),
                }));
            }
        }
    }
    Ok(())
}

/// The start of this minute, ms since the epoch: where the data ends.
pub(super) fn last_whole_minute_ms() -> anyhow::Result<i64> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    Ok(now_ms / 60_000 * 60_000)
}

/// `GET /query` of `q` in `db`, times in ms.
pub(super) fn query_request(
    client: &reqwest::Client,
    endpoints: &Endpoints,
    db: &str,
    q: &str,
) -> reqwest::RequestBuilder {
    let url = format!("{}/query", endpoints.http);
    let request = client
        .get(url)
        .query(&[("db", db), ("q", q), ("epoch", "ms")]);
    authorized(endpoints, request)
}

/// The TSBS rows of `hosts` hosts for `steps` steps from `start_ms`, in
/// line-protocol bodies of 5,000 lines.
pub(super) fn bodies(hosts: usize, steps: usize, start_ms: i64) -> Vec<String> {
    let shift = start_ms * 1_000_000 - tsbs::START_NS;
    tsbs::CpuOnly::new(hosts)
        .bodies(steps, 5_000)
        .into_iter()
        .map(|body| {
            let mut shifted = String::with_capacity(body.len());
            for line in body.lines() {
                let (point, time) = line.rsplit_once(' ').expect("a line ends with its time");
                let time: i64 = time.parse().expect("a generated time");
                shifted.push_str(&format!("{point} {}\n", time + shift));
            }
            shifted
        })
        .collect()
}

/// Writes `bodies` into `db` (created first on InfluxDB, which does not
/// create databases on write); the last is visible when answered.
pub(super) async fn load(
    endpoints: &Endpoints,
    db: &str,
    bodies: &[String],
    create: bool,
) -> anyhow::Result<()> {
    let client = http_client()?;
    if create {
        let url = format!("{}/query", endpoints.http);
        let q = format!("CREATE DATABASE {db}");
        client
            .post(url)
            .form(&[("q", q.as_str())])
            .send()
            .await?
            .error_for_status()?;
    }
    for (i, body) in bodies.iter().enumerate() {
        let durability = if i + 1 == bodies.len() {
            "visible"
        } else {
            "fsync"
        };
        let url = format!("{}/write?db={db}&durability={durability}", endpoints.http);
        let r = authorized(endpoints, client.post(url).body(body.clone()))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("writing into {}: {}", endpoints.http, r.text().await?);
        }
    }
    Ok(())
}

/// One answer, as JSON.
pub(super) async fn answer(request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let r = request.send().await?;
    let status = r.status();
    let text = r.text().await?;
    if !status.is_success() {
        bail!("{status}: {text}");
    }
    Ok(serde_json::from_str(&text)?)
}

/// JSON equal but for floats, equal within a relative 1e-9 (the servers
/// sum in different orders).
pub(super) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        args: Args,
    }

    fn args(flags: &[&str]) -> Args {
        Flags::parse_from(["influxql"].iter().chain(flags)).args
    }

    #[test]
    fn the_default_panels_keep_their_names() {
        let groups = groups(&args(&[]), 1_700_000_040_000);
        let titles: Vec<String> = PANELS
            .iter()
            .map(|(name, _)| groups[0].title(name))
            .collect();
        assert_eq!(
            titles,
            [
                "one host, mean, 1 h @ 1 m",
                "one host, 3 fields, 1 h @ 1 m",
                "stat, last value",
                "fleet, mean by host, 1 h @ 5 m",
                "variable, host names",
            ]
        );
        let q = groups[0].query(PANELS[3].1, 100, 61);
        let end: i64 = 1_700_000_040_000 - 10_000 - 60_000;
        assert!(q.contains(&format!(
            "time >= {}ms AND time <= {end}ms",
            end - 3_600_000
        )));
        assert!(q.contains("GROUP BY time(300s), hostname"), "{q}");
    }

    #[test]
    fn a_week_asks_every_range_now_and_moved_back() {
        let end_ms = 1_700_000_040_000;
        let groups = groups(&args(&["--age", "--hours", "168"]), end_ms);
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "now, 6 h",
                "now, 24 h",
                "now, 7 d",
                "48 h back, 6 h",
                "48 h back, 24 h",
                "48 h back, 7 d"
            ]
        );
        let week_back = &groups[5];
        assert_eq!(
            week_back.title(PANELS[0].0),
            "48 h back, 7 d: one host, mean, 7 d @ 10 m"
        );
        assert_eq!(
            week_back.title(PANELS[3].0),
            "48 h back, 7 d: fleet, mean by host, 7 d @ 14 h"
        );
        let q = week_back.query(PANELS[0].1, 100, 0);
        let end = end_ms - 10_000 - 48 * 3_600_000;
        assert!(
            q.contains(&format!("time <= {end}ms GROUP BY time(600s)")),
            "{q}"
        );
        assert!(
            q.contains(&format!("time >= {}ms", end - 7 * 86_400_000)),
            "{q}"
        );
    }
}
