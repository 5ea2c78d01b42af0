/*
 * quant_legacy.c - plain-C reference kernels for the float types (F32, F16,
 * BF16), the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1),
 * IQ4_NL and IQ4_XS (IQ4_NL's code book in 256-element super-blocks with
 * 6-bit sub-block scales): dequantization, quantization and dot products.
 *
 * Dequantization reproduces the GGUF block definitions bit for bit, with
 * the float operations in the reference order (the tests pin the exact
 * output on the fixture models). The quantizers for Q4_0..Q8_1
 * use the same round-to-nearest arithmetic as ggml's reference quantizers, so
 * quantizing the same floats yields the same bytes (tests check this against
 * the fixture models). Dot products accumulate integers within a block and
 * doubles across blocks: each per-block term d_x*d_y*sumi is exact in double,
 * which makes these kernels a sharp yardstick for the SIMD ones.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "quant_ref.h"

/* The quantizers reproduce ggml's bytes only if x*id + 8.5f and the like
 * round after the product and again after the sum: a fused multiply-add
 * rounds once and can land on the other side of a code boundary. GCC never
 * fuses under -std=c11 (ISO mode implies -ffp-contract=off); clang fuses
 * within an expression when FMA is enabled unless told not to. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* (int)v for v in [0, hi], with everything outside clamped (and NaN -> 0).
 * Truncation of a non-negative value is floor, which the +0.5 / +8.5
 * offsets below turn into round-half-up, as in ggml's quantizers. */
static inline int trunc_clamp(float v, int hi) {
    if (!(v >= 0.0f)) return 0;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* roundf (ties away from zero) clamped to [-127, 127]; NaN -> 0. */
static inline int round_q8(float v) {
    if (!(v > -127.0f)) return v != v ? 0 : -127;
    if (v >= 127.0f) return 127;
    return (int)roundf(v);
}

/* Signed value of largest magnitude (first one on ties) and its magnitude. */
static float signed_absmax(const float *x, int n, float *amax_out) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    *amax_out = amax;
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static inline uint32_t load_u32(const uint8_t b[4]) {
    uint32_t v;
    memcpy(&v, b, 4); /* qh is 4 bytes inside a 2-aligned block */
    return v;
}

/* ------------------------------------------------------------ float types */

void vx_dequantize_row_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void vx_dequantize_row_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = vx_fp16_to_fp32(x[i]);
}

void vx_dequantize_row_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = vx_bf16_to_fp32(x[i]);
}

void vx_quantize_row_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void vx_quantize_row_f16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = vx_fp32_to_fp16(src[i]);
}

void vx_quantize_row_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = vx_fp32_to_bf16(src[i]);
}

void vx_vec_dot_f32(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += (double)x[i] * y[i];
    *s = (float)acc;
}

void vx_vec_dot_f16(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += (double)vx_fp16_to_fp32(x[i]) * vx_fp16_to_fp32(y[i]);
    *s = (float)acc;
}

void vx_vec_dot_bf16(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += (double)vx_bf16_to_fp32(x[i]) * vx_bf16_to_fp32(y[i]);
    *s = (float)acc;
}

/* ------------------------------------------------------------------ Q4_0 */
/* x = d * (q - 8); byte j holds element j (low nibble) and j + 16 (high). */

void vx_dequantize_row_q4_0(const void *src, float *dst, int64_t n) {
    const vx_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / VX_QK4_0; i++, dst += VX_QK4_0) {
        const float d = vx_fp16_to_fp32(b[i].d);
        for (int j = 0; j < VX_QK4_0 / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0x0F) - 8) * d;
            dst[j + VX_QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void vx_quantize_row_q4_0(const float *src, void *dst, int64_t n) {
    vx_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / VX_QK4_0; i++, src += VX_QK4_0) {
        float amax;
        /* The signed extreme maps to -8, the level with no positive twin,
         * so the full 16-level range is used on the side that needs it. */
        const float max = signed_absmax(src, VX_QK4_0, &amax);
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vx_fp32_to_fp16(d);
        for (int j = 0; j < VX_QK4_0 / 2; j++) {
            int lo = trunc_clamp(src[j] * id + 8.5f, 15);
            int hi = trunc_clamp(src[j + VX_QK4_0 / 2] * id + 8.5f, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void vx_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q4_0 *x = vx;
    const vx_block_q8_0 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < VX_QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + VX_QK4_0 / 2];
        }
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * sumi;
    }
    *s = (float)acc;
}

