//! `vrbench measure` and `vrbench quick`: the RFC 2544 / RFC 9971 methodology of issue 5 run
//! against DUT profiles, with a JSON record, a Markdown report and SVG plots.
//!
//! What each test is (all searches are `vrhost_bench`'s; this module only sequences them,
//! feeds them a DUT, and writes what they found):
//! * `ndr` — NDR and PDR (0.5 % loss) in one MLRsearch (RFC 9971), seeded from the forwarding
//!   rate at the maximum load;
//! * `throughput` — RFC 2544 §26.1: largest zero-loss rate by binary search, 60 s trials
//!   unless `--trial-seconds` says otherwise (the report then says the trials were shortened);
//! * `latency` — p50/p90/p99/p99.9/max at 10, 50 and 90 % of the NDR;
//! * `overload` — carried vs offered from 10 % to 300 % of the NDR (Rathore Fig. 4/5);
//! * `burst` — RFC 2544 §26.4 back-to-back: the longest burst at the maximum load with no
//!   loss, by binary search on the burst length;
//! * `workpoints` — Batalla's work points: for N VRs, every k = 1..N heavily loaded and N − k
//!   lightly (q = 0.01), the zero-loss throughput T at each, J(k), and T^N = min over k with
//!   the worst work point named (eq. 6);
//! * `isolation` — Rathore Table 1: VR1 offered 3× the NDR, VR2 0.3× of it; both VRs'
//!   offered and carried rates.
//!
//! Where the DUTs run: `--dut-core` and `--tester-core`; for the kernel lab profiles also
//! their receive NAPI, threaded and pinned to the DUT core (`--rx-napi`, see
//! `live/dut.rs`), recorded per DUT in run.json. `--rt-unthrottle` lifts the kernel's
//! real-time throttling for the run (`rt.rs`).
//!
//! Noise: with several DUTs, every test runs `--repeats` times with the DUTs interleaved
//! (`vrhost_bench::stats::Interleave`: A B, B A, …), and the report gives medians and spread
//! and, for two DUTs, the median of per-round ratios. Ctrl-C ends the current trial and writes
//! what was measured so far, marked partial.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::ValueEnum;
use vrhost_bench::fairness::{self, Q_DEFAULT, WorkPoint};
use vrhost_bench::latency::LatencySummary;
use vrhost_bench::progress::{Progress, ProgressMode};
use vrhost_bench::record::{
    CoreAssignment, DutProfile, Machine, Measurement, RunRecord, ToolInfo, compare,
};
use vrhost_bench::report::plot::{self, LatencyCdf, Series};
use vrhost_bench::report::{Report, latency_table, work_point_table};
use vrhost_bench::search::SearchError;
use vrhost_bench::search::mlr::{self, MlrSettings};
use vrhost_bench::search::rfc2544::{self, Rfc2544Settings};
use vrhost_bench::stats::Summary;
use vrhost_bench::trial::{Measurer, Trial, TrialError};

use crate::dut_inproc::{DutError, InprocDut, InprocSpec};
use crate::live::dut::{self as lab_dut, Cores, LiveLab, Profile as LabProfile, RxNapi, Scale};
use crate::live::frames::Size;
use crate::live::measurer::LabMeasurer;
use crate::live::trial::{GenKind, TrialResult, TrialSpec};

/// The tests `measure` can run.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Test {
    Ndr,
    Throughput,
    Latency,
    Overload,
    Burst,
    Workpoints,
    Isolation,
    /// NDR against VR count, VIFs per VR, routes per VR and flows (`--scale-*`).
    Scaling,
}

/// DUT profiles.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// vrhost's data plane in this process on mem ports; tester on another core.
    VrhostInproc,
    /// The vrhost daemon in the lab over AF_XDP (root).
    VrhostAfxdp,
    /// The vrhost daemon in the lab over AF_PACKET (root).
    VrhostAfpacket,
    /// The kernel's native IP forwarder in the lab (root; one VR).
    Kernel,
    /// A namespace per VR on macvlan devices — Rathore's set-up (root).
    KernelMacvlan,
    /// A namespace per VR on veth pairs and Linux bridges (root).
    KernelBridge,
    /// DPDK's testpmd, `mac` forwarding between the router's ports over AF_PACKET vdevs
    /// (root; one VR; needs the Debian package `dpdk`).
    DpdkTestpmd,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::VrhostInproc => "vrhost-inproc",
            p => p.lab().map_or("?", |l| l.name()),
        }
    }

    /// The lab profile, for the ones that run in the namespace lab.
    fn lab(self) -> Option<LabProfile> {
        Some(match self {
            Profile::VrhostInproc => return None,
            Profile::VrhostAfxdp => LabProfile::VrhostAfxdp,
            Profile::VrhostAfpacket => LabProfile::VrhostAfpacket,
            Profile::Kernel => LabProfile::Kernel,
            Profile::KernelMacvlan => LabProfile::KernelMacvlan,
            Profile::KernelBridge => LabProfile::KernelBridge,
            Profile::DpdkTestpmd => LabProfile::DpdkTestpmd,
        })
    }

    fn is_vrhost_lab(self) -> bool {
        matches!(self, Profile::VrhostAfxdp | Profile::VrhostAfpacket)
    }

    fn describe(self) -> String {
        match self {
            Profile::VrhostInproc => "vrhost's data plane in process: one worker on mem ports \
                (4096-descriptor rings); a VR per stream, demux by MAC"
                .into(),
            Profile::VrhostAfxdp => "vrhost daemon in the namespace lab, ports over AF_XDP \
                (copy mode on veth), one worker"
                .into(),
            Profile::VrhostAfpacket => {
                "vrhost daemon in the namespace lab, ports over AF_PACKET, one worker".into()
            }
            Profile::Kernel => {
                "the Linux kernel's IP forwarder in the lab's router namespace".into()
            }
            Profile::KernelMacvlan => {
                "a Linux namespace per VR on macvlan devices (Rathore's set-up)".into()
            }
            Profile::KernelBridge => {
                "a Linux namespace per VR on veth pairs and bridges (Rathore's earlier set-up)"
                    .into()
            }
            Profile::DpdkTestpmd => "DPDK testpmd in the lab's router namespace, mac forwarding \
                p0 → p1 over AF_PACKET vdevs, one forwarding lcore: an L2 cross-connect (no IP \
                lookup or TTL), the poll-mode baseline on these ports"
                .into(),
        }
    }
}

/// What a DUT is built with besides its profile: the dimensions `scaling` varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dim {
    Vrs,
    Vifs,
    Routes,
    Flows,
}

impl Dim {
    const ALL: [Dim; 4] = [Dim::Vrs, Dim::Vifs, Dim::Routes, Dim::Flows];

    /// The axis label (and the measurement name's part).
    fn label(self) -> &'static str {
        match self {
            Dim::Vrs => "VRs",
            Dim::Vifs => "VIFs per VR",
            Dim::Routes => "routes per VR",
            Dim::Flows => "flows per VR",
        }
    }

    /// The option setting it for every test, and the `scaling` option sweeping it.
    fn flags(self) -> (&'static str, &'static str) {
        match self {
            Dim::Vrs => ("--vrs", "--scale-vrs"),
            Dim::Vifs => ("--vifs", "--scale-vifs"),
            Dim::Routes => ("--routes", "--scale-routes"),
            Dim::Flows => ("--flows", "--scale-flows"),
        }
    }

    /// The value every test uses (`--vrs`, `--vifs`, …).
    fn base(self, a: &Args) -> usize {
        match self {
            Dim::Vrs => a.vrs,
            Dim::Vifs => a.vifs,
            Dim::Routes => a.routes,
            Dim::Flows => a.flows as usize,
        }
    }

    /// `scaling`'s points, and whether the user chose them.
    fn points(self, a: &Args) -> (Vec<usize>, bool) {
        let (given, default) = match self {
            Dim::Vrs => (&a.scale_vrs, &[1, 4, 16, 64][..]),
            Dim::Vifs => (&a.scale_vifs, &[2, 8, 32][..]),
            Dim::Routes => (&a.scale_routes, &[0, 1000, 10_000, 65_536][..]),
            Dim::Flows => (&a.scale_flows, &[1, 100, 10_000][..]),
        };
        match given {
            Some(v) => (v.clone(), true),
            None => (default.to_vec(), false),
        }
    }
}

