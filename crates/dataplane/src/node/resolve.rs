//! From a destination to the way out — egress VIF and neighbour MAC — for both families:
//! the flow-cache probe and the FIB batch before a vector's loop ([`Lookups::new`]), then per
//! packet the cache's answer, the adjacency cache, or the full resolution of the route's next
//! hop ([`Lookups::way`]).
//!
//! Why one generic: `forward` in `ip4.rs` and `ip6.rs` did this in two copies of about a
//! hundred lines each, which had begun to drift (an unknown next-hop id was dropped silently
//! by one and answered with an ICMP error by the other). What differs between the families —
//! their tables and caches, the ECMP hash, where the TTL sits, the ICMP errors — is the
//! [`Family`] trait; what each does with a packet once it knows the way (IPv4's one-pass
//! rewrite and fragmentation, IPv6's scope check and Packet Too Big) stays in its own file.

use std::net::IpAddr;
use std::sync::Arc;

use vrhost_fib::{Guard, NextHop, NhId, Table};

use crate::counters::{Drop, Node};
use crate::neigh::NeighMap;
use crate::node::adjcache::{self, Adj, AdjCache};
use crate::node::flowcache::{CacheKey, Fill, FlowCache};
use crate::node::{Ctx, Refused, Scratch, cycles};
use crate::pool::Pkt;
use crate::vector::VECTOR;
use crate::vr::{Vif, Vr};
use crate::worker::VrState;

/// What the way out depends on in an address family (implemented in `ip4.rs` and `ip6.rs`).
pub(crate) trait Family: vrhost_fib::Family + Sized {
    /// The flow-cache key of a destination.
    type DstKey: CacheKey;
    /// A 5-tuple as `ip4-input` / `ip6-input` store it for the vector.
    type Tuple: Copy;
    /// The flow-cache key of a 5-tuple.
    type TupleKey: CacheKey;
    /// Offset of the TTL (hop limit) in the L3 header.
    const TTL_AT: usize;
    /// The VR's table of this family.
    fn fib(vr: &Vr) -> &Table<Self>;
    /// A destination as the flow cache keys it.
    fn dst_key(a: Self::Addr) -> Self::DstKey;
    /// A stored 5-tuple as the flow cache keys it.
    fn tuple_key(t: Self::Tuple) -> Self::TupleKey;
    /// An address as the neighbour table keys it.
    fn ip(a: Self::Addr) -> IpAddr;
    /// The VR's flow cache keyed by destination.
    fn fc(st: &mut VrState) -> &mut FlowCache<Self::DstKey>;
    /// The VR's flow cache keyed by 5-tuple.
    fn fct(st: &mut VrState) -> &mut FlowCache<Self::TupleKey>;
    /// The VR's adjacency cache.
    fn adj(st: &mut VrState) -> &mut AdjCache;
    /// The worker's per-vector arrays of this family.
    fn lanes(sc: &mut Scratch) -> Lanes<'_, Self>;
    /// The ECMP flow hash of a packet, from its L3 header on.
    fn hash(l3: &[u8]) -> u32;
    /// Answer a packet whose TTL would expire (Time Exceeded); the caller drops it.
    fn time_exceeded(cx: &mut Ctx<'_>, p: &Pkt);
    /// Apply a route that forwards nothing: its ICMP error, and the counted drop.
    fn refuse(cx: &mut Ctx<'_>, p: Pkt, r: Refused);
}

/// A family's per-vector arrays in [`Scratch`].
pub(crate) struct Lanes<'s, F: Family> {
    /// Destination of each packet of the vector (written by the input node).
    pub(crate) dsts: &'s mut [F::Addr; VECTOR],
    /// The destinations the flow cache missed, in order.
    pub(crate) miss: &'s mut [F::Addr; VECTOR],
    /// 5-tuple of each packet (written by the input node when the cache is keyed so).
    pub(crate) tuples: &'s mut [F::Tuple; VECTOR],
    pub(crate) hits: &'s mut [Option<Adj>; VECTOR],
    pub(crate) ids: &'s mut [Option<NhId>; VECTOR],
}

/// Where a packet leaves.
#[derive(Clone, Copy)]
pub(crate) struct Way<'a> {
    pub(crate) out: &'a Arc<Vif>,
    pub(crate) mac: [u8; 6],
    /// The decision holds for every packet to the destination (not one ECMP member's, nor
    /// one 5-tuple's): it may be offered to the fast path.
    pub(crate) per_dst: bool,
}

