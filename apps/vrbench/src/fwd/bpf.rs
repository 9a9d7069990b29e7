//! The bpf(2) helpers vrbench assembles its programs with (the live-frames generators, the
//! sinks, `p0`'s pass program): `vrhost_io::bpf`, re-exported, plus [`pass_program`].
//!
//! Why not a copy of its own any more: this file was one (with the ALU operations,
//! `to_be`, atomics, 64-bit immediates, map reads and context-less test runs the generator
//! and sink need); those now live in `vrhost_io::bpf` beside what vrhost's steering program
//! uses, so an encoding is fixed, and its test against LLVM's assembler kept, in one place.
//! The module stays so that `crate::fwd::bpf::…` paths keep reading as they did.

use std::io;

pub(crate) use vrhost_io::bpf::*;

/// The trivial `return XDP_PASS` program.
pub(crate) fn pass_program() -> io::Result<Program> {
    Ok(Program::load_xdp(
        &[Insn::alu_imm(Alu::Mov, 0, XDP_PASS), Insn::exit()],
        "vrbench_pass",
    )?)
}
