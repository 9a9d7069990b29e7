//! Streams and their frames: what a stream is, which frame sizes it may have, which flows it
//! sweeps, and the precomputed templates that make building a frame a copy and a few stores.
//!
//! **A stream** is one sequence-numbered flow of test traffic: an id (what the signature
//! carries), the VR it is meant for, MACs (the destination is the VR's VIF MAC), an optional
//! VLAN tag, IPv4 or IPv6 source and destination, UDP ports, a frame size, a rate, and a
//! flow sweep. Each stream has its own pacer and its own sequence numbers, so the sink
//! counts loss, reordering and latency per stream — per VR when there is one stream per VR.
//!
//! **Frame sizes** are sizes *on the wire including the 4-byte FCS*, as RFC 2544 states
//! them ({64, 128, 256, 512, 1024, 1280, 1518}, [`RFC2544_SIZES`]): a 64-byte frame is 60
//! bytes in the packet buffer, the NIC (or veth, which sends none) adds the FCS. The
//! smallest size is 64 for IPv4 (42 bytes of headers and the 18-byte signature fill it
//! exactly), 84 for IPv6; a VLAN tag adds 4 to both. The largest is MTU + 18 (Ethernet header
//! and FCS; + 4 with a tag). **IMIX** here is the classic *simple IMIX*: 64, 570 and 1518
//! bytes in the ratio 7:4:1, interleaved in a fixed 12-frame pattern (so any 12 consecutive
//! frames have exactly the mix; mean 353.83 bytes). It is IPv4-only, since its 64-byte
//! frames cannot carry IPv6.
//!
//! **Flows.** A stream can sweep its source and destination addresses (N addresses counting
//! up from the given one, optionally checked to stay within a prefix) and its UDP ports, for
//! FIB and flow-cache tests. The sweeps combine like an odometer — the destination turns
//! fastest, then the source, then the destination port, then the source port — so the
//! stream cycles through every combination, `flows()` of them, and consecutive frames hit
//! different destinations. For IPv6 the sweep counts in the low 32 bits of the address.
//!
//! **Why templates with partial sums.** Per frame the builder copies a template (the
//! stream's frame with the swept fields and the per-frame signature fields zero) and
//! stores the addresses, ports, sequence number and time. The checksums are not recomputed
//! over the frame: each template holds the one's-complement sum of everything its IPv4
//! header checksum and its UDP checksum cover *except* those fields, and per frame the
//! builder adds the fields' words and folds. That is RFC 1624's incremental update
//! `HC' = ~(~HC + ~m + m')` with the old value `m` = 0 (its `~m` is one's-complement zero),
//! with the template's checksum kept un-inverted: a dozen additions per frame, whatever the
//! frame's size. The IPv4 UDP checksum can be turned off (`udp_checksum: false`, sent as 0,
//! which RFC 768 allows); IPv6 always has one (RFC 8200 §8.1).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vrhost_dataplane::MAX_FRAME;
use vrhost_wire::{EthernetAddress, checksum, ethernet, ipv4, ipv6, udp, vlan};

use crate::error::Error;
use crate::rate::Rate;
use crate::signature::{self, LEN as SIG_LEN, MAGIC};

/// Bytes of the Ethernet FCS, counted in frame sizes but not in the packet buffer.
pub const FCS_LEN: usize = 4;
/// The frame sizes of RFC 2544 §9.1 for Ethernet, on the wire with FCS.
pub const RFC2544_SIZES: [u16; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// Simple IMIX: (size, share) — 7 × 64, 4 × 570, 1 × 1518.
pub const IMIX: [(u16, u32); 3] = [(64, 7), (570, 4), (1518, 1)];
/// The order IMIX's sizes (indexes into [`IMIX`]) are sent in, repeated.
const IMIX_PATTERN: [u8; 12] = [0, 1, 0, 0, 1, 0, 2, 0, 1, 0, 0, 1];
/// The MTU assumed unless a stream says otherwise.
pub const DEFAULT_MTU: u16 = 1500;
/// Bytes on the wire per frame besides the frame: preamble + SFD (8) and inter-frame gap
/// (12), for L1 bit rates.
pub const WIRE_OVERHEAD: usize = 20;
/// Templates are copied in chunks of this many bytes (fixed-size copies the compiler turns
/// into a few vector moves, instead of a `memcpy` call per frame).
const CHUNK: usize = 64;

const _: () = assert!(MAX_FRAME.is_multiple_of(CHUNK));
const _: () = {
    let mut counts = [0u32; 3];
    let mut i = 0;
    while i < IMIX_PATTERN.len() {
        counts[IMIX_PATTERN[i] as usize] += 1;
        i += 1;
    }
    assert!(counts[0] == IMIX[0].1 && counts[1] == IMIX[1].1 && counts[2] == IMIX[2].1);
};

/// A stream's frame size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// One size, on the wire with FCS.
    Fixed(u16),
    /// Simple IMIX ([`IMIX`]).
    Imix,
}

