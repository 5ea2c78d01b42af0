/*
 * avx2_gemm_half.c - prefill GEMM for F16 and BF16 weights x f32
 * activations (compiled with -mavx2 -mfma -mf16c -mbmi2).
 *
 * Register-blocked: 16 weight rows at a time are widened to f32 and
 * transposed, a chunk of KC elements at a time, into a panel P[k][16]
 * (16 KiB, L1); a 6-token x 16-row micro-kernel keeps 12 accumulators in
 * registers and per element k loads two panel vectors (rows 0..7, 8..15),
 * broadcasts the 6 tokens' x[k] and issues 12 FMAs, so the two FMA pipes
 * set the pace (unrolled 4 times: ~90% of FMA peak with its data in L1,
 * ~80% rolled).
 *
 * The activations of a token tile are first copied, per chunk, into
 * groups of 6 tokens interleaved by element (X[k][6]): the micro-kernel's
 * six broadcasts per k then read one or two cache lines of one sequential
 * stream instead of six rows a whole activation row apart (which ran at
 * ~2/3 of the speed even from L1), and the tile's chunk (TT x KC floats,
 * 258 KiB) is compact in L2 while every row block of the call passes over
 * it.
 *
 * Loop order: token tile > chunk of KC elements > 16-row block > 6 tokens.
 * A tile holds up to TT tokens, tiles of equal size (a 512-token batch is
 * two tiles, so every weight row is widened twice per call). Partial sums
 * live in the output between chunks (each (token, row) is one chain of
 * FMAs in ascending k). While the micro-kernels run over a panel they
 * prefetch the weights of the next panel (the widening would otherwise
 * wait on memory) and each the output rows of the next. The activation
 * buffer is the calling thread's scratch (vx_gemm_half_scratch_avx2 bytes,
 * allocated once per context): no allocation per call; given none, the
 * entry points run the gemv per token.
 *
 * Summation order differs from the gemv's (four accumulators and a final
 * horizontal sum), so the two agree up to float rounding only.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"
#include "quant.h"

#ifndef KC
#define KC 256 /* elements per chunk: a 16-row panel is 16 KiB */
#endif
#ifndef TT
#define TT 258 /* most tokens per tile, a multiple of 6: x chunk 258 KiB */
#endif
#ifndef PFD
#define PFD 1 /* panels ahead */
#endif
#define MR 6      /* tokens per micro-kernel */
#define MIN_TOK_HALF 4

