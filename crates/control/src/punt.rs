//! Each VR's control plane: a network namespace `<prefix><vr>` holding one tap per VIF with
//! the VIF's name, MAC, MTU and addresses, and the loop that carries punted frames to those
//! taps and injects what the kernel sends back.
//!
//! Why a namespace per VR: a virtual router must answer ARP, ND and ping like a real one and
//! host routing daemons; the Linux stack in its own namespace does all of that, and keeps
//! tenants with overlapping addresses apart (DESIGN.md, "Virtual router model"). This module
//! sets the namespace up (forwarding on, so a packet punted for an unresolved neighbour is
//! forwarded by the kernel, which resolves the neighbour on the way; redirects off), applies
//! the config's addresses, routes and static neighbours there with one `ip -batch`, and starts
//! the VR's netlink sync ([`crate::sync`]), which makes the data plane follow whatever the
//! namespace holds from then on: the kernel is the one source of truth for the VR's routes.
//!
//! A namespace left behind by a daemon that crashed is adopted, not duplicated: its taps
//! vanished with the old process (they are not persistent), so adopting means creating them
//! again. A VR removed by a reload, or every VR on a clean stop, takes its namespace with it.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use tracing::{error, info, warn};
use vrhost_dataplane::{Dataplane, Pool, VifId, Vr};
use vrhost_io::tap::{Tap, TapStats};
use vrhost_lab::Netns;

use crate::apply::addr_strings;
use crate::config::{IpPrefixSpec, RoutePlan, RouteType, VrPlan};
use crate::sync::{Sync, SyncOptions, SyncStats};

/// Why a VR's control namespace could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PuntError {
    /// Namespace or interface commands failed.
    #[error("control namespace of {vr:?}: {source}")]
    Netns {
        /// The VR.
        vr: String,
        /// Why.
        source: vrhost_lab::NetnsError,
    },
    /// A tap could not be created.
    #[error("control namespace of {vr:?}: {source}")]
    Tap {
        /// The VR.
        vr: String,
        /// Why.
        source: vrhost_io::tap::TapError,
    },
    /// The netlink sync could not start.
    #[error(transparent)]
    Sync(#[from] crate::sync::SyncError),
}

/// Fields drop in order: the sync thread stops first, then the taps close, then the
/// namespace goes.
struct VrCtl {
    sync: Option<Sync>,
    /// Indexed by VIF id.
    taps: Vec<Tap>,
    ns: Netns,
    vr: Arc<Vr>,
    /// (device, inode) of `/run/netns/<name>` when it was made or adopted.
    ns_id: Option<(u64, u64)>,
    /// Frames a tap refused (its device deleted, or the kernel's queue full).
    tap_errors: u64,
    /// Taps deleted from the namespace and made again.
    taps_recreated: u64,
    /// What the VR was built from (to rebuild a tap).
    plan: VrPlan,
    /// Problems found here (not by the sync), by key.
    problems: BTreeMap<String, String>,
}

/// The control-plane side of a VR, for `vrhost ctl`.
#[derive(Debug, Clone, Default)]
pub struct VrControlInfo {
    /// Its namespace.
    pub netns: String,
    /// Tap counters by VIF id.
    pub taps: Vec<TapStats>,
    /// Frames taps refused.
    pub tap_errors: u64,
    /// Taps deleted by hand and made again.
    pub taps_recreated: u64,
    /// Why the VR is degraded (empty: it is not).
    pub problems: Vec<String>,
    /// The netlink sync's counters, if it runs.
    pub sync: Option<Arc<SyncStats>>,
}

fn ns_id(name: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(std::path::Path::new("/run/netns").join(name)).ok()?;
    Some((m.dev(), m.ino()))
}

/// Create VIF `i`'s tap in `ns` (down, no addresses yet).
fn make_tap(ns: &Netns, plan: &VrPlan, i: usize) -> Result<Tap, PuntError> {
    let v = &plan.vifs[i];
    let nserr = |source| PuntError::Netns {
        vr: plan.name.clone(),
        source,
    };
    let tap = ns
        .run(|| Tap::create(&v.name))
        .map_err(nserr)?
        .map_err(|source| PuntError::Tap {
            vr: plan.name.clone(),
            source,
        })?;
    // IPv6 on the tap without duplicate detection: the data plane owns the address.
    ns.sysctl(&format!("net.ipv6.conf.{}.accept_dad=0", v.name))
        .map_err(nserr)?;
    Ok(tap)
}

