//! Readers while the control plane writes: a reader must see, for every address, either the
//! route before a change or the route after it — never a missing route, never another route —
//! and never block. The writer churns the structure hard (more-specifics appear and vanish in the
//! same top-level slot, short prefixes flip, whole-table reloads) while readers check addresses
//! whose set of acceptable answers is known.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use vrhost_fib::{Fib4, NextHop, Prefix4};

fn nh(i: u32) -> NextHop {
    NextHop::Attached { ifindex: i }
}

fn p(s: &str) -> Prefix4 {
    s.parse().unwrap()
}

#[test]
fn readers_see_old_or_new_never_torn() {
    let t = Arc::new(Fib4::new());
    // Stable: 10.1.0.0/16 → 1 is never touched; 10.1.2.0/24 flips between 2 and 3.
    t.insert(p("10.1.0.0/16"), nh(1)).unwrap();
    t.insert(p("10.1.2.0/24"), nh(2)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, checked) = (t.clone(), stop.clone(), checked.clone());
            thread::spawn(move || {
                let stable = Ipv4Addr::new(10, 1, 200, 7); // only the /16 covers it
                let flip = Ipv4Addr::new(10, 1, 2, 9); // the /24: 2 or 3
                let addrs = [stable, flip, stable, flip];
                let mut out = [None; 4];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = vrhost_fib::pin();
                    t.lookup_batch(&addrs, &mut out, &g);
                    for (a, id) in addrs.iter().zip(out) {
                        let id = id.unwrap_or_else(|| panic!("reader {r}: {a} had no route"));
                        let hop = t
                            .nexthops(id, &g)
                            .expect("id resolves under the guard")
                            .hops()[0];
                        if *a == stable {
                            assert_eq!(hop, nh(1), "reader {r}: stable address changed");
                        } else {
                            assert!(hop == nh(2) || hop == nh(3), "reader {r}: {a} → {hop:?}");
                        }
                    }
                    n += 1;
                }
                checked.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();

    // Writer: churn for a fixed number of rounds.
    for round in 0..20_000u32 {
        t.insert(p("10.1.2.0/24"), nh(2 + round % 2)).unwrap();
        // More-specifics in the same /18 slot and elsewhere come and go.
        let extra = Prefix4::new(Ipv4Addr::new(10, 1, 3, (round % 64) as u8 * 4), 30).unwrap();
        t.insert(extra, nh(100 + round % 7)).unwrap();
        if round % 3 == 0 {
            t.remove(&extra).unwrap();
        }
        // A short prefix covering everything flips (touches every top-level slot under it).
        if round % 50 == 0 {
            t.insert(p("10.0.0.0/8"), nh(50 + round % 5)).unwrap();
        }
        if round % 500 == 250 {
            // A full reload that keeps the checked routes.
            let mut routes = t.routes();
            routes.retain(|(q, _)| q.len() != 30);
            t.load(routes).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a torn or missing route");
    }
    assert!(checked.load(Ordering::Relaxed) > 0, "readers ran");
}

/// The arena under the readers grows (a bigger copy is published), retired nodes are reused
/// after their grace period, and the leaves widen from 1 to 2 bytes (a full rebuild) — all
/// while readers check addresses whose answer never changes, in both families.
#[test]
fn readers_across_arena_growth_reuse_and_leaf_widening() {
    let t4 = Arc::new(Fib4::new());
    let t6 = Arc::new(vrhost_fib::Fib6::new());
    t4.insert(p("10.1.0.0/16"), nh(1)).unwrap();
    t4.insert(p("10.1.2.0/24"), nh(2)).unwrap();
    t4.insert(p("10.1.2.128/25"), nh(3)).unwrap();
    let p6 = |s: &str| s.parse::<vrhost_fib::Prefix6>().unwrap();
    let a6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();
    // A /48 alone under its /32: a path-compressed chain.
    t6.insert(p6("2a00:1450::/32"), nh(4)).unwrap();
    t6.insert(p6("2a00:1450:4001::/48"), nh(5)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t4, t6, stop, checked) = (t4.clone(), t6.clone(), stop.clone(), checked.clone());
            thread::spawn(move || {
                let want4 = [
                    (Ipv4Addr::new(10, 1, 200, 7), 1),
                    (Ipv4Addr::new(10, 1, 2, 9), 2),
                    (Ipv4Addr::new(10, 1, 2, 200), 3),
                ];
                let want6 = [
                    (a6("2a00:1450:4001::77"), 5),
                    (a6("2a00:1450:4002::1"), 4),
                    (a6("2a00:1450:ffff::1"), 4),
                ];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = vrhost_fib::pin();
                    let addrs: Vec<_> = want4.iter().map(|w| w.0).collect();
                    let mut out = [None; 3];
                    t4.lookup_batch(&addrs, &mut out, &g);
                    for ((a, want), id) in want4.iter().zip(out) {
                        for id in [id, t4.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} lost"));
                            let hop = t4.nexthops(id, &g).expect("resolves").hops()[0];
                            assert_eq!(hop, nh(*want), "reader {r}: {a}");
                        }
                    }
                    let addrs: Vec<_> = want6.iter().map(|w| w.0).collect();
                    t6.lookup_batch(&addrs, &mut out, &g);
                    for ((a, want), id) in want6.iter().zip(out) {
                        for id in [id, t6.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} lost"));
                            let hop = t6.nexthops(id, &g).expect("resolves").hops()[0];
                            assert_eq!(hop, nh(*want), "reader {r}: {a}");
                        }
                    }
                    n += 1;
                }
                checked.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();

    // Writer: thousands of routes next to the checked ones, each with its own next-hop set
    // (ids pass 255: the leaves widen), half removed again (their nodes are reused).
    for round in 0..3_000u32 {
        let q = Prefix4::new(Ipv4Addr::from_bits(0x0a01_0300 + (round % 700) * 64), 26).unwrap();
        t4.insert(q, nh(1000 + round)).unwrap();
        let q6 = p6(&format!("2a00:1450:{:x}::/48", 0x5000 + round % 900));
        t6.insert(q6, nh(1000 + round)).unwrap();
        if round % 2 == 1 {
            t4.remove(&q).unwrap();
            t6.remove(&q6).unwrap();
        }
        if round % 1000 == 999 {
            // Far-away more-specifics in new top-level slots: new subtrees, more growth.
            for j in 0..50u32 {
                let far = Prefix4::new(Ipv4Addr::from_bits(0x2000_0000 + (round + j) * 4096), 30)
                    .unwrap();
                t4.insert(far, nh(j)).unwrap();
            }
        }
    }
    assert!(t4.nexthop_sets() > 256 && t6.nexthop_sets() > 256);
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a torn or missing route");
    }
    assert!(checked.load(Ordering::Relaxed) > 0, "readers ran");
}

