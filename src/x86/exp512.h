/*
 * exp512.h - helpers of the AVX-512 tier's float kernels (avx512_attn.c,
 * avx512_ops.c; include after isa512.h, natively or emulated): the upper
 * half of a zmm, the integer value of an integral float vector, and
 * exp(v) for v <= 0 and the soft cap on 16 lanes, operation for operation
 * AVX2's exp_neg and cap8 (avx2_ops.c), so that every lane gets the AVX2
 * kernels' bits.
 */
#ifndef VX_EXP512_H
#define VX_EXP512_H

static inline __attribute__((always_inline)) __m256 upper_half(__m512 x) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
}

/* The integer value of k (integral already): SIMDe 0.7.4 has no 512-bit
 * cvtps_epi32 (a lanewise conversion: its 256-bit halves are exact). */
static inline __attribute__((always_inline)) __m512i int_of(__m512 k) {
#ifdef VX_EMU
    const __m256i lo = _mm256_cvtps_epi32(_mm512_castps512_ps256(k));
    const __m256i hi = _mm256_cvtps_epi32(upper_half(k));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
#else
    return _mm512_cvtps_epi32(k);
#endif
}

/* exp(v) for v <= 0: AVX2's exp_neg (avx2_ops.c), operation for
 * operation, so every lane gets the same bits. */
static inline __attribute__((always_inline)) __m512 exp_neg512(__m512 v) {
    const __m512 lo = _mm512_set1_ps(-87.0f);
    const __mmask16 small = _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ);
    v = _mm512_max_ps(v, lo);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), v);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(int_of(k), _mm512_set1_epi32(127)), 23);
    const __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~small, y);
}

/* Gemma 2's soft cap, out tanh(in x): AVX2's cap8 (avx2_ops.c), operation
 * for operation. */
static inline __attribute__((always_inline)) __m512 cap512(__m512 x, __m512 in, __m512 out) {
    const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f);
    const __m512 y = _mm512_mul_ps(x, in);
    const __m512 e = exp_neg512(_mm512_mul_ps(_mm512_or_ps(y, sign), _mm512_set1_ps(2.0f)));
    const __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
    return _mm512_mul_ps(out, _mm512_or_ps(t, _mm512_and_ps(sign, y)));
}

#endif
