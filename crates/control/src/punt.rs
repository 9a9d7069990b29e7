//! Each VR's control plane: a network namespace `<prefix><vr>` holding one tap per VIF with
//! the VIF's name, MAC, MTU and addresses, and the loop that carries punted frames to those
//! taps and injects what the kernel sends back.
//!
//! Why a namespace per VR: a virtual router must answer ARP, ND and ping like a real one and
//! host routing daemons; the Linux stack in its own namespace does all of that, and keeps
//! tenants with overlapping addresses apart (DESIGN.md, "Virtual router model"). This module
//! is the minimal form the real-ports issue needs (punt → tap → kernel → tap → inject);
//! netlink sync of what is configured inside the namespace comes with the control-plane issue.
//!
//! A namespace left behind by a daemon that crashed is adopted, not duplicated: its taps
//! vanished with the old process (they are not persistent), so adopting means creating them
//! again. A VR removed by a reload, or every VR on a clean stop, takes its namespace with it.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::warn;
use vrhost_dataplane::{Dataplane, Pool, Vr};
use vrhost_io::tap::{Tap, TapStats};
use vrhost_lab::Netns;

use crate::apply::addr_strings;
use crate::config::VrPlan;

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
}

struct VrCtl {
    vr: Arc<Vr>,
    ns: Netns,
    /// Indexed by VIF id.
    taps: Vec<Tap>,
}

/// The control side of every VR: namespaces, taps and the punt/inject loop.
pub struct ControlPlane {
    dp: Dataplane,
    pool: Arc<Pool>,
    prefix: String,
    vrs: HashMap<String, VrCtl>,
    /// Punted frames dropped because their VR has no tap for the VIF.
    pub orphan_punts: u64,
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
            orphan_punts: 0,
        }
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
        let mut taps = Vec::new();
        for v in &plan.vifs {
            let tap = ns
                .run(|| Tap::create(&v.name))
                .map_err(nserr)?
                .map_err(|source| PuntError::Tap {
                    vr: plan.name.clone(),
                    source,
                })?;
            let mac = v.mac.to_string();
            let mtu = v.mtu.to_string();
            // IPv6 on the tap without duplicate detection: the data plane owns the address.
            ns.sysctl(&format!("net.ipv6.conf.{}.accept_dad=0", v.name))
                .map_err(nserr)?;
            ns.ip(&[
                "link", "set", "dev", &v.name, "address", &mac, "mtu", &mtu, "up",
            ])
            .map_err(nserr)?;
            for a in addr_strings(&v.addrs) {
                ns.ip(&["addr", "replace", &a, "dev", &v.name])
                    .map_err(nserr)?;
            }
            taps.push(tap);
        }
        for (vif, addr, mac) in &plan.neighbors {
            let (a, m) = (addr.to_string(), mac.to_string());
            let dev = &plan.vifs[*vif].name;
            ns.ip(&[
                "neigh",
                "replace",
                &a,
                "lladdr",
                &m,
                "dev",
                dev,
                "nud",
                "permanent",
            ])
            .map_err(nserr)?;
        }
        self.vrs.insert(plan.name.clone(), VrCtl { vr, ns, taps });
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
        for ctl in self.vrs.values_mut() {
            while let Some(p) = ctl.vr.punt_recv() {
                n += 1;
                let vif = usize::from(self.pool.meta(&p).vif);
                match ctl.taps.get_mut(vif) {
                    Some(t) => {
                        if let Err(e) = t.send(&self.pool, p) {
                            warn!("{e}");
                        }
                    }
                    None => {
                        self.orphan_punts += 1;
                        self.pool.free(p);
                    }
                }
            }
            for (vif, t) in ctl.taps.iter_mut().enumerate() {
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
                            warn!("{e}");
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

    /// VRs with a control namespace.
    pub fn vrs(&self) -> impl Iterator<Item = &str> {
        self.vrs.keys().map(String::as_str)
    }

    /// Run a command inside a VR's namespace (for `vrhost ctl exec`).
    pub fn netns(&self, vr: &str) -> Option<&Netns> {
        self.vrs.get(vr).map(|c| &c.ns)
    }
}
