//! The reference model of a VR and the comparison of what the data plane did with what it
//! says (see `reference.rs` for what it covers and why). Shared by `reference.rs` (one VR)
//! and `reference_multi.rs` (several VRs on shared ports): the model of what one VR does with
//! a frame demux gave it is the same there.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vrhost_dataplane::{DemuxKey, Drop, IfAddr, Vr, VrConfig};
use vrhost_fib::{NextHop, NextHopSet, Prefix4, Prefix6};
use vrhost_wire::EthernetAddress;

use crate::common::{HOST_MAC, Rig, datagram_len, vif};

pub(crate) type Mac = [u8; 6];

// ---------------------------------------------------------------------------------------
// The router under test: its interfaces, routes and neighbours.
// ---------------------------------------------------------------------------------------

/// One VIF of a VR.
#[derive(Debug)]
pub(crate) struct VifDef {
    /// The same for index i in every VR (a, b, c, d): summaries name VIFs by [`VIFS`].
    pub(crate) name: &'static str,
    pub(crate) port: u16,
    pub(crate) vlan: Option<u16>,
    pub(crate) mac: Mac,
    pub(crate) mtu: u16,
    /// IPv4 addresses; the first is the source of ICMP errors.
    pub(crate) v4: &'static [(Ipv4Addr, u8)],
    /// IPv6 addresses; the first (global) is the source of ICMPv6 errors.
    pub(crate) v6: &'static [(Ipv6Addr, u8)],
}

pub(crate) const fn db8(sub: u16, host: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, sub, 0, 0, 0, 0, host)
}

pub(crate) const fn ll6(host: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, host)
}

pub(crate) const fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

pub(crate) const fn nbr(last: u8) -> Mac {
    [0x02, 0, 0, 0, 0xbb, last]
}

/// The sender of every frame.
pub(crate) const SENDER: Mac = HOST_MAC.0;

/// A VR's VIFs, in the order added (VIF ids 0 to 3).
pub(crate) type Vifs = [VifDef; 4];

/// VIF a: port 0, untagged, with link-local addresses too. VIF b: port 1, VLAN 7. VIF c:
/// port 2, untagged, MTU 1280. VIF d: port 2, VLAN 9, MTU 576, IPv4 only.
pub(crate) const VIFS: Vifs = [
    VifDef {
        name: "a",
        port: 0,
        vlan: None,
        mac: [0x02, 0, 0, 0, 0, 0x0a],
        mtu: 1500,
        v4: &[(v4(10, 1, 0, 1), 24), (v4(169, 254, 0, 1), 16)],
        v6: &[(db8(1, 1), 64), (ll6(0xa), 64)],
    },
    VifDef {
        name: "b",
        port: 1,
        vlan: Some(7),
        mac: [0x02, 0, 0, 0, 0, 0x0b],
        mtu: 1500,
        v4: &[(v4(10, 2, 0, 1), 24)],
        v6: &[(db8(2, 1), 64)],
    },
    VifDef {
        name: "c",
        port: 2,
        vlan: None,
        mac: [0x02, 0, 0, 0, 0, 0x0c],
        mtu: 1280,
        v4: &[(v4(10, 3, 0, 1), 24)],
        v6: &[(db8(3, 1), 64)],
    },
    VifDef {
        name: "d",
        port: 2,
        vlan: Some(9),
        mac: [0x02, 0, 0, 0, 0, 0x0d],
        mtu: 576,
        v4: &[(v4(10, 4, 0, 1), 24)],
        v6: &[],
    },
];

pub(crate) const PORTS: usize = 3;

/// A configured (not address-derived) route.
#[derive(Debug, Clone, Copy)]
pub(crate) enum R {
    Via(usize, IpAddr),
    Ecmp([(usize, IpAddr); 2]),
    Blackhole,
    Unreachable,
    Prohibit,
}

pub(crate) const fn a4(a: Ipv4Addr) -> IpAddr {
    IpAddr::V4(a)
}

pub(crate) const fn a6(a: Ipv6Addr) -> IpAddr {
    IpAddr::V6(a)
}

pub(crate) const ROUTES4: &[(Ipv4Addr, u8, R)] = &[
    (v4(198, 51, 100, 0), 24, R::Via(1, a4(v4(10, 2, 0, 2)))),
    (v4(192, 0, 2, 0), 24, R::Via(2, a4(v4(10, 3, 0, 2)))),
    (v4(198, 18, 0, 0), 16, R::Via(3, a4(v4(10, 4, 0, 2)))),
    // Its next hop has no neighbour entry.
    (v4(203, 0, 113, 0), 24, R::Via(1, a4(v4(10, 2, 0, 9)))),
    (
        v4(172, 16, 0, 0),
        16,
        R::Ecmp([(1, a4(v4(10, 2, 0, 2))), (1, a4(v4(10, 2, 0, 3)))]),
    ),
    // Class E is routable like any unicast (the policy).
    (v4(240, 0, 0, 0), 8, R::Via(1, a4(v4(10, 2, 0, 2)))),
    (v4(100, 64, 0, 0), 16, R::Blackhole),
    (v4(100, 65, 0, 0), 16, R::Unreachable),
    (v4(100, 66, 0, 0), 16, R::Prohibit),
];

pub(crate) const ROUTES6: &[(Ipv6Addr, u8, R)] = &[
    (db8(0x100, 0), 48, R::Via(1, a6(db8(2, 2)))),
    (db8(0x200, 0), 48, R::Via(2, a6(db8(3, 2)))),
    (db8(0x300, 0), 48, R::Via(1, a6(db8(2, 9)))),
    (db8(0x400, 0), 48, R::Blackhole),
    (db8(0x500, 0), 48, R::Unreachable),
    (db8(0x600, 0), 48, R::Prohibit),
    (
        db8(0x700, 0),
        48,
        R::Ecmp([(1, a6(db8(2, 2))), (1, a6(db8(2, 3)))]),
    ),
    // Via a link-local next hop, as routing daemons install them.
    (db8(0x800, 0), 48, R::Via(1, a6(ll6(0xb2)))),
];

pub(crate) const NEIGH: &[(usize, IpAddr, Mac)] = &[
    (0, a4(v4(10, 1, 0, 5)), nbr(0xa5)),
    (1, a4(v4(10, 2, 0, 2)), nbr(0xb2)),
    (1, a4(v4(10, 2, 0, 3)), nbr(0xb3)),
    (2, a4(v4(10, 3, 0, 2)), nbr(0xc2)),
    (3, a4(v4(10, 4, 0, 2)), nbr(0xd2)),
    (0, a6(db8(1, 5)), nbr(0xa5)),
    (1, a6(db8(2, 2)), nbr(0xb2)),
    (1, a6(db8(2, 3)), nbr(0xb3)),
    (1, a6(ll6(0xb2)), nbr(0xb2)),
    (2, a6(db8(3, 2)), nbr(0xc2)),
];

/// What the control plane may change while frames flow: the configured routes, the
/// neighbours and the VIFs' MTUs. The model reads these; the VIFs' addresses stay.
#[derive(Debug, Clone)]
pub(crate) struct Net {
    /// The VR's VIFs.
    pub(crate) vifs: &'static Vifs,
    pub(crate) routes4: Vec<(Ipv4Addr, u8, R)>,
    pub(crate) routes6: Vec<(Ipv6Addr, u8, R)>,
    pub(crate) neigh: Vec<(usize, IpAddr, Mac)>,
    pub(crate) mtu: [u16; 4],
}

impl Net {
    /// A VR with the VIFs `vifs`, and the routes and neighbours of [`VIFS`]'s VR.
    pub(crate) fn initial(vifs: &'static Vifs) -> Net {
        Net {
            vifs,
            routes4: ROUTES4.to_vec(),
            routes6: ROUTES6.to_vec(),
            neigh: NEIGH.to_vec(),
            mtu: vifs.each_ref().map(|v| v.mtu),
        }
    }

