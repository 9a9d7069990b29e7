//! `vrbench trial`: one rate-controlled trial of signed traffic through a lab DUT, counted
//! per stream — the building block of the RFC 2544 / MLRsearch measurements over veth, and
//! a command to try a DUT by hand.
//!
//! Why a second live-frames path beside `vrbench fwd`: `fwd` offers all it can and counts
//! frames per VR, which measures throughput with loss. RFC 2544 needs a *given* offered
//! rate, exact sent counts, loss per stream, reordering, duplication and latency — so the
//! generator here paces its runs and stamps every frame (`crates/traffic/XDP.md`, built),
//! and the sink reads the stamps:
//!
//! * [`frames`]: the stamped frames and their templates;
//! * [`wheel`]: how the aggregate rate is shared among streams by weight;
//! * [`generator`]: the XDP program that stamps sequence numbers and `bpf_ktime_get_ns()`,
//!   and the paced thread that runs it; [`packet_gen`]: the alternative, `vrhost_traffic`'s
//!   generator over an AF_PACKET or AF_XDP socket (`--gen afpacket|afxdp`);
//! * [`sink`]: the tc program at `b0` counting received/duplicated/reordered per stream and
//!   latency; [`histogram`]: its buckets and percentiles;
//! * [`dut`]: the profiles and their labs; [`trial`]: the trial runner (warm-up, reset,
//!   traffic, drain, read); [`measurer`]: `vrhost_bench::Measurer` over it.
//!
//! Bad input — a frame size outside 64–1518, an unknown profile (clap), a rate above the
//! generator's ceiling, several VRs for `kernel`, weights that do not match the VRs, no
//! root, no vrhost binary — is refused with a message saying what to change before any
//! namespace is created. The lab is torn down on every exit path: errors and panics drop
//! it, and SIGINT/SIGTERM set a flag that ends the trial early and unwinds (a second
//! signal exits at once and may leave the lab: `vrbench lab down --name …`).
//!
//! Where `p0`'s receive NAPI runs (`--rx-napi`, default `auto`: pinned to the DUT core for
//! the kernel profiles) is in `dut.rs`; with it pinned, the kernel at 0.3 Mpps showed p50
//! latency 72–75 µs against 1.7 µs inline (a wake-up of the NAPI thread on the other vCPU per
//! burst; docs/perf.md, "The kernel DUT on its own core").
//!
//! # Figures
//!
//! 2-core KVM guest, Linux 6.18, shared with other engineers' builds (load 4–7); rerun
//! with the commands shown.
//!
//! * Generator ceiling with stamping, `vrbench trial --dut none --rate max --seconds 2`:
//!   6.8–9.5 Mpps (64 B), 6.3 Mpps (1518 B), 8.1 Mpps (IMIX).
//! * Achieved vs asked, `vrbench trial --dut none --rate R --seconds 2`, R = 0.05, 0.5, 1,
//!   2, 4 Mpps, twice each: 18 of 20 runs within 0.11 % (most within 0.02 %); two runs at
//!   −1.9 % (0.5 Mpps) and −1.3 % (2 Mpps) while the host was busy — those results show the
//!   pacer's `missed` tokens, and `under_offered` when outside 1 %.
//! * `vrbench trial --dut D --rate 0.05 --seconds 2`, 1 VR, 64 B (before `--rx-napi`: the
//!   kernel profiles' NAPI inline on the generator's core; now `--rx-napi inline`): every
//!   profile lossless;
//!   p50 / p99 latency: kernel 1.7 / 3.0 µs, kernel-macvlan 1.9 / 6.4 µs, kernel-bridge
//!   4.5 / 8.4 µs, vrhost-afxdp 73 µs / 6.7 ms, vrhost-afpacket 0.7 / 6.6 ms (vrhost's
//!   worker shares core 0 with the other work on this host).
//! * `--gen afpacket` (64 B, 2 s, load 4–5): unpaced 1.64 Mpps into `--dut none`, 0.94 Mpps
//!   through `--dut kernel` (its forwarding on the sender's CPU); paced 0.05 Mpps through
//!   kernel lossless, p50 / p99 3.4 / 7.5 µs; 1 Mpps asked through kernel −7.4 %
//!   (under-offered). Hence its 1 Mpps limit.
//! * `--gen afxdp` (64 B, 2 s, load 1–2): unpaced 0.75–0.84 Mpps into `--dut none`, 0.72–1.10
//!   Mpps offered through `--dut kernel` (which carried 0.56–0.69); paced 0.05 and 0.5 Mpps
//!   within 0.003 %, 0.8 Mpps −5.5 % (under-offered); 0.3 Mpps through vrhost-afxdp
//!   lossless, p50 / p99 22 / 161 µs. The same 1 Mpps limit.

pub(crate) mod dut;
pub(crate) mod frames;
pub(crate) mod generator;
mod histogram;
pub(crate) mod measurer;
pub(crate) mod packet_gen;
mod sink;
pub(crate) mod testpmd;
pub(crate) mod trial;
mod wheel;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use dut::{Cores, LiveLab, Profile, RxNapi, Scale};
use trial::{GEN_MAX_PPS, GenKind, TrialSpec};

