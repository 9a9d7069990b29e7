//! ICMP for IPv4 (RFC 792): what a router answers (echo) and what it sends when it cannot
//! forward (destination unreachable, time exceeded), built per RFC 1812 §4.3.
//!
//! **The quoted datagram stays raw bytes.** An error message carries the start of the datagram
//! that caused it. [`Repr`] keeps that quote as the byte slice it is (checked to begin with a
//! complete IPv4 header) instead of parsing it into an [`ipv4::Repr`]: a quote is cut short on
//! purpose, so its total length never matches, and the sender matches our quote against what
//! it sent, so re-serialising the header from a value (fixing its checksum, dropping the
//! reserved flag, re-padding options) would be a change for the worse. When the fields are
//! wanted, [`Repr::invoking`] gives an [`ipv4::Packet`] view over the quote.
//!
//! **How much to quote.** RFC 792 asks for the IP header plus 64 bits of data; RFC 1812
//! §4.3.2.3 says a router SHOULD quote as much as fits without the ICMP error datagram
//! exceeding 576 bytes. [`Repr::dst_unreachable`] and [`Repr::time_exceeded`] follow RFC 1812,
//! as Linux does (the golden test below reproduces a Linux router's 576-byte
//! fragmentation-needed message byte for byte): more of the datagram lets the sender match
//! the error to a flow through tunnels and extension headers, and 576 bytes is the size every
//! IPv4 host must accept.
//!
//! **Unknown messages.** Types this module does not model (redirect, parameter problem,
//! timestamp, router discovery, …) parse as [`Repr::Other`], lossless, so that the control
//! plane can still count or log them; an unknown *code* of a modelled type is
//! [`Error::Unrecognized`], because guessing its meaning is worse than dropping it. RFC 4884
//! extension structures after the quote are left inside the quote bytes.

use crate::checksum;
use crate::ip::Protocol;
use crate::ipv4;
use crate::{Error, Result};

mod field {
    use core::ops::{Range, RangeFrom};
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Range<usize> = 2..4;
    pub(super) const REST: Range<usize> = 4..8;
    pub(super) const ECHO_IDENT: Range<usize> = 4..6;
    pub(super) const ECHO_SEQNO: Range<usize> = 6..8;
    pub(super) const MTU: Range<usize> = 6..8;
    pub(super) const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMP header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = field::DATA.start;

/// Most bytes an ICMP error datagram may take, IP header included (RFC 1812 §4.3.2.3).
pub const MAX_ERROR_DATAGRAM_LEN: usize = 576;

/// Most bytes of the offending datagram [`Repr::dst_unreachable`] and [`Repr::time_exceeded`]
/// quote: 576 minus our own IPv4 header (20, no options) and the ICMP header (8).
pub const MAX_QUOTE_LEN: usize = MAX_ERROR_DATAGRAM_LEN - ipv4::HEADER_LEN - HEADER_LEN;

/// An ICMP message type. A newtype so that unknown types survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Message(pub u8);

impl Message {
    /// Echo reply (0)
    pub const ECHO_REPLY: Message = Message(0);
    /// Destination unreachable (3)
    pub const DST_UNREACHABLE: Message = Message(3);
    /// Source quench (4, deprecated by RFC 6633)
    pub const SOURCE_QUENCH: Message = Message(4);
    /// Redirect (5)
    pub const REDIRECT: Message = Message(5);
    /// Echo request (8)
    pub const ECHO_REQUEST: Message = Message(8);
    /// Router advertisement (9)
    pub const ROUTER_ADVERT: Message = Message(9);
    /// Router solicitation (10)
    pub const ROUTER_SOLICIT: Message = Message(10);
    /// Time exceeded (11)
    pub const TIME_EXCEEDED: Message = Message(11);
    /// Parameter problem (12)
    pub const PARAM_PROBLEM: Message = Message(12);
    /// Timestamp (13)
    pub const TIMESTAMP: Message = Message(13);
    /// Timestamp reply (14)
    pub const TIMESTAMP_REPLY: Message = Message(14);

    /// An error message (3, 4, 5, 11, 12): one that must never be answered with another
    /// error (RFC 1812 §4.3.2.7).
    pub const fn is_error(self) -> bool {
        matches!(self.0, 3 | 4 | 5 | 11 | 12)
    }
}

/// Destination-unreachable codes (RFC 792, RFC 1122, RFC 1812 §5.2.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DstUnreachable {
    /// 0: no route to the destination network.
    NetUnreachable,
    /// 1: the destination host does not answer (e.g. ARP fails).
    HostUnreachable,
    /// 2: the destination does not speak the transport protocol.
    ProtoUnreachable,
    /// 3: no listener on the destination port.
    PortUnreachable,
    /// 4: the datagram has DF set and is larger than the next hop's MTU (RFC 1191).
    FragRequired {
        /// MTU of the next-hop link, for path MTU discovery (0 from pre-RFC 1191 routers).
        next_hop_mtu: u16,
    },
    /// 5: a source route could not be followed.
    SrcRouteFailed,
    /// 6: destination network unknown.
    DstNetUnknown,
    /// 7: destination host unknown.
    DstHostUnknown,
    /// 8: source host isolated (obsolete).
    SrcHostIsolated,
    /// 9: communication with the destination network administratively prohibited (obsolete).
    NetProhibited,
    /// 10: communication with the destination host administratively prohibited (obsolete).
    HostProhibited,
    /// 11: network unreachable for the type of service.
    NetUnreachToS,
    /// 12: host unreachable for the type of service.
    HostUnreachToS,
    /// 13: communication administratively prohibited (a filter dropped it; RFC 1812).
    CommProhibited,
    /// 14: host precedence violation (RFC 1812).
    HostPrecedViol,
    /// 15: precedence cutoff in effect (RFC 1812).
    PrecedCutoff,
}