    pub(crate) fn apply(&mut self, e: Event) {
        match e {
            Event::Neigh(v, a, m) => {
                self.neigh.retain(|&(v2, a2, _)| (v2, a2) != (v, a));
                self.neigh.extend(m.map(|m| (v, a, m)));
            }
            Event::Route4(net, len, r) => {
                self.routes4.retain(|&(n, l, _)| (n, l) != (net, len));
                self.routes4.extend(r.map(|r| (net, len, r)));
            }
            Event::Route6(net, len, r) => {
                self.routes6.retain(|&(n, l, _)| (n, l) != (net, len));
                self.routes6.extend(r.map(|r| (net, len, r)));
            }
            Event::Mtu(v, mtu) => self.mtu[v] = mtu,
        }
    }
}

/// A change the control plane makes between two frames.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    /// Set (`Some`) or remove a neighbour.
    Neigh(usize, IpAddr, Option<Mac>),
    /// Set (`Some`) or remove a route.
    Route4(Ipv4Addr, u8, Option<R>),
    Route6(Ipv6Addr, u8, Option<R>),
    Mtu(usize, u16),
}

pub(crate) const EVENTS: &[Event] = &[
    // The unresolved next hops and hosts resolve, and go again.
    Event::Neigh(1, a4(v4(10, 2, 0, 9)), Some(nbr(0xb9))),
    Event::Neigh(1, a4(v4(10, 2, 0, 9)), None),
    Event::Neigh(0, a4(v4(10, 1, 0, 6)), Some(nbr(0xa6))),
    Event::Neigh(0, a4(v4(10, 1, 0, 6)), None),
    Event::Neigh(1, a6(db8(2, 9)), Some(nbr(0xb9))),
    Event::Neigh(1, a6(db8(2, 9)), None),
    // The main next hop on b is lost, moves to another MAC, comes back.
    Event::Neigh(1, a4(v4(10, 2, 0, 2)), None),
    Event::Neigh(1, a4(v4(10, 2, 0, 2)), Some(nbr(0xbe))),
    Event::Neigh(1, a4(v4(10, 2, 0, 2)), Some(nbr(0xb2))),
    Event::Neigh(1, a6(db8(2, 2)), None),
    Event::Neigh(1, a6(db8(2, 2)), Some(nbr(0xbe))),
    Event::Neigh(1, a6(db8(2, 2)), Some(nbr(0xb2))),
    Event::Neigh(1, a6(ll6(0xb2)), None),
    Event::Neigh(1, a6(ll6(0xb2)), Some(nbr(0xb2))),
    // 198.51.100.0/24 changes kind, goes, comes back; a more specific route comes and goes.
    Event::Route4(
        v4(198, 51, 100, 0),
        24,
        Some(R::Via(2, a4(v4(10, 3, 0, 2)))),
    ),
    Event::Route4(v4(198, 51, 100, 0), 24, Some(R::Blackhole)),
    Event::Route4(v4(198, 51, 100, 0), 24, Some(R::Prohibit)),
    Event::Route4(v4(198, 51, 100, 0), 24, None),
    Event::Route4(
        v4(198, 51, 100, 0),
        24,
        Some(R::Via(1, a4(v4(10, 2, 0, 2)))),
    ),
    Event::Route4(
        v4(198, 51, 100, 0),
        25,
        Some(R::Via(3, a4(v4(10, 4, 0, 2)))),
    ),
    Event::Route4(v4(198, 51, 100, 0), 25, None),
    Event::Route4(v4(8, 0, 0, 0), 8, Some(R::Via(1, a4(v4(10, 2, 0, 2))))),
    Event::Route4(v4(8, 0, 0, 0), 8, None),
    Event::Route6(db8(0x100, 0), 48, Some(R::Via(2, a6(db8(3, 2))))),
    Event::Route6(db8(0x100, 0), 48, Some(R::Unreachable)),
    Event::Route6(db8(0x100, 0), 48, None),
    Event::Route6(db8(0x100, 0), 48, Some(R::Via(1, a6(db8(2, 2))))),
    Event::Route6(db8(0xdead, 0), 48, Some(R::Via(1, a6(ll6(0xb2))))),
    Event::Route6(db8(0xdead, 0), 48, None),
    Event::Mtu(1, 1280),
    Event::Mtu(1, 1500),
    Event::Mtu(2, 1400),
    Event::Mtu(2, 1280),
    Event::Mtu(3, 1000),
    Event::Mtu(3, 576),
];

/// Make the change `e` in the data plane, in `vr`.
pub(crate) fn apply(rig: &mut Rig, vr: &Vr, e: Event) {
    match e {
        Event::Neigh(v, a, Some(m)) => vr.neigh.set(v as u16, a, EthernetAddress(m)),
        Event::Neigh(v, a, None) => {
            vr.neigh.remove(v as u16, a);
        }
        Event::Route4(net, len, Some(r)) => {
            vr.fib4
                .insert(Prefix4::new_masked(net, len), hops(r))
                .unwrap();
        }
        Event::Route4(net, len, None) => {
            let _ = vr.fib4.remove(&Prefix4::new_masked(net, len));
        }
        Event::Route6(net, len, Some(r)) => {
            vr.fib6
                .insert(Prefix6::new_masked(net, len), hops(r))
                .unwrap();
        }
        Event::Route6(net, len, None) => {
            let _ = vr.fib6.remove(&Prefix6::new_masked(net, len));
        }
        Event::Mtu(v, mtu) => rig.dp.set_vif_mtu(&vr.config.name, v as u16, mtu).unwrap(),
    }
    rig.run();
}

pub(crate) fn next_hop(r: (usize, IpAddr)) -> NextHop {
    NextHop::Via {
        addr: r.1,
        ifindex: r.0 as u32,
    }
}

pub(crate) fn hops(r: R) -> NextHopSet {
    match r {
        R::Via(v, a) => next_hop((v, a)).into(),
        R::Ecmp(h) => NextHopSet::ecmp(h.map(next_hop).to_vec()).unwrap(),
        R::Blackhole => NextHop::Drop.into(),
        R::Unreachable => NextHop::Unreachable.into(),
        R::Prohibit => NextHop::Prohibit.into(),
    }
}

/// Add the VR `name` to `rig` as `net` has it: its VIFs, routes and neighbours. Every ICMP
/// error due is sent and every punt queued (no rate limit in the way).
#[allow(
    dead_code,
    reason = "reference_multi.rs demuxes some VIFs by VLAN or rule: it uses add_vr_keyed alone"
)]
pub(crate) fn add_vr(rig: &mut Rig, name: &str, net: &Net, flow_cache: bool) -> Arc<Vr> {
    add_vr_keyed(rig, name, net, flow_cache, |_| DemuxKey::Mac)
}

/// [`add_vr`] with VIF `i` demuxed by `key(i)`.
pub(crate) fn add_vr_keyed(
    rig: &mut Rig,
    name: &str,
    net: &Net,
    flow_cache: bool,
    key: impl Fn(usize) -> DemuxKey,
) -> Arc<Vr> {
    let mut cfg = VrConfig::new(name);
    cfg.icmp_rate = 1_000_000;
    cfg.icmp_burst = 1_000_000;
    cfg.punt_rate = 0;
    if !flow_cache {
        cfg.flow_cache = 0;
    }
    let vr = rig.dp.add_vr(cfg).unwrap();
    for (i, d) in net.vifs.iter().enumerate() {
        let mut addrs: Vec<IfAddr> = d.v4.iter().map(|&(a, l)| IfAddr::V4(a, l)).collect();
        addrs.extend(d.v6.iter().map(|&(a, l)| IfAddr::V6(a, l)));
        let mut c = vif(d.name, d.port, EthernetAddress(d.mac), addrs);
        c.vlan = d.vlan;
        c.mtu = net.mtu[i];
        c.key = key(i);
        assert_eq!(usize::from(rig.dp.add_vif(name, c).unwrap()), i);
    }
    for &(n, len, r) in &net.routes4 {
        vr.fib4
            .insert(Prefix4::new_masked(n, len), hops(r))
            .unwrap();
    }
    for &(n, len, r) in &net.routes6 {
        vr.fib6
            .insert(Prefix6::new_masked(n, len), hops(r))
            .unwrap();
    }
    for &(v, a, m) in &net.neigh {
        vr.neigh.set(v as u16, a, EthernetAddress(m));
    }
    vr
}

