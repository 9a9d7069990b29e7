//! Flow keys: the addresses, protocol and ports of an IP packet, for demux rules and ECMP.
//!
//! Read straight from the bytes of a packet that has passed its L3 checks; an absent or
//! unreadable L4 header gives ports 0 (an ESP packet, say). Every fragment gives ports 0,
//! the first one included although it carries them: otherwise the first fragment would hash
//! (and match rules) differently from the rest, and one datagram would be split over ECMP
//! paths or VRs (Linux's flow dissector does the same).

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

impl Class {
    /// From the stored byte.
    #[inline]
    pub const fn from_u8(v: u8) -> Class {
        match v {
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
    let (src_port, dst_port) = if !p.is_fragment() {
        ports(&l3[p.header_len()..], protocol)
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
    let p = ipv6::Packet::new_checked(l3).ok()?;
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
    mix(addrs ^ mix(u64::from(protocol) << 32 | u64::from(ports))) as u32
}

#[inline]
fn fold(a: Ipv6Addr) -> u64 {
    let v = a.to_bits();
    (v >> 64) as u64 ^ v as u64
}

#[inline]
fn mix(mut x: u64) -> u64 {
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
