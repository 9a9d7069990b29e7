//! The daemon end to end, as root, in labs of network namespaces (`vrhost_lab`): vrhost runs
//! in the lab's router namespace on veth ports and forwards between real hosts.
//!
//! Each test builds its own uniquely named lab (deleted on drop, even on failure), starts
//! the `vrhost` binary with a config generated for that lab, and sends traffic only between
//! the lab's namespaces.

mod common;

use std::sync::RwLockReadGuard;
use std::time::Duration;

use common::machine;
use common::{
    Daemon, config, echo_requests_received, iperf, ping, sides_take_xdp_transmit, wait_explained,
};
use vrhost_lab::{Lab, LabSpec, Side, require_root};

/// A lab, with a share of the machine held as long as it lives (see [`common::machine`]).
struct SharedLab {
    lab: Lab,
    /// After `lab`, so it is dropped after the lab is torn down.
    _machine: RwLockReadGuard<'static, ()>,
}

impl std::ops::Deref for SharedLab {
    type Target = Lab;
    fn deref(&self) -> &Lab {
        &self.lab
    }
}

fn lab(vrs: u32, overlapping: bool) -> Option<SharedLab> {
    require_root("vrhost end-to-end test").then(|| {
        let machine = machine::share();
        SharedLab {
            lab: Lab::up(&LabSpec::unique("e2e").vrs(vrs).overlapping(overlapping)).unwrap(),
            _machine: machine,
        }
    })
}

/// Through VR 0: pings to the far host (v4, v6) and to the VR's own address (punted to its
/// namespace's kernel through the tap, answered, the reply injected back out of the port),
/// and a TCP transfer.
fn ping_punt_and_tcp(lab: &Lab) {
    let vr = lab.vr(0);
    let (b4, b6) = (vr.b.addrs.host4.to_string(), vr.b.addrs.host6.to_string());
    assert_eq!(ping(lab, 0, &b4, 5, "0.05"), (5, 5), "IPv4 through the VR");
    assert_eq!(ping(lab, 0, &b6, 5, "0.05"), (5, 5), "IPv6 through the VR");
    let gw = vr.a.addrs.gw4.to_string();
    assert_eq!(ping(lab, 0, &gw, 3, "0.05"), (3, 3), "the VR's own address");
    let bytes = iperf(lab, 0, 2);
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
}

/// Ping (v4, v6, the gateway through the punt path) and a TCP transfer through one VR.
fn forwards(backend: &str) {
    let Some(lab) = lab(1, false) else { return };
    let d = Daemon::start(&lab, &config(&lab, backend, &[0]));
    let st = d.status();
    for p in st["ports"].as_array().unwrap() {
        assert!(
            p["backend"].as_str().unwrap().starts_with(backend),
            "port runs {} (asked for {backend})",
            p["backend"]
        );
    }
    ping_punt_and_tcp(&lab);
    let s = d.vr("vr0");
    assert!(s["tx_packets"].as_u64().unwrap() > 1000, "{s}");
    assert!(s["punted"].as_u64().unwrap() >= 3, "{s}");
    assert!(s["injected"].as_u64().unwrap() >= 3, "{s}");
}

#[test]
fn ping_and_tcp_through_a_vr_over_af_xdp() {
    forwards("afxdp");
}

#[test]
fn ping_and_tcp_through_a_vr_over_af_packet() {
    forwards("afpacket");
}

