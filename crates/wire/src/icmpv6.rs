//! ICMPv6 (RFC 4443) and the Neighbor Discovery messages (RFC 4861) a router sends and answers.
//!
//! **The view is total.** `check_len` requires the 8-byte header every ICMPv6 message has, plus
//! the fixed part of the message types that have a longer one (Neighbor Solicitation and
//! Advertisement: 24 bytes, Router Advertisement: 16, Redirect: 40, MLD: 24). Type-specific
//! getters that reach beyond 8 bytes ([`Packet::target_addr`], the RA fields) read zeros rather
//! than panic when asked on a message of another type that is too short for them, so that no
//! getter panics on any checked view whatever its type — the guarantee the whole crate makes.
//!
//! **Checksums are the caller's step, not the `Repr`'s.** The checksum covers an IPv6 pseudo
//! header, so verifying it needs the addresses; [`Packet::verify_checksum`] takes them, and
//! [`Repr::parse`] does not (so that the data plane can verify once on the view and count a
//! `BadChecksum` drop before it bothers to parse). Likewise [`Repr::emit`] leaves the field
//! zero and [`Packet::fill_checksum`] fills it. The builders ([`emit_packet`], [`emit_error`],
//! [`emit_neighbor_solicit`], [`emit_neighbor_advert`]) do the whole IPv6 packet, checksum
//! included, because that is what a router actually needs to send.
//!
//! **Error messages carry as much of the invoking packet as fits in 1280 bytes** (RFC 4443
//! §2.4(c)): [`Repr::error`] clips the invoking bytes to [`MAX_INVOKING_LEN`]. Whether an error
//! may be sent at all (not about an error, not to a multicast destination, …, §2.4(e)) is
//! checked by [`error_permitted`]; rate limiting is the caller's.
//!
//! **Neighbor Discovery validity** (RFC 4861 §6.1, §7.1) is split by who can check it.
//! [`Repr::parse`] checks what is in the message: code 0 ([`Error::Unrecognized`] otherwise),
//! the minimum length ([`Error::Truncated`]), a target that is not multicast and options of
//! non-zero length ([`Error::Malformed`]). What needs the IPv6 header — hop limit 255
//! ([`NDP_HOP_LIMIT`]: proof that the packet was not forwarded), an unspecified source only
//! with no link-layer option, a Solicited flag only on a unicast reply, a link-local RA source
//! — is [`Repr::check_ndp`], which the caller runs with the IPv6 header it parsed. The
//! checksum, as above, is the caller's too.
//!
//! Types the [`Repr`] does not model (MLD, Redirect, Node Information, unknown types) parse as
//! [`Error::Unrecognized`]; the view still reads them (MLD is punted to the control plane by
//! type, via [`crate::ipv6::Packet::router_alert`]).

use core::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::EthernetAddress;
use crate::ip::Protocol;
use crate::ipv6::{self, MIN_MTU};
use crate::{Error, Result};

mod ndp;

pub use ndp::{NdpOption, NdpOptions, NeighborFlags, PrefixFlags, PrefixInfo, RouterFlags};

/// An ICMPv6 message type. A newtype so that unknown types survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Message(pub u8);

impl Message {
    /// Destination Unreachable
    pub const DST_UNREACHABLE: Message = Message(1);
    /// Packet Too Big
    pub const PACKET_TOO_BIG: Message = Message(2);
    /// Time Exceeded
    pub const TIME_EXCEEDED: Message = Message(3);
    /// Parameter Problem
    pub const PARAM_PROBLEM: Message = Message(4);
    /// Echo Request
    pub const ECHO_REQUEST: Message = Message(128);
    /// Echo Reply
    pub const ECHO_REPLY: Message = Message(129);
    /// Multicast Listener Query (RFC 2710 / 3810)
    pub const MLD_QUERY: Message = Message(130);
    /// Multicast Listener Report, version 1 (RFC 2710)
    pub const MLD_REPORT: Message = Message(131);
    /// Multicast Listener Done (RFC 2710)
    pub const MLD_DONE: Message = Message(132);
    /// Router Solicitation
    pub const ROUTER_SOLICIT: Message = Message(133);
    /// Router Advertisement
    pub const ROUTER_ADVERT: Message = Message(134);
    /// Neighbor Solicitation
    pub const NEIGHBOR_SOLICIT: Message = Message(135);
    /// Neighbor Advertisement
    pub const NEIGHBOR_ADVERT: Message = Message(136);
    /// Redirect
    pub const REDIRECT: Message = Message(137);
    /// Multicast Listener Report, version 2 (RFC 3810)
    pub const MLDV2_REPORT: Message = Message(143);

    /// An error message (types 0–127).
    pub const fn is_error(self) -> bool {
        self.0 < 128
    }

    /// The fixed length of this type's message: what `check_len` requires.
    const fn min_len(self) -> usize {
        match self.0 {
            135 | 136 | 130..=132 => 24,
            134 => 16,
            137 => 40,
            _ => HEADER_LEN,
        }
    }

    /// Where the ND options start, for the ND message types.
    const fn ndp_options_offset(self) -> Option<usize> {
        match self.0 {
            133 => Some(8),
            134 => Some(16),
            135 | 136 => Some(24),
            137 => Some(40),
            _ => None,
        }
    }
}

/// Destination Unreachable codes. A newtype: unknown codes survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnreachableCode(pub u8);

impl UnreachableCode {
    /// No route to destination
    pub const NO_ROUTE: UnreachableCode = UnreachableCode(0);
    /// Communication administratively prohibited
    pub const ADMIN_PROHIBITED: UnreachableCode = UnreachableCode(1);
    /// Beyond scope of source address
    pub const BEYOND_SCOPE: UnreachableCode = UnreachableCode(2);
    /// Address unreachable
    pub const ADDR_UNREACHABLE: UnreachableCode = UnreachableCode(3);
    /// Port unreachable
    pub const PORT_UNREACHABLE: UnreachableCode = UnreachableCode(4);
    /// Source address failed ingress/egress policy
    pub const FAILED_POLICY: UnreachableCode = UnreachableCode(5);
    /// Reject route to destination
    pub const REJECT_ROUTE: UnreachableCode = UnreachableCode(6);
}

/// Time Exceeded codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeExceededCode(pub u8);

impl TimeExceededCode {
    /// Hop limit exceeded in transit
    pub const HOP_LIMIT: TimeExceededCode = TimeExceededCode(0);
    /// Fragment reassembly time exceeded
    pub const FRAG_REASSEMBLY: TimeExceededCode = TimeExceededCode(1);
}

/// Parameter Problem codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParamProblemCode(pub u8);

impl ParamProblemCode {
    /// Erroneous header field encountered
    pub const HEADER_FIELD: ParamProblemCode = ParamProblemCode(0);
    /// Unrecognized Next Header type encountered
    pub const UNRECOGNIZED_NEXT_HEADER: ParamProblemCode = ParamProblemCode(1);
    /// Unrecognized IPv6 option encountered
    pub const UNRECOGNIZED_OPTION: ParamProblemCode = ParamProblemCode(2);
    /// IPv6 first fragment has incomplete IPv6 header chain (RFC 7112)
    pub const INCOMPLETE_CHAIN: ParamProblemCode = ParamProblemCode(3);
}

