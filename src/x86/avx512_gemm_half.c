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
 * BF16 weights on AMD's AVX512-BF16 CPUs (cpu.c installs
 * vx_gemm_bf16_dp_avx512 there) take the same loops on vdpbf16ps instead (dp mode): the panel
 * holds each row's raw bf16 pairs (no widening), the activations are
 * rounded to bf16 pairs (nearest even) as the AMX tiles round them, and
 * one instruction does two elements: on Zen 5 vdpbf16ps runs 401 GFLOP/s
 * per core against 218 for fp32 FMAs (Llama-1B BF16 pp512 ~125 -> ~185
 * t/s). Error: 2^-8 of sum |w x| at most (test_kernels), llama.cpp's own
 * precision for BF16 on CPUs; batch_invariant and f32_matmul contexts
 * keep the fp32 mode (ops.h, gemm_bf16_f32).
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

/* BF16 rows as they are for vdpbf16ps: P[p][32] = dword p of each row's
 * chunk (elements 2p, 2p + 1; an odd chunk's last pair padded with 0),
 * 16 x 16 dwords a transpose, a whole cache line per row and step. */
AINLINE void pack_w_dp(const uint16_t *const rows[NR], int64_t k0, int kc, uint32_t (*P)[NR]) {
    const int p16 = kc / 32 * 16, kp = (kc + 1) / 2;
    for (int p = 0; p < p16; p += 16)
        for (int h = 0; h < NR; h += 16) {
            __m512i v[16];
            for (int i = 0; i < 16; i++) v[i] = _mm512_loadu_si512((const void *)(rows[h + i] + k0 + 2 * p));
            transpose16(v);
            for (int d = 0; d < 16; d++) _mm512_store_si512((void *)(P[p + d] + h), v[d]);
        }
    for (int p = p16; p < kp; p++)
        for (int r = 0; r < NR; r++)
            P[p][r] = rows[r][k0 + 2 * p] | (uint32_t)(2 * p + 1 < kc ? rows[r][k0 + 2 * p + 1] : 0) << 16;
}

/* x rounded to bf16, to nearest even (vcvtne2ps2bf16's rounding, finite x) */
AINLINE uint32_t bf16_rne(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16;
}

/* x row of token t0 + t, from element k0; past the tile's nt tokens its
 * last token again */
AINLINE const float *x_row(const void *act, size_t act_stride, int t0, int t, int nt, int64_t k0) {
    return (const float *)(const void *)((const uint8_t *)act + (size_t)(t0 + (t < nt ? t : nt - 1)) * act_stride) + k0;
}

/* The tile's chunk [k0, k0 + kc) as groups of 8 tokens, X[g][s][8] for
 * the chunk's steps s: floats (dp 0: steps are elements) or bf16 pairs
 * (dp 1: steps are element pairs, rounded to nearest even, an odd
 * chunk's last one padded with 0); 16 tokens (two groups) and 16 steps a
 * transpose. */
AINLINE void pack_x(int dp, const void *act, size_t act_stride, int t0, int nt, int64_t k0, int kc, uint32_t *X) {
    const int ns = dp ? (kc + 1) / 2 : kc, s16 = dp ? kc / 32 * 16 : kc & ~15;
    for (int t = 0; t < nt; t += 2 * MR) {
        const float *x[2 * MR];
        for (int u = 0; u < 2 * MR; u++) x[u] = x_row(act, act_stride, t0, t + u, nt, k0);
        uint32_t *g0 = X + (size_t)t * ns, *g1 = g0 + (size_t)MR * ns; /* g1 past the last group: unused */
        const int two = t + MR < nt;
        for (int s0 = 0; s0 < s16; s0 += 16) {
            __m512i v[16];
            for (int u = 0; u < 16; u++)
                v[u] = dp ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x[u] + 2 * s0 + 16), _mm512_loadu_ps(x[u] + 2 * s0))
                          : _mm512_castps_si512(_mm512_loadu_ps(x[u] + s0));
            transpose16(v);
            for (int d = 0; d < 16; d++) {
                _mm256_storeu_si256((__m256i *)(void *)(g0 + (s0 + d) * MR), _mm512_castsi512_si256(v[d]));
                if (two) _mm256_storeu_si256((__m256i *)(void *)(g1 + (s0 + d) * MR), _mm512_extracti64x4_epi64(v[d], 1));
            }
        }
        for (int s = s16; s < ns; s++)
            for (int u = 0; u < 2 * MR; u++) {
                uint32_t e;
                if (dp) {
                    e = bf16_rne(x[u][2 * s]) | (2 * s + 1 < kc ? bf16_rne(x[u][2 * s + 1]) << 16 : 0);
                } else {
                    memcpy(&e, &x[u][s], 4);
                }
                if (u < MR) g0[s * MR + u] = e;
                else if (two) g1[s * MR + u - MR] = e;
            }
    }
}

/* c[u][0..31] (u < 8, rows of ldc floats) = (init ? 0 : c) + sum over the
 * chunk's ns steps of P[s] X[s][u]: one FMA per element (dp 0), or one
 * vdpbf16ps per pair (dp 1); prefetches the 8 rows of pf (ldc apart)
 * unless NULL. */
