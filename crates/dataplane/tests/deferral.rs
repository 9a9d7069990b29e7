//! The worker's deferral (`crate::deferral`) through a whole data plane. With traffic spread
//! over many VRs under pressure, each VR gets a packet every few polls, so a deferral of 32
//! polls runs vectors of a few packets; the deferral grows and the vectors with it. With one
//! VR taking most of the traffic it stays at 32, so the light VRs' packets wait no longer
//! than before. Without pressure it returns to 32. The operator's bound caps it, and zero
//! turns it off. Every frame leaves, whole and in order.
//!
//! One worker polled step by step on a clock of its own (`Dataplane::set_test_time`, 20 µs
//! a poll), port 0 in, port 1 out; a full burst of 256 frames every poll is what puts the
//! worker under pressure.

mod common;

use common::*;
use std::time::Duration;

use vrhost_dataplane::counters::Drop;
use vrhost_dataplane::{VrConfig, WaitStats};
use vrhost_wire::EthernetAddress;

/// VRs: a burst of 256 spread over them gives each a packet every fourth poll.
const N: u16 = 1024;
const BURST: u32 = 256;
const POLL_NS: u64 = 20_000;

fn in_mac(i: u16) -> EthernetAddress {
    let [hi, lo] = i.to_be_bytes();
    EthernetAddress([0x02, 0, 0, 1, hi, lo])
}

fn out_mac(i: u16) -> EthernetAddress {
    let [hi, lo] = i.to_be_bytes();
    EthernetAddress([0x02, 0, 0, 2, hi, lo])
}

/// `N` two-armed routers "v0".."v1023" from port 0 to port 1, each with MACs of its own.
fn rig() -> Rig {
    let r = Rig::with(2, 1 << 17, 4096);
    for i in 0..N {
        let name = format!("v{i}");
        r.dp.add_vr(VrConfig::new(&name)).unwrap();
        arm_router(&r.dp, &name, (0, in_mac(i)), (1, out_mac(i)));
    }
    r
}

/// One numbered stream per VR: what was sent of each, and every frame that left.
struct Streams {
    sent: Vec<u32>,
    /// The next light VR a frame goes to.
    next: u16,
    out: Vec<Vec<u8>>,
    now: u64,
}

impl Streams {
    fn new() -> Streams {
        Streams {
            sent: vec![0; usize::from(N)],
            next: 0,
            out: Vec::new(),
            now: 1,
        }
    }

    fn frame(&mut self, vr: u16) -> Vec<u8> {
        let seq = &mut self.sent[usize::from(vr)];
        *seq += 1;
        numbered(in_mac(vr), 0, *seq - 1)
    }

    /// Offer `n` frames, the first `heavy` of them to "v0" and the rest round the other VRs
    /// in turn; poll once on the next tick of the clock and collect what left.
    fn poll(&mut self, r: &mut Rig, n: u32, heavy: u32) {
        for k in 0..n {
            let vr = if k < heavy {
                0
            } else {
                self.next = self.next % (N - 1) + 1;
                self.next
            };
            let f = self.frame(vr);
            r.send(0, &f);
        }
        self.now += POLL_NS;
        r.dp.set_test_time(Some(self.now));
        r.worker.poll();
        self.out.extend(r.recv(1));
    }

    /// Poll `polls` times with full bursts spread over the light VRs; returns the worker's
    /// deferral before and every new one it took, each once.
    fn deferrals(&mut self, r: &mut Rig, polls: u32) -> Vec<u64> {
        let mut seen = vec![deferral(r)];
        for _ in 0..polls {
            self.poll(r, BURST, 0);
            if seen.last() != Some(&deferral(r)) {
                seen.push(deferral(r));
            }
        }
        seen
    }

    /// Poll `polls` times with full bursts spread over the light VRs, the deferral `want`
    /// throughout; returns the packets a vector the VRs ran meanwhile.
    fn steady(&mut self, r: &mut Rig, polls: u32, want: u64) -> f64 {
        let (p0, v0) = runs(r);
        for p in 0..polls {
            self.poll(r, BURST, 0);
            assert_eq!(deferral(r), want, "poll {p} of {polls}");
        }
        let (p1, v1) = runs(r);
        (p1 - p0) as f64 / (v1 - v0) as f64
    }

    /// Drain, then check that every stream left whole and in order: the egress MAC names
    /// the VR, the payload the frame's number.
    fn finish(mut self, r: &mut Rig) {
        r.run();
        self.out.extend(r.recv(1));
        let mut next = vec![0u32; usize::from(N)];
        for f in &self.out {
            let vr = u16::from_be_bytes([f[10], f[11]]);
            assert_eq!(
                &f[6..10],
                &[0x02, 0, 0, 2],
                "left with a MAC of no egress VIF"
            );
            let (_, seq) = numbering(f);
            assert_eq!(seq, next[usize::from(vr)], "v{vr}: lost or reordered");
            next[usize::from(vr)] += 1;
        }
        assert_eq!(next, self.sent, "frames out per VR");
        assert_eq!(r.in_use(), 0, "every slot back in the pool");
    }
}

/// The worker's deferral now.
fn deferral(r: &Rig) -> u64 {
    r.dp.worker_stats()[0].deferral_polls
}

/// Packets and vectors run by every VR so far.
fn runs(r: &Rig) -> (u64, u64) {
    (0..N).fold((0, 0), |(p, v), i| {
        let s = r.dp.vr(&format!("v{i}")).unwrap().stats();
        (p + s.scheduled, v + s.vectors)
    })
}

