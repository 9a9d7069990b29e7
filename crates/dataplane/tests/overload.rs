//! Overload is shed where it is cheapest and charged to whoever caused it.
//!
//! * Offered load far beyond a VR's ingress ring: the excess is dropped at demux and counted
//!   `vr-ingress-full` for that VR (and in the port's `rx_dropped`); what was admitted is
//!   forwarded; nothing else is dropped, and another VR whose few frames arrive in the same
//!   bursts loses none of them (Rathore's Table 1 in miniature: one tenant's overload does not
//!   hurt another).
//! * A full tx ring (small ring, sink not drained): what does not fit is dropped, counted
//!   `tx-full` for the VR that sent it and in the port's `tx_full`; the part of a burst that
//!   fits still goes out, in order; once the sink drains, traffic flows again.

mod common;

use common::*;
use vrhost_dataplane::{Drop, VECTOR, VrConfig};
use vrhost_wire::EthernetAddress;

/// VRs "x" (VIFs mac(1) on port 0, mac(2) on port 1) and "y" (mac(3), mac(4)), both routing
/// 198.51.100.0/24 out of port 1. `x_ring` is x's ingress ring.
fn rig(pool: usize, ring: usize, x_ring: usize) -> Rig {
    let rig = Rig::with(2, pool, ring);
    for (i, name) in ["x", "y"].into_iter().enumerate() {
        let mut cfg = VrConfig::new(name);
        if name == "x" {
            cfg.ingress_ring = x_ring;
        }
        rig.dp.add_vr(cfg).unwrap();
        let m = 2 * i as u8;
        arm_router(&rig.dp, name, (0, mac(m + 1)), (1, mac(m + 2)));
    }
    rig
}

/// A frame for VR `vr` (0 = x, 1 = y) with sequence number `seq`.
fn frame(vr: u8, seq: u32) -> Vec<u8> {
    numbered(mac(2 * vr + 1), vr, seq)
}

/// (VR, sequence) of a frame that left, checking it was forwarded by that VR.
fn tag_of(f: &[u8]) -> (u8, u32) {
    let (vr, seq) = numbering(f);
    assert_eq!(EthernetAddress::from_bytes(&f[6..12]), mac(2 * vr + 2));
    assert_eq!(EthernetAddress::from_bytes(&f[..6]), NBR_MAC);
    (vr, seq)
}

