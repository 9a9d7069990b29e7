//! Options of the Hop-by-Hop and Destination Options headers (RFC 8200 §4.2): type-length-value
//! records, except Pad1, which is a lone zero byte.
//!
//! An iterator over the header's bytes rather than a parsed list: a router reads these options
//! for one reason on the fast path — is there a Router Alert (RFC 2711) that says "punt me"
//! (MLD, RSVP) — and stops as soon as it knows. The iterator ends at the first error and never
//! reads outside the slice, so it terminates on any input (each step consumes ≥ 1 byte).
//!
//! What to do with an *unknown* option is encoded in its type's top two bits; [`OptionAction`]
//! decodes them so that the caller can apply RFC 8200's rule without re-deriving it.

use crate::{Error, Result};

/// Pad1: one byte of padding, no length field.
const PAD1: u8 = 0;
/// PadN: padding with a length.
const PADN: u8 = 1;
/// Router Alert (RFC 2711), two bytes of value.
const ROUTER_ALERT: u8 = 5;

/// One option of a Hop-by-Hop or Destination Options header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6Option<'a> {
    /// A single byte of padding.
    Pad1,
    /// Padding of 2 + n bytes (n is the data length; the data is zeros when emitted).
    PadN(u8),
    /// Router Alert with its value: 0 = MLD, 1 = RSVP, 2 = Active Networks (RFC 2711).
    RouterAlert(u16),
    /// Any other option, kept raw (Jumbo Payload included: jumbograms are not supported).
    Unknown {
        /// The option type byte (action bits included).
        kind: u8,
        /// The option data (after the type and length bytes).
        data: &'a [u8],
    },
}

impl Ipv6Option<'_> {
    /// The option type byte.
    pub const fn kind(&self) -> u8 {
        match self {
            Ipv6Option::Pad1 => PAD1,
            Ipv6Option::PadN(_) => PADN,
            Ipv6Option::RouterAlert(_) => ROUTER_ALERT,
            Ipv6Option::Unknown { kind, .. } => *kind,
        }
    }

    /// Bytes the option takes on the wire.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Ipv6Option::Pad1 => 1,
            Ipv6Option::PadN(n) => 2 + *n as usize,
            Ipv6Option::RouterAlert(_) => 4,
            Ipv6Option::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option into the first [`Ipv6Option::buffer_len`] bytes of `buf` (which must be
    /// that long; `Unknown` data must be at most 255 bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        match *self {
            Ipv6Option::Pad1 => buf[0] = PAD1,
            Ipv6Option::PadN(n) => {
                buf[0] = PADN;
                buf[1] = n;
                buf[2..2 + usize::from(n)].fill(0);
            }
            Ipv6Option::RouterAlert(v) => {
                buf[0] = ROUTER_ALERT;
                buf[1] = 2;
                buf[2..4].copy_from_slice(&v.to_be_bytes());
            }
            Ipv6Option::Unknown { kind, data } => {
                debug_assert!(data.len() <= 255);
                buf[0] = kind;
                buf[1] = data.len() as u8;
                buf[2..2 + data.len()].copy_from_slice(data);
            }
        }
    }
}

/// What a node must do with an option whose type it does not recognise: the two high-order
/// bits of the type (RFC 8200 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionAction {
    /// `00`: skip the option and go on.
    Skip,
    /// `01`: discard the packet.
    Discard,
    /// `10`: discard and send ICMPv6 Parameter Problem, code 2, pointing at the option type.
    DiscardAndReport,
    /// `11`: as `DiscardAndReport`, but only if the destination is not multicast.
    DiscardAndReportUnlessMulticast,
}

impl OptionAction {
    /// Decode the action bits of an option type.
    pub const fn of(kind: u8) -> OptionAction {
        match kind >> 6 {
            0 => OptionAction::Skip,
            1 => OptionAction::Discard,
            2 => OptionAction::DiscardAndReport,
            _ => OptionAction::DiscardAndReportUnlessMulticast,
        }
    }
}

/// The third-highest bit of an option type: the option data may change en route (and is then
/// treated as zeros by an Authentication Header).
pub const fn option_may_change(kind: u8) -> bool {
    kind & 0x20 != 0
}

/// Iterator over the options in the data of a Hop-by-Hop or Destination Options header (the
/// bytes after its Next Header and Hdr Ext Len fields).
///
/// Yields [`Error::Malformed`] — once, then stops — for an option whose length byte is missing
/// or whose data runs past the header, and for a Router Alert whose length is not 2.
#[derive(Debug, Clone)]
pub struct Ipv6Options<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> Ipv6Options<'a> {
    /// Iterate over `data` (the header minus its first two bytes).
    pub const fn new(data: &'a [u8]) -> Ipv6Options<'a> {
        Ipv6Options {
            data,
            failed: false,
        }
    }
}

