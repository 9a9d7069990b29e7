//! Neighbor Discovery (RFC 4861) pieces that are not whole messages: the options, and the flag
//! bytes of Neighbor and Router Advertisements.
//!
//! Options are type-length-value records whose length counts 8-octet units, type and length
//! included. [`NdpOptions`] iterates over them without copying: [`Error::Malformed`] for a zero
//! length (RFC 4861 §4.6 says such a message must be discarded — and a zero length would make
//! a naive parser loop forever), [`Error::Truncated`] for an option running past the message.
//! Each step consumes at least 8 bytes, so the iteration terminates on any input.
//!
//! Link-layer address options are decoded for Ethernet only (RFC 2464: length 1, six address
//! bytes, padding): vrhost's ports are Ethernet, and an option of another length is
//! [`Error::Malformed`] rather than silently misread.

use core::net::Ipv6Addr;

use crate::ethernet::EthernetAddress;
use crate::{Error, Result};

/// Option type numbers.
mod kind {
    pub(super) const SOURCE_LLADDR: u8 = 1;
    pub(super) const TARGET_LLADDR: u8 = 2;
    pub(super) const PREFIX_INFO: u8 = 3;
    pub(super) const REDIRECTED_HEADER: u8 = 4;
    pub(super) const MTU: u8 = 5;
}

/// Flags of a Neighbor Advertisement (the top three bits of its first word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NeighborFlags(pub u8);

