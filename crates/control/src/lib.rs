//! vrhost's control side: what the daemon needs besides the data plane and the port backends.
//!
//! - [`config`]: the declarative config file, checked whole before anything changes;
//! - [`apply`]: a checked VR plan into the data plane (all or nothing);
//! - [`punt`]: each VR's namespace with a tap per VIF, and the punt/inject loop.

pub mod apply;
pub mod config;
pub mod punt;
