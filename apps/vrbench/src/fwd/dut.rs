//! The devices under test — vrhost over AF_XDP, vrhost over AF_PACKET, the kernel's native IP
//! forwarder and the kernel's macvlan-per-VR router — each in a lab of its own, and the
//! layouts (queues and cores) they are measured in.
//!
//! Why one lab per forwarder kind and layout, built once and kept for every trial of the
//! layout: trials of different profiles are interleaved (so a noisy neighbour hits all of
//! them alike), and rebuilding a 64-VR lab per trial would cost more than the trial. The
//! vrhost lab serves both vrhost profiles (the daemon is started per trial with the backend
//! and VR count of the case), and the 1-VR and many-VR cases of a lab share it: a 1-VR case
//! simply sends to VR 0 only.
//!
//! What veth needs on `p0` (found on Linux 6.18; see also `generator.rs`): live frames arrive
//! by `ndo_xdp_xmit`, which veth accepts only into a peer whose NAPI is enabled — an XDP
//! program on `p0`, or GRO turned on for it. Otherwise the whole bulk is refused and the
//! frames are freed *silently*: no veth or interface counter moves (only the
//! `xdp:xdp_devmap_xmit` tracepoint sees the error); `--p0-napi none` shows it (0 forwarded
//! of 26 M offered in a second). vrhost over AF_XDP attaches its own program, so nothing
//! more is needed. For AF_PACKET and the kernel profiles this module attaches a
//! two-instruction `XDP_PASS` program to `p0` in driver mode. What it costs: one BPF call
//! per frame, and the kernel builds the skb from the XDP frame (`__xdp_build_skb_from_frame`,
//! no copy) and hands the NAPI poll's skbs up as a list — the path every frame from a real
//! NIC with an XDP program takes, rather than veth's usual one (the sender's skb queued to
//! the peer's backlog). Since live frames have no sender skb, there is no program-free path
//! to compare with; `--p0-napi gro` (GRO on instead, which also runs the skbs through GRO)
//! measured within noise of it. With the program attached, `p0`'s GRO stays off as the lab
//! set it (`ethtool -k p0`: `generic-receive-offload: off`; no GRO handlers in profiles).
//!
//! Multi-queue layouts also get XPS on `p1` (see [`set_xps`]).

use std::path::Path;

use anyhow::Context;
use vrhost_dataplane::RunVrs;
use vrhost_lab::{Forwarder, Lab, LabSpec, Netns, Side};

use super::bpf::{self, Link};
use super::daemon::Daemon;
use super::generator::Generator;
use super::napi;
use super::sink::{Hook, Sink};

/// What forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Profile {
    /// vrhost, AF_XDP ports (native XDP attach, copy mode on veth).
    VrhostAfxdp,
    /// vrhost, AF_PACKET ports (TPACKET_V3).
    VrhostAfpacket,
    /// vrhost, AF_XDP ports, transmitting through the socket (`tx = "socket"`: the AF_XDP
    /// tx ring) rather than the device's XDP transmit, which the sink's program on `b0`
    /// lets the other vrhost profiles use (`tx = "auto"`).
    VrhostAfxdpSocketTx,
    /// vrhost, AF_PACKET ports, transmitting with `sendmmsg` (`tx = "socket"`).
    VrhostAfpacketSocketTx,
    /// vrhost, AF_XDP ports with the quickpath on `p0` (`quickpath = true`): established
    /// flows are forwarded by `p0`'s XDP program straight to `p1` (`vrhost_io::quickpath`).
    VrhostAfxdpQp,
    /// The kernel's native IP forwarder: addresses on p0/p1 (Forwarder::KernelPlain), 1 VR.
    Kernel,
    /// The kernel, one namespace per VR with macvlans of p0/p1 (Forwarder::Kernel).
    KernelVr,
    /// No router: the sink's program on p0 itself counts what the generator delivers —
    /// the ceiling of generator + veth, for reference.
    NoRouter,
}

impl Profile {
    /// Every profile, in report order.
    pub(crate) const ALL: [Profile; 8] = [
        Profile::VrhostAfxdp,
        Profile::VrhostAfxdpQp,
        Profile::VrhostAfpacket,
        Profile::VrhostAfxdpSocketTx,
        Profile::VrhostAfpacketSocketTx,
        Profile::Kernel,
        Profile::KernelVr,
        Profile::NoRouter,
    ];

