//! The compiled lookup structure: a Poptrie (Asai & Ohara, SIGCOMM 2015) of immutable nodes,
//! each stored as one compact *blob* in an [`Arena`](crate::arena).
//!
//! Why this shape: a plain DIR-24-8 for IPv4 is 32 MiB of `u16`s and every random lookup misses
//! the caches nearest the core. A multibit trie whose nodes are compressed with bitmaps +
//! popcount is a few MiB for a full BGP table, most of it in the 4 MiB L2, and needs one node
//! visit for the /24s that make up 60 % of it.
//!
//! Layout. A direct-pointing top level resolves the first `top_bits` bits (see
//! [`crate::Family::TOP_BITS`]) into entries holding a reference — a leaf `id << 1`, or a node
//! (odd) — and the slot's cover: 64-bit entries in IPv6 ([`top_entry`]), 32-bit ones in IPv4
//! (24-bit reference, cover in the top byte; or, in a table whose ids or arena are too big for
//! that, a 32-bit reference and the covers expanded into the leaves). Below it each node
//! consumes 6 bits (64 slots). Slot `v` is either a child node
//! (bit `v` of `vector` set) or a leaf. Leaves are run-length compressed: bit `v` of `leafvec`
//! is set where a run of equal leaf values starts (child slots don't break runs), so the leaf
//! for slot `v` is `leaves[popcnt(leafvec & mask(v)) - 1]`. Leaves are fully expanded: a leaf
//! already holds the longest match for its slot, including routes inherited from above, so a
//! lookup is a pure walk with no backtracking. The exceptions are the default route and the
//! other routes no longer than the top level (the covers): the trie is built as if they did not
//! exist (leaves only they would cover hold 0, "no route"), and the [`Table`](crate::Table)
//! substitutes the slot's cover, else the default, for a 0 result (see `table.rs`).
//!
//! A node's blob, in 64-bit words (offsets are in words, references 4 bytes):
//!
//! ```text
//! [skip: frag, miss|6k<<32]  only for a path-compressed node (reference bit 2)
//! leafvec
//! vector                     only for a node with children (reference bit 1)
//! child references: u32 × popcnt(vector)
//! leaves: (1 << lw) bytes × popcnt(leafvec)
//! ```
//!
//! Why blobs rather than Poptrie's separate node and leaf arrays: a node's leaves and child
//! references sit right after its bitmaps, mostly in the same cache line, so each level costs
//! one cache miss instead of two (node, then leaf), and a leaf-only node (99 % of the nodes of a
//! full IPv4 table: nothing longer than /24 below them) costs 8 bytes of header, not 24. Leaves
//! are as narrow as the table's next-hop ids allow (`lw`: 1, 2 or 4 bytes; see
//! [`Table`](crate::Table)).
//!
//! Path compression (IPv6). A chain of nodes that each have one child and one leaf value for all
//! their other slots (a /48 alone under its /32 makes two such levels) is folded into the blob
//! of the chain's last node: `k` strides of key bits `frag` that must match, else the result is
//! `miss`. A /48 lookup then costs one blob below the shared upper levels instead of three.
//! IPv4 does not use it: its chains are rare, and the check costs every lookup.
//!
//! Concurrency. Blobs are never modified after they are published. An update makes the
//! changed slots of one node anew ([`build_range`], or [`repaint_range`] where only their
//! inherited value changed: new blobs for the nodes it reaches, the other subtrees shared)
//! and copies the path above it (path copying, [`make_node`] per level; unchanged subtrees
//! are shared), then publishes the new subtree root with one atomic store into the top level
//! (or a block entry); readers see either the old or the new subtree, never a mix. The
//! builder is deterministic, so an updated trie is the one a fresh build of the same routes
//! makes (a property test checks it). Replaced blobs are retired to the arena, which reuses
//! them only after an epoch grace period.

use core::hint::select_unpredictable;

use crate::arena::{Arena, BLOCK, MAX_BLOB, Snapshot};
use crate::family::Key;

/// A 32-bit reference: a leaf `id << 1` (top level only) or a node (odd).
pub(crate) type Ref = u32;

