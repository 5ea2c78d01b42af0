/*
 * avx2_gemm.c - prefill GEMM kernels for the 32-element block types Q4_0,
 * Q5_0, Q8_0 (x Q8_0 activations) and for F16 weights (x f32), compiled
 * with -mavx2 -mfma -mf16c -mbmi2.
 *
 * The gemv kernels re-extract every weight block (nibbles, fifth bits,
 * fp16 factors, |codes|) once per token. Here a group of up to 4 rows is
 * unpacked chunk by chunk into a small L1 buffer (bytes ready for
 * _mm256_maddubs_epi16, and the fp16 factors as float vectors), and every
 * token of the tile then runs only the multiply-add part against it.
 * For the quantized types every token gets the gemv's (avx2_quant.c)
 * arithmetic: the same integer sums in the same int32 lanes (block pairs
 * merged as there, only with the interleave moved to the inputs), the
 * same float products and FMAs in the same order, so each result is
 * bit-identical to the gemv's, and a batched prefill gives exactly what
 * token-by-token decoding gives. Float accumulators live in a per-tile
 * array between chunks, which does not change their order. F16 sums in
 * another order (see vx_gemm_f16_avx2) and matches to rounding.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"

/* Tokens per accumulator tile; mm() in forward.c passes tiles of 64. */
#define GEMM_TT 64
/* Blocks of 32 per unpacked chunk: 4 rows x 16 pairs x 160 bytes (Q8_0)
 * = 10 KiB, so chunk, accumulators (8 KiB) and a token's activations stay
 * in L1. Even, so that block pairs never straddle a chunk. */
#define CB32 32

enum { G_Q4_0, G_Q5_0, G_Q8_0 };

/* Below a few tokens the unpacking is not paid back and the gemv per
 * token is faster (Zen 3, 4096 rows of 2048 from L3; gemm / gemv speed at
 * 2, 3, 4, 8 tokens: Q4_0 1.17 1.38 1.51 1.57, Q5_0 1.41 1.72 1.95 2.33,
 * Q8_0 0.89 1.06 1.17 1.35, F16 0.68 0.93 0.79 1.04), so the entry points
 * fall back to it under these token counts: batched decoding of a few
 * sequences keeps the gemv speed. */
#define MIN_TOK_Q8_0 3
#define MIN_TOK_F16 8

/* One unpacked (block pair, row) entry: codes of both blocks as bytes for
 * maddubs (Q4_0/Q5_0: unsigned codes; Q8_0: |x|), the scale vector
 * {d0, d1, d0, d1, ...} (a lone tail block: d0 everywhere), and for Q8_0
 * the signed codes, whose signs go onto the activations. */
typedef struct {
    uint8_t c[2][32];
    float sc[8];
    int8_t x[2][32];
} entry32;

AINLINE size_t wsize32(int k) {
    return k == G_Q4_0 ? sizeof(vx_block_q4_0) : k == G_Q5_0 ? sizeof(vx_block_q5_0) : sizeof(vx_block_q8_0);
}

AINLINE uint16_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Codes of one block as maddubs bytes (and, for Q8_0, the signed codes). */
AINLINE void unpack_block32(int k, const uint8_t *b, uint8_t *c, int8_t *x) {
    if (k == G_Q4_0) {
        store256(c, nibbles32(b + offsetof(vx_block_q4_0, qs)));
    } else if (k == G_Q5_0) {
        const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(b + offsetof(vx_block_q5_0, qh))),
                                            _mm256_set1_epi8(16));
        store256(c, _mm256_or_si256(nibbles32(b + offsetof(vx_block_q5_0, qs)), hi));
    } else {
        const __m256i q = load256(b + offsetof(vx_block_q8_0, qs));
        store256(c, _mm256_abs_epi8(q));
        store256(x, q);
    }
}

/* The dword interleave of a block pair that token32 applies to the
 * activations: first vector block 0's even dwords and block 1's odd ones,
 * second vector the other dwords, neighbours swapped. */
AINLINE void interleave(void *p0, void *p1) {
    const __m256i a = load256(p0), b = load256(p1);
    store256(p0, _mm256_blend_epi32(a, b, 0xAA));
    store256(p1, _mm256_shuffle_epi32(_mm256_blend_epi32(b, a, 0xAA), 0xB1));
}

