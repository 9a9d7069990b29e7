//! Two workers: each polls one rx queue of every port and owns one VR; a VR's packets
//! received by the other worker cross to the owner through the VR's ingress ring.
//!
//! VR "a" is owned by worker 0, "b" by worker 1. Both have a VIF on each of two ports (same
//! addresses, different MACs) and forward port 0 → port 1 and port 1 → port 0. Frames for both
//! VRs arrive on both rx queues of both ports, each carrying (VR, port, queue, sequence) in its
//! payload. Every frame must leave exactly once, by the transmit queue of its VR's owner
//! (`peer.tx[owner]`), in order per input queue, and the per-VR, per-VIF and per-port
//! counters, summed over the workers, must match what went in and came out.

mod common;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use vrhost_dataplane::port::mem::MemPeer;
use vrhost_dataplane::{Dataplane, IfAddr, Pool, RunVrs, VrConfig};
use vrhost_fib::NextHop;
use vrhost_wire::EthernetAddress;

const RING: usize = 4096;
const NAMES: [&str; 2] = ["a", "b"];
const NBR0: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xbb, 0x00]);
const NBR1: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xbb, 0x01]);

/// VR `vr`'s VIF MAC on `port`.
fn vif_mac(vr: usize, port: usize) -> EthernetAddress {
    mac(0x0a + vr as u8 + 0x10 * port as u8)
}

fn two() -> Multi {
    // Worker w polls queue w of both ports and transmits on its own tx queue of each.
    let Multi {
        pool,
        dp,
        workers,
        peers,
    } = Multi::new(2, &["p0", "p1"], 16384, RING, RunVrs::default());
    for (v, name) in NAMES.iter().enumerate() {
        let mut cfg = VrConfig::new(*name);
        cfg.worker = Some(v);
        // Room for everything one worker may queue for the other while it is descheduled.
        cfg.ingress_ring = RING;
        let vr = dp.add_vr(cfg).unwrap();
        assert_eq!(vr.owner(), v);
        let addrs = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1)];
        for (p, a) in addrs.into_iter().enumerate() {
            let c = vif(
                ["p0", "p1"][p],
                p as u16,
                vif_mac(v, p),
                vec![IfAddr::V4(a, 24)],
            );
            dp.add_vif(name, c).unwrap();
        }
        let via = |a: Ipv4Addr, ifindex| NextHop::Via {
            addr: a.into(),
            ifindex,
        };
        let nh0 = Ipv4Addr::new(10, 0, 0, 2);
        let nh1 = Ipv4Addr::new(10, 0, 1, 2);
        vr.fib4
            .insert("198.51.100.0/24".parse().unwrap(), via(nh1, 1))
            .unwrap();
        vr.fib4
            .insert("192.0.2.0/24".parse().unwrap(), via(nh0, 0))
            .unwrap();
        vr.neigh.set(0, nh0.into(), NBR0);
        vr.neigh.set(1, nh1.into(), NBR1);
    }
    Multi {
        pool,
        dp,
        workers,
        peers,
    }
}

/// Where a frame came from: (VR, port, queue, sequence).
type Tag = (u8, u8, u8, u32);

fn frame(t: Tag) -> Vec<u8> {
    let (vr, port, q, seq) = t;
    let dst = if port == 0 {
        Ipv4Addr::new(198, 51, 100, 7)
    } else {
        Ipv4Addr::new(192, 0, 2, 7)
    };
    let mut payload = vec![vr, port, q];
    payload.extend_from_slice(&seq.to_be_bytes());
    let l3 = udp4(Ipv4Addr::new(172, 16, 0, 1), dst, 64, 1000, 2000, &payload);
    eth(
        vif_mac(usize::from(vr), usize::from(port)),
        HOST_MAC,
        None,
        0x0800,
        &l3,
    )
}

fn tag_of(f: &[u8]) -> Tag {
    let t = &f[TAG_AT..TAG_AT + 7];
    (
        t[0],
        t[1],
        t[2],
        u32::from_be_bytes(t[3..7].try_into().unwrap()),
    )
}

