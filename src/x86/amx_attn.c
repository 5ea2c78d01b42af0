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
 * Rescaling is lazy: a row's maximum m moves only when a step's maximum
 * exceeds it by more than LAZY, so the numerators stay below 2^LAZY and
 * O, l are rescaled (in memory) on those steps only. The result is the
 * same softmax up to rounding. The softmax runs in base 2 (scores scaled
 * by scale log2 e; 2^x by scalef).
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
#include "common.h"
#include "kernels_amx.h"
#include "ops.h"

enum { NP = 64 };           /* positions per step */
static const float LAZY = 12.0f; /* rescale when the maximum grows by more (log2 units) */

/* The state, at the start of the caller's scratch (vx_attn_tiles_bytes). */
typedef struct tstate {
    int32_t rows, mr, g, hd; /* query rows, padded to 16, GQA group, head dim */
    float scale;
    float softcap;  /* Gemma 2: scores scale s become softcap tanh(scale s / softcap) (0: none) */
    int32_t window; /* Gemma 2: a row at p sees p - window < p' <= p (0: all) */
    float *m, *l;    /* [mr] running maximum (scores x scale x log2 e), denominator */
    int32_t *lim;    /* [mr] last position each row sees */
    uint16_t *qt[2]; /* hi, lo: [hd / 32][mr / 16] B tiles, Q^T in pairs */
    float *ot;       /* [mr / 16][hd / 16] C tiles: O^T (16 dims x 16 rows) */
    uint16_t *kb[2]; /* hi, lo: [NP][hd] K rows */
    uint16_t *vt[2]; /* hi, lo: [hd / 16][NP / 32] A tiles, V^T in pairs */
    float *s;        /* [NP][16] S^T of one column of 16 rows */
    uint16_t *pp[2]; /* hi, lo: [NP / 32] B tiles, P^T in pairs */
} tstate;

