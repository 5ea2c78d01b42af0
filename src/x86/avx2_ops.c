/* avx2_ops.c - AVX2+FMA float kernels (compiled with -mavx2 -mfma). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels_x86.h"
#include "ops.h"

float vx_dot_f32_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

void vx_axpy_f32_avx2(float *y, float a, const float *x, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* F16C conversions; the scalar tails use the same round-to-nearest-even. */
void vx_f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

void vx_f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

/* exp(v) for v <= 0 (softmax arguments): v = k ln2 + r with |r| <= ln2/2,
 * exp(r) by a degree-6 polynomial (relative error ~2e-7 over the range),
 * 2^k by building the exponent bits. Results below ~1e-38 flush to 0. */
static inline __m256 exp_neg(__m256 v) {
    const __m256 lo = _mm256_set1_ps(-87.0f);
    const __m256 small = _mm256_cmp_ps(v, lo, _CMP_LT_OQ);
    v = _mm256_max_ps(v, lo);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* r = v - k ln2 in two steps (Cody-Waite) to keep r exact enough */
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), v);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(small, y);
}

/* Gemma 2's soft cap of scores x in their own units: out tanh(in x), with
 * tanh(y) = sign(y) (1 - e) / (1 + e), e = exp(-2 |y|) by exp_neg (1 - e
 * is exact for e >= 1/2, so near 0 the result keeps exp_neg's ~1e-7
 * absolute error; past |y| ~ 43 e flushes to 0 and tanh is 1). One
 * formula for softcap and the fused decode kernels (exp512.h's cap512
 * operation for operation), so both give the same bits. */
static inline __m256 cap8(__m256 x, __m256 in, __m256 out) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 y = _mm256_mul_ps(x, in);
    const __m256 e = exp_neg(_mm256_mul_ps(_mm256_or_ps(y, sign), _mm256_set1_ps(2.0f)));
    const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    return _mm256_mul_ps(out, _mm256_or_ps(t, _mm256_and_ps(sign, y)));
}

void vx_softcap_avx2(float *x, int64_t n, float in, float out) {
    const __m256 vi = _mm256_set1_ps(in), vo = _mm256_set1_ps(out);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, cap8(_mm256_loadu_ps(x + i), vi, vo));
    if (i < n) { /* the tail through the same lanes */
        float t[8] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(t, cap8(_mm256_loadu_ps(t), vi, vo));
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    }
}

/* silu(g) u = g sigmoid(g) u with e = exp(-|g|) in (0, 1]: sigmoid is
 * 1 / (1 + e) for g >= 0 and e / (1 + e) below, so nothing overflows
 * (exp_neg flushes e to 0 past |g| ~ 87: sigmoid 1 or 0, as the limit). */
static inline __m256 swiglu8(__m256 g, __m256 u) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 e = exp_neg(_mm256_or_ps(g, sign)); /* exp(-|g|) */
    const __m256 num = _mm256_blendv_ps(one, e, g); /* g's sign bit picks e */
    return _mm256_mul_ps(_mm256_mul_ps(g, _mm256_div_ps(num, _mm256_add_ps(one, e))), u);
}

/* gelu(g) u with GELU's tanh form: 0.5 (1 + tanh(y)) is sigmoid(2 y),
 * so gelu(g) = g sigmoid(z), z = 2 sqrt(2 / pi) (g + 0.044715 g^3), and
 * the sigmoid is swiglu8's (z = +-inf past |g| ~ 1e13: 1 or 0). */
static inline __m256 geglu8(__m256 g, __m256 u) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), _mm256_set1_ps(0.044715f));
    const __m256 z = _mm256_mul_ps(_mm256_fmadd_ps(g3, g, g), _mm256_set1_ps(1.5957691216057308f));
    const __m256 e = exp_neg(_mm256_or_ps(z, sign)); /* exp(-|z|) */
    const __m256 num = _mm256_blendv_ps(one, e, z); /* z's sign bit picks e */
    return _mm256_mul_ps(_mm256_mul_ps(g, _mm256_div_ps(num, _mm256_add_ps(one, e))), u);
}

/* f(g, u) over n elements, the tail through the same lanes (every element
 * computed alike) */
#define GLU_ROWS8(f)                                                                        \
    do {                                                                                    \
        int64_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, f(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i))); \
        if (i < n) {                                                                        \
            float tg[8] = {0}, tu[8] = {0};                                                 \
            for (int64_t j = i; j < n; j++) tg[j - i] = g[j], tu[j - i] = u[j];             \
            _mm256_storeu_ps(tg, f(_mm256_loadu_ps(tg), _mm256_loadu_ps(tu)));              \
            for (int64_t j = i; j < n; j++) g[j] = tg[j - i];                               \
        }                                                                                   \
    } while (0)

