//! `vrbench fair`: the fair-sharing experiments of issue 7, in process.
//!
//! Each scenario is a data plane built by `vrbench inproc`'s topology (generated tables, a
//! neighbour per next hop, generator and sink inside the worker's poll, one worker pinned
//! to a core) with **a generator queue per VR** (`--queue-per-vr`: a port per tenant, or NIC
//! filters steering each VR's MAC to its own queue — the multi-queue set-up Egi et al.
//! found necessary, Rathore's interface per VR), so each VR's offered load is set on its
//! own. Offered load is modelled as each queue's NIC ring filling at a rate in TSC time and
//! overflowing as `rx-ring-full` (free to the worker, like a NIC's own drops), or unlimited.
//! Every figure is a counter difference read with the workers stopped; every ratio compares
//! windows of the same invocation, alternated, because the machine is shared.
//!
//! Scenarios (each named after the experiment it reproduces):
//! * `fig5` — Egi Fig. 5: three equal VRs on one core, offered rates rising in unequal
//!   steps; once the core is overloaded each gets the max-min fair share.
//! * `fig7` — Egi Fig. 7: two VRs and a third whose path costs 40 % more; in `packets`
//!   mode they forward equal packets, in `cycles` mode they use equal CPU.
//! * `table1` — Rathore Table 1: VR1 offered 3× what the worker forwards, VR2 a steady rate
//!   it can carry; VR2 must lose nothing. Also the same with both VRs on one shared queue
//!   (the drop point the queue-per-VR set-up removes).
//! * `weights` — equal weights (Jain's index) and weights 1:2:3.
//! * `overhead` — one VR, full table: the stride scheduler against the round-robin one it
//!   replaced, in alternating windows of one data plane.
//! * `cores` — on-demand forwarding cores (a second worker joins under load and leaves).
//! * `app` — Tanyingyong Fig. 7: a CPU-bound application keeps more of the CPU when one core
//!   forwards than when both do.

use std::time::Duration;

use anyhow::bail;
use clap::ValueEnum;
use serde::Serialize;
use vrhost_dataplane::counters::N_DROPS;
use vrhost_dataplane::{Drop, Fairness, Scheduler, jain};

use crate::inproc::session::{Session, median};
use crate::inproc::topo::Tables;
use crate::inproc::traffic::Offer;
use crate::inproc::{Args as InArgs, Scenario, tsc_hz};

/// Options of `vrbench fair`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// Scenarios to run, in order [default: all].
    #[arg(value_enum)]
    scenarios: Vec<Which>,
    /// Routes per VR (generated table; `overhead` always uses the full table).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) routes: usize,
    /// Seconds per measurement window.
    #[arg(long, default_value_t = 0.5, value_parser = crate::number::quantity)]
    pub(crate) window: f64,
    /// Rounds of alternating windows for each ratio (median reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Cores for the workers, comma-separated [default: as the OS lists them].
    #[arg(long, value_delimiter = ',')]
    pub(crate) cores: Vec<usize>,
    /// Run the workers `SCHED_FIFO` at this priority (1..=99), as vrhost's
    /// `[dataplane] realtime_priority` does [default: ordinary threads].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub(crate) realtime: Option<u8>,
    /// Receive coalescing, µs (vrhost's `[dataplane] rx_coalesce_us`) [default: 0, off].
    #[arg(long, default_value_t = 0)]
    pub(crate) rx_coalesce_us: u64,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The in-process arguments every scenario of `vrbench fair` starts from: `vrs` VRs of
    /// `--routes` routes, a generator queue each, on `--cores` with the real-time and
    /// coalescing settings given.
    pub(crate) fn inproc(&self, vrs: usize) -> InArgs {
        InArgs {
            vrs,
            routes: Some(self.routes),
            queue_per_vr: true,
            cores: self.cores.clone(),
            realtime: self.realtime,
            rx_coalesce_us: self.rx_coalesce_us,
            ..InArgs::default()
        }
    }

    /// Start the session `name` on `base` (windows of `--window` s), `tweak`ed first.
    pub(crate) fn start(
        &self,
        base: &InArgs,
        name: &str,
        tables: &mut Tables,
        hz: f64,
        tweak: impl FnOnce(&mut Scenario),
    ) -> anyhow::Result<Session> {
        let mut sc = Scenario::from_args(base, self.window);
        sc.name = name.into();
        tweak(&mut sc);
        Session::start(&sc, tables, hz)
    }
}

/// A scenario.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Which {
    /// Egi Fig. 5.
    Fig5,
    /// Egi Fig. 7.
    Fig7,
    /// Rathore Table 1.
    Table1,
    /// Equal weights and 1:2:3.
    Weights,
    /// Scheduler cost against the round-robin baseline.
    Overhead,
    /// On-demand forwarding cores.
    Cores,
    /// Tanyingyong Fig. 7: an application beside forwarding on one core or on both.
    App,
}

