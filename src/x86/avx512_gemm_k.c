/*
 * avx512_gemm_k.c - AVX-512 VNNI GEMV on the packed K-quant types
 * Q2_K_R8 .. Q6_K_R8 and GEMM on Q4_K_R8 and Q6_K_R8 (quant.h) x Q8_K
 * activations. Compiled natively and emulated (isa512.h); registered in
 * avx512_init.c.
 *
 * Arithmetic: codes as the unsigned operand of vpdpbusd (Q4_K 0..15, Q5_K
 * 0..31, Q2_K 0..3, Q6_K 0..63 and Q3_K 0..7 with their -32 / -4 offsets
 * taken out through the activation block sums),
 * Q8_K activations (-127..127) as the signed one; per row and super-block
 * an exact int32 I (and Q4_K's mins term M), then the canonical step of
 * avx2_quant_util.h: acc = fma(d * y.d, (float)I, acc) [acc = fnma(dmin *
 * y.d, (float)M, acc)]. Results are the bits of the AVX2 kernels and the
 * reference, for any tier and token count.
 *
 * Sub-block scales, exactly:
 *   Q4_K: a 32-element sub-block sum can reach 32 * 15 * 127 = 60960, past
 *   int16, but each half (16 elements, <= 30480) fits. The two halves of
 *   sub-blocks 2c and 2c + 1 go into one dword as an int16 pair (vpslld +
 *   vpblendmw) and one vpdpwssd against the (sc[2c], sc[2c + 1]) pair adds
 *   both scaled sums: 3 uops per 16 vpdpbusd.
 *   Q6_K: a 16-element sub-block sum reaches 16 * 63 * 127 = 128016, and
 *   even a quarter of it times the int8 scale needs more than 16 bits, so
 *   I += S * sc by vpmulld (2 uops on SPR) + vpaddd per 4 vpdpbusd.
 */
#include "isa512.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "bits512.h"
#include "kernels_x86.h"
#include "quant.h"

#define QK VX_QK_K
/* K_Q6_K_GF, K_Q5_K_GF, K_Q3_K_GF: the codes' high bits placed with GFNI;
 * K_Q2_K_GF: its 2-bit fields taken out with GFNI */
/* K_TQ2, K_TQ2_GF: TQ2_0_R8, Q2_K's kernels with every scale and min 1
 * and dmin = d (is_two), from its own records (is_tern) */
enum { K_Q4_K, K_Q6_K, K_Q6_K_GF, K_Q5_K, K_Q5_K_GF, K_Q3_K, K_Q3_K_GF, K_Q2_K, K_Q2_K_GF, K_TQ2, K_TQ2_GF };
AINLINE int is_six(int k) { return k == K_Q6_K || k == K_Q6_K_GF; }
AINLINE int is_five(int k) { return k == K_Q5_K || k == K_Q5_K_GF; }
AINLINE int is_three(int k) { return k == K_Q3_K || k == K_Q3_K_GF; }
AINLINE int is_tern(int k) { return k == K_TQ2 || k == K_TQ2_GF; }
AINLINE int is_two(int k) { return k == K_Q2_K || k == K_Q2_K_GF || is_tern(k); }
AINLINE int has_gf(int k) {
    return k == K_Q6_K_GF || k == K_Q5_K_GF || k == K_Q3_K_GF || k == K_Q2_K_GF || k == K_TQ2_GF;
}
/* bytes of a kind's 8-row record */
AINLINE size_t recK(int k) {
    return is_six(k) ? sizeof(vx_block_q6_K_r8) : is_five(k) ? sizeof(vx_block_q5_K_r8)
           : is_three(k) ? sizeof(vx_block_q3_K_r8) : is_tern(k) ? sizeof(vx_block_tq2_0_r8)
           : is_two(k) ? sizeof(vx_block_q2_K_r8)
                         : sizeof(vx_block_q4_K_r8);
}

AINLINE __m512i load512(const void *p) { return _mm512_loadu_si512(p); }
AINLINE __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
/* Lanes 0-7: dword at a, lanes 8-15: dword at b. */
AINLINE __m512i act2(const int8_t *a, const int8_t *b) {
    return _mm512_mask_blend_epi32((__mmask16)0xFF00, bcast32(a), bcast32(b));
}
/* dword lanes (lo16 of x, lo16 of y): the int16 pair vpdpwssd reads */
AINLINE __m512i pack16(__m512i x, __m512i y) {
    return _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAA, x, _mm512_slli_epi32(y, 16));
}
/* (A & 0x0F) | (B & 0x30) bytewise, A's low nibble and B's bits 4-5 */
AINLINE __m512i merge6(__m512i a, __m512i b) {
    return _mm512_ternarylogic_epi32(_mm512_and_si512(a, _mm512_set1_epi8(0x0F)), b, _mm512_set1_epi8(0x30), 0xF8);
}
/* lanes 0-7 + lanes 8-15 (a record's two halves of 8 rows) */
AINLINE __m256i fold8(__m512i x) { return _mm256_add_epi32(_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1)); }

/* ===================================================================== GEMV
 * G 8-row groups a G-th of the call apart side by side (gemv_far_groups,
 * as the AVX2 gemv): G long record streams, each advancing a part of a
 * record per turn (Q4_K a quarter, ~300 B; Q6_K a half, ~840 B), with
 * every cache line prefetched PF512_K records ahead. One group's records
 * front to back (one stream per thread) read ~20% slower from DRAM here:
 * Llama-1B Q4_K_M decode, 2 threads, 18-20 t/s against the AVX2 kernels'
 * 21-23. A zmm holds two quads of a record as stored (lane r quad 2p of
 * row r, lane 8 + r quad 2p + 1); the halves' partial sums are added once
 * per super-block (vextracti64x4 + vpaddd). Per 8-row super-block record,
 * ports 0/5:
 *   Q4_K (1184 B): 32 vpdpbusd, 32 nibble ands (the high nibbles in
 *     place, 16 x the code: one vpsrad per quarter), 32 act blends,
 *     8 (vpslld, vpblendmw) + 4 vpdpwssd, 4 scale widenings, mins 8
 *     (pair_dots), ~10 float/convert: ~126 uops, ~63 cycles.
 *   Q6_K (1680 B): 32 vpdpbusd, 16 x 7 code-building uops (nibble and
 *     2-bit fields, variable shifts, ternlog; 16 x 5 with GFNI, q6k_codes), 32 act blends, 4 x 2 vpmulld
 *     (2 uops each) + adds, 16 scale ops, the offsets' term 14
 *     (pair_dots), ~8 float: ~220 uops.
 *   Q5_K (1440 B): Q4_K's with the fifth bits merged per quad pair (GFNI:
 *     2 byte maps + 2 ternlogs + a shift) and two vpdpwssd per quarter
 *     (its sums need int16 pairs of two quad pairs each): ~190 uops.
 *   Q3_K (912 B) / Q2_K (672 B): 32 vpdpbusd, 32 shifts (+ 32 ternlogs and
 *     byte maps for Q3_K's high bits; Q2_K: 24 shifts and 32 masks, or with
 *     GFNI 24 byte maps and 8 masks, field2), 32 act blends, 8 x 3 scale
 *     uops, the offsets' or mins' term (pair_dots): ~170 / ~110 uops.
 * i.e. >= 16 B/cycle of weights (Q3_K ~11): above one core's DRAM stream. The int32
 * sum of a record does not depend on the order of its parts, and the
 * float steps are those of the AVX2 kernels: the same bits.
 */
