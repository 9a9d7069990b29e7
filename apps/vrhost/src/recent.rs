//! Each VR's ingress wait over the last minute or so, for `ctl status`'s mark.
//!
//! Why: `ctl status` marks a VR when over 1 % of its sampled packets waited at least the
//! deferral's bound (`[dataplane] max_deferral_us`). The wait counters run from the VR's
//! making, so an overload an hour ago would mark it for good, and a VR that has been fine
//! for a day would hide a minute of trouble. The daemon keeps a snapshot of every VR's
//! counters every [`EVERY`], the last [`KEEP`] of them; a VR's recent waits are the
//! counters now less the oldest snapshot kept, a window of 60 to 75 seconds once the daemon
//! has run that long (shorter before). A snapshot is 0.6 KiB: 3 KiB per VR.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use vrhost_dataplane::WaitStats;

/// How often the daemon takes a snapshot.
pub(crate) const EVERY: Duration = Duration::from_secs(15);
/// Snapshots kept per VR: the window is (KEEP − 1) to KEEP times [`EVERY`].
const KEEP: usize = 5;

/// Snapshots of the VRs' wait counters, by VR (a key that stays with one VR while it
/// lives: the daemon uses its `Arc`'s address).
#[derive(Debug, Default)]
pub(crate) struct Recent {
    by_vr: HashMap<usize, VecDeque<(Instant, WaitStats)>>,
    last: Option<Instant>,
}

impl Recent {
    /// Whether a snapshot is due at `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.last.is_none_or(|t| now.duration_since(t) >= EVERY)
    }

    /// Take a snapshot of every VR there is (`(key, counters)`); VRs no longer listed are
    /// forgotten.
    pub(crate) fn snapshot(
        &mut self,
        now: Instant,
        vrs: impl IntoIterator<Item = (usize, WaitStats)>,
    ) {
        let mut seen = HashMap::with_capacity(self.by_vr.len());
        for (key, w) in vrs {
            let mut q = self.by_vr.remove(&key).unwrap_or_default();
            if q.len() == KEEP {
                q.pop_front();
            }
            q.push_back((now, w));
            seen.insert(key, q);
        }
        self.by_vr = seen;
        self.last = Some(now);
    }

    /// VR `key`'s waits since its oldest snapshot, and how long ago that was; `None` before
    /// its first snapshot, or if its counters are not those snapshots' (a VR made again).
    pub(crate) fn window(
        &self,
        key: usize,
        now: Instant,
        current: &WaitStats,
    ) -> Option<(Duration, WaitStats)> {
        let (at, old) = self.by_vr.get(&key)?.front()?;
        let monotonic = current.sum_ns >= old.sum_ns
            && current
                .buckets
                .iter()
                .zip(&old.buckets)
                .all(|(c, o)| c >= o);
        monotonic.then(|| (now.duration_since(*at), current.since(old)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters with `n` waits in bucket `b`.
    fn w(b: usize, n: u64) -> WaitStats {
        let mut s = WaitStats::default();
        s.buckets[b] = n;
        s.sum_ns = n;
        s
    }

    #[test]
    fn the_window_spans_the_oldest_snapshot_kept_to_now() {
        let t0 = Instant::now();
        let mut r = Recent::default();
        assert!(r.due(t0));
        assert_eq!(r.window(1, t0, &w(3, 5)), None, "no snapshot yet");
        r.snapshot(t0, [(1, w(3, 5)), (2, w(4, 1))]);
        assert!(!r.due(t0 + EVERY / 2) && r.due(t0 + EVERY));
        let (span, d) = r.window(1, t0 + EVERY / 2, &w(3, 8)).unwrap();
        assert_eq!((span, d.samples()), (EVERY / 2, 3));
        // Seven snapshots, one every EVERY, of a count that grows by 10 each time: the
        // window starts at the third (the oldest of the last five).
        for i in 1..7u32 {
            r.snapshot(t0 + EVERY * i, [(1, w(3, 5 + 10 * u64::from(i)))]);
        }
        let now = t0 + EVERY * 7;
        let (span, d) = r.window(1, now, &w(3, 75)).unwrap();
        assert_eq!(span, EVERY * 5);
        assert_eq!(d.samples(), 75 - 25);
        // VR 2 was not listed any more: forgotten.
        assert_eq!(r.window(2, now, &w(4, 9)), None);
    }

    #[test]
    fn counters_that_went_back_are_not_taken_for_a_window() {
        let t0 = Instant::now();
        let mut r = Recent::default();
        r.snapshot(t0, [(1, w(3, 50))]);
        assert_eq!(r.window(1, t0 + EVERY, &w(3, 20)), None);
        assert_eq!(
            r.window(1, t0 + EVERY, &w(5, 60)),
            None,
            "bucket 3 went to 0"
        );
    }
}
