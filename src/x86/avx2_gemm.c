/*
 * avx2_gemm.c - prefill GEMM kernels for the 32-element block types Q4_0,
 * Q5_0, Q8_0, IQ4_NL (x Q8_0 activations), Q4_1, Q5_1 (x Q8_1), and the
 * GEMV and GEMM on their packed 8-row forms *_R8 (quant.h), compiled with
 * -mavx2 -mfma -mf16c -mbmi2. F16/BF16: avx2_gemm_half.c.
 *
 * Quantized types: eight weight rows at a time are unpacked, a chunk of
 * blocks at a time, into a row-lane panel - code vector q of a block holds
 * in its 32-bit lane r the four codes 4q .. 4q + 3 of row r (an 8x8 dword
 * transpose), so one _mm256_maddubs_epi16 against four activation bytes
 * of one token, broadcast, serves 8 rows; the register tile is 2 such
 * groups x 2 tokens (see CB32). Q4_0 sums all 8 products of a block in
 * int16 before one madd (Q5_0: 4), where a row-major kernel needs a madd
 * per maddubs. Each (row, token, block) gets an exact int32 sum and then
 * the canonical float step of avx2_quant_util.h (even and odd blocks in
 * two chains), so results are bit-identical to the gemv's (avx2_quant.c)
 * whatever the number of tokens: batching is invisible in the output.
 * The Q4_0 / Q5_0 offsets (8, 16) go through per-(token, block) sums of
 * the activation codes, computed once per token tile. Q8_0 codes are
 * signed: |x| against the activations with x's sign (pairs up to
 * 2*128*127, so each maddubs goes to int32 at once).
 */
#include <immintrin.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"

/* (block, token) entries of the per-tile activation tables. */
#define TAB32 8192

/* The plain layouts and their 8-row packed forms (quant.h); a packed kind
 * runs its base kind's tile with a panel loaded straight from the record.
 * Signed codes (Q8_0, IQ4_NL's book values) run the |x| / sign tile; Q4_1
 * and Q5_1 pair with Q8_1 activations and add a min term per block. */
enum {
    G_Q4_0, G_Q5_0, G_Q8_0, G_Q4_0_R8, G_Q5_0_R8, G_Q8_0_R8,
    G_Q4_1, G_Q5_1, G_IQ4_NL, G_Q4_1_R8, G_Q5_1_R8, G_IQ4_NL_R8,
    G_MXFP4, /* IQ4_NL's block with its own book and an E8M0 exponent */
    G_MXFP4_R8 /* IQ4_NL_R8's record with MXFP4's book */
};
/* each packed kind sits 3 after its plain one (MXFP4's 1) */
#define GPACKED(k) (((k) >= G_Q4_0_R8 && (k) <= G_Q8_0_R8) || ((k) >= G_Q4_1_R8 && (k) <= G_IQ4_NL_R8) || (k) == G_MXFP4_R8)
#define GBASE(k) ((k) == G_MXFP4_R8 ? G_MXFP4 : GPACKED(k) ? (k) - 3 : (k))
#define GSIGNED(k) (GBASE(k) == G_Q8_0 || GBASE(k) == G_IQ4_NL || GBASE(k) == G_MXFP4)
#define GMIN(k) (GBASE(k) == G_Q4_1 || GBASE(k) == G_Q5_1)
/* 4-bit codes (Q4_0, Q4_1, IQ4_NL) or 5-bit ones (Q5_0, Q5_1) */
#define GNIB5(k) (GBASE(k) == G_Q5_0 || GBASE(k) == G_Q5_1)
/* Activation block bytes and the offset of its codes (Q8_1: {d, s, qs}). */
#define YSIZE(k) (GMIN(k) ? sizeof(vx_block_q8_1) : sizeof(vx_block_q8_0))
#define YCODES(k) (GMIN(k) ? offsetof(vx_block_q8_1, qs) : offsetof(vx_block_q8_0, qs))

