//! A bounded single-producer single-consumer ring of packet handles.
//!
//! Used wherever one thread hands packets to exactly one other: a VR's ingress ring (one per
//! receiving worker), the `mem` port's rx and tx rings. Why our own and not an MPMC queue: an
//! SPSC ring needs no compare-and-swap, and with cached copies of the other side's index the
//! producer and consumer touch each other's cache line only when their cached view runs out —
//! once per burst, not once per packet (xdpilone's `xsk/ring.rs`, DPDK `rte_ring` SP/SC).
//!
//! Memory ordering: the producer writes slots, then publishes `tail` with `Release`; the
//! consumer reads `tail` with `Acquire` before reading those slots. The consumer publishes
//! `head` with `Release` after moving packets out; the producer reads it with `Acquire` before
//! reusing the slots.
//!
//! **The wait probe.** A VR's ingress ring also tells how long packets wait in it, on a
//! sample: a publish that stamps ([`Producer::publish_stamped`]) marks its first packet with
//! the time, unless an earlier mark is still out; the consumer, once it has taken the marked
//! packet, takes the stamp ([`Consumer::take_probe`]) and so frees the mark for the next
//! publish. One sample per mark's round trip (about one per vector the VR runs), nothing per
//! packet, and the probe shares the line the producer writes `tail` to anyway. Ordering:
//! the producer writes the stamp, then the mark's position (`Release`); the consumer reads
//! the position (`Acquire`), then the stamp, then frees the mark (`Release`), which the
//! producer reads (`Acquire`) before writing the next stamp.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::pool::Pkt;
use crate::vector::PktVec;

/// No wait probe is out (see the module doc).
const NO_PROBE: usize = usize::MAX;

/// The producer's published index and the wait probe, on one line.
struct Tail {
    /// Next position the producer writes (written by the producer only).
    pos: AtomicUsize,
    /// The position of the packet the probe marks, or [`NO_PROBE`]: set by the producer,
    /// cleared by the consumer.
    probe: AtomicUsize,
    /// When the marked packet was published (the producer's clock, in ns).
    probe_ns: AtomicU64,
}

struct Shared {
    buf: Box<[UnsafeCell<MaybeUninit<Pkt>>]>,
    mask: usize,
    /// Next position the consumer reads (written by the consumer only).
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<Tail>,
    /// The consumer's side was closed (its VR removed): nobody waits for what is in the
    /// ring any more, so every [`Mark`] has passed.
    closed: AtomicBool,
}

// SAFETY: a slot is written only by the producer while it is outside [head, tail) and read
// only by the consumer while inside it; the index protocol above orders those accesses.
unsafe impl Sync for Shared {}
// SAFETY: as above; `Pkt` is Send.
unsafe impl Send for Shared {}

// SAFETY: `buf` points into the buffer owned by `s` (an `Arc<Shared>`, itself Send + Sync)
// and is only used as `s.buf` would be, by the producer's single owner.
unsafe impl Send for Producer {}
// SAFETY: `tail` points at `s.tail`, atomics owned by `s` (Send + Sync).
unsafe impl Send for Consumer {}

impl Drop for Shared {
    fn drop(&mut self) {
        // Drop the handles still queued (their slots leak; owners drain rings into the pool
        // before letting them go, see `Consumer::drain`).
        let (h, t) = (*self.head.get_mut(), *self.tail.pos.get_mut());
        for i in h..t {
            // SAFETY: positions in [head, tail) hold initialised handles.
            unsafe { self.buf[i & self.mask].get_mut().assume_init_drop() };
        }
    }
}

