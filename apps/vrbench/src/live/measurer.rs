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

/// Trials on one lab DUT with fixed weights and frame size.
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
