//! A bare batch-lookup loop on the generated full tables, for profiling (`perf record`) and for
//! quick A/B runs of a change: `cargo run --release -p vrhost-fib --example lookup_rate -- v6 3`
//! prints the best rate over 3 seconds of rounds of 4 M lookups.
//!
//! Environment: `TOP=n` sets `Config::top_bits`; `HOT=1` repeats 512 destinations (all
//! cached: what the lookup costs in instructions alone); `DEFAULT=1` adds a default route (kept
//! outside the trie, substituted for "no route" by every lookup); `SINGLE=1` times single
//! lookups (`Table::lookup`) instead of batches; `KERNEL=scalar|avx512-gather|avx512-loads|auto` picks
//! the batch step instead of the CPU's default (`Table::lookup_batch_with`), and a
//! comma-separated list of them runs their rounds alternately, each also as a ratio to the first
//! (round by round, so a noisy machine slows both alike); `ROUND=n` lookups per timed round
//! (default all 4 M: short rounds are more often uninterrupted on a busy machine). Destinations are uniform
//! random for IPv4 and random within routed prefixes for IPv6, as in `vrbench fib`.

use std::hint::black_box;
use std::time::Instant;

use vrhost_fib::{BATCH, Config, Family, Kernel, NextHopSet, Prefix, Table, V4, V6, tablegen};

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
    let kernels: Vec<Kernel> = match std::env::var("KERNEL") {
        Err(_) => vec![Kernel::Auto],
        Ok(list) => list
            .split(',')
            .map(|k| match k {
                "auto" => Kernel::Auto,
                "scalar" => Kernel::Scalar,
                "avx512-gather" => Kernel::Avx512Gather,
                "avx512-loads" => Kernel::Avx512Loads,
                k => panic!(
                    "KERNEL={k}: auto, scalar, avx512-gather or avx512-loads (comma-separated)"
                ),
            })
            .collect(),
    };
    let round = std::env::var("ROUND")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(dst.len())
        .clamp(BATCH, dst.len());
    let mut out = vec![None; BATCH];
    // Per kernel: the rate of every round; rounds of the kernels alternate.
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); kernels.len()];
    let start = Instant::now();
    let mut at = 0;
    while start.elapsed().as_secs_f64() < secs {
        for (k, &kernel) in kernels.iter().enumerate() {
            if at + round > dst.len() {
                at = 0;
            }
            let d = &dst[at..at + round];
            at += round;
            let t0 = Instant::now();
            if single {
                for &a in d {
                    black_box(t.lookup(a, &g));
                }
            } else {
                for c in d.chunks(BATCH) {
                    t.lookup_batch_with(kernel, c, &mut out[..c.len()], &g);
                    black_box(&out);
                }
            }
            rates[k].push(round as f64 / t0.elapsed().as_secs_f64() / 1e6);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (k, kernel) in kernels.iter().enumerate() {
        // Ratio to the first kernel, round by round (the same moment of a noisy machine).
        let mut ratio: Vec<f64> = rates[k].iter().zip(&rates[0]).map(|(a, b)| a / b).collect();
        let r = &mut rates[k];
        let n = r.len();
        let best = r.iter().copied().fold(0f64, f64::max);
        println!(
            "{}, top {top_bits} bits, {}: {n} rounds, best {best:.1} M/s, median {:.1} M/s{}",
            F::NAME,
            if single {
                "single".to_string()
            } else {
                format!("{kernel:?}")
            },
            median(r),
            if k > 0 {
                format!(
                    ", × {:?}: {:.3} (median of the rounds' ratios)",
                    kernels[0],
                    median(&mut ratio)
                )
            } else {
                String::new()
            }
        );
    }
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