#define GEMV512_K_STREAMS 4
#ifndef PF512_K
#define PF512_K 2
#endif
/* the stream loops unrolled natively; not in the emulated copy, where the
 * unrolled SIMDe code took over 6 minutes to compile under the sanitizers */
#ifdef VX_EMU
#define UNROLL_STREAMS
#else
#define UNROLL_STREAMS _Pragma("GCC unroll 4")
#endif

/* sum_p sc[p][r][0] b[2p] + sc[p][r][1] b[2p + 1] for the 8 rows r of a
 * record: np pairs of per-row int8 factors ([p][r][j], 16 bytes per p;
 * signed, or unsigned with sgn = 0) against the activation pairs bp
 * (dword p: b[2p], b[2p + 1] as int16), two p per vpdpwssd (lanes 0-7:
 * pair p of rows 0-7, 8-15: pair p + 1). Exact: |sum| < 2^31. Q6_K's
 * offsets term (8 pairs): 14 uops per record instead of 32; Q4_K's mins
 * (4): 8 instead of 16. */
AINLINE __m256i pair_dots(const void *f, int np, int sgn, __m512i bp) {
    __m512i M = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < np; p += 2) {
        const __m256i raw = load256((const uint8_t *)f + 16 * p);
        /* sgn 2: the high nibbles (Q2_K's mins) */
        const __m512i w = sgn == 1 ? _mm512_cvtepi8_epi16(raw)
                          : sgn == 2 ? _mm512_srli_epi16(_mm512_cvtepu8_epi16(raw), 4)
                                     : _mm512_cvtepu8_epi16(raw);
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(p), _mm256_set1_epi32(p + 1), 1);
        M = _mm512_dpwssd_epi32(M, w, _mm512_permutexvar_epi32(idx, bp));
    }
    return fold8(M);
}

/* The GEMV's record parts below take nt tokens' activation blocks (y[u],
 * nt = 1, or 2 for the two-token GEMV) and add into I[u]: the weights are
 * loaded and their codes built once for all of them. */
#define NT_MAX 2

/* Quarter c of a Q4_K_R8 record (sub-blocks 2c, 2c + 1) into I. */
AINLINE void q4k_r8_quarter(const vx_block_q4_K_r8 *b, const vx_block_q8_K *const *y, int nt, int c, __m512i *I) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8((char)0xF0);
    __m512i X[NT_MAX], Y[NT_MAX];
    for (int u = 0; u < nt; u++) X[u] = Y[u] = _mm512_setzero_si512();
    /* the high nibbles in place (16 x the code): one exact shift of the
     * sums instead of one per vector (|16 sum| <= 487680) */
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        const __m512i v = load512(b->qs[c][2 * p]), lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(v, m4h);
        for (int u = 0; u < nt; u++) {
            const int8_t *ylo = y[u]->qs + 64 * c, *yhi = ylo + 32;
            X[u] = _mm512_dpbusd_epi32(X[u], lo, act2(ylo + 8 * p, ylo + 8 * p + 4));
            Y[u] = _mm512_dpbusd_epi32(Y[u], hi, act2(yhi + 8 * p, yhi + 8 * p + 4));
        }
    }
    /* lanes r and 8 + r: 16 elements each, |sum| <= 30480 */
    const __m512i sc = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(load128(b->sc[c])));
    for (int u = 0; u < nt; u++) I[u] = _mm512_dpwssd_epi32(I[u], pack16(X[u], _mm512_srai_epi32(Y[u], 4)), sc);
}

/* The canonical float steps of a Q4_K_R8 record whose code sums are in I. */
AINLINE __m256 q4k_r8_finish(const vx_block_q4_K_r8 *b, const vx_block_q8_K *y, __m512i I, __m256 acc) {
    const __m256i Ir = fold8(I);
    const __m256i M = pair_dots(b->mn, 4, 0, _mm512_castsi128_si512(bsums32(y)));
    const __m256 yd = _mm256_set1_ps(y->d);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(b->d)), yd), _mm256_cvtepi32_ps(Ir), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(b->dmin)), yd), _mm256_cvtepi32_ps(M), acc);
}

/* The 2-bit code bytes of a Q2_K_R8 record, or (tern) a TQ2_0_R8 one:
 * the same [h][q][r][b] layout at another offset. */
AINLINE const uint8_t (*qs2_of(int tern, const uint8_t *rec))[8][8][4] {
    return tern ? ((const vx_block_tq2_0_r8 *)(const void *)rec)->qs : ((const vx_block_q2_K_r8 *)(const void *)rec)->qs;
}

/* Bit s of each byte of h at bit t, every other bit clear: a GFNI bit
 * matrix (output bit t = input bit s: matrix byte 7 - t = 1 << s), or a
 * 16-bit shift and a mask. */
AINLINE __m512i bit_to(__m512i h, int s, int t, int gf) {
    if (gf) return _mm512_gf2p8affine_epi64_epi8(h, _mm512_set1_epi64((long long)((1ull << s) << 8 * (7 - t))), 0);
    const __m512i x = s < t ? _mm512_slli_epi16(h, t - s) : s > t ? _mm512_srli_epi16(h, s - t) : h;
    return _mm512_and_si512(x, _mm512_set1_epi8((char)(1 << t)));
}

/* The 2-bit fields j of the bytes of v (bits 2j, 2j + 1) at bits 0-1,
 * every other bit clear: a shift and a mask, or with GFNI one byte map
 * (output bits 0 and 1 = input bits 2j and 2j + 1: matrix bytes 7 and 6).
 * Q2_K's codes: from L2, one thread, its gemv ran ~25% faster with the
 * byte map (the shift and the mask per vpdpbusd were its bottleneck). */
AINLINE __m512i field2(__m512i v, int j, int gf) {
    if (gf && j)
        return _mm512_gf2p8affine_epi64_epi8(
            v, _mm512_set1_epi64((long long)(((1ull << (2 * j)) << 56) | ((1ull << (2 * j + 1)) << 48))), 0);
    return _mm512_and_si512(j ? _mm512_srli_epi16(v, 2 * j) : v, _mm512_set1_epi8(3));
}

/* Quarter c of a Q5_K_R8 record into I: Q4_K's nibbles (the high ones
 * shifted down: a 5-bit code times 16 does not fit a byte) with the fifth
 * bits (qh[q] holds both quads of a zmm in its lanes' order: bit 2c of a
 * byte for the low nibble's element, 2c + 1 for the high one's). A
 * 16-element lane sum reaches 16 * 31 * 127 = 62992, past int16: two
 * pairs of quads each (<= 31496) go into the int16 pairs of vpdpwssd, so
 * I gains the same exact sum as Q4_K's one madd: 6 uops per 16 vpdpbusd. */
AINLINE void q5k_r8_quarter(const vx_block_q5_K_r8 *b5, const vx_block_q8_K *const *y, int nt, int c, __m512i *I,
                            int gf) {
    const vx_block_q4_K_r8 *b = &b5->k4;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i sc = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(load128(b->sc[c])));
