//! The FIB against a reference that cannot be wrong in the same way: a map per prefix length,
//! looked up longest length first. Random add / replace / delete sequences for both families,
//! with the prefixes drawn from a small universe so that they overlap, share top-level slots,
//! and include default routes and host routes; tables with the default and a small top level.
//! A quarter of the changes are to the default route (kept outside the trie), and now and then
//! the table is reloaded from its own route dump (a full rebuild, default included).

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use vrhost_fib::{Config, Family, FibError, Kernel, Key, NextHop, Prefix, Table, V4, V6};

/// Map per prefix length; lookup walks lengths from longest to shortest.
struct Reference<F: Family> {
    by_len: Vec<HashMap<F::Key, u32>>,
}

impl<F: Family> Reference<F> {
    fn new() -> Self {
        Reference {
            by_len: (0..=F::Key::BITS).map(|_| HashMap::new()).collect(),
        }
    }
    fn lookup(&self, k: F::Key) -> Option<u32> {
        (0..=F::Key::BITS)
            .rev()
            .find_map(|l| self.by_len[l as usize].get(&k.masked(l)).copied())
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, u128, u32),
    Remove(u8, u128),
    /// Remove the route at this position (modulo their number) in prefix order: a removal
    /// that finds its route, whatever was inserted (a random `Remove` mostly misses).
    RemoveExisting(usize),
    /// `load(routes())`: a full rebuild of the same routes.
    Reload,
}

fn nh(v: u32) -> NextHop {
    NextHop::Attached { ifindex: v }
}

/// Keys from a small universe: a few "regions" so prefixes nest and collide.
/// Keys are the top bits of a u128 (IPv4 takes the top 32).
fn key_strategy() -> impl Strategy<Value = u128> {
    prop_oneof![
        any::<u128>(),
        // Same first 20 bits, random rest: shares a top-level slot and deep nodes.
        any::<u128>().prop_map(|x| (0xa1b2c << 108) | (x >> 20)),
        // A handful of exact addresses, reused for host routes.
        (0u128..6).prop_map(|i| ((0xa1b2_c3d0 + i) << 96) | i),
    ]
}

/// Lengths over the whole key, with the default and host routes, and more of those just
/// past the top levels the tests use (8, and IPv6's 20): they are the IPv6 blocks' sub-covers.
fn len_strategy(bits: u8) -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(0u8),
        Just(bits),
        0..=bits,
        (bits / 2)..=bits,
        9u8..=15,
        21u8..=27,
    ]
}

fn ops(bits: u8) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (len_strategy(bits), key_strategy(), 1u32..5).prop_map(|(l, k, v)| Op::Insert(l, k, v)),
        1 => (len_strategy(bits), key_strategy()).prop_map(|(l, k)| Op::Remove(l, k)),
        2 => any::<usize>().prop_map(Op::RemoveExisting),
        1 => Just(Op::Reload),
    ];
    proptest::collection::vec(op, 1..120)
}

fn to_key<F: Family>(x: u128) -> F::Key
where
    F::Key: FromU128,
{
    <F::Key as FromU128>::from_u128(x)
}

trait FromU128 {
    fn from_u128(x: u128) -> Self;
    fn to_u128(self) -> u128;
}
impl FromU128 for u32 {
    fn from_u128(x: u128) -> Self {
        (x >> 96) as u32
    }
    fn to_u128(self) -> u128 {
        (self as u128) << 96
    }
}
impl FromU128 for u128 {
    fn from_u128(x: u128) -> Self {
        x
    }
    fn to_u128(self) -> u128 {
        self
    }
}

