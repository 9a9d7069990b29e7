//! The wheel: the order in which the generator program sends the streams, so that each
//! stream gets its weight's share of the aggregate rate from one pacer and one run.
//!
//! Why a wheel and not a pacer (and a `BPF_PROG_RUN`) per stream: one run per stream per
//! burst would multiply the system calls by the number of streams — with 64 VRs at 1 Mpps
//! and 20 µs bursts, 3.2 M calls/s, far more than a CPU makes. Instead user space paces
//! the *aggregate* and the program takes the next stream from a fixed sequence of slots,
//! each holding a stream index; a stream with weight `w` of total `W` holds `w/W` of the
//! slots, spread evenly (smooth weighted round robin, as nginx balances upstreams), so any
//! window of frames carries each stream close to its share, and a whole turn exactly.
//!
//! Weights are rounded to the wheel's slots: [`wheel`] uses the smallest length ≤
//! [`MAX_SLOTS`] at which every weight is represented within 0.1 % of its share (integer
//! weights with a sum ≤ [`MAX_SLOTS`] are exact), else [`MAX_SLOTS`] slots with largest-
//! remainder rounding. Every stream with a positive weight gets at least one slot. What each
//! stream was actually sent is counted by the program, so a report never relies on the
//! rounding.

/// Most slots in a wheel (the program's map size).
pub(crate) const MAX_SLOTS: u32 = 4096;

/// The slot counts per stream for a wheel of `len` slots (largest remainder; at least one
/// slot for every positive weight).
fn counts(weights: &[f64], len: u32) -> Vec<u32> {
    let total: f64 = weights.iter().sum();
    let ideal: Vec<f64> = weights.iter().map(|w| w / total * f64::from(len)).collect();
    let mut c: Vec<u32> = ideal
        .iter()
        .zip(weights)
        .map(|(x, w)| {
            if *w > 0.0 {
                (x.floor() as u32).max(1)
            } else {
                0
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = ideal[a] - ideal[a].floor();
        let rb = ideal[b] - ideal[b].floor();
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let mut sum: u32 = c.iter().sum();
    for &i in order.iter().cycle().take(weights.len() * 2) {
        if sum >= len {
            break;
        }
        if weights[i] > 0.0 {
            c[i] += 1;
            sum += 1;
        }
    }
    c
}

/// Whether slot counts `c` give every stream its share within 0.1 % (relative).
fn close_enough(weights: &[f64], c: &[u32]) -> bool {
    let total: f64 = weights.iter().sum();
    let n: u32 = c.iter().sum();
    weights.iter().zip(c).all(|(w, &k)| {
        let want = w / total;
        let got = f64::from(k) / f64::from(n);
        want == 0.0 && k == 0 || (got - want).abs() <= 1e-3 * want
    })
}

/// The wheel for `weights` (one per stream, positive and finite; checked by the caller):
/// stream indexes, each stream's slots spread evenly.
pub(crate) fn wheel(weights: &[f64]) -> Vec<u32> {
    assert!(!weights.is_empty() && weights.len() <= MAX_SLOTS as usize);
    let n = weights.len() as u32;
    let len = (n..=MAX_SLOTS)
        .find(|&len| close_enough(weights, &counts(weights, len)))
        .unwrap_or(MAX_SLOTS);
    let c = counts(weights, len);
    // Smooth weighted round robin over the slot counts: each step every stream earns its
    // count, the richest is picked and pays the total.
    let total: i64 = c.iter().map(|&k| i64::from(k)).sum();
    let mut current = vec![0i64; c.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (cur, &k) in current.iter_mut().zip(&c) {
            *cur += i64::from(k);
        }
        let (best, _) = current
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .expect("at least one stream");
        current[best] -= total;
        out.push(best as u32);
    }
    out
}

/// The wheel with a size class per slot: `(stream, class)`, each stream's occurrences
/// cycling through `pattern`. The stream wheel is repeated until every stream's count of
/// slots is a multiple of the pattern (so a turn carries each stream's exact size mix),
/// as far as [`MAX_SLOTS`] allows.
pub(crate) fn sized_wheel(weights: &[f64], pattern: &[u8]) -> Vec<(u32, u8)> {
    let base = wheel(weights);
    let p = pattern.len().max(1);
    let turns = if base.len() * p <= MAX_SLOTS as usize {
        p
    } else {
        1
    };
    let mut seen = vec![0usize; weights.len()];
    let mut out = Vec::with_capacity(base.len() * turns);
    for _ in 0..turns {
        for &s in &base {
            let k = &mut seen[s as usize];
            out.push((s, pattern[*k % p]));
            *k += 1;
        }
    }
    out
}

/// Check per-stream weights: as many as streams, each positive and finite.
pub(crate) fn check_weights(weights: &[f64], streams: usize) -> Result<(), String> {
    if weights.len() != streams {
        return Err(format!(
            "{} weights for {streams} streams (one per VR)",
            weights.len()
        ));
    }
    if let Some((i, w)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !(w.is_finite() && **w > 0.0))
    {
        return Err(format!(
            "weight {w} of stream {i}: weights must be positive"
        ));
    }
    if streams > MAX_SLOTS as usize {
        return Err(format!("{streams} streams: at most {MAX_SLOTS}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(w: &[u32], n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for &s in w {
            c[s as usize] += 1;
        }
        c
    }

    #[test]
    fn equal_weights_rotate_one_by_one() {
        let _alone = crate::cores_alone();
        assert_eq!(wheel(&[1.0, 1.0, 1.0]), [0, 1, 2]);
        assert_eq!(wheel(&[5.0]), [0]);
    }

    #[test]
    fn integer_weights_are_exact_and_spread() {
        let _alone = crate::cores_alone();
        let w = wheel(&[3.0, 1.0]);
        assert_eq!(w, [0, 0, 1, 0]);
        assert_eq!(shares(&w, 2), [3, 1]);
        // Never two of the light stream in a row; the heavy one at most 2 in a row.
        let w = wheel(&[99.0, 1.0]);
        assert_eq!(shares(&w, 2), [99, 1]);
        let w = wheel(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(shares(&w, 4), [1, 2, 3, 4]);
    }

    #[test]
    fn fractional_weights_within_a_tenth_of_a_percent() {
        let _alone = crate::cores_alone();
        let weights = [0.01, 1.0, 1.0, 1.0];
        let w = wheel(&weights);
        let c = shares(&w, 4);
        assert!(c[0] >= 1);
        let total: f64 = weights.iter().sum();
        for (i, &k) in c.iter().enumerate() {
            let got = k as f64 / w.len() as f64;
            let want = weights[i] / total;
            assert!(
                (got - want).abs() <= 1e-3 * want,
                "stream {i}: {got} vs {want}"
            );
        }
        assert!(check_weights(&[1.0, 0.0], 2).is_err());
        // With IMIX's 12-frame pattern, a turn carries each stream's exact mix.
        let w = sized_wheel(&[1.0, 2.0], &[0, 1, 0, 0, 1, 0, 2, 0, 1, 0, 0, 1]);
        assert_eq!(w.len(), 36);
        for s in 0..2u32 {
            let classes: Vec<u8> = w.iter().filter(|x| x.0 == s).map(|x| x.1).collect();
            let count = |c| classes.iter().filter(|&&x| x == c).count();
            let k = classes.len() / 12;
            assert_eq!(
                (count(0), count(1), count(2)),
                (7 * k, 4 * k, k),
                "stream {s}"
            );
        }
        assert_eq!(sized_wheel(&[1.0, 1.0], &[0]), [(0, 0), (1, 0)]);
        assert!(check_weights(&[1.0], 2).is_err());
    }
}
