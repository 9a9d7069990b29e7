//! The in-process DUT: vrhost's data plane on two mem ports, driven by `vrhost-traffic`'s
//! generator and sink on another core — the `vrhost-inproc` profile of the RFC 2544 / NDR /
//! work-point commands.
//!
//! Why not `vrbench inproc`'s generator-inside-the-worker: that one measures the data plane's
//! cost with nothing in between, but it cannot *offer* a load the worker does not take — the
//! worker calls it. RFC 2544 needs a tester that sends at its own rate whatever the DUT does
//! and counts what comes back, so here the generator and sink run in the calling thread,
//! pinned to the tester core, and the worker (one, pinned to the DUT core) forwards between a
//! mem port's rx ring (what the generator fills) and the other port's tx ring (what the sink
//! drains). A frame the full rx ring refuses is the DUT's loss, as a NIC's ring overflow is:
//! it counts as sent and not received. The generator and the sink recycle slots through a
//! ring of their own (same thread), so the tester costs ~20 ns per frame and is not what
//! limits a DUT forwarding ~20 Mpps (`docs/perf.md, "vrbench's tester"`).
//!
//! Topology: VR `k` has VIF `in` on port 0 (MAC `02:76:72:00:hi:lo`, `k`'s two bytes;
//! 198.18.0.1/24) and `out` on port 1 (192.0.2.254/24), a default route and `routes` /24s
//! under 10.0.0.0/8 via the neighbour 192.0.2.200 on `out`. Stream `k` goes to VR `k`, its
//! destinations swept over the VR's /24s (or 198.51.100.0/24, covered by the default route,
//! when it has none), `flows` destinations per stream.
//!
//! A trial: the worker is started (it is parked between trials so the tester's core is idle
//! then), generator and sink are reset, the generator sends for the trial's duration while
//! the sink polls in between its bursts; then the sink polls until nothing came for the drain
//! time; only then is the worker stopped and are the counters read (the contract of
//! `vrhost_bench::trial`).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vrhost_bench::latency::LatencySummary;
use vrhost_bench::trial::{Measurer, Trial};
use vrhost_dataplane::port::mem;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::ring::ring;
use vrhost_dataplane::{Dataplane, DataplaneConfig, IfAddr, Pool, VifConfig, VrConfig, Worker};
use vrhost_fib::{NextHop, NextHopSet, Prefix};
use vrhost_io::offcpu::{OffCpu, Parts};
use vrhost_io::sched::{self, Policy};
use vrhost_traffic::mem::{RingRx, RingTx};
use vrhost_traffic::{
    AddrSweep, FrameSize, GenConfig, Generator, Rate, Sink, SinkConfig, SinkSnapshot, Stream,
};
use vrhost_wire::EthernetAddress;

use crate::attempts::least_disturbed;
use crate::inproc::topo::{in_mac, out_mac};

const TESTER_MAC: EthernetAddress = EthernetAddress([0x02, 0x76, 0x72, 0xff, 0, 1]);
const GW: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 200);
const GW_MAC: EthernetAddress = EthernetAddress([0x02, 0x76, 0x72, 0xfe, 0, 1]);
/// Descriptors per mem ring (a common NIC ring size).
const RING: usize = 4096;
/// The out VIF's index in every VR (added second).
const OUT_VIF: u16 = 1;

/// What the in-process DUT is built with.
#[derive(Debug, Clone)]
pub(crate) struct InprocSpec {
    pub(crate) vrs: usize,
    /// /24 routes per VR besides the default.
    pub(crate) routes: usize,
    /// Destinations per stream.
    pub(crate) flows: u32,
    /// VIFs per VR (at least 2: `in` and `out`; the others sit idle on port 0, each with a
    /// MAC the demux must tell apart).
    pub(crate) vifs: usize,
    /// Frame size on the wire, FCS included.
    pub(crate) frame_size: usize,
    /// Core of the worker and of the tester (generator + sink).
    pub(crate) dut_core: usize,
    pub(crate) tester_core: usize,
    /// Drain: the sink polls until nothing came for this long.
    pub(crate) drain: Duration,
}

enum Cmd {
    Run(Arc<AtomicBool>),
}

