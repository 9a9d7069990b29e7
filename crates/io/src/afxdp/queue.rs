//! The data plane's view of one socket: [`XskRx`] (rx + fill rings) and [`XskTx`] (tx +
//! completion rings).
//!
//! A socket's rings come in two pairs that never need each other: what is received comes
//! from the fill ring's slots, what is sent comes back on the completion ring. So each pair
//! is its own object with its own [`Lent`] set, and the two halves of one queue may be
//! driven by different threads without a lock (the workers' model: a worker polls its rx
//! queues and owns one tx queue per port).
//!
//! Receive: read descriptors off the rx ring, turn each address back into its slot (only if
//! this half lent it — see [`super::lent`]), set the frame's offset and length, then top
//! the fill ring up with fresh slots from the pool. The kernel puts a frame
//! `XDP_PACKET_HEADROOM` (256) bytes into its chunk, so `Meta.off` is 256 here, not the
//! pool's `HEADROOM`; nothing in the data plane assumes otherwise.
//!
//! Transmit: first take completed slots back to the pool, then put as many packets on the
//! tx ring as both the tx ring and the completion ring can hold (so a completion can never
//! be refused). The kernel is woken once per poll, in [`TxQueue::flush`], if the ring asks
//! for it (always, in copy mode: there the `sendto` is what transmits) — not per
//! `tx_burst`: with many VRs a poll runs many small vectors, and a `sendto` each cost more
//! than the forwarding (64 VRs forwarded 0.36× one VR's rate that way).

use std::sync::Arc;
use std::time::{Duration, Instant};

use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{PktVec, Pool, SLOT_SIZE};

use super::lent::Lent;
use super::ring::{Consumer, Desc, Producer};
use super::socket::Xsk;

/// Frames waiting on the tx ring that make `tx_burst` kick at once instead of leaving it
/// to the flush: a full vector.
const KICK_AT: u32 = vrhost_dataplane::VECTOR as u32;

/// How long dropping a transmit half waits for frames in flight to complete.
const TX_DRAIN: Duration = Duration::from_millis(50);

/// Split a UMEM address into (slot, offset in the slot), if it lies inside a pool of
/// `capacity` slots.
#[inline(always)]
fn slot_of(addr: u64, capacity: usize) -> Option<(u32, usize)> {
    let idx = addr / SLOT_SIZE as u64;
    (idx < capacity as u64).then_some((idx as u32, (addr % SLOT_SIZE as u64) as usize))
}

#[inline(always)]
fn check_pool(ours: &Pool, given: &Pool) {
    assert!(
        core::ptr::eq(ours, given),
        "AF_XDP queue driven with another pool than the one its port was opened with"
    );
}

/// The receive half of one AF_XDP socket: its rx and fill rings.
pub struct XskRx {
    xsk: Arc<Xsk>,
    pool: Arc<Pool>,
    rx: Consumer<Desc>,
    fill: Producer<u64>,
    lent: Lent,
    need_wakeup: bool,
    /// Run the NAPI from here: one `recvfrom` per burst (see "Preferred busy polling" in
    /// the module docs of `afxdp`).
    busy_poll: bool,
    bad: u64,
}

impl core::fmt::Debug for XskRx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XskRx")
            .field("ifname", &self.xsk.ifname())
            .field("queue", &self.xsk.queue())
            .field("lent", &self.lent.count())
            .field("bad_descs", &self.bad)
            .finish_non_exhaustive()
    }
}

impl XskRx {
    pub(crate) fn new(
        xsk: Arc<Xsk>,
        rx: Consumer<Desc>,
        fill: Producer<u64>,
        need_wakeup: bool,
        busy_poll: bool,
    ) -> XskRx {
        let pool = xsk.pool().clone();
        XskRx {
            lent: Lent::new(pool.capacity()),
            xsk,
            pool,
            rx,
            fill,
            need_wakeup,
            busy_poll,
            bad: 0,
        }
    }

    /// The queue (of its interface) this half receives from.
    pub fn queue(&self) -> u32 {
        self.xsk.queue()
    }

    /// Slots this half has on loan to the kernel (fill ring, or received and not yet read).
    pub fn lent(&self) -> u32 {
        self.lent.count()
    }

