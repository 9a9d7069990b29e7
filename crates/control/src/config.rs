//! The declarative config file: ports and virtual routers, parsed and checked whole before
//! anything is touched.
//!
//! Why TOML with spans: an operator who gets a config wrong must be told where — file, line
//! and field — and nothing may change until the whole file is good (a rejected reload leaves
//! the running routers alone). So parsing keeps the source position of every field that a
//! later check can reject ([`toml::Spanned`]), [`Config::parse`] does every check that needs
//! only the file, and [`Config::check_host`] the ones that need this machine (interfaces,
//! cores). Both run before the daemon opens a socket.
//!
//! ```toml
//! [dataplane]
//! cores = [0]                  # one forwarding worker per listed core
//! fairness = "packets"         # backlogged VRs share a core by packets | cycles
//! scaling = "fixed"            # fixed | on-demand (forward on as few of the cores as needed)
//! watchdog_us = 2000           # a VR's vector may hold its core this long (on the CPU:
//!                              # time the worker was preempted is excused)…
//! watchdog_strikes = 3         # …offending this often in 32 vectors quarantines the VR
//! realtime_priority = 0        # 1..=99: workers run SCHED_FIFO at it; 0: ordinary threads
//! rx_coalesce_us = 0           # nap after a light poll, so light traffic fills vectors (0: off)
//! max_deferral_us = 10000      # under pressure a VR's short backlog may wait this long for
//!                              # a fuller vector (0: never)
//! run_vrs = "where-received"   # each worker forwards what its queues took | on-owner: one
//!                              # worker forwards each VR (placed by load), the others hand over
//!
//! [[port]]
//! name = "p0"
//! interface = "p0"
//! backend = "auto"             # afxdp | afpacket | auto (AF_XDP, else AF_PACKET)
//! tx = "auto"                  # xdp | socket | auto (the device's XDP transmit where it takes it)
//! fanout = "auto"              # AF_PACKET: cpu | hash | auto (cpu with a device queue per worker)
//!
//! [[vr]]
//! name = "blue"
//! weight = 2                   # share of its worker when backlogged (1..=1000000)
//! worker = 0                   # pin to worker 0 (the core cores[0]); default: placed by load
//! policer_pps = 100000         # ingress limits, policed at demux; default: none
//! policer_bps = 500000000
//! flow_cache = 1024            # flow-cache entries per address family and worker (0: off)
//! flow_cache_key = "destination" # or "5-tuple": caches flows over ECMP routes too, an
//!                              # entry per flow instead of per destination
//! [[vr.vif]]
//! name = "a"
//! port = "p0"
//! mac = "02:76:00:00:00:01"
//! addresses = ["10.0.0.1/24", "fd00:a::1/64"]
//! [[vr.route]]
//! prefix = "0.0.0.0/0"
//! via = "10.0.0.2"
//! [[vr.route]]                 # ECMP: a share of the flows per next hop, by weight (1..=256)
//! prefix = "198.51.100.0/24"
//! nexthops = [{ via = "10.0.0.2", weight = 3 }, { via = "10.0.0.3" }]
//! [[vr.neighbor]]
//! address = "10.0.0.2"
//! mac = "02:76:00:00:00:02"
//! vif = "a"
//! ```

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use vrhost_dataplane::{
    DEFAULT_FLOW_CACHE, DEFAULT_MAX_DEFERRAL, Fairness, FlowCacheKey, IfAddr, MAX_DEFERRAL,
    MAX_FLOW_CACHE, MAX_MTU, MAX_WEIGHT, RunVrs,
};
use vrhost_wire::EthernetAddress;

/// A rejected config: where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}")]
pub struct ConfigError {
    /// The file (or `<built-in>`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The field, as a dotted path where known (`vr.vif.mac`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Which backend drives a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// AF_XDP where it can be attached, else AF_PACKET.
    #[default]
    Auto,
    /// AF_XDP (the XDP program is loaded by vrhost).
    Afxdp,
    /// AF_PACKET TPACKET_V3.
    Afpacket,
}

/// XDP attach mode of an AF_XDP port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// In the driver.
    Native,
    /// In the generic (skb) path.
    Generic,
}

/// How an AF_PACKET port with several queues shares its received frames among them
/// (`[[port]] fanout`; see `vrhost_io::afpacket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FanoutSpec {
    /// By receiving CPU where the device has a queue per worker, else by flow hash.
    #[default]
    Auto,
    /// By the kernel's symmetric flow hash.
    Hash,
    /// By the CPU that received the frame.
    Cpu,
}

/// A port's transmit path (`[[port]] tx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TxSpec {
    /// On an AF_XDP port attached in driver mode with copy-mode sockets (veth, NICs
    /// without zero-copy): the device's XDP transmit while it takes it (checked again on
    /// device changes and every second), else the socket's own. Elsewhere the socket's own:
    /// a zero-copy socket copies nothing, and a NIC may advertise XDP transmit yet drop
    /// what it is given while no XDP program is attached in driver mode.
    #[default]
    Auto,
    /// The socket's own transmit (AF_XDP tx ring, AF_PACKET `sendmmsg`).
    Socket,
    /// The device's XDP transmit: refused at start when the device does not take it.
    Xdp,
}

/// `[dataplane] fairness`: what backlogged VRs on one core share equally (or by weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FairnessSpec {
    /// Packets forwarded.
    #[default]
    Packets,
    /// CPU cycles used (a costlier path forwards fewer packets).
    Cycles,
}

impl From<FairnessSpec> for Fairness {
    fn from(f: FairnessSpec) -> Fairness {
        match f {
            FairnessSpec::Packets => Fairness::Packets,
            FairnessSpec::Cycles => Fairness::Cycles,
        }
    }
}

