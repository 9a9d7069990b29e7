//! AF_XDP ports on veth pairs, each test in its own namespaces (root required; under
//! `CI=true` a test that cannot get root fails instead of skipping).
//!
//! What veth gives on this path: the program attaches in native mode (veth has XDP in its
//! NAPI handler), zero-copy binding is refused (`EOPNOTSUPP`) so sockets run in copy mode,
//! and a received frame sits `XDP_PACKET_HEADROOM` = 256 bytes into its chunk.

mod afxdp_util;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use afxdp_util::*;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{PktVec, Pool, SLOT_SIZE};
use vrhost_io::afxdp::{AttachMode, BindMode, XdpError, XdpOptions, XdpPort};
use vrhost_lab::{Netns, require_root, veth};

/// Where the kernel puts a received frame in its chunk (`XDP_PACKET_HEADROOM`), with no
/// UMEM headroom registered.
const XDP_PACKET_HEADROOM: usize = 256;

/// Small rings, so a test pool of a few thousand slots is plenty.
fn small() -> XdpOptions {
    XdpOptions {
        ring_size: 256,
        fill_size: 256,
        ..XdpOptions::default()
    }
}

/// Two namespaces joined by a veth: `peer` end "xa" in `a` (for the raw socket), vrhost's
/// end "xb" in `b`.
struct Pair {
    a: Netns,
    b: Netns,
}

fn pair(queues: u32) -> Pair {
    let a = Netns::new("xdp").unwrap();
    let b = Netns::new("xdp").unwrap();
    veth((&a, "xa"), (&b, "xb"), queues).unwrap();
    Pair { a, b }
}

/// Whether no XDP program is attached to `ifname` (as `ip -d link` shows it), waiting a
/// moment: a link just closed can be held for a few microseconds more by a child that
/// another test thread forked and that has not reached `exec` yet.
fn no_program(ns: &Netns, ifname: &str) -> bool {
    wait_until(Duration::from_secs(2), || {
        !link_details(ns, ifname).contains("prog/xdp")
    })
}

fn open_in(ns: &Netns, ifname: &str, queues: u32, pool: &Arc<Pool>, o: &XdpOptions) -> XdpPort {
    ns.run(|| XdpPort::open(ifname, queues, pool, o))
        .unwrap()
        .unwrap_or_else(|e| panic!("open {ifname}: {e}"))
}

#[test]
fn rx_delivers_exact_bytes_into_pool_slots() {
    if !require_root("afxdp rx test") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(1024);
    let mut port = open_in(&p.b, "xb", 1, &pool, &small());
    assert_eq!(port.mode(), (AttachMode::Native, BindMode::Copy));
    let (mut rx, tx) = port.take_queues().pop().unwrap();
    assert_eq!(rx.lent(), 256, "fill ring filled at open");

    let raw = Raw::open(&p.a, "xa");
    let src = mac_of(&p.a, "xa");
    let lens = [60usize, 61, 64, 128, 255, 256, 1000, 1513, 1514];
    let sent: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| test_frame(src, i as u32, l))
        .collect();
    for f in &sent {
        raw.send(f);
    }
    let got = rx_test_frames(&mut rx, &pool, sent.len(), Duration::from_secs(5));
    assert_eq!(got.len(), sent.len(), "frames received");
    let (base, region_len) = pool.region();
    for (bytes, meta, idx) in &got {
        let seq = test_seq(bytes).unwrap() as usize;
        assert_eq!(bytes, &sent[seq], "frame {seq} bytes");
        assert_eq!(usize::from(meta.len), sent[seq].len());
        assert_eq!(usize::from(meta.off), XDP_PACKET_HEADROOM);
        assert!(usize::from(meta.off) + usize::from(meta.len) <= SLOT_SIZE);
        assert!((*idx as usize + 1) * SLOT_SIZE <= region_len);
        let _ = base;
    }
    // In order, as sent on one queue.
    let seqs: Vec<u32> = got.iter().map(|(b, _, _)| test_seq(b).unwrap()).collect();
    assert_eq!(seqs, (0..sent.len() as u32).collect::<Vec<_>>());
    assert_eq!(rx.bad_descs(), 0);
    let st = port.stats();
    assert_eq!((st.rx_dropped, st.rx_invalid_descs), (0, 0));

    drop((rx, tx));
    drop(port);
    assert_eq!(
        pool.available(),
        pool.capacity(),
        "every slot back after drop"
    );
}

