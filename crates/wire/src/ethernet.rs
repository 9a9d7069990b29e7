//! Ethernet II frames (IEEE 802.3 with an EtherType; no 802.3 length/LLC frames).
//!
//! The view covers the 14-byte header; the payload is everything after it. The frame check
//! sequence is not part of what ports hand us (NICs and veth strip it), so it is not modelled.
//! 802.1Q tags are a separate header ([`crate::vlan`]) because a tag is pushed and popped on the
//! forwarding path without touching the rest of the frame.

use core::fmt;

use crate::{Error, Result};

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// From the first six bytes of `data` (panics if shorter: for buffers already checked).
    pub fn from_bytes(data: &[u8]) -> EthernetAddress {
        let mut b = [0u8; 6];
        b.copy_from_slice(&data[..6]);
        EthernetAddress(b)
    }

    /// The six bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// A unicast address: the group bit (least significant bit of the first octet) is clear.
    pub const fn is_unicast(&self) -> bool {
        self.0[0] & 0x01 == 0
    }

    /// A multicast or broadcast address (group bit set).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// ff:ff:ff:ff:ff:ff
    pub const fn is_broadcast(&self) -> bool {
        let b = self.0;
        b[0] & b[1] & b[2] & b[3] & b[4] & b[5] == 0xff
    }

    /// Locally administered (U/L bit set).
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An EtherType. A newtype rather than an enum so that unknown values survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP
    pub const ARP: EtherType = EtherType(0x0806);
    /// IEEE 802.1Q customer VLAN tag (C-tag)
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IEEE 802.1ad service VLAN tag (S-tag, the outer tag of QinQ)
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// IPv6
    pub const IPV6: EtherType = EtherType(0x86dd);

    /// A VLAN tag of either kind follows (0x8100 or 0x88a8).
    pub const fn is_vlan(self) -> bool {
        self.0 == Self::VLAN.0 || self.0 == Self::QINQ.0
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> u16 {
        v.0
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub(super) const DESTINATION: Range<usize> = 0..6;
    pub(super) const SOURCE: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    pub(super) const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking its length: for buffers the caller sized itself.
    /// Getters on a too-short buffer panic.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer after checking it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// [`Error::Truncated`] unless the buffer holds a whole header.
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

    /// Destination MAC.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Source MAC.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// EtherType (of the payload, or a VLAN TPID if the frame is tagged).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        let d = self.buffer.as_ref();
        EtherType(u16::from_be_bytes([
            d[field::ETHERTYPE.start],
            d[field::ETHERTYPE.start + 1],
        ]))
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Set the destination MAC.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0)
    }

    /// Set the source MAC.
    #[inline]
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0)
    }

    /// Set the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&t.0.to_be_bytes())
    }

    /// Everything after the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The Ethernet II header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source MAC.
    pub src_addr: EthernetAddress,
    /// Destination MAC.
    pub dst_addr: EthernetAddress,
    /// EtherType.
    pub ethertype: EtherType,
}

impl Repr {
    /// Read the header from a checked view.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the first [`Repr::buffer_len`] bytes of the view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 18 bytes of a real ARP request, made by `testdata/capture.sh
    /// 'arping -c1 -I va 10.99.0.2' arp` (tcpdump -xx on a veth between two namespaces):
    /// broadcast destination, source 02:00:00:00:00:0a, EtherType ARP, start of the ARP payload.
    const GOLDEN: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00,
    ];

    fn golden_repr() -> Repr {
        Repr {
            dst_addr: EthernetAddress::BROADCAST,
            src_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]),
            ethertype: EtherType::ARP,
        }
    }

    #[test]
    fn parse_golden() {
        let f = Frame::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(Repr::parse(&f).unwrap(), golden_repr());
        assert_eq!(f.payload(), &GOLDEN[14..]);
        assert!(f.dst_addr().is_broadcast() && f.dst_addr().is_multicast());
        assert!(f.src_addr().is_unicast() && f.src_addr().is_local());
    }

    #[test]
    fn emit_golden() {
        let mut buf = GOLDEN;
        buf[..14].fill(0);
        let mut f = Frame::new_unchecked(&mut buf[..]);
        golden_repr().emit(&mut f);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&GOLDEN[..13]).unwrap_err(),
            Error::Truncated
        );
        assert!(Frame::new_checked(&GOLDEN[..14]).is_ok());
    }

    #[test]
    fn display() {
        extern crate alloc;
        use alloc::string::ToString;
        assert_eq!(golden_repr().src_addr.to_string(), "02:00:00:00:00:0a");
    }
}
