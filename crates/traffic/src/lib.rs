//! vrbench's traffic generator and sink.
//!
//! A [`Generator`] sends [`Stream`]s — each with its own rate, frame size and flow sweep —
//! into any port backend's [`TxQueue`](vrhost_dataplane::port::TxQueue) (the in-memory
//! rings of an in-process DUT, AF_XDP, AF_PACKET), stamping every frame with a
//! [`signature`]: stream id, sequence number and transmit time. A [`Sink`] reads frames from
//! any [`RxQueue`](vrhost_dataplane::port::RxQueue) and counts per stream what arrived,
//! what was duplicated or reordered, and the latency in an HDR histogram; with the
//! generator's sent counts, what was lost.
//!
//! * [`signature`] — the 18 bytes after the UDP header, and how to find them.
//! * [`frames`] — streams, frame sizes (RFC 2544 and IMIX), flow sweeps, templates.
//! * [`rate`] — the token bucket that paces each stream.
//! * [`generator`] — building and sending bursts.
//! * [`sink`] — receiving and counting.
//! * [`mem`] — the in-memory rings as `TxQueue`/`RxQueue`, for an in-process DUT and tests.
//! * [`clock`] — CLOCK_MONOTONIC, or a simulated clock for tests.
//!
//! # A trial
//!
//! For an in-process DUT, make a mem port (`vrhost_dataplane::port::mem::port`), give its
//! `MemPort` to the DUT's worker, and wrap the peer's ends: `RingTx(peer.rx[q])` for the
//! generator, `RingRx(peer.tx[w])` for the sink. For veth, pass an AF_XDP or AF_PACKET
//! queue from `vrhost-io` instead. Here the generator feeds the sink directly:
//!
//! ```
//! use std::net::IpAddr;
//! use std::time::Duration;
//! use vrhost_dataplane::Pool;
//! use vrhost_traffic::{mem, GenConfig, Generator, Rate, Sink, SinkConfig, Stream};
//! use vrhost_wire::EthernetAddress;
//!
//! # fn main() -> Result<(), vrhost_traffic::Error> {
//! let pool = Pool::new(16384);
//! let (tx, rx) = mem::loopback(16384);
//! let mut s = Stream::new(
//!     7,                                   // stream id, carried in every frame
//!     EthernetAddress([2, 0, 0, 0, 0, 1]), // source MAC
//!     EthernetAddress([2, 0, 0, 0, 0, 2]), // the VR's VIF MAC
//!     IpAddr::from([10, 0, 0, 1]),
//!     IpAddr::from([10, 1, 0, 1]),
//! );
//! s.rate = Rate::Pps(1e6);
//! s.flows.dst.count = 1000; // 10.1.0.1 ..= 10.1.3.232
//! let mut generator = Generator::new(pool.clone(), Box::new(tx), &[s], GenConfig::default())?;
//! let mut sink = Sink::new(pool.clone(), Box::new(rx), &[7], SinkConfig::default())?;
//!
//! generator.run_for(Duration::from_millis(10)); // on its own thread in a real run
//! // Counters are valid only once the generator stopped and everything drained:
//! sink.drain(Duration::from_millis(1), Duration::from_secs(1));
//! let (sent, got) = (generator.stats(), sink.snapshot());
//! let (tx, rx) = (sent.stream(7).unwrap(), got.stream(7).unwrap());
//! assert_eq!(rx.lost(tx.sent), 0);
//! assert_eq!((rx.duplicated, rx.reordered), (0, 0));
//! println!("p99 latency {} ns", rx.latency.p99);
//! # Ok(())
//! # }
//! ```

pub mod clock;
mod error;
pub mod frames;
pub mod generator;
pub mod mem;
pub mod rate;
pub mod signature;
pub mod sink;

pub use clock::{Clock, SimClock};
pub use error::Error;
pub use frames::{AddrSweep, Flows, FrameSize, Frames, Stream};
pub use generator::{GenConfig, GenStats, Generator, StreamTxStats};
pub use rate::{Pacer, Rate};
pub use signature::Signature;
pub use sink::{Latency, Sink, SinkConfig, SinkSnapshot, StreamRx};
