//! Counters before and after a run, the figures made from their difference, and how they are
//! printed.
//!
//! Everything is read from the data plane's own counters (`node_stats`, `demux_drops`,
//! `Vr::stats`, `port_stats`) and the generator's and sink's, always with the workers
//! stopped; a figure is the difference between two such reads around the timed run, so the
//! warm-up counts for nothing. Node cycles come as a mean per packet; the raw sum is that
//! mean times the node's packets (every node samples every vector), which is what is
//! subtracted.

use serde::Serialize;
use vrhost_dataplane::counters::N_DROPS;
use vrhost_dataplane::{Drop, Node, PortStats, WaitStats};

use super::session::Timed;
use super::topo::Built;
use super::traffic::Offer;
use super::{Dest, NexthopMode, Scenario};

/// Drop reasons the generator counts (a NIC's rx counters), outside the data plane's.
const RX_RING_FULL: &str = "rx-ring-full";
const RX_NO_BUFFER: &str = "rx-no-buffer";

/// Drop reasons that are "at ingress": before any forwarding work was spent on the packet
/// beyond demux.
const INGRESS: &[&str] = &[RX_RING_FULL, RX_NO_BUFFER, "vr-ingress-full"];

#[derive(Debug, Clone, Default)]
struct VrSum {
    rx: u64,
    tx: u64,
    punted: u64,
    icmp_sent: u64,
    flow_hits: u64,
    flow_misses: u64,
    neigh_miss: u64,
    /// Ingress waits, every VR's merged.
    wait: WaitStats,
}

/// Every counter the report uses, read at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Snap {
    /// Per node: packets, vectors, cycles.
    nodes: Vec<(u64, u64, f64)>,
    drops: [u64; N_DROPS],
    vr: VrSum,
    ports: Vec<PortStats>,
    /// Polls, idle polls, VRs the schedulers looked at.
    polls: (u64, u64, u64),
    /// Per worker: its deferral (a gauge; a difference keeps the later reading).
    deferral: Vec<u64>,
    /// Per worker: offered, generated, ring full, no buffer.
    gens: Vec<[u64; 4]>,
    /// Per worker: port-0 packets, port-0 bytes, port-1 packets, port-1 bytes.
    sinks: Vec<[u64; 4]>,
}

impl Snap {
    pub(crate) fn take(b: &Built) -> Snap {
        let nodes =
            b.dp.node_stats()
                .iter()
                .map(|n| (n.packets, n.vectors, n.cycles_per_packet * n.packets as f64))
                .collect();
        let mut drops = b.dp.demux_drops();
        let mut vr = VrSum::default();
        for v in &b.vrs {
            let s = v.stats();
            for (a, d) in drops.iter_mut().zip(s.drops) {
                *a += d;
            }
            vr.rx += s.rx_packets;
            vr.tx += s.tx_packets;
            vr.punted += s.punted;
            vr.icmp_sent += s.icmp_sent;
            vr.flow_hits += s.flow_hits;
            vr.flow_misses += s.flow_misses;
            vr.neigh_miss += s.neigh_miss;
            vr.wait.merge(&s.ingress_wait);
        }
        let ports = (0..b.dp.ports().len() as u16)
            .map(|p| b.dp.port_stats(p).unwrap_or_default())
            .collect();
        let gens = b
            .gens
            .iter()
            .map(|qs| {
                qs.iter().fold([0; 4], |a, g| {
                    [
                        a[0] + g.offered.get(),
                        a[1] + g.generated.get(),
                        a[2] + g.ring_full.get(),
                        a[3] + g.no_buffer.get(),
                    ]
                })
            })
            .collect();
        let sinks = b
            .sinks
            .iter()
            .map(|s| {
                [
                    s[0].packets.get(),
                    s[0].bytes.get(),
                    s[1].packets.get(),
                    s[1].bytes.get(),
                ]
            })
            .collect();
        let workers = b.dp.worker_stats();
        Snap {
            nodes,
            drops,
            vr,
            ports,
            polls: {
                let (p, i) = b.dp.polls();
                let scanned = workers.iter().map(|w| w.vrs_scanned).sum();
                (p, i, scanned)
            },
            deferral: workers.iter().map(|w| w.deferral_polls).collect(),
            gens,
            sinks,
        }
    }

