/*
 * avx2_quant_k.c - AVX2 kernels for the K-quants (compiled with -mavx2
 * -mfma -mf16c -mbmi2): the Q8_K activation quantizer, byte-identical to
 * the reference (quant_k.c), and the Q2_K..Q6_K x Q8_K dot products as
 * vec_dot and multi-row gemv.
 *
 * Per super-block of 256: codes to bytes, _mm256_maddubs_epi16 with the
 * activation bytes (pair sums in int16), _mm256_madd_epi16 with the integer
 * sub-block scales broadcast to 16-bit lanes (int32), summed over the
 * sub-blocks in int32; the mins go through the Q8_K group sums (bsums), so
 * they cost one multiply-add per super-block instead of touching y again.
 * Signed codes (Q3_K, Q6_K) are handled as unsigned codes plus an offset
 * that is also applied through bsums. The int32 sums equal the
 * reference's sums exactly; only the float accumulation across
 * super-blocks differs (the reference sums in double).
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"

#define QK VX_QK_K

/* ===================================================== Q8_K quantizer */

/* The reference keeps the first element of largest magnitude and divides
 * by its signed value, so a tie between +a and -a flips every code: find
 * the largest |x| with vector max (NaNs never win, as in the reference),
 * then the first index where it occurs. */
AINLINE float first_signed_absmax256(const float *x, float *amax_out) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    for (int k = 0; k < QK; k += 16) {
        m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs), m0);
        m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k + 8), abs), m1);
    }
    const float amax = hmax_ps(_mm256_max_ps(m0, m1));
    *amax_out = amax;
    const __m256 va = _mm256_set1_ps(amax);
    for (int k = 0; k < QK; k += 8) {
        const int mask =
            _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs), va, _CMP_EQ_OQ));
        if (mask) return x[k + __builtin_ctz((unsigned)mask)];
    }
    return 0.0f; /* amax is 0 or not reached: the caller zeroes the block */
}

/* vx_q_round_clamp(v, -127, 127): max/min are "v > lo ? v : lo" and
 * "v < hi ? v : hi" exactly as written there (NaN -> -127), and the
 * conversion rounds to nearest even like its 1.5 * 2^23 addition. */
AINLINE __m256i q8k_code(__m256 x, __m256 iscale) {
    __m256 v = _mm256_max_ps(_mm256_mul_ps(iscale, x), _mm256_set1_ps(-127.0f));
    v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(v);
}

void vx_quantize_row_q8_K_avx2(const float *src, void *dst, int64_t n) {
    vx_block_q8_K *y = dst;
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float amax;
        const float max = first_signed_absmax256(src, &amax);
        if (!(amax > 0.0f) || !isfinite(amax)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        __m256i sums[8];
        for (int k = 0; k < 8; k++) { /* 32 codes per step */
            const float *s = src + 32 * k;
            const __m256i a = q8k_code(_mm256_loadu_ps(s), vs), b = q8k_code(_mm256_loadu_ps(s + 8), vs);
            const __m256i c = q8k_code(_mm256_loadu_ps(s + 16), vs),
                          d = q8k_code(_mm256_loadu_ps(s + 24), vs);
            /* per-lane dword sums of each group of 16 (a+b: group 2k, c+d: 2k+1) */
            sums[k] = _mm256_hadd_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d));
            const __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
            store256((y[i].qs + 32 * k), _mm256_permutevar8x32_epi32(q, perm));
        }
        /* sums[k] lanes: {g2k, g2k, g2k+1, g2k+1 | same}, each a partial;
         * one more hadd gives 4 groups per 128-bit lane, the lane fold
         * completes them */
        for (int k = 0; k < 8; k += 4) {
            const __m256i h0 = _mm256_hadd_epi32(sums[k], sums[k + 1]);
            const __m256i h1 = _mm256_hadd_epi32(sums[k + 2], sums[k + 3]);
            const __m128i g0 = _mm_add_epi32(_mm256_castsi256_si128(h0), _mm256_extracti128_si256(h0, 1));
            const __m128i g1 = _mm_add_epi32(_mm256_castsi256_si128(h1), _mm256_extracti128_si256(h1, 1));
            /* groups 2k..2k+7, |sum| <= 16 * 127: packs does not saturate */
            store128((y[i].bsums + 2 * k), _mm_packs_epi32(g0, g1));
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ======================================================== dot products */

/* Zero-extending byte-to-int16 selectors for _mm256_shuffle_epi8 (index
 * byte, then 0x80 for a zero high byte): sel8z(k) puts scale byte k in
 * every 16-bit lane (32-wide sub-blocks); sel16z(i) scale byte i in the
 * low 128-bit lane and i + 1 in the high one (16-wide sub-blocks: each
 * 128-bit lane of a 32-code step is one sub-block). The source holds the
 * scale bytes in both lanes. */
AINLINE __m256i sel8z(int k) { return _mm256_set1_epi16((short)(0x8000 | k)); }
AINLINE __m256i sel16z(int i) {
    return _mm256_set_m128i(_mm_set1_epi16((short)(0x8000 | (i + 1))), _mm_set1_epi16((short)(0x8000 | i)));
}

AINLINE uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* y.d times the two fp16 factors {d, dmin} stored at p, as {d, dmin, 0, 0}. */
AINLINE __m128 d_dmin(const uint8_t *p, __m128 yd) {
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)ld32(p))), yd);
}

