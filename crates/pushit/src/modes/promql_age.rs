//! `pushit promql --age`: the dashboard's panels over data of every age.
//! The data are the dashboard's hosts (promql_dashboard.rs) over `--hours`
//! (a week: `--hours 168`). The dashboard's time picker is set to 6 h,
//! 24 h and 7 d (each at most the data), and each range is asked at two
//! positions: *now*, its end moving forward a step a request over the
//! data's last hour, as an auto-refreshing dashboard's does, and `--back`
//! hours back (48 by default: past the 26 h of recent samples), as a zoom
//! into an earlier incident does. Steps are Grafana's for a panel of about
//! 1,000 points (its `roundInterval`: 20 s, 1 m, 10 m), `rate` windows its
//! `$__rate_interval` (the step plus a scrape, at least four scrapes).
//!
//! Every server is first asked each group's refresh (every panel of one
//! range at once) right after a restart with the kernel's page cache
//! emptied: cold. Then, warm, each panel by `--connections` clients for
//! `--seconds`, and each group's whole refreshes. chingest runs as a child
//! process (its release binary) so that it can be restarted, and is asked
//! warm twice: with its result cache as shipped, and restarted without it
//! (`chingest-uncached`).

use std::time::Instant;

use anyhow::Context as _;

use super::grafana::{rate_interval, step, BACK_HOURS, RANGES};
use super::peers::{self, Peer};
use super::promql_dashboard::{instance, rotation, span, Panel, Shape, Window, PANELS};
use super::promql_data::{Data, INTERVAL_MS};
use super::promql_measure::{
    answer_size, ask_all, chingest_memory, load_chingest, peer_memory, report, report_memory,
    Answered, Args, PeerToStart,
};
use super::promql_query::{Load, Query, Target};
use super::query::{ask, Measured};
use super::server::{authorized, http_client};
use crate::Context;

/// The panels of one range at one position.
struct Group {
    /// e.g. `now, 24 h` or `48 h back, 7 d`.
    name: String,
    panels: Vec<Query>,
}

impl Group {
    /// Its refreshes: every panel's request r at once.
    fn refresh(&self, target: Option<Target>) -> Query {
        let requests = (0..self.panels[0].requests.len())
            .flat_map(|r| {
                self.panels
                    .iter()
                    .map(move |panel| panel.requests[r].clone())
            })
            .collect();
        Query {
            name: format!("{}: refresh of the {} panels", self.name, self.panels.len()),
            requests,
            round: self.panels.len(),
            load: Load::Rounds,
            target,
        }
    }
}

/// The groups over `data` of `hosts` hosts: each range of [`RANGES`] no
/// longer than the data, now and `back_hours` back. The stat panel, an
/// instant query, is asked once a position (with its shortest range).
fn groups(data: &Data, hosts: usize, back_hours: usize) -> Vec<Group> {
    let hours = data.scrapes as i64 * INTERVAL_MS / 3_600_000;
    let ranges: Vec<i64> = RANGES
        .into_iter()
        .filter(|&seconds| seconds <= hours * 3_600)
        .collect();
    let mut groups = Vec::new();
    for back in [0, back_hours] {
        let position = match back {
            0 => "now".to_owned(),
            back => format!("{back} h back"),
        };
        // The last hour of the position, its ends moving forward.
        let last_end = data.end_ms() / 1000 - back as i64 * 3_600;
        for (r, &seconds) in ranges.iter().enumerate() {
            let step = step(seconds);
            let panels = PANELS
                .iter()
                .filter(|panel| panel.shape != Shape::Instant || r == 0)
                .map(|panel| panel_query(panel, hosts, last_end, seconds, step))
                .collect();
            groups.push(Group {
                name: format!("{position}, {}", span(seconds)),
                panels,
            });
            let group = groups.last_mut().expect("just pushed");
            for panel in &mut group.panels {
                panel.name = format!("{}: {}", group.name, panel.name);
            }
        }
    }
    groups
}

