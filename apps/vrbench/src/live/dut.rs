//! The DUT profiles a trial runs against, and the lab each one runs in, with the stamped
//! generator on `a0` and the stream sink on `b0`.
//!
//! | profile | lab forwarder | what forwards |
//! |---|---|---|
//! | `vrhost-afxdp` | vrhost | the vrhost daemon over AF_XDP (`cores = [dut core]`) |
//! | `vrhost-afpacket` | vrhost | the vrhost daemon over AF_PACKET |
//! | `kernel` | kernel-plain | Linux's native IP forwarder, one VR |
//! | `kernel-macvlan` | kernel | a namespace per VR on macvlans (Rathore's set-up) |
//! | `kernel-bridge` | kernel-bridge | a namespace per VR on veth + bridge (Rathore's earlier one) |
//! | `none` | vrhost, nothing running | nothing: `p0` drops every frame in XDP — the generator's ceiling |
//!
//! One layout for all (the `1q` layout of `vrbench fwd`): single-queue veths, the generator
//! thread pinned to the last core, vrhost's worker on core 0, `p0`'s receive NAPI inline on
//! the generator's CPU (so for the kernel profiles all of the forwarding runs there, after
//! each burst — see `fwd.rs` "Where things run"). For the kernel profiles and AF_PACKET,
//! `p0` gets a two-instruction `XDP_PASS` program: veth accepts live frames only with its
//! NAPI on.
//!
//! A [`LiveLab`] is built once and serves any number of trials (the daemon keeps running
//! between them; a search makes dozens). Dropping it detaches the programs, stops the
//! daemon and deletes the lab's namespaces — on errors, on unwinding, and after Ctrl-C
//! (the trial runner stops early and returns; see `live.rs`).

use std::path::Path;

use anyhow::{Context, bail};
use vrhost_lab::{Forwarder, Lab, LabSpec, MAX_VRS, Side};

use super::frames::Size;
use super::generator::Generator;
use super::sink::Sink;
use crate::fwd::bpf::{self, Alu, Insn, Link, Program};
use crate::fwd::daemon::Daemon;
use crate::fwd::dut::{Enabled, P0Napi, enable_p0};

/// A DUT profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Profile {
    /// vrhost over AF_XDP.
    VrhostAfxdp,
    /// vrhost over AF_PACKET.
    VrhostAfpacket,
    /// The kernel's native IP forwarder (one VR).
    Kernel,
    /// A namespace per VR on macvlan devices.
    KernelMacvlan,
    /// A namespace per VR on veth pairs and Linux bridges.
    KernelBridge,
    /// No DUT: p0 drops every frame (the generator's ceiling; the sink gets nothing).
    None,
}

impl Profile {
    /// The name on the command line and in results.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Profile::VrhostAfxdp => "vrhost-afxdp",
            Profile::VrhostAfpacket => "vrhost-afpacket",
            Profile::Kernel => "kernel",
            Profile::KernelMacvlan => "kernel-macvlan",
            Profile::KernelBridge => "kernel-bridge",
            Profile::None => "none",
        }
    }

    /// The lab forwarder the profile runs in.
    pub(crate) fn forwarder(self) -> Forwarder {
        match self {
            Profile::VrhostAfxdp | Profile::VrhostAfpacket | Profile::None => Forwarder::Vrhost,
            Profile::Kernel => Forwarder::KernelPlain,
            Profile::KernelMacvlan => Forwarder::Kernel,
            Profile::KernelBridge => Forwarder::KernelBridge,
        }
    }

    /// Whether the profile runs the vrhost daemon.
    pub(crate) fn is_vrhost(self) -> bool {
        matches!(self, Profile::VrhostAfxdp | Profile::VrhostAfpacket)
    }

    /// Check `vrs` for this profile before anything is built; the error says what to change.
    pub(crate) fn check_vrs(self, vrs: u32) -> Result<(), String> {
        if vrs == 0 || vrs > MAX_VRS {
            return Err(format!("--vrs {vrs}: must be 1 to {MAX_VRS}"));
        }
        if self == Profile::Kernel && vrs != 1 {
            return Err(format!(
                "--vrs {vrs}: the kernel profile (the native IP forwarder) holds exactly one VR; \
                 use kernel-macvlan or kernel-bridge for several"
            ));
        }
        Ok(())
    }
}

