//! The lab as vrhost finds it: every namespace and interface exists with the promised
//! names, MACs, addresses, routes, neighbours, queues and offloads; the router's ports are
//! bare (no addresses, no IPv6, no forwarding); a host's traffic reaches p0 addressed to its
//! VR's VIF; and the lab is removed completely — by drop, and by name from "another
//! process". Root only; every test builds its own uniquely named lab.

mod common;

use common::*;
use vrhost_lab::offload;
use vrhost_lab::{Capture, Forwarder, Lab, LabError, LabSpec, Netns, Side, addressing};

fn ip_out(ns: &Netns, args: &[&str]) -> String {
    String::from_utf8_lossy(&ns.ip(args).unwrap().stdout).into_owned()
}

fn proc_sys(ns: &Netns, key: &str) -> String {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    ns.run(|| std::fs::read_to_string(&path).unwrap())
        .unwrap()
        .trim()
        .to_string()
}

/// The link line of `dev` shows `mac`.
fn assert_mac(ns: &Netns, dev: &str, mac: vrhost_lab::Mac) {
    let link = ip_out(ns, &["-o", "link", "show", "dev", dev]);
    assert!(
        link.contains(&format!("link/ether {mac} ")),
        "{dev}@{}: {link}",
        ns.name()
    );
}

#[test]
fn vrhost_topology_is_as_promised_and_goes_away() {
    if !vrhost_lab::require_root("vrhost-mode lab test") {
        return;
    }
    let spec = LabSpec::unique("lv").vrs(3).queues(2);
    {
        let lab = Lab::up(&spec).unwrap();
        assert_eq!(lab.spec(), &spec);
        let mut names: Vec<String> = lab
            .namespaces()
            .iter()
            .map(|n| n.name().to_string())
            .collect();
        names.sort();
        assert_eq!(names, Lab::namespaces_of(&spec.prefix).unwrap());
        assert_eq!(names.len(), 3 + 2 * 3);
        assert!(lab.kernel_router(0).is_none());

        // Router ports: bare, MACs as documented, `queues` queues, offloads off.
        let r = lab.router();
        assert_eq!(proc_sys(r, "net.ipv4.ip_forward"), "0");
        for s in Side::BOTH {
            let port = s.port();
            assert_mac(r, port, addressing::port_mac(s));
            assert_eq!(lab.port_mac(s), addressing::port_mac(s));
            let addrs = ip_out(r, &["-o", "addr", "show", "dev", port]);
            assert!(addrs.trim().is_empty(), "{port} has addresses: {addrs}");
            assert_eq!(
                proc_sys(r, &format!("net/ipv6/conf/{port}/disable_ipv6")),
                "1"
            );
            let details = ip_out(r, &["-d", "link", "show", "dev", port]);
            assert!(details.contains("numtxqueues 2 numrxqueues 2"), "{details}");
            let off = r.run(|| offload::get(port)).unwrap().unwrap();
            assert!(off.all_off(), "{port}: {off:?}");
            // Side ports likewise.
            let side = lab.side(s);
            let dev = s.side_ifname();
            assert_mac(side, dev, addressing::side_mac(s));
            assert!(
                ip_out(side, &["-o", "addr", "show", "dev", dev])
                    .trim()
                    .is_empty()
            );
            let off = side.run(|| offload::get(dev)).unwrap().unwrap();
            assert!(off.all_off(), "{dev}: {off:?}");
        }

        // Hosts: MAC, addresses, default routes via the VR's gateway, static neighbours.
        for vr in lab.vrs() {
            assert_eq!(vr.name, format!("vr{}", vr.index));
            for s in Side::BOTH {
                let h = vr.side(s);
                assert_eq!(h.host.name(), spec.ns_name(&format!("{s}{}", vr.index)));
                assert_eq!(h.vif_mac, addressing::vif_mac(vr.index, s));
                assert_eq!(h.host_mac, addressing::host_mac(vr.index, s));
                assert_eq!(h.addrs, addressing::side_addrs(vr.index, s, false));
                assert_eq!(
                    h.addrs.net4.to_string(),
                    format!("10.{}.{}.0/24", vr.index, s.index())
                );
                assert_mac(&h.host, "eth0", h.host_mac);
                let link = ip_out(&h.host, &["-d", "-o", "link", "show", "dev", "eth0"]);
                assert!(link.contains("macvlan mode private"), "{link}");
                let v4 = ip_out(&h.host, &["-4", "-o", "addr", "show", "dev", "eth0"]);
                assert!(v4.contains(&format!("inet {}/24", h.addrs.host4)), "{v4}");
                let v6 = ip_out(&h.host, &["-6", "-o", "addr", "show", "dev", "eth0"]);
                assert!(v6.contains(&format!("inet6 {}/64", h.addrs.host6)), "{v6}");
                assert!(!v6.contains("tentative"), "{v6}");
                let r4 = ip_out(&h.host, &["-4", "route", "show", "default"]);
                assert!(
                    r4.contains(&format!("default via {} dev eth0", h.addrs.gw4)),
                    "{r4}"
                );
                let r6 = ip_out(&h.host, &["-6", "route", "show", "default"]);
                assert!(
                    r6.contains(&format!("default via {} dev eth0", h.addrs.gw6)),
                    "{r6}"
                );
                for gw in [h.addrs.gw4.to_string(), h.addrs.gw6.to_string()] {
                    let n = ip_out(&h.host, &["neigh", "show", &gw, "dev", "eth0"]);
                    assert!(
                        n.contains(&format!("lladdr {} PERMANENT", h.vif_mac)),
                        "{gw}: {n}"
                    );
                }
            }
        }

        // A host's ping reaches p0 (where vrhost listens) addressed to its VR's VIF, and
        // nothing answers it while no vrhost runs.
        let vr1 = lab.vr(1);
        let cap = Capture::open(r, "p0").unwrap();
        assert!(!ping(&vr1.a.host, vr1.b.addrs.host4, 2, "77"));
        let echoes: Vec<_> = cap
            .received()
            .unwrap()
            .into_iter()
            .filter(|f| is_echo4(f, vr1.a.addrs.host4, vr1.b.addrs.host4, &[0x77, 0x77]))
            .collect();
        assert_eq!(echoes.len(), 2);
        for f in echoes {
            assert_eq!(f.data[0..6], vr1.a.vif_mac.octets());
            assert_eq!(f.data[6..12], vr1.a.host_mac.octets());
        }
    }
    assert_gone(&spec.prefix);
}