void vx_swiglu_avx2(float *g, const float *u, int64_t n) { GLU_ROWS8(swiglu8); }
void vx_geglu_avx2(float *g, const float *u, int64_t n) { GLU_ROWS8(geglu8); }

/* vx_rope_apply's arithmetic exactly, 4 pairs at a time: NORM (kind 0)
 * rotates (2i, 2i + 1) with cs's (cos, sin) pair i, even lanes x0 c - x1 s
 * and odd x1 c + x0 s (addsub of the two rounded products, as the scalar
 * code has them); NEOX (1) rotates (i, i + n_rot / 2). */
void vx_rope_avx2(float *v, const float *cs, int32_t n_rot, int kind) {
    const int32_t half = n_rot / 2;
    int32_t i = 0;
    if (kind == 0) {
        for (; i + 4 <= half; i += 4) {
            const __m256 x = _mm256_loadu_ps(v + 2 * i), p = _mm256_loadu_ps(cs + 2 * i);
            const __m256 a = _mm256_mul_ps(x, _mm256_moveldup_ps(p));                           /* x c */
            const __m256 b = _mm256_mul_ps(_mm256_permute_ps(x, 0xb1), _mm256_movehdup_ps(p)); /* x' s */
            _mm256_storeu_ps(v + 2 * i, _mm256_addsub_ps(a, b));
        }
    } else {
        for (; i + 8 <= half; i += 8) {
            const __m256 p0 = _mm256_loadu_ps(cs + 2 * i), p1 = _mm256_loadu_ps(cs + 2 * i + 8);
            /* cos (even) and sin (odd) of pairs i .. i + 7, in order */
            const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(p0, p1, 0x88)), 0xd8));
            const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(p0, p1, 0xdd)), 0xd8));
            const __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
            _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
            _mm256_storeu_ps(v + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
        }
    }
    for (; i < half; i++) { /* the tail: the scalar code */
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const int32_t a = kind ? i : 2 * i, b = kind ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

/* vx_rmsnorm's arithmetic exactly: the squares (exact in double) into
 * four double chains, element i into chain i % 4 (one lane each), the
 * chains added as (0 + 1) + (2 + 3), then out = x * scale * w in floats. */
void vx_rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps) {
    __m256d s4 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        s4 = _mm256_add_pd(s4, _mm256_mul_pd(v, v));
    }
    double s[4];
    _mm256_storeu_pd(s, s4);
    for (int j = 0; i < n; i++, j++) s[j] += (double)x[i] * x[i];
    const double ss = (s[0] + s[1]) + (s[2] + s[3]);
    const float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    const __m256 vs = _mm256_set1_ps(scale);
    i = 0;
    if (w) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
        for (; i < n; i++) out[i] = x[i] * scale * w[i];
    } else {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
        for (; i < n; i++) out[i] = x[i] * scale;
    }
}

float vx_exp_shift_sum_avx2(float *x, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 y = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, y);
        acc = _mm256_add_ps(acc, y);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float sum = _mm_cvtss_f32(h);
    if (i < n) {
        /* tail through the same polynomial, so every element is computed alike */
        float t[8] = {0};
        const int64_t r = n - i;
        for (int64_t j = 0; j < r; j++) t[j] = x[i + j] - m;
        for (int64_t j = r; j < 8; j++) t[j] = -100.0f;
        _mm256_storeu_ps(t, exp_neg(_mm256_loadu_ps(t)));
        for (int64_t j = 0; j < r; j++) {
            x[i + j] = t[j];
            sum += t[j];
        }
    }
    return sum;
}

/* ---- attention blocks (see the contracts in ops.h) ---- */

void vx_q8_0_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i + 32 <= n; i += 32, p += 34) {
        uint16_t h;
        memcpy(&h, p, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
        const __m128i q0 = _mm_loadu_si128((const __m128i *)(const void *)(p + 2));
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 18));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0))));
        _mm256_storeu_ps(dst + i + 8,
                         _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)))));
        _mm256_storeu_ps(dst + i + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1))));
        _mm256_storeu_ps(dst + i + 24,
                         _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)))));
    }
}

/* One register tile of gemm_f32 / gemm_f16b: MR rows (1..8) x NV vectors
 * of 8 columns (1..2), accumulators in registers, k steps of one broadcast
 * per row and one load per column vector (fp16 rows of b widened once per
 * tile and serving all MR rows). */
static inline __attribute__((always_inline)) void tile_x(const int half, const int MR, const int NV, int64_t kd,
                                                         const float *a, int64_t lda, const void *bp,
                                                         int64_t ldb, float *c, int64_t ldc, const float *alpha) {
    __m256 acc[8][2];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            acc[i][v] = alpha ? _mm256_mul_ps(_mm256_set1_ps(alpha[i]), _mm256_loadu_ps(c + i * ldc + 8 * v))
                              : _mm256_setzero_ps();
    for (int64_t p = 0; p < kd; p++) {
        __m256 bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            bv[v] = half ? _mm256_cvtph_ps(_mm_loadu_si128(
                               (const __m128i *)(const void *)((const uint16_t *)bp + p * ldb + 8 * v)))
                         : _mm256_loadu_ps((const float *)bp + p * ldb + 8 * v);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + i * lda + p);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
}

