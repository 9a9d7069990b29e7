//! The generator and the sink on one core, into and out of an in-memory ring.
//!
//! `cargo bench -p vrhost-traffic --bench gen` prints frames per second as Melem/s (= Mpps
//! on one core: everything here runs on the bench's thread, timed by its CPU time — see
//! [`cpu_time`]). Groups:
//!
//! * `gen/*` — a generator step (256 frames) into a mem ring, then a consumer that moves the
//!   ring's frames back to the generator's recycle ring (`recycle`) or frees them to the
//!   pool (`pool`): the generator's cost plus two ring bursts per vector.
//! * `loop/*` — the same with a [`Sink`] as the consumer (parse, per-stream counters,
//!   latency histogram): generator + sink per frame.
//! * `sink/*` — the sink alone, fed the same 256 frames again and again with their
//!   sequence numbers advanced in place.
//!
//! Before them, a real-clock check of the pacer: 2 Mpps asked for 0.5 s on the monotonic
//! clock. It prints the achieved rate, which on a shared machine falls short by what
//! preemption costs (counted as `missed`), and stops the bench if sent + missed is more than
//! 1 % off the asked rate (the exact tests are the stepped-clock unit tests).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group};
use vrhost_dataplane::ring::{Consumer, Producer, ring};
use vrhost_dataplane::{PktVec, Pool, VECTOR};
use vrhost_traffic::mem::{RingRx, RingTx, loopback};
use vrhost_traffic::{
    FrameSize, Frames, GenConfig, Generator, Rate, Sink, SinkConfig, Stream, clock::monotonic_ns,
    signature,
};
use vrhost_wire::EthernetAddress;

/// This thread's CPU time. Benches are timed by it, not by the wall clock: "Mpps per core"
/// is frames per second of CPU, and on a shared two-core machine the wall clock also counts
/// the time other processes held the core (cache interference from them still counts).
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Run `f` `iters` times; return the CPU time it took.
fn on_cpu(iters: u64, mut f: impl FnMut()) -> Duration {
    let t = cpu_time();
    for _ in 0..iters {
        f();
    }
    cpu_time() - t
}

fn v4(id: u32, flows: u32) -> Stream {
    let mut s = Stream::new(
        id,
        EthernetAddress([2, 0, 0, 0, 0, 1]),
        EthernetAddress([2, 0, 0, 0, 0, 2]),
        IpAddr::from([10, 0, 0, 1]),
        IpAddr::from([10, 1, 0, 1]),
    );
    s.flows.dst.count = flows;
    s
}

fn v6(id: u32) -> Stream {
    Stream::new(
        id,
        EthernetAddress([2, 0, 0, 0, 0, 1]),
        EthernetAddress([2, 0, 0, 0, 0, 2]),
        "2001:db8::1".parse().unwrap(),
        "2001:db8:1::1".parse().unwrap(),
    )
}

/// A generator of `streams` into an 8192-frame ring; with `recycle`, its recycle ring's
/// producer.
fn setup(
    pool: &Arc<Pool>,
    streams: &[Stream],
    recycle: bool,
) -> (Generator<RingTx>, RingRx, Option<Producer>) {
    let (tx, rx) = loopback(8192);
    let g = Generator::new(pool.clone(), Box::new(tx), streams, GenConfig::default()).unwrap();
    if recycle {
        let (p, c): (Producer, Consumer) = ring(8192);
        (g.with_recycle(c), rx, Some(p))
    } else {
        (g, rx, None)
    }
}

fn bench_gen(c: &mut Criterion) {
    let mut grp = c.benchmark_group("gen");
    grp.throughput(Throughput::Elements(VECTOR as u64));
    grp.sample_size(20).measurement_time(Duration::from_secs(3));
    let cases: Vec<(&str, Vec<Stream>, bool)> = vec![
        ("64B/1flow/recycle", vec![v4(0, 1)], true),
        ("64B/1flow/pool", vec![v4(0, 1)], false),
        ("64B/1000flows/recycle", vec![v4(0, 1000)], true),
        (
            "64B/16streams/recycle",
            (0..16).map(|i| v4(i, 1)).collect(),
            true,
        ),
        ("84B-ipv6/recycle", vec![v6(0)], true),
        (
            "1518B/recycle",
            vec![{
                let mut s = v4(0, 1);
                s.size = FrameSize::Fixed(1518);
                s
            }],
            true,
        ),
        (
            "imix/recycle",
            vec![{
                let mut s = v4(0, 1);
                s.size = FrameSize::Imix;
                s
            }],
            true,
        ),
    ];
    for (name, streams, recycle) in cases {
        let pool = Pool::new(16384);
        let (mut g, mut rx, mut back) = setup(&pool, &streams, recycle);
        let mut v = PktVec::new();
        // Every step builds a vector per stream (unlimited rate).
        grp.throughput(Throughput::Elements((VECTOR * streams.len()) as u64));
        grp.bench_function(name, |b| {
            b.iter_custom(|iters| {
                on_cpu(iters, || {
                    g.step();
                    while rx.0.pop_burst(&mut v, VECTOR) > 0 {
                        if let Some(p) = &mut back {
                            p.push_burst(&mut v);
                        }
                        pool.free_all(&mut v);
                    }
                })
            })
        });
        let st = g.stats();
        assert_eq!((st.tx_full(), st.no_buffer), (0, 0), "{name}");
    }
    grp.finish();
}