/// `tx = "xdp"` on every port of `text`.
fn with_xdp_tx(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("backend = ") {
                format!("{l}\ntx = \"xdp\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Ping, the punt path and TCP through a VR whose ports transmit by XDP (`tx = "xdp"`):
/// the ports say so, and XDP transmit carried the frames.
fn forwards_by_xdp_transmit(backend: &str) {
    let Some(lab) = lab(1, false) else { return };
    sides_take_xdp_transmit(&lab);
    let d = Daemon::start(&lab, &with_xdp_tx(&config(&lab, backend, &[0])));
    ping_punt_and_tcp(&lab);
    // Light polls' few frames go by the socket, loaded ones by XDP transmit: TCP's bursts
    // towards side B fill some polls well past the 32 frames that takes.
    let st = d.status();
    let mut by_xdp = 0;
    for p in st["ports"].as_array().unwrap() {
        let what = p["backend"].as_str().unwrap();
        assert!(what.starts_with(backend) && what.ends_with("tx xdp"), "{p}");
        let k = &p["kernel"];
        assert_eq!(k["xdp_tx_failed"], 0, "{p}");
        assert_eq!(k["xdp_tx_refused"], 0, "{p}");
        by_xdp += k["xdp_tx_frames"].as_u64().unwrap();
    }
    assert!(by_xdp > 0, "no frame went by XDP transmit: {st}");
}

#[test]
fn ping_and_tcp_through_a_vr_over_af_xdp_with_xdp_transmit() {
    forwards_by_xdp_transmit("afxdp");
}

#[test]
fn ping_and_tcp_through_a_vr_over_af_packet_with_xdp_transmit() {
    forwards_by_xdp_transmit("afpacket");
}

/// `tx = "xdp"` on a port whose device does not take XDP transmit (the lab's veths, GRO
/// off, no program on the peer) stops the start with the reason and the fix; `auto` (the
/// default) runs on the socket's transmit and says so.
#[test]
fn xdp_transmit_is_refused_where_the_device_cannot_take_it() {
    let Some(lab) = lab(1, false) else { return };
    let path = std::env::temp_dir().join(format!("{}-xdptx.toml", lab.prefix()));
    std::fs::write(&path, with_xdp_tx(&config(&lab, "afxdp", &[0]))).unwrap();
    let sock = format!("{}.sock", path.display());
    let out = lab
        .router()
        .command(&[
            common::bin(),
            "run",
            path.to_str().unwrap(),
            "--socket",
            &sock,
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success(), "started with tx = xdp on p0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("port.tx") && err.contains("p0") && err.contains("gro on"),
        "{err}"
    );
    let d = Daemon::start(&lab, &config(&lab, "afxdp", &[0]));
    for p in d.status()["ports"].as_array().unwrap() {
        assert!(p["backend"].as_str().unwrap().contains("tx socket"), "{p}");
    }
    let b4 = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &b4, 3, "0.05"), (3, 3));
}

/// (policy, real-time priority) of the thread called `name` in process `pid`, from
/// `/proc/PID/task/TID/stat` (fields 41 and 40, counted after the command's parentheses).
fn thread_policy(pid: u32, name: &str) -> (u64, u64) {
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = t.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        // Fields after "(comm) ": the first is field 3 (state).
        let rest: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        let field = |n: usize| rest[n - 3].parse::<u64>().unwrap();
        return (field(41), field(40));
    }
    panic!("no thread {name} in process {pid}");
}

#[test]
fn two_workers_on_two_queue_ports() {
    if !require_root("vrhost end-to-end test") {
        return;
    }
    // SCHED_FIFO workers busy on both cores starve every other test's traffic.
    let _machine = machine::alone();
    let lab = Lab::up(&LabSpec::unique("e2e").vrs(2).queues(2)).unwrap();
    let mut text = config(&lab, "afxdp", &[0, 1]);
    // Real-time workers, as on a host whose cores are shared with other work; each VR
    // forwarded by one worker (the other hands it its frames).
    text = text.replace(
        "cores = [0]",
        "cores = [0, 1]\nrealtime_priority = 2\nrx_coalesce_us = 20\nrun_vrs = \"on-owner\"",
    );
    let d = Daemon::start(&lab, &text);
    assert_eq!(d.status()["run_vrs"], "on-owner");
    assert_eq!(d.status()["realtime_priority"], 2);
    assert_eq!(d.status()["rx_coalesce_us"], 20);
    for w in ["vrhost-w0", "vrhost-w1"] {
        assert_eq!(
            thread_policy(d.child.id(), w),
            (1, 2),
            "{w}: SCHED_FIFO (1) at priority 2"
        );
    }
    // Two VRs (one per worker, placed by load), many TCP flows' worth of packets over both
    // queues of each port.
    ping_and_tcp_through_both(&lab);
    let st = d.status();
    assert!(st["polls"].as_u64().unwrap() > 0);
    only_congestion_drops(&d);
}

/// Two-queue AF_PACKET ports (fanout by CPU: the veths have a queue per worker) with every
/// worker forwarding what it received: pings and TCP through both VRs, nothing dropped
/// but TCP's congestion signal.
#[test]
fn two_workers_forward_where_received_over_afpacket() {
    if !require_root("vrhost end-to-end test") {
        return;
    }
    let _machine = machine::share();
    let lab = Lab::up(&LabSpec::unique("e2e").vrs(2).queues(2)).unwrap();
    let text = config(&lab, "afpacket", &[0, 1]).replace(
        "cores = [0]",
        "cores = [0, 1]\nrun_vrs = \"where-received\"",
    );
    let d = Daemon::start(&lab, &text);
    assert_eq!(d.status()["run_vrs"], "where-received");
    ping_and_tcp_through_both(&lab);
    only_congestion_drops(&d);
}

#[test]
fn tenants_with_the_same_addresses_never_see_each_other() {
    tenants_apart(false);
}

/// As above with the quickpath on both ports: its decisions are keyed by the VIF's MAC as
/// demux is, so one tenant's flow never carries the other's frames — and it did carry them.
#[test]
fn tenants_with_the_same_addresses_never_see_each_other_on_the_quickpath() {
    tenants_apart(true);
}

fn tenants_apart(quickpath: bool) {
    let Some(lab) = lab(2, true) else { return };
    let mut text = config(&lab, if quickpath { "afxdp" } else { "auto" }, &[0, 1]);
    if quickpath {
        sides_take_xdp_transmit(&lab);
        text = text.replace(
            "backend = \"afxdp\"\n",
            "backend = \"afxdp\"\nquickpath = true\n",
        );
    }
    let d = Daemon::start(&lab, &text);
    let dst = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(dst, lab.vr(1).b.addrs.host4.to_string(), "overlapping plan");
    let sink = |i: u32| &lab.vr(i).side(Side::B).host;
    let before = (
        echo_requests_received(sink(0)),
        echo_requests_received(sink(1)),
    );
    assert_eq!(ping(&lab, 0, &dst, 10, "0.02"), (10, 10));
    let mid = (
        echo_requests_received(sink(0)),
        echo_requests_received(sink(1)),
    );
    assert_eq!(mid.0 - before.0, 10, "tenant 0's sink got its pings");
    assert_eq!(mid.1, before.1, "tenant 1's sink got tenant 0's pings");
    assert_eq!(ping(&lab, 1, &dst, 7, "0.02"), (7, 7));
    let after = (
        echo_requests_received(sink(0)),
        echo_requests_received(sink(1)),
    );
    assert_eq!(after.1 - mid.1, 7, "tenant 1's sink got its pings");
    assert_eq!(after.0, mid.0, "tenant 0's sink got tenant 1's pings");
    assert!(d.vr("vr0")["tx_packets"].as_u64().unwrap() >= 20);
    assert!(d.vr("vr1")["tx_packets"].as_u64().unwrap() >= 14);
    if quickpath {
        // Requests and replies after each flow's first: 2 × (10 − 1) and 2 × (7 − 1).
        let qp = |vr: &str| d.vr(vr)["quickpath_packets"].as_u64().unwrap();
        assert!(qp("vr0") >= 14, "vr0: {}", d.vr("vr0"));
        assert!(qp("vr1") >= 10, "vr1: {}", d.vr("vr1"));
    }
}

/// Ping `dst` through VR `vr` once a second until it answers (at most five tries).
///
/// In one CI run (2026-11-28, the worker held off its core for 129 ms that second) the
/// first of three pings through a VR just brought back by SIGHUP was lost; the other two
/// arrived. A VR just (re)started knows no neighbour, so its first packet each way is
/// punted and waits for its kernel to resolve the neighbour through the control plane's
/// tap; on a starved host that can outlast ping's one-second wait. (What starved the host
/// was found later: the real-time test running beside it, see [`common::machine`].)
/// Resolution is not what the reload tests check; the pings after it must all arrive.
fn first_answer(lab: &Lab, vr: u32, dst: &str) {
    let answered = (0..5).any(|_| ping(lab, vr, dst, 1, "1").1 == 1);
    assert!(answered, "VR {vr} never forwarded to {dst}");
}

/// `ip -s link` in every namespace VR `vr`'s packets cross, for a failure message.
fn link_counters(lab: &Lab, vr: u32) -> String {
    let v = lab.vr(vr);
    [
        ("host a", &v.side(Side::A).host),
        ("side a", lab.side(Side::A)),
        ("router", lab.router()),
        ("side b", lab.side(Side::B)),
        ("host b", &v.side(Side::B).host),
    ]
    .iter()
    .map(|(what, ns)| {
        let out = ns.exec(&["ip", "-s", "link"]).unwrap();
        format!("--- {what}:\n{}", String::from_utf8_lossy(&out.stdout))
    })
    .collect()
}

#[test]
fn reload_adds_and_removes_vrs_while_another_forwards_without_loss() {
    let Some(lab) = lab(3, false) else { return };
    let d = Daemon::start(&lab, &config(&lab, "auto", &[0, 1]));
    assert_eq!(d.status()["max_deferral_us"], 10_000, "the default bound");
    let b2 = lab.vr(2).b.addrs.host4.to_string();
    assert_eq!(
        ping(&lab, 2, &b2, 1, "0.1").1,
        0,
        "vr2 is not configured yet"
    );
    // 400 pings over ~4 s through vr0 while vr1 goes and vr2 comes.
    let b0 = lab.vr(0).b.addrs.host4.to_string();
    let flow = std::thread::scope(|s| {
        let flow = s.spawn(|| ping(&lab, 0, &b0, 400, "0.01"));
        std::thread::sleep(Duration::from_millis(800));
        d.rewrite(&config(&lab, "auto", &[0, 2]));
        let out = d.ctl(&["reload"]);
        assert!(
            out.status.success(),
            "reload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let msg = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(msg.contains("1 VRs added, 1 removed"), "{msg}");
        flow.join().unwrap()
    });
    assert_eq!(flow, (400, 400), "the untouched VR lost packets");
    first_answer(&lab, 2, &b2);
    assert_eq!(ping(&lab, 2, &b2, 3, "0.05"), (3, 3), "vr2 forwards");
    let b1 = lab.vr(1).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 1, &b1, 2, "0.05").1, 0, "vr1 is gone");
    assert!(d.vr("vr1").is_null());

    // A bad file is refused whole, naming the problem; nothing changes.
    d.rewrite(&config(&lab, "auto", &[0, 2]).replace("02:76:", "01:76:"));
    let out = d.ctl(&["reload"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("vr.vif.mac"), "{err}");
    // On failure the VR's and the ports' counters say where the packets went (a ping lost
    // here twice in CI, with no drop counted by the VR: it never reached the VR).
    let counters = |vr: u32| {
        format!(
            "{}\nports: {}\n{}",
            d.vr(&format!("vr{vr}")),
            d.status()["ports"],
            link_counters(&lab, vr)
        )
    };
    assert_eq!(ping(&lab, 0, &b0, 3, "0.05"), (3, 3), "{}", counters(0));
    assert_eq!(ping(&lab, 2, &b2, 3, "0.05"), (3, 3), "{}", counters(2));

    // SIGHUP reloads too: vr1 comes back, and the deferral's bound changes in place.
    d.rewrite(
        &config(&lab, "auto", &[0, 1, 2])
            .replace("cores = [0]", "cores = [0]\nmax_deferral_us = 2000"),
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGHUP) };
    let mut back = false;
    for _ in 0..50 {
        if !d.vr("vr1").is_null() {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(back, "SIGHUP did not reload: {}", d.log_text());
    assert_eq!(d.status()["max_deferral_us"], 2000, "the bound reloaded");
    first_answer(&lab, 1, &b1);
    assert_eq!(ping(&lab, 1, &b1, 3, "0.05"), (3, 3), "vr1 forwards again");
}

#[test]
fn after_sigkill_a_restarted_daemon_forwards_again() {
    let Some(lab) = lab(1, false) else { return };
    let mut d = Daemon::start(&lab, &config(&lab, "afxdp", &[0]));
    let b = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &b, 3, "0.05"), (3, 3));
    d.kill9();
    // The kernel detached the XDP program with the dead process's link.
    for port in ["p0", "p1"] {
        let out = lab
            .router()
            .ip(&["-d", "link", "show", "dev", port])
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            !text.contains("prog/xdp"),
            "stale XDP program on {port}: {text}"
        );
    }
    let d = d.restart(&lab);
    assert_eq!(
        ping(&lab, 0, &b, 3, "0.05"),
        (3, 3),
        "no forwarding after restart"
    );
    // Its control namespace was adopted, not duplicated: the gateway still answers.
    let gw = lab.vr(0).a.addrs.gw4.to_string();
    assert_eq!(ping(&lab, 0, &gw, 2, "0.05"), (2, 2));
    drop(d);
}

