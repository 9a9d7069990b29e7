//! A port queue's transmit path: the socket's own (AF_XDP tx ring, AF_PACKET `sendmmsg`) or
//! the device's XDP transmit ([`crate::xdptx`]), chosen per queue and re-checked while it
//! runs.
//!
//! Why re-check: whether a device takes XDP-transmitted frames can change under a running
//! router — a veth takes them only while its peer has an XDP program or GRO on, and frames
//! sent when it does not are dropped with no counter. So the queue asks the device again
//! about once a second ([`RECHECK`]) and moves to the socket's path when the device stops
//! advertising it (and back when it does again), logging nothing itself but counting the
//! switches and showing the path in use ([`TxPathState`]), for `vrhost ctl status`.
//!
//! Ordering at a switch: XDP transmit holds nothing once `flush` returns, and the socket's
//! queue is flushed before the XDP path takes over, so frames leave in order except for
//! frames a socket's ring still held at that moment (a device in copy mode sends them
//! inside the flush; a zero-copy device may still be sending them).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vrhost_dataplane::port::{Fence, TxQueue};
use vrhost_dataplane::{PktVec, Pool};

use crate::xdptx::{self, XdpTx, XdpTxCounters, XdpTxError};

/// How often a queue asks the device whether XDP transmit still works.
pub const RECHECK: Duration = Duration::from_secs(1);

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
    pub switches: AtomicU64,
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
    state: Arc<TxPathState>,
    ifindex: u32,
    using_xdp: bool,
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
        let xdp = match XdpTx::open(ifname) {
            Ok(x) => x,
            // Not advertised now: under `auto`, keep checking; the device may take it later.
            Err(XdpTxError::NoXmit { .. }) if choice == TxChoice::Auto => {
                match XdpTx::open_unchecked(ifname) {
                    Ok(x) => x,
                    Err(e) => return Err((socket, e)),
                }
            }
            Err(e) => return Err((socket, e)),
        };
        let ifindex = xdp.ifindex();
        let using_xdp = xdptx::usable(ifindex).is_ok_and(|(ok, _)| ok);
        let state = Arc::new(TxPathState {
            xdp: AtomicBool::new(using_xdp),
            switches: AtomicU64::new(0),
            xdp_counters: xdp.counters(),
        });
        let q = TxPath {
            socket,
            xdp,
            state: state.clone(),
            ifindex,
            using_xdp,
            next_check: Instant::now() + RECHECK,
            polls: 0,
        };
        Ok((Box::new(q), Some(state)))
    }

    fn recheck(&mut self, pool: &Pool) {
        let now = Instant::now();
        if now < self.next_check {
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
        self.state.switches.fetch_add(1, Ordering::Relaxed);
    }
}

impl TxQueue for TxPath {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        if self.using_xdp {
            self.xdp.tx_burst(pool, pkts)
        } else {
            self.socket.tx_burst(pool, pkts)
        }
    }

    fn flush(&mut self, pool: &Pool) {
        if self.using_xdp {
            self.xdp.flush(pool);
        } else {
            self.socket.flush(pool);
        }
        // The clock is read every 64th poll with traffic, the device asked once a second.
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(64) {
            self.recheck(pool);
        }
    }

    fn fence(&mut self) -> Option<Box<dyn Fence>> {
        // XDP transmit holds nothing once it has run what is queued; the socket may.
        let _ = self.xdp.fence();
        self.socket.fence()
    }
}
