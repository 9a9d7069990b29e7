//! The socket generators (`vrbench trial --gen afpacket|afxdp`): `vrhost_traffic`'s
//! [`Generator`] — the in-process DUT's tester — sending through `vrhost_io`'s AF_PACKET
//! or AF_XDP port on `a0`, so a lab trial can be offered by the same backends vrhost itself
//! uses, and counted by the same sink on `b0`.
//!
//! Why keep them beside the live-frames generator, which is faster: AF_PACKET is the
//! portable path (no `BPF_PROG_RUN`, no XDP on the sending side), AF_XDP is vrhost's own
//! fast backend (on a NIC with zero-copy it sends from the pool without a copy; on veth it
//! binds in copy mode), and both check the live-frames generator from outside — generators
//! that share nothing but the signature format must agree on a DUT's loss and latency at
//! rates all can offer.
//!
//! **AF_XDP specifics.** The generator's pool is the socket's UMEM (frames are built where
//! the socket sends them from), so the port's transmit queue would hold a burst until its
//! `flush` (the worker's once-per-poll `sendto`); [`Immediate`] flushes after every burst,
//! so a burst leaves when it is handed over, as AF_PACKET's `sendmmsg` does. In copy mode
//! the kernel stops a `sendto` at the first frame the device drops (`EBUSY`: a veth whose
//! peer's ring is full), leaving the rest on the ring; with one `sendto` per burst the
//! generator then sent one frame per call and offered 0.07 Mpps where it can 0.8 (`--rate
//! max` through `--dut kernel`), so `Immediate` calls again until the ring is empty, as
//! `sendmmsg` goes on past a dropped frame. Only here, not in `XskTx::flush` itself: a
//! generator must offer every frame it counts as sent, while a vrhost worker facing a full
//! peer is better off leaving the rest on the ring (its `tx_burst` then drops at once,
//! counted "tx-full") than spending a system call on each frame the kernel drops. The port attaches its steering program to
//! `a0`, which receives nothing in a trial.
//!
//! **The ceiling.** One `sendmmsg` per vector, each frame copied into an `sk_buff`, and on
//! veth the receiving side's work (for the kernel profiles all of the forwarding too)
//! runs on the sender's CPU: `crates/io` measured 1.7 Mpps into a veth whose peer drops
//! everything, and with a DUT in the loop it is lower (figures in `live.rs`). Rates above
//! [`MAX_PPS`] are refused; use the live-frames generator there.
//!
//! **Counts.** Frames are built in the generator's own pool and the port is opened on
//! another one, so every `tx_burst` is one `sendmmsg` made at once (not collected for a
//! later flush); a frame the kernel refuses (its queue full) stays in the vector, and the
//! generator takes its sequence number back and counts it `tx_full` (the generator's own
//! port, not the DUT, dropped it — see `vrhost_traffic::generator`). So `sent` per stream
//! is exactly the frames the kernel took, with sequence numbers `0..sent`, and the sink's
//! loss is what happened after `a0`.
//!
//! **Pacing.** Each stream has its own pacer (rate × its weight's share), bursts sized to
//! the trial's interval as the live-frames generator's are; between bursts the thread
//! sleeps until shortly before the next is due (it runs `SCHED_FIFO` like the other
//! generator, and a spinning real-time thread would be throttled by the kernel after
//! 950 ms of every second). A fresh generator per run: sequence numbers start at 0 for
//! every trial, as the sink's reset expects.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::{PktVec, Pool};
use vrhost_io::afpacket::{PacketOptions, PacketPort};
use vrhost_io::afxdp::{XdpOptions, XdpPort, XskTx};
use vrhost_lab::{Netns, Side, addressing};
use vrhost_traffic::clock::monotonic_ns;
use vrhost_traffic::rate::MAX_GRANT;
use vrhost_traffic::{AddrSweep, FrameSize, GenConfig, Generator, Rate, Stream};
use vrhost_wire::EthernetAddress;

use super::frames::Size;
use super::generator::{SLEEP_ABOVE_NS, SLEEP_EARLY_NS, Sent, realtime};

