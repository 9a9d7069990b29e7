//! The stamped test frames: one stream per VR, Ethernet / IPv4 / UDP with the 18-byte
//! `vrhost_traffic` signature right after the UDP header, any size from 64 to MTU + 18.
//!
//! The headers are `lab_frame`'s, as for `fwd/frames.rs` (destination MAC = the VR's VIF
//! MAC on side A, source MAC = `a0`'s, VR `i`'s side-A host to its side-B host), so every
//! forwarder accepts every frame. What is new is the signature and the UDP checksum.
//!
//! **What the generator program writes per frame.** A [`Template`] holds the first
//! [`HEAD_LEN`] = 48 bytes of the stream's frame — headers, the signature's magic and stream
//! id — which the program copies over every frame (live-frames pages are recycled without
//! being re-copied, and a forwarder rewrites MACs and TTL in place), then it stores the
//! sequence number and `bpf_ktime_get_ns()` as 48-bit big-endian values at 48..54 and
//! 54..60, and the UDP checksum. Everything after byte 60 is zero and never changes (the
//! kernel initialised it from the run's input frame), so the checksum is the template's
//! partial sum `udp_sum` (pseudo header, UDP header and the constant signature words) plus
//! the six 16-bit words of sequence and time, folded and inverted: RFC 1624's incremental
//! update from zero fields, as `vrhost_traffic::frames` does in user space — a valid UDP
//! checksum on every frame, so a DUT or a capture that checks it sees correct frames.
//!
//! **Flows.** A stream may sweep its destination: frame `seq` goes to `dst + seq mod flows`
//! (consecutive addresses from the template's base, one flow per address; `flows` = 1 is
//! the single flow to the VR's side-B host). The sequence number is already per-stream
//! state, so the sweep needs no odometer of its own. Since the address changes per frame,
//! the template keeps the IPv4 header's and the UDP checksum's partial sums *without* the
//! destination's two words, and the program adds them back (with the sequence and time
//! words) and stores both checksums: RFC 1624's incremental update, from a zero field.

use std::net::Ipv4Addr;

use vrhost_lab::{Side, addressing};
use vrhost_traffic::signature::{LEN as SIG_LEN, MAGIC};

use crate::lab_frame;

/// Bytes the program copies from the template per frame: Ethernet (14), IPv4 (20), UDP (8),
/// the signature's magic (2) and stream id (4).
pub(crate) const HEAD_LEN: usize = 48;
/// Where the sequence number (48-bit big-endian) goes.
pub(crate) const SEQ_AT: usize = 48;
/// Where the transmit time (48-bit big-endian, CLOCK_MONOTONIC ns) goes.
pub(crate) const TIME_AT: usize = 54;
/// Where the UDP checksum is.
pub(crate) const UDP_CSUM_AT: usize = 40;
/// Where the UDP payload (the signature) starts.
pub(crate) const SIG_AT: usize = 42;
/// The shortest frame buffer (64 bytes on the wire less the FCS): exactly headers and
/// signature.
pub(crate) const MIN_BUF: usize = SIG_AT + SIG_LEN;
/// Smallest and largest frame sizes on the wire (FCS included) with the lab's MTU of 1500.
pub(crate) const MIN_SIZE: u16 = 64;
/// Largest frame size: MTU 1500 + Ethernet header and FCS.
pub(crate) const MAX_SIZE: u16 = 1518;
/// Bytes of the FCS, counted in sizes on the wire, not in the buffer.
const FCS_LEN: usize = 4;

const _: () = assert!(MIN_BUF == 60 && TIME_AT + 6 == MIN_BUF && SEQ_AT == HEAD_LEN);