/// `panel` over `seconds` at `step`: request k asks host k mod `hosts`,
/// its range ending k steps after the hour before `last_end`, round and
/// round.
fn panel_query(panel: &Panel, hosts: usize, last_end: i64, seconds: i64, step: i64) -> Query {
    let requests = (0..rotation(hosts))
        .map(|k| {
            let window = Window {
                end: last_end - 3_600 + (k as i64 * step) % 3_600,
                seconds,
                step,
                rate: rate_interval(step),
            };
            (panel.ask)(&instance(k % hosts), &window)
        })
        .collect();
    Query {
        name: panel.title(seconds, step),
        requests,
        round: 1,
        load: Load::Concurrent,
        target: Some(Target::UncachedPeer),
    }
}

/// One server's cold refreshes: before each, a restart (with `flags`
/// added to its own) and the page cache emptied; then its first refresh,
/// every request at once, as Grafana sends a dashboard's.
async fn ask_cold(
    ctx: &Context,
    server: &mut Peer,
    name: &str,
    db: Option<&str>,
    refreshes: &[Query],
) -> anyhow::Result<Vec<Answered>> {
    let mut answers = Vec::new();
    for refresh in refreshes {
        let emptied = server.restart(&[]).await?;
        server.wait_idle(ctx).await?;
        ctx.progress(format!(
            "promql: {name}: cold ({}): {}",
            match emptied {
                true => "restarted, page cache emptied",
                false => "restarted; the page cache kept (not root)",
            },
            refresh.name
        ));
        let endpoints = server.endpoints();
        let client = http_client()?;
        let started = Instant::now();
        let mut asked = Vec::new();
        for request in refresh.requests.iter().take(refresh.round) {
            let get = authorized(&endpoints, client.get(request.url(&endpoints, db)?));
            asked.push((request, tokio::spawn(ask(get))));
        }
        let (mut size, mut bytes) = ((0, 0), 0);
        for (request, answer) in asked {
            let (_, body) = answer.await??;
            let (series, points) =
                answer_size(&body).with_context(|| format!("{name}: {}", request.text()))?;
            size = (size.0 + series, size.1 + points);
            bytes += body.len();
        }
        let took = started.elapsed();
        let measured = Measured::gather(vec![(vec![took], 0, bytes)], took);
        answers.push(Answered { size, measured });
    }
    Ok(answers)
}