/* Unpacks blocks [b0, b0 + nb) of 4 rows (rows[] may repeat a row). */
AINLINE void unpack32(int k, const uint8_t *const rows[4], int64_t b0, int nb, entry32 *buf) {
    const size_t ws = wsize32(k);
    for (int p = 0; 2 * p < nb; p++) {
        const int two = 2 * p + 1 < nb;
        for (int r = 0; r < 4; r++) {
            entry32 *e = &buf[4 * p + r];
            const uint8_t *b = rows[r] + (size_t)(b0 + 2 * p) * ws;
            unpack_block32(k, b, e->c[0], e->x[0]);
            const float d0 = f16(ld16(b));
            if (two) {
                unpack_block32(k, b + ws, e->c[1], e->x[1]);
                interleave(e->c[0], e->c[1]);
                if (k == G_Q8_0) interleave(e->x[0], e->x[1]);
                const float d1 = f16(ld16(b + ws));
                _mm256_storeu_ps(e->sc, _mm256_setr_ps(d0, d1, d0, d1, d0, d1, d0, d1));
            } else {
                _mm256_storeu_ps(e->sc, _mm256_set1_ps(d0));
            }
        }
    }
}

/* Pair sums of an unpacked block against activation codes yq (yc: the
 * Q4_0/Q5_0 offset correction of yq). */
AINLINE __m256i pairs32(int k, const uint8_t *c, const int8_t *x, __m256i yq, __m256i yc) {
    if (k == G_Q8_0) return _mm256_maddubs_epi16(load256(c), _mm256_sign_epi8(yq, load256(x)));
    return _mm256_sub_epi16(_mm256_maddubs_epi16(load256(c), yq), yc);
}

AINLINE __m256i ycorr32(int k, __m256i yq) {
    if (k == G_Q4_0) return _mm256_maddubs_epi16(_mm256_set1_epi8(8), yq);
    if (k == G_Q5_0) return _mm256_maddubs_epi16(_mm256_set1_epi8(16), yq);
    return _mm256_setzero_si256();
}

/* One token against an unpacked chunk of nb blocks: acc[r] += row r. */
AINLINE void token32(int k, const entry32 *buf, int nb, const uint8_t *y, __m256 acc[4]) {
    const size_t ys = sizeof(vx_block_q8_0), yo = offsetof(vx_block_q8_0, qs);
    int p = 0;
    for (; 2 * p + 2 <= nb; p++) {
        const uint8_t *y0 = y + (size_t)(2 * p) * ys, *y1 = y0 + ys;
        const __m256i yq0 = load256(y0 + yo), yq1 = load256(y1 + yo);
        const __m128 dy2 = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(ld16(y0) | (uint32_t)ld16(y1) << 16)));
        const __m256 dy = _mm256_castpd_ps(_mm256_broadcastsd_pd(_mm_castps_pd(dy2)));
        /* merge32's interleave moved to the inputs (see interleave()):
         * dword d of ya and yb then comes from the same block, so the two
         * products add up lane by lane to exactly merge32's sums - for
         * Q4_0/Q5_0 already in int16 (|sum| <= 2 * 2*31*127 < 2^15) - with
         * one blend/shuffle set per token instead of one per row. */
        const __m256i ya = _mm256_blend_epi32(yq0, yq1, 0xAA);
        const __m256i yb = _mm256_shuffle_epi32(_mm256_blend_epi32(yq1, yq0, 0xAA), 0xB1);
        const __m256i yc = _mm256_add_epi16(ycorr32(k, ya), ycorr32(k, yb));
        const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const entry32 *e = &buf[4 * p + r];
            __m256i s;
            if (k == G_Q8_0) {
                s = _mm256_add_epi32(_mm256_madd_epi16(pairs32(k, e->c[0], e->x[0], ya, yc), ones),
                                     _mm256_madd_epi16(pairs32(k, e->c[1], e->x[1], yb, yc), ones));
            } else {
                const __m256i q = _mm256_add_epi16(_mm256_maddubs_epi16(load256(e->c[0]), ya),
                                                   _mm256_maddubs_epi16(load256(e->c[1]), yb));
                s = _mm256_madd_epi16(_mm256_sub_epi16(q, yc), ones);
            }
            const __m256 sc = _mm256_mul_ps(_mm256_loadu_ps(e->sc), dy);
            acc[r] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc[r]);
        }
    }
    if (2 * p < nb) { /* odd block count: the last block alone, as in the gemv */
        const uint8_t *y0 = y + (size_t)(2 * p) * ys;
        const __m256i yq0 = load256(y0 + yo), yc0 = ycorr32(k, yq0);
        const __m256 dy = _mm256_set1_ps(f16(ld16(y0)));
        for (int r = 0; r < 4; r++) {
            const entry32 *e = &buf[4 * p + r];
            const __m256i s = pairs_to_i32(pairs32(k, e->c[0], e->x[0], yq0, yc0));
            const __m256 sc = _mm256_mul_ps(_mm256_loadu_ps(e->sc), dy);
            acc[r] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc[r]);
        }
    }
}