#pragma GCC unroll 2
    for (int hp = 0; hp < 2; hp++) {
        __m512i X[NT_MAX], Y[NT_MAX];
        for (int u = 0; u < nt; u++) X[u] = Y[u] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int p = 2 * hp; p < 2 * hp + 2; p++) {
            const __m512i v = load512(b->qs[c][2 * p]), qh = load512(b5->qh[2 * p]);
            /* (a & c) | b: imm 0xEC */
            const __m512i lo = _mm512_ternarylogic_epi32(v, bit_to(qh, 2 * c, 4, gf), m4, 0xEC);
            const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), bit_to(qh, 2 * c + 1, 4, gf), m4, 0xEC);
            for (int u = 0; u < nt; u++) {
                const int8_t *ylo = y[u]->qs + 64 * c, *yhi = ylo + 32;
                X[u] = _mm512_dpbusd_epi32(X[u], lo, act2(ylo + 8 * p, ylo + 8 * p + 4));
                Y[u] = _mm512_dpbusd_epi32(Y[u], hi, act2(yhi + 8 * p, yhi + 8 * p + 4));
            }
        }
        for (int u = 0; u < nt; u++) I[u] = _mm512_dpwssd_epi32(I[u], pack16(X[u], Y[u]), sc);
    }
}

/* Half h of a Q3_K_R8 (three) / Q2_K_R8 record into I: steps p = 4h + j
 * (sub-blocks 2p, 2p + 1: quad pairs 0-1 and 2-3 of qs[h], bits 2j, with
 * Q3_K's high bit 4h + j of hm at bit 2), each sub-block's lane sums (8
 * elements, <= 8 * 7 * 127) an int16 of the pair vpdpwssd takes with the
 * sub-block scales (Q3_K: int8 -32..31; Q2_K: the low nibbles), as Q4_K:
 * 3 uops per 4 vpdpbusd. Q3_K's offset (codes are u - 4) and Q2_K's mins
 * come in at the finish. */
AINLINE void q23k_r8_half(int three, int tern, const uint8_t *rec, const vx_block_q8_K *const *y, int nt, int h,
                          __m512i *I, int gf) {
    const vx_block_q2_K_r8 *b2 = (const vx_block_q2_K_r8 *)(const void *)rec;
    const vx_block_q3_K_r8 *b3 = (const vx_block_q3_K_r8 *)(const void *)rec;
    const uint8_t(*qs2)[8][8][4] = qs2_of(tern, rec);
    const __m512i m3 = _mm512_set1_epi8(3);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const int p = 4 * h + j;
        const __m256i raw =
            tern ? _mm256_setzero_si256()
                 : _mm256_broadcastsi128_si256(load128(three ? (const void *)b3->sc[p] : (const void *)b2->sc[p]));
        const __m512i sc = tern    ? _mm512_set1_epi16(1)
                           : three ? _mm512_cvtepi8_epi16(raw)
                                   : _mm512_and_si512(_mm512_cvtepu8_epi16(raw), _mm512_set1_epi16(15));
        __m512i X[NT_MAX], Y[NT_MAX];
        for (int u = 0; u < nt; u++) X[u] = Y[u] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int pq = 0; pq < 4; pq++) {
            /* (a & c) | b: imm 0xEC */
            const __m512i c = three ? _mm512_ternarylogic_epi32(_mm512_srli_epi16(load512(b3->qs[h][2 * pq]), 2 * j),
                                                                bit_to(load512(b3->hm[2 * pq]), p, 2, gf), m3, 0xEC)
                                    : field2(load512(qs2[h][2 * pq]), j, gf);
            for (int u = 0; u < nt; u++) {
                const int8_t *ya = y[u]->qs + 32 * p + 8 * pq;
                if (pq < 2) X[u] = _mm512_dpbusd_epi32(X[u], c, act2(ya, ya + 4));
                else Y[u] = _mm512_dpbusd_epi32(Y[u], c, act2(ya, ya + 4));
            }
        }
        for (int u = 0; u < nt; u++) I[u] = _mm512_dpwssd_epi32(I[u], pack16(X[u], Y[u]), sc);
    }
}

/* The canonical float steps of a Q3_K_R8 / Q2_K_R8 record whose code sums
 * are in I (those of the AVX2 kernels). */
AINLINE __m256 q23k_r8_finish(int three, int tern, const uint8_t *rec, const vx_block_q8_K *y, __m512i I, __m256 acc) {
    const __m512i bs = _mm512_castsi256_si512(load256(y->bsums));
    __m256i Ir = fold8(I);
    const __m256 yd = _mm256_set1_ps(y->d);
    if (three) {
        Ir = _mm256_sub_epi32(Ir, _mm256_slli_epi32(pair_dots(((const vx_block_q3_K_r8 *)(const void *)rec)->sc, 8, 1, bs), 2));
        return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(rec)), yd), _mm256_cvtepi32_ps(Ir), acc);
    }
    const vx_block_q2_K_r8 *b = (const vx_block_q2_K_r8 *)(const void *)rec;
    /* TQ2_0: mins 1, so M is the sum of the 16 bsums in every lane */
    const __m256i M = tern ? _mm256_set1_epi32(hsum_epi32(_mm256_madd_epi16(load256(y->bsums), _mm256_set1_epi16(1))))
                           : pair_dots(b->sc, 8, 2, bs);
    const __m256 d = _mm256_cvtph_ps(load128(rec)); /* every record starts with d[8]; TQ2_0's dmin is d */
    acc = _mm256_fmadd_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(Ir), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(tern ? d : _mm256_cvtph_ps(load128(b->dmin)), yd), _mm256_cvtepi32_ps(M),
                            acc);
}

/* Sub-block scales as int32 lanes from a vector of int16 pairs
 * (sc[2p], sc[2p + 1]) per lane: the first (j = 0) or the second. */
AINLINE __m512i pair_sel(__m512i x, int j) {
    return j ? _mm512_srai_epi32(x, 16) : _mm512_srai_epi32(_mm512_slli_epi32(x, 16), 16);
}

/* The 6-bit codes of a quad pair, lanes 0-7 | 8-15: c01 from the low
 * nibbles (quarters 0 | 1) and c23 from the high ones (quarters 2 | 3),
 * with the qh 2-bit field of each quarter at bits 4-5. Without GFNI: a
 * variable 16-bit shift of qh per half (bits 4-5 of each byte stay within
 * the byte) and a merge, 7 uops. With GFNI (gf: vgf2p8affineqb, a bit
 * matrix per qword applied to each byte; output bit i is the parity of
 * matrix byte 7 - i and the input) each field lands at bits 4-5 with
 * every other bit clear, so one ternlog merges it: 5 uops. */