/// Reference bit: a node, not a leaf value. Leaves are `id << 1`, so an all-zero top level
/// means "no route" and its untouched pages cost no memory.
const NODE: u32 = 1;
/// Reference bit: the node has children (a `vector` word).
const INNER: u32 = 2;
/// Reference bit: the node starts with a path-compression header.
const SKIP: u32 = 4;
/// Most strides one skip header folds: the `6·k` bits of `frag` and the 6 bits of the stride
/// after them must fit the 64-bit key window a lookup step reads (see [`step_win`]).
const KMAX: u32 = 9;

/// The top-level entry for a leaf value.
#[inline(always)]
pub(crate) const fn leaf_ref(id: u32) -> Ref {
    id << 1
}

/// A top-level entry: the trie reference `r` for the slot (built without the routes no longer
/// than the top level) and `cover`, the id of the longest of those covering the slot (0:
/// none). A lookup takes `cover` where the trie has no route.
#[inline(always)]
pub(crate) const fn top_entry(r: Ref, cover: u32) -> u64 {
    r as u64 | (cover as u64) << 32
}

/// Word offset of the block a top-level entry names (entry 0: the empty block at 0).
#[inline(always)]
pub(crate) const fn block_off(e: Ref) -> usize {
    (e >> 3) as usize
}

/// The top-level entry's reference for the block at word offset `o`.
#[inline(always)]
pub(crate) const fn block_ref(o: usize) -> Ref {
    (o as u32) << 3 | NODE
}

#[inline(always)]
pub(crate) const fn is_leaf(r: Ref) -> bool {
    r & NODE == 0
}

#[inline(always)]
const fn off(r: Ref) -> usize {
    (r >> 3) as usize
}

/// A subtree being built: collapsed to a single leaf value when it holds no more-specific
/// route. `fresh` nodes were written during this change (never published).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Built {
    Leaf(u32),
    Node { r: Ref, fresh: bool },
}

impl Built {
    /// As a top-level entry.
    pub(crate) fn entry(self) -> Ref {
        match self {
            Built::Leaf(v) => leaf_ref(v),
            Built::Node { r, .. } => r,
        }
    }
}

/// Bits 0..=v set.
#[inline(always)]
fn upto(v: usize) -> u64 {
    u64::MAX >> (63 - v)
}

/// Words of a node body.
fn body_words(inner: bool, vector: u64, leafvec: u64, lw: u32) -> usize {
    let bytes =
        8 + if inner {
            8 + 4 * vector.count_ones() as usize
        } else {
            0
        } + ((leafvec.count_ones() as usize) << lw);
    bytes.div_ceil(8)
}

/// A node's contents, read back by the writer (fixed arrays: the update path allocates
/// nothing per node).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoded {
    /// `(k, frag, miss)` of a skip header.
    pub(crate) skip: Option<(u32, u64, u32)>,
    vector: u64,
    leafvec: u64,
    children: [Ref; 64],
    leaves: [u32; 64],
    /// Total words, header included.
    pub(crate) words: usize,
}

/// Read node `r` from `s`.
pub(crate) fn decode(s: &Snapshot, r: Ref) -> Decoded {
    debug_assert!(!is_leaf(r));
    let mut o = off(r);
    let w = |i: usize| {
        assert!(i < s.words.len(), "reference out of the arena");
        // SAFETY: checked just above.
        unsafe { s.word(i) }
    };
    let skip = (r & SKIP != 0).then(|| {
        let (frag, h) = (w(o), w(o + 1));
        o += 2;
        ((h >> 32) as u32 / 6, frag, h as u32)
    });
    let inner = r & INNER != 0;
    let leafvec = w(o);
    let vector = if inner { w(o + 1) } else { 0 };
    let byte_at = |b: usize| (w(o + b / 8) >> ((b % 8) * 8)) as u32;
    let mut b = if inner { 16 } else { 8 };
    let mut children = [0; 64];
    for c in &mut children[..vector.count_ones() as usize] {
        *c = byte_at(b);
        b += 4;
    }
    let lw = s.lw;
    let mask = leaf_mask(lw);
    let mut leaves = [0; 64];
    for l in &mut leaves[..leafvec.count_ones() as usize] {
        *l = byte_at(b) & mask;
        b += 1 << lw;
    }
    Decoded {
        words: 2 * usize::from(skip.is_some()) + body_words(inner, vector, leafvec, lw),
        skip,
        vector,
        leafvec,
        children,
        leaves,
    }
}

