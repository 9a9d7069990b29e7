//! vrbench: vrhost's measurement tool.
//!
//! * `vrbench inproc` (the default command): the data plane in one process, a generator and a
//!   sink as port backends inside each worker's poll; Mpps per worker core, cycles per packet
//!   per node, drops by reason; `--suite` runs the targets of the data-plane issue.
//! * `vrbench fair`: the fair-sharing experiments (Egi Fig. 5 and 7, Rathore Table 1,
//!   weights, the scheduler's cost, on-demand cores), in process.
//! * `vrbench fib`: build the generated full Internet tables and measure the FIB (lookups/s
//!   single and batch over several destination mixes, build/insert/delete rates, memory).
//! * `vrbench lab up|down|ls|show`: the network-namespace lab (vrhost or the kernel
//!   forwarding) that measurements over real ports and a new user's first try run in.
//!
//! Every figure comes with what it should be compared against in the same invocation (a
//! baseline, a target, or another scenario), because these machines are noisy. Later issues
//! add the RFC 2544 commands over real ports.

mod cores;
mod fair;
mod fibbench;
mod inproc;
mod lab;

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
    /// Network-namespace lab: `up` (build and keep), `down`, `ls`, `show`.
    Lab(lab::Args),
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
        Cmd::Lab(a) => lab::run(&a),
    }
}
