/*
 * matmul.h - y = W x for every weight type, the way decode and prefill run
 * it: activations are converted once per row to the type the weight's dot
 * product pairs with (Q8_0 / Q8_1 / Q8_K for quantized weights, f32 for
 * F32/F16/BF16 weights), then per-type GEMV kernels stream weight rows and
 * dot them with every token's activation row. Weights are never expanded
 * to f32 in memory.
 */
#ifndef VX_MATMUL_H
#define VX_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* out[i] = dot(row i of w, y) for i in [0, nrows): n elements per row, rows
 * row_stride bytes apart, y in the weight's activation type. */
typedef void (*vx_gemv_fn)(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,
                           float *out);
/* out[t * ldo + r] = dot(row r of w, activation row t) for r < nrows and
 * t < ntok (with accumulate: out[t * ldo + r] += dot), activation rows
 * act_stride bytes apart: gemv for many tokens, unpacking each weight
 * block once for all of them. scratch: the calling thread's own buffer of
 * the kernel table's gemm_scratch(n) bytes (ops.h), or NULL (a kernel that
 * needs one then runs the gemv per token). */
typedef void (*vx_gemm_fn)(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                           size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
/* out[t * ldo + r] (+)= dot(row r of w, x[t]) for r < nrows, t < ntok with
 * weights of any type (type: file or packed layout, rows rs bytes apart, K
 * elements, K a multiple of 32) and bf16 activation rows xa, xstride bytes
 * apart, of which ntok rounded up to 32 must be readable; xl: NULL, or the
 * rows' remainders x - bf16(x) in the same layout, for about 16 significant
 * bits instead of 8 (F16 weights); scratch as the kernel's table says. */
typedef void (*vx_gemm_bf16_fn)(int type, int64_t K, const void *w, size_t rs, int nrows, const uint16_t *xa,
                                const uint16_t *xl, size_t xstride, int ntok, float *out, int64_t ldo, int acc,
                                void *scratch);
/* g[i] = silu(g[i]) u[i] (the kernel table's swiglu). */
typedef void (*vx_glu_fn)(float *g, const float *u, int64_t n);
/* The gate and up projections of an FFN and their SwiGLU in one pass, on
 * AMX tiles: for rows [0, nrows) of both weights (wg, wu: the same type
 * and row size, as vx_gemm_bf16_fn's w) and ntok tokens,
 *   dst[t][r] = bf16(glu(gate[t][r], up[t][r]))   (t < ntok, r < nrows)
 * with rows ldd values apart, and with dlo the remainders bf16(v - dst)
 * too (an F16 down projection's input): the bits of the two GEMMs, glu
 * over their outputs and the table's f32_to_bf16. pg, pu ([ntok][ldp]
 * floats) hold partial sums between K chunks (K > 2048); scratch as
 * vx_gemm_bf16_fn's. */
typedef void (*vx_gemm_glu_fn)(int type, int64_t K, const void *wg, const void *wu, size_t rs, int nrows,
                               const uint16_t *xa, const uint16_t *xl, size_t xstride, int ntok, float *pg,
                               float *pu, int64_t ldp, vx_glu_fn glu, uint16_t *dst, uint16_t *dlo, size_t ldd,
                               void *scratch);
/* Converts n floats to an activation row (n a multiple of the block size). */
typedef void (*vx_act_fn)(const float *x, void *y, int64_t n);

/* Activation type of a weight type: VX_TYPE_F32 for float weights. */
int vx_act_type(int weight_type);
/* Bytes of an activation row of n elements of a weight type. */
size_t vx_act_row_size(int weight_type, int64_t n);

/* Reference kernels (plain C, through the traits table). */
void vx_gemv_ref(int weight_type, int64_t n, const void *w, size_t row_stride, int nrows,
                 const void *y, float *out);
/* Fills gemv[weight type] and act[activation type] with the references. */
void vx_matmul_kernels_ref(vx_gemv_fn *gemv, vx_act_fn *act);

#endif
