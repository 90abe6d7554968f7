//! `pushit batch`: rows per insert, swept on one connection into
//! chingest's fact table (the series_id layout, straight to the MergeTree).
//! Every size inserts the same samples; only the number of statements
//! changes.

use pushit::layouts::Layout;
use pushit::report::{column, Format};
use serde_json::json;

use super::{insert_layout, per_second};
use crate::{Context, ShapeArgs};

const DATABASE: &str = "pushit_batch";

/// Flags of `pushit batch`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    shape: ShapeArgs,
    /// Rows per insert, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "5000,20000,50000,200000,1000000"
    )]
    sizes: Vec<usize>,
}

/// Runs the sweep and prints its report.
pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let shape = args.shape.shape();
    let layout = Layout::SeriesId;
    let tables = layout.tables(DATABASE, &shape);
    let conn = ctx.connect()?;
    let mut report = ctx.report(
        "batch",
        vec![
            column("rows/insert", "batch_rows", Format::Count),
            column("inserts", "inserts", Format::Count),
            column("rows/s", "rows_per_s", Format::Count),
            column("samples/s", "samples_per_s", Format::Count),
            column("parts", "parts", Format::Count),
            column("run", "run", Format::Text),
        ],
    );
    let rows = shape.samples();
    for &size in &args.sizes {
        ctx.progress(format!("batch: {size} rows per insert"));
        let batches = layout.batches(&shape, size)?;
        let measured = ctx.measure(|| {
            let elapsed = insert_layout(ctx, &conn, DATABASE, &tables, &batches, rows)?;
            Ok((elapsed, conn.parts(DATABASE, &tables.storage_name)?.0))
        })?;
        for m in measured {
            report.push(json!({
                "batch_rows": size.min(rows),
                "inserts": batches.len(),
                "rows": rows,
                "seconds": m.elapsed.as_secs_f64(),
                "rows_per_s": per_second(rows, m.elapsed),
                "samples_per_s": per_second(rows, m.elapsed),
                "parts": m.extra,
                "run": m.label,
            }));
        }
    }
    conn.execute(&[&format!("DROP DATABASE IF EXISTS {DATABASE} SYNC")])?;
    report.finish();
    Ok(())
}