/// One VR's figures over one window.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct VrWin {
    pub(crate) offered_mpps: f64,
    pub(crate) carried_mpps: f64,
    /// Dropped in the modelled NIC ring (`rx-ring-full`).
    pub(crate) nic_drops: u64,
    /// Dropped by the data plane, by reason.
    pub(crate) drops: Vec<(&'static str, u64)>,
    /// TSC cycles its vectors took.
    pub(crate) cycles: u64,
    pub(crate) packets: u64,
}

impl VrWin {
    fn cycles_per_packet(&self) -> f64 {
        self.cycles as f64 / self.packets.max(1) as f64
    }
}

/// Per-VR counters at one moment.
struct Read {
    offered: Vec<u64>,
    ring_full: Vec<u64>,
    tx: Vec<u64>,
    cycles: Vec<u64>,
    drops: Vec<[u64; N_DROPS]>,
}

fn read(s: &Session) -> Read {
    let b = s.built();
    let stats: Vec<_> = b.vrs.iter().map(|v| v.stats()).collect();
    Read {
        offered: b.vr_gens.iter().map(|g| g.offered.get()).collect(),
        ring_full: b.vr_gens.iter().map(|g| g.ring_full.get()).collect(),
        tx: stats.iter().map(|s| s.tx_packets).collect(),
        cycles: stats.iter().map(|s| s.cycles).collect(),
        drops: stats.iter().map(|s| s.drops).collect(),
    }
}

/// One window of `secs` with per-VR `offers`: each VR's figures.
pub(crate) fn window(s: &mut Session, secs: f64, offers: &[Offer]) -> anyhow::Result<Vec<VrWin>> {
    let a = read(s);
    let w = s.window(secs, offers)?;
    let b = read(s);
    let t = w.timed.iter().map(|t| t.0).fold(0.0, f64::max).max(1e-9);
    Ok((0..a.tx.len())
        .map(|i| VrWin {
            offered_mpps: (b.offered[i] - a.offered[i]) as f64 / t / 1e6,
            carried_mpps: (b.tx[i] - a.tx[i]) as f64 / t / 1e6,
            nic_drops: b.ring_full[i] - a.ring_full[i],
            drops: Drop::ALL
                .iter()
                .map(|d| (d.name(), b.drops[i][*d as usize] - a.drops[i][*d as usize]))
                .filter(|(_, n)| *n > 0)
                .collect(),
            cycles: b.cycles[i] - a.cycles[i],
            packets: b.tx[i] - a.tx[i],
        })
        .collect())
}

/// The max-min fair shares of `total` between demands `d` (water-filling).
pub(crate) fn max_min(d: &[f64], total: f64) -> Vec<f64> {
    let mut out = vec![0.0; d.len()];
    let mut left = total;
    let mut open: Vec<usize> = (0..d.len()).collect();
    while !open.is_empty() && left > 1e-12 {
        let share = left / open.len() as f64;
        let (sat, rest): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| d[i] - out[i] <= share);
        if sat.is_empty() {
            for &i in &open {
                out[i] += share;
            }
            break;
        }
        for &i in &sat {
            left -= d[i] - out[i];
            out[i] = d[i];
        }
        open = rest;
    }
    out
}

fn shares(x: &[f64]) -> Vec<f64> {
    let s: f64 = x.iter().sum();
    x.iter().map(|v| v / s.max(1e-12)).collect()
}

fn pct(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{:.1} %", 100.0 * x))
        .collect::<Vec<_>>()
        .join(" : ")
}

/// A target checked by a scenario.
#[derive(Debug, Serialize)]
pub(crate) struct Target {
    pub(crate) what: String,
    pub(crate) measured: String,
    pub(crate) met: bool,
}

/// A scenario's results: a Markdown section and its targets.
#[derive(Debug, Serialize)]
pub(crate) struct Section {
    pub(crate) scenario: Which,
    pub(crate) command: String,
    pub(crate) markdown: String,
    pub(crate) targets: Vec<Target>,
}

struct Ctx<'a> {
    a: &'a Args,
    hz: f64,
    tables: Tables,
}

impl Ctx<'_> {
    /// A session with `vrs` VRs on one worker, a generator queue each.
    fn session(
        &mut self,
        name: &str,
        vrs: usize,
        f: impl Fn(&mut Scenario),
    ) -> anyhow::Result<Session> {
        let base = self.a.inproc(vrs);
        self.a.start(&base, name, &mut self.tables, self.hz, f)
    }
}

