/*
 * quant_repack.c - the load-time 8-row layouts Q4_K_R8, Q5_K_R8, Q6_K_R8, Q3_K_R8,
 * Q2_K_R8, Q4_0_R8, Q5_0_R8, Q8_0_R8, Q4_1_R8, Q5_1_R8, IQ4_NL_R8 and TQ2_0_R8 (see quant.h): repacking from the file layout
 * (IQ4_XS into IQ4_NL_R8, TQ1_0 and TQ2_0 into TQ2_0_R8), and
 * the plain-C reference GEMV on them.
 *
 * The reference follows the canonical order of avx2_quant_util.h exactly:
 * per row and super-block an exact int32 sum I (and the min sum M of
 * Q4_K, Q5_K and Q2_K), then acc = fma(d * y.d, I, acc) and, for those two, acc =
 * fma(-(dmin * y.d), M, acc), super-blocks in ascending order. The 32-element types
 * keep two chains per row, even and odd blocks (an odd count's last block
 * goes onto the even chain), each taking acc = fma(d * y.d, I, acc) with I
 * the exact sum of (code - offset) * y (Q4_1 / Q5_1 then acc = fma(m, s_y,
 * acc)), and add them at the end: the order
 * of avx2_quant.c (rows32c) and avx2_gemm.c. fmaf rounds once like
 * the hardware instruction, so the SIMD kernels on either layout give the
 * very same bits (tests/test_kernels.c checks it).
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common.h"
#include "quant.h"
#include "quant_ref.h"

#define QK VX_QK_K

int vx_repack_type(int type) {
    switch (type) {
    case VX_TYPE_Q4_K: return VX_TYPE_Q4_K_R8;
    case VX_TYPE_Q5_K: return VX_TYPE_Q5_K_R8;
    case VX_TYPE_Q6_K: return VX_TYPE_Q6_K_R8;
    case VX_TYPE_Q3_K: return VX_TYPE_Q3_K_R8;
    case VX_TYPE_Q2_K: return VX_TYPE_Q2_K_R8;
    case VX_TYPE_Q4_0: return VX_TYPE_Q4_0_R8;
    case VX_TYPE_Q5_0: return VX_TYPE_Q5_0_R8;
    case VX_TYPE_Q8_0: return VX_TYPE_Q8_0_R8;
    case VX_TYPE_Q4_1: return VX_TYPE_Q4_1_R8;
    case VX_TYPE_Q5_1: return VX_TYPE_Q5_1_R8;
    case VX_TYPE_IQ4_NL: return VX_TYPE_IQ4_NL_R8;
    case VX_TYPE_MXFP4: return VX_TYPE_MXFP4_R8;
    case VX_TYPE_IQ4_XS: return VX_TYPE_IQ4_NL_R8; /* each sub-block as an IQ4_NL block */
    case VX_TYPE_TQ1_0: /* each block's codes as TQ2_0's */
    case VX_TYPE_TQ2_0: return VX_TYPE_TQ2_0_R8;
    default: return -1;
    }
}

/* Elements per block and bytes per 8-row record of a packed type. */
static int64_t rec_elems(int ptype) {
    return ptype == VX_TYPE_Q4_K_R8 || ptype == VX_TYPE_Q6_K_R8 || ptype == VX_TYPE_Q3_K_R8 ||
                   ptype == VX_TYPE_Q2_K_R8 || ptype == VX_TYPE_Q5_K_R8 || ptype == VX_TYPE_TQ2_0_R8
               ? QK
               : 32;
}

static size_t rec_size(int ptype) {
    switch (ptype) {
    case VX_TYPE_Q4_K_R8: return sizeof(vx_block_q4_K_r8);
    case VX_TYPE_Q5_K_R8: return sizeof(vx_block_q5_K_r8);
    case VX_TYPE_Q6_K_R8: return sizeof(vx_block_q6_K_r8);
    case VX_TYPE_Q3_K_R8: return sizeof(vx_block_q3_K_r8);
    case VX_TYPE_Q2_K_R8: return sizeof(vx_block_q2_K_r8);
    case VX_TYPE_Q4_0_R8: return sizeof(vx_block_q4_0_r8);
    case VX_TYPE_Q5_0_R8: return sizeof(vx_block_q5_0_r8);
    case VX_TYPE_Q8_0_R8: return sizeof(vx_block_q8_0_r8);
    case VX_TYPE_Q4_1_R8: return sizeof(vx_block_q4_1_r8);
    case VX_TYPE_Q5_1_R8: return sizeof(vx_block_q5_1_r8);
    case VX_TYPE_IQ4_NL_R8: return sizeof(vx_block_iq4_nl_r8);
    case VX_TYPE_MXFP4_R8: return sizeof(vx_block_mxfp4_r8);
    case VX_TYPE_TQ2_0_R8: return sizeof(vx_block_tq2_0_r8);
    default: return 0;
    }
}

