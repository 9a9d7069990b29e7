//! How long the scheduler lets a VR with a short backlog wait under pressure: a worker's
//! deferral, in polls, grown while its vectors are small and shrunk back when they are not.
//!
//! Under pressure (a receive queue gave a full burst) a VR runs once `COALESCE` packets wait
//! for it or once it has been passed over for the deferral (`worker.rs`). A VR's run costs
//! much the same whatever it carries: its tables, caches, counters and ring are cold by the
//! time it runs again. A deferral fixed at 32 polls bounds a VR's vector by what 32 polls
//! bring it, and with traffic spread over 1,000 VRs that is 32 × 256 ÷ 1,000 ≈ 8 packets: the
//! worker carried 1.4 Mpps at full load where vectors of 33 (a deferral of 128 polls) carry
//! 3.1 (perf.md, session 42).
//!
//! So the deferral adapts, once every [`PERIOD`] polls, to the packets the worker ran in the
//! polls under pressure of that period:
//! - it doubles when more than half of them went in vectors of fewer than [`SMALL`] packets
//!   and at least half the pool's slots are free;
//! - it halves when more than half went in vectors of at least `COALESCE` (what a VR
//!   gathers before the deferral ends: the deferral is not what bounds its vectors), or
//!   when fewer than a quarter of the pool's slots are free;
//! - between the two it holds, so that it settles where vectors are middling rather than
//!   swing between too short and too long;
//! - it falls back to [`BASE`] after a period without pressure;
//! - it stays within [`BASE`] (the fixed deferral it replaces) and [`MAX`], and never lasts
//!   longer than the data plane's bound (`Dataplane::set_max_deferral`, 10 ms unless set) at
//!   this period's poll length: that bound holds the base too, and zero turns deferring off.
//!
//! A VR already asleep when the deferral shrinks keeps the deadline it was given (see
//! `crate::wake`), which the bound that held then still bounds.
//!
//! The waits this causes are measured, not only bounded: each VR's ingress rings time a
//! packet of about every vector (`crate::wait`).
//!
//! Why the guards: a deferral costs latency (a deferred packet waits up to it) and slots
//! (every deferred packet holds one; an exhausted pool drops at the NIC, before any VR's
//! fair share is looked at). And why vectors decide: a worker with one overloaded VR and
//! many light ones runs most of its packets in the big VR's full vectors, so the light VRs
//! keep the short deferral; only when most of the work goes in small vectors, which is what
//! makes a run's fixed cost matter, is latency traded for throughput.

use crate::worker::COALESCE;

/// The deferral the worker starts with and returns to without pressure, in polls, and
/// the shortest unless the time bound allows fewer.
pub(crate) const BASE: u64 = 32;
/// The longest deferral, in polls, whatever the time bound allows.
pub(crate) const MAX: u64 = 1024;
/// Polls between decisions.
pub(crate) const PERIOD: u64 = 64;
/// A vector of fewer packets than this counts as small (a quarter of `COALESCE`). Not
/// more: with 300 VRs of 1,000 routes a deferral of 32 polls runs vectors of 27, and the
/// 42 of a longer one made the worker about 20 % slower (its waiting headers and slots
/// outgrew the caches); with 1,000 VRs vectors of 8 → 16 carried 1.4–1.6× as much
/// (perf.md, session 42).
pub(crate) const SMALL: usize = COALESCE / 4;
/// The longest a deferral may last at the current poll length unless the operator says
/// otherwise: 10 ms, the order of the queueing delay a router's buffers add at line rate.
/// Only a worker under pressure that runs small vectors gets near it.
pub(crate) const DEFAULT_MAX_WAIT_NS: u64 = 10_000_000;

/// One worker's deferral and what it saw of its vectors since the last decision.
#[derive(Debug)]
pub(crate) struct Deferral {
    polls: u64,
    /// Packets run under pressure this period, those of them in small vectors, and those
    /// in vectors of at least `COALESCE`.
    ran: u64,
    small: u64,
    enough: u64,
    /// Where this period started.
    since_poll: u64,
    since_ns: u64,
}

impl Deferral {
    pub(crate) fn new() -> Deferral {
        Deferral {
            polls: BASE,
            ran: 0,
            small: 0,
            enough: 0,
            since_poll: 0,
            since_ns: 0,
        }
    }

    /// The deferral now, in polls.
    #[inline(always)]
    pub(crate) fn polls(&self) -> u64 {
        self.polls
    }

    /// A vector of `n` packets ran in a poll under pressure.
    #[inline(always)]
    pub(crate) fn ran(&mut self, n: usize) {
        self.ran += n as u64;
        if n < SMALL {
            self.small += n as u64;
        } else if n >= COALESCE {
            self.enough += n as u64;
        }
    }

