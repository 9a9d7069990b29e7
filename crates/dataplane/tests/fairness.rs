//! Fair sharing of one worker between VRs: the stride scheduler's shares by weight, in
//! packets and in (modelled) cycles, isolation of a light VR from an overloaded one, the
//! watchdog's quarantine, and the ingress policers.
//!
//! The rig: one worker, a port per VR for its ingress (a receive queue per VR, as with a
//! port per tenant or NIC filters by MAC — Egi's multi-queue set-up, Rathore's one
//! interface per VR) and one shared egress port. The tests drive `Worker::poll` by hand,
//! keep the "NIC" rings topped up to model offered load, and compute every share from the
//! data plane's own counters after checking them against the frames that left. Costs in
//! cycles come from a cost model installed with `Worker::set_cost_model`, so the results
//! are exact and do not depend on the machine.

mod common;

use common::*;
use vrhost_dataplane::{DpError, Drop, Fairness, MAX_WEIGHT, VECTOR, VrConfig, Watchdog, jain};
use vrhost_wire::EthernetAddress;

fn in_mac(vr: usize) -> EthernetAddress {
    mac(0x10 + vr as u8)
}
fn out_mac(vr: usize) -> EthernetAddress {
    mac(0x30 + vr as u8)
}

/// `n` VRs "vr0".."vrN": VR i receives on port i and sends out of port n.
fn rig(n: usize, cfg: impl Fn(usize, &mut VrConfig)) -> Rig {
    let mut rig = Rig::with(n + 1, 16384, 4096);
    for i in 0..n {
        let name = format!("vr{i}");
        let mut c = VrConfig::new(name.clone());
        cfg(i, &mut c);
        rig.dp.add_vr(c).unwrap();
        arm_router(
            &rig.dp,
            &name,
            (i as u16, in_mac(i)),
            (n as u16, out_mac(i)),
        );
    }
    rig.worker.poll();
    rig
}

fn frame(vr: usize, seq: u32) -> Vec<u8> {
    numbered(in_mac(vr), vr as u8, seq)
}

/// Offered load and what came out, per VR.
struct Traffic {
    n: usize,
    /// Next sequence number per VR.
    seq: Vec<u32>,
    /// Frames the "NIC" ring refused (full), per VR: dropped before the data plane.
    nic_drops: Vec<u64>,
    /// Frames that left, per VR; checked in order per VR.
    out: Vec<u64>,
}

impl Traffic {
    fn new(n: usize) -> Traffic {
        Traffic {
            n,
            seq: vec![0; n],
            nic_drops: vec![0; n],
            out: vec![0; n],
        }
    }

    /// Offer `k` frames to VR `vr`'s port (what does not fit in the ring is a NIC drop).
    fn offer(&mut self, rig: &mut Rig, vr: usize, k: usize) {
        for _ in 0..k {
            let f = frame(vr, self.seq[vr]);
            self.seq[vr] += 1;
            if !rig.peers[vr].send(&rig.pool, 0, &f) {
                self.nic_drops[vr] += 1;
            }
        }
    }

    /// Keep VR `vr`'s port ring holding at least `depth` frames (an overloaded sender).
    fn fill(&mut self, rig: &mut Rig, vr: usize, depth: usize) {
        let queued = rig.peers[vr].rx[0].queued(0);
        if queued < depth {
            self.offer(rig, vr, depth - queued);
        }
    }

    /// Take what left; check each frame came from the VR it was sent to, rewritten, and
    /// that each VR's frames are in sequence (gaps only where frames were dropped).
    fn drain(&mut self, rig: &mut Rig, last: &mut [Option<u32>]) {
        for f in rig.recv(self.n) {
            let (vr, seq) = numbering(&f);
            let vr = usize::from(vr);
            assert_eq!(EthernetAddress::from_bytes(&f[6..12]), out_mac(vr));
            assert_eq!(EthernetAddress::from_bytes(&f[..6]), NBR_MAC);
            if let Some(l) = last[vr] {
                assert!(seq > l, "vr{vr}: {seq} after {l}");
            }
            last[vr] = Some(seq);
            self.out[vr] += 1;
        }
    }
}

