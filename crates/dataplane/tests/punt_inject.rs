//! The control plane's side: what is punted (and with which VIF), the punt policer and queue
//! limit, frames injected out of a VIF unchanged, and unresolved neighbours handed over.

mod common;
mod util;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::*;
use util::*;
use vrhost_dataplane::{DpError, Drop, VrConfig};
use vrhost_fib::NextHop;
use vrhost_wire::{EthernetAddress, icmpv6};

#[test]
fn punted_packets_carry_their_ingress_vif() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    // To VIF b's address, arriving on a (port 0) and on b (port 1); ARP on b.
    let on_a = eth(
        mac(1),
        HOST_MAC,
        None,
        0x0800,
        &udp4(HOST_A, B, 64, 1, 2, b"a"),
    );
    let on_b = eth(
        mac(2),
        mac(0x22),
        None,
        0x0800,
        &udp4(NH_B, B, 64, 1, 2, b"b"),
    );
    let arp_b = eth(
        EthernetAddress::BROADCAST,
        mac(0x22),
        None,
        0x0806,
        &arp_request(mac(0x22), NH_B, B),
    );
    rig.send(0, &on_a);
    rig.run();
    rig.send(1, &on_b);
    rig.run();
    rig.send(1, &arp_b);
    rig.run();
    // Neighbour discovery on a: a solicitation and a DAD probe (from ::), both to the
    // solicited-node group of a's address.
    let mut ns = Vec::new();
    for src in [host_a6(), Ipv6Addr::UNSPECIFIED] {
        let mut buf = [0u8; 128];
        let n = icmpv6::emit_neighbor_solicit(&mut buf, src, a6(), Some(HOST_MAC)).unwrap();
        let f = eth(
            EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1]),
            HOST_MAC,
            None,
            0x86dd,
            &buf[..n],
        );
        rig.send(0, &f);
        rig.run();
        ns.push(f);
    }
    let punts = take_punts(&rig, &vr);
    let got: Vec<_> = punts
        .iter()
        .map(|(m, f, _)| (m.vif, m.port, f.clone()))
        .collect();
    // Punted as received: bytes untouched (TTL included).
    assert_eq!(
        got,
        [
            (0, 0, on_a),
            (1, 1, on_b),
            (1, 1, arp_b),
            (0, 0, ns[0].clone()),
            (0, 0, ns[1].clone())
        ]
    );
    assert!(punts.iter().all(|(m, _, _)| m.vr == vr.id));
    let s = vr.stats();
    assert_eq!(s.punted, 5);
    assert_drops(&s, &[]);
    assert_clean(&mut rig);
}

#[test]
fn punt_policer_counts_what_is_over_the_rate() {
    let mut rig = Rig::new(2);
    let mut cfg = VrConfig::new("blue");
    // Two at once, then one per second: the test ends long before the next token.
    cfg.punt_rate = 1;
    cfg.punt_burst = 2;
    let vr = Blue {
        cfg,
        ..Blue::default()
    }
    .build(&mut rig);
    for i in 0..6 {
        let l3 = udp4(HOST_A, A, 64, 1000 + i, 2, b"local");
        rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    }
    rig.run();
    assert_eq!(take_punts(&rig, &vr).len(), 2);
    let s = vr.stats();
    assert_eq!(s.punted, 2);
    assert_drops(&s, &[(Drop::PuntPoliced, 4)]);
    assert_clean(&mut rig);
}

#[test]
fn full_punt_queue_is_counted() {
    let mut rig = Rig::new(2);
    let mut cfg = VrConfig::new("blue");
    cfg.punt_queue = 3;
    cfg.punt_rate = 0; // unlimited: only the queue limits
    let vr = Blue {
        cfg,
        ..Blue::default()
    }
    .build(&mut rig);
    for i in 0..5 {
        let l3 = udp4(HOST_A, A, 64, 1000 + i, 2, b"local");
        rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    }
    rig.run();
    assert_eq!(vr.punt_len(), 3);
    assert_drops(&vr.stats(), &[(Drop::PuntFull, 2)]);
    // Reading makes room again.
    assert_eq!(take_punts(&rig, &vr).len(), 3);
    let l3 = udp4(HOST_A, A, 64, 9, 2, b"again");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    assert_eq!(take_punts(&rig, &vr).len(), 1);
    let s = vr.stats();
    assert_eq!(s.punted, 4);
    assert_drops(&s, &[(Drop::PuntFull, 2)]);
    assert_clean(&mut rig);
}

