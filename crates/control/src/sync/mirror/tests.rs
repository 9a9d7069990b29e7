//! The mirror fed with events shaped as the kernel sends them (the sequences were taken from
//! `ip monitor route` on kernel 6.18: IPv6 multipath siblings are announced as the whole set
//! and deleted one next hop at a time; IPv4 `append` adds a second route of the same metric).

use std::net::IpAddr;
use std::sync::Arc;

use vrhost_dataplane::{
    Dataplane, DataplaneConfig, IfAddr, IpPrefix, Pool, VifConfig, Vr, VrConfig,
};
use vrhost_fib::{NextHop, NextHopSet, Prefix4, Prefix6};
use vrhost_wire::EthernetAddress;

use super::*;

const A: u32 = 10; // tap "a" → VIF 0
const B: u32 = 11; // tap "b" → VIF 1
const LO: u32 = 1;
const DUMMY: u32 = 12;

fn vr() -> (Dataplane, Arc<Vr>) {
    let dp = Dataplane::new(
        Pool::new(1024),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p0".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let vr = dp.add_vr(VrConfig::new("blue")).unwrap();
    (dp, vr)
}

fn mirror() -> Mirror {
    let mut m = Mirror::new([("a".to_string(), 0), ("b".to_string(), 1)]);
    for (index, name) in [(LO, "lo"), (A, "a"), (B, "b"), (DUMMY, "dummy0")] {
        m.event(Event::Link {
            index,
            name: name.into(),
            up: true,
            mtu: 1500,
            carrier: true,
        });
    }
    m
}

fn p4(s: &str) -> IpPrefix {
    IpPrefix::V4(s.parse().unwrap())
}

fn p6(s: &str) -> IpPrefix {
    IpPrefix::V6(s.parse().unwrap())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn hop(gw: Option<&str>, oif: u32) -> Hop {
    Hop {
        gateway: gw.map(ip),
        oif,
        dead: false,
        weight: 1,
    }
}

fn rt(prefix: IpPrefix, metric: u32, hops: Vec<Hop>) -> RouteMsg {
    RouteMsg {
        prefix,
        table: RT_TABLE_MAIN,
        metric,
        tos: 0,
        src_len: 0,
        kind: RouteKind::Unicast,
        hops,
        nh: None,
        append: false,
        replace: false,
    }
}

fn via(a: &str, vif: u32) -> NextHop {
    NextHop::Via {
        addr: ip(a),
        ifindex: vif,
    }
}

fn get4(vr: &Vr, p: &str) -> Option<Vec<NextHop>> {
    vr.fib4
        .get(&p.parse::<Prefix4>().unwrap())
        .map(|s| s.hops().to_vec())
}

fn get6(vr: &Vr, p: &str) -> Option<Vec<NextHop>> {
    vr.fib6
        .get(&p.parse::<Prefix6>().unwrap())
        .map(|s| s.hops().to_vec())
}

#[test]
fn addresses_make_the_same_routes_as_add_vif() {
    // What the data plane installs for configured addresses …
    let (dp, reference) = vr();
    dp.add_vif(
        "blue",
        VifConfig {
            name: "a".into(),
            port: 0,
            vlan: None,
            key: Default::default(),
            mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            mtu: 1500,
            addrs: vec![
                IfAddr::V4("10.0.0.1".parse().unwrap(), 24),
                IfAddr::V6("fd00:a::1".parse().unwrap(), 64),
            ],
        },
    )
    .unwrap();
    // … equals what the mirror makes of the same addresses added in the namespace, with the
    // subnet routes the kernel puts in the main table.
    let (_dp, vr) = vr();
    let mut m = mirror();
    m.event(Event::Addr {
        deleted: false,
        index: A,
        addr: ip("10.0.0.1"),
        len: 24,
    });
    m.event(Event::Addr {
        deleted: false,
        index: A,
        addr: ip("fd00:a::1"),
        len: 64,
    });
    m.event(Event::Route(rt(p4("10.0.0.0/24"), 0, vec![hop(None, A)])));
    m.event(Event::Route(rt(p6("fd00:a::/64"), 256, vec![hop(None, A)])));
    // Link-local routes are never mirrored; loopback addresses neither.
    m.event(Event::Route(rt(p6("fe80::/64"), 256, vec![hop(None, A)])));
    m.event(Event::Addr {
        deleted: false,
        index: LO,
        addr: ip("127.0.0.1"),
        len: 8,
    });
    m.apply_all(&vr);
    assert_eq!(vr.fib4.routes(), reference.fib4.routes());
    assert_eq!(vr.fib6.routes(), reference.fib6.routes());
    assert_eq!(get4(&vr, "10.0.0.255/32"), Some(vec![NextHop::Local]));
    // The subnet-router anycast address is the router's (RFC 4291 §2.6.1).
    assert_eq!(get6(&vr, "fd00:a::/128"), Some(vec![NextHop::Local]));

    // An address added later does the same incrementally, and goes again.
    m.event(Event::Addr {
        deleted: false,
        index: B,
        addr: ip("192.0.2.1"),
        len: 32,
    });
    m.apply(&vr);
    assert_eq!(get4(&vr, "192.0.2.1/32"), Some(vec![NextHop::Local]));
    m.event(Event::Addr {
        deleted: true,
        index: B,
        addr: ip("192.0.2.1"),
        len: 32,
    });
    m.apply(&vr);
    assert_eq!(get4(&vr, "192.0.2.1/32"), None);
}

#[test]
fn lowest_metric_wins_and_the_next_takes_over_when_it_goes() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    let p = p4("198.51.100.0/24");
    m.event(Event::Route(rt(p, 200, vec![hop(Some("10.1.0.2"), B)])));
    m.event(Event::Route(rt(p, 100, vec![hop(Some("10.0.0.2"), A)])));
    m.apply(&vr);
    assert_eq!(get4(&vr, "198.51.100.0/24"), Some(vec![via("10.0.0.2", 0)]));
    m.event(Event::DelRoute(rt(p, 100, vec![hop(Some("10.0.0.2"), A)])));
    m.apply(&vr);
    assert_eq!(get4(&vr, "198.51.100.0/24"), Some(vec![via("10.1.0.2", 1)]));
    m.event(Event::DelRoute(rt(p, 200, vec![hop(Some("10.1.0.2"), B)])));
    m.apply(&vr);
    assert_eq!(get4(&vr, "198.51.100.0/24"), None);
}

#[test]
fn ipv4_append_queues_behind_and_replace_takes_the_first() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    let p = p4("203.0.113.0/24");
    m.event(Event::Route(rt(p, 0, vec![hop(Some("10.0.0.2"), A)])));
    let mut app = rt(p, 0, vec![hop(Some("10.1.0.2"), B)]);
    app.append = true;
    m.event(Event::Route(app.clone()));
    m.apply(&vr);
    assert_eq!(get4(&vr, "203.0.113.0/24"), Some(vec![via("10.0.0.2", 0)]));
    m.event(Event::DelRoute(rt(p, 0, vec![hop(Some("10.0.0.2"), A)])));
    m.apply(&vr);
    assert_eq!(get4(&vr, "203.0.113.0/24"), Some(vec![via("10.1.0.2", 1)]));
    let mut rep = rt(p, 0, vec![hop(Some("10.0.0.9"), A)]);
    rep.replace = true;
    m.event(Event::Route(rep));
    m.apply(&vr);
    assert_eq!(get4(&vr, "203.0.113.0/24"), Some(vec![via("10.0.0.9", 0)]));
}

