//! The whole data-plane pipeline on arbitrary frames: port rx → demux (MAC, VLAN, match
//! rules, broadcast and shared-MAC ARP fan-out) → per-VR ingress ring → validation → FIB (local, attached, via, ECMP, blackhole,
//! unreachable, prohibit, missing VIF) → neighbour → rewrite → ICMP errors → tx, plus punt and
//! inject. Checked:
//! * no panic;
//! * once the worker is idle and the tx rings and punt queues are drained, every pool slot is
//!   back;
//! * per VR, every admitted packet (and every ICMP error) ends exactly once:
//!   `rx + icmp_sent + injected + inject-bad == tx + punted + drops`, leaving out the drop
//!   reasons that are not packet exits (`vr-ingress-full`, `icmp-*`) — exactly when nothing
//!   was fragmented. A fragmented datagram leaves as k ≥ 2 frames (`fragments` += k) and no
//!   counter says how many datagrams were split, so then the surplus `tx + punted + drops −
//!   (rx + …)` (= fragments − datagrams split) is only bounded: between `fragments / 2` and
//!   `fragments`;
//! * the VRs' tx counters add up to the frames that left, each at least an Ethernet header
//!   and, unless injected, sent from a VIF's MAC.
//!
//! The data plane is built once (building one takes tens of milliseconds under ASan) and
//! reused: every input starts from an idle, drained data plane, counters are compared as
//! differences, and ICMP and punt rate limits are off so nothing depends on the clock — a
//! crash reproduces from its input alone. The topology mirrors the namespaces of
//! `crates/wire/testdata/capture_router.sh` and `capture_routed.sh` (router MACs …:01, …:02,
//! …:fa; hosts …:0a, …:0b, …:0c; 10.99.0.0/24, 10.99.1.0/24, fd00:99::/64, fd00:98::/64), so
//! the captured frames of the seed corpus reach a VR as they are.
//!
//! Input: records, each `op` (1 byte), `aux` (1 byte), `len` (2 bytes, big endian), then
//! `len` frame bytes (clipped to what is left).
//! * `op` bits 0–1: 0/1 = receive on port 0/1, 2 = inject by a VIF of VR "r", 3 = inject by a
//!   VIF of VR "s"; bits 2–4: 0 = frame as is, k = overwrite the destination MAC with
//!   [`MACS`]`[k − 1]` (for injects: the VIF id is k); bits 5–6: offer it 1, 8, 64 or 300
//!   times (overload: full ingress rings, punt queues and tx rings); bit 7: poll the worker
//!   once after it.
//! * `aux`, applied to an IPv4 or IPv6 frame (found as demux finds it) before it is sent:
//!   bits 0–3: 0 = keep, k = set the destination to [`DST4`]/[`DST6`]`[k − 1]`; bits 4–6: 0 =
//!   keep, t = set TTL / hop limit to t − 1; bit 7 (or any change): refill the IPv4 header
//!   checksum. These let the fuzzer reach every kind of route without guessing addresses
//!   and checksums.
//!
//! Seeds (`seeds/dataplane_pipeline/`): each frame of `seeds/wire_l2/` (real captures and
//! their variants) in three records — as is on port 0; to VIF "ra" with a refilled checksum;
//! to VIF "rb" on port 1, then poll — plus, for its untagged IPv4 frames, a copy without Don't
//! Fragment routed out of "rb" (MTU 1280); and each IPv6 packet of `seeds/wire_ipv6/`
//! (captures) in an Ethernet header to "ra", as is, to the ECMP route, and with hop limit 1.
//! Made by:
//! ```text
//! cd fuzz && python3 - <<'PY'
//! import os
//! rec = lambda op, aux, d: bytes([op, aux]) + len(d).to_bytes(2, "big") + d
//! out = "seeds/dataplane_pipeline"
//! os.makedirs(out, exist_ok=True)
//! for n in os.listdir("seeds/wire_l2"):
//!     d = open(f"seeds/wire_l2/{n}", "rb").read()[:65535]
//!     open(f"{out}/l2-{n}", "wb").write(rec(0, 0, d) + rec(0x04, 0x80, d) + rec(0x89, 0, d))
//!     if d[12:14] == b"\x08\x00" and len(d) >= 34:
//!         d = bytearray(d)
//!         d[20] &= 0xbf  # Don't Fragment off, routed out of rb (MTU 1280)
//!         open(f"{out}/frag-{n}", "wb").write(rec(0x84, 0x81, bytes(d)))
//! eth = bytes.fromhex("020000000001" "02000000000a" "86dd")
//! for n in os.listdir("seeds/wire_ipv6"):
//!     d = (eth + open(f"seeds/wire_ipv6/{n}", "rb").read())[:65535]
//!     open(f"{out}/ip6-{n}", "wb").write(rec(0, 0, d) + rec(0, 0x02, d) + rec(0x80, 0x20, d))
//! PY
//! ```
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use vrhost_dataplane::flow::Class;
use vrhost_dataplane::port::mem::{self, MemPeer};
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{
    Dataplane, DataplaneConfig, DemuxKey, Drop, FlowCacheKey, IfAddr, IpPrefix, MAX_FRAME,
    MatchRule, Pool, VifConfig, VrConfig, VrStats, Worker, parse_l2,
};
use vrhost_fib::{NextHop, NextHopSet, Prefix4};
use vrhost_wire::{EthernetAddress, checksum};

