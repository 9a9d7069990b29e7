//! Netlink sync: what is configured inside a VR's namespace — by `ip`, BIRD, FRR — mirrored
//! into the VR's FIBs and neighbour table.
//!
//! One thread per VR (`vrhost-nl-<vr>`) owns two route-netlink sockets opened inside the
//! namespace ([`nl`]): it subscribes to changes, dumps links, addresses, nexthop objects
//! ([`nexthop`]), routes (main table, both families) and neighbours, makes the data plane
//! match ([`mirror::Mirror::apply_all`]),
//! then follows the changes, applying them in batches of up to [`SyncOptions::batch`]
//! messages. When the kernel reports that it dropped notifications (`ENOBUFS`: the receive
//! buffer overran), or a message cannot be decoded, the thread throws away what is queued,
//! dumps everything again and diffs — a resync, counted and logged.
//!
//! Why a plain thread with a blocking `netlink-sys` socket, not `rtnetlink` on an async
//! runtime: the daemon has no runtime (its control loop is one thread, see `vrhost`'s
//! `daemon.rs`), a VR's sync is one socket read in a loop, and a thread per VR keeps a VR whose
//! BGP session floods 100,000 routes from delaying another VR's changes. The messages are
//! still the maintained typed ones of `netlink-packet-route`; only the nexthop objects'
//! messages, which it does not know, are parsed by hand ([`nexthop`]).
//!
//! Why this never stalls forwarding: workers read the FIB and neighbour table lock-free
//! (epoch-based FIB, `arc-swap` neighbour map), so a batch of updates costs the workers
//! nothing; the punt/inject loop runs on the daemon's control thread, not here; and these
//! threads can be kept off the workers' cores ([`SyncOptions::cpus`]).

pub mod mirror;
pub mod nexthop;
pub mod nl;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{error, info, warn};
use vrhost_dataplane::{Dataplane, VifId, Vr};
use vrhost_lab::Netns;

use mirror::{LinkChange, Mirror};
use nl::{NlSocket, Recv};

/// How long the thread lets changes gather after the first one before reading them.
const COALESCE: Duration = Duration::from_millis(2);

/// How a VR's sync runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Receive buffer of the event socket, bytes (`SO_RCVBUFFORCE`). Smaller buffers overrun
    /// sooner under bursts, which costs a resync, not correctness.
    pub rcvbuf: usize,
    /// Messages taken in before the FIB is updated.
    pub batch: usize,
    /// CPUs the sync thread may run on (empty: any); the daemon passes the cores no worker
    /// uses.
    pub cpus: Vec<usize>,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            rcvbuf: 64 << 20,
            batch: 4096,
            cpus: Vec::new(),
        }
    }
}

/// Counters and state of one VR's sync, shared with the daemon.
#[derive(Debug, Default)]
pub struct SyncStats {
    /// Netlink messages read (events and dumps).
    pub messages: AtomicU64,
    /// FIB routes added, replaced or removed.
    pub route_updates: AtomicU64,
    /// Neighbour entries set or removed.
    pub neigh_updates: AtomicU64,
    /// Times the kernel dropped notifications (`ENOBUFS`).
    pub overruns: AtomicU64,
    /// Full resyncs (the first dump is not counted).
    pub resyncs: AtomicU64,
    /// Messages that could not be decoded.
    pub bad_messages: AtomicU64,
    /// Prefixes the kernel routes but the data plane cannot (no next hop on a VIF …), now.
    pub unusable_routes: AtomicU64,
    /// Main-table prefixes in the kernel (IPv4), now.
    pub kernel_routes4: AtomicU64,
    /// Main-table prefixes in the kernel (IPv6), now.
    pub kernel_routes6: AtomicU64,
    /// Nexthop objects in the kernel (`ip nexthop`: FRR's groups and their members), now.
    pub nexthop_objects: AtomicU64,
    /// How long the last full sync took, µs.
    pub last_full_sync_us: AtomicU64,
    /// The first dump has been applied.
    pub ready: AtomicBool,
    /// Problems that make the VR degraded, by key (e.g. `tap:a`), with a message.
    problems: Mutex<BTreeMap<String, String>>,
}

impl SyncStats {
    /// Report a problem (logged once per key).
    pub fn problem(&self, key: &str, msg: String) {
        let mut p = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        if p.get(key) != Some(&msg) {
            error!("{msg}");
            p.insert(key.into(), msg);
        }
    }

    /// A problem went away.
    pub fn clear(&self, key: &str) {
        let mut p = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = p.remove(key) {
            info!("resolved: {m}");
        }
    }

