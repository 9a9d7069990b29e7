//! Route-netlink sockets of one namespace: an event socket subscribed to links, addresses,
//! routes and neighbours, and a request socket for dumps; messages decoded with
//! `netlink-packet-route` and reduced to the mirror's [`Event`]s.
//!
//! Why two sockets: the event socket must be subscribed *before* the dump starts, so no
//! change between the two is missed, and a dump's replies must not queue behind (or be
//! mistaken for) notifications. `ip monitor` and FRR's zebra do the same.
//!
//! Sockets are plain blocking `netlink-sys` sockets, opened by a thread that has entered the
//! namespace (they stay bound to it wherever they are used), read with `poll(2)` timeouts so
//! the sync thread can be told to stop.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

use netlink_packet_core::{
    NLM_F_APPEND, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkBuffer,
    NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteNextHopFlags, RouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use vrhost_dataplane::IpPrefix;
use vrhost_fib::{Prefix4, Prefix6};
use vrhost_wire::EthernetAddress;

use super::mirror::{Event, Hop, NeighState, RouteKind, RouteMsg};
use super::nexthop;

// Multicast groups (linux/rtnetlink.h, enum rtnetlink_groups).
const RTNLGRP_LINK: u32 = 1;
const RTNLGRP_NEIGH: u32 = 3;
const RTNLGRP_IPV4_IFADDR: u32 = 5;
const RTNLGRP_IPV4_ROUTE: u32 = 7;
const RTNLGRP_IPV6_IFADDR: u32 = 9;
const RTNLGRP_IPV6_ROUTE: u32 = 11;

/// Big enough for any skb the kernel hands one `recv` (dumps fill up to 32 KiB per skb).
const RECV_BUF: usize = 1 << 16;

/// What reading the event socket gave.
#[derive(Debug)]
pub enum Recv {
    /// Messages were read (how many).
    Read(usize),
    /// Nothing waiting.
    Empty,
    /// The kernel dropped notifications (`ENOBUFS`): the mirror is stale.
    Overrun,
}

/// One route-netlink socket.
pub struct NlSocket {
    sock: Socket,
    buf: Vec<u8>,
    seq: u32,
}

impl core::fmt::Debug for NlSocket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NlSocket")
            .field("fd", &self.sock.as_raw_fd())
            .finish()
    }
}

/// Set `SO_RCVBUFFORCE` (root may go past `rmem_max`), falling back to `SO_RCVBUF`.
fn set_rcvbuf(sock: &Socket, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: `v` is a c_int that outlives the call; the size passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const v).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
    }
    Err(io::Error::last_os_error())
}

