/*
 * avx512_gemm.c - AVX-512 VNNI GEMV and GEMM on the packed 32-element block
 * types Q4_0_R8, Q5_0_R8, Q8_0_R8, IQ4_NL_R8 (quant.h) x Q8_0 activations
 * and Q4_1_R8, Q5_1_R8 x Q8_1. Compiled natively and
 * emulated (isa512.h); tier registration: avx512_init.c.
 *
 * Arithmetic. vpdpbusd (_mm512_dpbusd_epi32) multiplies unsigned bytes by
 * signed bytes and adds each group of 4 products to an int32 lane, with no
 * intermediate saturation. The weights go in as the unsigned operand,
 * offset so that they are non-negative: Q4_0 codes c - 8 as c (0..15),
 * Q5_0 as c (0..31), Q8_0 codes x as x ^ 0x80 = x + 128 (0..255), IQ4_NL's
 * book values v as v + 128 (one vpshufb of a biased book), Q4_1 / Q5_1
 * codes as they are (their min term is a float step of its own); the
 * activations (Q8_0 codes, -127..127) are the signed operand. So per row
 * and block I = sum (c - off) y = dpbusd sum - off * sum(y), where off * sum(y)
 * (8, 16, 128 times the block's activation sum) is one int32 per token and
 * block, shared by all rows. |dpbusd sum| <= 32 * 255 * 127 < 2^21: exact.
 * Then the canonical step of avx2_quant_util.h per row: two float chains
 * (even, odd blocks) acc = fma(d * dy, (float)I, acc), added at the end.
 * The results are therefore the very bits of the AVX2 kernels and the
 * reference (tests/test_kernels.c checks equality), whatever the tier or
 * the number of tokens.
 *
 * Latency/throughput model (Sapphire Rapids): vpdpbusd zmm runs on ports 0
 * and 5, latency 5, so 10 independent chains keep both busy; a broadcast
 * of a dword from memory ({1to16} operand, vpbroadcastd m32) is a load-port
 * uop only; vpermd/valignd/vinserti64x4 use port 5 and compete with VNNI.
 */
#include "isa512.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "bits512.h"
#include "kernels_x86.h"
#include "quant.h"

enum { R_Q4_0, R_Q5_0, R_Q8_0, R_Q4_1, R_Q5_1, R_IQ4_NL, R_MXFP4 /* IQ4_NL's record, MXFP4's book */ };

AINLINE size_t rec32(int k) {
    switch (k) {
    case R_Q4_0: case R_IQ4_NL: case R_MXFP4: return sizeof(vx_block_q4_0_r8);
    case R_Q5_0: return sizeof(vx_block_q5_0_r8);
    case R_Q4_1: return sizeof(vx_block_q4_1_r8);
    case R_Q5_1: return sizeof(vx_block_q5_1_r8);
    default: return sizeof(vx_block_q8_0_r8);
    }
}
AINLINE int off32(int k) { return k == R_Q4_0 ? 8 : k == R_Q5_0 ? 16 : k == R_Q8_0 || k == R_IQ4_NL || k == R_MXFP4 ? 128 : 0; }
/* Q4_1 / Q5_1: a min per row and block, Q8_1 activations {d, s, qs} */
AINLINE int has_min32(int k) { return k == R_Q4_1 || k == R_Q5_1; }
AINLINE size_t ysize32(int k) { return has_min32(k) ? sizeof(vx_block_q8_1) : sizeof(vx_block_q8_0); }
AINLINE size_t ycodes32(int k) { return has_min32(k) ? offsetof(vx_block_q8_1, qs) : offsetof(vx_block_q8_0, qs); }
/* the high nibbles kept in place (16 x the code) for 4-bit codes used as they are */
AINLINE int nib_in_place(int k) { return k == R_Q4_0 || k == R_Q4_1; }

AINLINE __m512i load512(const void *p) { return _mm512_loadu_si512(p); }
AINLINE uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
AINLINE __m512i bcast32(const uint8_t *p) { return _mm512_set1_epi32((int)ld32(p)); }

/* -off * (sum of the 32 activation codes of block yb). */
AINLINE int32_t ncorr32(int k, const uint8_t *yb) {
    const __m256i s = _mm256_maddubs_epi16(_mm256_set1_epi8(1), load256(yb + ycodes32(k)));
    return -off32(k) * hsum_epi32(pairs_to_i32(s));
}