#[test]
fn sigterm_stops_cleanly_and_leaves_nothing_behind() {
    let Some(lab) = lab(1, false) else { return };
    let mut d = Daemon::start(&lab, &config(&lab, "afxdp", &[0]));
    let prefix = d.netns_prefix.clone();
    let st = d.stop();
    assert!(st.success(), "exit status {st}: {}", d.log_text());
    for port in ["p0", "p1"] {
        let out = lab
            .router()
            .ip(&["-d", "link", "show", "dev", port])
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).contains("prog/xdp"));
    }
    let list = vrhost_lab::ip(&["netns", "list"]).unwrap();
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(!list.contains(&prefix), "control namespace left: {list}");
    assert!(!d.socket.exists(), "control socket left");
}

/// A port's interface deleted while vrhost runs: its VRs go down and everything else keeps
/// working; the interface made again (`Lab::replug`: the veth pair, the hosts on it): the
/// port is reattached on the new device and forwards again, through AF_PACKET.
#[test]
fn a_vanished_interface_marks_its_vrs_down_and_is_reattached_when_back_afpacket() {
    vanished_and_back("afpacket");
}

/// The same through AF_XDP: sockets on the new device share the pool's UMEM with the
/// other port's, and its XDP program is attached anew.
#[test]
fn a_vanished_interface_marks_its_vrs_down_and_is_reattached_when_back_afxdp() {
    vanished_and_back("afxdp");
}

