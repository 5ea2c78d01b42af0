/*
 * attn_tiles.h - what the two tile attentions (amx_attn.c on AMX tiles,
 * avx512_attn_tiles.c on fp32 FMAs) share: the per-row state, the online
 * softmax of one column of 16 query rows over a step of positions, and the
 * final division by the denominators. Both compute the scores transposed
 * (S^T: one position per register, its 16 lanes 16 query rows) and keep
 * O^T as [mr / 16][hd][16] floats (column cb, dimension d: 16 rows), so
 * that the softmax is vertical: no horizontal reduction anywhere.
 *
 * Rescaling is lazy: a row's maximum m moves only when a step's maximum
 * exceeds it by more than TILES_LAZY, so the numerators stay below
 * 2^TILES_LAZY and O, l are rescaled (in memory) on those steps only. The
 * result is the same softmax up to rounding. The softmax runs in base 2
 * (scores scaled by scale log2 e; 2^x by scalef).
 * Included after isa512.h (and amx_emu.h under VX_EMU), by .c files only.
 */
#ifndef VX_ATTN_TILES_H
#define VX_ATTN_TILES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "ops.h"
#include "zmm16.h"

enum { TILES_NP = 64 };                /* positions per step */
static const float TILES_LAZY = 12.0f; /* rescale when the maximum grows by more (log2 units) */

/* The rows' state, at the head of each kernel's own state. */
typedef struct tiles_rows {
    int32_t rows, mr, g, hd; /* query rows, padded to 16, GQA group, head dim */
    float scale;
    float softcap;  /* Gemma 2: scores scale s become softcap tanh(scale s / softcap) (0: none) */
    int32_t window; /* Gemma 2: a row at p sees p - window < p' <= p (0: all) */
    float *m, *l;   /* [mr] running maximum (scores x scale x log2 e), denominator */
    int32_t *lim;   /* [mr] last position each row sees */
    float *ot;      /* [mr / 16][hd][16] O^T, unnormalized */
} tiles_rows;

