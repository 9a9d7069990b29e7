//! The generator: streams' frames, paced, stamped and sent into any [`TxQueue`].
//!
//! One [`Generator`] runs on one thread (pin it to a core) and owns one transmit queue; for
//! more cores or queues, run several, each with its own streams. Per [`Generator::step`]:
//! read the clock once, ask each stream's pacer how many frames are due, take that many
//! buffers (from the recycle ring if there is one, else the pool), write each stream's
//! frames from its templates (see [`frames`](crate::frames)) with consecutive sequence
//! numbers and the step's time, and hand full vectors of up to 256 to the queue — at most
//! [`STEP_MAX`] frames a step, the streams taking turns to come first. Nothing
//! per packet allocates, locks or makes a system call; the queue's `tx_burst` is the only
//! call per vector.
//!
//! **tx-full.** A queue may take fewer frames than offered (its ring is full). The rest are
//! dropped, as the data plane drops at a full tx ring, and counted per stream as `tx_full`;
//! their sequence numbers are taken back, so that each stream's sent frames carry exactly
//! the sequence numbers `0..sent` and every gap the sink sees is the DUT's doing. Whose loss
//! `tx_full` is depends on the queue: for an in-process DUT's mem rx ring it is the DUT's
//! (its rx ring overflowed, as a NIC's would); for AF_XDP or AF_PACKET it is the
//! generator's own port, and the offered rate was lower than asked.
//!
//! **Timestamps** are taken when a vector starts being built (the clock is read per vector,
//! not per frame; see [`clock`](crate::clock)), so a frame's latency includes up to one
//! vector's build time: ~3 µs at full speed (256 × ~12 ns, docs/perf.md, "vrbench's tester"), ~12 ns × the burst
//! size at a paced rate.
//!
//! **Rates not met.** A stream whose pacer overflowed (`missed` > 0) was not offered at its
//! rate, because the generator could not keep up or the thread was preempted; `no_buffer`
//! counts frames not built because the pool was empty (their tokens are returned, so they
//! are built late rather than never, within the bucket's depth).

use std::sync::Arc;
use std::time::Duration;

use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::ring::Consumer;
use vrhost_dataplane::{HEADROOM, Meta, PktVec, Pool, VECTOR};

use crate::clock::Clock;
use crate::error::Error;
use crate::frames::{FrameSize, Frames, Stream};
use crate::rate::{DEFAULT_INTERVAL_NS, DEPTH_BURSTS, Pacer, Rate};

/// Most streams one generator runs (stream indexes are kept per vector slot as `u16`).
pub const MAX_STREAMS: usize = 1 << 16;

/// Most frames one [`Generator::step`] builds: four vectors. Each unlimited stream is
/// granted a vector a step, so without a bound a step of 300 of them built 76,800 frames
/// and took milliseconds, which the in-process tester took for its thread being held off
/// (`vrbench measure --vrs 300` reported an unpaced maximum of 1.27 Gpps and searched up
/// to 0.02 Mpps). Bounded, a step stays a few microseconds however many streams there are.
pub const STEP_MAX: usize = 4 * VECTOR;

/// How a generator runs.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Poll interval bursts are sized to (see [`rate`](crate::rate)).
    pub interval_ns: u64,
    /// Depth of each stream's token bucket, in bursts: how much a stalled generator catches
    /// up before it counts frames as `missed` (see [`rate`](crate::rate) for why shallow).
    pub bucket_bursts: u64,
    /// Where time comes from.
    pub clock: Clock,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            interval_ns: DEFAULT_INTERVAL_NS,
            bucket_bursts: DEPTH_BURSTS,
            clock: Clock::Monotonic,
        }
    }
}

/// One stream's sending state.
#[derive(Debug)]
struct StreamTx {
    frames: Frames,
    pacer: Pacer,
    rate: Rate,
    size: FrameSize,
    vr: u32,
    /// The next sequence number = frames sent so far.
    seq: u64,
    bytes: u64,
    tx_full: u64,
}

