//! The compiled lookup structure: a Poptrie (Asai & Ohara, SIGCOMM 2015) of immutable nodes.
//!
//! Why this shape: a plain DIR-24-8 for IPv4 is 32 MiB of `u16`s and every random lookup misses
//! cache (≈85 M lookups/s measured here). A multibit trie whose nodes are compressed with
//! bitmaps + popcount stays a few MiB for a full BGP table, mostly in L2, and needs one or two
//! node visits for the /24s that make up 60 % of it.
//!
//! Layout. A direct-pointing top level resolves the first `top_bits` bits (see
//! [`crate::Family::TOP_BITS`]). Below it each [`Node`] consumes 6 bits (64 slots). Slot `v` is
//! either a child node (bit `v` of `vector` set) or a leaf. Children are stored contiguously,
//! so the child for slot `v` is `children[popcnt(vector & mask(v)) - 1]`. Leaves are run-length
//! compressed: bit `v` of `leafvec` is set where a run of equal leaf values starts (child slots
//! don't break runs), so the leaf for slot `v` is `leaves[popcnt(leafvec & mask(v)) - 1]`. Leaves
//! are fully expanded: a leaf already holds the longest match for its slot, including routes
//! inherited from above. That makes lookup a pure walk with no backtracking.
//!
//! Concurrency. Nodes are never modified after they are published. An update builds the
//! changed subtree anew and copies the path above it (path copying), then publishes the new
//! subtree root with one atomic store into the top level; readers see either the old or the new
//! subtree, never a mix. Old nodes are freed through the crossbeam epoch once no reader that
//! could have seen them is still pinned. Readers take no lock and write no shared memory.
//!
//! Ownership. Each node owns its `children` and `leaves` arrays. Path copying makes the copy of
//! an ancestor share the unchanged children *arrays* of its siblings, so retiring an old ancestor
//! frees only its own two arrays ("shallow"), while the replaced subtree is freed whole ("deep").

use crate::family::Key;

/// One trie node: 64 slots, 32 bytes, two to a cache line.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    /// Bit v set: slot v has a child node.
    vector: u64,
    /// Bit v set: a run of equal leaves starts at slot v.
    leafvec: u64,
    /// `popcnt(vector)` nodes.
    children: *const Node,
    /// `popcnt(leafvec)` leaf values (next-hop ids, 0 = no route).
    leaves: *const u32,
}

const _: () = assert!(size_of::<Node>() == 32);

/// A subtree being built: collapsed to a single leaf value when it holds no more-specific route.
#[derive(Debug)]
pub(crate) enum Built {
    Leaf(u32),
    Node(Node),
}

/// Bits 0..=v set.
#[inline(always)]
fn upto(v: usize) -> u64 {
    u64::MAX >> (63 - v)
}

impl Node {
    /// One step of a lookup: the child to descend into, or the leaf value.
    ///
    /// # Safety
    /// `self` must be a published (or being-built, fully formed) node whose arrays are live.
    #[inline(always)]
    pub(crate) unsafe fn step(&self, v: usize) -> Result<*const Node, u32> {
        let m = upto(v);
        if self.vector >> v & 1 != 0 {
            let i = (self.vector & m).count_ones() as usize - 1;
            // SAFETY: bit v of `vector` is set, so `i < popcnt(vector)` = children's length.
            Ok(unsafe { self.children.add(i) })
        } else {
            // Slot v is a leaf, so some run starts at or before it: popcnt ≥ 1.
            let i = (self.leafvec & m).count_ones() as usize - 1;
            // SAFETY: `i < popcnt(leafvec)` = leaves' length.
            Err(unsafe { *self.leaves.add(i) })
        }
    }

    /// A branch-free step for batch lookups: `(is_child, child, leaf)`, where only one of
    /// `child` (if `is_child == 1`) or `leaf` (if 0) is a valid pointer; the other is computed
    /// with wrapping arithmetic and must not be dereferenced.
    #[inline(always)]
    pub(crate) fn step_branchless(&self, v: usize) -> (usize, *const Node, *const u32) {
        let m = upto(v);
        let is_child = (self.vector >> v & 1) as usize;
        let ci = ((self.vector & m).count_ones() as usize).wrapping_sub(1);
        let li = ((self.leafvec & m).count_ones() as usize).wrapping_sub(1);
        (
            is_child,
            self.children.wrapping_add(ci),
            self.leaves.wrapping_add(li),
        )
    }

    fn n_children(&self) -> usize {
        self.vector.count_ones() as usize
    }

    fn n_leaves(&self) -> usize {
        self.leafvec.count_ones() as usize
    }

    /// The contents of slot v, for copying a node with one slot changed.
    ///
    /// # Safety
    /// As for [`Node::step`].
    unsafe fn slot(&self, v: usize) -> Built {
        // SAFETY: forwarded.
        match unsafe { self.step(v) } {
            // SAFETY: `c` points into this node's live children array.
            Ok(c) => Built::Node(unsafe { *c }),
            Err(leaf) => Built::Leaf(leaf),
        }
    }

