//! IPv4 headers (RFC 791), validated as a router must (RFC 1812 §5.2.2), with the in-place
//! rewrites the forwarding path does per packet.
//!
//! **What `new_checked` checks, and what it does not.** [`Packet::check_len`] enforces the
//! RFC 1812 §5.2.2 length and version rules, so that afterwards every getter, [`Packet::options`]
//! and [`Packet::payload`] index without panicking. It does *not* verify the checksum: that is a
//! separate pass over the header ([`Packet::verify_checksum`]) which the data plane runs (and
//! counts) on its own, and which a NIC may already have done. [`Repr::parse`] does verify it,
//! since control-plane code wants one call that answers "is this a good header".
//!
//! **Buffer longer than the datagram.** The total-length field, not the buffer, bounds the
//! payload: a short datagram in a minimum-size Ethernet frame arrives with padding after it.
//! A buffer *shorter* than total length is [`Error::BadLength`]. ICMP errors quote datagrams
//! cut short on purpose; for those [`Packet::check_header`] checks only the header.
//!
//! **Options are detected, not interpreted.** Routers have to notice options (they take the
//! slow path, and source-route options are usually dropped by policy) but vrhost does not act
//! on them. So the view exposes [`Packet::has_options`], the raw bytes and a bounds-checked
//! TLV iterator ([`OptionsIter`]) that turns a bad length into [`Error::Malformed`] instead of
//! panicking or looping; the [`Repr`] stores the raw bytes in a fixed [`Options`] buffer (40
//! bytes at most, no allocation) rather than a typed list that would need one.
//!
//! **Incremental checksums.** TTL decrement and address rewrite (NAT) change one or two 16-bit
//! words of the header, so they patch the checksum with RFC 1624 ([`checksum::update_u16`],
//! [`checksum::update_u32`]) instead of re-summing 20–60 bytes. Starting from a correct
//! checksum the result is bit-identical to a full recomputation (the tests check that).

use core::fmt;
use core::iter::FusedIterator;
use core::net::Ipv4Addr;

use crate::checksum;
use crate::ip::Protocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const LENGTH: Range<usize> = 2..4;
    pub(super) const IDENT: Range<usize> = 4..6;
    pub(super) const FLG_OFF: Range<usize> = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Range<usize> = 10..12;
    pub(super) const SRC_ADDR: Range<usize> = 12..16;
    pub(super) const DST_ADDR: Range<usize> = 16..20;
    pub(super) const OPTIONS: usize = 20;
}

/// Length of a header without options (IHL 5).
pub const HEADER_LEN: usize = field::OPTIONS;

/// Length of the longest header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

