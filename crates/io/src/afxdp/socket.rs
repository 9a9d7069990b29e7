//! One AF_XDP socket: created, given its four rings, bound to one (interface, queue).
//!
//! The socket is shared (`Arc<Xsk>`) by the receive half, the transmit half and the port
//! (for statistics), because the halves may live on different threads and the kernel
//! object must stay until the last of them is done. Closing it is what makes the kernel let
//! go of the slots it still holds (fill ring, frames in flight): so the slots each half
//! leaves behind are parked here ([`Xsk::orphan`]) and returned to the pool only after the
//! descriptor is closed, in `Drop`.
//!
//! A socket puts itself in its port's XSKMAP once bound and takes itself out before it
//! closes. The kernel does the latter too on release, but a descriptor copied into a child
//! that another thread forked (and that has not reached `exec` yet) would keep the socket
//! alive and steered to for a moment after our `close`, while its slots go back to the pool.
//!
//! Binding follows the UMEM rules in [`super::umem`]: the first socket of a pool registers
//! the region and chooses the mode — zero-copy if asked or if it works, else copy (veth and
//! most virtual devices answer `EOPNOTSUPP` to zero-copy) — and the others share it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vrhost_dataplane::Pool;

use super::bpf::XskMap;
use super::queue::{XskRx, XskTx};
use super::ring::{Consumer, Desc, Producer};
use super::umem::Umem;
use super::{BindMode, XdpError, XdpStats};

/// `XDP_MAX_TX_SKB_BUDGET` (include/uapi/linux/if_xdp.h, Linux 6.17+): how many frames one
/// `sendto` may transmit in copy mode (32 by default).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// How to set up one socket.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) ring_size: u32,
    pub(crate) fill_size: u32,
    /// `Some(true)`: zero-copy or fail; `Some(false)`: copy; `None`: try zero-copy first.
    pub(crate) zero_copy: Option<bool>,
    pub(crate) need_wakeup: bool,
    /// Preferred busy polling with this NAPI budget.
    pub(crate) busy_poll: Option<u16>,
}

/// An AF_XDP socket bound to one queue of one interface.
#[derive(Debug)]
pub(crate) struct Xsk {
    /// `None` only while dropping.
    fd: Option<OwnedFd>,
    raw: RawFd,
    umem: Arc<Umem>,
    map: Arc<XskMap>,
    ifname: String,
    queue: u32,
    /// Slots the halves left lent to the kernel; returned to the pool after the close.
    orphans: Mutex<Vec<u32>>,
}

