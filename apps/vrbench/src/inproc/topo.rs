//! The data plane under test: VRs with their interfaces, routes and neighbours, and the
//! traffic made for them.
//!
//! Two mem-like ports: port 0 (`gen`), whose receive queues are the generators, and port 1
//! (`sink`). Every VR has an ingress VIF on port 0 and an egress VIF on port 1, each with a
//! MAC of its own, so demux is by destination MAC as in the macvlan model. Routes are the
//! seeded generated table (`vrhost_fib::tablegen`, seed = `--seed` + VR index, so one VR gets
//! exactly the table `vrbench fib` measures), with each next hop moved onto the egress VIF
//! and given a static neighbour: the table's 32 next-hop sets, a quarter of them ECMP groups,
//! stay as they are (`--nexthops one` puts every route on one neighbour instead). A **default
//! route** via a neighbour on the egress VIF is added, so that uniformly random destinations
//! that no generated prefix covers are forwarded too, not dropped as `no-route` with ICMP
//! errors. Destinations the VR would not forward (multicast, broadcast, its own addresses and
//! attached subnets) are left out of the mixes.
//!
//! Each VR is owned by worker `index % workers`, and each worker's generator sends only to the
//! VRs that worker owns: a packet stays on one core (DESIGN.md: handing packets between cores
//! caps forwarding near 1 Mpps on these machines).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::ring::ring;
use vrhost_dataplane::{
    Dataplane, DataplaneConfig, IfAddr, Pool, VECTOR, VifConfig, Vr, VrConfig, Worker,
};
use vrhost_fib::{Family, NextHop, NextHopSet, Prefix, V4, V6, tablegen};
use vrhost_wire::EthernetAddress;

use super::traffic::{
    Dst4, Dst6, GenConfig, GenCtl, GenRx, GenStats, Offer, OrderCheck, Seq, SinkStats, SinkTx,
    Template,
};
use super::{Dest, NexthopMode, Scenario};

/// Port the generators feed.
pub(crate) const PORT_GEN: u16 = 0;
/// Port the sinks drain.
pub(crate) const PORT_SINK: u16 = 1;
/// VIF index of the egress VIF in every VR (added second).
const OUT_VIF: u16 = 1;

/// Destinations per worker sequence (a power of two).
const SEQ_LEN: usize = 1 << 20;

const TESTER_MAC: EthernetAddress = EthernetAddress([0x02, 0x76, 0x72, 0xff, 0, 1]);
const SRC4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const IN4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const OUT4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 254);
const GW4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 200);
const SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
const IN6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
const OUT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);
const UDP_SRC: u16 = 49152;
const UDP_DST: u16 = 7;

/// VR `vr`'s ingress VIF MAC, `02:76:72:00:hi:lo`: distinct for every VR id (16 bits), and
/// from the egress VIFs' (`out_mac`). The in-process DUT of `measure` uses the same.
pub(crate) fn in_mac(vr: usize) -> EthernetAddress {
    EthernetAddress([0x02, 0x76, 0x72, 0x00, (vr >> 8) as u8, vr as u8])
}

/// VR `vr`'s egress VIF MAC, `02:76:72:01:hi:lo`.
pub(crate) fn out_mac(vr: usize) -> EthernetAddress {
    EthernetAddress([0x02, 0x76, 0x72, 0x01, (vr >> 8) as u8, vr as u8])
}

fn neigh_mac(a: IpAddr) -> EthernetAddress {
    let o = match a {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    };
    EthernetAddress([0x02, 0x76, 0x72, 0xfe, 0, o])
}

/// The IPv6 neighbour standing in for the table's IPv4 next hop `a` (192.0.2.n → 2001:db8:2::1:n).
fn v6_neighbour(a: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 1, u16::from(a.octets()[3]))
}

/// A generated table, shared between the VRs and scenarios that use it.
type Routes<F> = Arc<Vec<(Prefix<F>, NextHopSet)>>;

/// Generated tables, kept across the scenarios of one invocation (generation is the slow part
/// of setting up).
#[derive(Debug, Default)]
pub(crate) struct Tables {
    v4: HashMap<(usize, u64), Routes<V4>>,
    v6: HashMap<(usize, u64), Routes<V6>>,
}