impl Decoded {
    /// Child references, in slot order.
    pub(crate) fn children(&self) -> &[Ref] {
        &self.children[..self.vector.count_ones() as usize]
    }

    /// Leaf values, one per run.
    pub(crate) fn leaves(&self) -> &[u32] {
        &self.leaves[..self.leafvec.count_ones() as usize]
    }

    /// The body's 64 slots.
    pub(crate) fn slots(&self) -> [Built; 64] {
        let (mut ci, mut li) = (0, 0);
        core::array::from_fn(|v| {
            if self.vector >> v & 1 != 0 {
                ci += 1;
                Built::Node {
                    r: self.children[ci - 1],
                    fresh: false,
                }
            } else {
                li += (self.leafvec >> v & 1) as usize;
                Built::Leaf(self.leaves[li - 1])
            }
        })
    }

    /// The same body as a new blob under a skip header of the last `k` of this node's folded
    /// strides (none if `k == 0`); children are shared with this node.
    pub(crate) fn write_tail(&self, k: u32, a: &mut Arena) -> Built {
        let (kk, frag, miss) = self.skip.expect("a path-compressed node");
        debug_assert!(k < kk);
        let skip = (k > 0).then(|| (k, frag & ((1u64 << (6 * k)) - 1), miss));
        let r = write(
            a,
            skip,
            self.vector,
            self.leafvec,
            self.children(),
            self.leaves(),
        );
        Built::Node { r, fresh: true }
    }
}

#[inline(always)]
pub(crate) const fn leaf_mask(lw: u32) -> u32 {
    u32::MAX >> (32 - (8 << lw))
}

/// Write a node body (with an optional skip header) to the arena.
fn write(
    a: &mut Arena,
    skip: Option<(u32, u64, u32)>,
    vector: u64,
    leafvec: u64,
    children: &[Ref],
    leaves: &[u32],
) -> Ref {
    let lw = a.cur().lw;
    let inner = vector != 0;
    let mut buf = [0u64; MAX_BLOB];
    let mut n = 0;
    if let Some((k, frag, miss)) = skip {
        buf[0] = frag;
        buf[1] = u64::from(miss) | u64::from(6 * k) << 32;
        n = 2;
    }
    let body = n;
    buf[n] = leafvec;
    n += 1;
    if inner {
        buf[n] = vector;
        n += 1;
    }
    let mut b = (n - body) * 8;
    let mut put = |b: usize, v: u64| buf[body + b / 8] |= v << ((b % 8) * 8);
    for &c in children {
        put(b, u64::from(c));
        b += 4;
    }
    for &l in leaves {
        debug_assert!(l <= leaf_mask(lw), "leaf {l} wider than the table's leaves");
        put(b, u64::from(l));
        b += 1 << lw;
    }
    let words = body + b.div_ceil(8);
    let o = a.alloc(&buf[..words]);
    (o as u32) << 3 | NODE | if inner { INNER } else { 0 } | if skip.is_some() { SKIP } else { 0 }
}

/// Make a node from its 64 slots, or collapse to a leaf if there is no child and one value.
/// With `compress`, a node with one child and one leaf value is folded into its child.
pub(crate) fn make_node(slots: &[Built; 64], a: &mut Arena, compress: bool) -> Built {
    make_node_in(slots, None, a, compress).expect("no skip header asked for")
}

/// The node [`make_node`] makes from `slots` under a skip header `skip` (`(k, frag, miss)`)
/// that the strides above fold into it: `None` (nothing written) if the slots collapse to a
/// leaf or fold into their only child, when the header cannot simply go on top.
fn make_plain(
    slots: &[Built; 64],
    skip: Option<(u32, u64, u32)>,
    a: &mut Arena,
    compress: bool,
) -> Option<Built> {
    make_node_in(slots, skip, a, compress)
}