mod field {
    use core::ops::Range;
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Range<usize> = 2..4;
    /// The second word: identifier + sequence (echo), MTU, pointer, ND flags, unused.
    pub(super) const WORD: Range<usize> = 4..8;
    /// Echo identifier.
    pub(super) const ECHO_IDENT: usize = 4;
    /// Echo sequence number.
    pub(super) const ECHO_SEQ: usize = 6;
    /// RA: current hop limit, flags, router lifetime.
    pub(super) const RA_HOP_LIMIT: usize = 4;
    pub(super) const RA_FLAGS: usize = 5;
    pub(super) const RA_LIFETIME: usize = 6;
    pub(super) const RA_REACHABLE: usize = 8;
    pub(super) const RA_RETRANS: usize = 12;
    /// NS / NA / Redirect target address.
    pub(super) const TARGET: usize = 8;
    /// Message body after the 8-byte header (invoking packet, echo data, ND body).
    pub(super) const BODY: usize = 8;
}

/// Length of the ICMPv6 header every message has: type, code, checksum and one more word.
pub const HEADER_LEN: usize = 8;

/// Hop limit every Neighbor Discovery message is sent with and must be received with
/// (RFC 4861): a packet with 255 cannot have crossed a router. Checked by [`Repr::check_ndp`].
pub const NDP_HOP_LIMIT: u8 = 255;

/// The most invoking-packet bytes an ICMPv6 error carries: what fits in [`MIN_MTU`] after a
/// 40-byte IPv6 header and the 8-byte ICMPv6 header (RFC 4443 §2.4(c)).
pub const MAX_INVOKING_LEN: usize = MIN_MTU - ipv6::HEADER_LEN - HEADER_LEN;

/// A view of an ICMPv6 message. The buffer is the message exactly (the IPv6 payload after any
/// extension headers): the checksum covers all of it.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking it: for buffers the caller sized itself.
    /// Getters on a buffer shorter than 8 bytes panic.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] unless the buffer holds the 8-byte header and the fixed part of its
    /// message type (24 bytes for NS/NA/MLD, 16 for RA, 40 for Redirect).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.msg_type().min_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> Message {
        Message(self.buffer.as_ref()[field::TYPE])
    }

    /// Code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM.start)
    }

    /// Echo identifier (Echo Request/Reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        self.read_u16(field::ECHO_IDENT)
    }

    /// Echo sequence number (Echo Request/Reply).
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        self.read_u16(field::ECHO_SEQ)
    }

    /// MTU (Packet Too Big), Pointer (Parameter Problem): the second word.
    #[inline]
    pub fn word(&self) -> u32 {
        self.read_u32(field::WORD.start)
    }

    /// MTU of a Packet Too Big.
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.word()
    }

    /// Pointer of a Parameter Problem: the offset in the invoking packet of the problem.
    #[inline]
    pub fn pointer(&self) -> u32 {
        self.word()
    }

    /// Flags of a Neighbor Advertisement (the top three bits of the second word).
    #[inline]
    pub fn neighbor_flags(&self) -> NeighborFlags {
        NeighborFlags(self.buffer.as_ref()[field::WORD.start] & 0xe0)
    }

    /// Target Address of an NS, NA or Redirect (unspecified if the message is too short).
    #[inline]
    pub fn target_addr(&self) -> Ipv6Addr {
        match self.buffer.as_ref().get(field::TARGET..field::TARGET + 16) {
            Some(b) => {
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                Ipv6Addr::from(a)
            }
            None => Ipv6Addr::UNSPECIFIED,
        }
    }

    /// Cur Hop Limit of a Router Advertisement.
    #[inline]
    pub fn ra_hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::RA_HOP_LIMIT]
    }

    /// Flags of a Router Advertisement.
    #[inline]
    pub fn router_flags(&self) -> RouterFlags {
        RouterFlags(self.buffer.as_ref()[field::RA_FLAGS])
    }

    /// Router Lifetime of a Router Advertisement, in seconds.
    #[inline]
    pub fn router_lifetime(&self) -> u16 {
        self.read_u16(field::RA_LIFETIME)
    }

    /// Reachable Time of a Router Advertisement, in ms (0 if the message is too short).
    #[inline]
    pub fn reachable_time(&self) -> u32 {
        self.read_u32(field::RA_REACHABLE)
    }

    /// Retrans Timer of a Router Advertisement, in ms (0 if the message is too short).
    #[inline]
    pub fn retrans_time(&self) -> u32 {
        self.read_u32(field::RA_RETRANS)
    }

    /// Everything after the 8-byte header: the invoking packet of an error, the data of an
    /// echo, the body of an ND message.
    #[inline]
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::BODY..]
    }

    /// The options area of an ND message (empty for other types).
    pub fn ndp_options(&self) -> &[u8] {
        match self.msg_type().ndp_options_offset() {
            Some(off) => self.buffer.as_ref().get(off..).unwrap_or(&[]),
            None => &[],
        }
    }

    /// Iterate over the options of an ND message.
    pub fn ndp_options_iter(&self) -> NdpOptions<'_> {
        NdpOptions::new(self.ndp_options())
    }

    /// Whether the checksum verifies against `pseudo_sum`
    /// ([`checksum::pseudo_header_v6`] with next header 58 and the message length).
    pub fn verify_checksum_with(&self, pseudo_sum: u16) -> bool {
        checksum::combine(&[pseudo_sum, checksum::data(self.buffer.as_ref())]) == 0xffff
    }

    /// Whether the checksum verifies for a message from `src` to `dst` (with a Routing header,
    /// `dst` is the final destination, RFC 8200 §8.1).
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.verify_checksum_with(pseudo_header(src, dst, self.buffer.as_ref().len()))
    }

    #[inline]
    fn read_u16(&self, at: usize) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    /// Reads zero beyond the buffer (see the module docs).
    #[inline]
    fn read_u32(&self, at: usize) -> u32 {
        match self.buffer.as_ref().get(at..at + 4) {
            Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            None => 0,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the message type.
    #[inline]
    pub fn set_msg_type(&mut self, t: Message) {
        self.buffer.as_mut()[field::TYPE] = t.0
    }

    /// Set the code.
    #[inline]
    pub fn set_msg_code(&mut self, code: u8) {
        self.buffer.as_mut()[field::CODE] = code
    }

    /// Set the Checksum field as is.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&c.to_be_bytes())
    }

    /// Set the second word (MTU, pointer, echo identifier + sequence, ND flags + reserved).
    #[inline]
    pub fn set_word(&mut self, w: u32) {
        self.buffer.as_mut()[field::WORD].copy_from_slice(&w.to_be_bytes())
    }

    /// Set the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, id: u16) {
        self.buffer.as_mut()[field::ECHO_IDENT..field::ECHO_IDENT + 2]
            .copy_from_slice(&id.to_be_bytes())
    }

    /// Set the echo sequence number.
    #[inline]
    pub fn set_echo_seq_no(&mut self, seq: u16) {
        self.buffer.as_mut()[field::ECHO_SEQ..field::ECHO_SEQ + 2]
            .copy_from_slice(&seq.to_be_bytes())
    }

    /// Set the target address (NS/NA/Redirect; the buffer must hold 24 bytes).
    #[inline]
    pub fn set_target_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET..field::TARGET + 16].copy_from_slice(&addr.octets())
    }

    /// Everything after the 8-byte header, writable.
    #[inline]
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY..]
    }

    /// Compute and set the checksum given the pseudo-header sum.
    pub fn fill_checksum_with(&mut self, pseudo_sum: u16) {
        self.set_checksum(0);
        let c = !checksum::combine(&[pseudo_sum, checksum::data(self.buffer.as_ref())]);
        self.set_checksum(c);
    }

    /// Compute and set the checksum for a message from `src` to `dst`.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let len = self.buffer.as_ref().len();
        self.fill_checksum_with(pseudo_header(src, dst, len))
    }
}

