//! The control socket: a Unix stream socket where each connection sends one JSON request
//! line (`{"cmd":"reload"}`) and reads one JSON reply line (`{"ok":true,…}` or
//! `{"ok":false,"error":"…"}`).
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
                                body: v.clone(),
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
                body: Value::Null,
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
    /// The whole request (arguments beside `cmd`).
    pub(crate) body: Value,
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

/// Send one request (`{"cmd": …, …}`), return the reply; an `"ok": false` reply is an
/// error.
pub(crate) fn request(path: &Path, req: &Value) -> anyhow::Result<Value> {
    let mut s = UnixStream::connect(path).context("is vrhost running?")?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
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