/// `[dataplane] run_vrs`: which workers forward a VR's packets
/// ([`vrhost_dataplane::RunVrs`] says when each is better).
///
/// The daemon's default is `where-received` (the data plane library's is `OnOwner`): the
/// daemon opens a queue per worker on every port, so with more than one core a VR's frames
/// arrive on every worker, and a VR forwarded by one owner would be held to one core
/// however many cores and queues it is given (measured on the 2-queue lab, `docs/perf.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunVrsSpec {
    /// One worker per VR, placed by load; the others hand it the frames they receive.
    OnOwner,
    /// Each worker forwards the frames its own receive queues took, for every VR.
    #[default]
    WhereReceived,
}

impl From<RunVrsSpec> for RunVrs {
    fn from(r: RunVrsSpec) -> RunVrs {
        match r {
            RunVrsSpec::OnOwner => RunVrs::OnOwner,
            RunVrsSpec::WhereReceived => RunVrs::WhereReceived,
        }
    }
}

/// `[dataplane] scaling`: how many of the listed cores forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScalingSpec {
    /// All of them, always.
    #[default]
    Fixed,
    /// As few as the load needs: start with one, add one when it saturates, give one back
    /// when the load falls (the others stay free for local applications).
    OnDemand,
}

/// `[dataplane]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataplaneSection {
    /// Cores, one forwarding worker on each.
    #[serde(default = "default_cores")]
    pub cores: Spanned<Vec<usize>>,
    /// Packet slots in the pool (default: 16384 per port and worker, at least 32768 —
    /// an AF_XDP socket lends up to 8192 to its fill ring and more while its rx ring is full).
    #[serde(default)]
    pub pool: Option<Spanned<usize>>,
    /// Packets or cycles fairness.
    #[serde(default)]
    pub fairness: FairnessSpec,
    /// Fixed or on-demand forwarding cores.
    #[serde(default)]
    pub scaling: ScalingSpec,
    /// Watchdog: microseconds one vector of one VR may hold its core (0 = no watchdog).
    #[serde(default = "default_watchdog_us")]
    pub watchdog_us: Spanned<i64>,
    /// Watchdog: offences among a VR's last 32 vectors that quarantine it.
    #[serde(default = "default_strikes")]
    pub watchdog_strikes: Spanned<i64>,
    /// Workers' `SCHED_FIFO` priority, 1..=99; 0 (the default) leaves them ordinary threads.
    /// Why and what it costs: `vrhost_io::sched`. Use it when the workers' cores are shared
    /// with other work (the host's applications, builds): an ordinary worker waits for a
    /// time slice each time it wakes, and its NIC ring overflows meanwhile.
    #[serde(default = "default_zero")]
    pub realtime_priority: Spanned<i64>,
    /// Receive coalescing, µs (0..=1000; 0, the default, is off): after a poll that received
    /// under half a vector a worker naps this long, so light traffic is forwarded in fuller
    /// vectors for a fraction of the CPU, at up to this much added latency
    /// (`Dataplane::set_rx_coalesce` says why).
    #[serde(default = "default_zero")]
    pub rx_coalesce_us: Spanned<i64>,
    /// Microseconds a VR's short backlog may wait for a fuller vector while its worker is
    /// under pressure (0..=100000; 0: never; default 10000). Longer waits carry more with
    /// traffic spread over many VRs, at up to this much queueing delay
    /// (`Dataplane::set_max_deferral` says why).
    #[serde(default = "default_max_deferral_us")]
    pub max_deferral_us: Spanned<i64>,
    /// Which workers forward a VR's packets (fixed while running: a change restarts).
    #[serde(default)]
    pub run_vrs: RunVrsSpec,
}

fn default_watchdog_us() -> Spanned<i64> {
    Spanned::new(0..0, 2000)
}
fn default_zero() -> Spanned<i64> {
    Spanned::new(0..0, 0)
}
fn default_max_deferral_us() -> Spanned<i64> {
    Spanned::new(0..0, DEFAULT_MAX_DEFERRAL.as_micros() as i64)
}
fn default_strikes() -> Spanned<i64> {
    Spanned::new(0..0, 3)
}

fn default_cores() -> Spanned<Vec<usize>> {
    Spanned::new(0..0, vec![0])
}

impl Default for DataplaneSection {
    fn default() -> Self {
        DataplaneSection {
            cores: default_cores(),
            pool: None,
            fairness: FairnessSpec::default(),
            scaling: ScalingSpec::default(),
            watchdog_us: default_watchdog_us(),
            watchdog_strikes: default_strikes(),
            realtime_priority: default_zero(),
            rx_coalesce_us: default_zero(),
            max_deferral_us: default_max_deferral_us(),
            run_vrs: RunVrsSpec::default(),
        }
    }
}

/// `[control]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSection {
    /// Each VR's control plane lives in namespace `<netns_prefix><vr name>`.
    #[serde(default = "default_prefix")]
    pub netns_prefix: String,
    /// Whether to build those namespaces with a tap per VIF (punt/inject). Without them,
    /// punted packets are counted and dropped.
    #[serde(default = "yes")]
    pub taps: bool,
    /// Whether to mirror what is configured inside each namespace (routes, addresses,
    /// neighbours, by `ip`, BIRD, FRR …) into the data plane over netlink (only with `taps`: the namespaces come with them).
    #[serde(default = "yes")]
    pub netlink_sync: bool,
    /// Receive buffer of each VR's netlink event socket, bytes (4096..=1 GiB). Bursts that
    /// overrun it cost a full resync (counted), not correctness.
    #[serde(default = "default_rcvbuf")]
    pub netlink_rcvbuf: Spanned<usize>,
}

fn default_rcvbuf() -> Spanned<usize> {
    Spanned::new(0..0, 64 << 20)
}

fn default_prefix() -> String {
    "vr-".into()
}
fn yes() -> bool {
    true
}

impl Default for ControlSection {
    fn default() -> Self {
        ControlSection {
            netns_prefix: default_prefix(),
            taps: true,
            netlink_sync: true,
            netlink_rcvbuf: default_rcvbuf(),
        }
    }
}

