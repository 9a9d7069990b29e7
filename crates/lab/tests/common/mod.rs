//! Helpers shared by the lab's root tests: commands with deadlines, ping, iperf3, frame
//! parsing, and the check that a lab left no namespace behind.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::fmt::Display;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use vrhost_lab::{Frame, Lab, Netns};

/// Run `cmd` to completion, killing it after `limit`; `None` if it had to be killed.
pub(crate) fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_within(child, limit)
}

/// Wait for `child`, killing it after `limit`; `None` if it had to be killed.
pub(crate) fn wait_within(mut child: Child, limit: Duration) -> Option<Output> {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return Some(child.wait_with_output().expect("wait"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            eprintln!(
                "killed after {limit:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `ping -c COUNT` from `ns` to `dst` (IPv4 or IPv6) with a marker `pattern` (hex) in the
/// payload; true if every echo was answered.
pub(crate) fn ping(ns: &Netns, dst: impl Display, count: u32, pattern: &str) -> bool {
    let dst = dst.to_string();
    let count = count.to_string();
    let cmd = ns.command(&[
        "ping", "-n", "-q", "-c", &count, "-i", "0.05", "-W", "2", "-p", pattern, &dst,
    ]);
    match output_within(cmd, Duration::from_secs(15)) {
        Some(o) => {
            if !o.status.success() {
                eprintln!(
                    "ping {dst} from {}: {}{}",
                    ns.name(),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            o.status.success()
        }
        None => false,
    }
}

/// Run an iperf3 TCP transfer of `secs` seconds from `client` to a one-off server on `dst`
/// in `server`; returns the bytes the server received.
pub(crate) fn iperf3(client: &Netns, server: &Netns, dst: IpAddr, secs: u32) -> u64 {
    let dst = dst.to_string();
    let srv = server
        .command(&["iperf3", "-s", "-1", "-B", &dst])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iperf3 server");
    let t = secs.to_string();
    // The server needs a moment to listen; a refused connection does not use up its `-1`.
    // (iperf3 3.12 with -J may exit 0 after "Connection refused": read the JSON's "error".)
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
        let out = output_within(cmd, Duration::from_secs(u64::from(secs) + 20))
            .expect("iperf3 client did not finish in time");
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
    let srv = wait_within(srv, Duration::from_secs(10));
    assert!(
        out.status.success() && json.is_object() && json.get("error").is_none(),
        "iperf3 client failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match srv {
        None => panic!("iperf3 server did not end within 10 s of the client"),
        Some(s) => assert!(
            s.status.success(),
            "iperf3 server failed ({}): {}{}",
            s.status,
            String::from_utf8_lossy(&s.stdout),
            String::from_utf8_lossy(&s.stderr)
        ),
    }
    json["end"]["sum_received"]["bytes"]
        .as_u64()
        .expect("end.sum_received.bytes")
}

/// Assert that no namespace of lab `prefix` is left, as `ip netns list` shows them.
pub(crate) fn assert_gone(prefix: &str) {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let text = String::from_utf8_lossy(&out.stdout);
    let left: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| vrhost_lab::topology::lab_role(prefix, n).is_some())
        .collect();
    assert!(
        left.is_empty(),
        "lab {prefix} left namespaces behind: {left:?}"
    );
    assert!(Lab::namespaces_of(prefix).unwrap().is_empty());
}

/// The IPv4 payload of an untagged IPv4 frame.
pub(crate) fn ipv4(f: &Frame) -> Option<&[u8]> {
    (f.ethertype()? == 0x0800 && f.data.len() >= 34).then(|| &f.data[14..])
}

/// Whether `f` is an ICMPv4 echo request from `src` to `dst` carrying `marker`.
pub(crate) fn is_echo4(f: &Frame, src: Ipv4Addr, dst: Ipv4Addr, marker: &[u8]) -> bool {
    let Some(ip) = ipv4(f) else { return false };
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    ip[9] == 1
        && ip[12..16] == src.octets()
        && ip[16..20] == dst.octets()
        && ip.get(ihl) == Some(&8)
        && contains(&ip[ihl..], marker)
}

/// Whether `f` is an ICMPv6 echo request from `src` to `dst` carrying `marker`.
pub(crate) fn is_echo6(
    f: &Frame,
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    marker: &[u8],
) -> bool {
    if f.ethertype() != Some(0x86dd) || f.data.len() < 14 + 40 + 8 {
        return false;
    }
    let ip = &f.data[14..];
    ip[6] == 58
        && ip[8..24] == src.octets()
        && ip[24..40] == dst.octets()
        && ip[40] == 128
        && contains(&ip[40..], marker)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether an IPv4 TCP frame's TCP checksum is correct (`None` if not IPv4 TCP).
pub(crate) fn tcp4_checksum_ok(f: &Frame) -> Option<bool> {
    let ip = ipv4(f)?;
    if ip[9] != 6 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let seg = ip.get(ihl..total)?;
    let mut sum: u32 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(&ip[12..20]);
    add(&[0, 6]);
    add(&(seg.len() as u16).to_be_bytes());
    add(seg);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    Some(sum == 0xffff)
}