/// The IPv6 pseudo-header sum for an ICMPv6 message of `len` bytes.
pub fn pseudo_header(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> u16 {
    checksum::pseudo_header_v6(src, dst, Protocol::ICMPV6.0, len as u32)
}

/// The kinds of error message, for [`Repr::error`] and [`emit_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorMessage {
    /// Destination Unreachable with a code.
    DstUnreachable(UnreachableCode),
    /// Packet Too Big with the MTU of the next hop.
    PacketTooBig {
        /// The MTU of the link the packet did not fit.
        mtu: u32,
    },
    /// Time Exceeded with a code.
    TimeExceeded(TimeExceededCode),
    /// Parameter Problem with a code and a pointer into the invoking packet.
    ParamProblem {
        /// The code.
        code: ParamProblemCode,
        /// Offset of the offending byte in the invoking packet.
        pointer: u32,
    },
}

/// An ICMPv6 message as a value (the types a router sends or answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr<'a> {
    /// Destination Unreachable.
    DstUnreachable {
        /// Code.
        code: UnreachableCode,
        /// As much of the invoking packet as the message holds.
        invoking: &'a [u8],
    },
    /// Packet Too Big.
    PacketTooBig {
        /// MTU of the next-hop link.
        mtu: u32,
        /// As much of the invoking packet as the message holds.
        invoking: &'a [u8],
    },
    /// Time Exceeded.
    TimeExceeded {
        /// Code.
        code: TimeExceededCode,
        /// As much of the invoking packet as the message holds.
        invoking: &'a [u8],
    },
    /// Parameter Problem.
    ParamProblem {
        /// Code.
        code: ParamProblemCode,
        /// Offset of the problem in the invoking packet.
        pointer: u32,
        /// As much of the invoking packet as the message holds.
        invoking: &'a [u8],
    },
    /// Echo Request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo Reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Router Solicitation. Options other than the source link-layer address are not kept.
    RouterSolicit {
        /// Source Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Router Advertisement. The options are kept raw (validated); iterate them with
    /// [`NdpOptions`] — an RA may carry several prefixes, which a fixed struct would lose.
    RouterAdvert {
        /// Cur Hop Limit.
        hop_limit: u8,
        /// Flags byte.
        flags: RouterFlags,
        /// Router Lifetime, seconds.
        router_lifetime: u16,
        /// Reachable Time, ms.
        reachable_time: u32,
        /// Retrans Timer, ms.
        retrans_time: u32,
        /// The options area.
        options: &'a [u8],
    },
    /// Neighbor Solicitation. Options other than the source link-layer address (a DAD nonce,
    /// say) are not kept.
    NeighborSolicit {
        /// Target Address.
        target: Ipv6Addr,
        /// Source Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor Advertisement. Options other than the target link-layer address are not kept.
    NeighborAdvert {
        /// R, S, O flags.
        flags: NeighborFlags,
        /// Target Address.
        target: Ipv6Addr,
        /// Target Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
}

impl<'a> Repr<'a> {
    /// Read a message from a view (checked as [`Packet::check_len`] does), with the ND checks
    /// that need only the message (see the module docs). The checksum is not verified here.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let buf: &'a T = packet.buffer;
        let buf: &'a [u8] = buf.as_ref();
        let p = Packet::new_unchecked(buf);
        let body = &buf[field::BODY..];
        let code = p.msg_code();
        let ndp_options = match p.msg_type().ndp_options_offset() {
            Some(off) => &buf[off..],
            None => &[],
        };
        let needs_code_zero = |r: Repr<'a>| {
            if code == 0 {
                Ok(r)
            } else {
                Err(Error::Unrecognized)
            }
        };
        match p.msg_type() {
            Message::DST_UNREACHABLE => Ok(Repr::DstUnreachable {
                code: UnreachableCode(code),
                invoking: body,
            }),
            Message::PACKET_TOO_BIG => Ok(Repr::PacketTooBig {
                mtu: p.mtu(),
                invoking: body,
            }),
            Message::TIME_EXCEEDED => Ok(Repr::TimeExceeded {
                code: TimeExceededCode(code),
                invoking: body,
            }),
            Message::PARAM_PROBLEM => Ok(Repr::ParamProblem {
                code: ParamProblemCode(code),
                pointer: p.pointer(),
                invoking: body,
            }),
            Message::ECHO_REQUEST => needs_code_zero(Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data: body,
            }),
            Message::ECHO_REPLY => needs_code_zero(Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data: body,
            }),
            Message::ROUTER_SOLICIT => {
                let lladdr = ndp::scan(ndp_options, true)?;
                needs_code_zero(Repr::RouterSolicit { lladdr })
            }
            Message::ROUTER_ADVERT => {
                ndp::scan(ndp_options, true)?;
                needs_code_zero(Repr::RouterAdvert {
                    hop_limit: p.ra_hop_limit(),
                    flags: p.router_flags(),
                    router_lifetime: p.router_lifetime(),
                    reachable_time: p.reachable_time(),
                    retrans_time: p.retrans_time(),
                    options: ndp_options,
                })
            }
            Message::NEIGHBOR_SOLICIT => {
                let target = p.target_addr();
                if target.is_multicast() {
                    return Err(Error::Malformed);
                }
                let lladdr = ndp::scan(ndp_options, true)?;
                needs_code_zero(Repr::NeighborSolicit { target, lladdr })
            }
            Message::NEIGHBOR_ADVERT => {
                let target = p.target_addr();
                if target.is_multicast() {
                    return Err(Error::Malformed);
                }
                let lladdr = ndp::scan(ndp_options, false)?;
                needs_code_zero(Repr::NeighborAdvert {
                    flags: p.neighbor_flags(),
                    target,
                    lladdr,
                })
            }
            _ => Err(Error::Unrecognized),
        }
    }

    /// An error message about `invoking` (the offending IPv6 packet from its fixed header on,
    /// without link-layer padding), clipped to [`MAX_INVOKING_LEN`] bytes.
    pub fn error(kind: ErrorMessage, invoking: &'a [u8]) -> Repr<'a> {
        let invoking = &invoking[..invoking.len().min(MAX_INVOKING_LEN)];
        match kind {
            ErrorMessage::DstUnreachable(code) => Repr::DstUnreachable { code, invoking },
            ErrorMessage::PacketTooBig { mtu } => Repr::PacketTooBig { mtu, invoking },
            ErrorMessage::TimeExceeded(code) => Repr::TimeExceeded { code, invoking },
            ErrorMessage::ParamProblem { code, pointer } => Repr::ParamProblem {
                code,
                pointer,
                invoking,
            },
        }
    }

    /// The message type.
    pub const fn msg_type(&self) -> Message {
        match self {
            Repr::DstUnreachable { .. } => Message::DST_UNREACHABLE,
            Repr::PacketTooBig { .. } => Message::PACKET_TOO_BIG,
            Repr::TimeExceeded { .. } => Message::TIME_EXCEEDED,
            Repr::ParamProblem { .. } => Message::PARAM_PROBLEM,
            Repr::EchoRequest { .. } => Message::ECHO_REQUEST,
            Repr::EchoReply { .. } => Message::ECHO_REPLY,
            Repr::RouterSolicit { .. } => Message::ROUTER_SOLICIT,
            Repr::RouterAdvert { .. } => Message::ROUTER_ADVERT,
            Repr::NeighborSolicit { .. } => Message::NEIGHBOR_SOLICIT,
            Repr::NeighborAdvert { .. } => Message::NEIGHBOR_ADVERT,
        }
    }

    /// Bytes the message takes.
    pub const fn buffer_len(&self) -> usize {
        const fn lladdr_len(l: &Option<EthernetAddress>) -> usize {
            if l.is_some() { 8 } else { 0 }
        }
        match self {
            Repr::DstUnreachable { invoking, .. }
            | Repr::PacketTooBig { invoking, .. }
            | Repr::TimeExceeded { invoking, .. }
            | Repr::ParamProblem { invoking, .. } => HEADER_LEN + invoking.len(),
            Repr::EchoRequest { data, .. } | Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Repr::RouterSolicit { lladdr } => HEADER_LEN + lladdr_len(lladdr),
            Repr::RouterAdvert { options, .. } => 16 + options.len(),
            Repr::NeighborSolicit { lladdr, .. } | Repr::NeighborAdvert { lladdr, .. } => {
                24 + lladdr_len(lladdr)
            }
        }
    }

    /// Write the message into the first [`Repr::buffer_len`] bytes of the view (which must be
    /// exactly that long for the checksum to come out right), checksum 0: call
    /// [`Packet::fill_checksum`] next. Reserved fields are zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_msg_type(self.msg_type());
        packet.set_checksum(0);
        let (code, word) = match *self {
            Repr::DstUnreachable { code, .. } => (code.0, 0),
            Repr::PacketTooBig { mtu, .. } => (0, mtu),
            Repr::TimeExceeded { code, .. } => (code.0, 0),
            Repr::ParamProblem { code, pointer, .. } => (code.0, pointer),
            Repr::EchoRequest { ident, seq_no, .. } | Repr::EchoReply { ident, seq_no, .. } => {
                (0, (u32::from(ident) << 16) | u32::from(seq_no))
            }
            Repr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                ..
            } => (
                0,
                u32::from_be_bytes([hop_limit, flags.0, 0, 0]) | u32::from(router_lifetime),
            ),
            Repr::NeighborAdvert { flags, .. } => (0, u32::from(flags.0 & 0xe0) << 24),
            Repr::RouterSolicit { .. } | Repr::NeighborSolicit { .. } => (0, 0),
        };
        packet.set_msg_code(code);
        packet.set_word(word);
        let body = packet.body_mut();
        match *self {
            Repr::DstUnreachable { invoking, .. }
            | Repr::PacketTooBig { invoking, .. }
            | Repr::TimeExceeded { invoking, .. }
            | Repr::ParamProblem { invoking, .. } => {
                body[..invoking.len()].copy_from_slice(invoking)
            }
            Repr::EchoRequest { data, .. } | Repr::EchoReply { data, .. } => {
                body[..data.len()].copy_from_slice(data)
            }
            Repr::RouterSolicit { lladdr } => {
                if let Some(a) = lladdr {
                    NdpOption::SourceLinkLayerAddr(a).emit(body);
                }
            }
            Repr::RouterAdvert {
                reachable_time,
                retrans_time,
                options,
                ..
            } => {
                body[0..4].copy_from_slice(&reachable_time.to_be_bytes());
                body[4..8].copy_from_slice(&retrans_time.to_be_bytes());
                body[8..8 + options.len()].copy_from_slice(options);
            }
            Repr::NeighborSolicit { target, lladdr } => {
                body[..16].copy_from_slice(&target.octets());
                if let Some(a) = lladdr {
                    NdpOption::SourceLinkLayerAddr(a).emit(&mut body[16..]);
                }
            }
            Repr::NeighborAdvert { target, lladdr, .. } => {
                body[..16].copy_from_slice(&target.octets());
                if let Some(a) = lladdr {
                    NdpOption::TargetLinkLayerAddr(a).emit(&mut body[16..]);
                }
            }
        }
    }

    /// The RFC 4861 validity checks that need the IPv6 header (§6.1.1, §6.1.2, §7.1.1,
    /// §7.1.2), for a message that [`Repr::parse`] accepted and whose checksum verified.
    /// [`Error::Malformed`] if the hop limit is not 255, if an NS or RS from the unspecified
    /// address carries a link-layer option (or the NS is not to a solicited-node address), if an
    /// NA to a multicast address has the Solicited flag, or if an RA's source is not link-local.
    /// Messages that are not ND pass.
    pub fn check_ndp(&self, src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8) -> Result<()> {
        let nd = matches!(
            self,
            Repr::RouterSolicit { .. }
                | Repr::RouterAdvert { .. }
                | Repr::NeighborSolicit { .. }
                | Repr::NeighborAdvert { .. }
        );
        if !nd {
            return Ok(());
        }
        let ok = hop_limit == NDP_HOP_LIMIT
            && match *self {
                Repr::RouterSolicit { lladdr } => !(src.is_unspecified() && lladdr.is_some()),
                Repr::RouterAdvert { .. } => src.is_unicast_link_local(),
                Repr::NeighborSolicit { lladdr, .. } => {
                    !src.is_unspecified() || (lladdr.is_none() && is_solicited_node(dst))
                }
                Repr::NeighborAdvert { flags, .. } => {
                    !(dst.is_multicast() && flags.contains(NeighborFlags::SOLICITED))
                }
                _ => true,
            };
        if ok { Ok(()) } else { Err(Error::Malformed) }
    }
}

