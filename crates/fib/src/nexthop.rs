//! Next hops, ECMP sets, and the table that gives each distinct set a small id.
//!
//! Trie leaves hold an id rather than the next hop itself: leaves are 1 to 4 bytes, as narrow
//! as the table's highest id allows (the trie stays cache-resident; ids stay dense because freed
//! ids are reused before new ones are handed out), a route replace that keeps the same next-hop set touches no leaf, and
//! the data plane can keep per-id state (adjacency, counters) in flat arrays. Ids are interned:
//! a full BGP table has ~10⁶ routes but only as many distinct sets as it has peers/paths.
//!
//! Readers resolve an id to its [`NextHopSet`] without a lock: sets are immutable once
//! published, live in segments of [`SEGMENT`] slots allocated on demand, and are reclaimed
//! through the same epoch as the trie nodes. A set whose last route went away stays readable
//! under its id, and the id is reused only after an epoch has passed, so a reader holding an
//! id from an old leaf resolves it to the set it meant, never to nothing or to another set.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_epoch::{Atomic, Guard, Owned, Shared};
use crossbeam_queue::SegQueue;

use crate::FibError;

/// Most next hops in one ECMP set.
pub const MAX_ECMP: usize = 64;

/// Slots per segment of the id table.
pub(crate) const SEGMENT: usize = 1024;

/// Segments of the id table; ids are below `SEGMENTS * SEGMENT` (about a million).
const SEGMENTS: usize = 1024;

/// Where a packet matching a route goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NextHop {
    /// Forward to the neighbour `addr` out of interface `ifindex` (`ip route … via ADDR dev IF`).
    /// The address may be of the other family (RFC 5549: IPv4 routes via IPv6 next hops).
    Via {
        /// The neighbour.
        addr: IpAddr,
        /// Outgoing interface.
        ifindex: u32,
    },
    /// The destination is on the link: the packet's own destination is the neighbour
    /// (`ip route … dev IF`, connected routes).
    Attached {
        /// Outgoing interface.
        ifindex: u32,
    },
    /// For this router itself: punt to the control plane (`ip route add local …`).
    Local,
    /// Silently discard (`ip route add blackhole …`).
    Drop,
    /// Discard and send ICMP Destination Unreachable / host unreachable
    /// (`ip route add unreachable …`).
    Unreachable,
    /// Discard and send ICMP administratively prohibited (`ip route add prohibit …`).
    Prohibit,
}

/// Largest weight of one member of a weighted ECMP set (Linux's too: `ip route … nexthop
/// via ADDR weight 1..256`).
pub const MAX_WEIGHT: u16 = 256;

/// Most buckets of a resilient set ([`NextHopSet::resilient`]; Linux's default is 128).
pub const MAX_BUCKETS: usize = 4096;

/// One or more next hops (ECMP), at most [`MAX_ECMP`], each with a weight (1 unless
/// given). Order is kept: it decides which member a flow hash picks, so an unchanged set
/// keeps flows on the same path.
///
/// A member is picked by hash-threshold (RFC 2992 §4.2), as Linux picks among a multipath
/// route's next hops: the 32-bit hash space is cut into one region per member, in order,
/// each as wide as its weight's share ([`share_of`] then [`NextHopSet::member_of_share`]).
/// Unlike `hash % n`, taking a member out or adding one at the end moves only the flows
/// near the regions' new edges (at most half of those whose member stays, against nearly
/// all of them), and it is a multiplication rather than a division.
///
/// A *resilient* set ([`NextHopSet::resilient`]) cuts the hash space into buckets instead,
/// each given to a member by a table its maker keeps from one version of the set to the next
/// (Linux's resilient nexthop groups): then a member that leaves moves only its own flows,
/// and one that joins takes only its share.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NextHopSet {
    hops: Box<[NextHop]>,
    /// Each member's weight as given; empty when every weight is 1.
    weights: Box<[u16]>,
    /// Where each member's shares end (the weights divided by their greatest common
    /// divisor, summed): member `i` takes shares `ends[i - 1]..ends[i]`. Empty when the
    /// weights are all equal: then member `i` takes share `i` alone.
    ends: Box<[u16]>,
    /// A resilient set's member of each bucket (its shares); empty for hash-threshold.
    buckets: Box<[u8]>,
}

/// The share of `shares` equal regions of the 32-bit hash space that `hash` falls in:
/// `⌊hash × shares / 2³²⌋`. Every picker of ECMP members (the set itself, the data plane's
/// caches) goes through this one function, so one flow takes one member whichever asks.
#[inline(always)]
pub fn share_of(hash: u32, shares: u32) -> u32 {
    ((u64::from(hash) * u64::from(shares)) >> 32) as u32
}

