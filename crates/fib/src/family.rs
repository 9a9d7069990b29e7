//! Address families as types, and the integer keys the trie walks.
//!
//! The table is written once, generic over a [`Family`]; IPv4 and IPv6 differ only in key width
//! and in how many bits the direct-pointing top level resolves ([`Family::TOP_BITS`]). Keys are
//! plain unsigned integers (`u32`, `u128`) with bit 0 of the address as the most significant bit,
//! so "the 6 bits at depth d" is a shift and a mask.

use core::fmt::{Debug, Display};
use core::hash::Hash;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

/// An address as the trie sees it: an unsigned integer, most significant bit first.
pub trait Key: Copy + Ord + Eq + Hash + Debug + Send + Sync + 'static {
    /// Width in bits (32 or 128).
    const BITS: u8;
    /// The 6 bits starting at bit `depth` (0 = most significant), as an index 0..64. Bits past
    /// the end of the key read as zero, so a last, partial stride needs no special case.
    fn bits6(self, depth: u8) -> usize;
    /// The top `n` bits as an index (n ≤ 24).
    fn top(self, n: u8) -> usize;
    /// Only the top `len` bits kept (the network address of the covering /len).
    fn masked(self, len: u8) -> Self;
    /// The highest key in the /len starting at `self` (host bits all ones).
    fn last(self, len: u8) -> Self;
    /// The key whose top `n` bits are `index` and the rest zero (inverse of [`Key::top`]).
    fn from_top(index: usize, n: u8) -> Self;
    /// `self` with the 6 bits at `depth` replaced by `v` (bits past the end ignored).
    fn with_bits6(self, depth: u8, v: usize) -> Self;
    /// From the top `BITS` bits of a `u128` (so a random `u128` gives a random key).
    fn from_u128_bits(x: u128) -> Self;
    /// Into the top `BITS` bits of a `u128` (inverse of [`Key::from_u128_bits`]).
    fn to_u128_bits(self) -> u128;
    /// Is any bit below the top `len` set?
    fn has_host_bits(self, len: u8) -> bool {
        self.masked(len) != self
    }
}

macro_rules! impl_key {
    ($t:ty) => {
        impl Key for $t {
            const BITS: u8 = <$t>::BITS as u8;

            #[inline(always)]
            fn bits6(self, depth: u8) -> usize {
                const W: u32 = <$t>::BITS;
                let (d, end) = (u32::from(depth), u32::from(depth) + 6);
                if end <= W {
                    ((self >> (W - end)) & 63) as usize
                } else if d < W {
                    ((self << (end - W)) & 63) as usize
                } else {
                    0
                }
            }

            #[inline(always)]
            fn top(self, n: u8) -> usize {
                (self >> (<$t>::BITS - u32::from(n))) as usize
            }

            #[inline]
            fn masked(self, len: u8) -> Self {
                let len = u32::from(len).min(<$t>::BITS);
                if len == 0 {
                    0
                } else {
                    self & (<$t>::MAX << (<$t>::BITS - len))
                }
            }

            #[inline]
            fn last(self, len: u8) -> Self {
                let len = u32::from(len);
                if len >= <$t>::BITS {
                    self
                } else {
                    self | (<$t>::MAX >> len)
                }
            }

            #[inline]
            fn from_u128_bits(x: u128) -> Self {
                (x >> (128 - <$t>::BITS)) as $t
            }

            #[inline]
            fn to_u128_bits(self) -> u128 {
                (self as u128) << (128 - <$t>::BITS)
            }

            #[inline]
            fn from_top(index: usize, n: u8) -> Self {
                (index as $t) << (<$t>::BITS - u32::from(n))
            }

            #[inline]
            fn with_bits6(self, depth: u8, v: usize) -> Self {
                const W: u32 = <$t>::BITS;
                let (d, end) = (u32::from(depth), u32::from(depth) + 6);
                let v = v as $t & 63;
                if end <= W {
                    let sh = W - end;
                    (self & !(63 << sh)) | (v << sh)
                } else if d < W {
                    let sh = end - W;
                    let m = (63 >> sh) as $t;
                    (self & !m) | ((v >> sh) & m)
                } else {
                    self
                }
            }
        }
    };
}
impl_key!(u32);
impl_key!(u128);

