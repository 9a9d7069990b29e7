//! The IPv6 path: `ip6-input` (version, payload length, extension-header chain, scopes,
//! local and link-local traffic, neighbour discovery) and `forward` (FIB, ECMP, adjacency,
//! hop limit, MTU, rewrite). Same pass structure as the IPv4 path.
//!
//! Neighbour discovery and MLD need no special case: NS/NA/RS/RA go to link-local or
//! solicited-node multicast (`ff02::/16`) or to the router's own addresses, all punted; MLD
//! carries a Router Alert option, also punted.

use std::net::{IpAddr, Ipv6Addr};

use vrhost_fib::{Table, V6};
use vrhost_wire::ethernet::EthernetAddress;
use vrhost_wire::icmpv6::{ErrorMessage, TimeExceededCode, UnreachableCode};
use vrhost_wire::ip::Protocol;
use vrhost_wire::ipv6;

use crate::counters::{Drop, Node};
use crate::flow;
use crate::flow::Tuple6;
use crate::node::adjcache::AdjCache;
use crate::node::flowcache::FlowCache;
use crate::node::icmp;
use crate::node::resolve::{self, Lanes, Lookups, Way};
use crate::node::{Ctx, Refused, Scratch, cycles, l2};
use crate::pool::Pkt;
use crate::vector::PktVec;
use crate::vr::Vr;
use crate::worker::VrState;

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

/// What the way out depends on in IPv6 (see [`resolve`]).
impl resolve::Family for V6 {
    type DstKey = u128;
    type Tuple = Tuple6;
    type TupleKey = Tuple6;
    const TTL_AT: usize = 7;

    #[inline(always)]
    fn fib(vr: &Vr) -> &Table<V6> {
        &vr.fib6
    }

    #[inline(always)]
    fn dst_key(a: Ipv6Addr) -> u128 {
        a.to_bits()
    }

    #[inline(always)]
    fn tuple_key(t: Tuple6) -> Tuple6 {
        t
    }

    #[inline(always)]
    fn ip(a: Ipv6Addr) -> IpAddr {
        IpAddr::V6(a)
    }

    #[inline(always)]
    fn fc(st: &mut VrState) -> &mut FlowCache<u128> {
        &mut st.fc6
    }

    #[inline(always)]
    fn fct(st: &mut VrState) -> &mut FlowCache<Tuple6> {
        &mut st.fc6t
    }

    #[inline(always)]
    fn adj(st: &mut VrState) -> &mut AdjCache {
        &mut st.adj6
    }

    #[inline(always)]
    fn lanes(sc: &mut Scratch) -> Lanes<'_, V6> {
        Lanes {
            dsts: &mut sc.dst6,
            miss: &mut sc.miss6,
            tuples: &mut sc.tuple6,
            hits: &mut sc.hits,
            ids: &mut sc.ids,
        }
    }

    #[inline(always)]
    fn hash(l3: &[u8]) -> u32 {
        flow::hash_v6(l3)
    }

    fn time_exceeded(cx: &mut Ctx<'_>, p: &Pkt) {
        let e = ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT);
        icmp::error6(cx, p, e);
    }

    fn refuse(cx: &mut Ctx<'_>, p: Pkt, r: Refused) {
        refuse(cx, p, r);
    }
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
                super::punt_unless_refused::<V6>(cx, p, dst)
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
    let pool = cx.pool;
    let n = v.len();
    let mut lk = Lookups::<V6>::new(cx, sc, n);
    let t1 = lk.t1;
    for (i, p) in v.drain(..).enumerate() {
        let Some((mut p, Way { out, mac, per_dst })) = lk.way(cx, i, p) else {
            continue;
        };
        let m = *pool.meta(&p);
        let l3 = usize::from(m.l3);
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
            <V6 as resolve::Family>::time_exceeded(cx, &p);
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
            super::offer(cx, fp, fast_gen, from, IpAddr::V6(lk.dst(i)), out, mac);
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
