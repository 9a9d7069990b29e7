//! Markdown reports with tables and SVG plots, rendered from a [`RunRecord`].
//!
//! A report is a view of a record, never the other way round: everything it shows can be
//! regenerated from the saved JSON. [`Report::from_record`] gives the standard header (tool,
//! machine, cores, settings, notes — including that trials were shortened, when they were) and
//! the table of measurements; the caller adds sections for what it measured, e.g. a work-point
//! table ([`work_point_table`]), a latency table ([`latency_table`]) and plots ([`plot`]) saved
//! next to the Markdown and linked with [`Report::image`].

pub mod plot;
pub mod table;

use std::fmt::Write as _;
use std::path::Path;

use self::table::{Align, Table, ratio, si, si_opt};
use crate::fairness::Sweep;
use crate::latency::{LatencySummary, STANDARD_PERCENTILES};
use crate::record::RunRecord;

/// A Markdown document under construction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    text: String,
}

impl Report {
    /// A report titled `title`.
    pub fn new(title: &str) -> Self {
        Self {
            text: format!("# {title}\n"),
        }
    }

    /// A heading (level 2 or deeper).
    pub fn heading(&mut self, level: usize, text: &str) -> &mut Self {
        let _ = write!(self.text, "\n{} {text}\n", "#".repeat(level.clamp(2, 6)));
        self
    }

    /// A paragraph.
    pub fn paragraph(&mut self, text: &str) -> &mut Self {
        let _ = write!(self.text, "\n{text}\n");
        self
    }

    /// A highlighted note (blockquote), e.g. a warning about shortened trials.
    pub fn note(&mut self, text: &str) -> &mut Self {
        let _ = write!(self.text, "\n> {text}\n");
        self
    }

    /// A table.
    pub fn table(&mut self, t: &Table) -> &mut Self {
        self.text.push('\n');
        self.text += &t.render();
        self
    }

    /// An image (e.g. an SVG saved next to the report), by relative path.
    pub fn image(&mut self, alt: &str, path: &str) -> &mut Self {
        let _ = write!(self.text, "\n![{alt}]({path})\n");
        self
    }

    /// The Markdown text.
    pub fn render(&self) -> &str {
        &self.text
    }

    /// Write the Markdown to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, &self.text)
    }

    /// The standard report of a run: header, notes, settings and every measurement.
    pub fn from_record(r: &RunRecord) -> Self {
        let mut rep = Self::new(&format!("{} run", r.tool.name));
        let mut head = Table::new([("", Align::Left), ("", Align::Left)]);
        head.row(["tool".to_string(), r.tool.describe()]);
        head.row(["machine".to_string(), r.machine.describe()]);
        head.row(["started (Unix s)".to_string(), r.started_unix_s.to_string()]);
        if !r.cores.description.is_empty() {
            head.row(["cores".to_string(), r.cores.description.clone()]);
        }
        for (role, cpus) in &r.cores.map {
            let cpus: Vec<String> = cpus.iter().map(ToString::to_string).collect();
            head.row([format!("core map: {role}"), cpus.join(", ")]);
        }
        rep.table(&head);
        if r.partial {
            rep.note(
                "**Partial run**: interrupted before the end; only what was measured is shown.",
            );
        }
        for n in &r.notes {
            rep.note(n);
        }
        if !r.settings.is_empty() {
            rep.heading(2, "Settings");
            let mut t = Table::new([("setting", Align::Left), ("value", Align::Left)]);
            for (k, v) in &r.settings {
                t.row([k.clone(), v.to_string()]);
            }
            rep.table(&t);
        }
        if !r.duts.is_empty() {
            rep.heading(2, "Devices under test");
            let mut t = Table::new([
                ("DUT", Align::Left),
                ("kind", Align::Left),
                ("setup", Align::Left),
            ]);
            for d in &r.duts {
                let params: Vec<String> =
                    d.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let setup = [d.description.clone(), params.join(" ")]
                    .into_iter()
                    .filter(|s| !s.is_empty());
                t.row([
                    d.name.clone(),
                    d.kind.clone(),
                    setup.collect::<Vec<_>>().join("; "),
                ]);
            }
            rep.table(&t);
        }
        rep.heading(2, "Measurements");
        let mut t = Table::new([
            ("measurement", Align::Left),
            ("DUT", Align::Left),
            ("value", Align::Right),
            ("unit", Align::Left),
            ("repeats", Align::Right),
            ("spread", Align::Right),
            ("trials", Align::Right),
            ("notes", Align::Left),
        ]);
        for m in &r.measurements {
            let s = m.summary();
            t.row([
                m.name.clone(),
                m.dut.clone(),
                si_opt(m.value),
                m.unit.clone(),
                if m.repeats.is_empty() {
                    String::new()
                } else {
                    m.repeats.len().to_string()
                },
                s.and_then(|s| s.spread())
                    .map_or_else(String::new, |x| format!("{:.1} %", x * 100.0)),
                m.trials.len().to_string(),
                m.notes.join("; "),
            ]);
        }
        if t.is_empty() {
            rep.paragraph("No measurement was completed.");
        } else {
            rep.table(&t);
        }
        rep
    }
}