fn vanished_and_back(backend: &str) {
    let Some(lab) = lab(1, false) else { return };
    let d = Daemon::start(&lab, &config(&lab, backend, &[0]));
    let gw = lab.vr(0).a.addrs.gw4.to_string();
    let b = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &b, 3, "0.05"), (3, 3), "before");
    let state = || d.vr("vr0")["state"].as_str().unwrap_or("").to_string();
    lab.router().ip(&["link", "del", "dev", "p1"]).unwrap();
    wait_explained("vr0 down", 5, || state().starts_with("down"), state);
    assert!(state().contains('b'), "state {:?}", state());
    assert!(d.log_text().contains("disappeared"), "{}", d.log_text());
    // What still has its port keeps working: the gateway on p0 answers.
    assert_eq!(ping(&lab, 0, &gw, 3, "0.05"), (3, 3));
    let port1 = || d.port("p1");
    assert_eq!(port1()["up"], false);
    // The interface made again, up: the port is reattached and the VR forwards again.
    lab.replug(Side::B).unwrap();
    wait_explained("vr0 up again", 10, || state() == "up", state);
    assert!(d.log_text().contains("port reattached"), "{}", d.log_text());
    assert_eq!(port1()["up"], true);
    assert_eq!(ping(&lab, 0, &b, 5, "0.05"), (5, 5), "through the new p1");
    assert!(iperf(&lab, 0, 1) > 1_000_000, "TCP through the new p1");
}

