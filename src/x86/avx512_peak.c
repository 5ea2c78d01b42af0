/* avx512_peak.c - peak-throughput loops of the AVX-512 tier for the limits
 * microbenchmark (machine.c; compiled natively and emulated, isa512.h; the
 * emulated figures mean nothing). 10 independent chains: two ports x
 * latency 5 (vpdpbusd) or 4 (FMA). */
#include "isa512.h"

#include <stdint.h>

#include "kernels_x86.h"

/* keeps the operands opaque to the compiler every iteration (native only:
 * the emulated 64-byte vectors live in memory) */
#ifdef VX_EMU
#define OPAQUE(a, b)
#else
#define OPAQUE(a, b) __asm__ volatile("" : "+v"(a), "+v"(b))
#endif

double VX512(vx_peak_fma)(int64_t iters) { /* 10 x 16 lanes x 2 flops per iteration */
    __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3),
           a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7),
           a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9);
    for (int64_t it = 0; it < iters; it++) {
        OPAQUE(m, b);
        a0 = _mm512_fmadd_ps(a0, m, b); a1 = _mm512_fmadd_ps(a1, m, b);
        a2 = _mm512_fmadd_ps(a2, m, b); a3 = _mm512_fmadd_ps(a3, m, b);
        a4 = _mm512_fmadd_ps(a4, m, b); a5 = _mm512_fmadd_ps(a5, m, b);
        a6 = _mm512_fmadd_ps(a6, m, b); a7 = _mm512_fmadd_ps(a7, m, b);
        a8 = _mm512_fmadd_ps(a8, m, b); a9 = _mm512_fmadd_ps(a9, m, b);
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                                 _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                                   _mm512_add_ps(a8, a9));
    return (double)_mm_cvtss_f32(_mm512_castps512_ps128(s));
}

double VX512(vx_peak_int8)(int64_t iters) { /* 10 vpdpbusd x 64 u8 x s8 multiply-adds per iteration */
    __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(5);
    /* distinct starting values: identical chains would be merged */
    __m512i c0 = _mm512_set1_epi32(0), c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2),
            c3 = _mm512_set1_epi32(3), c4 = _mm512_set1_epi32(4), c5 = _mm512_set1_epi32(5),
            c6 = _mm512_set1_epi32(6), c7 = _mm512_set1_epi32(7), c8 = _mm512_set1_epi32(8),
            c9 = _mm512_set1_epi32(9);
    for (int64_t it = 0; it < iters; it++) {
        OPAQUE(x, y);
        c0 = _mm512_dpbusd_epi32(c0, x, y); c1 = _mm512_dpbusd_epi32(c1, y, x);
        c2 = _mm512_dpbusd_epi32(c2, x, y); c3 = _mm512_dpbusd_epi32(c3, y, x);
        c4 = _mm512_dpbusd_epi32(c4, x, y); c5 = _mm512_dpbusd_epi32(c5, y, x);
        c6 = _mm512_dpbusd_epi32(c6, x, y); c7 = _mm512_dpbusd_epi32(c7, y, x);
        c8 = _mm512_dpbusd_epi32(c8, x, y); c9 = _mm512_dpbusd_epi32(c9, y, x);
    }
    const __m512i s = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                         _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
        _mm512_add_epi32(c8, c9));
    return (double)_mm_cvtsi128_si32(_mm512_castsi512_si128(s));
}
