//! SVG charts: the scaling sweeps (rows/s against workers, one line per
//! arm) and grouped bars (`pushit query`: QPS per query, HTTP and engine).
//! SVG needs no fonts or system libraries, so a chart can be drawn on any
//! machine pushit runs on.

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

/// One group of bars: a label and its (series, value) bars.
#[derive(Debug, Clone)]
pub struct BarGroup {
    /// The group's label on the x axis.
    pub label: String,
    /// (series, value), the same series in every group, in one order.
    pub bars: Vec<(String, f64)>,
}

/// Draws `groups` as grouped bars (one color per series) in an SVG file at
/// `path`, with the y axis logarithmic: the values span orders of magnitude.
pub fn bars_svg(path: &Path, title: &str, y_desc: &str, groups: &[BarGroup]) -> Result<(), Error> {
    let chart_error = |e: &dyn std::fmt::Display| Error::Chart(format!("{}: {e}", path.display()));
    let max = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.1))
        .fold(1.0f64, f64::max);
    let series = groups.first().map_or(0, |g| g.bars.len()).max(1);
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| chart_error(&e))?;
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..groups.len() as f64, (0.5..max * 2.0).log_scale())
        .map_err(|e| chart_error(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&|x| {
            // Labels at the middle of each group only.
            let i = x.floor() as usize;
            match (x - x.floor() - 0.5).abs() < 1e-6 {
                true => labels.get(i).cloned().unwrap_or_default(),
                false => String::new(),
            }
        })
        .y_desc(y_desc)
        .draw()
        .map_err(|e| chart_error(&e))?;
    let width = 0.8 / series as f64;
    for s in 0..series {
        let color = COLORS[s % COLORS.len()];
        let name = groups
            .first()
            .and_then(|g| g.bars.get(s))
            .map_or(String::new(), |b| b.0.clone());
        chart
            .draw_series(groups.iter().enumerate().filter_map(|(i, g)| {
                let value = g.bars.get(s)?.1.max(0.5);
                let left = i as f64 + 0.1 + s as f64 * width;
                Some(Rectangle::new(
                    [(left, 0.5), (left + width, value)],
                    color.filled(),
                ))
            }))
            .map_err(|e| chart_error(&e))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| chart_error(&e))?;
    root.present().map_err(|e| chart_error(&e))?;
    Ok(())
}
