//! The differential test of `reference.rs` for several VRs sharing ports: three VRs with the
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
//! port 2's VLAN 9 with r0's and r1's d, and r2's d the untagged port 2 with their c. Every VR's
//! neighbours have the same addresses with MACs of its own, and r1 and r2 start with a few
//! routes and an MTU changed, so that one VR's tables used for another's frame show.
//!
//! The demux model follows the data plane's documented policy (the docs of `src/demux.rs`, and
//! of `vrhost-wire`'s `vlan` module for tags), decided from its own tables. A frame is matched
//! on its port, its outer tag's VLAN (C-tag 0x8100 or S-tag 0x88a8; an inner C-tag is not
//! looked at; VID 0, a priority tag, is no VLAN, IEEE 802.1Q) and its destination MAC. A
//! unicast frame goes to the one VIF with that port, VLAN and MAC; a broadcast or multicast
//! frame to every VIF on that port and VLAN, one copy each (macvlan bridge mode); no VIF: a
//! `no-vr` drop at demux. A third tag, an S-tag inside another tag, and a frame that ends
//! inside its tags are refused (`l2-truncated`): forwarding on the wrong VLAN is worse than a
//! counted drop. No VR here has two VIFs on one port and VLAN, so a VR gets one copy at most.
//!
//! What is checked, per frame: a drop at demux, with its reason, and then that no VR did
//! anything; or, per VR, that it received exactly the copy the model gives it (VR and VIF
//! receive counters) or none, and for a VR with a copy all that `reference.rs` checks, with
//! that VR's own VIFs, tags and neighbour MACs: frames sent (each attributed to the VIF that
//! sent it by port, VLAN and source MAC, unique per port by demux's rules), packets punted,
//! drops counted. A VR without a copy sends, punts and counts nothing; a frame that no VIF could
//! have sent is a failure. So a forwarded frame or an ICMP error leaves with its VIF's one tag
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
//! the number of runs, a quarter of it the bursts): about 1 s in release, 6 s in debug.

mod common;
#[path = "reference/frames.rs"]
mod frames;
#[path = "reference/model.rs"]
#[macro_use]
mod model;

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use common::*;
use frames::*;
use model::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;
use vrhost_dataplane::{Drop, Vr, VrStats};

// ---------------------------------------------------------------------------------------
// The VRs.
// ---------------------------------------------------------------------------------------

const NVR: usize = 3;

const NAMES: [&str; NVR] = ["r0", "r1", "r2"];

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

/// r1's MACs: r0's with byte 3 set to 1.
const fn r1_mac(last: u8) -> Mac {
    [0x02, 0, 0, 1, 0, last]
}

/// r0 as the reference VR; r1 on r0's ports and VLANs with its own MACs; r2 with r0's MACs on
/// other VLANs.
static VRS: [Vifs; NVR] = [
    VIFS,
    [
        like(0, r1_mac(0x0a), None),
        like(1, r1_mac(0x0b), Some(7)),
        like(2, r1_mac(0x0c), None),
        like(3, r1_mac(0x0d), Some(9)),
    ],
    [
        like(0, VIFS[0].mac, Some(5)),
        like(1, VIFS[1].mac, Some(8)),
        like(2, VIFS[2].mac, Some(9)),
        like(3, VIFS[3].mac, None),
    ],
];

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
        .map(|(net, name)| add_vr(&mut rig, name, net, flow_cache))
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
    /// A copy to each VR that has a VIF for it (by VR).
    To(Vec<Option<Rx>>),
}

const C_TAG: u16 = 0x8100;
const S_TAG: u16 = 0x88a8;

/// Demux by the documented policy: port, outer VLAN (VID 0 is none), destination MAC; a group
/// frame to every VIF on the port and VLAN. Two tags at most, an S-tag only outermost.
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
    let to: Vec<Option<Rx>> = VRS
        .iter()
        .map(|vifs| {
            let vif = vifs.iter().position(|d| {
                usize::from(d.port) == port && d.vlan == vlan && (group || f[..6] == d.mac)
            })?;
            Some(Rx {
                vif,
                ethertype,
                l3,
                group,
                smac: f[6..12].try_into().unwrap(),
            })
        })
        .collect();
    if to.iter().all(Option::is_none) {
        Demux::Drop(Drop::NoVr)
    } else {
        Demux::To(to)
    }
}

/// What must become of one frame.
enum Want {
    /// Dropped at demux, for this reason.
    Demux(Drop),
    /// Per VR: nothing (no copy), or what its VIF (the one that received it) does with it.
    Vrs(Vec<Option<(usize, Expect)>>),
}

