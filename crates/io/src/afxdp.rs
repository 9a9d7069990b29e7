//! AF_XDP ports: one socket per queue, the packet pool as UMEM, and vrhost's own XDP program.
//!
//! [`XdpPort::open`] sets up one interface:
//!
//! 1. an XSKMAP and the steering program (`bpf_redirect_map(&xsks, rx_queue_index,
//!    XDP_PASS)`), assembled in Rust and loaded with bpf(2), so no clang, libbpf or object
//!    file is needed on the machine; if the verifier refuses it, its log is in the error;
//! 2. the program attached through a BPF link (`BPF_LINK_CREATE`), in native (driver)
//!    mode if the driver has it, else generic (skb) mode. The link belongs to its file
//!    descriptor: when vrhost exits or is killed, the kernel detaches the program, and no
//!    stale program blocks the interface;
//! 3. per queue, an AF_XDP socket bound to the pool's UMEM: the pool's slots *are* the
//!    UMEM's chunks (chunk size `SLOT_SIZE`), so the kernel writes frames into pool slots,
//!    the data plane works on them in place, and any port's tx ring sends them from the
//!    same address — no copy in vrhost, end to end. Zero-copy binding is tried first and
//!    falls back to copy mode (the only mode of veth and most virtual devices);
//! 4. each socket entered in the XSKMAP at its queue's index once its fill ring is full.
//!
//! The queues then go to the workers ([`XdpPort::take_queues`]): one ([`XskRx`],
//! [`XskTx`]) pair per queue, implementing the data plane's `RxQueue`/`TxQueue`. Since
//! every worker needs a tx queue on every port, open each port with as many queues as
//! there are workers and give worker `i` queue `i` of each port.
//!
//! # One UMEM per pool
//!
//! All ports opened on one pool share one UMEM registration: the first socket registers
//! the pool's region, the others bind with `XDP_SHARED_UMEM`, each with its own fill and
//! completion rings (Linux ≥ 5.10). The kernel fixes the mode at that first bind: every
//! later socket of the pool inherits zero-copy or copy and need-wakeup. A port that asks
//! for another mode, or whose device cannot do the UMEM's, fails to open; give it a pool of
//! its own. [`XdpPort::umem_id`] tells which ports share a registration.
//!
//! # Threads, namespaces, slots
//!
//! `open` must run on a thread in the interface's network namespace (the interface name,
//! the link's target and the bind are resolved there); the sockets work from any thread
//! afterwards. Slots lent to the kernel (fill ring, frames being sent) are tracked per
//! ring pair and come back to the pool when the port and its queues are dropped, so
//! [`Pool::available`] returns to where it was. Sizing: besides what the data plane holds,
//! the pool lends `fill_size` slots per socket, and up to `ring_size` more per socket while
//! transmitting. With `need_wakeup` (the default) the kernel is woken by a syscall only
//! when a ring's flag asks for it; in copy mode that is every transmit burst, because the
//! kernel transmits inside `sendto`.
//!
//! # What veth does (Linux 6.18)
//!
//! Native mode attaches (veth runs XDP in its NAPI poll); zero-copy binds fail with
//! `EOPNOTSUPP`, so sockets run in copy mode; a received frame starts 256 bytes
//! (`XDP_PACKET_HEADROOM`) into its chunk, so `Meta::off` is 256. In generic mode every
//! frame reports rx queue 0, so on a multi-queue veth only queue 0's socket receives. A
//! queue closed a moment ago stays registered until a kernel workqueue item runs; binding
//! it again retries `EBUSY` for a short while.
//!
//! # Preferred busy polling
//!
//! With [`XdpOptions::busy_poll`] each socket gets `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`
//! and `SO_BUSY_POLL_BUDGET`, and its receive half makes one non-blocking `recvfrom` per
//! `rx_burst`: the kernel then runs the queue's NAPI poll (the driver's receive, the XDP
//! program, the copy into the UMEM) right there, in the worker's thread on the worker's
//! core, before the rx ring is read. Where the NAPI poll ran before — on veth, in softirq
//! on the CPU that sent into the interface; on a NIC, where its interrupt went — is left
//! free. For the kernel to leave the NAPI to the busy poller between two polls, set on
//! the interface `napi_defer_hard_irqs` (e.g. 2) and `gro_flush_timeout` (e.g. 200000 ns)
//! in `/sys/class/net/IF/`: then a NAPI the application stopped polling is picked up by
//! a timer, not rescheduled at once. Without them busy polling still works, but the
//! kernel may run some of the NAPI's polls in softirq as before.
//!
//! **Zero-copy sockets only.** Busy polling needs the socket's NAPI id, and since Linux
//! 6.13 (commit "xsk: Bring back busy polling support") `xsk_bind` records it only for
//! zero-copy binds on drivers that register their queues' NAPIs
//! (`netif_queue_set_napi`). A copy-mode socket — every socket on veth — has none, so its
//! `recvfrom` returns without polling anything: measured on 6.18 with veth, `p0`'s NAPI
//! kept running in softirq on the sending CPU (`veth_poll` 30 % of the generator's
//! samples, `xsk_recvmsg` 0.01 % of the worker's). So on a copy-mode port the option sets
//! the socket options but skips the per-burst `recvfrom`, and [`XdpPort::busy_polling`]
//! says it is not in effect.
//!
//! Zero-copy caveat: in zero-copy mode a driver owns the fill ring's buffers until the
//! kernel's deferred teardown after `close` (a workqueue item user space cannot wait
//! for); their slots are returned to the pool right after `close`, as every AF_XDP
//! application frees its UMEM then. Copy mode has no such window.

