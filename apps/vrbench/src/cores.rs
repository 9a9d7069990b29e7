//! `vrbench fair cores`: on-demand forwarding cores (Tanyingyong §IV-C/D) under a load that
//! rises past one core's capacity and falls back.
//!
//! Two workers pinned to two cores, four VRs with a generator queue each (so a queue can
//! follow its VR to the other core and packets stay on one core), all starting on worker 0
//! (`set_active_workers(1)`). A scaler thread ticks every 50 ms with the default policy
//! (add a worker when the busiest stays ≥ 80 % busy for 3 ticks; give one back when the load
//! would fit on one fewer at ≤ 55 % for 10 ticks). The offered load, equal over the four
//! VRs, steps up from 30 % to 150 % of one worker's capacity C1 and back down. Each
//! generator stamps a sequence number into its frames and the sinks check every VR's frames
//! leave in order; losses are split into the modelled NIC rings' (`rx-ring-full`) and the
//! data plane's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use vrhost_dataplane::scale::{ScalePolicy, Scaler};

use crate::fair::{Args, Section, Target, Which};
use crate::inproc::Args as InArgs;
use crate::inproc::session::{Session, median};
use crate::inproc::topo::Tables;
use crate::inproc::traffic::Offer;

const VRS: usize = 4;
/// Offered load per step, × C1.
const STEPS: &[f64] = &[0.3, 0.6, 0.9, 1.2, 1.5, 1.2, 0.9, 0.6, 0.3];
/// Modelled NIC ring per queue (a common descriptor count; the default 1,024 lasts ~1 ms at
/// these rates, less than the time slices another process can take from a worker here).
const RX_RING: usize = 4096;

/// One step of a profile.
struct Step {
    offered_mpps: f64,
    carried_mpps: f64,
    start: usize,
    end: usize,
    events: Vec<String>,
    c: Counts,
}

/// Run the load profile; with `scaling`, a scaler thread adds and removes workers.
fn profile(
    s: &mut Session,
    dp: &vrhost_dataplane::Dataplane,
    c1: f64,
    step_secs: f64,
    scaling: bool,
) -> anyhow::Result<Vec<Step>> {
    let mut out = Vec::new();
    for &x in STEPS {
        let per_vr = x * c1 * 1e6 / VRS as f64;
        let offers = vec![Offer::Rate(per_vr); VRS];
        let start = dp.active_workers();
        let c0 = counts(s);
        let stop = AtomicBool::new(false);
        let (w, events) = std::thread::scope(|scope| {
            let h = scope.spawn(|| {
                let mut sc = Scaler::new(ScalePolicy::default());
                let mut events = Vec::new();
                while scaling && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    let t = sc.tick(dp);
                    if std::env::var("FAIR_DEBUG").is_ok() {
                        let ws = dp.worker_stats();
                        eprintln!(
                            "[cores] {t:?} vrs {:?} rxq {:?}",
                            ws.iter().map(|w| w.vrs).collect::<Vec<_>>(),
                            ws.iter().map(|w| w.rx_queues).collect::<Vec<_>>()
                        );
                    }
                    if t.changed.is_some() {
                        events.push(format!(
                            "→ {} (load {})",
                            t.active,
                            t.load
                                .iter()
                                .map(|l| format!("{:.0} %", 100.0 * l))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                }
                events
            });
            let w = s.window(step_secs, &offers);
            stop.store(true, Ordering::Relaxed);
            (w, h.join().unwrap_or_default())
        });
        let w = w?;
        let c = counts(s);
        let t = w.timed.iter().map(|t| t.0).fold(0.0, f64::max).max(1e-9);
        out.push(Step {
            offered_mpps: (c.offered - c0.offered) as f64 / t / 1e6,
            carried_mpps: (c.tx - c0.tx) as f64 / t / 1e6,
            start,
            end: dp.active_workers(),
            events,
            c: c.minus(&c0),
        });
    }
    Ok(out)
}

#[derive(Debug, Clone)]
struct Counts {
    offered: u64,
    tx: u64,
    nic: u64,
    dp_drops: u64,
    reordered: u64,
    checked: u64,
    /// Data-plane drops by reason.
    reasons: [u64; vrhost_dataplane::counters::N_DROPS],
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            offered: 0,
            tx: 0,
            nic: 0,
            dp_drops: 0,
            reordered: 0,
            checked: 0,
            reasons: [0; vrhost_dataplane::counters::N_DROPS],
        }
    }
}

impl Counts {
    fn minus(&self, b: &Counts) -> Counts {
        Counts {
            offered: self.offered - b.offered,
            tx: self.tx - b.tx,
            nic: self.nic - b.nic,
            dp_drops: self.dp_drops - b.dp_drops,
            reordered: self.reordered - b.reordered,
            checked: self.checked - b.checked,
            reasons: core::array::from_fn(|i| self.reasons[i] - b.reasons[i]),
        }
    }

    /// "N" or "N (reason n, …)".
    fn dp(&self) -> String {
        let r: Vec<String> = vrhost_dataplane::Drop::ALL
            .iter()
            .filter(|d| self.reasons[**d as usize] > 0)
            .map(|d| format!("{} {}", d.name(), self.reasons[*d as usize]))
            .collect();
        if r.is_empty() {
            self.dp_drops.to_string()
        } else {
            format!("{} ({})", self.dp_drops, r.join(", "))
        }
    }
}

