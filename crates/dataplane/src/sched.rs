//! Fair sharing of a worker between the VRs it runs: weighted stride scheduling, the cost
//! meter that makes it fair in CPU cycles, and the watchdog.
//!
//! **Stride scheduling** (Egi §3.2: Click's proportional-share scheduler, after Waldspurger
//! and Weihl). Each VR has a *pass*. The scheduler runs the backlogged VR with the smallest
//! pass for one vector, then advances its pass by the work that vector did divided by the
//! VR's weight. Over any stretch in which several VRs stay backlogged, each gets work in
//! proportion to its weight, within one vector; the order is deterministic (no randomness
//! to make tests flaky), a pick costs a scan of the VRs that have packets, and weights can
//! change at any moment (the next charge uses the new one). A VR that had nothing to do
//! rejoins at the worker's current virtual time: it hoards no credit while idle (it cannot
//! come back and monopolise the core), and loses none either (a VR using less than its
//! share is served as soon as it has packets — which is why a light VR loses nothing next
//! to an overloaded one).
//!
//! Rejected: round robin with a vector each (what the worker did before): equal *vectors*
//! is neither weighted nor equal packets once vectors are partial. Deficit round robin
//! needs a quantum per weight and serves in rounds, so a VR's share within a round depends
//! on where the round started; lottery scheduling is only fair on average.
//!
//! **Work** is packets ([`Fairness::Packets`]) or CPU cycles ([`Fairness::Cycles`], Egi
//! §3.3.1). In cycles mode the charge is packets × the VR's *cost*, a moving average of
//! cycles per packet measured with the TSC around each vector (rx-ring pop to tx flush:
//! the VR's whole path). Egi sampled one packet in twenty because Click timed single
//! packets; here a vector is timed as a whole, two TSC reads per up to 256 packets, so every
//! vector is a sample and the cost of measuring is under a cycle per packet. The average
//! (1/16 per vector) rather than each vector's own time is charged so that one vector that
//! lost the core to the OS does not punish its VR: a sample is also clipped to 4× the
//! average before it counts. The cost includes the transmit flush (the CPU the VR's packets
//! took to hand to the port); the watchdog judges the path without it (see
//! [`VrSched::charge`]).
//!
//! **Watchdog** (Egi §3.3): a vector that holds the core longer than a budget is an
//! offence. One offence is not enough to act on — on a shared machine the OS preempts a
//! worker in the middle of a vector now and then — so a VR is quarantined when
//! [`Watchdog::strikes`] of its last [`WATCH_WINDOW`] vectors offended: preemption hits a VR
//! at random and rarely twice in a few dozen vectors, a path that is too slow offends again
//! and again.
//!
//! Strikes alone were not enough: with 64 VRs on workers that share their cores with
//! other busy threads (`vrbench fwd`'s 2-queue layout), VRs were quarantined — and their
//! tenants cut off until an operator released them — by preemption alone (29,214
//! `vr-quarantined` drops in one run). So the TSC only raises a suspicion: a VR's first
//! vector over budget is [`Verdict::Excused`] and *arms* the VR for [`WATCH_WINDOW`]
//! vectors, during which the worker also reads its thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`, a system call: only while armed) and the monotonic clock
//! around the path ([`PathTime::OnCpu`]). The watchdog then judges the share of the path's
//! cycles the thread held its CPU: time spent preempted is excused; a path that burns the
//! budget on the CPU offends as before. A slow path is therefore quarantined one vector
//! later than before (the arming vector), and preemption never is.

/// What the scheduler shares out equally (or by weight) between backlogged VRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Fairness {
    /// Packets: each VR forwards packets in proportion to its weight (Egi §3.2).
    #[default]
    Packets,
    /// CPU cycles: each VR gets core time in proportion to its weight, so a VR whose path
    /// costs more forwards proportionally fewer packets (Egi §3.3.1, Fig. 7).
    Cycles,
}

impl Fairness {
    /// `packets` or `cycles`.
    pub const fn name(self) -> &'static str {
        match self {
            Fairness::Packets => "packets",
            Fairness::Cycles => "cycles",
        }
    }
}

/// How a worker picks the next VR to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Scheduler {
    /// Weighted stride scheduling with receive back-pressure (this module).
    #[default]
    Stride,
    /// The scheduler before issue 7, kept as the baseline benchmarks compare against: every
    /// VR gets up to one vector per receive queue per poll, in VR order; one burst per
    /// receive queue per poll. Ignores weights and fairness.
    RoundRobin,
}

/// The watchdog's rule: a vector over `budget_cycles` is an offence; `strikes` offences
/// among a VR's last [`WATCH_WINDOW`] vectors quarantine it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Watchdog {
    /// TSC cycles one vector of one VR may take (input to tx flush).
    pub budget_cycles: u64,
    /// Offences within the window that quarantine the VR (1..=32).
    pub strikes: u32,
}