    /// Descriptors the kernel returned that this half never lent, or that overran their
    /// slot: dropped without touching the pool. Should stay 0.
    pub fn bad_descs(&self) -> u64 {
        self.bad
    }

    /// Top the fill ring up with free pool slots; returns how many were added. Stops early
    /// when the pool runs dry (the kernel then counts `rx_fill_ring_empty_descs`).
    pub(crate) fn refill(&mut self) -> u32 {
        let room = self.fill.reserve(self.fill.size());
        let mut k = 0;
        while k < room {
            let Some(p) = self.pool.alloc() else { break };
            let idx = self.pool.into_raw(p);
            self.lent.lend(idx);
            self.fill.write(k, u64::from(idx) * SLOT_SIZE as u64);
            k += 1;
        }
        if k > 0 {
            self.fill.submit(k);
        }
        k
    }
}

impl RxQueue for XskRx {
    fn rx_burst(&mut self, pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        check_pool(&self.pool, pool);
        if self.busy_poll {
            // The kernel runs the queue's NAPI poll inside this call, on this core.
            self.xsk.kick_rx();
        }
        let want = max.min(out.remaining_capacity()) as u32;
        let n = self.rx.peek(want);
        let cap = pool.capacity();
        let mut got = 0;
        for i in 0..n {
            let d = self.rx.read(i);
            let Some((idx, off)) =
                slot_of(d.addr, cap).filter(|(idx, _)| self.lent.take_back(*idx))
            else {
                self.bad += 1;
                continue;
            };
            // SAFETY: this half lent slot `idx` to the kernel (its bit was set, and is
            // cleared now), and the kernel handed it back on the rx ring: we hold it, and
            // no other handle to it exists.
            let mut p = unsafe { pool.from_raw(idx) };
            if off + d.len as usize > SLOT_SIZE {
                pool.free(p);
                self.bad += 1;
                continue;
            }
            pool.set_received(&mut p, off, d.len as usize);
            out.push(p);
            got += 1;
        }
        if n > 0 {
            self.rx.release(n);
        }
        let added = self.refill();
        // A zero-copy driver that ran out of fill buffers sleeps until told; copy mode
        // never sets the flag. Looked at when new buffers went in or nothing came out.
        if !self.busy_poll && self.need_wakeup && (added > 0 || n == 0) && self.fill.needs_wakeup()
        {
            self.xsk.kick_rx();
        }
        got
    }
}

impl Drop for XskRx {
    fn drop(&mut self) {
        // The kernel may still write into these until the socket closes.
        self.xsk.orphan(self.lent.take_all());
    }
}

/// The transmit half of one AF_XDP socket: its tx and completion rings.
pub struct XskTx {
    xsk: Arc<Xsk>,
    pool: Arc<Pool>,
    tx: Producer<Desc>,
    comp: Consumer<u64>,
    lent: Lent,
    need_wakeup: bool,
    zero_copy: bool,
    bad: u64,
}

impl core::fmt::Debug for XskTx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XskTx")
            .field("ifname", &self.xsk.ifname())
            .field("queue", &self.xsk.queue())
            .field("in_flight", &self.lent.count())
            .field("bad_descs", &self.bad)
            .finish_non_exhaustive()
    }
}

impl XskTx {
    pub(crate) fn new(
        xsk: Arc<Xsk>,
        tx: Producer<Desc>,
        comp: Consumer<u64>,
        need_wakeup: bool,
        zero_copy: bool,
    ) -> XskTx {
        let pool = xsk.pool().clone();
        XskTx {
            lent: Lent::new(pool.capacity()),
            xsk,
            pool,
            tx,
            comp,
            need_wakeup,
            zero_copy,
            bad: 0,
        }
    }

    /// The queue (of its interface) this half transmits on.
    pub fn queue(&self) -> u32 {
        self.xsk.queue()
    }

    /// Frames handed to the kernel whose completion has not been read yet.
    pub fn in_flight(&self) -> u32 {
        self.lent.count()
    }

    /// Frames on the tx ring the kernel has not taken yet (in copy mode: not yet sent).
    pub fn pending(&mut self) -> u32 {
        self.tx.pending()
    }