/// `[[port]]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// Name VIFs refer to.
    pub name: Spanned<String>,
    /// Linux interface.
    pub interface: Spanned<String>,
    /// Backend.
    #[serde(default)]
    pub backend: Backend,
    /// Queues; must equal the number of cores (each worker polls one queue of every port).
    #[serde(default)]
    pub queues: Option<Spanned<u32>>,
    /// XDP attach mode (AF_XDP only; default native, falling back to generic).
    #[serde(default)]
    pub xdp_mode: Option<XdpMode>,
    /// Zero-copy bind (AF_XDP only; default: try, fall back to copy).
    #[serde(default)]
    pub zero_copy: Option<bool>,
    /// Preferred busy polling (AF_XDP only; default false): each worker runs the receive
    /// NAPI of the queue it polls on its own core (see `vrhost_io::afxdp`). Set
    /// `napi_defer_hard_irqs` and `gro_flush_timeout` on the interface with it. Linux
    /// busy-polls zero-copy sockets only; in copy mode (veth) it has no effect (logged).
    #[serde(default)]
    pub busy_poll: Option<Spanned<bool>>,
    /// Transmit path (default `auto`): `xdp` hands frames to the device's XDP transmit
    /// (`ndo_xdp_xmit`) a batch per system call with no skb per frame — on veth and other
    /// copy-mode devices several times cheaper per frame than the socket's own transmit;
    /// `socket` keeps the AF_XDP tx ring or AF_PACKET's `sendmmsg`; `auto` uses XDP
    /// transmit on copy-mode AF_XDP ports attached in driver mode while the device takes
    /// it (a veth only while its peer has an XDP program or GRO on). See
    /// `vrhost_io::xdptx`.
    #[serde(default)]
    pub tx: TxSpec,
    /// The quickpath (AF_XDP only; default false): the port's XDP program forwards the
    /// frames of established plain IPv4 and IPv6 flows itself, straight to an egress port that
    /// transmits by XDP, from decisions the workers made for their first frames (see
    /// `vrhost_io::quickpath`). Such frames bypass the workers' scheduling; VRs with a
    /// policer never use it.
    #[serde(default)]
    pub quickpath: Option<Spanned<bool>>,
    /// How an AF_PACKET port's queues share received frames (default `auto`): `cpu` gives
    /// each worker the frames the kernel received on its CPU (they stay on one core),
    /// `hash` spreads flows by the kernel's flow hash, `auto` is `cpu` where the device has
    /// a queue per worker and `hash` where it has fewer. See `vrhost_io::afpacket`.
    #[serde(default)]
    pub fanout: Option<Spanned<FanoutSpec>>,
}

impl PortSpec {
    /// Whether the port asks for the quickpath.
    pub fn wants_quickpath(&self) -> bool {
        self.quickpath.as_ref().is_some_and(|q| *q.get_ref())
    }
}

/// How a VIF's frames are recognised on its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DemuxSpec {
    /// By the VIF's MAC.
    #[default]
    Mac,
    /// By VLAN id.
    Vlan,
}

/// `[[vr.vif]]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VifSpec {
    /// Name (also the tap's name): at most 15 bytes.
    pub name: Spanned<String>,
    /// Port name.
    pub port: Spanned<String>,
    /// MAC address.
    pub mac: Spanned<String>,
    /// 802.1Q VLAN id.
    #[serde(default)]
    pub vlan: Option<Spanned<u16>>,
    /// Demux key.
    #[serde(default)]
    pub demux: DemuxSpec,
    /// IP MTU.
    #[serde(default = "default_mtu")]
    pub mtu: Spanned<u16>,
    /// Addresses with prefix length (`10.0.0.1/24`).
    #[serde(default)]
    pub addresses: Vec<Spanned<String>>,
}

fn default_mtu() -> Spanned<u16> {
    Spanned::new(0..0, 1500)
}

/// What a route does when it is not forwarded via a neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteType {
    /// Discard silently.
    Blackhole,
    /// Discard with ICMP unreachable.
    Unreachable,
    /// Discard with ICMP administratively prohibited.
    Prohibit,
    /// For the router itself (punted).
    Local,
}

/// `[[vr.route]]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Destination prefix.
    pub prefix: Spanned<String>,
    /// Next-hop address (must be on one of the VR's subnets).
    #[serde(default)]
    pub via: Option<Spanned<String>>,
    /// Outgoing VIF (default: the VIF whose subnet holds `via`).
    #[serde(default)]
    pub vif: Option<Spanned<String>>,
    /// A route that is not forwarded.
    #[serde(default, rename = "type")]
    pub kind: Option<Spanned<RouteType>>,
    /// A multipath (ECMP) route: its next hops, instead of `via` / `vif` / `type`.
    #[serde(default)]
    pub nexthops: Option<Spanned<Vec<NextHopSpec>>>,
}

/// One next hop of a multipath route (`nexthops = [{ via = "10.0.1.2", weight = 3 }, …]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextHopSpec {
    /// Next-hop address (must be on one of the VR's subnets).
    pub via: Spanned<String>,
    /// Outgoing VIF (default: the VIF whose subnet holds `via`).
    #[serde(default)]
    pub vif: Option<Spanned<String>>,
    /// Its share of the flows against the others' (1..=256, Linux's range; default 1).
    #[serde(default)]
    pub weight: Option<Spanned<i64>>,
}

/// `[[vr.neighbor]]`: a static neighbour.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighSpec {
    /// Its address (must be inside one of the VIF's prefixes).
    pub address: Spanned<String>,
    /// Its MAC.
    pub mac: Spanned<String>,
    /// The VIF it is reached through.
    pub vif: Spanned<String>,
}

