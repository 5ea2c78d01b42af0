/*
 * quant_ref.h - internal prototypes of the plain-C reference kernels behind
 * the traits table (quant.c): dequantize, quantize and dot product per type.
 *
 * quant_legacy.c owns F32/F16/BF16, the 32-element block types and IQ4_NL;
 * quant_k.c owns the 256-element K-quants and Q8_K. All functions take a
 * count n that must be a multiple of the type's block size (callers check
 * it via the traits table; the kernels only process whole blocks).
 */
#ifndef VX_QUANT_REF_H
#define VX_QUANT_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

/* Round to the nearest integer (ties to even) with the result forced into
 * [lo, hi], for code ranges well inside +-2^22. NaN goes to lo: the
 * conversion stays defined for any input, so garbage in never means UB.
 * Adding 1.5 * 2^23 moves v into [2^23, 2^24), where floats are spaced 1
 * apart, so the addition itself does the rounding and the low mantissa bits
 * hold the integer: much cheaper than lrintf, which is a libm call here. */
static inline int vx_q_round_clamp(float v, int lo, int hi) {
    /* written as selects (maxss/minss), not branches: quantizer searches
     * call this in their innermost loops with unpredictable outcomes */
    v = v > (float)lo ? v : (float)lo; /* NaN -> lo */
    v = v < (float)hi ? v : (float)hi;
    float t = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (int)(bits & 0x007FFFFF) - 0x00400000;
}

/* ------------------------------------------------------ quant_legacy.c */
void vx_dequantize_row_f32(const void *src, float *dst, int64_t n);
void vx_dequantize_row_f16(const void *src, float *dst, int64_t n);
void vx_dequantize_row_bf16(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q8_1(const void *src, float *dst, int64_t n);
void vx_dequantize_row_iq4_nl(const void *src, float *dst, int64_t n);
void vx_dequantize_row_mxfp4(const void *src, float *dst, int64_t n);
void vx_dequantize_row_iq4_xs(const void *src, float *dst, int64_t n);

void vx_quantize_row_f32(const float *src, void *dst, int64_t n);
void vx_quantize_row_f16(const float *src, void *dst, int64_t n);
void vx_quantize_row_bf16(const float *src, void *dst, int64_t n);
void vx_quantize_row_q4_0(const float *src, void *dst, int64_t n);
void vx_quantize_row_q4_1(const float *src, void *dst, int64_t n);
void vx_quantize_row_q5_0(const float *src, void *dst, int64_t n);
void vx_quantize_row_q5_1(const float *src, void *dst, int64_t n);
void vx_quantize_row_q8_0(const float *src, void *dst, int64_t n);
void vx_quantize_row_q8_1(const float *src, void *dst, int64_t n);
void vx_quantize_row_iq4_nl(const float *src, void *dst, int64_t n);
void vx_quantize_row_mxfp4(const float *src, void *dst, int64_t n);
void vx_quantize_row_iq4_xs(const float *src, void *dst, int64_t n);

void vx_vec_dot_f32(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_f16(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_bf16(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q8_1_q8_1(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_iq4_nl_q8_0(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_iq4_xs_q8_0(int64_t n, float *s, const void *x, const void *y);

/* ------------------------------------------------------ quant_ternary.c */
void vx_dequantize_row_tq1_0(const void *src, float *dst, int64_t n);
void vx_dequantize_row_tq2_0(const void *src, float *dst, int64_t n);
void vx_quantize_row_tq1_0(const float *src, void *dst, int64_t n);
void vx_quantize_row_tq2_0(const float *src, void *dst, int64_t n);
void vx_vec_dot_tq1_0_q8_K(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_tq2_0_q8_K(int64_t n, float *s, const void *x, const void *y);
/* code t (0..2, for t - 1) of element e (< 256) of a block */
int vx_tq1_0_code(const vx_block_tq1_0 *b, int e);
/* The grid i-quants (quant_iq.c): dequantization and dot with Q8_K; no quantizers. */
#define VX_IQ_REF_DECL(name)                                                     \
    void vx_dequantize_row_##name(const void *src, float *dst, int64_t n);      \
    void vx_vec_dot_##name##_q8_K(int64_t n, float *s, const void *x, const void *y);
VX_IQ_REF_DECL(iq2_xxs)
VX_IQ_REF_DECL(iq2_xs)
VX_IQ_REF_DECL(iq2_s)
VX_IQ_REF_DECL(iq3_xxs)
VX_IQ_REF_DECL(iq3_s)
VX_IQ_REF_DECL(iq1_s)
VX_IQ_REF_DECL(iq1_m)
#undef VX_IQ_REF_DECL

int vx_tq2_0_code(const vx_block_tq2_0 *b, int e);
/* a TQ1_0 / TQ2_0 block (type) as a Q2_K block of the same values */
void vx_tq_block_as_q2_K(int type, const void *blk, vx_block_q2_K *o);

/* ----------------------------------------------------------- quant_k.c */
void vx_dequantize_row_q2_K(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q3_K(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q4_K(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q5_K(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q6_K(const void *src, float *dst, int64_t n);
void vx_dequantize_row_q8_K(const void *src, float *dst, int64_t n);

void vx_quantize_row_q2_K(const float *src, void *dst, int64_t n);
void vx_quantize_row_q3_K(const float *src, void *dst, int64_t n);
void vx_quantize_row_q4_K(const float *src, void *dst, int64_t n);
void vx_quantize_row_q5_K(const float *src, void *dst, int64_t n);
void vx_quantize_row_q6_K(const float *src, void *dst, int64_t n);
void vx_quantize_row_q8_K(const float *src, void *dst, int64_t n);

void vx_vec_dot_q2_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q3_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q4_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q5_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q6_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void vx_vec_dot_q8_K_q8_K(int64_t n, float *s, const void *x, const void *y);

/* Unpacks the 16 signed 6-bit sub-block scales of a Q3_K block (-32..31)
 * and the 8 (scale, min) pairs of a Q4_K/Q5_K block; shared with the SIMD
 * kernels so the bit-twiddling lives in one place. */
void vx_q3_K_unpack_scales(const uint8_t packed[12], int8_t out[16]);
void vx_q4_K_unpack_scales(const uint8_t packed[12], uint8_t sc[8], uint8_t mn[8]);

#endif
