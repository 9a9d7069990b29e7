//! Config parsing and checking: good files parse into the expected plan; every kind of bad
//! input names the file, line and field.

use super::*;

fn err(text: &str) -> ConfigError {
    Config::parse("t.toml", text).expect_err("should be refused")
}

const BASE: &str = r#"
[dataplane]
cores = [0]

[[port]]
name = "p0"
interface = "lo"

[[port]]
name = "p1"
interface = "lo2"
backend = "afpacket"
"#;

fn with(vr: &str) -> String {
    format!("{BASE}\n{vr}")
}

const VR: &str = r#"
[[vr]]
name = "blue"
weight = 2
[[vr.vif]]
name = "a"
port = "p0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1/24", "fd00::1/64"]
[[vr.vif]]
name = "b"
port = "p1"
mac = "02:00:00:00:00:02"
vlan = 7
addresses = ["10.0.1.1/24"]
[[vr.route]]
prefix = "0.0.0.0/0"
via = "10.0.1.2"
[[vr.route]]
prefix = "192.0.2.0/24"
type = "blackhole"
[[vr.neighbor]]
address = "10.0.1.2"
mac = "02:00:00:00:00:22"
vif = "b"
"#;

#[test]
fn a_good_file_becomes_a_plan() {
    let c = Config::parse("t.toml", &with(VR)).unwrap();
    assert_eq!(c.workers(), 1);
    assert_eq!(c.ports.len(), 2);
    assert_eq!(c.ports[1].backend, Backend::Afpacket);
    let p = &c.plans()[0];
    assert_eq!(p.name, "blue");
    assert_eq!(p.weight, 2);
    assert_eq!(p.vifs[1].port, 1);
    assert_eq!(p.vifs[1].vlan, Some(7));
    assert_eq!(p.vifs[0].mac, EthernetAddress([2, 0, 0, 0, 0, 1]));
    assert_eq!(
        p.vifs[0].addrs,
        vec![
            IfAddr::V4("10.0.0.1".parse().unwrap(), 24),
            IfAddr::V6("fd00::1".parse().unwrap(), 64)
        ]
    );
    assert_eq!(
        p.routes[0].1,
        RoutePlan::Via("10.0.1.2".parse().unwrap(), 1),
        "via resolved to the vif whose subnet holds it"
    );
    assert_eq!(p.routes[1].1, RoutePlan::Special(RouteType::Blackhole));
    assert_eq!(
        p.neighbors,
        vec![(
            1,
            "10.0.1.2".parse().unwrap(),
            EthernetAddress([2, 0, 0, 0, 0, 0x22])
        )]
    );
}

#[test]
fn the_builtin_example_parses() {
    let c = Config::parse("<built-in>", EXAMPLE).unwrap();
    assert_eq!(c.plans().len(), 2);
}

#[test]
fn syntax_and_unknown_fields_name_line_and_field() {
    let e = err(&with(&VR.replace("weight = 2", "wieght = 2")));
    assert_eq!(e.file, "t.toml");
    assert!(e.message.contains("wieght"), "{e}");
    let line = with(VR)
        .lines()
        .position(|l| l.contains("weight = 2"))
        .unwrap()
        + 1;
    assert_eq!(e.line, line, "{e}");

    let e = err(&with(&VR.replace("weight = 2", "weight = \"two\"")));
    assert_eq!(e.field, "weight", "{e}");
    assert_eq!(e.line, line);
}