impl NlSocket {
    /// A socket subscribed to link, address, route and neighbour changes of the calling
    /// thread's namespace, with a receive buffer of `rcvbuf` bytes.
    pub fn events(rcvbuf: usize) -> io::Result<NlSocket> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind(&SocketAddr::new(0, 0))?;
        set_rcvbuf(&sock, rcvbuf)?;
        for g in [
            RTNLGRP_LINK,
            RTNLGRP_NEIGH,
            RTNLGRP_IPV4_IFADDR,
            RTNLGRP_IPV4_ROUTE,
            RTNLGRP_IPV6_IFADDR,
            RTNLGRP_IPV6_ROUTE,
        ] {
            sock.add_membership(g)?;
        }
        // A kernel without nexthop objects (before 5.3) has no such group, and no routes
        // that use them either.
        let _ = sock.add_membership(nexthop::RTNLGRP_NEXTHOP);
        sock.set_non_blocking(true)?;
        Ok(NlSocket {
            sock,
            buf: vec![0; RECV_BUF],
            seq: 0,
        })
    }

    /// A socket for dumps.
    pub fn requests() -> io::Result<NlSocket> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        let _ = set_rcvbuf(&sock, 4 << 20);
        let _ = sock.set_netlink_get_strict_chk(true);
        Ok(NlSocket {
            sock,
            buf: vec![0; RECV_BUF],
            seq: 0,
        })
    }

    /// Wait up to `ms` milliseconds for something to read.
    pub fn wait(&self, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&raw mut p, 1, ms) > 0 }
    }

    /// Read what is waiting on an event socket (up to `max` messages), handing each decoded
    /// event to `f`; undecodable messages are counted in `bad`.
    pub fn recv_events(
        &mut self,
        max: usize,
        bad: &mut u64,
        mut f: impl FnMut(Event),
    ) -> io::Result<Recv> {
        let mut n = 0;
        while n < max {
            let len = match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(Recv::Overrun),
                Err(e) => return Err(e),
            };
            for_each_raw(&self.buf[..len], |flags, m| {
                n += 1;
                match m {
                    Ok(Raw::Nexthop(ev)) => f(ev),
                    Ok(Raw::Route(NetlinkPayload::InnerMessage(msg))) => {
                        if let Some(ev) = event_with_flags(msg, flags) {
                            f(ev);
                        }
                    }
                    Ok(Raw::Route(NetlinkPayload::Overrun(_))) => *bad += 1,
                    Ok(Raw::Route(_)) => {}
                    Err(()) => *bad += 1,
                }
            });
        }
        Ok(if n == 0 { Recv::Empty } else { Recv::Read(n) })
    }

    /// Throw away everything waiting (after an overrun, before the resync's dump: those
    /// messages are older than the dump).
    pub fn discard(&mut self) -> usize {
        let mut n = 0;
        loop {
            match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(_) => n += 1,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return n,
            }
        }
    }

    /// Dump links, addresses, nexthop objects, routes and neighbours (both families) into
    /// `f`, in that order (routes name links by ifindex and nexthop objects by id;
    /// neighbours name links). `Ok(false)` if the kernel flagged the dump as interrupted by a
    /// change (`NLM_F_DUMP_INTR`): dump again.
    pub fn dump_all(&mut self, bad: &mut u64, mut f: impl FnMut(Event)) -> io::Result<bool> {
        let mut consistent = true;
        let link = RouteNetlinkMessage::GetLink(LinkMessage::default());
        let addr = RouteNetlinkMessage::GetAddress(AddressMessage::default());
        consistent &= self.dump(&request(link), bad, &mut f)?;
        consistent &= self.dump(&request(addr), bad, &mut f)?;
        let nh = raw_request(nexthop::RTM_GETNEXTHOP, &nexthop::dump_body());
        match self.dump(&nh, bad, &mut f) {
            Ok(c) => consistent &= c,
            // A kernel without nexthop objects refuses the request: it has none.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => {}
            Err(e) => return Err(e),
        }
        let requests = [
            RouteNetlinkMessage::GetRoute(route_request(AddressFamily::Inet)),
            RouteNetlinkMessage::GetRoute(route_request(AddressFamily::Inet6)),
            RouteNetlinkMessage::GetNeighbour(neigh_request()),
        ];
        for req in requests {
            consistent &= self.dump(&request(req), bad, &mut f)?;
        }
        Ok(consistent)
    }

    /// Send a dump request (a whole netlink message, its sequence number not yet set) and
    /// hand what it returns to `f`.
    fn dump(&mut self, req: &[u8], bad: &mut u64, f: &mut impl FnMut(Event)) -> io::Result<bool> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut out = req.to_vec();
        out[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.sock.send(&out, 0)?;
        let mut consistent = true;
        loop {
            let len = match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let mut done = false;
            let mut err = None;
            for_each_raw(&self.buf[..len], |flags, m| {
                if flags & NLM_F_DUMP_INTR != 0 {
                    consistent = false;
                }
                match m {
                    Ok(Raw::Nexthop(ev)) => f(ev),
                    Ok(Raw::Route(NetlinkPayload::InnerMessage(msg))) => {
                        // Dumps list routes of one metric in the kernel's order.
                        if let Some(ev) = event_with_flags(msg, NLM_F_APPEND) {
                            f(ev);
                        }
                    }
                    Ok(Raw::Route(NetlinkPayload::Done(_))) => done = true,
                    Ok(Raw::Route(NetlinkPayload::Error(e))) => {
                        if let Some(code) = e.code {
                            err = Some(io::Error::from_raw_os_error(-code.get()));
                        }
                        done = true;
                    }
                    Ok(_) => {}
                    Err(()) => *bad += 1,
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            if done {
                return Ok(consistent);
            }
        }
    }
}

/// A dump request for `req`.
fn request(req: RouteNetlinkMessage) -> Vec<u8> {
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut msg = NetlinkMessage::new(hdr, NetlinkPayload::from(req));
    msg.finalize();
    let mut out = vec![0; msg.buffer_len()];
    msg.serialize(&mut out);
    out
}

/// A dump request of a message type `netlink-packet-route` does not know, with `body`.
fn raw_request(message_type: u16, body: &[u8]) -> Vec<u8> {
    let len = 16 + body.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&message_type.to_ne_bytes());
    out.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    out.extend_from_slice(&[0; 8]); // sequence number (set when sent), port id
    out.extend_from_slice(body);
    out
}

fn route_request(family: AddressFamily) -> RouteMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = family;
    m
}

