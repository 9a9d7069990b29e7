//! On-demand forwarding cores (Tanyingyong §IV-C/D): forward on as few workers as the load
//! needs, add one when the busiest saturates, give one back when the load would fit on one
//! fewer.
//!
//! Why: on a combined router/server, a core that forwards a little is a core the local
//! applications do not get, and one core forwarding at high load is more efficient than two
//! at half load (batches are fuller; Tanyingyong Fig. 7–8). So forwarding starts on worker 0
//! alone; the others keep their threads but own nothing and sleep (see [`crate::Worker::run`]).
//!
//! A worker's *load* is the share of its capacity the last interval's packets used: packets
//! received and forwarded × what each costs it when batches are full
//! ([`crate::WorkerStats::full_rx_cost`], [`crate::WorkerStats::full_fwd_cost`]), over the
//! interval's cycles. Why not "CPU busy": a
//! poll-mode worker spins all the time, so that always says 100 %. Why not the time spent on
//! packets either: at a low rate every poll finds a packet or two and runs them in tiny
//! batches, each costing several times what it would in a full vector — measured, a worker
//! offered 30 % of its capacity spent 90 % of its time on packets. The cost at full batches
//! is learned whenever a worker sees full bursts and vectors; one that has not (it never
//! came near saturation) is taken to cost what the others do, and if none has, the load
//! counts as 0 — no worker can need help yet. The rule
//! ([`decide`]): if the busiest worker in use stays at or above `high` for `up` intervals in
//! a row, use one more; if the load of all workers in use would fit on one fewer at no more
//! than `low` each, for `down` intervals in a row, use one fewer. The gap between `high`
//! and `low` and the longer `down` streak keep it from flapping. Moving VRs and receive
//! queues is [`crate::Dataplane::set_active_workers`]'s job: lossless and in order.

use crate::Dataplane;

/// When to add and remove forwarding workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalePolicy {
    /// Add a worker when the busiest one in use is at least this loaded (0..1)…
    pub high: f64,
    /// …for this many intervals in a row.
    pub up: u32,
    /// Remove one when the total load would be at most this per worker on one fewer…
    pub low: f64,
    /// …for this many intervals in a row.
    pub down: u32,
}

impl Default for ScalePolicy {
    fn default() -> Self {
        ScalePolicy {
            high: 0.80,
            up: 3,
            low: 0.55,
            down: 10,
        }
    }
}

/// What to do after an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep the workers in use.
    Stay,
    /// Use this many.
    Use(usize),
}

/// The scaler's memory between intervals.
#[derive(Debug, Clone, Default)]
pub struct Streaks {
    up: u32,
    down: u32,
}

/// Decide from the loads (0..1) of the workers in use, out of `max` workers.
pub fn decide(load: &[f64], max: usize, p: &ScalePolicy, s: &mut Streaks) -> Decision {
    let n = load.len();
    let peak = load.iter().copied().fold(0.0, f64::max);
    let total: f64 = load.iter().sum();
    s.up = if peak >= p.high && n < max {
        s.up + 1
    } else {
        0
    };
    s.down = if n > 1 && total <= p.low * (n - 1) as f64 {
        s.down + 1
    } else {
        0
    };
    if s.up >= p.up {
        *s = Streaks::default();
        Decision::Use(n + 1)
    } else if s.down >= p.down {
        *s = Streaks::default();
        Decision::Use(n - 1)
    } else {
        Decision::Stay
    }
}

/// Measures the workers' load at each [`Scaler::tick`] and applies [`decide`].
#[derive(Debug)]
pub struct Scaler {
    policy: ScalePolicy,
    streaks: Streaks,
    /// TSC and each worker's packets (received, forwarded) at the last tick.
    last: Option<(u64, Vec<u64>)>,
}

/// What one tick did.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Load of each worker in use over the interval (0..1).
    pub load: Vec<f64>,
    /// Workers in use after the tick.
    pub active: usize,
    /// Whether it changed, and the VR moves made.
    pub changed: Option<Vec<(String, usize, usize)>>,
}

