//! A bare batch-lookup loop on the generated full tables, for profiling (`perf record`) and for
//! quick A/B runs of a change: `cargo run --release -p vrhost-fib --example lookup_rate -- v6 3`
//! prints the best rate over 3 seconds of rounds of 4 M lookups.
//!
//! Environment: `TOP=n` sets `Config::top_bits`; `HOT=1` repeats 512 destinations (all
//! cached: what the lookup costs in instructions alone); `DEFAULT=1` adds a default route (kept
//! outside the trie, substituted for "no route" by every lookup); `SINGLE=1` times single
//! lookups (`Table::lookup`) instead of batches. Destinations are uniform
//! random for IPv4 and random within routed prefixes for IPv6, as in `vrbench fib`.

use std::hint::black_box;
use std::time::Instant;

use vrhost_fib::{BATCH, Config, Family, NextHopSet, Prefix, Table, V4, V6, tablegen};

fn run<F: Family>(routes: &[(Prefix<F>, NextHopSet)], mut dst: Vec<F::Addr>, secs: f64) {
    let top_bits = std::env::var("TOP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(F::TOP_BITS);
    let t: Table<F> = Table::with_config(Config { top_bits });
    t.load(routes.iter().cloned())
        .expect("generated table loads");
    if std::env::var("DEFAULT").is_ok() {
        let d = Prefix::<F>::new_masked(dst[0], 0);
        t.insert(d, vrhost_fib::NextHop::Drop)
            .expect("default route");
    }
    if std::env::var("HOT").is_ok() {
        let hot = dst[..512].to_vec();
        dst = hot.iter().cycle().take(dst.len()).copied().collect();
    }
    let g = vrhost_fib::pin();
    let single = std::env::var("SINGLE").is_ok();
    let mut out = vec![None; BATCH];
    let start = Instant::now();
    let (mut rounds, mut best) = (0, 0f64);
    while start.elapsed().as_secs_f64() < secs {
        let t0 = Instant::now();
        if single {
            for &a in &dst {
                black_box(t.lookup(a, &g));
            }
        } else {
            for c in dst.chunks(BATCH) {
                t.lookup_batch(c, &mut out[..c.len()], &g);
                black_box(&out);
            }
        }
        best = best.max(dst.len() as f64 / t0.elapsed().as_secs_f64() / 1e6);
        rounds += 1;
    }
    println!(
        "{}, top {top_bits} bits{}: {rounds} rounds, best {best:.1} M/s",
        F::NAME,
        if single { ", single" } else { "" }
    );
}

fn main() {
    let family = std::env::args().nth(1).unwrap_or_else(|| "v4".into());
    let secs = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    if family == "v6" {
        let r = tablegen::ipv6_table(tablegen::IPV6_FULL, 1);
        let d = tablegen::routed(&r, 4_000_000, 3);
        run::<V6>(&r, d, secs);
    } else {
        let r = tablegen::ipv4_table(tablegen::IPV4_FULL, 1);
        let d = tablegen::uniform::<V4>(4_000_000, 2);
        run::<V4>(&r, d, secs);
    }
}