impl Tables {
    fn v4(&mut self, n: usize, seed: u64) -> Routes<V4> {
        self.v4
            .entry((n, seed))
            .or_insert_with(|| Arc::new(tablegen::ipv4_table(n, seed)))
            .clone()
    }

    fn v6(&mut self, n: usize, seed: u64) -> Routes<V6> {
        self.v6
            .entry((n, seed))
            .or_insert_with(|| Arc::new(tablegen::ipv6_table(n, seed)))
            .clone()
    }
}

/// What was built, ready to run.
pub(crate) struct Built {
    pub(crate) dp: Dataplane,
    pub(crate) vrs: Vec<Arc<Vr>>,
    pub(crate) workers: Vec<Worker>,
    /// `[worker][queue]`.
    pub(crate) gens: Vec<Vec<Arc<GenStats>>>,
    /// `[worker][port]`.
    pub(crate) sinks: Vec<Vec<Arc<SinkStats>>>,
    /// Each worker's offered load (all off until set); with `--queue-per-vr`, each VR's.
    pub(crate) ctl: Vec<Arc<GenCtl>>,
    /// With `--queue-per-vr`: each VR's (first) generator queue's counters, by VR index.
    pub(crate) vr_gens: Vec<Arc<GenStats>>,
    /// With `--queue-per-vr` (IPv4): the sinks' check that each VR's frames stay in order.
    pub(crate) order: Arc<super::traffic::OrderCheck>,
    /// Routes installed over all VRs (generated + default).
    pub(crate) routes: usize,
    /// Seconds spent generating tables and loading FIBs.
    pub(crate) fib_s: f64,
    /// Distinct (VR, destination) pairs in the generators' sequences.
    pub(crate) distinct_dsts: usize,
    /// Slots in the packet pool.
    pub(crate) pool_slots: usize,
    /// Top-level bits of each VR's FIB (of the family in use).
    pub(crate) top_bits: u8,
}

