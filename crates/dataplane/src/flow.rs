//! Flow keys: the addresses, protocol and ports of an IP packet, for demux rules and ECMP.
//!
//! Read straight from the bytes of a packet that has passed its L3 checks; an absent or
//! unreadable L4 header gives ports 0 (an ESP packet, say). Only the packet's own bytes
//! count, never the link-layer padding after it: [`flow_key_v4`] and [`flow_key_v6`] (which
//! demux uses on whole frames) read within the total or payload length; [`tuple_v4`] and
//! [`hash_v4`] (the forwarding path's) are given the datagram alone, as the IP nodes trim it.
//! Every fragment gives ports 0, the first one included although it carries them: otherwise
//! the first fragment would hash (and match rules) differently from the rest, and one
//! datagram would be split over ECMP paths or VRs (Linux's flow dissector does the same).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vrhost_wire::ip::Protocol;
use vrhost_wire::{ipv4, ipv6};

use crate::vr::FlowKey;

/// The L3 class of a frame, found by demux and kept in [`crate::Meta::class`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    /// Not IPv4, IPv6 or ARP.
    Other = 0,
    /// IPv4.
    Ipv4 = 1,
    /// IPv6.
    Ipv6 = 2,
    /// ARP.
    Arp = 3,
}

/// In [`crate::Meta::class`] beside the class: the frame's destination MAC was a group
/// (broadcast or multicast) address. A unicast datagram in such a frame is never forwarded
/// (RFC 1812 §5.3.4); demux notes it so that the IP nodes need not read the MAC again.
pub const L2_GROUP: u8 = 0x80;

impl Class {
    /// From the stored byte (its [`L2_GROUP`] bit ignored).
    #[inline]
    pub const fn from_u8(v: u8) -> Class {
        match v & !L2_GROUP {
            1 => Class::Ipv4,
            2 => Class::Ipv6,
            3 => Class::Arp,
            _ => Class::Other,
        }
    }
}

fn ports(l4: &[u8], protocol: u8) -> (u16, u16) {
    let has_ports = matches!(
        Protocol(protocol),
        Protocol::TCP | Protocol::UDP | Protocol(132) // SCTP
    );
    if has_ports && l4.len() >= 4 {
        (
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        )
    } else {
        (0, 0)
    }
}

/// The flow key of an IPv4 packet (`l3` = the IPv4 header onwards). `None` if the header is
/// unreadable.
pub fn flow_key_v4(l3: &[u8]) -> Option<FlowKey> {
    let p = ipv4::Packet::new_unchecked(l3);
    p.check_header().ok()?;
    let protocol = p.protocol().0;
    let hl = p.header_len();
    // A total length past the buffer (a malformed packet, dropped later) is cut to it.
    let end = usize::from(p.total_len()).clamp(hl, l3.len());
    let (src_port, dst_port) = if !p.is_fragment() {
        ports(&l3[hl..end], protocol)
    } else {
        (0, 0)
    };
    Some(FlowKey {
        src: IpAddr::V4(p.src_addr()),
        dst: IpAddr::V4(p.dst_addr()),
        protocol,
        src_port,
        dst_port,
    })
}

/// The flow key of an IPv6 packet, after walking its extension headers. `None` if the header
/// or the chain is unreadable.
pub fn flow_key_v6(l3: &[u8]) -> Option<FlowKey> {
    let total = ipv6::Packet::new_checked(l3).ok()?.total_len();
    // The chain is walked, and the ports read, within the payload length.
    let l3 = &l3[..total];
    let p = ipv6::Packet::new_unchecked(l3);
    let ul = p.upper_layer().ok()?;
    // An atomic fragment (RFC 6946) is a whole datagram: it keeps its ports.
    let (src_port, dst_port) = if ul.fragment.is_none_or(|f| f.is_atomic()) {
        ports(l3.get(ul.offset..)?, ul.protocol.0)
    } else {
        (0, 0)
    };
    Some(FlowKey {
        src: IpAddr::V6(p.src_addr()),
        dst: IpAddr::V6(p.dst_addr()),
        protocol: ul.protocol.0,
        src_port,
        dst_port,
    })
}

