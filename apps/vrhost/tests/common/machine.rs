//! The machine as a lock among the tests of one file.
//!
//! The test harness runs a file's tests in parallel threads. A test whose daemon runs its
//! workers `SCHED_FIFO` on every core (as `[dataplane] realtime_priority` does) and keeps
//! them busy with TCP starves everything else on the host: the kernel leaves ordinary tasks
//! only about 50 ms of each second then. Another test's daemon worker, its pings and the
//! softirqs that carry them wait up to a second, and `ping -W 1` counts a late reply as lost.
//! (Found 2026-11-29: five of 27 runs of the whole `e2e` file lost a ping in the reload
//! test, none of 42 runs of the reload test alone; with this lock, none of 27 runs of the
//! whole file.)
//!
//! So such a test takes the machine [`alone`]; every other test takes a [`share`]. Hold the
//! guard for the whole test, declared before the lab and daemon so it is dropped after them.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::new(());

/// A share of the machine: runs beside other sharers, never beside a test that has it alone.
pub fn share() -> RwLockReadGuard<'static, ()> {
    // A failed test poisons the lock; the machine is still there for the others.
    MACHINE.read().unwrap_or_else(PoisonError::into_inner)
}

/// The whole machine, for a test that runs real-time workers.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}
