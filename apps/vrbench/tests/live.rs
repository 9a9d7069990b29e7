//! `vrbench trial` end to end through lab DUTs at a modest rate (50 kpps for 1 s, far below
//! what any profile forwards): the sink receives every frame the generator sent, per
//! stream (the kernel profiles with their NAPI inline: pinned, it really drops a few now and
//! then; at most 0.1 % lost, every frame received or counted lost), with positive latencies
//! below 100 ms; the generator hits the asked rate within
//! 10 % (a function check; see the figures in `live.rs` for the accuracy); weights split
//! the rate exactly (with IMIX frames); bad input is refused before any namespace exists;
//! Ctrl-C tears the lab down. Root only (under `CI=true` a missing root is a failure);
//! every lab has a unique name and none is left behind.
//!
//! How the sink's loss/reorder/duplicate counting is checked exactly on crafted frames
//! (no lab): `live::sink::tests` in the binary's unit tests (`BPF_PROG_RUN` on the real
//! program).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

static N: AtomicU32 = AtomicU32::new(0);

/// Tests run one at a time: each trial pins its generator to the last core and (vrhost) its
/// worker to core 0; two at once would share those cores and under-offer or drop. Tests
/// that only start processes take the lock too (see the bad-input test).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A lab name unique to this process and call.
fn unique(tag: &str) -> String {
    format!(
        "{tag}{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Build `vrhost` next to vrbench (same target directory and profile).
fn build_vrhost() -> PathBuf {
    let vrbench = PathBuf::from(env!("CARGO_BIN_EXE_vrbench"));
    let dir = vrbench.parent().expect("a directory").to_path_buf();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-q", "-p", "vrhost", "--bin", "vrhost"]);
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
        None => panic!("unexpected binary path {}", vrbench.display()),
    }
    assert!(cmd.status().expect("cargo build").success());
    dir.join("vrhost")
}

fn namespaces_of(name: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{name}-")))
        .map(str::to_string)
        .collect()
}

fn trial(name: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vrbench"));
    cmd.args(["trial", "--json", "--name", name]).args(args);
    if args.iter().any(|a| a.starts_with("vrhost")) {
        cmd.arg("--vrhost").arg(build_vrhost());
    }
    cmd.output().expect("running vrbench trial")
}

/// Run a trial and check what every modest-rate trial must show; returns the JSON.
fn lossless_trial(tag: &str, args: &[&str], rate_pps: f64) -> Value {
    // The kernel profiles' default is `p0`'s NAPI in a thread pinned to the DUT core, and
    // that path really loses frames now and then (14–31 of 50,000 locally, 233 in one CI
    // run: `a0` counts them as `xdp_xmit_errors`, `p0`'s ring full while the thread was held
    // off; see `LONG_RUNS_FROM_PPS` in `live/generator.rs`). These tests check vrbench's
    // counting, not that path (`kernel_on_its_own_core_…` below and the NAPI unit test in
    // `live/dut.rs` do), so the kernel profiles run with the NAPI inline here, which lost
    // nothing in the same series; a tenth of a percent is still allowed, every frame
    // accounted for.
    let kernel = args
        .windows(2)
        .any(|w| w[0] == "--dut" && w[1].starts_with("kernel"));
    if kernel && !args.contains(&"--rx-napi") {
        let mut with = args.to_vec();
        with.extend(["--rx-napi", "inline"]);
        return trial_losing_at_most(tag, &with, rate_pps, 0.001);
    }
    trial_losing_at_most(tag, args, rate_pps, 0.0)
}

/// Runs of one trial, at most, while the host disturbs them.
const ATTEMPTS: u32 = 5;

/// As [`lossless_trial`], but up to `max_loss` of the frames (a fraction) may be lost —
/// every frame still accounted for, per stream, as received or lost.
///
/// The host can take the lab's CPUs, and these tests must tell that from the DUT's loss.
/// The result says how much it took: the pacer's `missed` tokens (the generator held off)
/// and `steal` (the hypervisor running another guest on the generator's or the DUT's
/// core). In CI one such moment held the generator to 61 % of 200 kpps and stalled the lab
/// with it (10 ms latencies, 5.6 % lost); another held it back by 12 % twice running and
/// by 2.4 % in a third run, which lost 4.4 % through the kernel; locally the hypervisor
/// once took 310–520 ms of every run from the DUT's core (and up to 490 ms from the
/// generator's) for eight runs over two test runs, which lost 3–25 % at 200 kpps. So:
///
/// - a run whose generator the host held back by over 10 %, or that lost more than allowed
///   while the host took the cores, is run again after a pause, up to [`ATTEMPTS`] runs;
/// - the run that counts may lose, besides `max_loss`, the frames offered while the
///   hypervisor held a core beyond a quiet host's share (the result's `steal.quiet_ms`,
///   which `vrbench` itself judges by; the rate times that time): on a
///   quiet host nothing is excused, and a DUT that loses frames there fails at once;
/// - pacing is checked as accounting: every frame asked was sent or counted as missed.
fn trial_losing_at_most(tag: &str, args: &[&str], rate_pps: f64, max_loss: f64) -> Value {
    let _one_at_a_time = serial();
    let n = |v: &Value| v.as_u64().expect("a count");
    let mut attempt = 1;
    let (r, sent, want, excused) = loop {
        let name = unique(tag);
        let out = trial(&name, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "vrbench trial failed:\n{stderr}");
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout))
        });
        assert!(namespaces_of(&name).is_empty(), "lab {name} left behind");
        let sent = n(&r["sent"]);
        let want = rate_pps * r["spec"]["duration"].as_f64().unwrap();
        let [gen_ms, dut_ms, quiet_ms] = ["generator_ms", "dut_ms", "quiet_ms"].map(|k| {
            r["steal"][k]
                .as_f64()
                .unwrap_or_else(|| panic!("the result says what the hypervisor took: {r:#}"))
        });
        let stolen_s = (gen_ms.max(dut_ms) - quiet_ms).max(0.0) / 1e3;
        let excused = rate_pps * stolen_s;
        let held_back = (sent as f64) < 0.9 * want;
        let host_busy = r["under_offered"] == Value::Bool(true) || stolen_s > 0.0;
        let too_lossy = n(&r["lost"]) as f64 > max_loss * sent as f64;
        if !(held_back || too_lossy && host_busy) || attempt == ATTEMPTS {
            break (r, sent, want, excused);
        }
        eprintln!(
            "{tag}: attempt {attempt} disturbed: the generator sent {sent} of {want} (missed \
             {}), the hypervisor took {} ms from its core and {} ms from the DUT's, {} lost; \
             again",
            r["missed"], gen_ms, dut_ms, r["lost"]
        );
        attempt += 1;
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    eprintln!(
        "{tag}: sent {sent} of {want} asked ({:+.3} %), missed {}, lost {}, {excused:.0} \
         excused for the hypervisor's steal",
        (sent as f64 / want - 1.0) * 100.0,
        r["missed"],
        r["lost"]
    );
    // Pacing works (a function check, not a figure; the accuracy figures come from
    // `vrbench trial --dut none`, see live.rs): never more than asked, and what was not
    // sent is counted as missed (within 1 %: the last burst may fall due at the very end).
    // Half the asked load at least, or the trial showed too little.
    let missed = n(&r["missed"]);
    assert!(
        sent as f64 <= want && (sent + missed) as f64 >= 0.99 * want && sent as f64 >= 0.5 * want,
        "sent {sent} and missed {missed}, asked {want}: {r:#}"
    );
    let lost = n(&r["lost"]);
    assert_eq!(n(&r["received"]) + lost, sent, "{r:#}");
    assert!(
        lost as f64 <= max_loss * sent as f64 + excused,
        "loss at a modest rate: {r:#}"
    );
    let mut per_stream_sent = 0;
    for s in r["streams"].as_array().unwrap() {
        assert_eq!(
            n(&s["received"]) + n(&s["lost"]),
            n(&s["sent"]),
            "stream: {s:#}"
        );
        assert_eq!(n(&s["duplicated"]), 0, "{s:#}");
        // The kernel's veth and bridge path can run a hop's receive work on either CPU, so a
        // few frames of a stream may really be reordered there (seen in CI: 2 of 20,000);
        // more than 0.1 % would be the sink's mistake.
        assert!(n(&s["reordered"]) * 1000 <= n(&s["received"]), "{s:#}");
        let share = n(&s["sent"]) as f64 / sent.max(1) as f64;
        assert!(
            n(&s["lost"]) as f64 <= max_loss * n(&s["sent"]) as f64 + excused * share,
            "{s:#}"
        );
        let lat = &s["latency"];
        assert_eq!(n(&lat["samples"]), n(&s["received"]));
        assert!(n(&lat["min_ns"]) > 0, "{lat:#}");
        assert!(
            n(&lat["max_ns"]) < 100_000_000,
            "latency over 100 ms: {lat:#}"
        );
        per_stream_sent += n(&s["sent"]);
    }
    assert_eq!(per_stream_sent, sent);
    assert_eq!(n(&r["unknown"]), 0);
    r
}

