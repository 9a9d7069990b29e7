//! vrhost's control side: what the daemon needs besides the data plane and the port backends.
//!
//! - [`config`]: the declarative config file, checked whole before anything changes;
//! - [`apply`]: a checked VR plan into the data plane (all or nothing);
//! - [`punt`]: each VR's namespace with a tap per VIF, and the punt/inject loop;
//! - [`sync`]: netlink sync of each VR namespace's links, addresses, routes and neighbours
//!   into the VR's FIBs and neighbour table.

pub mod apply;
pub mod config;
pub mod punt;
pub mod sync;
