//! The steering XDP program, its XSKMAP and the link that attaches it, through bpf(2).
//!
//! The program is six instructions, the equivalent of
//!
//! ```c
//! struct { __uint(type, BPF_MAP_TYPE_XSKMAP); __type(key, __u32); __type(value, __u32); } xsks;
//! SEC("xdp") int steer(struct xdp_md *ctx)
//! {
//!         return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//!
//! assembled here rather than compiled: vrhost then needs no clang, no libbpf and no object
//! file at run time, and the map's fd goes straight into the `BPF_LD_IMM64` instruction
//! (`BPF_PSEUDO_MAP_FD`) instead of through ELF relocations. The `XDP_PASS` in the flags
//! is what the helper returns when the queue has no socket in the map, so traffic on
//! queues vrhost does not serve still reaches the kernel stack.
//!
//! The program is attached with `BPF_LINK_CREATE`, not the netlink `IFLA_XDP` attribute:
//! a link belongs to its file descriptor, so when vrhost exits or is killed the kernel
//! detaches the program by itself, and a link cannot be replaced by another process by
//! accident (the interface answers `EBUSY`). Nothing stale blocks the interface afterwards.
//!
//! The bpf(2) calls themselves are [`crate::bpf`]'s, shared with vrbench's generator and
//! sink.

use std::io;
use std::os::fd::RawFd;

use crate::bpf::{self, Alu, Insn, Link, LoadError, Map, Program, Size};

use super::AttachMode;

/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The steering program, with the map `map_fd` loaded into r1.
fn program(map_fd: RawFd) -> [Insn; 6] {
    let [map_lo, map_hi] = Insn::load_map_fd(1, map_fd);
    [
        // r2 = *(u32 *)(r1 + offsetof(struct xdp_md, rx_queue_index))
        Insn::load(Size::W, 2, 1, XDP_MD_RX_QUEUE_INDEX),
        // r1 = &xsks (two slots: the 64-bit immediate's halves; the loader swaps the fd
        // for the map's address)
        map_lo,
        map_hi,
        // r3 = XDP_PASS
        Insn::alu_imm(Alu::Mov, 3, bpf::XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        Insn::call(bpf::FUNC_REDIRECT_MAP),
        // return r0
        Insn::exit(),
    ]
}

/// The XSKMAP: rx queue index → AF_XDP socket.
#[derive(Debug)]
pub(crate) struct XskMap {
    map: Map,
}

impl XskMap {
    /// A map with room for queues `0..entries`.
    pub(crate) fn create(entries: u32) -> io::Result<XskMap> {
        Map::create(bpf::MAP_XSKMAP, 4, entries, "vrhost_xsks").map(|map| XskMap { map })
    }

    /// Steer rx queue `queue` to the socket `sock`.
    pub(crate) fn set(&self, queue: u32, sock: RawFd) -> io::Result<()> {
        self.map.set(queue, &(sock as u32).to_ne_bytes())
    }

    /// Stop steering rx queue `queue` anywhere (its frames pass to the stack).
    pub(crate) fn delete(&self, queue: u32) -> io::Result<()> {
        self.map.delete(queue)
    }
}

/// Load the steering program for `map`; a refusal carries the verifier's log.
pub(crate) fn load(map: &XskMap) -> Result<Program, LoadError> {
    Program::load_xdp(&program(map.map.raw_fd()), "vrhost_xsk")
}

/// Load the quickpath program (`crate::quickpath`) for `map`: it forwards established flows
/// itself and steers the rest as [`load`]'s program does.
pub(crate) fn load_quickpath(
    map: &XskMap,
    qp: &crate::quickpath::Quickpath,
) -> Result<Program, LoadError> {
    Program::load_xdp(&qp.program(&map.map), "vrhost_qp")
}

/// Attach the steering program to interface `ifindex` in `mode` (retrying `EBUSY` for a
/// moment; see [`Link::attach_xdp`]).
pub(crate) fn attach(prog: &Program, ifindex: u32, mode: AttachMode) -> io::Result<Link> {
    Link::attach_xdp(prog, ifindex, mode == AttachMode::Generic)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden bytes from LLVM's BPF assembler (`llvm-mc -triple bpfel -show-encoding`, LLVM
    /// 14) for the same instructions written as text (`r2 = *(u32 *)(r1 + 16)`,
    /// `r1 = 7 ll`, `r3 = 2`, `call 51`, `exit`); the one change is the map load's source
    /// register, set to `BPF_PSEUDO_MAP_FD` (1) as libbpf does when it resolves a map
    /// relocation to fd 7.
    #[test]
    fn program_encodes_as_llvm_assembles_it() {
        let want: [[u8; 8]; 6] = [
            [0x61, 0x12, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = *(u32 *)(r1 + 0x10)
            [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00], // r1 = map fd 7 ll
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // r3 = 0x2
            [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00], // call 0x33
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
        ];
        let got: Vec<[u8; 8]> = program(7).iter().map(|i| i.to_bytes()).collect();
        assert_eq!(got, want);
    }

    /// With no socket in the map, every queue's traffic passes to the kernel stack.
    #[test]
    fn empty_map_passes_frames_to_the_stack() {
        if !vrhost_lab::require_root("XDP program test run") {
            return;
        }
        let map = XskMap::create(4).unwrap();
        let prog = load(&map).unwrap_or_else(|e| panic!("{e}"));
        let frame = [0u8; 64];
        // ifindex 1 is the loopback of the test's namespace; queue 0 exists on it.
        assert_eq!(prog.test_run(&frame, 1, 0).unwrap(), bpf::XDP_PASS as u32);
        assert_eq!(prog.test_run(&frame, 0, 0).unwrap(), bpf::XDP_PASS as u32);
    }
}
