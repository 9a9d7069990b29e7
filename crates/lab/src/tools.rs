//! Ordinary tools run between a lab's namespaces, with deadlines: so far an iperf3 TCP
//! transfer, which the daemon's and the lab's root tests both run.
//!
//! Why here: the tests of two crates had their own copies, and only one knew that iperf3
//! 3.12 with `-J` exits 0 when it cannot connect (esnet/iperf#1405) — the other trusted the
//! exit status, and a clean-clone CI run failed on a JSON document without a result.

use std::net::IpAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::Netns;

/// What went wrong with a tool.
#[derive(Debug, Error)]
pub enum ToolError {
    /// It could not be started.
    #[error("{tool}: {source}")]
    Spawn {
        /// The program.
        tool: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// It ran past its deadline and was killed.
    #[error("{tool} did not finish within {limit:?}: {output}")]
    Timeout {
        /// The program.
        tool: &'static str,
        /// The deadline.
        limit: Duration,
        /// What it printed.
        output: String,
    },
    /// It ended without the result asked for.
    #[error("{tool} failed: {output}")]
    Failed {
        /// The program.
        tool: &'static str,
        /// Its status and what it printed.
        output: String,
    },
}

/// How a command run with a deadline ended.
#[derive(Debug)]
pub struct Ended {
    /// Its status and what it printed (up to the kill, if it was killed).
    pub output: Output,
    /// It ran past the deadline and was killed.
    pub killed: bool,
}

/// Run `cmd` to completion, killing it after `limit`.
pub fn output_within(mut cmd: Command, limit: Duration) -> std::io::Result<Ended> {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    wait_within(child, limit)
}

/// Wait for `child`, killing it after `limit`.
pub fn wait_within(mut child: Child, limit: Duration) -> std::io::Result<Ended> {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait()?.is_some() || Instant::now() > deadline {
            let killed = child.try_wait()?.is_none();
            if killed {
                let _ = child.kill();
            }
            let output = child.wait_with_output()?;
            return Ok(Ended { output, killed });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn printed(out: &Output) -> String {
    format!(
        "{}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An iperf3 TCP transfer of `secs` seconds from `client` to a one-off server on `dst` in
/// `server`; returns the bytes the server received.
///
/// The client retries a refused connection for up to 5 s (the server needs a moment to
/// listen, and a refused connection does not use up its `-1`); any other error in the
/// client's JSON, or a server that fails, is an error naming what iperf3 printed.
pub fn iperf3(client: &Netns, server: &Netns, dst: IpAddr, secs: u32) -> Result<u64, ToolError> {
    const IPERF: &str = "iperf3";
    let spawn = |source| ToolError::Spawn {
        tool: IPERF,
        source,
    };
    let dst = dst.to_string();
    let srv = server
        .command(&["iperf3", "-s", "-1", "-B", &dst])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    // Kills the server on every early return.
    struct Reap(Option<Child>);
    impl Drop for Reap {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut srv = Reap(Some(srv));
    let t = secs.to_string();
    let limit = Duration::from_secs(u64::from(secs) + 20);
    let deadline = Instant::now() + Duration::from_secs(5);
    let (out, json) = loop {
        let cmd = client.command(&[
            "iperf3",
            "-c",
            &dst,
            "-t",
            &t,
            "-J",
            "--connect-timeout",
            "2000",
        ]);
        let ended = output_within(cmd, limit).map_err(spawn)?;
        if ended.killed {
            return Err(ToolError::Timeout {
                tool: IPERF,
                limit,
                output: format!("client {}", printed(&ended.output)),
            });
        }
        let out = ended.output;
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        let refused = json["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused"));
        if !refused || Instant::now() > deadline {
            break (out, json);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let bytes = json["end"]["sum_received"]["bytes"].as_u64();
    let Some(bytes) = bytes.filter(|_| out.status.success() && json.get("error").is_none()) else {
        return Err(ToolError::Failed {
            tool: IPERF,
            output: format!("client {}", printed(&out)),
        });
    };
    let child = srv.0.take().expect("the server is reaped once");
    let limit = Duration::from_secs(10);
    let s = wait_within(child, limit).map_err(spawn)?;
    if s.killed {
        Err(ToolError::Timeout {
            tool: IPERF,
            limit,
            output: format!("the server, after the client ended: {}", printed(&s.output)),
        })
    } else if !s.output.status.success() {
        Err(ToolError::Failed {
            tool: IPERF,
            output: format!("server {}", printed(&s.output)),
        })
    } else {
        Ok(bytes)
    }
}