/// Vectors the watchdog remembers per VR.
pub const WATCH_WINDOW: u32 = 32;

/// Pass advanced per unit of work at weight 1.
const STRIDE1: u64 = 1 << 16;
/// Work charged for one vector is capped here (2^40 cycles: minutes), so the pass
/// arithmetic cannot overflow whatever a path costs.
const MAX_WORK: u64 = 1 << 40;

/// `a` comes before `b` in pass order. Passes wrap; VRs that are being compared are never
/// 2^63 apart (the gap between backlogged VRs is bounded by one vector's charge, and idle
/// VRs are brought up to the virtual time before they compete).
#[inline(always)]
pub(crate) fn before(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

/// Per-VR scheduling state, kept by the VR's owner and handed over with the VR.
#[derive(Debug, Clone, Default)]
pub(crate) struct VrSched {
    /// Stride pass.
    pub(crate) pass: u64,
    /// Cycles per packet × 16, moving average (0 = not measured yet).
    pub(crate) cost_x16: u64,
    /// Offences among the last [`WATCH_WINDOW`] vectors, newest in bit 0.
    pub(crate) history: u32,
    /// Vectors left during which the worker times the path on the thread's CPU clock too
    /// (armed by a vector over budget on the TSC; see the module docs).
    pub(crate) armed: u32,
}

/// What the watchdog knows of a vector's path time (before the transmit flush).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathTime {
    /// Exact cycles (a test's cost model): judged as they are.
    Exact(u64),
    /// TSC cycles from start to end, whether or not the thread held its CPU throughout.
    Wall(u64),
    /// TSC cycles, and over the same span the nanoseconds that passed and that the thread
    /// spent on its CPU.
    OnCpu {
        cycles: u64,
        wall_ns: u64,
        cpu_ns: u64,
    },
}

impl PathTime {
    /// The cycles, however measured.
    fn cycles(self) -> u64 {
        match self {
            PathTime::Exact(c) | PathTime::Wall(c) | PathTime::OnCpu { cycles: c, .. } => c,
        }
    }
}

/// What the watchdog concluded about one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Within budget (or no watchdog).
    Ok,
    /// Over budget.
    Offence,
    /// Over budget on the TSC, but not an offence: the VR's first such vector (it is armed
    /// now), or one during which the thread was off its CPU for the time over budget.
    Excused,
    /// Over budget, and the VR has now offended too often: quarantine it.
    Quarantine,
}

impl VrSched {
    /// Bring an idle VR up to the worker's virtual time before it competes again.
    #[inline(always)]
    pub(crate) fn rejoin(&mut self, vtime: u64) {
        if before(self.pass, vtime) {
            self.pass = vtime;
        }
    }

    /// The cycles to account to the VR for a vector of `packets` that took `cycles`: what it
    /// took, unless that is over 4× its recent cost — then the vector was almost certainly
    /// preempted (the OS took the core, not the VR), and it is counted at the recent cost.
    /// (Before [`VrSched::charge`] of the same vector.)
    #[inline]
    pub(crate) fn account(&self, packets: usize, cycles: u64) -> u64 {
        let n = packets.max(1) as u64;
        if self.cost_x16 != 0 && cycles.saturating_mul(16) > 4 * self.cost_x16 * n {
            self.cost_x16 * n / 16
        } else {
            cycles
        }
    }

    /// Cycles per packet, moving average (0 before the first vector).
    #[cfg(test)]
    pub(crate) fn cost(&self) -> u64 {
        self.cost_x16 / 16
    }

