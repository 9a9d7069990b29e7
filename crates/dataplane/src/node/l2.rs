//! L2 rewrite: the Ethernet (and VLAN) header a forwarded frame leaves with.
//!
//! Rather than popping and pushing tags in place, the new header is written in front of the
//! L3 header in one go: 14 bytes, or 18 with the egress VIF's 802.1Q tag. Whatever the frame
//! arrived with (untagged, one tag, QinQ) is simply not copied. The slot's headroom makes room
//! when the new header is longer.

use vrhost_wire::ethernet::EthernetAddress;

use crate::pool::{Pkt, Pool};

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
    let l3 = usize::from(m.off) + usize::from(m.l3);
    let end = usize::from(m.off) + usize::from(m.len);
    let hlen = if vlan.is_some() { 18 } else { 14 };
    // Headroom is 128 bytes and an L3 offset is at least 14, so this never underflows.
    let start = l3 - hlen;
    slot[start..start + 6].copy_from_slice(&dst.0);
    slot[start + 6..start + 12].copy_from_slice(&src.0);
    if let Some(vid) = vlan {
        slot[start + 12..start + 14].copy_from_slice(&0x8100u16.to_be_bytes());
        slot[start + 14..start + 16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    slot[l3 - 2..l3].copy_from_slice(&ethertype.to_be_bytes());
    m.off = start as u16;
    m.len = (end - start) as u16;
    m.l3 = hlen as u8;
}