impl FrameSize {
    /// Mean size on the wire (FCS included).
    pub fn mean(self) -> f64 {
        match self {
            FrameSize::Fixed(s) => f64::from(s),
            FrameSize::Imix => {
                let (sum, n) = IMIX.iter().fold((0u32, 0u32), |(s, n), &(size, k)| {
                    (s + u32::from(size) * k, n + k)
                });
                f64::from(sum) / f64::from(n)
            }
        }
    }

    /// Mean bits per frame on the wire including preamble and inter-frame gap: multiply by
    /// a frame rate for the L1 bit rate.
    pub fn l1_bits(self) -> f64 {
        (self.mean() + WIRE_OVERHEAD as f64) * 8.0
    }

    fn sizes(self) -> &'static [u16] {
        match self {
            FrameSize::Fixed(_) => &[],
            FrameSize::Imix => &[IMIX[0].0, IMIX[1].0, IMIX[2].0],
        }
    }
}

impl std::fmt::Display for FrameSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameSize::Fixed(s) => write!(f, "{s}"),
            FrameSize::Imix => f.write_str("imix"),
        }
    }
}

/// An address sweep: `count` addresses counting up from the stream's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrSweep {
    /// Addresses (at least 1).
    pub count: u32,
    /// If set, every address must lie in the stream address's prefix of this length.
    pub prefix_len: Option<u8>,
}

impl Default for AddrSweep {
    fn default() -> AddrSweep {
        AddrSweep {
            count: 1,
            prefix_len: None,
        }
    }
}

/// A stream's flows: the four sweeps, combined like an odometer (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flows {
    /// Source addresses.
    pub src: AddrSweep,
    /// Destination addresses.
    pub dst: AddrSweep,
    /// Source ports counting up from the stream's (at least 1).
    pub src_ports: u32,
    /// Destination ports counting up from the stream's (at least 1).
    pub dst_ports: u32,
}

impl Default for Flows {
    fn default() -> Flows {
        Flows {
            src: AddrSweep::default(),
            dst: AddrSweep::default(),
            src_ports: 1,
            dst_ports: 1,
        }
    }
}

impl Flows {
    /// Distinct 5-tuples the stream cycles through.
    pub fn count(&self) -> u128 {
        u128::from(self.src.count)
            * u128::from(self.dst.count)
            * u128::from(self.src_ports)
            * u128::from(self.dst_ports)
    }
}

/// One stream of test traffic (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// Carried in the signature; unique among a generator's streams.
    pub id: u32,
    /// The VR the stream is meant for (a label for reports; the MAC and VLAN steer it).
    pub vr: u32,
    /// 802.1Q tag (VLAN id 1..=4094), if the VR's VIF is keyed by VLAN.
    pub vlan: Option<u16>,
    /// Source MAC.
    pub src_mac: EthernetAddress,
    /// Destination MAC (the VR VIF's).
    pub dst_mac: EthernetAddress,
    /// Source address (first of the source sweep).
    pub src: IpAddr,
    /// Destination address (first of the destination sweep).
    pub dst: IpAddr,
    /// UDP source port (first of its sweep).
    pub src_port: u16,
    /// UDP destination port (first of its sweep).
    pub dst_port: u16,
    /// Frame size on the wire.
    pub size: FrameSize,
    /// Offered rate.
    pub rate: Rate,
    /// Flow sweeps.
    pub flows: Flows,
    /// MTU of the path (bounds the frame size).
    pub mtu: u16,
    /// IPv4 only: fill the UDP checksum (else 0, "none"). IPv6 always has one.
    pub udp_checksum: bool,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
}