/// The model: what becomes of `frame` arriving on `port`, with the VRs as `nets` has them.
fn model(nets: &[Net], port: usize, frame: &[u8]) -> Want {
    match demux(port, frame) {
        Demux::Drop(d) => Want::Demux(d),
        Demux::To(to) => Want::Vrs(
            to.iter()
                .zip(nets)
                .map(|(rx, net)| rx.as_ref().map(|rx| (rx.vif, vr_model(net, rx, frame))))
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
                for (r, w) in v.iter().enumerate() {
                    let _ = match w {
                        None => write!(s, "\n  VR {}: no copy", NAMES[r]),
                        Some((vif, e)) => write!(
                            s,
                            "\n  VR {} (VIF {}): {}",
                            NAMES[r],
                            VIFS[*vif].name,
                            e.summary()
                        ),
                    };
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
    vr: Vec<VrStats>,
    demux: Vec<u64>,
}

/// Frames received by each VIF of VR `name`.
fn vif_rx(rig: &Rig, name: &str) -> [u64; 4] {
    let mut n = [0; 4];
    for v in rig.dp.vifs(name).unwrap() {
        n[usize::from(v.id)] = v.stats().rx_packets;
    }
    n
}

fn before(rig: &Rig, vrs: &[Arc<Vr>]) -> Before {
    Before {
        vif_rx: NAMES.iter().map(|n| vif_rx(rig, n)).collect(),
        vr: vrs.iter().map(|v| v.stats()).collect(),
        demux: rig.dp.demux_drops().to_vec(),
    }
}

/// What came of one frame: per VR as `reference.rs` observes its one VR (the demux drops
/// in each), what each VR and its VIFs received, and the frames no VIF could have sent.
struct Seen {
    vrs: Vec<Observed>,
    vr_rx: Vec<u64>,
    vif_rx: Vec<[u64; 4]>,
    demux: Vec<(Drop, u64)>,
    stray: Vec<(usize, Vec<u8>)>,
}

/// The VR whose VIF sent `f` out of `port`: the one with that port, outer VLAN and source
/// MAC (demux allows one per port).
fn sender(port: usize, f: &[u8]) -> Option<usize> {
    if f.len() < 14 {
        return None;
    }
    let vlan = match be16(&f[12..]) {
        C_TAG | S_TAG if f.len() < 16 => return None,
        C_TAG | S_TAG => Some(be16(&f[14..]) & 0xfff),
        _ => None,
    };
    VRS.iter().position(|vifs| {
        vifs.iter()
            .any(|d| usize::from(d.port) == port && d.vlan == vlan && f[6..12] == d.mac)
    })
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
        let rx = vif_rx(rig, NAMES[r]);
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
    for p in 0..PORTS {
        for f in rig.recv(p) {
            match sender(p, &f) {
                Some(r) => seen.vrs[r].out.push((p, f)),
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
        Want::Vrs(v) => v.iter().enumerate().try_for_each(|(r, w)| match w {
            None => untouched(seen, r),
            Some((vif, e)) => {
                let mut rx = [0; 4];
                rx[*vif] = 1;
                ensure!(
                    seen.vr_rx[r] == 1 && seen.vif_rx[r] == rx,
                    "VR {} received {} frame(s), on VIFs {:?}, not one on VIF {}",
                    NAMES[r],
                    seen.vr_rx[r],
                    seen.vif_rx[r],
                    VIFS[*vif].name
                );
                check(&VRS[r], e, &seen.vrs[r], sent).map_err(|w| format!("VR {}: {w}", NAMES[r]))
            }
        }),
    }
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
    let mut nets = initial();
    let (mut rig, vrs) = build(flow_cache, &nets);
    let mut events = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let f = match step {
            Step::Event(r, e) => {
                let e = in_vr(*r, *e);
                nets[*r].apply(e);
                apply(&mut rig, &vrs[*r], e);
                events.push((NAMES[*r], e));
                continue;
            }
            Step::Frame(f) => f,
        };
        let (port, frame) = build_frame(f, i as u32 + 1);
        let want = model(&nets, port, &frame);
        let b = before(&rig, &vrs);
        rig.send(port, &frame);
        rig.run();
        let seen = observe(&mut rig, &vrs, &b);
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
                    if let Some(x) = x {
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
    // A broadcast on port 2, untagged: VIF c of r0 and r1, VIF d of r2.
    let bcast = MFrame {
        dst: Dst::Broadcast,
        ..to_vif(0, 2, Body::Arp(28))
    };
    let (port, frame) = build_frame(&bcast, 1);
    let nets = initial();
    let Want::Vrs(mut per_vr) = model(&nets, port, &frame) else {
        panic!("dropped at demux");
    };
    assert!(per_vr.iter().all(Option::is_some));
    per_vr[1] = None;
    per_vr[2] = None;
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
    assert!(v[0].is_none() && v[2].is_some(), "{}", wrong.summary());
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