#[test]
fn bad_values_are_refused_with_their_field() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "mac = \"02:00:00:00:00:01\"",
            "mac = \"01:00:5e:00:00:01\"",
            "vr.vif.mac",
        ),
        (
            "mac = \"02:00:00:00:00:01\"",
            "mac = \"nonsense\"",
            "vr.vif.mac",
        ),
        ("weight = 2", "weight = 0", "vr.weight"),
        ("weight = 2", "weight = -3", "vr.weight"),
        ("weight = 2", "weight = 1000001", "vr.weight"),
        ("weight = 2", "weight = 2\nworker = 1", "vr.worker"),
        ("weight = 2", "weight = 2\nworker = -1", "vr.worker"),
        (
            "weight = 2",
            "weight = 2\npolicer_pps = 0",
            "vr.policer_pps",
        ),
        (
            "weight = 2",
            "weight = 2\npolicer_bps = -5",
            "vr.policer_bps",
        ),
        ("vlan = 7", "vlan = 4095", "vr.vif.vlan"),
        ("port = \"p1\"", "port = \"p9\"", "vr.vif.port"),
        ("\"10.0.1.1/24\"]", "\"10.0.1.1/33\"]", "vr.vif.addresses"),
        ("\"10.0.1.1/24\"]", "\"224.0.0.1/24\"]", "vr.vif.addresses"),
        ("via = \"10.0.1.2\"", "via = \"10.9.9.9\"", "vr.route.via"),
        (
            "prefix = \"0.0.0.0/0\"",
            "prefix = \"10.0.0.1/8\"",
            "vr.route.prefix",
        ),
        (
            "address = \"10.0.1.2\"",
            "address = \"10.0.0.2\"",
            "vr.neighbor.address",
        ),
        ("vif = \"b\"\n", "vif = \"c\"\n", "vr.neighbor.vif"),
        (
            "name = \"a\"",
            "name = \"a-name-too-long-for-a-tap\"",
            "vr.vif.name",
        ),
        ("name = \"blue\"", "name = \"bad/name\"", "vr.name"),
    ];
    for (from, to, field) in cases {
        let text = with(&VR.replacen(from, to, 1));
        assert_ne!(text, with(VR), "case {to} did not change the file");
        let e = err(&text);
        assert_eq!(e.field, *field, "{to}: {e}");
        let last = to.trim_end().lines().last().unwrap();
        let want = text.lines().position(|l| l.contains(last)).unwrap() + 1;
        assert_eq!(e.line, want, "{to}: {e}");
        assert!(e.to_string().starts_with(&format!("t.toml:{want}:")), "{e}");
    }
}

/// The test config with `line` added to `[dataplane]` (its line 4).
fn dataplane_with(line: &str) -> String {
    with(VR).replace("cores = [0]", &format!("cores = [0]\n{line}"))
}

#[test]
fn the_deferrals_bound_is_checked_on_its_line() {
    // 10 ms unless set, 0 allowed (off), over 100 ms refused.
    let c = Config::parse("t.toml", &with(VR)).unwrap();
    assert_eq!(*c.dataplane.max_deferral_us.get_ref(), 10_000);
    for ok in [0, 250, 100_000] {
        let c = Config::parse(
            "t.toml",
            &dataplane_with(&format!("max_deferral_us = {ok}")),
        );
        assert_eq!(*c.unwrap().dataplane.max_deferral_us.get_ref(), ok);
    }
    for bad in [-1, 100_001] {
        let e = err(&dataplane_with(&format!("max_deferral_us = {bad}")));
        assert_eq!(e.field, "dataplane.max_deferral_us", "{e}");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("not in 0..=100000"), "{e}");
    }
}

#[test]
fn realtime_priority_and_rx_coalescing_are_checked_on_their_line() {
    for bad in ["100", "-1"] {
        let e = err(&dataplane_with(&format!("realtime_priority = {bad}")));
        assert_eq!(e.field, "dataplane.realtime_priority", "{e}");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("not in 0..=99"), "{e}");
    }
    let e = err(&with(VR).replace("cores = [0]", "cores = [0]\nrx_coalesce_us = 1001"));
    assert_eq!(e.field, "dataplane.rx_coalesce_us", "{e}");
    assert_eq!(e.line, 4, "{e}");
    let text = with(VR).replace(
        "cores = [0]",
        "cores = [0]\nrealtime_priority = 10\nrx_coalesce_us = 20",
    );
    let c = Config::parse("t.toml", &text).unwrap();
    assert_eq!(*c.dataplane.realtime_priority.get_ref(), 10);
    assert_eq!(*c.dataplane.rx_coalesce_us.get_ref(), 20);
    // Changing it needs a restart (workers are started with it), and a reload says so.
    let d = Config::parse("t.toml", &with(VR)).unwrap();
    assert_eq!(
        d.restart_needed(&c),
        Some("[dataplane] realtime_priority changed")
    );
    let r = with(VR).replace("cores = [0]", "cores = [0]\nrun_vrs = \"on-owner\"");
    let r = Config::parse("t.toml", &r).unwrap();
    assert_eq!(r.dataplane.run_vrs, RunVrsSpec::OnOwner);
    assert_eq!(d.dataplane.run_vrs, RunVrsSpec::WhereReceived);
    assert_eq!(d.restart_needed(&r), Some("[dataplane] run_vrs changed"));
}