#[test]
fn ipv6_multipath_siblings_come_whole_and_go_one_by_one() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    let p = p6("2001:db8::/32");
    m.event(Event::Route(rt(
        p,
        1024,
        vec![hop(Some("fd00::2"), A), hop(Some("fd01::2"), B)],
    )));
    m.apply(&vr);
    assert_eq!(
        get6(&vr, "2001:db8::/32"),
        Some(vec![via("fd00::2", 0), via("fd01::2", 1)])
    );
    // `ip -6 route append`: the kernel announces the whole new set.
    m.event(Event::Route(rt(
        p,
        1024,
        vec![
            hop(Some("fd00::3"), A),
            hop(Some("fd00::2"), A),
            hop(Some("fd01::2"), B),
        ],
    )));
    // Deleting one sibling names only that one.
    m.event(Event::DelRoute(rt(p, 1024, vec![hop(Some("fd00::2"), A)])));
    m.apply(&vr);
    assert_eq!(
        get6(&vr, "2001:db8::/32"),
        Some(vec![via("fd00::3", 0), via("fd01::2", 1)])
    );
    m.event(Event::DelRoute(rt(
        p,
        1024,
        vec![hop(Some("fd00::3"), A), hop(Some("fd01::2"), B)],
    )));
    m.apply(&vr);
    assert_eq!(get6(&vr, "2001:db8::/32"), None);
}

#[test]
fn special_routes_and_routes_off_the_vifs() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    for (p, kind, want) in [
        ("10.9.0.0/16", RouteKind::Blackhole, NextHop::Drop),
        ("10.10.0.0/16", RouteKind::Unreachable, NextHop::Unreachable),
        ("10.11.0.0/16", RouteKind::Prohibit, NextHop::Prohibit),
        ("10.12.0.1/32", RouteKind::Local, NextHop::Local),
    ] {
        let mut r = rt(p4(p), 0, vec![]);
        r.kind = kind;
        m.event(Event::Route(r));
        m.apply(&vr);
        assert_eq!(get4(&vr, p), Some(vec![want]), "{p}");
    }
    // Through a dummy interface: the data plane cannot, so it is left out and counted.
    m.event(Event::Route(rt(
        p4("10.20.0.0/16"),
        0,
        vec![hop(None, DUMMY)],
    )));
    let a = m.apply(&vr);
    assert_eq!(get4(&vr, "10.20.0.0/16"), None);
    assert_eq!((m.unusable(), a.new_unusable), (1, 1));
    // A multipath route with one member off the VIFs keeps the others.
    m.event(Event::Route(rt(
        p4("10.21.0.0/16"),
        0,
        vec![hop(Some("10.0.0.2"), A), hop(None, DUMMY)],
    )));
    m.apply(&vr);
    assert_eq!(get4(&vr, "10.21.0.0/16"), Some(vec![via("10.0.0.2", 0)]));
    m.event(Event::DelRoute(rt(
        p4("10.20.0.0/16"),
        0,
        vec![hop(None, DUMMY)],
    )));
    m.apply(&vr);
    assert_eq!(m.unusable(), 0);
    // Other tables, TOS routes: not mirrored.
    let mut other = rt(p4("10.30.0.0/16"), 0, vec![hop(Some("10.0.0.2"), A)]);
    other.table = 100;
    m.event(Event::Route(other));
    m.apply(&vr);
    assert_eq!(get4(&vr, "10.30.0.0/16"), None);
}

