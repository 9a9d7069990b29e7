//! The lab's addressing and MAC plan: pure functions of (VR index, side, overlapping).
//!
//! Why pure functions: the lab, the vrhost config generator, the traffic generator and the
//! tests must agree on every address and MAC without talking to each other, and a lab made
//! by `vrbench lab up` in another process must be describable from its spec alone. So
//! nothing here is allocated or remembered; the same inputs always give the same plan.
//!
//! **Sides.** Traffic enters the router on side A (router port `p0`, peer `a0` in namespace
//! `<P>-a`) and leaves on side B (`p1`, peer `b0` in `<P>-b`).
//!
//! **MACs** (all locally administered, `02:76` = "vr"):
//!
//! | what | MAC |
//! |---|---|
//! | VIF of VR `i` on side S (the VR's gateway MAC) | `02:76:SS:ii:ii:01` |
//! | host of VR `i` on side S (`eth0` in `<P>-S<i>`) | `02:76:SS:ii:ii:02` |
//! | router port `p0` / `p1` | `02:76:SS:ff:ff:01` |
//! | side port `a0` / `b0` | `02:76:SS:ff:ff:02` |
//!
//! where `SS` is `0a` for side A and `0b` for side B and `ii:ii` is `i` as 16 bits, big
//! endian. [`MAX_VRS`] keeps `i` well below `0xffff`, so VIF/host MACs never meet the
//! port MACs.
//!
//! **IPv4.** Every side is a /24 with the VR's gateway at `.1` and the host at `.2`.
//! * overlapping: every VR uses `10.0.0.0/24` on side A and `10.0.1.0/24` on side B.
//! * otherwise, VR `i < 250`: `10.i.0.0/24` (A) and `10.i.1.0/24` (B);
//!   VR `i ≥ 250`: with `j = i − 250`, `10.(250 + j / 128).(2·(j mod 128) + s).0/24` where
//!   `s` is 0 for A and 1 for B — i.e. 128 VRs per second octet 250…255, up to [`MAX_VRS`].
//!
//! **IPv6.** Every side is a /64 with the gateway at `::1` and the host at `::2`.
//! * overlapping: `fd00:a::/64` (A) and `fd00:b::/64` (B) for every VR;
//! * otherwise `fd00:<i>:a::/64` and `fd00:<i>:b::/64` (`i` in hex as one group).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// The most VRs a lab holds (the IPv4 scheme above has room for 1018; kept round).
pub const MAX_VRS: u32 = 1000;

/// One side of the router: A (sources, port `p0`) or B (sinks, port `p1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// Traffic sources: router port `p0`, side namespace `<P>-a`, hosts `<P>-a<i>`.
    A,
    /// Traffic sinks: router port `p1`, side namespace `<P>-b`, hosts `<P>-b<i>`.
    B,
}

impl Side {
    /// Both sides, A first.
    pub const BOTH: [Side; 2] = [Side::A, Side::B];

    /// `"a"` or `"b"`: the letter used in namespace names.
    pub fn letter(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }

    /// The router port of this side in the router namespace: `"p0"` or `"p1"`.
    pub fn port(self) -> &'static str {
        match self {
            Side::A => "p0",
            Side::B => "p1",
        }
    }

    /// The port's veth peer in the side namespace: `"a0"` or `"b0"`.
    pub fn side_ifname(self) -> &'static str {
        match self {
            Side::A => "a0",
            Side::B => "b0",
        }
    }

    /// 0 for A, 1 for B (the third octet in the overlapping IPv4 plan).
    pub fn index(self) -> u8 {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }

    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn code(self) -> u8 {
        match self {
            Side::A => 0x0a,
            Side::B => 0x0b,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letter())
    }
}

