//! TCP (RFC 9293) segment headers, over IPv4 and IPv6.
//!
//! A router does not run TCP; it looks at ports and flags (ACLs, flow hashing, SYN policing),
//! clamps an MSS option now and then, and fixes the checksum when NAT rewrites an address. So
//! the view is the main thing, and the options are an iterator over the option bytes
//! ([`TcpOptions`]) that ends at End of Option List, at the end of the area, or at the first
//! malformed option ([`Error::Malformed`]: a length below 2, a length running past the area, or
//! a known option with the wrong length) — it consumes at least one byte per step, so it
//! terminates on any input.
//!
//! TCP has no length field: the segment is the whole buffer, which must therefore be the IP
//! payload exactly (as the IPv4/IPv6 views' `payload()` give it), or the checksum will include
//! link-layer padding.
//!
//! The [`Repr`] keeps the options as they appear, NOPs included, in a fixed array
//! ([`OptionList`]) instead of smoltcp's one field per known option: that way unknown options
//! survive a parse/emit round trip and a captured SYN re-emits byte for byte (Linux aligns its
//! window-scale option with a NOP, Windows differently). Every option takes at least one of the
//! 40 bytes of option space, so [`MAX_OPTIONS`] = 40 entries hold any header and no parse fails
//! for want of room; the price is a Repr of about a kilobyte, which is fine off the fast path.
//!
//! Checksums work as in [`crate::udp`] (pseudo-header sum in, `_v4`/`_v6` conveniences), except
//! that TCP has no "no checksum" value: 0 is an ordinary checksum.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops;

use crate::checksum;
use crate::ip::Protocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub(super) const SRC_PORT: Range<usize> = 0..2;
    pub(super) const DST_PORT: Range<usize> = 2..4;
    pub(super) const SEQ_NUM: Range<usize> = 4..8;
    pub(super) const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (4 bits), reserved (3 bits), NS; then CWR … FIN.
    pub(super) const FLAGS: Range<usize> = 12..14;
    pub(super) const WINDOW: Range<usize> = 14..16;
    pub(super) const CHECKSUM: Range<usize> = 16..18;
    pub(super) const URGENT: Range<usize> = 18..20;
    pub(super) const OPTIONS: usize = 20;
}

/// Length of the TCP header without options.
pub const HEADER_LEN: usize = field::OPTIONS;

/// The most option bytes a header can carry (data offset 15 → 60-byte header).
pub const MAX_OPTIONS_LEN: usize = 40;

/// Entries in an [`OptionList`]: enough for any header (every option takes at least one byte).
pub const MAX_OPTIONS: usize = MAX_OPTIONS_LEN;

/// The TCP flag bits (the nine after the data offset and reserved bits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// FIN: no more data from sender.
    pub const FIN: Flags = Flags(0x001);
    /// SYN: synchronise sequence numbers.
    pub const SYN: Flags = Flags(0x002);
    /// RST: reset the connection.
    pub const RST: Flags = Flags(0x004);
    /// PSH: push function.
    pub const PSH: Flags = Flags(0x008);
    /// ACK: the acknowledgment field is significant.
    pub const ACK: Flags = Flags(0x010);
    /// URG: the urgent pointer is significant.
    pub const URG: Flags = Flags(0x020);
    /// ECE: ECN-Echo (RFC 3168).
    pub const ECE: Flags = Flags(0x040);
    /// CWR: Congestion Window Reduced (RFC 3168).
    pub const CWR: Flags = Flags(0x080);
    /// NS: the ECN-nonce bit of RFC 3540 (now historic; AccECN's AE bit).
    pub const NS: Flags = Flags(0x100);
    /// All nine bits.
    pub const ALL: Flags = Flags(0x1ff);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl ops::BitAnd for Flags {
    type Output = Flags;
    fn bitand(self, rhs: Flags) -> Flags {
        Flags(self.0 & rhs.0)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(&str, Flags); 9] = [
            ("NS", Flags::NS),
            ("CWR", Flags::CWR),
            ("ECE", Flags::ECE),
            ("URG", Flags::URG),
            ("ACK", Flags::ACK),
            ("PSH", Flags::PSH),
            ("RST", Flags::RST),
            ("SYN", Flags::SYN),
            ("FIN", Flags::FIN),
        ];
        write!(f, "Flags(")?;
        let mut first = true;
        for (name, flag) in NAMES {
            if self.contains(flag) {
                if !first {
                    write!(f, "|")?;
                }
                write!(f, "{name}")?;
                first = false;
            }
        }
        write!(f, ")")
    }
}

