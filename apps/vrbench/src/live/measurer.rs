//! `vrhost_bench::Measurer` for the lab trial runner: what the RFC 2544 and MLRsearch
//! searches drive.
//!
//! Each `trial(load, duration)` runs [`LiveLab::trial`] with this measurer's weights, frame
//! size, warm-up and drain, and returns the counts the searches need: `sent` is what the
//! generator sent (exact, from its own counters), `received` the distinct frames the sink
//! counted after the drain — so an under-offering generator shows as a shortfall (which
//! the searches reject) and never as DUT loss. The effective duration includes warm-up and
//! drain, the time a search really spends (every attempt's, see below). The full
//! per-stream result of the last trial is kept for reports ([`LabMeasurer::last`]).
//!
//! A trial whose loss the host may have caused (the generator behind, or the hypervisor
//! holding a core beyond a quiet host's share) is run again, up to three times; the least
//! disturbed attempt is the one the search sees.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use vrhost_bench::trial::{Measurer, Trial};

use super::dut::LiveLab;
use super::generator::auto_interval;
use super::trial::{TrialResult, TrialSpec};
use crate::attempts::{Runs, least_disturbed};

/// A trial that failed (lab gone, interrupted, generator error), for the searches.
#[derive(Debug)]
pub(crate) struct MeasureError(pub(crate) anyhow::Error);

impl std::fmt::Display for MeasureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for MeasureError {}

/// Runs of one trial, at most, while the host disturbs them.
const ATTEMPTS: u32 = 3;

/// Run trial `spec` on `lab` up to `attempts` times while the host disturbs it
/// ([`TrialResult::host_disturbed`], each disturbed run said on stderr); the least
/// disturbed counts: undisturbed first, then the one that lost least. Returns it and the
/// runs made.
pub(crate) fn least_disturbed_trial(
    lab: &mut LiveLab,
    spec: &TrialSpec,
    stop: &AtomicBool,
    attempts: u32,
) -> anyhow::Result<(TrialResult, Runs)> {
    least_disturbed(attempts, |attempt| {
        let r = lab.trial(spec, stop)?;
        let disturbed = r.host_disturbed();
        if disturbed {
            eprintln!(
                "vrbench: at {:.4} Mpps {} frames were lost while the host was busy (the \
                 generator {}; the hypervisor took {}); {}",
                spec.rate_pps.unwrap_or(0.0) / 1e6,
                r.lost,
                if r.under_offered {
                    "fell behind"
                } else {
                    "kept up"
                },
                r.steal.map_or("?".to_string(), |s| format!(
                    "{:.0} ms from its core and {:.0} ms from the DUT's",
                    s.generator_ms, s.dut_ms
                )),
                if attempt < attempts {
                    "the trial is run again"
                } else if attempts > 1 {
                    "the least disturbed attempt counts"
                } else {
                    "--attempts runs it again"
                }
            );
        }
        let rank = (disturbed, r.lost);
        Ok((r, rank, !disturbed))
    })
}

/// Trials on one lab DUT with fixed weights and frame size (the burst interval follows each
/// trial's load, see `generator::auto_interval`).
#[derive(Debug)]
pub(crate) struct LabMeasurer<'a> {
    lab: &'a mut LiveLab,
    /// Everything but rate and duration, which each trial sets.
    pub(crate) template: TrialSpec,
    stop: Arc<AtomicBool>,
    /// The last trial's full result (of the attempt that counted).
    pub(crate) last: Option<TrialResult>,
    /// Runs the last trial took (1 to [`ATTEMPTS`]) and which of them counted.
    pub(crate) last_runs: Runs,
}

impl<'a> LabMeasurer<'a> {
    /// Equal weights, 64-byte frames, the default warm-up and drain; `stop` ends a trial
    /// early (Ctrl-C).
    pub(crate) fn new(lab: &'a mut LiveLab, stop: Arc<AtomicBool>) -> LabMeasurer<'a> {
        let template = TrialSpec::new(1.0, lab.vrs(), Duration::from_secs(1));
        LabMeasurer {
            lab,
            template,
            stop,
            last: None,
            last_runs: Runs::default(),
        }
    }
}

impl Measurer for LabMeasurer<'_> {
    type Error = MeasureError;

