//! Helpers shared by the lab's root tests: commands with deadlines, ping, iperf3, frame
//! parsing, and the check that a lab left no namespace behind.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::fmt::Display;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Output};
use std::time::Duration;

use vrhost_lab::{Frame, Lab, Netns};

/// Run `cmd` to completion, killing it after `limit`; `None` if it had to be killed.
pub(crate) fn output_within(cmd: Command, limit: Duration) -> Option<Output> {
    let e = vrhost_lab::tools::output_within(cmd, limit).expect("spawn");
    if e.killed {
        eprintln!(
            "killed after {limit:?}: {}{}",
            String::from_utf8_lossy(&e.output.stdout),
            String::from_utf8_lossy(&e.output.stderr)
        );
        return None;
    }
    Some(e.output)
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

/// An iperf3 TCP transfer of `secs` seconds from `client` to `dst` in `server` (see
/// [`vrhost_lab::tools::iperf3`]); returns the bytes the server received.
pub(crate) fn iperf3(client: &Netns, server: &Netns, dst: IpAddr, secs: u32) -> u64 {
    vrhost_lab::tools::iperf3(client, server, dst, secs).unwrap_or_else(|e| panic!("{e}"))
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