/// A view of a TCP segment (header and payload).
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

    /// [`Error::Truncated`] if the buffer cannot hold the fixed header; [`Error::BadHeaderLen`]
    /// if the data offset is below 5 words or the header it announces is beyond the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN || hl > len {
            return Err(Error::BadHeaderLen);
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        self.read_u32(field::SEQ_NUM.start)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        self.read_u32(field::ACK_NUM.start)
    }

    /// Data offset in 32-bit words.
    #[inline]
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS.start] >> 4
    }

    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
    }

    /// The nine flag bits.
    #[inline]
    pub fn flags(&self) -> Flags {
        Flags(self.read_u16(field::FLAGS.start) & Flags::ALL.0)
    }

    /// FIN flag.
    #[inline]
    pub fn fin(&self) -> bool {
        self.flags().contains(Flags::FIN)
    }

    /// SYN flag.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags().contains(Flags::SYN)
    }

    /// RST flag.
    #[inline]
    pub fn rst(&self) -> bool {
        self.flags().contains(Flags::RST)
    }

    /// PSH flag.
    #[inline]
    pub fn psh(&self) -> bool {
        self.flags().contains(Flags::PSH)
    }

    /// ACK flag.
    #[inline]
    pub fn ack(&self) -> bool {
        self.flags().contains(Flags::ACK)
    }

    /// URG flag.
    #[inline]
    pub fn urg(&self) -> bool {
        self.flags().contains(Flags::URG)
    }

    /// ECE flag.
    #[inline]
    pub fn ece(&self) -> bool {
        self.flags().contains(Flags::ECE)
    }

    /// CWR flag.
    #[inline]
    pub fn cwr(&self) -> bool {
        self.flags().contains(Flags::CWR)
    }

    /// NS flag.
    #[inline]
    pub fn ns(&self) -> bool {
        self.flags().contains(Flags::NS)
    }

    /// Window.
    #[inline]
    pub fn window_len(&self) -> u16 {
        self.read_u16(field::WINDOW.start)
    }

    /// The Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM.start)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        self.read_u16(field::URGENT.start)
    }

    /// The option bytes (between the fixed header and the data offset).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Iterate over the options.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// The payload: everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Whether the checksum verifies against `pseudo_sum` (from [`checksum::pseudo_header_v4`]
    /// or [`checksum::pseudo_header_v6`] with protocol 6 and the segment length).
    pub fn verify_checksum_with(&self, pseudo_sum: u16) -> bool {
        checksum::combine(&[pseudo_sum, checksum::data(self.buffer.as_ref())]) == 0xffff
    }

    /// Checksum verification with the IPv4 pseudo header.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.verify_checksum_with(pseudo_header_v4(src, dst, self.buffer.as_ref().len()))
    }

    /// Checksum verification with the IPv6 pseudo header (with a Routing header, `dst` is the
    /// final destination, RFC 8200 §8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.verify_checksum_with(pseudo_header_v6(src, dst, self.buffer.as_ref().len()))
    }

    #[inline]
    fn read_u16(&self, at: usize) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    #[inline]
    fn read_u32(&self, at: usize) -> u32 {
        let d = self.buffer.as_ref();
        u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
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

    /// Set the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, n: u32) {
        self.buffer.as_mut()[field::SEQ_NUM].copy_from_slice(&n.to_be_bytes())
    }

    /// Set the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, n: u32) {
        self.buffer.as_mut()[field::ACK_NUM].copy_from_slice(&n.to_be_bytes())
    }

    /// Set the header length in bytes (a multiple of 4 from 20 to 60); the reserved bits are
    /// cleared, the flags kept.
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(
            len.is_multiple_of(4) && (HEADER_LEN..=HEADER_LEN + MAX_OPTIONS_LEN).contains(&len)
        );
        let b = &mut self.buffer.as_mut()[field::FLAGS.start];
        *b = ((len / 4) as u8) << 4 | (*b & 0x01);
    }

    /// Set the nine flag bits (data offset and reserved bits kept).
    #[inline]
    pub fn set_flags(&mut self, flags: Flags) {
        let d = &mut self.buffer.as_mut()[field::FLAGS];
        let [hi, lo] = (flags.0 & Flags::ALL.0).to_be_bytes();
        d[0] = (d[0] & 0xfe) | hi;
        d[1] = lo;
    }

    /// Set the window.
    #[inline]
    pub fn set_window_len(&mut self, w: u16) {
        self.buffer.as_mut()[field::WINDOW].copy_from_slice(&w.to_be_bytes())
    }

    /// Set the Checksum field as is.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&c.to_be_bytes())
    }

    /// Set the urgent pointer.
    #[inline]
    pub fn set_urgent_at(&mut self, u: u16) {
        self.buffer.as_mut()[field::URGENT].copy_from_slice(&u.to_be_bytes())
    }

    /// The option bytes, writable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Compute and set the checksum given the pseudo-header sum. Header and payload must be in
    /// place.
    pub fn fill_checksum_with(&mut self, pseudo_sum: u16) {
        self.set_checksum(0);
        let c = !checksum::combine(&[pseudo_sum, checksum::data(self.buffer.as_ref())]);
        self.set_checksum(c);
    }

    /// [`Packet::fill_checksum_with`] the IPv4 pseudo header.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = self.buffer.as_ref().len();
        self.fill_checksum_with(pseudo_header_v4(src, dst, len))
    }

    /// [`Packet::fill_checksum_with`] the IPv6 pseudo header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let len = self.buffer.as_ref().len();
        self.fill_checksum_with(pseudo_header_v6(src, dst, len))
    }

    /// Update the checksum incrementally (RFC 1624) after the IPv4 source or destination
    /// address was rewritten from `old` to `new` (the pseudo header covers both).
    pub fn update_checksum_for_addr_v4(&mut self, old: Ipv4Addr, new: Ipv4Addr) {
        let c = checksum::update_u32(self.checksum(), old.to_bits(), new.to_bits());
        self.set_checksum(c);
    }

    /// As [`Packet::update_checksum_for_addr_v4`] for an IPv6 address.
    pub fn update_checksum_for_addr_v6(&mut self, old: Ipv6Addr, new: Ipv6Addr) {
        let c = checksum::update_bytes(self.checksum(), &old.octets(), &new.octets());
        self.set_checksum(c);
    }
}

