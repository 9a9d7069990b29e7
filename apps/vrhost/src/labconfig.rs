//! A vrhost config for a namespace lab: one `[[port]]` per router port (`p0`, `p1`) and, for
//! each chosen VR of the lab, its two VIFs with the lab's MACs and gateway addresses, static
//! neighbours for its two hosts, a route to each host's side, and any extra prefixes asked
//! for (benchmarks' routes per VR) via the VR's side-B host.
//!
//! Why generated: the lab owns the addressing and MAC plan (`vrhost_lab::addressing`); a
//! hand-written copy would drift. The demo (`vrhost run` without a file) and the end-to-end
//! tests both use this, so what a new user runs is what the tests check.

use std::fmt::Write;

use vrhost_lab::{Lab, Side};

/// Options for [`render`].
#[derive(Debug, Clone)]
pub struct LabConfig<'a> {
    /// `auto`, `afxdp` or `afpacket`.
    pub backend: &'a str,
    /// Forwarding cores.
    pub cores: Vec<usize>,
    /// Which of the lab's VRs to include (by index).
    pub vrs: Vec<u32>,
    /// Namespace prefix of the VRs' control planes (unique per test).
    pub netns_prefix: String,
    /// Extra IPv4 prefixes every VR routes via its side-B host (vrbench's routes per VR);
    /// usually none.
    pub routes: Vec<String>,
    /// Idle VIFs per VR besides its two (vrbench's VIFs per VR): MAC-demux VIFs on `p0`
    /// named `x2`, `x3`, … with MAC `02:76:73:jj:ii:ii` (`j` the VIF's number, `i` the VR's
    /// index) and `172.16.j.1/24`; no host sends to them. Usually 0.
    pub extra_vifs: u32,
    /// `[dataplane] run_vrs` (`on-owner`, `where-received`); `None` leaves the default.
    pub run_vrs: Option<&'a str>,
}

/// The most VIFs per VR a lab config gives (two plus 62 idle ones).
pub const MAX_VIFS: u32 = 64;

/// The config text.
pub fn render(lab: &Lab, o: &LabConfig<'_>) -> String {
    let mut s = String::new();
    let cores: Vec<String> = o.cores.iter().map(ToString::to_string).collect();
    let _ = writeln!(
        s,
        "# Generated for lab {:?}.\n[dataplane]\ncores = [{}]\n{}\n[control]\nnetns_prefix = {:?}\n",
        lab.prefix(),
        cores.join(", "),
        o.run_vrs
            .map(|r| format!("run_vrs = {r:?}\n"))
            .unwrap_or_default(),
        o.netns_prefix
    );
    for side in Side::BOTH {
        let _ = writeln!(
            s,
            "[[port]]\nname = {:?}\ninterface = {:?}\nbackend = {:?}\n",
            side.port(),
            side.port(),
            o.backend
        );
    }
    for &i in &o.vrs {
        let vr = lab.vr(i);
        let _ = writeln!(s, "[[vr]]\nname = {:?}", vr.name);
        for side in Side::BOTH {
            let v = vr.side(side);
            let _ = writeln!(
                s,
                "[[vr.vif]]\nname = {:?}\nport = {:?}\nmac = \"{}\"\naddresses = [\"{}/{}\", \"{}/{}\"]",
                side.letter(),
                v.port,
                v.vif_mac,
                v.addrs.gw4,
                v.addrs.net4.len,
                v.addrs.gw6,
                v.addrs.net6.len
            );
        }
        for j in 2..2 + o.extra_vifs.min(MAX_VIFS - 2) {
            let [_, _, hi, lo] = i.to_be_bytes();
            let _ = writeln!(
                s,
                "[[vr.vif]]\nname = \"x{j}\"\nport = {:?}\nmac = \"02:76:73:{j:02x}:{hi:02x}:{lo:02x}\"\naddresses = [\"172.16.{j}.1/24\"]",
                Side::A.port()
            );
        }
        for side in Side::BOTH {
            let v = vr.side(side);
            for host in [v.addrs.host4.to_string(), v.addrs.host6.to_string()] {
                let _ = writeln!(
                    s,
                    "[[vr.neighbor]]\naddress = {host:?}\nmac = \"{}\"\nvif = {:?}",
                    v.host_mac,
                    side.letter()
                );
            }
        }
        let via = vr.side(Side::B).addrs.host4;
        for prefix in &o.routes {
            let _ = writeln!(s, "[[vr.route]]\nprefix = {prefix:?}\nvia = \"{via}\"");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use vrhost_lab::{Lab, LabSpec};

    use super::*;

    /// Extra routes go into every VR, via its side-B host, idle VIFs on p0 with MACs of their
    /// own, and the config parses.
    #[test]
    fn extra_routes_are_rendered_per_vr() {
        if !vrhost_lab::require_root("a lab to render a config for") {
            return;
        }
        let lab = Lab::up(&LabSpec::unique("tlcr").vrs(2).overlapping(false)).unwrap();
        let text = render(
            &lab,
            &LabConfig {
                backend: "afpacket",
                cores: vec![0],
                vrs: vec![0, 1],
                netns_prefix: format!("{}-vr-", lab.prefix()),
                routes: vec!["16.0.0.0/24".into(), "16.0.1.0/24".into()],
                extra_vifs: 3,
                run_vrs: None,
            },
        );
        let cfg = vrhost_control::config::Config::parse("test", &text).unwrap();
        for (i, vr) in cfg.vrs.iter().enumerate() {
            let via = lab.vr(i as u32).b.addrs.host4.to_string();
            let ours: Vec<_> = vr
                .routes
                .iter()
                .filter(|r| r.prefix.get_ref().starts_with("16."))
                .collect();
            assert_eq!(ours.len(), 2, "{text}");
            // Two VIFs of the lab plus three idle ones on p0, each with its own MAC.
            assert_eq!(vr.vifs.len(), 5, "{text}");
            let extra: Vec<_> = vr.vifs.iter().skip(2).collect();
            assert!(extra.iter().all(|v| v.port.get_ref() == "p0"), "{text}");
            assert_eq!(
                extra[2].mac.get_ref(),
                &format!("02:76:73:04:00:{i:02x}"),
                "{text}"
            );
            assert!(
                ours.iter()
                    .all(|r| r.via.as_ref().unwrap().get_ref() == &via)
            );
        }
    }
}