/// `wide_ids`: first add 300 host routes with distinct next hops far from the ops' prefixes,
/// so that ids outgrow 1-byte leaves (IPv4 then keeps its covers in the leaves rather than
/// in its top-level entries: the other layout).
fn run<F: Family>(ops: &[Op], top_bits: u8, wide_ids: bool)
where
    F::Key: FromU128,
{
    let t: Table<F> = Table::with_config(Config { top_bits });
    let mut r = Reference::<F>::new();
    let mut probes: Vec<F::Key> = Vec::new();
    if wide_ids {
        for i in 0..300u32 {
            let key = to_key::<F>((0xfe_u128 << 120) | (u128::from(i) << 96));
            let p = Prefix::<F>::new(F::addr(key), F::Key::BITS).unwrap();
            t.insert(p, nh(1000 + i)).unwrap();
            r.by_len[usize::from(F::Key::BITS)].insert(key, 1000 + i);
        }
    }
    for op in ops {
        match *op {
            Op::Insert(len, k, v) => {
                let key = to_key::<F>(k).masked(len);
                let p = Prefix::<F>::new(F::addr(key), len).unwrap();
                let old = t.insert(p, nh(v)).unwrap();
                let rold = r.by_len[len as usize].insert(key, v);
                assert_eq!(
                    old.map(|s| s.hops()[0]),
                    rold.map(nh),
                    "insert {p} returned"
                );
                probes.extend([key, key.last(len)]);
                // One past the end and one before the start: the fallback on either side.
                let k = key.last(len).to_u128().wrapping_add(if F::Key::BITS == 32 {
                    1 << 96
                } else {
                    1
                });
                probes.push(to_key::<F>(k));
            }
            Op::Remove(len, k) => {
                let key = to_key::<F>(k).masked(len);
                let p = Prefix::<F>::new(F::addr(key), len).unwrap();
                let res = t.remove(&p);
                match r.by_len[len as usize].remove(&key) {
                    Some(v) => assert_eq!(res.unwrap().hops()[0], nh(v)),
                    None => assert!(matches!(res, Err(FibError::NotFound { .. }))),
                }
                probes.push(key);
            }
            Op::RemoveExisting(i) => {
                let routes = t.routes();
                if routes.is_empty() {
                    continue;
                }
                let (p, set) = &routes[i % routes.len()];
                assert_eq!(&t.remove(p).unwrap(), set);
                let v = r.by_len[usize::from(p.len())].remove(&p.key());
                assert_eq!(v.map(nh), Some(set.hops()[0]), "{p} in the reference");
                probes.push(p.key());
            }
            Op::Reload => {
                let sets = t.nexthop_sets();
                t.load(t.routes()).unwrap();
                assert_eq!(t.nexthop_sets(), sets, "reload changed the interned sets");
            }
        }
        let distinct: std::collections::HashSet<_> =
            r.by_len.iter().flat_map(|m| m.values()).collect();
        assert_eq!(t.nexthop_sets(), distinct.len(), "next-hop sets in use");
        assert_eq!(t.len(), r.by_len.iter().map(HashMap::len).sum::<usize>());
        check(&t, &r, &probes);
    }
    // The route dump agrees too.
    let dump: BTreeMap<_, _> = t
        .routes()
        .into_iter()
        .map(|(p, s)| ((p.key(), p.len()), s.hops()[0]))
        .collect();
    let want: BTreeMap<_, _> = r
        .by_len
        .iter()
        .enumerate()
        .flat_map(|(l, m)| m.iter().map(move |(k, v)| ((*k, l as u8), nh(*v))))
        .collect();
    assert_eq!(dump, want);
}

