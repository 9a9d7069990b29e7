#![deny(unsafe_code)]
pub mod latency;
mod secs;
pub mod sim;
pub mod trial;