/// ff02::1:ff00:0/104
fn is_solicited_node(a: Ipv6Addr) -> bool {
    let s = a.segments();
    s[..5] == [0xff02, 0, 0, 0, 0] && s[5] == 1 && s[6] >> 8 == 0xff
}

/// Whether RFC 4443 §2.4(e) allows sending `kind` about `invoking` (an IPv6 packet from its
/// fixed header on; it may be cut short). Not allowed: about an ICMPv6 error or a Redirect;
/// about a packet to a multicast address, except Packet Too Big and Parameter Problem code 2;
/// about a packet from the unspecified or a multicast address. A packet too short to tell is
/// not answered. Link-layer multicast/broadcast (§2.4(e.4–5)) and rate limiting are the
/// caller's to check.
pub fn error_permitted(invoking: &[u8], kind: ErrorMessage) -> bool {
    if invoking.len() < ipv6::HEADER_LEN || invoking[0] >> 4 != 6 {
        return false;
    }
    let ip = ipv6::Packet::new_unchecked(invoking);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if src.is_unspecified() || src.is_multicast() {
        return false;
    }
    if dst.is_multicast() {
        let exempt = match kind {
            ErrorMessage::PacketTooBig { .. } => true,
            ErrorMessage::ParamProblem { code, .. } => {
                code == ParamProblemCode::UNRECOGNIZED_OPTION
            }
            _ => false,
        };
        if !exempt {
            return false;
        }
    }
    // Is the invoking packet itself an ICMPv6 error or Redirect? Walk to its upper layer
    // within the bytes we have (and not into link-layer padding after them); if the chain is
    // cut or broken we cannot tell that it is, and the packet was bad enough to deserve an
    // error anyway.
    let invoking = &invoking[..invoking.len().min(ip.total_len())];
    match ipv6::ExtHeaders::new(invoking, ip.next_header()).upper_layer() {
        Ok(ul) if ul.protocol == Protocol::ICMPV6 && ul.has_header() => {
            match invoking.get(ul.offset) {
                Some(&t) => !(Message(t).is_error() || Message(t) == Message::REDIRECT),
                None => true,
            }
        }
        _ => true,
    }
}