#[test]
fn kernel_forwards_every_frame_at_50_kpps() {
    if !vrhost_lab::require_root("vrbench trial through the kernel") {
        return;
    }
    lossless_trial(
        "tlk",
        &["--dut", "kernel", "--rate", "0.05", "--seconds", "1"],
        50e3,
    );
}

/// From 100 kpps the generator sends in long runs paced by its program, a few ms each (one
/// short run per burst below): the kernel, forwarding on its own core (its NAPI pinned
/// there), still gets the asked rate — with short runs it got under half of 1 Mpps, each
/// frame taking a fresh page — and its frames arrive. Not every one: in about 2 runs of 5
/// the kernel lost 0.1–0.5 % here, each frame counted by `a0` as an `xdp_xmit_errors`
/// (`p0`'s 256-entry ring full while its pinned NAPI thread was held off for over 1 ms;
/// see `LONG_RUNS_FROM_PPS` in `live/generator.rs`), so up to 2 % is allowed.
#[test]
fn kernel_on_its_own_core_gets_the_frames_of_long_paced_runs() {
    if !vrhost_lab::require_root("vrbench trial through the kernel") {
        return;
    }
    let r = trial_losing_at_most(
        "tll",
        &["--dut", "kernel", "--rate", "0.2", "--seconds", "1"],
        200e3,
        0.02,
    );
    let runs = r["bursts"].as_u64().unwrap();
    let sent = r["sent"].as_u64().unwrap();
    assert!(
        runs > 0 && runs * 100 < sent,
        "{runs} runs for {sent} frames: not long runs"
    );
}