#[test]
fn tx_sends_exact_bytes_and_completions_free_the_slots() {
    if !require_root("afxdp tx test") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(2048);
    let mut port = open_in(&p.b, "xb", 1, &pool, &small());
    let (rx, mut tx) = port.take_queues().pop().unwrap();
    let raw = Raw::open(&p.a, "xa");
    let src = mac_of(&p.b, "xb");
    let full = pool.capacity() - rx.lent() as usize;
    assert_eq!(pool.available(), full);

    // 300 frames in bursts of up to 256 (more than the 256-entry tx ring holds at once).
    let lens = [60usize, 100, 1514, 777];
    let sent: Vec<Vec<u8>> = (0..300u32)
        .map(|i| test_frame(src, i, lens[i as usize % lens.len()]))
        .collect();
    let mut queued = 0;
    let mut v = PktVec::new();
    while queued < sent.len() {
        while !v.is_full() && queued + v.len() < sent.len() {
            v.push(pool.alloc_frame(&sent[queued + v.len()]).unwrap());
        }
        let n = tx.tx_burst(&pool, &mut v);
        tx.flush(&pool);
        // The queue takes from the front; what it refused stays, in order.
        queued += n;
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = raw.recv(sent.len(), Duration::from_secs(5), |f| {
        test_seq(f).is_some()
    });
    assert_eq!(got.len(), sent.len(), "frames received by the peer");
    for (i, f) in got.iter().enumerate() {
        assert_eq!(test_seq(f), Some(i as u32), "in order");
        assert_eq!(f, &sent[i], "frame {i} bytes");
    }
    // Completions come back through the completion ring and free the slots.
    assert!(
        wait_until(Duration::from_secs(2), || {
            tx.reclaim();
            tx.in_flight() == 0
        }),
        "{} frames never completed",
        tx.in_flight()
    );
    assert_eq!(pool.available(), full, "every sent slot back in the pool");
    assert_eq!(tx.bad_descs(), 0);
    assert_eq!(port.stats().tx_invalid_descs, 0);

    drop((rx, tx));
    drop(port);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn dropping_a_port_with_frames_in_flight_returns_every_slot() {
    if !require_root("afxdp drop test") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(2048);
    // Never taken: the port owns its queues and closes them itself.
    let port = open_in(&p.b, "xb", 1, &pool, &small());
    assert!(pool.available() < pool.capacity());
    drop(port);
    assert_eq!(pool.available(), pool.capacity());

    // Taken, with received frames left unread on the rx ring and sent frames not reaped.
    let mut port = open_in(&p.b, "xb", 1, &pool, &small());
    let (rx, mut tx) = port.take_queues().pop().unwrap();
    let raw = Raw::open(&p.a, "xa");
    let src = mac_of(&p.a, "xa");
    for i in 0..20 {
        raw.send(&test_frame(src, i, 200));
    }
    let mut v = PktVec::new();
    for i in 0..20 {
        v.push(pool.alloc_frame(&test_frame(src, 100 + i, 300)).unwrap());
    }
    assert_eq!(tx.tx_burst(&pool, &mut v), 20);
    tx.flush(&pool);
    assert!(
        raw.recv(20, Duration::from_secs(5), |f| test_seq(f).is_some())
            .len()
            == 20
    );
    drop(port);
    // Program detached: the interface is free again while the queues still exist.
    assert!(no_program(&p.b, "xb"));
    drop(rx);
    drop(tx);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn two_queues_both_receive_and_transmit() {
    if !require_root("afxdp two-queue test") {
        return;
    }
    let p = pair(2);
    let pool = Pool::new(4096);
    let mut port = open_in(&p.b, "xb", 2, &pool, &small());
    // veth: native XDP works, zero-copy does not, so the bind fell back to copy mode.
    assert_eq!(port.mode(), (AttachMode::Native, BindMode::Copy));
    assert!(format!("{port:?}").contains("Copy"));
    let mut qs = port.take_queues();
    assert_eq!(qs.len(), 2);
    assert_eq!((qs[0].0.queue(), qs[1].0.queue()), (0, 1));
    let raw = Raw::open(&p.a, "xa");
    let src = mac_of(&p.a, "xa");

    // The peer veth picks its tx queue — and so our rx queue — by flow hash: send IPv4/UDP
    // frames with many source ports so both queues see traffic.
    let n = 128u32;
    let sent: Vec<Vec<u8>> = (0..n).map(|i| udp_frame(src, i)).collect();
    for f in &sent {
        raw.send(f);
    }
    let mut per_queue = [0usize; 2];
    let mut all = BTreeSet::new();
    wait_until(Duration::from_secs(5), || {
        for (q, (rx, _)) in qs.iter_mut().enumerate() {
            for (seq, bytes) in rx_udp(rx, &pool) {
                assert_eq!(bytes, sent[seq as usize], "frame {seq} bytes");
                assert!(all.insert(seq), "frame {seq} received twice");
                per_queue[q] += 1;
            }
        }
        all.len() == n as usize
    });
    assert_eq!(
        all.len(),
        n as usize,
        "every frame received once: {per_queue:?}"
    );
    assert!(
        per_queue.iter().all(|c| *c > 0),
        "both queues received: {per_queue:?}"
    );

    // Both queues transmit.
    let dst = mac_of(&p.b, "xb");
    for (q, (_, tx)) in qs.iter_mut().enumerate() {
        let mut v = PktVec::new();
        for i in 0..10 {
            v.push(
                pool.alloc_frame(&test_frame(dst, q as u32 * 1000 + i, 90))
                    .unwrap(),
            );
        }
        assert_eq!(tx.tx_burst(&pool, &mut v), 10);
        tx.flush(&pool);
    }
    let got = raw.recv(20, Duration::from_secs(5), |f| test_seq(f).is_some());
    let seqs: BTreeSet<u32> = got.iter().map(|f| test_seq(f).unwrap()).collect();
    let want: BTreeSet<u32> = (0..10).chain(1000..1010).collect();
    assert_eq!(seqs, want);

    drop(qs);
    drop(port);
    assert_eq!(pool.available(), pool.capacity());
}

/// An IPv4/UDP frame from `src` to a unicast MAC, source port and payload from `seq`.
fn udp_frame(src: [u8; 6], seq: u32) -> Vec<u8> {
    let payload = seq.to_be_bytes();
    let mut ip = vec![0u8; 20 + 8 + payload.len()];
    ip[0] = 0x45;
    let total = ip.len() as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 1, 1]);
    let sum = !ones_sum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip[20..22].copy_from_slice(&(10000 + seq as u16).to_be_bytes());
    ip[22..24].copy_from_slice(&9u16.to_be_bytes());
    ip[24..26].copy_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    ip[28..].copy_from_slice(&payload);
    let mut f = vec![0x02, 0, 0, 0, 0x77, 0x77];
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(&ip);
    f
}

fn ones_sum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The test UDP frames `rx` has now, as (sequence number, bytes); everything is freed.
fn rx_udp(rx: &mut dyn RxQueue, pool: &Pool) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut v = PktVec::new();
    while rx.rx_burst(pool, &mut v, 64) > 0 {
        for p in v.drain(..) {
            let f = pool.frame(&p);
            if f.len() == 46 && f[12..14] == [0x08, 0x00] && f[0..6] == [0x02, 0, 0, 0, 0x77, 0x77]
            {
                out.push((
                    u32::from_be_bytes(f[42..46].try_into().unwrap()),
                    f.to_vec(),
                ));
            }
            pool.free(p);
        }
    }
    out
}

