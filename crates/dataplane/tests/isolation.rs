//! Isolation between VRs that share ports and an overlapping address space.
//!
//! Two VRs, "red" and "green", have the same interface addresses, routes and neighbours on the
//! same two ports; only demux tells them apart — by their VIFs' MACs, or (second variant) by
//! VLAN: red on VLAN 10, green on VLAN 20, both with the same MACs. Proptest throws random
//! rounds of frames at them: to either VR, broadcast, or to nobody; IPv4/IPv6 to destinations
//! inside and outside the routed space (forwarded, punted, blackholed, unreachable, no route),
//! any TTL including 0 and 1, ARP, unknown ethertypes, and malformed frames (a flipped header
//! byte, a truncation, random bytes after the Ethernet header).
//!
//! Every frame carries a unique tag in its payload (ICMP errors quote it). Checked after each
//! round:
//! * every frame that leaves identifies its VR by its VIF (source MAC, VLAN, port), and that VR
//!   is one the input was addressed to; a frame whose tag was destroyed (only malformed inputs
//!   can lose it) is charged to the one VR that received malformed frames in that round;
//! * every punted packet likewise belongs to its VR;
//! * no frame leaves twice per VR; `in_use()` is 0 once egress and punt queues are drained.
//!
//! And at the end, per VR, the counters add up exactly:
//! `rx_packets + icmp_sent == tx_packets + punted + (drops − vr-ingress-full − icmp-*)`, where
//! `rx_packets` is what demux admitted (`+ vr-ingress-full` = every frame addressed to it) and
//! the `icmp-*` reasons count errors not sent (the offending packet is also dropped under its
//! own reason, so they are not packet exits). `tx_packets`, `punted` and `icmp_sent` also
//! equal what the test saw leave, punted, and recognised as ICMP errors from that VR.

mod common;

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use common::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::Config;
use vrhost_dataplane::{DemuxKey, Drop, IfAddr, VrConfig};
use vrhost_fib::{NextHop, NextHopSet};
use vrhost_wire::EthernetAddress;

const NAMES: [&str; 2] = ["red", "green"];
const VLANS: [u16; 2] = [10, 20];
/// A VLAN nobody uses.
const VLAN_NONE: u16 = 30;
const NOBODY_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x99]);
const NBR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xbb, 0x02]);

/// Starts every payload tag. The first byte is 0 so that a tag read as an IP header has
/// version 0 (never valid).
const MAGIC: [u8; 8] = [0x00, b'v', b'r', b'h', b'-', b't', b'a', b'g'];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Red and green VIFs have different MACs, all untagged.
    Mac,
    /// Same MACs; red on VLAN 10, green on VLAN 20 (`DemuxKey::Vlan`).
    Vlan,
}

/// The VIF MAC of VR `vr` on port `port`.
fn vif_mac(mode: Mode, vr: usize, port: usize) -> EthernetAddress {
    match mode {
        Mode::Mac => mac(0x11 + 0x10 * vr as u8 + port as u8),
        Mode::Vlan => mac(1 + port as u8),
    }
}

// The address space both VRs share.
const V4_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const V4_B: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const V6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 1);
const V6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 1);
const HOST4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const NH4: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const HOST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 2);
const NH6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 2);

const V4_SRCS: &[Ipv4Addr] = &[
    HOST4,
    Ipv4Addr::new(172, 16, 0, 1),
    Ipv4Addr::new(10, 0, 1, 9),
    Ipv4Addr::UNSPECIFIED,
    Ipv4Addr::LOCALHOST,
    Ipv4Addr::new(224, 0, 0, 9),
];