    /// `self - before`, counter by counter.
    pub(crate) fn minus(&self, b: &Snap) -> Snap {
        let sub4 = |x: &[u64; 4], y: &[u64; 4]| core::array::from_fn(|i| x[i] - y[i]);
        Snap {
            nodes: self
                .nodes
                .iter()
                .zip(&b.nodes)
                .map(|(x, y)| (x.0 - y.0, x.1 - y.1, (x.2 - y.2).max(0.0)))
                .collect(),
            drops: core::array::from_fn(|i| self.drops[i] - b.drops[i]),
            vr: VrSum {
                rx: self.vr.rx - b.vr.rx,
                tx: self.vr.tx - b.vr.tx,
                punted: self.vr.punted - b.vr.punted,
                icmp_sent: self.vr.icmp_sent - b.vr.icmp_sent,
                flow_hits: self.vr.flow_hits - b.vr.flow_hits,
                flow_misses: self.vr.flow_misses - b.vr.flow_misses,
                neigh_miss: self.vr.neigh_miss - b.vr.neigh_miss,
                wait: self.vr.wait.since(&b.vr.wait),
            },
            ports: self
                .ports
                .iter()
                .zip(&b.ports)
                .map(|(x, y)| PortStats {
                    rx_packets: x.rx_packets - y.rx_packets,
                    rx_bytes: x.rx_bytes - y.rx_bytes,
                    tx_packets: x.tx_packets - y.tx_packets,
                    tx_bytes: x.tx_bytes - y.tx_bytes,
                    tx_full: x.tx_full - y.tx_full,
                    rx_dropped: x.rx_dropped - y.rx_dropped,
                })
                .collect(),
            polls: (
                self.polls.0 - b.polls.0,
                self.polls.1 - b.polls.1,
                self.polls.2 - b.polls.2,
            ),
            deferral: self.deferral.clone(),
            gens: self
                .gens
                .iter()
                .zip(&b.gens)
                .map(|(x, y)| sub4(x, y))
                .collect(),
            sinks: self
                .sinks
                .iter()
                .zip(&b.sinks)
                .map(|(x, y)| sub4(x, y))
                .collect(),
        }
    }
}

/// The run's settings as reported.
#[derive(Debug, Serialize)]
pub(crate) struct ConfigOut {
    pub(crate) vrs: usize,
    pub(crate) routes_per_vr: usize,
    pub(crate) dest: Dest,
    pub(crate) flows: Option<usize>,
    pub(crate) frame_size: usize,
    pub(crate) workers: usize,
    pub(crate) family: &'static str,
    pub(crate) rate_mpps_per_worker: Option<f64>,
    pub(crate) gen_queues: usize,
    pub(crate) rx_ring: usize,
    pub(crate) ingress_ring: usize,
    pub(crate) nexthops: NexthopMode,
    pub(crate) flow_cache: Option<usize>,
    pub(crate) flow_key: &'static str,
    pub(crate) warmup_s: f64,
    pub(crate) windows: usize,
    pub(crate) seed: u64,
}

/// One node's figures over the timed run.
#[derive(Debug, Serialize)]
pub(crate) struct NodeFig {
    pub(crate) node: &'static str,
    pub(crate) packets: u64,
    pub(crate) vectors: u64,
    pub(crate) packets_per_vector: f64,
    /// Mean cycles per packet through this node.
    pub(crate) cycles_per_packet: f64,
    /// This node's cycles divided by the packets carried (these add up over nodes).
    pub(crate) cycles_per_carried: f64,
}

/// One drop reason's count over the timed run.
#[derive(Debug, Serialize)]
pub(crate) struct DropFig {
    pub(crate) reason: &'static str,
    /// Where it is counted: a data-plane node, or "generator" (the modelled NIC).
    pub(crate) at: &'static str,
    pub(crate) packets: u64,
}

