//! IEEE 802.1Q VLAN tags, 802.1ad QinQ stacks, and in-place push/pop for the forwarding path.
//!
//! On the wire a tag is four bytes inserted after the source MAC: a TPID (0x8100 for a C-tag,
//! 0x88a8 for an S-tag) where the EtherType was, then the TCI (PCP:3 DEI:1 VID:12), then the
//! EtherType of what the tag encloses.
//!
//! **What the view covers.** [`Packet`] is the TCI plus the *enclosed* EtherType (Linux's
//! `struct vlan_hdr`), not IEEE's TPID+TCI. The TPID is already what
//! [`ethernet::Frame::ethertype`] (or the previous tag's [`Packet::ethertype`]) returns, so with
//! this split the views chain like every other header: `Frame::payload()` → `vlan::Packet`,
//! whose `payload()` is the next header. A TPID+TCI view would leave every caller to read the
//! next EtherType out of the payload by hand.
//!
//! **Walking tags.** The data plane does not chain views: [`parse_tags`] reads up to
//! [`MAX_TAGS`] tags straight from the frame and returns the VIDs, the inner EtherType and the
//! L3 offset in one pass, which is what sub-interface demultiplexing needs. Two tags is the QinQ
//! limit we support; a third tag is [`Error::Unrecognized`] rather than being skipped, because
//! silently forwarding on the wrong VLAN is worse than a counted drop. An S-tag (0x88a8) inside
//! another tag is also [`Error::Unrecognized`]: 802.1ad only puts it outermost.
//!
//! **Push and pop in place.** [`push_tag`] and [`pop_tag`] move only the 12 MAC bytes, 4 bytes
//! into the buffer's headroom or back, and leave the rest of the frame where it is: copying the
//! payload instead would cost a memmove of the whole frame per packet. Both work on a whole
//! buffer plus the frame's `(start, len)` within it, which is how AF_XDP descriptors and most
//! packet-buffer pools describe a frame.
//!
//! VID 0 (priority-tagged) and VID 0xFFF (reserved) are passed through like any other VID;
//! whether a VID maps to an interface is the caller's lookup, not a parse error.

use crate::ethernet::{self, EtherType};
use crate::{Error, Result};

/// Bytes one tag adds to a frame (TPID + TCI).
pub const TAG_LEN: usize = 4;

/// How many stacked tags [`parse_tags`] accepts (QinQ: one S-tag and one C-tag).
pub const MAX_TAGS: usize = 2;

/// Bytes of the two MAC addresses that [`push_tag`]/[`pop_tag`] move.
const MACS_LEN: usize = 12;

mod field {
    use core::ops::{Range, RangeFrom};
    pub(super) const TCI: Range<usize> = 0..2;
    pub(super) const ETHERTYPE: Range<usize> = 2..4;
    pub(super) const PAYLOAD: RangeFrom<usize> = 4..;
}

/// Length of the view's header: TCI + enclosed EtherType.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Tag control information: priority code point, drop-eligible indicator, VLAN ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tci(pub u16);

impl Tci {
    /// Build a TCI. `pcp` is masked to 3 bits and `vid` to 12.
    pub const fn new(pcp: u8, dei: bool, vid: u16) -> Tci {
        Tci(((pcp as u16 & 0x7) << 13) | ((dei as u16) << 12) | (vid & 0x0fff))
    }

    /// Priority code point (802.1p), 0–7.
    pub const fn pcp(self) -> u8 {
        (self.0 >> 13) as u8
    }

    /// Drop-eligible indicator (formerly CFI).
    pub const fn dei(self) -> bool {
        self.0 & 0x1000 != 0
    }

    /// VLAN identifier, 0–4095.
    pub const fn vid(self) -> u16 {
        self.0 & 0x0fff
    }
}

/// One tag as it sits in a frame: which kind (TPID) and its TCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    /// [`EtherType::VLAN`] (C-tag) or [`EtherType::QINQ`] (S-tag).
    pub tpid: EtherType,
    /// Priority, DEI and VID.
    pub tci: Tci,
}

impl Tag {
    /// A C-tag (TPID 0x8100).
    pub const fn c_tag(tci: Tci) -> Tag {
        Tag {
            tpid: EtherType::VLAN,
            tci,
        }
    }