impl Xsk {
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.raw
    }

    pub(crate) fn pool(&self) -> &Arc<Pool> {
        self.umem.pool()
    }

    pub(crate) fn queue(&self) -> u32 {
        self.queue
    }

    pub(crate) fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Park slots still lent to the kernel, to be freed once the socket is closed.
    pub(crate) fn orphan(&self, mut slots: Vec<u32>) {
        if !slots.is_empty() {
            self.orphans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .append(&mut slots);
        }
    }

    /// Ask the kernel to process the tx ring (`sendto` with `MSG_DONTWAIT`, as the AF_XDP
    /// documentation prescribes when the ring says it needs a wakeup).
    pub(crate) fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length send on our socket; no buffer is read.
        let rc = unsafe {
            libc::sendto(
                self.raw,
                core::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                core::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Ask the kernel to take buffers from the fill ring (`recvfrom` with `MSG_DONTWAIT`).
    pub(crate) fn kick_rx(&self) {
        // SAFETY: a zero-length receive on our socket; no buffer is written.
        unsafe {
            libc::recvfrom(
                self.raw,
                core::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
            )
        };
    }

    /// The kernel's counters for this socket (`XDP_STATISTICS`).
    pub(crate) fn statistics(&self) -> io::Result<XdpStats> {
        // SAFETY: plain integers; all-zero is valid.
        let mut s: libc::xdp_statistics = unsafe { core::mem::zeroed() };
        getsockopt(self.as_fd(), libc::XDP_STATISTICS, &mut s)?;
        Ok(XdpStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }
}

impl AsFd for Xsk {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `raw` is the descriptor `fd` owns, open until `drop`.
        unsafe { BorrowedFd::borrow_raw(self.raw) }
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // Unsteer, then close: once `close` returns the socket is unbound, and (after the
        // kernel's synchronize_net) no receive path writes into its buffers any more.
        let _ = self.map.delete(self.queue);
        drop(self.fd.take());
        let orphans = core::mem::take(self.orphans.get_mut().unwrap_or_else(|e| e.into_inner()));
        let pool = self.umem.pool();
        for idx in orphans {
            // SAFETY: every orphan was lent by one of our halves (its `Lent` bit was set
            // and is cleared now), never given back, and the kernel is done with it since
            // the socket is closed.
            pool.free(unsafe { pool.from_raw(idx) });
        }
    }
}

fn setsockopt<T>(fd: BorrowedFd<'_>, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `SO_PREFER_BUSY_POLL` (include/uapi/asm-generic/socket.h, Linux 5.11+).
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
/// `SO_BUSY_POLL_BUDGET` (Linux 5.11+).
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;
/// Microseconds one blocking busy poll may spin (`SO_BUSY_POLL`). vrhost's polls do not
/// block, so any value above 0 only switches busy polling on for the socket.
const BUSY_POLL_USECS: libc::c_int = 20;

/// Switch preferred busy polling on for a socket, with `budget` frames per NAPI poll.
fn busy_poll(fd: BorrowedFd<'_>, budget: u16) -> Result<(), (&'static str, io::Error)> {
    let set = |opt, v: libc::c_int, call| {
        // SAFETY: `v` is a live c_int of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err((call, io::Error::last_os_error()))
        } else {
            Ok(())
        }
    };
    set(
        libc::SO_BUSY_POLL,
        BUSY_POLL_USECS,
        "setsockopt(SO_BUSY_POLL)",
    )?;
    set(SO_PREFER_BUSY_POLL, 1, "setsockopt(SO_PREFER_BUSY_POLL)")?;
    set(
        SO_BUSY_POLL_BUDGET,
        libc::c_int::from(budget),
        "setsockopt(SO_BUSY_POLL_BUDGET)",
    )
}

fn getsockopt<T>(fd: BorrowedFd<'_>, opt: libc::c_int, v: &mut T) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` points to a writable `T`; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            v as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// How long a bind keeps retrying a queue that answers `EBUSY`.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// Bind, retrying while the queue is busy. A queue stays registered to a closed socket
/// until the kernel's deferred teardown (`xp_release_deferred`, a workqueue item) runs, so
/// reopening a port right after closing it meets `EBUSY` for a few milliseconds; a queue
/// held by a live socket stays busy, and the error comes after `BUSY_WAIT`.
fn bind(
    fd: BorrowedFd<'_>,
    flags: u16,
    ifindex: u32,
    queue: u32,
    shared: Option<RawFd>,
) -> io::Result<()> {
    let start = Instant::now();
    loop {
        match bind_once(fd, flags, ifindex, queue, shared) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < BUSY_WAIT => {
                std::thread::sleep(Duration::from_millis(2));
            }
            r => return r,
        }
    }
}

fn bind_once(
    fd: BorrowedFd<'_>,
    flags: u16,
    ifindex: u32,
    queue: u32,
    shared: Option<RawFd>,
) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: shared.map_or(0, |f| f as u32),
    };
    // SAFETY: a valid sockaddr_xdp of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Create and bind the socket for `queue` of `ifname`, map its rings, enter it in `map`,