#[test]
fn vrhost_afxdp_forwards_every_frame_at_50_kpps() {
    if !vrhost_lab::require_root("vrbench trial through vrhost (AF_XDP)") {
        return;
    }
    lossless_trial(
        "tlv",
        &["--dut", "vrhost-afxdp", "--rate", "0.05", "--seconds", "1"],
        50e3,
    );
}

/// `--vifs 5` through vrhost: each VR really has five VIFs — its control namespace holds
/// the taps `a`, `b` and the idle `x2`…`x4` with their own MACs while the trial runs — and
/// the traffic on the two that carry it all arrives.
#[test]
fn vrhost_gives_each_vr_idle_vifs_on_p0() {
    if !vrhost_lab::require_root("vrbench trial through vrhost with idle VIFs") {
        return;
    }
    let _one_at_a_time = serial();
    let name = unique("tlf");
    let child = Command::new(env!("CARGO_BIN_EXE_vrbench"))
        .args(["trial", "--json", "--name", &name, "--vrhost"])
        .arg(build_vrhost())
        .args([
            "--dut",
            "vrhost-afxdp",
            "--vrs",
            "2",
            "--vifs",
            "5",
            "--rate",
            "0.05",
            "--seconds",
            "3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn vrbench trial");
    // While it runs, each VR's control namespace has its VIFs' taps.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut last = String::new();
    while seen.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "control namespaces with their VIFs: {seen:?}; last seen:\n{last}"
        );
        let fresh: Vec<String> = namespaces_of(&name)
            .into_iter()
            .filter(|n| n.contains("-c-") && !seen.contains(n))
            .collect();
        for ns in fresh {
            let out = Command::new("ip")
                .args(["-n", &ns, "-br", "link"])
                .output()
                .unwrap();
            let links = String::from_utf8_lossy(&out.stdout).into_owned();
            let names: Vec<&str> = links
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            last = links.clone();
            // Still being made: the taps come first, their MACs a moment later (a CI run
            // saw x2–x4 with the kernel's random MACs).
            if names.len() < 6 || !links.contains("02:76:73:04:00:0") {
                continue;
            }
            for want in ["a", "b", "x2", "x3", "x4"] {
                assert!(names.contains(&want), "{ns}: {links}");
            }
            seen.push(ns);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["scale"]["vifs"], 5, "{r:#}");
    let sent = r["sent"].as_u64().unwrap();
    assert!(sent >= 135_000, "{r:#}");
    assert_eq!(
        (r["received"].as_u64(), r["lost"].as_u64()),
        (Some(sent), Some(0)),
        "{r:#}"
    );
    assert!(namespaces_of(&name).is_empty(), "lab {name} left behind");
}

