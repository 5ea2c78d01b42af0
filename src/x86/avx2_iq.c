/*
 * avx2_iq.c - AVX2 GEMV and GEMM of the grid i-quants (IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) with Q8_K activations.
 *
 * Per block: the book indices of the types that assemble them from several
 * fields (prep_*, 16 at a time), the 16 sub-block scales in one vector
 * (lsv_*), and for IQ1 a term from Q8_K's 16-element sums (ext_*, fin_*).
 * Per 32-element sub-block: one vector of book magnitudes (four 64-bit or
 * eight 32-bit entries loaded by index) and one of signs (a table of the
 * 7-bit sign fields, or the sign bytes by a shuffle and compare), dotted
 * as maddubs(magnitudes, sign(q, signs)) (|w| <= 62, |q| <= 127: no pair
 * saturates) and madd with the sub-block's two scales. IQ1_S: the book
 * values g themselves (maddubs(1, sign(q, g))), 8 sum g q + shift sum q;
 * IQ1_M: 8 g + shift + 16 unsigned, minus 16 sum q. Per row and block the
 * exact integer sum I_b, then acc = fma(f_b dy_b, I_b, acc) in ascending
 * block order: the canonical order (avx2_quant_util.h), so the GEMM, which
 * decodes each block once for up to 64 tokens, gives the gemv's bits.
 */
#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant_iq.h"
#include "iq_blocks.h"

AINLINE __m256i pick(__m256i lsv, int ib) {
    return _mm256_shuffle_epi8(lsv, _mm256_set1_epi16((short)(2 * ib | (2 * ib + 1) << 8)));
}

/* one sub-block's share: madd(maddubs(magnitudes, sign(q, signs)), scales) */
AINLINE __m256i sub_dot(__m256i sg, __m256i m, __m256i sc, const int8_t *q) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(load256(q), sg)), sc);
}

AINLINE float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

#define GT 64 /* the GEMM's tokens per pass */

#define DEFINE_IQ(name, BS)                                                                                    \
    void vx_gemv_##name##_avx2(int64_t n, const void *w, size_t rs, int nrows, const void *y, float *out) {   \
        const vx_block_q8_K *yb = y;                                                                          \
        const int64_t nb = n / VX_QK_K;                                                                       \
        for (int r = 0; r < nrows; r++) {                                                                     \
            const uint8_t *row = (const uint8_t *)w + (size_t)r * rs;                                         \
            float acc = 0.0f;                                                                                 \
            uint16_t ixb[2][64]; /* the next block's indices, a block ahead (no stall on their reload) */     \
            prep_##name(row, ixb[0]);                                                                         \
            for (int64_t b = 0; b < nb; b++) {                                                                \
                const uint8_t *blk = row + (size_t)b * (BS);                                                  \
                const uint16_t *ix = ixb[b & 1];                                                              \
                prep_##name(blk + (b + 1 < nb ? (BS) : 0), ixb[(b + 1) & 1]);                                 \
                const __m256i lsv = lsv_##name(blk);                                                          \
                __m256i s = _mm256_setzero_si256();                                                           \
                _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                      \
                    __m256i sg;                                                                               \
                    const __m256i m = sub_##name(blk, ix, ib, &sg);                                           \
                    s = _mm256_add_epi32(s, sub_dot(sg, m, pick(lsv, ib), yb[b].qs + 32 * ib));               \
                }                                                                                             \
                s = fin_##name(s, ext_##name(blk), &yb[b]);                                                   \
                acc = fma1(fac_##name(blk) * yb[b].d, (float)hsum_epi32(s), acc);                             \
            }                                                                                                 \
            out[r] = acc;                                                                                     \
        }                                                                                                     \
    }                                                                                                         \
    static void gemm_##name(int kind, int64_t n, const void *w, size_t rs, int nrows, const void *act,        \
                            size_t as, int ntok, float *out, int64_t ldo, int accumulate) {                  \
        const int64_t nb = n / VX_QK_K;                                                                       \
        for (int t0 = 0; t0 < ntok; t0 += GT) {                                                               \
            const int nt = ntok - t0 < GT ? ntok - t0 : GT, ng = (nt + 7) / 8;                                \
            const vx_block_q8_K *ys[GT];                                                                      \
            for (int j = 0; j < ng * 8; j++)                                                                  \
                ys[j] = (const vx_block_q8_K *)(const void *)((const uint8_t *)act +                          \
                                                              (size_t)(t0 + (j < nt ? j : nt - 1)) * as);     \
            for (int r = 0; r < nrows; r++) {                                                                 \
                const uint8_t *row = (const uint8_t *)w + (size_t)r * rs;                                     \
                __m256 acc[GT / 8];                                                                           \
                for (int g = 0; g < ng; g++) acc[g] = _mm256_setzero_ps();                                    \
                for (int64_t b = 0; b < nb; b++) {                                                            \
                    const uint8_t *blk = row + (size_t)b * (BS);                                              \
                    __m256i c[8], ac[8], sc[8];                                                               \
                    uint16_t ix[64];                                                                          \
                    prep_##name(blk, ix);                                                                     \
                    const __m256i lsv = lsv_##name(blk), ext = ext_##name(blk);                               \
                    _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                  \
                        ac[ib] = sub_##name(blk, ix, ib, &c[ib]);                                             \
                        sc[ib] = pick(lsv, ib);                                                               \
                    }                                                                                         \
                    const __m256 f = _mm256_set1_ps(fac_##name(blk));                                         \
                    for (int g = 0; g < ng; g++) {                                                            \
                        __m256i I[8];                                                                         \
                        float dy[8];                                                                          \
                        for (int j = 0; j < 8; j++) {                                                         \
                            const vx_block_q8_K *y = ys[8 * g + j] + b;                                       \
                            __m256i s = sub_dot(c[0], ac[0], sc[0], y->qs);                                   \
                            for (int ib = 1; ib < 8; ib++)                                                    \
                                s = _mm256_add_epi32(s, sub_dot(c[ib], ac[ib], sc[ib], y->qs + 32 * ib));     \
                            I[j] = fin_##name(s, ext, y);                                                     \
                            dy[j] = y->d;                                                                     \
                        }                                                                                     \
                        acc[g] = _mm256_fmadd_ps(_mm256_mul_ps(f, _mm256_loadu_ps(dy)),                       \
                                                 _mm256_cvtepi32_ps(hsum8_epi32(I)), acc[g]);                 \
                    }                                                                                         \
                }                                                                                             \
                float o[GT];                                                                                  \
                for (int g = 0; g < ng; g++) _mm256_storeu_ps(o + 8 * g, acc[g]);                             \
                for (int t = 0; t < nt; t++) {                                                                \
                    float *d = out + (int64_t)(t0 + t) * ldo + r;                                             \
                    *d = accumulate ? *d + o[t] : o[t];                                                       \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    DEFINE_GEMM_ENTRY(vx_gemm_##name##_avx2, vx_gemv_##name##_avx2, gemm_##name, 0, 2)


DEFINE_IQ(iq2_xxs, sizeof(vx_block_iq2_xxs))
DEFINE_IQ(iq2_xs, sizeof(vx_block_iq2_xs))
DEFINE_IQ(iq2_s, sizeof(vx_block_iq2_s))
DEFINE_IQ(iq3_xxs, sizeof(vx_block_iq3_xxs))
DEFINE_IQ(iq3_s, sizeof(vx_block_iq3_s))
DEFINE_IQ(iq1_s, sizeof(vx_block_iq1_s))
DEFINE_IQ(iq1_m, sizeof(vx_block_iq1_m))
