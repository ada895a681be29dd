//! The scale workload's plot: cost per message against retained messages (log scale),
//! one line per operation, written as SVG so it can sit in a note or a pull request.

use crate::scale::Step;
use plotters::prelude::*;

/// One line of the plot: its legend, the figure it draws and its colour.
type Series = (&'static str, fn(&Step) -> f64, RGBColor);

/// Writes the plot of `steps` to `path`.
pub fn scale_svg(path: &std::path::Path, steps: &[Step], title: &str) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let series: [Series; 4] = [
        ("push", |s| s.push_us, RGBColor(31, 119, 180)),
        ("pop", |s| s.pop_us, RGBColor(44, 160, 44)),
        ("ack", |s| s.ack_us, RGBColor(214, 39, 40)),
        (
            "pop, 16 of the partitions written",
            |s| s.sparse_pop_us,
            RGBColor(148, 103, 189),
        ),
    ];
    let x_lo = steps.iter().map(|s| s.retained).min().unwrap_or(1).max(1) as f64;
    let x_hi = (steps.iter().map(|s| s.retained).max().unwrap_or(10) as f64).max(x_lo * 10.0);
    let y_hi = steps
        .iter()
        .flat_map(|s| series.iter().map(move |(_, f, _)| f(s)))
        .filter(|y| y.is_finite())
        .fold(1.0, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_lo / 1.5..x_hi * 1.5).log_scale(), 0.0..y_hi)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("messages retained in the queue")
        .y_desc("µs per message (request time / messages)")
        .draw()
        .map_err(|e| fail(&e))?;
    for (name, f, color) in series {
        let points: Vec<(f64, f64)> = steps
            .iter()
            .map(|s| (s.retained.max(1) as f64, f(s)))
            .filter(|(_, y)| y.is_finite())
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, color.filled())),
            )
            .map_err(|e| fail(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}