    /// The name used on the command line and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Profile::VrhostAfxdp => "vrhost-afxdp",
            Profile::VrhostAfpacket => "vrhost-afpacket",
            Profile::VrhostAfxdpSocketTx => "vrhost-afxdp-socket-tx",
            Profile::VrhostAfpacketSocketTx => "vrhost-afpacket-socket-tx",
            Profile::VrhostAfxdpQp => "vrhost-afxdp-qp",
            Profile::Kernel => "kernel",
            Profile::KernelVr => "kernel-vr",
            Profile::NoRouter => "no-router",
        }
    }

    /// vrhost's `[[port]] tx` for the profile with the sink's end receiving `sink`: XDP
    /// transmit where `p1`'s peer can take it (`auto` chooses it by itself on AF_XDP
    /// ports; AF_PACKET ports use it only when asked).
    pub(crate) fn tx(self, sink: SinkNapi) -> &'static str {
        match (self, sink) {
            (Profile::VrhostAfxdpSocketTx | Profile::VrhostAfpacketSocketTx, _) => "socket",
            (Profile::VrhostAfpacket, SinkNapi::Gro) => "xdp",
            _ => "auto",
        }
    }

    /// Whether vrhost forwards (the daemon runs).
    pub(crate) fn is_vrhost(self) -> bool {
        self.forwarder() == Forwarder::Vrhost && self != Profile::NoRouter
    }

    /// The lab forwarder the profile runs in.
    pub(crate) fn forwarder(self) -> Forwarder {
        match self {
            Profile::VrhostAfxdp
            | Profile::VrhostAfpacket
            | Profile::VrhostAfxdpSocketTx
            | Profile::VrhostAfpacketSocketTx
            | Profile::VrhostAfxdpQp
            | Profile::NoRouter => Forwarder::Vrhost,
            Profile::Kernel => Forwarder::KernelPlain,
            Profile::KernelVr => Forwarder::Kernel,
        }
    }
}

/// Where `p0`'s receive (NAPI) work runs; see `napi.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RxNapi {
    /// veth's default: in softirq on the CPU that sent the frame (the generator's).
    Inline,
    /// Threaded NAPI, queue `q`'s thread pinned to DUT core `q`.
    Pinned,
}

/// How `p0`'s NAPI is switched on for the profiles that attach nothing to it themselves
/// (kernel, kernel-vr, AF_PACKET).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub(crate) enum P0Napi {
    /// A two-instruction `XDP_PASS` program in driver mode (the default).
    XdpPass,
    /// GRO turned on (`ethtool -K p0 gro on`), for comparing the cost of the two.
    Gro,
    /// Nothing, to see what veth does then (it drops every live frame).
    None,
}

/// How `b0` (the sink's veth end, the router's `p1` peer) receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub(crate) enum SinkNapi {
    /// GRO on: `b0` runs a NAPI for what `p1` sends, as a NIC's receive does. That is
    /// what lets a veth take XDP-transmitted frames, so vrhost's `tx = "auto"` transmits by
    /// XDP; skbs from the other paths go through the same NAPI (veth's `ptr_ring`).
    Gro,
    /// veth's default: frames go to the transmitting CPU's backlog; vrhost then transmits
    /// through its sockets (the device takes no XDP transmit).
    Backlog,
}

/// Queues and cores of a measurement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// `1q`, `1q-pinned`, `2q`, `2q-pinned`.
    pub(crate) name: &'static str,
    /// Queue pairs per veth end.
    pub(crate) queues: u32,
    /// One generator thread per core listed.
    pub(crate) gen_cores: Vec<usize>,
    /// vrhost's forwarding cores (`cores = [...]`), and where pinned NAPI threads go.
    pub(crate) dut_cores: Vec<usize>,
    /// Where `p0`'s receive work runs.
    pub(crate) rx_napi: RxNapi,
    /// How `p0`'s NAPI is enabled where the DUT does not do it.
    pub(crate) p0_napi: P0Napi,
    /// How `b0` receives.
    pub(crate) sink_napi: SinkNapi,
    /// Which vrhost workers forward a VR's frames.
    pub(crate) run_vrs: RunVrs,
}

impl Layout {
    /// The layout called `name`.
    pub(crate) fn named(name: &str) -> anyhow::Result<Layout> {
        let (name, queues, gen_cores, dut_cores, rx_napi): (_, _, &[usize], &[usize], _) =
            match name {
                "1q" => ("1q", 1, &[1], &[0], RxNapi::Inline),
                "1q-pinned" => ("1q-pinned", 1, &[1], &[0], RxNapi::Pinned),
                "2q" => ("2q", 2, &[0, 1], &[0, 1], RxNapi::Inline),
                "2q-pinned" => ("2q-pinned", 2, &[0, 1], &[0, 1], RxNapi::Pinned),
                other => anyhow::bail!(
                    "--layouts: unknown layout {other:?} (1q, 1q-pinned, 2q, 2q-pinned)"
                ),
            };
        Ok(Layout {
            name,
            queues,
            gen_cores: gen_cores.to_vec(),
            dut_cores: dut_cores.to_vec(),
            rx_napi,
            p0_napi: P0Napi::XdpPass,
            sink_napi: SinkNapi::Gro,
            run_vrs: RunVrs::WhereReceived,
        })
    }