/* ===================================================================== GEMV
 * One 8-row group at a time, records read front to back (one sequential
 * stream, software prefetch 2 KiB ahead as in the AVX2 gemv: decode is
 * bound by DRAM, not by these instructions). A zmm holds two quads of a
 * record: 32-bit lane r (< 8) quad 2p of row r, lane 8 + r quad 2p + 1 -
 * exactly the 64 bytes qs[2p], qs[2p + 1] as stored, so one plain load. Its
 * activation vector is dword 2p of the token's block in lanes 0-7 and dword
 * 2p + 1 in lanes 8-15 (two broadcast loads and a blend). The two halves
 * are added (vextracti64x4 + vpaddd) before the 8-lane float step.
 *
 * Per 8-row record (32 elements x 8 rows), ports 0/5 uops:
 *   Q8_0: 4 vpdpbusd, 4 vpxord (x + 128), 4 blends, 3 adds + 1 extract,
 *         sub, cvtdq2ps, 2 cvtph2ps-ish, mul, fma            ~ 20 uops / 272 B
 *   Q4_0: 4 vpdpbusd, 4 vpandd (the high nibbles in place: 16 x the
 *         code, one vpsrad of their sum), 4 blends, same tail ~ 19 uops / 144 B
 *   Q5_0: Q4_0 + 4 variable shifts (vpsllvw/vpsrlvw) + 4 vpternlogd
 *                                                            ~ 28 uops / 176 B
 * i.e. 10-14 cycles per record at 2 uops/cycle: > 40 GB/s per core of
 * weights, above what one core streams from DRAM. The int32 sum of a record
 * is two chains of 2 vpdpbusd; records are independent, so out-of-order
 * execution overlaps consecutive records' chains.
 */

/* Lanes 0-7: dword a of the block's codes, lanes 8-15: dword a + 1. */
AINLINE __m512i act_pair(const uint8_t *yq, int a) {
    return _mm512_mask_blend_epi32((__mmask16)0xFF00, bcast32(yq + 4 * a), bcast32(yq + 4 * a + 4));
}

/* Code vector p of a record, as unsigned bytes, and the dword index (of
 * the activation block) of its low half. Q8_0: quads 2p, 2p + 1. Q4_0 and
 * Q5_0: p = 0, 1 low nibbles of qs[2p], qs[2p + 1] (quads 2p, 2p + 1);
 * p = 2, 3 their high nibbles (quads 2p, 2p + 1 again: 4.., 6..). */
AINLINE __m512i codes_r8(int k, const uint8_t *rec, int p) {
    if (k == R_Q8_0) {
        const __m512i x = load512(((const vx_block_q8_0_r8 *)(const void *)rec)->qs[2 * p]);
        return _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80));
    }
    const uint8_t *qs = k == R_Q5_0   ? ((const vx_block_q5_0_r8 *)(const void *)rec)->qs[0][0]
                        : k == R_Q4_1 ? ((const vx_block_q4_1_r8 *)(const void *)rec)->qs[0][0]
                        : k == R_Q5_1 ? ((const vx_block_q5_1_r8 *)(const void *)rec)->qs[0][0]
                                      : ((const vx_block_q4_0_r8 *)(const void *)rec)->qs[0][0]; /* Q4_0, IQ4_NL */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v = load512(qs + 64 * (p & 1));
    /* Q4_0's and Q4_1's high nibbles stay in place (16 x the code; step_r8
     * shifts the sum), the others come down (Q5_0 / Q5_1: to take the
     * fifth bit above them; IQ4_NL: to index the book) */
    __m512i c = p < 2 ? _mm512_and_si512(v, m4)
                : nib_in_place(k) ? _mm512_and_si512(v, _mm512_set1_epi8((char)0xF0))
                                  : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if (k == R_IQ4_NL || k == R_MXFP4) {
        /* book value + 128 (IQ4_NL 1..241, MXFP4 116..140): its bytes as unsigned */
        const __m512i book = _mm512_xor_si512(
            _mm512_broadcast_i32x4(load128(k == R_MXFP4 ? vx_mxfp4_values : vx_iq4nl_values)), _mm512_set1_epi8((char)0x80));
        return _mm512_shuffle_epi8(book, c);
    }
    if (k == R_Q5_0 || k == R_Q5_1) {
        /* the 8 rows' qh dwords in both halves; quad q = 2p' (low half)
         * and 2p' + 1 (high half) need shifts differing by one */
        const uint8_t *qh = k == R_Q5_0 ? ((const vx_block_q5_0_r8 *)(const void *)rec)->qh[0]
                                        : ((const vx_block_q5_1_r8 *)(const void *)rec)->qh[0];
        const __m512i h = _mm512_broadcast_i64x4(load256(qh));
        const int q = 2 * p; /* quad of the low half: 0, 2, 4, 6 */
        __m512i t;
        if (q < 4) /* left by 4 - q (low half), 3 - q (high half) */
            t = _mm512_sllv_epi16(h, _mm512_inserti64x4(_mm512_set1_epi16((short)(4 - q)),
                                                        _mm256_set1_epi16((short)(3 - q)), 1));
        else /* right by q - 4, q - 3 */
            t = _mm512_srlv_epi16(h, _mm512_inserti64x4(_mm512_set1_epi16((short)(q - 4)),
                                                        _mm256_set1_epi16((short)(q - 3)), 1));
        c = or_bit4(c, t);
    }
    return c;
}