impl Profile {
    /// Whether a DUT of this profile is really built with `x` of `dim`; if not, why.
    ///
    /// Why refuse rather than build the nearest thing: a lab DUT built without the asked
    /// routes, VIFs or flows runs the same trial whatever x says, and a scaling curve of
    /// identical runs labelled with different x would read as "this DUT does not care" —
    /// a finding nobody measured. The lab's topology gives each VR one ingress and one
    /// egress interface; the vrhost profiles add `x − 2` idle MAC-demux VIFs per VR on `p0`
    /// (in vrhost's config, as vrhost-inproc adds them on its ingress port), the kernel
    /// profiles cannot, so they refuse VIFs per VR. Routes (installed in every VR's
    /// forwarder) and flows (the generators' destination sweep) are varied for all, see
    /// `live/dut.rs`; the VR count too (not for `kernel`, one routing table). Routes, flows
    /// and VIFs are also checked together ([`Profile::lab_scale`]).
    fn can_vary(self, dim: Dim, x: usize) -> Result<(), String> {
        let Some(lp) = self.lab() else {
            // `InprocDut::new`'s limits, checked here so that they too come before anything
            // is built or written.
            let ok = match dim {
                Dim::Vrs => (1..=4096).contains(&x),
                Dim::Vifs => (2..=64).contains(&x),
                Dim::Routes => x <= 65_536,
                Dim::Flows => (1..=u32::MAX as usize).contains(&x),
            };
            return if ok {
                Ok(())
            } else {
                Err(format!(
                    "{}: {x} {}: use 1..=4096 VRs, 2..=64 VIFs, 0..=65536 routes, at least 1 flow",
                    self.name(),
                    dim.label()
                ))
            };
        };
        let why = match dim {
            Dim::Vrs => return lp.check_vrs(u32::try_from(x).unwrap_or(u32::MAX)),
            Dim::Vifs if x == 2 || lp.is_vrhost() && (2..=64).contains(&x) => return Ok(()),
            Dim::Vifs if lp.is_vrhost() => "the lab gives a VR 2 to 64 VIFs",
            Dim::Routes if x <= lab_dut::MAX_ROUTES as usize => return Ok(()),
            Dim::Flows if (1..1 << 24).contains(&x) => return Ok(()),
            Dim::Vifs => {
                "the kernel profiles give each VR exactly 2 VIFs (one ingress, one egress \
                 interface); vrbench adds idle VIFs only for the vrhost profiles"
            }
            Dim::Routes => "the lab routes at most 65536 extra /24s per VR (16.0.0.0/8)",
            Dim::Flows => "the lab sweeps 1 to 16777214 destinations per VR (in 16.0.0.0/8)",
        };
        Err(format!("{}: {x} {}: {why}", self.name(), dim.label()))
    }
}

impl Profile {
    /// Lab DUTs: the routes and flows per VR `a` asks for, with `dim` at `x`, checked
    /// together (flows must stay inside the routed /24s, see `live/dut.rs`).
    fn lab_scale(self, a: &Args, dim: Dim, x: usize) -> Result<(), String> {
        if self.lab().is_none() {
            return Ok(());
        }
        let (mut routes, mut flows, mut vifs) = (a.routes, a.flows as usize, a.vifs);
        match dim {
            Dim::Routes => routes = x,
            Dim::Flows => flows = x,
            Dim::Vifs => vifs = x,
            Dim::Vrs => {}
        }
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Scale {
            routes: n(routes),
            flows: n(flows),
            vifs: n(vifs),
        }
        .check()
        .map_err(|e| format!("{}: {e}", self.name()))
    }
}

/// Options of `vrbench measure`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// Tests to run, comma-separated [default: ndr,latency,overload].
    #[arg(long, value_enum, value_delimiter = ',')]
    tests: Vec<Test>,
    /// DUT profiles, comma-separated; with several, their trials interleave.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "vrhost-inproc"
    )]
    duts: Vec<Profile>,
    /// Frame size on the wire, FCS included (64..=1518).
    #[arg(long, default_value_t = 64)]
    frame_size: usize,
    /// The lab profiles' generator: stamped XDP live frames (up to 4 Mpps), or vrhost's
    /// traffic generator over an AF_PACKET socket (up to 1 Mpps: a slower, ordinary-socket
    /// tester, as TRex's or MoonGen's users know from their software modes).
    #[arg(long = "gen", value_enum, default_value_t = GenKind::LiveFrames)]
    generator: GenKind,
    /// VRs (traffic spread evenly unless a test sets the split).
    #[arg(long, default_value_t = 1)]
    vrs: usize,
    /// VRs for `workpoints` (N).
    #[arg(long, default_value_t = 4)]
    workpoint_vrs: usize,
    /// /24 routes per VR besides the default route.
    #[arg(long, default_value_t = 0)]
    routes: usize,
    /// Destinations per VR's stream.
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// VIFs per VR (2 carry the traffic, the others sit on the ingress port).
    #[arg(long, default_value_t = 2)]
    vifs: usize,
    /// `scaling`: VR counts to measure [default: 1,4,16,64 for the DUTs that can vary
    /// them]. Given explicitly, every DUT must be able to.
    #[arg(long, value_delimiter = ',')]
    scale_vrs: Option<Vec<usize>>,
    /// `scaling`: VIFs per VR to measure [default: 2,8,32 for the DUTs that can vary them].
    #[arg(long, value_delimiter = ',')]
    scale_vifs: Option<Vec<usize>>,
    /// `scaling`: /24 routes per VR to measure [default: 0,1000,10000,65536 for the DUTs
    /// that can vary them].
    #[arg(long, value_delimiter = ',')]
    scale_routes: Option<Vec<usize>>,
    /// `scaling`: flows per VR to measure [default: 1,100,10000 for the DUTs that can vary
    /// them].
    #[arg(long, value_delimiter = ',')]
    scale_flows: Option<Vec<usize>>,
    /// Highest offered load searched, Mpps.
    #[arg(long, default_value_t = 40.0, value_parser = crate::number::quantity)]
    max_mpps: f64,
    /// Lowest offered load searched, Mpps.
    #[arg(long, default_value_t = 0.01, value_parser = crate::number::quantity)]
    min_mpps: f64,
    /// RFC 2544 trial duration, seconds (the RFC's 60 by default).
    #[arg(long, default_value_t = 60.0, value_parser = crate::number::quantity)]
    trial_seconds: f64,
    /// MLRsearch final trial duration and sum per load, seconds [default: 5 and 20, RFC 9971 / CSIT].
    #[arg(long, value_delimiter = ',', value_parser = crate::number::quantity)]
    mlr_seconds: Vec<f64>,
    /// Seconds of each latency, overload, burst and isolation trial.
    #[arg(long, default_value_t = 10.0, value_parser = crate::number::quantity)]
    point_seconds: f64,
    /// Repeats of every test (with several DUTs, interleaved).
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Core for the DUT's worker.
    #[arg(long, default_value_t = 0)]
    dut_core: usize,
    /// Core for the tester (generator and sink).
    #[arg(long, default_value_t = 1)]
    tester_core: usize,
    /// Lab profiles: where the router's receive NAPI on p0 runs — `auto` is `pinned-fifo`
    /// (threaded, its kernel thread on --dut-core, SCHED_FIFO) for the kernel profiles,
    /// whose forwarding that is, and `inline` (softirq on the generator's core) for vrhost's.
    #[arg(long, value_enum, default_value_t = RxNapi::Auto)]
    rx_napi: RxNapi,
    /// Directory for run.json, report.md and the plots [default: vrbench-out/<time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The vrhost binary for the lab profiles [default: $VRHOST_BIN, next to vrbench, or on
    /// PATH].
    #[arg(long)]
    vrhost: Option<PathBuf>,
    /// A label for the run (shown in the report).
    #[arg(long, default_value = "")]
    label: String,
    /// Largest tester shortfall a trial may have, % of the frames it should have sent (the
    /// OS took the tester's core); over it a search stops with an error. `none` accepts any
    /// (a noisy host; the report says so).
    #[arg(long, default_value = "1")]
    max_shortfall: String,
    /// Switch off the kernel's real-time throttling for the run
    /// (/proc/sys/kernel/sched_rt_runtime_us = -1; the old value is put back at exit and on
    /// Ctrl-C). Root. Without it a SCHED_FIFO DUT worker is stopped ~50 ms of every second.
    #[arg(long)]
    rt_unthrottle: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Options of `vrbench quick`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct QuickArgs {
    /// Directory for the results [default: vrbench-out/quick-<time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Shorter still (CI): 0.2 s trials.
    #[arg(long)]
    ci: bool,
    /// DUTs [default: vrhost-inproc, plus vrhost-afxdp and kernel side by side when root].
    #[arg(long, value_enum, value_delimiter = ',')]
    duts: Vec<Profile>,
    /// The vrhost binary for the lab profiles.
    #[arg(long)]
    vrhost: Option<PathBuf>,
    /// Switch off real-time throttling for the run (see `vrbench measure --help`).
    #[arg(long)]
    rt_unthrottle: bool,
}

/// Options of `vrbench compare`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CompareArgs {
    /// The first run's run.json (or its directory).
    a: PathBuf,
    /// The second run's run.json (or its directory).
    b: PathBuf,
}