/* Below a few tokens the unpacking is not paid back; the gemv per token
 * gives the same bits, so the entry points fall back to it. So do rows
 * too long for a 2-token tile's tables (n > 131072). */
#define MIN_TOK_N(m) (n / 32 * 2 > TAB32 ? INT_MAX : (m))
#define MIN_TOK32 MIN_TOK_N(4)
/* Q5_0's fifth-bit unpacking costs more: the panel pays from 6 tokens */
#define MIN_TOK_Q5_0 MIN_TOK_N(6)

typedef struct {
    __m256i q[8]; /* maddubs codes (signed kinds: |x|), quad q of 8 rows */
    __m256i x[8]; /* signed kinds: the signed codes */
    __m256 d, m;  /* m: Q4_1 / Q5_1 mins */
} panel32;

/* Bytes per block of one row (plain) or per record of 8 rows (packed). */
AINLINE size_t wsize32(int k) {
    switch (k) {
    case G_Q4_0: return sizeof(vx_block_q4_0);
    case G_Q5_0: return sizeof(vx_block_q5_0);
    case G_Q8_0: return sizeof(vx_block_q8_0);
    case G_Q4_0_R8: return sizeof(vx_block_q4_0_r8);
    case G_Q5_0_R8: return sizeof(vx_block_q5_0_r8);
    case G_Q4_1_R8: return sizeof(vx_block_q4_1_r8);
    case G_Q5_1_R8: return sizeof(vx_block_q5_1_r8);
    case G_IQ4_NL_R8: case G_MXFP4_R8: return sizeof(vx_block_iq4_nl_r8);
    case G_Q4_1: return sizeof(vx_block_q4_1);
    case G_Q5_1: return sizeof(vx_block_q5_1);
    case G_IQ4_NL: return sizeof(vx_block_iq4_nl);
    case G_MXFP4: return sizeof(vx_block_mxfp4);
    default: return sizeof(vx_block_q8_0_r8);
    }
}

/* Block b of 8 rows into a panel. */
AINLINE void unpack32_8(int k, const uint8_t *const rows[8], int64_t b, panel32 *P) {
    const size_t ws = wsize32(k);
    __m256i v[8];
    uint16_t d[8], m[8];
    for (int r = 0; r < 8; r++) {
        const uint8_t *blk = rows[r] + (size_t)b * ws;
        d[r] = k == G_MXFP4 ? blk[0] : ld16(blk); /* MXFP4: its exponent byte */
        m[r] = GMIN(k) ? ld16(blk + 2) : 0;
        if (k == G_MXFP4) {
            v[r] = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load128(vx_mxfp4_values)),
                                       nibbles32(blk + offsetof(vx_block_mxfp4, qs)));
        } else if (k == G_Q4_0 || k == G_Q4_1 || k == G_IQ4_NL) {
            v[r] = nibbles32(blk + (k == G_Q4_0 ? offsetof(vx_block_q4_0, qs)
                                    : k == G_Q4_1 ? offsetof(vx_block_q4_1, qs) : offsetof(vx_block_iq4_nl, qs)));
            if (k == G_IQ4_NL) v[r] = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load128(vx_iq4nl_values)), v[r]);
        } else if (k == G_Q5_0 || k == G_Q5_1) {
            const size_t qh = k == G_Q5_0 ? offsetof(vx_block_q5_0, qh) : offsetof(vx_block_q5_1, qh);
            const size_t qs = k == G_Q5_0 ? offsetof(vx_block_q5_0, qs) : offsetof(vx_block_q5_1, qs);
            const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(blk + qh)), _mm256_set1_epi8(16));
            v[r] = _mm256_or_si256(nibbles32(blk + qs), hi);
        } else {
            v[r] = load256(blk + offsetof(vx_block_q8_0, qs));
        }
    }
    transpose8_epi32(v);
    for (int q = 0; q < 8; q++) {
        if (GSIGNED(k)) {
            P->x[q] = v[q];
            P->q[q] = _mm256_abs_epi8(v[q]);
        } else {
            P->q[q] = v[q];
        }
    }
    P->d = k == G_MXFP4 ? e8m0_half8(_mm256_cvtepu16_epi32(load128(d))) : _mm256_cvtph_ps(load128(d));
    P->m = _mm256_cvtph_ps(load128(m));
}