#[test]
fn a_tap_going_down_or_away_takes_its_next_hops_and_neighbours() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    m.event(Event::Route(rt(
        p4("0.0.0.0/0"),
        0,
        vec![hop(Some("10.0.0.2"), A), hop(Some("10.1.0.2"), B)],
    )));
    m.event(Event::Neigh {
        deleted: false,
        index: B,
        addr: ip("10.1.0.2"),
        mac: Some(EthernetAddress([2, 0, 0, 0, 0, 2])),
        state: NeighState::Valid,
    });
    m.apply_all(&vr);
    assert_eq!(
        vr.neigh.get(1, ip("10.1.0.2")),
        Some(EthernetAddress([2, 0, 0, 0, 0, 2]))
    );
    assert_eq!(get4(&vr, "0.0.0.0/0").unwrap().len(), 2);
    m.event(Event::Link {
        index: B,
        name: "b".into(),
        up: false,
        mtu: 1500,
        carrier: false,
    });
    m.apply(&vr);
    assert_eq!(get4(&vr, "0.0.0.0/0"), Some(vec![via("10.0.0.2", 0)]));
    m.event(Event::DelLink {
        index: B,
        name: "b".into(),
    });
    m.apply(&vr);
    assert_eq!(vr.neigh.get(1, ip("10.1.0.2")), None);
    let changes = m.take_link_changes();
    assert!(
        changes.contains(&LinkChange::TapGone {
            vif: 1,
            name: "b".into()
        }),
        "{changes:?}"
    );
}

#[test]
fn neighbours_follow_their_state() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    let mac = EthernetAddress([2, 0, 0, 0, 0, 7]);
    let n = |deleted, state, mac| Event::Neigh {
        deleted,
        index: A,
        addr: ip("10.0.0.7"),
        mac,
        state,
    };
    m.event(n(false, NeighState::Invalid, None));
    m.apply(&vr);
    assert_eq!(vr.neigh.get(0, ip("10.0.0.7")), None);
    m.event(n(false, NeighState::Valid, Some(mac)));
    m.apply(&vr);
    assert_eq!(vr.neigh.get(0, ip("10.0.0.7")), Some(mac));
    m.event(n(false, NeighState::Invalid, Some(mac)));
    m.apply(&vr);
    assert_eq!(vr.neigh.get(0, ip("10.0.0.7")), None);
    m.event(n(false, NeighState::Valid, Some(mac)));
    m.event(n(true, NeighState::Valid, Some(mac)));
    m.apply(&vr);
    assert_eq!(vr.neigh.get(0, ip("10.0.0.7")), None);
}

#[test]
fn apply_all_touches_only_what_differs_and_removes_what_the_kernel_lacks() {
    let (_dp, vr) = vr();
    vr.fib4
        .insert("172.16.0.0/12".parse().unwrap(), NextHop::Drop)
        .unwrap();
    vr.neigh
        .set(0, ip("10.0.0.99"), EthernetAddress([2, 0, 0, 0, 0, 9]));
    let mut m = mirror();
    m.event(Event::Route(rt(
        p4("10.5.0.0/16"),
        0,
        vec![hop(Some("10.0.0.2"), A)],
    )));
    let a = m.apply_all(&vr);
    assert_eq!((a.routes, a.neighbours), (2, 1));
    assert_eq!(vr.fib4.len(), 1);
    assert!(vr.neigh.entries().is_empty());
    // Nothing changed: nothing touched.
    let g = vr.fib4.generation();
    let a = m.apply_all(&vr);
    assert_eq!((a.routes, a.neighbours), (0, 0));
    assert_eq!(vr.fib4.generation(), g);
    assert_eq!(
        vr.fib4.get(&"10.5.0.0/16".parse().unwrap()),
        Some(NextHopSet::one(via("10.0.0.2", 0)))
    );
}

