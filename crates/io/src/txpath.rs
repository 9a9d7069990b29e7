//! A port queue's transmit path: the socket's own (AF_XDP tx ring, AF_PACKET `sendmmsg`) or
//! the device's XDP transmit ([`crate::xdptx`]), chosen per queue and re-checked while it
//! runs.
//!
//! Why re-check: whether a device takes XDP-transmitted frames can change under a running
//! router — a veth takes them only while its peer has an XDP program or GRO on, and frames
//! sent when it does not are dropped with no counter. So the queue listens for the kernel's
//! device-change notifications ([`netdev::Watch`], read without blocking every 16th flush)
//! and asks the device again when one comes, and in any case about once a second
//! ([`RECHECK`]); it moves to the socket's path when the device stops advertising XDP
//! transmit (and back when it does again), counting the switches and showing the path in
//! use ([`TxPathState`]), for `vrhost ctl status`. What was sent between the change and
//! the queue seeing it (a notification's delivery, at most 16 flushes) is lost.
//!
//! **Small flushes go by the socket.** One XDP-transmit run has a fixed cost of about 8 µs
//! (`docs/perf.md`; what the kernel sets up and tears down per `BPF_PROG_RUN`, a page pool
//! and its fresh pages among it) and then about 0.55 µs a frame; the socket's path is one
//! system call and then 1.6 µs a frame (`sendmmsg`, per CPU-second in the transmit bench).
//! The threshold [`XDP_MIN_FRAMES`] is an estimate from those figures, not a measured
//! crossover: below it a flush goes through the socket, so the
//! queue holds a poll's frames (in their pool slots) until the flush and sends a light
//! poll's few by the socket, a loaded poll's many by XDP. Both are synchronous on the
//! devices XDP transmit is chosen for (copy-mode AF_XDP, AF_PACKET), so frames leave in
//! order.
//!
//! Ordering at a switch: XDP transmit holds nothing once `flush` returns, and the socket's
//! queue is flushed before the XDP path takes over, so frames leave in order except for
//! frames a socket's ring still held at that moment (a device in copy mode sends them
//! inside the flush).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vrhost_dataplane::counters::Counter;
use vrhost_dataplane::port::{Fence, TxQueue};
use vrhost_dataplane::{PktVec, Pool, VECTOR};

use crate::netdev;
use crate::xdptx::{self, XdpTx, XdpTxCounters, XdpTxError};

/// How often a queue asks the device whether XDP transmit still works.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Fewest frames a flush sends by XDP transmit (see the module doc).
pub const XDP_MIN_FRAMES: usize = 32;

/// Which transmit path a port's queues use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxChoice {
    /// XDP transmit where the device takes it, else the socket's (checked again while
    /// running).
    #[default]
    Auto,
    /// Always the socket's own transmit.
    Socket,
    /// XDP transmit; opening fails if the device does not take it (and a queue still moves
    /// to the socket's path if the device stops taking it later).
    Xdp,
}

/// What a queue's path is doing, shared with whoever reports it.
#[derive(Debug, Default)]
pub struct TxPathState {
    /// Whether frames go by XDP transmit now.
    pub xdp: AtomicBool,
    /// Times the queue moved between paths.
    pub switches: Counter,
    /// XDP transmit's counters (zero while it was never used).
    pub xdp_counters: Arc<XdpTxCounters>,
}

/// What [`TxPath::wrap`] gives: the queue to use and, unless it is the socket's own, the
/// path's shared state.
pub type Wrapped = (Box<dyn TxQueue>, Option<Arc<TxPathState>>);

/// A transmit queue that uses XDP transmit while the device takes it (see the module doc).
pub struct TxPath {
    socket: Box<dyn TxQueue>,
    xdp: XdpTx,
    /// This poll's frames, not yet handed to either path (empty after every flush, which
    /// the worker makes at the end of every poll that transmitted).
    held: PktVec,
    /// Flushes so far (for [`Flushed`] fences).
    flushes: Arc<AtomicU64>,
    state: Arc<TxPathState>,
    ifindex: u32,
    using_xdp: bool,
    /// Device-change notifications (none if the kernel would not give them: then the
    /// periodic check alone).
    watch: Option<netdev::Watch>,
    next_check: Instant,
    polls: u32,
}

impl core::fmt::Debug for TxPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TxPath")
            .field("ifname", &self.xdp.ifname())
            .field("xdp", &self.using_xdp)
            .finish_non_exhaustive()
    }
}

