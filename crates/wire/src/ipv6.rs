//! IPv6 (RFC 8200): the fixed 40-byte header here; extension headers, their options and the
//! walk to the upper-layer header in the submodules (re-exported below).
//!
//! The view bounds the payload by the Payload Length field, not by the buffer: a frame from the
//! wire may carry Ethernet padding after the packet (a 40-byte header with an 8-byte payload is
//! padded to the 46-byte minimum), and that padding must not leak into upper-layer checksums.
//! `check_len` therefore accepts a buffer longer than the packet and rejects a shorter one
//! ([`Error::BadLength`]); [`Packet::total_len`] is where the packet really ends.
//!
//! Jumbograms (RFC 2675: Payload Length 0 and a Jumbo Payload option) are not supported: a
//! Payload Length of 0 means an empty payload, as it does for every other packet. Nothing on an
//! Ethernet path can carry one.
//!
//! There is no header checksum in IPv6, so the forwarding rewrite is just
//! [`Packet::decrement_hop_limit`]; the upper-layer checksums do not cover the hop limit.
//!
//! Extension headers are *walked*, not parsed into a list ([`ExtHeaders`], [`Packet::upper_layer`]):
//! the data plane needs the upper-layer protocol and offset (for ACLs, hashing, punting), and
//! occasionally one fact from the chain (a Router Alert, a fragment), never an owned copy of it.
//! The walk is bounded by [`MAX_EXT_HEADERS`] as well as by the packet, so an attacker cannot make
//! a node spend more than a few steps per packet on it.

use core::net::Ipv6Addr;

use crate::ip::Protocol;
use crate::{Error, Result};

mod ext;
mod fragment;
mod options;

pub use ext::{
    ExtHeader, ExtHeaderRepr, ExtHeaderSlice, ExtHeaders, MAX_EXT_HEADERS, UpperLayer,
    is_ext_header,
};
pub use fragment::{FRAGMENT_HEADER_LEN, FragmentHeader, FragmentRepr};
pub use options::{Ipv6Option, Ipv6Options, OptionAction, option_may_change, router_alert};

