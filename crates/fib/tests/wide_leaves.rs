//! Leaf width follows the table's next-hop ids: 1 byte up to id 255, 2 bytes up to 65,535,
//! 4 bytes beyond. Crossing a width rebuilds the structure; nothing may be lost or truncated
//! on the way, in either family, and a reload narrows the leaves again.

use std::net::{Ipv4Addr, Ipv6Addr};

use vrhost_fib::{Fib4, Fib6, NextHop, NextHopSet, Prefix4, Prefix6};

fn nh(i: u32) -> NextHopSet {
    NextHop::Attached { ifindex: i }.into()
}

fn v4(i: u32) -> Prefix4 {
    // Distinct /32s spread over many top-level slots and sharing some.
    Prefix4::new(Ipv4Addr::from_bits(0x0a00_0000 | (i * 37)), 32).unwrap()
}

fn ifindex(s: &NextHopSet) -> u32 {
    match s.hops()[0] {
        NextHop::Attached { ifindex } => ifindex,
        h => panic!("unexpected {h:?}"),
    }
}

#[test]
fn more_than_65535_sets_ipv4() {
    const N: u32 = 70_000;
    let t = Fib4::new();
    t.insert("10.0.0.0/8".parse().unwrap(), nh(u32::MAX))
        .unwrap();
    for i in 0..N {
        t.insert(v4(i), nh(i)).unwrap();
        // Right after each width change, and now and then, everything so far still resolves.
        if i == 254 || i == 255 || i == 256 || i == 65_534 || i == 65_535 || i % 9_999 == 0 {
            check4(&t, i + 1);
        }
    }
    assert!(t.nexthop_sets() > 65_536);
    check4(&t, N);
    // Ids above 65,535 really are in the leaves: the highest ones resolve to their own set.
    let g = vrhost_fib::pin();
    let id = t.lookup(v4(N - 1).addr(), &g).unwrap();
    assert!(id.get() > 65_535, "id {}", id.get());
    assert_eq!(ifindex(t.nexthops(id, &g).unwrap()), N - 1);
    drop(g);
    // Remove most: addresses fall back to the /8, ids are released.
    for i in 0..N - 10 {
        t.remove(&v4(i)).unwrap();
    }
    let g = vrhost_fib::pin();
    for i in (0..N - 10).step_by(997) {
        let id = t.lookup(v4(i).addr(), &g).unwrap();
        assert_eq!(ifindex(t.nexthops(id, &g).unwrap()), u32::MAX);
    }
    drop(g);
    check_tail(&t, N);
    // A reload with few sets works (and picks narrow leaves again).
    let mem_wide = t.memory().total();
    t.load(t.routes()).unwrap();
    check_tail(&t, N);
    assert!(t.memory().total() <= mem_wide);
}

fn check4(t: &Fib4, n: u32) {
    let g = vrhost_fib::pin();
    let addrs: Vec<Ipv4Addr> = (0..n).map(|i| v4(i).addr()).collect();
    let mut out = vec![None; addrs.len()];
    t.lookup_batch(&addrs, &mut out, &g);
    for (i, id) in out.into_iter().enumerate() {
        let id = id.unwrap_or_else(|| panic!("route {i} of {n} lost"));
        assert_eq!(
            ifindex(t.nexthops(id, &g).unwrap()),
            i as u32,
            "route {i} of {n}"
        );
        assert_eq!(t.lookup(addrs[i], &g), Some(id));
    }
}

fn check_tail(t: &Fib4, n: u32) {
    let g = vrhost_fib::pin();
    for i in n - 10..n {
        let id = t.lookup(v4(i).addr(), &g).unwrap();
        assert_eq!(ifindex(t.nexthops(id, &g).unwrap()), i);
    }
}

#[test]
fn more_than_255_sets_ipv6_with_path_compression() {
    const N: u32 = 600;
    let t = Fib6::new();
    // /48s alone under /32s: the chains path compression folds.
    let p32 = |i: u32| {
        Prefix6::new(
            Ipv6Addr::from_bits((0x2a00_0000_u128 | u128::from(i) << 4) << 96),
            32,
        )
        .unwrap()
    };
    let p48 = |i: u32| {
        Prefix6::new(
            Ipv6Addr::from_bits(p32(i).addr().to_bits() | u128::from(i * 7 + 1) << 80),
            48,
        )
        .unwrap()
    };
    for i in 0..N {
        t.insert(p32(i), nh(100_000 + i)).unwrap();
        t.insert(p48(i), nh(i)).unwrap();
    }
    let g = vrhost_fib::pin();
    for i in 0..N {
        let inside = Ipv6Addr::from_bits(p48(i).addr().to_bits() | 0xffff);
        let beside = Ipv6Addr::from_bits(p48(i).addr().to_bits() ^ 1 << 85);
        let id = t.lookup(inside, &g).unwrap();
        assert_eq!(ifindex(t.nexthops(id, &g).unwrap()), i);
        let id = t.lookup(beside, &g).unwrap();
        assert_eq!(ifindex(t.nexthops(id, &g).unwrap()), 100_000 + i);
        let mut out = [None; 2];
        t.lookup_batch(&[inside, beside], &mut out, &g);
        assert_eq!(out, [t.lookup(inside, &g), t.lookup(beside, &g)]);
    }
}