/// Checks frames as they leave and remembers what was seen.
#[derive(Default)]
struct Seen {
    /// Next expected sequence per (VR, in port, queue).
    next: HashMap<(u8, u8, u8), u32>,
    /// Frames per VR.
    per_vr: [u64; 2],
    /// Frames per egress port.
    per_port: [u64; 2],
}

impl Seen {
    /// Take everything off every tx queue; check each frame left by its VR's owner's queue,
    /// by the other port, rewritten, once and in order.
    fn drain(&mut self, pool: &Pool, peers: &mut [MemPeer]) -> u64 {
        let mut n = 0;
        for (port, peer) in peers.iter_mut().enumerate() {
            for (w, c) in peer.tx.iter_mut().enumerate() {
                while let Some(p) = c.pop() {
                    let f = pool.frame(&p).to_vec();
                    pool.free(p);
                    let (vr, in_port, q, seq) = tag_of(&f);
                    let v = usize::from(vr);
                    assert_eq!(
                        w, v,
                        "frame of VR {} left by worker {w}'s queue (owner {v})",
                        NAMES[v]
                    );
                    assert_eq!(usize::from(in_port), 1 - port, "wrong egress port");
                    assert_eq!(EthernetAddress::from_bytes(&f[6..12]), vif_mac(v, port));
                    let nbr = if port == 0 { NBR0 } else { NBR1 };
                    assert_eq!(EthernetAddress::from_bytes(&f[..6]), nbr);
                    assert_eq!(f[14 + 8], 63, "TTL");
                    let next = self.next.entry((vr, in_port, q)).or_default();
                    assert_eq!(
                        seq, *next,
                        "VR {} port {in_port} queue {q}: out of order or duplicate",
                        NAMES[v]
                    );
                    *next += 1;
                    self.per_vr[v] += 1;
                    self.per_port[port] += 1;
                    n += 1;
                }
            }
        }
        n
    }
}

/// Counters summed over both workers must match what was sent (`n` frames per VR, port
/// and queue) and what left.
fn check_counters(dp: &Dataplane, n: u64, seen: &Seen) {
    for (v, name) in NAMES.iter().enumerate() {
        let s = dp.vr(name).unwrap().stats();
        assert_eq!(s.nonzero_drops(), vec![], "{name}");
        assert_eq!((s.rx_packets, s.tx_packets), (4 * n, 4 * n), "{name}");
        assert_eq!(s.tx_packets, seen.per_vr[v]);
        // 49-byte frames in, each out padded to 60 bytes.
        assert_eq!(frame((0, 0, 0, 0)).len(), 49);
        assert_eq!(s.rx_bytes, s.rx_packets * 49, "{name}: bytes in");
        assert_eq!(s.tx_bytes, s.tx_packets * 60, "{name}: bytes out");
        for vif in dp.vifs(name).unwrap() {
            let vs = vif.stats();
            assert_eq!((vs.rx_packets, vs.tx_packets), (2 * n, 2 * n), "{name}");
        }
    }
    for p in 0..2u16 {
        let ps = dp.port_stats(p).unwrap();
        assert_eq!(ps.rx_packets, 4 * n, "port {p} rx");
        assert_eq!(ps.tx_packets, 4 * n, "port {p} tx");
        assert_eq!(ps.tx_packets, seen.per_port[usize::from(p)]);
        assert_eq!((ps.rx_dropped, ps.tx_full), (0, 0));
    }
    assert!(dp.demux_drops().iter().all(|d| *d == 0));
}

/// Interleaved: a, b, a, b … on every queue of every port.
fn feed(pool: &Pool, peers: &mut [MemPeer], n: u32) {
    for seq in 0..n {
        for port in 0..2u8 {
            for q in 0..2u8 {
                for vr in 0..2u8 {
                    let f = frame((vr, port, q, seq));
                    assert!(peers[usize::from(port)].send(pool, usize::from(q), &f));
                }
            }
        }
    }
}

