//! `vrhost`: the daemon that runs virtual routers on real ports, and its CLI.
//!
//! - `vrhost run [CONFIG]` — run the routers a config file describes; with no file, build a
//!   demo lab of network namespaces and run the built-in example in it.
//! - `vrhost check CONFIG` — check a file (and this host) without touching anything.
//! - `vrhost ctl …` — talk to a running daemon over its control socket: `status`, `reload`,
//!   `vrs`, `routes VR`, `neigh VR`, `show VR`, `add FILE`, `remove VR`,
//!   `exec VR -- COMMAND…` (runs COMMAND inside the VR's namespace), `release VR` (a VR the
//!   watchdog quarantined forwards again).
//!
//! Signals: SIGTERM and SIGINT stop cleanly (workers joined, XDP programs detached, sockets
//! and control namespaces closed); SIGHUP reloads the file, as `vrhost ctl reload` does.

mod ctl;
mod daemon;
mod demo;
mod heldoff;
mod ports;
mod recent;
mod swap;

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
    /// The VRs: routes and neighbours the data plane holds, namespace, state.
    Vrs,
    /// A VR's routes as the data plane holds them.
    Routes {
        /// The VR.
        vr: String,
        /// Only IPv4 (4) or IPv6 (6).
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(["4", "6"]))]
        family: Option<String>,
        /// At most this many routes [default: 10,000 in a table, all with --json].
        #[arg(long)]
        limit: Option<u64>,
    },
    /// A VR's neighbours as the data plane holds them.
    Neigh {
        /// The VR.
        vr: String,
    },
    /// A VR's counters, VIFs, netlink sync and problems.
    Show {
        /// The VR.
        vr: String,
    },
    /// Add the VRs of a TOML file of `[[vr]]` sections (as in the config; `-` reads stdin),
    /// all or none. They run until the next reload.
    Add {
        /// The file.
        file: PathBuf,
    },
    /// Remove a VR (and its namespace).
    Remove {
        /// The VR.
        vr: String,
    },
    /// Run a command inside a VR's namespace (`vrhost ctl exec blue -- ip route`).
    Exec {
        /// The VR.
        vr: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
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
            use serde_json::json;
            let ask = |req: &str, args: serde_json::Value| {
                ctl::request(&socket, req, args)
                    .with_context(|| format!("control socket {}", socket.display()))
            };
            let reply = match cmd {
                CtlCmd::Reload => ask("reload", json!({}))?,
                CtlCmd::Status => ask("status", json!({}))?,
                CtlCmd::Vrs => ask("vrs", json!({}))?,
                CtlCmd::Routes { vr, family, limit } => {
                    let family: Option<u8> = family.and_then(|f| f.parse().ok());
                    // A table for people stops at 10,000 lines unless asked; JSON is whole.
                    let limit = limit.or((!json).then_some(10_000));
                    ask(
                        "routes",
                        json!({"vr": vr, "family": family, "limit": limit}),
                    )?
                }
                CtlCmd::Neigh { vr } => ask("neigh", json!({"vr": vr}))?,
                CtlCmd::Show { vr } => ask("show", json!({"vr": vr}))?,
                CtlCmd::Add { file } => {
                    let text = if file.as_os_str() == "-" {
                        std::io::read_to_string(std::io::stdin())?
                    } else {
                        std::fs::read_to_string(&file)
                            .with_context(|| format!("reading {}", file.display()))?
                    };
                    ask(
                        "add",
                        json!({"file": file.display().to_string(), "text": text}),
                    )?
                }
                CtlCmd::Remove { vr } => ask("remove", json!({"vr": vr}))?,
                CtlCmd::Release { vr } => ask("release", json!({"vr": vr}))?,
                CtlCmd::Exec { vr, command } => {
                    let reply = ask("netns", json!({"vr": vr}))?;
                    let ns = reply["netns"]
                        .as_str()
                        .context("no namespace in the reply")?;
                    // `ip netns exec` also gives the command the namespace's view of /sys
                    // and /etc/netns; exec(3) so exit status and terminal are the command's.
                    use std::os::unix::process::CommandExt;
                    let e = std::process::Command::new("ip")
                        .args(["netns", "exec", ns])
                        .args(&command)
                        .exec();
                    anyhow::bail!("running ip netns exec {ns}: {e}");
                }
            };
            ctl::print(&reply, json)
        }
    }
}