fn gcd(a: u16, b: u16) -> u16 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl NextHopSet {
    /// A set of one next hop.
    pub fn one(hop: NextHop) -> Self {
        NextHopSet {
            hops: Box::new([hop]),
            weights: Box::new([]),
            ends: Box::new([]),
            buckets: Box::new([]),
        }
    }

    /// An ECMP set of equal weights; 1 to [`MAX_ECMP`] next hops.
    pub fn ecmp(hops: impl Into<Vec<NextHop>>) -> Result<Self, FibError> {
        Self::weighted(hops.into().into_iter().map(|h| (h, 1)))
    }

    /// A weighted ECMP set: 1 to [`MAX_ECMP`] next hops, each with a weight of 1 to
    /// [`MAX_WEIGHT`]; a member's share of the flows is its weight over the sum.
    pub fn weighted(hops: impl IntoIterator<Item = (NextHop, u16)>) -> Result<Self, FibError> {
        let (hops, weights): (Vec<NextHop>, Vec<u16>) = hops.into_iter().unzip();
        match hops.len() {
            0 => return Err(FibError::NoNextHop),
            n if n > MAX_ECMP => return Err(FibError::EcmpTooLarge { n, max: MAX_ECMP }),
            _ => {}
        }
        if let Some(&w) = weights.iter().find(|&&w| w == 0 || w > MAX_WEIGHT) {
            return Err(FibError::BadWeight {
                weight: w,
                max: MAX_WEIGHT,
            });
        }
        let ones = weights.iter().all(|&w| w == 1);
        let equal = weights.iter().all(|&w| w == weights[0]);
        let d = weights.iter().fold(0, |d, &w| gcd(d, w));
        // At most 64 × 256 shares: within a u16.
        let ends: Vec<u16> = if equal {
            Vec::new()
        } else {
            weights
                .iter()
                .scan(0, |end, &w| {
                    *end += w / d;
                    Some(*end)
                })
                .collect()
        };
        Ok(NextHopSet {
            hops: hops.into_boxed_slice(),
            weights: if ones { Vec::new() } else { weights }.into_boxed_slice(),
            ends: ends.into_boxed_slice(),
            buckets: Box::new([]),
        })
    }

    /// A resilient set: the members with their weights (as for [`Self::weighted`], kept for
    /// what the set shows), and which member takes each bucket, `buckets[b]` an index into
    /// the members. The hash space is cut into `buckets.len()` equal shares, so a flow's
    /// bucket is [`share_of`] its hash. 2 to [`MAX_BUCKETS`] buckets; a set of one member
    /// needs none and keeps none.
    pub fn resilient(
        hops: impl IntoIterator<Item = (NextHop, u16)>,
        buckets: impl Into<Vec<u8>>,
    ) -> Result<Self, FibError> {
        let mut set = Self::weighted(hops)?;
        if set.hops.len() == 1 {
            return Ok(set);
        }
        let buckets = buckets.into();
        let bad = |reason: String| Err(FibError::BadBuckets { reason });
        if !(2..=MAX_BUCKETS).contains(&buckets.len()) {
            return bad(format!("{} buckets (2 to {MAX_BUCKETS})", buckets.len()));
        }
        if let Some(&b) = buckets.iter().find(|&&b| usize::from(b) >= set.hops.len()) {
            return bad(format!("bucket member {b} of {} next hops", set.hops.len()));
        }
        set.ends = Box::new([]);
        set.buckets = buckets.into_boxed_slice();
        Ok(set)
    }

    /// A resilient set's bucket table (member index of each bucket); empty for a
    /// hash-threshold set.
    pub fn buckets(&self) -> &[u8] {
        &self.buckets
    }

    /// The next hops.
    #[inline]
    pub fn hops(&self) -> &[NextHop] {
        &self.hops
    }

    /// The members with their weights, in order.
    pub fn members(&self) -> impl Iterator<Item = (NextHop, u16)> + '_ {
        (self.hops.iter().enumerate()).map(|(i, h)| (*h, self.weight(i)))
    }

    /// Member `i`'s weight as given (1 unless set).
    #[inline]
    pub fn weight(&self, i: usize) -> u16 {
        self.weights.get(i).copied().unwrap_or(1)
    }

    /// How many equal shares the hash space is cut into: a resilient set's buckets; else the
    /// member count when the weights are equal, else the sum of the weights divided by their
    /// greatest common divisor (at most [`MAX_ECMP`] × [`MAX_WEIGHT`]).
    #[inline]
    pub fn shares(&self) -> u32 {
        if !self.buckets.is_empty() {
            return self.buckets.len() as u32;
        }
        match self.ends.last() {
            Some(&end) => u32::from(end),
            None => self.hops.len() as u32,
        }
    }

    /// The member that takes share `share` (below [`Self::shares`]): a resilient set's
    /// bucket's member; else each member takes as many shares as its reduced weight, in
    /// order.
    #[inline]
    pub fn member_of_share(&self, share: u32) -> usize {
        if !self.buckets.is_empty() {
            usize::from(self.buckets[share as usize])
        } else if self.ends.is_empty() {
            share as usize
        } else {
            self.ends.partition_point(|&end| u32::from(end) <= share)
        }
    }

    /// The member a flow with hash `hash` takes (hash-threshold, see the type's docs; the
    /// caller hashes the flow's addresses and ports so one flow always takes one path).
    #[inline]
    pub fn select(&self, hash: u32) -> &NextHop {
        if self.hops.len() == 1 {
            &self.hops[0]
        } else {
            &self.hops[self.member_of_share(share_of(hash, self.shares()))]
        }
    }
}

