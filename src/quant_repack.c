/*
 * quant_repack.c - the load-time 8-row layouts Q4_K_R8 and Q6_K_R8 (see
 * quant.h): repacking from the file layout, and the plain-C reference GEMV
 * on them.
 *
 * The reference follows the canonical order of avx2_quant_util.h exactly:
 * per row and super-block an exact int32 sum I (and the min sum M of
 * Q4_K), then acc = fma(d * y.d, I, acc) and, for Q4_K, acc = fma(-(dmin *
 * y.d), M, acc), super-blocks in ascending order. fmaf rounds once like
 * the hardware instruction, so the SIMD kernels on either layout give the
 * very same bits (tests/test_kernels.c checks it).
 */
#include <math.h>
#include <string.h>

#include "common.h"
#include "quant.h"
#include "quant_ref.h"

#define QK VX_QK_K

int vx_repack_type(int type) {
    if (type == VX_TYPE_Q4_K) return VX_TYPE_Q4_K_R8;
    if (type == VX_TYPE_Q6_K) return VX_TYPE_Q6_K_R8;
    return -1;
}

size_t vx_repack_row_size(int ptype, int64_t n) {
    if (n <= 0 || n % QK) return 0;
    const size_t nb = (size_t)(n / QK);
    if (ptype == VX_TYPE_Q4_K_R8) return nb * sizeof(vx_block_q4_K_r8) / 8;
    if (ptype == VX_TYPE_Q6_K_R8) return nb * sizeof(vx_block_q6_K_r8) / 8;
    return 0;
}

static void pack_q4_K(const vx_block_q4_K *const b[8], vx_block_q4_K_r8 *o) {
    for (int r = 0; r < 8; r++) {
        uint8_t sc[8], mn[8];
        vx_q4_K_unpack_scales(b[r]->scales, sc, mn);
        o->d[r] = b[r]->d;
        o->dmin[r] = b[r]->dmin;
        for (int g = 0; g < 8; g++) {
            o->sc[g / 2][r][g % 2] = sc[g];
            o->mn[g / 2][r][g % 2] = mn[g];
        }
        for (int c = 0; c < 4; c++)
            for (int q = 0; q < 8; q++) memcpy(o->qs[c][q][r], b[r]->qs + 32 * c + 4 * q, 4);
    }
}

static void pack_q6_K(const vx_block_q6_K *const b[8], vx_block_q6_K_r8 *o) {
    for (int r = 0; r < 8; r++) {
        o->d[r] = b[r]->d;
        for (int j = 0; j < 16; j++) o->sc[j / 2][r][j % 2] = b[r]->scales[j];
        for (int h = 0; h < 2; h++)
            for (int q = 0; q < 8; q++) {
                memcpy(o->q[h][q][0][r], b[r]->ql + 64 * h + 4 * q, 4);
                memcpy(o->q[h][q][1][r], b[r]->ql + 64 * h + 32 + 4 * q, 4);
                memcpy(o->q[h][q][2][r], b[r]->qh + 32 * h + 4 * q, 4);
            }
    }
}

void vx_repack_rows(int type, const void *src, size_t row_stride, int64_t nrows, int64_t n, void *dst) {
    const int64_t nb = n / QK;
    for (int64_t g = 0; g < nrows / 8; g++) {
        const uint8_t *rows[8];
        for (int r = 0; r < 8; r++) rows[r] = (const uint8_t *)src + (size_t)(8 * g + r) * row_stride;
        for (int64_t i = 0; i < nb; i++) {
            if (type == VX_TYPE_Q4_K) {
                const vx_block_q4_K *b[8];
                for (int r = 0; r < 8; r++) b[r] = (const vx_block_q4_K *)(const void *)rows[r] + i;
                pack_q4_K(b, (vx_block_q4_K_r8 *)dst + g * nb + i);
            } else {
                const vx_block_q6_K *b[8];
                for (int r = 0; r < 8; r++) b[r] = (const vx_block_q6_K *)(const void *)rows[r] + i;
                pack_q6_K(b, (vx_block_q6_K_r8 *)dst + g * nb + i);
            }
        }
    }
}

void vx_gemv_q4_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *vy, float *out) {
    const int64_t nb = n / QK;
    const vx_block_q8_K *y = vy;
    for (int g = 0; g < nrows / 8; g++) {
        const vx_block_q4_K_r8 *x = (const void *)((const uint8_t *)w + (size_t)8 * g * row_stride);
        for (int r = 0; r < 8; r++) {
            float acc = 0;
            for (int64_t i = 0; i < nb; i++) {
                const vx_block_q4_K_r8 *b = &x[i];
                int32_t I = 0, M = 0;
                for (int s = 0; s < 8; s++) { /* sub-block of 32 */
                    int32_t sum = 0;
                    for (int l = 0; l < 32; l++) {
                        const uint8_t byte = b->qs[s / 2][l / 4][r][l % 4];
                        const int code = (s % 2 ? byte >> 4 : byte) & 15;
                        sum += code * y[i].qs[32 * s + l];
                    }
                    I += (int32_t)b->sc[s / 2][r][s % 2] * sum;
                    M += (int32_t)b->mn[s / 2][r][s % 2] * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
                }
                const float yd = y[i].d;
                acc = fmaf(vx_fp16_to_fp32(b->d[r]) * yd, (float)I, acc);
                acc = fmaf(-(vx_fp16_to_fp32(b->dmin[r]) * yd), (float)M, acc);
            }
            out[8 * g + r] = acc;
        }
    }
}

void vx_gemv_q6_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *vy, float *out) {
    const int64_t nb = n / QK;
    const vx_block_q8_K *y = vy;
    for (int g = 0; g < nrows / 8; g++) {
        const vx_block_q6_K_r8 *x = (const void *)((const uint8_t *)w + (size_t)8 * g * row_stride);
        for (int r = 0; r < 8; r++) {
            float acc = 0;
            for (int64_t i = 0; i < nb; i++) {
                const vx_block_q6_K_r8 *b = &x[i];
                int32_t I = 0;
                for (int e = 0; e < QK; e++) {
                    /* element e = 128h + 32k + l: quarter k uses nibble k / 2
                     * of ql[64h + 32(k % 2) + l] and bits 2k of qh[32h + l] */
                    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
                    const int lo = (b->q[h][l / 4][k % 2][r][l % 4] >> (4 * (k / 2))) & 15;
                    const int hi = (b->q[h][l / 4][2][r][l % 4] >> (2 * k)) & 3;
                    const int j = e / 16;
                    I += (int32_t)b->sc[j / 2][r][j % 2] * ((lo | hi << 4) - 32) * y[i].qs[e];
                }
                acc = fmaf(vx_fp16_to_fp32(b->d[r]) * y[i].d, (float)I, acc);
            }
            out[8 * g + r] = acc;
        }
    }
}
