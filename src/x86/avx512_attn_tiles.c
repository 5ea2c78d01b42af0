/*
 * avx512_attn_tiles.c - the prefill tile attention (attn_tiles_*, contract
 * in ops.h) on AVX-512 fp32 FMAs, for CPUs without AMX: one query tile
 * of up to VX_ATTN_TILES_MAX_ROWS rows against one kv head, in steps of 64
 * positions with an online softmax (attn_tiles.h, shared with the AMX
 * tiles of amx_attn.c: the same orientation, state and softmax).
 *
 * Per step the K and V rows are widened from fp16 once, for every query
 * row of the tile (the block path, attention.c's chunk_steps, widens them
 * once per 128 rows and runs 16 positions per pass through the kernel
 * table's general GEMMs). Per column of 16 query rows:
 *   S^T = K Q^T   16 positions at a time: per dimension one load of Q^T's
 *                 16 rows and 16 FMAs against broadcast K elements, into
 *                 16 accumulators (one per position);
 *   softmax       vertical, in the lanes (attn_tiles.h);
 *   O^T += V^T P^T  16 dimensions at a time: per position one load of
 *                 P^T's 16 rows and 16 FMAs against broadcast V elements.
 * Every product is exact fp32 of the cache's fp16 values and the fp32
 * queries (no bf16 rounding, unlike the AMX tiles), summed in fp32 in
 * one chain per score / output: more accurate than the AMX path, but not
 * the block path's association, so (like AMX) this path is off in
 * batch-invariant contexts (forward.c).
 *
 * Native only (no _avx512emu copy, see the Makefile: SIMDe's compile of
 * it would add to CI's time for a path whose speed means nothing
 * emulated; the AMX emulation covers the shared softmax).
 */
#include <stddef.h>
#include <stdint.h>

#include "isa512.h"

#include "attn_tiles.h"
#include "common.h"
#include "kernels_x86.h"
#include "ops.h"

enum { NP = TILES_NP };

/* The state, at the start of the caller's scratch (vx_attn_tiles_bytes:
 * Q^T and O^T take its mr hd 8 bytes, K and V its 64 hd 8, S^T and P^T
 * its 64 x 16 x 4 and 2 x 32 x 16 x 4). */
typedef struct fstate {
    tiles_rows r;
    float *qt; /* [mr / 16][hd][16] Q^T */
    float *kb; /* [NP / 8][hd][8] K in blocks of 8 positions, dimension-major
                  (a dimension's 8 broadcasts in 32 bytes); zeros past the step's end */
    float *vb; /* [NP][hd] V rows */
    float *s;  /* [NP][16] S^T, then P^T, of one column of 16 rows */
    float *p;  /* [NP][16] the same of a second column */
} fstate;

static void layout(fstate *st) {
    uint8_t *p = (uint8_t *)st + 256;
    const size_t mr = (size_t)st->r.mr, hd = (size_t)st->r.hd;
    st->qt = (float *)(void *)p, p += mr * hd * 4;
    p = tiles_rows_carve(&st->r, p);
    st->kb = (float *)(void *)p, p += (size_t)NP * hd * 4;
    st->vb = (float *)(void *)p, p += (size_t)NP * hd * 4;
    st->s = (float *)(void *)p, p += (size_t)NP * 16 * 4;
    st->p = (float *)(void *)p, p += (size_t)NP * 16 * 4;
    VX_ASSERT(sizeof(fstate) <= 256 && (size_t)(p - (uint8_t *)st) + 64 <= vx_attn_tiles_bytes(st->r.hd));
}

void VX512(vx_attn_tiles_begin)(void *scratch, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq,
                                int32_t p0, float scale, float softcap, int32_t window) {
    fstate *st = tiles_state(scratch);
    tiles_rows_shape(&st->r, rows, g, hd);
    layout(st);
    /* Q^T: 16 rows x 16 dims at a time, transposed */
    for (int cb = 0; cb < st->r.mr / 16; cb++)
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {
            __m512i v[16];
            for (int n = 0; n < 16; n++) {
                const int64_t r = cb * 16 + n;
                v[n] = r < rows ? _mm512_loadu_si512((const void *)(q + r / g * ldq + r % g * hd + d0))
                                : _mm512_setzero_si512();
            }
            transpose16(v);
            float *dst = st->qt + ((size_t)cb * (size_t)hd + (size_t)d0) * 16;
            for (int d = 0; d < 16; d++) _mm512_storeu_si512((void *)(dst + 16 * d), v[d]);
        }
    tiles_rows_init(&st->r, rows, g, hd, p0, scale, softcap, window);
}

/* The step's K and V rows [0, np) widened to floats, K rows up to the
 * next multiple of 16 zeroed (their scores are computed, never seen). */