#[test]
fn injected_frames_leave_their_vif_unchanged() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    // What a control plane sends: an ARP reply and an IPv4 packet with TTL 1 (which must not
    // be treated as forwarded: no TTL check, no rewrite).
    let frames = [
        eth(
            mac(0x22),
            mac(2),
            None,
            0x0806,
            &arp_request(mac(2), B, NH_B),
        ),
        eth(
            mac(0x22),
            mac(2),
            None,
            0x0800,
            &udp4(B, NH_B, 1, 179, 179, b"bgp"),
        ),
    ];
    for f in &frames {
        let p = rig.pool.alloc_frame(f).unwrap();
        rig.dp.inject("blue", 1, p).unwrap();
    }
    rig.run();
    // Unchanged but for the zeros that pad them to the shortest frame (an ARP reply is
    // 42 bytes).
    assert_eq!(rig.recv(1), frames.map(|f| padded(&f)));
    assert!(rig.recv(0).is_empty());
    let s = vr.stats();
    assert_eq!((s.injected, s.tx_packets), (2, 2));
    assert_eq!(rig.dp.vif("blue", "b").unwrap().stats().tx_packets, 2);
    assert_drops(&s, &[]);
    assert_clean(&mut rig);
}

#[test]
fn injecting_to_a_missing_vif_or_vr_gives_the_packet_back() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    let frame = eth(
        mac(0x22),
        mac(2),
        None,
        0x0800,
        &udp4(B, NH_B, 64, 1, 2, b"x"),
    );
    let p = rig.pool.alloc_frame(&frame).unwrap();
    let (e, p) = rig.dp.inject("blue", 7, p).unwrap_err();
    assert!(matches!(e, DpError::NoVif { .. }), "{e}");
    assert_eq!(rig.pool.frame(&p), &frame[..]);
    let (e, p) = rig.dp.inject("nosuch", 0, p).unwrap_err();
    assert_eq!(e, DpError::NoVr("nosuch".into()));
    rig.pool.free(p);

    // A VIF removed after the frame was queued: dropped as inject-bad when the worker runs.
    let p = rig.pool.alloc_frame(&frame).unwrap();
    rig.dp.inject("blue", 1, p).unwrap();
    rig.dp.remove_vif("blue", "b").unwrap();
    rig.run();
    let s = vr.stats();
    assert_eq!(s.injected, 0);
    assert_drops(&s, &[(Drop::InjectBad, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn unresolved_neighbour_punts_and_counts_neigh_miss() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    vr.fib4
        .insert(
            "203.0.113.0/24".parse().unwrap(),
            NextHop::Via {
                addr: Ipv4Addr::new(10, 0, 1, 9).into(),
                ifindex: 1,
            },
        )
        .unwrap();
    // Via an unknown neighbour, and to an unknown host on an attached subnet.
    let via = eth(
        mac(1),
        HOST_MAC,
        None,
        0x0800,
        &udp4(HOST_A, Ipv4Addr::new(203, 0, 113, 5), 64, 1, 2, b"via"),
    );
    let attached = eth(
        mac(1),
        HOST_MAC,
        None,
        0x0800,
        &udp4(HOST_A, Ipv4Addr::new(10, 0, 1, 77), 64, 1, 2, b"att"),
    );
    let six = eth(
        mac(1),
        HOST_MAC,
        None,
        0x86dd,
        &udp6(
            host_a6(),
            "2001:db8:b::77".parse().unwrap(),
            64,
            1,
            2,
            b"v6",
        ),
    );
    for f in [&via, &attached, &six] {
        rig.send(0, f);
    }
    rig.run();
    assert!(rig.recv(1).is_empty());
    let punts = take_punts(&rig, &vr);
    let got: Vec<_> = punts.iter().map(|(m, f, _)| (m.vif, f.clone())).collect();
    // Handed over as received, with the ingress VIF, for the kernel to resolve and forward.
    assert_eq!(got, [(0, via), (0, attached), (0, six)]);
    let s = vr.stats();
    assert_eq!((s.neigh_miss, s.punted, s.tx_packets), (3, 3, 0));
    assert_drops(&s, &[]);

    // Once the neighbour is known, the same destination is forwarded.
    vr.neigh
        .set(1, Ipv4Addr::new(10, 0, 1, 9).into(), mac(0x29));
    let l3 = udp4(HOST_A, Ipv4Addr::new(203, 0, 113, 5), 64, 1, 2, b"via");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    assert_eq!(l2(&out[0]).dst, mac(0x29));
    assert_eq!(vr.stats().neigh_miss, 3);
    assert_clean(&mut rig);
}