impl NeighborFlags {
    /// R: the sender is a router.
    pub const ROUTER: NeighborFlags = NeighborFlags(0x80);
    /// S: sent in response to a Neighbor Solicitation.
    pub const SOLICITED: NeighborFlags = NeighborFlags(0x40);
    /// O: override an existing cache entry.
    pub const OVERRIDE: NeighborFlags = NeighborFlags(0x20);
    /// No flags.
    pub const NONE: NeighborFlags = NeighborFlags(0);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: NeighborFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for NeighborFlags {
    type Output = NeighborFlags;
    fn bitor(self, rhs: NeighborFlags) -> NeighborFlags {
        NeighborFlags(self.0 | rhs.0)
    }
}

/// The flags byte of a Router Advertisement, kept whole (M, O, Home Agent, router preference
/// of RFC 4191, proxy) so that it round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RouterFlags(pub u8);

impl RouterFlags {
    /// M: addresses are available via DHCPv6.
    pub const MANAGED: RouterFlags = RouterFlags(0x80);
    /// O: other configuration is available via DHCPv6.
    pub const OTHER: RouterFlags = RouterFlags(0x40);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: RouterFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// The flags of a Prefix Information option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PrefixFlags(pub u8);

impl PrefixFlags {
    /// L: the prefix is on-link.
    pub const ON_LINK: PrefixFlags = PrefixFlags(0x80);
    /// A: the prefix can be used for SLAAC.
    pub const AUTONOMOUS: PrefixFlags = PrefixFlags(0x40);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: PrefixFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A Prefix Information option (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefixInfo {
    /// Prefix length in bits.
    pub prefix_len: u8,
    /// L and A flags (and reserved bits, kept).
    pub flags: PrefixFlags,
    /// Valid lifetime in seconds (0xffffffff = infinity).
    pub valid_lifetime: u32,
    /// Preferred lifetime in seconds.
    pub preferred_lifetime: u32,
    /// The prefix.
    pub prefix: Ipv6Addr,
}

/// One Neighbor Discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdpOption<'a> {
    /// Source Link-Layer Address (type 1).
    SourceLinkLayerAddr(EthernetAddress),
    /// Target Link-Layer Address (type 2).
    TargetLinkLayerAddr(EthernetAddress),
    /// Prefix Information (type 3).
    PrefixInfo(PrefixInfo),
    /// Redirected Header (type 4): the start of the redirected packet.
    RedirectedHeader(&'a [u8]),
    /// MTU (type 5).
    Mtu(u32),
    /// Any other option (the DAD nonce of RFC 7527, RDNSS, route information, …), kept raw.
    Unknown {
        /// The option type.
        kind: u8,
        /// Everything after the type and length bytes.
        data: &'a [u8],
    },
}

impl NdpOption<'_> {
    /// Bytes the option takes (a multiple of 8 for all but a malformed `Unknown`).
    pub const fn buffer_len(&self) -> usize {
        match self {
            NdpOption::SourceLinkLayerAddr(_) | NdpOption::TargetLinkLayerAddr(_) => 8,
            NdpOption::PrefixInfo(_) => 32,
            NdpOption::RedirectedHeader(d) => (8 + d.len()).next_multiple_of(8),
            NdpOption::Mtu(_) => 8,
            NdpOption::Unknown { data, .. } => (2 + data.len()).next_multiple_of(8),
        }
    }

    /// Write the option into the first [`NdpOption::buffer_len`] bytes of `buf` (reserved
    /// bytes and padding zeroed). Data of `RedirectedHeader` / `Unknown` must keep the option
    /// within 255 units.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        buf.fill(0);
        buf[1] = (len / 8) as u8;
        match *self {
            NdpOption::SourceLinkLayerAddr(a) => {
                buf[0] = kind::SOURCE_LLADDR;
                buf[2..8].copy_from_slice(&a.0);
            }
            NdpOption::TargetLinkLayerAddr(a) => {
                buf[0] = kind::TARGET_LLADDR;
                buf[2..8].copy_from_slice(&a.0);
            }
            NdpOption::PrefixInfo(p) => {
                buf[0] = kind::PREFIX_INFO;
                buf[2] = p.prefix_len;
                buf[3] = p.flags.0;
                buf[4..8].copy_from_slice(&p.valid_lifetime.to_be_bytes());
                buf[8..12].copy_from_slice(&p.preferred_lifetime.to_be_bytes());
                buf[16..32].copy_from_slice(&p.prefix.octets());
            }
            NdpOption::RedirectedHeader(d) => {
                buf[0] = kind::REDIRECTED_HEADER;
                buf[8..8 + d.len()].copy_from_slice(d);
            }
            NdpOption::Mtu(mtu) => {
                buf[0] = kind::MTU;
                buf[4..8].copy_from_slice(&mtu.to_be_bytes());
            }
            NdpOption::Unknown { kind, data } => {
                buf[0] = kind;
                buf[2..2 + data.len()].copy_from_slice(data);
            }
        }
    }
}

/// Iterator over the options of an ND message. See the module docs for the errors; after one
/// it ends.
#[derive(Debug, Clone)]
pub struct NdpOptions<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> NdpOptions<'a> {
    /// Iterate over an options area.
    pub const fn new(data: &'a [u8]) -> NdpOptions<'a> {
        NdpOptions {
            data,
            failed: false,
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<NdpOption<'a>>> {
        self.failed = true;
        Some(Err(e))
    }
}

impl<'a> Iterator for NdpOptions<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.data.is_empty() {
            return None;
        }
        let Some(&units) = self.data.get(1) else {
            return self.fail(Error::Truncated);
        };
        if units == 0 {
            return self.fail(Error::Malformed);
        }
        let len = usize::from(units) * 8;
        if len > self.data.len() {
            return self.fail(Error::Truncated);
        }
        let (opt, rest) = self.data.split_at(len);
        self.data = rest;
        let o = match (opt[0], units) {
            (kind::SOURCE_LLADDR, 1) => {
                NdpOption::SourceLinkLayerAddr(EthernetAddress::from_bytes(&opt[2..8]))
            }
            (kind::TARGET_LLADDR, 1) => {
                NdpOption::TargetLinkLayerAddr(EthernetAddress::from_bytes(&opt[2..8]))
            }
            (kind::PREFIX_INFO, 4) => {
                let mut prefix = [0u8; 16];
                prefix.copy_from_slice(&opt[16..32]);
                NdpOption::PrefixInfo(PrefixInfo {
                    prefix_len: opt[2],
                    flags: PrefixFlags(opt[3]),
                    valid_lifetime: u32::from_be_bytes([opt[4], opt[5], opt[6], opt[7]]),
                    preferred_lifetime: u32::from_be_bytes([opt[8], opt[9], opt[10], opt[11]]),
                    prefix: Ipv6Addr::from(prefix),
                })
            }
            (kind::REDIRECTED_HEADER, _) => NdpOption::RedirectedHeader(&opt[8..]),
            (kind::MTU, 1) => NdpOption::Mtu(u32::from_be_bytes([opt[4], opt[5], opt[6], opt[7]])),
            (kind::SOURCE_LLADDR | kind::TARGET_LLADDR | kind::PREFIX_INFO | kind::MTU, _) => {
                return self.fail(Error::Malformed);
            }
            (k, _) => NdpOption::Unknown {
                kind: k,
                data: &opt[2..],
            },
        };
        Some(Ok(o))
    }
}

