//! End to end through mem ports: frames in, frames out, bytes checked by re-parsing.

mod common;
mod util;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::*;
use util::*;
use vrhost_dataplane::Drop;
use vrhost_fib::NextHop;
use vrhost_wire::{ethernet, ipv4, ipv6};

/// The standard two-interface VR "blue" of `util`, built on a fresh two-port rig.
fn blue() -> Rig {
    let mut rig = Rig::new(2);
    Blue::default().build(&mut rig);
    rig
}

/// "blue" with its flow cache off.
fn no_flow_cache() -> Blue {
    let mut b = Blue::default();
    b.cfg.flow_cache = 0;
    b
}

#[test]
fn ipv4_forwarded_with_rewritten_l2_ttl_and_checksum() {
    let mut rig = blue();
    let dst = Ipv4Addr::new(198, 51, 100, 7);
    let l3 = udp4(HOST_A, dst, 64, 1000, 2000, b"hello");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    let f = ethernet::Frame::new_checked(&out[0][..]).unwrap();
    assert_eq!(f.dst_addr(), mac(0x22));
    assert_eq!(f.src_addr(), mac(2));
    let ip = ipv4::Packet::new_checked(f.payload()).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr()), (HOST_A, dst));
    // Everything after the TTL/checksum is untouched; the 47-byte frame is padded with
    // zeros to 60 bytes.
    assert_eq!(&f.payload()[20..l3.len()], &l3[20..]);
    assert_eq!(out[0].len(), 60);
    assert!(f.payload()[l3.len()..].iter().all(|&b| b == 0));
    assert!(rig.recv(0).is_empty());
    let s = rig.dp.vr("blue").unwrap().stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.total_drops()), (1, 1, 0));
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn ipv6_forwarded_with_hop_limit_decremented() {
    let mut rig = blue();
    let src: Ipv6Addr = "2001:db8:a::2".parse().unwrap();
    let dst: Ipv6Addr = "2001:db8:ff::9".parse().unwrap();
    let l3 = udp6(src, dst, 5, 1, 2, b"six");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x86dd, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    let f = ethernet::Frame::new_checked(&out[0][..]).unwrap();
    assert_eq!((f.dst_addr(), f.src_addr()), (mac(0x22), mac(2)));
    let ip = ipv6::Packet::new_checked(f.payload()).unwrap();
    assert_eq!(ip.hop_limit(), 4);
    assert_eq!(&f.payload()[8..], &l3[8..]);
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn local_and_arp_are_punted_malformed_is_counted() {
    let mut rig = blue();
    // To the VR's own address: punted.
    rig.send(
        0,
        &eth(
            mac(1),
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST_A, A, 64, 1, 2, b"x"),
        ),
    );
    // ARP broadcast: punted.
    let arp = arp_request(HOST_MAC, HOST_A, A);
    rig.send(
        0,
        &eth(
            ethernet::EthernetAddress::BROADCAST,
            HOST_MAC,
            None,
            0x0806,
            &arp,
        ),
    );
    // Bad checksum.
    let mut bad = udp4(HOST_A, Ipv4Addr::new(198, 51, 100, 7), 64, 1, 2, b"x");
    bad[10] ^= 0xff;
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &bad));
    // Truncated frame, and an unknown MAC.
    rig.send(0, &[0u8; 10]);
    rig.send(
        0,
        &eth(
            mac(9),
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST_A, A, 64, 1, 2, b"x"),
        ),
    );
    rig.run();
    let vr = rig.dp.vr("blue").unwrap();
    assert_eq!(vr.punt_len(), 2);
    let s = vr.stats();
    assert_eq!(s.drop(Drop::Ip4BadChecksum), 1);
    let d = rig.dp.demux_drops();
    assert_eq!(d[Drop::L2Truncated as usize], 1);
    assert_eq!(d[Drop::NoVr as usize], 1);
    while let Some(p) = vr.punt_recv() {
        rig.pool.free(p);
    }
    assert!(rig.recv(1).is_empty());
    assert_eq!(rig.in_use(), 0);
}

