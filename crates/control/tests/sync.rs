//! Netlink sync against a real kernel (root): a VR's namespace is changed with `ip` and the
//! data plane's FIBs, neighbour table and VIFs must follow — including after the kernel
//! drops notifications. Each test's namespaces have unique names and are deleted when its
//! control plane drops, even when the test fails.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use vrhost_control::apply;
use vrhost_control::config::Config;
use vrhost_control::punt::ControlPlane;
use vrhost_control::sync::SyncOptions;
use vrhost_dataplane::{Dataplane, DataplaneConfig, Pool, Vr};
use vrhost_fib::{NextHop, Prefix4, Prefix6};
use vrhost_lab::{Netns, require_root};
use vrhost_wire::EthernetAddress;

static N: AtomicU32 = AtomicU32::new(0);

struct Rig {
    dp: Dataplane,
    cp: ControlPlane,
    vr: Arc<Vr>,
    ns: String,
}

const CONFIG: &str = r#"
[[port]]
name = "p0"
interface = "p0"
[[port]]
name = "p1"
interface = "p1"

[[vr]]
name = "blue"
[[vr.vif]]
name = "a"
port = "p0"
mac = "02:76:00:00:00:01"
addresses = ["10.0.0.1/24", "fd00:a::1/64"]
[[vr.vif]]
name = "b"
port = "p1"
mac = "02:76:00:00:00:02"
addresses = ["10.1.0.1/24", "fd00:b::1/64"]
[[vr.route]]
prefix = "192.0.2.0/24"
via = "10.1.0.2"
[[vr.route]]
prefix = "2001:db8:ff::/48"
via = "fd00:b::2"
[[vr.route]]
prefix = "10.99.0.0/16"
type = "blackhole"
[[vr.route]]
prefix = "198.18.0.0/15"
nexthops = [{ via = "10.0.0.2", weight = 3 }, { via = "10.1.0.2" }]
[[vr.route]]
prefix = "2001:db8:fe::/48"
nexthops = [{ via = "fd00:a::2" }, { via = "fd00:b::2", weight = 2 }]
[[vr.neighbor]]
address = "10.1.0.2"
mac = "02:76:00:00:00:22"
vif = "b"
"#;