pub(crate) mod bpf;
mod lent;
mod queue;
mod ring;
mod socket;
mod umem;

use std::ffi::CString;
use std::io;
use std::sync::Arc;

use vrhost_dataplane::Pool;

pub use queue::{XskRx, XskTx};

use crate::bpf::{Link, Program};
use bpf::XskMap;
use socket::Xsk;
use umem::Umem;

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachMode {
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// In the core stack, on skbs; works on any device (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

impl core::fmt::Display for AttachMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        })
    }
}

/// How the sockets are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindMode {
    /// The driver DMAs into UMEM chunks (`XDP_ZEROCOPY`).
    ZeroCopy,
    /// The kernel copies between its buffers and UMEM chunks (`XDP_COPY`).
    Copy,
}

impl core::fmt::Display for BindMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        })
    }
}

/// Options for [`XdpPort::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpOptions {
    /// Attach mode; `None` tries native, then generic.
    pub mode: Option<AttachMode>,
    /// `Some(true)`: zero-copy or fail; `Some(false)`: copy; `None`: zero-copy if the
    /// driver can, else copy. Ports sharing a pool share its UMEM's mode (see the module
    /// docs).
    pub zero_copy: Option<bool>,
    /// Entries in each rx, tx and completion ring (a power of two). Default 8192.
    pub ring_size: u32,
    /// Entries in each fill ring (a power of two), and so the slots each socket lends to
    /// the kernel for receiving. Default 8192.
    ///
    /// Why that many: the rings are all a worker has while it is off its core. A worker
    /// that shares its core with another busy task (on the 2-queue lab, a generator) is
    /// off for a few milliseconds at a time, and at 1.5 Mpps the kernel received more than
    /// 2,048 frames meanwhile: the fill ring ran dry and most frames were dropped as
    /// `rx_fill_ring_empty_descs` (`vrbench fwd --layouts 2q --profiles vrhost-afxdp`:
    /// 0.58–0.63 of the kernel with 2,048, 0.73 with 8,192; `docs/perf.md`). The price is
    /// pool slots: each socket lends up to this many, and more while its rx ring is full.
    pub fill_size: u32,
    /// Bind with `XDP_USE_NEED_WAKEUP`, so the kernel is woken only when it asks. Default
    /// true. Ports sharing a pool share the first one's setting.
    pub need_wakeup: bool,
    /// Preferred busy polling (see the module docs): the worker that polls a queue runs
    /// the interface's receive NAPI for it, on its own core, instead of the kernel running
    /// it in softirq wherever the interrupt (or, on veth, the sender) was. `Some(budget)`:
    /// on, with up to `budget` frames per NAPI poll (1..=65535). Default `None`.
    pub busy_poll: Option<u16>,
}