AINLINE void q6k_codes(__m512i L, __m512i QH, int gf, __m512i *c01, __m512i *c23) {
    if (gf) {
        /* field f (bits 2f, 2f + 1) -> bits 4, 5: matrix byte 3 = 1 << 2f,
         * byte 2 = 2 << 2f; low half fields 0 | 2, high half 1 | 3 */
        const __m512i m01 = _mm512_set_epi64(0x04080000, 0x04080000, 0x04080000, 0x04080000, 0x01020000, 0x01020000,
                                             0x01020000, 0x01020000);
        const __m512i m23 = _mm512_set_epi64(0x40800000, 0x40800000, 0x40800000, 0x40800000, 0x10200000, 0x10200000,
                                             0x10200000, 0x10200000);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        /* (a & c) | b: imm 0xEC */
        *c01 = _mm512_ternarylogic_epi32(L, _mm512_gf2p8affine_epi64_epi8(QH, m01, 0), m4, 0xEC);
        *c23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(L, 4), _mm512_gf2p8affine_epi64_epi8(QH, m23, 0), m4, 0xEC);
        return;
    }
    /* 2-bit fields of qh to bits 4-5: quarters 0 | 1 (low | high half of
     * the zmm) left by 4 | 2, quarters 2 | 3 right by 0 | 2; merge6 takes
     * bits 4-5 of the shifted qh itself */
    const __m512i sh01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    *c01 = merge6(L, _mm512_sllv_epi16(QH, sh01));
    *c23 = merge6(_mm512_srli_epi16(L, 4), _mm512_srlv_epi16(QH, sh23));
}

/* Half h of a Q6_K_R8 record (sub-blocks 8h .. 8h + 7) into I, with the
 * npf cache lines from pf prefetched two per quad along the way (14 lines
 * in a row before the half read 5-6% slower from DRAM than spread out,
 * 2 threads, in-process alternation). */
AINLINE void q6k_r8_half(const vx_block_q6_K_r8 *b, const vx_block_q8_K *const *y, int nt, int h, __m512i *I,
                         int gf, const uint8_t *pf, int npf) {
    /* sub-block scale pairs: lanes 0-7 of quarter s0, 8-15 of s0 + 1 */
    const __m512i x01 = _mm512_cvtepi8_epi16(load256(b->sc[4 * h]));
    const __m512i x23 = _mm512_cvtepi8_epi16(load256(b->sc[4 * h + 2]));
#pragma GCC unroll 2
    for (int hq = 0; hq < 2; hq++) { /* quads 4hq .. 4hq + 3: sub-blocks 8h + 2s + hq */
        __m512i S01[NT_MAX], S23[NT_MAX];
        for (int u = 0; u < nt; u++) S01[u] = S23[u] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int q = 4 * hq; q < 4 * hq + 4; q++) {
            if (2 * q < npf) prefetch_line(pf + 128 * q);
            if (2 * q + 1 < npf) prefetch_line(pf + 128 * q + 64);
            const __m512i L = load512(b->q[h][q][0]); /* l0 | l1 */
            const __m512i QH = _mm512_broadcast_i64x4(load256(b->q[h][q][2]));
            __m512i c01, c23;
            q6k_codes(L, QH, gf, &c01, &c23);
            for (int u = 0; u < nt; u++) {
                const int8_t *yh = y[u]->qs + 128 * h;
                S01[u] = _mm512_dpbusd_epi32(S01[u], c01, act2(yh + 4 * q, yh + 32 + 4 * q));
                S23[u] = _mm512_dpbusd_epi32(S23[u], c23, act2(yh + 64 + 4 * q, yh + 96 + 4 * q));
            }
        }
        for (int u = 0; u < nt; u++) {
            I[u] = _mm512_add_epi32(I[u], _mm512_mullo_epi32(S01[u], pair_sel(x01, hq)));
            I[u] = _mm512_add_epi32(I[u], _mm512_mullo_epi32(S23[u], pair_sel(x23, hq)));
        }
    }
}

AINLINE __m256 q6k_r8_finish(const vx_block_q6_K_r8 *b, const vx_block_q8_K *y, __m512i I, __m256 acc) {
    __m256i Ir = fold8(I);
    const __m256i M = pair_dots(b->sc, 8, 1, _mm512_castsi256_si512(load256(y->bsums)));
    Ir = _mm256_sub_epi32(Ir, _mm256_slli_epi32(M, 5)); /* codes are u - 32 */
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(b->d)), _mm256_set1_ps(y->d)),
                           _mm256_cvtepi32_ps(Ir), acc);
}

/* G groups' records (g[s]) side by side, a part of each record in turn,
 * against nt tokens' activation rows (y[u]); group s's results for token
 * u go to out[s] + u ldo (added to what is there with accumulate). */
AINLINE void groupsK(int k, int G, int nt, int64_t nsb, const uint8_t *const *g, const vx_block_q8_K *const *y,
                     float *const *out, int64_t ldo, int accumulate) {
    const int six = is_six(k), five = is_five(k), three = is_three(k), two = is_two(k);
    const size_t rs = recK(k);
    const int parts = six || three || two ? 2 : 4;
    const size_t part = rs / (size_t)parts;
    __m256 acc[GEMV512_K_STREAMS][NT_MAX];
UNROLL_STREAMS
    for (int s = 0; s < G; s++)
        for (int u = 0; u < nt; u++) acc[s][u] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        __m512i I[GEMV512_K_STREAMS][NT_MAX];
        const vx_block_q8_K *yi[NT_MAX];
        for (int u = 0; u < nt; u++) yi[u] = y[u] + i;
UNROLL_STREAMS
        for (int s = 0; s < G; s++)
            for (int u = 0; u < nt; u++) I[s][u] = _mm512_setzero_si512();
UNROLL_STREAMS
        for (int c = 0; c < parts; c++) {
UNROLL_STREAMS
            for (int s = 0; s < G; s++) {
                const uint8_t *rec = g[s] + (size_t)i * rs;
                const uint8_t *pf = rec + part * (size_t)c + PF512_K * rs; /* this part, PF512_K records on */
                const size_t npf = c < parts - 1 ? part : rs - (size_t)(parts - 1) * part;
                if (!six) prefetch_ahead(pf, 0, npf);
                if (six)
                    q6k_r8_half((const vx_block_q6_K_r8 *)(const void *)rec, yi, nt, c, I[s], has_gf(k), pf,
                                (int)((npf + 63) / 64));
                else if (three || two)
                    q23k_r8_half(three, is_tern(k), rec, yi, nt, c, I[s], has_gf(k));
                else if (five)
                    q5k_r8_quarter((const vx_block_q5_K_r8 *)(const void *)rec, yi, nt, c, I[s], has_gf(k));
                else
                    q4k_r8_quarter((const vx_block_q4_K_r8 *)(const void *)rec, yi, nt, c, I[s]);
            }
        }
UNROLL_STREAMS
        for (int s = 0; s < G; s++) {
            const uint8_t *rec = g[s] + (size_t)i * rs;
            for (int u = 0; u < nt; u++)
                /* Q5_K_R8 starts with Q4_K_R8's fields */
                acc[s][u] = three || two ? q23k_r8_finish(three, is_tern(k), rec, yi[u], I[s][u], acc[s][u])
                            : !six ? q4k_r8_finish((const vx_block_q4_K_r8 *)(const void *)rec, yi[u], I[s][u], acc[s][u])
                                   : q6k_r8_finish((const vx_block_q6_K_r8 *)(const void *)rec, yi[u], I[s][u], acc[s][u]);
        }
    }
