//! What a router must never forward, whatever its routes say: martian addresses (RFC 1812
//! §5.3.7, RFC 4291 §2.5.2–3), link-local addresses (RFC 3927 §7, RFC 4291 §2.5.6) and
//! unicast datagrams that came in a link-layer broadcast or multicast frame (RFC 1812
//! §5.3.4). The ones that may be for the router itself are punted when they are; the rest
//! are counted drops. Each VR here has default routes, so without these checks every
//! packet below would leave by VIF b.

mod common;
mod util;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use common::*;
use util::*;
use vrhost_dataplane::{Drop, IfAddr, Vr};
use vrhost_fib::NextHop;
use vrhost_wire::ethernet::EthernetAddress;

/// A link-layer multicast MAC (224.0.0.1's).
const L2_MCAST: EthernetAddress = EthernetAddress([0x01, 0, 0x5e, 0, 0, 1]);

/// "blue" with default routes 0.0.0.0/0 via `NH_B` and ::/0 via `nh_b6()` (both on VIF b),
/// VIF a also holding the link-local addresses 169.254.0.1 and fe80::1; the flow cache on or
/// off.
fn blue_with_defaults(flow_cache: bool) -> (Rig, Arc<Vr>) {
    let mut rig = Rig::new(2);
    let mut b = Blue::default();
    b.a_addrs
        .push(IfAddr::V4(Ipv4Addr::new(169, 254, 0, 1), 16));
    b.a_addrs.push(IfAddr::V6("fe80::1".parse().unwrap(), 64));
    if !flow_cache {
        b.cfg.flow_cache = 0;
    }
    let vr = b.build(&mut rig);
    let via4 = NextHop::Via {
        addr: NH_B.into(),
        ifindex: 1,
    };
    let via6 = NextHop::Via {
        addr: IpAddr::V6(nh_b6()),
        ifindex: 1,
    };
    vr.fib4.insert("0.0.0.0/0".parse().unwrap(), via4).unwrap();
    vr.fib6.insert("::/0".parse().unwrap(), via6).unwrap();
    rig.worker.poll();
    (rig, vr)
}

fn v4(dst: EthernetAddress, src: Ipv4Addr, to: Ipv4Addr) -> Vec<u8> {
    v4_ttl(dst, src, to, 64)
}

fn v4_ttl(dst: EthernetAddress, src: Ipv4Addr, to: Ipv4Addr, ttl: u8) -> Vec<u8> {
    eth(dst, HOST_MAC, None, 0x0800, &udp4(src, to, ttl, 1, 2, b"m"))
}

fn v6(dst: EthernetAddress, src: Ipv6Addr, to: Ipv6Addr) -> Vec<u8> {
    eth(dst, HOST_MAC, None, 0x86dd, &udp6(src, to, 64, 1, 2, b"m"))
}

/// A packet forwarded first, so that the route, adjacency and flow caches are warm for the
/// default route: what follows must be stopped before those, not only on a cold path.
fn warm(rig: &mut Rig) {
    rig.send(0, &v4(mac(1), HOST_A, FAR));
    rig.send(0, &v6(mac(1), host_a6(), far6()));
    rig.run();
    assert_eq!(rig.recv(1).len(), 2, "the warm-up packets are forwarded");
}

#[test]
fn martian_ipv4_addresses_are_dropped_and_counted() {
    for flow_cache in [false, true] {
        let (mut rig, vr) = blue_with_defaults(flow_cache);
        warm(&mut rig);
        let before = vr.stats();
        let cases: [(Ipv4Addr, Ipv4Addr, Drop); 8] = [
            (HOST_A, Ipv4Addr::new(127, 0, 0, 1), Drop::Ip4BadDest),
            (HOST_A, Ipv4Addr::new(0, 0, 0, 0), Drop::Ip4BadDest),
            (HOST_A, Ipv4Addr::new(0, 1, 2, 3), Drop::Ip4BadDest),
            (Ipv4Addr::new(0, 1, 2, 3), FAR, Drop::Ip4BadSource),
            (Ipv4Addr::new(127, 0, 0, 9), FAR, Drop::Ip4BadSource),
            (Ipv4Addr::new(240, 0, 0, 1), FAR, Drop::Ip4BadSource),
            (HOST_A, Ipv4Addr::new(169, 254, 1, 1), Drop::Ip4LinkLocal),
            (Ipv4Addr::new(169, 254, 1, 1), FAR, Drop::Ip4BadSource),
        ];
        for (k, (src, dst, why)) in cases.into_iter().enumerate() {
            rig.send(0, &v4(mac(1), src, dst));
            rig.run();
            assert!(
                rig.recv(1).is_empty(),
                "{src} -> {dst} forwarded (flow cache {flow_cache})"
            );
            let s = vr.stats();
            let so_far = cases[..=k].iter().filter(|c| c.2 == why).count() as u64;
            assert_eq!(
                (s.drop(why) - before.drop(why), s.total_drops()),
                (so_far, before.total_drops() + k as u64 + 1),
                "{src} -> {dst}: one more {} and nothing else",
                why.name()
            );
        }
        // No ICMP error went back to any of them, nothing punted, nothing leaked.
        assert_eq!(vr.stats().icmp_sent, 0);
        assert_clean(&mut rig);
    }
}