/* Record rec (8 rows) against activation block yb: the chain acc takes the
 * canonical step. dy: the block's activation scale, nc: -off * sum(y). */
AINLINE __m256 step_r8(int k, const uint8_t *rec, const uint8_t *yb, float dy, int32_t nc, __m256 acc) {
    const uint8_t *yq = yb + ycodes32(k);
    __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes_r8(k, rec, 0), act_pair(yq, 0));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes_r8(k, rec, 2), act_pair(yq, 4));
    s0 = _mm512_dpbusd_epi32(s0, codes_r8(k, rec, 1), act_pair(yq, 2));
    s1 = _mm512_dpbusd_epi32(s1, codes_r8(k, rec, 3), act_pair(yq, 6));
    /* Q4_0, Q4_1: s1 is 16 x the high nibbles' sum (exact shift, |16 s1| < 2^20) */
    const __m512i s = _mm512_add_epi32(s0, nib_in_place(k) ? _mm512_srai_epi32(s1, 4) : s1);
    __m256i sum = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    sum = _mm256_add_epi32(sum, _mm256_set1_epi32(nc));
    const __m256 d = _mm256_cvtph_ps(load128(rec)); /* every record starts with d[8] */
    acc = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dy)), _mm256_cvtepi32_ps(sum), acc);
    if (has_min32(k)) /* + m s_y: then m[8], and the Q8_1 block {d, s, qs} */
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(rec + 16)), _mm256_set1_ps(f16(ld16(yb + 2))), acc);
    return acc;
}

#define GEMV32_R8_REC(k) rec32(k)
#define GEMV32_R8_YSIZE(k) ysize32(k)
#define GEMV32_R8_CORR(k, yb) ncorr32(k, yb)
#define GEMV32_R8_STEP(k, rec, yb, dy, c, acc) step_r8(k, rec, yb, dy, c, acc)
/* Four far groups per turn here (the AVX2 tier keeps two: gemv32_r8.h).
 * Sapphire Rapids, 2 threads, decode t/s, 2 vs 4 groups alternated, medians
 * of 8: Qwen2.5-0.5B Q4_K_M (mostly Q5_0, 896-element rows, so a group's
 * records are only 4.9 KiB) 68.7 -> 75.3; Llama-1B Q4_0 and Q8_0 within
 * the noise (34.8 -> 35.7, 40.3 -> 39.3; 21.8 -> 23.0). 32 zmm registers
 * hold the 8 chains and the step's temporaries; 8 groups were no faster. */