/// Build the data plane, its VRs, and one worker per `--workers` with its generators and
/// sinks.
pub(crate) fn build(sc: &Scenario, tables: &mut Tables, tsc_hz: f64) -> anyhow::Result<Built> {
    let frame_len = sc.frame_size - 4;
    let headers = if sc.ipv6 { 14 + 40 + 8 } else { 14 + 20 + 8 };
    if frame_len < headers || sc.frame_size < 64 || sc.frame_size > 1518 {
        bail!(
            "--frame-size {} must be 64..=1518 and hold the {headers} header bytes plus FCS",
            sc.frame_size
        );
    }
    if sc.vrs == 0 || sc.vrs > 4096 {
        bail!("--vrs {} must be 1..=4096", sc.vrs);
    }
    if sc.workers == 0 || sc.vrs < sc.workers {
        bail!(
            "--workers {} needs at least as many VRs (--vrs {}): each worker forwards for the \
             VRs it owns, and its generator sends only to those, so packets stay on its core",
            sc.workers,
            sc.vrs
        );
    }
    if sc.flows == Some(0) {
        bail!("--flows 0: give at least 1, or leave it out for a fresh destination per packet");
    }
    if sc.gen_queues == 0 || sc.gen_queues > 16 {
        bail!("--gen-queues {} must be 1..=16", sc.gen_queues);
    }
    if sc.rx_ring < VECTOR || sc.rx_ring > 1 << 16 {
        bail!("--rx-ring {} must be {VECTOR}..=65536", sc.rx_ring);
    }

    // Slots: what the generators prime and have in flight, a few full ingress rings (an
    // overloaded VR's), what a VR gathers under pressure (32: twice the vector below which
    // the worker's deferral grows, which it does only while half the pool is free), and the
    // stages. No more: the pool's free list is a FIFO, so a slot freed to it (a drop) comes
    // back only after every other free slot has, and a large pool makes every reuse a cache
    // and TLB miss.
    let per_gen = sc.rx_ring + 2 * VECTOR;
    // Generator queues in all: with `--queue-per-vr` `--gen-queues` per VR (each primed like
    // a NIC queue of its own), else `--gen-queues` per worker.
    let queues = if sc.queue_per_vr {
        sc.vrs * sc.gen_queues
    } else {
        sc.workers * sc.gen_queues
    };
    let slots = sc.pool_slots.unwrap_or(
        queues * per_gen
            + sc.vrs.min(8) * sc.workers * sc.ingress_ring
            + sc.vrs * sc.workers * VECTOR / 8
            + 4 * VECTOR,
    );
    if slots < queues * VECTOR || slots > 1 << 24 {
        bail!("--pool-slots {slots} must hold a vector per generator queue, and at most 2^24");
    }
    let pool = Pool::new(slots);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: sc.workers,
            ports: vec!["gen".into(), "sink".into()],
            ..Default::default()
        },
    )?;
    dp.set_rx_coalesce(std::time::Duration::from_micros(sc.rx_coalesce_us))
        .map_err(|e| anyhow::anyhow!("--rx-coalesce-us: {e}"))?;
    dp.set_max_deferral(std::time::Duration::from_micros(sc.max_deferral_us))
        .map_err(|e| anyhow::anyhow!("--max-deferral-us: {e}"))?;

    let t0 = Instant::now();
    // Full tables get the layout the FIB recommends for them; small ones a small top level
    // (4 bytes × 2^bits per VR).
    let full = sc.routes >= 100_000;
    let top4 = if full { V4::TOP_BITS } else { 12 };
    let top6 = if full { V6::TOP_BITS } else { 16 };
    let mut vrs = Vec::with_capacity(sc.vrs);
    let mut routes = 0;
    for k in 0..sc.vrs {
        let mut cfg = VrConfig::new(format!("vr{k}"));
        cfg.worker = Some(k % sc.workers);
        cfg.ingress_ring = sc.ingress_ring;
        cfg.fib4_top_bits = top4;
        cfg.fib6_top_bits = top6;
        if let Some(n) = sc.flow_cache {
            cfg.flow_cache = n;
        }
        cfg.flow_cache_key = sc.flow_key;
        let vr = dp.add_vr(cfg)?;
        let seed = sc.seed + k as u64;
        let nbrs = if sc.ipv6 {
            let t = tables.v6(sc.routes, seed);
            load6(&vr, &t, sc.nexthops)?
        } else {
            let t = tables.v4(sc.routes, seed);
            load4(&vr, &t, sc.nexthops)?
        };
        routes += sc.routes + 1;
        let a = dp.add_vif(
            vr.name(),
            vif(
                "in",
                PORT_GEN,
                in_mac(k),
                vec![IfAddr::V4(IN4, 24), IfAddr::V6(IN6, 64)],
            ),
        )?;
        let b = dp.add_vif(
            vr.name(),
            vif(
                "out",
                PORT_SINK,
                out_mac(k),
                vec![IfAddr::V4(OUT4, 24), IfAddr::V6(OUT6, 64)],
            ),
        )?;
        debug_assert_eq!((a, b), (0, OUT_VIF));
        for n in nbrs {
            vr.neigh.set(OUT_VIF, n, neigh_mac(n));
        }
        vrs.push(vr);
    }
    let fib_s = t0.elapsed().as_secs_f64();

    let templates: Vec<Template> = (0..sc.vrs)
        .map(|k| {
            if sc.ipv6 {
                template6(in_mac(k), frame_len)
            } else {
                template4(in_mac(k), frame_len)
            }
        })
        .collect();

    let mut workers = Vec::new();
    let mut gens = Vec::new();
    let mut sinks = Vec::new();
    let mut ctls = Vec::new();
    let mut distinct_dsts = 0;
    let vr_ctls: Vec<Arc<GenCtl>> = (0..sc.vrs).map(|_| GenCtl::new(Offer::Off)).collect();
    let order = OrderCheck::new(sc.vrs);
    let mut vr_gens: Vec<Option<Arc<GenStats>>> = vec![None; sc.vrs];
    for w in 0..sc.workers {
        let owned: Vec<usize> = (w..sc.vrs).step_by(sc.workers).collect();
        if sc.queue_per_vr {
            let mut rx: Vec<(u16, Box<dyn RxQueue>)> = Vec::new();
            let mut producers = Vec::new();
            let mut wg = Vec::new();
            for &k in &owned {
                let (seq, distinct) = if sc.ipv6 {
                    sequence::<V6>(sc, &vrs, &[k], tables, w)?
                } else {
                    sequence::<V4>(sc, &vrs, &[k], tables, w)?
                };
                distinct_dsts += distinct;
                let seq = Arc::new(seq);
                // Stamped for the order check with one queue per VR only: a VR's queues
                // have no order between them.
                let stamp = !sc.ipv6 && sc.gen_queues == 1;
                for q in 0..sc.gen_queues {
                    let (mut prod, cons) = ring(per_gen.next_power_of_two());
                    let (g, st) = GenRx::new(
                        GenConfig {
                            templates: vec![templates[k].clone()].into(),
                            seq: seq.clone(),
                            start: q * (SEQ_LEN / sc.gen_queues),
                            ctl: vr_ctls[k].clone(),
                            queues: sc.gen_queues,
                            tsc_hz,
                            rx_ring: sc.rx_ring,
                            stamp,
                        },
                        &pool,
                        cons,
                        &mut prod,
                    );
                    producers.push(prod);
                    rx.push((PORT_GEN, Box::new(g)));
                    if q == 0 {
                        vr_gens[k] = Some(st.clone());
                    }
                    wg.push(st);
                }
            }
            let (s0, st0) = SinkTx::new(Vec::new(), frame_len);
            let (mut s1, st1) = SinkTx::new(producers, frame_len);
            if !sc.ipv6 && sc.gen_queues == 1 {
                s1.check_order(order.clone());
            }
            let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(s0), Box::new(s1)];
            workers.push(dp.worker(w, rx, tx)?);
            gens.push(wg);
            sinks.push(vec![st0, st1]);
            continue;
        }
        let (seq, distinct) = if sc.ipv6 {
            sequence::<V6>(sc, &vrs, &owned, tables, w)?
        } else {
            sequence::<V4>(sc, &vrs, &owned, tables, w)?
        };
        distinct_dsts += distinct;
        let seq = Arc::new(seq);
        let tpl: Box<[Template]> = owned.iter().map(|&k| templates[k].clone()).collect();
        let mut rx: Vec<(u16, Box<dyn RxQueue>)> = Vec::new();
        let mut producers = Vec::new();
        let mut wg = Vec::new();
        let ctl = GenCtl::new(Offer::Off);
        for q in 0..sc.gen_queues {
            let (mut prod, cons) = ring(per_gen.next_power_of_two());
            let (g, st) = GenRx::new(
                GenConfig {
                    templates: tpl.clone(),
                    seq: seq.clone(),
                    start: q * (SEQ_LEN / sc.gen_queues),
                    ctl: ctl.clone(),
                    queues: sc.gen_queues,
                    tsc_hz,
                    rx_ring: sc.rx_ring,
                    stamp: false,
                },
                &pool,
                cons,
                &mut prod,
            );
            producers.push(prod);
            rx.push((PORT_GEN, Box::new(g)));
            wg.push(st);
        }
        // Port 0's sink takes what goes back toward the generator (ICMP errors): not the
        // generator's frames, so freed to the pool. Port 1's recycles.
        let (s0, st0) = SinkTx::new(Vec::new(), frame_len);
        let (s1, st1) = SinkTx::new(producers, frame_len);
        let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(s0), Box::new(s1)];
        workers.push(dp.worker(w, rx, tx)?);
        gens.push(wg);
        sinks.push(vec![st0, st1]);
        ctls.push(ctl);
    }
    if sc.queue_per_vr {
        ctls = vr_ctls;
    }
    Ok(Built {
        dp,
        vrs,
        workers,
        gens,
        sinks,
        ctl: ctls,
        vr_gens: vr_gens.into_iter().flatten().collect(),
        order,
        routes,
        fib_s,
        distinct_dsts,
        pool_slots: slots,
        top_bits: if sc.ipv6 { top6 } else { top4 },
    })
}