#[test]
fn fairness_fields_are_planned_and_bad_ones_name_the_vr() {
    let text = with(&VR.replace(
        "weight = 2",
        "weight = 3\nworker = 0\npolicer_pps = 100000\npolicer_bps = 500000000",
    ))
    .replace(
        "cores = [0]",
        "cores = [0]\nfairness = \"cycles\"\nwatchdog_us = 500",
    );
    let c = Config::parse("t.toml", &text).unwrap();
    assert_eq!(c.dataplane.fairness, FairnessSpec::Cycles);
    assert_eq!(*c.dataplane.watchdog_us.get_ref(), 500);
    let p = &c.plans()[0];
    assert_eq!(
        (p.weight, p.worker, p.policer_pps, p.policer_bps),
        (3, Some(0), Some(100_000), Some(500_000_000))
    );
    // Defaults: packets fairness, a 2 ms watchdog, no policer, placed by load.
    let d = Config::parse("t.toml", &with(VR)).unwrap();
    assert_eq!(d.dataplane.fairness, FairnessSpec::Packets);
    assert_eq!(*d.dataplane.watchdog_us.get_ref(), 2000);
    assert_eq!(*d.dataplane.realtime_priority.get_ref(), 0);
    let p = &d.plans()[0];
    assert_eq!((p.worker, p.policer_pps, p.policer_bps), (None, None, None));

    // Every refusal names the VR as well as the field.
    for (to, field) in [
        ("weight = 0", "vr.weight"),
        ("weight = -1", "vr.weight"),
        ("worker = 4", "vr.worker"),
        ("policer_pps = 0", "vr.policer_pps"),
        ("policer_bps = 0", "vr.policer_bps"),
    ] {
        let e = err(&with(&VR.replace("weight = 2", to)));
        assert_eq!(e.field, field);
        assert!(e.message.contains("VR \"blue\""), "{e}");
    }
    let e = err(&with(&VR.replace("weight = 2", "worker = 4")));
    assert!(e.message.contains("workers are 0..=0"), "{e}");

    let e = err(&BASE.replace("cores = [0]", "cores = [0]\nfairness = \"bytes\""));
    assert_eq!(e.field, "fairness", "{e}");
    assert!(e.message.contains("packets"), "{e}");
    let e = err(&BASE.replace("cores = [0]", "cores = [0]\nscaling = \"elastic\""));
    assert_eq!(e.field, "scaling", "{e}");
    let e = err(&BASE.replace(
        "backend = \"afpacket\"",
        "backend = \"afxdp\"\nfanout = \"cpu\"",
    ));
    assert_eq!(e.field, "port.fanout", "{e}");
    assert!(e.message.contains("AF_PACKET ports only"), "{e}");
    let e = err(&BASE.replace(
        "backend = \"afpacket\"",
        "backend = \"afpacket\"\nfanout = \"queue\"",
    ));
    assert_eq!(e.field, "fanout", "{e}");
    let c = Config::parse(
        "t.toml",
        &with(VR).replace(
            "backend = \"afpacket\"",
            "backend = \"afpacket\"\nfanout = \"cpu\"",
        ),
    )
    .unwrap();
    assert_eq!(
        c.ports[1].fanout.as_ref().map(|f| *f.get_ref()),
        Some(FanoutSpec::Cpu)
    );
    assert_eq!(c.ports[0].fanout, None);
    let e = err(&BASE.replace("cores = [0]", "cores = [0]\nrun_vrs = \"everywhere\""));
    assert_eq!(e.field, "run_vrs", "{e}");
    assert!(e.message.contains("where-received"), "{e}");
    let e = err(&BASE.replace("cores = [0]", "cores = [0]\nwatchdog_us = -1"));
    assert_eq!(e.field, "dataplane.watchdog_us");
    let e = err(&BASE.replace("cores = [0]", "cores = [0]\nwatchdog_strikes = 33"));
    assert_eq!(e.field, "dataplane.watchdog_strikes");
}

#[test]
fn duplicates_are_refused() {
    let twice = with(&format!("{VR}{}", VR.replace("weight = 2", "weight = 3")));
    let e = err(&twice);
    assert_eq!(e.field, "vr.name");
    assert!(e.message.contains("twice"), "{e}");

    // Another VR with a MAC already used on the same port and VLAN.
    let other = VR
        .replace("name = \"blue\"", "name = \"green\"")
        .replace("mac = \"02:00:00:00:00:02\"", "mac = \"02:00:00:00:00:03\"");
    let e = err(&with(&format!("{VR}{other}")));
    assert_eq!(e.field, "vr.vif.mac");
    assert!(e.message.contains("blue/a"), "{e}");
    // The same MAC on another VLAN is a different key, so it is allowed.
    let vlan = other.replacen("port = \"p0\"", "port = \"p0\"\nvlan = 9", 1);
    Config::parse("t.toml", &with(&format!("{VR}{vlan}"))).unwrap();

    let e = err(&format!(
        "{BASE}\n[[port]]\nname = \"p2\"\ninterface = \"lo\"\n"
    ));
    assert_eq!(e.field, "port.interface");
    let e = err(&BASE.replace("cores = [0]", "cores = [0, 0]"));
    assert_eq!(e.field, "dataplane.cores");
}

