//! Per-virtual-router forwarding tables: IPv4 and IPv6 longest-prefix match with lock-free
//! readers.
//!
//! Each virtual router owns one [`Fib4`] and one [`Fib6`]; a process holds many. Workers look
//! up addresses (one, or a vector of up to [`BATCH`] at once) holding an epoch [`Guard`] from
//! [`pin`]; the control plane adds, replaces and removes routes at the same time. A reader
//! sees every route either before or after a change, never half of one, and never waits.
//!
//! * [`Prefix`] — validated prefixes (`"10.0.0.0/8".parse()`); host bits are an error.
//! * [`NextHop`], [`NextHopSet`] — where a route goes: via a neighbour, attached, local, drop,
//!   unreachable, prohibit; ECMP up to [`MAX_ECMP`]. Lookups return an [`NhId`].
//! * [`Table`] — the table; see [`poptrie`](crate::poptrie) for the structure and why.
//! * [`tablegen`] — seeded generators of realistic full Internet tables, for benches and tests.

mod arena;
mod error;
mod family;
mod nexthop;
mod poptrie;
mod prefix;
#[cfg(target_arch = "x86_64")]
mod simd;
mod table;
pub mod tablegen;

pub use crossbeam_epoch::{Guard, pin};
pub use error::FibError;
pub use family::{Family, Key, V4, V6};
pub use nexthop::{MAX_BUCKETS, MAX_ECMP, MAX_WEIGHT, NextHop, NextHopSet, share_of};
pub use prefix::{Prefix, Prefix4, Prefix6};
pub use table::{BATCH, Config, Kernel, Memory, NhId, Table};

/// The IPv4 table of a virtual router.
pub type Fib4 = Table<V4>;
/// The IPv6 table of a virtual router.
pub type Fib6 = Table<V6>;
