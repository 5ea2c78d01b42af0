/*
 * amx_gemm_i8.c - the GEMM of the packed 32-element types (Q4_0_R8,
 * Q5_0_R8, Q8_0_R8, Q4_1_R8, Q5_1_R8, IQ4_NL_R8) x Q8_0 / Q8_1 activations
 * on AMX int8 tiles (tdpbssd), for batches of a few tokens to a few
 * dozen: batched decoding, speculative verification, short prompts.
 * Compiled natively (*_amx) and emulated (*_amxemu, amx_emu.h and SIMDe),
 * like amx_gemm.c.
 *
 * The same bits as the AVX-512 VNNI GEMM and the gemvs (avx512_gemm.c):
 * per row, token and block the exact int32 sum I of the code products,
 * here from a tile product (A: up to 16 tokens x the block's 32
 * activation codes; B: 8 x 64 bytes, the block's codes of 16 rows, four
 * per row and tile row; C: tokens x 16 rows, int32), then that file's
 * canonical float step, acc = fma(d * dy, (float)I, acc) [+ m s_y], in two
 * chains (even, odd blocks) added at the end. tests/test_kernels.c checks
 * the equality for every token count, natively and emulated.
 *
 * Why it pays: the VNNI GEMM spends 11 vector uops per token, block and
 * 16 rows (8 vpdpbusd and the float step); here one tdpbssd does a block
 * of 16 rows for 16 tokens and the vector ports do the float step and the
 * B tile (Q8_0: two records' quads side by side; the nibble types split,
 * with their fifth bits, offsets or book values). The bf16 tile GEMM
 * (amx_gemm.c) converts every weight to bf16 once per call, a cost only
 * many tokens amortize. What limits it: every block's C tile must be
 * stored (its scale is the block's), and a tile store costs about as much
 * as the product (a 16 x 16 x 32 product with its store ~16 ns, without
 * ~12; two products of 8 columns per block, a store each, ~25 ns).
 * K-quants stay on VNNI: Q4_K's sub-block scales cost the float step 8
 * vpmulld per super-block and token, and the tiles lost at 8 tokens and
 * won 6% at 31 (session 29); Q6_K's 16-element sub-blocks would need a
 * store per 16 elements.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isa512.h" /* the AVX-512 intrinsics, native or SIMDe (VX_EMU) */
#ifdef VX_EMU
#include "x86/amx_emu.h"
#define VXAMX(name) name##_amxemu
#define VX512F(name) name##_avx512emu
#else
#define VXAMX(name) name##_amx
#define VX512F(name) name##_avx512
#endif

#include "avx2_quant_util.h"
#include "bits512.h"
#include "kernels_amx.h"
#include "kernels_x86.h"
#include "quant.h"

enum { MT = 16, ST = 32, MAX_NB = 512 }; /* tokens per tile, per span; blocks per row (K <= 16384) */

/* Tile configurations for a span of n = 1..32 tokens, as tiles of m0 =
 * min(n, 16) and m1 = n - m0 tokens: C tiles 0-1 m0 x 64 bytes (16
 * int32), 2-3 m1 x 64; A tiles 4 (m0 x 32 codes) and 5 (m1 x 32); B tiles
 * 6-7 8 x 64 bytes. With m1 = 0 tiles 2, 3 and 5 take m0 too (one tile of
 * tokens: four C tiles in turn). Constants (see amx_util.h on local
 * configuration arrays). */
#define CFG(m0, m1)                                                                                          \
    {1,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 64, 0, 64, 0, 64, 0, 32, 0, 32, 0, 64, 0, 64, 0, \
     0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0, 0, 0, 0, m0, m0, (m1) ? (m1) : (m0), (m1) ? (m1) : (m0), m0,      \
     (m1) ? (m1) : (m0), 8, 8, 0, 0, 0, 0, 0, 0, 0, 0}
static const uint8_t cfg_i8[ST][64] __attribute__((aligned(64))) = {
    CFG(1, 0),   CFG(2, 0),   CFG(3, 0),   CFG(4, 0),   CFG(5, 0),   CFG(6, 0),   CFG(7, 0),   CFG(8, 0),
    CFG(9, 0),   CFG(10, 0),  CFG(11, 0),  CFG(12, 0),  CFG(13, 0),  CFG(14, 0),  CFG(15, 0),  CFG(16, 0),
    CFG(16, 1),  CFG(16, 2),  CFG(16, 3),  CFG(16, 4),  CFG(16, 5),  CFG(16, 6),  CFG(16, 7),  CFG(16, 8),
    CFG(16, 9),  CFG(16, 10), CFG(16, 11), CFG(16, 12), CFG(16, 13), CFG(16, 14), CFG(16, 15), CFG(16, 16)};
