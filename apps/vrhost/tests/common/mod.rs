//! A vrhost daemon started in a lab's router namespace, for the end-to-end tests: it is sent
//! SIGTERM (then SIGKILL) on drop, so a failing test never leaves it running, and its config
//! file is removed. Helpers run commands in the lab's host namespaces and read counters.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses part of the helpers"
)]

pub mod machine;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost::labconfig::{LabConfig, render};
use vrhost_lab::{Lab, Netns, Side};

static N: AtomicU32 = AtomicU32::new(0);

/// The vrhost binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_vrhost")
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    pub child: Child,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub netns_prefix: String,
}

/// The config for `vrs` of `lab` on `backend`, with control namespaces unique to the lab.
pub fn config(lab: &Lab, backend: &str, vrs: &[u32]) -> String {
    render(
        lab,
        &LabConfig {
            backend,
            cores: vec![0],
            vrs: vrs.to_vec(),
            netns_prefix: format!("{}-vr-", lab.prefix()),
            routes: Vec::new(),
            extra_vifs: 0,
            run_vrs: None,
        },
    )
}

impl Daemon {
    /// Start vrhost on `text` inside the lab's router namespace and wait until its control
    /// socket answers.
    pub fn start(lab: &Lab, text: &str) -> Daemon {
        Daemon::start_in(lab.router(), lab.prefix(), text)
    }