impl Default for XdpOptions {
    fn default() -> Self {
        XdpOptions {
            mode: None,
            zero_copy: None,
            ring_size: 8192,
            fill_size: 8192,
            need_wakeup: true,
            busy_poll: None,
        }
    }
}

/// The kernel's AF_XDP counters (`XDP_STATISTICS`), summed over a port's sockets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames dropped for reasons other than the two below (too long, no fill buffer…).
    pub rx_dropped: u64,
    /// Invalid descriptors on the rx side.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the tx ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the tx ring empty when woken.
    pub tx_ring_empty_descs: u64,
}

impl XdpStats {
    fn add(&mut self, o: &XdpStats) {
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid_descs += o.rx_invalid_descs;
        self.tx_invalid_descs += o.tx_invalid_descs;
        self.rx_ring_full += o.rx_ring_full;
        self.rx_fill_ring_empty_descs += o.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += o.tx_ring_empty_descs;
    }
}

/// Why an AF_XDP port could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum XdpError {
    /// No interface of that name in the calling thread's network namespace.
    #[error("interface {ifname:?} does not exist (in this network namespace)")]
    NoInterface {
        /// The name asked for.
        ifname: String,
    },
    /// An option is out of range.
    #[error("interface {ifname:?}: {field} = {value}: {reason}")]
    BadOption {
        /// The interface.
        ifname: String,
        /// The option.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// More queues than the interface has.
    #[error("interface {ifname:?}: {queues} queues requested, but it has {available}")]
    TooManyQueues {
        /// The interface.
        ifname: String,
        /// Queues asked for.
        queues: u32,
        /// Queues it has (from `ETHTOOL_GCHANNELS`).
        available: u32,
    },
    /// A bpf(2) command failed.
    #[error("interface {ifname:?}: bpf({cmd}) failed: {source}")]
    Bpf {
        /// The interface.
        ifname: String,
        /// The command.
        cmd: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
    /// The verifier refused the steering program.
    #[error(
        "interface {ifname:?}: bpf(BPF_PROG_LOAD) refused the XDP program: {source}\n\
         verifier log:\n{log}"
    )]
    Verifier {
        /// The interface.
        ifname: String,
        /// The kernel's answer.
        source: io::Error,
        /// The verifier's log.
        log: String,
    },
    /// No attach mode worked.
    #[error(
        "interface {ifname:?}: bpf(BPF_LINK_CREATE) could not attach the XDP program: {}",
        attempts(.tried)
    )]
    Attach {
        /// The interface.
        ifname: String,
        /// Each mode tried, with the kernel's answer.
        tried: Vec<(AttachMode, io::Error)>,
    },
    /// A socket call for one queue failed.
    #[error("interface {ifname:?} queue {queue}: {call} failed: {source}")]
    Socket {
        /// The interface.
        ifname: String,
        /// The queue.
        queue: u32,
        /// The call (`bind(XDP_COPY)`, `setsockopt(XDP_UMEM_REG)`, …).
        call: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
    /// The modes asked for cannot be had.
    #[error("interface {ifname:?}: {reason}")]
    Mode {
        /// The interface.
        ifname: String,
        /// Why.
        reason: String,
    },
}

