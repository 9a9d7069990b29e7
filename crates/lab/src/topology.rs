//! The lab topology: a router namespace with two ports, a source side and a sink side, and
//! per VR a host on each side — built by [`Lab::up`], torn down by drop or [`Lab::down`].
//!
//! Why this shape: it is the smallest topology in which a router's forwarding can be measured
//! (raw frames from a generator on `a0`, counted on `b0`) *and* its tenants checked end to
//! end with ordinary tools (ping, iperf3 between per-VR hosts), and the same topology serves
//! vrhost and the Linux kernel as forwarder, so both are measured side by side with the same
//! sources, sinks, frames and offloads.
//!
//! ```text
//!  <P>-a0 … <P>-a<n>          <P>-a        <P>-r (router)        <P>-b        <P>-b0 … <P>-b<n>
//!  eth0 (macvlan on a0) ──┐                                                ┌── eth0 (macvlan on b0)
//!  eth0 ──────────────────┴── a0 ═══veth═══ p0   [forwarder]   p1 ═══veth═══ b0 ──┴── eth0
//! ```
//!
//! * **Router** `<P>-r`: ports `p0` (side A) and `p1` (side B), veths with `queues` queue
//!   pairs each. What forwards between them is [`Forwarder`]: vrhost (attached to `p0`/`p1`,
//!   the kernel does nothing with them), or the kernel (see `kernel.rs`).
//! * **Sides** `<P>-a` / `<P>-b`: `a0` / `b0`, the peers of `p0` / `p1`. Generators send raw
//!   frames on `a0`, sinks count on `b0`. IPv6 is off there so the kernel sends nothing.
//! * **Hosts** `<P>-a<i>` / `<P>-b<i>` for VR `i`: `eth0`, a macvlan on `a0` / `b0` (mode
//!   `private`: tenants sharing a side segment cannot reach each other at layer 2, only
//!   through their router), with the host MAC, address and default route of the plan in
//!   [`crate::addressing`], and *static* neighbour entries for the gateway (IPv4 and IPv6)
//!   pointing at the VR's VIF MAC, so tests never depend on the router answering ARP/ND.
//!   IPv6 DAD, router solicitations and RA processing are off so hosts are quiet and their
//!   addresses usable at once.
//!
//! Every namespace is named `<P>-<role>` with role `r`, `a`, `b`, `a<i>`, `b<i>` or (kernel
//! forwarder) `vr<i>`; [`Lab::down`] deletes exactly the names of that form, so a lab named
//! `lab` never takes a lab named `lab-a0` with it. Interface names inside namespaces repeat
//! freely (every host has `eth0`).
//!
//! Overlapping tenants on one segment: in overlapping mode all VRs' hosts on a side share
//! `a0`'s segment and the same addresses, so an ARP/ND *request* for `10.0.0.2` from any
//! router would be answered by every VR's host. The lab therefore never relies on
//! resolution: hosts have static entries for their gateway, the kernel forwarder has static
//! entries for its hosts, and the vrhost config should use the host MACs in [`VrSide`] as
//! static neighbours too.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::addressing::{self, MAX_VRS, Mac, Side, SideAddrs};
use crate::netns::{Netns, NetnsError};
use crate::offload;
use crate::{bridge, kernel};

