//! `ip4-frag`: IPv4 fragmentation (RFC 791 §3.2, RFC 1812 §5.2.6) of a datagram larger than
//! the egress MTU that does not say Don't Fragment.
//!
//! Each fragment is built in a fresh pool slot: its header, then its piece of the payload,
//! copied out of the original, which is freed at the end. Splitting in place was rejected:
//! every fragment needs its own header in front of its piece, and a port transmits one slot
//! as one frame, so pieces would have to move anyway (and chained buffers would make every
//! backend handle scatter-gather for a rare case). Punting to the kernel was rejected too: the
//! punt path is policed and slow, and RFC 1812 makes fragmentation the router's job.
//!
//! What the fragments keep, as RFC 791 asks: the identification, addresses, protocol, DSCP
//! and ECN of the original; the first fragment carries the original header with all its
//! options, every later one only the options whose copied flag is set (END-padded to a
//! 32-bit boundary). Every piece but the last is a multiple of 8 bytes. A fragment of a
//! fragment keeps its place in the original datagram: offsets are counted from the incoming
//! offset, and the last piece keeps the incoming MF flag. The TTL is decremented once (the
//! forwarding hop) and the header checksum recomputed per fragment.
//!
//! Accounting: the original datagram leaves by exactly one exit. Either all its fragments are
//! staged for the egress port, or — when the pool runs dry part-way — the fragments already
//! built go out, the rest is never built, and the datagram counts one `frag-no-buffer` drop.
//! A datagram whose pieces would not fit in the 13-bit offset field (only a malformed
//! fragment can get there) counts `mtu-exceeded`.

use vrhost_wire::ethernet::EthernetAddress;
use vrhost_wire::ipv4::{self, OptionKind, OptionsIter};

use crate::counters::Drop;
use crate::node::{Ctx, l2};
use crate::pool::{HEADROOM, Pkt};
use crate::vr::Vif;

/// Where a fragment's IPv4 header goes in its slot: after an untagged Ethernet header, so that
/// [`l2::rewrite`] can write 14 or 18 bytes in front of it.
const L3: usize = 14;

/// How one datagram splits.
#[derive(Debug, Clone)]
struct Plan {
    /// Header length of the datagram (and of the first fragment).
    hl: usize,
    /// Options of every later fragment: the copied ones, END-padded.
    later: [u8; ipv4::MAX_OPTIONS_LEN],
    later_len: usize,
    /// Payload bytes of the datagram.
    payload: usize,
    /// Most payload bytes in the first fragment, and in each later one (multiples of 8).
    first_max: usize,
    later_max: usize,
    /// Fragment offset (bytes) and MF flag of the datagram as it arrived.
    offset: usize,
    more: bool,
}

/// One fragment: `len` payload bytes from `start` (relative to the datagram's payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    start: usize,
    len: usize,
    last: bool,
}

/// Copy the options whose copied flag is set into `out`, END-padded to a multiple of 4;
/// returns the padded length. Malformed options end the copy: what cannot be parsed is not
/// repeated, and the first fragment still carries the original bytes untouched.
fn copied_options(opts: &[u8], out: &mut [u8; ipv4::MAX_OPTIONS_LEN]) -> usize {
    let mut n = 0;
    for o in OptionsIter::new(opts) {
        let Ok(o) = o else { break };
        if o.kind == OptionKind::END {
            break;
        }
        // END and NOP have the copied bit clear, so a copied option is always kind, length,
        // data.
        if o.kind.copied() {
            let len = 2 + o.data.len();
            out[n] = o.kind.0;
            out[n + 1] = len as u8;
            out[n + 2..n + len].copy_from_slice(o.data);
            n += len;
        }
    }
    let padded = n.next_multiple_of(4);
    out[n..padded].fill(0);
    padded
}