// ---------------------------------------------------------------------------------------
// Byte helpers, written here (not `vrhost-wire`'s) so that the model shares no code with
// the data plane.
// ---------------------------------------------------------------------------------------

pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub(crate) fn ip4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

pub(crate) fn ip6(b: &[u8]) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(&b[..16]).unwrap())
}

/// The folded one's complement sum of `data` as 16-bit big-endian words (RFC 1071).
pub(crate) fn ones_sum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(c.get(1).copied().unwrap_or(0));
        s = (s & 0xffff) + (s >> 16);
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// An IPv4 header with its checksum computed from scratch (RFC 791).
pub(crate) fn with_header_checksum(h: &[u8]) -> Vec<u8> {
    let mut h = h.to_vec();
    h[10] = 0;
    h[11] = 0;
    let c = !ones_sum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

pub(crate) fn pseudo4(src: &[u8], dst: &[u8], proto: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(12);
    p.extend_from_slice(src);
    p.extend_from_slice(dst);
    p.extend_from_slice(&[0, proto]);
    p.extend_from_slice(&(len as u16).to_be_bytes());
    p
}

pub(crate) fn pseudo6(src: &[u8], dst: &[u8], nh: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(40);
    p.extend_from_slice(src);
    p.extend_from_slice(dst);
    p.extend_from_slice(&(len as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, nh]);
    p
}

/// The checksum of `pseudo` followed by `data` (whose checksum field is zero).
pub(crate) fn l4_checksum(pseudo: &[u8], data: &[u8]) -> u16 {
    let mut all = pseudo.to_vec();
    all.extend_from_slice(data);
    !ones_sum(&all)
}

pub(crate) fn is_ll4(a: Ipv4Addr) -> bool {
    a.octets()[..2] == [169, 254]
}

pub(crate) fn is_ll6(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

pub(crate) fn hex(b: &[u8]) -> String {
    let mut s = String::new();
    for (i, x) in b.iter().take(128).enumerate() {
        if i > 0 && i % 32 == 0 {
            s.push('\n');
        }
        let _ = write!(s, "{x:02x}");
    }
    if b.len() > 128 {
        let _ = write!(s, "… ({} bytes)", b.len());
    }
    s
}

// ---------------------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------------------

/// What the FIB says about a destination.
#[derive(Debug, Clone)]
pub(crate) enum Route {
    Local,
    /// Next hops (VIF, neighbour address); attached destinations are their own neighbour.
    Fwd(Vec<(usize, IpAddr)>),
    Blackhole,
    Unreachable,
    Prohibit,
}

pub(crate) fn configured(r: R) -> Route {
    match r {
        R::Via(v, a) => Route::Fwd(vec![(v, a)]),
        R::Ecmp(h) => Route::Fwd(h.to_vec()),
        R::Blackhole => Route::Blackhole,
        R::Unreachable => Route::Unreachable,
        R::Prohibit => Route::Prohibit,
    }
}

/// Longest-prefix match over the routes the VR has: per address, the address itself local,
/// an IPv4 subnet's broadcast address local (prefixes up to /30), an IPv6 subnet's
/// Subnet-Router anycast address local, the subnet attached (not for IPv6 link-local
/// addresses); then the configured routes. No default route.
pub(crate) fn lookup4(net: &Net, dst: Ipv4Addr) -> Option<Route> {
    let a = u32::from(dst);
    let mut best: Option<(u8, Route)> = None;
    let mut consider = |net: u32, len: u8, r: Route| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        if a & mask == net & mask && best.as_ref().is_none_or(|(l, _)| len > *l) {
            best = Some((len, r));
        }
    };
    for (i, v) in net.vifs.iter().enumerate() {
        for &(addr, len) in v.v4 {
            let addr = u32::from(addr);
            consider(addr, 32, Route::Local);
            if len <= 30 {
                consider(addr | (u32::MAX >> len), 32, Route::Local);
            }
            if len < 32 {
                consider(addr, len, Route::Fwd(vec![(i, IpAddr::V4(dst))]));
            }
        }
    }
    for &(n, len, r) in &net.routes4 {
        consider(u32::from(n), len, configured(r));
    }
    best.map(|(_, r)| r)
}

pub(crate) fn lookup6(net: &Net, dst: Ipv6Addr) -> Option<Route> {
    let a = u128::from(dst);
    let mut best: Option<(u8, Route)> = None;
    let mut consider = |net: u128, len: u8, r: Route| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        if a & mask == net & mask && best.as_ref().is_none_or(|(l, _)| len > *l) {
            best = Some((len, r));
        }
    };
    for (i, v) in net.vifs.iter().enumerate() {
        for &(addr, len) in v.v6 {
            consider(u128::from(addr), 128, Route::Local);
            if len < 128 && !is_ll6(addr) {
                consider(
                    u128::from(addr),
                    len,
                    Route::Fwd(vec![(i, IpAddr::V6(dst))]),
                );
                // The subnet's Subnet-Router anycast address is the router's too (RFC 4291
                // §2.6.1: "all routers are required to support" it).
                let net = u128::from(addr) & (u128::MAX << (128 - len));
                consider(net, 128, Route::Local);
            }
        }
    }
    for &(n, len, r) in &net.routes6 {
        consider(u128::from(n), len, configured(r));
    }
    best.map(|(_, r)| r)
}

pub(crate) fn neighbour(net: &Net, vif: usize, addr: IpAddr) -> Option<Mac> {
    net.neigh
        .iter()
        .find(|&&(v, a, _)| v == vif && a == addr)
        .map(|&(_, _, m)| m)
}

/// The directed-broadcast addresses of the VR's subnets: not one host's address (RFC 1812
/// §4.3.2.7, §5.3.7).
pub(crate) fn subnet_broadcasts(vifs: &Vifs) -> Vec<Ipv4Addr> {
    vifs.iter()
        .flat_map(|v| v.v4)
        .filter(|(_, len)| *len <= 30)
        .map(|&(a, len)| Ipv4Addr::from(u32::from(a) | (u32::MAX >> len)))
        .collect()
}

/// The Subnet-Router anycast addresses of the VR's subnets (RFC 4291 §2.6.1), the
/// link-local one included, not for /127 links (RFC 6164): not one node's address (RFC 4443
/// §2.4(e.6)).
pub(crate) fn subnet_router_anycasts(vifs: &Vifs) -> Vec<Ipv6Addr> {
    vifs.iter()
        .flat_map(|v| v.v6)
        .filter(|(_, len)| (1..127).contains(len))
        .map(|&(a, len)| Ipv6Addr::from(u128::from(a) & (u128::MAX << (128 - len))))
        .collect()
}

/// What must become of one frame.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// No VIF takes it: dropped at demux.
    DemuxDrop,
    /// Dropped by the VR. `icmp_due`: an error was due but may not or cannot be sent (an
    /// `icmp-*` reason counts that, besides the packet's own drop).
    Drop { why: String, icmp_due: bool },
    /// Punted, as received (or cut after the datagram, at `end`), with the ingress VIF
    /// noted.
    Punt {
        vif: usize,
        why: &'static str,
        end: Option<usize>,
    },
    /// Forwarded out of `vif` to one of `macs` (more than one: ECMP); `dgram` as received.
    Forward {
        vif: usize,
        macs: Vec<Mac>,
        dgram: Vec<u8>,
    },
    /// Fragmented (IPv4) out of `vif` (whose MTU is `mtu`), every piece to the same one of
    /// `macs`.
    Fragment {
        vif: usize,
        mtu: u16,
        macs: Vec<Mac>,
        dgram: Vec<u8>,
    },
    /// An ICMP (or ICMPv6, by `dgram`'s version) error out of the ingress `vif` to `to`.
    Icmp {
        vif: usize,
        to: Mac,
        ty: u8,
        code: u8,
        mtu: u16,
        dgram: Vec<u8>,
        why: &'static str,
    },
    /// Any one of these (where the RFCs leave the choice open).
    OneOf(Vec<Expect>),
}

