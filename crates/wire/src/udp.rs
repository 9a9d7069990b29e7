//! UDP (RFC 768), over IPv4 and IPv6.
//!
//! The view bounds the payload by the UDP Length field, not the buffer, for the same reason the
//! IP views do (link-layer padding); `check_len` wants `8 ≤ length ≤ buffer`
//! ([`Error::BadLength`]). Jumbograms (length 0, RFC 2675) are not supported.
//!
//! The checksum API is family-agnostic at its core — [`Packet::verify_checksum_with`] and
//! [`Packet::fill_checksum_with`] take the pseudo-header sum from [`crate::checksum`] — because
//! the data plane computes that sum once per packet from whichever IP header it has. The `_v4` /
//! `_v6` conveniences add the one rule that differs between the families, the zero checksum:
//!
//! * over IPv4, a checksum field of 0 means "no checksum" (RFC 768) and the datagram is valid;
//! * over IPv6, the checksum is mandatory and a datagram with 0 must be discarded
//!   (RFC 8200 §8.1; the tunnel exception of RFC 6935/6936 is not supported).
//!
//! A *computed* checksum of 0 is therefore sent as 0xFFFF (the other one's-complement zero),
//! both by [`Packet::fill_checksum_with`] and by the incremental updates used when a NAT or a
//! tunnel rewrites an IP address ([`Packet::update_checksum_for_addr_v4`]), and a 0 (absent)
//! IPv4 checksum stays 0 across such a rewrite.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ip::Protocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub(super) const SRC_PORT: Range<usize> = 0..2;
    pub(super) const DST_PORT: Range<usize> = 2..4;
    pub(super) const LENGTH: Range<usize> = 4..6;
    pub(super) const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// A view of a UDP datagram.
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

    /// [`Error::Truncated`] if the buffer cannot hold the header; [`Error::BadLength`] unless
    /// `8 ≤ length ≤ buffer`.
    pub fn check_len(&self) -> Result<()> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN || len > buf_len {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.read_u16(field::SRC_PORT.start)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.read_u16(field::DST_PORT.start)
    }

    /// The Length field: header plus payload.
    #[inline]
    #[expect(
        clippy::len_without_is_empty,
        reason = "a header field, not a collection length"
    )]
    pub fn len(&self) -> u16 {
        self.read_u16(field::LENGTH.start)
    }

    /// The Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM.start)
    }

    /// The payload, bounded by the Length field (on a checked view).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// Header and payload, bounded by the Length field: what the checksum covers.
    #[inline]
    pub fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    /// Whether the checksum verifies against `pseudo_sum` (from [`checksum::pseudo_header_v4`]
    /// or [`checksum::pseudo_header_v6`] with protocol 17 and the UDP length). Arithmetic only:
    /// a 0 field is not special here — see [`Packet::verify_checksum_v4`] / `_v6` for that.
    pub fn verify_checksum_with(&self, pseudo_sum: u16) -> bool {
        checksum::combine(&[pseudo_sum, checksum::data(self.datagram())]) == 0xffff
    }

    /// Checksum verification over IPv4: a 0 field means "no checksum" and passes.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || self.verify_checksum_with(pseudo_header_v4(src, dst, self.len()))
    }

    /// Checksum verification over IPv6: a 0 field fails (RFC 8200 §8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.checksum() != 0 && self.verify_checksum_with(pseudo_header_v6(src, dst, self.len()))
    }

    #[inline]
    fn read_u16(&self, at: usize) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[at], d[at + 1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the source port (the checksum is not updated).
    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&port.to_be_bytes())
    }

    /// Set the destination port (the checksum is not updated).
    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&port.to_be_bytes())
    }

    /// Set the Length field.
    #[inline]
    pub fn set_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes())
    }

    /// Set the Checksum field as is.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&c.to_be_bytes())
    }

    /// The payload, writable (bounded by the Length field).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Compute and set the checksum given the pseudo-header sum; a computed 0 is sent as
    /// 0xFFFF. Length and payload must be in place.
    pub fn fill_checksum_with(&mut self, pseudo_sum: u16) {
        self.set_checksum(0);
        let c = !checksum::combine(&[pseudo_sum, checksum::data(self.datagram())]);
        self.set_checksum(nonzero(c));
    }

    /// [`Packet::fill_checksum_with`] the IPv4 pseudo header.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.fill_checksum_with(pseudo_header_v4(src, dst, self.len()))
    }

    /// [`Packet::fill_checksum_with`] the IPv6 pseudo header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.fill_checksum_with(pseudo_header_v6(src, dst, self.len()))
    }

    /// Update the checksum incrementally (RFC 1624) after the IPv4 source or destination
    /// address was rewritten from `old` to `new` (the pseudo header covers both). A 0 (absent)
    /// checksum stays 0; a result of 0 becomes 0xFFFF.
    pub fn update_checksum_for_addr_v4(&mut self, old: Ipv4Addr, new: Ipv4Addr) {
        let c = self.checksum();
        if c == 0 {
            return;
        }
        self.set_checksum(nonzero(checksum::update_u32(
            c,
            old.to_bits(),
            new.to_bits(),
        )));
    }

    /// As [`Packet::update_checksum_for_addr_v4`] for an IPv6 address (a 0 checksum is invalid
    /// over IPv6 and is updated like any other value).
    pub fn update_checksum_for_addr_v6(&mut self, old: Ipv6Addr, new: Ipv6Addr) {
        let c = checksum::update_bytes(self.checksum(), &old.octets(), &new.octets());
        self.set_checksum(nonzero(c));
    }
}