impl From<NextHop> for NextHopSet {
    fn from(h: NextHop) -> Self {
        NextHopSet::one(h)
    }
}

type Segment = [Atomic<NextHopSet>; SEGMENT];

/// The reader side: id → set, lock-free.
pub(crate) struct NhSlots {
    segments: Box<[Atomic<Segment>]>,
}

impl NhSlots {
    pub(crate) fn new() -> Self {
        NhSlots {
            segments: (0..SEGMENTS).map(|_| Atomic::null()).collect(),
        }
    }

    /// The set with id `id`, if any. Valid while `guard` is held.
    #[inline]
    pub(crate) fn get<'g>(&self, id: u32, guard: &'g Guard) -> Option<&'g NextHopSet> {
        let (s, i) = (id as usize / SEGMENT, id as usize % SEGMENT);
        let seg = self.segments.get(s)?.load(Ordering::Acquire, guard);
        // SAFETY: segments are never freed while the table lives (only in `Drop`, which has
        // `&mut self`), so a non-null segment pointer is valid for the guard's lifetime.
        let seg = unsafe { seg.as_ref() }?;
        let set = seg[i].load(Ordering::Acquire, guard);
        // SAFETY: a set is unlinked before it is destroyed, and destroyed only through
        // `defer_destroy` on an epoch guard, so it outlives every guard that could have loaded it.
        unsafe { set.as_ref() }
    }
}

impl Drop for NhSlots {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can hold a guard-derived reference into this table any
        // more (they borrow the table), so everything still linked can be freed right away.
        let guard = unsafe { crossbeam_epoch::unprotected() };
        for seg in self.segments.iter() {
            let s = seg.swap(Shared::null(), Ordering::Relaxed, guard);
            if s.is_null() {
                continue;
            }
            // SAFETY: as above; each pointer was created from an `Owned` and is freed once.
            unsafe {
                for slot in s.deref().iter() {
                    let p = slot.swap(Shared::null(), Ordering::Relaxed, guard);
                    if !p.is_null() {
                        drop(p.into_owned());
                    }
                }
                drop(s.into_owned());
            }
        }
    }
}

/// The writer side: interning and reference counts. Lives behind the table's writer lock.
pub(crate) struct NhAlloc {
    by_set: HashMap<NextHopSet, (u32, u32)>,
    free: Vec<u32>,
    next: u32,
    /// Ids whose grace period has passed; pushed by deferred closures on whatever thread runs
    /// them, drained by the writer.
    recycled: Arc<SegQueue<u32>>,
}

impl NhAlloc {
    pub(crate) fn new() -> Self {
        // Id 0 means "no route" in trie leaves; never handed out.
        NhAlloc {
            by_set: HashMap::new(),
            free: Vec::new(),
            next: 1,
            recycled: Arc::default(),
        }
    }

    /// Capacity in ids (including the reserved 0).
    pub(crate) const CAPACITY: u32 = (SEGMENTS * SEGMENT) as u32;

    /// Number of distinct sets in use.
    pub(crate) fn len(&self) -> usize {
        self.by_set.len()
    }