    /// Account for one vector of `packets` that took `cycles` in all, `path` of them in the
    /// forwarding path (before the transmit flush): update the cost, advance the pass, and
    /// ask the watchdog, which judges the path alone — a flush into a kernel socket can run
    /// the receiving side's stack inline (AF_PACKET on veth), and that is not the VR's path
    /// holding the core.
    #[inline]
    pub(crate) fn charge(
        &mut self,
        packets: usize,
        cycles: u64,
        path: PathTime,
        weight: u32,
        fairness: Fairness,
        watchdog: Option<Watchdog>,
    ) -> Verdict {
        let n = packets.max(1) as u64;
        let over = watchdog.is_some_and(|w| path.cycles() > w.budget_cycles);
        let armed = self.armed > 0;
        self.armed = self.armed.saturating_sub(1);
        let offence = over
            && match (path, watchdog) {
                (PathTime::Exact(_), _) => true,
                (
                    PathTime::OnCpu {
                        cycles,
                        wall_ns,
                        cpu_ns,
                    },
                    Some(w),
                ) => {
                    let on = u128::from(cycles) * u128::from(cpu_ns.min(wall_ns))
                        / u128::from(wall_ns.max(1));
                    on > u128::from(w.budget_cycles)
                }
                // Armed, yet only the TSC known: judged by it.
                (PathTime::Wall(_), _) => armed,
                _ => false,
            };
        if over {
            // Armed (again) until a window of vectors has passed within budget.
            self.armed = WATCH_WINDOW;
        }
        // A vector over budget says more about the watchdog than about the cost.
        if !over {
            let mut sample = cycles.min(MAX_WORK) * 16 / n;
            if self.cost_x16 == 0 {
                self.cost_x16 = sample.max(1);
            } else {
                sample = sample.min(4 * self.cost_x16);
                let c = self.cost_x16 as i64;
                self.cost_x16 = (c + (sample as i64 - c) / 16).max(1) as u64;
            }
        }
        let work = match fairness {
            Fairness::Packets => n * 16,
            Fairness::Cycles => (n * self.cost_x16.max(16)).min(MAX_WORK),
        };
        self.pass = self
            .pass
            .wrapping_add(work * STRIDE1 / u64::from(weight.max(1)));
        self.history = (self.history << 1) | u32::from(offence);
        match watchdog {
            Some(w) if offence && self.history.count_ones() >= w.strikes => Verdict::Quarantine,
            _ if offence => Verdict::Offence,
            _ if over => Verdict::Excused,
            _ => Verdict::Ok,
        }
    }
}

