//! The measuring host as vrbench's reports name it: CPU model and cores, and the load average
//! beside the figures.
//!
//! On a shared machine a figure means little without the load it was taken under, so every
//! command prints these; they come from `vrhost_bench`'s [`Machine`] (the run record's) so
//! that all of vrbench reads `/proc` one way and says "unknown" for what it cannot read.

use serde_json::{Value, json};
use vrhost_bench::record::Machine;

/// `CPU model, N cores`.
pub(crate) fn describe() -> String {
    let m = Machine::detect();
    format!("{}, {} cores", m.cpu_model, m.cores)
}

/// [`describe`] with the 1-minute load average, read now (at the end of a run).
pub(crate) fn describe_with_load() -> String {
    let load = loadavg()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_owned();
    format!(
        "{} (1-min load average {load} at the end of the run)",
        describe()
    )
}

/// The 1-, 5- and 15-minute load averages, space-separated (empty if unreadable).
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// CPU model, cores and kernel, for a JSON record.
pub(crate) fn json() -> Value {
    let m = Machine::detect();
    json!({
        "cpu": m.cpu_model,
        "cores": m.cores,
        "kernel": m.kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_this_host_with_its_load() {
        let m = Machine::detect();
        let d = describe_with_load();
        assert!(
            d.starts_with(&format!(
                "{}, {} cores (1-min load average ",
                m.cpu_model, m.cores
            )),
            "{d}"
        );
        let load = loadavg();
        assert_eq!(load.split_whitespace().count(), 3, "{load}");
        for x in load.split_whitespace() {
            x.parse::<f64>().unwrap_or_else(|e| panic!("{x}: {e}"));
        }
        let j = json();
        assert_eq!(j["cores"], m.cores);
        assert_eq!(j["kernel"], m.kernel.as_str());
    }
}
