//! Completing TCP/UDP checksums that the sending kernel left for "hardware" to fill in.
//!
//! A frame sent by a local socket through a device with transmit checksum offload carries
//! `CHECKSUM_PARTIAL`: its L4 checksum field holds only the pseudo-header sum, to be
//! finished by the NIC. A real NIC never hands such a frame to a receiver, but a veth does —
//! it passes the `sk_buff` to its peer as is — and the ring flags it with
//! `TP_STATUS_CSUMNOTREADY`. A router that forwarded it unchanged would emit a frame with a
//! wrong checksum (its own packet socket sends with `CHECKSUM_NONE`), which the next host
//! drops. So the receive path finishes the checksum, as the NIC would have.
//!
//! The kernel's `csum_start`/`csum_offset` are not in the ring's header (only
//! `PACKET_VNET_HDR` would carry them, and that also turns on GSO frames, which a router
//! port must not receive), so the L4 header is found by parsing: Ethernet, up to two VLAN
//! tags, IPv4 (not a fragment) or IPv6 (TCP/UDP directly after the fixed header — the only
//! layouts the kernel's offload produces for them). The checksum is recomputed over the
//! whole segment rather than finished from the partial sum, so a stale field cannot matter.
//! Anything else is left as it is (and `false` returned).

const ETH_HLEN: usize = 14;
const TCP: u8 = 6;
const UDP: u8 = 17;

#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// One's-complement sum of `data` as big-endian 16-bit words (odd byte padded), unfolded.
fn sum(data: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        s += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        s += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [b] = pairs.remainder() {
        s += u64::from(*b) << 8;
    }
    s
}

fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Fill in the TCP or UDP checksum of `frame` (an Ethernet frame). Returns whether it did.
pub(super) fn complete(frame: &mut [u8]) -> bool {
    let Some(mut ty) = be16(frame, 12) else {
        return false;
    };
    let mut l3 = ETH_HLEN;
    for _ in 0..2 {
        if ty == 0x8100 || ty == 0x88a8 {
            let Some(t) = be16(frame, l3 + 2) else {
                return false;
            };
            ty = t;
            l3 += 4;
        }
    }
    match ty {
        0x0800 => complete_v4(frame, l3),
        0x86dd => complete_v6(frame, l3),
        _ => false,
    }
}

fn complete_v4(frame: &mut [u8], l3: usize) -> bool {
    let Some(ip) = frame.get(l3..) else {
        return false;
    };
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return false;
    }
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if ihl < 20 || total < ihl || total > ip.len() || frag != 0 {
        return false;
    }
    let proto = ip[9];
    let l4_len = total - ihl;
    let pseudo = sum(&ip[12..20]) + u64::from(proto) + l4_len as u64;
    finish(&mut frame[l3 + ihl..l3 + total], proto, pseudo)
}

fn complete_v6(frame: &mut [u8], l3: usize) -> bool {
    let Some(ip) = frame.get(l3..) else {
        return false;
    };
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return false;
    }
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let nh = ip[6];
    if 40 + plen > ip.len() {
        return false;
    }
    let pseudo = sum(&ip[8..40]) + u64::from(nh) + plen as u64;
    finish(&mut frame[l3 + 40..l3 + 40 + plen], nh, pseudo)
}

