//! Counters: plain per-worker integers, summed when read.
//!
//! Every counter has exactly one writer (the worker that owns the block), so an increment is
//! a relaxed load and store — an ordinary `mov`, no locked instruction and no cache line
//! shared between cores on the fast path (Firecracker's metrics, VPP's per-thread counters).
//! Readers on other threads sum the blocks of all workers; a sum may be a moment old, never
//! torn.
//!
//! Drops are counted by [`Drop`] reason. Each reason belongs to the node that drops for it
//! ([`Drop::node`]), so "drops per node per reason" and "drops per VR per reason" come from
//! the same increments.

use core::sync::atomic::{AtomicU64, Ordering};

pub use crate::wait::{WaitCounters, WaitStats};

/// One single-writer counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n`. Only the owning worker may call this (one writer per counter).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Set it to `v`. Only the owning worker may call this.
    #[inline(always)]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! drops {
    ($($var:ident = $name:literal in $node:ident: $doc:literal,)*) => {
        /// Why a packet was dropped (or diverted from forwarding). Names are the ones shown by
        /// counters output and `--json`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Drop { $(#[doc = $doc] $var,)* }

        impl Drop {
            /// Every reason, in counter order.
            pub const ALL: &[Drop] = &[$(Drop::$var,)*];
            /// Stable name.
            pub const fn name(self) -> &'static str {
                match self { $(Drop::$var => $name,)* }
            }
            /// The node that counts this reason.
            pub const fn node(self) -> Node {
                match self { $(Drop::$var => Node::$node,)* }
            }
        }
    };
}

drops! {
    NoVr = "no-vr" in Demux: "No VIF matches the frame's port, VLAN and destination.",
    L2Truncated = "l2-truncated" in Demux: "Frame shorter than its Ethernet/VLAN headers, or a tag stack demux refuses (a third tag, an S-tag inside a tag).",
    VrIngressFull = "vr-ingress-full" in Demux: "The VR's ingress ring was full.",
    ReplicateNoBuffer = "replicate-no-buffer" in Demux: "No free slot to copy a broadcast frame for another VIF.",
    VrPoliced = "vr-policed" in Demux: "Over the VR's ingress rate limit (packets/s or bits/s).",
    VrQuarantined = "vr-quarantined" in Demux: "The VR is quarantined by the watchdog (its path held the core too long).",
    UnknownEthertype = "unknown-ethertype" in VrInput: "Neither IPv4, IPv6 nor ARP.",
    VifGone = "vif-gone" in VrInput: "The VIF was removed while the packet waited.",
    Ip4Truncated = "ip4-truncated" in Ip4Input: "Shorter than an IPv4 header.",
    Ip4BadVersion = "ip4-bad-version" in Ip4Input: "IP version field is not 4.",
    Ip4BadHeaderLen = "ip4-bad-header-len" in Ip4Input: "IHL under 5 or past the frame.",
    Ip4BadLength = "ip4-bad-length" in Ip4Input: "Total length under the header or past the frame.",
    Ip4BadChecksum = "ip4-bad-checksum" in Ip4Input: "Header checksum wrong.",
    Ip4BadSource = "ip4-bad-source" in Ip4Input: "Source on network 0 or 127, multicast, class E or broadcast; or link-local (169.254/16) and not to this router.",
    Ip4BadDest = "ip4-bad-destination" in Ip4Input: "Destination on network 0 or 127 (never a destination on the wire).",
    Ip4Multicast = "ip4-multicast" in Ip4Input: "Multicast beyond the link (no multicast routing).",
    Ip4LinkLocal = "ip4-link-local" in Ip4Input: "Link-local (169.254/16) destination that is not this router's.",
    Ip4LinkBroadcast = "ip4-link-broadcast" in Ip4Input: "Unicast IPv4 in a link-layer broadcast or multicast frame, not to this router (never forwarded).",
    Ip6Truncated = "ip6-truncated" in Ip6Input: "Shorter than an IPv6 header.",
    Ip6BadVersion = "ip6-bad-version" in Ip6Input: "IP version field is not 6.",
    Ip6BadLength = "ip6-bad-length" in Ip6Input: "Payload length past the frame.",
    Ip6BadExtChain = "ip6-bad-ext-chain" in Ip6Input: "Extension header chain truncated, malformed or too long.",
    Ip6BadSource = "ip6-bad-source" in Ip6Input: "Source is multicast, loopback or link-local (not forwardable).",
    Ip6BadDest = "ip6-bad-destination" in Ip6Input: "Destination is the loopback or unspecified address.",
    Ip6Multicast = "ip6-multicast" in Ip6Input: "Multicast beyond the link (no multicast routing).",
    Ip6LinkLocal = "ip6-link-local" in Ip6Input: "Link-local destination that is not this router's.",
    Ip6LinkMulticast = "ip6-link-multicast" in Ip6Input: "Unicast IPv6 in a link-layer multicast frame, not to this router (never forwarded).",
    TtlExpired = "ttl-expired" in Forward: "TTL or hop limit reached 0 (Time Exceeded sent if allowed).",
    NoRoute = "no-route" in Forward: "No route (Destination Unreachable sent if allowed).",
    Blackhole = "blackhole" in Forward: "Route to a blackhole.",
    Unreachable = "unreachable" in Forward: "Route of type unreachable (ICMP sent if allowed).",
    Prohibited = "prohibited" in Forward: "Route of type prohibit (ICMP sent if allowed).",
    NoVif = "no-vif" in Forward: "Next hop names an interface the VR does not have.",
    MtuExceeded = "mtu-exceeded" in Forward: "Larger than the egress MTU and may not be fragmented (ICMP sent if allowed).",
    FragNoBuffer = "frag-no-buffer" in Forward: "No free slots to fragment into.",
    IcmpRateLimited = "icmp-rate-limited" in Icmp: "An ICMP error was due but the VR's rate limit was reached.",
    IcmpNoSource = "icmp-no-source" in Icmp: "An ICMP error was due but the VIF has no address of that family.",
    IcmpNoBuffer = "icmp-no-buffer" in Icmp: "An ICMP error was due but no slot was free.",
    IcmpSuppressed = "icmp-suppressed" in Icmp: "No ICMP error may be sent about this packet (RFC 1812 §4.3.2.7).",
    PuntFull = "punt-full" in Punt: "The VR's punt queue was full (no control plane reading).",
    PuntPoliced = "punt-policed" in Punt: "Over the VR's punt rate.",
    TxFull = "tx-full" in Tx: "The egress port's tx ring was full.",
    InjectBad = "inject-bad" in Tx: "An injected frame named a VIF that does not exist or was too big.",
}

