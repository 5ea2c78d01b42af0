/*
 * quant_iq.c - plain-C reference kernels of the grid i-quants: their block
 * layouts, a decoder into the integer form of quant_iq.h, dequantization
 * and the dot product with Q8_K activations. No quantizers: making these
 * files well needs an importance matrix and a grid search (llama.cpp's
 * llama-quantize --imatrix does it); vx loads and runs them.
 *
 * Layouts, per 32-element sub-block ib (groups g of 8 elements, or of 4 for
 * IQ3's books; "signs7" = vx_iq_signs7 of a 7-bit field):
 *   IQ2_XXS (2.06 bpw)  qs[8 ib + g] indexes iq2xxs_grid for group g < 4;
 *                       the little-endian u32 at qs[8 ib + 4] holds signs7
 *                       of group g in bits 7g.., the scale s in bits 28..31;
 *                       d (2 s + 1) / 8.
 *   IQ2_XS  (2.31 bpw)  u16 qs[4 ib + g]: low 9 bits index iq2xs_grid, high
 *                       7 are signs7; scales[ib]: low nibble for groups 0-1,
 *                       high for 2-3; d (2 s + 1) / 8.
 *   IQ2_S   (2.56 bpw)  index qs[4 ib + g] | bits 2g..2g+1 of qh[ib] << 8
 *                       into iq2s_grid; the sign byte qs[32 + 4 ib + g] as
 *                       it is; scales as IQ2_XS; d (2 s + 1) / 8.
 *   IQ3_XXS (3.06 bpw)  qs[8 ib + k] indexes iq3xxs_grid for the 4-element
 *                       group k < 8; the u32 at qs[64 + 4 ib] holds signs7
 *                       of each 8 elements and the scale s in bits 28..31;
 *                       d (2 s + 1) / 4.
 *   IQ3_S   (3.44 bpw)  index qs[8 ib + k] | bit k of qh[ib] << 8 into
 *                       iq3s_grid; signs[4 ib + g] as they are; s the nibble
 *                       ib % 2 of scales[ib / 2]; d (2 s + 1).
 *   IQ1_S   (1.56 bpw)  u16 q = qh[ib] (little-endian): index qs[4 ib + g] |
 *                       bits 3g..3g+2 of q << 8 into iq1s_grid; s = bits
 *                       12..14; bit 15 set: shift -1/8, else +1/8; element
 *                       d (2 s + 1) (g + shift).
 *   IQ1_M   (1.75 bpw)  byte h = qh[2 ib + g / 2]: index qs[4 ib + g] |
 *                       (h >> 4 (g % 2)) & 7 << 8; shift -1/8 if bit
 *                       3 + 4 (g % 2) of h, else +1/8; 3-bit scales: the
 *                       u16 words sc[] of scales, sub-block ib's first 16
 *                       elements (sc[ib / 2] >> 6 (ib % 2)) & 7, its second
 *                       16 the next 3 bits; d (2 s + 1) (g + shift) with d
 *                       the fp16 of vx_iq1_m_scale.
 */
#include "quant_iq.h"

#include "common.h"
#include "quant_ref.h"

bool vx_iq_is_grid(int type) {
    switch (type) {
    case VX_TYPE_IQ2_XXS: case VX_TYPE_IQ2_XS: case VX_TYPE_IQ2_S: case VX_TYPE_IQ3_XXS:
    case VX_TYPE_IQ3_S: case VX_TYPE_IQ1_S: case VX_TYPE_IQ1_M: return true;
    default: return false;
    }
}

static inline unsigned rd16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
static inline uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }

/* n elements of a book entry (bytes), negated where signs has a bit */
static void put_signed(int8_t *w, uint64_t entry, unsigned signs, int n) {
    for (int j = 0; j < n; j++) {
        const int v = (int)((entry >> (8 * j)) & 0xFF);
        w[j] = (int8_t)(signs >> j & 1 ? -v : v);
    }
}

/* 8 elements of IQ1's book (-1, 0, +1) shifted by +-1/8, times 8 */
static void put_iq1(int8_t *w, uint64_t entry, bool minus) {
    for (int j = 0; j < 8; j++) w[j] = (int8_t)(8 * (int8_t)(uint8_t)(entry >> (8 * j)) + (minus ? -1 : 1));
}

