//! IPv6 extension headers (RFC 8200 §4): the generic header, and the walk along the chain to
//! the upper-layer header.
//!
//! Which numbers are extension headers is the IANA "IPv6 Extension Header Types" registry
//! (RFC 7045 asks transit nodes to recognise all of it): Hop-by-Hop (0), Routing (43), Fragment
//! (44), Destination Options (60), AH (51), Mobility (135), HIP (139), Shim6 (140) and the two
//! experimental values 253 and 254 (RFC 3692/4727). All but two share one layout — Next Header,
//! a length in 8-octet units not counting the first 8, then data — and differ only in the data:
//! the Fragment header is a fixed 8 bytes, and AH counts 4-octet units plus 2 (RFC 4302 §2.2).
//! ESP (50) and No Next Header (59) end the walk: what follows is encrypted or nothing.
//!
//! The walk ([`ExtHeaders`]) is an iterator rather than a function that fills a list, so that a
//! caller looking for one header stops there, and nothing is copied. It enforces what belongs to
//! the chain's *shape* — Hop-by-Hop only first ([`Error::Malformed`]), no header past the
//! packet's end ([`Error::Truncated`]), at most [`MAX_EXT_HEADERS`] of them
//! ([`Error::ExtChainTooLong`]) — and leaves policy (is a Routing header with Segments Left > 0
//! acceptable? an unknown option?) to the caller, who gets the bytes. Every step consumes at
//! least 8 bytes and the count is capped, so the walk terminates on any input.
//!
//! A non-first fragment ends the walk at its Fragment header: the bytes after it are the middle
//! of the datagram, not headers, and reading them as headers would be wrong (and exploitable).

use crate::ip::Protocol;
use crate::ipv6::options::Ipv6Options;
use crate::ipv6::{FRAGMENT_HEADER_LEN, FragmentHeader, FragmentRepr, HEADER_LEN};
use crate::{Error, Result};

/// The most extension headers [`ExtHeaders`] walks before giving up with
/// [`Error::ExtChainTooLong`].
///
/// RFC 8200 §4.1's recommended order has seven (Hop-by-Hop, Destination Options, Routing,
/// Fragment, AH, ESP, Destination Options), each at most once except Destination Options; with
/// a Mobility/HIP/Shim6 header that is still fewer than eight that need walking (ESP ends it).
/// Eight leaves one to spare and bounds the work per packet to eight short steps. A byte limit
/// alone (the whole packet) would let a 1500-byte packet cost ~180 steps.
pub const MAX_EXT_HEADERS: usize = 8;

/// Whether `p` is an extension header the walk steps over (ESP and No Next Header are not: they
/// end the walk).
pub const fn is_ext_header(p: Protocol) -> bool {
    matches!(p.0, 0 | 43 | 44 | 51 | 60 | 135 | 139 | 140 | 253 | 254)
}

mod field {
    pub(super) const NEXT_HEADER: usize = 0;
    pub(super) const LENGTH: usize = 1;
    pub(super) const DATA: usize = 2;
}

