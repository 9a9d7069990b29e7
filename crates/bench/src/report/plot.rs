//! SVG plots: overload curves, throughput vs fairness, latency CDFs, scaling curves.
//!
//! SVG through `plotters` with only its SVG backend: no font files, no image libraries, no
//! system dependencies (text is laid out with plotters' built-in metrics and left to the
//! viewer's fonts), and the output is text that diffs, embeds in Markdown and opens in any
//! browser. Every plot is a [`line_chart`] of named [`Series`] with a legend; the functions
//! below only fix axes and labels for the four figures the issue asks for:
//!
//! * [`overload_curve`]: carried vs offered load per DUT, with the `carried = offered` diagonal
//!   (Rathore Fig. 4/5, Batalla Fig. 6–9);
//! * [`throughput_vs_fairness`]: `T|J(k)` against Jain's index per N (Batalla Fig. 2–3);
//! * [`latency_cdfs`]: fraction of frames at or below a latency, per DUT/load;
//! * [`scaling_curve`]: throughput against VR count, routes, flows….

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use super::table::si;
use crate::fairness::WorkPointResult;
use crate::latency::LatencySummary;
use crate::trial::Trial;

/// One named line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, drawn in order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from points (sorted by x).
    pub fn new(name: &str, mut points: Vec<(f64, f64)>) -> Self {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        Self {
            name: name.into(),
            points,
        }
    }

    /// Carried (received per second) vs offered load of `trials`, one point per trial.
    pub fn overload(name: &str, trials: &[Trial]) -> Self {
        Self::new(
            name,
            trials
                .iter()
                .map(|t| (t.offered_load, t.carried_rate()))
                .collect(),
        )
    }

    /// Throughput vs J(k) of a work-point sweep.
    pub fn fairness(name: &str, points: &[WorkPointResult]) -> Self {
        Self::new(
            name,
            points.iter().map(|p| (p.jain, p.throughput)).collect(),
        )
    }
}

/// A latency distribution as CDF points `(latency ns, fraction ≤)`.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyCdf {
    /// Legend text, e.g. "vrhost @ 50 % NDR".
    pub name: String,
    /// `(ns, fraction)` in increasing order.
    pub points: Vec<(f64, f64)>,
}

impl LatencyCdf {
    /// From `(percent, ns)` pairs, e.g. a sink's percentile list.
    pub fn from_percentiles(name: &str, percentiles: &[(f64, u64)]) -> Self {
        let mut points: Vec<(f64, f64)> = percentiles
            .iter()
            .map(|&(p, ns)| (ns as f64, p / 100.0))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        Self {
            name: name.into(),
            points,
        }
    }

    /// From a trial's [`LatencySummary`]: its percentiles plus min (0 %) and max (100 %).
    pub fn from_summary(name: &str, s: &LatencySummary) -> Self {
        let mut p: Vec<(f64, u64)> = vec![(0.0, s.min_ns)];
        p.extend(s.percentiles.iter().map(|x| (x.percent, x.ns)));
        p.push((100.0, s.max_ns));
        Self::from_percentiles(name, &p)
    }

    /// From an HDR histogram of latencies in ns: one point per recorded bucket.
    pub fn from_histogram(name: &str, h: &Histogram<u64>) -> Self {
        let total = h.len().max(1) as f64;
        let points = h
            .iter_recorded()
            .map(|v| {
                (
                    h.highest_equivalent(v.value_iterated_to()) as f64,
                    v.count_since_last_iteration() as f64,
                )
            })
            .scan(0.0, |acc, (ns, count)| {
                *acc += count;
                Some((ns, *acc / total))
            })
            .collect();
        Self {
            name: name.into(),
            points,
        }
    }
}

/// Axes and title of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// Caption.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Draw the `y = x` diagonal (labelled "carried = offered").
    pub diagonal: bool,
    /// Y axis from 0 (else from the data's minimum).
    pub y_from_zero: bool,
    /// Size in pixels.
    pub size: (u32, u32),
}

impl ChartSpec {
    /// A chart with this title and axis labels, y from zero, 900×560.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            diagonal: false,
            y_from_zero: true,
            size: (900, 560),
        }
    }
}

