//! The JSON run record: everything a run measured, and everything needed to judge it later.
//!
//! A figure without its machine, versions, core assignment and raw trials cannot be checked or
//! rerun (DESIGN.md: "Figures in docs come from a command anyone can rerun, with the machine
//! they came from"). So every vrbench run writes one [`RunRecord`]: tool version and git commit,
//! machine, settings, which core ran what, the DUT profiles, and per measurement its headline
//! value, its repeats and **every raw trial**. Reports ([`crate::report`]) and comparisons
//! ([`compare`]) are rendered from records, never from memory, so a report can be regenerated
//! from a saved run.
//!
//! The format is plain serde JSON with a `schema` number; [`RunRecord::load`] refuses a schema
//! it does not know rather than misreading it. [`RunRecord::save`] writes a temporary file and
//! renames it, so an interrupted run never leaves half a JSON file behind — call it after each
//! measurement with `partial = true` and once more at the end.

mod compare;
mod machine;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use self::compare::{compare, compare_labeled};
pub use self::machine::{Machine, cpu_model};
use crate::search::mlr::MlrResult;
use crate::search::rfc2544::Rfc2544Result;
use crate::stats::Summary;
use crate::trial::Trial;

/// The record format version this crate writes and reads.
pub const SCHEMA: u32 = 1;

/// Which tool made the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Tool name, e.g. "vrbench".
    pub name: String,
    /// Tool version (the caller's `CARGO_PKG_VERSION`).
    pub version: String,
    /// Git commit of the build, when the caller knows it.
    #[serde(default)]
    pub git_commit: Option<String>,
}

impl ToolInfo {
    /// Tool `name` at `version`, built from `git_commit` if known.
    pub fn new(name: &str, version: &str, git_commit: Option<&str>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            git_commit: git_commit.map(Into::into),
        }
    }

    /// `vrbench 0.1.0 (65fd6db)`.
    pub fn describe(&self) -> String {
        match &self.git_commit {
            Some(c) => format!("{} {} ({c})", self.name, self.version),
            None => format!("{} {}", self.name, self.version),
        }
    }
}

/// Which CPU ran what: free text for people, a map for programs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreAssignment {
    /// E.g. "generator on core 1, vrhost worker and NAPI on core 0".
    pub description: String,
    /// Role → CPUs, e.g. `"generator" → [1]`, `"vrhost-worker" → [0]`.
    pub map: BTreeMap<String, Vec<usize>>,
}

