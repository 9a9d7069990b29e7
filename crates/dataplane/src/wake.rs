//! Sleeping VRs: the scheduler looks only at the VRs that may have a vector to run, not at
//! every VR it owns in every poll.
//!
//! Under pressure (a receive queue gave a full burst) a VR runs once `COALESCE` packets wait
//! for it or once it has been passed over for the worker's deferral (`crate::deferral`:
//! 32 polls or more unless its time bound allows fewer; see `worker.rs`): with traffic
//! spread over many VRs each gets a few packets per poll and runs every few dozen polls.
//! (With the deferral at none, deferring turned off, pressure holds no VR back and an
//! empty one sleeps as without pressure.) The scheduler used to find out which VRs may run
//! by asking every owned VR in every poll — its flags, its inject queue, its rings' levels:
//! a few cache lines per VR per poll. That cost grew with the VR count, not with the
//! traffic: 28 instructions per packet with 100 VRs, 110 with 400, and with 1,000 VRs 532
//! of the 1,637 cycles a packet took (perf.md, session 34).
//!
//! Now a VR the scan passes over under pressure — deferred, or with nothing queued — sleeps
//! until its deferral runs out ([`Sleep`]: a poll number per VR, one dense array the scan
//! reads instead of the VR's state). Whoever queues packets for it wakes it sooner: demux
//! counts what it staged for each VR and, every `COALESCE` packets, sets the VR's bit in its
//! runner's [`WakeBits`], which the runner takes at its next pressured poll. A worker that
//! feeds another worker's VR (on the owner) wakes it the same way, hence atomics.
//!
//! **Without pressure** every VR with packets runs at once (a lightly loaded router adds no
//! latency), and a VR with nothing queued sleeps *idle* ([`Sleep::idle_until`]) when every
//! packet it can get comes through this worker's own demux: one worker, or VRs run where
//! received. That demux ends the sleep in the same thread when it queues a packet for the
//! VR ([`Sleep::wake_idle`]), so no wake can be lost and a lone packet runs in the poll it
//! came. Injected frames and flag changes wake VRs as before. The sleep's deadline
//! (`IDLE_RECHECK`, 256 polls) is only a safety net. Why: the scan asked every idle VR in
//! every light poll too. With 1,000 VRs at 20,000 packets a second a poll took 20–22 µs,
//! nearly all of it the scan, and that much latency was added to every packet (perf.md,
//! session 36).
//!
//! **A VR that other workers feed** (on its owner) sleeps idle the same way. Their wakes
//! come every `COALESCE` packets, too late for a lone packet, so each worker's demux also
//! announces every VR a burst queued packets for to the VR's runner: [`Arrivals`] gathers
//! them during the burst and sets them in the runner's arrival bits (`Shared::arrive`) with
//! one atomic per word of 64 VR ids, after the packets were published. The runner takes
//! its arrival bits at the start of each scan and ends those VRs' idle sleeps, as its own
//! demux does. Why: before, with two workers or more on the owner, every owned VR was
//! looked at in every light poll. With two workers and 1,000 VRs at 20,000 packets a second
//! per worker, each looked at 500 VRs a poll; 2 with the arrival bits, and it polled 18
//! times as often (perf.md, session 40). An arrival announced to a VR's previous runner by
//! a worker that has not yet seen the VR move is lost: the VR's next packets from a worker
//! that has, or its idle sleep's deadline, wake it. It takes three workers (with two, the
//! feeder is the previous owner, which sees the move before it receives again).
//!
//! A VR is put to rest the same way when its own run empties its ring, not only when the
//! next poll's scan finds it empty: that look cost a cold line of the ring per VR run. And a
//! VR that rests under pressure, fed by this worker alone, rests idle in light polls too
//! ([`Sleep::rest_deferred`]): near a worker's capacity pressured and light polls alternate,
//! and each light poll looked at every VR that had rested under pressure. With 1,000 VRs at
//! full load the scan's looks went from 68 to 39 a poll (perf.md, session 38).
//!
//! A wake is a hint. One that comes too early costs a look (the VR is deferred again until
//! the same deadline); one that is lost (a VR moving between workers) costs at most the
//! rest of a deferral, the bound a deferred VR's packets always had (a lost arrival: see
//! above).
//!
//! Rejected: skipping a deferred VR for a guessed number of polls (session 19): a VR that
//! suddenly takes most of a port's traffic would overflow its ring while skipped. A timer
//! wheel instead of the dense array: the array costs a compare per owned VR per poll (a few
//! instructions per packet with 1,000 VRs) and needs nothing re-filed when a wake comes.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::vr::VrId;

