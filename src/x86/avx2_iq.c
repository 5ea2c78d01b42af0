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

/* a block decoded for the GEMM: per sub-block signs, magnitudes, scales */
typedef struct {
    __m256i c[8], ac[8], sc[8], ext;
} dec2;
#define DEC2(name) dec2_##name
#define DOT2(name) dot2_##name

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
    AINLINE void dec2_##name(const uint8_t *blk, dec2 *d) {                                                   \
        uint16_t ix[64];                                                                                      \
        prep_##name(blk, ix);                                                                                 \
        const __m256i lsv = lsv_##name(blk);                                                                  \
        d->ext = ext_##name(blk);                                                                             \
        _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                              \
            d->ac[ib] = sub_##name(blk, ix, ib, &d->c[ib]);                                                   \
            d->sc[ib] = pick(lsv, ib);                                                                        \
        }                                                                                                     \
    }                                                                                                         \
    AINLINE __m256i dot2_##name(const dec2 *d, const vx_block_q8_K *y) {                                      \
        __m256i s = sub_dot(d->c[0], d->ac[0], d->sc[0], y->qs);                                              \
        for (int ib = 1; ib < 8; ib++)                                                                        \
            s = _mm256_add_epi32(s, sub_dot(d->c[ib], d->ac[ib], d->sc[ib], y->qs + 32 * ib));                \
        return fin_##name(s, d->ext, y);                                                                      \
    }                                                                                                         \
    IQ_GEMM(gemm_##name, name, BS, dec2, DEC2, DOT2)                                                          \
    DEFINE_GEMM_ENTRY(vx_gemm_##name##_avx2, vx_gemv_##name##_avx2, gemm_##name, 0, 2)


#define DEF(T, name) DEFINE_IQ(name, sizeof(vx_block_##name))
VX_IQ_GRID_KERNELS(DEF)
#undef DEF
