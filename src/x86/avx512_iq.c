/*
 * avx512_iq.c - AVX-512 GEMV and GEMM of the grid i-quants (IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) with Q8_K activations.
 *
 * The AVX2 kernels (avx2_iq.c) take a 32-element sub-block a step: its
 * book magnitudes, a vector of signs (a table lookup per 7-bit field),
 * sign(q), maddubs, madd with the scales, add. Here a step is a pair of
 * sub-blocks (64 elements, one zmm) and costs less per element:
 *   - signs are a 64-bit mask, negating the activations by one masked
 *     subtraction: IQ2_S and IQ3_S store sign bytes (the mask is one
 *     load); the 7-bit fields of IQ2_XXS, IQ2_XS and IQ3_XXS (32 a block)
 *     are spread into bytes and given their eighth bit, the parity, by a
 *     dozen vector instructions for the whole block, and each pair's 64
 *     bits then go to a mask register; a block's masks are made while the
 *     block before it is summed, which takes their latency off the path
 *     (scalar pdep and parity per pair: IQ2_XS 46 cycles a block, 38 this
 *     way; masks built in vector registers by vpshufb and vptestmb: 50);
 *   - the two 16-element scales of each sub-block go to their words by one
 *     vpermw, and vpdpwssd multiplies the maddubs pairs by them and
 *     accumulates in one instruction;
 *   - IQ1's codes are unsigned (8 g + shift + 16, 7..25: no mask), with
 *     16 sum(q) per 16 elements taken off once per block from Q8_K's sums,
 *     for IQ1_S as well as IQ1_M.
 * The magnitudes are the AVX2 tier's (iq_blocks.h: entries loaded by index
 * straight into vector registers). Tried and dropped on Zen 4: vpgatherqq
 * for them (IQ2_XXS 41 -> 64 cycles a block; Intel's gathers are slow
 * since the Downfall microcode too), and the IQ2_XXS book as 256 16-bit
 * level codes in eight zmm, looked up 32 at a time by vpermt2w and blends
 * and spread into bytes by vpshufb and vptestmb (3% faster, not worth the
 * tables). The book indices that several fields assemble (prep_*) are
 * made a block ahead too: reloaded at once from the store that made them,
 * they stalled (IQ3_S 83 -> 66 cycles a block, IQ1_S 55 -> 50; the AVX2
 * gemv likewise). Every block's integer sum is exact
 * and the float steps are the canonical ones, so these kernels give the
 * AVX2 tier's bits, and the GEMM the GEMV's.
 */
#include "isa512.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant_iq.h"
#include "iq_blocks.h"

/* two 256-bit halves: sub-block 2p in the low one, 2p + 1 in the high */
AINLINE __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* 32 bytes of 7-bit sign fields (top bits clear) to the 256 signs they
 * stand for: bit 7 of each byte the parity of its seven (the xors fold
 * each byte into its bit 0; what the shifts bring in from the next byte
 * never reaches it) */
AINLINE __m256i signs7x32(__m256i x) {
    __m256i t = _mm256_xor_si256(x, _mm256_srli_epi32(x, 4));
    t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 2));
    t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 1));
    return _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(t, 7), _mm256_set1_epi8((char)0x80), 0xF8); /* a | b & c */
}
/* eight u32 of four 7-bit fields each (bits 0, 7, 14, 21) as 32 bytes */
AINLINE __m256i fields28(__m256i a) {
    __m256i x = _mm256_and_si256(a, _mm256_set1_epi32(0x7F));
    x = _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(a, 1), _mm256_set1_epi32(0x7F00), 0xF8);
    x = _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x7F0000), 0xF8);
    return _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(a, 3), _mm256_set1_epi32(0x7F000000), 0xF8);
}
/* the four 64-bit lanes of a block's signs: pair p's mask is lane p */
AINLINE void lanes4(__m256i s, uint64_t k[4]) {
    const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
    k[0] = (uint64_t)_mm_cvtsi128_si64(lo);
    k[1] = (uint64_t)_mm_extract_epi64(lo, 1);
    k[2] = (uint64_t)_mm_cvtsi128_si64(hi);
    k[3] = (uint64_t)_mm_extract_epi64(hi, 1);
}

/* ---- per type: the magnitudes (unsigned codes) of sub-blocks 2p and
 * 2p + 1 */

#define MAG_FROM_SUB(name)                                                                      \
    AINLINE __m512i mag_##name(const uint8_t *b, const uint16_t *ix, int p) {                   \
        __m256i s0, s1; /* the AVX2 sign vectors: unused, and not computed */                   \
        const __m256i lo = sub_##name(b, ix, 2 * p, &s0), hi = sub_##name(b, ix, 2 * p + 1, &s1); \
        (void)s0, (void)s1;                                                                     \
        return join(lo, hi);                                                                    \
    }
