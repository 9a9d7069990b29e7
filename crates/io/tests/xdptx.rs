//! XDP transmit (`vrhost_io::xdptx`) on a veth pair in its own namespaces (root required;
//! under `CI=true` a test that cannot get root fails instead of skipping).
//!
//! The peer end gets an XDP program returning `XDP_PASS`, which is what makes a veth take
//! redirected frames; a packet socket on the peer then sees exactly what was sent.

mod afpacket_util;

use std::time::{Duration, Instant};

use afpacket_util::pass_program;

use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::{PktVec, Pool, VECTOR};
use vrhost_io::xdptx::{CAP, XdpTx, XdpTxError};
use vrhost_lab::{Capture, Netns, require_root, veth};

const DST: [u8; 6] = [0x02, 0x58, 0x54, 0, 0, 1];
const SRC: [u8; 6] = [0x02, 0x58, 0x54, 0, 0, 2];
/// IEEE 802 local experimental EtherType: nothing in the kernel answers it.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// Frame `i`: the header, then `i` as the first four bytes of a payload of `len − 14`
/// bytes that differ from frame to frame.
fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(&i.to_be_bytes());
    f.extend((f.len()..len).map(|k| (k as u32 * 7 + i) as u8));
    f.truncate(len);
    f
}

fn wait_for(cap: &Capture, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < n && t0.elapsed() < Duration::from_secs(5) {
        got.extend(
            cap.received()
                .unwrap()
                .into_iter()
                .filter(|f| f.data.get(12..14) == Some(&ETHERTYPE[..]))
                .map(|f| f.data),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    got
}

/// More frames than one run carries, of every size from the smallest to 1514 bytes, arrive
/// at the peer byte for byte and in order; a frame too short for Ethernet is refused and
/// counted; every slot is back in the pool.
#[test]
fn frames_leave_byte_for_byte_in_order_and_a_runt_is_counted() {
    if !require_root("XDP transmit test") {
        return;
    }
    let a = Netns::new("xtx").unwrap();
    let b = Netns::new("xtx").unwrap();
    veth((&a, "ta"), (&b, "tb"), 1).unwrap();
    let _pass = pass_program(&a, "ta");
    let cap = Capture::open(&a, "ta").unwrap();
    let sizes = [60, 61, 64, 128, 333, 1000, 1514];
    let n = CAP as usize + 45;
    let sent: Vec<Vec<u8>> = (0..n as u32)
        .map(|i| frame(i, sizes[i as usize % sizes.len()]))
        .collect();
    let pool = Pool::new(1024);
    let before = pool.available();
    let counters = b
        .run(|| {
            let mut tx = XdpTx::open("tb").unwrap_or_else(|e| panic!("{e}"));
            // Three bursts of up to 128 (the runt in the middle), one flush: the queue
            // runs once when full and once at the flush.
            for (k, chunk) in sent.chunks(128).enumerate() {
                let mut v = PktVec::new();
                for f in chunk {
                    v.push(pool.alloc_frame(f).unwrap());
                }
                if k == 1 {
                    v.push(pool.alloc_frame(&[0xff; 10]).unwrap());
                }
                let len = v.len();
                assert_eq!(tx.tx_burst(&pool, &mut v), len);
                assert!(v.is_empty());
            }
            tx.flush(&pool);
            tx.counters()
        })
        .unwrap();
    assert_eq!(pool.available(), before, "every slot back in the pool");
    let c = |x: &vrhost_dataplane::counters::Counter| x.get();
    assert_eq!(c(&counters.frames), n as u64);
    assert_eq!(c(&counters.refused), 1);
    assert_eq!(c(&counters.failed), 0);
    assert!(c(&counters.runs) >= 2, "{counters:?}");
    let got = wait_for(&cap, n);
    assert_eq!(got.len(), n, "frames at the peer");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "frame {i}");
    }
}

