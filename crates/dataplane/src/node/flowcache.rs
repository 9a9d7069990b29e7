//! `flow-cache`: an exact-match cache of resolved forwarding decisions in front of the FIB
//! (Tanyingyong's Quickpath).
//!
//! A hit replaces the FIB walk, the next-hop set and the neighbour lookup with one probe of a
//! small set-associative array: key = destination address, value = egress VIF and neighbour
//! MAC. Four ways per set, and an IPv4 set is one cache line (16-byte entries), so a probe
//! loads one line. (Direct-mapped, 1000 flows in 4096 slots missed 17 % of the time from
//! conflicts alone. Two ways of 24-byte entries still missed 10 % of the time with 512 flows
//! in the default 1024 entries — `vrbench inproc --flows 512`, every miss a walk of the full
//! table; four ways miss 3.3 %, and 0.4 % at 2048 entries.) Each VR has its own cache per
//! worker (only the VR's owner uses it), so there is no sharing and no lock; the default
//! 1024 entries are 16 KiB for IPv4 and 32 KiB for IPv6.
//!
//! When it does not pay, it steps aside. With a FIB as fast as this one (a few ns per
//! lookup) a probe that misses costs about as much as the lookup it hoped to save, so for
//! traffic with little locality (uniformly random destinations: 6 ns per packet more with
//! the cache than without; a Zipf mix with 37 % hits: 15.8 Mpps with it, 18.6 without —
//! measured) the cache watches its hit rate over windows of 4096 probes and, below 50 %, is
//! bypassed for the next 16384 packets before it tries again; each further low window in a
//! row doubles the bypass, up to 16 × (262,144 packets), so traffic that never hits probes
//! 1.5 % of the time, not 20 %. (With 100 VRs each cache is cold by the time its VR runs
//! again: the probes measured an L2 miss per packet and 13 cycles, for 0.2 % hits.) One good
//! window resets the doubling. Bypassed packets count as misses.
//!
//! Correctness comes from one generation number: the sum of the VR's FIB generation and its
//! neighbour-table generation, both of which only grow, so any route or neighbour change
//! makes every older entry a miss (the whole cache is invalidated at once; a changing table
//! costs misses, never a wrong answer). The cache gives each generation it sees a 32-bit
//! stamp of its own and an entry counts only under the current stamp; when the stamp wraps,
//! every entry is cleared first, so no old entry can match again. An entry also records the
//! VIF, and a VIF removed since is a miss. Destinations whose route is an ECMP set are not
//! cached: keyed by destination alone they would pin every flow to that destination to one
//! member.
//!
//! A VR may key its cache by 5-tuple instead (`FlowCacheKey::FiveTuple`): source and
//! destination, protocol and ports, exactly the fields the ECMP hash covers (`flow::tuple_v4`,
//! `flow::tuple_v6`), so every packet with a key takes the member its first packet's hash
//! picked, and ECMP decisions are cached too. It costs an entry per flow instead of per
//! destination, and 32-byte IPv4 / 64-byte IPv6 entries. Such a hit is not offered to the
//! fast path (which is keyed by destination): a flow is offered on its miss, when the
//! decision is known to be the destination's.

use crate::counters::VrCounters;

/// What `forward` puts in the cache for a vector, decided once before its per-packet loop
/// (a loop-invariant byte there, instead of two flags tested per packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Bypassed or disabled: nothing, and the probe wrote no answers.
    Nothing,
    /// Destination-keyed: decisions that hold for the destination (not an ECMP member's).
    ByDst,
    /// 5-tuple-keyed: every decision.
    ByTuple,
}

impl Fill {
    /// `used`: the probe ran for this vector; `by_tuple`: the cache is keyed by 5-tuple.
    #[inline(always)]
    pub(crate) fn of(used: bool, by_tuple: bool) -> Fill {
        match (used, by_tuple) {
            (false, _) => Fill::Nothing,
            (true, false) => Fill::ByDst,
            (true, true) => Fill::ByTuple,
        }
    }
}

/// Ways per set. An IPv4 set is one cache line (4 × 16 bytes), so a probe loads one line
/// whichever way holds the key.
const WAYS: usize = 4;

/// One cached decision.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct Entry<K> {
    key: K,
    /// The cache's stamp when the entry was put (see [`FlowCache::stamp`]); 0 = empty.
    stamp: u32,
    vif: u16,
    mac: [u8; 6],
}

/// `WAYS` entries, newest first, on their own cache line(s).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Set<K> {
    ways: [Entry<K>; WAYS],
}

const _: () = assert!(core::mem::size_of::<Set<u32>>() == 64);
const _: () = assert!(core::mem::size_of::<Set<crate::flow::Tuple6>>() == 256);