/// The sending end.
///
/// It keeps the ring's buffer address and mask beside its indexes, so that staging a packet
/// reads nothing but the producer itself and the slot it writes: with many VRs sharing a
/// receive burst, reaching them through the shared header cost a cache miss per packet
/// (`perf`: a third of demux's time with 100 VRs).
pub struct Producer {
    s: Arc<Shared>,
    /// `s.buf`'s first slot, copied (the buffer never moves while `s` lives).
    buf: *const UnsafeCell<MaybeUninit<Pkt>>,
    /// Next position to write.
    tail: usize,
    head_cache: usize,
    /// `s.mask`, in 32 bits (rings hold at most 2^31 packets): with `published` beside it
    /// the producer takes 40 bytes, which leaves the owner of a VR's producer room for a
    /// field of its own on the same line (`LocalVr`'s niche, in the data plane's worker).
    mask: u32,
    /// The tail the consumer was last shown, modulo 2^32: packets from there to `tail` are
    /// staged, not yet visible (at most the capacity, so 32 bits tell how many).
    published: u32,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(core::mem::size_of::<Producer>() == 40);

/// The receiving end.
///
/// It keeps the address of the producer's index beside its own: the owner of a VR asks each
/// of its rings "anything waiting?" every poll, and with many VRs going through the shared
/// header first cost a cache line per ring per poll.
pub struct Consumer {
    s: Arc<Shared>,
    /// `&s.tail` (it lives as long as `s`).
    tail: *const Tail,
    head: usize,
    tail_cache: usize,
}

impl core::fmt::Debug for Producer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Producer(cap {})", self.s.mask + 1)
    }
}

impl core::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Consumer(cap {}, len {})", self.s.mask + 1, self.len())
    }
}

/// A ring holding up to `capacity` packets (rounded up to a power of two).
pub fn ring(capacity: usize) -> (Producer, Consumer) {
    let cap = capacity.max(2).next_power_of_two();
    assert!(cap <= 1 << 31, "a ring of {capacity} packets");
    let buf = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let s = Arc::new(Shared {
        buf,
        mask: cap - 1,
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(Tail {
            pos: AtomicUsize::new(0),
            probe: AtomicUsize::new(NO_PROBE),
            probe_ns: AtomicU64::new(0),
        }),
        closed: AtomicBool::new(false),
    });
    (
        Producer {
            buf: s.buf.as_ptr(),
            mask: s.mask as u32,
            s: s.clone(),
            tail: 0,
            published: 0,
            head_cache: 0,
        },
        Consumer {
            tail: &*s.tail as *const Tail,
            s,
            head: 0,
            tail_cache: 0,
        },
    )
}

impl Producer {
    /// Capacity of the ring.
    pub fn capacity(&self) -> usize {
        self.mask as usize + 1
    }

    /// The slot of position `pos`.
    #[inline(always)]
    fn slot(&self, pos: usize) -> *mut MaybeUninit<Pkt> {
        // SAFETY: `pos & mask` is below the buffer's length (`mask + 1`); the buffer lives as
        // long as `self.s`.
        unsafe { (*self.buf.add(pos & self.mask as usize)).get() }
    }

    /// The position of the first staged packet (the tail the consumer was last shown).
    #[inline(always)]
    fn published(&self) -> usize {
        self.tail - self.staged()
    }

    /// Free slots, refreshing the view of the consumer's position only when needed.
    #[inline]
    fn room(&mut self, want: usize) -> usize {
        let cap = self.capacity();
        let mut free = cap - (self.tail - self.head_cache);
        if free < want {
            self.head_cache = self.s.head.load(Ordering::Acquire);
            free = cap - (self.tail - self.head_cache);
        }
        free
    }

    /// Enqueue one packet; gives it back if the ring is full.
    #[inline]
    pub fn push(&mut self, p: Pkt) -> Result<(), Pkt> {
        if self.room(1) == 0 {
            return Err(p);
        }
        // SAFETY: the slot at `tail` is outside [head, tail): only the producer touches it.
        unsafe { (*self.slot(self.tail)).write(p) };
        self.tail += 1;
        self.publish();
        Ok(())
    }

    /// Enqueue one packet without showing it to the consumer yet (gives it back if the ring
    /// is full): a receive burst stages each VR's packets straight into its ring and
    /// publishes them once at the end ([`Producer::publish`]), so demux needs no staging
    /// array per VR and the consumer's cache line is touched once per burst.
    #[inline(always)]
    pub fn stage(&mut self, p: Pkt) -> Result<(), Pkt> {
        if self.room(1) == 0 {
            return Err(p);
        }
        // SAFETY: the slot at `tail` is outside [head, tail): only the producer touches it.
        unsafe { (*self.slot(self.tail)).write(p) };
        self.tail += 1;
        Ok(())
    }