/// Every lookup path agrees with the reference: single, batch, and the batch with each step
/// this CPU can run (scalar, and AVX-512 with gathers and with loads).
fn check<F: Family>(t: &Table<F>, r: &Reference<F>, probes: &[F::Key]) {
    let g = vrhost_fib::pin();
    let addrs: Vec<F::Addr> = probes.iter().map(|&k| F::addr(k)).collect();
    let mut out = vec![None; addrs.len()];
    t.lookup_batch(&addrs, &mut out, &g);
    for kernel in [Kernel::Scalar, Kernel::Avx512Gather, Kernel::Avx512Loads] {
        if kernel.available() {
            let mut o = vec![None; addrs.len()];
            t.lookup_batch_with(kernel, &addrs, &mut o, &g);
            assert_eq!(o, out, "{kernel:?} against lookup_batch");
        }
    }
    for (i, &k) in probes.iter().enumerate() {
        let want = r.lookup(k);
        let single = t.lookup(F::addr(k), &g);
        let got = |id: Option<vrhost_fib::NhId>| {
            id.map(|id| match t.nexthops(id, &g).unwrap().hops()[0] {
                NextHop::Attached { ifindex } => ifindex,
                _ => unreachable!(),
            })
        };
        assert_eq!(got(single), want, "lookup {} ", F::addr(k));
        assert_eq!(got(out[i]), want, "batch lookup {}", F::addr(k));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ipv4_matches_reference(ops in ops(32), small in any::<bool>()) {
        run::<V4>(&ops, if small { 8 } else { V4::TOP_BITS }, false);
    }

    #[test]
    fn ipv6_matches_reference(ops in ops(128), small in any::<bool>()) {
        run::<V6>(&ops, if small { 8 } else { V6::TOP_BITS }, false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// IPv4 with next-hop ids wider than a byte: covers expanded into the leaves.
    #[test]
    fn ipv4_matches_reference_wide_ids(ops in ops(32), small in any::<bool>()) {
        run::<V4>(&ops, if small { 8 } else { V4::TOP_BITS }, true);
    }
}

#[test]
fn delete_falls_back_to_covering_prefix() {
    let t = vrhost_fib::Fib4::new();
    let p = |s: &str| s.parse::<Prefix<V4>>().unwrap();
    let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    t.insert(p("0.0.0.0/0"), nh(1)).unwrap();
    t.insert(p("10.0.0.0/8"), nh(2)).unwrap();
    t.insert(p("10.1.0.0/16"), nh(3)).unwrap();
    t.insert(p("10.1.2.0/24"), nh(4)).unwrap();
    t.insert(p("10.1.2.3/32"), nh(5)).unwrap();
    let at = |s| t.lookup_set(a(s)).map(|s| s.hops()[0]);
    assert_eq!(at("10.1.2.3"), Some(nh(5)));
    t.remove(&p("10.1.2.3/32")).unwrap();
    assert_eq!(at("10.1.2.3"), Some(nh(4)));
    t.remove(&p("10.1.2.0/24")).unwrap();
    assert_eq!(at("10.1.2.3"), Some(nh(3)));
    t.remove(&p("10.1.0.0/16")).unwrap();
    assert_eq!(at("10.1.2.3"), Some(nh(2)));
    t.remove(&p("10.0.0.0/8")).unwrap();
    assert_eq!(at("10.1.2.3"), Some(nh(1)));
    t.remove(&p("0.0.0.0/0")).unwrap();
    assert_eq!(at("10.1.2.3"), None);
    assert!(t.is_empty());
    assert_eq!(t.memory().node_count, 0, "an empty table keeps no nodes");
}

#[test]
fn ipv6_host_and_default_routes() {
    let t = vrhost_fib::Fib6::new();
    let p = |s: &str| s.parse::<Prefix<V6>>().unwrap();
    let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    t.insert(p("::/0"), nh(1)).unwrap();
    t.insert(p("2001:db8::1/128"), nh(2)).unwrap();
    t.insert(p("2001:db8::/32"), nh(3)).unwrap();
    let at = |s| t.lookup_set(a(s)).map(|s| s.hops()[0]);
    assert_eq!(at("2001:db8::1"), Some(nh(2)));
    assert_eq!(at("2001:db8::2"), Some(nh(3)));
    assert_eq!(at("2001:db9::"), Some(nh(1)));
    assert_eq!(at("ffff::"), Some(nh(1)));
    assert!(matches!(
        t.add(p("::/0"), nh(9)),
        Err(FibError::Exists { .. })
    ));
}
