/* kernels_x86.h - declarations of the per-ISA kernels (src/x86/<isa>_*.c,
 * each compiled with its own -m flags; called only after CPU dispatch). */
#ifndef VX_KERNELS_X86_H
#define VX_KERNELS_X86_H

#include <math.h>
#include <stdint.h>

#include "matmul.h"

/* The fused decode kernels' (AVX2, AVX-512) online-softmax step per row,
 * one code for both tiers' bits: the correction exp(m_old - m_new) (1 when
 * the max did not move), l = l c + the row's sum sm, the max updated. */
static inline void vx_attn_rows_rescale(int64_t nr, const float *mold, const float *mnew, const float *sm,
                                        float *corr, float *l, float *mx) {
    for (int64_t i = 0; i < nr; i++) {
        const float c = mold[i] == mnew[i] ? 1.0f : expf(mold[i] - mnew[i]);
        corr[i] = c;
        l[i] = l[i] * c + sm[i];
        mx[i] = mnew[i];
    }
}

float vx_dot_f32_avx2(const float *a, const float *b, int64_t n);
void vx_axpy_f32_avx2(float *y, float a, const float *x, int64_t n);
void vx_f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n);
void vx_swiglu_avx2(float *g, const float *u, int64_t n);
void vx_geglu_avx2(float *g, const float *u, int64_t n);
void vx_rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps);
void vx_rope_avx2(float *v, const float *cs, int32_t n_rot, int kind);
float vx_exp_shift_sum_avx2(float *x, int64_t n, float m);
void vx_f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n);
/* attention blocks (avx2_ops.c; contracts in ops.h) */
void vx_q8_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void vx_gemm_f32_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float *c, int64_t ldc, const float *alpha);
void vx_gemm_f16b_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const uint16_t *b,
                       int64_t ldb, float *c, int64_t ldc, const float *alpha);
void vx_gemm_abt_f32_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                          int64_t ldb, float *c, int64_t ldc);
void vx_gemm_abt_f16b_avx2(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda,
                           const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
void vx_attn_softmax16_avx2(float *s, int64_t m, const int32_t *nv, float scale, float *mx, float *l,
                            float *corr);
void vx_softcap_avx2(float *x, int64_t n, float in, float out);
void vx_attn_dec_f16_avx2(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *k,
                          const uint16_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint16_t *kx,
                          const uint16_t *vx, float scale, float cap, float *mx, float *l, float *o);

/* peak-throughput loops (machine.c): return a value so the work is kept */
double vx_peak_fma_avx2(int64_t iters);   /* 80 FMA lanes x 2 flops per iteration */
double vx_peak_int8_avx2(int64_t iters);  /* 8 x 32 int8 multiply-adds per iteration */

/* ---- quantization kernels (avx2_quant.c, avx2_quant_k.c) -------------
 * Same contracts as the reference kernels in quant_ref.h: n is a multiple
 * of the block size (trailing partial blocks are ignored), activations come
 * from the matching quantizer (codes in [-127, 127]). vec_dot and the
 * quantizers have the traits-table signatures; every gemv has one shared
 * signature: out[r] = dot(row r, y) for r < nrows, row r starting at
 * w_rows + r * row_stride bytes, y one quantized activation row (an f32
 * row for F16/BF16). */
#include <stddef.h>

void vx_quantize_row_q8_0_avx2(const float *src, void *dst, int64_t n);
void vx_quantize_row_q8_1_avx2(const float *src, void *dst, int64_t n);
void vx_quantize_row_q8_K_avx2(const float *src, void *dst, int64_t n);

void vx_vec_dot_q4_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q4_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q5_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q5_1_q8_1_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q8_0_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_iq4_nl_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_mxfp4_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q2_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q3_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q4_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q5_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q6_K_q8_K_avx2(int64_t n, float *s, const void *x, const void *y);

/* F16 / BF16 weights (n any length) against f32 activations. */
float vx_dot_f16_f32_avx2(int64_t n, const uint16_t *w, const float *x);
float vx_dot_bf16_f32_avx2(int64_t n, const uint16_t *w, const float *x);

void vx_gemv_q4_0_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q4_1_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q5_0_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q5_1_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q8_0_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_iq4_nl_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                         float *out);
void vx_gemv_mxfp4_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                        float *out);
void vx_gemv_q2_K_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q3_K_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q4_K_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q5_K_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_q6_K_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
void vx_gemv_f16_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                      float *out);
void vx_gemv_bf16_avx2(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,
                       float *out);
/* the grid i-quants (avx2_iq.c; avx512_iq.c below): Q8_K activations; the
 * GEMM gives the gemv's bits. One list of them for the declarations, the
 * definitions and the tables (cpu.c, avx512_init.c). */
#define VX_IQ_GRID_KERNELS(X) \
    X(IQ2_XXS, iq2_xxs) X(IQ2_XS, iq2_xs) X(IQ2_S, iq2_s) X(IQ3_XXS, iq3_xxs) X(IQ3_S, iq3_s) \
    X(IQ1_S, iq1_s) X(IQ1_M, iq1_m)
