//! `vrhost`: the daemon that runs virtual routers on real ports, and its CLI.
//!
//! - `vrhost run [CONFIG]` — run the routers a config file describes; with no file, build a
//!   demo lab of network namespaces and run the built-in example in it.
//! - `vrhost check CONFIG` — check a file (and this host) without touching anything.
//! - `vrhost ctl reload|status|release VR` — talk to a running daemon over its control
//!   socket.
//!
//! Signals: SIGTERM and SIGINT stop cleanly (workers joined, XDP programs detached, sockets
//! and control namespaces closed); SIGHUP reloads the file, as `vrhost ctl reload` does.

mod ctl;
mod daemon;
mod demo;
mod ports;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "vrhost",
    version,
    about = "Many isolated virtual routers on one Linux host"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the daemon on CONFIG (TOML); with no file, run the built-in example in a demo lab.
    Run {
        /// The config file.
        config: Option<PathBuf>,
        /// Control socket path.
        #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Run in this named network namespace (`ip netns`), where the ports are. Only the
        /// network namespace changes, so the VRs' namespaces stay visible to `ip netns`.
        #[arg(long)]
        netns: Option<String>,
        /// Demo only: the lab's name prefix.
        #[arg(long, default_value = "vrhost-demo")]
        demo_name: String,
        /// Demo only: stop after this many seconds (default: run until SIGINT/SIGTERM).
        #[arg(long)]
        demo_seconds: Option<u64>,
    },
    /// Check a config file and this host against it, then exit.
    Check {
        /// The config file.
        config: PathBuf,
    },
    /// Control a running daemon.
    Ctl {
        /// Control socket path.
        #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        cmd: CtlCmd,
    },
}

#[derive(Debug, Subcommand)]
enum CtlCmd {
    /// Re-read the config file: add, remove and change VRs without disturbing the others.
    Reload,
    /// Ports, VRs (weight, worker, state: up, down or quarantined) and counters.
    Status,
    /// Let a VR the watchdog quarantined forward again.
    Release {
        /// The VR.
        vr: String,
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run {
            config: Some(path),
            socket,
            netns,
            ..
        } => {
            if let Some(ns) = netns {
                let mut h = vrhost_lab::Netns::adopt(&ns);
                // Not ours to delete.
                h.set_keep(true);
                h.enter_current_thread()
                    .with_context(|| format!("--netns {ns}"))?;
            }
            let cfg = vrhost_control::config::Config::load(&path)?;
            daemon::run(cfg, Some(path), &socket, None)
        }
        Cmd::Run {
            config: None,
            socket,
            netns: _,
            demo_name,
            demo_seconds,
        } => demo::run(&demo_name, &socket, demo_seconds),
        Cmd::Check { config } => {
            let cfg = vrhost_control::config::Config::load(&config)?;
            cfg.check_host()?;
            println!(
                "{}: ok ({} ports, {} virtual routers, {} cores)",
                config.display(),
                cfg.ports.len(),
                cfg.vrs.len(),
                cfg.workers()
            );
            Ok(())
        }
        Cmd::Ctl { socket, json, cmd } => {
            let req = match cmd {
                CtlCmd::Reload => serde_json::json!({"cmd": "reload"}),
                CtlCmd::Status => serde_json::json!({"cmd": "status"}),
                CtlCmd::Release { vr } => serde_json::json!({"cmd": "release", "vr": vr}),
            };
            let reply = ctl::request(&socket, &req)
                .with_context(|| format!("control socket {}", socket.display()))?;
            ctl::print(&reply, json)
        }
    }
}