/// and split it into its two halves. Returns the socket (for statistics), the halves, and
/// the bind mode.
pub(crate) fn open(
    ifname: &str,
    ifindex: u32,
    queue: u32,
    umem: &Arc<Umem>,
    map: &Arc<XskMap>,
    cfg: &Config,
) -> Result<(Arc<Xsk>, XskRx, XskTx, BindMode), XdpError> {
    let err = |call: &'static str| {
        move |source: io::Error| XdpError::Socket {
            ifname: ifname.to_string(),
            queue,
            call,
            source,
        }
    };
    // SAFETY: socket(2) with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(err("socket(AF_XDP)")(io::Error::last_os_error()));
    }
    // SAFETY: a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let b = fd.as_fd();
    setsockopt(b, libc::XDP_RX_RING, &cfg.ring_size).map_err(err("setsockopt(XDP_RX_RING)"))?;
    setsockopt(b, libc::XDP_TX_RING, &cfg.ring_size).map_err(err("setsockopt(XDP_TX_RING)"))?;

    let mut state = umem.lock();
    let member = state.member();
    let first = member.is_none();
    let need_wakeup;
    if let Some(member) = member {
        // Join the pool's registration; the mode is the UMEM's.
        let (mode, nw) = state.mode.expect("a bound member implies a decided mode");
        if let Some(zc) = cfg.zero_copy
            && zc != (mode == BindMode::ZeroCopy)
        {
            return Err(XdpError::Mode {
                ifname: ifname.to_string(),
                reason: format!(
                    "{} bind requested, but the pool's UMEM is bound in {mode} mode (decided \
                     by {:?}, the first interface opened on this pool); use a separate pool",
                    if zc { "zero-copy" } else { "copy" },
                    state.decided_by
                ),
            });
        }
        rings(b, cfg).map_err(|(call, e)| err(call)(e))?;
        bind(
            b,
            libc::XDP_SHARED_UMEM,
            ifindex,
            queue,
            Some(member.raw_fd()),
        )
        .map_err(err("bind(XDP_SHARED_UMEM)"))?;
        need_wakeup = nw;
    } else {
        setsockopt(b, libc::XDP_UMEM_REG, &umem.reg()).map_err(err("setsockopt(XDP_UMEM_REG)"))?;
        rings(b, cfg).map_err(|(call, e)| err(call)(e))?;
        let nw = if cfg.need_wakeup {
            libc::XDP_USE_NEED_WAKEUP
        } else {
            0
        };
        let zc = || bind(b, libc::XDP_ZEROCOPY | nw, ifindex, queue, None);
        let copy = || bind(b, libc::XDP_COPY | nw, ifindex, queue, None);
        match cfg.zero_copy {
            Some(true) => zc().map_err(err("bind(XDP_ZEROCOPY)"))?,
            Some(false) => copy().map_err(err("bind(XDP_COPY)"))?,
            // Zero-copy when the driver has it; any refusal falls back to copy, and if copy
            // fails too its error is the one that matters.
            None => zc().or_else(|_| copy()).map_err(err("bind(XDP_COPY)"))?,
        }
        need_wakeup = cfg.need_wakeup;
    }
    // What the kernel actually did (a shared bind inherits; trust nothing else).
    let mut opts = libc::xdp_options { flags: 0 };
    getsockopt(b, libc::XDP_OPTIONS, &mut opts).map_err(err("getsockopt(XDP_OPTIONS)"))?;
    let mode = if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
        BindMode::ZeroCopy
    } else {
        BindMode::Copy
    };
    if first {
        state.mode = Some((mode, need_wakeup));
        state.decided_by = ifname.to_string();
        state.id = super::umem::next_id();
    }
    if mode == BindMode::Copy && cfg.ring_size >= 32 {
        // Let one sendto move the whole ring instead of 32 frames. Kernels before 6.17 do
        // not know the option; the transmit path then kicks again while frames remain.
        let _ = setsockopt(b, XDP_MAX_TX_SKB_BUDGET, &cfg.ring_size);
    }

    if let Some(budget) = cfg.busy_poll {
        busy_poll(b, budget).map_err(|(call, e)| err(call)(e))?;
    }

    // SAFETY: plain integers; all-zero is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { core::mem::zeroed() };
    getsockopt(b, libc::XDP_MMAP_OFFSETS, &mut off).map_err(err("getsockopt(XDP_MMAP_OFFSETS)"))?;
    let rx = Consumer::<Desc>::map(b, libc::XDP_PGOFF_RX_RING as u64, &off.rx, cfg.ring_size)
        .map_err(err("mmap(rx ring)"))?;
    let tx = Producer::<Desc>::map(b, libc::XDP_PGOFF_TX_RING as u64, &off.tx, cfg.ring_size)
        .map_err(err("mmap(tx ring)"))?;
    let fill = Producer::<u64>::map(b, libc::XDP_UMEM_PGOFF_FILL_RING, &off.fr, cfg.fill_size)
        .map_err(err("mmap(fill ring)"))?;
    let comp = Consumer::<u64>::map(
        b,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        &off.cr,
        cfg.ring_size,
    )
    .map_err(err("mmap(completion ring)"))?;

    let xsk = Arc::new(Xsk {
        raw: fd.as_raw_fd(),
        fd: Some(fd),
        umem: umem.clone(),
        map: map.clone(),
        ifname: ifname.to_string(),
        queue,
        orphans: Mutex::new(Vec::new()),
    });
    state.join(&xsk);
    drop(state);
    // Copy-mode sockets have no NAPI id to busy-poll (see the `afxdp` module docs).
    let busy = cfg.busy_poll.is_some() && mode == BindMode::ZeroCopy;
    let mut rxh = XskRx::new(xsk.clone(), rx, fill, need_wakeup, busy);
    rxh.refill();
    let txh = XskTx::new(
        xsk.clone(),
        tx,
        comp,
        need_wakeup,
        mode == BindMode::ZeroCopy,
    );
    // Steer the queue here only now, with the fill ring full.
    map.set(queue, xsk.raw_fd())
        .map_err(err("bpf(BPF_MAP_UPDATE_ELEM) into the XSKMAP"))?;
    Ok((xsk, rxh, txh, mode))
}

/// Create the socket's own fill and completion rings (every socket of ours needs them: it
/// is the only one on its device and queue).
fn rings(b: BorrowedFd<'_>, cfg: &Config) -> Result<(), (&'static str, io::Error)> {
    setsockopt(b, libc::XDP_UMEM_FILL_RING, &cfg.fill_size)
        .map_err(|e| ("setsockopt(XDP_UMEM_FILL_RING)", e))?;
    setsockopt(b, libc::XDP_UMEM_COMPLETION_RING, &cfg.ring_size)
        .map_err(|e| ("setsockopt(XDP_UMEM_COMPLETION_RING)", e))
}
