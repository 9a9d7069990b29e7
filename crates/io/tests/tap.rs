//! The tap backend against a real kernel: an ARP request written to a tap is answered by the
//! namespace's kernel, and the reply is read back through the pool — the punt/inject round
//! trip a VR's control plane depends on.

use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{PktVec, Pool};
use vrhost_io::tap::{Tap, TapError};
use vrhost_lab::{Netns, require_root};
use vrhost_wire::{EtherType, EthernetAddress, arp, ethernet};

const TAP_MAC: EthernetAddress = EthernetAddress([0x02, 0x76, 0, 0, 0, 0x01]);
const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0x76, 0, 0, 0, 0x02]);
const TAP_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

fn arp_request() -> Vec<u8> {
    let a = arp::Repr {
        operation: arp::Operation::Request,
        sender_hardware_addr: PEER_MAC,
        sender_protocol_addr: PEER_IP,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: TAP_IP,
    };
    let mut f = vec![0u8; ethernet::HEADER_LEN + a.buffer_len()];
    ethernet::Repr {
        src_addr: PEER_MAC,
        dst_addr: EthernetAddress::BROADCAST,
        ethertype: EtherType::ARP,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut f[..]));
    a.emit(&mut arp::Packet::new_unchecked(
        &mut f[ethernet::HEADER_LEN..],
    ));
    f
}

