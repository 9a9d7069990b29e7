//! Moving a VR between workers: it never runs on two workers at once, its packets are
//! neither lost nor reordered, and the new owner sends nothing of the VR until the old
//! owner's transmit queues have passed what the VR gave them.
//!
//! Two workers; port 0 has a receive queue per worker (frames of a flow stay on one queue,
//! as with RSS), port 1 is the egress with a transmit queue per worker. VR "m" receives on
//! port 0 and routes out of port 1. Each frame carries (queue, sequence): order is checked
//! per receive queue, in the order the sink takes frames off the two transmit queues.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use vrhost_dataplane::port::mem::MemPeer;
use vrhost_dataplane::{Dataplane, Pool, RunVrs, VECTOR, VrConfig, Worker};
use vrhost_wire::EthernetAddress;

const RING: usize = 8192;

fn two() -> Multi {
    let t = two_with(&["m"]);
    t.dp.pin_vr("m", Some(0)).unwrap();
    t
}

/// Two workers and VRs `names` (VR i: MAC `mac(1 + 2i)` on port 0, `mac(2 + 2i)` on port
/// 1), all starting on worker 0.
fn two_with(names: &[&str]) -> Multi {
    two_in(RunVrs::OnOwner, names)
}

fn two_in(run_vrs: RunVrs, names: &[&str]) -> Multi {
    two_on(run_vrs, 0, names)
}

/// As [`two_with`], the VRs starting on worker `worker`.
fn two_on(run_vrs: RunVrs, worker: usize, names: &[&str]) -> Multi {
    let Multi {
        pool,
        dp,
        workers,
        peers,
    } = Multi::new(2, &["in", "out"], 4 * RING, RING, run_vrs);
    for (i, name) in names.iter().enumerate() {
        let mut cfg = VrConfig::new(*name);
        cfg.worker = Some(worker);
        cfg.ingress_ring = RING;
        dp.add_vr(cfg).unwrap();
        dp.pin_vr(name, None).unwrap();
        let m = 2 * i as u8;
        arm_router(&dp, name, (0, mac(1 + m)), (1, mac(2 + m)));
    }
    Multi {
        pool,
        dp,
        workers,
        peers,
    }
}

fn frame(q: u8, seq: u32) -> Vec<u8> {
    numbered(mac(1), q, seq)
}

/// Feed `n` frames into each of the two receive queues, numbered on from `seq`.
fn feed_both(pool: &Pool, ingress: &mut MemPeer, seq: &mut [u32; 2], n: usize) {
    for _ in 0..n {
        for q in 0..2u8 {
            assert!(ingress.send(pool, usize::from(q), &frame(q, seq[usize::from(q)])));
            seq[usize::from(q)] += 1;
        }
    }
}

/// The sink: takes frames off the egress port's transmit queues (worker 0's, then 1's)
/// and checks each receive queue's frames arrive once and in order.
#[derive(Default)]
struct Sink {
    next: HashMap<u8, u32>,
    /// Frames taken from each worker's transmit queue.
    by_worker: [u64; 2],
    /// Frames taken from worker w's transmit queue that came in on receive queue q: `[w][q]`.
    by_path: [[u64; 2]; 2],
}

impl Sink {
    fn drain(&mut self, pool: &Pool, peer: &mut MemPeer, workers: &[usize]) -> u64 {
        let mut n = 0;
        for &w in workers {
            while let Some(p) = peer.tx[w].pop() {
                let f = pool.frame(&p);
                assert_eq!(EthernetAddress::from_bytes(&f[..6]), NBR_MAC);
                let (q, seq) = numbering(f);
                pool.free(p);
                let next = self.next.entry(q).or_default();
                assert_eq!(seq, *next, "queue {q}: reordered, lost or duplicated");
                *next += 1;
                self.by_worker[w] += 1;
                self.by_path[w][usize::from(q)] += 1;
                n += 1;
            }
        }
        n
    }
}