/// One bit per VR id: "packets were queued for it; look at it". Set by any worker, taken
/// by the worker that runs the VRs.
pub(crate) struct WakeBits {
    words: Box<[AtomicU64]>,
}

impl Default for WakeBits {
    fn default() -> Self {
        WakeBits {
            words: (0..(usize::from(VrId::MAX) + 1).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl WakeBits {
    /// Ask the runner to look at `vr`. `Release`: the runner's `Acquire` take makes what
    /// was published to the VR's ring before this visible with the bit.
    #[inline]
    pub(crate) fn set(&self, vr: VrId) {
        let (w, b) = (usize::from(vr) / 64, u32::from(vr) % 64);
        self.words[w].fetch_or(1 << b, Ordering::Release);
    }

    /// Set the bits of word `w` (VR ids `64 w ..`) at once (see [`Arrivals::post`]).
    #[inline]
    fn set_word(&self, w: usize, bits: u64) {
        if let Some(word) = self.words.get(w) {
            word.fetch_or(bits, Ordering::Release);
        }
    }

    /// Take the bits of VR ids up to `upto` (the word holding it included), calling `f` for
    /// each. A word that is clear costs a plain load.
    pub(crate) fn take(&self, upto: VrId, mut f: impl FnMut(VrId)) {
        for (w, word) in self.words[..=usize::from(upto) / 64].iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut x = word.swap(0, Ordering::Acquire);
            while x != 0 {
                // `w < 1024` and the bit `< 64`: the id fits a `VrId`.
                f((w * 64 + x.trailing_zeros() as usize) as VrId);
                x &= x - 1;
            }
        }
    }
}

/// Words of a [`WakeBits`].
const WORDS: usize = (VrId::MAX as usize + 1).div_ceil(64);

/// VRs other workers run that a receive burst queued packets for, gathered during the
/// burst and posted to their runners' arrival bits (`Shared::arrive`) when it is settled:
/// one atomic per word of 64 VR ids, not one per VR (with 1,000 VRs a burst of 256 reaches
/// about 230 of them, in at most 16 words).
#[derive(Debug)]
pub(crate) struct Arrivals {
    /// The worker whose demux this is: its own VRs' sleeps it ends itself.
    me: usize,
    /// Per (runner, word): the bits gathered so far, runner-major.
    words: Vec<u64>,
    /// The indexes of `words` that are not zero.
    dirty: Vec<usize>,
}

impl Arrivals {
    /// For the demux of worker `me`.
    pub(crate) fn new(me: usize) -> Arrivals {
        Arrivals {
            me,
            words: Vec::new(),
            dirty: Vec::new(),
        }
    }

    /// Packets were queued for `vr`, which worker `runner` runs (nothing to announce if
    /// that is this worker).
    #[inline(always)]
    pub(crate) fn note(&mut self, runner: usize, vr: VrId) {
        if runner == self.me {
            return;
        }
        let i = runner * WORDS + usize::from(vr) / 64;
        if i >= self.words.len() {
            self.words.resize((runner + 1) * WORDS, 0);
        }
        let w = &mut self.words[i];
        if *w == 0 {
            self.dirty.push(i);
        }
        *w |= 1 << (vr % 64);
    }

    /// Set what was gathered in the runners' bits (`to`, one per worker), and start afresh.
    /// After the packets were published to the rings: `Release`, as [`WakeBits::set`].
    pub(crate) fn post(&mut self, to: &[WakeBits]) {
        for i in self.dirty.drain(..) {
            let bits = core::mem::take(&mut self.words[i]);
            if let Some(t) = to.get(i / WORDS) {
                t.set_word(i % WORDS, bits);
            }
        }
    }
}

/// Marks a deadline as an idle sleep's (see [`Sleep::idle_until`]); polls never reach it.
const IDLE: u64 = 1 << 63;
/// With [`IDLE`]: when demux ends the idle part, a deferral to the same deadline remains
/// (see [`Sleep::rest_deferred`]).
const DEFER: u64 = 1 << 62;
const DEADLINE: u64 = !(IDLE | DEFER);

/// A worker's polls and, per VR id, the poll before which the scheduler need not look at it.
#[derive(Debug, Default)]
pub(crate) struct Sleep {
    /// Polls so far (64 bits: never wraps, so an old deadline is never taken for a new one).
    poll: u64,
    wake_at: Vec<u64>,
}

impl Sleep {
    /// The start of a poll; returns its number.
    #[inline]
    pub(crate) fn tick(&mut self) -> u64 {
        self.poll += 1;
        self.poll
    }

    /// The current poll's number.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.poll
    }

    /// Room for VR ids below `n`.
    pub(crate) fn fit(&mut self, n: usize) {
        if self.wake_at.len() < n {
            self.wake_at.resize(n, 0);
        }
    }

    /// `vr` need not be looked at in this poll: under `pressure` whatever put it to sleep,
    /// otherwise only an idle sleep ([`Sleep::idle_until`]).
    #[inline(always)]
    pub(crate) fn asleep(&self, vr: VrId, pressure: bool) -> bool {
        self.wake_at
            .get(usize::from(vr))
            .is_some_and(|&at| (pressure || at & IDLE != 0) && at & DEADLINE > self.poll)
    }

    /// Leave `vr` alone until poll `at`: a sleep that holds under pressure only.
    #[inline]
    pub(crate) fn until(&mut self, vr: VrId, at: u64) {
        if let Some(w) = self.wake_at.get_mut(usize::from(vr)) {
            *w = at;
        }
    }

    /// Leave `vr`, found with nothing queued, alone until poll `at` or until
    /// [`Sleep::wake_idle`], with or without pressure. Only for a VR whose every packet
    /// comes through this worker's own demux, which wakes it in the same thread: no wake
    /// can be lost, and `at` is only a safety net.
    #[inline]
    pub(crate) fn idle_until(&mut self, vr: VrId, at: u64) {
        self.until(vr, at | IDLE);
    }

    /// Leave `vr`, found with nothing queued under pressure, alone until poll `at` (a
    /// deferral), and in light polls too until [`Sleep::wake_idle`]: [`Sleep::idle_until`]
    /// and [`Sleep::until`] at once. Only for a VR fed by this worker's demux alone, as
    /// `idle_until`. Why: polls under pressure and light ones alternate as load nears what
    /// a worker can carry; a plain deferral does not hold in a light poll, so every VR that
    /// rested under pressure was looked at in the next light poll only to be found empty.
    #[inline]
    pub(crate) fn rest_deferred(&mut self, vr: VrId, at: u64) {
        self.until(vr, at | IDLE | DEFER);
    }

    /// Demux queued packets for `vr`: end an idle sleep. A deferral runs on: one that was
    /// running, or the one [`Sleep::rest_deferred`] set.
    #[inline(always)]
    pub(crate) fn wake_idle(&mut self, vr: VrId) {
        if let Some(w) = self.wake_at.get_mut(usize::from(vr))
            && *w & IDLE != 0
        {
            *w = if *w & DEFER != 0 { *w & DEADLINE } else { 0 };
        }
    }

    /// Look at `vr` again from this poll on.
    #[inline]
    pub(crate) fn wake(&mut self, vr: VrId) {
        self.until(vr, 0);
    }

    /// Look at every VR again (their flags changed).
    pub(crate) fn wake_all(&mut self) {
        self.wake_at.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_taken_once_and_only_up_to_the_limit() {
        let b = WakeBits::default();
        for vr in [0, 5, 63, 64, 200, VrId::MAX] {
            b.set(vr);
        }
        b.set(5);
        let mut got = Vec::new();
        b.take(64, |vr| got.push(vr));
        // 64's word reaches to 127; 200 and the last id lie beyond it.
        assert_eq!(got, [0, 5, 63, 64]);
        got.clear();
        b.take(64, |vr| got.push(vr));
        assert!(got.is_empty(), "taken bits are cleared: {got:?}");
        b.take(VrId::MAX, |vr| got.push(vr));
        assert_eq!(got, [200, VrId::MAX]);
    }

    #[test]
    fn arrivals_reach_each_runner_once_per_burst_and_start_afresh() {
        let bits: Vec<WakeBits> = (0..3).map(|_| WakeBits::default()).collect();
        let mut a = Arrivals::new(0);
        for (runner, vr) in [
            (1, 3),
            (0, 5),
            (1, 3),
            (1, 70),
            (2, 3),
            (2, VrId::MAX),
            (1, 64),
        ] {
            a.note(runner, vr);
        }
        a.post(&bits);
        let taken = |b: &WakeBits| {
            let mut got = Vec::new();
            b.take(VrId::MAX, |vr| got.push(vr));
            got
        };
        assert!(taken(&bits[0]).is_empty(), "nothing for its own worker");
        assert_eq!(taken(&bits[1]), [3, 64, 70]);
        assert_eq!(taken(&bits[2]), [3, VrId::MAX]);
        // Posted bits were cleared: the next burst posts only its own.
        a.note(2, 9);
        a.post(&bits);
        assert!(taken(&bits[1]).is_empty());
        assert_eq!(taken(&bits[2]), [9]);
        // A runner beyond those given (a worker count that shrank) is ignored.
        a.note(5, 1);
        a.post(&bits);
        assert!(bits.iter().all(|b| taken(b).is_empty()));
    }

    #[test]
    fn a_vr_sleeps_until_its_poll_or_a_wake() {
        let mut s = Sleep::default();
        s.fit(4);
        assert_eq!(s.tick(), 1);
        assert!(!s.asleep(2, true), "awake at first");
        s.until(2, 3);
        assert!(s.asleep(2, true));
        assert!(!s.asleep(1, true), "others are not touched");
        s.tick();
        assert!(s.asleep(2, true));
        assert_eq!(s.tick(), 3);
        assert!(!s.asleep(2, true), "awake at its poll");
        s.until(2, 10);
        s.wake(2);
        assert!(!s.asleep(2, true), "woken early");
        s.until(3, 10);
        s.wake_all();
        assert!(!s.asleep(3, true));
        // Ids beyond the array are never asleep (a VR added since the last `fit`).
        s.until(9, 10);
        assert!(!s.asleep(9, true));
    }

    #[test]
    fn an_idle_sleep_holds_without_pressure_and_ends_at_a_wake_from_demux() {
        let mut s = Sleep::default();
        s.fit(4);
        let now = s.tick();
        s.until(1, now + 2);
        s.idle_until(2, now + 2);
        assert!(
            !s.asleep(1, false),
            "a deferral does not hold without pressure"
        );
        assert!(s.asleep(1, true));
        assert!(s.asleep(2, false), "an idle sleep holds without pressure");
        assert!(s.asleep(2, true), "and with it");
        // Demux ends an idle sleep, not a deferral.
        s.wake_idle(1);
        s.wake_idle(2);
        assert!(s.asleep(1, true), "a deferral runs on");
        assert!(!s.asleep(2, false) && !s.asleep(2, true));
        // The safety net: an idle sleep ends at its poll.
        s.idle_until(3, now + 2);
        s.tick();
        assert!(s.asleep(3, false));
        s.tick();
        assert!(!s.asleep(3, false), "awake at its poll");
    }

    #[test]
    fn a_rest_under_pressure_holds_in_light_polls_until_demux_and_then_stays_a_deferral() {
        let mut s = Sleep::default();
        s.fit(4);
        let now = s.tick();
        s.rest_deferred(1, now + 2);
        assert!(s.asleep(1, true), "a deferral under pressure");
        assert!(s.asleep(1, false), "and idle in a light poll");
        // Demux queues a packet: light polls look at it at once, pressure waits the
        // deferral out.
        s.wake_idle(1);
        assert!(!s.asleep(1, false), "woken for light polls");
        assert!(s.asleep(1, true), "the deferral runs on");
        s.tick();
        assert!(s.asleep(1, true));
        s.tick();
        assert!(!s.asleep(1, true), "awake when the deferral runs out");
        // Not woken: its deadline ends both parts.
        let now = s.tick();
        s.rest_deferred(2, now + 1);
        assert!(s.asleep(2, false) && s.asleep(2, true));
        s.tick();
        assert!(
            !s.asleep(2, false) && !s.asleep(2, true),
            "awake at its poll"
        );
        // A wake (wake bits, flags) ends it all.
        let now = s.tick();
        s.rest_deferred(3, now + 5);
        s.wake(3);
        assert!(!s.asleep(3, false) && !s.asleep(3, true));
    }
}