/// Read frames until one satisfies `want`, or fail after two seconds. The kernel may also
/// send router solicitations and the like on a fresh link; those are skipped.
fn wait_for(tap: &mut Tap, pool: &Pool, want: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut v = PktVec::new();
    loop {
        tap.rx_burst(pool, &mut v, 32);
        for p in v.drain(..) {
            let f = pool.frame(&p).to_vec();
            pool.free(p);
            if want(&f) {
                return f;
            }
        }
        assert!(Instant::now() < deadline, "no matching frame from the tap");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn kernel_answers_arp_written_to_the_tap() {
    if !require_root("tap test") {
        return;
    }
    let ns = Netns::new("tap").unwrap();
    let pool = Pool::new(64);
    let mut tap = ns.run(|| Tap::create("vif0")).unwrap().unwrap();
    assert_eq!(tap.name(), "vif0");
    let mac = TAP_MAC.to_string();
    ns.ip(&["link", "set", "vif0", "address", &mac, "mtu", "1500", "up"])
        .unwrap();
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "vif0"])
        .unwrap();

    // Inject: the kernel receives the request through the tap...
    let mut v = PktVec::new();
    v.push(pool.alloc_frame(&arp_request()).unwrap());
    assert_eq!(tap.tx_burst(&pool, &mut v), 1);
    assert!(v.is_empty());

    // ...and punts back its reply, addressed to the asker, byte for byte what we expect.
    let reply = wait_for(&mut tap, &pool, |f| {
        f.len() >= 22 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2]
    });
    let eth = ethernet::Frame::new_checked(&reply[..]).unwrap();
    assert_eq!(eth.dst_addr(), PEER_MAC);
    assert_eq!(eth.src_addr(), TAP_MAC);
    let a = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).unwrap()).unwrap();
    assert_eq!(a.operation, arp::Operation::Reply);
    assert_eq!(a.sender_hardware_addr, TAP_MAC);
    assert_eq!(a.sender_protocol_addr, TAP_IP);
    assert_eq!(a.target_hardware_addr, PEER_MAC);
    assert_eq!(a.target_protocol_addr, PEER_IP);

    // The kernel learnt the neighbour from the request: the tap carried a real frame.
    let neigh = ns
        .ip(&["neigh", "show", "192.0.2.2", "dev", "vif0"])
        .unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
    assert!(
        neigh.contains(&PEER_MAC.to_string()),
        "neighbour table: {neigh}"
    );

    let s = tap.stats();
    assert_eq!(s.tx, 1);
    assert!(s.rx >= 1);
    assert_eq!((s.rx_dropped, s.tx_dropped), (0, 0));
    drop(tap);
    assert_eq!(pool.available(), pool.capacity(), "a slot leaked");
    // Not persistent: the device goes with its descriptor. The kernel unregisters it
    // after the close returns (it waits for the device's last references), which on a
    // loaded machine took a moment: allow it a few seconds.
    let t0 = std::time::Instant::now();
    while ns.ip(&["link", "show", "vif0"]).is_ok() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "vif0 still there 5 s after its descriptor was closed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn oversize_frames_from_the_kernel_are_counted_drops() {
    if !require_root("tap test") {
        return;
    }
    let ns = Netns::new("tap").unwrap();
    let pool = Pool::new(16);
    let mut tap = ns.run(|| Tap::create("big0")).unwrap().unwrap();
    ns.ip(&["link", "set", "big0", "mtu", "4000", "up"])
        .unwrap();
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "big0"])
        .unwrap();
    let peer = PEER_MAC.to_string();
    ns.ip(&["neigh", "add", "192.0.2.2", "lladdr", &peer, "dev", "big0"])
        .unwrap();
    // A 3000-byte ping leaves the kernel as one frame larger than any pool slot.
    let _ = ns.exec(&["ping", "-c1", "-W1", "-s", "3000", "-M", "do", "192.0.2.2"]);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut v = PktVec::new();
    while tap.stats().rx_dropped == 0 {
        tap.rx_burst(&pool, &mut v, 32);
        pool.free_all(&mut v);
        assert!(Instant::now() < deadline, "oversize frame not counted");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn bad_names_are_refused() {
    for bad in ["", "a-name-that-is-far-too-long", "nul\0"] {
        assert!(
            matches!(Tap::create(bad), Err(TapError::BadName(_))),
            "{bad:?}"
        );
    }
}

/// `Readiness` reports a tap once the kernel has a frame for it, and not before or after it
/// was read; a tap created in place of a closed one (same descriptor number, often) is
/// watched as well.
#[test]
fn readiness_reports_only_taps_with_frames() {
    if !require_root("tap test") {
        return;
    }
    let ns = Netns::new("tapready").unwrap();
    // No IPv6: a fresh link would send router solicitations and MLD reports by itself.
    for k in ["all", "default"] {
        let out = ns
            .exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
            ])
            .unwrap();
        assert!(out.status.success());
    }
    let pool = Pool::new(64);
    let mut a = ns.run(|| Tap::create("vifa")).unwrap().unwrap();
    let b = ns.run(|| Tap::create("vifb")).unwrap().unwrap();
    let mac = TAP_MAC.to_string();
    for dev in ["vifa", "vifb"] {
        ns.ip(&["link", "set", dev, "address", &mac, "up"]).unwrap();
    }
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "vifa"])
        .unwrap();
    let mut r = vrhost_io::tap::Readiness::new().unwrap();
    // Drain what a fresh link sends by itself (router solicitations …), then expect quiet.
    let settle = |r: &mut vrhost_io::tap::Readiness, a: &mut Tap, b: &Tap| {
        std::thread::sleep(Duration::from_millis(50));
        let mut v = PktVec::new();
        while a.rx_burst(&pool, &mut v, 32) > 0 {
            for p in v.drain(..) {
                pool.free(p);
            }
        }
        r.ready([&*a, b]).unwrap()
    };
    let _ = settle(&mut r, &mut a, &b);
    // The kernel answers an ARP request written to `a`: only `a` becomes ready.
    let mut v = PktVec::new();
    v.push(pool.alloc_frame(&arp_request()).unwrap());
    a.tx_burst(&pool, &mut v);
    let deadline = Instant::now() + Duration::from_secs(2);
    let ready = loop {
        let ready = r.ready([&a, &b]).unwrap();
        if !ready.is_empty() || Instant::now() > deadline {
            break ready;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(ready.contains(&a.as_fd().as_raw_fd()), "{ready:?}");
    assert!(!ready.contains(&b.as_fd().as_raw_fd()), "{ready:?}");
    let reply = wait_for(&mut a, &pool, |f| {
        f.len() >= 14 && f[12..14] == [0x08, 0x06]
    });
    assert_eq!(&reply[..6], &PEER_MAC.0);
    // A tap made after another was closed is watched too.
    drop(b);
    let mut c = ns.run(|| Tap::create("vifc")).unwrap().unwrap();
    ns.ip(&["link", "set", "vifc", "address", &mac, "up"])
        .unwrap();
    ns.ip(&["addr", "add", "198.51.100.1/24", "dev", "vifc"])
        .unwrap();
    let _ = settle(&mut r, &mut a, &c);
    let mut req = arp_request();
    // Ask for vifc's address.
    req[38..42].copy_from_slice(&[198, 51, 100, 1]);
    let mut v = PktVec::new();
    v.push(pool.alloc_frame(&req).unwrap());
    c.tx_burst(&pool, &mut v);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let ready = r.ready([&a, &c]).unwrap();
        if ready.contains(&c.as_fd().as_raw_fd()) {
            break;
        }
        assert!(Instant::now() < deadline, "the new tap never became ready");
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = wait_for(&mut c, &pool, |f| {
        f.len() >= 14 && f[12..14] == [0x08, 0x06]
    });
}
