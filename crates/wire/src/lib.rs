//! Zero-copy views and builders for the headers vrhost's data plane touches.
//!
//! Every header comes in two layers, as in smoltcp's `wire` module:
//!
//! * a **view** `Packet<T: AsRef<[u8]>>` over a buffer the caller owns: getters read the bytes in
//!   place, setters (on `T: AsMut<[u8]>`) write them in place. Untrusted input enters through
//!   `new_checked`, which checks the length once so that the getters can index without further
//!   checks; `new_unchecked` is for buffers the caller sized itself (e.g. when emitting).
//! * a **`Repr`**, a plain value with `parse` (view → value, validating what the data plane needs
//!   validated), `emit` (value → bytes into a view) and `buffer_len`.
//!
//! The data plane works on views (no copy, no allocation); control-plane code and tests use the
//! `Repr`s. Nothing here allocates, and nothing panics on any input that went through
//! `new_checked` (the fuzz targets in `fuzz/` hold us to that).
//!
//! Offsets are named constants in a private `mod field` per header. Errors are one small `Copy`
//! enum, [`Error`], so that a data-plane node can count a drop reason without formatting.
#![deny(unsafe_code)]
#![no_std]
#[cfg(test)]
extern crate std;

mod error;
pub use error::{Error, Result};

pub mod checksum;

pub mod arp;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use ethernet::{EtherType, EthernetAddress};