/// The default route flips between two next hops (one store each: it is kept outside the
/// trie) while readers look up, in both families and by every lookup path, addresses only the
/// default covers — at the top level, and inside subtrees and path-compressed chains built
/// for more specific routes — and addresses more specific routes cover. A default-only address
/// must always get one of the two default next hops (never "no route"), a covered one always
/// its own route. Now and then the writer also changes a more-specific route in the same
/// slot and reloads the whole table (trie and default switch together).
#[test]
fn default_route_flips_while_readers_run() {
    let t4 = Arc::new(Fib4::new());
    let t6 = Arc::new(vrhost_fib::Fib6::new());
    let p6 = |s: &str| s.parse::<vrhost_fib::Prefix6>().unwrap();
    let a6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();
    t4.insert(p("0.0.0.0/0"), nh(1)).unwrap();
    t4.insert(p("10.1.0.0/16"), nh(3)).unwrap();
    t4.insert(p("10.9.2.0/24"), nh(4)).unwrap(); // a subtree in the 10.9.0.0/18 slot
    t6.insert(p6("::/0"), nh(1)).unwrap();
    t6.insert(p6("2a00:1450::/32"), nh(3)).unwrap();
    t6.insert(p6("2a00:1450:4001::/48"), nh(4)).unwrap(); // a path-compressed chain
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    // `None`: only the default covers the address (next hop 1 or 2).
    let want4: Vec<(Ipv4Addr, Option<u32>)> = vec![
        (Ipv4Addr::new(192, 0, 2, 1), None), // top-level leaf
        (Ipv4Addr::new(10, 9, 5, 1), None),  // a leaf of the /24's subtree, same slot
        (Ipv4Addr::new(10, 9, 2, 77), Some(4)),
        (Ipv4Addr::new(10, 1, 200, 7), Some(3)),
        (Ipv4Addr::new(255, 255, 255, 255), None),
        (Ipv4Addr::new(0, 0, 0, 0), None),
    ];
    let want6: Vec<(std::net::Ipv6Addr, Option<u32>)> = vec![
        (a6("2001:db8::1"), None),           // top-level leaf
        (a6("2a00:1451::1"), None),          // same top-level slot as the /32, not under it
        (a6("2a00:1450:4001::77"), Some(4)), // through the compressed chain
        (a6("2a00:1450:4002::1"), Some(3)),  // the chain's miss
        (a6("ffff:ffff::"), None),
        (a6("::"), None),
    ];

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t4, t6, stop, checked) = (t4.clone(), t6.clone(), stop.clone(), checked.clone());
            let (want4, want6) = (want4.clone(), want6.clone());
            thread::spawn(move || {
                let ok = |hop: NextHop, want: Option<u32>, what: &str| match want {
                    Some(w) => assert_eq!(hop, nh(w), "reader {r}: {what}"),
                    None => assert!(hop == nh(1) || hop == nh(2), "reader {r}: {what} → {hop:?}"),
                };
                let addrs4: Vec<_> = want4.iter().map(|w| w.0).collect();
                let addrs6: Vec<_> = want6.iter().map(|w| w.0).collect();
                let mut out = vec![None; want4.len()];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = vrhost_fib::pin();
                    t4.lookup_batch(&addrs4, &mut out, &g);
                    for ((a, want), id) in want4.iter().zip(&out) {
                        for id in [*id, t4.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} had no route"));
                            let hop = t4.nexthops(id, &g).expect("resolves").hops()[0];
                            ok(hop, *want, &a.to_string());
                        }
                        let set = t4.lookup_set(*a).expect("lookup_set: covered");
                        ok(set.hops()[0], *want, &a.to_string());
                    }
                    t6.lookup_batch(&addrs6, &mut out, &g);
                    for ((a, want), id) in want6.iter().zip(&out) {
                        for id in [*id, t6.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} had no route"));
                            let hop = t6.nexthops(id, &g).expect("resolves").hops()[0];
                            ok(hop, *want, &a.to_string());
                        }
                        let set = t6.lookup_set(*a).expect("lookup_set: covered");
                        ok(set.hops()[0], *want, &a.to_string());
                    }
                    n += 1;
                }
                checked.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();

    for round in 0..50_000u32 {
        // The flip: a replace of the default route (the old set's last reference goes, so its
        // id is recycled after the grace period and may come back for the other set).
        let hop = nh(1 + round % 2);
        t4.insert(p("0.0.0.0/0"), hop).unwrap();
        t6.insert(p6("::/0"), hop).unwrap();
        if round % 100 == 0 {
            // More-specifics next to the checked addresses come and go.
            let q = p("10.9.3.0/24");
            let q6 = p6("2a00:1450:5000::/48");
            if round % 200 == 0 {
                t4.insert(q, nh(9)).unwrap();
                t6.insert(q6, nh(9)).unwrap();
            } else {
                t4.remove(&q).unwrap();
                t6.remove(&q6).unwrap();
            }
        }
        if round % 5_000 == 2_500 {
            t4.load(t4.routes()).unwrap();
            t6.load(t6.routes()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a torn or missing route");
    }
    assert!(checked.load(Ordering::Relaxed) > 0, "readers ran");
    // Reference counts: the default holds one set, the other routes share none with it.
    assert_eq!(t4.nexthop_sets(), 3);
    assert_eq!(t4.get(&p("0.0.0.0/0")), Some(nh(2).into()));
    assert_eq!(t4.remove(&p("0.0.0.0/0")).unwrap(), nh(2).into());
    assert_eq!(t4.nexthop_sets(), 2);
    assert_eq!(t4.lookup_set(Ipv4Addr::new(192, 0, 2, 1)), None);
    assert_eq!(t6.remove(&p6("::/0")).unwrap(), nh(2).into());
    assert_eq!(t6.lookup_set(a6("2a00:1451::1")), None);
    assert_eq!(t6.lookup_set(a6("2a00:1450:4002::1")), Some(nh(3).into()));
}

/// Short prefixes (no longer than the top level: the slots' covers, outside the trie) change
/// while more-specifics under them come and go and readers run: an address under a flipping
/// /8 sees its old or new next hop, one under a stable /24 inside it always the /24, one the
/// /24 covers only half the time the /24 or the /8 — never no route, never another route.
#[test]
fn covers_flip_while_readers_run() {
    let t = Arc::new(Fib4::new());
    t.insert(p("10.0.0.0/8"), nh(1)).unwrap();
    t.insert(p("10.1.2.0/24"), nh(3)).unwrap(); // stable, in the 10.1.0.0/18 slot
    t.insert(p("10.64.0.0/12"), nh(5)).unwrap(); // stable short route inside the /8
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    // What each address may see: the /8's two next hops are 1 and 2.
    let want: Vec<(Ipv4Addr, &'static [u32])> = vec![
        (Ipv4Addr::new(10, 200, 0, 1), &[1, 2]), // only the /8: a top-level leaf
        (Ipv4Addr::new(10, 1, 9, 1), &[1, 2]),   // only the /8, in the /24's slot
        (Ipv4Addr::new(10, 1, 2, 9), &[3]),      // the stable /24
        (Ipv4Addr::new(10, 1, 4, 9), &[1, 2, 4]), // the /24 that comes and goes
        (Ipv4Addr::new(10, 70, 0, 1), &[5]),     // the /12 inside the /8
        (Ipv4Addr::new(10, 70, 7, 1), &[5, 6]),  // a /24 under the /12 that comes and goes
    ];
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, checked, want) = (t.clone(), stop.clone(), checked.clone(), want.clone());
            thread::spawn(move || {
                let addrs: Vec<_> = want.iter().map(|w| w.0).collect();
                let mut out = vec![None; addrs.len()];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = vrhost_fib::pin();
                    t.lookup_batch(&addrs, &mut out, &g);
                    for ((a, ok), id) in want.iter().zip(&out) {
                        for id in [*id, t.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} had no route"));
                            let hop = t.nexthops(id, &g).expect("resolves").hops()[0];
                            assert!(
                                ok.iter().any(|&w| hop == nh(w)),
                                "reader {r}: {a} → {hop:?}"
                            );
                        }
                    }
                    n += 1;
                }
                checked.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    for round in 0..20_000u32 {
        t.insert(p("10.0.0.0/8"), nh(1 + round % 2)).unwrap();
        match round % 4 {
            0 => drop(t.insert(p("10.1.4.0/24"), nh(4)).unwrap()),
            1 => drop(t.insert(p("10.70.7.0/24"), nh(6)).unwrap()),
            2 => drop(t.remove(&p("10.1.4.0/24")).unwrap()),
            _ => drop(t.remove(&p("10.70.7.0/24")).unwrap()),
        }
        if round % 5_000 == 2_500 {
            t.load(t.routes()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a torn or missing route");
    }
    assert!(checked.load(Ordering::Relaxed) > 0, "readers ran");
}

/// IPv6 blocks while readers run: a /22 (a sub-cover, stored in its slot's block) flips
/// between two next hops over a stable /48 and a /40 that comes and goes under it; in slots
/// with no other route longer than the top level, a /44 and a /24 come and go, so their
/// blocks are made and dropped again each time. Every address sees its old or new route,
/// never no route, never another.
#[test]
fn ipv6_blocks_change_while_readers_run() {
    use std::net::Ipv6Addr;
    use vrhost_fib::{Fib6, Prefix6};
    let p6 = |s: &str| s.parse::<Prefix6>().unwrap();
    let t = Arc::new(Fib6::new());
    t.insert(p6("2400::/12"), nh(1)).unwrap(); // a cover (top-level entries)
    t.insert(p6("2400:1000::/22"), nh(2)).unwrap(); // a sub-cover, flips 2 ↔ 3
    t.insert(p6("2400:1000::/48"), nh(4)).unwrap(); // stable, under the /22
    t.insert(p6("2600::/12"), nh(6)).unwrap();
    t.insert(p6("2a00::/12"), nh(8)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let want: Vec<(Ipv6Addr, &'static [u32])> = vec![
        (a("2400:1000::1"), &[4]),       // the stable /48
        (a("2400:1000:1::1"), &[2, 3]),  // only the /22
        (a("2400:1100::1"), &[2, 3, 5]), // the /40 that comes and goes, else the /22
        (a("2400:2000::1"), &[1]),       // outside the /22: the /12
        (a("2600:10::1"), &[6, 7]),      // a /44 alone in its slot, coming and going
        (a("2600:20::1"), &[6]),         // the same slot, outside the /44
        (a("2a00:100::1"), &[8, 9]),     // a /24 alone in its slot, coming and going
        (a("2a00:200::1"), &[8]),        // the same slot, outside the /24
    ];
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, checked, want) = (t.clone(), stop.clone(), checked.clone(), want.clone());
            thread::spawn(move || {
                let addrs: Vec<_> = want.iter().map(|w| w.0).collect();
                let mut out = vec![None; addrs.len()];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = vrhost_fib::pin();
                    t.lookup_batch(&addrs, &mut out, &g);
                    for ((a, ok), id) in want.iter().zip(&out) {
                        for id in [*id, t.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} had no route"));
                            let hop = t.nexthops(id, &g).expect("resolves").hops()[0];
                            assert!(
                                ok.iter().any(|&w| hop == nh(w)),
                                "reader {r}: {a} → {hop:?}"
                            );
                        }
                    }
                    n += 1;
                }
                checked.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    for round in 0..20_000u32 {
        t.insert(p6("2400:1000::/22"), nh(2 + round % 2)).unwrap();
        let (prefix, hop) = [
            ("2400:1100::/40", 5),
            ("2600:10::/44", 7),
            ("2a00:100::/24", 9),
        ][(round / 2 % 3) as usize];
        if round % 2 == 0 {
            t.insert(p6(prefix), nh(hop)).unwrap();
        } else {
            t.remove(&p6(prefix)).unwrap();
        }
        if round % 5_000 == 2_500 {
            t.load(t.routes()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a torn or missing route");
    }
    assert!(checked.load(Ordering::Relaxed) > 0, "readers ran");
}

/// IPv6 /27–/29 while readers run: their last bit falls in the node below the block, and a
/// change repaints the value the slots they cover inherit (the subtrees under longer routes
/// stay as they are, the ones that inherit are written anew). A /27 flips between two next
/// hops and now and then goes away and comes back; a /29 inside it does the same; longer
/// routes under both stay. Every address sees its old or new route, never no route, never
/// another.
#[test]
fn ipv6_27_to_29_change_while_readers_run() {
    use std::net::Ipv6Addr;
    use vrhost_fib::{Fib6, Prefix6};
    let p6 = |s: &str| s.parse::<Prefix6>().unwrap();
    let t = Arc::new(Fib6::new());
    t.insert(p6("2400:1000::/24"), nh(1)).unwrap(); // a sub-cover over everything here
    t.insert(p6("2400:1000::/27"), nh(2)).unwrap(); // flips 2 ↔ 3, now and then away
    t.insert(p6("2400:1000::/32"), nh(4)).unwrap(); // inside the /27, its own slot
    t.insert(p6("2400:1000:5::/48"), nh(5)).unwrap(); // under the /32
    t.insert(p6("2400:1010::/48"), nh(6)).unwrap(); // a chain inheriting the /27
    t.insert(p6("2400:1008::/29"), nh(7)).unwrap(); // flips 7 ↔ 8, now and then away
    t.insert(p6("2400:1009:1::/48"), nh(9)).unwrap(); // under the /29
    t.insert(p6("2400:1009:2::/56"), nh(10)).unwrap(); // under the /29
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let want: Vec<(Ipv6Addr, &'static [u32])> = vec![
        (a("2400:1000:5::1"), &[5]),
        (a("2400:1000:6::1"), &[4]),
        (a("2400:1010::1"), &[6]),
        (a("2400:1010:1::1"), &[1, 2, 3]),
        (a("2400:1009:1::1"), &[9]),
        (a("2400:1009:2::1"), &[10]),
        (a("2400:1009:3::1"), &[1, 2, 3, 7, 8]),
        (a("2400:100f:ffff::1"), &[1, 2, 3, 7, 8]),
        (a("2400:1020::1"), &[1]),
    ];
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, checked, want) = (t.clone(), stop.clone(), checked.clone(), want.clone());
            thread::spawn(move || {
                let addrs: Vec<_> = want.iter().map(|w| w.0).collect();
                let mut out = vec![None; addrs.len()];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = vrhost_fib::pin();
                    t.lookup_batch(&addrs, &mut out, &g);
                    for ((a, ok), id) in want.iter().zip(&out) {
                        for id in [*id, t.lookup(*a, &g)] {
                            let id = id.unwrap_or_else(|| panic!("reader {r}: {a} had no route"));
                            let hop = t.nexthops(id, &g).expect("resolves").hops()[0];
                            assert!(
                                ok.iter().any(|&w| hop == nh(w)),
                                "reader {r}: {a} → {hop:?}"
                            );
                        }
                    }
                    n += 1;
                }
                checked.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    for round in 0..20_000u32 {
        match round % 8 {
            3 => drop(t.remove(&p6("2400:1000::/27")).unwrap()),
            6 => drop(t.remove(&p6("2400:1008::/29")).unwrap()),
            r => {
                t.insert(p6("2400:1000::/27"), nh(2 + r % 2)).unwrap();
                t.insert(p6("2400:1008::/29"), nh(7 + r % 2)).unwrap();
            }
        }
        if round % 5_000 == 2_500 {
            t.load(t.routes()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a torn or missing route");
    }
    assert!(checked.load(Ordering::Relaxed) > 0, "readers ran");
}