/// A 32-bit hash of a flow (for ECMP: one flow, one path). Symmetric in nothing; stable
/// across runs (no random seed) so paths don't move when vrhost restarts.
#[inline]
pub fn hash(k: &FlowKey) -> u32 {
    let a = match k.src {
        IpAddr::V4(a) => u64::from(a.to_bits()),
        IpAddr::V6(a) => fold(a),
    };
    let b = match k.dst {
        IpAddr::V4(a) => u64::from(a.to_bits()),
        IpAddr::V6(a) => fold(a),
    };
    let c = u64::from(k.protocol) << 32 | u64::from(k.src_port) << 16 | u64::from(k.dst_port);
    mix(a ^ mix(b ^ mix(c))) as u32
}

/// Hash of an IPv4 5-tuple straight from the header bytes (the forwarding path's ECMP hash):
/// the same fields as [`flow_key_v4`] (ports 0 for fragments and port-less protocols), read
/// without building a [`FlowKey`] — a quarter of the cost, and the data plane hashes every
/// packet that takes an ECMP route. Stable, but not equal to [`hash`] of the flow key.
#[inline]
pub fn hash_v4(l3: &[u8]) -> u32 {
    if l3.len() < 20 {
        return 0;
    }
    hash_tuple_v4(tuple_v4(l3))
}

/// The forwarding path's IPv6 ECMP hash: [`hash`] of the packet's [`flow_key_v6`], 0 if it
/// has none.
#[inline]
pub fn hash_v6(l3: &[u8]) -> u32 {
    flow_key_v6(l3).map_or(0, |k| hash(&k))
}

/// The fields [`hash_v4`] covers, as one number: both addresses in the high 64 bits,
/// protocol and ports in the low (byte order as in the header; 0 if `l3` is shorter than an
/// IPv4 header). `l3`: the datagram, without link-layer padding. The flow cache's 5-tuple
/// key: two packets with the same tuple take the same ECMP member, so a cached decision
/// holds for the whole flow.
#[inline]
pub fn tuple_v4(l3: &[u8]) -> u128 {
    if l3.len() < 20 {
        return 0;
    }
    let word = |i: usize| u32::from_ne_bytes([l3[i], l3[i + 1], l3[i + 2], l3[i + 3]]);
    let hl = usize::from(l3[0] & 0x0f) * 4;
    let protocol = l3[9];
    let fragment = u16::from_be_bytes([l3[6], l3[7]]) & 0x3fff != 0;
    let has_ports = matches!(protocol, 6 | 17 | 132);
    let ports = if !fragment && has_ports && hl >= 20 && l3.len() >= hl + 4 {
        word(hl)
    } else {
        0
    };
    let addrs = u64::from(word(12)) << 32 | u64::from(word(16));
    u128::from(addrs) << 64 | u128::from(u64::from(protocol) << 32 | u64::from(ports))
}

/// [`hash_v4`] of a tuple from [`tuple_v4`].
#[inline]
pub fn hash_tuple_v4(t: u128) -> u32 {
    mix((t >> 64) as u64 ^ mix(t as u64)) as u32
}

/// An IPv6 5-tuple as the flow cache's key: the fields of [`flow_key_v6`], which the ECMP
/// hash covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tuple6 {
    /// Source address.
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// Protocol and ports (protocol << 32 | source port << 16 | destination port), or
    /// `u64::MAX` for a packet whose chain could not be read (hashed as 0, whatever its
    /// source: the key is then the destination alone).
    pub rest: u64,
}

/// The [`Tuple6`] of an IPv6 packet to `dst` (`l3` = the IPv6 header onwards).
#[inline]
pub fn tuple_v6(l3: &[u8], dst: Ipv6Addr) -> Tuple6 {
    match flow_key_v6(l3) {
        Some(FlowKey {
            src: IpAddr::V6(src),
            dst: IpAddr::V6(d),
            protocol,
            src_port,
            dst_port,
        }) => Tuple6 {
            src: src.to_bits(),
            dst: d.to_bits(),
            rest: u64::from(protocol) << 32 | u64::from(src_port) << 16 | u64::from(dst_port),
        },
        _ => Tuple6 {
            src: 0,
            dst: dst.to_bits(),
            rest: u64::MAX,
        },
    }
}