#[test]
fn down_by_name_removes_a_kept_lab_and_only_that_lab() {
    if !vrhost_lab::require_root("vrhost-mode lab test") {
        return;
    }
    let spec = LabSpec::unique("ld").vrs(2).overlapping(true);
    // A lab whose name starts like one of the first lab's namespaces ("<P>-a1"): `down`
    // of the first must not touch it.
    let other = LabSpec::new(format!("{}-a1", spec.prefix)).forwarder(Forwarder::KernelPlain);
    let other_lab = Lab::up(&other).unwrap();
    let prefix = Lab::up(&spec).unwrap().keep();
    assert_eq!(prefix, spec.prefix);
    // Still there after the handle dropped; another process would find it by name.
    let found = Lab::attach(&prefix).unwrap();
    assert_eq!(found.spec(), &spec);
    assert_eq!(
        found.vr(1).b.addrs,
        addressing::side_addrs(0, Side::B, true)
    );
    assert!(Lab::list().unwrap().contains(&prefix));
    let found_other = Lab::attach(&other.prefix).unwrap();
    assert_eq!(found_other.spec(), &other);
    drop(found);
    drop(found_other);
    assert_eq!(
        Lab::namespaces_of(&prefix).unwrap().len(),
        7,
        "attach must not delete"
    );
    // Up again under the same name is refused, naming what exists.
    match Lab::up(&spec) {
        Err(LabError::Exists { existing, .. }) => assert_eq!(existing.len(), 7),
        other => panic!("expected Exists, got {other:?}"),
    }

    let mut deleted = Lab::down(&prefix).unwrap();
    deleted.sort();
    let mut want = spec.namespace_names();
    want.sort();
    assert_eq!(deleted, want);
    assert_gone(&prefix);
    assert!(matches!(
        Lab::attach(&prefix),
        Err(LabError::NotFound { .. })
    ));
    assert!(Lab::down(&prefix).unwrap().is_empty());
    // The other lab is intact.
    assert_eq!(Lab::namespaces_of(&other.prefix).unwrap().len(), 5);
    drop(other_lab);
    assert_gone(&other.prefix);
}
