/*
 * avx2_gemm_k.c - prefill GEMM kernels for Q4_K and Q6_K weights x Q8_K
 * activations (compiled with -mavx2 -mfma -mf16c -mbmi2).
 *
 * As in avx2_gemm.c: a group of up to 4 rows is unpacked a few
 * super-blocks at a time into an L1 buffer - codes as bytes for
 * _mm256_maddubs_epi16, sub-block scales already broadcast to the 16-bit
 * lanes _mm256_madd_epi16 wants, mins and fp16 factors as vectors - so the
 * 6-bit scale decoding and nibble/bit extraction the gemv does per token
 * happen once per tile. The per-token arithmetic is the gemv's
 * (avx2_quant_k.c): the same int32 lane layout, the same float products
 * and FMAs in the same order, so results are bit-identical to the gemv's.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"
#include "quant_ref.h"

#define QK VX_QK_K
/* Tokens per accumulator tile; mm() in forward.c passes tiles of 64. */
#define GEMM_TT 64
/* Super-blocks per unpacked chunk: 4 rows x 4 x 576 bytes = 9 KiB, which
 * stays in L1 with the accumulators (8 KiB) and a token's activations. */
#define CBK 4

/* One unpacked (super-block, row) entry. Q4_K: code vector s is
 * sub-block s (32 codes), sc[s] its scale in every 16-bit lane, mn the 8
 * mins as int16, dd {d, dmin, 0, 0}. Q6_K: code vector 4h + j is step j
 * of half h (two 16-code sub-blocks, one per 128-bit lane), sc[4h + j]
 * their two scales, sc16 the 16 scales as int16 (for the -32 offset), dd
 * {d, ...}. */
typedef struct {
    uint8_t q[8][32];
    int16_t sc[8][16];
    int16_t sc16[16];
    int16_t mn[8];
    float dd[4];
} entryK;

/* ---------------------------------------------------------------- Q4_K */

static void unpack_q4_K(const uint8_t *const rows[4], int64_t i0, int nb, entryK *buf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < nb; i++)
        for (int r = 0; r < 4; r++) {
            const vx_block_q4_K *b = (const vx_block_q4_K *)(const void *)rows[r] + i0 + i;
            entryK *e = &buf[4 * i + r];
            uint8_t sc[8], mn[8];
            vx_q4_K_unpack_scales(b->scales, sc, mn);
            for (int c = 0; c < 4; c++) {
                const __m256i q = load256(b->qs + 32 * c);
                store256(e->q[2 * c], _mm256_and_si256(q, m4));
                store256(e->q[2 * c + 1], _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            }
            for (int s = 0; s < 8; s++) {
                store256(e->sc[s], _mm256_set1_epi16((short)sc[s]));
                e->mn[s] = (int16_t)mn[s];
            }
            _mm_storeu_ps(e->dd, _mm_cvtph_ps(_mm_cvtsi32_si128((int)load_u32((const uint8_t *)&b->d))));
        }
}

/* One token against nb unpacked super-blocks: acc[r] += row r. */
AINLINE void token_q4_K(const entryK *buf, int nb, const vx_block_q8_K *y, __m256 acc[4]) {
    for (int i = 0; i < nb; i++) {
        const entryK *e = &buf[4 * i];
        /* Q8_K group sums pairwise: the sums of the 32-code sub-blocks */
        const __m128i ybs = _mm_hadd_epi16(load128(y[i].bsums), load128(y[i].bsums + 8));
        const __m128 yd = _mm_set1_ps(y[i].d);
        __m256i isum[4];
        for (int r = 0; r < 4; r++) isum[r] = _mm256_setzero_si256();
        /* unrolled only 4 deep: fully unrolled, GCC turns the isum chains
         * into add trees over all 32 products and spills (~12% slower) */
#pragma GCC unroll 4
        for (int s = 0; s < 8; s++) {
            const __m256i ys = load256(y[i].qs + 32 * s);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m256i p = _mm256_maddubs_epi16(load256(e[r].q[s]), ys);
                isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, load256(e[r].sc[s])));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const __m128i msum = _mm_madd_epi16(load128(e[r].mn), ybs);
            const __m128 dd = _mm_mul_ps(_mm_loadu_ps(e[r].dd), yd);
            __m256 a = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)),
                                      _mm256_cvtepi32_ps(_mm256_zextsi128_si256(msum)), a);
        }
    }
}

/* ---------------------------------------------------------------- Q6_K */

