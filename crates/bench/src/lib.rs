//! vrbench's measurement methodology: *how* to measure virtual routers, apart from the traffic.
//!
//! This crate holds everything about a benchmark that is not sending and counting frames:
//! which loads to try and what the trials mean (RFC 2544 throughput, RFC 9971 NDR/PDR), how to
//! split load between N virtual routers and how fair the split is (Batalla's work points),
//! how to order and summarise repeated trials on a noisy host, and how to record, report and
//! compare runs. It is pure Rust: no root, no sockets, no clock in the searches — vrbench plugs
//! its generator, DUT and sink in through one trait, [`trial::Measurer`], and the tests plug in
//! the simulated DUTs of [`sim`], whose answers are known.
//!
//! | module | what |
//! |---|---|
//! | [`trial`] | [`Measurer`](trial::Measurer), [`Trial`](trial::Trial), loss ratios; the counters-after-drain contract |
//! | [`search::rfc2544`] | RFC 2544 §26.1 throughput by binary search, 60 s trials by default |
//! | [`search::mlr`] | RFC 9971 MLRsearch: NDR and PDR in one search, conditional throughput |
//! | [`fairness`] | Jain's index, work points k = 1..N with q = 0.01, J(k), per-VR rates, T^N |
//! | [`stats`] | medians and spread, interleaved trial order, per-round ratios |
//! | [`latency`] | latency percentiles from HDR histograms |
//! | [`record`] | the JSON run record, `load`/`save`, `compare(a, b)` |
//! | [`report`] | Markdown reports and SVG plots |
//! | [`progress`] | progress bar with ETA, silent off a terminal |
//! | [`sim`] | simulated DUTs (ideal, noisy, non-monotonic) |
//!
//! # Using it from the CLI
//!
//! Implement [`trial::Measurer`] for the lab (offer the load, stop, drain, then read
//! counters), then search, record, report. Here a simulated DUT stands in for the lab:
//!
//! ```
//! use std::time::Duration;
//! use vrhost_bench::{progress::*, record::*, report::{Report, plot}, search::{mlr, rfc2544}, sim::SimDut};
//!
//! let mut dut = SimDut::ideal(1_000_000.0); // vrbench: the lab's generator + DUT + sink
//! let progress = Progress::new(ProgressMode::Auto, Duration::from_secs(600));
//! let mut run = RunRecord::new(ToolInfo::new("vrbench", "0.1.0", Some("65fd6db")), Machine::detect());
//!
//! progress.set_stage("vrhost 64B RFC 2544");
//! let s = rfc2544::Rfc2544Settings { trial_duration: Duration::from_secs(5), ..rfc2544::Rfc2544Settings::new(1e4, 2e6) };
//! let r = rfc2544::search(&mut progress.wrap(&mut dut), &s)?;
//! run.measurements.push(Measurement::from_rfc2544("rfc2544/64B", "vrhost", &r));
//!
//! progress.set_stage("vrhost 64B NDR/PDR");
//! let r = mlr::search(&mut progress.wrap(&mut dut), &mlr::MlrSettings::ndr_pdr(1e4, 2e6))?;
//! run.measurements.extend(Measurement::from_mlr("mlr/64B", "vrhost", &r));
//! let ndr = r.goal("NDR").and_then(|g| g.conditional_throughput);
//!
//! let dir = std::env::temp_dir().join(format!("vrbench-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! run.save(dir.join("run.json"))?;                      // every raw trial, machine, settings
//! let svg = plot::overload_curve("64B", &[plot::Series::overload("vrhost", &r.trials)])?;
//! plot::save_svg(dir.join("overload.svg"), &svg)?;
//! let mut report = Report::from_record(&run);
//! report.image("carried vs offered", "overload.svg");
//! report.save(dir.join("report.md"))?;
//! let md = compare(&run, &RunRecord::load(dir.join("run.json"))?); // `vrbench compare A B`
//! # assert!(ndr.unwrap() > 990_000.0 && md.contains("1.000×"));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! For N virtual routers, [`fairness::sweep`] runs a search per work point (the measurer offers
//! [`fairness::WorkPoint::rates`] of each load to the VRs) and names the worst; for DUT
//! comparisons, [`stats::Interleave`] orders the trials and [`stats::Rounds`] turns them into
//! medians and per-round ratios.
#![deny(unsafe_code)]

pub mod fairness;
pub mod latency;
pub mod progress;
pub mod record;
pub mod report;
pub mod search;
mod secs;
pub mod sim;
pub mod stats;
pub mod trial;