/* ------------------------------------------------------------------ Q4_1 */
/* x = d * q + m, q in 0..15, same nibble order as Q4_0. */

void vx_dequantize_row_q4_1(const void *src, float *dst, int64_t n) {
    const vx_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / VX_QK4_1; i++, dst += VX_QK4_1) {
        const float d = vx_fp16_to_fp32(b[i].d);
        const float m = vx_fp16_to_fp32(b[i].m);
        for (int j = 0; j < VX_QK4_1 / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0x0F) * d + m;
            dst[j + VX_QK4_1 / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void vx_quantize_row_q4_1(const float *src, void *dst, int64_t n) {
    vx_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / VX_QK4_1; i++, src += VX_QK4_1) {
        float mn, mx;
        min_max(src, VX_QK4_1, &mn, &mx);
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vx_fp32_to_fp16(d);
        b[i].m = vx_fp32_to_fp16(mn);
        for (int j = 0; j < VX_QK4_1 / 2; j++) {
            int lo = trunc_clamp((src[j] - mn) * id + 0.5f, 15);
            int hi = trunc_clamp((src[j + VX_QK4_1 / 2] - mn) * id + 0.5f, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void vx_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q4_1 *x = vx;
    const vx_block_q8_1 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < VX_QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + VX_QK4_1 / 2];
        }
        /* sum(d q + m)(dy qy) = d dy sum(q qy) + m * s, with s = dy sum(qy) */
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * sumi;
        acc += (double)(vx_fp16_to_fp32(x[i].m) * vx_fp16_to_fp32(y[i].s));
    }
    *s = (float)acc;
}

/* ------------------------------------------------------------------ Q5_0 */
/* x = d * (q - 16); low 4 bits as Q4_0, bit 4 of element j in bit j of qh. */

void vx_dequantize_row_q5_0(const void *src, float *dst, int64_t n) {
    const vx_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / VX_QK5_0; i++, dst += VX_QK5_0) {
        const float d = vx_fp16_to_fp32(b[i].d);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < VX_QK5_0 / 2; j++) {
            int lo = (b[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            dst[j] = (float)(lo - 16) * d;
            dst[j + VX_QK5_0 / 2] = (float)(hi - 16) * d;
        }
    }
}

void vx_quantize_row_q5_0(const float *src, void *dst, int64_t n) {
    vx_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / VX_QK5_0; i++, src += VX_QK5_0) {
        float amax;
        const float max = signed_absmax(src, VX_QK5_0, &amax);
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b[i].d = vx_fp32_to_fp16(d);
        for (int j = 0; j < VX_QK5_0 / 2; j++) {
            int lo = trunc_clamp(src[j] * id + 16.5f, 31);
            int hi = trunc_clamp(src[j + VX_QK5_0 / 2] * id + 16.5f, 31);
            b[i].qs[j] = (uint8_t)((lo & 0x0F) | ((hi & 0x0F) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

void vx_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q5_0 *x = vx;
    const vx_block_q8_0 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK5_0; i++) {
        const uint32_t qh = load_u32(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < VX_QK5_0 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += (lo - 16) * y[i].qs[j] + (hi - 16) * y[i].qs[j + VX_QK5_0 / 2];
        }
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * sumi;
    }
    *s = (float)acc;
}

/* ------------------------------------------------------------------ Q5_1 */
/* x = d * q + m, q in 0..31, bits as Q5_0. */

void vx_dequantize_row_q5_1(const void *src, float *dst, int64_t n) {
    const vx_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / VX_QK5_1; i++, dst += VX_QK5_1) {
        const float d = vx_fp16_to_fp32(b[i].d);
        const float m = vx_fp16_to_fp32(b[i].m);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < VX_QK5_1 / 2; j++) {
            int lo = (b[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            dst[j] = (float)lo * d + m;
            dst[j + VX_QK5_1 / 2] = (float)hi * d + m;
        }
    }
}

void vx_quantize_row_q5_1(const float *src, void *dst, int64_t n) {
    vx_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / VX_QK5_1; i++, src += VX_QK5_1) {
        float mn, mx;
        min_max(src, VX_QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b[i].d = vx_fp32_to_fp16(d);
        b[i].m = vx_fp32_to_fp16(mn);
        for (int j = 0; j < VX_QK5_1 / 2; j++) {
            int lo = trunc_clamp((src[j] - mn) * id + 0.5f, 31);
            int hi = trunc_clamp((src[j + VX_QK5_1 / 2] - mn) * id + 0.5f, 31);
            b[i].qs[j] = (uint8_t)((lo & 0x0F) | ((hi & 0x0F) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

void vx_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q5_1 *x = vx;
    const vx_block_q8_1 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK5_1; i++) {
        const uint32_t qh = load_u32(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < VX_QK5_1 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += lo * y[i].qs[j] + hi * y[i].qs[j + VX_QK5_1 / 2];
        }
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * sumi;
        acc += (double)(vx_fp16_to_fp32(x[i].m) * vx_fp16_to_fp32(y[i].s));
    }
    *s = (float)acc;
}

/* ------------------------------------------------------------ Q8_0, Q8_1 */
/* x = d * q; d = amax / 127 so the extreme lands on +-127. */

void vx_dequantize_row_q8_0(const void *src, float *dst, int64_t n) {
    const vx_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / VX_QK8_0; i++, dst += VX_QK8_0) {
        const float d = vx_fp16_to_fp32(b[i].d);
        for (int j = 0; j < VX_QK8_0; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

void vx_quantize_row_q8_0(const float *src, void *dst, int64_t n) {
    vx_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / VX_QK8_0; i++, src += VX_QK8_0) {
        float amax;
        (void)signed_absmax(src, VX_QK8_0, &amax);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vx_fp32_to_fp16(d);
        for (int j = 0; j < VX_QK8_0; j++) b[i].qs[j] = (int8_t)round_q8(src[j] * id);
    }
}

void vx_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q8_0 *x = vx;
    const vx_block_q8_0 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < VX_QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * sumi;
    }
    *s = (float)acc;
}

void vx_dequantize_row_q8_1(const void *src, float *dst, int64_t n) {
    const vx_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / VX_QK8_1; i++, dst += VX_QK8_1) {
        const float d = vx_fp16_to_fp32(b[i].d);
        for (int j = 0; j < VX_QK8_1; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

void vx_quantize_row_q8_1(const float *src, void *dst, int64_t n) {
    vx_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / VX_QK8_1; i++, src += VX_QK8_1) {
        float amax;
        (void)signed_absmax(src, VX_QK8_1, &amax);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        b[i].d = vx_fp32_to_fp16(d);
        for (int j = 0; j < VX_QK8_1; j++) {
            int q = round_q8(src[j] * id);
            b[i].qs[j] = (int8_t)q;
            sum += q;
        }
        /* s lets Q4_1/Q5_1 dots add m * sum(y) without touching y again */
        b[i].s = vx_fp32_to_fp16((float)sum * d);
    }
}

void vx_vec_dot_q8_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_q8_1 *x = vx;
    const vx_block_q8_1 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK8_1; i++) {
        int sumi = 0;
        for (int j = 0; j < VX_QK8_1; j++) sumi += x[i].qs[j] * y[i].qs[j];
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * sumi;
    }
    *s = (float)acc;
}

/* ---------------------------------------------------------------- IQ4_NL */
/* x = d * vx_iq4nl_values[q]; nibble order as Q4_0. */

/* Midpoints between neighbouring IQ4_NL codes (the codes ascend). */
static const float iq4nl_splits[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f,
                                       -4.5f,   7.0f,   19.0f,  31.5f,  45.5f,  61.0f,  79.0f,
                                       101.0f};

/* Index of the code-book value nearest to v, i.e. the number of midpoints
 * below it, by a binary search written as selects: the searching quantizer
 * calls this in its inner loop with unpredictable outcomes, which would
 * make real branches mispredict. NaN gives 0. */
static inline int iq4nl_nearest(float v) {
    int k = v > iq4nl_splits[7] ? 8 : 0; /* answer in [k, k + 7] */
    k += v > iq4nl_splits[k + 3] ? 4 : 0;  /* [k, k + 3] */
    k += v > iq4nl_splits[k + 1] ? 2 : 0;  /* [k, k + 1] */
    k += v > iq4nl_splits[k] ? 1 : 0;
    return k;
}

void vx_dequantize_row_iq4_nl(const void *src, float *dst, int64_t n) {
    const vx_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / VX_QK4_NL; i++, dst += VX_QK4_NL) {
        const float d = vx_fp16_to_fp32(b[i].d);
        for (int j = 0; j < VX_QK4_NL / 2; j++) {
            dst[j] = d * (float)vx_iq4nl_values[b[i].qs[j] & 0x0F];
            dst[j + VX_QK4_NL / 2] = d * (float)vx_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

/* For a trial inverse scale, picks the nearest codes and returns the
 * least-squares scale for them (sum x v / sum v^2) and, via *gain, the
 * error reduction (sum x v)^2 / sum v^2: maximizing it minimizes the error. */
static float iq4nl_try(const float *x, float id, double *gain) {
    int svv = 0;
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* partial sums: no serial add chain */
    for (int j = 0; j < VX_QK4_NL; j += 4) {
        for (int k = 0; k < 4; k++) {
            int v = vx_iq4nl_values[iq4nl_nearest(x[j + k] * id)];
            p[k] += x[j + k] * (float)v;
            svv += v * v;
        }
    }
    double sxv = ((double)p[0] + p[1]) + ((double)p[2] + p[3]);
    *gain = sxv * sxv / svv; /* svv > 0: no code is 0 */
    return (float)(sxv / svv);
}

#define IQ4_TRIALS 4   /* trial scales on each side of each nominal one */
#define IQ4_STEP 2.5f  /* in code-book units at the extreme (-127 / 113) */

/* The scale of one 32-element block (0 for an all-zero or non-finite one):
 * the code book is asymmetric (-127..113), so the extreme is tried on
 * either end, each with a spread of nearby scales; the least-squares fit
 * with the smallest error wins, then is polished by re-picking codes for
 * the fitted scale while that helps. */
static float iq4nl_block_scale(const float *x) {
    float amax;
    const float max = signed_absmax(x, VX_QK4_NL, &amax);
    float best_d = 0.0f;
    if (!(amax > 0.0f && isfinite(amax))) return best_d;
    double best_gain = -1.0;
    for (int side = 0; side < 2; side++) {
        const float end = side == 0 ? (float)vx_iq4nl_values[0] : (float)vx_iq4nl_values[15];
        for (int t = -IQ4_TRIALS; t <= IQ4_TRIALS; t++) {
            double gain;
            float d = iq4nl_try(x, (end + IQ4_STEP * (float)t) / max, &gain);
            if (gain > best_gain) {
                best_gain = gain;
                best_d = d;
            }
        }
    }
    for (int it = 0; it < 2 && best_d != 0.0f; it++) {
        double gain;
        float d = iq4nl_try(x, 1.0f / best_d, &gain);
        if (!(gain > best_gain)) break;
        best_gain = gain;
        best_d = d;
    }
    return best_d;
}

/* Codes of the 32 elements of x for the scale d, two per byte (element j
 * low nibble of qs[j], element j + 16 its high one); returns the squared
 * error of d * book[code] against x. */
static double iq4nl_codes(const float *x, float d, uint8_t *qs) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    double e = 0.0;
    for (int j = 0; j < VX_QK4_NL / 2; j++) {
        const int lo = iq4nl_nearest(x[j] * id), hi = iq4nl_nearest(x[j + VX_QK4_NL / 2] * id);
        const float rl = x[j] - d * (float)vx_iq4nl_values[lo];
        const float rh = x[j + VX_QK4_NL / 2] - d * (float)vx_iq4nl_values[hi];
        e += (double)rl * rl + (double)rh * rh;
        qs[j] = (uint8_t)(lo | (hi << 4));
    }
    return e;
}

void vx_quantize_row_iq4_nl(const float *src, void *dst, int64_t n) {
    vx_block_iq4_nl *b = dst;
    for (int64_t i = 0; i < n / VX_QK4_NL; i++, src += VX_QK4_NL) {
        b[i].d = vx_fp32_to_fp16(iq4nl_block_scale(src));
        /* Pick the codes against the scale actually stored (fp16). */
        iq4nl_codes(src, vx_fp16_to_fp32(b[i].d), b[i].qs);
    }
}

/* The integer dot of a 32-element block of book indices (Q4_0's nibble
 * order: element j low nibble of qs[j], j + 16 its high one) with Q8_0
 * codes y: IQ4_NL's and MXFP4's */
static int book_dot32(const int8_t book[16], const uint8_t qs[16], const int8_t y[32]) {
    int sumi = 0;
    for (int j = 0; j < 16; j++) sumi += book[qs[j] & 0x0F] * y[j] + book[qs[j] >> 4] * y[j + 16];
    return sumi;
}

void vx_vec_dot_iq4_nl_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_iq4_nl *x = vx;
    const vx_block_q8_0 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK4_NL; i++)
        acc += (double)(vx_fp16_to_fp32(x[i].d) * vx_fp16_to_fp32(y[i].d)) * book_dot32(vx_iq4nl_values, x[i].qs, y[i].qs);
    *s = (float)acc;
}

/* ----------------------------------------------------------------- MXFP4 */
/* x = vx_e8m0_half(e) * vx_mxfp4_values[q]; nibble order as Q4_0. */

void vx_dequantize_row_mxfp4(const void *src, float *dst, int64_t n) {
    const vx_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / VX_QK_MXFP4; i++, dst += VX_QK_MXFP4) {
        const float d = vx_e8m0_half(b[i].e);
        for (int j = 0; j < VX_QK_MXFP4 / 2; j++) {
            dst[j] = d * (float)vx_mxfp4_values[b[i].qs[j] & 0x0F];
            dst[j + VX_QK_MXFP4 / 2] = d * (float)vx_mxfp4_values[b[i].qs[j] >> 4];
        }
    }
}

/* The code of v (in units of the block's half scale) nearest on the
 * doubled E2M1 grid 0 1 2 3 4 6 8 12, sign in bit 3 (never -0). */
static int mxfp4_code(float v) {
    static const float mid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
    const float a = fabsf(v);
    int c = 0;
    while (c < 7 && a > mid[c]) c++; /* NaN: 0 */
    return c && v < 0 ? c | 8 : c;
}

/* Codes of a block for exponent e into qs; returns their squared error. */
static double mxfp4_codes(const float *x, uint8_t e, uint8_t *qs) {
    const float d = vx_e8m0_half(e), id = 1.0f / d;
    double err = 0.0;
    for (int j = 0; j < VX_QK_MXFP4 / 2; j++) {
        const int lo = mxfp4_code(x[j] * id), hi = mxfp4_code(x[j + VX_QK_MXFP4 / 2] * id);
        const float rl = x[j] - d * (float)vx_mxfp4_values[lo];
        const float rh = x[j + VX_QK_MXFP4 / 2] - d * (float)vx_mxfp4_values[hi];
        err += (double)rl * rl + (double)rh * rh;
        qs[j] = (uint8_t)(lo | hi << 4);
    }
    return err;
}

/* The OCP MX rule's shared exponent, floor(log2 amax) - 2 (the largest
 * element lands in [4, 8) of E2M1's range up to 6, so it may clip), or
 * one more (no clipping, coarser steps), whichever fits the block better;
 * an all-zero or non-finite block gets e = 0. */
void vx_quantize_row_mxfp4(const float *src, void *dst, int64_t n) {
    vx_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / VX_QK_MXFP4; i++, src += VX_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < VX_QK_MXFP4; j++) amax = fmaxf(amax, fabsf(src[j]));
        b[i].e = 0;
        if (!(amax > 0.0f && isfinite(amax))) {
            memset(b[i].qs, 0, sizeof b[i].qs);
            continue;
        }
        int ex;
        frexpf(amax, &ex); /* amax = f 2^ex, f in [0.5, 1): floor(log2 amax) = ex - 1 */
        const int e0 = VX_MIN(VX_MAX(ex - 1 - 2 + 127, 0), 254), e1 = VX_MIN(e0 + 1, 254);
        uint8_t q1[VX_QK_MXFP4 / 2];
        const double err0 = mxfp4_codes(src, (uint8_t)e0, b[i].qs), err1 = mxfp4_codes(src, (uint8_t)e1, q1);
        b[i].e = (uint8_t)e0;
        if (err1 < err0) {
            b[i].e = (uint8_t)e1;
            memcpy(b[i].qs, q1, sizeof q1);
        }
    }
}

