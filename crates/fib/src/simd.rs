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
//! Two ways to move the data, picked per CPU vendor ([`gathers_fast`]):
//!
//! * **Gathers** (Intel; what Sapphire Rapids was measured with: 60 M lookups/s): the blob
//!   words come in with `vpgatherqq` (five per group of eight: skip header, bitmaps, the leaf or
//!   child word), the addresses that go on are packed with compress-stores straight to memory
//!   (`vpcompressd/q m, k, r`).
//! * **Loads** (every other vendor; measured on AMD Zen 4): the first four words of each lane's
//!   node come in with one 32-byte load per lane and are transposed into four vectors (skip
//!   header and bitmaps for both kinds of node; 8 loads and 12 shuffles), the leaf or child
//!   word with eight scalar loads, and the packing compresses in registers and stores whole
//!   vectors. On Zen 4 `vpcompressd/q` to memory is microcoded — 56 cycles each, against 2.8
//!   for the register form and a store — and a gather of eight words costs 10 cycles whatever
//!   its mask (`examples/simd_costs.rs` on this project's EPYC; `docs/perf.md`): with the
//!   Intel choices the AVX-512 step ran 22 M lookups/s, slower than the scalar one (29);
//!   packing in registers made it 48, the loads 62.
//!
//! The full-width stores of the second way write past the packed entries, into entries of
//! this group or earlier ones, all already read; its 32-byte loads read up to two words past
//! the end of a two-word node, which the arena keeps committed (`arena::READ_PAST`).

use core::arch::x86_64::*;

use crate::arena::{READ_PAST, Snapshot};
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

/// Does this CPU take the gather form of [`level`] (Intel), rather than the loads form?
///
/// Intel's AVX-512 CPUs have fast gathers and compress-stores to memory, and the step was
/// measured with them there; AMD's Zen 4 microcodes compress-stores to memory and its gathers
/// are slow (see the module docs), so every other vendor takes the loads form. Both forms are
/// checked against the scalar step in the tests, on any AVX-512 CPU. Cached after the first
/// call.
pub(crate) fn gathers_fast() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not known yet, 1: Intel, 2: another vendor.
    static VENDOR: AtomicU8 = AtomicU8::new(0);
    let v = VENDOR.load(Ordering::Relaxed);
    if v != 0 {
        return v == 1;
    }
    let id = __cpuid(0);
    // "GenuineIntel", in the order CPUID returns it.
    let intel = (id.ebx, id.edx, id.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e);
    VENDOR.store(if intel { 1 } else { 2 }, Ordering::Relaxed);
    intel
}