const V4_DSTS: &[Ipv4Addr] = &[
    Ipv4Addr::new(198, 51, 100, 7), // via NH4 (resolved): forwarded out port 1
    Ipv4Addr::new(203, 0, 113, 9),  // ECMP NH4 / HOST4
    HOST4,                          // attached on port 0, resolved
    NH4,                            // attached on port 1, resolved
    Ipv4Addr::new(10, 0, 1, 77),    // attached, unresolved: punted
    V4_A,                           // local: punted
    Ipv4Addr::new(10, 0, 1, 255),   // subnet broadcast: local
    Ipv4Addr::new(8, 8, 8, 8),      // no route: ICMP net unreachable
    Ipv4Addr::new(192, 0, 2, 1),    // blackhole
    Ipv4Addr::new(192, 0, 2, 65),   // unreachable
    Ipv4Addr::new(192, 0, 2, 129),  // prohibit
    Ipv4Addr::new(100, 64, 0, 1),   // via an unresolved next hop: punted
    Ipv4Addr::BROADCAST,            // punted
    Ipv4Addr::new(224, 0, 0, 5),    // link-local multicast: punted
    Ipv4Addr::new(239, 1, 1, 1),    // multicast: dropped
];

const V6_SRCS: &[Ipv6Addr] = &[
    HOST6,
    Ipv6Addr::new(0x2001, 0xdb8, 0xc, 0, 0, 0, 0, 5),
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2),
    Ipv6Addr::UNSPECIFIED,
    Ipv6Addr::LOCALHOST,
];

const V6_DSTS: &[Ipv6Addr] = &[
    Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 9), // via NH6: forwarded out port 1
    HOST6,                                             // attached, resolved
    Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 0x77), // attached, unresolved: punted
    V6_A,                                              // local
    Ipv6Addr::new(0x2001, 0xdb8, 0xee, 0, 0, 0, 0, 1), // unreachable
    Ipv6Addr::new(0x2001, 0xdb8, 0xdd, 0, 0, 0, 0, 1), // blackhole
    Ipv6Addr::new(0x2001, 0xdb9, 0, 0, 0, 0, 0, 1),    // no route
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),        // link-local multicast: punted
    Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0, 1),        // global multicast: dropped
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),        // link-local, not ours
];

/// The two VRs, identical but for their demux keys.
fn build(mode: Mode) -> Rig {
    let rig = Rig::new(2);
    for (v, name) in NAMES.iter().enumerate() {
        let vr = rig.dp.add_vr(VrConfig::new(*name)).unwrap();
        for (port, (a4, a6)) in [(V4_A, V6_A), (V4_B, V6_B)].into_iter().enumerate() {
            let mut c = vif(
                ["a", "b"][port],
                port as u16,
                vif_mac(mode, v, port),
                vec![IfAddr::V4(a4, 24), IfAddr::V6(a6, 64)],
            );
            if mode == Mode::Vlan {
                c.vlan = Some(VLANS[v]);
                c.key = DemuxKey::Vlan;
            }
            assert_eq!(rig.dp.add_vif(name, c).unwrap(), port as u16);
        }
        let via4 = |addr: Ipv4Addr, ifindex| NextHop::Via {
            addr: addr.into(),
            ifindex,
        };
        let f4 = &vr.fib4;
        f4.insert("198.51.100.0/24".parse().unwrap(), via4(NH4, 1))
            .unwrap();
        f4.insert(
            "203.0.113.0/24".parse().unwrap(),
            NextHopSet::ecmp(vec![via4(NH4, 1), via4(HOST4, 0)]).unwrap(),
        )
        .unwrap();
        f4.insert("192.0.2.0/26".parse().unwrap(), NextHop::Drop)
            .unwrap();
        f4.insert("192.0.2.64/26".parse().unwrap(), NextHop::Unreachable)
            .unwrap();
        f4.insert("192.0.2.128/26".parse().unwrap(), NextHop::Prohibit)
            .unwrap();
        f4.insert(
            "100.64.0.0/24".parse().unwrap(),
            via4(Ipv4Addr::new(10, 0, 1, 3), 1),
        )
        .unwrap();
        let f6 = &vr.fib6;
        f6.insert(
            "2001:db8:ff::/48".parse().unwrap(),
            NextHop::Via {
                addr: NH6.into(),
                ifindex: 1,
            },
        )
        .unwrap();
        f6.insert("2001:db8:ee::/48".parse().unwrap(), NextHop::Unreachable)
            .unwrap();
        f6.insert("2001:db8:dd::/48".parse().unwrap(), NextHop::Drop)
            .unwrap();
        vr.neigh.set(1, NH4.into(), NBR_MAC);
        vr.neigh.set(0, HOST4.into(), HOST_MAC);
        vr.neigh.set(1, NH6.into(), NBR_MAC);
        vr.neigh.set(0, HOST6.into(), HOST_MAC);
    }
    rig
}