fn counts(s: &Session) -> Counts {
    let b = s.built();
    let mut c = Counts::default();
    for g in &b.vr_gens {
        c.offered += g.offered.get();
        c.nic += g.ring_full.get();
    }
    for v in &b.vrs {
        let st = v.stats();
        c.tx += st.tx_packets;
        c.dp_drops += st.total_drops();
        for (a, d) in c.reasons.iter_mut().zip(st.drops) {
            *a += d;
        }
    }
    c.reordered = b.order.reordered.load(Ordering::Relaxed);
    c.checked = b.sinks.iter().flatten().map(|s| s.checked.get()).sum();
    c
}

pub(crate) fn run(tables: &mut Tables, hz: f64, a: &Args) -> anyhow::Result<Section> {
    let base = InArgs {
        workers: 2,
        rx_ring: RX_RING,
        ..a.inproc(VRS)
    };
    let mut s = a.start(&base, "cores", tables, hz, |_| {})?;
    let dp = s.built().dp.clone();
    // Placement decides where the VRs run (the topology pins VR k to worker k mod 2).
    for v in &s.built().vrs {
        dp.pin_vr(v.name(), None)?;
    }
    dp.set_active_workers(1)?;
    let u = vec![Offer::Unlimited; VRS];
    s.window(a.window, &u)?;
    let c1 = median(
        (0..a.rounds)
            .map(|_| {
                let c0 = counts(&s);
                let w = s.window(a.window, &u)?;
                let t = w.timed.iter().map(|t| t.0).fold(0.0, f64::max);
                Ok((counts(&s).tx - c0.tx) as f64 / t / 1e6)
            })
            .collect::<anyhow::Result<Vec<f64>>>()?,
    );
    let step_secs = (4.0 * a.window).max(1.0);
    let mut md = format!(
        "### On-demand forwarding cores (`{}`)\n\n\
         Two workers on two cores, four VRs with a generator queue each (modelled NIC rings of \
         {RX_RING} frames). C1 (one worker, all four VRs backlogged) = **{c1:.2} Mpps**. \
         Offered load, equal over the VRs, in steps of {step_secs:.1} s; the profile runs \
         twice in this invocation: first on both workers throughout (fixed), then starting on \
         worker 0 alone with the scaler ticking every 50 ms (default policy: add a worker \
         when the busiest is ≥ 80 % loaded for 3 ticks, give one back when the load fits on \
         one fewer at ≤ 55 % for 10 ticks; load = packets × their cost at full batches ÷ \
         time). The fixed run's NIC-ring losses are what this machine's other work causes \
         (a worker descheduled for longer than its rings last).\n\n\
         | step | offered × C1 | offered Mpps | fixed: carried Mpps | fixed: lost (NIC, data plane) | on-demand: carried Mpps | on-demand: workers | on-demand: changes | on-demand: lost (NIC, data plane) | reordered |\n\
         |---:|---:|---:|---:|---|---:|---|---|---|---:|\n",
        crate::fair::command(a, "cores")
    );
    dp.set_active_workers(2)?;
    let fixed = profile(&mut s, &dp, c1, step_secs, false)?;
    s.window(0.3, &[Offer::Off; VRS])?;
    dp.set_active_workers(1)?;
    let dynamic = profile(&mut s, &dp, c1, step_secs, true)?;
    let mut total = Counts::default();
    let mut ups = 0;
    let mut downs = 0;
    let mut lossless_below = true;
    let mut worse_than_fixed = 0u64;
    for (k, (f, d)) in fixed.iter().zip(&dynamic).enumerate() {
        let x = STEPS[k];
        ups += d.events.iter().filter(|e| e.starts_with("→ 2")).count();
        downs += d.events.iter().filter(|e| e.starts_with("→ 1")).count();
        // Below capacity: under what the workers in use at the step's start carry.
        if x < 0.95 * d.start as f64 && d.c.dp_drops > 0 {
            lossless_below = false;
        }
        if x < 0.95 * d.start as f64 {
            worse_than_fixed += d.c.nic.saturating_sub(f.c.nic);
        }
        md += &format!(
            "| {k} | {x:.1} | {:.2} | {:.2} | {}, {} | {:.2} | {} → {} | {} | {}, {} | {} |\n",
            d.offered_mpps,
            f.carried_mpps,
            f.c.nic,
            f.c.dp(),
            d.carried_mpps,
            d.start,
            d.end,
            if d.events.is_empty() {
                "—".to_string()
            } else {
                d.events.join("; ")
            },
            d.c.nic,
            d.c.dp(),
            d.c.reordered + f.c.reordered
        );
        for r in [f, d] {
            total.reordered += r.c.reordered;
            total.checked += r.c.checked;
        }
    }
    dp.set_active_workers(2)?;
    md += &format!(
        "\n{} frames checked for order at the sinks, {} reordered. Losses in a step offered \
         more than the workers in use at its start can carry (× C1 ≥ workers) are overload, \
         not the moves'. NIC-ring losses of the on-demand run beyond the fixed run's in steps \
         below capacity: {worse_than_fixed}.\n",
        total.checked, total.reordered
    );
    Ok(Section {
        scenario: Which::Cores,
        command: crate::fair::command(a, "cores"),
        markdown: md,
        targets: vec![
            Target {
                what: "a forwarding core is added under load and given back when load falls".into(),
                measured: format!("{ups} added, {downs} given back"),
                met: ups >= 1 && downs >= 1,
            },
            Target {
                what: "adding/removing a core under load: zero reordered packets".into(),
                measured: format!("{} of {} reordered", total.reordered, total.checked),
                met: total.reordered == 0 && total.checked > 0,
            },
            Target {
                what: "zero loss below capacity (steps offered less than the workers in use carry): none in the data plane".into(),
                measured: if lossless_below {
                    "none".into()
                } else {
                    "data-plane drops in a step below capacity (see table)".into()
                },
                met: lossless_below,
            },
        ],
    })
}
