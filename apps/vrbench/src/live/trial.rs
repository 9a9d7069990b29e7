//! One trial through a lab DUT: warm up, reset the counters, offer a paced, weighted load for
//! the asked duration, stop, let the DUT drain, and only then read the generator's and the
//! sink's counters.
//!
//! The order is the point (RFC 2544 §23, and the mistake the issue names TRex for):
//!
//! 1. **warm-up** at the trial's rate (default 0.5 s, not counted): caches, neighbour
//!    entries, vrhost's flow cache and the kernel's route cache are filled, page pools
//!    are grown, and the DUT's queues reach their steady state;
//! 2. **drain** (default 200 ms), then **reset**: the generator's sequence numbers and the
//!    sink's state start from zero, with nothing in flight;
//! 3. **traffic** for the duration, paced by the generator's token bucket;
//! 4. **drain** again, then read: every frame still inside the DUT has either arrived or
//!    been dropped, so `sent − unique received` is the DUT's loss, not frames in flight.
//!
//! `received` in the result counts distinct frames (duplicates excluded), so a DUT that
//! duplicates cannot hide loss; duplicates are reported per stream beside it.
//!
//! The achieved rate is what the generator *sent* over the traffic time; if it sent less
//! than 99 % of the asked frames the result says `under_offered` — the generator, not the
//! DUT, was short. `missed` (tokens the pacer discarded) shows a generator held off the CPU
//! even when the total stayed within 1 %.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;
use vrhost_bench::latency::LatencySummary;
use vrhost_io::offcpu::OffCpu;
use vrhost_traffic::Rate;

use super::dut::{Cores, LiveLab, Profile, RxNapi, Scale};
use super::frames::Size;
use super::generator::{DEFAULT_FLUSH, Sent, auto_interval};
use super::histogram::Latencies;
use super::packet_gen;

/// The most the stamped generator is asked for (aggregate frames/s). Measured on this host
/// (2-core KVM guest, Linux 6.18, load 4–7 from other work): unpaced (`vrbench trial --dut
/// none --rate max --seconds 2`) it sends 6.8–9.1 Mpps of 64-byte frames and 6.3 Mpps of
/// 1518-byte ones; paced, it stays within 1 % of the asked rate up to 4 Mpps (−0.003 % to
/// −0.7 % at 0.05–4 Mpps, `--rate R --dut none`). Above 4 Mpps the runs would have to
/// exceed 256 frames (one DUT ring) or the pacer falls behind whenever the host is busy.
pub(crate) const GEN_MAX_PPS: f64 = 4.0e6;

/// Which generator offers a trial's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum GenKind {
    /// The stamped XDP live-frames generator (`generator.rs`): up to [`GEN_MAX_PPS`].
    LiveFrames,
    /// `vrhost_traffic`'s generator over an AF_PACKET socket on `a0` (`packet_gen.rs`): up
    /// to [`packet_gen::MAX_PPS`].
    Afpacket,
    /// `vrhost_traffic`'s generator over an AF_XDP socket on `a0` (`packet_gen.rs`; copy
    /// mode on veth): up to [`packet_gen::MAX_PPS`].
    Afxdp,
}

impl GenKind {
    /// The highest rate the generator is asked for.
    pub(crate) fn max_pps(self) -> f64 {
        match self {
            GenKind::LiveFrames => GEN_MAX_PPS,
            GenKind::Afpacket | GenKind::Afxdp => packet_gen::MAX_PPS,
        }
    }

    /// The generator's name in reports and messages.
    pub(crate) fn label(self) -> &'static str {
        match self {
            GenKind::LiveFrames => "XDP live-frames",
            GenKind::Afpacket => "AF_PACKET",
            GenKind::Afxdp => "AF_XDP",
        }
    }
}