/// The age load: chingest (the binary at `--chingest`, or the one beside
/// pushit) and the peers asked; reports the cold refreshes, the warm
/// panels and refreshes, and memory.
pub(super) fn run(ctx: &Context, args: &Args, data: &Data) -> anyhow::Result<()> {
    let binary = match &args.chingest {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("chingest"),
    };
    let groups = groups(data, args.hosts, args.back.unwrap_or(BACK_HOURS));
    let cold: Vec<Query> = groups.iter().map(|group| group.refresh(None)).collect();
    let warm: Vec<Query> = groups
        .iter()
        .flat_map(|group| {
            let refresh = group.refresh(Some(Target::UncachedPeer));
            group.panels.iter().cloned().chain([refresh])
        })
        .collect();
    let db = format!("pushit_promql_{}", std::process::id());
    let runtime = tokio::runtime::Runtime::new()?;
    let (mut cold_answers, mut warm_answers, mut memory) = (Vec::new(), Vec::new(), Vec::new());
    runtime.block_on(async {
        let mut server = peers::chingest(&binary).await?;
        load_chingest(ctx, &server.endpoints(), &db, data.requests(), data).await?;
        server.wait_idle(ctx).await?;
        let db = Some(db.as_str());
        cold_answers.push((
            "chingest",
            ask_cold(ctx, &mut server, "chingest", db, &cold).await?,
        ));
        let endpoints = server.endpoints();
        let answers = ask_all(ctx, args, "chingest", &endpoints, db, &warm).await?;
        warm_answers.push(("chingest", answers));
        memory.push(chingest_memory(&endpoints, "chingest").await?);
        let uncached = server.dir().join("uncached.toml");
        std::fs::write(&uncached, "[promql]\nresult_cache_max_bytes = 0\n")?;
        server
            .restart(&["--config".to_owned(), uncached.display().to_string()])
            .await?;
        server.wait_idle(ctx).await?;
        let name = "chingest-uncached";
        let answers = ask_all(ctx, args, name, &endpoints, db, &warm).await?;
        warm_answers.push((name, answers));
        memory.push(chingest_memory(&endpoints, name).await?);
        anyhow::Ok(())
    })?;
    for peer in PeerToStart::of(args) {
        let name = peer.name();
        runtime.block_on(async {
            let mut server = peer.start(ctx, data).await?;
            // Without its response cache VictoriaMetrics starts as cold.
            if name != "victoriametrics-uncached" {
                let answers = ask_cold(ctx, &mut server, name, None, &cold).await?;
                cold_answers.push((name, answers));
            }
            let answers = ask_all(ctx, args, name, &server.endpoints(), None, &warm).await?;
            warm_answers.push((name, answers));
            memory.push(peer_memory(name, &server).await);
            anyhow::Ok(())
        })?;
    }
    report(ctx, args, "promql-age-cold", &cold, &cold_answers)?;
    report(ctx, args, "promql", &warm, &warm_answers)?;
    report_memory(ctx, &memory, data.series.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of the data's range (s) a request asks about.
    fn end_of(query: &Query, k: usize) -> i64 {
        let params = &query.requests[k].params;
        let (_, end) = params
            .iter()
            .find(|(name, _)| *name == "end" || *name == "time")
            .expect("an end");
        end.parse().expect("seconds")
    }

    #[test]
    fn a_week_asks_every_range_now_and_moved_back() {
        let end_s = 1_700_000_000 / 3_600 * 3_600;
        let data = Data::ending(168 * 240, end_s * 1000);
        let groups = groups(&data, 20, 48);
        let names: Vec<&str> = groups.iter().map(|group| group.name.as_str()).collect();
        let expected = [
            "now, 6 h",
            "now, 24 h",
            "now, 7 d",
            "48 h back, 6 h",
            "48 h back, 24 h",
            "48 h back, 7 d",
        ];
        assert_eq!(names, expected);
        for (g, group) in groups.iter().enumerate() {
            // The stat panel once a position.
            assert_eq!(group.panels.len(), if g % 3 == 0 { 8 } else { 7 });
            let last_end = end_s - if g < 3 { 0 } else { 48 * 3_600 };
            for panel in &group.panels {
                assert!(panel.name.starts_with(&group.name), "{}", panel.name);
                let ends: Vec<i64> = (0..panel.requests.len())
                    .map(|k| end_of(panel, k))
                    .collect();
                assert_eq!(ends[0], last_end - 3_600, "{}", panel.name);
                assert!(ends
                    .iter()
                    .all(|end| (last_end - 3_600..last_end).contains(end)));
                // Forward, a step a request, until the hour wraps.
                let step = step(RANGES[g % 3]);
                assert!(ends.iter().all(|end| end % step == 0), "{}", panel.name);
                assert_eq!(ends[1] - ends[0], step % 3_600, "{}", panel.name);
            }
            let refresh = group.refresh(None);
            assert_eq!(refresh.round, group.panels.len());
            assert_eq!(
                refresh.requests[group.panels.len() + 2].text(),
                group.panels[2].requests[1].text()
            );
        }
        let fleet = &groups[2].panels[4];
        assert_eq!(fleet.name, "now, 7 d: fleet: cpu by host, 7 d @ 600 s");
        let text = fleet.requests[0].text();
        assert!(text.contains("[615s]"), "{text}");
        assert!(text.contains(&format!("start={}", end_s - 3_600 - 7 * 86_400)));
    }

    #[test]
    fn a_day_of_data_asks_only_the_ranges_it_holds() {
        let data = Data::ending(24 * 240, 1_700_000_000_000);
        let names: Vec<String> = groups(&data, 3, 12)
            .into_iter()
            .map(|group| group.name)
            .collect();
        assert_eq!(
            names,
            ["now, 6 h", "now, 24 h", "12 h back, 6 h", "12 h back, 24 h"]
        );
    }
}