/// Write a whole IPv6 packet carrying `repr` into `buf`: fixed header (traffic class and flow
/// label 0, no extension headers), message, checksum. Returns the packet length, or
/// [`Error::Truncated`] if `buf` is too short.
pub fn emit_packet(
    buf: &mut [u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    repr: &Repr<'_>,
) -> Result<usize> {
    let icmp_len = repr.buffer_len();
    let total = ipv6::HEADER_LEN + icmp_len;
    if buf.len() < total || icmp_len > usize::from(u16::MAX) {
        return Err(Error::Truncated);
    }
    let (ip_buf, icmp_buf) = buf[..total].split_at_mut(ipv6::HEADER_LEN);
    ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: Protocol::ICMPV6,
        payload_len: icmp_len,
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(ip_buf));
    let mut icmp = Packet::new_unchecked(icmp_buf);
    repr.emit(&mut icmp);
    icmp.fill_checksum(src, dst);
    Ok(total)
}

/// Write an ICMPv6 error about `invoking` from `src` to `dst` (normally the invoking packet's
/// source) into `buf`, carrying as much of `invoking` as fits in both [`MIN_MTU`] and `buf`.
/// Returns the packet length; [`Error::Truncated`] if `buf` cannot hold even the two headers.
/// Whether to send it at all is [`error_permitted`]'s question.
pub fn emit_error(
    buf: &mut [u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    kind: ErrorMessage,
    invoking: &[u8],
) -> Result<usize> {
    let Some(room) = buf
        .len()
        .min(MIN_MTU)
        .checked_sub(ipv6::HEADER_LEN + HEADER_LEN)
    else {
        return Err(Error::Truncated);
    };
    let invoking = &invoking[..invoking.len().min(room)];
    emit_packet(buf, src, dst, hop_limit, &Repr::error(kind, invoking))
}

/// Write a multicast Neighbor Solicitation for `target` (to its solicited-node address, hop
/// limit 255) into `buf`. With `src` unspecified it is a Duplicate Address Detection probe, and
/// `lladdr` is left out as RFC 4861 §4.3 requires. For a unicast probe (neighbor
/// unreachability detection) use [`emit_packet`] with the neighbor's address. Returns the
/// packet length.
pub fn emit_neighbor_solicit(
    buf: &mut [u8],
    src: Ipv6Addr,
    target: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) -> Result<usize> {
    let lladdr = if src.is_unspecified() { None } else { lladdr };
    let repr = Repr::NeighborSolicit { target, lladdr };
    emit_packet(buf, src, ipv6::solicited_node(target), NDP_HOP_LIMIT, &repr)
}

/// Write a Neighbor Advertisement for `target` from `src` to `dst` (the soliciting node, or
/// ff02::1 when answering a DAD probe — then without the Solicited flag), hop limit 255, with
/// our link-layer address `lladdr` as the Target Link-Layer Address option. Returns the packet
/// length.
pub fn emit_neighbor_advert(
    buf: &mut [u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    flags: NeighborFlags,
    lladdr: Option<EthernetAddress>,
) -> Result<usize> {
    let repr = Repr::NeighborAdvert {
        flags,
        target,
        lladdr,
    };
    emit_packet(buf, src, dst, NDP_HOP_LIMIT, &repr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::tests::{ECHO_REQUEST, MLD_REPORT, SRH_ECHO, addr};
    use std::vec::Vec;

    const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0a]);
    const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0b]);

    /// The Echo Reply to `ipv6::tests::ECHO_REQUEST` (same capture,
    /// `testdata/captures/ipv6_ping_ndp.txt`, packet 4).
    const ECHO_REPLY: [u8; 104] = [
        0x60, 0x0b, 0x89, 0x76, 0x00, 0x40, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x81, 0x00, 0xed, 0x7f, 0x1b,
        0x60, 0x00, 0x01, 0x18, 0x66, 0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0x97, 0xc9, 0x09, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a,
        0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
        0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
    ];

    /// Neighbor Solicitation fd00:99::1 → ff02::1:ff00:2 for fd00:99::2 with source link-layer
    /// address 02:00:00:00:00:0a (`testdata/capture.sh 'ping -c1 fd00:99::2' icmp6`, saved in
    /// `testdata/captures/ipv6_ping_ndp.txt`, packet 1).
    const NS: [u8; 72] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x02, 0x87, 0x00, 0x7c, 0x5c, 0x00,
        0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x02, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    /// The answer: Neighbor Advertisement fd00:99::2 → fd00:99::1, flags S|O, target link-layer
    /// address 02:00:00:00:00:0b (same capture, packet 2).
    const NA: [u8; 72] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x00, 0x1a, 0xc6, 0x60,
        0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x02, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b,
    ];

    /// A router's Neighbor Advertisement, flags R|S|O: fd00:99::fe → fd00:99::1 from namespace
    /// r of `testdata/capture_routed.sh` (saved in `testdata/captures/icmpv6_port_unreachable.txt`,
    /// packet 3).
    const NA_ROUTER: [u8; 72] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x00, 0x97, 0xde, 0xe0,
        0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0xfe, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0xfa,
    ];

    /// A Duplicate Address Detection probe for fe80::ff:fe00:a: source ::, no link-layer
    /// option but a nonce option (type 14, RFC 7527), sent when `va` came up
    /// (`testdata/captures/ipv6_ping_ndp.txt`, packet 0).
    const DAD_NS: [u8; 72] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x0a, 0x87, 0x00, 0x4c, 0x10, 0x00,
        0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
        0xfe, 0x00, 0x00, 0x0a, 0x0e, 0x01, 0x27, 0x16, 0x54, 0x7c, 0xa7, 0x67,
    ];

    /// A Router Solicitation from fe80::ff:fe00:a with its link-layer address
    /// (`testdata/captures/ipv6_ping_ndp.txt`, packet 5).
    const RS: [u8; 56] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x10, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x0a, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x85, 0x00, 0x7b, 0x1a, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    /// A Router Advertisement sent by radvd in namespace a (unicast, answering b's RS), made by
    /// `testdata/capture.sh` with the radvd command in `testdata/radvd.conf` (saved in
    /// `testdata/captures/icmpv6_router_advert.txt`, packet 0).
    const RA: [u8; 104] = [
        0x60, 0x09, 0x86, 0xb7, 0x00, 0x40, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x0a, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x0b, 0x86, 0x00, 0xe5, 0x45, 0x40,
        0x00, 0x07, 0x08, 0x00, 0x00, 0x75, 0x30, 0x00, 0x00, 0x03, 0xe8, 0x03, 0x04, 0x40, 0xc0,
        0x00, 0x01, 0x51, 0x80, 0x00, 0x00, 0x38, 0x40, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x00, 0x00,
        0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x05, 0xdc, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    /// A UDP datagram to a closed port, `testdata/capture_routed.sh 'python3
    /// crates/wire/testdata/send.py udp6-closed; sleep 2' 'udp or icmp6'` (saved in
    /// `testdata/captures/icmpv6_port_unreachable.txt`, packet 4) …
    const UDP_TO_CLOSED_PORT: [u8; 66] = [
        0x60, 0x0c, 0x1c, 0x08, 0x00, 0x1a, 0x11, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x84, 0xe5, 0x00, 0x09, 0x00,
        0x1a, 0x04, 0xf4, 0x76, 0x72, 0x68, 0x6f, 0x73, 0x74, 0x20, 0x77, 0x69, 0x72, 0x65, 0x20,
        0x67, 0x6f, 0x6c, 0x64, 0x65, 0x6e,
    ];

    /// … and the Port Unreachable namespace c sent back (packet 6): the invoking packet is the
    /// datagram as c received it, hop limit 63 after router r; r decremented the error's hop
    /// limit to 63 too.
    const PORT_UNREACHABLE: [u8; 114] = [
        0x60, 0x0e, 0xd8, 0x20, 0x00, 0x4a, 0x3a, 0x3f, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x04, 0x75, 0xff, 0x00,
        0x00, 0x00, 0x00, 0x60, 0x0c, 0x1c, 0x08, 0x00, 0x1a, 0x11, 0x3f, 0xfd, 0x00, 0x00, 0x99,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00,
        0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x84, 0xe5,
        0x00, 0x09, 0x00, 0x1a, 0x04, 0xf4, 0x76, 0x72, 0x68, 0x6f, 0x73, 0x74, 0x20, 0x77, 0x69,
        0x72, 0x65, 0x20, 0x67, 0x6f, 0x6c, 0x64, 0x65, 0x6e,
    ];

    /// An Echo Request sent with hop limit 1, `testdata/capture_routed.sh 'ping -c1 -t 1
    /// fd00:98::2'` (filter in `testdata/captures/README.md`; saved in
    /// `testdata/captures/icmpv6_time_exceeded.txt`, packet 0) …
    const ECHO_HOP_LIMIT_1: [u8; 104] = [
        0x60, 0x0b, 0xe2, 0x8f, 0x00, 0x40, 0x3a, 0x01, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x98, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x5d, 0xaa, 0x20,
        0x04, 0x00, 0x01, 0x54, 0x66, 0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0xef, 0xfb, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a,
        0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
        0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
    ];

    /// … and the Time Exceeded router r (Linux) sent back (packet 1), flow label 0xa0567.
    const TIME_EXCEEDED: [u8; 152] = [
        0x60, 0x0a, 0x05, 0x67, 0x00, 0x70, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0xfd, 0x00, 0x00, 0x99, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x00, 0x83, 0xc0, 0x00,
        0x00, 0x00, 0x00, 0x60, 0x0b, 0xe2, 0x8f, 0x00, 0x40, 0x3a, 0x01, 0xfd, 0x00, 0x00, 0x99,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00,
        0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00,
        0x5d, 0xaa, 0x20, 0x04, 0x00, 0x01, 0x54, 0x66, 0x02, 0x6b, 0x00, 0x00, 0x00, 0x00, 0xef,
        0xfb, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
        0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26,
        0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35,
        0x36, 0x37,
    ];

    /// A 1448-byte Echo Request sent with `ping -M do -s 1400` towards the 1280-MTU link of
    /// `testdata/capture_routed.sh` (saved in `testdata/captures/icmpv6_packet_too_big.txt`,
    /// packet 0, written out by `testdata/hex.py … 0 --bin`) …
    const PTB_INVOKING: &[u8; 1448] = include_bytes!("../testdata/icmpv6_ptb_invoking.bin");

    /// … and the Packet Too Big (MTU 1280) router r sent back (packet 1): exactly 1280 bytes,
    /// the first 1232 bytes of the invoking packet. Flow label 0xf3549.
    const PTB: &[u8; 1280] = include_bytes!("../testdata/icmpv6_ptb.bin");

    /// Parse the ICMPv6 part of a captured IPv6 packet without extension headers, checking the
    /// checksum with the packet's own addresses.
    fn icmp(pkt: &[u8]) -> (Packet<&[u8]>, Repr<'_>) {
        let ip = ipv6::Packet::new_checked(pkt).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let p = Packet::new_checked(&pkt[40..ip.total_len()]).unwrap();
        assert!(p.verify_checksum(src, dst), "captured checksum verifies");
        let r = Repr::parse(&p).unwrap();
        r.check_ndp(src, dst, ip.hop_limit()).unwrap();
        (p, r)
    }

    /// Emit `repr` as a whole packet with the golden packet's addresses and hop limit, patch in
    /// the golden flow label (random per flow in Linux, not ours to reproduce) and compare.
    fn assert_emits(golden: &[u8], repr: &Repr<'_>) {
        let ip = ipv6::Packet::new_checked(golden).unwrap();
        let mut buf = std::vec![0u8; golden.len()];
        let n = emit_packet(&mut buf, ip.src_addr(), ip.dst_addr(), ip.hop_limit(), repr).unwrap();
        ipv6::Packet::new_unchecked(&mut buf[..]).set_flow_label(ip.flow_label());
        assert_eq!(&buf[..n], golden);
    }

    #[test]
    fn golden_echo() {
        let (p, r) = icmp(&ECHO_REQUEST);
        let want = Repr::EchoRequest {
            ident: 0x1b60,
            seq_no: 1,
            data: &ECHO_REQUEST[48..],
        };
        assert_eq!(r, want);
        assert_eq!(
            (p.msg_type(), p.msg_code(), p.checksum()),
            (Message::ECHO_REQUEST, 0, 0xee7f)
        );
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x1b60, 1));
        assert_emits(&ECHO_REQUEST, &want);
        let (_, r) = icmp(&ECHO_REPLY);
        let want = Repr::EchoReply {
            ident: 0x1b60,
            seq_no: 1,
            data: &ECHO_REPLY[48..],
        };
        assert_eq!(r, want);
        assert_emits(&ECHO_REPLY, &want);
    }

    #[test]
    fn golden_neighbor_solicit() {
        let (p, r) = icmp(&NS);
        let want = Repr::NeighborSolicit {
            target: addr("fd00:99::2"),
            lladdr: Some(MAC_A),
        };
        assert_eq!(r, want);
        assert_eq!(p.target_addr(), addr("fd00:99::2"));
        let opts: Vec<_> = p.ndp_options_iter().collect();
        assert_eq!(opts, [Ok(NdpOption::SourceLinkLayerAddr(MAC_A))]);
        assert_emits(&NS, &want);
        // The builder sends it to the solicited-node address with hop limit 255.
        let mut buf = [0u8; 100];
        let n = emit_neighbor_solicit(
            &mut buf,
            addr("fd00:99::1"),
            addr("fd00:99::2"),
            Some(MAC_A),
        );
        assert_eq!(&buf[..n.unwrap()], &NS[..]);
    }

    #[test]
    fn golden_dad_probe() {
        let (_, r) = icmp(&DAD_NS);
        // The nonce option is validated but not kept.
        assert_eq!(
            r,
            Repr::NeighborSolicit {
                target: addr("fe80::ff:fe00:a"),
                lladdr: None
            }
        );
        // The builder leaves out the link-layer option for a DAD probe; with no nonce the
        // message is 8 bytes shorter than the captured one.
        let mut buf = [0u8; 100];
        let n = emit_neighbor_solicit(
            &mut buf,
            Ipv6Addr::UNSPECIFIED,
            addr("fe80::ff:fe00:a"),
            Some(MAC_A),
        )
        .unwrap();
        assert_eq!(n, 64);
        let ip = ipv6::Packet::new_checked(&buf[..n]).unwrap();
        assert_eq!(
            (ip.dst_addr(), ip.hop_limit()),
            (addr("ff02::1:ff00:a"), 255)
        );
        assert_eq!(&buf[8..40], &DAD_NS[8..40]);
        assert!(
            Packet::new_checked(&buf[40..n])
                .unwrap()
                .verify_checksum(ip.src_addr(), ip.dst_addr())
        );
    }

    #[test]
    fn golden_neighbor_advert() {
        let (p, r) = icmp(&NA);
        let flags = NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE;
        let want = Repr::NeighborAdvert {
            flags,
            target: addr("fd00:99::2"),
            lladdr: Some(MAC_B),
        };
        assert_eq!(r, want);
        assert_eq!(p.neighbor_flags(), flags);
        assert_emits(&NA, &want);
        let mut buf = [0u8; 72];
        let n = emit_neighbor_advert(
            &mut buf,
            addr("fd00:99::2"),
            addr("fd00:99::1"),
            addr("fd00:99::2"),
            flags,
            Some(MAC_B),
        );
        assert_eq!((n, buf), (Ok(72), NA));

        let (_, r) = icmp(&NA_ROUTER);
        let Repr::NeighborAdvert { flags, .. } = r else {
            panic!("{r:?}")
        };
        assert!(
            flags.contains(
                NeighborFlags::ROUTER | NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE
            )
        );
        assert_emits(&NA_ROUTER, &r);
    }

    #[test]
    fn golden_router_solicit_and_advert() {
        let (_, r) = icmp(&RS);
        assert_eq!(
            r,
            Repr::RouterSolicit {
                lladdr: Some(MAC_A)
            }
        );
        assert_emits(&RS, &r);

        let (p, r) = icmp(&RA);
        let want = Repr::RouterAdvert {
            hop_limit: 64,
            flags: RouterFlags(0),
            router_lifetime: 1800,
            reachable_time: 30000,
            retrans_time: 1000,
            options: &RA[56..],
        };
        assert_eq!(r, want);
        assert_eq!(
            (
                p.ra_hop_limit(),
                p.router_lifetime(),
                p.reachable_time(),
                p.retrans_time()
            ),
            (64, 1800, 30000, 1000)
        );
        let opts: Vec<_> = p.ndp_options_iter().map(Result::unwrap).collect();
        assert_eq!(opts.len(), 3);
        assert_eq!(opts[1], NdpOption::Mtu(1500));
        let NdpOption::PrefixInfo(pi) = opts[0] else {
            panic!()
        };
        assert_eq!((pi.prefix, pi.prefix_len), (addr("fd00:99::"), 64));
        assert!(
            pi.flags.contains(PrefixFlags::ON_LINK) && pi.flags.contains(PrefixFlags::AUTONOMOUS)
        );
        assert_emits(&RA, &want);
    }

    #[test]
    fn golden_port_unreachable() {
        let (p, r) = icmp(&PORT_UNREACHABLE);
        let want = Repr::DstUnreachable {
            code: UnreachableCode::PORT_UNREACHABLE,
            invoking: &PORT_UNREACHABLE[48..],
        };
        assert_eq!(r, want);
        // The invoking packet is the datagram we sent, hop limit decremented by the router.
        let mut sent = UDP_TO_CLOSED_PORT;
        sent[7] -= 1;
        assert_eq!(p.body(), &sent[..]);
        // Build it the way c did (hop limit 64; r's decrement patched in).
        let mut buf = [0u8; 200];
        let n = emit_error(
            &mut buf,
            addr("fd00:98::2"),
            addr("fd00:99::1"),
            63,
            ErrorMessage::DstUnreachable(UnreachableCode::PORT_UNREACHABLE),
            &sent,
        )
        .unwrap();
        ipv6::Packet::new_unchecked(&mut buf[..]).set_flow_label(0xed820);
        assert_eq!(&buf[..n], &PORT_UNREACHABLE[..]);
    }

    #[test]
    fn golden_time_exceeded() {
        let (_, r) = icmp(&TIME_EXCEEDED);
        assert_eq!(
            r,
            Repr::TimeExceeded {
                code: TimeExceededCode::HOP_LIMIT,
                invoking: &ECHO_HOP_LIMIT_1[..]
            }
        );
        assert!(error_permitted(
            &ECHO_HOP_LIMIT_1,
            ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT)
        ));
        let mut buf = [0u8; 1500];
        let n = emit_error(
            &mut buf,
            addr("fd00:99::fe"),
            addr("fd00:99::1"),
            64,
            ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT),
            &ECHO_HOP_LIMIT_1,
        )
        .unwrap();
        ipv6::Packet::new_unchecked(&mut buf[..]).set_flow_label(0xa0567);
        assert_eq!(&buf[..n], &TIME_EXCEEDED[..]);
    }

    /// The invoking packet is clipped so that the error is exactly 1280 bytes — byte for byte
    /// what Linux sent.
    #[test]
    fn golden_packet_too_big() {
        let (p, r) = icmp(PTB);
        assert_eq!(
            r,
            Repr::PacketTooBig {
                mtu: 1280,
                invoking: &PTB_INVOKING[..MAX_INVOKING_LEN]
            }
        );
        assert_eq!(p.mtu(), 1280);
        let kind = ErrorMessage::PacketTooBig { mtu: 1280 };
        assert!(error_permitted(PTB_INVOKING, kind));
        let mut buf = [0u8; 1500];
        let n = emit_error(
            &mut buf,
            addr("fd00:99::fe"),
            addr("fd00:99::1"),
            64,
            kind,
            PTB_INVOKING,
        );
        assert_eq!(n, Ok(MIN_MTU));
        ipv6::Packet::new_unchecked(&mut buf[..]).set_flow_label(0xf3549);
        assert_eq!(&buf[..MIN_MTU], &PTB[..]);
        // A smaller buffer clips further; one that cannot hold both headers is an error.
        let mut small = [0u8; 100];
        let n = emit_error(
            &mut small,
            addr("fd00:99::fe"),
            addr("fd00:99::1"),
            64,
            kind,
            PTB_INVOKING,
        );
        assert_eq!(n, Ok(100));
        let ip = ipv6::Packet::new_checked(&small[..]).unwrap();
        assert!(
            Packet::new_checked(ip.payload())
                .unwrap()
                .verify_checksum(ip.src_addr(), ip.dst_addr())
        );
        assert_eq!(
            emit_error(
                &mut small[..47],
                addr("::1"),
                addr("::2"),
                64,
                kind,
                PTB_INVOKING
            ),
            Err(Error::Truncated)
        );
        assert_eq!(
            emit_error(
                &mut small[..48],
                addr("::1"),
                addr("::2"),
                64,
                kind,
                PTB_INVOKING
            ),
            Ok(48)
        );
    }

    /// The checksum with a Routing header uses the final destination (RFC 8200 §8.1): the
    /// captured SRH echo's ICMPv6 checksum verifies against fd00:98::2, the last segment, not
    /// against the IPv6 destination fd00:99::fe.
    #[test]
    fn checksum_uses_final_destination() {
        let ip = ipv6::Packet::new_checked(&SRH_ECHO[..]).unwrap();
        let ul = ip.upper_layer().unwrap();
        let p = Packet::new_checked(&ip.packet()[ul.offset..]).unwrap();
        assert!(p.verify_checksum(ip.src_addr(), addr("fd00:98::2")));
        assert!(!p.verify_checksum(ip.src_addr(), ip.dst_addr()));
    }

    #[test]
    fn mld_is_read_but_not_modelled() {
        let ip = ipv6::Packet::new_checked(&MLD_REPORT[..]).unwrap();
        let p = Packet::new_checked(&MLD_REPORT[48..]).unwrap();
        assert_eq!(p.msg_type(), Message::MLDV2_REPORT);
        assert!(p.verify_checksum(ip.src_addr(), ip.dst_addr()));
        assert_eq!(Repr::parse(&p), Err(Error::Unrecognized));
        assert!(p.ndp_options().is_empty());
    }

    #[test]
    fn bad_checksum() {
        let mut buf = NS;
        buf[60] ^= 1;
        let p = Packet::new_checked(&buf[40..]).unwrap();
        assert!(!p.verify_checksum(addr("fd00:99::1"), addr("ff02::1:ff00:2")));
        // fill_checksum repairs it.
        let mut p = Packet::new_checked(&mut buf[40..]).unwrap();
        p.fill_checksum(addr("fd00:99::1"), addr("ff02::1:ff00:2"));
        assert!(p.verify_checksum(addr("fd00:99::1"), addr("ff02::1:ff00:2")));
    }

    #[test]
    fn truncated() {
        for n in 0..8 {
            assert_eq!(
                Packet::new_checked(&ECHO_REQUEST[40..40 + n]).unwrap_err(),
                Error::Truncated
            );
        }
        assert!(Packet::new_checked(&ECHO_REQUEST[40..48]).is_ok());
        // NS and NA need 24 bytes, RA 16.
        for (pkt, min) in [(&NS[..], 24), (&NA[..], 24), (&RA[..], 16)] {
            for n in 8..min {
                assert_eq!(
                    Packet::new_checked(&pkt[40..40 + n]).unwrap_err(),
                    Error::Truncated
                );
            }
            assert!(Packet::new_checked(&pkt[40..40 + min]).is_ok());
        }
        // A cut option: Truncated from parse.
        let p = Packet::new_checked(&NS[40..70]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Truncated));
        let p = Packet::new_checked(&RA[40..100]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Truncated));
    }

    #[test]
    fn ndp_parse_errors() {
        // Option length 0.
        let mut buf = NS;
        buf[65] = 0;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[40..]).unwrap()),
            Err(Error::Malformed)
        );
        // Multicast target.
        let mut buf = NS;
        buf[48] = 0xff;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[40..]).unwrap()),
            Err(Error::Malformed)
        );
        let mut buf = NA;
        buf[48] = 0xff;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[40..]).unwrap()),
            Err(Error::Malformed)
        );
        // Non-zero code on ND and echo messages.
        for pkt in [
            &NS[..],
            &NA[..],
            &RS[..],
            &RA[..],
            &ECHO_REQUEST[..],
            &ECHO_REPLY[..],
        ] {
            let mut buf = pkt.to_vec();
            buf[41] = 1;
            assert_eq!(
                Repr::parse(&Packet::new_checked(&buf[40..]).unwrap()),
                Err(Error::Unrecognized)
            );
        }
        // Unknown type.
        let mut buf = ECHO_REQUEST;
        buf[40] = 200;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[40..]).unwrap()),
            Err(Error::Unrecognized)
        );
    }

    #[test]
    fn ndp_ip_checks() {
        let (_, ns) = icmp(&NS);
        let (a1, sn) = (addr("fd00:99::1"), addr("ff02::1:ff00:2"));
        assert_eq!(ns.check_ndp(a1, sn, 255), Ok(()));
        assert_eq!(
            ns.check_ndp(a1, sn, 254),
            Err(Error::Malformed),
            "forwarded: hop limit < 255"
        );
        // From :: with a link-layer option, or not to a solicited-node address.
        assert_eq!(
            ns.check_ndp(Ipv6Addr::UNSPECIFIED, sn, 255),
            Err(Error::Malformed)
        );
        let (_, dad) = icmp(&DAD_NS);
        assert_eq!(
            dad.check_ndp(Ipv6Addr::UNSPECIFIED, addr("ff02::1:ff00:a"), 255),
            Ok(())
        );
        assert_eq!(
            dad.check_ndp(Ipv6Addr::UNSPECIFIED, addr("ff02::1"), 255),
            Err(Error::Malformed)
        );
        // NA with S to a multicast address.
        let (_, na) = icmp(&NA);
        assert_eq!(
            na.check_ndp(addr("fd00:99::2"), addr("ff02::1"), 255),
            Err(Error::Malformed)
        );
        // RA from a global address.
        let (_, ra) = icmp(&RA);
        assert_eq!(
            ra.check_ndp(addr("fd00:99::1"), addr("ff02::1"), 255),
            Err(Error::Malformed)
        );
        // RS from :: with a link-layer option.
        let (_, rs) = icmp(&RS);
        assert_eq!(
            rs.check_ndp(Ipv6Addr::UNSPECIFIED, addr("ff02::2"), 255),
            Err(Error::Malformed)
        );
        // Not ND: nothing to check.
        let (_, echo) = icmp(&ECHO_REQUEST);
        assert_eq!(echo.check_ndp(a1, a1, 1), Ok(()));
    }

    #[test]
    fn errors_about_errors_are_not_permitted() {
        let te = ErrorMessage::TimeExceeded(TimeExceededCode::HOP_LIMIT);
        assert!(error_permitted(&ECHO_REQUEST, te));
        assert!(
            !error_permitted(&PORT_UNREACHABLE, te),
            "about an ICMPv6 error"
        );
        assert!(!error_permitted(&NS, te), "to a multicast destination");
        assert!(
            error_permitted(&NS, ErrorMessage::PacketTooBig { mtu: 1280 }),
            "PTB is exempt"
        );
        let pp2 = ErrorMessage::ParamProblem {
            code: ParamProblemCode::UNRECOGNIZED_OPTION,
            pointer: 42,
        };
        assert!(error_permitted(&NS, pp2));
        assert!(
            !error_permitted(&DAD_NS, ErrorMessage::PacketTooBig { mtu: 1280 }),
            "from ::"
        );
        assert!(
            !error_permitted(&ECHO_REQUEST[..39], te),
            "too short to tell"
        );
        // Behind extension headers: the SRH echo request is fine to answer.
        assert!(error_permitted(&SRH_ECHO, te));
        // A cut invoking packet whose ICMPv6 type byte is missing: answered.
        assert!(error_permitted(&ECHO_REQUEST[..40], te));
    }

    #[test]
    fn total_getters_on_short_messages() {
        // An 8-byte echo has no target or RA timers: the getters read zeros, not panic.
        let p = Packet::new_checked(&ECHO_REQUEST[40..48]).unwrap();
        assert_eq!(p.target_addr(), Ipv6Addr::UNSPECIFIED);
        assert_eq!((p.reachable_time(), p.retrans_time()), (0, 0));
        assert_eq!(p.ndp_options(), &[] as &[u8]);
        assert_eq!(p.body(), &[] as &[u8]);
    }

    #[test]
    fn round_trip() {
        use proptest::prelude::*;
        proptest!(|(kind in 0u8..10, a in any::<u16>(), b in any::<u32>(), target in any::<u128>(),
                    mac in proptest::option::of(any::<[u8; 6]>()),
                    data in proptest::collection::vec(any::<u8>(), 0..64))| {
            let target = Ipv6Addr::from_bits(target & !(0xff << 120)); // not multicast
            let lladdr = mac.map(EthernetAddress);
            let r = match kind {
                0 => Repr::DstUnreachable { code: UnreachableCode(a as u8), invoking: &data },
                1 => Repr::PacketTooBig { mtu: b, invoking: &data },
                2 => Repr::TimeExceeded { code: TimeExceededCode(a as u8), invoking: &data },
                3 => Repr::ParamProblem { code: ParamProblemCode(a as u8), pointer: b, invoking: &data },
                4 => Repr::EchoRequest { ident: a, seq_no: b as u16, data: &data },
                5 => Repr::EchoReply { ident: a, seq_no: b as u16, data: &data },
                6 => Repr::RouterSolicit { lladdr },
                7 => Repr::RouterAdvert { hop_limit: a as u8, flags: RouterFlags((a >> 8) as u8),
                    router_lifetime: b as u16, reachable_time: b, retrans_time: !b, options: &RS[48..] },
                8 => Repr::NeighborSolicit { target, lladdr },
                _ => Repr::NeighborAdvert { flags: NeighborFlags(a as u8 & 0xe0), target, lladdr },
            };
            let mut buf = std::vec![0u8; r.buffer_len()];
            let mut p = Packet::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.fill_checksum(addr("fe80::1"), addr("ff02::1"));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum(addr("fe80::1"), addr("ff02::1")));
            prop_assert_eq!(Repr::parse(&p), Ok(r));
        });
    }
}
