//! `pushit flush`: small, frequent flushes, as production ingest makes
//! them. Each flush is one timestamp of every series (1,000 rows by
//! default), inserted straight into the MergeTree or into a Buffer
//! table in front of it; once into one table, once fanned out over
//! retention policies × measurements (each flush split across the tables).
//! The Buffer path's timed region ends when the Buffer tables have written
//! every row to their MergeTrees.

use std::time::Instant;

use chingest::layout::schema::TableSchema;
use pushit::layouts::{buffer_table, chingest_tables, Layout, Shape};
use pushit::report::{column, Format};
use serde_json::json;

use super::{check_stored, fresh_database, per_second, settle};
use crate::Context;

const DATABASE: &str = "pushit_flush";

/// Flags of `pushit flush`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Flushes per run.
    #[arg(long, default_value_t = 1_000)]
    flushes: usize,
    /// Rows per flush (one timestamp of this many series).
    #[arg(long, default_value_t = 1_000)]
    flush_rows: usize,
    /// Retention policies in the fan-out.
    #[arg(long, default_value_t = 2)]
    retention_policies: usize,
    /// Measurements per retention policy in the fan-out.
    #[arg(long, default_value_t = 4)]
    measurements: usize,
    /// Tags per series.
    #[arg(long, default_value_t = 6)]
    tags: usize,
    /// Integer fields per row.
    #[arg(long, default_value_t = 5)]
    fields: usize,
}

/// Runs both cases on both paths and prints the report.
pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let shape = Shape {
        series: args.flush_rows.max(1),
        timestamps: args.flushes.max(1),
        tags: args.tags.max(1),
        fields: args.fields.max(1),
    };
    ctx.progress(format!("flush: building {} flushes", shape.timestamps));
    let flushes = Layout::SeriesId.batches(&shape, shape.series)?;
    let rows = shape.samples();
    let conn = ctx.connect()?;
    let mut report = ctx.report(
        "flush",
        vec![
            column("case", "case", Format::Text),
            column("path", "path", Format::Text),
            column("tables", "tables", Format::Count),
            column("flushes", "flushes", Format::Count),
            column("rows/s", "rows_per_s", Format::Count),
            column("parts", "parts", Format::Count),
            column("vs direct", "vs_direct", Format::Times),
            column("run", "run", Format::Text),
        ],
    );
    let fan_out = args.retention_policies.max(1) * args.measurements.max(1);
    let cases = [
        ("one table", 1, 1),
        (
            "fan-out",
            args.retention_policies.max(1),
            args.measurements.max(1),
        ),
    ];
    for (case, rps, measurements) in cases {
        let tables: Vec<TableSchema> = (0..rps)
            .flat_map(|rp| (0..measurements).map(move |m| (rp, m)))
            .map(|(rp, m)| shape.fact_schema(DATABASE, &format!("rp{rp}"), &format!("m{m}")))
            .collect();
        let mut direct_rate = None;
        for path in ["direct", "buffer"] {
            ctx.progress(format!("flush: {case}, {path}, {} tables", tables.len()));
            let measured = ctx.measure(|| {
                fresh_database(&conn, DATABASE)?;
                let mut targets = Vec::new();
                for schema in &tables {
                    let mut create = chingest_tables(schema);
                    if path == "buffer" {
                        let (buffer, sql) = buffer_table(schema);
                        create.push(sql);
                        targets.push(buffer);
                    } else {
                        targets.push(schema.names.storage_table.clone());
                    }
                    conn.execute(&create.iter().map(String::as_str).collect::<Vec<_>>())?;
                }
                let slice = flushes[0].num_rows().div_ceil(targets.len());
                settle(ctx, &conn)?;
                let started = Instant::now();
                for flush in &flushes {
                    for (i, table) in targets.iter().enumerate() {
                        let offset = (i * slice).min(flush.num_rows());
                        let len = slice.min(flush.num_rows() - offset);
                        if len > 0 {
                            conn.insert(table, flush.slice(offset, len))?;
                        }
                    }
                }
                if path == "buffer" {
                    for buffer in &targets {
                        conn.execute(&[&format!("OPTIMIZE TABLE {buffer}")])?;
                    }
                }
                let elapsed = started.elapsed();
                let mut stored = 0;
                let mut parts = 0;
                for schema in &tables {
                    stored += conn.count(&schema.names.storage_table)?;
                    parts += conn.parts(DATABASE, &schema.names.storage_name)?.0;
                }
                let what = format!("{} tables of {DATABASE}", tables.len());
                check_stored(&what, rows as u64, stored)?;
                Ok((elapsed, parts))
            })?;
            for m in measured {
                let rate = per_second(rows, m.elapsed);
                let vs_direct = if m.label == "warm" {
                    rate / *direct_rate.get_or_insert(rate)
                } else {
                    f64::NAN
                };
                report.push(json!({
                    "case": case,
                    "path": path,
                    "tables": tables.len(),
                    "fan_out": if case == "fan-out" { fan_out } else { 1 },
                    "flushes": flushes.len(),
                    "flush_rows": shape.series,
                    "rows": rows,
                    "seconds": m.elapsed.as_secs_f64(),
                    "rows_per_s": rate,
                    "samples_per_s": rate,
                    "parts": m.extra,
                    "vs_direct": if vs_direct.is_nan() { serde_json::Value::Null } else { vs_direct.into() },
                    "run": m.label,
                }));
            }
        }
    }
    conn.execute(&[&format!("DROP DATABASE IF EXISTS {DATABASE} SYNC")])?;
    report.finish();
    Ok(())
}