    /// One trial at `load`; one the host disturbed ([`TrialResult::host_disturbed`]) is
    /// run again, up to [`ATTEMPTS`] runs, and the least disturbed counts: undisturbed
    /// first, then the one that lost least. Why: a search takes any loss as the DUT's and
    /// lowers the load, so one busy moment on a shared host would cut the throughput found
    /// (the in-process DUT does the same, `dut_inproc.rs`).
    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, MeasureError> {
        let mut spec = self.template.clone();
        spec.rate_pps = Some(load);
        spec.duration = duration;
        spec.interval = auto_interval(load);
        let (r, runs) =
            least_disturbed_trial(self.lab, &spec, &self.stop, ATTEMPTS).map_err(MeasureError)?;
        self.last_runs = runs;
        let trial = Trial {
            offered_load: load,
            duration,
            sent: r.sent,
            received: r.received,
            effective_duration: Some((spec.warmup + duration + 2 * spec.drain) * runs.made),
            latency: r.latency.clone(),
        };
        self.last = Some(r);
        Ok(trial)
    }
}

#[cfg(test)]
mod tests {
    use vrhost_bench::search::Resolution;
    use vrhost_bench::search::rfc2544::{self, Rfc2544Outcome, Rfc2544Settings};

    use super::super::dut::{Cores, Profile, Scale};
    use super::super::frames::Size;
    use super::*;

    /// A one-VR kernel lab on the host's default cores (its NAPI pinned to the DUT's).
    fn kernel_lab(name: &str) -> LiveLab {
        LiveLab::up(
            name,
            Profile::Kernel,
            1,
            Size::Fixed(64),
            None,
            Cores::default_for_host(),
            Scale::ONE,
        )
        .unwrap()
    }

    /// The searches drive the lab through the Measurer: an RFC 2544 search (short trials,
    /// labelled as such by the settings) through the kernel forwarder at loads it carries
    /// easily finds the maximum load loss-free; and the free `trial` function gives the same
    /// exact counts.
    #[test]
    fn an_rfc2544_search_runs_on_the_kernel_lab() {
        if !vrhost_lab::require_root("Measurer on a lab") {
            return;
        }
        let _alone = crate::cores_alone();
        let name = format!("tlm{}", std::process::id());
        let mut lab = kernel_lab(&name);
        let run = |lab: &mut LiveLab| {
            super::super::trial::trial(
                lab,
                20e3,
                &[1.0],
                Size::Fixed(128),
                Duration::from_millis(500),
            )
            .unwrap()
        };
        // A host stall of a few milliseconds makes the kernel drop what arrives meanwhile
        // (see the search below), and the hypervisor can hold the generator back (CI: 370
        // ms of a 0.5 s trial stolen from its core, 1,293 frames missed): such a trial is
        // tried again, up to three times in all.
        let mut r = run(&mut lab);
        for _ in 0..2 {
            if r.lost == 0 && !r.under_offered {
                break;
            }
            eprintln!("lossy or held back, tried again: {r:?}");
            r = run(&mut lab);
        }
        // The pacer is short of the ideal count by less than one burst (a few frames), what
        // it was held off from sending counted as missed.
        assert!((9_990..=10_000).contains(&(r.sent + r.missed)), "{r:?}");
        assert!(r.sent >= 5_000, "{r:?}");
        assert_eq!((r.received, r.lost), (r.sent, 0), "{r:?}");
        assert_eq!(r.spec.frame_size, Size::Fixed(128));

        let stop = Arc::new(AtomicBool::new(false));
        let mut m = LabMeasurer::new(&mut lab, stop);
        m.template.warmup = Duration::from_millis(100);
        // 50 kpps at most: this test is about the plumbing, and the kernel with its NAPI
        // pinned loses more the faster it is fed (see `LONG_RUNS_FROM_PPS` in `generator.rs`).
        let mut settings = Rfc2544Settings::new(10e3, 50e3);
        settings.trial_duration = Duration::from_millis(500);
        settings.resolution = Resolution::Relative(0.5);
        // What is tested is the plumbing; the generator's accuracy (which a busy host can
        // spoil for a moment) is checked by tests/live.rs and reported as `missed`.
        settings.max_shortfall = None;
        let res = rfc2544::search(&mut m, &settings).unwrap();
        // Lossless at the maximum load nearly always; but the kernel with its NAPI pinned to
        // the other core dropped frames of a fresh lab's first trial in some runs (62 of
        // 24,997; in one CI run 371, while the host stalled for about 6 ms: p99 latency 5.3
        // ms against a median of 28 µs), and then the search goes on below, as it should.
        // What the kernel loses in a stall is not this test's subject; the bound only catches
        // counts gone wrong (a sink that sees half the frames, say).
        let t = &res.trials[0];
        match res.outcome {
            Rfc2544Outcome::MaxLoadLossless => {
                assert_eq!(res.trials.len(), 1, "{res:?}");
                assert_eq!(t.received, t.sent);
            }
            Rfc2544Outcome::Converged => {
                assert!(
                    t.received < t.sent && t.received * 10 >= t.sent * 9,
                    "{t:?}"
                );
                let tp = res.throughput.expect("a lossless load below");
                assert!((10e3..50e3).contains(&tp), "{res:?}");
                let last = res.trials.iter().find(|t| t.offered_load == tp).unwrap();
                assert_eq!(last.received, last.sent, "{res:?}");
            }
            other => panic!("{other:?}: {res:?}"),
        }
        assert_eq!(t.offered_load, 50e3);
        assert!(t.sent > 0 && t.sent <= 25_000, "{t:?}");
        assert!(t.latency.as_ref().is_some_and(|l| l.min_ns > 0));
        assert!(m.last.as_ref().is_some_and(|l| l.streams.len() == 1));
        drop(m);
        drop(lab);
        assert!(vrhost_lab::Lab::namespaces_of(&name).unwrap().is_empty());
    }

