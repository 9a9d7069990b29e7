//! The AF_PACKET backend against a real kernel, each test in namespaces of its own (deleted
//! on drop, even when the test fails): frames in and out byte for byte, fanout over two
//! queues, a forwarding data plane between two hosts (ping and iperf3 TCP), and bad input.
//!
//! Needs root. Under `CI=true` a test without root fails instead of skipping.

mod afpacket_util;

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use afpacket_util::*;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{Dataplane, DataplaneConfig, IfAddr, PktVec, Pool, VifConfig, VrConfig};
use vrhost_io::afpacket::{FanoutBy, PacketError, PacketOptions, PacketPort, TxMode};
use vrhost_lab::{Netns, require_root, veth};
use vrhost_wire::EthernetAddress;

const SECOND: Duration = Duration::from_secs(1);

fn open(
    ns: &Netns,
    ifname: &str,
    queues: u32,
    pool: &Arc<Pool>,
    opts: &PacketOptions,
) -> PacketPort {
    ns.run(|| PacketPort::open(ifname, queues, pool, opts))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Frames from the far end arrive through `rx_burst` byte for byte and in order: to the
/// port's MAC, broadcast, other MACs (promiscuous), VLAN-tagged (the kernel strips the tag;
/// the backend puts it back), sizes from minimum to full. The burst spans many blocks and
/// is read 7 frames per call, so blocks are left and resumed mid-way.
#[test]
fn rx_frames_arrive_byte_exact_across_blocks_and_bursts() {
    if !require_root("afpacket rx") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(4096);
    let opts = PacketOptions {
        block_size: 16 << 10,
        block_count: 128,
        ..PacketOptions::default()
    };
    assert_eq!(promiscuity(&p.a, "pa"), 0);
    let mut port = open(&p.a, "pa", 1, &pool, &opts);
    assert_eq!(promiscuity(&p.a, "pa"), 1, "the rx socket's membership");
    let (mut rx, _tx) = port.take_queues().pop().unwrap();
    let peer = RawSock::open_in(&p.b, "pb");

    let other = [0x02, 0, 0, 0, 0x99, 0x42];
    let mut sent = Vec::new();
    for i in 0..700u32 {
        let dst = match i % 3 {
            0 => PA_MAC,
            1 => [0xff; 6],
            _ => other,
        };
        let tags: &[(u16, u16)] = match i % 50 {
            7 => &[(0x8100, 100 + i as u16)],
            8 => &[(0x88a8, 10), (0x8100, 20)],
            _ => &[],
        };
        let len = 60 + (i as usize * 37) % 1455;
        sent.push(marked(dst, PB_MAC, tags, i, len));
    }
    // Nothing polls while sending: the 2 MiB ring holds the ~560 KB burst.
    for f in &sent {
        peer.send(f);
    }
    let got = rx_collect(&mut rx, &pool, sent.len(), 7, 5 * SECOND, is_marked);
    assert_eq!(got.len(), sent.len(), "frames lost");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "frame {i} differs");
    }
    let blocks = sent.iter().map(|f| f.len() + 80).sum::<usize>() / (16 << 10);
    assert!(blocks > 10, "the burst should span many blocks ({blocks})");

    // A lone frame waits about one block timeout (1 ms) for its block to be handed over.
    let mut waits = Vec::new();
    let mut v = PktVec::new();
    for i in 0..20 {
        std::thread::sleep(Duration::from_millis(3));
        let t0 = Instant::now();
        peer.send(&marked(PA_MAC, PB_MAC, &[], 10_000 + i, 60));
        while rx.rx_burst(&pool, &mut v, 64) == 0 {
            assert!(t0.elapsed() < SECOND, "lone frame never arrived");
            std::hint::spin_loop();
        }
        waits.push(t0.elapsed());
        assert_eq!(seq_of(pool.frame(&v[0])), 10_000 + i);
        pool.free_all(&mut v);
    }
    waits.sort();
    println!(
        "lone frame, send to rx_burst: min {:?} median {:?} max {:?} (block timeout 1 ms)",
        waits[0], waits[10], waits[19]
    );
    assert!(waits[10] < Duration::from_millis(50), "{waits:?}");

    let s = port.stats();
    assert_eq!(s.tp_drops, 0);
    assert_eq!(s.oversize, 0);
    assert!(s.tp_packets >= sent.len() as u64 + 20, "{s:?}");
    assert_eq!(pool.available(), pool.capacity(), "leaked slots");

    drop(rx);
    drop(port);
    assert_eq!(
        promiscuity(&p.a, "pa"),
        0,
        "closing the socket ends the membership"
    );
}

