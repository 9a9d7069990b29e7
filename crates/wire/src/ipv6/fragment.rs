//! The IPv6 Fragment header (RFC 8200 §4.5): fixed 8 bytes.
//!
//! The offset is kept in the header's own unit (8 octets) in the view and the `Repr`, so that a
//! round trip cannot produce an offset the field cannot hold; [`FragmentRepr::byte_offset`]
//! converts. Reassembly is not this module's business: a router forwards fragments, and only
//! needs to know whether a packet *is* one and whether it is the first (the only one that
//! carries the upper-layer header).

use crate::ip::Protocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub(super) const NEXT_HEADER: usize = 0;
    pub(super) const RESERVED: usize = 1;
    /// Fragment Offset (13 bits), Res (2 bits), M flag (1 bit).
    pub(super) const OFFSET_FLAGS: Range<usize> = 2..4;
    pub(super) const IDENT: Range<usize> = 4..8;
}

/// Length of the Fragment header.
pub const FRAGMENT_HEADER_LEN: usize = field::IDENT.end;

/// A view of a Fragment header.
#[derive(Debug, Clone, Copy)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    /// Wrap a buffer without checking its length. Getters on a too-short buffer panic.
    pub const fn new_unchecked(buffer: T) -> FragmentHeader<T> {
        FragmentHeader { buffer }
    }

    /// Wrap a buffer after checking it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<FragmentHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// [`Error::Truncated`] unless the buffer holds the 8-byte header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next Header (of the fragmentable part).
    #[inline]
    pub fn next_header(&self) -> Protocol {
        Protocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Fragment Offset in units of 8 octets.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([
            d[field::OFFSET_FLAGS.start],
            d[field::OFFSET_FLAGS.start + 1],
        ]) >> 3
    }

    /// The M flag: more fragments follow.
    #[inline]
    pub fn more_fragments(&self) -> bool {
        self.buffer.as_ref()[field::OFFSET_FLAGS.start + 1] & 0x01 != 0
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::IDENT];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    /// Set Next Header.
    #[inline]
    pub fn set_next_header(&mut self, nh: Protocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = nh.0
    }

    /// Zero the two reserved fields.
    #[inline]
    pub fn clear_reserved(&mut self) {
        let d = self.buffer.as_mut();
        d[field::RESERVED] = 0;
        d[field::OFFSET_FLAGS.start + 1] &= !0x06;
    }

    /// Set Fragment Offset (in 8-octet units; only the low 13 bits are used).
    #[inline]
    pub fn set_frag_offset(&mut self, units: u16) {
        let d = self.buffer.as_mut();
        let low = d[field::OFFSET_FLAGS.start + 1] & 0x07;
        let v = (units << 3) | u16::from(low);
        d[field::OFFSET_FLAGS].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the M flag.
    #[inline]
    pub fn set_more_fragments(&mut self, more: bool) {
        let b = &mut self.buffer.as_mut()[field::OFFSET_FLAGS.start + 1];
        *b = (*b & !0x01) | u8::from(more);
    }

    /// Set Identification.
    #[inline]
    pub fn set_ident(&mut self, ident: u32) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&ident.to_be_bytes())
    }
}

/// The Fragment header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentRepr {
    /// Next Header of the fragmentable part.
    pub next_header: Protocol,
    /// Fragment Offset in units of 8 octets (13 bits).
    pub frag_offset: u16,
    /// More fragments follow.
    pub more_fragments: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentRepr {
    /// Read a Fragment header.
    pub fn parse<T: AsRef<[u8]>>(header: &FragmentHeader<T>) -> Result<FragmentRepr> {
        header.check_len()?;
        Ok(FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_fragments: header.more_fragments(),
            ident: header.ident(),
        })
    }

    /// Bytes the header takes (8).
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Write the header into the first 8 bytes of the view (reserved fields zeroed).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut FragmentHeader<T>) {
        header.set_next_header(self.next_header);
        header.clear_reserved();
        header.set_frag_offset(self.frag_offset);
        header.set_more_fragments(self.more_fragments);
        header.set_ident(self.ident);
    }

    /// The offset in bytes of this fragment's data within the fragmentable part.
    pub const fn byte_offset(&self) -> usize {
        self.frag_offset as usize * 8
    }

    /// The first fragment (offset 0): the only one that carries the upper-layer header.
    pub const fn is_first(&self) -> bool {
        self.frag_offset == 0
    }

    /// An atomic fragment (RFC 6946): offset 0 and no more fragments, i.e. a whole datagram
    /// that just happens to carry a Fragment header. Processed as if unfragmented.
    pub const fn is_atomic(&self) -> bool {
        self.frag_offset == 0 && !self.more_fragments
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::tests::{FRAG_FIRST, FRAG_LAST};

    #[test]
    fn parse_golden() {
        // Bytes 40..48 of the captured fragments (see ipv6::tests).
        let first = FragmentRepr::parse(&FragmentHeader::new_checked(&FRAG_FIRST[40..48]).unwrap());
        let want = FragmentRepr {
            next_header: Protocol::UDP,
            frag_offset: 0,
            more_fragments: true,
            ident: 0x0ba3_4fa9,
        };
        assert_eq!(first, Ok(want));
        assert!(want.is_first() && !want.is_atomic());
        let last = FragmentRepr::parse(&FragmentHeader::new_checked(&FRAG_LAST[40..48]).unwrap());
        let want_last = FragmentRepr {
            frag_offset: 362,
            more_fragments: false,
            ..want
        };
        assert_eq!(last, Ok(want_last));
        assert_eq!(want_last.byte_offset(), 2896); // tcpdump: "frag (0x0ba34fa9:2896|112)"
    }

    #[test]
    fn emit_golden() {
        for golden in [&FRAG_FIRST[40..48], &FRAG_LAST[40..48]] {
            let r = FragmentRepr::parse(&FragmentHeader::new_unchecked(golden)).unwrap();
            let mut buf = [0xffu8; 8];
            r.emit(&mut FragmentHeader::new_unchecked(&mut buf[..]));
            assert_eq!(&buf[..], golden);
        }
    }

    #[test]
    fn truncated() {
        for n in 0..8 {
            assert_eq!(
                FragmentHeader::new_checked(&FRAG_LAST[40..40 + n]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn round_trip() {
        use proptest::prelude::*;
        proptest!(|(nh in any::<u8>(), off in 0u16..8192, m in any::<bool>(), id in any::<u32>())| {
            let r = FragmentRepr { next_header: Protocol(nh), frag_offset: off, more_fragments: m, ident: id };
            let mut buf = [0u8; 8];
            r.emit(&mut FragmentHeader::new_unchecked(&mut buf[..]));
            prop_assert_eq!(FragmentRepr::parse(&FragmentHeader::new_checked(&buf[..]).unwrap()), Ok(r));
        });
    }
}
