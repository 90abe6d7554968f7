//! `pushit layouts`: the seed's schema table. The same samples inserted on
//! one connection in each layout, then into an `ENGINE = Null` table of the
//! same columns: what is left is the conversion cost, and its share of the
//! insert says how much of the time goes to sorting, compressing and
//! writing parts.

use std::time::{Duration, Instant};

use pushit::layouts::Layout;
use pushit::report::{column, Format};
use serde_json::json;

use super::{insert_layout, per_second};
use crate::{Context, ShapeArgs};

const DATABASE: &str = "pushit_layouts";

/// Flags of `pushit layouts`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    shape: ShapeArgs,
    /// Samples per insert.
    #[arg(long, default_value_t = 50_000)]
    batch_samples: usize,
}

/// Runs the sweep and prints its report.
pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let shape = args.shape.shape();
    let conn = ctx.connect()?;
    let mut report = ctx.report(
        "layouts",
        vec![
            column("Layout", "layout", Format::Text),
            column("samples/s", "samples_per_s", Format::Count),
            column("rows/s", "rows_per_s", Format::Count),
            column("convert share", "convert_share", Format::Percent),
            column("on-disk", "bytes_on_disk", Format::Mib),
            column("parts", "parts", Format::Count),
            column("run", "run", Format::Text),
        ],
    );
    for layout in Layout::ALL {
        ctx.progress(format!("layouts: {} — building batches", layout.name()));
        let batches = layout.batches(&shape, args.batch_samples)?;
        let rows = shape.samples() * layout.rows_per_sample(&shape);
        let tables = layout.tables(DATABASE, &shape);
        ctx.progress(format!(
            "layouts: {} — inserting {rows} rows",
            layout.name()
        ));
        let measured = ctx.measure(|| {
            let elapsed = insert_layout(ctx, &conn, DATABASE, &tables, &batches, rows)?;
            let (parts, bytes) = conn.parts(DATABASE, &tables.storage_name)?;
            let started = Instant::now();
            for batch in &batches {
                conn.insert(&tables.null_sink, batch.clone())?;
            }
            let conversion: Duration = started.elapsed();
            Ok((elapsed, (parts, bytes, conversion)))
        })?;
        for m in measured {
            let (parts, bytes, conversion) = m.extra;
            report.push(json!({
                "layout": layout.name(),
                "samples": shape.samples(),
                "rows": rows,
                "batch_samples": args.batch_samples,
                "seconds": m.elapsed.as_secs_f64(),
                "samples_per_s": per_second(shape.samples(), m.elapsed),
                "rows_per_s": per_second(rows, m.elapsed),
                "convert_share": conversion.as_secs_f64() / m.elapsed.as_secs_f64(),
                "bytes_on_disk": bytes,
                "parts": parts,
                "run": m.label,
            }));
        }
    }
    conn.execute(&[&format!("DROP DATABASE IF EXISTS {DATABASE} SYNC")])?;
    report.finish();
    Ok(())
}
