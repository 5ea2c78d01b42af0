/*
 * amx_attn.c - prefill attention of one query tile against one kv head on
 * AMX tiles (tdpbf16ps), FlashAttention-style: the cache is visited in
 * steps of 64 positions with an online softmax. Compiled natively
 * (*_amx) and emulated (*_amxemu, amx_emu.h and SIMDe), like amx_gemm.c.
 * The caller (attention.c) walks the block table: begin, one step per 64
 * positions, end.
 *
 * Orientation: the scores are computed transposed, S^T = K Q^T, so that a
 * tile row is one cache position and its 16 columns are 16 query rows:
 *   - K rows are the A operand as they are (f16 -> bf16, row-major), and
 *     Q^T, the B operand, is built once per call in begin;
 *   - the softmax of 16 query rows runs in the lanes of one register per
 *     position: the running maximum is a vertical max, no horizontal
 *     reduction anywhere;
 *   - O^T = V^T P^T: P^T leaves the softmax as B tile rows directly (two
 *     positions' registers rounded to bf16 and interleaved), V^T is the A
 *     operand (V rows interleaved in pairs, then a 16 x 16 dword transpose
 *     per tile), built once per step for every query row.
 * O^T accumulates in fp32 in memory (one tile round trip per step).
 *
 * The online softmax (lazy rescaling, base 2) and the rows' state are
 * attn_tiles.h's, shared with the AVX-512 fp32 tiles (avx512_attn_tiles.c).
 *
 * Precision: every operand goes in as two bf16 halves, x = hi + lo with
 * lo = bf16(x - hi) (an fp16 value exactly, a float to ~16 significant
 * bits; the softmax numerators' hi is truncated, which is cheaper and
 * still leaves 2^-16), and three of the four products (hi hi, hi lo, lo hi) are summed
 * in fp32, as amx_gemm.c does for F16 weights: scores and outputs to about
 * 16 significant bits, better than fp16 arithmetic, for three times the
 * tile work of plain bf16 (which moved the logits of the F16 fixtures by
 * 1e-2, five times llama.cpp's error, through the scores: tiny models'
 * attention is peaked). tests/test_attention.c bounds the error against
 * double precision. The bits depend on the tile shape, so this path is
 * off in batch-invariant contexts (forward.c).
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isa512.h" /* the AVX-512 intrinsics, native or SIMDe (VX_EMU) */
#ifdef VX_EMU
#include "x86/amx_emu.h"
#define VXAMX(name) name##_amxemu
#else
#define VXAMX(name) name##_amx
#endif

#include "amx_util.h"
#include "attn_tiles.h"
#include "common.h"
#include "kernels_amx.h"
#include "ops.h"

enum { NP = TILES_NP };

/* The state, at the start of the caller's scratch (vx_attn_tiles_bytes). */
typedef struct tstate {
    tiles_rows r;    /* rows, m, l, O^T ([mr / 16][hd / 16] C tiles of 16 dims x 16 rows) */
    uint16_t *qt[2]; /* hi, lo: [hd / 32][mr / 16] B tiles, Q^T in pairs */
    uint16_t *kb[2]; /* hi, lo: [NP][hd] K rows */
    uint16_t *vt[2]; /* hi, lo: [hd / 16][NP / 32] A tiles, V^T in pairs */
    float *s;        /* [NP][16] S^T of one column of 16 rows */
    uint16_t *pp[2]; /* hi, lo: [NP / 32] B tiles, P^T in pairs */
} tstate;

/* The regions after the header; vx_attn_tiles_bytes (ops.h) covers them
 * for mr = VX_ATTN_TILES_MAX_ROWS. */
