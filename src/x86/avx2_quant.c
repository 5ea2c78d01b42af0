/*
 * avx2_quant.c - AVX2 kernels for the 32-element block types and the float
 * weight types (compiled with -mavx2 -mfma -mf16c -mbmi2):
 *   - activation quantizers Q8_0 and Q8_1, byte-identical to the reference
 *     (quant_legacy.c), since they run once per token row;
 *   - dot products Q4_0, Q5_0, Q8_0, IQ4_NL x Q8_0 and Q4_1, Q5_1 x Q8_1,
 *     as vec_dot (one row, the reference signature) and as gemv (nrows rows
 *     against one activation row; wide rows 4 at a time, see the row
 *     grouping notes in avx2_quant_util.h);
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
#include <stddef.h>
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
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
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
        const __m256i q =
            pack_codes(q8_code(_mm256_loadu_ps(src), id), q8_code(_mm256_loadu_ps(src + 8), id),
                       q8_code(_mm256_loadu_ps(src + 16), id), q8_code(_mm256_loadu_ps(src + 24), id));
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
 * One template (rows32c, in the canonical order of avx2_quant_util.h, so
 * that the GEMMs of avx2_gemm.c give the same bits) serves all six types;
 * `kind` and R (rows at once, 1 or 4) are compile-time constants in every
 * instantiation, so the switches fold away and the per-row loops unroll
 * into registers.
 *
 * Per block: 32 codes to bytes, _mm256_maddubs_epi16 (unsigned x signed
 * bytes, adjacent products summed to 16 int16 "pair sums"). Signed weight
 * codes use either an offset (Q4_0: q - 8 as q, minus 8 * (y_a + y_b) per
 * pair, computed once per activation block for all R rows) or the
 * abs/sign trick (|x| times y with x's sign).
 *
 * Blocks go in pairs: the two blocks' pair sums are interleaved by 32-bit
 * lane (blend, swap neighbours, add), so one madd, one int->float
 * conversion and one FMA with the scale vector {s_i, s_i+1, s_i, ...}
 * serve both blocks. Every lane still holds sums of one block only, so
 * the integer sum of each block is exact; the merge needs twice a pair sum
 * to fit int16, else (Q8_0, IQ4_NL) it happens after the madd, in int32.
 * Half the FMAs also halves the one-accumulator latency chain, which
 * would otherwise bound the single-row case (4 cycles per FMA).
 */

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0, K_IQ4_NL, K_MXFP4 };

/* Q4_1 and Q5_1 carry a min m: their blocks start {d, m} and pair with
 * Q8_1 blocks {d, s = d * sum(q)}; the others start {d} and pair with Q8_0. */
AINLINE int has_min(int k) { return k == K_Q4_1 || k == K_Q5_1; }

AINLINE size_t xsize(int k) {
    switch (k) {
    case K_Q4_0: return sizeof(vx_block_q4_0);
    case K_Q4_1: return sizeof(vx_block_q4_1);
    case K_Q5_0: return sizeof(vx_block_q5_0);
    case K_Q5_1: return sizeof(vx_block_q5_1);
    case K_Q8_0: return sizeof(vx_block_q8_0);
    case K_MXFP4: return sizeof(vx_block_mxfp4);
    default: return sizeof(vx_block_iq4_nl);
    }
}

AINLINE size_t ysize(int k) { return has_min(k) ? sizeof(vx_block_q8_1) : sizeof(vx_block_q8_0); }
AINLINE size_t ycodes(int k) {
    return has_min(k) ? offsetof(vx_block_q8_1, qs) : offsetof(vx_block_q8_0, qs);
}

/* |pair sum| bounds with |y| <= 127: Q4_0 2*8*127 = 2032 (|q - 8| <= 8;
 * the terms before the offset subtraction, 2*15*127 and 2*8*127, fit as
 * well), Q4_1 2*15*127 = 3810, Q5_0 2*16*127 = 4064, Q5_1 2*31*127 = 7874,
 * MXFP4 2*12*127 = 3048: twice each fits int16. Q8_0 (2*128*127) and IQ4_NL (2*127*127) do not. */
AINLINE int pairs_fit_twice(int k) { return k != K_Q8_0 && k != K_IQ4_NL; }

/* Activation-side offset correction per pair, shared by all rows. */
AINLINE __m256i ycorr(int k, __m256i yq) {
    if (k == K_Q4_0) return _mm256_maddubs_epi16(_mm256_set1_epi8(8), yq);
    if (k == K_Q5_0) return _mm256_maddubs_epi16(_mm256_set1_epi8(16), yq);
    return _mm256_setzero_si256();
}