AINLINE void gemm32(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                    size_t act_stride, int ntok, float *out, int64_t ldo) {
    const int64_t nb = n / 32;
    const size_t ys = sizeof(vx_block_q8_0);
    entry32 buf[CB32 / 2 * 4];
    __m256 acc[GEMM_TT][4];
    for (int r0 = 0; r0 < nrows; r0 += 4) {
        const int R = nrows - r0 < 4 ? nrows - r0 : 4;
        /* missing rows of a short group repeat its last row (not stored) */
        const uint8_t *rows[4];
        for (int r = 0; r < 4; r++) rows[r] = row_at(w, stride, r0 + (r < R ? r : R - 1));
        for (int t0 = 0; t0 < ntok; t0 += GEMM_TT) {
            const int nt = ntok - t0 < GEMM_TT ? ntok - t0 : GEMM_TT;
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < 4; r++) acc[t][r] = _mm256_setzero_ps();
            for (int64_t b0 = 0; b0 < nb; b0 += CB32) {
                const int cb = (int)(nb - b0 < CB32 ? nb - b0 : CB32);
                unpack32(k, rows, b0, cb, buf);
                /* the next chunk arrives from DRAM while the tokens run */
                for (int r = 0; r < 4; r++)
                    for (size_t o = 0; o < CB32 * wsize32(k); o += 64)
                        _mm_prefetch((const char *)rows[r] + (size_t)(b0 + cb) * wsize32(k) + o, _MM_HINT_T0);
                for (int t = 0; t < nt; t++) {
                    const uint8_t *y = (const uint8_t *)act + (size_t)(t0 + t) * act_stride + (size_t)b0 * ys;
                    token32(k, buf, cb, y, acc[t]);
                }
            }
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < R; r++) out[(int64_t)(t0 + t) * ldo + r0 + r] = hsum_ps(acc[t][r]);
        }
    }
}