/// Advance the first `active` addresses of `st` by one node each; the ones that reach a leaf
/// write it to `res[idx]`, the others are packed to the front of `st`. Returns how many go on.
/// `GATHER`: the gather form, else the loads form (module docs).
///
/// # Safety
/// The CPU must have AVX-512 F, VL and VPOPCNTDQ ([`available`]). `st.refs[..active]` must be
/// nodes of `s` reached from its top level under an epoch guard held since `s` was loaded, and
/// `st.idx[..active]` below `BATCH`.
#[target_feature(enable = "avx512f,avx512vl,avx512vpopcntdq,popcnt,bmi1,bmi2")]
#[inline]
pub(crate) unsafe fn level<const GATHER: bool>(
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
        // written while reachable: see `arena`), exactly those the scalar step reads; the
        // loads form reads the same words (`gather_loads` with dead lanes at word 0) and
        // `rows4` up to two past a node's end (its own contract). The scatter writes
        // `res[idx]` with `idx < BATCH`.
        let kc = unsafe {
            let r = _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(
                k,
                st.refs.as_ptr().add(a) as *const i32,
            ));
            let o = _mm512_srli_epi64::<3>(r);
            let skip = _mm512_and_si512(_mm512_srli_epi64::<2>(r), one);
            let inner: __mmask8 = _mm512_test_epi64_mask(r, _mm512_set1_epi64(2));
            // Words 0 and 1 of the blob: the skip header of a path-compressed node, else its
            // bitmaps; words 2 and 3 are the bitmaps after a skip header.
            let (h0, h1, h2, h3) = if GATHER {
                let h0 = _mm512_mask_i64gather_epi64::<8>(zero, k, o, base);
                let h1 = _mm512_mask_i64gather_epi64::<8>(zero, k, _mm512_add_epi64(o, one), base);
                (h0, h1, zero, zero)
            } else {
                let [h0, h1, h2, h3] = rows4(s, &st.refs[a..active.min(a + 8)]);
                (h0, h1, h2, h3)
            };
            // Skip header: `sh` key bits that must equal `h0`, else the result is `h1`'s miss.
            let sh = _mm512_and_si512(_mm512_srli_epi64::<32>(h1), _mm512_sub_epi64(zero, skip));
            let win = _mm512_maskz_loadu_epi64(k, st.hi.as_ptr().add(a) as *const i64);
            let low = _mm512_maskz_loadu_epi64(k, st.lo.as_ptr().add(a) as *const i64);
            let got = _mm512_srlv_epi64(_mm512_srli_epi64::<1>(win), _mm512_sub_epi64(c63, sh));
            let hit: __mmask8 =
                _mm512_cmpeq_epi64_mask(skip, zero) | _mm512_cmpeq_epi64_mask(got, h0);
            // The node body.
            let ob = _mm512_add_epi64(o, _mm512_add_epi64(skip, skip));
            let (leafvec, w1) = if GATHER {
                (
                    _mm512_mask_i64gather_epi64::<8>(zero, k, ob, base),
                    _mm512_mask_i64gather_epi64::<8>(zero, k, _mm512_add_epi64(ob, one), base),
                )
            } else {
                let sk = _mm512_test_epi64_mask(skip, skip);
                (
                    _mm512_mask_blend_epi64(sk, h0, h2),
                    _mm512_mask_blend_epi64(sk, h1, h3),
                )
            };
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
            let w = if GATHER {
                _mm512_mask_i64gather_epi64::<8>(zero, k, wi, base)
            } else {
                gather_loads(s, _mm512_maskz_mov_epi64(k, wi))
            };
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
            pack::<GATHER>(st, next, kc, val32, nhi, nlo, id32);
            kc
        };
        let n = kc.count_ones() as usize;
        // Start loading the children found in this group. The loads form prefetches all eight
        // entries from `next` (past `n`: references of this group or leaf ids, harmless), not
        // a loop of `n`: its exit mispredicts (+8 % measured on Zen 4).
        if GATHER {
            for &r in &st.refs[next..next + n] {
                poptrie::prefetch(poptrie::node_addr(s, r));
            }
        } else {
            for &r in &st.refs[next..next + 8] {
                poptrie::prefetch(poptrie::node_addr(s, r));
            }
        }
        next += n;
        a += 8;
    }
    next
}

/// The first four words of the nodes `refs` (up to eight; missing lanes read the arena's
/// first words), transposed: word 0 of each lane, word 1, word 2, word 3.
///
/// # Safety
/// AVX-512 F. Each of `refs` must be a node of `s` reached as for [`level`]; every node has at
/// least two words, and the arena keeps [`READ_PAST`] words committed past its last blob.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
unsafe fn rows4(s: &Snapshot, refs: &[u32]) -> [__m512i; 4] {
    debug_assert!(refs.len() <= 8 && READ_PAST >= 2);
    let base = s.words.as_ptr() as *const u64;
    let row = |j: usize| {
        let o = refs.get(j).map_or(0, |&r| (r >> 3) as usize);
        debug_assert!(o + 4 <= s.words.len());
        // SAFETY: a node's first two words are its blob's, the next two at worst the words
        // after its end, committed (see above).
        unsafe { _mm256_loadu_si256(base.add(o) as *const __m256i) }
    };
    // [a0 b0 c0 d0 a1 b1 c1 d1] … for words a–d of rows 0–7.
    let z0 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(row(0)), row(1));
    let z1 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(row(2)), row(3));
    let z2 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(row(4)), row(5));
    let z3 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(row(6)), row(7));
    // [a0 a2 c0 c2 a1 a3 c1 c3], [b0 b2 d0 d2 b1 b3 d1 d3], and the same for rows 4–7.
    let u0 = _mm512_unpacklo_epi64(z0, z1);
    let u1 = _mm512_unpackhi_epi64(z0, z1);
    let u2 = _mm512_unpacklo_epi64(z2, z3);
    let u3 = _mm512_unpackhi_epi64(z2, z3);
    let ia = _mm512_set_epi64(13, 9, 12, 8, 5, 1, 4, 0);
    let ic = _mm512_set_epi64(15, 11, 14, 10, 7, 3, 6, 2);
    [
        _mm512_permutex2var_epi64(u0, ia, u2),
        _mm512_permutex2var_epi64(u1, ia, u3),
        _mm512_permutex2var_epi64(u0, ic, u2),
        _mm512_permutex2var_epi64(u1, ic, u3),
    ]
}