/// A 4-way set-associative cache keyed by `K` (`u32` for IPv4, `u128` for IPv6).
#[derive(Debug)]
pub(crate) struct FlowCache<K> {
    sets: Box<[Set<K>]>,
    mask: usize,
    /// The generation `stamp` stands for.
    generation: u64,
    /// A number of this cache's own for `generation`: it moves on whenever the generation
    /// does, and an entry counts only if it carries the current one. (Stamping entries
    /// with the 64-bit generation itself made them 24 bytes, and a 4-way set two lines.)
    stamp: u32,
    window_hits: u32,
    window_probes: u32,
    /// Packets left to bypass.
    bypass: u32,
    /// Low-hit windows in a row, up to [`MAX_BACKOFF`] (the bypass doubles with each).
    backoff: u32,
}

/// Probes per hit-rate window.
const WINDOW: u32 = 4096;
/// Packets bypassed after a window with a low hit rate.
const BYPASS_PACKETS: u32 = 16384;
/// Most doublings of the bypass.
const MAX_BACKOFF: u32 = 4;

/// Keys the cache can hash.
pub(crate) trait CacheKey: Copy + Default + PartialEq {
    fn slot(self, mask: usize) -> usize;

    /// Whether a way holding (`key`, `stamp`) answers for (`want`, `now`).
    #[inline(always)]
    fn holds(key: Self, stamp: u32, want: Self, now: u32) -> bool {
        (stamp == now) & (key == want)
    }
}

impl CacheKey for u32 {
    #[inline(always)]
    fn slot(self, mask: usize) -> usize {
        (self.wrapping_mul(0x9e37_79b1) >> 16) as usize & mask
    }

    /// Key and stamp side by side as one 64-bit word: one load and one compare per way
    /// (the entry is `repr(C)`, the stamp right after the key).
    #[inline(always)]
    fn holds(key: Self, stamp: u32, want: Self, now: u32) -> bool {
        let word = |k: u32, s: u32| u64::from(k) | u64::from(s) << 32;
        word(key, stamp) == word(want, now)
    }
}

impl CacheKey for u128 {
    #[inline(always)]
    fn slot(self, mask: usize) -> usize {
        let x = (self >> 64) as u64 ^ self as u64;
        (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & mask
    }
}

/// An IPv4 5-tuple key ([`crate::flow::tuple_v4`]). Its fields sit at fixed bit positions,
/// and a multiply alone keeps only what lies below the bits it takes (a source differing in
/// its last octet would land in the same set), so it is hashed with a folded multiply: both
/// halves of the 128-bit product, which every input bit reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tuple4Key(pub(crate) u128);

/// Both halves of `x × K` XORed: one multiply, every bit of `x` in every bit of the result.
#[inline(always)]
fn fold_mul(x: u64) -> u64 {
    let p = u128::from(x) * 0x9e37_79b9_7f4a_7c15;
    (p >> 64) as u64 ^ p as u64
}

impl CacheKey for Tuple4Key {
    #[inline(always)]
    fn slot(self, mask: usize) -> usize {
        fold_mul((self.0 >> 64) as u64 ^ (self.0 as u64).rotate_left(32)) as usize & mask
    }
}

impl CacheKey for crate::flow::Tuple6 {
    #[inline(always)]
    fn slot(self, mask: usize) -> usize {
        let src = (self.src >> 64) as u64 ^ self.src as u64;
        let dst = (self.dst >> 64) as u64 ^ self.dst as u64;
        fold_mul(src ^ fold_mul(dst ^ self.rest)) as usize & mask
    }
}

impl<K: CacheKey> FlowCache<K> {
    /// A cache of `size` entries (rounded up to a power of two, at least one set); 0
    /// disables it.
    pub(crate) fn new(size: usize) -> FlowCache<K> {
        let sets = if size == 0 {
            0
        } else {
            size.next_power_of_two().max(WAYS) / WAYS
        };
        FlowCache {
            sets: vec![Set::default(); sets].into_boxed_slice(),
            mask: sets.wrapping_sub(1),
            generation: 0,
            stamp: 0,
            window_hits: 0,
            window_probes: 0,
            bypass: 0,
            backoff: 0,
        }
    }

    /// Whether to use the cache for the next vector of `n` packets (it is configured, and
    /// not being bypassed for a low hit rate). Call once per vector.
    #[inline(always)]
    pub(crate) fn use_for_vector(&mut self, n: usize) -> bool {
        if self.sets.is_empty() {
            return false;
        }
        if self.bypass > 0 {
            self.bypass = self.bypass.saturating_sub(n as u32);
            return false;
        }
        true
    }

    /// Whether the next vector will be probed (`use_for_vector` will say yes): for keys that
    /// cost something to build, which a bypassed vector does not need.
    #[inline(always)]
    pub(crate) fn will_probe(&self) -> bool {
        !self.sets.is_empty() && self.bypass == 0
    }

