//! The HTTP write path: one `POST /write` of TSBS cpu line protocol per
//! iteration to an in-process chingest server on loopback, acknowledged
//! after its rows are committed (parse, series, Arrow, group commit,
//! insert). Bodies of 500 and 5,000 lines; throughput in lines.
//!
//! `pushit http` runs the whole load over several connections against the
//! raw engine; this is the per-request cost with criterion's statistics.

use criterion::{Criterion, Throughput};

use chingest_server::config::ServerConfig;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = runtime
        .block_on(chingest_server::start(ServerConfig {
            data_dir: dir.path().to_owned(),
            http_addr: "127.0.0.1:0".parse().unwrap(),
            grpc_addr: "127.0.0.1:0".parse().unwrap(),
            clickhouse_http_addr: None,
            log: "warn".into(),
            ..ServerConfig::default()
        }))
        .unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://{}/write?db=bench", server.addr);
    let post = |body: String| {
        runtime.block_on(async {
            let response = client.post(&url).body(body).send().await.unwrap();
            assert_eq!(response.status(), 204);
        })
    };
    runtime.block_on(async {
        let ready = format!("http://{}/ready", server.addr);
        while !client
            .get(&ready)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    });
    // Creates the database, the table and the 1,000 series.
    post(tsbs::CpuOnly::new(1_000).lines(0..1));

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("POST /write");
    group.sample_size(20);
    for lines in [500, 5_000] {
        // Every iteration posts the next timestamps of the same hosts.
        let mut generator = tsbs::CpuOnly::new(lines.min(1_000));
        let steps = (lines / 1_000).max(1);
        let mut step = 1;
        group.throughput(Throughput::Elements(lines as u64));
        group.bench_function(format!("{lines}-line bodies"), |b| {
            b.iter_batched(
                || {
                    step += steps;
                    generator.lines(step..step + steps)
                },
                post,
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
    criterion.final_summary();
    runtime.block_on(server.shutdown()).unwrap();
}