// ---- what the test sends -------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum To {
    /// Unicast to VR n's VIF on the port.
    Vr(usize),
    /// Broadcast; in VLAN mode on VR n's VLAN, in MAC mode to every VIF on the port.
    Bcast(usize),
    /// To no VIF (unknown MAC or VLAN; the variant picks which).
    Nobody(u8),
}

#[derive(Debug, Clone)]
enum Body {
    V4 {
        src: usize,
        dst: usize,
        ttl: u8,
    },
    V6 {
        src: usize,
        dst: usize,
        hop: u8,
    },
    Arp,
    Other(u16),
    /// Random bytes after the Ethernet header.
    Garbage {
        ethertype: u16,
        bytes: Vec<u8>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    None,
    /// XOR one byte of the L3 header (or the 8 bytes after it).
    Flip {
        at: u8,
        xor: u8,
    },
    /// Keep only the first `keep % len` bytes.
    Truncate {
        keep: u16,
    },
}

#[derive(Debug, Clone)]
struct FrameSpec {
    port: usize,
    to: To,
    body: Body,
    damage: Damage,
    filler: usize,
}

#[derive(Debug, Clone)]
struct Round {
    /// The VR that may receive malformed frames in this round.
    garbage_vr: usize,
    frames: Vec<FrameSpec>,
}

fn ttl() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(1), Just(2), any::<u8>()]
}

fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    let to = prop_oneof![
        4 => (0..2usize).prop_map(To::Vr),
        1 => (0..2usize).prop_map(To::Bcast),
        1 => any::<u8>().prop_map(To::Nobody),
    ];
    let body = prop_oneof![
        5 => (0..V4_SRCS.len(), 0..V4_DSTS.len(), ttl())
            .prop_map(|(src, dst, ttl)| Body::V4 { src, dst, ttl }),
        4 => (0..V6_SRCS.len(), 0..V6_DSTS.len(), ttl())
            .prop_map(|(src, dst, hop)| Body::V6 { src, dst, hop }),
        1 => Just(Body::Arp),
        1 => any::<u16>().prop_map(Body::Other),
        1 => (
            prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806), any::<u16>()],
            vec(any::<u8>(), 0..80),
        )
            .prop_map(|(ethertype, bytes)| Body::Garbage { ethertype, bytes }),
    ];
    let damage = prop_oneof![
        6 => Just(Damage::None),
        2 => (any::<u8>(), 1..=255u8).prop_map(|(at, xor)| Damage::Flip { at, xor }),
        1 => any::<u16>().prop_map(|keep| Damage::Truncate { keep }),
    ];
    (0..2usize, to, body, damage, 0..48usize).prop_map(|(port, to, body, damage, filler)| {
        FrameSpec {
            port,
            to,
            body,
            damage,
            filler,
        }
    })
}

fn rounds() -> impl Strategy<Value = Vec<Round>> {
    vec(
        (0..2usize, vec(frame_spec(), 1..48))
            .prop_map(|(garbage_vr, frames)| Round { garbage_vr, frames }),
        1..8,
    )
}

/// Ethertypes that would make the body a VLAN tag (and change the demux key).
fn not_vlan(ty: u16) -> u16 {
    if matches!(ty, 0x8100 | 0x88a8 | 0x9100 | 0x9200) {
        0x88b5
    } else {
        ty
    }
}

/// A payload tag: [`MAGIC`], the frame's id, the id's complement, then filler.
fn tag(id: u32, filler: usize) -> Vec<u8> {
    let mut t = MAGIC.to_vec();
    t.extend_from_slice(&id.to_be_bytes());
    t.extend_from_slice(&(!id).to_be_bytes());
    t.extend((0..filler).map(|i| i as u8 ^ 0x5a));
    t
}

