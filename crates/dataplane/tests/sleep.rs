//! VRs that sleep (`crate::wake`): under pressure the scheduler stops looking at a VR it
//! passed over until its deferral runs out, and demux wakes it sooner once enough packets
//! came for it; without pressure an idle VR sleeps until demux queues a packet for it.
//! These tests pin the halves: a VR asleep when its traffic surges is woken before its
//! ingress ring can overflow, a VR asleep with a lone packet still runs within a deferral,
//! and an idle VR under light load is not looked at yet runs a lone packet at once.
//!
//! One worker polled step by step, port 0 in, port 1 out; a full burst of 256 frames is
//! offered every poll, which is what puts the worker under pressure.

mod common;

use common::*;
use vrhost_dataplane::counters::Drop;
use vrhost_dataplane::port::mem::MemPeer;
use vrhost_dataplane::{Dataplane, RunVrs, VrConfig};

/// VRs that take the background traffic.
const BG: u8 = 7;
/// The poll budget's burst.
const BURST: u32 = 256;

/// `BG` background VRs ("bg1".."bg7", MACs 1..=7) and "hot" (MAC 100), each a two-armed
/// router from port 0 to port 1.
fn add_vrs(dp: &Dataplane) {
    for i in 1..=BG {
        let name = format!("bg{i}");
        dp.add_vr(VrConfig::new(&name)).unwrap();
        arm_router(dp, &name, (0, mac(i)), (1, mac(100 + i)));
    }
    dp.add_vr(VrConfig::new("hot")).unwrap();
    arm_router(dp, "hot", (0, mac(100)), (1, mac(200)));
}

fn rig() -> Rig {
    let r = Rig::with(2, 32768, 16384);
    add_vrs(&r.dp);
    r
}

/// The numbered streams: tag 0 for "hot", tag i for "bg<i>"; what was sent of each, and
/// every frame that left.
struct Streams {
    hot: u32,
    bg: Vec<u32>,
    out: Vec<Vec<u8>>,
}

impl Streams {
    fn new() -> Streams {
        Streams {
            hot: 0,
            bg: vec![0; usize::from(BG)],
            out: Vec::new(),
        }
    }

    /// The next frame for "hot".
    fn hot_frame(&mut self) -> Vec<u8> {
        self.hot += 1;
        numbered(mac(100), 0, self.hot - 1)
    }

    /// The next frame for the background VR that the `k`th frame of a burst goes to.
    fn bg_frame(&mut self, k: u32) -> Vec<u8> {
        let i = (k % u32::from(BG)) as usize;
        self.bg[i] += 1;
        numbered(mac(i as u8 + 1), i as u8 + 1, self.bg[i] - 1)
    }

    /// Offer one burst on the rig, `hot` frames of it to "hot" and the rest to the
    /// background VRs; poll once and collect what left.
    fn poll(&mut self, r: &mut Rig, hot: u32) {
        self.poll_n(r, hot, BURST);
    }

    /// [`Streams::poll`] with `n` frames: fewer than a burst put no pressure on the worker.
    fn poll_n(&mut self, r: &mut Rig, hot: u32, n: u32) {
        for k in 0..n {
            let f = if k < hot {
                self.hot_frame()
            } else {
                self.bg_frame(k)
            };
            r.send(0, &f);
        }
        r.worker.poll();
        self.out.extend(r.recv(1));
    }

    /// Frames of "hot" sent and not yet out.
    fn hot_waiting(&self) -> u32 {
        self.hot - self.out.iter().filter(|f| numbering(f).0 == 0).count() as u32
    }

    /// Every stream left whole and in order.
    fn check(&self) {
        let mut next = vec![0u32; 1 + self.bg.len()];
        for f in &self.out {
            let (tag, seq) = numbering(f);
            assert_eq!(
                seq,
                next[usize::from(tag)],
                "stream {tag}: lost or reordered"
            );
            next[usize::from(tag)] += 1;
        }
        assert_eq!(next[0], self.hot, "hot frames out");
        assert_eq!(next[1..], self.bg, "background frames out");
    }
}

/// Pressure with nothing for "hot": it is looked at once and then left asleep.
fn pressure_without_hot(r: &mut Rig, s: &mut Streams) {
    for _ in 0..8 {
        s.poll(r, 0);
    }
}

#[test]
fn a_sleeping_vr_whose_traffic_surges_is_woken_before_its_ring_overflows() {
    let (mut r, mut s) = (rig(), Streams::new());
    pressure_without_hot(&mut r, &mut s);
    // Now half of every burst is for "hot": 128 a poll, 3,072 in 24 polls, three times its
    // ring of 1,024. Asleep for the rest of its deferral (up to 32 polls) it would overflow
    // after 8; woken by demux it runs as its packets come.
    for p in 0..24 {
        s.poll(&mut r, BURST / 2);
        // What has not left waits in its ring: in steady state little more than a burst.
        assert!(
            s.hot_waiting() <= 2 * BURST,
            "poll {p}: {} of hot's frames waiting",
            s.hot_waiting()
        );
    }
    r.run();
    s.out.extend(r.recv(1));
    let hot = r.dp.vr("hot").unwrap().stats();
    assert_eq!(hot.drop(Drop::VrIngressFull), 0);
    assert_eq!(hot.tx_packets, u64::from(s.hot));
    s.check();
    assert_eq!(r.in_use(), 0, "every slot back in the pool");
}