#[test]
fn martian_ipv6_destinations_are_dropped_and_counted() {
    let (mut rig, vr) = blue_with_defaults(true);
    warm(&mut rig);
    for dst in [Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED] {
        rig.send(0, &v6(mac(1), host_a6(), dst));
    }
    rig.run();
    assert!(rig.recv(1).is_empty(), "::1 or :: forwarded");
    assert_drops(&vr.stats(), &[(Drop::Ip6BadDest, 2)]);
    assert_clean(&mut rig);
}

/// Link-local destinations: the router's own are punted, others dropped, also once the
/// default route's adjacency and the flow cache are warm (a destination matching that route
/// used to take them).
#[test]
fn link_local_destinations_are_punted_when_own_and_dropped_otherwise() {
    for flow_cache in [false, true] {
        let (mut rig, vr) = blue_with_defaults(flow_cache);
        warm(&mut rig);
        let own4 = Ipv4Addr::new(169, 254, 0, 1);
        let own6: Ipv6Addr = "fe80::1".parse().unwrap();
        let other6: Ipv6Addr = "fe80::1234".parse().unwrap();
        let host6: Ipv6Addr = "fe80::2".parse().unwrap();
        for _ in 0..2 {
            rig.send(0, &v4(mac(1), HOST_A, Ipv4Addr::new(169, 254, 7, 7)));
            rig.send(0, &v6(mac(1), host_a6(), other6));
        }
        rig.send(0, &v4(mac(1), Ipv4Addr::new(169, 254, 0, 2), own4));
        rig.send(0, &v6(mac(1), host6, own6));
        rig.run();
        assert!(rig.recv(1).is_empty(), "flow cache {flow_cache}");
        assert_drops(
            &vr.stats(),
            &[(Drop::Ip4LinkLocal, 2), (Drop::Ip6LinkLocal, 2)],
        );
        let punted = take_punts(&rig, &vr);
        let dsts: Vec<_> = punted.iter().map(|(_, f, _)| f[14] >> 4).collect();
        assert_eq!(
            dsts,
            [4, 6],
            "the two to the router's own addresses, in order"
        );
        assert_clean(&mut rig);
    }
}

/// RFC 1812 §5.3.4 (and Linux for both families): a unicast datagram in a link-layer
/// broadcast or multicast frame is not forwarded. Demux floods such a frame to every VIF on
/// the segment, so each VR there would send out its own copy.
#[test]
fn unicast_in_a_link_layer_group_frame_is_not_forwarded() {
    for flow_cache in [false, true] {
        let (mut rig, vr) = blue_with_defaults(flow_cache);
        warm(&mut rig);
        for l2 in [EthernetAddress::BROADCAST, L2_MCAST] {
            rig.send(0, &v4(l2, HOST_A, FAR));
            rig.send(0, &v6(l2, host_a6(), far6()));
        }
        // To the router's own address in a broadcast frame: delivered (punted).
        rig.send(0, &v4(EthernetAddress::BROADCAST, HOST_A, A));
        rig.run();
        assert!(rig.recv(1).is_empty(), "flow cache {flow_cache}");
        assert_drops(
            &vr.stats(),
            &[(Drop::Ip4LinkBroadcast, 2), (Drop::Ip6LinkMulticast, 2)],
        );
        assert_eq!(take_punts(&rig, &vr).len(), 1);
        assert_eq!(vr.stats().icmp_sent, 0);
        // The same datagrams in frames to the VIF's MAC still go.
        rig.send(0, &v4(mac(1), HOST_A, FAR));
        rig.send(0, &v6(mac(1), host_a6(), far6()));
        rig.run();
        assert_eq!(rig.recv(1).len(), 2);
        assert_clean(&mut rig);
    }
}

/// RFC 1812 §4.3.2.7: no ICMP error about a datagram from network 0 (it is dropped at input
/// now, so this checks that nothing at all goes back).
#[test]
fn no_icmp_error_to_a_source_on_network_zero() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    rig.send(0, &v4_ttl(mac(1), Ipv4Addr::new(0, 1, 2, 3), FAR, 1));
    rig.run();
    assert!(rig.recv(0).is_empty(), "an ICMP error went back");
    assert_eq!(vr.stats().icmp_sent, 0);
    assert_drops(&vr.stats(), &[(Drop::Ip4BadSource, 1)]);
    assert_clean(&mut rig);
}