/// Keep every VR listed in `busy` backlogged for `polls` polls; returns per-VR tx packet
/// counts over those polls (counter differences, checked against the frames seen).
fn backlogged(rig: &mut Rig, t: &mut Traffic, busy: &[usize], polls: usize) -> Vec<u64> {
    let before: Vec<u64> = (0..t.n).map(|i| tx(rig, i)).collect();
    let seen0 = t.out.clone();
    let mut last = vec![None; t.n];
    for _ in 0..polls {
        for &v in busy {
            t.fill(rig, v, 3 * VECTOR);
        }
        rig.worker.poll();
        t.drain(rig, &mut last);
    }
    (0..t.n)
        .map(|i| {
            let d = tx(rig, i) - before[i];
            assert_eq!(d, t.out[i] - seen0[i], "vr{i}: counters vs frames seen");
            d
        })
        .collect()
}

fn tx(rig: &Rig, i: usize) -> u64 {
    rig.dp.vr(&format!("vr{i}")).unwrap().stats().tx_packets
}

fn shares(x: &[u64]) -> Vec<f64> {
    let s: u64 = x.iter().sum();
    x.iter().map(|&v| v as f64 / s as f64).collect()
}

/// Stop offering, forward what is queued, and check every frame is accounted for: offered
/// = NIC drops + forwarded + counted drops, per VR; nothing left in the pool.
fn settle(rig: &mut Rig, t: &mut Traffic) {
    let mut last = vec![None; t.n];
    loop {
        let w = rig.worker.poll();
        t.drain(rig, &mut last);
        if w == 0 {
            break;
        }
    }
    for i in 0..t.n {
        let s = rig.dp.vr(&format!("vr{i}")).unwrap().stats();
        assert_eq!(
            u64::from(t.seq[i]),
            t.nic_drops[i] + s.tx_packets + s.total_drops(),
            "vr{i}: offered = NIC drops + sent + dropped ({:?})",
            s.nonzero_drops()
        );
        assert_eq!(s.tx_packets, t.out[i]);
    }
    assert_eq!(rig.in_use(), 0);
}

#[test]
fn equal_weights_share_packets_equally() {
    let mut rig = rig(3, |_, _| {});
    let mut t = Traffic::new(3);
    backlogged(&mut rig, &mut t, &[0, 1, 2], 20);
    let got = backlogged(&mut rig, &mut t, &[0, 1, 2], 300);
    let j = jain(&got.iter().map(|&x| x as f64).collect::<Vec<_>>());
    assert!(j >= 0.999, "Jain {j}: {got:?}");
    // Overload stays in the NIC: the scheduler's back-pressure leaves the excess in the
    // ports' rings instead of receiving it and shedding it at the ingress ring.
    for i in 0..3 {
        let s = rig.dp.vr(&format!("vr{i}")).unwrap().stats();
        assert_eq!(s.drop(Drop::VrIngressFull), 0, "vr{i}");
    }
    settle(&mut rig, &mut t);
}

#[test]
fn weights_one_two_three_and_a_change_at_runtime() {
    let mut rig = rig(3, |i, c| c.weight = i as u32 + 1);
    let mut t = Traffic::new(3);
    backlogged(&mut rig, &mut t, &[0, 1, 2], 20);
    let got = backlogged(&mut rig, &mut t, &[0, 1, 2], 600);
    for (s, want) in shares(&got).iter().zip([1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0]) {
        assert!((s / want - 1.0).abs() < 0.05, "{:?} vs 1:2:3", shares(&got));
    }
    // Weights change while traffic runs: 1:1:1 from the next vector on.
    for i in 0..3 {
        rig.dp.set_weight(&format!("vr{i}"), 5).unwrap();
        assert_eq!(rig.dp.vr(&format!("vr{i}")).unwrap().weight(), 5);
    }
    backlogged(&mut rig, &mut t, &[0, 1, 2], 10);
    let got = backlogged(&mut rig, &mut t, &[0, 1, 2], 300);
    let j = jain(&got.iter().map(|&x| x as f64).collect::<Vec<_>>());
    assert!(j >= 0.999, "Jain {j}: {got:?}");
    settle(&mut rig, &mut t);
}

