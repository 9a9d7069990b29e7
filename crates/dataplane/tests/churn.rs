//! Adding and removing VRs while traffic runs: the other VRs lose nothing, and nothing a
//! removed VR held is lost to the pool.
//!
//! The threaded test runs a [`Worker`] on its own thread, a feeder pushing numbered frames for
//! VR "steady" into a mem port (retrying while the ring is full, so nothing is lost at the
//! port), a sink draining the egress ports, and the test thread adding and removing other VRs
//! — with VIFs (untagged and VLAN), routes, neighbours and traffic of their own — in a loop.
//! The feeder keeps at most [`WINDOW`] frames in flight (sent but not yet seen by the sink) and
//! the egress ring is big enough for that window plus all the churned VRs' traffic, so a
//! descheduled sink can never fill the ring: any loss would be the data plane's.
//!
//! Every wait is bounded by [`DEADLINE`] and fails loudly; a failing thread raises `abort`
//! so the others stop too.

mod common;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use vrhost_dataplane::port::mem::{self, MemPeer};
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::ring::{Consumer, Producer};
use vrhost_dataplane::{Dataplane, DataplaneConfig, DemuxKey, MIN_FRAME, Pool, VrConfig, Worker};
use vrhost_fib::NextHop;
use vrhost_wire::EthernetAddress;

/// How long any wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(60);
/// Steady frames in flight at most (sent, not yet received by the sink).
const WINDOW: u64 = 256;
/// Egress ring of port 1 (steady's way out, shared with the churned VRs).
const EGRESS_RING: usize = 16384;
/// Frames each churned VR gets after it is added; a quarter of them leave by port 1.
const CHURN_FRAMES: usize = 16;
/// Upper bound on churn iterations, so the churned traffic alone never fills the egress ring.
const MAX_ITERATIONS: usize = (EGRESS_RING - 2 * WINDOW as usize) / (CHURN_FRAMES / 4);

const HOST4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const FAR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const STEADY_IN: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
const STEADY_OUT: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
/// Offset of the sequence number in a steady frame (Ethernet + IPv4 + UDP).
const SEQ_AT: usize = 14 + 20 + 8;

fn churn_in(k: usize) -> EthernetAddress {
    mac(0x40 + k as u8)
}
fn churn_out(k: usize) -> EthernetAddress {
    mac(0x50 + k as u8)
}

/// A VR the way churned and steady VRs are set up: VIF "in" on port 0, "out" on port 1, a
/// route via a resolved neighbour on "out".
fn add_router(dp: &Dataplane, name: &str, mac_in: EthernetAddress, mac_out: EthernetAddress) {
    dp.add_vr(VrConfig::new(name)).unwrap();
    arm_router(dp, name, (0, mac_in), (1, mac_out));
}

fn steady_frame(seq: u64) -> Vec<u8> {
    let l3 = udp4(HOST4, FAR, 64, 1000, 2000, &seq.to_be_bytes());
    eth(STEADY_IN, HOST_MAC, None, 0x0800, &l3)
}

/// Push `frame` into `q`, retrying while the ring (or the pool) is full.
fn send_retry(
    pool: &Pool,
    q: &mut Producer,
    frame: &[u8],
    abort: &AtomicBool,
    t0: Instant,
) -> Result<(), String> {
    loop {
        if let Some(p) = pool.alloc_frame(frame) {
            match q.push(p) {
                Ok(()) => return Ok(()),
                Err(p) => pool.free(p),
            }
        }
        if abort.load(Ordering::Relaxed) {
            return Err("aborted".into());
        }
        if t0.elapsed() > DEADLINE {
            return Err("rx ring stayed full past the deadline".into());
        }
        std::thread::yield_now();
    }
}

struct Rig2 {
    pool: Arc<Pool>,
    dp: Dataplane,
    worker: Worker,
    /// Port 0 queue 0: steady's feeder.
    steady_q: Producer,
    /// Port 0 queue 1: the churned VRs' traffic.
    churn_q: Producer,
    /// Egress of ports 0 and 1.
    tx0: Consumer,
    tx1: Consumer,
    _p1_rx: Vec<Producer>,
}

