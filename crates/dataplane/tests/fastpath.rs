//! The fast-path contract (`vrhost_dataplane::fastpath`): what the forwarding node offers,
//! what it never offers, and the generations workers publish — checked with a recording
//! fast path behind mem ports.

mod common;

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use common::*;
use vrhost_dataplane::fastpath::{FastFlow, FastPath, retired};
use vrhost_dataplane::{DemuxKey, IfAddr, VifConfig, VrConfig, VrId};
use vrhost_fib::{NextHop, NextHopSet};

#[derive(Default)]
struct Recorder {
    offers: Mutex<Vec<FastFlow>>,
    published: Mutex<Vec<(VrId, u64)>>,
}

impl FastPath for Recorder {
    fn offer(&self, flow: &FastFlow) {
        self.offers.lock().unwrap().push(*flow);
    }
    fn publish(&self, vr: VrId, generation: u64) {
        self.published.lock().unwrap().push((vr, generation));
    }
    fn counts(&self, vr: VrId) -> (u64, u64) {
        (u64::from(vr) + 7, 64)
    }
}

impl Recorder {
    fn take_offers(&self) -> Vec<FastFlow> {
        std::mem::take(&mut self.offers.lock().unwrap())
    }
    fn last_published(&self, vr: VrId) -> Option<u64> {
        let p = self.published.lock().unwrap();
        p.iter().rev().find(|(v, _)| *v == vr).map(|(_, g)| *g)
    }
}

const FAR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 9);

/// Move the data plane's clock on past the workers' scan interval, so the next poll
/// publishes generations.
fn later(rig: &Rig) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NOW: AtomicU64 = AtomicU64::new(1_000_000_000);
    rig.dp
        .set_test_time(Some(NOW.fetch_add(1_000_000, Ordering::Relaxed)));
}

fn rig() -> (Rig, Arc<Recorder>) {
    let rig = Rig::new(2);
    later(&rig);
    let rec = Arc::new(Recorder::default());
    rig.dp.set_fast_path(rec.clone()).unwrap();
    rig.dp.add_vr(VrConfig::new("blue")).unwrap();
    arm_router(&rig.dp, "blue", (0, mac(1)), (1, mac(2)));
    (rig, rec)
}

fn send_far(rig: &mut Rig, ttl: u8, len: usize) {
    let l3 = udp4(
        Ipv4Addr::new(10, 0, 0, 2),
        FAR,
        ttl,
        1000,
        2000,
        &vec![0; len],
    );
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
}

#[test]
fn a_plain_forward_is_offered_with_its_rewrite() {
    let (mut rig, rec) = rig();
    send_far(&mut rig, 64, 18);
    assert_eq!(
        rig.recv(1).len(),
        1,
        "the packet itself is forwarded as usual"
    );
    let vr = rig.dp.vr("blue").unwrap();
    let gen_now = rec
        .last_published(vr.id)
        .expect("the owner publishes the generation");
    let offers = rec.take_offers();
    assert_eq!(
        offers,
        vec![FastFlow {
            vr: vr.id,
            generation: gen_now,
            in_port: 0,
            in_mac: mac(1).0,
            dst: FAR.into(),
            out_port: 1,
            dst_mac: NBR_MAC.0,
            src_mac: mac(2).0,
            mtu: 1500,
        }]
    );
    assert_eq!(
        rig.dp.fast_counts("blue").unwrap(),
        (u64::from(vr.id) + 7, 64)
    );
}

#[test]
fn exceptions_are_not_offered() {
    let (mut rig, rec) = rig();
    // TTL 1: ICMP time exceeded, not forwarded.
    send_far(&mut rig, 1, 18);
    // Over the MTU: fragmented (DF is set by `udp4`, so refused with ICMP).
    send_far(&mut rig, 64, 1600);
    // To the router itself: punted.
    let l3 = udp4(
        Ipv4Addr::new(10, 0, 0, 2),
        Ipv4Addr::new(10, 0, 0, 1),
        64,
        1,
        2,
        b"x",
    );
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    assert!(rig.recv(1).is_empty());
    assert!(rec.take_offers().is_empty());
}