/// One worker's figures.
#[derive(Debug, Serialize)]
pub(crate) struct WorkerFig {
    pub(crate) worker: usize,
    pub(crate) core: Option<usize>,
    /// Whether its generator offered anything in this window.
    pub(crate) active: bool,
    pub(crate) seconds: f64,
    pub(crate) offered: u64,
    pub(crate) carried: u64,
    pub(crate) carried_mpps: f64,
    pub(crate) cycles_per_carried: f64,
}

/// The VRs' counters summed.
#[derive(Debug, Serialize)]
pub(crate) struct VrFig {
    pub(crate) rx_packets: u64,
    pub(crate) tx_packets: u64,
    pub(crate) punted: u64,
    pub(crate) icmp_sent: u64,
    pub(crate) flow_hits: u64,
    pub(crate) flow_misses: u64,
    pub(crate) flow_hit_ratio: f64,
    pub(crate) neigh_miss: u64,
    pub(crate) ingress_wait: WaitFig,
}

/// How long packets waited in their VR's ingress ring, every VR's samples together (one
/// packet a vector, see `vrhost_dataplane::wait`), in µs. Quantiles and the longest are
/// their bucket's upper bound (within 25 %); `None` without samples.
#[derive(Debug, Serialize)]
pub(crate) struct WaitFig {
    pub(crate) samples: u64,
    pub(crate) mean_us: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    pub(crate) p99_us: Option<f64>,
    pub(crate) max_us: Option<f64>,
}

impl WaitFig {
    fn new(w: &WaitStats) -> WaitFig {
        let us = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1e6);
        WaitFig {
            samples: w.samples(),
            mean_us: us(w.mean()),
            p50_us: us(w.quantile(0.5)),
            p99_us: us(w.quantile(0.99)),
            max_us: us(w.quantile(1.0)),
        }
    }
}

/// A port's counters.
#[derive(Debug, Serialize)]
pub(crate) struct PortFig {
    pub(crate) port: String,
    pub(crate) rx_packets: u64,
    pub(crate) tx_packets: u64,
    pub(crate) tx_full: u64,
    pub(crate) rx_dropped: u64,
}

/// One run's results.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) name: String,
    pub(crate) command: String,
    pub(crate) machine: String,
    pub(crate) config: ConfigOut,
    pub(crate) cores: Vec<String>,
    pub(crate) routes_loaded: usize,
    pub(crate) fib_setup_s: f64,
    pub(crate) distinct_destinations: usize,
    pub(crate) pool_slots: usize,
    pub(crate) fib_top_bits: u8,
    pub(crate) tsc_ghz: f64,
    /// Length of the reported (median) window.
    pub(crate) seconds: f64,
    /// Carried Mpps of every window, in order; the report is the median one.
    pub(crate) window_carried_mpps: Vec<f64>,
    pub(crate) offered_mpps: f64,
    pub(crate) carried_mpps: f64,
    /// Carried Mpps per active worker core (generator and sink included: they run on that
    /// core).
    pub(crate) mpps_per_core: f64,
    pub(crate) carried_of_offered: f64,
    /// Line rate the carried frames would fill (frame + preamble + gap), Gbit/s.
    pub(crate) carried_l1_gbps: f64,
    /// Worker-core cycles per carried packet, all included.
    pub(crate) cycles_per_packet: f64,
    /// Of those: the generator (the `port-rx` node).
    pub(crate) generator_cycles: f64,
    /// Of those: the data plane's nodes other than `port-rx` (sink included in `port-tx`).
    pub(crate) dataplane_node_cycles: f64,
    /// Of those: outside any node (poll loop, VR scheduling, ingress-ring pops).
    pub(crate) unaccounted_cycles: f64,
    /// TSC rate ÷ (cycles per packet − generator): what a core would forward if receiving
    /// cost nothing.
    pub(crate) dataplane_only_mpps_per_core: f64,
    pub(crate) nodes: Vec<NodeFig>,
    pub(crate) drops: Vec<DropFig>,
    pub(crate) drops_total: u64,
    pub(crate) drops_at_ingress: u64,
    pub(crate) drops_elsewhere: u64,
    pub(crate) returned_to_port0: u64,
    pub(crate) vr: VrFig,
    pub(crate) ports: Vec<PortFig>,
    pub(crate) polls: u64,
    pub(crate) idle_polls: u64,
    /// Owned VRs the schedulers looked at, over all polls (asleep ones are skipped).
    pub(crate) vrs_scanned: u64,
    /// Per worker, at the window's end: how many polls a VR with a short backlog may wait
    /// under pressure (`WorkerStats::deferral_polls`).
    pub(crate) deferral_polls: Vec<u64>,
    pub(crate) workers: Vec<WorkerFig>,
}

