//! Seeded generators of realistic full Internet routing tables and destination mixes, shared
//! by the benchmarks, `vrbench fib` and the tests.
//!
//! Why generated rather than a real RIB dump: the machines here have no network, a dump would
//! be tens of megabytes in the repository, and a generator scales (`n` prefixes for any `n`)
//! and is exactly reproducible from its seed. What matters for a lookup structure is kept
//! realistic:
//!
//! * **Prefix-length distribution** of today's global table: IPv4 ≈ 950 k prefixes, /24 ≈ 60 %,
//!   then /22, /23, /21, /20, /19, /16 …, almost nothing longer than /24 (filtered in BGP);
//!   IPv6 ≈ 200 k, /48 ≈ 50 %, then /32, /44, /40, /36, /29, /46, /47 …
//! * **Nesting**: a large share of long prefixes are more-specifics of shorter announced ones
//!   (de-aggregation, traffic engineering), so lookups fall back through covering prefixes.
//! * **Where**: IPv4 across the public unicast space (no 0/8, 10/8, 127/8, 100.64/10,
//!   169.254/16, 172.16/12, 192.168/16, multicast or class E); IPv6 inside the RIR blocks of
//!   2000::/3 in rough proportion to their share of the table.
//! * **Next hops**: a full table reaches few distinct next hops (the peers): a pool of 32
//!   sets, a quarter of them ECMP groups of 2–4.
//!
//! The counts per length are approximations of public BGP statistics in the mid-2020s, not a
//! copy of one day's table.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::family::{Family, Key};
use crate::nexthop::{NextHop, NextHopSet};
use crate::prefix::Prefix;
use crate::{V4, V6};

/// Prefixes per length in a 950,000-prefix IPv4 table.
pub const IPV4_LENGTHS: &[(u8, u32)] = &[
    (8, 16),
    (9, 14),
    (10, 40),
    (11, 100),
    (12, 300),
    (13, 600),
    (14, 1200),
    (15, 2000),
    (16, 13500),
    (17, 8500),
    (18, 13500),
    (19, 26000),
    (20, 42000),
    (21, 46000),
    (22, 120000),
    (23, 100000),
    (24, 575000),
    (25, 400),
    (26, 350),
    (27, 200),
    (28, 150),
    (29, 100),
    (30, 20),
    (31, 5),
    (32, 5),
];

/// Prefixes per length in a 200,000-prefix IPv6 table.
pub const IPV6_LENGTHS: &[(u8, u32)] = &[
    (20, 50),
    (21, 50),
    (22, 100),
    (23, 100),
    (24, 300),
    (25, 100),
    (26, 100),
    (27, 100),
    (28, 700),
    (29, 5500),
    (30, 1000),
    (31, 600),
    (32, 28000),
    (33, 1500),
    (34, 1200),
    (35, 800),
    (36, 7000),
    (37, 500),
    (38, 1500),
    (39, 800),
    (40, 15000),
    (41, 1000),
    (42, 3000),
    (43, 1500),
    (44, 18000),
    (45, 3000),
    (46, 5000),
    (47, 4000),
    (48, 99000),
    (56, 200),
    (64, 300),
];

/// Size of today's IPv4 table, as the benchmarks use it.
pub const IPV4_FULL: usize = 950_000;
/// Size of today's IPv6 table, as the benchmarks use it.
pub const IPV6_FULL: usize = 200_000;

type Rng64 = Xoshiro256PlusPlus;

/// The pool of next-hop sets routes are spread over (32 peers' worth, some ECMP).
pub fn nexthop_pool() -> Vec<NextHopSet> {
    (0..32u32)
        .map(|i| {
            let via = |j: u32| NextHop::Via {
                addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, (i * 4 + j) as u8)),
                ifindex: 1 + (i + j) % 8,
            };
            if i % 4 == 3 {
                NextHopSet::ecmp((0..2 + i % 3).map(via).collect::<Vec<_>>()).expect("≤ 4 hops")
            } else {
                NextHopSet::one(via(0))
            }
        })
        .collect()
}