/// One stream's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTxStats {
    /// Stream id.
    pub id: u32,
    /// The stream's VR.
    pub vr: u32,
    /// The asked rate.
    pub rate: Rate,
    /// The frame size.
    pub size: FrameSize,
    /// Frames the queue took (they carry sequence numbers `0..sent`).
    pub sent: u64,
    /// Their bytes on the wire, FCS included.
    pub bytes: u64,
    /// Frames built but refused by a full queue.
    pub tx_full: u64,
    /// Frames the rate asked for that were never built (the pacer's bucket overflowed).
    pub missed: u64,
}

/// A generator's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct GenStats {
    /// Per stream, in the order given.
    pub streams: Vec<StreamTxStats>,
    /// Frames not built because the pool had no free slot.
    pub no_buffer: u64,
    /// From the first step to the last (what rates are computed over).
    pub elapsed_ns: u64,
}

impl GenStats {
    /// Frames sent, all streams.
    pub fn sent(&self) -> u64 {
        self.streams.iter().map(|s| s.sent).sum()
    }

    /// Frames refused by a full queue, all streams.
    pub fn tx_full(&self) -> u64 {
        self.streams.iter().map(|s| s.tx_full).sum()
    }

    /// Frames the rates asked for but never built, all streams.
    pub fn missed(&self) -> u64 {
        self.streams.iter().map(|s| s.missed).sum()
    }

    /// The stream with id `id`.
    pub fn stream(&self, id: u32) -> Option<&StreamTxStats> {
        self.streams.iter().find(|s| s.id == id)
    }
}

/// A traffic generator over one transmit queue (see the module docs).
pub struct Generator<Q: TxQueue + ?Sized = dyn TxQueue> {
    pool: Arc<Pool>,
    streams: Box<[StreamTx]>,
    /// Stream index of each packet of the vector being built.
    owner: Box<[u16; VECTOR]>,
    recycle: Option<Consumer>,
    clock: Clock,
    interval_ns: u64,
    bucket_bursts: u64,
    /// First and latest step (None before the first).
    first_ns: Option<u64>,
    last_ns: u64,
    no_buffer: u64,
    /// The stream a step serves first: the one the last step ran out of budget at.
    next: usize,
    tx: Box<Q>,
}