pub(crate) fn compare_cmd(a: &CompareArgs) -> anyhow::Result<()> {
    let load = |p: &Path| {
        let f = if p.is_dir() {
            p.join("run.json")
        } else {
            p.to_path_buf()
        };
        RunRecord::load(&f).with_context(|| format!("reading {}", f.display()))
    };
    println!("{}", compare(&load(&a.a)?, &load(&a.b)?));
    Ok(())
}

pub(crate) fn quick(q: &QuickArgs) -> anyhow::Result<()> {
    let (trial, point, mlr) = if q.ci {
        (0.2, 0.2, vec![0.2, 0.4])
    } else {
        (2.0, 2.0, vec![1.0, 2.0])
    };
    let a = Args {
        tests: vec![
            Test::Ndr,
            Test::Overload,
            Test::Latency,
            Test::Workpoints,
            Test::Isolation,
        ],
        duts: if !q.duts.is_empty() {
            q.duts.clone()
        } else if is_root() {
            vec![Profile::VrhostInproc, Profile::VrhostAfxdp, Profile::Kernel]
        } else {
            eprintln!(
                "vrbench quick: not root, so only the in-process DUT (the lab's vrhost and \
                 kernel profiles need root)"
            );
            vec![Profile::VrhostInproc]
        },
        frame_size: 64,
        generator: GenKind::LiveFrames,
        vrs: 1,
        workpoint_vrs: 4,
        routes: 0,
        flows: 1,
        vifs: 2,
        // Not a quick test; were it run, the defaults skip what a lab DUT cannot vary.
        scale_vrs: None,
        scale_vifs: None,
        scale_routes: None,
        scale_flows: None,
        max_mpps: 40.0,
        min_mpps: 0.01,
        trial_seconds: trial,
        mlr_seconds: mlr,
        point_seconds: point,
        repeats: 1,
        dut_core: 0,
        tester_core: 1,
        rx_napi: RxNapi::Auto,
        out: q.out.clone().or_else(|| Some(default_out("quick"))),
        max_shortfall: if q.ci { "none".into() } else { "5".into() },
        vrhost: q.vrhost.clone(),
        label: if q.ci {
            "vrbench quick --ci (trials of 0.2 s: a smoke test, not a measurement)".into()
        } else {
            "vrbench quick (shortened trials: 1–2 s, not the RFCs' 60 s)".into()
        },
        rt_unthrottle: q.rt_unthrottle,
        quiet: false,
    };
    run(&a)
}

/// Give the calling thread every CPU and the ordinary scheduling policy again.
fn ordinary_thread() {
    let _ = vrhost_io::sched::unpin();
    let _ = vrhost_io::sched::set_policy(vrhost_io::sched::Policy::Ordinary);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn default_out(kind: &str) -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from("vrbench-out").join(format!("{kind}-{t}"))
}

