//! Statistics for noisy machines: summaries, interleaved trial order, per-round ratios.
//!
//! These hosts swing up to 2× between runs (the "Noise"), so one number per DUT says
//! little and a ratio of two numbers measured minutes apart says less. The remedy, as in
//! `vrbench fwd`: run the DUTs' trials interleaved ([`Interleave`]: A B A B …, starting with a
//! different DUT each round so that none always follows the same neighbour), repeat, and
//! report the median with its spread ([`Summary`]); state a comparison as the median of
//! per-round ratios ([`Rounds::ratio`]) — each round's two figures were measured close together
//! in time, so slow drifts of the host cancel — with the ratio of medians beside it.

mod interleave;
mod rounds;
mod summary;

pub use interleave::{Interleave, Slot};
pub use rounds::{RatioSummary, Rounds};
pub use summary::{StatsError, Summary, median, per_round_ratios, quantile};