/// What to offer in a trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TrialSpec {
    /// Aggregate offered rate (frames/s), or `None` for as fast as the generator can.
    pub(crate) rate_pps: Option<f64>,
    /// Per-stream weights (one per VR); the rate is shared in their proportion.
    pub(crate) weights: Vec<f64>,
    /// Frame size on the wire (64–1518, or IMIX).
    pub(crate) frame_size: Size,
    /// Counted traffic time.
    #[serde(serialize_with = "secs")]
    pub(crate) duration: Duration,
    /// Uncounted traffic before it.
    #[serde(serialize_with = "secs")]
    pub(crate) warmup: Duration,
    /// Wait after traffic stops before counters are read (and before the reset).
    #[serde(serialize_with = "secs")]
    pub(crate) drain: Duration,
    /// The pacer's burst interval.
    #[serde(serialize_with = "secs")]
    pub(crate) interval: Duration,
    /// Frames per live-frames flush (and page-pool size) inside a run, 1–256.
    pub(crate) flush: u32,
    /// The generator.
    pub(crate) generator: GenKind,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl TrialSpec {
    /// `rate_pps` shared equally over `streams`, 64-byte frames, `duration`, the default
    /// warm-up (0.5 s), drain (200 ms) and burst interval.
    pub(crate) fn new(rate_pps: f64, streams: u32, duration: Duration) -> TrialSpec {
        TrialSpec {
            rate_pps: Some(rate_pps),
            weights: vec![1.0; streams as usize],
            frame_size: Size::Fixed(64),
            duration,
            warmup: Duration::from_millis(500),
            drain: Duration::from_millis(200),
            interval: auto_interval(rate_pps),
            flush: DEFAULT_FLUSH,
            generator: GenKind::LiveFrames,
        }
    }

    /// Check what can be checked before a lab exists; the error says what to change.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.frame_size.check()?;
        if let Some(r) = self.rate_pps {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!("--rate {}: must be positive", r / 1e6));
            }
            if self.generator != GenKind::LiveFrames && r > self.generator.max_pps() {
                return Err(format!(
                    "--rate {} Mpps: above what the {} generator sends through a veth \
                     ({} Mpps; one CPU copies every frame and runs the receive side too); \
                     lower --rate, or use --gen live-frames",
                    r / 1e6,
                    self.generator.label(),
                    self.generator.max_pps() / 1e6
                ));
            }
            if r > GEN_MAX_PPS {
                return Err(format!(
                    "--rate {} Mpps: above what the stamped live-frames generator produces on \
                     this host ({} Mpps paced within 1 %; unpaced it reaches about 7 Mpps, \
                     `--rate max`); lower --rate",
                    r / 1e6,
                    GEN_MAX_PPS / 1e6
                ));
            }
        }
        if self.duration.is_zero() {
            return Err("--seconds: must be positive".into());
        }
        if self.interval < Duration::from_micros(1) || self.interval > Duration::from_millis(10) {
            return Err(format!(
                "--burst-us {}: must be 1 to 10000",
                self.interval.as_micros()
            ));
        }
        if !(1..=256).contains(&self.flush) {
            return Err(format!("--flush {}: must be 1 to 256", self.flush));
        }
        super::wheel::check_weights(&self.weights, self.weights.len())
    }
}

/// One stream's (VR's) part of a trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StreamResult {
    /// The stream id = the VR's index.
    pub(crate) stream: u32,
    /// Frames the generator sent (exact).
    pub(crate) sent: u64,
    /// Frames the sink received, duplicates included.
    pub(crate) received: u64,
    /// Received more than once.
    pub(crate) duplicated: u64,
    /// Arrived after a later frame of the stream.
    pub(crate) reordered: u64,
    /// Of those, more than the sink's window (65 536) behind.
    pub(crate) too_old: u64,
    /// `sent − (received − duplicated)`.
    pub(crate) lost: u64,
    /// Latency of the stream's frames.
    pub(crate) latency: Option<LatencySummary>,
}

/// What a trial measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TrialResult {
    /// The DUT profile.
    pub(crate) profile: Profile,
    /// VRs (= streams).
    pub(crate) vrs: u32,
    /// Extra routes and flows per VR the lab was built with.
    pub(crate) scale: Scale,
    /// The generator's and the DUT's cores, and where `p0`'s receive NAPI ran.
    pub(crate) cores: Cores,
    /// What was asked.
    pub(crate) spec: TrialSpec,
    /// Traffic time the generator really ran (s).
    pub(crate) elapsed_s: f64,
    /// Frames sent, all streams.
    pub(crate) sent: u64,
    /// Distinct frames received, all streams.
    pub(crate) received: u64,
    /// `sent − received`.
    pub(crate) lost: u64,
    /// `lost / sent`.
    pub(crate) loss_ratio: f64,
    /// Frames sent per second of traffic time.
    pub(crate) achieved_pps: f64,
    /// `achieved / asked − 1` (None when unpaced).
    pub(crate) rate_error: Option<f64>,
    /// Tokens the pacer discarded: the generator was held off the CPU longer than its
    /// bucket (one vector) covers, so some frames were never sent; `sent` is what was.
    pub(crate) missed: u64,
    /// The generator sent less than 99 % of the asked frames: it did not offer the load.
    pub(crate) under_offered: bool,
    /// What the hypervisor took from the generator's and the DUT's cores (steal) while the
    /// counted traffic ran and drained; `None` where `/proc/stat` does not say.
    pub(crate) steal: Option<Steal>,
    /// `BPF_PROG_RUN` calls, or bursts handed to the socket with `--gen afpacket|afxdp`.
    pub(crate) bursts: u64,
    /// Frames the generator's own port refused (AF_PACKET: `a0`'s queue full); never sent,
    /// so in neither `sent` nor `lost`.
    pub(crate) tx_full: u64,
    /// Per stream.
    pub(crate) streams: Vec<StreamResult>,
    /// All streams' latency.
    pub(crate) latency: Option<LatencySummary>,
    /// Frames at the sink without a signature (the DUT's own traffic).
    pub(crate) unsigned: u64,
    /// Signed frames of unknown streams.
    pub(crate) unknown: u64,
}

