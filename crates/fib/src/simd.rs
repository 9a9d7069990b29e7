//! One level of the path-compressed (IPv6) batch lookup, eight addresses per AVX-512 step.
//!
//! Why: an IPv6 lookup takes three or four node steps, and measured with everything cached the
//! scalar step ([`poptrie::step_win`](crate::poptrie)) is bound by instruction count (about 85
//! per step: skip check, two popcounts, byte offset arithmetic, a 128-bit key shift), not by
//! memory. The same arithmetic on eight lanes, with gathers for the blob words and
//! `vpopcntq` for the bitmaps, does a step in a fraction of the instructions.
//!
//! The lanes compute exactly what the scalar step computes (same blob layout, same
//! formulas); the addresses that go on are packed to the front of the state arrays, the
//! finished ones scatter their next-hop id to the result array. The scalar path stays for CPUs
//! without AVX-512 VPOPCNTDQ and is checked against this one in the tests.
//!
//! Packing is done two ways, picked per CPU vendor ([`compress_store_fast`]): compress-stores
//! straight to memory (`vpcompressd/q m, k, r`: what Sapphire Rapids was measured with), or
//! compress into a register and a plain full-width store. On AMD Zen 4 the memory form is
//! microcoded — 45–60 cycles each against 2–3 for the register form and the store, measured
//! on this project's EPYC — and with four of them per eight addresses and level it made the
//! AVX-512 step slower than the scalar one (22 against 29 M lookups/s); the register form
//! doubled it (`docs/perf.md`). The full-width store writes past the packed entries, into
//! entries of this group or earlier ones, all already read (see the SAFETY comment).

use core::arch::x86_64::*;

use crate::arena::Snapshot;
use crate::poptrie::{self, leaf_mask};
use crate::table::{BATCH, Lanes};

// The full-width stores of a group of eight stay inside the state arrays (see `level`).
const _: () = assert!(BATCH.is_multiple_of(8));

/// Does this CPU run [`level`]?
#[inline(always)]
pub(crate) fn available() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("avx512vpopcntdq")
}

/// Does this CPU compress-store to memory as fast as it compresses in a register?
///
/// Intel's do (the AVX-512 step was first written and measured on Sapphire Rapids with
/// `vpcompressd/q` to memory: 60 M IPv6 lookups/s); AMD's Zen 4 microcodes the memory form —
/// measured here 55 cycles per instruction against 3 for compress-in-register and a plain store
/// (`docs/perf.md`), four of them per eight addresses and level — so every other vendor takes
/// the register form. Cached after the first call.
pub(crate) fn compress_store_fast() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not known yet, 1: Intel, 2: another vendor.
    static VENDOR: AtomicU8 = AtomicU8::new(0);
    let v = VENDOR.load(Ordering::Relaxed);
    if v != 0 {
        return v == 1;
    }
    let id = __cpuid(0);
    let intel = (id.ebx, id.edx, id.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e); // "GenuineIntel"
    VENDOR.store(if intel { 1 } else { 2 }, Ordering::Relaxed);
    intel
}

