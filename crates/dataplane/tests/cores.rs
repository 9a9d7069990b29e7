//! On-demand forwarding cores: workers join and leave while traffic runs, and VRs and
//! receive queues move with them without losing or reordering a packet.
//!
//! Two workers; port 0 has a receive queue per worker, and each of the two VRs gets its
//! frames on its own queue (as with NIC filters by MAC), so a queue follows its VR when the
//! VR moves; port 1 is the egress, a transmit queue per worker. The data plane starts on
//! worker 0 alone (worker 1 holds nothing); then the test switches between one and two
//! workers every few hundred microseconds while a feeder keeps both queues busy, and the
//! sink checks every frame leaves once, in order per VR.

mod common;

use std::time::{Duration, Instant};

use common::*;
use vrhost_dataplane::port::mem;
use vrhost_dataplane::scale::{ScalePolicy, Scaler};
use vrhost_dataplane::{Dataplane, RunVrs, VrConfig};

const RING: usize = 8192;

fn frame(vr: u8, seq: u32) -> Vec<u8> {
    numbered(mac(1 + 2 * vr), vr, seq)
}

#[test]
fn workers_join_and_leave_under_traffic_without_loss_or_reordering() {
    let Multi {
        pool,
        dp,
        workers,
        mut peers,
    } = Multi::new(2, &["in", "out"], 4 * RING, RING, RunVrs::default());
    for (i, name) in ["x", "y"].iter().enumerate() {
        let mut cfg = VrConfig::new(*name);
        cfg.ingress_ring = RING;
        dp.add_vr(cfg).unwrap();
        let m = 2 * i as u8;
        arm_router(&dp, name, (0, mac(1 + m)), (1, mac(2 + m)));
    }
    // Start on worker 0 alone: everything of worker 1 moves there.
    dp.set_active_workers(1).unwrap();
    let ws = dp.worker_stats();
    assert_eq!((ws[0].vrs, ws[0].rx_queues), (2, 4));
    assert_eq!((ws[1].vrs, ws[1].rx_queues, ws[1].active), (0, 0, false));

    let ingress = peers.remove(0);
    let mut egress = peers.remove(0);
    const N: u32 = 60_000;
    let mut next = [0u32; 2];
    let mut by_worker = [0u64; 2];
    // VR x's frames on queue 0, y's on queue 1.
    let ((switches, saw_two), fed) = under_traffic(&pool, workers, ingress, N, frame, |t| {
        let mut got = 0u64;
        let mut switches = 0;
        let mut saw_two = false;
        let mut last = Instant::now();
        let mut last_got = 0;
        while got < 2 * u64::from(N) {
            assert!(Instant::now() < t.deadline, "only {got} frames out");
            let mut k = 0;
            for (w, c) in egress.tx.iter_mut().enumerate() {
                while let Some(p) = c.pop() {
                    let f = pool.frame(&p);
                    let (vr, seq) = numbering(f);
                    let vr = usize::from(vr);
                    pool.free(p);
                    assert_eq!(seq, next[vr], "VR {vr}: lost, duplicated or reordered");
                    next[vr] += 1;
                    by_worker[w] += 1;
                    k += 1;
                }
            }
            got += k;
            t.took(k);
            if k == 0 {
                std::thread::yield_now();
            }
            // Switch every few hundred microseconds, once each VR has forwarded something
            // since the last switch (placement moves VRs by the load it measured).
            if last.elapsed() > Duration::from_micros(400) && got >= last_got + 512 {
                last_got = got;
                let n = if dp.active_workers() == 1 { 2 } else { 1 };
                dp.set_active_workers(n).unwrap();
                if n == 2 {
                    let ws = dp.worker_stats();
                    saw_two |= ws[1].vrs == 1 && ws[1].rx_queues >= 1;
                }
                switches += 1;
                last = Instant::now();
            }
        }
        (switches, saw_two)
    });
    assert_eq!(fed, 2 * u64::from(N));
    assert!(switches > 20, "only {switches} switches");
    assert!(saw_two, "worker 1 never got a VR and its queue");
    assert!(by_worker[1] > 0, "worker 1 never forwarded");
    for name in ["x", "y"] {
        let s = dp.vr(name).unwrap().stats();
        assert_eq!(s.nonzero_drops(), vec![], "{name}");
        assert_eq!((s.rx_packets, s.tx_packets), (u64::from(N), u64::from(N)));
    }
    assert_eq!(next, [N, N]);
}

/// The scaler adds a worker when worker 0 is saturated and gives it back when the load
/// falls (driven by hand: loads come from the workers' counters).
#[test]
fn the_scaler_follows_the_load() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = Multi::new(2, &["in", "out"], 4 * RING, RING, RunVrs::default());
    for (i, name) in ["x", "y"].iter().enumerate() {
        dp.add_vr(VrConfig::new(*name)).unwrap();
        let m = 2 * i as u8;
        arm_router(&dp, name, (0, mac(1 + m)), (1, mac(2 + m)));
    }
    dp.set_active_workers(1).unwrap();
    // Low thresholds: here the test thread builds every frame between polls, so even a
    // saturated worker spends a good part of each interval waiting for the next burst — and
    // on a loaded machine (CI runs test binaries side by side on two cores) the thread is
    // off the CPU for part of each interval too, which the load measure sees as idle time.
    // Measured: 0.07–0.10 at a load average of 4.6, below the 0.15 this test once used (it
    // failed that way under load). The test is of the mechanism (busy → a worker added, idle → given back), not of the thresholds.
    let mut sc = Scaler::new(ScalePolicy {
        high: 0.03,
        up: 2,
        low: 0.01,
        down: 2,
    });
    sc.tick(&dp);
    // Keep worker 0 busy: a full burst on both queues every poll.
    let busy = |dp: &Dataplane,
                workers: &mut Vec<vrhost_dataplane::Worker>,
                peers: &mut Vec<mem::MemPeer>| {
        let t = Instant::now();
        let frames = [frame(0, 0), frame(1, 0)];
        while t.elapsed() < Duration::from_millis(20) {
            for (vr, f) in frames.iter().enumerate() {
                for _ in 0..256 {
                    assert!(peers[0].send(&pool, vr, f));
                }
            }
            for w in workers.iter_mut() {
                w.poll();
            }
            peers[1].recv_all(&pool);
        }
        let _ = dp;
    };
    let mut grew = false;
    // (The first intervals are slower: the pool's pages are touched for the first time.)
    for _ in 0..30 {
        busy(&dp, &mut workers, &mut peers);
        if sc.tick(&dp).changed.is_some() {
            grew = true;
            break;
        }
    }
    assert!(grew, "never added a worker");
    assert_eq!(dp.active_workers(), 2);
    // Idle: the load fits on one.
    let mut shrank = false;
    for _ in 0..30 {
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(20) {
            for w in workers.iter_mut() {
                w.poll();
            }
        }
        if sc.tick(&dp).changed.is_some() {
            shrank = true;
            break;
        }
    }
    assert!(shrank, "never gave the worker back");
    assert_eq!(dp.active_workers(), 1);
    for w in workers.iter_mut() {
        w.poll();
    }
    for w in workers.iter_mut() {
        w.poll();
    }
    let ws = dp.worker_stats();
    assert_eq!((ws[1].vrs, ws[1].rx_queues), (0, 0));
}