pub(crate) fn run(a: &Args) -> anyhow::Result<()> {
    if a.window <= 0.0 || !(1..=50).contains(&a.rounds) {
        bail!("--window must be above 0 and --rounds 1..=50");
    }
    let which: Vec<Which> = if a.scenarios.is_empty() {
        Which::value_variants().to_vec()
    } else {
        a.scenarios.clone()
    };
    let mut cx = Ctx {
        a,
        hz: tsc_hz(Duration::from_millis(200)),
        tables: Tables::default(),
    };
    let mut out = Vec::new();
    for w in which {
        let s = match w {
            Which::Fig5 => fig5(&mut cx)?,
            Which::Fig7 => fig7(&mut cx)?,
            Which::Table1 => table1(&mut cx)?,
            Which::Weights => weights(&mut cx)?,
            Which::Overhead => overhead(&mut cx)?,
            Which::Cores => crate::cores::run(&mut cx.tables, cx.hz, a)?,
            Which::App => crate::app::run(&mut cx.tables, cx.hz, a)?,
        };
        if !a.json {
            println!("{}", s.markdown);
            print_targets(&s.targets);
        }
        out.push(s);
    }
    if a.json {
        #[derive(Serialize)]
        struct J<'a> {
            machine: String,
            tsc_ghz: f64,
            sections: &'a [Section],
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&J {
                machine: crate::host::describe_with_load(),
                tsc_ghz: cx.hz / 1e9,
                sections: &out,
            })?
        );
    } else {
        println!(
            "Machine: {}; TSC {:.3} GHz.",
            crate::host::describe_with_load(),
            cx.hz / 1e9
        );
    }
    Ok(())
}

pub(crate) fn print_targets(t: &[Target]) {
    if t.is_empty() {
        return;
    }
    println!("| target | measured | |\n|---|---|---|");
    for x in t {
        println!(
            "| {} | {} | {} |",
            x.what,
            x.measured,
            if x.met { "met" } else { "**not met**" }
        );
    }
    println!();
}

pub(crate) fn command(a: &Args, w: &str) -> String {
    let mut c = format!(
        "vrbench fair {w} --routes {} --window {} --rounds {}",
        a.routes, a.window, a.rounds
    );
    if let Some(p) = a.realtime {
        c += &format!(" --realtime {p}");
    }
    if a.rx_coalesce_us > 0 {
        c += &format!(" --rx-coalesce-us {}", a.rx_coalesce_us);
    }
    c
}

const U: Offer = Offer::Unlimited;

/// Egi Fig. 5.
fn fig5(cx: &mut Ctx<'_>) -> anyhow::Result<Section> {
    let a = cx.a;
    let mut s = cx.session("fig5", 3, |_| {})?;
    eprintln!("[fig5] warm-up and capacity");
    window(&mut s, a.window, &[U, U, U])?;
    let cap: f64 = (0..a.rounds)
        .map(|_| {
            window(&mut s, a.window, &[U, U, U]).map(|w| w.iter().map(|v| v.carried_mpps).sum())
        })
        .collect::<anyhow::Result<Vec<f64>>>()
        .map(median)?;
    // Egi: all three from 100 kpps, steps of 150, 100 and 50 kpps. Here in fractions of
    // the measured capacity C: from C/30, steps of C/20, C/30 and C/60, until the slowest
    // riser is past a third of C.
    let steps = 21;
    let mut md = format!(
        "### Egi Fig. 5 — three equal VRs, unequal rising offered rates (`{}`)\n\n\
         One worker, three VRs (equal weights, `packets` fairness, a generator queue each). \
         Capacity C (all three backlogged) = **{cap:.2} Mpps**. Offered per VR: C/30 + k × \
         (C/20, C/30, C/60). Carried is what left the data plane; *fair* is the max-min \
         fair share of the carried total.\n\n\
         | step | offered Mpps (vr0, vr1, vr2) | carried Mpps | fair Mpps | worst deviation |\n\
         |---:|---|---|---|---:|\n",
        command(a, "fig5")
    );
    let mut worst: f64 = 0.0;
    let mut last = Vec::new();
    for k in 0..steps {
        let k = k as f64;
        let r = [
            cap * (1.0 / 30.0 + k / 20.0),
            cap * (1.0 / 30.0 + k / 30.0),
            cap * (1.0 / 30.0 + k / 60.0),
        ];
        let offers: Vec<Offer> = r.iter().map(|&x| Offer::Rate(x * 1e6)).collect();
        window(&mut s, 0.2, &offers)?;
        let w = window(&mut s, a.window, &offers)?;
        let off: Vec<f64> = w.iter().map(|v| v.offered_mpps).collect();
        let car: Vec<f64> = w.iter().map(|v| v.carried_mpps).collect();
        let total: f64 = car.iter().sum();
        let fair = max_min(&off, total);
        let dev = car
            .iter()
            .zip(&fair)
            .map(|(c, f)| (c - f).abs() / (total / 3.0))
            .fold(0.0, f64::max);
        worst = worst.max(dev);
        let f3 = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        md += &format!(
            "| {} | {} | {} | {} | {:.1} % |\n",
            k as usize,
            f3(&off),
            f3(&car),
            f3(&fair),
            100.0 * dev
        );
        last = car;
    }
    let j = jain(&last);
    md += &format!(
        "\nDeviation = |carried − fair| ÷ (total ÷ 3). At the last step all three are offered \
         more than a third: Jain's index of carried packets {j:.4}.\n"
    );
    Ok(Section {
        scenario: Which::Fig5,
        command: command(a, "fig5"),
        markdown: md,
        targets: vec![
            Target {
                what: "every step: each VR within 5 % (of a third of the total) of its max-min fair share".into(),
                measured: format!("worst {:.1} %", 100.0 * worst),
                met: worst <= 0.05,
            },
            Target {
                what: "all overloaded (last step): Jain's index of packets ≥ 0.99".into(),
                measured: format!("{j:.4}"),
                met: j >= 0.99,
            },
        ],
    })
}

