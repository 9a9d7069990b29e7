//! `vrbench sync`: the control plane's netlink sync, measured (root: it makes namespaces).
//!
//! * `latency` — a VR's namespace gets `--routes` IPv4 routes from one `ip -batch` (as a
//!   routing daemon or an operator's script would add them); the figure is how long after
//!   `ip` finished the data plane's FIB held them all, next to how long `ip` itself took.
//!   Then the same for deleting them all (`ip route flush`).
//! * `isolation` — the in-process data plane (as `vrbench inproc`: generator and sink inside
//!   one pinned worker's poll) forwards for `--vrs` VRs while another VR's namespace takes
//!   `--rate` route changes per second through the real sync. Windows alternate between quiet
//!   and churning; each churning window's forwarding rate is divided by the quiet window just
//!   before it, and the median ratio is the figure (target ≥ 0.95).
//!
//! The sync thread and the `ip` process are kept off the worker's core, as the daemon keeps
//! its sync threads (and as an operator should keep routing daemons) — on a machine with
//! one core for everything there is nothing to measure.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use vrhost_control::apply;
use vrhost_control::config::{Config, allowed_cores};
use vrhost_control::punt::ControlPlane;
use vrhost_control::sync::{SyncOptions, SyncStats};
use vrhost_dataplane::{Dataplane, DataplaneConfig, Pool, Vr};
use vrhost_lab::{Netns, require_root};

use crate::inproc::session::{Session, median};
use crate::inproc::traffic::Offer;
use crate::inproc::{self, Scenario, topo};

/// Options of `vrbench sync`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    #[command(subcommand)]
    what: What,
    /// Print the results as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(clap::Subcommand, Debug, Clone)]
enum What {
    /// Routes added with one `ip -batch` inside a VR's namespace: time until all are in
    /// the FIB, after the last was added.
    Latency {
        /// Routes to add (IPv4 /24s).
        #[arg(long, default_value_t = 100_000)]
        routes: u32,
    },
    /// Forwarding of other VRs while one VR's namespace churns routes.
    Isolation {
        /// Route changes per second into the churning VR.
        #[arg(long, default_value_t = 10_000)]
        rate: u32,
        /// Forwarding VRs (each with --table routes).
        #[arg(long, default_value_t = 4)]
        vrs: usize,
        /// Routes per forwarding VR.
        #[arg(long, default_value_t = 10_000)]
        table: usize,
        /// Quiet/churning window pairs.
        #[arg(long, default_value_t = 6)]
        rounds: usize,
        /// Seconds per window.
        #[arg(long, default_value_t = 1.0, value_parser = crate::number::quantity)]
        seconds: f64,
    },
}

const VR: &str = r#"
[[port]]
name = "p0"
interface = "p0"
[[vr]]
name = "churn"
[[vr.vif]]
name = "a"
port = "p0"
mac = "02:76:ff:00:00:01"
addresses = ["10.0.0.1/24"]
"#;

/// A VR with its namespace and sync, on `dp` (whose port 0 it uses).
struct Churned {
    /// Holds the namespace, taps and sync thread (all removed on drop).
    _cp: ControlPlane,
    vr: Arc<Vr>,
    stats: Arc<SyncStats>,
    ns: String,
}

fn spare_cores(worker_cores: &[usize]) -> Vec<usize> {
    allowed_cores()
        .into_iter()
        .filter(|c| !worker_cores.contains(c))
        .collect()
}

