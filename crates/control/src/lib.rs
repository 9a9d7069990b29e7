//! vrhost's control side (being written).

pub mod config;
