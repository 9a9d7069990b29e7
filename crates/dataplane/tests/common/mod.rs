//! A test rig: a data plane with mem ports and one worker driven step by step, plus frame
//! builders. Frames are built with `vrhost-wire`'s emitters and checked by re-parsing.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses part of the rig"
)]

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vrhost_dataplane::port::mem::{self, MemPeer};
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{
    Dataplane, DataplaneConfig, IfAddr, MIN_FRAME, Pool, RunVrs, VifConfig, Worker,
};
use vrhost_fib::NextHop;
use vrhost_wire::EthernetAddress;
use vrhost_wire::ip::Protocol;
use vrhost_wire::{checksum, ipv4, ipv6, udp};

/// How long the datagram in a sent frame is: `l3` (what follows the frame's EtherType
/// `ty`) cut at the datagram's own length (IPv4, IPv6, ARP; all of `l3` for others).
/// Checks that the frame is at least [`MIN_FRAME`] bytes and that anything after the
/// datagram is zeros padding a frame of exactly that length, as the data plane pads.
pub fn datagram_len(ty: u16, l3: &[u8], frame_len: usize) -> Result<usize, String> {
    let min = usize::from(MIN_FRAME);
    if frame_len < min {
        return Err(format!("a frame of {frame_len} bytes"));
    }
    let be16 = |i: usize| usize::from(u16::from_be_bytes([l3[i], l3[i + 1]]));
    let len = match ty {
        0x0800 if l3.len() >= 4 => be16(2),
        0x86dd if l3.len() >= 6 => 40 + be16(4),
        0x0806 => 28,
        _ => l3.len(),
    }
    .min(l3.len());
    let pad = &l3[len..];
    if pad.is_empty() || (frame_len == min && pad.iter().all(|&b| b == 0)) {
        Ok(len)
    } else {
        Err(format!(
            "{} bytes after the datagram of a {frame_len}-byte frame: {pad:02x?}",
            pad.len()
        ))
    }
}

pub const HOST_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x01]);

pub fn mac(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

/// The next hop a two-armed test router ([`arm_router`]) sends 198.51.100.0/24 to.
pub const NH: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
/// That next hop's MAC, a static neighbour: forwarded frames leave with it as destination.
pub const NBR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xbb, 0x02]);

/// Make the VR `name` (already added) a two-armed router: VIF "in" (10.0.0.1/24) on port
/// `inp.0` with MAC `inp.1`, VIF "out" (10.0.1.1/24) on `out.0` with `out.1`, and
/// 198.51.100.0/24 via [`NH`] on "out", resolved to [`NBR_MAC`].
pub fn arm_router(
    dp: &Dataplane,
    name: &str,
    inp: (u16, EthernetAddress),
    out: (u16, EthernetAddress),
) {
    let a = IfAddr::V4(Ipv4Addr::new(10, 0, 0, 1), 24);
    let b = IfAddr::V4(Ipv4Addr::new(10, 0, 1, 1), 24);
    dp.add_vif(name, vif("in", inp.0, inp.1, vec![a])).unwrap();
    dp.add_vif(name, vif("out", out.0, out.1, vec![b])).unwrap();
    let vr = dp.vr(name).unwrap();
    vr.fib4
        .insert(
            "198.51.100.0/24".parse().unwrap(),
            NextHop::Via {
                addr: NH.into(),
                ifindex: 1,
            },
        )
        .unwrap();
    vr.neigh.set(1, NH.into(), NBR_MAC);
}

/// Where a [`numbered`] frame's tag lies (after the Ethernet, IPv4 and UDP headers); its
/// sequence number follows.
pub const TAG_AT: usize = 14 + 20 + 8;

/// A frame for a two-armed router ([`arm_router`]): UDP from 10.0.0.2 to 198.51.100.7, to
/// the VIF with MAC `dst`. Its payload is a tag (whose stream it is: a VR, a queue) and a
/// sequence number, so that what leaves can be checked for loss and order per stream.
pub fn numbered(dst: EthernetAddress, tag: u8, seq: u32) -> Vec<u8> {
    let mut payload = vec![tag];
    payload.extend_from_slice(&seq.to_be_bytes());
    let l3 = udp4(
        Ipv4Addr::new(10, 0, 0, 2),
        Ipv4Addr::new(198, 51, 100, 7),
        64,
        1000,
        2000,
        &payload,
    );
    eth(dst, HOST_MAC, None, 0x0800, &l3)
}

