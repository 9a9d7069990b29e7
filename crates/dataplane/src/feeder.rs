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
//! were full and went wholly to one VR that this worker may run now, and it is the first
//! such queue of that VR's (a second is read in the receive phase). Anything else — a queue
//! shared by VRs, one that went quiet, a VR quarantined, moved or waiting for fences — is
//! read in the poll's receive phase as before. A queue read at a pick that stops qualifying
//! (empty at its first read, or a burst not all the VR's) is left to the next poll's receive
//! phase, and the VRs its burst went to run in the same poll: a change of traffic costs at
//! most one poll's delay.
//!
//! Not yet: several queues per VR read at its picks (a router fed on each of its ports, as
//! bidirectional traffic does). Tried in session 48 and not kept: no benchmark offers 100
//! VRs two queues each, and one VR on three queues measured 4 % slower (`docs/perf.md`).

use crate::vr::VrId;

/// In [`Feeders::by_vr`]: the queue has been read in this poll.
const READ: u32 = 1 << 31;

/// The queues the scheduler may read this poll, by the VR they feed.
#[derive(Debug, Default)]
pub(crate) struct Feeders {
    /// By VR id: the receive queue's index plus one, 0 for none; [`READ`] once read.
    by_vr: Vec<u32>,
    /// The VRs with a queue, to clear them.
    set: Vec<VrId>,
}

impl Feeders {
    /// Queue `q` feeds `vr` this poll.
    pub(crate) fn assign(&mut self, vr: VrId, q: usize) {
        let i = usize::from(vr);
        if self.by_vr.len() <= i {
            self.by_vr.resize(i + 1, 0);
        }
        if self.by_vr[i] == 0 {
            self.set.push(vr);
        }
        self.by_vr[i] = u32::try_from(q + 1)
            .ok()
            .filter(|&x| x < READ)
            .expect("receive queue index fits 31 bits");
    }

    /// The queue feeding `vr` this poll, if any.
    #[inline(always)]
    pub(crate) fn of(&self, vr: VrId) -> Option<usize> {
        match self.by_vr.get(usize::from(vr)) {
            Some(&q) if q != 0 => Some((q & !READ) as usize - 1),
            _ => None,
        }
    }

    /// Note that `vr`'s queue is being read; returns whether it was the first time this
    /// poll. (An empty queue at the first read has gone quiet; at a later one, the poll has
    /// just taken all it had.)
    pub(crate) fn first_read(&mut self, vr: VrId) -> bool {
        match self.by_vr.get_mut(usize::from(vr)) {
            Some(q) if *q != 0 => {
                let first = *q & READ == 0;
                *q |= READ;
                first
            }
            _ => false,
        }
    }

    /// `vr`'s queue is done for this poll (drained, or no longer its alone).
    #[inline]
    pub(crate) fn done(&mut self, vr: VrId) {
        if let Some(q) = self.by_vr.get_mut(usize::from(vr)) {
            *q = 0;
        }
    }

    /// Whether no VR has a queue this poll.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// End of the poll: no VR has a queue.
    pub(crate) fn clear(&mut self) {
        for vr in self.set.drain(..) {
            if let Some(q) = self.by_vr.get_mut(usize::from(vr)) {
                *q = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigned_queues_are_found_until_done_or_cleared() {
        let mut f = Feeders::default();
        assert!(f.is_empty());
        assert_eq!(f.of(3), None);
        f.assign(3, 0);
        f.assign(7, 5);
        assert_eq!(
            (f.of(3), f.of(7), f.of(4), f.of(900)),
            (Some(0), Some(5), None, None)
        );
        assert!(f.first_read(7));
        assert!(!f.first_read(7));
        assert!(!f.first_read(4), "no queue");
        assert_eq!(f.of(7), Some(5), "read, still its queue");
        f.done(3);
        assert_eq!(f.of(3), None);
        assert!(!f.is_empty());
        f.assign(3, 2);
        f.assign(3, 2);
        f.clear();
        assert!(f.is_empty());
        assert_eq!((f.of(3), f.of(7)), (None, None));
    }
}