/// The tag id in `frame`, if it still carries one intact. The complement makes a damaged id
/// no tag at all: a frame whose body is only its tag (`Body::Other`) takes its damage there,
/// and a flipped id byte once named another frame, or none (an ARP-typed one, punted, made
/// the property test fail on the checker's own mistake).
fn find_tag(frame: &[u8]) -> Option<u32> {
    let i = frame.windows(MAGIC.len()).position(|w| w == MAGIC)? + MAGIC.len();
    let id = u32::from_be_bytes(frame.get(i..i + 4)?.try_into().unwrap());
    let check = u32::from_be_bytes(frame.get(i + 4..i + 8)?.try_into().unwrap());
    (check == !id).then_some(id)
}

/// A built frame: bytes, the VRs it is addressed to (bit mask), and whether its tag is
/// guaranteed to survive (no damage, no random bytes).
struct Built {
    bytes: Vec<u8>,
    to: u8,
    taggable: bool,
}

fn build_frame(mode: Mode, spec: &FrameSpec, garbage_vr: usize, id: u32) -> Built {
    let taggable =
        !matches!(spec.body, Body::Garbage { .. }) && matches!(spec.damage, Damage::None);
    // Malformed frames go only to the round's garbage VR (or to nobody).
    let to = match spec.to {
        To::Nobody(n) => To::Nobody(n),
        _ if !taggable => To::Vr(garbage_vr),
        t => t,
    };
    let port = spec.port;
    let (dst, vlan, mask) = match (mode, to) {
        (Mode::Mac, To::Vr(v)) => (vif_mac(mode, v, port), None, 1u8 << v),
        (Mode::Vlan, To::Vr(v)) => (vif_mac(mode, v, port), Some(VLANS[v]), 1 << v),
        (Mode::Mac, To::Bcast(_)) => (EthernetAddress::BROADCAST, None, 0b11),
        (Mode::Vlan, To::Bcast(v)) => (EthernetAddress::BROADCAST, Some(VLANS[v]), 1 << v),
        (Mode::Mac, To::Nobody(n)) => match n % 3 {
            0 => (NOBODY_MAC, None, 0),
            1 => (vif_mac(mode, 0, port), Some(VLANS[0]), 0),
            _ => (EthernetAddress::BROADCAST, Some(VLAN_NONE), 0),
        },
        (Mode::Vlan, To::Nobody(n)) => match n % 4 {
            0 => (vif_mac(mode, 0, port), Some(VLAN_NONE), 0),
            1 => (NOBODY_MAC, Some(VLANS[0]), 0),
            2 => (vif_mac(mode, 1, port), None, 0),
            _ => (EthernetAddress::BROADCAST, None, 0),
        },
    };
    let payload = tag(id, spec.filler);
    let (ty, mut l3, hdr) = match &spec.body {
        Body::V4 { src, dst, ttl } => (
            0x0800,
            udp4(V4_SRCS[*src], V4_DSTS[*dst], *ttl, 1000, 2000, &payload),
            28,
        ),
        Body::V6 { src, dst, hop } => (
            0x86dd,
            udp6(V6_SRCS[*src], V6_DSTS[*dst], *hop, 1000, 2000, &payload),
            48,
        ),
        Body::Arp => {
            // Who has 10.0.0.1, tell 10.0.0.2; the tag rides as trailer.
            let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
            a.extend_from_slice(&HOST_MAC.0);
            a.extend_from_slice(&HOST4.octets());
            a.extend_from_slice(&[0; 6]);
            a.extend_from_slice(&V4_A.octets());
            a.extend_from_slice(&payload);
            (0x0806, a, 28)
        }
        Body::Other(ty) => (not_vlan(*ty), payload, 12),
        Body::Garbage { ethertype, bytes } => (not_vlan(*ethertype), bytes.clone(), 0),
    };
    if let Damage::Flip { at, xor } = spec.damage
        && hdr > 0
    {
        let i = usize::from(at) % hdr.min(l3.len());
        l3[i] ^= xor;
    }
    let mut bytes = eth(dst, HOST_MAC, vlan, ty, &l3);
    if let Damage::Truncate { keep } = spec.damage {
        bytes.truncate(usize::from(keep) % bytes.len());
    }
    // Demux needs the whole L2 header (and tag) to see where the frame goes.
    let l2_len = if vlan.is_some() { 18 } else { 14 };
    Built {
        to: if bytes.len() >= l2_len { mask } else { 0 },
        bytes,
        taggable,
    }
}