/// A stream's template as the generator's map holds it: [`HEAD_LEN`] bytes of frame, then
/// native-endian `u32`s: the partial UDP sum, the length change, the partial IPv4 header
/// sum, the first destination and the flow count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    /// The frame's first [`HEAD_LEN`] bytes (UDP checksum zero; destination and IPv4
    /// checksum those of the first flow).
    pub(crate) head: [u8; HEAD_LEN],
    /// One's-complement sum (unfolded) of everything the UDP checksum covers except the
    /// sequence, time and destination words.
    pub(crate) udp_sum: u32,
    /// Frame length in the buffer (size on the wire − 4).
    pub(crate) len: u32,
    /// Unfolded sum of the IPv4 header's words except the checksum and the destination.
    pub(crate) ip_sum: u32,
    /// The first flow's destination (host order).
    pub(crate) dst: u32,
    /// Destinations swept, `dst .. dst + flows` (at least 1).
    pub(crate) flows: u32,
}

/// Bytes of a template in the map.
pub(crate) const TEMPLATE_VALUE: usize = 72;
/// Where the template's length change is in the map value: `len − run frame length` as an
/// `i32`, which the program passes to `bpf_xdp_adjust_tail` (0: no call).
pub(crate) const TEMPLATE_DELTA_AT: usize = HEAD_LEN + 4;
/// Where the partial IPv4 header sum, the first destination and the flow count are.
pub(crate) const TEMPLATE_IP_SUM_AT: usize = HEAD_LEN + 8;
pub(crate) const TEMPLATE_DST_AT: usize = HEAD_LEN + 12;
pub(crate) const TEMPLATE_FLOWS_AT: usize = HEAD_LEN + 16;
/// Where the IPv4 checksum and destination are in the frame.
pub(crate) const IP_CSUM_AT: usize = 24;
pub(crate) const IP_DST_AT: usize = 30;

/// Simple IMIX as `vrhost_traffic` sends it: 64, 570 and 1518 bytes in the ratio 7:4:1,
/// in this fixed 12-frame order (indexes into the sizes) per stream.
const IMIX_PATTERN: [u8; 12] = [0, 1, 0, 0, 1, 0, 2, 0, 1, 0, 0, 1];

/// A trial's frame size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// One size on the wire (FCS included).
    Fixed(u16),
    /// Simple IMIX (64, 570, 1518 in 7:4:1), per stream.
    Imix,
}

impl Size {
    /// The sizes a stream cycles through (size classes).
    pub(crate) fn classes(self) -> Vec<u16> {
        match self {
            Size::Fixed(s) => vec![s],
            Size::Imix => vrhost_traffic::frames::IMIX.iter().map(|i| i.0).collect(),
        }
    }

    /// The order of size classes per stream, repeated.
    pub(crate) fn pattern(self) -> &'static [u8] {
        match self {
            Size::Fixed(_) => &[0],
            Size::Imix => &IMIX_PATTERN,
        }
    }

    /// The largest size.
    pub(crate) fn max(self) -> u16 {
        self.classes().into_iter().max().expect("a size")
    }

    /// Check the size; the error says what to change.
    pub(crate) fn check(self) -> Result<(), String> {
        match self {
            Size::Fixed(s) => check_size(s),
            Size::Imix => Ok(()),
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Size::Fixed(s) => write!(f, "{s}"),
            Size::Imix => f.write_str("imix"),
        }
    }
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Size::Imix);
        }
        s.parse::<u16>()
            .map(Size::Fixed)
            .map_err(|_| format!("{s:?}: a frame size in bytes (64–1518) or `imix`"))
    }
}

impl serde::Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Size::Fixed(n) => s.serialize_u16(*n),
            Size::Imix => s.serialize_str("imix"),
        }
    }
}

