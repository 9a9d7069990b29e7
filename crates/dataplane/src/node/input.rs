//! `vr-input`: the first node of a VR's vector — split by protocol — and the inject path.

use crate::counters::{Drop, Node};
use crate::flow::Class;
use crate::node::{Ctx, cycles};
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
pub(crate) fn vr_input(cx: &mut Ctx<'_>, v: &mut PktVec) {
    if v.is_empty() {
        return;
    }
    let t0 = cycles();
    let n = v.len();
    let mut v4 = PktVec::new();
    let mut v6 = PktVec::new();
    for p in v.drain(..) {
        let m = *cx.pool.meta(&p);
        if cx.vif(m.vif).is_none() {
            cx.drop(p, Drop::VifGone);
            continue;
        }
        match Class::from_u8(m.class) {
            Class::Ipv4 => v4.push(p),
            Class::Ipv6 => v6.push(p),
            Class::Arp => cx.punt(p),
            Class::Other => cx.drop(p, Drop::UnknownEthertype),
        }
    }
    cx.count(Node::VrInput, n, cycles().wrapping_sub(t0));
    if !v4.is_empty() {
        crate::node::ip4::ip4(cx, &mut v4);
    }
    if !v6.is_empty() {
        crate::node::ip6::ip6(cx, &mut v6);
    }
}
