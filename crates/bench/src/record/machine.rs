//! The machine a run was measured on: hostname, CPU model, cores, kernel.
//!
//! Figures in docs must come "with the machine they came from" (DESIGN.md). Everything is read
//! from `/proc` with `std::fs` — no system calls of our own, no root; what cannot be read is
//! recorded as "unknown" rather than failing a run that has already measured for an hour.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Identity of the measuring host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name (`/proc/sys/kernel/hostname`).
    pub hostname: String,
    /// CPU model (`model name` in `/proc/cpuinfo`).
    pub cpu_model: String,
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`, what `uname -r` prints).
    pub kernel: String,
}

const UNKNOWN: &str = "unknown";

impl Machine {
    /// Read this host's identity from `/proc`.
    pub fn detect() -> Self {
        Self::detect_in(Path::new("/proc"))
    }

    /// Read from a `/proc`-like directory (tests use a fake one).
    pub fn detect_in(proc: &Path) -> Self {
        let read = |rel: &str| std::fs::read_to_string(proc.join(rel)).ok();
        let line = |rel: &str| {
            read(rel)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let cpuinfo = read("cpuinfo").unwrap_or_default();
        let cores = std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or_else(|_| {
                cpuinfo
                    .lines()
                    .filter(|l| l.starts_with("processor"))
                    .count()
            });
        Self {
            hostname: line("sys/kernel/hostname").unwrap_or_else(|| UNKNOWN.into()),
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| UNKNOWN.into()),
            cores,
            kernel: line("sys/kernel/osrelease").unwrap_or_else(|| UNKNOWN.into()),
        }
    }

    /// One line for report headers: `host (CPU model, 2 cores, Linux 6.1.0)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, {} cores, Linux {})",
            self.hostname, self.cpu_model, self.cores, self.kernel
        )
    }
}

/// The first `model name` (x86) or `Hardware`/`CPU part` fallback (Arm) in `/proc/cpuinfo`.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key)
                .then(|| v.trim().to_string())
                .filter(|v| !v.is_empty())
        })
    };
    field("model name")
        .or_else(|| field("Hardware"))
        .or_else(|| field("CPU part").map(|p| format!("CPU part {p}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2620 v3 @ 2.40GHz\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU E5-2620 v3 @ 2.40GHz\n";
        assert_eq!(
            cpu_model(x86).as_deref(),
            Some("Intel(R) Xeon(R) CPU E5-2620 v3 @ 2.40GHz")
        );
        assert_eq!(
            cpu_model("processor : 0\nCPU part : 0xd0c\n").as_deref(),
            Some("CPU part 0xd0c")
        );
        assert_eq!(cpu_model(""), None);
    }

    #[test]
    fn reads_a_fake_proc() {
        let dir = std::env::temp_dir().join(format!("vrhost-bench-proc-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sys/kernel")).unwrap();
        std::fs::write(dir.join("sys/kernel/hostname"), "lab1\n").unwrap();
        std::fs::write(dir.join("sys/kernel/osrelease"), "6.1.0-18-amd64\n").unwrap();
        std::fs::write(
            dir.join("cpuinfo"),
            "processor : 0\nmodel name : Test CPU\n",
        )
        .unwrap();
        let m = Machine::detect_in(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(m.hostname, "lab1");
        assert_eq!(m.kernel, "6.1.0-18-amd64");
        assert_eq!(m.cpu_model, "Test CPU");
        assert!(m.cores >= 1);
        assert_eq!(
            m.describe(),
            format!("lab1 (Test CPU, {} cores, Linux 6.1.0-18-amd64)", m.cores)
        );
        // Nothing readable: unknown, not an error.
        let m = Machine::detect_in(Path::new("/nonexistent-proc"));
        assert_eq!(
            (m.hostname.as_str(), m.kernel.as_str(), m.cpu_model.as_str()),
            ("unknown", "unknown", "unknown")
        );
    }

    #[test]
    fn detects_this_host() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.hostname.is_empty() && !m.kernel.is_empty());
    }
}