impl Template {
    /// The map value, for runs whose input frame is `run_len` bytes.
    pub(crate) fn to_value(&self, run_len: usize) -> [u8; TEMPLATE_VALUE] {
        let delta = self.len as i32 - run_len as i32;
        let mut v = [0u8; TEMPLATE_VALUE];
        v[..HEAD_LEN].copy_from_slice(&self.head);
        v[HEAD_LEN..HEAD_LEN + 4].copy_from_slice(&self.udp_sum.to_ne_bytes());
        v[TEMPLATE_DELTA_AT..TEMPLATE_DELTA_AT + 4].copy_from_slice(&delta.to_ne_bytes());
        v[TEMPLATE_IP_SUM_AT..TEMPLATE_IP_SUM_AT + 4].copy_from_slice(&self.ip_sum.to_ne_bytes());
        v[TEMPLATE_DST_AT..TEMPLATE_DST_AT + 4].copy_from_slice(&self.dst.to_ne_bytes());
        v[TEMPLATE_FLOWS_AT..TEMPLATE_FLOWS_AT + 4].copy_from_slice(&self.flows.to_ne_bytes());
        v
    }
}

/// Check a frame size on the wire; the error says what to change.
pub(crate) fn check_size(size: u16) -> Result<(), String> {
    if size < MIN_SIZE {
        return Err(format!(
            "--frame-size {size}: below {MIN_SIZE}, the smallest Ethernet frame (and the \
             smallest that holds IPv4, UDP and the 18-byte signature)"
        ));
    }
    if size > MAX_SIZE {
        return Err(format!(
            "--frame-size {size}: above {MAX_SIZE} (MTU 1500 + 18 bytes of Ethernet header and \
             FCS), the largest frame the lab's veths carry"
        ));
    }
    Ok(())
}

/// The template of stream `id` carrying VR `vr`'s traffic (non-overlapping addressing) in
/// frames of `size` bytes on the wire.
pub(crate) fn template(id: u32, vr: u32, size: u16) -> Template {
    let b = addressing::side_addrs(vr, Side::B, false);
    template_flows(id, vr, size, b.host4, 1)
}

/// [`template`] with `flows` destinations from `dst` on (`dst + flows − 1` must not wrap).
pub(crate) fn template_flows(id: u32, vr: u32, size: u16, dst: Ipv4Addr, flows: u32) -> Template {
    assert!(
        flows >= 1 && u32::from(dst).checked_add(flows - 1).is_some(),
        "{flows} flows from {dst}"
    );
    let mut t = build(vr, dst, id, usize::from(size) - FCS_LEN);
    t.flows = flows;
    t
}

/// Unfolded one's-complement sum of big-endian 16-bit words.
fn words(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum()
}

fn build(vr: u32, dst: Ipv4Addr, id: u32, len: usize) -> Template {
    assert!(len >= MIN_BUF, "frame buffer of {len} bytes");
    let mut f = [0u8; HEAD_LEN];
    f[..lab_frame::LEN].copy_from_slice(&lab_frame::headers(vr, false, dst, len, true));
    let ip_sum = words(&f[14..24]) + words(&f[26..30]);
    f[42..44].copy_from_slice(&MAGIC.to_be_bytes());
    f[44..48].copy_from_slice(&id.to_be_bytes());
    // Unfolded sums: the pseudo header's words, and the UDP header and signature head (the
    // checksum field is zero; payload past the signature is zero).
    let udp_len = (len - lab_frame::UDP_AT) as u32;
    let src = addressing::side_addrs(vr, Side::A, false).host4;
    let pseudo = words(&src.octets()) + 17 + udp_len;
    Template {
        head: f,
        udp_sum: pseudo + words(&f[34..48]),
        len: len as u32,
        ip_sum,
        dst: u32::from(dst),
        flows: 1,
    }
}

/// The frame buffer handed to `BPF_PROG_RUN` (the kernel copies it into every page once):
/// `size − 4` bytes (the largest size of the trial; the program shrinks smaller frames),
/// stream 0's head, zeros after.
pub(crate) fn run_frame(first: &Template, size: u16) -> Vec<u8> {
    let mut f = vec![0u8; usize::from(size) - FCS_LEN];
    f[..HEAD_LEN].copy_from_slice(&first.head);
    f
}

