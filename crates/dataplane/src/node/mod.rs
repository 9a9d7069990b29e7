//! The forwarding path's nodes, and the context they run in.
//!
//! A node is a function over a vector of one VR's packets. It either passes a packet on,
//! or ends its journey in exactly one of: staged for a port ([`Ctx::send`]), handed to the
//! control plane ([`Ctx::punt`]), or dropped with a reason ([`Ctx::drop`]). Those three are
//! the only exits, so every packet that enters is accounted for.

pub(crate) mod adjcache;
pub(crate) mod flowcache;
pub(crate) mod frag;
pub(crate) mod icmp;
pub(crate) mod input;
pub(crate) mod ip4;
pub(crate) mod ip6;
pub(crate) mod l2;
pub(crate) mod resolve;

use std::sync::Arc;

use crate::counters::{Drop, N_NODES, Node, NodeCounters, VrCounters};
use crate::pool::{MIN_FRAME, Pkt, Pool};
use crate::tx::{Flush, TxStage};
use crate::vector::VECTOR;
use crate::vr::{Vif, Vr};
use crate::worker::VrState;

/// The forwarding nodes' per-vector arrays, one set per worker, reused by every vector.
///
/// As stack arrays of [`VECTOR`] entries they were initialised on every vector — 5.5 KiB of
/// stores, a fixed cost that the many small vectors of many VRs sharing a port paid per
/// packet (`perf`: 15 % of `vr-input`'s cycles at 64 VRs with vectors of 2). Here only the
/// entries a vector uses are written.
#[derive(Debug)]
pub(crate) struct Scratch {
    pub(crate) dst4: [std::net::Ipv4Addr; VECTOR],
    pub(crate) miss4: [std::net::Ipv4Addr; VECTOR],
    pub(crate) dst6: [std::net::Ipv6Addr; VECTOR],
    pub(crate) miss6: [std::net::Ipv6Addr; VECTOR],
    /// 5-tuple flow-cache keys (only for VRs whose cache is keyed so).
    pub(crate) tuple4: [u128; VECTOR],
    pub(crate) tuple6: [crate::flow::Tuple6; VECTOR],
    /// Flow-cache answers: (VIF, neighbour MAC).
    pub(crate) hits: [Option<(u16, [u8; 6])>; VECTOR],
    /// FIB answers for the flow-cache misses.
    pub(crate) ids: [Option<vrhost_fib::NhId>; VECTOR],
}

impl Scratch {
    pub(crate) fn new() -> Box<Scratch> {
        Box::new(Scratch {
            dst4: [std::net::Ipv4Addr::UNSPECIFIED; VECTOR],
            miss4: [std::net::Ipv4Addr::UNSPECIFIED; VECTOR],
            dst6: [std::net::Ipv6Addr::UNSPECIFIED; VECTOR],
            miss6: [std::net::Ipv6Addr::UNSPECIFIED; VECTOR],
            tuple4: [0; VECTOR],
            tuple6: [crate::flow::Tuple6::default(); VECTOR],
            hits: [None; VECTOR],
            ids: [None; VECTOR],
        })
    }
}

/// Everything a node needs while it runs one VR's vector on one worker.
pub(crate) struct Ctx<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) worker: usize,
    pub(crate) vr: &'a Vr,
    pub(crate) vifs: &'a [Option<Arc<Vif>>],
    /// This worker's counter block of the VR.
    pub(crate) c: &'a VrCounters,
    pub(crate) nodes: &'a [NodeCounters; N_NODES],
    pub(crate) ports: &'a [Box<[crossbeam_utils::CachePadded<crate::counters::PortCounters>]>],
    pub(crate) tx: &'a mut TxStage,
    pub(crate) st: &'a mut VrState,
    /// Nanoseconds on the worker's monotonic clock, read once per poll.
    pub(crate) now_ns: u64,
    /// The vector waited in the ingress ring over more than one poll.
    pub(crate) waited: bool,
    /// The fast path to offer decisions to, and the VR's fast generation read before this
    /// vector's lookups (see [`crate::fastpath`]); `None` without a fast path or while the
    /// VR is policed.
    pub(crate) fast: Option<(&'a dyn crate::fastpath::FastPath, u64)>,
}

impl<'a> Ctx<'a> {
    /// Whether the VR's FIB has `a` as one of its own (local) addresses: an interface
    /// address, an IPv4 subnet broadcast or an IPv6 subnet-router anycast address. A FIB
    /// lookup: for rare packets only.
    #[inline(never)]
    pub(crate) fn is_local(&self, a: std::net::IpAddr) -> bool {
        fn local<F: vrhost_fib::Family>(t: &vrhost_fib::Table<F>, a: F::Addr) -> bool {
            let guard = vrhost_fib::pin();
            t.lookup(a, &guard)
                .and_then(|id| t.nexthops(id, &guard))
                .is_some_and(|set| matches!(set.hops().first(), Some(vrhost_fib::NextHop::Local)))
        }
        match a {
            std::net::IpAddr::V4(a) => local(&self.vr.fib4, a),
            std::net::IpAddr::V6(a) => local(&self.vr.fib6, a),
        }
    }

