//! Parts of the vrhost daemon that tests and tools use too.
//!
//! - [`labconfig`]: a vrhost config for a `vrhost_lab::Lab` (the demo and the end-to-end
//!   tests run the daemon on exactly the lab's interfaces, MACs and addresses).

pub mod labconfig;