/// What forwards between `p0` and `p1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Forwarder {
    /// vrhost, attached to `p0`/`p1` in the router namespace (AF_XDP or AF_PACKET); each
    /// VR gets its own VIF MAC on each port (macvlan model). The router namespace's kernel
    /// does nothing with the ports: no addresses, forwarding off, IPv6 off on them. Until
    /// vrhost runs, nothing is forwarded.
    #[default]
    Vrhost,
    /// The Linux kernel, one namespace `<P>-vr<i>` per VR holding macvlans of `p0`/`p1`
    /// (named `p0`/`p1` there) with the VR's VIF MACs and gateway addresses, forwarding on.
    /// Works for overlapping VRs. Path: veth → macvlan → IP forward → macvlan → veth.
    Kernel,
    /// The plain native IP forwarder, one VR only: the gateway addresses sit on `p0`/`p1`
    /// themselves (which carry VR 0's VIF MACs) in the router namespace. Path: veth → IP
    /// forward → veth — the leanest kernel baseline, the one the papers compare against.
    KernelPlain,
    /// The Linux kernel, one namespace `<P>-vr<i>` per VR reached through veth pairs whose
    /// router-side ends are ports of a Linux bridge per router port (`br0` with `p0`, `br1`
    /// with `p1`). Path: veth → bridge → veth → IP forward → veth → bridge → veth — the
    /// veth/bridge virtual router Rathore et al. measured before macvlan. See `bridge.rs`.
    KernelBridge,
}

impl Forwarder {
    /// `"vrhost"`, `"kernel"`, `"kernel-plain"` or `"kernel-bridge"`.
    pub fn name(self) -> &'static str {
        match self {
            Forwarder::Vrhost => "vrhost",
            Forwarder::Kernel => "kernel",
            Forwarder::KernelPlain => "kernel-plain",
            Forwarder::KernelBridge => "kernel-bridge",
        }
    }

    /// Whether the kernel forwards (any kernel mode).
    pub fn is_kernel(self) -> bool {
        self != Forwarder::Vrhost
    }

    /// Whether each VR has a forwarding namespace `<P>-vr<i>` of its own.
    pub fn has_vr_namespaces(self) -> bool {
        matches!(self, Forwarder::Kernel | Forwarder::KernelBridge)
    }
}

impl std::fmt::Display for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Forwarder {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Forwarder, LabError> {
        match s {
            "vrhost" => Ok(Forwarder::Vrhost),
            "kernel" => Ok(Forwarder::Kernel),
            "kernel-plain" => Ok(Forwarder::KernelPlain),
            "kernel-bridge" => Ok(Forwarder::KernelBridge),
            _ => Err(LabError::Spec {
                field: "forwarder",
                reason: format!("{s:?} is not one of vrhost, kernel, kernel-plain, kernel-bridge"),
            }),
        }
    }
}

/// What went wrong building, finding or removing a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The spec was refused before anything was created.
    #[error("lab spec: `{field}`: {reason}")]
    Spec {
        /// The offending field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// A lab of this name (or part of one) exists already.
    #[error(
        "lab `{prefix}` already exists (namespaces {}); remove it with `vrbench lab down --name {prefix}`",
        existing.join(", ")
    )]
    Exists {
        /// The lab's name.
        prefix: String,
        /// Its namespaces found.
        existing: Vec<String>,
    },
    /// No lab of this name.
    #[error("no lab `{prefix}` (no namespace `{prefix}-r`)")]
    NotFound {
        /// The lab's name.
        prefix: String,
    },
    /// A lab exists but lacks a part.
    #[error("lab `{prefix}` is incomplete: {what}")]
    Incomplete {
        /// The lab's name.
        prefix: String,
        /// What is missing or unexpected.
        what: String,
    },
    /// A command or namespace operation failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Offloads could not be read or changed.
    #[error("offloads on {ifname} in {ns}: {source}")]
    Offload {
        /// The namespace.
        ns: String,
        /// The interface.
        ifname: String,
        /// Why.
        source: io::Error,
    },
    /// An offload stayed on although turned off.
    #[error("offloads on {ifname} in {ns} stay on after turning them off: {state:?}")]
    OffloadStuck {
        /// The namespace.
        ns: String,
        /// The interface.
        ifname: String,
        /// The state read back.
        state: offload::Offloads,
    },
}