static tstate *state_of(void *scratch) {
    return (tstate *)(void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
}

/* The regions after the header; vx_attn_tiles_bytes (ops.h) covers them
 * for mr = VX_ATTN_TILES_MAX_ROWS. */
static void layout(tstate *st) {
    uint8_t *p = (uint8_t *)st + 256;
    const size_t mr = (size_t)st->mr, hd = (size_t)st->hd;
    for (int i = 0; i < 2; i++) st->qt[i] = (uint16_t *)(void *)p, p += mr * hd * 2;
    st->ot = (float *)(void *)p, p += mr * hd * 4;
    st->m = (float *)(void *)p, p += mr * 4;
    st->l = (float *)(void *)p, p += mr * 4;
    st->lim = (int32_t *)(void *)p, p += mr * 4;
    for (int i = 0; i < 2; i++) st->kb[i] = (uint16_t *)(void *)p, p += (size_t)NP * hd * 2;
    for (int i = 0; i < 2; i++) st->vt[i] = (uint16_t *)(void *)p, p += (size_t)NP * hd * 2;
    st->s = (float *)(void *)p, p += (size_t)NP * 16 * 4;
    for (int i = 0; i < 2; i++) st->pp[i] = (uint16_t *)(void *)p, p += (size_t)NP / 2 * 16 * 4;
    VX_ASSERT((size_t)(p - (uint8_t *)st) + 64 <= vx_attn_tiles_bytes(st->hd));
}

/* 2^x for finite x (any magnitude: scalef takes the exponent whole and
 * underflows to 0), lanes outside keep zero: x = k + f, |f| <= 1/2,
 * 2^f by its Taylor series to f^5 (relative error 2.4e-6, below the 16
 * bits the numerators keep). */
static inline __m512 exp2_512(__mmask16 keep, __m512 x) {
    const __m512 k = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, k);
    __m512 p = _mm512_set1_ps(1.3333558146e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108665e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650696e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718056e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(keep, p, k);
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

void VXAMX(vx_attn_tiles_begin)(void *scratch, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq,
                                int32_t p0, float scale, float softcap, int32_t window) {
    tstate *st = state_of(scratch);
    VX_ASSERT(rows >= 1 && rows <= VX_ATTN_TILES_MAX_ROWS && hd % 32 == 0 && hd <= 256);
    st->rows = (int32_t)rows;
    st->mr = (int32_t)((rows + 15) & ~15);
    st->g = (int32_t)g;
    st->hd = (int32_t)hd;
    st->scale = scale;
    st->softcap = softcap;
    st->window = window;
    layout(st);
    const int nb = st->mr / 16;
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
    memset(st->ot, 0, (size_t)st->mr * hd * sizeof(float));
    for (int r = 0; r < st->mr; r++) {
        st->m[r] = -INFINITY;
        st->l[r] = 0;
        st->lim[r] = p0 + (int32_t)((r < rows ? r : rows - 1) / g);
    }
    tiles_config();
}

/* K rows (bf16, row-major) and V^T tiles of one step, hi and lo; rows
 * j >= np are zeros. */
static void load_kv(tstate *st, int np, const uint16_t *const *k, const uint16_t *const *v, int64_t ld) {
    const int hd = st->hd;
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

/* The visible positions among j of the step for 16 rows of limits lim
 * and window starts lo (positions > lo; INT32_MIN without a window): all
 * when full. */
static inline __mmask16 visible(bool full, int32_t c0, int j, __m512i lim, __m512i lo) {
    const __m512i p = _mm512_set1_epi32(c0 + j);
    return full ? (__mmask16)0xffff : _mm512_cmple_epi32_mask(p, lim) & _mm512_cmpgt_epi32_mask(p, lo);
}

/* The maximum of the visible scores of positions [0, np) (in four
 * independent chains: one would wait on vmaxps' latency). */
static inline __attribute__((always_inline)) __m512 col_max(const float *sc, int np, bool full, int32_t c0,
                                                            __m512i lim, __m512i lo) {
    __m512 mx[4];
    for (int e = 0; e < 4; e++) mx[e] = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < np; j++)
        mx[j % 4] = _mm512_mask_max_ps(mx[j % 4], visible(full, c0, j, lim, lo), mx[j % 4], _mm512_loadu_ps(sc + 16 * j));
    return _mm512_max_ps(_mm512_max_ps(mx[0], mx[1]), _mm512_max_ps(mx[2], mx[3]));
}

/* The numerators p = 2^(s scale - m) of positions [0, NP) (0 past np, for
 * invisible positions and below 2^-96: none is denormal, whose arithmetic
 * takes microcode assists, and against the maximum's 2^0 they are
 * nothing), their pairs in bf16 hi and lo into pp, and their sum (two
 * chains, for vaddps' latency). */
static inline __attribute__((always_inline)) __m512 col_exp(const float *sc, int np, bool full, int32_t c0,
                                                            __m512i lim, __m512i lo, __m512 scale, __m512 m,
                                                            uint16_t *const *pp) {
    __m512 l0 = _mm512_setzero_ps(), l1 = _mm512_setzero_ps();
    const __m512 floor = _mm512_set1_ps(-96.0f);
    for (int i = 0; i < NP / 2; i++) {
        const int j = 2 * i;
        const __m512 x0 = _mm512_fmsub_ps(_mm512_loadu_ps(sc + 16 * j), scale, m);
        const __m512 x1 = _mm512_fmsub_ps(_mm512_loadu_ps(sc + 16 * j + 16), scale, m);
        const __mmask16 k0 = j < np ? visible(full, c0, j, lim, lo) : 0;
        const __mmask16 k1 = j + 1 < np ? visible(full, c0, j + 1, lim, lo) : 0;
        const __m512 p0 = exp2_512(k0 & _mm512_cmp_ps_mask(x0, floor, _CMP_GT_OQ), x0);
        const __m512 p1 = exp2_512(k1 & _mm512_cmp_ps_mask(x1, floor, _CMP_GT_OQ), x1);
        l0 = _mm512_add_ps(l0, p0);
        l1 = _mm512_add_ps(l1, p1);
        __m512i h, rl;
        pair16_trunc(p0, p1, &h, &rl);
        _mm512_storeu_si512((void *)(pp[0] + 32 * i), h);
        _mm512_storeu_si512((void *)(pp[1] + 32 * i), rl);
    }
    return _mm512_add_ps(l0, l1);
}

/* Gemma 2's cap on the step's scores sc ([np][16], unscaled), in place and
 * in the same units: s = (cap / scale) tanh(scale s / cap), tanh(x) as
 * sign(x) (1 - 2 / (1 + 2^(2 |x| log2 e))) (1 past |x| ~ 44: 2^x is inf;
 * near 0 the difference's rounding leaves ~6e-8 absolute, below the
 * scores' 16 bits here) */
static void cap_scores(const tstate *st, float *sc, int np) {
    const __m512 in = _mm512_set1_ps(st->scale / st->softcap), out = _mm512_set1_ps(st->softcap / st->scale);
    const __m512 two_log2e = _mm512_set1_ps(2.0f * 1.44269504088896341f), one = _mm512_set1_ps(1.0f),
                 two = _mm512_set1_ps(2.0f), sign = _mm512_set1_ps(-0.0f);
    for (int j = 0; j < np; j++) {
        const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(sc + 16 * j), in);
        const __m512 ax = _mm512_andnot_ps(sign, x);
        const __m512 e = exp2_512((__mmask16)0xffff, _mm512_mul_ps(ax, two_log2e));
        const __m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(one, e)));
        _mm512_storeu_ps(sc + 16 * j, _mm512_mul_ps(_mm512_or_ps(t, _mm512_and_ps(sign, x)), out));
    }
}

/* Online softmax of one column of 16 query rows over the step's scores
 * sc (S^T, unscaled): updates m, l (and O^T when m moves) and leaves
 * P^T in pairs in st->pp. */