uint16_t vx_iq1_m_scale(const vx_block_iq1_m *b) {
    const uint8_t *s = b->scales;
    return (uint16_t)((rd16(s) >> 12) | ((rd16(s + 2) >> 8) & 0x00F0) | ((rd16(s + 4) >> 4) & 0x0F00) |
                      (rd16(s + 6) & 0xF000));
}

void vx_iq_set_scale(int type, void *blk, uint16_t h) {
    if (type != VX_TYPE_IQ1_M) {
        memcpy(blk, &h, sizeof h); /* d leads every other block */
        return;
    }
    uint8_t *s = ((vx_block_iq1_m *)blk)->scales;
    for (int i = 0; i < 4; i++) s[2 * i + 1] = (uint8_t)((s[2 * i + 1] & 0x0F) | ((h >> (4 * i)) & 0xF) << 4);
}

void vx_iq_decode(int type, const void *blk, vx_iq_block *o) {
    switch (type) {
    case VX_TYPE_IQ2_XXS: {
        const vx_block_iq2_xxs *b = blk;
        o->f = vx_fp16_to_fp32(b->d) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t aux = rd32(b->qs + 8 * ib + 4);
            o->ls[2 * ib] = o->ls[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
            for (int g = 0; g < 4; g++)
                put_signed(o->w + 32 * ib + 8 * g, vx_iq2xxs_grid[b->qs[8 * ib + g]], vx_iq_signs7(aux >> (7 * g)),
                           8);
        }
        break;
    }
    case VX_TYPE_IQ2_XS: {
        const vx_block_iq2_xs *b = blk;
        o->f = vx_fp16_to_fp32(b->d) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            o->ls[2 * ib] = (int16_t)(2 * (b->scales[ib] & 15) + 1);
            o->ls[2 * ib + 1] = (int16_t)(2 * (b->scales[ib] >> 4) + 1);
            for (int g = 0; g < 4; g++) {
                const unsigned q = rd16(b->qs + 2 * (4 * ib + g));
                put_signed(o->w + 32 * ib + 8 * g, vx_iq2xs_grid[q & 511], vx_iq_signs7(q >> 9), 8);
            }
        }
        break;
    }
    case VX_TYPE_IQ2_S: {
        const vx_block_iq2_s *b = blk;
        o->f = vx_fp16_to_fp32(b->d) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            o->ls[2 * ib] = (int16_t)(2 * (b->scales[ib] & 15) + 1);
            o->ls[2 * ib + 1] = (int16_t)(2 * (b->scales[ib] >> 4) + 1);
            for (int g = 0; g < 4; g++) {
                const unsigned idx = b->qs[4 * ib + g] | ((b->qh[ib] >> (2 * g)) & 3) << 8;
                put_signed(o->w + 32 * ib + 8 * g, vx_iq2s_grid[idx], b->qs[32 + 4 * ib + g], 8);
            }
        }
        break;
    }
    case VX_TYPE_IQ3_XXS: {
        const vx_block_iq3_xxs *b = blk;
        o->f = vx_fp16_to_fp32(b->d) * 0.25f;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t aux = rd32(b->qs + 64 + 4 * ib);
            o->ls[2 * ib] = o->ls[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
            for (int g = 0; g < 4; g++) {
                const unsigned s = vx_iq_signs7(aux >> (7 * g));
                int8_t *w = o->w + 32 * ib + 8 * g;
                put_signed(w, vx_iq3xxs_grid[b->qs[8 * ib + 2 * g]], s, 4);
                put_signed(w + 4, vx_iq3xxs_grid[b->qs[8 * ib + 2 * g + 1]], s >> 4, 4);
            }
        }
        break;
    }
    case VX_TYPE_IQ3_S: {
        const vx_block_iq3_s *b = blk;
        o->f = vx_fp16_to_fp32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            o->ls[2 * ib] = o->ls[2 * ib + 1] = (int16_t)(2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1);
            for (int k = 0; k < 8; k++) {
                const unsigned idx = b->qs[8 * ib + k] | ((b->qh[ib] >> k) & 1) << 8;
                put_signed(o->w + 32 * ib + 4 * k, vx_iq3s_grid[idx], b->signs[4 * ib + k / 2] >> (4 * (k % 2)), 4);
            }
        }
        break;
    }
    case VX_TYPE_IQ1_S: {
        const vx_block_iq1_s *b = blk;
        o->f = vx_fp16_to_fp32(b->d) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned q = rd16(b->qh + 2 * ib);
            o->ls[2 * ib] = o->ls[2 * ib + 1] = (int16_t)(2 * ((q >> 12) & 7) + 1);
            for (int g = 0; g < 4; g++)
                put_iq1(o->w + 32 * ib + 8 * g, vx_iq1s_grid[b->qs[4 * ib + g] | ((q >> (3 * g)) & 7) << 8],
                        q & 0x8000);
        }
        break;
    }
    case VX_TYPE_IQ1_M: {
        const vx_block_iq1_m *b = blk;
        o->f = vx_fp16_to_fp32(vx_iq1_m_scale(b)) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned sc = rd16(b->scales + 2 * (ib / 2)) >> (6 * (ib % 2));
            o->ls[2 * ib] = (int16_t)(2 * (sc & 7) + 1);
            o->ls[2 * ib + 1] = (int16_t)(2 * ((sc >> 3) & 7) + 1);
            for (int g = 0; g < 4; g++) {
                const unsigned h = b->qh[2 * ib + g / 2] >> (4 * (g % 2));
                put_iq1(o->w + 32 * ib + 8 * g, vx_iq1s_grid[b->qs[4 * ib + g] | (h & 7) << 8], h & 8);
            }
        }
        break;
    }
    default: memset(o, 0, sizeof *o); break;
    }
}