/// Figures from the counter difference `d`, the workers' timings and what they were offered.
#[expect(
    clippy::too_many_arguments,
    reason = "one call site per mode; a struct adds nothing"
)]
pub(crate) fn make(
    sc: &Scenario,
    b: &Built,
    d: &Snap,
    timed: &[Timed],
    offers: &[Offer],
    cores: &[Option<usize>],
    assignment: Vec<String>,
    command: String,
) -> Report {
    let carried: u64 = d.sinks.iter().map(|s| s[2]).sum();
    let offered: u64 = d.gens.iter().map(|g| g[0]).sum();
    // Cycles and time of the workers that had traffic: an idle one's core was free.
    let on = |i: usize| offers.get(i).is_none_or(|o| *o != Offer::Off);
    let busy: Vec<Timed> = (0..timed.len())
        .filter(|&i| on(i))
        .map(|i| timed[i])
        .collect();
    let secs = busy.iter().map(|t| t.0).sum::<f64>() / busy.len().max(1) as f64;
    let ticks: u64 = busy.iter().map(|t| t.1).sum();
    let tsc_hz = ticks as f64 / busy.iter().map(|t| t.0).sum::<f64>();
    let workers: Vec<WorkerFig> = timed
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let c = d.sinks[i][2];
            WorkerFig {
                worker: i,
                core: cores[i],
                active: on(i),
                seconds: t.0,
                offered: d.gens[i][0],
                carried: c,
                carried_mpps: c as f64 / t.0 / 1e6,
                cycles_per_carried: t.1 as f64 / c.max(1) as f64,
            }
        })
        .collect();
    let active = workers.iter().filter(|w| w.active).count().max(1);
    let per_core = workers.iter().map(|w| w.carried_mpps).sum::<f64>() / active as f64;
    let cpp = ticks as f64 / carried.max(1) as f64;
    let per_carried = |cyc: f64| cyc / carried.max(1) as f64;
    let nodes: Vec<NodeFig> = Node::ALL
        .iter()
        .zip(&d.nodes)
        .map(|(n, &(packets, vectors, cyc))| NodeFig {
            node: n.name(),
            packets,
            vectors,
            packets_per_vector: packets as f64 / vectors.max(1) as f64,
            cycles_per_packet: cyc / packets.max(1) as f64,
            cycles_per_carried: per_carried(cyc),
        })
        .collect();
    let gen_cyc = nodes
        .iter()
        .find(|n| n.node == Node::Rx.name())
        .map_or(0.0, |n| n.cycles_per_carried);
    let node_sum: f64 = nodes.iter().map(|n| n.cycles_per_carried).sum();

    let mut drops: Vec<DropFig> = Drop::ALL
        .iter()
        .filter(|r| d.drops[**r as usize] > 0)
        .map(|r| DropFig {
            reason: r.name(),
            at: r.node().name(),
            packets: d.drops[*r as usize],
        })
        .collect();
    let ring_full: u64 = d.gens.iter().map(|g| g[2]).sum();
    let no_buf: u64 = d.gens.iter().map(|g| g[3]).sum();
    for (reason, n) in [(RX_RING_FULL, ring_full), (RX_NO_BUFFER, no_buf)] {
        if n > 0 {
            drops.insert(
                0,
                DropFig {
                    reason,
                    at: "generator",
                    packets: n,
                },
            );
        }
    }
    let drops_total: u64 = drops.iter().map(|x| x.packets).sum();
    let drops_at_ingress: u64 = drops
        .iter()
        .filter(|x| INGRESS.contains(&x.reason))
        .map(|x| x.packets)
        .sum();
    let lookups = d.vr.flow_hits + d.vr.flow_misses;
    let dp_cycles = cpp - gen_cyc;
    Report {
        name: sc.name.clone(),
        command,
        machine: crate::host::describe_with_load(),
        config: ConfigOut {
            vrs: sc.vrs,
            routes_per_vr: sc.routes,
            dest: sc.dest,
            flows: sc.flows,
            frame_size: sc.frame_size,
            workers: sc.workers,
            family: if sc.ipv6 { "IPv6" } else { "IPv4" },
            rate_mpps_per_worker: sc.rate_pps.map(|r| r / 1e6),
            gen_queues: sc.gen_queues,
            rx_ring: sc.rx_ring,
            ingress_ring: sc.ingress_ring,
            nexthops: sc.nexthops,
            flow_cache: sc.flow_cache,
            flow_key: sc.flow_key.name(),
            warmup_s: sc.warmup,
            windows: sc.windows,
            seed: sc.seed,
        },
        cores: assignment,
        routes_loaded: b.routes,
        fib_setup_s: b.fib_s,
        distinct_destinations: b.distinct_dsts,
        pool_slots: b.pool_slots,
        fib_top_bits: b.top_bits,
        tsc_ghz: tsc_hz / 1e9,
        seconds: secs,
        window_carried_mpps: Vec::new(),
        offered_mpps: offered as f64 / secs / 1e6,
        carried_mpps: carried as f64 / secs / 1e6,
        mpps_per_core: per_core,
        carried_of_offered: carried as f64 / offered.max(1) as f64,
        carried_l1_gbps: carried as f64 * (sc.frame_size + 20) as f64 * 8.0 / secs / 1e9,
        cycles_per_packet: cpp,
        generator_cycles: gen_cyc,
        dataplane_node_cycles: node_sum - gen_cyc,
        unaccounted_cycles: cpp - node_sum,
        dataplane_only_mpps_per_core: tsc_hz / dp_cycles.max(1.0) / 1e6,
        nodes,
        drops,
        drops_total,
        drops_at_ingress,
        drops_elsewhere: drops_total - drops_at_ingress,
        returned_to_port0: d.sinks.iter().map(|s| s[0]).sum(),
        vr: VrFig {
            rx_packets: d.vr.rx,
            tx_packets: d.vr.tx,
            punted: d.vr.punted,
            icmp_sent: d.vr.icmp_sent,
            flow_hits: d.vr.flow_hits,
            flow_misses: d.vr.flow_misses,
            flow_hit_ratio: d.vr.flow_hits as f64 / lookups.max(1) as f64,
            neigh_miss: d.vr.neigh_miss,
            ingress_wait: WaitFig::new(&d.vr.wait),
        },
        ports: b
            .dp
            .ports()
            .iter()
            .zip(&d.ports)
            .map(|(name, p)| PortFig {
                port: name.clone(),
                rx_packets: p.rx_packets,
                tx_packets: p.tx_packets,
                tx_full: p.tx_full,
                rx_dropped: p.rx_dropped,
            })
            .collect(),
        polls: d.polls.0,
        idle_polls: d.polls.1,
        vrs_scanned: d.polls.2,
        deferral_polls: d.deferral.clone(),
        workers,
    }
}

