//! What a device's XDP can do, as the kernel advertises it: the `xdp-features` of the
//! `netdev` generic-netlink family (Linux ≥ 6.3; what `ip -d link` and `ynl` print).
//!
//! Why: a frame handed to a device's `ndo_xdp_xmit` (an XDP redirect or `XDP_TX`, which is
//! how [`crate::xdptx`] transmits) that the device cannot take is dropped without a counter
//! anywhere — the kernel only fires a tracepoint. The device says beforehand whether it can
//! (`NETDEV_XDP_ACT_NDO_XMIT`), and it changes: a veth advertises it only while its peer has
//! an XDP program or GRO on (the peer must run a NAPI to take the frames). So vrhost asks
//! before it transmits that way, and says why not when it cannot.
//!
//! Two requests on a `NETLINK_GENERIC` socket: the `netdev` family's id from the generic
//! netlink controller (`CTRL_CMD_GETFAMILY`), then `NETDEV_CMD_DEV_GET` for the ifindex. The
//! message layouts are the uapi's (`linux/netlink.h`, `linux/genetlink.h`,
//! `linux/netdev.h`); no netlink crate in the workspace speaks generic netlink.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `NETDEV_XDP_ACT_BASIC`: XDP_PASS, XDP_DROP, XDP_ABORTED.
pub const XDP_ACT_BASIC: u64 = 1 << 0;
/// `NETDEV_XDP_ACT_REDIRECT`: the device's XDP can redirect elsewhere.
pub const XDP_ACT_REDIRECT: u64 = 1 << 1;
/// `NETDEV_XDP_ACT_NDO_XMIT`: the device transmits frames redirected to it.
pub const XDP_ACT_NDO_XMIT: u64 = 1 << 2;

const NETLINK_GENERIC: i32 = 16;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;
const SOL_NETLINK: i32 = 270;
const NETLINK_ADD_MEMBERSHIP: i32 = 1;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The XDP features (`XDP_ACT_*` bits) interface `ifindex` advertises, in the calling
/// thread's network namespace.
pub fn xdp_features(ifindex: u32) -> io::Result<u64> {
    let sock = Genl::open()?;
    let family = sock.netdev_family()?;
    let id = attr(&family, CTRL_ATTR_FAMILY_ID)
        .and_then(|v| v.get(..2))
        .map(|v| u16::from_ne_bytes([v[0], v[1]]))
        .ok_or_else(|| io::Error::other("generic netlink: no id for family netdev"))?;
    let dev = sock.request(
        id,
        NETDEV_CMD_DEV_GET,
        NETDEV_A_DEV_IFINDEX,
        &ifindex.to_ne_bytes(),
    )?;
    attr(&dev, NETDEV_A_DEV_XDP_FEATURES)
        .and_then(|v| v.get(..8))
        .map(|v| u64::from_ne_bytes(v.try_into().expect("8 bytes")))
        .ok_or_else(|| io::Error::other(format!("netdev: no xdp-features for ifindex {ifindex}")))
}

/// Notifications of device changes (the `netdev` family's `mgmt` group: a device added,
/// removed, or its XDP features changed) in the calling thread's namespace, read without
/// blocking. Why: a device that stops taking XDP transmit drops what is sent to it without
/// a counter, so a transmit queue wants to know at once, not at its next periodic check.
#[derive(Debug)]
pub struct Watch(Genl);

