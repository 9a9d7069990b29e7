//! Port backends on Linux: the data plane's [`RxQueue`]/[`TxQueue`] over real interfaces.
//!
//! Why a separate crate: `vrhost-dataplane` knows nothing of Linux; everything that talks to
//! the kernel through sockets, rings shared with it and `mmap` lives here, and so does most
//! of the project's `unsafe` (each block says why it is sound).
//!
//! - [`afxdp`]: AF_XDP sockets whose UMEM is the packet pool itself (no copy between socket
//!   and pool), with the steering XDP program loaded and attached by vrhost.
//! - [`afpacket`]: TPACKET_V3 rings on any interface; the fallback when XDP is unavailable.
//! - [`tap`]: a tap device per VIF for the punt/inject path of a VR's control plane.
//! - [`link`]: whether an interface is up (the daemon reattaches a port once it is).
//! - [`offcpu`]: how long a thread was kept off its CPU (run-queue wait, steal): the host's
//!   share of a poll-mode thread's losses.
//! - [`sched`]: `SCHED_FIFO` for workers and testers (why, and what it costs the host).
//! - [`xdptx`]: transmit through a device's XDP transmit path (`ndo_xdp_xmit`), a batch of
//!   frames per `bpf(2)` call and no skb per frame — for AF_XDP copy-mode and AF_PACKET
//!   ports, whose own transmit builds an skb per frame; [`netdev`] says whether a device
//!   takes it; [`txpath`] picks between it and the socket's own transmit per queue.
//! - [`quickpath`]: established IPv4 and IPv6 flows forwarded by the AF_XDP ports' XDP program
//!   itself (`bpf_redirect_map` to the egress device), from decisions the workers offer.
//! - [`bpf`]: the bpf(2) calls (maps, hand-assembled programs, links, test runs) behind
//!   the AF_XDP steering program, also used by vrbench's generator and sink.
//!
//! [`RxQueue`]: vrhost_dataplane::port::RxQueue
//! [`TxQueue`]: vrhost_dataplane::port::TxQueue

pub mod afpacket;
pub mod afxdp;
pub mod bpf;
pub mod ethtool;
pub mod link;
pub mod netdev;
pub mod offcpu;
pub mod quickpath;
pub mod sched;
pub mod tap;
pub mod txpath;
pub mod xdptx;
