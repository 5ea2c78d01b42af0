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
/* The Q8_0 activation rows of a matmul input (ntok rows of n elements,
 * stride bytes apart at act) as the table of tiles the AVX-512 GEMMs of the
 * packed 32-element types with Q8_0 activations (Q4_0, Q5_0, Q8_0, IQ4_NL
 * _R8) read: built once per input (forward.c's prep, each thread its
 * tokens) instead of once per GEMM call, that is per chunk of rows and per
 * weight the input feeds. Entry vx_act_tab_entry(nb, t, b) of token t and
 * block b (nb = n / 32 blocks a row): tokens in groups of 8, a group's
 * blocks one after the other; the last group's pad entries copy token
 * ntok - 1. */
typedef struct vx_act_tab {
    const void *act;      /* the rows it was made from */
    size_t stride;        /* their stride in bytes */
    int64_t n, ntok;      /* elements a row, rows */
    uint8_t (*codes)[32]; /* per entry: the block's 32 codes */
    float *dy;            /* its scale */
    int32_t *nc[3];       /* -8, -16, -128 times the sum of its codes (the
                           * Q4_0, Q5_0 and Q8_0 / IQ4_NL code offsets) */
} vx_act_tab;
static inline size_t vx_act_tab_entry(int64_t nb, int64_t t, int64_t b) {
    return ((size_t)(t >> 3) * (size_t)nb + (size_t)b) * 8 + (size_t)(t & 7);
}
/* Entries of a table of ntok tokens of n elements (tokens rounded up to 8). */
size_t vx_act_tab_entries(int64_t n, int64_t ntok);
/* Bytes of the buffers of a table of that many entries, and the table's
 * arrays pointed into mem (that many bytes, 64-byte aligned or as malloc's). */
size_t vx_act_tab_bytes(size_t entries);
void vx_act_tab_bind(vx_act_tab *T, void *mem, size_t entries);
/* Fills the entries of tokens [t0, t1) and blocks [b0, b1) from T->act,
 * and the pad entries of those blocks when t1 == T->ntok. */
void vx_act_tab_fill(const vx_act_tab *T, int64_t t0, int64_t t1, int64_t b0, int64_t b1);
/* vx_gemm_fn with the activations as a table: act = tab->act, act_stride =
 * tab->stride, ntok = tab->ntok, n = tab->n; the same bits. */
typedef void (*vx_gemm_tab_fn)(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab, float *out,
                               int64_t ldo, int accumulate);

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