/// Offer one frame for "hot" under pressure and keep the pressure on without it; return
/// the polls until the frame left.
fn polls_for_a_lone_packet(r: &mut Rig, s: &mut Streams) -> u32 {
    s.poll(r, 1);
    let mut polls = 1;
    while s.hot_waiting() > 0 {
        assert!(polls <= 33, "hot's frame still waits after {polls} polls");
        s.poll(r, 0);
        polls += 1;
    }
    polls
}

#[test]
fn a_lone_packet_for_a_sleeping_vr_waits_at_most_a_deferral() {
    let (mut r, mut s) = (rig(), Streams::new());
    pressure_without_hot(&mut r, &mut s);
    // One frame for "hot", far below what wakes it. It waits, since under pressure a short
    // backlog is deferred (up to 32 polls), but no longer.
    let polls = polls_for_a_lone_packet(&mut r, &mut s);
    assert!(polls > 1, "left at once");
    // "hot" falls asleep idle under pressure again; then the load is light for longer than
    // a deferral (every VR is looked at in every poll). A lone frame under pressure after
    // that starts a deferral of its own: what was idle before does not count as waiting.
    pressure_without_hot(&mut r, &mut s);
    for _ in 0..40 {
        s.poll_n(&mut r, 0, 16);
    }
    let polls = polls_for_a_lone_packet(&mut r, &mut s);
    assert!(polls > 1, "after light load: left at once");
    r.run();
    s.out.extend(r.recv(1));
    s.check();
}

/// Light load (no full burst) with one worker: a VR found with nothing queued sleeps idle,
/// so the scheduler stops looking at it, and a lone frame for it wakes it in the poll it
/// comes and leaves at once.
#[test]
fn without_pressure_an_idle_vr_is_not_looked_at_and_a_lone_packet_leaves_at_once() {
    let (mut r, mut s) = (rig(), Streams::new());
    for _ in 0..4 {
        s.poll_n(&mut r, 0, 16);
    }
    let scanned = |r: &Rig| r.dp.worker_stats()[0].vrs_scanned;
    let before = scanned(&r);
    let polls = 32;
    for _ in 0..polls {
        s.poll_n(&mut r, 0, 16);
    }
    // The background VRs get frames in every poll and are looked at in every poll; "hot"
    // once at most (its idle sleep's safety deadline is far off). Looking at every VR in
    // every poll would be 8 a poll.
    let looked = scanned(&r) - before;
    let bg = u64::from(BG) * polls;
    assert!(
        (bg..=bg + 1).contains(&looked),
        "{looked} looks in {polls} polls, {bg} of them for the background VRs"
    );
    s.poll_n(&mut r, 1, 16);
    assert_eq!(s.hot_waiting(), 0, "the lone frame waited");
    // And again once its sleep's deadline (256 polls) has passed and it slept anew.
    for _ in 0..300 {
        s.poll_n(&mut r, 0, 16);
    }
    s.poll_n(&mut r, 1, 16);
    assert_eq!(s.hot_waiting(), 0, "the lone frame waited");
    r.run();
    s.out.extend(r.recv(1));
    s.check();
}

/// Light load: a VR whose run empties its ring sleeps idle at once, so the next poll's scan
/// does not look at it just to find it empty. Each lone frame for "hot" costs one look, the
/// one that runs it (two before: the run, then a look at the empty ring the poll after).
#[test]
fn without_pressure_a_vr_that_ran_dry_is_not_looked_at_again_until_a_packet_comes() {
    let (mut r, mut s) = (rig(), Streams::new());
    for _ in 0..4 {
        s.poll_n(&mut r, 0, 16);
    }
    let scanned = |r: &Rig| r.dp.worker_stats()[0].vrs_scanned;
    let before = scanned(&r);
    let (polls, every) = (64u64, 4u64);
    for p in 0..polls {
        let hot = u32::from(p % every == 0);
        s.poll_n(&mut r, hot, 16);
        assert_eq!(s.hot_waiting(), 0, "poll {p}: the lone frame waited");
    }
    let looked = scanned(&r) - before;
    let (bg, hot) = (u64::from(BG) * polls, polls / every);
    assert_eq!(
        looked,
        bg + hot,
        "{looked} looks in {polls} polls: {bg} for the background VRs, {hot} frames for hot"
    );
    r.run();
    s.out.extend(r.recv(1));
    s.check();
}

