//! The kernel-forwarder baseline in a lab: tenants reach each other through the kernel,
//! TCP works end to end over veths that carry wire-like frames, and overlapping tenants never
//! see each other's traffic. Root only; every test builds its own uniquely named lab.

mod common;

use std::net::IpAddr;

use common::*;
use vrhost_lab::{Capture, Forwarder, Lab, LabSpec, Side, require_root};

/// Ping v4 and v6 from VR `i`'s host on side A to its host on side B.
fn pings_across(lab: &Lab, i: u32) {
    let vr = lab.vr(i);
    assert!(ping(&vr.a.host, vr.b.addrs.host4, 3, "a1"), "vr{i} IPv4");
    assert!(ping(&vr.a.host, vr.b.addrs.host6, 3, "a1"), "vr{i} IPv6");
}

/// iperf3 for 2 s across VR 0 while capturing on p0 (where a router receives): TCP works,
/// and every frame the router gets is wire-sized with a correct TCP checksum (the hosts'
/// macvlans keep TSO and checksum offload on; the lab's veth settings must undo that).
fn iperf_with_wire_frames(lab: &Lab) {
    let vr = lab.vr(0);
    let cap = Capture::open(lab.router(), "p0").unwrap();
    let bytes = iperf3(&vr.a.host, &vr.b.host, IpAddr::V4(vr.b.addrs.host4), 2);
    assert!(bytes > 1_000_000, "iperf3 moved only {bytes} bytes");
    let frames = cap.received().unwrap();
    let tcp: Vec<bool> = frames.iter().filter_map(tcp4_checksum_ok).collect();
    assert!(
        tcp.len() > 100,
        "captured only {} TCP frames on p0",
        tcp.len()
    );
    let longest = frames.iter().map(|f| f.data.len()).max().unwrap();
    assert!(
        longest <= 1514,
        "p0 received a {longest}-byte frame (offloads still on?)"
    );
    let bad = tcp.iter().filter(|ok| !**ok).count();
    assert_eq!(
        bad,
        0,
        "{bad} of {} TCP frames on p0 had a bad checksum",
        tcp.len()
    );
}

#[test]
fn kernel_one_vr_ping_and_iperf() {
    if !require_root("kernel lab test") {
        return;
    }
    let spec = LabSpec::unique("lk1").forwarder(Forwarder::Kernel);
    {
        let lab = Lab::up(&spec).unwrap();
        let vr = lab.vr(0);
        assert_eq!(lab.kernel_router(0).unwrap().name(), spec.ns_name("vr0"));
        pings_across(&lab, 0);
        // And back, and to the gateways.
        assert!(ping(&vr.b.host, vr.a.addrs.host4, 1, "b1"));
        assert!(ping(&vr.a.host, vr.a.addrs.gw4, 1, "b1"));
        assert!(ping(&vr.b.host, vr.b.addrs.gw6, 1, "b1"));
        iperf_with_wire_frames(&lab);
    }
    assert_gone(&spec.prefix);
}

#[test]
fn kernel_plain_one_vr_ping_and_iperf() {
    if !require_root("kernel-plain lab test") {
        return;
    }
    let spec = LabSpec::unique("lkp")
        .forwarder(Forwarder::KernelPlain)
        .queues(2);
    {
        let lab = Lab::up(&spec).unwrap();
        assert_eq!(lab.kernel_router(0).unwrap().name(), lab.router().name());
        pings_across(&lab, 0);
        iperf_with_wire_frames(&lab);
    }
    assert_gone(&spec.prefix);
}

#[test]
fn kernel_separate_vrs_reach_only_their_own_hosts() {
    if !require_root("kernel lab test") {
        return;
    }
    let spec = LabSpec::unique("lks").forwarder(Forwarder::Kernel).vrs(3);
    {
        let lab = Lab::up(&spec).unwrap();
        for i in 0..3 {
            pings_across(&lab, i);
        }
        // vr0 has no route to vr1's subnets: its host cannot reach vr1's host.
        let (vr0, vr1) = (lab.vr(0), lab.vr(1));
        assert!(!ping(&vr0.a.host, vr1.b.addrs.host4, 1, "c1"));
        assert!(!ping(&vr0.a.host, vr1.b.addrs.host6, 1, "c1"));
    }
    assert_gone(&spec.prefix);
}