/// UDP sends a computed 0 as 0xFFFF: 0 on the wire means "no checksum" (RFC 768).
#[inline]
const fn nonzero(c: u16) -> u16 {
    if c == 0 { 0xffff } else { c }
}

/// The IPv4 pseudo-header sum for a UDP datagram of `len` bytes (header included).
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, len: u16) -> u16 {
    checksum::pseudo_header_v4(src, dst, Protocol::UDP.0, len)
}

/// The IPv6 pseudo-header sum for a UDP datagram of `len` bytes (header included). With a
/// Routing header, `dst` is the final destination (RFC 8200 §8.1).
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, len: u16) -> u16 {
    checksum::pseudo_header_v6(src, dst, Protocol::UDP.0, u32::from(len))
}

/// The UDP header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length (Length − 8; at most 65527).
    pub payload_len: usize,
}

impl Repr {
    /// Read the header from a view (checked as [`Packet::check_len`] does). The checksum is not
    /// verified here: that needs the IP addresses (`verify_checksum_v4` / `_v6`).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Bytes the datagram takes: header and payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the header into the view, checksum 0. Then write the payload and call
    /// `fill_checksum_*` (or leave 0: no checksum, IPv4 only).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        debug_assert!(self.buffer_len() <= usize::from(u16::MAX));
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.buffer_len() as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// An iperf3 UDP datagram over IPv6 (the 4-byte "9876" hello), made by
    /// `testdata/capture_routed.sh 'iperf3 -6 -c fd00:98::2 -u -n 128 -l 64' udp` (saved in
    /// `testdata/captures/udp_v6_iperf3.txt`, packet 0; the 40-byte IPv6 header, then UDP).
    const UDP6: [u8; 52] = [
        0x60, 0x09, 0xde, 0x6e, 0x00, 0x0c, 0x11, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xb0, 0x72, 0x14, 0x51, 0x00,
        0x0c, 0xcf, 0x6e, 0x39, 0x38, 0x37, 0x36,
    ];