/// A vector's lookups, made before its per-packet loop.
pub(crate) struct Lookups<'s, F: Family> {
    dsts: &'s [F::Addr; VECTOR],
    tuples: &'s [F::Tuple; VECTOR],
    hits: &'s [Option<Adj>; VECTOR],
    ids: &'s [Option<NhId>; VECTOR],
    /// The next of `ids` to use.
    next_miss: usize,
    fill: Fill,
    by_tuple: bool,
    /// Flow and adjacency caches' generation: FIB and neighbours.
    generation: u64,
    guard: Guard,
    neigh: arc_swap::Guard<Arc<NeighMap>>,
    /// When the probe ended (the `forward` node's time starts there).
    pub(crate) t1: u64,
}

impl<'s, F: Family> Lookups<'s, F> {
    /// Probe the flow cache for the vector's `n` destinations (counted as the `flow-cache`
    /// node) and look the misses up in the FIB in one batch.
    #[inline(always)]
    pub(crate) fn new(cx: &mut Ctx<'_>, sc: &'s mut Scratch, n: usize) -> Self {
        let t0 = cycles();
        let Lanes {
            dsts,
            miss,
            tuples,
            hits,
            ids,
        } = F::lanes(sc);
        let guard = vrhost_fib::pin();
        let fib = F::fib(cx.vr);
        // Generations only grow, so their sum changes whenever either table does; +1 keeps it
        // clear of the caches' "empty" 0.
        let generation = fib.generation() + cx.vr.neigh.generation() + 1;
        // Keyed by 5-tuple: a hit may be one ECMP member's decision, so it is not a
        // destination's (the fast path is offered flows on their misses only).
        let by_tuple = F::fct(cx.st).enabled();
        let (used, m) = if by_tuple {
            // The keys were taken by the input node (the cache is probed: it said so there).
            let t = &*tuples;
            F::fct(cx.st).probe_vector(
                &dsts[..n],
                |i, _| F::tuple_key(t[i]),
                generation,
                hits,
                miss,
                cx.c,
            )
        } else {
            F::fc(cx.st).probe_vector(
                &dsts[..n],
                |_, d| F::dst_key(d),
                generation,
                hits,
                miss,
                cx.c,
            )
        };
        let t1 = cycles();
        cx.count(Node::FlowCache, n, t1.wrapping_sub(t0));
        fib.lookup_batch(&miss[..m], &mut ids[..m], &guard);
        Lookups {
            dsts,
            tuples,
            hits,
            ids,
            next_miss: 0,
            fill: Fill::of(used, by_tuple),
            by_tuple,
            generation,
            guard,
            neigh: cx.vr.neigh.snapshot(),
            t1,
        }
    }

    /// The destination of packet `i`.
    #[inline(always)]
    pub(crate) fn dst(&self, i: usize) -> F::Addr {
        self.dsts[i]
    }