    /// Id for `set`, interning it if new; takes one reference.
    pub(crate) fn acquire(
        &mut self,
        slots: &NhSlots,
        set: &NextHopSet,
        guard: &Guard,
    ) -> Result<u32, FibError> {
        if let Some((id, refs)) = self.by_set.get_mut(set) {
            *refs += 1;
            return Ok(*id);
        }
        while let Some(id) = self.recycled.pop() {
            self.free.push(id);
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None if self.next < Self::CAPACITY => {
                self.next += 1;
                self.next - 1
            }
            None => {
                return Err(FibError::NextHopTableFull {
                    capacity: Self::CAPACITY,
                });
            }
        };
        let (s, i) = (id as usize / SEGMENT, id as usize % SEGMENT);
        let mut seg = slots.segments[s].load(Ordering::Acquire, guard);
        if seg.is_null() {
            let fresh: Owned<Segment> = Owned::new(core::array::from_fn(|_| Atomic::null()));
            seg = fresh.into_shared(guard);
            slots.segments[s].store(seg, Ordering::Release);
        }
        // SAFETY: just checked or created non-null; segments live as long as the table.
        let seg = unsafe { seg.deref() };
        let stale = seg[i].swap(Owned::new(set.clone()), Ordering::AcqRel, guard);
        if !stale.is_null() {
            // SAFETY: a recycled id: its grace period has passed, no reader can still resolve
            // it to the stale set; destroy through the epoch all the same.
            unsafe { guard.defer_destroy(stale) };
        }
        self.by_set.insert(set.clone(), (id, 1));
        Ok(id)
    }

