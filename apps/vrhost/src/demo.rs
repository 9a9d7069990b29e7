//! `vrhost run` with no file: the built-in example, on a lab it builds itself.
//!
//! A new user has no interfaces to spare and no config yet, so the demo makes both: a lab of
//! network namespaces (`vrhost_lab`) with two tenants whose routers use the same addresses
//! (10.0.0.0/24 ⇄ 10.0.1.0/24), a config generated for it ([`vrhost::labconfig`]), and the
//! daemon running in the lab's router namespace. It pings through each router to show that
//! they forward, prints what to try next, and tears the lab down when it stops.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tracing::info;
use vrhost::labconfig::{LabConfig, render};
use vrhost_control::config::{Config, allowed_cores};
use vrhost_lab::{Lab, LabSpec, Side};

use crate::daemon;

pub(crate) fn run(name: &str, socket: &Path, seconds: Option<u64>) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "the built-in example builds network namespaces, which needs root: run it with sudo, \
             or give vrhost a config file for interfaces you have"
        );
    }
    // A demo killed earlier may have left its lab; start from nothing.
    let _ = Lab::down(name);
    let lab =
        Lab::up(&LabSpec::new(name).vrs(2).overlapping(true)).context("building the demo lab")?;
    let core = *allowed_cores().first().context("no usable core")?;
    let text = render(
        &lab,
        &LabConfig {
            backend: "auto",
            cores: vec![core],
            vrs: vec![0, 1],
            netns_prefix: format!("{name}-vr-"),
            routes: Vec::new(),
            extra_vifs: 0,
            run_vrs: None,
        },
    );
    let cfg = Config::parse("<built-in example>", &text)?;
    info!("demo lab {name:?} is up; the generated config is:\n{text}");
    lab.router().enter_current_thread()?;
    let hosts: Vec<(String, String, String)> = lab
        .vrs()
        .iter()
        .map(|vr| {
            (
                vr.name.clone(),
                vr.side(Side::A).host.name().to_string(),
                vr.side(Side::B).addrs.host4.to_string(),
            )
        })
        .collect();
    let hint = format!(
        "try: ip netns exec {} ping 10.0.1.2   |   vrhost ctl --socket {} status",
        lab.vr(0).side(Side::A).host.name(),
        socket.display()
    );
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        for (vr, ns, dst) in &hosts {
            let ok = std::process::Command::new("ip")
                .args(["netns", "exec", ns, "ping", "-c3", "-i0.2", "-W1", dst])
                .output()
                .is_ok_and(|o| o.status.success());
            info!(
                "{vr}: ping {dst} from namespace {ns}: {}",
                if ok { "ok" } else { "FAILED" }
            );
        }
        info!("{hint}");
    });
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let r = daemon::run(cfg, None, socket, deadline);
    drop(lab);
    r
}
