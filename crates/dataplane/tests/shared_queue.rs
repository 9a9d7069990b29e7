//! Receive back-pressure on a queue that several VRs share (see `worker.rs`, "Receive
//! back-pressure"): after a full burst the queue is held back while every VR that took much
//! of it is full. A VR that can take nothing any more — removed, quarantined — must not hold
//! it back, or the other VRs on the queue are cut off for good (only polling the queue
//! again renews the list of VRs it fed).

mod common;

use common::*;
use vrhost_dataplane::{Drop, VECTOR, VrConfig, Watchdog};

/// VRs "a" (in `mac(1)`, out `mac(2)`) and "b" (in `mac(3)`, out `mac(4)`) sharing port 0's
/// one receive queue; then two full bursts for "a" alone, which one poll receives and
/// forwards, so that the queue's last burst was full and fed only "a".
fn a_fed_the_last_burst(rig: &mut Rig) {
    for (name, i) in [("a", 0u8), ("b", 1u8)] {
        rig.dp.add_vr(VrConfig::new(name)).unwrap();
        arm_router(&rig.dp, name, (0, mac(1 + 2 * i)), (1, mac(2 + 2 * i)));
    }
    rig.worker.poll();
    for seq in 0..2 * VECTOR as u32 {
        rig.send(0, &numbered(mac(1), 0, seq));
    }
    rig.worker.poll();
}

/// Ten frames for "b", ten polls: all of them forwarded, in order.
#[track_caller]
fn b_still_forwards(rig: &mut Rig) {
    for seq in 0..10 {
        rig.send(0, &numbered(mac(3), 1, seq));
    }
    for _ in 0..10 {
        rig.worker.poll();
    }
    let out: Vec<_> = rig.recv(1).iter().map(|f| numbering(f)).collect();
    let want: Vec<_> = (0..10).map(|seq| (1, seq)).collect();
    assert_eq!(
        out,
        want,
        "b's frames: {} still waiting in the port's receive ring",
        rig.peers[0].rx[0].queued(0)
    );
    let b = rig.dp.vr("b").unwrap().stats();
    assert_eq!((b.rx_packets, b.tx_packets), (10, 10));
}

#[test]
fn removing_the_vr_that_filled_the_last_burst_does_not_stall_the_queue() {
    let mut rig = Rig::new(2);
    a_fed_the_last_burst(&mut rig);
    assert_eq!(rig.recv(1).len(), 2 * VECTOR);
    rig.dp.remove_vr("a").unwrap();
    b_still_forwards(&mut rig);
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn quarantining_the_vr_that_filled_the_last_burst_does_not_stall_the_queue() {
    let mut rig = Rig::new(2);
    rig.dp
        .set_watchdog(Some(Watchdog {
            budget_cycles: 100_000,
            strikes: 1,
        }))
        .unwrap();
    rig.worker.set_cost_model(Some(Box::new(|vr, n| {
        let per_packet = if vr.name() == "a" { 10_000 } else { 100 };
        per_packet * n as u64
    })));
    a_fed_the_last_burst(&mut rig);
    let a = rig.dp.vr("a").unwrap();
    assert!(a.quarantined());
    rig.recv(1);
    // Frames for "a" on the same queue now: dropped at demux and counted, not left in the
    // NIC's ring.
    for seq in 0..5 {
        rig.send(0, &numbered(mac(1), 0, 1000 + seq));
    }
    b_still_forwards(&mut rig);
    assert_eq!(rig.peers[0].rx[0].queued(0), 0);
    // Every frame for "a" is accounted for: forwarded before the quarantine, or dropped as
    // quarantined (what waited in its ring, and the five).
    let s = a.stats();
    assert_eq!(
        s.tx_packets + s.drop(Drop::VrQuarantined),
        2 * VECTOR as u64 + 5
    );
    assert_eq!(rig.in_use(), 0);
}
