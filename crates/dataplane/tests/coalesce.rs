//! Receive coalescing: with it on, a worker that sees light traffic naps after each light
//! poll, so the frames gather into fuller vectors — and none is lost or reordered for it.
//!
//! One worker runs `Worker::run` on its own thread; the test thread feeds numbered frames at
//! a light, steady pace (one every few µs) and drains the egress port. Without coalescing
//! such a worker runs vectors of one or two packets; with it, each nap gathers many.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use vrhost_dataplane::{Dataplane, DataplaneConfig, Pool, VrConfig};

const RING: usize = 16384;
const FRAMES: u32 = 4000;

/// Feed [`FRAMES`] frames, one per `gap`, through a worker with `coalesce`; return the
/// packets per vector the VR ran, after checking every frame left once, in order.
fn run(coalesce: Duration, gap: Duration) -> f64 {
    let Rig {
        pool,
        dp,
        mut worker,
        mut peers,
    } = Rig::with(2, 2 * RING, RING);
    dp.set_rx_coalesce(coalesce).unwrap();
    let (mut peer0, mut peer1) = (peers.remove(0), peers.remove(0));
    let vr = dp.add_vr(VrConfig::new("v")).unwrap();
    arm_router(&dp, "v", (0, mac(1)), (1, mac(2)));

    let stop = Arc::new(AtomicBool::new(false));
    let t = std::thread::spawn({
        let stop = stop.clone();
        move || worker.run(&stop)
    });
    let mut got = Vec::new();
    let mut next = Instant::now();
    for seq in 0..FRAMES {
        while Instant::now() < next {
            std::hint::spin_loop();
        }
        next += gap;
        assert!(
            peer0.send(&pool, 0, &numbered(mac(1), 0, seq)),
            "ingress ring full"
        );
        if seq % 64 == 0 {
            got.extend(peer1.recv_all(&pool));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < FRAMES as usize && Instant::now() < deadline {
        got.extend(peer1.recv_all(&pool));
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    got.extend(peer1.recv_all(&pool));
    let seqs: Vec<u32> = got.iter().map(|f| numbering(f).1).collect();
    assert_eq!(
        seqs,
        (0..FRAMES).collect::<Vec<_>>(),
        "each frame once, in order"
    );
    let s = vr.stats();
    assert_eq!(s.tx_packets, u64::from(FRAMES));
    s.tx_packets as f64 / s.vectors.max(1) as f64
}

#[test]
fn light_traffic_runs_in_fuller_vectors_with_coalescing_and_loses_nothing() {
    // A frame every 5 µs (200 kpps); naps of 300 µs gather dozens. The nap is generous so
    // that a loaded machine's late wake-ups only make vectors bigger.
    let per_vector = run(Duration::from_micros(300), Duration::from_micros(5));
    assert!(
        per_vector >= 8.0,
        "with coalescing: {per_vector:.1} packets per vector"
    );
    // Off, the same pace is forwarded too (vectors are whatever the polls found).
    let off = run(Duration::ZERO, Duration::from_micros(5));
    assert!(off >= 1.0);
    eprintln!("packets per vector: {per_vector:.1} coalescing, {off:.1} without");
}

#[test]
fn a_coalescing_delay_over_a_millisecond_is_refused() {
    let dp = Dataplane::new(
        Pool::new(1024),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let e = dp.set_rx_coalesce(Duration::from_micros(1001)).unwrap_err();
    assert!(e.to_string().contains("above 1 ms"), "{e}");
    assert_eq!(dp.rx_coalesce(), Duration::ZERO);
    dp.set_rx_coalesce(Duration::from_micros(1000)).unwrap();
    assert_eq!(dp.rx_coalesce(), Duration::from_micros(1000));
}