#[test]
fn queues_must_match_cores() {
    let text = BASE.replace("interface = \"lo\"", "interface = \"lo\"\nqueues = 2");
    let e = err(&text);
    assert_eq!(e.field, "port.queues");
    let ok = text.replace("cores = [0]", "cores = [0, 1]");
    Config::parse("t.toml", &ok).unwrap();
}

#[test]
fn busy_poll_only_on_af_xdp_ports() {
    // p0 has the default backend (auto, AF_XDP first): allowed.
    let ok = BASE.replacen(
        "interface = \"lo\"",
        "interface = \"lo\"\nbusy_poll = true",
        1,
    );
    let c = Config::parse("t.toml", &ok).unwrap();
    assert_eq!(
        c.ports[0].busy_poll.as_ref().map(|b| *b.get_ref()),
        Some(true)
    );
    // p1 is AF_PACKET: refused, naming the field and its line.
    let bad = BASE.replace(
        "backend = \"afpacket\"",
        "backend = \"afpacket\"\nbusy_poll = true",
    );
    let e = err(&bad);
    assert_eq!(e.field, "port.busy_poll");
    assert_eq!(e.line, 13, "{e}");
    // Off is fine anywhere.
    let off = BASE.replace(
        "backend = \"afpacket\"",
        "backend = \"afpacket\"\nbusy_poll = false",
    );
    Config::parse("t.toml", &off).unwrap();
}

#[test]
fn quickpath_only_on_af_xdp_ports() {
    let ok = BASE.replacen(
        "interface = \"lo\"",
        "interface = \"lo\"\nquickpath = true",
        1,
    );
    let c = Config::parse("t.toml", &ok).unwrap();
    assert_eq!(
        c.ports[0].quickpath.as_ref().map(|b| *b.get_ref()),
        Some(true)
    );
    let bad = BASE.replace(
        "backend = \"afpacket\"",
        "backend = \"afpacket\"\nquickpath = true",
    );
    let e = err(&bad);
    assert_eq!(e.field, "port.quickpath");
    assert_eq!(e.line, 13, "{e}");
}

#[test]
fn host_checks_name_missing_interfaces_and_cores() {
    let c = Config::parse("t.toml", BASE).unwrap();
    // "lo" exists everywhere, "lo2" nowhere.
    let e = c.check_host().unwrap_err();
    assert_eq!(e.field, "port.interface");
    assert!(e.message.contains("lo2"), "{e}");
    assert_eq!(
        e.line,
        BASE.lines().position(|l| l.contains("\"lo2\"")).unwrap() + 1
    );

    let one = "[dataplane]\ncores = [4096]\n[[port]]\nname = \"p0\"\ninterface = \"lo\"\n";
    let e = Config::parse("t.toml", one)
        .unwrap()
        .check_host()
        .unwrap_err();
    assert_eq!(e.field, "dataplane.cores");
    assert!(e.message.contains("4096"), "{e}");
}

#[test]
fn reload_tells_what_needs_a_restart() {
    let a = Config::parse("t.toml", &with(VR)).unwrap();
    let b = Config::parse("t.toml", &with(&VR.replace("weight = 2", "weight = 5"))).unwrap();
    assert_eq!(a.restart_needed(&b), None);
    let c = Config::parse("t.toml", &with(VR).replace("\"lo2\"", "\"lo3\"")).unwrap();
    assert!(a.restart_needed(&c).is_some());
    // Fairness and the watchdog apply while running; cores do not.
    let f = with(VR).replace("cores = [0]", "cores = [0]\nfairness = \"cycles\"");
    let f = Config::parse("t.toml", &f).unwrap();
    assert_eq!(a.restart_needed(&f), None);
    let g = Config::parse("t.toml", &with(VR).replace("cores = [0]", "cores = [1]")).unwrap();
    assert!(a.restart_needed(&g).is_some());
}

