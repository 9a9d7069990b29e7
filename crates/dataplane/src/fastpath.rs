//! The fast path: forwarding decisions the data plane hands to a forwarder in front of it.
//!
//! Tanyingyong's Quickpath (seed 003) caches the decisions of established flows where frames
//! arrive, so that their frames are forwarded "without further software processing"; only
//! a flow's first frames, and whatever is not plain forwarding, take the full path. vrhost's
//! full path is this data plane; a port backend may offer a place in front of it (the
//! AF_XDP backend's XDP program, `vrhost_io::quickpath`). This module is the data plane's
//! side of that contract, knowing nothing of where the fast path runs.
//!
//! **What is offered.** When a forwarding node (IPv4 or IPv6) forwards a plain packet —
//! unicast, TTL or hop limit above 1, within the egress MTU, not from an ECMP set (a flow
//! keyed by its destination alone would pin every flow to that destination to one member),
//! into an untagged VIF demultiplexed by its MAC and out of an untagged VIF, of a VR with no
//! policer — it offers the decision as a [`FastFlow`]: (ingress port, the VIF's MAC, destination) →
//! (egress port, new MACs, MTU), stamped with the VR's *fast generation*. The fast path may
//! take it or not; it must never block or call into the kernel (the worker is forwarding).
//!
//! **Why a generation and how it stays correct.** The fast path may use an entry only while
//! the generation it was offered with equals the one last [`FastPath::publish`]ed for its VR.
//! A VR's fast generation ([`crate::Vr::fast_generation`]) is a sum of counters that only
//! grow — its two FIBs' and its neighbour table's generations and an epoch bumped on every change to
//! its VIFs, policer or quarantine — on top of a base unique to the VR (VR ids are reused:
//! a new VR's base is above every generation an earlier VR with that id could reach). So any
//! change makes every earlier entry of the VR stale, and the value offered is read before the
//! FIB lookups it stamps, so a decision made while a table changed is already stale. Workers
//! publish each VR's generation when it changes, every poll; several may publish, so the fast
//! path keeps the largest it was given (generations only grow; an idle worker publishing late
//! cannot bring a stale one back). A removed VR is published [`retired`]: above all its own
//! generations, below its successor's. Until the next poll publishes a change, the fast path
//! forwards by the old decision — at most one poll of a worker (under a millisecond idle).
//!
//! **What it gives up.** Frames the fast path forwards are not scheduled, policed (a policed
//! VR is never offered) or counted by the workers; the fast path counts them itself
//! ([`FastPath::counts`]). A flow's first frames go the full path and the next ones may
//! overtake them, as in any flow cache placed before a queue.

use std::net::IpAddr;

use crate::port::PortId;
use crate::vr::VrId;

/// Bits of a fast generation below a VR's base (see the module docs).
pub const BASE_SHIFT: u32 = 40;

/// A forwarding decision offered to the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastFlow {
    /// The VR that made it.
    pub vr: VrId,
    /// The VR's fast generation the decision was made at.
    pub generation: u64,
    /// Port the flow's frames arrive on.
    pub in_port: PortId,
    /// Their destination MAC: the ingress VIF's.
    pub in_mac: [u8; 6],
    /// Their destination (IPv4 or IPv6).
    pub dst: IpAddr,
    /// Port they leave by.
    pub out_port: PortId,
    /// Their new destination MAC: the next hop's.
    pub dst_mac: [u8; 6],
    /// Their new source MAC: the egress VIF's.
    pub src_mac: [u8; 6],
    /// The egress VIF's IP MTU: a longer packet takes the full path.
    pub mtu: u16,
}

/// A forwarder in front of the data plane (see the module docs). Set with
/// [`crate::Dataplane::set_fast_path`].
pub trait FastPath: Send + Sync {
    /// Take (or ignore) a decision. Called by workers while forwarding: cheap, never blocks.
    fn offer(&self, flow: &FastFlow);
    /// VR `vr`'s fast generation is now `generation` (keep the largest given).
    fn publish(&self, vr: VrId, generation: u64);
    /// Packets and bytes the fast path forwarded for VR `vr` so far.
    fn counts(&self, vr: VrId) -> (u64, u64);
    /// Called by every worker once per poll (cheap: a few loads), for whatever the fast
    /// path keeps in step with the ports.
    fn tick(&self) {}
}

/// The generation that retires every entry of a VR whose generations start at `base`.
pub fn retired(base: u64) -> u64 {
    base | ((1 << BASE_SHIFT) - 1)
}
