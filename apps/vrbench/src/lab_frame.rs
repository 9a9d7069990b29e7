//! The Ethernet / IPv4 / UDP headers of the lab's test frames, for both lab generators: the
//! plain frames of `fwd/frames.rs` and the stamped templates of `live/frames.rs`.
//!
//! Why one place: the headers follow the lab's addressing plan, so that every forwarder in a
//! comparison (vrhost, the kernel's IP forwarder, a macvlan VR) accepts every frame and what
//! is measured is forwarding, not a drop path. Destination MAC = VR `vr`'s VIF MAC on side A
//! (its gateway), source MAC = `a0`'s, source address = the VR's side-A host. The IPv4
//! header checksum is filled in; the UDP checksum is left zero for the caller, who knows
//! the payload.

use std::net::Ipv4Addr;

use vrhost_lab::{Side, addressing};
use vrhost_wire::ethernet::{self, EtherType, EthernetAddress};
use vrhost_wire::ip::Protocol;
use vrhost_wire::{ipv4, udp};

/// Ethernet (14), IPv4 without options (20) and UDP (8).
pub(crate) const LEN: usize = 42;
/// Where the IPv4 header starts.
pub(crate) const IP_AT: usize = 14;
/// Where the UDP header starts.
pub(crate) const UDP_AT: usize = 34;
/// UDP ports of the test flow.
pub(crate) const SRC_PORT: u16 = 49152;
/// The discard port.
pub(crate) const DST_PORT: u16 = 9;
/// TTL of every test frame.
const TTL: u8 = 64;

/// The headers of VR `vr`'s frames to `dst`, `frame_len` bytes long without FCS.
pub(crate) fn headers(
    vr: u32,
    overlapping: bool,
    dst: Ipv4Addr,
    frame_len: usize,
    dont_frag: bool,
) -> [u8; LEN] {
    assert!(
        (LEN..=usize::from(u16::MAX)).contains(&frame_len),
        "a {frame_len}-byte frame cannot carry these headers"
    );
    let src = addressing::side_addrs(vr, Side::A, overlapping).host4;
    let mut h = [0u8; LEN];
    {
        let mut e = ethernet::Frame::new_unchecked(&mut h[..IP_AT]);
        e.set_dst_addr(EthernetAddress(addressing::vif_mac(vr, Side::A).octets()));
        e.set_src_addr(EthernetAddress(addressing::side_mac(Side::A).octets()));
        e.set_ethertype(EtherType::IPV4);
    }
    {
        let mut ip = ipv4::Packet::new_unchecked(&mut h[IP_AT..UDP_AT]);
        ip.set_version(4);
        ip.set_header_len(ipv4::HEADER_LEN);
        ip.set_total_len((frame_len - IP_AT) as u16);
        ip.set_dont_frag(dont_frag);
        ip.set_ttl(TTL);
        ip.set_protocol(Protocol::UDP);
        ip.set_src_addr(src);
        ip.set_dst_addr(dst);
        ip.fill_checksum();
    }
    let mut u = udp::Packet::new_unchecked(&mut h[UDP_AT..]);
    u.set_src_port(SRC_PORT);
    u.set_dst_port(DST_PORT);
    u.set_len((frame_len - UDP_AT) as u16);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_follow_the_plan_and_parse_with_a_valid_ipv4_checksum() {
        let _alone = crate::cores_alone();
        let dst = Ipv4Addr::new(10, 3, 1, 2);
        let h = headers(3, false, dst, 60, true);
        let e = ethernet::Frame::new_checked(&h[..]).unwrap();
        assert_eq!(e.dst_addr().0, addressing::vif_mac(3, Side::A).octets());
        assert_eq!(e.src_addr().0, addressing::side_mac(Side::A).octets());
        assert_eq!(e.ethertype(), EtherType::IPV4);
        let ip = ipv4::Packet::new_unchecked(&h[IP_AT..UDP_AT]);
        assert!(ip.verify_checksum());
        assert_eq!((ip.total_len(), ip.ttl(), ip.dont_frag()), (46, 64, true));
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 3, 0, 2));
        assert_eq!(ip.dst_addr(), dst);
        let u = udp::Packet::new_unchecked(&h[UDP_AT..]);
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (49152, 9, 26));
        assert_eq!(u.checksum(), 0, "left for the caller");
        let plain = headers(3, false, dst, 60, false);
        assert!(!ipv4::Packet::new_unchecked(&plain[IP_AT..UDP_AT]).dont_frag());
    }
}