/// [`make_node`], or with `skip` [`make_plain`].
fn make_node_in(
    slots: &[Built; 64],
    skip: Option<(u32, u64, u32)>,
    a: &mut Arena,
    compress: bool,
) -> Option<Built> {
    let (mut vector, mut leafvec) = (0u64, 0u64);
    let mut children = [0; 64];
    let mut leaves = [0; 64];
    let (mut nc, mut nl) = (0, 0);
    let mut last = None;
    for (v, s) in slots.iter().enumerate() {
        match *s {
            Built::Node { r, .. } => {
                vector |= 1 << v;
                children[nc] = r;
                nc += 1;
            }
            Built::Leaf(x) => {
                if last != Some(x) {
                    leafvec |= 1 << v;
                    leaves[nl] = x;
                    nl += 1;
                    last = Some(x);
                }
            }
        }
    }
    if vector == 0 && nl == 1 {
        return skip.is_none().then_some(Built::Leaf(leaves[0]));
    }
    if compress && nc == 1 && nl == 1 {
        let v = vector.trailing_zeros() as usize;
        let Built::Node { r: c, fresh } = slots[v] else {
            unreachable!("vector bit set for a node slot")
        };
        let miss = leaves[0];
        let d = decode(a.cur(), c);
        let (k, frag) = match d.skip {
            None => (1, v as u64),
            Some((kc, fc, mc)) if mc == miss && kc < KMAX => (kc + 1, (v as u64) << (6 * kc) | fc),
            Some(_) => (0, 0),
        };
        if k > 0 {
            if skip.is_some() {
                return None;
            }
            let r = write(
                a,
                Some((k, frag, miss)),
                d.vector,
                d.leafvec,
                d.children(),
                d.leaves(),
            );
            if fresh {
                a.free_now(off(c), d.words);
            } else {
                a.retire(off(c), d.words);
            }
            return Some(Built::Node { r, fresh: true });
        }
    }
    let r = write(a, skip, vector, leafvec, &children[..nc], &leaves[..nl]);
    Some(Built::Node { r, fresh: true })
}

/// Build the subtree for the node at `depth` whose range starts at `base`.
///
/// `routes` are `(key, len, id)` of routes inside the range, sorted by `(key, len)`; those
/// with `len ≤ depth` are ignored (they are in `inherited`, the best route with `len ≤ depth`
/// covering the range). Sorted order means a covering route comes before the routes it
/// covers, so painting slots in order leaves the longest match in each slot, and the routes
/// of one slot are contiguous.
pub(crate) fn build<K: Key>(
    base: K,
    depth: u8,
    inherited: u32,
    routes: &[(K, u8, u32)],
    a: &mut Arena,
    compress: bool,
) -> Built {
    if routes.is_empty() {
        return Built::Leaf(inherited);
    }
    let mut slots = [Built::Leaf(inherited); 64];
    build_range(
        base, depth, 0, 64, inherited, routes, &mut slots, a, compress,
    );
    make_node(&slots, a, compress)
}

/// Fill slots `first..first + n` of the node at `depth` (range starting at `base`): paint
/// `inherited` and the routes with `len ≤ depth + 6` of `routes` (sorted, inside those slots'
/// range; shorter than `depth + 1` ignored), and build a child for each slot that has longer
/// ones.
#[expect(
    clippy::too_many_arguments,
    reason = "one recursive builder, its state spelled out"
)]
pub(crate) fn build_range<K: Key>(
    base: K,
    depth: u8,
    first: usize,
    n: usize,
    inherited: u32,
    routes: &[(K, u8, u32)],
    slots: &mut [Built; 64],
    a: &mut Arena,
    compress: bool,
) {
    let end = u32::from(depth) + 6;
    let mut vals = [inherited; 64];
    for &(k, len, id) in routes {
        let len = u32::from(len);
        if len > u32::from(depth) && len <= end {
            let f = k.bits6(depth);
            vals[f..f + (1usize << (end - len))].fill(id);
        }
    }
    for v in first..first + n {
        slots[v] = Built::Leaf(vals[v]);
    }
    for (v, deeper) in deeper_by_slot(routes, depth, end) {
        slots[v] = build(
            base.with_bits6(depth, v),
            depth + 6,
            vals[v],
            deeper,
            a,
            compress,
        );
    }
}