void vx_gemm_q4_0_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo) {
    gemm32(G_Q4_0, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
}

void vx_gemm_q5_0_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo) {
    gemm32(G_Q5_0, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
}

void vx_gemm_q8_0_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo) {
    if (ntok < MIN_TOK_Q8_0)
        gemv_tokens(vx_gemv_q8_0_avx2, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
    else
        gemm32(G_Q8_0, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
}

/* ================================================= F16 x f32 activations */

/* Elements per chunk: 4 rows of f32 = 4 KiB, a multiple of 8. */
#define KC16 256

/*
 * The F16 gemv spends a conversion per 8 weights per token; here each
 * chunk of 4 rows is converted to f32 once, and tokens go 3 at a time
 * through it: 12 accumulators (one per row and token) are enough
 * independent FMA chains to keep both FMA pipes busy (latency 4), and
 * each weight vector loaded serves 3 FMAs. Summation order differs from
 * the gemv's, so the two agree up to float rounding only.
 *
 * f16_tok3: three tokens (accumulators c0, c1, c2: 4 rows x 8 floats
 * each) against kc elements of the converted chunk. Named accumulators:
 * with an array, GCC kept them in registers in the loop but went through
 * a stack copy and rep movsq around it (a fifth of the time).
 */
AINLINE void f16_tok3(const float (*buf)[KC16], int kc, const float *x0, const float *x1, const float *x2,
                      float *c0, float *c1, float *c2) {
#define LD(c, r) _mm256_loadu_ps((c) + 8 * (r))
    __m256 a00 = LD(c0, 0), a01 = LD(c0, 1), a02 = LD(c0, 2), a03 = LD(c0, 3);
    __m256 a10 = LD(c1, 0), a11 = LD(c1, 1), a12 = LD(c1, 2), a13 = LD(c1, 3);
    __m256 a20 = LD(c2, 0), a21 = LD(c2, 1), a22 = LD(c2, 2), a23 = LD(c2, 3);
#undef LD
    for (int i = 0; i < kc; i += 8) {
        const __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), v2 = _mm256_loadu_ps(x2 + i);
#define ROW(r)                                                  \
    do {                                                        \
        const __m256 wv = _mm256_loadu_ps(&buf[r][i]);          \
        a0##r = _mm256_fmadd_ps(wv, v0, a0##r);                 \
        a1##r = _mm256_fmadd_ps(wv, v1, a1##r);                 \
        a2##r = _mm256_fmadd_ps(wv, v2, a2##r);                 \
    } while (0)
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
#undef ROW
    }
#define ST4(c, v0, v1, v2, v3)            \
    do {                                  \
        _mm256_storeu_ps((c), v0);        \
        _mm256_storeu_ps((c) + 8, v1);    \
        _mm256_storeu_ps((c) + 16, v2);   \
        _mm256_storeu_ps((c) + 24, v3);   \
    } while (0)
    ST4(c0, a00, a01, a02, a03);
    ST4(c1, a10, a11, a12, a13);
    ST4(c2, a20, a21, a22, a23);
#undef ST4
}

void vx_gemm_f16_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                      size_t act_stride, int ntok, float *out, int64_t ldo) {
    if (ntok < MIN_TOK_F16) {
        gemv_tokens(vx_gemv_f16_avx2, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
        return;
    }
    float buf[4][KC16];
    __m256 acc[GEMM_TT][4], spare[3][4];
    const int64_t n8 = n & ~(int64_t)7;
    for (int r0 = 0; r0 < nrows; r0 += 4) {
        const int R = nrows - r0 < 4 ? nrows - r0 : 4;
        const uint16_t *rows[4];
        for (int r = 0; r < 4; r++) rows[r] = row_at(w, row_stride, r0 + (r < R ? r : R - 1));
        for (int t0 = 0; t0 < ntok; t0 += GEMM_TT) {
            const int nt = ntok - t0 < GEMM_TT ? ntok - t0 : GEMM_TT;
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < 4; r++) acc[t][r] = _mm256_setzero_ps();
            for (int64_t i0 = 0; i0 < n8; i0 += KC16) {
                const int kc = (int)(n8 - i0 < KC16 ? n8 - i0 : KC16);
                for (int r = 0; r < 4; r++)
                    for (int i = 0; i < kc; i += 8)
                        _mm256_storeu_ps(&buf[r][i], _mm256_cvtph_ps(load128(rows[r] + i0 + i)));
                /* the next chunk arrives from DRAM while the tokens run */
                for (int r = 0; r < 4; r++)
                    for (int o = 0; o < KC16; o += 32)
                        _mm_prefetch((const char *)(rows[r] + i0 + kc + o), _MM_HINT_T0);
                for (int t = 0; t < nt; t += 3) {
                    /* a short last group repeats its first token into spare accumulators */
                    const float *x[3];
                    float *c[3];
                    for (int j = 0; j < 3; j++) {
                        const int tj = t + j < nt ? t + j : t;
                        x[j] = (const float *)((const uint8_t *)act + (size_t)(t0 + tj) * act_stride) + i0;
                        if (t + j < nt) {
                            c[j] = (float *)acc[t + j];
                        } else { /* zeroed: no garbage (NaN, subnormal) in the FMAs */
                            c[j] = (float *)spare[j];
                            for (int r = 0; r < 4; r++) spare[j][r] = _mm256_setzero_ps();
                        }
                    }
                    f16_tok3(buf, kc, x[0], x[1], x[2], c[0], c[1], c[2]);
                }
            }
            for (int t = 0; t < nt; t++) {
                const float *x = (const float *)((const uint8_t *)act + (size_t)(t0 + t) * act_stride);
                for (int r = 0; r < R; r++) {
                    float s = hsum_ps(acc[t][r]);
                    for (int64_t j = n8; j < n; j++) s += f16(rows[r][j]) * x[j];
                    out[(int64_t)(t0 + t) * ldo + r0 + r] = s;
                }
            }
        }
    }
}