fn v4_allowed(k: u32) -> bool {
    let a = Ipv4Addr::from_bits(k);
    let o = a.octets();
    !(o[0] == 0
        || o[0] == 10
        || o[0] == 127
        || o[0] >= 224
        || (o[0] == 100 && (o[1] & 0xc0) == 64)
        || (o[0] == 169 && o[1] == 254)
        || (o[0] == 172 && (o[1] & 0xf0) == 16)
        || (o[0] == 192 && o[1] == 168))
}

/// RIR blocks of IPv6 global unicast with their share of the table.
const V6_BLOCKS: &[(u128, u8, u32)] = &[
    (0x2001 << 112, 16, 15),
    (0x2400 << 112, 12, 20),
    (0x2600 << 112, 12, 25),
    (0x2800 << 112, 12, 8),
    (0x2a00 << 112, 12, 30),
    (0x2c00 << 112, 12, 2),
];

/// Generic placement: lengths ascending; each prefix either nests inside an already placed
/// shorter prefix or lands at a fresh random place.
fn generate<F: Family>(
    lengths: &[(u8, u32)],
    full: usize,
    n: usize,
    seed: u64,
    fresh: impl Fn(&mut Rng64, u8) -> F::Key,
    nest_prob: impl Fn(u8) -> f64,
) -> Vec<(Prefix<F>, NextHopSet)> {
    let mut rng = Rng64::seed_from_u64(seed);
    let pool = nexthop_pool();
    let mut placed: Vec<(F::Key, u8)> = Vec::with_capacity(n);
    let mut seen: HashSet<(F::Key, u8)> = HashSet::with_capacity(n);
    let scale = n as f64 / full as f64;
    let mut counts: Vec<(u8, usize)> = lengths
        .iter()
        .map(|&(l, c)| (l, (f64::from(c) * scale).round() as usize))
        .collect();
    // Rounding: make the total exactly n (adjust the most common length).
    let total: usize = counts.iter().map(|c| c.1).sum();
    let big = counts
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| c.1)
        .map(|(i, _)| i)
        .unwrap_or(0);
    counts[big].1 = (counts[big].1 + n).saturating_sub(total);
    for (len, count) in counts {
        let mut made = 0;
        let mut tries = 0usize;
        while made < count && tries < count * 50 + 1000 {
            tries += 1;
            let nest = !placed.is_empty() && rng.gen_bool(nest_prob(len));
            let key = if nest {
                let (pk, pl) = placed[rng.gen_range(0..placed.len())];
                if pl >= len {
                    continue;
                }
                let r: F::Key = fresh(&mut rng, F::Key::BITS); // random bits for the host part
                pick_inside::<F>(pk, pl, r).masked(len)
            } else {
                fresh(&mut rng, len).masked(len)
            };
            if seen.insert((key, len)) {
                placed.push((key, len));
                made += 1;
            }
        }
    }
    placed
        .into_iter()
        .map(|(k, l)| {
            let set = pool[rng.gen_range(0..pool.len())].clone();
            (Prefix::from_key(k, l), set)
        })
        .collect()
}

/// `r`'s bits below the top `pl`, on top of prefix `pk`.
fn pick_inside<F: Family>(pk: F::Key, pl: u8, r: F::Key) -> F::Key {
    let hostbits = xor(r, r.masked(pl));
    or(pk, hostbits)
}

fn xor<K: Key>(a: K, b: K) -> K {
    K::from_u128_bits(a.to_u128_bits() ^ b.to_u128_bits())
}

fn or<K: Key>(a: K, b: K) -> K {
    K::from_u128_bits(a.to_u128_bits() | b.to_u128_bits())
}

/// A full IPv4 table of `n` prefixes (use [`IPV4_FULL`] for today's size).
pub fn ipv4_table(n: usize, seed: u64) -> Vec<(Prefix<V4>, NextHopSet)> {
    generate::<V4>(
        IPV4_LENGTHS,
        IPV4_FULL,
        n,
        seed,
        |rng, _len| loop {
            let k: u32 = rng.r#gen();
            if v4_allowed(k) {
                break k;
            }
        },
        |len| if len >= 17 { 0.55 } else { 0.25 },
    )
}