/// `[[vr]]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VrSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// Scheduling weight (1..=1,000,000).
    #[serde(default = "default_weight")]
    pub weight: Spanned<i64>,
    /// Pin to this worker (index into `[dataplane] cores`).
    #[serde(default)]
    pub worker: Option<Spanned<i64>>,
    /// Ingress limit, packets per second.
    #[serde(default)]
    pub policer_pps: Option<Spanned<i64>>,
    /// Ingress limit, bits per second.
    #[serde(default)]
    pub policer_bps: Option<Spanned<i64>>,
    /// Interfaces.
    #[serde(default, rename = "vif")]
    pub vifs: Vec<VifSpec>,
    /// Static routes.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteSpec>,
    /// Static neighbours.
    #[serde(default, rename = "neighbor", alias = "neighbour")]
    pub neighbors: Vec<NeighSpec>,
    /// Packets per second the VR may punt to its control plane (policer; 0 = unlimited), so
    /// a flood at one router's own addresses cannot starve forwarding or other VRs.
    #[serde(default = "default_punt_rate")]
    pub punt_rate: Spanned<u32>,
    /// Punt burst (packets).
    #[serde(default = "default_punt_burst")]
    pub punt_burst: Spanned<u32>,
    /// Flow-cache entries per address family and worker (0 = off).
    #[serde(default = "default_flow_cache")]
    pub flow_cache: Spanned<i64>,
    /// What the flow cache is keyed by: "destination" or "5-tuple".
    #[serde(default = "default_flow_cache_key")]
    pub flow_cache_key: Spanned<String>,
}

fn default_flow_cache() -> Spanned<i64> {
    Spanned::new(0..0, DEFAULT_FLOW_CACHE as i64)
}

fn default_flow_cache_key() -> Spanned<String> {
    Spanned::new(0..0, FlowCacheKey::default().name().into())
}

fn default_punt_rate() -> Spanned<u32> {
    Spanned::new(0..0, 10_000)
}

fn default_punt_burst() -> Spanned<u32> {
    Spanned::new(0..0, 1_000)
}

fn default_weight() -> Spanned<i64> {
    Spanned::new(0..0, 1)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    dataplane: DataplaneSection,
    #[serde(default)]
    control: ControlSection,
    #[serde(default, rename = "port")]
    ports: Vec<PortSpec>,
    #[serde(default, rename = "vr")]
    vrs: Vec<VrSpec>,
}

/// A parsed, checked config.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where it came from (for messages).
    pub file: String,
    /// Its text (to place later errors).
    pub text: String,
    /// `[dataplane]`.
    pub dataplane: DataplaneSection,
    /// `[control]`.
    pub control: ControlSection,
    /// `[[port]]`s.
    pub ports: Vec<PortSpec>,
    /// `[[vr]]`s.
    pub vrs: Vec<VrSpec>,
}

/// The checked form of one VR, ready to apply to the data plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VrPlan {
    /// Name.
    pub name: String,
    /// Weight.
    pub weight: u32,
    /// Punt policer rate (packets/s, 0 = unlimited).
    pub punt_rate: u32,
    /// Punt policer burst.
    pub punt_burst: u32,
    /// Pinned worker.
    pub worker: Option<usize>,
    /// Ingress limit, packets/s.
    pub policer_pps: Option<u64>,
    /// Ingress limit, bits/s.
    pub policer_bps: Option<u64>,
    /// Flow-cache entries per family and worker (0 = off).
    pub flow_cache: usize,
    /// What the flow cache is keyed by.
    pub flow_cache_key: FlowCacheKey,
    /// Interfaces in order (VIF ids are their indexes).
    pub vifs: Vec<VifPlan>,
    /// Routes: prefix, what to do.
    pub routes: Vec<(IpPrefixSpec, RoutePlan)>,
    /// Static neighbours: VIF index, address, MAC.
    pub neighbors: Vec<(usize, IpAddr, EthernetAddress)>,
}

/// One VIF, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VifPlan {
    /// Name.
    pub name: String,
    /// Index of its port in `Config::ports`.
    pub port: usize,
    /// MAC.
    pub mac: EthernetAddress,
    /// VLAN.
    pub vlan: Option<u16>,
    /// Demux key.
    pub demux: DemuxSpec,
    /// MTU.
    pub mtu: u16,
    /// Addresses.
    pub addrs: Vec<IfAddr>,
}

/// A prefix of either family, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPrefixSpec {
    /// IPv4.
    V4(vrhost_fib::Prefix4),
    /// IPv6.
    V6(vrhost_fib::Prefix6),
}

impl std::fmt::Display for IpPrefixSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IpPrefixSpec::V4(p) => p.fmt(f),
            IpPrefixSpec::V6(p) => p.fmt(f),
        }
    }
}

impl IpPrefixSpec {
    /// Whether `a` is of this prefix's family.
    pub fn same_family(&self, a: IpAddr) -> bool {
        matches!(
            (self, a),
            (IpPrefixSpec::V4(_), IpAddr::V4(_)) | (IpPrefixSpec::V6(_), IpAddr::V6(_))
        )
    }
}

/// What a static route does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutePlan {
    /// Via a neighbour out of a VIF (index).
    Via(IpAddr, usize),
    /// Over several neighbours (ECMP): (address, VIF index, weight) each, in order.
    Multipath(Vec<(IpAddr, usize, u16)>),
    /// Straight out of a VIF (destination on link).
    Attached(usize),
    /// Not forwarded.
    Special(RouteType),
}

/// An annotated example config (two VRs with overlapping addresses on two ports), shipped
/// as documentation and checked by the tests.
pub const EXAMPLE: &str = include_str!("example.toml");

