//! Turning a checked [`VrPlan`] into a running VR in the data plane, and taking it out again.
//!
//! Why all-or-nothing: a reload adds VRs one by one while the others forward; if one step
//! of a VR fails (say the data plane refuses a demux clash the file could not show), the
//! half-built VR is removed again, so the data plane never holds a VR that differs from its
//! config. Other VRs are never touched.

use std::sync::Arc;

use vrhost_dataplane::port::PortId;
use vrhost_dataplane::{Dataplane, DemuxKey, DpError, IfAddr, VifConfig, Vr, VrConfig};
use vrhost_fib::{FibError, NextHop, NextHopSet};

use crate::config::{DemuxSpec, IpPrefixSpec, RoutePlan, RouteType, VrPlan};

/// Why a VR could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The data plane refused it.
    #[error("virtual router {vr:?}: {source}")]
    Dataplane {
        /// The VR.
        vr: String,
        /// Why.
        source: DpError,
    },
    /// A route could not be installed.
    #[error("virtual router {vr:?}: route {prefix}: {source}")]
    Route {
        /// The VR.
        vr: String,
        /// The prefix.
        prefix: String,
        /// Why.
        source: FibError,
    },
}

/// The data-plane side of a VIF plan.
pub fn vif_config(v: &crate::config::VifPlan, ports: &[PortId]) -> VifConfig {
    VifConfig {
        name: v.name.clone(),
        port: ports[v.port],
        vlan: v.vlan,
        key: match v.demux {
            DemuxSpec::Mac => DemuxKey::Mac,
            DemuxSpec::Vlan => DemuxKey::Vlan,
        },
        mac: v.mac,
        mtu: v.mtu,
        addrs: v.addrs.clone(),
    }
}

/// Create the VR with its VIFs, routes and static neighbours. `ports[i]` is the data-plane
/// port of the config's i-th `[[port]]`. On error nothing of the VR is left.
pub fn add_vr(dp: &Dataplane, plan: &VrPlan, ports: &[PortId]) -> Result<Arc<Vr>, ApplyError> {
    let dperr = |source| ApplyError::Dataplane {
        vr: plan.name.clone(),
        source,
    };
    let mut cfg = VrConfig::new(plan.name.clone());
    cfg.weight = plan.weight;
    cfg.punt_rate = plan.punt_rate;
    cfg.punt_burst = plan.punt_burst;
    cfg.worker = plan.worker;
    cfg.policer_pps = plan.policer_pps;
    cfg.policer_bps = plan.policer_bps;
    cfg.flow_cache = plan.flow_cache;
    cfg.flow_cache_key = plan.flow_cache_key;
    let vr = dp.add_vr(cfg).map_err(dperr)?;
    let built = (|| {
        for v in &plan.vifs {
            dp.add_vif(&plan.name, vif_config(v, ports))
                .map_err(dperr)?;
        }
        for (prefix, route) in &plan.routes {
            let one = |hop: NextHop| Ok(NextHopSet::one(hop));
            let set = match *route {
                RoutePlan::Via(addr, vif) => one(NextHop::Via {
                    addr,
                    ifindex: vif as u32,
                }),
                RoutePlan::Multipath(ref hops) => {
                    NextHopSet::weighted(hops.iter().map(|&(addr, vif, weight)| {
                        let ifindex = vif as u32;
                        (NextHop::Via { addr, ifindex }, weight)
                    }))
                }
                RoutePlan::Attached(vif) => one(NextHop::Attached {
                    ifindex: vif as u32,
                }),
                RoutePlan::Special(RouteType::Blackhole) => one(NextHop::Drop),
                RoutePlan::Special(RouteType::Unreachable) => one(NextHop::Unreachable),
                RoutePlan::Special(RouteType::Prohibit) => one(NextHop::Prohibit),
                RoutePlan::Special(RouteType::Local) => one(NextHop::Local),
            };
            // A bad set or a refused insert: either way this route's error.
            set.and_then(|set| match prefix {
                IpPrefixSpec::V4(p) => vr.fib4.insert(*p, set).map(drop),
                IpPrefixSpec::V6(p) => vr.fib6.insert(*p, set).map(drop),
            })
            .map_err(|source| ApplyError::Route {
                vr: plan.name.clone(),
                prefix: prefix.to_string(),
                source,
            })?;
        }
        for &(vif, addr, mac) in &plan.neighbors {
            vr.neigh.set(vif as u16, addr, mac);
        }
        Ok(())
    })();
    match built {
        Ok(()) => Ok(vr),
        Err(e) => {
            let _ = dp.remove_vr(&plan.name);
            Err(e)
        }
    }
}