    /// Drop one reference. The last one forgets the set, but leaves it readable in its slot:
    /// a reader may still hold the id from a leaf it loaded before the route changed. The id
    /// becomes reusable only after an epoch has passed, and reuse replaces the set.
    pub(crate) fn release(&mut self, slots: &NhSlots, id: u32, guard: &Guard) {
        let set = slots.get(id, guard).expect("release of a live id").clone();
        let e = self.by_set.get_mut(&set).expect("interned");
        e.1 -= 1;
        if e.1 > 0 {
            return;
        }
        self.by_set.remove(&set);
        let recycled = Arc::clone(&self.recycled);
        guard.defer(move || recycled.push(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecmp_limits() {
        assert_eq!(NextHopSet::ecmp(vec![]).unwrap_err(), FibError::NoNextHop);
        let many = vec![NextHop::Drop; 65];
        assert_eq!(
            NextHopSet::ecmp(many).unwrap_err().to_string(),
            "ECMP group of 65 next hops exceeds the maximum of 64"
        );
        let hops: Vec<_> = (0..64).map(|i| NextHop::Attached { ifindex: i }).collect();
        let s = NextHopSet::ecmp(hops.clone()).unwrap();
        // Hash-threshold: 64 regions of 2^26 hashes each.
        assert_eq!(s.select(65), &NextHop::Attached { ifindex: 0 });
        assert_eq!(s.select(1 << 26), &NextHop::Attached { ifindex: 1 });
        assert_eq!(s.select(u32::MAX), &NextHop::Attached { ifindex: 63 });
        let w = |ws: &[u16]| NextHopSet::weighted(hops.iter().copied().zip(ws.iter().copied()));
        for bad in [0, 257] {
            assert_eq!(
                w(&[1, bad]).unwrap_err().to_string(),
                format!("next-hop weight {bad} is outside 1..=256")
            );
        }
        assert!(w(&[256; 64]).is_ok());
    }

    /// Hashes spread evenly over the 32-bit space, `n` of them.
    fn even(n: u32) -> impl Iterator<Item = u32> {
        let step = (1u64 << 32) / u64::from(n);
        (0..n).map(move |i| (u64::from(i) * step + step / 2) as u32)
    }

    fn hop(i: u32) -> NextHop {
        NextHop::Via {
            addr: IpAddr::from([10, 0, 0, i as u8]),
            ifindex: 1,
        }
    }

    /// Each member takes one contiguous region of the hash space, in order, as wide as its
    /// weight's share (within one hash); equal weights of any size cut it as weights of 1.
    #[test]
    fn members_take_contiguous_regions_in_proportion_to_their_weights() {
        for ws in [
            &[1u16, 1][..],
            &[1, 1, 1],
            &[3, 1],
            &[2, 4, 6],
            &[256, 1, 17, 99],
            &[5; 7],
            &[256; 64],
        ] {
            let set = NextHopSet::weighted((0..).map(hop).zip(ws.iter().copied())).unwrap();
            let total: u32 = ws.iter().map(|&w| u32::from(w)).sum();
            let (mut count, mut last) = (vec![0u64; ws.len()], 0);
            for h in even(1 << 16) {
                let i = set.hops().iter().position(|x| x == set.select(h)).unwrap();
                assert!(
                    i >= last,
                    "{ws:?}: member {i} after {last}: regions out of order"
                );
                (count[i], last) = (count[i] + 1, i);
            }
            for (i, &w) in ws.iter().enumerate() {
                let want = (1u64 << 16) * u64::from(w) / u64::from(total);
                assert!(count[i].abs_diff(want) <= 1, "{ws:?}: member {i} {count:?}");
                assert_eq!(set.weight(i), w);
            }
            if ws.iter().all(|&w| w == ws[0]) {
                assert_eq!(set.shares(), ws.len() as u32, "{ws:?}");
            }
        }
        let s = NextHopSet::ecmp([hop(1), hop(2)]).unwrap();
        assert_eq!(s.members().collect::<Vec<_>>(), [(hop(1), 1), (hop(2), 1)]);
    }

    /// What a change of the set disturbs: with `n` equal members, taking one out moves at
    /// most (n − 2) / 2n of the flows whose member stays — under half, where `hash % n`
    /// moved up to (n − 2) / n of them.
    #[test]
    fn taking_a_member_out_moves_under_half_of_the_other_flows() {
        for n in 2..=16u32 {
            let set = NextHopSet::ecmp((0..n).map(hop).collect::<Vec<_>>()).unwrap();
            for gone in 0..n {
                let rest =
                    NextHopSet::ecmp((0..n).filter(|&i| i != gone).map(hop).collect::<Vec<_>>())
                        .unwrap();
                let flows = 1u32 << 14;
                let moved = even(flows)
                    .filter(|&h| set.select(h) != &hop(gone) && set.select(h) != rest.select(h))
                    .count() as u32;
                assert!(
                    u64::from(moved) * u64::from(2 * n)
                        <= u64::from(flows) * u64::from(n - 2) + 2 * u64::from(n),
                    "{n} members, {gone} out: {moved} of {flows} flows moved"
                );
            }
        }
    }

    /// A resilient set picks by its bucket table: a flow's bucket is its share of the hash
    /// space, and the bucket's member is the table's, wherever the table puts it.
    #[test]
    fn a_resilient_set_picks_by_its_buckets() {
        let hops = [(hop(1), 1), (hop(2), 3), (hop(3), 1)];
        let table = [2u8, 0, 1, 1, 2, 1, 0, 1];
        let set = NextHopSet::resilient(hops, table).unwrap();
        assert_eq!((set.shares(), set.buckets()), (8, &table[..]));
        assert_eq!(set.members().collect::<Vec<_>>(), hops);
        for (b, h) in even(8).enumerate() {
            assert_eq!(set.member_of_share(b as u32), usize::from(table[b]));
            assert_eq!(set.select(h), &hops[usize::from(table[b])].0, "bucket {b}");
        }
        // Same members, other buckets: another set.
        let other = NextHopSet::resilient(hops, [0u8, 0, 1, 1, 2, 1, 0, 1]).unwrap();
        assert_ne!(set, other);
        // One member needs no table.
        let one = NextHopSet::resilient([(hop(1), 1)], [0u8; 8]).unwrap();
        assert_eq!((one.shares(), one.buckets()), (1, &[][..]));
        // Tables that do not fit.
        let err = |b: Vec<u8>| NextHopSet::resilient(hops, b).unwrap_err().to_string();
        assert_eq!(
            err(vec![0]),
            "resilient next-hop set: 1 buckets (2 to 4096)"
        );
        assert_eq!(
            err(vec![0; MAX_BUCKETS + 1]),
            "resilient next-hop set: 4097 buckets (2 to 4096)"
        );
        assert_eq!(
            err(vec![0, 3]),
            "resilient next-hop set: bucket member 3 of 3 next hops"
        );
        assert!(NextHopSet::resilient(hops, vec![1; MAX_BUCKETS]).is_ok());
    }

    #[test]
    fn interning_and_recycling() {
        let slots = NhSlots::new();
        let mut a = NhAlloc::new();
        let g = crossbeam_epoch::pin();
        let x = NextHopSet::one(NextHop::Local);
        let y = NextHopSet::one(NextHop::Drop);
        let ix = a.acquire(&slots, &x, &g).unwrap();
        assert_eq!(a.acquire(&slots, &x, &g).unwrap(), ix);
        let iy = a.acquire(&slots, &y, &g).unwrap();
        assert_ne!(ix, iy);
        assert_ne!(ix, 0);
        assert_eq!(slots.get(ix, &g), Some(&x));
        a.release(&slots, ix, &g);
        assert_eq!(slots.get(ix, &g), Some(&x), "still referenced once");
        a.release(&slots, ix, &g);
        // Unreferenced, but still readable for readers that hold the id from an old leaf.
        assert_eq!(slots.get(ix, &g), Some(&x));
        assert_eq!(a.len(), 1);
    }
}
