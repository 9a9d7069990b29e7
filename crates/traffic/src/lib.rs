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