fn rig2() -> Rig2 {
    let pool = Pool::new(32768);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p0".into(), "p1".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let (mut p0, peer0) = mem::port(2, 1, 1024);
    let (mut p1, peer1) = mem::port(1, 1, EGRESS_RING);
    let rx: Vec<(u16, Box<dyn RxQueue>)> = vec![
        (0, Box::new(p0.rx.remove(0))),
        (0, Box::new(p0.rx.remove(0))),
        (1, Box::new(p1.rx.remove(0))),
    ];
    let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(p0.tx.remove(0)), Box::new(p1.tx.remove(0))];
    let worker = dp.worker(0, rx, tx).unwrap();
    let MemPeer {
        rx: mut rx0,
        tx: mut tx0,
    } = peer0;
    let MemPeer {
        rx: rx1,
        tx: mut tx1,
    } = peer1;
    let churn_q = rx0.pop().unwrap();
    let steady_q = rx0.pop().unwrap();
    Rig2 {
        pool,
        dp,
        worker,
        steady_q,
        churn_q,
        tx0: tx0.pop().unwrap(),
        tx1: tx1.pop().unwrap(),
        _p1_rx: rx1,
    }
}

/// What the sink saw.
#[derive(Debug, Default)]
struct Sunk {
    steady: u64,
    churned: u64,
}