impl Stream {
    /// A stream of 64-byte (84 for IPv6) frames at an unlimited rate, one flow, UDP
    /// 49152 → 9 (discard), TTL 64, MTU 1500, no VLAN, VR 0.
    pub fn new(
        id: u32,
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src: IpAddr,
        dst: IpAddr,
    ) -> Stream {
        let size = if src.is_ipv6() { 84 } else { 64 };
        Stream {
            id,
            vr: 0,
            vlan: None,
            src_mac,
            dst_mac,
            src,
            dst,
            src_port: 49152,
            dst_port: 9,
            size: FrameSize::Fixed(size),
            rate: Rate::Unlimited,
            flows: Flows::default(),
            mtu: DEFAULT_MTU,
            udp_checksum: true,
            ttl: 64,
        }
    }

    fn l2_len(&self) -> usize {
        ethernet::HEADER_LEN + self.vlan.map_or(0, |_| vlan::TAG_LEN)
    }

    fn l3_len(&self) -> usize {
        if self.src.is_ipv6() {
            ipv6::HEADER_LEN
        } else {
            ipv4::HEADER_LEN
        }
    }

    /// The smallest frame size (on the wire) this stream's headers and signature fit in.
    pub fn min_size(&self) -> u16 {
        (self.l2_len() + self.l3_len() + udp::HEADER_LEN + SIG_LEN + FCS_LEN) as u16
    }

    /// The largest frame size (on the wire) the MTU allows.
    pub fn max_size(&self) -> u16 {
        self.mtu
            .saturating_add(18)
            .saturating_add(self.vlan.map_or(0, |_| vlan::TAG_LEN as u16))
    }

    /// Check everything a generator needs of the stream; the error names the bad value.
    pub fn validate(&self) -> Result<(), Error> {
        let stream = self.id;
        if self.src.is_ipv6() != self.dst.is_ipv6() {
            return Err(Error::MixedFamilies {
                stream,
                src: self.src,
                dst: self.dst,
            });
        }
        if let Some(vid) = self.vlan
            && !(1..=4094).contains(&vid)
        {
            return Err(Error::Vlan { stream, vid });
        }
        self.rate.validate()?;
        let (min, max) = (self.min_size(), self.max_size());
        if self.src.is_ipv6() && self.size == FrameSize::Imix {
            return Err(Error::ImixIpv6 { stream, min });
        }
        let sizes: &[u16] = match &self.size {
            FrameSize::Fixed(s) => core::slice::from_ref(s),
            FrameSize::Imix => self.size.sizes(),
        };
        for &size in sizes {
            if size < min {
                let family = match (self.src.is_ipv6(), self.vlan.is_some()) {
                    (false, false) => "IPv4",
                    (true, false) => "IPv6",
                    (false, true) => "802.1Q/IPv4",
                    (true, true) => "802.1Q/IPv6",
                };
                return Err(Error::FrameTooSmall {
                    stream,
                    size,
                    min,
                    family,
                });
            }
            if size > max {
                return Err(Error::FrameTooLarge {
                    stream,
                    size,
                    mtu: self.mtu,
                    max,
                });
            }
            if usize::from(size) - FCS_LEN > MAX_FRAME {
                return Err(Error::FrameBeyondSlot {
                    stream,
                    size,
                    max: (MAX_FRAME + FCS_LEN) as u16,
                });
            }
        }
        self.addr_sweep("source", self.src, self.flows.src)?;
        self.addr_sweep("destination", self.dst, self.flows.dst)?;
        port_sweep(stream, "source", self.src_port, self.flows.src_ports)?;
        port_sweep(stream, "destination", self.dst_port, self.flows.dst_ports)?;
        Ok(())
    }

    fn addr_sweep(&self, what: &'static str, start: IpAddr, s: AddrSweep) -> Result<(), Error> {
        let stream = self.id;
        if s.count == 0 {
            return Err(Error::EmptySweep { stream, what });
        }
        let bits: u8 = if start.is_ipv6() { 128 } else { 32 };
        let first = match start {
            IpAddr::V4(a) => u128::from(a.to_bits()),
            IpAddr::V6(a) => a.to_bits(),
        };
        let err = |within: String| Error::AddrSweep {
            stream,
            what,
            start,
            count: s.count,
            within,
        };
        // The sweep counts in the low 32 bits: it may not carry out of them.
        if u64::from(first as u32) + u64::from(s.count) - 1 > u64::from(u32::MAX) {
            return Err(err(if bits == 32 {
                "the IPv4 address space".into()
            } else {
                "the address's low 32 bits".into()
            }));
        }
        if let Some(len) = s.prefix_len {
            if len > bits {
                return Err(Error::PrefixLen { stream, len, bits });
            }
            let host_bits = u32::from(bits - len);
            let net_mask = if host_bits >= 128 {
                0
            } else {
                (u128::MAX << host_bits) & (u128::MAX >> (128 - u32::from(bits)))
            };
            let last = first + u128::from(s.count) - 1;
            if last & net_mask != first & net_mask {
                let net = first & net_mask;
                let net = match start {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from_bits(net as u32)),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from_bits(net)),
                };
                return Err(err(format!("{net}/{len}")));
            }
        }
        Ok(())
    }
}

