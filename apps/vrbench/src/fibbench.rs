//! `vrbench fib`: the FIB on generated full tables.
//!
//! Every rate is measured on one core (the calling thread), as the median of several timed
//! rounds, and printed next to a baseline measured in the same invocation: random 16-bit reads
//! from a 32 MiB array, which is what a plain DIR-24-8 table costs per lookup. The ratio is the
//! figure to compare across runs; the absolute numbers swing with the machine's neighbours.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use vrhost_fib::tablegen::{self, IPV4_FULL, IPV6_FULL};
use vrhost_fib::{BATCH, Family, Key, NextHopSet, NhId, Prefix, Table, V4, V6};

/// Options of `vrbench fib`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// IPv4 prefixes to generate.
    #[arg(long, default_value_t = IPV4_FULL)]
    v4: usize,
    /// IPv6 prefixes to generate.
    #[arg(long, default_value_t = IPV6_FULL)]
    v6: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Destinations per timed round.
    #[arg(long, default_value_t = 4_000_000)]
    lookups: usize,
    /// Timed rounds per figure (the median is reported).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Check this many random addresses per family against a reference (0: skip).
    #[arg(long, default_value_t = 1_000_000)]
    verify: usize,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            v4: IPV4_FULL,
            v6: IPV6_FULL,
            seed: 1,
            lookups: 4_000_000,
            rounds: 5,
            verify: 1_000_000,
            json: false,
        }
    }
}

#[derive(Serialize, Debug)]
struct Figure {
    name: String,
    mlookups_per_s: f64,
    vs_baseline: f64,
}

#[derive(Serialize, Debug)]
struct FamilyReport {
    family: &'static str,
    prefixes: usize,
    build_s: f64,
    memory_bytes: usize,
    allocated_bytes: usize,
    nodes: usize,
    insert_per_s: f64,
    delete_per_s: f64,
    update_us_p50: f64,
    update_us_p99: f64,
    update_us_max: f64,
    lookups: Vec<Figure>,
    verified: usize,
    mismatches: usize,
}

#[derive(Serialize, Debug)]
struct Report {
    machine: String,
    baseline_mreads_per_s: f64,
    families: Vec<FamilyReport>,
    total_memory_bytes: usize,
    total_allocated_bytes: usize,
}