/// Whether `old` and `new` differ only in what can change while the VR runs (weight,
/// policers, pinned worker).
pub fn only_tunables_differ(old: &VrPlan, new: &VrPlan) -> bool {
    let strip = |p: &VrPlan| VrPlan {
        weight: 1,
        worker: None,
        policer_pps: None,
        policer_bps: None,
        ..p.clone()
    };
    old != new && strip(old) == strip(new)
}

/// Apply `new`'s weight, policers and pinning to the running VR (see
/// [`only_tunables_differ`]). Its traffic is not interrupted: a new pin moves it between
/// two vectors.
pub fn tune(dp: &Dataplane, new: &VrPlan) -> Result<(), ApplyError> {
    let dperr = |source| ApplyError::Dataplane {
        vr: new.name.clone(),
        source,
    };
    dp.set_weight(&new.name, new.weight).map_err(dperr)?;
    dp.set_policer(&new.name, new.policer_pps, new.policer_bps)
        .map_err(dperr)?;
    dp.pin_vr(&new.name, new.worker).map_err(dperr)?;
    Ok(())
}

/// The addresses of a VIF as `ip addr add` arguments (`10.0.0.1/24`).
pub fn addr_strings(addrs: &[IfAddr]) -> Vec<String> {
    addrs
        .iter()
        .map(|a| match a {
            IfAddr::V4(a, l) => format!("{a}/{l}"),
            IfAddr::V6(a, l) => format!("{a}/{l}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use vrhost_dataplane::{DataplaneConfig, Pool};

    use super::*;
    use crate::config::Config;

    /// A config's multipath route goes into the FIB as one weighted set (what forwards
    /// when the VR runs without a namespace to mirror).
    #[test]
    fn a_multipath_route_becomes_one_weighted_set() {
        let text = r#"
[[port]]
name = "p0"
interface = "p0"
[[vr]]
name = "blue"
[[vr.vif]]
name = "a"
port = "p0"
mac = "02:76:00:00:00:01"
addresses = ["10.0.0.1/24", "fd00:a::1/64"]
[[vr.route]]
prefix = "198.51.100.0/24"
nexthops = [{ via = "10.0.0.2", weight = 3 }, { via = "10.0.0.3" }]
[[vr.route]]
prefix = "2001:db8::/32"
nexthops = [{ via = "fd00:a::2" }, { via = "fd00:a::3", weight = 256 }]
"#;
        let cfg = Config::parse("t.toml", text).unwrap();
        let dp = Dataplane::new(
            Pool::new(64),
            DataplaneConfig {
                workers: 1,
                ports: vec!["p0".into()],
                ..Default::default()
            },
        )
        .unwrap();
        let vr = add_vr(&dp, &cfg.plans()[0], &[0]).unwrap();
        let via = |a: &str| NextHop::Via {
            addr: a.parse().unwrap(),
            ifindex: 0,
        };
        let s = vr.fib4.get(&"198.51.100.0/24".parse().unwrap()).unwrap();
        assert_eq!(s.hops(), [via("10.0.0.2"), via("10.0.0.3")]);
        assert_eq!((s.weight(0), s.weight(1)), (3, 1));
        let s = vr.fib6.get(&"2001:db8::/32".parse().unwrap()).unwrap();
        assert_eq!(s.hops(), [via("fd00:a::2"), via("fd00:a::3")]);
        assert_eq!((s.weight(0), s.weight(1)), (1, 256));
    }
}