/// The cores a lab's trials use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Cores {
    /// The generator thread's core (and, inline after each burst, `p0`'s NAPI).
    pub(crate) generator: usize,
    /// vrhost's worker core.
    pub(crate) dut: usize,
}

impl Cores {
    /// Generator on the last core, the DUT on core 0.
    pub(crate) fn default_for_host() -> Cores {
        let n = std::thread::available_parallelism().map_or(1, |p| p.get());
        Cores {
            generator: n - 1,
            dut: 0,
        }
    }
}

/// A lab with a DUT profile running, the generator and the sink attached.
#[derive(Debug)]
pub(crate) struct LiveLab {
    // Field order is drop order: programs first, then the daemon, then `p0`'s program,
    // then the namespaces.
    pub(crate) generator: Generator,
    pub(crate) sink: Sink,
    daemon: Option<Daemon>,
    _p0: Option<Enabled>,
    _drop: Option<Link>,
    lab: Lab,
    profile: Profile,
    vrs: u32,
    cores: Cores,
}

impl LiveLab {
    /// Build lab `name` for `profile` with `vrs` VRs (one stream each) and frames of `size`
    /// bytes, start the DUT. `vrhost` is the daemon binary (vrhost profiles only).
    pub(crate) fn up(
        name: &str,
        profile: Profile,
        vrs: u32,
        size: Size,
        vrhost: Option<&Path>,
        cores: Cores,
    ) -> anyhow::Result<LiveLab> {
        profile.check_vrs(vrs).map_err(anyhow::Error::msg)?;
        let lab = Lab::up(
            &LabSpec::new(name)
                .vrs(vrs)
                .forwarder(profile.forwarder())
                .overlapping(false),
        )
        .with_context(|| format!("building lab {name}"))?;
        // From here on `lab` is deleted if anything fails (it drops).
        let sink = Sink::load(Some(lab.side(Side::B)), vrs).context("attaching the sink to b0")?;
        let generator =
            Generator::load(Some(lab.side(Side::A)), vrs, size).context("loading the generator")?;
        let mut p0 = None;
        let mut drop_prog = None;
        let mut daemon = None;
        match profile {
            Profile::Kernel | Profile::KernelMacvlan | Profile::KernelBridge => {
                p0 = Some(enable_p0(&lab, P0Napi::XdpPass)?);
            }
            Profile::None => {
                let prog = Program::load_xdp(
                    &[Insn::alu_imm(Alu::Mov, 0, bpf::XDP_DROP), Insn::exit()],
                    "vrb_live_drop",
                )?;
                drop_prog = Some(
                    lab.router()
                        .run(|| Link::attach_xdp(&prog, bpf::ifindex(Side::A.port())?, false))??,
                );
            }
            Profile::VrhostAfxdp | Profile::VrhostAfpacket => {
                let Some(bin) = vrhost else {
                    bail!("{} needs the vrhost binary", profile.name());
                };
                if profile == Profile::VrhostAfpacket {
                    p0 = Some(enable_p0(&lab, P0Napi::XdpPass)?);
                }
                let backend = if profile == Profile::VrhostAfxdp {
                    "afxdp"
                } else {
                    "afpacket"
                };
                daemon = Some(
                    Daemon::start(bin, &lab, backend, &[cores.dut], vrs)
                        .with_context(|| format!("starting vrhost ({backend})"))?,
                );
            }
        }
        Ok(LiveLab {
            generator,
            sink,
            daemon,
            _p0: p0,
            _drop: drop_prog,
            lab,
            profile,
            vrs,
            cores,
        })
    }

    /// The profile.
    pub(crate) fn profile(&self) -> Profile {
        self.profile
    }

    /// VRs (= streams).
    pub(crate) fn vrs(&self) -> u32 {
        self.vrs
    }

    /// The cores.
    pub(crate) fn cores(&self) -> Cores {
        self.cores
    }

    /// The lab.
    pub(crate) fn lab(&self) -> &Lab {
        &self.lab
    }

    /// The vrhost daemon's log, if one runs (for errors).
    pub(crate) fn daemon_log(&self) -> Option<String> {
        self.daemon.as_ref().map(Daemon::log_text)
    }
}