/// With the pool empty, frames stay in the ring (the kernel's buffer) instead of being
/// dropped, and arrive in order once slots are back. The kernel's counters survive the
/// queue: a dropped queue hands them to the port.
#[test]
fn an_empty_pool_leaves_frames_in_the_ring() {
    if !require_root("afpacket pool exhaustion") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(8);
    let mut port = open(&p.a, "pa", 1, &pool, &PacketOptions::default());
    let (mut rx, _tx) = port.take_queues().pop().unwrap();
    let peer = RawSock::open_in(&p.b, "pb");
    let sent: Vec<Vec<u8>> = (0..100u32)
        .map(|i| marked(PA_MAC, PB_MAC, &[], i, 300))
        .collect();
    for f in &sent {
        peer.send(f);
    }
    let mut got = Vec::new();
    let mut v = PktVec::new();
    let deadline = Instant::now() + 5 * SECOND;
    while got.len() < sent.len() {
        assert!(
            Instant::now() < deadline,
            "only {} frames arrived",
            got.len()
        );
        let n = rx.rx_burst(&pool, &mut v, 64);
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        assert!(n <= 8);
        if pool.available() == 0 {
            // Nothing more can be received while every slot is held.
            assert_eq!(rx.rx_burst(&pool, &mut v, 64), 0);
        }
        for p in v.drain(..) {
            let f = pool.frame(&p).to_vec();
            if is_marked(&f) {
                got.push(f);
            }
            pool.free(p);
        }
    }
    assert_eq!(got, sent);
    drop(rx);
    let s = port.stats();
    assert!(
        s.tp_packets >= 100,
        "counted before the queue was dropped: {s:?}"
    );
    assert_eq!(s.tp_drops, 0);
}