/* Fifth bits of quad q from a Q5_0_R8 qh vector (bit q of byte b: element
 * 4q + b), moved to bit 4 of each byte. */
AINLINE __m256i q5_hbits(__m256i h, int q) { return byte_bit_to(h, q, 4); }

/* The nibble bytes (qs[c][r][b]) and fifth bits (qh[r][b]) of a packed
 * 32-element record; every record starts with d[8] (then m[8] with a min). */
AINLINE const uint8_t *r8_qs(int k, const uint8_t *rec) {
    switch (k) {
    case G_Q5_0_R8: return ((const vx_block_q5_0_r8 *)(const void *)rec)->qs[0][0];
    case G_Q4_1_R8: return ((const vx_block_q4_1_r8 *)(const void *)rec)->qs[0][0];
    case G_Q5_1_R8: return ((const vx_block_q5_1_r8 *)(const void *)rec)->qs[0][0];
    default: return ((const vx_block_q4_0_r8 *)(const void *)rec)->qs[0][0]; /* Q4_0, IQ4_NL */
    }
}
AINLINE const uint8_t *r8_qh(int k, const uint8_t *rec) {
    return k == G_Q5_0_R8 ? ((const vx_block_q5_0_r8 *)(const void *)rec)->qh[0]
                          : ((const vx_block_q5_1_r8 *)(const void *)rec)->qh[0];
}

/* Quads c and c + 4 (c < 4) of a packed record as maddubs operands: the
 * nibble split, the fifth bits merged, IQ4_NL's book values (*x0, *x4 the
 * signed values, the results their magnitudes). */
AINLINE void r8_quads(int k, const uint8_t *rec, int c, __m256i *a, __m256i *e, __m256i *x0, __m256i *x4) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i v = load256(r8_qs(k, rec) + 32 * c);
    *a = _mm256_and_si256(v, m4);
    *e = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (GNIB5(k)) {
        const __m256i h = load256(r8_qh(k, rec));
        *a = _mm256_or_si256(*a, q5_hbits(h, c));
        *e = _mm256_or_si256(*e, q5_hbits(h, c + 4));
    }
    if (GBASE(k) == G_IQ4_NL || GBASE(k) == G_MXFP4) {
        const __m256i book =
            _mm256_broadcastsi128_si256(load128(GBASE(k) == G_MXFP4 ? vx_mxfp4_values : vx_iq4nl_values));
        *x0 = _mm256_shuffle_epi8(book, *a);
        *x4 = _mm256_shuffle_epi8(book, *e);
        *a = _mm256_abs_epi8(*x0);
        *e = _mm256_abs_epi8(*x4);
    }
}

/* A panel from a packed record (the codes are already in row-lane order):
 * r8_quads, or |x| for Q8_0. */
AINLINE void load32_r8(int k, const uint8_t *rec, panel32 *P) {
    P->d = _mm256_cvtph_ps(load128(rec)); /* every record starts with d[8] */
    P->m = GMIN(k) ? _mm256_cvtph_ps(load128(rec + 16)) : _mm256_setzero_ps();
    if (k == G_Q8_0_R8) {
        const vx_block_q8_0_r8 *b = (const vx_block_q8_0_r8 *)(const void *)rec;
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            P->x[q] = load256(b->qs[q]);
            P->q[q] = _mm256_abs_epi8(P->x[q]);
        }
        return;
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) r8_quads(k, rec, c, &P->q[c], &P->q[c + 4], &P->x[c], &P->x[c + 4]);
}

/* Activation quad q (codes 4q .. 4q + 3) in every lane; yc: the offset of
 * the block's codes (YCODES). */