// ---- what comes out ------------------------------------------------------------------------

/// The VR whose VIF sent `frame` out of `port`; panics if no VIF of either VR has its
/// source MAC and VLAN.
fn egress_vr(mode: Mode, port: usize, frame: &[u8]) -> usize {
    assert!(
        frame.len() >= 14,
        "runt frame left port {port}: {frame:02x?}"
    );
    let src = EthernetAddress::from_bytes(&frame[6..12]);
    let tagged = frame[12..14] == [0x81, 0x00];
    let vid = tagged.then(|| u16::from_be_bytes([frame[14], frame[15]]) & 0xfff);
    let found = (0..2).find(|&v| {
        src == vif_mac(mode, v, port)
            && match mode {
                Mode::Mac => vid.is_none(),
                Mode::Vlan => vid == Some(VLANS[v]),
            }
    });
    found.unwrap_or_else(|| {
        panic!("frame left port {port} from no VIF (src {src}, vlan {vid:?}): {frame:02x?}")
    })
}

/// Whether `frame` is an ICMP error sent by a VR (from one of its addresses).
fn is_icmp_error(frame: &[u8]) -> bool {
    let l3 = if frame[12..14] == [0x81, 0x00] {
        18
    } else {
        14
    };
    let et = u16::from_be_bytes([frame[l3 - 2], frame[l3 - 1]]);
    let ip = &frame[l3..];
    match et {
        0x0800 if ip.len() >= 20 => {
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            ip[9] == 1 && (src == V4_A || src == V4_B)
        }
        0x86dd if ip.len() >= 40 => {
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            ip[6] == 58 && (src == V6_A || src == V6_B)
        }
        _ => false,
    }
}

#[derive(Default)]
struct Seen {
    addressed: [u64; 2],
    unaddressed: u64,
    tx: [u64; 2],
    punted: [u64; 2],
    icmp: [u64; 2],
    port_rx: [u64; 2],
    port_tx: [u64; 2],
}