fn vif(name: &str, port: u16, mac: EthernetAddress, addrs: Vec<IfAddr>) -> VifConfig {
    VifConfig {
        name: name.into(),
        port,
        vlan: None,
        key: Default::default(),
        mac,
        mtu: 1500,
        addrs,
    }
}

/// The table's next-hop sets moved onto the egress VIF (`map` turns the table's neighbour
/// address into the one to use). Returns the remapping and the neighbours it uses.
fn remap<'a>(
    sets: impl Iterator<Item = &'a NextHopSet>,
    mode: NexthopMode,
    map: impl Fn(Ipv4Addr) -> IpAddr,
    gw: IpAddr,
) -> anyhow::Result<(HashMap<NextHopSet, NextHopSet>, HashSet<IpAddr>)> {
    let mut m = HashMap::new();
    let mut nbrs = HashSet::from([gw]);
    let via = |addr| NextHop::Via {
        addr,
        ifindex: u32::from(OUT_VIF),
    };
    for s in sets {
        if m.contains_key(s) {
            continue;
        }
        let new = match mode {
            NexthopMode::One => NextHopSet::one(via(gw)),
            NexthopMode::Table => {
                let hops: Vec<NextHop> = s
                    .hops()
                    .iter()
                    .map(|h| match *h {
                        NextHop::Via {
                            addr: IpAddr::V4(a),
                            ..
                        } => {
                            let n = map(a);
                            nbrs.insert(n);
                            via(n)
                        }
                        _ => via(gw),
                    })
                    .collect();
                NextHopSet::ecmp(hops)?
            }
        };
        m.insert(s.clone(), new);
    }
    Ok((m, nbrs))
}