AINLINE __m256i bq32(const uint8_t *yb, size_t yc, int q) {
    uint32_t v;
    memcpy(&v, yb + yc + 4 * q, 4);
    return _mm256_set1_epi32((int)v);
}

/* Offset correction of an activation block: the code sum times 8 (Q4_0)
 * or 16 (Q5_0); none for Q8_0. */
AINLINE int32_t corr32(int k, const uint8_t *yb) {
    if (GBASE(k) != G_Q4_0 && GBASE(k) != G_Q5_0) return 0;
    const __m256i s = _mm256_maddubs_epi16(_mm256_set1_epi8(GBASE(k) == G_Q4_0 ? 8 : 16),
                                           load256(yb + offsetof(vx_block_q8_0, qs)));
    return hsum_epi32(pairs_to_i32(s));
}

/* The GEMM tile is 2 groups of 8 rows x 2 tokens, and a token pair runs
 * a chunk's even blocks, then its odd ones (the two chains of the
 * canonical order), so that only one chain's 4 accumulators are live:
 * with the int16 and int32 sums and the code vectors that fills the 16
 * registers without a spill. Each code vector loaded serves 2 tokens and
 * each activation broadcast 2 groups. (A 2 x 4 tile needs 16 float
 * accumulators alone; it ran with them in memory, 25-35% slower.) */
/* Blocks per chunk (16 x 544 bytes per group, L1); even, so that a
 * block's index within a chunk has the block's parity. */
#define CB32 16

/* Q8_0's quad q of panel P against activation quad u: |x| against u with
 * x's sign, the pair sums (up to 2 * 127 * 127) to int32 at once. */
