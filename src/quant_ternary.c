/*
 * quant_ternary.c - plain-C reference kernels of the ternary types TQ1_0
 * (1.6875 bpw) and TQ2_0 (2.0625 bpw): weights -1, 0, +1 times one fp16
 * scale per 256 elements, as BitNet b1.58 and TriLM checkpoints are stored
 * in GGUF (block layouts: quant.h). Dequantization, quantization (the
 * scale is the block's largest magnitude and each element rounds to the
 * nearest of -1, 0, 1, the rule of ggml's reference quantizers, so the same
 * floats give the same bytes) and dot products with Q8_K activations
 * (integer sums per block, doubles across blocks, as quant_k.c's).
 *
 * No SIMD kernels yet: the matmul tables take the reference gemv for them
 * (matmul.c).
 */
#include <math.h>
#include <string.h>

#include "common.h"
#include "quant.h"
#include "quant_ref.h"

#define QK VX_QK_K

/* trit n (0 = the most significant of five) of a TQ1_0 byte: the byte is
 * ceil(v 256 / 243), so multiplying by 3^n (mod 256) brings trit n to the
 * top, and (q 3) >> 8 reads it */
static int trit(uint8_t byte, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = (uint8_t)(byte * pow3[n]);
    return ((uint16_t)q * 3) >> 8;
}

int vx_tq1_0_code(const vx_block_tq1_0 *b, int e) {
    if (e < 160) return trit(b->qs[e % 32], e / 32);
    if (e < 240) return trit(b->qs[32 + (e - 160) % 16], (e - 160) / 16);
    return trit(b->qh[(e - 240) % 4], (e - 240) / 4);
}

int vx_tq2_0_code(const vx_block_tq2_0 *b, int e) {
    const int h = e / 128, l = (e % 128) / 32, m = e % 32;
    return (b->qs[32 * h + m] >> (2 * l)) & 3;
}

void vx_dequantize_row_tq1_0(const void *src, float *dst, int64_t n) {
    const vx_block_tq1_0 *x = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = vx_fp16_to_fp32(x[i].d);
        for (int e = 0; e < QK; e++) dst[i * QK + e] = (float)(vx_tq1_0_code(&x[i], e) - 1) * d;
    }
}

void vx_dequantize_row_tq2_0(const void *src, float *dst, int64_t n) {
    const vx_block_tq2_0 *x = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = vx_fp16_to_fp32(x[i].d);
        for (int e = 0; e < QK; e++) dst[i * QK + e] = (float)(vx_tq2_0_code(&x[i], e) - 1) * d;
    }
}

/* The block's scale (its largest magnitude; NaN and infinities poison only
 * their own block) and the codes t = round(x / d) + 1: round half away from
 * zero, as lroundf, and 1 (zero) for a NaN quotient. */
static float ternary_codes(const float *x, uint8_t t[QK]) {
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    for (int j = 0; j < QK; j++) {
        const float v = x[j] * id;
        t[j] = v >= 0.5f ? 2 : v <= -0.5f ? 0 : 1;
    }
    return amax;
}

/* five trits (the first the most significant) -> ceil(v 256 / 243) */
static uint8_t pack_trits(const uint8_t *t, int count) {
    unsigned v = 0;
    for (int k = 0; k < 5; k++) v = 3 * v + (k < count ? t[k] : 0);
    return (uint8_t)((v * 256 + 242) / 243);
}

void vx_quantize_row_tq1_0(const float *src, void *dst, int64_t n) {
    vx_block_tq1_0 *y = dst;
    uint8_t t[QK], g[5];
    for (int64_t i = 0; i < n / QK; i++) {
        y[i].d = vx_fp32_to_fp16(ternary_codes(src + i * QK, t));
        for (int m = 0; m < 32; m++) {
            for (int k = 0; k < 5; k++) g[k] = t[m + 32 * k];
            y[i].qs[m] = pack_trits(g, 5);
        }
        for (int m = 0; m < 16; m++) {
            for (int k = 0; k < 5; k++) g[k] = t[160 + m + 16 * k];
            y[i].qs[32 + m] = pack_trits(g, 5);
        }
        for (int j = 0; j < 4; j++) {
            for (int k = 0; k < 4; k++) g[k] = t[240 + j + 4 * k];
            y[i].qh[j] = pack_trits(g, 4);
        }
    }
}

void vx_quantize_row_tq2_0(const float *src, void *dst, int64_t n) {
    vx_block_tq2_0 *y = dst;
    uint8_t t[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        y[i].d = vx_fp32_to_fp16(ternary_codes(src + i * QK, t));
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int e = 0; e < QK; e++) y[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(t[e] << (2 * ((e % 128) / 32)));
    }
}

/* sum (t - 1) y = sum t y - sum y, the last from the Q8_K block sums */
static int32_t ysum(const vx_block_q8_K *y) {
    int32_t s = 0;
    for (int g = 0; g < QK / 16; g++) s += y->bsums[g];
    return s;
}

/* blocks of bs bytes, each ending in its fp16 scale; code(block, e) */
static void tq_dot(int64_t n, float *s, const uint8_t *x, size_t bs, int (*code)(const void *, int),
                   const vx_block_q8_K *y) {
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++, x += bs) {
        int32_t isum = 0;
        for (int e = 0; e < QK; e++) isum += code(x, e) * y[i].qs[e];
        uint16_t d;
        memcpy(&d, x + bs - sizeof d, sizeof d);
        acc += (double)y[i].d * (double)vx_fp16_to_fp32(d) * (double)(isum - ysum(&y[i]));
    }
    *s = (float)acc;
}

static int code1(const void *b, int e) { return vx_tq1_0_code(b, e); }
static int code2(const void *b, int e) { return vx_tq2_0_code(b, e); }

void vx_vec_dot_tq1_0_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    tq_dot(n, s, vx, sizeof(vx_block_tq1_0), code1, vy);
}

void vx_vec_dot_tq2_0_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    tq_dot(n, s, vx, sizeof(vx_block_tq2_0), code2, vy);
}
