/*
 * avx2_gemm_half.c - prefill GEMM for F16 and BF16 weights x f32
 * activations (compiled with -mavx2 -mfma -mf16c -mbmi2).
 *
 * The classic register-blocked scheme: 16 weight rows at a time are
 * widened to f32 and transposed, a chunk of KC elements at a time, into a
 * panel P[k][16] (16 KiB, L1); a 6-token x 16-row micro-kernel then keeps
 * 12 accumulators in registers and per element k loads two panel vectors
 * (rows 0..7, 8..15), broadcasts the 6 tokens' x[k] and issues 12 FMAs:
 * 8 loads per 12 FMAs, so the two FMA pipes set the pace, and every
 * weight value converted serves all the tokens of the tile.
 *
 * Loop order: token tile (TT tokens) > chunk of KC elements > 16-row block
 * > 6 tokens. The tile's activations for one chunk (TT x KC floats,
 * 256 KiB) stay in L2 while every row block passes over them; partial sums
 * live in the output itself between chunks (each (token, row) is one chain
 * of FMAs in ascending k). Each weight row is widened once per token tile.
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
#define TT 252 /* tokens per tile, a multiple of 6: x chunk 252 KiB */
#endif
#define MR 6   /* tokens per micro-kernel */
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

/* In-register 8x8 transpose of floats (v[i] row i in, column i out): the
 * dword transpose of avx2_quant_util.h on the same bits. */
AINLINE void transpose8_ps(__m256 v[8]) {
    __m256i t[8];
    for (int i = 0; i < 8; i++) t[i] = _mm256_castps_si256(v[i]);
    transpose8_epi32(t);
    for (int i = 0; i < 8; i++) v[i] = _mm256_castsi256_ps(t[i]);
}

/* Panel P[k][16] of elements [k0, k0 + kc) of 16 rows (rows[r]). */
AINLINE void pack16(const uint16_t *const rows[16], int64_t k0, int kc, int bf, float (*P)[16]) {
    int k = 0;
    for (; k + 8 <= kc; k += 8)
        for (int h = 0; h < 2; h++) {
            __m256 v[8];
            for (int r = 0; r < 8; r++) v[r] = widen8(rows[8 * h + r] + k0 + k, bf);
            transpose8_ps(v);
            for (int j = 0; j < 8; j++) _mm256_store_ps(&P[k + j][8 * h], v[j]);
        }
    for (; k < kc; k++)
        for (int r = 0; r < 16; r++) P[k][r] = widen1(rows[r][k0 + k], bf);
}

/* c[u][0..15] (u < 6, rows of ldc floats) = (init ? 0 : c) + sum over the
 * chunk of P[k] x[u][k]. */
static void micro6x16(const float (*P)[16], int kc, const float *const x[MR], float *c, int64_t ldc, int init) {
    __m256 a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51;
    if (init) {
        a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = _mm256_setzero_ps();
    } else {
#define LD(u) a##u##0 = _mm256_loadu_ps(c + (u) * ldc), a##u##1 = _mm256_loadu_ps(c + (u) * ldc + 8);
        LD(0) LD(1) LD(2) LD(3) LD(4) LD(5)
#undef LD
    }
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3], *x4 = x[4], *x5 = x[5];
    for (int k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(P[k]), w1 = _mm256_load_ps(P[k] + 8);
#define FM(u)                                                  \
    {                                                          \
        const __m256 b = _mm256_broadcast_ss(x##u + k);        \
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

static void gemm_half(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                      size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate) {
    _Alignas(32) float P[KC][16];
    float tmp[MR][16]; /* a partial block (fewer rows or tokens) works here */
    for (int t0 = 0; t0 < ntok; t0 += TT) {
        const int nt = ntok - t0 < TT ? ntok - t0 : TT;
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            const int kc = (int)(n - k0 < KC ? n - k0 : KC);
            const int init = k0 == 0 && !accumulate;
            for (int r0 = 0; r0 < nrows; r0 += 16) {
                const int R = nrows - r0 < 16 ? nrows - r0 : 16;
                const uint16_t *rows[16]; /* a short block repeats its last row */
                for (int r = 0; r < 16; r++) rows[r] = row_at(w, stride, r0 + (r < R ? r : R - 1));
                pack16(rows, k0, kc, bf, P);
                for (int t = 0; t < nt; t += MR) {
                    const int U = nt - t < MR ? nt - t : MR;
                    const float *x[MR]; /* a short group repeats its last token */
                    for (int u = 0; u < MR; u++)
                        x[u] = (const float *)(const void *)((const uint8_t *)act +
                                                             (size_t)(t0 + t + (u < U ? u : U - 1)) * act_stride) +
                               k0;
                    float *c = out + (int64_t)(t0 + t) * ldo + r0;
                    if (U == MR && R == 16) {
                        micro6x16((const float(*)[16])P, kc, x, c, ldo, init);
                        continue;
                    }
                    for (int u = 0; u < MR; u++)
                        for (int r = 0; r < 16; r++) tmp[u][r] = u < U && r < R && !init ? c[u * ldo + r] : 0.0f;
                    micro6x16((const float(*)[16])P, kc, x, tmp[0], 16, 0);
                    for (int u = 0; u < U; u++)
                        for (int r = 0; r < R; r++) c[u * ldo + r] = tmp[u][r];
                }
            }
        }
    }
}

DEFINE_GEMM_ENTRY(vx_gemm_f16_avx2, vx_gemv_f16_avx2, gemm_half, 0, MIN_TOK_HALF)
DEFINE_GEMM_ENTRY(vx_gemm_bf16_avx2, vx_gemv_bf16_avx2, gemm_half, 1, MIN_TOK_HALF)
