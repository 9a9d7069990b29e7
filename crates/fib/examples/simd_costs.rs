//! What the AVX-512 step's instructions cost on this CPU, in core cycles per instruction
//! (throughput, independent iterations, data in L1): the measurements behind the choice of
//! `simd::gathers_fast` — compress-stores to memory and gathers on Intel, plain loads and
//! compression in registers elsewhere (`docs/perf.md`, FIB on Zen 4).
//!
//! `cargo run --release -p vrhost-fib --example simd_costs` (x86-64 with AVX-512 F/VL only).
//! Core cycles come from a chain of dependent adds timed alongside (one cycle each); every
//! figure is the best of 25 short runs, so a busy machine inflates none of them for long.

#[cfg(target_arch = "x86_64")]
mod costs {
    use core::arch::x86_64::*;
    use std::hint::black_box;
    use std::time::Instant;

    const N: usize = 300_000;

    /// Nanoseconds for `N` dependent adds: the core clock.
    fn adds() -> f64 {
        let t = Instant::now();
        let mut x = 0u64;
        for _ in 0..N {
            // SAFETY: register arithmetic only.
            unsafe {
                core::arch::asm!("add {0}, 1", "add {0}, 1", "add {0}, 1", "add {0}, 1",
                    inout(reg) x, options(nomem, nostack));
            }
        }
        black_box(x);
        t.elapsed().as_secs_f64() * 1e9 / (4 * N) as f64
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    fn compress_to_memory(buf: &mut [i64; 48]) {
        let mut v = _mm512_set1_epi64(3);
        for i in 0..N {
            let k = (i as u8).wrapping_mul(37);
            // SAFETY: at most 8 words from `i & 31`, inside the 48.
            unsafe { _mm512_mask_compressstoreu_epi64(buf.as_mut_ptr().add(i & 31), k, v) };
            v = _mm512_add_epi64(v, _mm512_set1_epi64(1));
        }
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    fn compress_in_register(buf: &mut [i64; 48]) {
        let mut v = _mm512_set1_epi64(3);
        for i in 0..N {
            let k = (i as u8).wrapping_mul(37);
            let c = _mm512_mask_compress_epi64(v, k, v);
            // SAFETY: 8 words from `i & 31`, inside the 48.
            unsafe { _mm512_storeu_si512(buf.as_mut_ptr().add(i & 31) as *mut __m512i, c) };
            v = _mm512_add_epi64(v, _mm512_set1_epi64(1));
        }
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    fn gather(tab: &[i64; 1024], mask: u8) {
        let mut acc = _mm512_setzero_si512();
        let mut idx = _mm512_set_epi64(1, 9, 17, 33, 65, 129, 257, 513);
        let m = _mm512_set1_epi64(1023);
        for _ in 0..N {
            // SAFETY: indices masked to the table.
            let g = unsafe {
                _mm512_mask_i64gather_epi64::<8>(_mm512_setzero_si512(), mask, idx, tab.as_ptr())
            };
            acc = _mm512_add_epi64(acc, g);
            idx = _mm512_and_si512(_mm512_add_epi64(idx, _mm512_set1_epi64(7)), m);
        }
        black_box(acc);
    }

    /// The same eight words as `gather`, by scalar loads put together as `simd` does.
    #[target_feature(enable = "avx512f,avx512vl")]
    fn scalar_loads(tab: &[i64; 1024]) {
        let mut acc = _mm512_setzero_si512();
        let mut idx = _mm512_set_epi64(1, 9, 17, 33, 65, 129, 257, 513);
        let m = _mm512_set1_epi64(1023);
        for _ in 0..N {
            let mut ix = [0i64; 8];
            // SAFETY: 64 bytes into 64 bytes.
            unsafe { _mm512_storeu_si512(ix.as_mut_ptr() as *mut __m512i, idx) };
            let w = |j: usize| tab[ix[j] as usize];
            let x0 = _mm_set_epi64x(w(1), w(0));
            let x1 = _mm_set_epi64x(w(3), w(2));
            let x2 = _mm_set_epi64x(w(5), w(4));
            let x3 = _mm_set_epi64x(w(7), w(6));
            let y0 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x0), x1);
            let y1 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x2), x3);
            let g = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y0), y1);
            acc = _mm512_add_epi64(acc, g);
            idx = _mm512_and_si512(_mm512_add_epi64(idx, _mm512_set1_epi64(7)), m);
        }
        black_box(acc);
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    fn scatter(buf: &mut [i64; 48]) {
        let mut v = _mm256_set1_epi32(3);
        let idx = _mm256_set_epi32(1, 9, 17, 33, 65, 80, 3, 7);
        for i in 0..N {
            let k = (i as u8).wrapping_mul(37);
            // SAFETY: dword indices below 96, inside the 48 words.
            unsafe { _mm256_mask_i32scatter_epi32::<4>(buf.as_mut_ptr() as *mut i32, k, idx, v) };
            v = _mm256_add_epi32(v, _mm256_set1_epi32(1));
        }
    }

    pub(crate) fn run() {
        if !(std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl"))
        {
            println!("this CPU has no AVX-512 F/VL");
            return;
        }
        let mut buf = [0i64; 48];
        let tab: [i64; 1024] = core::array::from_fn(|i| i as i64);
        let names = [
            "vpcompressq to memory",
            "vpcompressq to a register + store",
            "vpgatherqq, 8 lanes",
            "vpgatherqq, 1 lane (mask 0x01)",
            "8 scalar loads into a zmm",
            "vpscatterdd, 8 lanes of 32 bits",
        ];
        let mut best = [f64::MAX; 6];
        let mut clock = f64::MAX;
        for _ in 0..25 {
            clock = clock.min(adds());
            for (i, b) in best.iter_mut().enumerate() {
                let t = Instant::now();
                // SAFETY: the CPU has AVX-512 F and VL (checked above).
                unsafe {
                    match i {
                        0 => compress_to_memory(black_box(&mut buf)),
                        1 => compress_in_register(black_box(&mut buf)),
                        2 => gather(&tab, 0xff),
                        3 => gather(&tab, 0x01),
                        4 => scalar_loads(&tab),
                        _ => scatter(black_box(&mut buf)),
                    }
                }
                *b = b.min(t.elapsed().as_secs_f64() * 1e9 / N as f64);
            }
        }
        println!("core clock {:.2} GHz (from dependent adds)", 1.0 / clock);
        for (name, ns) in names.iter().zip(best) {
            println!("  {name:<36} {:>6.1} cycles", ns / clock);
        }
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    costs::run();
    #[cfg(not(target_arch = "x86_64"))]
    println!("x86-64 only");
}
