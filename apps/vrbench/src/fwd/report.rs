//! Results of `vrbench fwd`: trials, medians, the ratios, a table and JSON.
//!
//! Why paired ratios: trials of all cases are interleaved in rounds, so round `r`'s vrhost
//! and kernel figures were taken moments apart under the same background load. The ratio of
//! each round's pair, then the median over rounds, cancels slow drifts (another engineer's
//! build starting) that a ratio of two medians would keep; both are reported.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{Value, json};

use super::dut::Layout;

/// One counted trial.
#[derive(Debug, Clone)]
pub(crate) struct Trial {
    /// Frames the generator sent.
    pub(crate) offered: u64,
    /// The generator's run time.
    pub(crate) seconds: f64,
    /// Frames the sink counted for the case's VRs.
    pub(crate) forwarded: u64,
    /// Frames the sink counted that were for no VR (should be 0).
    pub(crate) other: u64,
    /// The least and most any single VR forwarded.
    pub(crate) per_vr_min: u64,
    pub(crate) per_vr_max: u64,
    /// veth drop/error counters that moved (`ethtool -S` of a0, p0, p1).
    pub(crate) veth: BTreeMap<String, u64>,
    /// CPU taken by work outside the trial, % of all cores (see `cpu.rs`).
    pub(crate) foreign_cpu: f64,
    /// Attempts made (busy attempts are repeated; the quietest is kept).
    pub(crate) attempts: u32,
    /// Seconds waited for a quiet machine before this attempt.
    pub(crate) waited: f64,
    /// vrhost's counters over the trial (vrhost profiles).
    pub(crate) vrhost: Option<Value>,
}

impl Trial {
    /// Forwarded rate.
    pub(crate) fn forwarded_mpps(&self) -> f64 {
        self.forwarded as f64 / self.seconds / 1e6
    }

    /// Offered rate.
    pub(crate) fn offered_mpps(&self) -> f64 {
        self.offered as f64 / self.seconds / 1e6
    }

    fn to_json(&self) -> Value {
        json!({
            "offered": self.offered,
            "forwarded": self.forwarded,
            "seconds": self.seconds,
            "offered_mpps": self.offered_mpps(),
            "forwarded_mpps": self.forwarded_mpps(),
            "other": self.other,
            "per_vr_min": self.per_vr_min,
            "per_vr_max": self.per_vr_max,
            "veth_drops": self.veth,
            "foreign_cpu_percent": self.foreign_cpu,
            "attempts": self.attempts,
            "waited_for_quiet_s": self.waited,
            "vrhost": self.vrhost,
        })
    }
}

/// One profile with a VR count, and its trials in round order.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// Profile name.
    pub(crate) profile: &'static str,
    /// VRs the frames were spread over.
    pub(crate) vrs: u32,
    /// Trials, round by round.
    pub(crate) trials: Vec<Trial>,
}

impl Case {
    pub(crate) fn new(profile: &'static str, vrs: u32) -> Case {
        Case {
            profile,
            vrs,
            trials: Vec::new(),
        }
    }

    fn label(&self) -> String {
        if self.vrs == 1 {
            self.profile.to_string()
        } else {
            format!("{} ×{}", self.profile, self.vrs)
        }
    }

    fn median_of(&self, f: impl Fn(&Trial) -> f64) -> f64 {
        median(self.trials.iter().map(f).collect())
    }
}

/// The median (mean of the middle two for an even count); NaN for none.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A ratio between two cases of a layout.
#[derive(Debug, Clone)]
struct Ratio {
    what: String,
    /// The target, if this ratio has one.
    target: Option<f64>,
    /// Median of the per-round ratios.
    paired: f64,
    /// Ratio of the medians.
    of_medians: f64,
}

/// A layout's cases and ratios.
#[derive(Debug)]
pub(crate) struct LayoutResult {
    name: &'static str,
    description: String,
    layout: Layout,
    cases: Vec<Case>,
    ratios: Vec<Ratio>,
}

