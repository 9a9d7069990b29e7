//! The differential test of `reference.rs` for several VRs sharing ports: five VRs with the
//! same addresses, routes and neighbour addresses, told apart by demux alone. Its purpose is
//! to find frames that reach the wrong VR, reach a VR twice or not at all, are matched on the
//! wrong VLAN tag, or leave by another VR's VIF; what each VR does with what it gets is
//! checked against the same model of one VR as there (`reference/model.rs`).
//!
//! Each VR has the reference VR's four VIFs, on the same ports and with the same addresses:
//! a on port 0, b on port 1, c and d on port 2. VR r0 is the reference VR (a untagged, b VLAN
//! 7, c untagged, d VLAN 9). VR r1 has r0's ports and VLANs and MACs of its own: only the
//! destination MAC tells r0 and r1 apart (macvlan). VR r2 has r0's MACs on other VLANs (a
//! VLAN 5, b VLAN 8, c VLAN 9, d untagged): only the VLAN tells r0 and r2 apart, r2's c shares
//! port 2's VLAN 9 with r0's and r1's d, and r2's d the untagged port 2 with their c; r2's b
//! and c own their VLANs (`DemuxKey::Vlan`), c beside other VRs' MAC-keyed VIFs. r3 and r4
//! share one MAC on port 0 (their a) and one on port 1 VLAN 7 (their b), split by match rules
//! (see `KEYS`); r3's c and d are both on port 2 VLAN 9, two MACs of one VR on one segment.
//! Every VR's neighbours have the same addresses with MACs of its own, and r1 and r2 start
//! with a few routes and an MTU changed, so that one VR's tables used for another's frame show.
//!
//! The demux model follows the data plane's documented policy (the docs of `src/demux.rs`, and
//! of `vrhost-wire`'s `vlan` module for tags), decided from its own tables. A frame is matched
//! on its port, its outer tag's VLAN (C-tag 0x8100 or S-tag 0x88a8; an inner C-tag is not
//! looked at; VID 0, a priority tag, is no VLAN, IEEE 802.1Q) and its destination MAC. A
//! unicast frame goes to the one MAC- or VLAN-keyed VIF with that port, VLAN and MAC (a VLAN
//! owner takes its MAC, not every MAC on its VLAN: `DemuxKey::Vlan`), else to the first VIF
//! added whose rule takes it, by the fields `flow.rs` documents (ARP by its addresses alone,
//! and a copy to every VIF whose rule takes it; other frames only by a rule with no field
//! set: `MatchRule`); a broadcast or multicast frame to every VIF on that port and VLAN, rules
//! or not, one copy each (macvlan bridge mode), so two to r3 on port 2 VLAN 9; no VIF: a
//! `no-vr` drop at demux. A third tag, an S-tag inside another tag, and a frame that ends
//! inside its tags are refused (`l2-truncated`): forwarding on the wrong VLAN is worse than a
//! counted drop.
//!
//! What is checked, per frame: a drop at demux, with its reason, and then that no VR did
//! anything; or, per VR, that it received exactly the copy the model gives it (VR and VIF
//! receive counters) or none, and for a VR with a copy all that `reference.rs` checks, with
//! that VR's own VIFs, tags and neighbour MACs: frames sent (each attributed to the VIF that
//! sent it by port, VLAN and source MAC; VIFs sharing a MAC by rules, by their transmit
//! counters), packets punted, drops counted. A VR with two copies has what it did split
//! between them (`check_copies`). A VR without a copy sends, punts and counts nothing; a
//! frame that no VIF could have sent is a failure. So a forwarded frame or an ICMP error leaves with its VIF's one tag
//! or none, whatever tags came in, and nothing of one VR leaves as another VR's VIF.
//!
//! Frames have `reference.rs`'s bodies, sent to any VIF of any VR with its own tag (a C-tag),
//! the same VLAN in an S-tag, a wrong one, none, a priority tag, QinQ (an S-tag or a C-tag
//! over a C-tag), three tags or an S-tag inside, with random priority and drop-eligible bits;
//! to its MAC, another VIF's, a stranger's, broadcast or multicast. A run is a fresh set of
//! VRs and up to five steps: frames (some after a clean copy that warms caches) and
//! control-plane changes, each to one VR. Each frame is sent alone, as in `reference.rs`.
//! Bursts are a second property: up to eight ARP frames sent at once on one port, which demux
//! takes in one pass, each punted as received by every VR that gets it, so that the punts
//! tell which VIF got which frame. 400 runs and 100 bursts by default (`PROPTEST_CASES` sets
//! the number of runs, a quarter of it the bursts): about 1.5 s in release. Fixed cases
//! check that `add_vif` refuses clashing keys and that wrong models of the above are caught;
//! the last tests reproduce where demux does not do what its docs say (they fail).

mod common;
#[path = "reference/frames.rs"]
mod frames;
#[path = "reference/model.rs"]
#[macro_use]
mod model;

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use common::*;
use frames::*;
use model::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;
use vrhost_dataplane::{DemuxKey, Drop, IpPrefix, MatchRule, Vr, VrStats};
use vrhost_fib::{Prefix4, Prefix6};

// ---------------------------------------------------------------------------------------
// The VRs.
// ---------------------------------------------------------------------------------------

const NVR: usize = 5;

const NAMES: [&str; NVR] = ["r0", "r1", "r2", "r3", "r4"];

/// VIF `i` of the reference VR with another MAC and VLAN.
const fn like(i: usize, mac: Mac, vlan: Option<u16>) -> VifDef {
    VifDef {
        name: VIFS[i].name,
        port: VIFS[i].port,
        vlan,
        mac,
        mtu: VIFS[i].mtu,
        v4: VIFS[i].v4,
        v6: VIFS[i].v6,
    }
}

/// A MAC of VR `vr`: r0's with byte 3 set to `vr`.
const fn vr_mac(vr: u8, last: u8) -> Mac {
    [0x02, 0, 0, vr, 0, last]
}

/// The MAC r3's and r4's VIF a share (port 0, untagged), and that their VIF b share (port 1,
/// VLAN 7): match rules tell them apart.
const SHARED_A: Mac = vr_mac(3, 0x0a);
const SHARED_B: Mac = vr_mac(3, 0x0b);

/// r0 as the reference VR; r1 on r0's ports and VLANs with its own MACs; r2 with r0's MACs on
/// other VLANs; r3 and r4 sharing a MAC on port 0 and one on port 1 VLAN 7, r3 with c and d
/// both on port 2 VLAN 9, r4 with c and d on r0's VLANs.
static VRS: [Vifs; NVR] = [
    VIFS,
    [
        like(0, vr_mac(1, 0x0a), None),
        like(1, vr_mac(1, 0x0b), Some(7)),
        like(2, vr_mac(1, 0x0c), None),
        like(3, vr_mac(1, 0x0d), Some(9)),
    ],
    [
        like(0, VIFS[0].mac, Some(5)),
        like(1, VIFS[1].mac, Some(8)),
        like(2, VIFS[2].mac, Some(9)),
        like(3, VIFS[3].mac, None),
    ],
    [
        like(0, SHARED_A, None),
        like(1, SHARED_B, Some(7)),
        like(2, vr_mac(3, 0x0c), Some(9)),
        like(3, vr_mac(3, 0x0d), Some(9)),
    ],
    [
        like(0, SHARED_A, None),
        like(1, SHARED_B, Some(7)),
        like(2, vr_mac(4, 0x0c), None),
        like(3, vr_mac(4, 0x0d), Some(9)),
    ],
];

/// How a VIF is demuxed (`DemuxKey`, in a form the model can hold in a constant).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Key {
    Mac,
    Vlan,
    Rule(Rule),
}

/// A match rule: prefixes as (address, length); `None` matches anything.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rule {
    dst: Option<(IpAddr, u8)>,
    src: Option<(IpAddr, u8)>,
    protocol: Option<u8>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
}

const ANY: Rule = Rule {
    dst: None,
    src: None,
    protocol: None,
    src_port: None,
    dst_port: None,
};

/// r2's b and c own their VLANs (8 on port 1; 9 on port 2, where r0's, r1's, r3's and r4's
/// MAC-keyed VIFs are too). On the MAC r3's and r4's a share, r3 (added first) takes UDP to
/// port 53 in 128.0.0.0/1, r4 the rest of 128.0.0.0/1; on the one their b share, r3 takes
/// what comes from port 12345 in 2001:db8::/32, r4 the rest to 2001:db8::/32. Every rule has
/// a prefix, and none holds the addresses of the ARP frames sent (ARP to a rule's MAC is
/// matched on its addresses, a copy to each rule that takes it:
/// `arp_is_matched_on_its_addresses_alone` and
/// `an_arp_to_a_mac_that_rules_share_reaches_every_vr_whose_rule_takes_it` cover that).
static KEYS: [[Key; 4]; NVR] = [
    [Key::Mac; 4],
    [Key::Mac; 4],
    [Key::Mac, Key::Vlan, Key::Vlan, Key::Mac],
    [
        Key::Rule(Rule {
            dst: Some((a4(v4(128, 0, 0, 0)), 1)),
            protocol: Some(17),
            dst_port: Some(53),
            ..ANY
        }),
        Key::Rule(Rule {
            src: Some((a6(db8(0, 0)), 32)),
            src_port: Some(12345),
            ..ANY
        }),
        Key::Mac,
        Key::Mac,
    ],
    [
        Key::Rule(Rule {
            dst: Some((a4(v4(128, 0, 0, 0)), 1)),
            ..ANY
        }),
        Key::Rule(Rule {
            dst: Some((a6(db8(0, 0)), 32)),
            ..ANY
        }),
        Key::Mac,
        Key::Mac,
    ],
];

