//! Port queues that the daemon can replace while the workers run: how a port whose
//! interface vanished and came back is reattached.
//!
//! Why wrappers and not a data-plane call: a worker owns its queues, and receive queues move
//! between workers (folds, on-demand cores), so only whichever worker holds a queue at the
//! moment may touch it. Each queue the workers get is a [`Swap`] around the backend's; the
//! daemon keeps a [`Slot`] for each. To reattach, it opens the port again and leaves each
//! new queue in its slot; the holder takes it in at its next burst (one relaxed
//! load per burst when nothing is waiting) and drops the old one there, which closes the
//! old socket and gives its slots back to the pool. Nothing in the data plane changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use vrhost_dataplane::port::{Fence, RxQueue, TxQueue};
use vrhost_dataplane::{PktVec, Pool};

/// Where the daemon leaves a replacement queue for whoever holds the wrapper.
///
/// `waiting` is only a hint for the holder's fast path; it is written only with `next`'s
/// lock held, so it never says "empty" while a queue waits.
pub(crate) struct Slot<Q: ?Sized> {
    waiting: AtomicBool,
    next: Mutex<Option<Box<Q>>>,
}

impl<Q: ?Sized> Slot<Q> {
    fn new() -> Arc<Slot<Q>> {
        Arc::new(Slot {
            waiting: AtomicBool::new(false),
            next: Mutex::new(None),
        })
    }

    /// Leave `q` to replace the wrapped queue at its holder's next burst (a queue left
    /// before and not yet taken is dropped).
    pub(crate) fn put(&self, q: Box<Q>) {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        *next = Some(q);
        self.waiting.store(true, Ordering::Relaxed);
    }

    /// Whether a queue left here was taken in.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> bool {
        !self.waiting.load(Ordering::Relaxed)
    }

    /// The queue waiting here, if any (the holder's side).
    #[inline]
    fn take(&self) -> Option<Box<Q>> {
        if !self.waiting.load(Ordering::Relaxed) {
            return None;
        }
        self.take_slow()
    }

    #[cold]
    fn take_slow(&self) -> Option<Box<Q>> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        self.waiting.store(false, Ordering::Relaxed);
        next.take()
    }
}

/// A queue the daemon can replace: `Swap<dyn RxQueue>` is a receive queue, `Swap<dyn
/// TxQueue>` a transmit queue. A transmit queue's old queue is dropped when the new one is
/// taken in (at a burst, a flush or a fence): what it still held for a vanished device was
/// not going out anyway.
pub(crate) struct Swap<Q: ?Sized> {
    q: Box<Q>,
    slot: Arc<Slot<Q>>,
}

impl<Q: ?Sized> Swap<Q> {
    /// Wrap `q`; the slot is the daemon's handle.
    pub(crate) fn new(q: Box<Q>) -> (Swap<Q>, Arc<Slot<Q>>) {
        let slot = Slot::new();
        (
            Swap {
                q,
                slot: slot.clone(),
            },
            slot,
        )
    }

    /// The queue to use now: the one waiting in the slot, if any, from now on.
    #[inline]
    fn current(&mut self) -> &mut Q {
        if let Some(q) = self.slot.take() {
            self.q = q;
        }
        &mut self.q
    }
}

impl RxQueue for Swap<dyn RxQueue> {
    #[inline]
    fn rx_burst(&mut self, pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        self.current().rx_burst(pool, out, max)
    }
}

impl TxQueue for Swap<dyn TxQueue> {
    #[inline]
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        self.current().tx_burst(pool, pkts)
    }

    fn flush(&mut self, pool: &Pool) {
        self.current().flush(pool);
    }

    fn fence(&mut self) -> Option<Box<dyn Fence>> {
        self.current().fence()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_dataplane::port::mem;

    /// Frames go to the queue in place, then, once a new one is left in the slot, to the
    /// new one only; the old queue is dropped (its peer sees no more frames).
    #[test]
    fn a_queue_left_in_the_slot_takes_over_at_the_next_burst() {
        let pool = Pool::new(64);
        let (mut old, mut old_peer) = mem::port(1, 1, 16);
        let (mut new, mut new_peer) = mem::port(1, 1, 16);
        let (mut tx, tx_slot) = Swap::<dyn TxQueue>::new(Box::new(old.tx.remove(0)));
        let (mut rx, rx_slot) = Swap::<dyn RxQueue>::new(Box::new(old.rx.remove(0)));
        let frame = |n: u8| {
            let mut v = PktVec::new();
            v.push(pool.alloc_frame(&[n; 60]).unwrap());
            v
        };
        let mut v = frame(1);
        assert_eq!(tx.tx_burst(&pool, &mut v), 1);
        assert_eq!(old_peer.tx[0].len(), 1);
        old_peer.rx[0].push_burst(&mut frame(2));
        let mut got = PktVec::new();
        assert_eq!(rx.rx_burst(&pool, &mut got, 8), 1);
        assert_eq!(pool.frame(&got[0])[0], 2);

        tx_slot.put(Box::new(new.tx.remove(0)));
        rx_slot.put(Box::new(new.rx.remove(0)));
        assert!(!tx_slot.taken() && !rx_slot.taken());
        old_peer.rx[0].push_burst(&mut frame(3));
        new_peer.rx[0].push_burst(&mut frame(4));
        assert_eq!(tx.tx_burst(&pool, &mut frame(5)), 1);
        let mut got = PktVec::new();
        assert_eq!(rx.rx_burst(&pool, &mut got, 8), 1);
        assert!(tx_slot.taken() && rx_slot.taken());
        assert_eq!(pool.frame(&got[0])[0], 4, "received from the new queue");
        assert_eq!(new_peer.tx[0].len(), 1, "sent on the new queue");
        assert_eq!(old_peer.tx[0].len(), 1, "nothing more on the old one");
        assert!(rx.slot.take().is_none(), "taken once");
    }
}
