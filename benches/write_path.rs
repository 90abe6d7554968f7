//! The engine end of the write path: one insert of a pre-built batch per
//! iteration, through chdb-rust into a MergeTree, for each of pushit's
//! storage layouts (50k samples per insert) and, in chingest's layout, for
//! each batch size. Tables are emptied before every iteration (untimed), so
//! no merge backlog builds up across iterations. Throughput is in rows.
//!
//! `pushit layouts` and `pushit batch` sweep the same levers over a whole
//! load; these are the per-insert numbers, with criterion's statistics.

use criterion::{BatchSize, Criterion, Throughput};
use pushit::engine::RawConnection;
use pushit::layouts::{Layout, Shape};

const DATABASE: &str = "bench_write_path";

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let conn = RawConnection::open(dir.path()).unwrap();
    let mut criterion = Criterion::default().configure_from_args();

    let shape = Shape {
        series: 1_000,
        timestamps: 200,
        tags: 6,
        fields: 5,
    };
    let mut layouts = criterion.benchmark_group("insert by layout (50k samples)");
    layouts.sample_size(20);
    for layout in Layout::ALL {
        let batch = layout.batches(&shape, 50_000).unwrap().swap_remove(0);
        layouts.throughput(Throughput::Elements(batch.num_rows() as u64));
        bench_inserts(&mut layouts, &conn, layout, &shape, layout.name(), &batch);
    }
    layouts.finish();

    let mut sizes = criterion.benchmark_group("insert by batch size (series_id)");
    sizes.sample_size(10);
    for rows in [5_000, 20_000, 50_000, 200_000] {
        let batch = Layout::SeriesId
            .batches(&shape, rows)
            .unwrap()
            .swap_remove(0);
        sizes.throughput(Throughput::Elements(rows as u64));
        bench_inserts(
            &mut sizes,
            &conn,
            Layout::SeriesId,
            &shape,
            &format!("{rows} rows"),
            &batch,
        );
    }
    sizes.finish();

    criterion.final_summary();
    conn.execute(&[&format!("DROP DATABASE IF EXISTS {DATABASE} SYNC")])
        .unwrap();
}

/// One benchmark: `batch` inserted into `layout`'s table, emptied first.
fn bench_inserts(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    conn: &RawConnection,
    layout: Layout,
    shape: &Shape,
    name: &str,
    batch: &chingest::arrow::array::RecordBatch,
) {
    let tables = layout.tables(DATABASE, shape);
    conn.execute(&[
        &format!("DROP DATABASE IF EXISTS {DATABASE} SYNC"),
        &format!("CREATE DATABASE {DATABASE}"),
    ])
    .unwrap();
    conn.execute(&tables.create.iter().map(String::as_str).collect::<Vec<_>>())
        .unwrap();
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                conn.execute(&[&format!("TRUNCATE TABLE {}", tables.storage)])
                    .unwrap();
                batch.clone()
            },
            |batch| {
                conn.insert(&tables.insert_into, batch).unwrap();
                if let Some(flush) = &tables.flush {
                    conn.execute(&[flush]).unwrap();
                }
            },
            BatchSize::PerIteration,
        )
    });
}