fn on_path(bin: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(bin).is_file())
}

/// `dpdk-testpmd` (mac forwarding over AF_PACKET vdevs) forwards every frame at 50 kpps
/// when DPDK is installed; without it the profile is refused before any namespace, naming
/// the Debian package (CI does not install DPDK, and checks that path).
#[test]
fn dpdk_testpmd_forwards_every_frame_or_is_refused_by_name() {
    if !vrhost_lab::require_root("vrbench trial through dpdk-testpmd") {
        return;
    }
    let args = ["--dut", "dpdk-testpmd", "--rate", "0.05", "--seconds", "1"];
    // Without the binary on PATH (here: an empty PATH): refused, naming the package.
    let refused = |path: Option<&str>| {
        let _one_at_a_time = serial();
        let name = unique("tld");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vrbench"));
        cmd.args(["trial", "--json", "--name", &name]).args(args);
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success());
        assert!(stderr.contains("Debian package `dpdk`"), "{stderr}");
        assert!(namespaces_of(&name).is_empty());
    };
    refused(Some("/nonexistent"));
    if on_path("dpdk-testpmd") {
        let r = lossless_trial("tld", &args, 50e3);
        assert_eq!(r["profile"], "dpdk-testpmd");
    } else {
        refused(None);
    }
}

#[test]
fn kernel_bridge_splits_the_rate_by_weight_with_imix() {
    if !vrhost_lab::require_root("vrbench trial through veth/bridge VRs") {
        return;
    }
    let r = lossless_trial(
        "tlb",
        &[
            "--dut",
            "kernel-bridge",
            "--vrs",
            "3",
            "--weights",
            "1,2,3",
            "--rate",
            "0.06",
            "--seconds",
            "1",
            "--frame-size",
            "imix",
        ],
        60e3,
    );
    let sent: Vec<f64> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sent"].as_f64().unwrap())
        .collect();
    let total: f64 = sent.iter().sum();
    for (i, s) in sent.iter().enumerate() {
        let want = total * (i + 1) as f64 / 6.0;
        // The wheel (6 slots, 72 with IMIX's 12-frame pattern) is exact over whole turns:
        // off by at most a turn's share.
        assert!((s - want).abs() <= 72.0, "stream {i}: {s} of {total}");
    }
}

/// The AF_PACKET generator (`--gen afpacket`: `vrhost_traffic`'s generator on an AF_PACKET
/// socket) through two macvlan VRs, weighted 1:3: the same sink counts every frame it sent,
/// per stream, and its port refused none.
#[test]
fn afpacket_generator_through_kernel_macvlan_loses_nothing_at_50_kpps() {
    if !vrhost_lab::require_root("vrbench trial with the AF_PACKET generator") {
        return;
    }
    let r = lossless_trial(
        "tla",
        &[
            "--dut",
            "kernel-macvlan",
            "--gen",
            "afpacket",
            "--vrs",
            "2",
            "--weights",
            "1,3",
            "--rate",
            "0.05",
            "--seconds",
            "1",
        ],
        50e3,
    );
    assert_eq!(r["spec"]["generator"], "afpacket", "{r:#}");
    assert_eq!(r["tx_full"], 0, "{r:#}");
    let sent: Vec<f64> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sent"].as_f64().unwrap())
        .collect();
    // A pacer per stream, each exact to a burst (2 frames at 40 µs), less what it missed
    // while the host held the generator off: its buckets hold 20 ms (stream 0) and 14 ms
    // (stream 1) of frames, so a longer stall costs the streams unequal shares.
    let missed = r["missed"].as_f64().unwrap();
    assert!(
        (sent[1] - 3.0 * sent[0]).abs() <= 8.0 + 3.0 * missed,
        "{sent:?}, {missed} missed"
    );
}

