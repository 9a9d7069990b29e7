//! The control socket: a Unix stream socket where each connection sends one JSON request
//! line (`{"cmd":"reload"}`, `{"cmd":"routes","vr":"blue","family":4}`) and reads one JSON
//! reply line (`{"ok":true,…}` or `{"ok":false,"error":"…"}`).
//!
//! Commands: `status`; `reload`; `vrs` (list); `routes` / `neigh` / `show` with `vr` (what
//! the data plane holds and counts for that VR); `add` with `file` and `text` (a TOML snippet
//! of `[[vr]]` sections, checked like the config file); `remove` with `vr`; `netns` with `vr`
//! (its namespace's name, for `vrhost ctl exec`, which runs the command itself so that it
//! keeps the caller's terminal).
//!
//! Why this shape: scripts can speak it with `socat`, and `vrhost ctl` prints the same
//! replies as tables (or raw with `--json`).
//!
//! Threads: the daemon's control thread also runs the punt/inject loop, so it must never
//! wait on a client. Accepting, reading the request line and writing the reply happen on
//! this module's own threads (an acceptor, and one short-lived thread per connection, at
//! most [`MAX_CLIENTS`] at once); the control thread only picks parsed requests off a
//! channel ([`Server::next`]) and hands back a reply value. A client that connects and says
//! nothing, reads its reply slowly, or asks for a 100,000-route table therefore costs the
//! punt path nothing but building the reply value.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// Where the daemon listens unless told otherwise.
pub(crate) const DEFAULT_SOCKET: &str = "/run/vrhost/vrhost.sock";

/// Connections served at once; more are answered "busy" straight away.
pub(crate) const MAX_CLIENTS: usize = 16;

/// How long a client may take to send its request line.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection waits for the daemon's reply before giving up on it.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// The listening side: requests arrive parsed on a channel.
#[derive(Debug)]
pub(crate) struct Server {
    requests: Receiver<Request>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Server {
    /// Listen on `path`, replacing a stale socket file left by a crashed daemon (but not a
    /// live one: if something answers there, refuse).
    pub(crate) fn bind(path: &Path) -> anyhow::Result<Server> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                bail!(
                    "another vrhost is running with control socket {}",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing stale socket {}", path.display()))?;
        }
        let listener =
            UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        listener.set_nonblocking(true)?;
        let (tx, requests) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = std::thread::Builder::new()
            .name("vrhost-ctl".into())
            .spawn({
                let stop = stop.clone();
                move || accept_loop(&listener, &tx, &stop)
            })
            .context("starting the control socket's thread")?;
        Ok(Server {
            requests,
            stop,
            acceptor: Some(acceptor),
            path: path.to_path_buf(),
        })
    }

    /// The next waiting request, if any (never blocks). Malformed requests never get here:
    /// their connection thread answered them.
    pub(crate) fn next(&self) -> Option<Request> {
        self.requests.try_recv().ok()
    }
}