/// The DUT and its tester.
pub(crate) struct InprocDut {
    spec: InprocSpec,
    tester_gen: Generator,
    sink: Sink,
    ids: Vec<u32>,
    /// Per-VR weights of the offered load (sum 1).
    shares: Vec<f64>,
    cmd: Sender<Cmd>,
    /// The worker's answer when a trial's run ends: how long the host kept it off its core.
    done: Receiver<Parts>,
    worker: Option<std::thread::JoinHandle<()>>,
    _dp: Dataplane,
    /// The last trial's sink snapshot (per-stream counts, latency).
    pub(crate) last: Option<SinkSnapshot>,
    /// The last trial's frames sent per VR (refused by the DUT's rx ring included).
    last_sent: Vec<u64>,
    /// How long the host kept the DUT worker off its core during the last trial (run-queue
    /// wait, steal, and the core's interrupts and softirqs: [`OffCpu`]); `None` where the
    /// kernel does not say.
    pub(crate) last_held_off: Option<Duration>,
    /// Of that, the run-queue wait alone: other threads on the worker's core, not the
    /// hypervisor.
    pub(crate) last_run_queue: Option<Duration>,
    /// Frames the tester's pacer missed in the last attempt (the host took its core).
    last_missed: u64,
    /// Attempts the last `run` took (1 to 3).
    pub(crate) last_attempts: usize,
}