/// Pressure, then light load: "hot", found with nothing queued under pressure, rests for a
/// deferral under pressure and idle in light polls (`Sleep::rest_deferred`), so the light
/// polls that follow do not look at it; a lone frame then still leaves in the poll it came.
#[test]
fn a_vr_that_rested_under_pressure_is_not_looked_at_in_the_light_polls_after() {
    let (mut r, mut s) = (rig(), Streams::new());
    pressure_without_hot(&mut r, &mut s);
    let scanned = |r: &Rig| r.dp.worker_stats()[0].vrs_scanned;
    let before = scanned(&r);
    let polls = 8u64;
    for _ in 0..polls {
        s.poll_n(&mut r, 0, 16);
    }
    // The background VRs: looked at in every light poll (each gets frames); "hot" never.
    let looked = scanned(&r) - before;
    assert_eq!(
        looked,
        u64::from(BG) * polls,
        "{looked} looks in {polls} polls"
    );
    s.poll_n(&mut r, 1, 16);
    assert_eq!(s.hot_waiting(), 0, "the lone frame waited");
    r.run();
    s.out.extend(r.recv(1));
    s.check();
}

/// Two workers on the owner, "in" and "out" with a receive queue each, and every VR run
/// by worker 0; with the peers of "in" and "out".
fn on_worker_0() -> (Multi, MemPeer, MemPeer) {
    let mut m = Multi::new(2, &["in", "out"], 32768, 16384, RunVrs::OnOwner);
    add_vrs(&m.dp);
    for i in 1..=BG {
        m.dp.move_vr(&format!("bg{i}"), 0).unwrap();
    }
    m.dp.move_vr("hot", 0).unwrap();
    for _ in 0..4 {
        for w in &mut m.workers {
            w.poll();
        }
    }
    assert_eq!(m.dp.worker_stats()[0].vrs, usize::from(BG) + 1);
    let (ingress, egress) = (m.peers.remove(0), m.peers.remove(0));
    (m, ingress, egress)
}

/// On the owner, another worker's demux feeds the VR's ring from its own receive queue; it
/// wakes the owner's VR through the shared wake bits.
#[test]
fn another_worker_wakes_the_owners_sleeping_vr() {
    let (mut m, mut ingress, mut egress) = on_worker_0();
    let mut s = Streams::new();
    // Worker 0 under pressure from queue 0 (background only); from poll 8 on, worker 1
    // receives 128 frames a poll for "hot" on queue 1.
    for p in 0..32 {
        for k in 0..BURST {
            assert!(ingress.send(&m.pool, 0, &s.bg_frame(k)));
        }
        for _ in 0..if p >= 8 { BURST / 2 } else { 0 } {
            assert!(ingress.send(&m.pool, 1, &s.hot_frame()));
        }
        m.workers[1].poll();
        m.workers[0].poll();
        s.out.extend(egress.recv_all(&m.pool));
        assert!(
            s.hot_waiting() <= 2 * BURST,
            "poll {p}: {} of hot's frames waiting",
            s.hot_waiting()
        );
    }
    while m.workers.iter_mut().map(|w| w.poll()).sum::<usize>() > 0 {}
    s.out.extend(egress.recv_all(&m.pool));
    let hot = m.dp.vr("hot").unwrap().stats();
    assert_eq!(hot.drop(Drop::VrIngressFull), 0);
    s.check();
}

/// Light load on the owner, fed by another worker's demux: the VRs found with nothing
/// queued sleep idle there too (the feeding worker announces each burst's VRs through the
/// owner's arrival bits), so the owner's scan looks only at the VRs that got frames, and a
/// lone frame for an idle VR still leaves in the owner's next poll.
#[test]
fn on_the_owner_a_vr_fed_by_another_worker_sleeps_idle_and_a_lone_packet_wakes_it() {
    let (mut m, mut ingress, mut egress) = on_worker_0();
    let mut s = Streams::new();
    // Every frame comes in on worker 1's queue; worker 0 forwards them.
    let mut round = |s: &mut Streams, workers: &mut [vrhost_dataplane::Worker], hot: u32| {
        for k in 0..16 {
            let f = if k < hot {
                s.hot_frame()
            } else {
                s.bg_frame(k)
            };
            assert!(ingress.send(&m.pool, 1, &f));
        }
        workers[1].poll();
        workers[0].poll();
        s.out.extend(egress.recv_all(&m.pool));
    };
    for _ in 0..4 {
        round(&mut s, &mut m.workers, 0);
    }
    let scanned = |m: &Multi| m.dp.worker_stats()[0].vrs_scanned;
    let before = scanned(&m);
    let polls = 32u64;
    for _ in 0..polls {
        round(&mut s, &mut m.workers, 0);
    }
    // The background VRs get frames in every round; "hot" is looked at once at most. Were
    // the owner to look at every VR it runs in every light poll, as it did with two
    // workers, that would be 8 a poll.
    let looked = scanned(&m) - before;
    let bg = u64::from(BG) * polls;
    assert!(
        (bg..=bg + 1).contains(&looked),
        "{looked} looks in {polls} polls, {bg} of them for the background VRs"
    );
    for p in 0..8 {
        round(&mut s, &mut m.workers, u32::from(p % 2 == 0));
        assert_eq!(s.hot_waiting(), 0, "round {p}: the lone frame waited");
    }
    while m.workers.iter_mut().map(|w| w.poll()).sum::<usize>() > 0 {}
    s.out.extend(egress.recv_all(&m.pool));
    s.check();
}