#[test]
fn generic_mode_forced_and_native_falls_back_to_generic() {
    if !require_root("afxdp generic-mode test") {
        return;
    }
    // Forced generic mode on a veth: traffic still flows, through the skb path.
    let p = pair(1);
    let pool = Pool::new(2048);
    // Without need_wakeup, too: the transmit side then kicks every burst.
    let o = XdpOptions {
        mode: Some(AttachMode::Generic),
        need_wakeup: false,
        ..small()
    };
    let mut port = open_in(&p.b, "xb", 1, &pool, &o);
    assert_eq!(port.mode(), (AttachMode::Generic, BindMode::Copy));
    assert!(!port.need_wakeup());
    let details = link_details(&p.b, "xb");
    assert!(details.contains("xdpgeneric"), "{details}");
    let (mut rx, tx) = port.take_queues().pop().unwrap();
    let raw = Raw::open(&p.a, "xa");
    let src = mac_of(&p.a, "xa");
    let sent: Vec<Vec<u8>> = (0..5)
        .map(|i| test_frame(src, i, 64 + 100 * i as usize))
        .collect();
    for f in &sent {
        raw.send(f);
    }
    let got = rx_test_frames(&mut rx, &pool, sent.len(), Duration::from_secs(5));
    assert_eq!(got.len(), sent.len());
    for (bytes, meta, _) in &got {
        assert_eq!(bytes, &sent[test_seq(bytes).unwrap() as usize]);
        assert_eq!(usize::from(meta.off), XDP_PACKET_HEADROOM);
    }
    let mut tx = tx;
    let mut v = PktVec::new();
    v.push(pool.alloc_frame(&sent[4]).unwrap());
    assert_eq!(tx.tx_burst(&pool, &mut v), 1);
    tx.flush(&pool);
    assert_eq!(
        raw.recv(1, Duration::from_secs(5), |f| test_seq(f).is_some()),
        vec![sent[4].clone()]
    );
    drop((rx, tx, port));

    // Two queues in generic mode: veth hands the skb path no rx queue of its own, so every
    // frame reports queue 0 and lands on that socket. None may be lost.
    let p2 = pair(2);
    let o = XdpOptions {
        mode: Some(AttachMode::Generic),
        ..small()
    };
    let mut port = open_in(&p2.b, "xb", 2, &pool, &o);
    let mut qs = port.take_queues();
    let raw = Raw::open(&p2.a, "xa");
    let src = mac_of(&p2.a, "xa");
    let n = 64u32;
    for i in 0..n {
        raw.send(&udp_frame(src, i));
    }
    let mut per_queue = [0usize; 2];
    let mut all = BTreeSet::new();
    wait_until(Duration::from_secs(5), || {
        for (q, (rx, _)) in qs.iter_mut().enumerate() {
            for (seq, _) in rx_udp(rx, &pool) {
                assert!(all.insert(seq));
                per_queue[q] += 1;
            }
        }
        all.len() == n as usize
    });
    assert_eq!(
        all.len(),
        n as usize,
        "generic mode, 2 queues: {per_queue:?}"
    );
    eprintln!("generic mode on a 2-queue veth: frames per rx queue {per_queue:?}");
    drop((qs, port));

    // A bridge has no native XDP: the default order (native, then generic) ends generic.
    let ns = Netns::new("xdp").unwrap();
    ns.ip(&["link", "add", "br0", "type", "bridge"]).unwrap();
    ns.ip(&["link", "set", "br0", "up"]).unwrap();
    let port = open_in(&ns, "br0", 1, &pool, &small());
    assert_eq!(port.mode(), (AttachMode::Generic, BindMode::Copy));
    // Asking for native only says why it cannot be had.
    let o = XdpOptions {
        mode: Some(AttachMode::Native),
        ..small()
    };
    drop(port);
    let e = ns
        .run(|| XdpPort::open("br0", 1, &pool, &o))
        .unwrap()
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, XdpError::Attach { .. }), "{msg}");
    assert!(
        msg.contains("br0") && msg.contains("BPF_LINK_CREATE") && msg.contains("native"),
        "{msg}"
    );
    assert_eq!(pool.available(), pool.capacity());
}