/// One vector mixing good frames to two next hops with every way off the forwarding path
/// (bad checksum, options, own address, ARP, TTL 1, IPv6): each good frame leaves, in
/// order, towards its own next hop with its own destination; the rest are counted.
#[test]
fn a_mixed_vector_forwards_the_good_frames_in_order_and_counts_the_rest() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    let nh2 = Ipv4Addr::new(10, 0, 1, 3);
    vr.fib4
        .insert(
            "203.0.113.0/24".parse().unwrap(),
            NextHop::Via {
                addr: nh2.into(),
                ifindex: 1,
            },
        )
        .unwrap();
    vr.neigh.set(1, nh2.into(), mac(0x33));
    let mut want = Vec::new();
    let (mut bad, mut punts, mut ttl) = (0, 0, 0);
    for i in 0..120u8 {
        let dst = if i % 3 == 0 {
            Ipv4Addr::new(203, 0, 113, i)
        } else {
            Ipv4Addr::new(198, 51, 100, i)
        };
        let mut l3 = udp4(HOST_A, dst, 64, 1000, u16::from(i), b"mixed");
        let ty = match i % 7 {
            1 => {
                l3[10] ^= 0x55;
                bad += 1;
                0x0800
            }
            2 => {
                l3 = udp4(HOST_A, A, 64, 1, u16::from(i), b"local");
                punts += 1;
                0x0800
            }
            3 if i % 2 == 0 => {
                l3 = udp4(HOST_A, dst, 1, 1, u16::from(i), b"ttl");
                ttl += 1;
                0x0800
            }
            4 => {
                l3 = arp_request(HOST_MAC, HOST_A, A);
                punts += 1;
                0x0806
            }
            _ => {
                want.push((dst, if i % 3 == 0 { mac(0x33) } else { mac(0x22) }));
                0x0800
            }
        };
        rig.send(0, &eth(mac(1), HOST_MAC, None, ty, &l3));
    }
    rig.run();
    let out: Vec<_> = rig
        .recv(1)
        .into_iter()
        .filter(|f| {
            ethernet::Frame::new_checked(&f[..]).unwrap().ethertype() == ethernet::EtherType::IPV4
        })
        .filter(|f| {
            let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
            ip.protocol() == vrhost_wire::ip::Protocol::UDP
        })
        .collect();
    let got: Vec<_> = out
        .iter()
        .map(|f| {
            let e = ethernet::Frame::new_checked(&f[..]).unwrap();
            let ip = ipv4::Packet::new_checked(e.payload()).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.ttl(), 63);
            (ip.dst_addr(), e.dst_addr())
        })
        .collect();
    assert_eq!(got, want);
    let s = vr.stats();
    assert_eq!(s.drop(Drop::Ip4BadChecksum), bad);
    assert_eq!(s.drop(Drop::TtlExpired), ttl);
    assert_eq!(vr.punt_len() as u64, punts);
    while let Some(p) = vr.punt_recv() {
        rig.pool.free(p);
    }
    rig.recv(0);
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn flow_cache_hits_and_follows_route_and_neighbour_changes() {
    let mut rig = blue();
    let vr = rig.dp.vr("blue").unwrap();
    let dst = Ipv4Addr::new(198, 51, 100, 7);
    let frame = eth(
        mac(1),
        HOST_MAC,
        None,
        0x0800,
        &udp4(HOST_A, dst, 64, 1, 2, b"c"),
    );
    let dst_mac = |f: &[u8]| ethernet::Frame::new_checked(f).unwrap().dst_addr();
    for _ in 0..3 {
        rig.send(0, &frame);
        rig.run();
    }
    let s = vr.stats();
    assert_eq!((s.flow_misses, s.flow_hits), (1, 2));
    assert!(rig.recv(1).iter().all(|f| dst_mac(f) == mac(0x22)));

    // The neighbour's MAC changes: the next packet must not use the cached one.
    vr.neigh.set(1, NH_B.into(), mac(0x23));
    rig.send(0, &frame);
    rig.run();
    assert_eq!(dst_mac(&rig.recv(1)[0]), mac(0x23));

    // A more specific route via another neighbour on VIF a takes over.
    vr.fib4
        .insert(
            "198.51.100.0/25".parse().unwrap(),
            NextHop::Via {
                addr: HOST_A.into(),
                ifindex: 0,
            },
        )
        .unwrap();
    vr.neigh.set(0, HOST_A.into(), HOST_MAC);
    rig.send(0, &frame);
    rig.run();
    assert!(rig.recv(1).is_empty());
    let back = rig.recv(0);
    assert_eq!(back.len(), 1);
    assert_eq!(dst_mac(&back[0]), HOST_MAC);
    let s = vr.stats();
    assert_eq!(s.flow_misses, 3);
    assert_eq!(s.tx_packets, 5);
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn flow_cache_off_still_forwards() {
    let mut rig = Rig::new(2);
    let vr = no_flow_cache().build(&mut rig);
    rig.send(
        0,
        &eth(
            mac(1),
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST_A, NH_B, 64, 1, 2, b"x"),
        ),
    );
    rig.send(
        0,
        &eth(
            mac(1),
            HOST_MAC,
            None,
            0x0800,
            &udp4(HOST_A, NH_B, 64, 1, 2, b"x"),
        ),
    );
    rig.run();
    assert_eq!(rig.recv(1).len(), 2);
    let s = vr.stats();
    assert_eq!((s.flow_hits, s.flow_misses), (0, 0));
}