    /// Completion addresses this half never lent (dropped, counted). Should stay 0.
    pub fn bad_descs(&self) -> u64 {
        self.bad
    }

    /// Return completed frames' slots to the pool, and wake the kernel if frames are still
    /// waiting on the tx ring. `tx_burst` does this itself; call it when a queue may sit
    /// idle with frames in flight. Returns how many slots were freed.
    pub fn reclaim(&mut self) -> u32 {
        let n = self.reap();
        if self.tx.pending() > 0 {
            self.kick();
        }
        n
    }

    fn reap(&mut self) -> u32 {
        let n = self.comp.peek(self.comp.size());
        let cap = self.pool.capacity();
        for i in 0..n {
            let addr = self.comp.read(i);
            match slot_of(addr, cap) {
                Some((idx, _)) if self.lent.take_back(idx) => {
                    // SAFETY: this half lent the slot and the kernel completed it: we hold
                    // it again, and no other handle to it exists.
                    self.pool.free(unsafe { self.pool.from_raw(idx) });
                }
                _ => self.bad += 1,
            }
        }
        if n > 0 {
            self.comp.release(n);
        }
        n
    }

    /// Wake the kernel to transmit what is on the tx ring, when it asks for it.
    ///
    /// In copy mode the kernel transmits inside `sendto`, up to its per-call budget
    /// (raised to the ring size where the kernel allows), so while it answers `EAGAIN`
    /// with frames left on the ring we call again, a few times at most: the rest goes
    /// with the next burst. In zero-copy mode `sendto` only schedules the driver.
    fn kick(&mut self) {
        if self.need_wakeup && !self.tx.needs_wakeup() {
            return;
        }
        for _ in 0..4 {
            match self.xsk.kick_tx() {
                Err(e)
                    if !self.zero_copy
                        && e.raw_os_error() == Some(libc::EAGAIN)
                        && self.tx.pending() > 0 =>
                {
                    continue;
                }
                _ => break,
            }
        }
    }
}

impl TxQueue for XskTx {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        check_pool(&self.pool, pool);
        self.reap();
        // Every lent slot must fit on the completion ring when it completes.
        let room = (self.comp.size() - self.lent.count()).min(pkts.len() as u32);
        let n = self.tx.reserve(room);
        let mut k = 0;
        for p in pkts.drain(..n as usize) {
            let m = *pool.meta(&p);
            if m.len == 0 {
                // Nothing to send (the kernel would drop it without a completion).
                pool.free(p);
                self.bad += 1;
                continue;
            }
            let idx = pool.into_raw(p);
            self.lent.lend(idx);
            self.tx.write(
                k,
                Desc {
                    addr: u64::from(idx) * SLOT_SIZE as u64 + u64::from(m.off),
                    len: u32::from(m.len),
                    options: 0,
                },
            );
            k += 1;
        }
        if k > 0 {
            self.tx.submit(k);
            // A full vector's worth waiting: send it now rather than at the flush (one VR's
            // full vectors: a `sendto` of 512 frames at the end of the poll measured ~8 %
            // slower than two of 256 as they came).
            if self.tx.pending() >= KICK_AT {
                self.kick();
            }
        }
        n as usize
    }

    fn flush(&mut self, pool: &Pool) {
        check_pool(&self.pool, pool);
        if self.tx.pending() > 0 {
            self.kick();
        }
    }
}

impl Drop for XskTx {
    fn drop(&mut self) {
        // Give frames in flight a moment to complete, so their slots come back through
        // the completion ring and the device is not reading them when they are reused.
        let start = Instant::now();
        while self.lent.count() > 0 && start.elapsed() < TX_DRAIN {
            self.reclaim();
            if self.lent.count() > 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.xsk.orphan(self.lent.take_all());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_slot_and_offset() {
        assert_eq!(slot_of(0, 4), Some((0, 0)));
        assert_eq!(slot_of(3 * 2048 + 256, 4), Some((3, 256)));
        assert_eq!(slot_of(4 * 2048, 4), None);
        assert_eq!(slot_of(u64::MAX, 4), None);
    }
}
