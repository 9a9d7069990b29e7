//! The virtual-router model: a VR, its interfaces (VIFs), and how frames find them.
//!
//! A [`Vr`] is shared (`Arc`) between the control side and every worker. What a worker reads
//! per packet — FIBs, neighbours — is lock-free; what changes rarely — the VIF list and the
//! demux tables — lives in the data plane's published snapshot and is replaced whole.
//!
//! Next hops name interfaces by [`VifId`] (the VIF's index in its VR): a FIB route
//! `Via { addr, ifindex }` leaves by VIF `ifindex`. The control plane translates kernel
//! ifindexes to VIF ids when it mirrors routes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use vrhost_fib::{Fib4, Fib6, Prefix4, Prefix6};
use vrhost_wire::ethernet::EthernetAddress;

use crate::counters::{VifCounters, VifStats, VrCounters, VrStats};
use crate::neigh::NeighTable;
use crate::policer::Policer;
use crate::pool::{Pkt, Pool};
use crate::port::PortId;
use crate::ring::{Consumer, Producer};
use crate::worker::Handoff;

/// Index of a VR in the data plane.
pub type VrId = u16;
/// Index of a VIF within its VR.
pub type VifId = u16;

/// How frames on a port are matched to a VIF.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DemuxKey {
    /// Frames to the VIF's own MAC (on its VLAN, if any): the macvlan model. The default.
    #[default]
    Mac,
    /// Every frame on the VIF's VLAN addressed to its MAC or to a group address: a router
    /// sub-interface. The VIF must have a VLAN.
    Vlan,
    /// Frames to the VIF's MAC that also match a rule: several VIFs (of different VRs) may
    /// share one MAC and split its traffic by addresses and ports. Rules sharing a MAC are
    /// tried in the order the VIFs were added; the first match wins.
    Rule(MatchRule),
}

/// An IPv4 or IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPrefix {
    /// IPv4.
    V4(Prefix4),
    /// IPv6.
    V6(Prefix6),
}

impl IpPrefix {
    /// Whether `addr` is inside the prefix (false across families).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self, addr) {
            (IpPrefix::V4(p), IpAddr::V4(a)) => p.contains(a),
            (IpPrefix::V6(p), IpAddr::V6(a)) => p.contains(a),
            _ => false,
        }
    }
}

/// Fields a [`DemuxKey::Rule`] matches; `None` matches anything, and a rule with no field
/// set takes every frame to its MAC. An ARP frame is matched on the address fields alone,
/// its sender and target protocol addresses standing for source and destination (a rule's
/// protocol and ports are not looked at), and every VIF whose rule takes it gets a copy, not
/// only the first: the VR whose prefix holds an address gets the ARP for it, and VRs that
/// split one MAC by protocol or port all get the replies to their requests. Other frames that
/// are not IP, and IP packets whose header cannot be read, are taken only by the first rule
/// with no field set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MatchRule {
    /// Destination prefix.
    pub dst: Option<IpPrefix>,
    /// Source prefix.
    pub src: Option<IpPrefix>,
    /// IP protocol (6 TCP, 17 UDP, …).
    pub protocol: Option<u8>,
    /// TCP/UDP source port.
    pub src_port: Option<u16>,
    /// TCP/UDP destination port.
    pub dst_port: Option<u16>,
}

/// The fields of a packet a [`MatchRule`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol.
    pub protocol: u8,
    /// Source port (0 if none).
    pub src_port: u16,
    /// Destination port (0 if none).
    pub dst_port: u16,
}

impl MatchRule {
    /// Whether no field is set (the rule takes every frame).
    pub fn is_any(&self) -> bool {
        *self == MatchRule::default()
    }

    /// Whether the rule matches a packet with these fields.
    pub fn matches(&self, k: &FlowKey) -> bool {
        self.dst.is_none_or(|p| p.contains(k.dst))
            && self.src.is_none_or(|p| p.contains(k.src))
            && self.protocol.is_none_or(|p| p == k.protocol)
            && self.src_port.is_none_or(|p| p == k.src_port)
            && self.dst_port.is_none_or(|p| p == k.dst_port)
    }
}