impl Plan {
    /// The plan for `dgram` (IPv4 header on, trimmed to its total length) over a link of
    /// `mtu`; `None` if it cannot be fragmented (header unreadable, no room for 8 payload
    /// bytes, or offsets past the 13-bit field).
    fn new(dgram: &[u8], mtu: u16) -> Option<Plan> {
        let ip = ipv4::Packet::new_checked(dgram).ok()?;
        let hl = ip.header_len();
        let payload = usize::from(ip.total_len()) - hl;
        let mut later = [0; ipv4::MAX_OPTIONS_LEN];
        let later_len = copied_options(ip.options(), &mut later);
        let mtu = usize::from(mtu);
        let first_max = mtu.checked_sub(hl)? & !7;
        let later_max = mtu.checked_sub(ipv4::HEADER_LEN + later_len)? & !7;
        let offset = usize::from(ip.frag_offset());
        // The last piece's offset is below `offset + payload` and a multiple of 8, so it fits
        // the field (≤ 65528) exactly when this holds.
        if first_max == 0 || later_max == 0 || payload == 0 || offset + payload > 0x1_0000 {
            return None;
        }
        Some(Plan {
            hl,
            later,
            later_len,
            payload,
            first_max,
            later_max,
            offset,
            more: ip.more_frags(),
        })
    }

    /// The fragments, in order.
    fn pieces(&self) -> impl Iterator<Item = Piece> + '_ {
        let mut start = 0;
        core::iter::from_fn(move || {
            if start >= self.payload {
                return None;
            }
            let max = if start == 0 {
                self.first_max
            } else {
                self.later_max
            };
            let len = max.min(self.payload - start);
            let piece = Piece {
                start,
                len,
                last: start + len == self.payload,
            };
            start += len;
            Some(piece)
        })
    }

    /// Write fragment `piece` of `dgram` into `buf` (IPv4 header first); returns its length.
    /// `buf` must hold it (at most the MTU the plan was made for).
    fn write(&self, dgram: &[u8], piece: Piece, buf: &mut [u8]) -> usize {
        let hl = if piece.start == 0 {
            buf[..self.hl].copy_from_slice(&dgram[..self.hl]);
            self.hl
        } else {
            let hl = ipv4::HEADER_LEN + self.later_len;
            buf[..ipv4::HEADER_LEN].copy_from_slice(&dgram[..ipv4::HEADER_LEN]);
            buf[ipv4::HEADER_LEN..hl].copy_from_slice(&self.later[..self.later_len]);
            hl
        };
        let total = hl + piece.len;
        let src = self.hl + piece.start;
        buf[hl..total].copy_from_slice(&dgram[src..src + piece.len]);
        let mut ip = ipv4::Packet::new_unchecked(&mut buf[..total]);
        ip.set_header_len(hl);
        ip.set_total_len(total as u16);
        // DF is clear (or we would not be here); the reserved bit must be zero (RFC 791).
        ip.clear_flags();
        ip.set_more_frags(!piece.last || self.more);
        ip.set_frag_offset((self.offset + piece.start) as u16);
        ip.set_ttl(ip.ttl().saturating_sub(1));
        ip.fill_checksum();
        total
    }
}