static void dequantize(int type, size_t bsize, const void *src, float *dst, int64_t n) {
    vx_iq_block q;
    for (int64_t i = 0; i < n / VX_QK_K; i++) {
        vx_iq_decode(type, (const uint8_t *)src + (size_t)i * bsize, &q);
        for (int e = 0; e < VX_QK_K; e++) dst[i * VX_QK_K + e] = q.f * (float)q.ls[e / 16] * (float)q.w[e];
    }
}

/* per block: the exact integer sum, then f * d_y * sum in float */
static void dot_q8_K(int type, size_t bsize, int64_t n, float *s, const void *x, const void *vy) {
    const vx_block_q8_K *y = vy;
    vx_iq_block q;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / VX_QK_K; i++) {
        vx_iq_decode(type, (const uint8_t *)x + (size_t)i * bsize, &q);
        int32_t sum = 0;
        for (int k = 0; k < 16; k++) {
            int32_t p = 0;
            for (int e = 16 * k; e < 16 * k + 16; e++) p += q.w[e] * y[i].qs[e];
            sum += q.ls[k] * p;
        }
        acc += q.f * y[i].d * (float)sum;
    }
    *s = acc;
}

#define IQ_REF(name, TYPE, block)                                                                  \
    void vx_dequantize_row_##name(const void *src, float *dst, int64_t n) {                      \
        dequantize(TYPE, sizeof(block), src, dst, n);                                            \
    }                                                                                            \
    void vx_vec_dot_##name##_q8_K(int64_t n, float *s, const void *x, const void *y) {           \
        dot_q8_K(TYPE, sizeof(block), n, s, x, y);                                               \
    }
IQ_REF(iq2_xxs, VX_TYPE_IQ2_XXS, vx_block_iq2_xxs)
IQ_REF(iq2_xs, VX_TYPE_IQ2_XS, vx_block_iq2_xs)
IQ_REF(iq2_s, VX_TYPE_IQ2_S, vx_block_iq2_s)
IQ_REF(iq3_xxs, VX_TYPE_IQ3_XXS, vx_block_iq3_xxs)
IQ_REF(iq3_s, VX_TYPE_IQ3_S, vx_block_iq3_s)
IQ_REF(iq1_s, VX_TYPE_IQ1_S, vx_block_iq1_s)
IQ_REF(iq1_m, VX_TYPE_IQ1_M, vx_block_iq1_m)
#undef IQ_REF
