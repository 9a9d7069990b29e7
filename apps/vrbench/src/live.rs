//! Live-frames trials: signed, rate-controlled traffic through a lab DUT, counted per stream.

mod frames;
mod generator;
mod histogram;
mod sink;
mod wheel;
