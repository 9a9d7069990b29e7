//! The Internet checksum (RFC 1071), pseudo-header sums, and incremental update (RFC 1624).
//!
//! Sums are kept as a folded 16-bit one's-complement value (`u16`, not inverted) so that partial
//! sums compose with [`combine`]; a header's checksum *field* is the inverse, `!sum`.
//!
//! The incremental form matters on the forwarding path: decrementing a TTL or rewriting an
//! address touches one or a few 16-bit words, and re-summing a 20-byte header per packet would
//! cost more than the rest of the rewrite. RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, is used
//! (not eqn. 2 of RFC 1141, which yields 0x0000 instead of 0xFFFF in one corner case).

use core::net::{Ipv4Addr, Ipv6Addr};

/// Fold a 32-bit accumulator into 16 bits with end-around carry.
#[inline]
fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// One's-complement sum of `data` taken as big-endian 16-bit words (an odd last byte is padded
/// with zero). Not inverted.
pub fn data(data: &[u8]) -> u16 {
    // Sum 32 bits at a time into a u64: far fewer carries to fold, and the compiler vectorises it.
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc += u64::from(u32::from_be_bytes(tail));
    // Fold 64 → 32 → 16.
    let acc = (acc & 0xffff_ffff) + (acc >> 32);
    let acc = (acc & 0xffff_ffff) + (acc >> 32);
    fold(((acc & 0xffff) + (acc >> 16)) as u32)
}

/// Combine partial sums (e.g. a pseudo-header sum and a payload sum).
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u32::from(s)).sum())
}

/// Sum of the IPv4 pseudo header (RFC 768/793): addresses, zero, protocol, upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let mut b = [0u8; 12];
    b[0..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    b[9] = protocol;
    b[10..12].copy_from_slice(&length.to_be_bytes());
    data(&b)
}

/// Sum of the IPv6 pseudo header (RFC 8200 §8.1): addresses, 32-bit upper-layer length, next
/// header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut b = [0u8; 40];
    b[0..16].copy_from_slice(&src.octets());
    b[16..32].copy_from_slice(&dst.octets());
    b[32..36].copy_from_slice(&length.to_be_bytes());
    b[39] = next_header;
    data(&b)
}

/// RFC 1624 eqn. 3: the new checksum *field* after one 16-bit word of the covered data changed
/// from `old` to `new`. `check` is the field as it is in the header (already inverted).
#[inline]
pub fn update_u16(check: u16, old: u16, new: u16) -> u16 {
    // ~HC' = ~HC + ~m + m'
    !fold(u32::from(!check) + u32::from(!old) + u32::from(new))
}

/// As [`update_u16`] for a 32-bit field (an IPv4 address): two words at once.
#[inline]
pub fn update_u32(check: u16, old: u32, new: u32) -> u16 {
    let acc = u32::from(!check)
        + u32::from(!(old >> 16) as u16)
        + u32::from(!(old as u16))
        + (new >> 16)
        + (new & 0xffff);
    !fold(acc)
}

/// As [`update_u16`] for a field of any even length (an IPv6 address: 16 bytes). `old` and `new`
/// must have the same, even, length; an odd trailing byte is treated as padded with zero.
pub fn update_bytes(check: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert_eq!(old.len(), new.len());
    // ~HC' = ~HC + sum(~m) + sum(m') = ~HC + ~sum(m) + sum(m')   (one's complement arithmetic)
    !fold(u32::from(!check) + u32::from(!data(old)) + u32::from(data(new)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 §3's worked example: the words 0001 f203 f4f5 f6f7 sum to 0xddf2.
    #[test]
    fn rfc1071_example() {
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&b), 0xddf2);
        // Odd lengths pad with zero: 0x01 alone is the word 0x0100.
        assert_eq!(data(&[0x01]), 0x0100);
        assert_eq!(data(&[]), 0);
    }

    #[test]
    fn combine_equals_whole() {
        let b: [u8; 10] = [0x45, 0, 0, 0x54, 0xab, 0xcd, 0x40, 0, 0x40, 0x01];
        assert_eq!(combine(&[data(&b[..4]), data(&b[4..])]), data(&b));
    }

    /// RFC 1624 §4's example: a header with checksum 0xDD2F (~sum = 0x22D0) whose word
    /// 0x5555 becomes 0x3285 gets checksum 0x0000 by eqn. 3 — not 0xFFFF as eqn. 2 gives.
    #[test]
    fn rfc1624_example() {
        assert_eq!(update_u16(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    /// Incremental and full recomputation agree on random headers and random rewrites.
    #[test]
    fn incremental_matches_full() {
        use proptest::prelude::*;
        proptest!(|(mut hdr in proptest::array::uniform20(any::<u8>()), w in 0usize..10,
                    nw in any::<u16>(), a in 0usize..3, na in any::<u32>())| {
            hdr[10] = 0; hdr[11] = 0;
            let check = !data(&hdr);
            hdr[10..12].copy_from_slice(&check.to_be_bytes());

            // One word.
            let w = if w == 5 { 4 } else { w }; // not the checksum word itself
            let old = u16::from_be_bytes([hdr[2 * w], hdr[2 * w + 1]]);
            let inc = update_u16(check, old, nw);
            hdr[2 * w..2 * w + 2].copy_from_slice(&nw.to_be_bytes());
            hdr[10..12].copy_from_slice(&inc.to_be_bytes());
            prop_assert_eq!(data(&hdr), 0xffff, "header must verify after update");

            // A 32-bit field at offset 12 or 16 (like an address).
            let off = [12usize, 16, 16][a];
            let old = u32::from_be_bytes(hdr[off..off + 4].try_into().unwrap());
            let inc2 = update_u32(inc, old, na);
            let mut hdr2 = hdr;
            hdr2[off..off + 4].copy_from_slice(&na.to_be_bytes());
            hdr2[10..12].copy_from_slice(&inc2.to_be_bytes());
            prop_assert_eq!(data(&hdr2), 0xffff);

            // The byte-slice form gives the same field.
            let inc3 = update_bytes(inc, &hdr[off..off + 4], &hdr2[off..off + 4]);
            let mut hdr3 = hdr2;
            hdr3[10..12].copy_from_slice(&inc3.to_be_bytes());
            prop_assert_eq!(data(&hdr3), 0xffff);
        });
    }
}
