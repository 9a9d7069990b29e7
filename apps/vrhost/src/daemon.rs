//! The daemon: ports opened, workers pinned to their cores, VRs applied, then a control
//! loop that serves signals, the control socket and the punt/inject path until told to stop.
//!
//! Threads: one forwarding worker per configured core (each polls queue `w` of every port
//! and owns tx queue `w` of every port, so no queue is shared), and this thread, which does
//! everything else. Because every change goes through this one thread, reloads, `ctl`
//! requests and the punt loop never race each other (the control socket's own threads only
//! read requests and write replies, see `ctl.rs`); the workers see changes through the
//! data plane's published snapshots without stopping.
//!
//! A vanished interface: once a second the loop looks at every port's interface. One that
//! is gone (or was replaced: a new ifindex) marks its VRs down; once an interface of that
//! name is back and up, the port is opened on it again and each worker takes its new queues
//! in at its next burst (`swap.rs`), dropping the old ones.
//!
//! Stopping: SIGTERM/SIGINT set a flag; the loop exits, workers are joined, then ports are
//! dropped (XDP links closed, so the programs detach; sockets closed) and the control
//! namespaces deleted. A crash gets the same from the kernel: the XDP program is held by a
//! link fd and the taps are not persistent, so a restart finds the interfaces free.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use tracing::{error, info, warn};
use vrhost_control::apply;
use vrhost_control::config::{Config, PortSpec, ScalingSpec, VrPlan, ifindex};
use vrhost_control::punt::ControlPlane;
use vrhost_control::sync::SyncOptions;
use vrhost_dataplane::port::{PortId, RxQueue, TxQueue};
use vrhost_dataplane::scale::{ScalePolicy, Scaler};
use vrhost_dataplane::{Dataplane, DataplaneConfig, Drop, Pool, Vr, WaitStats, Watchdog};
use vrhost_fib::NextHop;
use vrhost_io::offcpu;
use vrhost_io::quickpath::Quickpath;
use vrhost_io::sched::{self, Policy};

use crate::ctl;
use crate::heldoff::HeldOff;
use crate::ports::OpenPort;
use crate::recent::Recent;
use crate::swap::{Slot, Swap};

/// Run until SIGTERM/SIGINT (or `deadline`).
pub(crate) fn run(
    cfg: Config,
    path: Option<PathBuf>,
    socket: &Path,
    deadline: Option<Instant>,
) -> anyhow::Result<()> {
    let term = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone())?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
    let mut d = Daemon::start(cfg, path, socket)?;
    info!("vrhost running; stop with SIGTERM or Ctrl-C, reload with SIGHUP");
    d.serve(&term, &hup, deadline);
    d.stop();
    Ok(())
}

struct Daemon {
    cfg: Config,
    path: Option<PathBuf>,
    dp: Dataplane,
    ports: Vec<OpenPort>,
    port_ids: Vec<PortId>,
    control: ControlPlane,
    ctl: ctl::Server,
    stop: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Per port, per worker: where a reopened port's queues are left for the workers.
    slots: Vec<Vec<QueueSlots>>,
    /// The quickpath, for a reopened port to join.
    quickpath: Option<Arc<Quickpath>>,
    /// Each port's interface index when it was opened: a different one means the
    /// interface was replaced, even between two looks.
    ifindexes: Vec<u32>,
    /// Ports whose interface has disappeared (until it is back, up and reattached).
    gone: HashSet<usize>,
    /// Of those, the ones whose interface came back but could not be reattached, with that
    /// interface's index: said once, and tried again only on another interface of the name.
    failed: HashMap<usize, u32>,
    /// TSC ticks per second (watchdog budgets are set in microseconds).
    tsc_hz: f64,
    /// VRs known to be quarantined (logged once).
    quarantined: HashSet<String>,
    /// With `scaling = "on-demand"`.
    scaler: Option<Scaler>,
    /// Each worker's time held off its core.
    held: Vec<HeldOff>,
    /// Snapshots of the VRs' ingress-wait counters, for the recent window `ctl status`
    /// marks by.
    recent: Recent,
}

/// A worker's receive and transmit slot for one port (see [`crate::swap`]).
type QueueSlots = (Arc<Slot<dyn RxQueue>>, Arc<Slot<dyn TxQueue>>);

/// Seconds between placement rounds (VRs moved between workers by measured load).
const PLACEMENT_EVERY: Duration = Duration::from_secs(1);
/// Between on-demand scaling decisions.
const SCALE_EVERY: Duration = Duration::from_millis(100);