/* acc += dd[0] * isum - dd[1] * msum (msum: 8 or 4 int32 lanes). */
AINLINE __m256 apply_d_dmin(__m256 acc, __m128 dd, __m256i isum, __m256i msum) {
    acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(isum), acc);
    return _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), _mm256_cvtepi32_ps(msum), acc);
}



/* One K super-block step of the canonical order (avx2_quant_util.h).
 * Four rows: dd[r] holds row r's fp16 pair {d, dmin}; acc = fma(d yd, I,
 * acc), then acc = fnma(dmin yd, M, acc) (M = 0 without mins). */
AINLINE __m128 k_apply4(__m128 acc, const uint32_t dd[4], float yd, __m128i I, __m128i M) {
    const __m256 f = _mm256_cvtph_ps(_mm_setr_epi32((int)dd[0], (int)dd[1], (int)dd[2], (int)dd[3]));
    const __m256 s =
        _mm256_mul_ps(_mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)), _mm256_set1_ps(yd));
    acc = _mm_fmadd_ps(_mm256_castps256_ps128(s), _mm_cvtepi32_ps(I), acc);
    return _mm_fnmadd_ps(_mm256_extractf128_ps(s, 1), _mm_cvtepi32_ps(M), acc);
}

/* The same for one row in lane 0. */
AINLINE __m128 k_apply1(__m128 acc, uint32_t dd, float yd, int32_t I, int32_t M) {
    const __m128 s = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(yd)); /* {d yd, dmin yd} */
    acc = _mm_fmadd_ss(s, _mm_cvtepi32_ps(_mm_cvtsi32_si128(I)), acc);
    return _mm_fnmadd_ss(_mm_movehdup_ps(s), _mm_cvtepi32_ps(_mm_cvtsi32_si128(M)), acc);
}

/* R (1 or 4) rows' integer lanes (is: 8 int32, ms: 4 int32 or none) to
 * the super-block step. */
AINLINE __m128 k_step(int R, __m128 acc, const uint32_t dd[4], float yd, const __m256i is[4],
                      const __m128i *ms) {
    if (R == 1) {
        int32_t m = 0;
        if (ms) {
            const __m128i m2 = _mm_hadd_epi32(ms[0], ms[0]);
            m = _mm_cvtsi128_si32(_mm_hadd_epi32(m2, m2));
        }
        return k_apply1(acc, dd[0], yd, hsum_epi32(is[0]), m);
    }
    const __m128i M = ms ? _mm_hadd_epi32(_mm_hadd_epi32(ms[0], ms[1]), _mm_hadd_epi32(ms[2], ms[3]))
                         : _mm_setzero_si128();
    return k_apply4(acc, dd, yd, hsum4_epi32(is[0], is[1], is[2], is[3]), M);
}

/* Two consecutive super-blocks of one row (lane 0): both reductions in
 * one hadd tree, then the same four steps as two k_apply1 calls. ms NULL:
 * no mins (their steps are exact no-ops and skipped). */
