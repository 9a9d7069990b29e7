//! AF_PACKET ports: TPACKET_V3 receive rings and a tx ring (or `sendmmsg`) on any interface.
//!
//! This is the fallback backend: it works on every interface the kernel has (veth, bonds,
//! NICs whose drivers lack XDP), at the cost of one copy per frame each way and the
//! kernel's full receive path in front of it. [`super::afxdp`] is the fast path.
//!
//! # Shape
//!
//! A [`PacketPort`] is one interface with `queues` queues. Each queue is two sockets:
//!
//! - **receive** ([`PacketRx`]): a TPACKET_V3 block ring, mapped once, walked without system
//!   calls (the walk is described in `afpacket/rx.rs`). All receive sockets of a port join one
//!   `PACKET_FANOUT` group (by flow hash or by receiving CPU, [`FanoutBy`]) whose id the
//!   kernel picks
//!   (`PACKET_FANOUT_FLAG_UNIQUEID`), so ids never collide between ports or processes. A
//!   port with one queue joins no group: a group of one would cost the kernel a flow hash
//!   per frame to choose its only member (about a tenth of the receiving CPU on veth).
//! - **transmit** ([`PacketTx`]): its own socket, bound with protocol 0 so it never
//!   receives, with `PACKET_QDISC_BYPASS`. One system call per burst in both [`TxMode`]s.
//!
//! Both halves of a queue are meant for the worker that owns the queue (the daemon runs one
//! worker per queue and gives it every port's queue of the same index).
//!
//! # Choices, and the alternatives not taken
//!
//! - **Copy on receive.** Frames are copied from the ring into pool slots rather than lent:
//!   a block goes back to the kernel only whole and in order, and packets wait in VR rings
//!   for unbounded times, so lending would let one packet freeze the ring.
//! - **Fanout by receiving CPU where the device spreads receive, else by flow hash.** With
//!   `PACKET_FANOUT_CPU` the frames the kernel received on CPU *c* go to socket *c* mod
//!   *queues*: on a device with a receive queue per worker (RSS, or a multi-queue veth whose
//!   senders are spread) the worker on that CPU takes them, and a frame stays on the core
//!   that received it — DESIGN.md's "keep a packet on one core". Measured on the 2-queue veth
//!   lab with one VR (`vrbench fwd --layouts 2q`, `docs/perf.md`): by hash, every frame
//!   went to one socket (`perf`: one worker at a quarter of the CPU, the other idle) and
//!   AF_PACKET ÷ kernel was 0.36; by CPU both workers forward it. A flow stays in order because
//!   the kernel receives a flow on one CPU (RSS and RPS keep it there). Where the device has
//!   fewer queues than the port, all its frames arrive on the CPUs of those few queues, so
//!   the port hashes instead: the symmetric flow hash (addresses and ports) spreads the
//!   flows over every worker, and a flow stays on one queue and in order.
//!   `PACKET_FANOUT_QM` (by the receive queue the device recorded) would say it best, but
//!   veth does not record one: every frame went to one socket.
//! - **No `PACKET_FANOUT_FLAG_DEFRAG`.**
//!   `DEFRAG` would make the kernel *reassemble* IPv4 fragments before fanout and hand us the
//!   whole datagram, larger than the MTU — a router must forward fragments as they came. It
//!   is not needed to keep a datagram's fragments together either: the flow dissector does
//!   not read ports of fragments, so all fragments of a datagram hash alike (onto a queue
//!   that may differ from the unfragmented packets of the same 5-tuple; reordering between
//!   the two is allowed). No `ROLLOVER` either: spilling a busy queue's flows to another
//!   queue reorders them; a full ring drops and counts instead.
//! - **Outgoing frames ignored** (`PACKET_IGNORE_OUTGOING`): a port must not receive what
//!   this host transmits on the interface — its own frames or the kernel's. The socket
//!   option alone is not enough: once a socket joins a fanout group, frames reach it
//!   through the *group's* hook, so the group is created with
//!   `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` too. (Our own transmissions also never reach the
//!   taps, because `PACKET_QDISC_BYPASS` skips them; the flag matters for everything else
//!   sent on the interface.)
//! - **Promiscuous** through `PACKET_ADD_MEMBERSHIP`/`PACKET_MR_PROMISC`, because VIFs have
//!   MACs of their own (the macvlan model). The kernel counts the membership per socket and
//!   removes it when the socket closes, unlike `ip link set … promisc on`.
//! - **No `PACKET_VNET_HDR`.** It would bring the checksum offsets, but it also lets the
//!   kernel deliver GSO super-frames, which a router port must not see.
//!
//! # Latency: the block timeout
//!
//! The kernel hands a receive block to user space when it is full or when
//! [`PacketOptions::block_timeout_ms`] has passed with at least one frame in it. Under load
//! blocks fill in microseconds; a lone frame (a ping, a TCP handshake) waits for the
//! timeout. The default is the minimum, 1 ms. Measured here (kernel 6.18, `HZ=250`): a lone
//! frame takes 0.12–0.95 ms (median 0.92 ms) from the peer's `send` to `rx_burst`, and a
//! ping between two hosts through a VR on two AF_PACKET ports 0.7–1.7 ms round trip (each
//! direction waits for one port's block). So this kernel's retire timer honours 1 ms;
//! kernels whose timer counts in ticks round it up to one (4 ms at `HZ=250`). Polling costs
//! nothing while no block is ready, so a short timeout has no price but more, smaller blocks
//! under light load. Latency-critical deployments should prefer AF_XDP.
//!
//! # Transmit: ring or `sendmmsg`
//!
//! [`TxMode::Ring`] copies each frame into a TPACKET_V3 tx ring slot and kicks the kernel
//! with one `send` per burst; the kernel builds `sk_buff`s whose payload points into the
//! ring. [`TxMode::Sendmmsg`] gives the kernel one `sendmmsg` per burst whose iovecs point
//! into the pool slots; the kernel copies each frame into a fresh `sk_buff`. Measured on this
//! machine (2-core KVM guest shared with other work, kernel 6.18): one thread pinned to one
//! core sends 60-byte frames (64 with FCS) in bursts of 256 on a veth whose peer drops them,
//! 9 alternating rounds of 3 s:
//!
//! | mode       | delivered, median of wall-clock rates | per CPU-second of the sender, median |
//! |------------|---------------------------------------|--------------------------------------|
//! | `Ring`     | 1.76 M frames/s (1.46–1.84)           | 1.83 M (1.74–1.88)                   |
//! | `Sendmmsg` | 1.67 M frames/s (1.34–1.95)           | 1.89 M (1.79–1.95)                   |
//!
//! Wall-clock rates swing with the other load on the machine; frames per CPU-second of the
//! sending thread (which also runs the veth's delivery in its softirqs) do not, and there
//! `sendmmsg` was ahead in 8 of 9 paired rounds, by about 3%. `perf` shows why the ring
//! gains nothing here: a veth forwarding a ring `sk_buff` to its peer must first copy the
//! ring pages out (`skb_copy_ubufs`, plus a page allocation), so the ring's zero-copy is
//! paid back with interest; with 64-byte frames the copy `sendmmsg` makes is trivial. So the
//! default is [`TxMode::Sendmmsg`], which also needs no ring memory and never leaves frames
//! waiting in a ring. On a NIC driver the ring may win: re-measure there with
//! `cargo test --release -p vrhost-io --test afpacket_bench -- --ignored --nocapture`.
//!
//! Both modes send once per poll, at the data plane's
//! [`TxQueue::flush`](vrhost_dataplane::port::TxQueue::flush), not per `tx_burst`: with
//! many VRs a poll runs many small vectors. In ring mode what the ring cannot take stays
//! in the caller's vector (counted as tx-full by the data plane); in `sendmmsg` mode
//! frames the kernel refuses at the flush (send buffer or driver queue full) are counted
//! in [`PacketStats::tx_full`]. In ring mode a slot stays busy until the driver frees its
//! `sk_buff`; when a kick fails because the driver queue is full, the kernel keeps the
//! frame it could not send requested in the ring
//! and sends it at the next burst's kick (it waits until then).
//!
//! # Offloads: what a router port must not be handed, and what is fixed here
//!
//! A port must see frames as they are on the wire. The kernel's receive path does several
//! things to frames before packet sockets see them:
//!
//! - **VLAN tags** are always taken out of the frame into metadata (`skb_vlan_untag`, or
//!   the NIC's rx-vlan offload). The receive path puts the outer tag back
//!   ([`PacketRx`]), so VLAN VIFs work on any interface.
//! - **Partial checksums** (`TP_STATUS_CSUMNOTREADY`): frames sent by a local socket through
//!   a veth keep `CHECKSUM_PARTIAL` — their TCP/UDP checksum is still to be filled in. The
//!   receive path completes it ([`PacketOptions::complete_checksums`], counted in
//!   [`PacketStats::csum_completed`]); a real NIC never delivers such frames.
//! - **Super-frames**: TSO/GSO on a veth peer (the default) and GRO/LRO on the port itself
//!   hand packet sockets TCP "frames" of up to 64 KB. Those cannot be forwarded as they
//!   are; they are dropped and counted in [`PacketStats::oversize`] (never a panic). Turn
//!   the aggregation off where it happens: on the port, `ethtool -K PORT gro off lro off`;
//!   on a veth peer in a lab, `ethtool -K PEER tso off gso off`. A lab also wants
//!   `ethtool -K PEER rx off` on the hosts, or their veths trust any checksum
//!   (`CHECKSUM_UNNECESSARY`) and a checksum bug goes unnoticed.
//!
//! What the forwarding test (`tests/afpacket.rs`, hosts — VR — hosts over veths, iperf3)
//! found on kernel 6.18: with the hosts' veths at their defaults, most of the TCP data
//! arrived as super-frames (counted as `oversize`) and the transfer crawled at 0.3 Mbit/s;
//! with TSO/GSO off but checksums not completed, the hosts (with `rx off`) dropped every
//! TCP segment and not even the handshake got through; with TSO/GSO off and checksums
//! completed here, 4.2–4.5 Gbit/s through one worker, all of it `CHECKSUM_PARTIAL` frames
//! completed by the receive path.
//!
//! # Use
//!
//! ```no_run
//! use vrhost_dataplane::Pool;
//! use vrhost_io::afpacket::{PacketOptions, PacketPort};
//!
//! let pool = Pool::new(8192);
//! // In the namespace that holds `eth1`; two queues, so two workers.
//! let mut port = PacketPort::open("eth1", 2, &pool, &PacketOptions::default())?;
//! for (q, (rx, tx)) in port.take_queues().into_iter().enumerate() {
//!     // Worker `q` polls `rx` and transmits on `tx`, e.g.
//!     // `dp.worker(q, vec![(port_id, Box::new(rx))], vec![Box::new(tx), …])`.
//!     let _ = (q, rx, tx);
//! }
//! println!("{:?}", port.stats());
//! # Ok::<(), vrhost_io::afpacket::PacketError>(())
//! ```
//!
//! # Unsafe
//!
//! The rings are memory shared with the kernel, read and written through raw pointers; each
//! `unsafe` block says why its access stays inside the mapping and does not race the
//! kernel (status words are accessed atomically, with acquire/release pairing with the
//! kernel's barriers). The system calls are wrapped in `afpacket/sys.rs`.
//!
//! Sockets are created in the network namespace of the calling thread (see
//! `vrhost_lab::Netns::run`) and stay bound to it wherever they are used.