fn finish(seg: &mut [u8], proto: u8, pseudo: u64) -> bool {
    let at = match proto {
        TCP => 16,
        UDP => 6,
        _ => return false,
    };
    if seg.len() < at + 2 {
        return false;
    }
    seg[at] = 0;
    seg[at + 1] = 0;
    let mut c = !fold(pseudo + sum(seg));
    if proto == UDP && c == 0 {
        // 0 means "no checksum" in UDP; an all-ones result is sent as 0xffff.
        c = 0xffff;
    }
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use vrhost_wire::checksum;

    fn eth(ty: u16, tags: &[u16], l3: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        for &t in tags {
            f.extend_from_slice(&t.to_be_bytes());
            f.extend_from_slice(&7u16.to_be_bytes());
        }
        f.extend_from_slice(&ty.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
        let total = 20 + l4.len();
        let mut b = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0];
        b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        b.extend_from_slice(&[192, 0, 2, 1, 198, 51, 100, 7]);
        b.extend_from_slice(l4);
        b
    }

    fn tcp_segment(payload: &[u8], partial: u16) -> Vec<u8> {
        let mut t = vec![
            0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
        ];
        t[16..18].copy_from_slice(&partial.to_be_bytes());
        t.extend_from_slice(payload);
        t
    }

    /// The checksum the wire crate computes independently.
    fn reference_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, seg: &[u8]) -> u16 {
        let mut s = seg.to_vec();
        let at = if proto == TCP { 16 } else { 6 };
        s[at..at + 2].fill(0);
        !checksum::combine(&[
            checksum::pseudo_header_v4(src, dst, proto, s.len() as u16),
            checksum::data(&s),
        ])
    }

    #[test]
    fn ipv4_tcp_partial_is_completed() {
        // Odd-length payload: the padding byte of the sum is exercised.
        let seg = tcp_segment(b"hello, router", 0xbeef);
        let mut f = eth(0x0800, &[], &ipv4(TCP, &seg));
        assert!(complete(&mut f));
        let got = u16::from_be_bytes([f[14 + 20 + 16], f[14 + 20 + 17]]);
        let want = reference_v4(
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(198, 51, 100, 7),
            TCP,
            &seg,
        );
        assert_eq!(got, want);
        // And the segment now verifies: pseudo header + segment sums to all ones.
        let l4 = &f[34..];
        let v = fold(sum(&f[26..34]) + u64::from(TCP) + l4.len() as u64 + sum(l4));
        assert_eq!(v, 0xffff);
    }

    #[test]
    fn tagged_ipv4_udp_is_completed() {
        let mut udp = vec![0x30, 0x39, 0x00, 0x35, 0, 0, 0x12, 0x34];
        udp.extend_from_slice(&[0xab; 33]);
        let n = udp.len() as u16;
        udp[4..6].copy_from_slice(&n.to_be_bytes());
        let mut f = eth(0x0800, &[0x88a8, 0x8100], &ipv4(UDP, &udp));
        assert!(complete(&mut f));
        let at = 14 + 8 + 20 + 6;
        let got = u16::from_be_bytes([f[at], f[at + 1]]);
        let want = reference_v4(
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(198, 51, 100, 7),
            UDP,
            &udp,
        );
        assert_eq!(got, if want == 0 { 0xffff } else { want });
    }

    #[test]
    fn ipv6_tcp_is_completed_and_padding_ignored() {
        let src: Ipv6Addr = "2001:db8:a::2".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8:b::2".parse().unwrap();
        let seg = tcp_segment(&[1, 2, 3, 4, 5], 0);
        let mut ip = vec![0x60, 0, 0, 0, 0, 0, TCP, 64];
        ip[4..6].copy_from_slice(&(seg.len() as u16).to_be_bytes());
        ip.extend_from_slice(&src.octets());
        ip.extend_from_slice(&dst.octets());
        ip.extend_from_slice(&seg);
        let mut f = eth(0x86dd, &[], &ip);
        // Ethernet padding after the datagram must not enter the sum.
        f.extend_from_slice(&[0xee; 6]);
        assert!(complete(&mut f));
        let at = 14 + 40 + 16;
        let got = u16::from_be_bytes([f[at], f[at + 1]]);
        let mut s = seg.clone();
        s[16..18].fill(0);
        let want = !checksum::combine(&[
            checksum::pseudo_header_v6(src, dst, TCP, s.len() as u32),
            checksum::data(&s),
        ]);
        assert_eq!(got, want);
        assert_eq!(&f[f.len() - 6..], &[0xee; 6]);
    }

    #[test]
    fn what_it_cannot_parse_is_left_alone() {
        // A fragment, ICMP, ARP, a truncated header: untouched, `false`.
        let seg = tcp_segment(b"x", 0x1111);
        let mut frag = ipv4(TCP, &seg);
        frag[6] = 0x20; // MF
        let cases = [
            eth(0x0800, &[], &frag),
            eth(0x0800, &[], &ipv4(1, &[8, 0, 0, 0, 0, 1, 0, 1])),
            eth(0x0806, &[], &[0; 28]),
            eth(0x0800, &[], &[0x45, 0, 0]),
            vec![0; 10],
        ];
        for c in cases {
            let mut f = c.clone();
            assert!(!complete(&mut f));
            assert_eq!(f, c);
        }
    }
}