impl Rig {
    fn new(opts: SyncOptions) -> Rig {
        let cfg = Config::parse("sync-test", CONFIG).unwrap();
        let dp = Dataplane::new(
            Pool::new(4096),
            DataplaneConfig {
                workers: 1,
                ports: vec!["p0".into(), "p1".into()],
                ..Default::default()
            },
        )
        .unwrap();
        let prefix = format!(
            "vrsync{}-{}-",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut cp = ControlPlane::new(dp.clone(), &prefix);
        cp.set_sync(Some(opts));
        let plan = &cfg.plans()[0];
        let vr = apply::add_vr(&dp, plan, &[0, 1]).unwrap();
        cp.add(plan).unwrap();
        let ns = cp.netns_name("blue");
        let rig = Rig { dp, cp, vr, ns };
        rig.wait("first dump applied", || {
            rig.cp
                .info("blue")
                .and_then(|i| i.sync)
                .is_some_and(|s| s.ready.load(Ordering::Acquire))
        });
        rig
    }

    fn netns(&self) -> Netns {
        let mut n = Netns::adopt(&self.ns);
        n.set_keep(true);
        n
    }

    fn ip(&self, args: &str) {
        let a: Vec<&str> = args.split_whitespace().collect();
        self.netns().ip(&a).unwrap();
    }

    fn wait(&self, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn r4(&self, p: &str) -> Option<Vec<NextHop>> {
        self.vr
            .fib4
            .get(&p.parse::<Prefix4>().unwrap())
            .map(|s| s.hops().to_vec())
    }

    /// The route's next hops with their weights.
    fn w4(&self, p: &str) -> Option<Vec<(NextHop, u16)>> {
        let s = self.vr.fib4.get(&p.parse::<Prefix4>().unwrap())?;
        Some(s.members().collect())
    }

    /// [`Rig::w4`] for IPv6.
    fn w6(&self, p: &str) -> Option<Vec<(NextHop, u16)>> {
        let s = self.vr.fib6.get(&p.parse::<Prefix6>().unwrap())?;
        Some(s.members().collect())
    }

    /// `net.ipv4.nexthop_compat_mode = 0` in the VR's namespace: route messages then carry
    /// a nexthop object's id alone, no next hop.
    fn nexthop_compat_off(&self) {
        let out = self
            .netns()
            .exec(&[
                "sh",
                "-c",
                "echo 0 > /proc/sys/net/ipv4/nexthop_compat_mode",
            ])
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    fn r6(&self, p: &str) -> Option<Vec<NextHop>> {
        self.vr
            .fib6
            .get(&p.parse::<Prefix6>().unwrap())
            .map(|s| s.hops().to_vec())
    }
}

fn via(a: &str, vif: u32) -> NextHop {
    NextHop::Via {
        addr: a.parse().unwrap(),
        ifindex: vif,
    }
}

#[test]
fn static_config_is_in_the_namespace_and_the_fib_agrees() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions::default());
    let out = rig.netns().ip(&["route", "show"]).unwrap();
    let routes = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        routes.contains("192.0.2.0/24 via 10.1.0.2 dev b"),
        "{routes}"
    );
    assert!(routes.contains("blackhole 10.99.0.0/16"), "{routes}");
    assert!(
        routes.contains("nexthop via 10.0.0.2 dev a weight 3"),
        "{routes}"
    );
    // What the mirror read back from the kernel, weights and all.
    assert_eq!(
        rig.w4("198.18.0.0/15"),
        Some(vec![(via("10.0.0.2", 0), 3), (via("10.1.0.2", 1), 1)])
    );
    assert_eq!(
        rig.w6("2001:db8:fe::/48"),
        Some(vec![(via("fd00:a::2", 0), 1), (via("fd00:b::2", 1), 2)])
    );
    assert_eq!(rig.r4("192.0.2.0/24"), Some(vec![via("10.1.0.2", 1)]));
    assert_eq!(rig.r6("2001:db8:ff::/48"), Some(vec![via("fd00:b::2", 1)]));
    assert_eq!(rig.r4("10.99.0.0/16"), Some(vec![NextHop::Drop]));
    assert_eq!(rig.r4("10.0.0.1/32"), Some(vec![NextHop::Local]));
    assert_eq!(
        rig.r4("10.0.0.0/24"),
        Some(vec![NextHop::Attached { ifindex: 0 }])
    );
    assert_eq!(
        rig.vr.neigh.get(1, "10.1.0.2".parse().unwrap()),
        Some(EthernetAddress([2, 0x76, 0, 0, 0, 0x22]))
    );
    let s = rig.cp.info("blue").unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

#[test]
fn ip_route_and_neigh_in_the_namespace_reach_the_data_plane() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions::default());
    rig.ip("route add 198.51.100.0/24 via 10.0.0.2");
    rig.wait("v4 route", || {
        rig.r4("198.51.100.0/24") == Some(vec![via("10.0.0.2", 0)])
    });
    rig.ip("route add 203.0.113.0/24 nexthop via 10.0.0.2 nexthop via 10.1.0.2");
    rig.wait("v4 ECMP", || {
        rig.r4("203.0.113.0/24") == Some(vec![via("10.0.0.2", 0), via("10.1.0.2", 1)])
    });
    rig.ip(
        "route add 203.0.114.0/24 nexthop via 10.0.0.2 weight 3 nexthop via 10.1.0.2 weight 256",
    );
    rig.wait("v4 weighted ECMP", || {
        rig.w4("203.0.114.0/24") == Some(vec![(via("10.0.0.2", 0), 3), (via("10.1.0.2", 1), 256)])
    });
    rig.ip("-6 route add 2001:db8:3::/48 nexthop via fd00:a::2 dev a weight 5 nexthop via fd00:b::2 dev b");
    rig.wait("v6 weighted ECMP", || {
        rig.w6("2001:db8:3::/48") == Some(vec![(via("fd00:a::2", 0), 5), (via("fd00:b::2", 1), 1)])
    });
    rig.ip("-6 route add 2001:db8:1::/48 nexthop via fd00:a::2 dev a nexthop via fd00:b::2 dev b");
    rig.wait("v6 ECMP", || {
        rig.r6("2001:db8:1::/48") == Some(vec![via("fd00:a::2", 0), via("fd00:b::2", 1)])
    });
    rig.ip("-6 route del 2001:db8:1::/48 via fd00:a::2 dev a");
    rig.wait("v6 sibling gone", || {
        rig.r6("2001:db8:1::/48") == Some(vec![via("fd00:b::2", 1)])
    });
    rig.ip("route add unreachable 10.50.0.0/16");
    rig.ip("-6 route add prohibit 2001:db8:2::/48");
    rig.wait("special routes", || {
        rig.r4("10.50.0.0/16") == Some(vec![NextHop::Unreachable])
            && rig.r6("2001:db8:2::/48") == Some(vec![NextHop::Prohibit])
    });
    rig.ip("route replace default via 10.1.0.2");
    rig.wait("default", || {
        rig.r4("0.0.0.0/0") == Some(vec![via("10.1.0.2", 1)])
    });
    rig.ip("route del 198.51.100.0/24");
    rig.wait("v4 route gone", || rig.r4("198.51.100.0/24").is_none());

    // Addresses added in the namespace become local, their subnets attached.
    rig.ip("addr add 10.7.0.1/24 dev a");
    rig.wait("new address", || {
        rig.r4("10.7.0.1/32") == Some(vec![NextHop::Local])
            && rig.r4("10.7.0.0/24") == Some(vec![NextHop::Attached { ifindex: 0 }])
    });
    rig.ip("addr del 10.7.0.1/24 dev a");
    rig.wait("address gone", || {
        rig.r4("10.7.0.1/32").is_none() && rig.r4("10.7.0.0/24").is_none()
    });

    let mac = EthernetAddress([2, 0, 0, 0, 0, 7]);
    let n: IpAddr = "10.0.0.7".parse().unwrap();
    rig.ip("neigh add 10.0.0.7 lladdr 02:00:00:00:00:07 dev a");
    rig.wait("neighbour", || rig.vr.neigh.get(0, n) == Some(mac));
    rig.ip("neigh del 10.0.0.7 dev a");
    rig.wait("neighbour gone", || rig.vr.neigh.get(0, n).is_none());

    // MTU of a tap follows to the VIF.
    rig.ip("link set dev a mtu 1400");
    rig.wait("mtu", || {
        rig.dp
            .vif("blue", "a")
            .is_some_and(|v| v.config.mtu == 1400)
    });
    let s = rig.cp.info("blue").unwrap();
    let st = s.sync.unwrap();
    assert_eq!(st.overruns.load(Ordering::Relaxed), 0);
    assert!(st.route_updates.load(Ordering::Relaxed) >= 10);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