    /// Packets staged and not yet published.
    #[inline(always)]
    pub fn staged(&self) -> usize {
        (self.tail as u32).wrapping_sub(self.published) as usize
    }

    /// The `i`th staged packet.
    ///
    /// Panics if fewer than `i + 1` are staged.
    #[inline]
    pub fn staged_at(&self, i: usize) -> &Pkt {
        assert!(i < self.staged(), "staged packet {i} of {}", self.staged());
        // SAFETY: staged positions hold initialised handles that only the producer touches
        // (the consumer reads below the published tail); `&self` keeps them in place.
        unsafe { (*self.slot(self.published() + i)).assume_init_ref() }
    }

    /// Decide the staged packets in order: `keep(i, p)` for the `i`th of them; those it
    /// refuses go to `refused`, the others close up in order. For policing a burst after it
    /// was staged.
    pub fn retain_staged(
        &mut self,
        mut keep: impl FnMut(usize, &Pkt) -> bool,
        mut refused: impl FnMut(Pkt),
    ) {
        let from = self.published();
        let mut w = from;
        for (i, pos) in (from..self.tail).enumerate() {
            // SAFETY: staged positions hold initialised handles the consumer cannot see yet
            // (it reads only below the published tail); each is read exactly once here and
            // either written back at `w <= pos` or handed on.
            let p = unsafe { (*self.slot(pos)).assume_init_read() };
            if keep(i, &p) {
                // SAFETY: `w <= pos`, a staged position already read: free to write.
                unsafe { (*self.slot(w)).write(p) };
                w += 1;
            } else {
                refused(p);
            }
        }
        self.tail = w;
    }

    /// Show the staged packets to the consumer.
    #[inline(always)]
    pub fn publish(&mut self) {
        if self.staged() != 0 {
            self.published = self.tail as u32;
            self.s.tail.pos.store(self.tail, Ordering::Release);
        }
    }

    /// [`Producer::publish`], and mark the first staged packet with `now_ns` if no mark is
    /// out (the wait probe: see the module doc).
    #[inline(always)]
    pub fn publish_stamped(&mut self, now_ns: u64) {
        let t = &self.s.tail;
        if self.staged() != 0 && t.probe.load(Ordering::Acquire) == NO_PROBE {
            t.probe_ns.store(now_ns, Ordering::Relaxed);
            t.probe.store(self.published(), Ordering::Release);
        }
        self.publish();
    }

    /// Packets queued and not yet taken by the consumer. The cached view of the consumer's
    /// position is refreshed (an `Acquire` load of its index) only when it shows at least
    /// `refresh_at` packets: a producer asking "is the consumer behind?" touches the
    /// consumer's cache line only when the answer might be yes.
    #[inline]
    pub fn queued(&mut self, refresh_at: usize) -> usize {
        let mut n = self.tail - self.head_cache;
        if n >= refresh_at {
            self.head_cache = self.s.head.load(Ordering::Acquire);
            n = self.tail - self.head_cache;
        }
        n
    }

    /// A mark at the current end of the ring: [`Mark::passed`] says when the consumer has
    /// taken everything pushed so far. Used to order a hand-over between threads (a VR or a
    /// receive queue moving to another worker) after what was queued before it.
    pub fn mark(&self) -> Mark {
        Mark {
            s: self.s.clone(),
            at: self.tail,
        }
    }

    /// Move as many packets from the front of `v` as fit; returns how many moved. The rest
    /// stay in `v`, in order.
    #[inline]
    pub fn push_burst(&mut self, v: &mut PktVec) -> usize {
        let n = self.room(v.len()).min(v.len());
        for (i, p) in v.drain(..n).enumerate() {
            // SAFETY: the `n` slots from `tail` are free (checked by `room`).
            unsafe { (*self.slot(self.tail + i)).write(p) };
        }
        self.tail += n;
        self.publish();
        n
    }
}

