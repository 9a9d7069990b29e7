//! Receive queues the scheduler polls: a queue whose every packet goes to one VR is read
//! when the stride scheduler picks that VR, a vector at a time, and the vector is forwarded
//! at once.
//!
//! Why: with a receive queue per VR (a port per tenant, as in Rathore's and Egi's setups, or
//! NIC filters by MAC) a poll used to read every queue before it forwarded anything, up to a
//! budget's worth each. With 100 VRs that was 25,600 packets or more in flight per poll: the
//! generator wrote slots long evicted, and each VR's headers had left the caches by the time
//! it ran (`vrbench inproc --vrs 100 --queue-per-vr`: 172 cycles a packet, `ip4-input` 45
//! against 14 for one VR, 3.4 ms waited in the ingress rings). Read at the pick, a vector
//! is in the caches when its VR forwards it, as with one VR.
//!
//! Fairness is the scheduler's as before (Egi §3.1): a VR's queue is read only when the
//! stride pass gives the VR its turn, so under overload a VR with twice the weight has its
//! queue read twice as often, and what the others cannot take waits in (and overflows) the
//! NIC's ring, at no cost to the worker — the receive back-pressure of `crate::worker`,
//! decided per vector rather than per poll.
//!
//! A queue qualifies for a poll when its last few bursts (`SOLE_STREAK`, in `crate::worker`)
//! were full and went wholly to one VR that this worker may run now. Anything else — a
//! queue shared by VRs, one that went quiet, a VR quarantined, moved or waiting for fences —
//! is read in the poll's receive phase as before. A VR may have up to [`PER_VR`] such
//! queues (a router's traffic comes in on each of its ports); its picks read them in turn,
//! one burst a pick, while it has less than a vector waiting. A queue read at a pick that
//! stops qualifying (empty at its first read, or a burst not all the VR's) is done for the
//! poll and left to the next poll's receive phase, and the VRs its burst went to run in the
//! same poll: a change of traffic costs at most one poll's delay.
//!
//! The price: one VR on three overloaded queues measured 3.5 % slower than with only its
//! first queue read at picks (`vrbench inproc --gen-queues 3`), against 14.5 % fewer cycles
//! for 100 VRs on two queues each (`--vrs 100 --queue-per-vr --gen-queues 2`; `docs/perf.md`,
//! session 48).

use arrayvec::ArrayVec;

use crate::vr::VrId;

/// Queues one VR's picks may read in a poll; a VR's further queues are read in the receive
/// phase.
pub(crate) const PER_VR: usize = 4;

/// One VR's queues this poll.
#[derive(Debug, Default, Clone)]
struct Fed {
    /// Receive queue indexes, with whether each was read in this poll.
    queues: ArrayVec<(u32, bool), PER_VR>,
    /// Where the next pick starts looking.
    next: u8,
}

/// The queues the scheduler may read this poll, by the VR they feed.
#[derive(Debug, Default)]
pub(crate) struct Feeders {
    /// By VR id.
    by_vr: Vec<Fed>,
    /// The VRs with queues, to clear them.
    set: Vec<VrId>,
}

impl Feeders {
    /// Queue `q` feeds `vr` this poll. False if `vr` has [`PER_VR`] queues already (the
    /// caller reads `q` in the receive phase).
    pub(crate) fn assign(&mut self, vr: VrId, q: usize) -> bool {
        let i = usize::from(vr);
        if self.by_vr.len() <= i {
            self.by_vr.resize(i + 1, Fed::default());
        }
        let f = &mut self.by_vr[i];
        let q = u32::try_from(q).expect("receive queue index fits 32 bits");
        if f.queues.iter().any(|&(x, _)| x == q) {
            return true;
        }
        if f.queues.is_full() {
            return false;
        }
        if f.queues.is_empty() {
            self.set.push(vr);
        }
        f.queues.push((q, false));
        true
    }

    /// Whether `vr` has a queue left to read this poll.
    #[inline(always)]
    pub(crate) fn has(&self, vr: VrId) -> bool {
        self.by_vr
            .get(usize::from(vr))
            .is_some_and(|f| !f.queues.is_empty())
    }

    /// The queue `vr`'s pick reads next (its queues in turn), marked read; with whether this
    /// is its first read this poll. (An empty queue at its first read has gone quiet; at a
    /// later one, the poll has just taken all it had.)
    pub(crate) fn next(&mut self, vr: VrId) -> Option<(usize, bool)> {
        let f = self.by_vr.get_mut(usize::from(vr))?;
        if f.queues.is_empty() {
            return None;
        }
        let k = usize::from(f.next) % f.queues.len();
        f.next = (k + 1) as u8;
        let (q, read) = &mut f.queues[k];
        let first = !*read;
        *read = true;
        Some((*q as usize, first))
    }

    /// Queue `q` is done for this poll: drained, or no longer `vr`'s alone.
    pub(crate) fn done_queue(&mut self, vr: VrId, q: usize) {
        if let Some(f) = self.by_vr.get_mut(usize::from(vr))
            && let Some(k) = f.queues.iter().position(|&(x, _)| x as usize == q)
        {
            f.queues.remove(k);
            f.next = k as u8;
        }
    }

    /// All of `vr`'s queues are done for this poll (its run came up short of a vector).
    #[inline]
    pub(crate) fn done(&mut self, vr: VrId) {
        if let Some(f) = self.by_vr.get_mut(usize::from(vr)) {
            f.queues.clear();
        }
    }

    /// Whether no VR had a queue this poll.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// End of the poll: no VR has a queue.
    pub(crate) fn clear(&mut self) {
        for vr in self.set.drain(..) {
            if let Some(f) = self.by_vr.get_mut(usize::from(vr)) {
                f.queues.clear();
                f.next = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vrs_queues_are_read_in_turn_until_done_or_cleared() {
        let mut f = Feeders::default();
        assert!(f.is_empty());
        assert!(!f.has(3));
        assert_eq!(f.next(3), None);
        assert!(f.assign(3, 0));
        assert!(f.assign(3, 4));
        assert!(f.assign(3, 4), "the same queue again: still one entry");
        assert!(f.assign(7, 5));
        assert!(f.has(3) && f.has(7) && !f.has(4) && !f.has(900));
        // In turn, each first read once.
        assert_eq!(f.next(3), Some((0, true)));
        assert_eq!(f.next(3), Some((4, true)));
        assert_eq!(f.next(3), Some((0, false)));
        assert_eq!(f.next(7), Some((5, true)));
        f.done_queue(3, 0);
        assert_eq!(f.next(3), Some((4, false)));
        assert_eq!(f.next(3), Some((4, false)));
        f.done_queue(3, 4);
        assert!(!f.has(3));
        assert_eq!(f.next(3), None);
        // At most PER_VR queues.
        for q in 10..10 + PER_VR {
            assert!(f.assign(9, q));
        }
        assert!(!f.assign(9, 99));
        f.done(9);
        assert!(!f.has(9));
        assert!(!f.is_empty());
        f.clear();
        assert!(f.is_empty());
        assert!(!f.has(7));
        assert!(f.assign(3, 1));
        assert_eq!(f.next(3), Some((1, true)), "a new poll: first read again");
    }
}