/// Apply `[dataplane]` fairness, coalescing, deferral, watchdog and scaling settings;
/// returns the scaler when scaling is on demand (`scaler`: the one running now, kept if
/// still wanted).
fn apply_dataplane(
    dp: &Dataplane,
    cfg: &Config,
    tsc_hz: f64,
    scaler: Option<Scaler>,
) -> anyhow::Result<Option<Scaler>> {
    let d = &cfg.dataplane;
    dp.set_fairness(d.fairness.into());
    dp.set_rx_coalesce(Duration::from_micros(*d.rx_coalesce_us.get_ref() as u64))?;
    dp.set_max_deferral(Duration::from_micros(*d.max_deferral_us.get_ref() as u64))?;
    let scaler = match (d.scaling, scaler) {
        (ScalingSpec::Fixed, _) => {
            if dp.active_workers() != dp.workers() {
                dp.set_active_workers(dp.workers())?;
                info!("scaling fixed: forwarding on all {} workers", dp.workers());
            }
            None
        }
        (ScalingSpec::OnDemand, Some(s)) => Some(s),
        (ScalingSpec::OnDemand, None) => {
            dp.set_active_workers(1)?;
            info!(
                "scaling on demand: forwarding on worker 0, up to {} as load needs",
                dp.workers()
            );
            Some(Scaler::new(ScalePolicy::default()))
        }
    };
    let us = *d.watchdog_us.get_ref() as f64;
    let wd = (us > 0.0).then(|| Watchdog {
        budget_cycles: (us * tsc_hz / 1e6).max(1.0) as u64,
        strikes: *d.watchdog_strikes.get_ref() as u32,
    });
    dp.set_watchdog(wd)?;
    Ok(scaler)
}

