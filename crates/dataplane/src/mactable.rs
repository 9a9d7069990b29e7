//! The unicast demux table: (VLAN, MAC) key → where the frame goes, probed once per frame.
//!
//! Why not `FxHashMap`: with many VRs on a port, consecutive frames go to different VIFs
//! and every frame probes the table. A SwissTable probe (hash, group load, tag match, bit
//! walk, key compare) cost 20–24 instructions per frame with 100 VRs (callgrind); this is a
//! multiply, a shift and a key compare, with the answer on the key's own 16-byte slot.
//!
//! Open addressing with linear probing, at most half full (so a probe ends after about
//! 1.5 slots on a hit), slots a power of two. Keys are `vid << 48 | mac` ([`mac_key`]); a
//! VLAN id has 12 bits, so `u64::MAX` can never be a key and marks a free slot. Removal
//! shifts the following run back (no tombstones), so lookups never slow down as VIFs come
//! and go. The control side builds and changes it; workers only read published copies.
//!
//! [`mac_key`]: crate::demux::mac_key

use crate::demux::VifRef;

/// What a key leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// One VIF.
    Vif(VifRef),
    /// Several, chosen by match rules (kept beside the table: rare, and not per frame).
    Rules,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    key: u64,
    target: Target,
}

/// A free slot's key: no (VLAN, MAC) key has its top bits set.
const FREE: u64 = u64::MAX;

/// Fibonacci hashing's multiplier (2^64 ÷ φ): neighbouring MACs land far apart.
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// The fewest slots.
const MIN_SLOTS: usize = 16;

#[derive(Debug, Clone)]
pub(crate) struct MacTable {
    slots: Box<[Slot]>,
    /// `64 − log2(slots)`: the hash's top bits pick the first slot.
    shift: u32,
    len: usize,
}

impl Default for MacTable {
    fn default() -> Self {
        Self::with_slots(MIN_SLOTS)
    }
}

impl MacTable {
    fn with_slots(n: usize) -> Self {
        debug_assert!(n.is_power_of_two() && n >= MIN_SLOTS);
        MacTable {
            slots: vec![
                Slot {
                    key: FREE,
                    target: Target::Rules,
                };
                n
            ]
            .into_boxed_slice(),
            shift: 64 - n.trailing_zeros(),
            len: 0,
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(MUL) >> self.shift) as usize
    }

    /// Where `key` goes, if anywhere.
    ///
    /// The same probe as [`MacTable::find`], written out: `find(key).map(|i| slots[i])`
    /// checks the index twice, 4 instructions more per frame with 100 VRs (callgrind).
    #[inline(always)]
    pub(crate) fn get(&self, key: u64) -> Option<Target> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i & mask];
            if s.key == key {
                return Some(s.target);
            }
            if s.key == FREE {
                return None;
            }
            i += 1;
        }
    }

    /// Whether `key` is in the table.
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Set where `key` goes (replacing what it had).
    ///
    /// # Panics
    /// If `key` is the free marker, which no [`crate::demux::mac_key`] can be.
    pub(crate) fn insert(&mut self, key: u64, target: Target) {
        assert_ne!(key, FREE, "not a (VLAN, MAC) key");
        if let Some(i) = self.find(key) {
            self.slots[i].target = target;
            return;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            let mut bigger = Self::with_slots(self.slots.len() * 2);
            for s in self.slots.iter().filter(|s| s.key != FREE) {
                bigger.place(s.key, s.target);
            }
            *self = bigger;
        }
        self.place(key, target);
    }

    /// Remove `key` (nothing if absent).
    pub(crate) fn remove(&mut self, key: u64) {
        let Some(mut hole) = self.find(key) else {
            return;
        };
        let mask = self.slots.len() - 1;
        self.len -= 1;
        // Move back every later key of the run that may sit in the hole: one whose home is
        // not cyclically within (hole, j].
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.key == FREE {
                break;
            }
            let home = self.home(s.key);
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole].key = FREE;
    }

    fn find(&self, key: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key) & mask;
        loop {
            match self.slots[i].key {
                k if k == key => return Some(i),
                FREE => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Put an absent key in the first free slot of its run (there is room).
    fn place(&mut self, key: u64, target: Target) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key) & mask;
        while self.slots[i].key != FREE {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { key, target };
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn vif(n: u16) -> Target {
        Target::Vif(VifRef { vr: n, vif: n ^ 7 })
    }

    #[test]
    fn finds_what_was_inserted_and_forgets_what_was_removed() {
        let mut t = MacTable::default();
        let base = 0x0002_0000_0000_0000u64 | 0x0200_0000_0000;
        for i in 0..1_000u16 {
            t.insert(base + u64::from(i), vif(i));
        }
        assert_eq!(t.len, 1_000);
        assert_eq!(t.slots.len(), 2_048, "grown to stay at most half full");
        for i in 0..1_000u16 {
            assert_eq!(t.get(base + u64::from(i)), Some(vif(i)));
        }
        assert_eq!(t.get(base + 1_000), None);
        for i in (0..1_000u16).step_by(2) {
            t.remove(base + u64::from(i));
        }
        for i in 0..1_000u16 {
            let want = (i % 2 == 1).then(|| vif(i));
            assert_eq!(t.get(base + u64::from(i)), want, "key {i}");
        }
        t.insert(base + 3, Target::Rules);
        assert_eq!(t.get(base + 3), Some(Target::Rules));
        assert_eq!(t.len, 500);
    }

    #[test]
    #[should_panic(expected = "not a (VLAN, MAC) key")]
    fn the_free_marker_is_refused_as_a_key() {
        MacTable::default().insert(FREE, Target::Rules);
    }

    proptest! {
        /// Any mix of inserts and removals, on keys crowded into few home slots so that
        /// runs wrap and removals shift, agrees with a `HashMap`.
        #[test]
        fn agrees_with_a_hash_map(ops in proptest::collection::vec((any::<bool>(), 0u64..64, any::<u16>()), 0..400)) {
            let mut t = MacTable::default();
            let mut model = HashMap::new();
            for (insert, k, v) in ops {
                // Keys differing in the VLAN bits only: the multiply spreads them, and 64
                // of them in 16–128 slots collide plenty.
                let key = k << 48 | 0x0000_5254_0012_3456;
                if insert {
                    t.insert(key, vif(v));
                    model.insert(key, vif(v));
                } else {
                    t.remove(key);
                    model.remove(&key);
                }
                prop_assert_eq!(t.len, model.len());
                for k in 0..64u64 {
                    let key = k << 48 | 0x0000_5254_0012_3456;
                    prop_assert_eq!(t.get(key), model.get(&key).copied());
                }
            }
        }
    }
}
