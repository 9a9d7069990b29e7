//! `vrbench quick --ci` and `vrbench measure` end to end on the in-process DUT: the searches
//! run against vrhost's real data plane, the run record, the report and the plots are
//! written, and bad input is refused before anything is built. No root needed.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Tests that run traffic take this: they pin their tester and DUT to the same two cores,
/// and `--rt-unthrottle` lets a real-time spinner keep every other test off its core.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vrbench-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Run `vrbench ARGS --out OUT`, which must succeed; its run record.
fn run_ok(args: &[&str], out: &std::path::Path) -> (Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_vrbench"))
        .args(args)
        .arg("--out")
        .arg(out)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("running vrbench");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "vrbench {args:?} failed:\n{stderr}");
    let run =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    (run, stderr)
}

#[test]
fn quick_writes_a_record_a_report_and_plots() {
    let _one_at_a_time = serial();
    let out = out_dir("quick");
    let (run, stderr) = run_ok(&["quick", "--ci"], &out);
    assert_eq!(run["partial"], Value::Bool(false), "{stderr}");
    let ms = run["measurements"].as_array().expect("measurements");
    let find = |name: &str| {
        ms.iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {ms:?}"))
    };
    let ndr = find("mlr/64B/NDR")["value"].as_f64().expect("an NDR");
    // A data plane on one core forwards well over 100 kpps even on a busy host.
    assert!(ndr > 100_000.0, "NDR {ndr}");
    let trials = find("mlr/64B/NDR")["trials"].as_array().unwrap();
    assert!(!trials.is_empty(), "the search ran trials");
    for t in trials {
        let (sent, rx) = (t["sent"].as_u64().unwrap(), t["received"].as_u64().unwrap());
        assert!(rx <= sent, "received {rx} > sent {sent}");
    }
    let overload = find("overload/64B")["trials"].as_array().unwrap();
    assert_eq!(overload.len(), 8, "10 % … 300 % of NDR");
    let tn = find("workpoints/64B/N=4 T^N");
    assert!(tn["value"].as_f64().unwrap() > 0.0);
    assert_eq!(
        tn["detail"]["points"].as_array().unwrap().len(),
        4,
        "k = 1..4"
    );
    let iso = find("isolation/64B VR2 delivered")["value"]
        .as_f64()
        .unwrap();
    assert!((0.0..=1.0).contains(&iso));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for s in [
        "NDR side by side",
        "Carried vs offered",
        "Latency",
        "Work points",
    ] {
        assert!(report.contains(s), "report lacks {s}:\n{report}");
    }
    for f in ["overload.svg", "latency.svg", "workpoints.svg"] {
        let svg = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("vrhost-inproc"),
            "{f}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_input_is_refused_before_anything_is_built() {
    for (args, says) in [
        (vec!["--frame-size", "32"], "--frame-size 32"),
        (vec!["--frame-size", "9000"], "--frame-size 9000"),
        (vec!["--max-mpps", "500"], "--max-mpps 500"),
        (vec!["--max-shortfall", "lots"], "--max-shortfall"),
        (vec!["--dut-core", "4096"], "--dut-core 4096"),
        (vec!["--vifs", "65"], "--vifs 65"),
        // A lab DUT is never built with a dimension it would ignore (no root needed: this
        // is checked before the lab's privileges).
        (
            vec!["--duts", "kernel-macvlan", "--vifs", "4"],
            "--vifs 4: kernel-macvlan: 4 VIFs per VR",
        ),
        (
            vec!["--duts", "vrhost-afxdp", "--routes", "2", "--flows", "600"],
            "1 to 511 flows",
        ),
        (
            vec![
                "--duts",
                "vrhost-inproc,kernel-bridge",
                "--tests",
                "scaling",
                "--scale-vifs",
                "2,8",
            ],
            "--scale-vifs 2,8: kernel-bridge: 8 VIFs per VR",
        ),
        (
            vec![
                "--duts",
                "kernel",
                "--tests",
                "scaling",
                "--scale-vrs",
                "1,4",
            ],
            "exactly one VR",
        ),
    ] {
        let out = out_dir("bad");
        let o = Command::new(env!("CARGO_BIN_EXE_vrbench"))
            .arg("measure")
            .args(&args)
            .arg("--out")
            .arg(&out)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?}: output written before the check");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_vrbench"))
        .args(["measure", "--duts", "dpdk-l3fwd"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("vrhost-inproc"));
}