#undef CFG

enum { K_Q4_0, K_Q5_0, K_Q8_0, K_Q4_1, K_Q5_1, K_IQ4_NL };

static inline size_t rec_size(int k) {
    switch (k) {
    case K_Q4_0: case K_IQ4_NL: return sizeof(vx_block_q4_0_r8);
    case K_Q5_0: return sizeof(vx_block_q5_0_r8);
    case K_Q4_1: return sizeof(vx_block_q4_1_r8);
    case K_Q5_1: return sizeof(vx_block_q5_1_r8);
    default: return sizeof(vx_block_q8_0_r8);
    }
}
/* Q4_1, Q5_1: a min per row and block, and Q8_1 activations {d, s, qs} */
static inline int has_min(int k) { return k == K_Q4_1 || k == K_Q5_1; }
static inline size_t act_block(int k) { return has_min(k) ? sizeof(vx_block_q8_1) : sizeof(vx_block_q8_0); }
static inline size_t act_codes(int k) {
    return has_min(k) ? offsetof(vx_block_q8_1, qs) : offsetof(vx_block_q8_0, qs);
}

/* The B tile of a block of 16 rows (group A's record ra: columns 0-7,
 * group B's rb: 8-15) as signed bytes: row q holds elements 4q .. 4q + 3
 * of each row. Q8_0_R8: qs[q] of both records side by side. The nibble
 * types (quant.h: qs[c] low nibble element 4c + b, high 16 + 4c + b):
 * row c < 4 the low nibbles of qs[c], row c + 4 the high ones, with Q5's
 * fifth bits (bit q of qh byte b: element 4q + b), less the type's offset
 * (Q4_0 8, Q5_0 16; Q4_1 and Q5_1 take their codes as they are, the min
 * term is a float step of its own), IQ4_NL's book values for indices.
 * The integer sums are then the VNNI kernels' offset-corrected ones. */
static inline __attribute__((always_inline)) void b_tile(int k, const uint8_t *ra, const uint8_t *rb,
                                                         int8_t (*bt)[64]) {
    if (k == K_Q8_0) {
        const size_t o = offsetof(vx_block_q8_0_r8, qs);
        for (int q = 0; q < 8; q++)
            _mm512_store_si512((void *)bt[q], pair256(ra + o + 32 * q, rb + o + 32 * q));
        return;
    }
    const size_t o = k == K_Q5_0   ? offsetof(vx_block_q5_0_r8, qs)
                     : k == K_Q4_1 ? offsetof(vx_block_q4_1_r8, qs)
                     : k == K_Q5_1 ? offsetof(vx_block_q5_1_r8, qs)
                                   : offsetof(vx_block_q4_0_r8, qs); /* Q4_0, IQ4_NL */
    const size_t ho = k == K_Q5_0 ? offsetof(vx_block_q5_0_r8, qh) : offsetof(vx_block_q5_1_r8, qh);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i off = _mm512_set1_epi8((char)(k == K_Q4_0 ? 8 : k == K_Q5_0 ? 16 : 0));
    const __m512i h = k == K_Q5_0 || k == K_Q5_1 ? pair256(ra + ho, rb + ho) : m4;
    const __m512i book = _mm512_broadcast_i32x4(load128(vx_iq4nl_values));
    for (int c = 0; c < 4; c++) {
        const __m512i v = pair256(ra + o + 32 * c, rb + o + 32 * c);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if (k == K_Q5_0 || k == K_Q5_1) {
            lo = or_bit4(lo, q5_shift(h, c));
            hi = or_bit4(hi, q5_shift(h, c + 4));
        }
        if (k == K_IQ4_NL) {
            lo = _mm512_shuffle_epi8(book, lo);
            hi = _mm512_shuffle_epi8(book, hi);
        }
        _mm512_store_si512((void *)bt[c], _mm512_sub_epi8(lo, off));
        _mm512_store_si512((void *)bt[c + 4], _mm512_sub_epi8(hi, off));
    }
}

/* The canonical step of a block (its C tile stored at buf): rows A in
 * lanes 0-7, B in 8-15; with a min, + m s_y on the same chain. */