impl DstUnreachable {
    /// The code byte.
    pub const fn code(self) -> u8 {
        match self {
            DstUnreachable::NetUnreachable => 0,
            DstUnreachable::HostUnreachable => 1,
            DstUnreachable::ProtoUnreachable => 2,
            DstUnreachable::PortUnreachable => 3,
            DstUnreachable::FragRequired { .. } => 4,
            DstUnreachable::SrcRouteFailed => 5,
            DstUnreachable::DstNetUnknown => 6,
            DstUnreachable::DstHostUnknown => 7,
            DstUnreachable::SrcHostIsolated => 8,
            DstUnreachable::NetProhibited => 9,
            DstUnreachable::HostProhibited => 10,
            DstUnreachable::NetUnreachToS => 11,
            DstUnreachable::HostUnreachToS => 12,
            DstUnreachable::CommProhibited => 13,
            DstUnreachable::HostPrecedViol => 14,
            DstUnreachable::PrecedCutoff => 15,
        }
    }

    /// From the code byte and (for code 4) the next-hop MTU field; `None` for codes above 15.
    pub const fn from_code(code: u8, next_hop_mtu: u16) -> Option<DstUnreachable> {
        Some(match code {
            0 => DstUnreachable::NetUnreachable,
            1 => DstUnreachable::HostUnreachable,
            2 => DstUnreachable::ProtoUnreachable,
            3 => DstUnreachable::PortUnreachable,
            4 => DstUnreachable::FragRequired { next_hop_mtu },
            5 => DstUnreachable::SrcRouteFailed,
            6 => DstUnreachable::DstNetUnknown,
            7 => DstUnreachable::DstHostUnknown,
            8 => DstUnreachable::SrcHostIsolated,
            9 => DstUnreachable::NetProhibited,
            10 => DstUnreachable::HostProhibited,
            11 => DstUnreachable::NetUnreachToS,
            12 => DstUnreachable::HostUnreachToS,
            13 => DstUnreachable::CommProhibited,
            14 => DstUnreachable::HostPrecedViol,
            15 => DstUnreachable::PrecedCutoff,
            _ => return None,
        })
    }
}

/// Time-exceeded codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeExceeded {
    /// 0: the TTL reached zero in transit (what a router sends).
    TtlExpired,
    /// 1: fragment reassembly timed out (what a host sends).
    FragReassembly,
}

impl TimeExceeded {
    /// The code byte.
    pub const fn code(self) -> u8 {
        match self {
            TimeExceeded::TtlExpired => 0,
            TimeExceeded::FragReassembly => 1,
        }
    }

    /// From the code byte; `None` for codes other than 0 and 1.
    pub const fn from_code(code: u8) -> Option<TimeExceeded> {
        match code {
            0 => Some(TimeExceeded::TtlExpired),
            1 => Some(TimeExceeded::FragReassembly),
            _ => None,
        }
    }
}

/// A view of an ICMP message. The buffer must be exactly the message (the IPv4 payload): the
/// checksum covers all of it.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length: for buffers the caller sized itself.
    /// Getters on a too-short buffer panic.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer after checking it holds the 8-byte header. Does not verify the checksum.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] unless the buffer holds [`HEADER_LEN`] bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
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

    /// Message code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::CHECKSUM.start], d[field::CHECKSUM.start + 1]])
    }

    /// The four type-specific bytes after the checksum, raw.
    #[inline]
    pub fn rest_of_header(&self) -> [u8; 4] {
        let d = self.buffer.as_ref();
        let r = field::REST.start;
        [d[r], d[r + 1], d[r + 2], d[r + 3]]
    }

    /// Echo identifier (echo request/reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::ECHO_IDENT.start], d[field::ECHO_IDENT.start + 1]])
    }

    /// Echo sequence number (echo request/reply).
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::ECHO_SEQNO.start], d[field::ECHO_SEQNO.start + 1]])
    }

    /// Next-hop MTU (destination unreachable, code 4; RFC 1191).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::MTU.start], d[field::MTU.start + 1]])
    }

    /// Everything after the 8-byte header: echo data, or the quoted datagram of an error.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// The checksum over the whole buffer verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the message type.
    #[inline]
    pub fn set_msg_type(&mut self, v: Message) {
        self.buffer.as_mut()[field::TYPE] = v.0
    }

    /// Set the message code.
    #[inline]
    pub fn set_msg_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the four type-specific bytes after the checksum.
    #[inline]
    pub fn set_rest_of_header(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&v)
    }

    /// Set the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::ECHO_IDENT].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the echo sequence number.
    #[inline]
    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.buffer.as_mut()[field::ECHO_SEQNO].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the next-hop MTU.
    #[inline]
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        self.buffer.as_mut()[field::MTU].copy_from_slice(&v.to_be_bytes())
    }

    /// Everything after the header, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Compute the checksum over the whole buffer and store it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(!sum)
    }
}