size_t vx_repack_row_size(int ptype, int64_t n) {
    const int64_t be = rec_elems(ptype);
    if (n <= 0 || n % be) return 0;
    return (size_t)(n / be) * rec_size(ptype) / 8;
}

/* Row r's Q4_K (or Q5_K) fields into a Q4_K_R8 record. */
static void pack_k4_row(uint16_t d, uint16_t dmin, const uint8_t *scales, const uint8_t *qs, int r,
                        vx_block_q4_K_r8 *o) {
    uint8_t sc[8], mn[8];
    vx_q4_K_unpack_scales(scales, sc, mn);
    o->d[r] = d;
    o->dmin[r] = dmin;
    for (int g = 0; g < 8; g++) {
        o->sc[g / 2][r][g % 2] = sc[g];
        o->mn[g / 2][r][g % 2] = mn[g];
    }
    for (int c = 0; c < 4; c++)
        for (int q = 0; q < 8; q++) memcpy(o->qs[c][q][r], qs + 32 * c + 4 * q, 4);
}

static void pack_q4_K(const uint8_t *const b[8], vx_block_q4_K_r8 *o) {
    for (int r = 0; r < 8; r++) {
        const vx_block_q4_K *x = (const vx_block_q4_K *)(const void *)b[r];
        pack_k4_row(x->d, x->dmin, x->scales, x->qs, r, o);
    }
}