/// The `ip -batch` lines that give the taps (all, or only VIF `only`) their MAC, MTU and
/// addresses, and the config's static neighbours and routes (those through that VIF).
fn setup_lines(plan: &VrPlan, only: Option<usize>) -> Vec<String> {
    let mine = |i: usize| only.is_none_or(|o| o == i);
    let mut lines = Vec::new();
    for (_, v) in plan.vifs.iter().enumerate().filter(|(i, _)| mine(*i)) {
        lines.push(format!(
            "link set dev {} address {} mtu {} up",
            v.name, v.mac, v.mtu
        ));
        for a in addr_strings(&v.addrs) {
            lines.push(format!("addr replace {a} dev {}", v.name));
        }
    }
    for (vif, addr, mac) in plan.neighbors.iter().filter(|n| mine(n.0)) {
        lines.push(format!(
            "neigh replace {addr} lladdr {mac} dev {} nud permanent",
            plan.vifs[*vif].name
        ));
    }
    for (prefix, route) in &plan.routes {
        let through = |i: usize| match route {
            RoutePlan::Via(_, v) | RoutePlan::Attached(v) => *v == i,
            RoutePlan::Multipath(hops) => hops.iter().any(|h| h.1 == i),
            RoutePlan::Special(_) => false,
        };
        if only.is_none_or(through) {
            lines.push(route_line(plan, prefix, route));
        }
    }
    lines
}

/// `ip route replace` arguments for a static route of the config.
fn route_line(plan: &VrPlan, p: &IpPrefixSpec, route: &RoutePlan) -> String {
    match *route {
        RoutePlan::Via(addr, vif) => {
            format!("route replace {p} via {addr} dev {}", plan.vifs[vif].name)
        }
        RoutePlan::Multipath(ref hops) => {
            let mut line = format!("route replace {p}");
            for &(addr, vif, weight) in hops {
                line += &format!(
                    " nexthop via {addr} dev {} weight {weight}",
                    plan.vifs[vif].name
                );
            }
            line
        }
        RoutePlan::Attached(vif) => format!("route replace {p} dev {}", plan.vifs[vif].name),
        RoutePlan::Special(RouteType::Blackhole) => format!("route replace blackhole {p}"),
        RoutePlan::Special(RouteType::Unreachable) => format!("route replace unreachable {p}"),
        RoutePlan::Special(RouteType::Prohibit) => format!("route replace prohibit {p}"),
        // In the main table (the one mirrored), as the config means it.
        RoutePlan::Special(RouteType::Local) => {
            format!("route replace local {p} dev lo table main")
        }
    }
}

/// The control side of every VR: namespaces, taps and the punt/inject loop.
pub struct ControlPlane {
    dp: Dataplane,
    pool: Arc<Pool>,
    prefix: String,
    vrs: HashMap<String, VrCtl>,
    sync: Option<SyncOptions>,
    /// Punted frames dropped because their VR has no tap for the VIF.
    pub orphan_punts: u64,
    /// Which taps have frames (`None` if epoll could not be had: every tap is read).
    readiness: Option<vrhost_io::tap::Readiness>,
}

