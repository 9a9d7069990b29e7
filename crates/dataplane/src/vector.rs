//! Vectors: up to [`VECTOR`] packet handles processed together by each node.
//!
//! A node handles a whole vector before the next node runs (VPP's frames): instruction
//! caches stay warm, and independent packets' memory accesses overlap. 256 is VPP's size and
//! the FIB's batch size; a vector lives on the stack (2 KiB of handles).

use arrayvec::ArrayVec;

use crate::pool::Pkt;

/// Most packets in one vector.
pub const VECTOR: usize = 256;

/// A vector of packet handles.
pub type PktVec = ArrayVec<Pkt, VECTOR>;