/// A multipath route's weights (`nexthop via … weight W`) go into the FIB's set: 3 and 1
/// give the first next hop three quarters of the flows; a member listed twice takes both
/// its shares; a dead member's weight goes with it.
#[test]
fn multipath_weights_are_mirrored() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    let set = |p: &str| vr.fib4.get(&p.parse::<Prefix4>().unwrap()).unwrap();
    let weighted = |gw: &str, oif: u32, weight: u16| Hop {
        weight,
        ..hop(Some(gw), oif)
    };
    m.event(Event::Route(rt(
        p4("203.0.113.0/24"),
        0,
        vec![weighted("10.0.0.2", A, 3), weighted("10.1.0.2", B, 1)],
    )));
    m.apply(&vr);
    let s = set("203.0.113.0/24");
    assert_eq!(s.hops(), [via("10.0.0.2", 0), via("10.1.0.2", 1)]);
    assert_eq!((s.weight(0), s.weight(1), s.shares()), (3, 1, 4));
    assert_eq!(s.select((3 << 30) - 1), &via("10.0.0.2", 0));
    assert_eq!(s.select(3 << 30), &via("10.1.0.2", 1));
    // The same next hop twice, and a dead member.
    let mut dead = weighted("10.1.0.2", B, 9);
    dead.dead = true;
    let mut rep = rt(
        p4("203.0.113.0/24"),
        0,
        vec![
            weighted("10.0.0.2", A, 2),
            weighted("10.0.0.3", A, 1),
            weighted("10.0.0.2", A, 5),
            dead,
        ],
    );
    rep.replace = true;
    m.event(Event::Route(rep));
    m.apply(&vr);
    let s = set("203.0.113.0/24");
    assert_eq!(s.hops(), [via("10.0.0.2", 0), via("10.0.0.3", 0)]);
    assert_eq!((s.weight(0), s.weight(1)), (7, 1));
}

/// A route through a nexthop object (`ip route … nhid N`) as the kernel sends it with
/// `nexthop_compat_mode` off: the id and no next hop.
fn rt_nh(prefix: IpPrefix, id: u32) -> RouteMsg {
    RouteMsg {
        nh: Some(id),
        ..rt(prefix, 0, Vec::new())
    }
}

fn weights4(vr: &Vr, p: &str) -> Option<Vec<(NextHop, u16)>> {
    let s = vr.fib4.get(&p.parse::<Prefix4>().unwrap())?;
    Some(s.members().collect())
}

/// `RTM_NEWNEXTHOP` for object `id`.
fn put(m: &mut Mirror, id: u32, def: NhDef) {
    m.event(Event::Nexthop { id, def });
}

fn one(gw: &str, oif: u32) -> NhDef {
    NhDef::One(hop(Some(gw), oif))
}

/// The sequence `ip monitor route nexthop` showed on 6.18 for groups: a route follows its
/// object when the object is replaced, a group shrinks when a member is deleted (the kernel
/// announces the group again, no route), and deleting an object takes its routes with it
/// (no route message at all).
#[test]
fn routes_follow_their_nexthop_objects() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    put(&mut m, 1, one("10.0.0.2", A));
    put(&mut m, 2, one("10.1.0.2", B));
    put(&mut m, 10, NhDef::Group(vec![(1, 3), (2, 1)]));
    m.event(Event::Route(rt_nh(p4("192.0.2.0/24"), 10)));
    m.event(Event::Route(rt_nh(p4("198.51.100.0/24"), 1)));
    m.event(Event::Route(rt_nh(p6("2001:db8:1::/48"), 10)));
    m.apply(&vr);
    assert_eq!(
        weights4(&vr, "192.0.2.0/24"),
        Some(vec![(via("10.0.0.2", 0), 3), (via("10.1.0.2", 1), 1)])
    );
    assert_eq!(get4(&vr, "198.51.100.0/24"), Some(vec![via("10.0.0.2", 0)]));
    assert_eq!(
        get6(&vr, "2001:db8:1::/48"),
        Some(vec![via("10.0.0.2", 0), via("10.1.0.2", 1)])
    );

    // `ip nexthop replace id 1 via 10.0.0.3`: both routes that use it, the group's too.
    put(&mut m, 1, one("10.0.0.3", A));
    let n = m.apply(&vr).routes;
    assert_eq!(n, 3, "the three prefixes that use object 1");
    assert_eq!(get4(&vr, "198.51.100.0/24"), Some(vec![via("10.0.0.3", 0)]));
    assert_eq!(
        weights4(&vr, "192.0.2.0/24"),
        Some(vec![(via("10.0.0.3", 0), 3), (via("10.1.0.2", 1), 1)])
    );
    // Reweighted.
    put(&mut m, 10, NhDef::Group(vec![(1, 1), (2, 5)]));
    m.apply(&vr);
    assert_eq!(
        weights4(&vr, "192.0.2.0/24"),
        Some(vec![(via("10.0.0.3", 0), 1), (via("10.1.0.2", 1), 5)])
    );

    // `ip nexthop del id 2`: the kernel deletes it and announces the group without it.
    m.event(Event::DelNexthop { id: 2 });
    put(&mut m, 10, NhDef::Group(vec![(1, 1)]));
    m.apply(&vr);
    assert_eq!(get4(&vr, "192.0.2.0/24"), Some(vec![via("10.0.0.3", 0)]));
    assert_eq!(get6(&vr, "2001:db8:1::/48"), Some(vec![via("10.0.0.3", 0)]));

    // `ip nexthop del id 1`: its routes go, and the group that held only it.
    m.event(Event::DelNexthop { id: 1 });
    m.event(Event::DelNexthop { id: 10 });
    m.apply(&vr);
    assert_eq!(get4(&vr, "198.51.100.0/24"), None);
    assert_eq!(get4(&vr, "192.0.2.0/24"), None);
    assert_eq!(get6(&vr, "2001:db8:1::/48"), None);
    assert_eq!(m.kernel_routes(), (0, 0));
    // A route delete the kernel may still send for one of them changes nothing.
    m.event(Event::DelRoute(rt_nh(p4("192.0.2.0/24"), 10)));
    assert_eq!(m.apply(&vr).routes, 0);
}

