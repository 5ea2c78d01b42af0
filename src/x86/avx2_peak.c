/* avx2_peak.c - peak-throughput loops for the limits microbenchmark
 * (independent accumulator chains so the FMA/int8 ports stay busy). */
#include <immintrin.h>
#include <stdint.h>

#include "kernels_x86.h"

double vx_peak_fma_avx2(int64_t iters) {
    /* 10 named accumulators: enough independent chains to cover FMA latency
     * on two ports, and kept in registers (an array may spill) */
    const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2);
    __m256 a3 = _mm256_set1_ps(3), a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5);
    __m256 a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7), a8 = _mm256_set1_ps(8);
    __m256 a9 = _mm256_set1_ps(9);
    for (int64_t it = 0; it < iters; it++) {
        a0 = _mm256_fmadd_ps(a0, m, b); a1 = _mm256_fmadd_ps(a1, m, b);
        a2 = _mm256_fmadd_ps(a2, m, b); a3 = _mm256_fmadd_ps(a3, m, b);
        a4 = _mm256_fmadd_ps(a4, m, b); a5 = _mm256_fmadd_ps(a5, m, b);
        a6 = _mm256_fmadd_ps(a6, m, b); a7 = _mm256_fmadd_ps(a7, m, b);
        a8 = _mm256_fmadd_ps(a8, m, b); a9 = _mm256_fmadd_ps(a9, m, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
    return (double)_mm256_cvtss_f32(s);
}

double vx_peak_int8_avx2(int64_t iters) {
    /* _mm256_maddubs_epi16 (32 u8 x s8 products, pairs summed to int16),
     * the instruction every AVX2 int8 kernel is bound by: 8 independent
     * chains over 8 distinct operand pairs. The operands are opaque to the
     * compiler every iteration (with one shared product it hoisted or
     * merged the multiplies: the figure this replaced was 8x too high). */
    __m256i x0 = _mm256_set1_epi8(3), x1 = _mm256_set1_epi8(4), x2 = _mm256_set1_epi8(5), x3 = _mm256_set1_epi8(6);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    for (int64_t it = 0; it < iters; it++) {
        __asm__ volatile("" : "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3));
        c0 = _mm256_add_epi16(c0, _mm256_maddubs_epi16(x0, x1));
        c1 = _mm256_add_epi16(c1, _mm256_maddubs_epi16(x1, x2));
        c2 = _mm256_add_epi16(c2, _mm256_maddubs_epi16(x2, x3));
        c3 = _mm256_add_epi16(c3, _mm256_maddubs_epi16(x3, x0));
        c4 = _mm256_add_epi16(c4, _mm256_maddubs_epi16(x0, x2));
        c5 = _mm256_add_epi16(c5, _mm256_maddubs_epi16(x1, x3));
        c6 = _mm256_add_epi16(c6, _mm256_maddubs_epi16(x2, x0));
        c7 = _mm256_add_epi16(c7, _mm256_maddubs_epi16(x3, x1));
    }
    __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
                                 _mm256_add_epi16(_mm256_add_epi16(c4, c5), _mm256_add_epi16(c6, c7)));
    return (double)_mm256_extract_epi16(s, 0);
}