static void pack_q5_K(const uint8_t *const b[8], vx_block_q5_K_r8 *o) {
    for (int r = 0; r < 8; r++) {
        const vx_block_q5_K *x = (const vx_block_q5_K *)(const void *)b[r];
        pack_k4_row(x->d, x->dmin, x->scales, x->qs, r, &o->k4);
        for (int q = 0; q < 8; q++) memcpy(o->qh[q][r], x->qh + 4 * q, 4);
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

static void pack_q2_K(const uint8_t *const b[8], vx_block_q2_K_r8 *o) {
    for (int r = 0; r < 8; r++) {
        const vx_block_q2_K *x = (const vx_block_q2_K *)(const void *)b[r];
        o->d[r] = x->d;
        o->dmin[r] = x->dmin;
        for (int j = 0; j < 16; j++) o->sc[j / 2][r][j % 2] = x->scales[j];
        for (int h = 0; h < 2; h++)
            for (int q = 0; q < 8; q++) memcpy(o->qs[h][q][r], x->qs + 32 * h + 4 * q, 4);
    }
}

static void pack_q3_K(const uint8_t *const b[8], vx_block_q3_K_r8 *o) {
    for (int r = 0; r < 8; r++) {
        const vx_block_q3_K *x = (const vx_block_q3_K *)(const void *)b[r];
        int8_t sc[16];
        vx_q3_K_unpack_scales(x->scales, sc);
        o->d[r] = x->d;
        for (int j = 0; j < 16; j++) o->sc[j / 2][r][j % 2] = sc[j];
        for (int q = 0; q < 8; q++) memcpy(o->hm[q][r], x->hmask + 4 * q, 4);
        for (int h = 0; h < 2; h++)
            for (int q = 0; q < 8; q++) memcpy(o->qs[h][q][r], x->qs + 32 * h + 4 * q, 4);
    }
}

/* A 32-element block of 8 rows: d (and m) of each row, its 16 nibble
 * bytes (at qs_off in the file's block) and, for the 5-bit types, its
 * fifth bits (at qh_off; -1: none) reordered per quad (quant.h). */
static void pack32_nib(const uint8_t *const b[8], size_t qs_off, long qh_off, int with_min, uint16_t *d,
                       uint16_t *m, uint8_t (*qh)[4], uint8_t (*qs)[8][4]) {
    for (int r = 0; r < 8; r++) {
        memcpy(&d[r], b[r], 2);
        if (with_min) memcpy(&m[r], b[r] + 2, 2);
        for (int c = 0; c < 4; c++) memcpy(qs[c][r], b[r] + qs_off + 4 * c, 4);
        if (qh_off >= 0) {
            uint32_t h;
            memcpy(&h, b[r] + qh_off, 4);
            memset(qh[r], 0, 4);
            for (int e = 0; e < 32; e++) qh[r][e % 4] |= (uint8_t)(((h >> e) & 1) << (e / 4));
        }
    }
}

static void pack_q4_0(const uint8_t *const b[8], vx_block_q4_0_r8 *o) {
    pack32_nib(b, offsetof(vx_block_q4_0, qs), -1, 0, o->d, NULL, NULL, o->qs);
}
static void pack_q5_0(const uint8_t *const b[8], vx_block_q5_0_r8 *o) {
    pack32_nib(b, offsetof(vx_block_q5_0, qs), offsetof(vx_block_q5_0, qh), 0, o->d, NULL, o->qh, o->qs);
}
static void pack_q4_1(const uint8_t *const b[8], vx_block_q4_1_r8 *o) {
    pack32_nib(b, offsetof(vx_block_q4_1, qs), -1, 1, o->d, o->m, NULL, o->qs);
}
static void pack_q5_1(const uint8_t *const b[8], vx_block_q5_1_r8 *o) {
    pack32_nib(b, offsetof(vx_block_q5_1, qs), offsetof(vx_block_q5_1, qh), 1, o->d, o->m, o->qh, o->qs);
}

static void pack_q8_0(const uint8_t *const b[8], vx_block_q8_0_r8 *o) {
    for (int r = 0; r < 8; r++) {
        const vx_block_q8_0 *x = (const vx_block_q8_0 *)(const void *)b[r];
        o->d[r] = x->d;
        for (int q = 0; q < 8; q++) memcpy(o->qs[q][r], x->qs + 4 * q, 4);
    }
}

/* Block i (32 elements) of an IQ4_XS or MXFP4 row as an IQ4_NL-shaped
 * block {fp16 d, 16 code bytes}: IQ4_XS's sub-block j = i % 8 of
 * super-block i / 8 with its scale d (ls - 32) rounded to fp16 (a relative
 * change of at most 2^-11: far below the 4-bit codes' error); MXFP4's
 * block with fp16(2^(e - 128)) (exact: vx_mxfp4_packable). The codes as
 * they are (IQ4_NL_R8 and MXFP4_R8 differ in the book only). */
static void nl_block(int type, const uint8_t *row, int64_t i, vx_block_iq4_nl *o) {
    if (type == VX_TYPE_MXFP4) {
        const vx_block_mxfp4 *x = (const vx_block_mxfp4 *)(const void *)row + i;
        o->d = vx_fp32_to_fp16(vx_e8m0_half(x->e));
        memcpy(o->qs, x->qs, 16);
        return;
    }
    const vx_block_iq4_xs *x = (const vx_block_iq4_xs *)(const void *)row + i / 8;
    const int j = (int)(i % 8);
    o->d = vx_fp32_to_fp16(vx_fp16_to_fp32(x->d) * (float)vx_iq4_xs_scale(x, j));
    memcpy(o->qs, x->qs + 16 * j, 16);
}

/* IQ4_XS rows into IQ4_NL_R8, MXFP4 rows into MXFP4_R8 (nl_block). */
static void repack_nl(int type, const void *src, size_t row_stride, int64_t nrows, int64_t n, void *dst) {
    const int64_t nb = n / 32;
    for (int64_t g = 0; g < nrows / 8; g++)
        for (int64_t i = 0; i < nb; i++) {
            vx_block_iq4_nl blk[8];
            const uint8_t *b[8];
            for (int r = 0; r < 8; r++) {
                nl_block(type, (const uint8_t *)src + (size_t)(8 * g + r) * row_stride, i, &blk[r]);
                b[r] = (const uint8_t *)&blk[r];
            }
            pack_q4_0(b, (vx_block_q4_0_r8 *)(void *)((uint8_t *)dst + (size_t)(g * nb + i) * sizeof(vx_block_iq4_nl_r8)));
        }
}

/* TQ1_0 / TQ2_0 rows into TQ2_0_R8: each block's codes and scale as the
 * Q2_K block of its values has them (vx_tq_block_as_q2_K: TQ2_0's bytes
 * as they are, TQ1_0's trits as 2-bit fields), in Q2_K_R8's qs order. */
static void repack_ternary(int type, const void *src, size_t row_stride, int64_t nrows, int64_t n, void *dst) {
    const int64_t nb = n / QK;
    const size_t bs = vx_row_size((vx_type)type, QK);
    for (int64_t g = 0; g < nrows / 8; g++)
        for (int64_t i = 0; i < nb; i++) {
            vx_block_tq2_0_r8 *o = (vx_block_tq2_0_r8 *)(void *)((uint8_t *)dst + (size_t)(g * nb + i) * sizeof *o);
            for (int r = 0; r < 8; r++) {
                const uint8_t *row = (const uint8_t *)src + (size_t)(8 * g + r) * row_stride;
                vx_block_q2_K blk;
                vx_tq_block_as_q2_K(type, row + (size_t)i * bs, &blk);
                o->d[r] = blk.d;
                for (int h = 0; h < 2; h++)
                    for (int q = 0; q < 8; q++) memcpy(o->qs[h][q][r], blk.qs + 32 * h + 4 * q, 4);
            }
        }
}

bool vx_mxfp4_packable(const void *blocks, int64_t nblocks) {
    const vx_block_mxfp4 *b = blocks;
    for (int64_t i = 0; i < nblocks; i++)
        if (b[i].e < 104 || b[i].e > 143) return false;
    return true;
}

void vx_repack_rows(int type, const void *src, size_t row_stride, int64_t nrows, int64_t n, void *dst) {
    if (type == VX_TYPE_MXFP4 || type == VX_TYPE_IQ4_XS) {
        repack_nl(type, src, row_stride, nrows, n, dst);
        return;
    }
    if (type == VX_TYPE_TQ1_0 || type == VX_TYPE_TQ2_0) {
        repack_ternary(type, src, row_stride, nrows, n, dst);
        return;
    }
    const int ptype = vx_repack_type(type);
    const int64_t nb = n / rec_elems(ptype);
    const size_t bs = vx_row_size((vx_type)type, rec_elems(ptype)), rs = rec_size(ptype);
    for (int64_t g = 0; g < nrows / 8; g++) {
        const uint8_t *rows[8];
        for (int r = 0; r < 8; r++) rows[r] = (const uint8_t *)src + (size_t)(8 * g + r) * row_stride;
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *b[8];
            for (int r = 0; r < 8; r++) b[r] = rows[r] + (size_t)i * bs;
            void *o = (uint8_t *)dst + (size_t)(g * nb + i) * rs;
            switch (ptype) {
            case VX_TYPE_Q4_K_R8: pack_q4_K(b, o); break;
            case VX_TYPE_Q5_K_R8: pack_q5_K(b, o); break;
            case VX_TYPE_Q6_K_R8: {
                const vx_block_q6_K *k[8];
                for (int r = 0; r < 8; r++) k[r] = (const vx_block_q6_K *)(const void *)b[r];
                pack_q6_K(k, o);
                break;
            }
            case VX_TYPE_Q3_K_R8: pack_q3_K(b, o); break;
            case VX_TYPE_Q2_K_R8: pack_q2_K(b, o); break;
            case VX_TYPE_Q4_0_R8: pack_q4_0(b, o); break;
            case VX_TYPE_IQ4_NL_R8: pack_q4_0(b, o); break; /* the same layout, book indices */
            case VX_TYPE_Q4_1_R8: pack_q4_1(b, o); break;
            case VX_TYPE_Q5_1_R8: pack_q5_1(b, o); break;
            case VX_TYPE_Q5_0_R8: pack_q5_0(b, o); break;
            default: pack_q8_0(b, o); break;
            }
        }
    }
}

/* Code of element 32s + l of row r in a Q4_K_R8 / Q5_K_R8 record (x5:
 * the Q5_K record, or NULL). */
static int k45_code(const vx_block_q4_K_r8 *b, const vx_block_q5_K_r8 *x5, int r, int s, int l) {
    const uint8_t byte = b->qs[s / 2][l / 4][r][l % 4];
    const int code = (s % 2 ? byte >> 4 : byte) & 15;
    return x5 ? code | ((x5->qh[l / 4][r][l % 4] >> s) & 1) << 4 : code;
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

/* Q2_K_R8 / Q3_K_R8 / TQ2_0_R8 element e of row r: its code (Q3_K: minus
 * 4, the offset), scale and (Q2_K, TQ2_0) min. */
static void q23_elem(int ptype, const void *rec, int r, int e, int *code, int *sc, int *mn) {
    const int h = e / 128, j = (e % 128) / 32, q = (e % 32) / 4, b = e % 4, s = e / 16;
    if (ptype == VX_TYPE_Q2_K_R8) {
        const vx_block_q2_K_r8 *x = rec;
        *code = (x->qs[h][q][r][b] >> (2 * j)) & 3;
        *sc = x->sc[s / 2][r][s % 2] & 15;
        *mn = x->sc[s / 2][r][s % 2] >> 4;
    } else if (ptype == VX_TYPE_TQ2_0_R8) { /* Q2_K's with scales and mins 1 */
        const vx_block_tq2_0_r8 *x = rec;
        *code = (x->qs[h][q][r][b] >> (2 * j)) & 3;
        *sc = *mn = 1;
    } else {
        const vx_block_q3_K_r8 *x = rec;
        *code = ((x->qs[h][q][r][b] >> (2 * j)) & 3) + 4 * ((x->hm[q][r][b] >> (e / 32)) & 1) - 4;
        *sc = x->sc[s / 2][r][s % 2];
        *mn = 0;
    }
}

/* The exact sums of row r of a Q4_K_R8 / Q5_K_R8 / Q3_K_R8 / Q2_K_R8
 * record against y: I (codes, offset removed, times their scales) and M
 * (mins times activation sums; 0 without mins). */
static void k_r8_sums(int ptype, const void *rec, int r, const vx_block_q8_K *y, int32_t *I, int32_t *M) {
    *I = *M = 0;
    if (ptype == VX_TYPE_Q4_K_R8 || ptype == VX_TYPE_Q5_K_R8) {
        const vx_block_q4_K_r8 *b = rec;
        const vx_block_q5_K_r8 *x5 = ptype == VX_TYPE_Q5_K_R8 ? rec : NULL;
        for (int s = 0; s < 8; s++) { /* sub-block of 32 */
            int32_t sum = 0;
            for (int l = 0; l < 32; l++) sum += k45_code(b, x5, r, s, l) * y->qs[32 * s + l];
            *I += (int32_t)b->sc[s / 2][r][s % 2] * sum;
            *M += (int32_t)b->mn[s / 2][r][s % 2] * (y->bsums[2 * s] + y->bsums[2 * s + 1]);
        }
        return;
    }
    for (int e = 0; e < QK; e++) {
        int code, sc, mn;
        q23_elem(ptype, rec, r, e, &code, &sc, &mn);
        *I += sc * code * y->qs[e];
        if (e % 16 == 0) *M += mn * y->bsums[e / 16];
    }
}

/* The canonical reference of the K-quant records with a dmin (Q4_K,
 * Q5_K, Q2_K) or none (Q3_K, whose M is 0). */
static void gemv_k_r8_ref(int ptype, int64_t n, const void *w, size_t row_stride, int nrows, const void *vy,
                          float *out) {
    const int64_t nb = n / QK;
    const size_t rs = rec_size(ptype);
    const vx_block_q8_K *y = vy;
    for (int g = 0; g < nrows / 8; g++) {
        const uint8_t *x = (const uint8_t *)w + (size_t)8 * g * row_stride;
        for (int r = 0; r < 8; r++) {
            float acc = 0;
            for (int64_t i = 0; i < nb; i++) {
                const void *rec = x + (size_t)i * rs;
                int32_t I, M;
                k_r8_sums(ptype, rec, r, &y[i], &I, &M);
                const float yd = y[i].d;
                const uint16_t *d = rec; /* every record starts with d[8], then (with mins) dmin[8] */
                acc = fmaf(vx_fp16_to_fp32(d[r]) * yd, (float)I, acc);
                /* TQ2_0's dmin is d */
                const uint16_t dmin = ptype == VX_TYPE_TQ2_0_R8 ? d[r] : d[8 + r];
                if (ptype != VX_TYPE_Q3_K_R8) acc = fmaf(-(vx_fp16_to_fp32(dmin) * yd), (float)M, acc);
            }
            out[8 * g + r] = acc;
        }
    }
}

void vx_gemv_q4_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv_k_r8_ref(VX_TYPE_Q4_K_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q5_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv_k_r8_ref(VX_TYPE_Q5_K_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q3_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv_k_r8_ref(VX_TYPE_Q3_K_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q2_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv_k_r8_ref(VX_TYPE_Q2_K_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_tq2_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv_k_r8_ref(VX_TYPE_TQ2_0_R8, n, w, row_stride, nrows, y, out);
}

/* Code (offset removed; IQ4_NL: its book value) of element e of row r in
 * a 32-element record. */
static int code32(int ptype, const void *rec, int r, int e) {
    if (ptype == VX_TYPE_Q8_0_R8) return ((const vx_block_q8_0_r8 *)rec)->qs[e / 4][r][e % 4];
    const uint8_t *qs = ptype == VX_TYPE_Q4_0_R8 || ptype == VX_TYPE_IQ4_NL_R8 || ptype == VX_TYPE_MXFP4_R8
                            ? ((const vx_block_q4_0_r8 *)rec)->qs[0][0]
                        : ptype == VX_TYPE_Q5_0_R8 ? ((const vx_block_q5_0_r8 *)rec)->qs[0][0]
                        : ptype == VX_TYPE_Q4_1_R8 ? ((const vx_block_q4_1_r8 *)rec)->qs[0][0]
                                                   : ((const vx_block_q5_1_r8 *)rec)->qs[0][0];
    const int c = (e % 16) / 4, b = e % 4; /* qs byte 4c + b of the row */
    const int nib = (qs[(c * 8 + r) * 4 + b] >> (e < 16 ? 0 : 4)) & 15;
    switch (ptype) {
    case VX_TYPE_Q4_0_R8: return nib - 8;
    case VX_TYPE_Q4_1_R8: return nib;
    case VX_TYPE_IQ4_NL_R8: return vx_iq4nl_values[nib];
    case VX_TYPE_MXFP4_R8: return vx_mxfp4_values[nib];
    case VX_TYPE_Q5_0_R8: return (nib | ((((const vx_block_q5_0_r8 *)rec)->qh[r][e % 4] >> (e / 4)) & 1) << 4) - 16;
    default: return nib | ((((const vx_block_q5_1_r8 *)rec)->qh[r][e % 4] >> (e / 4)) & 1) << 4;
    }
}

/* The min m of row r in a Q4_1_R8 / Q5_1_R8 record (0: none). */
static float min32(int ptype, const void *rec, int r) {
    if (ptype == VX_TYPE_Q4_1_R8) return vx_fp16_to_fp32(((const vx_block_q4_1_r8 *)rec)->m[r]);
    if (ptype == VX_TYPE_Q5_1_R8) return vx_fp16_to_fp32(((const vx_block_q5_1_r8 *)rec)->m[r]);
    return 0.0f;
}

static void gemv32_r8_ref(int ptype, int64_t n, const void *w, size_t row_stride, int nrows, const void *vy,
                          float *out) {
    const int64_t nb = n / 32;
    const size_t rs = rec_size(ptype);
    /* Q8_0 activations {d, qs}, or Q8_1 {d, s, qs} for the types with a min */
    const int hm = ptype == VX_TYPE_Q4_1_R8 || ptype == VX_TYPE_Q5_1_R8;
    const size_t ys = hm ? sizeof(vx_block_q8_1) : sizeof(vx_block_q8_0);
    for (int g = 0; g < nrows / 8; g++) {
        const uint8_t *x = (const uint8_t *)w + (size_t)8 * g * row_stride;
        for (int r = 0; r < 8; r++) {
            float acc[2] = {0, 0}; /* even and odd blocks */
            for (int64_t i = 0; i < nb; i++) {
                const void *rec = x + (size_t)i * rs;
                const uint8_t *yb = (const uint8_t *)vy + (size_t)i * ys;
                const int8_t *yq = (const int8_t *)(yb + (hm ? offsetof(vx_block_q8_1, qs) : offsetof(vx_block_q8_0, qs)));
                uint16_t dy, sy;
                memcpy(&dy, yb, 2);
                memcpy(&sy, yb + 2, 2);
                int32_t I = 0;
                for (int e = 0; e < 32; e++) I += code32(ptype, rec, r, e) * yq[e];
                const uint16_t d = ((const uint16_t *)rec)[r]; /* every record starts with d[8] */
                acc[i % 2] = fmaf(vx_fp16_to_fp32(d) * vx_fp16_to_fp32(dy), (float)I, acc[i % 2]);
                if (hm) acc[i % 2] = fmaf(min32(ptype, rec, r), vx_fp16_to_fp32(sy), acc[i % 2]);
            }
            out[8 * g + r] = acc[0] + acc[1];
        }
    }
}

void vx_gemv_q4_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_Q4_0_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q5_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_Q5_0_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q8_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_Q8_0_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q4_1_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_Q4_1_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_q5_1_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_Q5_1_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_iq4_nl_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_IQ4_NL_R8, n, w, row_stride, nrows, y, out);
}
void vx_gemv_mxfp4_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out) {
    gemv32_r8_ref(VX_TYPE_MXFP4_R8, n, w, row_stride, nrows, y, out);
}

void vx_dequant_row(int type, const void *w, size_t row_stride, int64_t r, int64_t n, float *dst) {
    const size_t rsz = rec_size(type);
    if (rsz == 0) { /* a file layout */
        vx_type_get_traits(type)->to_float((const uint8_t *)w + (size_t)r * row_stride, dst, n);
        return;
    }
    const int64_t be = rec_elems(type), nb = n / be;
    const uint8_t *x = (const uint8_t *)w + (size_t)(r / 8) * 8 * row_stride;
    const int rr = (int)(r % 8);
    for (int64_t i = 0; i < nb; i++, dst += be) {
        const void *rec = x + (size_t)i * rsz;
        if (type == VX_TYPE_Q4_K_R8 || type == VX_TYPE_Q5_K_R8) {
            const vx_block_q4_K_r8 *b = rec;
            const vx_block_q5_K_r8 *x5 = type == VX_TYPE_Q5_K_R8 ? rec : NULL;
            const float d = vx_fp16_to_fp32(b->d[rr]), dmin = vx_fp16_to_fp32(b->dmin[rr]);
            for (int s = 0; s < 8; s++) {
                const float ds = d * b->sc[s / 2][rr][s % 2], ms = dmin * b->mn[s / 2][rr][s % 2];
                for (int l = 0; l < 32; l++) dst[32 * s + l] = ds * (float)k45_code(b, x5, rr, s, l) - ms;
            }
        } else if (type == VX_TYPE_Q6_K_R8) {
            const vx_block_q6_K_r8 *b = rec;
            const float d = vx_fp16_to_fp32(b->d[rr]);
            for (int e = 0; e < QK; e++) {
                const int h = e / 128, k = (e % 128) / 32, l = e % 32, j = e / 16;
                const int lo = (b->q[h][l / 4][k % 2][rr][l % 4] >> (4 * (k / 2))) & 15;
                const int hi = (b->q[h][l / 4][2][rr][l % 4] >> (2 * k)) & 3;
                dst[e] = d * (float)b->sc[j / 2][rr][j % 2] * (float)((lo | hi << 4) - 32);
            }
        } else if (type == VX_TYPE_Q3_K_R8 || type == VX_TYPE_Q2_K_R8 || type == VX_TYPE_TQ2_0_R8) {
            const float d = vx_fp16_to_fp32(((const uint16_t *)rec)[rr]);
            const float dmin = type == VX_TYPE_Q2_K_R8   ? vx_fp16_to_fp32(((const vx_block_q2_K_r8 *)rec)->dmin[rr])
                               : type == VX_TYPE_TQ2_0_R8 ? d
                                                          : 0.0f;
            for (int e = 0; e < QK; e++) {
                int code, sc, mn;
                q23_elem(type, rec, rr, e, &code, &sc, &mn);
                dst[e] = d * (float)sc * (float)code - dmin * (float)mn;
            }
        } else {
            const float d = vx_fp16_to_fp32(((const uint16_t *)rec)[rr]), m = min32(type, rec, rr);
            for (int e = 0; e < 32; e++) dst[e] = d * (float)code32(type, rec, rr, e) + m;
        }
    }
}