/// Egi Fig. 7.
fn fig7(cx: &mut Ctx<'_>) -> anyhow::Result<Section> {
    let a = cx.a;
    let mut s = cx.session("fig7", 3, |_| {})?;
    let dp = s.built().dp.clone();
    eprintln!("[fig7] warm-up, calibrating the cost per packet");
    window(&mut s, a.window, &[U, U, U])?;
    let w = window(&mut s, a.window, &[U, U, U])?;
    let base = w.iter().map(VrWin::cycles_per_packet).sum::<f64>() / 3.0;
    let extra = (0.4 * base).round() as u32;
    if std::env::var("FAIR_DEBUG").is_ok() {
        eprintln!(
            "[fig7] calibration: {:?}",
            w.iter()
                .map(|v| (v.cycles, v.packets, v.cycles_per_packet()))
                .collect::<Vec<_>>()
        );
    }
    dp.set_extra_cost("vr0", extra)?;
    window(&mut s, a.window, &[U, U, U])?;
    let mut rows: [Vec<Vec<VrWin>>; 2] = Default::default();
    for _ in 0..a.rounds {
        for (m, f) in [Fairness::Packets, Fairness::Cycles]
            .into_iter()
            .enumerate()
        {
            dp.set_fairness(f);
            window(&mut s, 0.2, &[U, U, U])?;
            rows[m].push(window(&mut s, a.window, &[U, U, U])?);
        }
    }
    dp.set_fairness(Fairness::Packets);
    let mut md = format!(
        "### Egi Fig. 7 — two equal VRs and one 40 % more expensive (`{}`)\n\n\
         Three VRs on one worker, all backlogged (unlimited offered load). Measured path cost \
         {base:.0} cycles/packet; vr0's path made to burn {extra} cycles more per packet (the \
         `set_extra_cost` measurement element, standing in for Egi's expensive Click \
         elements). Windows alternate between the two modes on the same data plane; medians \
         of {} rounds.\n\n\
         | mode | carried Mpps (vr0, vr1, vr2) | packet shares | CPU (cycle) shares | cycles/packet vr0 ÷ vr1 | Jain packets | Jain cycles |\n\
         |---|---|---|---|---:|---:|---:|\n",
        command(a, "fig7"),
        a.rounds
    );
    let mut fig = Vec::new();
    for (m, name) in ["packets", "cycles"].iter().enumerate() {
        let pick = |f: &dyn Fn(&[VrWin]) -> f64| median(rows[m].iter().map(|w| f(w)).collect());
        let car: Vec<f64> = (0..3)
            .map(|i| pick(&|w: &[VrWin]| w[i].carried_mpps))
            .collect();
        let ps: Vec<f64> = (0..3)
            .map(|i| {
                pick(&|w: &[VrWin]| {
                    shares(&w.iter().map(|v| v.packets as f64).collect::<Vec<_>>())[i]
                })
            })
            .collect();
        let cs: Vec<f64> = (0..3)
            .map(|i| {
                pick(&|w: &[VrWin]| {
                    shares(&w.iter().map(|v| v.cycles as f64).collect::<Vec<_>>())[i]
                })
            })
            .collect();
        let cost = pick(&|w: &[VrWin]| w[0].cycles_per_packet() / w[1].cycles_per_packet());
        let jp = pick(&|w: &[VrWin]| jain(&w.iter().map(|v| v.packets as f64).collect::<Vec<_>>()));
        let jc = pick(&|w: &[VrWin]| jain(&w.iter().map(|v| v.cycles as f64).collect::<Vec<_>>()));
        let ratio = pick(&|w: &[VrWin]| w[0].packets as f64 / w[1].packets.max(1) as f64);
        md += &format!(
            "| `{name}` | {:.2}, {:.2}, {:.2} | {} | {} | {cost:.2} | {jp:.4} | {jc:.4} |\n",
            car[0],
            car[1],
            car[2],
            pct(&ps),
            pct(&cs)
        );
        fig.push((jp, jc, ratio, cost));
    }
    let (jp, _, _, _) = fig[0];
    let (_, jc, ratio, cost) = fig[1];
    md += &format!(
        "\nIn `cycles` mode vr0 forwards {ratio:.3}× vr1's packets; its cost is {cost:.2}× \
         vr1's, so equal CPU means 1/{cost:.2} = {:.3}×.\n",
        1.0 / cost
    );
    Ok(Section {
        scenario: Which::Fig7,
        command: command(a, "fig7"),
        markdown: md,
        targets: vec![
            Target {
                what: "`packets` mode, equal weights, backlogged: Jain's index of packets ≥ 0.99".into(),
                measured: format!("{jp:.4}"),
                met: jp >= 0.99,
            },
            Target {
                what: "`cycles` mode, equal weights, backlogged: Jain's index of CPU cycles ≥ 0.99".into(),
                measured: format!("{jc:.4}"),
                met: jc >= 0.99,
            },
            Target {
                what: "`cycles` mode: the 40 % costlier VR forwards ≈ 1/1.4 of the others' packets (within 5 %)".into(),
                measured: format!("{ratio:.3} (cost ratio {cost:.2})"),
                met: (ratio * cost - 1.0).abs() <= 0.05,
            },
        ],
    })
}