/// The hypervisor's steal on the trial's two cores over the counted traffic and its drain
/// (ms; the kernel counts it in 10 ms ticks, so 0, 10, 20, …).
///
/// Why: on a shared host the hypervisor can hold a vCPU for tens of ms. A generator held
/// off shows it as `missed` tokens, but a DUT core held off shows it only as loss — the
/// host's, not the DUT's. A steady host steals a tick or two a second here; CI once saw a
/// run lose 4.4 % through the kernel with 7.7 ms latencies while its generator was held
/// back too.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Steal {
    /// Taken from the generator's core.
    pub(crate) generator_ms: f64,
    /// Taken from the DUT's core (and `p0`'s NAPI, pinned).
    pub(crate) dut_ms: f64,
    /// What a quiet host takes from a busy core over the same time ([`QUIET_STEAL_SHARE`]
    /// of it): steal beyond this on either core means the host was holding the lab's
    /// cores. In the result so that readers (the live tests among them) judge by the
    /// same rule as [`host_disturbed`].
    pub(crate) quiet_ms: f64,
}

impl Steal {
    /// From readings of the generator's and the DUT's cores, in that order, before and
    /// after, `window_s` apart: the steal between, `None` if either core's is unknown.
    fn between(before: [OffCpu; 2], after: [OffCpu; 2], window_s: f64) -> Option<Steal> {
        let ms = |i: usize| Some(after[i].parts_since(&before[i]).steal?.as_secs_f64() * 1e3);
        Some(Steal {
            generator_ms: ms(0)?,
            dut_ms: ms(1)?,
            quiet_ms: QUIET_STEAL_SHARE * window_s * 1e3,
        })
    }

    /// Whether the hypervisor took more than a quiet host's share from either core.
    pub(crate) fn busy(&self) -> bool {
        self.max_ms() > self.quiet_ms
    }

    /// The larger of the two.
    pub(crate) fn max_ms(&self) -> f64 {
        self.generator_ms.max(self.dut_ms)
    }
}

/// The share of a busy core's time a quiet host's hypervisor takes here: 20–50 ms a second
/// while a trial runs (an idle core about 10), and those trials lose nothing. Well beyond
/// it (310–520 ms a 1.2 s run from the DUT's core, seen 2026-12-02) a kernel lab at
/// 200 kpps lost 3–25 %.
pub(crate) const QUIET_STEAL_SHARE: f64 = 0.03;

/// Whether the host, not the DUT, may have lost a trial's frames: some were lost (`lost`)
/// while the generator fell behind (`under_offered`) or the hypervisor took one of the
/// lab's cores for more than a quiet host's share of the traffic and drain
/// ([`Steal::busy`]).
pub(crate) fn host_disturbed(lost: u64, under_offered: bool, steal: Option<Steal>) -> bool {
    lost > 0 && (under_offered || steal.is_some_and(|s| s.busy()))
}

/// Run one trial on `dut`: `offered_pps_total` shared by `weights`, frames of `frame_size`,
/// for `duration`, with the default warm-up and drain.
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "the library form of `vrbench trial`; tested here")
)]
pub(crate) fn trial(
    dut: &mut LiveLab,
    offered_pps_total: f64,
    weights: &[f64],
    frame_size: Size,
    duration: Duration,
) -> anyhow::Result<TrialResult> {
    let mut spec = TrialSpec::new(offered_pps_total, dut.vrs(), duration);
    spec.weights = weights.to_vec();
    spec.frame_size = frame_size;
    dut.trial(&spec, &AtomicBool::new(false))
}