/// The routes longer than `end` (a node's last bit), grouped by the 6-bit slot at `depth`
/// they fall in: `(slot, its routes)`. `routes` is sorted, so each group is contiguous.
fn deeper_by_slot<K: Key>(
    routes: &[(K, u8, u32)],
    depth: u8,
    end: u32,
) -> impl Iterator<Item = (usize, &[(K, u8, u32)])> {
    let mut i = 0;
    core::iter::from_fn(move || {
        while i < routes.len() && u32::from(routes[i].1) <= end {
            i += 1;
        }
        if i == routes.len() {
            return None;
        }
        let v = routes[i].0.bits6(depth);
        let mut j = i + 1;
        while j < routes.len() && routes[j].0.bits6(depth) == v {
            j += 1;
        }
        let group = &routes[i..j];
        i = j;
        Some((v, group))
    })
}

/// A subtree as it stands, for [`repaint`]: what a slot held before its inherited value
/// changed.
#[derive(Clone, Copy)]
pub(crate) enum Old<'a> {
    /// A leaf: the slot has no deeper route, or its deeper routes collapsed to one value.
    Leaf(u32),
    /// A node, retired by the repaint unless it is kept whole.
    Node(Ref),
    /// The rest of a folded chain: the strides of `d`'s skip header from the `i`-th (≥ 1) on,
    /// then its body. Its blob is the caller's to retire (its children are kept or retired
    /// here).
    Chain(&'a Decoded, u32),
}

impl Old<'_> {
    /// The same subtree, unchanged, as a slot of a node being made.
    fn keep(self, a: &mut Arena) -> Built {
        match self {
            Old::Leaf(x) => Built::Leaf(x),
            Old::Node(r) => Built::Node { r, fresh: false },
            Old::Chain(d, i) => {
                let k = d.skip.map_or(0, |s| s.0);
                d.write_tail(k - i, a)
            }
        }
    }
}

/// The subtree [`build`] makes for `base`, `depth`, `inherited` and `routes` when `old` is the
/// one it made for the same routes under another inherited value: the nodes the inherited
/// value reaches are made anew, every subtree below a slot a route of its node paints (which
/// inherits that route, not `inherited`) is kept as it is. Why: a change to a route whose
/// last bit falls inside a node's stride (an IPv6 /27–/29 is one in the node below the
/// block) changes the inherited value of the slots it covers; rebuilding their subtrees from
/// every route under them cost up to 12 µs, while most of those subtrees hang under longer
/// routes (the /32s under a /29) and do not change at all. Deterministic like `build`, so
/// the result is the one a fresh build makes (the property tests compare them). Old blobs not
/// kept are retired.
pub(crate) fn repaint<K: Key>(
    base: K,
    depth: u8,
    inherited: u32,
    routes: &[(K, u8, u32)],
    old: Old<'_>,
    a: &mut Arena,
    compress: bool,
) -> Built {
    match old {
        // A collapsed subtree (nothing to keep), or none.
        Old::Leaf(_) => build(base, depth, inherited, routes, a, compress),
        Old::Node(r) => {
            let d = decode(a.cur(), r);
            let b = repaint_level(base, depth, inherited, routes, &d, 0, a, compress);
            a.retire(off(r), d.words);
            b
        }
        Old::Chain(d, i) => repaint_level(base, depth, inherited, routes, d, i, a, compress),
    }
}

