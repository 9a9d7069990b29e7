//! [`Table`]: one family's FIB of one virtual router — the route store the control plane edits
//! and the compiled [`poptrie`](crate::poptrie) the workers read.
//!
//! Writers (the control plane) are serialised by a mutex that readers never touch. Each change
//! updates the route store (`rib`, a `BTreeMap` ordered so a prefix's more-specifics are one
//! range scan away and its covering route a predecessor search), then rebuilds only what the
//! change can affect:
//!
//! * the default route (`/0`) is not in the trie at all: its id is one atomic in the
//!   published snapshot (`Snapshot::default`). Adding, replacing or removing it is one store.
//! * the other routes no longer than `top_bits` are not in the trie either: each top-level
//!   entry holds the slot's trie reference and its *cover*, the id of the longest such route
//!   covering the slot. A change to one is a store into each top-level entry whose cover it
//!   changes (slots under a more specific short route keep theirs: the writer keeps each
//!   slot's cover length), whatever lies below them: an IPv4 /8 is 1,024 stores (3 µs; it
//!   was 0.1–0.2 ms of subtree rebuilds). IPv6 entries are 64 bits, reference and cover
//!   ([`poptrie::top_entry`]). IPv4 entries stay 32 bits, the cover in the top byte and the
//!   reference in the other 24 (*packed*, [`Snapshot::packed`]): that needs every id but the
//!   default's below 256 (1-byte leaves, as a full table with a few dozen peers has) and the
//!   nodes the entries point to in the first 16 MiB of the arena (a full table uses 5–7).
//!   A table that has neither is built *unpacked*: 32-bit references, covers expanded into
//!   the leaves like any route, a short prefix rebuilding the subtree of each slot whose cover
//!   it changes (as before). The switch is a full rebuild, when an id outgrows a byte (as the
//!   leaves' widening always was) or a new subtree root does not fit 24 bits; a rebuild tries
//!   packed again. `Table::WIDE_TOP` says why the families' entries differ.
//! * IPv6: each top-level slot holding a longer route points to a *block* of 64 entries, one
//!   per value of the next six bits (a *sub-slot*): the sub-slot's subtree reference and its
//!   *sub-cover*, the longest route of /21–/26 (`top_bits` + 1 to + 6) covering it. Those
//!   routes are out of the trie too, and a change to one is a store per sub-slot whose
//!   sub-cover changes (a /22 is 16); a slot's first longer route makes its block, its last
//!   one's removal drops it, as a fresh build has it. Why: lookups skip the trie's first
//!   level (a block entry is one load where that level was a node step: 3.2 → 2.2 steps on
//!   the routed mix), and /21–/26 changes no longer rebuild the subtrees under them (p99 up
//!   to 0.17 ms before). `Table::BLOCKS` has the details.
//! * a longer prefix lies inside one top-level slot (IPv6: one sub-slot). The writer descends to the level whose
//!   6-bit stride holds the prefix's last bit (a path-compressed node's folded strides count
//!   as one level each) and changes only the slots of that level the prefix covers — or, if
//!   the descent meets a leaf first, builds the one slot the prefix lies in; every other
//!   subtree is shared. In the covered slots the routes under the prefix are unchanged, only
//!   the value those slots inherit is: the change *repaints* it where it reaches (a slot's
//!   leaves, and the nodes below it that inherit it, made anew), and keeps as they are the
//!   subtrees under the longer routes there (`poptrie::repaint`). Why: an IPv6 /27–/29 ends
//!   in the node below the block and covers 8–32 of its slots; rebuilding their subtrees from
//!   every route under them made its changes the slowest of the longer prefixes (p99 9–12 µs,
//!   the others ≤ 5), while most of those routes hang under /30–/32s whose subtrees do not
//!   change. The path above is copied (a chain the prefix leaves is split, and chains are
//!   folded again as a fresh build would), and the slot's new root is published with one
//!   store.
//!
//! Every lookup path (single, batch — IPv4, IPv6 scalar and AVX-512 — and so
//! [`Table::lookup_set`]) turns a trie result of 0 ("no route") into the sub-slot's sub-cover
//! (IPv6), that into the slot's cover, and that into the default, by selects (an unpacked IPv4 entry has cover 0). Why: leaves are fully expanded (a lookup is a walk
//! with no backtracking), so a route in the trie is copied into every leaf under it that no
//! longer route covers, and a change to a short one rebuilt every subtree under it: the
//! default 53–68 ms on the full tables, IPv6 2400::/12 12–17 ms, an IPv6 /20 0.5–0.7 ms
//! (`examples/update_outliers.rs`). Outside the trie they cost one store per slot (under
//! 2 µs), for the price of a select per lookup and, for the covers, a wider top-level entry
//! (IPv6) or a byte of it (IPv4). The default's id, and IPv6's covers, need no leaf width
//! either: they may be wider than the leaves.
//!
//! New nodes go into the table's [`arena`](crate::arena); replaced ones are retired there and
//! reused after an epoch grace period. A full-table load (and the rare rebuild when a next-hop
//! id outgrows the leaf width) builds every subtree in one pass from the sorted routes into a
//! fresh arena and publishes it with one pointer swap. The update path reuses its buffers
//! (routes, the levels of the descent, the blobs on it) and decodes nodes into fixed arrays, so
//! a change allocates nothing per node.
//!
//! Lookups are written once and compiled twice, for baseline x86-64 and with popcnt/BMI,
//! chosen at run time (IPv4's batch lookup a third time, with AVX2 as well: its passes over
//! the whole vector vectorise 8 wide, +15 %); the batch lookup has one variant per family
//! shape (fixed depth per level for IPv4, per-address progress for IPv6's path-compressed
//! nodes), and IPv6 steps eight addresses at a time with AVX-512 where the CPU has it
//! ([`simd`](crate::simd)).
//!
//! What was measured and rejected (`vrbench fib`, same machine): a separate prefetch pass per
//! level for IPv6 (the child is now prefetched the moment its reference is computed: +3–10 %);
//! branches instead of selects in the step (no better on uniform destinations, and worse when
//! the child/leaf pattern is random); a 22-bit IPv6 top level (16 MiB, no faster than 20 bits).
//! For covers in the batch lookup: carrying the cover with each walking address and writing
//! final results in the step (no pass at the end) measured slower than a select pass at the
//! end (IPv4, when it had covers: 218–226 against 234–238 M/s with every line cached,
//! `lookup_rate HOT=1`); in IPv6 both selects in that final pass rather than one in the
//! top-level pass measured +3 %.
//!
//! Atomicity with the default and the covers outside the trie: every change alters exactly
//! one of the trie, the covers, IPv6's sub-covers or the default id (the trie depends on none
//! of them, each kind of cover on no other), and a slot's cover and trie reference are one
//! word (64 bits in IPv6, 32 in a packed IPv4 table), as are a sub-slot's sub-cover and
//! subtree reference (the writer, the only one, stores the whole word each time), so a
//! lookup sees each change entirely or not at all as far as its slot goes: a /8 replaced
//! while a /24 under it is added shows each address the /8's old or new next hop, or the
//! /24. A reload ([`Table::load`]), a widening and a switch between packed and unpacked
//! build trie, covers and default into a new snapshot and switch them together with the
//! snapshot pointer (a change that finds its new root too big for a packed entry stores
//! nothing in the old snapshot before it rebuilds). What a lookup can combine is two *different* changes that both complete
//! while it runs, since it reads its top-level entry and the default at different moments:
//! e.g. for an address whose last covering route is removed, the trie after that removal with
//! the default from before an earlier default change. Each half was published; the pair as
//! such was never the table's state. A lookup never sees "no route" for an address one route
//! covered throughout.
//!
//! Rejected for IPv4's covers (`docs/perf.md`): 64-bit entries (2 MiB top level: −16 % IPv4
//! batch lookups) and a separate cover array read only where the trie has no route (−32 %:
//! that is 86 % of uniformly random destinations on a full table, so it is a second load and
//! a pass for nearly every address). The packed byte costs about 6 % of IPv4 batch lookups
//! (a store and a mask per address in the top-level pass, three selects in the last) and 3 %
//! of single ones.
//!
//! Every change bumps [`Table::generation`], which flow caches compare to drop stale entries.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_epoch::{Atomic, Guard, Shared};

use crate::FibError;
use crate::arena::{Arena, BLOCK, PACKED_REF, Snapshot};
use crate::family::{Family, Key};
use crate::nexthop::{NextHopSet, NhAlloc, NhSlots};
use crate::poptrie::{self, Built, Ref};
use crate::prefix::Prefix;
#[cfg(target_arch = "x86_64")]
use crate::simd;

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

/// How a table is laid out; the defaults suit a full Internet table.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Bits resolved by the top-level array (8..=24): memory `4 << top_bits` bytes. The family's
    /// default ([`Family::TOP_BITS`]) is right for big tables; a VR with a few hundred routes can
    /// use 12 and save megabytes.
    pub top_bits: u8,
}

/// Memory a table uses, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Top-level array, and IPv6's blocks (512 bytes per top-level slot with routes longer
    /// than it).
    pub top: usize,
    /// Trie nodes (including the roots below the top level): their bitmaps, child references
    /// and path-compression headers.
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
    /// With blocks: the routes of `rib` that are sub-covers (`top_bits` < length ≤
    /// `top_bits + 6`), so that a change to one scans only them, not every route under it (a
    /// /22 may have hundreds).
    mid: BTreeMap<Prefix<F>, u32>,
    /// Per top-level slot: the best route with 1 ≤ length ≤ top_bits covering it (0 = none),
    /// the high half of its top-level entry.
    inh: Vec<u32>,
    /// Per top-level slot: the length of that route (0 = none).
    inh_len: Vec<u8>,
    /// Largest trie reference a packed top-level entry takes: [`PACKED_MASK`], lower in tests
    /// (to reach the fallback to unpacked entries without a 16 MiB arena).
    packed_limit: Ref,
    nh: NhAlloc,
    arena: Arena,
    /// Reused buffers of the update path (no allocation per change once warm): routes under
    /// the part being rebuilt, the levels of the descent, the blobs on it.
    scratch: Vec<(F::Key, u8, u32)>,
    path: Vec<Level>,
    blobs: Vec<(Ref, usize)>,
}

/// One level of an update's descent: the 64 slots of a node (a path-compressed node's folded
/// strides are a level each, with [`REST`] in the slot the chain goes on through), its depth
/// and the slot the changed prefix goes through.
struct Level {
    depth: u8,
    v: usize,
    slots: [Built; 64],
}