/// An address on a VIF (`ip addr add ADDR/LEN dev VIF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfAddr {
    /// IPv4 address and prefix length.
    V4(Ipv4Addr, u8),
    /// IPv6 address and prefix length.
    V6(Ipv6Addr, u8),
}

impl IfAddr {
    /// The /32 and /128 routes the address makes local (punted, for the router itself),
    /// as a kernel forwarding for the interface has them in its `local` table: the address;
    /// for IPv4 up to /30 the subnet broadcast; for IPv6 below /127 the subnet-router
    /// anycast address, the prefix with a zero interface id (RFC 4291 §2.6.1; /127 and /128
    /// links have no such address, RFC 6164). `Dataplane::add_vif` installs these, and the
    /// control plane's kernel mirror makes the same of the namespace's addresses.
    pub fn local_prefixes(&self) -> (Vec<Prefix4>, Vec<Prefix6>) {
        match *self {
            IfAddr::V4(ip, len) => {
                let mut v = vec![Prefix4::new_masked(ip, 32)];
                if len <= 30 {
                    let bcast = u32::from(ip) | (u32::MAX >> len);
                    v.push(Prefix4::new_masked(bcast.into(), 32));
                }
                (v, vec![])
            }
            IfAddr::V6(ip, len) => {
                let mut v = vec![Prefix6::new_masked(ip, 128)];
                if (1..127).contains(&len) {
                    let anycast = u128::from(ip) & !(u128::MAX >> len);
                    v.push(Prefix6::new_masked(anycast.into(), 128));
                }
                (vec![], v)
            }
        }
    }
}

/// How to create a VR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VrConfig {
    /// Unique name.
    pub name: String,
    /// Scheduling weight (relative share of its worker when backlogged), 1..=1,000,000.
    pub weight: u32,
    /// Worker that runs the VR's forwarding path, pinned (placement never moves it); `None`
    /// = placed on the least loaded worker and moved as load changes.
    pub worker: Option<usize>,
    /// Ingress rate limit in packets per second, policed at demux (`None` = none).
    pub policer_pps: Option<u64>,
    /// Ingress rate limit in bits per second (frame bytes without FCS × 8), policed at
    /// demux (`None` = none).
    pub policer_bps: Option<u64>,
    /// Slots in each ingress ring (one ring per receiving worker).
    pub ingress_ring: usize,
    /// ICMP errors per second the VR may send.
    pub icmp_rate: u32,
    /// ICMP error burst.
    pub icmp_burst: u32,
    /// Packets the punt queue holds until the control plane reads them.
    pub punt_queue: usize,
    /// Punted packets per second allowed (policer; 0 = unlimited).
    pub punt_rate: u32,
    /// Punt burst.
    pub punt_burst: u32,
    /// IPv4 FIB top-level bits (8..=24): 4 bytes × 2^bits of memory. 16 suits a tenant's
    /// table; 18 a full Internet table.
    pub fib4_top_bits: u8,
    /// IPv6 FIB top-level bits (8..=24); 16 for a tenant, 20 for a full table.
    pub fib6_top_bits: u8,
    /// Flow-cache entries per family per worker (rounded up to a power of two; 0 = off).
    pub flow_cache: usize,
    /// What the flow cache is keyed by.
    pub flow_cache_key: FlowCacheKey,
}

/// What a VR's flow cache is keyed by (seed 003's fast path: a destination or a 5-tuple).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlowCacheKey {
    /// The destination address: one entry serves every flow to a destination, so a few
    /// entries cover much traffic. Destinations whose route is an ECMP set are not cached
    /// (keyed by destination alone they would pin every flow to one member).
    #[default]
    Destination,
    /// Source and destination address, protocol and ports (ports 0 for fragments and
    /// port-less protocols): exactly what the ECMP hash covers, so a flow over an ECMP route
    /// is cached with the member its hash picked. One entry per flow: for many flows to
    /// few destinations over ECMP. IPv4 entries are 32 bytes, IPv6 64 (against 16 and 32).
    FiveTuple,
}

impl FlowCacheKey {
    /// Every key.
    pub const ALL: [FlowCacheKey; 2] = [FlowCacheKey::Destination, FlowCacheKey::FiveTuple];

