//! Prefixes: an address and a length, validated once at the edge.
//!
//! A [`Prefix`] can only be built canonical (no host bits, length within the family's width);
//! everything past construction can rely on that. We refuse host bits rather than silently
//! masking them, as `ip route` does (`Error: Invalid prefix for given prefix length.`): a
//! mistyped route should be an error the operator sees, not a different route.

use core::cmp::Ordering;
use core::fmt;
use core::str::FromStr;

use crate::FibError;
use crate::family::{Family, Key};

/// A canonical prefix of family `F`.
pub struct Prefix<F: Family> {
    key: F::Key,
    len: u8,
}

/// An IPv4 prefix.
pub type Prefix4 = Prefix<crate::V4>;
/// An IPv6 prefix.
pub type Prefix6 = Prefix<crate::V6>;

impl<F: Family> Prefix<F> {
    /// `addr/len`, refused if `len` is too long or `addr` has host bits set.
    pub fn new(addr: F::Addr, len: u8) -> Result<Self, FibError> {
        let key = F::key(addr);
        if len > F::Key::BITS {
            return Err(FibError::LengthTooLong {
                prefix: format!("{addr}/{len}"),
                len: len.into(),
                max: F::Key::BITS,
            });
        }
        if key.has_host_bits(len) {
            return Err(FibError::HostBitsSet {
                prefix: format!("{addr}/{len}"),
                canonical: format!("{}/{len}", F::addr(key.masked(len))),
            });
        }
        Ok(Prefix { key, len })
    }

    /// `addr/len` with host bits cleared (for generators and callers that mean "the covering
    /// prefix of this address"). Panics if `len` is too long.
    pub fn new_masked(addr: F::Addr, len: u8) -> Self {
        assert!(
            len <= F::Key::BITS,
            "prefix length {len} > {}",
            F::Key::BITS
        );
        Prefix {
            key: F::key(addr).masked(len),
            len,
        }
    }

    pub(crate) fn from_key(key: F::Key, len: u8) -> Self {
        debug_assert!(len <= F::Key::BITS && !key.has_host_bits(len));
        Prefix { key, len }
    }

    /// The network address.
    pub fn addr(&self) -> F::Addr {
        F::addr(self.key)
    }

    /// The prefix length.
    #[expect(
        clippy::len_without_is_empty,
        reason = "a prefix length, not a collection size"
    )]
    pub fn len(&self) -> u8 {
        self.len
    }

    /// The default route (length 0)?
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    /// The network address as a trie key.
    pub fn key(&self) -> F::Key {
        self.key
    }

    /// Does the prefix contain `addr`?
    pub fn contains(&self, addr: F::Addr) -> bool {
        F::key(addr).masked(self.len) == self.key
    }
}

impl<F: Family> Clone for Prefix<F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F: Family> Copy for Prefix<F> {}
impl<F: Family> PartialEq for Prefix<F> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key && self.len == o.len
    }
}
impl<F: Family> Eq for Prefix<F> {}
impl<F: Family> core::hash::Hash for Prefix<F> {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.key.hash(h);
        self.len.hash(h);
    }
}
/// Ordered by address, then length: a covering prefix sorts before everything it covers, which
/// is the order the trie builder relies on.
impl<F: Family> Ord for Prefix<F> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.key, self.len).cmp(&(o.key, o.len))
    }
}
impl<F: Family> PartialOrd for Prefix<F> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl<F: Family> fmt::Display for Prefix<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", F::addr(self.key), self.len)
    }
}
impl<F: Family> fmt::Debug for Prefix<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<F: Family> FromStr for Prefix<F> {
    type Err = FibError;
    /// `ADDRESS/LENGTH`; a bare address is a host route (/32 or /128).
    fn from_str(s: &str) -> Result<Self, FibError> {
        let bad = || FibError::BadPrefixSyntax {
            text: s.to_string(),
        };
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: F::Addr = a.parse().map_err(|_| bad())?;
        let len = match l {
            None => F::Key::BITS,
            Some(l) => {
                let n: u32 = l.parse().map_err(|_| bad())?;
                if n > u32::from(F::Key::BITS) {
                    return Err(FibError::LengthTooLong {
                        prefix: s.to_string(),
                        len: n,
                        max: F::Key::BITS,
                    });
                }
                n as u8
            }
        };
        Prefix::new(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        let p: Prefix4 = "10.1.0.0/16".parse().unwrap();
        assert_eq!(p.to_string(), "10.1.0.0/16");
        assert_eq!(p.len(), 16);
        assert!(p.contains("10.1.2.3".parse().unwrap()));
        assert!(!p.contains("10.2.0.0".parse().unwrap()));
        let h: Prefix6 = "2001:db8::1".parse().unwrap();
        assert_eq!(h.len(), 128);
        let d: Prefix6 = "::/0".parse().unwrap();
        assert!(d.is_default() && d.contains("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn refuses_host_bits_and_long_lengths_naming_them() {
        let e = "10.0.0.1/8".parse::<Prefix4>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "10.0.0.1/8: host bits set (did you mean 10.0.0.0/8?)"
        );
        let e = "10.0.0.0/33".parse::<Prefix4>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "10.0.0.0/33: prefix length 33 is longer than 32"
        );
        let e = "2001:db8::/129".parse::<Prefix6>().unwrap_err();
        assert!(e.to_string().contains("129 is longer than 128"), "{e}");
        let e = "2001:db8::1/64".parse::<Prefix6>().unwrap_err();
        assert!(
            e.to_string()
                .contains("host bits set (did you mean 2001:db8::/64?)"),
            "{e}"
        );
        assert!(matches!(
            "x/8".parse::<Prefix4>(),
            Err(FibError::BadPrefixSyntax { .. })
        ));
        assert!(matches!(
            "10.0.0.0/x".parse::<Prefix4>(),
            Err(FibError::BadPrefixSyntax { .. })
        ));
        assert!(Prefix4::new("10.0.0.0".parse().unwrap(), 40).is_err());
    }

    #[test]
    fn ordering_puts_covering_first() {
        let a: Prefix4 = "10.0.0.0/8".parse().unwrap();
        let b: Prefix4 = "10.0.0.0/16".parse().unwrap();
        let c: Prefix4 = "10.1.0.0/16".parse().unwrap();
        let mut v = vec![c, b, a];
        v.sort();
        assert_eq!(v, vec![a, b, c]);
    }
}