#define VX_IQ_DECL(name, S)                                                                                   \
    void vx_gemv_##name##_##S(int64_t n, const void *w_rows, size_t row_stride, int nrows, const void *y,      \
                              float *out);                                                                     \
    void vx_gemm_##name##_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,         \
                              size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,           \
                              void *scratch);
#define VX_IQ_DECL_ALL(T, name) VX_IQ_DECL(name, avx2) VX_IQ_DECL(name, avx512) VX_IQ_DECL(name, avx512emu)
VX_IQ_GRID_KERNELS(VX_IQ_DECL_ALL)
#undef VX_IQ_DECL_ALL
#undef VX_IQ_DECL
/* ---- end of quantization kernels -------------------------------------- */

/* ---- prefill GEMM kernels (avx2_gemm.c, avx2_gemm_k.c) -----------------
 * out[t * ldo + r] = dot(row r, activation row t) for r < nrows and
 * t < ntok (out[...] += ... with accumulate): rows row_stride bytes apart
 * as in gemv, activation row t at act + t * act_stride bytes (quantized
 * as for gemv; f32 for F16). Each weight block is unpacked once per group
 * of 8 rows and token tile and reused for every token; results equal the
 * gemv's (bit for bit for the quantized types, to rounding for F16). The kernel
 * types vx_gemv_fn / vx_gemm_fn are matmul.h's; only the F16/BF16 GEMM uses
 * its scratch (the others ignore it). */