static void unpack_q6_K(const uint8_t *const rows[4], int64_t i0, int nb, entryK *buf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2h = _mm256_set1_epi8(0x30);
    for (int i = 0; i < nb; i++)
        for (int r = 0; r < 4; r++) {
            const vx_block_q6_K *b = (const vx_block_q6_K *)(const void *)rows[r] + i0 + i;
            entryK *e = &buf[4 * i + r];
            const __m256i sc16 = _mm256_cvtepi8_epi16(load128(b->scales));
            store256(e->sc16, sc16);
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = load256(b->ql + 64 * h), l1 = load256(b->ql + 64 * h + 32);
                const __m256i qh = load256(b->qh + 32 * h);
                /* u = 4 low bits | 2 high bits << 4, in 0..63 */
                store256(e->q[4 * h + 0], _mm256_or_si256(_mm256_and_si256(l0, m4),
                                                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2h)));
                store256(e->q[4 * h + 1], _mm256_or_si256(_mm256_and_si256(l1, m4),
                                                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2h)));
                store256(e->q[4 * h + 2], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                                          _mm256_and_si256(qh, m2h)));
                store256(e->q[4 * h + 3], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2h)));
                /* step j: scale 8h + 2j in the low lane, 8h + 2j + 1 in the high one */
                for (int j = 0; j < 4; j++) {
                    const int s = 8 * h + 2 * j;
                    store256(e->sc[4 * h + j], _mm256_set_m128i(_mm_set1_epi16((short)b->scales[s + 1]),
                                                                _mm_set1_epi16((short)b->scales[s])));
                }
            }
            e->dd[0] = f16(b->d);
        }
}

AINLINE void token_q6_K(const entryK *buf, int nb, const vx_block_q8_K *y, __m256 acc[4]) {
    for (int i = 0; i < nb; i++) {
        const entryK *e = &buf[4 * i];
        const __m256i ybs = load256(y[i].bsums);
        __m256i isum[4];
        /* the -32 offset of the codes, through the group sums */
        for (int r = 0; r < 4; r++)
            isum[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(load256(e[r].sc16), ybs), 5));
        /* unrolled only 4 deep: fully unrolled, GCC turns the isum chains
         * into add trees over all 32 products and spills (~12% slower) */
#pragma GCC unroll 4
        for (int s = 0; s < 8; s++) {
            const __m256i ys = load256(y[i].qs + 32 * s);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m256i p = _mm256_maddubs_epi16(load256(e[r].q[s]), ys);
                isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, load256(e[r].sc[s])));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            acc[r] =
                _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * e[r].dd[0]), _mm256_cvtepi32_ps(isum[r]), acc[r]);
    }
}

/* ------------------------------------------------------------- driver */

enum { G_Q4_K, G_Q6_K };

/* Below a few tokens the unpacking is not paid back and the gemv per
 * token is faster (Zen 3, 4096 rows of 2048 from L3; gemm / gemv speed at
 * 2, 3, 4, 8 tokens: Q4_K 0.54 0.70 0.82 1.08, Q6_K 0.77 0.97 1.08 1.08),
 * so the entry points fall back to it under these token counts: batched
 * decoding of a few sequences keeps the gemv speed. */
#define MIN_TOK_Q4_K 8
#define MIN_TOK_Q6_K 4

AINLINE void gemmK(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                   size_t act_stride, int ntok, float *out, int64_t ldo) {
    const int64_t nb = n / QK;
    const size_t bs = k == G_Q4_K ? sizeof(vx_block_q4_K) : sizeof(vx_block_q6_K);
    entryK buf[CBK * 4];
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
            for (int64_t i0 = 0; i0 < nb; i0 += CBK) {
                const int cb = (int)(nb - i0 < CBK ? nb - i0 : CBK);
                if (k == G_Q4_K) unpack_q4_K(rows, i0, cb, buf);
                else unpack_q6_K(rows, i0, cb, buf);
                /* the next chunk arrives from DRAM while the tokens run */
                for (int r = 0; r < 4; r++)
                    for (size_t o = 0; o < CBK * bs; o += 64)
                        _mm_prefetch((const char *)rows[r] + (size_t)(i0 + cb) * bs + o, _MM_HINT_T0);
                for (int t = 0; t < nt; t++) {
                    const uint8_t *yt = (const uint8_t *)act + (size_t)(t0 + t) * act_stride;
                    const vx_block_q8_K *y = (const vx_block_q8_K *)(const void *)yt + i0;
                    if (k == G_Q4_K) token_q4_K(buf, cb, y, acc[t]);
                    else token_q6_K(buf, cb, y, acc[t]);
                }
            }
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < R; r++) out[(int64_t)(t0 + t) * ldo + r0 + r] = hsum_ps(acc[t][r]);
        }
    }
}

void vx_gemm_q4_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo) {
    if (ntok < MIN_TOK_Q4_K)
        gemv_tokens(vx_gemv_q4_K_avx2, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
    else
        gemmK(G_Q4_K, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
}

void vx_gemm_q6_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo) {
    if (ntok < MIN_TOK_Q6_K)
        gemv_tokens(vx_gemv_q6_K_avx2, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
    else
        gemmK(G_Q6_K, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo);
}
