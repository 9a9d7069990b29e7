//! FRR in a VR's namespace (root, Debian's `frr`): zebra installs its routes with kernel
//! nexthop groups (`ip route … nhid N`), which the netlink sync must resolve through the
//! nexthop objects. Static ECMP routes from FRR's staticd reach the data plane, traffic
//! follows them, and a route changed in FRR (vtysh) changes in the FIB.
//!
//! The test builds its own namespaces (unique names, deleted on drop even on failure), sends
//! traffic only between them, and runs zebra and staticd as its children, killed on drop.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, ping_from, wait};
use vrhost_lab::{Netns, require_root, veth};

const DAEMONS: &str = "/usr/lib/frr";

/// Whether FRR is installed (`.ci/run` installs Debian's `frr`). Under `CI=true` its absence
/// fails the test.
fn have_frr() -> bool {
    let ok = PathBuf::from(DAEMONS).join("zebra").exists()
        && PathBuf::from(DAEMONS).join("staticd").exists()
        && Command::new("vtysh").arg("--version").output().is_ok();
    vrhost_lab::require_tool("FRR", ok, "apt-get install frr")
}

/// zebra and staticd in one namespace, with their files in a directory of their own; killed
/// on drop.
struct Frr {
    ns: String,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Frr {
    /// Start zebra, then staticd with `statics` (`ip route …` lines), in namespace `ns`.
    fn start(ns: &str, tag: &str, statics: &str) -> Frr {
        let dir = std::env::temp_dir().join(format!("{tag}-frr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The daemons drop to user `frr`: their directory must be theirs to write.
        let _ = Command::new("chown").arg("frr:frr").arg(&dir).status();
        let mut frr = Frr {
            ns: ns.to_string(),
            dir,
            children: Vec::new(),
        };
        frr.spawn("zebra", "hostname zebra\n");
        frr.wait_file("zserv.api");
        frr.spawn("staticd", &format!("hostname staticd\n{statics}"));
        frr
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn spawn(&mut self, daemon: &str, conf: &str) {
        let cf = self.path(&format!("{daemon}.conf"));
        std::fs::write(&cf, conf).unwrap();
        let log = std::fs::File::create(self.path(&format!("{daemon}.out"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .arg(PathBuf::from(DAEMONS).join(daemon))
            .arg("-f")
            .arg(&cf)
            .arg("-i")
            .arg(self.path(&format!("{daemon}.pid")))
            .arg("-z")
            .arg(self.path("zserv.api"))
            .arg("--vty_socket")
            .arg(&self.dir)
            // No vty on TCP: only the socket in `dir`.
            .args(["-P", "0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    fn wait_file(&self, name: &str) {
        let p = self.path(name);
        wait(&format!("{} to appear", p.display()), 20, || p.exists());
    }

    /// Run vtysh commands against these daemons.
    fn vtysh(&self, cmds: &[&str]) {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, "vtysh", "--vty_socket"])
            .arg(&self.dir);
        for cmd in cmds {
            c.args(["-c", cmd]);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "vtysh {cmds:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn logs(&self) -> String {
        ["zebra", "staticd"]
            .iter()
            .map(|d| {
                let t = std::fs::read_to_string(self.path(&format!("{d}.out"))).unwrap_or_default();
                format!("--- {d} ---\n{t}")
            })
            .collect()
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for c in self.children.iter_mut().rev() {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The next hops `ctl routes` shows for `prefix` in VR `vr`, sorted.
fn hops(d: &Daemon, vr: &str, prefix: &str) -> Vec<String> {
    let v = d.ctl_json(&["routes", vr, "--family", "4"]);
    let mut h: Vec<String> = v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["prefix"] == prefix)
        .flat_map(|r| r["nexthops"].as_array().unwrap().clone())
        .map(|h| h.as_str().unwrap().to_string())
        .collect();
    h.sort();
    h
}

/// ```text
///  host A ── p0 [VR x] p1 ── host B (also 203.0.113.1 and 198.51.100.1)
///  10.1.0.2    a      b     10.2.0.2
/// ```
/// FRR's staticd in VR x: 198.51.100.0/24 over both hosts (ECMP), 203.0.113.0/24 via host
/// B. zebra installs both through nexthop objects; vrhost forwards host A's pings to
/// 203.0.113.1 by the route FRR made; then FRR drops one ECMP member and the FIB follows.
#[test]
fn frr_static_routes_through_nexthop_groups_reach_the_data_plane() {
    if !require_root("FRR test") || !have_frr() {
        return;
    }
    let router = Netns::new("fr-r").unwrap();
    let prefix = router.name().to_string();
    let ha = Netns::new("fr-ha").unwrap();
    let hb = Netns::new("fr-hb").unwrap();
    veth((&ha, "eth0"), (&router, "p0"), 1).unwrap();
    veth((&hb, "eth0"), (&router, "p1"), 1).unwrap();
    ha.ip(&["addr", "add", "10.1.0.2/24", "dev", "eth0"])
        .unwrap();
    ha.ip(&["route", "add", "default", "via", "10.1.0.1"])
        .unwrap();
    hb.ip(&["addr", "add", "10.2.0.2/24", "dev", "eth0"])
        .unwrap();
    hb.ip(&["route", "add", "default", "via", "10.2.0.1"])
        .unwrap();
    hb.ip(&["addr", "add", "203.0.113.1/32", "dev", "lo"])
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
[[port]]
name = "p1"
interface = "p1"
backend = "afpacket"
[[vr]]
name = "x"
[[vr.vif]]
name = "a"
port = "p0"
mac = "02:76:05:00:00:01"
addresses = ["10.1.0.1/24"]
[[vr.vif]]
name = "b"
port = "p1"
mac = "02:76:05:00:00:02"
addresses = ["10.2.0.1/24"]
"#
    );
    let d = Daemon::start_in(&router, &prefix, &text);
    let ns = d.ctl_json(&["show", "x"])["netns"]
        .as_str()
        .unwrap()
        .to_string();
    let frr = Frr::start(
        &ns,
        &prefix,
        "ip route 198.51.100.0/24 10.1.0.2\n\
         ip route 198.51.100.0/24 10.2.0.2\n\
         ip route 203.0.113.0/24 10.2.0.2\n",
    );
    let both = vec![
        "via 10.1.0.2 dev a weight 1".to_string(),
        "via 10.2.0.2 dev b weight 1".to_string(),
    ];
    let took = wait("FRR's routes in the data plane", 60, || {
        hops(&d, "x", "198.51.100.0/24") == both
            && hops(&d, "x", "203.0.113.0/24") == ["via 10.2.0.2 dev b"]
    });
    eprintln!("FRR's static routes reached the FIB in {took:?}");
    // What the test is about: zebra put them in the kernel through nexthop objects.
    let mut vrns = Netns::adopt(&ns);
    vrns.set_keep(true);
    let out = vrns.ip(&["route", "show", "198.51.100.0/24"]).unwrap();
    let kernel = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        kernel.contains("nhid"),
        "not through a nexthop object: {kernel}"
    );
    // Host A to 203.0.113.1 (on host B) through the route FRR made, and back.
    assert!(
        ping_from(&ha, "203.0.113.1", 10) >= 9,
        "host A → 203.0.113.1"
    );
    // FRR drops one member of the ECMP route: the FIB follows.
    frr.vtysh(&["configure terminal", "no ip route 198.51.100.0/24 10.1.0.2"]);
    wait("one member left", 30, || {
        hops(&d, "x", "198.51.100.0/24") == ["via 10.2.0.2 dev b"]
    });
    // And the whole route.
    frr.vtysh(&["configure terminal", "no ip route 198.51.100.0/24 10.2.0.2"]);
    wait("route gone", 30, || {
        hops(&d, "x", "198.51.100.0/24").is_empty()
    });
    let s = d.ctl_json(&["show", "x"]);
    assert_eq!(s["state"], "up", "{s}");
}