/// An address family: IPv4 ([`V4`]) or IPv6 ([`V6`]).
pub trait Family: Send + Sync + 'static + Debug {
    /// The address type (`Ipv4Addr`, `Ipv6Addr`).
    type Addr: Copy + Eq + Hash + Debug + Display + FromStr + Send + Sync;
    /// The integer key the trie walks.
    type Key: Key;
    /// Bits resolved by the direct-pointing top array. 18 for IPv4 (a /24 then needs one trie
    /// level: 18 + 6 = 24, Poptrie's choice; 1 MiB). 20 for IPv6 (4 MiB, mostly never touched
    /// since all global unicast space sits in 2000::/3): measured against 16 with `vrbench fib`
    /// on the 200 k table, it saves one node visit on most lookups (a /32 is then resolved at
    /// 20 + 6 + 6 = 32) and takes routed batch lookups from 35 to 42 M/s. (Since then the
    /// first six bits after it are a block entry, not a node: see `Table`.)
    const TOP_BITS: u8;
    /// "IPv4" or "IPv6", for messages.
    const NAME: &'static str;
    /// Address → key.
    fn key(a: Self::Addr) -> Self::Key;
    /// Key → address.
    fn addr(k: Self::Key) -> Self::Addr;
}

/// IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum V4 {}

/// IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum V6 {}

impl Family for V4 {
    type Addr = Ipv4Addr;
    type Key = u32;
    const TOP_BITS: u8 = 18;
    const NAME: &'static str = "IPv4";
    #[inline(always)]
    fn key(a: Ipv4Addr) -> u32 {
        a.to_bits()
    }
    #[inline(always)]
    fn addr(k: u32) -> Ipv4Addr {
        Ipv4Addr::from_bits(k)
    }
}

impl Family for V6 {
    type Addr = Ipv6Addr;
    type Key = u128;
    const TOP_BITS: u8 = 20;
    const NAME: &'static str = "IPv6";
    #[inline(always)]
    fn key(a: Ipv6Addr) -> u128 {
        a.to_bits()
    }
    #[inline(always)]
    fn addr(k: u128) -> Ipv6Addr {
        Ipv6Addr::from_bits(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(
        clippy::unusual_byte_groupings,
        reason = "grouped by 6-bit stride on purpose"
    )]
    fn bits6_and_padding() {
        let k: u32 = 0b101010_111111_000000_110011_010101_01;
        assert_eq!(k.bits6(0), 0b101010);
        assert_eq!(k.bits6(6), 0b111111);
        assert_eq!(k.bits6(18), 0b110011);
        // The last stride is padded with zeros: bits 30,31 then four zeros.
        assert_eq!(k.bits6(30), 0b010000);
        assert_eq!(k.top(18), (k >> 14) as usize);
        let k6: u128 = 0xffff_u128 | (0b11 << 126);
        assert_eq!(k6.bits6(0), 0b110000);
        assert_eq!(k6.bits6(124), 0b111100);
    }

    #[test]
    fn with_bits6_inverts_bits6() {
        for depth in [0u8, 6, 18, 24, 26, 30] {
            for v in 0..64 {
                let k = 0xdead_beef_u32.with_bits6(depth, v);
                let expect = if depth == 30 { v & 0b110000 } else { v };
                assert_eq!(k.bits6(depth), expect, "depth {depth} v {v}");
            }
        }
        for depth in [16u8, 124] {
            for v in 0..64 {
                let k = u128::MAX.with_bits6(depth, v);
                let expect = if depth == 124 { v & 0b111100 } else { v };
                assert_eq!(k.bits6(depth), expect);
            }
        }
    }

    #[test]
    fn mask_and_last() {
        assert_eq!(0x0a01_0203_u32.masked(8), 0x0a00_0000);
        assert_eq!(0x0a01_0203_u32.masked(0), 0);
        assert_eq!(0x0a01_0203_u32.masked(32), 0x0a01_0203);
        assert_eq!(0x0a00_0000_u32.last(8), 0x0aff_ffff);
        assert_eq!(0u32.last(0), u32::MAX);
        assert_eq!(u32::from_top(3, 18), 3 << 14);
        assert!(0x0a01_0000_u32.has_host_bits(8));
    }
}