fn describe(r: &Report) -> String {
    let c = &r.config;
    let mix = match c.dest {
        Dest::Uniform => "uniform",
        Dest::Routed => "routed",
        Dest::Zipf => "Zipf",
    };
    let flows = c.flows.map_or(String::new(), |f| format!(", {f} flows"));
    format!(
        "{} VR{} × {} routes ({}), {mix} destinations{flows}, {}-byte frames, {} worker{}",
        c.vrs,
        if c.vrs == 1 { "" } else { "s" },
        thousands(c.routes_per_vr as u64),
        c.family,
        c.frame_size,
        c.workers,
        if c.workers == 1 { "" } else { "s" },
    )
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

pub(crate) fn print(r: &Report) {
    println!("vrbench inproc [{}] — {}", r.name, describe(r));
    println!("  command: {}", r.command);
    println!("  machine: {}; TSC {:.3} GHz", r.machine, r.tsc_ghz);
    println!(
        "  cores: {}; generator and sink run inside each worker's poll on its core; the main \
         thread is unpinned and asleep while measuring",
        r.cores.join(", ")
    );
    println!(
        "  setup: {} routes loaded in {:.1} s (FIB top level {} bits); {} distinct destinations; \
         {} pool slots; {:.1} s warm-up",
        thousands(r.routes_loaded as u64),
        r.fib_setup_s,
        r.fib_top_bits,
        thousands(r.distinct_destinations as u64),
        thousands(r.pool_slots as u64),
        r.config.warmup_s
    );
    let w: Vec<String> = r
        .window_carried_mpps
        .iter()
        .map(|m| format!("{m:.2}"))
        .collect();
    println!(
        "  windows of {:.2} s, carried Mpps: {} — figures below are from the median window",
        r.seconds,
        w.join(", ")
    );
    let rate = r
        .config
        .rate_mpps_per_worker
        .map_or("unlimited: a full vector every poll".into(), |m| {
            format!("{m:.2} Mpps per worker, modelled NIC ring")
        });
    println!(
        "\n  offered  {:>8.2} Mpps   ({rate}, {} generator queue{} per worker)",
        r.offered_mpps,
        r.config.gen_queues,
        if r.config.gen_queues == 1 { "" } else { "s" }
    );
    println!(
        "  carried  {:>8.2} Mpps   ({:.1} % of offered; {:.2} Gbit/s at L1)",
        r.carried_mpps,
        100.0 * r.carried_of_offered,
        r.carried_l1_gbps
    );
    println!("  per worker core {:>5.2} Mpps", r.mpps_per_core);
    for w in &r.workers {
        println!(
            "    worker {}: {:.2} Mpps, {:.0} cycles/packet",
            w.worker, w.carried_mpps, w.cycles_per_carried
        );
    }
    println!(
        "  cycles per carried packet: {:.1} = generator (port-rx) {:.1} + data-plane nodes \
         {:.1} + outside nodes {:.1}",
        r.cycles_per_packet, r.generator_cycles, r.dataplane_node_cycles, r.unaccounted_cycles
    );
    println!(
        "  data plane alone (without the generator's cycles): {:.2} Mpps per core",
        r.dataplane_only_mpps_per_core
    );
    println!(
        "\n  {:<12} {:>13} {:>9} {:>12} {:>16}",
        "node", "packets", "pkts/vec", "cycles/pkt", "per carried pkt"
    );
    for n in r.nodes.iter().filter(|n| n.packets > 0) {
        println!(
            "  {:<12} {:>13} {:>9.1} {:>12.1} {:>16.1}",
            n.node, n.packets, n.packets_per_vector, n.cycles_per_packet, n.cycles_per_carried
        );
    }
    if r.drops.is_empty() {
        println!("\n  drops: none");
    } else {
        println!(
            "\n  drops: {} in all, {} at ingress, {} elsewhere",
            r.drops_total, r.drops_at_ingress, r.drops_elsewhere
        );
        for x in &r.drops {
            println!("    {:<20} {:<10} {:>13}", x.reason, x.at, x.packets);
        }
    }
    let v = &r.vr;
    println!(
        "  VRs: rx {} tx {}; flow cache {} hits, {} misses ({:.1} % hits); punted {}, ICMP \
         sent {}, neighbour misses {}; returned to port 0: {}",
        v.rx_packets,
        v.tx_packets,
        v.flow_hits,
        v.flow_misses,
        100.0 * v.flow_hit_ratio,
        v.punted,
        v.icmp_sent,
        v.neigh_miss,
        r.returned_to_port0
    );
    let w = &v.ingress_wait;
    if w.samples > 0 {
        let us = |x: Option<f64>| x.map_or("-".into(), |u| format!("{u:.1}"));
        println!(
            "  ingress wait (µs; {} packets sampled, one a vector): mean {}, p50 {}, p99 {}, \
             max {}",
            w.samples,
            us(w.mean_us),
            us(w.p50_us),
            us(w.p99_us),
            us(w.max_us)
        );
    }
    for p in &r.ports {
        println!(
            "  port {}: rx {} tx {} tx-full {} rx-dropped {}",
            p.port, p.rx_packets, p.tx_packets, p.tx_full, p.rx_dropped
        );
    }
    println!(
        "  polls {} (idle {}); VRs looked at by the scheduler: {:.1} a poll; deferral {:?} polls",
        r.polls,
        r.idle_polls,
        r.vrs_scanned as f64 / r.polls.max(1) as f64,
        r.deferral_polls
    );
}

/// One line of the suite's summary.
#[derive(Debug, Serialize)]
pub(crate) struct SuiteRow {
    pub(crate) scenario: String,
    pub(crate) figure: String,
    pub(crate) mpps_per_core: f64,
    pub(crate) value: f64,
    pub(crate) unit: &'static str,
    /// `None` for informational rows.
    pub(crate) target: Option<f64>,
    pub(crate) of_target: Option<f64>,
    pub(crate) met: Option<bool>,
}

impl SuiteRow {
    pub(crate) fn new(
        r: &Report,
        figure: &str,
        value: f64,
        target: f64,
        unit: &'static str,
    ) -> SuiteRow {
        SuiteRow {
            scenario: r.name.clone(),
            figure: figure.into(),
            mpps_per_core: r.mpps_per_core,
            value,
            unit,
            target: Some(target),
            of_target: Some(value / target),
            met: Some(value >= target),
        }
    }

    pub(crate) fn info(r: &Report, figure: &str, value: f64) -> SuiteRow {
        SuiteRow {
            scenario: r.name.clone(),
            figure: figure.into(),
            mpps_per_core: r.mpps_per_core,
            value,
            unit: "×",
            target: None,
            of_target: None,
            met: None,
        }
    }

    /// The target also needs `ok` (e.g. no drops outside ingress).
    pub(crate) fn also_requires(mut self, ok: bool) -> SuiteRow {
        self.met = self.met.map(|m| m && ok);
        self
    }
}

/// The suite's results.
#[derive(Debug, Serialize)]
pub(crate) struct SuiteReport {
    pub(crate) machine: String,
    pub(crate) tsc_ghz: f64,
    pub(crate) rows: Vec<SuiteRow>,
    pub(crate) scenarios: Vec<Report>,
}

pub(crate) fn print_suite(s: &SuiteReport) {
    for r in &s.scenarios {
        print(r);
        println!();
    }
    println!("machine: {}; TSC {:.3} GHz", s.machine, s.tsc_ghz);
    println!(
        "\n{:<15} {:>9}  {:>8} {:>8} {:>9} {:>5}  figure",
        "scenario", "Mpps/core", "value", "target", "÷ target", "met"
    );
    for row in &s.rows {
        let (t, of, met) = match (row.target, row.of_target, row.met) {
            (Some(t), Some(o), Some(m)) => (
                format!("{t:.2}"),
                format!("{o:.2}"),
                if m { "yes" } else { "NO" }.to_string(),
            ),
            _ => ("—".into(), "—".into(), "—".into()),
        };
        println!(
            "{:<15} {:>9.2}  {:>7.2}{} {:>8} {:>9} {:>5}  {}",
            row.scenario,
            row.mpps_per_core,
            row.value,
            if row.unit == "×" { "×" } else { " " },
            t,
            of,
            met,
            row.figure
        );
    }
}