/// Checks made before anything is built.
fn check(a: &Args) -> anyhow::Result<()> {
    if !(64..=1518).contains(&a.frame_size) {
        bail!(
            "--frame-size {} is not a valid Ethernet frame size: use 64..=1518 (FCS included)",
            a.frame_size
        );
    }
    if !(a.min_mpps > 0.0 && a.max_mpps > a.min_mpps) {
        bail!(
            "--min-mpps {} and --max-mpps {}: need 0 < min < max",
            a.min_mpps,
            a.max_mpps
        );
    }
    if a.max_mpps > 100.0 {
        bail!(
            "--max-mpps {}: the in-process tester makes about 45 Mpps per core with its sink \
             (docs/perf.md, vrbench's tester); ask for at most 100 — higher would measure the tester",
            a.max_mpps
        );
    }
    for (v, what) in [
        (a.trial_seconds, "--trial-seconds"),
        (a.point_seconds, "--point-seconds"),
    ] {
        if !(v > 0.0 && v <= 3600.0) {
            bail!("{what} {v} must be above 0 and at most 3600");
        }
    }
    if !(a.mlr_seconds.is_empty()
        || a.mlr_seconds.len() == 2
            && a.mlr_seconds[0] > 0.0
            && a.mlr_seconds[1] >= a.mlr_seconds[0])
    {
        bail!("--mlr-seconds takes FINAL,SUM with 0 < FINAL ≤ SUM (e.g. 5,20)");
    }
    if a.repeats == 0 || a.repeats > 100 {
        bail!("--repeats {} must be 1..=100", a.repeats);
    }
    if a.workpoint_vrs < 2 && a.tests.contains(&Test::Workpoints) {
        bail!("--workpoint-vrs {} must be at least 2", a.workpoint_vrs);
    }
    shortfall(a)?;
    if a.rt_unthrottle {
        crate::rt::Unthrottled::check()?;
    }
    for p in &a.duts {
        for dim in Dim::ALL {
            let x = dim.base(a);
            if let Err(why) = p.can_vary(dim, x).and_then(|()| p.lab_scale(a, dim, x)) {
                bail!("{} {x}: {why}", dim.flags().0);
            }
        }
    }
    if a.tests.contains(&Test::Scaling) {
        scaling_plan(a)?;
    }
    if a.duts.iter().any(|p| p.lab().is_some()) {
        if !is_root() {
            bail!(
                "--duts {}: the lab profiles build network namespaces and need root; run as \
                 root or use --duts vrhost-inproc",
                a.duts
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        if a.frame_size < 64 {
            bail!("--frame-size {} below 64", a.frame_size);
        }
        if a.duts.iter().any(|p| p.is_vrhost_lab()) {
            crate::fwd::daemon::find_binary(a.vrhost.as_deref())
                .context("the vrhost profiles run the vrhost daemon: build it or pass --vrhost")?;
        }
        if a.duts.contains(&Profile::DpdkTestpmd) {
            crate::live::testpmd::find()?;
            if a.dut_core == a.tester_core {
                bail!(
                    "--dut-core and --tester-core are both {}: dpdk-testpmd needs its forwarding \
                     lcore on one and its main lcore on the other",
                    a.dut_core
                );
            }
        }
    }
    let cores = core_affinity::get_core_ids().map(|c| c.len()).unwrap_or(1);
    for (c, what) in [(a.dut_core, "--dut-core"), (a.tester_core, "--tester-core")] {
        if c >= cores {
            bail!(
                "{what} {c}: this host has cores 0..={}",
                cores.saturating_sub(1)
            );
        }
    }
    Ok(())
}

/// `scaling`'s plan: per dimension its points and the DUTs measured along it, and a note for
/// every (DUT, dimension) pair left out. A pair is left out when the DUT cannot be built with
/// one of the default points (a curve with a missing point would mislead as much as one with
/// a wrong one); points the user gave that a DUT cannot be built with are an error, which
/// `check` reports before anything is built.
#[expect(clippy::type_complexity, reason = "a private plan read in one place")]
fn scaling_plan(a: &Args) -> anyhow::Result<(Vec<(Dim, Vec<usize>, Vec<Profile>)>, Vec<String>)> {
    let (mut plan, mut skipped) = (Vec::new(), Vec::new());
    for dim in Dim::ALL {
        let (xs, given) = dim.points(a);
        let mut duts = Vec::new();
        for p in &a.duts {
            match xs
                .iter()
                .try_for_each(|&x| p.can_vary(dim, x).and_then(|()| p.lab_scale(a, dim, x)))
            {
                Ok(()) => duts.push(*p),
                Err(why) if given => bail!(
                    "{} {}: {why}; leave {} out (its default skips such DUTs) or measure this \
                     dimension with --duts vrhost-inproc",
                    dim.flags().1,
                    xs.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    dim.flags().1,
                ),
                Err(why) => skipped.push(format!(
                    "scaling: {} not measured against {} ({why})",
                    p.name(),
                    dim.label()
                )),
            }
        }
        if !duts.is_empty() {
            plan.push((dim, xs, duts));
        }
    }
    Ok((plan, skipped))
}

/// What the tester reaches with a DUT in the loop (frames/s).
#[derive(Debug, Clone, Copy)]
struct TesterMax {
    /// The highest load it offers as asked (paced, within 1 %); searches go to 80 % of it.
    max: f64,
    /// What it sends unpaced.
    unpaced: f64,
    /// Lab DUTs: what the DUT carried to the sink at the unpaced load — its forwarding rate
    /// at the maximum offered load, with loss. Not a bound on its NDR either way: unpaced
    /// bursts are longer than paced ones (measured: the pinned kernel carried 0.27 Mpps of
    /// 0.40 unpaced and lost nothing paced at 0.32).
    carried: Option<f64>,
}

/// A DUT under test, with its per-VR controls.
struct Dut {
    name: String,
    kind: DutKind,
    stop: Arc<AtomicBool>,
}

enum DutKind {
    Inproc(Box<InprocDut>),
    Lab {
        lab: Box<LiveLab>,
        weights: Vec<f64>,
        size: Size,
        generator: GenKind,
        last: Option<Box<TrialResult>>,
    },
}

/// Labs are named `vrm<pid>-<n>` (unique per run, and `vrbench lab ls` finds leftovers).
static LABS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Dut {
    fn open(p: Profile, a: &Args, vrs: usize, stop: Arc<AtomicBool>) -> anyhow::Result<Dut> {
        Dut::open_with(p, a, vrs, a.vifs, a.routes, a.flows, stop)
    }

    fn open_with(
        p: Profile,
        a: &Args,
        vrs: usize,
        vifs: usize,
        routes: usize,
        flows: u32,
        stop: Arc<AtomicBool>,
    ) -> anyhow::Result<Dut> {
        let kind = match p.lab() {
            None => DutKind::Inproc(Box::new(InprocDut::new(InprocSpec {
                vrs,
                routes,
                flows,
                vifs,
                frame_size: a.frame_size,
                dut_core: a.dut_core,
                tester_core: a.tester_core,
                drain: Duration::from_millis(20),
            })?)),
            Some(lp) => {
                // Earlier trials pinned this thread to the generator's core and made it
                // real-time; the lab's processes (the vrhost daemon) would inherit that.
                ordinary_thread();
                let bin = if p.is_vrhost_lab() {
                    Some(crate::fwd::daemon::find_binary(a.vrhost.as_deref())?)
                } else {
                    None
                };
                let n = LABS.fetch_add(1, Ordering::Relaxed);
                let name = format!("vrm{}-{n}", std::process::id());
                let size = Size::Fixed(a.frame_size as u16);
                let lab = LiveLab::up(
                    &name,
                    lp,
                    vrs as u32,
                    size,
                    bin.as_deref(),
                    Cores {
                        generator: a.tester_core,
                        dut: a.dut_core,
                        rx: a.rx_napi,
                    },
                    Scale {
                        routes: routes as u32,
                        flows,
                        vifs: vifs as u32,
                    },
                )
                .with_context(|| format!("setting up the {} lab", p.name()))?;
                DutKind::Lab {
                    lab: Box::new(lab),
                    weights: vec![1.0; vrs],
                    size,
                    generator: a.generator,
                    last: None,
                }
            }
        };
        Ok(Dut {
            name: p.name().into(),
            kind,
            stop,
        })
    }

    /// Split future loads between the VRs in these proportions.
    fn set_shares(&mut self, w: &[f64]) -> anyhow::Result<()> {
        match &mut self.kind {
            DutKind::Inproc(d) => d.set_shares(w),
            DutKind::Lab { weights, .. } => {
                if w.len() != weights.len() {
                    bail!("{} shares for {} VRs", w.len(), weights.len());
                }
                // The generator's wheel wants positive weights.
                *weights = w.iter().map(|x| x.max(1e-6)).collect();
                Ok(())
            }
        }
    }

    /// The last trial per VR: (sent, received).
    fn per_vr(&self) -> Vec<(u64, u64)> {
        match &self.kind {
            DutKind::Inproc(d) => d.per_vr(),
            DutKind::Lab { last, .. } => last
                .as_ref()
                .map(|r| r.streams.iter().map(|s| (s.sent, s.received)).collect())
                .unwrap_or_default(),
        }
    }

    /// The tester's limit with this DUT in the loop.
    fn tester_max(&mut self) -> anyhow::Result<TesterMax> {
        match &mut self.kind {
            // Unpaced, the in-process DUT drops most of what it is offered and the tester's
            // sink has little to do; at a paced load the DUT forwards, the sink counts
            // every frame, and the tester makes less (a `vrbench quick` stopped on a 15.7 %
            // shortfall at 80 % of an unpaced 30.4 Mpps). So, as for the lab: 80 % of the
            // maximum is tried paced and the maximum lowered until the tester offers it.
            DutKind::Inproc(d) => {
                let half = Duration::from_millis(500);
                let unpaced = d.tester_max(half)?;
                let max = paced_max(unpaced, |load| {
                    Ok(d.run(load, half)?.sent as f64 / half.as_secs_f64())
                })?;
                Ok(TesterMax {
                    max,
                    unpaced,
                    carried: None,
                })
            }
            // As fast as the generator goes with this DUT in the loop (where the DUT's
            // receive work runs inline on the generator's CPU, as the kernel's does, that is
            // less than with no DUT), and never above what it paces within 1 %.
            DutKind::Lab {
                lab,
                weights,
                size,
                generator,
                ..
            } => {
                let cap = generator.max_pps();
                let mut spec =
                    TrialSpec::new(cap, weights.len() as u32, Duration::from_millis(500));
                spec.rate_pps = None;
                spec.weights = weights.clone();
                spec.frame_size = *size;
                spec.generator = *generator;
                let r = lab.trial(&spec, &self.stop)?;
                let carried = r.received as f64 / r.elapsed_s;
                let unpaced = r.achieved_pps;
                // The searches pace their loads, and paced the generator may keep up with
                // less than it sends unpaced (the paced runs rest 8 % of the time; before
                // they were long, each built a fresh page pool: 0.6–0.8 Mpps of 3.0 asked).
                let stop = &self.stop;
                let max = paced_max(unpaced.min(cap / 0.8), |load| {
                    spec.rate_pps = Some(load);
                    spec.interval = crate::live::generator::auto_interval(load);
                    Ok(lab.trial(&spec, stop)?.achieved_pps)
                })?;
                Ok(TesterMax {
                    max,
                    unpaced,
                    carried: Some(carried),
                })
            }
        }
    }

    /// Where a lab DUT's receive work runs, for the run record: (role → CPUs, a sentence,
    /// parameters). `None` for the in-process DUT (the run's core assignment says it all).
    fn placement(&self) -> Option<(Vec<usize>, String, BTreeMap<String, String>)> {
        let DutKind::Lab { lab, .. } = &self.kind else {
            return None;
        };
        let c = lab.cores();
        let mut params = BTreeMap::from([
            ("generator_core".to_string(), c.generator.to_string()),
            ("dut_core".to_string(), c.dut.to_string()),
            ("p0_rx_napi".to_string(), c.rx.name().to_string()),
        ]);
        Some(match lab.rx_thread() {
            Some(t) => {
                let policy = t
                    .fifo
                    .map_or("SCHED_OTHER".into(), |p| format!("SCHED_FIFO {p}"));
                params.insert(
                    "p0_napi_thread".into(),
                    format!("pid {} on CPUs {:?}, {policy}", t.pid, t.cpus),
                );
                (
                    t.cpus.clone(),
                    format!(
                        "{}: p0's receive NAPI threaded, its kernel thread pinned to CPU(s) {:?} \
                         ({policy}); the generator's core {} only generates",
                        self.name, t.cpus, c.generator
                    ),
                    params,
                )
            }
            None => (
                vec![c.generator],
                format!(
                    "{}: p0's receive NAPI inline in softirq on the generator's core {}",
                    self.name, c.generator
                ),
                params,
            ),
        })
    }
}

impl Measurer for Dut {
    type Error = DutError;
    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, DutError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(DutError(anyhow::anyhow!("interrupted")));
        }
        match &mut self.kind {
            DutKind::Inproc(d) => d.trial(load, duration),
            DutKind::Lab {
                lab,
                weights,
                size,
                generator,
                last,
            } => {
                if std::env::var_os("VRBENCH_DEBUG").is_some() {
                    eprintln!("[{}] trial {load:.0} fps for {duration:?}", self.name);
                }
                let mut m = LabMeasurer::new(lab, self.stop.clone());
                m.template.weights = weights.clone();
                m.template.frame_size = *size;
                m.template.generator = *generator;
                let t = m
                    .trial(load, duration)
                    .map_err(|e| DutError(anyhow::anyhow!("{e}")))?;
                *last = m.last.take().map(Box::new);
                Ok(t)
            }
        }
    }
}

/// `--max-shortfall` as a fraction (`None`: any).
/// Times a search that stopped on the tester's shortfall is run again under a lower
/// ceiling.
const CEILING_RETRIES: u32 = 3;

