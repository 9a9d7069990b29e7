//! ECMP: a flow (5-tuple) always takes the same member of a next-hop set, and flows spread
//! over the members in proportion to their weights (hash-threshold on the flow's hash,
//! `NextHopSet::select`). A flow cache keyed by 5-tuple caches each flow on the member its
//! hash picked.

mod common;
mod util;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use common::*;
use util::*;
use vrhost_dataplane::{FlowCacheKey, IfAddr, Vr, VrConfig};
use vrhost_fib::{NextHop, NextHopSet};
use vrhost_wire::ip::Protocol;
use vrhost_wire::{EthernetAddress, ipv4, ipv6, udp};

const FLOWS: u16 = 4000;
const BATCH: u16 = 500;

/// (port, neighbour MAC) of each member.
const MEMBERS: [(usize, u8); 4] = [(1, 0x12), (1, 0x13), (2, 0x22), (2, 0x23)];

/// Send every flow once (UDP source port = 10000 + flow) and return, per flow, the port and
/// neighbour MAC it left by.
fn round(rig: &mut Rig) -> HashMap<u16, (usize, EthernetAddress)> {
    round_of(rig, FLOWS)
}

/// [`round`] for the first `flows` flows (a multiple of [`BATCH`]).
fn round_of(rig: &mut Rig, flows: u16) -> HashMap<u16, (usize, EthernetAddress)> {
    let mut seen = HashMap::new();
    for start in (0..flows).step_by(usize::from(BATCH)) {
        for f in start..start + BATCH {
            // Vary the source address a little too, as real traffic does.
            let src = Ipv4Addr::new(10, 0, 0, 2 + (f % 3) as u8);
            let l3 = udp4(src, FAR, 64, 10_000 + f, 443, b"ecmp");
            rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
        }
        rig.run();
        for port in [1, 2] {
            for frame in rig.recv(port) {
                let f = l2(&frame);
                let ip = ipv4::Packet::new_checked(&f.l3[..]).unwrap();
                let sport = udp::Packet::new_checked(ip.payload()).unwrap().src_port();
                let flow = sport - 10_000;
                assert!(
                    seen.insert(flow, (port, f.dst)).is_none(),
                    "flow {flow} twice"
                );
            }
        }
        assert!(rig.recv(0).is_empty());
    }
    seen
}

/// VR "blue": VIF a (port 0), b (port 1), c (port 2); 198.51.100.0/24 and 2001:db8:ff::/48
/// both over the four [`MEMBERS`] (two neighbours behind b, two behind c).
fn ecmp_rig() -> (Rig, Arc<Vr>) {
    ecmp_rig_with(VrConfig::new("blue"))
}

/// [`ecmp_rig`] with its VR made from `cfg` (named "blue").
fn ecmp_rig_with(cfg: VrConfig) -> (Rig, Arc<Vr>) {
    let mut rig = Rig::new(3);
    let vr = rig.dp.add_vr(cfg).unwrap();
    for (name, port) in [("a", 0u8), ("b", 1), ("c", 2)] {
        let addrs = vec![
            IfAddr::V4(Ipv4Addr::new(10, 0, port, 1), 24),
            IfAddr::V6(
                Ipv6Addr::new(0x2001, 0xdb8, u16::from(port), 0, 0, 0, 0, 1),
                64,
            ),
        ];
        let id = rig
            .dp
            .add_vif("blue", vif(name, u16::from(port), mac(1 + port), addrs))
            .unwrap();
        assert_eq!(id, u16::from(port));
    }
    let mut hops4 = Vec::new();
    let mut hops6 = Vec::new();
    for &(port, m) in &MEMBERS {
        let a4 = IpAddr::V4(Ipv4Addr::new(10, 0, port as u8, m & 0x0f));
        let a6 = IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            port as u16,
            0,
            0,
            0,
            0,
            u16::from(m & 0x0f),
        ));
        for (addr, hops) in [(a4, &mut hops4), (a6, &mut hops6)] {
            vr.neigh.set(port as u16, addr, mac(m));
            hops.push(NextHop::Via {
                addr,
                ifindex: port as u32,
            });
        }
    }
    vr.fib4
        .insert(
            "198.51.100.0/24".parse().unwrap(),
            NextHopSet::ecmp(hops4).unwrap(),
        )
        .unwrap();
    vr.fib6
        .insert(
            "2001:db8:ff::/48".parse().unwrap(),
            NextHopSet::ecmp(hops6).unwrap(),
        )
        .unwrap();
    rig.worker.poll();
    (rig, vr)
}