#[test]
fn adjacency_cache_follows_neighbour_and_route_changes() {
    // Flow cache off, so every packet goes through the FIB and the adjacency cache.
    let mut rig = Rig::new(2);
    let vr = no_flow_cache().build(&mut rig);
    let p: vrhost_fib::Prefix4 = "198.51.100.0/24".parse().unwrap();
    let via = |a: Ipv4Addr| NextHop::Via {
        addr: a.into(),
        ifindex: 1,
    };
    vr.fib4.insert(p, via(NH_B)).unwrap();
    vr.neigh.set(1, NH_B.into(), mac(0x22));
    let frame = eth(
        mac(1),
        HOST_MAC,
        None,
        0x0800,
        &udp4(HOST_A, Ipv4Addr::new(198, 51, 100, 7), 64, 1, 2, b"a"),
    );
    let out_mac = |rig: &mut Rig| {
        rig.send(0, &frame);
        rig.run();
        let out = rig.recv(1);
        out.first()
            .map(|f| ethernet::Frame::new_checked(&f[..]).unwrap().dst_addr())
    };
    assert_eq!(out_mac(&mut rig), Some(mac(0x22)));
    assert_eq!(out_mac(&mut rig), Some(mac(0x22)));
    vr.neigh.set(1, NH_B.into(), mac(0x23));
    assert_eq!(out_mac(&mut rig), Some(mac(0x23)));
    // Another next hop for the same prefix.
    let nh2 = Ipv4Addr::new(10, 0, 1, 3);
    vr.neigh.set(1, nh2.into(), mac(0x33));
    vr.fib4.insert(p, via(nh2)).unwrap();
    assert_eq!(out_mac(&mut rig), Some(mac(0x33)));
    // The neighbour goes away: punted for resolution, not sent to the stale MAC.
    vr.neigh.remove(1, nh2.into());
    assert_eq!(out_mac(&mut rig), None);
    assert_eq!(vr.stats().neigh_miss, 1);
    rig.pool.free(vr.punt_recv().unwrap());
    assert_eq!(rig.in_use(), 0);
}

/// The IPv4 checks judge the frame, not the slot: a frame cut short inside its slot, whose
/// slot still holds the rest of a valid datagram behind it, is dropped as truncated (header
/// cut) or of bad length (datagram cut), never forwarded.
#[test]
fn bytes_left_in_the_slot_past_the_frame_do_not_count() {
    let mut rig = Rig::new(2);
    Blue::default().build(&mut rig);
    let l3 = udp4(HOST_A, FAR, 64, 1, 2, b"payload");
    let whole = eth(mac(1), HOST_MAC, None, 0x0800, &l3);
    // Header cut at 19 bytes; datagram cut one byte short of its total length.
    for len in [14 + 19, whole.len() - 1] {
        let mut p = rig.pool.alloc_frame(&whole).unwrap();
        rig.pool.meta_mut(&mut p).len = len as u16;
        assert!(rig.peers[0].rx[0].push(p).is_ok());
    }
    // And the whole frame, which goes through.
    rig.send(0, &whole);
    rig.run();
    let s = rig.dp.vr("blue").unwrap().stats();
    assert_drops(&s, &[(Drop::Ip4Truncated, 1), (Drop::Ip4BadLength, 1)]);
    assert_eq!(rig.recv(1).len(), 1);
    assert_eq!(rig.in_use(), 0);
}

/// A short datagram comes in a frame its sender padded (here with 0xee, not zeros): the
/// padding is not forwarded as if it were the packet's. The datagram leaves in a frame
/// padded again to 60 bytes, with zeros; and a frame the VR's control plane sends short
/// (an ARP reply, 42 bytes) leaves padded too. Counters count the bytes that left.
#[test]
fn short_frames_leave_padded_with_zeros_to_60_bytes() {
    let mut rig = blue();
    let l3 = udp4(HOST_A, FAR, 64, 7, 9, b"");
    assert_eq!(l3.len(), 28);
    let mut sent = eth(mac(1), HOST_MAC, None, 0x0800, &l3);
    sent.resize(60, 0xee);
    rig.send(0, &sent);
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].len(), 60);
    assert_eq!(out[0][14 + 8], 63, "forwarded: TTL less one");
    assert_eq!(&out[0][14 + 20..42], &l3[20..]);
    assert_eq!(out[0][42..], [0; 18], "the sender's padding stays behind");
    let arp = eth(
        mac(0x22),
        mac(2),
        None,
        0x0806,
        &arp_request(mac(2), B, NH_B),
    );
    assert_eq!(arp.len(), 42);
    let p = rig.pool.alloc_frame(&arp).unwrap();
    rig.dp.inject("blue", 1, p).unwrap();
    rig.run();
    assert_eq!(rig.recv(1), [padded(&arp)]);
    let s = rig.dp.vr("blue").unwrap().stats();
    assert_eq!((s.tx_packets, s.tx_bytes), (2, 120));
    assert_eq!(rig.in_use(), 0);
}
