//! Network-namespace labs: what vrhost's root tests, vrbench and a new user's first try run in.
//!
//! Why a crate of its own: the io backends' tests, the daemon's end-to-end tests and vrbench
//! all need the same few things — a namespace with a unique name that is deleted even when a
//! test panics, veth pairs between namespaces, commands run inside a namespace, and a way
//! for a thread of this process to open sockets inside one. Everything here drives
//! iproute2 (`ip`), which every Linux host with namespaces has; nothing here is on a hot path.
//!
//! Root is required. [`require_root`] encodes the project's rule: under `CI=true` a test that
//! cannot get root fails loudly; elsewhere it says why it skips.

pub mod netns;

pub use netns::{Netns, NetnsError, ip, require_root, veth};
