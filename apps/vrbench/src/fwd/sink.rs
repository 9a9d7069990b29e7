//! The sink: a BPF program at `b0`'s tc ingress (side-B namespace) that counts every frame
//! per VR and drops it. `b0` is the far end of the router's side-B port `p1`, so what it
//! counts is what the router forwarded.
//!
//! Why a BPF program, and why per VR: counting must cost far less than forwarding (a few
//! instructions per frame) and must not let the frames go further — past `b0` they would
//! reach the side-B hosts (macvlans on `b0`), whose stacks would answer each one with an
//! ICMP error. Frames forwarded to VR `i`'s side-B host carry its host MAC
//! `02:76:0b:ii:ii:02` as destination, so the slot is read from bytes 3–4 of the
//! destination MAC: per-VR counts show whether the router shares its capacity evenly.
//! Anything else (not IPv4, or a MAC outside the lab's VRs) lands in one extra "other"
//! slot, reported separately ("stray": vrhost's VR control planes send a few IPv6
//! packets of their own).
//!
//! Why tc ingress and not XDP (the first version used XDP on `b0`): an XDP program on a
//! veth enables its NAPI, and then every skb the peer sends is converted to an XDP buffer
//! first — which *copies* the frame into a new page whenever the skb has less than 256
//! bytes of headroom or is cloned (`veth_convert_skb_to_xdp_buff`, `skb_pp_cow_data` in the
//! profile). Skbs the kernel forwarder made from XDP frames have that headroom; the ones
//! vrhost's AF_XDP (copy mode) and AF_PACKET transmits build do not. The sink's cost
//! then depended on the DUT, and it is paid on the DUT's CPU (the NAPI poll runs where
//! `p1` transmitted). At tc ingress (a tcx link, Linux ≥ 6.6) every DUT's skb is taken as it
//! is: `veth_xmit` → `netif_rx` to the backlog of the transmitting CPU → tc → drop, the
//! same work for every profile, still on the CPU that transmitted on `p1`.
//!
//! The `no-router` profile puts the same program as XDP on `p0`, where frames arrive as XDP
//! frames and XDP is what enables NAPI anyway.
//!
//! Counters are per-CPU array entries summed at read time; read them only after the
//! generator stopped and a drain interval passed.

use vrhost_lab::{Netns, Side};

use super::bpf::{self, Alu, Cond, Insn, Link, Map, Program, Size};

/// The attached sink.
#[derive(Debug)]
pub(crate) struct Sink {
    counts: Map,
    vrs: u32,
    cpus: usize,
    _link: Link,
    _prog: Program,
}

/// Counts read from the sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Per VR.
    pub(crate) per_vr: Vec<u64>,
    /// Frames not for any VR's side-B host.
    pub(crate) other: u64,
}

impl Counts {
    /// All VRs' frames.
    pub(crate) fn total(&self) -> u64 {
        self.per_vr.iter().sum()
    }

    /// `self - earlier`, entry by entry.
    pub(crate) fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            per_vr: self
                .per_vr
                .iter()
                .zip(&earlier.per_vr)
                .map(|(a, b)| a - b)
                .collect(),
            other: self.other - earlier.other,
        }
    }
}

/// Where the sink's program hooks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    /// tc ingress (tcx link): sees every skb as the sender made it.
    TcIngress,
    /// XDP, driver mode.
    Xdp,
}

impl Hook {
    /// Offsets of `data` and `data_end` in the program's context (`struct xdp_md` or
    /// `struct __sk_buff`), and the "drop" verdict.
    fn layout(self) -> (i16, i16, i32) {
        match self {
            Hook::Xdp => (0, 4, bpf::XDP_DROP),
            Hook::TcIngress => (76, 80, bpf::TC_ACT_SHOT),
        }
    }
}