/// Most option bytes a header can carry.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 datagram: header, options and payload.
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

    /// Wrap a buffer after [`Packet::check_len`]. Does not verify the checksum.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The header checks of RFC 1812 §5.2.2 that do not involve the total length:
    /// [`Error::Truncated`] if the buffer is under 20 bytes, [`Error::BadVersion`] unless the
    /// version is 4, [`Error::BadHeaderLen`] if IHL < 5 or the header (with options) overruns
    /// the buffer.
    ///
    /// After this the header getters and [`Packet::options`] are safe; [`Packet::payload`] is
    /// then bounded by the buffer as well as by the total length. This is the check for a
    /// datagram quoted (cut short) inside an ICMP error; use [`Packet::check_len`] otherwise.
    pub fn check_header(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        if self.ihl() < 5 || self.header_len() > len {
            return Err(Error::BadHeaderLen);
        }
        Ok(())
    }

    /// All length checks of RFC 1812 §5.2.2: [`Packet::check_header`], then
    /// [`Error::BadLength`] unless `header length ≤ total length ≤ buffer length`. The buffer
    /// may be longer than the total length (link-layer padding). Does not verify the checksum.
    pub fn check_len(&self) -> Result<()> {
        self.check_header()?;
        let total = usize::from(self.total_len());
        if total < self.header_len() || total > self.buffer.as_ref().len() {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version field (4 for a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Internet header length, in 32-bit words (5–15).
    #[inline]
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// Header length in bytes, options included (`ihl × 4`).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// Differentiated services code point (the top six bits of the old TOS byte).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (the bottom two bits of the old TOS byte).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length field: header plus payload, in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::LENGTH.start], d[field::LENGTH.start + 1]])
    }

    /// Identification (for fragment reassembly).
    #[inline]
    pub fn ident(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::IDENT.start], d[field::IDENT.start + 1]])
    }

    #[inline]
    fn flags_offset(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::FLG_OFF.start], d[field::FLG_OFF.start + 1]])
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Fragment offset **in bytes** (the field counts 8-byte units; this multiplies by 8).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & OFFSET_MASK) << 3
    }

    /// Part of a fragmented datagram: MF set or a non-zero offset.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags_offset() & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> Protocol {
        Protocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::CHECKSUM.start], d[field::CHECKSUM.start + 1]])
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let d = self.buffer.as_ref();
        let s = field::SRC_ADDR.start;
        Ipv4Addr::new(d[s], d[s + 1], d[s + 2], d[s + 3])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let d = self.buffer.as_ref();
        let s = field::DST_ADDR.start;
        Ipv4Addr::new(d[s], d[s + 1], d[s + 2], d[s + 3])
    }

    /// The header carries options (IHL > 5): the cue for the slow path.
    #[inline]
    pub fn has_options(&self) -> bool {
        self.ihl() > 5
    }

    /// The option bytes, between the fixed header and the payload (empty if IHL is 5).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len().max(field::OPTIONS)]
    }

    /// Iterate over the options as (kind, data) pairs; see [`OptionsIter`].
    #[inline]
    pub fn options_iter(&self) -> OptionsIter<'_> {
        OptionsIter::new(self.options())
    }

    /// The payload: from the end of the header to the end given by the total length (not to
    /// the end of the buffer, which may hold link-layer padding). In a view that only passed
    /// [`Packet::check_header`] it is also cut at the end of the buffer.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        let start = self.header_len();
        let end = usize::from(self.total_len()).min(d.len()).max(start);
        &d[start..end]
    }

    /// The header checksum verifies (the one's-complement sum of the header is 0xFFFF).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }

    /// Sum of the pseudo header (addresses, protocol, payload length) that TCP and UDP
    /// checksums cover, not inverted: combine it with the L4 sum via [`checksum::combine`].
    #[inline]
    pub fn pseudo_header_sum(&self) -> u16 {
        let len = usize::from(self.total_len()).saturating_sub(self.header_len());
        checksum::pseudo_header_v4(
            self.src_addr(),
            self.dst_addr(),
            self.protocol().0,
            len as u16,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the version field.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Set the header length in bytes (a multiple of 4 from 20 to 60; stored as IHL = len / 4).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (HEADER_LEN..=MAX_HEADER_LEN).contains(&len));
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Set the DSCP (six bits), keeping ECN.
    #[inline]
    pub fn set_dscp(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (v << 2);
    }

    /// Set the ECN bits (two bits), keeping DSCP.
    #[inline]
    pub fn set_ecn(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (v & 0x03);
    }

    /// Set the total length field.
    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes())
    }

    #[inline]
    fn set_flags_offset(&mut self, v: u16) {
        self.buffer.as_mut()[field::FLG_OFF].copy_from_slice(&v.to_be_bytes())
    }

    /// Clear all three flag bits (reserved, DF, MF), keeping the fragment offset.
    #[inline]
    pub fn clear_flags(&mut self) {
        let v = self.flags_offset() & OFFSET_MASK;
        self.set_flags_offset(v)
    }

    /// Set or clear don't-fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, on: bool) {
        let v = self.flags_offset();
        self.set_flags_offset(if on { v | FLAG_DF } else { v & !FLAG_DF })
    }

    /// Set or clear more-fragments.
    #[inline]
    pub fn set_more_frags(&mut self, on: bool) {
        let v = self.flags_offset();
        self.set_flags_offset(if on { v | FLAG_MF } else { v & !FLAG_MF })
    }

    /// Set the fragment offset **in bytes** (a multiple of 8; stored divided by 8).
    #[inline]
    pub fn set_frag_offset(&mut self, bytes: u16) {
        debug_assert!(
            bytes.is_multiple_of(8),
            "fragment offset must be a multiple of 8"
        );
        let v = self.flags_offset();
        self.set_flags_offset((v & !OFFSET_MASK) | (bytes >> 3))
    }

    /// Set the TTL (checksum not updated; see [`Packet::decrement_ttl`]).
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v
    }

    /// Set the protocol.
    #[inline]
    pub fn set_protocol(&mut self, v: Protocol) {
        self.buffer.as_mut()[field::PROTOCOL] = v.0
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the source address (checksum not updated; see [`Packet::set_src_addr_incremental`]).
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets())
    }

    /// Set the destination address (checksum not updated; see
    /// [`Packet::set_dst_addr_incremental`]).
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets())
    }

    /// The option bytes, writable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len().max(field::OPTIONS);
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// The payload (bounded as in [`Packet::payload`]), writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let total = usize::from(self.total_len());
        let d = self.buffer.as_mut();
        let end = total.min(d.len()).max(start);
        &mut d[start..end]
    }

    /// Compute the header checksum from scratch and store it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(!sum)
    }

    /// Decrement the TTL and patch the checksum incrementally (RFC 1624); returns the new TTL.
    ///
    /// A TTL of 0 stays 0 and nothing is written, so "the result is 0" means "do not forward,
    /// send Time Exceeded" for a received TTL of 0 or 1 alike (RFC 1812 §5.3.1).
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let d = self.buffer.as_ref();
        let (ttl, proto) = (d[field::TTL], d[field::PROTOCOL]);
        if ttl == 0 {
            return 0;
        }
        let check = checksum::update_u16(
            self.checksum(),
            u16::from_be_bytes([ttl, proto]),
            u16::from_be_bytes([ttl - 1, proto]),
        );
        self.set_ttl(ttl - 1);
        self.set_checksum(check);
        ttl - 1
    }

    /// Rewrite the source address and patch the checksum incrementally (RFC 1624), as SNAT
    /// does. An L4 checksum covering the pseudo header needs its own update.
    #[inline]
    pub fn set_src_addr_incremental(&mut self, a: Ipv4Addr) {
        let check = checksum::update_u32(self.checksum(), self.src_addr().to_bits(), a.to_bits());
        self.set_src_addr(a);
        self.set_checksum(check);
    }

    /// Rewrite the destination address and patch the checksum incrementally (RFC 1624), as
    /// DNAT does. An L4 checksum covering the pseudo header needs its own update.
    #[inline]
    pub fn set_dst_addr_incremental(&mut self, a: Ipv4Addr) {
        let check = checksum::update_u32(self.checksum(), self.dst_addr().to_bits(), a.to_bits());
        self.set_dst_addr(a);
        self.set_checksum(check);
    }
}

