//! Layer 2: 802.1Q sub-interfaces (tag expected on ingress, pushed on egress, popped when
//! leaving by an untagged VIF), QinQ on ingress, demux by VLAN, by MAC and by match rule, and
//! group-addressed frames copied to every VR on a port.

mod common;
mod util;

use std::net::Ipv4Addr;
use std::sync::Arc;

use common::*;
use util::*;
use vrhost_dataplane::{DemuxKey, Drop, IfAddr, IpPrefix, MatchRule, Vr, VrConfig};
use vrhost_fib::NextHop;
use vrhost_wire::{EthernetAddress, icmpv4, ipv4};

const V100: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const V200: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const HOST_V200: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// VR "blue": VIF 0 "v100" (port 0, VLAN 100, MAC demux, `mac(1)`), VIF 1 "plain" (port 1,
/// untagged, `mac(2)`), VIF 2 "v200" (port 0, VLAN 200, VLAN demux, `mac(3)`).
/// 198.51.100.0/24 via 10.0.1.2 (`mac(0x22)`) on "plain"; neighbours HOST_A on v100
/// (HOST_MAC) and 10.0.2.2 on v200 (`mac(0x33)`).
fn vlans() -> (Rig, Arc<Vr>) {
    let mut rig = Rig::new(2);
    let vr = rig.dp.add_vr(VrConfig::new("blue")).unwrap();
    let mut v100 = vif("v100", 0, mac(1), vec![IfAddr::V4(V100, 24)]);
    v100.vlan = Some(100);
    let plain = vif("plain", 1, mac(2), vec![IfAddr::V4(B, 24)]);
    let mut v200 = vif("v200", 0, mac(3), vec![IfAddr::V4(V200, 24)]);
    v200.vlan = Some(200);
    v200.key = DemuxKey::Vlan;
    assert_eq!(rig.dp.add_vif("blue", v100).unwrap(), 0);
    assert_eq!(rig.dp.add_vif("blue", plain).unwrap(), 1);
    assert_eq!(rig.dp.add_vif("blue", v200).unwrap(), 2);
    vr.fib4
        .insert(
            "198.51.100.0/24".parse().unwrap(),
            NextHop::Via {
                addr: NH_B.into(),
                ifindex: 1,
            },
        )
        .unwrap();
    vr.neigh.set(1, NH_B.into(), mac(0x22));
    vr.neigh.set(0, HOST_A.into(), HOST_MAC);
    vr.neigh.set(2, HOST_V200.into(), mac(0x33));
    rig.worker.poll();
    (rig, vr)
}

/// Check a forwarded copy of `sent` (an IPv4 datagram): TTL − 1, everything else as sent
/// but the TTL and checksum.
#[track_caller]
fn check_forwarded(l3: &[u8], sent: &[u8]) {
    let ip = ipv4::Packet::new_checked(l3).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.ttl(), sent[8] - 1);
    assert_eq!(l3.len(), sent.len());
    assert_eq!(l3[..8], sent[..8]);
    assert_eq!(l3[12..], sent[12..]);
}

