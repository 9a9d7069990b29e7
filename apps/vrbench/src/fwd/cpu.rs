//! How much CPU *other* work took during a trial: the honesty check of a measurement on a
//! shared 2-core host.
//!
//! Why: every thread of a trial (generator, vrhost worker, NAPI threads) is an ordinary task,
//! so another engineer's build on the same cores takes a share of them and lowers whatever
//! it lands on. Interleaving and medians keep such noise from favouring one profile, but a
//! reader should see how quiet the machine was. So each trial reports "foreign" CPU: the
//! user+system time all CPUs spent (`/proc/stat`) minus this process's (with reaped
//! children), the vrhost daemon's, and the kernel threads that do the trial's packet work
//! (`napi/*`, `ksoftirqd/*`), as a percentage of the cores' capacity over the trial.
//!
//! The busy time includes the irq and softirq columns: with tick-based accounting (this
//! kernel: `CONFIG_TICK_CPU_ACCOUNTING=y`, no `CONFIG_IRQ_TIME_ACCOUNTING`) a tick that
//! lands in a softirq is charged to the interrupted task's system time *and* to the
//! softirq column, not the system column — and the generator's thread spends most of its
//! time in softirq (veth NAPI runs inline after each batch). The first version left those
//! columns out and reported 4 % "other" while a compiler held half a core. On a kernel
//! with `CONFIG_IRQ_TIME_ACCOUNTING` softirq time is charged to no task, and the trial's
//! own softirq work would show up here as "other". Ticks are 4–10 ms, so a figure below
//! ~2 % is noise.

/// Cumulative counters at one instant, in clock ticks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot {
    busy: u64,
    ours: u64,
    at: std::time::Instant,
}

fn ticks_of(stat: &str, fields: &[usize]) -> u64 {
    // Fields after the parenthesised command name (which may contain spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); field n is f[n - 3].
    fields
        .iter()
        .filter_map(|n| f.get(n - 3)?.parse::<u64>().ok())
        .sum()
}

/// utime + stime (+ cutime + cstime if `children`) of process `pid`.
fn process_ticks(pid: u32, children: bool) -> u64 {
    let fields: &[usize] = if children {
        &[14, 15, 16, 17]
    } else {
        &[14, 15]
    };
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| ticks_of(&s, fields))
        .unwrap_or(0)
}

/// (user, system) CPU seconds process `pid` has used so far.
pub(crate) fn process_seconds(pid: u32) -> (f64, f64) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    (
        ticks_of(&stat, &[14]) as f64 / hz,
        ticks_of(&stat, &[15]) as f64 / hz,
    )
}

/// Take a snapshot; `daemon` is the vrhost daemon's pid, if one runs.
pub(crate) fn snapshot(daemon: Option<u32>) -> Snapshot {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let busy = stat
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("cpu "))
        .map(|l| {
            // user nice system idle iowait irq softirq steal …: all but idle, iowait, steal.
            l.split_whitespace()
                .take(7)
                .enumerate()
                .filter(|(i, _)| !matches!(i, 3 | 4))
                .filter_map(|(_, v)| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    let mut ours =
        process_ticks(std::process::id(), true) + daemon.map_or(0, |p| process_ticks(p, false));
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) else {
                continue;
            };
            if comm.starts_with("napi/") || comm.starts_with("ksoftirqd/") {
                ours += process_ticks(pid, false);
            }
        }
    }
    Snapshot {
        busy,
        ours,
        at: std::time::Instant::now(),
    }
}

/// Foreign CPU between two snapshots, in percent of all cores' capacity.
pub(crate) fn foreign_percent(a: &Snapshot, b: &Snapshot) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get()) as f64;
    let capacity = (b.at - a.at).as_secs_f64() * hz * cores;
    let foreign = b.busy.saturating_sub(a.busy) as f64 - b.ours.saturating_sub(a.ours) as f64;
    (100.0 * foreign / capacity.max(1.0)).max(0.0)
}

/// Wait, at most `timeout`, for a second in which other work takes at most `max_percent` of
/// the host's CPU (call it between trials, while this process and its DUT are idle);
/// returns how long it waited. Gives up early if `stop` is set.
pub(crate) fn wait_quiet(
    max_percent: f64,
    timeout: std::time::Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> std::time::Duration {
    let start = std::time::Instant::now();
    loop {
        let a = snapshot(None);
        std::thread::sleep(std::time::Duration::from_secs(1));
        let busy = foreign_percent(&a, &snapshot(None));
        if busy <= max_percent
            || start.elapsed() >= timeout
            || stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            return start.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_past_the_command_name() {
        let _alone = crate::cores_alone();
        let s = "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15";
        // utime is field 14, stime 15.
        assert_eq!(ticks_of(s, &[14, 15]), 11 + 12);
        assert_eq!(ticks_of(s, &[14, 15, 16, 17]), 11 + 12 + 13 + 14);
    }
}