#define GEMV32_R8_STREAMS 4
#include "gemv32_r8.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* dyt, ct: read only when filled (tab) */
#endif
GEMV_ENTRY(VX512(vx_gemv_q4_0_r8), gemv32_r8, R_Q4_0)
GEMV_ENTRY(VX512(vx_gemv_q5_0_r8), gemv32_r8, R_Q5_0)
GEMV_ENTRY(VX512(vx_gemv_q8_0_r8), gemv32_r8, R_Q8_0)
GEMV_ENTRY(VX512(vx_gemv_q4_1_r8), gemv32_r8, R_Q4_1)
GEMV_ENTRY(VX512(vx_gemv_q5_1_r8), gemv32_r8, R_Q5_1)
GEMV_ENTRY(VX512(vx_gemv_iq4_nl_r8), gemv32_r8, R_IQ4_NL)
GEMV_ENTRY(VX512(vx_gemv_mxfp4_r8), gemv32_r8, R_MXFP4)
GEMV_ENTRY(VX512(vx_gemv_q4_0_r8_g2), gemv32_r8_two, R_Q4_0)
GEMV_ENTRY(VX512(vx_gemv_q5_0_r8_g2), gemv32_r8_two, R_Q5_0)
GEMV_ENTRY(VX512(vx_gemv_q8_0_r8_g2), gemv32_r8_two, R_Q8_0)
GEMV_ENTRY(VX512(vx_gemv_q4_1_r8_g2), gemv32_r8_two, R_Q4_1)
GEMV_ENTRY(VX512(vx_gemv_q5_1_r8_g2), gemv32_r8_two, R_Q5_1)
GEMV_ENTRY(VX512(vx_gemv_iq4_nl_r8_g2), gemv32_r8_two, R_IQ4_NL)
GEMV_ENTRY(VX512(vx_gemv_mxfp4_r8_g2), gemv32_r8_two, R_MXFP4)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* ===================================================================== GEMM
 * 16 rows at a time: two 8-row groups side by side, zmm lane r (< 8) row r
 * of group A, lane 8 + r row r of group B (the last group of an odd count
 * pairs with itself and only its 8 rows are stored). A chunk of CB blocks
 * is unpacked into a panel in L1 - per block 8 code vectors (quad q of the
 * 16 rows: vinserti64x4 of the two records' 32-byte quads, then the nibble
 * split / fifth bit / + 128) and the 16 scales - and then every token of
 * the tile runs against it: the activation dword of quad q is broadcast
 * straight from memory (vpbroadcastd zmm, m32 - GCC emits it rather than
 * the {1to16} operand; either is a load-port uop only), so a token's block
 * is 8 vpdpbusd and nothing else on the vector ports but its float step.
 *
 * Per (16 rows, 4 tokens, block) - the tile4 body:
 *   32 vpdpbusd zmm (each token: one chain of 8, started from the
 *                    broadcast -off * sum(y))
 *   36 vpbroadcastd m32, 8 zmm loads of the panel: load ports only
 *   4 vcvtdq2ps, 4 vmulps (d * dy, dy broadcast from memory), 4 vfmadd
 *   = 44 port-0/5 uops for 32 vpdpbusd: 73% of the VNNI peak, 4 chains of
 *   8 (40 cycles each) per tile step, overlapped across the unrolled steps
 *   of consecutive blocks and token quads by out-of-order execution.
 * Panel unpacking per block and 16 rows (amortized over the token tile):
 *   Q8_0: 8 vinserti64x4 + 8 vpxord; Q4_0: 4 vinserti64x4 + 12 ALU;
 *   Q5_0: Q4_0 + 1 vinserti64x4 + 16 (shift, vpternlogd).
 */

/* Blocks per unpacked chunk: 8 x 576 bytes (L1); even, so that a block's
 * index within a chunk has the block's parity (the two chains). */
#define CB 8
/* Chunks ahead that a chunk's unpacking prefetches, a line at a time
 * (the next one in a burst read Q4_0 at 2-8 tokens from DRAM as slowly as
 * the K-quant GEMM, avx512_gemm_k.c's GEMM_PFD) */
#ifndef GEMM32_PFD
#define GEMM32_PFD 2
#endif
/* (token, block) entries of a token tile's tables (tile_act; 352 KiB on
 * the stack): tiles of 8 tokens or more up to n = 32768 (longer rows run
 * as the gemv, token pairs) */
#define TAB32 8192
#define MAX_TT 128

typedef struct {
    __m512i q[8]; /* quad q of 16 rows, unsigned codes */
    __m512 d;     /* the 16 rows' scales */
    __m512 m;     /* Q4_1 / Q5_1: the 16 rows' mins */
} panel16;