#[test]
fn a_moved_vr_waits_for_the_old_owners_transmit_queue() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = two();
    let m = dp.vr("m").unwrap();
    let mut seq = [0u32; 2];
    let mut feed = |peers: &mut [MemPeer], n: usize| feed_both(&pool, &mut peers[0], &mut seq, n);
    feed(&mut peers, 100);
    // Worker 1 receives queue 1's frames for worker 0; worker 0 forwards both queues'.
    workers[1].poll();
    workers[0].poll();
    assert_eq!(m.stats().tx_packets, 200);
    assert_eq!(peers[1].tx[0].len(), 200, "still in worker 0's tx queue");

    feed(&mut peers, 50);
    dp.move_vr("m", 1).unwrap();
    assert_eq!(m.owner(), 1);
    // Worker 0 lets go (and still receives queue 0's frames, for the new owner).
    workers[0].poll();
    // Worker 1 takes over but may not send yet: worker 0's queue has not sent the 200.
    for _ in 0..3 {
        workers[1].poll();
    }
    assert_eq!(m.stats().tx_packets, 200);
    assert!(
        peers[1].tx[1].is_empty(),
        "sent before the old owner's frames left"
    );
    let mut sink = Sink::default();
    assert_eq!(sink.drain(&pool, &mut peers[1], &[0]), 200);
    // Now it runs.
    workers[1].poll();
    assert_eq!(m.stats().tx_packets, 300);
    workers[0].poll();
    assert_eq!(m.stats().tx_packets, 300, "worker 0 no longer runs it");
    assert_eq!(sink.drain(&pool, &mut peers[1], &[0, 1]), 100);
    assert_eq!(sink.by_worker, [200, 100]);

    // And back, with traffic queued on both sides.
    feed(&mut peers, 30);
    workers[0].poll();
    dp.move_vr("m", 0).unwrap();
    workers[1].poll();
    workers[0].poll();
    sink.drain(&pool, &mut peers[1], &[0, 1]);
    for _ in 0..3 {
        workers[0].poll();
        workers[1].poll();
    }
    sink.drain(&pool, &mut peers[1], &[0, 1]);
    assert_eq!(sink.next[&0], 180);
    assert_eq!(sink.next[&1], 180);
    let s = m.stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.total_drops()), (360, 360, 0));
    drop(workers);
    assert_eq!(pool.available(), pool.capacity());
}

/// Worker threads forward while the test moves the VR back and forth every few hundred
/// microseconds: every frame leaves exactly once, in order per receive queue.
#[test]
fn moving_back_and_forth_under_traffic_loses_and_reorders_nothing() {
    churn_under_traffic(two(), |dp, k| dp.move_vr("m", (k + 1) % 2).unwrap());
}

/// Where received, the owner moves back and forth (its injected frames only), and the
/// second worker is folded away and back (its receive queues move to worker 0 and home
/// again): every frame leaves exactly once, in order per receive queue.
#[test]
fn where_received_moves_and_folds_under_traffic_lose_and_reorder_nothing() {
    churn_under_traffic(two_in(RunVrs::WhereReceived, &["m"]), |dp, k| {
        if k % 2 == 0 {
            dp.move_vr("m", (k / 2 + 1) % 2).unwrap();
        } else {
            let n = if k % 4 == 1 { 1 } else { 2 };
            dp.set_active_workers(n).unwrap();
        }
    });
}

/// Feed both receive queues from a thread while the workers run on theirs and `churn` is
/// called every 300 µs with a count; check the sink's order and that nothing is lost.
fn churn_under_traffic(t: Multi, mut churn: impl FnMut(&Dataplane, usize)) {
    let Multi {
        pool,
        dp,
        workers,
        mut peers,
    } = t;
    let ingress = peers.remove(0);
    let mut egress = peers.remove(0);
    const N: u32 = 50_000;
    let mut sink = Sink::default();
    let (moves, fed) = under_traffic(&pool, workers, ingress, N, frame, |t| {
        let mut moves = 0;
        let mut got = 0;
        let mut last_move = Instant::now();
        while got < 2 * u64::from(N) {
            assert!(Instant::now() < t.deadline, "only {got} frames out");
            let k = sink.drain(&pool, &mut egress, &[0, 1]);
            got += k;
            t.took(k);
            if k == 0 {
                std::thread::yield_now();
            }
            if last_move.elapsed() > Duration::from_micros(300) {
                churn(&dp, moves);
                moves += 1;
                last_move = Instant::now();
            }
        }
        moves
    });
    assert!(moves > 20, "only {moves} moves");
    assert_eq!(sink.drain(&pool, &mut egress, &[0, 1]), 0, "duplicates");
    assert!(sink.by_worker[0] > 0 && sink.by_worker[1] > 0);
    let s = dp.vr("m").unwrap().stats();
    assert_eq!(s.nonzero_drops(), vec![]);
    assert_eq!(
        (s.rx_packets, s.tx_packets),
        (2 * u64::from(N), 2 * u64::from(N))
    );
    assert_eq!(fed, 2 * u64::from(N));
}

