//! The sink: frames from any [`RxQueue`], counted per stream.
//!
//! Per received burst the sink reads the clock once, then per frame finds the
//! [`signature`](crate::signature), looks the stream up in a table indexed by stream id, and
//! updates that stream's counters:
//!
//! * **received** — every signed frame of the stream, duplicates included;
//! * **duplicated** — a sequence number seen before (within the window, below);
//! * **reordered** — a sequence number below the highest seen, not seen before: a frame
//!   that arrived after a later one (each frame is in order, reordered or a duplicate, never
//!   two of these);
//! * **lost** — known only with the generator's sent count, after the run:
//!   `sent − (received − duplicated)` ([`StreamRx::lost`]). While traffic runs, the gaps
//!   below the highest sequence seen ([`StreamRx::gaps`]) are what is missing so far; a gap
//!   may still be filled by a reordered frame;
//! * **latency** — receive time minus the signature's transmit time, in an HDR histogram
//!   (1 ns to 10 s by default, 3 significant digits; longer latencies are recorded as the
//!   maximum), with exact min and max alongside.
//!
//! Frames without a signature are counted apart (`unsigned`), as are signed frames of a
//! stream the sink was not told about (`unknown_stream`).
//!
//! **Duplicates need memory of what was seen.** Each stream keeps a bitmap of the last
//! `window` sequence numbers (default 65536, a power of two; 8 KiB per stream), indexed by
//! sequence modulo the window. An in-order frame sets one bit; a jump forward clears the
//! bits it skips. A frame more than `window` behind the highest is counted as reordered
//! and as `too_old`: whether it is a duplicate can no longer be told.
//!
//! **Counters are read after the traffic stopped and the DUT drained** ([`Sink::snapshot`],
//! [`Sink::drain`]). Frames still queued in the DUT when the counters are read would count
//! as lost although they arrive a moment later — a mistake TRex's NDR bench is known for.
//! The sink makes the safe order the easy one: its counters are plain integers owned by
//! the thread that polls (no atomics on the per-frame path), so they can only be read once
//! that thread has handed the sink back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use vrhost_dataplane::port::RxQueue;
use vrhost_dataplane::ring::Producer;
use vrhost_dataplane::{PktVec, Pool, VECTOR};

use crate::clock::Clock;
use crate::error::Error;
use crate::frames::FCS_LEN;
use crate::signature::{self, extend48, latency_ns};

/// Largest stream id a sink takes (its lookup table is indexed by id).
pub const MAX_STREAM_ID: u32 = (1 << 20) - 1;
/// Entry of the id table for ids no stream has.
const NONE: u32 = u32::MAX;
/// Frames looked ahead to prefetch.
const PREFETCH: usize = 4;

/// How a sink counts.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Sequence numbers remembered per stream for duplicate detection (a power of two,
    /// 64 ..= 2²⁴).
    pub window: u64,
    /// Largest latency the histogram tells apart (ns); above it, latencies count as it.
    pub latency_max_ns: u64,
    /// Significant decimal digits the histogram keeps (1 ..= 5).
    pub latency_digits: u8,
    /// Where time comes from (the generator's, for latencies to mean anything).
    pub clock: Clock,
}

impl Default for SinkConfig {
    fn default() -> SinkConfig {
        SinkConfig {
            window: 1 << 16,
            latency_max_ns: 10_000_000_000,
            latency_digits: 3,
            clock: Clock::Monotonic,
        }
    }
}

/// Latency percentiles of one stream, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Latency {
    /// Frames measured.
    pub count: u64,
    /// Exact minimum.
    pub min: u64,
    /// Mean (to the histogram's precision).
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Exact maximum.
    pub max: u64,
}

/// Duplicate-detection window over a stream's recent sequence numbers.
#[derive(Debug, Clone)]
struct Window {
    bits: Box<[u64]>,
    mask: u64,
}

impl Window {
    fn new(size: u64) -> Window {
        Window {
            bits: vec![0; (size / 64) as usize].into(),
            mask: size - 1,
        }
    }

    fn size(&self) -> u64 {
        self.mask + 1
    }

