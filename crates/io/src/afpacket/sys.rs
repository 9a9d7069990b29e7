//! Thin wrappers over the system calls the backend makes: packet sockets, their options, and
//! the shared mappings of their rings.
//!
//! Each wrapper returns the `io::Error` of the call and nothing else; the caller knows which
//! interface and queue it was working on and names them in a [`super::PacketError`].
//! Everything here runs when a port is opened or its counters are read, never per packet —
//! except [`kick`] and [`sendmmsg`], which run once per transmitted burst.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use libc::{c_int, c_void, socklen_t};

/// A packet socket that receives nothing yet: protocol 0 registers no receive hook, so no
/// frame can reach it before its ring is set up and it is bound on purpose.
pub(super) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &val, sizeof val)`.
pub(super) fn setsockopt<T>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to `size_of::<T>()` initialised bytes that outlive the call; the
    // kernel only reads them.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast::<c_void>(),
            size_of::<T>() as socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `getsockopt(fd, level, name, out, sizeof *out)`; returns the length the kernel wrote.
///
/// `T` must be a plain C struct or integer (every bit pattern valid): the kernel overwrites
/// up to `size_of::<T>()` bytes of it.
pub(super) fn getsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    out: &mut T,
) -> io::Result<usize> {
    let mut len = size_of::<T>() as socklen_t;
    // SAFETY: `out` is valid for writes of `len` bytes and the kernel writes at most `len`;
    // callers only pass integer or `libc` C structs, for which any bytes are a valid value.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (out as *mut T).cast::<c_void>(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}

/// An `int` socket option.
pub(super) fn set_int(fd: BorrowedFd<'_>, level: c_int, name: c_int, v: c_int) -> io::Result<()> {
    setsockopt(fd, level, name, &v)
}

/// Bind to interface `ifindex`, receiving frames of EtherType `protocol` (host order;
/// `ETH_P_ALL` for every frame, 0 for none: a transmit-only socket).
pub(super) fn bind(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    let sll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex as c_int,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `sll` is a complete sockaddr_ll living across the call; the length matches.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_ll>() as socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The pending socket error (`SO_ERROR`, cleared by reading it), if any.
pub(super) fn take_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let mut e: c_int = 0;
    getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut e)?;
    Ok((e != 0).then(|| io::Error::from_raw_os_error(e)))
}

/// Index of interface `name` in the calling thread's network namespace; `None` if there is
/// no such interface (or the name could not be one).
pub(super) fn ifindex(name: &str) -> Option<u32> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return None;
    }
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// The system's page size.
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// Ask the kernel to send whatever the socket's tx ring holds (`send(fd, NULL, 0,
/// MSG_DONTWAIT)`: it walks the ring from its own head and returns without waiting for the
/// frames to leave). `Err` carries the errno.
#[inline]
pub(super) fn kick(fd: BorrowedFd<'_>) -> Result<(), i32> {
    // SAFETY: a zero-length send with a null buffer; the kernel reads nothing from it.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            core::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            core::ptr::null(),
            0,
        )
    };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

/// `sendmmsg(fd, msgs, n, MSG_DONTWAIT)`: messages sent, or the errno if none was.
///
/// # Safety
///
/// `msgs` must point to `n` initialised `mmsghdr`s whose iovecs point to memory valid for
/// reads of their lengths for the duration of the call.
#[inline]
pub(super) unsafe fn sendmmsg(
    fd: BorrowedFd<'_>,
    msgs: *mut libc::mmsghdr,
    n: usize,
) -> Result<usize, i32> {
    // SAFETY: the caller guarantees the messages and their buffers are valid.
    let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs, n as u32, libc::MSG_DONTWAIT) };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc as usize)
    }
}

#[inline]
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A shared mapping of a socket's ring, unmapped on drop.
///
/// The mapping is memory the kernel writes too; this type only owns it. Whoever reads or
/// writes through [`Mmap::ptr`] follows the ring's protocol (status words) to avoid racing
/// the kernel.
#[derive(Debug)]
pub(super) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone (no other Rust value points into it), so
// moving it to another thread moves all access with it; the kernel's side is synchronised
// through the ring's status words by the owner.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Map `len` bytes of `fd`'s rings, read-write and shared with the kernel, prefaulted.
    pub(super) fn new(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint); it aliases no Rust value.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Mmap { ptr, len })
    }

    /// Start of the mapping.
    #[inline(always)]
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: the region was mapped by `new` with this length and is unmapped once; no
        // reference into it outlives `self` (users borrow it only within a call).
        unsafe { libc::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len) };
    }
}
