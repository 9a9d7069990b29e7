//! Helpers for the ICMP, fragmentation, L2, ECMP and punt/inject tests, on top of `common`'s
//! rig and frame builders: a standard two-interface VR, L2 dissection of what leaves, and the
//! checks every test ends with (exact drop counters, no leaked slot).
//!
//! Kept apart from `common` so that file stays the rig's alone; frames are still built with
//! `vrhost-wire`'s emitters and checked by re-parsing with its views and `Repr`s.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses part of the helpers"
)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vrhost_dataplane::{Drop, IfAddr, MIN_FRAME, Meta, Vr, VrConfig, VrStats};
use vrhost_fib::NextHop;
use vrhost_wire::EthernetAddress;
use vrhost_wire::{arp, ipv4, vlan};

use crate::common::{Rig, datagram_len, mac, vif};

/// VIF a's IPv4 address (port 0).
pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// VIF b's IPv4 address (port 1).
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
/// The host behind VIF a (sends from `common::HOST_MAC`).
pub const HOST_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The next hop behind VIF b (MAC `mac(0x22)`).
pub const NH_B: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
/// A destination routed via `NH_B`.
pub const FAR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

pub fn a6() -> Ipv6Addr {
    "2001:db8:a::1".parse().unwrap()
}
pub fn host_a6() -> Ipv6Addr {
    "2001:db8:a::2".parse().unwrap()
}
pub fn b6() -> Ipv6Addr {
    "2001:db8:b::1".parse().unwrap()
}
pub fn nh_b6() -> Ipv6Addr {
    "2001:db8:b::2".parse().unwrap()
}
/// A destination routed via `nh_b6()`.
pub fn far6() -> Ipv6Addr {
    "2001:db8:ff::9".parse().unwrap()
}

/// VR "blue": VIF a (port 0, `mac(1)`), VIF b (port 1, `mac(2)`);
/// 198.51.100.0/24 via 10.0.1.2 and 2001:db8:ff::/48 via 2001:db8:b::2, both on b with MAC
/// `mac(0x22)`.
#[derive(Debug, Clone)]
pub struct Blue {
    pub cfg: VrConfig,
    pub a_addrs: Vec<IfAddr>,
    pub b_addrs: Vec<IfAddr>,
    pub a_vlan: Option<u16>,
    pub b_vlan: Option<u16>,
    pub b_mtu: u16,
}

impl Default for Blue {
    fn default() -> Self {
        Blue {
            cfg: VrConfig::new("blue"),
            a_addrs: vec![IfAddr::V4(A, 24), IfAddr::V6(a6(), 64)],
            b_addrs: vec![IfAddr::V4(B, 24), IfAddr::V6(b6(), 64)],
            a_vlan: None,
            b_vlan: None,
            b_mtu: 1500,
        }
    }
}

impl Blue {
    /// Build it on `rig` (which needs at least two ports) and let the worker see it.
    pub fn build(self, rig: &mut Rig) -> Arc<Vr> {
        let name = self.cfg.name.clone();
        let vr = rig.dp.add_vr(self.cfg).unwrap();
        let mut a = vif("a", 0, mac(1), self.a_addrs);
        a.vlan = self.a_vlan;
        let mut b = vif("b", 1, mac(2), self.b_addrs);
        b.vlan = self.b_vlan;
        b.mtu = self.b_mtu;
        assert_eq!(rig.dp.add_vif(&name, a).unwrap(), 0);
        assert_eq!(rig.dp.add_vif(&name, b).unwrap(), 1);
        vr.fib4
            .insert(
                "198.51.100.0/24".parse().unwrap(),
                NextHop::Via {
                    addr: NH_B.into(),
                    ifindex: 1,
                },
            )
            .unwrap();
        vr.fib6
            .insert(
                "2001:db8:ff::/48".parse().unwrap(),
                NextHop::Via {
                    addr: nh_b6().into(),
                    ifindex: 1,
                },
            )
            .unwrap();
        vr.neigh.set(1, NH_B.into(), mac(0x22));
        vr.neigh.set(1, IpAddr::V6(nh_b6()), mac(0x22));
        rig.worker.poll();
        vr
    }
}

/// A frame taken apart: MACs, VLAN ids (outermost first), inner EtherType, L3 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L2 {
    pub dst: EthernetAddress,
    pub src: EthernetAddress,
    pub vlans: Vec<u16>,
    /// TPIDs of the tags, outermost first.
    pub tpids: Vec<u16>,
    pub ethertype: u16,
    /// The datagram (IPv4, IPv6, ARP) without the frame's padding; the rest for others.
    pub l3: Vec<u8>,
}