/// Run `search` under `settings`; when it stops because the tester kept falling short of a
/// load (`TrialError::Shortfall`: the trial's load was beyond what the tester makes on this
/// DUT — inline receive work on its core, uneven streams — not the DUT's doing), search again
/// with the ceiling at 90 % of what the tester achieved there, at most [`CEILING_RETRIES`]
/// times, and say so in `notes`. Whatever else fails is returned as it is. (90 %, not 95:
/// with `p0`'s NAPI inline on the tester's core, what the tester makes falls as the load
/// falls and the DUT keeps up — more frames copied into its socket on that core — and
/// 95 % steps chased it down: 2.13 → made 2.02, 1.91 → 1.85, 1.76 → 1.73 Mpps.)
fn within_tester<T, E: std::error::Error + Send + Sync + 'static>(
    settings: &MlrSettings,
    what: &str,
    notes: &mut Vec<String>,
    mut search: impl FnMut(&MlrSettings) -> Result<T, SearchError<E>>,
) -> anyhow::Result<T> {
    let mut s = settings.clone();
    for tries in 0.. {
        match search(&s) {
            Err(SearchError::Trial(TrialError::Shortfall { load, achieved, .. }))
                if tries < CEILING_RETRIES && 0.9 * achieved > s.min_load =>
            {
                let max = 0.9 * achieved;
                notes.push(format!(
                    "{what}: the tester fell short at {:.3} Mpps (made {:.3}); searched again \
                     up to {:.3} Mpps",
                    load / 1e6,
                    achieved / 1e6,
                    max / 1e6
                ));
                eprintln!("vrbench: {}", notes.last().expect("just pushed"));
                s.max_load = max;
            }
            r => return r.map_err(anyhow::Error::from),
        }
    }
    unreachable!("the loop returns")
}

/// The tester's maximum for the searches (which go to 80 % of it), from its unpaced
/// maximum: 80 % is tried paced (`offer(load)` → the rate offered) and the maximum lowered
/// until the tester offers that within 1 %, at most three times.
fn paced_max(
    unpaced: f64,
    mut offer: impl FnMut(f64) -> anyhow::Result<f64>,
) -> anyhow::Result<f64> {
    let mut max = unpaced;
    for _ in 0..3 {
        let load = 0.8 * max;
        let offered = offer(load)?;
        if offered >= 0.99 * load {
            break;
        }
        max = 0.95 * offered / 0.8;
    }
    Ok(max)
}

fn shortfall(a: &Args) -> anyhow::Result<Option<f64>> {
    if a.max_shortfall == "none" {
        return Ok(None);
    }
    match a.max_shortfall.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(Some(p / 100.0)),
        _ => bail!(
            "--max-shortfall {:?}: give a percentage in 0..100, or none",
            a.max_shortfall
        ),
    }
}

fn mlr_settings(a: &Args) -> MlrSettings {
    let mut s = MlrSettings::ndr_pdr(a.min_mpps * 1e6, a.max_mpps * 1e6);
    s.max_shortfall = shortfall(a).ok().flatten();
    if let [fin, sum] = a.mlr_seconds[..] {
        for g in &mut s.goals {
            g.final_trial_duration = Duration::from_secs_f64(fin);
            g.duration_sum = Duration::from_secs_f64(sum);
            g.initial_trial_duration = g.initial_trial_duration.min(g.final_trial_duration);
        }
    }
    s
}

/// What was found per DUT (first repeat's search trials kept for the plots).
#[derive(Default)]
struct Found {
    ndr: BTreeMap<String, Vec<f64>>,
    /// DUTs whose NDR search found no upper bound in some repeat (the NDR is a lower bound).
    ndr_lower: BTreeMap<String, bool>,
    /// Per DUT: the tester's offered rate at its maximum with the DUT in the loop, and what
    /// the DUT carried then (lab DUTs).
    tester: BTreeMap<String, TesterMax>,
    overload: BTreeMap<String, Vec<Trial>>,
    latency: BTreeMap<String, Vec<(String, LatencySummary)>>,
    workpoints: BTreeMap<String, fairness::Sweep>,
    /// Per dimension, per DUT: (x, NDR frames/s).
    scaling: BTreeMap<&'static str, Curves>,
}

/// Per DUT, points (x, y).
type Curves = BTreeMap<String, Vec<(f64, f64)>>;