fn neigh_request() -> NeighbourMessage {
    NeighbourMessage::default()
}

/// One message of a buffer the kernel sent.
enum Raw {
    /// One `netlink-packet-route` decodes.
    Route(NetlinkPayload<RouteNetlinkMessage>),
    /// A nexthop object's, decoded by [`nexthop::parse`].
    Nexthop(Event),
}

fn for_each_raw(buf: &[u8], mut f: impl FnMut(u16, Result<Raw, ()>)) {
    let mut off = 0;
    while off + 16 <= buf.len() {
        let Ok(nb) = NetlinkBuffer::new_checked(&buf[off..]) else {
            f(0, Err(()));
            return;
        };
        let len = nb.length() as usize;
        let flags = nb.flags();
        if len < 16 || off + len > buf.len() {
            f(flags, Err(()));
            return;
        }
        let ty = nb.message_type();
        let m = if ty == nexthop::RTM_NEWNEXTHOP || ty == nexthop::RTM_DELNEXTHOP {
            nexthop::parse(ty, &buf[off + 16..off + len])
                .map(Raw::Nexthop)
                .ok_or(())
        } else {
            NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[off..off + len])
                .map(|m| Raw::Route(m.payload))
                .map_err(|_| ())
        };
        f(flags, m);
        off += (len + 3) & !3;
    }
}

/// Decode a message into an event (`None`: not one the mirror follows). Public for tests of
/// the decoding against messages the kernel really sends.
pub fn event(msg: RouteNetlinkMessage) -> Option<Event> {
    match msg {
        RouteNetlinkMessage::NewLink(m) => link(m, false),
        RouteNetlinkMessage::DelLink(m) => link(m, true),
        RouteNetlinkMessage::NewAddress(m) => addr(m, false),
        RouteNetlinkMessage::DelAddress(m) => addr(m, true),
        RouteNetlinkMessage::NewRoute(m) => route(m, 0).map(Event::Route),
        RouteNetlinkMessage::DelRoute(m) => route(m, 0).map(Event::DelRoute),
        RouteNetlinkMessage::NewNeighbour(m) => neigh(m, false),
        RouteNetlinkMessage::DelNeighbour(m) => neigh(m, true),
        _ => None,
    }
}

/// A route event whose netlink header carried `nl_flags` (`NLM_F_APPEND`/`NLM_F_REPLACE`).
pub fn event_with_flags(msg: RouteNetlinkMessage, nl_flags: u16) -> Option<Event> {
    match msg {
        RouteNetlinkMessage::NewRoute(m) => route(m, nl_flags).map(Event::Route),
        other => event(other),
    }
}

fn link(m: LinkMessage, deleted: bool) -> Option<Event> {
    let mut name = None;
    let mut mtu = 0;
    for a in m.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n),
            LinkAttribute::Mtu(v) => mtu = v,
            _ => {}
        }
    }
    let name = name.unwrap_or_default();
    let index = m.header.index;
    Some(if deleted {
        Event::DelLink { index, name }
    } else {
        Event::Link {
            index,
            name,
            up: m.header.flags.contains(LinkFlags::Up),
            mtu,
            carrier: m.header.flags.contains(LinkFlags::LowerUp)
                || m.header.flags.contains(LinkFlags::Running),
        }
    })
}

fn addr(m: AddressMessage, deleted: bool) -> Option<Event> {
    let mut address = None;
    let mut local = None;
    for a in m.attributes {
        match a {
            AddressAttribute::Address(x) => address = Some(x),
            AddressAttribute::Local(x) => local = Some(x),
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer on point-to-point).
    let addr = local.or(address)?;
    Some(Event::Addr {
        deleted,
        index: m.header.index,
        addr,
        len: m.header.prefix_len,
    })
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(x) => Some(IpAddr::V4(*x)),
        RouteAddress::Inet6(x) => Some(IpAddr::V6(*x)),
        _ => None,
    }
}