/// Fragment `p` (an IPv4 datagram from `Meta::l3` on, trimmed, TTL not yet decremented) to
/// leave by `out` towards `mac`, and stage the fragments. `p` is consumed: freed once its
/// fragments are built, or dropped (and counted) if they cannot be.
pub(crate) fn fragment(cx: &mut Ctx<'_>, p: Pkt, out: &Vif, mac: EthernetAddress) {
    let pool = cx.pool;
    let m = *pool.meta(&p);
    let dgram = &pool.frame(&p)[usize::from(m.l3)..];
    let Some(plan) = Plan::new(dgram, out.config.mtu) else {
        return cx.drop(p, Drop::MtuExceeded);
    };
    for piece in plan.pieces() {
        let Some(mut q) = pool.alloc() else {
            return cx.drop(p, Drop::FragNoBuffer);
        };
        {
            let (qm, slot) = pool.slot_mut(&mut q);
            // A fragment is at most the MTU, and MAX_MTU leaves room for L2 headers, so it
            // fits in the slot after the headroom.
            let n = plan.write(dgram, piece, &mut slot[HEADROOM + L3..]);
            qm.off = HEADROOM as u16;
            qm.len = (L3 + n) as u16;
            qm.l3 = L3 as u8;
            qm.vr = m.vr;
            qm.class = m.class;
        }
        l2::rewrite(pool, &mut q, mac, out.config.mac, out.config.vlan, 0x0800);
        cx.c.fragments.add(1);
        cx.send(q, out);
    }
    pool.free(p);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram with `opts` (a multiple of 4 bytes) and `payload` bytes counting 0, 1, 2 …;
    /// TTL 64, ident 0x4242, the given offset and MF.
    fn datagram(opts: &[u8], payload: usize, offset: u16, more: bool) -> Vec<u8> {
        let hl = 20 + opts.len();
        let mut b = vec![0u8; hl + payload];
        let mut ip = ipv4::Packet::new_unchecked(&mut b[..]);
        ip.set_version(4);
        ip.set_header_len(hl);
        ip.set_total_len((hl + payload) as u16);
        ip.set_ident(0x4242);
        ip.clear_flags();
        ip.set_more_frags(more);
        ip.set_frag_offset(offset);
        ip.set_ttl(64);
        ip.set_protocol(vrhost_wire::ip::Protocol::UDP);
        ip.set_src_addr([10, 0, 0, 2].into());
        ip.set_dst_addr([198, 51, 100, 7].into());
        ip.options_mut().copy_from_slice(opts);
        ip.fill_checksum();
        for (i, x) in b[hl..].iter_mut().enumerate() {
            *x = i as u8;
        }
        b
    }

    fn split(dgram: &[u8], mtu: u16) -> Vec<Vec<u8>> {
        let plan = Plan::new(dgram, mtu).unwrap();
        plan.pieces()
            .map(|piece| {
                let mut buf = vec![0u8; usize::from(mtu)];
                let n = plan.write(dgram, piece, &mut buf);
                buf.truncate(n);
                buf
            })
            .collect()
    }

    #[test]
    fn options_copied_only_where_the_flag_says() {
        // Record route (7, not copied, 7 bytes), NOP, LSRR (131, copied, 7 bytes), END,
        // padded to 16.
        let opts = [
            7, 7, 4, 0, 0, 0, 0, // record route
            1, // NOP
            131, 7, 4, 192, 0, 2, 1, // LSRR
            0, // END
        ];
        let d = datagram(&opts, 1000, 0, false);
        let frags = split(&d, 576);
        assert!(frags.len() >= 2);
        let mut data = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let ip = ipv4::Packet::new_checked(&f[..]).unwrap();
            assert!(ip.verify_checksum());
            assert!(f.len() <= 576);
            assert_eq!(ip.ttl(), 63);
            assert_eq!(ip.ident(), 0x4242);
            assert_eq!(usize::from(ip.frag_offset()), data.len());
            assert_eq!(ip.more_frags(), i + 1 < frags.len());
            assert!(!ip.dont_frag());
            if i == 0 {
                assert_eq!(ip.options(), &opts);
            } else {
                // Only LSRR, END-padded to 8 bytes.
                assert_eq!(ip.options(), &[131, 7, 4, 192, 0, 2, 1, 0]);
            }
            if i + 1 < frags.len() {
                assert_eq!(ip.payload().len() % 8, 0);
            }
            data.extend_from_slice(ip.payload());
        }
        assert_eq!(data, d[20 + opts.len()..]);
    }

    #[test]
    fn refragmenting_keeps_offset_and_mf() {
        for more in [true, false] {
            let d = datagram(&[], 1000, 1480, more);
            let frags = split(&d, 576);
            assert_eq!(frags.len(), 2);
            let a = ipv4::Packet::new_checked(&frags[0][..]).unwrap();
            let b = ipv4::Packet::new_checked(&frags[1][..]).unwrap();
            assert_eq!((a.frag_offset(), a.more_frags()), (1480, true));
            assert_eq!((b.frag_offset(), b.more_frags()), (1480 + 552, more));
        }
    }

    #[test]
    fn offsets_past_the_field_are_refused() {
        let d = datagram(&[], 1000, 65528 - 496, true);
        assert!(Plan::new(&d, 576).is_none());
        let d = datagram(&[], 496, 65528 - 496, true);
        assert!(Plan::new(&d, 576).is_some());
    }

    #[test]
    fn malformed_options_are_not_repeated() {
        // A copied option whose length runs past the options area.
        let opts = [131, 40, 4, 0];
        let d = datagram(&opts, 600, 0, false);
        let frags = split(&d, 576);
        let first = ipv4::Packet::new_checked(&frags[0][..]).unwrap();
        assert_eq!(first.options(), &opts);
        let second = ipv4::Packet::new_checked(&frags[1][..]).unwrap();
        assert_eq!(second.header_len(), 20);
        assert!(second.verify_checksum());
    }
}