/// Jain's fairness index of `x` (1 = all equal, 1/n = one takes everything); 1 for none.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Backlogged VRs with the given weights and per-packet costs, scheduled for `vectors`
    /// full vectors: the packets and cycles each got.
    fn simulate(
        weights: &[u32],
        costs: &[u64],
        fairness: Fairness,
        vectors: usize,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut s = vec![VrSched::default(); weights.len()];
        let (mut pkts, mut cyc) = (vec![0; weights.len()], vec![0; weights.len()]);
        let mut vtime = 0;
        for _ in 0..vectors {
            for v in s.iter_mut() {
                v.rejoin(vtime);
            }
            let i = (0..s.len())
                .min_by(|&a, &b| {
                    if before(s[a].pass, s[b].pass) {
                        core::cmp::Ordering::Less
                    } else if s[a].pass == s[b].pass {
                        a.cmp(&b)
                    } else {
                        core::cmp::Ordering::Greater
                    }
                })
                .unwrap();
            vtime = s[i].pass;
            s[i].charge(
                256,
                256 * costs[i],
                PathTime::Exact(256 * costs[i]),
                weights[i],
                fairness,
                None,
            );
            pkts[i] += 256;
            cyc[i] += 256 * costs[i];
        }
        (pkts, cyc)
    }

    #[test]
    fn equal_weights_share_packets_equally() {
        let (p, _) = simulate(&[1, 1, 1], &[100, 100, 100], Fairness::Packets, 3000);
        assert_eq!(p, vec![256_000; 3]);
    }

    #[test]
    fn weights_give_proportional_shares() {
        let (p, _) = simulate(&[1, 2, 3], &[100, 100, 100], Fairness::Packets, 6000);
        // Within one vector of the exact shares (strides are rounded to integers).
        for (got, want) in p.iter().zip([256_000u64, 512_000, 768_000]) {
            assert!(got.abs_diff(want) <= 256, "{p:?}");
        }
    }

    #[test]
    fn cycles_mode_equalises_cpu_not_packets() {
        // One path costs 40 % more (Egi Fig. 7).
        let costs = [140, 100, 100];
        let (p, c) = simulate(&[1, 1, 1], &costs, Fairness::Packets, 3000);
        assert_eq!(p[0], p[1], "packets mode: equal packets");
        assert!(c[0] > c[1]);
        let (p, c) = simulate(&[1, 1, 1], &costs, Fairness::Cycles, 3000);
        let shares: Vec<f64> = c.iter().map(|&x| x as f64).collect();
        assert!(jain(&shares) > 0.999, "{c:?}");
        let ratio = p[0] as f64 / p[1] as f64;
        assert!((ratio - 100.0 / 140.0).abs() < 0.02, "{ratio}");
    }

    #[test]
    fn passes_compare_across_wraparound() {
        assert!(before(u64::MAX - 5, 3));
        assert!(!before(3, u64::MAX - 5));
        let mut s = VrSched {
            pass: u64::MAX - 10,
            ..Default::default()
        };
        s.rejoin(5);
        assert_eq!(s.pass, 5);
        s.rejoin(1);
        assert_eq!(s.pass, 5, "never moved back");
    }

    #[test]
    fn watchdog_needs_repeated_offences() {
        let w = Some(Watchdog {
            budget_cycles: 1000,
            strikes: 3,
        });
        let mut s = VrSched::default();
        // Offences far apart (a preempted vector now and then) never add up to three in
        // the window.
        for round in 0..10 {
            assert_eq!(
                s.charge(256, 5000, PathTime::Exact(5000), 1, Fairness::Packets, w),
                Verdict::Offence,
                "{round}"
            );
            for _ in 0..WATCH_WINDOW {
                assert_eq!(
                    s.charge(256, 900, PathTime::Exact(900), 1, Fairness::Packets, w),
                    Verdict::Ok
                );
            }
        }
        assert_eq!(s.cost(), 900 / 256, "offending samples are not costs");
        assert_eq!(
            s.charge(256, 5000, PathTime::Exact(5000), 1, Fairness::Packets, w),
            Verdict::Offence
        );
        assert_eq!(
            s.charge(256, 900, PathTime::Exact(900), 1, Fairness::Packets, w),
            Verdict::Ok
        );
        assert_eq!(
            s.charge(256, 5000, PathTime::Exact(5000), 1, Fairness::Packets, w),
            Verdict::Offence
        );
        assert_eq!(
            s.charge(256, 5000, PathTime::Exact(5000), 1, Fairness::Packets, w),
            Verdict::Quarantine
        );
        // Time spent flushing to the port is the VR's cost but not the watchdog's concern.
        let mut t = VrSched::default();
        for _ in 0..WATCH_WINDOW {
            assert_eq!(
                t.charge(256, 5000, PathTime::Exact(900), 1, Fairness::Packets, w),
                Verdict::Ok
            );
        }
        assert_eq!(t.cost(), 5000 / 256);
    }

    /// On the real clock: the first vector over budget only arms the VR; then a vector whose
    /// thread was off its CPU for the excess is excused, however often; one that spent the
    /// budget on the CPU offends, and three of those quarantine. Arming lapses after a
    /// window of vectors within budget.
    #[test]
    fn watchdog_excuses_preemption_and_judges_cpu_time() {
        let w = Some(Watchdog {
            budget_cycles: 1000,
            strikes: 3,
        });
        let mut s = VrSched::default();
        let charge = |s: &mut VrSched, path| s.charge(256, 5000, path, 1, Fairness::Packets, w);
        assert_eq!(charge(&mut s, PathTime::Wall(5000)), Verdict::Excused);
        assert_eq!(s.armed, WATCH_WINDOW);
        // 5,000 cycles over 5 µs of which 0.5 µs on the CPU: 500 cycles on it.
        let preempted = PathTime::OnCpu {
            cycles: 5000,
            wall_ns: 5000,
            cpu_ns: 500,
        };
        for _ in 0..100 {
            assert_eq!(charge(&mut s, preempted), Verdict::Excused);
        }
        assert_eq!(s.history, 0);
        let busy = PathTime::OnCpu {
            cycles: 5000,
            wall_ns: 5000,
            cpu_ns: 4900,
        };
        assert_eq!(charge(&mut s, busy), Verdict::Offence);
        assert_eq!(charge(&mut s, busy), Verdict::Offence);
        assert_eq!(charge(&mut s, busy), Verdict::Quarantine);
        // Disarmed after a window within budget; then the TSC alone only arms again.
        let mut s = VrSched::default();
        assert_eq!(charge(&mut s, PathTime::Wall(5000)), Verdict::Excused);
        for _ in 0..WATCH_WINDOW {
            assert_eq!(
                s.charge(256, 900, PathTime::Wall(900), 1, Fairness::Packets, w),
                Verdict::Ok
            );
        }
        assert_eq!(s.armed, 0);
        assert_eq!(charge(&mut s, PathTime::Wall(5000)), Verdict::Excused);
        assert_eq!(s.history, 0);
    }

    #[test]
    fn cost_is_a_clipped_moving_average() {
        let mut s = VrSched::default();
        assert_eq!(s.account(100, 10_000), 10_000, "nothing known yet");
        s.charge(
            100,
            10_000,
            PathTime::Exact(10_000),
            1,
            Fairness::Cycles,
            None,
        );
        assert_eq!(s.cost(), 100);
        // A preempted vector is accounted at the recent cost; a slower one as measured.
        assert_eq!(s.account(100, 1_000_000), 10_000);
        assert_eq!(s.account(100, 30_000), 30_000);
        // One vector 100× slower (preempted) moves the average by at most 3/16 of it.
        s.charge(
            100,
            1_000_000,
            PathTime::Exact(1_000_000),
            1,
            Fairness::Cycles,
            None,
        );
        assert!(s.cost() < 120, "{}", s.cost());
        for _ in 0..200 {
            s.charge(
                100,
                20_000,
                PathTime::Exact(20_000),
                1,
                Fairness::Cycles,
                None,
            );
        }
        assert_eq!(s.cost(), 199, "follows a lasting change");
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain(&[1.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }
}