fn prefix((a, len): (IpAddr, u8)) -> IpPrefix {
    match a {
        IpAddr::V4(a) => IpPrefix::V4(Prefix4::new_masked(a, len)),
        IpAddr::V6(a) => IpPrefix::V6(Prefix6::new_masked(a, len)),
    }
}

impl Key {
    fn demux_key(self) -> DemuxKey {
        match self {
            Key::Mac => DemuxKey::Mac,
            Key::Vlan => DemuxKey::Vlan,
            Key::Rule(r) => DemuxKey::Rule(MatchRule {
                dst: r.dst.map(prefix),
                src: r.src.map(prefix),
                protocol: r.protocol,
                src_port: r.src_port,
                dst_port: r.dst_port,
            }),
        }
    }
}

/// How r1 and r2 start apart from the reference VR: 198.51.100.0/24 leaves r1 by c and is a
/// blackhole in r2; r1 has a route to 8.0.0.0/8 and an `unreachable` 2001:db8:100::/48; r2 a
/// route to 2001:db8:dead::/48 and MTU 1280 on b.
const SETUP: [&[Event]; NVR] = [
    &[],
    &[
        Event::Route4(
            v4(198, 51, 100, 0),
            24,
            Some(R::Via(2, a4(v4(10, 3, 0, 2)))),
        ),
        Event::Route4(v4(8, 0, 0, 0), 8, Some(R::Via(1, a4(v4(10, 2, 0, 2))))),
        Event::Route6(db8(0x100, 0), 48, Some(R::Unreachable)),
    ],
    &[
        Event::Route4(v4(198, 51, 100, 0), 24, Some(R::Blackhole)),
        Event::Route6(db8(0xdead, 0), 48, Some(R::Via(1, a6(ll6(0xb2))))),
        Event::Mtu(1, 1280),
    ],
    &[],
    &[],
];

/// A neighbour's MAC in VR `vr`: the reference VR's with byte 3 set to `vr`.
fn own_mac(vr: usize, mut m: Mac) -> Mac {
    m[3] = vr as u8;
    m
}

/// The change `e` (written for the reference VR) as made in VR `vr`: with its neighbour MACs.
fn in_vr(vr: usize, e: Event) -> Event {
    match e {
        Event::Neigh(v, a, m) => Event::Neigh(v, a, m.map(|m| own_mac(vr, m))),
        e => e,
    }
}

/// The model's state of each VR at the start.
fn initial() -> Vec<Net> {
    (0..NVR)
        .map(|r| {
            let mut net = Net::initial(&VRS[r]);
            for n in &mut net.neigh {
                n.2 = own_mac(r, n.2);
            }
            for &e in SETUP[r] {
                net.apply(in_vr(r, e));
            }
            net
        })
        .collect()
}

/// The VRs `nets` on a fresh rig with three ports.
fn build(flow_cache: bool, nets: &[Net]) -> (Rig, Vec<Arc<Vr>>) {
    let mut rig = Rig::with(PORTS, 512, 256);
    let vrs = nets
        .iter()
        .zip(NAMES)
        .enumerate()
        .map(|(r, (net, name))| {
            add_vr_keyed(&mut rig, name, net, flow_cache, |i| KEYS[r][i].demux_key())
        })
        .collect();
    rig.worker.poll();
    (rig, vrs)
}

// ---------------------------------------------------------------------------------------
// The model: demux, then each VR's copy as the single-VR model has it.
// ---------------------------------------------------------------------------------------

/// Where demux sends a frame.
enum Demux {
    /// Nowhere: dropped, counted under this reason.
    Drop(Drop),
    /// By VR: a copy to each of its VIFs that takes it, in the order added.
    To(Vec<Vec<Rx>>),
}

const C_TAG: u16 = 0x8100;
const S_TAG: u16 = 0x88a8;

/// Demux by the documented policy: port, outer VLAN (VID 0 is none), destination MAC; a group
/// frame to every VIF on the port and VLAN. Two tags at most, an S-tag only outermost.
/// Unicast: the MAC- or VLAN-keyed VIF with that MAC (`add_vif` allows one, and no rule on
/// it), else the first VIF added whose rule takes the frame.
fn demux(port: usize, f: &[u8]) -> Demux {
    if f.len() < 14 {
        return Demux::Drop(Drop::L2Truncated);
    }
    let mut ethertype = be16(&f[12..]);
    let mut l3 = 14;
    let mut vid = 0;
    let mut tags = 0;
    while ethertype == C_TAG || ethertype == S_TAG {
        if tags == 2 || (tags == 1 && ethertype == S_TAG) || f.len() < l3 + 4 {
            return Demux::Drop(Drop::L2Truncated);
        }
        if tags == 0 {
            vid = be16(&f[l3..]) & 0xfff;
        }
        ethertype = be16(&f[l3 + 2..]);
        l3 += 4;
        tags += 1;
    }
    let vlan = (vid != 0).then_some(vid);
    let group = f[0] & 1 != 0;
    let rx = |vif| Rx {
        vif,
        ethertype,
        l3,
        group,
        smac: f[6..12].try_into().unwrap(),
    };
    // Every VIF on this port and VLAN (to this MAC), in the order added: VR by VR.
    let here: Vec<(usize, usize)> = (0..NVR)
        .flat_map(|r| (0..VIFS.len()).map(move |i| (r, i)))
        .filter(|&(r, i)| {
            let d = &VRS[r][i];
            usize::from(d.port) == port && d.vlan == vlan && (group || f[..6] == d.mac)
        })
        .collect();
    let take: Vec<(usize, usize)> = if group {
        here
    } else {
        let flow = flow_key(ethertype, &f[l3..]);
        let takes = |&&(r, i): &&(usize, usize)| match KEYS[r][i] {
            Key::Rule(rule) => rule.takes(flow.as_ref()),
            _ => false,
        };
        match here
            .iter()
            .find(|&&(r, i)| !matches!(KEYS[r][i], Key::Rule(_)))
        {
            Some(one) => vec![*one],
            // ARP names no protocol or ports: a copy to every rule that takes it.
            None if flow.as_ref().is_some_and(|k| !k.ip) => {
                here.iter().filter(takes).copied().collect()
            }
            None => here.iter().find(takes).into_iter().copied().collect(),
        }
    };
    if take.is_empty() {
        return Demux::Drop(Drop::NoVr);
    }
    let mut to: Vec<Vec<Rx>> = (0..NVR).map(|_| Vec::new()).collect();
    for (r, i) in take {
        to[r].push(rx(i));
    }
    Demux::To(to)
}

/// What a match rule reads of a packet.
struct Flow {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    src_port: u16,
    dst_port: u16,
    /// IP (else ARP: only the addresses count).
    ip: bool,
}

/// The addresses, protocol and ports of an IP packet, as `flow.rs` documents them: none if
/// the IP header (IPv6: or its extension header chain, within the packet) cannot be read;
/// ports 0 for a fragment (IPv6: not an atomic one), for a protocol without ports and for an
/// L4 header not in the packet. For an ARP frame (Ethernet and IPv4 address lengths), its
/// sender and target protocol addresses as source and destination (`MatchRule`'s docs).
fn flow_key(ethertype: u16, p: &[u8]) -> Option<Flow> {
    let ports = |proto: u8, l4: &[u8], frag: bool| {
        if [6, 17, 132].contains(&proto) && !frag && l4.len() >= 4 {
            (be16(l4), be16(&l4[2..]))
        } else {
            (0, 0)
        }
    };
    match ethertype {
        0x0800 => {
            if p.len() < 20 || p[0] >> 4 != 4 || p[0] & 0xf < 5 {
                return None;
            }
            let ihl = usize::from(p[0] & 0xf) * 4;
            if ihl > p.len() {
                return None;
            }
            let end = usize::from(be16(&p[2..])).clamp(ihl, p.len());
            let (src_port, dst_port) = ports(p[9], &p[ihl..end], be16(&p[6..]) & 0x3fff != 0);
            Some(Flow {
                src: a4(ip4(&p[12..])),
                dst: a4(ip4(&p[16..])),
                protocol: p[9],
                src_port,
                dst_port,
                ip: true,
            })
        }
        0x86dd => {
            if p.len() < 40 || p[0] >> 4 != 6 || 40 + usize::from(be16(&p[4..])) > p.len() {
                return None;
            }
            let p = &p[..40 + usize::from(be16(&p[4..]))];
            let (mut nh, mut off, mut frag) = (p[6], 40, false);
            // RFC 8200 §4: Hop-by-Hop (first only), Routing, Fragment, Destination Options,
            // AH and the rest of the IANA list.
            while [0, 43, 44, 51, 60, 135, 139, 140, 253, 254].contains(&nh) {
                if nh == 0 && off != 40 || off + 8 > p.len() {
                    return None;
                }
                let len = match nh {
                    44 => 8,
                    51 => (usize::from(p[off + 1]) + 2) * 4,
                    _ => (usize::from(p[off + 1]) + 1) * 8,
                };
                if off + len > p.len() {
                    return None;
                }
                let next = p[off];
                if nh == 44 {
                    let (offset, more) = (be16(&p[off + 2..]) >> 3, p[off + 3] & 1 != 0);
                    frag = offset != 0 || more;
                    if offset != 0 {
                        nh = next;
                        off += len;
                        break;
                    }
                }
                nh = next;
                off += len;
            }
            let (src_port, dst_port) = ports(nh, &p[off..], frag);
            Some(Flow {
                src: a6(ip6(&p[8..])),
                dst: a6(ip6(&p[24..])),
                protocol: nh,
                src_port,
                dst_port,
                ip: true,
            })
        }
        0x0806 if p.len() >= 28 && p[4] == 6 && p[5] == 4 => Some(Flow {
            src: a4(ip4(&p[14..])),
            dst: a4(ip4(&p[24..])),
            protocol: 0,
            src_port: 0,
            dst_port: 0,
            ip: false,
        }),
        _ => None,
    }
}

