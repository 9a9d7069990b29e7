//! The IPv4 path: `ip4-input` (RFC 1812 §5.2.2 checks, local and link-local traffic) and
//! `forward` (FIB, ECMP, adjacency, TTL, MTU, rewrite).
//!
//! Work is done in passes over the whole vector — validate all, look all up with one batch
//! FIB call, then resolve and rewrite all — so that each pass's memory accesses for different
//! packets overlap (the FIB's batch lookup walks all addresses level by level).

use std::net::{IpAddr, Ipv4Addr};

use vrhost_fib::{BATCH, Table, V4};
use vrhost_wire::checksum;
use vrhost_wire::ethernet::EthernetAddress;
use vrhost_wire::icmpv4::DstUnreachable;

use crate::counters::{Drop, Node};
use crate::flow;
use crate::node::adjcache::AdjCache;
use crate::node::flowcache::{FlowCache, Tuple4Key};
use crate::node::icmp::{self, Icmp4};
use crate::node::resolve::{self, Lanes, Lookups, Way};
use crate::node::{Ctx, Refused, Scratch, cycles, l2};
use crate::pool::Pkt;
use crate::vector::{PktVec, VECTOR};
use crate::vr::Vr;
use crate::worker::VrState;

const _: () = assert!(VECTOR <= BATCH);

/// What `ip4-input` decided.
enum Input {
    Forward(Ipv4Addr),
    Punt,
    Drop(Drop),
    /// Never to be forwarded, but it may be to the router itself: punted if the VR's FIB
    /// says the destination is local, else dropped for the reason given (see
    /// [`super::local_or_drop`]).
    LocalOnly(Ipv4Addr, Drop),
    /// Carries IP options: the control plane's, unless its route forwards nothing (see
    /// [`super::punt_unless_refused`]).
    Options(Ipv4Addr),
}

/// Apply a route that forwards nothing: the ICMP error it sends, and the counted drop.
#[inline(never)]
fn refuse(cx: &mut Ctx<'_>, p: Pkt, r: Refused) {
    let code = match r {
        Refused::NoRoute => Some(DstUnreachable::NetUnreachable),
        Refused::Blackhole => None,
        Refused::Unreachable => Some(DstUnreachable::HostUnreachable),
        Refused::Prohibit => Some(DstUnreachable::CommProhibited),
    };
    if let Some(code) = code {
        icmp::error4(cx, &p, Icmp4::Unreachable(code));
    }
    cx.drop(p, r.drop());
}

/// What the way out depends on in IPv4 (see [`resolve`]).
impl resolve::Family for V4 {
    type DstKey = u32;
    type Tuple = u128;
    type TupleKey = Tuple4Key;
    const TTL_AT: usize = 8;

    #[inline(always)]
    fn fib(vr: &Vr) -> &Table<V4> {
        &vr.fib4
    }

    #[inline(always)]
    fn dst_key(a: Ipv4Addr) -> u32 {
        a.to_bits()
    }

    #[inline(always)]
    fn tuple_key(t: u128) -> Tuple4Key {
        Tuple4Key(t)
    }

    #[inline(always)]
    fn ip(a: Ipv4Addr) -> IpAddr {
        IpAddr::V4(a)
    }

    #[inline(always)]
    fn fc(st: &mut VrState) -> &mut FlowCache<u32> {
        &mut st.fc4
    }

    #[inline(always)]
    fn fct(st: &mut VrState) -> &mut FlowCache<Tuple4Key> {
        &mut st.fc4t
    }

    #[inline(always)]
    fn adj(st: &mut VrState) -> &mut AdjCache {
        &mut st.adj4
    }

    #[inline(always)]
    fn lanes(sc: &mut Scratch) -> Lanes<'_, V4> {
        Lanes {
            dsts: &mut sc.dst4,
            miss: &mut sc.miss4,
            tuples: &mut sc.tuple4,
            hits: &mut sc.hits,
            ids: &mut sc.ids,
        }
    }

    #[inline(always)]
    fn hash(l3: &[u8]) -> u32 {
        flow::hash_v4(l3)
    }

    fn time_exceeded(cx: &mut Ctx<'_>, p: &Pkt) {
        icmp::error4(cx, p, Icmp4::TimeExceeded);
    }

    fn refuse(cx: &mut Ctx<'_>, p: Pkt, r: Refused) {
        refuse(cx, p, r);
    }
}