/* Block records A and B (groups A, B; B may be A) into a panel. */
AINLINE void load_panel(int k, const uint8_t *A, const uint8_t *B, panel16 *P) {
    P->d = f16_pair(A, B); /* every record starts with d[8] (then m[8] with a min) */
    if (has_min32(k)) P->m = f16_pair(A + 16, B + 16);
    if (k == R_Q8_0) {
        const vx_block_q8_0_r8 *a = (const vx_block_q8_0_r8 *)(const void *)A;
        const vx_block_q8_0_r8 *b = (const vx_block_q8_0_r8 *)(const void *)B;
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++)
            P->q[q] = _mm512_xor_si512(pair256(a->qs[q][0], b->qs[q][0]), _mm512_set1_epi8((char)0x80));
        return;
    }
    const size_t qo = k == R_Q5_0   ? offsetof(vx_block_q5_0_r8, qs)
                      : k == R_Q4_1 ? offsetof(vx_block_q4_1_r8, qs)
                      : k == R_Q5_1 ? offsetof(vx_block_q5_1_r8, qs)
                                    : offsetof(vx_block_q4_0_r8, qs); /* Q4_0, IQ4_NL */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i v = pair256(A + qo + 32 * c, B + qo + 32 * c);
        P->q[c] = _mm512_and_si512(v, m4);
        P->q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    if (k == R_IQ4_NL || k == R_MXFP4) { /* book value + 128: its bytes as unsigned */
        const __m512i book = _mm512_xor_si512(
            _mm512_broadcast_i32x4(load128(k == R_MXFP4 ? vx_mxfp4_values : vx_iq4nl_values)), _mm512_set1_epi8((char)0x80));
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) P->q[q] = _mm512_shuffle_epi8(book, P->q[q]);
    }
    if (k == R_Q5_0 || k == R_Q5_1) {
        const size_t ho = k == R_Q5_0 ? offsetof(vx_block_q5_0_r8, qh) : offsetof(vx_block_q5_1_r8, qh);
        const __m512i h = pair256(A + ho, B + ho);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) P->q[q] = or_bit4(P->q[q], q5_shift(h, q));
    }
}

/* Eight tokens' activation codes (y: [8][32] bytes, the tile buffer's
 * entries of one block; the first nu tokens: 8, 4, or 2 for a short last
 * group) against one panel block: acc[u] (16 rows) takes the canonical
 * step. dy[u], nc[u], sy[u]: the tokens' scale, -off * sum(y) and (Q4_1,
 * Q5_1: Q8_1 activations) s for the block. Eight independent vpdpbusd
 * chains (vpdpbusd's latency at two per cycle wants 8-10 in flight), and
 * every operand at a fixed offset from three pointers: no per-token
 * address or table arithmetic between the vector instructions. */
#define U8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
AINLINE void tile8(int k, int nu, const panel16 *P, const uint8_t *y, const float *dy, const int32_t *nc,
                   const float *sy, __m512 acc[8]) {
#define INIT(u) __m512i I##u = _mm512_set1_epi32(nc[u]);
    U8(INIT)
#undef INIT
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) {
        const __m512i W = P->q[q];
#define STEP(u) \
    if ((u) < nu) I##u = _mm512_dpbusd_epi32(I##u, W, bcast32(y + 32 * (u) + 4 * q));
        U8(STEP)
#undef STEP
    }
