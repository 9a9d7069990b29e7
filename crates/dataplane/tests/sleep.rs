//! VRs that sleep under pressure (`crate::wake`): the scheduler stops looking at a VR it
//! passed over until its deferral runs out, and demux wakes it sooner once enough packets
//! came for it. These tests pin both halves: a VR asleep when its traffic surges is woken
//! before its ingress ring can overflow, and a VR asleep with a lone packet still runs
//! within a deferral.
//!
//! One worker polled step by step, port 0 in, port 1 out; a full burst of 256 frames is
//! offered every poll, which is what puts the worker under pressure.

mod common;

use common::*;
use vrhost_dataplane::counters::Drop;
use vrhost_dataplane::{RunVrs, VrConfig};

/// VRs that take the background traffic.
const BG: u8 = 7;
/// The poll budget's burst.
const BURST: u32 = 256;

/// A rig with `BG` background VRs ("bg1".."bg7", MACs 1..=7) and "hot" (MAC 100), each a
/// two-armed router from port 0 to port 1.
fn rig() -> Rig {
    let r = Rig::with(2, 32768, 16384);
    for i in 1..=BG {
        let name = format!("bg{i}");
        r.dp.add_vr(VrConfig::new(&name)).unwrap();
        arm_router(&r.dp, &name, (0, mac(i)), (1, mac(100 + i)));
    }
    r.dp.add_vr(VrConfig::new("hot")).unwrap();
    arm_router(&r.dp, "hot", (0, mac(100)), (1, mac(200)));
    r
}

/// Offer one burst: `hot` frames to "hot" (tag 0, numbered from `*seq_hot`), the rest of
/// the burst spread over the background VRs (tag = the VR's number); then poll once and
/// collect what left.
fn poll_with(r: &mut Rig, hot: u32, seq_hot: &mut u32, seq_bg: &mut [u32], out: &mut Vec<Vec<u8>>) {
    for k in 0..BURST {
        if k < hot {
            r.send(0, &numbered(mac(100), 0, *seq_hot));
            *seq_hot += 1;
        } else {
            let i = (k % u32::from(BG)) as usize;
            r.send(0, &numbered(mac(i as u8 + 1), i as u8 + 1, seq_bg[i]));
            seq_bg[i] += 1;
        }
    }
    r.worker.poll();
    out.extend(r.recv(1));
}

/// Every stream left whole and in order: tag 0 `hot` frames, tag i `bg[i-1]`.
fn check_streams(out: &[Vec<u8>], hot: u32, bg: &[u32]) {
    let mut next = vec![0u32; 1 + bg.len()];
    for f in out {
        let (tag, seq) = numbering(f);
        assert_eq!(
            seq,
            next[usize::from(tag)],
            "stream {tag}: lost or reordered"
        );
        next[usize::from(tag)] += 1;
    }
    assert_eq!(next[0], hot, "hot frames out");
    assert_eq!(&next[1..], bg, "background frames out");
}

#[test]
fn a_sleeping_vr_whose_traffic_surges_is_woken_before_its_ring_overflows() {
    let mut r = rig();
    let (mut seq_hot, mut seq_bg, mut out) = (0, vec![0; usize::from(BG)], Vec::new());
    // Pressure with nothing for "hot": it is looked at once and then left asleep.
    for _ in 0..8 {
        poll_with(&mut r, 0, &mut seq_hot, &mut seq_bg, &mut out);
    }
    // Now half of every burst is for "hot": 128 a poll, 3,072 in 24 polls, three times its
    // ring of 1,024. Asleep for the rest of its deferral (up to 32 polls) it would overflow
    // after 8; woken by demux it runs as its packets come.
    let before = out.len();
    for p in 0..24 {
        poll_with(&mut r, BURST / 2, &mut seq_hot, &mut seq_bg, &mut out);
        let hot_out = out[before..].iter().filter(|f| numbering(f).0 == 0).count() as u32;
        // What has not left waits in its ring: never more than the ring holds, and in
        // steady state little more than a burst or two.
        assert!(
            seq_hot - hot_out <= 2 * BURST,
            "poll {p}: {} of hot's frames waiting",
            seq_hot - hot_out
        );
    }
    r.run();
    out.extend(r.recv(1));
    let hot = r.dp.vr("hot").unwrap().stats();
    assert_eq!(hot.drop(Drop::VrIngressFull), 0);
    assert_eq!(hot.tx_packets, u64::from(seq_hot));
    check_streams(&out, seq_hot, &seq_bg);
    assert_eq!(r.in_use(), 0, "every slot back in the pool");
}

