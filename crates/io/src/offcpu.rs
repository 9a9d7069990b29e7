//! How long the calling thread was kept off its CPU while it wanted to run.
//!
//! Why: a poll-mode thread (a worker, a tester) that is not running cannot drain its ring,
//! and what it loses meanwhile is the host's doing, not the router's. Two causes add up:
//!
//! - **other tasks on the same CPU**: even a `SCHED_FIFO` thread gives way, since Linux 6.12
//!   to the fair-class deadline server (ordinary tasks get 50 ms of every second, in one go
//!   once they have waited), before that to RT throttling. The kernel counts the time the
//!   thread sat runnable on a run queue: `run_delay`, the second field of
//!   `/proc/thread-self/schedstat`, in ns.
//! - **the hypervisor running another guest on the vCPU** (steal): invisible to the
//!   thread's own accounting, counted per CPU in `/proc/stat` (8th value, in `USER_HZ`
//!   ticks, so 10 ms grains).
//!
//! A benchmark reads [`OffCpu::now`] before and after a trial and [`OffCpu::since`] tells
//! how long its thread was held off: enough to say whether a ring overflow at a low load was
//! the host's, and to run such a trial again.

use std::time::Duration;

/// One reading of the calling thread's wait and its CPU's steal (cumulative counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpu {
    /// Time runnable but waiting for the CPU (ns), `None` if the kernel does not say.
    pub run_delay_ns: Option<u64>,
    /// Time the hypervisor gave the CPU to another guest (ns), `None` if unknown.
    pub steal_ns: Option<u64>,
}

impl OffCpu {
    /// Read both counters now, for the calling thread and CPU `cpu` (the one it is pinned
    /// to). A counter the kernel does not offer reads `None`; nothing fails.
    pub fn now(cpu: usize) -> OffCpu {
        OffCpu::read("/proc/thread-self/schedstat", cpu)
    }

    /// The same for thread `tid` of this process (from [`thread_id`]), read from any thread:
    /// a daemon watching its workers without costing them anything.
    pub fn of_thread(tid: libc::pid_t, cpu: usize) -> OffCpu {
        OffCpu::read(&format!("/proc/self/task/{tid}/schedstat"), cpu)
    }

    fn read(schedstat: &str, cpu: usize) -> OffCpu {
        let run_delay_ns = std::fs::read_to_string(schedstat)
            .ok()
            .and_then(|s| run_delay(&s));
        // SAFETY: sysconf takes a constant and returns a value; no pointers.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let steal_ns = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| steal_ticks(&s, cpu))
            .and_then(|t| {
                let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
                Some(t.saturating_mul(1_000_000_000 / hz))
            });
        OffCpu {
            run_delay_ns,
            steal_ns,
        }
    }

    /// The growth of each counter since `earlier` (`None` where either reading lacks it):
    /// (run-queue wait, steal).
    pub fn parts_since(&self, earlier: &OffCpu) -> (Option<Duration>, Option<Duration>) {
        let d = |a: Option<u64>, b: Option<u64>| Some(Duration::from_nanos(a?.saturating_sub(b?)));
        (
            d(self.run_delay_ns, earlier.run_delay_ns),
            d(self.steal_ns, earlier.steal_ns),
        )
    }

    /// The time held off between `earlier` and this reading: the growth of each counter
    /// both readings have, summed. `None` if neither counter was readable both times.
    pub fn since(&self, earlier: &OffCpu) -> Option<Duration> {
        match self.parts_since(earlier) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or_default() + b.unwrap_or_default()),
        }
    }
}

/// The calling thread's id (what [`OffCpu::of_thread`] takes).
pub fn thread_id() -> libc::pid_t {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { libc::gettid() }
}

/// `run_delay` from a schedstat line: "<on-cpu ns> <run-delay ns> <timeslices>".
fn run_delay(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

/// CPU `cpu`'s steal ticks from `/proc/stat` ("cpuN user nice system idle iowait irq
/// softirq steal …").
fn steal_ticks(stat: &str, cpu: usize) -> Option<u64> {
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn counters_are_read_from_the_kernels_text() {
        assert_eq!(run_delay("222478613 33623644 1161\n"), Some(33_623_644));
        assert_eq!(run_delay("5\n"), None);
        let stat = "cpu  4305873 64231 720037 4438746 105437 0 358855 24980 0 0\n\
                    cpu0 2102384 31836 297005 2369616 27121 0 170627 12945 0 0\n\
                    cpu1 2203488 32395 423032 2069130 78315 0 188228 12035 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(steal_ticks(stat, 0), Some(12_945));
        assert_eq!(steal_ticks(stat, 1), Some(12_035));
        assert_eq!(steal_ticks(stat, 2), None);
        let a = OffCpu {
            run_delay_ns: Some(10),
            steal_ns: Some(1_000),
        };
        let b = OffCpu {
            run_delay_ns: Some(25),
            steal_ns: None,
        };
        // Only what both readings have counts.
        assert_eq!(b.since(&a), Some(Duration::from_nanos(15)));
        assert_eq!(OffCpu::default().since(&a), None);
    }

    /// Two threads pinned to one CPU, both busy: each spends about half the time waiting
    /// for the other, and its `run_delay` says so.
    #[test]
    fn a_thread_sharing_its_cpu_counts_the_wait() {
        let cpu = 0;
        let pin = move || {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
            // sched_setaffinity reads it for the calling thread (0).
            let rc = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
            };
            assert_eq!(
                rc,
                0,
                "pinning to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        };
        let stop = Arc::new(AtomicBool::new(false));
        let hog = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let spinner = std::thread::spawn(move || {
            pin();
            tid_tx.send(thread_id()).unwrap();
            let before = OffCpu::now(cpu);
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
            OffCpu::now(cpu).since(&before)
        });
        // Watched from here as well, as the daemon watches its workers.
        let tid = tid_rx.recv().unwrap();
        let outside_before = OffCpu::of_thread(tid, cpu);
        std::thread::sleep(Duration::from_millis(250));
        let outside = OffCpu::of_thread(tid, cpu).parts_since(&outside_before).0;
        let waited = spinner.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        hog.join().unwrap();
        let waited = waited.expect("this kernel reports run_delay (/proc/thread-self/schedstat)");
        assert!(
            waited >= Duration::from_millis(50),
            "sharing a CPU with a busy thread for 300 ms, held off only {waited:?}"
        );
        let outside = outside.expect("/proc/self/task/TID/schedstat");
        assert!(
            outside >= Duration::from_millis(40),
            "read from another thread over 250 ms of sharing: {outside:?}"
        );
    }
}
