//! Which transmit path is fastest here: AF_PACKET's tx ring, its `sendmmsg`, or the XDP
//! transmit path (`vrhost_io::xdptx`). A measurement, not a check, so it is ignored by
//! default; run it with
//!
//! ```text
//! cargo test --release -p vrhost-io --test afpacket_bench -- --ignored --nocapture
//! ```
//!
//! One thread pinned to one CPU sends 60-byte frames (64 on the wire with the FCS) in
//! bursts of 256 on one end of a veth pair, rounds alternating between the modes (5 rounds
//! of 2 s each; `AFPACKET_BENCH_ROUNDS` and `AFPACKET_BENCH_SECS` change that). The far end
//! has an XDP program returning `XDP_PASS` (what lets a veth take XDP-transmitted frames;
//! it is there for every path, so each pays the same far-end work) and no listener: its
//! kernel drops the frames (unknown EtherType) in the softirq that the send itself runs on
//! the same CPU, so the figure is what one core achieves sending, including the veth's
//! delivery. Frames per second taken by `tx_burst` are checked against the far end's
//! receive counter.

mod afpacket_util;

use std::time::{Duration, Instant};

use afpacket_util::*;
use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::{PktVec, Pool, VECTOR};
use vrhost_io::afpacket::{PacketOptions, PacketPort, TxMode};
use vrhost_io::xdptx::XdpTx;
use vrhost_lab::{Netns, require_root};

/// Frames received by `ifname` in `ns`, from the namespace's `/proc/net/dev`.
fn rx_packets(ns: &Netns, ifname: &str) -> u64 {
    let out = ns.exec(&["cat", "/proc/net/dev"]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{ifname}:")))
        .unwrap_or_else(|| panic!("{ifname} not in /proc/net/dev"));
    let fields: Vec<&str> = line.split(':').nth(1).unwrap().split_whitespace().collect();
    fields[1].parse().unwrap()
}

/// CPU time this thread has used (user and system, softirqs it ran included).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for writes.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

struct Round {
    /// Frames per wall-clock second taken by `tx_burst`.
    taken: f64,
    /// Frames per wall-clock second counted by the far end.
    delivered: f64,
    /// Frames per second left in the vector (tx-full).
    refused: f64,
    /// Delivered frames per second of this thread's CPU time: steadier than wall-clock
    /// rates when other work shares the machine.
    per_cpu: f64,
}

/// A transmit path.
#[derive(Clone, Copy, Debug)]
enum Path {
    Packet(TxMode),
    Xdp,
}

fn round(path: Path, secs: u64) -> Round {
    let p = pair(1);
    let _pass = pass_program(&p.b, "pb");
    let pool = Pool::new(4096);
    let frame = marked(PB_MAC, PA_MAC, &[], 0, 60);
    let before = rx_packets(&p.b, "pb");
    let send = |tx: &mut dyn TxQueue| {
        let (mut taken, mut refused) = (0u64, 0u64);
        let mut v = PktVec::new();
        let c0 = thread_cpu();
        let t0 = Instant::now();
        let dur = Duration::from_secs(secs);
        while t0.elapsed() < dur {
            while v.len() < VECTOR {
                v.push(pool.alloc_frame(&frame).unwrap());
            }
            taken += tx.tx_burst(&pool, &mut v) as u64;
            tx.flush(&pool);
            refused += v.len() as u64;
            pool.free_all(&mut v);
        }
        (taken, refused, t0.elapsed(), thread_cpu() - c0)
    };
    let (taken, refused, el, cpu) = match path {
        Path::Packet(mode) => {
            let opts = PacketOptions {
                tx: mode,
                ..PacketOptions::default()
            };
            let mut port =
                p.a.run(|| PacketPort::open("pa", 1, &pool, &opts))
                    .unwrap()
                    .unwrap();
            let (_rx, mut tx) = port.take_queues().pop().unwrap();
            send(&mut tx)
        }
        // XDP transmit runs in the interface's namespace: send from a thread there.
        Path::Xdp => {
            p.a.run(|| {
                pin_to(1);
                let mut tx = XdpTx::open("pa").unwrap_or_else(|e| panic!("{e}"));
                send(&mut tx)
            })
            .unwrap()
        }
    };
    let (el, cpu) = (el.as_secs_f64(), cpu.as_secs_f64());
    // Let the last frames land before reading the far end's counter.
    std::thread::sleep(Duration::from_millis(100));
    let delivered = rx_packets(&p.b, "pb") - before;
    assert_eq!(pool.available(), pool.capacity());
    Round {
        taken: taken as f64 / el,
        delivered: delivered as f64 / el,
        refused: refused as f64 / el,
        per_cpu: delivered as f64 / cpu,
    }
}

#[test]
#[ignore = "a measurement; run with --ignored --nocapture"]
fn transmit_paths_frames_per_second() {
    if !require_root("afpacket tx bench") {
        return;
    }
    pin_to(1);
    let mut best = Vec::new();
    for path in [
        Path::Packet(TxMode::Ring),
        Path::Packet(TxMode::Sendmmsg),
        Path::Xdp,
    ] {
        best.push((path, Vec::new()));
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, secs) = (
        env("AFPACKET_BENCH_ROUNDS", 5),
        env("AFPACKET_BENCH_SECS", 2),
    );
    for _ in 0..n {
        for (path, rounds) in &mut best {
            let r = round(*path, secs);
            println!(
                "{path:?}: taken {:.3} Mfps, delivered {:.3} Mfps ({:.3} M per CPU-second), \
                 refused {:.3} Mfps",
                r.taken / 1e6,
                r.delivered / 1e6,
                r.per_cpu / 1e6,
                r.refused / 1e6
            );
            rounds.push((r.delivered, r.per_cpu));
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (path, rounds) in best {
        println!(
            "{path:?}: median {:.3} Mfps delivered, {:.3} M per CPU-second, over {} rounds",
            median(rounds.iter().map(|r| r.0).collect()) / 1e6,
            median(rounds.iter().map(|r| r.1).collect()) / 1e6,
            rounds.len()
        );
    }
}
