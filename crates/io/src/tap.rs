//! Tap devices: the punt/inject path between a VR's data plane and its control plane.
//!
//! Each VIF of a VR gets a tap of the same name in the VR's namespace (DESIGN.md, "Virtual
//! router model"): frames the data plane punts (ARP, ND, packets to the router's own
//! addresses) are written to the tap, so that namespace's kernel answers them; frames the
//! kernel sends on the tap are read back and injected to the VIF's port.
//!
//! Why plain `read`/`write` and not rings: the punt path carries control traffic, which the
//! data plane already polices per VR (a few thousand packets per second at most), so one
//! system call per frame costs nothing that matters, and a tap has no ring interface anyway.
//! The device is opened non-blocking with `IFF_NO_PI` (frames without a packet-info prefix);
//! it is not persistent, so it disappears when the descriptor closes — a crashed daemon
//! leaves no stale tap behind.
//!
//! A tap is created in the network namespace of the calling thread (see
//! `vrhost_lab::Netns::run`); the descriptor stays bound to it wherever it is used.
//! [`Tap`] also implements [`RxQueue`] and [`TxQueue`], so a tap can stand in for a port.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;

use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{HEADROOM, MAX_FRAME, Pkt, PktVec, Pool};

/// A tap operation that failed; names the device.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// The name is empty, too long for an interface name (15 bytes) or contains a NUL.
    #[error("tap name {0:?} is not a valid interface name")]
    BadName(String),
    /// `/dev/net/tun` could not be opened.
    #[error("cannot open /dev/net/tun for tap {name:?}: {source}")]
    Open {
        /// The tap.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// `TUNSETIFF` failed (a non-tap device of that name exists, or no permission).
    #[error("cannot create tap {name:?} (TUNSETIFF): {source}")]
    Create {
        /// The tap.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// Reading or writing a frame failed for a reason other than "try again".
    #[error("tap {name:?}: {op}: {source}")]
    Io {
        /// The tap.
        name: String,
        /// `read` or `write`.
        op: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// Counters of one tap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames read from the kernel.
    pub rx: u64,
    /// Frames written to the kernel.
    pub tx: u64,
    /// Frames read but dropped: longer than a pool slot, or the pool was empty.
    pub rx_dropped: u64,
    /// Frames that could not be written (the device was down or its queue full).
    pub tx_dropped: u64,
}

/// A tap device (Ethernet frames, no packet-info prefix), non-blocking.
#[derive(Debug)]
pub struct Tap {
    file: File,
    name: String,
    stats: TapStats,
    /// Unique in this process (see [`Readiness`]).
    id: u64,
}

static NEXT_TAP_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

// From <linux/if_tun.h>.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl Tap {
    /// Create (or attach to a non-persistent) tap named `name` in the calling thread's
    /// network namespace. The device starts down; bring it up and give it its MAC and MTU
    /// with netlink or `ip`.
    pub fn create(name: &str) -> Result<Tap, TapError> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
            return Err(TapError::BadName(name.into()));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|source| TapError::Open {
                name: name.into(),
                source,
            })?;
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: IFF_TAP | IFF_NO_PI,
            _pad: [0; 22],
        };
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `IfReq` lays out
        // (name, then the flags union member, padded to the kernel's 40 bytes); the fd is
        // open.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req) };
        if rc < 0 {
            return Err(TapError::Create {
                name: name.into(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: the kernel NUL-terminates the name it writes back within IFNAMSIZ.
        let actual = unsafe { CStr::from_ptr(req.name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(Tap {
            file,
            name: actual,
            stats: TapStats::default(),
            id: NEXT_TAP_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Counters so far.
    pub fn stats(&self) -> TapStats {
        self.stats
    }

    /// Read one frame into a fresh pool slot (at [`HEADROOM`]). `Ok(None)` when nothing is
    /// waiting, or when the frame had to be dropped (counted in [`TapStats::rx_dropped`]).
    pub fn recv(&mut self, pool: &Pool) -> Result<Option<Pkt>, TapError> {
        let Some(mut p) = pool.alloc() else {
            // Drain one frame so a full pool does not leave the tap's queue growing.
            let mut sink = [0u8; 64];
            return match self.file.read(&mut sink) {
                Ok(_) => {
                    self.stats.rx_dropped += 1;
                    Ok(None)
                }
                Err(e) => self.read_error(e).map(|()| None),
            };
        };
        let (meta, slot) = pool.slot_mut(&mut p);
        // Read one byte more than fits, to tell an oversize frame from a full-size one.
        let mut big = [0u8; 1];
        let room = &mut slot[HEADROOM..];
        let n = {
            let mut bufs = [
                std::io::IoSliceMut::new(&mut room[..MAX_FRAME]),
                std::io::IoSliceMut::new(&mut big),
            ];
            self.file.read_vectored(&mut bufs)
        };
        match n {
            Ok(n) if n > 0 && n <= MAX_FRAME => {
                meta.off = HEADROOM as u16;
                meta.len = n as u16;
                self.stats.rx += 1;
                Ok(Some(p))
            }
            Ok(_) => {
                pool.free(p);
                self.stats.rx_dropped += 1;
                Ok(None)
            }
            Err(e) => {
                pool.free(p);
                self.read_error(e).map(|()| None)
            }
        }
    }

    fn read_error(&self, e: std::io::Error) -> Result<(), TapError> {
        if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted {
            return Ok(());
        }
        Err(TapError::Io {
            name: self.name.clone(),
            op: "read",
            source: e,
        })
    }

    /// Write the frame to the kernel and free its slot. A frame the kernel does not take
    /// (device down, queue full) is dropped and counted, not an error: the punt path must
    /// never stall the data plane.
    pub fn send(&mut self, pool: &Pool, p: Pkt) -> Result<(), TapError> {
        let r = self.file.write(pool.frame(&p));
        pool.free(p);
        match r {
            Ok(_) => {
                self.stats.tx += 1;
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::Interrupted | ErrorKind::NetworkDown
                ) || e.raw_os_error() == Some(libc::EIO) =>
            {
                // EIO: the device is not up yet.
                self.stats.tx_dropped += 1;
                Ok(())
            }
            Err(source) => {
                self.stats.tx_dropped += 1;
                Err(TapError::Io {
                    name: self.name.clone(),
                    op: "write",
                    source,
                })
            }
        }
    }
}

/// Which taps have something to read, from one `epoll` set that watches them all.
///
/// Why: the control plane moves frames between every VR's taps and the data plane about
/// once a millisecond; reading each tap to find it empty cost a system call per tap per
/// round — with 64 VRs of two VIFs, 128,000 `readv` calls a second, 9 % of a core (`perf`
/// of a daemon whose traffic all went by the quickpath); one `poll(2)` over all of them
/// still cost 3 % (`tun_chr_poll` per tap). An epoll set costs one call that reports only
/// the ready ones.
///
/// Taps join the set the first time they are passed to [`Readiness::ready`]; a closed tap
/// leaves it by itself (its descriptor's last reference is gone).
#[derive(Debug)]
pub struct Readiness {
    ep: std::os::fd::OwnedFd,
    /// Ids of the taps in the set.
    known: std::collections::HashSet<u64>,
}

impl Readiness {
    /// An empty set.
    pub fn new() -> std::io::Result<Readiness> {
        // SAFETY: epoll_create1 takes flags only; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Readiness {
            // SAFETY: a new descriptor that nothing else owns.
            ep: unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) },
            known: std::collections::HashSet::new(),
        })
    }

    /// The descriptors of `taps` that have a frame (or an error) to read now; taps not yet
    /// watched are added first. Does not wait.
    pub fn ready<'a>(
        &mut self,
        taps: impl IntoIterator<Item = &'a Tap>,
    ) -> std::io::Result<std::collections::HashSet<std::os::fd::RawFd>> {
        let mut seen = std::collections::HashSet::with_capacity(self.known.len());
        for t in taps {
            seen.insert(t.id);
            if self.known.contains(&t.id) {
                continue;
            }
            let fd = t.file.as_raw_fd();
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: `ev` is a live epoll_event; `fd` is open (the tap holds it) and the
            // epoll descriptor is ours.
            let mut rc =
                unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
            if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
                // The number of a tap closed while a forked child still held it.
                // SAFETY: as above.
                rc = unsafe {
                    libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, &mut ev)
                };
            }
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        self.known = seen;
        // Room for every tap in one call: the set is level-triggered, so calling again for
        // more would report the same ready taps again (in rotation), never an end.
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; self.known.len().max(1)];
        // SAFETY: `evs` has room for `evs.len()` events; timeout 0 does not block.
        let n =
            unsafe { libc::epoll_wait(self.ep.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(evs[..n as usize]
            .iter()
            .map(|e| e.u64 as std::os::fd::RawFd)
            .collect())
    }
}

impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl RxQueue for Tap {
    fn rx_burst(&mut self, pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        let mut n = 0;
        while n < max && !out.is_full() {
            let dropped = self.stats.rx_dropped;
            match self.recv(pool) {
                Ok(Some(p)) => {
                    out.push(p);
                    n += 1;
                }
                // A counted drop: more frames may be waiting behind it.
                Ok(None) if self.stats.rx_dropped > dropped => {}
                // Nothing waiting, or the device is gone (the control plane sees that).
                _ => break,
            }
        }
        n
    }
}

impl TxQueue for Tap {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        let n = pkts.len();
        for p in pkts.drain(..) {
            // Failures are counted in the tap's stats; the frame is consumed either way.
            let _ = self.send(pool, p);
        }
        n
    }
}