/// [`repaint`] of the level `i` of node `d` (its `i`-th folded stride, or its body if `i` is
/// the number of strides folded).
#[expect(
    clippy::too_many_arguments,
    reason = "one recursive builder, its state spelled out"
)]
fn repaint_level<K: Key>(
    base: K,
    depth: u8,
    inherited: u32,
    routes: &[(K, u8, u32)],
    d: &Decoded,
    i: u32,
    a: &mut Arena,
    compress: bool,
) -> Built {
    let (k, frag, miss) = d.skip.unwrap_or((0, 0, 0));
    if i < k {
        // The rest of a folded chain. When no route ends in its strides and every route goes
        // through them (the usual case: a /48 alone under a /32), the strides stay folded
        // whatever the body becomes, as long as it stays a plain node: write the body once
        // under the chain's header with the new value, rather than making a node per stride
        // and folding each into the next (a blob written, read back and freed per stride).
        let levels = k - i;
        let bits = 6 * levels;
        let cfrag = frag & (u64::MAX >> (64 - bits));
        let body_depth = u32::from(depth) + bits;
        let through = |key: K| (key.to_u128_bits() << depth >> (128 - bits)) as u64 == cfrag;
        let pure = routes.iter().all(|r| u32::from(r.1) > body_depth)
            && routes.first().is_none_or(|r| through(r.0))
            && routes.last().is_none_or(|r| through(r.0));
        if pure && !routes.is_empty() {
            let mut body_base = base;
            for l in 0..levels {
                let f = (cfrag >> (6 * (levels - 1 - l)) & 63) as usize;
                body_base = body_base.with_bits6(depth + 6 * l as u8, f);
            }
            let body_depth = body_depth as u8;
            let slots = repaint_body(body_base, body_depth, inherited, routes, d, a, compress);
            if let Some(b) = make_plain(&slots, Some((levels, cfrag, inherited)), a, compress) {
                return b;
            }
            // The body collapses or folds into its child: make the strides one by one, as a
            // build does.
            let mut b = make_node(&slots, a, compress);
            for l in (0..levels).rev() {
                let f = (cfrag >> (6 * (levels - 1 - l)) & 63) as usize;
                let mut up = [Built::Leaf(inherited); 64];
                up[f] = b;
                b = make_node(&up, a, compress);
            }
            return b;
        }
    }
    if i == k {
        let slots = repaint_body(base, depth, inherited, routes, d, a, compress);
        return make_node(&slots, a, compress);
    }
    // A folded stride: every slot a leaf of the chain's value (deeper routes collapsed into
    // it, if any) but the one the chain goes on through.
    let f = (frag >> (6 * (k - 1 - i)) & 63) as usize;
    let old = |v: usize| {
        if v == f {
            Old::Chain(d, i + 1)
        } else {
            Old::Leaf(miss)
        }
    };
    let mut slots = [Built::Leaf(inherited); 64];
    repaint_range(
        base, depth, 0, 64, inherited, routes, &mut slots, old, a, compress,
    );
    make_node(&slots, a, compress)
}

/// The slots of node `d`'s body (at `depth`) repainted for `inherited` ([`repaint`]).
fn repaint_body<K: Key>(
    base: K,
    depth: u8,
    inherited: u32,
    routes: &[(K, u8, u32)],
    d: &Decoded,
    a: &mut Arena,
    compress: bool,
) -> [Built; 64] {
    let body = d.slots();
    let old = |v: usize| match body[v] {
        Built::Leaf(x) => Old::Leaf(x),
        Built::Node { r, .. } => Old::Node(r),
    };
    let mut slots = [Built::Leaf(inherited); 64];
    repaint_range(
        base, depth, 0, 64, inherited, routes, &mut slots, old, a, compress,
    );
    slots
}

/// [`build_range`] for slots whose inherited value changed while the routes under them did
/// not: `old(v)` is slot `v`'s subtree as it stands. A slot with deeper routes that a route
/// of this node paints keeps its subtree; one that only inherits is repainted ([`repaint`]).
#[expect(
    clippy::too_many_arguments,
    reason = "one recursive builder, its state spelled out"
)]
pub(crate) fn repaint_range<'d, K: Key>(
    base: K,
    depth: u8,
    first: usize,
    n: usize,
    inherited: u32,
    routes: &[(K, u8, u32)],
    slots: &mut [Built; 64],
    old: impl Fn(usize) -> Old<'d>,
    a: &mut Arena,
    compress: bool,
) {
    let end = u32::from(depth) + 6;
    let mut vals = [inherited; 64];
    // Slots a route of this node paints (their subtrees inherit it, not `inherited`).
    let mut painted = 0u64;
    for &(k, len, id) in routes {
        let len = u32::from(len);
        if len > u32::from(depth) && len <= end {
            let f = k.bits6(depth);
            let c = 1usize << (end - len);
            vals[f..f + c].fill(id);
            painted |= (u64::MAX >> (64 - c)) << f;
        }
    }
    for v in first..first + n {
        debug_assert!(
            matches!(old(v), Old::Leaf(_))
                || routes
                    .iter()
                    .any(|r| r.1 as u32 > end && r.0.bits6(depth) == v),
            "slot {v} has a subtree but no deeper route"
        );
        slots[v] = Built::Leaf(vals[v]);
    }
    for (v, deeper) in deeper_by_slot(routes, depth, end) {
        slots[v] = if painted >> v & 1 != 0 {
            old(v).keep(a)
        } else {
            repaint(
                base.with_bits6(depth, v),
                depth + 6,
                vals[v],
                deeper,
                old(v),
                a,
                compress,
            )
        };
    }
}

