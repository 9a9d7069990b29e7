//! Criterion bench of one worker's forwarding path on mem ports: a vector of 256 64-byte
//! IPv4 frames in, forwarded out, per iteration. The same frames are recycled from the tx
//! ring back into the rx ring (their TTL and MACs rewritten back), so the bench measures
//! rx → demux → ingress ring → ip4 → flow cache / FIB → rewrite → tx and nothing else.
//! `vrbench inproc` is the full benchmark; this one is for quick A/B of a change.

use std::net::Ipv4Addr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vrhost_dataplane::port::mem;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::{Dataplane, DataplaneConfig, IfAddr, Pool, VifConfig, VrConfig};
use vrhost_fib::NextHop;
use vrhost_wire::EthernetAddress;
use vrhost_wire::ipv4;

fn mac(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

fn frame(dst: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&mac(1).0);
    f[6..12].copy_from_slice(&mac(0x11).0);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut ip = ipv4::Packet::new_unchecked(&mut f[14..]);
    ip.set_version(4);
    ip.set_header_len(20);
    ip.set_total_len(46);
    ip.set_ttl(64);
    ip.set_protocol(vrhost_wire::ip::Protocol::UDP);
    ip.set_src_addr(Ipv4Addr::new(10, 0, 0, 2));
    ip.set_dst_addr(dst);
    ip.fill_checksum();
    f
}

fn bench(c: &mut Criterion, name: &str, routes: usize, distinct: usize, cache: bool) {
    if std::env::var("FWD_ONLY").is_ok_and(|o| o != name) {
        return;
    }
    let pool = Pool::new(4096);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 1,
            ports: vec!["in".into(), "out".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let (mut pin, mut peer_in) = mem::port(1, 1, 1024);
    let (mut pout, mut peer_out) = mem::port(1, 1, 1024);
    let rx: Vec<(u16, Box<dyn RxQueue>)> = vec![(0, Box::new(pin.rx.remove(0)))];
    let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(pin.tx.remove(0)), Box::new(pout.tx.remove(0))];
    let mut w = dp.worker(0, rx, tx).unwrap();
    let mut cfg = VrConfig::new("vr");
    cfg.fib4_top_bits = 18;
    if !cache {
        cfg.flow_cache = 0;
    }
    let vr = dp.add_vr(cfg).unwrap();
    let vif = |name: &str, port, m, a| VifConfig {
        name: name.into(),
        port,
        vlan: None,
        key: Default::default(),
        mac: m,
        mtu: 1500,
        addrs: vec![IfAddr::V4(a, 24)],
    };
    dp.add_vif("vr", vif("a", 0, mac(1), Ipv4Addr::new(10, 0, 0, 1)))
        .unwrap();
    dp.add_vif("vr", vif("b", 1, mac(2), Ipv4Addr::new(10, 0, 1, 1)))
        .unwrap();
    let nh = Ipv4Addr::new(10, 0, 1, 2);
    vr.neigh.set(1, nh.into(), mac(0x22));
    let via = NextHop::Via {
        addr: nh.into(),
        ifindex: 1,
    };
    let table = vrhost_fib::tablegen::ipv4_table(routes, 1);
    vr.fib4
        .load(table.into_iter().map(|(p, _)| (p, via.into())))
        .unwrap();
    vr.fib4.insert("0.0.0.0/0".parse().unwrap(), via).unwrap();
    // Unicast destinations outside the VR's own subnets, so every frame is forwarded.
    let dsts: Vec<Ipv4Addr> =
        vrhost_fib::tablegen::uniform::<vrhost_fib::V4>(2 * distinct.max(256), 7)
            .into_iter()
            .filter(|a| (1..224).contains(&a.octets()[0]) && ![10, 127].contains(&a.octets()[0]))
            .collect();
    let mut dsts = dsts;
    dsts.truncate(distinct.max(256));
    // One template; per packet only the destination and header checksum change, so the
    // harness costs a few bytes written per packet, not a cold 60-byte copy.
    let template = frame(Ipv4Addr::UNSPECIFIED);
    // Fill 256 slots once; recycle them.
    let mut slots: Vec<_> = (0..256)
        .map(|_| pool.alloc_frame(&template).unwrap())
        .collect();
    let mut next = 0usize;
    let mut one_vector = || {
        for mut p in slots.drain(..) {
            pool.set_frame(&mut p, &template);
            let f = pool.frame_mut(&mut p);
            f[30..34].copy_from_slice(&dsts[next % dsts.len()].octets());
            let mut ip = ipv4::Packet::new_unchecked(&mut f[14..]);
            ip.fill_checksum();
            next += 1;
            peer_in.send_pkt(0, p).unwrap();
        }
        w.poll();
        while let Some(p) = peer_out.tx[0].pop() {
            slots.push(p);
        }
        assert_eq!(slots.len(), 256, "every frame forwarded");
    };
    // `FWD_VECTORS=N FWD_ONLY=name` runs exactly N vectors of one scenario without criterion,
    // for `perf stat -e cycles:u` (cycles per packet that another process's load does not
    // distort: run once with N=0 and subtract the setup).
    if let Ok(n) = std::env::var("FWD_VECTORS") {
        if std::env::var("FWD_ONLY").is_ok_and(|o| o == name) {
            for _ in 0..n.parse::<u64>().unwrap() {
                one_vector();
            }
            let s = vr.stats();
            eprintln!("flow cache hits {} misses {}", s.flow_hits, s.flow_misses);
        }
        return;
    }
    let mut g = c.benchmark_group("forward");
    g.throughput(Throughput::Elements(256));
    g.bench_function(name, |b| b.iter(&mut one_vector));
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench(c, "950k-routes/uniform/no-cache", 950_000, 1 << 20, false);
    bench(c, "950k-routes/uniform/cache-miss", 950_000, 1 << 20, true);
    bench(c, "950k-routes/1k-flows/cache-hit", 950_000, 1000, true);
}

criterion_group!(g, benches);
criterion_main!(g);