/// A receive queue per VR, all overloaded, weights 1:2:3: each queue is read when the
/// scheduler picks its VR, a vector at a time, and the vector is forwarded at once — after
/// every poll nothing waits in the ingress rings (every slot in use is a frame still in a
/// port's ring), where a poll used to receive up to a budget's worth per queue before
/// forwarding any — and the shares still follow the weights.
#[test]
fn a_queue_per_vr_is_read_at_its_vrs_turn_and_keeps_the_weights() {
    let mut rig = rig(3, |i, c| c.weight = i as u32 + 1);
    let mut t = Traffic::new(3);
    let mut last = vec![None; 3];
    // The first four polls read the queues in their receive phase and learn whose they are
    // (four full bursts each); what they received beyond a vector per VR is forwarded over
    // the next few.
    for _ in 0..10 {
        for v in 0..3 {
            t.fill(&mut rig, v, 3 * VECTOR);
        }
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    let at_pick0 = rig.dp.worker_stats()[0].rx_at_pick;
    let before: Vec<u64> = (0..3).map(|i| tx(&rig, i)).collect();
    for poll in 0..600 {
        for v in 0..3 {
            t.fill(&mut rig, v, 3 * VECTOR);
        }
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
        let in_nic: usize = (0..3).map(|v| rig.peers[v].rx[0].queued(0)).sum();
        assert_eq!(
            rig.in_use(),
            in_nic,
            "poll {poll}: packets left in ingress rings"
        );
    }
    let got: Vec<u64> = (0..3).map(|i| tx(&rig, i) - before[i]).collect();
    for (s, want) in shares(&got).iter().zip([1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0]) {
        assert!((s / want - 1.0).abs() < 0.05, "{:?} vs 1:2:3", shares(&got));
    }
    let at_pick = rig.dp.worker_stats()[0].rx_at_pick - at_pick0;
    assert_eq!(
        at_pick,
        got.iter().sum::<u64>(),
        "every packet was read at a pick"
    );
    for i in 0..3 {
        let s = rig.dp.vr(&format!("vr{i}")).unwrap().stats();
        assert_eq!(s.drop(Drop::VrIngressFull), 0, "vr{i}");
    }
    settle(&mut rig, &mut t);
}

/// A queue read at its VR's picks whose traffic moves to another VR (two VRs on one port,
/// by MAC): the burst read for the first goes wholly to the second, which forwards it in the
/// same poll; nothing is lost or left waiting, and the queue goes back to the receive phase.
#[test]
fn a_queue_whose_traffic_moves_to_another_vr_loses_nothing() {
    let mut rig = Rig::with(2, 16384, 4096);
    for i in 0..2 {
        let name = format!("vr{i}");
        rig.dp.add_vr(VrConfig::new(name.clone())).unwrap();
        arm_router(&rig.dp, &name, (0, in_mac(i)), (1, out_mac(i)));
    }
    rig.worker.poll();
    let mut seq = [0u32; 2];
    let mut last = [None::<u32>; 2];
    let mut burst = |rig: &mut Rig, vr: usize| {
        for _ in 0..VECTOR {
            rig.send(0, &frame(vr, seq[vr]));
            seq[vr] += 1;
        }
        rig.worker.poll();
        for f in rig.recv(1) {
            let (v, s) = numbering(&f);
            let v = usize::from(v);
            assert_eq!(EthernetAddress::from_bytes(&f[6..12]), out_mac(v));
            assert!(
                last[v].is_none_or(|l| s == l + 1),
                "vr{v}: {s} after {last:?}"
            );
            last[v] = Some(s);
        }
        // Everything received in the poll was forwarded in it.
        assert_eq!(rig.in_use(), 0, "after a burst for vr{vr}");
    };
    for _ in 0..8 {
        burst(&mut rig, 0);
    }
    let at_pick = rig.dp.worker_stats()[0].rx_at_pick;
    assert!(
        at_pick >= 2 * VECTOR as u64,
        "vr0's queue was read at its picks: {at_pick}"
    );
    for _ in 0..3 {
        burst(&mut rig, 1);
    }
    burst(&mut rig, 0);
    assert_eq!(
        last,
        [Some(9 * VECTOR as u32 - 1), Some(3 * VECTOR as u32 - 1)]
    );
    for (i, sent) in seq.iter().enumerate() {
        let s = rig.dp.vr(&format!("vr{i}")).unwrap().stats();
        assert_eq!(
            (s.tx_packets, s.total_drops()),
            (u64::from(*sent), 0),
            "vr{i}"
        );
    }
}

/// Egi Fig. 5 in miniature: equal weights, offered rates rising unequally; a VR offered
/// less than its fair share gets all of it, the others split the rest equally.
#[test]
fn light_vrs_get_all_they_offer_heavy_ones_share_the_rest() {
    let mut rig = rig(3, |_, _| {});
    let mut t = Traffic::new(3);
    // Budget per poll: a vector per receive queue (4 ports) = 1024. vr2 offers 100 per poll
    // (under its third); vr0 and vr1 stay backlogged.
    let mut last = vec![None; 3];
    let before: Vec<u64> = (0..3).map(|i| tx(&rig, i)).collect();
    for _ in 0..300 {
        t.fill(&mut rig, 0, 3 * VECTOR);
        t.fill(&mut rig, 1, 3 * VECTOR);
        t.offer(&mut rig, 2, 100);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    let got: Vec<u64> = (0..3).map(|i| tx(&rig, i) - before[i]).collect();
    assert_eq!(got[2], 300 * 100, "vr2 lost none");
    assert_eq!(t.nic_drops[2], 0);
    let heavy = got[0] as f64 / got[1] as f64;
    assert!((heavy - 1.0).abs() < 0.01, "{got:?}");
    assert!(got[0] > 3 * got[2], "{got:?}");
    settle(&mut rig, &mut t);
}

/// Rathore Table 1 in miniature: vr0 offered far more than the worker forwards, vr1 a
/// steady load it can carry: vr1 loses nothing, vr0's excess is dropped in its own NIC
/// ring (not received and shed), and vr0 still gets the rest of the core.
#[test]
fn an_overloaded_vr_does_not_hurt_a_steady_one() {
    let mut rig = rig(2, |_, _| {});
    let mut t = Traffic::new(2);
    let mut last = vec![None; 2];
    for _ in 0..300 {
        // vr0: 3× what a poll can forward (a budget of 3 vectors: 3 ports), every poll.
        t.offer(&mut rig, 0, 9 * VECTOR);
        t.offer(&mut rig, 1, 200);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    settle(&mut rig, &mut t);
    let s1 = rig.dp.vr("vr1").unwrap().stats();
    assert_eq!(s1.tx_packets, u64::from(t.seq[1]), "vr1 lost frames");
    assert_eq!(s1.total_drops() + t.nic_drops[1], 0);
    let s0 = rig.dp.vr("vr0").unwrap().stats();
    assert!(t.nic_drops[0] > 100_000, "vr0 was not overloaded");
    assert_eq!(s0.drop(Drop::VrIngressFull), 0);
    // vr0 used what vr1 left of the budget (3 × 256 per poll), less vector rounding.
    let per_poll = s0.tx_packets as f64 / 300.0;
    assert!(per_poll > 3.0 * 256.0 - 200.0 - 40.0, "{per_poll}");
}

/// Egi Fig. 7 in miniature: vr0's path costs 40 % more per packet. In packets mode all
/// three forward the same number of packets; in cycles mode they use the same CPU, so vr0
/// forwards 1/1.4 of the others' packets.
#[test]
fn cycles_mode_gives_an_expensive_path_fewer_packets_and_equal_cpu() {
    let mut rig = rig(3, |_, _| {});
    rig.worker.set_cost_model(Some(Box::new(|vr, n| {
        let per = if vr.name() == "vr0" { 140 } else { 100 };
        per * n as u64
    })));
    let mut t = Traffic::new(3);
    let cycles = |rig: &Rig| -> Vec<u64> {
        (0..3)
            .map(|i| rig.dp.vr(&format!("vr{i}")).unwrap().stats().cycles)
            .collect()
    };
    assert_eq!(rig.dp.fairness(), Fairness::Packets);
    backlogged(&mut rig, &mut t, &[0, 1, 2], 20);
    let got = backlogged(&mut rig, &mut t, &[0, 1, 2], 300);
    let j = jain(&got.iter().map(|&x| x as f64).collect::<Vec<_>>());
    assert!(j >= 0.999, "packets mode, packets: {got:?}");

    rig.dp.set_fairness(Fairness::Cycles);
    backlogged(&mut rig, &mut t, &[0, 1, 2], 20);
    let c0 = cycles(&rig);
    let got = backlogged(&mut rig, &mut t, &[0, 1, 2], 300);
    let c: Vec<f64> = cycles(&rig)
        .iter()
        .zip(&c0)
        .map(|(a, b)| (a - b) as f64)
        .collect();
    assert!(jain(&c) >= 0.99, "cycles mode, cycle shares: {c:?}");
    let ratio = got[0] as f64 / got[1] as f64;
    assert!((ratio - 1.0 / 1.4).abs() < 0.03, "{ratio}: {got:?}");
    settle(&mut rig, &mut t);
}

/// A path that holds the core too long is quarantined after repeated offences; the others
/// keep forwarding everything; its packets are then dropped at demux as `vr-quarantined`;
/// released, it runs again.
#[test]
fn watchdog_quarantines_a_hog_and_the_others_keep_forwarding() {
    let mut rig = rig(2, |_, _| {});
    rig.dp
        .set_watchdog(Some(Watchdog {
            budget_cycles: 100_000,
            strikes: 3,
        }))
        .unwrap();
    // vr0's path takes 10,000 cycles a packet: any vector over 10 packets offends.
    rig.worker.set_cost_model(Some(Box::new(|vr, n| {
        let per = if vr.name() == "vr0" { 10_000 } else { 100 };
        per * n as u64
    })));
    let mut t = Traffic::new(2);
    let mut last = vec![None; 2];
    for _ in 0..20 {
        t.offer(&mut rig, 0, 64);
        t.offer(&mut rig, 1, 64);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    let v0 = rig.dp.vr("vr0").unwrap();
    assert!(v0.quarantined());
    let s0 = v0.stats();
    assert_eq!(s0.watchdog_offences, 3, "quarantined at the third offence");
    assert_eq!(s0.tx_packets, 3 * 64, "three vectors ran");
    assert_eq!(
        s0.drop(Drop::VrQuarantined),
        17 * 64,
        "the rest dropped at demux"
    );
    let s1 = rig.dp.vr("vr1").unwrap().stats();
    assert_eq!((s1.tx_packets, s1.total_drops()), (20 * 64, 0));
    assert_eq!(s1.watchdog_offences, 0);
    assert!(!rig.dp.vr("vr1").unwrap().quarantined());

    // Released, it forwards again (small vectors are within the budget).
    assert!(rig.dp.release_vr("vr0").unwrap());
    assert!(!rig.dp.release_vr("vr0").unwrap());
    for _ in 0..5 {
        t.offer(&mut rig, 0, 8);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    assert_eq!(v0.stats().tx_packets, 3 * 64 + 5 * 8);
    assert!(!v0.quarantined());
    settle(&mut rig, &mut t);
}

/// The same with real time: a path made to burn 200,000 TSC cycles a packet (the
/// measurement element) against a budget of 100,000 per vector. The first vector over
/// budget arms the watchdog's CPU clock (excused); the next three, on the CPU throughout,
/// offend and quarantine.
#[test]
fn a_really_slow_path_is_caught_by_the_tsc_watchdog() {
    let mut rig = rig(2, |_, _| {});
    rig.dp
        .set_watchdog(Some(Watchdog {
            budget_cycles: 100_000,
            strikes: 3,
        }))
        .unwrap();
    rig.dp.set_extra_cost("vr0", 200_000).unwrap();
    let mut t = Traffic::new(2);
    let mut last = vec![None; 2];
    for _ in 0..10 {
        t.offer(&mut rig, 0, 2);
        t.offer(&mut rig, 1, 2);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    let v0 = rig.dp.vr("vr0").unwrap();
    assert!(v0.quarantined());
    let s0 = v0.stats();
    assert_eq!(s0.tx_packets, 8, "four vectors of two");
    assert_eq!((s0.watchdog_excused, s0.watchdog_offences), (1, 3));
    assert!(!rig.dp.vr("vr1").unwrap().quarantined());
    assert_eq!(rig.dp.vr("vr1").unwrap().stats().tx_packets, 20);
    settle(&mut rig, &mut t);
}

/// A worker preempted in the middle of a VR's vectors (here: the path sleeps 10 ms per
/// vector, off the CPU, against a budget of 1,000,000 TSC cycles — under 0.5 ms) is not the
/// VR's fault: every such vector is excused on the thread's CPU clock, the VR is never
/// quarantined and forwards every packet. (Before, three such vectors in 32 cut the
/// tenant off until an operator released it.) The budget leaves the vector's own CPU time
/// (the path, the sleep's system call and wake-up) a wide margin: with 100,000 cycles
/// (~40 µs) a loaded CI machine charged at least three vectors of 40 over it, and quarantined.
#[test]
fn a_preempted_worker_does_not_get_its_vrs_quarantined() {
    let mut rig = rig(2, |_, _| {});
    rig.dp
        .set_watchdog(Some(Watchdog {
            budget_cycles: 1_000_000,
            strikes: 3,
        }))
        .unwrap();
    rig.dp.set_extra_wait("vr0", 10_000).unwrap();
    let mut t = Traffic::new(2);
    let mut last = vec![None; 2];
    for _ in 0..40 {
        t.offer(&mut rig, 0, 2);
        t.offer(&mut rig, 1, 2);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    let v0 = rig.dp.vr("vr0").unwrap();
    assert!(!v0.quarantined());
    let s0 = v0.stats();
    assert_eq!((s0.tx_packets, s0.total_drops()), (80, 0));
    // Every vector was over budget on the TSC; nearly all are excused on the CPU clock. Not
    // always all: with the file's other tests spinning on both cores, one or two vectors in
    // 40 were charged over 1,000,000 cycles of CPU time (a loaded machine's wake-up path is
    // charged to the thread), never the three strikes that quarantine.
    assert_eq!(s0.watchdog_excused + s0.watchdog_offences, 40, "{s0:?}");
    assert!(s0.watchdog_offences < 3, "{s0:?}");
    assert_eq!(rig.dp.vr("vr1").unwrap().stats().tx_packets, 80);
    // Back on the CPU, a path that really is slow is still caught: within three vectors
    // (fewer if one or two of the excused phase's offences are still in the watchdog's
    // window of 32; one in its first eight vectors has left it, so the total is not
    // always 3). The spin is 40 times the budget a vector (two packets of 20,000,000
    // cycles): it is charged on the CPU clock, and with the file's other tests spinning on
    // two cores this thread may get a fifth of one. At 2,000,000 cycles a packet (4 times
    // the budget) three of five vectors were once excused that way.
    let before = s0.watchdog_offences;
    rig.dp.set_extra_wait("vr0", 0).unwrap();
    rig.dp.set_extra_cost("vr0", 20_000_000).unwrap();
    for _ in 0..5 {
        t.offer(&mut rig, 0, 2);
        rig.worker.poll();
        t.drain(&mut rig, &mut last);
    }
    assert!(v0.quarantined());
    let caught = v0.stats().watchdog_offences - before;
    assert!((1..=3).contains(&caught), "{caught} offences to quarantine");
    settle(&mut rig, &mut t);
}

/// Policers drop at demux, counted `vr-policed`, per VR; the other VR is untouched.
#[test]
fn policers_limit_packets_and_bits_at_demux() {
    let mut rig = rig(2, |i, c| {
        if i == 0 {
            // 1,000 packets/s: a 10 ms burst of 10, then one per ms.
            c.policer_pps = Some(1_000);
        } else {
            // 1.6 Mbit/s = 200,000 bytes/s: bursts of 2,000 bytes (10 ms).
            c.policer_bps = Some(1_600_000);
        }
    });
    rig.dp.set_test_time(Some(1_000_000_000));
    let mut t = Traffic::new(2);
    let mut last = vec![None; 2];
    t.offer(&mut rig, 0, 100);
    t.offer(&mut rig, 1, 100);
    rig.run();
    t.drain(&mut rig, &mut last);
    let len = frame(0, 0).len() as u64;
    assert_eq!(t.out[0], 10);
    assert_eq!(t.out[1], 2_000 / len);
    // 5 ms later: 5 more packets, 1,000 more bytes.
    rig.dp.set_test_time(Some(1_005_000_000));
    t.offer(&mut rig, 0, 100);
    t.offer(&mut rig, 1, 100);
    rig.run();
    t.drain(&mut rig, &mut last);
    assert_eq!(t.out[0], 15);
    assert_eq!(t.out[1], 3_000 / len);
    let s0 = rig.dp.vr("vr0").unwrap().stats();
    assert_eq!(s0.drop(Drop::VrPoliced), 185);
    assert_eq!(s0.rx_packets, 15, "policed packets are not admitted");
    let s1 = rig.dp.vr("vr1").unwrap().stats();
    assert_eq!(s1.drop(Drop::VrPoliced), 200 - t.out[1]);
    assert_eq!(rig.dp.port_stats(0).unwrap().rx_dropped, 185);
    // Lifted at runtime.
    rig.dp.set_policer("vr0", None, None).unwrap();
    t.offer(&mut rig, 0, 100);
    rig.run();
    t.drain(&mut rig, &mut last);
    assert_eq!(t.out[0], 115);
    rig.dp.set_test_time(None);
    settle(&mut rig, &mut t);
}

/// A policer put on a VR that had none, while the workers run: demux keeps a copy of
/// "this VR is policed" per worker, and the change reaches it before the next burst.
#[test]
fn a_policer_set_at_runtime_applies_to_the_next_burst() {
    let mut rig = rig(2, |_, _| {});
    rig.dp.set_test_time(Some(1_000_000_000));
    let mut t = Traffic::new(2);
    let mut last = vec![None; 2];
    t.offer(&mut rig, 0, 100);
    rig.run();
    t.drain(&mut rig, &mut last);
    assert_eq!(t.out[0], 100, "no policer yet");
    // 1,000 packets/s with the clock stopped: a burst of 10 conforms, nothing more.
    rig.dp.set_policer("vr0", Some(1_000), None).unwrap();
    t.offer(&mut rig, 0, 200);
    t.offer(&mut rig, 1, 200);
    rig.run();
    t.drain(&mut rig, &mut last);
    let policed = rig.dp.vr("vr0").unwrap().stats().drop(Drop::VrPoliced);
    assert_eq!(policed, 190, "vr0 policed from the next burst");
    assert_eq!(t.out[0], 110);
    assert_eq!(t.out[1], 200, "vr1 has no policer");
    rig.dp.set_test_time(None);
    settle(&mut rig, &mut t);
}

#[test]
fn bad_fairness_settings_are_refused_naming_the_vr_and_field() {
    let rig = rig(1, |_, _| {});
    let field = |e: DpError| match e {
        DpError::BadField { what, field, .. } => (what, field),
        e => panic!("{e}"),
    };
    for (w, ok) in [
        (0, false),
        (1, true),
        (MAX_WEIGHT, true),
        (MAX_WEIGHT + 1, false),
    ] {
        let mut c = VrConfig::new("w");
        c.weight = w;
        let r = rig.dp.add_vr(c);
        assert_eq!(r.is_ok(), ok, "weight {w}");
        if let Err(e) = r {
            assert_eq!(field(e), ("virtual router \"w\"".into(), "weight"));
        } else {
            rig.dp.remove_vr("w").unwrap();
        }
    }
    let e = rig.dp.set_weight("vr0", 0).unwrap_err();
    assert_eq!(field(e), ("virtual router \"vr0\"".into(), "weight"));
    assert_eq!(rig.dp.vr("vr0").unwrap().weight(), 1, "unchanged");
    let mut c = VrConfig::new("p");
    c.policer_pps = Some(0);
    assert_eq!(field(rig.dp.add_vr(c).unwrap_err()).1, "policer_pps");
    let mut c = VrConfig::new("p");
    c.policer_bps = Some(0);
    assert_eq!(field(rig.dp.add_vr(c).unwrap_err()).1, "policer_bps");
    assert_eq!(
        field(rig.dp.set_policer("vr0", None, Some(0)).unwrap_err()).1,
        "policer_bps"
    );
    let mut c = VrConfig::new("p");
    c.worker = Some(1);
    let e = rig.dp.add_vr(c).unwrap_err();
    assert_eq!(field(e), ("virtual router \"p\"".into(), "worker"));
    assert_eq!(field(rig.dp.move_vr("vr0", 3).unwrap_err()).1, "worker");
    assert!(rig.dp.vr("p").is_none());
    let bad = Watchdog {
        budget_cycles: 1000,
        strikes: 0,
    };
    assert_eq!(
        field(rig.dp.set_watchdog(Some(bad)).unwrap_err()).1,
        "strikes"
    );
    assert_eq!(rig.dp.watchdog(), None);
}
