//! `vrbench compare A.json B.json`: two runs side by side, as Markdown.
//!
//! Measurements are matched by name and DUT; each matched pair gets a `B / A` ratio. Two warnings
//! are part of the output, not left to the reader: comparing *separate* runs on these machines
//! is weak evidence (they swing up to 2× between runs — a comparison worth stating is a ratio
//! measured within one interleaved run), and runs from different machines, kernels or tool
//! versions compare those differences too.

use std::fmt::Write as _;

use super::{Measurement, RunRecord};
use crate::report::table::{Align, Table, ratio, si_opt};

/// Compare two runs; the Markdown names them "A" and "B".
pub fn compare(a: &RunRecord, b: &RunRecord) -> String {
    compare_labeled(a, "A", b, "B")
}

/// Compare two runs, naming them `la` and `lb` (e.g. their file names).
pub fn compare_labeled(a: &RunRecord, la: &str, b: &RunRecord, lb: &str) -> String {
    let mut s = String::from("# Run comparison\n\n");
    let mut head = Table::new([("", Align::Left), (la, Align::Left), (lb, Align::Left)]);
    head.row(["tool".to_string(), a.tool.describe(), b.tool.describe()]);
    head.row([
        "machine".to_string(),
        a.machine.describe(),
        b.machine.describe(),
    ]);
    head.row([
        "started (Unix s)".to_string(),
        a.started_unix_s.to_string(),
        b.started_unix_s.to_string(),
    ]);
    head.row([
        "cores".to_string(),
        a.cores.description.clone(),
        b.cores.description.clone(),
    ]);
    let status = |r: &RunRecord| {
        if r.partial {
            "partial (interrupted)"
        } else {
            "complete"
        }
    };
    head.row(["status", status(a), status(b)]);
    s += &head.render();
    s += "\n> These are two separate runs. On these machines throughput swings up to 2× between \
          runs; a ratio measured within one run with interleaved trials is the reliable \
          comparison.\n";
    if a.machine != b.machine {
        s += "> **The runs come from different machines** (or kernels): the ratios compare the \
              machines too.\n";
    }
    if a.tool != b.tool {
        s += "> The runs were made by different vrbench builds.\n";
    }

    let key = |m: &Measurement| (m.name.clone(), m.dut.clone());
    let find = |r: &'_ RunRecord, k: &(String, String)| {
        r.measurements.iter().find(|m| key(m) == *k).cloned()
    };
    let ratio_header = format!("{lb} / {la}");
    let mut t = Table::new([
        ("measurement", Align::Left),
        ("DUT", Align::Left),
        ("unit", Align::Left),
        (la, Align::Right),
        (lb, Align::Right),
        (ratio_header.as_str(), Align::Right),
    ]);
    let mut only_a = Vec::new();
    for ma in &a.measurements {
        match find(b, &key(ma)) {
            Some(mb) => {
                let r = match (ma.value, mb.value) {
                    (Some(x), Some(y)) if x != 0.0 => ratio(y / x),
                    _ => "—".to_string(),
                };
                t.row([
                    ma.name.clone(),
                    ma.dut.clone(),
                    ma.unit.clone(),
                    cell(ma),
                    cell(&mb),
                    r,
                ]);
            }
            None => only_a.push(ma),
        }
    }
    let only_b: Vec<&Measurement> = b
        .measurements
        .iter()
        .filter(|m| find(a, &key(m)).is_none())
        .collect();
    s += "\n## Measurements in both runs\n\n";
    if t.is_empty() {
        s += "None: the runs share no measurement (name and DUT).\n";
    } else {
        s += &t.render();
    }
    for (label, list) in [(la, only_a), (lb, only_b)] {
        if !list.is_empty() {
            let _ = write!(s, "\n## Only in {label}\n\n");
            for m in list {
                let _ = writeln!(
                    s,
                    "- {} ({}): {} {}",
                    m.name,
                    m.dut,
                    si_opt(m.value),
                    m.unit
                );
            }
        }
    }
    s
}

/// The value, with the spread of its repeats when there are several.
fn cell(m: &Measurement) -> String {
    let v = si_opt(m.value);
    match m
        .summary()
        .and_then(|s| if s.n > 1 { s.spread() } else { None })
    {
        Some(spread) => format!(
            "{v} (n={}, spread {:.1} %)",
            m.repeats.len(),
            spread * 100.0
        ),
        None => v,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{machine, sample};
    use super::*;

    #[test]
    fn side_by_side_with_ratios() {
        let a = sample("aaaaaaa", 2.0e6);
        let mut b = sample("bbbbbbb", 3.0e6);
        b.measurements.retain(|m| m.name != "fwd/64B");
        b.measurements
            .push(Measurement::new("latency/p99", "vrhost", "ns"));
        let md = compare_labeled(&a, "old.json", &b, "new.json");
        assert!(
            md.contains("| tool | vrbench 0.1.0 (aaaaaaa) | vrbench 0.1.0 (bbbbbbb) |"),
            "{md}"
        );
        assert!(
            md.contains("| measurement | DUT | unit | old.json | new.json | new.json / old.json |"),
            "{md}"
        );
        assert!(md.contains("two separate runs"));
        assert!(md.contains("different vrbench builds"));
        assert!(!md.contains("different machines"));
        // vrhost's RFC 2544 throughput went from ~2 M to ~3 M: ratio ≈ 1.5.
        let line = md
            .lines()
            .find(|l| l.starts_with("| rfc2544/64B | vrhost |"))
            .unwrap();
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let r: f64 = cells[6].trim_end_matches('×').parse().unwrap();
        assert!((r - 1.5).abs() < 0.01, "{line}");
        // The kernel did not change: ratio 1.
        let line = md
            .lines()
            .find(|l| l.starts_with("| mlr/64B/NDR | kernel |"))
            .unwrap();
        assert!(line.ends_with("| 1.000× |"), "{line}");
        // Unmatched measurements are listed, with their values.
        assert!(
            md.contains("## Only in old.json\n\n- fwd/64B (vrhost): 2.000 M frames/s"),
            "{md}"
        );
        assert!(
            md.contains("## Only in new.json\n\n- latency/p99 (vrhost): — ns"),
            "{md}"
        );
    }

    #[test]
    fn repeats_show_their_spread_and_machines_are_checked() {
        let a = sample("c", 2.0e6);
        let mut b = a.clone();
        b.machine = crate::record::Machine {
            hostname: "other".into(),
            ..machine()
        };
        let md = compare(&a, &b);
        assert!(md.contains("different machines"), "{md}");
        assert!(
            md.contains("| fwd/64B | vrhost | frames/s | 2.000 M (n=3, spread 15.0 %) |"),
            "{md}"
        );
        assert!(md.contains("| B / A |"), "{md}");
    }

    #[test]
    fn nothing_in_common() {
        let a = sample("c", 2.0e6);
        let mut b = a.clone();
        b.measurements.clear();
        let md = compare(&a, &b);
        assert!(md.contains("None: the runs share no measurement"), "{md}");
    }
}