#[test]
fn flows_stick_to_one_member_and_spread_evenly() {
    let (mut rig, vr) = ecmp_rig();

    let first = round(&mut rig);
    let second = round(&mut rig);
    assert_eq!(first.len(), usize::from(FLOWS));
    assert_eq!(first, second, "a flow changed path");

    let mut per_member: HashMap<(usize, EthernetAddress), usize> = HashMap::new();
    for &(port, m) in first.values() {
        assert!(
            MEMBERS.contains(&(port, m.0[5])),
            "left by port {port} to {m}: not a member's"
        );
        *per_member.entry((port, m)).or_default() += 1;
    }
    assert_eq!(per_member.len(), MEMBERS.len());
    let n = usize::from(FLOWS);
    for (member, count) in &per_member {
        assert!(
            count * 100 >= n * 15 && count * 100 <= n * 35,
            "{member:?} got {count} of {n} flows"
        );
    }
    let s = vr.stats();
    assert_eq!(s.tx_packets, 2 * u64::from(FLOWS));
    assert_drops(&s, &[]);
    assert_clean(&mut rig);
}

/// The member (port, neighbour MAC) `set` picks for flow `f` of [`round`], by its hash.
fn picked(set: &NextHopSet, f: u16) -> (usize, EthernetAddress) {
    let src = Ipv4Addr::new(10, 0, 0, 2 + (f % 3) as u8);
    let l3 = udp4(src, FAR, 64, 10_000 + f, 443, b"ecmp");
    let hop = set.select(vrhost_dataplane::flow::hash_v4(&l3));
    let i = set.hops().iter().position(|h| h == hop).unwrap();
    (MEMBERS[i].0, mac(MEMBERS[i].1))
}