impl Expect {
    pub(crate) fn summary(&self) -> String {
        match self {
            Expect::DemuxDrop => "dropped at demux".into(),
            Expect::Drop { why, icmp_due } => {
                format!(
                    "dropped ({why}){}",
                    if *icmp_due { ", error not sent" } else { "" }
                )
            }
            Expect::Punt { vif, why, .. } => format!("punted from VIF {} ({why})", VIFS[*vif].name),
            Expect::Forward { vif, macs, dgram } => format!(
                "forwarded out of VIF {} to {macs:02x?}, {} bytes",
                VIFS[*vif].name,
                dgram.len()
            ),
            Expect::Fragment {
                vif, mtu, dgram, ..
            } => format!(
                "fragmented out of VIF {} (MTU {mtu}), {} bytes",
                VIFS[*vif].name,
                dgram.len()
            ),
            Expect::Icmp {
                vif,
                ty,
                code,
                mtu,
                why,
                ..
            } => format!(
                "ICMP error type {ty} code {code} (mtu {mtu}) back out of VIF {} ({why})",
                VIFS[*vif].name
            ),
            Expect::OneOf(v) => {
                let s: Vec<String> = v.iter().map(Expect::summary).collect();
                format!("one of [{}]", s.join(" | "))
            }
        }
    }
}

pub(crate) fn drop(why: impl Into<String>) -> Expect {
    Expect::Drop {
        why: why.into(),
        icmp_due: false,
    }
}

/// Where demux puts a frame.
pub(crate) struct Rx {
    pub(crate) vif: usize,
    pub(crate) ethertype: u16,
    pub(crate) l3: usize,
    /// Sent to a link-layer broadcast or multicast address.
    pub(crate) group: bool,
    pub(crate) smac: Mac,
}

/// What the VR must do with `frame`, which demux gave it as `rx` says.
pub(crate) fn vr_model(net: &Net, rx: &Rx, frame: &[u8]) -> Expect {
    let l3 = &frame[rx.l3..];
    match rx.ethertype {
        0x0806 => Expect::Punt {
            vif: rx.vif,
            why: "ARP",
            end: None,
        },
        0x0800 => model4(net, rx, l3),
        0x86dd => model6(net, rx, l3),
        _ => drop("unknown ethertype"),
    }
}

/// ICMP types that are error messages (RFC 792, RFC 1812 §4.3.2.7).
pub(crate) const ICMP4_ERRORS: [u8; 5] = [3, 4, 5, 11, 12];

pub(crate) fn model4(net: &Net, rx: &Rx, l3: &[u8]) -> Expect {
    // RFC 1812 §5.2.2.
    if l3.len() < 20 {
        return drop("ip4: shorter than a header");
    }
    if l3[0] >> 4 != 4 {
        return drop("ip4: version");
    }
    let ihl = usize::from(l3[0] & 0xf) * 4;
    if ihl < 20 || ihl > l3.len() {
        return drop("ip4: header length");
    }
    let tot = usize::from(be16(&l3[2..]));
    if tot < ihl || tot > l3.len() {
        return drop("ip4: total length");
    }
    if ones_sum(&l3[..ihl]) != 0xffff {
        return drop("ip4: header checksum");
    }
    let d = &l3[..tot];
    let punt = |why| Expect::Punt {
        vif: rx.vif,
        why,
        end: Some(rx.l3 + tot),
    };
    let (src, dst) = (ip4(&d[12..]), ip4(&d[16..]));
    if dst == Ipv4Addr::BROADCAST {
        return punt("limited broadcast");
    }
    // RFC 1812 §5.3.7, §4.2.2.11.
    let s0 = src.octets()[0];
    if s0 == 0 || s0 == 127 || s0 >= 224 {
        return drop("ip4: martian source");
    }
    if dst.is_multicast() {
        return if dst.octets()[..3] == [224, 0, 0] {
            punt("link-local multicast")
        } else {
            drop("ip4: multicast (no multicast routing)")
        };
    }
    let d0 = dst.octets()[0];
    if d0 == 0 || d0 == 127 {
        return drop("ip4: martian destination");
    }
    let route = lookup4(net, dst);
    let local = matches!(route, Some(Route::Local));
    // RFC 3927 §7, RFC 1812 §5.3.4.
    if is_ll4(src) || is_ll4(dst) || rx.group {
        return if local {
            punt("to this router (link-local address or link-layer group frame)")
        } else {
            drop("ip4: link-local or link-layer group, not to this router")
        };
    }
    // The policy: options go to the control plane (its kernel processes them and forwards
    // the packet), unless the route forwards nothing: no route, a blackhole, unreachable or
    // prohibit route is applied as for a packet without options.
    let refused = matches!(
        route,
        None | Some(Route::Blackhole | Route::Unreachable | Route::Prohibit)
    );
    if ihl > 20 && !refused {
        return punt("IP options");
    }
    let err = |ty, code, mtu, why| error4(net, rx, d, ty, code, mtu, why);
    match route {
        None => err(3, 0, 0, "no route: net unreachable"),
        Some(Route::Local) => punt("local"),
        Some(Route::Blackhole) => drop("blackhole"),
        Some(Route::Unreachable) => err(3, 1, 0, "unreachable route: host unreachable"),
        // RFC 1812 §5.2.7.1.
        Some(Route::Prohibit) => err(3, 13, 0, "prohibit route: administratively prohibited"),
        Some(Route::Fwd(hops)) => {
            let egress = hops[0].0;
            let macs: Vec<Mac> = hops
                .iter()
                .filter_map(|&(v, a)| neighbour(net, v, a))
                .collect();
            let mtu = net.mtu[egress];
            if d[8] <= 1 {
                // RFC 1812 §5.3.1.
                err(11, 0, 0, "TTL expired")
            } else if macs.is_empty() {
                punt("neighbour unresolved")
            } else {
                let out = if tot > usize::from(mtu) {
                    if d[6] & 0x40 != 0 {
                        // RFC 1812 §5.2.7.1, RFC 1191.
                        err(3, 4, mtu, "too big and DF: fragmentation needed")
                    } else {
                        fragment(egress, mtu, &macs, d)
                    }
                } else {
                    Expect::Forward {
                        vif: egress,
                        macs: macs.clone(),
                        dgram: d.to_vec(),
                    }
                };
                or_unresolved(out, &macs, &hops, punt("ECMP member unresolved"))
            }
        }
    }
}

/// Where an ECMP route has members resolved and unresolved, the flow's hash may pick either
/// (all members here leave by one VIF): `out` by a resolved one, or `punt` to resolve.
pub(crate) fn or_unresolved(
    out: Expect,
    macs: &[Mac],
    hops: &[(usize, IpAddr)],
    punt: Expect,
) -> Expect {
    if macs.len() < hops.len() {
        Expect::OneOf(vec![out, punt])
    } else {
        out
    }
}

pub(crate) const TO_BROADCAST_SOURCE: &str = "to a broadcast source";

/// A packet "from" one of the VR's own addresses came from elsewhere (spoofed, or looped):
/// an error would be addressed to the VR itself. No error (as Linux, which drops such a
/// packet as a martian source before it could answer it).
pub(crate) const TO_OWN_SOURCE: &str = "to a source that is the VR's own address";