fn load4(
    vr: &Vr,
    t: &[(Prefix<V4>, NextHopSet)],
    mode: NexthopMode,
) -> anyhow::Result<HashSet<IpAddr>> {
    let gw = IpAddr::V4(GW4);
    let (m, nbrs) = remap(t.iter().map(|r| &r.1), mode, IpAddr::V4, gw)?;
    let default = (Prefix::new_masked(Ipv4Addr::UNSPECIFIED, 0), m_default(gw));
    vr.fib4
        .load(
            t.iter()
                .map(|(p, s)| (*p, m[s].clone()))
                .chain(std::iter::once(default)),
        )
        .context("loading the IPv4 table")?;
    Ok(nbrs)
}

fn load6(
    vr: &Vr,
    t: &[(Prefix<V6>, NextHopSet)],
    mode: NexthopMode,
) -> anyhow::Result<HashSet<IpAddr>> {
    let gw = IpAddr::V6(v6_neighbour(GW4));
    let (m, nbrs) = remap(
        t.iter().map(|r| &r.1),
        mode,
        |a| IpAddr::V6(v6_neighbour(a)),
        gw,
    )?;
    let default = (Prefix::new_masked(Ipv6Addr::UNSPECIFIED, 0), m_default(gw));
    vr.fib6
        .load(
            t.iter()
                .map(|(p, s)| (*p, m[s].clone()))
                .chain(std::iter::once(default)),
        )
        .context("loading the IPv6 table")?;
    Ok(nbrs)
}

fn m_default(gw: IpAddr) -> NextHopSet {
    NextHopSet::one(NextHop::Via {
        addr: gw,
        ifindex: u32::from(OUT_VIF),
    })
}

/// Whether the VR forwards to `a` via a neighbour (not local, attached, or special).
fn forwards<F: Family>(fib: &vrhost_fib::Table<F>, a: F::Addr, g: &vrhost_fib::Guard) -> bool {
    fib.lookup(a, g)
        .and_then(|id| fib.nexthops(id, g))
        .is_some_and(|s| s.hops().iter().all(|h| matches!(h, NextHop::Via { .. })))
}

/// `n` destinations of the mix for one VR, all forwardable; distinct if `distinct`.
fn dests<F: Fam>(
    mix: Dest,
    table: &[(Prefix<F>, NextHopSet)],
    n: usize,
    seed: u64,
    distinct: bool,
    ok: impl Fn(F::Addr) -> bool,
) -> Vec<F::Addr> {
    let mut out = Vec::with_capacity(n);
    let mut seen = HashSet::new();
    let mut round = 0u64;
    while out.len() < n && round < 64 {
        let want = (n - out.len()) * 2 + 16;
        let s = seed.wrapping_add(round.wrapping_mul(0x9e37_79b9));
        let cand = match mix {
            Dest::Uniform => F::uniform(want, s),
            Dest::Routed => tablegen::routed(table, want, s),
            Dest::Zipf => tablegen::zipf(table, (1 << 20).min(want), 1.0, want, s),
        };
        for a in cand {
            if out.len() == n {
                break;
            }
            if ok(a) && (!distinct || seen.insert(a)) {
                out.push(a);
            }
        }
        round += 1;
    }
    out
}

/// What the sequence builder needs per address family.
trait Fam: Family<Addr: Eq + std::hash::Hash> + Sized {
    type D;
    fn table(t: &mut Tables, n: usize, seed: u64) -> Routes<Self>;
    fn ok(vr: &Vr, a: Self::Addr, g: &vrhost_fib::Guard) -> bool;
    fn dst(a: Self::Addr, vr: u32) -> Self::D;
    /// `n` uniformly random destinations.
    fn uniform(n: usize, seed: u64) -> Vec<Self::Addr>;
    fn seq(s: Box<[Self::D]>) -> Seq;
}

