//! Thread scheduling: `SCHED_FIFO` for forwarding workers and testers, and back.
//!
//! Why: a poll-mode worker sharing its core with ordinary tasks (a compiler, the host's own
//! applications) loses the core for whole CFS time slices — milliseconds, thousands of frames
//! at a few Mpps, more than a NIC ring holds — even at low load, because it sleeps when idle
//! and must be woken ahead of whatever runs there. At `SCHED_FIFO` it preempts them the moment
//! it wakes. It is safe to give a vrhost worker because it does not spin when idle: it naps
//! 200 µs after its last packet (`Worker::run`), so the core is free whenever the router is.
//! Under full load it keeps the core; the kernel's RT throttling
//! (`/proc/sys/kernel/sched_rt_runtime_us`, 95 % by default) still leaves other tasks 5 %.
//! So workers at real-time priority want a core of their own for the control plane.

use std::io;

/// The calling thread's scheduling policy and real-time priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `SCHED_OTHER` (CFS), nice unchanged.
    Ordinary,
    /// `SCHED_FIFO` at this priority (1 = lowest, 99 = highest).
    Fifo(u8),
}

/// Set the calling thread's policy (`EPERM` without `CAP_SYS_NICE` for [`Policy::Fifo`];
/// `EINVAL` for priority 0 or above 99).
pub fn set_policy(policy: Policy) -> io::Result<()> {
    let (p, prio) = match policy {
        Policy::Ordinary => (libc::SCHED_OTHER, 0),
        Policy::Fifo(n) => (libc::SCHED_FIFO, i32::from(n)),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sched_setscheduler on the calling thread (pid 0) with a pointer to a live,
    // initialised sched_param that the kernel only reads.
    if unsafe { libc::sched_setscheduler(0, p, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's policy as the kernel has it.
pub fn policy() -> io::Result<Policy> {
    // SAFETY: sched_getscheduler on the calling thread; no pointers.
    let p = unsafe { libc::sched_getscheduler(0) };
    if p < 0 {
        return Err(io::Error::last_os_error());
    }
    if p != libc::SCHED_FIFO {
        return Ok(Policy::Ordinary);
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_getparam writes one sched_param into a live local.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Policy::Fifo(
        u8::try_from(param.sched_priority).unwrap_or(0),
    ))
}

/// Set the calling thread's timer slack: how late the kernel may end its sleeps to batch
/// wake-ups (50 µs by default for ordinary threads, none for real-time ones). A worker's
/// naps (idle back-off, receive coalescing) are tens of µs, so the default would double
/// them or more.
pub fn set_timer_slack(slack: std::time::Duration) -> io::Result<()> {
    let ns = libc::c_ulong::try_from(slack.as_nanos().max(1)).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes its value by argument; no pointers.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Let the calling thread run on every CPU again (undoing a pin).
pub fn unpin() -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
    // sched_setaffinity reads it for the calling thread (0).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_back_on_a_thread_of_its_own() {
        // SAFETY: geteuid takes nothing and cannot fail.
        let is_root = unsafe { libc::geteuid() } == 0;
        std::thread::spawn(move || {
            assert_eq!(policy().unwrap(), Policy::Ordinary);
            match set_policy(Policy::Fifo(3)) {
                Ok(()) => assert_eq!(policy().unwrap(), Policy::Fifo(3)),
                // Without CAP_SYS_NICE the kernel refuses, and says so.
                Err(e) => {
                    assert!(!is_root, "root was refused SCHED_FIFO: {e}");
                    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
                }
            }
            set_policy(Policy::Ordinary).unwrap();
            assert_eq!(policy().unwrap(), Policy::Ordinary);
            let e = set_policy(Policy::Fifo(100)).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
            unpin().unwrap();
            set_timer_slack(std::time::Duration::from_micros(1)).unwrap();
            // SAFETY: prctl(PR_GET_TIMERSLACK) returns the value; no pointers.
            let got = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            assert_eq!(got, 1000);
        })
        .join()
        .unwrap();
    }
}