impl<'a> Iterator for Ipv6Options<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (&kind, rest) = self.data.split_first()?;
        if kind == PAD1 {
            self.data = rest;
            return Some(Ok(Ipv6Option::Pad1));
        }
        let Some((&len, rest)) = rest.split_first() else {
            self.failed = true;
            return Some(Err(Error::Malformed));
        };
        let len = usize::from(len);
        if len > rest.len() {
            self.failed = true;
            return Some(Err(Error::Malformed));
        }
        let (value, rest) = rest.split_at(len);
        self.data = rest;
        Some(Ok(match kind {
            PADN => Ipv6Option::PadN(len as u8),
            ROUTER_ALERT if len == 2 => {
                Ipv6Option::RouterAlert(u16::from_be_bytes([value[0], value[1]]))
            }
            ROUTER_ALERT => {
                self.failed = true;
                return Some(Err(Error::Malformed));
            }
            _ => Ipv6Option::Unknown { kind, data: value },
        }))
    }
}

/// The Router Alert value among the options in `data` (a Hop-by-Hop header minus its first two
/// bytes), or `None` if there is none. The first malformed option is an error.
pub fn router_alert(data: &[u8]) -> Result<Option<u16>> {
    for opt in Ipv6Options::new(data) {
        if let Ipv6Option::RouterAlert(v) = opt? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options of the captured MLD report's Hop-by-Hop header (see `ipv6::tests::MLD_REPORT`):
    /// Router Alert 0, then PadN with no data.
    const MLD_HBH_OPTS: [u8; 6] = [0x05, 0x02, 0x00, 0x00, 0x01, 0x00];

    #[test]
    fn parse_golden() {
        let v: std::vec::Vec<_> = Ipv6Options::new(&MLD_HBH_OPTS).collect();
        assert_eq!(v, [Ok(Ipv6Option::RouterAlert(0)), Ok(Ipv6Option::PadN(0))]);
        assert_eq!(router_alert(&MLD_HBH_OPTS), Ok(Some(0)));
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0xffu8; 6];
        Ipv6Option::RouterAlert(0).emit(&mut buf[..4]);
        Ipv6Option::PadN(0).emit(&mut buf[4..]);
        assert_eq!(buf, MLD_HBH_OPTS);
    }

    #[test]
    fn pad1_unknown_and_round_trip() {
        let data = [
            0x00, 0x00, 0xc2, 0x04, 0x00, 0x01, 0x00, 0x00, 0x01, 0x01, 0x00,
        ];
        let v: std::vec::Vec<_> = Ipv6Options::new(&data).map(Result::unwrap).collect();
        assert_eq!(v.len(), 4);
        assert_eq!(v[0], Ipv6Option::Pad1);
        assert_eq!(
            v[2],
            Ipv6Option::Unknown {
                kind: 0xc2,
                data: &[0, 1, 0, 0]
            }
        );
        assert_eq!(v[3], Ipv6Option::PadN(1));
        let mut out = [0u8; 11];
        let mut at = 0;
        for o in &v {
            o.emit(&mut out[at..at + o.buffer_len()]);
            at += o.buffer_len();
        }
        assert_eq!(out, data);
        assert_eq!(router_alert(&data), Ok(None));
    }

    #[test]
    fn malformed() {
        // Length byte missing.
        let mut it = Ipv6Options::new(&[0x00, 0x05]);
        assert_eq!(it.next(), Some(Ok(Ipv6Option::Pad1)));
        assert_eq!(it.next(), Some(Err(Error::Malformed)));
        assert_eq!(it.next(), None, "stops after an error");
        // Data runs past the header.
        assert_eq!(
            Ipv6Options::new(&[0x01, 0x05, 0, 0]).next(),
            Some(Err(Error::Malformed))
        );
        // Router Alert of the wrong length.
        assert_eq!(router_alert(&[0x05, 0x03, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(router_alert(&[0x05, 0x02, 0]), Err(Error::Malformed));
    }

    #[test]
    fn actions() {
        assert_eq!(OptionAction::of(0x05), OptionAction::Skip);
        assert_eq!(OptionAction::of(0x4f), OptionAction::Discard);
        assert_eq!(OptionAction::of(0x80), OptionAction::DiscardAndReport);
        assert_eq!(
            OptionAction::of(0xc2),
            OptionAction::DiscardAndReportUnlessMulticast
        );
        assert!(option_may_change(0x3e) && !option_may_change(0x05));
    }

    /// Any byte string: the iterator ends, yields at most one error and never more items than
    /// bytes.
    #[test]
    fn terminates() {
        use proptest::prelude::*;
        proptest!(|(data in proptest::collection::vec(any::<u8>(), 0..64))| {
            let mut n = 0;
            let mut errs = 0;
            for o in Ipv6Options::new(&data) {
                n += 1;
                if o.is_err() { errs += 1; }
            }
            prop_assert!(n <= data.len() && errs <= 1);
        });
    }
}
