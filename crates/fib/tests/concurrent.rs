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
