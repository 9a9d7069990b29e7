//! The `dpdk-testpmd` DUT profile: DPDK's test application forwarding between the lab's
//! router ports over AF_PACKET vdevs, in `mac` forwarding mode — the usual "what a DPDK
//! poll-mode loop does on these ports" baseline next to vrhost and the kernel.
//!
//! What it is and is not: `mac` mode receives a burst on port 0 (`p0`), rewrites the
//! Ethernet source to port 1's MAC and the destination to `--eth-peer` (VR 0's side-B host),
//! and sends the burst on port 1 (`p1`). No IP lookup, no TTL, no checksum: an L2 cross-
//! connect, so it bounds from above what any forwarder on the same ports (AF_PACKET, one
//! core) can do, and is labelled as such in reports. One VR (one stream): `mac` mode has one
//! peer per port.
//!
//! How it runs: `ip netns exec <router> dpdk-testpmd` with `--no-pci --no-huge --no-shconf`
//! and a file prefix of the lab's name (no hugepages, no shared config, so two runs never
//! share state; `--in-memory` is refused together with `--no-huge`), the
//! `net_af_packet` PMD on `p0` and `p1`, its forwarding lcore on the DUT core and its main
//! lcore (which only waits for input) on the generator's core, `--auto-start`; it forwards
//! until its standard input says so or it gets SIGINT, which [`Drop`] sends (then SIGKILL).
//! Ready when it prints "Press enter to exit". `p0` gets the `XDP_PASS` program first, as
//! for every AF_PACKET receiver in the lab (veth takes live frames only with its NAPI on).
//!
//! When the binary is missing, the profile is refused before anything is built, naming the
//! Debian package (`dpdk`). Nothing else in vrbench needs DPDK.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vrhost_lab::{Lab, Side};

/// The program's name.
pub(crate) const BIN: &str = "dpdk-testpmd";

/// `dpdk-testpmd` on `PATH`, or an error saying how to get it.
pub(crate) fn find() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(BIN);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "the dpdk-testpmd profile runs DPDK's {BIN}, which is not on PATH: install the Debian \
         package `dpdk` (apt-get install dpdk), or leave dpdk-testpmd out of the DUTs"
    )
}

/// A running testpmd; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Testpmd {
    child: Child,
    log: PathBuf,
}

impl Testpmd {
    /// Start `bin` in `lab`'s router namespace forwarding `p0` → `p1` on `dut_core`, with
    /// its idle main lcore on `main_core`; return once it forwards.
    pub(crate) fn start(
        bin: &Path,
        lab: &Lab,
        dut_core: usize,
        main_core: usize,
    ) -> anyhow::Result<Testpmd> {
        if dut_core == main_core {
            bail!("dpdk-testpmd needs two cores: its forwarding lcore {dut_core} and another");
        }
        let peer = lab.vr(0).side(Side::B).host_mac;
        let log = std::env::temp_dir().join(format!("vrbench-testpmd-{}.log", lab.prefix()));
        let out = std::fs::File::create(&log)?;
        let lcores = format!("{main_core},{dut_core}");
        let (main, a, b) = (
            main_core.to_string(),
            format!("net_af_packet0,iface={}", Side::A.port()),
            format!("net_af_packet1,iface={}", Side::B.port()),
        );
        let peer = format!("--eth-peer=1,{peer}");
        let prefix = format!("vrbench-{}", lab.prefix());
        // Line-buffered output (stdout is a file), so "Press enter to exit" shows at once.
        let argv = [
            "stdbuf",
            "-oL",
            bin.to_str().context("the dpdk-testpmd path is not UTF-8")?,
            "-l",
            &lcores,
            "--main-lcore",
            &main,
            "--no-pci",
            "--no-huge",
            "-m",
            "256",
            "--no-shconf",
            "--file-prefix",
            &prefix,
            "--vdev",
            &a,
            "--vdev",
            &b,
            "--",
            "--forward-mode=mac",
            &peer,
            "--auto-start",
            "--nb-cores=1",
            "--total-num-mbufs=16384",
        ];
        let child = lab
            .router()
            .command(&argv)
            .stdin(Stdio::piped())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut t = Testpmd { child, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = t.log_text();
            if text.contains("Press enter to exit") {
                return Ok(t);
            }
            if let Some(st) = t.child.try_wait()? {
                bail!("dpdk-testpmd exited ({st}) before forwarding:\n{text}");
            }
            if Instant::now() > deadline {
                bail!("dpdk-testpmd not forwarding after 30 s:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What testpmd printed.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}