    #[inline(always)]
    fn get(&self, seq: u64) -> bool {
        let i = seq & self.mask;
        self.bits[(i >> 6) as usize] >> (i & 63) & 1 != 0
    }

    #[inline(always)]
    fn set(&mut self, seq: u64) {
        let i = seq & self.mask;
        self.bits[(i >> 6) as usize] |= 1 << (i & 63);
    }

    /// Clear the bits of sequence numbers `from..to` (at most the window's size of them).
    fn clear(&mut self, from: u64, to: u64) {
        let mut s = from;
        while s < to {
            let i = s & self.mask;
            let b = i & 63;
            let n = (64 - b).min(to - s);
            let m = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << b
            };
            self.bits[(i >> 6) as usize] &= !m;
            s += n;
        }
    }

    fn clear_all(&mut self) {
        self.bits.fill(0);
    }
}

/// One stream's receive state.
#[derive(Debug, Clone)]
struct StreamState {
    id: u32,
    received: u64,
    bytes: u64,
    duplicated: u64,
    reordered: u64,
    too_old: u64,
    /// Highest sequence number seen (valid once `received` > 0).
    highest: u64,
    window: Window,
    hist: Histogram<u64>,
    lat_min: u64,
    lat_max: u64,
}

impl StreamState {
    /// Account one frame's (widened) sequence number.
    #[inline(always)]
    fn seq(&mut self, seq: u64) {
        if self.received == 0 {
            self.highest = seq;
            self.window.set(seq);
        } else if seq > self.highest {
            let gap = seq - self.highest;
            if gap > 1 {
                self.skip(seq);
            }
            self.window.set(seq);
            self.highest = seq;
        } else if self.highest - seq >= self.window.size() {
            self.too_old += 1;
            self.reordered += 1;
        } else if self.window.get(seq) {
            self.duplicated += 1;
        } else {
            self.window.set(seq);
            self.reordered += 1;
        }
        self.received += 1;
    }

    /// A jump forward to `seq`: forget the skipped sequence numbers' old bits.
    #[cold]
    fn skip(&mut self, seq: u64) {
        if seq - self.highest > self.window.size() {
            self.window.clear_all();
        } else {
            self.window.clear(self.highest + 1, seq);
        }
    }

    fn reset(&mut self) {
        self.received = 0;
        self.bytes = 0;
        self.duplicated = 0;
        self.reordered = 0;
        self.too_old = 0;
        self.highest = 0;
        self.window.clear_all();
        self.hist.reset();
        self.lat_min = u64::MAX;
        self.lat_max = 0;
    }
}

/// One stream's counters at a snapshot.
#[derive(Debug, Clone)]
pub struct StreamRx {
    /// Stream id.
    pub id: u32,
    /// Signed frames of the stream, duplicates included.
    pub received: u64,
    /// Their bytes on the wire, FCS included.
    pub bytes: u64,
    /// Frames whose sequence number had been seen before.
    pub duplicated: u64,
    /// Frames that arrived after a frame with a higher sequence number.
    pub reordered: u64,
    /// Of the reordered, those too far behind to check for duplication.
    pub too_old: u64,
    /// Highest sequence number received.
    pub highest_seq: Option<u64>,
    /// Latency summary.
    pub latency: Latency,
    /// The full latency histogram (ns), for CDFs and for merging streams.
    pub histogram: Histogram<u64>,
}

impl StreamRx {
    /// Distinct frames received.
    pub fn unique(&self) -> u64 {
        self.received - self.duplicated
    }

    /// Frames sent but not received, given the generator's final sent count (read after
    /// the traffic stopped and the DUT drained). A stream the generator sent nothing of
    /// that still received frames yields 0.
    pub fn lost(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.unique())
    }

    /// Sequence numbers below the highest received that have not arrived (yet).
    pub fn gaps(&self) -> u64 {
        self.highest_seq.map_or(0, |h| h + 1 - self.unique())
    }
}

/// A sink's counters at a snapshot.
#[derive(Debug, Clone)]
pub struct SinkSnapshot {
    /// Per stream, in the order the sink was given them.
    pub streams: Vec<StreamRx>,
    /// Frames without a signature.
    pub unsigned: u64,
    /// Signed frames of a stream id the sink does not know.
    pub unknown_stream: u64,
    /// Every frame received.
    pub frames: u64,
}

