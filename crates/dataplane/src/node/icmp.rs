//! `icmp-error`: ICMP and ICMPv6 errors about packets the VR could not forward.
//!
//! The error is built in a fresh slot (the offending packet is then dropped by its node with
//! its own reason) and sent back the way the offending frame came: out of its ingress VIF, to
//! the MAC it came from. That previous hop is the neighbour that routes toward the source, so
//! no second FIB lookup is needed, and an error is deliverable even when the VR has no route
//! back. Errors are rate-limited per VR (token bucket; `VrConfig::icmp_rate`/`icmp_burst`),
//! and suppressed where RFC 1812 §4.3.2.7 / RFC 4443 §2.4 forbid them.

use vrhost_wire::ethernet::EthernetAddress;
use vrhost_wire::icmpv4::{self, DstUnreachable, TimeExceeded};
use vrhost_wire::ip::Protocol;
use vrhost_wire::{icmpv6, ipv4, ipv6};

use crate::counters::{Drop, Node};
use crate::node::{Ctx, cycles, l2};
use crate::pool::{HEADROOM, Pkt};

/// An ICMPv4 error to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Icmp4 {
    Unreachable(DstUnreachable),
    TimeExceeded,
}

/// Send an ICMPv4 error about `p` (which the caller still owns and will drop). Returns
/// whether one was sent; when not, the reason is counted.
pub(crate) fn error4(cx: &mut Ctx<'_>, p: &Pkt, kind: Icmp4) -> bool {
    let t0 = cycles();
    let built = build4(cx, p, kind);
    send(cx, built, t0)
}

/// Count the `icmp-error` node and send a built error (or count why there is none).
fn send(cx: &mut Ctx<'_>, built: Result<Pkt, Drop>, t0: u64) -> bool {
    cx.count(Node::Icmp, 1, cycles().wrapping_sub(t0));
    match built {
        Ok(q) => {
            cx.c.icmp_sent.add(1);
            match cx.vif(cx.pool.meta(&q).vif) {
                Some(vif) => cx.send(q, vif),
                None => cx.pool.free(q),
            }
            true
        }
        Err(d) => {
            cx.c.drops[d as usize].add(1);
            false
        }
    }
}

/// A slot for an error, and the rate limiter's token for it. The slot first: when the pool
/// is empty no error goes out, and the token stays for the next one.
fn take_slot(cx: &mut Ctx<'_>) -> Result<Pkt, Drop> {
    let q = cx.pool.alloc().ok_or(Drop::IcmpNoBuffer)?;
    if cx.st.icmp_bucket.take(cx.now_ns) {
        Ok(q)
    } else {
        cx.pool.free(q);
        Err(Drop::IcmpRateLimited)
    }
}