/// What the program does to a frame, in Rust: copy the head, stamp, fill the checksum (the
/// reference the BPF program is tested against).
#[cfg(test)]
pub(crate) fn stamp(t: &Template, frame: &mut [u8], seq: u64, ts: u64) {
    let be48 = |v: u64| {
        let b = v.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    };
    frame[..HEAD_LEN].copy_from_slice(&t.head);
    frame[SEQ_AT..SEQ_AT + 6].copy_from_slice(&be48(seq));
    frame[TIME_AT..TIME_AT + 6].copy_from_slice(&be48(ts));
    let dst = t.dst + (seq % u64::from(t.flows)) as u32;
    frame[IP_DST_AT..IP_DST_AT + 4].copy_from_slice(&dst.to_be_bytes());
    let w = |v: u64| ((v & 0xffff) + ((v >> 16) & 0xffff) + ((v >> 32) & 0xffff)) as u32;
    let mut ip = t.ip_sum + w(u64::from(dst));
    ip = (ip & 0xffff) + (ip >> 16);
    ip = (ip & 0xffff) + (ip >> 16);
    frame[IP_CSUM_AT..IP_CSUM_AT + 2].copy_from_slice(&(!(ip as u16)).to_be_bytes());
    let mut s = t.udp_sum + w(seq) + w(ts) + w(u64::from(dst));
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    let mut c = !(s as u16);
    if c == 0 {
        c = 0xffff;
    }
    frame[UDP_CSUM_AT..UDP_CSUM_AT + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_wire::{ipv4, udp};

    fn valid(frame: &[u8]) -> bool {
        let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        ip.verify_checksum() && u.verify_checksum_v4(ip.src_addr(), ip.dst_addr())
    }

    #[test]
    fn stamped_frames_parse_with_valid_checksums_at_every_size() {
        let _alone = crate::cores_alone();
        for size in [64u16, 65, 128, 570, 1024, 1518] {
            let t = template(3, 3, size);
            let mut f = run_frame(&t, size);
            assert_eq!(f.len(), usize::from(size) - 4);
            for (seq, ts) in [(0, 0), (1, 12_345), (0xffff_ffff_ffff, 0xffff_ffff_ffff)] {
                stamp(&t, &mut f, seq, ts);
                assert!(valid(&f), "size {size} seq {seq}");
                let sig = vrhost_traffic::signature::parse(&f).expect("signed");
                assert_eq!((sig.stream, sig.seq, sig.tx_ns), (3, seq, ts));
            }
        }
        let t = template(0, 7, 64);
        assert_eq!(&t.head[0..6], &addressing::vif_mac(7, Side::A).octets());
        assert_eq!(&t.head[26..34], &[10, 7, 0, 2, 10, 7, 1, 2]);
    }

    /// The sweep: frame `seq` to `dst + seq mod flows`, both checksums valid at every
    /// destination (across a carry in the address's low word too).
    #[test]
    fn swept_destinations_keep_both_checksums_valid() {
        let _alone = crate::cores_alone();
        let base = Ipv4Addr::new(100, 64, 255, 250);
        for size in [64u16, 1518] {
            let t = template_flows(2, 2, size, base, 10);
            let mut f = run_frame(&t, size);
            for seq in 0..25u64 {
                stamp(&t, &mut f, seq, 1_000 + seq);
                assert!(valid(&f), "size {size} seq {seq}");
                let want = Ipv4Addr::from(u32::from(base) + (seq % 10) as u32);
                assert_eq!(f[30..34], want.octets(), "seq {seq}");
            }
        }
        // One flow is the VR's side-B host, as before.
        let one = template(4, 4, 64);
        let mut f = run_frame(&one, 64);
        stamp(&one, &mut f, 7, 9);
        assert_eq!(f[30..34], [10, 4, 1, 2]);
        assert!(valid(&f));
    }

    #[test]
    fn sizes_outside_64_to_1518_are_refused_with_the_reason() {
        let _alone = crate::cores_alone();
        assert!(check_size(63).unwrap_err().contains("below 64"));
        assert!(check_size(1519).unwrap_err().contains("MTU 1500"));
        assert!(check_size(64).is_ok() && check_size(1518).is_ok());
    }
}