/// Dissect a frame (panics on a malformed one: what the data plane sends must parse), and
/// check that any bytes after its datagram are zero padding to the shortest frame.
pub fn l2(frame: &[u8]) -> L2 {
    let tags = vlan::parse_tags(frame).expect("frame parses");
    let l3 = &frame[tags.l3_offset()..];
    let ethertype = tags.ethertype().0;
    let len = datagram_len(ethertype, l3, frame.len()).unwrap_or_else(|e| panic!("{e}"));
    L2 {
        dst: EthernetAddress::from_bytes(&frame[0..6]),
        src: EthernetAddress::from_bytes(&frame[6..12]),
        vlans: tags.tags().iter().map(|t| t.tci.vid()).collect(),
        tpids: tags.tags().iter().map(|t| t.tpid.0).collect(),
        ethertype,
        l3: l3[..len].to_vec(),
    }
}

/// `frame` as the data plane sends it: padded with zeros to [`MIN_FRAME`] bytes.
pub fn padded(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    f.resize(f.len().max(usize::from(MIN_FRAME)), 0);
    f
}

/// Ethernet header with any stack of (TPID, VID) tags in front of `l3`.
pub fn eth_tags(
    dst: EthernetAddress,
    src: EthernetAddress,
    tags: &[(u16, u16)],
    ty: u16,
    l3: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    for &(tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vlan::Tci::new(0, false, vid).0.to_be_bytes());
    }
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// Clear DF in an IPv4 datagram and fix its checksum.
pub fn clear_df(l3: &mut [u8]) {
    let mut ip = ipv4::Packet::new_checked(l3).unwrap();
    ip.set_dont_frag(false);
    ip.fill_checksum();
}

/// Set an IPv4 datagram's fragment fields (offset in bytes) and fix its checksum; DF cleared.
pub fn set_frag(l3: &mut [u8], offset: u16, more: bool) {
    let mut ip = ipv4::Packet::new_checked(l3).unwrap();
    ip.clear_flags();
    ip.set_more_frags(more);
    ip.set_frag_offset(offset);
    ip.fill_checksum();
}

/// An ARP request (28 bytes) from `sha`/`spa` asking for `tpa`.
pub fn arp_request(sha: EthernetAddress, spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
    let r = arp::Repr {
        operation: arp::Operation::Request,
        sender_hardware_addr: sha,
        sender_protocol_addr: spa,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: tpa,
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut arp::Packet::new_unchecked(&mut b[..]));
    b
}

/// Take everything in `vr`'s punt queue: each packet's metadata, bytes and slot index; the
/// slots are returned to the pool.
pub fn take_punts(rig: &Rig, vr: &Vr) -> Vec<(Meta, Vec<u8>, u32)> {
    let mut out = Vec::new();
    while let Some(p) = vr.punt_recv() {
        out.push((*rig.pool.meta(&p), rig.pool.frame(&p).to_vec(), p.index()));
        rig.pool.free(p);
    }
    out
}

/// The VR's drop counters are exactly `expected` (every other reason 0).
#[track_caller]
pub fn assert_drops(s: &VrStats, expected: &[(Drop, u64)]) {
    for d in Drop::ALL {
        let want = expected.iter().find(|(e, _)| e == d).map_or(0, |(_, n)| *n);
        assert_eq!(s.drop(*d), want, "drop counter {}", d.name());
    }
}

/// The demux (no-VR) drop counters are exactly `expected`.
#[track_caller]
pub fn assert_demux_drops(rig: &Rig, expected: &[(Drop, u64)]) {
    let got = rig.dp.demux_drops();
    for d in Drop::ALL {
        let want = expected.iter().find(|(e, _)| e == d).map_or(0, |(_, n)| *n);
        assert_eq!(got[*d as usize], want, "demux drop counter {}", d.name());
    }
}

/// End of a test: nothing left on any port, no punted packet waiting, no slot leaked.
#[track_caller]
pub fn assert_clean(rig: &mut Rig) {
    for p in 0..rig.peers.len() {
        assert!(rig.recv(p).is_empty(), "unexpected frames left on port {p}");
    }
    for vr in rig.dp.vrs() {
        assert_eq!(vr.punt_len(), 0, "punted packets left in {}", vr.name());
    }
    assert_eq!(rig.in_use(), 0, "leaked pool slots");
}