mod field {
    use core::ops::Range;
    /// Version (4 bits), Traffic Class (8), Flow Label (20).
    pub(super) const VER_TC_FLOW: Range<usize> = 0..4;
    pub(super) const PAYLOAD_LEN: Range<usize> = 4..6;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC_ADDR: Range<usize> = 8..24;
    pub(super) const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// The IPv6 minimum link MTU (RFC 8200 §5): every link carries a 1280-byte packet, so an ICMPv6
/// error no longer than this always gets back to its source.
pub const MIN_MTU: usize = 1280;

/// A view of an IPv6 packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking it: for buffers the caller sized itself.
    /// Getters on a too-short buffer panic.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check that the buffer holds a whole header ([`Error::Truncated`]), that the version is 6
    /// ([`Error::BadVersion`]) and that the payload the header announces is in the buffer
    /// ([`Error::BadLength`]). A longer buffer is fine (link-layer padding).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if self.total_len() > len {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The IP version field (6 on a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic Class: DSCP in the upper six bits, ECN in the lower two.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        let d = self.buffer.as_ref();
        (d[0] << 4) | (d[1] >> 4)
    }

    /// The DSCP part of the traffic class.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// The ECN part of the traffic class.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0b11
    }

    /// Flow Label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([0, d[1] & 0x0f, d[2], d[3]])
    }

    /// Payload Length: bytes after the fixed header, extension headers included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::PAYLOAD_LEN.start], d[field::PAYLOAD_LEN.start + 1]])
    }

    /// Length of the packet: header plus payload (≤ the buffer on a checked view).
    #[inline]
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }

    /// Next Header: the first extension header or the upper-layer protocol.
    #[inline]
    pub fn next_header(&self) -> Protocol {
        Protocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop Limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(b)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(b)
    }

    /// The header and payload, without any link-layer padding after them.
    #[inline]
    pub fn packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.total_len()]
    }

    /// The payload (extension headers and upper layer), bounded by Payload Length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }

    /// Walk the extension-header chain (on a checked view). See [`ExtHeaders`].
    pub fn ext_headers(&self) -> ExtHeaders<'_> {
        ExtHeaders::new(self.packet(), self.next_header())
    }

    /// Where the upper-layer header is, after walking any extension headers (on a checked
    /// view). Packets without extension headers take a short path with no walk.
    #[inline]
    pub fn upper_layer(&self) -> Result<UpperLayer> {
        let nh = self.next_header();
        if !is_ext_header(nh) {
            return Ok(UpperLayer {
                protocol: nh,
                offset: HEADER_LEN,
                fragment: None,
            });
        }
        self.ext_headers().upper_layer()
    }

    /// The value of a Router Alert option (RFC 2711: 0 = MLD, 1 = RSVP, 2 = Active Networks) if
    /// the packet has a Hop-by-Hop header carrying one (on a checked view). This is how the data
    /// plane decides to punt MLD and RSVP to the control plane although they are not addressed
    /// to the router. Errors are those of the Hop-by-Hop header and its options.
    pub fn router_alert(&self) -> Result<Option<u16>> {
        if self.next_header() != Protocol::HOPOPT {
            return Ok(None);
        }
        match self.ext_headers().next() {
            Some(Ok(hbh)) => router_alert(hbh.data()),
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the version field.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let d = self.buffer.as_mut();
        d[0] = (d[0] & 0x0f) | (v << 4);
    }

    /// Set the Traffic Class.
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        let d = self.buffer.as_mut();
        d[0] = (d[0] & 0xf0) | (tc >> 4);
        d[1] = (d[1] & 0x0f) | (tc << 4);
    }

    /// Set the Flow Label (the upper 12 bits of `label` are ignored).
    #[inline]
    pub fn set_flow_label(&mut self, label: u32) {
        let d = self.buffer.as_mut();
        let b = label.to_be_bytes();
        d[1] = (d[1] & 0xf0) | (b[1] & 0x0f);
        d[2] = b[2];
        d[3] = b[3];
    }

    /// Set Payload Length.
    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::PAYLOAD_LEN].copy_from_slice(&len.to_be_bytes())
    }

    /// Set Next Header.
    #[inline]
    pub fn set_next_header(&mut self, nh: Protocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = nh.0
    }

    /// Set Hop Limit.
    #[inline]
    pub fn set_hop_limit(&mut self, hl: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hl
    }

    /// The forwarding rewrite: decrement Hop Limit and return the new value, or — if it is 1 or
    /// 0, so that the packet must not be forwarded (RFC 8200 §3) — leave it alone and return
    /// `None`; the caller then drops the packet and sends Time Exceeded. No checksum to fix.
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> Option<u8> {
        let hl = self.hop_limit();
        if hl <= 1 {
            return None;
        }
        self.set_hop_limit(hl - 1);
        Some(hl - 1)
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets())
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets())
    }

    /// The payload, writable (bounded by Payload Length).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The fixed IPv6 header as a value. Extension headers are not part of it: `next_header` is the
/// fixed header's field, and `payload_len` counts any extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next Header.
    pub next_header: Protocol,
    /// Payload Length (at most 65535).
    pub payload_len: usize,
    /// Hop Limit.
    pub hop_limit: u8,
    /// Traffic Class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow Label (20 bits).
    pub flow_label: u32,
}