AINLINE __m256i q8_step(__m256i I, const panel32 *P, int q, __m256i u) {
    const __m256i p = _mm256_maddubs_epi16(P->q[q], _mm256_sign_epi8(u, P->x[q]));
    return _mm256_add_epi32(I, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* One block: the panels of groups A, B (B == A when G = 1; G is a
 * compile-time constant at each call) x tokens y0, y1 (their activation
 * block); dy, cr, sy: the two tokens' scales, offset corrections and
 * (Q4_1, Q5_1) activation sums s. The canonical step into the chain's
 * accumulators a0, a1 (group A) and b0, b1. */
AINLINE void pair32(int k, int G, const panel32 *A, const panel32 *B, const uint8_t *y0, const uint8_t *y1,
                    const float *dy, const int32_t *cr, const float *sy, __m256 *a0, __m256 *a1, __m256 *b0,
                    __m256 *b1) {
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t yc = YCODES(k);
    __m256i IA0, IA1, IB0 = _mm256_setzero_si256(), IB1 = IB0;
    if (GSIGNED(k)) {
        IA0 = IA1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            const __m256i u0 = bq32(y0, yc, q), u1 = bq32(y1, yc, q);
            IA0 = q8_step(IA0, A, q, u0);
            IA1 = q8_step(IA1, A, q, u1);
            VX_KEEP(IA0);
            VX_KEEP(IA1);
            if (G == 2) {
                IB0 = q8_step(IB0, B, q, u0);
                IB1 = q8_step(IB1, B, q, u1);
                VX_KEEP(IB0);
                VX_KEEP(IB1);
            }
        }
    } else {
        const int span = k == G_Q4_0 || k == G_Q4_1 ? 8 : 4; /* codes to 15: 8 pair sums fit int16 */
        IA0 = IA1 = _mm256_setzero_si256();
        for (int h = 0; h < 8; h += span) {
            __m256i sA0 = _mm256_setzero_si256(), sA1 = sA0, sB0 = sA0, sB1 = sA0;
#pragma GCC unroll 8
            for (int q = h; q < h + span; q++) {
                const __m256i u0 = bq32(y0, yc, q), u1 = bq32(y1, yc, q), WA = A->q[q];
                sA0 = _mm256_add_epi16(sA0, _mm256_maddubs_epi16(WA, u0));
                sA1 = _mm256_add_epi16(sA1, _mm256_maddubs_epi16(WA, u1));
                VX_KEEP(sA0);
                VX_KEEP(sA1);
                if (G == 2) {
                    const __m256i WB = B->q[q];
                    sB0 = _mm256_add_epi16(sB0, _mm256_maddubs_epi16(WB, u0));
                    sB1 = _mm256_add_epi16(sB1, _mm256_maddubs_epi16(WB, u1));
                    VX_KEEP(sB0);
                    VX_KEEP(sB1);
                }
            }
            IA0 = _mm256_add_epi32(IA0, _mm256_madd_epi16(sA0, ones));
            IA1 = _mm256_add_epi32(IA1, _mm256_madd_epi16(sA1, ones));
            if (G == 2) {
                IB0 = _mm256_add_epi32(IB0, _mm256_madd_epi16(sB0, ones));
                IB1 = _mm256_add_epi32(IB1, _mm256_madd_epi16(sB1, ones));
            }
        }
        IA0 = _mm256_sub_epi32(IA0, _mm256_set1_epi32(cr[0]));
        IA1 = _mm256_sub_epi32(IA1, _mm256_set1_epi32(cr[1]));
        if (G == 2) {
            IB0 = _mm256_sub_epi32(IB0, _mm256_set1_epi32(cr[0]));
            IB1 = _mm256_sub_epi32(IB1, _mm256_set1_epi32(cr[1]));
        }
    }
    const __m256 d0 = _mm256_set1_ps(dy[0]), d1 = _mm256_set1_ps(dy[1]);
    *a0 = _mm256_fmadd_ps(_mm256_mul_ps(A->d, d0), _mm256_cvtepi32_ps(IA0), *a0);
    *a1 = _mm256_fmadd_ps(_mm256_mul_ps(A->d, d1), _mm256_cvtepi32_ps(IA1), *a1);
    if (G == 2) {
        *b0 = _mm256_fmadd_ps(_mm256_mul_ps(B->d, d0), _mm256_cvtepi32_ps(IB0), *b0);
        *b1 = _mm256_fmadd_ps(_mm256_mul_ps(B->d, d1), _mm256_cvtepi32_ps(IB1), *b1);
    }
    if (GMIN(k)) { /* + m s_y */
        const __m256 s0 = _mm256_set1_ps(sy[0]), s1 = _mm256_set1_ps(sy[1]);
        *a0 = _mm256_fmadd_ps(A->m, s0, *a0);
        *a1 = _mm256_fmadd_ps(A->m, s1, *a1);
        if (G == 2) {
            *b0 = _mm256_fmadd_ps(B->m, s0, *b0);
            *b1 = _mm256_fmadd_ps(B->m, s1, *b1);
        }
    }
}

/* Groups rows[0] and rows[1] (G = 2) or rows[0] (G = 1, R real rows)
 * against tokens [t0, t0 + nt) of the tile: rows[gi] the group's 8 rows
 * (for a packed kind, rows[gi][0] its first record). dyt, ct: the tile's
 * activation scales and corrections, [block][token], tt tokens a block. */
AINLINE void rowblock32(int k, int G, int64_t nb, const uint8_t *const rows[2][8], int R, const void *act,
                        size_t act_stride, int t0, int nt, int tt, const float *dyt, const int32_t *ct,
                        const float *syt, float *out, int64_t ldo, int accumulate) {
    const size_t ws = wsize32(k), ys = YSIZE(k);
    panel32 P[2][CB32];
    __m256 acc[2][2][64 + 1]; /* [chain][group][token] */
    for (int c = 0; c < 2; c++)
        for (int gi = 0; gi < G; gi++)
            for (int t = 0; t < nt + 1; t++) acc[c][gi][t] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += CB32) {
        const int cb = (int)(nb - b0 < CB32 ? nb - b0 : CB32);
        for (int gi = 0; gi < G; gi++) {
            if (GPACKED(k)) {
                for (int j = 0; j < cb; j++) load32_r8(k, rows[gi][0] + (size_t)(b0 + j) * ws, &P[gi][j]);
                for (size_t o = 0; o < CB32 * ws; o += 64)
                    _mm_prefetch((const char *)rows[gi][0] + (size_t)(b0 + cb) * ws + o, _MM_HINT_T0);
            } else {
                for (int j = 0; j < cb; j++) unpack32_8(k, rows[gi], b0 + j, &P[gi][j]);
                /* the next chunk arrives from DRAM while the tokens run */
                for (int r = 0; r < 8; r++)
                    for (size_t o = 0; o < CB32 * ws; o += 64)
                        _mm_prefetch((const char *)rows[gi][r] + (size_t)(b0 + cb) * ws + o, _MM_HINT_T0);
            }
        }
        for (int t = 0; t < nt; t += 2) {
            const int t1 = t + 1 < nt ? t + 1 : t; /* a short last pair repeats its token */
            const uint8_t *y0 = (const uint8_t *)act + (size_t)(t0 + t) * act_stride + (size_t)b0 * ys;
            const uint8_t *y1 = (const uint8_t *)act + (size_t)(t0 + t1) * act_stride + (size_t)b0 * ys;
            for (int c = 0; c < 2; c++) {
                __m256 a0 = acc[c][0][t], a1 = acc[c][0][t + 1], e0 = a0, e1 = a1;
                if (G == 2) e0 = acc[c][1][t], e1 = acc[c][1][t + 1];
                for (int j = c; j < cb; j += 2) {
                    const int64_t e = (b0 + j) * tt + t; /* tokens t and t + 1 */
                    pair32(GBASE(k), G, &P[0][j], &P[G - 1][j], y0 + (size_t)j * ys, y1 + (size_t)j * ys, dyt + e,
                           ct + e, syt + e, &a0, &a1, &e0, &e1);
                }
                acc[c][0][t] = a0, acc[c][0][t + 1] = a1;
                if (G == 2) acc[c][1][t] = e0, acc[c][1][t + 1] = e1;
            }
        }
    }
    for (int gi = 0; gi < G; gi++)
        for (int t = 0; t < nt; t++) {
            float o[8];
            _mm256_storeu_ps(o, _mm256_add_ps(acc[0][gi][t], acc[1][gi][t]));
            store_rows(out + (int64_t)(t0 + t) * ldo + 8 * gi, o, R, accumulate);
        }
}

