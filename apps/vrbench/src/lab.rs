//! `vrbench lab up|down|ls|show`: build, list, describe and remove the namespace lab that the
//! tests and benchmarks run in (see `vrhost_lab::topology` for the topology itself).
//!
//! Why a command: a new user's first try, and every measurement with real ports, starts
//! from the same topology; building it by hand would take a page of `ip` commands and one
//! typo would make vrhost and the kernel baseline differ. `up` keeps the lab after it
//! exits (unlike the tests' labs), prints what was built and what to run next, and
//! `--json` prints the same description for tools (a vrhost config generator, scripts).
//! `down` removes exactly one lab's namespaces, whoever made it.

use anyhow::{Context, bail};
use serde_json::{Value, json};
use vrhost_lab::{Forwarder, Lab, LabSpec, Side, VrSide};

/// Options of `vrbench lab`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Build a lab and leave it running: router namespace `<name>-r` (ports p0, p1), source
    /// and sink sides `<name>-a`/`<name>-b`, and per VR hosts `<name>-a<i>`/`<name>-b<i>`.
    Up(UpArgs),
    /// Remove a lab: every namespace `<name>-r`, `<name>-a`, `<name>-a<i>`, …
    Down(NameArgs),
    /// List the labs on this host.
    Ls(LsArgs),
    /// Describe an existing lab (as `up` does after building it).
    Show(ShowArgs),
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    /// Lab name: the prefix of its namespaces.
    #[arg(long, default_value = "lab")]
    name: String,
    /// Virtual routers (each with a host on each side).
    #[arg(long, default_value_t = 1)]
    vrs: u32,
    /// rx/tx queue pairs per veth end (one per forwarding core).
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// The Linux kernel forwards (one namespace `<name>-vr<i>` per VR, macvlans of p0/p1)
    /// instead of vrhost.
    #[arg(long, conflicts_with_all = ["kernel_plain", "kernel_bridge"])]
    kernel: bool,
    /// The plain native IP forwarder: addresses on p0/p1 themselves, one VR only.
    #[arg(long, conflicts_with = "kernel_bridge")]
    kernel_plain: bool,
    /// The Linux kernel forwards in a namespace per VR reached through veth pairs and a
    /// bridge per router port (the veth/bridge virtual router).
    #[arg(long)]
    kernel_bridge: bool,
    /// Every VR uses the same addresses (10.0.0.0/24 and 10.0.1.0/24, fd00:a::/64 and
    /// fd00:b::/64).
    #[arg(long)]
    overlapping: bool,
    /// Print the description as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct NameArgs {
    /// Lab name.
    #[arg(long, default_value = "lab")]
    name: String,
}

#[derive(clap::Args, Debug)]
struct LsArgs {
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// Lab name.
    #[arg(long, default_value = "lab")]
    name: String,
    /// Print the description as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    match &args.cmd {
        Cmd::Up(a) => up(a),
        Cmd::Down(a) => {
            need_root("vrbench lab down")?;
            let gone = Lab::down(&a.name)?;
            if gone.is_empty() {
                println!("no lab `{}` here (nothing to remove)", a.name);
            } else {
                println!("removed lab `{}`: {} namespaces", a.name, gone.len());
            }
            Ok(())
        }
        Cmd::Ls(a) => ls(a),
        Cmd::Show(a) => {
            let lab = Lab::attach(&a.name)?;
            print_lab(&lab, a.json, false);
            Ok(())
        }
    }
}

/// Fail early, with a clear message, unless the effective user is root (`Uid:` in
/// /proc/self/status: real, effective, …).
fn need_root(what: &str) -> anyhow::Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1));
    if euid != Some("0") {
        bail!("{what} needs root: it creates network namespaces (try sudo)");
    }
    Ok(())
}

fn up(a: &UpArgs) -> anyhow::Result<()> {
    let forwarder = if a.kernel_bridge {
        Forwarder::KernelBridge
    } else if a.kernel_plain {
        Forwarder::KernelPlain
    } else if a.kernel {
        Forwarder::Kernel
    } else {
        Forwarder::Vrhost
    };
    let spec = LabSpec::new(&a.name)
        .vrs(a.vrs)
        .queues(a.queues)
        .forwarder(forwarder)
        .overlapping(a.overlapping);
    spec.validate()?;
    need_root("vrbench lab up")?;
    let lab = Lab::up(&spec).with_context(|| format!("building lab `{}`", spec.prefix))?;
    print_lab(&lab, a.json, true);
    lab.keep();
    Ok(())
}