/// A weighted set (5, 1, 1, 1 over [`MEMBERS`]): every flow leaves by the member
/// `NextHopSet::select` gives its hash, whether the first packet resolved the set or the
/// adjacency cache answered (the second round), so the first member carries about 5/8 of
/// the flows and the others about 1/8 each. Then equal weights again: every flow follows
/// the new cut, and those in the regions the two cuts share keep their path.
#[test]
fn weighted_members_carry_flows_in_proportion() {
    let (mut rig, vr) = ecmp_rig();
    let prefix = "198.51.100.0/24".parse().unwrap();
    let equal = vr.fib4.get(&prefix).unwrap();
    let weighted = NextHopSet::weighted(equal.hops().iter().copied().zip([5, 1, 1, 1])).unwrap();
    vr.fib4.insert(prefix, weighted.clone()).unwrap();
    rig.worker.poll();
    let first = round(&mut rig);
    assert_eq!(first, round(&mut rig), "a flow changed path");
    let mut per_member = [0usize; 4];
    for (&f, &way) in &first {
        assert_eq!(way, picked(&weighted, f), "flow {f}");
        let i = MEMBERS.iter().position(|m| (m.0, mac(m.1)) == way).unwrap();
        per_member[i] += 1;
    }
    let n = usize::from(FLOWS);
    assert!(
        (n * 55..=n * 70).contains(&(per_member[0] * 100)),
        "{per_member:?}"
    );
    for c in &per_member[1..] {
        assert!((n * 8..=n * 17).contains(&(c * 100)), "{per_member:?}");
    }
    // Back to equal weights: a new set, and the same flows follow the new cut.
    vr.fib4.insert(prefix, equal.clone()).unwrap();
    rig.worker.poll();
    let back = round(&mut rig);
    for (&f, &way) in &back {
        assert_eq!(way, picked(&equal, f), "flow {f}");
    }
    // The regions that overlap keep their flows: member 0's first quarter and member 3's
    // last eighth, 3/8 of the flows.
    let kept = back.iter().filter(|(f, w)| first[f] == **w).count();
    assert!(
        (n * 34..=n * 41).contains(&(kept * 100)),
        "{kept} of {n} flows kept their path"
    );
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

/// A resilient set (64 buckets over the four members): every flow leaves by its bucket's
/// member, on the first packet and from the adjacency cache. Member 3's buckets handed to
/// the others: exactly the flows it carried move, every other flow keeps its path.
#[test]
fn a_resilient_set_moves_only_a_removed_members_flows() {
    let (mut rig, vr) = ecmp_rig();
    let prefix = "198.51.100.0/24".parse().unwrap();
    let hops: Vec<(NextHop, u16)> = vr.fib4.get(&prefix).unwrap().members().collect();
    // Scattered, 16 buckets each.
    let table: Vec<u8> = (0..64u8).map(|b| (b * 5 + b / 16) % 4).collect();
    let set = NextHopSet::resilient(hops.clone(), table.clone()).unwrap();
    vr.fib4.insert(prefix, set.clone()).unwrap();
    rig.worker.poll();
    let first = round(&mut rig);
    assert_eq!(first, round(&mut rig), "a flow changed path");
    for (&f, &w) in &first {
        assert_eq!(w, picked(&set, f), "flow {f}");
    }
    // Member 3 out: its buckets go to 0, 1, 2 in turn; the set keeps its other buckets.
    let mut turn = 0u8;
    let fewer: Vec<u8> = table
        .iter()
        .map(|&m| {
            if m == 3 {
                turn += 1;
                (turn - 1) % 3
            } else {
                m
            }
        })
        .collect();
    let set3 = NextHopSet::resilient(hops[..3].to_vec(), fewer).unwrap();
    vr.fib4.insert(prefix, set3.clone()).unwrap();
    rig.worker.poll();
    let after = round(&mut rig);
    let gone = (MEMBERS[3].0, mac(MEMBERS[3].1));
    let (mut moved, mut carried) = (0, 0);
    for (&f, &w) in &after {
        assert_eq!(w, picked(&set3, f), "flow {f}");
        if first[&f] == gone {
            carried += 1;
            moved += usize::from(w != gone);
        } else {
            assert_eq!(w, first[&f], "flow {f} moved but its member stayed");
        }
    }
    assert_eq!(moved, carried);
    assert!(carried * 100 >= usize::from(FLOWS) * 15, "{carried}");
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

/// The member a frame left by: (port, neighbour MAC), checked to be one of [`MEMBERS`].
#[track_caller]
fn member(port: usize, frame: &[u8]) -> (usize, EthernetAddress) {
    let dst = l2(frame).dst;
    assert!(MEMBERS.contains(&(port, dst.0[5])), "port {port} to {dst}");
    (port, dst)
}

/// Send `frames` (the fragments of one datagram) and return the member each left by.
fn send_all(rig: &mut Rig, frames: &[Vec<u8>]) -> Vec<(usize, EthernetAddress)> {
    for f in frames {
        rig.send(0, f);
    }
    rig.run();
    let mut out = Vec::new();
    for port in [1, 2] {
        for frame in rig.recv(port) {
            out.push(member(port, &frame));
        }
    }
    assert_eq!(out.len(), frames.len());
    out
}

/// An IPv6 fragment: fixed header, Fragment header (offset in 8-byte units), then `data`.
fn frag6(src: Ipv6Addr, dst: Ipv6Addr, offset: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 48 + data.len()];
    ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: Protocol::IPV6_FRAG,
        payload_len: 8 + data.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(&mut b[..40]));
    ipv6::FragmentRepr {
        next_header: Protocol::UDP,
        frag_offset: offset,
        more_fragments: more,
        ident: 0x0bad_cafe,
    }
    .emit(&mut ipv6::FragmentHeader::new_unchecked(&mut b[40..48]));
    b[48..].copy_from_slice(data);
    b
}

#[test]
fn all_fragments_of_a_datagram_take_the_same_member() {
    for key in [FlowCacheKey::Destination, FlowCacheKey::FiveTuple] {
        let mut cfg = VrConfig::new("blue");
        cfg.flow_cache_key = key;
        fragments_take_one_member(ecmp_rig_with(cfg));
    }
}

fn fragments_take_one_member((mut rig, vr): (Rig, Arc<Vr>)) {
    let mut used = HashMap::new();
    for i in 0..200u16 {
        let sport = 20_000 + i;
        // Different sources so that datagrams spread (fragments hash on addresses only).
        let src = Ipv4Addr::new(10, 9, (i >> 8) as u8, i as u8);
        // IPv4: the first fragment carries the UDP header, the last one only data.
        let mut first = udp4(src, FAR, 64, sport, 443, &[1; 32]);
        set_frag(&mut first, 0, true);
        let mut last = udp4(src, FAR, 64, 7, 9, &[2; 32]);
        set_frag(&mut last, 40, false);
        let frames = [first, last].map(|l3| eth(mac(1), HOST_MAC, None, 0x0800, &l3));
        let m = send_all(&mut rig, &frames);
        assert_eq!(m[0], m[1], "IPv4 datagram {i} split over members");
        *used.entry(m[0]).or_insert(0) += 1;

        // IPv6: the same with a Fragment header.
        let src6 = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, i + 1);
        let dst6: Ipv6Addr = "2001:db8:ff::9".parse().unwrap();
        let mut udp_hdr = [0u8; 40];
        udp_hdr[..2].copy_from_slice(&sport.to_be_bytes());
        udp_hdr[2..4].copy_from_slice(&443u16.to_be_bytes());
        let frames = [
            frag6(src6, dst6, 0, true, &udp_hdr),
            frag6(src6, dst6, 5, false, &[3; 24]),
        ]
        .map(|l3| eth(mac(1), HOST_MAC, None, 0x86dd, &l3));
        let m = send_all(&mut rig, &frames);
        assert_eq!(m[0], m[1], "IPv6 datagram {i} split over members");
    }
    // Datagrams still spread over the set.
    assert_eq!(used.len(), MEMBERS.len());
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