/// Blackhole objects, 16-bit group weights, members the data plane cannot use, and routes
/// that name an object the mirror never saw (then the next hops the message expands count).
#[test]
fn nexthop_objects_of_every_kind() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    put(&mut m, 5, NhDef::Blackhole);
    m.event(Event::Route(RouteMsg {
        kind: RouteKind::Blackhole,
        ..rt_nh(p4("10.99.0.0/16"), 5)
    }));
    m.apply(&vr);
    assert_eq!(get4(&vr, "10.99.0.0/16"), Some(vec![NextHop::Drop]));
    // The object becomes a next hop: the route forwards (compat mode off sends no route).
    put(&mut m, 5, one("10.1.0.9", B));
    m.apply(&vr);
    assert_eq!(get4(&vr, "10.99.0.0/16"), Some(vec![via("10.1.0.9", 1)]));

    // Weights above 256 are scaled into the FIB's range, in proportion.
    put(&mut m, 1, one("10.0.0.2", A));
    put(&mut m, 2, one("10.1.0.2", B));
    put(&mut m, 3, NhDef::Other);
    put(&mut m, 4, one("10.9.0.2", DUMMY));
    put(
        &mut m,
        20,
        NhDef::Group(vec![(1, 1024), (2, 256), (3, 7), (4, 9)]),
    );
    m.event(Event::Route(rt_nh(p4("203.0.113.0/24"), 20)));
    m.apply(&vr);
    assert_eq!(
        weights4(&vr, "203.0.113.0/24"),
        Some(vec![(via("10.0.0.2", 0), 256), (via("10.1.0.2", 1), 64)])
    );
    // A group of nothing forwardable is unusable, as a route off the VIFs is.
    put(&mut m, 21, NhDef::Group(vec![(3, 1), (4, 1)]));
    m.event(Event::Route(rt_nh(p4("203.0.114.0/24"), 21)));
    m.apply(&vr);
    assert_eq!(get4(&vr, "203.0.114.0/24"), None);
    assert_eq!(m.unusable(), 1);

    // An object not (yet) known: the route's own next hops (what compat mode expands).
    m.event(Event::Route(RouteMsg {
        hops: vec![hop(Some("10.0.0.7"), A)],
        ..rt_nh(p4("198.18.0.0/15"), 99)
    }));
    m.apply(&vr);
    assert_eq!(get4(&vr, "198.18.0.0/15"), Some(vec![via("10.0.0.7", 0)]));
    put(&mut m, 99, one("10.1.0.7", B));
    m.apply(&vr);
    assert_eq!(get4(&vr, "198.18.0.0/15"), Some(vec![via("10.1.0.7", 1)]));
}

/// With compat mode on the kernel also sends each route again, expanded, when its object is
/// replaced (`NLM_F_REPLACE`), and IPv6 deletes them with a route message: the mirror ends
/// the same, and an expanded delete that names newer next hops still takes the route.
#[test]
fn compat_mode_route_messages_agree_with_the_objects() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    put(&mut m, 1, one("fd00:a::2", A));
    m.event(Event::Route(RouteMsg {
        hops: vec![hop(Some("fd00:a::2"), A)],
        ..rt_nh(p6("2001:db8:5::/48"), 1)
    }));
    m.apply(&vr);
    put(&mut m, 1, one("fd00:b::2", B));
    m.event(Event::Route(RouteMsg {
        hops: vec![hop(Some("fd00:b::2"), B)],
        replace: true,
        ..rt_nh(p6("2001:db8:5::/48"), 1)
    }));
    m.apply(&vr);
    assert_eq!(
        get6(&vr, "2001:db8:5::/48"),
        Some(vec![via("fd00:b::2", 1)])
    );
    assert_eq!(m.kernel_routes(), (0, 1));
    m.event(Event::DelRoute(RouteMsg {
        hops: vec![hop(Some("fd00:b::2"), B)],
        ..rt_nh(p6("2001:db8:5::/48"), 1)
    }));
    m.apply(&vr);
    assert_eq!(get6(&vr, "2001:db8:5::/48"), None);
    assert_eq!(m.kernel_routes(), (0, 0));
}