AINLINE void micro(int dp, const uint32_t (*P)[NR], int ns, const uint32_t *X, float *c, int64_t ldc, int init,
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
    for (int s = 0; s < ns; s++) {
        const __m512i w0 = _mm512_load_si512((const void *)P[s]), w1 = _mm512_load_si512((const void *)(P[s] + 16));
#pragma GCC unroll 8
        for (int u = 0; u < MR; u++) {
            const __m512i b = _mm512_set1_epi32((int)X[MR * s + u]);
            if (dp) {
                a[u][0] = _mm512_dpbf16_ps(a[u][0], (__m512bh)w0, (__m512bh)b);
                a[u][1] = _mm512_dpbf16_ps(a[u][1], (__m512bh)w1, (__m512bh)b);
            } else {
                a[u][0] = _mm512_fmadd_ps(_mm512_castsi512_ps(w0), _mm512_castsi512_ps(b), a[u][0]);
                a[u][1] = _mm512_fmadd_ps(_mm512_castsi512_ps(w1), _mm512_castsi512_ps(b), a[u][1]);
            }
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < MR; u++) {
        _mm512_storeu_ps(c + u * ldc, a[u][0]);
        _mm512_storeu_ps(c + u * ldc + 16, a[u][1]);
    }
}

static void micro_fma(const uint32_t (*P)[NR], int ns, const uint32_t *X, float *c, int64_t ldc, int init,
                      const float *pf) {
    micro(0, P, ns, X, c, ldc, init, pf);
}
static void micro_dp(const uint32_t (*P)[NR], int ns, const uint32_t *X, float *c, int64_t ldc, int init,
                     const float *pf) {
    micro(1, P, ns, X, c, ldc, init, pf);
}

/* The scratch covers the tile's chunk of X for every n (see the header). */
_Static_assert(TT * KC <= 258 * 256, "vx_gemm_half_scratch_avx2 covers X");

/* Chunk [k0, k0 + kc) of the 32 rows from r0 (a short block repeats its
 * last row) into the outputs of the tile's nt tokens (o: the tile's
 * first output row), its activations packed in X (pack_x, mode dp). */
static void row_block(int dp, int bf, int64_t n, const void *w, size_t stride, int nrows, int r0, int64_t k0,
                      int kc, int init, const uint32_t *X, int nt, float *o, int64_t ldo) {
    _Alignas(64) uint32_t P[KC][NR];
    _Alignas(64) float T[NR * KC]; /* pack_w's rows */
    float tmp[MR][NR];             /* a partial block (fewer rows or tokens) works here */
    const int R = VX_MIN(nrows - r0, NR), ns = dp ? (kc + 1) / 2 : kc;
    const uint16_t *rows[NR];
    for (int r = 0; r < NR; r++) rows[r] = row_at(w, stride, r0 + (r < R ? r : R - 1));
    if (dp) pack_w_dp(rows, k0, kc, P);
    else pack_w(rows, k0, kc, bf, (float(*)[NR])(void *)P, T);
    void (*const mk)(const uint32_t(*)[NR], int, const uint32_t *, float *, int64_t, int, const float *) =
        dp ? micro_dp : micro_fma;
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
        const uint32_t *Xg = X + (size_t)t * ns;
        float *c = o + (int64_t)t * ldo + r0;
        const float *pf = !init && t + 2 * MR <= nt ? c + MR * ldo : NULL; /* the next micro-kernel's rows */
        if (U == MR && R == NR) {
            mk((const uint32_t(*)[NR])P, ns, Xg, c, ldo, init, pf);
            continue;
        }
        for (int u = 0; u < MR; u++)
            for (int r = 0; r < NR; r++) tmp[u][r] = u < U && r < R && !init ? c[u * ldo + r] : 0.0f;
        mk((const uint32_t(*)[NR])P, ns, Xg, tmp[0], NR, 0, NULL);
        for (int u = 0; u < U; u++)
            for (int r = 0; r < R; r++) c[u * ldo + r] = tmp[u][r];
    }
}

static void gemm_panels(int dp, int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                        size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    VX_ASSERT(scratch && vx_gemm_half_scratch_avx2(n) >= (size_t)TT * (size_t)(n < KC ? n : KC) * 4 + 64);
    /* token tiles of equal size, at most TT tokens, a multiple of 8 */
    const int tt = ((ntok + (ntok + TT - 1) / TT - 1) / ((ntok + TT - 1) / TT) + MR - 1) / MR * MR;
    uint32_t *X = (uint32_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63); /* [tt / 8][KC][8] at most */
    for (int t0 = 0; t0 < ntok; t0 += tt)
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int nt = VX_MIN(ntok - t0, tt), kc = (int)VX_MIN(n - k0, KC);
            pack_x(dp, act, act_stride, t0, nt, k0, kc, X);
            for (int r0 = 0; r0 < nrows; r0 += NR)
                row_block(dp, bf, n, w, stride, nrows, r0, k0, kc, k0 == 0 && !accumulate, X, nt,
                          out + (int64_t)t0 * ldo, ldo);
        }
}

void vx_gemm_half_avx512(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                         size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    gemm_panels(0, bf, n, w, stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
}

void vx_gemm_bf16_dp_avx512(int64_t n, const void *w, size_t stride, int nrows, const void *act, size_t act_stride,
                            int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    if (ntok > 15 && scratch)
        gemm_panels(1, 1, n, w, stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
    else
        vx_gemm_bf16_avx512(n, w, stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
}