    /// End of the road: free the packet and count why.
    #[inline(always)]
    pub(crate) fn drop(&mut self, p: Pkt, why: Drop) {
        self.c.drops[why as usize].add(1);
        self.pool.free(p);
    }

    /// Hand a packet to the VR's control plane (policed; a full queue is a counted drop).
    #[inline]
    pub(crate) fn punt(&mut self, p: Pkt) {
        if !self.st.punt_bucket.take(self.now_ns) {
            return self.drop(p, Drop::PuntPoliced);
        }
        match self.vr.punt.push(p) {
            Ok(()) => self.c.punted.add(1),
            Err(p) => self.drop(p, Drop::PuntFull),
        }
    }

    /// The VIF with id `id`, if the VR still has it.
    #[inline(always)]
    pub(crate) fn vif(&self, id: u16) -> Option<&'a Arc<Vif>> {
        self.vifs.get(usize::from(id)).and_then(Option::as_ref)
    }

    /// Stage a finished frame to leave by `vif`.
    #[inline(always)]
    pub(crate) fn send(&mut self, mut p: Pkt, vif: &Vif) {
        let m = self.pool.meta_mut(&mut p);
        m.port = vif.config.port;
        m.vif = vif.id;
        let len = m.len;
        self.send_tagged(p, vif.config.port, vif.id, len);
    }

    /// Stage a finished frame whose metadata already names its egress `port` and `vif`.
    /// A frame shorter than [`MIN_FRAME`] is padded to it first.
    #[inline(always)]
    pub(crate) fn send_tagged(&mut self, mut p: Pkt, port: u16, vif: u16, mut len: u16) {
        if len < MIN_FRAME {
            len = self.pad(&mut p);
        }
        if let Err(p) = self.tx.try_push(p, port, vif, len) {
            let mut f = self.settle();
            self.tx.flush_port(usize::from(port), &mut f);
            // The flush emptied the stage, so this cannot fail; were it to, the packet is
            // still accounted for.
            if let Err(p) = self.tx.try_push(p, port, vif, len) {
                self.drop(p, Drop::TxFull);
            }
        }
    }

    /// Pad a short frame with zeros to [`MIN_FRAME`] bytes; returns its new length. Out of
    /// line: only frames that shrank here are short (a datagram trimmed of the link-layer
    /// padding it came with, a VLAN tag popped, a last fragment), or ones the control plane
    /// sent (an ARP reply is 42 bytes).
    #[cold]
    #[inline(never)]
    fn pad(&mut self, p: &mut Pkt) -> u16 {
        let (m, slot) = self.pool.slot_mut(p);
        let (off, len) = (usize::from(m.off), usize::from(m.len));
        // Frames start in the headroom or at the start of a slot of 2 KiB: there is room.
        if let Some(tail) = slot.get_mut(off + len..off + usize::from(MIN_FRAME)) {
            tail.fill(0);
            m.len = MIN_FRAME;
        }
        m.len
    }

    /// Send everything staged.
    pub(crate) fn flush(&mut self) {
        let mut f = self.settle();
        self.tx.flush(&mut f);
    }

    /// What a tx flush needs to settle this VR's counters.
    #[inline(always)]
    fn settle(&self) -> Flush<'a> {
        Flush {
            pool: self.pool,
            worker: self.worker,
            ports: self.ports,
            vr: self.c,
            vifs: self.vifs,
        }
    }

    /// Count a node's vector.
    #[inline]
    pub(crate) fn count(&self, node: Node, packets: usize, cycles: u64) {
        let n = &self.nodes[node as usize];
        n.packets.add(packets as u64);
        n.vectors.add(1);
        n.sampled_packets.add(packets as u64);
        n.cycles.add(cycles);
    }
}

/// A token bucket over the worker's clock (rate limits for ICMP errors and punts).
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    /// Tokens per second; 0 = unlimited.
    rate: u64,
    burst: u64,
    /// Tokens × 1e9 (nanotokens), so refills need no division per packet.
    nano: u64,
    last_ns: u64,
}

impl Bucket {
    pub(crate) fn new(rate: u32, burst: u32) -> Bucket {
        let burst = u64::from(burst.max(1));
        Bucket {
            rate: u64::from(rate),
            burst,
            nano: burst * 1_000_000_000,
            last_ns: 0,
        }
    }

    /// Take one token if there is one.
    #[inline]
    pub(crate) fn take(&mut self, now_ns: u64) -> bool {
        if self.rate == 0 {
            return true;
        }
        let cap = self.burst * 1_000_000_000;
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = now_ns;
        self.nano = self
            .nano
            .saturating_add(dt.saturating_mul(self.rate))
            .min(cap);
        if self.nano >= 1_000_000_000 {
            self.nano -= 1_000_000_000;
            true
        } else {
            false
        }
    }
}