impl core::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("prefix", &self.prefix)
            .field("vrs", &self.vrs.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ControlPlane {
    /// A control plane with no VRs; namespaces are named `<prefix><vr name>`.
    pub fn new(dp: Dataplane, prefix: &str) -> ControlPlane {
        ControlPlane {
            pool: dp.pool().clone(),
            dp,
            prefix: prefix.into(),
            vrs: HashMap::new(),
            sync: Some(SyncOptions::default()),
            orphan_punts: 0,
            readiness: vrhost_io::tap::Readiness::new()
                .map_err(|e| warn!("epoll: {e}; the taps will be read one by one"))
                .ok(),
        }
    }

    /// How VRs added from now on sync their namespace into the data plane (`None`: they do
    /// not; the data plane then keeps only what the config installed).
    pub fn set_sync(&mut self, opts: Option<SyncOptions>) {
        self.sync = opts;
    }

    /// The namespace name of VR `vr`.
    pub fn netns_name(&self, vr: &str) -> String {
        format!("{}{vr}", self.prefix)
    }

    /// Build (or adopt) the VR's namespace and taps. The VR must exist in the data plane.
    pub fn add(&mut self, plan: &VrPlan) -> Result<(), PuntError> {
        let Some(vr) = self.dp.vr(&plan.name) else {
            return Ok(());
        };
        let name = self.netns_name(&plan.name);
        let nserr = |source| PuntError::Netns {
            vr: plan.name.clone(),
            source,
        };
        // Adopt a namespace a crashed daemon left, if it is still a live namespace (its taps
        // went with the old process; they are made again below). A name whose namespace is
        // gone (an empty mount point) is cleared and made anew.
        let ns = if Netns::exists(&name) {
            let ns = Netns::adopt(&name);
            if ns.run(|| ()).is_ok() {
                ns
            } else {
                let _ = ns.delete();
                Netns::create(&name).map_err(nserr)?
            }
        } else {
            Netns::create(&name).map_err(nserr)?
        };
        // Forward what is punted for an unresolved neighbour (the kernel resolves it on the
        // way); never redirect (the data plane forwards, not this kernel).
        ns.sysctls(&[
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
            "net.ipv4.conf.all.send_redirects=0",
            "net.ipv4.conf.default.send_redirects=0",
            "net.ipv6.conf.default.accept_dad=0",
        ])
        .map_err(nserr)?;
        let mut taps = Vec::new();
        for i in 0..plan.vifs.len() {
            taps.push(make_tap(&ns, plan, i)?);
        }
        ns.ip_batch(&setup_lines(plan, None)).map_err(nserr)?;
        let sync = match &self.sync {
            Some(opts) => {
                let vifs: Vec<(String, VifId)> = plan
                    .vifs
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.name.clone(), i as VifId))
                    .collect();
                Some(Sync::start(
                    &ns,
                    self.dp.clone(),
                    vr.clone(),
                    vifs,
                    opts.clone(),
                )?)
            }
            None => None,
        };
        self.vrs.insert(
            plan.name.clone(),
            VrCtl {
                vr,
                ns_id: ns_id(&name),
                ns,
                taps,
                tap_errors: 0,
                taps_recreated: 0,
                plan: plan.clone(),
                sync,
                problems: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Remove the VR's namespace (its taps close with it).
    pub fn remove(&mut self, vr: &str) {
        self.vrs.remove(vr);
    }

    /// Move punted frames to the taps and frames from the taps into the data plane; returns
    /// how many frames moved.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        // Which taps have something (see `tap::Readiness`); without it, every tap is read.
        let ready = self.readiness.as_mut().and_then(|r| {
            r.ready(self.vrs.values().flat_map(|c| c.taps.iter()))
                .map_err(|e| warn!("watching the taps: {e}; reading them all"))
                .ok()
        });
        for ctl in self.vrs.values_mut() {
            while let Some(p) = ctl.vr.punt_recv() {
                n += 1;
                let vif = usize::from(self.pool.meta(&p).vif);
                match ctl.taps.get_mut(vif) {
                    Some(t) => {
                        if let Err(e) = t.send(&self.pool, p) {
                            ctl.tap_errors += 1;
                            if ctl.tap_errors.is_power_of_two() {
                                warn!(
                                    "VR {}: {e} ({} tap errors so far)",
                                    ctl.vr.name(),
                                    ctl.tap_errors
                                );
                            }
                        }
                    }
                    None => {
                        self.orphan_punts += 1;
                        self.pool.free(p);
                    }
                }
            }
            for (vif, t) in ctl.taps.iter_mut().enumerate() {
                if ready
                    .as_ref()
                    .is_some_and(|r| !r.contains(&t.as_fd().as_raw_fd()))
                {
                    continue;
                }
                for _ in 0..64 {
                    match t.recv(&self.pool) {
                        Ok(Some(p)) => {
                            n += 1;
                            if let Err((e, p)) = self.dp.inject(ctl.vr.name(), vif as u16, p) {
                                warn!("inject: {e}");
                                self.pool.free(p);
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            ctl.tap_errors += 1;
                            if ctl.tap_errors.is_power_of_two() {
                                warn!(
                                    "VR {}: {e} ({} tap errors so far)",
                                    ctl.vr.name(),
                                    ctl.tap_errors
                                );
                            }
                            break;
                        }
                    }
                }
            }
        }
        n
    }

    /// Tap counters of a VR, by VIF id.
    pub fn tap_stats(&self, vr: &str) -> Vec<TapStats> {
        self.vrs
            .get(vr)
            .map(|c| c.taps.iter().map(Tap::stats).collect())
            .unwrap_or_default()
    }

    /// Check what can break from outside, and repair what can be: a tap deleted by hand is
    /// made again (counted); a namespace deleted (or replaced) by someone else makes its VR
    /// degraded (forwarding goes on with the last routes the sync saw; removing and adding
    /// the VR, or a restart, builds a new namespace). Call it every second or so.
    pub fn check(&mut self) {
        for (name, ctl) in &mut self.vrs {
            // A tap deleted by hand (the sync saw it go): make it again, with the config's
            // addresses, neighbours and routes through it. The VR is degraded until then.
            if let Some(sync) = &ctl.sync {
                for i in 0..ctl.plan.vifs.len() {
                    let key = format!("tap:{}", ctl.plan.vifs[i].name);
                    if !sync.stats().has_problem(&key) {
                        continue;
                    }
                    let r = make_tap(&ctl.ns, &ctl.plan, i).and_then(|tap| {
                        ctl.ns
                            .ip_batch(&setup_lines(&ctl.plan, Some(i)))
                            .map_err(|source| PuntError::Netns {
                                vr: name.clone(),
                                source,
                            })?;
                        Ok(tap)
                    });
                    match r {
                        Ok(tap) => {
                            ctl.taps[i] = tap;
                            ctl.taps_recreated += 1;
                            sync.stats().clear(&key);
                            info!(
                                "VR {name}: made tap {:?} again ({} so far)",
                                ctl.plan.vifs[i].name, ctl.taps_recreated
                            );
                        }
                        Err(e) => {
                            sync.stats().problem(
                                &key,
                                format!(
                                    "VR {name}: tap {:?} was deleted from its namespace and cannot be made again: {e}",
                                    ctl.plan.vifs[i].name
                                ),
                            );
                        }
                    }
                }
            }
            let now = ns_id(ctl.ns.name());
            let key = "netns".to_string();
            if now.is_none() || now != ctl.ns_id {
                if !ctl.problems.contains_key(&key) {
                    let msg = format!(
                        "VR {name}: namespace {} was {} from outside; the VR keeps forwarding with what it had, `ip netns exec` no longer reaches it (remove and add the VR to rebuild it)",
                        ctl.ns.name(),
                        if now.is_none() { "deleted" } else { "replaced" }
                    );
                    error!("{msg}");
                    ctl.problems.insert(key, msg);
                }
            } else if let Some(m) = ctl.problems.remove(&key) {
                info!("resolved: {m}");
            }
        }
    }

    /// What `vrhost ctl` shows of a VR's control plane.
    pub fn info(&self, vr: &str) -> Option<VrControlInfo> {
        let c = self.vrs.get(vr)?;
        let mut problems: Vec<String> = c.problems.values().cloned().collect();
        if let Some(s) = &c.sync {
            problems.extend(s.stats().problems());
        }
        Some(VrControlInfo {
            netns: c.ns.name().to_string(),
            taps: c.taps.iter().map(Tap::stats).collect(),
            tap_errors: c.tap_errors,
            taps_recreated: c.taps_recreated,
            problems,
            sync: c.sync.as_ref().map(|s| s.stats().clone()),
        })
    }

    /// VRs with a control namespace.
    pub fn vrs(&self) -> impl Iterator<Item = &str> {
        self.vrs.keys().map(String::as_str)
    }

    /// Run a command inside a VR's namespace (for `vrhost ctl exec`).
    pub fn netns(&self, vr: &str) -> Option<&Netns> {
        self.vrs.get(vr).map(|c| &c.ns)
    }
}
