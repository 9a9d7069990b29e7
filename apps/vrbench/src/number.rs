//! A command-line number that is a quantity: seconds, a rate, a share, a weight.
//!
//! Why a parser of our own: `f64`'s accepts `nan`, `inf` and negative values, which passed
//! the commands' own range checks (`nan <= 0.0` is false) and ended in a panic when they
//! became a `Duration`. Refused here, clap's error names the argument.

/// Parse a finite number, 0 or more.
pub(crate) fn quantity(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|e| format!("{e}"))?;
    if !v.is_finite() {
        return Err(format!("{v} is not a finite number"));
    }
    if v < 0.0 {
        return Err(format!("{v} is negative"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::quantity;

    #[test]
    fn finite_and_not_negative_only() {
        assert_eq!(quantity("0"), Ok(0.0));
        assert_eq!(quantity("2.5"), Ok(2.5));
        assert_eq!(quantity("1e-3"), Ok(0.001));
        for bad in [
            "nan", "NaN", "inf", "-inf", "infinity", "-1", "-0.5", "", "x",
        ] {
            assert!(quantity(bad).is_err(), "{bad:?} accepted");
        }
    }
}
