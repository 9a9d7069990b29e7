//! The generator's and sink's clock: CLOCK_MONOTONIC in nanoseconds, or a simulated clock a
//! test steps by hand.
//!
//! Why CLOCK_MONOTONIC and not the TSC or [`std::time::Instant`]: timestamps travel in frames
//! from the generator to the sink (other threads, perhaps a BPF program), so they must be
//! one clock's absolute readings; `Instant` hides its value, and the TSC needs a calibrated
//! rate per reader. The clock is read once per burst, never per packet (a vDSO
//! `clock_gettime` costs ~20–40 ns on a KVM guest, as much as building a frame), so its
//! cost is spread over up to 256 frames.
//!
//! Why a simulated clock: pacing tests that measure against the wall clock are flaky on a
//! shared two-core machine. With [`Clock::Sim`] a test steps time exactly and checks the
//! tokens granted against the asked rate to the packet.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// CLOCK_MONOTONIC now, in ns.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux, so
    // the call cannot fail (and if it did, `ts` stays zero: a wrong time, not UB).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A clock stepped by hand: clones share one time.
#[derive(Debug, Clone, Default)]
pub struct SimClock(Arc<AtomicU64>);

impl SimClock {
    /// A simulated clock reading `start_ns`.
    pub fn new(start_ns: u64) -> SimClock {
        SimClock(Arc::new(AtomicU64::new(start_ns)))
    }

    /// The current simulated time.
    pub fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Move time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::Relaxed);
    }

    /// Set the time (tests that step backwards get what they ask for).
    pub fn set(&self, ns: u64) {
        self.0.store(ns, Ordering::Relaxed);
    }
}

/// Where time comes from.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// CLOCK_MONOTONIC.
    #[default]
    Monotonic,
    /// A simulated clock.
    Sim(SimClock),
}

impl Clock {
    /// Now, in ns.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self {
            Clock::Monotonic => monotonic_ns(),
            Clock::Sim(s) => s.now_ns(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_moves_forward_with_sleep() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} → {b}");
    }

    #[test]
    fn sim_clones_share_time() {
        let s = SimClock::new(5);
        let c = Clock::Sim(s.clone());
        s.advance(10);
        assert_eq!(c.now_ns(), 15);
        s.set(3);
        assert_eq!(c.now_ns(), 3);
    }
}