/// Fragmenting `d` out of `vif`: the pieces as RFC 791 cuts them, unless their offsets do
/// not fit the 13-bit field (dropped). A fragment that lies past the 65,535 bytes a datagram
/// may have is no part of any datagram: cutting it up or dropping it are both fine.
pub(crate) fn fragment(vif: usize, mtu: u16, macs: &[Mac], d: &[u8]) -> Expect {
    let ihl = usize::from(d[0] & 0xf) * 4;
    let off = usize::from(be16(&d[6..]) & 0x1fff) * 8;
    let data = d.len() - ihl;
    let chunk = (usize::from(mtu) - ihl) / 8 * 8;
    let last = off + (data - 1) / chunk * chunk;
    let frag = Expect::Fragment {
        vif,
        mtu,
        macs: macs.to_vec(),
        dgram: d.to_vec(),
    };
    if last > 0x1fff * 8 {
        drop("fragment offsets past the field")
    } else if ihl + off + data > 0xffff {
        Expect::OneOf(vec![frag, drop("a fragment past 65,535 bytes")])
    } else {
        frag
    }
}

/// An ICMP error of `ty`/`code` about `dgram` back to the sender of `rx`, or, if the RFCs
/// forbid it (`forbidden` says why), the drop without one.
fn icmp_unless(
    forbidden: Option<&str>,
    rx: &Rx,
    ty: u8,
    code: u8,
    mtu: u16,
    dgram: &[u8],
    why: &'static str,
) -> Expect {
    match forbidden {
        Some(f) => Expect::Drop {
            why: format!("{why}; no error {f}"),
            icmp_due: true,
        },
        None => Expect::Icmp {
            vif: rx.vif,
            to: rx.smac,
            ty,
            code,
            mtu,
            dgram: dgram.to_vec(),
            why,
        },
    }
}

/// An ICMP error about `d`, unless RFC 1812 §4.3.2.7 forbids it.
pub(crate) fn error4(
    net: &Net,
    rx: &Rx,
    d: &[u8],
    ty: u8,
    code: u8,
    mtu: u16,
    why: &'static str,
) -> Expect {
    let ihl = usize::from(d[0] & 0xf) * 4;
    let src = ip4(&d[12..]);
    let forbidden = if be16(&d[6..]) & 0x1fff != 0 {
        Some("about a non-first fragment")
    } else if d[9] == 1 && d.len() > ihl && ICMP4_ERRORS.contains(&d[ihl]) {
        Some("about an ICMP error")
    } else if subnet_broadcasts(net.vifs).contains(&src) {
        Some(TO_BROADCAST_SOURCE)
    } else if net.vifs.iter().flat_map(|v| v.v4).any(|&(a, _)| a == src) {
        Some(TO_OWN_SOURCE)
    } else {
        None
    };
    icmp_unless(forbidden, rx, ty, code, mtu, d, why)
}

/// Whether the packet's first header is a well-formed Hop-by-Hop Options header with a
/// Router Alert option (RFC 2711).
pub(crate) fn router_alert(p: &[u8]) -> bool {
    if p[6] != 0 || p.len() < 48 {
        return false;
    }
    let end = 40 + (usize::from(p[41]) + 1) * 8;
    if end > p.len() {
        return false;
    }
    let mut i = 42;
    while i < end {
        if p[i] == 0 {
            i += 1;
            continue;
        }
        if i + 1 >= end {
            return false;
        }
        if p[i] == 5 {
            return true;
        }
        i += 2 + usize::from(p[i + 1]);
    }
    false
}

/// Walk the extension header chain (RFC 8200 §4): `Err` if it runs past the packet, else the
/// ICMPv6 type if the upper layer is ICMPv6 and visible (not behind a non-first fragment).
pub(crate) fn walk6(p: &[u8]) -> Result<Option<u8>, ()> {
    let mut nh = p[6];
    let mut off = 40;
    loop {
        match nh {
            0 | 43 | 60 => {
                if nh == 0 && off != 40 || off + 2 > p.len() {
                    return Err(());
                }
                let len = (usize::from(p[off + 1]) + 1) * 8;
                if off + len > p.len() {
                    return Err(());
                }
                nh = p[off];
                off += len;
            }
            44 => {
                if off + 8 > p.len() {
                    return Err(());
                }
                let offset = be16(&p[off + 2..]) >> 3;
                nh = p[off];
                off += 8;
                if offset != 0 {
                    return Ok(None);
                }
            }
            58 => return Ok(p.get(off).copied()),
            _ => return Ok(None),
        }
    }
}

pub(crate) fn model6(net: &Net, rx: &Rx, l3: &[u8]) -> Expect {
    if l3.len() < 40 {
        return drop("ip6: shorter than a header");
    }
    if l3[0] >> 4 != 6 {
        return drop("ip6: version");
    }
    let plen = usize::from(be16(&l3[4..]));
    if 40 + plen > l3.len() {
        return drop("ip6: payload length");
    }
    let p = &l3[..40 + plen];
    let punt = |why| Expect::Punt {
        vif: rx.vif,
        why,
        end: Some(rx.l3 + 40 + plen),
    };
    let (src, dst) = (ip6(&p[8..]), ip6(&p[24..]));
    // RFC 4291 §2.5.2, §2.5.3, §2.7.
    if src.is_multicast()
        || src == Ipv6Addr::LOCALHOST
        || (src.is_unspecified() && !dst.is_multicast())
    {
        return drop("ip6: bad source");
    }
    if dst.is_multicast() {
        // RFC 4291 §2.7: scope 0 is reserved, "if such a packet is received, it must be
        // silently dropped".
        let scope = dst.octets()[1] & 0xf;
        return if scope == 0 {
            drop(RESERVED_SCOPE)
        } else if scope <= 2 {
            punt("link-scope multicast")
        } else {
            drop("ip6: multicast (no multicast routing)")
        };
    }
    if dst.is_unspecified() || dst == Ipv6Addr::LOCALHOST {
        return drop("ip6: bad destination");
    }
    if router_alert(p) {
        // The control plane's (RSVP …), unless its route forwards nothing: then as for any
        // packet. To a link-local address or in a link-layer group frame it is never
        // forwarded, so it is punted whatever the routes say.
        let err = |ty, code, why| error6(net, rx, p, ty, code, 0, why);
        return match lookup6(net, dst) {
            _ if is_ll6(dst) || rx.group => punt("router alert"),
            None => err(1, 0, "router alert, no route"),
            Some(Route::Blackhole) => drop("router alert, blackhole"),
            Some(Route::Unreachable) => err(1, 0, "router alert, unreachable route: no route"),
            Some(Route::Prohibit) => err(1, 1, "router alert, prohibit route"),
            Some(Route::Local | Route::Fwd(_)) => punt("router alert"),
        };
    }
    if walk6(p).is_err() {
        return drop("ip6: malformed extension chain");
    }
    let route = lookup6(net, dst);
    let local = matches!(route, Some(Route::Local));
    // To a Subnet-Router anycast address where it matters that it is the router's own.
    let anycast = subnet_router_anycasts(net.vifs).contains(&dst) && (p[7] <= 1 || rx.group);
    // RFC 4291 §2.5.6; unicast in a link-layer group frame (as RFC 1812 §5.3.4 for IPv4).
    if is_ll6(dst) || rx.group {
        return if anycast {
            punt(TO_SUBNET_ROUTER_ANYCAST)
        } else if local {
            punt("to this router (link-local address or link-layer group frame)")
        } else {
            drop("ip6: link-local or link-layer group, not to this router")
        };
    }
    let err = |ty, code, mtu, why| error6(net, rx, p, ty, code, mtu, why);
    let out = match route {
        // RFC 4443 §3.1.
        None => err(1, 0, 0, "no route"),
        Some(Route::Local) if anycast => punt(TO_SUBNET_ROUTER_ANYCAST),
        Some(Route::Local) => punt("local"),
        Some(Route::Blackhole) => drop("blackhole"),
        // Code 0 ("no route"), as Linux answers its `unreachable` routes: the routes come
        // from the VR's kernel, and its answers should not change with the data plane.
        Some(Route::Unreachable) => err(1, 0, 0, "unreachable route: no route"),
        Some(Route::Prohibit) => err(1, 1, 0, "prohibit route: administratively prohibited"),
        Some(Route::Fwd(hops)) => {
            let egress = hops[0].0;
            let macs: Vec<Mac> = hops
                .iter()
                .filter_map(|&(v, a)| neighbour(net, v, a))
                .collect();
            let mtu = net.mtu[egress];
            if p[7] <= 1 {
                // RFC 4443 §3.3, RFC 8200 §3.
                err(3, 0, 0, "hop limit expired")
            } else if macs.is_empty() {
                punt("neighbour unresolved")
            } else {
                let out = if p.len() > usize::from(mtu) {
                    // RFC 4443 §3.2, RFC 8200 §5: routers do not fragment.
                    err(2, 0, mtu, "packet too big")
                } else {
                    Expect::Forward {
                        vif: egress,
                        macs: macs.clone(),
                        dgram: p.to_vec(),
                    }
                };
                or_unresolved(out, &macs, &hops, punt("ECMP member unresolved"))
            }
        }
    };
    // A link-local source may not leave its link (RFC 4291 §2.5.6, RFC 4007 §9): leaving by
    // another VIF is "beyond scope of source address" (RFC 4443 §3.1 code 2). Back out of
    // the same VIF it stays on its link and is forwarded (as Linux does). Where the packet
    // would not leave the link anyway (an error, a drop, a punt), refusing it as beyond
    // scope is as good.
    if is_ll6(src) && !local {
        let beyond = err(1, 2, 0, "link-local source: beyond scope");
        return off_link(out, rx.vif, &beyond);
    }
    out
}