/// The IPv4 pseudo-header sum for a TCP segment of `len` bytes (header included).
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> u16 {
    checksum::pseudo_header_v4(src, dst, Protocol::TCP.0, len as u16)
}

/// The IPv6 pseudo-header sum for a TCP segment of `len` bytes (header included).
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> u16 {
    checksum::pseudo_header_v6(src, dst, Protocol::TCP.0, len as u32)
}

mod kind {
    pub(super) const END: u8 = 0;
    pub(super) const NOP: u8 = 1;
    pub(super) const MSS: u8 = 2;
    pub(super) const WINDOW_SCALE: u8 = 3;
    pub(super) const SACK_PERMITTED: u8 = 4;
    pub(super) const SACK: u8 = 5;
    pub(super) const TIMESTAMPS: u8 = 8;
}

/// The blocks of a SACK option (RFC 2018): 1 to 4 (left edge, right edge) pairs, kept as the
/// option's bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SackBlocks<'a>(&'a [u8]);

impl<'a> SackBlocks<'a> {
    /// Wrap the option data; [`Error::Malformed`] unless it is 1 to 4 whole 8-byte blocks.
    pub fn new(data: &'a [u8]) -> Result<SackBlocks<'a>> {
        if data.is_empty() || data.len() > 32 || !data.len().is_multiple_of(8) {
            return Err(Error::Malformed);
        }
        Ok(SackBlocks(data))
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The (left edge, right edge) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        self.0.chunks_exact(8).map(|c| {
            (
                u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
    }
}

impl fmt::Debug for SackBlocks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// End of Option List (kind 0); whatever follows in the option area is padding.
    EndOfList,
    /// No-Operation (kind 1), used for alignment.
    NoOperation,
    /// Maximum Segment Size (kind 2).
    MaxSegmentSize(u16),
    /// Window Scale shift count (kind 3, RFC 7323).
    WindowScale(u8),
    /// SACK Permitted (kind 4, RFC 2018).
    SackPermitted,
    /// SACK blocks (kind 5, RFC 2018).
    Sack(SackBlocks<'a>),
    /// Timestamps (kind 8, RFC 7323).
    Timestamps {
        /// TSval
        tsval: u32,
        /// TSecr
        tsecr: u32,
    },
    /// Any other option, kept raw.
    Unknown {
        /// The option kind.
        kind: u8,
        /// The option data (after the kind and length bytes).
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Bytes the option takes.
    pub const fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(b) => 2 + b.0.len(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option into the first [`TcpOption::buffer_len`] bytes of `buf` (`Unknown` data
    /// must be at most 38 bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.buffer_len();
        match *self {
            TcpOption::EndOfList => buf[0] = kind::END,
            TcpOption::NoOperation => buf[0] = kind::NOP,
            TcpOption::MaxSegmentSize(mss) => {
                buf[..2].copy_from_slice(&[kind::MSS, 4]);
                buf[2..4].copy_from_slice(&mss.to_be_bytes());
            }
            TcpOption::WindowScale(shift) => {
                buf[..3].copy_from_slice(&[kind::WINDOW_SCALE, 3, shift])
            }
            TcpOption::SackPermitted => buf[..2].copy_from_slice(&[kind::SACK_PERMITTED, 2]),
            TcpOption::Sack(b) => {
                buf[..2].copy_from_slice(&[kind::SACK, len as u8]);
                buf[2..len].copy_from_slice(b.0);
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                buf[..2].copy_from_slice(&[kind::TIMESTAMPS, 10]);
                buf[2..6].copy_from_slice(&tsval.to_be_bytes());
                buf[6..10].copy_from_slice(&tsecr.to_be_bytes());
            }
            TcpOption::Unknown { kind, data } => {
                buf[..2].copy_from_slice(&[kind, len as u8]);
                buf[2..len].copy_from_slice(data);
            }
        }
    }
}

/// Iterator over the options in a TCP option area. See the module docs for when it stops.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
    done: bool,
}

impl<'a> TcpOptions<'a> {
    /// Iterate over an option area.
    pub const fn new(data: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { data, done: false }
    }

    fn fail(&mut self) -> Option<Result<TcpOption<'a>>> {
        self.done = true;
        Some(Err(Error::Malformed))
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (&k, rest) = self.data.split_first()?;
        match k {
            kind::END => {
                self.done = true;
                return Some(Ok(TcpOption::EndOfList));
            }
            kind::NOP => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = rest.first() else {
            return self.fail();
        };
        let len = usize::from(len);
        if len < 2 || len > self.data.len() {
            return self.fail();
        }
        let (opt, rest) = self.data.split_at(len);
        self.data = rest;
        let v = &opt[2..];
        let o = match (k, len) {
            (kind::MSS, 4) => TcpOption::MaxSegmentSize(u16::from_be_bytes([v[0], v[1]])),
            (kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(v[0]),
            (kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (kind::SACK, _) => match SackBlocks::new(v) {
                Ok(b) => TcpOption::Sack(b),
                Err(_) => return self.fail(),
            },
            (kind::TIMESTAMPS, 10) => TcpOption::Timestamps {
                tsval: u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                tsecr: u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
            },
            (kind::MSS | kind::WINDOW_SCALE | kind::SACK_PERMITTED | kind::TIMESTAMPS, _) => {
                return self.fail();
            }
            _ => TcpOption::Unknown { kind: k, data: v },
        };
        Some(Ok(o))
    }
}

/// A fixed-capacity list of options, in wire order (see the module docs for why).
#[derive(Clone, Copy)]
pub struct OptionList<'a> {
    opts: [TcpOption<'a>; MAX_OPTIONS],
    len: u8,
}

impl<'a> OptionList<'a> {
    /// No options.
    pub const fn new() -> OptionList<'a> {
        OptionList {
            opts: [TcpOption::NoOperation; MAX_OPTIONS],
            len: 0,
        }
    }

    /// Build a list from options; [`Error::Malformed`] if they take more than 40 bytes.
    pub fn from_options(opts: &[TcpOption<'a>]) -> Result<OptionList<'a>> {
        let mut l = OptionList::new();
        for o in opts {
            l.push(*o)?;
        }
        Ok(l)
    }

    /// Append an option; [`Error::Malformed`] if the list would take more than 40 bytes.
    pub fn push(&mut self, opt: TcpOption<'a>) -> Result<()> {
        if self.bytes_len() + opt.buffer_len() > MAX_OPTIONS_LEN {
            return Err(Error::Malformed);
        }
        self.opts[usize::from(self.len)] = opt;
        self.len += 1;
        Ok(())
    }

    /// The options.
    pub fn as_slice(&self) -> &[TcpOption<'a>] {
        &self.opts[..usize::from(self.len)]
    }

    /// Bytes the options take, before padding.
    pub fn bytes_len(&self) -> usize {
        self.as_slice().iter().map(TcpOption::buffer_len).sum()
    }

    /// Bytes the option area takes: padded to a multiple of 4.
    pub fn padded_len(&self) -> usize {
        self.bytes_len().next_multiple_of(4)
    }

    /// The MSS option's value, if any.
    pub fn mss(&self) -> Option<u16> {
        self.as_slice().iter().find_map(|o| match o {
            TcpOption::MaxSegmentSize(m) => Some(*m),
            _ => None,
        })
    }

    /// Write the options into `buf` (at least [`OptionList::padded_len`] bytes), zero-padded to
    /// that length (zero is End of Option List).
    pub fn emit(&self, buf: &mut [u8]) {
        let mut at = 0;
        for o in self.as_slice() {
            let n = o.buffer_len();
            o.emit(&mut buf[at..at + n]);
            at += n;
        }
        buf[at..self.padded_len()].fill(0);
    }
}

impl Default for OptionList<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for OptionList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for OptionList<'_> {}

impl fmt::Debug for OptionList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The TCP header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number.
    pub ack_number: u32,
    /// Flags (nine bits).
    pub flags: Flags,
    /// Window.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Options in wire order.
    pub options: OptionList<'a>,
    /// Payload length.
    pub payload_len: usize,
}

impl<'a> Repr<'a> {
    /// Read the header and options from a view (checked as [`Packet::check_len`] does; any
    /// malformed option is an error). The checksum is not verified here: that needs the IP
    /// addresses (`verify_checksum_v4` / `_v6`).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let buf: &'a T = packet.buffer;
        let buf: &'a [u8] = buf.as_ref();
        let view = Packet::new_unchecked(buf);
        let mut options = OptionList::new();
        for o in TcpOptions::new(&buf[field::OPTIONS..view.header_len()]) {
            // Cannot overflow: the options came out of a ≤ 40-byte area.
            options.push(o?)?;
        }
        Ok(Repr {
            src_port: view.src_port(),
            dst_port: view.dst_port(),
            seq_number: view.seq_number(),
            ack_number: view.ack_number(),
            flags: view.flags(),
            window_len: view.window_len(),
            urgent_at: view.urgent_at(),
            options,
            payload_len: view.payload().len(),
        })
    }

    /// Header length: 20 plus the padded options.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.padded_len()
    }

    /// Bytes the segment takes: header and payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Write header and options into the view, checksum 0. Then write the payload and call
    /// `fill_checksum_*`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_header_len(self.header_len());
        packet.set_flags(self.flags);
        packet.set_window_len(self.window_len);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent_at);
        self.options.emit(packet.options_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// The SYN of an iperf3 control connection over IPv4, made by
    /// `testdata/capture_routed.sh 'iperf3 -c 10.98.0.2 -n 1K' tcp` (saved in
    /// `testdata/captures/tcp_v4_iperf3.txt`, packet 0; IPv4 header, then TCP). tcpdump: seq
    /// 2184052574, win 64240, options [mss 1460,sackOK,TS val 2377585412 ecr 0,nop,wscale 10],
    /// cksum 0x2425 (correct).
    const SYN4: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x84, 0xfa, 0x40, 0x00, 0x40, 0x06, 0xa0, 0xfa, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x62, 0x00, 0x02, 0xdd, 0x86, 0x14, 0x51, 0x82, 0x2d, 0xff, 0x5e, 0x00, 0x00,
        0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0x24, 0x25, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04,
        0x02, 0x08, 0x0a, 0x8d, 0xb7, 0x13, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a,
    ];

    /// The first data segment of the same connection (packet 3): [P.], 37 bytes of iperf3
    /// cookie, options [nop,nop,TS val 2377585413 ecr 979069485].
    const DATA4: [u8; 89] = [
        0x45, 0x00, 0x00, 0x59, 0x84, 0xfc, 0x40, 0x00, 0x40, 0x06, 0xa0, 0xdb, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x62, 0x00, 0x02, 0xdd, 0x86, 0x14, 0x51, 0x82, 0x2d, 0xff, 0x5f, 0xb4, 0xbf,
        0xb6, 0x06, 0x80, 0x18, 0x00, 0x3f, 0xd2, 0x33, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x8d,
        0xb7, 0x13, 0x05, 0x3a, 0x5b, 0x6a, 0x2d, 0x74, 0x63, 0x76, 0x77, 0x77, 0x69, 0x74, 0x7a,
        0x63, 0x36, 0x6a, 0x62, 0x76, 0x78, 0x6f, 0x37, 0x63, 0x62, 0x71, 0x68, 0x61, 0x61, 0x77,
        0x70, 0x69, 0x62, 0x32, 0x34, 0x78, 0x65, 0x70, 0x66, 0x78, 0x74, 0x37, 0x6a, 0x00,
    ];

    /// The SYN of the same test over IPv6, `testdata/capture_routed.sh 'iperf3 -6 -c
    /// fd00:98::2 -n 1K' tcp` (`testdata/captures/tcp_v6_iperf3.txt`, packet 0; IPv6 header,
    /// then TCP): mss 1440, cksum 0xd44f (correct).
    const SYN6: [u8; 80] = [
        0x60, 0x0c, 0x79, 0x66, 0x00, 0x28, 0x06, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xae, 0x9e, 0x14, 0x51, 0xc1,
        0x16, 0xa2, 0xf7, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfd, 0x20, 0xd4, 0x4f, 0x00, 0x00,
        0x02, 0x04, 0x05, 0xa0, 0x04, 0x02, 0x08, 0x0a, 0x77, 0x1d, 0xdd, 0x4f, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x0a,
    ];

    const SRC4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const DST4: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 2);

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn syn4_repr() -> Repr<'static> {
        Repr {
            src_port: 56710,
            dst_port: 5201,
            seq_number: 2184052574,
            ack_number: 0,
            flags: Flags::SYN,
            window_len: 64240,
            urgent_at: 0,
            options: OptionList::from_options(&[
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps {
                    tsval: 2377585412,
                    tsecr: 0,
                },
                TcpOption::NoOperation,
                TcpOption::WindowScale(10),
            ])
            .unwrap(),
            payload_len: 0,
        }
    }

    #[test]
    fn parse_golden_syn() {
        let p = Packet::new_checked(&SYN4[20..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), syn4_repr());
        assert_eq!(
            (p.header_len(), p.data_offset(), p.checksum()),
            (40, 10, 0x2425)
        );
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst() && !p.psh() && !p.urg());
        assert!(!p.ece() && !p.cwr() && !p.ns());
        assert!(p.verify_checksum_v4(SRC4, DST4));
        assert!(!p.verify_checksum_v4(SRC4, Ipv4Addr::new(10, 98, 0, 3)));
        assert_eq!(Repr::parse(&p).unwrap().options.mss(), Some(1460));
    }

    #[test]
    fn emit_golden_syn() {
        let r = syn4_repr();
        assert_eq!(r.buffer_len(), 40);
        let mut buf = [0xffu8; 40];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut p);
        p.fill_checksum_v4(SRC4, DST4);
        assert_eq!(buf, SYN4[20..]);
    }