/// A view of an extension header in the generic layout (Hop-by-Hop, Routing, Destination
/// Options, Mobility, HIP, Shim6): Next Header, Hdr Ext Len in 8-octet units not counting the
/// first 8, data. Not for the Fragment header ([`FragmentHeader`]) nor AH (whose length field
/// counts 4-octet units).
#[derive(Debug, Clone, Copy)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// Wrap a buffer without checking it. Getters on a too-short buffer panic.
    pub const fn new_unchecked(buffer: T) -> ExtHeader<T> {
        ExtHeader { buffer }
    }

    /// Wrap a buffer after [`ExtHeader::check_len`].
    pub fn new_checked(buffer: T) -> Result<ExtHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// [`Error::Truncated`] unless the buffer holds the whole header its length field announces.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len <= field::LENGTH || self.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next Header.
    #[inline]
    pub fn next_header(&self) -> Protocol {
        Protocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hdr Ext Len as on the wire (8-octet units, not counting the first 8 octets).
    #[inline]
    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// Length of the whole header in bytes: `(hdr_ext_len + 1) * 8`.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.hdr_ext_len()) + 1) * 8
    }

    /// The header after its first two bytes (options, or routing data, …).
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..self.header_len()]
    }

    /// The options of a Hop-by-Hop or Destination Options header.
    pub fn options(&self) -> Ipv6Options<'_> {
        Ipv6Options::new(self.data())
    }

    /// Routing Type (Routing header only).
    #[inline]
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[field::DATA]
    }

    /// Segments Left (Routing header only).
    #[inline]
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[field::DATA + 1]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ExtHeader<T> {
    /// Set Next Header.
    #[inline]
    pub fn set_next_header(&mut self, nh: Protocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = nh.0
    }

    /// Set Hdr Ext Len (8-octet units, not counting the first 8).
    #[inline]
    pub fn set_hdr_ext_len(&mut self, len: u8) {
        self.buffer.as_mut()[field::LENGTH] = len
    }

    /// The data, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::DATA..end]
    }

    /// Set Segments Left (Routing header only).
    #[inline]
    pub fn set_segments_left(&mut self, n: u8) {
        self.buffer.as_mut()[field::DATA + 1] = n
    }
}

/// A generic-layout extension header as a value: the next header and the raw data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtHeaderRepr<'a> {
    /// Next Header.
    pub next_header: Protocol,
    /// Everything after the first two bytes. [`ExtHeaderRepr::emit`] pads it with zeros to a
    /// multiple of 8 bytes including the first two (zeros are Pad1 options in Hop-by-Hop and
    /// Destination Options headers); parsed data is always a whole number of units already.
    pub data: &'a [u8],
}

impl<'a> ExtHeaderRepr<'a> {
    /// Read a header from a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &ExtHeader<&'a T>) -> Result<ExtHeaderRepr<'a>> {
        header.check_len()?;
        let buf: &'a T = header.buffer;
        let buf: &'a [u8] = buf.as_ref();
        Ok(ExtHeaderRepr {
            next_header: header.next_header(),
            data: &buf[field::DATA..header.header_len()],
        })
    }

    /// Bytes the header takes: 2 + data, rounded up to a multiple of 8 (at most 2048).
    pub const fn buffer_len(&self) -> usize {
        (field::DATA + self.data.len()).next_multiple_of(8)
    }

    /// Write the header into the first [`ExtHeaderRepr::buffer_len`] bytes of the view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut ExtHeader<T>) {
        let len = self.buffer_len();
        debug_assert!(len <= 2048);
        header.set_next_header(self.next_header);
        header.set_hdr_ext_len((len / 8 - 1) as u8);
        let data = header.data_mut();
        data[..self.data.len()].copy_from_slice(self.data);
        data[self.data.len()..].fill(0);
    }
}

/// One extension header met by [`ExtHeaders`]: its type, where it is, and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeaderSlice<'a> {
    /// What header this is (the Next Header value that pointed at it).
    pub kind: Protocol,
    /// Offset of the header from the start of the IPv6 header.
    pub offset: usize,
    /// The whole header, length field included.
    pub bytes: &'a [u8],
}

impl<'a> ExtHeaderSlice<'a> {
    /// Next Header (the header after this one).
    pub fn next_header(&self) -> Protocol {
        Protocol(self.bytes[field::NEXT_HEADER])
    }

    /// Everything after the first two bytes (for a Fragment header: reserved byte, offset and
    /// flags, identification).
    pub fn data(&self) -> &'a [u8] {
        &self.bytes[field::DATA..]
    }

    /// The options, for a Hop-by-Hop or Destination Options header.
    pub fn options(&self) -> Option<Ipv6Options<'a>> {
        match self.kind {
            Protocol::HOPOPT | Protocol::IPV6_OPTS => Some(Ipv6Options::new(self.data())),
            _ => None,
        }
    }

    /// The Fragment header, if this is one.
    pub fn fragment(&self) -> Option<FragmentRepr> {
        if self.kind != Protocol::IPV6_FRAG {
            return None;
        }
        FragmentRepr::parse(&FragmentHeader::new_unchecked(self.bytes)).ok()
    }

    /// (Routing Type, Segments Left), if this is a Routing header.
    pub fn routing(&self) -> Option<(u8, u8)> {
        (self.kind == Protocol::IPV6_ROUTE).then(|| (self.bytes[2], self.bytes[3]))
    }
}