/// Slot = dst MAC bytes 3..5 if IPv4 and < vrs, else `vrs`. At tc ingress the data pointer
/// is at the Ethernet header, as in XDP (the kernel pushes the MAC header back for tc).
fn program(counts: &Map, vrs: u32, hook: Hook) -> Vec<Insn> {
    use Size::{B, Dw, H, W};
    const OTHER: usize = 13;
    const COUNT: usize = 14;
    const DROP: usize = 24;
    let mut p = Vec::with_capacity(26);
    let to = |p: &Vec<Insn>, target: usize| target as i16 - p.len() as i16 - 1;
    let (data, data_end, drop) = hook.layout();
    p.push(Insn::load(W, 2, 1, data)); // r2 = data
    p.push(Insn::load(W, 3, 1, data_end)); // r3 = data_end
    p.push(Insn::alu_reg(Alu::Mov, 4, 2));
    p.push(Insn::alu_imm(Alu::Add, 4, 14));
    p.push(Insn::jump_reg(Cond::Gt, 4, 3, to(&p, OTHER)));
    p.push(Insn::load(H, 5, 2, 12)); // ethertype, as a little-endian load
    p.push(Insn::jump_imm(
        Cond::Ne,
        5,
        i32::from(u16::from_le_bytes(0x0800u16.to_be_bytes())),
        to(&p, OTHER),
    ));
    p.push(Insn::load(B, 5, 2, 3)); // r5 = mac[3] << 8 | mac[4]
    p.push(Insn::alu_imm(Alu::Lsh, 5, 8));
    p.push(Insn::load(B, 4, 2, 4));
    p.push(Insn::alu_reg(Alu::Or, 5, 4));
    p.push(Insn::jump_imm(Cond::Ge, 5, vrs as i32, to(&p, OTHER)));
    p.push(Insn::jump_imm(Cond::Always, 0, 0, to(&p, COUNT)));
    assert_eq!(p.len(), OTHER);
    p.push(Insn::alu_imm(Alu::Mov, 5, vrs as i32));
    assert_eq!(p.len(), COUNT);
    p.push(Insn::store(W, 10, -4, 5)); // key = slot
    p.extend(Insn::load_map(1, counts));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM));
    p.push(Insn::jump_imm(Cond::Eq, 0, 0, to(&p, DROP)));
    p.push(Insn::load(Dw, 1, 0, 0));
    p.push(Insn::alu_imm(Alu::Add, 1, 1));
    p.push(Insn::store(Dw, 0, 0, 1));
    assert_eq!(p.len(), DROP);
    p.push(Insn::alu_imm(Alu::Mov, 0, drop));
    p.push(Insn::exit());
    p
}

impl Sink {
    /// Load the sink for VRs `0..vrs` and attach it to `b0`'s tc ingress in `side_b`
    /// (`<P>-b`).
    pub(crate) fn attach(side_b: &Netns, vrs: u32) -> anyhow::Result<Sink> {
        Sink::attach_to(side_b, Side::B.side_ifname(), vrs, Hook::TcIngress)
    }

    /// The same program on another interface or hook: XDP on the router's `p0` counts what
    /// the generator delivers with no router at all (frames for VR `i`'s VIF MAC
    /// `02:76:0a:ii:ii:01` land in slot `i` the same way).
    pub(crate) fn attach_to(
        ns: &Netns,
        ifname: &str,
        vrs: u32,
        hook: Hook,
    ) -> anyhow::Result<Sink> {
        let counts = Map::array(bpf::MAP_PERCPU_ARRAY, 8, vrs + 1, "vrbench_sink")?;
        let insns = program(&counts, vrs, hook);
        let prog = match hook {
            Hook::Xdp => Program::load_xdp(&insns, "vrbench_sink")?,
            Hook::TcIngress => Program::load_tcx_ingress(&insns, "vrbench_sink")?,
        };
        let link = ns.run(|| {
            let ifindex = bpf::ifindex(ifname)?;
            match hook {
                Hook::Xdp => Link::attach_xdp(&prog, ifindex, false),
                Hook::TcIngress => Link::attach_tcx_ingress(&prog, ifindex),
            }
        })??;
        Ok(Sink {
            counts,
            vrs,
            cpus: bpf::possible_cpus()?,
            _link: link,
            _prog: prog,
        })
    }

    /// The counters now (cumulative since attach).
    pub(crate) fn read(&self) -> anyhow::Result<Counts> {
        let per_vr = (0..self.vrs)
            .map(|k| self.counts.percpu_sum_u64(k, self.cpus))
            .collect::<Result<Vec<_>, _>>()?;
        debug_assert_eq!(self.counts.entries(), self.vrs + 1);
        Ok(Counts {
            per_vr,
            other: self.counts.percpu_sum_u64(self.vrs, self.cpus)?,
        })
    }
}
