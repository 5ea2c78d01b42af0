/*
 * avx2_quant.c - AVX2 kernels for the 32-element block types and the float
 * weight types (compiled with -mavx2 -mfma -mf16c -mbmi2):
 *   - activation quantizers Q8_0 and Q8_1, byte-identical to the reference
 *     (quant_legacy.c), since they run once per token row;
 *   - dot products Q4_0, Q5_0, Q8_0, IQ4_NL x Q8_0 and Q4_1, Q5_1 x Q8_1,
 *     as vec_dot (one row, the reference signature) and as gemv (nrows rows
 *     against one activation row, several weight streams interleaved);
 *   - F16 and BF16 weights against f32 activations.
 *
 * Integer sums inside a block equal the reference's exactly (every 16-bit
 * intermediate is bounded below; see the comments at each kernel); only
 * the float accumulation across blocks differs from the reference, which
 * sums in double. Activation codes must lie in [-127, 127], which the
 * quantizers guarantee: _mm256_maddubs_epi16 saturates its pair sums, and
 * -128 in y is the one value that could reach the saturation limit.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"

/* ================================================ activation quantizers */

/* Round half away from zero (roundf) of v, |v| <= 127: adding the float
 * just below 0.5 with v's sign and truncating is exact for |v| < 2^23 (the
 * sum only reaches the next integer when v + 0.5 does, the tie included:
 * k - 0.5 + (0.5 - 2^-25) rounds up to k). */
AINLINE __m256i round_away_epi32(__m256 v) {
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 half = _mm256_or_ps(sign, _mm256_set1_ps(0.49999997f));
    return _mm256_cvttps_epi32(_mm256_add_ps(v, half));
}

/* round_q8 of the reference: NaN -> 0, clamp to [-127, 127], roundf. */
AINLINE __m256i q8_code(__m256 x, __m256 id) {
    __m256 v = _mm256_mul_ps(x, id);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    v = _mm256_max_ps(v, _mm256_set1_ps(-127.0f));
    v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
    return round_away_epi32(v);
}

/* Four vectors of 8 int32 codes (elements 0..31 in order) to 32 int8. */
AINLINE __m256i pack_codes(__m256i a, __m256i b, __m256i c, __m256i d) {
    /* packs work per 128-bit lane: the bytes come out as dwords of
     * elements {0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31} */
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Largest |x| of 32 floats. max_ps(a, b) is a > b ? a : b, so with |x| as
 * the first operand NaNs never win: the reference's "if (|x| > amax)". */
AINLINE float absmax32(const float *x) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs), m);
    return hmax_ps(m);
}

void vx_quantize_row_q8_0_avx2(const float *src, void *dst, int64_t n) {
    vx_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / VX_QK8_0; i++, src += VX_QK8_0) {
        const float d = absmax32(src) / 127.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[i].d = to_f16(d);
        const __m256i q = pack_codes(q8_code(_mm256_loadu_ps(src), id), q8_code(_mm256_loadu_ps(src + 8), id),
                                     q8_code(_mm256_loadu_ps(src + 16), id),
                                     q8_code(_mm256_loadu_ps(src + 24), id));
        store256(y[i].qs, q);
    }
}

void vx_quantize_row_q8_1_avx2(const float *src, void *dst, int64_t n) {
    vx_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / VX_QK8_1; i++, src += VX_QK8_1) {
        const float d = absmax32(src) / 127.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        const __m256i a = q8_code(_mm256_loadu_ps(src), id), b = q8_code(_mm256_loadu_ps(src + 8), id);
        const __m256i c = q8_code(_mm256_loadu_ps(src + 16), id), e = q8_code(_mm256_loadu_ps(src + 24), id);
        store256(y[i].qs, pack_codes(a, b, c, e));
        const int32_t sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, e)));
        y[i].d = to_f16(d);
        y[i].s = to_f16((float)sum * d);
    }
}

/* ====================================================== 32-block dots */
/*
 * Each *_rows function computes R dot products (R = 1..4, a constant after
 * inlining) of rows w, w + stride, ... against one activation row. Per
 * block: 32 codes to bytes, _mm256_maddubs_epi16 (unsigned x signed byte
 * products, adjacent pairs summed to int16), pairs to int32, then one FMA
 * with the block's scale product. Signed weight codes use either an offset
 * (q - 8 as q plus a per-block correction on the activation side, shared
 * by all R rows) or the abs/sign trick (|x| * (y with x's sign)).
 */

/* Q4_0: x = d (q - 8). p = sum q y - 8 sum y per pair: the first term is at
 * most 2*15*128, the second 2*8*128 in magnitude, so int16 is exact. */
AINLINE void q4_0_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_0 *y = vy;
    const vx_block_q4_0 *x[4];
    __m256 acc[4];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(w, stride, r);
        acc[r] = _mm256_setzero_ps();
    }
    const size_t pf = prefetch_dist(R, stride);
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t i = 0; i < n / VX_QK4_0; i++) {
        const __m256i yq = load256(y[i].qs);
        const __m256i y8 = _mm256_maddubs_epi16(eight, yq);
        const float dy = f16(y[i].d);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(&x[r][i], pf, sizeof x[r][i]);
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles32(x[r][i].qs), yq), y8);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[r][i].d) * dy),
                                     _mm256_cvtepi32_ps(pairs_to_i32(p)), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum_ps(acc[r]);
}

