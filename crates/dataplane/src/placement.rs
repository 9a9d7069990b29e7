//! Placement: which worker runs which VR, balanced by measured load.
//!
//! A VR's load is the CPU its vectors took (TSC cycles, measured by its owner for the
//! scheduler) over the last interval. [`plan`] is pure: given the loads, where each VR is,
//! which VRs are pinned and which workers may be used, it proposes a few moves. The control
//! side ([`crate::Dataplane::rebalance`]) measures, plans and moves.
//!
//! The rule: first, every unpinned VR on a worker that may not be used any more goes to the
//! least loaded usable worker (largest first), so a worker can be folded away. Then, while
//! the most and least loaded usable workers differ, move the unpinned VR from the most to
//! the least loaded one that brings the larger of the two down the most (among moves within
//! `margin` of the best, one to the VR's preferred worker first) — only if it brings
//! it down by more than `margin` of the busiest worker's load (hysteresis: measured loads
//! jitter, and a move costs the VR's caches a warm-up), and at most `max_moves` times per
//! call, so load shifts in steps that can be observed. Why not an optimal assignment: it is
//! bin packing, and an optimum that moves half the VRs whenever a load flickers is worse
//! than a greedy step that moves one.

/// One VR as placement sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct VrLoad {
    /// Where it runs now.
    pub worker: usize,
    /// Pinned by config: never moved.
    pub pinned: bool,
    /// Measured load (any unit, the same for all).
    pub load: f64,
    /// The worker it would rather be on, if any: the home of the receive queue that feeds
    /// it, so that moving it there brings its queue back too and its packets stay on one
    /// core.
    pub prefer: Option<usize>,
}

/// Moves `(index into loads, to worker)` that balance the usable workers `usable` (sorted
/// or not; at least one).
pub fn plan(
    loads: &[VrLoad],
    usable: &[usize],
    margin: f64,
    max_moves: usize,
) -> Vec<(usize, usize)> {
    let mut moves = Vec::new();
    if usable.is_empty() {
        return moves;
    }
    let nw = loads
        .iter()
        .map(|v| v.worker + 1)
        .chain(usable.iter().map(|w| w + 1))
        .max()
        .unwrap_or(0);
    let mut at: Vec<usize> = loads.iter().map(|v| v.worker).collect();
    let mut wl = vec![0.0f64; nw];
    for v in loads {
        wl[v.worker] += v.load;
    }
    let lightest = |wl: &[f64]| {
        *usable
            .iter()
            .min_by(|a, b| wl[**a].total_cmp(&wl[**b]).then(a.cmp(b)))
            .expect("usable is not empty")
    };
    // Evacuate unusable workers, largest VR first.
    let mut away: Vec<usize> = (0..loads.len())
        .filter(|&i| !loads[i].pinned && !usable.contains(&loads[i].worker))
        .collect();
    away.sort_by(|&a, &b| loads[b].load.total_cmp(&loads[a].load).then(a.cmp(&b)));
    for i in away {
        let to = lightest(&wl);
        wl[at[i]] -= loads[i].load;
        wl[to] += loads[i].load;
        at[i] = to;
        moves.push((i, to));
    }
    // Balance.
    for _ in 0..max_moves {
        let hi = *usable
            .iter()
            .max_by(|a, b| wl[**a].total_cmp(&wl[**b]).then(b.cmp(a)))
            .expect("usable is not empty");
        let lo = lightest(&wl);
        if hi == lo {
            break;
        }
        let peak = wl[hi];
        let cands: Vec<(usize, f64)> = (0..loads.len())
            .filter(|&i| at[i] == hi && !loads[i].pinned && loads[i].load > 0.0)
            .map(|i| (i, (wl[hi] - loads[i].load).max(wl[lo] + loads[i].load)))
            .collect();
        let Some(floor) = cands.iter().map(|c| c.1).min_by(f64::total_cmp) else {
            break;
        };
        let (i, after) = cands
            .iter()
            .copied()
            .filter(|c| c.1 <= floor + margin * peak)
            .min_by(|a, b| {
                let pa = loads[a.0].prefer != Some(lo);
                let pb = loads[b.0].prefer != Some(lo);
                pa.cmp(&pb).then(a.1.total_cmp(&b.1)).then(a.0.cmp(&b.0))
            })
            .expect("candidates are not empty");
        if peak - after <= margin * peak {
            break;
        }
        wl[hi] -= loads[i].load;
        wl[lo] += loads[i].load;
        at[i] = lo;
        moves.push((i, lo));
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vr(worker: usize, load: f64) -> VrLoad {
        VrLoad {
            worker,
            pinned: false,
            load,
            prefer: None,
        }
    }

    #[test]
    fn balances_by_load_not_by_count() {
        // Worker 0 has a heavy VR and two light ones; worker 1 nothing.
        let l = [vr(0, 60.0), vr(0, 10.0), vr(0, 10.0)];
        let m = plan(&l, &[0, 1], 0.05, 4);
        // Moving the heavy one leaves 20 vs 60; moving both light ones 60 vs 20 too, but
        // one move at a time: the first move that helps most is the heavy VR.
        assert_eq!(m, vec![(0, 1)]);
    }

    #[test]
    fn hysteresis_leaves_a_near_balance_alone() {
        let l = [vr(0, 50.0), vr(1, 48.0), vr(1, 1.0)];
        assert_eq!(plan(&l, &[0, 1], 0.05, 4), vec![]);
    }

    #[test]
    fn pinned_vrs_stay_and_unusable_workers_are_emptied() {
        let mut l = vec![vr(1, 30.0), vr(1, 20.0), vr(0, 5.0)];
        l[1].pinned = true;
        // Worker 1 folds away: its unpinned VR goes to worker 0, the pinned one stays.
        assert_eq!(plan(&l, &[0], 0.05, 4), vec![(0, 0)]);
        // Only pinned load on the busy worker: nothing to move.
        let p = [
            VrLoad {
                worker: 0,
                pinned: true,
                load: 90.0,
                prefer: None,
            },
            vr(1, 1.0),
        ];
        assert_eq!(plan(&p, &[0, 1], 0.05, 4), vec![]);
    }

    #[test]
    fn a_vr_goes_home_when_the_choice_is_otherwise_even() {
        // Four nearly equal VRs on worker 0; VRs 1 and 3 are fed by worker 1's queues.
        let mut l: Vec<VrLoad> = [10.0, 10.1, 9.9, 10.05].iter().map(|&x| vr(0, x)).collect();
        l[1].prefer = Some(1);
        l[3].prefer = Some(1);
        let mut m = plan(&l, &[0, 1], 0.05, 8);
        m.sort();
        assert_eq!(m, vec![(1, 1), (3, 1)]);
    }

    #[test]
    fn spreads_many_equal_vrs_over_new_workers_in_steps() {
        let l: Vec<VrLoad> = (0..8).map(|_| vr(0, 10.0)).collect();
        let m = plan(&l, &[0, 1], 0.05, 16);
        assert_eq!(m.len(), 4, "{m:?}");
        assert!(m.iter().all(|&(_, to)| to == 1));
        assert_eq!(plan(&l, &[0, 1], 0.05, 2).len(), 2, "at most max_moves");
    }
}
