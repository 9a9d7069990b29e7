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
//! Why this shape: the daemon's control thread serves it between punt/inject polls without
//! a runtime or another thread; scripts can speak it with `socat`, and `vrhost ctl` prints
//! the same replies as tables (or raw with `--json`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// Where the daemon listens unless told otherwise.
pub(crate) const DEFAULT_SOCKET: &str = "/run/vrhost/vrhost.sock";

/// The listening side, non-blocking.
#[derive(Debug)]
pub(crate) struct Server {
    listener: UnixListener,
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
        Ok(Server {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// The next waiting request, if any. Malformed requests are answered here and skipped.
    pub(crate) fn next(&self) -> Option<Request> {
        loop {
            let (stream, _) = self.listener.accept().ok()?;
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut line = String::new();
            let err = match BufReader::new(&stream).read_line(&mut line) {
                Ok(_) => match serde_json::from_str::<Value>(&line) {
                    Ok(v) => match v.get("cmd").and_then(Value::as_str) {
                        Some(cmd) => {
                            return Some(Request {
                                cmd: cmd.to_string(),
                                args: v.clone(),
                                stream,
                            });
                        }
                        None => "request has no \"cmd\"".to_string(),
                    },
                    Err(e) => format!("bad request: {e}"),
                },
                Err(e) => format!("reading request: {e}"),
            };
            Request {
                cmd: String::new(),
                args: Value::Null,
                stream,
            }
            .respond(&json!({"ok": false, "error": err}));
        }
    }
}

/// One request from a client.
#[derive(Debug)]
pub(crate) struct Request {
    /// The command.
    pub(crate) cmd: String,
    /// The whole request (its arguments are fields beside `cmd`).
    pub(crate) args: Value,
    stream: UnixStream,
}

impl Request {
    /// Send the reply (the client may have gone; that is not our problem).
    pub(crate) fn respond(self, reply: &Value) {
        let mut w = &self.stream;
        let _ = writeln!(w, "{reply}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
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
            "{:<16} {:>4} {:>6} {:>6} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8}  STATE",
            "VR", "VIFS", "WEIGHT", "WORKER", "RX", "TX", "PUNTED", "INJECTED", "DROPS", "CYC/PKT"
        );
        for r in vrs {
            let worker = match r["pinned"].as_bool() {
                Some(true) => format!("{}*", n(&r["worker"])),
                _ => n(&r["worker"]).to_string(),
            };
            println!(
                "{:<16} {:>4} {:>6} {:>6} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8.0}  {}",
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
                r["state"].as_str().unwrap_or("?"),
            );
        }
        println!("(worker* = pinned by config)");
    }
    if let Some(ws) = v.get("workers").and_then(Value::as_array) {
        println!();
        println!(
            "{:<8} {:>6} {:>8} {:>6} {:>9} {:>14} {:>14}",
            "WORKER", "CORE", "IN-USE", "VRS", "RX-QUEUES", "POLLS", "IDLE-POLLS"
        );
        for w in ws {
            println!(
                "{:<8} {:>6} {:>8} {:>6} {:>9} {:>14} {:>14}",
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
