//! Runs of one trial while the host disturbs them: the least disturbed counts.
//!
//! Why: a search takes any loss or shortfall as the DUT's, but on a shared host the OS or
//! the hypervisor can take the tester's or the DUT's core for tens of ms. Both DUT kinds
//! (the in-process DUT, `dut_inproc.rs`; the lab, `live/measurer.rs`) judge each attempt
//! for themselves and run it again while it is disturbed, up to a limit; this is the loop
//! they share.

/// How many runs a trial took, and which of them counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Runs {
    /// Runs made (1 to the limit).
    pub(crate) made: u32,
    /// The run whose result counted, from 1.
    pub(crate) counted: u32,
}

/// Run `attempt(n)` for n = 1, 2, … up to `max` (at least one run) until one is quiet.
/// Each run returns its result, a rank (lower is less disturbed) and whether it was quiet.
/// Returns the result of lowest rank (the first of equals), the runs made and which one
/// that was.
pub(crate) fn least_disturbed<T, R: PartialOrd, E>(
    max: u32,
    mut attempt: impl FnMut(u32) -> Result<(T, R, bool), E>,
) -> Result<(T, Runs), E> {
    let mut best: Option<(R, T, u32)> = None;
    let mut made = 0;
    for n in 1..=max.max(1) {
        made = n;
        let (t, rank, quiet) = attempt(n)?;
        if best.as_ref().is_none_or(|(b, _, _)| rank < *b) {
            best = Some((rank, t, n));
        }
        if quiet {
            break;
        }
    }
    let (_, t, counted) = best.expect("at least one run");
    Ok((t, Runs { made, counted }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scripted runs: (rank, quiet) per run, the result being the run's number; returns
    /// (the result, runs made), having checked that `counted` names the result's run.
    fn script(runs: &[(u32, bool)], max: u32) -> (u32, u32) {
        let (t, r) = least_disturbed::<_, _, ()>(max, |n| {
            let (rank, quiet) = runs[n as usize - 1];
            Ok((n, rank, quiet))
        })
        .unwrap();
        assert_eq!(r.counted, t, "{runs:?}");
        (t, r.made)
    }

    #[test]
    fn stops_at_the_first_quiet_run_and_else_keeps_the_least_disturbed() {
        assert_eq!(script(&[(0, true)], 3), (1, 1), "quiet at once: one run");
        assert_eq!(script(&[(5, false), (0, true)], 3), (2, 2));
        assert_eq!(script(&[(5, false), (2, false), (4, false)], 3), (2, 3));
        assert_eq!(
            script(&[(3, false), (3, false), (3, false)], 3),
            (1, 3),
            "first of equals"
        );
        assert_eq!(
            script(&[(5, false), (1, false)], 2),
            (2, 2),
            "no more than max"
        );
        assert_eq!(script(&[(5, false)], 0), (1, 1), "at least one run");
        let err =
            least_disturbed::<u32, u32, _>(3, |n| if n == 2 { Err(n) } else { Ok((n, 9, false)) });
        assert_eq!(err, Err(2), "a failed run ends it");
    }
}