/// Router namespace between two hosts; the router's two veth ends are AF_XDP ports sharing
/// one pool (one UMEM), driven by one worker of a real data plane with one VR.
#[test]
fn forwards_ping_between_two_hosts_through_the_data_plane() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use vrhost_wire::EthernetAddress;

    if !require_root("afxdp forwarding test") {
        return;
    }
    let h1 = Netns::new("xdp").unwrap();
    let r = Netns::new("xdp").unwrap();
    let h2 = Netns::new("xdp").unwrap();
    for ns in [&h1, &r, &h2] {
        // Only the traffic the test makes: no IPv6 router solicitations or MLD reports.
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
        ns.sysctl("net.ipv6.conf.default.disable_ipv6=1").unwrap();
    }
    veth((&h1, "eth0"), (&r, "p0"), 1).unwrap();
    veth((&r, "p1"), (&h2, "eth0"), 1).unwrap();
    let vif_mac = |last: u8| EthernetAddress([0x02, 0, 0, 0, 0, last]);
    let (mac_a, mac_b) = (vif_mac(1), vif_mac(2));
    let h1_mac = EthernetAddress(mac_of(&h1, "eth0"));
    let h2_mac = EthernetAddress(mac_of(&h2, "eth0"));
    for (ns, addr, gw, gw_mac) in [
        (&h1, "10.0.0.2/24", "10.0.0.1", mac_a),
        (&h2, "10.0.1.2/24", "10.0.1.1", mac_b),
    ] {
        ns.ip(&["addr", "add", addr, "dev", "eth0"]).unwrap();
        ns.ip(&["route", "add", "default", "via", gw]).unwrap();
        let lladdr = gw_mac.to_string();
        ns.ip(&[
            "neigh",
            "add",
            gw,
            "lladdr",
            &lladdr,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])
        .unwrap();
    }

    // Default ring sizes: two ports × 8192 fill slots, plus room for the data plane.
    let pool = Pool::new(32768);
    let (mut p0, mut p1) = r
        .run(|| {
            let o = XdpOptions::default();
            (
                XdpPort::open("p0", 1, &pool, &o).unwrap(),
                XdpPort::open("p1", 1, &pool, &o).unwrap(),
            )
        })
        .unwrap();
    assert_eq!(p0.mode(), p1.mode());
    let (dp, vr) = blue_between(&pool, (mac_a, h1_mac), (mac_b, h2_mac));

    let (rx0, tx0) = p0.take_queues().pop().unwrap();
    let (rx1, tx1) = p1.take_queues().pop().unwrap();
    let mut worker = dp
        .worker(
            0,
            vec![(0, Box::new(rx0)), (1, Box::new(rx1))],
            vec![Box::new(tx0), Box::new(tx1)],
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let t = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            worker.run(&stop);
            drop(worker);
        })
    };

    let out = h1.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"]);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    let out = out.unwrap_or_else(|e| panic!("ping through the VR failed: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 packets transmitted, 3 received"), "{text}");

    // Three echo requests one way, three replies the other, nothing else.
    let s = vr.stats();
    assert_eq!(
        (s.rx_packets, s.tx_packets, s.total_drops()),
        (6, 6, 0),
        "{s:?}"
    );
    let (a, b) = (dp.port_stats(0).unwrap(), dp.port_stats(1).unwrap());
    assert_eq!((a.tx_packets, b.tx_packets), (3, 3));
    assert_eq!(p0.stats(), p1.stats());
    assert_eq!(p0.stats().rx_dropped, 0);

    drop((p0, p1));
    assert_eq!(pool.available(), pool.capacity(), "no slot lost end to end");
}

