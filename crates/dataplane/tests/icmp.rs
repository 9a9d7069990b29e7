//! ICMP and ICMPv6 errors (RFC 1812 §4.3, RFC 4443): each case a router must answer, each it
//! must not, and the rate limit. Errors are checked byte for byte by re-parsing them with
//! `vrhost-wire`'s `Repr`s: they come from the ingress VIF's address, go to the offending
//! packet's source and previous hop, out of the port it came in by, and quote the packet as it
//! arrived.

mod common;
mod util;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::*;
use util::*;
use vrhost_dataplane::{Drop, IfAddr};
use vrhost_fib::NextHop;
use vrhost_wire::icmpv4::{self, DstUnreachable, TimeExceeded};
use vrhost_wire::icmpv6::{self, ErrorMessage, TimeExceededCode, UnreachableCode};
use vrhost_wire::ip::Protocol;
use vrhost_wire::{EthernetAddress, ipv4, ipv6};

/// The one frame that left by port 0, as an ICMPv4 error to HOST_A from A; returns the ICMP
/// message bytes (checked: L2 back to the sender, IPv4 header valid, ICMP checksum valid).
#[track_caller]
fn icmp4_reply(rig: &mut Rig) -> Vec<u8> {
    let out = rig.recv(0);
    assert_eq!(out.len(), 1, "one ICMP error expected");
    let f = l2(&out[0]);
    assert_eq!((f.dst, f.src), (HOST_MAC, mac(1)));
    assert!(f.vlans.is_empty());
    assert_eq!(f.ethertype, 0x0800);
    let ip = ipv4::Packet::new_checked(&f.l3[..]).unwrap();
    let r = ipv4::Repr::parse(&ip).unwrap();
    assert_eq!((r.src_addr, r.dst_addr), (A, HOST_A));
    assert_eq!(r.protocol, Protocol::ICMP);
    assert_eq!(r.ttl, 64);
    assert!(r.options.is_empty());
    assert_eq!(f.l3.len(), r.total_len());
    ip.payload().to_vec()
}

/// As [`icmp4_reply`] for ICMPv6: from a6() to host_a6().
#[track_caller]
fn icmp6_reply(rig: &mut Rig) -> Vec<u8> {
    let out = rig.recv(0);
    assert_eq!(out.len(), 1, "one ICMPv6 error expected");
    let f = l2(&out[0]);
    assert_eq!((f.dst, f.src), (HOST_MAC, mac(1)));
    assert_eq!(f.ethertype, 0x86dd);
    let ip = ipv6::Packet::new_checked(&f.l3[..]).unwrap();
    let r = ipv6::Repr::parse(&ip).unwrap();
    assert_eq!((r.src_addr, r.dst_addr), (a6(), host_a6()));
    assert_eq!(r.next_header, Protocol::ICMPV6);
    assert_eq!(r.hop_limit, 64);
    assert_eq!(f.l3.len(), 40 + r.payload_len);
    // An error fits the IPv6 minimum MTU.
    assert!(f.l3.len() <= 1280);
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(a6(), host_a6()));
    ip.payload().to_vec()
}

fn send4(rig: &mut Rig, l3: &[u8]) {
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, l3));
}

fn send6(rig: &mut Rig, l3: &[u8]) {
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x86dd, l3));
}

/// What an ICMPv4 error said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Err4 {
    Unreachable(DstUnreachable),
    TimeExceeded(TimeExceeded),
}

/// Parse an ICMPv4 error (checksum verified) and check that it quotes `l3` as it arrived
/// (TTL not decremented), cut to keep the error within 576 bytes.
#[track_caller]
fn expect_v4_error(icmp: &[u8], l3: &[u8]) -> Err4 {
    let p = icmpv4::Packet::new_checked(icmp).unwrap();
    let (what, invoking) = match icmpv4::Repr::parse(&p).unwrap() {
        icmpv4::Repr::DstUnreachable { reason, invoking } => (Err4::Unreachable(reason), invoking),
        icmpv4::Repr::TimeExceeded { reason, invoking } => (Err4::TimeExceeded(reason), invoking),
        other => panic!("not an ICMP error: {other:?}"),
    };
    let n = l3.len().min(icmpv4::MAX_QUOTE_LEN);
    assert_eq!(invoking, &l3[..n]);
    what
}