impl std::fmt::Debug for InprocDut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InprocDut")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl InprocDut {
    pub(crate) fn new(spec: InprocSpec) -> anyhow::Result<InprocDut> {
        if spec.vrs == 0 || spec.vrs > 4096 {
            bail!("--vrs {} must be 1..=4096", spec.vrs);
        }
        if !(2..=64).contains(&spec.vifs) {
            bail!("--vifs {} must be 2..=64 per VR", spec.vifs);
        }
        if spec.routes > 65_536 {
            bail!(
                "--routes {} must be at most 65,536 /24s per VR here",
                spec.routes
            );
        }
        let pool = Pool::new(4 * RING + spec.vrs.min(64) * 1024 + 8192);
        let dp = Dataplane::new(
            pool.clone(),
            DataplaneConfig {
                workers: 1,
                ports: vec!["in".into(), "out".into()],
                ..Default::default()
            },
        )?;
        let (mut p_in, mut peer_in) = mem::port(1, 1, RING);
        let (mut p_out, mut peer_out) = mem::port(1, 1, RING);
        let rx: Vec<(u16, Box<dyn RxQueue>)> = vec![
            (0, Box::new(p_in.rx.remove(0))),
            (1, Box::new(p_out.rx.remove(0))),
        ];
        let tx: Vec<Box<dyn TxQueue>> =
            vec![Box::new(p_in.tx.remove(0)), Box::new(p_out.tx.remove(0))];
        let mut streams = Vec::new();
        for k in 0..spec.vrs {
            let vr = dp.add_vr(VrConfig::new(format!("vr{k}")))?;
            let vif = |name: &str, port, mac, a: Ipv4Addr| VifConfig {
                name: name.into(),
                port,
                vlan: None,
                key: Default::default(),
                mac,
                mtu: 1500,
                addrs: vec![IfAddr::V4(a, 24)],
            };
            dp.add_vif(
                vr.name(),
                vif("in", 0, in_mac(k), Ipv4Addr::new(198, 18, 0, 1)),
            )?;
            let out = dp.add_vif(
                vr.name(),
                vif("out", 1, out_mac(k), Ipv4Addr::new(192, 0, 2, 254)),
            )?;
            debug_assert_eq!(out, OUT_VIF);
            for j in 2..spec.vifs {
                let mac = EthernetAddress([0x02, 0x76, 0x73, j as u8, k as u8, (k >> 8) as u8]);
                let a = Ipv4Addr::new(172, 16 + (j >> 8) as u8, j as u8, 1);
                dp.add_vif(vr.name(), vif(&format!("x{j}"), 0, mac, a))?;
            }
            let via = NextHopSet::one(NextHop::Via {
                addr: IpAddr::V4(GW),
                ifindex: u32::from(OUT_VIF),
            });
            let routes = (0..spec.routes).map(|i| {
                let a = Ipv4Addr::new(10, (i >> 8) as u8, i as u8, 0);
                (Prefix::new_masked(a, 24), via.clone())
            });
            vr.fib4
                .load(routes.chain(std::iter::once((
                    Prefix::new_masked(Ipv4Addr::UNSPECIFIED, 0),
                    via.clone(),
                ))))
                .context("loading the VR's routes")?;
            vr.neigh.set(OUT_VIF, IpAddr::V4(GW), GW_MAC);
            let (dst, sweep) = if spec.routes > 0 {
                // One destination per /24, in turn: `flows` of them.
                (
                    Ipv4Addr::new(10, 0, 0, 1),
                    spec.flows.min(spec.routes as u32 * 256),
                )
            } else {
                (Ipv4Addr::new(198, 51, 100, 1), spec.flows.min(254))
            };
            let mut s = Stream::new(
                k as u32,
                TESTER_MAC,
                in_mac(k),
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
                IpAddr::V4(dst),
            );
            s.vr = k as u32;
            s.size = FrameSize::Fixed(spec.frame_size as u16);
            s.rate = Rate::Pps(1.0);
            s.flows.dst = AddrSweep {
                count: sweep.max(1),
                prefix_len: None,
            };
            streams.push(s);
        }
        let worker = dp.worker(0, rx, tx)?;
        let (recycle_tx, recycle_rx) = ring(2 * RING);
        let tester_gen = Generator::new(
            pool.clone(),
            Box::new(RingTx(peer_in.rx.remove(0))) as Box<dyn TxQueue>,
            &streams,
            GenConfig {
                // 250 µs of catch-up: a tester preempted for less than that still sends what
                // was due (in one burst the 4096-descriptor ring absorbs below ~16 Mpps);
                // longer, and the frames count as missed and the trial is run again.
                bucket_bursts: 25,
                ..GenConfig::default()
            },
        )
        .context("building the generator")?
        .with_recycle(recycle_rx);
        let ids: Vec<u32> = streams.iter().map(|s| s.id).collect();
        let sink = Sink::new(
            pool,
            Box::new(RingRx(peer_out.tx.remove(0))) as Box<dyn RxQueue>,
            &ids,
            SinkConfig::default(),
        )
        .context("building the sink")?
        .with_recycle(recycle_tx);
        let (cmd, cmd_rx) = channel();
        let (done_tx, done) = channel();
        let core = spec.dut_core;
        let worker = std::thread::Builder::new()
            .name("dut-worker".into())
            .spawn(move || run_worker(worker, core, cmd_rx, done_tx))?;
        let n = spec.vrs;
        Ok(InprocDut {
            spec,
            tester_gen,
            sink,
            ids,
            shares: vec![1.0 / n as f64; n],
            cmd,
            done,
            worker: Some(worker),
            _dp: dp,
            last: None,
            last_sent: Vec::new(),
            last_held_off: None,
            last_run_queue: None,
            last_missed: 0,
            last_attempts: 0,
        })
    }

    /// Split future offered loads between the VRs in these proportions (normalised).
    pub(crate) fn set_shares(&mut self, w: &[f64]) -> anyhow::Result<()> {
        let sum: f64 = w.iter().sum();
        if w.len() != self.ids.len() || sum <= 0.0 || w.iter().any(|x| *x < 0.0) {
            bail!(
                "{} shares for {} VRs (all ≥ 0, some > 0)",
                w.len(),
                self.ids.len()
            );
        }
        self.shares = w.iter().map(|x| x / sum).collect();
        Ok(())
    }

    /// The most the tester offers with this DUT in the loop (frames/s): one trial with every
    /// stream unlimited. Searches start below it, so a shortfall is never the tester's.
    pub(crate) fn tester_max(&mut self, duration: Duration) -> anyhow::Result<f64> {
        for &id in &self.ids {
            self.tester_gen.set_rate(id, Rate::Unlimited)?;
        }
        let t = self.run_with_rates_set(f64::INFINITY, duration)?;
        Ok(t.sent as f64 / duration.as_secs_f64())
    }

    /// One trial at `load` frames/s in total.
    pub(crate) fn run(&mut self, load: f64, duration: Duration) -> anyhow::Result<Trial> {
        for (i, &id) in self.ids.iter().enumerate() {
            let rate = Rate::Pps((load * self.shares[i]).max(0.0));
            self.tester_gen.set_rate(id, rate)?;
        }
        // A trial the host disturbed is run again, up to twice, and the least disturbed
        // attempt is returned for the search to judge:
        // - the tester fell more than 1 % short (the OS took its core: the pacer counts what
        //   it could not send in time as missed rather than bursting it later);
        // - the DUT lost frames while the host held its worker off the core for long enough
        //   to fill a quarter of its receive ring at this load. (Ordinary tasks get 50 ms
        //   of every second even against a `SCHED_FIFO` worker, and a hypervisor may take
        //   the vCPU: a CI run lost 1.6 % at 2 Mpps, a tenth of the worker's capacity.)
        //   A hypervisor's steal does not show in the worker's run delay, but it takes the
        //   tester's vCPU too: a tester that missed a quarter ring's worth of frames in an
        //   attempt that lost frames counts the same (a CI run on a host at half its speed:
        //   26,010 missed and 15 % lost at 0.5 Mpps, with no run delay).
        let ((d, t, last, sent, run_queue), runs) = least_disturbed(3, |attempt| {
            let t = self.run_with_rates_set(load, duration)?;
            let d = Disturbance::of(&t, self.last_held_off, self.last_missed, load);
            if d.host_lost {
                eprintln!(
                    "vrbench: at {:.3} Mpps the DUT lost {} frames while the host held its \
                     worker off its core for {:.1} ms and the tester's for {} frames' time; {}",
                    load / 1e6,
                    d.lost,
                    self.last_held_off.unwrap_or_default().as_secs_f64() * 1e3,
                    self.last_missed,
                    if attempt < 3 {
                        "the trial is run again"
                    } else {
                        "the least disturbed of three attempts counts"
                    }
                );
            }
            let (rank, quiet) = (d.rank(), d.is_quiet());
            let (last, sent) = (self.last.take(), std::mem::take(&mut self.last_sent));
            Ok::<_, anyhow::Error>(((d, t, last, sent, self.last_run_queue), rank, quiet))
        })?;
        self.last_attempts = runs.made as usize;
        // What `last`, `per_vr` and `last_held_off` say is the returned attempt's.
        (self.last, self.last_sent) = (last, sent);
        (self.last_held_off, self.last_run_queue) = (d.held_off, run_queue);
        Ok(t)
    }

    fn run_with_rates_set(&mut self, load: f64, duration: Duration) -> anyhow::Result<Trial> {
        self.tester_gen.reset();
        self.sink.reset();
        let stop = Arc::new(AtomicBool::new(false));
        self.cmd
            .send(Cmd::Run(stop.clone()))
            .context("the DUT worker thread is gone")?;
        // The tester runs on a thread of its own, pinned and real-time for the trial only:
        // the caller's affinity and policy stay as they were (processes it starts later,
        // such as a lab's vrhost daemon, inherit them).
        let (tester_gen, sink) = (&mut self.tester_gen, &mut self.sink);
        let (core, drain) = (self.spec.tester_core, self.spec.drain);
        let sent_for = std::thread::scope(|sc| {
            sc.spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: core });
                realtime(true);
                // A gap in this loop longer than GAP is the thread being stopped (the
                // kernel's real-time throttling takes 50 ms of every second from a spinning
                // SCHED_FIFO thread): the pacer resumes from then and the gap does not
                // count towards the trial's time, so a long trial is `duration` of sending
                // at the rate, not a 5 % shortfall.
                const GAP: Duration = Duration::from_millis(1);
                let t0 = Instant::now();
                let (mut last, mut paused) = (t0, Duration::ZERO);
                loop {
                    // One clock read per round for both the gap and the end.
                    let now = Instant::now();
                    if (now - t0).saturating_sub(paused) >= duration {
                        break;
                    }
                    if now - last > GAP {
                        paused += now - last;
                        tester_gen.resume_after_gap();
                    }
                    last = now;
                    tester_gen.step();
                    sink.poll();
                }
                let sent_for = t0.elapsed().saturating_sub(paused);
                // Drain: everything in flight either arrives or was dropped by the DUT.
                sink.drain(drain, Duration::from_secs(2));
                sent_for
            })
            .join()
        })
        .map_err(|_| anyhow::anyhow!("the tester thread panicked"))?;
        stop.store(true, Ordering::Relaxed);
        let held = self.done.recv().context("the DUT worker thread is gone")?;
        (self.last_held_off, self.last_run_queue) = (held.total(), held.run_queue);
        let g = self.tester_gen.stats();
        let s = self.sink.snapshot();
        // Refused by the DUT's full rx ring: sent on the wire, lost by the DUT.
        let sent = g.sent() + g.tx_full();
        let received: u64 = self
            .ids
            .iter()
            .filter_map(|id| s.stream(*id))
            .map(|r| r.unique())
            .sum();
        let mut t = Trial::new(load, duration, sent, received);
        t.effective_duration = Some(sent_for + self.spec.drain);
        let lat: Vec<_> = self
            .ids
            .iter()
            .filter_map(|id| s.stream(*id))
            .filter(|r| r.latency.count > 0)
            .collect();
        if let Some(first) = lat.first() {
            // The streams' histograms merged: one latency summary for the trial.
            let mut h = first.histogram.clone();
            for r in &lat[1..] {
                let _ = h.add(&r.histogram);
            }
            t.latency = LatencySummary::from_histogram(&h);
        }
        self.last_missed = g.missed();
        if g.missed() > 0 {
            warn_missed(g.missed(), load);
        }
        self.last_sent = self
            .ids
            .iter()
            .map(|id| g.stream(*id).map_or(0, |x| x.sent + x.tx_full))
            .collect();
        self.last = Some(s);
        Ok(t)
    }

    /// The last trial per VR: (frames sent, frames received once).
    pub(crate) fn per_vr(&self) -> Vec<(u64, u64)> {
        self.ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let rx = self
                    .last
                    .as_ref()
                    .and_then(|s| s.stream(*id))
                    .map_or(0, |r| r.unique());
                (self.last_sent.get(i).copied().unwrap_or(0), rx)
            })
            .collect()
    }
}