    /// The same over IPv4, `testdata/capture_routed.sh 'iperf3 -c 10.98.0.2 -u -n 128 -l 64'
    /// udp` (`testdata/captures/udp_v4_iperf3.txt`, packet 0; 20-byte IPv4 header, then UDP).
    const UDP4: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x4e, 0x20, 0x40, 0x00, 0x40, 0x11, 0xd7, 0xe5, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x62, 0x00, 0x02, 0xe5, 0x3f, 0x14, 0x51, 0x00, 0x0c, 0x81, 0x0f, 0x39, 0x38,
        0x37, 0x36,
    ];

    /// A datagram sent over IPv4 with SO_NO_CHECK, so its checksum field is 0:
    /// `testdata/capture_routed.sh 'python3 crates/wire/testdata/send.py udp4-nocsum' udp`
    /// (`testdata/captures/udp_v4_no_checksum.txt`).
    const UDP4_NO_CHECKSUM: [u8; 39] = [
        0x45, 0x00, 0x00, 0x27, 0x66, 0x47, 0x40, 0x00, 0x40, 0x11, 0xbf, 0xb7, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x62, 0x00, 0x02, 0x98, 0x5a, 0x00, 0x09, 0x00, 0x13, 0x00, 0x00, 0x6e, 0x6f,
        0x20, 0x63, 0x68, 0x65, 0x63, 0x6b, 0x73, 0x75, 0x6d,
    ];

    const SRC4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const DST4: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 2);

    #[test]
    fn parse_golden_v6() {
        let p = Packet::new_checked(&UDP6[40..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src_port: 45170,
                dst_port: 5201,
                payload_len: 4
            }
        );
        assert_eq!(
            (p.len(), p.checksum(), p.payload()),
            (12, 0xcf6e, &b"9876"[..])
        );
        assert!(p.verify_checksum_v6(v6("fd00:99::1"), v6("fd00:98::2")));
        assert!(!p.verify_checksum_v6(v6("fd00:99::1"), v6("fd00:98::3")));
    }

    #[test]
    fn parse_golden_v4() {
        let p = Packet::new_checked(&UDP4[20..]).unwrap();
        assert_eq!(
            Repr::parse(&p).unwrap(),
            Repr {
                src_port: 58687,
                dst_port: 5201,
                payload_len: 4
            }
        );
        assert!(p.verify_checksum_v4(SRC4, DST4));
        assert!(!p.verify_checksum_v4(SRC4, Ipv4Addr::new(10, 98, 0, 3)));
    }

    #[test]
    fn emit_golden() {
        for (golden, v4) in [(&UDP6[40..], false), (&UDP4[20..], true)] {
            let r = Repr::parse(&Packet::new_checked(golden).unwrap()).unwrap();
            let mut buf = [0xffu8; 12];
            let mut p = Packet::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.payload_mut().copy_from_slice(b"9876");
            if v4 {
                p.fill_checksum_v4(SRC4, DST4);
            } else {
                p.fill_checksum_v6(v6("fd00:99::1"), v6("fd00:98::2"));
            }
            assert_eq!(&buf[..], golden);
        }
    }

    #[test]
    fn zero_checksum() {
        // IPv4: 0 means "none", valid whatever the addresses.
        let p = Packet::new_checked(&UDP4_NO_CHECKSUM[20..]).unwrap();
        assert_eq!((p.checksum(), p.payload()), (0, &b"no checksum"[..]));
        assert!(p.verify_checksum_v4(SRC4, DST4));
        assert!(p.verify_checksum_v4(Ipv4Addr::LOCALHOST, DST4));
        // …and stays 0 through an address rewrite.
        let mut buf = UDP4_NO_CHECKSUM;
        let mut p = Packet::new_checked(&mut buf[20..]).unwrap();
        p.update_checksum_for_addr_v4(SRC4, Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(p.checksum(), 0);
        // IPv6: 0 is invalid (RFC 8200 §8.1), even for a datagram whose real sum would be 0.
        let mut buf = UDP6;
        buf[46..48].fill(0);
        let p = Packet::new_checked(&buf[40..]).unwrap();
        assert!(!p.verify_checksum_v6(v6("fd00:99::1"), v6("fd00:98::2")));
    }

    /// A datagram whose computed checksum is 0 is sent with 0xFFFF, and that verifies.
    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the payload word so that the whole sum is 0xFFFF.
        let mut buf = [0u8; 10];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        Repr {
            src_port: 1,
            dst_port: 2,
            payload_len: 2,
        }
        .emit(&mut p);
        let pseudo = pseudo_header_v4(SRC4, DST4, 10);
        let partial = checksum::combine(&[pseudo, checksum::data(p.datagram())]);
        p.payload_mut().copy_from_slice(&(!partial).to_be_bytes());
        p.fill_checksum_v4(SRC4, DST4);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v4(SRC4, DST4));
        p.fill_checksum_v6(v6("::1"), v6("::2"));
        assert!(p.verify_checksum_v6(v6("::1"), v6("::2")));
    }

    #[test]
    fn errors() {
        let d = &UDP6[40..];
        for n in 0..8 {
            assert_eq!(Packet::new_checked(&d[..n]).unwrap_err(), Error::Truncated);
        }
        // Length beyond the buffer.
        for n in 8..12 {
            assert_eq!(Packet::new_checked(&d[..n]).unwrap_err(), Error::BadLength);
        }
        // Length below 8.
        for l in 0..8u8 {
            let mut b = [0u8; 12];
            b.copy_from_slice(d);
            b[5] = l;
            assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::BadLength);
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
                Error::BadLength
            );
        }
        // A longer buffer is fine and the payload stops at Length.
        let mut b = [0u8; 20];
        b[..12].copy_from_slice(d);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), b"9876");
        assert!(p.verify_checksum_v6(v6("fd00:99::1"), v6("fd00:98::2")));
    }

    /// Rewriting an address and updating incrementally gives what a full recomputation gives.
    #[test]
    fn incremental_update_matches_full() {
        use proptest::prelude::*;
        proptest!(|(s4 in any::<u32>(), d4 in any::<u32>(), n4 in any::<u32>(),
                    s6 in any::<u128>(), d6 in any::<u128>(), n6 in any::<u128>(),
                    payload in proptest::collection::vec(any::<u8>(), 0..40), which in any::<bool>())| {
            let mut buf = std::vec![0u8; 8 + payload.len()];
            let mut p = Packet::new_unchecked(&mut buf[..]);
            Repr { src_port: 1234, dst_port: 53, payload_len: payload.len() }.emit(&mut p);
            p.payload_mut().copy_from_slice(&payload);

            let (s, d, n) = (Ipv4Addr::from_bits(s4), Ipv4Addr::from_bits(d4), Ipv4Addr::from_bits(n4));
            p.fill_checksum_v4(s, d);
            p.update_checksum_for_addr_v4(if which { s } else { d }, n);
            let inc = p.checksum();
            let (s2, d2) = if which { (n, d) } else { (s, n) };
            p.fill_checksum_v4(s2, d2);
            prop_assert_eq!(inc, p.checksum());
            prop_assert!(p.verify_checksum_v4(s2, d2));

            let (s, d, n) = (Ipv6Addr::from_bits(s6), Ipv6Addr::from_bits(d6), Ipv6Addr::from_bits(n6));
            p.fill_checksum_v6(s, d);
            p.update_checksum_for_addr_v6(if which { s } else { d }, n);
            let inc = p.checksum();
            let (s2, d2) = if which { (n, d) } else { (s, n) };
            p.fill_checksum_v6(s2, d2);
            prop_assert_eq!(inc, p.checksum());
            prop_assert!(p.verify_checksum_v6(s2, d2));
        });
    }

    #[test]
    fn round_trip() {
        use proptest::prelude::*;
        proptest!(|(sp in any::<u16>(), dp in any::<u16>(), len in 0usize..64)| {
            let r = Repr { src_port: sp, dst_port: dp, payload_len: len };
            let mut buf = std::vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()), Ok(r));
        });
    }
}