/// Check an options area: every option well-formed. Returns the address of the first Source
/// (`source`) or Target (`!source`) Link-Layer Address option, if any.
pub(super) fn scan(options: &[u8], source: bool) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    for o in NdpOptions::new(options) {
        match (o?, source) {
            (NdpOption::SourceLinkLayerAddr(a), true)
            | (NdpOption::TargetLinkLayerAddr(a), false) => {
                found = found.or(Some(a));
            }
            _ => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// The options of a real Router Advertisement sent by radvd (see
    /// `icmpv6::tests::ROUTER_ADVERT`): Prefix Information fd00:99::/64 (L, A, 86400 s / 14400
    /// s), MTU 1500, Source Link-Layer Address 02:00:00:00:00:0a.
    const RA_OPTIONS: [u8; 48] = [
        0x03, 0x04, 0x40, 0xc0, 0x00, 0x01, 0x51, 0x80, 0x00, 0x00, 0x38, 0x40, 0x00, 0x00, 0x00,
        0x00, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0x05, 0xdc, 0x01, 0x01, 0x02, 0x00, 0x00,
        0x00, 0x00, 0x0a,
    ];

    fn ra_options() -> [NdpOption<'static>; 3] {
        [
            NdpOption::PrefixInfo(PrefixInfo {
                prefix_len: 64,
                flags: PrefixFlags(PrefixFlags::ON_LINK.0 | PrefixFlags::AUTONOMOUS.0),
                valid_lifetime: 86400,
                preferred_lifetime: 14400,
                prefix: "fd00:99::".parse().unwrap(),
            }),
            NdpOption::Mtu(1500),
            NdpOption::SourceLinkLayerAddr(EthernetAddress([2, 0, 0, 0, 0, 0x0a])),
        ]
    }

    #[test]
    fn parse_golden() {
        let v: Vec<_> = NdpOptions::new(&RA_OPTIONS).map(Result::unwrap).collect();
        assert_eq!(v, ra_options());
        assert_eq!(
            scan(&RA_OPTIONS, true),
            Ok(Some(EthernetAddress([2, 0, 0, 0, 0, 0x0a])))
        );
        assert_eq!(scan(&RA_OPTIONS, false), Ok(None));
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0xffu8; 48];
        let mut at = 0;
        for o in ra_options() {
            o.emit(&mut buf[at..]);
            at += o.buffer_len();
        }
        assert_eq!(buf, RA_OPTIONS);
    }

    /// The DAD nonce option (type 14, RFC 7527) from a real DAD probe (see
    /// `icmpv6::tests::DAD_NS`) is kept raw and re-emitted as is.
    #[test]
    fn unknown_kept() {
        let nonce = [0x0e, 0x01, 0x27, 0x16, 0x54, 0x7c, 0xa7, 0x67];
        let v: Vec<_> = NdpOptions::new(&nonce).collect();
        assert_eq!(
            v,
            [Ok(NdpOption::Unknown {
                kind: 14,
                data: &nonce[2..]
            })]
        );
        let mut out = [0u8; 8];
        v[0].unwrap().emit(&mut out);
        assert_eq!(out, nonce);
        // Redirected Header: 6 reserved bytes, then the packet.
        let rh = [4, 2, 0, 0, 0, 0, 0, 0, 0x60, 1, 2, 3, 4, 5, 6, 7];
        let o = NdpOptions::new(&rh).next().unwrap().unwrap();
        assert_eq!(o, NdpOption::RedirectedHeader(&rh[8..]));
        let mut out = [0xffu8; 16];
        o.emit(&mut out);
        assert_eq!(out, rh);
    }

    #[test]
    fn errors() {
        // Length 0: malformed (and must not loop).
        let mut it = NdpOptions::new(&[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(it.next(), Some(Err(Error::Malformed)));
        assert_eq!(it.next(), None);
        // Overruns: the last option is cut at every byte.
        for n in 1..8 {
            let v: Vec<_> = NdpOptions::new(&RA_OPTIONS[..40 + n]).collect();
            assert_eq!(v.len(), 3);
            assert_eq!(v[2], Err(Error::Truncated), "cut at {n}");
        }
        assert_eq!(
            NdpOptions::new(&[3, 4, 0, 0, 0, 0, 0, 0]).next(),
            Some(Err(Error::Truncated))
        );
        // A link-layer option that is not Ethernet-sized, a short prefix option, a long MTU.
        for bad in [
            &[1u8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
            &[3, 1, 0, 0, 0, 0, 0, 0],
            &[5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(
                NdpOptions::new(bad).next(),
                Some(Err(Error::Malformed)),
                "{bad:?}"
            );
        }
        assert_eq!(scan(&[1, 0], true), Err(Error::Malformed));
    }

    #[test]
    fn terminates() {
        use proptest::prelude::*;
        proptest!(|(data in proptest::collection::vec(any::<u8>(), 0..128))| {
            let n = NdpOptions::new(&data).count();
            prop_assert!(n <= data.len() / 8 + 1);
        });
    }
}