/// Nexthop objects (`ip nexthop`, what FRR installs its routes with): routes through them
/// reach the FIB and follow every change the kernel makes to them without a route message —
/// an object replaced, a group reweighted or shrunk, an object deleted, a tap taken down.
/// Once with `nexthop_compat_mode` on (the kernel's default: route messages also expand the
/// next hops) and once off (they carry only the id).
fn nexthop_objects_are_followed(compat: bool) {
    let rig = Rig::new(SyncOptions::default());
    if !compat {
        rig.nexthop_compat_off();
    }
    rig.ip("nexthop add id 1 via 10.0.0.2 dev a");
    rig.ip("nexthop add id 2 via 10.1.0.2 dev b");
    rig.ip("nexthop add id 3 via fd00:b::2 dev b");
    rig.ip("nexthop add id 5 blackhole");
    rig.ip("nexthop add id 10 group 1,3/2");
    rig.ip("route add 203.0.113.0/24 nhid 10");
    rig.ip("route add 198.51.100.0/24 nhid 1");
    rig.ip("route add 10.98.0.0/16 nhid 5");
    rig.ip("-6 route add 2001:db8:7::/48 nhid 3");
    rig.wait("routes through objects", || {
        rig.w4("203.0.113.0/24") == Some(vec![(via("10.0.0.2", 0), 3), (via("10.1.0.2", 1), 1)])
            && rig.r4("198.51.100.0/24") == Some(vec![via("10.0.0.2", 0)])
            && rig.r4("10.98.0.0/16") == Some(vec![NextHop::Drop])
            && rig.r6("2001:db8:7::/48") == Some(vec![via("fd00:b::2", 1)])
    });
    rig.ip("nexthop replace id 1 via 10.0.0.3 dev a");
    rig.wait("object replaced", || {
        rig.w4("203.0.113.0/24") == Some(vec![(via("10.0.0.3", 0), 3), (via("10.1.0.2", 1), 1)])
            && rig.r4("198.51.100.0/24") == Some(vec![via("10.0.0.3", 0)])
    });
    rig.ip("nexthop replace id 10 group 1/2,5");
    rig.wait("group reweighted", || {
        rig.w4("203.0.113.0/24") == Some(vec![(via("10.0.0.3", 0), 1), (via("10.1.0.2", 1), 5)])
    });
    rig.ip("nexthop del id 2");
    rig.wait("group shrunk", || {
        rig.w4("203.0.113.0/24") == Some(vec![(via("10.0.0.3", 0), 1)])
    });
    rig.ip("nexthop del id 3");
    rig.wait("its route gone", || rig.r6("2001:db8:7::/48").is_none());
    // A tap taken down: the kernel deletes the objects through it, and their routes.
    rig.ip("link set dev a down");
    rig.wait("routes through a's objects gone", || {
        rig.r4("203.0.113.0/24").is_none() && rig.r4("198.51.100.0/24").is_none()
    });
    assert_eq!(rig.r4("10.98.0.0/16"), Some(vec![NextHop::Drop]));
    let s = rig.cp.info("blue").unwrap();
    let st = s.sync.unwrap();
    // Left: the blackhole (1 and 10 went with tap a, 2 and 3 were deleted).
    rig.wait("one object left", || {
        st.nexthop_objects.load(Ordering::Relaxed) == 1
    });
    assert_eq!(st.bad_messages.load(Ordering::Relaxed), 0);
    assert_eq!(st.overruns.load(Ordering::Relaxed), 0);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

#[test]
fn nexthop_objects_are_followed_in_compat_mode() {
    if !require_root("netlink sync test") {
        return;
    }
    nexthop_objects_are_followed(true);
}

#[test]
fn nexthop_objects_are_followed_without_compat_mode() {
    if !require_root("netlink sync test") {
        return;
    }
    nexthop_objects_are_followed(false);
}

#[test]
fn bad_input_is_reported_and_counted_never_a_crash() {
    if !require_root("netlink sync test") {
        return;
    }
    let mut rig = Rig::new(SyncOptions::default());
    // A route through an interface that is no VIF (`lo`): counted, not installed.
    rig.ip("route add 10.60.0.0/16 dev lo");
    rig.wait("unusable counted", || {
        rig.cp
            .info("blue")
            .and_then(|i| i.sync)
            .is_some_and(|s| s.unusable_routes.load(Ordering::Relaxed) == 1)
    });
    assert_eq!(rig.r4("10.60.0.0/16"), None);
    rig.ip("route del 10.60.0.0/16 dev lo");
    rig.wait("unusable gone", || {
        rig.cp
            .info("blue")
            .and_then(|i| i.sync)
            .is_some_and(|s| s.unusable_routes.load(Ordering::Relaxed) == 0)
    });
    // A tap deleted by hand: the VR is degraded; its routes and neighbours go.
    rig.ip("link del dev b");
    rig.wait("degraded for the tap", || {
        rig.cp
            .info("blue")
            .is_some_and(|i| i.problems.iter().any(|p| p.contains("tap \"b\"")))
    });
    rig.wait("routes via b gone", || rig.r4("192.0.2.0/24").is_none());
    assert!(rig.vr.neigh.get(1, "10.1.0.2".parse().unwrap()).is_none());
    assert_eq!(rig.r4("10.0.0.1/32"), Some(vec![NextHop::Local]));
    // The namespace deleted from outside (`ip netns del`): degraded, nothing else breaks.
    vrhost_lab::ip(&["netns", "del", &rig.ns]).unwrap();
    rig.cp.check();
    let i = rig.cp.info("blue").unwrap();
    assert!(
        i.problems
            .iter()
            .any(|p| p.contains("deleted from outside")),
        "{:?}",
        i.problems
    );
    // The punt/inject loop goes on (whatever the namespace kernel still sends).
    rig.cp.poll();
    rig.cp.remove("blue");
}

/// All of the main table as `ip -j route` shows it, as (prefix, next hops) in the FIB's terms.
/// The kernel's IPv4 main table: each route's next hops with their weights.
fn kernel_table(rig: &Rig) -> Vec<(Prefix4, Vec<(NextHop, u16)>)> {
    let out = rig
        .netns()
        .ip(&["-j", "-4", "route", "show", "table", "main"])
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vif = |d: &serde_json::Value| if d == "a" { 0 } else { 1 };
    let hop = |r: &serde_json::Value| match (r["type"].as_str(), r["gateway"].as_str()) {
        (Some("blackhole"), _) => NextHop::Drop,
        (_, Some(g)) => via(g, vif(&r["dev"])),
        (_, None) => NextHop::Attached {
            ifindex: vif(&r["dev"]),
        },
    };
    let mut t: Vec<(Prefix4, Vec<(NextHop, u16)>)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let dst = r["dst"].as_str().unwrap();
            let p: Prefix4 = if dst == "default" {
                "0.0.0.0/0".parse().unwrap()
            } else {
                dst.parse().unwrap()
            };
            let hops = match r["nexthops"].as_array() {
                Some(nhs) => nhs
                    .iter()
                    .map(|nh| (hop(nh), nh["weight"].as_u64().unwrap() as u16))
                    .collect(),
                None => vec![(hop(r), 1)],
            };
            (p, hops)
        })
        .collect();
    t.sort_by_key(|e| e.0);
    t
}