/// An option kind (type) byte: copied flag (1 bit), class (2 bits), number (5 bits).
/// A newtype so that unknown kinds survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OptionKind(pub u8);

impl OptionKind {
    /// End of option list (single byte).
    pub const END: OptionKind = OptionKind(0);
    /// No operation (single byte; used for alignment).
    pub const NOP: OptionKind = OptionKind(1);
    /// Record route (RFC 791).
    pub const RECORD_ROUTE: OptionKind = OptionKind(7);
    /// Internet timestamp (RFC 791).
    pub const TIMESTAMP: OptionKind = OptionKind(68);
    /// Loose source and record route (RFC 791).
    pub const LOOSE_SOURCE_ROUTE: OptionKind = OptionKind(131);
    /// Strict source and record route (RFC 791).
    pub const STRICT_SOURCE_ROUTE: OptionKind = OptionKind(137);
    /// Router alert (RFC 2113).
    pub const ROUTER_ALERT: OptionKind = OptionKind(148);

    /// The option must be copied into every fragment (top bit).
    pub const fn copied(self) -> bool {
        self.0 & 0x80 != 0
    }

    /// Option class (0 control, 2 debugging and measurement).
    pub const fn class(self) -> u8 {
        (self.0 >> 5) & 0x03
    }

    /// Option number (bottom five bits).
    pub const fn number(self) -> u8 {
        self.0 & 0x1f
    }
}

/// One option: its kind and the bytes after the kind and length bytes (empty for END/NOP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Option<'a> {
    /// The kind byte.
    pub kind: OptionKind,
    /// The option data, without kind and length.
    pub data: &'a [u8],
}

/// Iterator over the options of a header, in order.
///
/// NOP yields an option with empty data; END yields one and then ends the iteration (what
/// follows it is padding). A multi-byte option whose length byte is missing, below 2, or runs
/// past the options area yields one `Err(`[`Error::Malformed`]`)` and ends the iteration. Every
/// step consumes at least one byte, so the iterator ends after at most 40 items.
#[derive(Debug, Clone)]
pub struct OptionsIter<'a> {
    rest: &'a [u8],
}

impl<'a> OptionsIter<'a> {
    /// Iterate over raw option bytes (e.g. [`Packet::options`]).
    pub const fn new(options: &'a [u8]) -> OptionsIter<'a> {
        OptionsIter { rest: options }
    }
}

impl<'a> Iterator for OptionsIter<'a> {
    type Item = Result<Ipv4Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        let (&kind, tail) = rest.split_first()?;
        let kind = OptionKind(kind);
        if kind == OptionKind::END {
            self.rest = &[];
            return Some(Ok(Ipv4Option { kind, data: &[] }));
        }
        if kind == OptionKind::NOP {
            self.rest = tail;
            return Some(Ok(Ipv4Option { kind, data: &[] }));
        }
        match tail.first().map(|&l| usize::from(l)) {
            Some(len) if len >= 2 && len <= rest.len() => {
                self.rest = &rest[len..];
                Some(Ok(Ipv4Option {
                    kind,
                    data: &rest[2..len],
                }))
            }
            _ => {
                self.rest = &[];
                Some(Err(Error::Malformed))
            }
        }
    }
}

impl FusedIterator for OptionsIter<'_> {}

/// Check that option bytes are a well-formed TLV sequence.
fn validate_options(bytes: &[u8]) -> Result<()> {
    OptionsIter::new(bytes).try_for_each(|o| o.map(|_| ()))
}

/// The option bytes of a header, in a fixed buffer (no allocation).
///
/// Always a multiple of 4 bytes long (the header length counts 32-bit words) and at most
/// [`MAX_OPTIONS_LEN`]; always a well-formed TLV sequence (see [`OptionsIter`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Options {
    bytes: [u8; MAX_OPTIONS_LEN],
    len: u8,
}

impl Options {
    /// No options.
    pub const EMPTY: Options = Options {
        bytes: [0; MAX_OPTIONS_LEN],
        len: 0,
    };

    /// Copy option bytes, padding with END (zero) bytes to a multiple of 4.
    ///
    /// Errors: [`Error::BadHeaderLen`] if longer than [`MAX_OPTIONS_LEN`];
    /// [`Error::Malformed`] if they are not a well-formed TLV sequence.
    pub fn new(bytes: &[u8]) -> Result<Options> {
        if bytes.len() > MAX_OPTIONS_LEN {
            return Err(Error::BadHeaderLen);
        }
        validate_options(bytes)?;
        let mut o = Options::EMPTY;
        o.bytes[..bytes.len()].copy_from_slice(bytes);
        o.len = bytes.len().next_multiple_of(4) as u8;
        Ok(o)
    }

