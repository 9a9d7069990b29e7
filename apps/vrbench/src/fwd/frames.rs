//! The test frames: 64 bytes on the wire (60 + FCS), Ethernet / IPv4 / UDP, one per VR, built
//! from the lab's addressing plan so that the router under test forwards them like any host's
//! traffic: destination MAC = the VR's VIF MAC on side A (its gateway MAC), source MAC =
//! `a0`'s, source address = the VR's side-A host, destination = its side-B host.
//!
//! Why these and not random ones: every forwarder in the comparison (vrhost, the native IP
//! forwarder, a macvlan VR) must accept and forward every frame, so what is measured is the
//! forwarding rate, not a drop path. Checksums are correct (IPv4 header and UDP), TTL is 64.

use vrhost_lab::{Side, addressing};
use vrhost_wire::udp;

use crate::lab_frame;

/// Frame length without FCS (the 64-byte minimum on the wire).
pub(crate) const FRAME_LEN: usize = 60;
/// How many leading bytes the generator program rewrites per frame from a VR's template:
/// the headers (42 bytes, all the router touches) rounded up to 8-byte words.
pub(crate) const TEMPLATE_LEN: usize = 48;

/// The frame for VR `vr` of a lab with `overlapping` addressing: [`lab_frame::headers`] to
/// the VR's side-B host, without DF, and a zero payload.
pub(crate) fn frame(vr: u32, overlapping: bool) -> [u8; FRAME_LEN] {
    let a = addressing::side_addrs(vr, Side::A, overlapping);
    let b = addressing::side_addrs(vr, Side::B, overlapping);
    let mut f = [0u8; FRAME_LEN];
    f[..lab_frame::LEN].copy_from_slice(&lab_frame::headers(
        vr,
        overlapping,
        b.host4,
        FRAME_LEN,
        false,
    ));
    udp::Packet::new_unchecked(&mut f[lab_frame::UDP_AT..]).fill_checksum_v4(a.host4, b.host4);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use vrhost_wire::checksum;

    #[test]
    fn frames_follow_the_plan_with_valid_checksums() {
        let _alone = crate::cores_alone();
        let f = frame(3, false);
        assert_eq!(&f[0..6], &addressing::vif_mac(3, Side::A).octets());
        assert_eq!(&f[6..12], &addressing::side_mac(Side::A).octets());
        assert_eq!(&f[26..30], &[10, 3, 0, 2]);
        assert_eq!(&f[30..34], &[10, 3, 1, 2]);
        // A correct header sums to 0xffff.
        assert_eq!(checksum::data(&f[14..34]), 0xffff);
        let pseudo = checksum::pseudo_header_v4(
            Ipv4Addr::new(10, 3, 0, 2),
            Ipv4Addr::new(10, 3, 1, 2),
            17,
            26,
        );
        assert_eq!(
            checksum::combine(&[pseudo, checksum::data(&f[34..])]),
            0xffff
        );
        // Everything after the template is the same for every VR.
        assert_eq!(
            frame(0, false)[TEMPLATE_LEN..],
            frame(63, true)[TEMPLATE_LEN..]
        );
    }
}
