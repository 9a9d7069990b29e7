//! A built data plane with its worker threads, measured in windows.
//!
//! Why windows, and why sessions that stay up: these machines are shared, and another
//! engineer's build can take a core for seconds. One long run lets such a burst spoil the
//! figure; so a run is cut into windows and the median window is reported. And a comparison
//! between two set-ups ("100 VRs ÷ 1 VR", "2 workers ÷ 1", "overloaded ÷ peak") is only fair
//! if both saw the same machine: so several sessions are kept alive at once, their workers
//! parked between windows, and the suite alternates windows between them, comparing each
//! window with its neighbour.
//!
//! Between windows every worker has returned from [`Worker::run`] and waits for its next
//! command, so the counters read there are exact: traffic has stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::bail;
use vrhost_dataplane::Worker;
use vrhost_io::sched::{self, Policy};

use super::report::{self, Report, Snap};
use super::topo::{self, Built, Tables};
use super::traffic::Offer;
use super::{Scenario, tsc};

enum Cmd {
    Run(Arc<AtomicBool>),
    Exit,
}

/// One worker's timing of one window: seconds, TSC ticks.
pub(crate) type Timed = (f64, u64);

/// What one window measured.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) d: Snap,
    pub(crate) timed: Vec<Timed>,
    pub(crate) offers: Vec<Offer>,
}

/// A data plane, its parked workers, and how they were placed.
pub(crate) struct Session {
    pub(crate) sc: Scenario,
    built: Built,
    cmd: Vec<Sender<Cmd>>,
    done: Receiver<(usize, Timed)>,
    threads: Vec<JoinHandle<()>>,
    pub(crate) cores: Vec<Option<usize>>,
    assignment: Vec<String>,
}

