/*
 * iq_blocks.h - the grid i-quants' block fields as AVX2 vectors, shared by
 * the AVX2 kernels (avx2_iq.c) and the AVX-512 ones (avx512_iq.c): per
 * block the book indices that several fields assemble (prep_*, 16 at a
 * time), the 16 sub-block scales in one vector (lsv_*), the block factor
 * (fac_*), IQ1's term from Q8_K's 16-element sums (ext_*, fin_*); per
 * 32-element sub-block its book magnitudes and signs as vectors (sub_*).
 * Include after avx2_quant_util.h (and isa512.h in an avx512_*.c).
 */
#ifndef VX_IQ_BLOCKS_H
#define VX_IQ_BLOCKS_H

/* ksign7: the eight signs of a 7-bit sign field (vx_iq_signs7: the eighth
 * makes the count of minus signs even) as a 64-bit lane whose byte j is
 * 0xFF (negative) or 0x01, for _mm256_sign_epi8 on the activations;
 * compile-time. */
#define SB(v, j) ((((v) >> (j)) & 1) ? 0xFFull << (8 * (j)) : 0x01ull << (8 * (j)))
#define SGN8(v) (SB(v, 0) | SB(v, 1) | SB(v, 2) | SB(v, 3) | SB(v, 4) | SB(v, 5) | SB(v, 6) | SB(v, 7))
#define PAR7(i) ((((i) >> 0) ^ ((i) >> 1) ^ ((i) >> 2) ^ ((i) >> 3) ^ ((i) >> 4) ^ ((i) >> 5) ^ ((i) >> 6)) & 1)
#define SGN7(i) SGN8((i) | PAR7(i) << 7)
#define X4(M, b) M(b), M(b + 1), M(b + 2), M(b + 3)
#define X16(M, b) X4(M, b), X4(M, b + 4), X4(M, b + 8), X4(M, b + 12)
#define X64(M, b) X16(M, b), X16(M, b + 16), X16(M, b + 32), X16(M, b + 48)
static const uint64_t ksign7[128] = {X64(SGN7, 0), X64(SGN7, 64)};

AINLINE uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* four 64-bit entries straight from memory into a vector (no trip
 * through general registers; AVX2 gathers were slower on Zen 4) */
AINLINE __m128i ld2x64(const uint64_t *a, const uint64_t *b) {
    return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_loadl_epi64((const __m128i *)(const void *)a)),
                                         (const double *)(const void *)b));
}
AINLINE __m256i g64(const uint64_t *book, unsigned a, unsigned b, unsigned c, unsigned d) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(ld2x64(book + a, book + b)), ld2x64(book + c, book + d), 1);
}

/* the signs of four 7-bit fields (bits 0, 7, 14, 21 of a) */
AINLINE __m256i signs28(uint32_t a) { return g64(ksign7, a & 127, (a >> 7) & 127, (a >> 14) & 127, (a >> 21) & 127); }

/* the signs of four sign bytes: bit i of the 32 as byte i, by a byte
 * shuffle and a compare (no table) */
AINLINE __m256i signs32(const uint8_t *p) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)rd32(p)), shuf), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
}

/* eight 32-bit entries, loaded straight into vector registers */
AINLINE __m128i ld4x32(const uint32_t *book, unsigned a, unsigned b, unsigned c, unsigned d) {
    const __m128i ab = _mm_unpacklo_epi32(_mm_cvtsi32_si128((int)book[a]), _mm_cvtsi32_si128((int)book[b]));
    const __m128i cd = _mm_unpacklo_epi32(_mm_cvtsi32_si128((int)book[c]), _mm_cvtsi32_si128((int)book[d]));
    return _mm_unpacklo_epi64(ab, cd);
}
#define G32(book, i)                                                                                         \
    _mm256_inserti128_si256(_mm256_castsi128_si256(ld4x32(book, (i)[0], (i)[1], (i)[2], (i)[3])),           \
                            ld4x32(book, (i)[4], (i)[5], (i)[6], (i)[7]), 1)
AINLINE __m256i g32(const uint32_t *book, const uint16_t i[8]) { return G32(book, i); }
AINLINE __m256i g32b(const uint32_t *book, const uint8_t i[8]) { return G32(book, i); }

/* ---- per block: the book indices of the types that assemble them from
 * several fields, computed 16 at a time into ix (u16) */

AINLINE __m256i u8x16_to_u16(const uint8_t *p) { return _mm256_cvtepu8_epi16(load128(p)); }
AINLINE void store_ix(uint16_t *ix, __m256i v) { store256(ix, v); }