pub(crate) const TO_ANYCAST_SOURCE: &str = "to an anycast source";

pub(crate) const RESERVED_SCOPE: &str = "ip6: multicast of reserved scope 0";

pub(crate) const TO_SUBNET_ROUTER_ANYCAST: &str =
    "to a Subnet-Router anycast address, with hop limit <= 1 or in a group frame";

/// `out` for a packet with a link-local source that arrived on `ingress`: `beyond` instead
/// of forwarding it to another link, forwarding back to its own link as it is, `beyond` as
/// good as anything else.
pub(crate) fn off_link(out: Expect, ingress: usize, beyond: &Expect) -> Expect {
    match out {
        Expect::Forward { vif, .. } if vif != ingress => beyond.clone(),
        o @ Expect::Forward { .. } => o,
        Expect::OneOf(v) => Expect::OneOf(
            v.into_iter()
                .map(|o| off_link(o, ingress, beyond))
                .collect(),
        ),
        o => Expect::OneOf(vec![o, beyond.clone()]),
    }
}

/// An ICMPv6 error about `p` (whose extension header chain is well-formed), unless RFC 4443
/// §2.4(e) forbids it or the VIF has no IPv6 address to send it from.
pub(crate) fn error6(
    net: &Net,
    rx: &Rx,
    p: &[u8],
    ty: u8,
    code: u8,
    mtu: u16,
    why: &'static str,
) -> Expect {
    let src = ip6(&p[8..]);
    let icmp_type = walk6(p).ok().flatten();
    let forbidden = if net.vifs[rx.vif].v6.is_empty() {
        Some("from a VIF without an IPv6 address")
    } else if icmp_type.is_some_and(|t| t < 128 || t == 137) {
        Some("about an ICMPv6 error or redirect")
    } else if subnet_router_anycasts(net.vifs).contains(&src) {
        Some(TO_ANYCAST_SOURCE)
    } else if net.vifs.iter().flat_map(|v| v.v6).any(|&(a, _)| a == src) {
        Some(TO_OWN_SOURCE)
    } else {
        None
    };
    icmp_unless(forbidden, rx, ty, code, mtu, p, why)
}

// ---------------------------------------------------------------------------------------
// What the data plane did with one frame.
// ---------------------------------------------------------------------------------------

#[derive(Debug)]
pub(crate) struct Observed {
    /// (port, frame) of everything sent.
    pub(crate) out: Vec<(usize, Vec<u8>)>,
    /// (ingress VIF, frame) of everything punted.
    pub(crate) punts: Vec<(usize, Vec<u8>)>,
    /// VR drop counters that grew, by how much.
    pub(crate) drops: Vec<(Drop, u64)>,
    /// Demux drop counters that grew.
    pub(crate) demux: Vec<(Drop, u64)>,
    pub(crate) icmp_sent: u64,
}

pub(crate) fn is_icmp_reason(d: Drop) -> bool {
    d.name().starts_with("icmp-")
}

impl Observed {
    /// Packets dropped (the `icmp-*` reasons count errors not sent, not packets).
    pub(crate) fn dropped(&self) -> u64 {
        self.drops
            .iter()
            .filter(|(d, _)| !is_icmp_reason(*d))
            .map(|(_, n)| n)
            .sum()
    }

    pub(crate) fn errors_not_sent(&self) -> u64 {
        self.drops
            .iter()
            .filter(|(d, _)| is_icmp_reason(*d))
            .map(|(_, n)| n)
            .sum()
    }

    pub(crate) fn summary(&self) -> String {
        let mut s = String::new();
        for (p, f) in &self.out {
            let _ = write!(s, "\n  sent on port {p}: {}", describe(f));
        }
        for (v, f) in &self.punts {
            let _ = write!(
                s,
                "\n  punted from VIF {}: {} bytes",
                VIFS[*v].name,
                f.len()
            );
        }
        let names = |v: &[(Drop, u64)]| -> Vec<String> {
            v.iter().map(|(d, n)| format!("{}×{n}", d.name())).collect()
        };
        let _ = write!(
            s,
            "\n  VR drops {:?}, demux drops {:?}, ICMP errors sent {}",
            names(&self.drops),
            names(&self.demux),
            self.icmp_sent
        );
        s
    }
}

/// A frame in one line: L2, and the L3 header's main fields.
pub(crate) fn describe(f: &[u8]) -> String {
    if f.len() < 14 {
        return format!("{} bytes", f.len());
    }
    let mut s = format!("{:02x?} <- {:02x?}", &f[..6], &f[6..12]);
    let (mut ty, mut off) = (be16(&f[12..]), 14);
    while (ty == 0x8100 || ty == 0x88a8) && f.len() >= off + 4 {
        let _ = write!(s, " tag {ty:#06x} vlan {}", be16(&f[off..]) & 0xfff);
        ty = be16(&f[off + 2..]);
        off += 4;
    }
    let l3 = &f[off..];
    if ty == 0x0800 && l3.len() >= 20 {
        let ihl = usize::from(l3[0] & 0xf) * 4;
        let _ = write!(
            s,
            " IPv4 {} -> {} len {} ttl {} proto {} frag {:#06x}",
            ip4(&l3[12..]),
            ip4(&l3[16..]),
            be16(&l3[2..]),
            l3[8],
            l3[9],
            be16(&l3[6..])
        );
        if l3[9] == 1 && l3.len() >= ihl + 2 {
            let _ = write!(s, " icmp {}/{}", l3[ihl], l3[ihl + 1]);
        }
    } else if ty == 0x86dd && l3.len() >= 40 {
        let _ = write!(
            s,
            " IPv6 {} -> {} plen {} hop {} nh {}",
            ip6(&l3[8..]),
            ip6(&l3[24..]),
            be16(&l3[4..]),
            l3[7],
            l3[6]
        );
        if l3[6] == 58 && l3.len() >= 42 {
            let _ = write!(s, " icmp6 {}/{}", l3[40], l3[41]);
        }
    } else {
        let _ = write!(s, " ethertype {ty:#06x}");
    }
    let _ = write!(s, " ({} bytes)", f.len());
    s
}

