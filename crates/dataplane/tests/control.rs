//! The control API: bad calls get errors naming what was wrong and change nothing; VIF
//! addresses become routes and go away with the VIF.

mod common;

use std::net::Ipv4Addr;

use common::*;
use vrhost_dataplane::{DemuxKey, DpError, Drop, IfAddr, VrConfig};
use vrhost_fib::{NextHop, NextHopSet};

fn addr(a: [u8; 4]) -> Ipv4Addr {
    Ipv4Addr::from(a)
}

#[test]
fn bad_calls_name_the_problem_and_change_nothing() {
    let rig = Rig::new(2);
    rig.dp.add_vr(VrConfig::new("a")).unwrap();
    rig.dp
        .add_vif(
            "a",
            vif("x", 0, mac(1), vec![IfAddr::V4(addr([10, 0, 0, 1]), 24)]),
        )
        .unwrap();

    assert_eq!(
        rig.dp.add_vr(VrConfig::new("a")).unwrap_err(),
        DpError::VrExists("a".into())
    );
    let mut w0 = VrConfig::new("b");
    w0.weight = 0;
    let e = rig.dp.add_vr(w0).unwrap_err().to_string();
    assert!(e.contains("\"b\"") && e.contains("weight"), "{e}");
    let mut w9 = VrConfig::new("b");
    w9.worker = Some(9);
    assert!(
        rig.dp
            .add_vr(w9)
            .unwrap_err()
            .to_string()
            .contains("worker")
    );

    let mut big = vif("y", 0, mac(2), vec![]);
    big.mtu = 9000;
    let e = rig.dp.add_vif("a", big).unwrap_err().to_string();
    assert!(
        e.contains("\"y\"") && e.contains("mtu") && e.contains("9000"),
        "{e}"
    );
    let e = rig
        .dp
        .add_vif("a", vif("y", 7, mac(2), vec![]))
        .unwrap_err();
    assert!(e.to_string().contains("port"), "{e}");
    let e = rig
        .dp
        .add_vif("nope", vif("y", 0, mac(2), vec![]))
        .unwrap_err();
    assert_eq!(e, DpError::NoVr("nope".into()));
    // Same MAC on the same port and VLAN: a demux clash, named.
    let e = rig
        .dp
        .add_vif("a", vif("y", 0, mac(1), vec![]))
        .unwrap_err();
    assert!(matches!(e, DpError::Demux { .. }), "{e}");
    // A VLAN-keyed VIF's MAC is taken on its VLAN, for MAC- and rule-keyed VIFs alike.
    let mut sub = vif("sub", 1, mac(5), vec![]);
    sub.vlan = Some(7);
    sub.key = DemuxKey::Vlan;
    rig.dp.add_vif("a", sub).unwrap();
    let mut clash = vif("y", 1, mac(5), vec![]);
    clash.vlan = Some(7);
    assert!(matches!(
        rig.dp.add_vif("a", clash.clone()).unwrap_err(),
        DpError::Demux { .. }
    ));
    clash.key = DemuxKey::Rule(Default::default());
    assert!(matches!(
        rig.dp.add_vif("a", clash).unwrap_err(),
        DpError::Demux { .. }
    ));
    let mut novlan = vif("y", 0, mac(2), vec![]);
    novlan.key = DemuxKey::Vlan;
    assert!(
        rig.dp
            .add_vif("a", novlan)
            .unwrap_err()
            .to_string()
            .contains("vlan")
    );
    let mut badvlan = vif("y", 0, mac(2), vec![]);
    badvlan.vlan = Some(4095);
    assert!(
        rig.dp
            .add_vif("a", badvlan)
            .unwrap_err()
            .to_string()
            .contains("4095")
    );
    let e = rig
        .dp
        .add_vif(
            "a",
            vif("y", 0, mac(2), vec![IfAddr::V4(addr([224, 0, 0, 5]), 24)]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("224.0.0.5/24"), "{e}");
    let mut mcast = vif("y", 0, mac(2), vec![]);
    mcast.mac.0[0] |= 1;
    assert!(
        rig.dp
            .add_vif("a", mcast)
            .unwrap_err()
            .to_string()
            .contains("mac")
    );
    assert!(matches!(
        rig.dp
            .add_vif("a", vif("x", 1, mac(3), vec![]))
            .unwrap_err(),
        DpError::VifExists { .. }
    ));
    assert!(matches!(
        rig.dp.remove_vif("a", "zz").unwrap_err(),
        DpError::NoVif { .. }
    ));
    assert!(matches!(
        rig.dp.remove_vr("zz").unwrap_err(),
        DpError::NoVr(_)
    ));

    // Nothing of the above changed anything.
    assert_eq!(rig.dp.vrs().len(), 1);
    assert_eq!(rig.dp.vifs("a").unwrap().len(), 2);
}

#[test]
fn vif_addresses_are_local_and_attached_routes_until_removed() {
    let mut rig = Rig::new(2);
    let vr = rig.dp.add_vr(VrConfig::new("a")).unwrap();
    rig.dp
        .add_vif(
            "a",
            vif("x", 0, mac(1), vec![IfAddr::V4(addr([10, 0, 0, 1]), 24)]),
        )
        .unwrap();
    let local = NextHopSet::one(NextHop::Local);
    assert_eq!(
        vr.fib4.get(&"10.0.0.1/32".parse().unwrap()),
        Some(local.clone())
    );
    assert_eq!(vr.fib4.get(&"10.0.0.255/32".parse().unwrap()), Some(local));
    assert_eq!(
        vr.fib4.get(&"10.0.0.0/24".parse().unwrap()),
        Some(NextHopSet::one(NextHop::Attached { ifindex: 0 }))
    );
    // A frame to the subnet broadcast is punted, like one to the address itself.
    let b = addr([10, 0, 0, 255]);
    rig.send(
        0,
        &eth(
            mac(1),
            HOST_MAC,
            None,
            0x0800,
            &udp4(addr([10, 0, 0, 2]), b, 9, 1, 2, b""),
        ),
    );
    rig.run();
    assert_eq!(vr.punt_len(), 1);
    rig.pool.free(vr.punt_recv().unwrap());

    rig.dp.remove_vif("a", "x").unwrap();
    assert!(vr.fib4.is_empty(), "{:?}", vr.fib4.routes());
    // Frames to the removed VIF's MAC no longer reach the VR.
    rig.send(
        0,
        &eth(
            mac(1),
            HOST_MAC,
            None,
            0x0800,
            &udp4(addr([10, 0, 0, 2]), b, 9, 1, 2, b""),
        ),
    );
    rig.run();
    assert_eq!(rig.dp.demux_drops()[Drop::NoVr as usize], 1);
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn removing_a_vr_frees_what_was_queued_for_it() {
    let mut rig = Rig::new(1);
    rig.dp.add_vr(VrConfig::new("a")).unwrap();
    rig.dp
        .add_vif(
            "a",
            vif("x", 0, mac(1), vec![IfAddr::V4(addr([10, 0, 0, 1]), 24)]),
        )
        .unwrap();
    let f = eth(
        mac(1),
        HOST_MAC,
        None,
        0x0800,
        &udp4(addr([10, 0, 0, 2]), addr([10, 0, 0, 1]), 9, 1, 2, b""),
    );
    for _ in 0..10 {
        rig.send(0, &f);
    }
    rig.run();
    // Ten frames punted and not read by anyone; removing the VR must give the slots back.
    assert_eq!(rig.dp.vr("a").unwrap().punt_len(), 10);
    rig.dp.remove_vr("a").unwrap();
    rig.run();
    assert!(rig.dp.vr("a").is_none());
    assert_eq!(rig.in_use(), 0);
}

/// `inject` of a packet from another pool is refused and the packet handed back (it used to
/// panic in the pool's handle check).
#[test]
fn inject_refuses_a_packet_of_another_pool() {
    let mut rig = Rig::new(2);
    rig.dp.add_vr(VrConfig::new("a")).unwrap();
    arm_router(&rig.dp, "a", (0, mac(1)), (1, mac(2)));
    let other = vrhost_dataplane::Pool::new(4);
    let p = other.alloc_frame(&[0u8; 60]).unwrap();
    let (e, p) = rig.dp.inject("a", 1, p).unwrap_err();
    assert!(
        e.to_string().contains("not from the data plane's pool"),
        "{e}"
    );
    other.free(p);
    assert_eq!(other.available(), 4);
    // The VR still injects its own pool's packets.
    let q = rig.pool.alloc_frame(&numbered(mac(9), 0, 0)).unwrap();
    rig.dp.inject("a", 1, q).unwrap();
    rig.run();
    assert_eq!(rig.recv(1).len(), 1);
    assert_eq!(rig.in_use(), 0);
}