/// Build the block of the top-level slot at `base` (`depth` its bits) from the slot's routes
/// longer than `depth` (sorted, as for [`build`]): the sub-covers painted from the routes no
/// longer than `depth + 6`, a subtree from `depth + 6` for each sub-slot with longer ones
/// (built without the routes outside the trie: "no route" is 0). Returns its top-level entry
/// reference ([`block_ref`]).
pub(crate) fn build_block<K: Key>(
    base: K,
    depth: u8,
    routes: &[(K, u8, u32)],
    a: &mut Arena,
    compress: bool,
) -> Ref {
    let end = depth + 6;
    let mut sub = [0u32; BLOCK];
    for &(k, len, id) in routes {
        if len <= end {
            let f = k.bits6(depth);
            sub[f..f + (1usize << (end - len))].fill(id);
        }
    }
    let mut words: [u64; BLOCK] = core::array::from_fn(|v| top_entry(leaf_ref(0), sub[v]));
    // Routes deeper than the block, by sub-slot.
    for (v, deeper) in deeper_by_slot(routes, depth, u32::from(end)) {
        let b = build(base.with_bits6(depth, v), end, 0, deeper, a, compress);
        words[v] = top_entry(b.entry(), sub[v]);
    }
    block_ref(a.alloc(&words))
}

/// The sub-slots of the block a top-level entry `e` names: `(subtree reference, sub-cover)`.
pub(crate) fn block_entries(s: &Snapshot, e: Ref) -> [(Ref, u32); BLOCK] {
    let o = block_off(e);
    assert!(o + BLOCK <= s.words.len(), "block out of the arena");
    core::array::from_fn(|v| {
        // SAFETY: checked just above.
        let w = unsafe { s.word(o + v) };
        (w as Ref, (w >> 32) as u32)
    })
}

/// Retire the block a top-level entry `e` names, with its subtrees.
pub(crate) fn retire_block(a: &mut Arena, e: Ref) {
    for (r, _) in block_entries(a.cur(), e) {
        if !is_leaf(r) {
            retire_deep(a, r);
        }
    }
    a.retire(block_off(e), BLOCK);
}

/// Retire node `r` and its whole subtree.
pub(crate) fn retire_deep(a: &mut Arena, r: Ref) {
    let d = decode(a.cur(), r);
    for &c in d.children() {
        retire_deep(a, c);
    }
    a.retire(off(r), d.words);
}

/// Retire node `r` alone (of `words` words).
pub(crate) fn retire_one(a: &mut Arena, r: Ref, words: usize) {
    a.retire(off(r), words);
}