fn attempts(tried: &[(AttachMode, io::Error)]) -> String {
    tried
        .iter()
        .map(|(m, e)| format!("{m} mode: {e}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One interface served through AF_XDP: the attached program, the map, and the sockets.
///
/// Dropping it detaches the program (closing the link) and, for queues not taken, closes
/// the sockets and returns their slots to the pool. Queues already taken keep their
/// sockets until they drop themselves; they can still transmit, but receive nothing once
/// the program is gone.
pub struct XdpPort {
    // Field order is drop order: detach first, then close the sockets.
    _link: Link,
    queues: Vec<(XskRx, XskTx)>,
    sockets: Vec<Arc<Xsk>>,
    _prog: Program,
    _map: Arc<XskMap>,
    ifname: String,
    ifindex: u32,
    mode: (AttachMode, BindMode),
    need_wakeup: bool,
    busy_polling: bool,
    umem_id: u64,
    pool: Arc<Pool>,
}

impl core::fmt::Debug for XdpPort {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XdpPort")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("queues", &self.sockets.len())
            .field("attach", &self.mode.0)
            .field("bind", &self.mode.1)
            .field("need_wakeup", &self.need_wakeup)
            .field("umem", &self.umem_id)
            .finish_non_exhaustive()
    }
}

impl XdpPort {
    /// Serve `queues` queues (0 to `queues - 1`) of interface `ifname` with AF_XDP
    /// sockets over `pool`. Run it on a thread inside the interface's network namespace.
    pub fn open(
        ifname: &str,
        queues: u32,
        pool: &Arc<Pool>,
        opts: &XdpOptions,
    ) -> Result<XdpPort, XdpError> {
        XdpPort::open_with(ifname, queues, pool, opts, None)
    }

    /// [`XdpPort::open`], with the quickpath program (`crate::quickpath`) in front of the
    /// sockets when `quickpath` is given.
    pub fn open_with(
        ifname: &str,
        queues: u32,
        pool: &Arc<Pool>,
        opts: &XdpOptions,
        quickpath: Option<&Arc<crate::quickpath::Quickpath>>,
    ) -> Result<XdpPort, XdpError> {
        let bad = |field, value: u64, reason| XdpError::BadOption {
            ifname: ifname.to_string(),
            field,
            value,
            reason,
        };
        if queues == 0 {
            return Err(bad("queues", 0, "at least one queue is needed"));
        }
        for (field, v) in [("ring_size", opts.ring_size), ("fill_size", opts.fill_size)] {
            if !v.is_power_of_two() || !(8..=1 << 20).contains(&v) {
                return Err(bad(
                    field,
                    v.into(),
                    "must be a power of two in 8..=1048576",
                ));
            }
        }
        let ifindex = ifindex(ifname)?;
        // A socket binds to a queue for both directions: the larger count bounds it (the bind
        // reports a bad queue itself when the driver does not say).
        if let Some(available) = crate::ethtool::channels(ifname).map(|c| c.rx.max(c.tx))
            && queues > available
        {
            return Err(XdpError::TooManyQueues {
                ifname: ifname.to_string(),
                queues,
                available,
            });
        }

        let bpf_err = |cmd| {
            move |source| XdpError::Bpf {
                ifname: ifname.to_string(),
                cmd,
                source,
            }
        };
        let map = Arc::new(XskMap::create(queues).map_err(bpf_err("BPF_MAP_CREATE"))?);
        let prog = match quickpath {
            Some(qp) => bpf::load_quickpath(&map, qp),
            None => bpf::load(&map),
        }
        .map_err(|e| XdpError::Verifier {
            ifname: ifname.to_string(),
            source: e.source,
            log: e.log,
        })?;
        let order: &[AttachMode] = match opts.mode {
            None => &[AttachMode::Native, AttachMode::Generic],
            Some(AttachMode::Native) => &[AttachMode::Native],
            Some(AttachMode::Generic) => &[AttachMode::Generic],
        };
        let mut tried = Vec::new();
        let mut attached = None;
        for &m in order {
            match bpf::attach(&prog, ifindex, m) {
                Ok(l) => {
                    attached = Some((l, m));
                    break;
                }
                Err(e) => tried.push((m, e)),
            }
        }
        let Some((link, attach)) = attached else {
            return Err(XdpError::Attach {
                ifname: ifname.to_string(),
                tried,
            });
        };
        // Zero-copy needs the program in the driver.
        let zero_copy = match (attach, opts.zero_copy) {
            (AttachMode::Generic, Some(true)) => {
                return Err(XdpError::Mode {
                    ifname: ifname.to_string(),
                    reason: "zero-copy needs the XDP program in native mode, but it is \
                             attached in generic mode"
                        .into(),
                });
            }
            (AttachMode::Generic, _) => Some(false),
            (AttachMode::Native, z) => z,
        };
        if opts.busy_poll == Some(0) {
            return Err(bad("busy_poll", 0, "the budget must be at least 1"));
        }
        let cfg = socket::Config {
            ring_size: opts.ring_size,
            fill_size: opts.fill_size,
            zero_copy,
            need_wakeup: opts.need_wakeup,
            busy_poll: opts.busy_poll,
        };

        let umem = Umem::for_pool(pool);
        let mut sockets = Vec::new();
        let mut halves = Vec::new();
        let mut bind = BindMode::Copy;
        for q in 0..queues {
            let (xsk, rx, tx, mode) = socket::open(ifname, ifindex, q, &umem, &map, &cfg)?;
            bind = mode;
            sockets.push(xsk);
            halves.push((rx, tx));
        }
        let (need_wakeup, umem_id) = {
            let st = umem.lock();
            (st.mode.map_or(opts.need_wakeup, |(_, nw)| nw), st.id)
        };
        Ok(XdpPort {
            _link: link,
            queues: halves,
            sockets,
            _prog: prog,
            _map: map,
            ifname: ifname.to_string(),
            ifindex,
            mode: (attach, bind),
            need_wakeup,
            busy_polling: opts.busy_poll.is_some() && bind == BindMode::ZeroCopy,
            umem_id,
            pool: pool.clone(),
        })
    }

    /// Take the queues: one (rx, tx) pair per queue, in queue order. Both halves of a pair
    /// are driven by the worker that owns that queue (they may also go to two threads:
    /// they share nothing but the socket). A second call returns nothing.
    pub fn take_queues(&mut self) -> Vec<(XskRx, XskTx)> {
        core::mem::take(&mut self.queues)
    }

    /// The kernel's counters summed over the port's sockets (a socket whose counters
    /// cannot be read is skipped).
    pub fn stats(&self) -> XdpStats {
        let mut sum = XdpStats::default();
        for s in &self.sockets {
            if let Ok(st) = s.statistics() {
                sum.add(&st);
            }
        }
        sum
    }

    /// How the program is attached and the sockets bound.
    pub fn mode(&self) -> (AttachMode, BindMode) {
        self.mode
    }

    /// Whether the workers busy-poll the queues' NAPIs: [`XdpOptions::busy_poll`] was
    /// asked for and the sockets are zero-copy (see the module docs).
    pub fn busy_polling(&self) -> bool {
        self.busy_polling
    }

    /// Whether the sockets use `XDP_USE_NEED_WAKEUP`.
    pub fn need_wakeup(&self) -> bool {
        self.need_wakeup
    }

    /// The UMEM registration the port's sockets are bound to (a process-wide number).
    /// Ports opened on one pool while another port of that pool is open share one
    /// registration, hence one number; after the last of them closes, the next port
    /// registers the region again, under a new number.
    pub fn umem_id(&self) -> u64 {
        self.umem_id
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index (in its namespace).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Number of queues (sockets).
    pub fn queues(&self) -> u32 {
        self.sockets.len() as u32
    }

    /// The pool the port's UMEM is.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
}

/// The index of `ifname` in the calling thread's namespace.
fn ifindex(ifname: &str) -> Result<u32, XdpError> {
    let missing = || XdpError::NoInterface {
        ifname: ifname.to_string(),
    };
    let c = CString::new(ifname).map_err(|_| missing())?;
    // SAFETY: a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 { Err(missing()) } else { Ok(idx) }
}