UNROLL_STREAMS
    for (int s = 0; s < G; s++)
        for (int u = 0; u < nt; u++) {
            float *o = out[s] + u * ldo;
            _mm256_storeu_ps(o, accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[s][u]) : acc[s][u]);
        }
}

/* nt tokens' activation rows (act_stride bytes apart) through the G far
 * groups of the call's rows: token u's results at out + u ldo. */
AINLINE void gemvNK(int k, int nt, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                    size_t act_stride, float *out, int64_t ldo, int accumulate) {
    const int64_t nsb = n / QK;
    const vx_block_q8_K *y[NT_MAX];
    for (int u = 0; u < nt; u++) y[u] = (const vx_block_q8_K *)(const void *)((const uint8_t *)act + (size_t)u * act_stride);
    const uint8_t *g[GEMV512_K_STREAMS];
    float *o[GEMV512_K_STREAMS];
#define GROUPSK_RUN(G_) groupsK(k, G_, nt, nsb, g, y, o, ldo, accumulate)
    GEMV_FAR_GROUPS(w, stride, nrows, out, GEMV512_K_STREAMS, g, o, GROUPSK_RUN);
#undef GROUPSK_RUN
}

#ifdef VX_EMU
/* The emulated copy compiles it once, the kind and the token count read
 * at run time: SIMDe's code for a copy per kind and count made this file
 * CI's longest compile (4.4 minutes with the two-token copies). */
static __attribute__((noinline)) void gemvNK_any(int k, int nt, int64_t n, const void *w, size_t stride, int nrows,
                                                 const void *act, size_t act_stride, float *out, int64_t ldo,
                                                 int accumulate) {
    gemvNK(k, nt, n, w, stride, nrows, act, act_stride, out, ldo, accumulate);
}
#define GEMVNK gemvNK_any
#else
#define GEMVNK gemvNK
#endif

AINLINE void gemvK(int k, int64_t n, const void *w, size_t stride, int nrows, const void *vy, float *out) {
    GEMVNK(k, 1, n, w, stride, nrows, vy, 0, out, 0, 0);
}

/* Two tokens (batched decoding of two sequences, a speculative draft's
 * pair): the GEMV's far record streams, each record's codes built once
 * for both. The weights are read at the GEMV's rate, where the 16-row
 * GEMM (one record stream, its compute between the reads) read 19-23
 * GB/s from DRAM against the GEMV's ~34 (bench_gemv_dram Q4_K:2).
 * Per token the same integer sums and float steps as the GEMV: its bits. */
AINLINE void gemv2K(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act, size_t act_stride,
                    float *out, int64_t ldo, int accumulate) {
    GEMVNK(k, 2, n, w, stride, nrows, act, act_stride, out, ldo, accumulate);
}

/* The entry points (kernels_x86.h). */
GEMV_ENTRY(VX512(vx_gemv_q4_K_r8), gemvK, K_Q4_K)
GEMV_ENTRY(VX512(vx_gemv_q6_K_r8), gemvK, K_Q6_K)
GEMV_ENTRY(VX512(vx_gemv_q6_K_r8_gfni), gemvK, K_Q6_K_GF)
GEMV_ENTRY(VX512(vx_gemv_q5_K_r8), gemvK, K_Q5_K)
GEMV_ENTRY(VX512(vx_gemv_q5_K_r8_gfni), gemvK, K_Q5_K_GF)
GEMV_ENTRY(VX512(vx_gemv_q3_K_r8), gemvK, K_Q3_K)
GEMV_ENTRY(VX512(vx_gemv_q3_K_r8_gfni), gemvK, K_Q3_K_GF)
GEMV_ENTRY(VX512(vx_gemv_q2_K_r8), gemvK, K_Q2_K)
GEMV_ENTRY(VX512(vx_gemv_q2_K_r8_gfni), gemvK, K_Q2_K_GF)
GEMV_ENTRY(VX512(vx_gemv_tq2_0_r8), gemvK, K_TQ2)
GEMV_ENTRY(VX512(vx_gemv_tq2_0_r8_gfni), gemvK, K_TQ2_GF)

/* ===================================================================== GEMM
 * 16 rows at a time (lane r: row r of group A, lane 8 + r: row r of group
 * B; a lone last group pairs with itself). One super-block of the 16 rows
 * is unpacked into an L1 panel, then 4 tokens at a time run against it
 * with the activation dwords broadcast from memory (load ports only).
 *
 * Q4_K per (16 rows, 4 tokens, super-block): 256 vpdpbusd; per sub-block
 * pair and token 2 x (vpslld, vpblendmw) + 2 vpdpwssd = 96; mins 16
 * vpdpwssd; float 24: ~392 port-0/5 uops, 65% of the VNNI peak. Each
 * sub-block half is a chain of 4 vpdpbusd: 16 independent chains per
 * sub-block pair (4 tokens x 2 sub-blocks x 2 halves). Loads: 64 panel
 * loads per 256 vpdpbusd + the broadcasts (load ports only).
 * Q6_K per (16 rows, 4 tokens, super-block): 256 vpdpbusd, 64 vpmulld (128
 * uops) + 64 vpaddd, mins 32 vpdpwssd + 8, float 12: ~500 uops, 51%;
 * 8 chains of 4 per (quad group, quarter pair) step, 16 live zmm (with
 * 16 chains GCC spilled a third of them).
 */

typedef struct {
    /* unsigned codes: [g][q] elements 32g + 4q .. + 3 (Q2_K..Q5_K); [4h + s][q]: half h, quarter s, quad q
     * for Q6_K */
    __m512i q[8][8];
    /* Q4_K: [c] (sc[2c], sc[2c + 1]) int16 pairs; Q5_K: [j] (sc[j], 256 sc[j]); Q3_K, Q2_K: [p] (sc[2p],
     * sc[2p + 1]) of the 16-element sub-blocks; Q6_K: [j] sub-block j's scale (int32) */
    __m512i sc[16];
    /* int16 pairs for the mins / offsets term: Q4_K, Q5_K mins (4), Q2_K mins (8), Q3_K, Q6_K scales (8) */
    __m512i mp[8];
    __m512 d, dmin;
} panelK;

/* Part j of parts of the bs-byte records at pa and pb (pb NULL: none)
 * prefetched, a line at a time among the unpacking loads. */
AINLINE void prefetch_part(const uint8_t *pa, const uint8_t *pb, size_t bs, int j, int parts) {
    const size_t o0 = bs * (size_t)j / (size_t)parts / 64 * 64;
    const size_t o1 = j == parts - 1 ? bs : bs * (size_t)(j + 1) / (size_t)parts / 64 * 64;
    for (size_t o = o0; o < o1; o += 64) {
        prefetch_line(pa + o);
        if (pb) prefetch_line(pb + o);
    }
}

/* Unpacks a super-block of groups A and B into P, prefetching the records
 * at pa, pb (pa NULL: none) along the way. */