#[test]
fn spread_over_many_vrs_under_pressure_the_deferral_grows_and_vectors_with_it() {
    let (mut r, mut s) = (rig(), Streams::new());
    // Each VR gets a packet every fourth poll, so a deferral of 32 polls bounds its vectors
    // at 8. The deferral doubles every 64 polls while most vectors are small (under 16) and
    // holds once they are middling.
    let seen = s.deferrals(&mut r, 768);
    assert_eq!(seen, [32, 64], "the deferral, spread over {N} VRs");
    // Settled.
    let vector = s.steady(&mut r, 256, 64);
    assert!(
        vector > 12.0,
        "vectors of {vector:.1}: a deferral of 32 polls bounds them at 8"
    );
    // No pressure (bursts of 16) for a period: back to the base.
    for _ in 0..128 {
        s.poll(&mut r, 16, 0);
    }
    assert_eq!(deferral(&r), 32, "without pressure");
    let dropped: u64 = (0..N)
        .map(|i| {
            r.dp.vr(&format!("v{i}"))
                .unwrap()
                .stats()
                .drop(Drop::VrIngressFull)
        })
        .sum();
    assert_eq!(dropped, 0);
    s.finish(&mut r);
}

#[test]
fn with_one_vr_taking_most_of_the_traffic_the_deferral_stays_at_32() {
    let (mut r, mut s) = (rig(), Streams::new());
    // "v0" takes 192 frames of each burst and runs full vectors; the 64 others go to the
    // other 1,023 VRs, one frame every 16 polls each: vectors of 2 with a deferral of 32.
    for p in 0..1024 {
        s.poll(&mut r, BURST, 192);
        assert_eq!(deferral(&r), 32, "poll {p}");
    }
    s.finish(&mut r);
}

#[test]
fn the_operators_bound_caps_the_deferral_and_zero_turns_it_off() {
    let (mut r, mut s) = (rig(), Streams::new());
    // 1 ms at 20 µs a poll: 50 polls, where the vectors alone would take it to 64.
    r.dp.set_max_deferral(Duration::from_millis(1)).unwrap();
    let seen = s.deferrals(&mut r, 512);
    assert_eq!(seen, [32, 50], "the deferral under a 1 ms bound");
    // Off: from the next poll every VR runs what it has, a packet every fourth poll.
    r.dp.set_max_deferral(Duration::ZERO).unwrap();
    s.poll(&mut r, BURST, 0);
    assert_eq!(deferral(&r), 0, "turned off");
    let scanned0 = r.dp.worker_stats()[0].vrs_scanned;
    // Stays off.
    let vector = s.steady(&mut r, 256, 0);
    assert!(
        vector < 1.5,
        "vectors of {vector:.1} with deferring off: a VR gets a packet every fourth poll"
    );
    // A VR with nothing queued sleeps until demux queues a packet for it, as in a light
    // poll: the scheduler looks at the VRs a poll brought packets (at most 256), not at
    // all 1,024.
    let scanned = (r.dp.worker_stats()[0].vrs_scanned - scanned0) as f64 / 256.0;
    assert!(
        scanned < 300.0,
        "{scanned:.0} VRs looked at a poll with deferring off"
    );
    // A bound above the most it takes is refused and changes nothing.
    let e =
        r.dp.set_max_deferral(Duration::from_millis(101))
            .unwrap_err();
    assert!(e.to_string().contains("max_deferral"), "{e}");
    assert_eq!(r.dp.max_deferral(), Duration::ZERO);
    s.finish(&mut r);
}

/// Every VR's ingress waits summed.
fn waits(r: &Rig) -> WaitStats {
    let mut w = WaitStats::default();
    for i in 0..N {
        w.merge(&r.dp.vr(&format!("v{i}")).unwrap().stats().ingress_wait);
    }
    w
}

/// The waits the rings measured (`vrhost_dataplane::wait`) are what the deferral does:
/// under a 1 ms bound (50 polls) a VR's packets wait about the whole deferral, since a VR
/// gets a packet every fourth poll and so never gathers a vector sooner, and no longer than
/// the bound and the poll or two a VR whose deferral ran out may wait for the poll's budget.
/// Deferring off, each packet runs in the poll it came.
#[test]
fn packets_wait_about_a_deferral_and_within_its_bound() {
    let (mut r, mut s) = (rig(), Streams::new());
    r.dp.set_max_deferral(Duration::from_millis(1)).unwrap();
    assert_eq!(s.deferrals(&mut r, 512), [32, 50]);
    let (w0, v0) = (waits(&r), runs(&r).1);
    s.steady(&mut r, 256, 50);
    let (w1, v1) = (waits(&r), runs(&r).1);
    let d = w1.since(&w0);
    // Each vector drained its VR's ring, and packets came between any two: one sample each.
    assert_eq!(d.samples(), v1 - v0, "one sample a vector");
    let mean = d.mean().unwrap();
    assert!(
        mean > Duration::from_micros(800) && mean <= Duration::from_millis(1),
        "mean wait {mean:?} under a deferral of 50 polls of 20 µs"
    );
    assert!(
        w1.max_ns <= 1_100_000,
        "the longest wait, {} ns, under a 1 ms bound",
        w1.max_ns
    );
    // Off: once what waited under the deferral has run, nothing waits past its poll.
    r.dp.set_max_deferral(Duration::ZERO).unwrap();
    s.steady(&mut r, 128, 0);
    let w2 = waits(&r);
    s.steady(&mut r, 256, 0);
    let d = waits(&r).since(&w2);
    assert_eq!(d.samples(), 256 * u64::from(BURST), "vectors of one packet");
    assert_eq!(
        (d.buckets[0], d.sum_ns),
        (d.samples(), 0),
        "deferring off: {d:?}"
    );
    s.finish(&mut r);
}