mod csum;
mod error;
mod mmsg;
mod rx;
mod socket;
mod stats;
mod sys;
mod tx;
mod txring;

use std::os::fd::AsFd;
use std::sync::{Arc, Weak};

use vrhost_dataplane::Pool;

pub use error::PacketError;
pub use rx::PacketRx;
pub use stats::PacketStats;
pub use tx::PacketTx;

use rx::RxSocket;
use stats::QueueCounters;
use txring::{FRAMES_PER_BLOCK, TxRing};

/// How a [`PacketTx`] hands frames to the kernel. Both make one system call per burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxMode {
    /// A TPACKET_V3 tx ring: frames are copied into ring slots, then one `send` kicks the
    /// kernel.
    Ring,
    /// One `sendmmsg` per burst, iovecs pointing into the pool slots; the kernel copies.
    /// The default (measured slightly faster on veth; see the module docs).
    #[default]
    Sendmmsg,
}

/// How to open a [`PacketPort`]. `PacketOptions::default()` suits a router port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOptions {
    /// How to transmit.
    pub tx: TxMode,
    /// Bytes per receive block: a power of two, at least a page. Default 256 KiB.
    pub block_size: u32,
    /// Receive blocks per queue, at least 2. Default 32 (8 MiB of ring per queue).
    pub block_count: u32,
    /// Milliseconds after which the kernel hands over a block that is not full
    /// (`tp_retire_blk_tov`): the worst-case wait of a frame under light load. Default 1, the
    /// minimum; 0 lets the kernel derive it from link speed and block size (8 ms when the
    /// speed is unknown or below 1 Gb/s).
    pub block_timeout_ms: u32,
    /// Slots in the tx ring ([`TxMode::Ring`]), an even number ≥ 2; in both modes the send
    /// buffer is sized for this many full-size frames in flight. Default 1024.
    pub tx_frames: u32,
    /// Complete TCP/UDP checksums left partial by the sender (`TP_STATUS_CSUMNOTREADY`).
    /// Default true.
    pub complete_checksums: bool,
    /// How a port with several queues spreads received frames over their sockets.
    /// Default [`FanoutBy::Hash`]; [`FanoutBy::for_device`] picks by the device.
    pub fanout: FanoutBy,
}

