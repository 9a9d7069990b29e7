//! How long packets wait in their VR's ingress ring (`vrhost_dataplane::wait`), on the data
//! plane's test clock (`Dataplane::set_test_time`), so every wait is known exactly: a packet
//! its VR runs in the poll it came in waited under a microsecond; one received by another
//! worker waits until the VR's owner polls; one sample per vector. (Under pressure, with
//! many VRs deferred: `tests/deferral.rs`.)

mod common;

use common::*;
use std::time::Duration;

use vrhost_dataplane::wait::{N_WAIT_BUCKETS, bounds, bucket};
use vrhost_dataplane::{RunVrs, VrConfig, WaitStats};

fn waits(dp: &vrhost_dataplane::Dataplane, vr: &str) -> WaitStats {
    dp.vr(vr).unwrap().stats().ingress_wait
}

#[test]
fn a_packet_run_in_the_poll_it_came_waited_under_a_microsecond() {
    let mut r = Rig::new(2);
    r.dp.add_vr(VrConfig::new("a")).unwrap();
    arm_router(&r.dp, "a", (0, mac(1)), (1, mac(2)));
    let mut now = 1_000_000;
    for round in 0..3 {
        r.dp.set_test_time(Some(now));
        for i in 0..5 {
            r.send(0, &numbered(mac(1), 0, round * 5 + i));
        }
        r.worker.poll();
        assert_eq!(r.recv(1).len(), 5, "round {round}");
        now += 50_000;
    }
    let w = waits(&r.dp, "a");
    assert_eq!(r.dp.vr("a").unwrap().stats().vectors, 3);
    assert_eq!(w.samples(), 3, "one sample a vector: {w:?}");
    assert_eq!((w.buckets[0], w.max_ns, w.sum_ns), (3, 0, 0));
    assert_eq!(w.quantile(1.0), Some(Duration::ZERO));
}

/// VR "a" is owned by worker 1; its frames come in on the queue worker 0 polls, so they
/// wait in its ring from worker 0's poll until worker 1's.
#[test]
fn a_packet_from_another_worker_waits_until_the_owner_polls() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = Multi::new(2, &["p0", "p1"], 4096, 1024, RunVrs::default());
    let mut cfg = VrConfig::new("a");
    cfg.worker = Some(1);
    dp.add_vr(cfg).unwrap();
    arm_router(&dp, "a", (0, mac(1)), (1, mac(2)));
    let mut seq = 0;
    // (when worker 0 receives, how long until worker 1 polls)
    let rounds = [
        (1_000_000, 300_000),
        (2_000_000, 5_000_000),
        (9_000_000, 40),
    ];
    for (at, wait) in rounds {
        for _ in 0..4 {
            assert!(peers[0].send(&pool, 0, &numbered(mac(1), 0, seq)));
            seq += 1;
        }
        dp.set_test_time(Some(at));
        workers[0].poll();
        assert!(peers[1].recv_all(&pool).is_empty(), "queued for worker 1");
        dp.set_test_time(Some(at + wait));
        workers[1].poll();
        assert_eq!(peers[1].recv_all(&pool).len(), 4, "run by worker 1");
    }
    let w = waits(&dp, "a");
    assert_eq!(w.samples(), 3, "{w:?}");
    assert_eq!(w.max_ns, 5_000_000);
    assert_eq!(w.sum_ns, 5_300_040);
    // 40 ns: under a microsecond; 300 µs in [262,144, 327,680); 5 ms in [4,718,592,
    // 5,242,880).
    assert_eq!(w.buckets[0], 1);
    assert_eq!(w.buckets[bucket(300_000)], 1);
    assert_eq!(w.buckets[bucket(5_000_000)], 1);
    assert_eq!(bounds(bucket(300_000)), (262_144, 327_680));
    assert_eq!(w.quantile(0.5), Some(Duration::from_nanos(327_679)));
    assert_eq!(w.quantile(1.0), Some(Duration::from_millis(5)));
    assert_eq!(w.mean(), Some(Duration::from_nanos(5_300_040 / 3)));
    assert_eq!(w.buckets[N_WAIT_BUCKETS - 1], 0);
}