void vx_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_mxfp4 *x = vx;
    const vx_block_q8_0 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK_MXFP4; i++)
        acc += (double)(vx_e8m0_half(x[i].e) * vx_fp16_to_fp32(y[i].d)) * book_dot32(vx_mxfp4_values, x[i].qs, y[i].qs);
    *s = (float)acc;
}

/* ---------------------------------------------------------------- IQ4_XS */
void vx_dequantize_row_iq4_xs(const void *src, float *dst, int64_t n) {
    const vx_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / VX_QK_K; i++) {
        const float d = vx_fp16_to_fp32(b[i].d);
        for (int j = 0; j < VX_QK_K / 32; j++, dst += 32) {
            const float dl = d * (float)vx_iq4_xs_scale(&b[i], j);
            const uint8_t *qs = b[i].qs + 16 * j;
            for (int k = 0; k < 16; k++) {
                dst[k] = dl * (float)vx_iq4nl_values[qs[k] & 0x0F];
                dst[k + 16] = dl * (float)vx_iq4nl_values[qs[k] >> 4];
            }
        }
    }
}

/* Each sub-block's own best scale (IQ4_NL's search), then one super-block
 * scale that puts the largest of them at -32 (the wider side of the 6-bit
 * range), each multiple rounded and tried one step either way against the
 * codes it gives, and the codes of the best. */