/* Signed x signed bytes: |x| (unsigned, up to 128 for x = -128) times y
 * with x's sign; with |y| <= 127 a pair is at most 2*128*127 < 2^15. */
AINLINE __m256i dot_i8_pairs(__m256i xq, __m256i yq) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(xq), _mm256_sign_epi8(yq, xq));
}

/* Q5 codes: nibble | fifth bit << 4, in 0..31 (bit j of qh for element j). */
AINLINE __m256i q5_codes(const uint8_t *qs, const uint8_t *qh) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(qh)), _mm256_set1_epi8(16));
    return _mm256_or_si256(nibbles32(qs), hi);
}

/* The 16 int16 pair sums of weight block b against activation codes yq.
 * Q4_0: x = d (q - 8); Q4_1: x = d q + m (q unsigned, the m part comes
 * from s); Q5_0: x = d (q - 16); Q5_1: x = d q + m; Q8_0: x = d q;
 * IQ4_NL: x = d book[q], the 16-entry book looked up with one shuffle;
 * MXFP4: the same with its own book, after the exponent byte. */
AINLINE __m256i block_pairs(int k, const uint8_t *b, __m256i yq, __m256i yc, __m256i book) {
    switch (k) {
    case K_Q4_0:
        return _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles32(b + offsetof(vx_block_q4_0, qs)), yq), yc);
    case K_Q4_1: return _mm256_maddubs_epi16(nibbles32(b + offsetof(vx_block_q4_1, qs)), yq);
    case K_Q5_0:
        return _mm256_sub_epi16(
            _mm256_maddubs_epi16(q5_codes(b + offsetof(vx_block_q5_0, qs), b + offsetof(vx_block_q5_0, qh)),
                                 yq),
            yc);
    case K_Q5_1:
        return _mm256_maddubs_epi16(
            q5_codes(b + offsetof(vx_block_q5_1, qs), b + offsetof(vx_block_q5_1, qh)), yq);
    case K_Q8_0: return dot_i8_pairs(load256(b + offsetof(vx_block_q8_0, qs)), yq);
    case K_MXFP4: return dot_i8_pairs(_mm256_shuffle_epi8(book, nibbles32(b + offsetof(vx_block_mxfp4, qs))), yq);
    default: return dot_i8_pairs(_mm256_shuffle_epi8(book, nibbles32(b + offsetof(vx_block_iq4_nl, qs))), yq);
    }
}

/* Two blocks' pair sums to 8 int32 lanes, even lanes block 0, odd lanes
 * block 1. e takes block 0's even dwords and block 1's odd ones, f the
 * rest; swapping f's neighbours lines each dword up with its own block. */
AINLINE __m256i merge_pairs(int k, __m256i p0, __m256i p1) {
    const __m256i ones = _mm256_set1_epi16(1);
    if (pairs_fit_twice(k)) {
        const __m256i e = _mm256_blend_epi32(p0, p1, 0xAA), f = _mm256_blend_epi32(p1, p0, 0xAA);
        return _mm256_madd_epi16(_mm256_add_epi16(e, _mm256_shuffle_epi32(f, 0xB1)), ones);
    }
    const __m256i a = _mm256_madd_epi16(p0, ones), c = _mm256_madd_epi16(p1, ones);
    const __m256i e = _mm256_blend_epi32(a, c, 0xAA), f = _mm256_blend_epi32(c, a, 0xAA);
    return _mm256_add_epi32(e, _mm256_shuffle_epi32(f, 0xB1));
}

AINLINE uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* fp16 fields of two blocks to floats: the first 2 (or, with min, 4) bytes
 * of each block, i.e. {d0, d1} or {d0, m0, d1, m1}. */
AINLINE __m128 f16_head2(int with_min, const uint8_t *b0, const uint8_t *b1) {
    if (with_min)
        return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)(load_u32(b0) | (uint64_t)load_u32(b1) << 32)));
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)(load_u16(b0) | (uint32_t)load_u16(b1) << 16)));
}

/* The weight scales of two blocks {s0, s1, ...}: fp16 d, or MXFP4's
 * exponent byte */
AINLINE __m128 wscale2(int k, const uint8_t *b0, const uint8_t *b1) {
    if (k == K_MXFP4) return _mm256_castps256_ps128(e8m0_half8(_mm256_setr_epi32(b0[0], b1[0], 0, 0, 0, 0, 0, 0)));
    return f16_head2(0, b0, b1);
}

/* Offset correction of activation block yb for the canonical 32-block
 * kernels: off * sum(codes), off = 8 (Q4_0), 16 (Q5_0), 0 (Q8_0). */