/// How a port's receive sockets share its frames (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanoutBy {
    /// By the kernel's symmetric flow hash (`PACKET_FANOUT_HASH`).
    #[default]
    Hash,
    /// By the CPU that received the frame (`PACKET_FANOUT_CPU`): socket *cpu* mod *queues*.
    Cpu,
}

impl FanoutBy {
    /// [`FanoutBy::Cpu`] when `ifname` has at least `queues` receive queues (it spreads its
    /// receive over that many CPUs), else [`FanoutBy::Hash`] (also when the driver does not
    /// say).
    pub fn for_device(ifname: &str, queues: usize) -> FanoutBy {
        match crate::ethtool::channels(ifname) {
            Some(c) if c.rx as usize >= queues => FanoutBy::Cpu,
            _ => FanoutBy::Hash,
        }
    }
}

impl Default for PacketOptions {
    fn default() -> Self {
        PacketOptions {
            tx: TxMode::default(),
            block_size: 256 << 10,
            block_count: 32,
            block_timeout_ms: 1,
            tx_frames: 1024,
            complete_checksums: true,
            fanout: FanoutBy::default(),
        }
    }
}

impl PacketOptions {
    fn check(&self, ifname: &str) -> Result<(), PacketError> {
        let bad = |option, value: u32, reason| PacketError::BadOption {
            ifname: ifname.into(),
            option,
            value: u64::from(value),
            reason,
        };
        let page = sys::page_size();
        if !self.block_size.is_power_of_two() || (self.block_size as usize) < page {
            return Err(bad(
                "block_size",
                self.block_size,
                "must be a power of two, at least a page",
            ));
        }
        if self.block_count < 2 {
            return Err(bad("block_count", self.block_count, "must be at least 2"));
        }
        if u64::from(self.block_size) * u64::from(self.block_count) > 1 << 30 {
            return Err(bad(
                "block_count",
                self.block_count,
                "block_size × block_count must be at most 1 GiB",
            ));
        }
        if self.tx_frames < 2
            || !self.tx_frames.is_multiple_of(FRAMES_PER_BLOCK as u32)
            || self.tx_frames > 1 << 20
        {
            return Err(bad(
                "tx_frames",
                self.tx_frames,
                "must be even, between 2 and 2^20",
            ));
        }
        Ok(())
    }
}