AINLINE __m128 k_step2(__m128 acc, const uint32_t dd[2], float ya, float yb, const __m256i is[2],
                       const __m128i *ms) {
    const __m256i h = _mm256_hadd_epi32(is[0], is[1]);
    const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    const __m128i m = ms ? _mm_hadd_epi32(ms[0], ms[1]) : _mm_setzero_si128();
    const __m128 f = _mm_cvtepi32_ps(_mm_hadd_epi32(q, m)); /* {Ia, Ib, Ma, Mb} */
    const __m128 fr = _mm_shuffle_ps(f, f, _MM_SHUFFLE(3, 1, 2, 0)); /* {Ia, Ma, Ib, Mb} */
    const __m128 d = _mm_cvtph_ps(_mm_set_epi64x(0, (long long)((uint64_t)dd[1] << 32 | dd[0])));
    const __m128 s = _mm_mul_ps(d, _mm_setr_ps(ya, ya, yb, yb)); /* {da ya, dma ya, db yb, dmb yb} */
    acc = _mm_fmadd_ss(s, fr, acc);
    if (ms) acc = _mm_fnmadd_ss(_mm_movehdup_ps(s), _mm_movehdup_ps(fr), acc);
    acc = _mm_fmadd_ss(_mm_movehl_ps(s, s), _mm_movehl_ps(fr, fr), acc);
    if (ms) acc = _mm_fnmadd_ss(_mm_shuffle_ps(s, s, 3), _mm_shuffle_ps(fr, fr, 3), acc);
    return acc;
}

/* Row results of the canonical accumulator. */
AINLINE void k_store(int R, __m128 acc, float *out) {
    float o[4];
    _mm_storeu_ps(o, acc);
    for (int r = 0; r < R; r++) out[r] = o[r];
}

/* Fifth bit of Q5_K sub-block s (bit s of qh[l]) as 0 or 16: and with the
 * bit, then min with 16 maps any set bit >= 16 to 16. Bits 0..3 come from
 * h4 = qh << 4 so that they are >= 16 too. */
AINLINE __m256i q5k_bit(__m256i h, __m256i h4, int s) {
    if (s == 0) return _mm256_and_si256(h4, _mm256_set1_epi8(16));
    const __m256i t = s < 4 ? _mm256_and_si256(h4, _mm256_set1_epi8((char)(1 << (s + 4))))
                            : _mm256_and_si256(h, _mm256_set1_epi8((char)(1 << s)));
    return _mm256_min_epu8(t, _mm256_set1_epi8(16));
}

/* Q4_K (five = 0) and Q5_K (five = 1): x = d sc q - dmin mn, q 0..15 (0..31
 * with Q5_K's fifth bit), 8 sub-blocks of 32. Chunk c of 32 qs bytes holds
 * sub-block 2c in its low nibbles and 2c + 1 in its high ones. Pairs
 * <= 2*31*127, times sc <= 63: an int32 lane sums 4 codes of each of 8
 * sub-blocks, below 2^23, so its conversion to float is exact too. */
/* One (row, super-block) of Q4_K / Q5_K: the exact int32 lanes of the
 * scaled code sums (is) and of the mins term (ms), and {d, dmin}. */
AINLINE void q45_sb(int five, const uint8_t *b, const vx_block_q8_K *y, size_t pf, __m256i *is, __m128i *ms,
                    uint32_t *dd) {
    const size_t qs_off = five ? offsetof(vx_block_q5_K, qs) : offsetof(vx_block_q4_K, qs);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const int8_t *yq = y->qs;
    prefetch_ahead(b, pf, five ? sizeof(vx_block_q5_K) : sizeof(vx_block_q4_K));
    uint64_t scv, mnv;
    q4k_scales_mins(b + offsetof(vx_block_q4_K, scales), &scv, &mnv);
    *ms = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mnv)), bsums32(y));
    *dd = ld32(b);
    const __m256i sc = _mm256_broadcastq_epi64(_mm_cvtsi64_si128((long long)scv));
    __m256i h = _mm256_setzero_si256(), h4 = _mm256_setzero_si256();
    if (five) {
        h = load256(b + offsetof(vx_block_q5_K, qh));
        h4 = _mm256_slli_epi16(h, 4);
    }
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i q = load256(b + qs_off + 32 * c);
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (five) {
            lo = _mm256_or_si256(lo, q5k_bit(h, h4, 2 * c));
            hi = _mm256_or_si256(hi, q5k_bit(h, h4, 2 * c + 1));
        }
        const __m256i plo = _mm256_maddubs_epi16(lo, load256(yq + 64 * c));
        const __m256i phi = _mm256_maddubs_epi16(hi, load256(yq + 64 * c + 32));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, sel8z(2 * c))));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, sel8z(2 * c + 1))));
        VX_KEEP(isum); /* no reassociated tree of 8 live products */
    }
    *is = isum;
}