/* 8 half values from p to 8 floats. */
AINLINE __m256 widen8(const uint16_t *p, int bf) {
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (bf) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

AINLINE float widen1(uint16_t h, int bf) {
    if (bf) {
        const uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* P[j * 16 + i] = T[i * KC + j] for i, j < 8 (P and T 32-byte aligned). */
AINLINE void tr8(const float *T, float *P) {
    const __m256 v0 = _mm256_load_ps(T + 0 * KC), v1 = _mm256_load_ps(T + 1 * KC), v2 = _mm256_load_ps(T + 2 * KC),
                 v3 = _mm256_load_ps(T + 3 * KC), v4 = _mm256_load_ps(T + 4 * KC), v5 = _mm256_load_ps(T + 5 * KC),
                 v6 = _mm256_load_ps(T + 6 * KC), v7 = _mm256_load_ps(T + 7 * KC);
    const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
    const __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
    const __m256 t4 = _mm256_unpacklo_ps(v4, v5), t5 = _mm256_unpackhi_ps(v4, v5);
    const __m256 t6 = _mm256_unpacklo_ps(v6, v7), t7 = _mm256_unpackhi_ps(v6, v7);
    /* s0: rows 0..3 of columns 0 | 4, s1: 1 | 5, s2: 2 | 6, s3: 3 | 7; s4..s7 rows 4..7 */
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_store_ps(P + 0 * 16, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_store_ps(P + 1 * 16, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_store_ps(P + 2 * 16, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_store_ps(P + 3 * 16, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_store_ps(P + 4 * 16, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_store_ps(P + 5 * 16, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_store_ps(P + 6 * 16, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_store_ps(P + 7 * 16, _mm256_permute2f128_ps(s3, s7, 0x31));
}

/* Panel P[k][16] of elements [k0, k0 + kc) of 16 rows (rows[r]). Each
 * row is widened whole first, into T[r][KC] (a row's lines one after the
 * other: rows n halves apart share their L1 set when n * 2 is a multiple
 * of 4 KiB, and 16 rows read 8 elements at a time thrashed the set), then
 * 8 x 8 blocks of T are transposed into P. */
AINLINE void pack16(const uint16_t *const rows[16], int64_t k0, int kc, int bf, float (*P)[16], float *T) {
    const int k8 = kc & ~7;
    for (int r = 0; r < 16; r++) {
        const uint16_t *src = rows[r] + k0;
        float *dst = T + r * KC;
        for (int k = 0; k < k8; k += 8) _mm256_store_ps(dst + k, widen8(src + k, bf));
    }
    for (int k = 0; k < k8; k += 8) {
        tr8(T + k, P[k]);
        tr8(T + 8 * KC + k, P[k] + 8);
    }
    for (int k = k8; k < kc; k++)
        for (int r = 0; r < 16; r++) P[k][r] = widen1(rows[r][k0 + k], bf);
}

/* X[k * 6 + u] = x[u][k] for k < kc: 4 elements of the 6 rows at a time. */
static void pack_x6(const float *const x[MR], int kc, float *X) {
    int k = 0;
    for (; k + 4 <= kc; k += 4) {
        __m128 a = _mm_loadu_ps(x[0] + k), b = _mm_loadu_ps(x[1] + k), c = _mm_loadu_ps(x[2] + k),
               d = _mm_loadu_ps(x[3] + k);
        const __m128 e = _mm_loadu_ps(x[4] + k), f = _mm_loadu_ps(x[5] + k);
        _MM_TRANSPOSE4_PS(a, b, c, d); /* a: x[0..3][k], b: x[0..3][k + 1], ... */
        const __m128 lo = _mm_unpacklo_ps(e, f), hi = _mm_unpackhi_ps(e, f);
        float *o = X + 6 * k;
        _mm_storeu_ps(o, a);
        _mm_storel_pi((__m64 *)(void *)(o + 4), lo);
        _mm_storeu_ps(o + 6, b);
        _mm_storeh_pi((__m64 *)(void *)(o + 10), lo);
        _mm_storeu_ps(o + 12, c);
        _mm_storel_pi((__m64 *)(void *)(o + 16), hi);
        _mm_storeu_ps(o + 18, d);
        _mm_storeh_pi((__m64 *)(void *)(o + 22), hi);
    }
    for (; k < kc; k++)
        for (int u = 0; u < MR; u++) X[6 * k + u] = x[u][k];
}

/* x row of token t0 + t + u, from element k0; a short group (t + u >= nt)
 * repeats its last token */
AINLINE const float *x_row(const void *act, size_t act_stride, int t0, int t, int u, int nt, int64_t k0) {
    const int tok = t + u < nt ? t + u : nt - 1;
    return (const float *)(const void *)((const uint8_t *)act + (size_t)(t0 + tok) * act_stride) + k0;
}

/* The group of the 6 tokens from t0 + t into X + t * kc. */
AINLINE void pack_group(const void *act, size_t act_stride, int t0, int t, int nt, int64_t k0, int kc, float *X) {
    const float *x[MR];
    for (int u = 0; u < MR; u++) x[u] = x_row(act, act_stride, t0, t, u, nt, k0);
    pack_x6(x, kc, X + (size_t)t * kc);
}

/* c[u][0..15] (u < 6, rows of ldc floats) = (init ? 0 : c) + sum over the
 * chunk of P[k] X[k][u]; prefetches the 6 rows of pf (ldc apart) unless
 * NULL. */
static void micro6x16(const float (*P)[16], int kc, const float *X, float *c, int64_t ldc, int init,
                      const float *pf) {
    __m256 a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51;
    if (init) {
        a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = _mm256_setzero_ps();
    } else {
#define LD(u) a##u##0 = _mm256_loadu_ps(c + (u) * ldc), a##u##1 = _mm256_loadu_ps(c + (u) * ldc + 8);
        LD(0) LD(1) LD(2) LD(3) LD(4) LD(5)
#undef LD
    }
    if (pf)
        for (int u = 0; u < MR; u++) _mm_prefetch((const char *)(pf + u * ldc), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(P[k]), w1 = _mm256_load_ps(P[k] + 8);
#define FM(u)                                                  \
    {                                                          \
        const __m256 b = _mm256_broadcast_ss(X + 6 * k + (u)); \
        a##u##0 = _mm256_fmadd_ps(w0, b, a##u##0);             \
        a##u##1 = _mm256_fmadd_ps(w1, b, a##u##1);             \
    }
        FM(0) FM(1) FM(2) FM(3) FM(4) FM(5)
#undef FM
    }
#define ST(u) _mm256_storeu_ps(c + (u) * ldc, a##u##0), _mm256_storeu_ps(c + (u) * ldc + 8, a##u##1);
    ST(0) ST(1) ST(2) ST(3) ST(4) ST(5)
#undef ST
}

/* The activation chunks X of a tile: at most TT tokens of KC elements (the
 * tiles hold tt <= TT tokens, see gemm_half), and 64 bytes to align X to a
 * cache line. */
size_t vx_gemm_half_scratch_avx2(int64_t n) {
    return (size_t)TT * (size_t)(n < KC ? n : KC) * sizeof(float) + 64;
}

AINLINE void gemm_half(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                      size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    if (ntok < MIN_TOK_HALF || !scratch) {
        /* few tokens (the panels would not pay back), or no scratch: the
         * gemv per token (the same results to rounding) */
        gemv_tokens(bf ? vx_gemv_bf16_avx2 : vx_gemv_f16_avx2, n, w, stride, nrows, act, act_stride, ntok, out,
                    ldo, accumulate);
        return;
    }
    _Alignas(64) float P[KC][16];
    _Alignas(64) float T[16 * KC]; /* pack16's rows */
    float tmp[MR][16]; /* a partial block (fewer rows or tokens) works here */
    /* tiles of equal size, at most TT tokens */
    const int ntiles = (ntok + TT - 1) / TT;
    const int tt = ((ntok + ntiles - 1) / ntiles + MR - 1) / MR * MR;
    float *X = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63); /* [tt][KC] at most */
    const int nlines_row = (KC * 2 + 63) / 64; /* cache lines of a panel's row */
    for (int t0 = 0; t0 < ntok; t0 += tt) {
        const int nt = ntok - t0 < tt ? ntok - t0 : tt;
        const int ngroups = (nt + MR - 1) / MR;
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int kc = (int)(n - k0 < KC ? n - k0 : KC);
            const int init = k0 == 0 && !accumulate;
            for (int t = 0; t < nt; t += MR) pack_group(act, act_stride, t0, t, nt, k0, kc, X);
            for (int r0 = 0; r0 < nrows; r0 += 16) {
                const int R = nrows - r0 < 16 ? nrows - r0 : 16;
                const uint16_t *rows[16]; /* a short block repeats its last row */
                for (int r = 0; r < 16; r++) rows[r] = row_at(w, stride, r0 + (r < R ? r : R - 1));
                pack16(rows, k0, kc, bf, P, T);
                /* the panel PFD ahead (row blocks, then the next chunk's) */
                const int nblk = (nrows + 15) / 16, pb = r0 / 16 + PFD;
                const int pr0 = pb % nblk * 16;
                const int64_t pk0 = k0 + (int64_t)(pb / nblk) * KC;
                const int pR = nrows - pr0 < 16 ? nrows - pr0 : 16;
                const int pkc = (int)(n - pk0 < KC ? n - pk0 : KC);
                const int plines = pk0 < n ? 16 * ((pkc * 2 + 63) / 64) : 0;
                const int pper = (plines + ngroups - 1) / ngroups;
                int pl = 0;
                for (int t = 0; t < nt; t += MR) {
                    for (int i = 0; i < pper && pl < plines; i++, pl++) {
                        const int r = pl / nlines_row < pR ? pl / nlines_row : pR - 1;
                        const size_t off = (size_t)pk0 * 2 + (size_t)(pl % nlines_row) * 64;
                        if (off < (size_t)(pk0 + pkc) * 2)
                            _mm_prefetch((const char *)row_at(w, stride, pr0 + r) + off, _MM_HINT_T0);
                    }
                    const int U = nt - t < MR ? nt - t : MR;
                    const float *Xg = X + (size_t)t * kc;
                    float *c = out + (int64_t)(t0 + t) * ldo + r0;
                    /* the output rows of the next micro-kernel */
                    const float *pf = NULL;
                    if (!init) {
                        if (t + 2 * MR <= nt)
                            pf = c + MR * ldo;
                        else if (t + MR >= nt && r0 + 32 <= nrows)
                            pf = out + (int64_t)t0 * ldo + r0 + 16;
                    }
                    if (U == MR && R == 16) {
                        micro6x16((const float(*)[16])P, kc, Xg, c, ldo, init, pf);
                        continue;
                    }
                    for (int u = 0; u < MR; u++)
                        for (int r = 0; r < 16; r++) tmp[u][r] = u < U && r < R && !init ? c[u * ldo + r] : 0.0f;
                    micro6x16((const float(*)[16])P, kc, Xg, tmp[0], 16, 0, NULL);
                    for (int u = 0; u < U; u++)
                        for (int r = 0; r < R; r++) c[u * ldo + r] = tmp[u][r];
                }
            }
        }
    }
}

void vx_gemm_f16_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act, size_t act_stride,
                      int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    gemm_half(0, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
}
void vx_gemm_bf16_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act, size_t act_stride,
                       int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    gemm_half(1, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
}