    #[test]
    fn golden_data_segment() {
        let p = Packet::new_checked(&DATA4[20..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.flags, Flags::PSH | Flags::ACK);
        assert_eq!(
            (r.seq_number, r.ack_number, r.window_len),
            (0x822d_ff5f, 0xb4bf_b606, 63)
        );
        assert_eq!(
            r.options.as_slice(),
            [
                TcpOption::NoOperation,
                TcpOption::NoOperation,
                TcpOption::Timestamps {
                    tsval: 2377585413,
                    tsecr: 979069485
                }
            ]
        );
        assert_eq!(r.payload_len, 37);
        assert_eq!(p.payload(), &DATA4[52..]);
        assert!(p.verify_checksum_v4(SRC4, DST4));
        let mut buf = [0u8; 69];
        let mut q = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut q);
        q.payload_mut().copy_from_slice(p.payload());
        q.fill_checksum_v4(SRC4, DST4);
        assert_eq!(buf, DATA4[20..]);
        assert_eq!(std::format!("{:?}", r.flags), "Flags(ACK|PSH)");
    }

    #[test]
    fn golden_v6() {
        let p = Packet::new_checked(&SYN6[40..]).unwrap();
        let (s, d) = (v6("fd00:99::1"), v6("fd00:98::2"));
        assert!(p.verify_checksum_v6(s, d));
        assert!(!p.verify_checksum_v6(s, v6("fd00:98::3")));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.options.mss(), Some(1440));
        let mut buf = [0u8; 40];
        let mut q = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut q);
        q.fill_checksum_v6(s, d);
        assert_eq!(buf, SYN6[40..]);
    }

    /// A hand-built option area (not captured: getting Linux to send SACK blocks on a veth
    /// needs loss): NOP, NOP, SACK with two blocks, then an unknown kind 30 (MPTCP) of 4 bytes.
    #[test]
    fn sack_and_unknown() {
        let opts = [
            1, 1, 5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 9, 30, 4, 0xab, 0xcd,
        ];
        let v: Vec<_> = TcpOptions::new(&opts).map(Result::unwrap).collect();
        assert_eq!(v.len(), 4);
        let TcpOption::Sack(b) = v[2] else {
            panic!("{:?}", v[2])
        };
        assert_eq!(b.iter().collect::<Vec<_>>(), [(1, 2), (5, 9)]);
        assert_eq!(
            v[3],
            TcpOption::Unknown {
                kind: 30,
                data: &[0xab, 0xcd]
            }
        );
        let list = OptionList::from_options(&v).unwrap();
        assert_eq!(list.padded_len(), 24);
        let mut out = [0xffu8; 24];
        list.emit(&mut out);
        assert_eq!(out, opts);
    }

    #[test]
    fn end_of_list_and_padding() {
        // MSS, EOL, then garbage: EOL ends the list; re-emission pads with zeros.
        let opts = [2, 4, 0x05, 0xb4, 0, 0xee, 0xee, 0xee];
        let v: Vec<_> = TcpOptions::new(&opts).collect();
        assert_eq!(
            v,
            [
                Ok(TcpOption::MaxSegmentSize(1460)),
                Ok(TcpOption::EndOfList)
            ]
        );
        let list =
            OptionList::from_options(&[TcpOption::MaxSegmentSize(1460), TcpOption::EndOfList])
                .unwrap();
        assert_eq!(list.padded_len(), 8);
        let mut out = [0xffu8; 8];
        list.emit(&mut out);
        assert_eq!(out, [2, 4, 0x05, 0xb4, 0, 0, 0, 0]);
    }

    #[test]
    fn malformed_options() {
        for bad in [
            &[2u8][..],                // length byte missing
            &[2, 1, 0, 0],             // length < 2
            &[2, 0],                   // length 0 (would loop forever if trusted)
            &[8, 10, 0, 0],            // runs past the area
            &[2, 3, 0],                // MSS of the wrong length
            &[3, 4, 0, 0],             // window scale of the wrong length
            &[4, 3, 0],                // SACK-permitted of the wrong length
            &[8, 8, 0, 0, 0, 0, 0, 0], // timestamps of the wrong length
            &[5, 2],                   // SACK without blocks
            &[5, 6, 0, 0, 0, 0],       // SACK with half a block
        ] {
            let v: Vec<_> = TcpOptions::new(bad).collect();
            assert_eq!(v.last(), Some(&Err(Error::Malformed)), "{bad:?}");
            assert_eq!(v.iter().filter(|r| r.is_err()).count(), 1);
        }
        // …and Repr::parse refuses a header carrying one.
        let mut seg = SYN4;
        seg[20 + 21] = 3; // MSS length 4 → 3
        let p = Packet::new_checked(&seg[20..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn option_list_capacity() {
        let mut l = OptionList::new();
        for _ in 0..MAX_OPTIONS {
            l.push(TcpOption::NoOperation).unwrap();
        }
        assert_eq!(l.push(TcpOption::NoOperation), Err(Error::Malformed));
        // 40 NOPs parse (the most entries a header can have).
        let mut seg = [1u8; 60];
        seg[..20].fill(0);
        seg[12] = 0xf0;
        let r = Repr::parse(&Packet::new_checked(&seg[..]).unwrap()).unwrap();
        assert_eq!(r.options.as_slice().len(), 40);
        assert_eq!(
            OptionList::from_options(&[TcpOption::Timestamps { tsval: 0, tsecr: 0 }; 5]),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn header_errors() {
        let seg = &SYN4[20..];
        for n in 0..20 {
            assert_eq!(
                Packet::new_checked(&seg[..n]).unwrap_err(),
                Error::Truncated
            );
        }
        // Data offset 10 words, buffer shorter.
        for n in 20..40 {
            assert_eq!(
                Packet::new_checked(&seg[..n]).unwrap_err(),
                Error::BadHeaderLen
            );
        }
        for off in 0..5u8 {
            let mut b = [0u8; 40];
            b.copy_from_slice(seg);
            b[12] = off << 4;
            assert_eq!(
                Packet::new_checked(&b[..]).unwrap_err(),
                Error::BadHeaderLen
            );
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
                Error::BadHeaderLen
            );
        }
    }

    #[test]
    fn flag_setters() {
        let mut buf = [0u8; 40];
        buf.copy_from_slice(&SYN4[20..]);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_flags(Flags::ALL);
        assert!(
            p.ns()
                && p.cwr()
                && p.ece()
                && p.urg()
                && p.ack()
                && p.psh()
                && p.rst()
                && p.syn()
                && p.fin()
        );
        assert_eq!(p.header_len(), 40, "data offset untouched");
        p.set_flags(Flags::NS | Flags::FIN);
        assert_eq!(p.flags(), Flags(0x101));
        p.set_header_len(20);
        assert_eq!((p.header_len(), p.flags()), (20, Flags(0x101)));
    }

    /// Rewriting an address and updating incrementally gives what a full recomputation gives.
    #[test]
    fn incremental_update_matches_full() {
        use proptest::prelude::*;
        proptest!(|(s4 in any::<u32>(), d4 in any::<u32>(), n4 in any::<u32>(),
                    s6 in any::<u128>(), d6 in any::<u128>(), n6 in any::<u128>(),
                    payload in proptest::collection::vec(any::<u8>(), 0..40), which in any::<bool>())| {
            let mut buf = std::vec![0u8; 40 + payload.len()];
            buf[..40].copy_from_slice(&SYN4[20..]);
            buf[40..].copy_from_slice(&payload);
            let mut p = Packet::new_checked(&mut buf[..]).unwrap();

            let (s, d, n) = (Ipv4Addr::from_bits(s4), Ipv4Addr::from_bits(d4), Ipv4Addr::from_bits(n4));
            p.fill_checksum_v4(s, d);
            p.update_checksum_for_addr_v4(if which { s } else { d }, n);
            let inc = p.checksum();
            let (s2, d2) = if which { (n, d) } else { (s, n) };
            prop_assert!(p.verify_checksum_v4(s2, d2));
            p.fill_checksum_v4(s2, d2);
            prop_assert_eq!(inc, p.checksum());

            let (s, d, n) = (Ipv6Addr::from_bits(s6), Ipv6Addr::from_bits(d6), Ipv6Addr::from_bits(n6));
            p.fill_checksum_v6(s, d);
            p.update_checksum_for_addr_v6(if which { s } else { d }, n);
            let inc = p.checksum();
            let (s2, d2) = if which { (n, d) } else { (s, n) };
            prop_assert!(p.verify_checksum_v6(s2, d2));
            p.fill_checksum_v6(s2, d2);
            prop_assert_eq!(inc, p.checksum());
        });
    }

    /// Any bytes: the option iterator ends, with at most one error, and Repr::parse → emit →
    /// parse is the identity.
    #[test]
    fn options_terminate_and_round_trip() {
        use proptest::prelude::*;
        proptest!(|(opts in proptest::collection::vec(any::<u8>(), 0..=40), payload in 0usize..16)| {
            let errs = TcpOptions::new(&opts).filter(|r| r.is_err()).count();
            prop_assert!(errs <= 1);
            prop_assert!(TcpOptions::new(&opts).count() <= opts.len());
            let hl = 20 + opts.len().next_multiple_of(4);
            let mut seg = std::vec![0u8; hl + payload];
            seg[12] = ((hl / 4) as u8) << 4;
            seg[20..20 + opts.len()].copy_from_slice(&opts);
            if let Ok(r) = Repr::parse(&Packet::new_checked(&seg[..]).unwrap()) {
                let mut out = std::vec![0u8; r.buffer_len()];
                r.emit(&mut Packet::new_unchecked(&mut out[..]));
                prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()), Ok(r));
            }
        });
    }
}