impl TxPath {
    /// The queue for `socket` (a queue of interface `ifname`, in the calling thread's
    /// namespace) with `choice`. `Socket` gives `socket` back unchanged; `Auto` does too
    /// when XDP transmit cannot be set up at all (the error says why); `Xdp` fails then.
    pub fn wrap(
        ifname: &str,
        socket: Box<dyn TxQueue>,
        choice: TxChoice,
    ) -> Result<Wrapped, (Box<dyn TxQueue>, XdpTxError)> {
        if choice == TxChoice::Socket {
            return Ok((socket, None));
        }
        // Under `auto` a device that does not take XDP transmit now gets the queue all the
        // same, on the socket's path: it may take it later.
        let xdp = match XdpTx::open_unchecked(ifname) {
            Ok(x) => x,
            Err(e) => return Err((socket, e)),
        };
        let ifindex = xdp.ifindex();
        let (using_xdp, features) = match xdptx::usable(ifindex) {
            Ok(u) => u,
            Err(source) => {
                let what = "xdp-features";
                let ifname = ifname.into();
                return Err((
                    socket,
                    XdpTxError::Io {
                        ifname,
                        what,
                        source,
                    },
                ));
            }
        };
        if choice == TxChoice::Xdp && !using_xdp {
            let ifname = ifname.into();
            return Err((socket, XdpTxError::NoXmit { ifname, features }));
        }
        let state = Arc::new(TxPathState {
            xdp: AtomicBool::new(using_xdp),
            switches: Counter::default(),
            xdp_counters: xdp.counters(),
        });
        let q = TxPath {
            socket,
            xdp,
            held: PktVec::new(),
            flushes: Arc::default(),
            state: state.clone(),
            ifindex,
            using_xdp,
            watch: netdev::Watch::open().ok(),
            next_check: Instant::now() + RECHECK,
            polls: 0,
        };
        Ok((Box::new(q), Some(state)))
    }

    fn recheck(&mut self, pool: &Pool) {
        let now = Instant::now();
        let notified = self.watch.as_ref().is_some_and(netdev::Watch::changed);
        if !notified && now < self.next_check {
            return;
        }
        self.next_check = now + RECHECK;
        let ok = xdptx::usable(self.ifindex).is_ok_and(|(ok, _)| ok);
        if ok == self.using_xdp {
            return;
        }
        // Nothing is held on the XDP side after a flush; empty the socket's queue before
        // XDP takes over.
        if ok {
            self.socket.flush(pool);
        }
        self.using_xdp = ok;
        self.state.xdp.store(ok, Ordering::Relaxed);
        self.state.switches.add(1);
    }
}

impl TxQueue for TxPath {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        if !self.using_xdp {
            return self.socket.tx_burst(pool, pkts);
        }
        let taken = pkts.len();
        while !pkts.is_empty() {
            if self.held.is_full() {
                // A full vector waiting: plenty for XDP transmit, which copies it now.
                self.xdp.tx_burst(pool, &mut self.held);
            }
            let n = (VECTOR - self.held.len()).min(pkts.len());
            self.held.extend(pkts.drain(..n));
        }
        taken
    }

    fn flush(&mut self, pool: &Pool) {
        if self.using_xdp {
            if self.xdp.queued() == 0 && self.held.len() < XDP_MIN_FRAMES {
                self.socket.tx_burst(pool, &mut self.held);
                self.socket.flush(pool);
                // What the socket had no room for goes by XDP rather than being lost.
            }
            if !self.held.is_empty() {
                self.xdp.tx_burst(pool, &mut self.held);
            }
            self.xdp.flush(pool);
        } else {
            self.socket.flush(pool);
        }
        self.flushes.fetch_add(1, Ordering::Release);
        // Notifications and the clock are read every 16th flush; the device is asked when
        // a notification came, or a second passed.
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(16) {
            self.recheck(pool);
        }
    }

    fn fence(&mut self) -> Option<Box<dyn Fence>> {
        // Frames held or queued for XDP transmit leave at the next flush (the worker's, at
        // the end of this poll); the socket may hold frames of its own.
        Some(Box::new(Flushed {
            flushes: self.flushes.clone(),
            at: self.flushes.load(Ordering::Relaxed) + 1,
            socket: self.socket.fence(),
        }))
    }
}

/// Passed once the queue has flushed after the fence was taken, and the socket's own fence
/// (if any) has passed.
#[derive(Debug)]
struct Flushed {
    flushes: Arc<AtomicU64>,
    at: u64,
    socket: Option<Box<dyn Fence>>,
}

impl Fence for Flushed {
    fn passed(&self) -> bool {
        self.flushes.load(Ordering::Acquire) >= self.at
            && self.socket.as_ref().is_none_or(|f| f.passed())
    }
}