/* Q4_1: x = d q + m with q in 0..15 (unsigned: maddubs takes it as is);
 * the m term is m * s per block, s = dy * sum(y) from the Q8_1 block. */
AINLINE void q4_1_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_1 *y = vy;
    const vx_block_q4_1 *x[4];
    __m256 acc[4];
    float accm[4];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(w, stride, r);
        acc[r] = _mm256_setzero_ps();
        accm[r] = 0.0f;
    }
    const size_t pf = prefetch_dist(R, stride);
    for (int64_t i = 0; i < n / VX_QK4_1; i++) {
        const __m256i yq = load256(y[i].qs);
        const float dy = f16(y[i].d), sy = f16(y[i].s);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(&x[r][i], pf, sizeof x[r][i]);
            const __m256i p = _mm256_maddubs_epi16(nibbles32(x[r][i].qs), yq);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[r][i].d) * dy),
                                     _mm256_cvtepi32_ps(pairs_to_i32(p)), acc[r]);
            accm[r] += f16(x[r][i].m) * sy;
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum_ps(acc[r]) + accm[r];
}

/* Q5_0: x = d (q - 16), q = nibble | bit << 4 in 0..31. As Q4_0 with a
 * correction of 16 sum y: pair terms at most 2*31*128 and 2*16*128. */
AINLINE void q5_0_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_0 *y = vy;
    const vx_block_q5_0 *x[4];
    __m256 acc[4];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(w, stride, r);
        acc[r] = _mm256_setzero_ps();
    }
    const size_t pf = prefetch_dist(R, stride);
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (int64_t i = 0; i < n / VX_QK5_0; i++) {
        const __m256i yq = load256(y[i].qs);
        const __m256i y16 = _mm256_maddubs_epi16(sixteen, yq);
        const float dy = f16(y[i].d);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(&x[r][i], pf, sizeof x[r][i]);
            const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(x[r][i].qh)), sixteen);
            const __m256i q = _mm256_or_si256(nibbles32(x[r][i].qs), hi);
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yq), y16);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[r][i].d) * dy),
                                     _mm256_cvtepi32_ps(pairs_to_i32(p)), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum_ps(acc[r]);
}

/* Q5_1: x = d q + m, q in 0..31 unsigned; m term as Q4_1. */
AINLINE void q5_1_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_1 *y = vy;
    const vx_block_q5_1 *x[4];
    __m256 acc[4];
    float accm[4];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(w, stride, r);
        acc[r] = _mm256_setzero_ps();
        accm[r] = 0.0f;
    }
    const size_t pf = prefetch_dist(R, stride);
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (int64_t i = 0; i < n / VX_QK5_1; i++) {
        const __m256i yq = load256(y[i].qs);
        const float dy = f16(y[i].d), sy = f16(y[i].s);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(&x[r][i], pf, sizeof x[r][i]);
            const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(x[r][i].qh)), sixteen);
            const __m256i q = _mm256_or_si256(nibbles32(x[r][i].qs), hi);
            const __m256i p = _mm256_maddubs_epi16(q, yq);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[r][i].d) * dy),
                                     _mm256_cvtepi32_ps(pairs_to_i32(p)), acc[r]);
            accm[r] += f16(x[r][i].m) * sy;
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum_ps(acc[r]) + accm[r];
}

/* Signed x signed bytes: |x| (unsigned, up to 128 for x = -128) times y
 * with x's sign; with |y| <= 127 a pair is at most 2*128*127 < 2^15. */
AINLINE __m256i dot_i8_pairs(__m256i xq, __m256i yq) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(xq), _mm256_sign_epi8(yq, xq));
}

AINLINE void q8_0_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_0 *y = vy;
    const vx_block_q8_0 *x[4];
    __m256 acc[4];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(w, stride, r);
        acc[r] = _mm256_setzero_ps();
    }
    const size_t pf = prefetch_dist(R, stride);
    for (int64_t i = 0; i < n / VX_QK8_0; i++) {
        const __m256i yq = load256(y[i].qs);
        const float dy = f16(y[i].d);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(&x[r][i], pf, sizeof x[r][i]);
            const __m256i p = dot_i8_pairs(load256(x[r][i].qs), yq);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[r][i].d) * dy),
                                     _mm256_cvtepi32_ps(pairs_to_i32(p)), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum_ps(acc[r]);
}

/* IQ4_NL: the nibbles index the 16-entry code book with one byte shuffle
 * (the book fits a 128-bit lane); values -127..113, then the abs/sign
 * trick (an offset would push pair sums past int16). */