    /// Report a vector's probes and hits (after `use_for_vector` said yes).
    #[inline(always)]
    pub(crate) fn record(&mut self, probes: usize, hits: usize) {
        self.window_probes += probes as u32;
        self.window_hits += hits as u32;
        if self.window_probes >= WINDOW {
            if self.window_hits * 2 < self.window_probes {
                self.bypass = BYPASS_PACKETS << self.backoff;
                self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
            } else {
                self.backoff = 0;
            }
            self.window_probes = 0;
            self.window_hits = 0;
        }
    }

    /// Whether the cache is configured at all.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        !self.sets.is_empty()
    }

    /// Make the stamp stand for `generation`: a new generation gets a new stamp, so every
    /// entry put before it is a miss. When the stamp has gone once round its 32 bits, every
    /// entry is cleared, so an old entry can never carry the stamp again.
    #[inline(always)]
    fn sync(&mut self, generation: u64) {
        if generation != self.generation {
            self.generation = generation;
            self.stamp = self.stamp.wrapping_add(1);
            if self.stamp == 0 {
                self.sets.fill(Set::default());
                self.stamp = 1;
            }
        }
    }

    /// The cached (VIF, MAC) for `key` under the current stamp.
    #[inline(always)]
    fn lookup(&self, key: K) -> Option<(u16, [u8; 6])> {
        let set = &self.sets[key.slot(self.mask)];
        // Which way holds the key is as good as random: find it with selects, not a branch
        // per way (those mispredicted and made the probe cost more than the misses saved).
        let mut hit = WAYS;
        for w in (0..WAYS).rev() {
            let e = &set.ways[w];
            let m = K::holds(e.key, e.stamp, key, self.stamp);
            hit = core::hint::select_unpredictable(m, w, hit);
        }
        set.ways.get(hit).map(|e| (e.vif, e.mac))
    }

    /// The cached (VIF, MAC) for `key` at `generation` (the vector pass,
    /// [`FlowCache::probe_vector`], syncs once and looks up each key).
    #[cfg(test)]
    pub(crate) fn get(&mut self, key: K, generation: u64) -> Option<(u16, [u8; 6])> {
        if self.sets.is_empty() {
            return None;
        }
        self.sync(generation);
        self.lookup(key)
    }

    /// Remember a decision. A key already in its set is updated in place; otherwise it
    /// becomes the first way and the others move down, the oldest falling out (first in,
    /// first out: for uniform traffic as good as least recently used, and a hit writes
    /// nothing).
    #[inline(always)]
    pub(crate) fn put(&mut self, key: K, generation: u64, vif: u16, mac: [u8; 6]) {
        if self.sets.is_empty() {
            return;
        }
        self.sync(generation);
        let stamp = self.stamp;
        let set = &mut self.sets[key.slot(self.mask)].ways;
        let e = Entry {
            key,
            stamp,
            vif,
            mac,
        };
        if let Some(old) = set.iter_mut().find(|o| o.stamp == stamp && o.key == key) {
            *old = e;
            return;
        }
        set.copy_within(0..WAYS - 1, 1);
        set[0] = e;
    }
}

