//! One network namespace, deleted on drop, and the commands that populate it.
//!
//! Names are unique per process and call (`<prefix>-<pid>-<n>`), so parallel tests and
//! concurrent labs never collide; deleting the namespace on drop takes its interfaces (and
//! the peer end of every veth pair in it) with it, so nothing is left behind even when the
//! owner panics. Threads enter a namespace with `setns(2)`, which affects only the calling
//! thread: [`Netns::run`] does it on a scoped thread, so the caller's own namespace never
//! changes, and a socket opened there stays bound to the namespace wherever it is used.
//!
//! Labs make hundreds of namespaces, so the frequent operations start no process per item:
//! [`Netns::ip_batch`] sends many `ip` commands through one `ip -batch`, [`Netns::sysctls`]
//! writes `/proc/sys` from a thread inside the namespace, and deletion (drop,
//! [`Netns::delete`]) finds the processes inside through `/proc/*/ns/net`, kills them and
//! unmounts the name itself, as `ip netns pids` + `ip netns del` would. Creation still uses
//! `ip netns add`, whose mount-propagation set-up of `/run/netns` is not worth copying, and
//! brings `lo` up with an ioctl.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
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
    /// Writing a sysctl failed.
    #[error("sysctl {key}={value} in namespace {name}: {source}")]
    Sysctl {
        /// The namespace.
        name: String,
        /// The key as given (`net.ipv4.ip_forward`).
        key: String,
        /// The value.
        value: String,
        /// Why.
        source: std::io::Error,
    },
    /// Deleting the namespace failed.
    #[error("cannot delete namespace {name}: {source}")]
    Delete {
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
        ns.run(loopback_up)?.map_err(|source| NetnsError::Enter {
            name: format!("{name} (setting lo up)"),
            source,
        })?;
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

    /// Whether this handle deletes the namespace when it drops (`true` unless kept).
    pub fn set_keep(&mut self, keep: bool) {
        self.keep = keep;
    }

    /// Delete the namespace now (after killing what runs inside), reporting failure.
    pub fn delete(mut self) -> Result<(), NetnsError> {
        self.keep = true;
        delete_named(&self.name)
    }

    /// Whether a namespace of this name exists (`/run/netns/NAME`).
    pub fn exists(name: &str) -> bool {
        PathBuf::from("/run/netns").join(name).exists()
    }

    /// The names of all named namespaces (`ip netns list`), sorted.
    pub fn list() -> Result<Vec<String>, NetnsError> {
        let mut names = Vec::new();
        match std::fs::read_dir("/run/netns") {
            Ok(dir) => {
                for e in dir.flatten() {
                    if let Some(n) = e.file_name().to_str() {
                        names.push(n.to_string());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(NetnsError::Spawn {
                    cmd: "read /run/netns".into(),
                    source,
                });
            }
        }
        names.sort();
        Ok(names)
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

    /// Set a sysctl inside the namespace (`net.ipv4.ip_forward=1` style; keys may also be
    /// written with `/`, as `sysctl(8)` allows, when a part contains a dot).
    pub fn sysctl(&self, key_value: &str) -> Result<(), NetnsError> {
        self.sysctls(&[key_value])
    }

    /// Set several sysctls inside the namespace, in order, stopping at the first failure.
    ///
    /// Written straight to `/proc/sys` from a thread inside the namespace (the `net.*`
    /// tree follows the writer's namespace), so no process is started: labs set a few per
    /// namespace and build hundreds of namespaces.
    pub fn sysctls(&self, key_values: &[&str]) -> Result<(), NetnsError> {
        self.run(|| {
            for kv in key_values {
                let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
                let (key, value) = (key.trim(), value.trim());
                let rel = if key.contains('/') {
                    key.to_string()
                } else {
                    key.replace('.', "/")
                };
                std::fs::write(PathBuf::from("/proc/sys").join(rel), value).map_err(|source| {
                    NetnsError::Sysctl {
                        name: self.name.clone(),
                        key: key.to_string(),
                        value: value.to_string(),
                        source,
                    }
                })?;
            }
            Ok(())
        })?
    }

    /// Run several `ip` commands inside the namespace with one `ip -batch` process (one
    /// command per line, without the leading `ip`). Stops at the first failing line; the
    /// error names that line.
    pub fn ip_batch(&self, lines: &[String]) -> Result<(), NetnsError> {
        if lines.is_empty() {
            return Ok(());
        }
        let line = format!("ip -n {} -batch -", self.name);
        let mut child = Command::new("ip")
            .args(["-n", &self.name, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| NetnsError::Spawn {
                cmd: line.clone(),
                source,
            })?;
        let mut input = lines.join("\n");
        input.push('\n');
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // `ip` reads all of stdin unless it fails early; a broken pipe then is reported
        // through its exit status and stderr below.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let out = child
            .wait_with_output()
            .map_err(|source| NetnsError::Spawn {
                cmd: line.clone(),
                source,
            })?;
        let _ = writer.join();
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // "Command failed -:N" names the failing line (1-based).
        let failed = stderr
            .rsplit_once("Command failed -:")
            .and_then(|(_, n)| n.trim().parse::<usize>().ok())
            .and_then(|n| lines.get(n.checked_sub(1)?));
        Err(NetnsError::Failed {
            cmd: match failed {
                Some(l) => format!("ip -n {} {l}", self.name),
                None => format!("{line} <<{}>>", lines.join("; ")),
            },
            status: out.status,
            stderr,
        })
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
            let _ = delete_named(&self.name);
        }
    }
}

/// `ip link set lo up` in the calling thread's namespace, by ioctl (no process started).
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: plain socket(2); closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: ifreq is plain data; all-zero is a valid start.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, b) in req.ifr_name.iter_mut().zip(b"lo") {
        *d = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read the name and read/write the flags of `req`,
    // which lives on this stack frame; `fd` is the socket opened above.
    let rc = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &raw mut req) < 0 {
            -1
        } else {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &raw mut req)
        }
    };
    let err = std::io::Error::last_os_error();
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    if rc < 0 { Err(err) } else { Ok(()) }
}