/// An interface of the port's name comes back but cannot take the port (a veth with one
/// queue, where two workers need AF_XDP sockets on two): the daemon says so in its log,
/// the VR's state and the port's status, keeps forwarding what it can, and tries again when
/// an interface of that name is made anew, which then works.
#[test]
fn an_interface_back_that_cannot_take_the_port_is_said_and_tried_again_on_the_next() {
    if !require_root("vrhost end-to-end test") {
        return;
    }
    let _machine = machine::share();
    let lab = Lab::up(&LabSpec::unique("e2e").vrs(1).queues(2)).unwrap();
    let text = config(&lab, "afxdp", &[0]).replace("cores = [0]", "cores = [0, 1]");
    let d = Daemon::start(&lab, &text);
    let gw = lab.vr(0).a.addrs.gw4.to_string();
    let b = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &b, 3, "0.05"), (3, 3), "before");
    let state = || d.vr("vr0")["state"].as_str().unwrap_or("").to_string();
    let port1 = || d.port("p1");
    let r = lab.router();
    r.ip(&["link", "del", "dev", "p1"]).unwrap();
    wait_explained("vr0 down", 5, || state().starts_with("down"), state);
    r.ip(&[
        "link",
        "add",
        "p1",
        "numrxqueues",
        "1",
        "numtxqueues",
        "1",
        "type",
        "veth",
        "peer",
        "name",
        "p1x",
    ])
    .unwrap();
    r.ip(&["link", "set", "p1x", "up"]).unwrap();
    r.ip(&["link", "set", "p1", "up"]).unwrap();
    wait_explained(
        "the failed reattachment said",
        10,
        || state().contains("could not be reattached"),
        state,
    );
    assert_eq!(port1()["reattach_failed"], true, "{}", port1());
    assert_eq!(port1()["up"], false);
    let log = d.log_text();
    assert!(log.contains("reattaching the port failed"), "{log}");
    // Said once: the daemon looks every second and does not try the same device again.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        d.log_text().matches("reattaching the port failed").count(),
        1,
        "{}",
        d.log_text()
    );
    assert_eq!(ping(&lab, 0, &gw, 3, "0.05"), (3, 3), "p0 still answers");
    // The interface made anew (a new ifindex): tried again, and it works.
    r.ip(&["link", "del", "dev", "p1"]).unwrap();
    lab.replug(Side::B).unwrap();
    wait_explained("vr0 up again", 10, || state() == "up", state);
    assert_eq!(port1()["reattach_failed"], false, "{}", port1());
    assert!(d.log_text().contains("port reattached"), "{}", d.log_text());
    assert_eq!(ping(&lab, 0, &b, 5, "0.05"), (5, 5), "through the new p1");
}