static inline __attribute__((always_inline)) void fixup(int k, const uint8_t *ra, const uint8_t *rb,
                                                        const int32_t (*buf)[16], const float *dy,
                                                        const float *sy, int m, float (*acc)[16]) {
    const __m512 d = f16_pair(ra, rb), mn = has_min(k) ? f16_pair(ra + 16, rb + 16) : d;
    for (int t = 0; t < m; t++) {
        const __m512 I = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)buf[t]));
        const __m512 s = _mm512_mul_ps(d, _mm512_set1_ps(dy[t]));
        __m512 r = _mm512_fmadd_ps(s, I, _mm512_load_ps(acc[t]));
        if (has_min(k)) r = _mm512_fmadd_ps(mn, _mm512_set1_ps(sy[t]), r);
        _mm512_store_ps(acc[t], r);
    }
}

/* Pipelining. Block b's B tile is built (vector stores) BLAG blocks
 * ahead, and its float step runs LAG blocks behind its tile product: a
 * tile load of freshly stored bytes, or a vector load of a tile's, waits
 * for the stores to complete (built, multiplied and stepped in turn, the
 * blocks ran at a third of the speed). Block b's product goes to C tile
 * b % 4 and buffer b % NBUF, its B tile to bt[b % NBUF]. */
enum { LAG = 3, BLAG = 2, NBUF = 4 };

/* One block's tile product for n tokens (act: their first code, rows
 * stride apart) against the B tile at bsrc, into cdst (rows 0-15, then
 * 16..: n <= 32). slot, the block's place in the pipeline, picks the
 * tiles: with one tile of tokens C tile slot % 4 (A tile 4 and B tile 6,
 * or 5 and 7), with two C tiles 0, 2 or 1, 3 and B tile 6 or 7. Tile
 * numbers must be literals, hence the cases. */
#define PROD1(c, ta, tb)                                  \
    do {                                                  \
        _tile_loadd(ta, a, (int64_t)stride);              \
        _tile_loadd(tb, bsrc, 64);                        \
        _tile_zero(c);                                    \
        _tile_dpbssd(c, ta, tb);                          \
        _tile_stored(c, &cdst[0][0], 64);                 \
    } while (0)
#define PROD2(c0, c1, tb)                                 \
    do {                                                  \
        _tile_loadd(tb, bsrc, 64);                        \
        _tile_loadd(4, a, (int64_t)stride);               \
        _tile_zero(c0);                                   \
        _tile_dpbssd(c0, 4, tb);                          \
        _tile_stored(c0, &cdst[0][0], 64);                \
        _tile_loadd(5, a + MT * stride, (int64_t)stride); \
        _tile_zero(c1);                                   \
        _tile_dpbssd(c1, 5, tb);                          \
        _tile_stored(c1, &cdst[MT][0], 64);               \
    } while (0)
static inline __attribute__((always_inline)) void product(int64_t slot, int n, const uint8_t *a, size_t stride,
                                                          const int8_t *bsrc, int32_t (*cdst)[16]) {
    if (n <= MT) {
        switch (slot & 3) {
        case 0: PROD1(0, 4, 6); break;
        case 1: PROD1(1, 5, 7); break;
        case 2: PROD1(2, 4, 6); break;
        default: PROD1(3, 5, 7); break;
        }
    } else if (slot & 1) {
        PROD2(1, 3, 7);
    } else {
        PROD2(0, 2, 6);
    }
}
#undef PROD1
#undef PROD2

/* Rows of groups A and B (B == A: a lone group, R = 8 rows stored, else
 * 16) against tokens [0, n) (n <= 32: the configuration cfg_i8[n - 1]) at
 * act (rows act_stride apart), dyt[b * ST + t] their block scales. */