// ---------------------------------------------------------------------------------------
// Checking an observation against an expectation.
// ---------------------------------------------------------------------------------------

macro_rules! ensure {
    ($c:expr, $($f:tt)+) => {
        if !$c {
            return Err(format!($($f)+));
        }
    };
}

/// `o` against `e` for a VR with the VIFs `vifs`; what differs, if anything.
pub(crate) fn check(vifs: &Vifs, e: &Expect, o: &Observed, sent: &[u8]) -> Result<(), String> {
    match e {
        Expect::OneOf(v) => {
            let mut why = Vec::new();
            for e in v {
                match check(vifs, e, o, sent) {
                    Ok(()) => return Ok(()),
                    Err(w) => why.push(format!("[{}: {w}]", e.summary())),
                }
            }
            Err(why.join(" "))
        }
        Expect::DemuxDrop => {
            ensure!(o.out.is_empty() && o.punts.is_empty(), "something came out");
            ensure!(o.drops.is_empty(), "the VR counted a drop");
            let n: u64 = o.demux.iter().map(|(_, n)| n).sum();
            ensure!(n == 1, "{n} demux drops counted, not 1");
            Ok(())
        }
        Expect::Drop { icmp_due, .. } => {
            ensure!(o.out.is_empty(), "{} frame(s) sent", o.out.len());
            ensure!(o.punts.is_empty(), "punted");
            ensure!(o.demux.is_empty(), "dropped at demux");
            ensure!(o.dropped() == 1, "{} drops counted, not 1", o.dropped());
            ensure!(o.icmp_sent == 0, "an ICMP error counted as sent");
            let due = u64::from(*icmp_due);
            ensure!(
                o.errors_not_sent() == due,
                "{} errors counted as not sent, not {due}",
                o.errors_not_sent()
            );
            Ok(())
        }
        Expect::Punt { vif, end, .. } => {
            ensure!(o.out.is_empty(), "{} frame(s) sent", o.out.len());
            ensure!(o.drops.is_empty() && o.demux.is_empty(), "a drop counted");
            ensure!(
                o.punts.len() == 1,
                "{} packets punted, not 1",
                o.punts.len()
            );
            let (v, f) = &o.punts[0];
            ensure!(*v == *vif, "punted as from VIF {}", vifs[*v].name);
            // Link-layer padding after the datagram may go.
            let trimmed = end.is_some_and(|n| f[..] == sent[..n]);
            ensure!(
                f == sent || trimmed,
                "punted frame differs from the one sent:\n{}",
                hex(f)
            );
            Ok(())
        }
        Expect::Forward { vif, macs, dgram } => {
            no_drops_no_punts(o)?;
            ensure!(o.out.len() == 1, "{} frames sent, not 1", o.out.len());
            let (port, f) = &o.out[0];
            ensure!(*port == usize::from(vifs[*vif].port), "sent on port {port}");
            let ty = if dgram[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
            let l3 = check_l2(vifs, f, *vif, macs, ty)?;
            let want = forwarded(dgram);
            ensure!(
                l3 == want,
                "forwarded datagram differs:\n got  {}\n want {}",
                hex(l3),
                hex(&want)
            );
            Ok(())
        }
        Expect::Fragment {
            vif,
            mtu,
            macs,
            dgram,
        } => {
            no_drops_no_punts(o)?;
            check_fragments(vifs, o, *vif, usize::from(*mtu), macs, dgram)
        }
        Expect::Icmp { vif, to, dgram, .. } => {
            ensure!(
                o.punts.is_empty() && o.demux.is_empty(),
                "punted or demux drop"
            );
            ensure!(
                o.dropped() == 1 && o.errors_not_sent() == 0,
                "drops counted: {} packets, {} errors not sent (want 1, 0)",
                o.dropped(),
                o.errors_not_sent()
            );
            ensure!(
                o.icmp_sent == 1,
                "{} ICMP errors counted as sent",
                o.icmp_sent
            );
            ensure!(o.out.len() == 1, "{} frames sent, not 1", o.out.len());
            let (port, f) = &o.out[0];
            ensure!(*port == usize::from(vifs[*vif].port), "sent on port {port}");
            if dgram[0] >> 4 == 4 {
                let l3 = check_l2(vifs, f, *vif, &[*to], 0x0800)?;
                check_icmp4(vifs, l3, e)
            } else {
                let l3 = check_l2(vifs, f, *vif, &[*to], 0x86dd)?;
                check_icmp6(vifs, l3, e)
            }
        }
    }
}

pub(crate) fn no_drops_no_punts(o: &Observed) -> Result<(), String> {
    ensure!(o.punts.is_empty(), "punted");
    ensure!(o.drops.is_empty() && o.demux.is_empty(), "a drop counted");
    ensure!(o.icmp_sent == 0, "an ICMP error counted as sent");
    Ok(())
}

/// Check a frame's L2 header as VIF `vif` sends it (to one of `dst`, from its MAC, tagged as
/// it is, with `ty`); return its L3 part.
pub(crate) fn check_l2<'f>(
    vifs: &Vifs,
    f: &'f [u8],
    vif: usize,
    dst: &[Mac],
    ty: u16,
) -> Result<&'f [u8], String> {
    let d = &vifs[vif];
    ensure!(f.len() >= 14, "frame of {} bytes", f.len());
    ensure!(
        dst.iter().any(|m| f[..6] == *m),
        "to {:02x?}, not {dst:02x?}",
        &f[..6]
    );
    ensure!(
        f[6..12] == d.mac,
        "from {:02x?}, not VIF {}'s MAC",
        &f[6..12],
        d.name
    );
    let off = match d.vlan {
        Some(v) => {
            ensure!(
                // The priority bits are not the VIF's to say.
                f.len() >= 18 && be16(&f[12..]) == 0x8100 && be16(&f[14..]) & 0xfff == v,
                "not tagged with VLAN {v}: {}",
                hex(&f[12..f.len().min(18)])
            );
            16
        }
        None => {
            let t = be16(&f[12..]);
            ensure!(t != 0x8100 && t != 0x88a8, "tagged, VIF {} is not", d.name);
            12
        }
    };
    ensure!(
        f.len() >= off + 2 && be16(&f[off..]) == ty,
        "ethertype not {ty:#06x}"
    );
    // A frame leaves at least 60 bytes long, a shorter one padded with zeros after its
    // datagram (whose own length says where it ends).
    let l3 = &f[off + 2..];
    Ok(&l3[..datagram_len(ty, l3, f.len())?])
}

/// `dgram` as it must leave: TTL one less and the header checksum recomputed (IPv4), hop
/// limit one less (IPv6).
pub(crate) fn forwarded(dgram: &[u8]) -> Vec<u8> {
    let mut d = dgram.to_vec();
    if d[0] >> 4 == 4 {
        let ihl = usize::from(d[0] & 0xf) * 4;
        d[8] -= 1;
        let h = with_header_checksum(&d[..ihl]);
        d[..ihl].copy_from_slice(&h);
    } else {
        d[7] -= 1;
    }
    d
}

/// The options of an IPv4 header that RFC 791 copies into every fragment (copy bit set).
pub(crate) fn copied_options(opts: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            t => {
                let len = usize::from(*opts.get(i + 1).unwrap_or(&2)).max(2);
                let end = (i + len).min(opts.len());
                if t & 0x80 != 0 {
                    out.extend_from_slice(&opts[i..end]);
                }
                i = end;
            }
        }
    }
    out
}