/// A device under test as it was set up for the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DutProfile {
    /// Name used in measurements, e.g. "vrhost-afxdp".
    pub name: String,
    /// Kind, e.g. "vrhost", "kernel", "kernel-macvlan".
    pub kind: String,
    /// How it was set up.
    #[serde(default)]
    pub description: String,
    /// Profile parameters (VR count, queues, frame size, …).
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// One measurement of one DUT: a headline value with its repeats, raw trials and details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// What was measured, e.g. "rfc2544/64B", "ndr/64B", "workpoint/N=4/k=1". Runs are compared
    /// by (`name`, `dut`).
    pub name: String,
    /// The DUT profile's name.
    pub dut: String,
    /// Unit of `value`, e.g. "frames/s".
    pub unit: String,
    /// The headline figure (the median of `repeats` when repeated); `None` if there was no
    /// answer (e.g. loss even at the minimum load).
    pub value: Option<f64>,
    /// One value per repeat (round), in round order.
    #[serde(default)]
    pub repeats: Vec<f64>,
    /// Every raw trial behind the value.
    #[serde(default)]
    pub trials: Vec<Trial>,
    /// The full result (search settings, bounds, outcome…), as JSON.
    #[serde(default)]
    pub detail: serde_json::Value,
    /// What a reader must know (shortened trials, irregular results, loss inversion…).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Measurement {
    /// An empty measurement.
    pub fn new(name: &str, dut: &str, unit: &str) -> Self {
        Self {
            name: name.into(),
            dut: dut.into(),
            unit: unit.into(),
            value: None,
            repeats: Vec::new(),
            trials: Vec::new(),
            detail: serde_json::Value::Null,
            notes: Vec::new(),
        }
    }

    /// Set `repeats` and make `value` their median.
    pub fn with_repeats(mut self, repeats: Vec<f64>) -> Self {
        self.value = Summary::of(&repeats).ok().map(|s| s.median);
        self.repeats = repeats;
        self
    }

    /// Median and spread of the repeats, if any.
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.repeats).ok()
    }

    /// An RFC 2544 throughput (frames/s), its trials and outcome; notes shortened trials.
    pub fn from_rfc2544(name: &str, dut: &str, r: &Rfc2544Result) -> Self {
        let mut m = Self::new(name, dut, "frames/s");
        m.value = r.throughput;
        m.trials = r.trials.clone();
        m.detail = serde_json::json!({
            "search": "rfc2544",
            "outcome": r.outcome,
            "lossy": r.lossy,
            "settings": r.settings,
        });
        if r.settings.is_shortened() {
            m.notes.push(format!(
                "trials of {:?}, shorter than the 60 s RFC 2544 asks for",
                r.settings.trial_duration
            ));
        }
        m
    }

    /// One measurement per MLRsearch goal, named `{name}/{goal}` (e.g. "mlr/64B/NDR"): the
    /// conditional throughput, with the goal's bounds as detail and the search's trials.
    pub fn from_mlr(name: &str, dut: &str, r: &MlrResult) -> Vec<Self> {
        r.goals
            .iter()
            .map(|g| {
                let mut m = Self::new(&format!("{name}/{}", g.name), dut, "frames/s");
                m.value = g.conditional_throughput;
                m.trials = r.trials.clone();
                m.detail = serde_json::json!({
                    "search": "mlrsearch",
                    "goal": g,
                    "stop": r.stop,
                    "settings": r.settings,
                });
                if let Some(why) = g.irregular {
                    m.notes.push(format!("irregular result: {}", serde_json::to_string(&why).unwrap_or_default()));
                }
                if !g.inverted_lower_bounds.is_empty() {
                    m.notes.push(format!(
                        "loss inversion: {} load(s) above the upper bound met the goal (non-monotonic loss?)",
                        g.inverted_lower_bounds.len()
                    ));
                }
                m
            })
            .collect()
    }
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Format version ([`SCHEMA`]).
    pub schema: u32,
    /// The tool that made it.
    pub tool: ToolInfo,
    /// When the run started (seconds since the Unix epoch).
    pub started_unix_s: u64,
    /// Where it ran.
    pub machine: Machine,
    /// The run's settings (trial durations, frame sizes, "quick" or not…), as given.
    #[serde(default)]
    pub settings: BTreeMap<String, serde_json::Value>,
    /// Which core ran what.
    #[serde(default)]
    pub cores: CoreAssignment,
    /// The DUTs as set up.
    #[serde(default)]
    pub duts: Vec<DutProfile>,
    /// The measurements, in the order made.
    #[serde(default)]
    pub measurements: Vec<Measurement>,
    /// Run-wide notes (e.g. "quick run: 5 s trials").
    #[serde(default)]
    pub notes: Vec<String>,
    /// True while the run is in progress or when it was interrupted.
    #[serde(default)]
    pub partial: bool,
}

impl RunRecord {
    /// A new, empty record stamped now.
    pub fn new(tool: ToolInfo, machine: Machine) -> Self {
        let started_unix_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            schema: SCHEMA,
            tool,
            started_unix_s,
            machine,
            settings: BTreeMap::new(),
            cores: CoreAssignment::default(),
            duts: Vec::new(),
            measurements: Vec::new(),
            notes: Vec::new(),
            partial: false,
        }
    }

    /// The measurement `name` of DUT `dut`.
    pub fn measurement(&self, name: &str, dut: &str) -> Option<&Measurement> {
        self.measurements
            .iter()
            .find(|m| m.name == name && m.dut == dut)
    }

    /// Write the record as pretty JSON to `path`, atomically (temporary file, then rename).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), RecordError> {
        let path = path.as_ref();
        let json = serde_json::to_vec_pretty(self).map_err(|source| RecordError::Json {
            path: path.to_owned(),
            source,
        })?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, json).map_err(|source| RecordError::Io {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, path).map_err(|source| RecordError::Io {
            path: path.to_owned(),
            source,
        })
    }

    /// Read a record written by [`Self::save`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| RecordError::Io {
            path: path.to_owned(),
            source,
        })?;
        #[derive(Deserialize)]
        struct Head {
            schema: u32,
        }
        let head: Head = serde_json::from_slice(&bytes).map_err(|source| RecordError::Json {
            path: path.to_owned(),
            source,
        })?;
        if head.schema != SCHEMA {
            return Err(RecordError::Schema {
                path: path.to_owned(),
                found: head.schema,
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| RecordError::Json {
            path: path.to_owned(),
            source,
        })
    }
}