AINLINE void iq4_nl_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_0 *y = vy;
    const vx_block_iq4_nl *x[4];
    __m256 acc[4];
    for (int r = 0; r < R; r++) {
        x[r] = row_at(w, stride, r);
        acc[r] = _mm256_setzero_ps();
    }
    const size_t pf = prefetch_dist(R, stride);
    const __m256i book = _mm256_broadcastsi128_si256(load128(vx_iq4nl_values));
    for (int64_t i = 0; i < n / VX_QK4_NL; i++) {
        const __m256i yq = load256(y[i].qs);
        const float dy = f16(y[i].d);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(&x[r][i], pf, sizeof x[r][i]);
            const __m256i xq = _mm256_shuffle_epi8(book, nibbles32(x[r][i].qs));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[r][i].d) * dy),
                                     _mm256_cvtepi32_ps(pairs_to_i32(dot_i8_pairs(xq, yq))), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum_ps(acc[r]);
}

DEFINE_QDOT(q4_0_rows, vx_vec_dot_q4_0_q8_0_avx2, vx_gemv_q4_0_avx2)
DEFINE_QDOT(q4_1_rows, vx_vec_dot_q4_1_q8_1_avx2, vx_gemv_q4_1_avx2)
DEFINE_QDOT(q5_0_rows, vx_vec_dot_q5_0_q8_0_avx2, vx_gemv_q5_0_avx2)
DEFINE_QDOT(q5_1_rows, vx_vec_dot_q5_1_q8_1_avx2, vx_gemv_q5_1_avx2)
DEFINE_QDOT(q8_0_rows, vx_vec_dot_q8_0_q8_0_avx2, vx_gemv_q8_0_avx2)
DEFINE_QDOT(iq4_nl_rows, vx_vec_dot_iq4_nl_q8_0_avx2, vx_gemv_iq4_nl_avx2)

/* ========================================== F16 / BF16 x f32 activations */

AINLINE __m256 load_f16x8(const uint16_t *p) {
    return _mm256_cvtph_ps(load128(p));
}

/* bf16 is the top half of an f32: widen to 32 bits and shift into place. */
AINLINE __m256 load_bf16x8(const uint16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(load128(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AINLINE float bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One row: four accumulators hide the FMA latency (4 cycles, 2 per cycle). */
AINLINE float dot_half_f32(int64_t n, const uint16_t *w, const float *x, int bf) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
#define LOADW(p) (bf ? load_bf16x8(p) : load_f16x8(p))
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(LOADW(w + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(LOADW(w + i + 8), _mm256_loadu_ps(x + i + 8), s1);
        s2 = _mm256_fmadd_ps(LOADW(w + i + 16), _mm256_loadu_ps(x + i + 16), s2);
        s3 = _mm256_fmadd_ps(LOADW(w + i + 24), _mm256_loadu_ps(x + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LOADW(w + i), _mm256_loadu_ps(x + i), s0);
#undef LOADW
    float r = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) r += (bf ? bf16(w[i]) : f16(w[i])) * x[i];
    return r;
}

float vx_dot_f16_f32_avx2(int64_t n, const uint16_t *w, const float *x) {
    return dot_half_f32(n, w, x, 0);
}

float vx_dot_bf16_f32_avx2(int64_t n, const uint16_t *w, const float *x) {
    return dot_half_f32(n, w, x, 1);
}

/* R rows at once: each activation vector is loaded once for all rows; two
 * accumulators per row (8 in all at R = 4) keep the FMA chains apart. */
AINLINE void half_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out,
                       int bf) {
    const float *x = vy;
    const uint16_t *wr[4];
    __m256 a0[4], a1[4];
    for (int r = 0; r < R; r++) {
        wr[r] = row_at(w, stride, r);
        a0[r] = a1[r] = _mm256_setzero_ps();
    }
    const size_t pf = prefetch_dist(R, stride);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_ahead(wr[r] + i, pf, 32);
            a0[r] = _mm256_fmadd_ps(bf ? load_bf16x8(wr[r] + i) : load_f16x8(wr[r] + i), x0, a0[r]);
            a1[r] = _mm256_fmadd_ps(bf ? load_bf16x8(wr[r] + i + 8) : load_f16x8(wr[r] + i + 8), x1,
                                    a1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float s = hsum_ps(_mm256_add_ps(a0[r], a1[r]));
        for (int64_t j = i; j < n; j++) s += (bf ? bf16(wr[r][j]) : f16(wr[r][j])) * x[j];
        out[r] = s;
    }
}

AINLINE void f16_rows(int64_t n, const void *w, size_t stride, int R, const void *y, float *out) {
    half_rows(n, w, stride, R, y, out, 0);
}

AINLINE void bf16_rows(int64_t n, const void *w, size_t stride, int R, const void *y, float *out) {
    half_rows(n, w, stride, R, y, out, 1);
}

void vx_gemv_f16_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                      float *out) {
    GEMV_DISPATCH(f16_rows, n, w_rows, row_stride, nrows, y, out);
}

void vx_gemv_bf16_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out) {
    GEMV_DISPATCH(bf16_rows, n, w_rows, row_stride, nrows, y, out);
}