/// What to build. Refused by [`LabSpec::validate`] (and so by [`Lab::up`]) before anything
/// is created when it cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabSpec {
    /// Namespace name prefix `P` (the lab's name): namespaces are `<P>-<role>`.
    /// 1–64 characters of `A-Z a-z 0-9 _ . -`, not starting with `-` or `.`.
    pub prefix: String,
    /// Number of VRs, 1…[`MAX_VRS`] (exactly 1 for [`Forwarder::KernelPlain`]).
    pub vrs: u32,
    /// rx/tx queue pairs per veth end (≥ 1, ≤ 64): one per core that forwards.
    pub queues: u32,
    /// What forwards.
    pub forwarder: Forwarder,
    /// Every VR uses the same addresses (10.0.0.0/24 and 10.0.1.0/24, fd00:a::/64 and
    /// fd00:b::/64) instead of its own.
    pub overlapping: bool,
}

/// Most queues per veth end accepted (veth allows far more; no lab host has more cores).
pub const MAX_QUEUES: u32 = 64;

static UNIQUE: AtomicU32 = AtomicU32::new(0);

impl LabSpec {
    /// One VR, one queue, vrhost forwarding, separate addresses.
    pub fn new(prefix: impl Into<String>) -> LabSpec {
        LabSpec {
            prefix: prefix.into(),
            vrs: 1,
            queues: 1,
            forwarder: Forwarder::Vrhost,
            overlapping: false,
        }
    }

    /// Like [`LabSpec::new`] with a prefix unique to this process and call:
    /// `<tag>-<pid>-<n>` (for tests, which run in parallel).
    pub fn unique(tag: &str) -> LabSpec {
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        LabSpec::new(format!("{tag}-{}-{n}", std::process::id()))
    }

    /// With `n` VRs.
    pub fn vrs(mut self, n: u32) -> LabSpec {
        self.vrs = n;
        self
    }

    /// With `q` queue pairs per veth end.
    pub fn queues(mut self, q: u32) -> LabSpec {
        self.queues = q;
        self
    }

    /// With this forwarder.
    pub fn forwarder(mut self, f: Forwarder) -> LabSpec {
        self.forwarder = f;
        self
    }

    /// With overlapping (or separate) address spaces.
    pub fn overlapping(mut self, yes: bool) -> LabSpec {
        self.overlapping = yes;
        self
    }

    /// Check the spec; the error names the field.
    pub fn validate(&self) -> Result<(), LabError> {
        validate_prefix(&self.prefix)?;
        let spec = |field, reason: String| Err(LabError::Spec { field, reason });
        if self.vrs == 0 {
            return spec("vrs", "must be at least 1".into());
        }
        if self.vrs > MAX_VRS {
            return spec(
                "vrs",
                format!(
                    "{} is more than the {MAX_VRS} the addressing plan has room for",
                    self.vrs
                ),
            );
        }
        if self.forwarder == Forwarder::KernelPlain && self.vrs != 1 {
            return spec(
                "vrs",
                format!(
                    "{} VRs with the kernel-plain forwarder, which holds exactly 1 (use kernel)",
                    self.vrs
                ),
            );
        }
        if self.queues == 0 {
            return spec("queues", "must be at least 1".into());
        }
        if self.queues > MAX_QUEUES {
            return spec(
                "queues",
                format!("{} is more than {MAX_QUEUES}", self.queues),
            );
        }
        Ok(())
    }

    /// The name of the namespace with `role` in this lab: `<P>-<role>`.
    pub fn ns_name(&self, role: &str) -> String {
        format!("{}-{role}", self.prefix)
    }

    /// Every namespace [`Lab::up`] creates for this spec.
    pub fn namespace_names(&self) -> Vec<String> {
        let mut v = vec![self.ns_name("r"), self.ns_name("a"), self.ns_name("b")];
        for i in 0..self.vrs {
            v.push(self.ns_name(&format!("a{i}")));
            v.push(self.ns_name(&format!("b{i}")));
            if self.forwarder.has_vr_namespaces() {
                v.push(self.ns_name(&format!("vr{i}")));
            }
        }
        v
    }
}