/// A position in a ring (see [`Producer::mark`]).
pub struct Mark {
    s: Arc<Shared>,
    at: usize,
}

impl core::fmt::Debug for Mark {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Mark({})", self.at)
    }
}

impl Mark {
    /// Whether the consumer has taken every packet pushed before the mark (`Acquire`: what
    /// the consumer did with them happened before).
    pub fn passed(&self) -> bool {
        self.s.head.load(Ordering::Acquire) >= self.at || self.s.closed.load(Ordering::Acquire)
    }
}

impl Consumer {
    /// Capacity of the ring.
    pub fn capacity(&self) -> usize {
        self.s.mask + 1
    }

    /// Packets waiting (a snapshot).
    #[inline]
    pub fn len(&self) -> usize {
        self.tail_index() - self.head
    }

    /// The producer's published index (`Acquire`).
    #[inline(always)]
    fn tail_index(&self) -> usize {
        // SAFETY: `tail` points at `s.tail`, alive while `s` is.
        unsafe { &*self.tail }.pos.load(Ordering::Acquire)
    }

    /// The stamp of the wait probe's packet (see the module doc) once this consumer has
    /// taken that packet, freeing the mark for the next publish; `None` while no mark is out
    /// or its packet still waits.
    #[inline]
    pub fn take_probe(&mut self) -> Option<u64> {
        // SAFETY: `tail` points at `s.tail`, alive while `s` is.
        let t = unsafe { &*self.tail };
        let at = t.probe.load(Ordering::Acquire);
        if at == NO_PROBE || at >= self.head {
            return None;
        }
        let ns = t.probe_ns.load(Ordering::Relaxed);
        t.probe.store(NO_PROBE, Ordering::Release);
        Some(ns)
    }

