// scratch (not committed): run a script of SQL against a chDB path.
// Lines: `SQL;` executes; `BENCH <n> <threads> <sql>` times n queries per thread.
use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = format!("--path={}", args[1]);
    let script = std::fs::read_to_string(&args[2]).unwrap();
    let extra: Vec<String> = args[3..].to_vec();
    let mut cargs = vec![path.as_str()];
    cargs.extend(extra.iter().map(String::as_str));
    let conn = Connection::open(&cargs).unwrap();
    for line in script.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("--") { continue; }
        if let Some(rest) = line.strip_prefix("BENCH ") {
            let mut it = rest.splitn(3, ' ');
            let n: usize = it.next().unwrap().parse().unwrap();
            let threads: usize = it.next().unwrap().parse().unwrap();
            let sql = it.next().unwrap().to_string();
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    let sql = &sql; let cargs = &cargs;
                    s.spawn(move || {
                        let c = Connection::open(cargs).unwrap();
                        for _ in 0..n { c.query(sql, OutputFormat::TabSeparated).unwrap(); }
                    });
                }
            });
            let e = t.elapsed().as_secs_f64();
            let total = (n * threads) as f64;
            println!("{:>8.0} qps {:>7.3} ms/q  {}", total / e, e * 1000.0 / n as f64, sql);
        } else {
            let t = Instant::now();
            match conn.query(line, OutputFormat::TabSeparated) {
                Ok(r) => { let s = r.data_utf8_lossy(); let s: String = s.chars().take(400).collect(); println!("[{:.3}s] {}\n{}", t.elapsed().as_secs_f64(), &line[..line.len().min(100)], s.trim_end()); }
                Err(e) => println!("ERR {line}: {e}"),
            }
        }
    }
}