/// How much the host disturbed one attempt at a trial (see [`InprocDut::run`]).
#[derive(Debug, Clone, Copy)]
struct Disturbance {
    /// The tester's shortfall (fraction of the frames it should have sent).
    shortfall: f64,
    /// Frames sent and not received.
    lost: u64,
    /// `lost > 0` while the worker was held off long enough to fill a quarter of its
    /// receive ring at the offered load, or the tester missed that many frames.
    host_lost: bool,
    held_off: Option<Duration>,
}

impl Disturbance {
    fn of(t: &Trial, held_off: Option<Duration>, missed: u64, load: f64) -> Disturbance {
        let lost = t.sent.saturating_sub(t.received);
        let ring_time = RING as f64 / 4.0 / load;
        let tester_held = missed as f64 >= RING as f64 / 4.0;
        Disturbance {
            shortfall: t.shortfall(),
            lost,
            host_lost: lost > 0
                && (tester_held || held_off.is_some_and(|h| h.as_secs_f64() >= ring_time)),
            held_off,
        }
    }

    fn is_quiet(&self) -> bool {
        self.shortfall <= 0.01 && !self.host_lost
    }

    /// Lower is less disturbed: a tester short by over 1 % first, then frames the host
    /// made the DUT lose, then the tester's shortfall.
    fn rank(&self) -> (bool, bool, u64, f64) {
        (
            self.shortfall > 0.01,
            self.host_lost,
            if self.host_lost { self.lost } else { 0 },
            self.shortfall,
        )
    }
}