impl<Q: TxQueue + ?Sized> core::fmt::Debug for Generator<Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Generator")
            .field("streams", &self.streams.len())
            .field("recycle", &self.recycle.is_some())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl<Q: TxQueue + ?Sized> Generator<Q> {
    /// A generator of `streams` into `tx`, taking buffers from `pool`. Every stream is
    /// validated (the first bad one's error is returned) and ids must be unique.
    pub fn new(
        pool: Arc<Pool>,
        tx: Box<Q>,
        streams: &[Stream],
        cfg: GenConfig,
    ) -> Result<Generator<Q>, Error> {
        if streams.is_empty() {
            return Err(Error::NoStreams);
        }
        if streams.len() > MAX_STREAMS {
            return Err(Error::TooManyStreams {
                count: streams.len(),
                max: MAX_STREAMS,
            });
        }
        let mut ids: Vec<u32> = streams.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::DuplicateStream { id: w[0] });
        }
        let streams = streams
            .iter()
            .map(|s| {
                Ok(StreamTx {
                    frames: Frames::new(s)?,
                    pacer: Pacer::new(s.rate, cfg.interval_ns, 0)?.with_depth(cfg.bucket_bursts),
                    rate: s.rate,
                    size: s.size,
                    vr: s.vr,
                    seq: 0,
                    bytes: 0,
                    tx_full: 0,
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Generator {
            pool,
            streams,
            owner: Box::new([0; VECTOR]),
            recycle: None,
            clock: cfg.clock,
            interval_ns: cfg.interval_ns,
            bucket_bursts: cfg.bucket_bursts,
            first_ns: None,
            last_ns: 0,
            no_buffer: 0,
            next: 0,
            tx,
        })
    }

    /// Take buffers from `recycle` before the pool: a sink (or a test's consumer) hands
    /// back the slots it is done with, sparing the pool's shared free list.
    pub fn with_recycle(mut self, recycle: Consumer) -> Generator<Q> {
        self.recycle = Some(recycle);
        self
    }

    /// The transmit queue (for a backend's own counters).
    pub fn queue(&self) -> &Q {
        &self.tx
    }

    /// Change stream `id`'s rate from now on (its bucket starts empty; the other streams
    /// and the counters go on).
    pub fn set_rate(&mut self, id: u32, rate: Rate) -> Result<(), Error> {
        let now = self.clock.now_ns();
        let s = self
            .streams
            .iter_mut()
            .find(|s| s.frames.id() == id)
            .ok_or(Error::UnknownStream { id })?;
        s.pacer = Pacer::new(rate, self.interval_ns, now)?.with_depth(self.bucket_bursts);
        s.rate = rate;
        Ok(())
    }

    /// Zero every counter and sequence number and restart the pacers at the next step: the
    /// start of a new trial. (Read [`Generator::stats`] first.)
    pub fn reset(&mut self) {
        for s in self.streams.iter_mut() {
            s.seq = 0;
            s.bytes = 0;
            s.tx_full = 0;
            s.pacer = Pacer::new(s.rate, self.interval_ns, 0)
                .expect("rate validated before")
                .with_depth(self.bucket_bursts);
        }
        self.no_buffer = 0;
        self.next = 0;
        self.first_ns = None;
    }

    /// The generator's thread was off the CPU for a while (`now` is when it got back): pace
    /// on from now instead of owing the gap. Frames the rates asked for during the gap are
    /// neither sent in a catch-up burst nor counted as missed; the caller adds the gap to
    /// the trial's length. Why: a SCHED_FIFO tester that spins a whole trial is stopped by
    /// the kernel's real-time throttling for 50 ms of every second (`sched_rt_runtime_us`
    /// = 950,000), which would otherwise read as a 5 % shortfall of every long trial.
    pub fn resume_after_gap(&mut self) {
        let now = self.clock.now_ns();
        for s in self.streams.iter_mut() {
            s.pacer.restart(now);
        }
    }

    /// End the run at `end_ns` (by the generator's clock): what each stream's rate asked
    /// for by then and was never sent counts as missed ([`Pacer::finish`]), so a sender
    /// held off across the end of its run still reports the shortfall.
    pub fn finish(&mut self, end_ns: u64) {
        if self.first_ns.is_none() {
            return;
        }
        for s in self.streams.iter_mut() {
            s.pacer.finish(end_ns);
        }
    }

    /// Counters so far. Sent counts are final once the generator has stopped stepping.
    pub fn stats(&self) -> GenStats {
        GenStats {
            streams: self
                .streams
                .iter()
                .map(|s| StreamTxStats {
                    id: s.frames.id(),
                    vr: s.vr,
                    rate: s.rate,
                    size: s.size,
                    sent: s.seq,
                    bytes: s.bytes,
                    tx_full: s.tx_full,
                    missed: s.pacer.missed(),
                })
                .collect(),
            no_buffer: self.no_buffer,
            elapsed_ns: self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f)),
        }
    }

    /// Send whatever is due now; returns the frames the queue took.
    pub fn step(&mut self) -> usize {
        let now = self.clock.now_ns();
        self.step_at(now)
    }

    /// Run for `d` by the generator's clock, stepping as often as it can (sleeping only
    /// when the next burst is more than 200 µs away). Returns the frames sent.
    ///
    /// With a simulated clock something else must advance it, or this never returns.
    pub fn run_for(&mut self, d: Duration) -> u64 {
        let end = self.clock.now_ns() + d.as_nanos() as u64;
        let mut sent = 0;
        loop {
            let now = self.clock.now_ns();
            if now >= end {
                return sent;
            }
            sent += self.step_at(now) as u64;
            if matches!(self.clock, Clock::Monotonic) {
                let wait = self.ns_until_due(now).min(end - now);
                if wait > 200_000 {
                    std::thread::sleep(Duration::from_nanos(wait - 100_000));
                }
            }
        }
    }

    /// Nanoseconds until some stream has a burst due.
    fn ns_until_due(&self, now: u64) -> u64 {
        self.streams
            .iter()
            .map(|s| s.pacer.ns_until_burst(now))
            .min()
            .unwrap_or(0)
    }

    /// [`Generator::step`] at a given time (from the generator's clock).
    ///
    /// At most [`STEP_MAX`] frames a step, the streams served in turn from where the last
    /// step ran out (`next`): what a stream was granted and not built goes back to its
    /// bucket for the next step.
    fn step_at(&mut self, now: u64) -> usize {
        if self.first_ns.is_none() {
            self.first_ns = Some(now);
            for s in self.streams.iter_mut() {
                s.pacer.restart(now);
            }
        }
        self.last_ns = now;
        let mut v = PktVec::new();
        let mut ts = now;
        let mut sent = 0;
        let mut budget = STEP_MAX;
        let n = self.streams.len();
        let first = self.next;
        for si in (first..n).chain(0..first) {
            let mut due = self.streams[si].pacer.grant(now);
            if due >= budget {
                // The last this step serves: the next starts with the stream after it, or
                // with it again if it got less than its grant.
                self.next = if due > budget { si } else { (si + 1) % n };
                self.streams[si].pacer.refund(due - budget);
                due = budget;
            }
            budget -= due;
            while due > 0 {
                let k = due.min(VECTOR - v.len());
                let built = self.build(&mut v, si, k, ts);
                due -= built;
                if built < k {
                    // Pool empty: give the tokens back, build them at a later step.
                    self.streams[si].pacer.refund(due);
                    self.no_buffer += (k - built) as u64;
                    break;
                }
                if v.is_full() {
                    sent += self.flush(&mut v);
                    ts = self.clock.now_ns();
                }
            }
            if budget == 0 {
                break;
            }
        }
        if !v.is_empty() {
            sent += self.flush(&mut v);
        }
        sent
    }

    /// Append up to `k` frames of stream `si` to `v`; returns how many (fewer if out of
    /// buffers).
    #[inline]
    fn build(&mut self, v: &mut PktVec, si: usize, k: usize, ts: u64) -> usize {
        let start = v.len();
        if let Some(r) = &mut self.recycle {
            r.pop_burst(v, k);
        }
        while v.len() < start + k {
            match self.pool.alloc() {
                Some(p) => v.push(p),
                None => break,
            }
        }
        let pool = &*self.pool;
        let s = &mut self.streams[si];
        let built = v.len() - start;
        self.owner[start..start + built].fill(si as u16);
        let mut seq = s.seq;
        let mut bytes = 0;
        for p in v[start..].iter_mut() {
            let (m, slot) = pool.slot_mut(p);
            let len = s.frames.write(&mut slot[HEADROOM..], seq, ts);
            *m = Meta {
                off: HEADROOM as u16,
                len: len as u16,
                ..Meta::default()
            };
            seq += 1;
            bytes += (len + crate::frames::FCS_LEN) as u64;
        }
        s.seq = seq;
        s.bytes += bytes;
        built
    }

    /// Hand `v` to the queue; drop and count what it refused (taking back its sequence
    /// numbers, see the module docs). Returns how many it took.
    #[inline]
    fn flush(&mut self, v: &mut PktVec) -> usize {
        let n = v.len();
        let took = self.tx.tx_burst(&self.pool, v);
        if took < n {
            self.refused(v, took);
        }
        took
    }

    #[cold]
    fn refused(&mut self, v: &mut PktVec, took: usize) {
        for (j, p) in v.drain(..).enumerate() {
            let s = &mut self.streams[usize::from(self.owner[took + j])];
            // The refused frames are each stream's last ones in the vector: its highest
            // sequence numbers, which the next frames reuse.
            s.seq -= 1;
            s.bytes -= u64::from(self.pool.meta(&p).len) + crate::frames::FCS_LEN as u64;
            s.tx_full += 1;
            self.pool.free(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use vrhost_dataplane::ring::ring;
    use vrhost_wire::EthernetAddress;

    use super::*;
    use crate::clock::SimClock;
    use crate::mem::{RingRx, RingTx, loopback};
    use crate::signature;

    const SRC_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    pub(crate) fn stream(id: u32, rate: Rate) -> Stream {
        let mut s = Stream::new(
            id,
            SRC_MAC,
            EthernetAddress([2, 0, 0, 0, 1, id as u8]),
            IpAddr::from([10, 0, 0, 1]),
            IpAddr::from([10, 1, id as u8, 1]),
        );
        s.rate = rate;
        s.vr = id;
        s
    }

    fn sim_gen(
        pool: &Arc<Pool>,
        streams: &[Stream],
        ring_size: usize,
    ) -> (Generator<RingTx>, RingRx, SimClock) {
        let clock = SimClock::new(1_000_000_000);
        let (tx, rx) = loopback(ring_size);
        let g = Generator::new(
            pool.clone(),
            Box::new(tx),
            streams,
            GenConfig {
                clock: Clock::Sim(clock.clone()),
                ..GenConfig::default()
            },
        )
        .unwrap();
        (g, rx, clock)
    }

    /// Pop everything from `rx`; return (stream, seq, tx time) of each frame and free it.
    fn drain(pool: &Pool, rx: &mut RingRx) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        let mut v = PktVec::new();
        while rx.0.pop_burst(&mut v, VECTOR) > 0 {
            for p in v.drain(..) {
                let s = signature::parse(pool.frame(&p)).expect("signed");
                out.push((s.stream, s.seq, s.tx_ns));
                pool.free(p);
            }
        }
        out
    }

    #[test]
    fn paced_streams_get_their_rates_to_the_frame_on_a_stepped_clock() {
        // Three streams at 1, 5 and 20 Mpps for 0.5 s of simulated time, stepped every
        // 5 µs: each gets its rate within one burst (far inside 1 %).
        let pool = Pool::new(8192);
        let rates = [1e6, 5e6, 20e6];
        let streams: Vec<_> = (0..3)
            .map(|i| stream(i, Rate::Pps(rates[i as usize])))
            .collect();
        let (mut g, mut rx, clock) = sim_gen(&pool, &streams, 4096);
        let mut per = [0u64; 3];
        let mut next = [0u64; 3];
        for _ in 0..100_000 {
            clock.advance(5_000);
            g.step();
            for (id, seq, t) in drain(&pool, &mut rx) {
                let i = id as usize;
                assert_eq!(seq, next[i], "stream {id} in order from 0");
                assert_eq!(t, clock.now_ns() & signature::MASK48);
                next[i] += 1;
                per[i] += 1;
            }
        }
        let st = g.stats();
        assert_eq!(st.elapsed_ns, 500_000_000 - 5_000);
        for i in 0..3 {
            let want = rates[i] * 0.5;
            let err = (per[i] as f64 - want).abs() / want;
            assert!(err < 0.01, "stream {i}: {} of {want}", per[i]);
            assert!(
                want - (per[i] as f64) <= 256.0,
                "within a burst: {}",
                per[i]
            );
            assert_eq!(st.streams[i].sent, per[i]);
            assert_eq!(st.streams[i].bytes, per[i] * 64);
            assert_eq!((st.streams[i].tx_full, st.streams[i].missed), (0, 0));
        }
        assert_eq!(pool.available(), 8192, "every slot back");
    }

    #[test]
    fn a_step_builds_at_most_step_max_frames_and_serves_many_streams_in_turn() {
        // 300 unlimited streams, each granted a vector a step: a step builds STEP_MAX
        // frames, and over 300 × 256 ÷ STEP_MAX steps every stream gets exactly a vector,
        // every frame with its stream's next sequence number.
        let pool = Pool::new(4 * STEP_MAX);
        let streams: Vec<_> = (0..300).map(|i| stream(i, Rate::Unlimited)).collect();
        let (mut g, mut rx, _clock) = sim_gen(&pool, &streams, 2 * STEP_MAX);
        let steps = 300 * VECTOR / STEP_MAX;
        let mut next_seq = vec![0u64; 300];
        for _ in 0..steps {
            assert_eq!(g.step(), STEP_MAX);
            for (stream, seq, _) in drain(&pool, &mut rx) {
                let want = &mut next_seq[stream as usize];
                assert_eq!(seq, *want, "stream {stream}");
                *want += 1;
            }
        }
        assert!(
            next_seq.iter().all(|&n| n == VECTOR as u64),
            "per stream: {next_seq:?}"
        );
        assert_eq!(g.stats().sent(), (300 * VECTOR) as u64);
    }

    #[test]
    fn a_run_ending_while_the_sender_was_away_counts_the_frames_it_owed() {
        // 1 Mpps, stepped every 10 µs for 100 µs, then nothing until the run's end at 1 ms:
        // the 900 frames due meanwhile were never sent and count as missed (less the one
        // burst of 10 that may be the edge's). Both streams alike.
        let pool = Pool::new(8192);
        let streams = [stream(0, Rate::Pps(1e6)), stream(1, Rate::Pps(1e6))];
        let (mut g, mut rx, clock) = sim_gen(&pool, &streams, 4096);
        let t0 = clock.now_ns();
        g.step();
        for _ in 0..10 {
            clock.advance(10_000);
            g.step();
        }
        let sent = drain(&pool, &mut rx).len();
        assert_eq!(sent, 200);
        g.finish(t0 + 1_000_000);
        let st = g.stats();
        for s in &st.streams {
            assert_eq!((s.sent, s.missed), (100, 890), "stream {}", s.id);
        }
        // Never stepped: nothing was asked for, nothing missed.
        let (mut g, _rx, clock) = sim_gen(&pool, &streams, 4096);
        g.finish(clock.now_ns() + 1_000_000);
        assert!(g.stats().streams.iter().all(|s| s.missed == 0));
    }

    #[test]
    fn a_full_queue_drops_counts_and_takes_back_sequence_numbers() {
        // Two unlimited streams into a 64-frame ring: the first step builds 256 of each and
        // the ring takes 64 (all of stream 0). Sequence numbers stay contiguous per stream.
        let pool = Pool::new(2048);
        let (mut g, mut rx, clock) = sim_gen(
            &pool,
            &[stream(0, Rate::Unlimited), stream(1, Rate::Unlimited)],
            64,
        );
        assert_eq!(g.step(), 64);
        let st = g.stats();
        assert_eq!((st.streams[0].sent, st.streams[0].tx_full), (64, 192));
        assert_eq!((st.streams[1].sent, st.streams[1].tx_full), (0, 256));
        let got = drain(&pool, &mut rx);
        assert_eq!(got.len(), 64);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, f)| f.0 == 0 && f.1 == i as u64)
        );
        clock.advance(1_000);
        assert_eq!(g.step(), 64);
        let got = drain(&pool, &mut rx);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, f)| f.0 == 0 && f.1 == 64 + i as u64)
        );
        assert_eq!(g.stats().streams[0].sent, 128);
        assert_eq!(pool.available(), 2048);
    }

    #[test]
    fn out_of_buffers_is_counted_and_the_frames_come_later() {
        let pool = Pool::new(16);
        let (mut g, mut rx, clock) = sim_gen(&pool, &[stream(0, Rate::Pps(1e6))], 64);
        clock.advance(40_000); // 40 due; 16 buffers
        assert_eq!(g.step(), 0, "nothing was due at the first step");
        clock.advance(40_000);
        assert_eq!(g.step(), 16);
        assert_eq!(g.stats().no_buffer, 24);
        assert_eq!(drain(&pool, &mut rx).len(), 16);
        assert_eq!(g.step(), 16, "refunded tokens, built now");
        assert_eq!(drain(&pool, &mut rx).len(), 16);
        assert_eq!(g.step(), 0, "8 left: less than a burst of 10");
        clock.advance(2_000);
        assert_eq!(g.step(), 10);
        let got = drain(&pool, &mut rx);
        assert_eq!(got.last().unwrap().1, 41, "no sequence number skipped");
        assert_eq!(g.stats().streams[0].missed, 0);
    }

    #[test]
    fn recycled_slots_are_reused_and_fully_rewritten() {
        let pool = Pool::new(1024);
        let (mut back_tx, back_rx) = ring(1024);
        let (tx, mut rx) = loopback(1024);
        let mut g = Generator::new(
            pool.clone(),
            Box::new(tx),
            &[stream(3, Rate::Unlimited)],
            GenConfig::default(),
        )
        .unwrap()
        .with_recycle(back_rx);
        assert_eq!(g.step(), 256);
        let mut v = PktVec::new();
        rx.0.pop_burst(&mut v, VECTOR);
        // What a DUT might leave in a slot: scribbled bytes, another offset and metadata.
        for p in v.iter_mut() {
            pool.frame_mut(p).fill(0xee);
            pool.meta_mut(p).vr = 9;
        }
        back_tx.push_burst(&mut v);
        let before = pool.available();
        assert_eq!(g.step(), 256);
        assert_eq!(pool.available(), before, "all from the recycle ring");
        rx.0.pop_burst(&mut v, VECTOR);
        for (i, p) in v.iter().enumerate() {
            assert_eq!(
                *pool.meta(p),
                Meta {
                    off: HEADROOM as u16,
                    len: 60,
                    ..Meta::default()
                }
            );
            let s = signature::parse(pool.frame(p)).unwrap();
            assert_eq!((s.stream, s.seq), (3, 256 + i as u64));
            let ip = vrhost_wire::ipv4::Packet::new_checked(&pool.frame(p)[14..]).unwrap();
            assert!(ip.verify_checksum());
        }
        pool.free_all(&mut v);
    }

    #[test]
    fn streams_must_be_valid_unique_and_known() {
        let pool = Pool::new(16);
        let mk = |s: &[Stream]| {
            Generator::new(
                pool.clone(),
                Box::new(loopback(16).0),
                s,
                GenConfig::default(),
            )
        };
        assert!(matches!(mk(&[]), Err(Error::NoStreams)));
        let e = mk(&[stream(1, Rate::Unlimited), stream(1, Rate::Unlimited)]).unwrap_err();
        assert_eq!(e, Error::DuplicateStream { id: 1 });
        let mut bad = stream(2, Rate::Unlimited);
        bad.size = FrameSize::Fixed(40);
        assert!(matches!(
            mk(&[bad]),
            Err(Error::FrameTooSmall { size: 40, .. })
        ));
        let mut g = mk(&[stream(1, Rate::Unlimited)]).unwrap();
        assert_eq!(
            g.set_rate(5, Rate::Pps(1.0)),
            Err(Error::UnknownStream { id: 5 })
        );
        assert!(g.set_rate(1, Rate::Pps(0.0)).is_err());
        assert!(g.set_rate(1, Rate::Pps(10.0)).is_ok());
    }

    #[test]
    fn a_rate_change_takes_effect_from_now_on() {
        let pool = Pool::new(4096);
        let (mut g, mut rx, clock) = sim_gen(&pool, &[stream(0, Rate::Pps(1e6))], 4096);
        g.step();
        for _ in 0..100 {
            clock.advance(10_000);
            g.step();
        }
        assert_eq!(drain(&pool, &mut rx).len(), 1000);
        g.set_rate(0, Rate::Pps(2e6)).unwrap();
        for _ in 0..100 {
            clock.advance(10_000);
            g.step();
        }
        assert_eq!(drain(&pool, &mut rx).len(), 2000);
        let st = g.stats();
        assert_eq!((st.streams[0].sent, st.elapsed_ns), (3000, 2_000_000));
        // Stepping the clock back grants nothing (and does not wrap).
        clock.set(0);
        assert_eq!(g.step(), 0);
    }

    #[test]
    fn dyn_queues_work_too() {
        let pool = Pool::new(512);
        let (tx, mut rx) = loopback(512);
        let tx: Box<dyn TxQueue> = Box::new(tx);
        let mut g: Generator = Generator::new(
            pool.clone(),
            tx,
            &[stream(0, Rate::Unlimited)],
            GenConfig::default(),
        )
        .unwrap();
        assert_eq!(g.step(), 256);
        assert_eq!(drain(&pool, &mut rx).len(), 256);
    }
}