#[inline]
fn fold(a: Ipv6Addr) -> u64 {
    let v = a.to_bits();
    (v >> 64) as u64 ^ v as u64
}

#[inline]
pub(crate) fn mix(mut x: u64) -> u64 {
    // splitmix64 finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `Ipv4Addr` of 4 bytes at `b[off..]`.
#[inline(always)]
pub(crate) fn v4_at(b: &[u8], off: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[off], b[off + 1], b[off + 2], b[off + 3])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header (no options) and the first 4 bytes of a UDP header.
    fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, ttl: u8, frag: u16) -> Vec<u8> {
        let mut b = vec![0x45, 0, 0, 28, 0x12, 0x34, 0, 0, ttl, 17, 0, 0];
        b[6..8].copy_from_slice(&frag.to_be_bytes());
        b.extend_from_slice(&src);
        b.extend_from_slice(&dst);
        b.extend_from_slice(&sport.to_be_bytes());
        b.extend_from_slice(&dport.to_be_bytes());
        b
    }

    #[test]
    fn the_ipv4_tuple_is_the_five_fields_the_ecmp_hash_covers() {
        let base = udp4([10, 0, 0, 1], [192, 0, 2, 9], 1000, 53, 64, 0);
        let t = tuple_v4(&base);
        assert_eq!(hash_tuple_v4(t), hash_v4(&base));
        // Any of the five fields changes the tuple.
        for other in [
            udp4([10, 0, 0, 2], [192, 0, 2, 9], 1000, 53, 64, 0),
            udp4([10, 0, 0, 1], [192, 0, 2, 8], 1000, 53, 64, 0),
            udp4([10, 0, 0, 1], [192, 0, 2, 9], 1001, 53, 64, 0),
            udp4([10, 0, 0, 1], [192, 0, 2, 9], 1000, 54, 64, 0),
        ] {
            assert_ne!(tuple_v4(&other), t);
        }
        let mut tcp = base.clone();
        tcp[9] = 6;
        assert_ne!(tuple_v4(&tcp), t);
        // Other header fields do not.
        assert_eq!(
            tuple_v4(&udp4([10, 0, 0, 1], [192, 0, 2, 9], 1000, 53, 3, 0)),
            t
        );
        // A fragment (first or later) has ports 0, as the hash does; so has ICMP.
        let first = udp4([10, 0, 0, 1], [192, 0, 2, 9], 1000, 53, 64, 0x2000);
        let later = udp4([10, 0, 0, 1], [192, 0, 2, 9], 7, 9, 64, 5);
        assert_eq!(tuple_v4(&first), tuple_v4(&later));
        assert_eq!(tuple_v4(&first) as u64, 17 << 32);
        let mut icmp = base.clone();
        icmp[9] = 1;
        assert_eq!(tuple_v4(&icmp) as u64, 1 << 32);
        assert_eq!(tuple_v4(&base[..19]), 0);
    }

    #[test]
    fn the_ipv6_tuple_keeps_the_flow_key_or_falls_back_to_the_destination() {
        let dst = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9);
        let src = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
        let mut b = vec![0u8; 48];
        b[0] = 0x60;
        b[4..6].copy_from_slice(&8u16.to_be_bytes());
        b[6] = 17;
        b[7] = 64;
        b[8..24].copy_from_slice(&src.octets());
        b[24..40].copy_from_slice(&dst.octets());
        b[40..42].copy_from_slice(&1000u16.to_be_bytes());
        b[42..44].copy_from_slice(&53u16.to_be_bytes());
        let t = tuple_v6(&b, dst);
        assert_eq!((t.src, t.dst), (src.to_bits(), dst.to_bits()));
        assert_eq!(t.rest, 17 << 32 | 1000 << 16 | 53);
        // Unreadable: the destination alone, with a rest no readable packet has.
        let bad = tuple_v6(&b[..20], dst);
        assert_eq!((bad.src, bad.dst, bad.rest), (0, dst.to_bits(), u64::MAX));
    }
}
