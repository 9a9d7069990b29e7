//! Which pool slots one ring pair has lent to the kernel.
//!
//! A slot put on a fill or tx ring leaves Rust's ownership (`Pool::into_raw`); it comes back
//! on the rx or completion ring of the same socket, or not at all if the socket closes
//! first (the kernel keeps part of the fill ring in its own cache and never says which).
//! So each half of a socket keeps a bitmap of what it lent:
//!
//! - turning an address from the kernel back into a `Pkt` (`Pool::from_raw`, `unsafe`) is
//!   done only if its bit was set, so a bad or repeated address from the kernel can never
//!   produce a second handle to a slot;
//! - when the socket closes, everything still marked is returned to the pool, which is how
//!   dropping a port gives back every slot.
//!
//! A bit per slot (16 KiB for a million-slot pool), touched by one thread: a store per
//! packet, no atomics. A list of indexes could not answer "did we lend this one?".

/// Slots lent to the kernel by one ring pair.
#[derive(Debug)]
pub(crate) struct Lent {
    bits: Box<[u64]>,
    count: u32,
}

impl Lent {
    /// For a pool of `capacity` slots, none lent.
    pub(crate) fn new(capacity: usize) -> Lent {
        Lent {
            bits: vec![0; capacity.div_ceil(64)].into_boxed_slice(),
            count: 0,
        }
    }

    /// Slots currently lent.
    #[inline]
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// Record that slot `idx` (a valid index, not lent) was handed to the kernel.
    #[inline]
    pub(crate) fn lend(&mut self, idx: u32) {
        let (w, b) = (idx as usize / 64, idx % 64);
        debug_assert_eq!(self.bits[w] & (1 << b), 0, "slot {idx} lent twice");
        self.bits[w] |= 1 << b;
        self.count += 1;
    }

    /// The kernel gave slot `idx` back: true if it was lent (and is no longer), false for an
    /// index this pair never lent or that is out of range.
    #[inline]
    pub(crate) fn take_back(&mut self, idx: u32) -> bool {
        let (w, b) = (idx as usize / 64, idx % 64);
        match self.bits.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.count -= 1;
                true
            }
            _ => false,
        }
    }

    /// Forget every lent slot and return their indexes.
    pub(crate) fn take_all(&mut self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.count as usize);
        for (w, word) in self.bits.iter_mut().enumerate() {
            let mut x = core::mem::take(word);
            while x != 0 {
                out.push(w as u32 * 64 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        self.count = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lend_take_back_and_take_all() {
        let mut l = Lent::new(130);
        for i in [0, 63, 64, 129] {
            l.lend(i);
        }
        assert_eq!(l.count(), 4);
        assert!(l.take_back(63));
        assert!(!l.take_back(63), "given back twice");
        assert!(!l.take_back(5), "never lent");
        assert!(!l.take_back(1000), "out of range");
        assert_eq!(l.count(), 3);
        assert_eq!(l.take_all(), vec![0, 64, 129]);
        assert_eq!(l.count(), 0);
        assert!(l.take_all().is_empty());
    }
}