/// A plot that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No series has a finite point.
    #[error("plot {title:?}: no data points")]
    NoData { title: String },
    /// plotters failed.
    #[error("plot {title:?}: {message}")]
    Draw { title: String, message: String },
    /// The SVG file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if hi > lo {
        let pad = (hi - lo) * 0.05;
        (lo - pad, hi + pad)
    } else {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo - pad, hi + pad)
    }
}

/// Draw `series` as lines with markers and a legend; returns the SVG text.
pub fn line_chart(spec: &ChartSpec, series: &[Series]) -> Result<String, PlotError> {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().filter(finite).copied())
        .collect();
    if all.is_empty() {
        return Err(PlotError::NoData {
            title: spec.title.clone(),
        });
    }
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for &(x, y) in &all {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if spec.y_from_zero {
        y0 = y0.min(0.0);
    }
    if spec.diagonal {
        y1 = y1.max(x1);
    }
    let (x0, x1) = padded(x0, x1);
    let (y0, y1) = padded(y0, y1);
    let y0 = if spec.y_from_zero { y0.max(0.0) } else { y0 };
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        title: spec.title.clone(),
        message: e.to_string(),
    };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, spec.size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&spec.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(80)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| draw_err(&e))?;
        chart
            .configure_mesh()
            .x_desc(&spec.x_label)
            .y_desc(&spec.y_label)
            .x_label_formatter(&|v| si(*v))
            .y_label_formatter(&|v| si(*v))
            .draw()
            .map_err(|e| draw_err(&e))?;
        if spec.diagonal {
            let grey = RGBColor(160, 160, 160);
            let lo = x0.max(y0);
            let hi = x1.min(y1);
            chart
                .draw_series(LineSeries::new([(lo, lo), (hi, hi)], grey.stroke_width(1)))
                .map_err(|e| draw_err(&e))?
                .label("carried = offered")
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], grey));
        }
        for (i, s) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = s.points.iter().filter(finite).copied().collect();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(|e| draw_err(&e))?
                .label(&s.name)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| draw_err(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| draw_err(&e))?;
        root.present().map_err(|e| draw_err(&e))?;
    }
    Ok(svg)
}

/// Carried vs offered load per DUT, with the diagonal.
pub fn overload_curve(title: &str, series: &[Series]) -> Result<String, PlotError> {
    let spec = ChartSpec {
        diagonal: true,
        ..ChartSpec::new(title, "offered load (frames/s)", "carried load (frames/s)")
    };
    line_chart(&spec, series)
}

/// Throughput at each work point against its Jain's index, one series per N (or DUT).
pub fn throughput_vs_fairness(title: &str, series: &[Series]) -> Result<String, PlotError> {
    line_chart(
        &ChartSpec::new(
            title,
            "Jain's fairness index J(k)",
            "throughput T|J (frames/s)",
        ),
        series,
    )
}

/// Latency CDFs (x in µs).
pub fn latency_cdfs(title: &str, cdfs: &[LatencyCdf]) -> Result<String, PlotError> {
    let series: Vec<Series> = cdfs
        .iter()
        .map(|c| Series {
            name: c.name.clone(),
            points: c.points.iter().map(|&(ns, f)| (ns / 1000.0, f)).collect(),
        })
        .collect();
    line_chart(
        &ChartSpec::new(title, "latency (µs)", "fraction of frames ≤ latency"),
        &series,
    )
}

/// Throughput against a scale parameter (`x_label`: "virtual routers", "routes per VR", …).
pub fn scaling_curve(title: &str, x_label: &str, series: &[Series]) -> Result<String, PlotError> {
    line_chart(
        &ChartSpec::new(title, x_label, "throughput (frames/s)"),
        series,
    )
}