#[test]
fn tagged_in_untagged_out_pops_the_tag() {
    let (mut rig, vr) = vlans();
    let l3 = udp4(HOST_A, FAR, 64, 1, 2, b"pop");
    rig.send(0, &eth(mac(1), HOST_MAC, Some(100), 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    let f = l2(&out[0]);
    assert_eq!((f.dst, f.src), (mac(0x22), mac(2)));
    assert!(f.vlans.is_empty(), "tag popped");
    assert_eq!(f.ethertype, 0x0800);
    // Padded with zeros to the shortest frame.
    assert_eq!(out[0].len(), (14 + l3.len()).max(60));
    check_forwarded(&f.l3, &l3);
    let s = vr.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (1, 1));
    assert_drops(&s, &[]);
    assert_clean(&mut rig);
}

#[test]
fn untagged_in_tagged_out_pushes_the_tag() {
    let (mut rig, vr) = vlans();
    for (dst, vid, dmac, smac) in [
        (HOST_A, 100, HOST_MAC, mac(1)),
        (HOST_V200, 200, mac(0x33), mac(3)),
    ] {
        let l3 = udp4(FAR, dst, 64, 1, 2, b"push");
        rig.send(1, &eth(mac(2), mac(0x22), None, 0x0800, &l3));
        rig.run();
        let out = rig.recv(0);
        assert_eq!(out.len(), 1);
        let frame = &out[0];
        // 802.1Q right after the MACs, then the VID, then IPv4.
        assert_eq!(frame[12..14], [0x81, 0x00]);
        assert_eq!(u16::from_be_bytes([frame[14], frame[15]]) & 0x0fff, vid);
        assert_eq!(frame[16..18], [0x08, 0x00]);
        assert_eq!(frame.len(), (18 + l3.len()).max(60));
        let f = l2(frame);
        assert_eq!((f.dst, f.src), (dmac, smac));
        assert_eq!((f.vlans, f.tpids), (vec![vid], vec![0x8100]));
        check_forwarded(&f.l3, &l3);
    }
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

#[test]
fn vlan_key_vif_takes_its_mac_and_group_frames_on_its_vlan() {
    let (mut rig, vr) = vlans();
    let l3 = udp4(HOST_V200, FAR, 64, 1, 2, b"v200");
    rig.send(0, &eth(mac(3), mac(0x33), Some(200), 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    check_forwarded(&l2(&out[0]).l3, &l3);
    // Another MAC on VLAN 200: nobody's.
    rig.send(0, &eth(mac(9), mac(0x33), Some(200), 0x0800, &l3));
    // Broadcast ARP on VLAN 200 and on VLAN 100: punted by the VIF of that VLAN.
    let arp200 = eth(
        EthernetAddress::BROADCAST,
        mac(0x33),
        Some(200),
        0x0806,
        &arp_request(mac(0x33), HOST_V200, V200),
    );
    let arp100 = eth(
        EthernetAddress::BROADCAST,
        HOST_MAC,
        Some(100),
        0x0806,
        &arp_request(HOST_MAC, HOST_A, V100),
    );
    rig.send(0, &arp200);
    rig.send(0, &arp100);
    rig.run();
    let punts = take_punts(&rig, &vr);
    assert_eq!(punts.len(), 2);
    assert_eq!((punts[0].0.vif, &punts[0].1), (2, &arp200));
    assert_eq!((punts[1].0.vif, &punts[1].1), (0, &arp100));
    assert_demux_drops(&rig, &[(Drop::NoVr, 1)]);
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

#[test]
fn frames_on_an_unknown_vlan_belong_to_no_vr() {
    let (mut rig, vr) = vlans();
    let l3 = udp4(HOST_A, FAR, 64, 1, 2, b"x");
    // VLAN 300 exists nowhere.
    rig.send(0, &eth(mac(1), HOST_MAC, Some(300), 0x0800, &l3));
    // mac(1) is on VLAN 100 only, not untagged.
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    // VLAN 100 is on port 0 only.
    rig.send(1, &eth(mac(1), HOST_MAC, Some(100), 0x0800, &l3));
    rig.run();
    assert_demux_drops(&rig, &[(Drop::NoVr, 3)]);
    let s = vr.stats();
    assert_eq!(s.rx_packets, 0);
    assert_drops(&s, &[]);
    assert_eq!(rig.dp.port_stats(0).unwrap().rx_dropped, 2);
    assert_clean(&mut rig);
}

#[test]
fn qinq_inbound_is_matched_on_the_outer_tag() {
    let (mut rig, vr) = vlans();
    let l3 = udp4(HOST_A, FAR, 64, 1, 2, b"qinq");
    // 802.1ad S-tag 100 over C-tag 7, and two C-tags (100 over 7): both forwarded.
    for outer in [0x88a8, 0x8100] {
        let frame = eth_tags(mac(1), HOST_MAC, &[(outer, 100), (0x8100, 7)], 0x0800, &l3);
        rig.send(0, &frame);
        rig.run();
        let out = rig.recv(1);
        assert_eq!(out.len(), 1, "outer TPID {outer:#x}");
        let f = l2(&out[0]);
        assert!(f.vlans.is_empty());
        assert_eq!((f.dst, f.src), (mac(0x22), mac(2)));
        check_forwarded(&f.l3, &l3);
    }
    // The inner tag does not count: outer 300 over inner 100 is nobody's.
    rig.send(
        0,
        &eth_tags(
            mac(1),
            HOST_MAC,
            &[(0x88a8, 300), (0x8100, 100)],
            0x0800,
            &l3,
        ),
    );
    // Three tags are refused (a counted drop, not a guess).
    rig.send(
        0,
        &eth_tags(
            mac(1),
            HOST_MAC,
            &[(0x88a8, 100), (0x8100, 7), (0x8100, 8)],
            0x0800,
            &l3,
        ),
    );
    rig.run();
    assert!(rig.recv(1).is_empty());
    assert_demux_drops(&rig, &[(Drop::NoVr, 1), (Drop::L2Truncated, 1)]);
    let s = vr.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (2, 2));
    assert_drops(&s, &[]);
    assert_clean(&mut rig);
}

#[test]
fn icmp_error_goes_back_on_the_ingress_vlan() {
    let (mut rig, vr) = vlans();
    let l3 = udp4(HOST_A, FAR, 1, 1, 2, b"ttl");
    rig.send(0, &eth(mac(1), HOST_MAC, Some(100), 0x0800, &l3));
    rig.run();
    let out = rig.recv(0);
    assert_eq!(out.len(), 1);
    let f = l2(&out[0]);
    assert_eq!((f.dst, f.src, f.vlans), (HOST_MAC, mac(1), vec![100]));
    let ip = ipv4::Packet::new_checked(&f.l3[..]).unwrap();
    assert_eq!((ip.src_addr(), ip.dst_addr()), (V100, HOST_A));
    let icmp = icmpv4::Packet::new_checked(ip.payload()).unwrap();
    match icmpv4::Repr::parse(&icmp).unwrap() {
        icmpv4::Repr::TimeExceeded { invoking, .. } => assert_eq!(invoking, &l3[..]),
        other => panic!("{other:?}"),
    }
    assert_drops(&vr.stats(), &[(Drop::TtlExpired, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn broadcast_arp_on_a_shared_port_reaches_every_vr_on_its_vlan() {
    let mut rig = Rig::new(2);
    let mut vrs = Vec::new();
    for (i, (name, vlan)) in [("red", None), ("green", None), ("other", Some(5))]
        .into_iter()
        .enumerate()
    {
        let vr = rig.dp.add_vr(VrConfig::new(name)).unwrap();
        let mut v = vif(
            "a",
            0,
            mac(1 + i as u8),
            vec![IfAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + i as u8), 24)],
        );
        v.vlan = vlan;
        rig.dp.add_vif(name, v).unwrap();
        vrs.push(vr);
    }
    rig.worker.poll();
    let frame = eth(
        EthernetAddress::BROADCAST,
        HOST_MAC,
        None,
        0x0806,
        &arp_request(
            HOST_MAC,
            Ipv4Addr::new(10, 0, 0, 9),
            Ipv4Addr::new(10, 0, 0, 1),
        ),
    );
    rig.send(0, &frame);
    rig.run();
    let red = take_punts(&rig, &vrs[0]);
    let green = take_punts(&rig, &vrs[1]);
    let other = take_punts(&rig, &vrs[2]);
    assert_eq!((red.len(), green.len(), other.len()), (1, 1, 0));
    // Same bytes, separate slots, each tagged with its own VR and VIF.
    assert_eq!(red[0].1, frame);
    assert_eq!(green[0].1, frame);
    assert_ne!(red[0].2, green[0].2);
    assert_eq!((red[0].0.vr, red[0].0.vif), (vrs[0].id, 0));
    assert_eq!((green[0].0.vr, green[0].0.vif), (vrs[1].id, 0));
    for vr in &vrs {
        assert_drops(&vr.stats(), &[]);
    }
    assert_demux_drops(&rig, &[]);
    assert_clean(&mut rig);
}

#[test]
fn broadcast_copy_without_a_free_slot_is_counted() {
    // One slot: the frame itself. The copy for the first VR cannot be made; the last VR
    // still gets the original.
    let mut rig = Rig::with(2, 1, 64);
    let mut vrs = Vec::new();
    for (i, name) in ["red", "green"].into_iter().enumerate() {
        let vr = rig.dp.add_vr(VrConfig::new(name)).unwrap();
        let addr = IfAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + i as u8), 24);
        rig.dp
            .add_vif(name, vif("a", 0, mac(1 + i as u8), vec![addr]))
            .unwrap();
        vrs.push(vr);
    }
    rig.worker.poll();
    let frame = eth(
        EthernetAddress::BROADCAST,
        HOST_MAC,
        None,
        0x0806,
        &arp_request(
            HOST_MAC,
            Ipv4Addr::new(10, 0, 0, 9),
            Ipv4Addr::new(10, 0, 0, 2),
        ),
    );
    rig.send(0, &frame);
    rig.run();
    assert_eq!(take_punts(&rig, &vrs[0]).len(), 0);
    assert_eq!(take_punts(&rig, &vrs[1]).len(), 1);
    assert_demux_drops(&rig, &[(Drop::ReplicateNoBuffer, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn rule_demux_splits_a_shared_mac_by_destination() {
    let mut rig = Rig::new(2);
    let mut vrs = Vec::new();
    let nets = [
        ("red", "198.51.100.0/24", Ipv4Addr::new(10, 0, 1, 2), 2u8),
        ("green", "203.0.113.0/24", Ipv4Addr::new(10, 0, 1, 3), 3u8),
    ];
    for (name, net, nh, m) in nets {
        let vr = rig.dp.add_vr(VrConfig::new(name)).unwrap();
        let mut a = vif("a", 0, mac(1), vec![IfAddr::V4(A, 24)]);
        a.key = DemuxKey::Rule(MatchRule {
            dst: Some(IpPrefix::V4(net.parse().unwrap())),
            ..MatchRule::default()
        });
        rig.dp.add_vif(name, a).unwrap();
        rig.dp
            .add_vif(name, vif("b", 1, mac(m), vec![IfAddr::V4(B, 24)]))
            .unwrap();
        vr.fib4
            .insert(
                net.parse().unwrap(),
                NextHop::Via {
                    addr: nh.into(),
                    ifindex: 1,
                },
            )
            .unwrap();
        vr.neigh.set(1, nh.into(), mac(0x20 + m));
        vrs.push(vr);
    }
    rig.worker.poll();
    for i in 0..5 {
        let l3 = udp4(HOST_A, Ipv4Addr::new(198, 51, 100, i), 64, 1, 2, b"red");
        rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    }
    for i in 0..3 {
        let l3 = udp4(HOST_A, Ipv4Addr::new(203, 0, 113, i), 64, 1, 2, b"green");
        rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    }
    // Matches no rule.
    let l3 = udp4(HOST_A, Ipv4Addr::new(192, 0, 2, 1), 64, 1, 2, b"none");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 8);
    for frame in &out {
        let f = l2(frame);
        let dst = ipv4::Packet::new_checked(&f.l3[..]).unwrap().dst_addr();
        let (src, nbr) = if dst.octets()[..3] == [198, 51, 100] {
            (mac(2), mac(0x22))
        } else {
            assert_eq!(dst.octets()[..3], [203, 0, 113]);
            (mac(3), mac(0x23))
        };
        assert_eq!((f.src, f.dst), (src, nbr));
    }
    let (r, g) = (vrs[0].stats(), vrs[1].stats());
    assert_eq!((r.rx_packets, r.tx_packets), (5, 5));
    assert_eq!((g.rx_packets, g.tx_packets), (3, 3));
    assert_drops(&r, &[]);
    assert_drops(&g, &[]);
    assert_demux_drops(&rig, &[(Drop::NoVr, 1)]);
    assert_clean(&mut rig);
}

/// One vector whose packets leave one port by two VIFs (VLANs 100 and 200), interleaved and
/// of different sizes: each VIF counts its own frames and bytes, the port all of them.
#[test]
fn a_burst_to_two_vifs_on_one_port_is_counted_per_vif() {
    let (mut rig, vr) = vlans();
    let dsts = [HOST_A, HOST_V200];
    const N: usize = 40;
    for i in 0..N {
        let l3 = udp4(
            Ipv4Addr::new(10, 0, 1, 2),
            dsts[(i / 3) % 2],
            64,
            1,
            2,
            &vec![i as u8; 10 + i],
        );
        rig.send(1, &eth(mac(2), mac(0x22), None, 0x0800, &l3));
    }
    rig.run();
    let out = rig.recv(0);
    assert_eq!(out.len(), N);
    let (mut pkts, mut bytes) = ([0u64; 2], [0u64; 2]);
    for f in &out {
        let i = match l2(f).vlans[..] {
            [100] => 0,
            [200] => 1,
            ref v => panic!("left with tags {v:?}"),
        };
        pkts[i] += 1;
        bytes[i] += f.len() as u64;
    }
    assert!(pkts[0] > 0 && pkts[1] > 0);
    for (i, name) in ["v100", "v200"].into_iter().enumerate() {
        let s = rig.dp.vif("blue", name).unwrap().stats();
        assert_eq!(
            (s.tx_packets, s.tx_bytes),
            (pkts[i], bytes[i]),
            "VIF {name}"
        );
    }
    let p = rig.dp.port_stats(0).unwrap();
    assert_eq!((p.tx_packets, p.tx_bytes), (N as u64, bytes[0] + bytes[1]));
    let s = vr.stats();
    assert_eq!((s.tx_packets, s.tx_bytes), (N as u64, bytes[0] + bytes[1]));
    assert_clean(&mut rig);
}