/// The (tag, sequence number) of a [`numbered`] frame.
pub fn numbering(f: &[u8]) -> (u8, u32) {
    let seq = f[TAG_AT + 1..TAG_AT + 5].try_into().unwrap();
    (f[TAG_AT], u32::from_be_bytes(seq))
}

/// One data plane with several workers on mem ports: worker `w` polls receive queue `w` of
/// every port and transmits on transmit queue `w` of each.
pub struct Multi {
    pub pool: Arc<Pool>,
    pub dp: Dataplane,
    pub workers: Vec<Worker>,
    pub peers: Vec<MemPeer>,
}

impl Multi {
    /// `workers` workers on ports named `ports`, a pool of `pool_slots`, rings of `ring`.
    pub fn new(
        workers: usize,
        ports: &[&str],
        pool_slots: usize,
        ring: usize,
        run_vrs: RunVrs,
    ) -> Multi {
        let pool = Pool::new(pool_slots);
        let dp = Dataplane::new(
            pool.clone(),
            DataplaneConfig {
                workers,
                ports: ports.iter().map(|&p| p.into()).collect(),
                run_vrs,
            },
        )
        .unwrap();
        let (mut mem_ports, peers): (Vec<_>, Vec<_>) = ports
            .iter()
            .map(|_| mem::port(workers, workers, ring))
            .unzip();
        let workers = (0..workers)
            .map(|w| {
                let mut rx: Vec<(u16, Box<dyn RxQueue>)> = Vec::new();
                let mut tx: Vec<Box<dyn TxQueue>> = Vec::new();
                for (p, port) in mem_ports.iter_mut().enumerate() {
                    rx.push((p as u16, Box::new(port.rx.remove(0))));
                    tx.push(Box::new(port.tx.remove(0)));
                }
                dp.worker(w, rx, tx).unwrap()
            })
            .collect();
        Multi {
            pool,
            dp,
            workers,
            peers,
        }
    }
}

/// One data plane, `ports` mem ports with one queue each, one worker polling them all.
pub struct Rig {
    pub pool: Arc<Pool>,
    pub dp: Dataplane,
    pub worker: Worker,
    pub peers: Vec<MemPeer>,
}

impl Rig {
    pub fn new(ports: usize) -> Rig {
        Rig::with(ports, 4096, 1024)
    }

