//! The generator: XDP "live frames" on `a0` in the side-A namespace — the fastest way to put
//! 64-byte frames on a veth from user space, and the method of `xdp-trafficgen`.
//!
//! How: `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` runs an XDP program `repeat` times
//! on kernel-made copies of one frame, as if each had arrived on `a0`; every frame the
//! program returns `XDP_TX` for is sent back out of `a0` with `ndo_xdp_xmit`, which for a veth
//! puts it straight into the *peer's* (`p0`'s) rx ring and schedules `p0`'s NAPI — no skb,
//! no qdisc, no socket. One CPU makes ~7.5 Mpps this way here, against ~1 Mpps for an
//! AF_PACKET sender, so the generator is not what limits a forwarder doing 1–3 Mpps.
//!
//! The program (assembled in [`program`]) keeps per CPU a frame counter and the next VR, and
//! rewrites the first 48 bytes of each frame (all headers) from that VR's template in an
//! array map, so frames rotate over the lab's VRs one by one (exactly even spread) and each
//! frame's headers are rewritten every time. The rewrite is needed for correctness, not
//! only for spreading: the kernel recycles live-frame pages without re-copying the frame
//! once a page has been initialised, and a forwarder that rewrote MACs and TTL in place
//! (the kernel does, on the same page) would otherwise get its own output back.
//!
//! Where it runs: one thread per generator core, pinned, in the side-A namespace (the
//! `ingress_ifindex` of the run is resolved there). veth picks the peer's rx queue by the
//! sending CPU (`smp_processor_id() % queues`), so with 2-queue veths the thread on CPU `c`
//! feeds `p0` queue `c`. What `p0` needs to accept these frames is in `dut.rs`.
//!
//! Counting: the program's own per-CPU counter, read after the threads stopped, is the
//! number of frames offered (handed to `a0`'s `ndo_xdp_xmit`); veth drops the ones that find
//! `p0`'s 256-entry ring full (counted by veth, not here), which is the router's loss.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vrhost_lab::{Netns, Side};

use super::bpf::{self, Alu, Cond, Insn, Link, Map, Program, Size};
use super::frames::{self, TEMPLATE_LEN};

/// The loaded generator for one lab: program, state and templates.
#[derive(Debug)]
pub(crate) struct Generator {
    prog: Program,
    config: Map,
    state: Map,
    frame: [u8; frames::FRAME_LEN],
    lab_vrs: u32,
    cpus: usize,
    _keep: Link,
}

/// What one run of the generator did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offered {
    /// Frames the program sent (returned `XDP_TX` for).
    pub(crate) frames: u64,
    /// From the first thread's start to the last one's end.
    pub(crate) elapsed: Duration,
}