/// Write an SVG produced above to `path`.
pub fn save_svg(path: impl AsRef<Path>, svg: &str) -> Result<(), PlotError> {
    let path = path.as_ref();
    std::fs::write(path, svg).map_err(|source| PlotError::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fairness::{Q_DEFAULT, sweep};
    use crate::search::rfc2544;
    use crate::sim::SimDut;

    fn check_svg(svg: &str, names: &[&str]) {
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.len() > 2000, "only {} bytes", svg.len());
        assert!(
            svg.contains("<polyline") || svg.contains("<path"),
            "no lines drawn"
        );
        assert!(svg.contains("<circle"), "no markers drawn");
        for n in names {
            assert!(svg.contains(n), "series {n:?} missing from the SVG");
        }
    }

    #[test]
    fn overload_curve_from_trials() {
        let sweep_trials = |cap| {
            let mut dut = SimDut::ideal(cap);
            (1..=12)
                .map(|i| {
                    crate::trial::Measurer::trial(
                        &mut dut,
                        i as f64 * 0.25e6,
                        Duration::from_secs(1),
                    )
                    .unwrap()
                })
                .collect::<Vec<_>>()
        };
        let series = [
            Series::overload("vrhost-afxdp", &sweep_trials(2.0e6)),
            Series::overload("kernel", &sweep_trials(1.0e6)),
        ];
        assert_eq!(series[1].points[11], (3.0e6, 1.0e6));
        let svg = overload_curve("64-byte overload", &series).unwrap();
        check_svg(
            &svg,
            &[
                "vrhost-afxdp",
                "kernel",
                "carried = offered",
                "64-byte overload",
                "offered load",
            ],
        );
    }

    #[test]
    fn fairness_plot_from_a_sweep() {
        let rfc = |cap: f64| {
            let s = rfc2544::Rfc2544Settings {
                trial_duration: Duration::from_secs(1),
                ..rfc2544::Rfc2544Settings::new(1e3, 4e6)
            };
            rfc2544::search(&mut SimDut::ideal(cap), &s).map(|r| r.throughput.unwrap_or(0.0))
        };
        let s4 = sweep(4, Q_DEFAULT, |p| rfc(1e6 * (0.5 + 0.5 * p.jain_formula()))).unwrap();
        let s12 = sweep(12, Q_DEFAULT, |p| rfc(1e6 * (0.5 + 0.5 * p.jain_formula()))).unwrap();
        assert_eq!(s12.worst.k, 1);
        let svg = throughput_vs_fairness(
            "work points",
            &[
                Series::fairness("N=4", &s4.points),
                Series::fairness("N=12", &s12.points),
            ],
        )
        .unwrap();
        check_svg(&svg, &["N=4", "N=12", "Jain"]);
    }

    #[test]
    fn latency_cdfs_from_histogram_and_percentiles() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for i in 0..10_000u64 {
            h.record(5_000 + (i % 100) * 50).unwrap();
        }
        let from_h = LatencyCdf::from_histogram("vrhost @ 50% NDR", &h);
        assert!(
            from_h
                .points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
        );
        assert!((from_h.points.last().unwrap().1 - 1.0).abs() < 1e-12);
        let summary = LatencySummary::from_histogram(&h).unwrap();
        let from_s = LatencyCdf::from_summary("kernel @ 50% NDR", &summary);
        assert_eq!(from_s.points.len(), 6);
        assert_eq!(from_s.points[0], (summary.min_ns as f64, 0.0));
        let svg = latency_cdfs("latency", &[from_h, from_s]).unwrap();
        check_svg(&svg, &["vrhost @ 50% NDR", "kernel @ 50% NDR", "µs"]);
    }

    #[test]
    fn scaling_curve_and_files() {
        let s = Series::new("vrhost", vec![(64.0, 1.9e6), (1.0, 2.0e6), (16.0, 1.95e6)]);
        assert_eq!(s.points[0].0, 1.0);
        let svg = scaling_curve(
            "scaling in VRs",
            "virtual routers",
            &[
                s,
                Series::new("kernel-macvlan", vec![(1.0, 1.0e6), (64.0, 0.6e6)]),
            ],
        )
        .unwrap();
        check_svg(&svg, &["vrhost", "kernel-macvlan", "virtual routers"]);
        let path =
            std::env::temp_dir().join(format!("vrhost-bench-{}-scaling.svg", std::process::id()));
        save_svg(&path, &svg).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), svg);
        std::fs::remove_file(&path).unwrap();
        assert!(
            save_svg("/nonexistent/dir/x.svg", &svg)
                .unwrap_err()
                .to_string()
                .starts_with("/nonexistent/dir/x.svg")
        );
    }

    #[test]
    fn degenerate_data() {
        let e = line_chart(
            &ChartSpec::new("empty", "x", "y"),
            &[Series::new("s", vec![])],
        )
        .unwrap_err();
        assert!(matches!(e, PlotError::NoData { .. }), "{e}");
        // One point: the range is padded, not empty.
        let svg = line_chart(
            &ChartSpec::new("one", "x", "y"),
            &[Series::new("single", vec![(5.0, 5.0)])],
        )
        .unwrap();
        check_svg(&svg, &["single"]);
    }
}