/* The row pointers of the 8-row group starting at row r0, a short group
 * repeating its last row (packed: only [0] is used, the first record). */
AINLINE void group_rows(int k, const void *w, size_t stride, int nrows, int r0, const uint8_t *rows[8]) {
    for (int r = 0; r < 8; r++)
        rows[r] = row_at(w, stride, GPACKED(k) ? r0 : r0 + r < nrows ? r0 + r : nrows - 1);
}

AINLINE void gemm32(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                    size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate) {
    const int64_t nb = n / 32;
    const size_t ys = YSIZE(k);
    /* token tile: its (block, token) tables fit TAB32 entries */
    int tt = (int)(TAB32 / (nb > 0 ? nb : 1));
    tt = tt > 64 ? 64 : tt < 2 ? 2 : tt & ~1;
    float dyt[TAB32 + 2 * 64], syt[TAB32 + 2 * 64];
    int32_t ct[TAB32 + 2 * 64];
    for (int t0 = 0; t0 < ntok; t0 += tt) {
        const int nt = ntok - t0 < tt ? ntok - t0 : tt;
        /* an odd tile's last pair repeats its token: one more column */
        for (int t = 0; t < nt + (nt & 1); t++) {
            const uint8_t *ya = (const uint8_t *)act + (size_t)(t0 + (t < nt ? t : nt - 1)) * act_stride;
            for (int64_t b = 0; b < nb; b++) {
                dyt[b * tt + t] = f16(ld16(ya + (size_t)b * ys));
                ct[b * tt + t] = corr32(k, ya + (size_t)b * ys);
                syt[b * tt + t] = GMIN(k) ? f16(ld16(ya + (size_t)b * ys + 2)) : 0.0f;
            }
        }
        const uint8_t *rows[2][8];
        int r0 = 0;
        for (; r0 + 16 <= nrows; r0 += 16) {
            group_rows(k, w, stride, nrows, r0, rows[0]);
            group_rows(k, w, stride, nrows, r0 + 8, rows[1]);
            rowblock32(k, 2, nb, rows, 8, act, act_stride, t0, nt, tt, dyt, ct, syt, out + r0, ldo, accumulate);
        }
        for (; r0 < nrows; r0 += 8) {
            group_rows(k, w, stride, nrows, r0, rows[0]);
            rowblock32(k, 1, nb, rows, nrows - r0 < 8 ? nrows - r0 : 8, act, act_stride, t0, nt, tt, dyt, ct, syt,
                       out + r0, ldo, accumulate);
        }
    }
}