#[test]
fn a_lone_packet_for_a_sleeping_vr_waits_at_most_a_deferral() {
    let mut r = rig();
    let (mut seq_hot, mut seq_bg, mut out) = (0, vec![0; usize::from(BG)], Vec::new());
    for _ in 0..8 {
        poll_with(&mut r, 0, &mut seq_hot, &mut seq_bg, &mut out);
    }
    // One frame for "hot", far below what wakes it; then pressure goes on without it.
    poll_with(&mut r, 1, &mut seq_hot, &mut seq_bg, &mut out);
    let mut polls = 1;
    while !out.iter().any(|f| numbering(f).0 == 0) {
        assert!(polls <= 33, "hot's frame still waits after {polls} polls");
        poll_with(&mut r, 0, &mut seq_hot, &mut seq_bg, &mut out);
        polls += 1;
    }
    // It did wait: under pressure a short backlog is deferred (up to 32 polls), asleep.
    assert!(polls > 1, "left at once");
    r.run();
    out.extend(r.recv(1));
    check_streams(&out, 1, &seq_bg);
}

/// On the owner, another worker's demux feeds the VR's ring from its own receive queue; it
/// wakes the owner's VR through the shared wake bits.
#[test]
fn another_worker_wakes_the_owners_sleeping_vr() {
    let Multi {
        pool,
        dp,
        mut workers,
        mut peers,
    } = Multi::new(2, &["in", "out"], 32768, 16384, RunVrs::OnOwner);
    for i in 1..=BG {
        let name = format!("bg{i}");
        dp.add_vr(VrConfig::new(&name)).unwrap();
        arm_router(&dp, &name, (0, mac(i)), (1, mac(100 + i)));
        dp.move_vr(&name, 0).unwrap();
    }
    dp.add_vr(VrConfig::new("hot")).unwrap();
    arm_router(&dp, "hot", (0, mac(100)), (1, mac(200)));
    dp.move_vr("hot", 0).unwrap();
    for _ in 0..4 {
        for w in &mut workers {
            w.poll();
        }
    }
    assert_eq!(
        dp.worker_stats()[0].vrs,
        usize::from(BG) + 1,
        "all on worker 0"
    );
    let (mut ingress, mut egress) = (peers.remove(0), peers.remove(0));
    let (mut seq_hot, mut seq_bg, mut out) = (0u32, vec![0u32; usize::from(BG)], Vec::new());
    // Worker 0 under pressure from queue 0 (background only); from poll 8 on, worker 1
    // receives 128 frames a poll for "hot" on queue 1.
    for p in 0..32 {
        for k in 0..BURST {
            let i = (k % u32::from(BG)) as usize;
            assert!(ingress.send(
                &pool,
                0,
                &numbered(mac(i as u8 + 1), i as u8 + 1, seq_bg[i])
            ));
            seq_bg[i] += 1;
        }
        if p >= 8 {
            for _ in 0..BURST / 2 {
                assert!(ingress.send(&pool, 1, &numbered(mac(100), 0, seq_hot)));
                seq_hot += 1;
            }
        }
        workers[1].poll();
        workers[0].poll();
        out.extend(egress.recv_all(&pool));
        let hot_out = out.iter().filter(|f| numbering(f).0 == 0).count() as u32;
        assert!(
            seq_hot - hot_out <= 2 * BURST,
            "poll {p}: {} of hot's frames waiting",
            seq_hot - hot_out
        );
    }
    while workers.iter_mut().map(|w| w.poll()).sum::<usize>() > 0 {}
    out.extend(egress.recv_all(&pool));
    let hot = dp.vr("hot").unwrap().stats();
    assert_eq!(hot.drop(Drop::VrIngressFull), 0);
    check_streams(&out, seq_hot, &seq_bg);
}