impl LayoutResult {
    pub(crate) fn new(layout: &Layout, cases: Vec<Case>) -> LayoutResult {
        let find = |p: &str, vrs: u32| cases.iter().find(|c| c.profile == p && c.vrs == vrs);
        let many = cases.iter().map(|c| c.vrs).max().unwrap_or(1);
        let mut ratios = Vec::new();
        let mut ratio = |what: String, a: Option<&Case>, b: Option<&Case>, target| {
            let (Some(a), Some(b)) = (a, b) else {
                return;
            };
            let paired = median(
                a.trials
                    .iter()
                    .zip(&b.trials)
                    .map(|(x, y)| x.forwarded_mpps() / y.forwarded_mpps())
                    .collect(),
            );
            let of_medians =
                a.median_of(Trial::forwarded_mpps) / b.median_of(Trial::forwarded_mpps);
            ratios.push(Ratio {
                what,
                target,
                paired,
                of_medians,
            });
        };
        ratio(
            "vrhost-afxdp / kernel".into(),
            find("vrhost-afxdp", 1),
            find("kernel", 1),
            Some(1.5),
        );
        ratio(
            "vrhost-afxdp-qp / kernel (quickpath)".into(),
            find("vrhost-afxdp-qp", 1),
            find("kernel", 1),
            Some(1.5),
        );
        ratio(
            "vrhost-afpacket / kernel".into(),
            find("vrhost-afpacket", 1),
            find("kernel", 1),
            Some(1.0),
        );
        ratio(
            "vrhost-afxdp / vrhost-afxdp-socket-tx (XDP transmit)".into(),
            find("vrhost-afxdp", 1),
            find("vrhost-afxdp-socket-tx", 1),
            None,
        );
        ratio(
            "vrhost-afpacket / vrhost-afpacket-socket-tx (XDP transmit)".into(),
            find("vrhost-afpacket", 1),
            find("vrhost-afpacket-socket-tx", 1),
            None,
        );
        if many > 1 {
            ratio(
                format!("vrhost-afxdp ×{many} / ×1"),
                find("vrhost-afxdp", many),
                find("vrhost-afxdp", 1),
                Some(0.95),
            );
            ratio(
                format!("vrhost-afxdp-qp ×{many} / ×1"),
                find("vrhost-afxdp-qp", many),
                find("vrhost-afxdp-qp", 1),
                Some(0.95),
            );
            ratio(
                format!("no-router ×{many} / ×1 (the lab itself)"),
                find("no-router", many),
                find("no-router", 1),
                None,
            );
            ratio(
                format!("kernel-vr ×{many} / ×1"),
                find("kernel-vr", many),
                find("kernel-vr", 1),
                None,
            );
            ratio(
                format!("vrhost-afxdp ×{many} / kernel-vr ×{many}"),
                find("vrhost-afxdp", many),
                find("kernel-vr", many),
                None,
            );
        }
        ratio(
            "kernel-vr / kernel (macvlan hop)".into(),
            find("kernel-vr", 1),
            find("kernel", 1),
            None,
        );
        LayoutResult {
            name: layout.name,
            description: layout.describe(),
            layout: layout.clone(),
            cases,
            ratios,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "layout": self.name,
            "queues": self.layout.queues,
            "generator_cores": self.layout.gen_cores,
            "dut_cores": self.layout.dut_cores,
            "description": self.description,
            "cases": self.cases.iter().map(|c| json!({
                "profile": c.profile,
                "vrs": c.vrs,
                "median_forwarded_mpps": c.median_of(Trial::forwarded_mpps),
                "median_offered_mpps": c.median_of(Trial::offered_mpps),
                "median_foreign_cpu_percent": c.median_of(|t| t.foreign_cpu),
                "trials": c.trials.iter().map(Trial::to_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "ratios": self.ratios.iter().map(|r| json!({
                "ratio": r.what,
                "target": r.target,
                "median_of_paired": r.paired,
                "of_medians": r.of_medians,
                "meets_target": r.target.map(|t| r.paired >= t),
            })).collect::<Vec<_>>(),
        })
    }
}

/// A whole run.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) command: String,
    pub(crate) machine: Value,
    pub(crate) load_before: String,
    pub(crate) load_after: String,
    pub(crate) trials: usize,
    pub(crate) seconds: f64,
    pub(crate) batch: u32,
    pub(crate) layouts: Vec<LayoutResult>,
}

impl Run {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "command": self.command,
            "machine": self.machine,
            "loadavg_before": self.load_before,
            "loadavg_after": self.load_after,
            "trials": self.trials,
            "seconds": self.seconds,
            "frame_bytes": 64,
            "live_frames_batch": self.batch,
            "layouts": self.layouts.iter().map(LayoutResult::to_json).collect::<Vec<_>>(),
        })
    }

    pub(crate) fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\nvrbench fwd — 64-byte frames, IPv4/UDP, veth lab; {} on {} cores, kernel {}",
            self.machine["cpu"].as_str().unwrap_or("?"),
            self.machine["cores"],
            self.machine["kernel"].as_str().unwrap_or("?"),
        );
        let _ = writeln!(
            s,
            "{} interleaved trials × {} s per case; medians; load average before {} / after {}",
            self.trials, self.seconds, self.load_before, self.load_after
        );
        let _ = writeln!(s, "command: {}", self.command);
        let _ = writeln!(
            s,
            "other% = CPU used by work outside the trial (other processes), % of all cores"
        );
        for l in &self.layouts {
            let _ = writeln!(s, "\nlayout {}: {}", l.name, l.description);
            let _ = writeln!(
                s,
                "  {:<22} {:>10} {:>10} {:>7} {:>17} {:>7}  notes",
                "case", "fwd Mpps", "offered", "loss", "fwd min…max", "other%"
            );
            for c in &l.cases {
                let fwd = c.median_of(Trial::forwarded_mpps);
                let off = c.median_of(Trial::offered_mpps);
                let lo = c
                    .trials
                    .iter()
                    .map(Trial::forwarded_mpps)
                    .fold(f64::INFINITY, f64::min);
                let hi = c
                    .trials
                    .iter()
                    .map(Trial::forwarded_mpps)
                    .fold(0.0, f64::max);
                let _ = writeln!(
                    s,
                    "  {:<22} {:>10.3} {:>10.3} {:>6.1}% {:>8.3}…{:<8.3} {:>6.1}%  {}",
                    c.label(),
                    fwd,
                    off,
                    100.0 * (1.0 - fwd / off),
                    lo,
                    hi,
                    c.median_of(|t| t.foreign_cpu),
                    notes(c)
                );
            }
            for r in &l.ratios {
                let verdict = match r.target {
                    Some(t) if r.paired >= t => format!("target ≥ {t}: met"),
                    Some(t) => format!("target ≥ {t}: NOT met"),
                    None => String::new(),
                };
                let _ = writeln!(
                    s,
                    "  ratio {:<36} {:>6.2} (of medians {:.2})  {verdict}",
                    r.what, r.paired, r.of_medians
                );
            }
        }
        s
    }
}