/// Accept until `stop`; each connection gets its own thread, up to [`MAX_CLIENTS`].
fn accept_loop(listener: &UnixListener, tx: &Sender<Request>, stop: &AtomicBool) {
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => {
                tracing::warn!("control socket: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        if busy.load(Ordering::Relaxed) >= MAX_CLIENTS {
            reply(
                &stream,
                &json!({"ok": false, "error": format!("busy: {MAX_CLIENTS} requests in progress, try again")}),
            );
            continue;
        }
        busy.fetch_add(1, Ordering::Relaxed);
        let (tx, busy2) = (tx.clone(), busy.clone());
        let spawned = std::thread::Builder::new()
            .name("vrhost-ctl-conn".into())
            .spawn(move || {
                serve_one(stream, &tx);
                busy2.fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = spawned {
            busy.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!("control socket: no thread for a client: {e}");
        }
    }
}

/// One connection: read its request line, pass it to the daemon, write the reply.
fn serve_one(stream: UnixStream, tx: &Sender<Request>) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let mut line = String::new();
    let parsed = match BufReader::new(&stream).read_line(&mut line) {
        Ok(_) => match serde_json::from_str::<Value>(&line) {
            Ok(v) => match v.get("cmd").and_then(Value::as_str) {
                Some(cmd) => Ok((cmd.to_string(), v.clone())),
                None => Err("request has no \"cmd\"".to_string()),
            },
            Err(e) => Err(format!("bad request: {e}")),
        },
        Err(e) => Err(format!("reading request: {e}")),
    };
    let (cmd, args) = match parsed {
        Ok(x) => x,
        Err(error) => return reply(&stream, &json!({"ok": false, "error": error})),
    };
    let (rtx, rrx) = mpsc::channel();
    if tx
        .send(Request {
            cmd,
            args,
            reply: rtx,
        })
        .is_err()
    {
        return reply(
            &stream,
            &json!({"ok": false, "error": "vrhost is stopping"}),
        );
    }
    let v = rrx.recv_timeout(REPLY_TIMEOUT).unwrap_or_else(|e| {
        json!({"ok": false, "error": match e {
            mpsc::RecvTimeoutError::Timeout => "vrhost did not answer in time",
            mpsc::RecvTimeoutError::Disconnected => "vrhost is stopping",
        }})
    });
    reply(&stream, &v);
}

/// Write one reply line (the client may have gone; that is not our problem).
fn reply(mut w: &UnixStream, v: &Value) {
    let _ = writeln!(w, "{v}");
}

/// One request from a client.
#[derive(Debug)]
pub(crate) struct Request {
    /// The command.
    pub(crate) cmd: String,
    /// The whole request (its arguments are fields beside `cmd`).
    pub(crate) args: Value,
    reply: Sender<Value>,
}

impl Request {
    /// Hand the reply to the connection's thread, which writes it.
    pub(crate) fn respond(self, reply: Value) {
        let _ = self.reply.send(reply);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Send one request (`{"cmd": …}` plus `args`' fields), return the reply; an `"ok": false`
/// reply is an error.
pub(crate) fn request(path: &Path, cmd: &str, args: Value) -> anyhow::Result<Value> {
    let mut s = UnixStream::connect(path).context("is vrhost running?")?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut req = json!({ "cmd": cmd });
    if let (Some(r), Value::Object(a)) = (req.as_object_mut(), args) {
        r.extend(a);
    }
    writeln!(s, "{req}")?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    let v: Value = serde_json::from_str(&line).context("bad reply")?;
    if v["ok"] != Value::Bool(true) {
        bail!("{}", v["error"].as_str().unwrap_or("request failed"));
    }
    Ok(v)
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Print a reply as tables, or as JSON.
pub(crate) fn print(v: &Value, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
        return Ok(());
    }
    if let Some(msg) = v.get("message").and_then(Value::as_str) {
        println!("{msg}");
    }
    match v.get("view").and_then(Value::as_str) {
        Some("vrs") => return print_vrs(v),
        Some("routes") => return print_routes(v),
        Some("neigh") => return print_neigh(v),
        Some("show") => return print_show(v),
        _ => {}
    }
    if let Some(ports) = v.get("ports").and_then(Value::as_array) {
        println!(
            "{:<8} {:<12} {:<22} {:>12} {:>12} {:>10} {:>10}",
            "PORT", "INTERFACE", "BACKEND", "RX", "TX", "TX-FULL", "RX-DROP"
        );
        for p in ports {
            println!(
                "{:<8} {:<12} {:<22} {:>12} {:>12} {:>10} {:>10}",
                p["name"].as_str().unwrap_or("?"),
                p["interface"].as_str().unwrap_or("?"),
                p["backend"].as_str().unwrap_or("?"),
                n(&p["rx_packets"]),
                n(&p["tx_packets"]),
                n(&p["tx_full"]),
                n(&p["rx_dropped"]),
            );
        }
    }
    if let Some(vrs) = v.get("vrs").and_then(Value::as_array) {
        println!();
        println!(
            "{:<16} {:>4} {:>6} {:>6} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8} {:>9}  STATE",
            "VR",
            "VIFS",
            "WEIGHT",
            "WORKER",
            "RX",
            "TX",
            "PUNTED",
            "INJECTED",
            "DROPS",
            "CYC/PKT",
            "P99-WAIT"
        );
        for r in vrs {
            let worker = match r["pinned"].as_bool() {
                Some(true) => format!("{}*", n(&r["worker"])),
                _ => n(&r["worker"]).to_string(),
            };
            println!(
                "{:<16} {:>4} {:>6} {:>6} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8.0} {:>9}  {}",
                r["name"].as_str().unwrap_or("?"),
                n(&r["vifs"]),
                n(&r["weight"]),
                worker,
                n(&r["rx_packets"]),
                n(&r["tx_packets"]),
                n(&r["punted"]),
                n(&r["injected"]),
                n(&r["drops"]),
                r["cycles_per_packet"].as_f64().unwrap_or(0.0),
                r["ingress_wait"]["p99_us"]
                    .as_f64()
                    .map_or("-".into(), |u| {
                        let mark = if over_bound(&r["ingress_wait"]) {
                            "!"
                        } else {
                            ""
                        };
                        format!("{u:.0}us{mark}")
                    }),
                r["state"].as_str().unwrap_or("?"),
            );
        }
        println!(
            "(worker* = pinned by config; P99-WAIT: 99 % of sampled packets waited at most this \
             long in the VR's ingress ring since it was made; ! = over 1 % waited at least the \
             deferral's bound, [dataplane] max_deferral_us, in the last minute or so)"
        );
    }
    if let Some(ws) = v.get("workers").and_then(Value::as_array) {
        // HELD-OFF-MS: time the host kept the worker off its core since it started (other
        // tasks on the core, hypervisor steal).
        println!();
        println!(
            "{:<8} {:>6} {:>8} {:>6} {:>9} {:>14} {:>14} {:>12}",
            "WORKER", "CORE", "IN-USE", "VRS", "RX-QUEUES", "POLLS", "IDLE-POLLS", "HELD-OFF-MS"
        );
        for w in ws {
            println!(
                "{:<8} {:>6} {:>8} {:>6} {:>9} {:>14} {:>14} {:>12}",
                n(&w["worker"]),
                n(&w["core"]),
                if w["active"].as_bool().unwrap_or(true) {
                    "yes"
                } else {
                    "no"
                },
                n(&w["vrs"]),
                n(&w["rx_queues"]),
                n(&w["polls"]),
                n(&w["idle_polls"]),
                w["held_off_ms"]
                    .as_f64()
                    .map_or("-".into(), |ms| format!("{ms:.1}")),
            );
        }
    }
    Ok(())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

fn print_vrs(v: &Value) -> anyhow::Result<()> {
    println!(
        "{:<16} {:>4} {:>9} {:>9} {:>6}  {:<24} STATE",
        "VR", "VIFS", "ROUTES4", "ROUTES6", "NEIGH", "NAMESPACE"
    );
    for r in v["vrs"].as_array().into_iter().flatten() {
        println!(
            "{:<16} {:>4} {:>9} {:>9} {:>6}  {:<24} {}",
            s(&r["name"]),
            n(&r["vifs"]),
            n(&r["routes4"]),
            n(&r["routes6"]),
            n(&r["neighbours"]),
            s(&r["netns"]),
            s(&r["state"]),
        );
    }
    Ok(())
}

fn print_routes(v: &Value) -> anyhow::Result<()> {
    println!(
        "# VR {}: {} IPv4 and {} IPv6 routes in the data plane",
        s(&v["vr"]),
        n(&v["routes4"]),
        n(&v["routes6"])
    );
    println!("{:<44} NEXT HOPS", "PREFIX");
    for r in v["routes"].as_array().into_iter().flatten() {
        let hops: Vec<&str> = r["nexthops"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        println!("{:<44} {}", s(&r["prefix"]), hops.join(", "));
    }
    let shown = v["routes"].as_array().map_or(0, Vec::len) as u64;
    let total = match v["family"].as_u64() {
        Some(4) => n(&v["routes4"]),
        Some(6) => n(&v["routes6"]),
        _ => n(&v["routes4"]) + n(&v["routes6"]),
    };
    if shown < total {
        println!("# {shown} shown (--limit N for more, --family 4|6, --json for all)");
    }
    Ok(())
}

fn print_neigh(v: &Value) -> anyhow::Result<()> {
    println!("{:<40} {:<18} VIF", "ADDRESS", "MAC");
    for r in v["neighbours"].as_array().into_iter().flatten() {
        println!(
            "{:<40} {:<18} {}",
            s(&r["address"]),
            s(&r["mac"]),
            s(&r["vif"])
        );
    }
    Ok(())
}

fn print_show(v: &Value) -> anyhow::Result<()> {
    println!("VR {}  state {}", s(&v["name"]), s(&v["state"]));
    println!(
        "  namespace {}  weight {}  punt policer {} pps burst {}",
        s(&v["netns"]),
        n(&v["weight"]),
        n(&v["punt_rate"]),
        n(&v["punt_burst"])
    );
    println!(
        "  routes {} IPv4, {} IPv6; {} neighbours",
        n(&v["routes4"]),
        n(&v["routes6"]),
        n(&v["neighbours"])
    );
    println!("  counters:");
    if let Some(c) = v["counters"].as_object() {
        for (k, x) in c {
            println!("    {k:<14} {:>14}", n(x));
        }
    }
    if let Some(d) = v["drops"].as_object().filter(|d| !d.is_empty()) {
        println!("  drops:");
        for (k, x) in d {
            println!("    {k:<24} {:>12}", n(x));
        }
    }
    let w = &v["ingress_wait"];
    if n(&w["samples"]) > 0 {
        let us = |x: &Value| x.as_f64().map_or("-".into(), |u| format!("{u:.1}"));
        println!(
            "  ingress wait (µs, {} packets sampled): mean {}  p50 {}  p99 {}  max {}",
            n(&w["samples"]),
            us(&w["mean_us"]),
            us(&w["p50_us"]),
            us(&w["p99_us"]),
            us(&w["max_us"]),
        );
        if let Some(over) = w["over_bound"].as_u64() {
            println!(
                "  {over} of them waited at least the deferral's bound ({} µs){}",
                n(&w["bound_us"]),
                if over_1_percent(w) { ": over 1 %" } else { "" }
            );
        }
        let r = &w["recent"];
        if r.is_object() {
            println!(
                "  the last {:.0} s: {} sampled, p99 {}, {} at least the bound{}",
                r["window_s"].as_f64().unwrap_or(0.0),
                n(&r["samples"]),
                us(&r["p99_us"]),
                r["over_bound"]
                    .as_u64()
                    .map_or("-".into(), |o| o.to_string()),
                if over_1_percent(r) { ": over 1 %" } else { "" }
            );
        }
    }
    println!(
        "  {:<8} {:<18} {:>5} {:<6} {:>12} {:>12}",
        "VIF", "MAC", "MTU", "PORT", "RX", "TX"
    );
    for f in v["vifs"].as_array().into_iter().flatten() {
        println!(
            "  {:<8} {:<18} {:>5} {:<6} {:>12} {:>12}",
            s(&f["name"]),
            s(&f["mac"]),
            n(&f["mtu"]),
            s(&f["port"]),
            n(&f["rx_packets"]),
            n(&f["tx_packets"]),
        );
    }
    if let Some(sy) = v["sync"].as_object() {
        println!("  netlink sync:");
        for (k, x) in sy {
            println!("    {k:<18} {x}");
        }
    }
    for p in v["problems"].as_array().into_iter().flatten() {
        println!("  problem: {}", s(p));
    }
    Ok(())
}

/// Whether more than 1 % of a VR's sampled packets surely waited at least the deferral's
/// bound (`ingress_wait` of `status` or `show`): over the last minute or so when the daemon
/// has that (`recent`), else since the VR was made.
fn over_bound(w: &Value) -> bool {
    over_1_percent(if w["recent"].is_object() {
        &w["recent"]
    } else {
        w
    })
}

/// Whether more than 1 % of the samples of one set of wait figures (`over_bound`,
/// `samples`) surely waited at least the bound.
fn over_1_percent(w: &Value) -> bool {
    w["over_bound"]
        .as_u64()
        .is_some_and(|over| over * 100 > n(&w["samples"]))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_vr_is_marked_when_over_1_percent_waited_the_bound() {
        let w = |over: Option<u64>, samples: u64| json!({"over_bound": over, "samples": samples});
        assert!(!over_bound(&w(Some(1), 100)), "1 % is not over 1 %");
        assert!(over_bound(&w(Some(2), 100)));
        assert!(!over_bound(&w(Some(0), 0)));
        assert!(!over_bound(&w(None, 100)), "deferring off: no bound");
        // The recent window decides when there is one: an old overload is not marked, a
        // recent one is.
        let mut old = w(Some(50), 1000);
        old["recent"] = w(Some(0), 200);
        assert!(!over_bound(&old));
        let mut new = w(Some(5), 1000);
        new["recent"] = w(Some(5), 200);
        assert!(over_bound(&new));
    }

    fn socket(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("vrhost-ctl-{name}-{}.sock", std::process::id()))
    }

    /// Serve requests on this thread until `f` has run for `n` of them.
    fn serve(server: &Server, n: usize, mut f: impl FnMut(Request)) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut done = 0;
        while done < n {
            assert!(Instant::now() < deadline, "no request arrived");
            match server.next() {
                Some(r) => {
                    f(r);
                    done += 1;
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    fn raw(path: &Path, line: &str) -> Value {
        let mut s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(&s).read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    }

    #[test]
    fn a_silent_client_does_not_hold_up_the_next_one() {
        let path = socket("silent");
        let server = Server::bind(&path).unwrap();
        // Connected first, never sends a line: the old single-threaded server read it for
        // two seconds before looking at anyone else.
        let mut silent = UnixStream::connect(&path).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let client = {
            let path = path.clone();
            std::thread::spawn(move || request(&path, "status", json!({"verbose": true})))
        };
        serve(&server, 1, |r| {
            assert_eq!(r.cmd, "status");
            assert_eq!(r.args["verbose"], true);
            r.respond(json!({"ok": true, "answer": 42}));
        });
        let got = client.join().unwrap().unwrap();
        assert_eq!(got["answer"], 42);
        // The silent client was served nothing yet: its connection is still waiting.
        silent.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let e = silent.read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn bad_requests_are_answered_with_what_was_wrong_and_serving_goes_on() {
        let path = socket("bad");
        let server = Server::bind(&path).unwrap();
        let v = raw(&path, "this is not json\n");
        assert_eq!(v["ok"], false);
        assert!(
            v["error"].as_str().unwrap().starts_with("bad request"),
            "{v}"
        );
        let v = raw(&path, "{\"vr\": \"blue\"}\n");
        assert_eq!(v["error"], "request has no \"cmd\"");
        // None of that reached the daemon side; a good request still does.
        assert!(server.next().is_none());
        let client = {
            let path = path.clone();
            std::thread::spawn(move || raw(&path, "{\"cmd\": \"vrs\"}\n"))
        };
        serve(&server, 1, |r| r.respond(json!({"ok": true, "vrs": []})));
        assert_eq!(client.join().unwrap()["vrs"], json!([]));
    }

    #[test]
    fn a_request_dropped_unanswered_tells_the_client() {
        let path = socket("dropped");
        let server = Server::bind(&path).unwrap();
        let client = {
            let path = path.clone();
            std::thread::spawn(move || raw(&path, "{\"cmd\": \"status\"}\n"))
        };
        serve(&server, 1, drop);
        assert_eq!(client.join().unwrap()["error"], "vrhost is stopping");
    }

    #[test]
    fn a_second_daemon_on_the_same_socket_is_refused_and_a_stale_file_replaced() {
        let path = socket("twice");
        let first = Server::bind(&path).unwrap();
        let e = Server::bind(&path).unwrap_err().to_string();
        assert!(e.contains("another vrhost is running"), "{e}");
        drop(first);
        assert!(!path.exists(), "the socket file is removed on drop");
        // A file left behind by a crash (nothing listening) is replaced.
        let stale = UnixListener::bind(&path).unwrap();
        drop(stale);
        assert!(path.exists());
        let _again = Server::bind(&path).unwrap();
    }
}
