//! The IPv6 path: `ip6-input` (version, payload length, extension-header chain, scopes,
//! local and link-local traffic, neighbour discovery) and `forward` (FIB, ECMP, adjacency,
//! hop limit, MTU, rewrite). Same pass structure as the IPv4 path.
//!
//! Neighbour discovery and MLD need no special case: NS/NA/RS/RA go to link-local or
//! solicited-node multicast (`ff02::/16`) or to the router's own addresses, all punted; MLD
//! carries a Router Alert option, also punted.

use std::net::{IpAddr, Ipv6Addr};

use vrhost_fib::NextHop;
use vrhost_wire::ethernet::EthernetAddress;
use vrhost_wire::icmpv6::{ErrorMessage, TimeExceededCode, UnreachableCode};
use vrhost_wire::ip::Protocol;
use vrhost_wire::ipv6;

use crate::counters::{Drop, Node};
use crate::flow;
use crate::node::flowcache::Fill;
use crate::node::icmp;
use crate::node::{Ctx, Refused, Scratch, adjcache, cycles, l2};
use crate::pool::Pkt;
use crate::vector::PktVec;

enum Input {
    Forward(Ipv6Addr),
    Punt,
    Drop(Drop),
    /// Never to be forwarded, but it may be to the router itself (see
    /// [`super::local_or_drop`]).
    LocalOnly(Ipv6Addr, Drop),
    /// A unicast packet with a Router Alert: the control plane's, unless its route forwards
    /// nothing (see [`super::punt_unless_refused`]).
    RouterAlert(Ipv6Addr),
}

/// Apply a route that forwards nothing: the ICMPv6 error it sends, and the counted drop.
/// An `unreachable` route answers "no route" (code 0), as Linux's `ip6_pkt_discard` does:
/// the routes come from the VR's kernel, and its answers should not change with the data
/// plane.
#[inline(never)]
fn refuse(cx: &mut Ctx<'_>, p: Pkt, r: Refused) {
    let code = match r {
        Refused::NoRoute | Refused::Unreachable => Some(UnreachableCode::NO_ROUTE),
        Refused::Blackhole => None,
        Refused::Prohibit => Some(UnreachableCode::ADMIN_PROHIBITED),
    };
    if let Some(code) = code {
        icmp::error6(cx, &p, ErrorMessage::DstUnreachable(code));
    }
    cx.drop(p, r.drop());
}

