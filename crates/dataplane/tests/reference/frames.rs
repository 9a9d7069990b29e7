//! Frames for the reference tests, described structurally (mostly valid, with targeted
//! faults), built from that description, and generated.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

use crate::model::*;

// ---------------------------------------------------------------------------------------
// Frames, described structurally and built from that description.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
pub(crate) enum Cut {
    None,
    /// Keep this many bytes.
    To(usize),
    /// Drop this many from the end.
    Less(usize),
}

#[derive(Debug, Clone)]
pub(crate) enum Body {
    V4(V4Spec),
    V6(V6Spec),
    /// An ARP request cut to this many bytes.
    Arp(usize),
    Other(u16),
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Len {
    Right,
    Short(u16),
    Long(u16),
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Csum {
    Right,
    Wrong,
    /// Right, with the ident picked so that the checksum after the TTL decrement is 0x0000
    /// (RFC 1624 §3: an incremental update must still give that, not 0xffff).
    ZeroAfterDecrement,
    /// The ident picked so that the checksum is 0x0000, sent as 0xffff (the same value in
    /// one's complement, valid by RFC 1071's check).
    NegativeZero,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Ihl {
    Five,
    /// Options: 32-bit words, kind (0 NOPs, 1 router alert, 2 record route, 3 a copied
    /// experimental option).
    Options(u8, u8),
    /// This IHL (0..=4).
    Bad(u8),
    Fifteen,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum L4 {
    Udp,
    Tcp,
    Icmp(u8, u8),
    /// ICMP (ICMPv6) without a single byte of it: no type to tell an error by.
    IcmpEmpty,
    /// IPv6 "no next header" (59): the payload directly.
    NoNext,
}

#[derive(Debug, Clone)]
pub(crate) struct V4Spec {
    pub(crate) version: u8,
    pub(crate) ihl: Ihl,
    pub(crate) len: Len,
    pub(crate) csum: Csum,
    pub(crate) tos: u8,
    pub(crate) df: bool,
    pub(crate) mf: bool,
    /// In 8-byte units.
    pub(crate) offset: u16,
    pub(crate) ttl: u8,
    pub(crate) l4: L4,
    pub(crate) src: Ipv4Addr,
    pub(crate) dst: Ipv4Addr,
    pub(crate) payload: usize,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Ext {
    /// Hop-by-hop options, with a router alert or padding.
    HopByHop(bool),
    /// Routing header of this type and segments left.
    Routing(u8, u8),
    /// Fragment header: offset (8-byte units), M flag.
    Fragment(u16, bool),
    DestOpts,
    /// A destination options header whose length runs past the packet.
    TooLong,
    /// The chain announces one more header and the packet ends.
    Cut,
}

#[derive(Debug, Clone)]
pub(crate) struct V6Spec {
    pub(crate) version: u8,
    pub(crate) len: Len,
    pub(crate) tc: u8,
    pub(crate) hop: u8,
    pub(crate) exts: Vec<Ext>,
    pub(crate) l4: L4,
    pub(crate) src: Ipv6Addr,
    pub(crate) dst: Ipv6Addr,
    pub(crate) payload: usize,
}

/// Payload bytes: "REF!" and the frame's tag first, where there is room.
pub(crate) fn payload(tag: u32, n: usize) -> Vec<u8> {
    let mut p: Vec<u8> = b"REF!".iter().copied().chain(tag.to_be_bytes()).collect();
    p.extend((0..n.saturating_sub(8)).map(|i| (i as u32 * 31 + tag) as u8));
    p.truncate(n);
    p
}

/// Largest datagram built: the untagged VIFs' MTU.
pub(crate) const MAX_DGRAM: usize = 1500;

pub(crate) fn ip4_options(words: u8, kind: u8) -> Vec<u8> {
    let n = usize::from(words) * 4;
    let mut o = match kind {
        0 => vec![1; n],
        1 => {
            let mut o = vec![0x94, 4, 0, 0];
            o.resize(n, 1);
            o
        }
        2 => {
            let mut o = vec![7, (n - 1) as u8, 4];
            o.resize(n - 1, 0);
            o.push(0);
            o
        }
        _ => {
            let mut o = vec![0x9e, n as u8];
            o.resize(n, 0);
            o
        }
    };
    o.truncate(n);
    o
}

pub(crate) fn l4_header(l4: L4) -> (u8, Vec<u8>) {
    match l4 {
        L4::Udp => (17, vec![0x30, 0x39, 0x00, 0x35, 0, 0, 0, 0]),
        L4::Tcp => (
            6,
            vec![
                0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0,
            ],
        ),
        L4::Icmp(t, c) => (0, vec![t, c, 0, 0, 0, 0, 0, 0]),
        L4::IcmpEmpty => (0, vec![]),
        L4::NoNext => (59, vec![]),
    }
}

/// Fill in the L4 length and checksum (UDP, TCP, ICMP/ICMPv6) of `seg` (header + payload).
pub(crate) fn finish_l4(l4: L4, seg: &mut [u8], pseudo: impl Fn(u8, usize) -> Vec<u8>, v6: bool) {
    let (at, ph) = match l4 {
        L4::Udp => {
            let n = seg.len() as u16;
            seg[4..6].copy_from_slice(&n.to_be_bytes());
            (6, Some(pseudo(17, seg.len())))
        }
        L4::Tcp => (16, Some(pseudo(6, seg.len()))),
        L4::Icmp(..) if v6 => (2, Some(pseudo(58, seg.len()))),
        L4::Icmp(..) => (2, None),
        L4::NoNext | L4::IcmpEmpty => return,
    };
    let c = l4_checksum(&ph.unwrap_or_default(), seg);
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

pub(crate) fn build_v4(s: &V4Spec, tag: u32) -> Vec<u8> {
    let opts = match s.ihl {
        Ihl::Options(w, k) => ip4_options(w, k),
        _ => vec![],
    };
    let hl = 20 + opts.len();
    let (mut proto, mut seg) = l4_header(s.l4);
    if proto == 0 {
        proto = 1;
    }
    if proto == 59 {
        proto = 17;
    }
    let room = MAX_DGRAM - hl - seg.len();
    if !matches!(s.l4, L4::IcmpEmpty) {
        seg.extend(payload(tag, s.payload.min(room)));
    }
    let (sa, da) = (s.src.octets(), s.dst.octets());
    finish_l4(s.l4, &mut seg, |p, n| pseudo4(&sa, &da, p, n), false);
    let mut d = vec![0u8; hl];
    d.extend_from_slice(&seg);
    let nibble = match s.ihl {
        Ihl::Five | Ihl::Options(..) => (hl / 4) as u8,
        Ihl::Bad(n) => n,
        Ihl::Fifteen => 15,
    };
    d[0] = s.version << 4 | nibble;
    d[1] = s.tos;
    let tot = match s.len {
        Len::Right => d.len(),
        Len::Short(k) => d.len().saturating_sub(usize::from(k)),
        Len::Long(k) => d.len() + usize::from(k),
    };
    d[2..4].copy_from_slice(&(tot as u16).to_be_bytes());
    d[4..6].copy_from_slice(&(0x5000u16 ^ tag as u16).to_be_bytes());
    let flags = u16::from(s.df) << 14 | u16::from(s.mf) << 13 | s.offset;
    d[6..8].copy_from_slice(&flags.to_be_bytes());
    d[8] = s.ttl;
    d[9] = proto;
    d[12..16].copy_from_slice(&sa);
    d[16..20].copy_from_slice(&da);
    d[20..hl].copy_from_slice(&opts);
    // The header checksum covers what the IHL says (as far as there are bytes).
    let covered = (usize::from(nibble) * 4).clamp(20, d.len());
    let zero_at = |d: &mut Vec<u8>, ttl: u8| {
        // The ident that makes the header sum 0xffff (checksum 0x0000) with this TTL.
        d[4] = 0;
        d[5] = 0;
        d[8] = ttl;
        d[10] = 0;
        d[11] = 0;
        let sum = ones_sum(&d[..covered]);
        d[4..6].copy_from_slice(&(0xffff - sum).to_be_bytes());
        d[8] = s.ttl;
    };
    match s.csum {
        Csum::ZeroAfterDecrement if s.ttl > 0 => zero_at(&mut d, s.ttl - 1),
        Csum::NegativeZero => zero_at(&mut d, s.ttl),
        _ => {}
    }
    d[10] = 0;
    d[11] = 0;
    let c = !ones_sum(&d[..covered]);
    let c = match s.csum {
        Csum::Wrong => c ^ 0x5a5a,
        Csum::NegativeZero if c == 0 => 0xffff,
        _ => c,
    };
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d
}

pub(crate) fn ext_type(e: Ext) -> u8 {
    match e {
        Ext::HopByHop(_) => 0,
        Ext::Routing(..) => 43,
        Ext::Fragment(..) => 44,
        Ext::DestOpts | Ext::TooLong | Ext::Cut => 60,
    }
}

pub(crate) fn build_v6(s: &V6Spec, tag: u32) -> Vec<u8> {
    let (mut nh, mut body) = l4_header(s.l4);
    if nh == 0 {
        nh = 58;
    }
    let ext_len: usize = s.exts.len() * 24;
    let room = MAX_DGRAM - 40 - ext_len - body.len();
    if !matches!(s.l4, L4::IcmpEmpty) {
        body.extend(payload(tag, s.payload.min(room)));
    }
    let (sa, da) = (s.src.octets(), s.dst.octets());
    finish_l4(s.l4, &mut body, |p, n| pseudo6(&sa, &da, p, n), true);
    for &e in s.exts.iter().rev() {
        let mut h = match e {
            Ext::HopByHop(true) => vec![nh, 0, 5, 2, 0, 0, 1, 0],
            Ext::HopByHop(false) | Ext::DestOpts => vec![nh, 0, 1, 4, 0, 0, 0, 0],
            Ext::Routing(t, left) => {
                let mut h = vec![nh, 2, t, left, 0, 0, 0, 0];
                h.extend_from_slice(&db8(0x100, 0x99).octets());
                h
            }
            Ext::Fragment(off, m) => {
                let f = off << 3 | u16::from(m);
                let mut h = vec![nh, 0];
                h.extend_from_slice(&f.to_be_bytes());
                h.extend_from_slice(&(0x5000_0000 | tag).to_be_bytes());
                h
            }
            Ext::TooLong => vec![nh, 255, 1, 4, 0, 0, 0, 0],
            Ext::Cut => {
                body.clear();
                nh = 60;
                continue;
            }
        };
        h.extend_from_slice(&body);
        body = h;
        nh = ext_type(e);
    }
    let plen = match s.len {
        Len::Right => body.len(),
        Len::Short(k) => body.len().saturating_sub(usize::from(k)),
        Len::Long(k) => body.len() + usize::from(k),
    };
    let mut p = vec![s.version << 4 | s.tc >> 4, s.tc << 4, 0x12, 0x34];
    p.extend_from_slice(&(plen as u16).to_be_bytes());
    p.push(nh);
    p.push(s.hop);
    p.extend_from_slice(&sa);
    p.extend_from_slice(&da);
    p.extend_from_slice(&body);
    p
}

pub(crate) fn arp(n: usize) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&SENDER);
    a.extend_from_slice(&[10, 1, 0, 2]);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&[10, 1, 0, 1]);
    a.truncate(n);
    a
}

/// The ethertype and L3 bytes of `body`; `tag` numbers the frame (in its payload).
pub(crate) fn l3_of(body: &Body, tag: u32) -> (u16, Vec<u8>) {
    match body {
        Body::V4(s) => (0x0800, build_v4(s, tag)),
        Body::V6(s) => (0x86dd, build_v6(s, tag)),
        Body::Arp(n) => (0x0806, arp(*n)),
        Body::Other(t) => (*t, payload(tag, 46)),
    }
}

/// Pad `frame` with `pad.0` bytes of `pad.1`, then cut it as `cut` says.
pub(crate) fn pad_and_cut(frame: &mut Vec<u8>, pad: (usize, u8), cut: Cut) {
    frame.resize(frame.len() + pad.0, pad.1);
    match cut {
        Cut::None => {}
        Cut::To(n) => frame.truncate(n),
        Cut::Less(n) => frame.truncate(frame.len().saturating_sub(n)),
    }
}

/// A clean, forwardable copy of `body` (same destination) to send first, so that route,
/// flow and adjacency caches are warm for its destination; none for what is not IP.
pub(crate) fn warm_body(body: &Body) -> Option<Body> {
    Some(match body {
        Body::V4(s) => Body::V4(V4Spec {
            version: 4,
            ihl: Ihl::Five,
            len: Len::Right,
            csum: Csum::Right,
            df: false,
            mf: false,
            offset: 0,
            ttl: 64,
            l4: L4::Udp,
            src: v4(10, 1, 0, 2),
            payload: 16,
            ..s.clone()
        }),
        Body::V6(s) => Body::V6(V6Spec {
            version: 6,
            len: Len::Right,
            hop: 64,
            exts: vec![],
            l4: L4::Udp,
            src: db8(1, 2),
            payload: 16,
            ..s.clone()
        }),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// Generators.
// ---------------------------------------------------------------------------------------

/// Sources of real hosts (and the router's own address: spoofed, but one host's).
pub(crate) const SRC4_GOOD: &[Ipv4Addr] = &[
    v4(10, 1, 0, 2),
    v4(10, 2, 0, 2),
    v4(192, 0, 2, 77),
    v4(198, 51, 100, 77),
    v4(8, 8, 8, 8),
    v4(10, 1, 0, 1),
];

/// Sources that are not one host's unicast address, or link-local.
pub(crate) const SRC4_ODD: &[Ipv4Addr] = &[
    v4(0, 0, 0, 0),
    v4(0, 1, 2, 3),
    v4(127, 0, 0, 1),
    v4(224, 0, 0, 1),
    v4(239, 1, 1, 1),
    v4(240, 0, 0, 1),
    v4(255, 255, 255, 255),
    v4(169, 254, 3, 3),
    v4(10, 1, 0, 255),
    v4(10, 2, 0, 255),
];

/// Destinations that are routed somewhere (forwarded, or an error on the way).
pub(crate) const DST4_ROUTED: &[Ipv4Addr] = &[
    v4(198, 51, 100, 7),
    v4(192, 0, 2, 9),
    v4(192, 0, 2, 10),
    v4(198, 18, 0, 9),
    v4(198, 18, 0, 10),
    v4(203, 0, 113, 4),
    v4(172, 16, 0, 1),
    v4(240, 0, 0, 1),
    v4(10, 1, 0, 5),
    v4(10, 1, 0, 6),
    v4(10, 3, 0, 2),
    v4(10, 4, 0, 2),
    v4(100, 64, 0, 1),
    v4(100, 65, 0, 1),
    v4(100, 66, 0, 1),
    v4(8, 8, 8, 8),
    v4(250, 0, 0, 1),
];

/// Destinations of the router itself, broadcast, multicast, martian, link-local.
pub(crate) const DST4_ODD: &[Ipv4Addr] = &[
    v4(10, 1, 0, 1),
    v4(10, 2, 0, 1),
    v4(10, 4, 0, 1),
    v4(10, 1, 0, 255),
    v4(10, 3, 0, 255),
    v4(255, 255, 255, 255),
    v4(224, 0, 0, 1),
    v4(224, 0, 0, 251),
    v4(224, 0, 1, 1),
    v4(239, 1, 1, 1),
    v4(0, 0, 0, 0),
    v4(0, 1, 2, 3),
    v4(127, 0, 0, 1),
    v4(169, 254, 0, 1),
    v4(169, 254, 3, 3),
    v4(169, 254, 255, 255),
];

pub(crate) const SRC6_GOOD: &[Ipv6Addr] =
    &[db8(1, 2), db8(0x100, 0x77), db8(0x200, 0x77), db8(1, 1)];

pub(crate) const SRC6_ODD: &[Ipv6Addr] = &[
    ll6(2),
    Ipv6Addr::UNSPECIFIED,
    Ipv6Addr::LOCALHOST,
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
    db8(1, 0),
];

pub(crate) const DST6_ROUTED: &[Ipv6Addr] = &[
    db8(0x100, 7),
    db8(0x200, 7),
    db8(0x200, 8),
    db8(0x300, 7),
    db8(0x400, 1),
    db8(0x500, 1),
    db8(0x600, 1),
    db8(0x700, 1),
    db8(0x800, 1),
    db8(1, 5),
    db8(1, 6),
    db8(0xdead, 1),
    Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 1),
];

pub(crate) const DST6_ODD: &[Ipv6Addr] = &[
    db8(1, 1),
    db8(3, 1),
    db8(2, 0),
    ll6(0xa),
    ll6(0x99),
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 1),
    Ipv6Addr::new(0xff01, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xff05, 0, 0, 0, 0, 0, 0, 2),
    Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xff12, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::UNSPECIFIED,
    Ipv6Addr::LOCALHOST,
];

pub(crate) fn ttl() -> impl Strategy<Value = u8> {
    prop_oneof![
        1 => Just(0u8),
        2 => Just(1u8),
        1 => Just(2u8),
        12 => Just(64u8),
        1 => Just(255u8),
    ]
}

pub(crate) fn len_sel() -> impl Strategy<Value = Len> {
    prop_oneof![
        16 => Just(Len::Right),
        1 => (1u16..=40).prop_map(Len::Short),
        1 => (1u16..=40).prop_map(Len::Long),
    ]
}

pub(crate) fn payload_len() -> impl Strategy<Value = usize> {
    prop_oneof![6 => 0usize..64, 2 => 64usize..1200, 3 => 1200usize..=1500]
}

pub(crate) fn v4_spec() -> impl Strategy<Value = V4Spec> {
    let header = (
        prop_oneof![30 => Just(4u8), 1 => Just(6u8), 1 => Just(5u8)],
        prop_oneof![
            20 => Just(Ihl::Five),
            3 => (1u8..=3, 0u8..4).prop_map(|(w, k)| Ihl::Options(w, k)),
            1 => (0u8..5).prop_map(Ihl::Bad),
            1 => Just(Ihl::Fifteen),
        ],
        len_sel(),
        prop_oneof![
            14 => Just(Csum::Right),
            1 => Just(Csum::Wrong),
            2 => Just(Csum::ZeroAfterDecrement),
            1 => Just(Csum::NegativeZero),
        ],
        any::<u8>(),
        any::<bool>(),
        prop_oneof![
            8 => Just((false, 0u16)),
            1 => Just((true, 0u16)),
            1 => (any::<bool>(), 1u16..200),
            1 => (any::<bool>(), 8000u16..=8191),
        ],
        ttl(),
    );
    let l4 = prop_oneof![
        4 => Just(L4::Udp),
        1 => Just(L4::Tcp),
        2 => select(&[(8u8, 0u8), (0, 0), (3, 1), (11, 0), (12, 0), (5, 1), (13, 0)][..])
            .prop_map(|(t, c)| L4::Icmp(t, c)),
        1 => Just(L4::IcmpEmpty),
    ];
    let src = prop_oneof![8 => select(SRC4_GOOD), 2 => select(SRC4_ODD)];
    let dst = prop_oneof![4 => select(DST4_ROUTED), 2 => select(DST4_ODD)];
    (header, l4, src, dst, payload_len()).prop_map(
        |((version, ihl, len, csum, tos, df, (mf, offset), ttl), l4, src, dst, payload)| V4Spec {
            version,
            ihl,
            len,
            csum,
            tos,
            df,
            mf,
            offset,
            ttl,
            l4,
            src,
            dst,
            payload,
        },
    )
}

pub(crate) fn v6_spec() -> impl Strategy<Value = V6Spec> {
    let middle = prop_oneof![
        (select(&[0u8, 2, 4][..]), 0u8..=2).prop_map(|(t, l)| Ext::Routing(t, l)),
        (prop_oneof![Just(0u16), 1u16..200], any::<bool>()).prop_map(|(o, m)| Ext::Fragment(o, m)),
        Just(Ext::DestOpts),
    ];
    let exts = (
        prop_oneof![
            6 => Just(None),
            1 => Just(Some(Ext::HopByHop(false))),
            1 => Just(Some(Ext::HopByHop(true))),
        ],
        prop_oneof![5 => Just(vec![]), 2 => vec(middle, 1..=2)],
        prop_oneof![12 => Just(None), 1 => Just(Some(Ext::TooLong)), 1 => Just(Some(Ext::Cut))],
    )
        .prop_map(|(h, m, bad)| h.into_iter().chain(m).chain(bad).collect::<Vec<_>>());
    let l4 = prop_oneof![
        4 => Just(L4::Udp),
        1 => Just(L4::Tcp),
        2 => select(
            &[(128u8, 0u8), (129, 0), (1, 0), (2, 0), (3, 0), (4, 0), (100, 0), (135, 0),
              (137, 0), (200, 0)][..]
        )
        .prop_map(|(t, c)| L4::Icmp(t, c)),
        1 => Just(L4::NoNext),
        1 => Just(L4::IcmpEmpty),
    ];
    let src = prop_oneof![8 => select(SRC6_GOOD), 2 => select(SRC6_ODD)];
    let dst = prop_oneof![4 => select(DST6_ROUTED), 2 => select(DST6_ODD)];
    (
        prop_oneof![30 => Just(6u8), 1 => Just(4u8)],
        len_sel(),
        any::<u8>(),
        prop_oneof![1 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8), 8 => Just(64u8)],
        exts,
        l4,
        src,
        dst,
        payload_len(),
    )
        .prop_map(
            |(version, len, tc, hop, exts, l4, src, dst, payload)| V6Spec {
                version,
                len,
                tc,
                hop,
                exts,
                l4,
                src,
                dst,
                payload,
            },
        )
}

/// What follows the L2 header: mostly IPv4 and IPv6, some ARP and other ethertypes.
pub(crate) fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        10 => v4_spec().prop_map(Body::V4),
        10 => v6_spec().prop_map(Body::V6),
        1 => prop_oneof![3 => Just(28usize), 1 => 0usize..28].prop_map(Body::Arp),
        1 => select(&[0x88cc_u16, 0x8847, 0x0805, 0x0042, 0x9000][..]).prop_map(Body::Other),
    ]
}

/// The sender's MAC: mostly [`SENDER`], sometimes another host or a neighbour.
pub(crate) fn smac() -> impl Strategy<Value = Mac> {
    prop_oneof![
        4 => Just(SENDER),
        1 => Just([0x02, 0, 0, 0, 0xaa, 0x02]),
        1 => Just(nbr(0xa5)),
    ]
}

/// Link-layer padding: mostly none.
pub(crate) fn padding() -> impl Strategy<Value = (usize, u8)> {
    prop_oneof![
        6 => Just((0usize, 0u8)),
        1 => (1usize..=46, select(&[0u8, 1, 3, 11, 0xee][..])),
    ]
}

/// Truncation: mostly none.
pub(crate) fn cut() -> impl Strategy<Value = Cut> {
    prop_oneof![
        20 => Just(Cut::None),
        1 => (0usize..=64).prop_map(Cut::To),
        1 => (1usize..=24).prop_map(Cut::Less),
    ]
}

pub(crate) fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(400);
    Config {
        cases,
        // Keep the source tree clean; a failure prints the minimal case.
        failure_persistence: None,
        ..Config::default()
    }
}

pub(crate) fn udp4_spec(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, payload: usize) -> V4Spec {
    V4Spec {
        version: 4,
        ihl: Ihl::Five,
        len: Len::Right,
        csum: Csum::Right,
        tos: 0,
        df: false,
        mf: false,
        offset: 0,
        ttl,
        l4: L4::Udp,
        src,
        dst,
        payload,
    }
}

pub(crate) fn udp6_spec(src: Ipv6Addr, dst: Ipv6Addr, hop: u8, payload: usize) -> V6Spec {
    V6Spec {
        version: 6,
        len: Len::Right,
        tc: 0,
        hop,
        exts: vec![],
        l4: L4::Udp,
        src,
        dst,
        payload,
    }
}