DEFINE_GEMM_ENTRY(vx_gemm_q4_0_avx2, vx_gemv_q4_0_avx2, gemm32, G_Q4_0, MIN_TOK32)
DEFINE_GEMM_ENTRY(vx_gemm_q5_0_avx2, vx_gemv_q5_0_avx2, gemm32, G_Q5_0, MIN_TOK_Q5_0)
DEFINE_GEMM_ENTRY(vx_gemm_q8_0_avx2, vx_gemv_q8_0_avx2, gemm32, G_Q8_0, MIN_TOK32)
DEFINE_GEMM_ENTRY(vx_gemm_q4_1_avx2, vx_gemv_q4_1_avx2, gemm32, G_Q4_1, MIN_TOK32)
DEFINE_GEMM_ENTRY(vx_gemm_q5_1_avx2, vx_gemv_q5_1_avx2, gemm32, G_Q5_1, MIN_TOK_Q5_0)
DEFINE_GEMM_ENTRY(vx_gemm_iq4_nl_avx2, vx_gemv_iq4_nl_avx2, gemm32, G_IQ4_NL, MIN_TOK32)
DEFINE_GEMM_ENTRY(vx_gemm_mxfp4_avx2, vx_gemv_mxfp4_avx2, gemm32, G_MXFP4, MIN_TOK32)

/* ---- packed layouts (Q4_0_R8, Q5_0_R8, Q8_0_R8) ----
 * GEMV: one record per 8 rows and block, read front to back as one stream;
 * the 8 rows' sums build up in the lanes of one register (no horizontal
 * reduction), even and odd blocks in two chains as in the plain gemv. */

/* Record rec against activation block yb (scale dy, offset correction c):
 * the exact int32 sums of the 8 rows (the pair sums summed in int16 as far
 * as pair32 does), then the canonical step of the chain acc. Written out
 * with the loops unrolled: through a panel in memory the step ran at a
 * third of the speed. */