#[test]
fn a_bad_config_is_refused_before_anything_is_touched() {
    let Some(lab) = lab(1, false) else { return };
    let text = config(&lab, "auto", &[0]).replace("interface = \"p1\"", "interface = \"nope0\"");
    let path = std::env::temp_dir().join(format!("{}-bad.toml", lab.prefix()));
    std::fs::write(&path, &text).unwrap();
    let line = text.lines().position(|l| l.contains("nope0")).unwrap() + 1;
    for cmd in ["check", "run"] {
        let out = lab
            .router()
            .command(
                &[common::bin(), cmd, path.to_str().unwrap(), "--socket"]
                    [..if cmd == "run" { 4 } else { 3 }],
            )
            .args(if cmd == "run" {
                vec![format!("{}.sock", path.display())]
            } else {
                vec![]
            })
            .output()
            .unwrap();
        assert!(!out.status.success(), "{cmd} accepted a missing interface");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            err.contains(&format!("{}:{line}:", path.display()))
                && err.contains("port.interface")
                && err.contains("nope0"),
            "{cmd}: {err}"
        );
    }
    // Nothing was created: no control namespace, no XDP program on p0.
    let list = vrhost_lab::ip(&["netns", "list"]).unwrap();
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&format!("{}-vr-", lab.prefix())));
    let out = lab
        .router()
        .ip(&["-d", "link", "show", "dev", "p0"])
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("prog/xdp"));
    let _ = std::fs::remove_file(&path);
}