/// How many buckets of `t` each of `ids` takes.
fn counts(t: &[u32], ids: &[u32]) -> Vec<usize> {
    ids.iter()
        .map(|id| t.iter().filter(|x| *x == id).count())
        .collect()
}

/// A resilient group's table: shares in proportion to the weights; a member leaving moves
/// only its buckets; one joining takes only its share; a reweighting moves only the
/// difference.
#[test]
fn rebalance_moves_only_the_buckets_it_must() {
    let t = rebalance(None, &[(1, 1), (2, 1)], 8);
    assert_eq!(t, [1, 1, 1, 1, 2, 2, 2, 2]);
    let t = rebalance(None, &[(1, 3), (2, 1), (3, 1)], 10);
    assert_eq!(counts(&t, &[1, 2, 3]), [6, 2, 2]);
    // Four members of 64 buckets; member 2 leaves.
    let four = rebalance(None, &[(1, 1), (2, 1), (3, 1), (4, 1)], 64);
    let three = rebalance(Some(&four), &[(1, 1), (3, 1), (4, 1)], 64);
    assert_eq!(counts(&three, &[1, 3, 4]), [22, 21, 21]);
    for (b, (&was, &now)) in four.iter().zip(&three).enumerate() {
        assert!(was == 2 || was == now, "bucket {b}: {was} → {now}");
    }
    // Member 5 joins: it takes 12 or 13 buckets, and only those change hands.
    let four_again = rebalance(Some(&three), &[(1, 1), (3, 1), (4, 1), (5, 1)], 64);
    let moved = three
        .iter()
        .zip(&four_again)
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(moved, counts(&four_again, &[5])[0]);
    assert_eq!(counts(&four_again, &[1, 3, 4, 5]), [16, 16, 16, 16]);
    // Member 1's weight doubles: only the buckets it gains move.
    let heavier = rebalance(Some(&four_again), &[(1, 2), (3, 1), (4, 1), (5, 1)], 64);
    let moved = four_again
        .iter()
        .zip(&heavier)
        .filter(|(a, b)| a != b)
        .count();
    // 64 × 2/5 = 25.6 and 12.8 for the others: the three larger remainders round up.
    assert_eq!(counts(&heavier, &[1, 3, 4, 5]), [25, 13, 13, 13]);
    assert_eq!(moved, 25 - 16);
    // Another bucket count starts afresh; no members, no table.
    assert_eq!(rebalance(Some(&heavier), &[(1, 1)], 4), [1, 1, 1, 1]);
    assert!(rebalance(None, &[], 4).is_empty());
}

/// Through the mirror: a route through a resilient group gets its table in the FIB; when
/// a member's tap goes down (the kernel deletes the member, silently), or a member is
/// deleted, only that member's buckets move; a member whose tap is up but who cannot be
/// used (flagged dead) lends its buckets and gets them back.
#[test]
fn resilient_groups_reach_the_fib_and_keep_their_buckets() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    for (id, gw, oif) in [(1, "10.0.0.2", A), (2, "10.1.0.2", B), (3, "10.0.0.3", A)] {
        put(&mut m, id, one(gw, oif));
    }
    put(
        &mut m,
        20,
        NhDef::Resilient(vec![(1, 1), (2, 1), (3, 1)], 32),
    );
    m.event(Event::Route(rt_nh(p4("192.0.2.0/24"), 20)));
    m.apply(&vr);
    let set = |vr: &Vr| vr.fib4.get(&"192.0.2.0/24".parse().unwrap()).unwrap();
    // The bucket's next hop, for each of the 32.
    let paths = |vr: &Vr| -> Vec<NextHop> {
        let s = set(vr);
        (0..32).map(|b| s.hops()[s.member_of_share(b)]).collect()
    };
    let s = set(&vr);
    assert_eq!(s.shares(), 32);
    assert_eq!(
        s.hops(),
        [via("10.0.0.2", 0), via("10.1.0.2", 1), via("10.0.0.3", 0)]
    );
    let before = paths(&vr);
    let moved_only_from = |before: &[NextHop], after: &[NextHop], from: NextHop| {
        for (b, (was, now)) in before.iter().zip(after).enumerate() {
            assert!(
                *was == from && *now != from || was == now,
                "bucket {b}: {was:?} → {now:?}"
            );
        }
    };
    // Member 2 flagged dead: its buckets go to the others, nothing else moves; back alive,
    // exactly as before.
    let mut dead = hop(Some("10.1.0.2"), B);
    dead.dead = true;
    put(&mut m, 2, NhDef::One(dead));
    m.apply(&vr);
    moved_only_from(&before, &paths(&vr), via("10.1.0.2", 1));
    put(&mut m, 2, one("10.1.0.2", B));
    m.apply(&vr);
    assert_eq!(paths(&vr), before);
    // Tap b down: the kernel deletes member 2 and takes it out of the group without a
    // message; only its buckets move, and they stay moved when the tap comes back up (the
    // object is gone until someone adds it again).
    for up in [false, true] {
        m.event(Event::Link {
            index: B,
            name: "b".into(),
            up,
            mtu: 1500,
            carrier: up,
        });
        m.apply(&vr);
        let now = paths(&vr);
        moved_only_from(&before, &now, via("10.1.0.2", 1));
        assert!(!now.contains(&via("10.1.0.2", 1)));
    }
    // Added again (as a routing daemon would): member 2 takes back its share, a third.
    put(&mut m, 2, one("10.1.0.2", B));
    put(
        &mut m,
        20,
        NhDef::Resilient(vec![(1, 1), (2, 1), (3, 1)], 32),
    );
    m.apply(&vr);
    let again = paths(&vr);
    let twos = again.iter().filter(|h| **h == via("10.1.0.2", 1)).count();
    assert!((10..=11).contains(&twos), "{twos}");
    let before = again;
    // Member 3 deleted (the kernel announces the group without it): only its buckets move.
    m.event(Event::DelNexthop { id: 3 });
    put(&mut m, 20, NhDef::Resilient(vec![(1, 1), (2, 1)], 32));
    m.apply(&vr);
    let after = paths(&vr);
    for (b, (was, now)) in before.iter().zip(&after).enumerate() {
        assert!(
            *was == via("10.0.0.3", 0) || was == now,
            "bucket {b}: {was:?} → {now:?}"
        );
    }
    assert_eq!(
        after.iter().filter(|h| **h == via("10.0.0.2", 0)).count(),
        16
    );
}

