//! Where the slowest single updates on the full tables come from: the 8 slowest of
//! `vrbench fib`'s update phase (delete then re-insert a random 10 %), each marked if the arena
//! grew during it; then the cost of arena growth itself, by inserting /25s into the full IPv4
//! table until the arena has grown twice (and the latency of all those inserts); finally, on
//! the full tables, short prefixes by themselves: the default route (outside the trie: one
//! store) and other prefixes no longer than the top level's bits — an IPv4 /8 and an IPv6 /12
//! (outside the trie: a store per top-level slot whose cover it changes; in an IPv4 table
//! with ids wider than a byte, a rebuild of the subtree of each such slot), and an IPv6 /22
//! (a sub-cover in its slot's block: a store per sub-slot).
//!
//! `cargo run --release -p vrhost-fib --example update_outliers [-- short|lengths|churn v4|v6
//! SECS|per-route v4|v6 A-B [REPS]]` (`short`: only the last part; `lengths`: instead, the update phase's latency by
//! prefix length; `churn`: delete and re-insert random routes for a while, for profiling —
//! with `LENS=27-29`, only routes of those lengths; `per-route v6 27-29 [REPS]`: each route's
//! median delete and insert over REPS tries, and the spread of those over the routes)

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use vrhost_fib::{Family, NextHop, NextHopSet, Prefix, Prefix4, Table, V4, V6, tablegen};

fn slowest<F: Family>(routes: &[(Prefix<F>, NextHopSet)]) {
    let t: Table<F> = Table::new();
    t.load(routes.iter().cloned())
        .expect("generated table loads");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let sample: Vec<_> = (0..routes.len() / 10)
        .map(|_| routes[rng.gen_range(0..routes.len())].clone())
        .collect();
    let mut lat = Vec::new();
    let mut timed = |what: String, f: &mut dyn FnMut()| {
        let before = t.memory_allocated();
        let s = Instant::now();
        f();
        let e = s.elapsed();
        lat.push((e, what, t.memory_allocated() != before));
    };
    for (p, _) in &sample {
        timed(format!("delete {p}"), &mut || drop(t.remove(p)));
    }
    for (p, set) in &sample {
        timed(format!("insert {p}"), &mut || {
            t.insert(*p, set.clone()).expect("re-insert");
        });
    }
    lat.sort_by_key(|l| std::cmp::Reverse(l.0));
    println!("{}: slowest of {} updates", F::NAME, lat.len());
    for (e, what, grew) in lat.iter().take(8) {
        let grew = if *grew { " (arena grew)" } else { "" };
        println!("  {:>8.1} µs  {what}{grew}", e.as_secs_f64() * 1e6);
    }
}

/// Update latency by prefix length: the same delete-and-re-insert sample as [`slowest`],
/// grouped by length (`count`, p50, p99, max in µs), to see which lengths make the tail.
fn by_length<F: Family>(routes: &[(Prefix<F>, NextHopSet)]) {
    let t: Table<F> = Table::new();
    t.load(routes.iter().cloned())
        .expect("generated table loads");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let sample: Vec<_> = (0..routes.len() / 10)
        .map(|_| routes[rng.gen_range(0..routes.len())].clone())
        .collect();
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); 129];
    let mut all = Vec::new();
    for (p, _) in &sample {
        let s = Instant::now();
        drop(t.remove(p));
        lat[usize::from(p.len())].push(s.elapsed());
    }
    for (p, set) in &sample {
        let s = Instant::now();
        t.insert(*p, set.clone()).expect("re-insert");
        lat[usize::from(p.len())].push(s.elapsed());
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("{}: update latency by prefix length (µs)", F::NAME);
    for (len, v) in lat.iter_mut().enumerate() {
        if v.is_empty() {
            continue;
        }
        all.extend(v.iter().copied());
        v.sort();
        let q = |f: f64| us(v[((v.len() - 1) as f64 * f) as usize]);
        println!(
            "  /{len:<3} {:>6}  p50 {:>8.1}  p99 {:>8.1}  max {:>8.1}",
            v.len(),
            q(0.5),
            q(0.99),
            q(1.0)
        );
    }
    all.sort();
    let q = |f: f64| us(all[((all.len() - 1) as f64 * f) as usize]);
    println!(
        "  all  {:>6}  p50 {:>8.1}  p99 {:>8.1}  max {:>8.1}",
        all.len(),
        q(0.5),
        q(0.99),
        q(1.0)
    );
}