AINLINE void q45_K_rows(int five, int64_t n, const void *w, size_t stride, int R, const void *vy,
                        float *out) {
    const size_t bs = five ? sizeof(vx_block_q5_K) : sizeof(vx_block_q4_K);
    const vx_block_q8_K *y = vy;
    const uint8_t *x[4];
    for (int r = 0; r < R; r++) x[r] = row_at(w, stride, r);
    __m128 acc = _mm_setzero_ps(); /* lane r: row r (canonical order) */
    const size_t pf = prefetch_dist(R, stride);
    const int64_t nsb = n / QK;
    int64_t i = 0;
    if (R == 1)
        for (; i + 2 <= nsb; i += 2) {
            __m256i is[2];
            __m128i ms[2];
            uint32_t dd[2];
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) q45_sb(five, x[0] + (size_t)(i + u) * bs, &y[i + u], pf, &is[u], &ms[u], &dd[u]);
            acc = k_step2(acc, dd, y[i].d, y[i + 1].d, is, ms);
        }
    for (; i < nsb; i++) {
        __m256i is[4];
        __m128i ms[4];
        uint32_t dd[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) q45_sb(five, x[r] + (size_t)i * bs, &y[i], pf, &is[r], &ms[r], &dd[r]);
        acc = k_step(R, acc, dd, y[i].d, is, ms);
    }
    k_store(R, acc, out);
}

AINLINE void q4_K_rows(int64_t n, const void *w, size_t st, int R, const void *y, float *out) {
    q45_K_rows(0, n, w, st, R, y, out);
}
AINLINE void q5_K_rows(int64_t n, const void *w, size_t st, int R, const void *y, float *out) {
    q45_K_rows(1, n, w, st, R, y, out);
}

/* The 16-scale types (Q2_K, Q3_K, Q6_K) walk two 128-element halves of
 * four 32-code steps; step j of half h covers sub-blocks 8h + 2j (low
 * 128-bit lane) and 8h + 2j + 1 (high lane). */

/* Q2_K: x = d sc q - dmin mn with q 0..3 in 2-bit fields (element
 * 128 h + 32 j + l: bits 2j of qs[32 h + l]), 4-bit sc and mn per 16. */
AINLINE void q2_K_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_K *y = vy;
    const vx_block_q2_K *x[4];
    for (int r = 0; r < R; r++) x[r] = row_at(w, stride, r);
    __m128 acc = _mm_setzero_ps(); /* lane r: row r (canonical order) */
    const size_t pf = prefetch_dist(R, stride);
    const __m256i m2 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i ybs = load256(y[i].bsums);
        const int8_t *yq = y[i].qs;
        __m256i is[4];
        __m128i ms[4];
        uint32_t dd[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const vx_block_q2_K *b = &x[r][i];
            prefetch_ahead(b, pf, sizeof *b);
            const __m256i s8 = _mm256_broadcastsi128_si256(load128(b->scales));
            const __m256i sc = _mm256_and_si256(s8, m4);
            const __m256i mn16 = _mm256_cvtepu8_epi16(
                _mm_and_si128(_mm_srli_epi16(_mm256_castsi256_si128(s8), 4), _mm256_castsi256_si128(m4)));
            const __m256i msum = _mm256_madd_epi16(mn16, ybs);
            __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i q = load256(b->qs + 32 * h);
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m256i v = _mm256_and_si256(j ? _mm256_srli_epi16(q, 2 * j) : q, m2);
                    const __m256i p = _mm256_maddubs_epi16(v, load256(yq + 128 * h + 32 * j));
                    isum = _mm256_add_epi32(
                        isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, sel16z(8 * h + 2 * j))));
                }
            }
            is[r] = isum;
            ms[r] = _mm_add_epi32(_mm256_castsi256_si128(msum), _mm256_extracti128_si256(msum, 1));
            dd[r] = ld32((const uint8_t *)&b->d); /* {d, dmin} */
        }
        acc = k_step(R, acc, dd, y[i].d, is, ms);
    }
    k_store(R, acc, out);
}

