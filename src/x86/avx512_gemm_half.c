/*
 * avx512_gemm_half.c - prefill GEMM for F16 and BF16 weights x f32
 * activations on 512-bit FMAs, 16 tokens and more (avx512_half.c sends
 * fewer to its own kernels). Native only (the Makefile keeps it out of
 * the emulated build, as avx512_attn_tiles.c): its point is speed.
 *
 * The AVX2 tier's GEMM (avx2_gemm_half.c) in zmm registers: the cores
 * this runs on (Ice Lake and later Xeons, Zen 4/5, Sapphire Rapids with
 * its AMX off) issue two 512-bit FMAs per cycle, so 256-bit FMAs reach
 * only half of their fp32 peak (Llama-1B F16 pp512 on the AVX2 GEMM: ~50%
 * of the measured FMA peak).
 *
 * Register-blocked: 32 weight rows at a time are widened to f32, a chunk
 * of KC elements each, into T[32][KC] (each row whole, one sequential
 * read) and transposed 16 x 16 into a panel P[k][32] (16 KiB, L1); an
 * 8-token x 32-row micro-kernel keeps 16 accumulators in registers and
 * per element k loads two panel vectors, broadcasts the 8 tokens' x[k]
 * and issues 16 FMAs. The activations of a token tile are first copied,
 * per chunk, into groups of 8 tokens interleaved by element (X[k][8]),
 * so that the micro-kernel's broadcasts read one sequential stream.
 *
 * Loop order: token tile > chunk > 32-row block > 8 tokens; the tile's
 * chunk of X (TT x KC floats, 128 KiB) stays in L2 while every row block
 * passes over it, partial sums live in the output between chunks. Each
 * (token, row) is one chain of FMAs in ascending k on exact widened
 * weights, as in the AVX2 GEMM: the two give the same bits (test_kernels
 * checks the GEMM against the AVX2 tier's to the bit).
 *
 * The activation buffer is the calling thread's GEMM scratch, sized by
 * vx_gemm_half_scratch_avx2 (258 tokens x 256 elements there, at least
 * TT x KC here for any n).
 */
#include "isa512.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "common.h"
#include "kernels_x86.h"
#include "zmm16.h"

#define KC 128 /* elements per chunk: a 32-row panel is 16 KiB */
#define TT 256 /* most tokens per tile, a multiple of 8 */
#define MR 8   /* tokens per micro-kernel */
#define NR 32  /* rows per panel */

/* 16 half values from p to floats */
AINLINE __m512 widen16(const uint16_t *p, int bf) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    if (bf) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* Panel P[k][32] of elements [k0, k0 + kc) of the 32 rows rows[r]: each
 * row widened whole into T[r][KC] first (rows a multiple of 4 KiB apart
 * share an L1 set: reading 32 of them a piece at a time would thrash it),
 * then 16 x 16 blocks of T transposed into P. */
AINLINE void pack_w(const uint16_t *const rows[NR], int64_t k0, int kc, int bf, float (*P)[NR], float *T) {
    const int k16 = kc & ~15;
    for (int r = 0; r < NR; r++) {
        const uint16_t *src = rows[r] + k0;
        float *dst = T + r * KC;
        for (int k = 0; k < k16; k += 16) _mm512_store_ps(dst + k, widen16(src + k, bf));
        for (int k = k16; k < kc; k++) dst[k] = bf ? bf16(src[k]) : f16(src[k]);
    }
    for (int k = 0; k < k16; k += 16)
        for (int h = 0; h < NR; h += 16) {
            __m512i v[16];
            for (int i = 0; i < 16; i++) v[i] = _mm512_load_si512((const void *)(T + (h + i) * KC + k));
            transpose16(v);
            for (int d = 0; d < 16; d++) _mm512_store_si512((void *)(P[k + d] + h), v[d]);
        }
    for (int k = k16; k < kc; k++)
        for (int r = 0; r < NR; r++) P[k][r] = T[r * KC + k];
}

/* x row of token t0 + t, from element k0; past the tile's nt tokens its
 * last token again */
AINLINE const float *x_row(const void *act, size_t act_stride, int t0, int t, int nt, int64_t k0) {
    return (const float *)(const void *)((const uint8_t *)act + (size_t)(t0 + (t < nt ? t : nt - 1)) * act_stride) + k0;
}

/* The tile's chunk [k0, k0 + kc) as groups of 8 tokens: X[g][k][8], 16
 * tokens (two groups) and 16 elements per transpose. */
AINLINE void pack_x(const void *act, size_t act_stride, int t0, int nt, int64_t k0, int kc, float *X) {
    const int k16 = kc & ~15;
    for (int t = 0; t < nt; t += 2 * MR) {
        const float *x[2 * MR];
        for (int u = 0; u < 2 * MR; u++) x[u] = x_row(act, act_stride, t0, t + u, nt, k0);
        float *g0 = X + (size_t)t * kc, *g1 = g0 + (size_t)MR * kc; /* g1 past the last group: unused */
        const int two = t + MR < nt;
        for (int k = 0; k < k16; k += 16) {
            __m512i v[16];
            for (int u = 0; u < 16; u++) v[u] = _mm512_castps_si512(_mm512_loadu_ps(x[u] + k));
            transpose16(v);
            for (int d = 0; d < 16; d++) {
                _mm256_storeu_si256((__m256i *)(void *)(g0 + (k + d) * MR), _mm512_castsi512_si256(v[d]));
                if (two) _mm256_storeu_si256((__m256i *)(void *)(g1 + (k + d) * MR), _mm512_extracti64x4_epi64(v[d], 1));
            }
        }
        for (int k = k16; k < kc; k++)
            for (int u = 0; u < MR; u++) {
                g0[k * MR + u] = x[u][k];
                if (two) g1[k * MR + u] = x[MR + u][k];
            }
    }
}