    /// Free this node's own two arrays (not its children's).
    ///
    /// # Safety
    /// The arrays must be unreachable by readers (grace period passed) and not freed before;
    /// children arrays of the children must be owned elsewhere or freed separately.
    pub(crate) unsafe fn free_shallow(&self) {
        // SAFETY: the arrays were made by `into_raw` with exactly these lengths.
        unsafe {
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.children as *mut Node,
                self.n_children(),
            )));
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.leaves as *mut u32,
                self.n_leaves(),
            )));
        }
    }

    /// Free this node's arrays and its whole subtree.
    ///
    /// # Safety
    /// As for [`Node::free_shallow`], for the whole subtree.
    pub(crate) unsafe fn free_deep(&self) {
        for i in 0..self.n_children() {
            // SAFETY: `i` < children's length; the subtree is ours to free.
            unsafe { (*self.children.add(i)).free_deep() };
        }
        // SAFETY: forwarded.
        unsafe { self.free_shallow() };
    }

    /// Bytes this subtree uses (nodes in children arrays, leaves), for memory reports.
    ///
    /// # Safety
    /// The subtree must be live for the duration of the call.
    pub(crate) unsafe fn bytes_deep(&self) -> (usize, usize) {
        let mut nodes = self.n_children();
        let mut leaves = self.n_leaves();
        for i in 0..self.n_children() {
            // SAFETY: forwarded; `i` in range.
            let (n, l) = unsafe { (*self.children.add(i)).bytes_deep() };
            nodes += n;
            leaves += l;
        }
        (nodes, leaves)
    }
}

fn into_raw<T>(v: Vec<T>) -> *const T {
    Box::into_raw(v.into_boxed_slice()) as *const T
}

/// Make a node from its 64 slots, or collapse to a leaf if there is no child and one value.
pub(crate) fn make_node(slots: [Built; 64]) -> Built {
    let (mut vector, mut leafvec) = (0u64, 0u64);
    let mut children = Vec::new();
    let mut leaves = Vec::new();
    let mut last = None;
    for (v, s) in slots.into_iter().enumerate() {
        match s {
            Built::Node(n) => {
                vector |= 1 << v;
                children.push(n);
            }
            Built::Leaf(x) => {
                if last != Some(x) {
                    leafvec |= 1 << v;
                    leaves.push(x);
                    last = Some(x);
                }
            }
        }
    }
    if vector == 0 && leaves.len() == 1 {
        return Built::Leaf(leaves[0]);
    }
    Built::Node(Node {
        vector,
        leafvec,
        children: into_raw(children),
        leaves: into_raw(leaves),
    })
}

/// Build the subtree for the node at `depth` whose range starts at `base`.
///
/// `routes` are `(key, len, id)` of every route strictly inside the range with `len > depth`,
/// sorted by `(key, len)`; `inherited` is the best route with `len ≤ depth` covering the range.
/// Sorted order means a covering route comes before the routes it covers, so painting slots
/// in order leaves the longest match in each slot.
pub(crate) fn build<K: Key>(base: K, depth: u8, inherited: u32, routes: &[(K, u8, u32)]) -> Built {
    if routes.is_empty() {
        return Built::Leaf(inherited);
    }
    let end = u32::from(depth) + 6;
    let mut vals = [inherited; 64];
    for &(k, len, id) in routes {
        if u32::from(len) <= end {
            let first = k.bits6(depth);
            let n = 1usize << (end - u32::from(len));
            vals[first..first + n].fill(id);
        }
    }
    let mut slots: [Built; 64] = core::array::from_fn(|v| Built::Leaf(vals[v]));
    // Routes deeper than this node, grouped by slot (contiguous once the short ones are skipped).
    let mut i = 0;
    while i < routes.len() {
        if u32::from(routes[i].1) <= end {
            i += 1;
            continue;
        }
        let v = routes[i].0.bits6(depth);
        let mut group = Vec::new();
        while i < routes.len() && routes[i].0.bits6(depth) == v {
            if u32::from(routes[i].1) > end {
                group.push(routes[i]);
            }
            i += 1;
        }
        slots[v] = build(base.with_bits6(depth, v), depth + 6, vals[v], &group);
    }
    make_node(slots)
}

/// A copy of `anc` with slot `v` replaced; siblings' arrays are shared with `anc` (see the
/// module docs on ownership).
///
/// # Safety
/// `anc` must be live.
pub(crate) unsafe fn replace_slot(anc: &Node, v: usize, with: Built) -> Built {
    let mut with = Some(with);
    let slots: [Built; 64] = core::array::from_fn(|i| {
        if i == v {
            with.take().expect("once")
        } else {
            // SAFETY: `anc` is live (caller).
            unsafe { anc.slot(i) }
        }
    });
    make_node(slots)
}

/// Hint the CPU to start loading the cache line at `p`.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Walk from `node` at `depth` to the leaf for `key`.
///
/// # Safety
/// `node` must be a live published node, kept alive (epoch guard) for the call.
#[inline(always)]
pub(crate) unsafe fn walk<K: Key>(mut node: *const Node, mut depth: u8, key: K) -> u32 {
    loop {
        // SAFETY: `node` is live (caller) and every child pointer of a live node is live.
        match unsafe { (*node).step(key.bits6(depth)) } {
            Ok(c) => {
                node = c;
                depth += 6;
            }
            Err(leaf) => return leaf,
        }
    }
}