/// An ICMP message as a value, borrowing its data from the packet it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr<'a> {
    /// Echo request ("ping").
    EchoRequest {
        /// Identifier, echoed back.
        ident: u16,
        /// Sequence number, echoed back.
        seq_no: u16,
        /// Data, echoed back.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier of the request.
        ident: u16,
        /// Sequence number of the request.
        seq_no: u16,
        /// Data of the request.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// Why (the code, and the next-hop MTU for fragmentation needed).
        reason: DstUnreachable,
        /// The leading bytes of the datagram that could not be delivered, starting with its
        /// complete IPv4 header.
        invoking: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// TTL expired in transit or reassembly timeout.
        reason: TimeExceeded,
        /// The leading bytes of the datagram that expired, starting with its complete IPv4
        /// header.
        invoking: &'a [u8],
    },
    /// Any other type, kept as it is. Not for the types above: those parse into their own
    /// variants, so an `Other` with such a type would not survive a round trip.
    Other {
        /// Message type.
        msg_type: Message,
        /// Code.
        code: u8,
        /// The four bytes after the checksum.
        rest_of_header: [u8; 4],
        /// Everything after the header.
        data: &'a [u8],
    },
}

/// Check that a quote starts with a complete IPv4 header.
fn check_quote(invoking: &[u8]) -> Result<()> {
    ipv4::Packet::new_unchecked(invoking)
        .check_header()
        .map_err(|_| Error::Malformed)
}

/// The part of `offending` an error about it quotes: up to its total length (no link-layer
/// padding) and at most [`MAX_QUOTE_LEN`] bytes; never less than its header.
fn quote(offending: &[u8]) -> Result<&[u8]> {
    let p = ipv4::Packet::new_unchecked(offending);
    p.check_header()?;
    let len = usize::from(p.total_len())
        .max(p.header_len())
        .min(offending.len())
        .min(MAX_QUOTE_LEN);
    Ok(&offending[..len])
}

impl<'a> Repr<'a> {
    /// Read a message, verifying its checksum.
    ///
    /// Errors: [`Error::Truncated`] under 8 bytes; [`Error::BadChecksum`];
    /// [`Error::Unrecognized`] for an echo with a non-zero code or an unknown
    /// destination-unreachable / time-exceeded code; [`Error::Malformed`] if an error message's
    /// quote does not start with a complete IPv4 header (version 4, IHL ≥ 5, header within
    /// the quote).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data = &packet.buffer.as_ref()[field::DATA];
        let (ty, code) = (packet.msg_type(), packet.msg_code());
        Ok(match ty {
            Message::ECHO_REQUEST | Message::ECHO_REPLY => {
                if code != 0 {
                    return Err(Error::Unrecognized);
                }
                let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq_no());
                if ty == Message::ECHO_REQUEST {
                    Repr::EchoRequest {
                        ident,
                        seq_no,
                        data,
                    }
                } else {
                    Repr::EchoReply {
                        ident,
                        seq_no,
                        data,
                    }
                }
            }
            Message::DST_UNREACHABLE => {
                let reason = DstUnreachable::from_code(code, packet.next_hop_mtu())
                    .ok_or(Error::Unrecognized)?;
                check_quote(data)?;
                Repr::DstUnreachable {
                    reason,
                    invoking: data,
                }
            }
            Message::TIME_EXCEEDED => {
                let reason = TimeExceeded::from_code(code).ok_or(Error::Unrecognized)?;
                check_quote(data)?;
                Repr::TimeExceeded {
                    reason,
                    invoking: data,
                }
            }
            msg_type => Repr::Other {
                msg_type,
                code,
                rest_of_header: packet.rest_of_header(),
                data,
            },
        })
    }

    /// A destination-unreachable error about `offending`, the datagram as received (starting
    /// at its IPv4 header; trailing link-layer padding is fine). Quotes the datagram up to its
    /// total length or [`MAX_QUOTE_LEN`] bytes, whichever is less (RFC 1812 §4.3.2.3).
    ///
    /// Errors: those of [`ipv4::Packet::check_header`] if `offending` does not start with a
    /// complete IPv4 header. Whether an error may be sent at all is [`may_send_error`]'s
    /// question, not this constructor's.
    pub fn dst_unreachable(reason: DstUnreachable, offending: &'a [u8]) -> Result<Repr<'a>> {
        Ok(Repr::DstUnreachable {
            reason,
            invoking: quote(offending)?,
        })
    }

    /// A time-exceeded error about `offending`; quoting as [`Repr::dst_unreachable`].
    pub fn time_exceeded(reason: TimeExceeded, offending: &'a [u8]) -> Result<Repr<'a>> {
        Ok(Repr::TimeExceeded {
            reason,
            invoking: quote(offending)?,
        })
    }

    /// The reply to an echo request (same identifier, sequence number and data); `None` for
    /// any other message.
    pub const fn echo_reply(&self) -> Option<Repr<'a>> {
        match *self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => Some(Repr::EchoReply {
                ident,
                seq_no,
                data,
            }),
            _ => None,
        }
    }

    /// For an error message, a view of the quoted datagram. Its header getters and options
    /// are safe to use (the quote was checked to hold a complete header); its `payload()` is
    /// the quoted part of the payload.
    pub fn invoking(&self) -> Option<ipv4::Packet<&'a [u8]>> {
        match *self {
            Repr::DstUnreachable { invoking, .. } | Repr::TimeExceeded { invoking, .. } => {
                Some(ipv4::Packet::new_unchecked(invoking))
            }
            _ => None,
        }
    }

    /// Message type.
    pub const fn msg_type(&self) -> Message {
        match self {
            Repr::EchoRequest { .. } => Message::ECHO_REQUEST,
            Repr::EchoReply { .. } => Message::ECHO_REPLY,
            Repr::DstUnreachable { .. } => Message::DST_UNREACHABLE,
            Repr::TimeExceeded { .. } => Message::TIME_EXCEEDED,
            Repr::Other { msg_type, .. } => *msg_type,
        }
    }

    /// The bytes after the 8-byte header.
    const fn body(&self) -> &'a [u8] {
        match *self {
            Repr::EchoRequest { data, .. }
            | Repr::EchoReply { data, .. }
            | Repr::Other { data, .. } => data,
            Repr::DstUnreachable { invoking, .. } | Repr::TimeExceeded { invoking, .. } => invoking,
        }
    }

    /// Bytes the message takes: the 8-byte header plus data or quote.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.body().len()
    }

    /// Write the message and its checksum into the first [`Repr::buffer_len`] bytes of the view
    /// (the checksum covers exactly those bytes). Unused header bytes are written as zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let (code, rest) = match *self {
            Repr::EchoRequest { ident, seq_no, .. } | Repr::EchoReply { ident, seq_no, .. } => {
                let (i, s) = (ident.to_be_bytes(), seq_no.to_be_bytes());
                (0, [i[0], i[1], s[0], s[1]])
            }
            Repr::DstUnreachable { reason, .. } => {
                let mtu = match reason {
                    DstUnreachable::FragRequired { next_hop_mtu } => next_hop_mtu,
                    _ => 0,
                };
                let m = mtu.to_be_bytes();
                (reason.code(), [0, 0, m[0], m[1]])
            }
            Repr::TimeExceeded { reason, .. } => (reason.code(), [0; 4]),
            Repr::Other {
                code,
                rest_of_header,
                ..
            } => (code, rest_of_header),
        };
        let body = self.body();
        let len = self.buffer_len();
        let mut p = Packet::new_unchecked(&mut packet.buffer.as_mut()[..len]);
        p.set_msg_type(self.msg_type());
        p.set_msg_code(code);
        p.set_rest_of_header(rest);
        p.data_mut().copy_from_slice(body);
        p.fill_checksum();
    }
}