/// Where a subtree's root reference is stored: top-level slot `t` (IPv4), or word `word` of
/// the arena, an entry of slot `t`'s block (IPv6).
#[derive(Debug, Clone, Copy)]
struct Root {
    t: usize,
    word: Option<usize>,
}

/// Bits a block resolves (its sub-slots: [`BLOCK`] of them).
const BLOCK_BITS: u8 = 6;
const _: () = assert!(BLOCK == 1 << BLOCK_BITS);

/// Placeholder for the rest of a folded chain in a [`Level`] (never a real reference: node
/// references are odd).
const REST: Ref = u32::MAX - 1;

/// The FIB of one address family of one virtual router.
///
/// Lookups (`&self`, an epoch [`Guard`] from [`crate::pin`]) never block and never see a torn
/// update; changes (`&self` too) are serialised among themselves.
///
/// Leaves are as narrow as the next-hop ids in the table allow: 1 byte while every id is below
/// 256 (a full table reaching a few dozen peers), 2 bytes below 65,536, else 4. An insert that
/// brings the first id too wide for the current leaves rebuilds the whole structure once, at
/// the wider width (like [`Table::load`]); a reload picks the narrowest width again.
pub struct Table<F: Family> {
    snap: Atomic<Snapshot>,
    top_bits: u8,
    nh: NhSlots,
    generation: AtomicU64,
    writer: Mutex<Writer<F>>,
}

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

/// Per-address state of a path-compressed batch between levels, as arrays (so that the
/// AVX-512 step loads and stores eight lanes at once).
#[derive(Debug)]
pub(crate) struct Lanes {
    /// Node to visit.
    pub(crate) refs: [Ref; BATCH],
    /// Rest of the key, most significant word (the next bits to consume on top).
    pub(crate) hi: [u64; BATCH],
    /// Rest of the key, least significant word.
    pub(crate) lo: [u64; BATCH],
    /// Position of the address in the batch.
    pub(crate) idx: [u32; BATCH],
}

/// Does the CPU have hardware popcount and BMI? The lookups are compiled twice, for the
/// baseline x86-64 the workspace targets (where `count_ones` is a dozen instructions) and with
/// those features, and pick at run time (a cached flag).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn fast_bits() -> bool {
    std::is_x86_feature_detected!("popcnt")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
}

/// The batch lookup's level step: scalar (any CPU; IPv4 always).
const STEP_SCALAR: u8 = 0;
/// AVX-512 with gathers and compress-stores to memory (Intel; see [`simd`](crate::simd)).
#[cfg_attr(not(target_arch = "x86_64"), expect(dead_code, reason = "x86-64 only"))]
const STEP_AVX512_GATHER: u8 = 1;
/// AVX-512 with plain loads and compression in registers (every other vendor: AMD Zen 4
/// microcodes compress-stores to memory and has slow gathers; see `simd::gathers_fast`).
#[cfg_attr(not(target_arch = "x86_64"), expect(dead_code, reason = "x86-64 only"))]
const STEP_AVX512_LOADS: u8 = 2;

/// Which implementation a batch lookup uses ([`Table::lookup_batch_with`], for benchmarks).
/// IPv4 always takes the scalar step (compiled for the CPU's popcnt/BMI/AVX2); `Avx512*` apply
/// to IPv6.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// What [`Table::lookup_batch`] picks for this CPU.
    Auto,
    /// The scalar step.
    Scalar,
    /// AVX-512 with gathers and compress-stores to memory (what `Auto` picks on Intel).
    Avx512Gather,
    /// AVX-512 with plain loads and compression in registers (what `Auto` picks on other
    /// vendors).
    Avx512Loads,
}

impl Kernel {
    /// Can this CPU run it?
    pub fn available(self) -> bool {
        match self {
            Kernel::Auto | Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Gather | Kernel::Avx512Loads => simd::available(),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx512Gather | Kernel::Avx512Loads => false,
        }
    }
}

/// A trie result, with "no route" (0) standing for the default route `default` (itself 0 when
/// there is none).
#[inline(always)]
fn or_default(r: u32, default: u32) -> u32 {
    if r == 0 { default } else { r }
}

/// The trie-reference bits of a packed top-level entry.
const PACKED_MASK: u32 = (1 << PACKED_REF) - 1;

/// Narrowest leaf width (log2 bytes) that holds `max_id`.
fn leaf_width(max_id: u32) -> u32 {
    match max_id {
        0..=0xff => 0,
        0x100..=0xffff => 1,
        _ => 2,
    }
}

impl<F: Family> Table<F> {
    /// Fold single-child chains into skip headers? (IPv6 only: see [`poptrie`](crate::poptrie).)
    const COMPRESS: bool = F::Key::BITS > 32;

    /// Top-level entries of 64 bits, trie reference and cover (IPv6)? Else 32 bits (IPv4),
    /// with the cover in the top byte while the table is *packed* ([`Snapshot::packed`]),
    /// expanded into the leaves when not. Why IPv4 differs: 64-bit entries measured no slower
    /// for IPv6 (0.98 of 32-bit entries, within noise) but cost IPv4's batch lookups 16 % (its
    /// top level is a quarter of the structure it walks and doubled to 2 MiB); a separate
    /// cover array read only for trie results of 0 cost it 32 % (that is 86 % of uniform
    /// destinations: see `docs/perf.md`). A byte of the 32-bit entry costs neither memory nor
    /// a load.
    const WIDE_TOP: bool = F::Key::BITS > 32;

    /// Does each top-level slot holding longer routes point to a *block* (IPv6)? A block is
    /// [`BLOCK`] words in the arena, one per value of the six bits after the top level (a
    /// *sub-slot*): the subtree reference for the sub-slot, and its *sub-cover*, the id of the
    /// longest route with `top_bits` < length ≤ `top_bits + 6` covering it. So the trie starts
    /// six bits deeper, and those routes are out of it like the covers: a change to one is a
    /// store per sub-slot whose sub-cover it changes. Why: on the routed IPv6 mix a lookup took
    /// 3.2 node steps, the first always at the slot's root node (bits 20–26); a block entry is
    /// one load instead of a step (its popcounts and header), and IPv6 /21–/26 no longer
    /// rebuild the subtrees under them (they did: 0.05–0.2 ms). A top-level entry of 0 names
    /// the arena's empty block (`Arena::new`), so a lookup reads a block entry unconditionally.
    const BLOCKS: bool = F::Key::BITS > 32;

    /// Are the routes no longer than the top level out of the trie (the slots' covers, in the
    /// top-level entries)? Always with 64-bit entries; with 32-bit ones while packed.
    #[inline(always)]
    fn covers_out(s: &Snapshot) -> bool {
        Self::WIDE_TOP || s.packed
    }

    /// Depth at which the trie's subtrees start: after the top level, and the blocks.
    fn trie_depth(&self) -> u8 {
        self.top_bits + if Self::BLOCKS { BLOCK_BITS } else { 0 }
    }

    /// Shortest prefix length the trie holds: the covers (when out), the sub-covers and the
    /// default are outside it.
    fn trie_min(&self, s: &Snapshot) -> u8 {
        if Self::covers_out(s) {
            self.trie_depth() + 1
        } else {
            1
        }
    }