pub(crate) fn run(a: &Args) -> anyhow::Result<()> {
    let mut a = a.clone();
    if a.tests.is_empty() {
        a.tests = vec![Test::Ndr, Test::Latency, Test::Overload];
    }
    a.tests.sort();
    a.tests.dedup();
    check(&a)?;
    let out = a.out.clone().unwrap_or_else(|| default_out("measure"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let stop = crate::stop::on_signal()?;
    // Applied after the signal handlers, so Ctrl-C ends the run normally and this drops.
    let unthrottled = a
        .rt_unthrottle
        .then(crate::rt::Unthrottled::apply)
        .transpose()?;

    let mut rec = RunRecord::new(
        ToolInfo::new(
            "vrbench",
            env!("CARGO_PKG_VERSION"),
            option_env!("VRBENCH_COMMIT"),
        ),
        Machine::detect(),
    );
    rec.cores = CoreAssignment {
        description: format!(
            "DUT worker pinned to core {}; tester (generator and sink, one thread) pinned to core {}",
            a.dut_core, a.tester_core
        ),
        map: BTreeMap::from([
            ("dut".to_string(), vec![a.dut_core]),
            ("tester".to_string(), vec![a.tester_core]),
        ]),
    };
    rec.settings
        .insert("tests".into(), serde_json::json!(format!("{:?}", a.tests)));
    for (k, v) in [
        ("frame_size", serde_json::json!(a.frame_size)),
        ("lab_generator", serde_json::json!(a.generator)),
        ("vrs", serde_json::json!(a.vrs)),
        ("routes_per_vr", serde_json::json!(a.routes)),
        ("flows_per_vr", serde_json::json!(a.flows)),
        ("trial_seconds", serde_json::json!(a.trial_seconds)),
        ("point_seconds", serde_json::json!(a.point_seconds)),
        ("repeats", serde_json::json!(a.repeats)),
        ("label", serde_json::json!(a.label)),
    ] {
        rec.settings.insert(k.into(), v);
    }
    if a.trial_seconds < 60.0 {
        rec.notes.push(format!(
            "RFC 2544 trials shortened to {} s (the RFC asks for 60 s).",
            a.trial_seconds
        ));
    }
    if !a.label.is_empty() {
        rec.notes.push(a.label.clone());
    }
    rec.settings.insert(
        "rt_throttling".into(),
        match &unthrottled {
            Some(u) => serde_json::json!({
                "unthrottled": true,
                "sched_rt_runtime_us_before": u.before(),
                "sched_rt_runtime_us_during": -1,
            }),
            None => serde_json::json!({
                "unthrottled": false,
                "sched_rt_runtime_us": std::fs::read_to_string(crate::rt::RT_RUNTIME)
                    .ok()
                    .and_then(|t| t.trim().parse::<i64>().ok()),
            }),
        },
    );
    if let Some(u) = &unthrottled {
        rec.notes.push(format!(
            "real-time throttling off for the run (--rt-unthrottle: sched_rt_runtime_us -1, \
             was {}): SCHED_FIFO workers were not stopped ~50 ms of every second",
            u.before()
        ));
    }
    match shortfall(&a)? {
        None => rec.notes.push(
            "trials were accepted whatever the tester's shortfall (--max-shortfall none): on a \
             busy host the loads are what the tester managed, not what was asked"
                .into(),
        ),
        Some(f) if f > 0.01 => rec.notes.push(format!(
            "trials accepted with up to {:.0} % tester shortfall (--max-shortfall)",
            f * 100.0
        )),
        Some(_) => {}
    }
    for p in &a.duts {
        rec.duts.push(DutProfile {
            name: p.name().into(),
            kind: if p.name().starts_with("vrhost") {
                "vrhost".into()
            } else if *p == Profile::DpdkTestpmd {
                "dpdk".into()
            } else {
                "linux".into()
            },
            description: p.describe(),
            params: BTreeMap::new(),
        });
    }
    let progress = Progress::new(
        if a.quiet {
            ProgressMode::Hidden
        } else {
            ProgressMode::Auto
        },
        Duration::from_secs(60),
    );
    let mut found = Found::default();
    let result = measure_all(&a, &mut rec, &mut found, &progress, &stop);
    progress.finish();
    if let Err(e) = &result {
        rec.partial = true;
        rec.notes.push(format!("run ended early: {e:#}"));
    }
    write(&a, &out, &rec, &found)?;
    drop(unthrottled);
    eprintln!(
        "vrbench: results in {} (run.json, report.md){}",
        out.display(),
        if rec.partial { " — PARTIAL" } else { "" }
    );
    result
}

fn measure_all(
    a: &Args,
    rec: &mut RunRecord,
    found: &mut Found,
    progress: &Progress,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut duts: Vec<Dut> = a
        .duts
        .iter()
        .map(|p| Dut::open(*p, a, a.vrs, stop.clone()))
        .collect::<anyhow::Result<_>>()?;
    let order = vrhost_bench::stats::Interleave::new(duts.len(), a.repeats);
    // The tester's own limit with each DUT in the loop: each DUT's searches stay below 80 %
    // of it (and below --max-mpps). Per DUT, not one ceiling for all: the in-process DUT's
    // tester is another generator entirely, and one DUT's slow lab path (the kernel's receive
    // work runs on the generator's CPU) must not cap another's search — an NDR at its
    // ceiling is reported as a lower bound ("max_load_is_lower_bound"), not a result.
    for d in &duts {
        if let Some((cpus, why, params)) = d.placement() {
            rec.cores.description.push_str(&format!("; {why}"));
            rec.cores.map.insert(format!("{} p0 rx NAPI", d.name), cpus);
            if let Some(p) = rec.duts.iter_mut().find(|p| p.name == d.name) {
                p.params.extend(params);
            }
        }
    }
    let mut max_of: BTreeMap<String, f64> = BTreeMap::new();
    for d in &mut duts {
        progress.set_stage(&format!("{} tester calibration", d.name));
        let tmax = d.tester_max()?;
        let m = tmax.max;
        let mut tm = Measurement::new(
            &format!("tester/{}B max offered", a.frame_size),
            &d.name,
            "frames/s",
        );
        tm.value = Some(m);
        tm.detail = serde_json::json!({
            "paced_max": tmax.max,
            "unpaced": tmax.unpaced,
            "carried_at_unpaced": tmax.carried,
        });
        rec.measurements.push(tm);
        found.tester.insert(d.name.clone(), tmax);
        let mut max = a.max_mpps * 1e6;
        if 0.8 * m < max {
            rec.notes.push(format!(
                "the tester offered at most {:.2} Mpps with {} in the loop; its loads searched up \
                 to {:.2} Mpps (80 % of that) instead of --max-mpps {}",
                m / 1e6,
                d.name,
                0.8 * m / 1e6,
                a.max_mpps
            ));
            max = 0.8 * m;
        }
        if max <= a.min_mpps * 1e6 {
            bail!(
                "the tester's limit with {} is {:.3} Mpps, below --min-mpps {}",
                d.name,
                max / 1e6,
                a.min_mpps
            );
        }
        max_of.insert(d.name.clone(), max);
    }
    // A DUT's own ceiling (--max-mpps for one not calibrated).
    let ceiling = |name: &str| max_of.get(name).copied().unwrap_or(a.max_mpps * 1e6);
    let capped = |s: &MlrSettings, max_load: f64| MlrSettings {
        max_load,
        ..s.clone()
    };
    // Work points and scaling run on DUTs of their own (more VRs, routes, flows), with
    // uneven streams the calibration did not see; there the tester keeps up only below the
    // lowest ceiling of all (measured: the in-process tester fell 13–22 % short of its
    // one-VR ceiling at a 4-VR work point), so they search up to that, as every test did
    // before ceilings were per DUT.
    let shared = max_of.values().copied().fold(a.max_mpps * 1e6, f64::min);
    let mlr = mlr_settings(a);
    let secs = |s: f64| Duration::from_secs_f64(s);
    // NDR first: the other tests are placed relative to it.
    let mut ndr: BTreeMap<String, f64> = BTreeMap::new();
    let need_ndr = a.tests.iter().any(|t| {
        matches!(
            t,
            Test::Ndr | Test::Latency | Test::Overload | Test::Isolation
        )
    });
    if need_ndr {
        let mut per: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for i in order.slots().map(|s| s.dut) {
            let d = &mut duts[i];
            progress.set_stage(&format!("{} NDR/PDR", d.name));
            let m = capped(&mlr, ceiling(&d.name));
            let what = format!("{} NDR/PDR", d.name);
            let r = within_tester(&m, &what, &mut rec.notes, |m| {
                mlr::search(&mut progress.wrap(&mut *d), m)
            })?;
            let v = r
                .goal("NDR")
                .and_then(|g| g.conditional_throughput)
                .context("the NDR search found no throughput")?;
            per.entry(d.name.clone()).or_default().push(v);
            let lower = r.goal("NDR").and_then(|g| g.irregular)
                == Some(vrhost_bench::search::mlr::Irregular::MaxLoadIsLowerBound);
            *found.ndr_lower.entry(d.name.clone()).or_default() |= lower;
            let name = format!("mlr/{}B", a.frame_size);
            if per[&d.name].len() == 1 {
                rec.measurements
                    .extend(Measurement::from_mlr(&name, &d.name, &r));
            }
        }
        for (dut, v) in &per {
            if found.ndr_lower.get(dut) == Some(&true) {
                let carried = found
                    .tester
                    .get(dut)
                    .and_then(|t| t.carried.map(|c| (t.unpaced, c)))
                    .map_or(String::new(), |(u, c)| {
                        format!(
                            "; offered {:.2} Mpps unpaced it carried {:.2} Mpps",
                            u / 1e6,
                            c / 1e6
                        )
                    });
                rec.notes.push(format!(
                    "{dut}: the NDR search met the goal at its highest load — the NDR is a lower \
                     bound, set by the tester's ceiling with this DUT in the loop{carried}"
                ));
            }
            ndr.insert(
                dut.clone(),
                Summary::of(v).map(|s| s.median).unwrap_or(v[0]),
            );
            if a.repeats > 1 {
                rec.measurements.push(
                    Measurement::new(
                        &format!("mlr/{}B/NDR repeats", a.frame_size),
                        dut,
                        "frames/s",
                    )
                    .with_repeats(v.clone()),
                );
            }
        }
        found.ndr = per;
    }
    for t in &a.tests {
        match t {
            Test::Ndr => {}
            Test::Throughput => {
                for i in order.slots().map(|s| s.dut) {
                    let d = &mut duts[i];
                    let mut s = Rfc2544Settings::new(a.min_mpps * 1e6, ceiling(&d.name));
                    s.trial_duration = secs(a.trial_seconds);
                    s.max_shortfall = shortfall(a)?;
                    progress.set_stage(&format!("{} RFC 2544 throughput", d.name));
                    let r = rfc2544::search(&mut progress.wrap(&mut *d), &s)?;
                    rec.measurements.push(Measurement::from_rfc2544(
                        &format!("rfc2544/{}B", a.frame_size),
                        &d.name,
                        &r,
                    ));
                }
            }
            Test::Latency => {
                for i in order.slots().map(|s| s.dut) {
                    let d = &mut duts[i];
                    let n = ndr[&d.name];
                    for pct in [10u32, 50, 90] {
                        progress.set_stage(&format!("{} latency at {pct} % of NDR", d.name));
                        let t = progress
                            .wrap(&mut *d)
                            .trial(n * f64::from(pct) / 100.0, secs(a.point_seconds))?;
                        let mut m = Measurement::new(
                            &format!("latency/{}B/{pct}% NDR p99", a.frame_size),
                            &d.name,
                            "ns",
                        );
                        m.value = t
                            .latency
                            .as_ref()
                            .and_then(|l| l.at(99.0))
                            .map(|v| v as f64);
                        m.detail = serde_json::json!({ "latency": t.latency });
                        m.trials = vec![t.clone()];
                        rec.measurements.push(m);
                        if let Some(l) = t.latency {
                            found
                                .latency
                                .entry(d.name.clone())
                                .or_default()
                                .push((format!("{pct} % NDR"), l));
                        }
                    }
                }
            }
            Test::Overload => {
                for i in order.slots().map(|s| s.dut) {
                    let d = &mut duts[i];
                    let n = ndr[&d.name];
                    let mut trials = Vec::new();
                    for x in [0.1, 0.5, 0.9, 1.0, 1.1, 1.5, 2.0, 3.0] {
                        progress.set_stage(&format!(
                            "{} overload at {:.0} % of NDR",
                            d.name,
                            x * 100.0
                        ));
                        let load = (n * x).min(ceiling(&d.name));
                        trials.push(progress.wrap(&mut *d).trial(load, secs(a.point_seconds))?);
                    }
                    let mut m = Measurement::new(
                        &format!("overload/{}B", a.frame_size),
                        &d.name,
                        "frames/s",
                    );
                    // The carried rate at 3× NDR: "no collapse" reads as this staying near NDR.
                    m.value = trials.last().map(Trial::carried_rate);
                    m.trials = trials.clone();
                    rec.measurements.push(m);
                    found.overload.entry(d.name.clone()).or_insert(trials);
                }
            }
            Test::Burst => {
                for i in order.slots().map(|s| s.dut) {
                    let d = &mut duts[i];
                    progress.set_stage(&format!("{} back-to-back", d.name));
                    let top = ceiling(&d.name);
                    let (len, trials) = burst(&mut progress.wrap(&mut *d), top)?;
                    let mut m = Measurement::new(
                        &format!("back-to-back/{}B", a.frame_size),
                        &d.name,
                        "frames",
                    );
                    m.value = Some(len as f64);
                    m.trials = trials;
                    m.notes.push(format!("bursts at {:.2} Mpps", top / 1e6));
                    rec.measurements.push(m);
                }
            }
            Test::Workpoints => {
                // Work points need N VRs: a DUT of their own per profile.
                for p in &a.duts {
                    if *p == Profile::Kernel {
                        rec.notes.push(
                            "kernel: one routing table, so no work points (kernel-macvlan and \
                             kernel-bridge are the kernel's multi-VR set-ups)"
                                .into(),
                        );
                        continue;
                    }
                    let mut d = Dut::open(*p, a, a.workpoint_vrs, stop.clone())?;
                    let mut short = capped(&mlr, shared);
                    short.goals.truncate(1); // NDR only
                    let notes = &mut rec.notes;
                    let sweep = fairness::sweep(a.workpoint_vrs, Q_DEFAULT, |wp: &WorkPoint| {
                        let rates = wp.rates(1.0).map_err(|e| anyhow::anyhow!("{e}"))?;
                        d.set_shares(&rates)?;
                        let what = format!("{} work point k = {}", d.name, wp.k);
                        progress.set_stage(&what);
                        let r = within_tester(&short, &what, notes, |s| {
                            mlr::search(&mut progress.wrap(&mut d), s)
                        })?;
                        r.goal("NDR")
                            .and_then(|g| g.conditional_throughput)
                            .context("no NDR at this work point")
                    })
                    .map_err(|e| match e {
                        fairness::SweepError::Measure { k, source } => {
                            source.context(format!("work point k = {k}"))
                        }
                        e => anyhow::anyhow!("{e}"),
                    })?;
                    let mut m = Measurement::new(
                        &format!("workpoints/{}B/N={} T^N", a.frame_size, a.workpoint_vrs),
                        &d.name,
                        "frames/s",
                    );
                    m.value = Some(sweep.worst.throughput);
                    m.detail = serde_json::to_value(&sweep)?;
                    m.notes
                        .push(format!("worst work point k = {}", sweep.worst.k));
                    rec.measurements.push(m);
                    found.workpoints.insert(d.name.clone(), sweep);
                }
            }
            Test::Scaling => {
                let mut short = mlr.clone();
                short.goals.truncate(1); // NDR only
                let (plan, skipped) = scaling_plan(a)?;
                for note in skipped {
                    eprintln!("vrbench: {note}");
                    rec.notes.push(note);
                }
                for (dim, xs, duts) in plan {
                    let dim_label = dim.label();
                    for p in &duts {
                        for &x in &xs {
                            let (mut vrs, mut vifs, mut routes, mut flows) =
                                (a.vrs, a.vifs, a.routes, a.flows);
                            match dim {
                                Dim::Vrs => vrs = x,
                                Dim::Vifs => vifs = x,
                                Dim::Routes => routes = x,
                                Dim::Flows => flows = x as u32,
                            }
                            let mut d =
                                Dut::open_with(*p, a, vrs, vifs, routes, flows, stop.clone())?;
                            let what = format!("{} NDR at {x} {dim_label}", d.name);
                            progress.set_stage(&what);
                            let s = capped(&short, shared);
                            let r = within_tester(&s, &what, &mut rec.notes, |s| {
                                mlr::search(&mut progress.wrap(&mut d), s)
                            })?;
                            let v = r
                                .goal("NDR")
                                .and_then(|g| g.conditional_throughput)
                                .context("no NDR")?;
                            let mut m = Measurement::new(
                                &format!("scaling/{}B/{dim_label}={x}", a.frame_size),
                                &d.name,
                                "frames/s",
                            );
                            m.value = Some(v);
                            m.trials = r.trials.clone();
                            rec.measurements.push(m);
                            found
                                .scaling
                                .entry(dim_label)
                                .or_default()
                                .entry(d.name.clone())
                                .or_default()
                                .push((x as f64, v));
                        }
                    }
                }
            }
            Test::Isolation => {
                for p in &a.duts {
                    if *p == Profile::Kernel {
                        rec.notes
                            .push("kernel: one routing table, so no isolation test".into());
                        continue;
                    }
                    let mut d = Dut::open(*p, a, 2, stop.clone())?;
                    let n = ndr[p.name()];
                    // VR1 at 3× the NDR, VR2 at 0.3× of it — VR1 less if the tester cannot
                    // offer the sum (the record says what was offered).
                    let total = (3.3 * n).min(ceiling(&d.name));
                    let (v1, v2) = (total - 0.3 * n, 0.3 * n);
                    d.set_shares(&[v1, v2])?;
                    progress.set_stage(&format!("{} isolation", d.name));
                    let t = progress.wrap(&mut d).trial(total, secs(a.point_seconds))?;
                    let per = d.per_vr();
                    let mut m = Measurement::new(
                        &format!("isolation/{}B VR2 delivered", a.frame_size),
                        &d.name,
                        "ratio",
                    );
                    let (s2, r2) = per[1];
                    m.value = Some(if s2 == 0 { 0.0 } else { r2 as f64 / s2 as f64 });
                    m.detail = serde_json::json!({
                        "vr1": {"offered_fps": v1, "x_ndr": v1 / n, "sent": per[0].0, "received": per[0].1},
                        "vr2": {"offered_fps": v2, "x_ndr": 0.3, "sent": per[1].0, "received": per[1].1},
                    });
                    m.trials = vec![t];
                    rec.measurements.push(m);
                }
            }
        }
    }
    Ok(())
}

/// RFC 2544 §26.4 back-to-back: the longest burst at `rate` with no frame lost (binary search
/// over burst lengths 1 … 2^22, a burst being a trial of `len / rate` seconds).
fn burst<M: Measurer>(m: &mut M, rate: f64) -> anyhow::Result<(u64, Vec<Trial>)>
where
    M::Error: Send + Sync,
{
    let mut trials = Vec::new();
    let (mut lo, mut hi) = (0u64, 1u64 << 22);
    let mut probe = |m: &mut M, len: u64| -> anyhow::Result<bool> {
        let t = m
            .trial(rate, Duration::from_secs_f64(len as f64 / rate))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let ok = t.is_lossless();
        trials.push(t);
        Ok(ok)
    };
    if probe(m, hi)? {
        return Ok((hi, trials));
    }
    while hi - lo > (hi / 100).max(1) {
        let mid = lo + (hi - lo) / 2;
        if probe(m, mid.max(1))? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, trials))
}

fn write(a: &Args, out: &Path, rec: &RunRecord, found: &Found) -> anyhow::Result<()> {
    rec.save(out.join("run.json"))?;
    let mut rep = Report::from_record(rec);
    if !found.ndr.is_empty() {
        let mut t = vrhost_bench::report::table::Table::new([
            ("DUT", vrhost_bench::report::table::Align::Left),
            (
                "NDR Mpps (median)",
                vrhost_bench::report::table::Align::Right,
            ),
            ("repeats", vrhost_bench::report::table::Align::Right),
            ("spread", vrhost_bench::report::table::Align::Right),
            (
                "tester max offered Mpps: paced · unpaced · DUT carried at unpaced",
                vrhost_bench::report::table::Align::Right,
            ),
        ]);
        for (d, v) in &found.ndr {
            let s = Summary::of(v).ok();
            let lower = if found.ndr_lower.get(d) == Some(&true) {
                "≥ "
            } else {
                ""
            };
            t.row([
                d.clone(),
                format!("{lower}{:.3}", s.as_ref().map_or(v[0], |s| s.median) / 1e6),
                v.len().to_string(),
                s.and_then(|s| s.spread())
                    .map_or("—".into(), |x| format!("{:.1} %", 100.0 * x)),
                found.tester.get(d).map_or("—".into(), |t| match t.carried {
                    Some(c) => format!(
                        "{:.3} · {:.3} · {:.3}",
                        t.max / 1e6,
                        t.unpaced / 1e6,
                        c / 1e6
                    ),
                    None => format!("{:.3}", t.max / 1e6),
                }),
            ]);
        }
        rep.heading(2, "NDR side by side").table(&t).paragraph(
            "The tester's maximum is measured with each DUT in the loop before its searches \
             (which stay below 80 % of the paced maximum). For a lab DUT, what it carried when \
             offered the unpaced maximum is its forwarding rate at that load, with loss. An NDR \
             found at the highest load searched is bounded by the generator, not the DUT, and \
             marked ≥.",
        );
        if found.ndr.len() == 2 {
            let ks: Vec<&String> = found.ndr.keys().collect();
            let r = vrhost_bench::stats::per_round_ratios(&found.ndr[ks[1]], &found.ndr[ks[0]]);
            if let Some(s) = r.ok().and_then(|r| Summary::of(&r).ok()) {
                rep.paragraph(&format!(
                    "{} ÷ {}: median of per-round ratios **{:.3}** (range {:.3}–{:.3}).",
                    ks[1], ks[0], s.median, s.min, s.max
                ));
            }
        }
    }
    if !found.overload.is_empty() {
        let series: Vec<Series> = found
            .overload
            .iter()
            .map(|(d, t)| Series::overload(d, t))
            .collect();
        let svg = plot::overload_curve(
            &format!("{} B frames: carried vs offered", a.frame_size),
            &series,
        )?;
        plot::save_svg(out.join("overload.svg"), &svg)?;
        rep.heading(2, "Carried vs offered load")
            .image("carried vs offered", "overload.svg");
    }
    if !found.latency.is_empty() {
        let rows: Vec<(String, &LatencySummary)> = found
            .latency
            .iter()
            .flat_map(|(d, v)| v.iter().map(move |(p, l)| (format!("{d} at {p}"), l)))
            .collect();
        let refs: Vec<(&str, &LatencySummary)> =
            rows.iter().map(|(n, l)| (n.as_str(), *l)).collect();
        rep.heading(2, "Latency").table(&latency_table(&refs));
        let cdfs: Vec<LatencyCdf> = rows
            .iter()
            .map(|(n, l)| LatencyCdf::from_summary(n, l))
            .collect();
        let svg = plot::latency_cdfs("latency CDF", &cdfs)?;
        plot::save_svg(out.join("latency.svg"), &svg)?;
        rep.image("latency CDFs", "latency.svg");
    }
    if !found.workpoints.is_empty() {
        for (d, s) in &found.workpoints {
            rep.heading(2, &format!("Work points, {d}"))
                .table(&work_point_table(s));
        }
        let series: Vec<Series> = found
            .workpoints
            .iter()
            .map(|(d, s)| Series::fairness(d, &s.points))
            .collect();
        let svg = plot::throughput_vs_fairness("throughput vs Jain's index J(k)", &series)?;
        plot::save_svg(out.join("workpoints.svg"), &svg)?;
        rep.image("throughput vs J", "workpoints.svg");
    }
    for (k, (dim, per)) in found.scaling.iter().enumerate() {
        let series: Vec<Series> = per.iter().map(|(d, p)| Series::new(d, p.clone())).collect();
        let svg = plot::scaling_curve(&format!("NDR vs {dim}"), dim, &series)?;
        let f = format!("scaling-{k}.svg");
        plot::save_svg(out.join(&f), &svg)?;
        rep.heading(2, &format!("Scaling: NDR vs {dim}"))
            .image(&format!("NDR vs {dim}"), &f);
    }
    rep.save(out.join("report.md"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    /// A search stopped by the tester's shortfall runs again under 90 % of what the tester
    /// made, with a note; three times at most; other errors pass straight through.
    #[test]
    fn a_search_the_tester_cannot_feed_runs_again_under_what_it_made() {
        let _alone = crate::cores_alone();
        use vrhost_bench::search::SearchError;
        use vrhost_bench::search::mlr::MlrSettings;
        use vrhost_bench::trial::TrialError;
        let short = |load: f64| -> SearchError<std::io::Error> {
            SearchError::Trial(TrialError::Shortfall {
                load,
                duration: std::time::Duration::from_secs(1),
                sent: (load / 2.0) as u64,
                achieved: load / 2.0,
                shortfall: 0.5,
                max: 0.05,
            })
        };
        let s = MlrSettings::ndr_pdr(1e4, 8e6);
        let mut notes = Vec::new();
        let mut maxes = Vec::new();
        let r = super::within_tester(&s, "wp", &mut notes, |s| {
            maxes.push(s.max_load);
            if s.max_load > 3e6 {
                Err(short(s.max_load))
            } else {
                Ok(s.max_load)
            }
        })
        .unwrap();
        assert_eq!(maxes, [8e6, 3.6e6, 1.62e6]);
        assert_eq!(r, 1.62e6);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("fell short at 8.000 Mpps"), "{notes:?}");
        let mut calls = 0;
        let e = super::within_tester(&s, "wp", &mut notes, |s| {
            calls += 1;
            Err::<(), _>(short(s.max_load))
        })
        .unwrap_err();
        assert_eq!(calls, 4);
        assert!(e.to_string().contains("short"), "{e}");
        let mut calls = 0;
        super::within_tester(&s, "wp", &mut notes, |_| {
            calls += 1;
            Err::<(), SearchError<std::io::Error>>(SearchError::Setting {
                field: "x",
                value: "1".into(),
                reason: "bad",
            })
        })
        .unwrap_err();
        assert_eq!(calls, 1);
    }

    /// A tester that makes 10 Mpps paced however much it made unpaced: the searches' ceiling
    /// comes down until 80 % of it is offered in full; one that keeps up keeps its maximum.
    #[test]
    fn the_search_ceiling_is_what_the_tester_offers_paced() {
        let _alone = crate::cores_alone();
        let mut tries = Vec::new();
        let max = super::paced_max(20e6, |load| {
            tries.push(load);
            Ok(load.min(10e6))
        })
        .unwrap();
        assert_eq!(tries.len(), 2, "{tries:?}");
        assert!(0.8 * max <= 10e6 && 0.8 * max >= 9e6, "{max}");
        let max = super::paced_max(20e6, Ok).unwrap();
        assert_eq!(max, 20e6);
    }

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: Args,
    }

    fn args(line: &str) -> Args {
        Cli::try_parse_from(std::iter::once("measure").chain(line.split_whitespace()))
            .unwrap()
            .a
    }

    #[test]
    fn lab_profiles_vary_only_what_the_lab_builds() {
        let _alone = crate::cores_alone();
        for p in [
            Profile::VrhostAfxdp,
            Profile::VrhostAfpacket,
            Profile::Kernel,
            Profile::KernelMacvlan,
            Profile::KernelBridge,
        ] {
            for (dim, x) in [
                (Dim::Vrs, 1),
                (Dim::Vifs, 2),
                (Dim::Routes, 0),
                (Dim::Routes, 65_536),
                (Dim::Flows, 1),
                (Dim::Flows, 10_000),
            ] {
                assert!(p.can_vary(dim, x).is_ok(), "{p:?} {dim:?} {x}");
            }
            // The vrhost profiles add idle VIFs (up to 64 per VR); the kernel's cannot.
            let vifs = if p.is_vrhost_lab() {
                assert!(p.can_vary(Dim::Vifs, 64).is_ok(), "{p:?}");
                65
            } else {
                8
            };
            for (dim, x) in [(Dim::Vifs, vifs), (Dim::Routes, 65_537), (Dim::Flows, 0)] {
                let e = p.can_vary(dim, x).unwrap_err();
                assert!(e.contains(p.name()) && e.contains(dim.label()), "{e}");
            }
            assert_eq!(p.can_vary(Dim::Vrs, 16).is_ok(), p != Profile::Kernel);
        }
        for (dim, x) in [(Dim::Vrs, 4096), (Dim::Vifs, 64), (Dim::Routes, 65_536)] {
            assert!(Profile::VrhostInproc.can_vary(dim, x).is_ok());
            assert!(Profile::VrhostInproc.can_vary(dim, x + 1).is_err());
        }
        // Flows stay inside the routed /24s in the lab (in-process, the sweep is clamped).
        let a = args("--routes 2");
        assert!(Profile::Kernel.lab_scale(&a, Dim::Flows, 511).is_ok());
        let e = Profile::Kernel.lab_scale(&a, Dim::Flows, 512).unwrap_err();
        assert!(e.contains("1 to 511 flows"), "{e}");
        assert!(Profile::VrhostInproc.lab_scale(&a, Dim::Flows, 512).is_ok());
    }

    #[test]
    fn default_scaling_points_skip_what_a_dut_cannot_vary() {
        let _alone = crate::cores_alone();
        let (plan, skipped) = scaling_plan(&args(
            "--tests scaling --duts vrhost-inproc,kernel,kernel-macvlan",
        ))
        .unwrap();
        let duts = |d: Dim| {
            plan.iter()
                .find(|(dim, ..)| *dim == d)
                .map(|(_, _, duts)| duts.clone())
                .unwrap_or_default()
        };
        use Profile::{Kernel, KernelMacvlan, VrhostInproc};
        assert_eq!(duts(Dim::Vrs), [VrhostInproc, KernelMacvlan]);
        assert_eq!(duts(Dim::Vifs), [VrhostInproc]);
        for d in [Dim::Routes, Dim::Flows] {
            assert_eq!(duts(d), [VrhostInproc, Kernel, KernelMacvlan], "{d:?}");
        }
        // kernel: VRs and VIFs; kernel-macvlan: VIFs.
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped.iter().all(|n| n.contains("not measured against")));
        let (plan, skipped) = scaling_plan(&args(
            "--duts kernel-bridge --scale-vrs 1,3 --scale-flows 1",
        ))
        .unwrap();
        assert_eq!(plan.len(), 3, "VRs, routes, flows");
        assert_eq!(skipped.len(), 1, "VIFs by default: {skipped:?}");
        let e = scaling_plan(&args("--duts kernel-bridge --scale-vifs 2,8"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--scale-vifs 2,8: kernel-bridge: 8 VIFs per VR"),
            "{e}"
        );
        let e = scaling_plan(&args("--duts kernel-bridge --routes 1 --scale-flows 1,300"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--scale-flows 1,300: kernel-bridge: --flows 300"),
            "{e}"
        );
    }
}
