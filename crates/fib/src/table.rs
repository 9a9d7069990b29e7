//! [`Table`]: one family's FIB of one virtual router — the route store the control plane edits
//! and the compiled [`poptrie`](crate::poptrie) the workers read.
//!
//! Writers (the control plane) are serialised by a mutex that readers never touch. Each change
//! updates the route store (`rib`, a `BTreeMap` ordered so a prefix's more-specifics are one
//! range scan away), then rebuilds only what the change can affect:
//!
//! * a prefix no longer than `top_bits` changes the inherited value of the top-level slots it
//!   covers (minus those shadowed by a more specific short prefix): slots that are plain leaves
//!   get one atomic store each, slots with a subtree get that subtree rebuilt;
//! * a longer prefix lies inside one top-level slot: the node whose 6-bit stride holds the
//!   prefix's last bit is rebuilt with its subtree, and the path above it copied.
//!
//! A full-table load builds every subtree in one pass from the sorted routes instead.
//!
//! Every change bumps [`Table::generation`], which flow caches compare to drop stale entries.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_epoch::Guard;

use crate::FibError;
use crate::family::{Family, Key};
use crate::nexthop::{NextHopSet, NhAlloc, NhSlots};
use crate::poptrie::{self, Built, Node};
use crate::prefix::Prefix;

/// The id of a next-hop set, as lookups return it. Resolve with [`Table::nexthops`]; the data
/// plane may also index its own per-id arrays with [`NhId::get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NhId(NonZeroU32);

impl NhId {
    /// The raw id (≥ 1).
    #[inline]
    pub fn get(self) -> u32 {
        self.0.get()
    }

    #[inline(always)]
    fn from_leaf(v: u32) -> Option<NhId> {
        NonZeroU32::new(v).map(NhId)
    }
}

/// Most entries a batch lookup is designed for (a data-plane vector).
pub const BATCH: usize = 256;

/// A top-level entry: a leaf value `(id << 1) | 1`, or a pointer to a heap [`Node`] (even).
#[inline(always)]
const fn leaf_entry(id: u32) -> u64 {
    ((id as u64) << 1) | 1
}

/// The top-level entry for a built subtree: a leaf value, or its root moved to the heap.
fn top_entry(built: Built) -> u64 {
    match built {
        Built::Leaf(v) => leaf_entry(v),
        Built::Node(n) => Box::into_raw(Box::new(n)) as u64,
    }
}

/// How a table is laid out; the defaults suit a full Internet table.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Bits resolved by the top-level array (8..=24): memory `8 << top_bits` bytes. The family's
    /// default ([`Family::TOP_BITS`]) is right for big tables; a VR with a few hundred routes can
    /// use 12 and save megabytes.
    pub top_bits: u8,
}

/// Memory a table uses, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Top-level array.
    pub top: usize,
    /// Trie nodes (including the roots below the top level).
    pub nodes: usize,
    /// Trie leaves.
    pub leaves: usize,
    /// Number of trie nodes.
    pub node_count: usize,
}

impl Memory {
    /// Sum of the parts (the route store on the writer side is not counted: it is the control
    /// plane's copy, like the kernel's own table).
    pub fn total(&self) -> usize {
        self.top + self.nodes + self.leaves
    }
}

struct Writer<F: Family> {
    rib: BTreeMap<Prefix<F>, u32>,
    /// Routes per prefix length, to skip empty lengths in covering searches.
    lens: [u32; 129],
    /// Per top-level slot: the best route with length ≤ top_bits covering it (0 = none).
    inh: Vec<u32>,
    nh: NhAlloc,
}

/// The FIB of one address family of one virtual router.
///
/// Lookups (`&self`, an epoch [`Guard`] from [`crate::pin`]) never block and never see a torn
/// update; changes (`&self` too) are serialised among themselves.
pub struct Table<F: Family> {
    top: Box<[AtomicU64]>,
    top_bits: u8,
    nh: NhSlots,
    generation: AtomicU64,
    writer: Mutex<Writer<F>>,
}

