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
//! A third, read alongside: **interrupts and softirqs** on the CPU (`/proc/stat`'s 6th and
//! 7th values, also 10 ms grains). They run on top of whatever thread is there, so they
//! count as its running time, not as waiting. For a thread whose own work raises none (the
//! in-process DUT, whose ports are memory) they are someone else's: a local CI run, made
//! while other tests' veth traffic ran on the same cores, lost 62 ms worth of frames at the
//! DUT with 0.024 ms of run-queue wait (that run did not read these counters; this is the
//! likely cause). For a daemon worker they are mostly its own ports' kernel work, so
//! [`OffCpu::since`] leaves them out and [`OffCpu::since_with_interrupts`] adds them.
//!
//! A benchmark reads [`OffCpu::now`] before and after a trial and [`OffCpu::since`] tells
//! how long its thread was held off: enough to say whether a ring overflow at a low load was
//! the host's, and to run such a trial again.

use std::time::Duration;

/// One reading of a thread's run-queue wait and its CPU's steal and interrupt time
/// (cumulative counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpu {
    /// Time runnable but waiting for the CPU (ns), `None` if the kernel does not say.
    pub run_delay_ns: Option<u64>,
    /// Time the hypervisor gave the CPU to another guest (ns), `None` if unknown.
    pub steal_ns: Option<u64>,
    /// Time the CPU spent in interrupts and softirqs (ns), `None` if unknown.
    pub interrupts_ns: Option<u64>,
}

/// What [`OffCpu::parts_since`] returns: each counter's growth, `None` where either reading
/// lacks it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parts {
    /// Runnable but waiting behind other tasks.
    pub run_queue: Option<Duration>,
    /// Taken by the hypervisor.
    pub steal: Option<Duration>,
    /// The CPU's interrupts and softirqs.
    pub interrupts: Option<Duration>,
}

impl OffCpu {
    /// Read the counters now, for the calling thread and CPU `cpu` (the one it is pinned
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
        let ns_per_tick = u64::try_from(hz)
            .ok()
            .filter(|h| *h > 0)
            .map(|h| 1_000_000_000 / h);
        let stat = std::fs::read_to_string("/proc/stat").ok();
        let field = |n: usize| {
            let t = cpu_field(stat.as_deref()?, cpu, n)?;
            Some(t.saturating_mul(ns_per_tick?))
        };
        OffCpu {
            run_delay_ns,
            steal_ns: field(STEAL),
            interrupts_ns: field(IRQ).zip(field(SOFTIRQ)).map(|(a, b)| a + b),
        }
    }

    /// The growth of each counter since `earlier`.
    pub fn parts_since(&self, earlier: &OffCpu) -> Parts {
        let d = |a: Option<u64>, b: Option<u64>| Some(Duration::from_nanos(a?.saturating_sub(b?)));
        Parts {
            run_queue: d(self.run_delay_ns, earlier.run_delay_ns),
            steal: d(self.steal_ns, earlier.steal_ns),
            interrupts: d(self.interrupts_ns, earlier.interrupts_ns),
        }
    }

    /// The time held off between `earlier` and this reading: run-queue wait and steal,
    /// whichever both readings have, summed. `None` if neither was readable both times.
    pub fn since(&self, earlier: &OffCpu) -> Option<Duration> {
        let p = self.parts_since(earlier);
        sum(&[p.run_queue, p.steal])
    }

    /// [`OffCpu::since`] plus the CPU's interrupts and softirqs: for a thread that raises
    /// none itself.
    pub fn since_with_interrupts(&self, earlier: &OffCpu) -> Option<Duration> {
        self.parts_since(earlier).total()
    }
}

impl Parts {
    /// All three parts, whichever are known, summed; `None` if none is.
    pub fn total(&self) -> Option<Duration> {
        sum(&[self.run_queue, self.steal, self.interrupts])
    }
}

/// The sum of the durations known, `None` if none is.
fn sum(parts: &[Option<Duration>]) -> Option<Duration> {
    parts.iter().flatten().copied().reduce(|a, b| a + b)
}

/// `/proc/stat`'s per-CPU fields (after the name): user nice system idle iowait irq softirq
/// steal …
const IRQ: usize = 6;
const SOFTIRQ: usize = 7;
const STEAL: usize = 8;

/// The calling thread's id (what [`OffCpu::of_thread`] takes).
pub fn thread_id() -> libc::pid_t {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { libc::gettid() }
}

/// `run_delay` from a schedstat line: "<on-cpu ns> <run-delay ns> <timeslices>".
fn run_delay(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

/// Field `n` (1 = user, see [`IRQ`]) of CPU `cpu`'s line in `/proc/stat`, in ticks.
fn cpu_field(stat: &str, cpu: usize, n: usize) -> Option<u64> {
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    line.split_whitespace().nth(n)?.parse().ok()
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
        assert_eq!(cpu_field(stat, 0, STEAL), Some(12_945));
        assert_eq!(cpu_field(stat, 1, STEAL), Some(12_035));
        assert_eq!(cpu_field(stat, 1, IRQ), Some(0));
        assert_eq!(cpu_field(stat, 1, SOFTIRQ), Some(188_228));
        assert_eq!(cpu_field(stat, 2, STEAL), None);
        let a = OffCpu {
            run_delay_ns: Some(10),
            steal_ns: Some(1_000),
            interrupts_ns: Some(100),
        };
        let b = OffCpu {
            run_delay_ns: Some(25),
            steal_ns: None,
            interrupts_ns: Some(140),
        };
        // Only what both readings have counts; interrupts only when asked for.
        assert_eq!(b.since(&a), Some(Duration::from_nanos(15)));
        assert_eq!(b.since_with_interrupts(&a), Some(Duration::from_nanos(55)));
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
        let outside = OffCpu::of_thread(tid, cpu)
            .parts_since(&outside_before)
            .run_queue;
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