impl Config {
    /// Read and check a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: "-".into(),
            message: format!("cannot read: {e}"),
        })?;
        Config::parse(&file, &text)
    }

    /// Parse and check `text` (everything that needs only the file).
    pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        let raw: Raw = from_toml(file, text)?;
        let c = Config {
            file: file.into(),
            text: text.into(),
            dataplane: raw.dataplane,
            control: raw.control,
            ports: raw.ports,
            vrs: raw.vrs,
        };
        c.check()?;
        Ok(c)
    }

    /// Check the `[[vr]]` sections of another file (`vrhost ctl add`) against this running
    /// config, as if they were appended to it: errors name that file's lines; a name or MAC
    /// already used by a running VR is refused. Returns this config with them added, and
    /// their plans.
    pub fn add_vrs(&self, file: &str, text: &str) -> Result<(Config, Vec<VrPlan>), ConfigError> {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Snippet {
            #[serde(default, rename = "vr")]
            vrs: Vec<VrSpec>,
        }
        let snippet: Snippet = from_toml(file, text)?;
        let checker = Config {
            file: file.into(),
            text: text.into(),
            dataplane: self.dataplane.clone(),
            control: self.control.clone(),
            ports: self.ports.clone(),
            vrs: self.vrs.iter().chain(&snippet.vrs).cloned().collect(),
        };
        if snippet.vrs.is_empty() {
            return Err(checker.error_at(0..0, "vr", "the file names no [[vr]]"));
        }
        checker.check()?;
        let plans = snippet
            .vrs
            .iter()
            .map(|v| checker.plan_vr(v))
            .collect::<Result<Vec<_>, _>>()?;
        let mut merged = self.clone();
        merged.vrs.extend(snippet.vrs);
        Ok((merged, plans))
    }

    /// This config without VR `name` (`vrhost ctl remove`); `None` if it has no such VR.
    pub fn without_vr(&self, name: &str) -> Option<Config> {
        let i = self.vrs.iter().position(|v| v.name.get_ref() == name)?;
        let mut c = self.clone();
        c.vrs.remove(i);
        Some(c)
    }

    /// An error at `span` of this file.
    pub fn error_at(
        &self,
        span: std::ops::Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = line_col(&self.text, span.start);
        ConfigError {
            file: self.file.clone(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    fn err<T>(&self, s: &Spanned<T>, field: &str, message: impl Into<String>) -> ConfigError {
        self.error_at(s.span(), field, message)
    }

    /// Number of forwarding workers.
    pub fn workers(&self) -> usize {
        self.dataplane.cores.get_ref().len()
    }

    fn check(&self) -> Result<(), ConfigError> {
        let cores = &self.dataplane.cores;
        if cores.get_ref().is_empty() {
            return Err(self.err(cores, "dataplane.cores", "needs at least one core"));
        }
        let mut seen = HashSet::new();
        for c in cores.get_ref() {
            if !seen.insert(c) {
                return Err(self.err(cores, "dataplane.cores", format!("core {c} listed twice")));
            }
        }
        if let Some(p) = &self.dataplane.pool
            && !(1024..=1 << 22).contains(p.get_ref())
        {
            return Err(self.err(p, "dataplane.pool", "must be 1024..=4194304 slots"));
        }
        let wd = &self.dataplane.watchdog_us;
        if !(0..=10_000_000).contains(wd.get_ref()) {
            return Err(self.err(
                wd,
                "dataplane.watchdog_us",
                format!(
                    "{} not in 0..=10000000 (0 turns the watchdog off)",
                    wd.get_ref()
                ),
            ));
        }
        let st = &self.dataplane.watchdog_strikes;
        if !(1..=32).contains(st.get_ref()) {
            return Err(self.err(
                st,
                "dataplane.watchdog_strikes",
                format!("{} not in 1..=32", st.get_ref()),
            ));
        }
        let rt = &self.dataplane.realtime_priority;
        if !(0..=99).contains(rt.get_ref()) {
            return Err(self.err(
                rt,
                "dataplane.realtime_priority",
                format!(
                    "{} not in 0..=99 (0: ordinary threads; 1..=99: SCHED_FIFO priority)",
                    rt.get_ref()
                ),
            ));
        }
        let co = &self.dataplane.rx_coalesce_us;
        if !(0..=1000).contains(co.get_ref()) {
            return Err(self.err(
                co,
                "dataplane.rx_coalesce_us",
                format!("{} not in 0..=1000 (0 turns coalescing off)", co.get_ref()),
            ));
        }
        let md = &self.dataplane.max_deferral_us;
        let most = MAX_DEFERRAL.as_micros() as i64;
        if !(0..=most).contains(md.get_ref()) {
            return Err(self.err(
                md,
                "dataplane.max_deferral_us",
                format!("{} not in 0..={most} (0 turns deferring off)", md.get_ref()),
            ));
        }
        let prefix = &self.control.netns_prefix;
        if prefix.contains('/') || prefix.len() > 32 {
            return Err(self.error_at(
                0..0,
                "control.netns_prefix",
                format!("{prefix:?} is not usable in a namespace name"),
            ));
        }
        let rb = &self.control.netlink_rcvbuf;
        if !(4096..=1 << 30).contains(rb.get_ref()) {
            return Err(self.err(
                rb,
                "control.netlink_rcvbuf",
                "must be 4096..=1073741824 bytes",
            ));
        }
        if self.ports.is_empty() {
            return Err(self.error_at(0..0, "port", "the config names no [[port]]"));
        }
        let mut names = HashSet::new();
        let mut ifaces = HashSet::new();
        for p in &self.ports {
            if p.name.get_ref().is_empty() || !names.insert(p.name.get_ref().as_str()) {
                return Err(self.err(&p.name, "port.name", "empty or used twice"));
            }
            let i = p.interface.get_ref();
            if i.is_empty() || i.len() > 15 || i.contains('/') || i.contains(char::is_whitespace) {
                return Err(self.err(&p.interface, "port.interface", "not an interface name"));
            }
            if !ifaces.insert(i.as_str()) {
                return Err(self.err(
                    &p.interface,
                    "port.interface",
                    format!("interface {i:?} is used by two ports"),
                ));
            }
            if let Some(q) = &p.queues
                && *q.get_ref() as usize != self.workers()
            {
                return Err(self.err(
                    q,
                    "port.queues",
                    format!(
                        "{} but there are {} cores: each worker polls one queue of every port",
                        q.get_ref(),
                        self.workers()
                    ),
                ));
            }
            if p.backend == Backend::Afpacket && (p.xdp_mode.is_some() || p.zero_copy.is_some()) {
                return Err(self.err(
                    &p.name,
                    "port.xdp_mode",
                    "xdp_mode and zero_copy apply to AF_XDP ports only",
                ));
            }
            if let Some(b) = &p.busy_poll
                && *b.get_ref()
                && p.backend == Backend::Afpacket
            {
                return Err(self.err(
                    b,
                    "port.busy_poll",
                    "busy polling applies to AF_XDP ports only (packet sockets cannot drive \
                     the NAPI)",
                ));
            }
            if let Some(f) = &p.fanout
                && p.backend == Backend::Afxdp
            {
                return Err(self.err(
                    f,
                    "port.fanout",
                    "fanout applies to AF_PACKET ports only (an AF_XDP socket is bound to \
                     its queue)",
                ));
            }
            if let Some(q) = &p.quickpath
                && *q.get_ref()
                && p.backend == Backend::Afpacket
            {
                return Err(self.err(
                    q,
                    "port.quickpath",
                    "the quickpath is the AF_XDP port's own XDP program: AF_XDP ports only",
                ));
            }
        }
        let mut vr_names = HashSet::new();
        // (port, vlan, mac) → VR/VIF that owns it, for MAC clashes across VRs.
        let mut macs: HashMap<(usize, Option<u16>, EthernetAddress), String> = HashMap::new();
        for vr in &self.vrs {
            let n = vr.name.get_ref();
            if n.is_empty()
                || n.len() > 32
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(self.err(
                    &vr.name,
                    "vr.name",
                    format!("{n:?}: use 1–32 letters, digits, '-' or '_'"),
                ));
            }
            if !vr_names.insert(n.as_str()) {
                return Err(self.err(&vr.name, "vr.name", format!("VR {n:?} defined twice")));
            }
            let plan = self.plan_vr(vr)?;
            for (vif, spec) in plan.vifs.iter().zip(&vr.vifs) {
                let key = (vif.port, vif.vlan, vif.mac);
                let who = format!("{}/{}", plan.name, vif.name);
                if let Some(other) = macs.insert(key, who) {
                    return Err(self.err(
                        &spec.mac,
                        "vr.vif.mac",
                        format!(
                            "{} is already used by {other} on port {:?}",
                            vif.mac,
                            self.ports[vif.port].name.get_ref()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Check one VR and turn it into what the data plane needs.
    pub fn plan_vr(&self, vr: &VrSpec) -> Result<VrPlan, ConfigError> {
        let name = vr.name.get_ref();
        let w = *vr.weight.get_ref();
        if !(1..=i64::from(MAX_WEIGHT)).contains(&w) {
            return Err(self.err(
                &vr.weight,
                "vr.weight",
                format!("VR {name:?}: weight {w} not in 1..={MAX_WEIGHT}"),
            ));
        }
        if *vr.punt_burst.get_ref() == 0 || *vr.punt_burst.get_ref() > 1_000_000 {
            return Err(self.err(&vr.punt_burst, "vr.punt_burst", "must be 1..=1000000"));
        }
        let worker = match &vr.worker {
            Some(s) if !(0..self.workers() as i64).contains(s.get_ref()) => {
                return Err(self.err(
                    s,
                    "vr.worker",
                    format!(
                        "VR {name:?}: worker {} does not exist: [dataplane] cores lists {} \
                         core(s), so workers are 0..={}",
                        s.get_ref(),
                        self.workers(),
                        self.workers().saturating_sub(1)
                    ),
                ));
            }
            Some(s) => Some(*s.get_ref() as usize),
            None => None,
        };
        let rate = |r: &Option<Spanned<i64>>, field: &str, unit: &str| match r {
            Some(s) if *s.get_ref() <= 0 => Err(self.err(
                s,
                field,
                format!(
                    "VR {name:?}: {} {unit} would drop everything; leave it out for no limit",
                    s.get_ref()
                ),
            )),
            Some(s) => Ok(Some(*s.get_ref() as u64)),
            None => Ok(None),
        };
        let flow_cache = *vr.flow_cache.get_ref();
        let Some(flow_cache) = usize::try_from(flow_cache)
            .ok()
            .filter(|n| *n <= MAX_FLOW_CACHE)
        else {
            return Err(self.err(
                &vr.flow_cache,
                "vr.flow_cache",
                format!("VR {name:?}: {flow_cache} entries not in 0..={MAX_FLOW_CACHE} (0: off)"),
            ));
        };
        let key = vr.flow_cache_key.get_ref();
        let Some(flow_cache_key) = FlowCacheKey::from_name(key) else {
            let names = FlowCacheKey::ALL.map(FlowCacheKey::name);
            return Err(self.err(
                &vr.flow_cache_key,
                "vr.flow_cache_key",
                format!("VR {name:?}: {key:?} is not one of {names:?}"),
            ));
        };
        let policer_pps = rate(&vr.policer_pps, "vr.policer_pps", "packets/s")?;
        let policer_bps = rate(&vr.policer_bps, "vr.policer_bps", "bits/s")?;
        let mut vifs = Vec::new();
        let mut vif_names = HashSet::new();
        for v in &vr.vifs {
            let n = v.name.get_ref();
            if n.is_empty() || n.len() > 15 || n.contains('/') || n.contains(char::is_whitespace) {
                return Err(self.err(
                    &v.name,
                    "vr.vif.name",
                    format!("{n:?} is not an interface name (1–15 bytes)"),
                ));
            }
            if !vif_names.insert(n.as_str()) {
                return Err(self.err(&v.name, "vr.vif.name", format!("{n:?} used twice")));
            }
            let port = self
                .ports
                .iter()
                .position(|p| p.name.get_ref() == v.port.get_ref())
                .ok_or_else(|| {
                    self.err(
                        &v.port,
                        "vr.vif.port",
                        format!("no [[port]] named {:?}", v.port.get_ref()),
                    )
                })?;
            let mac = parse_mac(v.mac.get_ref())
                .filter(EthernetAddress::is_unicast)
                .ok_or_else(|| {
                    self.err(
                        &v.mac,
                        "vr.vif.mac",
                        format!("{:?} is not a unicast MAC address", v.mac.get_ref()),
                    )
                })?;
            if let Some(vlan) = &v.vlan
                && !(1..=4094).contains(vlan.get_ref())
            {
                return Err(self.err(vlan, "vr.vif.vlan", "must be 1..=4094"));
            }
            if v.demux == DemuxSpec::Vlan && v.vlan.is_none() {
                return Err(self.err(&v.name, "vr.vif.demux", "demux = \"vlan\" needs a vlan"));
            }
            if !(68..=MAX_MTU).contains(v.mtu.get_ref()) {
                return Err(self.err(&v.mtu, "vr.vif.mtu", format!("must be 68..={MAX_MTU}")));
            }
            let mut addrs = Vec::new();
            for a in &v.addresses {
                let ifa = parse_ifaddr(a.get_ref()).ok_or_else(|| {
                    self.err(
                        a,
                        "vr.vif.addresses",
                        format!("{:?} is not ADDRESS/LENGTH", a.get_ref()),
                    )
                })?;
                let usable = match ifa {
                    IfAddr::V4(ip, _) => {
                        !(ip.is_multicast() || ip.is_broadcast() || ip.is_unspecified())
                    }
                    IfAddr::V6(ip, _) => !(ip.is_multicast() || ip.is_unspecified()),
                };
                if !usable {
                    return Err(self.err(
                        a,
                        "vr.vif.addresses",
                        format!("{} is not a unicast address", a.get_ref()),
                    ));
                }
                addrs.push(ifa);
            }
            vifs.push(VifPlan {
                name: n.clone(),
                port,
                mac,
                vlan: v.vlan.as_ref().map(|v| *v.get_ref()),
                demux: v.demux,
                mtu: *v.mtu.get_ref(),
                addrs,
            });
        }
        let vif_index = |s: &Spanned<String>, field: &str| {
            vifs.iter()
                .position(|v| v.name == *s.get_ref())
                .ok_or_else(|| {
                    self.err(
                        s,
                        field,
                        format!("VR {:?} has no vif {:?}", vr.name.get_ref(), s.get_ref()),
                    )
                })
        };
        let on_link = |i: usize, a: IpAddr| vifs[i].addrs.iter().any(|x| subnet_has(x, a));
        let mut routes = Vec::new();
        for r in &vr.routes {
            let prefix = parse_prefix(r.prefix.get_ref()).ok_or_else(|| {
                self.err(
                    &r.prefix,
                    "vr.route.prefix",
                    format!(
                        "{:?} is not a prefix (ADDRESS/LENGTH, host bits zero)",
                        r.prefix.get_ref()
                    ),
                )
            })?;
            // A neighbour `via` (out of `vif`, or the VIF whose subnet holds it).
            let neighbour = |via: &Spanned<String>,
                             vif: &Option<Spanned<String>>,
                             (field, vif_field): (&str, &str)|
             -> Result<(IpAddr, usize), ConfigError> {
                let a: IpAddr = via.get_ref().parse().map_err(|_| {
                    self.err(via, field, format!("{:?} is not an address", via.get_ref()))
                })?;
                if !prefix.same_family(a) {
                    return Err(self.err(
                        via,
                        field,
                        format!("{a} is not of the family of {}", r.prefix.get_ref()),
                    ));
                }
                let i = match vif {
                    Some(v) => {
                        let i = vif_index(v, vif_field)?;
                        if !on_link(i, a) {
                            return Err(self.err(
                                via,
                                field,
                                format!("{a} is outside every prefix of vif {:?}", v.get_ref()),
                            ));
                        }
                        i
                    }
                    None => (0..vifs.len()).find(|&i| on_link(i, a)).ok_or_else(|| {
                        self.err(
                            via,
                            field,
                            format!(
                                "{a} is not inside any vif's prefix of VR {:?}",
                                vr.name.get_ref()
                            ),
                        )
                    })?,
                };
                Ok((a, i))
            };
            let plan = match (&r.kind, &r.via, &r.vif, &r.nexthops) {
                (Some(k), None, None, None) => RoutePlan::Special(*k.get_ref()),
                (Some(k), _, _, _) => {
                    return Err(self.err(
                        k,
                        "vr.route.type",
                        "a typed route takes no via, vif or nexthops",
                    ));
                }
                (None, Some(via), vif, None) => {
                    let (a, i) = neighbour(via, vif, ("vr.route.via", "vr.route.vif"))?;
                    RoutePlan::Via(a, i)
                }
                (None, None, Some(v), None) => RoutePlan::Attached(vif_index(v, "vr.route.vif")?),
                (None, None, None, None) => {
                    return Err(self.err(
                        &r.prefix,
                        "vr.route",
                        "needs via, vif, nexthops or type",
                    ));
                }
                (None, _, _, Some(hops)) => {
                    if let Some(x) = r.via.as_ref().or(r.vif.as_ref()) {
                        return Err(self.err(
                            x,
                            "vr.route",
                            "a route with nexthops names its via and vif in each of them",
                        ));
                    }
                    let max = vrhost_fib::MAX_ECMP;
                    let n = hops.get_ref().len();
                    if !(1..=max).contains(&n) {
                        return Err(self.err(
                            hops,
                            "vr.route.nexthops",
                            format!("{n} next hops: a route takes 1 to {max}"),
                        ));
                    }
                    let mut list: Vec<(IpAddr, usize, u16)> = Vec::with_capacity(n);
                    for h in hops.get_ref() {
                        let fields = ("vr.route.nexthops.via", "vr.route.nexthops.vif");
                        let (a, i) = neighbour(&h.via, &h.vif, fields)?;
                        let max_w = vrhost_fib::MAX_WEIGHT;
                        let weight = match &h.weight {
                            None => 1,
                            Some(w) => u16::try_from(*w.get_ref())
                                .ok()
                                .filter(|w| (1..=max_w).contains(w))
                                .ok_or_else(|| {
                                    self.err(
                                        w,
                                        "vr.route.nexthops.weight",
                                        format!("{} is not in 1..={max_w}", w.get_ref()),
                                    )
                                })?,
                        };
                        if list.iter().any(|&(b, j, _)| (b, j) == (a, i)) {
                            return Err(self.err(
                                &h.via,
                                "vr.route.nexthops.via",
                                format!("{a} is named twice (give it a weight instead)"),
                            ));
                        }
                        list.push((a, i, weight));
                    }
                    RoutePlan::Multipath(list)
                }
            };
            routes.push((prefix, plan));
        }
        let mut neighbors = Vec::new();
        for n in &vr.neighbors {
            let i = vif_index(&n.vif, "vr.neighbor.vif")?;
            let a: IpAddr = n.address.get_ref().parse().map_err(|_| {
                self.err(
                    &n.address,
                    "vr.neighbor.address",
                    format!("{:?} is not an address", n.address.get_ref()),
                )
            })?;
            if !on_link(i, a) {
                return Err(self.err(
                    &n.address,
                    "vr.neighbor.address",
                    format!("{a} is outside every prefix of vif {:?}", n.vif.get_ref()),
                ));
            }
            let mac = parse_mac(n.mac.get_ref())
                .filter(EthernetAddress::is_unicast)
                .ok_or_else(|| {
                    self.err(
                        &n.mac,
                        "vr.neighbor.mac",
                        format!("{:?} is not a unicast MAC", n.mac.get_ref()),
                    )
                })?;
            neighbors.push((i, a, mac));
        }
        Ok(VrPlan {
            name: vr.name.get_ref().clone(),
            punt_rate: *vr.punt_rate.get_ref(),
            punt_burst: *vr.punt_burst.get_ref(),
            weight: w as u32,
            worker,
            policer_pps,
            policer_bps,
            flow_cache,
            flow_cache_key,
            vifs,
            routes,
            neighbors,
        })
    }

    /// Every VR, planned (cannot fail after `parse`).
    pub fn plans(&self) -> Vec<VrPlan> {
        self.vrs
            .iter()
            .filter_map(|v| self.plan_vr(v).ok())
            .collect()
    }

    /// Checks that need this machine: every interface exists in the calling thread's
    /// namespace, every core exists and this process may run on it.
    pub fn check_host(&self) -> Result<(), ConfigError> {
        for p in &self.ports {
            if ifindex(p.interface.get_ref()) == 0 {
                return Err(self.err(
                    &p.interface,
                    "port.interface",
                    format!("no interface {:?} on this host", p.interface.get_ref()),
                ));
            }
        }
        let allowed = allowed_cores();
        for c in self.dataplane.cores.get_ref() {
            if !allowed.contains(c) {
                return Err(self.err(
                    &self.dataplane.cores,
                    "dataplane.cores",
                    format!("core {c} does not exist or is not allowed (usable: {allowed:?})"),
                ));
            }
        }
        Ok(())
    }

    /// Whether reloading to `next` would need a restart (ports, cores, the pool or control
    /// changed; fairness and the watchdog apply while running).
    pub fn restart_needed(&self, next: &Config) -> Option<&'static str> {
        let (a, b) = (&self.dataplane, &next.dataplane);
        if self.ports != next.ports {
            Some("[[port]] sections changed")
        } else if a.cores != b.cores || a.pool != b.pool {
            Some("[dataplane] cores or pool changed")
        } else if a.run_vrs != b.run_vrs {
            Some("[dataplane] run_vrs changed")
        } else if a.realtime_priority != b.realtime_priority {
            Some("[dataplane] realtime_priority changed")
        } else if self.control != next.control {
            Some("[control] changed")
        } else {
            None
        }
    }
}

/// The interface's index in the calling thread's namespace, 0 if there is none.
pub fn ifindex(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else {
        return 0;
    };
    // SAFETY: a valid NUL-terminated string; the call only reads it.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// Cores this process may run on.
pub fn allowed_cores() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pointer and size describe `set`.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Deserialize TOML, errors placed in `file`.
fn from_toml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
        ConfigError {
            file: file.into(),
            line,
            column,
            field: e
                .span()
                .and_then(|s| key_at(text, s.start))
                .unwrap_or_else(|| "-".into()),
            message: e.message().trim().to_string(),
        }
    })
}

fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The key on the line where `at` falls (`key = value`), for parse errors.
fn key_at(text: &str, at: usize) -> Option<String> {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    (!k.is_empty() && !k.starts_with('[')).then(|| k.to_string())
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<EthernetAddress> {
    let mut b = [0u8; 6];
    let mut parts = s.split(':');
    for x in &mut b {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *x = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(EthernetAddress(b))
}

/// `10.0.0.1/24` or `fd00::1/64`.
pub fn parse_ifaddr(s: &str) -> Option<IfAddr> {
    let (a, l) = s.split_once('/')?;
    let len: u8 = l.parse().ok()?;
    match a.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) if len <= 32 => Some(IfAddr::V4(a, len)),
        IpAddr::V6(a) if len <= 128 => Some(IfAddr::V6(a, len)),
        _ => None,
    }
}

/// A prefix with its host bits zero.
pub fn parse_prefix(s: &str) -> Option<IpPrefixSpec> {
    if s.contains(':') {
        s.parse().ok().map(IpPrefixSpec::V6)
    } else {
        s.parse().ok().map(IpPrefixSpec::V4)
    }
}

fn subnet_has(a: &IfAddr, x: IpAddr) -> bool {
    match (*a, x) {
        (IfAddr::V4(n, l), IpAddr::V4(x)) => vrhost_fib::Prefix4::new_masked(n, l).contains(x),
        (IfAddr::V6(n, l), IpAddr::V6(x)) => vrhost_fib::Prefix6::new_masked(n, l).contains(x),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