impl LiveLab {
    /// Run the trial `spec` (see the module docs). Stops early, with an error, if `stop` is
    /// set.
    pub(crate) fn trial(
        &mut self,
        spec: &TrialSpec,
        stop: &AtomicBool,
    ) -> anyhow::Result<TrialResult> {
        spec.check().map_err(anyhow::Error::msg)?;
        if spec.weights.len() != self.vrs() as usize {
            bail!(
                "{} weights for a lab of {} VRs (one stream per VR)",
                spec.weights.len(),
                self.vrs()
            );
        }
        if self.generator.size() != spec.frame_size {
            self.generator.set_size(spec.frame_size)?;
        }
        self.generator.set_weights(&spec.weights)?;
        let rate = spec.rate_pps.map_or(Rate::Unlimited, Rate::Pps);
        let side_a = self.lab().side(vrhost_lab::Side::A);
        let core = self.cores().generator;
        let vrs = self.vrs();
        let dests = self.scale().dests();
        let send = |duration| -> anyhow::Result<Sent> {
            match spec.generator {
                GenKind::LiveFrames => self.generator.run(
                    side_a,
                    core,
                    rate,
                    (spec.interval, spec.flush),
                    duration,
                    stop,
                ),
                GenKind::Afpacket | GenKind::Afxdp => packet_gen::run(
                    spec.generator == GenKind::Afxdp,
                    side_a,
                    core,
                    vrs,
                    spec.frame_size,
                    rate,
                    &spec.weights,
                    dests,
                    spec.interval,
                    duration,
                    stop,
                ),
            }
        };
        if !spec.warmup.is_zero() {
            send(spec.warmup)?;
            std::thread::sleep(spec.drain);
        }
        interrupted(stop)?;
        self.generator.reset()?;
        self.sink.reset()?;
        let other0 = self.sink.other()?;
        let cores = self.cores();
        let steal_now = || [OffCpu::now(cores.generator), OffCpu::now(cores.dut)];
        let steal0 = steal_now();
        let steal_from = std::time::Instant::now();
        let sent = send(spec.duration)?;
        std::thread::sleep(spec.drain);
        let steal = Steal::between(steal0, steal_now(), steal_from.elapsed().as_secs_f64());
        interrupted(stop)?;
        let counts = self.sink.read(other0)?;
        let mut all = Latencies::new();
        let streams: Vec<StreamResult> = counts
            .streams
            .iter()
            .zip(&sent.per_stream)
            .enumerate()
            .map(|(i, (c, &s))| {
                all.merge(&c.latency);
                StreamResult {
                    stream: i as u32,
                    sent: s,
                    received: c.received,
                    duplicated: c.duplicated,
                    reordered: c.reordered,
                    too_old: c.too_old,
                    lost: c.lost(s),
                    latency: c.latency.summary(),
                }
            })
            .collect();
        let total = sent.total();
        let received: u64 = counts.streams.iter().map(|c| c.unique()).sum();
        let received = received.min(total);
        let elapsed = sent.elapsed.as_secs_f64().max(1e-9);
        let achieved = total as f64 / elapsed;
        let asked_frames = spec.rate_pps.map(|r| r * spec.duration.as_secs_f64());
        Ok(TrialResult {
            profile: self.profile(),
            vrs: self.vrs(),
            scale: self.scale(),
            cores: self.cores(),
            spec: spec.clone(),
            elapsed_s: elapsed,
            sent: total,
            received,
            lost: total - received,
            loss_ratio: if total == 0 {
                0.0
            } else {
                (total - received) as f64 / total as f64
            },
            achieved_pps: achieved,
            rate_error: spec.rate_pps.map(|r| achieved / r - 1.0),
            missed: sent.missed,
            under_offered: asked_frames.is_some_and(|a| (total as f64) < 0.99 * a),
            steal,
            bursts: sent.calls,
            tx_full: sent.tx_full,
            streams,
            latency: all.summary(),
            unsigned: counts.unsigned,
            unknown: counts.unknown,
        })
    }
}