fn validate_prefix(prefix: &str) -> Result<(), LabError> {
    let bad = |reason: String| {
        Err(LabError::Spec {
            field: "prefix",
            reason,
        })
    };
    if prefix.is_empty() || prefix.len() > 64 {
        return bad(format!("{prefix:?} must be 1 to 64 characters long"));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return bad(format!("{prefix:?} contains {c:?}; use A-Z a-z 0-9 _ . -"));
    }
    if prefix.starts_with(['-', '.']) {
        return bad(format!("{prefix:?} must not start with '-' or '.'"));
    }
    Ok(())
}

/// The role of namespace `name` in lab `prefix` (`r`, `a`, `b`, `a<i>`, `b<i>`, `vr<i>`),
/// or `None` if it is not one of the lab's namespaces.
pub fn lab_role<'a>(prefix: &str, name: &'a str) -> Option<&'a str> {
    let role = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let numbered = |p: &str| {
        role.strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    (matches!(role, "r" | "a" | "b") || numbered("a") || numbered("b") || numbered("vr"))
        .then_some(role)
}

/// One side of one VR: what a config generator, a traffic generator and a test need.
#[derive(Debug)]
pub struct VrSide {
    /// Which side.
    pub side: Side,
    /// The router port of this side in the router namespace (`"p0"` / `"p1"`); in kernel
    /// modes also the name of the VR's interface in its forwarding namespace.
    pub port: &'static str,
    /// The VR's VIF MAC on this port (the hosts' gateway MAC).
    pub vif_mac: Mac,
    /// Subnet, gateway and host addresses (IPv4 and IPv6).
    pub addrs: SideAddrs,
    /// The host's MAC.
    pub host_mac: Mac,
    /// The host's interface name (`"eth0"`).
    pub host_ifname: &'static str,
    /// The host's namespace `<P>-<side><i>`.
    pub host: Netns,
}

/// One VR of a lab.
#[derive(Debug)]
pub struct VrLab {
    /// 0-based index.
    pub index: u32,
    /// `vr<i>`.
    pub name: String,
    /// Side A (sources, `p0`).
    pub a: VrSide,
    /// Side B (sinks, `p1`).
    pub b: VrSide,
    /// [`Forwarder::Kernel`], [`Forwarder::KernelBridge`]: the namespace `<P>-vr<i>` where
    /// the kernel forwards for it.
    pub kernel_ns: Option<Netns>,
}