impl SinkSnapshot {
    /// The stream with id `id`.
    pub fn stream(&self, id: u32) -> Option<&StreamRx> {
        self.streams.iter().find(|s| s.id == id)
    }
}

/// A traffic sink over one receive queue (see the module docs).
pub struct Sink<R: RxQueue + ?Sized = dyn RxQueue> {
    pool: Arc<Pool>,
    /// Stream index by stream id, `NONE` for ids without a stream.
    index: Box<[u32]>,
    streams: Box<[StreamState]>,
    unsigned: u64,
    unknown: u64,
    frames: u64,
    recycle: Option<Producer>,
    clock: Clock,
    rx: Box<R>,
}

impl<R: RxQueue + ?Sized> core::fmt::Debug for Sink<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sink")
            .field("streams", &self.streams.len())
            .field("frames", &self.frames)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl<R: RxQueue + ?Sized> Sink<R> {
    /// A sink for the streams with ids `ids` (at most [`MAX_STREAM_ID`]; numbering streams
    /// from 0 keeps the lookup table small), reading `rx` and freeing frames to `pool`.
    pub fn new(
        pool: Arc<Pool>,
        rx: Box<R>,
        ids: &[u32],
        cfg: SinkConfig,
    ) -> Result<Sink<R>, Error> {
        if ids.is_empty() {
            return Err(Error::NoStreams);
        }
        if !(cfg.window.is_power_of_two() && (64..=1 << 24).contains(&cfg.window)) {
            return Err(Error::SinkSetting {
                what: "window",
                value: cfg.window,
                range: "a power of two from 64 to 16777216",
            });
        }
        if !(1..=5).contains(&cfg.latency_digits) {
            return Err(Error::SinkSetting {
                what: "latency_digits",
                value: u64::from(cfg.latency_digits),
                range: "1 to 5",
            });
        }
        let hist = Histogram::new_with_bounds(1, cfg.latency_max_ns.max(2), cfg.latency_digits)
            .map_err(|_| Error::SinkSetting {
                what: "latency_max_ns",
                value: cfg.latency_max_ns,
                range: "2 ns to 2^62 ns",
            })?;
        let max_id = *ids.iter().max().expect("not empty");
        if max_id > MAX_STREAM_ID {
            return Err(Error::StreamIdTooLarge {
                id: max_id,
                max: MAX_STREAM_ID,
            });
        }
        let mut index = vec![NONE; max_id as usize + 1].into_boxed_slice();
        for (i, &id) in ids.iter().enumerate() {
            if index[id as usize] != NONE {
                return Err(Error::DuplicateStream { id });
            }
            index[id as usize] = i as u32;
        }
        let streams = ids
            .iter()
            .map(|&id| StreamState {
                id,
                received: 0,
                bytes: 0,
                duplicated: 0,
                reordered: 0,
                too_old: 0,
                highest: 0,
                window: Window::new(cfg.window),
                hist: hist.clone(),
                lat_min: u64::MAX,
                lat_max: 0,
            })
            .collect();
        Ok(Sink {
            pool,
            index,
            streams,
            unsigned: 0,
            unknown: 0,
            frames: 0,
            recycle: None,
            clock: cfg.clock,
            rx,
        })
    }

    /// Hand received slots to `recycle` (a generator's recycle ring) instead of freeing them
    /// to the pool; what does not fit is freed.
    pub fn with_recycle(mut self, recycle: Producer) -> Sink<R> {
        self.recycle = Some(recycle);
        self
    }

    /// The receive queue (for a backend's own counters).
    pub fn queue(&self) -> &R {
        &self.rx
    }

    /// Receive and count one burst; returns the frames received.
    pub fn poll(&mut self) -> usize {
        let mut v = PktVec::new();
        let n = self.rx.rx_burst(&self.pool, &mut v, VECTOR);
        if n == 0 {
            return 0;
        }
        let now = self.clock.now_ns();
        self.count(&v, now);
        if let Some(r) = &mut self.recycle {
            r.push_burst(&mut v);
        }
        self.pool.free_all(&mut v);
        n
    }

    /// Count the frames of `v`, received at `now`.
    #[inline]
    fn count(&mut self, v: &PktVec, now: u64) {
        let pool = &*self.pool;
        for p in v.iter().take(PREFETCH) {
            pool.prefetch(p);
        }
        for (i, p) in v.iter().enumerate() {
            if let Some(q) = v.get(i + PREFETCH) {
                pool.prefetch(q);
            }
            let f = pool.frame(p);
            let Some(sig) = signature::parse(f) else {
                self.unsigned += 1;
                continue;
            };
            let slot = self.index.get(sig.stream as usize).copied().unwrap_or(NONE);
            let Some(s) = self.streams.get_mut(slot as usize) else {
                self.unknown += 1;
                continue;
            };
            let seq = if s.received == 0 {
                sig.seq
            } else {
                extend48(s.highest, sig.seq)
            };
            s.seq(seq);
            s.bytes += (f.len() + FCS_LEN) as u64;
            let lat = latency_ns(now, sig.tx_ns);
            s.hist.saturating_record(lat);
            s.lat_min = s.lat_min.min(lat);
            s.lat_max = s.lat_max.max(lat);
        }
        self.frames += v.len() as u64;
    }

    /// Poll for `d` by the sink's clock; returns the frames received.
    pub fn run_for(&mut self, d: Duration) -> u64 {
        let end = self.clock.now_ns() + d.as_nanos() as u64;
        let mut n = 0;
        while self.clock.now_ns() < end {
            n += self.poll() as u64;
        }
        n
    }

    /// Poll until `stop` is set (checked once per burst); returns the frames received.
    pub fn run_until(&mut self, stop: &AtomicBool) -> u64 {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            n += self.poll() as u64;
        }
        n
    }

    /// After the generator stopped: poll until nothing has arrived for `idle`, but at most
    /// for `limit`. Returns true if the queue went quiet (the DUT drained), false if frames
    /// were still arriving at `limit`.
    pub fn drain(&mut self, idle: Duration, limit: Duration) -> bool {
        let start = self.clock.now_ns();
        let (idle, limit) = (idle.as_nanos() as u64, limit.as_nanos() as u64);
        let mut last = start;
        loop {
            let now = self.clock.now_ns();
            if self.poll() > 0 {
                last = now;
            } else if now - last >= idle {
                return true;
            }
            if now - start >= limit {
                return false;
            }
        }
    }

    /// The counters. **Valid only after the generator stopped and the DUT drained** (see
    /// [`Sink::drain`] and the module docs): read earlier, frames still in flight count as
    /// lost.
    pub fn snapshot(&self) -> SinkSnapshot {
        SinkSnapshot {
            streams: self
                .streams
                .iter()
                .map(|s| {
                    let h = &s.hist;
                    let q = |x| h.value_at_quantile(x);
                    let latency = if h.is_empty() {
                        Latency::default()
                    } else {
                        Latency {
                            count: h.len(),
                            min: s.lat_min,
                            mean: h.mean(),
                            p50: q(0.5),
                            p90: q(0.9),
                            p99: q(0.99),
                            p999: q(0.999),
                            max: s.lat_max,
                        }
                    };
                    StreamRx {
                        id: s.id,
                        received: s.received,
                        bytes: s.bytes,
                        duplicated: s.duplicated,
                        reordered: s.reordered,
                        too_old: s.too_old,
                        highest_seq: (s.received > 0).then_some(s.highest),
                        latency,
                        histogram: s.hist.clone(),
                    }
                })
                .collect(),
            unsigned: self.unsigned,
            unknown_stream: self.unknown,
            frames: self.frames,
        }
    }

    /// Zero every counter, window and histogram: the start of a new trial. (Take the
    /// snapshot first, and start the trial only after the previous one drained.)
    pub fn reset(&mut self) {
        for s in self.streams.iter_mut() {
            s.reset();
        }
        self.unsigned = 0;
        self.unknown = 0;
        self.frames = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use vrhost_dataplane::ring::ring;
    use vrhost_wire::EthernetAddress;

    use super::*;
    use crate::clock::SimClock;
    use crate::frames::{Frames, Stream};
    use crate::generator::{GenConfig, Generator};
    use crate::mem::{RingTx, loopback};
    use crate::rate::Rate;
    use crate::signature::MASK48;

    fn stream(id: u32) -> Stream {
        Stream::new(
            id,
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            IpAddr::from([10, 0, 0, 1]),
            IpAddr::from([10, 1, 0, 1]),
        )
    }

    /// A sink on a sim clock fed through a ring the test fills.
    struct Rig {
        pool: Arc<Pool>,
        feed: RingTx,
        sink: Sink<crate::mem::RingRx>,
        clock: SimClock,
        frames: Vec<Frames>,
        buf: Vec<u8>,
    }

    impl Rig {
        fn new(ids: &[u32], window: u64) -> Rig {
            let pool = Pool::new(4096);
            let (feed, rx) = loopback(4096);
            let clock = SimClock::new(10_000_000_000);
            let cfg = SinkConfig {
                window,
                clock: Clock::Sim(clock.clone()),
                ..SinkConfig::default()
            };
            let sink = Sink::new(pool.clone(), Box::new(rx), ids, cfg).unwrap();
            let frames = ids
                .iter()
                .map(|&id| Frames::new(&stream(id)).unwrap())
                .collect();
            Rig {
                pool,
                feed,
                sink,
                clock,
                frames,
                buf: vec![0; 2048],
            }
        }

        /// Queue frame `seq` of the rig's `i`th stream, sent `age_ns` before now.
        fn send(&mut self, i: usize, seq: u64, age_ns: u64) {
            let len = self.frames[i].write(&mut self.buf, seq, self.clock.now_ns() - age_ns);
            let p = self.pool.alloc_frame(&self.buf[..len]).unwrap();
            self.feed.0.push(p).unwrap();
        }

        fn raw(&mut self, frame: &[u8]) {
            let p = self.pool.alloc_frame(frame).unwrap();
            self.feed.0.push(p).unwrap();
        }

        fn poll_all(&mut self) {
            while self.sink.poll() > 0 {}
        }
    }

    #[test]
    fn exact_loss_reordering_and_duplication() {
        // 10 000 frames of a stream, of which: every 7th lost (1429 of 0..10000), pairs
        // (100k+50, 100k+51) swapped (100 reordered), every 13th sent twice right after,
        // and five stragglers delivered again at the very end (duplicates of old frames).
        let mut r = Rig::new(&[5], 1 << 16);
        let mut order = Vec::new();
        let mut seq = 0u64;
        while seq < 10_000 {
            if seq % 100 == 50 {
                order.extend([seq + 1, seq]);
                seq += 2;
                continue;
            }
            order.push(seq);
            if seq.is_multiple_of(13) {
                order.push(seq);
            }
            seq += 1;
        }
        let lost: std::collections::HashSet<u64> = (0..10_000).filter(|s| s % 7 == 0).collect();
        order.retain(|s| !lost.contains(s));
        order.extend([1, 2, 3, 4, 5]);
        // What the injected patterns must produce, computed from `order` itself.
        let sent_unique = 10_000 - lost.len() as u64;
        let dups = order.len() as u64 - sent_unique;
        let mut seen = std::collections::HashSet::new();
        let mut reord = 0;
        let mut hi = None;
        for &s in &order {
            if seen.insert(s) && hi.is_some_and(|h| s < h) {
                reord += 1;
            }
            hi = hi.max(Some(s));
        }
        assert_eq!(lost.len(), 1429);
        for chunk in order.chunks(1000) {
            for &s in chunk {
                r.send(0, s, 1_000);
            }
            r.poll_all();
        }
        let snap = r.sink.snapshot();
        let s = snap.stream(5).unwrap();
        assert_eq!(s.received, order.len() as u64);
        assert_eq!(s.duplicated, dups);
        assert_eq!(s.reordered, reord);
        assert_eq!(s.too_old, 0);
        assert_eq!(s.lost(10_000), 1429);
        assert_eq!(s.highest_seq, Some(9_999));
        assert_eq!(s.gaps(), 1429);
        assert_eq!((snap.unsigned, snap.unknown_stream), (0, 0));
        // The patterns by count, independently of the loop above: 5 stragglers plus one
        // duplicate per multiple of 13 that is neither lost nor a swapped pair's member.
        let dup13 = (0..10_000u64)
            .filter(|s| s % 13 == 0 && s % 7 != 0 && !matches!(s % 100, 50 | 51))
            .count() as u64;
        assert_eq!(dups, dup13 + 5);
        let swapped_both_kept = (0..100u64)
            .filter(|k| (100 * k + 50) % 7 != 0 && (100 * k + 51) % 7 != 0)
            .count();
        assert_eq!(reord, swapped_both_kept as u64);
        assert_eq!(r.pool.available(), 4096, "every frame freed");
    }

    #[test]
    fn every_kind_of_frame_is_counted_in_its_place() {
        let mut r = Rig::new(&[0, 3], 64);
        r.send(0, 0, 100);
        r.send(1, 0, 100);
        r.send(1, 0, 100); // duplicate of the last
        r.send(1, 2, 100);
        r.send(1, 1, 100); // reordered
        r.send(1, 1, 100); // duplicate of a reordered one
        r.send(1, 100, 100); // jump past the window
        r.send(1, 3, 100); // 97 behind, window 64: too old to tell
        r.send(1, 99, 100); // reordered, inside the window
        r.raw(&[0u8; 60]); // no signature
        let mut other = Frames::new(&stream(2)).unwrap();
        let len = other.write(&mut r.buf, 0, 0);
        let f = r.buf[..len].to_vec();
        r.raw(&f); // stream 2: unknown
        r.poll_all();
        let snap = r.sink.snapshot();
        assert_eq!(
            (snap.unsigned, snap.unknown_stream, snap.frames),
            (1, 1, 11)
        );
        let a = snap.stream(0).unwrap();
        assert_eq!(
            (a.received, a.duplicated, a.reordered, a.lost(1)),
            (1, 0, 0, 0)
        );
        let b = snap.stream(3).unwrap();
        assert_eq!(b.received, 8);
        assert_eq!(b.duplicated, 2);
        assert_eq!(b.reordered, 3);
        assert_eq!(b.too_old, 1);
        // 0,1,2,3,99,100 are the distinct frames.
        assert_eq!(b.unique(), 6);
        assert_eq!(b.lost(101), 95);
        assert_eq!(b.gaps(), 95);
    }

    #[test]
    fn duplicates_are_found_across_window_wraps_and_gaps() {
        // Window 64; 1000 frames in order with the first of every 10 lost, each 3rd frame
        // duplicated 5 later; positions wrap the window 15 times.
        let mut r = Rig::new(&[1], 64);
        let mut dups = 0;
        for s in 0..1000u64 {
            if s % 10 != 0 {
                r.send(0, s, 10);
            }
            if s >= 5 && (s - 5) % 3 == 0 && (s - 5) % 10 != 0 {
                r.send(0, s - 5, 10);
                dups += 1;
            }
            if s % 100 == 0 {
                r.poll_all();
            }
        }
        r.poll_all();
        let s = r.sink.snapshot().streams[0].clone();
        assert_eq!(s.duplicated, dups);
        assert_eq!(s.reordered, 0);
        assert_eq!(s.lost(1000), 100);
        // A skipped sequence number arriving later is reordered, not a duplicate, even
        // though its bit position was used by an earlier sequence number.
        r.send(0, 990, 10);
        r.poll_all();
        let s = r.sink.snapshot().streams[0].clone();
        assert_eq!((s.duplicated, s.reordered, s.lost(1000)), (dups, 1, 99));
    }

    #[test]
    fn latency_percentiles_are_exact_enough() {
        // 1000 frames with latencies 1..=1000 µs: percentiles within the histogram's 0.1 %.
        let mut r = Rig::new(&[0], 1 << 16);
        for i in 0..1000u64 {
            r.send(0, i, (i + 1) * 1_000);
            if i % 200 == 199 {
                r.poll_all();
            }
        }
        let l = r.sink.snapshot().streams[0].latency;
        assert_eq!(l.count, 1000);
        assert_eq!((l.min, l.max), (1_000, 1_000_000));
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 1e-3;
        assert!(near(l.p50, 500_000), "{l:?}");
        assert!(near(l.p90, 900_000), "{l:?}");
        assert!(near(l.p99, 990_000), "{l:?}");
        assert!(near(l.p999, 999_000), "{l:?}");
        assert!((l.mean - 500_500.0).abs() < 500.0, "{l:?}");
    }

    #[test]
    fn latency_is_right_across_the_48_bit_time_wrap_and_sequences_widen() {
        let mut r = Rig::new(&[0], 64);
        r.clock.set((3 << 48) + 500);
        r.send(0, MASK48 - 1, 1_000); // sent before the wrap, received after
        r.send(0, MASK48, 0);
        r.send(0, 1 << 48, 0); // goes out as 0
        r.poll_all();
        let s = r.sink.snapshot().streams[0].clone();
        assert_eq!((s.latency.min, s.latency.max), (0, 1_000));
        assert_eq!(s.highest_seq, Some(1 << 48));
        assert_eq!((s.reordered, s.duplicated), (0, 0));
    }

    #[test]
    fn generator_to_sink_through_a_mem_port_gets_every_frame() {
        // The end-to-end path: generator → mem ring → sink (recycling slots back to the
        // generator), 4 streams at 2 Mpps each for 50 ms of simulated time.
        let pool = Pool::new(4096);
        let clock = SimClock::new(1 << 40);
        let streams: Vec<_> = (0..4)
            .map(|i| {
                let mut s = stream(i);
                s.rate = Rate::Pps(2e6);
                s.flows.dst.count = 100;
                s
            })
            .collect();
        let (tx, rx) = loopback(1024);
        let (back_tx, back_rx) = ring(1024);
        let mut g = Generator::new(
            pool.clone(),
            Box::new(tx),
            &streams,
            GenConfig {
                clock: Clock::Sim(clock.clone()),
                ..GenConfig::default()
            },
        )
        .unwrap()
        .with_recycle(back_rx);
        let cfg = SinkConfig {
            clock: Clock::Sim(clock.clone()),
            ..SinkConfig::default()
        };
        let mut sink = Sink::new(pool.clone(), Box::new(rx), &[0, 1, 2, 3], cfg)
            .unwrap()
            .with_recycle(back_tx);
        for _ in 0..10_000 {
            clock.advance(5_000);
            g.step();
            clock.advance(700); // "transit"
            while sink.poll() > 0 {}
        }
        let gs = g.stats();
        let ss = sink.snapshot();
        for i in 0..4 {
            let (tx, rx) = (gs.stream(i).unwrap(), ss.stream(i).unwrap());
            assert!(
                (tx.sent as f64 - 2e6 * 0.057).abs() < 2e6 * 0.057 * 0.01,
                "{}",
                tx.sent
            );
            assert_eq!(rx.received, tx.sent);
            assert_eq!(rx.bytes, tx.bytes);
            assert_eq!((rx.lost(tx.sent), rx.duplicated, rx.reordered), (0, 0, 0));
            assert_eq!(rx.latency.max, 700);
            assert_eq!(rx.latency.min, 700);
        }
        assert_eq!(ss.frames, gs.sent());
        drop(sink);
        drop(g);
    }

    #[test]
    fn bad_settings_are_refused() {
        let pool = Pool::new(4);
        let mk = |ids: &[u32], cfg: SinkConfig| {
            Sink::new(pool.clone(), Box::new(loopback(4).1), ids, cfg).map(|_| ())
        };
        assert_eq!(mk(&[], SinkConfig::default()), Err(Error::NoStreams));
        assert_eq!(
            mk(&[1, 1], SinkConfig::default()),
            Err(Error::DuplicateStream { id: 1 })
        );
        assert!(matches!(
            mk(&[MAX_STREAM_ID + 1], SinkConfig::default()),
            Err(Error::StreamIdTooLarge { .. })
        ));
        let bad = SinkConfig {
            window: 100,
            ..SinkConfig::default()
        };
        let e = mk(&[0], bad).unwrap_err().to_string();
        assert!(e.contains("window") && e.contains("100"), "{e}");
    }
}