static void load_kv(fstate *st, int np, const uint16_t *const *k, const uint16_t *const *v, int64_t ld) {
    const int hd = st->r.hd, npad = (np + 15) & ~15;
    for (int j = 0; j < npad; j++) {
        float *kd = st->kb + (size_t)(j / 8) * hd * 8 + j % 8, *vd = st->vb + (size_t)j * hd;
        if (j >= np) {
            for (int d = 0; d < hd; d++) kd[8 * d] = 0;
            continue;
        }
        const uint16_t *ks = k[j / 16] + (j % 16) * ld, *vs = v[j / 16] + (j % 16) * ld;
        for (int d = 0; d < hd; d += 16) {
            float w[16];
            _mm512_storeu_ps(w, f16x16(ks + d));
            for (int e = 0; e < 16; e++) kd[8 * (d + e)] = w[e];
            _mm512_storeu_ps(vd + d, f16x16(vs + d));
        }
    }
}

/* S^T of nc (1, 2) columns cbs[] for positions [0, npad) into out[]:
 * per 8 positions, 8 nc chains over the dimensions (two columns share
 * each broadcast K element: 10 loads per 16 FMAs). */
static inline __attribute__((always_inline)) void scores(const fstate *st, const int *cbs, int nc, float *const *out,
                                                         int npad) {
    const int hd = st->r.hd;
    const float *qc[2];
    for (int c = 0; c < nc; c++) qc[c] = st->qt + (size_t)cbs[c] * hd * 16;
    for (int j0 = 0; j0 < npad; j0 += 8) {
        const float *kr = st->kb + (size_t)j0 * hd; /* block j0 / 8 */
        __m512 acc[2][8];
        for (int c = 0; c < nc; c++)
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) acc[c][i] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m512 qd[2];
            for (int c = 0; c < nc; c++) qd[c] = _mm512_loadu_ps(qc[c] + 16 * d);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                const __m512 kb = _mm512_set1_ps(kr[8 * d + i]);
                for (int c = 0; c < nc; c++) acc[c][i] = _mm512_fmadd_ps(kb, qd[c], acc[c][i]);
            }
        }
        for (int c = 0; c < nc; c++)
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm512_storeu_ps(out[c] + 16 * (j0 + i), acc[c][i]);
    }
}

/* O^T of nc columns cbs[] += V^T P^T over positions [0, np), P^T in p[]:
 * per 8 dimensions, 8 nc chains over the positions. */
static inline __attribute__((always_inline)) void pv(const fstate *st, const int *cbs, int nc, float *const *p,
                                                     int np) {
    const int hd = st->r.hd;
    float *o[2];
    for (int c = 0; c < nc; c++) o[c] = st->r.ot + (size_t)cbs[c] * hd * 16;
    for (int d0 = 0; d0 < hd; d0 += 8) {
        __m512 acc[2][8];
        for (int c = 0; c < nc; c++)
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) acc[c][i] = _mm512_loadu_ps(o[c] + 16 * (d0 + i));
        for (int j = 0; j < np; j++) {
            __m512 pj[2];
            for (int c = 0; c < nc; c++) pj[c] = _mm512_loadu_ps(p[c] + 16 * j);
            const float *vr = st->vb + (size_t)j * hd + d0;
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                const __m512 vb = _mm512_set1_ps(vr[i]);
                for (int c = 0; c < nc; c++) acc[c][i] = _mm512_fmadd_ps(vb, pj[c], acc[c][i]);
            }
        }
        for (int c = 0; c < nc; c++)
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm512_storeu_ps(o[c] + 16 * (d0 + i), acc[c][i]);
    }
}

/* tiles_store_fn: P^T rows 2i, 2i + 1 as floats */
static inline __attribute__((always_inline)) void store_rows(void *pp, int i, __m512 p0, __m512 p1) {
    float *dst = (float *)pp + 32 * i;
    _mm512_storeu_ps(dst, p0);
    _mm512_storeu_ps(dst + 16, p1);
}

void VX512(vx_attn_tiles_step)(void *scratch, int32_t c0, int32_t np, const uint16_t *const *k,
                               const uint16_t *const *v, int64_t ld) {
    fstate *st = tiles_state(scratch);
    VX_ASSERT(np >= 1 && np <= NP);
    load_kv(st, np, k, v, ld);
    const int nb = st->r.mr / 16, npad = (np + 15) & ~15, per = (NP + nb - 1) / nb;
    /* the active columns in pairs; each column's S^T becomes its P^T in
     * place (col_exp reads a pair of positions before it stores them) */
    float *const sp[2] = {st->s, st->p};
    int cbs[2], nc = 0;
    for (int cb = 0; cb < nb; cb++) {
        tiles_prefetch_next(st->r.hd, k, v, ld, cb * per, VX_MIN(NP, (cb + 1) * per));
        if (!tiles_col_idle(&st->r, cb, c0, np)) cbs[nc++] = cb;
        if (nc == 2 || (cb == nb - 1 && nc == 1)) {
            if (nc == 2) scores(st, cbs, 2, sp, npad);
            else scores(st, cbs, 1, sp, npad);
            for (int c = 0; c < nc; c++) tiles_softmax(&st->r, cbs[c], sp[c], c0, np, npad, store_rows, sp[c]);
            if (nc == 2) pv(st, cbs, 2, sp, np);
            else pv(st, cbs, 1, sp, np);
            nc = 0;
        }
    }
}

void VX512(vx_attn_tiles_end)(void *scratch, float *out, int64_t ldo) {
    tiles_write_out(&((fstate *)tiles_state(scratch))->r, out, ldo);
}
