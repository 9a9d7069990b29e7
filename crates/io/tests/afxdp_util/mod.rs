//! Helpers for the AF_XDP tests: a raw `AF_PACKET` socket on the far end of a veth (to
//! inject frames and collect what vrhost sent), test frames that carry a sequence number,
//! and polling loops with deadlines.
//!
//! A packet socket rather than `ping` or `tcpdump`: the tests compare exact bytes, and a
//! socket opened inside the namespace is listening the moment it exists.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses part of the helpers"
)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use std::sync::Arc;

use vrhost_dataplane::port::RxQueue;
use vrhost_dataplane::{
    Dataplane, DataplaneConfig, IfAddr, Meta, PktVec, Pool, VifConfig, Vr, VrConfig,
};
use vrhost_lab::Netns;
use vrhost_wire::EthernetAddress;

/// EtherType of the test frames (IEEE 802 local experimental): the kernel stack ignores it.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// A raw packet socket bound to one interface of one namespace.
#[derive(Debug)]
pub struct Raw {
    fd: OwnedFd,
    ifindex: i32,
}

impl Raw {
    /// Open it on `ifname` inside `ns`; receives every frame the interface receives.
    pub fn open(ns: &Netns, ifname: &str) -> Raw {
        let ifname = ifname.to_string();
        ns.run(move || {
            let c = std::ffi::CString::new(ifname.clone()).unwrap();
            // SAFETY: a valid NUL-terminated name.
            let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) } as i32;
            assert_ne!(ifindex, 0, "no interface {ifname}");
            let proto = (libc::ETH_P_ALL as u16).to_be();
            // SAFETY: socket(2) with constant arguments.
            let fd = unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    i32::from(proto),
                )
            };
            assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
            // SAFETY: a fresh descriptor nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut sa: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_protocol = proto;
            sa.sll_ifindex = ifindex;
            // SAFETY: binding our socket to a valid sockaddr_ll of the size passed.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sa as *const libc::sockaddr_ll).cast(),
                    size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            assert_eq!(rc, 0, "bind: {}", io::Error::last_os_error());
            let buf: libc::c_int = 8 << 20;
            // SAFETY: setting an int option from a live int. Failure only means a smaller
            // buffer.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    (&buf as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as u32,
                )
            };
            Raw { fd, ifindex }
        })
        .unwrap()
    }

    /// Transmit `frame` as is.
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sa: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_ifindex = self.ifindex;
        sa.sll_halen = 6;
        sa.sll_addr[..6].copy_from_slice(&frame[..6]);
        for _ in 0..1000 {
            // SAFETY: sending from a live buffer to a valid sockaddr_ll.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&sa as *const libc::sockaddr_ll).cast(),
                    size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            if rc == frame.len() as isize {
                return;
            }
            let e = io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS), "sendto: {e}");
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("sendto kept failing with ENOBUFS");
    }

    /// Incoming frames (not the ones this host sent) that satisfy `keep`, until `n` were
    /// collected or `timeout` passed.
    pub fn recv(&self, n: usize, timeout: Duration, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while out.len() < n && Instant::now() < deadline {
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut sa: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
            let mut sl = size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: receiving into a live buffer of the size passed.
            let rc = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut sa as *mut libc::sockaddr_ll).cast(),
                    &mut sl,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "recvfrom: {e}");
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            let f = &buf[..rc as usize];
            if sa.sll_pkttype != libc::PACKET_OUTGOING && keep(f) {
                out.push(f.to_vec());
            }
        }
        out
    }
}

/// A test frame of `len` bytes (≥ 20): broadcast destination, `src` MAC, [`TEST_ETHERTYPE`],
/// the 32-bit sequence number `seq`, then a byte pattern that depends on `seq` and the
/// position, so any misplaced or truncated byte shows.
pub fn test_frame(src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= 18);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    for i in f.len()..len {
        f.push((i as u32).wrapping_mul(31).wrapping_add(seq) as u8);
    }
    f
}

/// The sequence number of a test frame, `None` for any other frame.
pub fn test_seq(f: &[u8]) -> Option<u32> {
    (f.len() >= 18 && f[12..14] == TEST_ETHERTYPE.to_be_bytes())
        .then(|| u32::from_be_bytes(f[14..18].try_into().unwrap()))
}

/// Poll `rx` until `n` test frames arrived or `timeout` passed; other frames (IPv6 router
/// solicitations and the like) are freed. Returns each test frame's bytes, metadata and
/// slot index; the test frames' slots are freed too.
pub fn rx_test_frames(
    rx: &mut dyn RxQueue,
    pool: &Pool,
    n: usize,
    timeout: Duration,
) -> Vec<(Vec<u8>, Meta, u32)> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut v = PktVec::new();
    while out.len() < n && Instant::now() < deadline {
        if rx.rx_burst(pool, &mut v, 64) == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        for p in v.drain(..) {
            let f = pool.frame(&p);
            if test_seq(f).is_some() {
                out.push((f.to_vec(), *pool.meta(&p), p.index()));
            }
            pool.free(p);
        }
    }
    out
}

/// Wait until `cond` holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The interface's details as `ip -d link show` prints them inside `ns`.
pub fn link_details(ns: &Netns, ifname: &str) -> String {
    let out = ns.ip(&["-d", "link", "show", "dev", ifname]).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The MAC address of `ifname` in `ns`.
pub fn mac_of(ns: &Netns, ifname: &str) -> [u8; 6] {
    let d = link_details(ns, ifname);
    let s = d
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC in {d}"));
    let mut m = [0u8; 6];
    for (b, h) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(h, 16).unwrap();
    }
    m
}

/// A one-worker data plane on ports `p0` and `p1` with VR `blue` routing between them: VIF
/// `a` on p0 (MAC `mac_a`, 10.0.0.1/24, neighbour 10.0.0.2 at `h1`), VIF `b` on p1 (`mac_b`,
/// 10.0.1.1/24, neighbour 10.0.1.2 at `h2`).
pub fn blue_between(
    pool: &Arc<Pool>,
    (mac_a, h1): (EthernetAddress, EthernetAddress),
    (mac_b, h2): (EthernetAddress, EthernetAddress),
) -> (Dataplane, Arc<Vr>) {
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p0".into(), "p1".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let vr = dp.add_vr(VrConfig::new("blue")).unwrap();
    let vif = |name: &str, port, mac, addr| VifConfig {
        name: name.into(),
        port,
        vlan: None,
        key: Default::default(),
        mac,
        mtu: 1500,
        addrs: vec![IfAddr::V4(addr, 24)],
    };
    dp.add_vif("blue", vif("a", 0, mac_a, [10, 0, 0, 1].into()))
        .unwrap();
    dp.add_vif("blue", vif("b", 1, mac_b, [10, 0, 1, 1].into()))
        .unwrap();
    vr.neigh.set(0, [10, 0, 0, 2].into(), h1);
    vr.neigh.set(1, [10, 0, 1, 2].into(), h2);
    (dp, vr)
}