AINLINE void load_q4_K(const vx_block_q4_K_r8 *A, const vx_block_q4_K_r8 *B, panelK *P, const uint8_t *pa,
                       const uint8_t *pb) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
        if (pa) prefetch_part(pa, pb, sizeof *A, c, 4);
        for (int q = 0; q < 8; q++) {
            const __m512i v = pair256(A->qs[c][q], B->qs[c][q]);
            P->q[2 * c][q] = _mm512_and_si512(v, m4);
            P->q[2 * c + 1][q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        P->sc[c] = _mm512_cvtepu8_epi16(pair128(A->sc[c], B->sc[c]));
        P->mp[c] = _mm512_cvtepu8_epi16(pair128(A->mn[c], B->mn[c]));
    }
    P->d = _mm512_cvtph_ps(pair128(A->d, B->d));
    P->dmin = _mm512_cvtph_ps(pair128(A->dmin, B->dmin));
}

AINLINE void load_q6_K(const vx_block_q6_K_r8 *A, const vx_block_q6_K_r8 *B, panelK *P, const uint8_t *pa,
                       const uint8_t *pb) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 8; q++) {
            if (pa) prefetch_part(pa, pb, sizeof *A, 8 * h + q, 16);
            const __m512i l0 = pair256(A->q[h][q][0], B->q[h][q][0]), l1 = pair256(A->q[h][q][1], B->q[h][q][1]);
            const __m512i qh = pair256(A->q[h][q][2], B->q[h][q][2]);
            P->q[4 * h][q] = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
            P->q[4 * h + 1][q] =
                _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
            P->q[4 * h + 2][q] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4), _mm512_and_si512(qh, m30));
            P->q[4 * h + 3][q] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                                 _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
        }
    for (int p = 0; p < 8; p++) {
        const __m512i x = _mm512_cvtepi8_epi16(pair128(A->sc[p], B->sc[p]));
        P->mp[p] = x;
        P->sc[2 * p] = pair_sel(x, 0);
        P->sc[2 * p + 1] = pair_sel(x, 1);
    }
    P->d = _mm512_cvtph_ps(pair128(A->d, B->d));
    P->dmin = _mm512_setzero_ps();
}

/* Q5_K: Q4_K's panel with the fifth bits (bit g of qh[q]) at bit 4 of
 * each code, and its scales as (sc, 256 sc) pairs (tileK). */
AINLINE void load_q5_K(const vx_block_q5_K_r8 *A, const vx_block_q5_K_r8 *B, panelK *P, const uint8_t *pa,
                       const uint8_t *pb, int gf) {
    load_q4_K(&A->k4, &B->k4, P, pa, pb);
    if (pa) {
        pa += sizeof A->k4;
        pb = pb ? pb + sizeof A->k4 : NULL;
    }
    for (int q = 0; q < 8; q++) {
        if (pa && q % 4 == 0) prefetch_part(pa, pb, sizeof A->qh, q / 4, 2);
        const __m512i h = pair256(A->qh[q], B->qh[q]);
        for (int g = 0; g < 8; g++) P->q[g][q] = _mm512_or_si512(P->q[g][q], bit_to(h, g, 4, gf));
    }
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    for (int c = 3; c >= 0; c--) {
        const __m512i x = P->sc[c], s0 = _mm512_and_si512(x, lo16), s1 = _mm512_srli_epi32(x, 16);
        P->sc[2 * c] = _mm512_or_si512(s0, _mm512_slli_epi32(s0, 24));
        P->sc[2 * c + 1] = _mm512_or_si512(s1, _mm512_slli_epi32(s1, 24));
    }
}

/* Q3_K (three; its high bits, bit g of hm[q], at bit 2), Q2_K and TQ2_0
 * (tern: Q2_K's with every scale and min 1, dmin = d): the 2-bit fields j
 * of qs[h][q] are group 4h + j. */
AINLINE void load_q23_K(int three, int tern, const uint8_t *ra, const uint8_t *rb, panelK *P, const uint8_t *pa,
                        const uint8_t *pb, int gf) {
    const vx_block_q3_K_r8 *A3 = (const vx_block_q3_K_r8 *)(const void *)ra, *B3 = (const vx_block_q3_K_r8 *)(const void *)rb;
    const vx_block_q2_K_r8 *A2 = (const vx_block_q2_K_r8 *)(const void *)ra, *B2 = (const vx_block_q2_K_r8 *)(const void *)rb;
    const uint8_t(*qa)[8][8][4] = qs2_of(tern, ra), (*qb)[8][8][4] = qs2_of(tern, rb);
    const size_t bs = three ? sizeof *A3 : tern ? sizeof(vx_block_tq2_0_r8) : sizeof *A2;
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int q = 0; q < 8; q++) {
        const __m512i hm = three ? pair256(A3->hm[q], B3->hm[q]) : _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            if (pa) prefetch_part(pa, pb, bs, 2 * q + h, 16);
            const __m512i v = three ? pair256(A3->qs[h][q], B3->qs[h][q]) : pair256(qa[h][q], qb[h][q]);
            for (int j = 0; j < 4; j++)
                /* (a & c) | b: imm 0xEC */
                P->q[4 * h + j][q] =
                    three ? _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 2 * j), bit_to(hm, 4 * h + j, 2, gf), m3, 0xEC)
                          : field2(v, j, gf);
        }
    }
    for (int p = 0; p < 8; p++) {
        if (three) {
            P->sc[p] = P->mp[p] = _mm512_cvtepi8_epi16(pair128(A3->sc[p], B3->sc[p]));
        } else if (tern) {
            P->sc[p] = P->mp[p] = _mm512_set1_epi16(1);
        } else {
            const __m512i x = _mm512_cvtepu8_epi16(pair128(A2->sc[p], B2->sc[p]));
            P->sc[p] = _mm512_and_si512(x, _mm512_set1_epi16(15));
            P->mp[p] = _mm512_srli_epi16(x, 4);
        }
    }
    P->d = _mm512_cvtph_ps(pair128(ra, rb)); /* every record starts with d[8] */
    P->dmin = three ? _mm512_setzero_ps() : tern ? P->d : _mm512_cvtph_ps(pair128(A2->dmin, B2->dmin));
}

/* Kinds of the GEMM: Q6_K's tile is its own; the rest share Q4_K's (8
 * groups of 32 elements) and differ in how sub-block sums meet their
 * scales and in the offsets / mins term.
 * Q4_K, Q5_K: mins over 32-element sums (4 bsum pairs); the others 8 */
AINLINE int sums32(int k) { return k == K_Q4_K || is_five(k); }

/* (X & 0xFF, X >> 8) as the int16 pair of each dword (|X| < 2^23): with
 * the pair (s, 256 s), one vpdpwssd adds X s exactly. */
AINLINE __m512i split16(__m512i x) {
    return _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAA, _mm512_and_si512(x, _mm512_set1_epi32(0xFF)),
                                   _mm512_slli_epi32(x, 8));
}

#define U4(X) X(0) X(1) X(2) X(3)

/* Four tokens' blocks y0..y3 of this super-block against a panel: acc[u]
 * takes the canonical step (16 rows). bs[u]: token u's bsum pairs (Q4_K:
 * sums of 32 as 4 dwords of int16 pairs; Q6_K: the 8 dwords of bsums). */