/// Kill every process whose network namespace is `/run/netns/NAME` (never this process),
/// then unmount and remove the name — what `ip netns pids` + `kill` + `ip netns del` do,
/// without starting processes. The kernel frees the namespace, and with it its interfaces
/// and the peers of its veths, once the last process and mount are gone.
fn delete_named(name: &str) -> Result<(), NetnsError> {
    use std::os::unix::fs::MetadataExt;
    let path = PathBuf::from("/run/netns").join(name);
    let err = |source| NetnsError::Delete {
        name: name.to_string(),
        source,
    };
    let meta = std::fs::metadata(&path).map_err(err)?;
    let me = std::process::id();
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(m) = std::fs::metadata(p.path().join("ns/net")) else {
                continue;
            };
            if m.dev() == meta.dev() && m.ino() == meta.ino() {
                // SAFETY: kill(2) with a pid read from /proc; a stale pid at worst gets
                // ESRCH (pids are not reused within this loop in practice).
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "NUL in name",
        ))
    })?;
    // SAFETY: a valid NUL-terminated path; MNT_DETACH only detaches the bind mount.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        let e = std::io::Error::last_os_error();
        // EINVAL: not a mount point (half-made by someone else); still remove the name.
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(err(e));
        }
    }
    std::fs::remove_file(&path).map_err(err)
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
        "link",
        "add",
        a.1,
        "numrxqueues",
        &q,
        "numtxqueues",
        &q,
        "type",
        "veth",
        "peer",
        "name",
        b.1,
        "numrxqueues",
        &q,
        "numtxqueues",
        &q,
        "netns",
        b.0.name(),
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
    if in_ci() {
        panic!("{what}: needs root with network namespaces, and CI=true forbids skipping");
    }
    eprintln!("skipping {what}: needs root (set CI=true to make this a failure)");
    false
}

/// Whether a tool a test needs is installed (`ok`, found by the caller), as
/// [`require_root`] for root: under `CI=true` its absence is a failure (panics, saying
/// `install`); elsewhere it prints that the test is skipped and returns false.
pub fn require_tool(what: &str, ok: bool, install: &str) -> bool {
    if !ok {
        if in_ci() {
            panic!("{what} is not installed ({install}), and CI=true forbids skipping");
        }
        eprintln!("skipping: {what} is not installed ({install})");
    }
    ok
}

/// `CI=true`: tests may not skip.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
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