fn build4(cx: &mut Ctx<'_>, p: &Pkt, kind: Icmp4) -> Result<Pkt, Drop> {
    let m = *cx.pool.meta(p);
    let frame = cx.pool.frame(p);
    let l3 = &frame[usize::from(m.l3)..];
    let off = ipv4::Packet::new_unchecked(l3);
    if off.check_header().is_err() || !icmpv4::may_send_error(&off) || frame[0] & 1 != 0 {
        return Err(Drop::IcmpSuppressed);
    }
    // A source that is the VR's own (its address or a subnet broadcast) names no host to
    // tell (RFC 1812 §4.3.2.7): the packet was spoofed or looped.
    if cx.is_local(off.src_addr().into()) {
        return Err(Drop::IcmpSuppressed);
    }
    let vif = cx.vif(m.vif).ok_or(Drop::IcmpNoSource)?;
    let src = vif.ipv4().ok_or(Drop::IcmpNoSource)?;
    let repr = match kind {
        Icmp4::Unreachable(r) => icmpv4::Repr::dst_unreachable(r, l3),
        Icmp4::TimeExceeded => icmpv4::Repr::time_exceeded(TimeExceeded::TtlExpired, l3),
    }
    .map_err(|_| Drop::IcmpSuppressed)?;
    let prev_hop = EthernetAddress::from_bytes(&frame[6..12]);
    let dst = off.src_addr();
    let mut q = take_slot(cx)?;
    let ip_len = ipv4::HEADER_LEN + repr.buffer_len();
    {
        let (qm, slot) = cx.pool.slot_mut(&mut q);
        let start = HEADROOM;
        qm.off = start as u16;
        qm.len = (14 + ip_len) as u16;
        qm.l3 = 14;
        qm.vif = m.vif;
        qm.vr = m.vr;
        let buf = &mut slot[start + 14..start + 14 + ip_len];
        let mut ip = ipv4::Packet::new_unchecked(&mut *buf);
        ip.set_version(4);
        ip.set_header_len(ipv4::HEADER_LEN);
        // Precedence "internetwork control", as Linux sends its errors.
        ip.set_dscp(0x30);
        ip.set_ecn(0);
        ip.set_total_len(ip_len as u16);
        ip.set_ident(0);
        ip.clear_flags();
        ip.set_frag_offset(0);
        ip.set_ttl(64);
        ip.set_protocol(Protocol::ICMP);
        ip.set_src_addr(src);
        ip.set_dst_addr(dst);
        ip.fill_checksum();
        let mut icmp = icmpv4::Packet::new_unchecked(&mut buf[ipv4::HEADER_LEN..]);
        repr.emit(&mut icmp);
    }
    let vlan = vif.config.vlan;
    l2::rewrite(cx.pool, &mut q, prev_hop, vif.config.mac, vlan, 0x0800);
    Ok(q)
}

/// An ICMPv6 error to send.
pub(crate) type Icmp6 = icmpv6::ErrorMessage;

/// Send an ICMPv6 error about `p` (still owned by the caller). As [`error4`].
pub(crate) fn error6(cx: &mut Ctx<'_>, p: &Pkt, kind: Icmp6) -> bool {
    let t0 = cycles();
    let built = build6(cx, p, kind);
    send(cx, built, t0)
}

fn build6(cx: &mut Ctx<'_>, p: &Pkt, kind: Icmp6) -> Result<Pkt, Drop> {
    let m = *cx.pool.meta(p);
    let frame = cx.pool.frame(p);
    let l3 = &frame[usize::from(m.l3)..];
    if !icmpv6::error_permitted(l3, kind) || frame[0] & 1 != 0 {
        return Err(Drop::IcmpSuppressed);
    }
    let off = ipv6::Packet::new_checked(l3).map_err(|_| Drop::IcmpSuppressed)?;
    // A source that is the VR's own (its address, or a subnet-router anycast address,
    // which RFC 4443 §2.4 (e.6) excludes) names no host to tell.
    if cx.is_local(off.src_addr().into()) {
        return Err(Drop::IcmpSuppressed);
    }
    let vif = cx.vif(m.vif).ok_or(Drop::IcmpNoSource)?;
    let src = vif.ipv6().ok_or(Drop::IcmpNoSource)?;
    let prev_hop = EthernetAddress::from_bytes(&frame[6..12]);
    let dst = off.src_addr();
    let mut q = take_slot(cx)?;
    {
        let (qm, slot) = cx.pool.slot_mut(&mut q);
        let start = HEADROOM;
        let n = icmpv6::emit_error(&mut slot[start + 14..], src, dst, 64, kind, l3)
            .map_err(|_| Drop::IcmpNoBuffer);
        let n = match n {
            Ok(n) => n,
            Err(d) => {
                cx.pool.free(q);
                return Err(d);
            }
        };
        qm.off = start as u16;
        qm.len = (14 + n) as u16;
        qm.l3 = 14;
        qm.vif = m.vif;
        qm.vr = m.vr;
    }
    l2::rewrite(
        cx.pool,
        &mut q,
        prev_hop,
        vif.config.mac,
        vif.config.vlan,
        0x86dd,
    );
    Ok(q)
}
