//! A rough forwarding rate through AF_XDP on veth (not run by default):
//!
//! ```text
//! cargo test --release -p vrhost-io --test afxdp_rate -- --ignored --nocapture
//! ```
//!
//! Topology of the forwarding test (h1 — router — h2, one queue per veth). An AF_XDP port
//! in h1 generates 64-byte UDP frames toward the VR as fast as its thread can; the router's
//! worker (one thread, pinned to CPU 1 when there is one) forwards them; h2 receives them
//! addressed to a MAC it does not own and drops them at once, so the sink costs little.
//! Reports offered and forwarded packets per second. On veth in copy mode most of the cost
//! is the kernel's (veth, skb, copies), and on a small VM the generator shares the cores.

mod afxdp_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use afxdp_util::{blue_between, mac_of};
use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::{PktVec, Pool};
use vrhost_io::afxdp::{XdpOptions, XdpPort};
use vrhost_lab::{Netns, require_root, veth};
use vrhost_wire::EthernetAddress;

fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is empty; CPU_SET on an index below its size; the
    // affinity call only reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A 60-byte IPv4/UDP frame (64 on the wire with the FCS).
fn frame(src: [u8; 6], dst: [u8; 6], sport: u16) -> Vec<u8> {
    let mut ip = [0u8; 28];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
    ip[16..20].copy_from_slice(&[10, 0, 1, 2]);
    let mut s: u32 = ip[..20]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    ip[20..22].copy_from_slice(&sport.to_be_bytes());
    ip[22..24].copy_from_slice(&9u16.to_be_bytes());
    ip[24..26].copy_from_slice(&26u16.to_be_bytes());
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(&ip);
    f.resize(60, 0);
    f
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn forwarding_rate() {
    if !require_root("afxdp forwarding rate") {
        return;
    }
    let h1 = Netns::new("xdpr").unwrap();
    let r = Netns::new("xdpr").unwrap();
    let h2 = Netns::new("xdpr").unwrap();
    for ns in [&h1, &r, &h2] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
        ns.sysctl("net.ipv6.conf.default.disable_ipv6=1").unwrap();
    }
    veth((&h1, "eth0"), (&r, "p0"), 1).unwrap();
    veth((&r, "p1"), (&h2, "eth0"), 1).unwrap();
    let (mac_a, mac_b) = (
        EthernetAddress([2, 0, 0, 0, 0, 1]),
        EthernetAddress([2, 0, 0, 0, 0, 2]),
    );
    let h1_mac = mac_of(&h1, "eth0");

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
    // Not h2's MAC for VIF b's neighbour: h2 drops the frames as soon as it sees them.
    let (dp, vr) = blue_between(
        &pool,
        (mac_a, EthernetAddress(h1_mac)),
        (mac_b, EthernetAddress([2, 0, 0, 0, 0x99, 0x99])),
    );
    let (rx0, tx0) = p0.take_queues().pop().unwrap();
    let (rx1, tx1) = p1.take_queues().pop().unwrap();
    let mut worker = dp
        .worker(
            0,
            vec![(0, Box::new(rx0)), (1, Box::new(rx1))],
            vec![Box::new(tx0), Box::new(tx1)],
        )
        .unwrap();

    // The generator: its own pool and port in h1 (8192 slots go to its fill ring, the rest
    // are the frames it sends).
    let gpool = Pool::new(16384);
    let mut gport = h1
        .run(|| XdpPort::open("eth0", 1, &gpool, &XdpOptions::default()).unwrap())
        .unwrap();
    let (_grx, mut gtx) = gport.take_queues().pop().unwrap();
    let frames: Vec<Vec<u8>> = (0..256).map(|i| frame(h1_mac, mac_a.0, 1000 + i)).collect();

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let offered = Arc::new(AtomicU64::new(0));
    let fwd = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if cpus > 1 {
                pin(1);
            }
            worker.run(&stop);
        })
    };
    let generator = {
        let (stop, offered, gpool) = (stop.clone(), offered.clone(), gpool.clone());
        std::thread::spawn(move || {
            pin(0);
            let mut v = PktVec::new();
            while !stop.load(Ordering::Relaxed) {
                for f in frames.iter().take(v.remaining_capacity()) {
                    match gpool.alloc_frame(f) {
                        Some(p) => v.push(p),
                        None => break,
                    }
                }
                let n = gtx.tx_burst(&gpool, &mut v);
                gtx.flush(&gpool);
                offered.fetch_add(n as u64, Ordering::Relaxed);
                gpool.free_all(&mut v);
            }
            drop(gtx);
        })
    };

    std::thread::sleep(Duration::from_millis(500));
    let (o0, f0, t0) = (
        offered.load(Ordering::Relaxed),
        dp.port_stats(1).unwrap().tx_packets,
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs(3));
    let (o1, f1, t1) = (
        offered.load(Ordering::Relaxed),
        dp.port_stats(1).unwrap().tx_packets,
        Instant::now(),
    );
    stop.store(true, Ordering::Relaxed);
    generator.join().unwrap();
    fwd.join().unwrap();
    let secs = (t1 - t0).as_secs_f64();
    let mpps = |n: u64| n as f64 / secs / 1e6;
    let st = p0.stats();
    println!(
        "afxdp veth copy mode, 64-byte frames, 1 worker ({} CPUs): offered {:.3} Mpps, \
         forwarded {:.3} Mpps; router p0: rx_dropped {} rx_ring_full {} fill_empty {}; \
         VR drops {}",
        cpus,
        mpps(o1 - o0),
        mpps(f1 - f0),
        st.rx_dropped,
        st.rx_ring_full,
        st.rx_fill_ring_empty_descs,
        vr.stats().total_drops()
    );
    assert!(f1 > f0, "nothing forwarded");
}
