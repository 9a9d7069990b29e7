//! Helpers for the AF_PACKET tests: a veth pair between two fresh namespaces, a plain raw
//! packet socket for the far end (send and receive one frame per call — no rings, so it
//! shares no code with the backend under test), frame builders and a receive loop.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses part of the helpers"
)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use vrhost_dataplane::port::RxQueue;
use vrhost_dataplane::{PktVec, Pool};
use vrhost_lab::{Netns, veth};

/// EtherType of the test frames (IEEE 802 local experimental).
pub const ETH_P_TEST: u16 = 0x88b5;
/// MAC of the port's end of the pair (`pa`).
pub const PA_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x01];
/// MAC of the far end (`pb`).
pub const PB_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x01];

pub fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Turn IPv6 off in a namespace (before its interfaces exist), so no router solicitation
/// or MLD report appears among the frames a test counts.
pub fn quiet(ns: &Netns) {
    ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
    ns.sysctl("net.ipv6.conf.default.disable_ipv6=1").unwrap();
}

/// Two fresh namespaces: `a` holds `pa` (the port under test), `b` holds `pb`, a veth pair
/// with `queues` queues, MACs [`PA_MAC`] and [`PB_MAC`]. Both are deleted on drop.
pub struct Pair {
    pub a: Netns,
    pub b: Netns,
}

pub fn pair(queues: u32) -> Pair {
    let a = Netns::new("pkt").unwrap();
    let b = Netns::new("pkt").unwrap();
    quiet(&a);
    quiet(&b);
    veth((&a, "pa"), (&b, "pb"), queues).unwrap();
    a.ip(&["link", "set", "pa", "address", &mac_str(PA_MAC)])
        .unwrap();
    b.ip(&["link", "set", "pb", "address", &mac_str(PB_MAC)])
        .unwrap();
    Pair { a, b }
}

/// A raw `AF_PACKET` socket on one interface (in the namespace it was opened in): every
/// frame the interface receives, one `recvfrom` each; frames sent with plain `send`.
#[derive(Debug)]
pub struct RawSock {
    fd: OwnedFd,
}

fn check(rc: libc::c_int, what: &str) {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
}