#define FSTEP(u)    \
    if ((u) < nu) \
        acc[u] = _mm512_fmadd_ps(_mm512_mul_ps(P->d, _mm512_set1_ps(dy[u])), _mm512_cvtepi32_ps(I##u), acc[u]);
    U8(FSTEP)
#undef FSTEP
#define FSTEP(u) \
    if ((u) < nu) acc[u] = _mm512_fmadd_ps(P->m, _mm512_set1_ps(sy[u]), acc[u]);
    if (has_min32(k)) { /* + m s_y */
        U8(FSTEP)
    }
#undef FSTEP
}

/* A token tile's activations: entry vx_act_tab_entry(nb, t, b) of token t
 * of the tile and block b (matmul.h: tokens in groups of 8, a group's
 * blocks one after the other; tp = the tile's tokens rounded up to 8, the
 * pad entries copies of its last token), as a vx_act_tab holds a whole
 * matmul input's: a tile of one is its entries from the tile's first
 * group on. */
typedef struct {
    int tp;
    uint8_t (*y)[32]; /* codes */
    float *dy;        /* scales */
    int32_t *nc;      /* -off * sum of the codes */
    float *sy;        /* Q8_1's s */
} tile_act;

/* Groups A and B (first records; B == A: a lone group, R = 8 rows stored,
 * else 16) against the nt tokens of tile T (their outputs from out on). */
AINLINE void rowblock(int k, int64_t nb, const uint8_t *A, const uint8_t *B, int R, const tile_act *T, int nt,
                      float *out, int64_t ldo, int accumulate) {
    const size_t rs = rec32(k);
    panel16 P[CB];
    __m512 acc[2][MAX_TT]; /* [even, odd block] */
    for (int t = 0; t < T->tp; t++) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += CB) {
        const int cb = (int)(nb - b0 < CB ? nb - b0 : CB);
        for (int j = 0; j < cb; j++) {
            const size_t o = (size_t)(b0 + j) * rs, pf = o + (size_t)GEMM32_PFD * CB * rs;
            load_panel(k, A + o, B + o, &P[j]);
            /* the chunk GEMM32_PFD on arrives from DRAM while the tokens
             * run: this block's share of its lines */
            for (size_t l = pf / 64 * 64; l < pf + rs; l += 64) {
                prefetch_line(A + l);
                if (B != A) prefetch_line(B + l);
            }
        }
        for (int t = 0; t < nt; t += 8) {
            const int nu = nt - t > 4 ? 8 : nt - t > 2 ? 4 : 2;
            /* the chunk's even blocks, then its odd ones: one chain's
             * accumulators at a time stay in registers (indexed by the
             * block's parity they went through memory) */
            for (int c = 0; c < 2; c++) {
                __m512 a[8];
                for (int u = 0; u < 8; u++) a[u] = acc[c][t + u];
                for (int j = c; j < cb; j += 2) {
                    const size_t e = vx_act_tab_entry(nb, t, b0 + j);
                    if (nu == 8) tile8(k, 8, &P[j], T->y[e], T->dy + e, T->nc + e, T->sy + e, a);
                    else if (nu == 4) tile8(k, 4, &P[j], T->y[e], T->dy + e, T->nc + e, T->sy + e, a);
                    else tile8(k, 2, &P[j], T->y[e], T->dy + e, T->nc + e, T->sy + e, a);
                }
                for (int u = 0; u < 8; u++) acc[c][t + u] = a[u];
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        float o[16];
        _mm512_storeu_ps(o, _mm512_add_ps(acc[0][t], acc[1][t]));
        store_rows(out + (int64_t)t * ldo, o, R, accumulate);
    }
}

/* nrows: a multiple of 8 (whole packed groups). tab: NULL, or the
 * activations' table (vx_act_tab: act, act_stride, n and ntok are its;
 * Q8_0 activations), which then stands in for the tiles built here. */
AINLINE void gemm32(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                    size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, const vx_act_tab *tab) {
    const int64_t nb = n / 32;
    if (ntok == 2 || nb > TAB32 / 8) { /* the gemv's far record streams, two tokens at a time (gemv32_r8.h) */
        for (int t = 0; t < ntok; t += 2)
            gemv32_r8_tokens(k, GEMV32_R8_STREAMS, ntok - t < 2 ? 1 : 2, n, w, stride, nrows, (const uint8_t *)act + (size_t)t * act_stride,
                             act_stride, out + (int64_t)t * ldo, ldo, accumulate);
        return;
    }
    const size_t ys = ysize32(k);
    int tt = (int)(TAB32 / (nb > 0 ? nb : 1)) & ~7;
    tt = tt > MAX_TT ? MAX_TT : tt;
    _Alignas(64) uint8_t codes[TAB32][32];
    float dyt[TAB32], syt[TAB32];
    int32_t nct[TAB32];
    tile_act T = {0, codes, dyt, nct, syt};
    for (int t0 = 0; t0 < ntok; t0 += tt) {
        const int nt = ntok - t0 < tt ? ntok - t0 : tt;
        T.tp = (nt + 7) & ~7;
        if (tab) { /* the tile's entries from its first group on (t0 and tt are multiples of 8) */
            const size_t e0 = vx_act_tab_entry(nb, t0, 0);
            const int oi = k == R_Q4_0 ? 0 : k == R_Q5_0 ? 1 : 2;
            T.y = tab->codes + e0, T.dy = tab->dy + e0, T.nc = tab->nc[oi] + e0, T.sy = syt;
        }
        for (int t = 0; !tab && t < T.tp; t++) {
            const uint8_t *ya = (const uint8_t *)act + (size_t)(t0 + (t < nt ? t : nt - 1)) * act_stride;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *yb = ya + (size_t)b * ys; /* Q8_0 {d, qs} or Q8_1 {d, s, qs} */
                const size_t e = vx_act_tab_entry(nb, t, b);
                memcpy(codes[e], yb + ycodes32(k), 32);
                dyt[e] = f16(ld16(yb));
                nct[e] = off32(k) ? ncorr32(k, yb) : 0;
                syt[e] = has_min32(k) ? f16(ld16(yb + 2)) : 0.0f;
            }
        }
        for (int r0 = 0; r0 < nrows; r0 += 16) {
            const uint8_t *A = row_at(w, stride, r0);
            const int two = r0 + 16 <= nrows;
            const uint8_t *B = two ? (const uint8_t *)row_at(w, stride, r0 + 8) : A;
            rowblock(k, nb, A, B, two ? 16 : 8, &T, nt, out + (int64_t)t0 * ldo + r0, ldo, accumulate);
        }
    }
}

AINLINE void gemm32_own(int k, int64_t n, const void *w, size_t stride, int nrows, const void *act, size_t act_stride,
                        int ntok, float *out, int64_t ldo, int accumulate) {
    gemm32(k, n, w, stride, nrows, act, act_stride, ntok, out, ldo, accumulate, NULL);
}

/* Under 2 tokens the gemv (the same bits). */
#define MIN_TOK 2

DEFINE_GEMM_ENTRY(VX512(vx_gemm_q4_0_r8), VX512(vx_gemv_q4_0_r8), gemm32_own, R_Q4_0, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q5_0_r8), VX512(vx_gemv_q5_0_r8), gemm32_own, R_Q5_0, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q8_0_r8), VX512(vx_gemv_q8_0_r8), gemm32_own, R_Q8_0, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q4_1_r8), VX512(vx_gemv_q4_1_r8), gemm32_own, R_Q4_1, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_q5_1_r8), VX512(vx_gemv_q5_1_r8), gemm32_own, R_Q5_1, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_iq4_nl_r8), VX512(vx_gemv_iq4_nl_r8), gemm32_own, R_IQ4_NL, MIN_TOK)
DEFINE_GEMM_ENTRY(VX512(vx_gemm_mxfp4_r8), VX512(vx_gemv_mxfp4_r8), gemm32_own, R_MXFP4, MIN_TOK)

