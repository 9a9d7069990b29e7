//! Watching the workers for time the host kept them off their cores.
//!
//! Why: a poll-mode worker that is not running does not drain its receive rings, and what
//! arrives meanwhile waits or is dropped there, counted as the port's or the VR's drops with
//! nothing to say the host was the cause. Two things take a worker's core: other tasks on it
//! (even against `SCHED_FIFO`, ordinary tasks get up to 50 ms of every second since Linux
//! 6.12) and the hypervisor (steal). The daemon reads both from `/proc` once a second
//! ([`vrhost_io::offcpu`]), which costs the workers nothing; `ctl status` shows the totals
//! and the log says when a worker lost a noticeable share of a second.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vrhost_io::offcpu::OffCpu;

/// Held off at least this long in one look (about a second): worth a warning.
const WARN_AT: Duration = Duration::from_millis(20);
/// At most one warning per worker this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// One worker's thread and core, and its counters at start and at the last look.
#[derive(Debug)]
pub(crate) struct HeldOff {
    worker: usize,
    tid: libc::pid_t,
    core: usize,
    start: OffCpu,
    last: OffCpu,
    last_at: Instant,
    warned: Option<Instant>,
}

impl HeldOff {
    /// Start watching worker `worker`, thread `tid` pinned to `core`.
    pub(crate) fn new(worker: usize, tid: libc::pid_t, core: usize) -> HeldOff {
        let now = OffCpu::of_thread(tid, core);
        HeldOff {
            worker,
            tid,
            core,
            start: now,
            last: now,
            last_at: Instant::now(),
            warned: None,
        }
    }

    /// Look again; returns a warning to log when the worker was held off for [`WARN_AT`] or
    /// more since the last look (and none was given in the last [`WARN_EVERY`]).
    pub(crate) fn look(&mut self) -> Option<String> {
        let now = OffCpu::of_thread(self.tid, self.core);
        let p = now.parts_since(&self.last);
        let total = now.since(&self.last).unwrap_or_default();
        let span = self.last_at.elapsed();
        self.last = now;
        self.last_at = Instant::now();
        if total < WARN_AT || self.warned.is_some_and(|t| t.elapsed() < WARN_EVERY) {
            return None;
        }
        self.warned = Some(Instant::now());
        Some(format!(
            "worker {} was held off core {} for {} ms of the last {} ms (waiting behind other \
             tasks {} ms, taken by the hypervisor {} ms): frames arriving meanwhile waited in \
             its receive rings or were dropped there; give the workers cores of their own \
             (isolcpus, [dataplane] realtime_priority). Next warning for this worker in a \
             minute at the earliest",
            self.worker,
            self.core,
            total.as_millis(),
            span.as_millis(),
            ms(p.run_queue),
            ms(p.steal),
        ))
    }

    /// Totals since the worker started, for `ctl status`: `held_off_ms` and its two parts
    /// (`null` where the kernel does not say).
    pub(crate) fn status(&self) -> Value {
        let now = OffCpu::of_thread(self.tid, self.core);
        let p = now.parts_since(&self.start);
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        json!({
            "held_off_ms": ms(now.since(&self.start)),
            "run_queue_wait_ms": ms(p.run_queue),
            "steal_ms": ms(p.steal),
        })
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("unknown".into(), |d| d.as_millis().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A "worker" that shares its core with a busy thread is reported: a warning from the
    /// first look, none from the second (rate limit), and status totals that grow.
    #[test]
    fn a_worker_sharing_its_core_is_warned_about_once_a_minute() {
        let core = 0;
        let pin = move || {
            assert!(core_affinity::set_for_current(core_affinity::CoreId {
                id: core
            }));
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let stop = stop.clone();
                let tid_tx = tid_tx.clone();
                std::thread::spawn(move || {
                    pin();
                    if i == 0 {
                        tid_tx.send(vrhost_io::offcpu::thread_id()).unwrap();
                    }
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let mut h = HeldOff::new(0, tid_rx.recv().unwrap(), core);
        std::thread::sleep(Duration::from_millis(300));
        let first = h.look();
        std::thread::sleep(Duration::from_millis(300));
        let second = h.look();
        let st = h.status();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let w = first.expect("held off about half of 300 ms: a warning");
        assert!(w.starts_with("worker 0 was held off core 0 for "), "{w}");
        assert!(
            second.is_none(),
            "a second warning within the minute: {second:?}"
        );
        let held = st["held_off_ms"].as_f64().unwrap();
        let wait = st["run_queue_wait_ms"].as_f64().unwrap();
        assert!(held >= 100.0 && wait >= 100.0, "{st}");
    }
}
