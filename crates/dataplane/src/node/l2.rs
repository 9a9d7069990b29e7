//! L2 rewrite: the Ethernet (and VLAN) header a forwarded frame leaves with.
//!
//! Rather than popping and pushing tags in place, the new header is written in front of the
//! L3 header in one go: 14 bytes, or 18 with the egress VIF's 802.1Q tag. Whatever the frame
//! arrived with (untagged, one tag, QinQ) is simply not copied. The slot's headroom makes room
//! when the new header is longer.

use vrhost_wire::ethernet::EthernetAddress;

use crate::pool::{Meta, Pkt, Pool, SLOT_SIZE};

/// Replace the frame's L2 header: `dst`, `src`, an optional VLAN tag, then the original
/// ethertype of the L3 header (`ethertype`). `Meta::l3` must point at the L3 header.
#[inline(always)]
pub(crate) fn rewrite(
    pool: &Pool,
    p: &mut Pkt,
    dst: EthernetAddress,
    src: EthernetAddress,
    vlan: Option<u16>,
    ethertype: u16,
) {
    let (m, slot) = pool.slot_mut(p);
    rewrite_slot(m, slot, dst, src, vlan, ethertype);
}

/// [`rewrite`] on a slot already borrowed.
#[inline(always)]
pub(crate) fn rewrite_slot(
    m: &mut Meta,
    slot: &mut [u8; SLOT_SIZE],
    dst: EthernetAddress,
    src: EthernetAddress,
    vlan: Option<u16>,
    ethertype: u16,
) {
    let l3 = usize::from(m.off) + usize::from(m.l3);
    let end = usize::from(m.off) + usize::from(m.len);
    // Headroom is 128 bytes and an L3 offset is at least 14, so `start` never underflows;
    // the header is written as one fixed-size array (one bounds check).
    let start = match vlan {
        None => {
            let start = l3 - 14;
            if let Some(h) = slot
                .get_mut(start..)
                .and_then(<[u8]>::first_chunk_mut::<14>)
            {
                h[..6].copy_from_slice(&dst.0);
                h[6..12].copy_from_slice(&src.0);
                h[12..].copy_from_slice(&ethertype.to_be_bytes());
            }
            start
        }
        Some(vid) => {
            let start = l3 - 18;
            if let Some(h) = slot
                .get_mut(start..)
                .and_then(<[u8]>::first_chunk_mut::<18>)
            {
                h[..6].copy_from_slice(&dst.0);
                h[6..12].copy_from_slice(&src.0);
                h[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
                h[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
                h[16..].copy_from_slice(&ethertype.to_be_bytes());
            }
            start
        }
    };
    m.off = start as u16;
    m.len = (end - start) as u16;
    m.l3 = (l3 - start) as u8;
}