/// Where the upper-layer header of an IPv6 packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// The upper-layer protocol: the last Next Header of the chain (which may be ESP or No Next
    /// Header).
    pub protocol: Protocol,
    /// Offset of the upper-layer header from the start of the IPv6 header.
    pub offset: usize,
    /// The Fragment header, if the packet has one. If it is not the first fragment
    /// (`frag_offset != 0`), the bytes at `offset` are the middle of the datagram, not an
    /// upper-layer header.
    pub fragment: Option<FragmentRepr>,
}

impl UpperLayer {
    /// Whether the upper-layer header is present at `offset`: the packet is not a non-first
    /// fragment.
    pub const fn has_header(&self) -> bool {
        match self.fragment {
            Some(f) => f.frag_offset == 0,
            None => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Walking,
    Done,
    Failed,
}

/// The walk along an IPv6 extension-header chain, one [`ExtHeaderSlice`] per step.
///
/// Ends (`None`) at the first header that is not an extension header, after a non-first
/// Fragment header, or after the first error, which is yielded once:
/// [`Error::Truncated`] if a header runs past the packet, [`Error::Malformed`] for a
/// Hop-by-Hop header anywhere but first, [`Error::ExtChainTooLong`] beyond
/// [`MAX_EXT_HEADERS`].
#[derive(Debug, Clone)]
pub struct ExtHeaders<'a> {
    packet: &'a [u8],
    next: Protocol,
    offset: usize,
    count: usize,
    fragment: Option<FragmentRepr>,
    state: State,
}

impl<'a> ExtHeaders<'a> {
    /// Walk the chain of `packet` — an IPv6 packet from its fixed header on, ending where the
    /// packet ends (not at link-layer padding) — whose fixed header's Next Header is `first`.
    /// `packet` may be cut short (the invoking packet inside an ICMPv6 error): the walk then
    /// reports [`Error::Truncated`] where the bytes run out.
    pub fn new(packet: &'a [u8], first: Protocol) -> ExtHeaders<'a> {
        ExtHeaders {
            packet,
            next: first,
            offset: HEADER_LEN,
            count: 0,
            fragment: None,
            state: State::Walking,
        }
    }

    /// Finish the walk and say where the upper layer is.
    pub fn upper_layer(mut self) -> Result<UpperLayer> {
        for h in &mut self {
            h?;
        }
        Ok(UpperLayer {
            protocol: self.next,
            offset: self.offset,
            fragment: self.fragment,
        })
    }

    fn fail(&mut self, e: Error) -> Option<Result<ExtHeaderSlice<'a>>> {
        self.state = State::Failed;
        Some(Err(e))
    }
}

impl<'a> Iterator for ExtHeaders<'a> {
    type Item = Result<ExtHeaderSlice<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.state != State::Walking {
            return None;
        }
        let kind = self.next;
        if !is_ext_header(kind) {
            self.state = State::Done;
            return None;
        }
        if kind == Protocol::HOPOPT && self.offset != HEADER_LEN {
            return self.fail(Error::Malformed);
        }
        if self.count == MAX_EXT_HEADERS {
            return self.fail(Error::ExtChainTooLong);
        }
        // Every extension header is at least 8 bytes long.
        let rest = match self.packet.get(self.offset..) {
            Some(r) if r.len() >= 8 => r,
            _ => return self.fail(Error::Truncated),
        };
        let len = match kind {
            Protocol::IPV6_FRAG => FRAGMENT_HEADER_LEN,
            Protocol::AH => (usize::from(rest[field::LENGTH]) + 2) * 4,
            _ => (usize::from(rest[field::LENGTH]) + 1) * 8,
        };
        let Some(bytes) = rest.get(..len) else {
            return self.fail(Error::Truncated);
        };
        let item = ExtHeaderSlice {
            kind,
            offset: self.offset,
            bytes,
        };
        self.offset += len;
        self.count += 1;
        self.next = item.next_header();
        if let Some(f) = item.fragment() {
            self.fragment = Some(f);
            if !f.is_first() {
                self.state = State::Done;
            }
        }
        Some(Ok(item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::tests::{FRAG_FIRST, FRAG_LAST, HBH_DSTOPTS_UDP, MLD_REPORT, SRH_ECHO};
    use crate::ipv6::{Ipv6Option, Packet};
    use std::vec::Vec;

    fn walk(pkt: &[u8]) -> Vec<Result<(Protocol, usize, usize)>> {
        Packet::new_checked(pkt)
            .unwrap()
            .ext_headers()
            .map(|h| h.map(|h| (h.kind, h.offset, h.bytes.len())))
            .collect()
    }

    #[test]
    fn parse_golden_hbh_dstopts() {
        assert_eq!(
            walk(&HBH_DSTOPTS_UDP),
            [
                Ok((Protocol::HOPOPT, 40, 8)),
                Ok((Protocol::IPV6_OPTS, 48, 8))
            ]
        );
        let p = Packet::new_checked(&HBH_DSTOPTS_UDP[..]).unwrap();
        let ul = p.upper_layer().unwrap();
        assert_eq!(
            ul,
            UpperLayer {
                protocol: Protocol::UDP,
                offset: 56,
                fragment: None
            }
        );
        assert!(ul.has_header());
        let hdrs: Vec<_> = p.ext_headers().map(Result::unwrap).collect();
        let hbh: Vec<_> = hdrs[0].options().unwrap().map(Result::unwrap).collect();
        assert_eq!(hbh, [Ipv6Option::RouterAlert(0), Ipv6Option::PadN(0)]);
        let dst: Vec<_> = hdrs[1].options().unwrap().map(Result::unwrap).collect();
        assert_eq!(dst, [Ipv6Option::PadN(4)]);
        assert_eq!((hdrs[0].fragment(), hdrs[0].routing()), (None, None));
        // The generic view and Repr over the Destination Options header.
        let h = ExtHeader::new_checked(&HBH_DSTOPTS_UDP[48..56]).unwrap();
        assert_eq!(
            (h.next_header(), h.hdr_ext_len(), h.header_len()),
            (Protocol::UDP, 0, 8)
        );
        let r = ExtHeaderRepr::parse(&h).unwrap();
        assert_eq!(
            r,
            ExtHeaderRepr {
                next_header: Protocol::UDP,
                data: &[1, 4, 0, 0, 0, 0]
            }
        );
    }

    #[test]
    fn emit_golden_hbh_dstopts() {
        let hbh = ExtHeaderRepr {
            next_header: Protocol::IPV6_OPTS,
            data: &[0x05, 0x02, 0x00, 0x00, 0x01, 0x00],
        };
        let dst = ExtHeaderRepr {
            next_header: Protocol::UDP,
            data: &[0x01, 0x04, 0, 0, 0, 0],
        };
        let mut buf = [0xffu8; 16];
        hbh.emit(&mut ExtHeader::new_unchecked(&mut buf[..8]));
        dst.emit(&mut ExtHeader::new_unchecked(&mut buf[8..]));
        assert_eq!(buf, HBH_DSTOPTS_UDP[40..56]);
        // Short data is padded with zeros (Pad1s) to a whole unit.
        let short = ExtHeaderRepr {
            next_header: Protocol::TCP,
            data: &[0x05, 0x02, 0, 1],
        };
        assert_eq!(short.buffer_len(), 8);
        let mut buf = [0xffu8; 8];
        short.emit(&mut ExtHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [6, 0, 5, 2, 0, 1, 0, 0]);
    }

    #[test]
    fn parse_golden_srh() {
        assert_eq!(walk(&SRH_ECHO), [Ok((Protocol::IPV6_ROUTE, 40, 40))]);
        let p = Packet::new_checked(&SRH_ECHO[..]).unwrap();
        let rh = p.ext_headers().next().unwrap().unwrap();
        assert_eq!(rh.routing(), Some((4, 1))); // type 4 (SRH), segments left 1
        let v = ExtHeader::new_checked(rh.bytes).unwrap();
        assert_eq!(
            (v.routing_type(), v.segments_left(), v.header_len()),
            (4, 1, 40)
        );
        // Segment List[0], the final destination (RFC 8754 §2).
        assert_eq!(
            &v.data()[6..22],
            &crate::ipv6::tests::addr("fd00:98::2").octets()
        );
        let ul = p.upper_layer().unwrap();
        assert_eq!((ul.protocol, ul.offset), (Protocol::ICMPV6, 80));
        // Emit reproduces it.
        let mut buf = [0u8; 40];
        ExtHeaderRepr::parse(&v)
            .unwrap()
            .emit(&mut ExtHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, SRH_ECHO[40..80]);
    }

    #[test]
    fn set_segments_left() {
        let mut buf = SRH_ECHO;
        let mut h = ExtHeader::new_checked(&mut buf[40..80]).unwrap();
        h.set_segments_left(0);
        assert_eq!(h.segments_left(), 0);
        assert_eq!(h.routing_type(), 4);
    }

    #[test]
    fn fragments() {
        let p = Packet::new_checked(&FRAG_FIRST[..]).unwrap();
        let ul = p.upper_layer().unwrap();
        let f = ul.fragment.unwrap();
        assert_eq!(
            (ul.protocol, ul.offset, f.frag_offset, f.more_fragments),
            (Protocol::UDP, 48, 0, true)
        );
        assert!(ul.has_header());
        // The UDP header is in the first fragment: ports 47456 → 9 (tcpdump's summary).
        assert_eq!(&FRAG_FIRST[48..52], &[0xb9, 0x60, 0x00, 0x09]);

        let p = Packet::new_checked(&FRAG_LAST[..]).unwrap();
        let ul = p.upper_layer().unwrap();
        assert_eq!((ul.protocol, ul.offset), (Protocol::UDP, 48));
        assert_eq!(ul.fragment.unwrap().frag_offset, 362);
        assert!(!ul.has_header());
    }

    #[test]
    fn non_first_fragment_stops_the_walk() {
        // A later fragment whose data looks like a Hop-by-Hop header: not walked into.
        let mut buf = [0u8; 64];
        buf[0] = 0x60;
        buf[5] = 24;
        buf[6] = 44;
        buf[40] = 0; // next header: HBH (in the middle of the datagram)
        buf[42..44].copy_from_slice(&(1u16 << 3).to_be_bytes());
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.ext_headers().count(), 1);
        let ul = p.upper_layer().unwrap();
        assert_eq!(
            (ul.protocol, ul.offset, ul.has_header()),
            (Protocol::HOPOPT, 48, false)
        );
    }

    /// An IPv6 packet whose payload is `chain` (hand-built).
    fn packet_with(first: u8, chain: &[u8]) -> Vec<u8> {
        let mut v = std::vec![0u8; 40];
        v[0] = 0x60;
        v[4..6].copy_from_slice(&(chain.len() as u16).to_be_bytes());
        v[6] = first;
        v.extend_from_slice(chain);
        v
    }

    #[test]
    fn truncated_chain() {
        // The captured HBH + DestOpts chain cut at every byte, Payload Length adjusted so that
        // the fixed header is valid: the walk must say Truncated whenever a header is cut.
        let chain = &HBH_DSTOPTS_UDP[40..56];
        for n in 0..16 {
            let pkt = packet_with(0, &chain[..n]);
            let res = Packet::new_checked(&pkt[..]).unwrap().upper_layer();
            assert_eq!(res, Err(Error::Truncated), "cut at {n}");
        }
        assert!(
            Packet::new_checked(&packet_with(0, chain)[..])
                .unwrap()
                .upper_layer()
                .is_ok()
        );
        // A header whose length field runs past the payload.
        let pkt = packet_with(60, &[17, 1, 1, 4, 0, 0, 0, 0]);
        assert_eq!(
            Packet::new_checked(&pkt[..]).unwrap().upper_layer(),
            Err(Error::Truncated)
        );
        // AH: (len + 2) * 4 bytes. Length 1 → 12 bytes: 8 are not enough.
        let pkt = packet_with(51, &[6, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            Packet::new_checked(&pkt[..]).unwrap().upper_layer(),
            Err(Error::Truncated)
        );
        let pkt = packet_with(51, &[6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let ul = Packet::new_checked(&pkt[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((ul.protocol, ul.offset), (Protocol::TCP, 52));
    }

    #[test]
    fn too_long_chain() {
        // 100 Destination Options headers of 8 bytes each.
        let mut chain = Vec::new();
        for i in 0..100 {
            chain.extend_from_slice(&[if i == 99 { 17 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        let pkt = packet_with(60, &chain);
        let p = Packet::new_checked(&pkt[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(Error::ExtChainTooLong));
        let items: Vec<_> = p.ext_headers().collect();
        assert_eq!(items.len(), MAX_EXT_HEADERS + 1);
        assert_eq!(items[MAX_EXT_HEADERS], Err(Error::ExtChainTooLong));
        // Exactly MAX_EXT_HEADERS is fine.
        let pkt = packet_with(60, &chain[(100 - MAX_EXT_HEADERS) * 8..]);
        let ul = Packet::new_checked(&pkt[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!(
            (ul.protocol, ul.offset),
            (Protocol::UDP, 40 + 8 * MAX_EXT_HEADERS)
        );
    }

    #[test]
    fn hop_by_hop_not_first() {
        let pkt = packet_with(60, &[0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0]);
        let p = Packet::new_checked(&pkt[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(Error::Malformed));
        let v: Vec<_> = p.ext_headers().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1], Err(Error::Malformed));
        // The MLD report's HBH is first: fine.
        assert!(
            Packet::new_checked(&MLD_REPORT[..])
                .unwrap()
                .upper_layer()
                .is_ok()
        );
    }

    #[test]
    fn esp_and_no_next_header_end_the_walk() {
        for end in [50u8, 59] {
            let pkt = packet_with(60, &[end, 0, 1, 4, 0, 0, 0, 0, 0xde, 0xad]);
            let ul = Packet::new_checked(&pkt[..])
                .unwrap()
                .upper_layer()
                .unwrap();
            assert_eq!((ul.protocol, ul.offset), (Protocol(end), 48));
        }
    }

    #[test]
    fn ext_header_view_errors() {
        assert_eq!(
            ExtHeader::new_checked(&[17u8][..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            ExtHeader::new_checked(&[17u8, 0, 0][..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            ExtHeader::new_checked(&[17u8, 1, 0, 0, 0, 0, 0, 0][..]).unwrap_err(),
            Error::Truncated
        );
    }

    /// Any payload: the walk ends within MAX_EXT_HEADERS + 1 items and never panics.
    #[test]
    fn terminates() {
        use proptest::prelude::*;
        proptest!(|(first in any::<u8>(), chain in proptest::collection::vec(any::<u8>(), 0..300))| {
            let pkt = packet_with(first, &chain);
            let p = Packet::new_checked(&pkt[..]).unwrap();
            prop_assert!(p.ext_headers().count() <= MAX_EXT_HEADERS + 1);
            if let Ok(ul) = p.upper_layer() {
                prop_assert!(ul.offset <= pkt.len());
            }
        });
    }

    #[test]
    fn round_trip() {
        use proptest::prelude::*;
        proptest!(|(nh in any::<u8>(), units in 0usize..4, fill in any::<u8>())| {
            let data = std::vec![fill; units * 8 + 6];
            let r = ExtHeaderRepr { next_header: Protocol(nh), data: &data };
            let mut buf = std::vec![0u8; r.buffer_len()];
            r.emit(&mut ExtHeader::new_unchecked(&mut buf[..]));
            prop_assert_eq!(ExtHeaderRepr::parse(&ExtHeader::new_checked(&buf[..]).unwrap()), Ok(r));
        });
    }
}