/// Weight and policer changed by a reload apply in place (the VR keeps its counters and its
/// traffic), show in `ctl status`, and the policer drops at demux; `ctl release` answers for
/// a VR that is not quarantined.
#[test]
fn weight_and_policer_change_in_place_and_show_in_status() {
    let Some(lab) = lab(1, false) else { return };
    let d = Daemon::start(&lab, &config(&lab, "auto", &[0]));
    let b = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &b, 5, "0.05"), (5, 5));
    let s = d.vr("vr0");
    assert_eq!(s["weight"], 1, "{s}");
    assert_eq!(s["worker"], 0, "{s}");
    assert_eq!(s["quarantined"], false, "{s}");
    assert_eq!(s["state"], "up", "{s}");
    let sent = s["tx_packets"].as_u64().unwrap();
    assert!(sent >= 5);

    // 2 packets/s: a burst of one, then one per 500 ms.
    let tuned = config(&lab, "auto", &[0]).replace(
        "name = \"vr0\"\n",
        "name = \"vr0\"\nweight = 4\npolicer_pps = 2\n",
    );
    d.rewrite(&tuned);
    let out = d.ctl(&["reload"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let msg = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(msg.contains("0 VRs added, 0 removed, 1 changed"), "{msg}");
    let s = d.vr("vr0");
    assert_eq!(s["weight"], 4, "{s}");
    assert!(
        s["tx_packets"].as_u64().unwrap() >= sent,
        "counters kept: {s}"
    );
    let (_, got) = ping(&lab, 0, &b, 10, "0.02");
    assert!(got < 10, "policed to 2/s, yet {got} of 10 pings answered");
    let s = d.vr("vr0");
    assert!(
        s["drop_reasons"]["vr-policed"].as_u64().unwrap_or(0) > 0,
        "{s}"
    );
    let out = d.ctl(&["release", "vr0"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("was not quarantined"));
    let out = d.ctl(&["release", "nope"]);
    assert!(!out.status.success());
}

/// `scaling = "on-demand"` on two cores and two-queue ports: forwarding starts on worker 0
/// alone, which then polls worker 1's queues too (AF_XDP sockets handed between threads);
/// pings and TCP get through both VRs.
#[test]
fn on_demand_scaling_starts_on_one_worker_and_forwards_everything() {
    if !require_root("vrhost end-to-end test") {
        return;
    }
    let _machine = machine::share();
    let lab = Lab::up(&LabSpec::unique("e2e").vrs(2).queues(2)).unwrap();
    let text = config(&lab, "afxdp", &[0, 1])
        .replace("cores = [0]", "cores = [0, 1]\nscaling = \"on-demand\"");
    let d = Daemon::start(&lab, &text);
    let st = d.status();
    assert_eq!(st["active_workers"], 1, "{st}");
    let w = st["workers"].as_array().unwrap();
    assert_eq!(w[1]["active"], false, "{st}");
    assert_eq!(w[1]["rx_queues"], 0, "{st}");
    assert_eq!(
        w[0]["rx_queues"], 4,
        "both queues of both ports on worker 0: {st}"
    );
    // Each worker says how long the host kept it off its core (this kernel reports the
    // run-queue wait and the steal, so neither is null).
    for x in w {
        for k in ["held_off_ms", "run_queue_wait_ms", "steal_ms"] {
            assert!(x[k].as_f64().is_some_and(|ms| ms >= 0.0), "{k}: {st}");
        }
        // Without pressure the deferral is the base (`vrhost_dataplane::deferral`).
        assert_eq!(x["deferral_polls"], 32, "{st}");
    }
    let out = d.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("HELD-OFF-MS"),
        "{text}"
    );
    ping_and_tcp_through_both(&lab);
    // (More of TCP's congestion drops while the scaler brings the second worker in.)
    only_congestion_drops(&d);
}

/// Five pings and a second of iperf3 TCP through VRs 0 and 1 of `lab`.
fn ping_and_tcp_through_both(lab: &Lab) {
    for vr in 0..2 {
        let b = lab.vr(vr).b.addrs.host4.to_string();
        assert_eq!(ping(lab, vr, &b, 5, "0.05"), (5, 5), "vr{vr}");
        assert!(iperf(lab, vr, 1) > 1_000_000, "vr{vr}");
    }
}

/// VRs 0 and 1 forwarded, and dropped only at their ingress rings. iperf's TCP fills the
/// path until it loses frames at the bottleneck, a VR's ingress ring: those drops are TCP's
/// congestion signal. Anything else dropped is a failure (the pings lost nothing).
fn only_congestion_drops(d: &Daemon) {
    for vr in ["vr0", "vr1"] {
        let s = d.vr(vr);
        assert!(s["tx_packets"].as_u64().unwrap() > 1000, "{vr}: {s}");
        let reasons = s["drop_reasons"].as_object().cloned().unwrap_or_default();
        assert!(
            reasons.keys().all(|k| k == "vr-ingress-full"),
            "{vr} dropped for other reasons: {s}"
        );
    }
}
