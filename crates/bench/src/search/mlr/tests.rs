//! MLRsearch against simulated DUTs with known answers.

use std::time::Duration;

use super::*;
use crate::search::rfc2544;
use crate::sim::{Noisy, NonMonotonic, SimDut};

const C: f64 = 1_000_000.0;
const W: f64 = 0.005;
/// The goal width with the controller's floating-point slack.
const WS: f64 = W * (1.0 + 1e-9);

fn within(x: f64, lo: f64, hi: f64) -> bool {
    x >= lo && x <= hi
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

#[test]
fn ideal_dut_ndr_pdr_and_conditional_throughput() {
    let mut dut = SimDut::ideal(C);
    let r = search(&mut dut, &MlrSettings::ndr_pdr(1000.0, 2.0 * C)).unwrap();
    assert_eq!(r.stop, MlrStop::Done);
    let ndr = r.goal("NDR").unwrap();
    assert!(ndr.is_regular(), "{ndr:?}");
    let (lo, hi) = (ndr.lower_bound.unwrap(), ndr.upper_bound.unwrap());
    assert!(lo <= C && hi > C && (hi - lo) / hi <= WS, "NDR {lo}..{hi}");
    // Zero loss at the lower bound: conditional throughput is the load itself.
    assert_eq!(ndr.conditional_throughput, Some(lo));
    assert!(ndr.inverted_lower_bounds.is_empty());

    // PDR: loss (L − C) / L ≤ 0.5 % ⇔ L ≤ C / 0.995.
    let pdr_true = C / (1.0 - 0.005);
    let pdr = r.goal("PDR").unwrap();
    assert!(pdr.is_regular(), "{pdr:?}");
    let (lo, hi) = (pdr.lower_bound.unwrap(), pdr.upper_bound.unwrap());
    assert!(
        lo <= pdr_true && hi > pdr_true && (hi - lo) / hi <= WS,
        "PDR {lo}..{hi}"
    );
    // RFC 9971's hard-limit example: the PDR load exceeds capacity, the conditional
    // throughput (what was forwarded) does not.
    let ct = pdr.conditional_throughput.unwrap();
    assert!(
        (C * (1.0 - W)..=C).contains(&ct),
        "PDR conditional throughput {ct}"
    );
    assert_eq!(r.trials.len(), dut.trials);
}

#[test]
fn seeded_from_the_forwarding_rate_at_max_load() {
    let mut dut = SimDut::ideal(C);
    let r = search(&mut dut, &MlrSettings::ndr_pdr(1000.0, 3.0 * C)).unwrap();
    // First trial at max load (1 s, the first phase's duration); it forwards C, so the next
    // trial is at C.
    assert_eq!(r.trials[0].offered_load, 3.0 * C);
    assert_eq!(r.trials[0].duration, Duration::from_secs(1));
    assert!(
        close(r.trials[1].offered_load, C),
        "{}",
        r.trials[1].offered_load
    );
}

#[test]
fn phases_use_short_trials_first_and_full_length_at_the_end() {
    let mut dut = SimDut::ideal(C);
    let r = search(&mut dut, &MlrSettings::ndr_pdr(1000.0, 2.0 * C)).unwrap();
    let secs: Vec<f64> = r.trials.iter().map(|t| t.duration.as_secs_f64()).collect();
    assert_eq!(secs[0], 1.0);
    let first_full = secs.iter().position(|&s| s == 5.0).unwrap();
    assert!(secs[..first_full].iter().all(|&s| s < 5.0), "{secs:?}");
    assert!(
        secs[..first_full].iter().any(|&s| s > 1.0 && s < 5.0),
        "a middle phase: {secs:?}"
    );
    // The NDR lower bound holds at least half the 20 s duration sum in 5 s zero-loss trials.
    let ndr = r.goal("NDR").unwrap().lower_bound.unwrap();
    let full_ok: f64 = r
        .trials
        .iter()
        .filter(|t| {
            t.offered_load == ndr && t.duration == Duration::from_secs(5) && t.is_lossless()
        })
        .map(|t| t.duration.as_secs_f64())
        .sum();
    assert!(full_ok >= 10.0, "{full_ok}");
    // Both goals together cost far less traffic time than two RFC 2544 searches of 60 s trials.
    let rfc = rfc2544::search(
        &mut SimDut::ideal(C),
        &rfc2544::Rfc2544Settings::new(1000.0, 2.0 * C),
    )
    .unwrap();
    assert!(
        r.traffic_time() < rfc.traffic_time(),
        "{:?} vs {:?}",
        r.traffic_time(),
        rfc.traffic_time()
    );
}

#[test]
fn noisy_dut_tolerates_spikes_rfc2544_does_not() {
    // Capacity jitters by 0.05 %, and one trial in ten loses 1 % of its frames at any load.
    let noisy = |seed| SimDut::new(Noisy::new(C, 0.0005, 0.1, 0.01, seed));
    let tol = W + 4.0 * 0.0005;
    let mut rfc_worst = f64::MAX;
    for seed in 0..8 {
        let r = search(&mut noisy(seed), &MlrSettings::ndr_pdr(1000.0, 2.0 * C)).unwrap();
        assert_eq!(r.stop, MlrStop::Done);
        let ndr = r.goal("NDR").unwrap().lower_bound.unwrap();
        assert!(
            within(ndr, C * (1.0 - tol), C * (1.0 + tol)),
            "seed {seed}: NDR {ndr}"
        );
        let rs = rfc2544::Rfc2544Settings {
            trial_duration: Duration::from_secs(5),
            ..rfc2544::Rfc2544Settings::new(1000.0, 2.0 * C)
        };
        let t = rfc2544::search(&mut noisy(seed), &rs)
            .unwrap()
            .throughput
            .unwrap_or(0.0);
        rfc_worst = rfc_worst.min(t);
    }
    // Zero tolerance: a spike during a trial below capacity drags RFC 2544's answer down.
    assert!(rfc_worst < 0.9 * C, "RFC 2544 worst {rfc_worst}");
}

#[test]
fn non_monotonic_window_never_probed_gives_capacity() {
    // Lossy window [0.6 C, 0.8 C], ideal above capacity: the forwarding rate at max load seeds
    // the search at C, and no trial ever lands in the window.
    let mut dut = SimDut::new(NonMonotonic {
        capacity: C,
        window_start: 0.6 * C,
        window_end: 0.8 * C,
        window_loss: 0.05,
        overload_carried: 1.0,
    });
    let r = search(&mut dut, &MlrSettings::ndr_pdr(1000.0, 2.0 * C)).unwrap();
    let ndr = r.goal("NDR").unwrap();
    let lo = ndr.lower_bound.unwrap();
    assert!(within(lo, C * (1.0 - W), C), "{lo}");
    assert!(r.trials.iter().all(|t| t.offered_load > 0.8 * C));
}

#[test]
fn non_monotonic_window_probed_gives_its_start_and_reports_the_inversion() {
    // Xen-like: a window [0.7 C, 0.9 C] losing 0.2 % (lossy for NDR, fine for PDR), and a
    // collapse above capacity (carries 0.3 C when overloaded), so the forwarding rate at max
    // load seeds the search far below the window.
    let mut dut = SimDut::new(NonMonotonic {
        capacity: C,
        window_start: 0.7 * C,
        window_end: 0.9 * C,
        window_loss: 0.002,
        overload_carried: 0.3,
    });
    let r = search(&mut dut, &MlrSettings::ndr_pdr(1000.0, 2.0 * C)).unwrap();
    assert_eq!(r.stop, MlrStop::Done);
    assert!(
        close(r.trials[1].offered_load, 0.3 * C),
        "{}",
        r.trials[1].offered_load
    );
    // NDR: the smallest upper bound lies in the window; the answer is the window's start.
    let ndr = r.goal("NDR").unwrap();
    assert!(ndr.is_regular(), "{ndr:?}");
    let (lo, hi) = (ndr.lower_bound.unwrap(), ndr.upper_bound.unwrap());
    assert!(
        lo < 0.7 * C && (0.7 * C..=0.9 * C).contains(&hi) && (hi - lo) / hi <= WS,
        "{lo}..{hi}"
    );
    // PDR's search went through the window to the capacity: its trials between the window
    // and C are zero-loss, i.e. NDR lower bounds above NDR's upper bound — reported.
    let pdr = r.goal("PDR").unwrap();
    let pdr_lo = pdr.lower_bound.unwrap();
    assert!(within(pdr_lo, C * (1.0 - W), C), "PDR {pdr_lo}");
    assert!(!ndr.inverted_lower_bounds.is_empty());
    assert!(
        ndr.inverted_lower_bounds
            .iter()
            .all(|&x| x > 0.9 * C && x <= C),
        "{:?}",
        ndr.inverted_lower_bounds
    );
    assert!(pdr.inverted_lower_bounds.is_empty());
}

#[test]
fn max_load_lower_bound_is_irregular() {
    let mut dut = SimDut::ideal(C);
    let r = search(&mut dut, &MlrSettings::ndr_pdr(1000.0, 0.5 * C)).unwrap();
    assert_eq!(r.stop, MlrStop::Done);
    for g in &r.goals {
        assert_eq!(g.irregular, Some(Irregular::MaxLoadIsLowerBound), "{g:?}");
        assert_eq!(g.lower_bound, Some(0.5 * C));
        assert_eq!(g.upper_bound, None);
        assert_eq!(g.conditional_throughput, Some(0.5 * C));
    }
    // Only max load is ever measured: 4 × 5 s would do, the phases add a 1 s and a 4.47 s.
    assert!(r.trials.iter().all(|t| t.offered_load == 0.5 * C));
}

#[test]
fn min_load_upper_bound_is_irregular() {
    let mut dut = SimDut::ideal(C);
    let r = search(&mut dut, &MlrSettings::ndr_pdr(2.0 * C, 4.0 * C)).unwrap();
    let ndr = r.goal("NDR").unwrap();
    assert_eq!(ndr.irregular, Some(Irregular::MinLoadIsUpperBound));
    assert_eq!(ndr.upper_bound, Some(2.0 * C));
    assert_eq!(ndr.lower_bound, None);
    assert_eq!(ndr.conditional_throughput, None);
}

#[test]
fn limits_give_incomplete_results() {
    let s = MlrSettings {
        max_trials: 5,
        ..MlrSettings::ndr_pdr(1000.0, 2.0 * C)
    };
    let r = search(&mut SimDut::ideal(C), &s).unwrap();
    assert_eq!(r.stop, MlrStop::TrialLimit);
    assert_eq!(r.trials.len(), 5);
    assert!(
        r.goals
            .iter()
            .all(|g| g.irregular == Some(Irregular::Incomplete))
    );
    let s = MlrSettings {
        max_traffic_time: Some(Duration::from_secs(10)),
        ..MlrSettings::ndr_pdr(1000.0, 2.0 * C)
    };
    let r = search(&mut SimDut::ideal(C), &s).unwrap();
    assert_eq!(r.stop, MlrStop::TrafficTimeLimit);
    // The limit is checked before each trial: the last one may overshoot by one trial.
    assert!(
        r.traffic_time() >= Duration::from_secs(10) && r.traffic_time() < Duration::from_secs(15)
    );
}

#[test]
fn one_goal_with_equal_durations() {
    // RFC 9971's recommendation for explainability: all trials one length.
    let g = SearchGoal {
        initial_trial_duration: Duration::from_secs(2),
        final_trial_duration: Duration::from_secs(2),
        duration_sum: Duration::from_secs(2),
        preceding_targets: 0,
        ..SearchGoal::ndr()
    };
    let s = MlrSettings {
        goals: vec![g],
        ..MlrSettings::ndr_pdr(1000.0, 2.0 * C)
    };
    let r = search(&mut SimDut::ideal(C), &s).unwrap();
    assert!(
        r.trials
            .iter()
            .all(|t| t.duration == Duration::from_secs(2))
    );
    let lo = r.goals[0].lower_bound.unwrap();
    assert!(within(lo, C * (1.0 - W), C));
}

#[test]
fn bad_settings_are_rejected_before_any_trial() {
    let mut dut = SimDut::ideal(C);
    let s = MlrSettings {
        goals: vec![],
        ..MlrSettings::ndr_pdr(1.0, 2.0)
    };
    assert!(
        search(&mut dut, &s)
            .unwrap_err()
            .to_string()
            .contains("`goals`")
    );
    let s = MlrSettings {
        goals: vec![SearchGoal {
            exceed_ratio: 1.0,
            ..SearchGoal::pdr()
        }],
        ..MlrSettings::ndr_pdr(1.0, 2.0)
    };
    let e = search(&mut dut, &s).unwrap_err().to_string();
    assert!(
        e.contains("\"PDR\"") && e.contains("`exceed_ratio` = 1"),
        "{e}"
    );
    let e = search(&mut dut, &MlrSettings::ndr_pdr(-1.0, 2.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`min_load` = -1"), "{e}");
    assert_eq!(dut.trials, 0);
}

#[test]
fn result_round_trips_through_json() {
    let r = search(
        &mut SimDut::ideal(C),
        &MlrSettings::ndr_pdr(1000.0, 2.0 * C),
    )
    .unwrap();
    let j = serde_json::to_string(&r).unwrap();
    let back: MlrResult = serde_json::from_str(&j).unwrap();
    assert_eq!(back, r);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["settings"]["goals"][0]["final_trial_duration_s"], 5.0);
    assert_eq!(v["stop"], "done");
}
