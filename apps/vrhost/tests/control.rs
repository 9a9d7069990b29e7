//! The control plane end to end, as root: routes and neighbours configured inside a VR's
//! namespace reach the data plane and are shown by `vrhost ctl`; VRs added and removed at
//! run time; commands run inside a VR; a flood at a router's own address is policed.

mod common;

use common::{Daemon, config, ping, wait};
use serde_json::json;
use vrhost_lab::{Lab, LabSpec, Side, require_root};

fn lab(vrs: u32) -> Option<Lab> {
    require_root("vrhost control-plane test")
        .then(|| Lab::up(&LabSpec::unique("cp").vrs(vrs)).unwrap())
}

fn ctl_text(d: &Daemon, args: &[&str]) -> String {
    let out = d.ctl(args);
    assert!(
        out.status.success(),
        "vrhost ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn has_route(d: &Daemon, vr: &str, prefix: &str, hop: &str) -> bool {
    d.ctl_json(&["routes", vr]).get("routes").is_some_and(|r| {
        r.as_array().unwrap().iter().any(|r| {
            r["prefix"] == prefix && r["nexthops"].as_array().unwrap().contains(&json!(hop))
        })
    })
}

#[test]
fn routes_set_inside_a_vr_are_forwarded_and_shown_by_ctl() {
    let Some(lab) = lab(1) else { return };
    let d = Daemon::start(&lab, &config(&lab, "auto", &[0]));
    let vr = lab.vr(0);
    // An address for a far network on side B's host, reached through a route added inside
    // the VR's namespace (not in the config): only the netlink sync can make it work.
    let host_b = &vr.side(Side::B).host;
    host_b
        .ip(&["addr", "add", "198.51.100.1/32", "dev", "eth0"])
        .unwrap();
    let gw_b = vr.b.addrs.host4.to_string();
    let out = d.ctl(&[
        "exec",
        "vr0",
        "--",
        "ip",
        "route",
        "add",
        "198.51.100.0/24",
        "via",
        &gw_b,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hop = format!("via {gw_b} dev b");
    wait("route in the data plane", 10, || {
        has_route(&d, "vr0", "198.51.100.0/24", &hop)
    });
    assert_eq!(ping(&lab, 0, "198.51.100.1", 3, "0.05"), (3, 3));
    // The table view shows it too, and the exec'd command's output comes back.
    let text = ctl_text(&d, &["routes", "vr0", "--family", "4"]);
    assert!(
        text.contains("198.51.100.0/24") && text.contains(&hop),
        "{text}"
    );
    let out = d.ctl(&[
        "exec",
        "vr0",
        "--",
        "ip",
        "route",
        "show",
        "198.51.100.0/24",
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&gw_b));
    // Deleting it inside the namespace withdraws it.
    let out = d.ctl(&["exec", "vr0", "--", "ip", "route", "del", "198.51.100.0/24"]);
    assert!(out.status.success());
    wait("route withdrawn", 10, || {
        !has_route(&d, "vr0", "198.51.100.0/24", &hop)
    });
    // A weighted multipath route: each member with its weight, as `ip route` shows it.
    let gw_a = vr.a.addrs.host4.to_string();
    let out = d.ctl(&[
        "exec",
        "vr0",
        "--",
        "ip",
        "route",
        "add",
        "198.51.101.0/24",
        "nexthop",
        "via",
        &gw_a,
        "nexthop",
        "via",
        &gw_b,
        "weight",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait("weighted multipath route in the data plane", 10, || {
        let p = "198.51.101.0/24";
        has_route(&d, "vr0", p, &format!("via {gw_a} dev a weight 1"))
            && has_route(&d, "vr0", p, &format!("via {gw_b} dev b weight 3"))
    });
    // Neighbours: a static one made inside shows in the data plane.
    let out = d.ctl(&[
        "exec",
        "vr0",
        "--",
        "ip",
        "neigh",
        "replace",
        "10.0.1.77",
        "lladdr",
        "02:00:00:00:00:77",
        "dev",
        "b",
    ]);
    assert!(out.status.success());
    wait("neighbour in the data plane", 10, || {
        d.ctl_json(&["neigh", "vr0"])["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["address"] == "10.0.1.77" && n["mac"] == "02:00:00:00:00:77")
    });
    let show = d.ctl_json(&["show", "vr0"]);
    assert_eq!(show["state"], "up", "{show}");
    assert!(
        show["sync"]["route_updates"].as_u64().unwrap() >= 2,
        "{show}"
    );
    let vrs = d.ctl_json(&["vrs"]);
    assert_eq!(vrs["vrs"][0]["name"], "vr0");
    let text = ctl_text(&d, &["show", "vr0"]);
    assert!(
        text.contains("netlink sync") && text.contains("punt policer"),
        "{text}"
    );
}

#[test]
fn a_neighbour_unknown_to_the_data_plane_is_resolved_through_the_namespace() {
    let Some(lab) = lab(1) else { return };
    // No static neighbours: the first packet to each host is punted, the namespace's kernel
    // forwards it and resolves the host (ARP/ND through the tap and the port); the sync then
    // gives the data plane the neighbour.
    let text: String = config(&lab, "auto", &[0])
        .split("[[vr.neighbor]]")
        .next()
        .unwrap()
        .to_string();
    let d = Daemon::start(&lab, &text);
    let vr = lab.vr(0);
    let (b4, b6) = (vr.b.addrs.host4.to_string(), vr.b.addrs.host6.to_string());
    let (_, got) = ping(&lab, 0, &b4, 5, "0.1");
    assert!(got >= 4, "IPv4: {got}/5");
    let (_, got) = ping(&lab, 0, &b6, 5, "0.1");
    assert!(got >= 4, "IPv6: {got}/5");
    let n = d.ctl_json(&["neigh", "vr0"]);
    let addrs: Vec<&str> = n["neighbours"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["address"].as_str().unwrap())
        .collect();
    assert!(addrs.contains(&b4.as_str()), "{addrs:?}");
    assert!(addrs.contains(&b6.as_str()), "{addrs:?}");
    let show = d.ctl_json(&["show", "vr0"]);
    assert!(
        show["counters"]["neigh_miss"].as_u64().unwrap() >= 1,
        "{show}"
    );
    // Later packets are forwarded by the data plane, not punted.
    let punted = show["counters"]["punted"].as_u64().unwrap();
    assert_eq!(ping(&lab, 0, &b4, 20, "0.02"), (20, 20));
    let show = d.ctl_json(&["show", "vr0"]);
    let after = show["counters"]["punted"].as_u64().unwrap();
    assert!(after - punted < 5, "punted {} more", after - punted);
    // Each echo and reply ran as a vector of its own, and each vector's first packet is
    // timed through the VR's ingress ring (`ctl show`'s ingress wait).
    let w = &show["ingress_wait"];
    assert!(w["samples"].as_u64().unwrap() >= 40, "{w}");
    let (p99, max) = (w["p99_us"].as_f64().unwrap(), w["max_us"].as_f64().unwrap());
    assert!(p99 <= max * 1.25 + 1.1 && max < 1e6, "{w}");
    assert!(!w["buckets"].as_array().unwrap().is_empty(), "{w}");
    // Checked against the deferral's bound (10 ms unless set): no ping waited that long.
    assert_eq!(
        (w["bound_us"].as_u64(), w["over_bound"].as_u64()),
        (Some(10_000), Some(0)),
        "{w}"
    );
    // And over the recent window (from the daemon's first snapshot, taken within about a
    // second of its start, to now): part of those samples, none over the bound.
    wait("a recent window of ingress waits", 10, || {
        d.ctl_json(&["show", "vr0"])["ingress_wait"]["recent"].is_object()
    });
    let show = d.ctl_json(&["show", "vr0"]);
    let (w, r) = (&show["ingress_wait"], &show["ingress_wait"]["recent"]);
    let span = r["window_s"].as_f64().unwrap();
    assert!(span > 0.0 && span < 80.0, "{r}");
    assert!(
        r["samples"].as_u64().unwrap() <= w["samples"].as_u64().unwrap(),
        "{w}"
    );
    assert_eq!(r["over_bound"].as_u64(), Some(0), "{r}");
}

#[test]
fn vrs_are_added_and_removed_at_run_time() {
    let Some(lab) = lab(2) else { return };
    let d = Daemon::start(&lab, &config(&lab, "auto", &[0]));
    let full = config(&lab, "auto", &[1]);
    let snippet = &full[full.find("[[vr]]").unwrap()..];
    let file = d.config.with_extension("add.toml");
    std::fs::write(&file, snippet).unwrap();
    let msg = ctl_text(&d, &["add", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(msg.contains("added vr1"), "{msg}");
    let b1 = lab.vr(1).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 1, &b1, 3, "0.05"), (3, 3));
    let ns = d.ctl_json(&["vrs"])["vrs"][1]["netns"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(vrhost_lab::Netns::exists(&ns));
    // Adding it again is refused with the file's place.
    std::fs::write(&file, snippet).unwrap();
    let out = d.ctl(&["add", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("vr.name") && err.contains("add.toml:"),
        "{err}"
    );
    let msg = ctl_text(&d, &["remove", "vr1"]);
    assert!(msg.contains("removed vr1"), "{msg}");
    assert!(!vrhost_lab::Netns::exists(&ns));
    assert_eq!(ping(&lab, 1, &b1, 2, "0.05").1, 0);
    // vr0 never noticed.
    let b0 = lab.vr(0).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &b0, 3, "0.05"), (3, 3));
    let out = d.ctl(&["show", "vr1"]);
    assert!(!out.status.success());
}

#[test]
fn a_flood_at_a_routers_own_address_is_policed_and_others_forward() {
    let Some(lab) = lab(2) else { return };
    let text = config(&lab, "auto", &[0, 1]).replace(
        "[[vr]]\nname = \"vr0\"",
        "[[vr]]\nname = \"vr0\"\npunt_rate = 200\npunt_burst = 20",
    );
    assert!(text.contains("punt_rate = 200"));
    let d = Daemon::start(&lab, &text);
    let vr = lab.vr(0);
    let gw = vr.a.addrs.gw4.to_string();
    // A flood of pings at vr0's own address (punted) while vr1 forwards.
    let flood = vr
        .side(Side::A)
        .host
        .command(&[
            "ping", "-f", "-l", "200", "-q", "-c", "50000", "-W", "1", &gw,
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _flood = Reap(flood);
    let b1 = lab.vr(1).b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 1, &b1, 20, "0.02"), (20, 20));
    wait("policer drops", 20, || {
        d.ctl_json(&["show", "vr0"])["counters"]["punt_policed"]
            .as_u64()
            .unwrap()
            > 100
    });
    let show = d.ctl_json(&["show", "vr0"]);
    assert_eq!(show["punt_rate"], 200);
    assert!(
        show["drops"]["punt-policed"].as_u64().unwrap() > 100,
        "{show}"
    );
}

#[test]
fn a_tap_or_namespace_removed_by_hand_degrades_only_its_vr() {
    let Some(lab) = lab(2) else { return };
    let d = Daemon::start(&lab, &config(&lab, "auto", &[0, 1]));
    let ns0 = d.ctl_json(&["show", "vr0"])["netns"]
        .as_str()
        .unwrap()
        .to_string();
    let b0 = lab.vr(0).b.addrs.host4.to_string();
    let b1 = lab.vr(1).b.addrs.host4.to_string();
    // A route whose next hop is on no VIF (the namespace's loopback): counted, shown.
    let out = d.ctl(&[
        "exec",
        "vr0",
        "--",
        "ip",
        "route",
        "add",
        "10.77.0.0/16",
        "dev",
        "lo",
    ]);
    assert!(out.status.success());
    wait("unusable route counted", 10, || {
        d.ctl_json(&["show", "vr0"])["sync"]["unusable_routes"] == 1
    });
    // The tap of vr0's side-A VIF deleted by hand: noticed, made again with its addresses,
    // neighbours and routes; vr0 forwards again.
    vrhost_lab::ip(&["-n", &ns0, "link", "del", "dev", "a"]).unwrap();
    wait("tap made again", 10, || {
        let s = d.ctl_json(&["show", "vr0"]);
        s["counters"]["taps_recreated"] == 1 && s["state"] == "up"
    });
    wait("forwarding through the rebuilt VIF", 10, || {
        ping(&lab, 0, &b0, 1, "0.05") == (1, 1)
    });
    // Its namespace deleted from outside.
    vrhost_lab::ip(&["netns", "del", &ns0]).unwrap();
    wait("namespace loss reported", 10, || {
        d.ctl_json(&["show", "vr0"])["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("deleted from outside"))
    });
    // vr0's data plane still forwards with what it had; vr1 is untouched.
    assert_eq!(ping(&lab, 0, &b0, 3, "0.05"), (3, 3));
    assert_eq!(ping(&lab, 1, &b1, 3, "0.05"), (3, 3));
    assert_eq!(d.ctl_json(&["show", "vr1"])["state"], "up");
    let text = ctl_text(&d, &["vrs"]);
    assert!(text.contains("degraded"), "{text}");
    // Removing and adding vr0 again (a reload of the same file after removal) rebuilds it.
    ctl_text(&d, &["remove", "vr0"]);
    let msg = ctl_text(&d, &["reload"]);
    assert!(msg.contains("1 VRs added"), "{msg}");
    wait("vr0 rebuilt", 10, || {
        d.ctl_json(&["show", "vr0"])["state"] == "up"
    });
    assert_eq!(ping(&lab, 0, &b0, 3, "0.05"), (3, 3));
}

/// The quickpath (`quickpath = true` on both ports, sides with GRO on so the router's ports
/// take XDP transmit): once a flow is established its packets are forwarded by the ports'
/// XDP program, and a route change inside the VR's namespace reaches it — a blackhole for
/// the far host stops the flow, removing it brings the flow back. IPv6 flows take it too;
/// what the full path must see (the VR's own address, TCP's first packets) still works.
#[test]
fn the_quickpath_carries_established_flows_and_follows_route_changes() {
    let Some(lab) = lab(1) else { return };
    common::sides_take_xdp_transmit(&lab);
    let text = config(&lab, "afxdp", &[0]).replace(
        "backend = \"afxdp\"\n",
        "backend = \"afxdp\"\nquickpath = true\n",
    );
    assert_eq!(text.matches("quickpath = true").count(), 2, "{text}");
    let d = Daemon::start(&lab, &text);
    let vr = lab.vr(0);
    let far = vr.b.addrs.host4.to_string();
    assert_eq!(ping(&lab, 0, &far, 100, "0.01"), (100, 100));
    let s = d.vr("vr0");
    let qp = s["quickpath_packets"].as_u64().unwrap();
    // Requests and replies each take the full path until their flow's decision is in.
    assert!(qp >= 150, "only {qp} of 200 packets by the quickpath: {s}");
    assert!(s["tx_packets"].as_u64().unwrap() >= 200, "{s}");

    let exec = |args: &[&str]| {
        let mut full = vec!["exec", "vr0", "--"];
        full.extend_from_slice(args);
        let out = d.ctl(&full);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let host = format!("{far}/32");
    let has_host_route = || {
        d.ctl_json(&["routes", "vr0"])
            .get("routes")
            .is_some_and(|r| r.as_array().unwrap().iter().any(|r| r["prefix"] == host))
    };
    exec(&["ip", "route", "add", "blackhole", &host]);
    wait("blackhole in the data plane", 10, has_host_route);
    let (sent, got) = ping(&lab, 0, &far, 20, "0.01");
    assert_eq!((sent, got), (20, 0), "the quickpath kept a stale decision");
    let s = d.vr("vr0");
    assert!(
        s["drop_reasons"]["blackhole"].as_u64().unwrap_or(0) >= 20,
        "the full path dropped them: {s}"
    );
    exec(&["ip", "route", "del", "blackhole", &host]);
    wait("blackhole withdrawn", 10, || !has_host_route());
    assert_eq!(ping(&lab, 0, &far, 100, "0.01"), (100, 100));
    let again = d.vr("vr0")["quickpath_packets"].as_u64().unwrap();
    assert!(
        again >= qp + 150,
        "the flow went back to the quickpath: {again} after {qp}"
    );

    // The full path's business still gets done.
    let gw = vr.a.addrs.gw4.to_string();
    assert_eq!(
        ping(&lab, 0, &gw, 3, "0.05"),
        (3, 3),
        "the VR's own address"
    );
    // IPv6 flows go by the quickpath too once established.
    let before = d.vr("vr0")["quickpath_packets"].as_u64().unwrap();
    let b6 = vr.b.addrs.host6.to_string();
    assert_eq!(ping(&lab, 0, &b6, 20, "0.01"), (20, 20), "IPv6");
    let v6 = d.vr("vr0")["quickpath_packets"].as_u64().unwrap() - before;
    assert!(v6 >= 30, "only {v6} of 40 IPv6 packets by the quickpath");
    // And an IPv6 route change reaches it as an IPv4 one does.
    let host6 = format!("{b6}/128");
    let has_host6_route = || {
        d.ctl_json(&["routes", "vr0"])
            .get("routes")
            .is_some_and(|r| r.as_array().unwrap().iter().any(|r| r["prefix"] == host6))
    };
    exec(&["ip", "-6", "route", "add", "blackhole", &host6]);
    wait("IPv6 blackhole in the data plane", 10, has_host6_route);
    assert_eq!(
        ping(&lab, 0, &b6, 20, "0.01"),
        (20, 0),
        "a stale IPv6 decision"
    );
    exec(&["ip", "-6", "route", "del", "blackhole", &host6]);
    wait("IPv6 blackhole withdrawn", 10, || !has_host6_route());
    assert_eq!(ping(&lab, 0, &b6, 20, "0.01"), (20, 20));
    let bytes = common::iperf(&lab, 0, 2);
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
    let st = d.status();
    for p in st["ports"].as_array().unwrap() {
        assert_eq!(p["kernel"]["xdp_tx_failed"], 0, "{p}");
    }
}