    /// Shortest prefix length whose id must fit the leaf width: the trie's, and with 32-bit
    /// entries the covers too (in the leaves, or in a byte: packed tables have 1-byte leaves).
    fn narrow_min(&self) -> u8 {
        if Self::WIDE_TOP {
            self.trie_depth() + 1
        } else {
            1
        }
    }

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
        let mut arena = Arena::new(b, 4096, 0, Self::WIDE_TOP, !Self::WIDE_TOP);
        arena.settle();
        let snap = Atomic::null();
        arena.finish(&snap, &crossbeam_epoch::pin());
        Table {
            snap,
            top_bits: b,
            nh: NhSlots::new(),
            generation: AtomicU64::new(0),
            writer: Mutex::new(Writer {
                rib: BTreeMap::new(),
                mid: BTreeMap::new(),
                inh: vec![0; 1 << b],
                inh_len: vec![0; 1 << b],
                packed_limit: PACKED_MASK,
                nh: NhAlloc::new(),
                arena,
                scratch: Vec::new(),
                path: Vec::new(),
                blobs: Vec::new(),
            }),
        }
    }

    /// Start loading what every batch lookup reads first — the table's current snapshot
    /// and its header — without waiting for it: for a caller about to look up in a table
    /// it has not touched for a while (one of many VRs'), so that these misses overlap its
    /// other work instead of coming one after another at the lookup.
    #[inline]
    pub fn prefetch(&self) {
        // SAFETY: the snapshot is only prefetched (a hint that never faults), never read,
        // so it needs no epoch guard to keep it alive.
        let s = self
            .snap
            .load(Ordering::Relaxed, unsafe { crossbeam_epoch::unprotected() })
            .as_raw();
        poptrie::prefetch(s);
        poptrie::prefetch(s.cast::<u8>().wrapping_add(64));
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

    /// The published snapshot, valid while `guard` is held.
    #[inline(always)]
    fn snap<'g>(&self, guard: &'g Guard) -> &'g Snapshot {
        // SAFETY: `snap` is set in `with_config` and only ever swapped for another live
        // snapshot; a replaced one is destroyed through the epoch, after `guard` is dropped.
        unsafe { self.snap.load(Ordering::Acquire, guard).deref() }
    }

    /// Top-level entry for `key`: the trie reference and the slot's cover (0 without covers).
    #[inline(always)]
    fn top(&self, s: &Snapshot, key: F::Key) -> (Ref, u32) {
        let t = key.top(self.top_bits);
        if Self::WIDE_TOP {
            debug_assert!(t < s.top.len());
            // SAFETY: `top(top_bits)` is below `1 << top_bits`, the top level's length.
            let e = unsafe { s.top.get_unchecked(t) }.load(Ordering::Acquire);
            (e as Ref, (e >> 32) as u32)
        } else {
            debug_assert!(t < s.top32.len());
            // SAFETY: as above.
            Self::split32(
                s,
                unsafe { s.top32.get_unchecked(t) }.load(Ordering::Acquire),
            )
        }
    }

    /// Reader: sub-slot `v` of the block that top-level entry `e` names (0: the empty block):
    /// the subtree reference and the sub-cover.
    #[inline(always)]
    fn block_entry(s: &Snapshot, e: Ref, v: usize) -> (Ref, u32) {
        debug_assert!(v < BLOCK && poptrie::block_off(e) + BLOCK <= s.words.len());
        // SAFETY: a top-level entry of a block table names a published block of `BLOCK`
        // words (or the empty one at offset 0), and `v < BLOCK`.
        let w = unsafe { s.block_word(poptrie::block_off(e) + v) };
        (w as Ref, (w >> 32) as u32)
    }

    /// A 32-bit top-level entry as trie reference and cover (0 unless packed).
    #[inline(always)]
    fn split32(s: &Snapshot, e: u32) -> (Ref, u32) {
        (e & s.rmask, (e & !s.rmask) >> PACKED_REF)
    }

    /// Writer: the trie reference of slot `t`.
    fn entry(s: &Snapshot, t: usize) -> Ref {
        if Self::WIDE_TOP {
            s.top[t].load(Ordering::Relaxed) as Ref
        } else {
            Self::split32(s, s.top32[t].load(Ordering::Relaxed)).0
        }
    }

    /// Writer: set slot `t` to trie reference `r` and cover `cover` (ignored when the covers
    /// are in the leaves); returns the reference it replaced, or `None` — and stores nothing —
    /// if `r` is over `limit` in a packed entry (a node past the first 16 MiB of the arena:
    /// the caller rebuilds). `limit` is [`PACKED_MASK`] but in tests.
    fn set_entry(s: &Snapshot, t: usize, r: Ref, cover: u32, limit: Ref) -> Option<Ref> {
        debug_assert!(limit <= PACKED_MASK);
        if Self::WIDE_TOP {
            let e = poptrie::top_entry(r, cover);
            Some(s.top[t].swap(e, Ordering::AcqRel) as Ref)
        } else if s.packed {
            if r > limit {
                return None;
            }
            debug_assert!(cover <= 0xff, "cover {cover} in a packed entry");
            let old = s.top32[t].swap(r | cover << PACKED_REF, Ordering::AcqRel);
            Some(old & PACKED_MASK)
        } else {
            Some(s.top32[t].swap(r, Ordering::AcqRel))
        }
    }

    /// Longest-prefix match for one address.
    #[inline]
    pub fn lookup(&self, addr: F::Addr, guard: &Guard) -> Option<NhId> {
        let s = self.snap(guard);
        #[cfg(target_arch = "x86_64")]
        if fast_bits() {
            // SAFETY: the CPU has the features `lookup_x86` is compiled for (checked just now).
            return unsafe { self.lookup_x86(s, addr) };
        }
        self.lookup_in(s, addr)
    }

    /// [`Table::lookup_in`] compiled with hardware popcount and BMI.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn lookup_x86(&self, s: &Snapshot, addr: F::Addr) -> Option<NhId> {
        self.lookup_in(s, addr)
    }

    #[inline(always)]
    fn lookup_in(&self, s: &Snapshot, addr: F::Addr) -> Option<NhId> {
        let key = F::key(addr);
        let (mut e, mut cover) = self.top(s, key);
        if Self::BLOCKS {
            let (r, sub) = Self::block_entry(s, e, key.bits6(self.top_bits));
            e = r;
            cover = or_default(sub, cover);
        }
        let d = u32::from(self.trie_depth());
        // SAFETY: `e` was just loaded from the top level of `s`, under the caller's guard.
        let r = unsafe {
            if Self::COMPRESS {
                poptrie::walk::<_, true>(s, e, d, key)
            } else {
                poptrie::walk::<_, false>(s, e, d, key)
            }
        };
        // Where the trie has no route: the slot's covering short route, else the default
        // route, by selects (a branch mispredicts on destinations that mix routed and
        // unrouted). The default is loaded after the walk: loading it before measured 20 %
        // slower single IPv6 lookups in `vrbench fib`.
        let r = or_default(r, cover);
        NhId::from_leaf(or_default(r, s.default.load(Ordering::Acquire)))
    }

    /// Longest-prefix match for a vector of addresses: `out[i]` is the result for `addrs[i]`.
    /// Designed for vectors of up to [`BATCH`]; longer slices are done in chunks.
    ///
    /// Lookups advance level by level over the whole vector rather than one address at a time,
    /// so the memory accesses of different addresses overlap instead of waiting on each other.
    ///
    /// Panics if the slices differ in length.
    pub fn lookup_batch(&self, addrs: &[F::Addr], out: &mut [Option<NhId>], guard: &Guard) {
        assert_eq!(
            addrs.len(),
            out.len(),
            "lookup_batch: addrs and out differ in length"
        );
        self.batch_with(Kernel::Auto, addrs, out, guard);
    }

    /// [`Table::lookup_batch`] with a chosen implementation, for benchmarks comparing them in
    /// one binary (`examples/lookup_rate.rs`). Panics if this CPU cannot run `kernel`.
    #[doc(hidden)]
    pub fn lookup_batch_with(
        &self,
        kernel: Kernel,
        addrs: &[F::Addr],
        out: &mut [Option<NhId>],
        guard: &Guard,
    ) {
        assert_eq!(addrs.len(), out.len(), "lookup_batch_with: lengths differ");
        assert!(
            kernel.available(),
            "{kernel:?} needs CPU features this one lacks"
        );
        self.batch_with(kernel, addrs, out, guard);
    }

    #[inline(always)]
    fn batch_with(
        &self,
        kernel: Kernel,
        addrs: &[F::Addr],
        out: &mut [Option<NhId>],
        guard: &Guard,
    ) {
        let s = self.snap(guard);
        #[cfg(target_arch = "x86_64")]
        {
            let kernel = match kernel {
                Kernel::Auto if Self::COMPRESS && simd::available() => {
                    if simd::gathers_fast() {
                        Kernel::Avx512Gather
                    } else {
                        Kernel::Avx512Loads
                    }
                }
                k => k,
            };
            if Self::COMPRESS && kernel == Kernel::Avx512Gather {
                // SAFETY: the CPU has the features `batch_avx512` is compiled for (checked
                // above, or by `lookup_batch_with`).
                unsafe { self.batch_avx512::<STEP_AVX512_GATHER>(s, addrs, out) };
                return;
            }
            if Self::COMPRESS && kernel == Kernel::Avx512Loads {
                // SAFETY: as above.
                unsafe { self.batch_avx512::<STEP_AVX512_LOADS>(s, addrs, out) };
                return;
            }
            if fast_bits() {
                if !Self::COMPRESS && std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has the features `batch_avx2` is compiled for (checked).
                    unsafe { self.batch_avx2(s, addrs, out) };
                    return;
                }
                // SAFETY: the CPU has the features `batch_x86` is compiled for (checked).
                unsafe { self.batch_x86(s, addrs, out) };
                return;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = kernel;
        self.batch_in::<STEP_SCALAR>(s, addrs, out);
    }

    /// [`Table::batch_in`] compiled with hardware popcount, BMI and AVX2, for IPv4: the passes
    /// over the whole vector (keys in, results out) vectorise 8 wide. Measured +15 % on
    /// IPv4 uniform batch lookups (`examples/lookup_rate.rs`, paired runs; `docs/perf.md`).
    /// IPv6 takes the AVX-512 step where the CPU has it, else `batch_x86` as before.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2,avx2")]
    fn batch_avx2(&self, s: &Snapshot, addrs: &[F::Addr], out: &mut [Option<NhId>]) {
        self.batch_in::<STEP_SCALAR>(s, addrs, out)
    }

    /// [`Table::batch_in`] compiled with hardware popcount and BMI.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn batch_x86(&self, s: &Snapshot, addrs: &[F::Addr], out: &mut [Option<NhId>]) {
        self.batch_in::<STEP_SCALAR>(s, addrs, out)
    }

    /// [`Table::batch_in`] with the AVX-512 level step ([`simd`](crate::simd)); `STEP` is
    /// [`STEP_AVX512_GATHER`] or [`STEP_AVX512_LOADS`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512vpopcntdq,popcnt,bmi1,bmi2")]
    fn batch_avx512<const STEP: u8>(
        &self,
        s: &Snapshot,
        addrs: &[F::Addr],
        out: &mut [Option<NhId>],
    ) {
        self.batch_in::<STEP>(s, addrs, out)
    }

    /// `STEP`: which level step (`STEP_*`; the AVX-512 ones only where the caller checked the
    /// CPU has it).
    #[inline(always)]
    fn batch_in<const STEP: u8>(&self, s: &Snapshot, addrs: &[F::Addr], out: &mut [Option<NhId>]) {
        // One load for the whole batch: every address sees the same default route.
        let default = s.default.load(Ordering::Acquire);
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            if Self::COMPRESS {
                self.batch_chunk_compressed::<STEP>(s, a, o, default);
            } else {
                self.batch_chunk(s, a, o, default);
            }
        }
    }

    /// One vector without path compression (IPv4): every address still walking is at the same
    /// depth. `default`: the default route's id, for addresses the trie has no route for.
    #[inline(always)]
    fn batch_chunk(&self, s: &Snapshot, addrs: &[F::Addr], out: &mut [Option<NhId>], default: u32) {
        // Only 32-bit top-level entries come here (constant: no code).
        assert!(
            !Self::WIDE_TOP,
            "batch_chunk is for 32-bit top-level entries"
        );
        let n = addrs.len();
        let mut keys = [F::key(addrs[0]); BATCH];
        let mut refs = [0 as Ref; BATCH];
        let mut idx = [0u8; BATCH];
        // Per address: its top-level entry as loaded (a leaf, or a node reference; in a
        // packed table with the slot's cover on top), resolved in the last pass.
        let mut ent = [0u32; BATCH];
        let rmask = s.rmask;
        let mut active = 0usize;
        for i in 0..n {
            keys[i] = F::key(addrs[i]);
        }
        for i in 0..n {
            let t = keys[i].top(self.top_bits);
            debug_assert!(t < s.top32.len());
            // SAFETY: `top(top_bits)` is below `1 << top_bits`, the top level's length.
            let e = unsafe { s.top32.get_unchecked(t) }.load(Ordering::Acquire);
            ent[i] = e;
            let r = e & rmask;
            // Start loading the node as soon as its reference is known (a leaf entry makes a
            // harmless prefetch of some address).
            poptrie::prefetch(poptrie::node_addr(s, r));
            refs[active] = r;
            idx[active] = i as u8;
            active += usize::from(!poptrie::is_leaf(r));
        }
        let mut d = u32::from(self.top_bits);
        let mut first = true;
        while active > 0 {
            // Two passes per level, neither with a data-dependent branch, so that the loads of
            // all addresses in the vector are in flight together: start loading the nodes
            // (the first level's were started in the top-level pass); step through them
            // (children go on to the next level, leaves are written out).
            if !first {
                for &r in &refs[..active] {
                    poptrie::prefetch(poptrie::node_addr(s, r));
                }
            }
            first = false;
            let mut next = 0;
            for a in 0..active {
                let i = idx[a] as usize;
                // SAFETY: `refs[a]` is a node reached from the top level of `s` under the
                // caller's guard.
                let (is_child, val) = unsafe { poptrie::step(s, refs[a], keys[i], d) };
                // A child reference written here is overwritten when the address finishes.
                out[i] = NhId::from_leaf(val);
                // `next <= a`: this never overwrites an entry not yet read.
                refs[next] = val;
                idx[next] = i as u8;
                next += is_child as usize;
            }
            active = next;
            d += 6;
        }
        // The result: the walk's for a node entry, else the entry's leaf; "no route" from the
        // trie is the cover, else the default. Selects, in a pass that vectorises (the top
        // pass above stores the entry once instead of a leaf result and a cover).
        for (o, &e) in out[..n].iter_mut().zip(&ent) {
            let walked = o.map_or(0, NhId::get);
            let r = if poptrie::is_leaf(e) {
                (e & rmask) >> 1
            } else {
                walked
            };
            let c = (e & !rmask) >> PACKED_REF;
            *o = NhId::from_leaf(or_default(or_default(r, c), default));
        }
    }

    /// One vector with path compression (IPv6): addresses advance by different amounts, so
    /// each keeps the rest of its key as two words, shifted so that the next bits to consume
    /// are the most significant. `default`: as for [`Table::batch_chunk`].
    #[inline(always)]
    fn batch_chunk_compressed<const STEP: u8>(
        &self,
        s: &Snapshot,
        addrs: &[F::Addr],
        out: &mut [Option<NhId>],
        default: u32,
    ) {
        let n = addrs.len();
        let mut res = [0u32; BATCH];
        // As in `batch_chunk`: the slot's covering short route, else the default.
        let mut cover = [0u32; BATCH];
        let mut st = Lanes {
            refs: [0; BATCH],
            hi: [0; BATCH],
            lo: [0; BATCH],
            idx: [0; BATCH],
        };
        // Only block tables come here (constant: no code).
        assert!(
            Self::BLOCKS,
            "batch_chunk_compressed is for tables with blocks"
        );
        let tb = u32::from(self.top_bits);
        let d = u32::from(self.trie_depth());
        let mut active = 0usize;
        for (i, &a) in addrs.iter().enumerate() {
            let k = F::key(a).to_u128_bits();
            let (hi, lo) = ((k >> 64) as u64, k as u64);
            let (e, c) = self.top(s, F::Key::from_u128_bits(k));
            // The block entry for the six bits after the top level (`tb <= 24`).
            let o = poptrie::block_off(e) + ((hi >> (58 - tb)) & 63) as usize;
            debug_assert!(o < s.words.len());
            // SAFETY: a word of a published block (or of the empty one): see `block_entry`.
            let w = unsafe { s.block_word(o) };
            let r = w as Ref;
            cover[i] = or_default((w >> 32) as u32, c);
            poptrie::prefetch(poptrie::node_addr(s, r));
            res[i] = r >> 1;
            // The rest of the key after the block (`8 < d <= 30`).
            st.refs[active] = r;
            st.hi[active] = hi << d | lo >> (64 - d);
            st.lo[active] = lo << d;
            st.idx[active] = i as u32;
            active += usize::from(!poptrie::is_leaf(r));
        }
        while active > 0 {
            #[cfg(target_arch = "x86_64")]
            if STEP != STEP_SCALAR {
                // SAFETY: `STEP` is only an AVX-512 one in `batch_avx512`, called after
                // checking the CPU; the lanes hold nodes reached from the top level of `s`
                // under the caller's guard, and positions below `BATCH`.
                active = unsafe {
                    if STEP == STEP_AVX512_GATHER {
                        simd::level::<true>(s, &mut st, &mut res, active)
                    } else {
                        simd::level::<false>(s, &mut st, &mut res, active)
                    }
                };
                continue;
            }
            // One branch-free pass per level. Each node was prefetched as soon as its reference
            // was known (by the pass before), which measured better here than a separate
            // prefetch pass: the load starts earlier and the pass is saved.
            let mut next = 0;
            for a in 0..active {
                let i = st.idx[a];
                let (h, l) = (st.hi[a], st.lo[a]);
                // SAFETY: `refs[a]` is a node reached from the top level of `s` under the
                // caller's guard.
                let (is_child, val, used) = unsafe { poptrie::step_win(s, st.refs[a], h) };
                res[i as usize % BATCH] = val;
                // For a leaf `val` is an id: a harmless prefetch near the arena's start.
                poptrie::prefetch(poptrie::node_addr(s, val));
                // `next <= a`: this never overwrites an entry not yet read. `used` is 6..=60.
                st.refs[next] = val;
                st.hi[next] = (h << used) | (l >> (64 - used));
                st.lo[next] = l << used;
                st.idx[next] = i;
                next += is_child as usize;
            }
            active = next;
        }
        // Both selects here, in a pass that vectorises, rather than one in the top-level pass.
        for ((o, &r), &c) in out.iter_mut().zip(&res[..n]).zip(&cover) {
            *o = NhId::from_leaf(or_default(or_default(r, c), default));
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
        if self.is_mid(prefix) {
            w.mid.insert(prefix, id);
        }
        let old_set = old.map(|o| self.nh.get(o, &guard).expect("live id").clone());
        if old == Some(id) {
            w.nh.release(&self.nh, id, &guard);
            return Ok(old_set);
        }
        if prefix.len() >= self.narrow_min() && id > poptrie::leaf_mask(w.arena.cur().lw) {
            // The first id too wide for this table's leaves: rebuild at the wider width. (The
            // id of the default route is not in leaves, so it never needs one; nor, in 64-bit
            // top-level entries, do the covers.)
            self.rebuild(&mut w, &guard);
        } else if self.apply(&mut w, prefix) {
            w.arena.finish(&self.snap, &guard);
        } else {
            self.rebuild(&mut w, &guard);
        }
        if let Some(o) = old {
            w.nh.release(&self.nh, o, &guard);
        }
        self.generation.fetch_add(1, Ordering::Release);
        drop(w);
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
        w.mid.remove(prefix);
        let set = self.nh.get(id, &guard).expect("live id").clone();
        if self.apply(&mut w, *prefix) {
            w.arena.finish(&self.snap, &guard);
        } else {
            self.rebuild(&mut w, &guard);
        }
        w.nh.release(&self.nh, id, &guard);
        self.generation.fetch_add(1, Ordering::Release);
        drop(w);
        guard.flush();
        Ok(set)
    }

    /// Replace the whole table with `routes` in one pass (a full-table load or a control-plane
    /// resync). Later duplicates of a prefix win. Readers switch from the old table to the new
    /// one atomically (one pointer swap).
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
        w.mid = w
            .rib
            .iter()
            .filter(|(p, _)| self.is_mid(**p))
            .map(|(p, &id)| (*p, id))
            .collect();
        self.rebuild(&mut w, &guard);
        for id in old_rib.into_values() {
            w.nh.release(&self.nh, id, &guard);
        }
        self.generation.fetch_add(1, Ordering::Release);
        drop(w);
        guard.flush();
        Ok(())
    }

    /// Build the whole structure from `w.rib` into a new arena and publish it.
    fn rebuild(&self, w: &mut Writer<F>, guard: &Guard) {
        let s = self.top_bits;
        // The default route stays out of the trie (and so out of the leaf width), and so do
        // the other routes no longer than the top level: they are the slots' covers.
        let default = w.rib.first_key_value().filter(|(p, _)| p.len() == 0);
        let default = default.map_or(0, |(_, &id)| id);
        let narrow_min = self.narrow_min();
        let max_id = w.rib.iter().filter(|(p, _)| p.len() >= narrow_min);
        let max_id = max_id.map(|(_, &id)| id).max().unwrap_or(0);
        // Covers: paint the short routes in order (covering before covered).
        let mut inh = vec![0u32; 1 << s];
        let mut inh_len = vec![0u8; 1 << s];
        let mut deep: Vec<(F::Key, u8, u32)> = Vec::with_capacity(w.rib.len());
        for (p, &id) in w.rib.iter().filter(|(p, _)| p.len() > 0) {
            if p.len() <= s {
                let first = p.key().top(s);
                let n = 1 << (s - p.len());
                inh[first..first + n].fill(id);
                inh_len[first..first + n].fill(p.len());
            } else {
                deep.push((p.key(), p.len(), id));
            }
        }
        let lw = leaf_width(max_id);
        // 32-bit entries are packed (covers in their top byte) when the ids fit a byte; a
        // build whose nodes do not all fit the packed references is done again unpacked.
        let mut packed = !Self::WIDE_TOP && lw == 0;
        let mut arena = loop {
            let mut arena = Arena::new(s, deep.len() * 3, lw, Self::WIDE_TOP, packed);
            let out = Self::covers_out(arena.cur());
            let mut i = 0;
            let mut fits = true;
            for (t, &cover) in inh.iter().enumerate() {
                let start = i;
                while i < deep.len() && deep[i].0.top(s) == t {
                    i += 1;
                }
                let base = F::Key::from_top(t, s);
                let routes = &deep[start..i];
                let entry = if !Self::BLOCKS {
                    let inherited = if out { 0 } else { cover };
                    poptrie::build(base, s, inherited, routes, &mut arena, Self::COMPRESS).entry()
                } else if routes.is_empty() {
                    // No route longer than the top level: the empty block.
                    poptrie::leaf_ref(0)
                } else {
                    poptrie::build_block(base, s, routes, &mut arena, Self::COMPRESS)
                };
                if Self::set_entry(arena.cur(), t, entry, cover, w.packed_limit).is_none() {
                    fits = false;
                    break;
                }
            }
            if fits {
                break arena;
            }
            packed = false;
        };
        // Headroom for updates: an eighth of the build, at least a few blobs.
        let (used, _, _) = arena.used();
        arena.fit(used / 8 + 4096);
        // Before publishing: the new trie and its default route switch in together.
        arena.cur().default.store(default, Ordering::Relaxed);
        arena.finish(&self.snap, guard);
        w.arena = arena;
        w.inh = inh;
        w.inh_len = inh_len;
    }

    /// Remove every route.
    pub fn clear(&self) {
        self.load(core::iter::empty())
            .expect("an empty load cannot fail");
    }

    /// Store `built` as the subtree at `root`, retiring what it replaced. `false` if it does
    /// not fit a packed entry (nothing stored: the caller rebuilds).
    #[must_use]
    fn publish(w: &mut Writer<F>, root: Root, built: Built) -> bool {
        let Some(old) = Self::set_root(w, root, built.entry()) else {
            return false;
        };
        if !poptrie::is_leaf(old) {
            poptrie::retire_deep(&mut w.arena, old);
        }
        true
    }

    /// Where the subtree holding `key`'s deeper routes is rooted: its top-level slot, or (with
    /// blocks) its sub-slot of the slot's block, which must exist.
    fn root_of(&self, w: &Writer<F>, key: F::Key) -> Root {
        let t = key.top(self.top_bits);
        let word = Self::BLOCKS.then(|| {
            let e = Self::entry(w.arena.cur(), t);
            debug_assert!(!poptrie::is_leaf(e), "slot {t} has no block");
            poptrie::block_off(e) + key.bits6(self.top_bits)
        });
        Root { t, word }
    }

    /// Writer: the subtree reference at `root`.
    fn root_ref(w: &Writer<F>, root: Root) -> Ref {
        match root.word {
            Some(i) => w.arena.cur().words[i].load(Ordering::Relaxed) as Ref,
            None => Self::entry(w.arena.cur(), root.t),
        }
    }

    /// Writer: set the subtree reference at `root` to `r`, keeping its cover; the reference it
    /// replaced, or `None` (nothing stored) if `r` does not fit a packed top-level entry.
    fn set_root(w: &Writer<F>, root: Root, r: Ref) -> Option<Ref> {
        match root.word {
            Some(i) => {
                // A block entry: the sub-cover stays, one whole-word store (see the module
                // docs on atomicity).
                let word = &w.arena.cur().words[i];
                let old = word.load(Ordering::Relaxed);
                word.store(old & !0xffff_ffff | u64::from(r), Ordering::Release);
                Some(old as Ref)
            }
            None => Self::set_entry(w.arena.cur(), root.t, r, w.inh[root.t], w.packed_limit),
        }
    }

    /// Is `p` a sub-cover (with blocks: `top_bits` < length ≤ `top_bits + 6`)?
    fn is_mid(&self, p: Prefix<F>) -> bool {
        Self::BLOCKS && p.len() > self.top_bits && p.len() <= self.top_bits + BLOCK_BITS
    }

    /// Does top-level slot `t` hold a route longer than the top level?
    fn has_deep(&self, w: &Writer<F>, t: usize) -> bool {
        let s = self.top_bits;
        let base = F::Key::from_top(t, s);
        // Routes no longer than `s` with a key inside the slot can only be at `base` itself,
        // sorted before `(base, s + 1)`.
        w.rib
            .range(Prefix::from_key(base, s + 1)..)
            .next()
            .is_some_and(|(p, _)| p.key() <= base.last(s))
    }

    /// The best route with `minlen ≤ length ≤ maxlen` covering `key`: `(id, length)`, `(0, 0)`
    /// if none (`minlen ≥ 1`).
    ///
    /// By predecessor search rather than one probe per length (a /48 has up to 28 lengths to
    /// probe): every route covering `key` with length ≤ `m` sorts at or before `key`'s own
    /// /`m`, so the last route there, `q`, is the longest such cover if it covers `key`; if it
    /// does not, any shorter cover also covers `q`'s key, so it is no longer than the bits `q`
    /// and `key` share, and the search repeats from there. Each round is one tree descent and
    /// cuts `m` by at least one; a route's predecessor usually covers it or shares most bits.
    fn best_cover(w: &Writer<F>, key: F::Key, minlen: u8, maxlen: u8) -> (u32, u8) {
        Self::best_cover_in(&w.rib, key, minlen, maxlen)
    }

    /// [`Table::best_cover`] among the routes of `rib`.
    fn best_cover_in(
        rib: &BTreeMap<Prefix<F>, u32>,
        key: F::Key,
        minlen: u8,
        maxlen: u8,
    ) -> (u32, u8) {
        let mut m = maxlen;
        while m >= minlen {
            let bound = Prefix::from_key(key.masked(m), m);
            let Some((q, &id)) = rib.range(..=bound).next_back() else {
                break;
            };
            let shared = (q.key().to_u128_bits() ^ key.to_u128_bits()).leading_zeros();
            let shared = shared.min(u32::from(F::Key::BITS)) as u8;
            if q.len() <= shared {
                // `q` covers `key` (and `q ≤ bound` makes it no longer than `m`).
                return if q.len() >= minlen {
                    (id, q.len())
                } else {
                    (0, 0)
                };
            }
            // Not a cover: then `shared < m` (see above), so this terminates.
            debug_assert!(shared < m);
            m = shared;
        }
        (0, 0)
    }

    /// Routes strictly inside the /`depth` at `base` with length > `depth`, sorted, into `out`.
    fn routes_under(w: &Writer<F>, base: F::Key, depth: u8, out: &mut Vec<(F::Key, u8, u32)>) {
        out.clear();
        let last = base.last(depth);
        out.extend(
            w.rib
                .range(Prefix::from_key(base, depth)..)
                .take_while(|(p, _)| p.key() <= last)
                .filter(|(p, _)| p.len() > depth)
                .map(|(p, &id)| (p.key(), p.len(), id)),
        );
    }

    /// Rebuild whatever `prefix` (just added, replaced or removed in `w.rib`) affects.
    /// `false` if a new subtree root does not fit a packed top-level entry: then nothing was
    /// published, and the caller rebuilds the whole table (`Table::rebuild`).
    #[must_use]
    fn apply(&self, w: &mut Writer<F>, prefix: Prefix<F>) -> bool {
        let s = self.top_bits;
        if prefix.len() == 0 {
            // The default route: one store, whatever the table holds. Readers load it with
            // `Acquire`, after the set it names was published (`NhAlloc::acquire`).
            let id = w.rib.get(&prefix).copied().unwrap_or(0);
            w.arena.cur().default.store(id, Ordering::Release);
            true
        } else if prefix.len() <= s {
            self.apply_short(w, prefix)
        } else if !Self::BLOCKS {
            self.apply_long(w, prefix)
        } else {
            let t = prefix.key().top(s);
            let e = Self::entry(w.arena.cur(), t);
            if poptrie::is_leaf(e) {
                // No block yet: the slot had no route longer than the top level, so it has
                // just this one; build the block from it and publish it.
                let base = F::Key::from_top(t, s);
                let mut routes = core::mem::take(&mut w.scratch);
                Self::routes_under(w, base, s, &mut routes);
                let b = poptrie::build_block(base, s, &routes, &mut w.arena, Self::COMPRESS);
                w.scratch = routes;
                Self::set_entry(w.arena.cur(), t, b, w.inh[t], PACKED_MASK);
                return true;
            }
            let fits = if prefix.len() <= s + BLOCK_BITS {
                self.apply_mid(w, prefix);
                true
            } else {
                self.apply_long(w, prefix)
            };
            if !self.has_deep(w, t) {
                // Its last longer route is gone: back to no block, as a build makes it.
                let old = Self::entry(w.arena.cur(), t);
                Self::set_entry(
                    w.arena.cur(),
                    t,
                    poptrie::leaf_ref(0),
                    w.inh[t],
                    PACKED_MASK,
                );
                poptrie::retire_block(&mut w.arena, old);
            }
            fits
        }
    }

    /// With blocks, a route a little longer than the top level (`top_bits` < length ≤
    /// `top_bits + 6`): not in the trie, but the sub-cover of the sub-slots of its slot's
    /// block it covers, minus those a more specific such route covers. One store per sub-slot
    /// whose sub-cover changes; no subtree is touched. The block exists.
    fn apply_mid(&self, w: &mut Writer<F>, prefix: Prefix<F>) {
        let s = self.top_bits;
        let end = s + BLOCK_BITS;
        let (key, len) = (prefix.key(), prefix.len());
        let b = poptrie::block_off(Self::entry(w.arena.cur(), key.top(s)));
        // The sub-covers under the prefix, painted as a build would: the best such route
        // covering it (itself, if present), then the ones inside it, covering before covered.
        let first = key.bits6(s);
        let n = 1usize << (end - len);
        let mut vals = [Self::best_cover_in(&w.mid, key, s + 1, len).0; BLOCK];
        let last = key.last(len);
        let under = w.mid.range(Prefix::from_key(key, len)..);
        for (q, &id) in under.take_while(|(q, _)| q.key() <= last) {
            if q.len() > len {
                let f = q.key().bits6(s);
                vals[f..f + (1usize << (end - q.len()))].fill(id);
            }
        }
        let words = &w.arena.cur().words;
        for (v, &val) in vals.iter().enumerate().skip(first).take(n) {
            let word = &words[b + v];
            let old = word.load(Ordering::Relaxed);
            let new = old & 0xffff_ffff | u64::from(val) << 32;
            if new != old {
                // The subtree reference stays: one whole-word store.
                word.store(new, Ordering::Release);
            }
        }
    }

    /// A route no longer than the top level: not in the trie, but the cover of the top-level
    /// slots it covers, minus those a more specific short route covers. One store per slot
    /// whose cover changes; no subtree is touched (unless the covers are in the leaves: an
    /// unpacked IPv4 table).
    fn apply_short(&self, w: &mut Writer<F>, prefix: Prefix<F>) -> bool {
        let s = self.top_bits;
        let (key, len) = (prefix.key(), prefix.len());
        let first = key.top(s);
        let count = 1usize << (s - len);
        let (value, vlen) = match w.rib.get(&prefix) {
            Some(&id) => (id, len),
            None => Self::best_cover(w, key, 1, len - 1),
        };
        for t in first..first + count {
            // A slot whose cover is longer is under a more specific short route and keeps
            // it. (After a removal every other slot here had the removed route as its cover.)
            if w.inh_len[t] > len {
                continue;
            }
            w.inh_len[t] = vlen;
            if w.inh[t] == value {
                continue;
            }
            w.inh[t] = value;
            if Self::covers_out(w.arena.cur()) {
                // The same reference (it fits), the new cover: one store.
                let r = Self::entry(w.arena.cur(), t);
                Self::set_entry(w.arena.cur(), t, r, value, PACKED_MASK);
            } else {
                // Expanded into the slot's leaves: rebuild its subtree (a leaf if no longer
                // route lies in it).
                let base = F::Key::from_top(t, s);
                let mut routes = core::mem::take(&mut w.scratch);
                Self::routes_under(w, base, s, &mut routes);
                let built = poptrie::build(base, s, value, &routes, &mut w.arena, Self::COMPRESS);
                w.scratch = routes;
                if !Self::publish(w, Root { t, word: None }, built) {
                    return false;
                }
            }
        }
        true
    }

    #[must_use]
    fn apply_long(&self, w: &mut Writer<F>, prefix: Prefix<F>) -> bool {
        // The depth the subtree starts at (after the top level, and the block if any).
        let s = self.trie_depth();
        let (key, len) = (prefix.key(), prefix.len());
        let root = self.root_of(w, key);
        let e = Self::root_ref(w, root);
        if poptrie::is_leaf(e) {
            // No subtree yet: build one for the slot (or sub-slot).
            let base = key.masked(s);
            let mut routes = core::mem::take(&mut w.scratch);
            Self::routes_under(w, base, s, &mut routes);
            let inherited = if Self::covers_out(w.arena.cur()) {
                0
            } else {
                w.inh[root.t]
            };
            let built = poptrie::build(base, s, inherited, &routes, &mut w.arena, Self::COMPRESS);
            w.scratch = routes;
            return Self::publish(w, root, built);
        }
        // Descend level by level (a path-compressed node's folded strides are one level each)
        // to the one whose stride holds the prefix's last bit, or where the path leaves the
        // trie (the prefix's slot is a leaf, or it leaves a folded chain).
        let mut path = core::mem::take(&mut w.path);
        let mut blobs = core::mem::take(&mut w.blobs);
        path.clear();
        blobs.clear();
        let mut node = e;
        let mut depth = s;
        // A folded chain the descent stopped in: the skip node's contents and the level.
        let mut chain = None;
        'descent: loop {
            let d = poptrie::decode(w.arena.cur(), node);
            blobs.push((node, d.words));
            if let Some((k, frag, miss)) = d.skip {
                for i in 0..k {
                    let f = (frag >> (6 * (k - 1 - i)) & 63) as usize;
                    let v = key.bits6(depth);
                    let mut slots = [Built::Leaf(miss); 64];
                    // Stands for the rest of the chain (materialised below if kept).
                    slots[f] = Built::Node {
                        r: REST,
                        fresh: true,
                    };
                    path.push(Level { depth, v, slots });
                    if u32::from(len) <= u32::from(depth) + 6 || v != f {
                        chain = Some((d, k - 1 - i, f));
                        break 'descent;
                    }
                    depth += 6;
                }
            }
            let v = key.bits6(depth);
            let slots = d.slots();
            let next = slots[v];
            path.push(Level { depth, v, slots });
            if u32::from(len) <= u32::from(depth) + 6 {
                break;
            }
            match next {
                Built::Node { r, .. } => {
                    node = r;
                    depth += 6;
                }
                Built::Leaf(_) => break,
            }
        }
        // Rebuild the slots of the last level the prefix covers (or the one slot it lies
        // in); every other slot, and so every other subtree, is kept as it is.
        let lvl = path.last_mut().expect("at least the slot's root");
        let d = lvl.depth;
        let end = u32::from(d) + 6;
        let (first, n, rbase, rlen, inherited) = if u32::from(len) <= end {
            let inherited = Self::best_cover(w, key, self.trie_min(w.arena.cur()), len).0;
            (
                key.bits6(d),
                1usize << (end - u32::from(len)),
                key,
                len,
                inherited,
            )
        } else {
            // The slot's value from the routes no longer than its range (its leaf may instead
            // be deeper routes that happened to collapse to one value — then those routes are
            // among the ones rebuilt, and the leaf is no inherited value).
            debug_assert!(matches!(lvl.slots[lvl.v], Built::Leaf(_)), "a leaf slot");
            let inherited = Self::best_cover(w, key, self.trie_min(w.arena.cur()), d + 6).0;
            (lvl.v, 1, key.masked(d + 6), d + 6, inherited)
        };
        let mut routes = core::mem::take(&mut w.scratch);
        Self::routes_under(w, rbase, rlen, &mut routes);
        if let Some((sk, rest, f)) = &chain
            && !(first..first + n).contains(f)
        {
            lvl.slots[*f] = sk.write_tail(*rest, &mut w.arena);
        }
        if u32::from(len) <= end {
            // The prefix ends in this level: the slots it covers keep their deeper routes,
            // only the value they inherit changed. Repaint it where it reaches; the subtrees
            // under the longer routes in those slots stay (`poptrie::repaint`).
            let old_slots = lvl.slots;
            let old = |v: usize| match old_slots[v] {
                Built::Node { r: REST, .. } => {
                    let (sk, rest, _) = chain.as_ref().expect("only in a chain");
                    let k = sk.skip.map_or(0, |s| s.0);
                    poptrie::Old::Chain(sk, k - rest)
                }
                Built::Node { r, .. } => poptrie::Old::Node(r),
                Built::Leaf(x) => poptrie::Old::Leaf(x),
            };
            poptrie::repaint_range(
                rbase.masked(d),
                d,
                first,
                n,
                inherited,
                &routes,
                &mut lvl.slots,
                old,
                &mut w.arena,
                Self::COMPRESS,
            );
        } else {
            // The one slot the prefix lies in, a leaf: build it.
            poptrie::build_range(
                rbase.masked(d),
                d,
                first,
                n,
                inherited,
                &routes,
                &mut lvl.slots,
                &mut w.arena,
                Self::COMPRESS,
            );
        }
        w.scratch = routes;
        // Copy the path above it.
        let mut built = poptrie::make_node(&lvl.slots, &mut w.arena, Self::COMPRESS);
        for lvl in path.iter_mut().rev().skip(1) {
            lvl.slots[lvl.v] = built;
            built = poptrie::make_node(&lvl.slots, &mut w.arena, Self::COMPRESS);
        }
        let fits = Self::set_root(w, root, built.entry()).is_some();
        // Retire the blobs on the path (the rebuilt slots' old subtrees went above; the other
        // children are shared with the copies). If the new root did not fit, none of this
        // was published and the whole arena is about to be replaced: retire nothing.
        if fits {
            for &(r, words) in &blobs {
                poptrie::retire_one(&mut w.arena, r, words);
            }
        }
        w.path = path;
        w.blobs = blobs;
        fits
    }

    // ---- introspection -----------------------------------------------------------------------

    /// Memory used by the lookup structure (live nodes and leaves; see
    /// [`Table::memory_allocated`] for what the arena holds in all).
    pub fn memory(&self) -> Memory {
        let w = self.w(); // no concurrent writer retires nodes while we walk
        let s = w.arena.cur();
        let mut m = Memory {
            top: s.top.len() * 8 + s.top32.len() * 4,
            nodes: 0,
            leaves: 0,
            node_count: 0,
        };
        for t in 0..1usize << self.top_bits {
            let e = Self::entry(s, t);
            if Self::BLOCKS && !poptrie::is_leaf(e) {
                m.top += BLOCK * 8;
            }
            for r in Self::subtrees(s, e) {
                let (n, words, leaves) = poptrie::stats(s, r);
                m.node_count += n;
                m.nodes += words * 8 - leaves;
                m.leaves += leaves;
            }
        }
        m
    }

    /// The subtree roots under top-level entry `e`: itself if it is a node, or with blocks
    /// the nodes of its block (writer, or with a guard).
    fn subtrees(s: &Snapshot, e: Ref) -> Vec<Ref> {
        if poptrie::is_leaf(e) {
            Vec::new()
        } else if Self::BLOCKS {
            let roots = poptrie::block_entries(s, e).map(|(r, _)| r);
            roots
                .into_iter()
                .filter(|&r| !poptrie::is_leaf(r))
                .collect()
        } else {
            vec![e]
        }
    }

    /// Bytes allocated for the lookup structure: the top level and the whole arena, including
    /// free space kept for updates and blobs waiting to be reused.
    pub fn memory_allocated(&self) -> usize {
        let w = self.w();
        let s = w.arena.cur();
        s.top.len() * 8 + s.top32.len() * 4 + s.words.len() * 8
    }
}