pub(crate) fn check_fragments(
    vifs: &Vifs,
    o: &Observed,
    vif: usize,
    mtu: usize,
    macs: &[Mac],
    dgram: &[u8],
) -> Result<(), String> {
    let d = &vifs[vif];
    ensure!(
        o.out.len() >= 2,
        "{} frames sent, want fragments",
        o.out.len()
    );
    let ihl0 = usize::from(dgram[0] & 0xf) * 4;
    let off0 = usize::from(be16(&dgram[6..]) & 0x1fff) * 8;
    let mf0 = dgram[6] & 0x20 != 0;
    let copied = copied_options(&dgram[20..ihl0]);
    let mut frags = Vec::new();
    for (port, f) in &o.out {
        ensure!(
            *port == usize::from(d.port),
            "a fragment sent on port {port}"
        );
        let l3 = check_l2(vifs, f, vif, macs, 0x0800)?;
        ensure!(
            f[..6] == o.out[0].1[..6],
            "fragments sent to different MACs"
        );
        ensure!(
            l3.len() >= 20 && l3.len() <= mtu,
            "fragment of {} bytes",
            l3.len()
        );
        let ihl = usize::from(l3[0] & 0xf) * 4;
        ensure!(
            l3[0] >> 4 == 4 && ihl >= 20 && ihl <= l3.len(),
            "bad header"
        );
        ensure!(
            usize::from(be16(&l3[2..])) == l3.len(),
            "total length vs frame"
        );
        ensure!(
            l3[..ihl] == with_header_checksum(&l3[..ihl])[..],
            "header checksum wrong"
        );
        ensure!(
            l3[1] == dgram[1] && l3[4..6] == dgram[4..6],
            "TOS or ident changed"
        );
        ensure!(l3[8] == dgram[8] - 1, "TTL {} after {}", l3[8], dgram[8]);
        ensure!(
            l3[9] == dgram[9] && l3[12..20] == dgram[12..20],
            "protocol or address changed"
        );
        ensure!(l3[6] & 0xc0 == 0, "DF or reserved flag set");
        let off = usize::from(be16(&l3[6..]) & 0x1fff) * 8;
        frags.push((
            off,
            l3[6] & 0x20 != 0,
            l3[20..ihl].to_vec(),
            l3[ihl..].to_vec(),
        ));
    }
    frags.sort_by_key(|f| f.0);
    let mut at = off0;
    let mut data = Vec::new();
    let n = frags.len();
    for (i, (off, mf, opts, payload)) in frags.iter().enumerate() {
        ensure!(*off == at, "fragment at {off}, want {at} (gap or overlap)");
        let last = i + 1 == n;
        ensure!(*mf == (!last || mf0), "MF {mf} on fragment {i} of {n}");
        ensure!(
            last || payload.len() % 8 == 0,
            "payload {} not 8-aligned",
            payload.len()
        );
        if i == 0 {
            ensure!(
                opts[..] == dgram[20..ihl0],
                "first fragment's options differ"
            );
        } else {
            ensure!(
                opts.len() >= copied.len()
                    && opts[..copied.len()] == copied[..]
                    && opts[copied.len()..].iter().all(|b| *b == 0),
                "later fragment's options {opts:02x?}, want the copied ones {copied:02x?}"
            );
        }
        at += payload.len();
        data.extend_from_slice(payload);
    }
    ensure!(
        data == dgram[ihl0..],
        "fragments do not reassemble to the payload"
    );
    Ok(())
}

pub(crate) fn check_icmp4(vifs: &Vifs, l3: &[u8], e: &Expect) -> Result<(), String> {
    let Expect::Icmp {
        vif,
        ty,
        code,
        mtu,
        dgram,
        ..
    } = e
    else {
        unreachable!()
    };
    ensure!(l3.len() >= 28, "error of {} bytes", l3.len());
    ensure!(
        l3.len() <= 576,
        "error of {} bytes, over 576 (RFC 1812 §4.3.2.3)",
        l3.len()
    );
    let ihl = usize::from(l3[0] & 0xf) * 4;
    ensure!(
        l3[0] >> 4 == 4 && ihl >= 20 && ihl + 8 <= l3.len(),
        "bad header"
    );
    ensure!(
        usize::from(be16(&l3[2..])) == l3.len(),
        "total length vs frame"
    );
    ensure!(
        l3[..ihl] == with_header_checksum(&l3[..ihl])[..],
        "header checksum"
    );
    ensure!(be16(&l3[6..]) & 0x3fff == 0, "error is fragmented");
    ensure!(l3[8] > 0 && l3[9] == 1, "TTL 0 or not ICMP");
    ensure!(
        ip4(&l3[12..]) == vifs[*vif].v4[0].0,
        "source {}",
        ip4(&l3[12..])
    );
    ensure!(
        l3[16..20] == dgram[12..16],
        "destination {}",
        ip4(&l3[16..])
    );
    let icmp = &l3[ihl..];
    ensure!(ones_sum(icmp) == 0xffff, "ICMP checksum");
    ensure!(
        (icmp[0], icmp[1]) == (*ty, *code),
        "type {} code {}",
        icmp[0],
        icmp[1]
    );
    let rest = if *ty == 3 && *code == 4 {
        [0, 0, (mtu >> 8) as u8, *mtu as u8]
    } else {
        [0; 4]
    };
    ensure!(
        icmp[4..8] == rest,
        "bytes 4..8 {:02x?}, want {rest:02x?}",
        &icmp[4..8]
    );
    let quote = &icmp[8..];
    let ihl0 = usize::from(dgram[0] & 0xf) * 4;
    ensure!(
        quote.len() >= dgram.len().min(ihl0 + 8) && quote.len() <= dgram.len(),
        "quotes {} bytes of a {}-byte datagram",
        quote.len(),
        dgram.len()
    );
    // As received; RFC 1812 §4.3.2.3 lets the TTL decrement (and its checksum) stand.
    let n = quote.len();
    let decremented = dgram[8] > 0 && quote == &forwarded(dgram)[..n];
    ensure!(
        quote == &dgram[..n] || decremented,
        "quote is not the datagram as received:\n got  {}\n want {}",
        hex(quote),
        hex(&dgram[..n])
    );
    Ok(())
}

pub(crate) fn check_icmp6(vifs: &Vifs, l3: &[u8], e: &Expect) -> Result<(), String> {
    let Expect::Icmp {
        vif,
        ty,
        code,
        mtu,
        dgram,
        ..
    } = e
    else {
        unreachable!()
    };
    ensure!(l3.len() >= 48, "error of {} bytes", l3.len());
    ensure!(
        l3.len() <= 1280,
        "error of {} bytes, over 1280 (RFC 4443 §2.4(c))",
        l3.len()
    );
    ensure!(l3[0] >> 4 == 6, "version");
    ensure!(
        usize::from(be16(&l3[4..])) + 40 == l3.len(),
        "payload length vs frame"
    );
    ensure!(
        l3[6] == 58 && l3[7] > 0,
        "next header {} hop limit {}",
        l3[6],
        l3[7]
    );
    let src = vifs[*vif].v6[0].0;
    ensure!(ip6(&l3[8..]) == src, "source {}", ip6(&l3[8..]));
    ensure!(l3[24..40] == dgram[8..24], "destination {}", ip6(&l3[24..]));
    let icmp = &l3[40..];
    let mut all = pseudo6(&l3[8..24], &l3[24..40], 58, icmp.len());
    all.extend_from_slice(icmp);
    ensure!(ones_sum(&all) == 0xffff, "ICMPv6 checksum");
    ensure!(
        (icmp[0], icmp[1]) == (*ty, *code),
        "type {} code {}",
        icmp[0],
        icmp[1]
    );
    let rest = if *ty == 2 {
        u32::from(*mtu).to_be_bytes()
    } else {
        [0; 4]
    };
    ensure!(
        icmp[4..8] == rest,
        "bytes 4..8 {:02x?}, want {rest:02x?}",
        &icmp[4..8]
    );
    // As much of the packet as fits in 1280 bytes (RFC 4443 §2.4(c)).
    let want = &dgram[..dgram.len().min(1280 - 48)];
    ensure!(
        &icmp[8..] == want,
        "quote is not the packet as received:\n got  {}\n want {}",
        hex(&icmp[8..]),
        hex(want)
    );
    Ok(())
}