/// Options of `vrbench trial`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// The DUT profile.
    #[arg(long, value_enum)]
    dut: Profile,
    /// Aggregate offered rate in Mpps (shared by the VRs' streams by --weights); `max`
    /// sends as fast as the generator can (no pacing).
    #[arg(long)]
    rate: String,
    /// The generator: XDP live frames (fastest), or `vrhost_traffic`'s generator over
    /// AF_PACKET (the backend vrhost uses on any interface) or AF_XDP (vrhost's fast
    /// backend; copy mode on veth) — each up to 1 Mpps.
    #[arg(long = "gen", value_enum, default_value = "live-frames")]
    generator: GenKind,
    /// Counted seconds of traffic.
    #[arg(long, default_value_t = 1.0, value_parser = crate::number::quantity)]
    seconds: f64,
    /// VRs, one stream each.
    #[arg(long, default_value_t = 1)]
    vrs: u32,
    /// Extra /24 routes per VR (16.0.0.0/24, 16.0.1.0/24, …), via its side-B host.
    #[arg(long, default_value_t = 0)]
    routes: u32,
    /// Destinations per VR's stream, consecutive from 16.0.0.1 when more than 1 or with
    /// --routes (else the VR's side-B host).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// VIFs per VR: 2 carry the traffic; vrhost profiles add idle MAC-demux VIFs on p0.
    #[arg(long, default_value_t = 2)]
    vifs: u32,
    /// Frame size on the wire, FCS included (64–1518), or `imix` (64, 570, 1518 in 7:4:1).
    #[arg(long, default_value = "64")]
    frame_size: frames::Size,
    /// Per-VR weights of the rate (comma-separated, one per VR) [default: equal].
    #[arg(long, value_delimiter = ',', value_parser = crate::number::quantity)]
    weights: Option<Vec<f64>>,
    /// Uncounted seconds of traffic before the trial.
    #[arg(long, default_value_t = 0.5, value_parser = crate::number::quantity)]
    warmup: f64,
    /// Wait after traffic stops before reading counters (ms).
    #[arg(long, default_value_t = 200)]
    drain_ms: u64,
    /// The pacer's burst interval in µs (bursts of rate × interval frames, at most 256)
    /// [default: 20 µs at low rates, longer as the rate needs bigger runs; see
    /// `generator.rs`].
    #[arg(long)]
    burst_us: Option<u64>,
    /// Frames per live-frames flush inside a run (1–256); also the run's page-pool size.
    #[arg(long, default_value_t = generator::DEFAULT_FLUSH)]
    flush: u32,
    /// Where p0's receive NAPI runs: `auto` is `pinned-fifo` (threaded, pinned to core 0,
    /// SCHED_FIFO) for the kernel profiles and `inline` (on the generator's core) for vrhost.
    #[arg(long, value_enum, default_value_t = RxNapi::Auto)]
    rx_napi: RxNapi,
    /// Lab name [default: trial<pid>].
    #[arg(long)]
    name: Option<String>,
    /// The vrhost binary [default: $VRHOST_BIN, next to vrbench, or on PATH].
    #[arg(long)]
    vrhost: Option<PathBuf>,
    /// Runs of the trial at most while the host disturbs it (frames lost while the
    /// generator fell behind or the hypervisor took a core); the least disturbed counts,
    /// as in `vrbench measure`. 1 shows the one run as it went.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    attempts: u32,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// The trial `args` asks for, checked; the error says what to change.
fn spec_of(args: &Args) -> anyhow::Result<TrialSpec> {
    let rate_pps = if args.rate == "max" {
        None
    } else {
        let mpps: f64 = args.rate.parse().map_err(|_| {
            anyhow::anyhow!(
                "--rate {:?}: a number of Mpps (e.g. 0.05) or `max`",
                args.rate
            )
        })?;
        Some(mpps * 1e6)
    };
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 86_400.0) {
        bail!(
            "--seconds {}: must be positive (at most a day)",
            args.seconds
        );
    }
    if !(args.warmup.is_finite() && args.warmup >= 0.0) {
        bail!("--warmup {}: must be 0 or more", args.warmup);
    }
    args.dut.check_vrs(args.vrs).map_err(anyhow::Error::msg)?;
    let weights = args
        .weights
        .clone()
        .unwrap_or_else(|| vec![1.0; args.vrs as usize]);
    if weights.len() != args.vrs as usize {
        bail!(
            "--weights: {} given for --vrs {} (one per VR)",
            weights.len(),
            args.vrs
        );
    }
    let spec = TrialSpec {
        rate_pps,
        weights,
        frame_size: args.frame_size,
        duration: Duration::from_secs_f64(args.seconds),
        warmup: Duration::from_secs_f64(args.warmup),
        drain: Duration::from_millis(args.drain_ms),
        interval: match (args.burst_us, rate_pps) {
            (Some(us), _) => Duration::from_micros(us),
            (None, Some(r)) => generator::auto_interval(r),
            (None, None) => generator::auto_interval(GEN_MAX_PPS),
        },
        flush: args.flush,
        generator: args.generator,
    };
    spec.check().map_err(anyhow::Error::msg)?;
    Ok(spec)
}

