//! `vrhost_bench::Measurer` for the lab trial runner: what the RFC 2544 and MLRsearch
//! searches drive.
//!
//! Each `trial(load, duration)` runs [`LiveLab::trial`] with this measurer's weights, frame
//! size, warm-up and drain, and returns the counts the searches need: `sent` is what the
//! generator sent (exact, from its own counters), `received` the distinct frames the sink
//! counted after the drain — so an under-offering generator shows as a shortfall (which
//! the searches reject) and never as DUT loss. The effective duration includes warm-up and
//! drain, the time a search really spends. The full per-stream result of the last trial is
//! kept for reports ([`LabMeasurer::last`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use vrhost_bench::trial::{Measurer, Trial};

use super::dut::LiveLab;
use super::generator::auto_interval;
use super::trial::{TrialResult, TrialSpec};

/// A trial that failed (lab gone, interrupted, generator error), for the searches.
#[derive(Debug)]
pub(crate) struct MeasureError(pub(crate) anyhow::Error);

impl std::fmt::Display for MeasureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for MeasureError {}

/// Trials on one lab DUT with fixed weights and frame size (the burst interval follows each
/// trial's load, see `generator::auto_interval`).
#[derive(Debug)]
pub(crate) struct LabMeasurer<'a> {
    lab: &'a mut LiveLab,
    /// Everything but rate and duration, which each trial sets.
    pub(crate) template: TrialSpec,
    stop: Arc<AtomicBool>,
    /// The last trial's full result.
    pub(crate) last: Option<TrialResult>,
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
        }
    }
}

impl Measurer for LabMeasurer<'_> {
    type Error = MeasureError;

    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, MeasureError> {
        let mut spec = self.template.clone();
        spec.rate_pps = Some(load);
        spec.duration = duration;
        spec.interval = auto_interval(load);
        let r = self.lab.trial(&spec, &self.stop).map_err(MeasureError)?;
        let trial = Trial {
            offered_load: load,
            duration,
            sent: r.sent,
            received: r.received,
            effective_duration: Some(spec.warmup + duration + 2 * spec.drain),
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
        let mut lab = LiveLab::up(
            &name,
            Profile::Kernel,
            1,
            Size::Fixed(64),
            None,
            Cores::default_for_host(),
            Scale::ONE,
        )
        .unwrap();
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
        // (see the search below); one lossy trial is tried again, two in a row fail.
        let mut r = run(&mut lab);
        if r.lost > 0 {
            eprintln!("lossy trial, tried again: {r:?}");
            r = run(&mut lab);
        }
        // The pacer is short of the ideal count by less than one burst (a few frames).
        assert!((9_990..=10_000).contains(&r.sent), "{r:?}");
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
}