AINLINE void tileK(int k, int nu, const panelK *P, const vx_block_q8_K *y0, const vx_block_q8_K *y1,
                   const vx_block_q8_K *y2, const vx_block_q8_K *y3, const int32_t *const bs[4], __m512 acc[4]) {
    __m512i I0 = _mm512_setzero_si512(), I1 = I0, I2 = I0, I3 = I0;
    if (!is_six(k)) {
        for (int c = 0; c < 4; c++) {
            /* X: sub-block 2c, Y: 2c + 1; a: quads 0-3, b: quads 4-7 */
            __m512i Xa0 = _mm512_setzero_si512(), Xa1 = Xa0, Xa2 = Xa0, Xa3 = Xa0, Xb0 = Xa0, Xb1 = Xa0, Xb2 = Xa0,
                    Xb3 = Xa0, Ya0 = Xa0, Ya1 = Xa0, Ya2 = Xa0, Ya3 = Xa0, Yb0 = Xa0, Yb1 = Xa0, Yb2 = Xa0, Yb3 = Xa0;
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                const __m512i WXa = P->q[2 * c][q], WYa = P->q[2 * c + 1][q];
                const __m512i WXb = P->q[2 * c][q + 4], WYb = P->q[2 * c + 1][q + 4];
                const int e = 64 * c + 4 * q;
#define STEP(u)                                                                  \
    if ((u) < nu) {                                                              \
        Xa##u = _mm512_dpbusd_epi32(Xa##u, WXa, bcast32(y##u->qs + e));          \
        Xb##u = _mm512_dpbusd_epi32(Xb##u, WXb, bcast32(y##u->qs + e + 16));     \
        Ya##u = _mm512_dpbusd_epi32(Ya##u, WYa, bcast32(y##u->qs + e + 32));     \
        Yb##u = _mm512_dpbusd_epi32(Yb##u, WYb, bcast32(y##u->qs + e + 48));     \
    }
                U4(STEP)
#undef STEP
            }
            /* the 16-element sums (Q4_K: <= 30480, Q3_K: 14224, Q2_K:
             * 6096) as int16 pairs against scale pairs; Q5_K's (62992)
             * would not fit: its 32-element sums split16 */
            if (k == K_Q4_K) {
                const __m512i S = P->sc[c];
#define COMB(u)                                                         \
    if ((u) < nu) {                                                     \
        I##u = _mm512_dpwssd_epi32(I##u, pack16(Xa##u, Ya##u), S);      \
        I##u = _mm512_dpwssd_epi32(I##u, pack16(Xb##u, Yb##u), S);      \
    }
                U4(COMB)
#undef COMB
            } else if (is_five(k)) {
                const __m512i SX = P->sc[2 * c], SY = P->sc[2 * c + 1];
#define COMB(u)                                                                                   \
    if ((u) < nu) {                                                                               \
        I##u = _mm512_dpwssd_epi32(I##u, split16(_mm512_add_epi32(Xa##u, Xb##u)), SX);            \
        I##u = _mm512_dpwssd_epi32(I##u, split16(_mm512_add_epi32(Ya##u, Yb##u)), SY);            \
    }
                U4(COMB)
#undef COMB
            } else {
                const __m512i SX = P->sc[2 * c], SY = P->sc[2 * c + 1];
#define COMB(u)                                                         \
    if ((u) < nu) {                                                     \
        I##u = _mm512_dpwssd_epi32(I##u, pack16(Xa##u, Xb##u), SX);     \
        I##u = _mm512_dpwssd_epi32(I##u, pack16(Ya##u, Yb##u), SY);     \
    }
                U4(COMB)
#undef COMB
            }
        }
    } else {
        /* per half h, quad group hq (quads 4hq .. 4hq + 3) and quarter pair
         * sp (quarters 2sp, 2sp + 1): 8 chains of 4 (2 quarters x 4 tokens);
         * quarter s is sub-block 8h + 2s + hq */
        for (int h = 0; h < 2; h++)
            for (int hq = 0; hq < 2; hq++)
                for (int sp = 0; sp < 2; sp++) {
                    const int s0 = 2 * sp;
                    __m512i Sa0 = _mm512_setzero_si512(), Sa1 = Sa0, Sa2 = Sa0, Sa3 = Sa0, Sb0 = Sa0, Sb1 = Sa0,
                            Sb2 = Sa0, Sb3 = Sa0;
#pragma GCC unroll 4
                    for (int qq = 0; qq < 4; qq++) {
                        const int q = 4 * hq + qq;
                        const __m512i Wa = P->q[4 * h + s0][q], Wb = P->q[4 * h + s0 + 1][q];
                        const int e = 128 * h + 32 * s0 + 4 * q;
#define STEP(u)                                                                \
    if ((u) < nu) {                                                            \
        Sa##u = _mm512_dpbusd_epi32(Sa##u, Wa, bcast32(y##u->qs + e));        \
        Sb##u = _mm512_dpbusd_epi32(Sb##u, Wb, bcast32(y##u->qs + e + 32));   \
    }
                        U4(STEP)
#undef STEP
                    }
                    const __m512i Ca = P->sc[8 * h + 2 * s0 + hq], Cb = P->sc[8 * h + 2 * s0 + 2 + hq];
#define SCALE(u)                                                                                                      \
    if ((u) < nu)                                                                                                     \
        I##u = _mm512_add_epi32(I##u, _mm512_add_epi32(_mm512_mullo_epi32(Sa##u, Ca), _mm512_mullo_epi32(Sb##u, Cb)));
                    U4(SCALE)
#undef SCALE
                }
    }
    const __m512i Iv[4] = {I0, I1, I2, I3};
    const vx_block_q8_K *yv[4] = {y0, y1, y2, y3};
    for (int u = 0; u < nu; u++) {
        __m512i M = _mm512_setzero_si512();
        const __m512 yd = _mm512_set1_ps(yv[u]->d);
        if (sums32(k)) {
            for (int p = 0; p < 4; p++) M = _mm512_dpwssd_epi32(M, P->mp[p], _mm512_set1_epi32(bs[u][p]));
            acc[u] = _mm512_fmadd_ps(_mm512_mul_ps(P->d, yd), _mm512_cvtepi32_ps(Iv[u]), acc[u]);
            acc[u] = _mm512_fnmadd_ps(_mm512_mul_ps(P->dmin, yd), _mm512_cvtepi32_ps(M), acc[u]);
        } else if (is_two(k)) {
            for (int p = 0; p < 8; p++) M = _mm512_dpwssd_epi32(M, P->mp[p], _mm512_set1_epi32(bs[u][p]));
            acc[u] = _mm512_fmadd_ps(_mm512_mul_ps(P->d, yd), _mm512_cvtepi32_ps(Iv[u]), acc[u]);
            acc[u] = _mm512_fnmadd_ps(_mm512_mul_ps(P->dmin, yd), _mm512_cvtepi32_ps(M), acc[u]);
        } else {
            for (int p = 0; p < 8; p++) M = _mm512_dpwssd_epi32(M, P->mp[p], _mm512_set1_epi32(bs[u][p]));
            /* codes are u - 32 (Q6_K), u - 4 (Q3_K) */
            const __m512i I = _mm512_sub_epi32(Iv[u], _mm512_slli_epi32(M, is_six(k) ? 5 : 2));
            acc[u] = _mm512_fmadd_ps(_mm512_mul_ps(P->d, yd), _mm512_cvtepi32_ps(I), acc[u]);
        }
    }
}

