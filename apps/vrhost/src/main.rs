//! The vrhost daemon (being written).

fn main() {}
