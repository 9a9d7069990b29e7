//! The payload signature: what the sink needs to know about a frame, carried in the frame.
//!
//! Every generated frame carries, right after its UDP header, [`LEN`] = 18 bytes:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 2 | magic `0x5642` ("VB") |
//! | 2 | 4 | stream id, big-endian |
//! | 6 | 6 | sequence number in the stream, low 48 bits, big-endian |
//! | 12 | 6 | transmit time, CLOCK_MONOTONIC ns, low 48 bits, big-endian |
//!
//! **Why 18 bytes and 48-bit fields.** A 64-byte frame on the wire is 60 bytes without the
//! FCS; Ethernet, IPv4 and UDP headers take 42 of them, leaving exactly 18. A signature that
//! did not fit the smallest RFC 2544 frame would make 64-byte tests unsigned, and 64-byte
//! tests are the ones that matter most. Full 64-bit sequence and time fields (22 bytes with
//! the stream id, more with a magic) do not fit; TRex makes the same trade (16 bytes, 32-bit
//! sequence). 48 bits are enough: a sequence wraps after 2⁴⁸ frames (108 days at 30 Mpps),
//! and the sink widens it back to 64 bits against the highest sequence seen
//! ([`extend48`]); a timestamp wraps after 2⁴⁸ ns (78 hours), and a latency is taken modulo
//! 2⁴⁸ ([`latency_ns`]), which is exact for any latency under 78 hours.
//!
//! **Why CLOCK_MONOTONIC.** It is one clock for every process on the host and it is what
//! `bpf_ktime_get_ns()` reads, so a generator in one thread, a sink in another, or a BPF
//! program stamping frames in the kernel all agree (the TSC would need calibration per
//! reader; wall-clock time jumps).
//!
//! **Why a 2-byte magic is enough.** The sink also requires a known stream id, a UDP
//! length that covers the signature, and an unfragmented IPv4 or plain IPv6 datagram; a
//! stray frame passing all of that is counted as that stream's frame only if its id is
//! one the sink was told about.
//!
//! The frame around the signature is found by [`locate`]: Ethernet, up to two 802.1Q/802.1ad
//! tags, IPv4 (any header length, first fragment only) or IPv6 (UDP as the next header, no
//! extension headers), UDP.

use vrhost_wire::EtherType;
use vrhost_wire::{checksum, ethernet, ipv4, ipv6, udp, vlan};

/// Bytes of the signature.
pub const LEN: usize = 18;
/// The first two bytes of every signature.
pub const MAGIC: u16 = 0x5642;
/// Mask of the 48 bits of sequence and time that travel.
pub const MASK48: u64 = (1 << 48) - 1;

mod field {
    use core::ops::Range;
    pub(crate) const MAGIC: Range<usize> = 0..2;
    pub(crate) const STREAM: Range<usize> = 2..6;
    pub(crate) const SEQ: Range<usize> = 6..12;
    pub(crate) const TIME: Range<usize> = 12..18;
}
pub(crate) use field::{SEQ as SEQ_FIELD, STREAM as STREAM_FIELD, TIME as TIME_FIELD};

const _: () = assert!(field::TIME.end == LEN);
/// IPv4 protocol / IPv6 next header number of UDP.
const IPPROTO_UDP: u8 = 17;

/// What a signature says. `seq` and `tx_ns` travel as their low 48 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Stream the frame belongs to.
    pub stream: u32,
    /// Sequence number within the stream (0, 1, 2, … in sending order).
    pub seq: u64,
    /// Transmit time, CLOCK_MONOTONIC in ns.
    pub tx_ns: u64,
}

