//! Where `p0`'s receive work runs: veth's NAPI, inline on the sending CPU or in pinned kernel
//! threads.
//!
//! Why this matters: frames from the generator reach `p0` through veth's `ndo_xdp_xmit`,
//! which queues them on `p0`'s rx ring and schedules `p0`'s NAPI *on the sending CPU*. The
//! generator flushes a batch with bottom halves disabled, so the NAPI poll runs in softirq
//! right after each batch, on the generator's CPU. Everything `p0`'s receive path does runs
//! there: for the kernel forwarder that is the whole forwarding (XDP_PASS → skb → IP
//! forward → `p1` → `b0`'s sink), for AF_XDP the XDP program and the copy into the UMEM,
//! for AF_PACKET the skb and the copy into the ring. With one generator core and one DUT core
//! that leaves the kernel forwarder on the *generator's* core and the DUT core idle (RPS is
//! off on the lab's veths), which is not the core assignment the comparison is about.
//!
//! Threaded NAPI (`/sys/class/net/p0/threaded` = 1) moves each rx queue's poll into a
//! kernel thread `napi/p0-<id>`, which [`pin`] binds to the DUT core serving that queue: then
//! all of the router's receive work runs where its forwarding runs, and the generator's core
//! only generates. The thread is a normal (SCHED_OTHER) task, so on a core it shares with a
//! busy-polling vrhost worker the scheduler splits the core between them.
//!
//! The threads are (re)created whenever `p0`'s NAPI instances are (attaching or detaching
//! an XDP program does that), so [`pin`] runs after every DUT start. Kernel threads are not
//! in any network namespace, so they are found by name: `napi/p0-<id>` with an id above
//! every NAPI id that existed before this run started (ids only grow), and exactly one per
//! queue is required — two concurrent runs could not tell theirs apart, and fail loudly.

use std::collections::BTreeMap;
use std::sync::Mutex;

use anyhow::{Context, bail};
use vrhost_lab::Netns;

/// Held from [`watermark`] to [`pin`] by a lab that pins, so that two labs of this process
/// (tests run in parallel) never make threads of the same interface name at once.
pub(crate) static PINNING: Mutex<()> = Mutex::new(());

/// NAPI ids of `napi/<ifname>-<id>` kernel threads now, with their pids.
fn napi_threads(ifname: &str) -> BTreeMap<u32, i32> {
    let prefix = format!("napi/{ifname}-");
    let mut found = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) else {
            continue;
        };
        if let Some(Ok(id)) = comm.trim().strip_prefix(&prefix).map(str::parse) {
            found.insert(id, pid);
        }
    }
    found
}

/// The highest NAPI id among the threads of `ifname` now (0 if none): threads above it are
/// made later.
pub(crate) fn watermark(ifname: &str) -> u32 {
    napi_threads(ifname).keys().max().copied().unwrap_or(0)
}

/// Turn threaded NAPI on or off for `ifname` in `ns` (`ip netns exec` mounts the namespace's
/// own sysfs, so `/sys/class/net` there is the namespace's).
pub(crate) fn set_threaded(ns: &Netns, ifname: &str, on: bool) -> anyhow::Result<()> {
    let cmd = format!("echo {} > /sys/class/net/{ifname}/threaded", u8::from(on));
    ns.exec(&["sh", "-c", &cmd])
        .with_context(|| format!("threaded NAPI on {ifname} in {}", ns.name()))?;
    Ok(())
}

/// Pin the NAPI threads of `ifname` made after `above` — one per rx queue, `queues` of them,
/// in queue order (NAPI ids are given in queue order) — to `cores[q]`. Waits a moment for
/// the threads of a NAPI that was just enabled. Returns the threads' pids, in queue order.
pub(crate) fn pin(
    ifname: &str,
    above: u32,
    queues: usize,
    cores: &[usize],
) -> anyhow::Result<Vec<i32>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let threads = loop {
        let t: Vec<(u32, i32)> = napi_threads(ifname)
            .into_iter()
            .filter(|(id, _)| *id > above)
            .collect();
        if t.len() >= queues || std::time::Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    if threads.len() != queues {
        bail!(
            "expected {queues} NAPI threads napi/{ifname}-<id> made by this run, found {:?} \
             (another run with threaded NAPI on an interface named {ifname}?)",
            threads
        );
    }
    for (q, (_, pid)) in threads.iter().enumerate() {
        let core = cores[q % cores.len()];
        // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `core` < CPU_SETSIZE (checked by the caller's core list, ≤ the host's
        // cores); CPU_SET only writes inside `set`.
        unsafe { libc::CPU_SET(core, &mut set) };
        // SAFETY: sched_setaffinity reads `set` (a valid cpu_set_t of the size passed) for
        // thread `pid`; a vanished pid is an error return, not undefined behaviour.
        let rc = unsafe { libc::sched_setaffinity(*pid, size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("pinning NAPI thread {pid} ({ifname}) to core {core}"));
        }
    }
    Ok(threads.iter().map(|(_, pid)| *pid).collect())
}

/// Make kernel thread `pid` (a NAPI thread) `SCHED_FIFO` at `priority`.
///
/// Why a NAPI thread may need it: veth's rx ring holds 256 frames, which lasts about 250 µs
/// at 1 Mpps; an ordinary thread that another task on its core keeps off the CPU for one
/// time slice (ms) loses frames at any rate, and the loss would be charged to the forwarder.
/// A real-time thread is preempted only by other real-time work — the same footing as the
/// generator's thread (`live/generator.rs`) and the in-process DUT's worker.
pub(crate) fn set_fifo(pid: i32, priority: u8) -> anyhow::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: sched_setscheduler on thread `pid` with a pointer to a live, initialised
    // sched_param that the kernel only reads; a vanished pid is an error return.
    if unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("making NAPI thread {pid} SCHED_FIFO {priority}"));
    }
    Ok(())
}

/// The scheduling policy and CPU list of thread `pid` as the kernel reports them (for the
/// run record and tests): (`SCHED_FIFO` or not with its priority, allowed CPUs).
pub(crate) fn placement(pid: i32) -> anyhow::Result<(Option<i32>, Vec<usize>)> {
    // SAFETY: sched_getscheduler on a pid; no pointers.
    let policy = unsafe { libc::sched_getscheduler(pid) };
    if policy < 0 {
        return Err(std::io::Error::last_os_error()).context("sched_getscheduler");
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_getparam writes one sched_param into a live local.
    if unsafe { libc::sched_getparam(pid, &mut param) } != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_getparam");
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into `set`.
    if unsafe { libc::sched_getaffinity(pid, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_getaffinity");
    }
    let cpus = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads inside `set` for c < CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    Ok((
        (policy == libc::SCHED_FIFO).then_some(param.sched_priority),
        cpus,
    ))
}