AINLINE int has_off(int k) { return k == K_Q4_0 || k == K_Q5_0; }
AINLINE int32_t corr32(int k, const uint8_t *yb) {
    if (!has_off(k)) return 0;
    return hsum_epi32(pairs_to_i32(ycorr(k, load256(yb + offsetof(vx_block_q8_0, qs)))));
}

/* {I0, I1, I0, I1} from the raw (offset-free) pair sums of a block pair
 * of one row: merged into even/odd lanes (merge_pairs), then halves added. */
AINLINE __m128i pair_sums(int k, __m256i p0, __m256i p1) {
    const __m256i m = merge_pairs(k, p0, p1);
    const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    return _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4E));
}

/* Canonical-order kernel (avx2_quant_util.h) of the 32-block types; R is
 * 1 or 4. Each row keeps two chains, even and odd blocks, added at the
 * end. R = 4: lanes {rows 0..3 even, rows 0..3 odd}, the 8 exact block
 * sums of a block pair out of one hadd tree. R = 1: lanes {even, odd}.
 * Pair sums are taken without the Q4_0 / Q5_0 offset, which comes off the
 * exact sums as the per-block integer ct[b] (computed once per gemv call;
 * tab 0: here). Q4_1 / Q5_1 add their min term as a second step per block,
 * acc = fma(m, s_y, acc), after acc = fma(d dy, I, acc). */