/// An Ethernet address, printed `02:76:0a:00:01:01`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// The six octets.
    pub fn octets(self) -> [u8; 6] {
        self.0
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The text was not six hex octets separated by `:`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a MAC address: {0:?}")]
pub struct BadMac(pub String);

impl FromStr for Mac {
    type Err = BadMac;
    fn from_str(s: &str) -> Result<Mac, BadMac> {
        let mut m = [0u8; 6];
        let mut parts = s.split(':');
        for o in &mut m {
            let p = parts.next().ok_or_else(|| BadMac(s.into()))?;
            if p.is_empty() || p.len() > 2 {
                return Err(BadMac(s.into()));
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| BadMac(s.into()))?;
        }
        if parts.next().is_some() {
            return Err(BadMac(s.into()));
        }
        Ok(Mac(m))
    }
}

fn indexed_mac(vr: u32, side: Side, last: u8) -> Mac {
    assert!(vr < MAX_VRS, "VR index {vr} ≥ MAX_VRS ({MAX_VRS})");
    let [_, _, hi, lo] = vr.to_be_bytes();
    Mac([0x02, 0x76, side.code(), hi, lo, last])
}

/// The MAC of VR `vr`'s VIF on `side` (`02:76:SS:ii:ii:01`): the destination hosts send to,
/// the source the VR forwards from. Panics if `vr ≥ MAX_VRS`.
pub fn vif_mac(vr: u32, side: Side) -> Mac {
    indexed_mac(vr, side, 0x01)
}

/// The MAC of VR `vr`'s host on `side` (`02:76:SS:ii:ii:02`). Panics if `vr ≥ MAX_VRS`.
pub fn host_mac(vr: u32, side: Side) -> Mac {
    indexed_mac(vr, side, 0x02)
}

/// The MAC of router port `p0` (A) or `p1` (B) when it is a bare port (`02:76:SS:ff:ff:01`).
/// In [`Forwarder::KernelPlain`](crate::Forwarder::KernelPlain) the port carries VR 0's VIF
/// MAC instead, since it is that VR's interface.
pub fn port_mac(side: Side) -> Mac {
    Mac([0x02, 0x76, side.code(), 0xff, 0xff, 0x01])
}

/// The MAC of side port `a0` / `b0` (`02:76:SS:ff:ff:02`), where generators send and sinks
/// count raw frames.
pub fn side_mac(side: Side) -> Mac {
    Mac([0x02, 0x76, side.code(), 0xff, 0xff, 0x02])
}

/// An IPv4 prefix, printed `10.0.0.0/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix4 {
    /// The network address.
    pub addr: Ipv4Addr,
    /// The prefix length.
    pub len: u8,
}

impl Prefix4 {
    /// Whether `a` is inside the prefix.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
        u32::from(a) & mask == u32::from(self.addr) & mask
    }
}

impl fmt::Display for Prefix4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// An IPv6 prefix, printed `fd00:0:a::/64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix6 {
    /// The network address.
    pub addr: Ipv6Addr,
    /// The prefix length.
    pub len: u8,
}

impl Prefix6 {
    /// Whether `a` is inside the prefix.
    pub fn contains(&self, a: Ipv6Addr) -> bool {
        let mask = u128::MAX
            .checked_shl(128 - u32::from(self.len))
            .unwrap_or(0);
        u128::from(a) & mask == u128::from(self.addr) & mask
    }
}

impl fmt::Display for Prefix6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The addresses of one side of one VR: the subnet, the VR's gateway, the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SideAddrs {
    /// The IPv4 subnet (a /24).
    pub net4: Prefix4,
    /// The VR's gateway address on this side (`.1`).
    pub gw4: Ipv4Addr,
    /// The host's address (`.2`).
    pub host4: Ipv4Addr,
    /// The IPv6 subnet (a /64).
    pub net6: Prefix6,
    /// The VR's gateway address (`::1`).
    pub gw6: Ipv6Addr,
    /// The host's address (`::2`).
    pub host6: Ipv6Addr,
}

