//! ARP (RFC 826), as a router on Ethernet uses it: IPv4 over Ethernet.
//!
//! The view reads ARP generically (hardware and protocol address lengths come from the header),
//! so that a frame with some other hardware or protocol type can still be looked at, counted and
//! dropped without misreading its fields. The [`Repr`] is deliberately narrow: only
//! Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4) and only Request/Reply; anything else
//! is [`Error::Unrecognized`]. A generic `Repr` with variable-length address slices would make
//! every caller re-check the lengths that this one checks once, and vrhost has no use for
//! RARP/InARP or non-Ethernet hardware.

use core::net::Ipv4Addr;

use crate::ethernet::{EtherType, EthernetAddress};
use crate::{Error, Result};

/// Hardware type of Ethernet (the `htype` field).
pub const HTYPE_ETHERNET: u16 = 1;

mod field {
    use core::ops::Range;
    pub(super) const HTYPE: Range<usize> = 0..2;
    pub(super) const PTYPE: Range<usize> = 2..4;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: Range<usize> = 6..8;
    /// Start of the variable part: SHA, SPA, THA, TPA.
    pub(super) const ADDRS: usize = 8;
}

/// Length of the fixed part of the header (before the addresses).
pub const FIXED_LEN: usize = field::ADDRS;

/// Length of an Ethernet/IPv4 ARP packet (what [`Repr`] emits).
pub const ETHERNET_IPV4_LEN: usize = FIXED_LEN + 2 * (6 + 4);

/// ARP operation codes vrhost handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// "Who has TPA? Tell SPA." (1)
    Request,
    /// "SPA is at SHA." (2)
    Reply,
}

impl Operation {
    /// The `oper` field value.
    pub const fn code(self) -> u16 {
        match self {
            Operation::Request => 1,
            Operation::Reply => 2,
        }
    }

    /// From the `oper` field; `None` for other operations (RARP, InARP, …).
    pub const fn from_code(code: u16) -> Option<Operation> {
        match code {
            1 => Some(Operation::Request),
            2 => Some(Operation::Reply),
            _ => None,
        }
    }
}

/// A view of an ARP packet (the Ethernet payload).
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

    /// Wrap a buffer after checking it holds the fixed header and the four addresses whose
    /// lengths that header gives.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] unless the buffer holds the fixed header and `2 × (hlen + plen)`
    /// address bytes. Trailing bytes (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < FIXED_LEN || len < self.packet_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Bytes the packet takes according to its length fields: `8 + 2 × (hlen + plen)`.
    pub fn packet_len(&self) -> usize {
        FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }

    /// Hardware type (1 for Ethernet).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::HTYPE.start], d[field::HTYPE.start + 1]])
    }

    /// Protocol type, in EtherType numbering (0x0800 for IPv4).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        let d = self.buffer.as_ref();
        EtherType(u16::from_be_bytes([
            d[field::PTYPE.start],
            d[field::PTYPE.start + 1],
        ]))
    }

    /// Hardware address length in bytes.
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length in bytes.
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation code (raw; see [`Operation::from_code`]).
    #[inline]
    pub fn operation(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::OPER.start], d[field::OPER.start + 1]])
    }

    /// Offsets of SHA, SPA, THA, TPA and the end, from the length fields.
    fn offsets(&self) -> [usize; 5] {
        let (h, p) = (
            usize::from(self.hardware_len()),
            usize::from(self.protocol_len()),
        );
        let sha = field::ADDRS;
        [
            sha,
            sha + h,
            sha + h + p,
            sha + 2 * h + p,
            sha + 2 * (h + p),
        ]
    }

    /// Sender hardware address (`hlen` bytes).
    #[inline]
    pub fn sender_hardware_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[0]..o[1]]
    }

    /// Sender protocol address (`plen` bytes).
    #[inline]
    pub fn sender_protocol_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[1]..o[2]]
    }

    /// Target hardware address (`hlen` bytes).
    #[inline]
    pub fn target_hardware_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[2]..o[3]]
    }

    /// Target protocol address (`plen` bytes).
    #[inline]
    pub fn target_protocol_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[3]..o[4]]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the hardware type.
    #[inline]
    pub fn set_hardware_type(&mut self, v: u16) {
        self.buffer.as_mut()[field::HTYPE].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, v: EtherType) {
        self.buffer.as_mut()[field::PTYPE].copy_from_slice(&v.0.to_be_bytes())
    }

    /// Set the hardware address length (moves where the address setters write).
    #[inline]
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v
    }

    /// Set the protocol address length (moves where the address setters write).
    #[inline]
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v
    }

    /// Set the operation code.
    #[inline]
    pub fn set_operation(&mut self, v: u16) {
        self.buffer.as_mut()[field::OPER].copy_from_slice(&v.to_be_bytes())
    }

    /// Set the sender hardware address. `addr` must be `hlen` bytes long (panics otherwise).
    #[inline]
    pub fn set_sender_hardware_addr(&mut self, addr: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[0]..o[1]].copy_from_slice(addr)
    }

    /// Set the sender protocol address. `addr` must be `plen` bytes long (panics otherwise).
    #[inline]
    pub fn set_sender_protocol_addr(&mut self, addr: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[1]..o[2]].copy_from_slice(addr)
    }

    /// Set the target hardware address. `addr` must be `hlen` bytes long (panics otherwise).
    #[inline]
    pub fn set_target_hardware_addr(&mut self, addr: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[2]..o[3]].copy_from_slice(addr)
    }

    /// Set the target protocol address. `addr` must be `plen` bytes long (panics otherwise).
    #[inline]
    pub fn set_target_protocol_addr(&mut self, addr: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[3]..o[4]].copy_from_slice(addr)
    }
}