    /// Start vrhost on `text` inside namespace `router`; `prefix` names its files and must
    /// be the start of the config's `netns_prefix` (`<prefix>-vr-`), so a failed test's VR
    /// namespaces are found and removed.
    pub fn start_in(router: &Netns, prefix: &str, text: &str) -> Daemon {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("{prefix}-{n}"));
        let config = base.with_extension("toml");
        let socket = base.with_extension("sock");
        let log = base.with_extension("log");
        std::fs::write(&config, text).unwrap();
        Daemon::spawn(router, config, socket, log, format!("{prefix}-vr-"))
    }

    fn spawn(
        router: &Netns,
        config: PathBuf,
        socket: PathBuf,
        log: PathBuf,
        prefix: String,
    ) -> Daemon {
        let logf = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        // Not `ip netns exec`: that also gives the child a mount namespace of its own, and
        // the VRs' namespaces it creates would be invisible outside it.
        let child = Command::new(bin())
            .args(["run", "--netns", router.name()])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .unwrap();
        let mut d = Daemon {
            child,
            config,
            socket,
            log,
            netns_prefix: prefix,
        };
        d.wait_ready();
        d
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self.try_ctl(&["status"]).is_some() {
                return;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "vrhost exited ({st}) before it was ready:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "vrhost not ready after 20 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the daemon logged.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_ctl(&self, args: &[&str]) -> Option<Value> {
        let out = Command::new(bin())
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--json")
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten()
    }

    /// `vrhost ctl ARGS`; the whole output, success or not.
    pub fn ctl(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// `vrhost ctl --json ARGS`, which must succeed.
    pub fn ctl_json(&self, args: &[&str]) -> Value {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = self.ctl(&full);
        assert!(
            out.status.success(),
            "vrhost ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `ctl status` as JSON.
    pub fn status(&self) -> Value {
        self.try_ctl(&["status"])
            .unwrap_or_else(|| panic!("ctl status failed:\n{}", self.log_text()))
    }

    /// The status entry of VR `name`.
    pub fn vr(&self, name: &str) -> Value {
        self.status_entry("vrs", "name", name)
    }

    /// The status entry of the port on interface `iface`.
    pub fn port(&self, iface: &str) -> Value {
        self.status_entry("ports", "interface", iface)
    }

    /// The entry of `ctl status`'s list `list` whose `field` is `value` (null if none).
    fn status_entry(&self, list: &str, field: &str, value: &str) -> Value {
        self.status()[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e[field] == value)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// Replace the config file with `text`.
    pub fn rewrite(&self, text: &str) {
        std::fs::write(&self.config, text).unwrap();
    }

    /// SIGKILL the daemon and reap it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Start it again on the same files (after `kill9`).
    pub fn restart(mut self, lab: &Lab) -> Daemon {
        self.kill9();
        let d = Daemon::spawn(
            lab.router(),
            self.config.clone(),
            self.socket.clone(),
            self.log.clone(),
            self.netns_prefix.clone(),
        );
        // `self`'s drop must not remove the files the new daemon uses.
        std::mem::forget(self);
        d
    }

    /// SIGTERM and wait; the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st;
            }
            if Instant::now() > deadline {
                self.kill9();
                panic!("vrhost ignored SIGTERM:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            self.kill9();
        }
        if std::thread::panicking() {
            eprintln!("--- vrhost log ---\n{}", self.log_text());
        }
        let _ = std::fs::remove_file(&self.config);
        let _ = std::fs::remove_file(&self.log);
        // Control namespaces of a killed daemon.
        if let Ok(list) = vrhost_lab::ip(&["netns", "list"]) {
            for line in String::from_utf8_lossy(&list.stdout).lines() {
                let name = line.split_whitespace().next().unwrap_or("");
                if name.starts_with(&self.netns_prefix) {
                    drop(Netns::adopt(name));
                }
            }
        }
    }
}

/// `ping` from VR `vr`'s host on side A to `dst`; (sent, received).
pub fn ping(lab: &Lab, vr: u32, dst: &str, count: u32, interval: &str) -> (u32, u32) {
    let host = &lab.vr(vr).side(Side::A).host;
    let c = count.to_string();
    let out = host
        .command(&["ping", "-n", "-q", "-c", &c, "-i", interval, "-W", "1", dst])
        .output()
        .unwrap();
    parse_ping(&String::from_utf8_lossy(&out.stdout))
}

/// `count` pings from namespace `ns` to `dst`, 0.1 s apart; how many were answered.
pub fn ping_from(ns: &Netns, dst: &str, count: u32) -> u32 {
    let c = count.to_string();
    let out = ns
        .command(&["ping", "-n", "-q", "-c", &c, "-i", "0.1", "-W", "1", dst])
        .output()
        .unwrap();
    parse_ping(&String::from_utf8_lossy(&out.stdout)).1
}

/// (transmitted, received) from ping's summary line.
pub fn parse_ping(out: &str) -> (u32, u32) {
    let line = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary in {out:?}"));
    let nums: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

/// ICMP echo requests the namespace's kernel has received so far (from /proc/net/snmp).
pub fn echo_requests_received(ns: &Netns) -> u64 {
    let out = ns.exec(&["cat", "/proc/net/snmp"]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut icmp = text.lines().filter(|l| l.starts_with("Icmp:"));
    let names: Vec<&str> = icmp.next().unwrap().split_whitespace().collect();
    let values: Vec<&str> = icmp.next().unwrap().split_whitespace().collect();
    let i = names.iter().position(|n| *n == "InEchos").unwrap();
    values[i].parse().unwrap()
}

/// A TCP transfer with iperf3 from VR `vr`'s side-A host to its side-B host, for `secs`
/// seconds; the bytes the receiver got.
pub fn iperf(lab: &Lab, vr: u32, secs: u32) -> u64 {
    let v = lab.vr(vr);
    let (a, b) = (v.side(Side::A), v.side(Side::B));
    vrhost_lab::tools::iperf3(&a.host, &b.host, b.addrs.host4.into(), secs)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The sides' veth ends (`a0`, `b0`) with GRO on: a veth then takes frames its peer (the
/// router's port) sends by XDP transmit.
pub fn sides_take_xdp_transmit(lab: &Lab) {
    for (side, dev) in [(Side::A, "a0"), (Side::B, "b0")] {
        let on = lab
            .side(side)
            .run(|| vrhost_lab::offload::set_gro(dev, true))
            .unwrap()
            .unwrap();
        assert!(on, "GRO on {dev}");
    }
}

/// Poll `f` every 100 ms until it holds; panics naming `what` after `secs` seconds.
/// Returns how long it took.
pub fn wait(what: &str, secs: u64, f: impl FnMut() -> bool) -> Duration {
    wait_explained(what, secs, f, String::new)
}

/// [`wait`], and on a timeout the panic message ends with what `explain` says (the state
/// that tells a CI log why it took so long).
pub fn wait_explained(
    what: &str,
    secs: u64,
    mut f: impl FnMut() -> bool,
    explain: impl Fn() -> String,
) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out after {secs} s waiting for: {what}\n{}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t0.elapsed()
}
