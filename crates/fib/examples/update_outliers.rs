//! Where the slowest single updates on the full tables come from: the 8 slowest of
//! `vrbench fib`'s update phase (delete then re-insert a random 10 %), each marked if the arena
//! grew during it; then the cost of arena growth itself, by inserting /25s into the full IPv4
//! table until the arena has grown twice.
//!
//! `cargo run --release -p vrhost-fib --example update_outliers`

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

fn growth() {
    let t: Table<V4> = Table::new();
    t.load(tablegen::ipv4_table(tablegen::IPV4_FULL, 1))
        .expect("generated table loads");
    let mut grown: Vec<(u32, Duration, usize, usize)> = Vec::new();
    let mut i = 0u32;
    while grown.len() < 2 {
        let before = t.memory_allocated();
        let p = Prefix4::new(Ipv4Addr::from_bits(0x0b00_0080 + i * 256), 25).expect("valid");
        let s = Instant::now();
        t.insert(p, NextHop::Drop).expect("insert");
        let e = s.elapsed();
        if t.memory_allocated() != before {
            grown.push((i, e, before, t.memory_allocated()));
        }
        i += 1;
    }
    for (i, e, from, to) in grown {
        println!(
            "IPv4: arena grew at insert {i}: {:.1} → {:.1} MiB in {:.2} ms",
            from as f64 / (1 << 20) as f64,
            to as f64 / (1 << 20) as f64,
            e.as_secs_f64() * 1e3
        );
    }
}

fn main() {
    slowest::<V4>(&tablegen::ipv4_table(tablegen::IPV4_FULL, 1));
    slowest::<V6>(&tablegen::ipv6_table(tablegen::IPV6_FULL, 1));
    growth();
}