/// An Ethernet/IPv4 ARP request or reply as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// SHA: the sender's MAC.
    pub sender_hardware_addr: EthernetAddress,
    /// SPA: the sender's IPv4 address.
    pub sender_protocol_addr: Ipv4Addr,
    /// THA: the target's MAC (ignored in requests; often zero or broadcast).
    pub target_hardware_addr: EthernetAddress,
    /// TPA: the IPv4 address asked about (request) or answered to (reply).
    pub target_protocol_addr: Ipv4Addr,
}

/// Four bytes of a checked view as an address.
fn ipv4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

impl Repr {
    /// Read an Ethernet/IPv4 request or reply.
    ///
    /// Errors: [`Error::Truncated`] if the buffer is short; [`Error::Unrecognized`] for any
    /// hardware type other than Ethernet, protocol type other than IPv4, address lengths other
    /// than 6 and 4, or operation other than Request/Reply.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        if packet.buffer.as_ref().len() < FIXED_LEN {
            return Err(Error::Truncated);
        }
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unrecognized);
        }
        packet.check_len()?;
        let operation = Operation::from_code(packet.operation()).ok_or(Error::Unrecognized)?;
        Ok(Repr {
            operation,
            sender_hardware_addr: EthernetAddress::from_bytes(packet.sender_hardware_addr()),
            sender_protocol_addr: ipv4(packet.sender_protocol_addr()),
            target_hardware_addr: EthernetAddress::from_bytes(packet.target_hardware_addr()),
            target_protocol_addr: ipv4(packet.target_protocol_addr()),
        })
    }

    /// Bytes the packet takes: [`ETHERNET_IPV4_LEN`] (28).
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Write the packet into the first [`Repr::buffer_len`] bytes of the view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_hardware_type(HTYPE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation.code());
        packet.set_sender_hardware_addr(self.sender_hardware_addr.as_bytes());
        packet.set_sender_protocol_addr(&self.sender_protocol_addr.octets());
        packet.set_target_hardware_addr(self.target_hardware_addr.as_bytes());
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }

    /// The reply to this request from the owner of `target_protocol_addr`, whose MAC is
    /// `our_hardware_addr` (RFC 826 "swap the fields"). Meaningful for requests only.
    pub const fn reply(&self, our_hardware_addr: EthernetAddress) -> Repr {
        Repr {
            operation: Operation::Reply,
            sender_hardware_addr: our_hardware_addr,
            sender_protocol_addr: self.target_protocol_addr,
            target_hardware_addr: self.sender_hardware_addr,
            target_protocol_addr: self.sender_protocol_addr,
        }
    }

    /// A gratuitous ARP (RFC 5227 announcement): sender and target protocol addresses equal.
    pub fn is_gratuitous(&self) -> bool {
        self.sender_protocol_addr == self.target_protocol_addr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Both made by `testdata/capture.sh 'arping -c1 -I va 10.99.0.2' arp` (tcpdump -xx on a
    // veth between two namespaces); these are the 28 bytes after the Ethernet header. The
    // request comes from iputils arping (which puts ff:ff:ff:ff:ff:ff in THA), the reply from
    // the Linux kernel in namespace b.

    /// "Who has 10.99.0.2? Tell 10.99.0.1 (02:00:00:00:00:0a)."
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x0a,
        0x63, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0a, 0x63, 0x00, 0x02,
    ];

    /// "10.99.0.2 is at 02:00:00:00:00:0b."
    const REPLY: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x0a,
        0x63, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x0a, 0x63, 0x00, 0x01,
    ];

    const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0a]);
    const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0b]);
    const IP_A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const IP_B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

    fn request() -> Repr {
        Repr {
            operation: Operation::Request,
            sender_hardware_addr: MAC_A,
            sender_protocol_addr: IP_A,
            target_hardware_addr: EthernetAddress::BROADCAST,
            target_protocol_addr: IP_B,
        }
    }

    fn reply() -> Repr {
        Repr {
            operation: Operation::Reply,
            sender_hardware_addr: MAC_B,
            sender_protocol_addr: IP_B,
            target_hardware_addr: MAC_A,
            target_protocol_addr: IP_A,
        }
    }

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), HTYPE_ETHERNET);
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!(
            (p.hardware_len(), p.protocol_len(), p.operation()),
            (6, 4, 1)
        );
        assert_eq!(p.packet_len(), 28);
        assert_eq!(p.sender_hardware_addr(), MAC_A.as_bytes());
        assert_eq!(p.sender_protocol_addr(), &IP_A.octets());
        assert_eq!(p.target_hardware_addr(), &[0xff; 6]);
        assert_eq!(p.target_protocol_addr(), &IP_B.octets());
        assert_eq!(Repr::parse(&p).unwrap(), request());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&REPLY[..]).unwrap()).unwrap(),
            reply()
        );
        assert!(!request().is_gratuitous());
    }

    #[test]
    fn emit_golden() {
        for (repr, golden) in [(request(), REQUEST), (reply(), REPLY)] {
            let mut buf = [0u8; 28];
            assert_eq!(repr.buffer_len(), buf.len());
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            assert_eq!(buf, golden);
        }
    }

    /// Answering the captured request the way the kernel did gives the captured reply.
    #[test]
    fn reply_to_golden_request() {
        let req = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        let mut buf = [0u8; 28];
        req.reply(MAC_B)
            .emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REPLY);
    }

    /// A frame padded to the Ethernet minimum (hand-padded here: veth does not pad) parses the
    /// same; the padding is not part of the packet.
    #[test]
    fn padding_allowed() {
        let mut padded = [0u8; 46];
        padded[..28].copy_from_slice(&REQUEST);
        let p = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), request());
        assert_eq!(p.target_protocol_addr(), &IP_B.octets());
    }

    #[test]
    fn truncated() {
        for n in 0..28 {
            assert_eq!(
                Packet::new_checked(&REQUEST[..n]).unwrap_err(),
                Error::Truncated,
                "{n}"
            );
            let p = Packet::new_unchecked(&REQUEST[..n]);
            assert!(Repr::parse(&p).is_err(), "{n}");
        }
        // The length check follows the length fields: hlen 255 needs far more bytes.
        let mut big = REQUEST;
        big[4] = 255;
        assert_eq!(Packet::new_checked(&big[..]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn unrecognized() {
        // (byte offset, value): htype 6 (IEEE 802), ptype 0x8600, hlen 8, plen 16, oper 3 (RARP).
        for (i, v) in [(1, 6u8), (2, 0x86), (4, 8), (5, 16), (7, 3), (7, 0)] {
            let mut b = [0u8; 64];
            b[..28].copy_from_slice(&REQUEST);
            b[i] = v;
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(
                Repr::parse(&p).unwrap_err(),
                Error::Unrecognized,
                "byte {i} = {v}"
            );
        }
    }

    /// The view reads other address lengths correctly (hand-made: hlen 8, plen 16).
    #[test]
    fn generic_lengths() {
        let mut b = [0u8; 8 + 2 * (8 + 16)];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_hardware_type(6);
        p.set_protocol_type(EtherType::IPV6);
        p.set_hardware_len(8);
        p.set_protocol_len(16);
        p.set_operation(1);
        p.set_sender_hardware_addr(&[1; 8]);
        p.set_sender_protocol_addr(&[2; 16]);
        p.set_target_hardware_addr(&[3; 8]);
        p.set_target_protocol_addr(&[4; 16]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.packet_len(), 56);
        assert_eq!(p.sender_hardware_addr(), &[1; 8]);
        assert_eq!(p.sender_protocol_addr(), &[2; 16]);
        assert_eq!(p.target_hardware_addr(), &[3; 8]);
        assert_eq!(p.target_protocol_addr(), &[4; 16]);
        assert_eq!(b[8], 1);
        assert_eq!(b[55], 4);
    }

    #[test]
    fn roundtrip() {
        use proptest::prelude::*;
        proptest!(|(mut b in proptest::array::uniform28(any::<u8>()), op in 1u8..=2)| {
            b[..8].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, op]);
            let repr = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
            let mut out = [0u8; 28];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(out, b);
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), repr);
        });
    }

    #[test]
    fn operation_codes() {
        for op in [Operation::Request, Operation::Reply] {
            assert_eq!(Operation::from_code(op.code()), Some(op));
        }
        assert_eq!(Operation::from_code(3), None);
    }
}