pub(crate) fn run(a: &Args) -> anyhow::Result<()> {
    if a.lookups < BATCH || a.rounds == 0 {
        bail!("--lookups must be at least {BATCH} and --rounds at least 1");
    }
    let baseline = baseline(a);
    eprintln!("baseline: random reads from a 32 MiB array: {baseline:.1} M/s");
    let v4 = family::<V4>(a, tablegen::ipv4_table(a.v4, a.seed), baseline, true)?;
    let v6 = family::<V6>(a, tablegen::ipv6_table(a.v6, a.seed), baseline, false)?;
    let report = Report {
        machine: crate::host::describe(),
        baseline_mreads_per_s: baseline,
        total_memory_bytes: v4.memory_bytes + v6.memory_bytes,
        total_allocated_bytes: v4.allocated_bytes + v6.allocated_bytes,
        families: vec![v4, v6],
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    if report.families.iter().any(|f| f.mismatches > 0) {
        bail!("lookups disagree with the reference");
    }
    Ok(())
}

fn print(r: &Report) {
    println!("machine: {}", r.machine);
    println!(
        "baseline (random reads, 32 MiB array): {:.1} M/s",
        r.baseline_mreads_per_s
    );
    for f in &r.families {
        println!(
            "\n{} — {} prefixes: built in {:.2} s, {:.1} MiB ({:.1} MiB allocated), {} nodes",
            f.family,
            f.prefixes,
            f.build_s,
            f.memory_bytes as f64 / (1 << 20) as f64,
            f.allocated_bytes as f64 / (1 << 20) as f64,
            f.nodes
        );
        println!(
            "  updates: insert {:.0}/s, delete {:.0}/s; single update latency p50 {:.1} µs, \
             p99 {:.1} µs, max {:.0} µs",
            f.insert_per_s, f.delete_per_s, f.update_us_p50, f.update_us_p99, f.update_us_max
        );
        println!(
            "  {:<34} {:>10} {:>12}",
            "lookups (one core)", "M/s", "× baseline"
        );
        for l in &f.lookups {
            println!(
                "  {:<34} {:>10.1} {:>12.2}",
                l.name, l.mlookups_per_s, l.vs_baseline
            );
        }
        if f.verified > 0 {
            println!(
                "  verified {} addresses against the reference: {} mismatches",
                f.verified, f.mismatches
            );
        }
    }
    println!(
        "\ntotal lookup-structure memory: {:.1} MiB ({:.1} MiB allocated)",
        r.total_memory_bytes as f64 / (1 << 20) as f64,
        r.total_allocated_bytes as f64 / (1 << 20) as f64
    );
}

/// Median of `rounds` timings of `f` (which does `n` operations), in M operations/s.
fn rate(rounds: usize, n: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up caches and page tables
    let mut v: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            n as f64 / t.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn baseline(a: &Args) -> f64 {
    let table = vec![1u16; 16 << 20]; // 32 MiB: a DIR-24-8 first level
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.seed);
    let idx: Vec<u32> = (0..a.lookups).map(|_| rng.gen_range(0..16 << 20)).collect();
    let mut out = vec![0u16; BATCH];
    rate(a.rounds, idx.len(), || {
        for c in idx.chunks(BATCH) {
            for (o, &i) in out.iter_mut().zip(c) {
                *o = table[i as usize];
            }
            black_box(&out);
        }
    })
}

fn family<F: Family>(
    a: &Args,
    routes: Vec<(Prefix<F>, NextHopSet)>,
    baseline: f64,
    uniform_is_meaningful: bool,
) -> anyhow::Result<FamilyReport> {
    let t0 = Instant::now();
    let table: Table<F> = Table::new();
    table
        .load(routes.iter().cloned())
        .context("loading the generated table")?;
    let build_s = t0.elapsed().as_secs_f64();
    let mem = table.memory();
    let allocated_bytes = table.memory_allocated();
    eprintln!(
        "{}: {} prefixes built in {build_s:.2} s",
        F::NAME,
        routes.len()
    );

    let mut mixes: Vec<(&str, Vec<F::Addr>)> = Vec::new();
    if uniform_is_meaningful {
        mixes.push((
            "uniform random",
            tablegen::uniform::<F>(a.lookups, a.seed + 1),
        ));
    }
    mixes.push((
        "random within routed prefixes",
        tablegen::routed(&routes, a.lookups, a.seed + 2),
    ));
    mixes.push((
        "Zipf s=1.0 over 1M destinations",
        tablegen::zipf(&routes, 1 << 20, 1.0, a.lookups, a.seed + 3),
    ));

    let mut lookups = Vec::new();
    let g = vrhost_fib::pin();
    for (name, dst) in &mixes {
        let mut out = vec![None; BATCH];
        let batch = rate(a.rounds, dst.len(), || {
            for c in dst.chunks(BATCH) {
                table.lookup_batch(c, &mut out[..c.len()], &g);
                black_box(&out);
            }
        });
        let single = rate(a.rounds, dst.len(), || {
            for &d in dst {
                black_box(table.lookup(d, &g));
            }
        });
        for (kind, r) in [("batch", batch), ("single", single)] {
            lookups.push(Figure {
                name: format!("{name}, {kind}"),
                mlookups_per_s: r,
                vs_baseline: r / baseline,
            });
        }
    }
    drop(g);

    let (verified, mismatches) = verify(&table, &routes, a.verify, a.seed + 4);

    // Updates on the full table: delete then re-insert a random 10 % one at a time, timing each.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.seed + 5);
    let sample: Vec<_> = (0..routes.len() / 10)
        .map(|_| routes[rng.gen_range(0..routes.len())].clone())
        .collect();
    let mut lat = Vec::with_capacity(sample.len() * 2);
    let t = Instant::now();
    let mut deleted = 0usize;
    for (p, _) in &sample {
        let s = Instant::now();
        if table.remove(p).is_ok() {
            deleted += 1;
        }
        lat.push(s.elapsed());
    }
    let delete_per_s = deleted as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for (p, set) in &sample {
        let s = Instant::now();
        table.insert(*p, set.clone()).context("re-inserting")?;
        lat.push(s.elapsed());
    }
    let insert_per_s = sample.len() as f64 / t.elapsed().as_secs_f64();
    lat.sort();
    let pct = |q: f64| {
        lat.get(((lat.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            * 1e6
    };

    Ok(FamilyReport {
        family: F::NAME,
        prefixes: routes.len(),
        build_s,
        memory_bytes: mem.total(),
        allocated_bytes,
        nodes: mem.node_count,
        insert_per_s,
        delete_per_s,
        update_us_p50: pct(0.5),
        update_us_p99: pct(0.99),
        update_us_max: pct(1.0),
        lookups,
        verified,
        mismatches,
    })
}

/// Compare `n` random addresses (half uniform, half inside routed prefixes) against a
/// reference map per prefix length.
fn verify<F: Family>(
    table: &Table<F>,
    routes: &[(Prefix<F>, NextHopSet)],
    n: usize,
    seed: u64,
) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let mut by_len: Vec<std::collections::HashMap<F::Key, &NextHopSet>> =
        (0..=F::Key::BITS).map(|_| Default::default()).collect();
    for (p, s) in routes {
        by_len[usize::from(p.len())].insert(p.key(), s);
    }
    let lens: Vec<u8> = (0..=F::Key::BITS)
        .rev()
        .filter(|&l| !by_len[usize::from(l)].is_empty())
        .collect();
    let mut dst = tablegen::uniform::<F>(n / 2, seed);
    dst.extend(tablegen::routed(routes, n - n / 2, seed + 1));
    let g = vrhost_fib::pin();
    let mut out = vec![None::<NhId>; BATCH];
    let mut bad = 0;
    for c in dst.chunks(BATCH) {
        table.lookup_batch(c, &mut out[..c.len()], &g);
        for (&d, &id) in c.iter().zip(&out) {
            let k = F::key(d);
            let want = lens
                .iter()
                .find_map(|&l| by_len[usize::from(l)].get(&k.masked(l)).copied());
            let got = id.and_then(|id| table.nexthops(id, &g));
            if want != got || table.lookup(d, &g) != id {
                bad += 1;
            }
        }
    }
    (dst.len(), bad)
}