#[test]
fn ingress_overload_is_shed_per_vr_and_spares_the_others() {
    const X_RING: usize = 64;
    let mut rig = rig(8192, 4096, X_RING);
    let x = rig.dp.vr("x").unwrap();
    let y = rig.dp.vr("y").unwrap();
    rig.worker.poll();
    // 3000 frames for x, and every 50th a frame for y in between: all queued before the
    // worker polls, so each burst holds far more of x's than its ring takes.
    let mut order = Vec::new();
    let (mut nx, mut ny) = (0u32, 0u32);
    for i in 0..3000 {
        if i % 50 == 0 {
            order.push((1u8, ny));
            ny += 1;
        }
        order.push((0u8, nx));
        nx += 1;
    }
    for &(vr, seq) in &order {
        rig.send(0, &frame(vr, seq));
    }
    rig.run();

    // Each poll takes one burst of VECTOR frames from the port, admits what fits in x's
    // (then empty) ring and all of y's, and forwards one vector of each: x admits
    // min(its frames in the burst, ring size) per burst.
    let mut admitted_x = Vec::new();
    for burst in order.chunks(VECTOR) {
        let xs: Vec<u32> = burst
            .iter()
            .filter(|(v, _)| *v == 0)
            .map(|(_, s)| *s)
            .collect();
        admitted_x.extend_from_slice(&xs[..xs.len().min(X_RING)]);
    }
    let refused = u64::from(nx) - admitted_x.len() as u64;
    assert!(refused > 2000, "offered load was not far beyond the ring");

    let out = rig.recv(1);
    let got_x: Vec<u32> = out
        .iter()
        .map(|f| tag_of(f))
        .filter(|t| t.0 == 0)
        .map(|t| t.1)
        .collect();
    let got_y: Vec<u32> = out
        .iter()
        .map(|f| tag_of(f))
        .filter(|t| t.0 == 1)
        .map(|t| t.1)
        .collect();
    assert_eq!(
        got_x, admitted_x,
        "x: exactly the admitted frames, in order"
    );
    assert_eq!(
        got_y,
        (0..ny).collect::<Vec<_>>(),
        "y lost frames to x's overload"
    );

    let sx = x.stats();
    assert_eq!(sx.drop(Drop::VrIngressFull), refused);
    assert_eq!(
        sx.total_drops(),
        refused,
        "x: other drops {:?}",
        sx.nonzero_drops()
    );
    assert_eq!(sx.rx_packets, admitted_x.len() as u64);
    assert_eq!(sx.tx_packets, admitted_x.len() as u64);
    let sy = y.stats();
    assert_eq!(sy.nonzero_drops(), vec![]);
    assert_eq!(
        (sy.rx_packets, sy.tx_packets),
        (u64::from(ny), u64::from(ny))
    );
    let p0 = rig.dp.port_stats(0).unwrap();
    assert_eq!(p0.rx_packets, order.len() as u64);
    assert_eq!(p0.rx_dropped, refused, "port 0 rx_dropped");
    let p1 = rig.dp.port_stats(1).unwrap();
    assert_eq!((p1.tx_packets, p1.tx_full), (out.len() as u64, 0));
    assert!(rig.dp.demux_drops().iter().all(|d| *d == 0));
    // The refusals belong to demux, under x's name.
    let demux = rig
        .dp
        .node_stats()
        .into_iter()
        .find(|n| n.node == vrhost_dataplane::Node::Demux)
        .unwrap();
    assert_eq!(demux.drops, vec![(Drop::VrIngressFull, refused)]);
    assert!(rig.recv(0).is_empty());
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn full_tx_ring_is_counted_per_vr_and_per_port() {
    // Rings of 32 frames; the sink (port 1's tx ring) is drained only when the test says.
    let mut rig = rig(4096, 32, 1024);
    let x = rig.dp.vr("x").unwrap();
    let y = rig.dp.vr("y").unwrap();
    rig.worker.poll();
    let mut seq = [0u32; 2];
    let mut offer = |rig: &mut Rig, nx: u32, ny: u32| {
        for (vr, n) in [(0u8, nx), (1, ny)] {
            for _ in 0..n {
                rig.send(0, &frame(vr, seq[usize::from(vr)]));
                seq[usize::from(vr)] += 1;
            }
        }
        rig.run();
    };
    let tx_full = |vr: &vrhost_dataplane::Vr| vr.stats().drop(Drop::TxFull);

    // 32 frames fill the ring exactly.
    offer(&mut rig, 24, 8);
    assert_eq!((tx_full(&x), tx_full(&y)), (0, 0));
    // Nothing more fits: all refused, each VR charged for its own.
    offer(&mut rig, 10, 6);
    assert_eq!((tx_full(&x), tx_full(&y)), (10, 6));
    assert_eq!(rig.dp.port_stats(1).unwrap().tx_full, 16);
    // The sink takes 4: of x's next 10, the first 4 go, the other 6 are refused.
    let mut out = Vec::new();
    for _ in 0..4 {
        let p = rig.peers[1].tx[0].pop().unwrap();
        out.push(rig.pool.frame(&p).to_vec());
        rig.pool.free(p);
    }
    offer(&mut rig, 10, 0);
    assert_eq!((tx_full(&x), tx_full(&y)), (16, 6));
    // Drained, the ring takes traffic again.
    out.extend(rig.recv(1));
    offer(&mut rig, 5, 5);
    out.extend(rig.recv(1));
    assert_eq!((tx_full(&x), tx_full(&y)), (16, 6));

    let tags: Vec<(u8, u32)> = out.iter().map(|f| tag_of(f)).collect();
    let xs: Vec<u32> = tags.iter().filter(|t| t.0 == 0).map(|t| t.1).collect();
    let ys: Vec<u32> = tags.iter().filter(|t| t.0 == 1).map(|t| t.1).collect();
    let want_x: Vec<u32> = (0..24).chain(34..38).chain(44..49).collect();
    let want_y: Vec<u32> = (0..8).chain(14..19).collect();
    assert_eq!(xs, want_x);
    assert_eq!(ys, want_y);

    let (sx, sy) = (x.stats(), y.stats());
    assert_eq!((sx.rx_packets, sx.tx_packets), (49, 33));
    assert_eq!((sy.rx_packets, sy.tx_packets), (19, 13));
    assert_eq!(sx.total_drops(), sx.drop(Drop::TxFull));
    assert_eq!(sy.total_drops(), sy.drop(Drop::TxFull));
    let p1 = rig.dp.port_stats(1).unwrap();
    assert_eq!((p1.tx_packets, p1.tx_full), (46, 22));
    let vif_tx: u64 = ["x", "y"]
        .iter()
        .flat_map(|n| rig.dp.vifs(n).unwrap())
        .map(|v| v.stats().tx_packets)
        .sum();
    assert_eq!(vif_tx, 46, "VIF tx counts only what the ring took");
    assert_eq!(rig.dp.port_stats(0).unwrap().rx_dropped, 0);
    assert_eq!(rig.in_use(), 0);
}

/// A VR fed a full burst on each of two ports every poll is not overloaded (the worker can
/// forward it all): it gets a vector per receive queue per poll, so nothing piles up in its
/// ingress ring and nothing is dropped there. With one vector per poll it would gain 256
/// packets of backlog a poll and drop at its ring after four.
#[test]
fn a_vr_fed_by_two_ports_at_once_keeps_up() {
    let mut rig = rig(8192, 1024, 1024);
    rig.worker.poll();
    let polls = 12;
    let mut sent = 0u32;
    for _ in 0..polls {
        for port in 0..2 {
            for _ in 0..VECTOR {
                // Port 1's frames go to x's "out" VIF (mac 2) and hairpin out of port 1.
                let mut f = frame(0, sent);
                if port == 1 {
                    f[..6].copy_from_slice(&mac(2).0);
                }
                rig.send(port, &f);
                sent += 1;
            }
        }
        rig.worker.poll();
        // Drain the sink so tx never fills.
        rig.recv(1);
    }
    let x = rig.dp.vr("x").unwrap().stats();
    assert_eq!(x.drop(Drop::VrIngressFull), 0);
    assert_eq!(x.total_drops(), 0);
    assert_eq!(x.rx_packets, u64::from(sent));
    assert_eq!(
        x.tx_packets,
        u64::from(sent),
        "all forwarded within the polls"
    );
    assert_eq!(rig.in_use(), 0);
    // Once each port's bursts were seen to be all x's (four in a row), both ports are read
    // at x's turns rather than before it runs (`crate::feeder`): at least six polls' worth.
    let at_pick = rig.dp.worker_stats()[0].rx_at_pick;
    assert!(at_pick >= 6 * 2 * VECTOR as u64, "{at_pick} of {sent}");
}