fn ls(a: &LsArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for name in Lab::list()? {
        let namespaces = Lab::namespaces_of(&name)?.len();
        match Lab::attach(&name) {
            Ok(lab) => rows.push((name, namespaces, Ok(lab.spec().clone()))),
            Err(e) => rows.push((name, namespaces, Err(e.to_string()))),
        }
    }
    if a.json {
        let v: Vec<Value> = rows
            .iter()
            .map(|(name, n, spec)| match spec {
                Ok(s) => json!({
                    "name": name, "namespaces": n, "forwarder": s.forwarder.name(),
                    "vrs": s.vrs, "queues": s.queues, "overlapping": s.overlapping,
                }),
                Err(e) => json!({ "name": name, "namespaces": n, "error": e }),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("JSON"));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no labs (make one with `vrbench lab up`)");
        return Ok(());
    }
    println!(
        "{:<24} {:>10} {:<13} {:>5} {:>6} {:<11}",
        "NAME", "NAMESPACES", "FORWARDER", "VRS", "QUEUES", "ADDRESSES"
    );
    for (name, n, spec) in rows {
        match spec {
            Ok(s) => println!(
                "{name:<24} {n:>10} {:<13} {:>5} {:>6} {:<11}",
                s.forwarder.name(),
                s.vrs,
                s.queues,
                if s.overlapping {
                    "overlapping"
                } else {
                    "separate"
                }
            ),
            Err(e) => println!("{name:<24} {n:>10} ({e})"),
        }
    }
    Ok(())
}

fn side_json(lab: &Lab, vr: u32, s: &VrSide) -> Value {
    let a = &s.addrs;
    json!({
        "port": s.port,
        "vif_mac": s.vif_mac.to_string(),
        "router_ns": lab.kernel_router(vr).map(|n| n.name()),
        "router_ifname": lab.kernel_router(vr).map(|_| s.port),
        "net4": a.net4.to_string(),
        "gw4": a.gw4.to_string(),
        "net6": a.net6.to_string(),
        "gw6": a.gw6.to_string(),
        "host_ns": s.host.name(),
        "host_ifname": s.host_ifname,
        "host_mac": s.host_mac.to_string(),
        "host4": a.host4.to_string(),
        "host6": a.host6.to_string(),
    })
}

/// The lab as JSON: everything a config generator or script needs.
fn lab_json(lab: &Lab) -> Value {
    let spec = lab.spec();
    let port = |s: Side| {
        json!({
            "name": s.port(),
            "mac": lab.port_mac(s).to_string(),
            "peer_ns": lab.side(s).name(),
            "peer_ifname": s.side_ifname(),
            "peer_mac": vrhost_lab::addressing::side_mac(s).to_string(),
        })
    };
    json!({
        "name": spec.prefix,
        "forwarder": spec.forwarder.name(),
        "vrs": spec.vrs,
        "queues": spec.queues,
        "overlapping": spec.overlapping,
        "router_ns": lab.router().name(),
        "ports": { "a": port(Side::A), "b": port(Side::B) },
        "vr": lab.vrs().iter().map(|vr| json!({
            "index": vr.index,
            "name": vr.name,
            "a": side_json(lab, vr.index, &vr.a),
            "b": side_json(lab, vr.index, &vr.b),
        })).collect::<Vec<_>>(),
    })
}

fn print_lab(lab: &Lab, as_json: bool, just_built: bool) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&lab_json(lab)).expect("JSON")
        );
        return;
    }
    let spec = lab.spec();
    let p = &spec.prefix;
    println!(
        "lab `{p}`{}: forwarder {}, {} VR{}, {} queue{} per port, {} addresses",
        if just_built { " is up" } else { "" },
        spec.forwarder,
        spec.vrs,
        if spec.vrs == 1 { "" } else { "s" },
        spec.queues,
        if spec.queues == 1 { "" } else { "s" },
        if spec.overlapping {
            "overlapping"
        } else {
            "separate"
        },
    );
    println!();
    println!(
        "{:<14} {:<4} {:<17}  {:<14} {:<4} peer mac",
        "router ns", "port", "mac", "peer ns", "peer"
    );
    for s in Side::BOTH {
        println!(
            "{:<14} {:<4} {:<17}  {:<14} {:<4} {}",
            lab.router().name(),
            s.port(),
            lab.port_mac(s).to_string(),
            lab.side(s).name(),
            s.side_ifname(),
            vrhost_lab::addressing::side_mac(s),
        );
    }
    println!();
    println!(
        "{:<6} {:<4} {:<18} {:<17} {:<34} {:<14} {:<17} host addresses",
        "vr", "port", "gateway ns/if", "vif mac", "gateway addresses", "host ns", "host mac"
    );
    for vr in lab.vrs() {
        for s in Side::BOTH {
            let h = vr.side(s);
            let gw_at = match lab.kernel_router(vr.index) {
                Some(ns) => format!("{}/{}", ns.name(), h.port),
                None => "(vrhost)".to_string(),
            };
            println!(
                "{:<6} {:<4} {:<18} {:<17} {:<34} {:<14} {:<17} {}/{} {}/{}",
                if s == Side::A { vr.name.as_str() } else { "" },
                h.port,
                gw_at,
                h.vif_mac.to_string(),
                format!(
                    "{}/{} {}/{}",
                    h.addrs.gw4, h.addrs.net4.len, h.addrs.gw6, h.addrs.net6.len
                ),
                h.host.name(),
                h.host_mac.to_string(),
                h.addrs.host4,
                h.addrs.net4.len,
                h.addrs.host6,
                h.addrs.net6.len,
            );
        }
    }
    println!();
    let vr0 = lab.vr(0);
    let (a0, b0) = (&vr0.a, &vr0.b);
    if spec.forwarder.is_kernel() {
        println!("try (the kernel forwards):");
        println!(
            "  ip netns exec {} ping -c3 {}",
            a0.host.name(),
            b0.addrs.host4
        );
        println!(
            "  ip netns exec {} ping -c3 {}",
            a0.host.name(),
            b0.addrs.host6
        );
        println!(
            "  ip netns exec {} iperf3 -s -1 -D; sleep 0.5; ip netns exec {} iperf3 -c {} -t 5",
            b0.host.name(),
            a0.host.name(),
            b0.addrs.host4
        );
    } else {
        println!(
            "next: run vrhost in {} on ports p0 and p1 with the VIF MACs and gateway addresses \
             above (`vrbench lab show --name {p} --json` has them for a config), then:",
            lab.router().name()
        );
        println!(
            "  ip netns exec {} ping -c3 {}",
            a0.host.name(),
            b0.addrs.host4
        );
        println!(
            "  (until vrhost runs, nothing forwards: frames from the hosts arrive on p0 \
             addressed to their VR's VIF MAC)"
        );
    }
    println!("remove: vrbench lab down --name {p}");
}