/// Placement moves the VR that uses the most CPU to the idle worker, leaves pinned VRs
/// where they are, and stops when a move would not help by more than the margin.
#[test]
fn rebalance_moves_by_measured_load_and_respects_pins() {
    let names = ["heavy", "light1", "light2", "pinned"];
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = two_with(&names);
    dp.pin_vr("pinned", Some(0)).unwrap();
    for w in &mut workers {
        w.set_cost_model(Some(Box::new(|vr, n| {
            let per = if vr.name().starts_with("light") {
                100
            } else {
                1000
            };
            per * n as u64
        })));
    }
    let feed = |peers: &mut [MemPeer], workers: &mut [Worker]| {
        for _ in 0..10 {
            for i in 0..4u8 {
                for _ in 0..20 {
                    let mut f = frame(i, 0);
                    f[..6].copy_from_slice(&mac(1 + 2 * i).0);
                    assert!(peers[0].send(&pool, 0, &f));
                }
            }
            for w in workers.iter_mut() {
                w.poll();
            }
            peers[1].recv_all(&pool);
        }
    };
    assert!(
        dp.rebalance(0.1, 4).unwrap().is_empty(),
        "nothing measured yet"
    );
    feed(&mut peers, &mut workers);
    assert!(dp.vrs().iter().all(|v| v.owner() == 0));
    // Worker 0: 1000 + 100 + 100 + 1000 per packet round. Moving "heavy" leaves
    // 1200 : 1000; then moving a light VR would gain 100/1200 < 10 %.
    let moves = dp.rebalance(0.1, 4).unwrap();
    assert_eq!(moves, vec![("heavy".to_string(), 0, 1)]);
    feed(&mut peers, &mut workers);
    let s = dp.vr("heavy").unwrap().stats();
    assert_eq!((s.rx_packets, s.tx_packets), (400, 400));
    assert_eq!(dp.vr("heavy").unwrap().owner(), 1);
    assert!(
        dp.rebalance(0.1, 4).unwrap().is_empty(),
        "balanced within the margin"
    );
    assert_eq!(dp.vr("pinned").unwrap().pinned(), Some(0));
    let ws = dp.worker_stats();
    assert_eq!((ws[0].vrs, ws[1].vrs), (3, 1));
    drop(workers);
    assert_eq!(pool.available(), pool.capacity());
}

/// Where received, each worker forwards the frames its own receive queue took, onto its
/// own transmit queue, with no hand-over between them; the owner (worker 0) sends the
/// VR's injected frames, and after a move the new owner does, once the old owner's
/// transmit queue has sent what it had. Placement moves neither the VR nor the queues.
#[test]
fn where_received_each_worker_forwards_what_it_received() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = two_in(RunVrs::WhereReceived, &["m"]);
    dp.pin_vr("m", None).unwrap();
    let m = dp.vr("m").unwrap();
    assert_eq!(m.owner(), 0);
    let mut seq = [0u32; 2];
    let mut feed = |peers: &mut [MemPeer], n: usize| feed_both(&pool, &mut peers[0], &mut seq, n);
    let mut sink = Sink::default();
    feed(&mut peers, 100);
    // Worker 1 alone forwards its queue's 100, not waiting for the owner.
    workers[1].poll();
    assert_eq!(m.stats().tx_packets, 100);
    assert_eq!(peers[1].tx[1].len(), 100);
    assert!(peers[1].tx[0].is_empty());
    workers[0].poll();
    assert_eq!(peers[1].tx[0].len(), 100);
    assert_eq!(sink.drain(&pool, &mut peers[1], &[0, 1]), 200);
    assert_eq!(sink.by_path, [[100, 0], [0, 100]]);

    // The owner sends injected frames.
    let injected = |k: u8| eth(NBR_MAC, mac(2), None, 0x88b5, &[k; 46]);
    let p = pool.alloc_frame(&injected(1)).unwrap();
    dp.inject("m", 1, p).map_err(|(e, _)| e).unwrap();
    workers[1].poll();
    assert!(peers[1].tx[1].is_empty(), "worker 1 is not the owner");
    workers[0].poll();
    let p = peers[1].tx[0].pop().expect("the owner sent it");
    assert_eq!(pool.frame(&p), &injected(1)[..]);
    pool.free(p);

    // Move the owner to worker 1 with worker 0's transmit queue still full: both workers
    // forward on at once; the injected frame waits for worker 0's queue to be sent.
    feed(&mut peers, 50);
    workers[0].poll();
    dp.move_vr("m", 1).unwrap();
    let p = pool.alloc_frame(&injected(2)).unwrap();
    dp.inject("m", 1, p).map_err(|(e, _)| e).unwrap();
    feed(&mut peers, 50);
    for _ in 0..3 {
        workers[0].poll();
        workers[1].poll();
    }
    // 400 forwarded and the first injected frame; the second waits.
    assert_eq!(m.stats().tx_packets, 401);
    assert_eq!(peers[1].tx[0].len(), 100, "worker 0 forwards on");
    assert_eq!(peers[1].tx[1].len(), 100, "worker 1 forwards on");
    assert_eq!(sink.drain(&pool, &mut peers[1], &[0, 1]), 200);
    assert_eq!(sink.by_path, [[200, 0], [0, 200]]);
    workers[1].poll();
    let p = peers[1].tx[1].pop().expect("the new owner sent it");
    assert_eq!(pool.frame(&p), &injected(2)[..]);
    pool.free(p);
    assert!(peers[1].tx[0].is_empty());

    // Placement leaves the VR and the queues where they are.
    assert!(dp.rebalance(0.1, 4).unwrap().is_empty());
    let ws = dp.worker_stats();
    assert_eq!((ws[0].rx_queues, ws[1].rx_queues), (2, 2));
    let s = m.stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.total_drops()), (400, 402, 0));
    assert_eq!((sink.next[&0], sink.next[&1]), (200, 200));
    drop(workers);
    drop(dp);
    drop(m);
    assert_eq!(pool.available(), pool.capacity());
}