impl RawSock {
    /// Open on `ifname` in the calling thread's namespace.
    pub fn open(ifname: &str) -> RawSock {
        let c = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: a valid NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert_ne!(ifindex, 0, "no interface {ifname}");
        // SAFETY: plain socket(2); protocol 0 so nothing arrives before bind.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        check(fd, "socket");
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let big: libc::c_int = 16 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
            // SAFETY: an int option, pointer and length match.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&big as *const libc::c_int).cast(),
                    4,
                )
            };
            check(rc, "setsockopt(SO_*BUFFORCE)");
        }
        let sll = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: a complete sockaddr_ll and its length.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        check(rc, "bind");
        RawSock { fd }
    }

    /// Open on `ifname` inside `ns`.
    pub fn open_in(ns: &Netns, ifname: &str) -> RawSock {
        ns.run(|| RawSock::open(ifname)).unwrap()
    }

    /// Send one frame, retrying while the socket's queue is full.
    pub fn send(&self, frame: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            // SAFETY: `frame` is valid for reads of its length.
            let rc =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if rc >= 0 {
                assert_eq!(rc as usize, frame.len());
                return;
            }
            let e = std::io::Error::last_os_error();
            let again = matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS));
            assert!(again && Instant::now() < deadline, "send: {e}");
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// The next frame the interface received (not one it sent), waiting up to `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        loop {
            let mut sll = libc::sockaddr_ll {
                sll_family: 0,
                sll_protocol: 0,
                sll_ifindex: 0,
                sll_hatype: 0,
                sll_pkttype: 0,
                sll_halen: 0,
                sll_addr: [0; 8],
            };
            let mut alen = size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` and `sll` are valid for writes of the lengths given.
            let rc = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut alen,
                )
            };
            if rc >= 0 {
                if sll.sll_pkttype == libc::PACKET_OUTGOING {
                    continue;
                }
                return Some(buf[..rc as usize].to_vec());
            }
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "recvfrom: {e}");
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
        }
    }

    /// Received frames that satisfy `keep`, until `n` of them arrived or `timeout` passed.
    pub fn collect(
        &self,
        n: usize,
        timeout: Duration,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Some(f) if keep(&f) => out.push(f),
                Some(_) => {}
                None => break,
            }
        }
        out
    }
}

/// A test frame: Ethernet to `dst` from `src`, optional tags (TPID, VID), EtherType
/// [`ETH_P_TEST`], a 4-byte sequence number, then a pattern derived from it, `len` bytes in
/// all (tags included).
pub fn marked(dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for &(tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ETH_P_TEST.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    let mut i = 0u32;
    while f.len() < len {
        f.push((seq.wrapping_mul(31).wrapping_add(i)) as u8);
        i += 1;
    }
    f
}

/// The offset of the test EtherType in `f`, if it is a test frame (up to two tags).
fn marker_at(f: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..3 {
        let ty = u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]);
        if ty == ETH_P_TEST {
            return Some(at);
        }
        if ty != 0x8100 && ty != 0x88a8 {
            return None;
        }
        at += 4;
    }
    None
}

/// Whether `f` is a test frame.
pub fn is_marked(f: &[u8]) -> bool {
    marker_at(f).is_some()
}

/// The sequence number of a test frame.
pub fn seq_of(f: &[u8]) -> u32 {
    let at = marker_at(f).expect("a test frame") + 2;
    u32::from_be_bytes(f[at..at + 4].try_into().unwrap())
}

/// IPv4 header checksum.
fn ip_checksum(h: &[u8]) -> u16 {
    let mut s = 0u32;
    for w in h.chunks(2) {
        s += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet/IPv4/UDP frame (UDP checksum 0) whose payload starts with `seq`.
pub fn udp4(
    dst: [u8; 6],
    src: [u8; 6],
    (sip, dip): ([u8; 4], [u8; 4]),
    (sport, dport): (u16, u16),
    seq: u32,
    payload_len: usize,
) -> Vec<u8> {
    let udp_len = 8 + payload_len.max(4);
    let total = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + total);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip.extend_from_slice(&sip);
    ip.extend_from_slice(&dip);
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < 14 + total {
        f.push(f.len() as u8);
    }
    f
}

/// Poll `rx` with bursts of at most `max` until `want` frames satisfying `keep` arrived or
/// `timeout` passed. Checks every burst respects `max` and every frame sits where the pool
/// places it; returns the frames and frees the slots.
pub fn rx_collect(
    rx: &mut dyn RxQueue,
    pool: &Pool,
    want: usize,
    max: usize,
    timeout: Duration,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut v = PktVec::new();
    while out.len() < want && Instant::now() < deadline {
        let n = rx.rx_burst(pool, &mut v, max);
        assert!(n <= max, "rx_burst returned {n} > max {max}");
        assert_eq!(n, v.len());
        for p in v.drain(..) {
            let m = *pool.meta(&p);
            assert_eq!(usize::from(m.off), pool.place(&p, usize::from(m.len)));
            let f = pool.frame(&p).to_vec();
            pool.free(p);
            if keep(&f) {
                out.push(f);
            }
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    out
}

/// How many holders keep `ifname` in `ns` promiscuous (`ip -d link show`: "promiscuity N";
/// the PROMISC flag itself only shows `ip link set promisc on`).
pub fn promiscuity(ns: &Netns, ifname: &str) -> u32 {
    let out = ns.ip(&["-d", "link", "show", ifname]).unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    let mut words = s.split_whitespace();
    while let Some(w) = words.next() {
        if w == "promiscuity" {
            return words.next().unwrap().parse().unwrap();
        }
    }
    panic!("no promiscuity in {s}");
}

/// An `XDP_PASS` program attached (driver mode) to `ifname` in `ns`, held there until the
/// returned pair drops. On a veth it makes the device run a NAPI, which is what lets its
/// peer take XDP-transmitted frames (`vrhost_io::xdptx`).
pub fn pass_program(ns: &Netns, ifname: &str) -> (vrhost_io::bpf::Program, vrhost_io::bpf::Link) {
    use vrhost_io::bpf::{self, Alu, Insn, Link, Program};
    ns.run(|| {
        let prog = Program::load_xdp(
            &[Insn::alu_imm(Alu::Mov, 0, bpf::XDP_PASS), Insn::exit()],
            "test_pass",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let link = Link::attach_xdp(&prog, bpf::ifindex(ifname).unwrap(), false).unwrap();
        (prog, link)
    })
    .unwrap()
}

/// Pin the calling thread to `cpu`.
pub fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain bits, all-zero is the empty set; sched_setaffinity reads
    // the set for this thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}