static inline __attribute__((always_inline)) void gemm_tile(const int MR, const int NV, int64_t kd,
                                                            const float *a, int64_t lda,
                                                            const float *b, int64_t ldb, float *c,
                                                            int64_t ldc, const float *alpha) {
    tile_x(0, MR, NV, kd, a, lda, b, ldb, c, ldc, alpha);
}

static inline __attribute__((always_inline)) void gemm_rows(const int MR, int64_t n, int64_t kd,
                                                            const float *a, int64_t lda,
                                                            const float *b, int64_t ldb, float *c,
                                                            int64_t ldc, const float *alpha) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) gemm_tile(MR, 2, kd, a, lda, b + j, ldb, c + j, ldc, alpha);
    if (j + 8 <= n) {
        gemm_tile(MR, 1, kd, a, lda, b + j, ldb, c + j, ldc, alpha);
        j += 8;
    }
    for (; j < n; j++) /* columns past a multiple of 8 */
        for (int i = 0; i < MR; i++) {
            float s = alpha ? alpha[i] * c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < kd; p++) s += a[i * lda + p] * b[p * ldb + j];
            c[i * ldc + j] = s;
        }
}

void vx_gemm_f32_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float *c, int64_t ldc, const float *alpha) {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
        gemm_rows(4, n, kd, a + i * lda, lda, b, ldb, c + i * ldc, ldc, alpha ? alpha + i : NULL);
    const float *al = alpha ? alpha + i : NULL;
    if (m - i == 3) gemm_rows(3, n, kd, a + i * lda, lda, b, ldb, c + i * ldc, ldc, al);
    else if (m - i == 2) gemm_rows(2, n, kd, a + i * lda, lda, b, ldb, c + i * ldc, ldc, al);
    else if (m - i == 1) gemm_rows(1, n, kd, a + i * lda, lda, b, ldb, c + i * ldc, ldc, al);
}

static inline __attribute__((always_inline)) void gemm16_tile(const int MR, const int NV, int64_t kd,
                                                              const float *a, int64_t lda,
                                                              const uint16_t *b, int64_t ldb,
                                                              float *c, int64_t ldc,
                                                              const float *alpha) {
    tile_x(1, MR, NV, kd, a, lda, b, ldb, c, ldc, alpha);
}