/* IQ2_S: ix[k] = qs[k] | bits 2 (k % 4).. of qh[k / 4] << 8: each qh byte
 * four times, shifted by a multiply */
AINLINE void prep_iq2_s(const uint8_t *b, uint16_t *ix) {
    const __m128i rep = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i mul = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    for (int h = 0; h < 2; h++) {
        const __m128i qh = _mm_cvtsi32_si128((int)rd32(b + 2 + 64 + 4 * h));
        const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(qh, rep)), mul),
                                            _mm256_set1_epi16(0x300));
        store_ix(ix + 16 * h, _mm256_or_si256(u8x16_to_u16(b + 2 + 16 * h), hi));
    }
}

/* IQ1_S: ix[k] = qs[k] | bits 3 (k % 4).. of the u16 qh[k / 4] << 8 */
AINLINE void prep_iq1_s(const uint8_t *b, uint16_t *ix) {
    const __m256i rep = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3,
                                         2, 3, 2, 3, 2, 3);
    const __m256i mul = _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1);
    for (int h = 0; h < 2; h++) {
        const uint8_t *qh = b + 2 + 32 + 8 * h; /* four u16 */
        const __m256i w = _mm256_setr_m128i(_mm_cvtsi32_si128((int)rd32(qh)), _mm_cvtsi32_si128((int)rd32(qh + 4)));
        const __m256i hi = _mm256_srli_epi16(
            _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(w, rep), mul), _mm256_set1_epi16(0xE00)), 1);
        store_ix(ix + 16 * h, _mm256_or_si256(u8x16_to_u16(b + 2 + 16 * h), hi));
    }
}

/* IQ1_M: ix[k] = qs[k] | (qh[k / 2] >> 4 (k % 2) & 7) << 8 */
AINLINE void prep_iq1_m(const uint8_t *b, uint16_t *ix) {
    const __m128i rep = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m256i mul = _mm256_setr_epi16(256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16);
    for (int h = 0; h < 2; h++) {
        const __m128i qh = _mm_loadl_epi64((const __m128i *)(const void *)(b + 32 + 8 * h));
        const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(qh, rep)), mul),
                                            _mm256_set1_epi16(0x700));
        store_ix(ix + 16 * h, _mm256_or_si256(u8x16_to_u16(b + 16 * h), hi));
    }
    /* the shift bits (3 and 7 of each qh byte), four per sub-block, as
     * nibbles of ix[32] (sub-blocks 0-3) and ix[33] (4-7) */
    uint64_t q0, q1;
    memcpy(&q0, b + 32, 8);
    memcpy(&q1, b + 40, 8);
    ix[32] = (uint16_t)_pext_u64(q0, 0x8888888888888888ull);
    ix[33] = (uint16_t)_pext_u64(q1, 0x8888888888888888ull);
}

/* IQ3_S: ix[8 ib + k] = qs[8 ib + k] | bit k of qh[ib] << 8, two sub-blocks
 * (16 indices, 16 bits of qh) a step */
AINLINE void prep_iq3_s(const uint8_t *b, uint16_t *ix) {
    const __m256i bits = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                           (short)0x8000);
    for (int j = 0; j < 4; j++) {
        const __m256i h = _mm256_and_si256(_mm256_set1_epi16((short)ld16(b + 2 + 64 + 2 * j)), bits);
        const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi16(h, bits), _mm256_set1_epi16(256));
        store_ix(ix + 16 * j, _mm256_or_si256(u8x16_to_u16(b + 2 + 16 * j), hi));
    }
}

#define prep_iq2_xxs(b, ix) ((void)(b), (void)(ix))
#define prep_iq2_xs(b, ix) ((void)(b), (void)(ix))
#define prep_iq3_xxs(b, ix) ((void)(b), (void)(ix))

/* ---- per type: the block factor f and sub-block ib's magnitudes and signs;
 * b points at the block (offsets as the structs in quant.h lay them out) */

AINLINE float fac_iq2_xxs(const uint8_t *b) { return f16(ld16(b)) * 0.125f; }
AINLINE __m256i sub_iq2_xxs(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    (void)ix;
    const uint8_t *q = b + 2 + 8 * ib;
    const uint32_t aux = rd32(q + 4);
    *sg = signs28(aux);
    return g64(vx_iq2xxs_grid, q[0], q[1], q[2], q[3]);
}