impl Fam for V4 {
    type D = Dst4;
    fn table(t: &mut Tables, n: usize, seed: u64) -> Routes<V4> {
        t.v4(n, seed)
    }
    /// What a router forwards at all: no multicast or broadcast, nothing on network 0 or
    /// 127 and nothing link-local (`ip4-input` drops those whatever the routes say).
    fn ok(vr: &Vr, a: Ipv4Addr, g: &vrhost_fib::Guard) -> bool {
        !a.is_multicast()
            && !a.is_broadcast()
            && !matches!(a.octets()[0], 0 | 127)
            && !a.is_link_local()
            && forwards(&vr.fib4, a, g)
    }
    fn dst(a: Ipv4Addr, vr: u32) -> Dst4 {
        Dst4 {
            addr: a.to_bits(),
            vr,
        }
    }
    fn uniform(n: usize, seed: u64) -> Vec<Ipv4Addr> {
        tablegen::uniform::<V4>(n, seed)
    }
    fn seq(s: Box<[Dst4]>) -> Seq {
        Seq::V4(s)
    }
}

impl Fam for V6 {
    type D = Dst6;
    fn table(t: &mut Tables, n: usize, seed: u64) -> Routes<V6> {
        t.v6(n, seed)
    }
    fn ok(vr: &Vr, a: Ipv6Addr, g: &vrhost_fib::Guard) -> bool {
        !a.is_multicast() && a.segments()[0] & 0xffc0 != 0xfe80 && forwards(&vr.fib6, a, g)
    }
    fn dst(a: Ipv6Addr, vr: u32) -> Dst6 {
        Dst6 {
            addr: a.octets(),
            vr,
        }
    }
    /// Within 2000::/3: the rest of the space is not routed at all, and with the default
    /// route it would all resolve at the top level.
    fn uniform(n: usize, seed: u64) -> Vec<Ipv6Addr> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n).map(|_| tablegen::global_v6(&mut rng)).collect()
    }
    fn seq(s: Box<[Dst6]>) -> Seq {
        Seq::V6(s)
    }
}