/// The most the AF_PACKET generator is asked for (aggregate frames/s): about what one CPU
/// sends through a veth with the receive work inline (see the module docs).
pub(crate) const MAX_PPS: f64 = 1.0e6;
/// Buffers of the generator's pool: a full bucket of a vector per stream is the most in
/// flight at once, and `sendmmsg` copies and frees each vector before the next.
const POOL_SLOTS: usize = 4096;

/// The streams of a lab of `vrs` VRs: stream `i` from VR `i`'s side-A host to its side-B
/// host (or to `dests`' consecutive addresses, a flow each), to the VR's side-A VIF MAC —
/// the addresses the live-frames templates use (`frames::template`), so every profile
/// forwards them the same way.
fn streams(
    vrs: u32,
    size: Size,
    rate: Rate,
    weights: &[f64],
    dests: Option<(Ipv4Addr, u32)>,
) -> Vec<Stream> {
    let sum: f64 = weights.iter().sum();
    (0..vrs)
        .map(|i| {
            let a = addressing::side_addrs(i, Side::A, false);
            let b = addressing::side_addrs(i, Side::B, false);
            let mut s = Stream::new(
                i,
                EthernetAddress(addressing::side_mac(Side::A).octets()),
                EthernetAddress(addressing::vif_mac(i, Side::A).octets()),
                IpAddr::V4(a.host4),
                IpAddr::V4(b.host4),
            );
            s.vr = i;
            if let Some((dst, flows)) = dests {
                s.dst = IpAddr::V4(dst);
                s.flows.dst = AddrSweep {
                    count: flows,
                    prefix_len: None,
                };
            }
            s.size = match size {
                Size::Fixed(n) => FrameSize::Fixed(n),
                Size::Imix => FrameSize::Imix,
            };
            s.rate = match rate {
                Rate::Pps(r) => Rate::Pps(r * weights[i as usize] / sum),
                Rate::Unlimited => Rate::Unlimited,
            };
            s
        })
        .collect()
}