static void softmax_col(tstate *st, int cb, float *sc, int32_t c0, int np) {
    if (st->softcap) cap_scores(st, sc, np);
    const __m512i lim = _mm512_loadu_si512((const void *)(st->lim + 16 * cb));
    const __m512i lo = st->window ? _mm512_sub_epi32(lim, _mm512_set1_epi32(st->window))
                                  : _mm512_set1_epi32(INT32_MIN);
    /* every row sees every position: the last one by the first row's
     * limit, the first one within the last row's window */
    const bool full = c0 + np - 1 <= st->lim[16 * cb] && (!st->window || c0 > st->lim[16 * cb + 15] - st->window);
    /* in base 2: p = 2^(s scale log2(e) - m) */
    const __m512 scale = _mm512_set1_ps(st->scale * 1.44269504088896341f);
    const __m512 mx =
        _mm512_mul_ps(full ? col_max(sc, np, true, c0, lim, lo) : col_max(sc, np, false, c0, lim, lo), scale);
    __m512 m = _mm512_loadu_ps(st->m + 16 * cb), l = _mm512_loadu_ps(st->l + 16 * cb);
    const __mmask16 up = _mm512_cmp_ps_mask(mx, _mm512_add_ps(m, _mm512_set1_ps(LAZY)), _CMP_GT_OQ);
    if (up) {
        const __m512 mn = _mm512_mask_mov_ps(m, up, mx);
        /* rows that saw nothing yet (m = -inf) have l = O = 0: corr 0 */
        const __mmask16 seen = _mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        const __m512 corr = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), up, exp2_512(up & seen, _mm512_sub_ps(m, mn)));
        l = _mm512_mul_ps(l, corr);
        float *o = st->ot + (size_t)cb * st->hd * 16;
        for (int d = 0; d < st->hd; d++) _mm512_storeu_ps(o + 16 * d, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * d), corr));
        m = mn;
        _mm512_storeu_ps(st->m + 16 * cb, m);
    }
    uint16_t *const *pp = st->pp;
    l = _mm512_add_ps(l, full ? col_exp(sc, np, true, c0, lim, lo, scale, m, pp)
                              : col_exp(sc, np, false, c0, lim, lo, scale, m, pp));
    _mm512_storeu_ps(st->l + 16 * cb, l);
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
    float *o = st->ot + (size_t)cb * st->hd * 16;
    uint16_t *const *pp = st->pp;
    _tile_loadd(4, pp[0], 64);
    _tile_loadd(5, pp[0] + 512, 64);
    _tile_loadd(6, pp[1], 64);
    _tile_loadd(7, pp[1] + 512, 64);
    for (int dt = 0; dt < st->hd / 16; dt += 2) { /* hd / 16 is even */
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

/* Prefetches (into L2) rows [j0, j1) of the next step: k[4 + j / 16],
 * v[...] (NULL: no such chunk). */
static void prefetch_next(const tstate *st, const uint16_t *const *k, const uint16_t *const *v, int64_t ld, int j0,
                          int j1) {
    for (int j = j0; j < j1; j++) {
        const uint16_t *kr = k[4 + j / 16], *vr = v[4 + j / 16];
        if (!kr) break;
        for (int b = 0; b < st->hd * 2; b += 64) {
            __builtin_prefetch((const uint8_t *)(kr + (j % 16) * ld) + b, 0, 2);
            __builtin_prefetch((const uint8_t *)(vr + (j % 16) * ld) + b, 0, 2);
        }
    }
}

/* S^T of column cb into out ([NP][16] floats): C tiles 0-3 (positions
 * 0-15 .. 48-63), Q^T hi in 4, lo in 7, K through 5 and 6: hi hi + lo hi
 * + hi lo. */
static void scores(const tstate *st, int cb, float *out) {
    const int nb = st->mr / 16, hd = st->hd;
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
    tstate *st = state_of(scratch);
    VX_ASSERT(np >= 1 && np <= NP);
    load_kv(st, np, k, v, ld);
    const int nb = st->mr / 16;
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
        prefetch_next(st, k, v, ld, cb * per, VX_MIN(NP, (cb + 1) * per));
        if (c0 > st->lim[16 * cb + 15]) continue; /* no row of this column sees the step */
        if (st->window && c0 + np - 1 <= st->lim[16 * cb] - st->window) continue; /* nor any row's window */
        scores(st, cb, st->s);
        if (prev >= 0) pv(st, prev);
        softmax_col(st, cb, st->s, c0, np);
        prev = cb;
    }
    if (prev >= 0) pv(st, prev);
}

void VXAMX(vx_attn_tiles_end)(void *scratch, float *out, int64_t ldo) {
    tstate *st = state_of(scratch);
    _tile_release();
    const int nb = st->mr / 16, nd = st->hd / 16;
    for (int cb = 0; cb < nb; cb++)
        for (int dt = 0; dt < nd; dt++) {
            const float *o = st->ot + ((size_t)cb * nd + dt) * 256;
            __m512i w[16];
            for (int d = 0; d < 16; d++) w[d] = _mm512_loadu_si512((const void *)(o + 16 * d));
            transpose16(w); /* w[n]: dims 16 dt .. 16 dt + 15 of row 16 cb + n */
            for (int n = 0; n < 16; n++) {
                const int r = 16 * cb + n;
                if (r >= st->rows) break;
                float *dst = out + r / st->g * ldo + r % st->g * st->hd + 16 * dt;
                _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_castsi512_ps(w[n]), _mm512_set1_ps(1.0f / st->l[r])));
            }
        }
}