/// Advance the first `active` addresses of `st` by one node each; the ones that reach a leaf
/// write it to `res[idx]`, the others are packed to the front of `st`. Returns how many go on.
///
/// # Safety
/// The CPU must have AVX-512 F, VL and VPOPCNTDQ ([`available`]). `st.refs[..active]` must be
/// nodes of `s` reached from its top level under an epoch guard held since `s` was loaded, and
/// `st.idx[..active]` below `BATCH`.
#[target_feature(enable = "avx512f,avx512vl,avx512vpopcntdq,popcnt,bmi1,bmi2")]
#[inline]
pub(crate) unsafe fn level<const MEM: bool>(
    s: &Snapshot,
    st: &mut Lanes,
    res: &mut [u32; BATCH],
    active: usize,
) -> usize {
    debug_assert!(active <= BATCH);
    let base = s.words.as_ptr() as *const i64;
    let zero = _mm512_setzero_si512();
    let one = _mm512_set1_epi64(1);
    let c6 = _mm512_set1_epi64(6);
    let c8 = _mm512_set1_epi64(8);
    let c16 = _mm512_set1_epi64(16);
    let c63 = _mm512_set1_epi64(63);
    let c64 = _mm512_set1_epi64(64);
    let all = _mm512_set1_epi64(-1);
    let lo32 = _mm512_set1_epi64(0xffff_ffff);
    let lw = _mm512_set1_epi64(i64::from(s.lw));
    let lmask = _mm512_set1_epi64(i64::from(leaf_mask(s.lw)));
    let mut next = 0usize;
    let mut a = 0usize;
    while a < active {
        let k: __mmask8 = if active - a >= 8 {
            0xff
        } else {
            (1u8 << (active - a)) - 1
        };
        // SAFETY: loads of the state arrays are masked to lanes `a..active` (in bounds);
        // compress-stores write `popcnt(kc)` entries from `next`, the register form's full
        // stores 8; `next <= a` (at most one entry kept per lane read) and `a` is a multiple
        // of 8 below `active <= BATCH` (a multiple of 8), so `next + 8 <= a + 8 <= BATCH`,
        // and every entry overwritten (below `a + 8`) was already loaded into registers.
        // Gathers are masked to live lanes and read words of published blobs (in bounds, never
        // written while reachable: see `arena`), exactly those the scalar step reads. The
        // scatter writes `res[idx]` with `idx < BATCH`.
        let kc = unsafe {
            let r = _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(
                k,
                st.refs.as_ptr().add(a) as *const i32,
            ));
            let o = _mm512_srli_epi64::<3>(r);
            let skip = _mm512_and_si512(_mm512_srli_epi64::<2>(r), one);
            let inner: __mmask8 = _mm512_test_epi64_mask(r, _mm512_set1_epi64(2));
            let h0 = _mm512_mask_i64gather_epi64::<8>(zero, k, o, base);
            let h1 = _mm512_mask_i64gather_epi64::<8>(zero, k, _mm512_add_epi64(o, one), base);
            // Skip header: `sh` key bits that must equal `h0`, else the result is `h1`'s miss.
            let sh = _mm512_and_si512(_mm512_srli_epi64::<32>(h1), _mm512_sub_epi64(zero, skip));
            let win = _mm512_maskz_loadu_epi64(k, st.hi.as_ptr().add(a) as *const i64);
            let low = _mm512_maskz_loadu_epi64(k, st.lo.as_ptr().add(a) as *const i64);
            let got = _mm512_srlv_epi64(_mm512_srli_epi64::<1>(win), _mm512_sub_epi64(c63, sh));
            let hit: __mmask8 =
                _mm512_cmpeq_epi64_mask(skip, zero) | _mm512_cmpeq_epi64_mask(got, h0);
            // The node body.
            let ob = _mm512_add_epi64(o, _mm512_add_epi64(skip, skip));
            let leafvec = _mm512_mask_i64gather_epi64::<8>(zero, k, ob, base);
            let w1 = _mm512_mask_i64gather_epi64::<8>(zero, k, _mm512_add_epi64(ob, one), base);
            let vector = _mm512_maskz_mov_epi64(inner, w1);
            let v = _mm512_srli_epi64::<58>(_mm512_sllv_epi64(win, sh));
            let m = _mm512_srlv_epi64(all, _mm512_sub_epi64(c63, v));
            let kc: __mmask8 = _mm512_test_epi64_mask(vector, _mm512_sllv_epi64(one, v));
            let ci = _mm512_sub_epi64(_mm512_popcnt_epi64(_mm512_and_si512(vector, m)), one);
            let li = _mm512_sub_epi64(_mm512_popcnt_epi64(_mm512_and_si512(leafvec, m)), one);
            let refs_bytes =
                _mm512_add_epi64(c8, _mm512_slli_epi64::<2>(_mm512_popcnt_epi64(vector)));
            let leaf0 = _mm512_add_epi64(c8, _mm512_maskz_mov_epi64(inner, refs_bytes));
            let lbyte = _mm512_add_epi64(leaf0, _mm512_sllv_epi64(li, lw));
            let cbyte = _mm512_add_epi64(c16, _mm512_slli_epi64::<2>(ci));
            let byte = _mm512_mask_blend_epi64(kc, lbyte, cbyte);
            let wi = _mm512_add_epi64(ob, _mm512_srli_epi64::<3>(byte));
            let w = _mm512_mask_i64gather_epi64::<8>(zero, k, wi, base);
            let bits = _mm512_slli_epi64::<3>(_mm512_and_si512(byte, _mm512_set1_epi64(7)));
            let val = _mm512_and_si512(
                _mm512_srlv_epi64(w, bits),
                _mm512_mask_blend_epi64(kc, lmask, lo32),
            );
            let val = _mm512_mask_blend_epi64(hit, _mm512_and_si512(h1, lo32), val);
            let kc = kc & hit & k;
            let val32 = _mm512_cvtepi64_epi32(val);
            let id32 = _mm256_maskz_loadu_epi32(k, st.idx.as_ptr().add(a) as *const i32);
            _mm256_mask_i32scatter_epi32::<4>(res.as_mut_ptr() as *mut i32, k & !kc, id32, val32);
            // The addresses that go on: rest of the key shifted by the bits consumed.
            let used = _mm512_add_epi64(sh, c6);
            let nhi = _mm512_or_si512(
                _mm512_sllv_epi64(win, used),
                _mm512_srlv_epi64(low, _mm512_sub_epi64(c64, used)),
            );
            let nlo = _mm512_sllv_epi64(low, used);
            if MEM {
                _mm256_mask_compressstoreu_epi32(
                    st.refs.as_mut_ptr().add(next) as *mut i32,
                    kc,
                    val32,
                );
                _mm512_mask_compressstoreu_epi64(st.hi.as_mut_ptr().add(next) as *mut i64, kc, nhi);
                _mm512_mask_compressstoreu_epi64(st.lo.as_mut_ptr().add(next) as *mut i64, kc, nlo);
                _mm256_mask_compressstoreu_epi32(
                    st.idx.as_mut_ptr().add(next) as *mut i32,
                    kc,
                    id32,
                );
            } else {
                // Compressed in registers (merge-masked into the source itself: the zero-masked
                // form has a false dependency on its destination on Zen 4), stored whole.
                _mm256_storeu_si256(
                    st.refs.as_mut_ptr().add(next) as *mut __m256i,
                    _mm256_mask_compress_epi32(val32, kc, val32),
                );
                _mm512_storeu_si512(
                    st.hi.as_mut_ptr().add(next) as *mut __m512i,
                    _mm512_mask_compress_epi64(nhi, kc, nhi),
                );
                _mm512_storeu_si512(
                    st.lo.as_mut_ptr().add(next) as *mut __m512i,
                    _mm512_mask_compress_epi64(nlo, kc, nlo),
                );
                _mm256_storeu_si256(
                    st.idx.as_mut_ptr().add(next) as *mut __m256i,
                    _mm256_mask_compress_epi32(id32, kc, id32),
                );
            }
            kc
        };
        let n = kc.count_ones() as usize;
        // Start loading the children found in this group.
        for &r in &st.refs[next..next + n] {
            poptrie::prefetch(poptrie::node_addr(s, r));
        }
        next += n;
        a += 8;
    }
    next
}