/// `--routes` and `--flows`, checked.
fn scale_of(args: &Args) -> anyhow::Result<Scale> {
    let s = Scale {
        routes: args.routes,
        flows: args.flows,
        vifs: args.vifs,
    };
    s.check().map_err(anyhow::Error::msg)?;
    args.dut.check_vifs(s.vifs).map_err(anyhow::Error::msg)?;
    Ok(s)
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let spec = spec_of(args)?;
    let scale = scale_of(args)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("vrbench trial needs root: it builds network namespaces and loads BPF programs");
    }
    if args.dut == Profile::DpdkTestpmd {
        testpmd::find()?;
    }
    let bin = if args.dut.is_vrhost() {
        Some(crate::fwd::daemon::find_binary(args.vrhost.as_deref())?)
    } else {
        None
    };
    let stop = crate::stop::on_signal()?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("trial{}", std::process::id()));
    if !args.json {
        eprintln!(
            "building lab {name} for {} ({} VR(s))",
            args.dut.name(),
            args.vrs
        );
    }
    let mut lab = LiveLab::up(
        &name,
        args.dut,
        args.vrs,
        args.frame_size,
        bin.as_deref(),
        Cores {
            rx: args.rx_napi,
            ..Cores::default_for_host()
        },
        scale,
    )?;
    let attempts = args.attempts;
    let trial = measurer::least_disturbed_trial(&mut lab, &spec, &stop, attempts);
    let (result, runs) = trial.with_context(|| {
        let log = lab.daemon_log().unwrap_or_default();
        if log.is_empty() {
            format!("trial on {}", args.dut.name())
        } else {
            format!("trial on {} (vrhost log:\n{log})", args.dut.name())
        }
    })?;
    drop(lab);
    if args.json {
        let mut v = serde_json::to_value(&result)?;
        v["runs"] = serde_json::json!({"made": runs.made, "counted": runs.counted});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", result.table());
        if runs.made > 1 {
            println!(
                "  (run {} times while the host disturbed it; run {} counted)",
                runs.made, runs.counted
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn spec(line: &str) -> anyhow::Result<TrialSpec> {
        let cli = Cli::try_parse_from(std::iter::once("trial").chain(line.split_whitespace()))?;
        spec_of(&cli.args)
    }

    #[test]
    fn bad_input_is_refused_with_what_to_change() {
        let _alone = crate::cores_alone();
        let err = |l| format!("{:#}", spec(l).unwrap_err());
        assert!(err("--dut kernel --rate 0.05 --frame-size 63").contains("below 64"));
        assert!(err("--dut kernel --rate 0.05 --frame-size 1519").contains("MTU"));
        assert!(err("--dut kernel --rate 9").contains("lower --rate"));
        assert!(err("--dut kernel --rate fast").contains("Mpps"));
        assert!(err("--dut kernel --gen afpacket --rate 2").contains("--gen live-frames"));
        assert!(err("--dut kernel --gen pktgen --rate 0.1").contains("invalid value"));
        assert!(err("--dut kernel --rate 0.05 --vrs 2").contains("exactly one VR"));
        assert!(err("--dut kernel-bridge --rate 0.05 --vrs 2 --weights 1").contains("one per VR"));
        assert!(err("--dut kernel --rate 0").contains("positive"));
        assert!(err("--dut dpdk --rate 1").contains("invalid value"));
        let s = spec("--dut kernel-macvlan --rate 0.1 --vrs 3 --weights 1,2,3").unwrap();
        assert_eq!(s.rate_pps, Some(100_000.0));
        assert_eq!(s.weights, [1.0, 2.0, 3.0]);
        assert_eq!(spec("--dut none --rate max").unwrap().rate_pps, None);
        assert_eq!(
            spec("--dut kernel --gen afpacket --rate 1")
                .unwrap()
                .generator,
            GenKind::Afpacket
        );
        assert_eq!(
            spec("--dut kernel --gen afxdp --rate 1").unwrap().generator,
            GenKind::Afxdp
        );
        assert!(err("--dut kernel --gen afxdp --rate 2").contains("AF_XDP generator"));
        // Attempts: 1 unless given, 1 to 10.
        for l in [
            "--dut kernel --rate 0.05 --attempts 0",
            "--dut kernel --rate 0.05 --attempts 11",
            "--dut kernel --rate 0.05 --attempts x",
        ] {
            assert!(err(l).contains("--attempts"), "{l}: {}", err(l));
        }
        let attempts = |l: &str| {
            let cli = Cli::try_parse_from(std::iter::once("trial").chain(l.split_whitespace()));
            cli.unwrap().args.attempts
        };
        assert_eq!(attempts("--dut kernel --rate 0.05"), 1);
        assert_eq!(attempts("--dut kernel --rate 0.05 --attempts 3"), 3);
    }
}