    /// A sentence saying what runs where.
    pub(crate) fn describe(&self) -> String {
        let cores = |c: &[usize]| {
            c.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let rx = match self.rx_napi {
            RxNapi::Inline => format!(
                "p0 rx NAPI inline in softirq on the generator's CPU ({}) — for the kernel \
                 profiles that is all of the forwarding",
                cores(&self.gen_cores)
            ),
            RxNapi::Pinned => format!(
                "p0 rx NAPI in kernel threads pinned to DUT core(s) {}",
                cores(&self.dut_cores)
            ),
        };
        let enable = match self.p0_napi {
            P0Napi::XdpPass => "",
            P0Napi::Gro => " (p0's NAPI enabled by GRO, not XDP_PASS)",
            P0Napi::None => " (p0's NAPI not enabled for kernel/AF_PACKET)",
        };
        let sink = match self.sink_napi {
            SinkNapi::Gro => "b0's NAPI (GRO on)",
            SinkNapi::Backlog => "the backlog",
        };
        format!(
            "{} queue(s); generator on core(s) {}; vrhost cores = [{}], run_vrs = {:?}; \
             {rx}{enable}; sink (b0 tc ingress, via {sink}) on the CPU that transmits on p1",
            self.queues,
            cores(&self.gen_cores),
            cores(&self.dut_cores),
            self.run_vrs.name()
        )
    }
}

/// One lab of a layout with its generator and sink, and for kernel labs the `XDP_PASS`
/// program on `p0`.
#[derive(Debug)]
pub(crate) struct TestLab {
    /// The generator on `a0`.
    pub(crate) generator: Generator,
    /// The sink on `b0`.
    pub(crate) sink: Sink,
    pass: Option<Enabled>,
    /// The lab (deleted when this drops, after the programs detach: field order).
    pub(crate) lab: Lab,
}

impl TestLab {
    /// Build the lab for `forwarder` in `layout` with `vrs` VRs, attach the sink, and get
    /// `p0` ready for live frames (see the module docs).
    pub(crate) fn up(
        prefix: &str,
        forwarder: Forwarder,
        vrs: u32,
        layout: &Layout,
    ) -> anyhow::Result<TestLab> {
        let lab = Lab::up(
            &LabSpec::new(prefix)
                .vrs(vrs)
                .queues(layout.queues)
                .forwarder(forwarder)
                .overlapping(false),
        )
        .with_context(|| format!("building lab {prefix}"))?;
        if layout.queues > 1 {
            set_xps(&lab, layout)?;
        }
        if layout.sink_napi == SinkNapi::Gro {
            let b0 = Side::B.side_ifname();
            let on = lab
                .side(Side::B)
                .run(|| vrhost_lab::offload::set_gro(b0, true))?
                .with_context(|| format!("GRO on {b0}"))?;
            anyhow::ensure!(on, "{b0} kept GRO off");
        }
        let sink = Sink::attach(lab.side(Side::B), vrs).context("attaching the sink to b0")?;
        let generator =
            Generator::load(lab.side(Side::A), vrs, false).context("loading the generator")?;
        let mut t = TestLab {
            generator,
            sink,
            pass: None,
            lab,
        };
        if forwarder.is_kernel() {
            let mark = napi::watermark(Side::A.port());
            t.pass = Some(enable_p0(&t.lab, layout.p0_napi)?);
            if layout.rx_napi == RxNapi::Pinned {
                pin_rx(&t.lab, mark, layout)?;
            }
        }
        Ok(t)
    }
}

/// XPS on `p1`: tx queue `q` for the CPU of DUT core `q` — what a multi-queue NIC driver sets
/// up by default, and veth does not. Without it the kernel picks `p1`'s tx queue by the
/// flow's hash, so one flow forwarded on both CPUs lands in *one* queue of `b0` from both:
/// the two CPUs then contend for that ring's lock and one CPU runs its NAPI for both (seen
/// on 6.18: `__skb_get_hash` and `queued_spin_lock_slowpath` in the profile, and the
/// 2-queue kernel no faster than the single-queue one). vrhost's AF_XDP and AF_PACKET
/// transmits pick their queue themselves (per worker) or by the same XPS map.
fn set_xps(lab: &Lab, layout: &Layout) -> anyhow::Result<()> {
    let port = Side::B.port();
    let lines: Vec<String> = (0..layout.queues as usize)
        .map(|q| {
            let cpu = layout.dut_cores[q % layout.dut_cores.len()];
            format!(
                "echo {:x} > /sys/class/net/{port}/queues/tx-{q}/xps_cpus",
                1u64 << cpu
            )
        })
        .collect();
    lab.router()
        .exec(&["sh", "-c", &lines.join(" && ")])
        .with_context(|| format!("setting XPS on {port}"))?;
    Ok(())
}

/// Put `p0`'s NAPI (which must exist: an XDP program is attached) in threads pinned to the
/// layout's DUT cores. Threaded mode can only be switched on while the NAPI instances exist
/// (veth has none without XDP or GRO), so this runs after every attach.
fn pin_rx(lab: &Lab, mark: u32, layout: &Layout) -> anyhow::Result<()> {
    napi::set_threaded(lab.router(), Side::A.port(), true)?;
    napi::pin(
        Side::A.port(),
        mark,
        layout.queues as usize,
        &layout.dut_cores,
    )
    .map(drop)
}

/// `p0` made ready for live frames (its NAPI on); undone when dropped.
#[derive(Debug)]
pub(crate) enum Enabled {
    /// The `XDP_PASS` program, attached while this link lives (held, never read).
    Xdp(#[allow(dead_code, reason = "held for its drop")] Link),
    /// GRO on, in this router namespace.
    Gro(String),
    /// Nothing done.
    Nothing,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        if let Enabled::Gro(router) = self {
            let mut ns = Netns::adopt(router);
            ns.set_keep(true);
            let _ = ns.exec(&["ethtool", "-K", Side::A.port(), "gro", "off"]);
        }
    }
}

/// Switch `p0`'s NAPI on the way `how` says.
pub(crate) fn enable_p0(lab: &Lab, how: P0Napi) -> anyhow::Result<Enabled> {
    Ok(match how {
        P0Napi::XdpPass => {
            let prog = bpf::pass_program()?;
            let link = lab.router().run(|| -> std::io::Result<Link> {
                let ifindex = bpf::ifindex(Side::A.port())?;
                Link::attach_xdp(&prog, ifindex, false)
            })??;
            Enabled::Xdp(link)
        }
        P0Napi::Gro => {
            lab.router()
                .exec(&["ethtool", "-K", Side::A.port(), "gro", "on"])?;
            Enabled::Gro(lab.router().name().to_string())
        }
        P0Napi::None => Enabled::Nothing,
    })
}

/// A DUT running for one trial: the daemon (vrhost profiles) and any program attached for
/// it. Stopped when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    /// The vrhost daemon, if the profile is vrhost.
    pub(crate) daemon: Option<Daemon>,
    /// `no-router`: the counter on `p0`, read instead of the lab's sink.
    pub(crate) p0_sink: Option<Sink>,
    // Dropped after the daemon (field order): AF_PACKET's p0 set-up.
    _pass: Option<Enabled>,
}