/// Not a test on its own: the child process of `a_dropped_port_or_a_killed_process_leaves_no_program_behind`
/// (run with `--ignored` and `VRHOST_XDP_CHILD=<ifname>` inside the namespace). Opens the
/// port, says so, and waits to be killed.
#[test]
#[ignore = "helper process for a_dropped_port_or_a_killed_process_leaves_no_program_behind"]
fn child_process_holding_a_port() {
    let Ok(ifname) = std::env::var("VRHOST_XDP_CHILD") else {
        return;
    };
    let pool = Pool::new(1024);
    let port = XdpPort::open(&ifname, 1, &pool, &small()).unwrap();
    // After the harness's "test … ... " prefix on the same line.
    println!("READY {:?}", port.mode());
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_dropped_port_or_a_killed_process_leaves_no_program_behind() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    if !require_root("afxdp cleanup test") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(2048);

    // Dropped: the link goes with the port, and the interface takes a new one at once.
    let port = open_in(&p.b, "xb", 1, &pool, &small());
    assert!(link_details(&p.b, "xb").contains("prog/xdp"));
    drop(port);
    assert!(no_program(&p.b, "xb"));
    let port = open_in(&p.b, "xb", 1, &pool, &small());
    // While one port holds the interface, a second one is refused (the link is exclusive).
    let e =
        p.b.run(|| XdpPort::open("xb", 1, &pool, &small()))
            .unwrap()
            .unwrap_err();
    assert!(e.to_string().contains("BPF_LINK_CREATE"), "{e}");
    drop(port);

    // Killed: a child process opens the port inside the namespace and is SIGKILLed; the
    // kernel closes its link with its files.
    let exe = std::env::current_exe().unwrap();
    let mut child =
        p.b.command(&[
            exe.to_str().unwrap(),
            "--exact",
            "child_process_holding_a_port",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VRHOST_XDP_CHILD", "xb")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("READY"))
        .expect("child never opened the port");
    assert!(ready.contains("Native"), "{ready}");
    assert!(
        link_details(&p.b, "xb").contains("prog/xdp"),
        "child's program attached"
    );
    // SAFETY: kill(2) on the child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
    child.wait().unwrap();
    assert!(
        no_program(&p.b, "xb"),
        "program still attached after the process died"
    );
    let mut port = open_in(&p.b, "xb", 1, &pool, &small());
    // And it works.
    let (mut rx, _tx) = port.take_queues().pop().unwrap();
    let raw = Raw::open(&p.a, "xa");
    let f = test_frame(mac_of(&p.a, "xa"), 42, 100);
    raw.send(&f);
    let got = rx_test_frames(&mut rx, &pool, 1, Duration::from_secs(5));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, f);
}

#[test]
fn bad_input_is_refused_with_a_clear_error() {
    if !require_root("afxdp bad input test") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(2048);
    let open = |name: &str, queues, o: &XdpOptions| {
        p.b.run(|| XdpPort::open(name, queues, &pool, o)).unwrap()
    };

    let e = open("nosuch0", 1, &small()).unwrap_err();
    assert!(
        matches!(&e, XdpError::NoInterface { ifname } if ifname == "nosuch0"),
        "{e:?}"
    );
    assert!(e.to_string().contains("\"nosuch0\" does not exist"), "{e}");
    // The name is looked up in the calling thread's namespace: "xb" is not in ours.
    assert!(matches!(
        XdpPort::open("xb", 1, &pool, &small()),
        Err(XdpError::NoInterface { .. })
    ));

    let e = open("xb", 0, &small()).unwrap_err();
    assert!(
        matches!(
            e,
            XdpError::BadOption {
                field: "queues",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("queues"), "{e}");

    let e = open("xb", 4, &small()).unwrap_err();
    assert!(
        matches!(
            e,
            XdpError::TooManyQueues {
                queues: 4,
                available: 1,
                ..
            }
        ),
        "{e:?}"
    );

    let o = XdpOptions {
        ring_size: 1000,
        ..small()
    };
    let e = open("xb", 1, &o).unwrap_err();
    assert!(
        matches!(
            e,
            XdpError::BadOption {
                field: "ring_size",
                ..
            }
        ),
        "{e:?}"
    );

    // veth has no zero-copy: asking for it names the queue and the bind that failed.
    let o = XdpOptions {
        zero_copy: Some(true),
        ..small()
    };
    let e = open("xb", 1, &o).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("\"xb\" queue 0") && msg.contains("bind(XDP_ZEROCOPY)"),
        "{msg}"
    );
    assert_eq!(
        pool.available(),
        pool.capacity(),
        "failed opens keep no slot"
    );

    // The first port on a pool fixes its UMEM's mode; a later one cannot ask for another.
    p.b.ip(&["link", "add", "yb", "type", "veth", "peer", "name", "yc"])
        .unwrap();
    p.b.ip(&["link", "set", "yb", "up"]).unwrap();
    p.b.ip(&["link", "set", "yc", "up"]).unwrap();
    let first = open("xb", 1, &small()).unwrap();
    assert_eq!(first.mode().1, BindMode::Copy);
    let o = XdpOptions {
        zero_copy: Some(true),
        ..small()
    };
    let e = open("yb", 1, &o).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, XdpError::Mode { .. }), "{msg}");
    assert!(
        msg.contains("\"yb\"") && msg.contains("\"xb\"") && msg.contains("copy mode"),
        "{msg}"
    );
    // Without a preference it joins in the UMEM's mode.
    let second = open("yb", 1, &small()).unwrap();
    assert_eq!(second.mode(), first.mode());
    assert_eq!(second.umem_id(), first.umem_id());
    drop((first, second));
    assert_eq!(pool.available(), pool.capacity());

    // Busy polling: a budget of 0 is refused; on veth (copy mode) the port opens with the
    // socket options set, but says busy polling is not in effect (no NAPI id in copy mode).
    let o = XdpOptions {
        busy_poll: Some(0),
        ..small()
    };
    let e = open("xb", 1, &o).unwrap_err();
    assert!(
        matches!(
            e,
            XdpError::BadOption {
                field: "busy_poll",
                ..
            }
        ),
        "{e:?}"
    );
    let o = XdpOptions {
        busy_poll: Some(64),
        ..small()
    };
    let port = open("xb", 1, &o).unwrap();
    assert_eq!(port.mode().1, BindMode::Copy);
    assert!(!port.busy_polling());
    drop(port);
    assert_eq!(pool.available(), pool.capacity());
}