/// Batalla's work points of one N: k, J(k), per-VR shares, throughput, with `T^N` named.
pub fn work_point_table(s: &Sweep) -> Table {
    let mut t = Table::new([
        ("k", Align::Right),
        ("J(k)", Align::Right),
        ("heavy VR share", Align::Right),
        ("light VR share", Align::Right),
        ("T|J(k) (frames/s)", Align::Right),
        ("vs worst", Align::Right),
    ]);
    for p in &s.points {
        let worst = if p.point.k == s.worst.k {
            " **← T^N**"
        } else {
            ""
        };
        t.row([
            p.point.k.to_string(),
            format!("{:.4}", p.jain),
            format!("{:.2} %", p.point.heavy_share() * 100.0),
            format!("{:.3} %", p.point.light_share() * 100.0),
            format!("{}{worst}", si(p.throughput)),
            if s.worst.throughput > 0.0 {
                ratio(p.throughput / s.worst.throughput)
            } else {
                "—".into()
            },
        ]);
    }
    t
}

/// Latency percentiles per row label (e.g. "vrhost @ 50 % NDR"), in µs.
pub fn latency_table(rows: &[(&str, &LatencySummary)]) -> Table {
    let mut cols: Vec<(String, Align)> = vec![("".into(), Align::Left)];
    cols.extend(
        STANDARD_PERCENTILES
            .iter()
            .map(|p| (format!("p{p} (µs)"), Align::Right)),
    );
    cols.push(("max (µs)".into(), Align::Right));
    cols.push(("frames".into(), Align::Right));
    let mut t = Table::new(cols);
    let us = |ns: u64| format!("{:.2}", ns as f64 / 1000.0);
    for (label, s) in rows {
        let mut cells = vec![label.to_string()];
        cells.extend(
            STANDARD_PERCENTILES
                .iter()
                .map(|&p| s.at(p).map_or_else(|| "—".into(), us)),
        );
        cells.push(us(s.max_ns));
        cells.push(s.samples.to_string());
        t.row(cells);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fairness::{Q_DEFAULT, sweep};
    use crate::record::tests::sample;

    #[test]
    fn report_of_a_run() {
        let mut r = sample("abc1234", 2.0e6);
        r.notes
            .push("quick run: 1 s trials, not the 60 s RFC 2544 asks for".into());
        r.partial = true;
        let md = Report::from_record(&r);
        let md = md.render();
        assert!(md.starts_with("# vrbench run\n"), "{md}");
        assert!(md.contains("| tool | vrbench 0.1.0 (abc1234) |"));
        assert!(md.contains("| machine | lab1 (Test CPU, 2 cores, Linux 6.1.0) |"));
        assert!(md.contains("| core map: generator | 1 |"));
        assert!(md.contains("> **Partial run**"));
        assert!(md.contains("> quick run: 1 s trials"));
        assert!(md.contains("| frame_size | 64 |"));
        // The ideal 2 Mfps DUT's RFC 2544 throughput, with the shortened-trial note.
        let line = md
            .lines()
            .find(|l| l.starts_with("| rfc2544/64B | vrhost |"))
            .unwrap();
        assert!(
            line.contains("| 1.99") || line.contains("| 2.000 M"),
            "{line}"
        );
        assert!(line.contains("shorter than the 60 s"), "{line}");
        let line = md
            .lines()
            .find(|l| l.starts_with("| fwd/64B | vrhost |"))
            .unwrap();
        assert!(
            line.contains("| 2.000 M | frames/s | 3 | 15.0 % | 0 |"),
            "{line}"
        );
    }

    #[test]
    fn builder_and_tables() {
        let mut rep = Report::new("t");
        let s = sweep(3, Q_DEFAULT, |p| {
            Ok::<_, std::io::Error>(1e6 * (2.0 - p.jain_formula()))
        })
        .unwrap();
        rep.heading(2, "Work points, N = 3")
            .table(&work_point_table(&s))
            .image("throughput vs J", "wp.svg");
        let md = rep.render();
        assert!(md.contains("\n## Work points, N = 3\n"));
        assert!(md.contains("![throughput vs J](wp.svg)"));
        // Worst at k = 3 (J = 1): T = 1 M.
        assert!(
            md.contains("| 3 | 1.0000 | 33.33 % | 0.000 % | 1.000 M **← T^N** | 1.000× |"),
            "{md}"
        );
        let h = {
            let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
            for ns in [10_000u64, 20_000, 30_000, 40_000] {
                h.record(ns).unwrap();
            }
            crate::latency::LatencySummary::from_histogram(&h).unwrap()
        };
        let t = latency_table(&[("vrhost @ 10 % NDR", &h)]).render();
        assert!(
            t.starts_with("|  | p50 (µs) | p90 (µs) | p99 (µs) | p99.9 (µs) | max (µs) | frames |"),
            "{t}"
        );
        // HDR reports the highest value equivalent to 20 µs at 3 significant digits.
        assert!(
            t.contains("| vrhost @ 10 % NDR | 20.0") && t.trim_end().ends_with("| 4 |"),
            "{t}"
        );
    }
}