impl Daemon {
    fn start(cfg: Config, path: Option<PathBuf>, socket: &Path) -> anyhow::Result<Daemon> {
        cfg.check_host()?;
        let workers = cfg.workers();
        let slots = cfg
            .dataplane
            .pool
            .as_ref()
            .map(|p| *p.get_ref())
            .unwrap_or_else(|| (cfg.ports.len() * workers * 16384).max(32768));
        let pool = Pool::new(slots);
        let names: Vec<String> = cfg.ports.iter().map(|p| p.name.get_ref().clone()).collect();
        let dp = Dataplane::new(
            pool.clone(),
            DataplaneConfig {
                workers,
                ports: names,
                run_vrs: cfg.dataplane.run_vrs.into(),
            },
        )?;
        let tsc_hz = vrhost_dataplane::tsc_hz(Duration::from_millis(50));
        let scaler = apply_dataplane(&dp, &cfg, tsc_hz, None)?;
        let ctl = ctl::Server::bind(socket)?;
        // Open every port before creating anything else: a port that cannot open stops the
        // start with nothing else touched.
        let quickpath = if cfg.ports.iter().any(PortSpec::wants_quickpath) {
            let qp = Arc::new(Quickpath::new().context("quickpath tables")?);
            dp.set_fast_path(qp.clone())?;
            Some(qp)
        } else {
            None
        };
        let mut ports = Vec::new();
        for spec in &cfg.ports {
            let p = OpenPort::open(spec, workers, &pool, quickpath.as_ref())
                .with_context(|| format!("{}: port {:?}", cfg.file, spec.name.get_ref()))?;
            info!(
                "port {} on {}: {}",
                spec.name.get_ref(),
                spec.interface.get_ref(),
                p.describe()
            );
            ports.push(p);
        }
        let port_ids: Vec<PortId> = (0..ports.len() as PortId).collect();
        let ifindexes: Vec<u32> = cfg
            .ports
            .iter()
            .map(|p| ifindex(p.interface.get_ref()))
            .collect();
        let mut rx: Vec<Vec<(PortId, Box<dyn RxQueue>)>> =
            (0..workers).map(|_| Vec::new()).collect();
        let mut tx: Vec<Vec<Box<dyn TxQueue>>> = (0..workers).map(|_| Vec::new()).collect();
        let mut slots = Vec::new();
        for (i, p) in ports.iter_mut().enumerate() {
            let queues = p
                .take_queues()
                .with_context(|| format!("{}: port {:?}", cfg.file, cfg.ports[i].name.get_ref()))?;
            let mut port_slots = Vec::new();
            for (w, (r, t)) in queues.into_iter().enumerate() {
                let (r, rs) = Swap::new(r);
                let (t, ts) = Swap::new(t);
                rx[w].push((port_ids[i], Box::new(r)));
                tx[w].push(Box::new(t));
                port_slots.push((rs, ts));
            }
            slots.push(port_slots);
            // The transmit path each queue took (`tx = auto` decides per device).
            info!(
                "port {} transmits: {}",
                cfg.ports[i].name.get_ref(),
                p.describe()
            );
            if let Some(qp) = &quickpath {
                p.join_quickpath(qp, port_ids[i])?;
            }
        }
        let mut control = ControlPlane::new(dp.clone(), &cfg.control.netns_prefix);
        // Netlink sync threads stay off the workers' cores when there are others.
        let worker_cores = cfg.dataplane.cores.get_ref();
        let spare: Vec<usize> = vrhost_control::config::allowed_cores()
            .into_iter()
            .filter(|c| !worker_cores.contains(c))
            .collect();
        control.set_sync(cfg.control.netlink_sync.then(|| SyncOptions {
            rcvbuf: *cfg.control.netlink_rcvbuf.get_ref(),
            cpus: spare,
            ..SyncOptions::default()
        }));
        for plan in cfg.plans() {
            add_vr(&dp, &mut control, &cfg, &plan, &port_ids)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        let mut held = Vec::new();
        let policy = match *cfg.dataplane.realtime_priority.get_ref() {
            0 => Policy::Ordinary,
            n => Policy::Fifo(u8::try_from(n).context("realtime_priority")?),
        };
        for (w, (r, t)) in rx.into_iter().zip(tx).enumerate() {
            let mut worker = dp.worker(w, r, t)?;
            let core = cfg.dataplane.cores.get_ref()[w];
            let (ready, started) = std::sync::mpsc::channel();
            let worker_stop = stop.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("vrhost-w{w}"))
                    .spawn(move || {
                        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                            warn!("worker {w}: could not pin to core {core}");
                        }
                        // Its naps are µs long: no 50 µs timer slack on them.
                        let _ = sched::set_timer_slack(Duration::from_micros(1));
                        let set = sched::set_policy(policy);
                        let ok = set.is_ok();
                        let _ = ready.send((offcpu::thread_id(), set));
                        if ok {
                            worker.run(&worker_stop);
                        }
                    })?,
            );
            let (tid, set) = started
                .recv()
                .unwrap_or_else(|_| (0, Err(std::io::ErrorKind::Other.into())));
            if let Err(e) = set {
                stop.store(true, Ordering::Relaxed);
                for h in handles {
                    let _ = h.join();
                }
                anyhow::bail!(
                    "[dataplane] realtime_priority = {}: worker {w} could not be made SCHED_FIFO: {e} \
                     (needs root or CAP_SYS_NICE; 0 runs ordinary workers)",
                    cfg.dataplane.realtime_priority.get_ref()
                );
            }
            held.push(HeldOff::new(w, tid, core));
            match policy {
                Policy::Ordinary => info!("worker {w} on core {core}"),
                Policy::Fifo(p) => info!("worker {w} on core {core}, SCHED_FIFO priority {p}"),
            }
        }
        Ok(Daemon {
            cfg,
            path,
            dp,
            ports,
            port_ids,
            control,
            ctl,
            stop,
            workers: handles,
            slots,
            quickpath,
            ifindexes,
            gone: HashSet::new(),
            failed: HashMap::new(),
            tsc_hz,
            quarantined: HashSet::new(),
            scaler,
            held,
            recent: Recent::default(),
        })
    }

    fn serve(&mut self, term: &AtomicBool, hup: &AtomicBool, deadline: Option<Instant>) {
        let mut last_check = Instant::now();
        let mut last_place = Instant::now();
        let mut last_scale = Instant::now();
        while !term.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
            if hup.swap(false, Ordering::Relaxed) {
                match self.reload() {
                    Ok(msg) => info!("reload: {msg}"),
                    Err(e) => error!("reload refused: {e}"),
                }
            }
            let mut requests = 0;
            while let Some(req) = self.ctl.next() {
                let reply = self.handle(&req.cmd, &req.args);
                req.respond(reply);
                requests += 1;
            }
            let moved = self.control.poll();
            if last_check.elapsed() > Duration::from_secs(1) {
                self.check_interfaces();
                self.control.check();
                self.report_quarantines();
                for h in &mut self.held {
                    if let Some(w) = h.look() {
                        warn!("{w}");
                    }
                }
                let now = Instant::now();
                if self.recent.due(now) {
                    let vrs = self.dp.vrs();
                    let waits = vrs.iter().map(|vr| (key(vr), vr.stats().ingress_wait));
                    self.recent.snapshot(now, waits);
                }
                last_check = Instant::now();
            }
            if let Some(sc) = self.scaler.as_mut()
                && last_scale.elapsed() > SCALE_EVERY
            {
                let t = sc.tick(&self.dp);
                if t.changed.is_some() {
                    let load: Vec<String> = t
                        .load
                        .iter()
                        .map(|l| format!("{:.0}%", 100.0 * l))
                        .collect();
                    info!(
                        "scaling: forwarding on {} worker(s) now (load was {})",
                        t.active,
                        load.join(", ")
                    );
                }
                last_scale = Instant::now();
            }
            if self.dp.active_workers() > 1 && last_place.elapsed() > PLACEMENT_EVERY {
                let moves = self.dp.rebalance(0.1, 2).expect("0.1 is a valid margin");
                for (vr, from, to) in moves {
                    info!("placement: VR {vr} moved from worker {from} to worker {to} (load)");
                }
                last_place = Instant::now();
            }
            if moved == 0 && requests == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Apply the config file again. Nothing changes unless the whole file is good; VRs that
    /// did not change are not touched.
    fn reload(&mut self) -> Result<String, String> {
        let Some(path) = &self.path else {
            return Err("running the built-in example: there is no file to reload".into());
        };
        let next = Config::load(path).map_err(|e| e.to_string())?;
        next.check_host().map_err(|e| e.to_string())?;
        if let Some(why) = self.cfg.restart_needed(&next) {
            return Err(format!("{why}: restart vrhost to apply that"));
        }
        let old: BTreeMap<String, VrPlan> = self
            .cfg
            .plans()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        let new: BTreeMap<String, VrPlan> = next
            .plans()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        self.scaler = apply_dataplane(&self.dp, &next, self.tsc_hz, self.scaler.take())
            .map_err(|e| e.to_string())?;
        let (mut added, mut removed, mut changed) = (0, 0, 0);
        let mut errors = Vec::new();
        let mut tuned = Vec::new();
        for (name, plan) in &old {
            match new.get(name) {
                Some(p) if p == plan => {}
                Some(p) if apply::only_tunables_differ(plan, p) => {
                    // Weight, policers or pinning: changed in place, traffic undisturbed.
                    match apply::tune(&self.dp, p) {
                        Ok(()) => changed += 1,
                        Err(e) => errors.push(format!("{e:#}")),
                    }
                    tuned.push(name.clone());
                }
                other => {
                    self.control.remove(name);
                    if let Err(e) = self.dp.remove_vr(name) {
                        warn!("removing VR {name:?}: {e}");
                    }
                    if other.is_some() {
                        changed += 1;
                    } else {
                        removed += 1;
                    }
                }
            }
        }
        for (name, plan) in &new {
            if old.get(name) == Some(plan) || tuned.contains(name) {
                continue;
            }
            if let Err(e) = add_vr(&self.dp, &mut self.control, &next, plan, &self.port_ids) {
                errors.push(format!("{e:#}"));
            } else if !old.contains_key(name) {
                added += 1;
            }
        }
        self.cfg = next;
        let msg = format!("{added} VRs added, {removed} removed, {changed} changed");
        if errors.is_empty() {
            Ok(msg)
        } else {
            Err(format!("{msg}; failed: {}", errors.join("; ")))
        }
    }

    fn handle(&mut self, cmd: &str, args: &Value) -> Value {
        let result = match cmd {
            "reload" => self.reload().map(|msg| json!({"message": msg})),
            "status" => Ok(self.status()),
            "vrs" => Ok(self.list_vrs()),
            "routes" => self.routes(args),
            "neigh" => self.neighbours(args),
            "show" => self.show(args),
            "netns" => self.netns(args),
            "add" => self.add_vrs(args).map(|msg| json!({"message": msg})),
            "remove" => self.remove_vr(args).map(|msg| json!({"message": msg})),
            "release" => self.release(args).map(|msg| json!({"message": msg})),
            other => Err(format!("unknown command {other:?}")),
        };
        match result {
            Ok(mut v) => {
                if let Some(o) = v.as_object_mut() {
                    o.insert("ok".into(), Value::Bool(true));
                }
                v
            }
            Err(e) => json!({"ok": false, "error": e}),
        }
    }

    /// The `vr` argument, naming a VR that exists.
    fn vr_arg(&self, args: &Value) -> Result<Arc<vrhost_dataplane::Vr>, String> {
        let name = args
            .get("vr")
            .and_then(Value::as_str)
            .ok_or("the request names no \"vr\"")?;
        self.dp
            .vr(name)
            .ok_or_else(|| format!("no virtual router {name:?}"))
    }

    /// "up", "quarantined (…)", "down (…)" or "degraded (…)".
    fn vr_state(&self, vr: &str) -> String {
        if let Some(v) = self.dp.vr(vr)
            && v.quarantined()
        {
            return format!(
                "quarantined (watchdog: {} vectors over budget; vrhost ctl release {vr})",
                v.stats().watchdog_offences
            );
        }
        let vifs = self.dp.vifs(vr).unwrap_or_default();
        let down: Vec<&str> = vifs
            .iter()
            .filter(|v| self.gone.contains(&usize::from(v.config.port)))
            .map(|v| v.config.name.as_str())
            .collect();
        if !down.is_empty() {
            let failed = vifs
                .iter()
                .any(|v| self.failed.contains_key(&usize::from(v.config.port)));
            return format!(
                "down ({} lost its port{})",
                down.join(", "),
                if failed {
                    "; its interface is back but could not be reattached: make it anew or restart vrhost"
                } else {
                    ""
                }
            );
        }
        let problems = self
            .control
            .info(vr)
            .map(|i| i.problems)
            .unwrap_or_default();
        if problems.is_empty() {
            "up".into()
        } else {
            format!("degraded ({})", problems.join("; "))
        }
    }

    fn list_vrs(&self) -> Value {
        let vrs: Vec<Value> = self
            .dp
            .vrs()
            .iter()
            .map(|vr| {
                let info = self.control.info(vr.name());
                json!({
                    "name": vr.name(),
                    "vifs": self.dp.vifs(vr.name()).map(|v| v.len()).unwrap_or(0),
                    "routes4": vr.fib4.len(),
                    "routes6": vr.fib6.len(),
                    "neighbours": vr.neigh.entries().len(),
                    "netns": info.map(|i| i.netns),
                    "state": self.vr_state(vr.name()),
                })
            })
            .collect();
        json!({"view": "vrs", "vrs": vrs})
    }

    fn vif_names(&self, vr: &str) -> BTreeMap<u32, String> {
        self.dp
            .vifs(vr)
            .unwrap_or_default()
            .iter()
            .map(|v| (u32::from(v.id), v.config.name.clone()))
            .collect()
    }

    fn routes(&self, args: &Value) -> Result<Value, String> {
        let vr = self.vr_arg(args)?;
        let names = self.vif_names(vr.name());
        let dev = |i: u32| names.get(&i).cloned().unwrap_or_else(|| format!("#{i}"));
        let hop = |h: &NextHop| match *h {
            NextHop::Via { addr, ifindex } => format!("via {addr} dev {}", dev(ifindex)),
            NextHop::Attached { ifindex } => format!("dev {}", dev(ifindex)),
            NextHop::Local => "local".into(),
            NextHop::Drop => "blackhole".into(),
            NextHop::Unreachable => "unreachable".into(),
            NextHop::Prohibit => "prohibit".into(),
        };
        // As `ip route` shows them: a multipath route's members with their weights, and a
        // resilient set's with the buckets each holds now.
        let hops = |set: &vrhost_fib::NextHopSet| -> Vec<String> {
            let held = |i: usize| {
                set.buckets()
                    .iter()
                    .filter(|&&b| usize::from(b) == i)
                    .count()
            };
            match set.hops() {
                [one] => vec![hop(one)],
                _ if !set.buckets().is_empty() => (set.members().enumerate())
                    .map(|(i, (h, w))| format!("{} weight {w} buckets {}", hop(&h), held(i)))
                    .collect(),
                _ => (set.members())
                    .map(|(h, w)| format!("{} weight {w}", hop(&h)))
                    .collect(),
            }
        };
        let family = args.get("family").and_then(Value::as_u64);
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(usize::MAX, |l| l as usize);
        let mut routes = Vec::new();
        let (n4, n6) = (vr.fib4.len(), vr.fib6.len());
        if family != Some(6) {
            for (p, set) in vr.fib4.routes().into_iter().take(limit) {
                routes.push(json!({"prefix": p.to_string(), "nexthops": hops(&set)}));
            }
        }
        if family != Some(4) {
            let left = limit.saturating_sub(routes.len());
            for (p, set) in vr.fib6.routes().into_iter().take(left) {
                routes.push(json!({"prefix": p.to_string(), "nexthops": hops(&set)}));
            }
        }
        Ok(
            json!({"view": "routes", "vr": vr.name(), "family": family, "routes4": n4, "routes6": n6, "routes": routes}),
        )
    }

    fn neighbours(&self, args: &Value) -> Result<Value, String> {
        let vr = self.vr_arg(args)?;
        let names = self.vif_names(vr.name());
        let n: Vec<Value> = vr
            .neigh
            .entries()
            .into_iter()
            .map(|(vif, addr, mac)| {
                json!({
                    "address": addr.to_string(),
                    "mac": mac.to_string(),
                    "vif": names.get(&u32::from(vif)).cloned().unwrap_or_else(|| format!("#{vif}")),
                })
            })
            .collect();
        Ok(json!({"view": "neigh", "vr": vr.name(), "neighbours": n}))
    }

    fn show(&self, args: &Value) -> Result<Value, String> {
        let vr = self.vr_arg(args)?;
        let s = vr.stats();
        let qp = self.dp.fast_counts(vr.name()).unwrap_or_default();
        let drops: BTreeMap<&str, u64> = Drop::ALL
            .iter()
            .map(|d| (d.name(), s.drop(*d)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let info = self.control.info(vr.name()).unwrap_or_default();
        let vifs: Vec<Value> = self
            .dp
            .vifs(vr.name())
            .unwrap_or_default()
            .iter()
            .map(|v| {
                let st = v.stats();
                let tap = info.taps.get(usize::from(v.id));
                json!({
                    "name": v.config.name,
                    "mac": v.config.mac.to_string(),
                    "mtu": v.config.mtu,
                    "port": self.cfg.ports.get(usize::from(v.config.port)).map(|p| p.name.get_ref().clone()),
                    "rx_packets": st.rx_packets, "tx_packets": st.tx_packets,
                    "tap": tap.map(|t| format!("{t:?}")),
                })
            })
            .collect();
        let sync = info.sync.as_ref().map(|st| {
            use std::sync::atomic::Ordering::Relaxed;
            json!({
                "ready": st.ready.load(Relaxed),
                "messages": st.messages.load(Relaxed),
                "route_updates": st.route_updates.load(Relaxed),
                "neigh_updates": st.neigh_updates.load(Relaxed),
                "overruns": st.overruns.load(Relaxed),
                "resyncs": st.resyncs.load(Relaxed),
                "bad_messages": st.bad_messages.load(Relaxed),
                "unusable_routes": st.unusable_routes.load(Relaxed),
                "kernel_routes4": st.kernel_routes4.load(Relaxed),
                "kernel_routes6": st.kernel_routes6.load(Relaxed),
                "nexthop_objects": st.nexthop_objects.load(Relaxed),
                "last_full_sync_ms": st.last_full_sync_us.load(Relaxed) as f64 / 1000.0,
            })
        });
        Ok(json!({
            "view": "show",
            "name": vr.name(),
            "state": self.vr_state(vr.name()),
            "netns": info.netns,
            "weight": vr.weight.load(std::sync::atomic::Ordering::Relaxed),
            "punt_rate": vr.config.punt_rate,
            "punt_burst": vr.config.punt_burst,
            "flow_cache": vr.config.flow_cache,
            "flow_cache_key": vr.config.flow_cache_key.name(),
            "routes4": vr.fib4.len(),
            "routes6": vr.fib6.len(),
            "neighbours": vr.neigh.entries().len(),
            "counters": {
                "rx_packets": s.rx_packets + qp.0, "tx_packets": s.tx_packets + qp.0,
                "rx_bytes": s.rx_bytes + qp.1, "tx_bytes": s.tx_bytes + qp.1,
                "quickpath_packets": qp.0, "quickpath_bytes": qp.1,
                "punted": s.punted, "injected": s.injected,
                "punt_policed": s.drop(Drop::PuntPoliced),
                "neigh_miss": s.neigh_miss, "icmp_sent": s.icmp_sent,
                "flow_hits": s.flow_hits, "flow_misses": s.flow_misses,
                "fragments": s.fragments,
                "tap_errors": info.tap_errors,
                "taps_recreated": info.taps_recreated,
            },
            "drops": drops,
            "ingress_wait": self.vr_wait_json(&vr, &s.ingress_wait, true),
            "vifs": vifs,
            "sync": sync,
            "problems": info.problems,
        }))
    }

    /// [`wait_json`] for VR `vr`, with `recent`: the same over the last minute or so
    /// ([`Recent`]; `window_s` how long; `null` until the daemon has a snapshot).
    fn vr_wait_json(&self, vr: &Arc<Vr>, w: &WaitStats, buckets: bool) -> Value {
        let bound = self.dp.max_deferral();
        let mut v = wait_json(w, buckets, bound);
        v["recent"] = match self.recent.window(key(vr), Instant::now(), w) {
            Some((span, d)) => {
                let mut r = wait_json(&d, false, bound);
                r["window_s"] = json!(span.as_secs_f64());
                r
            }
            None => Value::Null,
        };
        v
    }

    fn netns(&self, args: &Value) -> Result<Value, String> {
        let vr = self.vr_arg(args)?;
        let info = self
            .control
            .info(vr.name())
            .ok_or_else(|| format!("VR {:?} has no control namespace (taps = false)", vr.name()))?;
        Ok(json!({"netns": info.netns}))
    }

    /// `vrhost ctl add FILE`: VRs from a TOML snippet, all or none.
    fn add_vrs(&mut self, args: &Value) -> Result<String, String> {
        let file = args
            .get("file")
            .and_then(Value::as_str)
            .unwrap_or("<request>");
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .ok_or("the request has no \"text\"")?;
        let (merged, plans) = self.cfg.add_vrs(file, text).map_err(|e| e.to_string())?;
        let mut done = Vec::new();
        for plan in &plans {
            if let Err(e) = add_vr(&self.dp, &mut self.control, &merged, plan, &self.port_ids) {
                for name in done {
                    self.control.remove(name);
                    let _ = self.dp.remove_vr(name);
                }
                return Err(format!("{e:#}"));
            }
            done.push(plan.name.as_str());
        }
        self.cfg = merged;
        Ok(format!(
            "added {} (until the next reload, which makes the running VRs those of the file)",
            done.join(", ")
        ))
    }

    /// `vrhost ctl release VR`: a VR the watchdog quarantined is scheduled again.
    fn release(&mut self, args: &Value) -> Result<String, String> {
        let vr = self.vr_arg(args)?;
        match self.dp.release_vr(vr.name()) {
            Ok(true) => {
                info!("VR {} released from quarantine", vr.name());
                Ok(format!("VR {} released", vr.name()))
            }
            Ok(false) => Ok(format!("VR {} was not quarantined", vr.name())),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `vrhost ctl remove VR`.
    fn remove_vr(&mut self, args: &Value) -> Result<String, String> {
        let vr = self.vr_arg(args)?;
        let name = vr.name().to_string();
        drop(vr);
        self.control.remove(&name);
        self.dp.remove_vr(&name).map_err(|e| e.to_string())?;
        if let Some(c) = self.cfg.without_vr(&name) {
            self.cfg = c;
        }
        info!("VR {name} removed");
        Ok(format!("removed {name}"))
    }

    fn status(&self) -> Value {
        let ports: Vec<Value> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let s = self.dp.port_stats(self.port_ids[i]).unwrap_or_default();
                let spec = &self.cfg.ports[i];
                json!({
                    "name": spec.name.get_ref(),
                    "interface": spec.interface.get_ref(),
                    "backend": p.describe(),
                    "up": !self.gone.contains(&i),
                    "reattach_failed": self.failed.contains_key(&i),
                    "rx_packets": s.rx_packets, "rx_bytes": s.rx_bytes,
                    "tx_packets": s.tx_packets, "tx_bytes": s.tx_bytes,
                    "tx_full": s.tx_full, "rx_dropped": s.rx_dropped,
                    "kernel": p.stats_json(),
                })
            })
            .collect();
        let vrs: Vec<Value> = self
            .dp
            .vrs()
            .iter()
            .map(|vr| {
                let s = vr.stats();
                let qp = self.dp.fast_counts(vr.name()).unwrap_or_default();
                let vifs = self.dp.vifs(vr.name()).unwrap_or_default();
                let drops: BTreeMap<&str, u64> = Drop::ALL
                    .iter()
                    .map(|d| (d.name(), s.drop(*d)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                json!({
                    "name": vr.name(),
                    "vifs": vifs.len(),
                    "state": self.vr_state(vr.name()),
                    "quarantined": vr.quarantined(),
                    "weight": vr.weight(),
                    "worker": vr.owner(),
                    "pinned": vr.pinned().is_some(),
                    "rx_packets": s.rx_packets + qp.0, "tx_packets": s.tx_packets + qp.0,
                    "quickpath_packets": qp.0,
                    "punted": s.punted, "injected": s.injected,
                    "drops": drops.values().sum::<u64>(),
                    "drop_reasons": drops,
                    "vectors": s.vectors,
                    "cycles": s.cycles,
                    "cycles_per_packet": if s.scheduled == 0 { 0.0 } else { s.cycles as f64 / s.scheduled as f64 },
                    "watchdog_offences": s.watchdog_offences,
                    "watchdog_excused": s.watchdog_excused,
                    "ingress_wait": self.vr_wait_json(vr, &s.ingress_wait, false),
                })
            })
            .collect();
        let (polls, idle) = self.dp.polls();
        let cores = self.cfg.dataplane.cores.get_ref();
        let workers: Vec<Value> = self
            .dp
            .worker_stats()
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut v = json!({
                    "worker": i, "core": cores.get(i), "vrs": w.vrs,
                    "active": w.active, "rx_queues": w.rx_queues,
                    "polls": w.polls, "idle_polls": w.idle_polls,
                    "busy_cycles": w.busy_cycles, "rx_held": w.rx_held,
                    "deferral_polls": w.deferral_polls,
                });
                if let (Some(h), Some(o)) = (self.held.get(i), v.as_object_mut())
                    && let Value::Object(m) = h.status()
                {
                    o.extend(m);
                }
                v
            })
            .collect();
        json!({
            "ok": true, "ports": ports, "vrs": vrs, "workers": workers,
            "fairness": self.dp.fairness().name(),
            "realtime_priority": self.cfg.dataplane.realtime_priority.get_ref(),
            "rx_coalesce_us": self.dp.rx_coalesce().as_micros() as u64,
            "max_deferral_us": self.dp.max_deferral().as_micros() as u64,
            "run_vrs": self.dp.run_vrs().name(),
            "active_workers": self.dp.active_workers(),
            "polls": polls, "idle_polls": idle,
        })
    }

    /// Log VRs the watchdog quarantined since the last look.
    fn report_quarantines(&mut self) {
        for vr in self.dp.vrs() {
            let q = vr.quarantined();
            if q && self.quarantined.insert(vr.name().to_string()) {
                error!(
                    "VR {} quarantined by the watchdog: its forwarding path held the core over \
                     budget {} times; its traffic is dropped (vr-quarantined) until \
                     `vrhost ctl release {}`",
                    vr.name(),
                    vr.stats().watchdog_offences,
                    vr.name()
                );
            } else if !q {
                self.quarantined.remove(vr.name());
            }
        }
    }

    /// Report interfaces that disappeared, and reattach a port whose interface is back
    /// and up (its VRs are up again); one that cannot be reattached is said once and stays
    /// down.
    fn check_interfaces(&mut self) {
        for i in 0..self.cfg.ports.len() {
            let spec = &self.cfg.ports[i];
            let iface = spec.interface.get_ref().clone();
            let now = ifindex(&iface);
            let present = now != 0;
            if present && now != self.ifindexes[i] && self.gone.insert(i) {
                error!(
                    "interface {iface} of port {} was replaced (ifindex {} → {now}); its VRs \
                     are down until the port is reattached",
                    spec.name.get_ref(),
                    self.ifindexes[i]
                );
            }
            if present
                && self.gone.contains(&i)
                && self.failed.get(&i) != Some(&now)
                && vrhost_io::link::is_up(&iface)
            {
                match self.reattach(i) {
                    Ok(how) => {
                        self.gone.remove(&i);
                        self.failed.remove(&i);
                        self.ifindexes[i] = now;
                        info!(
                            "interface {iface} of port {} is back: port reattached ({how}); \
                             its VRs are up",
                            self.cfg.ports[i].name.get_ref()
                        );
                    }
                    Err(e) => {
                        self.failed.insert(i, now);
                        warn!(
                            "interface {iface} of port {} is back, but reattaching the port \
                             failed: {e:#}; its VRs stay down until the interface is made anew (a new \
                             ifindex) or vrhost is restarted",
                            self.cfg.ports[i].name.get_ref()
                        );
                    }
                }
            } else if !present {
                self.failed.remove(&i);
            }
            let spec = &self.cfg.ports[i];
            if !present && self.gone.insert(i) {
                let vrs: Vec<String> = self
                    .dp
                    .vrs()
                    .iter()
                    .filter(|vr| {
                        self.dp
                            .vifs(vr.name())
                            .unwrap_or_default()
                            .iter()
                            .any(|v| usize::from(v.config.port) == i)
                    })
                    .map(|vr| vr.name().to_string())
                    .collect();
                error!(
                    "interface {} of port {} disappeared; VRs down: {}",
                    spec.interface.get_ref(),
                    spec.name.get_ref(),
                    vrs.join(", ")
                );
            }
        }
    }

    /// Open port `i` again on its (new) interface and leave each worker its new queues; the
    /// old ones are dropped by whichever worker holds them, at its next burst. Returns how
    /// the port was opened.
    fn reattach(&mut self, i: usize) -> anyhow::Result<String> {
        let spec = &self.cfg.ports[i];
        let workers = self.slots[i].len();
        let mut p = OpenPort::open(spec, workers, self.dp.pool(), self.quickpath.as_ref())?;
        let queues = p.take_queues()?;
        if let Some(qp) = &self.quickpath {
            p.join_quickpath(qp, self.port_ids[i])?;
        }
        for ((r, t), (rs, ts)) in queues.into_iter().zip(&self.slots[i]) {
            rs.put(r);
            ts.put(t);
        }
        let how = p.describe();
        // The old port's sockets close once the workers have dropped its queues.
        self.ports[i] = p;
        Ok(how)
    }

    fn stop(mut self) {
        info!("stopping");
        self.stop.store(true, Ordering::Relaxed);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        let names: Vec<String> = self.control.vrs().map(str::to_string).collect();
        for n in names {
            self.control.remove(&n);
        }
        // Ports last: their XDP links and sockets close here.
        self.ports.clear();
        info!("stopped");
    }
}

/// The key [`Recent`] knows a VR by: its `Arc`'s address, which no other VR has while it
/// lives (a VR made again under the same name is another VR, with counters of its own).
fn key(vr: &Arc<Vr>) -> usize {
    Arc::as_ptr(vr) as usize
}

/// How long a VR's packets waited in its ingress rings since it was made (sampled; see
/// `vrhost_dataplane::wait`), in µs: quantiles are their bucket's upper bound (within 25 %),
/// `null` before any sample. With `buckets`, every nonempty bucket as `[from, to, count]`
/// (`to` is `null` for the last, open one). `over_bound`: how many samples surely waited
/// at least `bound`, the deferral's bound (`null` with deferring off): more than 1 % of
/// them says the VRs cannot be kept within it (`ctl status` marks the VR).
fn wait_json(w: &WaitStats, buckets: bool, bound: Duration) -> Value {
    let us = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e6);
    let mut v = json!({
        "samples": w.samples(),
        "mean_us": us(w.mean()),
        "p50_us": us(w.quantile(0.5)),
        "p99_us": us(w.quantile(0.99)),
        "max_us": (w.samples() > 0).then(|| w.max_ns as f64 / 1e3),
        "bound_us": (!bound.is_zero()).then_some(bound.as_micros() as u64),
        "over_bound": (!bound.is_zero()).then(|| w.at_least(bound)),
    });
    if buckets {
        let b: Vec<Value> = (w.buckets.iter().enumerate())
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| {
                let (lo, hi) = vrhost_dataplane::wait::bounds(i);
                let hi = (hi != u64::MAX).then(|| hi as f64 / 1e3);
                json!([lo as f64 / 1e3, hi, c])
            })
            .collect();
        v["buckets"] = b.into();
    }
    v
}

fn add_vr(
    dp: &Dataplane,
    control: &mut ControlPlane,
    cfg: &Config,
    plan: &VrPlan,
    ports: &[PortId],
) -> anyhow::Result<()> {
    apply::add_vr(dp, plan, ports)?;
    if cfg.control.taps
        && let Err(e) = control.add(plan)
    {
        let _ = dp.remove_vr(&plan.name);
        return Err(e.into());
    }
    info!("VR {} up ({} VIFs)", plan.name, plan.vifs.len());
    Ok(())
}
