//! Criterion benchmarks of the FIB on the generated full tables (950 k IPv4, 200 k IPv6):
//! batch and single lookups for uniform, routed and Zipf destination mixes; full-table build;
//! single insert and delete on the full table. Throughput is in lookups (elements) per second.
//!
//! `vrbench fib` measures the same things in one run with a same-run baseline, for the figures
//! in docs/perf.md; this is the criterion view for before/after comparisons of a change
//! (`cargo bench -p vrhost-fib -- --save-baseline before` …).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use vrhost_fib::tablegen::{self, IPV4_FULL, IPV6_FULL};
use vrhost_fib::{BATCH, Family, NextHopSet, Prefix, Table, V4};

const N: usize = 1 << 20;

fn lookups<F: Family>(
    c: &mut Criterion,
    routes: &[(Prefix<F>, NextHopSet)],
    mixes: &[(&str, Vec<F::Addr>)],
) {
    let t: Table<F> = Table::new();
    t.load(routes.iter().cloned()).unwrap();
    let mut g = c.benchmark_group(format!("{}-lookup", F::NAME));
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for (name, dst) in mixes {
        g.bench_function(format!("{name}/batch{BATCH}"), |b| {
            let guard = vrhost_fib::pin();
            let mut out = vec![None; BATCH];
            b.iter(|| {
                for c in dst.chunks(BATCH) {
                    t.lookup_batch(c, &mut out[..c.len()], &guard);
                    black_box(&out);
                }
            })
        });
        g.bench_function(format!("{name}/single"), |b| {
            let guard = vrhost_fib::pin();
            b.iter(|| {
                for &d in dst {
                    black_box(t.lookup(d, &guard));
                }
            })
        });
    }
    g.finish();
}

fn updates<F: Family>(c: &mut Criterion, routes: &[(Prefix<F>, NextHopSet)]) {
    let mut g = c.benchmark_group(format!("{}-update", F::NAME));
    g.sample_size(10);
    g.bench_function("build full table", |b| {
        b.iter_batched(
            Table::<F>::new,
            |t| t.load(routes.iter().cloned()).unwrap(),
            BatchSize::PerIteration,
        )
    });
    let t: Table<F> = Table::new();
    t.load(routes.iter().cloned()).unwrap();
    let mut i = 0usize;
    g.bench_function("delete + re-insert one route in the full table", |b| {
        b.iter(|| {
            let (p, s) = &routes[i % routes.len()];
            i = i.wrapping_add(7919);
            t.remove(p).unwrap();
            t.insert(*p, s.clone()).unwrap();
        })
    });
    g.finish();
}

fn ipv4(c: &mut Criterion) {
    let routes = tablegen::ipv4_table(IPV4_FULL, 1);
    let mixes = [
        ("uniform", tablegen::uniform::<V4>(N, 2)),
        ("routed", tablegen::routed(&routes, N, 3)),
        ("zipf", tablegen::zipf(&routes, 1 << 20, 1.0, N, 4)),
    ];
    lookups(c, &routes, &mixes);
    updates(c, &routes);
}

fn ipv6(c: &mut Criterion) {
    let routes = tablegen::ipv6_table(IPV6_FULL, 1);
    let mixes = [
        ("routed", tablegen::routed(&routes, N, 3)),
        ("zipf", tablegen::zipf(&routes, 1 << 20, 1.0, N, 4)),
    ];
    lookups(c, &routes, &mixes);
    updates(c, &routes);
}

criterion_group!(benches, ipv4, ipv6);
criterion_main!(benches);
