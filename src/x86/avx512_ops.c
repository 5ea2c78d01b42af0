/*
 * avx512_ops.c - the AVX-512 tier's row-wise float ops (compiled natively
 * and emulated, isa512.h; registered in avx512_init.c).
 *
 * SwiGLU g = silu(g) u on 16 lanes, lane for lane the arithmetic of the
 * AVX2 kernel (avx2_ops.c, swiglu8): e = exp(-|g|) by exp_neg512, sigmoid
 * as 1 / (1 + e) for g >= 0 and e / (1 + e) below (g's sign bit picks),
 * then (g * sigmoid) * u. So the same bits as the AVX2 tier (test_ops
 * compares them), in half the instructions: the prefill's gate/up pass
 * applies it to every 32 x 32 block of its tiles, decode to the FFN row.
 */
#include "isa512.h"

#include <stdint.h>

#include "exp512.h"
#include "kernels_x86.h"

static inline __attribute__((always_inline)) __m512 swiglu16(__m512 g, __m512 u) {
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    const __m512 e = exp_neg512(_mm512_or_ps(g, sign)); /* exp(-|g|) */
    const __mmask16 neg = _mm512_test_epi32_mask(_mm512_castps_si512(g), _mm512_castps_si512(sign));
    const __m512 num = _mm512_mask_blend_ps(neg, one, e); /* g's sign bit picks e */
    return _mm512_mul_ps(_mm512_mul_ps(g, _mm512_div_ps(num, _mm512_add_ps(one, e))), u);
}

/* GeGLU: the AVX2 kernel's geglu8, lane for lane */
static inline __attribute__((always_inline)) __m512 geglu16(__m512 g, __m512 u) {
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), _mm512_set1_ps(0.044715f));
    const __m512 z = _mm512_mul_ps(_mm512_fmadd_ps(g3, g, g), _mm512_set1_ps(1.5957691216057308f));
    const __m512 e = exp_neg512(_mm512_or_ps(z, sign)); /* exp(-|z|) */
    const __mmask16 neg = _mm512_test_epi32_mask(_mm512_castps_si512(z), _mm512_castps_si512(sign));
    const __m512 num = _mm512_mask_blend_ps(neg, one, e); /* z's sign bit picks e */
    return _mm512_mul_ps(_mm512_mul_ps(g, _mm512_div_ps(num, _mm512_add_ps(one, e))), u);
}

/* f(g, u) over n elements, the tail through the same lanes, the rest zero */
#define GLU_ROWS16(f)                                                                       \
    do {                                                                                    \
        int64_t i = 0;                                                                      \
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(g + i, f(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i))); \
        if (i < n) {                                                                        \
            float tg[16] = {0}, tu[16] = {0};                                               \
            for (int64_t j = i; j < n; j++) tg[j - i] = g[j], tu[j - i] = u[j];             \
            _mm512_storeu_ps(tg, f(_mm512_loadu_ps(tg), _mm512_loadu_ps(tu)));              \
            for (int64_t j = i; j < n; j++) g[j] = tg[j - i];                               \
        }                                                                                   \
    } while (0)

void VX512(vx_swiglu)(float *g, const float *u, int64_t n) { GLU_ROWS16(swiglu16); }
void VX512(vx_geglu)(float *g, const float *u, int64_t n) { GLU_ROWS16(geglu16); }