/// The program. Maps: `config` [1] {u32 vrs}, per-CPU `state` [1] {u64 frames, u32
/// next_vr}, `templates` [lab VRs] of 48 bytes.
fn program(config: &Map, state: &Map, templates: &Map) -> Vec<Insn> {
    use Size::{Dw, W};
    const ABORT: usize = 52;
    let mut p = Vec::with_capacity(54);
    let to = |p: &Vec<Insn>| ABORT as i16 - p.len() as i16 - 1;
    p.push(Insn::alu_reg(Alu::Mov, 6, 1)); // r6 = ctx
    p.push(Insn::store_imm(W, 10, -4, 0)); // key = 0
    p.extend(Insn::load_map(1, config));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)); // r0 = &config
    p.push(Insn::jump_imm(Cond::Eq, 0, 0, to(&p)));
    p.push(Insn::load(W, 8, 0, 0)); // r8 = vrs
    p.extend(Insn::load_map(1, state));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)); // r0 = &state (this CPU's)
    p.push(Insn::jump_imm(Cond::Eq, 0, 0, to(&p)));
    p.push(Insn::load(Dw, 1, 0, 0)); // frames += 1
    p.push(Insn::alu_imm(Alu::Add, 1, 1));
    p.push(Insn::store(Dw, 0, 0, 1));
    p.push(Insn::load(W, 7, 0, 8)); // r7 = vr = next_vr < vrs ? next_vr : 0
    p.push(Insn::jump_reg(Cond::Lt, 7, 8, 1));
    p.push(Insn::alu_imm(Alu::Mov, 7, 0));
    p.push(Insn::alu_reg(Alu::Mov, 1, 7)); // next_vr = vr + 1 < vrs ? vr + 1 : 0
    p.push(Insn::alu_imm(Alu::Add, 1, 1));
    p.push(Insn::jump_reg(Cond::Lt, 1, 8, 1));
    p.push(Insn::alu_imm(Alu::Mov, 1, 0));
    p.push(Insn::store(W, 0, 8, 1));
    p.push(Insn::store(W, 10, -4, 7)); // key = vr
    p.extend(Insn::load_map(1, templates));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)); // r0 = &templates[vr]
    p.push(Insn::jump_imm(Cond::Eq, 0, 0, to(&p)));
    p.push(Insn::load(W, 2, 6, 0)); // r2 = data
    p.push(Insn::load(W, 3, 6, 4)); // r3 = data_end
    p.push(Insn::alu_reg(Alu::Mov, 4, 2));
    p.push(Insn::alu_imm(Alu::Add, 4, TEMPLATE_LEN as i32));
    p.push(Insn::jump_reg(Cond::Gt, 4, 3, to(&p)));
    for w in 0..(TEMPLATE_LEN / 8) as i16 {
        p.push(Insn::load(Dw, 1, 0, 8 * w));
        p.push(Insn::store(Dw, 2, 8 * w, 1));
    }
    p.push(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_TX));
    p.push(Insn::exit());
    assert_eq!(p.len(), ABORT, "jump targets out of date");
    p.push(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_DROP));
    p.push(Insn::exit());
    p
}

/// The spare veth pair in the side-A namespace that holds the generator program attached,
/// so that the kernel's XDP dispatcher keeps it (see [`Generator::load`]).
const KEEP_IF: (&str, &str) = ("vrbgen0", "vrbgen1");

impl Generator {
    /// Load the generator for a lab whose VRs are `0..lab_vrs` (`overlapping` addressing),
    /// in the lab's side-A namespace `side_a`; it sends to VR 0 only until [`Self::set_vrs`].
    ///
    /// Besides loading, this attaches the program (driver mode) to a spare veth made for it
    /// in `side_a`, on which nothing ever arrives. Why: a test run with `repeat > 1` puts
    /// the program into the kernel's XDP dispatcher for its duration and takes it out
    /// after (`bpf_prog_change_xdp`); each change rewrites the dispatcher's code and waits
    /// for an RCU grace period — tens of milliseconds on a busy host, during which no frame
    /// is sent and the DUT idles, which made the first version of this generator crawl at
    /// 20 kpps. A program attached to an interface stays in the dispatcher, and then a
    /// test run only takes a reference.
    pub(crate) fn load(
        side_a: &Netns,
        lab_vrs: u32,
        overlapping: bool,
    ) -> anyhow::Result<Generator> {
        if lab_vrs == 0 {
            bail!("the generator needs at least one VR");
        }
        let config = Map::array(bpf::MAP_ARRAY, 8, 1, "vrbench_gen_cf")?;
        let state = Map::array(bpf::MAP_PERCPU_ARRAY, 16, 1, "vrbench_gen_st")?;
        let templates = Map::array(
            bpf::MAP_ARRAY,
            TEMPLATE_LEN as u32,
            lab_vrs,
            "vrbench_gen_tp",
        )?;
        for vr in 0..lab_vrs {
            templates.set(vr, &frames::frame(vr, overlapping)[..TEMPLATE_LEN])?;
        }
        let prog = Program::load_xdp(&program(&config, &state, &templates), "vrbench_gen")?;
        side_a.ip(&[
            "link", "add", KEEP_IF.0, "type", "veth", "peer", "name", KEEP_IF.1,
        ])?;
        let keep = side_a.run(|| Link::attach_xdp(&prog, bpf::ifindex(KEEP_IF.0)?, false))??;
        let g = Generator {
            prog,
            config,
            state,
            frame: frames::frame(0, overlapping),
            lab_vrs,
            cpus: bpf::possible_cpus()?,
            _keep: keep,
        };
        g.set_vrs(1)?;
        Ok(g)
    }

