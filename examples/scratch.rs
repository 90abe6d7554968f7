use chingest::{IngestConfig, Ingestor};
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args().nth(1).unwrap();
    let ing = Ingestor::open(IngestConfig::new(&dir)).await?;
    for q in std::env::args().skip(2) {
        let (rw, q) = match q.strip_prefix("RW:") { Some(q) => (true, q.to_owned()), None => (false, q) };
        let r = if rw { ing.query(&q, "TabSeparated").await } else { ing.query_read_only(&q, "TabSeparated").await };
        match r {
            Ok(out) => println!("OK {q}\n{}", String::from_utf8_lossy(&out[..out.len().min(1500)])),
            Err(e) => println!("ERR {q}\n{e}"),
        }
    }
    ing.close().await?;
    Ok(())
}