/// Per-case remarks from the last trial: vrhost drops by reason, spread over VRs, stray frames.
fn notes(c: &Case) -> String {
    let Some(t) = c.trials.last() else {
        return String::new();
    };
    let mut n = Vec::new();
    if c.vrs > 1 && t.per_vr_max > 0 {
        n.push(format!(
            "per-VR min/max {:.2}",
            t.per_vr_min as f64 / t.per_vr_max as f64
        ));
    }
    if let Some(v) = &t.vrhost {
        let polls = v["polls"].as_u64().unwrap_or(0);
        if polls > 0 {
            let rx = v["vr_rx"].as_u64().unwrap_or(0) as f64;
            n.push(format!("{:.0} pkts/poll", rx / polls as f64));
        }
        if let (Some(u), Some(s)) = (
            v["cpu"]["user_cores"].as_f64(),
            v["cpu"]["system_cores"].as_f64(),
        ) {
            n.push(format!("vrhost cpu usr {u:.2} sys {s:.2}"));
        }
        if let Some(d) = v["vr_drops"].as_object() {
            for (k, x) in d {
                n.push(format!("{k} {}", x.as_u64().unwrap_or(0)));
            }
        }
        for (port, p) in v["ports"].as_object().into_iter().flatten() {
            for k in ["tx_full", "rx_dropped"] {
                let x = p[k].as_u64().unwrap_or(0);
                if x > 0 {
                    n.push(format!("{port}.{k} {x}"));
                }
            }
            for (k, x) in p["kernel"].as_object().into_iter().flatten() {
                let x = x.as_u64().unwrap_or(0);
                let loss =
                    k.contains("full") || k.contains("drop") || k.contains("fill_ring_empty");
                if x > 0 && loss {
                    n.push(format!("{port}.sock.{k} {x}"));
                }
            }
        }
    }
    if t.other > 0 {
        n.push(format!("stray {}", t.other));
    }
    n.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let _alone = crate::cores_alone();
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