/// TSC cycles (0 where there is no TSC).
#[inline(always)]
pub(crate) fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// A route that forwards nothing, and what it does instead (each family's `refuse` sends
/// its ICMP error: none for a blackhole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No route.
    NoRoute,
    /// A blackhole route: silence.
    Blackhole,
    /// An unreachable route.
    Unreachable,
    /// A prohibit route.
    Prohibit,
}

impl Refused {
    /// Whether the next hop a packet takes (`None`: no route) forwards nothing.
    pub(crate) fn of(hop: Option<vrhost_fib::NextHop>) -> Option<Refused> {
        use vrhost_fib::NextHop;
        match hop {
            None => Some(Refused::NoRoute),
            Some(NextHop::Drop) => Some(Refused::Blackhole),
            Some(NextHop::Unreachable) => Some(Refused::Unreachable),
            Some(NextHop::Prohibit) => Some(Refused::Prohibit),
            Some(NextHop::Via { .. } | NextHop::Attached { .. } | NextHop::Local) => None,
        }
    }

    /// The drop it is counted as.
    pub(crate) fn drop(self) -> Drop {
        match self {
            Refused::NoRoute => Drop::NoRoute,
            Refused::Blackhole => Drop::Blackhole,
            Refused::Unreachable => Drop::Unreachable,
            Refused::Prohibit => Drop::Prohibited,
        }
    }
}

/// A packet for the control plane by what it carries (IPv4 options, an IPv6 Router Alert)
/// rather than by where it goes: punted, unless the route for `dst` in the VR's table of
/// family `F` forwards nothing, which is applied as `forward` would (`F::refuse`), so that
/// such packets carry nothing past a blackhole onto the punt path (policed, and shared with
/// the VR's ARP and routing protocols). A FIB lookup per packet, for packets that are rare.
#[inline(never)]
pub(crate) fn punt_unless_refused<F: resolve::Family>(cx: &mut Ctx<'_>, p: Pkt, dst: F::Addr) {
    let hop = {
        let guard = vrhost_fib::pin();
        let fib = F::fib(cx.vr);
        fib.lookup(dst, &guard)
            .and_then(|id| fib.nexthops(id, &guard))
            .map(|set| match set.hops() {
                [one] => *one,
                _ => {
                    let l3 = usize::from(cx.pool.meta(&p).l3);
                    *set.select(F::hash(&cx.pool.frame(&p)[l3..]))
                }
            })
    };
    match Refused::of(hop) {
        Some(r) => F::refuse(cx, p, r),
        None => cx.punt(p),
    }
}

/// A packet `ip4-input` or `ip6-input` found must not be forwarded (a link-local address,
/// a unicast datagram in a link-layer group frame) but may be to the router itself: punted
/// if the VR's FIB has `dst` as a local address, else dropped as `why`. A FIB lookup per
/// packet, for packets that are rare; they never reach `forward`, so neither cache there can
/// send them on.
#[inline(never)]
pub(crate) fn local_or_drop(cx: &mut Ctx<'_>, p: Pkt, dst: std::net::IpAddr, why: Drop) {
    if cx.is_local(dst) {
        cx.punt(p);
    } else {
        cx.drop(p, why);
    }
}

/// Offer the fast path a plain forwarding decision for `dst` (see [`crate::fastpath`]): only
/// between untagged VIFs, the ingress one demultiplexed by its MAC alone (what a frame's
/// port and destination MAC identify).
#[inline(never)]
pub(crate) fn offer(
    cx: &Ctx<'_>,
    fp: &dyn crate::fastpath::FastPath,
    generation: u64,
    (in_port, in_vif): (u16, u16),
    dst: std::net::IpAddr,
    out: &Vif,
    mac: [u8; 6],
) {
    let Some(vin) = cx.vif(in_vif) else { return };
    if vin.config.vlan.is_some()
        || vin.config.key != crate::vr::DemuxKey::Mac
        || out.config.vlan.is_some()
    {
        return;
    }
    fp.offer(&crate::fastpath::FastFlow {
        vr: cx.vr.id,
        generation,
        in_port,
        in_mac: vin.config.mac.0,
        dst,
        out_port: out.config.port,
        dst_mac: mac,
        src_mac: out.config.mac.0,
        mtu: out.config.mtu,
    });
}

#[cfg(test)]
mod tests {
    use super::Bucket;

    #[test]
    fn bucket_allows_burst_then_rate() {
        let mut b = Bucket::new(10, 3);
        let t0 = 1_000_000_000;
        assert!(b.take(t0) && b.take(t0) && b.take(t0));
        assert!(!b.take(t0));
        // 100 ms later: one token (10/s).
        assert!(b.take(t0 + 100_000_000));
        assert!(!b.take(t0 + 100_000_000));
        let mut u = Bucket::new(0, 0);
        assert!((0..1000).all(|_| u.take(0)));
    }
}
