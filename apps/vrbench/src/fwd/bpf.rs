//! The bpf(2) helpers the generator and the sink use: [`vrhost_io::bpf`], shared with
//! vrhost's AF_XDP steering program (one assembler, one set of map, program and link
//! calls), plus the trivial `XDP_PASS` program vrbench attaches to `p0`.

pub(crate) use vrhost_io::bpf::{
    Alu, Cond, FUNC_MAP_LOOKUP_ELEM, Insn, Link, MAP_ARRAY, MAP_PERCPU_ARRAY, Map, Program, Size,
    TC_ACT_SHOT, XDP_DROP, XDP_PASS, XDP_TX, ifindex, possible_cpus,
};

/// The trivial `return XDP_PASS` program.
pub(crate) fn pass_program() -> std::io::Result<Program> {
    Ok(Program::load_xdp(
        &[Insn::alu_imm(Alu::Mov, 0, XDP_PASS), Insn::exit()],
        "vrbench_pass",
    )?)
}
