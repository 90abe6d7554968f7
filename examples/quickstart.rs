//! Embeds chingest: opens an engine on `./data/quickstart`, writes InfluxDB
//! line protocol (one line is malformed, to show how rejections look), and
//! prints the rows back with SQL. Run it with `make run`, or with
//! `cargo run -p chingest-examples --example quickstart -- DIR` to keep the
//! data in DIR across runs.

use chingest::{Durability, IngestConfig, Ingestor, Precision, WriteOptions};

const LINES: &str = "\
# Line protocol: measurement,tags fields timestamp
weather,city=Paris,country=FR temperature=18.5,humidity=62i,raining=false 1700000000
weather,city=Lyon,country=FR temperature=21.0,humidity=48i,raining=false 1700000000
weather,city=Paris,country=FR temperature=18.9,humidity=64i,raining=true,note=\"light rain\" 1700000060
weather,city=Lyon,country=FR temperature=oops 1700000060
weather,country=FR,city=Lyon temperature=21.4,humidity=47i,raining=false 1700000060
";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();

    // A directory given on the command line is used as it is; the default one
    // is emptied first so every run prints the same rows.
    let data_dir = match std::env::args().nth(1) {
        Some(dir) => dir,
        None => {
            let dir = "data/quickstart";
            if std::path::Path::new(dir).exists() {
                std::fs::remove_dir_all(dir)?;
            }
            dir.to_owned()
        }
    };
    let ingestor = Ingestor::open(IngestConfig::new(&data_dir)).await?;
    println!(
        "chingest on chDB {} — data in {data_dir}\n",
        chingest::engine_version()
    );

    // `Visible`: return once the rows are queryable, as the query below reads
    // them at once. The default (`Fsync`) returns once they are synced to the
    // write-ahead log, and they are queryable within a second.
    let options = WriteOptions {
        precision: Precision::Seconds,
        durability: Durability::Visible,
        ..WriteOptions::default()
    };
    let outcome = ingestor
        .write_lp("demo", "autogen", LINES.as_bytes(), &options)
        .await?;
    println!(
        "accepted {} lines, rejected {}:",
        outcome.accepted,
        outcome.rejected.len()
    );
    for rejection in &outcome.rejected {
        println!("  {rejection}");
    }

    // Facts live in `demo`.`weather.autogen`; tags in the series table.
    let table = ingestor
        .query_trusted(
            "SELECT time, s.tags['city'] AS city, temperature, humidity, raining, note \
             FROM demo.`weather.autogen` AS f \
             INNER JOIN (SELECT series_id, tags FROM demo._series FINAL) AS s USING series_id \
             WHERE time >= '2023-11-14 22:13:20' \
             ORDER BY time, city",
            "PrettyCompactMonoBlock",
        )
        .await?;
    println!("\n{}", String::from_utf8_lossy(&table));

    let series = ingestor
        .query_trusted(
            "SELECT count() FROM demo._series FINAL WHERE measurement = 'weather'",
            "TabSeparated",
        )
        .await?;
    println!(
        "distinct series of `weather`: {}",
        String::from_utf8_lossy(&series).trim()
    );

    ingestor.close().await?;
    Ok(())
}