/// Frames given to `tx_burst` arrive at the far end byte for byte and in order, in both
/// transmit modes; every pool slot comes back; the port's own receive queue sees neither its
/// own transmissions nor what another socket of this host sends on the interface.
#[test]
fn tx_both_modes_arrive_byte_exact_and_are_not_received_back() {
    if !require_root("afpacket tx") {
        return;
    }
    for mode in [TxMode::Ring, TxMode::Sendmmsg] {
        let p = pair(1);
        let pool = Pool::new(2048);
        let opts = PacketOptions {
            tx: mode,
            tx_frames: 64,
            ..PacketOptions::default()
        };
        let mut port = open(&p.a, "pa", 1, &pool, &opts);
        let (mut rx, mut tx) = port.take_queues().pop().unwrap();
        assert_eq!(tx.mode(), mode);
        let peer = RawSock::open_in(&p.b, "pb");
        // Another socket on the port's interface, as the host's kernel or a tool would be.
        let local = RawSock::open_in(&p.a, "pa");

        let frames: Vec<Vec<u8>> = (0..600u32)
            .map(|i| marked(PB_MAC, PA_MAC, &[], i, 60 + (i as usize * 53) % 1455))
            .collect();
        let mut full_retries = 0;
        for chunk in frames.chunks(100) {
            let mut v = PktVec::new();
            for f in chunk {
                v.push(pool.alloc_frame(f).unwrap());
            }
            let deadline = Instant::now() + 5 * SECOND;
            while !v.is_empty() {
                let before = v.len();
                let n = tx.tx_burst(&pool, &mut v);
                tx.flush(&pool);
                assert_eq!(v.len(), before - n, "taken packets leave the vector");
                if !v.is_empty() {
                    // Ring (64 slots) or socket buffer full: retry what is left.
                    full_retries += 1;
                    assert!(Instant::now() < deadline, "tx stuck with {} left", v.len());
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
        for i in 0..20u32 {
            local.send(&marked(PB_MAC, PA_MAC, &[], 100_000 + i, 100));
        }
        let got = peer.collect(frames.len() + 20, 5 * SECOND, is_marked);
        let (ours, theirs): (Vec<_>, Vec<_>) = got.into_iter().partition(|f| seq_of(f) < 100_000);
        assert_eq!(ours.len(), frames.len(), "{mode:?}: frames lost");
        for (i, (g, s)) in ours.iter().zip(&frames).enumerate() {
            assert_eq!(g, s, "{mode:?}: frame {i} differs");
        }
        assert_eq!(theirs.len(), 20);
        assert_eq!(
            pool.available(),
            pool.capacity(),
            "{mode:?}: slots not returned"
        );

        // Well past a block timeout: the port received none of the frames sent on its
        // interface, neither its own nor the other socket's.
        let echoed = rx_collect(&mut rx, &pool, 1, 64, SECOND / 2, is_marked);
        assert!(
            echoed.is_empty(),
            "{mode:?}: port received {} outgoing frames",
            echoed.len()
        );
        let s = port.stats();
        assert_eq!(s.tx_errors, 0, "{mode:?}");
        assert_eq!(s.tx_full, 0, "{mode:?}");
        println!("{mode:?}: 600 frames sent, {full_retries} bursts retried after a full queue");
    }
}

/// Two queues on a two-queue veth: frames of 64 flows spread over both receive queues, none
/// lost or duplicated, and each flow stays on one queue (so in order).
#[test]
fn fanout_spreads_flows_over_two_queues() {
    if !require_root("afpacket fanout") {
        return;
    }
    let p = pair(2);
    let pool = Pool::new(8192);
    let opts = PacketOptions::default();
    let mut port = open(&p.a, "pa", 2, &pool, &opts);
    assert_eq!(port.queues(), 2);
    {
        // Another port on the same interface gets a group of its own.
        let other = open(&p.a, "pa", 2, &pool, &opts);
        assert!(other.fanout_group().is_some() && port.fanout_group().is_some());
        assert_ne!(other.fanout_group(), port.fanout_group());
        // A port with one queue needs no group (and so no flow hash per frame).
        let single = open(&p.a, "pa", 1, &pool, &opts);
        assert_eq!(single.fanout_group(), None);
    }
    let mut queues = port.take_queues();
    assert_eq!(queues.len(), 2);
    assert!(port.take_queues().is_empty(), "queues are taken once");
    let peer = RawSock::open_in(&p.b, "pb");

    let flows = 64u32;
    let per_flow = 20u32;
    let mut sent = HashMap::new();
    for k in 0..per_flow {
        for fl in 0..flows {
            let seq = k * flows + fl;
            let f = udp4(
                PA_MAC,
                PB_MAC,
                ([10, 1, (fl / 8) as u8, 1 + (fl % 8) as u8], [10, 2, 0, 1]),
                (10_000 + fl as u16, 4789),
                seq,
                64 + (seq as usize % 200),
            );
            peer.send(&f);
            sent.insert(seq, (fl, f));
        }
    }
    let is_ours = |f: &[u8]| f.len() > 42 && f[12..14] == [0x08, 0x00] && f[23] == 17;
    let seq = |f: &[u8]| u32::from_be_bytes(f[42..46].try_into().unwrap());
    let mut per_queue: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    let deadline = Instant::now() + 5 * SECOND;
    while per_queue.iter().map(Vec::len).sum::<usize>() < sent.len() && Instant::now() < deadline {
        for (q, (rx, _)) in queues.iter_mut().enumerate() {
            let got = rx_collect(rx, &pool, usize::MAX, 64, Duration::from_millis(2), is_ours);
            per_queue[q].extend(got);
        }
    }
    let counts: Vec<usize> = per_queue.iter().map(Vec::len).collect();
    println!("fanout: {counts:?} frames per queue");
    assert_eq!(
        counts.iter().sum::<usize>(),
        sent.len(),
        "frames lost or duplicated"
    );
    assert!(
        counts.iter().all(|&c| c > 0),
        "one queue got nothing: {counts:?}"
    );
    let mut seen = HashSet::new();
    let mut flow_queue = HashMap::new();
    for (q, frames) in per_queue.iter().enumerate() {
        let mut last_per_flow = HashMap::new();
        for f in frames {
            let s = seq(f);
            let (fl, want) = &sent[&s];
            assert_eq!(f, want, "frame {s} differs");
            assert!(seen.insert(s), "frame {s} twice");
            assert_eq!(
                *flow_queue.entry(*fl).or_insert(q),
                q,
                "flow {fl} on both queues"
            );
            if let Some(prev) = last_per_flow.insert(*fl, s) {
                assert!(prev < s, "flow {fl} reordered");
            }
        }
    }
    assert_eq!(port.stats().tp_drops, 0);
    assert_eq!(pool.available(), pool.capacity());
}

/// Fanout by CPU on a two-queue veth: the frames a thread on CPU 0 sends arrive (through the
/// veth's receive on that same CPU) on queue 0 only, and those a thread on CPU 1 sends on
/// queue 1 only — whatever their flows, which would hash over both — each queue in order.
#[test]
fn fanout_by_cpu_gives_each_queue_what_its_cpu_received() {
    if !require_root("afpacket fanout by cpu") {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "needs two CPUs, this machine lets us use {cpus}");
    let p = pair(2);
    let pool = Pool::new(8192);
    let opts = PacketOptions {
        fanout: FanoutBy::Cpu,
        ..PacketOptions::default()
    };
    let mut port = open(&p.a, "pa", 2, &pool, &opts);
    assert_eq!(port.fanout(), Some(FanoutBy::Cpu));
    // `auto` picks it for a device with a receive queue per socket, and hashes beyond that.
    let by = |queues| p.a.run(|| FanoutBy::for_device("pa", queues)).unwrap();
    assert_eq!((by(2), by(3)), (FanoutBy::Cpu, FanoutBy::Hash));
    let mut queues = port.take_queues();
    let peer = RawSock::open_in(&p.b, "pb");
    let per_cpu = 200u32;
    std::thread::scope(|s| {
        for cpu in 0..2u32 {
            let peer = &peer;
            s.spawn(move || {
                pin_to(cpu as usize);
                for k in 0..per_cpu {
                    // 16 flows per CPU: by hash they would spread over both queues.
                    let fl = k % 16;
                    let f = udp4(
                        PA_MAC,
                        PB_MAC,
                        ([10, 1, cpu as u8, 1 + fl as u8], [10, 2, 0, 1]),
                        (10_000 + fl as u16, 4789),
                        cpu << 16 | k,
                        64,
                    );
                    peer.send(&f);
                }
            });
        }
    });
    let is_ours = |f: &[u8]| f.len() > 42 && f[12..14] == [0x08, 0x00] && f[23] == 17;
    let seq = |f: &[u8]| u32::from_be_bytes(f[42..46].try_into().unwrap());
    let mut per_queue: Vec<Vec<u32>> = vec![Vec::new(), Vec::new()];
    let deadline = Instant::now() + 5 * SECOND;
    while per_queue.iter().map(Vec::len).sum::<usize>() < 2 * per_cpu as usize
        && Instant::now() < deadline
    {
        for (q, (rx, _)) in queues.iter_mut().enumerate() {
            let got = rx_collect(rx, &pool, usize::MAX, 64, Duration::from_millis(2), is_ours);
            per_queue[q].extend(got.iter().map(|f| seq(f)));
        }
    }
    for (q, seqs) in per_queue.iter().enumerate() {
        let want: Vec<u32> = (0..per_cpu).map(|k| (q as u32) << 16 | k).collect();
        assert_eq!(
            seqs, &want,
            "queue {q}: not exactly CPU {q}'s frames in order"
        );
    }
    assert_eq!(port.stats().tp_drops, 0);
    assert_eq!(pool.available(), pool.capacity());
}

/// Errors name what is wrong; an oversize frame is a counted drop, and the queue goes on.
#[test]
fn bad_input_is_reported_and_oversize_frames_are_counted_drops() {
    if !require_root("afpacket bad input") {
        return;
    }
    let p = pair(1);
    let pool = Pool::new(1024);
    let opts = PacketOptions::default();
    let try_open = |name: &str, q: u32, o: &PacketOptions| {
        p.a.run(|| PacketPort::open(name, q, &pool, o).map(drop))
            .unwrap()
    };

    let e = try_open("nope0", 1, &opts).unwrap_err();
    assert!(matches!(e, PacketError::NoInterface { .. }), "{e:?}");
    assert!(e.to_string().contains("\"nope0\""), "{e}");
    // `pa` exists only in the namespace, not in the test's own.
    let e = PacketPort::open("pa", 1, &pool, &opts).unwrap_err();
    assert!(e.to_string().contains("\"pa\""), "{e}");

    let e = try_open("pa", 0, &opts).unwrap_err();
    assert!(matches!(e, PacketError::NoQueues { .. }), "{e:?}");
    assert!(e.to_string().contains("\"pa\""), "{e}");

    let bad = PacketOptions {
        block_size: 10_000,
        ..opts.clone()
    };
    let e = try_open("pa", 1, &bad).unwrap_err();
    assert!(e.to_string().contains("block_size = 10000"), "{e}");
    let bad = PacketOptions {
        tx_frames: 3,
        ..opts.clone()
    };
    assert!(matches!(
        try_open("pa", 1, &bad),
        Err(PacketError::BadOption { .. })
    ));

    p.a.ip(&["link", "add", "dn", "type", "veth", "peer", "name", "dn2"])
        .unwrap();
    let e = try_open("dn", 1, &opts).unwrap_err();
    assert!(matches!(e, PacketError::Down { .. }), "{e:?}");
    assert!(e.to_string().contains("\"dn\""), "{e}");

    // A 3000-byte frame: both ends' MTU raised so the veth carries it.
    p.a.ip(&["link", "set", "pa", "mtu", "3000"]).unwrap();
    p.b.ip(&["link", "set", "pb", "mtu", "3000"]).unwrap();
    let mut port = open(&p.a, "pa", 1, &pool, &opts);
    let (mut rx, _tx) = port.take_queues().pop().unwrap();
    let peer = RawSock::open_in(&p.b, "pb");
    let big = marked(PA_MAC, PB_MAC, &[], 1, 3000);
    let after = marked(PA_MAC, PB_MAC, &[], 2, 1514);
    peer.send(&big);
    peer.send(&after);
    let got = rx_collect(&mut rx, &pool, 1, 64, 2 * SECOND, is_marked);
    assert_eq!(got, vec![after], "the frame after the oversize one arrives");
    let s = port.stats();
    assert_eq!(s.oversize, 1, "{s:?}");
    assert!(s.tp_packets >= 2, "{s:?}");
    assert_eq!(pool.available(), pool.capacity());
}

const H1_MAC: [u8; 6] = [0x02, 0, 0, 0, 0xaa, 0x01];
const H2_MAC: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x01];
const VIF_A_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const VIF_B_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn ethtool(ns: &Netns, args: &[&str]) {
    let mut argv = vec!["ethtool"];
    argv.extend_from_slice(args);
    ns.exec(&argv).unwrap_or_else(|e| {
        panic!("{e} (the forwarding test needs ethtool to turn the hosts' offloads off)")
    });
}

/// h1 — router — h2 over veths; in the router's namespace two AF_PACKET ports (one per
/// transmit mode) share one pool and feed a real data plane with one VR (VIF a on port 0, VIF b on port 1, each with
/// its own MAC), run by a worker thread. `ping` and an iperf3 TCP transfer go through it.
///
/// Offloads: the hosts' veths get `tso off gso off` (no 64 KB frames towards the router)
/// and `rx off` (so the hosts verify checksums instead of trusting the veth), while
/// transmit checksum offload stays on, so the hosts' TCP segments reach the router with
/// `CHECKSUM_PARTIAL` and only get a valid checksum because the backend completes it.
#[test]
fn forwards_ping_and_tcp_between_two_hosts() {
    if !require_root("afpacket forwarding") {
        return;
    }
    let h1 = Netns::new("pkt").unwrap();
    let r = Netns::new("pkt").unwrap();
    let h2 = Netns::new("pkt").unwrap();
    for ns in [&h1, &r, &h2] {
        quiet(ns);
    }
    veth((&h1, "h1v"), (&r, "r1"), 1).unwrap();
    veth((&h2, "h2v"), (&r, "r2"), 1).unwrap();
    // The router's namespace must not forward by itself: only the data plane does.
    let fwd = r.exec(&["sysctl", "-n", "net.ipv4.ip_forward"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&fwd.stdout).trim(), "0");
    for (h, dev, mac, addr, gw, gw_mac) in [
        (&h1, "h1v", H1_MAC, "10.0.0.2/24", "10.0.0.1", VIF_A_MAC),
        (&h2, "h2v", H2_MAC, "10.0.1.2/24", "10.0.1.1", VIF_B_MAC),
    ] {
        h.ip(&["link", "set", dev, "address", &mac_str(mac)])
            .unwrap();
        h.ip(&["addr", "add", addr, "dev", dev]).unwrap();
        h.ip(&["route", "add", "default", "via", gw]).unwrap();
        h.ip(&[
            "neigh",
            "add",
            gw,
            "lladdr",
            &mac_str(gw_mac),
            "dev",
            dev,
            "nud",
            "permanent",
        ])
        .unwrap();
        ethtool(h, &["-K", dev, "tso", "off", "gso", "off", "rx", "off"]);
    }

    let pool = Pool::new(8192);
    // One port per transmit mode, so both carry real TCP.
    let ring = PacketOptions {
        tx: TxMode::Ring,
        ..PacketOptions::default()
    };
    let mmsg = PacketOptions {
        tx: TxMode::Sendmmsg,
        ..PacketOptions::default()
    };
    let mut p0 = open(&r, "r1", 1, &pool, &ring);
    let mut p1 = open(&r, "r2", 1, &pool, &mmsg);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 1,
            ports: vec!["r1".into(), "r2".into()],
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
        mac: EthernetAddress(mac),
        mtu: 1500,
        addrs: vec![IfAddr::V4(addr, 24)],
    };
    let a = dp
        .add_vif("blue", vif("a", 0, VIF_A_MAC, Ipv4Addr::new(10, 0, 0, 1)))
        .unwrap();
    let b = dp
        .add_vif("blue", vif("b", 1, VIF_B_MAC, Ipv4Addr::new(10, 0, 1, 1)))
        .unwrap();
    vr.neigh.set(
        a,
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        EthernetAddress(H1_MAC),
    );
    vr.neigh.set(
        b,
        IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2)),
        EthernetAddress(H2_MAC),
    );

    let (rx0, tx0) = p0.take_queues().pop().unwrap();
    let (rx1, tx1) = p1.take_queues().pop().unwrap();
    let rx: Vec<(u16, Box<dyn RxQueue>)> = vec![(0, Box::new(rx0)), (1, Box::new(rx1))];
    let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(tx0), Box::new(tx1)];
    let mut worker = dp.worker(0, rx, tx).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || worker.run(&stop))
    };
    // Stops the worker even when an assertion below fails.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let guard = Stop(stop);

    let ping = h1
        .exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"])
        .unwrap_or_else(|e| panic!("ping through the router failed: {e}"));
    let out = String::from_utf8_lossy(&ping.stdout);
    println!("{}", out.lines().last().unwrap_or(""));
    assert!(out.contains("3 received"), "{out}");

    let mut server = h2
        .command(&["timeout", "30", "iperf3", "-s", "-1", "-B", "10.0.1.2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 is needed for the forwarding test");
    let mut client = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        match h1.exec(&["iperf3", "-c", "10.0.1.2", "-t", "3", "-f", "m"]) {
            Ok(o) => {
                client = Some(o);
                break;
            }
            // The server may not listen yet.
            Err(e) if e.to_string().contains("Connection refused") => continue,
            Err(e) => panic!("iperf3 through the router failed: {e}"),
        }
    }
    let client = client.expect("iperf3 server never listened");
    let out = String::from_utf8_lossy(&client.stdout);
    for l in out
        .lines()
        .filter(|l| l.contains("sender") || l.contains("receiver"))
    {
        println!("{l}");
    }
    assert!(out.contains("receiver"), "{out}");
    assert!(server.wait().unwrap().success(), "iperf3 server failed");

    drop(guard);
    thread.join().unwrap();
    let s = vr.stats();
    let (s0, s1) = (p0.stats(), p1.stats());
    println!(
        "VR: rx {} tx {} drops {:?}",
        s.rx_packets,
        s.tx_packets,
        s.nonzero_drops()
    );
    println!("port r1: {s0:?}\nport r2: {s1:?}");
    assert!(s.tx_packets > 1000, "few packets forwarded: {s:?}");
    assert!(
        s0.csum_completed > 0 && s1.csum_completed > 0,
        "{s0:?} {s1:?}"
    );
    assert_eq!(
        s0.oversize + s1.oversize,
        0,
        "super-frames reached the router"
    );
    drop(dp);
    drop(vr);
    assert_eq!(pool.available(), pool.capacity(), "leaked slots");
}
