//! What IPv4 and IPv6 share: the protocol / next-header number space.

/// An IP protocol number (IPv4 `protocol`, IPv6 `next header`). A newtype so that unknown values
/// survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Protocol(pub u8);

impl Protocol {
    /// IPv6 Hop-by-Hop Options (an extension header)
    pub const HOPOPT: Protocol = Protocol(0);
    /// ICMP for IPv4
    pub const ICMP: Protocol = Protocol(1);
    /// TCP
    pub const TCP: Protocol = Protocol(6);
    /// UDP
    pub const UDP: Protocol = Protocol(17);
    /// IPv6 Routing header
    pub const IPV6_ROUTE: Protocol = Protocol(43);
    /// IPv6 Fragment header
    pub const IPV6_FRAG: Protocol = Protocol(44);
    /// Encapsulating Security Payload
    pub const ESP: Protocol = Protocol(50);
    /// Authentication Header
    pub const AH: Protocol = Protocol(51);
    /// ICMP for IPv6
    pub const ICMPV6: Protocol = Protocol(58);
    /// IPv6 "no next header"
    pub const IPV6_NONXT: Protocol = Protocol(59);
    /// IPv6 Destination Options
    pub const IPV6_OPTS: Protocol = Protocol(60);
    /// OSPF
    pub const OSPF: Protocol = Protocol(89);
    /// VRRP
    pub const VRRP: Protocol = Protocol(112);
    /// Mobility Header (an IPv6 extension header)
    pub const MOBILITY: Protocol = Protocol(135);
    /// Host Identity Protocol (an IPv6 extension header)
    pub const HIP: Protocol = Protocol(139);
    /// Shim6 (an IPv6 extension header)
    pub const SHIM6: Protocol = Protocol(140);
}

impl From<u8> for Protocol {
    fn from(v: u8) -> Self {
        Protocol(v)
    }
}

impl From<Protocol> for u8 {
    fn from(v: Protocol) -> u8 {
        v.0
    }
}