/// Pin the calling thread (and what it spawns) to `cpus`.
fn pin(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: `c` comes from the allowed set, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pointer and size describe `set`; 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

impl Churned {
    fn new(dp: &Dataplane, cpus: Vec<usize>) -> anyhow::Result<Churned> {
        let cfg = Config::parse("<vrbench sync>", VR)?;
        let plan = &cfg.plans()[0];
        let vr = apply::add_vr(dp, plan, &[0])?;
        let prefix = format!("vrbench-sync-{}-", std::process::id());
        let mut cp = ControlPlane::new(dp.clone(), &prefix);
        cp.set_sync(Some(SyncOptions {
            cpus,
            ..SyncOptions::default()
        }));
        cp.add(plan)?;
        let stats = cp
            .info("churn")
            .and_then(|i| i.sync)
            .context("no sync started")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !stats.ready.load(Ordering::Acquire) {
            if Instant::now() > deadline {
                bail!("the sync's first dump did not finish in 10 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let ns = cp.netns_name("churn");
        Ok(Churned {
            _cp: cp,
            vr,
            stats,
            ns,
        })
    }

    fn netns(&self) -> Netns {
        let mut n = Netns::adopt(&self.ns);
        n.set_keep(true);
        n
    }
}

/// The i-th benchmark prefix: /24s from 32.0.0.0 on (room for 2^24 of them).
fn prefix(i: u32) -> String {
    let a = 32 + (i >> 16);
    format!("{a}.{}.{}.0/24", (i >> 8) & 0xff, i & 0xff)
}

#[derive(Serialize, Debug)]
struct Latency {
    routes: u32,
    machine: String,
    command: String,
    ip_batch_add_s: f64,
    fib_complete_after_last_add_s: f64,
    target_s: f64,
    rss_before_mib: f64,
    rss_with_routes_mib: f64,
    ip_flush_s: f64,
    fib_empty_after_flush_s: f64,
    overruns: u64,
    resyncs: u64,
}

/// CPU seconds (user + system) of `/proc/<path>/stat`.
fn cpu_s(path: &str) -> f64 {
    let Ok(t) = std::fs::read_to_string(format!("/proc/{path}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = t.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based), 11 and 12 after the state field.
    (ticks(11) + ticks(12)) / 100.0
}

/// `/proc` path (`self/task/<tid>`) of this process's thread called `name`.
fn thread_named(name: &str) -> Option<String> {
    for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let tid = e.file_name().to_string_lossy().to_string();
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            return Some(format!("self/task/{tid}"));
        }
    }
    None
}

/// This process's resident memory, MiB (from /proc/self/status).
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Wait until `f` holds, polling every millisecond; the time it first held.
fn until(limit: Duration, f: impl Fn() -> bool) -> anyhow::Result<Instant> {
    let t0 = Instant::now();
    loop {
        if f() {
            return Ok(Instant::now());
        }
        if t0.elapsed() > limit {
            bail!("not reached in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn latency(routes: u32, json: bool) -> anyhow::Result<()> {
    let dp = Dataplane::new(
        Pool::new(4096),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p0".into()],
            ..Default::default()
        },
    )?;
    let c = Churned::new(&dp, Vec::new())?;
    let base = c.vr.fib4.len();
    let lines: Vec<String> = (0..routes)
        .map(|i| format!("route add {} via 10.0.0.2", prefix(i)))
        .collect();
    let rss_before = rss_mib();
    eprintln!("adding {routes} routes with ip -batch in {}", c.ns);
    let t0 = Instant::now();
    c.netns().ip_batch(&lines)?;
    let t_ip = Instant::now();
    let want = base + routes as usize;
    let t_fib = until(Duration::from_secs(600), || c.vr.fib4.len() >= want)?;
    drop(lines);
    std::thread::sleep(Duration::from_millis(200));
    let rss_routes = rss_mib();
    eprintln!("flushing them");
    let t1 = Instant::now();
    c.netns()
        .ip(&["route", "flush", "table", "main", "proto", "boot"])?;
    let t_flush = Instant::now();
    let t_empty = until(Duration::from_secs(600), || c.vr.fib4.len() <= base)?;
    let r = Latency {
        routes,
        machine: crate::host::describe_with_load(),
        command: format!("vrbench sync latency --routes {routes}"),
        ip_batch_add_s: (t_ip - t0).as_secs_f64(),
        fib_complete_after_last_add_s: t_fib.saturating_duration_since(t_ip).as_secs_f64(),
        target_s: if routes <= 100_000 { 2.0 } else { 15.0 },
        rss_before_mib: rss_before,
        rss_with_routes_mib: rss_routes,
        ip_flush_s: (t_flush - t1).as_secs_f64(),
        fib_empty_after_flush_s: t_empty.saturating_duration_since(t_flush).as_secs_f64(),
        overruns: c.stats.overruns.load(Ordering::Relaxed),
        resyncs: c.stats.resyncs.load(Ordering::Relaxed),
    };
    drop(c);
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("vrbench sync latency ({})", r.machine);
        println!(
            "  {} routes added by one ip -batch in {:.2} s",
            r.routes, r.ip_batch_add_s
        );
        println!(
            "  all in the FIB {:.3} s after ip finished (target ≤ {} s)  {}",
            r.fib_complete_after_last_add_s,
            r.target_s,
            if r.fib_complete_after_last_add_s <= r.target_s {
                "MET"
            } else {
                "MISSED"
            }
        );
        println!(
            "  vrbench's memory: {:.0} MiB before, {:.0} MiB holding the routes (FIB + sync mirror)",
            r.rss_before_mib, r.rss_with_routes_mib
        );
        println!(
            "  ip route flush took {:.2} s; FIB empty {:.3} s after",
            r.ip_flush_s, r.fib_empty_after_flush_s
        );
        println!("  netlink overruns {} (resyncs {})", r.overruns, r.resyncs);
    }
    Ok(())
}

#[derive(Serialize, Debug)]
struct Isolation {
    machine: String,
    command: String,
    forwarding_vrs: usize,
    routes_per_vr: usize,
    churn_rate_asked: u32,
    /// Route changes per second the churning VR's FIB took, median over churning windows.
    churn_fib_updates_per_s: f64,
    /// Share of a core the VR's netlink sync thread used while churning (median).
    sync_thread_core_share: f64,
    /// Share of a core the `ip` process (and the kernel on its behalf) used while churning.
    ip_process_core_share: f64,
    /// Forwarding with a busy loop on the control core instead of the churn, ÷ quiet: what
    /// any work on that core costs the worker on this machine (shared physical cores).
    spinner_ratio: f64,
    quiet_mpps: Vec<f64>,
    churn_mpps: Vec<f64>,
    ratios: Vec<f64>,
    median_ratio: f64,
    target: f64,
    worker_core: Option<usize>,
    control_cores: Vec<usize>,
}

#[allow(
    clippy::too_many_arguments,
    reason = "the subcommand's flags, passed on"
)]
fn isolation(
    rate: u32,
    vrs: usize,
    table: usize,
    rounds: usize,
    seconds: f64,
    json: bool,
) -> anyhow::Result<()> {
    if rate == 0 || vrs == 0 || rounds == 0 || seconds <= 0.0 {
        bail!("--rate, --vrs, --rounds and --seconds must be above 0");
    }
    let allowed = allowed_cores();
    let worker_core = allowed.first().copied();
    let spare = spare_cores(&worker_core.into_iter().collect::<Vec<_>>());
    if spare.is_empty() {
        bail!("needs two cores: one for the worker, one for the sync and `ip`");
    }
    let hz = inproc::tsc_hz(Duration::from_millis(200));
    let a = inproc::Args {
        vrs,
        routes: Some(table),
        cores: worker_core.into_iter().collect(),
        ..inproc::Args::default()
    };
    let mut sc = Scenario::from_args(&a, seconds);
    sc.name = "isolation".into();
    let mut tables = topo::Tables::default();
    let mut s = Session::start(&sc, &mut tables, hz)?;
    let c = Churned::new(s.dataplane(), spare.clone())?;
    // The churning VR starts with 10,000 routes; each change flips one's next hop.
    const SET: u32 = 10_000;
    let lines: Vec<String> = (0..SET)
        .map(|i| format!("route add {} via 10.0.0.2", prefix(i)))
        .collect();
    c.netns().ip_batch(&lines)?;
    let base = c.vr.fib4.len();
    until(Duration::from_secs(30), || c.vr.fib4.len() >= base)?;
    let active = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let ip_pid = Arc::new(AtomicU64::new(0));
    let feeder = {
        let (active, stop, written, ns, spare, ip_pid) = (
            active.clone(),
            stop.clone(),
            written.clone(),
            c.ns.clone(),
            spare.clone(),
            ip_pid.clone(),
        );
        std::thread::spawn(move || -> anyhow::Result<()> {
            pin(&spare);
            let mut child = Command::new("ip")
                .args(["-n", &ns, "-force", "-batch", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            ip_pid.store(u64::from(child.id()), Ordering::Relaxed);
            let mut stdin = child.stdin.take().context("stdin")?;
            let per_tick = (rate / 100).max(1);
            let mut i: u64 = 0;
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                next += Duration::from_millis(10);
                if active.load(Ordering::Relaxed) {
                    let mut buf = String::new();
                    for _ in 0..per_tick {
                        let k = (i % u64::from(SET)) as u32;
                        let gw = if (i / u64::from(SET)).is_multiple_of(2) {
                            3
                        } else {
                            2
                        };
                        buf += &format!("route replace {} via 10.0.0.{gw}\n", prefix(k));
                        i += 1;
                    }
                    stdin.write_all(buf.as_bytes())?;
                    stdin.flush()?;
                    written.fetch_add(u64::from(per_tick), Ordering::Relaxed);
                }
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
            }
            drop(stdin);
            let _ = child.wait();
            Ok(())
        })
    };
    eprintln!(
        "[isolation] {vrs} forwarding VRs × {table} routes on core {worker_core:?}; churn VR {} at {rate} changes/s, sync and ip on cores {spare:?}",
        c.ns
    );
    let offers = s.all(Offer::Unlimited);
    s.window(1.0, &offers)?; // warm-up
    let (mut quiet, mut churn, mut ratios, mut fib_rates) = (vec![], vec![], vec![], vec![]);
    let (mut sync_share, mut ip_share) = (vec![], vec![]);
    let sync_thread = thread_named("vrhost-nl-churn").unwrap_or_default();
    for round in 0..rounds {
        let q = s.run("quiet", seconds, &offers)?.carried_mpps;
        active.store(true, Ordering::Relaxed);
        // Let the change stream reach its pace before measuring.
        std::thread::sleep(Duration::from_millis(200));
        let u0 = c.stats.route_updates.load(Ordering::Relaxed);
        let ip_path = ip_pid.load(Ordering::Relaxed).to_string();
        let (s0, i0) = (cpu_s(&sync_thread), cpu_s(&ip_path));
        let t0 = Instant::now();
        let ch = s.run("churn", seconds, &offers)?.carried_mpps;
        let el = t0.elapsed().as_secs_f64();
        let fib_rate = (c.stats.route_updates.load(Ordering::Relaxed) - u0) as f64 / el;
        sync_share.push((cpu_s(&sync_thread) - s0) / el);
        ip_share.push((cpu_s(&ip_path) - i0) / el);
        active.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(300));
        eprintln!(
            "[isolation] round {round}: quiet {q:.3} Mpps, churning {ch:.3} Mpps ({:.3}), {fib_rate:.0} FIB changes/s; sync thread {:.1} %, ip {:.1} % of a core",
            ch / q,
            100.0 * sync_share.last().copied().unwrap_or(0.0),
            100.0 * ip_share.last().copied().unwrap_or(0.0),
        );
        quiet.push(q);
        churn.push(ch);
        ratios.push(ch / q);
        fib_rates.push(fib_rate);
    }
    // The control experiment: a busy loop on the control core, no churn.
    let mut spin = vec![];
    for _ in 0..rounds.min(3) {
        let q = s.run("quiet", seconds, &offers)?.carried_mpps;
        let halt = Arc::new(AtomicBool::new(false));
        let h = {
            let (halt, spare) = (halt.clone(), spare.clone());
            std::thread::spawn(move || {
                pin(&spare);
                while !halt.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let sp = s.run("spinner", seconds, &offers)?.carried_mpps;
        halt.store(true, Ordering::Relaxed);
        let _ = h.join();
        eprintln!(
            "[isolation] control: quiet {q:.3} Mpps, busy loop on the control core {sp:.3} Mpps ({:.3})",
            sp / q
        );
        spin.push(sp / q);
    }
    stop.store(true, Ordering::Relaxed);
    feeder
        .join()
        .map_err(|_| anyhow::anyhow!("feeder panicked"))??;
    let r = Isolation {
        machine: crate::host::describe_with_load(),
        command: format!(
            "vrbench sync isolation --rate {rate} --vrs {vrs} --table {table} --rounds {rounds} --seconds {seconds}"
        ),
        forwarding_vrs: vrs,
        routes_per_vr: table,
        churn_rate_asked: rate,
        churn_fib_updates_per_s: median(fib_rates),
        sync_thread_core_share: median(sync_share),
        ip_process_core_share: median(ip_share),
        spinner_ratio: median(spin),
        quiet_mpps: quiet,
        churn_mpps: churn,
        median_ratio: median(ratios.clone()),
        ratios,
        target: 0.95,
        worker_core,
        control_cores: spare,
    };
    drop(c);
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("vrbench sync isolation ({})", r.machine);
        println!(
            "  {} VRs forwarding, one more taking {:.0} route changes/s in its FIB (asked {})",
            r.forwarding_vrs, r.churn_fib_updates_per_s, r.churn_rate_asked
        );
        println!(
            "  core share while churning: sync thread {:.1} %, ip process {:.1} %",
            100.0 * r.sync_thread_core_share,
            100.0 * r.ip_process_core_share
        );
        println!(
            "  control: a busy loop on the control core instead ÷ quiet: {:.3} (what any work there costs the worker on this machine)",
            r.spinner_ratio
        );
        println!(
            "  churning ÷ quiet forwarding rate, median of {} rounds: {:.3} (target ≥ {})  {}",
            r.ratios.len(),
            r.median_ratio,
            r.target,
            if r.median_ratio >= r.target {
                "MET"
            } else {
                "MISSED"
            }
        );
    }
    Ok(())
}

pub(crate) fn run(a: &Args) -> anyhow::Result<()> {
    if !require_root("vrbench sync") {
        bail!("vrbench sync needs root (it builds a network namespace)");
    }
    match a.what {
        What::Latency { routes } => latency(routes, a.json),
        What::Isolation {
            rate,
            vrs,
            table,
            rounds,
            seconds,
        } => isolation(rate, vrs, table, rounds, seconds, a.json),
    }
}