/// One interface opened for AF_PACKET I/O: `queues` receive/transmit queue pairs.
///
/// Dropping the port and its queues closes every socket and unmaps every ring (a queue
/// that was taken lives on until it is dropped itself).
#[derive(Debug)]
pub struct PacketPort {
    ifname: String,
    ifindex: u32,
    fanout_group: Option<u16>,
    fanout: FanoutBy,
    queues: Vec<(PacketRx, PacketTx)>,
    rx_sockets: Vec<Weak<RxSocket>>,
    counters: Vec<Arc<QueueCounters>>,
}

impl PacketPort {
    /// Open `queues` queues on interface `ifname` of the calling thread's network
    /// namespace. The interface must exist and be up.
    ///
    /// `pool` is the pool the queues will be polled with. Receiving copies frames into
    /// whichever pool `rx_burst` is given; transmitting collects packets of `pool` until
    /// the flush (see [`PacketTx`]) and sends packets of any other pool at once.
    pub fn open(
        ifname: &str,
        queues: u32,
        pool: &Arc<Pool>,
        opts: &PacketOptions,
    ) -> Result<PacketPort, PacketError> {
        let Some(ifindex) = sys::ifindex(ifname) else {
            return Err(PacketError::NoInterface {
                ifname: ifname.into(),
            });
        };
        if queues == 0 {
            return Err(PacketError::NoQueues {
                ifname: ifname.into(),
            });
        }
        opts.check(ifname)?;
        let sys_err = |queue, e: socket::SysError| {
            if e.source.raw_os_error() == Some(libc::ENETDOWN) {
                PacketError::Down {
                    ifname: ifname.into(),
                }
            } else {
                PacketError::Sys {
                    ifname: ifname.into(),
                    queue,
                    call: e.call,
                    source: e.source,
                }
            }
        };
        let mut fanout = if queues == 1 {
            socket::Fanout::Alone
        } else {
            socket::Fanout::Create
        };
        let mut port = PacketPort {
            ifname: ifname.into(),
            ifindex,
            fanout_group: None,
            fanout: opts.fanout,
            queues: Vec::with_capacity(queues as usize),
            rx_sockets: Vec::with_capacity(queues as usize),
            counters: Vec::with_capacity(queues as usize),
        };
        for q in 0..queues {
            let (rx_fd, ring, g) =
                socket::open_rx(ifindex, opts, fanout).map_err(|e| sys_err(q, e))?;
            if let Some(g) = g {
                fanout = socket::Fanout::Join(g);
                port.fanout_group = Some(g);
            }
            let (tx_fd, tx_ring) = socket::open_tx(ifindex, opts).map_err(|e| sys_err(q, e))?;
            let counters = Arc::new(QueueCounters::default());
            let sock = Arc::new(RxSocket { fd: rx_fd });
            let rx = PacketRx::new(
                ring,
                opts.block_size as usize,
                opts.block_count as usize,
                opts.complete_checksums,
                q,
                sock.clone(),
                counters.clone(),
            );
            let tx = match tx_ring {
                Some(m) => PacketTx::ring(
                    tx_fd,
                    TxRing::new(m, opts.tx_frames as usize),
                    q,
                    counters.clone(),
                    pool.clone(),
                ),
                None => PacketTx::mmsg(tx_fd, q, counters.clone(), pool.clone()),
            };
            port.rx_sockets.push(Arc::downgrade(&sock));
            port.counters.push(counters);
            port.queues.push((rx, tx));
        }
        Ok(port)
    }