    /// An S-tag (TPID 0x88a8), the outer tag of 802.1ad QinQ.
    pub const fn s_tag(tci: Tci) -> Tag {
        Tag {
            tpid: EtherType::QINQ,
            tci,
        }
    }
}

/// A view of one 802.1Q tag's TCI and enclosed EtherType, i.e. the bytes after a TPID.
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

    /// Wrap a buffer after checking it holds a whole TCI + EtherType.
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

    /// The whole TCI.
    #[inline]
    pub fn tci(&self) -> Tci {
        let d = self.buffer.as_ref();
        Tci(u16::from_be_bytes([
            d[field::TCI.start],
            d[field::TCI.start + 1],
        ]))
    }

    /// Priority code point, 0–7.
    #[inline]
    pub fn pcp(&self) -> u8 {
        self.tci().pcp()
    }

    /// Drop-eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci().dei()
    }

    /// VLAN identifier.
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci().vid()
    }

    /// EtherType of what the tag encloses (another TPID if tags are stacked).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        let d = self.buffer.as_ref();
        EtherType(u16::from_be_bytes([
            d[field::ETHERTYPE.start],
            d[field::ETHERTYPE.start + 1],
        ]))
    }

    /// Everything after the enclosed EtherType.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the whole TCI.
    #[inline]
    pub fn set_tci(&mut self, tci: Tci) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.0.to_be_bytes())
    }

    /// Set the priority code point (masked to 3 bits), keeping DEI and VID.
    #[inline]
    pub fn set_pcp(&mut self, pcp: u8) {
        let t = self.tci();
        self.set_tci(Tci::new(pcp, t.dei(), t.vid()))
    }

    /// Set the drop-eligible indicator, keeping PCP and VID.
    #[inline]
    pub fn set_dei(&mut self, dei: bool) {
        let t = self.tci();
        self.set_tci(Tci::new(t.pcp(), dei, t.vid()))
    }

    /// Set the VLAN ID (masked to 12 bits), keeping PCP and DEI: VLAN translation in place.
    #[inline]
    pub fn set_vid(&mut self, vid: u16) {
        let t = self.tci();
        self.set_tci(Tci::new(t.pcp(), t.dei(), vid))
    }

    /// Set the enclosed EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&t.0.to_be_bytes())
    }

    /// Everything after the enclosed EtherType, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// One tag's TCI and enclosed EtherType as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Priority code point, 0–7.
    pub pcp: u8,
    /// Drop-eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0–4095.
    pub vid: u16,
    /// EtherType of what the tag encloses.
    pub ethertype: EtherType,
}

impl Repr {
    /// Read the tag from a view.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        let tci = packet.tci();
        Ok(Repr {
            pcp: tci.pcp(),
            dei: tci.dei(),
            vid: tci.vid(),
            ethertype: packet.ethertype(),
        })
    }

    /// The TCI these fields make (`pcp` and `vid` masked to their widths).
    pub const fn tci(&self) -> Tci {
        Tci::new(self.pcp, self.dei, self.vid)
    }

    /// Bytes the view's header takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write TCI and EtherType into the first [`Repr::buffer_len`] bytes of the view.
    /// `pcp` must be < 8 and `vid` < 4096 (masked otherwise).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        debug_assert!(self.pcp < 8 && self.vid < 0x1000, "PCP or VID out of range");
        packet.set_tci(self.tci());
        packet.set_ethertype(self.ethertype);
    }
}

/// What [`parse_tags`] found at the front of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tags {
    tags: [Tag; MAX_TAGS],
    count: u8,
    ethertype: EtherType,
    l3_offset: usize,
}

impl Tags {
    /// The tags in frame order, outermost first (empty for an untagged frame).
    pub fn tags(&self) -> &[Tag] {
        &self.tags[..usize::from(self.count)]
    }

    /// Number of tags, 0 to [`MAX_TAGS`].
    pub const fn len(&self) -> usize {
        self.count as usize
    }

    /// An untagged frame.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The outermost tag (the S-tag of a QinQ frame, the only tag of a single-tagged one).
    pub const fn outer(&self) -> Option<Tag> {
        if self.count >= 1 {
            Some(self.tags[0])
        } else {
            None
        }
    }

