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
//! Calls go through `libc::syscall(SYS_bpf, …)` with `#[repr(C)]` prefixes of
//! `union bpf_attr`: the kernel zero-fills whatever follows a shorter attribute.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::AttachMode;

// bpf(2) commands (include/uapi/linux/bpf.h, `enum bpf_cmd`).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
#[cfg(test)]
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: `BPF_XDP`.
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;

// `XDP_FLAGS_*` from include/uapi/linux/if_link.h.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// One eBPF instruction (`struct bpf_insn`): opcode, dst (low nibble) and src (high nibble)
/// registers, offset, immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | dst,
            off,
            imm,
        }
    }

    #[cfg(test)]
    fn to_bytes(self) -> [u8; 8] {
        let mut b = [0; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

// Opcode parts (Documentation/bpf/standardization/instruction-set.rst).
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_W: u8 = 0x00;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_K: u8 = 0x00;
const BPF_MOV: u8 = 0xb0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

/// The steering program, with `map_fd` loaded into r1.
fn program(map_fd: RawFd) -> [Insn; 6] {
    [
        // r2 = *(u32 *)(r1 + offsetof(struct xdp_md, rx_queue_index))
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = &xsks (two slots: the 64-bit immediate's halves; the loader swaps the fd
        // for the map's address)
        Insn::new(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        Insn::new(0, 0, 0, 0, 0),
        // r3 = XDP_PASS
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // return r0
        Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    ]
}

fn sys_bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` for
    // `cmd`; the kernel reads (and for some commands writes) at most its size. Pointers
    // inside it point to buffers that outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A as *mut libc::c_void,
            size_of::<A>() as libc::c_long,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: bpf(2) returned a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    let b = s.as_bytes();
    let k = b.len().min(15);
    n[..k].copy_from_slice(&b[..k]);
    n
}

/// The XSKMAP: rx queue index → AF_XDP socket.
#[derive(Debug)]
pub(crate) struct XskMap {
    fd: OwnedFd,
}

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

impl XskMap {
    /// A map with room for queues `0..entries`.
    pub(crate) fn create(entries: u32) -> io::Result<XskMap> {
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: entries,
            map_flags: 0,
            inner_map_fd: 0,
            numa_node: 0,
            map_name: name16("vrhost_xsks"),
        };
        sys_bpf(BPF_MAP_CREATE, &mut attr).map(|fd| XskMap { fd: owned(fd) })
    }

    /// Steer rx queue `queue` to the socket `sock`.
    pub(crate) fn set(&self, queue: u32, sock: RawFd) -> io::Result<()> {
        let key = queue;
        let value = sock as u32;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0, // BPF_ANY
        };
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }

    /// Stop steering rx queue `queue` anywhere (its frames pass to the stack).
    pub(crate) fn delete(&self, queue: u32) -> io::Result<()> {
        let key = queue;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: 0,
            flags: 0,
        };
        sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
    }
}

#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// Why the program did not load.
#[derive(Debug)]
pub(crate) struct LoadError {
    pub(crate) source: io::Error,
    /// The verifier's log (empty if the kernel wrote none).
    pub(crate) log: String,
}

/// The loaded steering program.
#[derive(Debug)]
pub(crate) struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Load the program for `map`. On failure, load again with the verifier log on, so
    /// the error says why (the first try runs without: a log costs verifier time).
    pub(crate) fn load(map: &XskMap) -> Result<Program, LoadError> {
        let insns = program(map.fd.as_raw_fd());
        let license = c"Apache-2.0";
        let attempt = |log: &mut [u8]| {
            let mut attr = ProgLoadAttr {
                prog_type: BPF_PROG_TYPE_XDP,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level: u32::from(!log.is_empty()),
                log_size: log.len() as u32,
                log_buf: if log.is_empty() {
                    0
                } else {
                    log.as_mut_ptr() as u64
                },
                kern_version: 0,
                prog_flags: 0,
                prog_name: name16("vrhost_xsk"),
                prog_ifindex: 0,
                expected_attach_type: BPF_XDP,
            };
            sys_bpf(BPF_PROG_LOAD, &mut attr).map(|fd| Program { fd: owned(fd) })
        };
        match attempt(&mut []) {
            Ok(p) => Ok(p),
            Err(first) => {
                let mut log = vec![0u8; 1 << 16];
                let source = match attempt(&mut log) {
                    // Loaded the second time: take it, the failure was transient.
                    Ok(p) => return Ok(p),
                    Err(e) => e,
                };
                let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                let log = String::from_utf8_lossy(&log[..end]).trim_end().to_string();
                let source = if source.raw_os_error() == first.raw_os_error() {
                    first
                } else {
                    source
                };
                Err(LoadError { source, log })
            }
        }
    }

    /// Run the program once on `frame` as if it arrived on rx queue `queue` of interface
    /// `ifindex`; returns the XDP action (for tests).
    #[cfg(test)]
    pub(crate) fn test_run(&self, frame: &[u8], ifindex: u32, queue: u32) -> io::Result<u32> {
        #[repr(C)]
        struct TestRunAttr {
            prog_fd: u32,
            retval: u32,
            data_size_in: u32,
            data_size_out: u32,
            data_in: u64,
            data_out: u64,
            repeat: u32,
            duration: u32,
            ctx_size_in: u32,
            ctx_size_out: u32,
            ctx_in: u64,
            ctx_out: u64,
            flags: u32,
            cpu: u32,
            batch_size: u32,
            _pad: u32,
        }
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex (the first three must be 0 on input).
        let ctx: [u32; 6] = [0, 0, 0, ifindex, queue, 0];
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            retval: 0,
            data_size_in: frame.len() as u32,
            data_size_out: 0,
            data_in: frame.as_ptr() as u64,
            data_out: 0,
            repeat: 1,
            duration: 0,
            ctx_size_in: size_of_val(&ctx) as u32,
            ctx_size_out: 0,
            ctx_in: ctx.as_ptr() as u64,
            ctx_out: 0,
            flags: 0,
            cpu: 0,
            batch_size: 0,
            _pad: 0,
        };
        sys_bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        Ok(attr.retval)
    }
}

#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// The program attached to an interface; detached when this drops (or the process dies).
#[derive(Debug)]
pub(crate) struct Link {
    _fd: OwnedFd,
}

/// How long attaching keeps retrying an interface that answers `EBUSY`.
const BUSY_WAIT: Duration = Duration::from_millis(500);

impl Link {
    /// Attach `prog` to interface `ifindex` in `mode`.
    ///
    /// `EBUSY` (a program is attached) is retried for a moment: the previous link of
    /// this process may still be referenced by a child that another thread forked and that
    /// has not reached `exec` yet (the child's copy of the descriptor table holds it, close
    /// on exec or not). Past that, the interface is really taken and the error stands.
    pub(crate) fn attach(prog: &Program, ifindex: u32, mode: AttachMode) -> io::Result<Link> {
        let start = Instant::now();
        loop {
            match Link::attach_once(prog, ifindex, mode) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < BUSY_WAIT => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                r => return r,
            }
        }
    }

    fn attach_once(prog: &Program, ifindex: u32, mode: AttachMode) -> io::Result<Link> {
        let mut attr = LinkCreateAttr {
            prog_fd: prog.fd.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: match mode {
                AttachMode::Native => XDP_FLAGS_DRV_MODE,
                AttachMode::Generic => XDP_FLAGS_SKB_MODE,
            },
        };
        sys_bpf(BPF_LINK_CREATE, &mut attr).map(|fd| Link { _fd: owned(fd) })
    }
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
        assert_eq!(size_of::<Insn>(), 8);
    }

    #[test]
    fn attr_prefixes_match_the_kernel_layout() {
        assert_eq!(size_of::<MapCreateAttr>(), 44);
        assert_eq!(size_of::<MapElemAttr>(), 32);
        assert_eq!(core::mem::offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(core::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(
            core::mem::offset_of!(ProgLoadAttr, expected_attach_type),
            68
        );
        assert_eq!(size_of::<LinkCreateAttr>(), 16);
    }

    /// With no socket in the map, every queue's traffic passes to the kernel stack.
    #[test]
    fn empty_map_passes_frames_to_the_stack() {
        if !vrhost_lab::require_root("XDP program test run") {
            return;
        }
        let map = XskMap::create(4).unwrap();
        let prog = Program::load(&map).unwrap_or_else(|e| panic!("{}: {}", e.source, e.log));
        let frame = [0u8; 64];
        // ifindex 1 is the loopback of the test's namespace; queue 0 exists on it.
        assert_eq!(prog.test_run(&frame, 1, 0).unwrap(), XDP_PASS as u32);
        assert_eq!(prog.test_run(&frame, 0, 0).unwrap(), XDP_PASS as u32);
    }
}
