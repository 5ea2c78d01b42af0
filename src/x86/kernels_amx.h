/* kernels_amx.h - the AMX prefill GEMM (amx_gemm.c), natively (*_amx,
 * only after CPU dispatch found AMX and the OS granted the tile state) and
 * emulated (*_amxemu, any x86 with AVX2: amx_emu.h and SIMDe). */
#ifndef VX_KERNELS_AMX_H
#define VX_KERNELS_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "matmul.h"

/* vx_gemm_bf16_fn (matmul.h); scratch: vx_gemm_amx_scratch(K) bytes. */
void vx_gemm_amx_amx(int type, int64_t K, const void *w, size_t rs, int nrows, const uint16_t *xa,
                     const uint16_t *xl, size_t xstride, int ntok, float *out, int64_t ldo, int acc,
                     void *scratch);
void vx_gemm_amx_amxemu(int type, int64_t K, const void *w, size_t rs, int nrows, const uint16_t *xa,
                        const uint16_t *xl, size_t xstride, int ntok, float *out, int64_t ldo, int acc,
                        void *scratch);
/* vx_gemm_glu_fn (matmul.h); the same scratch. */
void vx_gemm_amx_glu_amx(int type, int64_t K, const void *wg, const void *wu, size_t rs, int nrows,
                         const uint16_t *xa, const uint16_t *xl, size_t xstride, int ntok, float *pg, float *pu,
                         int64_t ldp, vx_glu_fn glu, uint16_t *dst, uint16_t *dlo, size_t ldd, void *scratch);
void vx_gemm_amx_glu_amxemu(int type, int64_t K, const void *wg, const void *wu, size_t rs, int nrows,
                            const uint16_t *xa, const uint16_t *xl, size_t xstride, int ntok, float *pg, float *pu,
                            int64_t ldp, vx_glu_fn glu, uint16_t *dst, uint16_t *dlo, size_t ldd, void *scratch);
size_t vx_gemm_amx_scratch_amx(int64_t K);
size_t vx_gemm_amx_scratch_amxemu(int64_t K);
/* f32 -> bf16 (nearest even); with lo, also the remainders
 * bf16(src - bf16(src)) */
void vx_f32_to_bf16_amx(const float *src, uint16_t *dst, uint16_t *lo, int64_t n);
void vx_f32_to_bf16_amxemu(const float *src, uint16_t *dst, uint16_t *lo, int64_t n);

/* vx_gemm_fn (matmul.h) of the packed 32-element types x Q8_0 / Q8_1 on
 * int8 tiles (amx_gemm_i8.c): the bits of the AVX-512 GEMM, for few
 * tokens */
#define VX_GEMM_I8_DECL(S)                                                                                       \
    void vx_gemm_q4_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    void vx_gemm_q5_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    void vx_gemm_q8_0_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    void vx_gemm_q4_1_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    void vx_gemm_q5_1_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,           \
                             size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch); \
    void vx_gemm_iq4_nl_r8_##S(int64_t n, const void *w, size_t row_stride, int nrows, const void *act,         \
                               size_t act_stride, int ntok, float *out, int64_t ldo, int accumulate, void *scratch);
VX_GEMM_I8_DECL(amx)
VX_GEMM_I8_DECL(amxemu)
#undef VX_GEMM_I8_DECL

/* the tile attention (ops.h attn_tiles_*) */
void vx_attn_tiles_begin_amx(void *st, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq, int32_t p0,
                             float scale, float softcap, int32_t window);
void vx_attn_tiles_begin_amxemu(void *st, int64_t rows, int64_t g, int64_t hd, const float *q, int64_t ldq,
                                int32_t p0, float scale, float softcap, int32_t window);
void vx_attn_tiles_step_amx(void *st, int32_t c0, int32_t np, const uint16_t *const *k, const uint16_t *const *v,
                            int64_t ld);
void vx_attn_tiles_step_amxemu(void *st, int32_t c0, int32_t np, const uint16_t *const *k,
                               const uint16_t *const *v, int64_t ld);
void vx_attn_tiles_end_amx(void *st, float *out, int64_t ldo);
void vx_attn_tiles_end_amxemu(void *st, float *out, int64_t ldo);

/* peak loop (machine.c): iters x 65536 flops */
double vx_peak_amx_bf16_amx(int64_t iters);
double vx_peak_amx_bf16_amxemu(int64_t iters);

#endif