    /// The way out of packet `p`, the `i`-th of the vector (called for each in order).
    /// `None`: the packet has been punted, refused or dropped (and counted).
    #[inline(always)]
    pub(crate) fn way<'a>(&mut self, cx: &mut Ctx<'a>, i: usize, p: Pkt) -> Option<(Pkt, Way<'a>)> {
        // A bypassed cache wrote no answers: the scratch's old ones do not count, and every
        // packet is a miss (the loop-invariant test costs less than reading `hits`).
        let hit = if self.fill == Fill::Nothing {
            None
        } else {
            self.hits[i]
        };
        if let Some((vif, mac)) = hit
            && let Some(out) = cx.vif(vif)
        {
            let per_dst = !self.by_tuple;
            return Some((p, Way { out, mac, per_dst }));
        }
        let id = if hit.is_none() {
            self.next_miss += 1;
            self.ids[self.next_miss - 1]
        } else {
            // Cached VIF removed since: look up again.
            F::fib(cx.vr).lookup(self.dsts[i], &self.guard)
        };
        let Some(id) = id else {
            F::refuse(cx, p, Refused::NoRoute);
            return None;
        };
        let pool = cx.pool;
        let adj = F::adj(cx.st).get(id.get(), self.generation, || {
            F::hash(&pool.frame(&p)[usize::from(pool.meta(&p).l3)..])
        });
        if let Some(((vif, mac), from_ecmp)) = adj
            && let Some(out) = cx.vif(vif)
        {
            let generation = self.generation;
            match self.fill {
                Fill::ByTuple => {
                    F::fct(cx.st).put(F::tuple_key(self.tuples[i]), generation, vif, mac)
                }
                Fill::ByDst if !from_ecmp => {
                    F::fc(cx.st).put(F::dst_key(self.dsts[i]), generation, vif, mac)
                }
                _ => {}
            }
            let per_dst = !from_ecmp;
            return Some((p, Way { out, mac, per_dst }));
        }
        self.resolve(cx, i, id, p)
    }

    /// The way out by the route's next-hop set and the neighbour table, for a packet
    /// neither cache answered; the answer is cached for the packets after it. Out of line:
    /// after the first packets to a next hop the adjacency cache answers.
    #[inline(never)]
    fn resolve<'a>(
        &mut self,
        cx: &mut Ctx<'a>,
        i: usize,
        id: NhId,
        p: Pkt,
    ) -> Option<(Pkt, Way<'a>)> {
        let pool = cx.pool;
        let dst = self.dsts[i];
        let Some(set) = F::fib(cx.vr).nexthops(id, &self.guard) else {
            // The id came from this table under the same guard: not expected.
            cx.drop(p, Drop::NoRoute);
            return None;
        };
        let l3 = usize::from(pool.meta(&p).l3);
        let ecmp = set.hops().len() > 1;
        let hop = if ecmp {
            set.select(F::hash(&pool.frame(&p)[l3..]))
        } else {
            &set.hops()[0]
        };
        let (nbr, ifindex) = match *hop {
            NextHop::Via { addr, ifindex } => (addr, ifindex),
            NextHop::Attached { ifindex } => (F::ip(dst), ifindex),
            NextHop::Local => {
                cx.punt(p);
                return None;
            }
            NextHop::Drop => {
                F::refuse(cx, p, Refused::Blackhole);
                return None;
            }
            NextHop::Unreachable => {
                F::refuse(cx, p, Refused::Unreachable);
                return None;
            }
            NextHop::Prohibit => {
                F::refuse(cx, p, Refused::Prohibit);
                return None;
            }
        };
        let Some(out) = u16::try_from(ifindex).ok().and_then(|i| cx.vif(i)) else {
            cx.drop(p, Drop::NoVif);
            return None;
        };
        if pool
            .frame(&p)
            .get(l3 + F::TTL_AT)
            .is_none_or(|&ttl| ttl <= 1)
        {
            // Checked before the neighbour so an unresolved one doesn't hide it.
            F::time_exceeded(cx, &p);
            cx.drop(p, Drop::TtlExpired);
            return None;
        }
        let Some(&mac) = self.neigh.get(&(out.id, nbr)) else {
            // Let the control plane resolve it (its kernel resolves and forwards this one).
            cx.c.neigh_miss.add(1);
            cx.punt(p);
            return None;
        };
        let generation = self.generation;
        if self.fill == Fill::ByTuple {
            let key = F::tuple_key(self.tuples[i]);
            F::fct(cx.st).put(key, generation, out.id, mac.0);
        }
        if !ecmp {
            if self.fill == Fill::ByDst {
                F::fc(cx.st).put(F::dst_key(dst), generation, out.id, mac.0);
            }
            if let NextHop::Via { .. } = *hop {
                // The neighbour depends on the route alone (not on the destination, as for
                // attached routes), so the id resolves it.
                F::adj(cx.st).put(id.get(), generation, out.id, mac.0);
            }
        } else if let Some(members) =
            adjcache::resolve_members(set, &self.neigh, |v| cx.vif(v).is_some())
        {
            F::adj(cx.st).put_ecmp(id.get(), generation, set, &members);
        }
        Some((
            p,
            Way {
                out,
                mac: mac.0,
                per_dst: !ecmp,
            },
        ))
    }
}
