/*
 * avx512_half.c - F16 / BF16 weights x f32 activations for 2-15 tokens
 * (batched decoding of a few sequences, a speculative draft's tokens).
 * Compiled natively and emulated (isa512.h); registered in
 * avx512_init.c. Sixteen tokens and more go to a panel GEMM: natively
 * avx512_gemm_half.c's on zmm FMAs, emulated the AVX2 tier's
 * (avx2_gemm_half.c), the same bits (on AMX machines the forward pass
 * sends them to the tiles instead).
 *
 * The AVX2 tier runs these token counts as its GEMV once per token, 16
 * rows at a time (gemv_tokens: the rows stay in L1 for the next token),
 * so the weights stream from DRAM in 16-row pieces: batched decoding of
 * two sequences ran only 1.3x the speed of one (Llama-1B F16, 2 threads).
 * Here the GEMV's four far row streams (GEMV_DISPATCH) serve all the
 * tokens at once: each weight vector is converted once and multiplied
 * into every token's accumulators. The arithmetic per row and token is
 * the AVX2 GEMV's (the same half_rows4, avx2_quant_util.h: two 8-lane chains, a0 for
 * elements 0-7 and 16-23 of each 32, a1 for 8-15 and 24-31, then the same
 * tail), in 256-bit vectors: its very bits. With AVX-512VL the 32 ymm
 * registers hold the 3 tokens x 4 rows x 2 chains; under emulation
 * (16 registers) the same code spills, correct but slower.
 *
 * Over 3 tokens the weights are read once per pair of tokens (a last odd
 * three together): Llama-1B F16, 2 threads, aggregate t/s of batched
 * decoding, one pass of 2 tokens 27, of 3 24 (its FMAs, not DRAM, set the
 * pace), where the AVX2 GEMM's panels ran 4 tokens at 10-11, 8 at 18, 16
 * at 27 and 32 at 36 (VX_ISA=avx512, no tiles).
 */
#include "isa512.h"

#include <stddef.h>
#include <stdint.h>

#include "avx2_quant_util.h"
#include "kernels_x86.h"

#define HALF_MAX_TOK 15 /* from 16 tokens the AVX2 GEMM */

/* Results of token u, row r: written or (accumulate) added. */
AINLINE void put(float *out, int64_t ldo, int u, int r, float v, int accumulate) {
    float *o = out + u * ldo + r;
    *o = accumulate ? *o + v : v;
}

/* nt (2..3) tokens: rows in groups of 4 a quarter of the rows apart, as
 * GEMV_DISPATCH; the rows past 4q (and rows narrower than the GEMV's
 * VX_GEMV_WIDE_ROW) each through the AVX2 GEMV, one token at a time. */
AINLINE void half_tokens(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                         size_t act_stride, int nt, float *out, int64_t ldo, int accumulate) {
    const float *x[HALF_NT];
    for (int u = 0; u < nt; u++) x[u] = (const float *)(const void *)((const uint8_t *)act + (size_t)u * act_stride);
    const int q = gemv_quarter(stride, nrows);
    float o[HALF_NT][4];
    for (int i = 0; i < q; i++) {
        const uint16_t *rows[4];
        for (int k = 0; k < 4; k++) rows[k] = row_at(w, stride, i + k * q);
        if (nt == 2) half_rows4(n, rows, 2, x, bf, o);
        else half_rows4(n, rows, 3, x, bf, o);
        for (int u = 0; u < nt; u++)
            for (int k = 0; k < 4; k++) put(out, ldo, u, i + k * q, o[u][k], accumulate);
    }
    for (int r = 4 * q; r < nrows; r++)
        for (int u = 0; u < nt; u++) {
            float v;
            (bf ? vx_gemv_bf16_avx2 : vx_gemv_f16_avx2)(n, row_at(w, stride, r), stride, 1, x[u], &v);
            put(out, ldo, u, r, v, accumulate);
        }
}

/* ntok (2..HALF_MAX_TOK) tokens in passes of 2, the last one 2 or 3. */
AINLINE void half_passes(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                         size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate) {
    int t = 0;
    for (; ntok - t > 3; t += 2)
        half_tokens(bf, n, w, stride, nrows, (const uint8_t *)act + (size_t)t * act_stride, act_stride, 2,
                    out + t * ldo, ldo, accumulate);
    half_tokens(bf, n, w, stride, nrows, (const uint8_t *)act + (size_t)t * act_stride, act_stride, ntok - t,
                out + t * ldo, ldo, accumulate);
}

/* The entry points' shared body (bf: BF16 weights, else F16). */
AINLINE void half_gemm(int bf, int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    if (ntok >= 2 && ntok <= HALF_MAX_TOK)
        half_passes(bf, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate);
#ifndef VX_EMU /* natively, the panels on zmm FMAs (avx512_gemm_half.c: the AVX2 GEMM's bits) */
    else if (ntok > HALF_MAX_TOK && scratch)
        vx_gemm_half_avx512(bf, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
#endif
    else
        (bf ? vx_gemm_bf16_avx2 : vx_gemm_f16_avx2)(n, w, row_stride, nrows, act, act_stride, ntok, out, ldo,
                                                    accumulate, scratch);
}

void VX512(vx_gemm_f16)(int64_t n, const void *w, size_t row_stride, int nrows, const void *act, size_t act_stride,
                        int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    half_gemm(0, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
}

void VX512(vx_gemm_bf16)(int64_t n, const void *w, size_t row_stride, int nrows, const void *act, size_t act_stride,
                         int ntok, float *out, int64_t ldo, int accumulate, void *scratch) {
    half_gemm(1, n, w, row_stride, nrows, act, act_stride, ntok, out, ldo, accumulate, scratch);
}