AINLINE float fac_iq2_xs(const uint8_t *b) { return f16(ld16(b)) * 0.125f; }
AINLINE __m256i sub_iq2_xs(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    const uint8_t *q = b + 2 + 8 * ib;
    (void)ix;
    unsigned v[4];
    for (int g = 0; g < 4; g++) v[g] = ld16(q + 2 * g);
    *sg = g64(ksign7, v[0] >> 9, v[1] >> 9, v[2] >> 9, v[3] >> 9);
    return g64(vx_iq2xs_grid, v[0] & 511, v[1] & 511, v[2] & 511, v[3] & 511);
}

AINLINE float fac_iq2_s(const uint8_t *b) { return f16(ld16(b)) * 0.125f; }
AINLINE __m256i sub_iq2_s(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    const uint16_t *i = ix + 4 * ib;
    *sg = signs32(b + 2 + 32 + 4 * ib);
    return g64(vx_iq2s_grid, i[0], i[1], i[2], i[3]);
}

AINLINE float fac_iq3_xxs(const uint8_t *b) { return f16(ld16(b)) * 0.25f; }
AINLINE __m256i sub_iq3_xxs(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    (void)ix;
    const uint8_t *q = b + 2 + 8 * ib;
    const uint32_t aux = rd32(b + 2 + 64 + 4 * ib);
    *sg = signs28(aux);
    return g32b(vx_iq3xxs_grid, q);
}

AINLINE float fac_iq3_s(const uint8_t *b) { return f16(ld16(b)); }
AINLINE __m256i sub_iq3_s(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    *sg = signs32(b + 2 + 64 + 8 + 4 * ib);
    return g32(vx_iq3s_grid, ix + 8 * ib);
}

/* IQ1: book values g (-1, 0, +1) as 8 g, plus the shifts (+1 or -1 per
 * group of 8: 64-bit lanes of 0x01 or 0xFF bytes) */
AINLINE __m256i iq1_codes(__m256i g, __m256i shift) {
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), shift);
}

AINLINE float fac_iq1_s(const uint8_t *b) { return f16(ld16(b)) * 0.125f; }
/* IQ1_S: the shift is one sign per sub-block, so its term d ls shift
 * sum(q) comes from Q8_K's 16-element sums once per block (ext, fin) and
 * the codes are the book values g themselves: maddubs(1, sign(q, g)) is
 * sum g q, 8 sum g q + shift sum q the integer dot of 8 g + shift */
AINLINE __m256i sub_iq1_s(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    (void)b;
    const uint16_t *i = ix + 4 * ib;
    *sg = g64(vx_iq1s_grid, i[0], i[1], i[2], i[3]);
    return _mm256_set1_epi8(1);
}
/* ls shift per 16 elements, in the order of Q8_K's bsums */
AINLINE __m256i ext_iq1_s(const uint8_t *b) {
    const __m128i h = load128(b + 2 + 32);
    const __m128i ls = _mm_add_epi16(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 12), _mm_set1_epi16(7)), 1),
                                     _mm_set1_epi16(1));
    const __m128i v = _mm_sign_epi16(ls, _mm_or_si128(h, _mm_set1_epi16(1))); /* h < 0: bit 15, shift -1 */
    return _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v));
}
AINLINE __m256i fin_iq1_s(__m256i s, __m256i ext, const vx_block_q8_K *y) {
    return _mm256_add_epi32(_mm256_slli_epi32(s, 3), _mm256_madd_epi16(load256(y->bsums), ext));
}

AINLINE float fac_iq1_m(const uint8_t *b) { /* vx_iq1_m_scale, inline */
    const uint8_t *s = b + 48;
    return f16((uint16_t)((ld16(s) >> 12) | ((ld16(s + 2) >> 8) & 0x00F0) | ((ld16(s + 4) >> 4) & 0x0F00) |
                          (ld16(s + 6) & 0xF000))) *
           0.125f;
}
/* IQ1_M: the codes plus 16, 8 g + shift + 16 (7..25), are unsigned, so
 * maddubs takes them as they are, and 16 sum(q) per 16 elements, from
 * Q8_K's sums, comes off once per block (ext, fin). kshift4: a nibble of
 * shift bits as four 64-bit lanes of 15 (shift -1) or 17 (+1) bytes. */
#define KL(n, g) (((n) >> (g) & 1) ? 0x0F0F0F0F0F0F0F0Full : 0x1111111111111111ull) /* 16 - 1, 16 + 1 */
#define KS4(n) {KL(n, 0), KL(n, 1), KL(n, 2), KL(n, 3)}
static const uint64_t kshift4[16][4] __attribute__((aligned(32))) = {
    KS4(0), KS4(1), KS4(2),  KS4(3),  KS4(4),  KS4(5),  KS4(6),  KS4(7),
    KS4(8), KS4(9), KS4(10), KS4(11), KS4(12), KS4(13), KS4(14), KS4(15)};

