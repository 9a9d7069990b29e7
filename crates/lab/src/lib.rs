//! Network-namespace labs: what vrhost's root tests, vrbench and a new user's first try run in.
//!
//! Why a crate of its own: the io backends' tests, the daemon's end-to-end tests and vrbench
//! all need the same few things — a namespace with a unique name that is deleted even when a
//! test panics, veth pairs between namespaces, commands run inside a namespace, and a way
//! for a thread of this process to open sockets inside one — and, on top of those, one
//! topology ([`Lab`]) in which vrhost and the kernel forwarder are measured side by side.
//! Everything here drives iproute2 (`ip`), `/proc/sys` and a few ioctls, which every Linux
//! host with namespaces has; nothing here is on a hot path.
//!
//! * [`netns`]: one namespace, deleted on drop; `ip`, batches, sysctls, setns'd threads.
//! * [`addressing`]: the addressing and MAC plan, pure functions of (VR, side, overlapping).
//! * [`topology`]: [`LabSpec`] and [`Lab`] — build, describe, find and remove labs.
//! * `kernel`: the kernel-forwarder baseline inside a lab ([`Forwarder::Kernel`],
//!   [`Forwarder::KernelPlain`]).
//! * `bridge`: the veth/bridge kernel baseline ([`Forwarder::KernelBridge`]).
//! * [`offload`]: veths that carry what a wire would (no TSO/GSO/GRO, real checksums).
//! * [`capture`]: count the frames an interface in a namespace saw, for isolation tests.
//! * [`tools`]: ordinary tools between namespaces, with deadlines (an iperf3 transfer).
//!
//! Root is required. [`require_root`] encodes the project's rule: under `CI=true` a test that
//! cannot get root fails loudly; elsewhere it says why it skips. [`require_tool`] does the
//! same for a tool a test needs (BIRD, FRR).

pub mod addressing;
mod bridge;
pub mod capture;
mod kernel;
pub mod netns;
pub mod offload;
pub mod tools;
pub mod topology;

pub use addressing::{MAX_VRS, Mac, Prefix4, Prefix6, Side, SideAddrs};
pub use capture::{Capture, CaptureError, Frame};
pub use netns::{Netns, NetnsError, ip, require_root, require_tool, veth};
pub use topology::{Forwarder, Lab, LabError, LabSpec, MAX_QUEUES, VrLab, VrSide};