static void layout(tstate *st) {
    uint8_t *p = (uint8_t *)st + 256;
    const size_t mr = (size_t)st->r.mr, hd = (size_t)st->r.hd;
    for (int i = 0; i < 2; i++) st->qt[i] = (uint16_t *)(void *)p, p += mr * hd * 2;
    p = tiles_rows_carve(&st->r, p);
    for (int i = 0; i < 2; i++) st->kb[i] = (uint16_t *)(void *)p, p += (size_t)NP * hd * 2;
    for (int i = 0; i < 2; i++) st->vt[i] = (uint16_t *)(void *)p, p += (size_t)NP * hd * 2;
    st->s = (float *)(void *)p, p += (size_t)NP * 16 * 4;
    for (int i = 0; i < 2; i++) st->pp[i] = (uint16_t *)(void *)p, p += (size_t)NP / 2 * 16 * 4;
    VX_ASSERT((size_t)(p - (uint8_t *)st) + 64 <= vx_attn_tiles_bytes(st->r.hd));
}

/* Two registers of 16 values (a: first element of each pair, b: second)
 * as 16 bf16 pairs, hi and lo: dword i of *h = (bf16(a[i]), bf16(b[i])),
 * of *l the same of the remainders. */
static const int16_t pair_words[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

static inline void pair16(__m512 a, __m512 b, __m512i *h, __m512i *l) {
    const __m512i idx = _mm512_loadu_si512((const void *)pair_words);
    __m512i ph, pl; /* words 0-15: a, 16-31: b */
    bf16x32_split(a, b, &ph, &pl);
    *h = _mm512_permutexvar_epi16(idx, ph);
    *l = _mm512_permutexvar_epi16(idx, pl);
}

/* The same for the softmax numerators, in 7 instructions instead of 11:
 * hi truncated (the upper words, picked straight into pair order), lo
 * = bf16(x - hi) rounded. hi + lo still holds x to 2^-16: the remainder
 * is below 2^-7 x and keeps 8 bits. */
static const int16_t pair_hi_words[32] = {1,  33, 3,  35, 5,  37, 7,  39, 9,  41, 11, 43, 13, 45, 15, 47,
                                          17, 49, 19, 51, 21, 53, 23, 55, 25, 57, 27, 59, 29, 61, 31, 63};

static inline void pair16_trunc(__m512 a, __m512 b, __m512i *h, __m512i *l) {
    const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
    *h = _mm512_permutex2var_epi16(_mm512_castps_si512(a), _mm512_loadu_si512((const void *)pair_hi_words),
                                   _mm512_castps_si512(b));
    const __m512 da = _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), top)));
    const __m512 db = _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(b), top)));
    *l = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)pair_words), bf16x32(da, db));
}

/* tiles_store_fn: positions 2i, 2i + 1 as the pair row i of P^T's B
 * tiles, hi in pp[0], lo in pp[1] */
static inline __attribute__((always_inline)) void store_pairs(void *pp, int i, __m512 p0, __m512 p1) {
    uint16_t *const *dst = (uint16_t *const *)pp;
    __m512i h, rl;
    pair16_trunc(p0, p1, &h, &rl);
    _mm512_storeu_si512((void *)(dst[0] + 32 * i), h);
    _mm512_storeu_si512((void *)(dst[1] + 32 * i), rl);
}

/* Online softmax of column cb (attn_tiles.h), P^T into st->pp. */
static void softmax_col(tstate *st, int cb, float *sc, int32_t c0, int np) {
    tiles_softmax(&st->r, cb, sc, c0, np, NP, store_pairs, (void *)st->pp);
}

void VXAMX(vx_attn_tiles_begin)(void *scratch, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq,
                                int32_t p0, float scale, float softcap, int32_t window) {
    tstate *st = tiles_state(scratch);
    tiles_rows_shape(&st->r, rows, g, hd);
    layout(st);
    const int nb = st->r.mr / 16;
    for (int cb = 0; cb < nb; cb++)
        for (int64_t ks = 0; ks < hd / 32; ks++) {
            __m512i v[16], u[16];
            for (int n = 0; n < 16; n++) {
                const int64_t r = cb * 16 + n;
                if (r < rows) {
                    const float *qr = q + r / g * ldq + r % g * hd + ks * 32;
                    bf16x32_split(_mm512_loadu_ps(qr), _mm512_loadu_ps(qr + 16), &v[n], &u[n]);
                } else {
                    v[n] = u[n] = _mm512_setzero_si512();
                }
            }
            transpose16(v);
            transpose16(u);
            const size_t t = ((size_t)ks * nb + cb) * 512;
            for (int p = 0; p < 16; p++) {
                _mm512_storeu_si512((void *)(st->qt[0] + t + 32 * p), v[p]);
                _mm512_storeu_si512((void *)(st->qt[1] + t + 32 * p), u[p]);
            }
        }
    tiles_rows_init(&st->r, rows, g, hd, p0, scale, softcap, window);
    tiles_config();
}

