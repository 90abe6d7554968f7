//! SVG charts of the scaling sweeps: rows/s against workers, one line per
//! arm. SVG needs no fonts or system libraries, so a chart can be drawn on
//! any machine pushit runs on.

use std::path::Path;

use plotters::prelude::*;

use crate::Error;

/// One line of the chart: an arm's (workers, rows/s) points.
#[derive(Debug, Clone)]
pub struct Curve {
    /// The legend.
    pub label: String,
    /// (workers, rows/s), in sweep order.
    pub points: Vec<(u32, f64)>,
}

const COLORS: [RGBColor; 4] = [BLUE, RED, GREEN, MAGENTA];

/// Draws `curves` as an SVG file at `path`.
pub fn scaling_svg(path: &Path, title: &str, curves: &[Curve]) -> Result<(), Error> {
    let chart_error = |e: &dyn std::fmt::Display| Error::Chart(format!("{}: {e}", path.display()));
    let max_workers = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .max()
        .unwrap_or(1);
    let max_rate = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1 / 1e6))
        .fold(0.0f64, f64::max);

    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| chart_error(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0u32..max_workers + 1, 0.0..max_rate * 1.15 + 0.1)
        .map_err(|e| chart_error(&e))?;
    chart
        .configure_mesh()
        .x_desc("workers (connections)")
        .y_desc("million rows/s")
        .draw()
        .map_err(|e| chart_error(&e))?;
    for (curve, color) in curves.iter().zip(COLORS.iter().cycle()) {
        let points: Vec<(u32, f64)> = curve.points.iter().map(|&(w, r)| (w, r / 1e6)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| chart_error(&e))?
            .label(curve.label.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, color.filled())),
            )
            .map_err(|e| chart_error(&e))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| chart_error(&e))?;
    root.present().map_err(|e| chart_error(&e))?;
    Ok(())
}
