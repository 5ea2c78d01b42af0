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
 * The matmul tables take the reference gemv for the file layout
 * (matmul.c); at load time the SIMD tiers repack both types into
 * TQ2_0_R8 (quant.h, quant_repack.c), the codes of vx_tq_block_as_q2_K
 * below, and run Q2_K_R8's GEMV and GEMM kernels on it with every scale
 * and min 1.
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

/* the 2-bit field l (0..3) of a TQ2_0 byte */
static int field2(uint8_t byte, int l) { return (byte >> (2 * l)) & 3; }

int vx_tq2_0_code(const vx_block_tq2_0 *b, int e) {
    const int h = e / 128, l = (e % 128) / 32, m = e % 32;
    return field2(b->qs[32 * h + m], l);
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

/* sum over the 32 elements m of (code - 1) y[m], the codes the 2-bit
 * fields at bit 2l of q[m] (TQ2_0) or trit n of q[m] (TQ1_0, with 16
 * elements for the last ones): loops over whole rows of codes, which the
 * compiler can vectorize, on the same field readers as the block-element
 * helpers above (test_quant checks the dots against the dequantized rows) */
static int32_t dot2(const uint8_t *q, int l, const int8_t *y, int cnt) {
    int32_t s = 0;
    for (int m = 0; m < cnt; m++) s += (field2(q[m], l) - 1) * y[m];
    return s;
}
static int32_t dot3(const uint8_t *q, int n, const int8_t *y, int cnt) {
    int32_t s = 0;
    for (int m = 0; m < cnt; m++) s += (trit(q[m], n) - 1) * y[m];
    return s;
}

void vx_vec_dot_tq1_0_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_tq1_0 *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++) {
        const int8_t *yq = y[i].qs;
        int32_t isum = 0;
        for (int k = 0; k < 5; k++) isum += dot3(x[i].qs, k, yq + 32 * k, 32);
        for (int k = 0; k < 5; k++) isum += dot3(x[i].qs + 32, k, yq + 160 + 16 * k, 16);
        for (int k = 0; k < 4; k++) isum += dot3(x[i].qh, k, yq + 240 + 4 * k, 4);
        acc += (double)y[i].d * (double)vx_fp16_to_fp32(x[i].d) * (double)isum;
    }
    *s = (float)acc;
}

void vx_vec_dot_tq2_0_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const vx_block_tq2_0 *x = vx;
    const vx_block_q8_K *y = vy;
    double acc = 0.0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t isum = 0;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 4; l++) isum += dot2(x[i].qs + 32 * h, l, y[i].qs + 128 * h + 32 * l, 32);
        acc += (double)y[i].d * (double)vx_fp16_to_fp32(x[i].d) * (double)isum;
    }
    *s = (float)acc;
}

/* A ternary block as the Q2_K block of the same values: code t (0..2) in
 * Q2_K's 2-bit field of the element (bits 2l of qs[32 h + m] for element
 * 128 h + 32 l + m: TQ2_0's own layout), every sub-block's scale and min
 * 1, d and dmin the block's scale. Q2_K's value d sc t - dmin mn is then
 * d t - d, which is (t - 1) d exactly for t = 0, 1, 2. */
void vx_tq_block_as_q2_K(int type, const void *blk, vx_block_q2_K *o) {
    memset(o->scales, 0x11, sizeof o->scales);
    if (type == VX_TYPE_TQ2_0) {
        const vx_block_tq2_0 *b = blk;
        memcpy(o->qs, b->qs, sizeof o->qs);
        o->d = o->dmin = b->d;
        return;
    }
    const vx_block_tq1_0 *b = blk;
    memset(o->qs, 0, sizeof o->qs);
    for (int e = 0; e < QK; e++)
        o->qs[32 * (e / 128) + e % 32] |= (uint8_t)(vx_tq1_0_code(b, e) << (2 * ((e % 128) / 32)));
    o->d = o->dmin = b->d;
}
