//! Line-protocol writes through the library, checked by reading the rows back
//! from the real engine.

mod support;

use chingest::{Precision, WriteOptions};
use support::{ingestor, run, tsv};

#[test]
fn smoke() {
    run(async {
        let ing = ingestor().await;
        let out = ing
            .write_lp("smoke", "autogen", b"cpu,host=a usage=0.5,n=3i 1700000000000000000\ncpu,host=b usage=1.5 1700000000000000001\n", &WriteOptions::default())
            .await
            .unwrap();
        assert_eq!(out.accepted, 2, "{out:?}");
        let rows = tsv(&ing, "SELECT s.tags['host'], f.usage, f.n FROM smoke.`cpu.autogen` f JOIN smoke._series s USING series_id ORDER BY time").await;
        assert_eq!(rows, "a\t0.5\t3\nb\t1.5\t\\N\n");
        let _ = Precision::Seconds;
    })
}