/* A kernel's state: the caller's scratch rounded up to 64 bytes. */
static inline void *tiles_state(void *scratch) {
    return (void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
}

/* Prefetches (into L2) rows [j0, j1) of the next step: k[4 + j / 16],
 * v[...] (NULL: no such chunk; see ops.h), hd halves per row. */
static inline void tiles_prefetch_next(int hd, const uint16_t *const *k, const uint16_t *const *v, int64_t ld,
                                       int j0, int j1) {
    for (int j = j0; j < j1; j++) {
        const uint16_t *kr = k[4 + j / 16], *vr = v[4 + j / 16];
        if (!kr) break;
        for (int b = 0; b < hd * 2; b += 64) {
            __builtin_prefetch((const uint8_t *)(kr + (j % 16) * ld) + b, 0, 2);
            __builtin_prefetch((const uint8_t *)(vr + (j % 16) * ld) + b, 0, 2);
        }
    }
}

/* The shape begin sets first: rows of the GQA group g, padded to 16
 * (the bounds of ops.h's vx_attn_tiles_begin). */
static inline void tiles_rows_shape(tiles_rows *t, int64_t rows, int64_t g, int64_t hd) {
    VX_ASSERT(rows >= 1 && rows <= VX_ATTN_TILES_MAX_ROWS && hd % 32 == 0 && hd <= 256);
    t->rows = (int32_t)rows;
    t->mr = (int32_t)((rows + 15) & ~15);
    t->g = (int32_t)g;
    t->hd = (int32_t)hd;
}

/* O^T, m, l, lim carved from p (64-byte aligned); returns the next byte. */
static inline uint8_t *tiles_rows_carve(tiles_rows *t, uint8_t *p) {
    const size_t mr = (size_t)t->mr;
    t->ot = (float *)(void *)p, p += mr * (size_t)t->hd * 4;
    t->m = (float *)(void *)p, p += mr * 4;
    t->l = (float *)(void *)p, p += mr * 4;
    t->lim = (int32_t *)(void *)p, p += mr * 4;
    return p;
}

/* The fields begin sets (m, l, lim, ot already laid out): no row has seen
 * anything; row r sits at position p0 + r / g (pad rows as the last). */
static inline void tiles_rows_init(tiles_rows *t, int64_t rows, int64_t g, int64_t hd, int32_t p0, float scale,
                                   float softcap, int32_t window) {
    memset(t->ot, 0, (size_t)t->mr * (size_t)hd * sizeof(float));
    for (int r = 0; r < t->mr; r++) {
        t->m[r] = -INFINITY;
        t->l[r] = 0;
        t->lim[r] = p0 + (int32_t)((r < rows ? r : rows - 1) / g);
    }
    t->scale = scale;
    t->softcap = softcap;
    t->window = window;
}

/* Whether no row of column cb sees any of the step's positions
 * [c0, c0 + np): all before it, or all past every row's window. */
static inline bool tiles_col_idle(const tiles_rows *t, int cb, int32_t c0, int np) {
    return c0 > t->lim[16 * cb + 15] || (t->window && c0 + np - 1 <= t->lim[16 * cb] - t->window);
}

/* 2^x for finite x (any magnitude: scalef takes the exponent whole and
 * underflows to 0), lanes outside keep zero: x = k + f, |f| <= 1/2,
 * 2^f by its Taylor series to f^5 (relative error 2.4e-6). */
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

/* The visible positions among j of the step for 16 rows of limits lim
 * and window starts lo (positions > lo; INT32_MIN without a window): all
 * when full. */
static inline __mmask16 tiles_visible(bool full, int32_t c0, int j, __m512i lim, __m512i lo) {
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
        mx[j % 4] = _mm512_mask_max_ps(mx[j % 4], tiles_visible(full, c0, j, lim, lo), mx[j % 4],
                                       _mm512_loadu_ps(sc + 16 * j));
    return _mm512_max_ps(_mm512_max_ps(mx[0], mx[1]), _mm512_max_ps(mx[2], mx[3]));
}

/* Where a kernel keeps the numerators of positions 2i and 2i + 1 (in its
 * own layout, at pp). */
typedef void (*tiles_store_fn)(void *pp, int i, __m512 p0, __m512 p1);

/* The numerators p = 2^(s scale - m) of positions [0, npad) (npad even;
 * 0 past np, for invisible positions and below 2^-96: none is denormal,
 * whose arithmetic takes microcode assists, and against the maximum's 2^0
 * they are nothing), stored by store, and their sum (two chains, for
 * vaddps' latency). */
static inline __attribute__((always_inline)) __m512 col_exp(const float *sc, int np, int npad, bool full,
                                                            int32_t c0, __m512i lim, __m512i lo, __m512 scale,
                                                            __m512 m, tiles_store_fn store, void *pp) {
    __m512 l0 = _mm512_setzero_ps(), l1 = _mm512_setzero_ps();
    const __m512 floor = _mm512_set1_ps(-96.0f);
    for (int i = 0; i < npad / 2; i++) {
        const int j = 2 * i;
        const __m512 x0 = _mm512_fmsub_ps(_mm512_loadu_ps(sc + 16 * j), scale, m);
        const __m512 x1 = _mm512_fmsub_ps(_mm512_loadu_ps(sc + 16 * j + 16), scale, m);
        const __mmask16 k0 = j < np ? tiles_visible(full, c0, j, lim, lo) : 0;
        const __mmask16 k1 = j + 1 < np ? tiles_visible(full, c0, j + 1, lim, lo) : 0;
        const __m512 p0 = exp2_512(k0 & _mm512_cmp_ps_mask(x0, floor, _CMP_GT_OQ), x0);
        const __m512 p1 = exp2_512(k1 & _mm512_cmp_ps_mask(x1, floor, _CMP_GT_OQ), x1);
        l0 = _mm512_add_ps(l0, p0);
        l1 = _mm512_add_ps(l1, p1);
        store(pp, i, p0, p1);
    }
    return _mm512_add_ps(l0, l1);
}

/* Gemma 2's cap on the step's scores sc ([np][16], unscaled), in place and
 * in the same units: s = (cap / scale) tanh(scale s / cap), tanh(x) as
 * sign(x) (1 - 2 / (1 + 2^(2 |x| log2 e))) (1 past |x| ~ 44: 2^x is inf;
 * near 0 the difference's rounding leaves ~6e-8 absolute, below the
 * scores' 16 bits on the AMX tiles) */
static inline void tiles_cap_scores(const tiles_rows *t, float *sc, int np) {
    const __m512 in = _mm512_set1_ps(t->scale / t->softcap), out = _mm512_set1_ps(t->softcap / t->scale);
    const __m512 two_log2e = _mm512_set1_ps(2.0f * 1.44269504088896341f), one = _mm512_set1_ps(1.0f),
                 two = _mm512_set1_ps(2.0f), sign = _mm512_set1_ps(-0.0f);
    for (int j = 0; j < np; j++) {
        const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(sc + 16 * j), in);
        const __m512 ax = _mm512_andnot_ps(sign, x);
        const __m512 e = exp2_512((__mmask16)0xffff, _mm512_mul_ps(ax, two_log2e));
        const __m512 tt = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(one, e)));
        _mm512_storeu_ps(sc + 16 * j, _mm512_mul_ps(_mm512_or_ps(tt, _mm512_and_ps(sign, x)), out));
    }
}