/// A VR whose flow cache is keyed by 5-tuple, with `entries` entries.
fn by_tuple(entries: usize) -> VrConfig {
    let mut cfg = VrConfig::new("blue");
    cfg.flow_cache_key = FlowCacheKey::FiveTuple;
    cfg.flow_cache = entries;
    cfg
}

#[test]
fn keyed_by_5_tuple_a_flow_over_ecmp_is_cached_on_the_member_its_hash_picked() {
    // 1,000 flows in 4,096 entries, three rounds: 3,000 probes, less than the cache's
    // 4,096-probe window, so its low-hit bypass cannot start.
    const N: u16 = 1000;
    let (mut plain, plain_vr) = ecmp_rig();
    let want = round_of(&mut plain, N);
    // Keyed by destination, ECMP destinations are never cached: every packet is hashed.
    assert_eq!(plain_vr.stats().flow_hits, 0);

    let (mut rig, vr) = ecmp_rig_with(by_tuple(4096));
    for r in 0..3 {
        assert_eq!(
            round_of(&mut rig, N),
            want,
            "round {r}: not the hash's member"
        );
    }
    let s = vr.stats();
    let n = u64::from(N);
    assert_eq!(s.flow_hits + s.flow_misses, 3 * n);
    // The first round misses; set conflicts may push a few flows out.
    assert!(s.flow_hits >= 2 * n * 98 / 100, "{} hits", s.flow_hits);
    assert_eq!(s.tx_packets, 3 * n);

    // The route changes to one member: no flow may keep its cached one.
    let only = NextHop::Via {
        addr: IpAddr::V4(Ipv4Addr::new(10, 0, 2, 3)),
        ifindex: 2,
    };
    vr.fib4
        .insert("198.51.100.0/24".parse().unwrap(), only)
        .unwrap();
    let after = round_of(&mut rig, N);
    assert_eq!(after.len(), usize::from(N));
    assert!(after.values().all(|&(port, m)| (port, m.0[5]) == (2, 0x23)));
    assert_eq!(vr.stats().flow_misses, s.flow_misses + n);
    assert_drops(&vr.stats(), &[]);
    assert_clean(&mut rig);
}

#[test]
fn keyed_by_5_tuple_ipv6_flows_over_ecmp_hit_and_keep_their_member() {
    let (mut plain, _) = ecmp_rig();
    let (mut rig, vr) = ecmp_rig_with(by_tuple(4096));
    let dst: Ipv6Addr = "2001:db8:ff::9".parse().unwrap();
    let send = |rig: &mut Rig| {
        for f in 0..400u16 {
            let src = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1 + f % 3);
            let l3 = udp6(src, dst, 64, 10_000 + f, 443, b"ecmp6");
            rig.send(0, &eth(mac(1), HOST_MAC, None, 0x86dd, &l3));
            if f % 200 == 199 {
                rig.run();
            }
        }
        let mut seen = HashMap::new();
        for port in [1, 2] {
            for frame in rig.recv(port) {
                let f = l2(&frame);
                let ip = ipv6::Packet::new_checked(&f.l3[..]).unwrap();
                let sport = udp::Packet::new_checked(ip.payload()).unwrap().src_port();
                assert!(seen.insert(sport, member(port, &frame)).is_none());
            }
        }
        assert_eq!(seen.len(), 400);
        seen
    };
    let want = send(&mut plain);
    assert_eq!(send(&mut rig), want);
    assert_eq!(send(&mut rig), want);
    let s = vr.stats();
    assert_eq!(s.flow_misses + s.flow_hits, 800);
    assert!(s.flow_hits >= 392, "{} hits", s.flow_hits);
    // Members spread: the cache did not pin the destination to one.
    let used: std::collections::HashSet<_> = want.values().collect();
    assert_eq!(used.len(), MEMBERS.len());
    assert_clean(&mut rig);
}