/// Word `idx[j]` of the arena for each lane, by eight scalar loads (on Zen 4 cheaper than a
/// gather: +3 % measured).
///
/// # Safety
/// AVX-512 F; every `idx[j]` a committed word of `s` (published, as for [`level`]).
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
unsafe fn gather_loads(s: &Snapshot, idx: __m512i) -> __m512i {
    let mut ix = [0u64; 8];
    // SAFETY: 64 bytes into an array of 64 bytes.
    unsafe { _mm512_storeu_si512(ix.as_mut_ptr() as *mut __m512i, idx) };
    // SAFETY: committed words (caller).
    let w = |j: usize| unsafe { s.word(ix[j] as usize) } as i64;
    let x0 = _mm_set_epi64x(w(1), w(0));
    let x1 = _mm_set_epi64x(w(3), w(2));
    let x2 = _mm_set_epi64x(w(5), w(4));
    let x3 = _mm_set_epi64x(w(7), w(6));
    let y0 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x0), x1);
    let y1 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x2), x3);
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y0), y1)
}

/// Store lanes `kc` of (reference, rest of the key, position) packed at `at` of `st`: with
/// compress-stores to memory (`GATHER`, Intel), else compressed in registers and stored whole
/// (entries up to `at + 8` overwritten).
///
/// # Safety
/// AVX-512 F and VL; `at + 8 <= BATCH`, and without `GATHER` none of entries `at..at + 8`
/// still unread.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
unsafe fn pack<const GATHER: bool>(
    st: &mut Lanes,
    at: usize,
    kc: __mmask8,
    refs: __m256i,
    hi: __m512i,
    lo: __m512i,
    idx: __m256i,
) {
    debug_assert!(at + 8 <= BATCH);
    // SAFETY: at most 8 entries from `at` of arrays of `BATCH` (caller).
    unsafe {
        if GATHER {
            _mm256_mask_compressstoreu_epi32(st.refs.as_mut_ptr().add(at) as *mut i32, kc, refs);
            _mm512_mask_compressstoreu_epi64(st.hi.as_mut_ptr().add(at) as *mut i64, kc, hi);
            _mm512_mask_compressstoreu_epi64(st.lo.as_mut_ptr().add(at) as *mut i64, kc, lo);
            _mm256_mask_compressstoreu_epi32(st.idx.as_mut_ptr().add(at) as *mut i32, kc, idx);
        } else {
            // Merge-masked into the source itself: the zero-masked form has a false dependency
            // on its destination register on Zen 4.
            _mm256_storeu_si256(
                st.refs.as_mut_ptr().add(at) as *mut __m256i,
                _mm256_mask_compress_epi32(refs, kc, refs),
            );
            _mm512_storeu_si512(
                st.hi.as_mut_ptr().add(at) as *mut __m512i,
                _mm512_mask_compress_epi64(hi, kc, hi),
            );
            _mm512_storeu_si512(
                st.lo.as_mut_ptr().add(at) as *mut __m512i,
                _mm512_mask_compress_epi64(lo, kc, lo),
            );
            _mm256_storeu_si256(
                st.idx.as_mut_ptr().add(at) as *mut __m256i,
                _mm256_mask_compress_epi32(idx, kc, idx),
            );
        }
    }
}