fn run_case(mode: Mode, rounds: &[Round]) {
    let mut rig = build(mode);
    let vrs: Vec<_> = NAMES.iter().map(|n| rig.dp.vr(n).unwrap()).collect();
    let mut seen = Seen::default();
    // Tag id → VRs it was addressed to.
    let mut tags: HashMap<u32, u8> = HashMap::new();
    let mut next_id = 0u32;
    for round in rounds {
        for spec in &round.frames {
            let id = next_id;
            next_id += 1;
            let b = build_frame(mode, spec, round.garbage_vr, id);
            if !b.taggable {
                assert!(b.to & !(1 << round.garbage_vr) == 0);
            }
            tags.insert(id, b.to);
            for v in 0..2 {
                if b.to & 1 << v != 0 {
                    seen.addressed[v] += 1;
                }
            }
            if b.to == 0 {
                seen.unaddressed += 1;
            }
            seen.port_rx[spec.port] += 1;
            rig.send(spec.port, &b.bytes);
        }
        rig.run();
        // Per tag and VR, at most one frame out (a forwarded frame or an error about it).
        let mut out: HashMap<(u32, usize), usize> = HashMap::new();
        for port in 0..2 {
            for f in rig.recv(port) {
                let v = egress_vr(mode, port, &f);
                seen.tx[v] += 1;
                seen.port_tx[port] += 1;
                if is_icmp_error(&f) {
                    seen.icmp[v] += 1;
                }
                match find_tag(&f) {
                    Some(id) => {
                        let to = tags.get(&id).copied().unwrap_or_else(|| {
                            panic!("frame with unknown tag {id} left port {port}: {f:02x?}")
                        });
                        assert!(
                            to & 1 << v != 0,
                            "frame {id} (to {to:#b}) left by {}'s VIF on port {port}: {f:02x?}",
                            NAMES[v]
                        );
                        let n = out.entry((id, v)).or_default();
                        *n += 1;
                        assert_eq!(*n, 1, "frame {id} left {} twice", NAMES[v]);
                    }
                    None => assert_eq!(
                        v, round.garbage_vr,
                        "untagged frame out of {}'s VIF; {} got the malformed input: {f:02x?}",
                        NAMES[v], NAMES[round.garbage_vr]
                    ),
                }
            }
        }
        for (v, vr) in vrs.iter().enumerate() {
            while let Some(p) = vr.punt_recv() {
                seen.punted[v] += 1;
                let m = *rig.pool.meta(&p);
                assert_eq!(
                    m.vr, vr.id,
                    "punted to {} with meta of VR {}",
                    NAMES[v], m.vr
                );
                let f = rig.pool.frame(&p);
                match find_tag(f) {
                    Some(id) => {
                        let to = tags
                            .get(&id)
                            .copied()
                            .expect("punted frame with unknown tag");
                        assert!(
                            to & 1 << v != 0,
                            "frame {id} (to {to:#b}) punted to {}: {f:02x?}",
                            NAMES[v]
                        );
                    }
                    None => assert_eq!(v, round.garbage_vr, "untagged punt to {}", NAMES[v]),
                }
                rig.pool.free(p);
            }
        }
        assert_eq!(rig.in_use(), 0, "slots held after the round was drained");
    }

    let icmp_not_sent = [
        Drop::IcmpRateLimited,
        Drop::IcmpNoSource,
        Drop::IcmpNoBuffer,
        Drop::IcmpSuppressed,
    ];
    for (v, vr) in vrs.iter().enumerate() {
        let s = vr.stats();
        let name = NAMES[v];
        assert_eq!(s.drop(Drop::VrIngressFull), 0, "{name}");
        assert_eq!(s.drop(Drop::TxFull), 0, "{name}");
        assert_eq!(
            s.rx_packets + s.drop(Drop::VrIngressFull),
            seen.addressed[v],
            "{name}: admitted + refused = addressed"
        );
        assert_eq!(s.tx_packets, seen.tx[v], "{name}: tx");
        assert_eq!(s.punted, seen.punted[v], "{name}: punted");
        assert_eq!(s.icmp_sent, seen.icmp[v], "{name}: ICMP errors");
        assert_eq!(s.injected, 0);
        let exits = s.total_drops()
            - s.drop(Drop::VrIngressFull)
            - icmp_not_sent.iter().map(|d| s.drop(*d)).sum::<u64>();
        assert_eq!(
            s.rx_packets + s.icmp_sent,
            s.tx_packets + s.punted + exits,
            "{name}: every admitted packet (and every ICMP error) ends exactly once: {s:?}"
        );
        let vifs = rig.dp.vifs(name).unwrap();
        let (vrx, vtx) = vifs.iter().fold((0, 0), |(r, t), vif| {
            let st = vif.stats();
            (r + st.rx_packets, t + st.tx_packets)
        });
        assert_eq!(vrx, seen.addressed[v], "{name}: VIF rx");
        assert_eq!(vtx, seen.tx[v], "{name}: VIF tx");
    }
    let d = rig.dp.demux_drops();
    assert_eq!(
        d[Drop::NoVr as usize] + d[Drop::L2Truncated as usize],
        seen.unaddressed,
        "demux drops"
    );
    assert_eq!(d.iter().sum::<u64>(), seen.unaddressed, "other demux drops");
    for port in 0..2u16 {
        let ps = rig.dp.port_stats(port).unwrap();
        let p = usize::from(port);
        assert_eq!(ps.rx_packets, seen.port_rx[p], "port {port} rx");
        assert_eq!(ps.tx_packets, seen.port_tx[p], "port {port} tx");
        assert_eq!(ps.tx_full, 0);
    }
    let rx_dropped: u64 = (0..2)
        .map(|p| rig.dp.port_stats(p).unwrap().rx_dropped)
        .sum();
    assert_eq!(rx_dropped, seen.unaddressed, "ports' rx_dropped");
}