void vx_gemm_f16b_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const uint16_t *b,
                       int64_t ldb, float *c, int64_t ldc, const float *alpha) {
    for (int64_t i0 = 0; i0 < m; i0 += 8) {
        const int mr = (int)(m - i0 < 8 ? m - i0 : 8);
        const float *ai = a + i0 * lda, *al = alpha ? alpha + i0 : NULL;
        float *ci = c + i0 * ldc;
        int64_t j = 0;
        if (mr <= 4)
            for (; j + 16 <= n; j += 16) {
                switch (mr) {
                case 1: gemm16_tile(1, 2, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
                case 2: gemm16_tile(2, 2, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
                case 3: gemm16_tile(3, 2, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
                default: gemm16_tile(4, 2, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
                }
            }
        for (; j + 8 <= n; j += 8) {
            switch (mr) {
            case 1: gemm16_tile(1, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            case 2: gemm16_tile(2, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            case 3: gemm16_tile(3, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            case 4: gemm16_tile(4, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            case 5: gemm16_tile(5, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            case 6: gemm16_tile(6, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            case 7: gemm16_tile(7, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            default: gemm16_tile(8, 1, kd, ai, lda, b + j, ldb, ci + j, ldc, al); break;
            }
        }
        for (; j < n; j++) /* columns past a multiple of 8 */
            for (int i = 0; i < mr; i++) {
                float s = al ? al[i] * ci[i * ldc + j] : 0.0f;
                for (int64_t p = 0; p < kd; p++) s += ai[i * lda + p] * _cvtsh_ss(b[p * ldb + j]);
                ci[i * ldc + j] = s;
            }
    }
}

static inline float hmax8(__m256 v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static inline __attribute__((always_inline)) __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
static inline __attribute__((always_inline)) __m256 load8h(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Transposing folds of the horizontal tree (lanes l + 4, then
 * l + 2, then l + 1): fold3(fold2(fold1(d0, d1), fold1(d2, d3)),
 * fold2(fold1(d4, d5), fold1(d6, d7))) holds the eight sums of d0, d2, d4,
 * d6, d1, d3, d5, d7 in that lane order. */
static inline __attribute__((always_inline)) __m256 fold1(__m256 a, __m256 b) {
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
static inline __attribute__((always_inline)) __m256 fold2(__m256 x, __m256 y) {
    return _mm256_add_ps(_mm256_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
}
static inline __attribute__((always_inline)) __m256 fold3(__m256 w, __m256 u) {
    return _mm256_add_ps(_mm256_shuffle_ps(w, u, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(w, u, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* gemm_abt: the attention scores' association, shared by every path that
 * computes them (this blocked kernel, the fused decode kernel below): one
 * 8-lane FMA chain over the 8-element steps in order, the lanes summed by
 * the fold tree (l + 4, then l + 2, then l + 1), then the scalar tail in
 * order. Attention's bits therefore do not depend on how it is blocked.
 * (Four chains, as dot_f32 uses, need four accumulators per score and cost
 * ~40% of this kernel's speed.)
 *
 * Blocking: 2 rows x 4 positions per step (6 loads per 8 FMAs), the
 * positions of one group of 8 taken as (x, x + 4, x + 1, x + 5) so the
 * folds leave the 8 scores in position order. Rows and positions past the
 * edge repeat the last one and are dropped. */
static inline __attribute__((always_inline)) float tail_dot_f32(const float *a, const float *b, int64_t i, int64_t n,
                                                                float x) {
    for (; i < n; i++) x += a[i] * b[i];
    return x;
}
static inline __attribute__((always_inline)) float tail_dot_f16(const float *a, const uint16_t *b, int64_t i,
                                                                int64_t n, float x) {
    for (; i < n; i++) x += a[i] * _cvtsh_ss(b[i]);
    return x;
}

#define ABT_KERNEL(NAME, BT, LOAD, TAIL)                                                            \
    static inline __attribute__((always_inline)) void NAME##_lanes(const int KD, int64_t kd,       \
                                                                   const float *a0, const float *a1, \
                                                                   const BT *const *bp,            \
                                                                   __m256 v[2][4]) {               \
        if (KD > 0) kd = KD;                                                                       \
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)                                        \
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) v[r][p] = _mm256_setzero_ps();     \
        _Pragma("GCC unroll 16") for (int64_t i = 0; i + 8 <= kd; i += 8) {                        \
            __m256 x[4];                                                                           \
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) x[p] = LOAD(bp[p] + i);            \
            const __m256 y0 = _mm256_loadu_ps(a0 + i), y1 = _mm256_loadu_ps(a1 + i);               \
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                                  \
                v[0][p] = _mm256_fmadd_ps(y0, x[p], v[0][p]);                                      \
                v[1][p] = _mm256_fmadd_ps(y1, x[p], v[1][p]);                                      \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static inline __attribute__((always_inline)) void NAME##_blocked(const int KD, int64_t m, int64_t n, \
                                                                     int64_t kd, const float *a,   \
                                                                     int64_t lda, const BT *b,     \
                                                                     int64_t ldb, float *c,        \
                                                                     int64_t ldc) {                \
        for (int64_t i = 0; i < m; i += 2) {                                                       \
            const float *ar[2] = {a + i * lda, a + (i + 1 < m ? i + 1 : i) * lda};                 \
            for (int64_t j0 = 0; j0 < n; j0 += 8) {                                                \
                __m256 u[2][2];                                                                    \
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                              \
                    static const int off[4] = {0, 4, 1, 5};                                        \
                    const BT *bp[4];                                                               \
                    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                          \
                        const int64_t j = j0 + 2 * h + off[p];                                     \
                        bp[p] = b + (j < n ? j : n - 1) * ldb;                                     \
                    }                                                                              \
                    __m256 v[2][4];                                                                \
                    NAME##_lanes(KD, kd, ar[0], ar[1], bp, v);                                     \
                    _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)                            \
                        u[h][r] = fold2(fold1(v[r][0], v[r][1]), fold1(v[r][2], v[r][3]));         \
                }                                                                                  \
                const int nj = n - j0 < 8 ? (int)(n - j0) : 8;                                     \
                _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {                              \
                    if (i + r >= m) break;                                                         \
                    float *cr = c + (i + r) * ldc + j0;                                            \
                    const __m256 sv = fold3(u[0][r], u[1][r]);                                     \
                    if (nj == 8 && kd % 8 == 0) {                                                  \
                        _mm256_storeu_ps(cr, sv);                                                  \
                        continue;                                                                  \
                    }                                                                              \
                    float t8[8];                                                                   \
                    _mm256_storeu_ps(t8, sv);                                                      \
                    for (int p = 0; p < nj; p++)                                                   \
                        cr[p] = TAIL(ar[r], b + (j0 + p) * ldb, kd & ~(int64_t)7, kd, t8[p]);      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    void vx_##NAME##_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const BT *b, \
                          int64_t ldb, float *c, int64_t ldc) {                                    \
        /* head dims 64 and 128 fully unrolled */                                                  \
        if (kd == 64) NAME##_blocked(64, m, n, kd, a, lda, b, ldb, c, ldc);                        \
        else if (kd == 128) NAME##_blocked(128, m, n, kd, a, lda, b, ldb, c, ldc);                 \
        else NAME##_blocked(0, m, n, kd, a, lda, b, ldb, c, ldc);                                  \
    }

ABT_KERNEL(gemm_abt_f32, float, load8, tail_dot_f32)
ABT_KERNEL(gemm_abt_f16b, uint16_t, load8h, tail_dot_f16)

void vx_attn_softmax16_avx2(float *s, int64_t m, const int32_t *nv, float scale, float *mx, float *l,
                            float *corr) {
    const __m256 vs = _mm256_set1_ps(scale);
    const __m256 idx0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 idx1 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < m; i++) {
        float *si = s + i * 16;
        const int n = nv[i];
        if (n <= 0) {
            _mm256_storeu_ps(si, _mm256_setzero_ps());
            _mm256_storeu_ps(si + 8, _mm256_setzero_ps());
            corr[i] = 1;
            continue;
        }
        __m256 s0 = _mm256_mul_ps(vs, _mm256_loadu_ps(si)), s1 = _mm256_mul_ps(vs, _mm256_loadu_ps(si + 8));
        if (n < 16) {
            const __m256 vn = _mm256_set1_ps((float)n);
            s0 = _mm256_blendv_ps(ninf, s0, _mm256_cmp_ps(idx0, vn, _CMP_LT_OQ));
            s1 = _mm256_blendv_ps(ninf, s1, _mm256_cmp_ps(idx1, vn, _CMP_LT_OQ));
        }
        const float mold = mx[i];
        float mb = hmax8(_mm256_max_ps(s0, s1));
        mb = mb > mold ? mb : mold;
        const __m256 vm = _mm256_set1_ps(mb);
        /* masked lanes are -inf: exp_neg flushes them to 0 */
        const __m256 p0 = exp_neg(_mm256_sub_ps(s0, vm)), p1 = exp_neg(_mm256_sub_ps(s1, vm));
        _mm256_storeu_ps(si, p0);
        _mm256_storeu_ps(si + 8, p1);
        /* the sum in exp_shift_sum's order: full 8-lane groups, then the rest one by one */
        float sum;
        if (n == 16) {
            sum = hsum8(_mm256_add_ps(p0, p1));
        } else {
            float t[16];
            _mm256_storeu_ps(t, p0);
            _mm256_storeu_ps(t + 8, p1);
            int j = 0;
            sum = 0;
            if (n >= 8) {
                sum = hsum8(p0);
                j = 8;
            }
            for (; j < n; j++) sum += t[j];
        }
        const float c = mold == mb ? 1.0f : expf(mold - mb); /* exp(-inf) = 0 on a row's first chunk */
        corr[i] = c;
        l[i] = l[i] * c + sum;
        mx[i] = mb;
    }
}

/* ---- fused decode attention (attn_dec_f16; contract in ops.h) ----
 * The same arithmetic as gemm_abt_f16b + attn_softmax16 + gemm_f16b per
 * 16-position chunk, organized so each fp16 K and V row is widened once for
 * all g rows of the GQA group and no horizontal sum runs per score:
 *  - scores: the K row is widened into registers; each row's 8-lane dot
 *    vector (gemm_abt's one chain over 8-element steps) is folded with
 *    seven others through the horizontal tree (lanes l + 4 first, then l + 2, then
 *    l + 1) as a transpose: one vector of 8 scores per 3 fold steps. Lanes
 *    are rows (G = 8 lanes per position) or 4 rows x 2 positions (G = 4,
 *    for g <= 4).
 *  - softmax: lanes are rows, so the max, exp_neg and the sum in
 *    exp_shift_sum's order (x_k = p_k + p_(k+8), then lanes k + 4, k + 2,
 *    k + 1) are vertical operations over the chunk's vectors.
 *  - P.V: tiles of up to 4 rows x 16 columns, corr * O + P V by one FMA per
 *    position in position order, as gemm_f16b.
 * Template parameters: R the rows (g, 1..8) or 0 for any g (G = 8); HD the
 * head dim (64, 128 or 256) or 0 for any. */


/* 8-lane dot vector of q and a K row before the fold tree (gemm_abt's
 * association: one chain over the 8-element steps): from the widened row
 * kw (HD > 0) or from the fp16 row kh (HD == 0; the scalar tail is the
 * caller's). */
static inline __attribute__((always_inline)) __m256 dot_lanes(const int HD, int64_t hd, const float *q,
                                                              const __m256 *kw, const uint16_t *kh) {
    __m256 s = _mm256_setzero_ps();
    if (HD > 0) {
#pragma GCC unroll 16
        for (int t = 0; t < HD / 8; t++) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * t), kw[t], s);
    } else {
        for (int64_t i = 0; i + 8 <= hd; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8h(kh + i), s);
    }
    return s;
}

/* Dot vectors v[x] of rows rs[x] (x < NS; zero for rows past the group)
 * against the fp16 K row kj, each K element widened once for all rows.
 * HD = 128 and 256 run in 64-element pieces (the chain goes on from the
 * previous piece's vector) so the widened piece stays in registers. */
static inline __attribute__((always_inline)) void dot_rows(const int R, const int HD, const int NS, const int *rs,
                                                           int64_t g, int64_t hd, const float *q,
                                                           const uint16_t *kj, __m256 *v) {
    const int64_t nr = R > 0 ? R : g;
    if (HD >= 128) {
        __m256 kw[8];
#pragma GCC unroll 4
        for (int half = 0; half < HD / 64; half++) {
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) kw[t] = load8h(kj + 64 * half + 8 * t);
#pragma GCC unroll 8
            for (int x = 0; x < NS; x++) {
                if (rs[x] >= nr) {
                    v[x] = _mm256_setzero_ps();
                    continue;
                }
                const float *qr = q + rs[x] * HD + 64 * half;
                __m256 acc = half ? v[x] : _mm256_setzero_ps();
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qr + 8 * t), kw[t], acc);
                v[x] = acc;
            }
        }
        return;
    }
    __m256 kw[8]; /* HD is 64 or 0 here */
    if (HD > 0)
#pragma GCC unroll 16
        for (int t = 0; t < HD / 8; t++) kw[t] = load8h(kj + 8 * t);
#pragma GCC unroll 8
    for (int x = 0; x < NS; x++)
        v[x] = rs[x] < nr ? dot_lanes(HD, hd, q + rs[x] * (HD > 0 ? HD : hd), kw, kj) : _mm256_setzero_ps();
}

/* Adds the scalar tails (elements past a multiple of 8, gemm_abt's last
 * step, as tail_dot_f16) to the scores: lane = row + G * (position - first position). */
static inline void dot_tails(const int G, int64_t g, int64_t hd, const float *q, const uint16_t *kj,
                             int64_t ld, int npos, __m256 *sv) {
    float t[8];
    _mm256_storeu_ps(t, *sv);
    const int64_t i0 = hd & ~(int64_t)7;
    for (int pp = 0; pp < npos; pp++)
        for (int64_t r = 0; r < g; r++) {
            float x = t[pp * G + r];
            t[pp * G + r] = tail_dot_f16(q + r * hd, kj + pp * ld, i0, hd, x);
        }
    *sv = _mm256_loadu_ps(t);
}

/* Prefetches the lines holding hd fp16 elements at p: one probe per 64
 * bytes and one at the last element (unaligned rows). */
static inline __attribute__((always_inline)) void prefetch_row(const uint16_t *p, int64_t hd) {
    const char *c = (const char *)(const void *)p;
    for (int64_t b = 0; b < hd * 2; b += 64) _mm_prefetch(c + b, _MM_HINT_T0);
    _mm_prefetch(c + hd * 2 - 1, _MM_HINT_T0);
}

/* Rows i0 .. i0 + MR - 1 (MR <= 4) of P.V: o = corr o + sum_p P[p G + i] v[p]. */
static inline __attribute__((always_inline)) void pv_rows(const int G, const int MR, int64_t hd,
                                                          const float *P, int64_t i0, const uint16_t *v,
                                                          int64_t ld, const float *corr, float *o,
                                                          const uint16_t *vnext) {
    int64_t j = 0;
    for (; j + 16 <= hd; j += 16) {
        __m256 acc[4][2];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
            for (int x = 0; x < 2; x++)
                acc[i][x] = _mm256_mul_ps(_mm256_set1_ps(corr[i0 + i]),
                                          _mm256_loadu_ps(o + (i0 + i) * hd + j + 8 * x));
        const uint16_t *vp = v + j;
        const float *pp = P + i0;
#pragma GCC unroll 2
        for (int p = 0; p < 16; p++, vp += ld, pp += G) {
            /* the next rows' 64-byte lines, one per position over the
             * first column blocks: spread, not in a burst */
            if (vnext && 2 * j < hd) _mm_prefetch((const char *)(vnext + p * ld + 2 * j), _MM_HINT_T0);
            const __m256 b0 = load8h(vp), b1 = load8h(vp + 8);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++) {
                const __m256 a = _mm256_broadcast_ss(pp + i);
                acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
            for (int x = 0; x < 2; x++) _mm256_storeu_ps(o + (i0 + i) * hd + j + 8 * x, acc[i][x]);
    }
    if (j + 8 <= hd) {
        __m256 acc[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            acc[i] = _mm256_mul_ps(_mm256_set1_ps(corr[i0 + i]), _mm256_loadu_ps(o + (i0 + i) * hd + j));
        for (int p = 0; p < 16; p++) {
            const __m256 b0 = load8h(v + p * ld + j);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(P + p * G + i0 + i), b0, acc[i]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) _mm256_storeu_ps(o + (i0 + i) * hd + j, acc[i]);
        j += 8;
    }
    for (; j < hd; j++) /* columns past a multiple of 8, as gemm_f16b */
        for (int i = 0; i < MR; i++) {
            float s = corr[i0 + i] * o[(i0 + i) * hd + j];
            for (int p = 0; p < 16; p++) s += P[p * G + i0 + i] * _cvtsh_ss(v[p * ld + j]);
            o[(i0 + i) * hd + j] = s;
        }
}

/* One chunk of 16 positions for one kv head: q, o [g][hd], mx, l [g]; K/V
 * row p at k + p * ld, v + p * ld. kn, vn: rows of a later chunk or head to
 * prefetch (NULL: none). */
static inline __attribute__((always_inline)) void dec_chunk(const int R, const int HD, int64_t g, int64_t hd,
                                                            const float *q, const uint16_t *k,
                                                            const uint16_t *v, int64_t ld,
                                                            const uint16_t *kn, const uint16_t *vn,
                                                            __m256 vs, const __m256 *cap, float *mx, float *l,
                                                            float *o) {
    const int G = R > 0 && R <= 4 ? 4 : 8, nvec = 2 * G;
    const int64_t nr = R > 0 ? R : g;
    if (HD > 0) hd = HD;
    __m256 S[16];
    /* scores, lane = row + G * (position - first position of the vector) */
    if (G == 8) {
        /* rows to fold slots 0 4 1 5 2 6 3 7: the result is in row order */
        static const int rs[8] = {0, 4, 1, 5, 2, 6, 3, 7};
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++) {
            const uint16_t *kj = k + j * ld;
            if (kn) prefetch_row(kn + j * ld, hd);
            __m256 d[8];
            dot_rows(R, HD, 8, rs, g, hd, q, kj, d);
            S[j] = fold3(fold2(fold1(d[0], d[1]), fold1(d[2], d[3])), fold2(fold1(d[4], d[5]), fold1(d[6], d[7])));
            if (HD == 0 && (hd & 7)) dot_tails(G, nr, hd, q, kj, ld, 1, &S[j]);
        }
    } else {
        static const int rs[4] = {0, 1, 2, 3};
        const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#pragma GCC unroll 1
        for (int jp = 0; jp < 8; jp++) {
            __m256 w[2];
#pragma GCC unroll 2
            for (int x = 0; x < 2; x++) {
                const uint16_t *kj = k + (2 * jp + x) * ld;
                if (kn) prefetch_row(kn + (2 * jp + x) * ld, hd);
                __m256 d[4];
                dot_rows(R, HD, 4, rs, g, hd, q, kj, d);
                w[x] = fold2(fold1(d[0], d[1]), fold1(d[2], d[3]));
            }
            /* [r0 r2 r0' r2' | r1 r3 r1' r3'] -> [r0 r1 r2 r3 | r0' r1' r2' r3'] */
            S[jp] = _mm256_permutevar8x32_ps(fold3(w[0], w[1]), perm);
            if (HD == 0 && (hd & 7)) dot_tails(G, nr, hd, q, k + 2 * jp * ld, ld, 2, &S[jp]);
        }
    }
    if (cap) /* softcap's */
#pragma GCC unroll 16
        for (int x = 0; x < nvec; x++) S[x] = cap8(S[x], cap[0], cap[1]);
    /* online softmax: attn_softmax16's arithmetic with lanes as rows */
    float mold[8], mnew[8], sm[8], corr[8];
    for (int i = 0; i < 8; i++) mold[i] = i % G < nr ? mx[i % G] : -INFINITY;
    __m256 M = S[0] = _mm256_mul_ps(vs, S[0]);
#pragma GCC unroll 16
    for (int x = 1; x < nvec; x++) {
        S[x] = _mm256_mul_ps(vs, S[x]);
        M = _mm256_max_ps(M, S[x]);
    }
    if (G == 4) M = _mm256_max_ps(M, _mm256_permute2f128_ps(M, M, 1));
    const __m256 mb = _mm256_max_ps(M, _mm256_loadu_ps(mold)); /* mb > mold ? mb : mold */
    float P[16 * 8];
#pragma GCC unroll 16
    for (int x = 0; x < nvec; x++) {
        S[x] = exp_neg(_mm256_sub_ps(S[x], mb));
        _mm256_storeu_ps(P + 8 * x, S[x]);
    }
    __m256 sum;
    if (G == 8) {
        __m256 X[8], H[4];
#pragma GCC unroll 8
        for (int x = 0; x < 8; x++) X[x] = _mm256_add_ps(S[x], S[x + 8]);
#pragma GCC unroll 4
        for (int x = 0; x < 4; x++) H[x] = _mm256_add_ps(X[x], X[x + 4]);
        sum = _mm256_add_ps(_mm256_add_ps(H[0], H[2]), _mm256_add_ps(H[1], H[3]));
    } else {
        __m256 X[4];
#pragma GCC unroll 4
        for (int x = 0; x < 4; x++) X[x] = _mm256_add_ps(S[x], S[x + 4]);
        const __m256 A = _mm256_add_ps(_mm256_add_ps(X[0], X[2]), _mm256_add_ps(X[1], X[3]));
        sum = _mm256_castps128_ps256(_mm_add_ps(_mm256_castps256_ps128(A), _mm256_extractf128_ps(A, 1)));
    }
    _mm256_storeu_ps(mnew, mb);
    _mm256_storeu_ps(sm, sum);
    vx_attn_rows_rescale(nr, mold, mnew, sm, corr, l, mx);
    /* P.V, rows by 4 */
    if (R > 0) {
        pv_rows(G, R > 4 ? 4 : R, hd, P, 0, v, ld, corr, o, vn);
        if (R > 4) pv_rows(G, R > 4 ? R - 4 : 1, hd, P, 4, v, ld, corr, o, NULL);
    } else {
        for (int64_t i0 = 0; i0 < nr; i0 += 4) {
            switch (nr - i0) {
            case 1: pv_rows(G, 1, hd, P, i0, v, ld, corr, o, i0 ? NULL : vn); break;
            case 2: pv_rows(G, 2, hd, P, i0, v, ld, corr, o, i0 ? NULL : vn); break;
            case 3: pv_rows(G, 3, hd, P, i0, v, ld, corr, o, i0 ? NULL : vn); break;
            default: pv_rows(G, 4, hd, P, i0, v, ld, corr, o, i0 ? NULL : vn); break;
            }
        }
    }
}

static inline __attribute__((always_inline)) void dec_run(const int R, const int HD, int64_t nh, int64_t g,
                                                          int64_t hd, const float *q, const uint16_t *k,
                                                          const uint16_t *v, int64_t ld, int64_t hs, int64_t cs,
                                                          int64_t n, const uint16_t *kx, const uint16_t *vx, float scale,
                                                          float cap, float *mx, float *l, float *o) {
    const __m256 vs = _mm256_set1_ps(scale);
    const __m256 cv[2] = {_mm256_set1_ps(cap > 0 ? scale / cap : 0), _mm256_set1_ps(cap > 0 ? cap / scale : 0)};
    /* prefetch the chunk-head VX_ATTN_DEC_AHEAD steps ahead in processing
     * order (past the run, of the next run's first chunk: kx, vx) */
    const int64_t dist = VX_ATTN_DEC_AHEAD;
    for (int64_t c0 = 0; c0 < n; c0 += 16)
        for (int64_t h = 0; h < nh; h++) {
            const int64_t t = c0 / 16 * nh + h + dist, cn = t / nh * 16, hn = t % nh;
            const uint16_t *kn = cn < n ? k + cn / 16 * cs + hn * hs : kx ? kx + hn * hs : NULL;
            const uint16_t *vn = cn < n ? v + cn / 16 * cs + hn * hs : vx ? vx + hn * hs : NULL;
            dec_chunk(R, HD, g, hd, q + h * g * hd, k + c0 / 16 * cs + h * hs, v + c0 / 16 * cs + h * hs, ld, kn,
                      vn, vs, cap > 0 ? cv : NULL, mx + h * g, l + h * g, o + h * g * hd);
        }
}

#define DEC_G(HD)                                                                                      \
    switch (g) {                                                                                       \
    case 1: dec_run(1, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    case 2: dec_run(2, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    case 3: dec_run(3, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    case 4: dec_run(4, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    case 5: dec_run(5, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    case 6: dec_run(6, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    case 7: dec_run(7, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;   \
    default: dec_run(8, HD, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o); return;  \
    }

void vx_attn_dec_f16_avx2(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *k,
                          const uint16_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint16_t *kx,
                          const uint16_t *vx, float scale, float cap, float *mx, float *l, float *o) {
    if (hd == 64) DEC_G(64)
    if (hd == 128) DEC_G(128)
    if (hd == 256) DEC_G(256) /* Gemma */
    dec_run(0, 0, nh, g, hd, q, k, v, ld, hs, cs, n, kx, vx, scale, cap, mx, l, o);
}