impl VrLab {
    /// The side `s`.
    pub fn side(&self, s: Side) -> &VrSide {
        match s {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }
}

/// A built lab. Dropping it deletes every namespace (and so every interface) it made,
/// unless [`Lab::keep`] was called or it was found with [`Lab::attach`].
#[derive(Debug)]
pub struct Lab {
    spec: LabSpec,
    router: Netns,
    side_a: Netns,
    side_b: Netns,
    vrs: Vec<VrLab>,
}

impl Lab {
    /// Build the lab `spec` describes. Refuses a bad spec, or a name in use, before creating
    /// anything; if a later step fails, what was made is deleted again.
    pub fn up(spec: &LabSpec) -> Result<Lab, LabError> {
        spec.validate()?;
        let existing = Lab::namespaces_of(&spec.prefix)?;
        if !existing.is_empty() {
            return Err(LabError::Exists {
                prefix: spec.prefix.clone(),
                existing,
            });
        }
        let router = Netns::create(&spec.ns_name("r"))?;
        let side_a = Netns::create(&spec.ns_name("a"))?;
        let side_b = Netns::create(&spec.ns_name("b"))?;

        // No IPv6 on the side ports (nor, unless the kernel-plain router needs it, on the
        // router ports): no link-local address, so no router solicitations, DAD or MLD
        // reports that a generator, sink or router would have to tell from test traffic.
        for ns in [&side_a, &side_b] {
            ns.sysctls(&["net.ipv6.conf.default.disable_ipv6=1"])?;
        }
        if spec.forwarder == Forwarder::KernelPlain {
            router.sysctls(kernel::ROUTER_SYSCTLS)?;
        } else {
            router.sysctls(&[
                "net.ipv6.conf.default.disable_ipv6=1",
                "net.ipv4.ip_forward=0",
                "net.ipv6.conf.all.forwarding=0",
            ])?;
        }

        // The two veth pairs, made inside the router namespace with their peers placed
        // straight into the side namespaces.
        for (s, ns) in [(Side::A, &side_a), (Side::B, &side_b)] {
            side_link(spec, &router, s, ns)?;
        }

        let mut vrs = par_map(spec.vrs, |i| {
            Ok(VrLab {
                index: i,
                name: format!("vr{i}"),
                a: new_host(spec, i, Side::A)?,
                b: new_host(spec, i, Side::B)?,
                kernel_ns: None,
            })
        })?;
        for (s, side_ns) in [(Side::A, &side_a), (Side::B, &side_b)] {
            host_links(&vrs, s, side_ns)?;
        }
        match spec.forwarder {
            Forwarder::Vrhost => {}
            Forwarder::Kernel => kernel::per_vr_namespaces(spec, &router, &mut vrs)?,
            Forwarder::KernelBridge => bridge::per_vr_bridged(spec, &router, &mut vrs)?,
            Forwarder::KernelPlain => kernel::plain(&router, &vrs[0])?,
        }
        Ok(Lab {
            spec: spec.clone(),
            router,
            side_a,
            side_b,
            vrs,
        })
    }

    /// Plug side `s` in again after its router port was deleted (a test of a vanished
    /// interface coming back): the veth pair, its offloads, and every VR host's interface on
    /// it, addressed and routed, as [`Lab::up`] made them. The router port gets a new
    /// ifindex; the hosts' namespaces are the same. For labs whose router is vrhost: what a
    /// kernel forwarder built on the router port (its VR namespaces' links) is not rebuilt.
    pub fn replug(&self, s: Side) -> Result<(), LabError> {
        side_link(&self.spec, &self.router, s, self.side(s))?;
        host_links(&self.vrs, s, self.side(s))
    }

    /// Find the lab named `prefix` that someone (maybe another process) built, and describe
    /// it: its spec is read back from the namespaces. The handle does not delete the lab on
    /// drop; use [`Lab::down`] for that.
    pub fn attach(prefix: &str) -> Result<Lab, LabError> {
        validate_prefix(prefix)?;
        let names = Lab::namespaces_of(prefix)?;
        let has = |role: &str| names.iter().any(|n| lab_role(prefix, n) == Some(role));
        if !has("r") {
            return Err(LabError::NotFound {
                prefix: prefix.into(),
            });
        }
        let incomplete = |what: String| LabError::Incomplete {
            prefix: prefix.into(),
            what,
        };
        for role in ["a", "b"] {
            if !has(role) {
                return Err(incomplete(format!("no namespace {prefix}-{role}")));
            }
        }
        let vrs = (0..).take_while(|i| has(&format!("a{i}"))).count() as u32;
        if vrs == 0 {
            return Err(incomplete(format!("no host namespace {prefix}-a0")));
        }
        let kept = |role: &str| {
            let mut ns = Netns::adopt(&format!("{prefix}-{role}"));
            ns.set_keep(true);
            ns
        };
        let router = kept("r");
        let forwarder = if has("vr0") {
            if router
                .ip(&["link", "show", "dev", bridge::BRIDGES[0]])
                .is_ok()
            {
                Forwarder::KernelBridge
            } else {
                Forwarder::Kernel
            }
        } else if !router
            .ip(&["-4", "-o", "addr", "show", "dev", "p0"])?
            .stdout
            .is_empty()
        {
            Forwarder::KernelPlain
        } else {
            Forwarder::Vrhost
        };
        let details =
            String::from_utf8_lossy(&router.ip(&["-d", "link", "show", "p0"])?.stdout).into_owned();
        let queues = details
            .split_whitespace()
            .skip_while(|w| *w != "numrxqueues")
            .nth(1)
            .and_then(|q| q.parse().ok())
            .ok_or_else(|| incomplete(format!("cannot read p0's queues from {details:?}")))?;
        let host0 = kept("a0");
        let v6 = String::from_utf8_lossy(
            &host0
                .ip(&["-6", "-o", "addr", "show", "dev", "eth0"])?
                .stdout,
        )
        .into_owned();
        let overlapping = v6.contains(&format!(
            "{}/",
            addressing::side_addrs(0, Side::A, true).host6
        ));
        let spec = LabSpec {
            prefix: prefix.into(),
            vrs,
            queues,
            forwarder,
            overlapping,
        };
        for name in spec.namespace_names() {
            if !names.contains(&name) {
                return Err(incomplete(format!("no namespace {name}")));
            }
        }
        let side = |vr: u32, s: Side| VrSide {
            host: kept(&format!("{}{vr}", s.letter())),
            ..describe_side(&spec, vr, s)
        };
        let vrs = (0..vrs)
            .map(|i| VrLab {
                index: i,
                name: format!("vr{i}"),
                a: side(i, Side::A),
                b: side(i, Side::B),
                kernel_ns: forwarder
                    .has_vr_namespaces()
                    .then(|| kept(&format!("vr{i}"))),
            })
            .collect();
        Ok(Lab {
            router,
            side_a: kept("a"),
            side_b: kept("b"),
            vrs,
            spec,
        })
    }