/// A full IPv6 table of `n` prefixes (use [`IPV6_FULL`] for today's size).
pub fn ipv6_table(n: usize, seed: u64) -> Vec<(Prefix<V6>, NextHopSet)> {
    let total: u32 = V6_BLOCKS.iter().map(|b| b.2).sum();
    generate::<V6>(
        IPV6_LENGTHS,
        IPV6_FULL,
        n,
        seed,
        move |rng, _len| {
            let mut pick = rng.gen_range(0..total);
            let &(base, bl, _) = V6_BLOCKS
                .iter()
                .find(|b| {
                    if pick < b.2 {
                        true
                    } else {
                        pick -= b.2;
                        false
                    }
                })
                .expect("weights sum to total");
            let r: u128 = rng.r#gen();
            base | (r >> bl)
        },
        |len| if len > 32 { 0.7 } else { 0.2 },
    )
}

/// `n` destinations uniformly random over the whole address space.
pub fn uniform<F: Family>(n: usize, seed: u64) -> Vec<F::Addr> {
    let mut rng = Rng64::seed_from_u64(seed);
    (0..n)
        .map(|_| F::addr(F::Key::from_u128_bits(rng.r#gen())))
        .collect()
}

/// `n` destinations each inside a uniformly chosen prefix of `table` (so every lookup hits a
/// route, and long prefixes, being most numerous, dominate): the hard case for IPv6, where
/// uniform random addresses would almost all miss at the top level.
pub fn routed<F: Family>(table: &[(Prefix<F>, NextHopSet)], n: usize, seed: u64) -> Vec<F::Addr> {
    let mut rng = Rng64::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let (p, _) = &table[rng.gen_range(0..table.len())];
            let r = F::Key::from_u128_bits(rng.r#gen());
            F::addr(pick_inside::<F>(p.key(), p.len(), r))
        })
        .collect()
}

/// `n` destinations drawn with Zipf popularity (exponent `s`, about 1 for real traffic) from
/// `distinct` routed destinations: a skewed mix where a few flows carry most packets.
pub fn zipf<F: Family>(
    table: &[(Prefix<F>, NextHopSet)],
    distinct: usize,
    s: f64,
    n: usize,
    seed: u64,
) -> Vec<F::Addr> {
    let universe = routed(table, distinct, seed ^ 0x5a5a);
    let mut rng = Rng64::seed_from_u64(seed);
    let z = Zipf::new(distinct as u64, s).expect("valid Zipf parameters");
    (0..n)
        .map(|_| universe[z.sample(&mut rng) as usize - 1])
        .collect()
}

/// A uniform-random IPv6 address inside 2000::/3, for callers that want "random global".
pub fn global_v6(rng: &mut impl Rng) -> Ipv6Addr {
    Ipv6Addr::from_bits((0x2u128 << 124) | (rng.r#gen::<u128>() >> 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_distribution() {
        let t = ipv4_table(95_000, 1);
        assert_eq!(t.len(), 95_000);
        let n24 = t.iter().filter(|(p, _)| p.len() == 24).count();
        assert!(
            (0.58..0.63).contains(&(n24 as f64 / t.len() as f64)),
            "{n24}"
        );
        assert!(t.iter().all(|(p, _)| v4_allowed(p.key()) || p.len() < 8));
        let t6 = ipv6_table(20_000, 1);
        assert_eq!(t6.len(), 20_000);
        let n48 = t6.iter().filter(|(p, _)| p.len() == 48).count();
        assert!(
            (0.45..0.55).contains(&(n48 as f64 / t6.len() as f64)),
            "{n48}"
        );
        assert!(
            t6.iter().all(|(p, _)| p.key() >> 125 == 1),
            "all in 2000::/3"
        );
    }

    #[test]
    fn seeded_and_nested() {
        assert_eq!(ipv4_table(10_000, 7), ipv4_table(10_000, 7));
        assert_ne!(ipv4_table(10_000, 7), ipv4_table(10_000, 8));
        let t = ipv4_table(50_000, 3);
        let set: HashSet<_> = t.iter().map(|(p, _)| (p.key(), p.len())).collect();
        let nested = t
            .iter()
            .filter(|(p, _)| (8..p.len()).any(|l| set.contains(&(p.key().masked(l), l))))
            .count();
        assert!(nested > t.len() / 4, "only {nested} nested prefixes");
    }

    #[test]
    fn routed_destinations_hit_their_prefix() {
        let t = ipv6_table(2_000, 5);
        for a in routed(&t, 1000, 9) {
            assert!(t.iter().any(|(p, _)| p.contains(a)));
        }
    }
}
