//! Setting up one queue's sockets: the receive socket (TPACKET_V3 ring, fanout member,
//! promiscuous, blind to outgoing frames) and the transmit socket (qdisc bypass, and a tx
//! ring or nothing for `sendmmsg`).
//!
//! The order matters and is the kernel's: the version before the ring, the ring (and its
//! mapping) before `bind`, so no frame is ever received outside the ring; `bind` before
//! `PACKET_FANOUT`, because only a running socket may join a group.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use libc::c_int;

use super::sys::{self, Mmap};
use super::txring::{FRAME, FRAMES_PER_BLOCK};
use super::{FanoutBy, PacketOptions, TxMode};

/// Frame size given to the kernel for the rx ring. TPACKET_V3 packs frames of any size into
/// blocks; this only has to divide the block size (the kernel checks the arithmetic).
const RX_FRAME_HINT: u32 = 2048;

/// A failed call while setting up a socket.
#[derive(Debug)]
pub(super) struct SysError {
    pub(super) call: &'static str,
    pub(super) source: io::Error,
}

fn at(call: &'static str) -> impl FnOnce(io::Error) -> SysError {
    move |source| SysError { call, source }
}

/// The group's mode and flags for `by`: the group ignores outgoing frames. No `DEFRAG`, no
/// `ROLLOVER`: see the module docs.
fn fanout_mode(by: FanoutBy) -> u32 {
    let mode = match by {
        FanoutBy::Hash => libc::PACKET_FANOUT_HASH,
        FanoutBy::Cpu => libc::PACKET_FANOUT_CPU,
    };
    mode | libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING
}

/// How a receive socket takes part in fanout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fanout {
    /// The port's only queue: no group. A group of one would cost a flow hash per frame
    /// (`__skb_get_hash_symmetric`: siphash and the flow dissector, about a tenth of the
    /// receiving CPU at 3 Mpps on veth, measured with `perf`) to pick the one member.
    Alone,
    /// Create a group with a kernel-chosen unique id.
    Create,
    /// Join group `id`.
    Join(u16),
}

/// A receive socket with its mapped ring, in fanout group `fanout`. Returns the group id
/// (`None` for [`Fanout::Alone`]).
pub(super) fn open_rx(
    ifindex: u32,
    opts: &PacketOptions,
    fanout: Fanout,
) -> Result<(OwnedFd, Mmap, Option<u16>), SysError> {
    let fd = sys::packet_socket().map_err(at("socket(AF_PACKET, SOCK_RAW)"))?;
    let s = fd.as_fd();
    sys::set_int(
        s,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        libc::tpacket_versions::TPACKET_V3 as c_int,
    )
    .map_err(at("setsockopt(PACKET_VERSION, TPACKET_V3)"))?;
    let req = libc::tpacket_req3 {
        tp_block_size: opts.block_size,
        tp_block_nr: opts.block_count,
        tp_frame_size: RX_FRAME_HINT,
        tp_frame_nr: opts.block_size / RX_FRAME_HINT * opts.block_count,
        tp_retire_blk_tov: opts.block_timeout_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    sys::setsockopt(s, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
        .map_err(at("setsockopt(PACKET_RX_RING)"))?;
    let len = opts.block_size as usize * opts.block_count as usize;
    let ring = Mmap::new(s, len).map_err(at("mmap(rx ring)"))?;
    // Before bind, so the socket's own hook never sees an outgoing frame. Once it joins the
    // group the group's hook is used instead, which has the same flag (`fanout_mode`).
    sys::set_int(s, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
        .map_err(at("setsockopt(PACKET_IGNORE_OUTGOING)"))?;
    sys::bind(s, ifindex, libc::ETH_P_ALL as u16).map_err(at("bind(ETH_P_ALL)"))?;
    // A socket bound to a down interface is not running; the kernel says so in SO_ERROR.
    if let Some(e) = sys::take_error(s).map_err(at("getsockopt(SO_ERROR)"))? {
        return Err(SysError {
            call: "bind(ETH_P_ALL)",
            source: e,
        });
    }
    let mode = fanout_mode(opts.fanout);
    let arg = match fanout {
        Fanout::Alone => None,
        Fanout::Join(id) => Some(u32::from(id) | mode << 16),
        Fanout::Create => Some((mode | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16),
    };
    if let Some(arg) = arg {
        sys::set_int(s, libc::SOL_PACKET, libc::PACKET_FANOUT, arg as c_int)
            .map_err(at("setsockopt(PACKET_FANOUT)"))?;
    }
    let group = match fanout {
        Fanout::Alone => None,
        Fanout::Join(id) => Some(id),
        Fanout::Create => {
            let mut v: c_int = 0;
            sys::getsockopt(s, libc::SOL_PACKET, libc::PACKET_FANOUT, &mut v)
                .map_err(at("getsockopt(PACKET_FANOUT)"))?;
            Some((v as u32 & 0xffff) as u16)
        }
    };
    // Promiscuous through a membership, not the interface flag: the kernel counts it per
    // socket and drops it when the socket closes, so a crash leaves nothing behind.
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as c_int,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    sys::setsockopt(s, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
        .map_err(at("setsockopt(PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC)"))?;
    Ok((fd, ring, group))
}

/// A transmit socket bound to `ifindex` with protocol 0 (it receives nothing), and its
/// mapped tx ring in [`TxMode::Ring`].
pub(super) fn open_tx(
    ifindex: u32,
    opts: &PacketOptions,
) -> Result<(OwnedFd, Option<Mmap>), SysError> {
    let fd = sys::packet_socket().map_err(at("socket(AF_PACKET, SOCK_RAW)"))?;
    let s = fd.as_fd();
    sys::set_int(s, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)
        .map_err(at("setsockopt(PACKET_QDISC_BYPASS)"))?;
    // Room for `tx_frames` full frames in flight (the kernel doubles the value for its
    // bookkeeping). FORCE lifts the net.core.wmem_max cap and needs CAP_NET_ADMIN; without
    // it, take what the cap allows.
    let sndbuf = (opts.tx_frames as usize * FRAME).min(i32::MAX as usize) as c_int;
    sys::set_int(s, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, sndbuf)
        .or_else(|_| sys::set_int(s, libc::SOL_SOCKET, libc::SO_SNDBUF, sndbuf))
        .map_err(at("setsockopt(SO_SNDBUF)"))?;
    let ring = match opts.tx {
        TxMode::Sendmmsg => None,
        TxMode::Ring => {
            sys::set_int(
                s,
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                libc::tpacket_versions::TPACKET_V3 as c_int,
            )
            .map_err(at("setsockopt(PACKET_VERSION, TPACKET_V3)"))?;
            sys::set_int(s, libc::SOL_PACKET, libc::PACKET_LOSS, 1)
                .map_err(at("setsockopt(PACKET_LOSS)"))?;
            let frames = opts.tx_frames;
            let req = libc::tpacket_req3 {
                tp_block_size: (FRAME * FRAMES_PER_BLOCK) as u32,
                tp_block_nr: frames / FRAMES_PER_BLOCK as u32,
                tp_frame_size: FRAME as u32,
                tp_frame_nr: frames,
                // Must be zero for a tx ring.
                tp_retire_blk_tov: 0,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            sys::setsockopt(s, libc::SOL_PACKET, libc::PACKET_TX_RING, &req)
                .map_err(at("setsockopt(PACKET_TX_RING)"))?;
            Some(Mmap::new(s, frames as usize * FRAME).map_err(at("mmap(tx ring)"))?)
        }
    };
    sys::bind(s, ifindex, 0).map_err(at("bind(protocol 0)"))?;
    Ok((fd, ring))
}
