#![deny(unsafe_code)]
pub mod fairness;
pub mod latency;
pub mod progress;
pub mod record;
pub mod report;
pub mod search;
mod secs;
pub mod sim;
pub mod stats;
pub mod trial;
