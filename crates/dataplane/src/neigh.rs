//! The neighbour (adjacency) table of one VR: (VIF, IP address) → MAC address.
//!
//! Keyed by VIF as well as address because link-local IPv6 neighbours (`fe80::1`) repeat on
//! every link. Readers (workers) take a snapshot once per vector through `arc-swap` — no lock,
//! no reference count on the hot path — and look up in a `FxHashMap`. Writers (the control
//! plane: static config now, netlink sync later) copy the map, change it and publish the copy.
//! Copying is O(n) per change; that is fine for the thousands of neighbours a VR has, and it
//! keeps every lookup lock-free. A generation number tells cached resolutions (flow cache)
//! that something changed.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use rustc_hash::FxHashMap;
use vrhost_wire::ethernet::EthernetAddress;

use crate::vr::VifId;

/// The map a snapshot holds.
pub type NeighMap = FxHashMap<(VifId, IpAddr), EthernetAddress>;

/// A VR's neighbours.
#[derive(Debug, Default)]
pub struct NeighTable {
    map: ArcSwap<NeighMap>,
    version: AtomicU64,
    writer: Mutex<()>,
}

impl NeighTable {
    /// The current map, for a vector's worth of lookups.
    #[inline]
    pub fn snapshot(&self) -> arc_swap::Guard<Arc<NeighMap>> {
        self.map.load()
    }

    /// Bumped on every change.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The MAC of `addr` on `vif`.
    pub fn get(&self, vif: VifId, addr: IpAddr) -> Option<EthernetAddress> {
        self.map.load().get(&(vif, addr)).copied()
    }

    /// Set (or replace) a neighbour (`ip neigh replace ADDR lladdr MAC dev VIF`).
    pub fn set(&self, vif: VifId, addr: IpAddr, mac: EthernetAddress) {
        self.update(|m| {
            m.insert((vif, addr), mac);
        });
    }

    /// Remove a neighbour; returns whether it existed.
    pub fn remove(&self, vif: VifId, addr: IpAddr) -> bool {
        let mut found = false;
        self.update(|m| found = m.remove(&(vif, addr)).is_some());
        found
    }

    /// Remove every neighbour on `vif` (the VIF went away).
    pub fn remove_vif(&self, vif: VifId) {
        self.update(|m| m.retain(|k, _| k.0 != vif));
    }

    /// All neighbours.
    pub fn entries(&self) -> Vec<(VifId, IpAddr, EthernetAddress)> {
        let mut v: Vec<_> = self
            .map
            .load()
            .iter()
            .map(|(k, m)| (k.0, k.1, *m))
            .collect();
        v.sort();
        v
    }

    fn update(&self, f: impl FnOnce(&mut NeighMap)) {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut m = NeighMap::clone(&self.map.load());
        f(&mut m);
        self.map.store(Arc::new(m));
        self.version.fetch_add(1, Ordering::Release);
    }
}
