//! vrbench: vrhost's measurement tool.
//!
//! * `vrbench inproc` (the default command): the data plane in one process, a generator and a
//!   sink as port backends inside each worker's poll; Mpps per worker core, cycles per packet
//!   per node, drops by reason; `--suite` runs the targets of the data-plane issue.
//! * `vrbench fair`: the fair-sharing experiments (Egi Fig. 5 and 7, Rathore Table 1,
//!   weights, the scheduler's cost, on-demand cores), in process.
//! * `vrbench fib`: build the generated full Internet tables and measure the FIB (lookups/s
//!   single and batch over several destination mixes, build/insert/delete rates, memory).
//! * `vrbench fwd`: forwarding rate through the namespace lab, 64-byte frames from an XDP
//!   live-frames generator to an XDP sink: vrhost (AF_XDP, AF_PACKET) against the kernel's
//!   IP forwarder, single- and 2-queue layouts, 1 and 64 VRs, interleaved trials.
//! * `vrbench trial`: one paced trial of signed frames (XDP live frames stamped with
//!   sequence numbers and times) through a lab DUT — vrhost, the kernel forwarder, macvlan
//!   or veth/bridge VRs — with loss, reordering, duplication and latency per VR stream.
//! * `vrbench lab up|down|ls|show`: the network-namespace lab (vrhost or the kernel
//!   forwarding) that measurements over real ports and a new user's first try run in.
//! * `vrbench sync latency|isolation`: the control plane's netlink sync — how soon routes
//!   added in a VR's namespace are in the FIB, and what a VR churning routes costs the others.
//!
//! Every figure comes with what it should be compared against in the same invocation (a
//! baseline, a target, or another scenario), because these machines are noisy. Later issues
//! add the RFC 2544 commands over real ports.

mod app;
mod attempts;
mod cores;
mod dut_inproc;
mod fair;
mod fibbench;
mod fwd;
mod host;
mod inproc;
mod lab;
mod lab_frame;
mod live;
mod measure;
mod number;
mod rt;
mod stop;
mod syncbench;

/// Every unit test of this binary takes this, so they run one at a time. Some pin
/// `SCHED_FIFO` threads to cores and run timed traffic (the in-process tester and DUT
/// worker, a lab trial through the kernel with its NAPI thread pinned). With any other test
/// beside it — an ordinary thread runnable on its core — the in-process DUT lost 1.4 % at
/// 2 Mpps in CI and locally (the scheduler gives ordinary threads time even against
/// `SCHED_FIFO` ones), and alone it did not. (The kernel lab's losses turned out to come
/// from the pinned NAPI path itself: see `LONG_RUNS_FROM_PPS` in `live/generator.rs`.) The
/// binary's tests take about 10 s one at a time.
#[cfg(test)]
pub(crate) fn cores_alone() -> std::sync::MutexGuard<'static, ()> {
    static CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CORES.lock().unwrap_or_else(|e| e.into_inner())
}

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "vrbench", version, about = "Benchmarks for vrhost")]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// In-process data-plane benchmark: generator → mem ports → VRs → sink (the default
    /// command).
    Inproc(inproc::Args),
    /// Fair sharing between VRs: Egi Fig. 5 and 7, Rathore Table 1, weights, scheduler
    /// cost, on-demand cores (in process, a generator queue per VR).
    Fair(fair::Args),
    /// FIB benchmark on generated full IPv4/IPv6 tables.
    Fib(fibbench::Args),
    /// Forwarding rate through the lab: vrhost vs the kernel, 64-byte frames.
    Fwd(fwd::Args),
    /// One rate-controlled trial of signed traffic through a lab DUT: loss, reordering,
    /// duplication and latency per VR stream.
    Trial(live::Args),
    /// Network-namespace lab: `up` (build and keep), `down`, `ls`, `show`.
    Lab(lab::Args),
    /// RFC 2544 / RFC 9971 methodology against DUT profiles: NDR/PDR, throughput, latency,
    /// overload curve, back-to-back, work points, isolation; JSON, Markdown and SVG plots.
    Measure(measure::Args),
    /// A few-minute version of `measure` (shortened trials, labelled as such).
    Quick(measure::QuickArgs),
    /// Two runs side by side (their run.json files or directories).
    Compare(measure::CompareArgs),
    /// The control plane's netlink sync: `latency` (routes added in a VR's namespace until
    /// they are all in the FIB) and `isolation` (other VRs' forwarding while one churns).
    Sync(syncbench::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli
        .cmd
        .unwrap_or_else(|| Cmd::Inproc(inproc::Args::default()))
    {
        Cmd::Inproc(a) => inproc::run(&a),
        Cmd::Fair(a) => fair::run(&a),
        Cmd::Fib(a) => fibbench::run(&a),
        Cmd::Fwd(a) => fwd::run(&a),
        Cmd::Measure(a) => measure::run(&a),
        Cmd::Quick(a) => measure::quick(&a),
        Cmd::Compare(a) => measure::compare_cmd(&a),
        Cmd::Lab(a) => lab::run(&a),
        Cmd::Trial(a) => live::run(&a),
        Cmd::Sync(a) => syncbench::run(&a),
    }
}