/* Tokens per tile: 16 rows x TT accumulators (64 KiB at 256, L2) */
#define TT 256
/* Records prefetched GEMM_PFD super-blocks ahead, a line at a time among
 * the unpacking loads. With the next super-block prefetched in one burst
 * the Q4_K GEMM read 14-16 GB/s from DRAM at 2 tokens and 11-12 at 8 (2
 * threads, tests/bench_gemv_dram.c), 17-20 and 12-14 two ahead. Four row
 * blocks far apart in step (the GEMV's streams) read no faster. */
#ifndef GEMM_PFD
#define GEMM_PFD 2
#endif

/* The tiles of nt tokens (t0 on) against panel P of super-block i, into
 * acc[0 .. nt): 4 tokens at a time, a last 1-2 as a 2-token tile. bsum:
 * the tokens' bsum pairs of the super-block. */
AINLINE void tilesK(int k, const panelK *P, const void *act, size_t act_stride, int t0, int nt, int64_t i,
                    int32_t (*bsum)[8], __m512 *acc) {
    for (int t = 0; t < nt; t += 4) {
        const vx_block_q8_K *y[4];
        const int32_t *b4[4];
        for (int u = 0; u < 4; u++) { /* a short last group repeats its last token */
            const int tu = t + u < nt ? t + u : nt - 1;
            y[u] = (const vx_block_q8_K *)(const void *)((const uint8_t *)act + (size_t)(t0 + tu) * act_stride) + i;
            b4[u] = bsum[tu];
        }
        if (nt - t > 2) tileK(k, 4, P, y[0], y[1], y[2], y[3], b4, acc + t);
        else tileK(k, 2, P, y[0], y[1], y[2], y[3], b4, acc + t);
    }
}

/* The bsum pairs of super-block i of nt tokens from t0 (tilesK's bsum). */
AINLINE void bsumsK(int k, const void *act, size_t act_stride, int t0, int nt, int64_t i, int32_t (*bsum)[8]) {
    for (int t = 0; t < nt; t++) {
        const vx_block_q8_K *y = (const vx_block_q8_K *)(const void *)((const uint8_t *)act + (size_t)(t0 + t) * act_stride) + i;
        if (sums32(k)) store128(bsum[t], bsums32(y));
        else memcpy(bsum[t], y->bsums, sizeof y->bsums);
    }
}

/* Unpacks super-block i of groups A and B into P, prefetching the same
 * groups' records pfd super-blocks on (pfd 0: none). */
AINLINE void panelK_load(int k, const uint8_t *A, const uint8_t *B, int64_t i, int pfd, panelK *P) {
    const size_t bs = recK(k);
    const uint8_t *ra = A + (size_t)i * bs, *rb = B + (size_t)i * bs;
    const uint8_t *pa = pfd ? ra + (size_t)pfd * bs : NULL, *pb = pfd && B != A ? rb + (size_t)pfd * bs : NULL;
    if (k == K_Q4_K)
        load_q4_K((const vx_block_q4_K_r8 *)(const void *)ra, (const vx_block_q4_K_r8 *)(const void *)rb, P, pa, pb);
    else if (is_five(k))
        load_q5_K((const vx_block_q5_K_r8 *)(const void *)ra, (const vx_block_q5_K_r8 *)(const void *)rb, P, pa, pb,
                  has_gf(k));
    else if (is_six(k))
        load_q6_K((const vx_block_q6_K_r8 *)(const void *)ra, (const vx_block_q6_K_r8 *)(const void *)rb, P, pa, pb);
    else
        load_q23_K(is_three(k), is_tern(k), ra, rb, P, pa, pb, has_gf(k));
}

/* The tokens' sums of a row block (16 rows, or R = 8 of a lone group)
 * into the output rows at out. */
AINLINE void storeK(const __m512 *acc, int nt, float *out, int64_t ldo, int R, int accumulate) {
    for (int t = 0; t < nt; t++) {
        float o[16];
        _mm512_storeu_ps(o, acc[t]);
        store_rows(out + (int64_t)t * ldo, o, R, accumulate);
    }
}

/* Groups A and B (first records; B == A: a lone group, R = 8 rows
 * stored, else 16) against all ntok tokens. */
AINLINE void rowblockK(int k, int64_t n, const uint8_t *A, const uint8_t *B, int R, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate) {
    const int64_t nsb = n / QK;
    panelK P;
    __m512 acc[TT + 3];
    int32_t bsum[TT + 3][8]; /* per token of the tile: the super-block's bsum pairs */
    for (int t0 = 0; t0 < ntok; t0 += TT) {
        const int nt = ntok - t0 < TT ? ntok - t0 : TT;
        for (int t = 0; t < nt + 3; t++) acc[t] = _mm512_setzero_ps();
        for (int64_t i = 0; i < nsb; i++) {
            panelK_load(k, A, B, i, GEMM_PFD, &P);
            bsumsK(k, act, act_stride, t0, nt, i, bsum);
            tilesK(k, &P, act, act_stride, t0, nt, i, bsum, acc);
        }
        storeK(acc, nt, out + (int64_t)t0 * ldo, ldo, R, accumulate);
    }
}

/* nrows: a multiple of 8 (whole packed groups). */
AINLINE void gemmK(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act, size_t act_stride,
                   int ntok, float *out, int64_t ldo, int accumulate) {
    if (ntok == 2) {
        gemv2K(k, n, w, stride, nrows, act, act_stride, out, ldo, accumulate);
        return;
    }
    for (int r0 = 0; r0 < nrows; r0 += 16) {
        const uint8_t *A = row_at(w, stride, r0);
        const int two = r0 + 16 <= nrows;
        const uint8_t *B = two ? (const uint8_t *)row_at(w, stride, r0 + 8) : A;
        rowblockK(k, n, A, B, two ? 16 : 8, act, act_stride, ntok, out + r0, ldo, accumulate);
    }
}

#define MIN_TOK 2

DEFINE_GEMM_ENTRY(VX512(vx_gemm_q4_K_r8), VX512(vx_gemv_q4_K_r8), gemmK, K_Q4_K, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q6_K_r8), VX512(vx_gemv_q6_K_r8), gemmK, K_Q6_K, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q5_K_r8), VX512(vx_gemv_q5_K_r8), gemmK, K_Q5_K, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q5_K_r8_gfni), VX512(vx_gemv_q5_K_r8_gfni), gemmK, K_Q5_K_GF, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q3_K_r8), VX512(vx_gemv_q3_K_r8), gemmK, K_Q3_K, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q3_K_r8_gfni), VX512(vx_gemv_q3_K_r8_gfni), gemmK, K_Q3_K_GF, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q2_K_r8), VX512(vx_gemv_q2_K_r8), gemmK, K_Q2_K, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q2_K_r8_gfni), VX512(vx_gemv_q2_K_r8_gfni), gemmK, K_Q2_K_GF, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_tq2_0_r8), VX512(vx_gemv_tq2_0_r8), gemmK, K_TQ2, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_tq2_0_r8_gfni), VX512(vx_gemv_tq2_0_r8_gfni), gemmK, K_TQ2_GF, MIN_TOK)
