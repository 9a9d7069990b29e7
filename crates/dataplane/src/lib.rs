//! vrhost's data plane: many virtual routers forwarding on a few cores.
//!
//! The packet's way through (DESIGN.md): a worker receives a burst from a port
//! ([`port::RxQueue`]) into the [`Pool`]; demux finds each frame's (VR, VIF) by VLAN and
//! destination MAC (or a match rule) and queues it on that VR's bounded ingress ring — the
//! only place an admitted packet may wait, and where overload is shed, counted per VR. The
//! VR's owner worker then takes a vector from the ring and runs it to completion: validate,
//! punt what is for the router itself, look up the FIB, resolve the neighbour, rewrite, and
//! stage it for the egress port's tx ring; a full tx ring is a counted drop, never a retry.
//!
//! Nothing here knows Linux: ports come in as [`port::RxQueue`]/[`port::TxQueue`] objects
//! (the in-memory [`port::mem`] backend lives here for tests and benches; AF_XDP, AF_PACKET
//! and tap live in `vrhost-io`), and the control plane drives a [`Dataplane`] handle.
//!
//! * [`Dataplane`] — add/remove VRs and VIFs while traffic runs; counters.
//! * [`Worker`] — one forwarding thread's loop.
//! * [`Vr`], [`Vif`], [`VrConfig`], [`VifConfig`], [`DemuxKey`] — the model.
//! * [`Pool`], [`Pkt`], [`PktVec`] — packets and vectors.
//! * [`counters`] — per-worker counters, drop reasons, nodes; [`wait`] — how long packets
//!   wait in a VR's ingress ring.

pub mod counters;
mod dataplane;
mod deferral;
mod demux;
mod error;
pub mod fastpath;
mod feeder;
pub mod flow;
mod mactable;
mod neigh;
mod node;
pub mod placement;
mod policer;
mod pool;
pub mod port;
mod prefetch;
pub mod ring;
pub mod scale;
pub mod sched;
mod tx;
mod vector;
mod vr;
pub mod wait;
mod wake;
mod worker;

pub use counters::{Drop, Node, NodeStats, PortStats, VifStats, VrStats, WaitStats};
pub use dataplane::{
    DEFAULT_FLOW_CACHE, DEFAULT_MAX_DEFERRAL, Dataplane, DataplaneConfig, MAX_DEFERRAL,
    MAX_FLOW_CACHE, MAX_MTU, MAX_WEIGHT, RunVrs, WorkerStats,
};
pub use demux::{ArpRules, Copies, L2Info, PortDemux, Verdict, VifRef, parse_l2};
pub use error::DpError;
pub use fastpath::{FastFlow, FastPath};
pub use neigh::{NeighMap, NeighTable};
pub use pool::{COLOURED_FRAME, HEADROOM, MAX_FRAME, MIN_FRAME, Meta, Pkt, Pool, SLOT_SIZE};
pub use sched::{Fairness, Scheduler, Watchdog, jain};
pub use vector::{PktVec, VECTOR};
pub use vr::{
    DemuxKey, FlowCacheKey, FlowKey, IfAddr, IpPrefix, MatchRule, Vif, VifConfig, VifId, Vr,
    VrConfig, VrId,
};
pub use worker::{CostModel, Worker};

/// The TSC (0 where there is none): the clock the data plane's cycle counters use.
pub fn tsc() -> u64 {
    node::cycles()
}

/// TSC ticks per second, measured against the monotonic clock over `d` (to turn a time
/// budget into cycles, e.g. the watchdog's).
pub fn tsc_hz(d: std::time::Duration) -> f64 {
    let (t, c) = (std::time::Instant::now(), node::cycles());
    std::thread::sleep(d);
    node::cycles().wrapping_sub(c) as f64 / t.elapsed().as_secs_f64()
}