fn fib_table(rig: &Rig) -> Vec<(Prefix4, Vec<(NextHop, u16)>)> {
    rig.vr
        .fib4
        .routes()
        .into_iter()
        .filter(|(_, s)| s.hops() != [NextHop::Local])
        .map(|(p, s)| (p, s.members().collect()))
        .collect()
}

#[test]
fn overrun_ends_in_a_resync_and_the_fib_equals_the_kernel() {
    if !require_root("netlink sync test") {
        return;
    }
    // A tiny receive buffer, so a burst overruns it for sure.
    let rig = Rig::new(SyncOptions {
        rcvbuf: 4096,
        ..SyncOptions::default()
    });
    // 100,000 route changes: 60,000 adds, 20,000 deletes, 20,000 replaces.
    let p = |i: u32| format!("{}.{}.{}.0/24", 100 + i / 65536, (i / 256) % 256, i % 256);
    let mut lines = Vec::new();
    for i in 0..60_000 {
        lines.push(format!("route add {} via 10.0.0.2", p(i)));
    }
    for i in 0..20_000 {
        lines.push(format!("route del {}", p(i)));
    }
    for i in 20_000..40_000 {
        lines.push(format!("route replace {} via 10.1.0.2", p(i)));
    }
    rig.netns().ip_batch(&lines).unwrap();
    let st = rig.cp.info("blue").unwrap().sync.unwrap();
    rig.wait("an overrun and a resync", || {
        st.overruns.load(Ordering::Relaxed) >= 1 && st.resyncs.load(Ordering::Relaxed) >= 1
    });
    let kernel = kernel_table(&rig);
    assert!(kernel.len() > 40_000, "{}", kernel.len());
    rig.wait("FIB equal to the kernel's table", || {
        fib_table(&rig) == kernel
    });
    assert_eq!(st.unusable_routes.load(Ordering::Relaxed), 0);
}