    /// A trial the host disturbed is run again: a real-time thread takes the DUT's core for
    /// 60 ms during the counted traffic (the kernel's NAPI, pinned there, cannot run, so
    /// what arrives beyond `p0`'s ring is lost), then the generator's core for 40 ms (it
    /// falls behind: `under_offered`). The measurer runs the trial again and the search
    /// sees a later attempt, not the one that lost the frames.
    #[test]
    fn a_trial_the_host_disturbed_is_run_again() {
        if !vrhost_lab::require_root("Measurer on a lab, real-time hogs") {
            return;
        }
        let _alone = crate::cores_alone();
        let name = format!("tlh{}", std::process::id());
        let mut lab = kernel_lab(&name);
        let cores = lab.cores();
        let stop = Arc::new(AtomicBool::new(false));
        let mut m = LabMeasurer::new(&mut lab, stop);
        m.template.warmup = Duration::from_millis(100);
        let (load, secs) = (50e3, 0.5);
        // The counted traffic starts after the warm-up and a drain, 300 ms in.
        let hog = |core: usize, from_ms: u64, for_ms: u64| {
            std::thread::spawn(move || {
                assert!(core_affinity::set_for_current(core_affinity::CoreId {
                    id: core
                }));
                std::thread::sleep(Duration::from_millis(from_ms));
                vrhost_io::sched::set_policy(vrhost_io::sched::Policy::Fifo(50)).unwrap();
                let t0 = std::time::Instant::now();
                while t0.elapsed() < Duration::from_millis(for_ms) {
                    std::hint::spin_loop();
                }
                vrhost_io::sched::set_policy(vrhost_io::sched::Policy::Ordinary).unwrap();
            })
        };
        let hogs = [hog(cores.dut, 450, 60), hog(cores.generator, 510, 40)];
        let t = m.trial(load, Duration::from_secs_f64(secs)).unwrap();
        for h in hogs {
            h.join().unwrap();
        }
        let r = m.last.as_ref().unwrap();
        eprintln!(
            "{:?}; the one counted: sent {}, lost {}, steal {:?}",
            m.last_runs, r.sent, r.lost, r.steal
        );
        assert!(
            m.last_runs.made >= 2,
            "the disturbed trial was not run again"
        );
        // The hogged attempt lost about 60 ms of frames less a ring (~2,700) and is the
        // first; a later one counts, whatever it lost. (A CI run's second attempt, judged
        // quiet, lost 4,695 frames in a stall nothing attributed: that one counts, as it
        // should, and what the kernel loses unprovoked is not this test's subject.)
        assert!(
            m.last_runs.counted >= 2,
            "the hogged attempt counted: {:?}, {r:?}",
            m.last_runs
        );
        assert_eq!((t.sent, t.received), (r.sent, r.received));
        drop(m);
        drop(lab);
        assert!(vrhost_lab::Lab::namespaces_of(&name).unwrap().is_empty());
    }
}