    /// The end of poll `poll` at `now_ns`: once a period has passed, decide, asking `pool`
    /// for the pool's free slots and its size. A deferral may last at most `max_wait_ns`
    /// (zero: none, from now on). Returns the deferral.
    #[inline]
    pub(crate) fn tick(
        &mut self,
        poll: u64,
        now_ns: u64,
        max_wait_ns: u64,
        pool: impl FnOnce() -> (usize, usize),
    ) -> u64 {
        if max_wait_ns == 0 {
            // Off at once, not after a period: an operator who turns it off wants no packet
            // held back from then on.
            self.polls = 0;
        }
        if self.since_ns == 0 {
            // The first period starts now: a worker's first poll may come long after it
            // was made.
            self.since_poll = poll;
            self.since_ns = now_ns.max(1);
            return self.polls;
        }
        let polls = poll.wrapping_sub(self.since_poll);
        if polls < PERIOD {
            return self.polls;
        }
        let (ran, small, enough) = (self.ran, self.small, self.enough);
        self.polls = if max_wait_ns == 0 {
            0
        } else if ran == 0 {
            // No pressure: back to the base. Not bounded by this period's poll length,
            // which says nothing of a pressured poll's: an idle worker naps up to 1 ms a
            // poll. The first period under pressure bounds it.
            BASE
        } else {
            let (free, slots) = pool();
            let next = if free * 4 < slots || enough * 2 > ran {
                self.polls / 2
            } else if small * 2 > ran && free * 2 >= slots {
                self.polls * 2
            } else {
                self.polls
            };
            // The most polls that last at most `max_wait_ns` at this period's poll length,
            // and at least one, however long the polls.
            let poll_ns = now_ns.saturating_sub(self.since_ns) / polls;
            let allowed = max_wait_ns.checked_div(poll_ns).unwrap_or(MAX).max(1);
            next.clamp(BASE, MAX).min(allowed)
        };
        self.ran = 0;
        self.small = 0;
        self.enough = 0;
        self.since_poll = poll;
        self.since_ns = now_ns;
        self.polls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOTS: usize = 1 << 16;
    /// A poll of 10 µs.
    const POLL_NS: u64 = 10_000;

    /// A deferral whose first period started at poll 0, time 0.
    fn started() -> Deferral {
        let mut d = Deferral::new();
        d.tick(0, 0, DEFAULT_MAX_WAIT_NS, || {
            unreachable!("no decision at the start")
        });
        d
    }

    /// Run `periods` periods of polls of `POLL_NS` from poll `*poll`, each running vectors
    /// of `sizes` under pressure, with `free` slots; returns the deferral after each.
    fn periods(
        d: &mut Deferral,
        poll: &mut u64,
        periods: usize,
        sizes: &[usize],
        free: usize,
    ) -> Vec<u64> {
        bounded(d, poll, periods, sizes, free, DEFAULT_MAX_WAIT_NS)
    }

    /// `periods` under a bound of `max_wait_ns`.
    fn bounded(
        d: &mut Deferral,
        poll: &mut u64,
        periods: usize,
        sizes: &[usize],
        free: usize,
        max_wait_ns: u64,
    ) -> Vec<u64> {
        (0..periods)
            .map(|_| {
                let mut last = d.polls();
                for _ in 0..PERIOD {
                    *poll += 1;
                    for &n in sizes {
                        d.ran(n);
                    }
                    last = d.tick(*poll, *poll * POLL_NS, max_wait_ns, || (free, SLOTS));
                }
                last
            })
            .collect()
    }

    /// Run `polls` polls of `poll_ns` each from poll `*poll` at `*now`, each running 32
    /// vectors of 8 under pressure; returns the deferrals seen, each once.
    fn long_polls(
        d: &mut Deferral,
        poll: &mut u64,
        now: &mut u64,
        polls: u64,
        poll_ns: u64,
    ) -> Vec<u64> {
        let mut seen = Vec::new();
        for _ in 0..polls {
            *poll += 1;
            *now += poll_ns;
            for _ in 0..32 {
                d.ran(8);
            }
            let p = d.tick(*poll, *now, DEFAULT_MAX_WAIT_NS, || (SLOTS, SLOTS));
            if seen.last() != Some(&p) {
                seen.push(p);
            }
        }
        seen
    }

    #[test]
    fn small_vectors_double_it_up_to_the_bound_and_large_ones_halve_it_back() {
        let (mut d, mut poll) = (started(), 0);
        // Vectors of 8: doubles each period. At 10 µs a poll, 10 ms is 1,000 polls, so it
        // stops there.
        assert_eq!(
            periods(&mut d, &mut poll, 6, &[8; 32], SLOTS),
            [64, 128, 256, 512, 1000, 1000]
        );
        // Vectors of 64: halves back to the base.
        assert_eq!(
            periods(&mut d, &mut poll, 6, &[64; 4], SLOTS),
            [500, 250, 125, 62, 32, 32]
        );
    }

    #[test]
    fn middling_vectors_hold_it() {
        let (mut d, mut poll) = (started(), 0);
        periods(&mut d, &mut poll, 2, &[8; 32], SLOTS);
        assert_eq!(d.polls(), 128);
        // Vectors of 32 to 63 packets: neither small nor what a VR gathers without waiting
        // out its deferral.
        assert_eq!(periods(&mut d, &mut poll, 3, &[32; 8], SLOTS), [128; 3]);
        assert_eq!(periods(&mut d, &mut poll, 3, &[63; 8], SLOTS), [128; 3]);
        // Half small, half full: held too.
        assert_eq!(
            periods(&mut d, &mut poll, 3, &[8, 8, 8, 8, 64, 16, 16], SLOTS),
            [128; 3]
        );
    }

    #[test]
    fn one_big_vr_among_many_small_keeps_the_base() {
        let (mut d, mut poll) = (started(), 0);
        // A full vector of one VR and 30 VRs with 2 packets each: 256 of 316 packets run in
        // a vector the deferral did not bound.
        let mut sizes = vec![2; 30];
        sizes.push(256);
        assert_eq!(periods(&mut d, &mut poll, 4, &sizes, SLOTS), [32; 4]);
    }

    #[test]
    fn a_scarce_pool_stops_growth_and_shrinks_it() {
        let (mut d, mut poll) = (started(), 0);
        periods(&mut d, &mut poll, 3, &[8; 32], SLOTS);
        assert_eq!(d.polls(), 256);
        // Under half free: held. Under a quarter free: halved.
        assert_eq!(
            periods(&mut d, &mut poll, 2, &[8; 32], SLOTS / 2 - 1),
            [256, 256]
        );
        assert_eq!(
            periods(&mut d, &mut poll, 2, &[8; 32], SLOTS / 4 - 1),
            [128, 64]
        );
    }

    #[test]
    fn a_period_without_pressure_returns_it_to_the_base() {
        let (mut d, mut poll) = (started(), 0);
        periods(&mut d, &mut poll, 3, &[8; 32], SLOTS);
        assert_eq!(d.polls(), 256);
        assert_eq!(periods(&mut d, &mut poll, 1, &[], SLOTS), [BASE]);
        // However long its polls: an idle worker's naps are no pressured poll's length.
        let mut now = poll * POLL_NS;
        for _ in 0..PERIOD {
            poll += 1;
            now += 1_000_000;
            d.tick(poll, now, DEFAULT_MAX_WAIT_NS, || {
                unreachable!("no pressure")
            });
        }
        assert_eq!(d.polls(), BASE);
    }

    #[test]
    fn longer_polls_shrink_it_to_what_the_time_bound_allows() {
        let (mut d, mut poll) = (started(), 0);
        periods(&mut d, &mut poll, 4, &[8; 32], SLOTS);
        assert_eq!(d.polls(), 512);
        // Polls of 40 µs: 250 of them last 10 ms.
        let mut now = poll * POLL_NS;
        let seen = long_polls(&mut d, &mut poll, &mut now, 3 * PERIOD, 40_000);
        assert_eq!(seen, [512, 250]);
        // Polls of 1 ms: the bound holds the base too (32 polls would last 32 ms).
        let seen = long_polls(&mut d, &mut poll, &mut now, PERIOD, 1_000_000);
        assert_eq!(seen, [250, 10]);
        // Polls of 20 ms: one poll, not none.
        let seen = long_polls(&mut d, &mut poll, &mut now, PERIOD, 20_000_000);
        assert_eq!(seen, [10, 1]);
    }

    #[test]
    fn the_operators_bound_caps_growth_and_zero_turns_it_off_at_once() {
        let (mut d, mut poll) = (started(), 0);
        let small = [8; 32];
        // 1 ms at 10 µs a poll: 100 polls.
        let ms = 1_000_000;
        assert_eq!(
            bounded(&mut d, &mut poll, 3, &small, SLOTS, ms),
            [64, 100, 100]
        );
        // Turned off: the next poll already defers nothing, and it stays so.
        poll += 1;
        d.ran(8);
        assert_eq!(d.tick(poll, poll * POLL_NS, 0, || (SLOTS, SLOTS)), 0);
        assert_eq!(bounded(&mut d, &mut poll, 3, &small, SLOTS, 0), [0, 0, 0]);
        // On again: it starts over from the base.
        assert_eq!(periods(&mut d, &mut poll, 3, &small, SLOTS), [32, 64, 128]);
    }
}