void vx_gemm_q4_0_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q5_0_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q8_0_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q4_1_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q5_1_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_iq4_nl_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_mxfp4_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q4_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q6_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q5_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q3_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q2_K_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
/* the 8-row packed layouts (quant.h) */
void vx_gemv_q4_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q6_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q5_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q3_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q2_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_tq2_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q4_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q5_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q8_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q4_1_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q5_1_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_iq4_nl_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_mxfp4_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemm_q4_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q5_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q8_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q4_1_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q5_1_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_iq4_nl_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_mxfp4_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q4_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q6_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q5_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q3_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_q2_K_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_tq2_0_r8_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                           size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_f16_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                      size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
void vx_gemm_bf16_avx2(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,
                       size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
/* Scratch bytes of the F16/BF16 GEMM for rows of n elements (its packed
 * activations, ~258 KiB from n = 256 on): given NULL, it runs the gemv per
 * token instead. Any other kernel of the AVX2 table takes none, so this is
 * the table's gemm_scratch. */
size_t vx_gemm_half_scratch_avx2(int64_t n);
/* ---- end of prefill GEMM kernels -------------------------------------- */

/* ---- AVX-512 VNNI tier (src/x86/avx512_*.c) ----------------------------
 * Compiled twice (isa512.h): natively (suffix _avx512, call only when
 * vx_cpu_best_isa() >= VX_ISA_AVX512) and emulated with SIMDe over AVX2
 * (suffix _avx512emu, any AVX2 machine). Same contracts as the AVX2
 * kernels above, and the same bits (the canonical order). vx_kernels_add_*
 * replaces the entries this tier speeds up in a table filled for AVX2. */
struct vx_kernels;
#define VX_AVX512_KERNELS(S)                                                                                   \
    void vx_kernels_add_##S(struct vx_kernels *k);                                                             \
    double vx_peak_fma_##S(int64_t iters);  /* 160 FMA lanes x 2 flops per iteration */                       \
    double vx_peak_int8_##S(int64_t iters); /* 10 x 64 int8 multiply-adds per iteration */                     \
    void vx_gemv_q4_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q5_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q8_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemm_q4_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q5_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q8_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q4_1_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q5_1_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_iq4_nl_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,         \
                               size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,           \
                               void *scratch);                                                                 \
    void vx_gemm_mxfp4_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,          \
                              size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,            \
                              void *scratch);                                                                  \
    void vx_gemv_q4_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q6_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    /* the same with the 6-bit codes built by GFNI affine byte maps (CPUs with GFNI; same bits) */             \
    void vx_gemv_q6_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,        \
                                  float *out);                                                                 \
    void vx_gemv_q5_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q5_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,        \
                                  float *out);                                                                 \
    void vx_gemv_q4_1_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q5_1_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_iq4_nl_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,           \
                               float *out);                                                                    \
    void vx_gemv_mxfp4_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,            \
                              float *out);                                                                     \
    /* the same six with two far 8-row groups per turn instead of four (cpu.c) */                             \
    void vx_gemv_q4_0_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,          \
                                float *out);                                                                   \
    void vx_gemv_q5_0_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,          \
                                float *out);                                                                   \
    void vx_gemv_q8_0_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,          \
                                float *out);                                                                   \
    void vx_gemv_q4_1_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,          \
                                float *out);                                                                   \
    void vx_gemv_q5_1_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,          \
                                float *out);                                                                   \
    void vx_gemv_iq4_nl_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,        \
                                  float *out);                                                                 \
    void vx_gemv_mxfp4_r8_g2_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,         \
                                 float *out);                                                                  \
    /* the Q8_0-activation ones on an activation table (matmul.h's vx_act_tab) */                               \
    void vx_gemm_tab_q4_0_r8_##S(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab,           \
                               float *out, int64_t ldo, int accumulate);                                   \
    void vx_gemm_tab_q5_0_r8_##S(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab,           \
                               float *out, int64_t ldo, int accumulate);                                   \
    void vx_gemm_tab_q8_0_r8_##S(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab,           \
                               float *out, int64_t ldo, int accumulate);                                   \
    void vx_gemm_tab_iq4_nl_r8_##S(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab,           \
                               float *out, int64_t ldo, int accumulate);                                   \
    void vx_gemm_tab_mxfp4_r8_##S(const void *w, size_t row_stride, int nrows, const vx_act_tab *tab,          \
                                  float *out, int64_t ldo, int accumulate);                                \
    void vx_gemv_q3_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q3_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,        \
                                  float *out);                                                                 \
    void vx_gemv_q2_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_q2_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,        \
                                  float *out);                                                                 \
    void vx_gemv_tq2_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out); \
    void vx_gemv_tq2_0_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *y,       \
                                   float *out);                                                                \
    void vx_gemm_q4_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q6_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    /* Q5_K, Q3_K (plain and GFNI, as their gemvs) and Q2_K */                                               \
    void vx_gemm_q5_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q5_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,      \
                                  size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,        \
                                  void *scratch);                                                              \
    void vx_gemm_q3_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q3_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,      \
                                  size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,        \
                                  void *scratch);                                                              \
    void vx_gemm_q2_K_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,             \
                             void *scratch);                                                                   \
    void vx_gemm_q2_K_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,      \
                                  size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,        \
                                  void *scratch);                                                              \
    void vx_gemm_tq2_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,          \
                              size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,            \
                              void *scratch);                                                                  \
    void vx_gemm_tq2_0_r8_gfni_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,     \
                                   size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate,       \
                                   void *scratch);                                                             \
    /* F16 / BF16 x f32: 2-15 tokens here, others the AVX2 GEMM (avx512_half.c) */                             \
    void vx_gemm_f16_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,               \
                         size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    void vx_gemm_bf16_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,              \
                          size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    /* SwiGLU, the AVX2 kernel's bits (avx512_ops.c) */                                                       \
    void vx_swiglu_##S(float *g, const float *u, int64_t n);                                                   \
    void vx_geglu_##S(float *g, const float *u, int64_t n);                                                    \
    /* fused decode attention, F16 / Q8_0 cache: GQA groups <= 8, head dim 64 / 128 / 256 (avx512_attn.c) */    \
    void vx_attn_dec_f16_##S(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *k,              \
                             const uint16_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n,                  \
                             const uint16_t *kx, const uint16_t *vx,                                            \
                             float scale, float cap, float *mx, float *l, float *o);                            \
    int vx_attn_dec_q8_0_##S(int64_t nh, int64_t g, int64_t hd, const float *q, const uint8_t *k,               \
                             const uint8_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n,                   \
                             const uint8_t *kx, const uint8_t *vx,                                              \
                             float scale, float cap, float *mx, float *l, float *o);
VX_AVX512_KERNELS(avx512)
VX_AVX512_KERNELS(avx512emu)

/* prefill tile attention on fp32 FMAs (avx512_attn_tiles.c, native only):
 * the attn_tiles_* contract of ops.h */
void vx_attn_tiles_begin_avx512(void *st, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq, int32_t p0,
                                float scale, float softcap, int32_t window);
void vx_attn_tiles_step_avx512(void *st, int32_t c0, int32_t np, const uint16_t *const *k, const uint16_t *const *v,
                               int64_t ld);
void vx_attn_tiles_end_avx512(void *st, float *out, int64_t ldo);
/* F16 (bf 0) / BF16 (bf 1) prefill GEMM on zmm FMAs, 16 tokens and more
 * (avx512_gemm_half.c, native only): vx_gemm_fn's contract with bf first;
 * scratch of vx_gemm_half_scratch_avx2 bytes, required */
void vx_gemm_half_avx512(int bf, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                         size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
/* BF16 weights on vdpbf16ps (AMD's AVX512-BF16 CPUs, Zen 4/5, where it
 * does twice the fp32 FMA's work per cycle), 16 tokens and more with
 * scratch: activations rounded to bf16 as the AMX tiles do (error up to
 * 2^-8 of sum |w x|); fewer tokens as vx_gemm_bf16_avx512 */
void vx_gemm_bf16_dp_avx512(int64_t n, const void *w, size_t stride, int nrows, const void *act, size_t act_stride,
                            int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
/* ---- end of AVX-512 tier ---------------------------------------------- */

#endif
