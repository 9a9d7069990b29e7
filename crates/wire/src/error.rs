//! The one error type of the wire crate.
//!
//! A small `Copy` enum rather than a `thiserror` type with payloads: parse errors happen on the
//! data plane's hot path, where a node turns them into a per-reason drop counter. The variant is
//! the reason; the offending bytes are still in the caller's buffer if anyone wants them.

use core::fmt;

/// Why a buffer could not be read or written as the header asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field inside it says).
    Truncated,
    /// A version field holds a value this header does not have (e.g. IPv4 version ≠ 4).
    BadVersion,
    /// A header-length field is below the minimum or beyond the buffer.
    BadHeaderLen,
    /// A total/payload-length field disagrees with the buffer (RFC 1812 §5.2.2).
    BadLength,
    /// A checksum does not verify.
    BadChecksum,
    /// An IPv6 extension-header chain is longer than we are willing to walk.
    ExtChainTooLong,
    /// A field holds a value the `Repr` cannot represent (unknown ARP hardware type, a
    /// reserved ICMP code, a fragment where a whole datagram is required, …).
    Unrecognized,
    /// The fields are individually fine but do not make a valid header together
    /// (e.g. an option that overruns the options area).
    Malformed,
}

/// Result with the wire crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "buffer truncated",
            Error::BadVersion => "bad version field",
            Error::BadHeaderLen => "bad header length",
            Error::BadLength => "length field disagrees with buffer",
            Error::BadChecksum => "checksum does not verify",
            Error::ExtChainTooLong => "IPv6 extension header chain too long",
            Error::Unrecognized => "unrecognized field value",
            Error::Malformed => "malformed header",
        };
        f.write_str(s)
    }
}

impl core::error::Error for Error {}
