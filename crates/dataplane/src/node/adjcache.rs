//! The adjacency cache: next-hop id → (egress VIF, neighbour MAC), per VR per worker.
//!
//! After a FIB lookup the path still had to resolve the id to its next-hop set, pick the
//! member, and find the neighbour's MAC in a hash map keyed by (VIF, IP address) — measured
//! at 15 % of a packet's time with uniformly random destinations, more than the FIB walk.
//! Next-hop ids are small dense integers (the FIB interns sets), so the resolved answer fits
//! an array indexed by id: one load instead of a hash probe.
//!
//! Validity is the same generation as the flow cache (FIB + neighbour generations): an id's
//! set never changes while the id is in use, and the id can only be reused after a FIB
//! change, so the FIB generation covers reuse and the neighbour generation covers MACs.
//! An ECMP set is cached as the resolved list of its members (in the set's order, so
//! member `hash % n` is the one `NextHopSet::select` picks) when every member is a
//! neighbour with a known MAC; the flow hash still picks per packet. Sets with an attached
//! member (whose neighbour is each packet's own destination) are not cached.

use arrayvec::ArrayVec;
use vrhost_fib::{MAX_ECMP, NextHop, NextHopSet};

use crate::neigh::NeighMap;

/// Largest id cached; beyond it (a table with over a million distinct next-hop sets) the
/// full path is taken.
const MAX_ID: usize = 1 << 20;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    /// 0 = empty (generations start at 1).
    generation: u64,
    vif: u16,
    mac: [u8; 6],
    /// 0: a single next hop (`vif`, `mac`); n ≥ 2: ECMP members at `ecmp[start..start + n]`.
    n: u16,
    start: u32,
}

/// A resolved next hop: egress VIF and neighbour MAC.
pub(crate) type Adj = (u16, [u8; 6]);

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct AdjCache {
    entries: Vec<Entry>,
    /// Members of cached ECMP sets, for generation `ecmp_generation`.
    ecmp: Vec<Adj>,
    ecmp_generation: u64,
}

impl AdjCache {
    /// The cached resolution of next-hop id `id` at `generation`, and whether it came from
    /// an ECMP set (then `hash()` — the packet's flow hash — picked the member).
    #[inline(always)]
    pub(crate) fn get(
        &self,
        id: u32,
        generation: u64,
        hash: impl FnOnce() -> u32,
    ) -> Option<(Adj, bool)> {
        let e = self.entries.get(id as usize)?;
        if e.generation != generation {
            return None;
        }
        if e.n == 0 {
            return Some(((e.vif, e.mac), false));
        }
        let k = hash() as usize % usize::from(e.n);
        self.ecmp.get(e.start as usize + k).map(|a| (*a, true))
    }

    fn slot(&mut self, id: u32) -> Option<&mut Entry> {
        let i = id as usize;
        if i >= MAX_ID {
            return None;
        }
        if i >= self.entries.len() {
            let len = (i + 1).next_power_of_two().min(MAX_ID);
            self.entries.resize(len, Entry::default());
        }
        Some(&mut self.entries[i])
    }

    /// Remember the resolution of a single-next-hop `id`. Grows the array to `id` the first
    /// time a larger id is seen (a control-plane event, not a per-packet one).
    #[inline]
    pub(crate) fn put(&mut self, id: u32, generation: u64, vif: u16, mac: [u8; 6]) {
        if let Some(e) = self.slot(id) {
            *e = Entry {
                generation,
                vif,
                mac,
                n: 0,
                start: 0,
            };
        }
    }

    /// Remember the resolved members of an ECMP `id` (2 to 64, in the set's order).
    pub(crate) fn put_ecmp(&mut self, id: u32, generation: u64, members: &[Adj]) {
        if members.len() < 2 || id as usize >= MAX_ID {
            return;
        }
        if self.ecmp_generation != generation {
            // Every entry pointing into the list is stale now; start it afresh.
            self.ecmp.clear();
            self.ecmp_generation = generation;
        }
        let start = self.ecmp.len() as u32;
        self.ecmp.extend_from_slice(members);
        if let Some(e) = self.slot(id) {
            *e = Entry {
                generation,
                vif: 0,
                mac: [0; 6],
                n: members.len() as u16,
                start,
            };
        }
    }
}

/// Every member of an ECMP set resolved to (VIF, MAC), in order; `None` if any member is
/// not a neighbour with a known MAC on an existing VIF (then the set is not cached).
pub(crate) fn resolve_members(
    set: &NextHopSet,
    neigh: &NeighMap,
    vif_exists: impl Fn(u16) -> bool,
) -> Option<ArrayVec<Adj, MAX_ECMP>> {
    let mut v = ArrayVec::new();
    for h in set.hops() {
        let NextHop::Via { addr, ifindex } = *h else {
            return None;
        };
        let vif = u16::try_from(ifindex).ok().filter(|&i| vif_exists(i))?;
        let mac = neigh.get(&(vif, addr))?;
        v.try_push((vif, mac.0)).ok()?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_by_id_and_generation() {
        let mut c = AdjCache::default();
        let h = || 0;
        assert_eq!(c.get(3, 1, h), None);
        c.put(3, 1, 2, [9; 6]);
        assert_eq!(c.get(3, 1, h), Some(((2, [9; 6]), false)));
        assert_eq!(c.get(3, 2, h), None);
        assert_eq!(c.get(4, 1, h), None);
        c.put(MAX_ID as u32, 1, 2, [9; 6]);
        assert_eq!(c.get(MAX_ID as u32, 1, h), None);
        // ECMP: the hash picks member hash % n; a new generation forgets the list.
        let m = [(1, [1; 6]), (2, [2; 6]), (3, [3; 6])];
        c.put_ecmp(5, 1, &m);
        assert_eq!(c.get(5, 1, || 4), Some(((2, [2; 6]), true)));
        c.put_ecmp(6, 2, &m[..2]);
        assert_eq!(c.get(5, 2, || 4), None);
        assert_eq!(c.get(6, 2, || 3), Some(((2, [2; 6]), true)));
    }
}