fn in_prefix(a: IpAddr, (net, len): (IpAddr, u8)) -> bool {
    match (a, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

impl Rule {
    /// Whether the rule takes a packet with these fields (`None`: neither IP nor ARP, or
    /// unreadable, which only a rule with no field set takes): every field set matches; for
    /// ARP only the address fields are looked at.
    fn takes(&self, flow: Option<&Flow>) -> bool {
        let Some(k) = flow else {
            return *self == ANY;
        };
        self.dst.is_none_or(|p| in_prefix(k.dst, p))
            && self.src.is_none_or(|p| in_prefix(k.src, p))
            && (!k.ip
                || self.protocol.is_none_or(|p| p == k.protocol)
                    && self.src_port.is_none_or(|p| p == k.src_port)
                    && self.dst_port.is_none_or(|p| p == k.dst_port))
    }
}

/// What must become of one frame.
enum Want {
    /// Dropped at demux, for this reason.
    Demux(Drop),
    /// Per VR: for each copy it gets (none, one, or one per VIF that takes a group frame),
    /// the VIF that receives it and what the VR does with it.
    Vrs(Vec<Vec<(usize, Expect)>>),
}

/// The model: what becomes of `frame` arriving on `port`, with the VRs as `nets` has them.
fn model(nets: &[Net], port: usize, frame: &[u8]) -> Want {
    match demux(port, frame) {
        Demux::Drop(d) => Want::Demux(d),
        Demux::To(to) => Want::Vrs(
            to.iter()
                .zip(nets)
                .map(|(rxs, net)| {
                    rxs.iter()
                        .map(|rx| (rx.vif, vr_model(net, rx, frame)))
                        .collect()
                })
                .collect(),
        ),
    }
}

impl Want {
    fn summary(&self) -> String {
        match self {
            Want::Demux(d) => format!("dropped at demux ({})", d.name()),
            Want::Vrs(v) => {
                let mut s = String::new();
                for (r, copies) in v.iter().enumerate() {
                    if copies.is_empty() {
                        let _ = write!(s, "\n  VR {}: no copy", NAMES[r]);
                    }
                    for (vif, e) in copies {
                        let _ = write!(
                            s,
                            "\n  VR {} (VIF {}): {}",
                            NAMES[r],
                            VIFS[*vif].name,
                            e.summary()
                        );
                    }
                }
                s
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the data plane did with one frame.
// ---------------------------------------------------------------------------------------

/// Counters before a frame.
struct Before {
    vif_rx: Vec<[u64; 4]>,
    vif_tx: Vec<[u64; 4]>,
    vr: Vec<VrStats>,
    demux: Vec<u64>,
}

/// Frames received (`tx` false) or sent by each VIF of VR `name`.
fn vif_count(rig: &Rig, name: &str, tx: bool) -> [u64; 4] {
    let mut n = [0; 4];
    for v in rig.dp.vifs(name).unwrap() {
        let s = v.stats();
        n[usize::from(v.id)] = if tx { s.tx_packets } else { s.rx_packets };
    }
    n
}

fn before(rig: &Rig, vrs: &[Arc<Vr>]) -> Before {
    Before {
        vif_rx: NAMES.iter().map(|n| vif_count(rig, n, false)).collect(),
        vif_tx: NAMES.iter().map(|n| vif_count(rig, n, true)).collect(),
        vr: vrs.iter().map(|v| v.stats()).collect(),
        demux: rig.dp.demux_drops().to_vec(),
    }
}

/// What came of one frame: per VR as `reference.rs` observes its one VR (the demux drops
/// in each) and which of its VIFs sent each frame it sent, what each VR and its VIFs
/// received, and the frames no VIF could have sent.
struct Seen {
    vrs: Vec<Observed>,
    out_vif: Vec<Vec<usize>>,
    vr_rx: Vec<u64>,
    vif_rx: Vec<[u64; 4]>,
    demux: Vec<(Drop, u64)>,
    stray: Vec<(usize, Vec<u8>)>,
}

/// The VIF (VR, VIF) that sent `f` out of `port`: the one with that port, outer VLAN and
/// source MAC. Only VIFs with match rules share one (demux allows no other two); of those, one
/// whose transmit counter grew by more than the frames already put down to it (`sent`).
fn sender(port: usize, f: &[u8], sent: &mut [[u64; 4]]) -> Option<(usize, usize)> {
    if f.len() < 14 {
        return None;
    }
    let vlan = match be16(&f[12..]) {
        C_TAG | S_TAG if f.len() < 16 => return None,
        C_TAG | S_TAG => Some(be16(&f[14..]) & 0xfff),
        _ => None,
    };
    let from: Vec<(usize, usize)> = (0..NVR)
        .flat_map(|r| (0..VIFS.len()).map(move |i| (r, i)))
        .filter(|&(r, i)| {
            let d = &VRS[r][i];
            usize::from(d.port) == port && d.vlan == vlan && f[6..12] == d.mac
        })
        .collect();
    let (r, i) = match from[..] {
        [one] => one,
        _ => *from
            .iter()
            .find(|&&(r, i)| sent[r][i] > 0)
            .or(from.first())?,
    };
    sent[r][i] = sent[r][i].saturating_sub(1);
    Some((r, i))
}

fn grew(now: impl Fn(Drop) -> u64, then: impl Fn(Drop) -> u64) -> Vec<(Drop, u64)> {
    Drop::ALL
        .iter()
        .filter(|d| now(**d) != then(**d))
        .map(|d| (*d, now(*d) - then(*d)))
        .collect()
}

fn observe(rig: &mut Rig, vrs: &[Arc<Vr>], b: &Before) -> Seen {
    let dm = rig.dp.demux_drops();
    let demux = grew(|d| dm[d as usize], |d| b.demux[d as usize]);
    let mut seen = Seen {
        vrs: Vec::new(),
        out_vif: vec![Vec::new(); NVR],
        vr_rx: Vec::new(),
        vif_rx: Vec::new(),
        demux: demux.clone(),
        stray: Vec::new(),
    };
    for (r, vr) in vrs.iter().enumerate() {
        let mut punts = Vec::new();
        while let Some(p) = vr.punt_recv() {
            let vif = usize::from(rig.pool.meta(&p).vif);
            punts.push((vif, rig.pool.frame(&p).to_vec()));
            rig.pool.free(p);
        }
        let (s, then) = (vr.stats(), &b.vr[r]);
        let rx = vif_count(rig, NAMES[r], false);
        seen.vif_rx
            .push(std::array::from_fn(|i| rx[i] - b.vif_rx[r][i]));
        seen.vr_rx.push(s.rx_packets - then.rx_packets);
        seen.vrs.push(Observed {
            out: Vec::new(),
            punts,
            drops: grew(|d| s.drop(d), |d| then.drop(d)),
            demux: demux.clone(),
            icmp_sent: s.icmp_sent - then.icmp_sent,
        });
    }
    let mut tx: Vec<[u64; 4]> = (0..NVR)
        .map(|r| {
            let now = vif_count(rig, NAMES[r], true);
            std::array::from_fn(|i| now[i] - b.vif_tx[r][i])
        })
        .collect();
    for p in 0..PORTS {
        for f in rig.recv(p) {
            match sender(p, &f, &mut tx) {
                Some((r, i)) => {
                    seen.vrs[r].out.push((p, f));
                    seen.out_vif[r].push(i);
                }
                None => seen.stray.push((p, f)),
            }
        }
    }
    seen
}

impl Seen {
    fn summary(&self) -> String {
        let mut s = String::new();
        for (p, f) in &self.stray {
            let _ = write!(s, "\n  sent on port {p} by no VIF: {}", describe(f));
        }
        let names: Vec<String> = self
            .demux
            .iter()
            .map(|(d, n)| format!("{}×{n}", d.name()))
            .collect();
        let _ = write!(s, "\n  demux drops {names:?}");
        for (r, o) in self.vrs.iter().enumerate() {
            let _ = write!(
                s,
                "\n  VR {}: received {} (VIFs {:?});{}",
                NAMES[r],
                self.vr_rx[r],
                self.vif_rx[r],
                o.summary().replace("\n  ", "\n    ")
            );
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// Checking.
// ---------------------------------------------------------------------------------------

/// `seen` against `want`; what differs, if anything.
fn compare(want: &Want, seen: &Seen, sent: &[u8]) -> Result<(), String> {
    ensure!(
        seen.stray.is_empty(),
        "{} frame(s) sent that no VIF sends",
        seen.stray.len()
    );
    match want {
        Want::Demux(reason) => {
            ensure!(
                seen.demux == [(*reason, 1)],
                "not one demux drop counted as {}",
                reason.name()
            );
            (0..NVR).try_for_each(|r| {
                check(&VRS[r], &Expect::DemuxDrop, &seen.vrs[r], sent)
                    .map_err(|w| format!("VR {}: {w}", NAMES[r]))?;
                untouched(seen, r)
            })
        }
        Want::Vrs(v) => v.iter().enumerate().try_for_each(|(r, copies)| {
            if copies.is_empty() {
                return untouched(seen, r);
            }
            let mut rx = [0; 4];
            for (vif, _) in copies {
                rx[*vif] += 1;
            }
            ensure!(
                seen.vr_rx[r] == copies.len() as u64 && seen.vif_rx[r] == rx,
                "VR {} received {} frame(s), on VIFs {:?}, not {rx:?}",
                NAMES[r],
                seen.vr_rx[r],
                seen.vif_rx[r]
            );
            match &copies[..] {
                [(_, e)] => check(&VRS[r], e, &seen.vrs[r], sent),
                _ => check_copies(r, copies, seen, sent),
            }
            .map_err(|w| format!("VR {}: {w}", NAMES[r]))
        }),
    }
}

/// VR `r` got several copies (a group frame to two of its VIFs): what it did is split
/// between them and each part checked as `reference.rs` checks one frame. Punts are split by
/// the VIF they note, frames sent by the VIF that sent them (a copy of a group frame is never
/// forwarded: all it may send is an error back out of its own VIF), and the drops and errors
/// sent the VR counted are shared out every way there is: one way must agree with every copy.
fn check_copies(
    r: usize,
    copies: &[(usize, Expect)],
    seen: &Seen,
    sent: &[u8],
) -> Result<(), String> {
    let o = &seen.vrs[r];
    if let Some(i) = seen.out_vif[r]
        .iter()
        .find(|i| copies.iter().all(|(vif, _)| vif != *i))
    {
        return Err(format!("sent by VIF {}, which got no copy", VIFS[*i].name));
    }
    // Each drop counted, and each error sent (`None`), goes to one copy.
    let units: Vec<Option<Drop>> = o
        .drops
        .iter()
        .flat_map(|&(d, n)| std::iter::repeat_n(Some(d), n as usize))
        .chain(std::iter::repeat_n(None, o.icmp_sent as usize))
        .collect();
    let ways = copies.len().pow(units.len() as u32);
    let mut first_why = None;
    for way in 0..ways {
        let mut owner = way;
        let mut parts: Vec<Observed> = copies
            .iter()
            .map(|(vif, _)| Observed {
                out: o
                    .out
                    .iter()
                    .zip(&seen.out_vif[r])
                    .filter(|(_, i)| *i == vif)
                    .map(|(f, _)| f.clone())
                    .collect(),
                punts: o.punts.iter().filter(|(i, _)| i == vif).cloned().collect(),
                drops: Vec::new(),
                demux: o.demux.clone(),
                icmp_sent: 0,
            })
            .collect();
        for u in &units {
            let part = &mut parts[owner % copies.len()];
            owner /= copies.len();
            match u {
                None => part.icmp_sent += 1,
                Some(d) => match part.drops.iter_mut().find(|(x, _)| x == d) {
                    Some((_, n)) => *n += 1,
                    None => part.drops.push((*d, 1)),
                },
            }
        }
        let why = copies.iter().zip(&parts).try_for_each(|((vif, e), part)| {
            check(&VRS[r], e, part, sent)
                .map_err(|w| format!("copy to VIF {}: {w}", VIFS[*vif].name))
        });
        match why {
            Ok(()) => return Ok(()),
            Err(w) => {
                first_why.get_or_insert(w);
            }
        }
    }
    Err(first_why.unwrap_or_default())
}

/// VR `r` had no copy: it received, sent, punted and counted nothing.
fn untouched(seen: &Seen, r: usize) -> Result<(), String> {
    let o = &seen.vrs[r];
    ensure!(
        seen.vr_rx[r] == 0 && seen.vif_rx[r] == [0; 4],
        "VR {} received {} frame(s) (VIFs {:?}), the model gives it none",
        NAMES[r],
        seen.vr_rx[r],
        seen.vif_rx[r]
    );
    ensure!(
        o.out.is_empty() && o.punts.is_empty() && o.drops.is_empty() && o.icmp_sent == 0,
        "VR {} sent, punted or dropped without a copy",
        NAMES[r]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Frames.
// ---------------------------------------------------------------------------------------

/// The tags a frame comes with, for the VIF it is sent to.
#[derive(Debug, Clone, Copy)]
enum Tags {
    /// The VIF's own, as a C-tag (none for an untagged VIF).
    Right,
    /// The VIF's VLAN (0 for an untagged VIF) in an S-tag alone.
    STag,
    /// QinQ: an outer S-tag (or C-tag) with VLAN `outer` (`None`: the VIF's, 0 for an
    /// untagged VIF) over a C-tag with VLAN `inner`.
    QinQ {
        s_tag: bool,
        outer: Option<u16>,
        inner: u16,
    },
    Untagged,
    /// A priority tag (VID 0), over a C-tag with this VLAN or not.
    Priority(Option<u16>),
    /// A C-tag with this VLAN.
    Vlan(u16),
    /// Three tags, the VIF's VLAN outermost.
    Three,
    /// A C-tag with the VIF's VLAN over an S-tag.
    STagInside,
}

/// The destination MAC.
#[derive(Debug, Clone, Copy)]
enum Dst {
    /// The VIF's.
    Vif,
    /// That of VIF (VR, VIF).
    Of(usize, usize),
    Broadcast,
    /// 01:00:5e:00:00:01.
    Mcast4,
    /// 33:33:00:00:00:01.
    Mcast6,
    /// A unicast MAC nobody has.
    Stranger,
}

#[derive(Debug, Clone)]
struct MFrame {
    /// The VIF (VR, VIF) it is sent to: it arrives on that VIF's port, and `tags` and `dst`
    /// are picked for it.
    to: (usize, usize),
    tags: Tags,
    /// The tags' priority and drop-eligible bits (PCP and DEI, the TCI's top four).
    prio: u8,
    dst: Dst,
    body: Body,
    smac: Mac,
    pad: (usize, u8),
    cut: Cut,
}

/// The frame and the port it is sent on.
fn build_frame(f: &MFrame, tag: u32) -> (usize, Vec<u8>) {
    let d = &VRS[f.to.0][f.to.1];
    let dst: Mac = match f.dst {
        Dst::Vif => d.mac,
        Dst::Of(r, i) => VRS[r][i].mac,
        Dst::Broadcast => [0xff; 6],
        Dst::Mcast4 => [0x01, 0, 0x5e, 0, 0, 1],
        Dst::Mcast6 => [0x33, 0x33, 0, 0, 0, 1],
        Dst::Stranger => [0x02, 0, 0, 0x99, 0, 0x99],
    };
    let own = d.vlan.unwrap_or(0);
    let tags: Vec<(u16, u16)> = match f.tags {
        Tags::Right => d.vlan.map(|v| (C_TAG, v)).into_iter().collect(),
        Tags::STag => vec![(S_TAG, own)],
        Tags::QinQ {
            s_tag,
            outer,
            inner,
        } => {
            let tpid = if s_tag { S_TAG } else { C_TAG };
            vec![(tpid, outer.unwrap_or(own)), (C_TAG, inner)]
        }
        Tags::Untagged => vec![],
        Tags::Priority(inner) => [(C_TAG, 0)]
            .into_iter()
            .chain(inner.map(|v| (C_TAG, v)))
            .collect(),
        Tags::Vlan(v) => vec![(C_TAG, v)],
        Tags::Three => vec![(S_TAG, own), (C_TAG, 7), (C_TAG, 9)],
        Tags::STagInside => vec![(C_TAG, own), (S_TAG, 7)],
    };
    let (ty, l3) = l3_of(&f.body, tag);
    let mut frame = Vec::with_capacity(22 + l3.len() + f.pad.0);
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&f.smac);
    for (tpid, vid) in tags {
        frame.extend_from_slice(&tpid.to_be_bytes());
        frame.extend_from_slice(&(vid | u16::from(f.prio) << 12).to_be_bytes());
    }
    frame.extend_from_slice(&ty.to_be_bytes());
    frame.extend_from_slice(&l3);
    pad_and_cut(&mut frame, f.pad, f.cut);
    (usize::from(d.port), frame)
}

/// A clean, forwardable copy of `f` to the same VIF (its own tag, its MAC), to warm caches.
fn warm_copy(f: &MFrame) -> Option<MFrame> {
    Some(MFrame {
        tags: Tags::Right,
        prio: 0,
        dst: Dst::Vif,
        body: warm_body(&f.body)?,
        pad: (0, 0),
        cut: Cut::None,
        ..f.clone()
    })
}

/// One step of a run.
#[derive(Debug, Clone)]
enum Step {
    Frame(MFrame),
    /// A change in one VR.
    Event(usize, Event),
}

/// Run `steps` through fresh VRs, each frame alone and checked against the model; the first
/// difference, if any.
fn run(flow_cache: bool, steps: &[Step]) -> Result<(), String> {
    let nets = initial();
    let (mut rig, vrs) = build(flow_cache, &nets);
    run_on(&mut rig, &vrs, nets, flow_cache, steps)
}

/// [`run`] on VRs already built, as `nets` has them.
fn run_on(
    rig: &mut Rig,
    vrs: &[Arc<Vr>],
    mut nets: Vec<Net>,
    flow_cache: bool,
    steps: &[Step],
) -> Result<(), String> {
    let mut events = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let f = match step {
            Step::Event(r, e) => {
                let e = in_vr(*r, *e);
                nets[*r].apply(e);
                apply(rig, &vrs[*r], e);
                events.push((NAMES[*r], e));
                continue;
            }
            Step::Frame(f) => f,
        };
        let (port, frame) = build_frame(f, i as u32 + 1);
        let want = model(&nets, port, &frame);
        let b = before(rig, vrs);
        rig.send(port, &frame);
        rig.run();
        let seen = observe(rig, vrs, &b);
        if let Err(why) = compare(&want, &seen, &frame) {
            return Err(format!(
                "step {i} of {} (flow cache {flow_cache}, after changes {events:?}), \
                 on port {port}: {}\n{}\n{f:?}\nmodel:{}\ndata plane:{}\nmismatch: {why}",
                steps.len(),
                describe(&frame),
                hex(&frame),
                want.summary(),
                seen.summary()
            ));
        }
        if rig.in_use() != 0 {
            return Err(format!("step {i}: {} pool slots leaked", rig.in_use()));
        }
    }
    Ok(())
}

/// `frames` agree with the model, one after the other on one set of VRs.
#[track_caller]
fn assert_agrees(flow_cache: bool, frames: &[MFrame]) {
    let steps: Vec<Step> = frames.iter().cloned().map(Step::Frame).collect();
    if let Err(e) = run(flow_cache, &steps) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------
// Generators.
// ---------------------------------------------------------------------------------------

/// VLANs to tag with: the VRs' (on some port), 0 and one nobody has.
const VIDS: &[u16] = &[0, 5, 7, 8, 9, 100];

/// A VIF: (VR, VIF).
fn any_vif() -> impl Strategy<Value = (usize, usize)> {
    (0..NVR, 0..VIFS.len())
}

fn tags() -> impl Strategy<Value = Tags> {
    prop_oneof![
        24 => Just(Tags::Right),
        2 => Just(Tags::STag),
        6 => (
            any::<bool>(),
            prop_oneof![3 => Just(None), 1 => select(VIDS).prop_map(Some)],
            select(VIDS),
        )
            .prop_map(|(s_tag, outer, inner)| Tags::QinQ { s_tag, outer, inner }),
        1 => Just(Tags::Untagged),
        1 => select(&[None, Some(7), Some(9)][..]).prop_map(Tags::Priority),
        1 => select(VIDS).prop_map(Tags::Vlan),
        1 => Just(Tags::Three),
        1 => Just(Tags::STagInside),
    ]
}

fn prio() -> impl Strategy<Value = u8> {
    prop_oneof![6 => Just(0u8), 1 => 1u8..16]
}

fn dst() -> impl Strategy<Value = Dst> {
    prop_oneof![
        24 => Just(Dst::Vif),
        4 => any_vif().prop_map(|(r, i)| Dst::Of(r, i)),
        3 => Just(Dst::Broadcast),
        1 => Just(Dst::Mcast4),
        2 => Just(Dst::Mcast6),
        1 => Just(Dst::Stranger),
    ]
}

fn mframe() -> impl Strategy<Value = MFrame> {
    (
        any_vif(),
        tags(),
        prio(),
        dst(),
        body(),
        smac(),
        padding(),
        cut(),
    )
        .prop_map(|(to, tags, prio, dst, body, smac, pad, cut)| MFrame {
            to,
            tags,
            prio,
            dst,
            body,
            smac,
            pad,
            cut,
        })
}

/// A run: flow cache on or off, and 1 to 5 steps: frames (some after a clean copy of
/// themselves) and control-plane changes in one VR each.
fn run_spec() -> impl Strategy<Value = (bool, Vec<Step>)> {
    let step = prop_oneof![
        3 => (mframe(), prop_oneof![2 => Just(false), 1 => Just(true)]).prop_map(
            |(f, warm)| {
                let first = warm.then(|| warm_copy(&f)).flatten();
                first.into_iter().chain([f]).map(Step::Frame).collect::<Vec<_>>()
            }
        ),
        1 => (0..NVR, select(EVENTS)).prop_map(|(r, e)| vec![Step::Event(r, e)]),
    ];
    (any::<bool>(), vec(step, 1..=5))
        .prop_map(|(fc, steps)| (fc, steps.into_iter().flatten().collect()))
}

// ---------------------------------------------------------------------------------------
// Bursts.
// ---------------------------------------------------------------------------------------

/// Up to eight ARP frames (each punted as received by every VR that gets it, so the punts
/// alone tell what became of which frame) to VIFs on one port, for one receive burst.
fn burst_spec() -> impl Strategy<Value = (usize, Vec<MFrame>)> {
    (0..PORTS).prop_flat_map(|port| {
        let on: Vec<(usize, usize)> = (0..NVR)
            .flat_map(|r| (0..VIFS.len()).map(move |i| (r, i)))
            .filter(|&(r, i)| usize::from(VRS[r][i].port) == port)
            .collect();
        let frame = (select(on), tags(), prio(), dst()).prop_map(|(to, tags, prio, dst)| MFrame {
            tags,
            prio,
            dst,
            ..to_vif(to.0, to.1, Body::Arp(28))
        });
        (Just(port), vec(frame, 1..=8))
    })
}

/// Send `frames` on `port` at once, so that demux takes them in one pass (above, each frame
/// is demuxed alone, and nothing demux decided for one frame could touch the next): what
/// each VR punts, in order, and what each VIF receives, against the demux model frame by
/// frame.
fn run_burst(port: usize, frames: &[MFrame]) -> Result<(), String> {
    let nets = initial();
    let (mut rig, vrs) = build(true, &nets);
    let mut punts = vec![Vec::new(); NVR];
    let mut rx = [[0u64; 4]; NVR];
    let mut demux_drops = vec![0u64; Drop::ALL.len()];
    let sent: Vec<Vec<u8>> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| build_frame(f, i as u32 + 1).1)
        .collect();
    for f in &sent {
        match demux(port, f) {
            Demux::Drop(d) => demux_drops[d as usize] += 1,
            Demux::To(to) => {
                for (r, x) in to.iter().enumerate() {
                    for x in x {
                        let e = vr_model(&nets[r], x, f);
                        assert!(
                            matches!(e, Expect::Punt { end: None, .. }),
                            "{}",
                            e.summary()
                        );
                        punts[r].push((x.vif, f.clone()));
                        rx[r][x.vif] += 1;
                    }
                }
            }
        }
    }
    let b = before(&rig, &vrs);
    for f in &sent {
        rig.send(port, f);
    }
    rig.run();
    let seen = observe(&mut rig, &vrs, &b);
    let want_demux: Vec<(Drop, u64)> = Drop::ALL
        .iter()
        .filter(|d| demux_drops[**d as usize] > 0)
        .map(|d| (*d, demux_drops[*d as usize]))
        .collect();
    let why = |w: String| {
        let frames: Vec<String> = sent.iter().map(|f| describe(f)).collect();
        format!(
            "burst on port {port}:\n  {}\ndata plane:{}\nmismatch: {w}",
            frames.join("\n  "),
            seen.summary()
        )
    };
    ensure!(
        seen.demux == want_demux,
        "{}",
        why(format!("demux drops, want {want_demux:?}"))
    );
    for r in 0..NVR {
        let o = &seen.vrs[r];
        ensure!(
            seen.vif_rx[r] == rx[r] && seen.vr_rx[r] == rx[r].iter().sum::<u64>(),
            "{}",
            why(format!(
                "VR {} received on VIFs {:?}, want {:?}",
                NAMES[r], seen.vif_rx[r], rx[r]
            ))
        );
        ensure!(
            o.out.is_empty() && o.drops.is_empty() && o.punts == punts[r],
            "{}",
            why(format!(
                "VR {} punted {:?}, want {:?} (VIF, frame length)",
                NAMES[r],
                o.punts
                    .iter()
                    .map(|(v, f)| (*v, f.len()))
                    .collect::<Vec<_>>(),
                punts[r]
                    .iter()
                    .map(|(v, f)| (*v, f.len()))
                    .collect::<Vec<_>>()
            ))
        );
    }
    ensure!(seen.stray.is_empty(), "{}", why("sent by no VIF".into()));
    ensure!(rig.in_use() == 0, "{}", why("pool slots leaked".into()));
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_vr_on_shared_ports_agrees_with_the_reference_model(
        (flow_cache, steps) in run_spec()
    ) {
        if let Err(e) = run(flow_cache, &steps) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// A quarter as many bursts as runs: each is up to eight frames.
fn burst_config() -> Config {
    let c = config();
    Config {
        cases: (c.cases / 4).max(1),
        ..c
    }
}

proptest! {
    #![proptest_config(burst_config())]

    #[test]
    fn a_burst_on_one_port_is_demuxed_frame_by_frame((port, frames) in burst_spec()) {
        if let Err(e) = run_burst(port, &frames) {
            return Err(TestCaseError::fail(e));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Fixed cases.
// ---------------------------------------------------------------------------------------

/// A frame to VIF `vif` of VR `vr`, with its tag, to its MAC.
fn to_vif(vr: usize, vif: usize, body: Body) -> MFrame {
    MFrame {
        to: (vr, vif),
        tags: Tags::Right,
        prio: 0,
        dst: Dst::Vif,
        body,
        smac: SENDER,
        pad: (0, 0),
        cut: Cut::None,
    }
}

/// UDP from a host on VIF a's subnet to `dst`.
fn udp4_to(dst: Ipv4Addr, ttl: u8) -> Body {
    Body::V4(udp4_spec(v4(10, 1, 0, 2), dst, ttl, 40))
}

/// UDP from a host on VIF a's subnet to `dst`.
fn udp6_to(dst: Ipv6Addr, hop: u8) -> Body {
    Body::V6(udp6_spec(db8(1, 2), dst, hop, 40))
}

/// One datagram into each VR's VIF a: each forwards it by its own routes, out of its own
/// VIF, to its own neighbour's MAC, or answers it from its own VIF with its own tag.
#[test]
fn the_same_addresses_in_each_vr_stay_apart() {
    let mut frames = Vec::new();
    for vr in 0..NVR {
        frames.extend([
            to_vif(vr, 0, udp4_to(v4(198, 51, 100, 7), 64)),
            to_vif(vr, 0, udp4_to(v4(198, 51, 100, 7), 1)),
            to_vif(vr, 0, udp4_to(v4(8, 8, 8, 8), 64)),
            to_vif(vr, 0, udp4_to(v4(10, 2, 0, 2), 64)),
            to_vif(vr, 1, udp4_to(v4(10, 1, 0, 5), 64)),
            to_vif(vr, 0, udp6_to(db8(0x100, 7), 64)),
            to_vif(vr, 0, udp6_to(db8(0xdead, 1), 64)),
            to_vif(vr, 2, udp6_to(db8(0x100, 7), 1)),
            to_vif(
                vr,
                0,
                Body::V4(udp4_spec(v4(10, 1, 0, 2), v4(198, 18, 0, 9), 64, 1400)),
            ),
            to_vif(vr, 0, Body::V6(udp6_spec(db8(1, 2), db8(2, 5), 64, 1400))),
        ]);
    }
    for flow_cache in [false, true] {
        assert_agrees(flow_cache, &frames);
    }
}

/// Broadcast and multicast frames go to every VIF on their port and VLAN, whichever VR it is
/// in, and nowhere else.
#[test]
fn group_frames_go_to_every_vif_on_the_port_and_vlan() {
    let arp = |vr, vif| MFrame {
        dst: Dst::Broadcast,
        ..to_vif(vr, vif, Body::Arp(28))
    };
    let mut frames: Vec<MFrame> = (0..NVR)
        .flat_map(|vr| (0..VIFS.len()).map(move |vif| (vr, vif)))
        .map(|(vr, vif)| arp(vr, vif))
        .collect();
    // A VLAN nobody has on port 0.
    frames.push(MFrame {
        tags: Tags::Vlan(9),
        ..arp(0, 0)
    });
    // To each VR's own address, and to all nodes.
    frames.push(MFrame {
        dst: Dst::Broadcast,
        ..to_vif(0, 2, udp4_to(v4(10, 3, 0, 1), 64))
    });
    frames.push(MFrame {
        dst: Dst::Mcast6,
        ..to_vif(0, 0, udp6_to("ff02::1".parse().unwrap(), 255))
    });
    frames.push(MFrame {
        dst: Dst::Mcast6,
        ..to_vif(2, 2, udp6_to("ff02::1".parse().unwrap(), 255))
    });
    assert_agrees(true, &frames);
}

/// A tagged frame is matched on its outer tag, whatever its TPID and whatever is inside; a
/// priority tag is none; three tags, an S-tag inside a tag and a frame that ends inside its
/// tags are refused; what leaves has one tag at most, the VIF's.
#[test]
fn tagged_frames_are_matched_on_the_outer_tag() {
    let far = udp4_to(v4(198, 51, 100, 7), 64);
    // Leaves r2 by its c: VLAN 9 on port 2.
    let via_c = udp4_to(v4(192, 0, 2, 9), 64);
    let with = |vr, vif, tags, body: &Body| MFrame {
        tags,
        ..to_vif(vr, vif, body.clone())
    };
    let qinq = |s_tag, outer, inner| Tags::QinQ {
        s_tag,
        outer,
        inner,
    };
    let cut = |n, f: MFrame| MFrame {
        cut: Cut::To(n),
        ..f
    };
    let frames = vec![
        // r0's b and r2's b have one MAC: VLAN 7 outside is r0's, VLAN 8 r2's.
        with(0, 1, qinq(true, None, 8), &far),
        with(2, 1, qinq(true, None, 7), &via_c),
        with(0, 1, qinq(false, None, 8), &far),
        with(0, 1, Tags::STag, &far),
        // Expiring, and to the VR itself: answered and punted by the outer tag's VIF.
        with(1, 1, qinq(true, None, 5), &udp4_to(v4(198, 51, 100, 7), 1)),
        with(1, 1, qinq(true, None, 5), &Body::Arp(28)),
        // A priority tag, over VLAN 7 or not, is no VLAN: VIF a of r0, of r1.
        with(0, 0, Tags::Priority(Some(7)), &far),
        with(1, 0, Tags::Priority(None), &far),
        with(0, 0, qinq(true, None, 5), &far),
        // r0's a and r2's a have one MAC: outer VLAN 5 is r2's, 6 nobody's (inner 5 or not).
        with(0, 0, qinq(true, Some(5), 6), &via_c),
        with(0, 0, qinq(true, Some(6), 5), &far),
        with(0, 1, Tags::Three, &far),
        with(2, 3, Tags::Three, &far),
        with(0, 1, Tags::STagInside, &far),
        // Ending inside a tag (refused), or right after the tags (the VR's to drop).
        cut(17, with(0, 1, Tags::Right, &far)),
        cut(18, with(0, 1, Tags::Right, &far)),
        cut(21, with(0, 1, qinq(true, None, 8), &far)),
        cut(22, with(0, 1, qinq(true, None, 8), &far)),
    ];
    assert_agrees(true, &frames);
}

/// The comparison sees what it must: a model that gives a broadcast frame to one VIF of those
/// on its port and VLAN, or matches a QinQ frame on its inner tag, is caught.
#[test]
fn a_wrong_demux_model_is_caught() {
    // A broadcast on port 2, untagged: VIF c of r0, r1 and r4, VIF d of r2.
    let bcast = MFrame {
        dst: Dst::Broadcast,
        ..to_vif(0, 2, Body::Arp(28))
    };
    let (port, frame) = build_frame(&bcast, 1);
    let nets = initial();
    let Want::Vrs(mut per_vr) = model(&nets, port, &frame) else {
        panic!("dropped at demux");
    };
    assert!([0, 1, 2, 4].iter().all(|&r| per_vr[r].len() == 1));
    per_vr[1].clear();
    per_vr[2].clear();
    let err = send_and_compare(&nets, port, &frame, &Want::Vrs(per_vr)).unwrap_err();
    assert!(err.contains("VR r1 received 1 frame(s)"), "{err}");

    // S-tag 7 over C-tag 8 to the MAC r0's b and r2's b share: r0's, not r2's (VLAN 8).
    let qinq = MFrame {
        tags: Tags::QinQ {
            s_tag: true,
            outer: None,
            inner: 8,
        },
        ..to_vif(0, 1, udp4_to(v4(198, 51, 100, 7), 64))
    };
    let (port, frame) = build_frame(&qinq, 1);
    let mut inner_first = frame.clone();
    inner_first[14..16].copy_from_slice(&frame[18..20]);
    let wrong = model(&nets, port, &inner_first);
    let Want::Vrs(ref v) = wrong else {
        panic!("dropped at demux");
    };
    assert!(v[0].is_empty() && !v[2].is_empty(), "{}", wrong.summary());
    let err = send_and_compare(&nets, port, &frame, &wrong).unwrap_err();
    assert!(err.contains("VR r0 received 1 frame(s)"), "{err}");
}

/// Send `frame` on `port` to fresh VRs as `nets` has them and compare with `want`.
fn send_and_compare(nets: &[Net], port: usize, frame: &[u8], want: &Want) -> Result<(), String> {
    let (mut rig, vrs) = build(true, nets);
    let b = before(&rig, &vrs);
    rig.send(port, frame);
    rig.run();
    compare(want, &observe(&mut rig, &vrs, &b), frame)
}

/// The VR (and VIF) demux gives `f` to.
fn takers(f: &MFrame) -> Vec<(usize, usize)> {
    let (port, frame) = build_frame(f, 1);
    match demux(port, &frame) {
        Demux::Drop(_) => vec![],
        Demux::To(to) => (0..NVR)
            .flat_map(|r| to[r].iter().map(move |x| (r, x.vif)))
            .collect(),
    }
}

/// A VR with two VIFs on one port and VLAN (r3's c and d, port 2 VLAN 9): a group frame gives
/// it a copy on each, whatever it then does with each; unicast to either MAC reaches that VIF
/// alone.
#[test]
fn two_vifs_of_one_vr_on_one_vlan_get_a_copy_each() {
    let group = |vif, dst, body| MFrame {
        dst,
        ..to_vif(3, vif, body)
    };
    let frames = vec![
        group(2, Dst::Broadcast, Body::Arp(28)),
        // To c's subnet broadcast, to all hosts, to all systems, a unicast datagram.
        group(3, Dst::Broadcast, udp4_to(v4(10, 3, 0, 255), 64)),
        group(2, Dst::Broadcast, udp4_to(v4(255, 255, 255, 255), 64)),
        group(2, Dst::Mcast4, udp4_to(v4(224, 0, 0, 1), 1)),
        group(3, Dst::Mcast6, udp6_to("ff02::1".parse().unwrap(), 255)),
        group(2, Dst::Broadcast, udp4_to(v4(198, 51, 100, 7), 64)),
        to_vif(3, 2, udp4_to(v4(198, 18, 0, 9), 64)),
        to_vif(3, 3, udp4_to(v4(198, 18, 0, 9), 64)),
        to_vif(3, 3, udp4_to(v4(198, 51, 100, 7), 1)),
        to_vif(3, 2, Body::Arp(28)),
    ];
    let r3: Vec<usize> = takers(&frames[0])
        .into_iter()
        .filter(|t| t.0 == 3)
        .map(|t| t.1)
        .collect();
    assert_eq!(r3, [2, 3]);
    for flow_cache in [false, true] {
        assert_agrees(flow_cache, &frames);
    }
}

/// A VLAN-owning VIF (r2's b, alone on port 1 VLAN 8; r2's c, on port 2 VLAN 9 with other VRs'
/// MAC-keyed VIFs) takes frames to its MAC and group frames on its VLAN, as `DemuxKey::Vlan`
/// says: not frames to a MAC nobody has, nor to a MAC of a VIF on another VLAN or port, and
/// the MAC-keyed VIFs on its VLAN keep theirs.
#[test]
fn a_vlan_owning_vif_takes_its_mac_and_group_frames_only() {
    let far = udp4_to(v4(198, 51, 100, 7), 64);
    let with = |vr, vif, dst| MFrame {
        dst,
        ..to_vif(vr, vif, far.clone())
    };
    let bcast = |vr, vif| MFrame {
        dst: Dst::Broadcast,
        ..to_vif(vr, vif, Body::Arp(28))
    };
    let frames = vec![
        with(2, 1, Dst::Vif),
        with(2, 1, Dst::Stranger),
        with(2, 1, Dst::Of(1, 1)),
        with(2, 1, Dst::Of(2, 0)),
        bcast(2, 1),
        with(2, 2, Dst::Vif),
        with(2, 2, Dst::Of(0, 3)),
        with(2, 2, Dst::Of(3, 3)),
        with(2, 2, Dst::Stranger),
        with(2, 2, Dst::Of(1, 2)),
        bcast(2, 2),
    ];
    assert_eq!(takers(&frames[1]), []);
    assert_eq!(takers(&frames[6]), [(0, 3)]);
    assert_eq!(takers(&frames[10]).len(), 6);
    assert_agrees(true, &frames);
}

/// Match rules split the MAC r3's and r4's a share, and the one their b share: of the rules
/// that take a frame the first added wins (r3's), a frame none takes is nobody's, and so are
/// ARP and other non-IP frames (every rule here has a field set); a group frame goes to every
/// VIF on its VLAN, rules or not.
#[test]
fn match_rules_split_a_shared_mac() {
    let v4b = |l4, mf, dst| {
        Body::V4(V4Spec {
            l4,
            mf,
            ..udp4_spec(v4(10, 1, 0, 2), dst, 64, 40)
        })
    };
    let v6b = |l4, src, dst| {
        Body::V6(V6Spec {
            l4,
            ..udp6_spec(src, dst, 64, 40)
        })
    };
    let ff02_1: Ipv6Addr = "ff02::1".parse().unwrap();
    let frames = [
        // MAC A, port 0: UDP to port 53 in 128.0.0.0/1 (both rules): r3's.
        (
            to_vif(3, 0, v4b(L4::Udp, false, v4(198, 51, 100, 7))),
            vec![(3, 0)],
        ),
        // TCP, a fragment (ports 0), ICMP: r4's.
        (
            to_vif(3, 0, v4b(L4::Tcp, false, v4(198, 51, 100, 7))),
            vec![(4, 0)],
        ),
        (
            to_vif(3, 0, v4b(L4::Udp, true, v4(198, 51, 100, 7))),
            vec![(4, 0)],
        ),
        (
            to_vif(4, 0, v4b(L4::Icmp(8, 0), false, v4(192, 0, 2, 9))),
            vec![(4, 0)],
        ),
        // Outside 128.0.0.0/1, the VRs' own address among them; not IPv4; not IP.
        (to_vif(3, 0, v4b(L4::Udp, false, v4(8, 8, 8, 8))), vec![]),
        (to_vif(3, 0, v4b(L4::Udp, false, v4(10, 1, 0, 1))), vec![]),
        (to_vif(3, 0, udp6_to(db8(0x100, 7), 64)), vec![]),
        (to_vif(3, 0, Body::Arp(28)), vec![]),
        (to_vif(3, 0, Body::Other(0x88cc)), vec![]),
        // MAC B, port 1 VLAN 7: from port 12345 in 2001:db8::/32, wherever to: r3's.
        (
            to_vif(3, 1, v6b(L4::Udp, db8(1, 2), db8(0x100, 7))),
            vec![(3, 1)],
        ),
        (to_vif(3, 1, v6b(L4::Tcp, db8(1, 2), ff02_1)), vec![(3, 1)]),
        // The rest to 2001:db8::/32: r4's; the rest: nobody's.
        (
            to_vif(3, 1, v6b(L4::Icmp(128, 0), db8(1, 2), db8(0x100, 7))),
            vec![(4, 1)],
        ),
        (to_vif(3, 1, v6b(L4::Udp, ll6(2), db8(2, 1))), vec![(4, 1)]),
        (
            to_vif(3, 1, v6b(L4::Icmp(128, 0), db8(1, 2), ll6(0xa))),
            vec![],
        ),
        (to_vif(3, 1, udp4_to(v4(198, 51, 100, 7), 64)), vec![]),
        // Group frames.
        (
            MFrame {
                dst: Dst::Broadcast,
                ..to_vif(3, 0, Body::Arp(28))
            },
            vec![(0, 0), (1, 0), (3, 0), (4, 0)],
        ),
        (
            MFrame {
                dst: Dst::Mcast6,
                ..to_vif(4, 1, udp6_to(ff02_1, 255))
            },
            vec![(0, 1), (1, 1), (3, 1), (4, 1)],
        ),
    ];
    for (f, to) in &frames {
        assert_eq!(&takers(f), to, "{f:?}");
    }
    let frames: Vec<MFrame> = frames.into_iter().map(|(f, _)| f).collect();
    for flow_cache in [false, true] {
        assert_agrees(flow_cache, &frames);
    }
}

/// `add_vif` refuses, with an error, what would make demux ambiguous, and demux stays as it
/// was: a second owner of a VLAN, a VLAN owner without a VLAN, a MAC- or rule-keyed VIF with a
/// VLAN owner's MAC on its VLAN, a VLAN owner with a MAC a VIF has on that VLAN, a rule on a
/// MAC-keyed VIF's MAC, a MAC-keyed VIF on a MAC rules share.
#[test]
fn clashing_demux_keys_are_refused_and_change_nothing() {
    let nets = initial();
    let (mut rig, vrs) = build(true, &nets);
    let clashes = [
        (Key::Vlan, 1, Some(8), vr_mac(4, 0x99)),
        (Key::Vlan, 0, None, vr_mac(4, 0x99)),
        (Key::Mac, 1, Some(8), VIFS[1].mac),
        (Key::Rule(ANY), 2, Some(9), VIFS[2].mac),
        (Key::Vlan, 0, Some(5), VIFS[0].mac),
        (Key::Rule(ANY), 0, None, VIFS[0].mac),
        (Key::Mac, 0, None, SHARED_A),
    ];
    for (key, port, vlan, mac) in clashes {
        let mut c = common::vif("x", port, vrhost_wire::EthernetAddress(mac), vec![]);
        c.vlan = vlan;
        c.key = key.demux_key();
        let r = rig.dp.add_vif("r4", c);
        assert!(r.is_err(), "{key:?} on port {port} VLAN {vlan:?}: {r:?}");
    }
    assert_eq!(rig.dp.vifs("r4").unwrap().len(), 4);
    rig.worker.poll();
    let bcast = |vr, vif| MFrame {
        dst: Dst::Broadcast,
        ..to_vif(vr, vif, Body::Arp(28))
    };
    let far = udp4_to(v4(198, 51, 100, 7), 64);
    let steps: Vec<Step> = [
        bcast(2, 1),
        MFrame {
            dst: Dst::Stranger,
            ..to_vif(2, 1, far.clone())
        },
        to_vif(2, 1, far.clone()),
        bcast(2, 2),
        to_vif(2, 2, far.clone()),
        bcast(2, 0),
        to_vif(2, 0, far.clone()),
        bcast(0, 0),
        to_vif(0, 0, far.clone()),
        to_vif(3, 0, far.clone()),
    ]
    .into_iter()
    .map(Step::Frame)
    .collect();
    if let Err(e) = run_on(&mut rig, &vrs, nets, true, &steps) {
        panic!("{e}");
    }
}

/// The Want for `f` if demux gave it to the VIFs `to` (VR, VIF), which have one tag at most.
fn want_if(nets: &[Net], frame: &[u8], to: &[(usize, usize)]) -> Want {
    let l3 = if matches!(be16(&frame[12..]), C_TAG | S_TAG) {
        18
    } else {
        14
    };
    let mut v = vec![Vec::new(); NVR];
    for &(r, vif) in to {
        let rx = Rx {
            vif,
            ethertype: be16(&frame[l3 - 2..]),
            l3,
            group: frame[0] & 1 != 0,
            smac: frame[6..12].try_into().unwrap(),
        };
        v[r].push((vif, vr_model(&nets[r], &rx, frame)));
    }
    Want::Vrs(v)
}

/// The comparison sees what it must of VLAN owners, rules and VRs with two VIFs on a VLAN: a
/// model that gives r3 one copy of a broadcast its c and d both take, gives a VLAN owner a
/// frame to a MAC nobody has on its VLAN, sends a frame rules split to the first VIF with the
/// MAC, or lets the last rule that takes a frame win, is caught.
#[test]
fn a_wrong_model_of_vlan_owners_rules_and_two_vifs_is_caught() {
    let nets = initial();
    let udp53 = Body::V4(udp4_spec(v4(10, 1, 0, 2), v4(198, 51, 100, 7), 64, 40));
    let tcp = Body::V4(V4Spec {
        l4: L4::Tcp,
        ..udp4_spec(v4(10, 1, 0, 2), v4(198, 51, 100, 7), 64, 40)
    });
    let cases = [
        (
            MFrame {
                dst: Dst::Broadcast,
                ..to_vif(3, 2, Body::Arp(28))
            },
            vec![(0, 3), (1, 3), (2, 2), (3, 2), (4, 3)],
            "VR r3 received 2 frame(s)",
        ),
        (
            MFrame {
                dst: Dst::Stranger,
                ..to_vif(2, 1, udp4_to(v4(198, 51, 100, 7), 64))
            },
            vec![(2, 1)],
            "VR r2 received 0 frame(s)",
        ),
        (to_vif(3, 0, tcp), vec![(3, 0)], "VR r3 received 0 frame(s)"),
        (
            to_vif(3, 0, udp53),
            vec![(4, 0)],
            "VR r3 received 1 frame(s)",
        ),
    ];
    for (f, wrong, says) in cases {
        let (port, frame) = build_frame(&f, 1);
        assert_ne!(takers(&f), wrong);
        send_and_compare(&nets, port, &frame, &model(&nets, port, &frame)).unwrap();
        let err =
            send_and_compare(&nets, port, &frame, &want_if(&nets, &frame, &wrong)).unwrap_err();
        assert!(err.contains(says), "{err}");
    }
}

// ---------------------------------------------------------------------------------------
// Match rules at their edges, as `MatchRule`'s and `flow.rs`'s docs have them.
// ---------------------------------------------------------------------------------------

/// A VR on port 0 whose one VIF (MAC 02:00:00:07:00:01) is demuxed by `rule`, and the frame
/// `ethertype`, `l3` sent to that MAC: whether the VR got it, and the demux drops.
fn to_one_rule(rule: MatchRule, ethertype: u16, l3: &[u8]) -> (u64, Vec<(Drop, u64)>) {
    let mut rig = Rig::new(1);
    let vr = rig.dp.add_vr(vrhost_dataplane::VrConfig::new("x")).unwrap();
    let mac = vr_mac(7, 1);
    let mut c = common::vif("a", 0, vrhost_wire::EthernetAddress(mac), vec![]);
    c.key = DemuxKey::Rule(rule);
    rig.dp.add_vif("x", c).unwrap();
    rig.worker.poll();
    let mut f: Vec<u8> = mac.iter().chain(&SENDER).copied().collect();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    rig.send(0, &f);
    rig.run();
    let d = rig.dp.demux_drops();
    let drops = Drop::ALL
        .iter()
        .filter(|x| d[**x as usize] != 0)
        .map(|x| (*x, d[*x as usize]))
        .collect();
    (vr.stats().rx_packets, drops)
}

/// `MatchRule`'s docs: an ARP frame to a rule's MAC is matched on its sender and target
/// addresses alone, so the VR whose prefix holds the target gets the ARP for it; a rule's
/// protocol and ports are not looked at.
#[test]
fn arp_is_matched_on_its_addresses_alone() {
    let udp = MatchRule {
        protocol: Some(17),
        dst_port: Some(53),
        ..MatchRule::default()
    };
    assert_eq!(to_one_rule(udp, 0x0806, &arp(28)), (1, vec![]));
    let target = ip4(&arp(28)[24..]);
    for len in [32, 8, 1] {
        let holds = MatchRule {
            dst: Some(IpPrefix::V4(Prefix4::new_masked(target, len))),
            ..MatchRule::default()
        };
        assert_eq!(to_one_rule(holds, 0x0806, &arp(28)), (1, vec![]), "/{len}");
    }
    // A prefix beside the target's.
    let beside = Ipv4Addr::from(u32::from(target) ^ 1);
    let other = MatchRule {
        dst: Some(IpPrefix::V4(Prefix4::new_masked(beside, 32))),
        ..MatchRule::default()
    };
    assert_eq!(
        to_one_rule(other, 0x0806, &arp(28)),
        (0, vec![(Drop::NoVr, 1)])
    );
}

/// `MatchRule`'s docs: ARP names no protocol or ports, so an ARP frame to a MAC that rules
/// share goes to every VIF whose rule takes it by its addresses, a copy each. Two VRs split
/// one MAC by destination port (x UDP 53, y TCP 80) and a third (z) takes a prefix beside the
/// ARP's target: a unicast ARP reply to that MAC reaches x and y, byte for byte, and not z;
/// IP packets still go to one rule each.
#[test]
fn an_arp_to_a_mac_that_rules_share_reaches_every_vr_whose_rule_takes_it() {
    let mut rig = Rig::new(1);
    let mac = vr_mac(7, 1);
    let target = ip4(&arp(28)[24..]);
    let beside = Ipv4Addr::from(u32::from(target) ^ 1);
    let rules = [
        MatchRule {
            protocol: Some(17),
            dst_port: Some(53),
            ..MatchRule::default()
        },
        MatchRule {
            protocol: Some(6),
            dst_port: Some(80),
            ..MatchRule::default()
        },
        MatchRule {
            dst: Some(IpPrefix::V4(Prefix4::new_masked(beside, 32))),
            ..MatchRule::default()
        },
    ];
    let vrs: Vec<Arc<Vr>> = ["x", "y", "z"]
        .iter()
        .zip(rules)
        .map(|(name, rule)| {
            let vr = rig
                .dp
                .add_vr(vrhost_dataplane::VrConfig::new(*name))
                .unwrap();
            let mut c = common::vif("a", 0, vrhost_wire::EthernetAddress(mac), vec![]);
            c.key = DemuxKey::Rule(rule);
            rig.dp.add_vif(name, c).unwrap();
            vr
        })
        .collect();
    rig.worker.poll();
    let frame = |ethertype: u16, l3: &[u8]| -> Vec<u8> {
        let mut f: Vec<u8> = mac.iter().chain(&SENDER).copied().collect();
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    };
    let reply = frame(0x0806, &arp(28));
    rig.send(0, &reply);
    rig.run();
    let got: Vec<u64> = vrs.iter().map(|v| v.stats().rx_packets).collect();
    assert_eq!(got, [1, 1, 0], "ARP received by x, y, z");
    for v in &vrs[..2] {
        let p = v
            .punt_recv()
            .expect("the ARP punted to the VR's control plane");
        assert_eq!(rig.pool.frame(&p), &reply[..], "{}'s copy", v.name());
        rig.pool.free(p);
        assert!(v.punt_recv().is_none());
    }
    assert!(vrs[2].punt_recv().is_none());
    assert_eq!(rig.dp.demux_drops()[Drop::NoVr as usize], 0);

    // IP to the same MAC: one rule each, as before.
    let src = Ipv4Addr::new(192, 0, 2, 9);
    let dst = Ipv4Addr::new(198, 51, 100, 1);
    rig.send(0, &frame(0x0800, &udp4(src, dst, 64, 1000, 53, &[0; 8])));
    rig.run();
    let got: Vec<u64> = vrs.iter().map(|v| v.stats().rx_packets).collect();
    assert_eq!(got, [2, 1, 0], "UDP to port 53 received by x, y, z");

    // An ARP whose target z's prefix holds: z too, and x and y as before (their rules take
    // any address).
    let mut to_z = arp(28);
    to_z[24..28].copy_from_slice(&beside.octets());
    rig.send(0, &frame(0x0806, &to_z));
    rig.run();
    let got: Vec<u64> = vrs.iter().map(|v| v.stats().rx_packets).collect();
    assert_eq!(got, [3, 2, 1], "the second ARP received by x, y, z");
    for v in &vrs {
        while let Some(p) = v.punt_recv() {
            rig.pool.free(p);
        }
    }
    rig.recv(0);
    assert_eq!(rig.in_use(), 0, "every copy accounted for");
}

/// `MatchRule`'s docs: a rule with no field set takes every frame to its MAC, one of another
/// ethertype (LLDP here) too; a rule with a field set does not.
#[test]
fn a_rule_with_no_field_set_takes_any_frame() {
    assert_eq!(
        to_one_rule(MatchRule::default(), 0x88cc, &payload(1, 46)),
        (1, vec![])
    );
    let udp = MatchRule {
        protocol: Some(17),
        ..MatchRule::default()
    };
    assert_eq!(
        to_one_rule(udp, 0x88cc, &payload(1, 46)),
        (0, vec![(Drop::NoVr, 1)])
    );
}

/// `flow.rs`: ports are read only within the packet. An IPv6 packet whose Payload Length,
/// or an IPv4 packet whose Total Length, ends two bytes into its UDP header (what follows is
/// link-layer padding, RFC 8200 §3, RFC 1812 §5.2.2) has no ports: a rule for its source port
/// 12345, which the padding holds, does not take it.
#[test]
fn ports_past_the_end_of_the_packet_are_not_matched() {
    let mut l3 = build_v6(&udp6_spec(db8(1, 2), db8(0x100, 7), 64, 0), 1);
    l3[4..6].copy_from_slice(&2u16.to_be_bytes());
    let from_12345 = MatchRule {
        src_port: Some(12345),
        ..MatchRule::default()
    };
    assert_eq!(
        to_one_rule(from_12345.clone(), 0x86dd, &l3),
        (0, vec![(Drop::NoVr, 1)])
    );
    let mut l3 = build_v4(&udp4_spec(v4(10, 1, 0, 5), v4(10, 2, 0, 9), 64, 0), 1);
    l3[2..4].copy_from_slice(&22u16.to_be_bytes());
    l3[10..12].fill(0);
    let sum = !ones_sum(&l3[..20]);
    l3[10..12].copy_from_slice(&sum.to_be_bytes());
    assert_eq!(
        to_one_rule(from_12345.clone(), 0x0800, &l3),
        (0, vec![(Drop::NoVr, 1)])
    );
    // The whole UDP header inside the packet: taken.
    let l3 = build_v4(&udp4_spec(v4(10, 1, 0, 5), v4(10, 2, 0, 9), 64, 0), 1);
    assert_eq!(to_one_rule(from_12345, 0x0800, &l3), (1, vec![]));
}