/* Q3_K's 16 signed 6-bit scales (see vx_q3_K_unpack_scales) as bytes,
 * both 128-bit lanes: low 4 bits from the nibbles of bytes 0..7, high 2
 * bits from bytes 8..11 at bit 2 * (i / 4) for scale i, minus 32. */
AINLINE __m256i q3k_scales(const uint8_t *p) {
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)(const void *)p);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
    /* byte 8 + i % 4 to every dword, shifted by 2 * (dword index) */
    const __m128i hi = _mm_srlv_epi32(_mm_set1_epi32((int)ld32(p + 8)), _mm_setr_epi32(0, 2, 4, 6));
    const __m128i v = _mm_or_si128(lo, _mm_slli_epi16(_mm_and_si128(hi, _mm_set1_epi8(3)), 4));
    return _mm256_broadcastsi128_si256(_mm_sub_epi8(v, _mm_set1_epi8(32)));
}

/* Q3_K: x = d sc (q - 4 (1 - hbit)), q 0..3 as Q2_K, the high bit of
 * element e in bit e / 32 of hmask[e % 32]. Computed as u = q + 4 hbit in
 * 0..7 (unsigned for maddubs) minus 4 sum(sc * bsum): the same integer.
 * The signed scales (-32..31) are used times 256: the scale byte goes in
 * the high half of each 16-bit lane over a zero low byte, which needs no
 * sign extension. Bounds per 32-bit lane: a step adds at most
 * 2 * (2*7*127) * 32 * 256 < 2^25, eight steps < 2^28, the bsum term
 * 4 * 2 * (16*127) * 32 * 256 < 2^27: far from 2^31, and every term is a
 * multiple of 256, so the final arithmetic shift by 8 is exact.
 * The high bit becomes 4 with the min trick of Q5_K (hm4 = hmask << 2
 * lifts bits 0 and 1 to >= 4). */
AINLINE __m256i q3k_bit(__m256i h, __m256i h4, int bit) {
    if (bit == 0) return _mm256_and_si256(h4, _mm256_set1_epi8(4));
    const __m256i t = bit < 2 ? _mm256_and_si256(h4, _mm256_set1_epi8((char)(1 << (bit + 2))))
                              : _mm256_and_si256(h, _mm256_set1_epi8((char)(1 << bit)));
    return _mm256_min_epu8(t, _mm256_set1_epi8(4));
}

AINLINE __m256i sel16hi(int i) { /* like sel16z, but scale byte in the high half */
    return _mm256_set_m128i(_mm_set1_epi16((short)(((i + 1) << 8) | 0x80)),
                            _mm_set1_epi16((short)((i << 8) | 0x80)));
}

