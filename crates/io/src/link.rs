//! A link's administrative state, and the `ifreq` that interface ioctls take.
//!
//! Why: the daemon reattaches a port whose interface vanished and came back, but only once
//! the new interface is up; opening sockets on it while whoever recreates it is still
//! configuring it would race with them. One `SIOCGIFFLAGS` on a datagram socket in the
//! caller's network namespace answers.

/// An `ifreq` naming `ifname`, everything else zero; `None` if the name is too long.
pub(crate) fn ifreq(ifname: &str) -> Option<libc::ifreq> {
    // SAFETY: all-zero is a valid ifreq.
    let mut ifr: libc::ifreq = unsafe { core::mem::zeroed() };
    let name = ifname.as_bytes();
    if name.len() >= ifr.ifr_name.len() {
        return None;
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    Some(ifr)
}

/// `ioctl(req, ifr)` on a datagram socket of this network namespace (interface requests:
/// flags, ethtool).
pub(crate) fn ifreq_ioctl(req: libc::c_ulong, ifr: &mut libc::ifreq) -> std::io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: an interface request with a live ifreq (whatever its union points to is the
    // caller's, alive for the call); then closing the socket we opened.
    let (rc, err) = unsafe {
        let rc = libc::ioctl(fd, req, ifr as *mut libc::ifreq);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        (rc, err)
    };
    if rc < 0 { Err(err) } else { Ok(()) }
}

/// Whether interface `ifname` exists in this network namespace and is up (`IFF_UP`).
pub fn is_up(ifname: &str) -> bool {
    let Some(mut ifr) = ifreq(ifname) else {
        return false;
    };
    if ifreq_ioctl(libc::SIOCGIFFLAGS, &mut ifr).is_err() {
        return false;
    }
    // SAFETY: after a successful SIOCGIFFLAGS the union holds the flags.
    i32::from(unsafe { ifr.ifr_ifru.ifru_flags }) & libc::IFF_UP != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_and_a_missing_interface_is_not() {
        assert!(is_up("lo"));
        assert!(!is_up("vrhost-nope0"));
        assert!(!is_up("a-name-longer-than-ifnamsiz"));
    }
}