AINLINE void rows32c(int k, int64_t n, const void *w, size_t stride, int R, const void *vy, float *out,
                     int tab, const int32_t *ct, const float *dyf, const float *syf) {
    /* tab (a compile-time constant in every call): the corrections and
     * activation scales come from ct, dyf, syf, else (rows too long for
     * the tables) they are computed per block here */
    const size_t xs = xsize(k), ys = ysize(k), yo = ycodes(k);
    const int hm = has_min(k);
    const uint8_t *yb = vy;
    const uint8_t *x[4];
    for (int r = 0; r < R; r++) x[r] = row_at(w, stride, r);
    __m256 acc = _mm256_setzero_ps();
    const size_t pf = prefetch_dist(R, stride);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i book = k == K_IQ4_NL  ? _mm256_broadcastsi128_si256(load128(vx_iq4nl_values))
                         : k == K_MXFP4 ? _mm256_broadcastsi128_si256(load128(vx_mxfp4_values))
                                        : zero;
    const __m256i lo4 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    const int64_t nb = n / 32;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const uint8_t *y0 = yb + (size_t)i * ys, *y1 = y0 + ys;
        const __m256i yq0 = load256(y0 + yo), yq1 = load256(y1 + yo);
        __m128i c01 = _mm_setzero_si128(); /* {c0, c1, c0, c1} */
        if (has_off(k) && tab) c01 = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(ct + i)), _mm_loadl_epi64((const __m128i *)(const void *)(ct + i)));
        else if (has_off(k)) c01 = _mm_setr_epi32(corr32(k, y0), corr32(k, y1), corr32(k, y0), corr32(k, y1));
        /* {dy0, dy1, 0, 0}, {sy0, sy1, 0, 0} */
        const __m128 dy = tab ? _mm_castpd_ps(_mm_load_sd((const double *)(const void *)(dyf + i)))
                              : f16_head2(0, y0, y1);
        __m128 sy = _mm_setzero_ps();
        if (hm) sy = tab ? _mm_castpd_ps(_mm_load_sd((const double *)(const void *)(syf + i)))
                         : f16_head2(0, y0 + 2, y1 + 2);
        if (R == 1) {
            const uint8_t *b0 = x[0] + (size_t)i * xs, *b1 = b0 + xs;
            prefetch_ahead(b0, pf, 2 * xs);
            __m128i q = pair_sums(k, block_pairs(k, b0, yq0, zero, book), block_pairs(k, b1, yq1, zero, book));
            if (has_off(k)) q = _mm_sub_epi32(q, c01);
            const __m128 s = _mm_mul_ps(wscale2(k, b0, b1), dy);
            __m128 a = _mm_fmadd_ps(s, _mm_cvtepi32_ps(q), _mm256_castps256_ps128(acc));
            if (hm) a = _mm_fmadd_ps(f16_head2(0, b0 + 2, b1 + 2), sy, a); /* {m0, m1, 0, 0} */
            acc = _mm256_castps128_ps256(a);
            continue;
        }
        __m256i v[8];
        /* the rows' fp16 d (and m) of blocks i (low half), i + 1 (high),
         * gathered in general registers: through a uint16_t array the
         * 128-bit load waited on a failed store forwarding (Q4_1 decode
         * at half speed) */
        uint64_t d0 = 0, d1 = 0, m0 = 0, m1 = 0;
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *b0 = x[r] + (size_t)i * xs, *b1 = b0 + xs;
            prefetch_ahead(b0, pf, 2 * xs);
            v[r] = pairs_to_i32(block_pairs(k, b0, yq0, zero, book));
            v[4 + r] = pairs_to_i32(block_pairs(k, b1, yq1, zero, book));
            if (k == K_MXFP4) { /* the exponent bytes: rows 0..3 block i in d0, block i + 1 above */
                d0 |= (uint64_t)b0[0] << 8 * r;
                d0 |= (uint64_t)b1[0] << (32 + 8 * r);
            } else {
                d0 |= (uint64_t)load_u16(b0) << 16 * r;
                d1 |= (uint64_t)load_u16(b1) << 16 * r;
            }
            if (hm) {
                m0 |= (uint64_t)load_u16(b0 + 2) << 16 * r;
                m1 |= (uint64_t)load_u16(b1 + 2) << 16 * r;
            }
        }
        __m256i I = hsum8_epi32(v);
        if (has_off(k)) /* {c0 x4, c1 x4} */
            I = _mm256_sub_epi32(I, _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(c01), lo4));
        const __m256 wd = k == K_MXFP4 ? e8m0_half8(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)d0)))
                                       : _mm256_cvtph_ps(_mm_set_epi64x((long long)d1, (long long)d0));
        const __m256 s = _mm256_mul_ps(wd,
                                       _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dy), lo4));
        acc = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(I), acc); /* rows 0..3 block i, then block i + 1 */
        if (hm)
            acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_set_epi64x((long long)m1, (long long)m0)),
                                  _mm256_permutevar8x32_ps(_mm256_castps128_ps256(sy), lo4), acc);
    }
    if (i < nb) { /* odd block count: the last block, onto the even chain */
        const uint8_t *y0 = yb + (size_t)i * ys;
        const __m256i yq0 = load256(y0 + yo);
        const __m128i c = _mm_set1_epi32(!has_off(k) ? 0 : tab ? ct[i] : corr32(k, y0));
        const float dy = tab ? dyf[i] : f16(load_u16(y0));
        const float sy = !hm ? 0.0f : tab ? syf[i] : f16(load_u16(y0 + 2));
        __m256i v[4];
        uint16_t dw[4] = {0, 0, 0, 0}, mw[4] = {0, 0, 0, 0};
        for (int r = 0; r < R; r++) {
            const uint8_t *b0 = x[r] + (size_t)i * xs;
            v[r] = pairs_to_i32(block_pairs(k, b0, yq0, zero, book));
            dw[r] = k == K_MXFP4 ? b0[0] : load_u16(b0);
            if (hm) mw[r] = load_u16(b0 + 2);
        }
        const __m128 wd = k == K_MXFP4 ? _mm256_castps256_ps128(e8m0_half8(_mm256_setr_epi32(dw[0], dw[1], dw[2], dw[3], 0, 0, 0, 0)))
                                       : f16x4(dw[0], dw[1], dw[2], dw[3]);
        const __m128 s = _mm_mul_ps(wd, _mm_set1_ps(dy));
        const __m128 ms = f16x4(mw[0], mw[1], mw[2], mw[3]);
        const __m128 lo = _mm256_castps256_ps128(acc);
        __m128 e;
        if (R == 1) { /* _ss takes lanes 1..3 from s: keep the odd chain */
            e = _mm_fmadd_ss(s, _mm_cvtepi32_ps(_mm_sub_epi32(_mm_cvtsi32_si128(hsum_epi32(v[0])), c)), lo);
            if (hm) e = _mm_fmadd_ss(ms, _mm_set1_ps(sy), e);
            e = _mm_blend_ps(lo, e, 1);
        } else {
            e = _mm_fmadd_ps(s, _mm_cvtepi32_ps(_mm_sub_epi32(hsum4_epi32(v[0], v[1], v[2], v[3]), c)), lo);
            if (hm) e = _mm_fmadd_ps(ms, _mm_set1_ps(sy), e);
        }
        acc = _mm256_insertf128_ps(acc, e, 0);
    }
    if (R == 1) {
        const __m128 a = _mm256_castps256_ps128(acc);
        out[0] = _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
        return;
    }
    float o[4];
    _mm_storeu_ps(o, _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
    for (int r = 0; r < R; r++) out[r] = o[r];
}