/* Online softmax of column cb (16 query rows) over the step's scores sc
 * (S^T [np][16], unscaled): updates m, l (and O^T when m moves) and
 * leaves the numerators of positions [0, npad) to store. */
static inline __attribute__((always_inline)) void tiles_softmax(tiles_rows *t, int cb, float *sc, int32_t c0, int np,
                                                                int npad, tiles_store_fn store, void *pp) {
    if (t->softcap) tiles_cap_scores(t, sc, np);
    const __m512i lim = _mm512_loadu_si512((const void *)(t->lim + 16 * cb));
    const __m512i lo = t->window ? _mm512_sub_epi32(lim, _mm512_set1_epi32(t->window))
                                 : _mm512_set1_epi32(INT32_MIN);
    /* every row sees every position: the last one by the first row's
     * limit, the first one within the last row's window */
    const bool full = c0 + np - 1 <= t->lim[16 * cb] && (!t->window || c0 > t->lim[16 * cb + 15] - t->window);
    /* in base 2: p = 2^(s scale log2(e) - m) */
    const __m512 scale = _mm512_set1_ps(t->scale * 1.44269504088896341f);
    const __m512 mx =
        _mm512_mul_ps(full ? col_max(sc, np, true, c0, lim, lo) : col_max(sc, np, false, c0, lim, lo), scale);
    __m512 m = _mm512_loadu_ps(t->m + 16 * cb), l = _mm512_loadu_ps(t->l + 16 * cb);
    const __mmask16 up = _mm512_cmp_ps_mask(mx, _mm512_add_ps(m, _mm512_set1_ps(TILES_LAZY)), _CMP_GT_OQ);
    if (up) {
        const __m512 mn = _mm512_mask_mov_ps(m, up, mx);
        /* rows that saw nothing yet (m = -inf) have l = O = 0: corr 0 */
        const __mmask16 seen = _mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        const __m512 corr = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), up, exp2_512(up & seen, _mm512_sub_ps(m, mn)));
        l = _mm512_mul_ps(l, corr);
        float *o = t->ot + (size_t)cb * t->hd * 16;
        for (int d = 0; d < t->hd; d++) _mm512_storeu_ps(o + 16 * d, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * d), corr));
        m = mn;
        _mm512_storeu_ps(t->m + 16 * cb, m);
    }
    l = _mm512_add_ps(l, full ? col_exp(sc, np, npad, true, c0, lim, lo, scale, m, store, pp)
                              : col_exp(sc, np, npad, false, c0, lim, lo, scale, m, store, pp));
    _mm512_storeu_ps(t->l + 16 * cb, l);
}

/* O / l into the rows' layout (row r: out + (r / g) ldo + (r % g) hd). */
static inline void tiles_write_out(const tiles_rows *t, float *out, int64_t ldo) {
    const int nb = t->mr / 16, nd = t->hd / 16;
    for (int cb = 0; cb < nb; cb++)
        for (int dt = 0; dt < nd; dt++) {
            const float *o = t->ot + ((size_t)cb * nd + dt) * 256;
            __m512i w[16];
            for (int d = 0; d < 16; d++) w[d] = _mm512_loadu_si512((const void *)(o + 16 * d));
            transpose16(w); /* w[n]: dims 16 dt .. 16 dt + 15 of row 16 cb + n */
            for (int n = 0; n < 16; n++) {
                const int r = 16 * cb + n;
                if (r >= t->rows) break;
                float *dst = out + r / t->g * ldo + r % t->g * t->hd + 16 * dt;
                _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_castsi512_ps(w[n]), _mm512_set1_ps(1.0f / t->l[r])));
            }
        }
}

#endif