    /// The inner tag of a QinQ frame; `None` unless there are two tags.
    pub const fn inner(&self) -> Option<Tag> {
        if self.count >= 2 {
            Some(self.tags[1])
        } else {
            None
        }
    }

    /// `(outer VID, inner VID)`: the key for QinQ sub-interface lookup.
    pub const fn vids(&self) -> (Option<u16>, Option<u16>) {
        let o = if self.count >= 1 {
            Some(self.tags[0].tci.vid())
        } else {
            None
        };
        let i = if self.count >= 2 {
            Some(self.tags[1].tci.vid())
        } else {
            None
        };
        (o, i)
    }

    /// EtherType of the L3 payload, after the last tag.
    pub const fn ethertype(&self) -> EtherType {
        self.ethertype
    }

    /// Offset from the start of the frame to the L3 header (14 + 4 per tag).
    pub const fn l3_offset(&self) -> usize {
        self.l3_offset
    }
}

/// Walk the VLAN tags at the front of an Ethernet frame (starting at the destination MAC).
///
/// Errors: [`Error::Truncated`] if the frame ends inside the Ethernet header or a tag;
/// [`Error::Unrecognized`] for a third tag, or for an S-tag (0x88a8) inside another tag.
/// An untagged frame is `Ok` with no tags and `l3_offset` 14.
pub fn parse_tags(frame: &[u8]) -> Result<Tags> {
    let eth = ethernet::Frame::new_checked(frame)?;
    let mut tags = Tags {
        tags: [Tag::c_tag(Tci(0)); MAX_TAGS],
        count: 0,
        ethertype: eth.ethertype(),
        l3_offset: ethernet::HEADER_LEN,
    };
    while tags.ethertype.is_vlan() {
        if usize::from(tags.count) == MAX_TAGS
            || (tags.count > 0 && tags.ethertype == EtherType::QINQ)
        {
            return Err(Error::Unrecognized);
        }
        let tag = Packet::new_checked(&frame[tags.l3_offset..])?;
        tags.tags[usize::from(tags.count)] = Tag {
            tpid: tags.ethertype,
            tci: tag.tci(),
        };
        tags.count += 1;
        tags.ethertype = tag.ethertype();
        tags.l3_offset += TAG_LEN;
    }
    Ok(tags)
}

/// Check that `buf[start..start + len]` exists and holds at least `min` bytes.
fn check_frame(buf: &[u8], start: usize, len: usize, min: usize) -> Result<()> {
    match start.checked_add(len) {
        Some(end) if end <= buf.len() && len >= min => Ok(()),
        _ => Err(Error::Truncated),
    }
}

/// Push `tag` as the new outermost tag of the frame at `buf[start..start + len]`, in place.
///
/// The 12 MAC bytes move 4 bytes earlier, into the headroom, and the tag goes where they were;
/// the old EtherType (or old outer tag) and the payload stay put. Returns the new start: the
/// frame is now `buf[start - 4..start + len]`, 4 bytes longer.
///
/// Errors ([`Error::Truncated`]): `start < 4` (no headroom), `len < 14`, or the frame does not
/// fit in `buf`. The buffer is unchanged on error. Pushing does not check how many tags the
/// frame already has.
pub fn push_tag(buf: &mut [u8], start: usize, len: usize, tag: Tag) -> Result<usize> {
    check_frame(buf, start, len, ethernet::HEADER_LEN)?;
    let new_start = start.checked_sub(TAG_LEN).ok_or(Error::Truncated)?;
    buf.copy_within(start..start + MACS_LEN, new_start);
    let t = new_start + MACS_LEN;
    buf[t..t + 2].copy_from_slice(&tag.tpid.0.to_be_bytes());
    buf[t + 2..t + 4].copy_from_slice(&tag.tci.0.to_be_bytes());
    Ok(new_start)
}