/// The addresses of VR `vr` on `side` (see the module docs for the plan). Panics if
/// `vr ≥ MAX_VRS`.
pub fn side_addrs(vr: u32, side: Side, overlapping: bool) -> SideAddrs {
    assert!(vr < MAX_VRS, "VR index {vr} ≥ MAX_VRS ({MAX_VRS})");
    let s = side.index();
    let (b, c) = if overlapping {
        (0, s)
    } else if vr < 250 {
        (vr as u8, s)
    } else {
        let j = vr - 250;
        ((250 + j / 128) as u8, (2 * (j % 128)) as u8 + s)
    };
    let net4 = Ipv4Addr::new(10, b, c, 0);
    let side_group = u16::from(side.code());
    let net6 = if overlapping {
        Ipv6Addr::new(0xfd00, side_group, 0, 0, 0, 0, 0, 0)
    } else {
        Ipv6Addr::new(0xfd00, vr as u16, side_group, 0, 0, 0, 0, 0)
    };
    let host6 = |n: u128| Ipv6Addr::from(u128::from(net6) | n);
    SideAddrs {
        net4: Prefix4 {
            addr: net4,
            len: 24,
        },
        gw4: Ipv4Addr::new(10, b, c, 1),
        host4: Ipv4Addr::new(10, b, c, 2),
        net6: Prefix6 {
            addr: net6,
            len: 64,
        },
        gw6: host6(1),
        host6: host6(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn macs_follow_the_documented_pattern() {
        assert_eq!(vif_mac(0, Side::A).to_string(), "02:76:0a:00:00:01");
        assert_eq!(host_mac(3, Side::B).to_string(), "02:76:0b:00:03:02");
        assert_eq!(vif_mac(999, Side::B).to_string(), "02:76:0b:03:e7:01");
        assert_eq!(port_mac(Side::A).to_string(), "02:76:0a:ff:ff:01");
        assert_eq!(side_mac(Side::B).to_string(), "02:76:0b:ff:ff:02");
        assert_eq!(
            "02:76:0b:03:e7:01".parse::<Mac>().unwrap(),
            vif_mac(999, Side::B)
        );
        assert!("02:76:0b:03:e7".parse::<Mac>().is_err());
        assert!("02:76:0b:03:e7:01:00".parse::<Mac>().is_err());
        assert!("02:76:0b:03:e7:zz".parse::<Mac>().is_err());
    }

    #[test]
    fn every_mac_is_unique_unicast_and_local() {
        let mut seen = HashSet::new();
        for side in Side::BOTH {
            assert!(seen.insert(port_mac(side)));
            assert!(seen.insert(side_mac(side)));
            for i in 0..MAX_VRS {
                assert!(seen.insert(vif_mac(i, side)));
                assert!(seen.insert(host_mac(i, side)));
            }
        }
        for m in seen {
            assert_eq!(m.0[0] & 0x03, 0x02, "{m}: locally administered unicast");
        }
    }

    #[test]
    fn addresses_match_the_issue_examples() {
        let a = side_addrs(0, Side::A, true);
        assert_eq!(a.net4.to_string(), "10.0.0.0/24");
        assert_eq!(a.gw4, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(a.host4, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(a.net6.to_string(), "fd00:a::/64");
        assert_eq!(a.gw6.to_string(), "fd00:a::1");
        let b = side_addrs(7, Side::B, true);
        assert_eq!(b.net4.to_string(), "10.0.1.0/24");
        assert_eq!(b.host6.to_string(), "fd00:b::2");
        let c = side_addrs(7, Side::B, false);
        assert_eq!(c.net4.to_string(), "10.7.1.0/24");
        assert_eq!(c.host6.to_string(), "fd00:7:b::2");
        let d = side_addrs(249, Side::A, false);
        assert_eq!(d.gw4, Ipv4Addr::new(10, 249, 0, 1));
        let e = side_addrs(250, Side::A, false);
        assert_eq!(e.net4.to_string(), "10.250.0.0/24");
        let f = side_addrs(250 + 129, Side::B, false);
        assert_eq!(f.net4.to_string(), "10.251.3.0/24");
        let g = side_addrs(MAX_VRS - 1, Side::B, false);
        assert_eq!(g.net4.addr.octets()[1], 255);
        assert!(a.net4.contains(a.gw4) && a.net4.contains(a.host4));
        assert!(a.net6.contains(a.gw6) && a.net6.contains(a.host6));
        assert!(!a.net4.contains(b.host4) && !a.net6.contains(b.host6));
    }

    #[test]
    fn non_overlapping_subnets_never_collide() {
        let mut v4 = HashSet::new();
        let mut v6 = HashSet::new();
        for i in 0..MAX_VRS {
            for side in Side::BOTH {
                let a = side_addrs(i, side, false);
                assert!(v4.insert(a.net4.addr), "VR {i} side {side}: {}", a.net4);
                assert!(v6.insert(a.net6.addr), "VR {i} side {side}: {}", a.net6);
                assert_eq!(a.net4.addr.octets()[0], 10);
            }
        }
    }
}