#[test]
fn scaling_measures_every_point_of_every_dimension() {
    let _one_at_a_time = serial();
    let out = out_dir("scaling");
    let (run, _) = run_ok(
        &[
            "measure",
            "--tests",
            "scaling",
            "--scale-vrs",
            "1,3",
            "--scale-vifs",
            "2,4",
            "--scale-routes",
            "0,300",
            "--scale-flows",
            "1,50",
            "--mlr-seconds",
            "0.1,0.2",
            "--max-shortfall",
            "none",
            "--quiet",
        ],
        &out,
    );
    let names: Vec<&str> = run["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["value"].as_f64().is_some_and(|v| v > 0.0))
        .filter_map(|m| m["name"].as_str())
        .collect();
    for n in [
        "scaling/64B/VRs=1",
        "scaling/64B/VRs=3",
        "scaling/64B/VIFs per VR=4",
        "scaling/64B/routes per VR=300",
        "scaling/64B/flows per VR=50",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    for k in 0..4 {
        assert!(out.join(format!("scaling-{k}.svg")).is_file());
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `--gen afpacket`: the lab's searches driven by vrhost's traffic generator over an
/// AF_PACKET socket instead of XDP live frames, recorded as such (root: it builds a lab).
#[test]
fn a_lab_search_runs_on_the_af_packet_generator() {
    if !vrhost_lab::require_root("vrbench measure --gen afpacket") {
        return;
    }
    let _one_at_a_time = serial();
    let out = out_dir("afpacket");
    let (run, _) = run_ok(
        &[
            "measure",
            "--duts",
            "kernel-macvlan",
            "--gen",
            "afpacket",
            "--tests",
            "ndr",
            "--mlr-seconds",
            "0.2,0.4",
            "--max-shortfall",
            "none",
        ],
        &out,
    );
    assert_eq!(run["settings"]["lab_generator"], "afpacket", "{run}");
    let ms = run["measurements"].as_array().unwrap();
    let ndr = ms
        .iter()
        .find(|m| m["name"] == "mlr/64B/NDR")
        .and_then(|m| m["value"].as_f64())
        .unwrap_or_else(|| panic!("no NDR: {ms:?}"));
    // Searched up to 80 % of what the generator reaches, which is at most 1.25 Mpps.
    assert!(ndr > 1_000.0 && ndr <= 1.25e6, "NDR {ndr}");
    for m in ms {
        for t in m["trials"].as_array().into_iter().flatten() {
            let (sent, rx) = (t["sent"].as_u64().unwrap(), t["received"].as_u64().unwrap());
            assert!(sent > 0 && rx <= sent, "{t}");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The kernel profile's forwarding (p0's receive NAPI) runs in a kernel thread pinned to the
/// DUT core, SCHED_FIFO, and the run record and report say so, with the tester's own
/// maximum beside the NDR (root: it builds a lab).
#[test]
fn the_kernel_dut_runs_on_its_own_core_and_the_record_says_so() {
    if !vrhost_lab::require_root("vrbench measure --duts kernel (pinned NAPI)") {
        return;
    }
    let _one_at_a_time = serial();
    let out = out_dir("kernelnapi");
    let (run, _) = run_ok(
        &[
            "measure",
            "--duts",
            "kernel",
            "--tests",
            "ndr",
            "--mlr-seconds",
            "0.2,0.4",
            "--max-shortfall",
            "none",
            "--quiet",
        ],
        &out,
    );
    let dut = run["duts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "kernel")
        .unwrap();
    assert_eq!(dut["params"]["p0_rx_napi"], "pinned-fifo", "{dut}");
    let thread = dut["params"]["p0_napi_thread"].as_str().unwrap();
    assert!(
        thread.contains("CPUs [0]") && thread.contains("SCHED_FIFO 1"),
        "{thread}"
    );
    assert_eq!(
        run["cores"]["map"]["kernel p0 rx NAPI"],
        serde_json::json!([0])
    );
    assert!(
        run["cores"]["description"]
            .as_str()
            .unwrap()
            .contains("only generates")
    );
    let ms = run["measurements"].as_array().unwrap();
    let value = |name: &str| {
        ms.iter()
            .find(|m| m["name"] == name)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name}: {ms:?}"))
    };
    let (max, ndr) = (value("tester/64B max offered"), value("mlr/64B/NDR"));
    assert!(ndr > 0.0 && ndr < max, "NDR {ndr}, tester max {max}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("tester max offered"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

fn rt_runtime() -> i64 {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `--rt-unthrottle` sets sched_rt_runtime_us to -1 while the run lasts and puts the old
/// value back when it ends — normally and after Ctrl-C — recording both in run.json; without
/// root it is refused before anything is written. One test, so that no two runs of this
/// binary change the knob at once.
#[test]
fn rt_unthrottle_is_undone_at_the_end_and_on_ctrl_c() {
    if !vrhost_lab::require_root("vrbench measure --rt-unthrottle") {
        return;
    }
    let _one_at_a_time = serial();
    let before = rt_runtime();
    // Refused for a user who is not root (setpriv drops to nobody).
    let out = out_dir("rtnobody");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_vrbench"))
        .args(["measure", "--rt-unthrottle", "--out"])
        .arg(&out)
        .output()
        .expect("setpriv");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("--rt-unthrottle writes /proc/sys/kernel/sched_rt_runtime_us and needs root"),
        "{stderr}"
    );
    assert!(!out.exists());

    // A run that ends normally.
    let out = out_dir("rt");
    let (run, stderr) = run_ok(
        &[
            "measure",
            "--tests",
            "ndr",
            "--mlr-seconds",
            "0.1,0.2",
            "--max-shortfall",
            "none",
            "--rt-unthrottle",
            "--quiet",
        ],
        &out,
    );
    assert_eq!(rt_runtime(), before, "{stderr}");
    let rt = &run["settings"]["rt_throttling"];
    assert_eq!(rt["unthrottled"], true, "{run}");
    assert_eq!(rt["sched_rt_runtime_us_before"], before);
    let _ = std::fs::remove_dir_all(&out);

    // Ctrl-C in the middle of a run.
    let out = out_dir("rtint");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vrbench"))
        .args([
            "measure",
            "--tests",
            "ndr,overload",
            "--mlr-seconds",
            "0.5,4",
            "--point-seconds",
            "0.5",
            "--max-shortfall",
            "none",
            "--rt-unthrottle",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while rt_runtime() != -1 {
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "sched_rt_runtime_us never became -1"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended too soon"
    );
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert_eq!(rt_runtime(), before, "not restored after Ctrl-C: {stderr}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["partial"], true, "{stderr}");
    assert_eq!(run["settings"]["rt_throttling"]["unthrottled"], true);
    let _ = std::fs::remove_dir_all(&out);
}

/// Scaling over VIFs per VR through vrhost in the lab (idle MAC-demux VIFs on p0): every
/// point is measured and recorded (root: it builds labs).
#[test]
fn lab_scaling_over_vifs_per_vr_runs_on_vrhost() {
    if !vrhost_lab::require_root("vrbench measure --tests scaling --duts vrhost-afpacket") {
        return;
    }
    let _one_at_a_time = serial();
    let out = out_dir("labvifs");
    let (run, stderr) = run_ok(
        &[
            "measure",
            "--duts",
            "vrhost-afpacket",
            "--tests",
            "scaling",
            "--scale-vrs",
            "1",
            "--scale-vifs",
            "2,8",
            "--scale-routes",
            "0",
            "--scale-flows",
            "1",
            "--mlr-seconds",
            "0.1,0.2",
            "--max-mpps",
            "0.5",
            "--max-shortfall",
            "none",
            "--quiet",
        ],
        &out,
    );
    let ms = run["measurements"].as_array().unwrap();
    for n in ["scaling/64B/VIFs per VR=2", "scaling/64B/VIFs per VR=8"] {
        let v = ms
            .iter()
            .find(|m| m["name"] == n && m["dut"] == "vrhost-afpacket")
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {n}: {stderr}"));
        assert!(v > 0.0, "{n}: {v}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
