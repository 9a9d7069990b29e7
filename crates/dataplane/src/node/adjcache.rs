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
//! An ECMP set is cached as the resolved member of each of its shares (see
//! `NextHopSet::shares`: one per member when the weights are equal, a member's weight's
//! worth of them otherwise), so that the packet's flow hash picks with one multiplication
//! and one load, through the same `share_of` as `NextHopSet::select`: a flow takes the same
//! member whether the cache answers or not. Only sets whose members are all neighbours
//! with a known MAC are cached (an attached member's neighbour is each packet's own
//! destination), and only up to [`MAX_SHARES`] shares.

use arrayvec::ArrayVec;
use vrhost_fib::{MAX_ECMP, NextHop, NextHopSet, share_of};

use crate::neigh::NeighMap;

/// Largest id cached; beyond it (a table with over a million distinct next-hop sets) the
/// full path is taken.
const MAX_ID: usize = 1 << 20;

/// Most shares of an ECMP set cached (8 KiB of members); a set of unequal weights cut
/// finer than this (the weights' sum over their common divisor) takes the full path for
/// every packet.
pub(crate) const MAX_SHARES: u32 = 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    /// 0 = empty (generations start at 1).
    generation: u64,
    vif: u16,
    mac: [u8; 6],
    /// 0: a single next hop (`vif`, `mac`); n ≥ 2: an ECMP set's n shares' members at
    /// `ecmp[start..start + n]`.
    n: u16,
    start: u32,
}

/// A resolved next hop: egress VIF and neighbour MAC.
pub(crate) type Adj = (u16, [u8; 6]);

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct AdjCache {
    entries: Vec<Entry>,
    /// The members of cached ECMP sets' shares, for generation `ecmp_generation`.
    ecmp: Vec<Adj>,
    ecmp_generation: u64,
}

impl AdjCache {
    /// Start loading the entries of the first `LINES` lines' worth of ids (a table's next-hop
    /// sets are interned from 0 up, so these are the ones in use), without waiting.
    #[inline(always)]
    pub(crate) fn prefetch(&self) {
        const LINES: usize = 8;
        let per_line = 64 / core::mem::size_of::<Entry>();
        let n = self.entries.len().min(LINES * per_line);
        let p = self.entries.as_ptr();
        for i in (0..n).step_by(per_line) {
            crate::prefetch::read(p.wrapping_add(i));
        }
    }

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
        let k = share_of(hash(), u32::from(e.n)) as usize;
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

    /// Remember the resolved members of ECMP set `set` (`members`, in the set's order) as
    /// `id`'s, share by share; a set of over [`MAX_SHARES`] shares is not cached.
    pub(crate) fn put_ecmp(&mut self, id: u32, generation: u64, set: &NextHopSet, members: &[Adj]) {
        let shares = set.shares();
        if members.len() < 2
            || members.len() != set.hops().len()
            || shares > MAX_SHARES
            || id as usize >= MAX_ID
        {
            return;
        }
        if self.ecmp_generation != generation {
            // Every entry pointing into the list is stale now; start it afresh.
            self.ecmp.clear();
            self.ecmp_generation = generation;
        }
        let start = self.ecmp.len() as u32;
        self.ecmp
            .extend((0..shares).map(|s| members[set.member_of_share(s)]));
        if let Some(e) = self.slot(id) {
            *e = Entry {
                generation,
                vif: 0,
                mac: [0; 6],
                n: shares as u16,
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
        // ECMP: the hash picks its share's member; a new generation forgets the list.
        let m = [(1, [1; 6]), (2, [2; 6]), (3, [3; 6])];
        let set = |n: usize| NextHopSet::ecmp((0..n).map(hop).collect::<Vec<_>>()).unwrap();
        c.put_ecmp(5, 1, &set(3), &m);
        let third = u32::MAX / 3 + 1;
        assert_eq!(c.get(5, 1, || third - 1), Some(((1, [1; 6]), true)));
        assert_eq!(c.get(5, 1, || third), Some(((2, [2; 6]), true)));
        assert_eq!(c.get(5, 1, || u32::MAX), Some(((3, [3; 6]), true)));
        c.put_ecmp(6, 2, &set(2), &m[..2]);
        assert_eq!(c.get(5, 2, || 4), None);
        assert_eq!(c.get(6, 2, || 1 << 31), Some(((2, [2; 6]), true)));
        // Members and set must agree; a set cut finer than MAX_SHARES is not cached.
        c.put_ecmp(7, 2, &set(3), &m[..2]);
        assert_eq!(c.get(7, 2, || 0), None);
        let fine = NextHopSet::weighted([
            (hop(0), 256),
            (hop(1), 255),
            (hop(2), 254),
            (hop(3), 253),
            (hop(4), 1),
            (hop(5), 200),
        ])
        .unwrap();
        assert!(fine.shares() > MAX_SHARES);
        c.put_ecmp(8, 2, &fine, &[m[0], m[1], m[2], m[0], m[1], m[2]]);
        assert_eq!(c.get(8, 2, || 0), None);
    }

    fn hop(i: usize) -> NextHop {
        NextHop::Via {
            addr: std::net::IpAddr::from([10, 0, 0, i as u8]),
            ifindex: 1,
        }
    }

    /// Whatever the weights, and for resilient sets whatever the bucket table, the cache
    /// picks for every hash the member `select` picks.
    #[test]
    fn the_cache_picks_the_member_select_picks() {
        let mut c = AdjCache::default();
        let weighted = [
            &[1u16, 1][..],
            &[1, 1, 1, 1, 1],
            &[3, 1],
            &[2, 4, 6],
            &[256, 1, 17, 99],
            &[7; 64],
        ]
        .map(|ws| NextHopSet::weighted((0..ws.len()).map(hop).zip(ws.iter().copied())).unwrap());
        // Resilient: 128 buckets over 3 members, scattered; 1,024 over 64.
        let scattered = |n: usize, b: usize| -> Vec<u8> {
            (0..b).map(|i| ((i * 7 + i / 5) % n) as u8).collect()
        };
        let resilient = [(3, 128), (64, 1024)].map(|(n, b)| {
            NextHopSet::resilient((0..n).map(|i| (hop(i), 1)), scattered(n, b)).unwrap()
        });
        for (id, set) in weighted.iter().chain(&resilient).enumerate() {
            let ws: Vec<u16> = set.members().map(|(_, w)| w).collect();
            let members: Vec<Adj> = (0..ws.len()).map(|i| (i as u16, [i as u8; 6])).collect();
            c.put_ecmp(id as u32, 1, set, &members);
            let mut h = 0x9e37_79b9u32;
            for _ in 0..20_000 {
                h = h
                    .wrapping_mul(0x2c1b_3c6d)
                    .wrapping_add(0x297a_2d39)
                    .rotate_left(7);
                let want = set.hops().iter().position(|x| x == set.select(h)).unwrap();
                assert_eq!(
                    c.get(id as u32, 1, || h),
                    Some((members[want], true)),
                    "{ws:?}, hash {h:#x}"
                );
            }
        }
    }
}