/// A record that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a run record.
    #[error("{}: not a vrbench run record: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The record has a schema this version does not read.
    #[error("{}: run record schema {found}, this vrbench reads schema {SCHEMA}", path.display())]
    Schema { path: PathBuf, found: u32 },
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::search::{mlr, rfc2544};
    use crate::sim::SimDut;

    pub(crate) fn machine() -> Machine {
        Machine {
            hostname: "lab1".into(),
            cpu_model: "Test CPU".into(),
            cores: 2,
            kernel: "6.1.0".into(),
        }
    }

    /// A record with an RFC 2544 and an MLR measurement on two simulated DUTs.
    pub(crate) fn sample(commit: &str, vrhost_capacity: f64) -> RunRecord {
        let mut r = RunRecord::new(ToolInfo::new("vrbench", "0.1.0", Some(commit)), machine());
        r.settings.insert("frame_size".into(), 64.into());
        r.settings.insert("trial_duration_s".into(), 1.0.into());
        r.cores = CoreAssignment {
            description: "generator on core 1, DUT on core 0".into(),
            map: [
                ("generator".to_string(), vec![1]),
                ("dut".to_string(), vec![0]),
            ]
            .into(),
        };
        for (dut, cap) in [("vrhost", vrhost_capacity), ("kernel", 1.0e6)] {
            r.duts.push(DutProfile {
                name: dut.into(),
                kind: dut.into(),
                description: String::new(),
                params: BTreeMap::new(),
            });
            let s = rfc2544::Rfc2544Settings {
                trial_duration: Duration::from_secs(1),
                ..rfc2544::Rfc2544Settings::new(1e3, 4e6)
            };
            let res = rfc2544::search(&mut SimDut::ideal(cap), &s).unwrap();
            r.measurements
                .push(Measurement::from_rfc2544("rfc2544/64B", dut, &res));
            let res = mlr::search(
                &mut SimDut::ideal(cap),
                &mlr::MlrSettings::ndr_pdr(1e3, 4e6),
            )
            .unwrap();
            r.measurements
                .extend(Measurement::from_mlr("mlr/64B", dut, &res));
        }
        r.measurements.push(
            Measurement::new("fwd/64B", "vrhost", "frames/s")
                .with_repeats(vec![2.0e6, 2.2e6, 1.9e6]),
        );
        r
    }

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("vrhost-bench-{}-{name}", std::process::id()))
    }

    #[test]
    fn json_round_trip_keeps_everything() {
        let r = sample("abc1234", 2.0e6);
        let path = tmp("roundtrip.json");
        r.save(&path).unwrap();
        let back = RunRecord::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, r);
        // Every raw trial survived, bit for bit.
        let m = back.measurement("rfc2544/64B", "vrhost").unwrap();
        assert!(!m.trials.is_empty());
        assert_eq!(
            m.trials,
            r.measurement("rfc2544/64B", "vrhost").unwrap().trials
        );
        assert_eq!(
            m.notes,
            ["trials of 1s, shorter than the 60 s RFC 2544 asks for"]
        );
        assert!(
            back.measurement("mlr/64B/NDR", "kernel")
                .unwrap()
                .value
                .is_some()
        );
        assert_eq!(
            back.measurement("fwd/64B", "vrhost").unwrap().value,
            Some(2.0e6)
        );
    }

    #[test]
    fn json_has_the_documented_fields() {
        let r = sample("abc1234", 2.0e6);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["tool"]["git_commit"], "abc1234");
        assert_eq!(v["machine"]["cores"], 2);
        assert_eq!(v["cores"]["map"]["generator"][0], 1);
        assert_eq!(v["measurements"][0]["trials"][0]["duration_s"], 1.0);
        assert_eq!(v["measurements"][0]["detail"]["outcome"], "converged");
    }

    #[test]
    fn load_errors_name_the_file() {
        let e = RunRecord::load("/nonexistent/run.json").unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/run.json: "), "{e}");
        let path = tmp("bad.json");
        std::fs::write(&path, "{\"schema\": 99}").unwrap();
        let e = RunRecord::load(&path).unwrap_err();
        assert!(matches!(e, RecordError::Schema { found: 99, .. }), "{e}");
        std::fs::write(&path, "not json").unwrap();
        let e = RunRecord::load(&path).unwrap_err();
        assert!(e.to_string().contains("not a vrbench run record"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