/// Start `profile` with `vrs` VRs on `t` (whose lab must have the profile's forwarder).
pub(crate) fn start(
    bin: &Path,
    profile: Profile,
    vrs: u32,
    t: &TestLab,
    layout: &Layout,
) -> anyhow::Result<Running> {
    let mark = napi::watermark(Side::A.port());
    let mut pass = None;
    let mut p0_sink = None;
    let daemon = match profile {
        Profile::Kernel | Profile::KernelVr => None,
        Profile::NoRouter => {
            p0_sink = Some(Sink::attach_to(
                t.lab.router(),
                Side::A.port(),
                vrs,
                Hook::Xdp,
            )?);
            None
        }
        Profile::VrhostAfxdp | Profile::VrhostAfxdpSocketTx | Profile::VrhostAfxdpQp => {
            Some(Daemon::start(
                bin,
                &t.lab,
                "afxdp",
                (
                    profile.tx(layout.sink_napi),
                    profile == Profile::VrhostAfxdpQp,
                ),
                (&layout.dut_cores, Some(layout.run_vrs.name())),
                vrs,
                (&[], 0),
            )?)
        }
        Profile::VrhostAfpacket | Profile::VrhostAfpacketSocketTx => {
            pass = Some(enable_p0(&t.lab, layout.p0_napi)?);
            Some(Daemon::start(
                bin,
                &t.lab,
                "afpacket",
                (profile.tx(layout.sink_napi), false),
                (&layout.dut_cores, Some(layout.run_vrs.name())),
                vrs,
                (&[], 0),
            )?)
        }
    };
    if !profile.forwarder().is_kernel() && layout.rx_napi == RxNapi::Pinned {
        pin_rx(&t.lab, mark, layout)?;
    }
    Ok(Running {
        daemon,
        p0_sink,
        _pass: pass,
    })
}