/// A resync (reset, the dump again, `apply_all`) keeps a resilient group's buckets where
/// they were, even where the table no longer starts from scratch: nothing in the FIB changes.
#[test]
fn a_resync_keeps_resilient_buckets() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    let objects = |m: &mut Mirror, members: Vec<(u32, u32)>| {
        for (id, gw, oif) in [(1, "10.0.0.2", A), (2, "10.1.0.2", B), (3, "10.0.0.3", A)] {
            put(m, id, one(gw, oif));
        }
        put(m, 20, NhDef::Resilient(members, 24));
        m.event(Event::Route(rt_nh(p4("192.0.2.0/24"), 20)));
    };
    objects(&mut m, vec![(1, 1), (2, 1), (3, 1)]);
    m.apply(&vr);
    // Member 1 leaves: its buckets (the first eight) go half to 2, half to 3, a table no
    // fresh start would make (that gives 2 the first twelve).
    put(&mut m, 20, NhDef::Resilient(vec![(2, 1), (3, 1)], 24));
    m.apply(&vr);
    let before = vr.fib4.get(&"192.0.2.0/24".parse().unwrap()).unwrap();
    // The resync: everything forgotten, dumped again (links, objects, route), applied.
    m.reset();
    for (index, name) in [(LO, "lo"), (A, "a"), (B, "b"), (DUMMY, "dummy0")] {
        m.event(Event::Link {
            index,
            name: name.into(),
            up: true,
            mtu: 1500,
            carrier: true,
        });
    }
    objects(&mut m, vec![(2, 1), (3, 1)]);
    let n = m.apply_all(&vr).routes;
    assert_eq!(n, 0, "the resync changed a route");
    assert_eq!(
        vr.fib4.get(&"192.0.2.0/24".parse().unwrap()).unwrap(),
        before
    );
}

/// What the kernel deletes without a message when a link goes down, the mirror deletes too:
/// IPv4 routes all of whose next hops use the link (any of them when the link is deleted),
/// and nexthop objects through it, out of their groups, with the groups left empty and the
/// routes that used them. Nothing of it comes back when the link does.
#[test]
fn a_link_going_down_deletes_what_the_kernel_deletes_silently() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    m.event(Event::Route(rt(
        p4("198.51.100.0/24"),
        0,
        vec![hop(Some("10.0.0.2"), A)],
    )));
    m.event(Event::Route(rt(
        p4("203.0.113.0/24"),
        0,
        vec![hop(Some("10.0.0.2"), A), hop(Some("10.1.0.2"), B)],
    )));
    m.event(Event::Route(rt(
        p6("2001:db8:9::/48"),
        0,
        vec![hop(Some("fd00:a::2"), A)],
    )));
    put(&mut m, 1, one("10.0.0.9", A));
    put(&mut m, 2, one("10.1.0.9", B));
    put(&mut m, 10, NhDef::Group(vec![(1, 1), (2, 1)]));
    put(&mut m, 11, NhDef::Group(vec![(1, 1)]));
    m.event(Event::Route(rt_nh(p4("192.0.2.0/24"), 10)));
    m.event(Event::Route(rt_nh(p4("192.0.3.0/24"), 11)));
    m.event(Event::Route(rt_nh(p4("192.0.4.0/24"), 1)));
    m.apply(&vr);
    assert_eq!(m.nexthop_objects(), 4);
    for up in [false, true] {
        m.event(Event::Link {
            index: A,
            name: "a".into(),
            up,
            mtu: 1500,
            carrier: up,
        });
        m.apply(&vr);
        assert_eq!(get4(&vr, "198.51.100.0/24"), None, "up {up}");
        assert_eq!(get4(&vr, "192.0.3.0/24"), None, "up {up}");
        assert_eq!(get4(&vr, "192.0.4.0/24"), None, "up {up}");
        assert_eq!(get4(&vr, "192.0.2.0/24"), Some(vec![via("10.1.0.9", 1)]));
        assert_eq!(m.nexthop_objects(), 2, "2 and the group of 2 are left");
    }
    // IPv6 announces its own deletions: the mirror waits for them.
    assert_eq!(
        get6(&vr, "2001:db8:9::/48"),
        Some(vec![via("fd00:a::2", 0)])
    );
    // The multipath route stays, whole again with a back up.
    assert_eq!(
        get4(&vr, "203.0.113.0/24"),
        Some(vec![via("10.0.0.2", 0), via("10.1.0.2", 1)])
    );
    // Deleted, b takes every IPv4 route with a next hop through it.
    m.event(Event::DelLink {
        index: B,
        name: "b".into(),
    });
    m.apply(&vr);
    assert_eq!(get4(&vr, "203.0.113.0/24"), None);
    assert_eq!(get4(&vr, "192.0.2.0/24"), None);
    assert_eq!(m.nexthop_objects(), 0);
}