    /// Delete every namespace of lab `prefix` (`<P>-r`, `<P>-a`, `<P>-a<i>`, … — exactly the
    /// names a lab uses, so other labs sharing the prefix's start are left alone), whoever
    /// made it, killing what runs inside. Returns the names deleted (none if there was no
    /// such lab). Tries every namespace and reports the first failure.
    pub fn down(prefix: &str) -> Result<Vec<String>, LabError> {
        validate_prefix(prefix)?;
        let mut deleted = Vec::new();
        let mut first_err = None;
        for name in Lab::namespaces_of(prefix)? {
            match Netns::adopt(&name).delete() {
                Ok(()) => deleted.push(name),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(deleted),
        }
    }

    /// The names of the labs on this host (every `<P>` with a namespace `<P>-r`), sorted.
    pub fn list() -> Result<Vec<String>, LabError> {
        Ok(Netns::list()?
            .into_iter()
            .filter_map(|n| n.strip_suffix("-r").map(str::to_string))
            .filter(|p| validate_prefix(p).is_ok())
            .collect())
    }

    /// The namespaces on this host that belong to lab `prefix`, sorted.
    pub fn namespaces_of(prefix: &str) -> Result<Vec<String>, LabError> {
        Ok(Netns::list()?
            .into_iter()
            .filter(|n| lab_role(prefix, n).is_some())
            .collect())
    }

    /// Leave the lab in place when this handle drops (`vrbench lab up`); returns its name.
    pub fn keep(mut self) -> String {
        for ns in self.namespaces_mut() {
            ns.set_keep(true);
        }
        self.spec.prefix.clone()
    }

    fn namespaces_mut(&mut self) -> Vec<&mut Netns> {
        let mut v = vec![&mut self.router, &mut self.side_a, &mut self.side_b];
        for vr in &mut self.vrs {
            v.push(&mut vr.a.host);
            v.push(&mut vr.b.host);
            if let Some(ns) = &mut vr.kernel_ns {
                v.push(ns);
            }
        }
        v
    }

    /// Every namespace of the lab.
    pub fn namespaces(&self) -> Vec<&Netns> {
        let mut v = vec![&self.router, &self.side_a, &self.side_b];
        for vr in &self.vrs {
            v.push(&vr.a.host);
            v.push(&vr.b.host);
            v.extend(vr.kernel_ns.as_ref());
        }
        v
    }

    /// What the lab was built from (read back, for an attached lab).
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// The lab's name `P`.
    pub fn prefix(&self) -> &str {
        &self.spec.prefix
    }

    /// The router namespace `<P>-r` holding `p0` and `p1`.
    pub fn router(&self) -> &Netns {
        &self.router
    }

    /// The side namespace `<P>-a` (holding `a0`) or `<P>-b` (holding `b0`).
    pub fn side(&self, s: Side) -> &Netns {
        match s {
            Side::A => &self.side_a,
            Side::B => &self.side_b,
        }
    }

    /// The MAC of router port `p0`/`p1`.
    pub fn port_mac(&self, s: Side) -> Mac {
        port_mac(self.spec.forwarder, s)
    }

    /// Every VR, in index order.
    pub fn vrs(&self) -> &[VrLab] {
        &self.vrs
    }

    /// VR `i`. Panics if there is none.
    pub fn vr(&self, i: u32) -> &VrLab {
        &self.vrs[i as usize]
    }

    /// Where the kernel forwards for VR `i`: its `<P>-vr<i>` ([`Forwarder::Kernel`],
    /// [`Forwarder::KernelBridge`]), the
    /// router namespace ([`Forwarder::KernelPlain`]), or `None` (vrhost forwards). The VR's
    /// interfaces there are named like the ports, `p0` and `p1`.
    pub fn kernel_router(&self, i: u32) -> Option<&Netns> {
        match self.spec.forwarder {
            Forwarder::Vrhost => None,
            Forwarder::Kernel | Forwarder::KernelBridge => self.vrs[i as usize].kernel_ns.as_ref(),
            Forwarder::KernelPlain => Some(&self.router),
        }
    }
}

/// The MAC of router port `p0`/`p1`: the bare port MAC, or in kernel-plain mode VR 0's VIF
/// MAC, since the port is that VR's interface.
fn port_mac(f: Forwarder, s: Side) -> Mac {
    match f {
        Forwarder::KernelPlain => addressing::vif_mac(0, s),
        Forwarder::Vrhost | Forwarder::Kernel | Forwarder::KernelBridge => addressing::port_mac(s),
    }
}

/// `f(0) … f(n-1)` on a few threads, results in index order. Building a lab is mostly
/// waiting for `ip` processes and the kernel, so even two cores gain from overlapping them.
/// On the first error the remaining indexes are skipped and every result already made is
/// dropped (deleting the namespaces it holds), and that error is returned.
pub(crate) fn par_map<T: Send>(
    n: u32,
    f: impl Fn(u32) -> Result<T, LabError> + Sync,
) -> Result<Vec<T>, LabError> {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;
    let workers = std::thread::available_parallelism()
        .map_or(2, |p| p.get() * 2)
        .min(8)
        .min(n as usize)
        .max(1);
    let next = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let done: Mutex<Vec<(u32, Result<T, LabError>)>> = Mutex::new(Vec::with_capacity(n as usize));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = f(i);
                    failed.fetch_or(r.is_err(), Ordering::Relaxed);
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The plan for VR `vr`'s side `s`, with a placeholder host namespace handle (kept, never
/// deleted) for the caller to replace.
fn describe_side(spec: &LabSpec, vr: u32, s: Side) -> VrSide {
    let mut host = Netns::adopt("");
    host.set_keep(true);
    VrSide {
        side: s,
        port: s.port(),
        vif_mac: addressing::vif_mac(vr, s),
        addrs: addressing::side_addrs(vr, s, spec.overlapping),
        host_mac: addressing::host_mac(vr, s),
        host_ifname: "eth0",
        host,
    }
}

/// Side `s`'s veth pair: the router's port in `router`, its peer in `side_ns`, both with
/// the spec's queues and the plan's MACs, offloads off, up.
fn side_link(spec: &LabSpec, router: &Netns, s: Side, side_ns: &Netns) -> Result<(), LabError> {
    let q = spec.queues.to_string();
    router.ip_batch(&[format!(
        "link add {} address {} numrxqueues {q} numtxqueues {q} type veth \
         peer name {} address {} numrxqueues {q} numtxqueues {q} netns {}",
        s.port(),
        port_mac(spec.forwarder, s),
        s.side_ifname(),
        addressing::side_mac(s),
        side_ns.name()
    )])?;
    disable_offloads(router, s.port())?;
    disable_offloads(side_ns, s.side_ifname())?;
    router.ip_batch(&[format!("link set {} up", s.port())])?;
    side_ns.ip_batch(&[format!("link set {} up", s.side_ifname())])?;
    Ok(())
}

/// Every VR host's interface on side `s`: a private macvlan on the side's veth end, made
/// straight inside the host's namespace (`netns` on `link add`: moving 128 interfaces
/// afterwards would cost ~16 ms each in RCU grace periods), then addressed and routed.
fn host_links(vrs: &[VrLab], s: Side, side_ns: &Netns) -> Result<(), LabError> {
    let lines: Vec<String> = vrs
        .iter()
        .map(|vr| {
            let h = vr.side(s);
            format!(
                "link add link {} name {} address {} netns {} type macvlan mode private",
                s.side_ifname(),
                h.host_ifname,
                h.host_mac,
                h.host.name()
            )
        })
        .collect();
    side_ns.ip_batch(&lines)?;
    par_map(vrs.len() as u32, |i| {
        configure_host(vrs[i as usize].side(s))
    })?;
    Ok(())
}

/// Create the host namespace of VR `vr` on side `s` (its `eth0` comes later) with a quiet
/// IPv6 configuration for devices that will move in.
fn new_host(spec: &LabSpec, vr: u32, s: Side) -> Result<VrSide, LabError> {
    let host = Netns::create(&spec.ns_name(&format!("{}{vr}", s.letter())))?;
    host.sysctls(&[
        "net.ipv6.conf.default.accept_dad=0",
        "net.ipv6.conf.default.dad_transmits=0",
        "net.ipv6.conf.default.router_solicitations=0",
        "net.ipv6.conf.default.accept_ra=0",
    ])?;
    Ok(VrSide {
        host,
        ..describe_side(spec, vr, s)
    })
}

/// Address the host's `eth0`, route via the VR's gateway, pin the gateway's MAC.
fn configure_host(h: &VrSide) -> Result<(), LabError> {
    let a = &h.addrs;
    let dev = h.host_ifname;
    h.host.ip_batch(&[
        format!("link set {dev} up"),
        format!("addr add {}/{} dev {dev}", a.host4, a.net4.len),
        format!("addr add {}/{} dev {dev} nodad", a.host6, a.net6.len),
        format!("route add 0.0.0.0/0 via {} dev {dev}", a.gw4),
        format!("route add ::/0 via {} dev {dev}", a.gw6),
        format!(
            "neigh replace {} lladdr {} dev {dev} nud permanent",
            a.gw4, h.vif_mac
        ),
        format!(
            "neigh replace {} lladdr {} dev {dev} nud permanent",
            a.gw6, h.vif_mac
        ),
    ])?;
    Ok(())
}

/// Turn the veth end's offloads off (see `offload.rs`) and check they are off.
pub(crate) fn disable_offloads(ns: &Netns, ifname: &str) -> Result<(), LabError> {
    let state = ns
        .run(|| offload::disable(ifname))?
        .map_err(|source| LabError::Offload {
            ns: ns.name().into(),
            ifname: ifname.into(),
            source,
        })?;
    if !state.all_off() {
        return Err(LabError::OffloadStuck {
            ns: ns.name().into(),
            ifname: ifname.into(),
            state,
        });
    }
    Ok(())
}
