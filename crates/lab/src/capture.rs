//! Capture: what did this interface in that namespace receive (or send)?
//!
//! Why in the lab: isolation and data-path tests must count *specific* frames — "host b1
//! received none of vr0's pings", "every frame on p0 is ≤ 1514 bytes with a good checksum" —
//! and interface counters cannot tell those from the IPv6 MLD reports every fresh interface
//! sends. A `tcpdump` process would work too, but needs the binary, a settle time before it
//! listens and text parsing; an `AF_PACKET` socket opened inside the namespace is ready the
//! moment [`Capture::open`] returns and hands back the bytes.
//!
//! Not for rates: frames are copied one `recv` at a time into a socket buffer of a few MB,
//! plenty for the hundreds of frames a functional test sends.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::netns::{Netns, NetnsError};

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The bytes from the destination MAC on (no FCS).
    pub data: Vec<u8>,
    /// Whether the interface sent it (rather than received it).
    pub outgoing: bool,
}

impl Frame {
    /// The EtherType (after one 802.1Q tag if present), if the frame is long enough.
    pub fn ethertype(&self) -> Option<u16> {
        let et = u16::from_be_bytes(self.data.get(12..14)?.try_into().ok()?);
        if et == 0x8100 {
            return Some(u16::from_be_bytes(self.data.get(16..18)?.try_into().ok()?));
        }
        Some(et)
    }
}

/// A raw packet socket bound to one interface of one namespace, collecting its frames
/// from the moment it is opened until it is dropped.
#[derive(Debug)]
pub struct Capture {
    fd: OwnedFd,
    what: String,
}

/// The capture could not be set up or read.
#[derive(Debug, thiserror::Error)]
#[error("capture on {what}: {source}")]
pub struct CaptureError {
    /// `ifname@namespace` and the step that failed.
    pub what: String,
    /// Why.
    pub source: io::Error,
}

impl Capture {
    /// Start capturing every frame `ifname` in `ns` receives or sends.
    pub fn open(ns: &Netns, ifname: &str) -> Result<Capture, CaptureError> {
        let what = format!("{ifname}@{}", ns.name());
        let err = |step: &str, source| CaptureError {
            what: format!("{what} ({step})"),
            source,
        };
        let name = std::ffi::CString::new(ifname)
            .map_err(|_| err("name", io::Error::from(io::ErrorKind::InvalidInput)))?;
        let opened = ns.run(|| -> Result<OwnedFd, CaptureError> {
            let proto = (libc::ETH_P_ALL as u16).to_be();
            // SAFETY: plain socket(2); the descriptor is owned right below.
            let fd = unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    i32::from(proto),
                )
            };
            if fd < 0 {
                return Err(err("socket", io::Error::last_os_error()));
            }
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: a valid NUL-terminated name.
            let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
            if index == 0 {
                return Err(err("if_nametoindex", io::Error::last_os_error()));
            }
            let rcvbuf: libc::c_int = 8 << 20;
            // SAFETY: setsockopt with a pointer to a live c_int and its size.
            // (SO_RCVBUFFORCE needs CAP_NET_ADMIN, which labs have; fall back quietly.)
            unsafe {
                if libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    (&raw const rcvbuf).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                ) != 0
                {
                    libc::setsockopt(
                        fd.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_RCVBUF,
                        (&raw const rcvbuf).cast(),
                        size_of::<libc::c_int>() as libc::socklen_t,
                    );
                }
            }
            // SAFETY: sockaddr_ll is plain data; all-zero is a valid start.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = index as i32;
            // SAFETY: bind with a pointer to a live sockaddr_ll and its size.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&raw const sll).cast(),
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(err("bind", io::Error::last_os_error()));
            }
            Ok(fd)
        });
        let fd = match opened {
            Ok(r) => r?,
            Err(NetnsError::Enter { source, .. }) => return Err(err("setns", source)),
            Err(e) => return Err(err("setns", io::Error::other(e.to_string()))),
        };
        let cap = Capture { fd, what };
        // Between socket() and bind() the socket saw every interface; start clean.
        cap.drain()?;
        Ok(cap)
    }

    /// Every frame captured since the last call (or since opening), oldest first.
    pub fn drain(&self) -> Result<Vec<Frame>, CaptureError> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536 + 64];
        loop {
            // SAFETY: sockaddr_ll is plain data; all-zero is a valid start.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: recvfrom into a live buffer of the given length and a live
            // sockaddr_ll whose size is in `len`.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&raw mut sll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(out),
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        return Err(CaptureError {
                            what: self.what.clone(),
                            source: e,
                        });
                    }
                }
            }
            out.push(Frame {
                data: buf[..n as usize].to_vec(),
                outgoing: sll.sll_pkttype == libc::PACKET_OUTGOING,
            });
        }
    }

    /// The frames the interface received (not those it sent) since the last drain.
    pub fn received(&self) -> Result<Vec<Frame>, CaptureError> {
        Ok(self.drain()?.into_iter().filter(|f| !f.outgoing).collect())
    }
}