// SAFETY: the raw node pointers reachable from `top` point to immutable, heap-allocated nodes
// owned by the table and freed only through the epoch (or in `Drop` with exclusive access);
// sharing and sending them between threads is what the design is for.
unsafe impl<F: Family> Send for Table<F> {}
// SAFETY: as above; all mutation goes through atomics or the writer mutex.
unsafe impl<F: Family> Sync for Table<F> {}

impl<F: Family> core::fmt::Debug for Table<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Table")
            .field("family", &F::NAME)
            .field("routes", &self.len())
            .field("generation", &self.generation())
            .finish()
    }
}

impl<F: Family> Default for Table<F> {
    fn default() -> Self {
        Self::new()
    }
}

/// Memory freed once readers are done; sent to the epoch collector.
struct Garbage {
    deep: Vec<Node>,
    shallow: Vec<Node>,
    roots: Vec<*mut Node>,
}

// SAFETY: the pointers are unreachable by anyone but this garbage once it is deferred.
unsafe impl Send for Garbage {}

impl Garbage {
    fn new() -> Self {
        Garbage {
            deep: Vec::new(),
            shallow: Vec::new(),
            roots: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.deep.is_empty() && self.shallow.is_empty() && self.roots.is_empty()
    }

    /// Add a whole unlinked top-level entry (a root and its subtree).
    fn entry_deep(&mut self, e: u64) {
        if e & 1 == 0 {
            let p = e as *mut Node;
            // SAFETY: `e` was a published root, still live until this garbage is freed.
            self.deep.push(unsafe { *p });
            self.roots.push(p);
        }
    }

    /// Free everything. Safety: only once no reader can hold a pointer into it.
    unsafe fn free(self) {
        // SAFETY: caller guarantees the grace period; each piece is listed once.
        unsafe {
            for n in &self.deep {
                n.free_deep();
            }
            for n in &self.shallow {
                n.free_shallow();
            }
            for p in self.roots {
                drop(Box::from_raw(p));
            }
        }
    }

    fn defer(self, guard: &Guard) {
        if !self.is_empty() {
            guard.defer(move || {
                // SAFETY: the pieces were unlinked before this call, so only readers pinned
                // now can see them, and the epoch runs this closure after they unpin.
                unsafe { self.free() }
            });
        }
    }
}

impl<F: Family> Table<F> {
    /// An empty table with the family's default layout.
    pub fn new() -> Self {
        Self::with_config(Config {
            top_bits: F::TOP_BITS,
        })
    }

    /// An empty table with `config`'s layout. Panics if `top_bits` is outside 8..=24.
    pub fn with_config(config: Config) -> Self {
        let b = config.top_bits;
        assert!((8..=24).contains(&b), "top_bits {b} outside 8..=24");
        Table {
            top: (0..1usize << b)
                .map(|_| AtomicU64::new(leaf_entry(0)))
                .collect(),
            top_bits: b,
            nh: NhSlots::new(),
            generation: AtomicU64::new(0),
            writer: Mutex::new(Writer {
                rib: BTreeMap::new(),
                lens: [0; 129],
                inh: vec![0; 1 << b],
                nh: NhAlloc::new(),
            }),
        }
    }

    /// Bumped by every change; a cached lookup result is valid while this is unchanged.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.w().rib.len()
    }

    /// No routes?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of distinct next-hop sets in use.
    pub fn nexthop_sets(&self) -> usize {
        self.w().nh.len()
    }

    fn w(&self) -> std::sync::MutexGuard<'_, Writer<F>> {
        // A panic while holding the lock can only come from a bug in this module; the table
        // itself is still consistent for readers (published state is immutable), so go on.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ---- lookups -------------------------------------------------------------------------

    /// Longest-prefix match for one address.
    #[inline]
    pub fn lookup(&self, addr: F::Addr, _guard: &Guard) -> Option<NhId> {
        NhId::from_leaf(self.lookup_key(F::key(addr)))
    }

