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

/// One or more next hops (ECMP), at most [`MAX_ECMP`]. Order is kept: it decides which member a
/// flow hash picks, so an unchanged set keeps flows on the same path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NextHopSet {
    hops: Box<[NextHop]>,
}

impl NextHopSet {
    /// A set of one next hop.
    pub fn one(hop: NextHop) -> Self {
        NextHopSet {
            hops: Box::new([hop]),
        }
    }

    /// An ECMP set; 1 to [`MAX_ECMP`] next hops.
    pub fn ecmp(hops: impl Into<Vec<NextHop>>) -> Result<Self, FibError> {
        let hops = hops.into();
        match hops.len() {
            0 => Err(FibError::NoNextHop),
            n if n > MAX_ECMP => Err(FibError::EcmpTooLarge { n, max: MAX_ECMP }),
            _ => Ok(NextHopSet {
                hops: hops.into_boxed_slice(),
            }),
        }
    }

    /// The next hops.
    #[inline]
    pub fn hops(&self) -> &[NextHop] {
        &self.hops
    }

    /// The member a flow with hash `hash` takes (hash modulo size; the caller hashes the
    /// flow's addresses/ports so one flow always takes one path).
    #[inline]
    pub fn select(&self, hash: u32) -> &NextHop {
        let n = self.hops.len();
        if n == 1 {
            &self.hops[0]
        } else {
            &self.hops[(hash as usize) % n]
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
        let s = NextHopSet::ecmp(hops).unwrap();
        assert_eq!(s.select(65), &NextHop::Attached { ifindex: 1 });
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