/// Worker `w`'s destination sequence over the VRs it owns, and how many distinct (VR,
/// destination) pairs it holds. Without `--flows`, each VR's list is long enough that the
/// sequence (1 Mi packets) never repeats a VR's destination; with it, each VR has its share of
/// the flows and every packet picks one of them at random.
fn sequence<F: Fam>(
    sc: &Scenario,
    vrs: &[Arc<Vr>],
    owned: &[usize],
    tables: &mut Tables,
    w: usize,
) -> anyhow::Result<(Seq, usize)> {
    let nv = owned.len();
    let per_vr = match sc.flows {
        Some(f) => f.div_ceil(sc.vrs).max(1),
        None => (SEQ_LEN / nv).max(1),
    };
    let g = vrhost_fib::pin();
    let mut lists = Vec::with_capacity(nv);
    for &k in owned {
        let seed = sc.seed + k as u64;
        let t = F::table(tables, sc.routes, seed);
        let vr = &vrs[k];
        let l = dests::<F>(
            sc.dest,
            &t,
            per_vr,
            seed.wrapping_mul(31).wrapping_add(7),
            sc.flows.is_some(),
            |a| F::ok(vr, a, &g),
        );
        if l.is_empty() {
            bail!("no forwardable destination found for VR {k}");
        }
        lists.push(l);
    }
    let distinct = if sc.flows.is_some() {
        lists.iter().map(Vec::len).sum()
    } else {
        let mut s = HashSet::new();
        for (i, l) in lists.iter().enumerate() {
            s.extend(l.iter().map(|a| (i, *a)));
        }
        s.len()
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(sc.seed ^ 0xd5 ^ ((w as u64) << 32));
    let mut cursor = vec![0usize; nv];
    // Cumulative shares of the VRs (`--` equal unless the scenario gives a mix).
    let cum: Vec<f64> = match &sc.vr_mix {
        Some(m) if nv > 1 => {
            let ws: Vec<f64> = owned
                .iter()
                .map(|&k| m.get(k).copied().unwrap_or(1.0))
                .collect();
            let t: f64 = ws.iter().sum();
            ws.iter()
                .scan(0.0, |a, w| {
                    *a += w / t;
                    Some(*a)
                })
                .collect()
        }
        _ => Vec::new(),
    };
    let mut v = 0;
    let seq: Box<[F::D]> = (0..SEQ_LEN)
        .map(|n| {
            v = if nv == 1 {
                0
            } else if n % sc.train as usize != 0 {
                // Still in the train: the VR before.
                v
            } else if cum.is_empty() {
                rng.gen_range(0..nv)
            } else {
                let x: f64 = rng.r#gen();
                cum.iter().position(|&c| x < c).unwrap_or(nv - 1)
            };
            let l = &lists[v];
            let i = if sc.flows.is_some() {
                rng.gen_range(0..l.len())
            } else {
                let i = cursor[v] % l.len();
                cursor[v] += 1;
                i
            };
            F::dst(l[i], v as u32)
        })
        .collect();
    Ok((F::seq(seq), distinct))
}

/// One's-complement sum of big-endian 16-bit words.
fn sum(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .fold(0u32, |a, w| {
            let s = a + w;
            (s & 0xffff) + (s >> 16)
        })
}

fn eth(b: &mut [u8], dst: EthernetAddress, ty: u16) {
    b[0..6].copy_from_slice(&dst.0);
    b[6..12].copy_from_slice(&TESTER_MAC.0);
    b[12..14].copy_from_slice(&ty.to_be_bytes());
}

/// An Ethernet/IPv4/UDP frame of `len` bytes to `dst`, with destination address 0.0.0.0 and
/// no IP checksum yet; `partial` covers the rest of the header.
pub(crate) fn template4(dst: EthernetAddress, len: usize) -> Template {
    use vrhost_wire::ip::Protocol;
    use vrhost_wire::{ipv4, udp};
    let mut b = vec![0u8; len];
    eth(&mut b, dst, 0x0800);
    let total = len - 14;
    {
        let mut ip = ipv4::Packet::new_unchecked(&mut b[14..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_total_len(total as u16);
        ip.set_ident(0);
        ip.clear_flags();
        ip.set_dont_frag(true);
        ip.set_frag_offset(0);
        ip.set_ttl(64);
        ip.set_protocol(Protocol::UDP);
        ip.set_src_addr(SRC4);
        ip.set_dst_addr(Ipv4Addr::UNSPECIFIED);
    }
    {
        let mut u = udp::Packet::new_unchecked(&mut b[34..]);
        u.set_src_port(UDP_SRC);
        u.set_dst_port(UDP_DST);
        u.set_len((total - 20) as u16);
        // No UDP checksum (allowed for IPv4), so the destination changes only the IP sum.
        u.set_checksum(0);
    }
    let partial = sum(&b[14..34]);
    Template::new(b, partial)
}

/// An Ethernet/IPv6/UDP frame of `len` bytes to `dst`, destination address `::`, UDP checksum
/// 0; `partial` is the UDP checksum's sum without the destination address.
pub(crate) fn template6(dst: EthernetAddress, len: usize) -> Template {
    use vrhost_wire::ip::Protocol;
    use vrhost_wire::{ipv6, udp};
    let mut b = vec![0u8; len];
    eth(&mut b, dst, 0x86dd);
    let udp_len = len - 14 - 40;
    ipv6::Repr {
        src_addr: SRC6,
        dst_addr: Ipv6Addr::UNSPECIFIED,
        next_header: Protocol::UDP,
        payload_len: udp_len,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(&mut b[14..54]));
    {
        let mut u = udp::Packet::new_unchecked(&mut b[54..]);
        u.set_src_port(UDP_SRC);
        u.set_dst_port(UDP_DST);
        u.set_len(udp_len as u16);
        u.set_checksum(0);
    }
    // Pseudo-header (source, zero destination, length, next header) + UDP segment.
    let mut ph = Vec::with_capacity(40 + udp_len);
    ph.extend_from_slice(&SRC6.octets());
    ph.extend_from_slice(&[0; 16]);
    ph.extend_from_slice(&(udp_len as u32).to_be_bytes());
    ph.extend_from_slice(&[0, 0, 0, 17]);
    ph.extend_from_slice(&b[54..]);
    let partial = sum(&ph);
    Template::new(b, partial)
}