#[test]
fn ecmp_vlan_and_policed_decisions_are_not_offered() {
    let (mut rig, rec) = rig();
    let vr = rig.dp.vr("blue").unwrap();
    // ECMP: 203.0.113.0/24 over two neighbours.
    let nb2 = Ipv4Addr::new(10, 0, 1, 3);
    vr.neigh.set(1, nb2.into(), mac(0x33));
    let set = NextHopSet::ecmp(vec![
        NextHop::Via {
            addr: NH.into(),
            ifindex: 1,
        },
        NextHop::Via {
            addr: nb2.into(),
            ifindex: 1,
        },
    ])
    .unwrap();
    vr.fib4
        .insert("203.0.113.0/24".parse().unwrap(), set)
        .unwrap();
    let l3 = udp4(
        Ipv4Addr::new(10, 0, 0, 2),
        Ipv4Addr::new(203, 0, 113, 5),
        64,
        1,
        2,
        b"x",
    );
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x0800, &l3));
    rig.run();
    assert_eq!(rig.recv(1).len(), 1);
    assert!(rec.take_offers().is_empty(), "ECMP decisions are per flow");

    // A VLAN VIF in: not offered.
    rig.dp
        .add_vif(
            "blue",
            VifConfig {
                vlan: Some(7),
                key: DemuxKey::Mac,
                ..vif(
                    "tagged",
                    0,
                    mac(9),
                    vec![IfAddr::V4(Ipv4Addr::new(10, 0, 7, 1), 24)],
                )
            },
        )
        .unwrap();
    let l3 = udp4(Ipv4Addr::new(10, 0, 7, 2), FAR, 64, 1, 2, b"x");
    rig.send(0, &eth(mac(9), HOST_MAC, Some(7), 0x0800, &l3));
    rig.run();
    assert_eq!(rig.recv(1).len(), 1);
    assert!(
        rec.take_offers().is_empty(),
        "tagged VIFs stay on the full path"
    );

    // A policed VR: not offered.
    rig.dp.set_policer("blue", Some(1_000_000), None).unwrap();
    send_far(&mut rig, 64, 18);
    assert_eq!(rig.recv(1).len(), 1);
    assert!(rec.take_offers().is_empty(), "policing needs every packet");
    rig.dp.set_policer("blue", None, None).unwrap();
    send_far(&mut rig, 64, 18);
    assert_eq!(rec.take_offers().len(), 1);
}

#[test]
fn every_change_publishes_a_larger_generation_and_removal_retires_them() {
    let (mut rig, rec) = rig();
    let vr = rig.dp.vr("blue").unwrap();
    let id = vr.id;
    let mut gens = Vec::new();
    let mut step = |rig: &mut Rig| {
        later(rig);
        rig.worker.poll();
        gens.push(rec.last_published(id).unwrap());
    };
    step(&mut rig);
    vr.fib4
        .insert(
            "192.0.2.0/24".parse().unwrap(),
            NextHop::Via {
                addr: NH.into(),
                ifindex: 1,
            },
        )
        .unwrap();
    step(&mut rig);
    vr.fib6
        .insert(
            "2001:db8:ff::/48".parse().unwrap(),
            NextHop::Via {
                addr: "2001:db8:1::2"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .into(),
                ifindex: 1,
            },
        )
        .unwrap();
    step(&mut rig);
    vr.neigh.set(1, NH.into(), mac(0x44));
    step(&mut rig);
    rig.dp.set_vif_mtu("blue", 1, 1400).unwrap();
    step(&mut rig);
    rig.dp.set_policer("blue", Some(10), None).unwrap();
    step(&mut rig);
    assert!(
        gens.windows(2).all(|w| w[0] < w[1]),
        "each change raises the generation: {gens:?}"
    );
    // A decision offered now carries the newest one, and the new MTU.
    rig.dp.set_policer("blue", None, None).unwrap();
    later(&rig);
    send_far(&mut rig, 64, 18);
    let offers = rec.take_offers();
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].mtu, 1400);
    assert_eq!(offers[0].dst_mac, mac(0x44).0);
    assert_eq!(Some(offers[0].generation), rec.last_published(id));
    let last = offers[0].generation;

    rig.dp.remove_vr("blue").unwrap();
    let r = rec.last_published(id).unwrap();
    assert!(r > last, "removal retires every generation of the VR");
    // A new VR with the same id starts above the retired one.
    rig.dp.add_vr(VrConfig::new("green")).unwrap();
    let green = rig.dp.vr("green").unwrap();
    assert_eq!(green.id, id, "the id is reused");
    later(&rig);
    rig.worker.poll();
    assert!(rec.last_published(id).unwrap() > r);
    assert_eq!(retired(0), (1 << 40) - 1);
}

#[test]
fn an_ipv6_forward_is_offered_too() {
    let (mut rig, rec) = rig();
    let vr = rig.dp.vr("blue").unwrap();
    let nh6: std::net::Ipv6Addr = "2001:db8:1::2".parse().unwrap();
    vr.fib6
        .insert(
            "2001:db8:ff::/48".parse().unwrap(),
            NextHop::Via {
                addr: nh6.into(),
                ifindex: 1,
            },
        )
        .unwrap();
    vr.neigh.set(1, nh6.into(), mac(0x66));
    let dst: std::net::Ipv6Addr = "2001:db8:ff::9".parse().unwrap();
    let l3 = udp6("2001:db8::2".parse().unwrap(), dst, 64, 1, 2, b"six");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x86dd, &l3));
    rig.run();
    assert_eq!(rig.recv(1).len(), 1);
    let offers = rec.take_offers();
    assert_eq!(offers.len(), 1, "{offers:?}");
    assert_eq!(offers[0].dst, std::net::IpAddr::V6(dst));
    assert_eq!(offers[0].dst_mac, mac(0x66).0);
    assert_eq!((offers[0].in_port, offers[0].out_port), (0, 1));
    // A link-local source is refused by the full path: nothing offered.
    let l3 = udp6("fe80::2".parse().unwrap(), dst, 64, 1, 2, b"ll");
    rig.send(0, &eth(mac(1), HOST_MAC, None, 0x86dd, &l3));
    rig.run();
    assert!(rec.take_offers().is_empty());
}