/* vec_dot and gemv entry points of the canonical 32-block kernels: the
 * gemv computes the activation blocks' offset corrections once. */
#define CT_MAX 1024
/* ct and dyf are read only at indices below nb, all written first; GCC
 * (with the sanitizers) cannot see that through the inlined kernels. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
AINLINE void gemv32c(int k, int64_t n, const void *w, size_t stride, int nrows, const void *y, float *out) {
    int32_t ct[CT_MAX];
    float dyf[CT_MAX], syf[CT_MAX];
    const int64_t nb = n / 32;
    const int tab = nb <= CT_MAX;
    if (tab)
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *yb = (const uint8_t *)y + (size_t)b * ysize(k);
            ct[b] = corr32(k, yb);
            dyf[b] = f16(load_u16(yb));
            syf[b] = has_min(k) ? f16(load_u16(yb + 2)) : 0.0f;
        }
    /* as GEMV_DISPATCH: groups of 4 rows a quarter of the rows apart */
    const int q = gemv_quarter(stride, nrows);
    float o[4];
    for (int i = 0; i < q; i++) {
        if (tab) rows32c(k, n, row_at(w, stride, i), (size_t)q * stride, 4, y, o, 1, ct, dyf, syf);
        else rows32c(k, n, row_at(w, stride, i), (size_t)q * stride, 4, y, o, 0, NULL, NULL, NULL);
        gemv_scatter4(o, out, i, q);
    }
    for (int r = 4 * q; r < nrows; r++) {
        if (tab) rows32c(k, n, row_at(w, stride, r), stride, 1, y, out + r, 1, ct, dyf, syf);
        else rows32c(k, n, row_at(w, stride, r), stride, 1, y, out + r, 0, NULL, NULL, NULL);
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#define DEFINE_QDOT32C(k, vec_dot_name, gemv_name)                                                        \
    void vec_dot_name(int64_t n, float *s, const void *x, const void *y) { gemv32c(k, n, x, 0, 1, y, s); } \
    void gemv_name(int64_t n, const void *w, size_t stride, int nrows, const void *y, float *out) {       \
        gemv32c(k, n, w, stride, nrows, y, out);                                                            \
    }

DEFINE_QDOT32C(K_Q4_0, vx_vec_dot_q4_0_q8_0_avx2, vx_gemv_q4_0_avx2)
DEFINE_QDOT32C(K_Q5_0, vx_vec_dot_q5_0_q8_0_avx2, vx_gemv_q5_0_avx2)
DEFINE_QDOT32C(K_Q8_0, vx_vec_dot_q8_0_q8_0_avx2, vx_gemv_q8_0_avx2)

DEFINE_QDOT32C(K_Q4_1, vx_vec_dot_q4_1_q8_1_avx2, vx_gemv_q4_1_avx2)
DEFINE_QDOT32C(K_Q5_1, vx_vec_dot_q5_1_q8_1_avx2, vx_gemv_q5_1_avx2)
DEFINE_QDOT32C(K_IQ4_NL, vx_vec_dot_iq4_nl_q8_0_avx2, vx_gemv_iq4_nl_avx2)
DEFINE_QDOT32C(K_MXFP4, vx_vec_dot_mxfp4_q8_0_avx2, vx_gemv_mxfp4_avx2)

/* ========================================== F16 / BF16 x f32 activations */

/* One row: four accumulators hide the FMA latency (4 cycles, 2 per
 * cycle); pf: software prefetch distance (see prefetch_dist). */
AINLINE float dot_half_f32(int64_t n, const uint16_t *w, const float *x, int bf, size_t pf) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
#define LOADW(p) (bf ? load_bf16x8(p) : load_f16x8(p))
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(w + i, pf, 64);
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
    return dot_half_f32(n, w, x, 0, prefetch_dist(1, 0));
}

float vx_dot_bf16_f32_avx2(int64_t n, const uint16_t *w, const float *x) {
    return dot_half_f32(n, w, x, 1, prefetch_dist(1, 0));
}

/* R rows at once (R = 4: GEMV_DISPATCH's far groups, half_rows4 with one
 * token); a single row goes through dot_half_f32 (four accumulators). */
AINLINE void half_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out, int bf) {
    const float *x = vy;
    if (R == 1) {
        out[0] = dot_half_f32(n, w, x, bf, prefetch_dist(1, stride));
        return;
    }
    const uint16_t *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = row_at(w, stride, r);
    float o[1][4];
    half_rows4(n, wr, 1, &x, bf, o);
    for (int r = 0; r < 4; r++) out[r] = o[0][r];
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
