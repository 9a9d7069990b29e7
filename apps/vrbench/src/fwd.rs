//! `vrbench fwd`: the forwarding rate of vrhost and of the Linux kernel through the same
//! namespace lab, 64-byte frames, measured in one run.
//!
//! What it answers (the targets): does vrhost over AF_XDP forward at least 1.5× what
//! the kernel's native IP forwarder does, on the same lab with the same core assignment, in
//! a single-queue and a 2-queue layout; does vrhost over AF_PACKET at least match the kernel;
//! and with 64 VRs sharing the ports, is the aggregate at least 95 % of one VR's.
//!
//! How:
//! * [`generator`]: XDP live frames (`BPF_PROG_RUN` + `BPF_F_TEST_XDP_LIVE_FRAMES`) out of `a0`,
//!   one pinned thread per generator core, frames rotated over the case's VRs;
//! * [`sink`]: a BPF program at `b0`'s tc ingress counting per VR and dropping — what it
//!   counts is what the DUT forwarded;
//! * [`dut`]: the profiles (`vrhost-afxdp`, `vrhost-afpacket`, `kernel`, `kernel-vr`), a lab
//!   per forwarder kind per layout, and the layouts' queues and cores; [`napi`] places
//!   `p0`'s receive work; [`daemon`] runs vrhost;
//! * [`report`]: medians, ratios, the table and the JSON.
//!
//! Method: every layout builds its labs, then runs `--trials` rounds; each round runs every
//! case once (one after the other, starting one case later each round, so no case always
//! follows the same neighbour), each case for `--seconds` after `--warmup` seconds of
//! traffic that is not counted. Counters are read only after the generator stopped and
//! `--drain-ms` passed. Rates are frames over the generator's own run time. Figures are
//! medians over trials; a ratio between two cases is the median of the per-round ratios
//! (each round's two figures were measured a minute apart at most), with the ratio of the
//! medians beside it. Everything runs on this 2-core host: what shares which core is in
//! each layout's description. A trial during which other processes took more than
//! `--max-other` % of the host's CPU (default 10; see `cpu.rs`) is run again, up to
//! `--retries` times (default 2), and the quietest attempt is kept; and before each
//! attempt vrbench waits (up to `--wait-quiet` seconds) for a quiet second. On a shared
//! machine a busy neighbour otherwise decides the figure.
//!
//! The generator offers what it can (no rate control): the forwarded rate is then the
//! DUT's throughput with loss, not RFC 2544's zero-loss throughput, which later work adds.
//! Where `p0`'s receive work runs inline on the generator's CPU (the `1q` and `2q`
//! layouts), the kernel profiles form a closed loop — each batch of frames is forwarded
//! before the next is made — so "offered" equals "forwarded" there and the figure is what
//! generator and forwarder together get through on that CPU.
//!
//! # Where things run (2-core host)
//!
//! * `1q` — veth's default placement. Generator thread pinned to core 1. `p0`'s NAPI runs in
//!   softirq on the CPU that sent into it, core 1, right after each generator batch: for
//!   `kernel`/`kernel-vr` that is the whole forwarding path (XDP_PASS → skb → IP forward →
//!   `p1` → `b0`'s sink), all on core 1 next to the generator, with core 0 idle (RPS and
//!   XPS are off on the lab's veths); for AF_XDP it is the XDP redirect and the copy into
//!   vrhost's UMEM, for AF_PACKET the skb and the copy into the ring — vrhost's worker
//!   (`cores = [0]`) then forwards on core 0 and its transmit (and the sink, in softirq
//!   after it) runs on core 0 too. So the kernel gets one core shared with the generator
//!   and vrhost gets core 0 plus part of core 1.
//! * `1q-pinned` — the same with `p0`'s NAPI in a kernel thread pinned to core 0 (see
//!   `napi.rs`): the generator alone on core 1, *everything* the router does on core 0 —
//!   the "DUT on core 0" for every profile alike. The price: frames cross CPUs on
//!   the veth (ring and page recycling between cores), and the NAPI thread is an ordinary
//!   task that shares core 0 with vrhost's busy-polling worker.
//! * `2q` — 2-queue veths, a generator thread on each core; veth feeds `p0` queue `c` from
//!   CPU `c`, and its NAPI runs inline there; vrhost `cores = [0, 1]` (worker `c` polls
//!   queue `c`), so each core runs a generator, a NAPI and a vrhost worker. XPS on `p1`
//!   keeps each CPU's kernel transmits on its own queue (see `dut.rs`). vrhost runs a VR on
//!   one worker (its owner); with one VR the other worker hands every frame it receives to
//!   the owner through the VR's ingress ring.
//!
//! Every trial also reports "other%": CPU that work outside the trial took (see `cpu.rs`);
//! each of the trial's threads is an ordinary task, so a busy neighbour lowers its figure.