/// A link's last IPv4 address deleted takes its IPv4 routes, as a link going down does;
/// one address of two does not.
#[test]
fn a_links_last_ipv4_address_takes_its_routes() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    for a in ["10.1.0.1", "10.1.0.9"] {
        m.event(Event::Addr {
            deleted: false,
            index: B,
            addr: ip(a),
            len: 24,
        });
    }
    m.event(Event::Route(rt(
        p4("198.51.100.0/24"),
        0,
        vec![hop(Some("10.1.0.2"), B)],
    )));
    m.event(Event::Route(rt(
        p6("2001:db8::/48"),
        0,
        vec![hop(Some("fd00:b::2"), B)],
    )));
    m.apply(&vr);
    let del = |m: &mut Mirror, a: &str| {
        m.event(Event::Addr {
            deleted: true,
            index: B,
            addr: ip(a),
            len: 24,
        });
        m.apply(&vr);
    };
    del(&mut m, "10.1.0.9");
    assert_eq!(get4(&vr, "198.51.100.0/24"), Some(vec![via("10.1.0.2", 1)]));
    del(&mut m, "10.1.0.1");
    assert_eq!(get4(&vr, "198.51.100.0/24"), None);
    assert_eq!(get6(&vr, "2001:db8::/48"), Some(vec![via("fd00:b::2", 1)]));
}

/// A resilient group of more buckets than the FIB takes (the kernel allows 65,535) still
/// forwards, by hash-threshold over its members.
#[test]
fn a_resilient_group_too_fine_for_the_fib_forwards_by_hash_threshold() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    put(&mut m, 1, one("10.0.0.2", A));
    put(&mut m, 2, one("10.1.0.2", B));
    put(&mut m, 20, NhDef::Resilient(vec![(1, 1), (2, 3)], 8192));
    m.event(Event::Route(rt_nh(p4("192.0.2.0/24"), 20)));
    m.apply(&vr);
    let s = vr.fib4.get(&"192.0.2.0/24".parse().unwrap()).unwrap();
    assert!(s.buckets().is_empty());
    assert_eq!(
        s.members().collect::<Vec<_>>(),
        [(via("10.0.0.2", 0), 1), (via("10.1.0.2", 1), 3)]
    );
    assert_eq!(m.unusable(), 0);
}

/// A link that loses its carrier (up, but its peer gone): the kernel deletes the nexthop
/// objects through it and their routes, silently, and keeps its plain IPv4 routes (flagged
/// `linkdown`).
#[test]
fn a_lost_carrier_takes_the_nexthop_objects_through_it() {
    let (_dp, vr) = vr();
    let mut m = mirror();
    put(&mut m, 1, one("10.0.0.9", A));
    m.event(Event::Route(rt_nh(p4("192.0.2.0/24"), 1)));
    m.event(Event::Route(rt(
        p4("198.51.100.0/24"),
        0,
        vec![hop(Some("10.0.0.2"), A)],
    )));
    m.apply(&vr);
    assert_eq!(get4(&vr, "192.0.2.0/24"), Some(vec![via("10.0.0.9", 0)]));
    for carrier in [false, true] {
        m.event(Event::Link {
            index: A,
            name: "a".into(),
            up: true,
            mtu: 1500,
            carrier,
        });
        m.apply(&vr);
        assert_eq!(get4(&vr, "192.0.2.0/24"), None, "carrier {carrier}");
        assert_eq!(m.nexthop_objects(), 0);
        assert_eq!(get4(&vr, "198.51.100.0/24"), Some(vec![via("10.0.0.2", 0)]));
    }
}