static inline __attribute__((always_inline)) void rowblock(int k, int64_t nb, const uint8_t *A, const uint8_t *B,
                                                           int R, const uint8_t *act, size_t act_stride, int n,
                                                           const float *dyt, const float *syt, float *out,
                                                           int64_t ldo, int accumulate, float (*acc)[ST][16]) {
    const size_t rs = rec_size(k);
    int32_t buf[NBUF][ST][16] __attribute__((aligned(64)));
    int8_t bt[NBUF][8][64] __attribute__((aligned(64)));
    memset(acc, 0, 2 * sizeof acc[0]);
    for (int64_t b = 0; b < BLAG && b < nb; b++) b_tile(k, A + (size_t)b * rs, B + (size_t)b * rs, bt[b % NBUF]);
    for (int64_t b = 0; b < nb + LAG; b++) {
        if (b + BLAG < nb) {
            const int64_t f = b + BLAG;
            const uint8_t *ra = A + (size_t)f * rs, *rb = B + (size_t)f * rs;
            /* the records 8 blocks on, a line at a time */
            for (size_t l = 0; l < rs; l += 64) {
                prefetch_line(ra + 8 * rs + l);
                if (rb != ra) prefetch_line(rb + 8 * rs + l);
            }
            b_tile(k, ra, rb, bt[f % NBUF]);
        }
        if (b < nb) {
            /* A: the tokens' codes of block b (Q8_0 / Q8_1 blocks) */
            product(b, n, act + (size_t)b * act_block(k) + act_codes(k), act_stride, &bt[b % NBUF][0][0],
                    buf[b % NBUF]);
        }
        if (b >= LAG) {
            const int64_t f = b - LAG;
            fixup(k, A + (size_t)f * rs, B + (size_t)f * rs, (const int32_t(*)[16])buf[f % NBUF], dyt + f * ST,
                  syt + f * ST, n, acc[f & 1]);
        }
    }
    for (int t = 0; t < n; t++) {
        float o[16];
        _mm512_storeu_ps(o, _mm512_add_ps(_mm512_load_ps(acc[0][t]), _mm512_load_ps(acc[1][t])));
        store_rows(out + (int64_t)t * ldo, o, R, accumulate);
    }
}

static inline __attribute__((always_inline)) void gemm_i8(int k, int64_t n, const void *w, size_t stride,
                                                          int nrows, const void *act, size_t act_stride, int ntok,
                                                          float *out, int64_t ldo, int accumulate) {
    const int64_t nb = n / 32;
    /* [block][token] of a span of ST tokens: the activations' d (and s) */
    float dyt[MAX_NB * ST], syt[MAX_NB * ST];
    float acc[2][ST][16] __attribute__((aligned(64)));
    int cfg = 0; /* the tile configuration's token count (0: none) */
    for (int s0 = 0; s0 < ntok; s0 += ST) {
        const int ns = ntok - s0 < ST ? ntok - s0 : ST;
        const uint8_t *as = (const uint8_t *)act + (size_t)s0 * act_stride;
        for (int t = 0; t < ns; t++)
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *yb = as + (size_t)t * act_stride + (size_t)b * act_block(k);
                dyt[b * ST + t] = f16(ld16(yb));
                if (has_min(k)) syt[b * ST + t] = f16(ld16(yb + 2));
            }
        if (ns != cfg) {
            _tile_loadconfig(cfg_i8[ns - 1]);
            cfg = ns;
        }
        for (int r0 = 0; r0 < nrows; r0 += 16) {
            const uint8_t *A = row_at(w, stride, r0);
            const int two = r0 + 16 <= nrows;
            const uint8_t *B = two ? (const uint8_t *)row_at(w, stride, r0 + 8) : A;
            rowblock(k, nb, A, B, two ? 16 : 8, as, act_stride, ns, dyt, has_min(k) ? syt : dyt,
                     out + (int64_t)s0 * ldo + r0, ldo, accumulate, acc);
        }
    }
    if (cfg) _tile_release();
}

/* Under MIN_TOK tokens, or rows too long for the scale table, the VNNI
 * GEMM (the same bits). */
#define MIN_TOK 3

#define GEMM_I8_ENTRY(name, kind)                                                                         \
    void VXAMX(vx_gemm_##name)(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,      \
                               size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,          \
                               void *scratch) {                                                               \
        if (ntok < MIN_TOK || n / 32 > MAX_NB)                                                                \
            VX512F(vx_gemm_##name)(n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate,     \
                                   scratch);                                                                  \
        else                                                                                                  \
            gemm_i8(kind, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate);              \
    }
GEMM_I8_ENTRY(q4_0_r8, K_Q4_0)
GEMM_I8_ENTRY(q5_0_r8, K_Q5_0)
GEMM_I8_ENTRY(q8_0_r8, K_Q8_0)
GEMM_I8_ENTRY(q4_1_r8, K_Q4_1)
GEMM_I8_ENTRY(q5_1_r8, K_Q5_1)
GEMM_I8_ENTRY(iq4_nl_r8, K_IQ4_NL)