    /// Its name in configs, command lines and reports: "destination" or "5-tuple".
    pub const fn name(self) -> &'static str {
        match self {
            FlowCacheKey::Destination => "destination",
            FlowCacheKey::FiveTuple => "5-tuple",
        }
    }

    /// The key called `name` (see [`FlowCacheKey::name`]).
    pub fn from_name(name: &str) -> Option<FlowCacheKey> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl VrConfig {
    /// Defaults for a VR called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        VrConfig {
            name: name.into(),
            weight: 1,
            worker: None,
            policer_pps: None,
            policer_bps: None,
            ingress_ring: 1024,
            icmp_rate: 1000,
            icmp_burst: 100,
            punt_queue: 1024,
            punt_rate: 10_000,
            punt_burst: 1_000,
            fib4_top_bits: 16,
            fib6_top_bits: 16,
            flow_cache: crate::dataplane::DEFAULT_FLOW_CACHE,
            flow_cache_key: FlowCacheKey::Destination,
        }
    }
}

/// How to create a VIF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VifConfig {
    /// Name, unique within the VR (it becomes the tap's name in the VR's namespace).
    pub name: String,
    /// Port the VIF lives on.
    pub port: PortId,
    /// 802.1Q VLAN id the VIF's frames carry (tag pushed on egress, expected on ingress).
    pub vlan: Option<u16>,
    /// How ingress frames are matched to the VIF.
    pub key: DemuxKey,
    /// The VIF's MAC address (source of what it sends, destination of what it receives).
    pub mac: EthernetAddress,
    /// IP MTU of the link.
    pub mtu: u16,
    /// Addresses; each makes its address local (punted) and its subnet attached.
    pub addrs: Vec<IfAddr>,
}

/// A virtual interface: a VR's attachment to a port.
#[derive(Debug)]
pub struct Vif {
    /// Index in the VR.
    pub id: VifId,
    /// The configuration it was created with.
    pub config: VifConfig,
    /// Shared with the `Vif` that replaces this one when its MTU changes, so counts go on.
    pub(crate) counters: Arc<[CachePadded<VifCounters>]>,
}

impl Vif {
    /// The first IPv4 address (source of ICMP errors).
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.config.addrs.iter().find_map(|a| match a {
            IfAddr::V4(a, _) => Some(*a),
            _ => None,
        })
    }

    /// The first global IPv6 address, else the first link-local one.
    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        let v6 = || {
            self.config.addrs.iter().filter_map(|a| match a {
                IfAddr::V6(a, _) => Some(*a),
                _ => None,
            })
        };
        v6().find(|a| !a.is_unicast_link_local())
            .or_else(|| v6().next())
    }

    /// Summed counters.
    pub fn stats(&self) -> VifStats {
        VifStats::sum(self.counters.iter().map(|c| &**c))
    }
}

/// A virtual router.
pub struct Vr {
    /// Index in the data plane.
    pub id: VrId,
    /// The configuration it was created with.
    pub config: VrConfig,
    /// Worker assigned to run its forwarding path (see [`Vr::owner`]).
    pub(crate) owner: AtomicUsize,
    /// Current scheduling weight (change with [`crate::Dataplane::set_weight`]).
    pub weight: AtomicU32,
    /// Extra cycles per packet its path burns (a measurement element, see
    /// [`crate::Dataplane::set_extra_cost`]).
    pub(crate) extra_cost: AtomicU32,
    /// Microseconds its path sleeps per vector, off the CPU like a preempted worker (see
    /// [`crate::Dataplane::set_extra_wait`]).
    pub(crate) extra_wait_us: AtomicU32,
    /// Worker it is pinned to (`usize::MAX`: none), see [`crate::Dataplane::pin_vr`].
    pub(crate) pinned: AtomicUsize,
    /// Set by the owner's watchdog, cleared by [`crate::Dataplane::release_vr`].
    pub(crate) quarantined: AtomicBool,
    pub(crate) policer: Policer,
    /// Where its fast generations start (unique to this VR; see [`crate::fastpath`]).
    pub(crate) fast_base: u64,
    /// Bumped on every change to its VIFs, policer or quarantine (see [`crate::fastpath`]).
    pub(crate) fast_epoch: AtomicU64,
    /// IPv4 routes.
    pub fib4: Fib4,
    /// IPv6 routes.
    pub fib6: Fib6,
    /// Neighbours.
    pub neigh: NeighTable,
    pub(crate) pool: Arc<Pool>,
    /// Producer end of the ingress ring fed by worker `i`, taken by that worker.
    pub(crate) ingress_tx: Box<[Mutex<Option<Producer>>]>,
    /// With [`crate::RunVrs::WhereReceived`]: the consumer end of the ring fed by worker
    /// `i`, taken by that same worker (`None` throughout otherwise).
    pub(crate) ingress_local: Box<[Mutex<Option<Consumer>>]>,
    /// What the next owner takes over: the consumer ends of the ingress rings and the
    /// VR's worker-local state. Filled when the VR is created and by an owner giving it up;
    /// emptied by the owner taking it.
    pub(crate) handoff: Mutex<Option<Handoff>>,
    /// Set by [`crate::Dataplane::remove_vr`] while it holds `handoff`'s lock: an owner
    /// handing the VR over after that retires the rings instead (see `Handoff::retire`).
    pub(crate) removed: AtomicBool,
    pub(crate) punt: ArrayQueue<Pkt>,
    pub(crate) inject: ArrayQueue<Pkt>,
    pub(crate) counters: Box<[CachePadded<VrCounters>]>,
}

