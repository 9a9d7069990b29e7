//! Adaptive polling: a worker with nothing to do sleeps instead of burning its core, and
//! traffic wakes it.
//!
//! The worker runs on a thread of its own (`Worker::run`) and measures its own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`); the test leaves it idle, then sends frames and waits for
//! them to leave. A worker that spun would use about as much CPU as wall time; one that
//! naps uses a few percent. The bound is loose (a quarter) so a loaded machine cannot make
//! it fail, and tight enough that a spinning worker always does.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use vrhost_dataplane::VrConfig;

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn an_idle_worker_sleeps_and_traffic_wakes_it() {
    const IDLE: Duration = Duration::from_millis(400);
    const N: u32 = 32;
    let Rig {
        pool,
        dp,
        mut worker,
        mut peers,
    } = Rig::new(2);
    dp.add_vr(VrConfig::new("r")).unwrap();
    arm_router(&dp, "r", (0, mac(1)), (1, mac(2)));
    let stop = AtomicBool::new(false);
    let (cpu, wall, out) = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let (c0, t0) = (thread_cpu(), Instant::now());
            worker.run(&stop);
            (thread_cpu() - c0, t0.elapsed())
        });
        std::thread::sleep(IDLE);
        for seq in 0..N {
            assert!(peers[0].send(&pool, 0, &numbered(mac(1), 0, seq)));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut out = Vec::new();
        while out.len() < N as usize && Instant::now() < deadline {
            out.extend(peers[1].recv_all(&pool));
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        let (cpu, wall) = runner.join().unwrap();
        (cpu, wall, out)
    });
    assert_eq!(
        out.len(),
        N as usize,
        "the frames sent after the idle time were forwarded"
    );
    for (seq, f) in out.iter().enumerate() {
        assert_eq!(numbering(f), (0, seq as u32));
    }
    assert!(wall >= IDLE);
    assert!(
        cpu < wall / 4,
        "the worker used {cpu:?} of CPU in {wall:?}: it did not nap while idle"
    );
    assert_eq!(dp.vr("r").unwrap().stats().tx_packets, u64::from(N));
}