/// A veth whose peer has neither an XDP program nor GRO cannot take redirected frames;
/// opening says so, naming the interface and the fix, and nothing is sent.
#[test]
fn a_device_without_xdp_transmit_is_refused_with_the_reason() {
    if !require_root("XDP transmit test") {
        return;
    }
    let a = Netns::new("xtx").unwrap();
    let b = Netns::new("xtx").unwrap();
    veth((&a, "ua"), (&b, "ub"), 1).unwrap();
    let err = b.run(|| XdpTx::open("ub").unwrap_err()).unwrap();
    assert!(matches!(err, XdpTxError::NoXmit { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("ub") && msg.contains("gro on"),
        "the message names the interface and the fix: {msg}"
    );
    let missing = b.run(|| XdpTx::open("nosuch0").unwrap_err()).unwrap();
    assert!(missing.to_string().contains("nosuch0"), "{missing}");
}

/// The per-queue path (`txpath`): a light flush goes by the socket, a loaded one by XDP
/// transmit, frames leave in order either way; a fence passes at the next flush; when the
/// peer stops taking XDP transmit (its program detached) the queue moves to the socket
/// within about a second and nothing is lost.
#[test]
fn the_queue_picks_its_path_per_flush_and_follows_the_device() {
    use std::sync::atomic::Ordering::Relaxed;
    use vrhost_io::afpacket::{PacketOptions, PacketPort};
    use vrhost_io::txpath::{TxChoice, TxPath, XDP_MIN_FRAMES};
    if !require_root("XDP transmit test") {
        return;
    }
    let a = Netns::new("xtx").unwrap();
    let b = Netns::new("xtx").unwrap();
    veth((&a, "va"), (&b, "vb"), 1).unwrap();
    let pass = pass_program(&a, "va");
    let cap = Capture::open(&a, "va").unwrap();
    let pool = Pool::new(2048);
    let mut port = b
        .run(|| PacketPort::open("vb", 1, &pool, &PacketOptions::default()))
        .unwrap()
        .unwrap();
    let (_rx, socket) = port.take_queues().pop().unwrap();
    let mut seq = 0u32;
    let mut sent = Vec::new();
    let mut send = |tx: &mut Box<dyn TxQueue>, n: usize| {
        let mut v = PktVec::new();
        for _ in 0..n {
            let f = frame(seq, 60 + (seq as usize % 50));
            seq += 1;
            v.push(pool.alloc_frame(&f).unwrap());
            sent.push(f);
            if v.is_full() {
                assert_eq!(tx.tx_burst(&pool, &mut v), VECTOR);
            }
        }
        let len = v.len();
        assert_eq!(tx.tx_burst(&pool, &mut v), len);
        tx.flush(&pool);
    };
    let (mut tx, state) = b
        .run(|| TxPath::wrap("vb", Box::new(socket), TxChoice::Auto))
        .unwrap()
        .unwrap_or_else(|(_, e)| panic!("{e}"));
    let state = state.expect("a path, not the bare socket");
    assert!(state.xdp.load(Relaxed));
    let xdp_frames = || state.xdp_counters.frames.get();
    // The worker's thread is in the port's namespace; so is this one for the runs.
    b.run(|| {
        send(&mut tx, XDP_MIN_FRAMES - 1);
        assert_eq!(xdp_frames(), 0, "a light flush goes by the socket");
        send(&mut tx, 300);
        assert_eq!(xdp_frames(), 300, "a loaded one by XDP transmit");
        send(&mut tx, 3);
        let f = tx.fence().expect("a fence");
        send(&mut tx, 0);
        assert!(f.passed(), "passed at the next flush");
    })
    .unwrap();
    // The peer's program goes: the device stops taking XDP transmit (frames sent by XDP
    // now would vanish, so none are sent until the queue has noticed; flushes with
    // nothing to send are what a worker's idle polls make).
    drop(pass);
    b.run(|| {
        let t0 = Instant::now();
        while state.xdp.load(Relaxed) && t0.elapsed() < Duration::from_secs(3) {
            send(&mut tx, 0);
            std::thread::sleep(Duration::from_micros(100));
        }
        // Without the notification it takes the periodic check (a second).
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        assert!(!state.xdp.load(Relaxed), "still on XDP transmit");
        let before = xdp_frames();
        send(&mut tx, 100);
        assert_eq!(xdp_frames(), before, "on the socket now");
    })
    .unwrap();
    assert_eq!(state.switches.get(), 1);
    let got = wait_for(&cap, sent.len());
    let seqs = |v: &[Vec<u8>]| -> Vec<u32> {
        v.iter()
            .map(|f| u32::from_be_bytes(f[14..18].try_into().unwrap()))
            .collect()
    };
    let missing: Vec<u32> = seqs(&sent)
        .into_iter()
        .filter(|s| !seqs(&got).contains(s))
        .collect();
    assert!(missing.is_empty(), "missing at the peer: {missing:?}");
    assert_eq!(got.len(), sent.len(), "every frame at the peer");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "frame {i} in order");
    }
    drop(tx);
    drop(port);
    assert_eq!(pool.available(), pool.capacity());
}