/* c[u][0..31] (u < 8, rows of ldc floats) = (init ? 0 : c) + sum over the
 * chunk of P[k] X[k][u]; prefetches the 8 rows of pf (ldc apart) unless
 * NULL. */
static void micro8x32(const float (*P)[NR], int kc, const float *X, float *c, int64_t ldc, int init,
                      const float *pf) {
    __m512 a[MR][2];
#pragma GCC unroll 8
    for (int u = 0; u < MR; u++) {
        a[u][0] = init ? _mm512_setzero_ps() : _mm512_loadu_ps(c + u * ldc);
        a[u][1] = init ? _mm512_setzero_ps() : _mm512_loadu_ps(c + u * ldc + 16);
    }
    if (pf)
        for (int u = 0; u < MR; u++) _mm_prefetch((const char *)(pf + u * ldc), _MM_HINT_T0);
#pragma GCC unroll 2
    for (int k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(P[k]), w1 = _mm512_load_ps(P[k] + 16);
#pragma GCC unroll 8
        for (int u = 0; u < MR; u++) {
            const __m512 b = _mm512_set1_ps(X[MR * k + u]);
            a[u][0] = _mm512_fmadd_ps(w0, b, a[u][0]);
            a[u][1] = _mm512_fmadd_ps(w1, b, a[u][1]);
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < MR; u++) {
        _mm512_storeu_ps(c + u * ldc, a[u][0]);
        _mm512_storeu_ps(c + u * ldc + 16, a[u][1]);
    }
}

/* The scratch covers the tile's chunk of X for every n (see the header). */
_Static_assert(TT * KC <= 258 * 256, "vx_gemm_half_scratch_avx2 covers X");

/* Chunk [k0, k0 + kc) of the 32 rows from r0 (a short block repeats its
 * last row) into the outputs of the tile's nt tokens (o: the tile's
 * first output row), its activations packed in X. */
static void row_block(int bf, int64_t n, const void *w, size_t stride, int nrows, int r0, int64_t k0, int kc,
                      int init, const float *X, int nt, float *o, int64_t ldo) {
    _Alignas(64) float P[KC][NR];
    _Alignas(64) float T[NR * KC]; /* pack_w's rows */
    float tmp[MR][NR];             /* a partial block (fewer rows or tokens) works here */
    const int R = VX_MIN(nrows - r0, NR);
    const uint16_t *rows[NR];
    for (int r = 0; r < NR; r++) rows[r] = row_at(w, stride, r0 + (r < R ? r : R - 1));
    pack_w(rows, k0, kc, bf, P, T);
    /* the next panel's lines (next row block, else the next chunk's
     * first), spread over the micro-kernels */
    const int nblk = (nrows + NR - 1) / NR, pb = r0 / NR + 1, pr0 = pb % nblk * NR, pR = VX_MIN(nrows - pr0, NR);
    const int64_t pk0 = k0 + (int64_t)(pb / nblk) * KC;
    const int lines_row = ((int)VX_MIN(n - pk0, KC) * 2 + 63) / 64, plines = pk0 < n ? pR * lines_row : 0;
    const int pper = (plines + (nt + MR - 1) / MR - 1) / ((nt + MR - 1) / MR);
    int pl = 0;
    for (int t = 0; t < nt; t += MR) {
        for (int i = 0; i < pper && pl < plines; i++, pl++)
            _mm_prefetch((const char *)row_at(w, stride, pr0 + pl / lines_row) + (size_t)pk0 * 2 +
                             (size_t)(pl % lines_row) * 64,
                         _MM_HINT_T0);
        const int U = VX_MIN(nt - t, MR);
        const float *Xg = X + (size_t)t * kc;
        float *c = o + (int64_t)t * ldo + r0;
        const float *pf = !init && t + 2 * MR <= nt ? c + MR * ldo : NULL; /* the next micro-kernel's rows */
        if (U == MR && R == NR) {
            micro8x32((const float(*)[NR])P, kc, Xg, c, ldo, init, pf);
            continue;
        }
        for (int u = 0; u < MR; u++)
            for (int r = 0; r < NR; r++) tmp[u][r] = u < U && r < R && !init ? c[u * ldo + r] : 0.0f;
        micro8x32((const float(*)[NR])P, kc, Xg, tmp[0], NR, 0, NULL);
        for (int u = 0; u < U; u++)
            for (int r = 0; r < R; r++) c[u * ldo + r] = tmp[u][r];
    }
}

void vx_gemm_half_avx512(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                         size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    VX_ASSERT(scratch && vx_gemm_half_scratch_avx2(n) >= (size_t)TT * (size_t)(n < KC ? n : KC) * 4 + 64);
    /* token tiles of equal size, at most TT tokens, a multiple of 8 */
    const int tt = ((ntok + (ntok + TT - 1) / TT - 1) / ((ntok + TT - 1) / TT) + MR - 1) / MR * MR;
    float *X = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63); /* [tt / 8][KC][8] at most */
    for (int t0 = 0; t0 < ntok; t0 += tt)
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int nt = VX_MIN(ntok - t0, tt), kc = (int)VX_MIN(n - k0, KC);
            pack_x(act, act_stride, t0, nt, k0, kc, X);
            for (int r0 = 0; r0 < nrows; r0 += NR)
                row_block(bf, n, w, stride, nrows, r0, k0, kc, k0 == 0 && !accumulate, X, nt, out + (int64_t)t0 * ldo,
                          ldo);
        }
}
