//! Control-plane errors of the FIB. Each variant carries the value that was wrong, so the
//! message names it (`"10.0.0.1/8: host bits set"`), as a user configuring a router expects.

/// Why a FIB operation was refused. Nothing is changed when an error is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    /// The address has bits set below the prefix length.
    #[error("{prefix}: host bits set (did you mean {canonical}?)")]
    HostBitsSet {
        /// The prefix as given.
        prefix: String,
        /// The prefix with the host bits cleared.
        canonical: String,
    },
    /// The prefix length exceeds the family's width.
    #[error("{prefix}: prefix length {len} is longer than {max}")]
    LengthTooLong {
        /// The prefix as given.
        prefix: String,
        /// The length given.
        len: u32,
        /// 32 or 128.
        max: u8,
    },
    /// Text that is not `ADDRESS/LENGTH`.
    #[error("{text:?}: not a prefix (expected ADDRESS/LENGTH)")]
    BadPrefixSyntax {
        /// The text as given.
        text: String,
    },
    /// An ECMP group with no next hop.
    #[error("a route needs at least one next hop")]
    NoNextHop,
    /// An ECMP group larger than [`crate::MAX_ECMP`].
    #[error("ECMP group of {n} next hops exceeds the maximum of {max}")]
    EcmpTooLarge {
        /// Next hops given.
        n: usize,
        /// The maximum.
        max: usize,
    },
    /// A weighted ECMP member's weight outside 1..=[`crate::MAX_WEIGHT`].
    #[error("next-hop weight {weight} is outside 1..={max}")]
    BadWeight {
        /// The weight given.
        weight: u16,
        /// The largest allowed.
        max: u16,
    },
    /// A resilient set's bucket table that does not fit its members
    /// ([`crate::NextHopSet::resilient`]).
    #[error("resilient next-hop set: {reason}")]
    BadBuckets {
        /// What is wrong with it.
        reason: String,
    },
    /// `add` of a prefix that is already in the table.
    #[error("{prefix}: route exists")]
    Exists {
        /// The prefix.
        prefix: String,
    },
    /// `remove` of a prefix that is not in the table.
    #[error("{prefix}: no such route")]
    NotFound {
        /// The prefix.
        prefix: String,
    },
    /// More distinct next-hop sets than the table was created for.
    #[error("next-hop table full ({capacity} distinct next-hop sets)")]
    NextHopTableFull {
        /// The table's capacity.
        capacity: u32,
    },
}