/// A VR removed between its old owner letting go and the new one taking over: its rings
/// wait in the hand-off slot, where no worker will take them now. A receive queue that moved
/// at the same time waits for the old owner's rings to be taken (its marks); it must not
/// wait for this one forever, and the removed VR's packets go back to the pool.
#[test]
fn removing_a_vr_in_the_middle_of_a_move_does_not_stall_a_moved_receive_queue() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = two_on(RunVrs::OnOwner, 1, &["x", "y"]);
    workers[0].poll();
    workers[1].poll();
    // Worker 1's queue of port "in": a full burst for y, then 10 frames for x, which wait
    // in worker 1's ring (a short backlog is deferred under pressure).
    for seq in 0..VECTOR as u32 {
        assert!(peers[0].send(&pool, 1, &numbered(mac(3), 1, seq)));
    }
    for seq in 0..10 {
        assert!(peers[0].send(&pool, 1, &numbered(mac(1), 0, seq)));
    }
    workers[1].poll();
    let x = dp.vr("x").unwrap();
    assert_eq!((x.stats().rx_packets, x.stats().tx_packets), (10, 0));
    assert_eq!(peers[1].recv_all(&pool).len(), VECTOR);

    // Fold worker 1 away: x, y and its receive queues go to worker 0. Worker 1 lets go of
    // them (marking x's ring), then x is removed before worker 0 takes it.
    dp.set_active_workers(1).unwrap();
    workers[1].poll();
    dp.remove_vr("x").unwrap();
    for seq in VECTOR as u32..VECTOR as u32 + 20 {
        assert!(peers[0].send(&pool, 1, &numbered(mac(3), 1, seq)));
    }
    for _ in 0..20 {
        workers[0].poll();
        workers[1].poll();
    }
    let got: Vec<_> = peers[1]
        .recv_all(&pool)
        .iter()
        .map(|f| numbering(f))
        .collect();
    let want: Vec<_> = (VECTOR as u32..VECTOR as u32 + 20)
        .map(|s| (1, s))
        .collect();
    assert_eq!(
        got,
        want,
        "y's frames on the moved queue ({} still in its ring)",
        peers[0].rx[1].queued(0)
    );
    // x's ten went back to the pool; nothing else is held.
    drop(x);
    assert_eq!(pool.capacity() - pool.available(), 0, "slots in use");
}

/// With only worker 0 in use, new VRs go there, not to the worker folded away.
#[test]
fn new_vrs_go_to_workers_in_use() {
    let Multi { dp, .. } = Multi::new(2, &["in", "out"], 1024, 256, RunVrs::OnOwner);
    dp.set_active_workers(1).unwrap();
    dp.add_vr(VrConfig::new("a")).unwrap();
    dp.add_vr(VrConfig::new("b")).unwrap();
    let owners: Vec<usize> = dp.vrs().iter().map(|v| v.owner()).collect();
    assert_eq!(owners, [0, 0]);
}

/// A rebalance margin that is not a finite fraction of 0 or more is refused (it used to
/// panic inside the planner, with the control locks held), and the data plane goes on.
#[test]
fn rebalance_refuses_a_bad_margin() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = two_with(&["a", "b"]);
    for w in &mut workers {
        w.set_cost_model(Some(Box::new(|_, n| 1000 * n as u64)));
    }
    dp.rebalance(0.1, 0).unwrap(); // start measuring
    for seq in 0..20 {
        for i in 0..2u8 {
            assert!(peers[0].send(&pool, 0, &numbered(mac(1 + 2 * i), i, seq)));
        }
    }
    workers[0].poll();
    assert_eq!(peers[1].recv_all(&pool).len(), 40);
    for margin in [f64::NAN, -0.5, f64::INFINITY] {
        let e = dp.rebalance(margin, 4).unwrap_err().to_string();
        assert!(e.contains("rebalance margin"), "{e}");
    }
    // Still usable: a good margin plans as before.
    let moves = dp.rebalance(0.1, 4).unwrap();
    assert_eq!(moves.len(), 1, "{moves:?}");
}