impl<K: CacheKey> FlowCache<K> {
    /// The `flow-cache` pass over a vector: `hits[i]` for packet `i`, whose destination is
    /// `dsts[i]` and whose key is `key(i, dsts[i])`, and the destinations that missed copied
    /// in order to the front of `miss`. Returns (whether the cache was
    /// used, so the caller may fill it; the number of misses). Counts hits and misses in
    /// `c` (a bypassed vector counts as misses).
    #[inline(always)]
    pub(crate) fn probe_vector<A: Copy>(
        &mut self,
        dsts: &[A],
        key: impl Fn(usize, A) -> K,
        generation: u64,
        hits: &mut [Option<(u16, [u8; 6])>],
        miss: &mut [A],
        c: &VrCounters,
    ) -> (bool, usize) {
        let n = dsts.len();
        if !self.use_for_vector(n) {
            miss[..n].copy_from_slice(dsts);
            if self.enabled() {
                c.flow_misses.add(n as u64);
            }
            return (false, n);
        }
        self.sync(generation);
        let mut m = 0;
        for (i, &d) in dsts.iter().enumerate() {
            hits[i] = self.lookup(key(i, d));
            if hits[i].is_none() {
                miss[m] = d;
                m += 1;
            }
        }
        self.record(n, n - m);
        c.flow_hits.add((n - m) as u64);
        c.flow_misses.add(m as u64);
        (true, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors of 256 bypassed before the cache is used again.
    fn bypassed(c: &mut FlowCache<u32>) -> u32 {
        let mut n = 0;
        while !c.use_for_vector(256) {
            n += 1;
        }
        n
    }

    #[test]
    fn low_hit_rate_bypasses_then_retries() {
        let mut c = FlowCache::<u32>::new(16);
        assert!(c.use_for_vector(256));
        c.record(WINDOW as usize, WINDOW as usize / 2 - 1);
        assert_eq!(bypassed(&mut c), BYPASS_PACKETS / 256);
        c.record(WINDOW as usize, WINDOW as usize / 2);
        assert!(c.use_for_vector(256));
    }

    #[test]
    fn the_bypass_doubles_while_windows_stay_low_and_resets_on_a_good_one() {
        let mut c = FlowCache::<u32>::new(16);
        let base = BYPASS_PACKETS / 256;
        for k in 0..=MAX_BACKOFF + 2 {
            c.record(WINDOW as usize, 0);
            assert_eq!(
                bypassed(&mut c),
                base << k.min(MAX_BACKOFF),
                "low window {k}"
            );
        }
        c.record(WINDOW as usize, WINDOW as usize);
        assert!(c.use_for_vector(256), "a good window: no bypass");
        c.record(WINDOW as usize, 0);
        assert_eq!(bypassed(&mut c), base, "and the doubling starts over");
    }

    #[test]
    fn hit_only_at_same_generation_and_key() {
        let mut c = FlowCache::<u32>::new(16);
        c.put(7, 5, 1, [1; 6]);
        assert_eq!(c.get(7, 5), Some((1, [1; 6])));
        assert_eq!(c.get(8, 5), None);
        assert_eq!(c.get(7, 6), None, "a new generation misses");
        assert_eq!(c.get(7, 5), None, "and the old one does not come back");
        let mut off = FlowCache::<u128>::new(0);
        assert!(!off.use_for_vector(1));
        assert!(!off.enabled());
        assert_eq!(off.get(1, 1), None);
    }

    #[test]
    fn a_set_keeps_four_keys_and_drops_the_oldest_first() {
        // Four entries: one set.
        let mut c = FlowCache::<u32>::new(4);
        for k in 1..=4 {
            c.put(k, 5, k as u16, [k as u8; 6]);
        }
        for k in 1..=4 {
            assert_eq!(c.get(k, 5), Some((k as u16, [k as u8; 6])), "key {k}");
        }
        c.put(5, 5, 5, [5; 6]);
        assert_eq!(c.get(1, 5), None, "the oldest went");
        for k in 2..=5 {
            assert_eq!(c.get(k, 5), Some((k as u16, [k as u8; 6])), "key {k}");
        }
        // A key put again is updated in place, not given a second way.
        c.put(3, 5, 33, [33; 6]);
        c.put(3, 5, 34, [34; 6]);
        assert_eq!(c.get(3, 5), Some((34, [34; 6])));
        for k in [2, 4, 5] {
            assert_eq!(c.get(k, 5), Some((k as u16, [k as u8; 6])), "key {k} kept");
        }
        let mut c6 = FlowCache::<u128>::new(4);
        c6.put(u128::MAX, 9, 2, [2; 6]);
        assert_eq!(c6.get(u128::MAX, 9), Some((2, [2; 6])));
        assert_eq!(c6.get(u128::MAX - 1, 9), None);
    }

    #[test]
    fn an_entry_from_before_the_stamp_wrapped_never_hits() {
        let mut c = FlowCache::<u32>::new(16);
        c.put(7, 1, 1, [1; 6]);
        assert_eq!(c.stamp, 1);
        // 2^32 − 1 generations later the next stamp would be 1 again: the entry above
        // carries it, so the wrap must clear the cache.
        c.stamp = u32::MAX;
        c.generation = 1_000;
        assert_eq!(c.get(7, 1_001), None);
        assert_eq!(c.stamp, 1);
        c.put(8, 1_001, 2, [2; 6]);
        assert_eq!(c.get(8, 1_001), Some((2, [2; 6])));
        assert_eq!(c.get(7, 1_001), None);
    }

    #[test]
    fn five_hundred_flows_fit_a_thousand_entries() {
        // 512 random destinations, each put once, in the default 1024 entries: with four
        // ways 95 % are still there (488 with these keys; two ways of the same size keep
        // about 90 %).
        let mut c = FlowCache::<u32>::new(1024);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let keys: Vec<u32> = (0..512)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u32
            })
            .collect();
        for (i, &k) in keys.iter().enumerate() {
            c.put(k, 3, i as u16, [0; 6]);
        }
        let kept = keys
            .iter()
            .enumerate()
            .filter(|&(i, &k)| c.get(k, 3) == Some((i as u16, [0; 6])))
            .count();
        assert!(kept * 100 >= 512 * 93, "{kept} of 512 kept");
    }
}
