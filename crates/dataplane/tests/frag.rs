//! IPv4 fragmentation on the forwarding path (RFC 791, RFC 1812 §5.2.6): what leaves fits the
//! egress MTU, reassembles byte for byte, and says so in valid headers; a fragment is
//! re-fragmented in place in its datagram; a pool that runs dry is a counted drop.

mod common;
mod util;

use std::collections::BTreeMap;

use common::*;
use util::*;
use vrhost_dataplane::Drop;
use vrhost_wire::ip::Protocol;
use vrhost_wire::ipv4;

/// One fragment as it left: its header fields and payload.
#[derive(Debug)]
struct Frag {
    offset: usize,
    more: bool,
    payload: Vec<u8>,
}

/// Check every frame that left by port 1 as a fragment of `orig` (an IPv4 datagram as
/// sent): L2 rewritten, fits `mtu`, valid checksum, TTL − 1, same ident, addresses and
/// protocol, DF clear, payload a multiple of 8 unless last.
#[track_caller]
fn fragments(frames: &[Vec<u8>], orig: &[u8], mtu: usize, vlan: Option<u16>) -> Vec<Frag> {
    let o = ipv4::Packet::new_checked(orig).unwrap();
    let mut out: Vec<Frag> = frames
        .iter()
        .map(|frame| {
            let f = l2(frame);
            assert_eq!((f.dst, f.src), (mac(0x22), mac(2)));
            assert_eq!(f.vlans, vlan.into_iter().collect::<Vec<_>>());
            assert_eq!(f.ethertype, 0x0800);
            assert!(f.l3.len() <= mtu, "fragment of {} bytes", f.l3.len());
            let ip = ipv4::Packet::new_checked(&f.l3[..]).unwrap();
            let r = ipv4::Repr::parse(&ip).expect("valid header and checksum");
            assert_eq!(f.l3.len(), r.total_len());
            assert_eq!(r.ttl, o.ttl() - 1);
            assert_eq!(r.ident, o.ident());
            assert_eq!((r.src_addr, r.dst_addr), (o.src_addr(), o.dst_addr()));
            assert_eq!(r.protocol, o.protocol());
            assert!(!r.dont_frag);
            if r.more_frags {
                assert_eq!(r.payload_len % 8, 0);
            }
            Frag {
                offset: usize::from(r.frag_offset),
                more: r.more_frags,
                payload: ip.payload().to_vec(),
            }
        })
        .collect();
    out.sort_by_key(|f| f.offset);
    out
}

/// Put fragments back together by offset (relative to `base`), checking they tile without
/// gap or overlap.
#[track_caller]
fn reassemble(frags: &[Frag], base: usize) -> Vec<u8> {
    let mut by_offset = BTreeMap::new();
    for f in frags {
        assert!(by_offset.insert(f.offset, &f.payload).is_none(), "dup");
    }
    let mut data = Vec::new();
    for (off, p) in by_offset {
        assert_eq!(off, base + data.len(), "gap or overlap at {off}");
        data.extend_from_slice(p);
    }
    data
}

/// A 1400-byte UDP datagram without DF; payload bytes count 0, 1, 2 …
fn big_datagram() -> Vec<u8> {
    let payload: Vec<u8> = (0..1372).map(|i| (i * 7 % 251) as u8).collect();
    let mut l3 = udp4(HOST_A, FAR, 64, 1000, 2000, &payload);
    clear_df(&mut l3);
    assert_eq!(l3.len(), 1400);
    l3
}

#[test]
fn datagram_over_the_mtu_is_fragmented_and_reassembles() {
    let mut rig = Rig::new(2);
    let vr = Blue {
        b_mtu: 576,
        ..Blue::default()
    }
    .build(&mut rig);
    let l3 = big_datagram();
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    // 1380 payload bytes in 552-byte pieces: 552 + 552 + 276.
    assert_eq!(out.len(), 3);
    let frags = fragments(&out, &l3, 576, None);
    let sizes: Vec<_> = frags.iter().map(|f| (f.offset, f.payload.len())).collect();
    assert_eq!(sizes, [(0, 552), (552, 552), (1104, 276)]);
    let mf: Vec<_> = frags.iter().map(|f| f.more).collect();
    assert_eq!(mf, [true, true, false]);
    assert_eq!(reassemble(&frags, 0), l3[20..]);
    // The first fragment starts with the UDP header as sent.
    assert_eq!(frags[0].payload[..8], l3[20..28]);
    let s = vr.stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.fragments), (1, 3, 3));
    assert_drops(&s, &[]);
    assert!(rig.recv(0).is_empty());
    assert_clean(&mut rig);
}

