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
}

/// The config text.
pub fn render(lab: &Lab, o: &LabConfig<'_>) -> String {
    let mut s = String::new();
    let cores: Vec<String> = o.cores.iter().map(ToString::to_string).collect();
    let _ = writeln!(
        s,
        "# Generated for lab {:?}.\n[dataplane]\ncores = [{}]\n\n[control]\nnetns_prefix = {:?}\n",
        lab.prefix(),
        cores.join(", "),
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

    /// Extra routes go into every VR, via its side-B host, and the config parses.
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
            assert!(
                ours.iter()
                    .all(|r| r.via.as_ref().unwrap().get_ref() == &via)
            );
        }
    }
}