fn warn_missed(missed: u64, load: f64) {
    eprintln!(
        "vrbench: the tester could not keep up at {:.3} Mpps ({missed} frames missed); the \
         trial's sent count is what it did send",
        load / 1e6
    );
}

impl Measurer for InprocDut {
    type Error = DutError;
    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, DutError> {
        self.run(load, duration).map_err(DutError)
    }
}

/// A DUT's failure, for `Measurer`.
#[derive(Debug)]
pub(crate) struct DutError(pub(crate) anyhow::Error);

impl std::fmt::Display for DutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for DutError {}

impl Drop for InprocDut {
    fn drop(&mut self) {
        // Closing the channel ends the worker thread.
        let (dead, _) = channel();
        self.cmd = dead;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// Make the calling thread `SCHED_FIFO` at the lowest priority for a trial (`true`), or an
/// ordinary thread again (`false`). Why: on a shared 2-core host a compiler on the tester's
/// or the worker's core otherwise takes it for whole time slices (ms) — thousands of frames
/// the tester misses or the DUT's ring overflows, the machine's noise charged to one side.
/// Both threads spin only during a trial; the kernel's RT throttling leaves other tasks 5 %
/// of each core even then. Without the privilege (not root) the threads stay ordinary.
fn realtime(on: bool) {
    let _ = sched::set_policy(if on {
        Policy::Fifo(1)
    } else {
        Policy::Ordinary
    });
}

fn run_worker(mut w: Worker, core: usize, cmd: Receiver<Cmd>, done: Sender<Parts>) {
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
    while let Ok(Cmd::Run(stop)) = cmd.recv() {
        realtime(true);
        let before = OffCpu::now(core);
        w.run(&stop);
        // Its ports are memory: the core's interrupts and softirqs are someone else's.
        let held_off = OffCpu::now(core).parts_since(&before);
        realtime(false);
        if done.send(held_off).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DUT of `vrs` VRs with no routes but the default, its worker on core 0 and the
    /// tester on the last core.
    fn test_dut(vrs: usize) -> InprocDut {
        let cores = core_affinity::get_core_ids().map_or(1, |c| c.len());
        assert!(cores >= 2, "the tester and the DUT worker need a core each");
        InprocDut::new(InprocSpec {
            vrs,
            routes: 0,
            flows: 1,
            vifs: 2,
            frame_size: 64,
            dut_core: 0,
            tester_core: cores - 1,
            drain: Duration::from_millis(20),
        })
        .unwrap()
    }

    /// More VRs than a MAC byte can number (before, VR 256's `in` VIF got VR 0's MAC and
    /// `measure --vrs 1000` failed to build its DUT): each VR's stream comes back through
    /// that VR, every frame of it, far below capacity (0.3 Mpps over 300 VRs), but for what
    /// arrived while the host held the worker off, as in the test above.
    #[test]
    fn a_dut_of_more_than_256_vrs_forwards_every_vr_s_stream() {
        if !vrhost_lab::require_root("an in-process DUT trial (SCHED_FIFO)") {
            return;
        }
        let _alone = crate::cores_alone();
        let vrs = 300;
        let mut dut = test_dut(vrs);
        let (load, secs) = (0.3e6, 0.3);
        let t = dut.run(load, Duration::from_secs_f64(secs)).unwrap();
        let held = dut.last_held_off.unwrap_or_default().as_secs_f64();
        let per_vr = dut.per_vr();
        assert_eq!(per_vr.len(), vrs);
        for (vr, (sent, received)) in per_vr.into_iter().enumerate() {
            let excused = (load / vrs as f64 * held).ceil() as u64 + sent / 100;
            assert!(
                sent > 0 && received <= sent && received + excused >= sent,
                "VR {vr}: received {received} of {sent} (held off {held:.4} s)"
            );
        }
        let s = dut.last.as_ref().unwrap();
        assert_eq!((s.unsigned, s.unknown_stream), (0, 0));
        assert!(t.received > 0);
    }

    /// The issue's "the generator's achieved rate within 1 % of the asked rate on the
    /// in-process DUT": vrhost's data plane (one worker, two VRs) between the tester's
    /// generator and sink, offered 0.5, 1 and 2 Mpps — far below what the worker forwards
    /// (~20 Mpps, docs/perf.md) — for 0.5 s each. What is asserted is what the tool reports
    /// to its searches (`InprocDut::run`'s trial): frames sent ÷ (asked rate × trial time)
    /// within 1 %, per VR as well as in total, and every frame sent came back once, but for
    /// those that arrived while the host kept the DUT's worker off its core.
    ///
    /// Root: the tester and the worker run SCHED_FIFO during a trial (`realtime`), which is
    /// what keeps a busy 2-core host from taking the tester's core for milliseconds (the
    /// pacer then counts the frames as missed rather than bursting them late, see
    /// `vrhost_traffic::rate`); without it this would measure the host's other work.
    ///
    /// Seen when this test was written: back to back, two 0.5 s trials exceed the kernel's
    /// real-time budget (`sched_rt_runtime_us`, 950 ms per second), and the second one's
    /// first attempt lost 50 ms to throttling (~10 % missed); `run` repeats a trial more
    /// than 1 % short, and the repeat, in a fresh period, was within 0.002 %. The assertion
    /// is on the trial `run` returns, as the searches see it. Seen later in CI: the DUT lost
    /// 1.6 % at 2 Mpps, its worker held off by the host (ordinary tasks get 50 ms of every
    /// second against `SCHED_FIFO` since Linux 6.12; a hypervisor may take the vCPU), which
    /// is why `run` now measures that and tries again.
    #[test]
    fn tester_offers_the_asked_rate_within_1_percent() {
        if !vrhost_lab::require_root("the in-process tester's rate accuracy (SCHED_FIFO)") {
            return;
        }
        let _alone = crate::cores_alone();
        let mut dut = test_dut(2);
        let secs = 0.5;
        for mpps in [0.5, 1.0, 2.0] {
            let load = mpps * 1e6;
            let t = dut.run(load, Duration::from_secs_f64(secs)).unwrap();
            let want = load * secs;
            let ratio = t.sent as f64 / want;
            eprintln!(
                "{mpps} Mpps: sent {} of {want} ({:+.4} %), received {}",
                t.sent,
                (ratio - 1.0) * 100.0,
                t.received
            );
            assert!(
                (ratio - 1.0).abs() <= 0.01,
                "{mpps} Mpps: sent {} of {want}",
                t.sent
            );
            // Far below the DUT's capacity everything arrives, but for what arrived while
            // the host kept the DUT's worker off its core (`run` tries three times for an
            // attempt without that) and a 1 % margin for stalls shorter than the counters'
            // grain (steal and interrupts are counted in 10 ms ticks).
            let held = dut.last_held_off.unwrap_or_default().as_secs_f64();
            eprintln!("  the DUT's worker was held off for {:.3} ms", held * 1e3);
            let delivered = |received: u64, sent: u64, rate: f64| {
                let excused = (rate * held).ceil() as u64 + sent / 100;
                received <= sent && received + excused >= sent
            };
            assert!(
                delivered(t.received, t.sent, load),
                "{mpps} Mpps: received {} of {} far below capacity",
                t.received,
                t.sent
            );
            for (vr, (sent, received)) in dut.per_vr().into_iter().enumerate() {
                let r = sent as f64 / (want / 2.0);
                assert!((r - 1.0).abs() <= 0.01, "{mpps} Mpps, VR {vr}: sent {sent}");
                assert!(
                    delivered(received, sent, load / 2.0),
                    "{mpps} Mpps, VR {vr}: received {received} of {sent}"
                );
            }
            let s = dut.last.as_ref().unwrap();
            assert_eq!((s.unsigned, s.unknown_stream), (0, 0));
        }
    }

    /// A trial the host disturbs is run again: a real-time thread above the DUT worker's
    /// priority takes the worker's core for 30 ms in the first attempt; the DUT loses what
    /// its ring cannot hold meanwhile, `run` says so and tries again, and what it returns
    /// is a later attempt, with every frame delivered but what arrived while the host held
    /// the worker off.
    ///
    /// The hypervisor can disturb every attempt too (locally, while spinning cores lost
    /// 23–28 % to steal, the least lossy of three attempts lost 8.7 % at 2 Mpps): then
    /// that one counts, and the loss
    /// excused is the rate times the time the worker was held off, as in the test above.
    /// The hog's 30 ms shows in the worker's run-queue wait, which steal does not touch.
    #[test]
    fn a_trial_the_host_held_the_dut_off_in_is_run_again() {
        if !vrhost_lab::require_root("preempting the DUT worker (SCHED_FIFO)") {
            return;
        }
        let _alone = crate::cores_alone();
        let mut dut = test_dut(1);
        let (load, secs) = (2e6, 0.3);
        let (ready, ready_rx) = channel();
        let hog = std::thread::spawn(move || {
            // On the worker's core and real-time before the trial starts: an ordinary
            // thread there would wait for the spinning worker to finish the trial.
            assert!(core_affinity::set_for_current(core_affinity::CoreId {
                id: 0
            }));
            sched::set_policy(Policy::Fifo(2)).unwrap();
            ready.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            sched::set_policy(Policy::Ordinary).unwrap();
        });
        ready_rx.recv().unwrap();
        let t = dut.run(load, Duration::from_secs_f64(secs)).unwrap();
        hog.join().unwrap();
        let held = dut.last_held_off.expect("this kernel reports run_delay");
        let run_queue = dut.last_run_queue.expect("this kernel reports run_delay");
        eprintln!(
            "{} attempts; the returned one: sent {}, received {}, held off {held:?} \
             ({run_queue:?} of it behind other threads)",
            dut.last_attempts, t.sent, t.received
        );
        assert!(
            dut.last_attempts >= 2,
            "the disturbed attempt was not run again"
        );
        let excused = (load * held.as_secs_f64()).ceil() as u64 + t.sent / 100;
        assert!(
            t.received <= t.sent && t.received + excused >= t.sent,
            "the attempt returned lost frames: sent {}, received {}, {excused} excused",
            t.sent,
            t.received
        );
        assert!(
            run_queue < Duration::from_millis(30) || dut.last_attempts == 3,
            "the hog's attempt was returned though a later one was quiet"
        );
    }
}