fn config() -> Config {
    Config {
        cases: 128,
        // Keep the source tree clean; a failure prints the minimal case.
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn vrs_demuxed_by_mac_never_leak(rounds in rounds()) {
        run_case(Mode::Mac, &rounds);
    }

    #[test]
    fn vrs_demuxed_by_vlan_never_leak(rounds in rounds()) {
        run_case(Mode::Vlan, &rounds);
    }
}

/// The same frame to both VRs' VIFs: each forwards its own copy out of its own VIF, with
/// the same rewrite, and each counts it.
#[test]
fn same_packet_to_both_vrs_leaves_by_each_vrs_own_vif() {
    for mode in [Mode::Mac, Mode::Vlan] {
        let mut rig = build(mode);
        let dst = V4_DSTS[0];
        for (v, &vid) in VLANS.iter().enumerate() {
            let vlan = (mode == Mode::Vlan).then_some(vid);
            let l3 = udp4(HOST4, dst, 64, 1, 2, &tag(v as u32, 4));
            rig.send(0, &eth(vif_mac(mode, v, 0), HOST_MAC, vlan, 0x0800, &l3));
        }
        rig.run();
        let out = rig.recv(1);
        assert_eq!(out.len(), 2, "{mode:?}");
        let mut got: Vec<(usize, u32)> = out
            .iter()
            .map(|f| (egress_vr(mode, 1, f), find_tag(f).unwrap()))
            .collect();
        got.sort();
        assert_eq!(got, vec![(0, 0), (1, 1)], "{mode:?}");
        for f in &out {
            assert_eq!(EthernetAddress::from_bytes(&f[..6]), NBR_MAC);
        }
        for name in NAMES {
            let s = rig.dp.vr(name).unwrap().stats();
            assert_eq!((s.rx_packets, s.tx_packets, s.total_drops()), (1, 1, 0));
        }
        assert!(rig.recv(0).is_empty());
        assert_eq!(rig.in_use(), 0);
    }
}

/// Changing one VR's routes and neighbours changes nothing for the other, although both
/// use the same prefixes and next-hop addresses.
#[test]
fn one_vrs_table_changes_leave_the_other_alone() {
    let mut rig = build(Mode::Mac);
    let red = rig.dp.vr("red").unwrap();
    red.fib4
        .remove(&"198.51.100.0/24".parse().unwrap())
        .unwrap();
    red.neigh.remove(0, HOST4.into());
    let to = |v: usize, dst: Ipv4Addr, id: u32| {
        eth(
            vif_mac(Mode::Mac, v, 0),
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST4, dst, 64, 1, 2, &tag(id, 0)),
        )
    };
    for v in 0..2 {
        rig.send(0, &to(v, V4_DSTS[0], 2 * v as u32));
        rig.send(0, &to(v, HOST4, 2 * v as u32 + 1));
    }
    rig.run();
    // Green forwards both; red has no route for the first (ICMP error back out of port 0)
    // and no neighbour for the second (punted).
    let out1 = rig.recv(1);
    assert_eq!(out1.len(), 1);
    assert_eq!(
        (egress_vr(Mode::Mac, 1, &out1[0]), find_tag(&out1[0])),
        (1, Some(2))
    );
    let mut out0: Vec<_> = rig
        .recv(0)
        .iter()
        .map(|f| (egress_vr(Mode::Mac, 0, f), find_tag(f), is_icmp_error(f)))
        .collect();
    out0.sort();
    assert_eq!(out0, vec![(0, Some(0), true), (1, Some(3), false)]);
    let s = red.stats();
    assert_eq!((s.drop(Drop::NoRoute), s.neigh_miss, s.punted), (1, 1, 1));
    let g = rig.dp.vr("green").unwrap().stats();
    assert_eq!((g.tx_packets, g.total_drops(), g.punted), (2, 0, 0));
    let p = red.punt_recv().unwrap();
    assert_eq!(find_tag(rig.pool.frame(&p)), Some(1));
    rig.pool.free(p);
    assert_eq!(rig.in_use(), 0);
}