#[test]
fn fits_exactly_is_not_fragmented_and_one_over_is() {
    let mut rig = Rig::new(2);
    let vr = Blue {
        b_mtu: 576,
        ..Blue::default()
    }
    .build(&mut rig);
    let mut l3 = udp4(HOST_A, FAR, 64, 1, 2, &[0x11; 548]);
    clear_df(&mut l3);
    assert_eq!(l3.len(), 576);
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    assert_eq!(l2(&out[0]).l3.len(), 576);

    let mut l3 = udp4(HOST_A, FAR, 64, 1, 2, &[0x22; 549]);
    clear_df(&mut l3);
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 2);
    let frags = fragments(&out, &l3, 576, None);
    assert_eq!(frags[0].payload.len(), 552);
    assert_eq!(frags[1].payload.len(), 5);
    assert_eq!(reassemble(&frags, 0), l3[20..]);
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

#[test]
fn a_fragment_is_refragmented_keeping_its_place_and_mf() {
    let mut rig = Rig::new(2);
    let vr = Blue {
        b_mtu: 576,
        ..Blue::default()
    }
    .build(&mut rig);
    for more in [true, false] {
        // A middle (MF) or last (no MF) fragment at offset 1480 with 1000 payload bytes.
        let payload: Vec<u8> = (0..1000).map(|i| (i % 13) as u8).collect();
        let mut l3 = vec![0u8; 1020];
        ipv4::Repr {
            src_addr: HOST_A,
            dst_addr: FAR,
            protocol: Protocol::UDP,
            payload_len: 1000,
            ttl: 30,
            dscp: 10,
            ecn: 1,
            ident: 0xbeef,
            dont_frag: false,
            more_frags: more,
            frag_offset: 1480,
            options: ipv4::Options::EMPTY,
        }
        .emit(&mut ipv4::Packet::new_unchecked(&mut l3[..]));
        l3[20..].copy_from_slice(&payload);
        rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
        rig.run();
        let out = rig.recv(1);
        assert_eq!(out.len(), 2);
        let frags = fragments(&out, &l3, 576, None);
        assert_eq!(
            frags.iter().map(|f| (f.offset, f.more)).collect::<Vec<_>>(),
            [(1480, true), (1480 + 552, more)]
        );
        assert_eq!(reassemble(&frags, 1480), payload);
        for f in &out {
            let f = l2(f);
            let ip = ipv4::Packet::new_checked(&f.l3[..]).unwrap();
            assert_eq!((ip.dscp(), ip.ecn()), (10, 1));
        }
    }
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

#[test]
fn fragments_leave_a_tagged_vif_tagged() {
    let mut rig = Rig::new(2);
    let vr = Blue {
        b_mtu: 1000,
        b_vlan: Some(42),
        ..Blue::default()
    }
    .build(&mut rig);
    let l3 = big_datagram();
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 2);
    let frags = fragments(&out, &l3, 1000, Some(42));
    assert_eq!(frags[0].payload.len(), 976);
    assert_eq!(reassemble(&frags, 0), l3[20..]);
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

#[test]
fn pool_running_dry_mid_way_is_counted() {
    // Two slots: the datagram takes one, the first fragment the other, the second fails.
    let mut rig = Rig::with(2, 2, 64);
    let vr = Blue {
        b_mtu: 576,
        ..Blue::default()
    }
    .build(&mut rig);
    let l3 = big_datagram();
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    let out = rig.recv(1);
    assert_eq!(out.len(), 1);
    let frags = fragments(&out, &l3, 576, None);
    assert_eq!((frags[0].offset, frags[0].more), (0, true));
    assert_drops(&vr.stats(), &[(Drop::FragNoBuffer, 1)]);
    assert_clean(&mut rig);

    // One slot: not even one fragment.
    let mut rig = Rig::with(2, 1, 64);
    let vr = Blue {
        b_mtu: 576,
        ..Blue::default()
    }
    .build(&mut rig);
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    assert!(rig.recv(1).is_empty());
    let s = vr.stats();
    assert_eq!(s.tx_packets, 0);
    assert_drops(&s, &[(Drop::FragNoBuffer, 1)]);
    assert_clean(&mut rig);
}

#[test]
fn mtu_changed_at_run_time_applies_to_the_next_packet_and_keeps_counters() {
    let mut rig = Rig::new(2);
    let vr = Blue::default().build(&mut rig);
    let mut l3 = udp4(HOST_A, FAR, 64, 1, 2, &[0x33; 900]);
    clear_df(&mut l3);
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    assert_eq!(rig.recv(1).len(), 1, "fits the default MTU");
    let b = rig.dp.vif("blue", "b").unwrap();
    let before = b.stats();
    rig.dp.set_vif_mtu("blue", b.id, 576).unwrap();
    assert_eq!(rig.dp.vif("blue", "b").unwrap().config.mtu, 576);
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    assert_eq!(rig.recv(1).len(), 2, "fragmented at the new MTU");
    let after = rig.dp.vif("blue", "b").unwrap().stats();
    assert_eq!(
        after.tx_packets,
        before.tx_packets + 2,
        "counters carried over"
    );
    let e = rig
        .dp
        .set_vif_mtu("blue", b.id, 20)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mtu"), "{e}");
    assert!(rig.dp.set_vif_mtu("blue", 99, 1500).is_err());
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}
