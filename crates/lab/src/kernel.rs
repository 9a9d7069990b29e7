//! The kernel-forwarder baseline: the same lab with Linux doing the forwarding, so vrhost and
//! the kernel are measured with the same sources, sinks, hosts, frames and offloads.
//!
//! Two shapes:
//!
//! * [`Forwarder::Kernel`](crate::Forwarder::Kernel) — any number of VRs, overlapping or not.
//!   Each VR is a namespace `<P>-vr<i>` holding two macvlans, one on `p0` and one on `p1`
//!   (created from the router namespace straight into the VR's, named `p0`/`p1` there),
//!   carrying the VR's VIF MACs and gateway addresses, with forwarding on and static
//!   neighbour entries for the VR's hosts. Data path:
//!   `p0` (veth rx) → macvlan rx handler (by destination MAC) → IP forward in `<P>-vr<i>` →
//!   macvlan tx → `p1` (veth tx). This is the papers' "macvlan-based VR" (one namespace per
//!   tenant; Rathore et al.) and, since each VR has its own routing tables and addresses,
//!   overlapping address spaces just work.
//!
//!   The issue asked for VRF devices (`ip link add vr<i> type vrf`) in the router namespace
//!   instead. The kernel this was built on (6.18, `CONFIG_NET_VRF` not set) has no VRF
//!   driver, and policy routing (`ip rule iif … lookup …`) in one namespace would scan one
//!   rule per VR interface for every packet and share the local table (VR 0's gateway
//!   address would be "local" for VR 1's hosts), so it is not an honest per-VR baseline.
//!   A namespace per VR has neither problem and costs the same per packet as a VRF
//!   (one macvlan hop instead of one l3mdev hop). Macvlans on the router side use mode
//!   `private`, so VRs cannot reach each other at layer 2 past their routing.
//!
//! * [`Forwarder::KernelPlain`](crate::Forwarder::KernelPlain) — exactly one VR: the gateway
//!   addresses sit on `p0`/`p1` themselves (which carry VR 0's VIF MACs) in the router
//!   namespace, forwarding on. Data path: `p0` (veth rx) → IP forward → `p1` (veth tx), the
//!   leanest path Linux has, "the native IP forwarder" the seeds compare against. Comparing
//!   it with `Kernel` at one VR gives the cost of the macvlan hop.

use crate::addressing::Side;
use crate::netns::Netns;
use crate::topology::{LabError, LabSpec, VrLab, VrSide, par_map};

/// Sysctls of a namespace where the kernel forwards: forwarding on, IPv6 addresses usable at
/// once (no DAD), no router advertisements taken, no source-address filtering.
pub(crate) const ROUTER_SYSCTLS: &[&str] = &[
    "net.ipv4.ip_forward=1",
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv6.conf.default.forwarding=1",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv6.conf.default.dad_transmits=0",
    "net.ipv6.conf.default.accept_ra=0",
    "net.ipv6.conf.default.router_solicitations=0",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
];

/// [`Forwarder::Kernel`](crate::Forwarder::Kernel): one namespace per VR with macvlans of
/// `p0`/`p1`.
pub(crate) fn per_vr_namespaces(
    spec: &LabSpec,
    router: &Netns,
    vrs: &mut [VrLab],
) -> Result<(), LabError> {
    let namespaces = par_map(spec.vrs, |i| {
        let ns = Netns::create(&spec.ns_name(&format!("vr{i}")))?;
        ns.sysctls(ROUTER_SYSCTLS)?;
        Ok(ns)
    })?;
    let mut links = Vec::new();
    for (vr, ns) in vrs.iter_mut().zip(namespaces) {
        for s in Side::BOTH {
            links.push(format!(
                "link add link {port} name {port} address {} netns {} type macvlan mode private",
                vr.side(s).vif_mac,
                ns.name(),
                port = s.port(),
            ));
        }
        vr.kernel_ns = Some(ns);
    }
    router.ip_batch(&links)?;
    let vrs = &*vrs;
    par_map(spec.vrs, |i| {
        let vr = &vrs[i as usize];
        let ns = vr.kernel_ns.as_ref().expect("created above");
        ns.ip_batch(&vr_lines(vr, true))?;
        Ok(())
    })?;
    Ok(())
}

/// [`Forwarder::KernelPlain`](crate::Forwarder::KernelPlain): VR 0's addresses on `p0`/`p1`.
pub(crate) fn plain(router: &Netns, vr: &VrLab) -> Result<(), LabError> {
    router.ip_batch(&vr_lines(vr, false))?;
    Ok(())
}

/// `ip` commands giving the VR's interfaces (named like the ports) their gateway addresses
/// and static entries for the hosts.
pub(crate) fn vr_lines(vr: &VrLab, link_up: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for s in Side::BOTH {
        let VrSide {
            port,
            addrs: a,
            host_mac,
            ..
        } = vr.side(s);
        if link_up {
            lines.push(format!("link set {port} up"));
        }
        lines.push(format!("addr add {}/{} dev {port}", a.gw4, a.net4.len));
        lines.push(format!(
            "addr add {}/{} dev {port} nodad",
            a.gw6, a.net6.len
        ));
        lines.push(format!(
            "neigh replace {} lladdr {host_mac} dev {port} nud permanent",
            a.host4
        ));
        lines.push(format!(
            "neigh replace {} lladdr {host_mac} dev {port} nud permanent",
            a.host6
        ));
    }
    lines
}