impl core::fmt::Debug for Vr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Vr")
            .field("id", &self.id)
            .field("name", &self.config.name)
            .field("owner", &self.owner())
            .finish_non_exhaustive()
    }
}

impl Vr {
    /// Name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Summed counters.
    pub fn stats(&self) -> VrStats {
        VrStats::sum(self.counters.iter().map(|c| &**c))
    }

    /// The worker assigned to run the VR (after a move, the new one: it starts within a
    /// poll or two, once the old one has let go).
    pub fn owner(&self) -> usize {
        self.owner.load(Ordering::Relaxed)
    }

    /// The worker it is pinned to, if any (placement never moves a pinned VR).
    pub fn pinned(&self) -> Option<usize> {
        match self.pinned.load(Ordering::Relaxed) {
            usize::MAX => None,
            w => Some(w),
        }
    }

    /// Whether the watchdog has quarantined the VR: it is not scheduled, and its packets are
    /// dropped at demux as `vr-quarantined`, until released.
    pub fn quarantined(&self) -> bool {
        self.quarantined.load(Ordering::Relaxed)
    }

    /// The VR's fast generation (see [`crate::fastpath`]) with `vif_epoch`, the VIF changes
    /// of the snapshot it is read with: it grows with every change to routes, neighbours,
    /// VIFs, policer or quarantine.
    pub(crate) fn fast_generation(&self, vif_epoch: u64) -> u64 {
        let g = self.fib4.generation()
            + self.fib6.generation()
            + self.neigh.generation()
            + self.fast_epoch.load(Ordering::Acquire)
            + vif_epoch
            + 1;
        self.fast_base + g.min((1 << crate::fastpath::BASE_SHIFT) - 2)
    }

    /// Make every fast-path entry of the VR stale.
    pub(crate) fn bump_fast(&self) {
        self.fast_epoch.fetch_add(1, Ordering::Release);
    }

    /// Current scheduling weight.
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// Take the next punted packet (its `Meta::vif` says which VIF it arrived on). The caller
    /// owns it and returns it to the pool ([`crate::Dataplane::pool`]) when done.
    pub fn punt_recv(&self) -> Option<Pkt> {
        self.punt.pop()
    }

    /// Packets waiting in the punt queue.
    pub fn punt_len(&self) -> usize {
        self.punt.len()
    }
}

impl Drop for Vr {
    fn drop(&mut self) {
        while let Some(p) = self.punt.pop() {
            self.pool.free(p);
        }
        while let Some(p) = self.inject.pop() {
            self.pool.free(p);
        }
        if let Some(h) = self.handoff.get_mut().unwrap_or_else(|e| e.into_inner()) {
            for c in &mut h.consumers {
                c.drain(|p| self.pool.free(p));
            }
        }
        for c in self.ingress_local.iter_mut() {
            if let Some(c) = c.get_mut().unwrap_or_else(|e| e.into_inner()) {
                c.drain(|p| self.pool.free(p));
            }
        }
    }
}