AINLINE __m256i sub_iq1_m(const uint8_t *b, const uint16_t *ix, int ib, __m256i *sg) {
    (void)b;
    const uint16_t *i = ix + 4 * ib;
    const __m256i g = g64(vx_iq1s_grid, i[0], i[1], i[2], i[3]);
    *sg = _mm256_set1_epi8(1);
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g),
                           load256(kshift4[(ix[32 + ib / 4] >> (4 * (ib % 4))) & 15]));
}

/* ---- per block: the 16 scales 2 s + 1 as int16, sub-block ib's first
 * 16 elements' in word ib of the low half, its second 16's in word ib of
 * the high half; pick() spreads sub-block ib's two over the halves */

AINLINE __m256i odd16(__m256i v) { return _mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(1)); }
AINLINE __m256i both_halves(__m128i v) { return _mm256_broadcastsi128_si256(v); }

/* IQ2_XS, IQ2_S: eight scale bytes, low nibbles the first 16, high the second */
AINLINE __m256i lsv_nibbles(const uint8_t *sc) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)sc), m = _mm_set1_epi8(15);
    return odd16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi64(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m))));
}
AINLINE __m256i lsv_iq2_xs(const uint8_t *b) { return lsv_nibbles(b + 2 + 64); }
AINLINE __m256i lsv_iq2_s(const uint8_t *b) { return lsv_nibbles(b + 2 + 64 + 8); }

/* IQ2_XXS: the top nibble of byte 8 ib + 7 of qs, for both halves */
AINLINE __m256i lsv_iq2_xxs(const uint8_t *b) {
    const __m256i pick = _mm256_setr_epi8(7, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 7, 15, -1, -1,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i u = _mm256_or_si256(_mm256_shuffle_epi8(load256(b + 2), pick),
                                      _mm256_slli_si256(_mm256_shuffle_epi8(load256(b + 2 + 32), pick), 2));
    /* u: low half bytes s0 s1 s4 s5, high half s2 s3 s6 s7 (before >> 4) */
    const __m128i t = _mm_unpacklo_epi16(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
    const __m128i n = _mm_and_si128(_mm_srli_epi16(t, 4), _mm_set1_epi8(15));
    return odd16(both_halves(_mm_cvtepu8_epi16(n)));
}

/* IQ3_XXS: the top nibble of the u32 at qs + 64 + 4 ib, for both halves */
AINLINE __m256i lsv_iq3_xxs(const uint8_t *b) {
    const __m256i v = _mm256_srli_epi32(load256(b + 2 + 64), 28);
    return odd16(_mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x88));
}

/* IQ3_S: nibble ib % 2 of scales[ib / 2], for both halves */
AINLINE __m256i lsv_iq3_s(const uint8_t *b) {
    const __m128i v = _mm_cvtsi32_si128((int)rd32(b + 2 + 64 + 8 + 32)), m = _mm_set1_epi8(15);
    const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m));
    return odd16(both_halves(_mm_cvtepu8_epi16(n)));
}

/* IQ1_S: bits 12..14 of the u16 qh[ib], for both halves */
AINLINE __m256i lsv_iq1_s(const uint8_t *b) {
    return odd16(both_halves(_mm_and_si128(_mm_srli_epi16(load128(b + 2 + 32), 12), _mm_set1_epi16(7))));
}

/* IQ1_M: 3-bit fields of the u16 words sc[ib / 2]: at 6 (ib % 2) the first
 * 16, at 6 (ib % 2) + 3 the second */
AINLINE __m256i lsv_iq1_m(const uint8_t *b) {
    const __m128i w = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(const void *)(b + 48)),
                                       _mm_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7));
    const __m128i m = _mm_set1_epi16(7);
    const __m128i lo = _mm_blend_epi16(_mm_and_si128(w, m), _mm_and_si128(_mm_srli_epi16(w, 6), m), 0xAA);
    const __m128i hi = _mm_blend_epi16(_mm_and_si128(_mm_srli_epi16(w, 3), m), _mm_and_si128(_mm_srli_epi16(w, 9), m), 0xAA);
    return odd16(_mm256_set_m128i(hi, lo));
}

/* a block's scales (an lsv_* vector) in the order of Q8_K's bsums (16-element groups) */
AINLINE __m256i ls_bsum_order(__m256i l) {
    const __m128i lo = _mm256_castsi256_si128(l), hi = _mm256_extracti128_si256(l, 1);
    return _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi));
}
AINLINE __m256i ext_iq1_m(const uint8_t *b) { return ls_bsum_order(lsv_iq1_m(b)); }
AINLINE __m256i fin_iq1_m(__m256i s, __m256i ext, const vx_block_q8_K *y) {
    return _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(load256(y->bsums), ext), 4));
}