/* eight 64-bit entries, in pairs straight from memory, into one zmm */
AINLINE __m512i g64x8(const uint64_t *book, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned f,
                      unsigned g, unsigned h) {
    const __m256i lo = _mm256_set_m128i(ld2x64(book + c, book + d), ld2x64(book + a, book + b));
    return join(lo, _mm256_set_m128i(ld2x64(book + g, book + h), ld2x64(book + e, book + f)));
}
AINLINE __m512i mag_iq2_xxs(const uint8_t *b, const uint16_t *ix, int p) {
    (void)ix;
    const uint8_t *q = b + 2 + 16 * p;
    return g64x8(vx_iq2xxs_grid, q[0], q[1], q[2], q[3], q[8], q[9], q[10], q[11]);
}
MAG_FROM_SUB(iq2_xs)
MAG_FROM_SUB(iq2_s)
MAG_FROM_SUB(iq3_xxs)
MAG_FROM_SUB(iq3_s)
MAG_FROM_SUB(iq1_m) /* its codes 8 g + shift + 16 */
#undef MAG_FROM_SUB

/* IQ1_S: 8 g + shift + 16, the shift one per sub-block (bit 15 of qh[ib]) */
AINLINE __m256i code_iq1_s(const uint8_t *b, const uint16_t *ix, int ib) {
    __m256i g;
    (void)sub_iq1_s(b, ix, ib, &g);
    const int minus = ld16(b + 2 + 32 + 2 * ib) >> 15;
    return iq1_codes(g, _mm256_set1_epi8((char)(minus ? 16 - 1 : 16 + 1)));
}
AINLINE __m512i mag_iq1_s(const uint8_t *b, const uint16_t *ix, int p) {
    return join(code_iq1_s(b, ix, 2 * p), code_iq1_s(b, ix, 2 * p + 1));
}

AINLINE uint64_t ld64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
/* ---- per type: the sign masks of the four pairs of a block (bit e of
 * k[p]: element 64 p + e negative) */
/* IQ2_XXS: the u32 after each sub-block's four indices (the odd u32 of qs) */
AINLINE void sgn_iq2_xxs(const uint8_t *b, uint64_t k[4]) {
    const __m512i idx = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i aux = _mm512_permutexvar_epi32(idx, _mm512_loadu_si512((const void *)(b + 2)));
    lanes4(signs7x32(fields28(_mm512_castsi512_si256(aux))), k);
}
/* IQ3_XXS: eight u32 after the 64 index bytes */
AINLINE void sgn_iq3_xxs(const uint8_t *b, uint64_t k[4]) { lanes4(signs7x32(fields28(load256(b + 2 + 64))), k); }
/* IQ2_XS: the top 7 bits of each u16 of qs */
AINLINE void sgn_iq2_xs(const uint8_t *b, uint64_t k[4]) {
    const __m512i f = _mm512_srli_epi16(_mm512_loadu_si512((const void *)(b + 2)), 9);
    lanes4(signs7x32(_mm512_cvtepi16_epi8(f)), k);
}
/* IQ2_S, IQ3_S: sign bytes as they are */
AINLINE void sgn_bytes(const uint8_t *s, uint64_t k[4]) {
    for (int p = 0; p < 4; p++) k[p] = ld64(s + 8 * p);
}
AINLINE void sgn_iq2_s(const uint8_t *b, uint64_t k[4]) { sgn_bytes(b + 2 + 32, k); }
AINLINE void sgn_iq3_s(const uint8_t *b, uint64_t k[4]) { sgn_bytes(b + 2 + 64 + 8, k); }
AINLINE void sgn_none(uint64_t k[4]) {
    for (int p = 0; p < 4; p++) k[p] = 0;
}
#define sgn_iq1_s(b, k) ((void)(b), sgn_none(k))
#define sgn_iq1_m(b, k) ((void)(b), sgn_none(k))

/* IQ1's correction, 16 ls sum(q) per 16 elements (fin_iq1_m); none for the others */
#define ext512_iq2_xxs(b, lsv) ext_iq2_xxs(b)
#define ext512_iq2_xs(b, lsv) ext_iq2_xs(b)
#define ext512_iq2_s(b, lsv) ext_iq2_s(b)
#define ext512_iq3_xxs(b, lsv) ext_iq3_xxs(b)
#define ext512_iq3_s(b, lsv) ext_iq3_s(b)
#define ext512_iq1_s(b, lsv) ls_bsum_order(lsv)
#define ext512_iq1_m(b, lsv) ls_bsum_order(lsv)
#define fin512_iq2_xxs fin_iq2_xxs
#define fin512_iq2_xs fin_iq2_xs
#define fin512_iq2_s fin_iq2_s
#define fin512_iq3_xxs fin_iq3_xxs
#define fin512_iq3_s fin_iq3_s
#define fin512_iq1_s fin_iq1_m
#define fin512_iq1_m fin_iq1_m

/* The scales of pair p, word w of the zmm taking the 16-element group
 * w / 8: sub-block 2 p + g / 2, half g % 2, which lsv keeps in word
 * 8 (g % 2) + 2 p + g / 2 */
