//! vrbench: vrhost's measurement tool.
//!
//! For now it has one job, `vrbench fib`: build the generated full Internet tables and measure
//! the FIB (lookups/s single and batch over several destination mixes, build/insert/delete
//! rates, memory), with a same-run baseline so that figures from these noisy machines can be
//! compared as ratios. Later issues add the data-plane and RFC 2544 commands.

mod fibbench;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "vrbench", version, about = "Benchmarks for vrhost")]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// FIB benchmark on generated full IPv4/IPv6 tables (the default command).
    Fib(fibbench::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd.unwrap_or(Cmd::Fib(fibbench::Args::default())) {
        Cmd::Fib(a) => fibbench::run(&a),
    }
}