fn port_sweep(stream: u32, what: &'static str, start: u16, count: u32) -> Result<(), Error> {
    if count == 0 {
        return Err(Error::EmptySweep { stream, what });
    }
    if u32::from(start) + count - 1 > u32::from(u16::MAX) {
        return Err(Error::PortSweep {
            stream,
            what,
            start,
            count,
        });
    }
    Ok(())
}

/// Where a stream's per-frame fields lie (offsets from the frame's first byte).
#[derive(Debug, Clone, Copy)]
struct Offsets {
    /// The low 32 bits of the source / destination address.
    src: usize,
    dst: usize,
    /// IPv4 header checksum (IPv4 only).
    ip_csum: usize,
    /// UDP header.
    udp: usize,
}

/// One frame size's template.
#[derive(Debug, Clone)]
struct Template {
    /// The frame, padded with zeros to a multiple of [`CHUNK`].
    bytes: Box<[u8]>,
    /// Frame length (without FCS).
    len: u16,
    /// Sum of the IPv4 header without the addresses and checksum (IPv4 only).
    ip_sum: u32,
    /// Sum of the UDP checksum's coverage (pseudo header included) without the swept
    /// fields, the sequence and the time.
    udp_sum: u32,
}

/// A counter running from 0 to `n - 1` and round again, added to a base value.
#[derive(Debug, Clone, Copy)]
struct Sweep {
    base: u32,
    n: u32,
    i: u32,
}

impl Sweep {
    fn new(base: u32, n: u32) -> Sweep {
        Sweep { base, n, i: 0 }
    }

    #[inline(always)]
    fn value(&self) -> u32 {
        self.base.wrapping_add(self.i)
    }

    /// Step; true if it wrapped round (the next sweep steps too).
    #[inline(always)]
    fn step(&mut self) -> bool {
        self.i += 1;
        if self.i == self.n {
            self.i = 0;
            true
        } else {
            false
        }
    }
}

/// A stream's frame builder: its templates and where its sweeps stand.
#[derive(Debug, Clone)]
pub struct Frames {
    id: u32,
    templates: Box<[Template]>,
    /// Template index per frame, repeated (one entry for a fixed size).
    pattern: Box<[u8]>,
    pos: usize,
    off: Offsets,
    v6: bool,
    udp_csum: bool,
    src: Sweep,
    dst: Sweep,
    sport: Sweep,
    dport: Sweep,
}

