//! `vrbench fwd` end to end, very short (1 trial of 1 s, single queue, vrhost over AF_XDP and
//! the kernel's IP forwarder): the generator, the DUT start/stop and the sink all work, the
//! sink counts forwarded frames for both, the counts are plausible, and no lab is left
//! behind. Root only; under `CI=true` a missing root is a failure.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Build the `vrhost` binary next to vrbench's (same target directory and profile), so the
/// run measures the daemon of this checkout. Cargo allows this while the test runs.
fn build_vrhost(vrbench: &str) -> PathBuf {
    let dir = PathBuf::from(vrbench)
        .parent()
        .expect("vrbench has a directory")
        .to_path_buf();
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
        None => panic!("unexpected binary path {vrbench}"),
    }
    let status = cmd.status().expect("running cargo build for vrhost");
    assert!(status.success(), "cargo build -p vrhost failed");
    let bin = dir.join("vrhost");
    assert!(bin.is_file(), "{} not built", bin.display());
    bin
}

#[test]
fn a_short_run_forwards_through_vrhost_and_the_kernel() {
    if !vrhost_lab::require_root("vrbench fwd end-to-end test") {
        return;
    }
    let vrbench = env!("CARGO_BIN_EXE_vrbench");
    let vrhost = build_vrhost(vrbench);
    let name = format!("tfwd{}", std::process::id());
    let out = Command::new(vrbench)
        .args([
            "fwd",
            "--profiles",
            "vrhost-afxdp,kernel",
            "--layouts",
            "1q",
            "--trials",
            "1",
            "--seconds",
            "1",
            "--warmup",
            "0.2",
            "--many-vrs",
            "0",
            // A functional check, not a measurement: no waiting for a quiet machine.
            "--retries",
            "0",
            "--wait-quiet",
            "0",
            "--json",
            "--name",
            &name,
            "--vrhost",
        ])
        .arg(&vrhost)
        .output()
        .expect("running vrbench fwd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "vrbench fwd failed:\n{stderr}");
    let run: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)));

    let layouts = run["layouts"].as_array().expect("layouts");
    assert_eq!(layouts.len(), 1);
    let cases = layouts[0]["cases"].as_array().expect("cases");
    let profiles: Vec<&str> = cases.iter().filter_map(|c| c["profile"].as_str()).collect();
    assert_eq!(profiles, ["vrhost-afxdp", "kernel"]);
    for c in cases {
        let t = &c["trials"][0];
        let offered = t["offered"].as_u64().expect("offered");
        let forwarded = t["forwarded"].as_u64().expect("forwarded");
        assert!(forwarded > 0, "{}: nothing forwarded: {t}", c["profile"]);
        assert!(
            forwarded <= offered,
            "{}: forwarded {forwarded} > offered {offered}",
            c["profile"]
        );
        // A second of traffic at a realistic rate, not a trickle.
        assert!(offered > 10_000, "{}: offered only {offered}", c["profile"]);
        assert!(t["seconds"].as_f64().unwrap() > 0.5);
    }
    let vrhost_case = &cases[0]["trials"][0]["vrhost"];
    assert!(
        vrhost_case["vr_tx"].as_u64().unwrap_or(0) > 0,
        "vrhost's own counters saw no traffic: {vrhost_case}"
    );
    // The sink's end runs a NAPI (`--sink-napi gro`, the default), so vrhost's `tx = auto`
    // transmits on p1 by XDP, and every frame the VRs sent went that way.
    let p1 = &vrhost_case["ports"]["p1"];
    assert!(
        p1["backend"].as_str().unwrap_or("").ends_with("tx xdp"),
        "{p1}"
    );
    assert_eq!(
        p1["kernel"]["xdp_tx_frames"].as_u64(),
        p1["tx_packets"].as_u64(),
        "{p1}"
    );

    let left: Vec<String> = vrhost_lab::Netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(&name))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}