void vx_quantize_row_iq4_xs(const float *src, void *dst, int64_t n) {
    vx_block_iq4_xs *b = dst;
    for (int64_t i = 0; i < n / VX_QK_K; i++, src += VX_QK_K) {
        float sd[VX_QK_K / 32], amax = 0.0f, max = 0.0f;
        for (int j = 0; j < VX_QK_K / 32; j++) {
            sd[j] = iq4nl_block_scale(src + 32 * j);
            if (fabsf(sd[j]) > amax) amax = fabsf(sd[j]), max = sd[j];
        }
        b[i].d = vx_fp32_to_fp16(max / -32.0f);
        const float d = vx_fp16_to_fp32(b[i].d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].scales_h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int j = 0; j < VX_QK_K / 32; j++) {
            const float *x = src + 32 * j;
            uint8_t *qs = b[i].qs + 16 * j, q[16];
            const int l0 = vx_q_round_clamp(sd[j] * id, -32, 31);
            int best = l0;
            double best_e = iq4nl_codes(x, d * (float)l0, qs);
            for (int l = l0 - 1; l <= l0 + 1; l += 2) {
                if (l < -32 || l > 31) continue;
                const double e = iq4nl_codes(x, d * (float)l, q);
                if (e < best_e) {
                    best_e = e;
                    best = l;
                    memcpy(qs, q, sizeof q);
                }
            }
            const int ls = best + 32;
            b[i].scales_l[j / 2] |= (uint8_t)((ls & 0x0F) << (4 * (j % 2)));
            b[i].scales_h |= (uint16_t)((ls >> 4) << (2 * j));
        }
    }
}

/* Against Q8_0 activations (not ggml's Q8_K): the pairing of the packed
 * IQ4_NL_R8 layout IQ4_XS weights take at load (quant_repack.c), so that
 * both layouts quantize the activations alike. */
void vx_vec_dot_iq4_xs_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_iq4_xs *x = vx;
    const vx_block_q8_0 *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / VX_QK_K; i++) {
        const double d = vx_fp16_to_fp32(x[i].d);
        for (int j = 0; j < VX_QK_K / 32; j++) {
            const uint8_t *qs = x[i].qs + 16 * j;
            const vx_block_q8_0 *yb = &y[8 * i + j];
            int sj = 0;
            for (int k = 0; k < 16; k++)
                sj += vx_iq4nl_values[qs[k] & 0x0F] * yb->qs[k] + vx_iq4nl_values[qs[k] >> 4] * yb->qs[k + 16];
            acc += d * (double)vx_fp16_to_fp32(yb->d) * (double)(vx_iq4_xs_scale(&x[i], j) * sj);
        }
    }
    *s = (float)acc;
}