    /// Spread frames over VRs `0..vrs` from now on.
    pub(crate) fn set_vrs(&self, vrs: u32) -> anyhow::Result<()> {
        if vrs == 0 || vrs > self.lab_vrs {
            bail!("{vrs} VRs asked of a generator for {} VRs", self.lab_vrs);
        }
        let mut v = [0u8; 8];
        v[..4].copy_from_slice(&vrs.to_ne_bytes());
        self.config.set(0, &v)?;
        Ok(())
    }

    fn sent(&self) -> anyhow::Result<u64> {
        Ok(self.state.percpu_sum_u64(0, self.cpus)?)
    }

    /// Send for `seconds` from one pinned thread per core in `cores`, inside `side_a` (the
    /// lab's `<P>-a`), out of `a0`, with `batch` frames per flush. Stops early if `stop`
    /// is set.
    pub(crate) fn run(
        &self,
        side_a: &Netns,
        cores: &[usize],
        seconds: f64,
        batch: u32,
        stop: &AtomicBool,
    ) -> anyhow::Result<Offered> {
        let before = self.sent()?;
        let duration = Duration::from_secs_f64(seconds);
        let spans = std::thread::scope(|s| {
            let handles: Vec<_> = cores
                .iter()
                .map(|&core| s.spawn(move || self.thread(side_a, core, duration, batch, stop)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect::<anyhow::Result<Vec<(Instant, Instant)>>>()
        })?;
        let first = spans.iter().map(|s| s.0).min().expect("at least one core");
        let last = spans.iter().map(|s| s.1).max().expect("at least one core");
        Ok(Offered {
            frames: self.sent()? - before,
            elapsed: last - first,
        })
    }

    fn thread(
        &self,
        side_a: &Netns,
        core: usize,
        duration: Duration,
        batch: u32,
        stop: &AtomicBool,
    ) -> anyhow::Result<(Instant, Instant)> {
        side_a.enter_current_thread()?;
        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            bail!("cannot pin the generator thread to core {core}");
        }
        let ifindex = bpf::ifindex(Side::A.side_ifname())?;
        // Calls of about 50 ms: short enough to stop on time, long enough that the syscall
        // costs nothing. The first call measures the rate.
        let mut repeat: u32 = 16_384;
        let start = Instant::now();
        let deadline = start + duration;
        loop {
            let t = Instant::now();
            match self.prog.run_live(&self.frame, ifindex, 0, repeat, batch) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e).context("BPF_PROG_RUN (live frames) on a0"),
            }
            let now = Instant::now();
            if now >= deadline || stop.load(Ordering::Relaxed) {
                return Ok((start, now));
            }
            let per_sec = f64::from(repeat) / (now - t).as_secs_f64().max(1e-6);
            let left = (deadline - now).as_secs_f64();
            repeat = (per_sec * left.min(0.05)).clamp(256.0, 4_194_304.0) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_loads_and_counts_nothing_yet() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("generator program load") {
            return;
        }
        let ns = Netns::new("vrbgen").unwrap();
        let g = Generator::load(&ns, 3, false).unwrap();
        assert_eq!(g.sent().unwrap(), 0);
        g.set_vrs(3).unwrap();
        assert!(g.set_vrs(4).is_err());
        assert_eq!(program(&g.config, &g.state, &g.state).len(), 54);
    }
}