/// Number of drop reasons.
pub const N_DROPS: usize = Drop::ALL.len();

macro_rules! nodes {
    ($($var:ident = $name:literal: $doc:literal,)*) => {
        /// The forwarding path's stages; each counts packets, vectors, sampled cycles and its
        /// own drop reasons.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Node { $(#[doc = $doc] $var,)* }

        impl Node {
            /// Every node, in counter order.
            pub const ALL: &[Node] = &[$(Node::$var,)*];
            /// Stable name.
            pub const fn name(self) -> &'static str {
                match self { $(Node::$var => $name,)* }
            }
        }
    };
}

nodes! {
    Rx = "port-rx": "Receive bursts from the ports.",
    Demux = "demux": "Match frames to (VR, VIF) and queue them on the VR's ingress ring.",
    VrInput = "vr-input": "Take a vector from a VR's ingress ring and split it by protocol.",
    Ip4Input = "ip4-input": "RFC 1812 §5.2.2 validation; local and link-local traffic.",
    Ip6Input = "ip6-input": "IPv6 validation; local, link-local and ND traffic.",
    FlowCache = "flow-cache": "Exact-match cache in front of the FIB.",
    Forward = "forward": "FIB lookup, ECMP, adjacency, TTL, MTU and L2 rewrite.",
    Icmp = "icmp-error": "Build ICMP/ICMPv6 errors (rate-limited per VR).",
    Punt = "punt": "Hand packets to the VR's control plane.",
    Tx = "port-tx": "Transmit bursts to the ports.",
}

/// Number of nodes.
pub const N_NODES: usize = Node::ALL.len();

/// One worker's counters for one VR.
///
/// `repr(C)`: in this order, what a vector's run writes lies on few lines (see
/// `ingress_wait`).
#[derive(Debug)]
#[repr(C)]
pub struct VrCounters {
    /// Packets admitted to the VR (queued on its ingress ring).
    pub rx_packets: Counter,
    /// Bytes of those.
    pub rx_bytes: Counter,
    /// Packets the VR forwarded to a port.
    pub tx_packets: Counter,
    /// Bytes of those.
    pub tx_bytes: Counter,
    /// Packets handed to the control plane.
    pub punted: Counter,
    /// Frames the control plane injected.
    pub injected: Counter,
    /// ICMP errors sent.
    pub icmp_sent: Counter,
    /// Flow cache hits.
    pub flow_hits: Counter,
    /// Flow cache misses.
    pub flow_misses: Counter,
    /// Packets punted because the neighbour was not resolved.
    pub neigh_miss: Counter,
    /// IPv4 fragments made (and sent) from datagrams over the egress MTU.
    pub fragments: Counter,
    /// Vectors the scheduler ran for the VR.
    pub vectors: Counter,
    /// Packets in those vectors (injected frames included).
    pub scheduled: Counter,
    /// TSC cycles those vectors took, input to tx flush (the VR's CPU use). A vector that
    /// took over 4× the VR's recent cost per packet counts at that cost instead: it was
    /// preempted, and the time was the OS's, not the VR's.
    pub cycles: Counter,
    /// How long packets waited in the VR's ingress rings, sampled (see `crate::wait`).
    /// Here, so that its sum and longest share the line of `vectors`, which the same
    /// vector writes: a sample costs the line of its bucket alone.
    pub ingress_wait: WaitCounters,
    /// Vectors that held the core longer than the watchdog's budget.
    pub watchdog_offences: Counter,
    /// Vectors over the watchdog's budget on the clock that were not offences: the first of
    /// a run of them (the worker reads its CPU clock from then on), or one during which the
    /// worker's thread was off its CPU for the excess (preempted). See `sched`'s docs.
    pub watchdog_excused: Counter,
    /// Drops by reason.
    pub drops: [Counter; N_DROPS],
}