impl Signature {
    /// Write the signature into the first [`LEN`] bytes of `payload` (a UDP payload).
    ///
    /// Panics if `payload` is shorter than [`LEN`].
    #[inline]
    pub fn emit(&self, payload: &mut [u8]) {
        let b = &mut payload[..LEN];
        b[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        b[field::STREAM].copy_from_slice(&self.stream.to_be_bytes());
        b[field::SEQ].copy_from_slice(&be48(self.seq));
        b[field::TIME].copy_from_slice(&be48(self.tx_ns));
    }

    /// Read a signature from the start of a UDP payload; `None` without the magic or if the
    /// payload is too short. `seq` and `tx_ns` come back as their 48 transmitted bits.
    #[inline]
    pub fn parse_payload(payload: &[u8]) -> Option<Signature> {
        let b: &[u8; LEN] = payload.get(..LEN)?.try_into().ok()?;
        if u16::from_be_bytes([b[0], b[1]]) != MAGIC {
            return None;
        }
        Some(Signature {
            stream: u32::from_be_bytes([b[2], b[3], b[4], b[5]]),
            seq: from_be48(&b[field::SEQ]),
            tx_ns: from_be48(&b[field::TIME]),
        })
    }

    /// One's-complement sum of the bytes [`Signature::emit`] writes (for a UDP checksum).
    pub fn sum(&self) -> u16 {
        let mut b = [0u8; LEN];
        self.emit(&mut b);
        checksum::data(&b)
    }
}

/// The low 48 bits of `v`, big-endian.
#[inline(always)]
pub(crate) fn be48(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

#[inline(always)]
fn from_be48(b: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

/// The one's-complement sum of the three 16-bit words of `v`'s low 48 bits, not folded
/// (at most 3 × 0xFFFF).
#[inline(always)]
pub(crate) fn words48(v: u64) -> u32 {
    ((v & 0xffff) + ((v >> 16) & 0xffff) + ((v >> 32) & 0xffff)) as u32
}

/// Offset of the UDP payload in `frame` if it is Ethernet [802.1Q]* / IPv4 or IPv6 / UDP
/// with room for a signature; else `None`. Checks lengths, so any bytes are safe input.
#[inline]
pub fn locate(frame: &[u8]) -> Option<usize> {
    let mut off = ethernet::HEADER_LEN;
    let mut ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    for _ in 0..vlan::MAX_TAGS {
        if !EtherType(ty).is_vlan() {
            break;
        }
        ty = u16::from_be_bytes([*frame.get(off + 2)?, *frame.get(off + 3)?]);
        off += vlan::TAG_LEN;
    }
    let l3 = frame.get(off..)?;
    let udp_at = if ty == EtherType::IPV4.0 {
        let h = l3.get(..ipv4::HEADER_LEN)?;
        let ihl = usize::from(h[0] & 0x0f) * 4;
        // Version 4, a sane header length, UDP, and not a later fragment (offset 0).
        if h[0] >> 4 != 4 || ihl < ipv4::HEADER_LEN || h[9] != IPPROTO_UDP {
            return None;
        }
        if u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0 {
            return None;
        }
        off + ihl
    } else if ty == EtherType::IPV6.0 {
        let h = l3.get(..ipv6::HEADER_LEN)?;
        if h[0] >> 4 != 6 || h[6] != IPPROTO_UDP {
            return None;
        }
        off + ipv6::HEADER_LEN
    } else {
        return None;
    };
    let u = frame.get(udp_at..udp_at + udp::HEADER_LEN + LEN)?;
    if usize::from(u16::from_be_bytes([u[4], u[5]])) < udp::HEADER_LEN + LEN {
        return None;
    }
    Some(udp_at + udp::HEADER_LEN)
}

/// The signature of `frame`, or `None` if it is not a UDP frame carrying one.
#[inline]
pub fn parse(frame: &[u8]) -> Option<Signature> {
    Signature::parse_payload(&frame[locate(frame)?..])
}

/// Write `sig` into `frame` in place (after its UDP header) and update the UDP checksum
/// incrementally (RFC 1624): an IPv4 datagram sent without checksum (0) keeps none, and a
/// result of 0 is sent as 0xFFFF. Returns false, leaving the frame as it was, if `frame` is
/// not a UDP frame with room for a signature (see [`locate`]).
///
/// The generator does not use this (it adds precomputed sums, see `frames`); it is for
/// stamping frames built elsewhere, and for the tests.
pub fn stamp(frame: &mut [u8], sig: &Signature) -> bool {
    let Some(at) = locate(frame) else {
        return false;
    };
    let mut new = [0u8; LEN];
    sig.emit(&mut new);
    let csum_at = at - udp::HEADER_LEN + 6;
    let old_csum = u16::from_be_bytes([frame[csum_at], frame[csum_at + 1]]);
    if old_csum != 0 {
        let c = checksum::update_bytes(old_csum, &frame[at..at + LEN], &new);
        let c = if c == 0 { 0xffff } else { c };
        frame[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }
    frame[at..at + LEN].copy_from_slice(&new);
    true
}

/// The 64-bit value whose low 48 bits are `low` and which is nearest to `reference` (the
/// sink widens a sequence number against the highest one seen). Never below 0: near the
/// start of a stream a value "before 0" is taken as the small value it is.
#[inline(always)]
pub fn extend48(reference: u64, low: u64) -> u64 {
    let d = low.wrapping_sub(reference) & MASK48;
    if d < 1 << 47 {
        reference.wrapping_add(d)
    } else {
        let back = (1 << 48) - d;
        reference.checked_sub(back).unwrap_or(low & MASK48)
    }
}

/// Nanoseconds from a transmit time whose low 48 bits are `tx48` to `now_ns`: exact for any
/// latency below 2⁴⁸ ns (78 hours).
#[inline(always)]
pub fn latency_ns(now_ns: u64, tx48: u64) -> u64 {
    now_ns.wrapping_sub(tx48) & MASK48
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 60-byte frame (64 on the wire): Ethernet 02:00:00:00:00:02 ← 02:00:00:00:00:01,
    /// IPv4 10.0.0.1 → 10.1.0.1, TTL 64, DF, UDP 49152 → 9 with checksum, carrying the
    /// signature {stream 7, seq 0x0102_0304_0506, time 0x0a0b_0c0d_0e0f}.
    ///
    /// Made with Python's `struct.pack` from the layout in the module docs, checksums by an
    /// independent RFC 1071 sum in Python (not this crate's code):
    /// `ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 46, 0, 0x4000, 64, 17, 0, src, dst)` …
    const GOLDEN: [u8; 60] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
        // IPv4
        0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xbd, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x01, 0x00, 0x01, // UDP
        0xc0, 0x00, 0x00, 0x09, 0x00, 0x1a, 0xa8, 0x31, // signature
        0x56, 0x42, 0x00, 0x00, 0x00, 0x07, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x0a, 0x0b, 0x0c,
        0x0d, 0x0e, 0x0f,
    ];

    const SIG: Signature = Signature {
        stream: 7,
        seq: 0x0102_0304_0506,
        tx_ns: 0x0a0b_0c0d_0e0f,
    };

    #[test]
    fn golden_frame_parses_and_checksums_verify() {
        assert_eq!(locate(&GOLDEN), Some(42));
        assert_eq!(parse(&GOLDEN), Some(SIG));
        let ip = ipv4::Packet::new_checked(&GOLDEN[14..]).unwrap();
        assert!(ip.verify_checksum());
        let u = udp::Packet::new_checked(&GOLDEN[34..]).unwrap();
        assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
    }

    #[test]
    fn stamping_the_golden_frame_unsigned_gives_the_golden_bytes() {
        // The same frame with a zero payload and the checksum that payload has (also from
        // the Python script): stamping must write exactly the golden bytes.
        let mut f = GOLDEN;
        f[42..].fill(0);
        f[40..42].copy_from_slice(&[0x2b, 0xae]);
        let u = udp::Packet::new_checked(&f[34..]).unwrap();
        let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
        assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        assert_eq!(parse(&f).map(|s| s.stream), None, "no magic, no signature");
        assert!(stamp(&mut f, &SIG));
        assert_eq!(f, GOLDEN);
    }

    #[test]
    fn emit_writes_the_documented_layout() {
        let mut b = [0xffu8; LEN + 2];
        Signature {
            stream: 0xdead_beef,
            seq: 0xffff_0000_0000_0001, // high 16 bits do not travel
            tx_ns: 0x1234_5678_9abc,
        }
        .emit(&mut b);
        assert_eq!(
            b,
            [
                0x56, 0x42, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0x78, 0x9a,
                0xbc, 0xff, 0xff
            ]
        );
        let s = Signature::parse_payload(&b).unwrap();
        assert_eq!(
            (s.stream, s.seq, s.tx_ns),
            (0xdead_beef, 1, 0x1234_5678_9abc)
        );
    }

    #[test]
    fn frames_without_a_signature_are_none() {
        // Too short at every cut.
        for n in 0..GOLDEN.len() {
            assert_eq!(parse(&GOLDEN[..n]), None, "cut at {n}");
        }
        let mut f = GOLDEN;
        f[43] ^= 1; // magic
        assert_eq!(parse(&f), None);
        let mut f = GOLDEN;
        f[23] = 6; // TCP
        assert_eq!(parse(&f), None);
        let mut f = GOLDEN;
        f[21] = 0x01; // fragment offset 8
        assert_eq!(parse(&f), None);
        let mut f = GOLDEN;
        f[39] = 8 + 17; // UDP length does not cover the signature
        assert_eq!(parse(&f), None);
        let mut f = GOLDEN;
        f[12] = 0x08;
        f[13] = 0x06; // ARP
        assert_eq!(parse(&f), None);
    }

    #[test]
    fn vlan_tagged_and_ipv6_frames_are_found() {
        // The golden frame with a C-tag (vid 5) pushed after the MACs.
        let mut t = Vec::from(&GOLDEN[..12]);
        t.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        t.extend_from_slice(&GOLDEN[12..]);
        assert_eq!(locate(&t), Some(46));
        assert_eq!(parse(&t), Some(SIG));

        // IPv6/UDP, built with the wire crate; stamping keeps the UDP checksum valid.
        let mut f = [0u8; 14 + 40 + 8 + LEN];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let (src, dst) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8:1::2".parse().unwrap(),
        );
        ipv6::Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: vrhost_wire::ip::Protocol::UDP,
            payload_len: 8 + LEN,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut ipv6::Packet::new_unchecked(&mut f[14..54]));
        {
            let mut u = udp::Packet::new_unchecked(&mut f[54..]);
            u.set_src_port(1);
            u.set_dst_port(2);
            u.set_len((8 + LEN) as u16);
            u.fill_checksum_v6(src, dst);
        }
        assert_eq!(locate(&f), Some(62));
        assert!(stamp(&mut f, &SIG));
        assert_eq!(parse(&f), Some(SIG));
        assert!(
            udp::Packet::new_checked(&f[54..])
                .unwrap()
                .verify_checksum_v6(src, dst)
        );
    }

    #[test]
    fn sequence_and_time_widen_back_to_64_bits() {
        assert_eq!(extend48(0, 5), 5);
        assert_eq!(extend48(10, 7), 7, "a late frame");
        assert_eq!(extend48(3, MASK48), MASK48, "no value below 0");
        // Across a 48-bit wrap, forwards and backwards.
        let r = (1u64 << 48) - 2;
        assert_eq!(extend48(r, 1), (1 << 48) + 1);
        assert_eq!(extend48((1 << 48) + 1, MASK48 - 1), r);
        assert_eq!(extend48(5 << 48, 3), (5 << 48) + 3);
        // Latency across the wrap of the 48-bit time.
        let tx = (7u64 << 48) - 100;
        assert_eq!(latency_ns(tx + 350, tx & MASK48), 350);
        assert_eq!(latency_ns(1_000, 400), 600);
    }
}
