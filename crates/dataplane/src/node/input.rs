//! `vr-input`: the first node of a VR's vector — split by protocol — and the inject path.

use crate::counters::{Drop, Node, VifCounters};
use crate::flow::{Class, L2_GROUP};
use crate::node::{Ctx, Scratch, cycles};
use crate::pool::MAX_FRAME;
use crate::vector::PktVec;

/// Frames the control plane injected: sent as they are out of their VIF's port.
pub(crate) fn inject(cx: &mut Ctx<'_>, v: &mut PktVec) {
    for p in v.drain(..) {
        let m = *cx.pool.meta(&p);
        match cx.vif(m.vif) {
            Some(vif) if usize::from(m.len) <= MAX_FRAME && m.len >= 14 => {
                cx.c.injected.add(1);
                cx.send(p, vif);
            }
            _ => cx.drop(p, Drop::InjectBad),
        }
    }
}

/// Split a VR's vector by L3 class and run each part through its path.
///
/// Out of line: inlined into `Worker::run_vr` (as a change of the forward path's size
/// once made LLVM do) it cost 1–2 instructions per packet, with one VR and with 100.
#[inline(never)]
pub(crate) fn vr_input(cx: &mut Ctx<'_>, v: &mut PktVec, sc: &mut Scratch) {
    if v.is_empty() {
        return;
    }
    let t0 = cycles();
    let n = v.len();
    // A vector that waited in the ingress ring over several polls (many VRs, coalesced
    // runs) has left the cache: start loading every packet's metadata and headers now.
    // (Not when it was received this poll: then they are still warm and prefetching costs
    // 2 cycles a packet for nothing.)
    if cx.waited {
        for p in v.iter() {
            cx.pool.prefetch_all(p);
        }
    }
    let mut v4 = PktVec::new();
    let mut v6 = PktVec::new();
    // IPv4 frames sent to a link-layer group address, apart: they take the full checks, and
    // the unicast vector's screen need not look (RFC 1812 §5.3.4; see `ip4::screen`).
    let mut v4_group = PktVec::new();
    // VIF rx counters, added up over runs of packets from the same VIF (a VR's vector
    // mostly comes from one or two). A packet from the run's VIF needs no lookup: the VIF
    // table does not change while a vector runs.
    let mut run: Option<&VifCounters> = None;
    let mut run_vif = u32::MAX;
    let (mut run_pkts, mut run_bytes) = (0u64, 0u64);
    for p in v.drain(..) {
        let m = *cx.pool.meta(&p);
        if u32::from(m.vif) != run_vif {
            let Some(vif) = cx.vif(m.vif) else {
                cx.drop(p, Drop::VifGone);
                continue;
            };
            if let Some(r) = run {
                r.rx_packets.add(run_pkts);
                r.rx_bytes.add(run_bytes);
            }
            run = Some(&*vif.counters[cx.worker]);
            run_vif = u32::from(m.vif);
            (run_pkts, run_bytes) = (0, 0);
        }
        run_pkts += 1;
        run_bytes += u64::from(m.len);
        match Class::from_u8(m.class) {
            Class::Ipv4 if m.class & L2_GROUP == 0 => v4.push(p),
            Class::Ipv4 => v4_group.push(p),
            Class::Ipv6 => v6.push(p),
            Class::Arp => cx.punt(p),
            Class::Other => cx.drop(p, Drop::UnknownEthertype),
        }
    }
    if let Some(r) = run {
        r.rx_packets.add(run_pkts);
        r.rx_bytes.add(run_bytes);
    }
    cx.count(Node::VrInput, n, cycles().wrapping_sub(t0));
    if !v4.is_empty() {
        crate::node::ip4::ip4::<false>(cx, &mut v4, sc);
    }
    if !v4_group.is_empty() {
        crate::node::ip4::ip4::<true>(cx, &mut v4_group, sc);
    }
    if !v6.is_empty() {
        crate::node::ip6::ip6(cx, &mut v6, sc);
    }
}