    #[inline(always)]
    fn lookup_key(&self, key: F::Key) -> u32 {
        let e = self.top[key.top(self.top_bits)].load(Ordering::Acquire);
        if e & 1 != 0 {
            return (e >> 1) as u32;
        }
        // SAFETY: an even entry is a published root; the caller's guard keeps it alive.
        unsafe { poptrie::walk(e as *const Node, self.top_bits, key) }
    }

    /// Longest-prefix match for a vector of addresses: `out[i]` is the result for `addrs[i]`.
    /// Designed for vectors of up to [`BATCH`]; longer slices are done in chunks.
    ///
    /// Lookups advance level by level over the whole vector rather than one address at a time,
    /// so the memory accesses of different addresses overlap instead of waiting on each other.
    ///
    /// Panics if the slices differ in length.
    pub fn lookup_batch(&self, addrs: &[F::Addr], out: &mut [Option<NhId>], _guard: &Guard) {
        assert_eq!(
            addrs.len(),
            out.len(),
            "lookup_batch: addrs and out differ in length"
        );
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            self.batch_chunk(a, o);
        }
    }

    #[inline(always)]
    fn batch_chunk(&self, addrs: &[F::Addr], out: &mut [Option<NhId>]) {
        let n = addrs.len();
        let mut keys = [F::key(addrs[0]); BATCH];
        let mut nodes = [core::ptr::null::<Node>(); BATCH];
        let mut idx = [0u8; BATCH];
        let mut active = 0usize;
        for i in 0..n {
            keys[i] = F::key(addrs[i]);
        }
        for i in 0..n {
            let e = self.top[keys[i].top(self.top_bits)].load(Ordering::Acquire);
            out[i] = NhId::from_leaf((e >> 1) as u32);
            nodes[active] = e as *const Node;
            idx[active] = i as u8;
            active += (e & 1 == 0) as usize;
        }
        let mut depth = self.top_bits;
        let mut leafp = [core::ptr::null::<u32>(); BATCH];
        let mut lidx = [0u8; BATCH];
        while active > 0 {
            // Three passes per level, none with a data-dependent branch, so that the loads of
            // all addresses in the vector are in flight together: start loading the nodes;
            // step through them (children go on, leaves are collected); load the leaves.
            for &n in &nodes[..active] {
                poptrie::prefetch(n);
            }
            let (mut next, mut nleaf) = (0, 0);
            for a in 0..active {
                let i = idx[a] as usize;
                // SAFETY: `nodes[a]` is a live node reached from a published root under the
                // caller's guard.
                let (is_child, child, leaf) =
                    unsafe { (*nodes[a]).step_branchless(keys[i].bits6(depth)) };
                // `next <= a`, so this never overwrites an entry not yet read.
                nodes[next] = child;
                idx[next] = i as u8;
                next += is_child;
                leafp[nleaf] = leaf;
                lidx[nleaf] = i as u8;
                nleaf += 1 - is_child;
            }
            for l in 0..nleaf {
                // SAFETY: collected only for leaf slots, where the pointer is in the node's
                // live leaves array.
                out[lidx[l] as usize] = NhId::from_leaf(unsafe { *leafp[l] });
            }
            active = next;
            depth += 6;
        }
    }

    /// The next-hop set of an id returned by a lookup under the same guard.
    #[inline]
    pub fn nexthops<'g>(&'g self, id: NhId, guard: &'g Guard) -> Option<&'g NextHopSet> {
        self.nh.get(id.get(), guard)
    }

    /// Lookup and resolve in one (a convenience for the control plane and tests).
    pub fn lookup_set(&self, addr: F::Addr) -> Option<NextHopSet> {
        let g = crossbeam_epoch::pin();
        self.lookup(addr, &g)
            .and_then(|id| self.nexthops(id, &g).cloned())
    }

    // ---- the route store (control-plane view) ---------------------------------------------

    /// The route for exactly `prefix`, if any.
    pub fn get(&self, prefix: &Prefix<F>) -> Option<NextHopSet> {
        let w = self.w();
        let id = *w.rib.get(prefix)?;
        let g = crossbeam_epoch::pin();
        self.nh.get(id, &g).cloned()
    }

    /// All routes, in prefix order (what `ip route show` would list).
    pub fn routes(&self) -> Vec<(Prefix<F>, NextHopSet)> {
        let w = self.w();
        let g = crossbeam_epoch::pin();
        w.rib
            .iter()
            .map(|(p, &id)| (*p, self.nh.get(id, &g).expect("live id").clone()))
            .collect()
    }

    // ---- changes ---------------------------------------------------------------------------

    /// Add or replace the route for `prefix` (`ip route replace`). Returns the set it replaced.
    pub fn insert(
        &self,
        prefix: Prefix<F>,
        set: impl Into<NextHopSet>,
    ) -> Result<Option<NextHopSet>, FibError> {
        let set = set.into();
        let guard = crossbeam_epoch::pin();
        let mut w = self.w();
        let id = w.nh.acquire(&self.nh, &set, &guard)?;
        let old = w.rib.insert(prefix, id);
        let old_set = old.map(|o| self.nh.get(o, &guard).expect("live id").clone());
        match old {
            Some(o) if o == id => {
                w.nh.release(&self.nh, id, &guard);
                return Ok(old_set);
            }
            Some(_) => {}
            None => w.lens[usize::from(prefix.len())] += 1,
        }
        let mut garbage = Garbage::new();
        self.apply(&mut w, prefix, &mut garbage, &guard);
        if let Some(o) = old {
            w.nh.release(&self.nh, o, &guard);
        }
        self.generation.fetch_add(1, Ordering::Release);
        drop(w);
        garbage.defer(&guard);
        guard.flush();
        Ok(old_set)
    }

    /// Add a route for `prefix`, refusing if one exists (`ip route add`).
    pub fn add(&self, prefix: Prefix<F>, set: impl Into<NextHopSet>) -> Result<(), FibError> {
        if self.w().rib.contains_key(&prefix) {
            return Err(FibError::Exists {
                prefix: prefix.to_string(),
            });
        }
        self.insert(prefix, set).map(|_| ())
    }

    /// Remove the route for `prefix` (`ip route del`); addresses it covered fall back to the
    /// next covering route. Returns the removed set.
    pub fn remove(&self, prefix: &Prefix<F>) -> Result<NextHopSet, FibError> {
        let guard = crossbeam_epoch::pin();
        let mut w = self.w();
        let Some(id) = w.rib.remove(prefix) else {
            return Err(FibError::NotFound {
                prefix: prefix.to_string(),
            });
        };
        w.lens[usize::from(prefix.len())] -= 1;
        let set = self.nh.get(id, &guard).expect("live id").clone();
        let mut garbage = Garbage::new();
        self.apply(&mut w, *prefix, &mut garbage, &guard);
        w.nh.release(&self.nh, id, &guard);
        self.generation.fetch_add(1, Ordering::Release);
        drop(w);
        garbage.defer(&guard);
        guard.flush();
        Ok(set)
    }

    /// Replace the whole table with `routes` in one pass (a full-table load or a control-plane
    /// resync). Later duplicates of a prefix win. Readers see each top-level slot switch from
    /// old to new atomically.
    pub fn load(
        &self,
        routes: impl IntoIterator<Item = (Prefix<F>, NextHopSet)>,
    ) -> Result<(), FibError> {
        let guard = crossbeam_epoch::pin();
        let mut w = self.w();
        // Intern everything first: on error nothing has changed but the interning, undone below.
        let mut rib = BTreeMap::new();
        let mut acquired = Vec::new();
        for (p, set) in routes {
            let id = match w.nh.acquire(&self.nh, &set, &guard) {
                Ok(id) => id,
                Err(e) => {
                    for id in acquired {
                        w.nh.release(&self.nh, id, &guard);
                    }
                    return Err(e);
                }
            };
            acquired.push(id);
            if let Some(old) = rib.insert(p, id) {
                w.nh.release(&self.nh, old, &guard);
            }
        }
        let old_rib = core::mem::replace(&mut w.rib, rib);
        let mut lens = [0u32; 129];
        for p in w.rib.keys() {
            lens[usize::from(p.len())] += 1;
        }
        w.lens = lens;
        let s = self.top_bits;
        // Inherited values: paint the short routes in order (covering before covered).
        let mut inh = vec![0u32; 1 << s];
        let mut deep: Vec<(F::Key, u8, u32)> = Vec::with_capacity(w.rib.len());
        for (p, &id) in &w.rib {
            if p.len() <= s {
                let first = p.key().top(s);
                inh[first..first + (1 << (s - p.len()))].fill(id);
            } else {
                deep.push((p.key(), p.len(), id));
            }
        }
        let mut garbage = Garbage::new();
        let mut i = 0;
        for (t, &inherited) in inh.iter().enumerate() {
            let start = i;
            while i < deep.len() && deep[i].0.top(s) == t {
                i += 1;
            }
            let built = poptrie::build(F::Key::from_top(t, s), s, inherited, &deep[start..i]);
            self.publish(t, built, &mut garbage);
        }
        w.inh = inh;
        for id in old_rib.into_values() {
            w.nh.release(&self.nh, id, &guard);
        }
        self.generation.fetch_add(1, Ordering::Release);
        drop(w);
        garbage.defer(&guard);
        guard.flush();
        Ok(())
    }

    /// Remove every route.
    pub fn clear(&self) {
        self.load(core::iter::empty())
            .expect("an empty load cannot fail");
    }

    /// Store `built` as top-level slot `t`, collecting what it replaced.
    fn publish(&self, t: usize, built: Built, garbage: &mut Garbage) {
        let old = self.top[t].swap(top_entry(built), Ordering::AcqRel);
        garbage.entry_deep(old);
    }

    /// The best route with length ≤ `maxlen` covering `key` (0 = none).
    fn best_cover(w: &Writer<F>, key: F::Key, maxlen: u8) -> u32 {
        for l in (0..=maxlen).rev() {
            if w.lens[usize::from(l)] != 0 {
                let p = Prefix::from_key(key.masked(l), l);
                if let Some(&id) = w.rib.get(&p) {
                    return id;
                }
            }
        }
        0
    }

    /// Routes strictly inside the /`depth` at `base` with length > `depth`, sorted.
    fn routes_under(w: &Writer<F>, base: F::Key, depth: u8) -> Vec<(F::Key, u8, u32)> {
        let last = base.last(depth);
        w.rib
            .range(Prefix::from_key(base, depth)..)
            .take_while(|(p, _)| p.key() <= last)
            .filter(|(p, _)| p.len() > depth)
            .map(|(p, &id)| (p.key(), p.len(), id))
            .collect()
    }

    /// Rebuild whatever `prefix` (just added, replaced or removed in `w.rib`) affects.
    fn apply(&self, w: &mut Writer<F>, prefix: Prefix<F>, garbage: &mut Garbage, guard: &Guard) {
        let s = self.top_bits;
        if prefix.len() <= s {
            self.apply_short(w, prefix, garbage);
        } else {
            self.apply_long(w, prefix, garbage, guard);
        }
    }

    fn apply_short(&self, w: &mut Writer<F>, prefix: Prefix<F>, garbage: &mut Garbage) {
        let s = self.top_bits;
        let first = prefix.key().top(s);
        let count = 1usize << (s - prefix.len());
        // Slots under a more specific route of length ≤ s keep their value.
        let mut shadowed = vec![false; count];
        let last = prefix.key().last(prefix.len());
        for (p, _) in w.rib.range(prefix..).take_while(|(p, _)| p.key() <= last) {
            if p.len() > prefix.len() && p.len() <= s {
                let f = p.key().top(s) - first;
                shadowed[f..f + (1 << (s - p.len()))].fill(true);
            }
        }
        let value = Self::best_cover(w, prefix.key(), prefix.len());
        for (off, &sh) in shadowed.iter().enumerate() {
            let t = first + off;
            if sh || w.inh[t] == value {
                continue;
            }
            w.inh[t] = value;
            // A leaf entry may still have routes below it (a subtree whose leaves were all
            // equal collapses), so ask the route store, not the entry's shape.
            let base = F::Key::from_top(t, s);
            let routes = Self::routes_under(w, base, s);
            if routes.is_empty() && self.top[t].load(Ordering::Acquire) & 1 != 0 {
                self.top[t].store(leaf_entry(value), Ordering::Release);
            } else {
                self.publish(t, poptrie::build(base, s, value, &routes), garbage);
            }
        }
    }

    fn apply_long(&self, w: &mut Writer<F>, prefix: Prefix<F>, garbage: &mut Garbage, _g: &Guard) {
        let s = self.top_bits;
        let key = prefix.key();
        let t = key.top(s);
        let e = self.top[t].load(Ordering::Acquire);
        if e & 1 != 0 {
            // No subtree yet: build one for the slot.
            let base = F::Key::from_top(t, s);
            let routes = Self::routes_under(w, base, s);
            self.publish(t, poptrie::build(base, s, w.inh[t], &routes), garbage);
            return;
        }
        // Descend to the node whose stride holds the prefix's last bit (or the deepest node on
        // the way, if the path stops at a leaf first).
        let root = e as *mut Node;
        let mut path: Vec<(*const Node, usize)> = Vec::new();
        let mut node = root as *const Node;
        let mut depth = s;
        loop {
            if u32::from(prefix.len()) <= u32::from(depth) + 6 {
                break;
            }
            let v = key.bits6(depth);
            // SAFETY: `node` is live: published and we are the only writer.
            match unsafe { (*node).step(v) } {
                Ok(c) => {
                    path.push((node, v));
                    node = c;
                    depth += 6;
                }
                Err(_) => break,
            }
        }
        let base = key.masked(depth);
        let inherited = Self::best_cover(w, base, depth);
        let routes = Self::routes_under(w, base, depth);
        let mut built = poptrie::build(base, depth, inherited, &routes);
        for &(anc, v) in path.iter().rev() {
            // SAFETY: ancestors on the path are live (only this writer retires nodes).
            built = unsafe { poptrie::replace_slot(&*anc, v, built) };
        }
        self.top[t].store(top_entry(built), Ordering::Release);
        // Retire: the rebuilt subtree whole, the copied ancestors shallowly, the old root box.
        // SAFETY: `node` and the ancestors are still live (unlinked just now, freed later).
        unsafe {
            garbage.deep.push(*node);
            for &(anc, _) in &path {
                garbage.shallow.push(*anc);
            }
        }
        garbage.roots.push(root);
    }

    // ---- introspection -----------------------------------------------------------------------

    /// Memory used by the lookup structure.
    pub fn memory(&self) -> Memory {
        let _w = self.w(); // no concurrent writer frees nodes while we walk
        let mut m = Memory {
            top: self.top.len() * 8,
            nodes: 0,
            leaves: 0,
            node_count: 0,
        };
        for e in self.top.iter() {
            let e = e.load(Ordering::Acquire);
            if e & 1 == 0 {
                // SAFETY: published root; the writer lock keeps it from being retired.
                let (n, l) = unsafe { (*(e as *const Node)).bytes_deep() };
                m.node_count += n + 1;
                m.nodes += (n + 1) * size_of::<Node>();
                m.leaves += l * 4;
            }
        }
        m
    }
}

impl<F: Family> Drop for Table<F> {
    fn drop(&mut self) {
        let mut g = Garbage::new();
        for e in self.top.iter() {
            g.entry_deep(e.load(Ordering::Relaxed));
        }
        // SAFETY: `&mut self`: no reader borrows the table any more, so nothing can still
        // reach these nodes (retired ones went to the epoch earlier and are disjoint).
        unsafe { g.free() };
    }
}