const fn m(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

/// VIF MACs, in the order `op` bits 2–4 name them: r's ra, rb, v7, v20, fa; s's sa, sb.
const MACS: [EthernetAddress; 7] = [
    m(0x01),
    m(0x02),
    m(0x0b),
    m(0xfc),
    m(0xfa),
    m(0x0a),
    m(0x0c),
];

const RING: usize = 512;
const POOL: usize = 4096;

struct Harness {
    pool: Arc<Pool>,
    dp: Dataplane,
    worker: Worker,
    peers: Vec<MemPeer>,
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}
fn via(a: &str, ifindex: u32) -> NextHop {
    NextHop::Via {
        addr: a.parse().unwrap(),
        ifindex,
    }
}

fn vif(
    name: &str,
    port: u16,
    vlan: Option<u16>,
    key: DemuxKey,
    mac: EthernetAddress,
    mtu: u16,
    addrs: Vec<IfAddr>,
) -> VifConfig {
    VifConfig {
        name: name.into(),
        port,
        vlan,
        key,
        mac,
        mtu,
        addrs,
    }
}

fn build() -> Harness {
    let pool = Pool::new(POOL);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 1,
            ports: vec!["p0".into(), "p1".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let mut rx: Vec<(u16, Box<dyn RxQueue>)> = Vec::new();
    let mut tx: Vec<Box<dyn TxQueue>> = Vec::new();
    let mut peers = Vec::new();
    for p in 0..2u16 {
        let (mut port, peer) = mem::port(1, 1, RING);
        rx.push((p, Box::new(port.rx.remove(0))));
        tx.push(Box::new(port.tx.remove(0)));
        peers.push(peer);
    }
    let worker = dp.worker(0, rx, tx).unwrap();

    let quiet = |name: &str| {
        let mut c = VrConfig::new(name);
        c.icmp_rate = 0;
        c.punt_rate = 0;
        c.punt_queue = 64;
        c.ingress_ring = 256;
        c.fib4_top_bits = 8;
        c
    };
    // VR "r": the router of capture_router.sh / capture_routed.sh.
    let r = dp.add_vr(quiet("r")).unwrap();
    let add = |vr: &str, c: VifConfig| dp.add_vif(vr, c).unwrap();
    let none = DemuxKey::Mac;
    add(
        "r",
        vif(
            "ra",
            0,
            None,
            none.clone(),
            MACS[0],
            1500,
            vec![
                IfAddr::V4(v4("10.99.0.254"), 24),
                IfAddr::V6(v6("fd00:99::fe"), 64),
                IfAddr::V6(v6("fe80::1"), 64),
            ],
        ),
    );
    add(
        "r",
        vif(
            "rb",
            1,
            None,
            none.clone(),
            MACS[1],
            1280,
            vec![
                IfAddr::V4(v4("10.99.1.254"), 24),
                IfAddr::V6(v6("fd00:98::fe"), 64),
            ],
        ),
    );
    add(
        "r",
        vif(
            "v7",
            0,
            Some(7),
            none.clone(),
            MACS[2],
            1500,
            vec![IfAddr::V4(v4("10.99.7.1"), 24)],
        ),
    );
    // No IPv4 address: IPv4 errors from here have no source.
    add(
        "r",
        vif(
            "v20",
            1,
            Some(20),
            DemuxKey::Vlan,
            MACS[3],
            1500,
            vec![IfAddr::V6(v6("fd00:20::1"), 64)],
        ),
    );
    add(
        "r",
        vif(
            "fa",
            0,
            None,
            none.clone(),
            MACS[4],
            vrhost_dataplane::MAX_MTU,
            vec![
                IfAddr::V4(v4("10.97.0.254"), 24),
                IfAddr::V6(v6("fd00:97::fe"), 64),
            ],
        ),
    );
    let f4 = &r.fib4;
    f4.insert("10.98.0.0/24".parse().unwrap(), via("10.99.1.2", 1))
        .unwrap();
    f4.insert(
        "192.0.2.0/24".parse().unwrap(),
        NextHopSet::ecmp(vec![
            via("10.99.1.2", 1),
            via("10.99.0.1", 0),
            via("10.99.7.2", 2),
            via("fd00:98::2", 1),
        ])
        .unwrap(),
    )
    .unwrap();
    f4.insert("10.99.2.0/24".parse().unwrap(), NextHop::Unreachable)
        .unwrap();
    f4.insert("10.99.3.0/24".parse().unwrap(), NextHop::Prohibit)
        .unwrap();
    f4.insert("10.99.4.0/24".parse().unwrap(), NextHop::Drop)
        .unwrap();
    f4.insert("10.99.5.0/24".parse().unwrap(), NextHop::Local)
        .unwrap();
    f4.insert("10.99.6.0/24".parse().unwrap(), via("10.99.6.1", 9))
        .unwrap();
    let f6 = &r.fib6;
    f6.insert(
        "fd00:96::/48".parse().unwrap(),
        NextHopSet::ecmp(vec![via("fd00:98::2", 1), via("fe80::a", 0)]).unwrap(),
    )
    .unwrap();
    f6.insert("fd00:95::/48".parse().unwrap(), NextHop::Unreachable)
        .unwrap();
    f6.insert("fd00:94::/48".parse().unwrap(), NextHop::Prohibit)
        .unwrap();
    f6.insert("fd00:93::/48".parse().unwrap(), NextHop::Drop)
        .unwrap();
    f6.insert("fd00:92::/48".parse().unwrap(), via("fe80::5", 9))
        .unwrap();
    f6.insert("fd00:91::/48".parse().unwrap(), NextHop::Local)
        .unwrap();
    f6.insert("fd00:20::/48".parse().unwrap(), via("fd00:20::2", 3))
        .unwrap();
    let n = &r.neigh;
    n.set(1, IpAddr::V4(v4("10.99.1.2")), m(0x0b));
    n.set(0, IpAddr::V4(v4("10.99.0.1")), m(0x0a));
    n.set(1, IpAddr::V6(v6("fd00:98::2")), m(0x0c));
    n.set(0, IpAddr::V6(v6("fe80::a")), m(0x0a));
    n.set(0, IpAddr::V6(v6("fd00:99::1")), m(0x0a));
    n.set(3, IpAddr::V6(v6("fd00:20::2")), m(0x20));
    n.set(4, IpAddr::V4(v4("10.97.0.1")), m(0x0d));

    // VR "s": host a's side, sharing port 0 (broadcasts fan out to both VRs). Its flow
    // cache is keyed by 5-tuple, so both key paths see every input.
    let s = dp
        .add_vr(VrConfig {
            flow_cache_key: FlowCacheKey::FiveTuple,
            ..quiet("s")
        })
        .unwrap();
    add(
        "s",
        vif(
            "sa",
            0,
            None,
            none.clone(),
            MACS[5],
            1500,
            vec![
                IfAddr::V4(v4("10.99.0.1"), 24),
                IfAddr::V6(v6("fd00:99::1"), 64),
            ],
        ),
    );
    add(
        "s",
        vif(
            "sb",
            1,
            Some(10),
            none,
            MACS[6],
            1500,
            vec![IfAddr::V4(v4("10.98.0.2"), 24)],
        ),
    );
    // r and s split sa's MAC on port 1 by match rules: r takes UDP to port 53, s what is to
    // 10.0.0.0/8; an ARP frame to that MAC goes to each whose rule takes it.
    let rule = |rule: MatchRule| DemuxKey::Rule(rule);
    add(
        "r",
        vif(
            "ru",
            1,
            None,
            rule(MatchRule {
                protocol: Some(17),
                dst_port: Some(53),
                ..MatchRule::default()
            }),
            MACS[5],
            1500,
            vec![IfAddr::V4(v4("10.96.0.1"), 24)],
        ),
    );
    add(
        "s",
        vif(
            "su",
            1,
            None,
            rule(MatchRule {
                dst: Some(IpPrefix::V4(Prefix4::new_masked(v4("10.0.0.0"), 8))),
                ..MatchRule::default()
            }),
            MACS[5],
            1500,
            vec![IfAddr::V4(v4("10.96.0.2"), 24)],
        ),
    );
    s.fib4
        .insert("0.0.0.0/0".parse().unwrap(), via("10.99.0.254", 0))
        .unwrap();
    s.fib6
        .insert("::/0".parse().unwrap(), via("fd00:99::fe", 0))
        .unwrap();
    s.neigh.set(0, IpAddr::V4(v4("10.99.0.254")), MACS[0]);
    s.neigh.set(0, IpAddr::V6(v6("fd00:99::fe")), MACS[0]);

    Harness {
        pool,
        dp,
        worker,
        peers,
    }
}

/// Destinations `aux` can put in an IPv4 header (see the routes in [`build`]).
const DST4: [[u8; 4]; 15] = [
    [10, 98, 0, 2],       // via 10.99.1.2 (resolved)
    [192, 0, 2, 7],       // ECMP over four next hops
    [10, 99, 2, 1],       // unreachable
    [10, 99, 3, 1],       // prohibit
    [10, 99, 4, 1],       // blackhole
    [10, 99, 5, 1],       // local route
    [10, 99, 6, 1],       // via a VIF that does not exist
    [10, 99, 0, 254],     // ra's own address
    [10, 99, 1, 2],       // attached, resolved (rb, MTU 1280)
    [10, 99, 1, 99],      // attached, unresolved
    [8, 8, 8, 8],         // no route
    [255, 255, 255, 255], // limited broadcast
    [224, 0, 0, 5],       // link-local multicast
    [239, 1, 2, 3],       // other multicast
    [10, 97, 0, 1],       // attached on fa (large MTU), resolved
];

/// Destinations `aux` can put in an IPv6 header.
const DST6: [&str; 15] = [
    "fd00:98::2",  // attached, resolved (rb, MTU 1280)
    "fd00:96::1",  // ECMP
    "fd00:95::1",  // unreachable
    "fd00:94::1",  // prohibit
    "fd00:93::1",  // blackhole
    "fd00:92::1",  // via a VIF that does not exist
    "fd00:91::1",  // local route
    "fd00:99::fe", // ra's own address
    "fd00:98::99", // attached, unresolved
    "2001:db8::1", // no route
    "ff02::1",     // link-local multicast
    "ff05::1",     // site multicast
    "fe80::1",     // ra's link-local address
    "fe80::99",    // someone else's link-local address
    "fd00:20::2",  // via the VLAN-keyed VIF v20
];

/// Apply `aux` (see the module docs) to the IPv4 or IPv6 header of `frame`, if it has one.
fn fix_l3(frame: &mut [u8], aux: u8) {
    let Ok(l2) = parse_l2(frame) else {
        return;
    };
    let l3 = usize::from(l2.l3);
    let (dst, ttl) = (usize::from(aux & 0x0f), (aux >> 4) & 7);
    match l2.class {
        Class::Ipv4 if frame.len() >= l3 + 20 => {
            let ip = &mut frame[l3..];
            if dst > 0 {
                ip[16..20].copy_from_slice(&DST4[dst - 1]);
            }
            if ttl > 0 {
                ip[8] = ttl - 1;
            }
            if aux != 0 {
                let hl = (usize::from(ip[0] & 0x0f) * 4).clamp(20, ip.len());
                ip[10..12].fill(0);
                let sum = !checksum::data(&ip[..hl]);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
            }
        }
        Class::Ipv6 if frame.len() >= l3 + 40 => {
            let ip = &mut frame[l3..];
            if dst > 0 {
                ip[24..40].copy_from_slice(&v6(DST6[dst - 1]).octets());
            }
            if ttl > 0 {
                ip[7] = ttl - 1;
            }
        }
        _ => {}
    }
}

/// Drain everything that left; returns (frames, frames without a VIF source MAC).
fn drain_tx(h: &mut Harness) -> (u64, u64) {
    let (mut n, mut foreign) = (0, 0);
    for peer in &mut h.peers {
        for f in peer.recv_all(&h.pool) {
            assert!(
                f.len() >= usize::from(vrhost_dataplane::MIN_FRAME),
                "a {}-byte frame left",
                f.len()
            );
            n += 1;
            if !MACS.iter().any(|m| f[6..12] == m.0) {
                foreign += 1;
            }
        }
    }
    (n, foreign)
}

fn settle(h: &mut Harness) {
    // Each poll with work moves packets strictly forward; bounded all the same.
    for _ in 0..10_000 {
        if h.worker.poll() == 0 {
            return;
        }
    }
    panic!("worker still busy after 10000 polls");
}

/// `a − b`, counter by counter.
fn delta(a: &VrStats, b: &VrStats) -> VrStats {
    let mut d = a.clone();
    d.rx_packets -= b.rx_packets;
    d.rx_bytes -= b.rx_bytes;
    d.tx_packets -= b.tx_packets;
    d.tx_bytes -= b.tx_bytes;
    d.punted -= b.punted;
    d.injected -= b.injected;
    d.icmp_sent -= b.icmp_sent;
    d.flow_hits -= b.flow_hits;
    d.flow_misses -= b.flow_misses;
    d.neigh_miss -= b.neigh_miss;
    d.fragments -= b.fragments;
    for (x, y) in d.drops.iter_mut().zip(&b.drops) {
        *x -= y;
    }
    d.ingress_wait = a.ingress_wait.since(&b.ingress_wait);
    d
}

static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let mut h = HARNESS
        .get_or_init(|| Mutex::new(build()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let h = &mut *h;
    let before: Vec<VrStats> = h.dp.vrs().iter().map(|v| v.stats()).collect();
    let mut rest = data;
    let mut injected_ok = 0u64;
    let mut out = 0u64;
    let mut foreign = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        let (aux, len, tail) = match tail {
            [x, a, b, t @ ..] => (*x, usize::from(u16::from_be_bytes([*a, *b])), t),
            _ => (0, tail.len(), &[][..]),
        };
        let len = len.min(tail.len());
        let (frame, tail) = tail.split_at(len);
        rest = tail;
        let sel = usize::from((op >> 2) & 7);
        let mut buf = frame[..frame.len().min(MAX_FRAME)].to_vec();
        fix_l3(&mut buf, aux);
        let reps = [1, 8, 64, 300][usize::from((op >> 5) & 3)];
        match op & 3 {
            port @ (0 | 1) => {
                if sel > 0 && buf.len() >= 6 {
                    buf[..6].copy_from_slice(&MACS[sel - 1].0);
                }
                let port = usize::from(port);
                for _ in 0..reps {
                    if !h.peers[port].send(&h.pool, 0, &buf) {
                        // Ring (or pool) full: let the worker catch up, then offer it again.
                        settle(h);
                        let (n, f) = drain_tx(h);
                        (out, foreign) = (out + n, foreign + f);
                        assert!(h.peers[port].send(&h.pool, 0, &buf), "rx ring still full");
                    }
                }
            }
            which => {
                let vr = if which == 2 { "r" } else { "s" };
                for _ in 0..reps {
                    let p = match h.pool.alloc_frame(&buf) {
                        Some(p) => p,
                        None => {
                            settle(h);
                            let (n, f) = drain_tx(h);
                            (out, foreign) = (out + n, foreign + f);
                            h.pool.alloc_frame(&buf).expect("pool still empty")
                        }
                    };
                    match h.dp.inject(vr, sel as u16, p) {
                        Ok(()) => injected_ok += 1,
                        Err((_, p)) => h.pool.free(p),
                    }
                }
            }
        }
        if op & 0x80 != 0 {
            h.worker.poll();
        }
    }
    settle(h);
    let (n, f) = drain_tx(h);
    (out, foreign) = (out + n, foreign + f);
    assert!(foreign <= injected_ok, "{foreign} frames left from no VIF");

    let mut tx = 0;
    for (vr, b) in h.dp.vrs().iter().zip(&before) {
        while let Some(p) = vr.punt_recv() {
            h.pool.free(p);
        }
        let s = delta(&vr.stats(), b);
        let not_exits = [
            Drop::VrIngressFull,
            Drop::IcmpRateLimited,
            Drop::IcmpNoSource,
            Drop::IcmpNoBuffer,
            Drop::IcmpSuppressed,
        ];
        let exits = s.total_drops() - not_exits.iter().map(|d| s.drop(*d)).sum::<u64>();
        let ins = s.rx_packets + s.icmp_sent + s.injected + s.drop(Drop::InjectBad);
        let outs = s.tx_packets + s.punted + exits;
        // Each datagram split into k fragments adds k − 1 ≥ k / 2 frames; one that ran out
        // of slots after j fragments adds j (it is also dropped as frag-no-buffer).
        let surplus = outs.checked_sub(ins);
        assert!(
            surplus.is_some_and(|d| d <= s.fragments && 2 * d >= s.fragments),
            "VR {}: packets unaccounted for (in {ins}, out {outs}): {s:?}",
            vr.name()
        );
        tx += s.tx_packets;
    }
    assert_eq!(tx, out, "tx counters vs frames out");
    assert_eq!(
        h.pool.available(),
        h.pool.capacity(),
        "{} pool slots lost",
        h.pool.capacity() - h.pool.available()
    );
});