impl Repr {
    /// Read the fixed header from a view, checking it as [`Packet::check_len`] does.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes the fixed header takes (the payload is not included).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the fixed header into the first [`HEADER_LEN`] bytes of the view. `payload_len`
    /// must fit in 16 bits and `flow_label` in 20 (both are truncated otherwise).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        debug_assert!(self.payload_len <= usize::from(u16::MAX));
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1): `ff02::1:ffXX:XXXX` with
/// the low 24 bits of `addr`. Neighbor Solicitations for `addr` go there.
pub const fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | o[13] as u16,
        ((o[14] as u16) << 8) | o[15] as u16,
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An ICMPv6 Echo Request fd00:99::1 → fd00:99::2, made by `testdata/capture.sh
    /// 'ping -c1 fd00:99::2' icmp6` (saved in `testdata/captures/ipv6_ping_ndp.txt`, packet 3,
    /// Ethernet header stripped by `testdata/hex.py`): flow label 0x7e8d4, hop limit 64.
    pub(crate) const ECHO_REQUEST: [u8; 104] = [
        0x60, 0x07, 0xe8, 0xd4, 0x00, 0x40, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0xee, 0x7f, 0x1b,
        0x60, 0x00, 0x01, 0x18, 0x66, 0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0x97, 0xc9, 0x09, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a,
        0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
        0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
    ];

    /// A UDP datagram with a Hop-by-Hop header (Router Alert 0 + PadN) and a Destination Options
    /// header (PadN), made by `testdata/capture_routed.sh 'python3
    /// crates/wire/testdata/send.py udp6-opts' 'ip6 and not icmp6'` (the options are set with
    /// IPV6_HOPOPTS / IPV6_DSTOPTS ancillary data; saved in
    /// `testdata/captures/ipv6_hbh_dstopts.txt`, packet 3).
    pub(crate) const HBH_DSTOPTS_UDP: [u8; 76] = [
        0x60, 0x06, 0x21, 0x1b, 0x00, 0x24, 0x00, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x3c, 0x00, 0x05, 0x02, 0x00,
        0x00, 0x01, 0x00, 0x11, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0xe9, 0x63, 0x00, 0x09,
        0x00, 0x14, 0xc6, 0x8b, 0x77, 0x69, 0x74, 0x68, 0x20, 0x6f, 0x70, 0x74, 0x69, 0x6f, 0x6e,
        0x73,
    ];

    /// An Echo Request with a Segment Routing Header (Routing type 4, segments left 1), made by
    /// `testdata/capture_routed.sh 'ip -6 route add fd00:98::2/128 encap seg6 mode inline segs
    /// fd00:99::fe dev va via fd00:99::fe; ping -c1 -W1 fd00:98::2'` (filter and all in
    /// `testdata/captures/README.md`; saved in `testdata/captures/ipv6_srh.txt`): the kernel's
    /// seg6 inline mode inserted the header.
    pub(crate) const SRH_ECHO: [u8; 144] = [
        0x60, 0x0b, 0xe2, 0x8f, 0x00, 0x68, 0x2b, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x3a, 0x04, 0x04, 0x01, 0x01,
        0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x02, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0xeb, 0xee, 0x23, 0x42, 0x00, 0x01, 0x73, 0x66,
        0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0x3e, 0x79, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
        0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e,
        0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
    ];

    /// An MLDv2 report with the Hop-by-Hop Router Alert every MLD message carries, sent by the
    /// kernel of namespace a when `va` came up during `testdata/capture.sh 'ping -c1 -s 2000
    /// fd00:99::2' ip6` (saved in `testdata/captures/ipv6_frag_mld.txt`, packet 0).
    pub(crate) const MLD_REPORT: [u8; 96] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x38, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x3a, 0x00, 0x05, 0x02, 0x00,
        0x00, 0x01, 0x00, 0x8f, 0x00, 0x6d, 0x65, 0x00, 0x00, 0x00, 0x02, 0x04, 0x00, 0x00, 0x00,
        0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00,
        0x0a, 0x04, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0xff, 0x00, 0x00, 0x01,
    ];

    /// The first fragment of a 3000-byte UDP datagram, made by `testdata/capture_routed.sh
    /// 'python3 crates/wire/testdata/send.py udp6-frag' 'ip6 and not icmp6'` (saved in
    /// `testdata/captures/ipv6_frag_udp.txt`, packet 2; written to the .bin by `testdata/hex.py
    /// … 2 --bin`).
    pub(crate) const FRAG_FIRST: &[u8; 1496] =
        include_bytes!("../testdata/ipv6_frag_udp_first.bin");

    /// The last fragment of the same datagram (packet 4 of the same capture): offset 2896.
    pub(crate) const FRAG_LAST: &[u8; 160] = include_bytes!("../testdata/ipv6_frag_udp_last.bin");

    pub(crate) fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn echo_repr() -> Repr {
        Repr {
            src_addr: addr("fd00:99::1"),
            dst_addr: addr("fd00:99::2"),
            next_header: Protocol::ICMPV6,
            payload_len: 64,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x7e8d4,
        }
    }

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&ECHO_REQUEST[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), echo_repr());
        assert_eq!(p.version(), 6);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.payload(), &ECHO_REQUEST[40..]);
        assert_eq!(p.total_len(), 104);
        let ul = p.upper_layer().unwrap();
        assert_eq!(
            ul,
            UpperLayer {
                protocol: Protocol::ICMPV6,
                offset: 40,
                fragment: None
            }
        );
        assert_eq!(p.ext_headers().count(), 0);
        assert_eq!(p.router_alert(), Ok(None));
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0xa5u8; 40];
        echo_repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, ECHO_REQUEST[..40]);
        assert_eq!(echo_repr().buffer_len(), 40);
    }

    #[test]
    fn traffic_class_and_flow_label_fields() {
        let mut buf = ECHO_REQUEST;
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_traffic_class(0xb9); // DSCP 46 (EF), ECN 1
        p.set_flow_label(0xfff12345);
        assert_eq!(
            (p.version(), p.traffic_class(), p.dscp(), p.ecn()),
            (6, 0xb9, 46, 1)
        );
        assert_eq!(p.flow_label(), 0x2345 | 0x1_0000);
        assert_eq!(p.payload_len(), 64, "neighbouring fields untouched");
    }

    #[test]
    fn padding_is_not_payload() {
        // Ethernet pads short frames; the view must stop at Payload Length.
        let mut buf = [0u8; 160];
        buf[..104].copy_from_slice(&ECHO_REQUEST);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload().len(), 64);
        assert_eq!(p.packet(), &ECHO_REQUEST[..]);
    }

    #[test]
    fn errors() {
        for n in 0..40 {
            assert_eq!(
                Packet::new_checked(&ECHO_REQUEST[..n]).unwrap_err(),
                Error::Truncated
            );
        }
        // Payload length claims more than the buffer holds, at every cut.
        for n in 40..104 {
            assert_eq!(
                Packet::new_checked(&ECHO_REQUEST[..n]).unwrap_err(),
                Error::BadLength
            );
        }
        let mut v4 = ECHO_REQUEST;
        v4[0] = 0x45;
        assert_eq!(Packet::new_checked(&v4[..]).unwrap_err(), Error::BadVersion);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&v4[..])).unwrap_err(),
            Error::BadVersion
        );
        let mut long = ECHO_REQUEST;
        long[5] = 65;
        assert_eq!(
            Packet::new_checked(&long[..]).unwrap_err(),
            Error::BadLength
        );
    }

    #[test]
    fn decrement_hop_limit() {
        let mut buf = ECHO_REQUEST;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.decrement_hop_limit(), Some(63));
        assert_eq!(p.hop_limit(), 63);
        p.set_hop_limit(2);
        assert_eq!(p.decrement_hop_limit(), Some(1));
        // 1 and 0: expired, left alone (the Time Exceeded carries the packet as received).
        assert_eq!(p.decrement_hop_limit(), None);
        assert_eq!(p.hop_limit(), 1);
        p.set_hop_limit(0);
        assert_eq!(p.decrement_hop_limit(), None);
        assert_eq!(p.hop_limit(), 0);
    }

    #[test]
    fn router_alert_on_mld() {
        let p = Packet::new_checked(&MLD_REPORT[..]).unwrap();
        assert_eq!(p.router_alert(), Ok(Some(0)));
        assert_eq!(p.hop_limit(), 1);
        let ul = p.upper_layer().unwrap();
        assert_eq!((ul.protocol, ul.offset), (Protocol::ICMPV6, 48));
        // The same with a Destination Options header behind the Hop-by-Hop header.
        let p = Packet::new_checked(&HBH_DSTOPTS_UDP[..]).unwrap();
        assert_eq!(p.router_alert(), Ok(Some(0)));
        // No Hop-by-Hop header, no alert (even though a DestOpts header could carry option 5).
        assert_eq!(
            Packet::new_checked(&SRH_ECHO[..]).unwrap().router_alert(),
            Ok(None)
        );
    }

    #[test]
    fn solicited_node_address() {
        assert_eq!(solicited_node(addr("fd00:99::2")), addr("ff02::1:ff00:2"));
        assert_eq!(
            solicited_node(addr("fe80::ff:fe00:a")),
            addr("ff02::1:ff00:a")
        );
        assert_eq!(
            solicited_node(addr("2001:db8::1234:5678")),
            addr("ff02::1:ff34:5678")
        );
    }

    #[test]
    fn round_trip() {
        use proptest::prelude::*;
        proptest!(|(src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), nh in any::<u8>(),
                    len in 0usize..200, hl in any::<u8>(), tc in any::<u8>(),
                    fl in 0u32..(1 << 20))| {
            let r = Repr {
                src_addr: Ipv6Addr::from(src), dst_addr: Ipv6Addr::from(dst),
                next_header: Protocol(nh), payload_len: len, hop_limit: hl, traffic_class: tc,
                flow_label: fl,
            };
            let mut buf = [0u8; 240];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..40 + len]).unwrap()), Ok(r));
        });
    }
}