/* On an activation table (vx_act_tab: Q8_0 activations; the types with a
 * code offset, not Q4_1 / Q5_1), the same bits. */
#define GEMM_TAB_ENTRY(name, gemv, kind)                                                                        \
    void name(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab, float *out, int64_t ldo,      \
              int accumulate) {                                                                                \
        if (tab->ntok < MIN_TOK)                                                                               \
            gemv_tokens(gemv, tab->n, w, row_stride, nrows, tab->act, tab->stride, (int)tab->ntok, out, ldo,    \
                        accumulate);                                                                           \
        else                                                                                                   \
            gemm32(kind, tab->n, w, row_stride, nrows, tab->act, tab->stride, (int)tab->ntok, out, ldo,         \
                   accumulate, tab);                                                                           \
    }
GEMM_TAB_ENTRY(VX512(vx_gemm_tab_q4_0_r8), VX512(vx_gemv_q4_0_r8), R_Q4_0)
GEMM_TAB_ENTRY(VX512(vx_gemm_tab_q5_0_r8), VX512(vx_gemv_q5_0_r8), R_Q5_0)
GEMM_TAB_ENTRY(VX512(vx_gemm_tab_q8_0_r8), VX512(vx_gemv_q8_0_r8), R_Q8_0)
GEMM_TAB_ENTRY(VX512(vx_gemm_tab_iq4_nl_r8), VX512(vx_gemv_iq4_nl_r8), R_IQ4_NL)
GEMM_TAB_ENTRY(VX512(vx_gemm_tab_mxfp4_r8), VX512(vx_gemv_mxfp4_r8), R_MXFP4)
#undef GEMM_TAB_ENTRY