#[inline]
fn is_link_local(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// Checks on the bytes from the IPv6 header on; also returns the packet length.
/// `l2_group`: the frame was sent to a link-layer multicast address, so a unicast packet in
/// it may only be for the router itself (as Linux's `ip6_forward` drops what was not sent to
/// the host's MAC: every VR on the segment would otherwise forward its own copy).
#[inline]
fn check(l3: &[u8], l2_group: bool) -> (Input, usize) {
    match check_header(l3) {
        (Input::Forward(dst), total) if is_link_local(&dst) => {
            (Input::LocalOnly(dst, Drop::Ip6LinkLocal), total)
        }
        (Input::Forward(dst), total) if l2_group => {
            (Input::LocalOnly(dst, Drop::Ip6LinkMulticast), total)
        }
        // Never forwarded, so for the control plane whatever the routes say.
        (Input::RouterAlert(dst), total) if is_link_local(&dst) || l2_group => (Input::Punt, total),
        verdict => verdict,
    }
}

/// [`check`] but for the link-local scope and the frame's destination.
#[inline(always)]
fn check_header(l3: &[u8]) -> (Input, usize) {
    use Input::*;
    if l3.len() < ipv6::HEADER_LEN {
        return (Drop(crate::counters::Drop::Ip6Truncated), 0);
    }
    if l3[0] >> 4 != 6 {
        return (Drop(crate::counters::Drop::Ip6BadVersion), 0);
    }
    let p = ipv6::Packet::new_unchecked(l3);
    let total = p.total_len();
    if total > l3.len() {
        return (Drop(crate::counters::Drop::Ip6BadLength), 0);
    }
    let (src, dst) = (p.src_addr(), p.dst_addr());
    if src.is_multicast() || src.is_loopback() {
        return (Drop(crate::counters::Drop::Ip6BadSource), 0);
    }
    if dst.is_multicast() {
        // Interface- and link-local scopes (ND, MLD, OSPFv3, RIPng, VRRP …) are for the
        // control plane; wider scopes need multicast routing, which vrhost does not do, and
        // the reserved scope 0 is dropped (RFC 4291 §2.7).
        return if matches!(dst.segments()[0] & 0x000f, 1 | 2) {
            (Punt, total)
        } else {
            (Drop(crate::counters::Drop::Ip6Multicast), 0)
        };
    }
    if src.is_unspecified() {
        return (Drop(crate::counters::Drop::Ip6BadSource), 0);
    }
    if dst.is_unspecified() || dst.is_loopback() {
        // RFC 4291 §2.5.2–3: never a destination, never forwarded.
        return (Drop(crate::counters::Drop::Ip6BadDest), 0);
    }
    let nh = p.next_header();
    if nh == Protocol::HOPOPT {
        let p = ipv6::Packet::new_unchecked(&l3[..total]);
        return match p.router_alert() {
            Ok(Some(_)) => (RouterAlert(dst), total),
            Ok(None) => match p.upper_layer() {
                Ok(_) => (Forward(dst), total),
                Err(_) => (Drop(crate::counters::Drop::Ip6BadExtChain), 0),
            },
            Err(_) => (Drop(crate::counters::Drop::Ip6BadExtChain), 0),
        };
    }
    if ipv6::is_ext_header(nh)
        && ipv6::Packet::new_unchecked(&l3[..total])
            .upper_layer()
            .is_err()
    {
        return (Drop(crate::counters::Drop::Ip6BadExtChain), 0);
    }
    (Forward(dst), total)
}

/// Run a vector of IPv6 packets of one VR.
pub(crate) fn ip6(cx: &mut Ctx<'_>, v: &mut PktVec, sc: &mut Scratch) {
    let t0 = cycles();
    let n_in = v.len();
    let pool = cx.pool;
    let mut fwd = PktVec::new();
    let (dsts, tuples) = (&mut sc.dst6, &mut sc.tuple6);
    // As for IPv4: 5-tuple keys from the header being checked.
    let take_tuples = cx.st.fc6t.will_probe();
    for p in v.iter() {
        pool.prefetch(p);
    }
    for mut p in v.drain(..) {
        let m = *pool.meta(&p);
        let l3 = &pool.frame(&p)[usize::from(m.l3)..];
        match check(l3, m.class & flow::L2_GROUP != 0) {
            (Input::Forward(dst), total) => {
                dsts[fwd.len()] = dst;
                if take_tuples {
                    tuples[fwd.len()] = flow::tuple_v6(l3, dst);
                }
                let len = u16::from(m.l3) + total as u16;
                if len != m.len {
                    pool.meta_mut(&mut p).len = len;
                }
                fwd.push(p);
            }
            (Input::Punt, _) => cx.punt(p),
            (Input::Drop(d), _) => cx.drop(p, d),
            (Input::LocalOnly(dst, d), _) => super::local_or_drop(cx, p, IpAddr::V6(dst), d),
            (Input::RouterAlert(dst), total) => {
                // RSVP, say: for the control plane, as IPv4 options are. An error quotes
                // the packet alone, so link-layer padding goes first.
                pool.meta_mut(&mut p).len = u16::from(m.l3) + total as u16;
                let vr = cx.vr;
                super::punt_unless_refused(cx, p, &vr.fib6, dst, flow::hash_v6, refuse)
            }
        }
    }
    cx.count(Node::Ip6Input, n_in, cycles().wrapping_sub(t0));
    if !fwd.is_empty() {
        forward(cx, &mut fwd, sc);
    }
}

/// `flow-cache` + `forward`, as for IPv4.
fn forward(cx: &mut Ctx<'_>, v: &mut PktVec, sc: &mut Scratch) {
    let Scratch {
        dst6: dsts,
        miss6: miss_dst,
        tuple6: tuples,
        hits,
        ids: miss_ids,
        ..
    } = sc;
    let t0 = cycles();
    let pool = cx.pool;
    let n = v.len();
    let guard = vrhost_fib::pin();
    let generation = cx.vr.fib6.generation() + cx.vr.neigh.generation() + 1;
    // Keyed by 5-tuple: as for IPv4.
    let by_tuple = cx.st.fc6t.enabled();
    let (use_fc, m) = if by_tuple {
        // The keys were taken by `ip6-input`.
        let tuples = &*tuples;
        cx.st.fc6t.probe_vector(
            &dsts[..n],
            |i, _| tuples[i],
            generation,
            hits,
            miss_dst,
            cx.c,
        )
    } else {
        cx.st.fc6.probe_vector(
            &dsts[..n],
            |_, d: Ipv6Addr| d.to_bits(),
            generation,
            hits,
            miss_dst,
            cx.c,
        )
    };
    let fill = Fill::of(use_fc, by_tuple);
    let t1 = cycles();
    cx.count(Node::FlowCache, n, t1.wrapping_sub(t0));
    cx.vr
        .fib6
        .lookup_batch(&miss_dst[..m], &mut miss_ids[..m], &guard);
    let neigh = cx.vr.neigh.snapshot();
    let mut mi = 0;
    for (i, mut p) in v.drain(..).enumerate() {
        let dst = dsts[i];
        let l3 = usize::from(pool.meta(&p).l3);
        // A bypassed cache wrote no answers: the scratch's old ones do not count, and every
        // packet is a miss.
        let hit = if fill == Fill::Nothing { None } else { hits[i] };
        let cached = hit.and_then(|(vif, mac)| cx.vif(vif).map(|o| (o, mac)));
        // Whether the decision holds for every packet to `dst` (not one ECMP member's).
        let mut per_dst = !by_tuple;
        let (out, mac) = match cached {
            Some(hit) => hit,
            None => {
                let id = if hit.is_none() {
                    mi += 1;
                    miss_ids[mi - 1]
                } else {
                    cx.vr.fib6.lookup(dst, &guard)
                };
                let adj = id.and_then(|id| {
                    cx.st.adj6.get(id.get(), generation, || {
                        flow::hash_v6(&pool.frame(&p)[l3..])
                    })
                });
                if let Some(((vif, mac), from_ecmp)) = adj
                    && let Some(out) = cx.vif(vif)
                {
                    match fill {
                        Fill::ByTuple => cx.st.fc6t.put(tuples[i], generation, vif, mac),
                        Fill::ByDst if !from_ecmp => {
                            cx.st.fc6.put(dst.to_bits(), generation, vif, mac)
                        }
                        _ => {}
                    }
                    per_dst = !from_ecmp;
                    (out, mac)
                } else {
                    let Some(set) = id.and_then(|id| cx.vr.fib6.nexthops(id, &guard)) else {
                        refuse(cx, p, Refused::NoRoute);
                        continue;
                    };
                    let ecmp = set.hops().len() > 1;
                    per_dst = !ecmp;
                    let hop = if ecmp {
                        set.select(flow::hash_v6(&pool.frame(&p)[l3..]))
                    } else {
                        &set.hops()[0]
                    };
                    let (nbr, ifindex) = match *hop {
                        NextHop::Local => {
                            cx.punt(p);
                            continue;
                        }
                        NextHop::Via { addr, ifindex } => (addr, ifindex),
                        NextHop::Attached { ifindex } => (IpAddr::V6(dst), ifindex),
                        NextHop::Drop => {
                            refuse(cx, p, Refused::Blackhole);
                            continue;
                        }
                        NextHop::Unreachable => {
                            refuse(cx, p, Refused::Unreachable);
                            continue;
                        }
                        NextHop::Prohibit => {
                            refuse(cx, p, Refused::Prohibit);
                            continue;
                        }
                    };
                    let Some(out) = u16::try_from(ifindex).ok().and_then(|i| cx.vif(i)) else {
                        cx.drop(p, Drop::NoVif);
                        continue;
                    };
                    if pool.frame(&p)[l3 + 7] <= 1 {
                        let e = ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT);
                        icmp::error6(cx, &p, e);
                        cx.drop(p, Drop::TtlExpired);
                        continue;
                    }
                    let Some(&mac) = neigh.get(&(out.id, nbr)) else {
                        cx.c.neigh_miss.add(1);
                        cx.punt(p);
                        continue;
                    };
                    if fill == Fill::ByTuple {
                        cx.st.fc6t.put(tuples[i], generation, out.id, mac.0);
                    }
                    if !ecmp {
                        if fill == Fill::ByDst {
                            cx.st.fc6.put(dst.to_bits(), generation, out.id, mac.0);
                        }
                        if let NextHop::Via { .. } = *hop {
                            // The neighbour depends on the route alone (not on the destination,
                            // as for attached routes), so the id resolves it.
                            cx.st
                                .adj6
                                .put(id.map_or(0, |i| i.get()), generation, out.id, mac.0);
                        }
                    } else if let Some(members) =
                        adjcache::resolve_members(set, &neigh, |v| cx.vif(v).is_some())
                    {
                        let id = id.map_or(0, |i| i.get());
                        cx.st.adj6.put_ecmp(id, generation, &members);
                    }
                    (out, mac.0)
                }
            }
        };
        let m = *pool.meta(&p);
        let frame = pool.frame(&p);
        let src = ipv6::Packet::new_unchecked(&frame[l3..]).src_addr();
        if is_link_local(&src) && out.id != m.vif {
            // RFC 4291 §2.5.6, RFC 4007 §9: a link-local source must not leave its link.
            // Back out of the VIF it came in by, it stays on the link and is forwarded (as
            // Linux's `ip6_forward` does).
            let e = ErrorMessage::DstUnreachable(UnreachableCode::BEYOND_SCOPE);
            icmp::error6(cx, &p, e);
            cx.drop(p, Drop::Ip6BadSource);
            continue;
        }
        if frame[l3 + 7] <= 1 {
            let e = ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT);
            icmp::error6(cx, &p, e);
            cx.drop(p, Drop::TtlExpired);
            continue;
        }
        let total = usize::from(m.len) - l3;
        if total > usize::from(out.config.mtu) {
            let mtu = u32::from(out.config.mtu);
            icmp::error6(cx, &p, ErrorMessage::PacketTooBig { mtu });
            cx.drop(p, Drop::MtuExceeded);
            continue;
        }
        pool.frame_mut(&mut p)[l3 + 7] -= 1;
        if let Some((fp, fast_gen)) = cx.fast
            && per_dst
        {
            let from = (m.port, m.vif);
            super::offer(cx, fp, fast_gen, from, IpAddr::V6(dst), out, mac);
        }
        l2::rewrite(
            pool,
            &mut p,
            EthernetAddress(mac),
            out.config.mac,
            out.config.vlan,
            0x86dd,
        );
        cx.send(p, out);
    }
    cx.count(Node::Forward, n, cycles().wrapping_sub(t1));
}