impl Scaler {
    /// A scaler with `policy`, starting now.
    pub fn new(policy: ScalePolicy) -> Scaler {
        Scaler {
            policy,
            streaks: Streaks::default(),
            last: None,
        }
    }

    /// Measure the interval since the last tick and add or remove a worker if the policy
    /// says so. Call it at a steady pace (the daemon: every 100 ms).
    pub fn tick(&mut self, dp: &Dataplane) -> Tick {
        let now = crate::node::cycles();
        let ws = dp.worker_stats();
        let pkts: Vec<u64> = ws
            .iter()
            .flat_map(|w| [w.rx_packets, w.fwd_packets])
            .collect();
        let active = dp.active_workers();
        let Some((t0, p0)) = self.last.replace((now, pkts.clone())) else {
            return Tick {
                load: Vec::new(),
                active,
                changed: None,
            };
        };
        let dt = now.wrapping_sub(t0).max(1) as f64;
        // A worker that has not seen full batches yet (one just brought in, running below
        // saturation) is taken to cost what the others do: they run the same code.
        let known = |f: fn(&crate::WorkerStats) -> f64| {
            let v: Vec<f64> = ws.iter().map(f).filter(|c| *c > 0.0).collect();
            v.iter().sum::<f64>() / v.len().max(1) as f64
        };
        let (rx_cost, fwd_cost) = (known(|w| w.full_rx_cost), known(|w| w.full_fwd_cost));
        let or = |c: f64, d: f64| if c > 0.0 { c } else { d };
        let load: Vec<f64> = (0..active)
            .map(|w| {
                let rx = pkts[2 * w].wrapping_sub(p0[2 * w]) as f64;
                let fwd = pkts[2 * w + 1].wrapping_sub(p0[2 * w + 1]) as f64;
                let c = (
                    or(ws[w].full_rx_cost, rx_cost),
                    or(ws[w].full_fwd_cost, fwd_cost),
                );
                ((rx * c.0 + fwd * c.1) / dt).min(1.0)
            })
            .collect();
        let changed = match decide(&load, dp.workers(), &self.policy, &mut self.streaks) {
            Decision::Use(n) if n != active => dp.set_active_workers(n).ok(),
            _ => None,
        };
        Tick {
            load,
            active: dp.active_workers(),
            changed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_a_worker_after_a_streak_of_saturation() {
        let p = ScalePolicy::default();
        let mut s = Streaks::default();
        assert_eq!(decide(&[0.9], 2, &p, &mut s), Decision::Stay);
        assert_eq!(decide(&[0.9], 2, &p, &mut s), Decision::Stay);
        assert_eq!(decide(&[0.95], 2, &p, &mut s), Decision::Use(2));
        // A dip resets the streak.
        assert_eq!(decide(&[0.9, 0.2], 3, &p, &mut s), Decision::Stay);
        assert_eq!(decide(&[0.5, 0.2], 3, &p, &mut s), Decision::Stay);
        assert_eq!(decide(&[0.9, 0.2], 3, &p, &mut s), Decision::Stay);
        assert_eq!(decide(&[0.9, 0.2], 3, &p, &mut s), Decision::Stay);
        // Never past the workers there are.
        for _ in 0..10 {
            assert_eq!(decide(&[0.99, 0.99], 2, &p, &mut s), Decision::Stay);
        }
    }

    #[test]
    fn folds_back_when_the_load_fits_on_one_fewer() {
        let p = ScalePolicy::default();
        let mut s = Streaks::default();
        // 0.3 + 0.3 = 0.6 > 0.55: would be too busy on one.
        for _ in 0..20 {
            assert_eq!(decide(&[0.3, 0.3], 2, &p, &mut s), Decision::Stay);
        }
        for i in 0..p.down {
            let d = decide(&[0.25, 0.25], 2, &p, &mut s);
            let want = if i + 1 == p.down {
                Decision::Use(1)
            } else {
                Decision::Stay
            };
            assert_eq!(d, want, "interval {i}");
        }
        // One worker never folds.
        for _ in 0..20 {
            assert_eq!(decide(&[0.0], 2, &p, &mut s), Decision::Stay);
        }
    }
}