//! Labs are deleted and daemons stopped on every exit path, Ctrl-C included (SIGINT and
//! SIGTERM set a flag that ends the current trial early and unwinds). A second Ctrl-C exits
//! at once and may leave labs behind: `vrbench lab ls`, `vrbench lab down --name …`.

pub(crate) mod bpf;
mod cpu;
pub(crate) mod daemon;
pub(crate) mod dut;
mod frames;
mod generator;
pub(crate) mod napi;
mod report;
mod sink;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use vrhost_dataplane::RunVrs;
use vrhost_lab::{Forwarder, Side};

use dut::{Layout, P0Napi, Profile, SinkNapi, TestLab};
use report::{Case, Trial};

/// Options of `vrbench fwd`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// Profiles to measure (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Profile::ALL)]
    profiles: Vec<Profile>,
    /// Layouts (comma-separated): `1q` (single-queue veths, generator on core 1, vrhost on
    /// core 0, p0's receive NAPI where veth puts it: on the generator's CPU), `1q-pinned`
    /// (the same with p0's NAPI in a kernel thread pinned to core 0), `2q` (2-queue veths,
    /// a generator thread and a vrhost worker on each of cores 0 and 1), `2q-pinned`.
    #[arg(long, value_delimiter = ',', default_value = "1q,1q-pinned,2q")]
    layouts: Vec<String>,
    /// Rounds of interleaved trials per layout.
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// Counted seconds per trial.
    #[arg(long, default_value_t = 5.0, value_parser = crate::number::quantity)]
    seconds: f64,
    /// Uncounted seconds of traffic before each trial.
    #[arg(long, default_value_t = 0.5, value_parser = crate::number::quantity)]
    warmup: f64,
    /// Wait after the generator stops before reading counters (ms).
    #[arg(long, default_value_t = 300)]
    drain_ms: u64,
    /// VRs of the many-VR work point (vrhost-afxdp and kernel-vr; frames spread evenly);
    /// 0 or 1 leaves it out.
    #[arg(long, default_value_t = 64)]
    many_vrs: u32,
    /// How p0's NAPI is switched on for kernel, kernel-vr and AF_PACKET (veth accepts live
    /// frames only then): an XDP_PASS program, GRO (to compare their cost), or not at all
    /// (to see veth drop them).
    #[arg(long, value_enum, default_value_t = P0Napi::XdpPass)]
    p0_napi: P0Napi,
    /// How b0 (the sink's end of p1) receives: `gro` runs a NAPI there as a NIC's receive
    /// would, which lets vrhost transmit by XDP (`tx = "auto"`); `backlog` is veth's
    /// default, where vrhost transmits through its sockets.
    #[arg(long, value_enum, default_value_t = SinkNapi::Gro)]
    sink_napi: SinkNapi,
    /// vrhost's `[dataplane] run_vrs`: `where-received` (each worker forwards what its own
    /// queues took: on 2q both cores forward one VR) or `on-owner` (one worker per VR).
    #[arg(long, default_value = "where-received", value_parser = parse_run_vrs)]
    run_vrs: RunVrs,
    /// A trial during which other processes used more than this % of the host's CPU is run
    /// again (see --retries).
    #[arg(long, default_value_t = 10.0, value_parser = crate::number::quantity)]
    max_other: f64,
    /// How many times a busy trial is run again; the quietest attempt is kept.
    #[arg(long, default_value_t = 2)]
    retries: u32,
    /// Before each trial, wait up to this many seconds for a second in which other
    /// processes use at most --max-other % of the CPU.
    #[arg(long, default_value_t = 30.0, value_parser = crate::number::quantity)]
    wait_quiet: f64,
    /// Frames per live-frames flush (1–256).
    #[arg(long, default_value_t = 64)]
    batch: u32,
    /// Lab name prefix [default: fwd<pid>]; labs are `<name>-<layout>-<v|k|m>`.
    #[arg(long)]
    name: Option<String>,
    /// The vrhost binary [default: $VRHOST_BIN, next to vrbench, or on PATH].
    #[arg(long)]
    vrhost: Option<PathBuf>,
    /// Print the result as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the JSON result to this file (with the tables on stdout).
    #[arg(long)]
    json_file: Option<PathBuf>,
}