#[test]
fn mac_and_prefix_parsers() {
    assert_eq!(
        parse_mac("02:aa:BB:0c:00:ff"),
        Some(EthernetAddress([2, 0xaa, 0xbb, 0xc, 0, 0xff]))
    );
    for bad in [
        "",
        "02:aa:bb:0c:00",
        "02:aa:bb:0c:00:ff:00",
        "2:aa:bb:0c:00:ff",
        "zz:aa:bb:0c:00:ff",
    ] {
        assert_eq!(parse_mac(bad), None, "{bad}");
    }
    assert!(parse_prefix("10.0.0.0/8").is_some());
    assert!(parse_prefix("10.0.0.1/8").is_none());
    assert!(parse_prefix("fd00::/8").is_some());
    assert!(parse_ifaddr("10.0.0.1").is_none());
}

#[test]
fn punt_policer_and_netlink_settings() {
    let c = Config::parse("t.toml", &with(VR)).unwrap();
    let p = &c.plans()[0];
    assert_eq!((p.punt_rate, p.punt_burst), (10_000, 1_000), "defaults");
    assert!(c.control.netlink_sync);
    assert_eq!(*c.control.netlink_rcvbuf.get_ref(), 64 << 20);
    let text = with(&VR.replacen(
        "weight = 2",
        "weight = 2\npunt_rate = 500\npunt_burst = 50",
        1,
    ));
    let p = &Config::parse("t.toml", &text).unwrap().plans()[0];
    assert_eq!((p.punt_rate, p.punt_burst), (500, 50));
    let e = err(&with(&VR.replacen(
        "weight = 2",
        "weight = 2\npunt_burst = 0",
        1,
    )));
    assert_eq!(e.field, "vr.punt_burst", "{e}");
    let text = format!("[control]\nnetlink_rcvbuf = 100\n{}", with(VR));
    let e = err(&text);
    assert_eq!(
        (e.field.as_str(), e.line),
        ("control.netlink_rcvbuf", 2),
        "{e}"
    );
    let text = format!(
        "[control]\nnetlink_sync = false\nnetlink_rcvbuf = 4096\n{}",
        with(VR)
    );
    let c = Config::parse("t.toml", &text).unwrap();
    assert!(!c.control.netlink_sync);
}

#[test]
fn vrs_added_at_run_time_are_checked_against_the_running_ones() {
    let c = Config::parse("t.toml", &with(VR)).unwrap();
    let green = VR
        .replace("\"blue\"", "\"green\"")
        .replace("02:00:00:00:00:0", "02:00:00:00:01:0");
    let (merged, plans) = c.add_vrs("green.toml", &green).unwrap();
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].name, "green");
    assert_eq!(merged.plans().len(), 2);
    // The same name again, or a MAC a running VR uses: refused, placed in the new file.
    let e = c.add_vrs("again.toml", VR).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("again.toml", "vr.name"),
        "{e}"
    );
    let clash = VR.replace("\"blue\"", "\"red\"");
    let e = c.add_vrs("red.toml", &clash).unwrap_err();
    assert_eq!(e.field, "vr.vif.mac", "{e}");
    assert_eq!(e.line, 8, "{e}");
    let e = c.add_vrs("none.toml", "# nothing\n").unwrap_err();
    assert_eq!(e.field, "vr");
    let e = c
        .add_vrs("bad.toml", "[[vr]]\nname = \"x\"\nbogus = 1\n")
        .unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("bad.toml", 3), "{e}");
    assert_eq!(merged.without_vr("green").unwrap().plans().len(), 1);
    assert!(c.without_vr("nope").is_none());
}