#[test]
fn each_vr_is_forwarded_by_its_owner_only() {
    let mut t = two();
    let n = 300u32;
    feed(&t.pool, &mut t.peers, n);
    let total = 8 * u64::from(n);
    assert_eq!(t.pool.capacity() - t.pool.available(), total as usize);

    // Worker 0 alone: it forwards a's frames and queues b's for worker 1.
    t.workers[0].poll();
    let mut seen = Seen::default();
    let first = seen.drain(&t.pool, &mut t.peers);
    // Two bursts (2 × 256) from each of its two queues, half of each for a: full bursts
    // whose VRs have less than a poll's budget (2 vectors) queued are polled again, up to a
    // burst per receive queue. Then two vectors of a's.
    assert_eq!((first, seen.per_vr), (512, [512, 0]));
    let b = t.dp.vr("b").unwrap();
    assert_eq!((b.stats().rx_packets, b.stats().tx_packets), (512, 0));
    assert_eq!(
        t.pool.capacity() - t.pool.available(),
        total as usize - 512,
        "nothing dropped"
    );

    // Then both, alternating, until nothing moves.
    loop {
        let work = t.workers[1].poll() + t.workers[0].poll();
        seen.drain(&t.pool, &mut t.peers);
        if work == 0 {
            break;
        }
    }
    assert_eq!(seen.per_vr, [4 * u64::from(n); 2]);
    for vr in 0..2u8 {
        for port in 0..2u8 {
            for q in 0..2u8 {
                assert_eq!(seen.next[&(vr, port, q)], n);
            }
        }
    }
    check_counters(&t.dp, u64::from(n), &seen);
    assert_eq!(t.pool.available(), t.pool.capacity());
}

#[test]
fn two_worker_threads_forward_a_burst_exactly_once() {
    let Multi {
        pool,
        dp,
        workers,
        mut peers,
    } = two();
    let n = 1000u32;
    let total = 8 * u64::from(n);
    let stop = AtomicBool::new(false);
    let mut seen = Seen::default();
    let got = std::thread::scope(|s| {
        for mut w in workers {
            let stop = &stop;
            s.spawn(move || w.run(stop));
        }
        // The rings hold the whole burst, so feeding never waits for the workers.
        feed(&pool, &mut peers, n);
        let t0 = Instant::now();
        let mut got = 0;
        while got < total && t0.elapsed() < Duration::from_secs(60) {
            let k = seen.drain(&pool, &mut peers);
            got += k;
            if k == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        stop.store(true, Ordering::Relaxed);
        got
    });
    assert_eq!(got, total, "only {got} of {total} frames out after 60 s");
    assert_eq!(
        seen.drain(&pool, &mut peers),
        0,
        "duplicates after the burst"
    );
    check_counters(&dp, u64::from(n), &seen);
    assert_eq!(pool.available(), pool.capacity());
}

/// Frames that wait in a VR's ingress ring while their ingress VIF is removed are counted
/// `vif-gone` (however they interleave with another VIF's frames in the VR's vector), the
/// other VIF's frames are counted on it, and every frame is accounted for.
///
/// b runs on worker 1, so what worker 0 receives for b waits in b's ring until worker 1
/// polls: two rounds of 50 frames on each port leave runs of p0, p1, p0, p1 there.
#[test]
fn frames_of_a_vif_removed_while_they_wait_are_counted_vif_gone() {
    let mut t = two();
    for round in 0..2u32 {
        for seq in round * 50..(round + 1) * 50 {
            for port in 0..2u8 {
                let f = frame((1, port, 0, seq));
                assert!(t.peers[usize::from(port)].send(&t.pool, 0, &f));
            }
        }
        t.workers[0].poll();
    }
    let b = t.dp.vr("b").unwrap();
    assert_eq!((b.stats().rx_packets, b.stats().tx_packets), (200, 0));
    let p1 = t.dp.vif("b", "p1").unwrap();
    t.dp.remove_vif("b", "p0").unwrap();
    while t.workers[1].poll() > 0 {}
    let s = b.stats();
    // p0's frames: their VIF is gone. p1's frames were routed out of p0: no VIF to leave by.
    assert_eq!(
        s.nonzero_drops(),
        vec![("vif-gone", 100), ("no-vif", 100)],
        "{s:?}"
    );
    assert_eq!(s.tx_packets, 0);
    assert_eq!(
        p1.stats().rx_packets,
        100,
        "p1's frames counted on p1 alone"
    );
    let mut seen = Seen::default();
    assert_eq!(seen.drain(&t.pool, &mut t.peers), 0);
    assert_eq!(t.pool.available(), t.pool.capacity(), "every slot back");
}