fn interrupted(stop: &AtomicBool) -> anyhow::Result<()> {
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

impl TrialResult {
    /// [`host_disturbed`] for this trial.
    pub(crate) fn host_disturbed(&self) -> bool {
        host_disturbed(self.lost, self.under_offered, self.steal)
    }

    /// A few lines for a terminal.
    pub(crate) fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let lat = |l: &Option<LatencySummary>| match l {
            None => "-".to_string(),
            Some(l) => format!(
                "{:.1} / {:.1} / {:.1} / {:.1} / {:.1}",
                l.at(50.0).unwrap_or(0) as f64 / 1e3,
                l.at(90.0).unwrap_or(0) as f64 / 1e3,
                l.at(99.0).unwrap_or(0) as f64 / 1e3,
                l.at(99.9).unwrap_or(0) as f64 / 1e3,
                l.max_ns as f64 / 1e3
            ),
        };
        let asked = self
            .spec
            .rate_pps
            .map_or("unpaced".to_string(), |r| format!("{:.4} Mpps", r / 1e6));
        let _ = writeln!(
            s,
            "{} · {} VR(s) · frame size {} · asked {asked} for {:.2} s ({} generator on core \
             {}; p0 rx NAPI {}{})",
            self.profile.name(),
            self.vrs,
            self.spec.frame_size,
            self.spec.duration.as_secs_f64(),
            self.spec.generator.label(),
            self.cores.generator,
            self.cores.rx.name(),
            match self.cores.rx {
                RxNapi::Inline | RxNapi::Auto => String::new(),
                RxNapi::Pinned | RxNapi::PinnedFifo => format!(" on core {}", self.cores.dut),
            }
        );
        let _ = writeln!(
            s,
            "sent {} in {:.4} s = {:.4} Mpps{}{}; received {}; lost {} ({:.4} %)",
            self.sent,
            self.elapsed_s,
            self.achieved_pps / 1e6,
            self.rate_error.map_or(String::new(), |e| format!(
                " ({:+.3} % of asked)",
                e * 100.0
            )),
            if self.under_offered {
                " — UNDER-OFFERED: the generator fell behind"
            } else {
                ""
            },
            self.received,
            self.lost,
            self.loss_ratio * 100.0
        );
        let _ = writeln!(
            s,
            "latency µs p50 / p90 / p99 / p99.9 / max: {}",
            lat(&self.latency)
        );
        if self.missed > 0 {
            let _ = writeln!(
                s,
                "the pacer missed {} tokens: the generator was held off the CPU for a while",
                self.missed
            );
        }
        if let Some(st) = self.steal.filter(|st| st.max_ms() > 0.0) {
            let _ = writeln!(
                s,
                "the hypervisor took {:.0} ms from the generator's core and {:.0} ms from the \
                 DUT's while traffic ran (loss then may be the host's)",
                st.generator_ms, st.dut_ms
            );
        }
        if self.tx_full > 0 {
            let _ = writeln!(
                s,
                "the generator's port refused {} frames (its queue was full): not sent",
                self.tx_full
            );
        }
        if self.unsigned + self.unknown > 0 {
            let _ = writeln!(
                s,
                "other frames at the sink: {} unsigned, {} of unknown streams",
                self.unsigned, self.unknown
            );
        }
        let _ = writeln!(
            s,
            "{:>6} {:>12} {:>12} {:>10} {:>6} {:>6}  latency µs p50/p90/p99/p99.9/max",
            "stream", "sent", "received", "lost", "dup", "reord"
        );
        for st in self.streams.iter().take(32) {
            let _ = writeln!(
                s,
                "{:>6} {:>12} {:>12} {:>10} {:>6} {:>6}  {}",
                st.stream,
                st.sent,
                st.received,
                st.lost,
                st.duplicated,
                st.reordered,
                lat(&st.latency)
            );
        }
        if self.streams.len() > 32 {
            let _ = writeln!(s, "… {} more streams (see --json)", self.streams.len() - 32);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_is_the_hosts_only_with_the_host_seen_busy() {
        // A 1.2 s window: a quiet host's share is 36 ms.
        let steal = |g, d| {
            Some(Steal {
                generator_ms: g,
                dut_ms: d,
                quiet_ms: 36.0,
            })
        };
        assert_eq!(
            Steal::between([OffCpu::default(); 2], [OffCpu::default(); 2], 1.2),
            None,
            "steal unknown"
        );
        assert!(!host_disturbed(100, false, steal(10.0, 30.0)), "quiet host");
        assert!(!host_disturbed(100, false, None), "steal unknown");
        assert!(
            host_disturbed(100, false, steal(0.0, 40.0)),
            "the DUT's core"
        );
        assert!(
            host_disturbed(100, false, steal(40.0, 0.0)),
            "the generator's"
        );
        assert!(host_disturbed(1, true, steal(0.0, 0.0)), "generator behind");
        // Nothing lost: nothing to excuse, however busy the host.
        assert!(!host_disturbed(0, true, steal(500.0, 500.0)));
        // The share scales with the window: 100 ms of steal in 10 s is quiet, in 1 s not.
        let at = |ms: u64| OffCpu {
            steal_ns: Some(ms * 1_000_000),
            ..OffCpu::default()
        };
        let s10 = Steal::between([at(0); 2], [at(0), at(100)], 10.0).unwrap();
        assert_eq!(
            (s10.generator_ms, s10.dut_ms, s10.quiet_ms),
            (0.0, 100.0, 300.0)
        );
        assert!(!s10.busy());
        assert!(
            Steal::between([at(0); 2], [at(0), at(100)], 1.0)
                .unwrap()
                .busy()
        );
    }
}