#[test]
fn flow_cache_settings_are_planned_and_bad_ones_name_the_field() {
    let p = &Config::parse("t.toml", &with(VR)).unwrap().plans()[0];
    assert_eq!(
        (p.flow_cache, p.flow_cache_key),
        (1024, FlowCacheKey::Destination),
        "defaults"
    );
    let text = with(&VR.replacen(
        "weight = 2",
        "weight = 2\nflow_cache = 4096\nflow_cache_key = \"5-tuple\"",
        1,
    ));
    let p = &Config::parse("t.toml", &text).unwrap().plans()[0];
    assert_eq!(
        (p.flow_cache, p.flow_cache_key),
        (4096, FlowCacheKey::FiveTuple)
    );
    for (bad, field, says) in [
        (
            "flow_cache_key = \"src\"",
            "vr.flow_cache_key",
            "\"src\" is not",
        ),
        ("flow_cache = -1", "vr.flow_cache", "-1 entries"),
        ("flow_cache = 16777217", "vr.flow_cache", "16777217 entries"),
    ] {
        let e = err(&with(&VR.replacen(
            "weight = 2",
            &format!("weight = 2\n{bad}"),
            1,
        )));
        assert_eq!((e.field.as_str(), e.line), (field, 18), "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    // Off is allowed.
    let text = with(&VR.replacen("weight = 2", "weight = 2\nflow_cache = 0", 1));
    assert_eq!(
        Config::parse("t.toml", &text).unwrap().plans()[0].flow_cache,
        0
    );
}

/// The test config with one more route: `[[vr.route]]`, its prefix, then `body` (the
/// route's line 3 onwards).
fn route_with(prefix: &str, body: &str) -> String {
    with(&format!(
        "{VR}[[vr.route]]\nprefix = \"{prefix}\"\n{body}\n"
    ))
}

#[test]
fn multipath_routes_name_each_next_hop_and_its_weight() {
    let text = route_with(
        "203.0.113.0/24",
        r#"nexthops = [{ via = "10.0.0.2", weight = 3 }, { via = "10.0.1.2", vif = "b" }]"#,
    );
    let c = Config::parse("t.toml", &text).unwrap();
    let p = &c.plans()[0];
    assert_eq!(
        p.routes.last().unwrap().1,
        RoutePlan::Multipath(vec![
            ("10.0.0.2".parse().unwrap(), 0, 3),
            ("10.0.1.2".parse().unwrap(), 1, 1),
        ])
    );
    // Every bad next hop is named on the route's `nexthops` line.
    let line = text.lines().count();
    for (body, field, says) in [
        (
            r#"nexthops = [{ via = "10.0.0.2", weight = 0 }]"#,
            "vr.route.nexthops.weight",
            "0 is not in 1..=256",
        ),
        (
            r#"nexthops = [{ via = "10.0.0.2", weight = 257 }]"#,
            "vr.route.nexthops.weight",
            "257 is not in 1..=256",
        ),
        (
            r#"nexthops = [{ via = "10.0.0.2" }, { via = "10.9.9.9" }]"#,
            "vr.route.nexthops.via",
            "10.9.9.9 is not inside any vif's prefix",
        ),
        (
            r#"nexthops = [{ via = "10.0.0.2", vif = "b" }]"#,
            "vr.route.nexthops.via",
            "outside every prefix of vif \"b\"",
        ),
        (
            r#"nexthops = [{ via = "10.0.0.2" }, { via = "10.0.0.2", weight = 2 }]"#,
            "vr.route.nexthops.via",
            "10.0.0.2 is named twice",
        ),
        (
            r#"nexthops = [{ via = "fd00::2" }]"#,
            "vr.route.nexthops.via",
            "fd00::2 is not of the family of 203.0.113.0/24",
        ),
        (
            r#"nexthops = [{ via = "10.0.0.2", vif = "z" }]"#,
            "vr.route.nexthops.vif",
            "VR \"blue\" has no vif \"z\"",
        ),
        (
            r#"nexthops = []"#,
            "vr.route.nexthops",
            "0 next hops: a route takes 1 to 64",
        ),
    ] {
        let e = err(&route_with("203.0.113.0/24", body));
        assert_eq!((e.field.as_str(), e.line), (field, line), "{body}: {e}");
        assert!(e.message.contains(says), "{body}: {e}");
    }
    // nexthops with via or type beside it, and a via of the other family.
    let e = err(&route_with(
        "203.0.113.0/24",
        "via = \"10.0.0.2\"\nnexthops = [{ via = \"10.0.1.2\" }]",
    ));
    assert_eq!((e.field.as_str(), e.line), ("vr.route", line), "{e}");
    let e = err(&route_with(
        "203.0.113.0/24",
        "type = \"blackhole\"\nnexthops = [{ via = \"10.0.1.2\" }]",
    ));
    assert_eq!((e.field.as_str(), e.line), ("vr.route.type", line), "{e}");
    let e = err(&route_with("2001:db8::/32", "via = \"10.0.0.2\""));
    assert_eq!((e.field.as_str(), e.line), ("vr.route.via", line), "{e}");
    assert!(
        e.message.contains("not of the family of 2001:db8::/32"),
        "{e}"
    );
    let e = err(&route_with(
        "203.0.113.0/24",
        r#"nexthops = [{ via = "10.0.0.2", wieght = 2 }]"#,
    ));
    assert!(e.message.contains("wieght"), "{e}");
}