/* K rows (bf16, row-major) and V^T tiles of one step, hi and lo; rows
 * j >= np are zeros. */
static void load_kv(tstate *st, int np, const uint16_t *const *k, const uint16_t *const *v, int64_t ld) {
    const int hd = st->r.hd;
    for (int j = 0; j < NP; j++) {
        const uint16_t *src = j < np ? k[j / 16] + (j % 16) * ld : NULL;
        for (int d = 0; d < hd; d += 32) {
            __m512i h = _mm512_setzero_si512(), l = h;
            if (src) bf16x32_split(f16x16(src + d), f16x16(src + d + 16), &h, &l);
            _mm512_storeu_si512((void *)(st->kb[0] + (size_t)j * hd + d), h);
            _mm512_storeu_si512((void *)(st->kb[1] + (size_t)j * hd + d), l);
        }
    }
    /* A tile (dt, half): row d = dim 16 dt + d, dword i = positions
     * 32 half + 2i, 32 half + 2i + 1 */
    for (int half = 0; half < NP / 32; half++)
        for (int dt = 0; dt < hd / 16; dt++) {
            __m512i w[16], x[16];
            for (int i = 0; i < 16; i++) {
                const int j0 = 32 * half + 2 * i, j1 = j0 + 1;
                const __m512 a = j0 < np ? f16x16(v[j0 / 16] + (j0 % 16) * ld + 16 * dt) : _mm512_setzero_ps();
                const __m512 b = j1 < np ? f16x16(v[j1 / 16] + (j1 % 16) * ld + 16 * dt) : _mm512_setzero_ps();
                pair16(a, b, &w[i], &x[i]);
            }
            transpose16(w);
            transpose16(x);
            const size_t t = ((size_t)dt * (NP / 32) + half) * 512;
            for (int d = 0; d < 16; d++) {
                _mm512_storeu_si512((void *)(st->vt[0] + t + 32 * d), w[d]);
                _mm512_storeu_si512((void *)(st->vt[1] + t + 32 * d), x[d]);
            }
        }
}

/* O^T tiles dt, dt + 1 (C tiles 0, 1) += V^T P^T over both halves of the
 * step: P^T hi in tiles 4, 5 (halves 0, 1), lo in 6, 7; V^T through 2
 * and 3; per half three products, hi hi + hi lo + lo hi. */
#define PV_HALF(half, ph, pl)                                                                      \
    do {                                                                                           \
        const size_t t0 = ((size_t)dt * (NP / 32) + half) * 512, t1 = t0 + (NP / 32) * 512;        \
        _tile_loadd(2, st->vt[0] + t0, 64);                                                        \
        _tile_dpbf16ps(0, 2, ph);                                                                  \
        _tile_loadd(3, st->vt[0] + t1, 64);                                                        \
        _tile_dpbf16ps(1, 3, ph);                                                                  \
        _tile_dpbf16ps(0, 2, pl);                                                                  \
        _tile_dpbf16ps(1, 3, pl);                                                                  \
        _tile_loadd(2, st->vt[1] + t0, 64);                                                        \
        _tile_dpbf16ps(0, 2, ph);                                                                  \
        _tile_loadd(3, st->vt[1] + t1, 64);                                                        \
        _tile_dpbf16ps(1, 3, ph);                                                                  \
    } while (0)