AINLINE void q3_K_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_K *y = vy;
    const vx_block_q3_K *x[4];
    for (int r = 0; r < R; r++) x[r] = row_at(w, stride, r);
    __m128 acc = _mm_setzero_ps(); /* lane r: row r (canonical order) */
    const size_t pf = prefetch_dist(R, stride);
    const __m256i m2 = _mm256_set1_epi8(3);
    /* scale bytes in natural order, high halves of int16 lanes */
    const __m256i nat =
        _mm256_setr_epi8(-128, 0, -128, 1, -128, 2, -128, 3, -128, 4, -128, 5, -128, 6, -128, 7, -128, 8,
                         -128, 9, -128, 10, -128, 11, -128, 12, -128, 13, -128, 14, -128, 15);
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i ybs = load256(y[i].bsums);
        const int8_t *yq = y[i].qs;
        __m256i is[4];
        uint32_t dd[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const vx_block_q3_K *b = &x[r][i];
            prefetch_ahead(b, pf, sizeof *b);
            const __m256i sc = q3k_scales(b->scales);
            const __m256i hm = load256(b->hmask), hm4 = _mm256_slli_epi16(hm, 2);
            /* 256 * (sum u y sc - 4 sum sc bsum) */
            __m256i isum =
                _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_slli_epi32(_mm256_madd_epi16(_mm256_shuffle_epi8(sc, nat), ybs), 2));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i q = load256(b->qs + 32 * h);
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m256i lo = _mm256_and_si256(j ? _mm256_srli_epi16(q, 2 * j) : q, m2);
                    const __m256i v = _mm256_or_si256(lo, q3k_bit(hm, hm4, 4 * h + j));
                    const __m256i p = _mm256_maddubs_epi16(v, load256(yq + 128 * h + 32 * j));
                    isum = _mm256_add_epi32(
                        isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, sel16hi(8 * h + 2 * j))));
                }
            }
            is[r] = _mm256_srai_epi32(isum, 8);
            dd[r] = b->d; /* dmin 0 */
        }
        acc = k_step(R, acc, dd, y[i].d, is, NULL);
    }
    k_store(R, acc, out);
}

/* Q6_K: x = d sc (u - 32), u = 4 low bits | 2 high bits << 4, in 0..63
 * (unsigned for maddubs, pairs <= 2*63*127); the -32 goes through bsums.
 * Step j of half h: nibble j / 2 of ql[64 h + 32 (j % 2) + l], bits 2j of
 * qh[32 h + l]. Scales are signed int8 (sign-extended once per block). */
AINLINE void q6_K_rows(int64_t n, const void *w, size_t stride, int R, const void *vy, float *out) {
    const vx_block_q8_K *y = vy;
    const vx_block_q6_K *x[4];
    for (int r = 0; r < R; r++) x[r] = row_at(w, stride, r);
    __m128 acc = _mm_setzero_ps(); /* lane r: row r (canonical order) */
    const size_t pf = prefetch_dist(R, stride);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2h = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i ybs = load256(y[i].bsums);
        const int8_t *yq = y[i].qs;
        __m256i is[4];
        uint32_t dd[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const vx_block_q6_K *b = &x[r][i];
            prefetch_ahead(b, pf, sizeof *b);
            const __m256i sc16 = _mm256_cvtepi8_epi16(load128(b->scales));
            __m256i isum =
                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, ybs), 5));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = load256(b->ql + 64 * h), l1 = load256(b->ql + 64 * h + 32);
                const __m256i qh = load256(b->qh + 32 * h);
                /* this half's 8 scales (int16) in both lanes */
                const __m256i sc = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                          : _mm256_permute2x128_si256(sc16, sc16, 0x11);
                __m256i v[4];
                v[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                       _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2h));
                v[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                       _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2h));
                v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                       _mm256_and_si256(qh, m2h));
                v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2h));
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    /* int16 scale 2j (low lane) and 2j + 1 (high lane) */
                    const __m256i sel =
                        _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 * (4 * j + 3) + 4 * j + 2)),
                                         _mm_set1_epi16((short)(0x0100 * (4 * j + 1) + 4 * j)));
                    const __m256i p = _mm256_maddubs_epi16(v[j], load256(yq + 128 * h + 32 * j));
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, sel)));
                    VX_KEEP(isum);
                }
            }
            is[r] = isum;
            dd[r] = b->d; /* dmin 0 */
        }
        acc = k_step(R, acc, dd, y[i].d, is, NULL);
    }
    k_store(R, acc, out);
}

DEFINE_QDOT(q2_K_rows, vx_vec_dot_q2_K_q8_K_avx2, vx_gemv_q2_K_avx2)
DEFINE_QDOT(q3_K_rows, vx_vec_dot_q3_K_q8_K_avx2, vx_gemv_q3_K_avx2)
DEFINE_QDOT(q4_K_rows, vx_vec_dot_q4_K_q8_K_avx2, vx_gemv_q4_K_avx2)
DEFINE_QDOT(q5_K_rows, vx_vec_dot_q5_K_q8_K_avx2, vx_gemv_q5_K_avx2)
DEFINE_QDOT(q6_K_rows, vx_vec_dot_q6_K_q8_K_avx2, vx_gemv_q6_K_avx2)