/// Fold a 32-bit one's-complement sum to 16 bits.
#[inline(always)]
fn fold(s: u32) -> u16 {
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The one's-complement sum of a 32-bit value's two words, unfolded.
#[inline(always)]
fn words32(v: u32) -> u32 {
    (v >> 16) + (v & 0xffff)
}

impl Frames {
    /// Validate `s` and precompute its templates.
    pub fn new(s: &Stream) -> Result<Frames, Error> {
        s.validate()?;
        let v6 = s.src.is_ipv6();
        let l2 = s.l2_len();
        let udp_at = l2 + s.l3_len();
        let off = if v6 {
            // The low 32 bits of the 16-byte addresses at 8 and 24.
            Offsets {
                src: l2 + 8 + 12,
                dst: l2 + 24 + 12,
                ip_csum: 0,
                udp: udp_at,
            }
        } else {
            Offsets {
                src: l2 + 12,
                dst: l2 + 16,
                ip_csum: l2 + 10,
                udp: udp_at,
            }
        };
        let sizes: Vec<u16> = match s.size {
            FrameSize::Fixed(n) => vec![n],
            FrameSize::Imix => s.size.sizes().to_vec(),
        };
        let templates = sizes
            .iter()
            .map(|&size| template(s, usize::from(size) - FCS_LEN, l2, off))
            .collect();
        let pattern = match s.size {
            FrameSize::Fixed(_) => Box::new([0u8]) as Box<[u8]>,
            FrameSize::Imix => IMIX_PATTERN.into(),
        };
        let low32 = |a: IpAddr| match a {
            IpAddr::V4(a) => a.to_bits(),
            IpAddr::V6(a) => a.to_bits() as u32,
        };
        Ok(Frames {
            id: s.id,
            templates,
            pattern,
            pos: 0,
            off,
            v6,
            udp_csum: v6 || s.udp_checksum,
            src: Sweep::new(low32(s.src), s.flows.src.count),
            dst: Sweep::new(low32(s.dst), s.flows.dst.count),
            sport: Sweep::new(u32::from(s.src_port), s.flows.src_ports),
            dport: Sweep::new(u32::from(s.dst_port), s.flows.dst_ports),
        })
    }

    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Length (without FCS) of the next frame [`Frames::write`] builds.
    #[inline(always)]
    pub fn next_len(&self) -> usize {
        usize::from(self.templates[usize::from(self.pattern[self.pos])].len)
    }

    /// Write the stream's next frame (next flow, next IMIX size) into `buf`, stamped with
    /// sequence `seq` and time `tx_ns`; returns its length. Writes up to the frame's length
    /// rounded up to 64 bytes (`buf` needs that room; a pool slot from its headroom has it).
    ///
    /// Panics if `buf` is shorter than that.
    #[inline(always)]
    pub fn write(&mut self, buf: &mut [u8], seq: u64, tx_ns: u64) -> usize {
        let t = &self.templates[usize::from(self.pattern[self.pos])];
        self.pos += 1;
        if self.pos == self.pattern.len() {
            self.pos = 0;
        }
        let n = t.bytes.len();
        for (d, s) in buf[..n]
            .chunks_exact_mut(CHUNK)
            .zip(t.bytes.chunks_exact(CHUNK))
        {
            let d: &mut [u8; CHUNK] = d.try_into().expect("chunk");
            *d = s.try_into().expect("chunk");
        }
        let o = self.off;
        let (src, dst) = (self.src.value(), self.dst.value());
        let (sport, dport) = (self.sport.value(), self.dport.value());
        buf[o.src..o.src + 4].copy_from_slice(&src.to_be_bytes());
        buf[o.dst..o.dst + 4].copy_from_slice(&dst.to_be_bytes());
        buf[o.udp..o.udp + 2].copy_from_slice(&(sport as u16).to_be_bytes());
        buf[o.udp + 2..o.udp + 4].copy_from_slice(&(dport as u16).to_be_bytes());
        let addrs = words32(src) + words32(dst);
        if !self.v6 {
            let c = !fold(t.ip_sum + addrs);
            buf[o.ip_csum..o.ip_csum + 2].copy_from_slice(&c.to_be_bytes());
        }
        let sig = o.udp + udp::HEADER_LEN;
        buf[sig + signature::SEQ_FIELD.start..sig + signature::SEQ_FIELD.end]
            .copy_from_slice(&signature::be48(seq));
        buf[sig + signature::TIME_FIELD.start..sig + signature::TIME_FIELD.end]
            .copy_from_slice(&signature::be48(tx_ns));
        if self.udp_csum {
            let s = t.udp_sum
                + addrs
                + sport
                + dport
                + signature::words48(seq)
                + signature::words48(tx_ns);
            let c = match !fold(s) {
                0 => 0xffff,
                c => c,
            };
            buf[o.udp + 6..o.udp + 8].copy_from_slice(&c.to_be_bytes());
        }
        // Odometer: destination fastest, then source, destination port, source port.
        if self.dst.step() && self.src.step() && self.dport.step() {
            self.sport.step();
        }
        usize::from(t.len)
    }
}

/// Build one size's template: the stream's frame of `len` bytes with the swept fields,
/// checksums, sequence and time zero; and its partial sums.
fn template(s: &Stream, len: usize, l2: usize, off: Offsets) -> Template {
    let padded = len.next_multiple_of(CHUNK);
    let mut b = vec![0u8; padded];
    b[0..6].copy_from_slice(s.dst_mac.as_bytes());
    b[6..12].copy_from_slice(s.src_mac.as_bytes());
    let ethertype: u16 = if s.src.is_ipv6() { 0x86dd } else { 0x0800 };
    if let Some(vid) = s.vlan {
        b[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        b[14..16].copy_from_slice(&vid.to_be_bytes());
    }
    b[l2 - 2..l2].copy_from_slice(&ethertype.to_be_bytes());
    let udp_len = len - off.udp;
    let zero_low = |a: Ipv6Addr| Ipv6Addr::from_bits(a.to_bits() & !u128::from(u32::MAX));
    let (ip_sum, pseudo) = match (s.src, s.dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => {
            let mut ip = ipv4::Packet::new_unchecked(&mut b[l2..off.udp]);
            ip.set_version(4);
            ip.set_header_len(ipv4::HEADER_LEN);
            ip.set_total_len((len - l2) as u16);
            ip.set_ident(0);
            ip.clear_flags();
            ip.set_dont_frag(true);
            ip.set_ttl(s.ttl);
            ip.set_protocol(vrhost_wire::ip::Protocol::UDP);
            // Addresses and checksum stay 0: written per frame.
            let ip_sum = u32::from(checksum::data(&b[l2..off.udp]));
            let pseudo = udp::pseudo_header_v4(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED, {
                udp_len as u16
            });
            (ip_sum, pseudo)
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let (src, dst) = (zero_low(src), zero_low(dst));
            ipv6::Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: vrhost_wire::ip::Protocol::UDP,
                payload_len: udp_len,
                hop_limit: s.ttl,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(&mut ipv6::Packet::new_unchecked(&mut b[l2..off.udp]));
            (0, udp::pseudo_header_v6(src, dst, udp_len as u16))
        }
        _ => unreachable!("families checked by validate"),
    };
    {
        let mut u = udp::Packet::new_unchecked(&mut b[off.udp..len]);
        u.set_len(udp_len as u16);
    }
    let sig = off.udp + udp::HEADER_LEN;
    b[sig..sig + 2].copy_from_slice(&MAGIC.to_be_bytes());
    b[sig + signature::STREAM_FIELD.start..sig + signature::STREAM_FIELD.end]
        .copy_from_slice(&s.id.to_be_bytes());
    let udp_sum = u32::from(checksum::combine(&[
        pseudo,
        checksum::data(&b[off.udp..len]),
    ]));
    Template {
        bytes: b.into(),
        len: len as u16,
        ip_sum,
        udp_sum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Signature;

    pub(crate) const SRC_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    pub(crate) const DST_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    fn v4(id: u32) -> Stream {
        Stream::new(
            id,
            SRC_MAC,
            DST_MAC,
            "10.0.0.1".parse().unwrap(),
            "10.1.0.1".parse().unwrap(),
        )
    }

    fn v6(id: u32) -> Stream {
        Stream::new(
            id,
            SRC_MAC,
            DST_MAC,
            "2001:db8::1".parse().unwrap(),
            "2001:db8:1::ffff:fffe".parse().unwrap(),
        )
    }

    /// Build `n` frames of `s`; return them as owned byte vectors.
    fn build(s: &Stream, n: u64) -> Vec<Vec<u8>> {
        let mut f = Frames::new(s).unwrap();
        let mut buf = vec![0xaau8; MAX_FRAME];
        (0..n)
            .map(|i| {
                let len = f.write(&mut buf, i, 1_000_000 + i * 7);
                buf[..len].to_vec()
            })
            .collect()
    }

    /// Check a frame's headers, checksums and signature; return (src, dst, sport, dport).
    fn check(f: &[u8], s: &Stream, seq: u64) -> (IpAddr, IpAddr, u16, u16) {
        let l2 = s.l2_len();
        assert_eq!(&f[0..6], s.dst_mac.as_bytes());
        assert_eq!(&f[6..12], s.src_mac.as_bytes());
        let sig = signature::parse(f).expect("signed");
        assert_eq!(
            sig,
            Signature {
                stream: s.id,
                seq,
                tx_ns: 1_000_000 + seq * 7
            }
        );
        let (src, dst, u) = if s.src.is_ipv6() {
            let ip = ipv6::Packet::new_checked(&f[l2..]).unwrap();
            assert_eq!(usize::from(ip.payload_len()), f.len() - l2 - 40);
            assert_eq!(ip.hop_limit(), s.ttl);
            let u = udp::Packet::new_checked(&f[l2 + 40..]).unwrap();
            assert!(
                u.verify_checksum_v6(ip.src_addr(), ip.dst_addr()),
                "seq {seq}"
            );
            (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()), u)
        } else {
            let ip = ipv4::Packet::new_checked(&f[l2..]).unwrap();
            assert!(ip.verify_checksum(), "seq {seq}");
            assert_eq!(usize::from(ip.total_len()), f.len() - l2);
            assert_eq!(ip.ttl(), s.ttl);
            assert!(ip.dont_frag());
            let u = udp::Packet::new_checked(&f[l2 + 20..]).unwrap();
            if s.udp_checksum {
                assert!(
                    u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()),
                    "seq {seq}"
                );
            } else {
                assert_eq!(u.checksum(), 0);
            }
            (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()), u)
        };
        assert_eq!(usize::from(u.len()), f.len() - (l2 + s.l3_len()));
        // Past the signature: zeros.
        let pay = signature::locate(f).unwrap() + SIG_LEN;
        assert!(f[pay..].iter().all(|&b| b == 0));
        (src, dst, u.src_port(), u.dst_port())
    }

    #[test]
    fn every_rfc2544_size_builds_valid_ipv4_frames_of_that_size() {
        for size in RFC2544_SIZES {
            let mut s = v4(3);
            s.size = FrameSize::Fixed(size);
            for (i, f) in build(&s, 3).iter().enumerate() {
                assert_eq!(f.len() + FCS_LEN, usize::from(size));
                let (src, dst, sp, dp) = check(f, &s, i as u64);
                assert_eq!((src, dst, sp, dp), (s.src, s.dst, 49152, 9));
            }
        }
    }

    #[test]
    fn ipv6_and_vlan_frames_are_valid() {
        for size in [84, 128, 1518] {
            let mut s = v6(9);
            s.size = FrameSize::Fixed(size);
            s.flows.dst.count = 2;
            for (i, f) in build(&s, 4).iter().enumerate() {
                assert_eq!(f.len() + 4, usize::from(size));
                let (_, dst, _, _) = check(f, &s, i as u64);
                let want: Ipv6Addr = if i % 2 == 0 {
                    "2001:db8:1::ffff:fffe".parse().unwrap()
                } else {
                    "2001:db8:1::ffff:ffff".parse().unwrap()
                };
                assert_eq!(dst, IpAddr::V6(want));
            }
        }
        let mut s = v4(1);
        s.vlan = Some(100);
        s.size = FrameSize::Fixed(68);
        let f = &build(&s, 1)[0];
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 100]);
        assert_eq!(&f[16..18], &[0x08, 0x00]);
        check(f, &s, 0);
    }

    #[test]
    fn sweeps_cycle_through_every_flow_as_an_odometer() {
        let mut s = v4(2);
        s.flows = Flows {
            src: AddrSweep {
                count: 2,
                prefix_len: Some(24),
            },
            dst: AddrSweep {
                count: 3,
                prefix_len: None,
            },
            src_ports: 2,
            dst_ports: 2,
        };
        assert_eq!(s.flows.count(), 24);
        let frames = build(&s, 48);
        let tuples: Vec<_> = frames
            .iter()
            .enumerate()
            .map(|(i, f)| check(f, &s, i as u64))
            .collect();
        let a = |x: &str| -> IpAddr { x.parse().unwrap() };
        // Destination turns fastest, then source, destination port, source port.
        assert_eq!(tuples[0], (a("10.0.0.1"), a("10.1.0.1"), 49152, 9));
        assert_eq!(tuples[1], (a("10.0.0.1"), a("10.1.0.2"), 49152, 9));
        assert_eq!(tuples[2], (a("10.0.0.1"), a("10.1.0.3"), 49152, 9));
        assert_eq!(tuples[3], (a("10.0.0.2"), a("10.1.0.1"), 49152, 9));
        assert_eq!(tuples[6], (a("10.0.0.1"), a("10.1.0.1"), 49152, 10));
        assert_eq!(tuples[12], (a("10.0.0.1"), a("10.1.0.1"), 49153, 9));
        let distinct: std::collections::HashSet<_> = tuples[..24].iter().collect();
        assert_eq!(distinct.len(), 24);
        assert_eq!(tuples[..24], tuples[24..], "and round again");
    }

    #[test]
    fn ipv4_without_udp_checksum_sends_zero() {
        let mut s = v4(4);
        s.udp_checksum = false;
        s.flows.dst.count = 5;
        for (i, f) in build(&s, 5).iter().enumerate() {
            check(f, &s, i as u64);
        }
    }

    #[test]
    fn imix_sends_7_4_1_in_every_12_frames() {
        let mut s = v4(5);
        s.size = FrameSize::Imix;
        let frames = build(&s, 36);
        for w in frames.chunks(12) {
            let mut n = std::collections::HashMap::new();
            for f in w {
                *n.entry(f.len() + FCS_LEN).or_insert(0) += 1;
            }
            assert_eq!(n, [(64, 7), (570, 4), (1518, 1)].into_iter().collect());
        }
        for (i, f) in frames.iter().enumerate() {
            check(f, &s, i as u64);
        }
        assert!((FrameSize::Imix.mean() - 4246.0 / 12.0).abs() < 1e-9);
        assert_eq!(FrameSize::Fixed(64).l1_bits(), 672.0);
    }

    #[test]
    fn checksums_stay_valid_across_many_random_fields() {
        // Sequence and time words that carry in the one's-complement sum (all ones, zero,
        // large values) and swept fields at the top of their ranges.
        let mut s = v6(0xffff_ffff);
        s.src = "2001:db8::ffff:0".parse().unwrap();
        s.flows.src.count = 65535;
        s.src_port = 65530;
        s.flows.src_ports = 6;
        s.dst_port = 65535;
        let mut f = Frames::new(&s).unwrap();
        let mut buf = vec![0u8; MAX_FRAME];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (seq, t) = match i % 4 {
                0 => (signature::MASK48, 0),
                1 => (0, signature::MASK48),
                _ => (x & signature::MASK48, x >> 16),
            };
            let len = f.write(&mut buf, seq, t);
            let fr = &buf[..len];
            let ip = ipv6::Packet::new_checked(&fr[14..]).unwrap();
            let u = udp::Packet::new_checked(&fr[54..]).unwrap();
            assert!(u.verify_checksum_v6(ip.src_addr(), ip.dst_addr()), "{i}");
            let sig = signature::parse(fr).unwrap();
            assert_eq!((sig.seq, sig.tx_ns), (seq, t & signature::MASK48));
        }
    }

    #[test]
    fn bad_sizes_are_refused_naming_the_value_and_the_fix() {
        let mut s = v4(7);
        s.size = FrameSize::Fixed(63);
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("63") && e.contains("at least 64"), "{e}");
        s.size = FrameSize::Fixed(1519);
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("1519") && e.contains("at most 1518"), "{e}");
        s.mtu = 9000;
        s.size = FrameSize::Fixed(9018);
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("9018") && e.contains("slot"), "{e}");
        s.mtu = 1500;
        s.vlan = Some(10);
        s.size = FrameSize::Fixed(64);
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("at least 68"), "{e}");
        s.size = FrameSize::Fixed(1522);
        assert!(Frames::new(&s).is_ok(), "a tag adds 4 to the maximum");
        let mut s = v6(8);
        s.size = FrameSize::Fixed(64);
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("IPv6") && e.contains("at least 84"), "{e}");
        s.size = FrameSize::Imix;
        assert!(matches!(Frames::new(&s), Err(Error::ImixIpv6 { .. })));
    }

    #[test]
    fn bad_sweeps_and_fields_are_refused() {
        let mut s = v4(1);
        s.dst = "10.1.0.250".parse().unwrap();
        s.flows.dst = AddrSweep {
            count: 10,
            prefix_len: Some(24),
        };
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("10.1.0.0/24") && e.contains("10"), "{e}");
        s.flows.dst.count = 6;
        assert!(Frames::new(&s).is_ok(), "250..=255 stays in the /24");
        s.flows.dst.count = 0;
        assert!(matches!(Frames::new(&s), Err(Error::EmptySweep { .. })));
        s.flows.dst.count = 1;
        s.flows.dst.prefix_len = Some(33);
        assert!(matches!(
            Frames::new(&s),
            Err(Error::PrefixLen { len: 33, .. })
        ));
        s.flows.dst.prefix_len = None;
        s.dst_port = 65000;
        s.flows.dst_ports = 1000;
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("65000") && e.contains("65535"), "{e}");
        let mut s = v6(2);
        s.flows.dst.count = 3; // ffff:fffe + 2 carries out of the low 32 bits
        let e = Frames::new(&s).unwrap_err().to_string();
        assert!(e.contains("low 32 bits"), "{e}");
        let mut s = v4(3);
        s.dst = "2001:db8::1".parse().unwrap();
        assert!(matches!(Frames::new(&s), Err(Error::MixedFamilies { .. })));
        let mut s = v4(3);
        s.vlan = Some(4095);
        assert!(matches!(
            Frames::new(&s),
            Err(Error::Vlan { vid: 4095, .. })
        ));
        s.vlan = None;
        s.rate = Rate::Pps(-5.0);
        assert!(matches!(Frames::new(&s), Err(Error::BadRate { .. })));
    }
}