/// Two ports opened on one pool share one UMEM (the second socket binds with
/// `XDP_SHARED_UMEM`), and a frame received on one leaves the other from the very slot the
/// kernel wrote it into.
#[test]
fn ports_on_one_pool_share_one_umem_and_forward_without_copy() {
    if !require_root("afxdp shared UMEM test") {
        return;
    }
    let a = Netns::new("xdp").unwrap();
    let r = Netns::new("xdp").unwrap();
    let b = Netns::new("xdp").unwrap();
    veth((&a, "xa"), (&r, "ra"), 1).unwrap();
    veth((&r, "rb"), (&b, "xb"), 1).unwrap();
    let pool = Pool::new(2048);
    let (mut pa, mut pb) = r
        .run(|| {
            (
                XdpPort::open("ra", 1, &pool, &small()).unwrap(),
                XdpPort::open("rb", 1, &pool, &small()).unwrap(),
            )
        })
        .unwrap();
    // One registration: the second port's socket bound with XDP_SHARED_UMEM (the kernel
    // refuses that bind unless it names a bound socket of the UMEM, so the open would have
    // failed). This kernel has no XDP sock_diag (`ss --xdp`) to show it from outside.
    assert_eq!(pa.umem_id(), pb.umem_id());
    assert_ne!(pa.umem_id(), 0);
    // Another pool is another UMEM.
    let (c1, c2) = (Netns::new("xdp").unwrap(), Netns::new("xdp").unwrap());
    veth((&c1, "ca"), (&c2, "cb"), 1).unwrap();
    let other = Pool::new(512);
    let pc = open_in(&c2, "cb", 1, &other, &small());
    assert_ne!(pc.umem_id(), pa.umem_id());
    drop(pc);

    let (mut rxa, _txa) = pa.take_queues().pop().unwrap();
    let (_rxb, mut txb) = pb.take_queues().pop().unwrap();
    let raw_a = Raw::open(&a, "xa");
    let raw_b = Raw::open(&b, "xb");
    let f = test_frame(mac_of(&a, "xa"), 7, 300);
    raw_a.send(&f);
    let mut v = PktVec::new();
    assert!(wait_until(Duration::from_secs(5), || {
        let mut got = PktVec::new();
        rxa.rx_burst(&pool, &mut got, 64);
        for p in got.drain(..) {
            if test_seq(pool.frame(&p)).is_some() {
                v.push(p);
            } else {
                pool.free(p);
            }
        }
        !v.is_empty()
    }));
    let slot = v[0].index();
    let (base, _) = pool.region();
    // The bytes the data plane sees are the ones the kernel wrote into the UMEM chunk.
    assert_eq!(
        pool.frame(&v[0]).as_ptr(),
        base.wrapping_add(slot as usize * SLOT_SIZE + XDP_PACKET_HEADROOM)
            .cast_const()
    );
    let before = pool.available();
    assert_eq!(txb.tx_burst(&pool, &mut v), 1);
    txb.flush(&pool);
    let got = raw_b.recv(1, Duration::from_secs(5), |g| test_seq(g).is_some());
    assert_eq!(got, vec![f]);
    // The slot went to rb's kernel queue and comes back through rb's completion ring.
    assert!(wait_until(Duration::from_secs(2), || {
        txb.reclaim();
        txb.in_flight() == 0
    }));
    assert_eq!(pool.available(), before + 1);

    // Once every socket of the registration is closed, the next port registers anew.
    let first = pa.umem_id();
    drop((rxa, _txa, _rxb, txb, pa, pb));
    assert_eq!(pool.available(), pool.capacity());
    let again = open_in(&r, "ra", 1, &pool, &small());
    assert_ne!(again.umem_id(), first);
}