    /// The option bytes, padding included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Number of option bytes, padding included (a multiple of 4).
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// No options.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Iterate over the options.
    pub fn iter(&self) -> OptionsIter<'_> {
        OptionsIter::new(self.as_bytes())
    }
}

impl Default for Options {
    fn default() -> Options {
        Options::EMPTY
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Options").field(&self.as_bytes()).finish()
    }
}

/// An IPv4 header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: Protocol,
    /// Payload length in bytes (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP, six bits.
    pub dscp: u8,
    /// ECN, two bits.
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
    /// Options (usually empty).
    pub options: Options,
}

impl Repr {
    /// Read a header, validating everything: the length rules of [`Packet::check_len`], the
    /// checksum ([`Error::BadChecksum`]) and the option TLVs ([`Error::Malformed`]). The
    /// reserved flag bit is ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let options = Options::new(packet.options())?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
            options,
        })
    }

    /// Header length in bytes, options included.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Bytes the header takes (= [`Repr::header_len`]); the `payload_len` payload bytes follow
    /// it and are not written by [`Repr::emit`].
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Header plus payload: the total-length field [`Repr::emit`] writes.
    pub const fn total_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Sum of the pseudo header for this datagram's L4 checksum (not inverted).
    pub fn pseudo_header_sum(&self) -> u16 {
        checksum::pseudo_header_v4(
            self.src_addr,
            self.dst_addr,
            self.protocol.0,
            self.payload_len as u16,
        )
    }

    /// Write the header, options and checksum into the first [`Repr::buffer_len`] bytes of the
    /// view (the payload is the caller's). `total_len()` must fit in 16 bits, `dscp` in six,
    /// `ecn` in two and `frag_offset` must be a multiple of 8 (debug-asserted; masked or
    /// truncated otherwise).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        debug_assert!(
            self.total_len() <= usize::from(u16::MAX),
            "datagram too long"
        );
        debug_assert!(self.dscp < 64 && self.ecn < 4);
        packet.set_version(4);
        packet.set_header_len(self.header_len());
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        packet.set_total_len(self.total_len() as u16);
        packet.set_ident(self.ident);
        packet.set_flags_offset(0);
        packet.set_dont_frag(self.dont_frag);
        packet.set_more_frags(self.more_frags);
        packet.set_frag_offset(self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet
            .options_mut()
            .copy_from_slice(self.options.as_bytes());
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    // All golden datagrams are real captures (tcpdump -xx on veths between namespaces, see
    // the scripts in testdata/); the arrays are the bytes after the 14-byte Ethernet header.

    /// `testdata/capture.sh 'ping -c1 -s 8 -Q 0xb9 10.99.0.2 >/dev/null' icmp`, the request:
    /// DSCP 46 (EF), ECN 1 (ECT(1)), DF, TTL 64, ICMP, 10.99.0.1 → 10.99.0.2.
    const ECHO_TOS: [u8; 36] = [
        0x45, 0xb9, 0x00, 0x24, 0xe4, 0x8c, 0x40, 0x00, 0x40, 0x01, 0x40, 0xcb, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x00, 0x02, 0x08, 0x00, 0xb7, 0x21, 0x34, 0xcd, 0x00, 0x01, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// `testdata/capture.sh 'ping -c1 -R -s 8 10.99.0.2' icmp`, the request: IHL 15, options
    /// NOP + record route (length 39, pointer 8, first slot 10.99.0.1, eight empty slots).
    const RR_REQUEST: [u8; 76] = [
        0x4f, 0x00, 0x00, 0x4c, 0x5c, 0xda, 0x40, 0x00, 0x40, 0x01, 0x8c, 0x9b, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x00, 0x02, 0x01, 0x07, 0x27, 0x08, 0x0a, 0x63, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x08, 0x00, 0xd1, 0x35, 0x1a, 0xb9, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
        0x07,
    ];

    /// The same capture, the kernel's reply: record route (pointer 16, three slots filled)
    /// followed by END.
    const RR_REPLY: [u8; 76] = [
        0x4f, 0x00, 0x00, 0x4c, 0xa1, 0x24, 0x00, 0x00, 0x40, 0x01, 0x75, 0x7e, 0x0a, 0x63, 0x00,
        0x02, 0x0a, 0x63, 0x00, 0x01, 0x07, 0x27, 0x10, 0x0a, 0x63, 0x00, 0x01, 0x0a, 0x63, 0x00,
        0x02, 0x0a, 0x63, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0xd9, 0x35, 0x1a, 0xb9, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
        0x07,
    ];

    /// `testdata/capture.sh 'ip link set va mtu 68; ping -c1 -s 60 10.99.0.2 >/dev/null'
    /// 'icmp and src 10.99.0.1'`: the first fragment (MF, offset 0, 48 payload bytes) …
    const FRAG_1: [u8; 68] = [
        0x45, 0x00, 0x00, 0x44, 0x8d, 0xab, 0x20, 0x00, 0x40, 0x01, 0xb8, 0x45, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x00, 0x02, 0x08, 0x00, 0x9d, 0x91, 0x2a, 0x78, 0x00, 0x01, 0x06, 0x67,
        0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0xe7, 0xdb, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
        0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27,
    ];

    /// … and the second (last) fragment: offset 48, no MF.
    const FRAG_2: [u8; 40] = [
        0x45, 0x00, 0x00, 0x28, 0x8d, 0xab, 0x00, 0x06, 0x40, 0x01, 0xd8, 0x5b, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x00, 0x02, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31,
        0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b,
    ];

    // `CAPTURE_B=1 SNAT=1 testdata/capture_router.sh 'ping -c1 -s 8 10.99.1.2 >/dev/null'
    // icmp`: a pings b through router r, which masquerades a as 10.99.1.254. The same echo
    // request captured before r (on a's link) and after it (on b's link), and the reply
    // likewise: r's Linux forwarding path decremented the TTL and rewrote an address.

    /// Request on a's link: TTL 64, 10.99.0.1 → 10.99.1.2.
    const FWD_REQ_BEFORE: [u8; 36] = [
        0x45, 0x00, 0x00, 0x24, 0x2c, 0x52, 0x40, 0x00, 0x40, 0x01, 0xf8, 0xbe, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x01, 0x02, 0x08, 0x00, 0xb7, 0xd9, 0x34, 0x15, 0x00, 0x01, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// Request on b's link: TTL 63, source 10.99.1.254.
    const FWD_REQ_AFTER: [u8; 36] = [
        0x45, 0x00, 0x00, 0x24, 0x2c, 0x52, 0x40, 0x00, 0x3f, 0x01, 0xf7, 0xc1, 0x0a, 0x63, 0x01,
        0xfe, 0x0a, 0x63, 0x01, 0x02, 0x08, 0x00, 0xb7, 0xd9, 0x34, 0x15, 0x00, 0x01, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// Reply on b's link: TTL 64, 10.99.1.2 → 10.99.1.254.
    const FWD_REPLY_BEFORE: [u8; 36] = [
        0x45, 0x00, 0x00, 0x24, 0x04, 0x87, 0x00, 0x00, 0x40, 0x01, 0x5e, 0x8d, 0x0a, 0x63, 0x01,
        0x02, 0x0a, 0x63, 0x01, 0xfe, 0x00, 0x00, 0xbf, 0xd9, 0x34, 0x15, 0x00, 0x01, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// Reply on a's link: TTL 63, destination translated back to 10.99.0.1.
    const FWD_REPLY_AFTER: [u8; 36] = [
        0x45, 0x00, 0x00, 0x24, 0x04, 0x87, 0x00, 0x00, 0x3f, 0x01, 0x61, 0x8a, 0x0a, 0x63, 0x01,
        0x02, 0x0a, 0x63, 0x00, 0x01, 0x00, 0x00, 0xbf, 0xd9, 0x34, 0x15, 0x00, 0x01, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    const A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

    fn echo_tos_repr() -> Repr {
        Repr {
            src_addr: A,
            dst_addr: B,
            protocol: Protocol::ICMP,
            payload_len: 16,
            ttl: 64,
            dscp: 46,
            ecn: 1,
            ident: 0xe48c,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            options: Options::EMPTY,
        }
    }

    /// Emit `repr` and append `payload`: the whole datagram.
    fn emit_datagram(repr: &Repr, payload: &[u8]) -> Vec<u8> {
        let mut buf = std::vec![0u8; repr.buffer_len() + payload.len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf[repr.buffer_len()..].copy_from_slice(payload);
        buf
    }

    #[test]
    fn parse_golden_getters() {
        let p = Packet::new_checked(&ECHO_TOS[..]).unwrap();
        assert_eq!((p.version(), p.ihl(), p.header_len()), (4, 5, 20));
        assert_eq!((p.dscp(), p.ecn()), (46, 1));
        assert_eq!((p.total_len(), p.ident()), (36, 0xe48c));
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(
            (p.ttl(), p.protocol(), p.checksum()),
            (64, Protocol::ICMP, 0x40cb)
        );
        assert_eq!((p.src_addr(), p.dst_addr()), (A, B));
        assert!(!p.has_options());
        assert_eq!(p.options(), &[] as &[u8]);
        assert_eq!(p.options_iter().count(), 0);
        assert_eq!(p.payload(), &ECHO_TOS[20..]);
        assert!(p.verify_checksum());
        assert_eq!(Repr::parse(&p).unwrap(), echo_tos_repr());
    }

    #[test]
    fn emit_golden() {
        assert_eq!(emit_datagram(&echo_tos_repr(), &ECHO_TOS[20..]), ECHO_TOS);
    }

    #[test]
    fn golden_options_record_route() {
        let p = Packet::new_checked(&RR_REQUEST[..]).unwrap();
        assert!(p.has_options());
        assert_eq!((p.ihl(), p.header_len(), p.options().len()), (15, 60, 40));
        assert_eq!(p.payload(), &RR_REQUEST[60..]);
        assert!(p.verify_checksum());
        let opts: Vec<_> = p.options_iter().collect::<Result<_>>().unwrap();
        assert_eq!(opts.len(), 2);
        assert_eq!(
            opts[0],
            Ipv4Option {
                kind: OptionKind::NOP,
                data: &[]
            }
        );
        assert_eq!(opts[1].kind, OptionKind::RECORD_ROUTE);
        assert_eq!(opts[1].data.len(), 37);
        assert_eq!(&opts[1].data[..5], &[8, 10, 99, 0, 1]); // pointer, first slot
        assert!(!opts[1].kind.copied());

        let reply = Packet::new_checked(&RR_REPLY[..]).unwrap();
        let opts: Vec<_> = reply.options_iter().collect::<Result<_>>().unwrap();
        assert_eq!(opts.len(), 2);
        assert_eq!(opts[0].kind, OptionKind::RECORD_ROUTE);
        assert_eq!(
            &opts[0].data[..13],
            &[16, 10, 99, 0, 1, 10, 99, 0, 2, 10, 99, 0, 2]
        );
        assert_eq!(
            opts[1],
            Ipv4Option {
                kind: OptionKind::END,
                data: &[]
            }
        );

        // Repr keeps the options byte for byte and emits the capture again.
        for golden in [&RR_REQUEST[..], &RR_REPLY[..]] {
            let repr = Repr::parse(&Packet::new_checked(golden).unwrap()).unwrap();
            assert_eq!(repr.options.as_bytes(), &golden[20..60]);
            assert_eq!(
                (repr.header_len(), repr.payload_len, repr.total_len()),
                (60, 16, 76)
            );
            assert_eq!(emit_datagram(&repr, &golden[60..]), golden);
        }
    }

    #[test]
    fn golden_fragments() {
        let f1 = Packet::new_checked(&FRAG_1[..]).unwrap();
        let f2 = Packet::new_checked(&FRAG_2[..]).unwrap();
        assert_eq!(f1.ident(), f2.ident());
        assert!(f1.more_frags() && !f1.dont_frag() && f1.is_fragment());
        assert_eq!(f1.frag_offset(), 0);
        assert!(!f2.more_frags() && f2.is_fragment());
        assert_eq!(f2.frag_offset(), 48);
        assert_eq!(f1.payload().len(), 48);
        assert_eq!(f2.payload(), &FRAG_2[20..]);
        for golden in [&FRAG_1[..], &FRAG_2[..]] {
            let repr = Repr::parse(&Packet::new_checked(golden).unwrap()).unwrap();
            assert_eq!(emit_datagram(&repr, &golden[20..]), golden);
        }
    }

    /// The kernel's forwarding path and ours agree byte for byte: TTL decrement plus SNAT on
    /// the request, TTL decrement plus un-DNAT on the reply, all with incremental checksums.
    #[test]
    fn golden_forwarding_rewrites() {
        let mut req = FWD_REQ_BEFORE;
        let mut p = Packet::new_checked(&mut req[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        p.set_src_addr_incremental(Ipv4Addr::new(10, 99, 1, 254));
        assert_eq!(req, FWD_REQ_AFTER);

        let mut reply = FWD_REPLY_BEFORE;
        let mut p = Packet::new_checked(&mut reply[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        p.set_dst_addr_incremental(A);
        assert_eq!(reply, FWD_REPLY_AFTER);
    }

    #[test]
    fn decrement_ttl_floor() {
        let mut b = ECHO_TOS;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_ttl(1);
        p.fill_checksum();
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
        let before = b;
        let mut p = Packet::new_unchecked(&mut b[..]);
        assert_eq!(p.decrement_ttl(), 0, "TTL 0 stays 0");
        assert_eq!(b, before, "and nothing is written");
    }

    /// Ethernet padding after the datagram (hand-made: the golden datagram followed by zeros,
    /// as a NIC delivers a short frame padded to 60 bytes; veth does not pad).
    #[test]
    fn buffer_longer_than_total_len() {
        let mut padded = [0u8; 46];
        padded[..36].copy_from_slice(&ECHO_TOS);
        let p = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload(), &ECHO_TOS[20..]);
        assert_eq!(Repr::parse(&p).unwrap(), echo_tos_repr());
    }

    #[test]
    fn errors_truncated_and_lengths() {
        for n in 0..20 {
            assert_eq!(
                Packet::new_checked(&ECHO_TOS[..n]).unwrap_err(),
                Error::Truncated
            );
        }
        // Total length 36 > buffer.
        for n in 20..36 {
            assert_eq!(
                Packet::new_checked(&ECHO_TOS[..n]).unwrap_err(),
                Error::BadLength
            );
        }
        // Header with options cut inside the options: IHL × 4 > buffer.
        for n in 20..60 {
            assert_eq!(
                Packet::new_checked(&RR_REQUEST[..n]).unwrap_err(),
                Error::BadHeaderLen
            );
        }
        // Header complete, payload cut.
        for n in 60..76 {
            assert_eq!(
                Packet::new_checked(&RR_REQUEST[..n]).unwrap_err(),
                Error::BadLength
            );
            let p = Packet::new_unchecked(&RR_REQUEST[..n]);
            assert_eq!(p.check_header(), Ok(()));
            assert_eq!(
                p.payload(),
                &RR_REQUEST[60..n],
                "quote view: cut at the buffer"
            );
        }
        assert!(Packet::new_checked(&ECHO_TOS[..]).is_ok());
    }

    #[test]
    fn errors_fields() {
        let with = |i: usize, v: u8| {
            let mut b = ECHO_TOS;
            b[i] = v;
            b
        };
        // Version 6, 0, 15.
        for v in [0x65, 0x05, 0xf5] {
            assert_eq!(
                Packet::new_checked(&with(0, v)[..]).unwrap_err(),
                Error::BadVersion
            );
        }
        // IHL 0..4.
        for ihl in 0..5 {
            let b = with(0, 0x40 | ihl);
            assert_eq!(
                Packet::new_checked(&b[..]).unwrap_err(),
                Error::BadHeaderLen,
                "{ihl}"
            );
        }
        // IHL 10: a 40-byte header overruns the 36-byte buffer.
        assert_eq!(
            Packet::new_checked(&with(0, 0x4a)[..]).unwrap_err(),
            Error::BadHeaderLen
        );
        // Total length below the header length, and above the buffer.
        assert_eq!(
            Packet::new_checked(&with(3, 19)[..]).unwrap_err(),
            Error::BadLength
        );
        assert_eq!(
            Packet::new_checked(&with(3, 37)[..]).unwrap_err(),
            Error::BadLength
        );
        assert!(
            Packet::new_checked(&with(3, 20)[..]).is_ok(),
            "empty payload is fine"
        );
        assert_eq!(
            Packet::new_checked(&with(2, 1)[..]).unwrap_err(),
            Error::BadLength
        );
    }

    #[test]
    fn bad_checksum_only_in_repr() {
        for i in [1, 4, 8, 11, 13, 19] {
            let mut b = ECHO_TOS;
            b[i] ^= 0x01;
            let p = Packet::new_checked(&b[..]).expect("new_checked does not verify checksums");
            assert!(!p.verify_checksum());
            assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadChecksum, "byte {i}");
        }
        // A payload change is not the header checksum's business.
        let mut b = ECHO_TOS;
        b[30] ^= 0xff;
        assert!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).is_ok());
    }

    /// Option bytes (hand-made) → what the iterator yields.
    #[test]
    fn options_iter_cases() {
        let kinds = |b: &[u8]| -> Vec<Result<(u8, usize)>> {
            OptionsIter::new(b)
                .map(|o| o.map(|o| (o.kind.0, o.data.len())))
                .collect()
        };
        assert_eq!(kinds(&[]), []);
        assert_eq!(
            kinds(&[1, 1, 1, 1]),
            [Ok((1, 0)), Ok((1, 0)), Ok((1, 0)), Ok((1, 0))]
        );
        assert_eq!(
            kinds(&[0, 7, 0, 0]),
            [Ok((0, 0))],
            "END stops, even before junk"
        );
        assert_eq!(kinds(&[148, 4, 0, 0]), [Ok((148, 2))], "router alert");
        assert_eq!(
            kinds(&[1, 7, 2, 0]),
            [Ok((1, 0)), Ok((7, 0)), Ok((0, 0))],
            "length 2: no data"
        );
        // Malformed: length 0, length 1, overrun, length byte missing. One error, then the end.
        assert_eq!(kinds(&[7, 0, 0, 0]), [Err(Error::Malformed)]);
        assert_eq!(kinds(&[7, 1, 0, 0]), [Err(Error::Malformed)]);
        assert_eq!(kinds(&[1, 7, 4, 0]), [Ok((1, 0)), Err(Error::Malformed)]);
        assert_eq!(
            kinds(&[1, 1, 1, 7]),
            [Ok((1, 0)), Ok((1, 0)), Ok((1, 0)), Err(Error::Malformed)]
        );
        assert_eq!(kinds(&[68, 255]), [Err(Error::Malformed)]);
        let mut it = OptionsIter::new(&[7, 0]);
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none() && it.next().is_none(), "fused");
    }

    /// Malformed options in a real header (the record-route request with the RR length byte
    /// changed by hand, checksum refilled): the view still works, `Repr::parse` refuses it.
    #[test]
    fn malformed_options_in_header() {
        for rr_len in [0u8, 1, 40, 255] {
            let mut b = RR_REQUEST;
            b[22] = rr_len;
            Packet::new_unchecked(&mut b[..]).fill_checksum();
            let p = Packet::new_checked(&b[..]).unwrap();
            assert!(p.has_options() && p.verify_checksum());
            assert_eq!(
                p.options_iter().last(),
                Some(Err(Error::Malformed)),
                "len {rr_len}"
            );
            assert_eq!(
                Repr::parse(&p).unwrap_err(),
                Error::Malformed,
                "len {rr_len}"
            );
        }
    }

    #[test]
    fn options_type() {
        assert_eq!(
            Options::new(&[1, 1, 1]).unwrap().as_bytes(),
            &[1, 1, 1, 0],
            "padded"
        );
        assert_eq!(Options::new(&[148, 4, 0, 0]).unwrap().len(), 4);
        assert_eq!(Options::new(&[0; 41]).unwrap_err(), Error::BadHeaderLen);
        assert_eq!(Options::new(&[7, 1]).unwrap_err(), Error::Malformed);
        assert!(Options::new(&[]).unwrap().is_empty());
        assert_eq!(Options::default(), Options::EMPTY);
        let o = Options::new(&RR_REQUEST[20..60]).unwrap();
        assert_eq!(o.iter().count(), 2);
        assert_eq!(
            std::format!("{:?}", Options::new(&[1]).unwrap()),
            "Options([1, 0, 0, 0])"
        );
        let k = OptionKind::LOOSE_SOURCE_ROUTE;
        assert!(k.copied());
        assert_eq!((k.class(), k.number()), (0, 3));
        assert_eq!(
            (
                OptionKind::TIMESTAMP.class(),
                OptionKind::TIMESTAMP.number()
            ),
            (2, 4)
        );
    }

    #[test]
    fn setters_and_pseudo_header() {
        let mut b = [0u8; 28];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_dscp(63);
        p.set_ecn(3);
        p.set_ecn(2);
        assert_eq!((p.dscp(), p.ecn()), (63, 2));
        p.set_total_len(28);
        p.set_more_frags(true);
        p.set_frag_offset(8 * 0x1fff);
        p.set_dont_frag(true);
        assert!(p.more_frags() && p.dont_frag());
        assert_eq!(p.frag_offset(), 0xfff8);
        p.set_dont_frag(false);
        p.set_more_frags(false);
        assert!(!p.more_frags() && !p.dont_frag());
        p.clear_flags();
        assert_eq!(p.frag_offset(), 0xfff8, "clear_flags keeps the offset");
        p.set_protocol(Protocol::UDP);
        p.set_src_addr(A);
        p.set_dst_addr(B);
        p.payload_mut().copy_from_slice(&[1; 8]);
        assert_eq!(p.options_mut().len(), 0);
        assert_eq!(
            p.pseudo_header_sum(),
            checksum::pseudo_header_v4(A, B, 17, 8),
        );
        let repr = Repr {
            payload_len: 8,
            protocol: Protocol::UDP,
            ..echo_tos_repr()
        };
        assert_eq!(repr.pseudo_header_sum(), p.pseudo_header_sum());
        assert_eq!(&p.into_inner()[20..], &[1; 8]);
    }

    /// A random valid header with options and a random rewrite: the incremental checksum is
    /// exactly the recomputed one.
    #[test]
    fn incremental_matches_full() {
        use proptest::prelude::*;
        proptest!(|(mut hdr in proptest::array::uniform32(any::<u8>()), ttl in any::<u8>(),
                    src in any::<u32>(), dst in any::<u32>())| {
            hdr[0] = 0x47; // IHL 7: 8 bytes of options
            hdr[2..4].copy_from_slice(&32u16.to_be_bytes());
            hdr[8] = ttl;
            hdr[20..28].copy_from_slice(&[1; 8]); // NOPs
            let mut p = Packet::new_checked(&mut hdr[..]).unwrap();
            p.fill_checksum();

            let full = |p: &Packet<&mut [u8]>| {
                let mut copy = [0u8; 32];
                copy.copy_from_slice(&p.buffer[..]);
                let mut c = Packet::new_unchecked(&mut copy[..]);
                c.fill_checksum();
                c.checksum()
            };
            prop_assert_eq!(p.decrement_ttl(), ttl.saturating_sub(1));
            prop_assert_eq!(p.checksum(), full(&p));
            p.set_src_addr_incremental(Ipv4Addr::from_bits(src));
            prop_assert_eq!(p.checksum(), full(&p));
            p.set_dst_addr_incremental(Ipv4Addr::from_bits(dst));
            prop_assert_eq!(p.checksum(), full(&p));
            prop_assert!(p.verify_checksum());
            prop_assert_eq!((p.src_addr().to_bits(), p.dst_addr().to_bits()), (src, dst));
        });
    }

    /// parse → emit → parse on arbitrary valid headers (options drawn from NOP/END/RR-like TLVs).
    #[test]
    fn roundtrip() {
        use proptest::prelude::*;
        let opts = proptest::collection::vec(
            prop_oneof![
                Just(std::vec![1u8]),
                (2u8..=10).prop_map(|l| {
                    let mut v = std::vec![7u8, l];
                    v.resize(usize::from(l), 0xaa);
                    v
                })
            ],
            0..4,
        )
        .prop_map(|v| v.concat())
        .prop_filter("fits", |v| v.len() <= MAX_OPTIONS_LEN);
        proptest!(|(fixed in proptest::array::uniform20(any::<u8>()), o in opts,
                    payload in proptest::collection::vec(any::<u8>(), 0..20))| {
            let options = Options::new(&o).unwrap();
            let hl = HEADER_LEN + options.len();
            let mut buf = std::vec![0u8; hl + payload.len()];
            buf[..20].copy_from_slice(&fixed);
            buf[0] = 0x40 | (hl / 4) as u8;
            let total = buf.len() as u16;
            buf[2..4].copy_from_slice(&total.to_be_bytes());
            buf[20..hl].copy_from_slice(options.as_bytes());
            buf[hl..].copy_from_slice(&payload);
            Packet::new_unchecked(&mut buf[..]).fill_checksum();

            let repr = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
            let out = emit_datagram(&repr, &payload);
            let again = Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap();
            prop_assert_eq!(again, repr);
            // Byte-exact except the reserved flag, which the Repr does not carry.
            let mut expect = buf.clone();
            expect[6] &= 0x7f;
            Packet::new_unchecked(&mut expect[..]).fill_checksum();
            prop_assert_eq!(out, expect);
        });
    }
}