/// Blobs, words and leaf bytes of the subtree at `r`.
pub(crate) fn stats(s: &Snapshot, r: Ref) -> (usize, usize, usize) {
    let d = decode(s, r);
    let mut acc = (1, d.words, d.leaves().len() << s.lw);
    for &c in d.children() {
        let (n, w, l) = stats(s, c);
        acc = (acc.0 + n, acc.1 + w, acc.2 + l);
    }
    acc
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

/// Address of node `r`'s first word, for [`prefetch`].
#[inline(always)]
pub(crate) fn node_addr(s: &Snapshot, r: Ref) -> *const u64 {
    s.words.as_ptr().wrapping_add(off(r)) as *const u64
}

/// The leaf or child in slot `v` of the node body at word `o` (reference `r`):
/// `(is_child, value)`.
///
/// # Safety
/// `o` must be the body of node `r`, published in `s` and reached under an epoch guard held
/// since `s` was loaded (so the blob is complete and in bounds).
#[inline(always)]
unsafe fn body_step(s: &Snapshot, r: Ref, o: usize, v: usize) -> (u32, u32) {
    let inner = u64::from((r >> 1) & 1);
    // SAFETY: every node body has at least two words (a leaf-only one has two leaves or more).
    let (leafvec, w1) = unsafe { (s.word(o), s.word(o + 1)) };
    let vector = w1 & 0u64.wrapping_sub(inner);
    let m = upto(v);
    let is_child = (vector >> v) as u32 & 1;
    let ci = (vector & m).count_ones().wrapping_sub(1);
    let li = (leafvec & m).count_ones().wrapping_sub(1);
    let leaf0 = 8 + inner as u32 * (8 + 4 * vector.count_ones());
    // Selects, not branches: whether a slot is a child is as good as random per address, and
    // a mispredicted branch would throw away the loads of the other addresses in flight.
    let child = is_child != 0;
    // Both offsets are computed; the one not selected may have wrapped (index "-1").
    let byte = select_unpredictable(
        child,
        ci.wrapping_mul(4).wrapping_add(16),
        (li << s.lw).wrapping_add(leaf0),
    );
    // SAFETY: a set vector bit has a child reference at `ci`; a leaf slot has a run start at
    // or before it, so `li` indexes the leaves; either way `byte` is inside the blob.
    let w = unsafe { s.word(o + (byte / 8) as usize) };
    let mask = select_unpredictable(child, u32::MAX, leaf_mask(s.lw));
    (is_child, (w >> ((byte % 8) * 8)) as u32 & mask)
}

/// One branch-free step of a lookup at node `r` (never a leaf reference) without path
/// compression, `depth` the bits consumed before it: `(is_child, value)`, where `value` is the
/// child reference if `is_child == 1`, else the leaf (next-hop id).
///
/// # Safety
/// `r` must be a node of `s` reached from its top level under an epoch guard held since `s`
/// was loaded.
#[inline(always)]
pub(crate) unsafe fn step<K: Key>(s: &Snapshot, r: Ref, key: K, depth: u32) -> (u32, u32) {
    // SAFETY: forwarded.
    unsafe { body_step(s, r, off(r), key.bits6(depth.min(255) as u8)) }
}

/// One branch-free step with path compression. `win` holds the next 64 key bits (most
/// significant first, zeros past the end of the key): `(is_child, value, bits consumed)`.
///
/// # Safety
/// As for [`step`].
#[inline(always)]
pub(crate) unsafe fn step_win(s: &Snapshot, r: Ref, win: u64) -> (u32, u32, u32) {
    let mut o = off(r);
    let skip = (r >> 2) & 1;
    // SAFETY: every blob has at least two words.
    let (frag, h) = unsafe { (s.word(o), s.word(o + 1)) };
    let sh = ((h >> 32) as u32) & 0u32.wrapping_sub(skip);
    // The `sh` key bits the skip header folds (0 when there is none), then the node's stride.
    let got = (win >> 1) >> (63 - sh);
    let hit = (skip == 0) | (got == frag);
    o += 2 * skip as usize;
    let v = ((win << sh) >> 58) as usize;
    // SAFETY: `o` is the body of `r` (after its header, if any); forwarded.
    let (is_child, val) = unsafe { body_step(s, r, o, v) };
    (
        is_child & u32::from(hit),
        select_unpredictable(hit, val, h as u32),
        sh + 6,
    )
}

/// The 64 key bits after the first `depth`, most significant first.
#[inline(always)]
pub(crate) fn window<K: Key>(key: K, depth: u32) -> u64 {
    (key.to_u128_bits().checked_shl(depth).unwrap_or(0) >> 64) as u64
}

/// Walk from top-level entry `r` (after `depth` bits) to the leaf for `key`.
///
/// # Safety
/// As for [`step`].
#[inline(always)]
pub(crate) unsafe fn walk<K: Key, const COMPRESSED: bool>(
    s: &Snapshot,
    mut r: Ref,
    mut depth: u32,
    key: K,
) -> u32 {
    if is_leaf(r) {
        return r >> 1;
    }
    loop {
        // SAFETY: forwarded; child references of a published node are published nodes.
        let (is_child, val, used) = unsafe {
            if COMPRESSED {
                step_win(s, r, window(key, depth))
            } else {
                let (c, v) = step(s, r, key, depth);
                (c, v, 6)
            }
        };
        if is_child == 0 {
            return val;
        }
        r = val;
        depth += used;
    }
}