static void pv(const tstate *st, int cb) {
    float *o = st->r.ot + (size_t)cb * st->r.hd * 16;
    uint16_t *const *pp = st->pp;
    _tile_loadd(4, pp[0], 64);
    _tile_loadd(5, pp[0] + 512, 64);
    _tile_loadd(6, pp[1], 64);
    _tile_loadd(7, pp[1] + 512, 64);
    for (int dt = 0; dt < st->r.hd / 16; dt += 2) { /* hd / 16 is even */
        _tile_loadd(0, o + 256 * dt, 64);
        _tile_loadd(1, o + 256 * (dt + 1), 64);
        PV_HALF(0, 4, 6);
        PV_HALF(1, 5, 7);
        _tile_stored(0, o + 256 * dt, 64);
        _tile_stored(1, o + 256 * (dt + 1), 64);
    }
}

/* S^T tiles a, b (positions 16a.., 16b..) of K slice ks. */
#define S_PAIR(a, b)                                                                               \
    do {                                                                                           \
        const uint16_t *kh = st->kb[0] + 32 * ks, *kl = st->kb[1] + 32 * ks;                       \
        _tile_loadd(5, kh + 16 * a * hd, kstride);                                                 \
        _tile_dpbf16ps(a, 5, 4);                                                                   \
        _tile_loadd(6, kh + 16 * b * hd, kstride);                                                 \
        _tile_dpbf16ps(b, 6, 4);                                                                   \
        _tile_dpbf16ps(a, 5, 7);                                                                   \
        _tile_dpbf16ps(b, 6, 7);                                                                   \
        _tile_loadd(5, kl + 16 * a * hd, kstride);                                                 \
        _tile_dpbf16ps(a, 5, 4);                                                                   \
        _tile_loadd(6, kl + 16 * b * hd, kstride);                                                 \
        _tile_dpbf16ps(b, 6, 4);                                                                   \
    } while (0)

/* S^T of column cb into out ([NP][16] floats): C tiles 0-3 (positions
 * 0-15 .. 48-63), Q^T hi in 4, lo in 7, K through 5 and 6: hi hi + lo hi
 * + hi lo. */
static void scores(const tstate *st, int cb, float *out) {
    const int nb = st->r.mr / 16, hd = st->r.hd;
    const int64_t kstride = (int64_t)hd * 2;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int ks = 0; ks < hd / 32; ks++) {
        const size_t qo = ((size_t)ks * nb + cb) * 512;
        _tile_loadd(4, st->qt[0] + qo, 64);
        _tile_loadd(7, st->qt[1] + qo, 64);
        S_PAIR(0, 1);
        S_PAIR(2, 3);
    }
    _tile_stored(0, out, 64);
    _tile_stored(1, out + 256, 64);
    _tile_stored(2, out + 512, 64);
    _tile_stored(3, out + 768, 64);
}

void VXAMX(vx_attn_tiles_step)(void *scratch, int32_t c0, int32_t np, const uint16_t *const *k,
                               const uint16_t *const *v, int64_t ld) {
    tstate *st = tiles_state(scratch);
    VX_ASSERT(np >= 1 && np <= NP);
    load_kv(st, np, k, v, ld);
    const int nb = st->r.mr / 16;
    /* the next step's rows, a share per column of rows: the cache is
     * read once per unit, from L3 or memory, with a 1 KiB-ish stride */
    const int per = (NP + nb - 1) / nb;
    /* Column cb's P.V runs after column cb + 1's scores, so the tile
     * loads of P^T (and of O^T when rescaled) come well after the
     * softmax's vector stores (run right after them, the first P.V
     * product held a tenth of the attention's profile). One P^T buffer
     * serves: the previous column's P.V is issued before this column's
     * softmax overwrites it. */
    int prev = -1;
    for (int cb = 0; cb < nb; cb++) {
        tiles_prefetch_next(st->r.hd, k, v, ld, cb * per, VX_MIN(NP, (cb + 1) * per));
        if (tiles_col_idle(&st->r, cb, c0, np)) continue;
        scores(st, cb, st->s);
        if (prev >= 0) pv(st, prev);
        softmax_col(st, cb, st->s, c0, np);
        prev = cb;
    }
    if (prev >= 0) pv(st, prev);
}

void VXAMX(vx_attn_tiles_end)(void *scratch, float *out, int64_t ldo) {
    tstate *st = tiles_state(scratch);
    _tile_release();
    tiles_write_out(&st->r, out, ldo);
}