/// Per first octet of an address: [`SRC_OK`] if a source there may be forwarded by the
/// screen, [`DST_OK`] if a destination. Left out, for [`check`] to decide: network 0 and 127
/// (never on the wire), 169 (169.254/16 is link-local; the rest of 169/8 is ordinary and
/// costs the full checks), multicast, and class E as a source. One load per address instead
/// of a chain of compares.
static FIRST_OCTET: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 1;
    while i < 256 {
        let ordinary = i != 127 && i != 169;
        if ordinary && i < 224 {
            t[i] |= SRC_OK;
        }
        // 240/4 destinations below 255/8 are forwarded (class E is routable here, as in
        // Linux); 255/8 is left to `check` for the limited broadcast.
        if ordinary && (i < 224 || i >= 240) && i != 255 {
            t[i] |= DST_OK;
        }
        i += 1;
    }
    t
};
const SRC_OK: u8 = 1;
const DST_OK: u8 = 2;

/// Nearly every packet: version 4, no options, ordinary unicast addresses (and a unicast
/// frame: `vr-input` sends frames to link-layer group addresses through a vector of their
/// own, which skips the screen). One screen for all of it, on the first 20 bytes and the
/// bytes the frame has from the header on (`avail`): the destination and datagram length of
/// a packet to forward, or `None` for [`check`] to decide exactly.
///
/// Why apart from `check`: the screen needs no slice of the whole header, so the caller
/// bounds 20 bytes against the slot, a constant, instead of a range of the frame.
#[inline(always)]
fn screen(h: &[u8; 20], avail: usize) -> Option<(Ipv4Addr, usize)> {
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    // Bit 0: source and destination both ordinary.
    let ordinary = FIRST_OCTET[usize::from(h[12])] & FIRST_OCTET[usize::from(h[16])] >> 1;
    (h[0] == 0x45
        && (20..=avail).contains(&total)
        && header_checksum_ok(h)
        && ordinary & SRC_OK != 0)
        .then(|| (Ipv4Addr::new(h[16], h[17], h[18], h[19]), total))
}

/// RFC 1812 §5.2.2 and the address checks of §5.3.7 (with RFC 3927 §7 for 169.254/16), on
/// the bytes from the IPv4 header on: the whole decision, for what [`screen`] left
/// undecided. Also returns the datagram length (to trim link-layer padding). `l2_group`:
/// the frame was sent to a link-layer broadcast or multicast address, so a unicast datagram
/// in it may only be for the router itself (§5.3.4).
#[inline]
fn check(l3: &[u8], l2_group: bool) -> (Input, usize) {
    use Input::*;
    let Some(h) = l3.first_chunk::<20>() else {
        return (Drop(crate::counters::Drop::Ip4Truncated), 0);
    };
    if h[0] >> 4 != 4 {
        return (Drop(crate::counters::Drop::Ip4BadVersion), 0);
    }
    let hl = usize::from(h[0] & 0x0f) * 4;
    if hl < 20 || hl > l3.len() {
        return (Drop(crate::counters::Drop::Ip4BadHeaderLen), 0);
    }
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if total < hl || total > l3.len() {
        return (Drop(crate::counters::Drop::Ip4BadLength), 0);
    }
    if !header_checksum_ok(&l3[..hl]) {
        return (Drop(crate::counters::Drop::Ip4BadChecksum), 0);
    }
    let src = flow::v4_at(l3, 12);
    let dst = flow::v4_at(l3, 16);
    if dst.is_broadcast() {
        // Limited broadcast (DHCP, RIP …): for the control plane, even from 0.0.0.0.
        return (Punt, total);
    }
    let (s0, d0) = (src.octets()[0], dst.octets()[0]);
    // Network 0 ("this network", RFC 1122 §3.2.1.3), 127 (loopback), multicast, class E
    // and the broadcast address are no host's source.
    if s0 == 0 || s0 == 127 || s0 >= 224 {
        return (Drop(crate::counters::Drop::Ip4BadSource), 0);
    }
    if dst.is_multicast() {
        // 224.0.0.0/24 is link-local (OSPF, VRRP, RIPv2 …); other groups need multicast
        // routing, which vrhost does not do.
        return if dst.octets()[..3] == [224, 0, 0] {
            (Punt, total)
        } else {
            (Drop(crate::counters::Drop::Ip4Multicast), 0)
        };
    }
    if d0 == 0 || d0 == 127 {
        return (Drop(crate::counters::Drop::Ip4BadDest), 0);
    }
    if src.is_link_local() {
        return (LocalOnly(dst, crate::counters::Drop::Ip4BadSource), total);
    }
    if dst.is_link_local() {
        return (LocalOnly(dst, crate::counters::Drop::Ip4LinkLocal), total);
    }
    if l2_group {
        return (
            LocalOnly(dst, crate::counters::Drop::Ip4LinkBroadcast),
            total,
        );
    }
    if hl > 20 {
        // IP options (router alert, record route …) are the control plane's business.
        return (Options(dst), total);
    }
    (Forward(dst), total)
}