fn bench_loop(c: &mut Criterion) {
    let mut grp = c.benchmark_group("loop");
    grp.throughput(Throughput::Elements(VECTOR as u64));
    grp.sample_size(20).measurement_time(Duration::from_secs(3));
    for (name, streams) in [
        ("64B/1stream", vec![v4(0, 1)]),
        ("64B/1000flows", vec![v4(0, 1000)]),
    ] {
        let pool = Pool::new(4096);
        let (tx, rx) = loopback(1024);
        let (back_p, back_c) = ring(1024);
        let mut g = Generator::new(pool.clone(), Box::new(tx), &streams, GenConfig::default())
            .unwrap()
            .with_recycle(back_c);
        let ids: Vec<u32> = streams.iter().map(|s| s.id).collect();
        let mut sink = Sink::new(pool.clone(), Box::new(rx), &ids, SinkConfig::default())
            .unwrap()
            .with_recycle(back_p);
        grp.bench_function(name, |b| {
            b.iter_custom(|iters| {
                on_cpu(iters, || {
                    g.step();
                    sink.poll();
                })
            })
        });
        let snap = sink.snapshot();
        let s = &snap.streams[0];
        assert_eq!(s.lost(g.stats().sent()), 0);
        assert_eq!((s.duplicated, s.reordered), (0, 0));
    }
    grp.finish();
}

/// The sink alone: 256 frames of one stream per iteration, their sequence numbers
/// advanced in place by the feeder (a 6-byte store per frame) so that the sink sees an
/// in-order stream, as from a lossless DUT.
fn bench_sink(c: &mut Criterion) {
    let mut grp = c.benchmark_group("sink");
    grp.throughput(Throughput::Elements(VECTOR as u64));
    grp.sample_size(20).measurement_time(Duration::from_secs(3));
    let pool = Pool::new(1024);
    let (mut feed, rx) = loopback(1024);
    let (back_p, mut back_c) = ring(1024);
    let mut sink = Sink::new(pool.clone(), Box::new(rx), &[0], SinkConfig::default())
        .unwrap()
        .with_recycle(back_p);
    let mut frames = Frames::new(&v4(0, 1)).unwrap();
    let mut buf = [0u8; 2048];
    let mut v = PktVec::new();
    for _ in 0..VECTOR {
        let len = frames.write(&mut buf, 0, monotonic_ns());
        v.push(pool.alloc_frame(&buf[..len]).unwrap());
    }
    let at = signature::locate(pool.frame(&v[0])).unwrap() + 6;
    let mut seq = 0u64;
    grp.bench_function("64B/1stream/in-order", |b| {
        b.iter_custom(|iters| {
            on_cpu(iters, || {
                for p in v.iter_mut() {
                    pool.frame_mut(p)[at..at + 6].copy_from_slice(&seq.to_be_bytes()[2..]);
                    seq += 1;
                }
                feed.0.push_burst(&mut v);
                sink.poll();
                back_c.pop_burst(&mut v, VECTOR);
            })
        })
    });
    let s = sink.snapshot();
    assert_eq!((s.streams[0].duplicated, s.streams[0].reordered), (0, 0));
    assert_eq!(s.streams[0].gaps(), 0);
    grp.finish();
}

/// The pacer on the real clock: 2 Mpps for 0.5 s (see the module docs).
fn real_clock_check() {
    let pool = Pool::new(4096);
    let mut s = v4(0, 1);
    let asked = 2e6;
    s.rate = Rate::Pps(asked);
    let (mut g, mut rx, mut back) = setup(&pool, &[s], true);
    let mut v = PktVec::new();
    let t0 = monotonic_ns();
    let end = t0 + 500_000_000;
    while monotonic_ns() < end {
        g.step();
        rx.0.pop_burst(&mut v, VECTOR);
        if let Some(p) = &mut back {
            p.push_burst(&mut v);
        }
        pool.free_all(&mut v);
    }
    let st = g.stats();
    let secs = st.elapsed_ns as f64 / 1e9;
    let rate = st.sent() as f64 / secs;
    // Sent + missed is what the pacer earned: that must match the asked rate whatever the
    // machine does; the achieved rate alone falls short by whatever stalls cost.
    let earned = (st.sent() + st.missed()) as f64 / secs;
    let err = (earned - asked) / asked;
    println!(
        "pacer on the real clock: asked {:.3} Mpps for {secs:.3} s: achieved {:.4} Mpps \
         ({:+.3} %), missed {} frames to stalls; sent + missed = {:.4} Mpps ({:+.3} %)",
        asked / 1e6,
        rate / 1e6,
        (rate - asked) / asked * 100.0,
        st.missed(),
        earned / 1e6,
        err * 100.0,
    );
    assert!(
        err.abs() < 0.01,
        "pacer's accounting off by {:.2} %",
        err * 100.0
    );
}

criterion_group!(benches, bench_gen, bench_loop, bench_sink);

fn main() {
    real_clock_check();
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