/// A resync after an overrun dumps the nexthop objects before the routes, so routes that
/// carry only an object's id (`nexthop_compat_mode` off) come back right: 20,000 routes
/// through a group whose member is replaced in the same burst.
#[test]
fn overrun_resync_resolves_routes_through_nexthop_objects() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions {
        rcvbuf: 4096,
        ..SyncOptions::default()
    });
    rig.nexthop_compat_off();
    let p = |i: u32| format!("{}.{}.{}.0/24", 100 + i / 65536, (i / 256) % 256, i % 256);
    let mut lines = vec![
        "nexthop add id 1 via 10.0.0.2 dev a".to_string(),
        "nexthop add id 2 via 10.1.0.2 dev b".to_string(),
        "nexthop add id 10 group 1,2/2,3".to_string(),
    ];
    for i in 0..20_000 {
        lines.push(format!("route add {} nhid 10", p(i)));
    }
    lines.push("nexthop replace id 1 via 10.0.0.3 dev a".to_string());
    rig.netns().ip_batch(&lines).unwrap();
    let st = rig.cp.info("blue").unwrap().sync.unwrap();
    rig.wait("an overrun and a resync", || {
        st.overruns.load(Ordering::Relaxed) >= 1 && st.resyncs.load(Ordering::Relaxed) >= 1
    });
    let want = vec![(via("10.0.0.3", 0), 2), (via("10.1.0.2", 1), 3)];
    rig.wait("every route through the replaced group", || {
        (0..20_000).all(|i| rig.w4(&p(i)).as_ref() == Some(&want))
    });
    assert_eq!(st.unusable_routes.load(Ordering::Relaxed), 0);
}