/// Whether an IPv4 header's checksum is right (its ones'-complement sum is all ones).
///
/// The 20-byte header without options is nearly every packet: five native-endian 32-bit
/// loads summed in a `u64` (byte order does not matter for an all-ones test). Folding the
/// carries back in keeps the sum's residue modulo 0xffff (2^16 ≡ 1), and a nonzero sum never
/// folds to 0, so the folded sum is all ones exactly when the plain sum is a nonzero multiple
/// of 0xffff: one remainder by a constant (a multiply and a few shifts) instead of four folds.
#[inline(always)]
fn header_checksum_ok(h: &[u8]) -> bool {
    if let Ok(h) = <&[u8; 20]>::try_from(h) {
        let w = |i: usize| u64::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
        let acc = w(0) + w(4) + w(8) + w(12) + w(16);
        // `acc − 1 ≡ 0xfffe` is `acc ≡ 0` for nonzero `acc`; 0 wraps to u64::MAX, a
        // multiple of 0xffff, so it fails as it should.
        return acc.wrapping_sub(1) % 0xffff == 0xfffe;
    }
    checksum::data(h) == 0xffff
}

/// The header checksum after TTL − 1: RFC 1624 eqn. 3, `~(~HC + ~m + m')`, where the
/// 16-bit word (TTL, protocol) drops by 0x0100, so `~m + m'` is 0xfeff whatever the
/// word; one fold is enough (0xffff + 0xfeff < 0x1ffff). Bit for bit what
/// `checksum::update_u16` gives for that change.
#[inline(always)]
fn ttl_dec_checksum(hc: u16) -> u16 {
    let x = u32::from(!hc) + 0xfeff;
    !(((x & 0xffff) + (x >> 16)) as u16)
}

/// Run a vector of IPv4 packets of one VR; `L2_GROUP`: all of them came in frames to a
/// link-layer group address (else none did).
pub(crate) fn ip4<const L2_GROUP: bool>(cx: &mut Ctx<'_>, v: &mut PktVec, sc: &mut Scratch) {
    let t0 = cycles();
    let n_in = v.len();
    let pool = cx.pool;
    let mut fwd = PktVec::new();
    let (dsts, tuples) = (&mut sc.dst4, &mut sc.tuple4);
    // A flow cache keyed by 5-tuple takes its keys here, from the header being checked
    // (only for a vector it will probe; see `forward`).
    let take_tuples = cx.st.fc4t.will_probe();
    // Packets that waited in the ingress ring: vr-input started loading them, this brings
    // the headers nearer again (without it 100 VRs took 4 % more cycles). Packets received
    // this poll are still warm; prefetching them cost 1–2 % (`vrbench inproc`, paired runs).
    if cx.waited {
        for p in v.iter() {
            pool.prefetch(p);
        }
    }
    for mut p in v.drain(..) {
        let (m, slot) = pool.slot(&p);
        let (off, l3, len) = (usize::from(m.off), usize::from(m.l3), m.len);
        let at = off + l3;
        let hdr = || slot.get(at..off + usize::from(len)).unwrap_or(&[]);
        let screened = slot
            .get(at..)
            .and_then(<[u8]>::first_chunk::<20>)
            .filter(|_| !L2_GROUP)
            .and_then(|h| screen(h, usize::from(len).saturating_sub(l3)));
        let verdict = match screened {
            Some((dst, total)) => (Input::Forward(dst), total),
            None => check(hdr(), L2_GROUP),
        };
        match verdict {
            (Input::Forward(dst), total) => {
                dsts[fwd.len()] = dst;
                if take_tuples {
                    // The datagram alone: no ports from link-layer padding.
                    tuples[fwd.len()] = flow::tuple_v4(hdr().get(..total).unwrap_or(&[]));
                }
                // Drop link-layer padding so what leaves is the datagram alone.
                let trimmed = (l3 + total) as u16;
                if trimmed != len {
                    pool.meta_mut(&mut p).len = trimmed;
                }
                fwd.push(p);
            }
            (Input::Punt, _) => cx.punt(p),
            (Input::Drop(d), _) => cx.drop(p, d),
            (Input::LocalOnly(dst, d), _) => super::local_or_drop(cx, p, IpAddr::V4(dst), d),
            (Input::Options(dst), total) => {
                // IP options (router alert, record route, timestamp …): the kernel
                // processes them and forwards the packet. An error quotes the datagram
                // alone, so link-layer padding goes first.
                pool.meta_mut(&mut p).len = (l3 + total) as u16;
                super::punt_unless_refused::<V4>(cx, p, dst)
            }
        }
    }
    let t1 = cycles();
    cx.count(Node::Ip4Input, n_in, t1.wrapping_sub(t0));
    if fwd.is_empty() {
        return;
    }
    forward(cx, &mut fwd, sc);
}