#[test]
fn adding_and_removing_vrs_under_traffic_loses_nothing_of_the_others() {
    let Rig2 {
        pool,
        dp,
        mut worker,
        mut steady_q,
        mut churn_q,
        mut tx0,
        mut tx1,
        _p1_rx,
    } = rig2();
    add_router(&dp, "steady", STEADY_IN, STEADY_OUT);

    let stop_worker = AtomicBool::new(false);
    let stop_feed = AtomicBool::new(false);
    let stop_sink = AtomicBool::new(false);
    let abort = AtomicBool::new(false);
    let received = AtomicU64::new(0);
    let t0 = Instant::now();
    let fail = |e: String| {
        abort.store(true, Ordering::Relaxed);
        e
    };

    let (fed, sunk, iterations, waited, mut worker) = std::thread::scope(|s| {
        let w = s.spawn(|| {
            worker.run(&stop_worker);
            worker
        });
        // Feeder: numbered frames for "steady", at most WINDOW in flight.
        let feeder = s.spawn(|| -> Result<u64, String> {
            let mut seq = 0u64;
            // Keep going until the churn is over, and for at least a few thousand frames.
            while !stop_feed.load(Ordering::Relaxed) || seq < 5000 {
                while seq - received.load(Ordering::Acquire) >= WINDOW {
                    if abort.load(Ordering::Relaxed) {
                        return Err("aborted".into());
                    }
                    if t0.elapsed() > DEADLINE {
                        return Err(fail(format!(
                            "feeder: frame {} still not out after the deadline",
                            received.load(Ordering::Relaxed)
                        )));
                    }
                    std::thread::yield_now();
                }
                send_retry(&pool, &mut steady_q, &steady_frame(seq), &abort, t0)
                    .map_err(|e| fail(format!("feeder: {e}")))?;
                seq += 1;
            }
            Ok(seq)
        });
        // Sink: drain both egress ports; steady's frames must come in order, intact.
        let sink = s.spawn(|| -> Result<Sunk, String> {
            let mut sunk = Sunk::default();
            let drain = |c: &mut Consumer, sunk: &mut Sunk| -> Result<(), String> {
                while let Some(p) = c.pop() {
                    let f = pool.frame(&p);
                    if f[6..12] == STEADY_OUT.0 {
                        let seq = u64::from_be_bytes(f[SEQ_AT..SEQ_AT + 8].try_into().unwrap());
                        let ok = seq == sunk.steady
                            // 50 bytes, padded to the shortest frame with zeros.
                            && f.len() == usize::from(MIN_FRAME)
                            && f[SEQ_AT + 8..].iter().all(|&b| b == 0)
                            && f[..6] == NBR_MAC.0
                            && f[14 + 8] == 63;
                        if !ok {
                            let msg = format!(
                                "sink: expected steady frame {}, got {seq} ({} bytes)",
                                sunk.steady,
                                f.len()
                            );
                            pool.free(p);
                            return Err(fail(msg));
                        }
                        sunk.steady += 1;
                        received.store(sunk.steady, Ordering::Release);
                    } else {
                        sunk.churned += 1;
                    }
                    pool.free(p);
                }
                Ok(())
            };
            loop {
                let done = stop_sink.load(Ordering::Acquire);
                drain(&mut tx1, &mut sunk)?;
                drain(&mut tx0, &mut sunk)?;
                if done || abort.load(Ordering::Relaxed) {
                    return Ok(sunk);
                }
                std::thread::yield_now();
            }
        });

        // The churn: VRs c0..c2 come and go, each with its own traffic.
        let mut churn = || -> Result<usize, String> {
            let mut present = [false; 3];
            let mut i = 0;
            while i < MAX_ITERATIONS
                && (i < 60 || t0.elapsed() < Duration::from_millis(1500))
                && !abort.load(Ordering::Relaxed)
            {
                let k = i % 3;
                let name = format!("c{k}");
                if present[k] {
                    dp.remove_vr(&name).map_err(|e| e.to_string())?;
                } else {
                    add_router(&dp, &name, churn_in(k), churn_out(k));
                    // A VLAN VIF too, and another neighbour and route through it.
                    let mut v = vif("tagged", 0, churn_in(k), vec![]);
                    v.vlan = Some(100 + k as u16);
                    v.key = DemuxKey::Vlan;
                    let vr = dp.vr(&name).unwrap();
                    let id = dp.add_vif(&name, v).map_err(|e| e.to_string())?;
                    let nh = Ipv4Addr::new(10, 9, 9, 9);
                    vr.fib4
                        .insert(
                            "203.0.113.0/24".parse().unwrap(),
                            NextHop::Via {
                                addr: nh.into(),
                                ifindex: u32::from(id),
                            },
                        )
                        .map_err(|e| e.to_string())?;
                    vr.neigh.set(id, nh.into(), NBR_MAC);
                    for j in 0..CHURN_FRAMES {
                        // Forwarded out of port 1, out of the VLAN VIF, punted (ARP to
                        // its MAC), or an ICMP error back out of port 0.
                        let f = match j % 4 {
                            0 => eth(
                                churn_in(k),
                                HOST_MAC,
                                None,
                                0x0800,
                                &udp4(HOST4, FAR, 64, 1, 2, b"churn"),
                            ),
                            1 => eth(
                                churn_in(k),
                                HOST_MAC,
                                Some(100 + k as u16),
                                0x0800,
                                &udp4(HOST4, Ipv4Addr::new(203, 0, 113, 1), 64, 1, 2, b"c"),
                            ),
                            2 => eth(churn_in(k), HOST_MAC, None, 0x0806, &[0u8; 28]),
                            _ => eth(
                                churn_in(k),
                                HOST_MAC,
                                None,
                                0x0800,
                                &udp4(HOST4, Ipv4Addr::new(8, 8, 8, 8), 64, 1, 2, b"x"),
                            ),
                        };
                        send_retry(&pool, &mut churn_q, &f, &abort, t0)
                            .map_err(|e| format!("churn: {e}"))?;
                    }
                }
                present[k] = !present[k];
                i += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
            for (k, p) in present.iter().enumerate() {
                if *p {
                    dp.remove_vr(&format!("c{k}")).map_err(|e| e.to_string())?;
                }
            }
            Ok(i)
        };
        let iterations = churn().map_err(fail);
        stop_feed.store(true, Ordering::Relaxed);
        let fed = feeder.join().unwrap();
        // Wait for the sink to see every steady frame.
        let mut waited = Ok(());
        if let Ok(n) = fed {
            while received.load(Ordering::Acquire) < n && !abort.load(Ordering::Relaxed) {
                if t0.elapsed() > DEADLINE {
                    let got = received.load(Ordering::Relaxed);
                    waited = Err(fail(format!("sink: only {got} of {n} steady frames out")));
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        stop_sink.store(true, Ordering::Release);
        let sunk = sink.join().unwrap();
        stop_worker.store(true, Ordering::Relaxed);
        let worker = w.join().unwrap();
        (fed, sunk, iterations, waited, worker)
    });
    // The first failure, not the "aborted" of the threads it stopped.
    let errors: Vec<&String> = [
        iterations.as_ref().err(),
        fed.as_ref().err(),
        sunk.as_ref().err(),
        waited.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    .filter(|e| !e.ends_with("aborted"))
    .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let (iterations, fed, sunk) = (iterations.unwrap(), fed.unwrap(), sunk.unwrap());
    assert_eq!(
        sunk.steady, fed,
        "steady: {fed} frames fed, {} arrived (in order)",
        sunk.steady
    );
    assert!(iterations >= 60, "only {iterations} churn iterations");
    assert!(sunk.churned > 0, "no churned VR forwarded anything");

    let s = dp.vr("steady").unwrap().stats();
    assert_eq!(s.nonzero_drops(), vec![], "steady dropped: {s:?}");
    assert_eq!((s.rx_packets, s.tx_packets, s.punted), (fed, fed, 0));
    assert_eq!(dp.vrs().len(), 1);

    // Let the worker settle (retire the last removed VRs' rings), then count the slots.
    worker.poll();
    while worker.poll() > 0 {}
    for c in [&mut tx0, &mut tx1] {
        while let Some(p) = c.pop() {
            pool.free(p);
        }
    }
    assert_eq!(dp.vr("steady").unwrap().punt_len(), 0);
    assert_eq!(
        pool.available(),
        pool.capacity(),
        "slots lost ({} in use) after {iterations} add/remove iterations",
        pool.capacity() - pool.available()
    );
    eprintln!(
        "churn: {iterations} iterations, {fed} steady frames, {} churned frames out",
        sunk.churned
    );
}

/// A VR removed while packets wait in its ingress ring: they all go back to the pool, and
/// the VR's other packets (already forwarded) are unaffected.
#[test]
fn removing_a_vr_returns_its_queued_packets_to_the_pool() {
    let pool = Pool::new(4096);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p0".into(), "p1".into()],
            ..Default::default()
        },
    )
    .unwrap();
    // Queue 0 of port 0 carries x's frames, queue 1 y's. A full burst of y's puts the
    // worker under pressure, so x, with a backlog shorter than the coalescing threshold,
    // waits a poll in its ingress ring instead of running a tiny vector.
    let (mut p0, mut peer0) = mem::port(2, 1, 1024);
    let (mut p1, mut peer1) = mem::port(1, 1, 1024);
    let mut rx: Vec<(u16, Box<dyn RxQueue>)> = Vec::new();
    for q in p0.rx.drain(..) {
        rx.push((0, Box::new(q)));
    }
    rx.push((1, Box::new(p1.rx.remove(0))));
    let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(p0.tx.remove(0)), Box::new(p1.tx.remove(0))];
    let mut worker = dp.worker(0, rx, tx).unwrap();
    add_router(&dp, "x", STEADY_IN, STEADY_OUT);
    add_router(&dp, "y", churn_in(0), churn_out(0));
    let x = dp.vr("x").unwrap();
    let y = dp.vr("y").unwrap();
    worker.poll();
    for seq in 0..20 {
        assert!(peer0.send(&pool, 0, &steady_frame(seq)));
    }
    let yf = eth(
        churn_in(0),
        HOST_MAC,
        None,
        0x0800,
        &udp4(HOST4, FAR, 64, 1, 2, b"y"),
    );
    for _ in 0..256 {
        assert!(peer0.send(&pool, 1, &yf));
    }
    worker.poll();
    // 276 admitted; y's 256 forwarded; x's 20 wait.
    let sx = x.stats();
    assert_eq!((sx.rx_packets, sx.tx_packets, sx.total_drops()), (20, 0, 0));
    assert_eq!(y.stats().tx_packets, 256);
    assert_eq!(pool.capacity() - pool.available(), 20 + 256);
    let out = peer1.recv_all(&pool);
    assert_eq!(out.len(), 256, "y's frames leave by port 1");
    assert!(out.iter().all(|f| f[6..12] == churn_out(0).0));
    dp.remove_vr("x").unwrap();
    worker.poll();
    assert!(
        peer1.recv_all(&pool).is_empty(),
        "x's queued frames were sent"
    );
    assert!(peer0.recv_all(&pool).is_empty());
    assert_eq!(y.stats().total_drops(), 0);
    assert_eq!(
        pool.available(),
        pool.capacity(),
        "x's queued packets leaked"
    );
}

/// Two workers: VR "x" is owned by worker 1, its packets arrive on worker 0 and wait in the
/// ring between them. Removing x frees them whichever worker notices first — or, when the
/// owner never took the ring, when the VR itself goes.
#[test]
fn removing_a_vr_frees_packets_queued_between_workers() {
    for order in ["receiver-first", "owner-first", "owner-never-polled"] {
        let pool = Pool::new(4096);
        let dp = Dataplane::new(
            pool.clone(),
            DataplaneConfig {
                workers: 2,
                ports: vec!["p0".into(), "p1".into()],
                ..Default::default()
            },
        )
        .unwrap();
        let (mut p0, mut peer0) = mem::port(2, 2, 1024);
        let (mut p1, mut peer1) = mem::port(2, 2, 1024);
        let mut ws: Vec<Worker> = (0..2)
            .map(|w| {
                let rx: Vec<(u16, Box<dyn RxQueue>)> = vec![
                    (0, Box::new(p0.rx.remove(0))),
                    (1, Box::new(p1.rx.remove(0))),
                ];
                let tx: Vec<Box<dyn TxQueue>> =
                    vec![Box::new(p0.tx.remove(0)), Box::new(p1.tx.remove(0))];
                dp.worker(w, rx, tx).unwrap()
            })
            .collect();
        if order != "owner-never-polled" {
            ws[1].poll();
        }
        {
            let mut cfg = VrConfig::new("x");
            cfg.worker = Some(1);
            dp.add_vr(cfg).unwrap();
            dp.add_vif("x", vif("in", 0, STEADY_IN, vec![])).unwrap();
        }
        if order != "owner-never-polled" {
            ws[1].poll();
        }
        for seq in 0..500 {
            assert!(peer0.send(&pool, 0, &steady_frame(seq)));
        }
        while ws[0].poll() > 0 {}
        assert_eq!(dp.vr("x").unwrap().stats().rx_packets, 500);
        assert_eq!(pool.capacity() - pool.available(), 500, "{order}");
        dp.remove_vr("x").unwrap();
        match order {
            "receiver-first" => {
                ws[0].poll();
                ws[1].poll();
            }
            "owner-first" => {
                ws[1].poll();
                assert_eq!(
                    pool.available(),
                    pool.capacity(),
                    "{order}: drained at once"
                );
                ws[0].poll();
                ws[1].poll();
            }
            _ => {
                ws[0].poll();
            }
        }
        assert!(dp.vr("x").is_none());
        assert_eq!(
            pool.available(),
            pool.capacity(),
            "{order}: queued packets leaked"
        );
        assert!(peer0.recv_all(&pool).is_empty() && peer1.recv_all(&pool).is_empty());
    }
}