    /// The queues, one `(rx, tx)` pair per queue in queue order; both halves are driven by
    /// the worker that owns that queue. Taken once: later calls return an empty vector.
    pub fn take_queues(&mut self) -> Vec<(PacketRx, PacketTx)> {
        std::mem::take(&mut self.queues)
    }

    /// Counters summed over all queues: the kernel's `PACKET_STATISTICS` of the receive
    /// sockets (read now; the kernel clears them on read, the port keeps the totals) and
    /// the backend's own drops and repairs.
    pub fn stats(&self) -> PacketStats {
        let mut s = PacketStats::default();
        for (c, w) in self.counters.iter().zip(&self.rx_sockets) {
            if let Some(sock) = w.upgrade() {
                // A failure leaves the totals as they were; nothing to report per read.
                let _ = c.absorb(sock.fd.as_fd());
            }
            s += c.snapshot();
        }
        s
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index (in the namespace it was opened in).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Number of queues the port was opened with.
    pub fn queues(&self) -> u32 {
        self.counters.len() as u32
    }

    /// The id of the port's fanout group (chosen by the kernel, unique in the namespace);
    /// `None` for a port with one queue, which needs no group.
    pub fn fanout_group(&self) -> Option<u16> {
        self.fanout_group
    }

    /// How the port's receive sockets share its frames (`None` with one queue: no group).
    pub fn fanout(&self) -> Option<FanoutBy> {
        self.fanout_group.map(|_| self.fanout)
    }
}
