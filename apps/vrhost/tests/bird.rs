//! Real routing daemons in the VRs' namespaces (root, BIRD 2): OSPF between two VRs that
//! meet through vrhost ports, and a BGP feed of 100,000 IPv4 and 20,000 IPv6 prefixes from
//! a BIRD outside. Routes reach the data plane only through the netlink sync.
//!
//! Each test builds its own namespaces (unique names, deleted on drop even on failure) and
//! sends traffic only between them. BIRD runs in the foreground as a child of the test and
//! is killed on drop.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, ping_from, wait, wait_explained};
use vrhost_lab::{Netns, offload, require_root, veth};

/// Whether BIRD 2 is installed (`.ci/run` installs Debian's `bird2`). Under `CI=true` its
/// absence fails the test.
fn have_bird() -> bool {
    let ok = Command::new("bird")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("BIRD version 2"));
    vrhost_lab::require_tool("BIRD 2", ok, "apt-get install bird2")
}

/// A BIRD running in a namespace, killed on drop.
struct Bird {
    child: Child,
    files: Vec<PathBuf>,
}

impl Bird {
    fn start(ns: &str, tag: &str, conf: &str) -> Bird {
        let base = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let (cf, sock, log) = (
            base.with_extension("conf"),
            base.with_extension("ctl"),
            base.with_extension("log"),
        );
        std::fs::write(&cf, conf).unwrap();
        let logf = std::fs::File::create(&log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "bird", "-f", "-c"])
            .arg(&cf)
            .arg("-s")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .unwrap();
        Bird {
            child,
            files: vec![cf, sock, log],
        }
    }

    fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; SIGTERM makes BIRD shut down its sessions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.files[2]).unwrap_or_default()
    }
}

impl Drop for Bird {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- bird log ---\n{}", self.log());
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn has_route(d: &Daemon, vr: &str, prefix: &str, hop: &str) -> bool {
    d.ctl_json(&["routes", vr, "--family", "4"])["routes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| {
            r["prefix"] == prefix && r["nexthops"].as_array().unwrap().iter().any(|h| h == hop)
        })
}