/// Rathore Table 1.
fn table1(cx: &mut Ctx<'_>) -> anyhow::Result<Section> {
    let a = cx.a;
    let mut md = format!(
        "### Rathore Table 1 — isolation (`{}`)\n\n\
         Two VRs on one worker. C1 = what the worker forwards for VR1 alone (backlogged). VR1 \
         is then offered 3 × C1, VR2 0.3 × C1 (Rathore: 1000 and 300 kpps against a router \
         forwarding about 650). Medians of {} windows.\n\n\
         | set-up | scheduler | C1 Mpps | offered VR1, VR2 Mpps | carried VR1, VR2 Mpps | VR2 carried ÷ offered, median window (all windows pooled) | VR2 NIC-ring drops per window | VR2 data-plane drops |\n\
         |---|---|---:|---|---|---:|---|---:|\n",
        command(a, "table1"),
        a.rounds
    );
    let mut targets = Vec::new();
    for (label, shared) in [("a queue per VR", false), ("one shared queue", true)] {
        let mut s = cx.session("table1", 2, |sc| {
            if shared {
                sc.queue_per_vr = false;
                // 3 : 0.3 of the packets for VR1 : VR2.
                sc.vr_mix = Some(vec![3.0, 0.3]);
            }
        })?;
        let dp = s.built().dp.clone();
        for sched in [Scheduler::Stride, Scheduler::RoundRobin] {
            dp.set_scheduler(sched);
            let mut rows = Vec::new();
            let mut c1s = Vec::new();
            for _ in 0..a.rounds {
                let (c1, w) = if shared {
                    // One queue: offered load is the queue's; VR1 alone is not separable,
                    // so C1 is the carried rate of the whole queue backlogged.
                    let w = window_shared(&mut s, a.window, U)?;
                    let c1 = w.iter().map(|v| v.carried_mpps).sum::<f64>();
                    let w = window_shared(&mut s, a.window, Offer::Rate(3.3 * c1 * 1e6))?;
                    (c1, w)
                } else {
                    window(&mut s, 0.2, &[U, Offer::Off])?;
                    let c1 = window(&mut s, a.window, &[U, Offer::Off])?[0].carried_mpps;
                    let offers = [Offer::Rate(3.0 * c1 * 1e6), Offer::Rate(0.3 * c1 * 1e6)];
                    window(&mut s, 0.2, &offers)?;
                    (c1, window(&mut s, a.window, &offers)?)
                };
                c1s.push(c1);
                rows.push(w);
            }
            let m = |f: &dyn Fn(&[VrWin]) -> f64| median(rows.iter().map(|w| f(w)).collect());
            let c1 = median(c1s);
            let kept = m(&|w: &[VrWin]| w[1].carried_mpps / w[1].offered_mpps.max(1e-9));
            let pooled = rows.iter().map(|w| w[1].carried_mpps).sum::<f64>()
                / rows
                    .iter()
                    .map(|w| w[1].offered_mpps)
                    .sum::<f64>()
                    .max(1e-9);
            let dp_drops: u64 = rows
                .iter()
                .map(|w| w[1].drops.iter().map(|d| d.1).sum::<u64>())
                .sum();
            let nic = rows
                .iter()
                .map(|w| w[1].nic_drops.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            md += &format!(
                "| {label} | {} | {c1:.2} | {:.2}, {:.2} | {:.2}, {:.2} | {:.4} ({pooled:.4}) | {nic} | {dp_drops} |\n",
                if sched == Scheduler::Stride {
                    "stride"
                } else {
                    "round-robin (before)"
                },
                m(&|w: &[VrWin]| w[0].offered_mpps),
                m(&|w: &[VrWin]| w[1].offered_mpps),
                m(&|w: &[VrWin]| w[0].carried_mpps),
                m(&|w: &[VrWin]| w[1].carried_mpps),
                kept,
            );
            if !shared && sched == Scheduler::Stride {
                targets.push(Target {
                    what: "isolation: VR2 delivers ≥ 99 % of its offered load while VR1 is offered 3× what the worker forwards".into(),
                    measured: format!(
                        "{:.2} % (median window), {:.2} % (all windows pooled); data-plane drops {dp_drops}",
                        100.0 * kept,
                        100.0 * pooled
                    ),
                    met: kept >= 0.99 && dp_drops == 0,
                });
            }
        }
        dp.set_scheduler(Scheduler::Stride);
    }
    md += "\nNIC-ring drops of VR2 with a queue per VR happen only in windows where the worker \
           thread lost its core to the machine's other work for longer than VR2's ring (1,024 \
           frames) lasts at its rate; the round-robin baseline shows the same, and the data \
           plane itself drops none of VR2's frames.\n\
           \nWith one shared queue the modelled NIC ring is a drop point both VRs share: when it \
           overflows it drops VR2's frames in proportion to their share of the queue, before \
           any scheduler sees them (the macvlan row of Rathore's table, one layer down). A \
           queue per VR — a port per tenant, or NIC filters steering each VR's MAC to a queue \
           — moves the drop point to each VR's own ring.\n";
    Ok(Section {
        scenario: Which::Table1,
        command: command(a, "table1"),
        markdown: md,
        targets,
    })
}

/// A window for a session whose VRs share one generator queue per worker: figures per VR
/// from the data plane's counters (offered per VR is estimated from the queue's mix as
/// carried + drops; the NIC-ring drops are split in the mix's proportion).
fn window_shared(s: &mut Session, secs: f64, offer: Offer) -> anyhow::Result<Vec<VrWin>> {
    let b = s.built();
    let g0: u64 = b.gens.iter().flatten().map(|g| g.offered.get()).sum();
    let r0: u64 = b.gens.iter().flatten().map(|g| g.ring_full.get()).sum();
    let st0: Vec<_> = b.vrs.iter().map(|v| v.stats()).collect();
    let w = s.window(secs, &vec![offer; s.sc.workers])?;
    let b = s.built();
    let g1: u64 = b.gens.iter().flatten().map(|g| g.offered.get()).sum();
    let r1: u64 = b.gens.iter().flatten().map(|g| g.ring_full.get()).sum();
    let st1: Vec<_> = b.vrs.iter().map(|v| v.stats()).collect();
    let t = w.timed.iter().map(|t| t.0).fold(0.0, f64::max).max(1e-9);
    let mix = s.sc.vr_mix.clone().unwrap_or_else(|| vec![1.0; st0.len()]);
    let msum: f64 = mix.iter().sum();
    Ok((0..st0.len())
        .map(|i| {
            let share = mix[i] / msum;
            VrWin {
                offered_mpps: (g1 - g0) as f64 * share / t / 1e6,
                carried_mpps: (st1[i].tx_packets - st0[i].tx_packets) as f64 / t / 1e6,
                nic_drops: ((r1 - r0) as f64 * share) as u64,
                drops: Drop::ALL
                    .iter()
                    .map(|d| (d.name(), st1[i].drop(*d) - st0[i].drop(*d)))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                cycles: st1[i].cycles - st0[i].cycles,
                packets: st1[i].tx_packets - st0[i].tx_packets,
            }
        })
        .collect())
}

/// Equal weights and 1:2:3.
fn weights(cx: &mut Ctx<'_>) -> anyhow::Result<Section> {
    let a = cx.a;
    let mut s = cx.session("weights", 3, |_| {})?;
    let dp = s.built().dp.clone();
    window(&mut s, a.window, &[U, U, U])?;
    let mut md = format!(
        "### Weights (`{}`)\n\nThree VRs on one worker, all backlogged, `packets` fairness; \
         weights changed at run time between windows. Medians of {} windows.\n\n\
         | weights | carried Mpps (vr0, vr1, vr2) | packet shares | expected | worst share ÷ expected − 1 | Jain |\n\
         |---|---|---|---|---:|---:|\n",
        command(a, "weights"),
        a.rounds
    );
    let mut targets = Vec::new();
    for ws in [[1u32, 1, 1], [1, 2, 3], [3, 2, 1]] {
        for (i, w) in ws.iter().enumerate() {
            dp.set_weight(&format!("vr{i}"), *w)?;
        }
        window(&mut s, 0.2, &[U, U, U])?;
        let rows: Vec<Vec<VrWin>> = (0..a.rounds)
            .map(|_| window(&mut s, a.window, &[U, U, U]))
            .collect::<anyhow::Result<_>>()?;
        let expect = shares(&ws.map(f64::from));
        let sh: Vec<f64> = (0..3)
            .map(|i| {
                median(
                    rows.iter()
                        .map(|w| shares(&w.iter().map(|v| v.packets as f64).collect::<Vec<_>>())[i])
                        .collect(),
                )
            })
            .collect();
        let car: Vec<f64> = (0..3)
            .map(|i| median(rows.iter().map(|w| w[i].carried_mpps).collect()))
            .collect();
        let worst = sh
            .iter()
            .zip(&expect)
            .map(|(s, e)| (s / e - 1.0).abs())
            .fold(0.0, f64::max);
        let j = median(
            rows.iter()
                .map(|w| jain(&w.iter().map(|v| v.packets as f64).collect::<Vec<_>>()))
                .collect(),
        );
        md += &format!(
            "| {}:{}:{} | {:.2}, {:.2}, {:.2} | {} | {} | {:.2} % | {j:.4} |\n",
            ws[0],
            ws[1],
            ws[2],
            car[0],
            car[1],
            car[2],
            pct(&sh),
            pct(&expect),
            100.0 * worst
        );
        if ws == [1, 1, 1] {
            targets.push(Target {
                what: "equal weights, backlogged: Jain's index of packets ≥ 0.99".into(),
                measured: format!("{j:.4}"),
                met: j >= 0.99,
            });
        } else if ws == [1, 2, 3] {
            targets.push(Target {
                what: "weights 1:2:3: shares within 5 % of 1/6 : 2/6 : 3/6".into(),
                measured: format!("{} (worst {:.2} % off)", pct(&sh), 100.0 * worst),
                met: worst <= 0.05,
            });
        }
    }
    for i in 0..3 {
        dp.set_weight(&format!("vr{i}"), 1)?;
    }
    Ok(Section {
        scenario: Which::Weights,
        command: command(a, "weights"),
        markdown: md,
        targets,
    })
}

/// Per scheduler mode: carried Mpps of every window, and per-round ratios to round-robin.
type Rates = ([Vec<f64>; 3], [Vec<f64>; 3]);

const MODES: [(&str, Scheduler, Fairness); 3] = [
    (
        "round-robin (before)",
        Scheduler::RoundRobin,
        Fairness::Packets,
    ),
    ("stride, packets", Scheduler::Stride, Fairness::Packets),
    ("stride, cycles", Scheduler::Stride, Fairness::Cycles),
];

/// Alternate the three modes window by window on one data plane.
fn alternate(s: &mut Session, rounds: usize, secs: f64) -> anyhow::Result<Rates> {
    let dp = s.built().dp.clone();
    s.window(1.0, &[U])?;
    let mut rates: [Vec<f64>; 3] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for k in 0..rounds {
        let mut r = [0.0; 3];
        // Alternate the order so no mode always follows the same one.
        let order: Vec<usize> = if k % 2 == 0 {
            vec![0, 1, 2]
        } else {
            vec![2, 1, 0]
        };
        for i in order {
            let (_, sched, fair) = MODES[i];
            dp.set_scheduler(sched);
            dp.set_fairness(fair);
            let rep = s.run("overhead", secs, &[U])?;
            r[i] = rep.carried_mpps;
            rates[i].push(rep.carried_mpps);
        }
        for i in 0..3 {
            ratios[i].push(r[i] / r[0]);
        }
    }
    dp.set_scheduler(Scheduler::Stride);
    dp.set_fairness(Fairness::Packets);
    Ok((rates, ratios))
}

/// The stride scheduler's cost against the round-robin one: one VR with the full table
/// (the target), and 100 VRs × 10,000 routes (for information).
fn overhead(cx: &mut Ctx<'_>) -> anyhow::Result<Section> {
    let a = cx.a;
    // Short windows, many rounds: on a shared machine a window the OS takes the core from
    // is lost; with many short ones the best of each mode is one nobody disturbed.
    let rounds = (a.rounds * 10).max(10);
    let secs = (a.window / 2.0).max(0.1);
    let mut cmd = format!(
        "vrbench fair overhead --window {} --rounds {}",
        a.window, a.rounds
    );
    if let Some(p) = a.realtime {
        cmd += &format!(" --realtime {p}");
    }
    if a.rx_coalesce_us > 0 {
        cmd += &format!(" --rx-coalesce-us {}", a.rx_coalesce_us);
    }
    let mut md = format!(
        "### Scheduler cost (`{cmd}`)\n\n\
         The same data plane alternates between the round-robin scheduler it had before and \
         the stride scheduler (both fairness modes) window by window ({rounds} rounds of \
         {secs:.2} s windows; ratios are taken within a round). Unlimited offered load, one \
         generator queue, 64-byte frames, uniform random destinations.\n\n\
         | set-up | scheduler | carried Mpps, best window | median window | best ÷ best round-robin | median of per-round ratios | range of per-round ratios |\n\
         |---|---|---:|---:|---:|---:|---|\n"
    );
    let mut targets = Vec::new();
    for (label, vrs, routes) in [
        ("1 VR, full table (950 k routes)", 1usize, None),
        ("100 VRs × 10,000 routes", 100, Some(10_000)),
    ] {
        let base = InArgs {
            routes,
            queue_per_vr: false,
            ..a.inproc(vrs)
        };
        let mut s = a.start(&base, "overhead", &mut cx.tables, cx.hz, |_| {})?;
        let (rates, ratios) = alternate(&mut s, rounds, secs)?;
        let best = |i: usize| rates[i].iter().copied().fold(0.0, f64::max);
        for (i, (name, _, _)) in MODES.iter().enumerate() {
            let lo = ratios[i].iter().copied().fold(f64::MAX, f64::min);
            let hi = ratios[i].iter().copied().fold(0.0, f64::max);
            md += &format!(
                "| {label} | {name} | {:.2} | {:.2} | {:.3} | {:.3} | {lo:.3} – {hi:.3} |\n",
                best(i),
                median(rates[i].clone()),
                best(i) / best(0),
                median(ratios[i].clone())
            );
        }
        if vrs == 1 {
            let (pb, cb) = (best(1) / best(0), best(2) / best(0));
            let (pm, cm) = (median(ratios[1].clone()), median(ratios[2].clone()));
            targets.push(Target {
                what: "scheduler costs ≤ 5 % of the single-VR rate (stride ÷ round-robin ≥ 0.95, same run), packets mode".into(),
                measured: format!("best ÷ best {pb:.3}; median of ratios {pm:.3}"),
                met: pb >= 0.95 && pm >= 0.95,
            });
            targets.push(Target {
                what: "the same in cycles mode".into(),
                measured: format!("best ÷ best {cb:.3}; median of ratios {cm:.3}"),
                met: cb >= 0.95 && cm >= 0.95,
            });
        }
    }
    md += "\nThe best window of each is the least disturbed by the machine's other work; the \
           median of per-round ratios shows how noisy the machine was. Both schedulers run \
           the same per-vector accounting (TSC reads, cost average, watchdog), so this \
           measures the scheduling itself; `docs/perf.md` compares whole binaries.\n";
    Ok(Section {
        scenario: Which::Overhead,
        command: cmd,
        markdown: md,
        targets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_min_water_fills() {
        let _alone = crate::cores_alone();
        let f = max_min(&[1.0, 5.0, 10.0], 9.0);
        assert_eq!(f, vec![1.0, 4.0, 4.0]);
        let f = max_min(&[1.0, 1.0, 1.0], 9.0);
        assert_eq!(f, vec![1.0, 1.0, 1.0]);
        let f = max_min(&[6.0, 6.0, 6.0], 9.0);
        assert_eq!(f, vec![3.0, 3.0, 3.0]);
    }

    /// A fairness session builds and forwards with per-VR offers (small tables, a few
    /// polls on this thread).
    #[test]
    fn queue_per_vr_sessions_forward_each_vrs_offer() {
        let _alone = crate::cores_alone();
        let base = InArgs {
            vrs: 3,
            routes: Some(2000),
            queue_per_vr: true,
            ..InArgs::default()
        };
        let sc = Scenario::from_args(&base, 1.0);
        let mut t = Tables::default();
        let mut b = crate::inproc::topo::build(&sc, &mut t, 1e9).unwrap();
        assert_eq!(b.ctl.len(), 3);
        assert_eq!(b.vr_gens.len(), 3);
        b.ctl[0].set(Offer::Unlimited);
        b.ctl[2].set(Offer::Unlimited);
        for _ in 0..50 {
            b.workers[0].poll();
        }
        let tx: Vec<u64> = b.vrs.iter().map(|v| v.stats().tx_packets).collect();
        assert!(tx[0] > 1000 && tx[2] > 1000, "{tx:?}");
        assert_eq!(tx[1], 0, "vr1 offered nothing");
        assert!(tx[0].abs_diff(tx[2]) <= 256, "{tx:?}");
    }
}