impl Watch {
    /// Join the notifications.
    pub fn open() -> io::Result<Watch> {
        let sock = Genl::open()?;
        let family = sock.netdev_family()?;
        let groups = attr(&family, CTRL_ATTR_MCAST_GROUPS)
            .ok_or_else(|| io::Error::other("netdev: no multicast groups"))?;
        let mut id = None;
        let mut at = 0;
        // A list of nested groups, each with a name and an id.
        while at + 4 <= groups.len() {
            let len = usize::from(u16::from_ne_bytes([groups[at], groups[at + 1]]));
            if len < 4 || at + len > groups.len() {
                break;
            }
            let g = &groups[at + 4..at + len];
            if attr(g, CTRL_ATTR_MCAST_GRP_NAME).is_some_and(|n| n.starts_with(b"mgmt\0")) {
                id = attr(g, CTRL_ATTR_MCAST_GRP_ID)
                    .and_then(|v| v.get(..4))
                    .map(|v| u32::from_ne_bytes(v.try_into().expect("4 bytes")));
            }
            at += len.div_ceil(4) * 4;
        }
        let id = id.ok_or_else(|| io::Error::other("netdev: no mgmt multicast group"))?;
        // SAFETY: setsockopt with a u32 option value that lives across the call.
        let rc = unsafe {
            libc::setsockopt(
                sock.0.as_raw_fd(),
                SOL_NETLINK,
                NETLINK_ADD_MEMBERSHIP,
                (&raw const id).cast(),
                4,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Watch(sock))
    }

    /// Whether any notification arrived since the last call (all of them are read). A
    /// lost notification (the socket's buffer overran) counts as one.
    pub fn changed(&self) -> bool {
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            // SAFETY: receiving into `buf`, which is `buf.len()` bytes long.
            let n = unsafe {
                libc::recv(
                    self.0.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                any = true;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return any,
                // ENOBUFS: notifications were lost; something changed.
                _ => return true,
            }
        }
    }
}

/// A generic-netlink socket.
#[derive(Debug)]
struct Genl(OwnedFd);

impl Genl {
    fn open() -> io::Result<Genl> {
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_GENERIC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor socket(2) just returned, owned by nobody else.
        Ok(Genl(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The generic netlink controller's answer about the `netdev` family (its attributes:
    /// id, multicast groups, …).
    fn netdev_family(&self) -> io::Result<Vec<u8>> {
        self.request(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            CTRL_ATTR_FAMILY_NAME,
            b"netdev\0",
        )
    }

    /// Send one request (`cmd` to family `ty` with one attribute) and return the reply's
    /// attributes (after the generic-netlink header).
    fn request(&self, ty: u16, cmd: u8, attr_type: u16, value: &[u8]) -> io::Result<Vec<u8>> {
        let alen = 4 + value.len();
        let len = 16 + 4 + alen.div_ceil(4) * 4;
        let mut msg = vec![0u8; len];
        msg[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        msg[4..6].copy_from_slice(&ty.to_ne_bytes());
        msg[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        msg[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence
        msg[16] = cmd;
        msg[17] = 1; // version
        msg[20..22].copy_from_slice(&(alen as u16).to_ne_bytes());
        msg[22..24].copy_from_slice(&attr_type.to_ne_bytes());
        msg[24..24 + value.len()].copy_from_slice(value);
        // SAFETY: sending `msg`'s bytes on our socket to the kernel (a zeroed sockaddr_nl).
        let sent = unsafe {
            let mut to: libc::sockaddr_nl = core::mem::zeroed();
            to.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.0.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&raw const to).cast(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; 16384];
        // SAFETY: receiving into `buf`, which is `buf.len()` bytes long.
        let n = unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        if buf.len() < 20 {
            return Err(io::Error::other("generic netlink: short reply"));
        }
        let rlen = (u32::from_ne_bytes(buf[0..4].try_into().expect("4")) as usize).min(buf.len());
        let rty = u16::from_ne_bytes([buf[4], buf[5]]);
        if rty == NLMSG_ERROR {
            let errno = i32::from_ne_bytes(buf[16..20].try_into().expect("4"));
            return Err(io::Error::from_raw_os_error(-errno));
        }
        Ok(buf[20..rlen].to_vec())
    }
}

/// The value of the first attribute of type `ty` in `attrs`.
fn attr(attrs: &[u8], ty: u16) -> Option<&[u8]> {
    let mut at = 0;
    while at + 4 <= attrs.len() {
        let len = usize::from(u16::from_ne_bytes([attrs[at], attrs[at + 1]]));
        let t = u16::from_ne_bytes([attrs[at + 2], attrs[at + 3]]) & NLA_TYPE_MASK;
        if len < 4 || at + len > attrs.len() {
            return None;
        }
        if t == ty {
            return Some(&attrs[at + 4..at + len]);
        }
        at += len.div_ceil(4) * 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_walked_with_padding() {
        // (len 6, type 2, "ab" + 2 pad), (len 8, type 1 | NLA_F_NESTED, 4 bytes)
        let a = [6, 0, 2, 0, b'a', b'b', 0, 0, 8, 0, 1, 0x80, 1, 2, 3, 4];
        assert_eq!(attr(&a, 2), Some(&b"ab"[..]));
        assert_eq!(attr(&a, 1), Some(&[1, 2, 3, 4][..]));
        assert_eq!(attr(&a, 3), None);
        // A length past the end is not read.
        assert_eq!(attr(&[9, 0, 1, 0, 0], 1), None);
    }

    /// The loopback device of a fresh namespace answers (it has no driver XDP, so it
    /// advertises no transmit); an unknown index is an error, not a zero.
    #[test]
    fn the_kernel_answers_for_loopback_and_refuses_a_missing_device() {
        if !vrhost_lab::require_root("netdev xdp-features") {
            return;
        }
        let ns = vrhost_lab::Netns::new("xf").unwrap();
        let (lo, missing) = ns.run(|| (xdp_features(1), xdp_features(999_999))).unwrap();
        let lo = lo.unwrap();
        assert_eq!(lo & XDP_ACT_NDO_XMIT, 0, "{lo:#x}");
        assert!(missing.is_err());
    }
}