/// `flow-cache` + `forward`: look up, resolve and rewrite; the destination of `v[i]` is
/// `sc.dst4[i]`.
fn forward(cx: &mut Ctx<'_>, v: &mut PktVec, sc: &mut Scratch) {
    let pool = cx.pool;
    let n = v.len();
    let mut lk = Lookups::<V4>::new(cx, sc, n);
    let t1 = lk.t1;
    for (i, p) in v.drain(..).enumerate() {
        let Some((mut p, Way { out, mac, per_dst })) = lk.way(cx, i, p) else {
            continue;
        };
        // The common case in one pass over the slot: TTL above 1, within the MTU — TTL − 1
        // with the RFC 1624 checksum update, new L2 header, staged for the port.
        let port = out.config.port;
        let sent = {
            let (m, slot) = pool.slot_mut(&mut p);
            let l3 = usize::from(m.l3);
            let base = usize::from(m.off) + l3;
            let total = usize::from(m.len) - l3;
            let ip = slot.get_mut(base..).and_then(<[u8]>::first_chunk_mut::<12>);
            match ip {
                Some(ip) if ip[8] > 1 && total <= usize::from(out.config.mtu) => {
                    ip[8] -= 1;
                    let sum = ttl_dec_checksum(u16::from_be_bytes([ip[10], ip[11]]));
                    ip[10..12].copy_from_slice(&sum.to_be_bytes());
                    l2::rewrite_slot(
                        m,
                        slot,
                        EthernetAddress(mac),
                        out.config.mac,
                        out.config.vlan,
                        0x0800,
                    );
                    let from = (m.port, m.vif);
                    m.port = port;
                    m.vif = out.id;
                    Some((m.len, from))
                }
                _ => None,
            }
        };
        if let Some((len, (in_port, in_vif))) = sent {
            if let Some((fp, fast_gen)) = cx.fast
                && per_dst
            {
                super::offer(
                    cx,
                    fp,
                    fast_gen,
                    (in_port, in_vif),
                    IpAddr::V4(lk.dst(i)),
                    out,
                    mac,
                );
            }
            cx.send_tagged(p, port, out.id, len);
            continue;
        }
        let m = *pool.meta(&p);
        let l3 = usize::from(m.l3);
        let frame = pool.frame(&p);
        if frame.get(l3 + 8).is_none_or(|&ttl| ttl <= 1) {
            icmp::error4(cx, &p, Icmp4::TimeExceeded);
            cx.drop(p, Drop::TtlExpired);
            continue;
        }
        // Over the MTU (the only other way off the fast path).
        if frame[l3 + 6] & 0x40 != 0 {
            let mtu = out.config.mtu;
            icmp::error4(
                cx,
                &p,
                Icmp4::Unreachable(DstUnreachable::FragRequired { next_hop_mtu: mtu }),
            );
            cx.drop(p, Drop::MtuExceeded);
        } else {
            crate::node::frag::fragment(cx, p, out, EthernetAddress(mac));
        }
    }
    cx.count(Node::Forward, n, cycles().wrapping_sub(t1));
}

#[cfg(test)]
mod header_checksum_tests {
    use super::{header_checksum_ok, ttl_dec_checksum};
    use vrhost_wire::checksum;

    #[test]
    fn ttl_decrement_checksum_is_the_rfc_1624_update() {
        for hc in 0..=u16::MAX {
            for word in [0x0111u16, 0x4006, 0xff11, 0x0200, 0xffff, 0x0100] {
                assert_eq!(
                    ttl_dec_checksum(hc),
                    checksum::update_u16(hc, word, word - 0x0100),
                    "checksum {hc:#06x}, word {word:#06x}"
                );
            }
        }
    }

    #[test]
    fn all_zero_and_all_ones_headers() {
        // A zero sum is "negative zero" folded: not all ones, so wrong.
        assert!(!header_checksum_ok(&[0u8; 20]));
        assert_eq!(checksum::data(&[0u8; 20]), 0);
        // Every byte 0xff: each 16-bit word is already all ones.
        assert!(header_checksum_ok(&[0xffu8; 20]));
        assert_eq!(checksum::data(&[0xffu8; 20]), 0xffff);
    }

    #[test]
    fn fast_path_agrees_with_the_generic_sum() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            let mut h = [0u8; 20];
            for b in &mut h {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            assert_eq!(header_checksum_ok(&h), checksum::data(&h) == 0xffff);
            // Make it valid and check again.
            h[10] = 0;
            h[11] = 0;
            let c = !checksum::data(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            assert!(header_checksum_ok(&h));
            h[3] ^= 1;
            assert!(!header_checksum_ok(&h));
        }
    }
}