/// Delete and re-insert routes of the full table for `secs` seconds (for `perf record`: the
/// update path with the table load a small part of the profile); prints the mean per change.
/// With `LENS=A-B` in the environment only routes of length A to B are changed.
fn churn<F: Family>(routes: &[(Prefix<F>, NextHopSet)], secs: f64) {
    let t: Table<F> = Table::new();
    t.load(routes.iter().cloned())
        .expect("generated table loads");
    let lens = std::env::var("LENS").ok().map(|v| {
        let (a, b) = v.split_once('-').unwrap_or((&v, &v));
        let len = |s: &str| s.parse::<u8>().expect("LENS=A-B, prefix lengths");
        (len(a), len(b))
    });
    let routes: Vec<_> = routes
        .iter()
        .filter(|(p, _)| lens.is_none_or(|(a, b)| (a..=b).contains(&p.len())))
        .cloned()
        .collect();
    assert!(!routes.is_empty(), "no route of the lengths LENS names");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..1000 {
            let (p, set) = &routes[rng.gen_range(0..routes.len())];
            drop(t.remove(p));
            t.insert(*p, set.clone()).expect("re-insert");
            n += 2;
        }
    }
    println!(
        "{}: {n} changes, {:.2} µs each",
        F::NAME,
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}

/// Per route of length `lo..=hi`: the median of `reps` deletes and of `reps` re-inserts (each
/// route's own cost, without the preemptions a single sample catches), then p50 / p99 / max of
/// those medians over the routes. For lengths with few routes (IPv6 /27: 100 in the table,
/// 22 samples in `lengths`) a single-sample p99 is one unlucky change.
fn per_route<F: Family>(routes: &[(Prefix<F>, NextHopSet)], lo: u8, hi: u8, reps: usize) {
    let t: Table<F> = Table::new();
    t.load(routes.iter().cloned())
        .expect("generated table loads");
    let mut del = Vec::new();
    let mut ins = Vec::new();
    for (p, set) in routes.iter().filter(|(p, _)| (lo..=hi).contains(&p.len())) {
        let (mut d, mut i) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
        for _ in 0..reps {
            let s = Instant::now();
            drop(t.remove(p));
            d.push(s.elapsed());
            let s = Instant::now();
            t.insert(*p, set.clone()).expect("re-insert");
            i.push(s.elapsed());
        }
        d.sort();
        i.sort();
        del.push(d[reps / 2]);
        ins.push(i[reps / 2]);
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for (what, v) in [("delete", &mut del), ("insert", &mut ins)] {
        v.sort();
        let q = |f: f64| us(v[((v.len() - 1) as f64 * f) as usize]);
        println!(
            "{} /{lo}–/{hi} {what}, median of {reps} per route, over {} routes (µs): \
             p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
            F::NAME,
            v.len(),
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
    }
}

fn growth() {
    let t: Table<V4> = Table::new();
    t.load(tablegen::ipv4_table(tablegen::IPV4_FULL, 1))
        .expect("generated table loads");
    let mut grown: Vec<(u32, Duration, usize, usize)> = Vec::new();
    let mut i = 0u32;
    let mut all = Vec::new();
    while grown.len() < 2 {
        let before = t.memory_allocated();
        let p = Prefix4::new(Ipv4Addr::from_bits(0x0b00_0080 + i * 256), 25).expect("valid");
        let s = Instant::now();
        t.insert(p, NextHop::Drop).expect("insert");
        let e = s.elapsed();
        all.push(e);
        if t.memory_allocated() != before {
            grown.push((i, e, before, t.memory_allocated()));
        }
        i += 1;
    }
    all.sort();
    let q = |f: f64| all[((all.len() - 1) as f64 * f) as usize].as_secs_f64() * 1e6;
    println!(
        "IPv4: {} inserts of /25s: p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs",
        all.len(),
        q(0.5),
        q(0.99),
        q(0.999),
        q(1.0)
    );
    for (i, e, from, to) in grown {
        println!(
            "IPv4: arena grew at insert {i}: {:.1} → {:.1} MiB in {:.2} ms",
            from as f64 / (1 << 20) as f64,
            to as f64 / (1 << 20) as f64,
            e.as_secs_f64() * 1e3
        );
    }
}

/// Add, replace and delete `prefix` on the full table (median of `rounds` of each).
fn short<F: Family>(t: &Table<F>, prefix: &str, rounds: usize) {
    let p: Prefix<F> = prefix.parse().expect("valid prefix");
    let existed = t.get(&p);
    if existed.is_some() {
        t.remove(&p).expect("present");
    }
    let (a, b) = (
        NextHopSet::from(NextHop::Attached { ifindex: 9001 }),
        NextHopSet::from(NextHop::Attached { ifindex: 9002 }),
    );
    let mut add = Vec::new();
    let mut replace = Vec::new();
    let mut delete = Vec::new();
    let time = |v: &mut Vec<Duration>, f: &mut dyn FnMut()| {
        let s = Instant::now();
        f();
        v.push(s.elapsed());
    };
    for _ in 0..rounds {
        time(&mut add, &mut || {
            t.insert(p, a.clone()).expect("insert");
        });
        time(&mut replace, &mut || {
            t.insert(p, b.clone()).expect("replace");
        });
        time(&mut delete, &mut || drop(t.remove(&p)));
    }
    if let Some(set) = existed {
        t.insert(p, set).expect("restore");
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e6
    };
    println!(
        "{}: {prefix:<14} add {:>9.1} µs  replace {:>9.1} µs  delete {:>9.1} µs  \
         (median of {rounds})",
        F::NAME,
        med(&mut add),
        med(&mut replace),
        med(&mut delete)
    );
}

fn shorts() {
    let routes = tablegen::ipv4_table(tablegen::IPV4_FULL, 1);
    // The /8 with the most routes under it: the most slot subtrees to rebuild.
    let mut per8 = [0usize; 256];
    for (p, _) in &routes {
        per8[(p.key() >> 24) as usize] += 1;
    }
    let busiest = (0..256).max_by_key(|&i| per8[i]).expect("256 entries");
    let t4: Table<V4> = Table::new();
    t4.load(routes).expect("generated table loads");
    short(&t4, "0.0.0.0/0", 15);
    short(&t4, "44.0.0.0/8", 15);
    short(&t4, &format!("{busiest}.0.0.0/8"), 15);
    let t6: Table<V6> = Table::new();
    t6.load(tablegen::ipv6_table(tablegen::IPV6_FULL, 1))
        .expect("generated table loads");
    short(&t6, "::/0", 15);
    short(&t6, "2400::/12", 15);
    // The slowest change of the update phase before IPv6's blocks (a /22 over many routes:
    // 0.19–0.28 ms then; now a store per sub-slot).
    short(&t6, "2001:e000::/22", 15);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "churn") {
        let secs = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5.0);
        if args.get(2).is_some_and(|a| a == "v6") {
            churn::<V6>(&tablegen::ipv6_table(tablegen::IPV6_FULL, 1), secs);
        } else {
            churn::<V4>(&tablegen::ipv4_table(tablegen::IPV4_FULL, 1), secs);
        }
        return;
    }
    if args.get(1).is_some_and(|a| a == "per-route") {
        // `per-route v6 27-29 [REPS]`
        let lens = args.get(3).map_or("27-29", String::as_str);
        let (a, b) = lens.split_once('-').unwrap_or((lens, lens));
        let len = |s: &str| s.parse::<u8>().expect("per-route v4|v6 A-B [REPS]");
        let reps = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(9);
        if args.get(2).is_some_and(|a| a == "v4") {
            per_route::<V4>(
                &tablegen::ipv4_table(tablegen::IPV4_FULL, 1),
                len(a),
                len(b),
                reps,
            );
        } else {
            per_route::<V6>(
                &tablegen::ipv6_table(tablegen::IPV6_FULL, 1),
                len(a),
                len(b),
                reps,
            );
        }
        return;
    }
    if std::env::args().any(|a| a == "lengths") {
        by_length::<V4>(&tablegen::ipv4_table(tablegen::IPV4_FULL, 1));
        by_length::<V6>(&tablegen::ipv6_table(tablegen::IPV6_FULL, 1));
        return;
    }
    let only_short = std::env::args().any(|a| a == "short");
    if !only_short {
        slowest::<V4>(&tablegen::ipv4_table(tablegen::IPV4_FULL, 1));
        slowest::<V6>(&tablegen::ipv6_table(tablegen::IPV6_FULL, 1));
        growth();
    }
    shorts();
}