impl Default for VrCounters {
    fn default() -> Self {
        VrCounters {
            rx_packets: Counter::default(),
            rx_bytes: Counter::default(),
            tx_packets: Counter::default(),
            tx_bytes: Counter::default(),
            punted: Counter::default(),
            injected: Counter::default(),
            icmp_sent: Counter::default(),
            flow_hits: Counter::default(),
            flow_misses: Counter::default(),
            neigh_miss: Counter::default(),
            fragments: Counter::default(),
            vectors: Counter::default(),
            scheduled: Counter::default(),
            cycles: Counter::default(),
            watchdog_offences: Counter::default(),
            watchdog_excused: Counter::default(),
            ingress_wait: WaitCounters::default(),
            drops: core::array::from_fn(|_| Counter::default()),
        }
    }
}

/// One worker's counters for one VIF.
#[derive(Debug, Default)]
pub struct VifCounters {
    /// Frames received on the VIF and taken up by its VR (frames refused at a full ingress
    /// ring are the port's and VR's `rx_dropped`/`vr-ingress-full`).
    pub rx_packets: Counter,
    /// Bytes of those.
    pub rx_bytes: Counter,
    /// Frames sent out of the VIF.
    pub tx_packets: Counter,
    /// Bytes of those.
    pub tx_bytes: Counter,
}

/// One worker's counters for one port.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received.
    pub rx_packets: Counter,
    /// Bytes received.
    pub rx_bytes: Counter,
    /// Frames handed to the tx queue.
    pub tx_packets: Counter,
    /// Bytes of those.
    pub tx_bytes: Counter,
    /// Frames dropped because the tx ring was full.
    pub tx_full: Counter,
    /// Frames dropped at demux (no VR, bad L2, ingress full).
    pub rx_dropped: Counter,
}

/// One worker's counters for one node.
#[derive(Debug, Default)]
pub struct NodeCounters {
    /// Packets the node processed.
    pub packets: Counter,
    /// Vectors (calls).
    pub vectors: Counter,
    /// Packets in sampled vectors (denominator of `cycles`).
    pub sampled_packets: Counter,
    /// TSC cycles spent in sampled vectors.
    pub cycles: Counter,
}

/// Summed snapshot of [`VrCounters`] (or any per-VR view) for readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VrStats {
    /// See [`VrCounters::rx_packets`].
    pub rx_packets: u64,
    /// See [`VrCounters::rx_bytes`].
    pub rx_bytes: u64,
    /// See [`VrCounters::tx_packets`].
    pub tx_packets: u64,
    /// See [`VrCounters::tx_bytes`].
    pub tx_bytes: u64,
    /// See [`VrCounters::punted`].
    pub punted: u64,
    /// See [`VrCounters::injected`].
    pub injected: u64,
    /// See [`VrCounters::icmp_sent`].
    pub icmp_sent: u64,
    /// See [`VrCounters::flow_hits`].
    pub flow_hits: u64,
    /// See [`VrCounters::flow_misses`].
    pub flow_misses: u64,
    /// See [`VrCounters::neigh_miss`].
    pub neigh_miss: u64,
    /// See [`VrCounters::fragments`].
    pub fragments: u64,
    /// See [`VrCounters::vectors`].
    pub vectors: u64,
    /// See [`VrCounters::scheduled`].
    pub scheduled: u64,
    /// See [`VrCounters::cycles`].
    pub cycles: u64,
    /// See [`VrCounters::watchdog_offences`].
    pub watchdog_offences: u64,
    /// See [`VrCounters::watchdog_excused`].
    pub watchdog_excused: u64,
    /// Drops by reason, indexed like [`Drop::ALL`].
    pub drops: [u64; N_DROPS],
    /// See [`VrCounters::ingress_wait`].
    pub ingress_wait: WaitStats,
}

