//! `Dataplane::inject` racing a move: the frame is queued after the new owner took the VR
//! over, by a caller that read the old owner (the window between `inject`'s look-up and its
//! push, forced here by handing it the entry read before the move).

use std::net::Ipv4Addr;

use vrhost_wire::EthernetAddress;

use crate::port::mem::{self, MemPeer};
use crate::port::{RxQueue, TxQueue};
use crate::{Dataplane, DataplaneConfig, IfAddr, Pool, RunVrs, VifConfig, VrConfig, Worker};

fn two_workers() -> (std::sync::Arc<Pool>, Dataplane, Vec<Worker>, MemPeer) {
    let pool = Pool::new(64);
    let dp = Dataplane::new(
        pool.clone(),
        DataplaneConfig {
            workers: 2,
            ports: vec!["p0".into()],
            run_vrs: RunVrs::default(),
        },
    )
    .unwrap();
    let (mut port, peer) = mem::port(2, 2, 64);
    let workers = (0..2)
        .map(|w| {
            let rx: Vec<(u16, Box<dyn RxQueue>)> = vec![(0, Box::new(port.rx.remove(0)))];
            let tx: Vec<Box<dyn TxQueue>> = vec![Box::new(port.tx.remove(0))];
            dp.worker(w, rx, tx).unwrap()
        })
        .collect();
    (pool, dp, workers, peer)
}

#[test]
fn a_frame_injected_with_the_old_owner_in_hand_is_sent_by_the_new_one() {
    let (pool, dp, mut workers, mut peer) = two_workers();
    dp.add_vr(VrConfig::new("m")).unwrap();
    dp.pin_vr("m", Some(0)).unwrap();
    let vif = dp
        .add_vif(
            "m",
            VifConfig {
                name: "a".into(),
                port: 0,
                vlan: None,
                key: Default::default(),
                mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
                mtu: 1500,
                addrs: vec![IfAddr::V4(Ipv4Addr::new(10, 0, 0, 1), 24)],
            },
        )
        .unwrap();
    for w in &mut workers {
        w.poll();
    }
    // The caller looks the VR up while worker 0 owns it …
    let stale = dp.find("m").unwrap();
    assert_eq!(stale.owner, 0);
    // … the VR moves, and worker 1 takes it over and looks at its (empty) inject queue …
    dp.move_vr("m", 1).unwrap();
    for _ in 0..3 {
        workers[0].poll();
        workers[1].poll();
    }
    assert_eq!(dp.vr("m").unwrap().owner(), 1);
    // … then the frame is queued, with the bell of the owner the caller read.
    let frame = [[0xff; 6], [2, 0, 0, 0, 0, 1]].concat();
    let frame = [&frame[..], &0x88b5u16.to_be_bytes(), &[7u8; 46]].concat();
    let p = pool.alloc_frame(&frame).unwrap();
    dp.inject_as(&stale, "m", vif, p)
        .map_err(|(e, _)| e)
        .unwrap();
    for _ in 0..2 {
        workers[0].poll();
        workers[1].poll();
    }
    assert!(peer.tx[0].is_empty(), "worker 0 no longer owns the VR");
    let p = peer.tx[1].pop().expect("the new owner sends the frame");
    assert_eq!(pool.frame(&p), &frame[..]);
    pool.free(p);
    assert_eq!(dp.vr("m").unwrap().stats().injected, 1);
}