/// May a router send an ICMP error about this datagram? RFC 1812 §4.3.2.7 forbids it when the
/// datagram is itself an ICMP error, a non-initial fragment, addressed to the limited
/// broadcast address or a multicast group, or from a source that is not a unique host
/// (network 0, 127/8, 255.255.255.255, multicast, 240/4).
///
/// Checks only what the datagram says: the caller must also refuse datagrams that arrived as
/// link-layer broadcast or were sent to a subnet-directed broadcast address, and rate-limit.
/// The view must have passed at least [`ipv4::Packet::check_header`].
pub fn may_send_error<T: AsRef<[u8]>>(offending: &ipv4::Packet<T>) -> bool {
    let (src, dst) = (offending.src_addr(), offending.dst_addr());
    if offending.frag_offset() != 0 {
        return false;
    }
    if dst.is_broadcast() || dst.is_multicast() {
        return false;
    }
    if src.octets()[0] == 0
        || src.is_loopback()
        || src.is_broadcast()
        || src.is_multicast()
        || src.octets()[0] >= 240
    {
        return false;
    }
    if offending.protocol() == Protocol::ICMP
        && let Some(&ty) = offending.payload().first()
    {
        return !Message(ty).is_error();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use std::vec::Vec;

    // Golden datagrams: real captures, the bytes after the 14-byte Ethernet header (tcpdump
    // -xx on veths between namespaces; scripts in testdata/). Each error is the Linux kernel's,
    // and `offending` is what provoked it, captured in the same run.

    /// `testdata/capture.sh 'ping -c1 -s 8 -Q 0xb9 10.99.0.2 >/dev/null' icmp`: the echo
    /// request's ICMP message …
    const ECHO_REQUEST: [u8; 16] = [
        0x08, 0x00, 0xb7, 0x21, 0x34, 0xcd, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
        0x07,
    ];

    /// … and the kernel's echo reply.
    const ECHO_REPLY: [u8; 16] = [
        0x00, 0x00, 0xbf, 0x21, 0x34, 0xcd, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
        0x07,
    ];

    // `testdata/capture.sh "python3 -c 'import socket;s=socket.socket(socket.AF_INET,
    // socket.SOCK_RAW,253);s.sendto(b\"vrhost\",(\"10.99.0.2\",0))'" 'ip proto 253 or icmp'`:
    // an IP datagram of unassigned protocol 253 and b's protocol-unreachable answer.

    /// Protocol 253, payload "vrhost".
    const PROTO_253: [u8; 26] = [
        0x45, 0x00, 0x00, 0x1a, 0x0e, 0xa9, 0x40, 0x00, 0x40, 0xfd, 0x16, 0x76, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x00, 0x02, 0x76, 0x72, 0x68, 0x6f, 0x73, 0x74,
    ];

    /// 10.99.0.2 → 10.99.0.1, protocol unreachable.
    const PROTO_UNREACH: [u8; 54] = [
        0x45, 0xc0, 0x00, 0x36, 0x9b, 0x3f, 0x00, 0x00, 0x40, 0x01, 0xc9, 0xff, 0x0a, 0x63, 0x00,
        0x02, 0x0a, 0x63, 0x00, 0x01, 0x03, 0x02, 0xaa, 0xa7, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x1a, 0x0e, 0xa9, 0x40, 0x00, 0x40, 0xfd, 0x16, 0x76, 0x0a, 0x63, 0x00, 0x01, 0x0a,
        0x63, 0x00, 0x02, 0x76, 0x72, 0x68, 0x6f, 0x73, 0x74,
    ];

    // `testdata/capture.sh "python3 -c '…socket(2,2)…sendto(b\"x\\n\",(\"10.99.0.2\",9))'"
    // 'icmp or udp'`: a UDP datagram to closed port 9 and b's port-unreachable answer.

    /// UDP 10.99.0.1:33745 → 10.99.0.2:9, payload "x\n".
    const UDP_TO_9: [u8; 30] = [
        0x45, 0x00, 0x00, 0x1e, 0xe8, 0x9f, 0x40, 0x00, 0x40, 0x11, 0x3d, 0x67, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x00, 0x02, 0x83, 0xd1, 0x00, 0x09, 0x00, 0x0a, 0x14, 0xe4, 0x78, 0x0a,
    ];

    /// 10.99.0.2 → 10.99.0.1, port unreachable.
    const PORT_UNREACH: [u8; 58] = [
        0x45, 0xc0, 0x00, 0x3a, 0x2f, 0x8f, 0x00, 0x00, 0x40, 0x01, 0x35, 0xac, 0x0a, 0x63, 0x00,
        0x02, 0x0a, 0x63, 0x00, 0x01, 0x03, 0x03, 0xec, 0x29, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x1e, 0xe8, 0x9f, 0x40, 0x00, 0x40, 0x11, 0x3d, 0x67, 0x0a, 0x63, 0x00, 0x01, 0x0a,
        0x63, 0x00, 0x02, 0x83, 0xd1, 0x00, 0x09, 0x00, 0x0a, 0x14, 0xe4, 0x78, 0x0a,
    ];

    // The rest are from testdata/capture_router.sh (a — router r — b; r has routes
    // `unreachable 10.99.2.0/24`, `prohibit 10.99.3.0/24`, no default), command
    // `ping -c1 -s 8 DEST`, filter `icmp` or `icmp[0]==3`.

    /// DEST 10.99.1.2 with `-t1`: the request with TTL 1 …
    const TTL_1: [u8; 36] = [
        0x45, 0x00, 0x00, 0x24, 0x63, 0x90, 0x40, 0x00, 0x01, 0x01, 0x00, 0x81, 0x0a, 0x63, 0x00,
        0x01, 0x0a, 0x63, 0x01, 0x02, 0x08, 0x00, 0xd0, 0x14, 0x1b, 0xda, 0x00, 0x01, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// … and r's time exceeded (10.99.0.254 → 10.99.0.1).
    const TIME_EXCEEDED: [u8; 64] = [
        0x45, 0xc0, 0x00, 0x40, 0x8c, 0x32, 0x00, 0x00, 0x40, 0x01, 0xd8, 0x06, 0x0a, 0x63, 0x00,
        0xfe, 0x0a, 0x63, 0x00, 0x01, 0x0b, 0x00, 0xf4, 0xff, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x24, 0x63, 0x90, 0x40, 0x00, 0x01, 0x01, 0x00, 0x81, 0x0a, 0x63, 0x00, 0x01, 0x0a,
        0x63, 0x01, 0x02, 0x08, 0x00, 0xd0, 0x14, 0x1b, 0xda, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03,
        0x04, 0x05, 0x06, 0x07,
    ];

    /// DEST 10.99.2.2: host unreachable (the request itself was not kept; the quote is it).
    const HOST_UNREACH: [u8; 64] = [
        0x45, 0xc0, 0x00, 0x40, 0xe6, 0xba, 0x00, 0x00, 0x40, 0x01, 0x7d, 0x7e, 0x0a, 0x63, 0x00,
        0xfe, 0x0a, 0x63, 0x00, 0x01, 0x03, 0x01, 0xfc, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x24, 0x62, 0x61, 0x40, 0x00, 0x40, 0x01, 0xc1, 0xaf, 0x0a, 0x63, 0x00, 0x01, 0x0a,
        0x63, 0x02, 0x02, 0x08, 0x00, 0xcf, 0x52, 0x1c, 0x9c, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03,
        0x04, 0x05, 0x06, 0x07,
    ];

    /// DEST 10.99.3.2: communication administratively prohibited (code 13).
    const PROHIBITED: [u8; 64] = [
        0x45, 0xc0, 0x00, 0x40, 0x9d, 0xdb, 0x00, 0x00, 0x40, 0x01, 0xc6, 0x5d, 0x0a, 0x63, 0x00,
        0xfe, 0x0a, 0x63, 0x00, 0x01, 0x03, 0x0d, 0xfc, 0xf2, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x24, 0x93, 0xce, 0x40, 0x00, 0x40, 0x01, 0x8f, 0x42, 0x0a, 0x63, 0x00, 0x01, 0x0a,
        0x63, 0x03, 0x02, 0x08, 0x00, 0xc8, 0x75, 0x23, 0x79, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03,
        0x04, 0x05, 0x06, 0x07,
    ];

    /// DEST 10.99.4.2: net unreachable (no route at all).
    const NET_UNREACH: [u8; 64] = [
        0x45, 0xc0, 0x00, 0x40, 0x0d, 0x83, 0x00, 0x00, 0x40, 0x01, 0x56, 0xb6, 0x0a, 0x63, 0x00,
        0xfe, 0x0a, 0x63, 0x00, 0x01, 0x03, 0x00, 0xfc, 0xff, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x24, 0x81, 0x87, 0x40, 0x00, 0x40, 0x01, 0xa0, 0x89, 0x0a, 0x63, 0x00, 0x01, 0x0a,
        0x63, 0x04, 0x02, 0x08, 0x00, 0xc8, 0x4f, 0x23, 0x9f, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03,
        0x04, 0x05, 0x06, 0x07,
    ];

    /// A 1328-byte DF echo request and the router's 576-byte fragmentation-needed answer;
    /// the file says how it was made.
    const FRAG_NEEDED_CAPTURE: &str = include_str!("../testdata/icmpv4_frag_needed.txt");

    const A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
    const R: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 254);

    /// The frames of a `tcpdump -xx` text dump, as bytes (comment lines skipped).
    fn tcpdump_frames(text: &str) -> Vec<Vec<u8>> {
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some(rest) = line.trim_start().strip_prefix("0x") else {
                continue;
            };
            let (offset, hex) = rest.split_once(':').unwrap();
            if offset == "0000" {
                frames.push(Vec::new());
            }
            let frame = frames.last_mut().unwrap();
            for word in hex.split_whitespace() {
                for i in (0..word.len()).step_by(2) {
                    frame.push(u8::from_str_radix(&word[i..i + 2], 16).unwrap());
                }
            }
        }
        frames
    }

    /// Parse an ICMP message that must be valid.
    fn parse(icmp: &[u8]) -> Repr<'_> {
        Repr::parse(&Packet::new_checked(icmp).unwrap()).unwrap()
    }

    /// Emit a Repr into a fresh buffer.
    fn emit(repr: &Repr<'_>) -> Vec<u8> {
        let mut buf = std::vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    }

    /// The IPv4 header a Linux router puts on an ICMP error: TOS 0xc0 (DSCP CS6), TTL 64, no
    /// DF. The identification is whatever the kernel chose.
    fn error_ip(src: Ipv4Addr, dst: Ipv4Addr, ident: u16, icmp: &Repr<'_>) -> ipv4::Repr {
        ipv4::Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: Protocol::ICMP,
            payload_len: icmp.buffer_len(),
            ttl: 64,
            dscp: 48,
            ecn: 0,
            ident,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            options: ipv4::Options::EMPTY,
        }
    }

    /// Emit a whole error datagram: IPv4 header then ICMP.
    fn emit_datagram(ip: &ipv4::Repr, icmp: &Repr<'_>) -> Vec<u8> {
        let mut buf = std::vec![0u8; ip.total_len()];
        ip.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
        icmp.emit(&mut Packet::new_unchecked(&mut buf[ip.header_len()..]));
        buf
    }

    #[test]
    fn golden_echo() {
        let p = Packet::new_checked(&ECHO_REQUEST[..]).unwrap();
        assert_eq!(
            (p.msg_type(), p.msg_code(), p.checksum()),
            (Message::ECHO_REQUEST, 0, 0xb721)
        );
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x34cd, 1));
        assert_eq!(p.rest_of_header(), [0x34, 0xcd, 0, 1]);
        assert!(p.verify_checksum());
        let req = Repr::parse(&p).unwrap();
        assert_eq!(
            req,
            Repr::EchoRequest {
                ident: 0x34cd,
                seq_no: 1,
                data: &ECHO_REQUEST[8..]
            }
        );
        assert_eq!(emit(&req), ECHO_REQUEST);
        assert!(req.invoking().is_none());

        // Answering the captured request gives the kernel's captured reply.
        let reply = req.echo_reply().unwrap();
        assert_eq!(reply, parse(&ECHO_REPLY));
        assert_eq!(emit(&reply), ECHO_REPLY);
        assert_eq!(reply.echo_reply(), None);
    }

    /// Each captured Linux error, rebuilt from the datagram that provoked it: ICMP message and
    /// whole IPv4 datagram byte for byte, and the capture parses to the same Repr.
    #[test]
    fn golden_errors_rebuilt() {
        type Build = for<'a> fn(&'a [u8]) -> Result<Repr<'a>>;
        let cases: [(&[u8], &[u8], Ipv4Addr, Build); 6] = [
            (&PROTO_253, &PROTO_UNREACH, B, |o| {
                Repr::dst_unreachable(DstUnreachable::ProtoUnreachable, o)
            }),
            (&UDP_TO_9, &PORT_UNREACH, B, |o| {
                Repr::dst_unreachable(DstUnreachable::PortUnreachable, o)
            }),
            (&TTL_1, &TIME_EXCEEDED, R, |o| {
                Repr::time_exceeded(TimeExceeded::TtlExpired, o)
            }),
            (&HOST_UNREACH[28..], &HOST_UNREACH, R, |o| {
                Repr::dst_unreachable(DstUnreachable::HostUnreachable, o)
            }),
            (&PROHIBITED[28..], &PROHIBITED, R, |o| {
                Repr::dst_unreachable(DstUnreachable::CommProhibited, o)
            }),
            (&NET_UNREACH[28..], &NET_UNREACH, R, |o| {
                Repr::dst_unreachable(DstUnreachable::NetUnreachable, o)
            }),
        ];
        for (offending, golden, src, build) in cases {
            let icmp = build(offending).unwrap();
            assert_eq!(emit(&icmp), &golden[20..]);
            assert_eq!(parse(&golden[20..]), icmp);
            let ident = u16::from_be_bytes([golden[4], golden[5]]);
            assert_eq!(
                emit_datagram(&error_ip(src, A, ident, &icmp), &icmp),
                golden
            );
            let ip = ipv4::Repr::parse(&ipv4::Packet::new_checked(golden).unwrap()).unwrap();
            assert_eq!(ip, error_ip(src, A, ident, &icmp));
        }
    }

    #[test]
    fn golden_error_fields() {
        let p = Packet::new_checked(&PORT_UNREACH[20..]).unwrap();
        assert_eq!((p.msg_type(), p.msg_code()), (Message::DST_UNREACHABLE, 3));
        assert!(p.msg_type().is_error());
        assert_eq!(p.data(), &UDP_TO_9[..]);
        let repr = Repr::parse(&p).unwrap();
        let inv = repr.invoking().unwrap();
        assert_eq!(
            (inv.src_addr(), inv.dst_addr(), inv.protocol()),
            (A, B, Protocol::UDP)
        );
        assert_eq!(
            inv.payload(),
            &UDP_TO_9[20..],
            "the quoted UDP header and data"
        );

        let repr = parse(&TIME_EXCEEDED[20..]);
        assert_eq!(
            repr,
            Repr::TimeExceeded {
                reason: TimeExceeded::TtlExpired,
                invoking: &TTL_1
            }
        );
        assert_eq!(repr.invoking().unwrap().ttl(), 1);
    }

    /// The RFC 1812 576-byte rule, checked against a Linux router: given the whole 1328-byte
    /// datagram, we quote exactly the 548 bytes it quoted, and the datagram matches.
    #[test]
    fn golden_frag_needed_576() {
        let frames = tcpdump_frames(FRAG_NEEDED_CAPTURE);
        assert_eq!(frames.len(), 2);
        let (request, error) = (&frames[0][14..], &frames[1][14..]);
        assert_eq!((request.len(), error.len()), (1328, 576));

        let reason = DstUnreachable::FragRequired { next_hop_mtu: 1280 };
        let icmp = Repr::dst_unreachable(reason, request).unwrap();
        assert_eq!(icmp.buffer_len(), 556);
        assert_eq!(emit(&icmp), &error[20..]);
        assert_eq!(parse(&error[20..]), icmp);
        let p = Packet::new_checked(&error[20..]).unwrap();
        assert_eq!(p.next_hop_mtu(), 1280);

        let ip = error_ip(R, A, u16::from_be_bytes([error[4], error[5]]), &icmp);
        assert_eq!(ip.total_len(), MAX_ERROR_DATAGRAM_LEN);
        assert_eq!(emit_datagram(&ip, &icmp), error);

        // The quote's view: header intact, total length 1328 although only 548 bytes are here.
        let inv = icmp.invoking().unwrap();
        assert_eq!((inv.total_len(), inv.payload().len()), (1328, 528));
        assert_eq!(inv.check_header(), Ok(()));
        assert_eq!(inv.check_len(), Err(Error::BadLength));
    }

    /// Quoting stops at the datagram's total length (hand-made: a captured datagram followed
    /// by Ethernet-style zero padding).
    #[test]
    fn quote_excludes_padding() {
        let mut padded = [0u8; 46];
        padded[..30].copy_from_slice(&UDP_TO_9);
        let icmp = Repr::dst_unreachable(DstUnreachable::PortUnreachable, &padded).unwrap();
        assert_eq!(emit(&icmp), &PORT_UNREACH[20..]);
    }

    #[test]
    fn builder_errors() {
        let r = DstUnreachable::HostUnreachable;
        assert_eq!(
            Repr::dst_unreachable(r, &UDP_TO_9[..19]),
            Err(Error::Truncated)
        );
        let mut v6 = UDP_TO_9;
        v6[0] = 0x65;
        assert_eq!(Repr::dst_unreachable(r, &v6), Err(Error::BadVersion));
        let mut ihl = UDP_TO_9;
        ihl[0] = 0x44;
        assert_eq!(
            Repr::time_exceeded(TimeExceeded::TtlExpired, &ihl),
            Err(Error::BadHeaderLen)
        );
        // A datagram already cut short (here: header only) is quoted as far as it goes.
        let icmp = Repr::dst_unreachable(r, &UDP_TO_9[..20]).unwrap();
        assert_eq!(icmp.buffer_len(), 28);
    }

    #[test]
    fn truncated_and_bad_checksum() {
        for n in 0..8 {
            assert_eq!(
                Packet::new_checked(&ECHO_REQUEST[..n]).unwrap_err(),
                Error::Truncated
            );
        }
        for i in 0..ECHO_REQUEST.len() {
            let mut b = ECHO_REQUEST;
            b[i] ^= 0x40;
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadChecksum, "byte {i}");
        }
        // Cutting data off breaks the checksum too (the checksum covers the whole message).
        let p = Packet::new_checked(&ECHO_REQUEST[..12]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadChecksum);
    }

    /// Hand-modified versions of the captures (checksum refilled) for the code and quote rules.
    #[test]
    fn unrecognized_and_malformed() {
        let modified = |golden: &[u8], f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = golden.to_vec();
            f(&mut b);
            Packet::new_unchecked(&mut b[..]).fill_checksum();
            b
        };
        let try_parse = |b: &[u8]| Repr::parse(&Packet::new_checked(b).unwrap()).map(|_| ());
        let unreach = &PORT_UNREACH[20..];
        // Unknown codes of known types.
        assert_eq!(
            try_parse(&modified(unreach, &|b| b[1] = 16)),
            Err(Error::Unrecognized)
        );
        let te = &TIME_EXCEEDED[20..];
        assert_eq!(
            try_parse(&modified(te, &|b| b[1] = 2)),
            Err(Error::Unrecognized)
        );
        assert_eq!(
            try_parse(&modified(&ECHO_REQUEST, &|b| b[1] = 1)),
            Err(Error::Unrecognized)
        );
        assert_eq!(
            try_parse(&modified(&ECHO_REPLY, &|b| b[1] = 9)),
            Err(Error::Unrecognized)
        );
        // Quotes that do not start with a complete IPv4 header.
        for f in [
            &(|b: &mut Vec<u8>| b.truncate(8 + 19)) as &dyn Fn(&mut Vec<u8>),
            &|b| b[8] = 0x65,
            &|b| b[8] = 0x44,
            &|b| b[8] = 0x4f,
            &|b| b.truncate(8),
        ] {
            assert_eq!(try_parse(&modified(unreach, f)), Err(Error::Malformed));
            assert_eq!(try_parse(&modified(te, f)), Err(Error::Malformed));
        }
        // A quote of just the header is enough.
        assert_eq!(try_parse(&modified(unreach, &|b| b.truncate(28))), Ok(()));
    }

    /// Other types survive parse → emit byte for byte (hand-made: the port-unreachable capture
    /// retyped as a redirect to 10.99.0.254, and a parameter problem with pointer 1).
    #[test]
    fn other_types() {
        for (ty, code, rest) in [(5u8, 1u8, [10, 99, 0, 254]), (12, 0, [1, 0, 0, 0])] {
            let mut b = PORT_UNREACH[20..].to_vec();
            b[0] = ty;
            b[1] = code;
            b[4..8].copy_from_slice(&rest);
            Packet::new_unchecked(&mut b[..]).fill_checksum();
            let repr = parse(&b);
            assert_eq!(
                repr,
                Repr::Other {
                    msg_type: Message(ty),
                    code,
                    rest_of_header: rest,
                    data: &UDP_TO_9
                }
            );
            assert!(repr.msg_type().is_error());
            assert_eq!(emit(&repr), b);
        }
    }

    #[test]
    fn may_send_error_rules() {
        let ok = |b: &[u8]| may_send_error(&ipv4::Packet::new_checked(b).unwrap());
        assert!(ok(&UDP_TO_9));
        assert!(ok(&TTL_1), "an echo request is not an error");
        assert!(!ok(&PORT_UNREACH), "never an error about an error");
        assert!(!ok(&TIME_EXCEEDED));
        // Fragments (hand-made: the UDP capture's flags/offset word rewritten).
        let frag = |word: u16| {
            let mut b = UDP_TO_9;
            b[6..8].copy_from_slice(&word.to_be_bytes());
            b
        };
        assert!(ok(&frag(0x2000)), "first fragment (MF, offset 0)");
        assert!(!ok(&frag(0x0001)), "last fragment, offset 8");
        assert!(!ok(&frag(0x2001)), "middle fragment");
        let with_addr = |off: usize, a: [u8; 4]| {
            let mut b = UDP_TO_9;
            b[off..off + 4].copy_from_slice(&a);
            b
        };
        for dst in [[255, 255, 255, 255], [224, 0, 0, 5], [239, 1, 2, 3]] {
            assert!(!ok(&with_addr(16, dst)), "dst {dst:?}");
        }
        for src in [
            [0, 0, 0, 0],
            [0, 1, 2, 3],
            [127, 0, 0, 1],
            [255, 255, 255, 255],
            [224, 0, 0, 1],
            [240, 0, 0, 1],
        ] {
            assert!(!ok(&with_addr(12, src)), "src {src:?}");
        }
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_msg_type(Message::DST_UNREACHABLE);
        p.set_msg_code(4);
        p.set_echo_ident(0x1234);
        p.set_echo_seq_no(0x5678);
        assert_eq!(p.rest_of_header(), [0x12, 0x34, 0x56, 0x78]);
        p.set_rest_of_header([0; 4]);
        p.set_next_hop_mtu(1400);
        assert_eq!(p.next_hop_mtu(), 1400);
        p.data_mut().copy_from_slice(&[9; 4]);
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(&p.into_inner()[8..], &[9; 4]);
    }

    #[test]
    fn codes_roundtrip() {
        for c in 0..=255u8 {
            if let Some(r) = DstUnreachable::from_code(c, 1500) {
                assert_eq!(r.code(), c);
            } else {
                assert!(c > 15);
            }
            if let Some(r) = TimeExceeded::from_code(c) {
                assert_eq!(r.code(), c);
            }
        }
    }

    /// parse → emit → parse on arbitrary messages that parse.
    #[test]
    fn roundtrip() {
        use proptest::prelude::*;
        proptest!(|(ty in prop_oneof![Just(0u8), Just(3), Just(8), Just(11), any::<u8>()],
                    code in prop_oneof![Just(0u8), 0u8..16], rest in any::<[u8; 4]>(),
                    body in proptest::collection::vec(any::<u8>(), 0..64))| {
            let mut b = std::vec![ty, code, 0, 0, rest[0], rest[1], rest[2], rest[3]];
            b.extend_from_slice(&body);
            if matches!(ty, 3 | 11) && b.len() >= 28 {
                b[8] = 0x45; // give error messages a plausible quote now and then
            }
            Packet::new_unchecked(&mut b[..]).fill_checksum();
            if let Ok(repr) = Repr::parse(&Packet::new_checked(&b[..]).unwrap()) {
                let out = emit(&repr);
                prop_assert_eq!(parse(&out), repr);
                prop_assert_eq!(out.len(), b.len());
            }
        });
    }
}