    /// Whether the problem `key` is current.
    pub fn has_problem(&self, key: &str) -> bool {
        let p = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        p.contains_key(key)
    }

    /// Current problems (empty: healthy).
    pub fn problems(&self) -> Vec<String> {
        let p = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        p.values().cloned().collect()
    }
}

/// Why the sync could not start.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Entering the namespace failed.
    #[error("netlink sync of {vr:?}: {source}")]
    Netns {
        /// The VR.
        vr: String,
        /// Why.
        source: vrhost_lab::NetnsError,
    },
    /// A socket could not be opened.
    #[error("netlink sync of {vr:?}: {source}")]
    Socket {
        /// The VR.
        vr: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A running sync; stopped and joined on drop.
#[derive(Debug)]
pub struct Sync {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<SyncStats>,
}

impl Sync {
    /// Start syncing namespace `ns` into `vr`, whose VIF `id` has the tap `name` for each
    /// `(name, id)` of `vifs`. Returns once the sockets are open; the first dump runs on the
    /// thread ([`SyncStats::ready`] says when it is applied).
    pub fn start(
        ns: &Netns,
        dp: Dataplane,
        vr: Arc<Vr>,
        vifs: Vec<(String, VifId)>,
        opts: SyncOptions,
    ) -> Result<Sync, SyncError> {
        let name = vr.name().to_string();
        let (ev, req) = ns
            .run(|| Ok((NlSocket::events(opts.rcvbuf)?, NlSocket::requests()?)))
            .map_err(|source| SyncError::Netns {
                vr: name.clone(),
                source,
            })?
            .map_err(|source: std::io::Error| SyncError::Socket {
                vr: name.clone(),
                source,
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(SyncStats::default());
        let mut t = Thread {
            dp,
            vr,
            mirror: Mirror::new(vifs),
            ev,
            req,
            stats: stats.clone(),
            stop: stop.clone(),
            opts,
            bad: 0,
        };
        let thread = std::thread::Builder::new()
            .name(format!("vrhost-nl-{name}"))
            .spawn(move || t.run())
            .map_err(|source| SyncError::Socket { vr: name, source })?;
        Ok(Sync {
            stop,
            thread: Some(thread),
            stats,
        })
    }

    /// Its counters and problems.
    pub fn stats(&self) -> &Arc<SyncStats> {
        &self.stats
    }
}

impl Drop for Sync {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Thread {
    dp: Dataplane,
    vr: Arc<Vr>,
    mirror: Mirror,
    ev: NlSocket,
    req: NlSocket,
    stats: Arc<SyncStats>,
    stop: Arc<AtomicBool>,
    opts: SyncOptions,
    bad: u64,
}

/// Free what FIB updates retired, here rather than on a worker. The FIB frees replaced nodes
/// through the process-wide epoch collector, and whoever pins next runs the destructors that
/// have become safe: left alone, that is the workers (they pin for every vector), so a VR
/// churning routes would make every VR's worker pay for freeing its garbage. A few pins and
/// flushes here advance the epoch and collect it on this thread instead.
fn collect_garbage() {
    for _ in 0..4 {
        vrhost_fib::pin().flush();
    }
}

/// Pin the calling thread to `cpus` (ignored if empty or refused).
fn pin(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: `c` is below CPU_SETSIZE.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    // SAFETY: pointer and size describe `set`; 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

impl Thread {
    fn run(&mut self) {
        pin(&self.opts.cpus);
        if !self.full_sync(false) {
            // The dump itself failed (namespace gone?): keep following events, if any come.
            warn!("VR {}: first netlink dump failed", self.vr.name());
        }
        self.stats.ready.store(true, Ordering::Release);
        while !self.stop.load(Ordering::Relaxed) {
            if !self.ev.wait(100) {
                continue;
            }
            // Let a burst gather: one wake-up per few milliseconds instead of one per
            // message keeps the thread's cost per change low under churn.
            std::thread::sleep(COALESCE);
            loop {
                let before = self.bad;
                let r = self
                    .ev
                    .recv_events(self.opts.batch, &mut self.bad, |e| self.mirror.event(e));
                let bad = self.bad != before;
                self.stats.bad_messages.store(self.bad, Ordering::Relaxed);
                match r {
                    Ok(Recv::Read(n)) => {
                        self.stats.messages.fetch_add(n as u64, Ordering::Relaxed);
                        if bad {
                            warn!(
                                "VR {}: undecodable netlink message; resyncing",
                                self.vr.name()
                            );
                            self.ev.discard();
                            self.full_sync(true);
                            break;
                        }
                        self.apply();
                        if n < self.opts.batch {
                            break;
                        }
                    }
                    Ok(Recv::Empty) => break,
                    Ok(Recv::Overrun) => {
                        let n = self.stats.overruns.fetch_add(1, Ordering::Relaxed) + 1;
                        warn!(
                            "VR {}: netlink receive buffer overran (ENOBUFS, {n} so far): notifications were lost; resyncing",
                            self.vr.name()
                        );
                        // What is queued is older than the dump about to be taken.
                        self.ev.discard();
                        self.full_sync(true);
                        break;
                    }
                    Err(e) => {
                        self.stats.problem(
                            "netlink",
                            format!("VR {}: netlink socket: {e}", self.vr.name()),
                        );
                        std::thread::sleep(Duration::from_millis(100));
                        break;
                    }
                }
            }
        }
    }

    /// Dump everything again and make the data plane match. Returns whether the dump worked.
    fn full_sync(&mut self, resync: bool) -> bool {
        let t0 = Instant::now();
        let mut ok = false;
        for _ in 0..5 {
            self.mirror.reset();
            let mut n = 0u64;
            let r = self.req.dump_all(&mut self.bad, |e| {
                n += 1;
                self.mirror.event(e);
            });
            self.stats.messages.fetch_add(n, Ordering::Relaxed);
            match r {
                Ok(true) => {
                    ok = true;
                    break;
                }
                Ok(false) => continue,
                Err(e) => {
                    self.stats.problem(
                        "netlink",
                        format!("VR {}: netlink dump: {e}", self.vr.name()),
                    );
                    return false;
                }
            }
        }
        if !ok {
            warn!(
                "VR {}: netlink dump kept being interrupted by changes; using the last one",
                self.vr.name()
            );
        }
        self.stats.clear("netlink");
        let a = self.mirror.apply_all(&self.vr);
        self.account(a);
        self.link_changes();
        collect_garbage();
        let us = t0.elapsed().as_micros() as u64;
        self.stats.last_full_sync_us.store(us, Ordering::Relaxed);
        if resync {
            self.stats.resyncs.fetch_add(1, Ordering::Relaxed);
            info!(
                "VR {}: resynced in {} ms ({} route and {} neighbour changes)",
                self.vr.name(),
                us / 1000,
                a.routes,
                a.neighbours
            );
        }
        ok
    }

    fn apply(&mut self) {
        let a = self.mirror.apply(&self.vr);
        self.account(a);
        self.link_changes();
        if a.routes > 0 {
            collect_garbage();
        }
    }

    fn account(&self, a: mirror::Applied) {
        let s = &self.stats;
        s.route_updates.fetch_add(a.routes, Ordering::Relaxed);
        s.neigh_updates.fetch_add(a.neighbours, Ordering::Relaxed);
        let (k4, k6) = self.mirror.kernel_routes();
        s.kernel_routes4.store(k4 as u64, Ordering::Relaxed);
        s.kernel_routes6.store(k6 as u64, Ordering::Relaxed);
        let nh = self.mirror.nexthop_objects() as u64;
        s.nexthop_objects.store(nh, Ordering::Relaxed);
        let unusable = self.mirror.unusable() as u64;
        let before = s.unusable_routes.swap(unusable, Ordering::Relaxed);
        if a.new_unusable > 0 {
            warn!(
                "VR {}: {unusable} kernel route(s) cannot be forwarded by the data plane (next hop on no VIF, or an unsupported type), e.g. {}",
                self.vr.name(),
                self.mirror.unusable_sample(3).join(", ")
            );
        } else if before > 0 && unusable == 0 {
            info!(
                "VR {}: every kernel route is forwardable again",
                self.vr.name()
            );
        }
    }

    fn link_changes(&mut self) {
        let vr = self.vr.name().to_string();
        for c in self.mirror.take_link_changes() {
            match c {
                LinkChange::TapUp { name, .. } => self.stats.clear(&format!("tap:{name}")),
                LinkChange::TapGone { name, .. } => self.stats.problem(
                    &format!("tap:{name}"),
                    format!("VR {vr}: tap {name:?} was deleted from its namespace; its VIF has no control plane"),
                ),
                LinkChange::Mtu { vif, mtu } => {
                    let r = u16::try_from(mtu)
                        .map_err(|_| format!("{mtu} too large"))
                        .and_then(|m| self.dp.set_vif_mtu(&vr, vif, m).map_err(|e| e.to_string()));
                    match r {
                        Ok(()) => self.stats.clear(&format!("mtu:{vif}")),
                        Err(e) => self.stats.problem(
                            &format!("mtu:{vif}"),
                            format!("VR {vr}: MTU {mtu} set on a tap cannot be mirrored: {e}"),
                        ),
                    }
                }
            }
        }
    }
}