fn via_of(v: &RouteVia) -> Option<IpAddr> {
    match v {
        RouteVia::Inet(x) => Some(IpAddr::V4(*x)),
        RouteVia::Inet6(x) => Some(IpAddr::V6(*x)),
        _ => None,
    }
}

fn route(m: RouteMessage, nl_flags: u16) -> Option<RouteMsg> {
    let h = &m.header;
    if h.flags.contains(RouteFlags::Cloned) {
        return None;
    }
    let mut dst = None;
    let mut table = u32::from(h.table);
    let mut metric = 0;
    let mut gateway = None;
    let mut oif = 0;
    let mut multipath = None;
    let mut nh = None;
    for a in &m.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = ip_of(d),
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::Gateway(g) => gateway = ip_of(g),
            RouteAttribute::Via(v) => gateway = via_of(v),
            RouteAttribute::Oif(o) => oif = *o,
            RouteAttribute::MultiPath(hops) => multipath = Some(hops),
            RouteAttribute::NhId(id) => nh = Some(*id),
            _ => {}
        }
    }
    let len = h.destination_prefix_length;
    let prefix = match (h.address_family, dst) {
        (AddressFamily::Inet, Some(IpAddr::V4(a))) => IpPrefix::V4(Prefix4::new(a, len).ok()?),
        (AddressFamily::Inet, None) if len == 0 => {
            IpPrefix::V4(Prefix4::new_masked([0, 0, 0, 0].into(), 0))
        }
        (AddressFamily::Inet6, Some(IpAddr::V6(a))) => IpPrefix::V6(Prefix6::new(a, len).ok()?),
        (AddressFamily::Inet6, None) if len == 0 => {
            IpPrefix::V6(Prefix6::new_masked(std::net::Ipv6Addr::UNSPECIFIED, 0))
        }
        _ => return None,
    };
    let kind = match h.kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::Local => RouteKind::Local,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable => RouteKind::Unreachable,
        RouteType::Prohibit => RouteKind::Prohibit,
        other => RouteKind::Other(u8::from(other)),
    };
    let hops = match multipath {
        Some(nhs) => nhs
            .iter()
            .map(|nh| {
                let mut gw = None;
                for a in &nh.attributes {
                    match a {
                        RouteAttribute::Gateway(g) => gw = ip_of(g),
                        RouteAttribute::Via(v) => gw = via_of(v),
                        _ => {}
                    }
                }
                Hop {
                    gateway: gw,
                    oif: nh.interface_index,
                    dead: nh.flags.contains(RouteNextHopFlags::Dead),
                    // rtnh_hops is the weight less one (Linux's fib_nh_weight).
                    weight: u16::from(nh.hops) + 1,
                }
            })
            .collect(),
        None if oif != 0 || gateway.is_some() => vec![Hop {
            gateway,
            oif,
            dead: false,
            weight: 1,
        }],
        None => Vec::new(),
    };
    Some(RouteMsg {
        prefix,
        table,
        metric,
        tos: h.tos,
        src_len: h.source_prefix_length,
        kind,
        hops,
        nh,
        append: nl_flags & NLM_F_APPEND != 0,
        replace: nl_flags & NLM_F_REPLACE != 0,
    })
}

fn neigh(m: NeighbourMessage, deleted: bool) -> Option<Event> {
    if m.header.flags.contains(NeighbourFlags::Proxy) {
        return None;
    }
    let mut addr = None;
    let mut mac = None;
    for a in m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(x)) => {
                addr = Some(IpAddr::V4(x));
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(x)) => {
                addr = Some(IpAddr::V6(x));
            }
            NeighbourAttribute::LinkLayerAddress(b) if b.len() == 6 => {
                mac = Some(EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]]));
            }
            _ => {}
        }
    }
    let state = match m.header.state {
        NeighbourState::Reachable
        | NeighbourState::Stale
        | NeighbourState::Delay
        | NeighbourState::Probe
        | NeighbourState::Permanent
        | NeighbourState::Noarp => NeighState::Valid,
        _ => NeighState::Invalid,
    };
    Some(Event::Neigh {
        deleted,
        index: m.header.ifindex,
        addr: addr?,
        mac,
        state,
    })
}