impl Default for VrStats {
    fn default() -> Self {
        VrStats {
            rx_packets: 0,
            rx_bytes: 0,
            tx_packets: 0,
            tx_bytes: 0,
            punted: 0,
            injected: 0,
            icmp_sent: 0,
            flow_hits: 0,
            flow_misses: 0,
            neigh_miss: 0,
            fragments: 0,
            vectors: 0,
            scheduled: 0,
            cycles: 0,
            watchdog_offences: 0,
            watchdog_excused: 0,
            drops: [0; N_DROPS],
            ingress_wait: WaitStats::default(),
        }
    }
}

impl VrStats {
    /// Drops for one reason.
    pub fn drop(&self, d: Drop) -> u64 {
        self.drops[d as usize]
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// The nonzero drop reasons, by name.
    pub fn nonzero_drops(&self) -> Vec<(&'static str, u64)> {
        Drop::ALL
            .iter()
            .filter(|d| self.drops[**d as usize] != 0)
            .map(|d| (d.name(), self.drops[*d as usize]))
            .collect()
    }

    pub(crate) fn sum<'a>(blocks: impl IntoIterator<Item = &'a VrCounters>) -> VrStats {
        let mut s = VrStats::default();
        for c in blocks {
            s.rx_packets += c.rx_packets.get();
            s.rx_bytes += c.rx_bytes.get();
            s.tx_packets += c.tx_packets.get();
            s.tx_bytes += c.tx_bytes.get();
            s.punted += c.punted.get();
            s.injected += c.injected.get();
            s.icmp_sent += c.icmp_sent.get();
            s.flow_hits += c.flow_hits.get();
            s.flow_misses += c.flow_misses.get();
            s.neigh_miss += c.neigh_miss.get();
            s.fragments += c.fragments.get();
            s.vectors += c.vectors.get();
            s.scheduled += c.scheduled.get();
            s.cycles += c.cycles.get();
            s.watchdog_offences += c.watchdog_offences.get();
            s.watchdog_excused += c.watchdog_excused.get();
            for (a, b) in s.drops.iter_mut().zip(&c.drops) {
                *a += b.get();
            }
            s.ingress_wait.add(&c.ingress_wait);
        }
        s
    }
}

/// Summed snapshot of [`PortCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Dropped: tx ring full.
    pub tx_full: u64,
    /// Dropped at demux.
    pub rx_dropped: u64,
}

impl PortStats {
    pub(crate) fn sum<'a>(blocks: impl IntoIterator<Item = &'a PortCounters>) -> PortStats {
        let mut s = PortStats::default();
        for c in blocks {
            s.rx_packets += c.rx_packets.get();
            s.rx_bytes += c.rx_bytes.get();
            s.tx_packets += c.tx_packets.get();
            s.tx_bytes += c.tx_bytes.get();
            s.tx_full += c.tx_full.get();
            s.rx_dropped += c.rx_dropped.get();
        }
        s
    }
}

/// Summed snapshot of a VIF's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct VifStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl VifStats {
    pub(crate) fn sum<'a>(blocks: impl IntoIterator<Item = &'a VifCounters>) -> VifStats {
        let mut s = VifStats::default();
        for c in blocks {
            s.rx_packets += c.rx_packets.get();
            s.rx_bytes += c.rx_bytes.get();
            s.tx_packets += c.tx_packets.get();
            s.tx_bytes += c.tx_bytes.get();
        }
        s
    }
}

/// Summed snapshot of one node's counters, with its drops by reason.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStats {
    /// The node.
    pub node: Node,
    /// Packets processed.
    pub packets: u64,
    /// Vectors processed.
    pub vectors: u64,
    /// Mean TSC cycles per packet over sampled vectors (0 if none sampled).
    pub cycles_per_packet: f64,
    /// Drops this node counted, by reason (all VRs and the demux drops).
    pub drops: Vec<(Drop, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vector's run writes `vectors`, `scheduled`, `cycles` and, with a wait sample, the
    /// wait's sum and longest: one line (of 64 bytes, within the 128 a block is aligned to).
    #[test]
    fn a_vectors_counters_share_a_line() {
        let c = VrCounters::default();
        let base = &c as *const VrCounters as usize;
        let line = |f: &Counter| (f as *const Counter as usize - base) / 64;
        let w = &c.ingress_wait;
        let lines = [&c.vectors, &c.scheduled, &c.cycles, &w.sum_ns, &w.max_ns].map(line);
        assert!(lines.iter().all(|&l| l == lines[0]), "{lines:?}");
    }
}