#[test]
fn kernel_overlapping_vrs_carry_only_their_own_traffic() {
    if !require_root("kernel lab test") {
        return;
    }
    let spec = LabSpec::unique("lko")
        .forwarder(Forwarder::Kernel)
        .vrs(2)
        .overlapping(true);
    {
        let lab = Lab::up(&spec).unwrap();
        let (vr0, vr1) = (lab.vr(0), lab.vr(1));
        // Both tenants use the same addresses.
        assert_eq!(vr0.a.addrs, vr1.a.addrs);
        assert_eq!(vr0.b.addrs, vr1.b.addrs);
        let sinks = [
            Capture::open(&vr0.b.host, "eth0").unwrap(),
            Capture::open(&vr1.b.host, "eth0").unwrap(),
        ];
        // Each tenant pings "10.0.1.2" (and "fd00:b::2") with its own payload marker.
        let markers = [[0x5a, 0x00, 0x5a, 0x00], [0x5a, 0x01, 0x5a, 0x01]];
        for (i, vr) in [vr0, vr1].into_iter().enumerate() {
            let hex: String = markers[i].iter().map(|b| format!("{b:02x}")).collect();
            assert!(ping(&vr.a.host, vr.b.addrs.host4, 5, &hex), "vr{i} IPv4");
            assert!(ping(&vr.a.host, vr.b.addrs.host6, 5, &hex), "vr{i} IPv6");
        }
        let got: Vec<_> = sinks.iter().map(|c| c.received().unwrap()).collect();
        let a = vr0.a.addrs;
        let b = vr0.b.addrs;
        for (sink, frames) in got.iter().enumerate() {
            for (sender, marker) in markers.iter().enumerate() {
                let v4 = frames
                    .iter()
                    .filter(|f| is_echo4(f, a.host4, b.host4, marker))
                    .count();
                let v6 = frames
                    .iter()
                    .filter(|f| is_echo6(f, a.host6, b.host6, marker))
                    .count();
                let want = if sink == sender { 5 } else { 0 };
                assert_eq!(
                    v4, want,
                    "host b{sink}: IPv4 echo requests from tenant {sender}"
                );
                assert_eq!(
                    v6, want,
                    "host b{sink}: IPv6 echo requests from tenant {sender}"
                );
            }
            // Everything a tenant's host received came from its own VR's VIF (or is
            // multicast noise like MLD reports, which carries no tenant traffic).
            let vif = lab.vr(sink as u32).side(Side::B).vif_mac.octets();
            for f in frames.iter().filter(|f| f.data[0] & 1 == 0) {
                assert_eq!(
                    f.data[6..12],
                    vif,
                    "host b{sink} got a unicast frame from another VIF"
                );
            }
        }
    }
    assert_gone(&spec.prefix);
}

#[test]
fn kernel_bridge_vrs_ping_through_their_own_bridge_ports() {
    if !require_root("kernel-bridge lab test") {
        return;
    }
    let spec = LabSpec::unique("lkb")
        .forwarder(Forwarder::KernelBridge)
        .vrs(2);
    {
        let lab = Lab::up(&spec).unwrap();
        for i in 0..2 {
            assert_eq!(
                lab.kernel_router(i).unwrap().name(),
                spec.ns_name(&format!("vr{i}"))
            );
            pings_across(&lab, i);
        }
        // The VR's interfaces are veths enslaved to the router's bridges, not macvlans.
        let links = lab.router().ip(&["-d", "link", "show", "vr1-p0"]).unwrap();
        let text = String::from_utf8_lossy(&links.stdout);
        assert!(text.contains("master br0"), "{text}");
        assert!(text.contains("veth"), "{text}");
        // Separate VRs: vr0's host cannot reach vr1's.
        let (vr0, vr1) = (lab.vr(0), lab.vr(1));
        assert!(!ping(&vr0.a.host, vr1.b.addrs.host4, 1, "c1"));
        // An attached handle reads the forwarder back.
        assert_eq!(
            Lab::attach(lab.prefix()).unwrap().spec().forwarder,
            Forwarder::KernelBridge
        );
    }
    assert_gone(&spec.prefix);
}