/// Pop the outermost tag of the frame at `buf[start..start + len]`, in place.
///
/// The 12 MAC bytes move 4 bytes later, over the tag; the rest of the frame stays put. Returns
/// the popped tag and the new start: the frame is now `buf[start + 4..start + len]`, 4 bytes
/// shorter. The 4 bytes at the old start are left as they were (now headroom).
///
/// Errors: [`Error::Truncated`] if the frame does not fit in `buf` or is shorter than an
/// Ethernet header plus one tag; [`Error::Unrecognized`] if the frame's EtherType is not a
/// TPID (0x8100 or 0x88a8). The buffer is unchanged on error.
pub fn pop_tag(buf: &mut [u8], start: usize, len: usize) -> Result<(Tag, usize)> {
    check_frame(buf, start, len, ethernet::HEADER_LEN + TAG_LEN)?;
    let t = start + MACS_LEN;
    let tpid = EtherType(u16::from_be_bytes([buf[t], buf[t + 1]]));
    if !tpid.is_vlan() {
        return Err(Error::Unrecognized);
    }
    let tci = Tci(u16::from_be_bytes([buf[t + 2], buf[t + 3]]));
    buf.copy_within(start..start + MACS_LEN, start + TAG_LEN);
    Ok((Tag { tpid, tci }, start + TAG_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arp;
    use std::vec::Vec;

    // The golden frames below are real: the kernel built them and the kernel tagged them.
    // `testdata/capture_vlan.sh TAGS 'ping -c1 -W1 -s 8 10.99.0.2' 'ether dst 02:00:00:00:00:0b'`
    // (tcpdump -xx on a veth between two namespaces). That kernel has no 8021q module, so the
    // script pushes the tags with a tc BPF program calling bpf_skb_vlan_push() and turns VLAN
    // tx offload off so the tags are in the captured bytes; see the script's header.

    /// TAGS = `0x8100:0xa00a`: one C-tag, PCP 5, VID 10, around an ICMP echo request.
    const DOT1Q: [u8; 54] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x81, 0x00, 0xa0,
        0x0a, 0x08, 0x00, 0x45, 0x00, 0x00, 0x24, 0x24, 0x2b, 0x40, 0x00, 0x40, 0x01, 0x01, 0xe6,
        0x0a, 0x63, 0x00, 0x01, 0x0a, 0x63, 0x00, 0x02, 0x08, 0x00, 0xca, 0x4e, 0x21, 0xa0, 0x00,
        0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// TAGS = `0x8100:0x6014 0x88a8:0x1064`: QinQ, S-tag DEI VID 100 outside C-tag PCP 3 VID 20.
    const QINQ: [u8; 58] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x88, 0xa8, 0x10,
        0x64, 0x81, 0x00, 0x60, 0x14, 0x08, 0x00, 0x45, 0x00, 0x00, 0x24, 0xee, 0x32, 0x40, 0x00,
        0x40, 0x01, 0x37, 0xde, 0x0a, 0x63, 0x00, 0x01, 0x0a, 0x63, 0x00, 0x02, 0x08, 0x00, 0xc9,
        0xb8, 0x22, 0x36, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];

    /// TAGS = `0x8100:0x6014 0x88a8:0x1064 0x8100:0x0007`: a third tag (C-tag VID 7) outside
    /// the QinQ pair, which `parse_tags` refuses.
    const TRIPLE: [u8; 62] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x81, 0x00, 0x00,
        0x07, 0x88, 0xa8, 0x10, 0x64, 0x81, 0x00, 0x60, 0x14, 0x08, 0x00, 0x45, 0x00, 0x00, 0x24,
        0xfb, 0xef, 0x40, 0x00, 0x40, 0x01, 0x2a, 0x21, 0x0a, 0x63, 0x00, 0x01, 0x0a, 0x63, 0x00,
        0x02, 0x08, 0x00, 0xc9, 0x8e, 0x22, 0x60, 0x00, 0x01, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05,
        0x06, 0x07,
    ];

    /// TAGS = `0x8100:0xa00a`, command `arping -c1 -w1 -I va 10.99.0.2`, filter `arp or vlan`:
    /// a tagged ARP request.
    const ARP_DOT1Q: [u8; 46] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x81, 0x00, 0xa0,
        0x0a, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0x0a, 0x0a, 0x63, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0a, 0x63, 0x00,
        0x02,
    ];

    /// `frame` with the 4 bytes of its outermost tag cut out (what popping must leave).
    fn untagged(frame: &[u8]) -> Vec<u8> {
        [&frame[..12], &frame[16..]].concat()
    }

    #[test]
    fn tci_bits() {
        let t = Tci(0xa00a);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (5, false, 10));
        assert_eq!(Tci::new(5, false, 10), t);
        let t = Tci(0x1064);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (0, true, 100));
        assert_eq!(Tci::new(3, false, 20), Tci(0x6014));
        // Out-of-range inputs are masked, not spilled into the neighbouring field.
        assert_eq!(Tci::new(0xff, true, 0xffff), Tci(0xffff));
        assert_eq!(Tci::new(8, false, 0x1000), Tci(0));
    }

    #[test]
    fn parse_golden_dot1q() {
        let eth = ethernet::Frame::new_checked(&DOT1Q[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::VLAN);
        let tag = Packet::new_checked(eth.payload()).unwrap();
        let repr = Repr::parse(&tag).unwrap();
        assert_eq!(
            repr,
            Repr {
                pcp: 5,
                dei: false,
                vid: 10,
                ethertype: EtherType::IPV4
            }
        );
        assert_eq!(tag.payload(), &DOT1Q[18..]);
        assert_eq!(tag.payload()[0], 0x45);

        let tags = parse_tags(&DOT1Q).unwrap();
        assert_eq!(tags.tags(), &[Tag::c_tag(Tci(0xa00a))]);
        assert_eq!(tags.len(), 1);
        assert_eq!(tags.outer(), Some(Tag::c_tag(Tci(0xa00a))));
        assert_eq!(tags.inner(), None);
        assert_eq!(tags.vids(), (Some(10), None));
        assert_eq!(tags.ethertype(), EtherType::IPV4);
        assert_eq!(tags.l3_offset(), 18);
    }

    #[test]
    fn emit_golden_dot1q() {
        let mut buf = DOT1Q;
        buf[14..18].fill(0);
        Repr {
            pcp: 5,
            dei: false,
            vid: 10,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut Packet::new_unchecked(&mut buf[14..]));
        assert_eq!(buf, DOT1Q);
    }

    #[test]
    fn parse_golden_qinq() {
        let tags = parse_tags(&QINQ).unwrap();
        assert_eq!(
            tags.tags(),
            &[Tag::s_tag(Tci(0x1064)), Tag::c_tag(Tci(0x6014))]
        );
        assert_eq!(tags.vids(), (Some(100), Some(20)));
        assert_eq!(tags.ethertype(), EtherType::IPV4);
        assert_eq!(tags.l3_offset(), 22);
        assert_eq!(QINQ[tags.l3_offset()], 0x45);

        // Chained views give the same answer.
        let eth = ethernet::Frame::new_checked(&QINQ[..]).unwrap();
        let s = Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(
            Repr::parse(&s).unwrap(),
            Repr {
                pcp: 0,
                dei: true,
                vid: 100,
                ethertype: EtherType::VLAN
            }
        );
        let c = Packet::new_checked(s.payload()).unwrap();
        assert_eq!(
            Repr::parse(&c).unwrap(),
            Repr {
                pcp: 3,
                dei: false,
                vid: 20,
                ethertype: EtherType::IPV4
            }
        );
    }

    #[test]
    fn emit_golden_qinq() {
        let mut buf = QINQ;
        buf[14..22].fill(0);
        Repr {
            pcp: 0,
            dei: true,
            vid: 100,
            ethertype: EtherType::VLAN,
        }
        .emit(&mut Packet::new_unchecked(&mut buf[14..]));
        Repr {
            pcp: 3,
            dei: false,
            vid: 20,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut Packet::new_unchecked(&mut buf[18..]));
        assert_eq!(buf, QINQ);
    }

    #[test]
    fn third_tag_unrecognized() {
        assert_eq!(parse_tags(&TRIPLE).unwrap_err(), Error::Unrecognized);
        // Its outer C-tag encloses an S-tag, which is itself refused …
        assert_eq!(parse_tags(&TRIPLE[..20]).unwrap_err(), Error::Unrecognized);
        // … and three C-tags are refused for the count alone (hand-made: TRIPLE's S-TPID
        // rewritten to 0x8100).
        let mut three_c = TRIPLE;
        three_c[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_tags(&three_c).unwrap_err(), Error::Unrecognized);
        // Two C-tags (pre-802.1ad "double 0x8100" QinQ) are fine.
        let (_, s) = pop_tag(&mut three_c, 0, 62).unwrap();
        assert_eq!(
            parse_tags(&three_c[s..]).map(|t| t.vids()),
            Ok((Some(100), Some(20)))
        );
    }

    #[test]
    fn untagged_and_truncated() {
        let plain = untagged(&DOT1Q);
        let tags = parse_tags(&plain).unwrap();
        assert!(tags.is_empty());
        assert_eq!(
            (tags.ethertype(), tags.l3_offset(), tags.vids()),
            (EtherType::IPV4, 14, (None, None))
        );
        assert_eq!(tags.outer(), None);
        // Cut at every length up to the end of the last tag: Truncated; from there on, fine
        // (the walker does not look at L3).
        for n in 0..18 {
            assert_eq!(
                parse_tags(&DOT1Q[..n]).unwrap_err(),
                Error::Truncated,
                "len {n}"
            );
        }
        assert!(parse_tags(&DOT1Q[..18]).is_ok());
        for n in 0..22 {
            assert_eq!(
                parse_tags(&QINQ[..n]).unwrap_err(),
                Error::Truncated,
                "len {n}"
            );
        }
        assert!(parse_tags(&QINQ[..22]).is_ok());
        for n in 0..4 {
            assert_eq!(
                Packet::new_checked(&DOT1Q[14..14 + n]).unwrap_err(),
                Error::Truncated
            );
        }
        assert!(Packet::new_checked(&DOT1Q[14..18]).is_ok());
    }

    #[test]
    fn tagged_arp() {
        let tags = parse_tags(&ARP_DOT1Q).unwrap();
        assert_eq!(tags.vids(), (Some(10), None));
        assert_eq!(tags.ethertype(), EtherType::ARP);
        let arp = arp::Packet::new_checked(&ARP_DOT1Q[tags.l3_offset()..]).unwrap();
        let repr = arp::Repr::parse(&arp).unwrap();
        assert_eq!(repr.operation, arp::Operation::Request);
        assert_eq!(
            repr.target_protocol_addr,
            core::net::Ipv4Addr::new(10, 99, 0, 2)
        );
    }

    #[test]
    fn setters() {
        let mut buf = DOT1Q;
        let mut p = Packet::new_unchecked(&mut buf[14..]);
        p.set_vid(4000);
        assert_eq!((p.pcp(), p.dei(), p.vid()), (5, false, 4000));
        p.set_pcp(1);
        p.set_dei(true);
        assert_eq!((p.pcp(), p.dei(), p.vid()), (1, true, 4000));
        p.set_ethertype(EtherType::IPV6);
        assert_eq!(p.ethertype(), EtherType::IPV6);
        p.payload_mut()[0] = 0x60;
        assert_eq!(p.into_inner()[4], 0x60);
        assert_eq!(&buf[..14], &DOT1Q[..14], "setters stay inside the tag");
        assert_eq!(&buf[19..], &DOT1Q[19..]);
    }

    /// Pop the captured tag, push it back: the bytes are the capture again, and the MACs and
    /// payload only ever moved, never changed.
    #[test]
    fn pop_push_golden_byte_exact() {
        for golden in [&DOT1Q[..], &QINQ[..], &ARP_DOT1Q[..]] {
            let head = 8; // arbitrary headroom
            let mut buf = std::vec![0xeeu8; head + golden.len()];
            buf[head..].copy_from_slice(golden);

            let (tag, start) = pop_tag(&mut buf, head, golden.len()).unwrap();
            assert_eq!(start, head + 4);
            assert_eq!(&buf[start..], &untagged(golden)[..]);
            assert_eq!(
                &buf[..head],
                &[0xee; 8],
                "nothing before the frame is touched"
            );
            assert_eq!(tag.tpid.0, u16::from_be_bytes([golden[12], golden[13]]));
            assert_eq!(tag.tci.0, u16::from_be_bytes([golden[14], golden[15]]));

            let start = push_tag(&mut buf, start, golden.len() - 4, tag).unwrap();
            assert_eq!(start, head);
            assert_eq!(&buf[start..], golden);
            assert_eq!(&buf[..head], &[0xee; 8]);
        }
    }

    /// Push onto an untagged frame twice (C then S): exactly the captured QinQ frame.
    #[test]
    fn push_builds_qinq() {
        let plain = untagged(&untagged(&QINQ));
        let mut buf = std::vec![0u8; 8 + plain.len()];
        buf[8..].copy_from_slice(&plain);
        let s = push_tag(&mut buf, 8, plain.len(), Tag::c_tag(Tci::new(3, false, 20))).unwrap();
        let s = push_tag(
            &mut buf,
            s,
            plain.len() + 4,
            Tag::s_tag(Tci::new(0, true, 100)),
        )
        .unwrap();
        assert_eq!(s, 0);
        assert_eq!(&buf[..], &QINQ[..]);
        // And back down to untagged.
        let (outer, s) = pop_tag(&mut buf, 0, QINQ.len()).unwrap();
        let (inner, s) = pop_tag(&mut buf, s, QINQ.len() - 4).unwrap();
        assert_eq!((outer.tci.vid(), inner.tci.vid()), (100, 20));
        assert_eq!(&buf[s..], &plain[..]);
    }

    #[test]
    fn push_pop_errors_leave_buffer_alone() {
        let mut buf = [0u8; 70];
        buf[4..58].copy_from_slice(&DOT1Q);
        let orig = buf;
        let tag = Tag::c_tag(Tci(1));
        // No headroom.
        assert_eq!(push_tag(&mut buf[4..], 0, 54, tag), Err(Error::Truncated));
        assert_eq!(push_tag(&mut buf, 3, 54, tag), Err(Error::Truncated));
        // Frame too short or outside the buffer (including overflow of start + len).
        assert_eq!(push_tag(&mut buf, 4, 13, tag), Err(Error::Truncated));
        assert_eq!(push_tag(&mut buf, 4, 67, tag), Err(Error::Truncated));
        assert_eq!(
            push_tag(&mut buf, usize::MAX, 14, tag),
            Err(Error::Truncated)
        );
        assert_eq!(pop_tag(&mut buf, 4, 17), Err(Error::Truncated));
        assert_eq!(pop_tag(&mut buf, 4, 67), Err(Error::Truncated));
        assert_eq!(pop_tag(&mut buf, usize::MAX, 18), Err(Error::Truncated));
        // Untagged frame: nothing to pop.
        assert_eq!(pop_tag(&mut buf, 8, 50), Err(Error::Unrecognized));
        assert_eq!(buf, orig);
        // The minimal cases work.
        assert!(push_tag(&mut buf, 4, 14, tag).is_ok());
        assert!(pop_tag(&mut buf, 0, 18).is_ok());
    }

    #[test]
    fn push_pop_roundtrip_any_frame() {
        use proptest::prelude::*;
        proptest!(|(frame in proptest::collection::vec(any::<u8>(), 14..100),
                    head in 4usize..12, tpid in prop_oneof![Just(0x8100u16), Just(0x88a8)],
                    tci in any::<u16>())| {
            let mut buf = std::vec![0u8; head + frame.len()];
            buf[head..].copy_from_slice(&frame);
            let tag = Tag { tpid: EtherType(tpid), tci: Tci(tci) };
            let s = push_tag(&mut buf, head, frame.len(), tag).unwrap();
            prop_assert_eq!(s, head - 4);
            let t = parse_tags(&buf[s..]);
            if let Ok(t) = t {
                prop_assert_eq!(t.outer(), Some(tag));
            }
            let (popped, s) = pop_tag(&mut buf, s, frame.len() + 4).unwrap();
            prop_assert_eq!(popped, tag);
            prop_assert_eq!(s, head);
            prop_assert_eq!(&buf[s..], &frame[..]);
        });
    }

    #[test]
    fn parse_emit_roundtrip() {
        use proptest::prelude::*;
        proptest!(|(bytes in proptest::array::uniform4(any::<u8>()))| {
            let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0u8; 4];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(out, bytes);
        });
    }
}