AINLINE __m256 step32_r8(int k, const uint8_t *rec, const uint8_t *yb, float dy, int32_t c, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t yc = YCODES(k);
    __m256i I;
    if (GSIGNED(k)) { /* |x| against y with x's sign, each pair sum to int32 at once */
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        if (k == G_Q8_0_R8) {
            const vx_block_q8_0_r8 *b = (const vx_block_q8_0_r8 *)(const void *)rec;
#pragma GCC unroll 8
            for (int q = 0; q < 8; q += 2) {
                const __m256i x0 = load256(b->qs[q]), x1 = load256(b->qs[q + 1]);
                s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(x0),
                                                                                 _mm256_sign_epi8(bq32(yb, yc, q), x0)),
                                                            ones));
                s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(x1),
                                                                                 _mm256_sign_epi8(bq32(yb, yc, q + 1), x1)),
                                                            ones));
            }
        } else { /* IQ4_NL */
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m256i a, e, x0, x4;
                r8_quads(k, rec, q, &a, &e, &x0, &x4);
                s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bq32(yb, yc, q), x0)), ones));
                s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(e, _mm256_sign_epi8(bq32(yb, yc, q + 4), x4)), ones));
            }
        }
        I = _mm256_add_epi32(s0, s1);
    } else {
        /* quads 0..3 (low nibbles) and 4..7 (high): 4 pair sums each, at
         * most 4 * 2 * 31 * 127 = 31496 */
        __m256i lo = _mm256_setzero_si256(), hi = lo;
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m256i a, e, x0, x4;
            r8_quads(k, rec, q, &a, &e, &x0, &x4);
            lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(a, bq32(yb, yc, q)));
            hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(e, bq32(yb, yc, q + 4)));
        }
        if (!GNIB5(k)) /* 8 pair sums of 4-bit codes fit int16 (8 * 3810) */
            I = _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones);
        else
            I = _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
        I = _mm256_sub_epi32(I, _mm256_set1_epi32(c));
    }
    const __m256 d = _mm256_cvtph_ps(load128(rec)); /* every record starts with d[8] */
    acc = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dy)), _mm256_cvtepi32_ps(I), acc);
    if (GMIN(k)) /* + m s_y: then m[8], and the Q8_1 block {d, s, qs} */
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(rec + 16)), _mm256_set1_ps(f16(ld16(yb + 2))), acc);
    return acc;
}

#define GEMV32_R8_REC(k) wsize32(k)
#define GEMV32_R8_YSIZE(k) YSIZE(k)
#define GEMV32_R8_CORR(k, yb) corr32(k, yb)
#define GEMV32_R8_STEP(k, rec, yb, dy, c, acc) step32_r8(k, rec, yb, dy, c, acc)
#include "gemv32_r8.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* dyt, ct: read only when filled (tab) */
#endif
GEMV_ENTRY(vx_gemv_q4_0_r8_avx2, gemv32_r8, G_Q4_0_R8)
GEMV_ENTRY(vx_gemv_q5_0_r8_avx2, gemv32_r8, G_Q5_0_R8)
GEMV_ENTRY(vx_gemv_q8_0_r8_avx2, gemv32_r8, G_Q8_0_R8)
GEMV_ENTRY(vx_gemv_q4_1_r8_avx2, gemv32_r8, G_Q4_1_R8)
GEMV_ENTRY(vx_gemv_q5_1_r8_avx2, gemv32_r8, G_Q5_1_R8)
GEMV_ENTRY(vx_gemv_iq4_nl_r8_avx2, gemv32_r8, G_IQ4_NL_R8)
GEMV_ENTRY(vx_gemv_mxfp4_r8_avx2, gemv32_r8, G_MXFP4_R8)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* With no unpacking to pay back, the panel serves from 2 tokens. */
#define MIN_TOK32_R8 MIN_TOK_N(2)

DEFINE_GEMM_ENTRY(vx_gemm_q4_0_r8_avx2, vx_gemv_q4_0_r8_avx2, gemm32, G_Q4_0_R8, MIN_TOK32_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q5_0_r8_avx2, vx_gemv_q5_0_r8_avx2, gemm32, G_Q5_0_R8, MIN_TOK32_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q8_0_r8_avx2, vx_gemv_q8_0_r8_avx2, gemm32, G_Q8_0_R8, MIN_TOK32_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q4_1_r8_avx2, vx_gemv_q4_1_r8_avx2, gemm32, G_Q4_1_R8, MIN_TOK32_R8)
DEFINE_GEMM_ENTRY(vx_gemm_q5_1_r8_avx2, vx_gemv_q5_1_r8_avx2, gemm32, G_Q5_1_R8, MIN_TOK32_R8)
DEFINE_GEMM_ENTRY(vx_gemm_iq4_nl_r8_avx2, vx_gemv_iq4_nl_r8_avx2, gemm32, G_IQ4_NL_R8, MIN_TOK32_R8)
DEFINE_GEMM_ENTRY(vx_gemm_mxfp4_r8_avx2, vx_gemv_mxfp4_r8_avx2, gemm32, G_MXFP4_R8, MIN_TOK32_R8)