/// A resilient nexthop group (`type resilient buckets N`) reaches the FIB as a bucket table,
/// and when the kernel drops a member from it only that member's buckets change hands.
#[test]
fn resilient_nexthop_groups_move_only_the_flows_they_must() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions::default());
    rig.ip("nexthop add id 1 via 10.0.0.2 dev a");
    rig.ip("nexthop add id 2 via 10.1.0.2 dev b");
    rig.ip("nexthop add id 3 via 10.0.0.3 dev a");
    rig.ip("nexthop add id 20 group 1/2/3 type resilient buckets 48");
    rig.ip("route add 203.0.113.0/24 nhid 20");
    let paths = || -> Option<Vec<NextHop>> {
        let s = rig
            .vr
            .fib4
            .get(&"203.0.113.0/24".parse::<Prefix4>().unwrap())?;
        Some(
            (0..s.shares())
                .map(|b| s.hops()[s.member_of_share(b)])
                .collect(),
        )
    };
    rig.wait("the group's 48 buckets", || {
        paths().is_some_and(|p| p.len() == 48 && p.contains(&via("10.0.0.3", 0)))
    });
    let before = paths().unwrap();
    for h in [via("10.0.0.2", 0), via("10.1.0.2", 1), via("10.0.0.3", 0)] {
        assert_eq!(before.iter().filter(|x| **x == h).count(), 16, "{h:?}");
    }
    rig.ip("nexthop del id 3");
    rig.wait("member 3 out", || {
        paths().is_some_and(|p| !p.contains(&via("10.0.0.3", 0)))
    });
    let after = paths().unwrap();
    for (b, (was, now)) in before.iter().zip(&after).enumerate() {
        assert!(
            *was == via("10.0.0.3", 0) || was == now,
            "bucket {b}: {was:?} → {now:?}"
        );
    }
    assert_eq!(
        after.iter().filter(|x| **x == via("10.0.0.2", 0)).count(),
        24
    );
}

/// A tap taken down and up again: the kernel deletes the IPv4 routes through it without a
/// message (and IPv6's with one) and does not bring them back; nor may the FIB. A multipath
/// route with a member elsewhere stays, that member alone while the tap is down.
#[test]
fn a_tap_flap_loses_the_routes_through_it_as_the_kernel_does() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions::default());
    rig.ip("route add 198.51.100.0/24 via 10.0.0.2");
    rig.ip("route add 203.0.113.0/24 nexthop via 10.0.0.2 nexthop via 10.1.0.2");
    rig.ip("-6 route add 2001:db8:9::/48 via fd00:a::2");
    rig.wait("routes via a", || {
        rig.r4("198.51.100.0/24") == Some(vec![via("10.0.0.2", 0)])
            && rig.r4("203.0.113.0/24").is_some_and(|h| h.len() == 2)
            && rig.r6("2001:db8:9::/48") == Some(vec![via("fd00:a::2", 0)])
    });
    rig.ip("link set dev a down");
    rig.wait("a's routes gone", || {
        rig.r4("198.51.100.0/24").is_none()
            && rig.r6("2001:db8:9::/48").is_none()
            && rig.r4("203.0.113.0/24") == Some(vec![via("10.1.0.2", 1)])
    });
    rig.ip("link set dev a up");
    // The kernel announces a's subnet route again: the mirror has seen the link come up.
    rig.wait("a's subnet back", || {
        rig.r4("10.0.0.0/24") == Some(vec![NextHop::Attached { ifindex: 0 }])
    });
    let out = rig
        .netns()
        .ip(&["route", "show", "198.51.100.0/24"])
        .unwrap();
    assert!(out.stdout.is_empty(), "the kernel kept it?");
    assert_eq!(rig.r4("198.51.100.0/24"), None, "the FIB brought it back");
    assert_eq!(rig.r6("2001:db8:9::/48"), None);
    // The multipath route's member through a is back with it.
    rig.wait("the multipath route whole again", || {
        rig.r4("203.0.113.0/24").is_some_and(|h| h.len() == 2)
    });
}

