//! One network namespace, deleted on drop, and the commands that populate it.
//!
//! Names are unique per process and call (`<prefix>-<pid>-<n>`), so parallel tests and
//! concurrent labs never collide; deleting the namespace on drop takes its interfaces (and
//! the peer end of every veth pair in it) with it, so nothing is left behind even when the
//! owner panics. Threads enter a namespace with `setns(2)`, which affects only the calling
//! thread: [`Netns::run`] does it on a scoped thread, so the caller's own namespace never
//! changes, and a socket opened there stays bound to the namespace wherever it is used.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// What went wrong creating or using a namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// A command could not be started.
    #[error("cannot run `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command ran and failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Entering the namespace failed.
    #[error("cannot enter namespace {name}: {source}")]
    Enter {
        /// The namespace.
        name: String,
        /// Why.
        source: std::io::Error,
    },
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A named network namespace (`/run/netns/NAME`), deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
    keep: bool,
}

impl Netns {
    /// Create a namespace named `<prefix>-<pid>-<n>` with its loopback up.
    ///
    /// Keep `prefix` short: the name is also used to derive interface names in labs.
    pub fn new(prefix: &str) -> Result<Netns, NetnsError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        Netns::create(&name)
    }

    /// Create a namespace with exactly this name (fails if it exists).
    pub fn create(name: &str) -> Result<Netns, NetnsError> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
            keep: false,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Adopt an existing namespace (it is deleted on drop unless [`Netns::keep`] is called).
    pub fn adopt(name: &str) -> Netns {
        Netns {
            name: name.to_string(),
            keep: false,
        }
    }

    /// Leave the namespace in place when this handle drops (for `lab up`).
    pub fn keep(mut self) -> String {
        self.keep = true;
        std::mem::take(&mut self.name)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace's file, as `setns(2)` and `ip netns exec` use it.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Run `ip ARGS` inside the namespace; error if it fails.
    pub fn ip(&self, args: &[&str]) -> Result<Output, NetnsError> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Run a program inside the namespace (`ip netns exec`); error if it exits non-zero.
    pub fn exec(&self, argv: &[&str]) -> Result<Output, NetnsError> {
        let mut cmd = self.command(argv);
        run(&mut cmd, &argv.join(" "))
    }

    /// A [`Command`] that runs `argv` inside the namespace, for callers that want to spawn
    /// it in the background or look at a failing status themselves.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(argv);
        cmd
    }

    /// Set a sysctl inside the namespace (`net.ipv4.ip_forward=1` style).
    pub fn sysctl(&self, key_value: &str) -> Result<(), NetnsError> {
        self.exec(&["sysctl", "-q", "-w", key_value]).map(drop)
    }

    /// Run `f` on a thread that has entered the namespace, and return what it returns.
    /// Sockets `f` opens belong to the namespace and can be used from any thread afterwards.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
        let file = File::open(self.path()).map_err(|source| NetnsError::Enter {
            name: self.name.clone(),
            source,
        })?;
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a valid namespace fd changes only this thread's network
                // namespace; the thread ends when the scope does.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                if rc != 0 {
                    return Err(NetnsError::Enter {
                        name: self.name.clone(),
                        source: std::io::Error::last_os_error(),
                    });
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }

    /// Move the calling thread into this namespace for good (for threads that will poll
    /// sockets of this namespace for their whole life, or a process that runs inside it).
    pub fn enter_current_thread(&self) -> Result<(), NetnsError> {
        let file = File::open(self.path()).map_err(|source| NetnsError::Enter {
            name: self.name.clone(),
            source,
        })?;
        // SAFETY: as in `run`; the caller asked for this thread to change namespace.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(NetnsError::Enter {
                name: self.name.clone(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.keep && !self.name.is_empty() {
            // Kill anything still running inside first, or the namespace would linger.
            let _ = Command::new("ip")
                .args(["netns", "pids", &self.name])
                .output()
                .map(|o| {
                    for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                        if let Ok(pid) = pid.parse::<i32>() {
                            // SAFETY: kill(2) with a pid read from the namespace; a stale
                            // pid at worst gets ESRCH.
                            unsafe { libc::kill(pid, libc::SIGKILL) };
                        }
                    }
                });
            let _ = ip(&["netns", "del", &self.name]);
        }
    }
}

/// Run `ip ARGS` in this process's namespace; error if it fails.
pub fn ip(args: &[&str]) -> Result<Output, NetnsError> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run(&mut cmd, &format!("ip {}", args.join(" ")))
}

fn run(cmd: &mut Command, line: &str) -> Result<Output, NetnsError> {
    let out = cmd.output().map_err(|source| NetnsError::Spawn {
        cmd: line.to_string(),
        source,
    })?;
    if !out.status.success() {
        return Err(NetnsError::Failed {
            cmd: line.to_string(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out)
}

/// A veth pair: end `a.1` in namespace `a.0`, end `b.1` in `b.0`, both up. `queues` > 1
/// gives multi-queue veths (one rx/tx queue pair per CPU that forwards).
pub fn veth(a: (&Netns, &str), b: (&Netns, &str), queues: u32) -> Result<(), NetnsError> {
    let q = queues.max(1).to_string();
    // Created inside `a` so no name ever appears in the caller's namespace.
    a.0.ip(&[
        "link", "add", a.1, "numrxqueues", &q, "numtxqueues", &q, "type", "veth", "peer",
        "name", b.1, "numrxqueues", &q, "numtxqueues", &q, "netns", b.0.name(),
    ])?;
    a.0.ip(&["link", "set", a.1, "up"])?;
    b.0.ip(&["link", "set", b.1, "up"])?;
    Ok(())
}

/// Whether this process may build namespaces. Under `CI=true` a missing privilege is a
/// failure (panics with `what`); elsewhere it prints why `what` is skipped and returns false.
pub fn require_root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0 && std::path::Path::new("/dev/net/tun").exists();
    if root {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what}: needs root with network namespaces, and CI=true forbids skipping");
    }
    eprintln!("skipping {what}: needs root (set CI=true to make this a failure)");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_veth_ping_and_cleanup() {
        if !require_root("netns test") {
            return;
        }
        let name;
        {
            let a = Netns::new("vlt").unwrap();
            let b = Netns::new("vlt").unwrap();
            name = a.name().to_string();
            veth((&a, "va"), (&b, "vb"), 1).unwrap();
            a.ip(&["addr", "add", "192.0.2.1/24", "dev", "va"]).unwrap();
            b.ip(&["addr", "add", "192.0.2.2/24", "dev", "vb"]).unwrap();
            a.exec(&["ping", "-c1", "-W2", "192.0.2.2"]).unwrap();
            // A thread inside `b` sees `vb`, the caller's namespace does not.
            let index = |name: &str| {
                let c = std::ffi::CString::new(name).unwrap();
                // SAFETY: a valid NUL-terminated name.
                unsafe { libc::if_nametoindex(c.as_ptr()) }
            };
            assert_ne!(b.run(|| index("vb")).unwrap(), 0);
            assert_eq!(index("vb"), 0);
        }
        assert!(!std::path::Path::new("/run/netns").join(&name).exists());
    }
}