/// `--run-vrs`: a mode by its config-file name.
fn parse_run_vrs(s: &str) -> Result<RunVrs, String> {
    RunVrs::ALL
        .into_iter()
        .find(|r| r.name() == s)
        .ok_or_else(|| format!("{s:?}: one of on-owner, where-received"))
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    if !(1..=256).contains(&args.batch) {
        bail!("--batch: {} is not in 1..=256", args.batch);
    }
    if args.trials == 0 || args.seconds <= 0.0 {
        bail!("--trials and --seconds must be positive");
    }
    let layouts = args
        .layouts
        .iter()
        .map(|l| {
            Layout::named(l).map(|mut l| {
                l.p0_napi = args.p0_napi;
                l.sink_napi = args.sink_napi;
                l.run_vrs = args.run_vrs;
                l
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    for l in &layouts {
        if let Some(c) = l
            .gen_cores
            .iter()
            .chain(&l.dut_cores)
            .find(|c| **c >= cores)
        {
            bail!("layout {} uses core {c}, this host has {cores}", l.name);
        }
    }
    let mut profiles = args.profiles.clone();
    profiles.sort();
    profiles.dedup();
    if profiles.is_empty() {
        bail!("--profiles: none given");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("vrbench fwd needs root: it builds network namespaces and loads XDP programs");
    }
    let bin = if profiles.iter().any(|p| p.is_vrhost()) {
        Some(daemon::find_binary(args.vrhost.as_deref())?)
    } else {
        None
    };

    let stop = crate::stop::on_signal()?;

    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("fwd{}", std::process::id()));
    let load_before = crate::host::loadavg();
    let mut results = Vec::new();
    for layout in &layouts {
        if !args.json {
            eprintln!("layout {}: {}", layout.name, layout.describe());
        }
        let cases = run_layout(args, &name, layout, &profiles, bin.as_deref(), &stop)?;
        results.push(report::LayoutResult::new(layout, cases));
    }
    let run = report::Run {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: crate::host::json(),
        load_before,
        load_after: crate::host::loadavg(),
        trials: args.trials,
        seconds: args.seconds,
        batch: args.batch,
        layouts: results,
    };
    let json = serde_json::to_string_pretty(&run.to_json())?;
    if let Some(path) = &args.json_file {
        std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{}", run.table());
    }
    Ok(())
}

/// The cases of a layout: every profile with 1 VR, and the many-VR point where it applies.
fn cases_of(profiles: &[Profile], many: u32) -> Vec<(Profile, u32)> {
    let mut v = Vec::new();
    for &p in profiles {
        v.push((p, 1));
        if many > 1
            && matches!(
                p,
                Profile::VrhostAfxdp
                    | Profile::VrhostAfxdpQp
                    | Profile::KernelVr
                    | Profile::NoRouter
            )
        {
            v.push((p, many));
        }
    }
    v
}

fn run_layout(
    args: &Args,
    name: &str,
    layout: &Layout,
    profiles: &[Profile],
    bin: Option<&std::path::Path>,
    stop: &AtomicBool,
) -> anyhow::Result<Vec<Case>> {
    let plan = cases_of(profiles, args.many_vrs);
    // One lab per forwarder kind, with as many VRs as its largest case.
    let mut labs: BTreeMap<&'static str, TestLab> = BTreeMap::new();
    for (p, _) in &plan {
        let f = p.forwarder();
        let key = lab_key(f);
        if labs.contains_key(key) {
            continue;
        }
        let vrs = plan
            .iter()
            .filter(|(q, _)| q.forwarder() == f)
            .map(|(_, v)| *v)
            .max()
            .unwrap_or(1);
        let prefix = format!("{name}-{}-{key}", layout.name);
        if !args.json {
            eprintln!("  building lab {prefix} ({f}, {vrs} VR(s))");
        }
        labs.insert(key, TestLab::up(&prefix, f, vrs, layout)?);
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
    }
    let mut cases: Vec<Case> = plan
        .iter()
        .map(|&(profile, vrs)| Case::new(profile.name(), vrs))
        .collect();
    for round in 0..args.trials {
        for k in 0..plan.len() {
            let i = (k + round) % plan.len();
            let (profile, vrs) = plan[i];
            let t = &labs[lab_key(profile.forwarder())];
            if !args.json {
                eprint!(
                    "  round {}/{} {:<16} {:>3} VR: ",
                    round + 1,
                    args.trials,
                    profile.name(),
                    vrs
                );
            }
            // A trial during which other work took more than --max-other % of the CPU is
            // run again (up to --retries times); the quietest attempt is kept.
            let mut best: Option<Trial> = None;
            for attempt in 0..=args.retries {
                let waited = cpu::wait_quiet(
                    args.max_other,
                    Duration::from_secs_f64(args.wait_quiet),
                    stop,
                );
                let mut trial =
                    run_trial(args, layout, profile, vrs, t, bin, stop).with_context(|| {
                        format!("{} {} VR(s), layout {}", profile.name(), vrs, layout.name)
                    })?;
                trial.attempts = attempt + 1;
                trial.waited = waited.as_secs_f64();
                let quiet = trial.foreign_cpu <= args.max_other;
                if !args.json {
                    eprint!(
                        "{:.3} Mpps forwarded of {:.3} offered, other {:.0}%{}",
                        trial.forwarded_mpps(),
                        trial.offered_mpps(),
                        trial.foreign_cpu,
                        if quiet || attempt == args.retries {
                            "\n"
                        } else {
                            "; again: "
                        }
                    );
                }
                if best
                    .as_ref()
                    .is_none_or(|b| trial.foreign_cpu < b.foreign_cpu)
                {
                    best = Some(trial);
                }
                if quiet || stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            cases[i].trials.push(best.expect("at least one attempt"));
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
        }
    }
    Ok(cases)
}

fn lab_key(f: Forwarder) -> &'static str {
    match f {
        Forwarder::Vrhost => "v",
        Forwarder::KernelPlain => "k",
        Forwarder::Kernel => "m",
        Forwarder::KernelBridge => "g",
    }
}

fn run_trial(
    args: &Args,
    layout: &Layout,
    profile: Profile,
    vrs: u32,
    t: &TestLab,
    bin: Option<&std::path::Path>,
    stop: &AtomicBool,
) -> anyhow::Result<Trial> {
    let running = dut::start(
        bin.unwrap_or(std::path::Path::new("vrhost")),
        profile,
        vrs,
        t,
        layout,
    )?;
    let side_a = t.lab.side(Side::A);
    let generator = &t.generator;
    generator.set_vrs(vrs)?;
    let drain = Duration::from_millis(args.drain_ms);
    if args.warmup > 0.0 {
        generator.run(side_a, &layout.gen_cores, args.warmup, args.batch, stop)?;
        std::thread::sleep(drain);
    }
    let sink = running.p0_sink.as_ref().unwrap_or(&t.sink);
    let sink0 = sink.read()?;
    let status0 = running.daemon.as_ref().map(|d| d.status()).transpose()?;
    let veth0 = veth_stats(t)?;
    let daemon_pid = running.daemon.as_ref().map(daemon::Daemon::pid);
    let cpu0 = cpu::snapshot(daemon_pid);
    let daemon0 = daemon_pid.map(cpu::process_seconds);
    let offered = generator.run(side_a, &layout.gen_cores, args.seconds, args.batch, stop)?;
    let foreign_cpu = cpu::foreign_percent(&cpu0, &cpu::snapshot(daemon_pid));
    let daemon_cpu = daemon_pid.zip(daemon0).map(|(pid, (u0, s0))| {
        let (u1, s1) = cpu::process_seconds(pid);
        let secs = offered.elapsed.as_secs_f64().max(1e-9);
        json!({"user_cores": (u1 - u0) / secs, "system_cores": (s1 - s0) / secs})
    });
    std::thread::sleep(drain);
    let sink1 = sink.read()?;
    let status1 = running.daemon.as_ref().map(|d| d.status()).transpose()?;
    let veth1 = veth_stats(t)?;
    drop(running);
    let counts = sink1.since(&sink0);
    let vrhost = match (status0, status1) {
        (Some(a), Some(b)) => {
            let mut d = vrhost_delta(&a, &b);
            d["cpu"] = daemon_cpu.unwrap_or(Value::Null);
            Some(d)
        }
        _ => None,
    };
    Ok(Trial {
        offered: offered.frames,
        seconds: offered.elapsed.as_secs_f64(),
        forwarded: counts.total(),
        other: counts.other,
        per_vr_min: counts.per_vr[..vrs as usize]
            .iter()
            .copied()
            .min()
            .unwrap_or(0),
        per_vr_max: counts.per_vr[..vrs as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0),
        veth: delta_map(&veth0, &veth1),
        foreign_cpu,
        attempts: 1,
        waited: 0.0,
        vrhost,
    })
}

/// Counters from `ethtool -S` of `a0` (its xdp_xmit errors are frames `p0`'s ring refused)
/// and `p0`, nonzero and relevant ones only.
fn veth_stats(t: &TestLab) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    for (ns, dev) in [
        (t.lab.side(Side::A), Side::A.side_ifname()),
        (t.lab.router(), Side::A.port()),
        (t.lab.router(), Side::B.port()),
    ] {
        let out = ns.exec(&["ethtool", "-S", dev])?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some((k, v)) = line.trim().split_once(':') else {
                continue;
            };
            let Ok(v) = v.trim().parse::<u64>() else {
                continue;
            };
            if k.contains("drop") || k.contains("err") || k.contains("full") {
                m.insert(format!("{dev}.{}", k.trim()), v);
            }
        }
    }
    Ok(m)
}

fn delta_map(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    b.iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(a.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// What vrhost's own counters say happened between two `ctl status` replies: per port rx/tx
/// and drops, and the VRs' drops by reason, summed.
fn vrhost_delta(a: &Value, b: &Value) -> Value {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let mut ports = serde_json::Map::new();
    for (pa, pb) in a["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(b["ports"].as_array().into_iter().flatten())
    {
        let mut m = serde_json::Map::new();
        for k in ["rx_packets", "tx_packets", "tx_full", "rx_dropped"] {
            m.insert(k.into(), json!(n(&pb[k]).saturating_sub(n(&pa[k]))));
        }
        m.insert("backend".into(), pb["backend"].clone());
        // The sockets' kernel counters (XDP or packet statistics) and XDP transmit's, as
        // deltas.
        let ka = debug_counters(pa["kernel"]["socket"].as_str().unwrap_or(""));
        let kb = debug_counters(pb["kernel"]["socket"].as_str().unwrap_or(""));
        let mut k = delta_map(&ka, &kb);
        for c in ["xdp_tx_frames", "xdp_tx_failed", "xdp_tx_refused"] {
            k.insert(
                c.into(),
                n(&pb["kernel"][c]).saturating_sub(n(&pa["kernel"][c])),
            );
        }
        m.insert("kernel".into(), json!(k));
        ports.insert(
            pb["name"].as_str().unwrap_or("?").to_string(),
            Value::Object(m),
        );
    }
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    let mut vr_rx = 0;
    let mut vr_tx = 0;
    let vrs_a = a["vrs"].as_array().cloned().unwrap_or_default();
    for vb in b["vrs"].as_array().into_iter().flatten() {
        let va = vrs_a.iter().find(|v| v["name"] == vb["name"]);
        let before = |k: &str| va.map_or(0, |v| n(&v[k]));
        vr_rx += n(&vb["rx_packets"]).saturating_sub(before("rx_packets"));
        vr_tx += n(&vb["tx_packets"]).saturating_sub(before("tx_packets"));
        if let Some(r) = vb["drop_reasons"].as_object() {
            for (k, v) in r {
                let old = va.map_or(0, |v| n(&v["drop_reasons"][k]));
                *reasons.entry(k.clone()).or_default() += n(v).saturating_sub(old);
            }
        }
    }
    reasons.retain(|_, v| *v > 0);
    let d = |k: &str| n(&b[k]).saturating_sub(n(&a[k]));
    json!({
        "ports": ports, "vr_rx": vr_rx, "vr_tx": vr_tx, "vr_drops": reasons,
        "polls": d("polls"), "idle_polls": d("idle_polls"),
    })
}

/// `name: number` pairs of a Rust `Debug` rendering (`XdpStats { rx_dropped: 3, … }`).
fn debug_counters(s: &str) -> BTreeMap<String, u64> {
    s.split(['{', '}', ','])
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            Some((k.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_counters_are_parsed() {
        let _alone = crate::cores_alone();
        let m = debug_counters("XdpStats { rx_dropped: 3, rx_ring_full: 40, name: x }");
        assert_eq!(m.get("rx_dropped"), Some(&3));
        assert_eq!(m.get("rx_ring_full"), Some(&40));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn many_vr_cases_only_where_they_apply() {
        let _alone = crate::cores_alone();
        let c = cases_of(
            &[Profile::VrhostAfxdp, Profile::Kernel, Profile::KernelVr],
            64,
        );
        assert_eq!(
            c,
            [
                (Profile::VrhostAfxdp, 1),
                (Profile::VrhostAfxdp, 64),
                (Profile::Kernel, 1),
                (Profile::KernelVr, 1),
                (Profile::KernelVr, 64)
            ]
        );
        assert_eq!(cases_of(&[Profile::VrhostAfxdp], 1).len(), 1);
    }
}