#define NO_EXT(name)                                                                                    \
    AINLINE __m256i ext_##name(const uint8_t *b) { (void)b; return _mm256_setzero_si256(); }            \
    AINLINE __m256i fin_##name(__m256i s, __m256i e, const vx_block_q8_K *y) { (void)e; (void)y; return s; }
NO_EXT(iq2_xxs)
NO_EXT(iq2_xs)
NO_EXT(iq2_s)
NO_EXT(iq3_xxs)
NO_EXT(iq3_s)
#undef NO_EXT

/* ---- the GEMMs' token passes (both tiers) */
#define IQ_GT 64 /* tokens per pass */

/* Pass t0's activation rows: ys[j] token t0 + j's, the last token standing
 * in for the padding to a multiple of 8; returns the pass's token count. */
AINLINE int iq_pass_rows(const void *act, size_t as, int t0, int ntok, const vx_block_q8_K **ys) {
    const int nt = ntok - t0 < IQ_GT ? ntok - t0 : IQ_GT;
    for (int j = 0; j < (nt + 7) / 8 * 8; j++)
        ys[j] = (const vx_block_q8_K *)(const void *)((const uint8_t *)act + (size_t)(t0 + (j < nt ? j : nt - 1)) * as);
    return nt;
}

/* Row r's results of a pass (acc: 8 tokens a vector) into out, written or
 * added (accumulate). */
AINLINE void iq_pass_store(const __m256 *acc, int nt, float *out, int64_t ldo, int t0, int r, int accumulate) {
    float o[IQ_GT];
    for (int g = 0; g < (nt + 7) / 8; g++) _mm256_storeu_ps(o + 8 * g, acc[g]);
    for (int t = 0; t < nt; t++) {
        float *d = out + (int64_t)(t0 + t) * ldo + r;
        *d = accumulate ? *d + o[t] : o[t];
    }
}

/* The GEMM of type name (blocks BS bytes), both tiers: per pass of up to
 * IQ_GT tokens and per row, each block decoded once (DEC(name)(blk, &d),
 * d of type D) and dotted with every token's Q8_K block
 * (DOT(name)(&d, y): an __m256i whose lanes sum to the exact integer dot),
 * then per 8 tokens the canonical float step: the gemv's bits. */
#define IQ_GEMM(fname, name, BS, D, DEC, DOT)                                                                  \
    static void fname(int kind, int64_t n, const void *w, size_t rs, int nrows, const void *act, size_t as,   \
                      int ntok, float *out, int64_t ldo, int accumulate) {                                   \
        (void)kind;                                                                                           \
        const int64_t nb = n / VX_QK_K;                                                                       \
        for (int t0 = 0; t0 < ntok; t0 += IQ_GT) {                                                            \
            const vx_block_q8_K *ys[IQ_GT];                                                                   \
            const int nt = iq_pass_rows(act, as, t0, ntok, ys), ng = (nt + 7) / 8;                            \
            for (int r = 0; r < nrows; r++) {                                                                 \
                const uint8_t *row = (const uint8_t *)w + (size_t)r * rs;                                     \
                __m256 acc[IQ_GT / 8];                                                                        \
                for (int g = 0; g < ng; g++) acc[g] = _mm256_setzero_ps();                                    \
                for (int64_t b = 0; b < nb; b++) {                                                            \
                    const uint8_t *blk = row + (size_t)b * (BS);                                              \
                    D d;                                                                                      \
                    DEC(name)(blk, &d);                                                                       \
                    const __m256 f = _mm256_set1_ps(fac_##name(blk));                                         \
                    for (int g = 0; g < ng; g++) {                                                            \
                        __m256i I[8];                                                                         \
                        float dy[8];                                                                          \
                        for (int j = 0; j < 8; j++) {                                                         \
                            const vx_block_q8_K *y = ys[8 * g + j] + b;                                       \
                            I[j] = DOT(name)(&d, y);                                                          \
                            dy[j] = y->d;                                                                     \
                        }                                                                                     \
                        acc[g] = _mm256_fmadd_ps(_mm256_mul_ps(f, _mm256_loadu_ps(dy)),                       \
                                                 _mm256_cvtepi32_ps(hsum8_epi32(I)), acc[g]);                 \
                    }                                                                                         \
                }                                                                                             \
                iq_pass_store(acc, nt, out, ldo, t0, r, accumulate);                                          \
            }                                                                                                 \
        }                                                                                                     \
    }

#endif