#[test]
fn ttl_expired_1_and_0_send_time_exceeded_back_to_the_sender() {
    for ttl in [1, 0] {
        let mut rig = Rig::new(2);
        let vr = Blue::default().build(&mut rig);
        // A packet that gets through first, so that the destination is in the flow cache:
        // a cached destination is checked all the same.
        send4(&mut rig, &udp4(HOST_A, FAR, 64, 1000, 2000, b"through"));
        rig.run();
        assert_eq!(rig.recv(1).len(), 1);
        let l3 = udp4(HOST_A, FAR, ttl, 1000, 2000, b"expiring");
        send4(&mut rig, &l3);
        rig.run();
        let icmp = icmp4_reply(&mut rig);
        assert_eq!(
            expect_v4_error(&icmp, &l3),
            Err4::TimeExceeded(TimeExceeded::TtlExpired)
        );
        assert_eq!(icmp[0], 11);
        assert_eq!(icmp[1], 0);
        let s = vr.stats();
        assert_eq!((s.icmp_sent, s.tx_packets), (1, 2));
        assert_drops(&s, &[(Drop::TtlExpired, 1)]);
        assert_clean(&mut rig);
    }
}

#[test]
fn no_route_sends_net_unreachable() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    let l3 = udp4(HOST_A, Ipv4Addr::new(203, 0, 113, 9), 64, 1, 2, b"nowhere");
    send4(&mut rig, &l3);
    rig.run();
    let icmp = icmp4_reply(&mut rig);
    assert_eq!(
        expect_v4_error(&icmp, &l3),
        Err4::Unreachable(DstUnreachable::NetUnreachable)
    );
    assert_eq!((icmp[0], icmp[1]), (3, 0));
    assert_drops(&vr.stats(), &[(Drop::NoRoute, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn unreachable_and_prohibit_routes_send_codes_1_and_13() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    vr.fib4
        .insert("192.0.2.0/24".parse().unwrap(), NextHop::Unreachable)
        .unwrap();
    vr.fib4
        .insert("198.18.0.0/15".parse().unwrap(), NextHop::Prohibit)
        .unwrap();
    vr.fib4
        .insert("198.20.0.0/16".parse().unwrap(), NextHop::Drop)
        .unwrap();

    let l3 = udp4(HOST_A, Ipv4Addr::new(192, 0, 2, 1), 64, 1, 2, b"u");
    send4(&mut rig, &l3);
    rig.run();
    let icmp = icmp4_reply(&mut rig);
    assert_eq!(
        expect_v4_error(&icmp, &l3),
        Err4::Unreachable(DstUnreachable::HostUnreachable)
    );
    assert_eq!((icmp[0], icmp[1]), (3, 1));

    let l3 = udp4(HOST_A, Ipv4Addr::new(198, 19, 0, 1), 64, 1, 2, b"p");
    send4(&mut rig, &l3);
    rig.run();
    let icmp = icmp4_reply(&mut rig);
    assert_eq!(
        expect_v4_error(&icmp, &l3),
        Err4::Unreachable(DstUnreachable::CommProhibited)
    );
    assert_eq!((icmp[0], icmp[1]), (3, 13));

    // A blackhole answers nothing.
    send4(
        &mut rig,
        &udp4(HOST_A, Ipv4Addr::new(198, 20, 0, 1), 64, 1, 2, b"b"),
    );
    rig.run();
    assert!(rig.recv(0).is_empty());

    let s = vr.stats();
    assert_eq!(s.icmp_sent, 2);
    assert_drops(
        &s,
        &[
            (Drop::Unreachable, 1),
            (Drop::Prohibited, 1),
            (Drop::Blackhole, 1),
        ],
    );
    assert_clean(&mut rig);
}

#[test]
fn df_and_too_big_sends_frag_needed_with_the_egress_mtu() {
    let mut rig = Rig::new(2);
    let vr = Blue {
        b_mtu: 1280,
        ..Blue::default()
    }
    .build(&mut rig);
    // 1400 bytes with DF (udp4 sets it).
    let l3 = udp4(HOST_A, FAR, 64, 1, 2, &[0x5a; 1372]);
    assert_eq!(l3.len(), 1400);
    send4(&mut rig, &l3);
    rig.run();
    let icmp = icmp4_reply(&mut rig);
    assert_eq!(
        expect_v4_error(&icmp, &l3),
        Err4::Unreachable(DstUnreachable::FragRequired { next_hop_mtu: 1280 })
    );
    assert_eq!((icmp[0], icmp[1]), (3, 4));
    assert_eq!(
        icmpv4::Packet::new_checked(&icmp[..])
            .unwrap()
            .next_hop_mtu(),
        1280
    );
    // The whole error is at most 576 bytes (RFC 1812 §4.3.2.3).
    assert_eq!(icmp.len(), icmpv4::MAX_QUOTE_LEN + 8);
    assert!(rig.recv(1).is_empty());
    // Exactly the MTU is fine.
    let l3 = udp4(HOST_A, FAR, 64, 1, 2, &[0x5a; 1252]);
    assert_eq!(l3.len(), 1280);
    send4(&mut rig, &l3);
    rig.run();
    assert_eq!(rig.recv(1).len(), 1);
    assert_drops(&vr.stats(), &[(Drop::MtuExceeded, 1)]);
    assert_clean(&mut rig);
}

/// Parse an ICMPv6 error and check that it quotes `l3` (clipped to the minimum MTU).
#[track_caller]
fn expect_v6_error(icmp: &[u8], l3: &[u8]) -> ErrorMessage {
    let p = icmpv6::Packet::new_checked(icmp).unwrap();
    let (what, invoking) = match icmpv6::Repr::parse(&p).unwrap() {
        icmpv6::Repr::DstUnreachable { code, invoking } => {
            (ErrorMessage::DstUnreachable(code), invoking)
        }
        icmpv6::Repr::PacketTooBig { mtu, invoking } => {
            (ErrorMessage::PacketTooBig { mtu }, invoking)
        }
        icmpv6::Repr::TimeExceeded { code, invoking } => {
            (ErrorMessage::TimeExceeded(code), invoking)
        }
        other => panic!("not an ICMPv6 error: {other:?}"),
    };
    let n = l3.len().min(icmpv6::MAX_INVOKING_LEN);
    assert_eq!(invoking, &l3[..n]);
    what
}

#[test]
fn ipv6_hop_limit_expired_sends_time_exceeded() {
    for hop in [1, 0] {
        let mut rig = Rig::new(2);
        let vr = Blue::default().build(&mut rig);
        let l3 = udp6(host_a6(), far6(), hop, 1, 2, b"six");
        send6(&mut rig, &l3);
        rig.run();
        let icmp = icmp6_reply(&mut rig);
        assert_eq!(
            expect_v6_error(&icmp, &l3),
            ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT)
        );
        assert_eq!((icmp[0], icmp[1]), (3, 0));
        assert_drops(&vr.stats(), &[(Drop::TtlExpired, 1)]);
        assert_clean(&mut rig);
    }
}

#[test]
fn ipv6_no_route_and_prohibit_send_codes_0_and_1() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    vr.fib6
        .insert("2001:db8:bad::/48".parse().unwrap(), NextHop::Prohibit)
        .unwrap();
    let l3 = udp6(
        host_a6(),
        "2001:db8:dead::1".parse().unwrap(),
        64,
        1,
        2,
        b"x",
    );
    send6(&mut rig, &l3);
    rig.run();
    let icmp = icmp6_reply(&mut rig);
    assert_eq!(
        expect_v6_error(&icmp, &l3),
        ErrorMessage::DstUnreachable(UnreachableCode::NO_ROUTE)
    );
    assert_eq!((icmp[0], icmp[1]), (1, 0));

    let l3 = udp6(
        host_a6(),
        "2001:db8:bad::1".parse().unwrap(),
        64,
        1,
        2,
        b"y",
    );
    send6(&mut rig, &l3);
    rig.run();
    let icmp = icmp6_reply(&mut rig);
    assert_eq!(
        expect_v6_error(&icmp, &l3),
        ErrorMessage::DstUnreachable(UnreachableCode::ADMIN_PROHIBITED)
    );
    assert_eq!((icmp[0], icmp[1]), (1, 1));
    let s = vr.stats();
    assert_eq!(s.icmp_sent, 2);
    assert_drops(&s, &[(Drop::NoRoute, 1), (Drop::Prohibited, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn ipv6_too_big_sends_packet_too_big_with_the_mtu() {
    let mut rig = Rig::new(2);
    let vr = Blue {
        b_mtu: 1280,
        ..Blue::default()
    }
    .build(&mut rig);
    let l3 = udp6(host_a6(), far6(), 64, 1, 2, &[0xa5; 1352]);
    assert_eq!(l3.len(), 1400);
    send6(&mut rig, &l3);
    rig.run();
    let icmp = icmp6_reply(&mut rig);
    assert_eq!(
        expect_v6_error(&icmp, &l3),
        ErrorMessage::PacketTooBig { mtu: 1280 }
    );
    assert_eq!((icmp[0], icmp[1]), (2, 0));
    // Error = 1280 bytes exactly: 40 + 8 + 1232 quoted.
    assert_eq!(icmp.len(), 8 + icmpv6::MAX_INVOKING_LEN);
    assert!(rig.recv(1).is_empty());
    assert_drops(&vr.stats(), &[(Drop::MtuExceeded, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn no_error_about_an_icmp_error_but_one_about_an_echo() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    // An ICMP Time Exceeded (about some datagram) that itself expires here.
    let inner = udp4(FAR, HOST_A, 1, 5, 6, b"inner");
    let err = icmpv4::Repr::time_exceeded(TimeExceeded::TtlExpired, &inner).unwrap();
    let echo = icmpv4::Repr::EchoRequest {
        ident: 7,
        seq_no: 1,
        data: b"ping",
    };
    for (msg, answered) in [(err, false), (echo, true)] {
        let mut b = vec![0u8; 20 + msg.buffer_len()];
        ipv4::Repr {
            src_addr: HOST_A,
            dst_addr: FAR,
            protocol: Protocol::ICMP,
            payload_len: msg.buffer_len(),
            ttl: 1,
            dscp: 0,
            ecn: 0,
            ident: 9,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            options: ipv4::Options::EMPTY,
        }
        .emit(&mut ipv4::Packet::new_unchecked(&mut b[..]));
        msg.emit(&mut icmpv4::Packet::new_unchecked(&mut b[20..]));
        send4(&mut rig, &b);
        rig.run();
        if answered {
            let icmp = icmp4_reply(&mut rig);
            expect_v4_error(&icmp, &b);
        } else {
            assert!(rig.recv(0).is_empty());
        }
    }
    // IPv6: an ICMPv6 Time Exceeded with hop limit 1.
    let inner6 = udp6(far6(), host_a6(), 1, 5, 6, b"inner");
    let mut b = vec![0u8; 1280];
    let n = icmpv6::emit_error(
        &mut b,
        host_a6(),
        far6(),
        1,
        ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT),
        &inner6,
    )
    .unwrap();
    send6(&mut rig, &b[..n]);
    rig.run();
    assert!(rig.recv(0).is_empty());
    let s = vr.stats();
    assert_eq!(s.icmp_sent, 1);
    assert_drops(&s, &[(Drop::TtlExpired, 3), (Drop::IcmpSuppressed, 2)]);
    assert_clean(&mut rig);
}

#[test]
fn no_error_about_multicast_or_broadcast_destinations() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    // IP multicast beyond the link: dropped, no error.
    send4(
        &mut rig,
        &udp4(HOST_A, Ipv4Addr::new(239, 1, 2, 3), 1, 1, 2, b"m"),
    );
    send6(
        &mut rig,
        &udp6(host_a6(), "ff0e::1".parse().unwrap(), 1, 1, 2, b"m"),
    );
    // Unicast IP in a link-layer broadcast / multicast frame, expiring: no error either
    // (RFC 1812 §4.3.2.7, RFC 4443 §2.4(e.3)); such a frame is not forwarded at all, so it
    // is dropped at input before its TTL is looked at (RFC 1812 §5.3.4).
    rig.send(
        0,
        &eth(
            EthernetAddress::BROADCAST,
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST_A, FAR, 1, 1, 2, b"b"),
        ),
    );
    rig.send(
        0,
        &eth(
            EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
            HOST_MAC,
            None,
            0x86dd,
            &udp6(host_a6(), far6(), 1, 1, 2, b"b"),
        ),
    );
    // A non-initial fragment that expires: no error (RFC 1812 §4.3.2.7).
    let mut frag = udp4(HOST_A, FAR, 1, 1, 2, b"fragment");
    set_frag(&mut frag, 1480, false);
    send4(&mut rig, &frag);
    // Limited broadcast with TTL 1 (DHCP, say): for the control plane, not an error.
    rig.send(
        0,
        &eth(
            EthernetAddress::BROADCAST,
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST_A, Ipv4Addr::BROADCAST, 1, 68, 67, b"dhcp"),
        ),
    );
    rig.run();
    assert!(rig.recv(0).is_empty());
    assert!(rig.recv(1).is_empty());
    assert_eq!(take_punts(&rig, &vr).len(), 1);
    let s = vr.stats();
    assert_eq!(s.icmp_sent, 0);
    assert_drops(
        &s,
        &[
            (Drop::Ip4Multicast, 1),
            (Drop::Ip6Multicast, 1),
            (Drop::Ip4LinkBroadcast, 1),
            (Drop::Ip6LinkMulticast, 1),
            (Drop::TtlExpired, 1),
            (Drop::IcmpSuppressed, 1),
        ],
    );
    assert_clean(&mut rig);
}

#[test]
fn no_error_without_an_address_of_that_family() {
    // VIF a has only IPv6, so an IPv4 error has no source.
    let mut rig = Rig::new(2);
    let vr = Blue {
        a_addrs: vec![IfAddr::V6(a6(), 64)],
        ..Blue::default()
    }
    .build(&mut rig);
    send4(&mut rig, &udp4(HOST_A, FAR, 1, 1, 2, b"v4"));
    rig.run();
    assert!(rig.recv(0).is_empty());
    assert_drops(
        &vr.stats(),
        &[(Drop::TtlExpired, 1), (Drop::IcmpNoSource, 1)],
    );
    assert_clean(&mut rig);

    // VIF a has only IPv4, so an IPv6 error has no source.
    let mut rig = Rig::new(2);
    let vr = Blue {
        a_addrs: vec![IfAddr::V4(A, 24)],
        ..Blue::default()
    }
    .build(&mut rig);
    send6(&mut rig, &udp6(host_a6(), far6(), 1, 1, 2, b"v6"));
    rig.run();
    assert!(rig.recv(0).is_empty());
    assert_drops(
        &vr.stats(),
        &[(Drop::TtlExpired, 1), (Drop::IcmpNoSource, 1)],
    );
    assert_eq!(vr.stats().icmp_sent, 0);
    assert_clean(&mut rig);
}

#[test]
fn errors_are_rate_limited_per_vr() {
    const BURST: u32 = 3;
    const SENT: u64 = 20;
    let mut rig = Rig::new(2);
    let mut cfg = vrhost_dataplane::VrConfig::new("blue");
    // One token per second: the test ends long before a second token could arrive.
    cfg.icmp_rate = 1;
    cfg.icmp_burst = BURST;
    let vr = Blue {
        cfg,
        ..Blue::default()
    }
    .build(&mut rig);
    for i in 0..SENT {
        send4(&mut rig, &udp4(HOST_A, FAR, 1, 1000 + i as u16, 2, b"x"));
    }
    rig.run();
    let out = rig.recv(0);
    assert_eq!(out.len(), BURST as usize);
    for f in &out {
        let f = l2(f);
        let ip = ipv4::Packet::new_checked(&f.l3[..]).unwrap();
        let r = icmpv4::Repr::parse(&icmpv4::Packet::new_checked(ip.payload()).unwrap()).unwrap();
        assert!(matches!(r, icmpv4::Repr::TimeExceeded { .. }));
    }
    let s = vr.stats();
    assert_eq!(s.icmp_sent, u64::from(BURST));
    assert_drops(
        &s,
        &[
            (Drop::TtlExpired, SENT),
            (Drop::IcmpRateLimited, SENT - u64::from(BURST)),
        ],
    );
    // The limit is shared by both families.
    send6(&mut rig, &udp6(host_a6(), far6(), 1, 1, 2, b"six"));
    rig.run();
    assert!(rig.recv(0).is_empty());
    assert_eq!(
        vr.stats().drop(Drop::IcmpRateLimited),
        SENT - u64::from(BURST) + 1
    );
    assert_clean(&mut rig);
}

#[test]
fn errors_about_ipv6_sources_on_the_link_use_the_vif_address() {
    // A sender whose source is link-local gets its error from the VIF too (and the error is
    // about a packet that may not leave the link: beyond scope).
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    let ll: Ipv6Addr = "fe80::2".parse().unwrap();
    let l3 = udp6(ll, far6(), 64, 1, 2, b"ll");
    send6(&mut rig, &l3);
    rig.run();
    let out = rig.recv(0);
    assert_eq!(out.len(), 1);
    let f = l2(&out[0]);
    let ip = ipv6::Packet::new_checked(&f.l3[..]).unwrap();
    assert_eq!((ip.src_addr(), ip.dst_addr()), (a6(), ll));
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(a6(), ll));
    let r = icmpv6::Repr::parse(&icmp).unwrap();
    assert!(matches!(
        r,
        icmpv6::Repr::DstUnreachable {
            code: UnreachableCode::BEYOND_SCOPE,
            ..
        }
    ));
    assert!(rig.recv(1).is_empty());
    assert_drops(&vr.stats(), &[(Drop::Ip6BadSource, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn a_link_local_source_is_forwarded_back_out_of_its_own_link() {
    // RFC 4007 §9 keeps a link-local source on its link, and only there: a packet that
    // leaves by the VIF it came in by stays on the link and is forwarded, as Linux does (a
    // neighbour on the same subnet reached through the router).
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    let peer: Ipv6Addr = "2001:db8:a::3".parse().unwrap();
    vr.neigh.set(0, peer.into(), mac(0x33));
    rig.worker.poll();
    let ll: Ipv6Addr = "fe80::2".parse().unwrap();
    let l3 = udp6(ll, peer, 64, 1, 2, b"ll");
    send6(&mut rig, &l3);
    rig.run();
    let out = rig.recv(0);
    assert_eq!(out.len(), 1);
    let f = l2(&out[0]);
    assert_eq!((f.dst, f.src, f.ethertype), (mac(0x33), mac(1), 0x86dd));
    let mut want = l3.clone();
    want[7] -= 1;
    assert_eq!(f.l3, want);
    assert!(rig.recv(1).is_empty());
    let s = vr.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (1, 1));
    assert_drops(&s, &[]);
    assert_clean(&mut rig);
}

#[test]
fn no_free_slot_for_the_error_is_counted() {
    // One slot: the offending packet holds it while the error would be built.
    let mut rig = Rig::with(2, 1, 64);
    let vr = Blue::default().build(&mut rig);
    send4(&mut rig, &udp4(HOST_A, FAR, 1, 1, 2, b"x"));
    rig.run();
    assert!(rig.recv(0).is_empty());
    let s = vr.stats();
    assert_eq!(s.icmp_sent, 0);
    assert_drops(&s, &[(Drop::TtlExpired, 1), (Drop::IcmpNoBuffer, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn an_error_not_sent_for_want_of_a_slot_spends_no_token() {
    // Two slots and a burst of one token: the test holds one slot, the offending packet
    // takes the other, so the first error finds no slot. The token must still be there
    // for the second error once a slot is free.
    let mut rig = Rig::with(2, 2, 64);
    let mut cfg = vrhost_dataplane::VrConfig::new("blue");
    cfg.icmp_rate = 1;
    cfg.icmp_burst = 1;
    let vr = Blue {
        cfg,
        ..Blue::default()
    }
    .build(&mut rig);
    let held = rig.pool.alloc().expect("a free slot");
    send4(&mut rig, &udp4(HOST_A, FAR, 1, 1, 2, b"x"));
    rig.run();
    assert!(rig.recv(0).is_empty());
    assert_drops(
        &vr.stats(),
        &[(Drop::TtlExpired, 1), (Drop::IcmpNoBuffer, 1)],
    );
    rig.pool.free(held);
    send4(&mut rig, &udp4(HOST_A, FAR, 1, 1, 2, b"y"));
    rig.run();
    let icmp = icmp4_reply(&mut rig);
    assert_eq!(icmp[0], 11, "time exceeded");
    let s = vr.stats();
    assert_eq!(s.icmp_sent, 1);
    assert_drops(&s, &[(Drop::TtlExpired, 2), (Drop::IcmpNoBuffer, 1)]);
    assert_clean(&mut rig);
}

/// After `l3` (to `dst`) ran through Blue: nothing forwarded, and either (`refused` none)
/// punted as it came and nothing else, or no punt, the drop `refused` names, and `error`'s
/// check of the one frame sent back (none if `refused` gives no code). The pool is clean.
#[track_caller]
fn punted_or_refused<C>(
    rig: &mut Rig,
    vr: &vrhost_dataplane::Vr,
    dst: impl std::fmt::Display,
    l3: &[u8],
    refused: Option<(Drop, Option<C>)>,
    error: impl FnOnce(&mut Rig, C),
) {
    assert!(rig.recv(1).is_empty(), "to {dst}: forwarded");
    let punts = take_punts(rig, vr);
    let s = vr.stats();
    match refused {
        None => {
            assert_eq!(punts.len(), 1, "to {dst}: not punted");
            assert_eq!(&punts[0].1[14..], l3, "to {dst}: punted as it came");
            assert!(rig.recv(0).is_empty());
            assert_drops(&s, &[]);
        }
        Some((why, code)) => {
            assert!(punts.is_empty(), "to {dst}: punted");
            match code {
                Some(code) => error(rig, code),
                None => assert!(rig.recv(0).is_empty(), "to {dst}: an error sent"),
            }
            assert_drops(&s, &[(why, 1)]);
        }
    }
    assert_clean(rig);
}

/// `l3` (an IPv4 datagram without options) with `opts` (a multiple of 4 bytes) after its
/// header: header length, total length and checksum made right.
fn with_options(l3: &[u8], opts: &[u8]) -> Vec<u8> {
    assert_eq!(opts.len() % 4, 0);
    let mut v = [&l3[..20], opts, &l3[20..]].concat();
    v[0] = 0x40 | ((20 + opts.len()) / 4) as u8;
    let total = v.len() as u16;
    v[2..4].copy_from_slice(&total.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut v[..]).fill_checksum();
    v
}

#[test]
fn ip_options_go_to_the_control_plane_unless_the_route_forwards_nothing() {
    // Router Alert (RFC 2113): the control plane's. But options must not carry a packet
    // past a blackhole, unreachable or prohibit route, or a missing one, onto the punt
    // path: those are applied in the data plane as for any packet.
    const ALERT: [u8; 4] = [0x94, 0x04, 0x00, 0x00];
    let routes = [
        ("192.0.2.0/24", NextHop::Drop),
        ("203.0.113.0/25", NextHop::Unreachable),
        ("203.0.113.128/25", NextHop::Prohibit),
    ];
    // Destination, and what its route does instead of forwarding (none: punted).
    type Refused = Option<(Drop, Option<DstUnreachable>)>;
    let cases: [(Ipv4Addr, Refused); 6] = [
        (FAR, None),
        (A, None),
        (Ipv4Addr::new(192, 0, 2, 9), Some((Drop::Blackhole, None))),
        (
            Ipv4Addr::new(203, 0, 113, 9),
            Some((Drop::Unreachable, Some(DstUnreachable::HostUnreachable))),
        ),
        (
            Ipv4Addr::new(203, 0, 113, 200),
            Some((Drop::Prohibited, Some(DstUnreachable::CommProhibited))),
        ),
        (
            Ipv4Addr::new(100, 64, 0, 9),
            Some((Drop::NoRoute, Some(DstUnreachable::NetUnreachable))),
        ),
    ];
    for (dst, refused) in cases {
        let mut rig = Rig::new(2);
        let vr = Blue::default().build(&mut rig);
        for (prefix, hop) in routes {
            vr.fib4.insert(prefix.parse().unwrap(), hop).unwrap();
        }
        rig.worker.poll();
        let l3 = with_options(&udp4(HOST_A, dst, 64, 1, 2, b"alert"), &ALERT);
        send4(&mut rig, &l3);
        rig.run();
        punted_or_refused(&mut rig, &vr, dst, &l3, refused, |rig, code| {
            let icmp = icmp4_reply(rig);
            assert_eq!(expect_v4_error(&icmp, &l3), Err4::Unreachable(code));
        });
    }
}

#[test]
fn an_ipv6_router_alert_goes_to_the_control_plane_unless_the_route_forwards_nothing() {
    // As IP options for IPv4: a Hop-by-Hop Router Alert (RFC 2711) is punted, unless the
    // destination's route forwards nothing, which is applied as for any packet.
    let routes = [
        ("2001:db8:dead::/48", NextHop::Drop),
        ("2001:db8:beef::/48", NextHop::Unreachable),
        ("2001:db8:cafe::/48", NextHop::Prohibit),
    ];
    // Destination, and what its route does instead of forwarding (none: punted).
    type Refused = Option<(Drop, Option<UnreachableCode>)>;
    let cases: [(Ipv6Addr, Refused); 6] = [
        (far6(), None),
        (a6(), None),
        (
            "2001:db8:dead::9".parse().unwrap(),
            Some((Drop::Blackhole, None)),
        ),
        (
            "2001:db8:beef::9".parse().unwrap(),
            Some((Drop::Unreachable, Some(UnreachableCode::NO_ROUTE))),
        ),
        (
            "2001:db8:cafe::9".parse().unwrap(),
            Some((Drop::Prohibited, Some(UnreachableCode::ADMIN_PROHIBITED))),
        ),
        (
            "2001:db8:1234::9".parse().unwrap(),
            Some((Drop::NoRoute, Some(UnreachableCode::NO_ROUTE))),
        ),
    ];
    for (dst, refused) in cases {
        let mut rig = Rig::new(2);
        let vr = Blue::default().build(&mut rig);
        for (prefix, hop) in routes {
            vr.fib6.insert(prefix.parse().unwrap(), hop).unwrap();
        }
        rig.worker.poll();
        // Hop-by-Hop (next: UDP, 8 bytes): Router Alert (value 0), PadN of 0 bytes.
        let plain = udp6(host_a6(), dst, 64, 1, 2, b"alert");
        let mut l3 = [&plain[..40], &[17, 0, 5, 2, 0, 0, 1, 0], &plain[40..]].concat();
        l3[6] = 0;
        let plen = (l3.len() - 40) as u16;
        l3[4..6].copy_from_slice(&plen.to_be_bytes());
        send6(&mut rig, &l3);
        rig.run();
        punted_or_refused(&mut rig, &vr, dst, &l3, refused, |rig, code| {
            let icmp = icmp6_reply(rig);
            assert_eq!(
                expect_v6_error(&icmp, &l3),
                ErrorMessage::DstUnreachable(code)
            );
        });
    }
}
