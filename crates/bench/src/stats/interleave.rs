//! The order in which several DUTs' trials run: interleaved, rotated, alternating direction.
//!
//! Running all of A's trials, then all of B's, measures B later than A — on a host whose speed
//! drifts, that is a bias, not noise. Interleaving (A B A B …) puts each round's trials minutes
//! apart at most. Two more things matter: the DUT measured first in a round may inherit a cold
//! cache or a warmer CPU, and a DUT may be slowed by the one before it (its leftover softirq
//! work, its freed memory). So round `r` starts with DUT `r mod n`, and walks the DUTs forward in
//! even rounds and backward in odd ones: every DUT starts equally often over `n` rounds, and none
//! always follows the same neighbour (a plain rotation would keep A always after the last DUT).
//!
//! For 2 DUTs: `A B | B A | A B | B A`. For 3: `A B C | B A C | C A B | A C B | …`.

/// One trial slot of an interleaved plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Round (repeat) number, from 0.
    pub round: usize,
    /// Position within the round, from 0.
    pub position: usize,
    /// Which DUT runs (index into the caller's list).
    pub dut: usize,
}

/// An interleaved plan of `rounds` rounds over `duts` DUTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interleave {
    duts: usize,
    rounds: usize,
}

impl Interleave {
    /// A plan for `duts` DUTs repeated `rounds` times.
    pub fn new(duts: usize, rounds: usize) -> Self {
        Self { duts, rounds }
    }

    /// The DUT order of round `round`.
    pub fn order(&self, round: usize) -> Vec<usize> {
        let n = self.duts;
        if n == 0 {
            return Vec::new();
        }
        let start = round % n;
        (0..n)
            .map(|i| {
                if round.is_multiple_of(2) {
                    (start + i) % n
                } else {
                    (start + n - i) % n
                }
            })
            .collect()
    }

    /// Every slot, round by round.
    pub fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..self.rounds).flat_map(move |round| {
            self.order(round)
                .into_iter()
                .enumerate()
                .map(move |(position, dut)| Slot {
                    round,
                    position,
                    dut,
                })
        })
    }

    /// Number of trials in the plan.
    pub fn len(&self) -> usize {
        self.duts * self.rounds
    }

    /// True if the plan runs nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn letters(p: &Interleave) -> String {
        let mut s = String::new();
        for slot in p.slots() {
            if slot.position == 0 && slot.round > 0 {
                s.push(' ');
            }
            s.push((b'A' + slot.dut as u8) as char);
        }
        s
    }

    #[test]
    fn known_orders() {
        assert_eq!(letters(&Interleave::new(2, 4)), "AB BA AB BA");
        assert_eq!(letters(&Interleave::new(3, 6)), "ABC BAC CAB ACB BCA CBA");
        assert_eq!(letters(&Interleave::new(4, 4)), "ABCD BADC CDAB DCBA");
        assert_eq!(letters(&Interleave::new(1, 3)), "A A A");
        assert!(Interleave::new(0, 3).is_empty() && Interleave::new(3, 0).slots().next().is_none());
        assert_eq!(Interleave::new(3, 5).len(), 15);
    }

    #[test]
    fn every_round_runs_every_dut_once_and_starts_rotate() {
        for n in 1..=7 {
            let p = Interleave::new(n, 2 * n);
            for r in 0..2 * n {
                let o = p.order(r);
                assert_eq!(
                    o.iter().copied().collect::<BTreeSet<_>>(),
                    (0..n).collect(),
                    "n={n} r={r}"
                );
                assert_eq!(o[0], r % n, "round {r} starts with DUT {}", r % n);
            }
        }
    }

    #[test]
    fn no_dut_always_follows_the_same_one() {
        for n in 2..=7 {
            // With 2 DUTs and 2 rounds (A B | B A) A can only follow B; from 3 rounds on, no.
            for rounds in [3, 4, n.max(3), 2 * n] {
                let seq: Vec<usize> = Interleave::new(n, rounds).slots().map(|s| s.dut).collect();
                for d in 0..n {
                    let before: BTreeSet<usize> =
                        seq.windows(2).filter(|w| w[1] == d).map(|w| w[0]).collect();
                    assert!(
                        before.len() >= 2,
                        "n={n} rounds={rounds}: DUT {d} always after {before:?}"
                    );
                }
            }
        }
        // A plain rotation would fail this: A B C | B C A | C A B puts A after C every time.
    }
}