fn vr_routes(d: &Daemon, vr: &str) -> (u64, u64) {
    let v = d.ctl_json(&["vrs"]);
    let r = v["vrs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == vr)
        .unwrap()
        .clone();
    (
        r["routes4"].as_u64().unwrap(),
        r["routes6"].as_u64().unwrap(),
    )
}

/// Host `ns` with address `addr` on `eth0` and a default route via `gw`.
fn host(ns: &Netns, addr: &str, gw: &str) {
    ns.ip(&["addr", "add", addr, "dev", "eth0"]).unwrap();
    ns.ip(&["route", "add", "default", "via", gw]).unwrap();
}

fn ospf_conf(id: &str, stub: &str) -> String {
    format!(
        r#"
router id {id};
protocol device {{ scan time 1; }}
protocol kernel {{ ipv4 {{ import none; export all; }}; learn off; scan time 2; }}
protocol ospf v2 {{
  ipv4 {{ import all; export none; }};
  area 0 {{
    interface "t" {{ type broadcast; hello 1; wait 2; dead 4; }};
    interface "{stub}" {{ stub yes; }};
  }};
}}
"#
    )
}

/// ```text
///  host A ── p0 [VR x] p1 ═══ veth ═══ p2 [VR y] p3 ── host B
///  10.1.0.2    a      t 10.9.0.1   10.9.0.2 t      b    10.2.0.2
/// ```
/// Both VRs run in one vrhost; their `t` VIFs meet on a veth between two of its ports, where
/// BIRD in each VR's namespace speaks OSPF (multicast hellos punted, replies injected).
#[test]
fn ospf_between_two_vrs_through_vrhost_ports() {
    if !require_root("BIRD OSPF test") || !have_bird() {
        return;
    }
    let router = Netns::new("bo-r").unwrap();
    let prefix = router.name().to_string();
    let ha = Netns::new("bo-ha").unwrap();
    let hb = Netns::new("bo-hb").unwrap();
    veth((&ha, "eth0"), (&router, "p0"), 1).unwrap();
    veth((&router, "p1"), (&router, "p2"), 1).unwrap();
    veth((&hb, "eth0"), (&router, "p3"), 1).unwrap();
    host(&ha, "10.1.0.2/24", "10.1.0.1");
    host(&hb, "10.2.0.2/24", "10.2.0.1");
    let mut text =
        format!("[dataplane]\ncores = [0]\n[control]\nnetns_prefix = \"{prefix}-vr-\"\n");
    for p in ["p0", "p1", "p2", "p3"] {
        text += &format!("[[port]]\nname = \"{p}\"\ninterface = \"{p}\"\nbackend = \"afpacket\"\n");
    }
    for (vr, vifs) in [
        (
            "x",
            [
                ("a", "p0", "02:76:01:00:00:01", "10.1.0.1/24"),
                ("t", "p1", "02:76:01:00:00:02", "10.9.0.1/24"),
            ],
        ),
        (
            "y",
            [
                ("t", "p2", "02:76:02:00:00:02", "10.9.0.2/24"),
                ("b", "p3", "02:76:02:00:00:01", "10.2.0.1/24"),
            ],
        ),
    ] {
        text += &format!("[[vr]]\nname = \"{vr}\"\n");
        for (name, port, mac, addr) in vifs {
            text += &format!(
                "[[vr.vif]]\nname = \"{name}\"\nport = \"{port}\"\nmac = \"{mac}\"\naddresses = [\"{addr}\"]\n"
            );
        }
    }
    let d = Daemon::start_in(&router, &prefix, &text);
    let ns_of = |vr: &str| {
        d.ctl_json(&["show", vr])["netns"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let _bx = Bird::start(
        &ns_of("x"),
        &format!("{prefix}-bird-x"),
        &ospf_conf("10.9.0.1", "a"),
    );
    let _by = Bird::start(
        &ns_of("y"),
        &format!("{prefix}-bird-y"),
        &ospf_conf("10.9.0.2", "b"),
    );
    let took = wait("OSPF routes in both VRs' data planes", 90, || {
        has_route(&d, "x", "10.2.0.0/24", "via 10.9.0.2 dev t")
            && has_route(&d, "y", "10.1.0.0/24", "via 10.9.0.1 dev t")
    });
    eprintln!("OSPF converged into the data plane in {took:?}");
    // Host to host through both VRs' data planes (neighbours resolved through the
    // namespaces on the way).
    assert!(ping_from(&ha, "10.2.0.2", 10) >= 9, "host A → host B");
    assert!(ping_from(&hb, "10.1.0.2", 10) >= 9, "host B → host A");
    let text = String::from_utf8_lossy(&d.ctl(&["routes", "x"]).stdout).to_string();
    assert!(
        text.contains("10.2.0.0/24") && text.contains("via 10.9.0.2 dev t"),
        "{text}"
    );
    for vr in ["x", "y"] {
        let s = d.ctl_json(&["show", vr]);
        assert_eq!(s["state"], "up", "{s}");
        assert!(s["counters"]["tx_packets"].as_u64().unwrap() >= 18, "{s}");
    }
}

/// BIRD outside (namespace `o`) feeds 100,000 IPv4 and 20,000 IPv6 prefixes over eBGP to the
/// BIRD inside VR `z`; all of them must reach vrhost's FIB, and go when the feed stops.
#[test]
fn bgp_full_feed_reaches_the_fib_and_is_withdrawn() {
    if !require_root("BIRD BGP test") || !have_bird() {
        return;
    }
    const V4: u32 = 100_000;
    const V6: u32 = 20_000;
    let router = Netns::new("bb-r").unwrap();
    let prefix = router.name().to_string();
    let outside = Netns::new("bb-o").unwrap();
    veth((&outside, "eth0"), (&router, "p0"), 1).unwrap();
    // Wire-like frames both ways (see `vrhost_lab::offload`): with TSO/GSO left on, the
    // outside BIRD's TCP segments reach the packet socket as 64 KB super-frames, which the
    // port drops (`oversize`), and the session crawls through retransmissions — 15 s to
    // over 400 s for the feed, by luck.
    for (ns, dev) in [(&outside, "eth0"), (&router, "p0")] {
        let state = ns.run(|| offload::disable(dev)).unwrap().unwrap();
        assert!(state.all_off(), "{dev} in {}: {state:?}", ns.name());
    }
    outside
        .ip(&["addr", "add", "10.3.0.2/24", "dev", "eth0"])
        .unwrap();
    outside
        .ip(&["addr", "add", "fd00:3::2/64", "dev", "eth0", "nodad"])
        .unwrap();
    let text = format!(
        r#"[dataplane]
cores = [0]
[control]
netns_prefix = "{prefix}-vr-"
[[port]]
name = "p0"
interface = "p0"
backend = "afpacket"
[[vr]]
name = "z"
[[vr.vif]]
name = "a"
port = "p0"
mac = "02:76:03:00:00:01"
addresses = ["10.3.0.1/24", "fd00:3::1/64"]
"#
    );
    let d = Daemon::start_in(&router, &prefix, &text);
    let base = vr_routes(&d, "z");
    let ns = d.ctl_json(&["show", "z"])["netns"]
        .as_str()
        .unwrap()
        .to_string();
    let inside = r#"
router id 10.3.0.1;
protocol device { scan time 1; }
protocol kernel { ipv4 { import none; export all; }; learn off; }
protocol kernel { ipv6 { import none; export all; }; learn off; }
protocol bgp up4 {
  local 10.3.0.1 as 65002; neighbor 10.3.0.2 as 65001;
  hold time 90; keepalive time 30; connect retry time 1;
  ipv4 { import all; export none; };
}
protocol bgp up6 {
  local fd00:3::1 as 65002; neighbor fd00:3::2 as 65001;
  hold time 90; keepalive time 30; connect retry time 1;
  ipv6 { import all; export none; };
}
"#;
    let mut feed = String::from(
        "router id 10.3.0.2;\nprotocol device { scan time 1; }\nprotocol static s4 {\n  ipv4;\n",
    );
    for i in 0..V4 {
        feed += &format!(
            "  route {}.{}.{}.0/24 blackhole;\n",
            100 + i / 65536,
            (i / 256) % 256,
            i % 256
        );
    }
    feed += "}\nprotocol static s6 {\n  ipv6;\n";
    for i in 0..V6 {
        feed += &format!("  route 2001:db8:{:x}::/48 blackhole;\n", i);
    }
    feed += r#"}
protocol bgp down4 {
  local 10.3.0.2 as 65001; neighbor 10.3.0.1 as 65002;
  hold time 90; keepalive time 30; connect retry time 1;
  ipv4 { import none; export all; };
}
protocol bgp down6 {
  local fd00:3::2 as 65001; neighbor fd00:3::1 as 65002;
  hold time 90; keepalive time 30; connect retry time 1;
  ipv6 { import none; export all; };
}
"#;
    let _inside = Bird::start(&ns, &format!("{prefix}-bird-in"), inside);
    let mut out = Bird::start(outside.name(), &format!("{prefix}-bird-out"), &feed);
    let took = wait_explained(
        "the whole feed in the FIB",
        180,
        || {
            let (r4, r6) = vr_routes(&d, "z");
            r4 >= base.0 + u64::from(V4) && r6 >= base.1 + u64::from(V6)
        },
        || {
            format!(
                "routes now {:?} (base {base:?})\nstatus: {}\nVR: {}",
                vr_routes(&d, "z"),
                d.ctl_json(&["status"]),
                d.ctl_json(&["show", "z"])
            )
        },
    );
    eprintln!("100k IPv4 + 20k IPv6 BGP routes in the FIB {took:?} after the feed started");
    assert!(has_route(&d, "z", "100.1.134.0/24", "via 10.3.0.2 dev a"));
    let s = d.ctl_json(&["show", "z"]);
    assert_eq!(s["sync"]["unusable_routes"], 0, "{s}");
    // The data plane holds what the namespace's kernel holds: its main table plus the
    // local routes of the VR's addresses (10.3.0.1, 10.3.0.255; fd00:3::1 and the tap's
    // link-local address, and their subnet-router anycast addresses fd00:3:: and fe80::).
    let k = &s["sync"];
    let (r4, r6) = vr_routes(&d, "z");
    assert_eq!(
        (k["kernel_routes4"].as_u64(), k["kernel_routes6"].as_u64()),
        (Some(r4 - 2), Some(r6 - 4)),
        "{s}"
    );
    // The feed stops (BIRD's shutdown ends the sessions with a Cease): every route goes.
    out.stop();
    let took = wait("the feed withdrawn from the FIB", 120, || {
        let (r4, r6) = vr_routes(&d, "z");
        // What is left: the subnet and local routes of the VR's own addresses.
        r4 <= base.0 && r6 <= base.1 + 1
    });
    eprintln!("withdrawn from the FIB {took:?} after the outside BIRD stopped");
}