/// Send `vrs` streams at `rate` (aggregate) shared by `weights`, in frames of `size` (to
/// `dests`, see [`streams`]), for `duration` out of `a0` from a thread in `side_a` pinned to
/// `core`, bursts sized to `interval`; stops early if `stop` is set.
#[expect(
    clippy::too_many_arguments,
    reason = "one trial's settings, passed through"
)]
pub(crate) fn run(
    afxdp: bool,
    side_a: &Netns,
    core: usize,
    vrs: u32,
    size: Size,
    rate: Rate,
    weights: &[f64],
    dests: Option<(Ipv4Addr, u32)>,
    interval: Duration,
    duration: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Sent> {
    if weights.len() != vrs as usize {
        bail!("{} weights for {vrs} streams", weights.len());
    }
    let streams = streams(vrs, size, rate, weights, dests);
    std::thread::scope(|s| {
        s.spawn(|| thread(afxdp, side_a, core, &streams, interval, duration, stop))
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// An AF_XDP transmit queue that sends each burst as it is handed over, to the last frame
/// (see the module docs).
struct Immediate(XskTx);

/// `sendto` calls per burst at most: the ring's worth if each moved one frame.
const MAX_KICKS: u32 = 2048;

impl TxQueue for Immediate {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        let took = self.0.tx_burst(pool, pkts);
        for _ in 0..MAX_KICKS {
            if self.0.pending() == 0 {
                break;
            }
            self.0.flush(pool);
        }
        took
    }
}

/// The port kept open for the run (dropped at its end: the AF_XDP port detaches its
/// program then), and its transmit queue.
type Opened = (Box<dyn std::any::Any>, Box<dyn TxQueue>);

/// Open the AF_PACKET or AF_XDP port on `a0`; the generator builds its frames in `pool`.
fn open(afxdp: bool, pool: &std::sync::Arc<Pool>) -> anyhow::Result<Opened> {
    let ifname = Side::A.side_ifname();
    if afxdp {
        // It only transmits: small rings leave the pool's slots to the frames it sends.
        let o = XdpOptions {
            ring_size: 2048,
            fill_size: 2048,
            ..XdpOptions::default()
        };
        let mut port = XdpPort::open(ifname, 1, pool, &o)
            .with_context(|| format!("opening an AF_XDP port on {ifname}"))?;
        let (rx, tx) = port.take_queues().pop().expect("one queue");
        drop(rx);
        return Ok((Box::new(port), Box::new(Immediate(tx))));
    }
    // The port's own pool only ever holds what it receives (nothing is sent to `a0`); a
    // pool apart from the generator's makes every `tx_burst` an immediate `sendmmsg`.
    let port_pool = Pool::new(64);
    let mut port = PacketPort::open(
        ifname,
        1,
        &port_pool,
        &PacketOptions {
            block_size: 1 << 16,
            block_count: 2,
            ..PacketOptions::default()
        },
    )
    .with_context(|| format!("opening an AF_PACKET port on {ifname}"))?;
    let (rx, tx) = port.take_queues().pop().expect("one queue");
    drop(rx);
    Ok((Box::new((port, port_pool)), Box::new(tx)))
}

fn thread(
    afxdp: bool,
    side_a: &Netns,
    core: usize,
    streams: &[Stream],
    interval: Duration,
    duration: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Sent> {
    side_a.enter_current_thread()?;
    if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        bail!("cannot pin the socket generator thread to core {core}");
    }
    let pool = Pool::new(POOL_SLOTS);
    let (_port, tx) = open(afxdp, &pool)?;
    let interval_ns = interval.as_nanos() as u64;
    // A bucket of at least one vector, as the live-frames generator's: a few hundred µs
    // off the CPU are caught up in one burst.
    let burst = streams
        .iter()
        .filter_map(|s| s.rate.pps())
        .map(|r| (r * interval_ns as f64 / 1e9).max(1.0))
        .fold(f64::INFINITY, f64::min);
    let depth = if burst.is_finite() {
        ((MAX_GRANT as f64 / burst).ceil() as u64).max(4)
    } else {
        4
    };
    let mut g = Generator::new(
        pool,
        tx,
        streams,
        GenConfig {
            interval_ns,
            bucket_bursts: depth,
            ..GenConfig::default()
        },
    )
    .context("building the socket generator")?;
    realtime();
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
    let unpaced = streams.iter().any(|s| s.rate.pps().is_none());
    let start = monotonic_ns();
    let end = start + duration.as_nanos() as u64;
    let mut calls = 0u64;
    let mut now = start;
    let mut next = start;
    while now < end && !stop.load(Ordering::Relaxed) {
        if g.step() > 0 {
            calls += 1;
            next = now + interval_ns;
        }
        now = monotonic_ns();
        if !unpaced && next > now && end > now {
            let wait = (next - now).min(end - now);
            if wait > SLEEP_ABOVE_NS {
                std::thread::sleep(Duration::from_nanos(wait - SLEEP_EARLY_NS));
                now = monotonic_ns();
            }
        }
    }
    // Stopped early (Ctrl-C), the run ends where it stopped.
    g.finish(now.min(end));
    let st = g.stats();
    Ok(Sent {
        per_stream: streams
            .iter()
            .map(|s| st.stream(s.id).map_or(0, |x| x.sent))
            .collect(),
        elapsed: Duration::from_nanos(now - start),
        missed: st.missed(),
        calls,
        tx_full: st.tx_full(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_carry_the_lab_addresses_and_share_the_rate_by_weight() {
        let _alone = crate::cores_alone();
        let s = streams(
            3,
            Size::Fixed(128),
            Rate::Pps(600.0),
            &[1.0, 2.0, 3.0],
            None,
        );
        let rates: Vec<f64> = s.iter().map(|s| s.rate.pps().unwrap()).collect();
        assert_eq!(rates, [100.0, 200.0, 300.0]);
        // The same header bytes as the live-frames templates (what every profile was built
        // to forward), up to the signature.
        for (i, st) in s.iter().enumerate() {
            let mut f = vrhost_traffic::Frames::new(st).unwrap();
            let mut buf = vec![0u8; 2048];
            let n = f.write(&mut buf, 0, 0);
            assert_eq!(n, 124);
            let t = super::super::frames::template(i as u32, i as u32, 128);
            assert_eq!(buf[..12], t.head[..12], "MACs, stream {i}");
            assert_eq!(buf[26..34], t.head[26..34], "addresses, stream {i}");
            assert_eq!(buf[34..38], t.head[34..38], "ports, stream {i}");
            let sig = vrhost_traffic::signature::parse(&buf[..n]).expect("signed");
            assert_eq!(sig.stream, i as u32);
        }
    }
}