/// The AF_XDP generator (vrhost's own fast backend on `a0`, copy mode on veth) through the
/// kernel forwarder: every frame arrives, and its port never refused one.
#[test]
fn afxdp_generator_through_kernel_loses_nothing_at_50_kpps() {
    if !vrhost_lab::require_root("vrbench trial with the AF_XDP generator") {
        return;
    }
    let r = lossless_trial(
        "tlx",
        &[
            "--dut",
            "kernel",
            "--gen",
            "afxdp",
            "--rate",
            "0.05",
            "--seconds",
            "1",
        ],
        50e3,
    );
    assert_eq!(r["spec"]["generator"], "afxdp", "{r:#}");
    assert_eq!(r["tx_full"], 0, "{r:#}");
}

/// Routes and flows per VR in the lab: 300 /24s in every VR, each stream swept over 100
/// destinations inside them, through the kernel's per-VR namespaces and through vrhost —
/// every frame arrives (so every destination was routed), and the result says what the
/// lab was built with.
#[test]
fn routed_and_swept_destinations_arrive_at_50_kpps() {
    if !vrhost_lab::require_root("vrbench trial with routes and flows per VR") {
        return;
    }
    for (tag, dut) in [("tlrb", "kernel-bridge"), ("tlrv", "vrhost-afxdp")] {
        let r = lossless_trial(
            tag,
            &[
                "--dut",
                dut,
                "--vrs",
                "2",
                "--routes",
                "300",
                "--flows",
                "100",
                "--rate",
                "0.05",
                "--seconds",
                "1",
            ],
            50e3,
        );
        assert_eq!(r["scale"]["routes"], 300, "{r:#}");
        assert_eq!(r["scale"]["flows"], 100, "{r:#}");
    }
}

#[test]
fn bad_input_is_refused_before_any_namespace() {
    // No root needed: every one of these fails before the root check. One at a time with
    // the trials all the same: nine processes starting beside a trial's real-time
    // generator were enough for the kernel to stop it for 50 ms (its fair-class server),
    // 5 % of a 1 s trial.
    let _one_at_a_time = serial();
    let cases: [(&[&str], &str); 9] = [
        (
            &["--dut", "dpdk-testpmd", "--rate", "0.05", "--vrs", "2"],
            "dpdk-testpmd (an L2 cross-connect",
        ),
        (
            &["--dut", "kernel-macvlan", "--rate", "0.05", "--vifs", "4"],
            "kernel-macvlan gives each VR exactly 2 VIFs",
        ),
        (
            &["--dut", "vrhost-afxdp", "--rate", "0.05", "--vifs", "65"],
            "2 to 64 VIFs",
        ),
        (
            &["--dut", "kernel", "--rate", "0.05", "--frame-size", "63"],
            "below 64",
        ),
        (
            &["--dut", "kernel", "--rate", "0.05", "--frame-size", "1600"],
            "MTU",
        ),
        (&["--dut", "kernel", "--rate", "50"], "lower --rate"),
        (
            &["--dut", "kernel", "--rate", "0.05", "--vrs", "4"],
            "exactly one VR",
        ),
        (&["--dut", "bogus", "--rate", "0.05"], "invalid value"),
        (
            &[
                "--dut", "kernel", "--rate", "0.05", "--routes", "1", "--flows", "300",
            ],
            "1 to 255 flows",
        ),
    ];
    for (args, want) in cases {
        let name = unique("tlx");
        let out = trial(&name, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(namespaces_of(&name).is_empty());
    }
}

#[test]
fn ctrl_c_tears_the_lab_down() {
    if !vrhost_lab::require_root("vrbench trial Ctrl-C") {
        return;
    }
    let _one_at_a_time = serial();
    let name = unique("tlc");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vrbench"))
        .args(["trial", "--json", "--name", &name])
        .args([
            "--dut",
            "kernel-macvlan",
            "--rate",
            "0.05",
            "--seconds",
            "60",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn vrbench trial");
    // Wait for the lab (its router namespace), then a moment for traffic to start.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !namespaces_of(&name).iter().any(|n| n.ends_with("-r")) {
        assert!(Instant::now() < deadline, "lab {name} never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "vrbench did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        namespaces_of(&name).is_empty(),
        "lab {name} left after Ctrl-C"
    );
}