    pub fn with(ports: usize, pool_slots: usize, ring: usize) -> Rig {
        let names: Vec<String> = (0..ports).map(|i| format!("p{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let Multi {
            pool,
            dp,
            mut workers,
            peers,
        } = Multi::new(1, &names, pool_slots, ring, RunVrs::default());
        Rig {
            pool,
            dp,
            worker: workers.remove(0),
            peers,
        }
    }

    /// Offer `frame` on `port`.
    pub fn send(&mut self, port: usize, frame: &[u8]) {
        assert!(self.peers[port].send(&self.pool, 0, frame), "rx ring full");
    }

    /// Poll until nothing more happens.
    pub fn run(&mut self) {
        while self.worker.poll() > 0 {}
    }

    /// What left by `port` (checked to be frames of at least [`MIN_FRAME`] bytes).
    #[track_caller]
    pub fn recv(&mut self, port: usize) -> Vec<Vec<u8>> {
        let out = self.peers[port].recv_all(&self.pool);
        for f in &out {
            assert!(
                f.len() >= usize::from(MIN_FRAME),
                "a {}-byte frame left",
                f.len()
            );
        }
        out
    }

    /// Pool slots not free (packets held somewhere). 0 when everything was accounted for.
    pub fn in_use(&self) -> usize {
        self.pool.capacity() - self.pool.available()
    }
}

/// A plain VIF config.
pub fn vif(name: &str, port: u16, mac: EthernetAddress, addrs: Vec<IfAddr>) -> VifConfig {
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

/// Ethernet header (+ optional 802.1Q tag) in front of `l3`.
pub fn eth(
    dst: EthernetAddress,
    src: EthernetAddress,
    vlan: Option<u16>,
    ty: u16,
    l3: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    if let Some(v) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// An IPv4/UDP datagram with `payload`.
pub fn udp4(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut b = vec![0u8; total];
    {
        let mut ip = ipv4::Packet::new_unchecked(&mut b[..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_total_len(total as u16);
        ip.set_ident(0x1234);
        ip.clear_flags();
        ip.set_dont_frag(true);
        ip.set_frag_offset(0);
        ip.set_ttl(ttl);
        ip.set_protocol(Protocol::UDP);
        ip.set_src_addr(src);
        ip.set_dst_addr(dst);
        ip.fill_checksum();
    }
    {
        let mut u = udp::Packet::new_unchecked(&mut b[20..]);
        u.set_src_port(sport);
        u.set_dst_port(dport);
        u.set_len(udp_len as u16);
        u.set_checksum(0);
        u.payload_mut().copy_from_slice(payload);
    }
    b
}

/// An IPv6/UDP packet with `payload`.
pub fn udp6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop: u8,
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut b = vec![0u8; 40 + udp_len];
    ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: Protocol::UDP,
        payload_len: udp_len,
        hop_limit: hop,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(&mut b[..40]));
    let mut u = udp::Packet::new_unchecked(&mut b[40..]);
    u.set_src_port(sport);
    u.set_dst_port(dport);
    u.set_len(udp_len as u16);
    u.payload_mut().copy_from_slice(payload);
    let sum = checksum::combine(&[
        checksum::pseudo_header_v6(src, dst, 17, udp_len as u32),
        checksum::data(&b[40..]),
    ]);
    let s = !sum;
    b[46..48].copy_from_slice(&(if s == 0 { 0xffff } else { s }).to_be_bytes());
    b
}

/// Frames per queue that [`under_traffic`] feeds at most ahead of what the test took out:
/// less than a transmit ring, so a descheduled test thread never makes the data plane drop
/// (any loss is then a bug).
pub const WINDOW: u64 = 2048;

/// What [`under_traffic`]'s body is told and tells back.
pub struct Traffic<'a> {
    taken: &'a std::sync::atomic::AtomicU64,
    /// When the test gives up.
    pub deadline: std::time::Instant,
}

impl Traffic<'_> {
    /// The body took `k` more frames out of the egress port (the feeder may send as many
    /// more).
    pub fn took(&self, k: u64) {
        self.taken
            .fetch_add(k, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Run `workers` on threads of their own while a feeder thread sends `n` frames to each of
/// `ingress`'s receive queues 0 and 1 (`frame(queue, seq)`, in sequence order, retrying
/// while a ring is full: nothing is lost at the port), at most [`WINDOW`] ahead of what
/// the body took; `body` runs on this thread meanwhile (it drains the egress port, checks
/// and churns). The workers stop however the body ends, a failed assertion included.
/// Returns the body's result and the frames fed.
pub fn under_traffic<R>(
    pool: &Pool,
    workers: Vec<Worker>,
    mut ingress: MemPeer,
    n: u32,
    frame: impl Fn(u8, u32) -> Vec<u8> + Send,
    body: impl FnOnce(&Traffic<'_>) -> R,
) -> (R, u64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    let (fed, taken) = (AtomicU64::new(0), AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(60);
    let r = std::thread::scope(|s| {
        let _stop = Stop(&stop);
        for mut w in workers {
            let stop = &stop;
            s.spawn(move || w.run(stop));
        }
        let (fed, taken, stop) = (&fed, &taken, &stop);
        s.spawn(move || {
            let waiting = || Instant::now() <= deadline && !stop.load(Ordering::Relaxed);
            for seq in 0..n {
                while fed.load(Ordering::Relaxed) - taken.load(Ordering::Relaxed) >= WINDOW {
                    if !waiting() {
                        return;
                    }
                    std::thread::yield_now();
                }
                for q in 0..2u8 {
                    let f = frame(q, seq);
                    while !ingress.send(pool, usize::from(q), &f) {
                        if !waiting() {
                            return;
                        }
                        std::thread::yield_now();
                    }
                }
                fed.fetch_add(2, Ordering::Relaxed);
            }
        });
        body(&Traffic { taken, deadline })
    });
    (r, fed.load(Ordering::Relaxed))
}