/// A tap's last IPv4 address deleted: the kernel takes IPv4 down on it and deletes the IPv4
/// routes through it without a message (seen with `ip monitor` on 6.18), the config's too;
/// the FIB must lose them, and not get them back with the address.
#[test]
fn a_taps_last_ipv4_address_gone_takes_its_routes() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions::default());
    rig.ip("route add 198.51.102.0/24 via 10.1.0.2");
    rig.wait("the route via b", || {
        rig.r4("198.51.102.0/24") == Some(vec![via("10.1.0.2", 1)])
    });
    assert_eq!(rig.r4("192.0.2.0/24"), Some(vec![via("10.1.0.2", 1)]));
    rig.ip("addr del 10.1.0.1/24 dev b");
    rig.wait("b's IPv4 routes gone", || {
        rig.r4("198.51.102.0/24").is_none() && rig.r4("192.0.2.0/24").is_none()
    });
    rig.ip("addr add 10.1.0.1/24 dev b");
    rig.wait("b's subnet back", || {
        rig.r4("10.1.0.0/24") == Some(vec![NextHop::Attached { ifindex: 1 }])
    });
    let out = rig
        .netns()
        .ip(&["route", "show", "198.51.102.0/24"])
        .unwrap();
    assert!(out.stdout.is_empty(), "the kernel kept it?");
    assert_eq!(rig.r4("198.51.102.0/24"), None);
    assert_eq!(rig.r4("192.0.2.0/24"), None);
    // IPv6 on b is untouched.
    assert_eq!(rig.r6("2001:db8:ff::/48"), Some(vec![via("fd00:b::2", 1)]));
}

/// A link in the namespace that loses its carrier (a veth whose peer goes down): the kernel
/// deletes the nexthop objects through it without a message; the mirror's count follows.
#[test]
fn a_lost_carrier_takes_the_nexthop_objects_through_it() {
    if !require_root("netlink sync test") {
        return;
    }
    let rig = Rig::new(SyncOptions::default());
    rig.ip("link add name x type veth peer name x2");
    rig.ip("link set dev x up");
    rig.ip("link set dev x2 up");
    rig.ip("addr add 10.8.0.1/24 dev x");
    let st = rig.cp.info("blue").unwrap().sync.unwrap();
    let objects = || st.nexthop_objects.load(Ordering::Relaxed);
    // Wait for the carrier (veth is up once both ends are) before the object needs it.
    rig.wait("x has a carrier", || {
        let out = rig.netns().ip(&["link", "show", "dev", "x"]).unwrap();
        String::from_utf8_lossy(&out.stdout).contains("LOWER_UP")
    });
    rig.ip("nexthop add id 7 via 10.8.0.2 dev x");
    rig.ip("nexthop add id 8 via 10.1.0.2 dev b");
    rig.wait("two objects", || objects() == 2);
    rig.ip("link set dev x2 down");
    rig.wait("x's object gone", || objects() == 1);
    let out = rig.netns().ip(&["nexthop"]).unwrap();
    let kernel = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        !kernel.contains("id 7 ") && kernel.contains("id 8 "),
        "{kernel}"
    );
}