#define SW(p, g) (short)(8 * ((g) % 2) + 2 * (p) + (g) / 2)
#define SW8(p, g) SW(p, g), SW(p, g), SW(p, g), SW(p, g), SW(p, g), SW(p, g), SW(p, g), SW(p, g)
#define SWP(p) {SW8(p, 0), SW8(p, 1), SW8(p, 2), SW8(p, 3)}
static const short kscale_idx[4][32] __attribute__((aligned(64))) = {SWP(0), SWP(1), SWP(2), SWP(3)};
AINLINE __m512i scales_of(__m512i lsv, int p) {
    return _mm512_permutexvar_epi16(_mm512_load_si512((const void *)kscale_idx[p]), lsv);
}

/* q with the masked elements negated (|q| <= 127: no overflow) */
AINLINE __m512i signed_q(const int8_t *q, uint64_t k) {
    const __m512i v = _mm512_loadu_si512((const void *)q);
    return _mm512_mask_sub_epi8(v, (__mmask64)k, _mm512_setzero_si512(), v);
}

/* the eight int32 lanes of a 16-lane sum, added pairwise */
AINLINE __m256i fold(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

AINLINE float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

/* a block decoded for the GEMM: per pair magnitudes, sign masks, scales */
typedef struct {
    __m512i m[4], sc[4];
    uint64_t k[4];
    __m256i ext;
} dec5;
#define DEC5(name) dec5_##name
#define DOT5(name) dot5_##name

#define DEFINE_IQ512(name, BS)                                                                                 \
    void VX512(vx_gemv_##name)(int64_t n, const void *w, size_t rs, int nrows, const void *y, float *out) {   \
        const vx_block_q8_K *yb = y;                                                                          \
        const int64_t nb = n / VX_QK_K;                                                                       \
        for (int r = 0; r < nrows; r++) {                                                                     \
            const uint8_t *row = (const uint8_t *)w + (size_t)r * rs;                                         \
            float acc = 0.0f;                                                                                 \
            uint64_t k[4];                                                                                    \
            uint16_t ixb[2][64]; /* the next block's indices, a block ahead */                                \
            prep_##name(row, ixb[0]);                                                                         \
            sgn_##name(row, k);                                                                               \
            for (int64_t b = 0; b < nb; b++) {                                                                \
                const uint8_t *blk = row + (size_t)b * (BS);                                                  \
                uint64_t kn[4]; /* the next block's, a block ahead (this one's again at the end) */           \
                sgn_##name(blk + (b + 1 < nb ? (BS) : 0), kn);                                                \
                const uint16_t *ix = ixb[b & 1];                                                              \
                prep_##name(blk + (b + 1 < nb ? (BS) : 0), ixb[(b + 1) & 1]);                                 \
                const __m256i lsv = lsv_##name(blk);                                                          \
                const __m512i lsv5 = _mm512_castsi256_si512(lsv);                                             \
                __m512i s = _mm512_setzero_si512();                                                           \
                _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                                         \
                    const __m512i m = mag_##name(blk, ix, p);                                                 \
                    const __m512i q = signed_q(yb[b].qs + 64 * p, k[p]);                                      \
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(m, q), scales_of(lsv5, p));               \
                }                                                                                             \
                const __m256i I = fin512_##name(fold(s), ext512_##name(blk, lsv), &yb[b]);                    \
                acc = fma1(fac_##name(blk) * yb[b].d, (float)hsum_epi32(I), acc);                             \
                for (int p = 0; p < 4; p++) k[p] = kn[p];                                                     \
            }                                                                                                 \
            out[r] = acc;                                                                                     \
        }                                                                                                     \
    }                                                                                                         \
    AINLINE void dec5_##name(const uint8_t *blk, dec5 *d) {                                                   \
        uint16_t ix[64];                                                                                      \
        prep_##name(blk, ix);                                                                                 \
        const __m256i lsv = lsv_##name(blk);                                                                  \
        d->ext = ext512_##name(blk, lsv);                                                                     \
        sgn_##name(blk, d->k);                                                                                \
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                                                 \
            d->m[p] = mag_##name(blk, ix, p);                                                                 \
            d->sc[p] = scales_of(_mm512_castsi256_si512(lsv), p);                                             \
        }                                                                                                     \
    }                                                                                                         \
    AINLINE __m256i dot5_##name(const dec5 *d, const vx_block_q8_K *y) {                                      \
        __m512i s = _mm512_setzero_si512();                                                                   \
        for (int p = 0; p < 4; p++)                                                                           \
            s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->m[p], signed_q(y->qs + 64 * p, d->k[p])),      \
                                    d->sc[p]);                                                                \
        return fin512_##name(fold(s), d->ext, y);                                                             \
    }                                                                                                         \
    IQ_GEMM(gemm512_##name, name, BS, dec5, DEC5, DOT5)                                                       \
    DEFINE_GEMM_ENTRY(VX512(vx_gemm_##name), VX512(vx_gemv_##name), gemm512_##name, 0, 2)

#define DEF(T, name) DEFINE_IQ512(name, sizeof(vx_block_##name))
VX_IQ_GRID_KERNELS(DEF)
#undef DEF