impl<F: Family> Drop for Table<F> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader borrows the table any more, so the published snapshot
        // can be freed now (replaced ones went to the epoch earlier).
        unsafe {
            let g = crossbeam_epoch::unprotected();
            let s = self.snap.swap(Shared::null(), Ordering::Relaxed, g);
            if !s.is_null() {
                drop(s.into_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nexthop::NextHop;
    use crate::{V4, V6, tablegen};
    use std::net::Ipv4Addr;

    /// Every batch implementation (scalar, and AVX-512 where the CPU has it) and the single
    /// lookup agree, at each leaf width.
    fn paths_agree<F: Family>(routes: Vec<(Prefix<F>, NextHopSet)>, dst: &[F::Addr]) {
        for sets in [1u32, 300, 70_000] {
            let t: Table<F> = Table::new();
            // Spread the routes over `sets` distinct next-hop sets (leaf width 1, 2, 4 bytes).
            let routes = routes.iter().enumerate().map(|(i, (p, _))| {
                (
                    *p,
                    NextHop::Attached {
                        ifindex: i as u32 % sets,
                    }
                    .into(),
                )
            });
            t.load(routes).unwrap();
            let g = crossbeam_epoch::pin();
            let s = t.snap(&g);
            assert_eq!(
                s.lw,
                [0, 1, 2][usize::from(sets > 255) + usize::from(sets > 65_535)]
            );
            let mut scalar = vec![None; dst.len()];
            t.batch_in::<STEP_SCALAR>(s, dst, &mut scalar);
            for (a, r) in dst.iter().zip(&scalar) {
                assert_eq!(t.lookup(*a, &g), *r, "{a}");
            }
            #[cfg(target_arch = "x86_64")]
            if Table::<F>::COMPRESS && simd::available() {
                let mut v = vec![None; dst.len()];
                // SAFETY: checked just now.
                unsafe { t.batch_avx512::<STEP_AVX512_GATHER>(s, dst, &mut v) };
                assert_eq!(
                    v, scalar,
                    "AVX-512 (memory) differs from scalar, {sets} sets"
                );
                let mut v = vec![None; dst.len()];
                // SAFETY: checked just now.
                unsafe { t.batch_avx512::<STEP_AVX512_LOADS>(s, dst, &mut v) };
                assert_eq!(
                    v, scalar,
                    "AVX-512 (register) differs from scalar, {sets} sets"
                );
            }
        }
    }

    /// The top-level entries and the live structure, to compare before and after a change.
    fn shape<F: Family>(t: &Table<F>) -> (Vec<(Ref, u32)>, (usize, usize)) {
        let w = t.w();
        let s = w.arena.cur();
        let top = (0..1usize << t.top_bits).map(|i| top_of::<F>(s, i));
        (top.collect(), t_memory::<F>(t, &w))
    }

    /// Slot `i`'s entry: reference and cover.
    fn top_of<F: Family>(s: &Snapshot, i: usize) -> (Ref, u32) {
        if Table::<F>::WIDE_TOP {
            let e = s.top[i].load(Ordering::Relaxed);
            (e as Ref, (e >> 32) as u32)
        } else {
            Table::<F>::split32(s, s.top32[i].load(Ordering::Relaxed))
        }
    }

    fn t_memory<F: Family>(t: &Table<F>, w: &Writer<F>) -> (usize, usize) {
        let s = w.arena.cur();
        let mut m = (0, 0);
        for i in 0..1usize << t.top_bits {
            for r in Table::<F>::subtrees(s, top_of::<F>(s, i).0) {
                let (n, words, _) = poptrie::stats(s, r);
                m = (m.0 + n, m.1 + words);
            }
        }
        m
    }

    /// The words the arena counts as handed out (allocated, not retired or freed since) are
    /// the ones the published structure reaches: its blocks and nodes. Independent of the
    /// epoch (retired blobs are counted when retired, not when reused).
    fn assert_no_leak<F: Family>(t: &Table<F>) {
        let w = t.w();
        let s = w.arena.cur();
        let mut reached = t_memory::<F>(t, &w).1;
        if Table::<F>::BLOCKS {
            let blocks =
                (0..1usize << t.top_bits).filter(|&i| !poptrie::is_leaf(top_of::<F>(s, i).0));
            reached += blocks.count() * BLOCK;
        }
        assert_eq!(
            w.arena.live_words, reached,
            "words handed out vs reached: a blob leaked"
        );
    }

    /// A default-route change touches nothing in the trie: every top-level entry (and so every
    /// node under it) stays as it was, whether the default is added, replaced or removed.
    #[test]
    fn default_route_stays_out_of_the_trie() {
        let t: Table<V4> = Table::new();
        t.load(tablegen::ipv4_table(20_000, 3)).unwrap();
        let before = shape(&t);
        let d: Prefix<V4> = "0.0.0.0/0".parse().unwrap();
        for ifindex in [70_000, 70_001, 70_001] {
            t.insert(d, NextHop::Attached { ifindex }).unwrap();
            assert_eq!(shape(&t), before);
        }
        t.remove(&d).unwrap();
        assert_eq!(shape(&t), before);
        // A reload with a default builds the same trie as one without.
        let mut routes = t.routes();
        t.load(routes.clone()).unwrap();
        let without = shape(&t);
        routes.push((d, NextHop::Drop.into()));
        t.load(routes).unwrap();
        assert_eq!(shape(&t), without);
    }

    /// The default route's id is not in a leaf, so it may be wider than the leaves: no
    /// rebuild when it is set, and lookups still return it.
    #[test]
    fn default_id_wider_than_the_leaves() {
        let t: Table<V4> = Table::new();
        let host = |i: u32| Prefix::<V4>::new(std::net::Ipv4Addr::from_bits(0x0a00_0000 + i), 32);
        for i in 0..300 {
            t.insert(host(i).unwrap(), NextHop::Attached { ifindex: i })
                .unwrap();
        }
        let d: Prefix<V4> = "0.0.0.0/0".parse().unwrap();
        t.insert(d, NextHop::Drop).unwrap();
        for i in 0..300 {
            t.remove(&host(i).unwrap()).unwrap();
        }
        // Reload: only the default is left, its id (> 255) is kept by the interning.
        t.load(t.routes()).unwrap();
        let g = crossbeam_epoch::pin();
        let id = t.lookup("192.0.2.1".parse().unwrap(), &g).expect("default");
        assert!(id.get() > 255, "default id {}", id.get());
        assert_eq!(
            t.snap(&g).lw,
            0,
            "1-byte leaves: the default is not in them"
        );
        let r: Prefix<V4> = "10.0.0.0/24".parse().unwrap();
        t.insert(r, NextHop::Local).unwrap();
        let a = |s: &str| t.lookup_set(s.parse().unwrap()).map(|s| s.hops()[0]);
        assert_eq!(a("10.0.0.7"), Some(NextHop::Local));
        assert_eq!(a("10.0.1.7"), Some(NextHop::Drop));
        assert_eq!(a("192.0.2.1"), Some(NextHop::Drop));
        let mut out = [None; 2];
        let addrs = ["10.0.0.7".parse().unwrap(), "10.0.1.7".parse().unwrap()];
        t.lookup_batch(&addrs, &mut out, &g);
        assert_eq!(out[1], Some(id));
        assert_eq!(t.remove(&d).unwrap(), NextHop::Drop.into());
        assert_eq!(a("10.0.1.7"), None);
        assert_eq!(t.nexthop_sets(), 1);
    }

    /// The trie as a canonical tree (next-hop ids replaced by the sets' first hop, so that two
    /// tables interning in different orders compare equal).
    #[derive(Debug, PartialEq)]
    enum Canon {
        Leaf(Option<NextHop>),
        Node {
            skip: Option<(u32, u64, Option<NextHop>)>,
            slots: Vec<Canon>,
        },
        /// A block's sub-slots: sub-cover and subtree.
        Block(Vec<(Option<NextHop>, Canon)>),
    }

    type Top = Vec<(Option<NextHop>, Canon)>;

    fn canon<F: Family>(t: &Table<F>) -> (Option<NextHop>, Top) {
        let w = t.w();
        let s = w.arena.cur();
        let g = crossbeam_epoch::pin();
        let hop = |id: u32| (id != 0).then(|| t.nh.get(id, &g).expect("live id").hops()[0]);
        fn node(s: &Snapshot, r: Ref, hop: &dyn Fn(u32) -> Option<NextHop>) -> Canon {
            let d = poptrie::decode(s, r);
            Canon::Node {
                skip: d.skip.map(|(k, f, m)| (k, f, hop(m))),
                slots: d
                    .slots()
                    .iter()
                    .map(|b| match *b {
                        Built::Leaf(x) => Canon::Leaf(hop(x)),
                        Built::Node { r, .. } => node(s, r, hop),
                    })
                    .collect(),
            }
        }
        let top = (0..1usize << t.top_bits)
            .map(|i| {
                let (r, cover) = top_of::<F>(s, i);
                let cover = hop(cover);
                let sub = |r: Ref| {
                    if poptrie::is_leaf(r) {
                        Canon::Leaf(hop(r >> 1))
                    } else {
                        node(s, r, &hop)
                    }
                };
                let trie = if Table::<F>::BLOCKS && !poptrie::is_leaf(r) {
                    let b = poptrie::block_entries(s, r);
                    Canon::Block(b.iter().map(|&(r, c)| (hop(c), sub(r))).collect())
                } else {
                    sub(r)
                };
                (cover, trie)
            })
            .collect();
        (hop(s.default.load(Ordering::Relaxed)), top)
    }

    /// Incremental changes leave exactly the trie a fresh build of the same routes makes:
    /// same nodes, folds, leaves — so the partial rebuilds (the changed slots of one level,
    /// chains split and re-folded) cannot drift from the builder, which the reference tests
    /// check against a map per length. Prefixes crowd one top-level slot (deep nodes, chains
    /// that a new prefix splits or ends in) and include short ones and the default. After
    /// every change, the words the arena counts as handed out are the ones the structure
    /// reaches: nothing replaced was left unretired (or retired twice).
    ///
    /// `wide_ids`: first 300 host routes with distinct next hops in another top-level slot,
    /// so that the ids outgrow 1-byte leaves: IPv4's unpacked layout (covers in the leaves;
    /// short prefixes rebuild the subtrees under them), else its packed one.
    fn incremental_is_a_rebuild<F: Family>(
        ops: &[(u8, u8, u128, u32)],
        top_bits: u8,
        wide_ids: bool,
    ) {
        let t: Table<F> = Table::with_config(Config { top_bits });
        let bits = F::Key::BITS;
        if wide_ids {
            for i in 0..300u128 {
                let k = F::Key::from_u128_bits(0xfe << 120 | i << 96 | i);
                let p = Prefix::<F>::from_key(k, bits);
                t.insert(
                    p,
                    NextHop::Attached {
                        ifindex: 1000 + i as u32,
                    },
                )
                .unwrap();
            }
        }
        let g = crossbeam_epoch::pin();
        assert_eq!(t.snap(&g).packed, !Table::<F>::WIDE_TOP && !wide_ids);
        drop(g);
        for &(kind, len, x, v) in ops {
            let len = len % (bits + 1);
            let k = F::Key::from_u128_bits(x).masked(len);
            let mut p = Prefix::<F>::from_key(k, len);
            // 6 in 10 insert, 2 remove a random prefix (mostly absent), 2 an existing route.
            let insert = kind % 10 < 6;
            if insert {
                t.insert(p, NextHop::Attached { ifindex: v }).unwrap();
            } else if kind % 10 < 8 {
                let _ = t.remove(&p);
            } else {
                let routes = t.routes();
                if routes.is_empty() {
                    continue;
                }
                p = routes[x as usize % routes.len()].0;
                t.remove(&p).unwrap();
            }
            let fresh: Table<F> = Table::with_config(Config { top_bits });
            fresh.load(t.routes()).unwrap();
            assert_eq!(
                canon(&t),
                canon(&fresh),
                "after {} {p}",
                ["remove", "insert"][insert as usize]
            );
            assert_no_leak(&t);
        }
    }

    fn ops_strategy(
        bits: u8,
    ) -> impl proptest::strategy::Strategy<Value = Vec<(u8, u8, u128, u32)>> {
        use proptest::prelude::*;
        // One 20-bit region, a few sub-regions inside it so prefixes nest; lengths spread
        // over the whole key, weighted to the deep ones. Removals of existing routes empty
        // slots and blocks again.
        let key = prop_oneof![
            any::<u128>().prop_map(|x| (0xa1b2c << 108) | (x >> 20)),
            (0u128..4, any::<u128>()).prop_map(|(i, x)| (0xa1b2c << 108) | (i << 100) | (x >> 40)),
            any::<u128>(),
        ];
        // Also lengths just past the top levels used below (8, 11, 16): with blocks (IPv6)
        // they are sub-covers.
        let len = prop_oneof![1 => 0..=bits, 3 => (bits / 6)..=bits, 1 => 9u8..=22];
        let op = (any::<u8>(), len, key, 1u32..4);
        prop::collection::vec(op, 1..80)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

        // Top levels of 8, 11 and 16 bits (not the families' 18 and 20: each step compares
        // the whole top level twice, and the deep structure is the same at any alignment).
        #[test]
        fn incremental_is_a_rebuild_ipv6(ops in ops_strategy(128), top in 0usize..3) {
            incremental_is_a_rebuild::<V6>(&ops, [8, 11, 16][top], false);
        }

        /// Packed (covers in the top-level entries, none in the trie).
        #[test]
        fn incremental_is_a_rebuild_ipv4(ops in ops_strategy(32), top in 0usize..3) {
            incremental_is_a_rebuild::<V4>(&ops, [8, 11, 16][top], false);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

        /// Unpacked (covers expanded into the leaves).
        #[test]
        fn incremental_is_a_rebuild_ipv4_wide_ids(ops in ops_strategy(32), top in 0usize..3) {
            incremental_is_a_rebuild::<V4>(&ops, [8, 11, 16][top], true);
        }
    }

    /// Longest-prefix match by brute force over `routes` (prefix → ifindex).
    fn brute_lpm(routes: &BTreeMap<(u32, u8), u32>, a: u32) -> Option<u32> {
        (0..=32u8)
            .rev()
            .find_map(|l| routes.get(&(a.masked(l), l)).copied())
    }

    /// A packed IPv4 table whose new subtree root does not fit a packed entry (here: past a
    /// lowered limit, in the field past 16 MiB of arena) rebuilds unpacked, and lookups stay
    /// right throughout, whatever changes come after.
    #[test]
    fn packed_overflow_falls_back_to_unpacked() {
        use rand::{Rng, SeedableRng};
        let t: Table<V4> = Table::with_config(Config { top_bits: 12 });
        t.w().packed_limit = 2048 << 3 | 7; // nodes in the first 2048 words only
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let mut want = BTreeMap::new();
        let packed = || t.snap(&crossbeam_epoch::pin()).packed;
        let mut was_packed = false;
        for round in 0..3000u32 {
            // Mostly /24s and /16s around 10/8, now and then a short one or a removal.
            let a: u32 = 0x0a00_0000 | rng.gen_range(0..1u32 << 20) << 4;
            let len = [24, 24, 24, 16, 20, 8, 12, 28][rng.gen_range(0..8usize)];
            let k = a.masked(len);
            let p = Prefix::<V4>::from_key(k, len);
            if round % 5 == 4 {
                let old = want.keys().nth(rng.gen_range(0..want.len())).copied();
                let (k, len) = old.expect("routes in");
                t.remove(&Prefix::from_key(k, len)).unwrap();
                want.remove(&(k, len));
            } else {
                let v = rng.gen_range(1..6u32);
                t.insert(p, NextHop::Attached { ifindex: v }).unwrap();
                want.insert((k, len), v);
            }
            was_packed |= packed();
            if round % 50 == 0 {
                let g = crossbeam_epoch::pin();
                for _ in 0..200 {
                    let a: u32 = 0x0a00_0000 | rng.gen_range(0..1u32 << 24);
                    let got = t.lookup(Ipv4Addr::from_bits(a), &g);
                    let got = got.map(|id| match t.nexthops(id, &g).unwrap().hops()[0] {
                        NextHop::Attached { ifindex } => ifindex,
                        h => panic!("{h:?}"),
                    });
                    assert_eq!(got, brute_lpm(&want, a), "{}", Ipv4Addr::from_bits(a));
                }
            }
        }
        assert!(was_packed, "started packed");
        assert!(!packed(), "fell back to unpacked once past the limit");
        // A reload tries packed again, and falls back again.
        t.load(t.routes()).unwrap();
        assert!(!packed());
    }

    /// The subtree in the slot of the node below the block (bits 26–32) that `addr` falls in
    /// (IPv6, default layout).
    fn slot_below_block(t: &Table<V6>, addr: &str) -> Built {
        let key = V6::key(addr.parse().unwrap());
        let w = t.w();
        let s = w.arena.cur();
        let (e, _) = top_of::<V6>(s, key.top(t.top_bits));
        let (r, _) = poptrie::block_entries(s, e)[key.bits6(t.top_bits)];
        assert!(!poptrie::is_leaf(r), "{addr}: a subtree below the block");
        let d = poptrie::decode(s, r);
        assert!(
            d.skip.is_none(),
            "{addr}: the node below the block is not folded"
        );
        d.slots()[key.bits6(t.trie_depth())]
    }

    /// IPv6 /27–/29 (their last bit in the node below the block) added, replaced and deleted
    /// over longer routes and under covering ones: lookups match a brute-force longest match,
    /// the trie is the one a fresh build makes (so the subtrees that inherit from the prefix
    /// were repainted right), and the subtrees under longer routes in the slots the prefix
    /// covers are kept: the same node, not a copy (a copy is written while the original is
    /// still retired, so it cannot land at the same place). After every step every blob a
    /// change replaced was given back to the arena ([`assert_no_leak`]).
    #[test]
    fn ipv6_27_to_29_repaint_over_longer_routes() {
        let t: Table<V6> = Table::new();
        let hop = |i: u32| NextHop::Attached { ifindex: i };
        let routes = [
            ("2400::/12", 1),          // a cover (top-level entry)
            ("2400:1000::/24", 2),     // a sub-cover (block entry)
            ("2400:1000::/32", 3),     // a slot below the block, painted by its own route
            ("2400:1000:5::/48", 4),   // under the /32: its subtree must be kept
            ("2400:1004::/30", 5),     // four slots painted by a /30
            ("2400:1005:7::/48", 6),   // under the /30
            ("2400:1010::/48", 7),     // a folded chain that inherits the /27, /28, /29
            ("2400:1010:1:2::/64", 8), // a deeper chain in the same slot
            ("2400:1011::/33", 9),     // two halves with one next hop: a collapsed subtree
            ("2400:1011:8000::/33", 9),
            ("2400:1012:4::/48", 20), // the next hop the /27 will take: kept apart
            ("2400:1013:100::/40", 21),
        ];
        for (p, h) in routes {
            t.insert(p.parse().unwrap(), hop(h)).unwrap();
        }
        let probes = [
            "2400:1000:5::1",
            "2400:1000:6::1",
            "2400:1004::1",
            "2400:1005:7::1",
            "2400:1005:8::1",
            "2400:1010::1",
            "2400:1010:1:2::1",
            "2400:1010:1:3::1",
            "2400:1010:2::1",
            "2400:1011::1",
            "2400:1011:8000::1",
            "2400:1012:4::1",
            "2400:1012:5::1",
            "2400:1013:100::1",
            "2400:1013:200::1",
            "2400:1018::1",
            "2400:101f:ffff::1",
            "2400:1020::1",
            "2400:2000::1",
        ];
        let check = |what: &str| {
            let routes = t.routes();
            for a in probes {
                let addr: std::net::Ipv6Addr = a.parse().unwrap();
                let want = routes
                    .iter()
                    .filter(|(p, _)| p.contains(addr))
                    .max_by_key(|(p, _)| p.len())
                    .map(|(_, s)| s.hops()[0]);
                let got = t.lookup_set(addr).map(|s| s.hops()[0]);
                assert_eq!(got, want, "{a} after {what}");
            }
            let fresh: Table<V6> = Table::new();
            fresh.load(routes).unwrap();
            assert_eq!(canon(&t), canon(&fresh), "after {what}");
            assert_no_leak(&t);
        };
        check("the setup");
        let kept = |a: &str| match slot_below_block(&t, a) {
            Built::Node { r, .. } => r,
            Built::Leaf(x) => panic!("{a}: a leaf {x}, not a subtree"),
        };
        let under32 = kept("2400:1000:5::1");
        let under30 = kept("2400:1005:7::1");
        for p in [
            "2400:1000::/27",
            "2400:1010::/28",
            "2400:1010::/29",
            "2400:1000::/29",
            "2400:1008::/29",
        ] {
            let p: Prefix<V6> = p.parse().unwrap();
            // Add, replace, replace with the next hop of routes under it (leaves that must
            // keep telling them apart), add over it a shorter one, delete both.
            for (h, what) in [
                (30, "add"),
                (31, "replace"),
                (20, "replace with 20"),
                (9, "replace with 9"),
            ] {
                t.insert(p, hop(h)).unwrap();
                check(&format!("{what} {p}"));
                assert_eq!(
                    kept("2400:1000:5::1"),
                    under32,
                    "{what} {p}: the /32's subtree"
                );
                assert_eq!(
                    kept("2400:1005:7::1"),
                    under30,
                    "{what} {p}: the /30's subtree"
                );
            }
            if p.len() > 27 {
                t.insert("2400:1000::/27".parse().unwrap(), hop(40))
                    .unwrap();
                check(&format!("a /27 over {p}"));
                t.remove(&"2400:1000::/27".parse().unwrap()).unwrap();
                check(&format!("the /27 over {p} deleted"));
            }
            t.remove(&p).unwrap();
            check(&format!("delete {p}"));
            assert_eq!(
                kept("2400:1000:5::1"),
                under32,
                "delete {p}: the /32's subtree"
            );
            assert_eq!(
                kept("2400:1005:7::1"),
                under30,
                "delete {p}: the /30's subtree"
            );
        }
        // A thousand more rounds of the same changes: still nothing leaked, still the trie
        // of a fresh build.
        let cycle = || {
            for p in ["2400:1000::/27", "2400:1010::/29", "2400:1008::/29"] {
                let p: Prefix<V6> = p.parse().unwrap();
                for h in [30, 31] {
                    t.insert(p, hop(h)).unwrap();
                }
                t.remove(&p).unwrap();
            }
        };
        for _ in 0..1000 {
            cycle();
        }
        assert_no_leak(&t);
        check("the repeated changes");
    }

    #[test]
    fn batch_paths_agree_ipv6() {
        let mut routes = tablegen::ipv6_table(70_000, 7);
        let mut dst = tablegen::routed(&routes, 30_000, 8);
        // With a default route (outside the trie): misses resolve to it on every path.
        routes.push(("::/0".parse().unwrap(), NextHop::Drop.into()));
        let mut rng = <rand_xoshiro::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(9);
        dst.extend((0..5_000).map(|_| tablegen::global_v6(&mut rng)));
        paths_agree::<V6>(routes, &dst);
    }

    #[test]
    fn batch_paths_agree_ipv4() {
        let mut routes = tablegen::ipv4_table(70_000, 7);
        let mut dst = tablegen::routed(&routes, 30_000, 8);
        routes.push(("0.0.0.0/0".parse().unwrap(), NextHop::Drop.into()));
        dst.extend(tablegen::uniform::<V4>(10_000, 9));
        paths_agree::<V4>(routes, &dst);
    }
}