    /// Whether no packet waits (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn ready(&mut self, want: usize) -> usize {
        let mut n = self.tail_cache - self.head;
        if n < want {
            self.tail_cache = self.tail_index();
            n = self.tail_cache - self.head;
        }
        n
    }

    /// Dequeue one packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Pkt> {
        if self.ready(1) == 0 {
            return None;
        }
        // SAFETY: the slot at `head` is inside [head, tail): initialised, ours to move out.
        let p = unsafe { (*self.s.buf[self.head & self.s.mask].get()).assume_init_read() };
        self.head += 1;
        self.s.head.store(self.head, Ordering::Release);
        Some(p)
    }

    /// Start loading the first handles [`Consumer::pop_burst`] will take (two lines' worth)
    /// and the producer's published position, without waiting for them.
    #[inline(always)]
    pub fn prefetch_head(&self) {
        let mask = self.s.mask;
        for k in [0, 64 / core::mem::size_of::<Pkt>()] {
            crate::prefetch::read(self.s.buf[(self.head + k) & mask].get());
        }
        crate::prefetch::read(self.tail);
    }

    /// Move up to `max` packets onto the end of `out` (bounded by its free room); returns how
    /// many moved.
    #[inline]
    pub fn pop_burst(&mut self, out: &mut PktVec, max: usize) -> usize {
        let want = max.min(out.remaining_capacity());
        let n = self.ready(want).min(want);
        let (buf, mask) = (&self.s.buf, self.s.mask);
        for i in 0..n {
            // SAFETY: `& mask` keeps the index below `buf.len()` (`mask + 1`); the `n` slots
            // from `head` are inside [head, tail): initialised, ours to move out. `n` is at
            // most `out`'s free room, so every push fits.
            unsafe {
                let p = (*buf.get_unchecked((self.head + i) & mask).get()).assume_init_read();
                out.push_unchecked(p);
            }
        }
        if n > 0 {
            self.head += n;
            self.s.head.store(self.head, Ordering::Release);
        }
        n
    }

    /// Whether the producer end still exists (something may still be pushed).
    pub fn producer_alive(&self) -> bool {
        let alive = Arc::strong_count(&self.s) > 1;
        // `strong_count` is a relaxed load; the fence pairs it with the release in the
        // producer's drop, so that once it is seen gone its last pushes are seen too (and a
        // drain after this takes them all).
        std::sync::atomic::fence(Ordering::Acquire);
        alive
    }

    /// Declare that nothing in the ring will be waited for (its VR is gone): every
    /// [`Mark`] on it passes from now on, whatever is still pushed. Packets in it must still
    /// be drained.
    pub fn close(&mut self) {
        self.s.closed.store(true, Ordering::Release);
    }

    /// Hand every waiting packet to `f` (used to return them to the pool when a ring is
    /// retired, or a quarantined VR's packets are dropped). A wait probe on one of them is
    /// dropped too: those packets were not taken to be run.
    pub fn drain(&mut self, mut f: impl FnMut(Pkt)) {
        while let Some(p) = self.pop() {
            f(p);
        }
        let _ = self.take_probe();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Pool;

    /// A prefetch of the head is only a hint: on an empty ring, a full one and one whose
    /// head has wrapped (the second line's index past the end), the pops that follow are
    /// what they would have been.
    #[test]
    fn prefetch_head_changes_nothing() {
        let pool = Pool::new(64);
        let (mut tx, mut rx) = ring(16);
        rx.prefetch_head();
        assert!(rx.pop().is_none());
        let mut queued = std::collections::VecDeque::new();
        // Fill, then take 11: the head moves round the ring by 11 a round, so it stands at
        // a different offset each time.
        for round in 0..8 {
            while let Some(p) = pool.alloc() {
                let i = p.index();
                match tx.push(p) {
                    Ok(()) => queued.push_back(i),
                    Err(p) => {
                        pool.free(p);
                        break;
                    }
                }
            }
            assert_eq!(queued.len(), 16, "round {round}");
            for _ in 0..11 {
                rx.prefetch_head();
                let p = rx.pop().expect("queued");
                assert_eq!(Some(p.index()), queued.pop_front(), "round {round}");
                pool.free(p);
            }
        }
        while let Some(p) = rx.pop() {
            assert_eq!(Some(p.index()), queued.pop_front());
            pool.free(p);
        }
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn fifo_order_and_full() {
        let pool = Pool::new(16);
        let (mut tx, mut rx) = ring(4);
        let mut sent = Vec::new();
        for _ in 0..4 {
            let p = pool.alloc().unwrap();
            sent.push(p.index());
            tx.push(p).unwrap();
        }
        let extra = pool.alloc().unwrap();
        let extra = tx.push(extra).unwrap_err();
        pool.free(extra);
        let mut got = PktVec::new();
        assert_eq!(rx.pop_burst(&mut got, 256), 4);
        assert_eq!(got.iter().map(Pkt::index).collect::<Vec<_>>(), sent);
        pool.free_all(&mut got);
        assert!(rx.pop().is_none());
        assert_eq!(pool.available(), 16);
    }

    #[test]
    fn burst_moves_what_fits_and_keeps_the_rest_in_order() {
        let pool = Pool::new(16);
        let (mut tx, mut rx) = ring(4);
        let mut v = PktVec::new();
        for _ in 0..6 {
            v.push(pool.alloc().unwrap());
        }
        let first: Vec<u32> = v.iter().map(Pkt::index).collect();
        assert_eq!(tx.push_burst(&mut v), 4);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].index(), first[4]);
        let mut out = PktVec::new();
        rx.pop_burst(&mut out, 3);
        assert_eq!(out.len(), 3);
        assert_eq!(tx.push_burst(&mut v), 2);
        rx.pop_burst(&mut out, 256);
        assert_eq!(out.iter().map(Pkt::index).collect::<Vec<_>>(), first);
        pool.free_all(&mut out);
    }

    /// A ring whose positions start at `at` on both sides, as if that many packets had
    /// passed through it.
    #[cfg(target_pointer_width = "64")]
    fn ring_at(capacity: usize, at: usize) -> (Producer, Consumer) {
        let (mut tx, mut rx) = ring(capacity);
        tx.s.head.store(at, Ordering::Relaxed);
        tx.s.tail.pos.store(at, Ordering::Relaxed);
        (tx.tail, tx.head_cache, tx.published) = (at, at, at as u32);
        (rx.head, rx.tail_cache) = (at, at);
        (tx, rx)
    }

    #[test]
    fn staged_packets_wait_for_publish_and_can_be_refused_in_order() {
        let (tx, rx) = ring(8);
        stage_refuse_and_publish(tx, rx);
    }

    /// The producer keeps the published position in 32 bits: the same, across a multiple
    /// of 2^32.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn staged_counts_hold_where_positions_pass_2_to_the_32() {
        let (tx, rx) = ring_at(8, (1 << 32) - 3);
        stage_refuse_and_publish(tx, rx);
    }

    /// Staged packets stay invisible until published, can be refused in order, and take
    /// room in the ring (`tx`: a ring of 8).
    fn stage_refuse_and_publish(mut tx: Producer, mut rx: Consumer) {
        let pool = Pool::new(16);
        let mut idx = Vec::new();
        for _ in 0..6 {
            let p = pool.alloc().unwrap();
            idx.push(p.index());
            tx.stage(p).unwrap();
        }
        assert_eq!(tx.staged(), 6);
        assert_eq!(tx.staged_at(4).index(), idx[4]);
        let mut got = PktVec::new();
        assert_eq!(
            rx.pop_burst(&mut got, 8),
            0,
            "staged packets are not visible"
        );
        // Refuse the 2nd and 5th.
        let mut refused = Vec::new();
        tx.retain_staged(|i, _| i != 1 && i != 4, |p| refused.push(p));
        assert_eq!(tx.staged(), 4);
        assert_eq!(
            refused.iter().map(Pkt::index).collect::<Vec<_>>(),
            [idx[1], idx[4]]
        );
        for p in refused {
            pool.free(p);
        }
        tx.publish();
        assert_eq!(tx.staged(), 0);
        assert_eq!(rx.pop_burst(&mut got, 8), 4);
        assert_eq!(
            got.iter().map(Pkt::index).collect::<Vec<_>>(),
            [idx[0], idx[2], idx[3], idx[5]]
        );
        // The ring's room counts staged packets: 8 fit, the 9th does not.
        for _ in 0..8 {
            tx.stage(pool.alloc().unwrap()).unwrap();
        }
        assert_eq!(tx.staged(), 8);
        let extra = tx.stage(pool.alloc().unwrap()).unwrap_err();
        pool.free(extra);
        tx.publish();
        pool.free_all(&mut got);
        assert_eq!(rx.pop_burst(&mut got, 8), 8);
        pool.free_all(&mut got);
        assert_eq!(pool.available(), 16);
    }

    /// The wait probe marks the first packet of a stamped publish while no mark is out; the
    /// consumer gets the stamp once it has taken that packet, and only then may the next
    /// publish mark one. A plain publish marks nothing.
    #[test]
    fn the_wait_probe_marks_one_packet_at_a_time() {
        let pool = Pool::new(16);
        let (mut tx, mut rx) = ring(16);
        let mut got = PktVec::new();
        let stage = |tx: &mut Producer, n: usize| {
            for _ in 0..n {
                tx.stage(pool.alloc().unwrap()).unwrap();
            }
        };
        stage(&mut tx, 2);
        tx.publish();
        rx.pop_burst(&mut got, 16);
        assert_eq!(rx.take_probe(), None, "a plain publish marks nothing");
        // Marked at 100: positions 2..5; another publish at 200 may not mark while it is out.
        stage(&mut tx, 3);
        tx.publish_stamped(100);
        assert_eq!(rx.take_probe(), None, "its packet still waits");
        stage(&mut tx, 2);
        tx.publish_stamped(200);
        // Taking the marked packet (position 2) is what counts, not the whole publish.
        rx.pop_burst(&mut got, 1);
        assert_eq!(rx.take_probe(), Some(100));
        assert_eq!(rx.take_probe(), None, "a stamp is taken once");
        rx.pop_burst(&mut got, 16);
        assert_eq!(
            rx.take_probe(),
            None,
            "the publish at 200 found the mark out"
        );
        // Free again: the next stamped publish marks its first packet.
        stage(&mut tx, 1);
        tx.publish_stamped(300);
        stage(&mut tx, 1);
        tx.publish_stamped(400);
        rx.pop_burst(&mut got, 16);
        assert_eq!(rx.take_probe(), Some(300));
        assert_eq!(got.len(), 9);
        pool.free_all(&mut got);
    }

    /// The probe across threads: every stamp the consumer takes is one a publish made, in
    /// order, and the producer marks again after each is taken.
    #[test]
    fn the_wait_probe_crosses_threads() {
        let pool = Pool::new(1024);
        let (mut tx, mut rx) = ring(256);
        let p2 = pool.clone();
        let producer = std::thread::spawn(move || {
            let mut t = 0u64;
            let mut sent = 0;
            while sent < 20_000 {
                if tx.room(4) >= 4 {
                    for _ in 0..4 {
                        tx.stage(p2.alloc().unwrap()).unwrap();
                    }
                    t += 1;
                    tx.publish_stamped(t);
                    sent += 4;
                } else {
                    std::thread::yield_now();
                }
            }
            tx
        });
        let (mut taken, mut stamps) = (0, Vec::new());
        let mut v = PktVec::new();
        while taken < 20_000 {
            let n = rx.pop_burst(&mut v, 7);
            taken += n;
            pool.free_all(&mut v);
            if let Some(s) = rx.take_probe() {
                stamps.push(s);
            }
        }
        let _tx = producer.join().unwrap();
        assert!(stamps.len() > 1, "{stamps:?}");
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
        assert!(stamps.iter().all(|&s| (1..=5000).contains(&s)));
        assert_eq!(pool.available(), 1024);
    }

    #[test]
    fn queued_and_marks_follow_the_consumer() {
        let pool = Pool::new(16);
        let (mut tx, mut rx) = ring(8);
        for _ in 0..5 {
            tx.push(pool.alloc().unwrap()).unwrap();
        }
        let m = tx.mark();
        assert!(!m.passed());
        assert_eq!(tx.queued(usize::MAX), 5);
        let mut v = PktVec::new();
        rx.pop_burst(&mut v, 3);
        // The cached view is refreshed only when asked to look.
        assert_eq!(tx.queued(usize::MAX), 5);
        assert_eq!(tx.queued(1), 2);
        assert!(!m.passed());
        tx.push(pool.alloc().unwrap()).unwrap();
        rx.pop_burst(&mut v, 2);
        assert!(m.passed(), "everything before the mark was taken");
        rx.pop_burst(&mut v, 8);
        pool.free_all(&mut v);
        assert_eq!(tx.queued(0), 0);
    }

    #[test]
    fn threads_keep_order_across_wraparound() {
        let pool = Pool::new(64);
        let (mut tx, mut rx) = ring(8);
        let n = 100_000u32;
        std::thread::scope(|s| {
            let pool2 = &pool;
            s.spawn(move || {
                for i in 0..n {
                    let mut p = loop {
                        if let Some(p) = pool2.alloc() {
                            break p;
                        }
                        std::hint::spin_loop();
                    };
                    pool2.meta_mut(&mut p).len = (i % 65536) as u16;
                    pool2.meta_mut(&mut p).vr = (i >> 16) as u16;
                    let mut p = Some(p);
                    while let Some(q) = p.take() {
                        if let Err(q) = tx.push(q) {
                            p = Some(q);
                            std::hint::spin_loop();
                        }
                    }
                }
            });
            let mut next = 0u32;
            while next < n {
                if let Some(p) = rx.pop() {
                    let m = pool.meta(&p);
                    assert_eq!(u32::from(m.len) | u32::from(m.vr) << 16, next);
                    next += 1;
                    pool.free(p);
                }
            }
        });
        assert_eq!(pool.available(), 64);
    }
}