impl core::fmt::Debug for Session {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("scenario", &self.sc.name)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Build `sc` and start its workers, pinned, parked until the first window.
    pub(crate) fn start(sc: &Scenario, tables: &mut Tables, hz: f64) -> anyhow::Result<Session> {
        eprintln!("[{}] setting up: {}", sc.name, sc.flags());
        let mut built = topo::build(sc, tables, hz)?;
        let ids = core_affinity::get_core_ids().unwrap_or_default();
        let cores: Vec<Option<usize>> = (0..sc.workers)
            .map(|i| {
                sc.cores
                    .get(i)
                    .copied()
                    .or_else(|| (!ids.is_empty()).then(|| ids[i % ids.len()].id))
            })
            .collect();
        let (done_tx, done) = channel();
        let (pin_tx, pin_rx) = channel();
        let mut cmd = Vec::new();
        let mut threads = Vec::new();
        for (i, w) in std::mem::take(&mut built.workers).into_iter().enumerate() {
            let (tx, rx) = channel();
            cmd.push(tx);
            let (done, pin_tx, core) = (done_tx.clone(), pin_tx.clone(), cores[i]);
            let policy = sc.realtime.map_or(Policy::Ordinary, Policy::Fifo);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || worker(i, w, core, policy, rx, done, pin_tx))?,
            );
        }
        let mut pinned = vec![false; cores.len()];
        let mut refused = None;
        for _ in 0..cores.len() {
            let (i, ok, policy) = pin_rx.recv()?;
            pinned[i] = ok;
            if let Err(e) = policy {
                refused = Some(e);
            }
        }
        if let Some(e) = refused {
            for c in &cmd {
                let _ = c.send(Cmd::Exit);
            }
            for t in threads {
                let _ = t.join();
            }
            bail!(
                "--realtime {}: the kernel refused SCHED_FIFO ({e}); run as root or without --realtime",
                sc.realtime.unwrap_or(0)
            );
        }
        let assignment = cores
            .iter()
            .zip(&pinned)
            .enumerate()
            .map(|(i, (c, p))| match (c, p) {
                (Some(c), true) => format!(
                    "worker {i} → core {c} (pinned{})",
                    sc.realtime
                        .map_or(String::new(), |p| format!(", SCHED_FIFO priority {p}"))
                ),
                (Some(c), false) => format!("worker {i} → core {c} (pinning failed: unpinned)"),
                (None, _) => format!("worker {i} → unpinned (no core list)"),
            })
            .collect();
        Ok(Session {
            sc: sc.clone(),
            built,
            cmd,
            done,
            threads,
            cores,
            assignment,
        })
    }

    /// Run every worker for `secs` with the given offers (one per worker; one per VR with
    /// `--queue-per-vr`), and return the counter difference. Counters are read with all workers stopped.
    pub(crate) fn window(&mut self, secs: f64, offers: &[Offer]) -> anyhow::Result<Window> {
        for (c, o) in self.built.ctl.iter().zip(offers) {
            c.restart(*o);
        }
        let before = Snap::take(&self.built);
        let stop = Arc::new(AtomicBool::new(false));
        for c in &self.cmd {
            c.send(Cmd::Run(stop.clone()))?;
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        let mut timed = vec![(0.0, 0); self.cmd.len()];
        for _ in 0..self.cmd.len() {
            let (i, t) = self.done.recv()?;
            timed[i] = t;
        }
        let d = Snap::take(&self.built).minus(&before);
        Ok(Window {
            d,
            timed,
            offers: offers.to_vec(),
        })
    }

    /// The data plane under test (to add VRs beside the generated ones).
    pub(crate) fn dataplane(&self) -> &vrhost_dataplane::Dataplane {
        &self.built.dp
    }

    /// The data plane and its VRs.
    pub(crate) fn built(&self) -> &Built {
        &self.built
    }

    /// `offer` for every generator control: one per worker, or with `--queue-per-vr` one
    /// per VR (a window turns on only the controls it is given an offer for).
    pub(crate) fn all(&self, offer: Offer) -> Vec<Offer> {
        vec![offer; self.built.ctl.len()]
    }

    /// The report of window `w`, labelled `name`.
    pub(crate) fn report(&self, name: &str, w: &Window) -> Report {
        let mut sc = self.sc.clone();
        sc.name = name.into();
        sc.rate_pps = match w.offers.first() {
            Some(Offer::Rate(r)) => Some(*r),
            _ => None,
        };
        let flags = sc.flags();
        report::make(
            &sc,
            &self.built,
            &w.d,
            &w.timed,
            &w.offers,
            &self.cores,
            self.assignment.clone(),
            flags,
        )
    }

    /// One window of `secs` with `offers`, reported as `name`.
    pub(crate) fn run(
        &mut self,
        name: &str,
        secs: f64,
        offers: &[Offer],
    ) -> anyhow::Result<Report> {
        let w = self.window(secs, offers)?;
        Ok(self.report(name, &w))
    }

    /// Warm up for the scenario's warm-up time at `offer`, then measure its windows; report
    /// the median window, with all windows' rates.
    pub(crate) fn measure(&mut self, offer: Offer) -> anyhow::Result<Report> {
        let k = self.sc.windows;
        let secs = self.sc.seconds / k as f64;
        eprintln!(
            "[{}] running: {:.1} s warm-up, then {k} windows of {secs:.2} s",
            self.sc.name, self.sc.warmup
        );
        let offers = self.all(offer);
        if self.sc.warmup > 0.0 {
            self.window(self.sc.warmup, &offers)?;
        }
        let mut ws = Vec::with_capacity(k);
        for _ in 0..k {
            ws.push(self.window(secs, &offers)?);
        }
        let name = self.sc.name.clone();
        Ok(median_report(
            ws.iter().map(|w| self.report(&name, w)).collect(),
        ))
    }
}

/// The median report by carried rate, carrying every report's rate.
pub(crate) fn median_report(mut rs: Vec<Report>) -> Report {
    let rates: Vec<f64> = rs.iter().map(|r| r.carried_mpps).collect();
    let mut order: Vec<usize> = (0..rs.len()).collect();
    order.sort_by(|&x, &y| rates[x].total_cmp(&rates[y]));
    let mut r = rs.swap_remove(order[order.len() / 2]);
    r.window_carried_mpps = rates;
    r
}

/// The median of `v` (upper median for even lengths); 0 for none.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

impl Drop for Session {
    fn drop(&mut self) {
        for c in &self.cmd {
            let _ = c.send(Cmd::Exit);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn worker(
    i: usize,
    mut w: Worker,
    core: Option<usize>,
    policy: Policy,
    cmd: Receiver<Cmd>,
    done: Sender<(usize, Timed)>,
    pinned: Sender<(usize, bool, Result<(), std::io::Error>)>,
) {
    let ok = core.is_some_and(|id| core_affinity::set_for_current(core_affinity::CoreId { id }));
    // Naps (idle back-off, receive coalescing) are µs long: no 50 µs slack on them.
    let _ = sched::set_timer_slack(Duration::from_micros(1));
    let _ = pinned.send((i, ok, sched::set_policy(policy)));
    while let Ok(Cmd::Run(stop)) = cmd.recv() {
        let (t, c) = (Instant::now(), tsc());
        w.run(&stop);
        let timed = (t.elapsed().as_secs_f64(), tsc().wrapping_sub(c));
        if done.send((i, timed)).is_err() {
            break;
        }
    }
}
