/*
 * quant.h - tensor element types: GGUF/ggml type ids, block layouts and the
 * one traits table every kernel and loader consults.
 *
 * A quantized row of n elements is n / blck_size blocks of type_size bytes.
 * Block layouts follow the GGUF specification (ggml's block_* structs), so
 * rows can be read straight from a mapped file. Half-precision fields are
 * stored as raw uint16_t bit patterns (IEEE fp16 unless named *_bf16).
 */
#ifndef VX_QUANT_H
#define VX_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ggml type ids as stored in GGUF tensor infos. */
typedef enum vx_type {
    VX_TYPE_F32 = 0,
    VX_TYPE_F16 = 1,
    VX_TYPE_Q4_0 = 2,
    VX_TYPE_Q4_1 = 3,
    VX_TYPE_Q5_0 = 6,
    VX_TYPE_Q5_1 = 7,
    VX_TYPE_Q8_0 = 8,
    VX_TYPE_Q8_1 = 9,
    VX_TYPE_Q2_K = 10,
    VX_TYPE_Q3_K = 11,
    VX_TYPE_Q4_K = 12,
    VX_TYPE_Q5_K = 13,
    VX_TYPE_Q6_K = 14,
    VX_TYPE_Q8_K = 15,
    VX_TYPE_IQ2_XXS = 16,
    VX_TYPE_IQ2_XS = 17,
    VX_TYPE_IQ3_XXS = 18,
    VX_TYPE_IQ1_S = 19,
    VX_TYPE_IQ4_NL = 20,
    VX_TYPE_IQ3_S = 21,
    VX_TYPE_IQ2_S = 22,
    VX_TYPE_IQ4_XS = 23,
    VX_TYPE_I8 = 24,
    VX_TYPE_I16 = 25,
    VX_TYPE_I32 = 26,
    VX_TYPE_I64 = 27,
    VX_TYPE_F64 = 28,
    VX_TYPE_IQ1_M = 29,
    VX_TYPE_BF16 = 30,
    VX_TYPE_TQ1_0 = 34,
    VX_TYPE_TQ2_0 = 35,
    VX_TYPE_MXFP4 = 39,
    VX_TYPE_COUNT = 53 /* size of the traits table and kernel tables (ids are sparse) */
} vx_type;

#define VX_QK4_0 32
#define VX_QK4_1 32
#define VX_QK5_0 32
#define VX_QK5_1 32
#define VX_QK8_0 32
#define VX_QK8_1 32
#define VX_QK_K 256
#define VX_K_SCALE_SIZE 12
#define VX_QK4_NL 32
#define VX_QK_MXFP4 32

typedef struct { uint16_t d; uint8_t qs[VX_QK4_0 / 2]; } vx_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[VX_QK4_1 / 2]; } vx_block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[VX_QK5_0 / 2]; } vx_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[VX_QK5_1 / 2]; } vx_block_q5_1;
typedef struct { uint16_t d; int8_t qs[VX_QK8_0]; } vx_block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[VX_QK8_1]; } vx_block_q8_1; /* s = d * sum(qs) */
typedef struct {
    uint8_t scales[VX_QK_K / 16]; /* 4-bit scale | 4-bit min << 4 */
    uint8_t qs[VX_QK_K / 4];
    uint16_t d, dmin;
} vx_block_q2_K;
typedef struct {
    uint8_t hmask[VX_QK_K / 8];
    uint8_t qs[VX_QK_K / 4];
    uint8_t scales[12]; /* 16 6-bit scales */
    uint16_t d;
} vx_block_q3_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[VX_K_SCALE_SIZE]; /* 8 6-bit scales + 8 6-bit mins */
    uint8_t qs[VX_QK_K / 2];
} vx_block_q4_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[VX_K_SCALE_SIZE];
    uint8_t qh[VX_QK_K / 8];
    uint8_t qs[VX_QK_K / 2];
} vx_block_q5_K;
typedef struct {
    uint8_t ql[VX_QK_K / 2];
    uint8_t qh[VX_QK_K / 4];
    int8_t scales[VX_QK_K / 16];
    uint16_t d;
} vx_block_q6_K;
typedef struct {
    float d;
    int8_t qs[VX_QK_K];
    int16_t bsums[VX_QK_K / 16]; /* sum of qs in groups of 16 */
} vx_block_q8_K;
typedef struct { uint16_t d; uint8_t qs[VX_QK4_NL / 2]; } vx_block_iq4_nl;
/* MXFP4 (OCP Microscaling, gpt-oss's experts): 32 FP4 (E2M1) elements
 * sharing one E8M0 exponent e; element j is the low nibble of qs[j], j + 16
 * its high one (Q4_0's order). A code's value is vx_mxfp4_values[code] / 2
 * times 2^(e - 127): the book holds doubled E2M1 values (integers) and the
 * scale vx_e8m0_half(e) = 2^(e - 128) takes the half. */
typedef struct { uint8_t e; uint8_t qs[VX_QK_MXFP4 / 2]; } vx_block_mxfp4;
/* IQ4_XS: 256 elements, 8 sub-blocks of 32 with IQ4_NL's code book and
 * nibble order; sub-block j's scale is d (ls_j - 32), ls_j 6 bits: its low
 * 4 in nibble j % 2 of scales_l[j / 2], its high 2 in bits 2j of scales_h. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[VX_QK_K / 64];
    uint8_t qs[VX_QK_K / 2];
} vx_block_iq4_xs;
/* The ternary types (BitNet b1.58-style weights: -1, 0, +1 times one fp16
 * scale per 256 elements). TQ2_0: element 128 h + 32 l + m (h < 2, l < 4,
 * m < 32) in bits 2l..2l+1 of qs[32 h + m], as code t (0..2) for t - 1.
 * TQ1_0: five trits per byte in qs, the first the most significant, the
 * byte holding ceil(v 256 / 243) of their base-3 value v: element
 * m + 32 n (m < 32, n < 5) in qs[m], 160 + m + 16 n (m < 16) in qs[32 + m];
 * the last 16, 240 + 4 n + j (n, j < 4), as trit n of qh[j] (four trits,
 * the fifth 0). */
typedef struct {
    uint8_t qs[(VX_QK_K - 4 * VX_QK_K / 64) / 5];
    uint8_t qh[VX_QK_K / 64];
    uint16_t d;
} vx_block_tq1_0;
typedef struct {
    uint8_t qs[VX_QK_K / 4];
    uint16_t d;
} vx_block_tq2_0;
/* The grid i-quants (llama.cpp's IQ1/IQ2/IQ3 types): 256 elements in 32
 * groups of 8 (IQ3: 64 groups of 4) whose magnitudes are one entry of a
 * fixed code book (quant_iq_grids.c), with signs and sub-block scales
 * beside them; quant_iq.c spells out each layout. */
typedef struct { uint16_t d; uint8_t qs[VX_QK_K / 4]; } vx_block_iq2_xxs;
typedef struct { uint16_t d; uint8_t qs[VX_QK_K / 4]; uint8_t scales[VX_QK_K / 32]; } vx_block_iq2_xs;
typedef struct {
    uint16_t d;
    uint8_t qs[VX_QK_K / 4]; /* 32 grid index low bytes, then 32 sign bytes */
    uint8_t qh[VX_QK_K / 32];
    uint8_t scales[VX_QK_K / 32];
} vx_block_iq2_s;
typedef struct { uint16_t d; uint8_t qs[3 * VX_QK_K / 8]; } vx_block_iq3_xxs;
typedef struct {
    uint16_t d;
    uint8_t qs[VX_QK_K / 4];
    uint8_t qh[VX_QK_K / 32];
    uint8_t signs[VX_QK_K / 8];
    uint8_t scales[VX_QK_K / 64];
} vx_block_iq3_s;
typedef struct { uint16_t d; uint8_t qs[VX_QK_K / 8]; uint8_t qh[VX_QK_K / 16]; } vx_block_iq1_s;
/* IQ1_M has no scale field: its fp16 block scale is the top nibbles of the
 * four little-endian 16-bit words of scales */
typedef struct { uint8_t qs[VX_QK_K / 8]; uint8_t qh[VX_QK_K / 16]; uint8_t scales[VX_QK_K / 32]; } vx_block_iq1_m;

_Static_assert(sizeof(vx_block_q4_0) == 18, "q4_0 size");
_Static_assert(sizeof(vx_block_q4_1) == 20, "q4_1 size");
_Static_assert(sizeof(vx_block_q5_0) == 22, "q5_0 size");
_Static_assert(sizeof(vx_block_q5_1) == 24, "q5_1 size");
_Static_assert(sizeof(vx_block_q8_0) == 34, "q8_0 size");
_Static_assert(sizeof(vx_block_q8_1) == 36, "q8_1 size");
_Static_assert(sizeof(vx_block_q2_K) == 84, "q2_K size");
_Static_assert(sizeof(vx_block_q3_K) == 110, "q3_K size");
_Static_assert(sizeof(vx_block_q4_K) == 144, "q4_K size");
_Static_assert(sizeof(vx_block_q5_K) == 176, "q5_K size");
_Static_assert(sizeof(vx_block_q6_K) == 210, "q6_K size");
_Static_assert(sizeof(vx_block_q8_K) == 292, "q8_K size");
_Static_assert(sizeof(vx_block_iq4_nl) == 18, "iq4_nl size");
_Static_assert(sizeof(vx_block_mxfp4) == 17, "mxfp4 size");
_Static_assert(sizeof(vx_block_iq4_xs) == 136, "iq4_xs size");
_Static_assert(sizeof(vx_block_tq1_0) == 54, "tq1_0 size");
_Static_assert(sizeof(vx_block_tq2_0) == 66, "tq2_0 size");
_Static_assert(sizeof(vx_block_iq2_xxs) == 66, "iq2_xxs size");
_Static_assert(sizeof(vx_block_iq2_xs) == 74, "iq2_xs size");
_Static_assert(sizeof(vx_block_iq2_s) == 82, "iq2_s size");
_Static_assert(sizeof(vx_block_iq3_xxs) == 98, "iq3_xxs size");
_Static_assert(sizeof(vx_block_iq3_s) == 110, "iq3_s size");
_Static_assert(sizeof(vx_block_iq1_s) == 50, "iq1_s size");
_Static_assert(sizeof(vx_block_iq1_m) == 56, "iq1_m size");
/* Sub-block j's signed scale multiple ls - 32 (-32..31) of an IQ4_XS block. */
static inline int vx_iq4_xs_scale(const vx_block_iq4_xs *b, int j) {
    return (((b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | (((b->scales_h >> (2 * j)) & 3) << 4)) - 32;
}

/* Convert n elements (a multiple of blck_size) to float. */
typedef void (*vx_to_float_fn)(const void *src, float *dst, int64_t n);
/* Quantize n floats (a multiple of blck_size) into blocks. */
typedef void (*vx_from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x, y) over n elements: x of this type, y of the type's vec_dot_type. */
typedef void (*vx_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

typedef struct vx_type_traits {
    const char *name;            /* "Q4_K", ...; NULL for unused ids */
    int64_t blck_size;           /* elements per block */
    size_t type_size;            /* bytes per block */
    bool is_quantized;
    vx_to_float_fn to_float;     /* reference dequantization (plain C) */
    vx_from_float_fn from_float; /* reference quantization (plain C); NULL if none */
    vx_type vec_dot_type;        /* activation type the dot product pairs with */
    vx_vec_dot_fn vec_dot;       /* reference dot product (plain C) */
} vx_type_traits;

/* Traits of a type id, or NULL for an unknown/unsupported id. */
const vx_type_traits *vx_type_get_traits(int type);
const char *vx_type_name(int type); /* "?" when unknown */
/* Parses a type name ("q4_k", "Q8_0", "f16", ...); returns -1 if unknown. */
int vx_type_from_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t vx_row_size(vx_type type, int64_t n);

/* ---- Load-time layouts (never stored in files; quant_repack.c) ----
 * A weight with a multiple of 8 rows may be repacked at load so that each
 * block (super-block) of 8 consecutive rows is one record whose 32-byte
 * vectors hold, in 32-bit lane r, four consecutive code bytes of row r:
 * the row-lane form the AVX2 kernels compute in, with no transpose at run
 * time and one sequential read stream per 8 rows. Group g (rows 8g ..
 * 8g + 7) starts at byte 8 g row_size, row_size = n / block * sizeof(record)
 * / 8 (the file's bytes per row, plus 2.8% for Q4_K, 2.3% for Q5_K, 3.6% for Q3_K).
 * Every product keeps
 * the canonical order of the plain layout, so results are bit-identical to
 * it. Ids sit above every GGUF id (39, MXFP4, is the highest) and have no
 * traits (vx_type_get_traits returns NULL), so no file can name them. */
#define VX_TYPE_Q4_K_R8 40
#define VX_TYPE_Q6_K_R8 41
#define VX_TYPE_Q4_0_R8 42
#define VX_TYPE_Q5_0_R8 43
#define VX_TYPE_Q8_0_R8 44
#define VX_TYPE_Q3_K_R8 45
#define VX_TYPE_Q2_K_R8 46
#define VX_TYPE_Q5_K_R8 47
#define VX_TYPE_Q4_1_R8 48
#define VX_TYPE_Q5_1_R8 49
#define VX_TYPE_IQ4_NL_R8 50
#define VX_TYPE_TQ2_0_R8 51
#define VX_TYPE_MXFP4_R8 52

typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[4][8][2];     /* [p][r][j]: scale of sub-block 2p + j of row r */
    uint8_t mn[4][8][2];     /* [p][r][j]: its min */
    uint8_t qs[4][8][8][4];  /* [c][q][r][b]: byte 32c + 4q + b of row r's qs */
} vx_block_q4_K_r8;
/* Q5_K: Q4_K_R8's fields for the low nibbles, scales and mins, and the
 * fifth bits: qh[q][r][b] is byte 4q + b of row r's qh (bit s: element
 * 32s + 4q + b). */
typedef struct {
    vx_block_q4_K_r8 k4;
    uint8_t qh[8][8][4];
} vx_block_q5_K_r8;
typedef struct {
    uint16_t d[8];
    int8_t sc[8][8][2];        /* [p][r][j]: scale of 16-element sub-block 2p + j of row r */
    /* [h][q][k][r][b], in the order the kernels read them: k = 0, 1: byte
     * 64h + 32k + 4q + b of row r's ql; k = 2: byte 32h + 4q + b of its qh */
    uint8_t q[2][8][3][8][4];
} vx_block_q6_K_r8;
/* 32-element blocks. qs[c][r][b] is byte 4c + b of row r's qs: its low
 * nibble element 4c + b, its high nibble element 16 + 4c + b. */
typedef struct {
    uint16_t d[8];
    uint8_t qs[4][8][4];
} vx_block_q4_0_r8;
/* Q5_0's fifth bits, reordered per row: bit q of qh[r][b] is the bit of
 * element 4q + b, so one shift per quad q lines the bits up bytewise. */
typedef struct {
    uint16_t d[8];
    uint8_t qh[8][4];
    uint8_t qs[4][8][4];
} vx_block_q5_0_r8;
typedef struct {
    uint16_t d[8];
    int8_t qs[8][8][4]; /* [q][r][b]: element 4q + b of row r */
} vx_block_q8_0_r8;
/* Q4_1, Q5_1 (with their mins m) and IQ4_NL (book indices) as Q4_0_R8,
 * Q5_0_R8. */
typedef struct {
    uint16_t d[8], m[8];
    uint8_t qs[4][8][4];
} vx_block_q4_1_r8;
typedef struct {
    uint16_t d[8], m[8];
    uint8_t qh[8][4];
    uint8_t qs[4][8][4];
} vx_block_q5_1_r8;
typedef vx_block_q4_0_r8 vx_block_iq4_nl_r8;
/* MXFP4 as IQ4_NL_R8's record with MXFP4's book (vx_mxfp4_values): each
 * d[r] the fp16 of the block's scale 2^(e - 128), exact for e in 104..143
 * (fp16's range, subnormals included): tensors with other exponents keep
 * the file layout (vx_mxfp4_packable) */
typedef vx_block_q4_0_r8 vx_block_mxfp4_r8;
/* Q2_K and Q3_K: qs[h][q][r][b] is byte 32h + 4q + b of row r's qs (bits
 * 2j: element 128h + 32j + 4q + b); Q3_K's hm[q][r][b] byte 4q + b of its
 * hmask (bit g: the high bit of element 32g + 4q + b) and its scales
 * decoded to int8 (-32..31; 16 bytes a row where the file packs 12). */
typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[8][8][2]; /* [p][r][j]: scales byte (scale | min << 4) of sub-block 2p + j of row r */
    uint8_t qs[2][8][8][4];
} vx_block_q2_K_r8;
typedef struct {
    uint16_t d[8];
    int8_t sc[8][8][2]; /* [p][r][j]: scale of sub-block 2p + j of row r */
    uint8_t hm[8][8][4];
    uint8_t qs[2][8][8][4];
} vx_block_q3_K_r8;
/* TQ1_0 and TQ2_0 rows (quant_repack.c): Q2_K_R8's code bytes (code t
 * for the value (t - 1) d, TQ2_0's own 2-bit layout) and the scales, with
 * no sub-block scales or mins: the kernels take Q2_K_R8's with every
 * scale and min 1 and dmin = d, and give its bits on the Q2_K blocks of
 * the same values (vx_tq_block_as_q2_K) in TQ2_0's 66 bytes a row and
 * block instead of Q2_K's 84. */
typedef struct {
    uint16_t d[8];
    uint8_t qs[2][8][8][4];
} vx_block_tq2_0_r8;
_Static_assert(sizeof(vx_block_q4_K_r8) == 1184, "q4_K_r8 size");
_Static_assert(sizeof(vx_block_q5_K_r8) == 1440, "q5_K_r8 size");
_Static_assert(sizeof(vx_block_q6_K_r8) == 1680, "q6_K_r8 size");
_Static_assert(sizeof(vx_block_q4_0_r8) == 8 * sizeof(vx_block_q4_0), "q4_0_r8 size");
_Static_assert(sizeof(vx_block_q5_0_r8) == 8 * sizeof(vx_block_q5_0), "q5_0_r8 size");
_Static_assert(sizeof(vx_block_q8_0_r8) == 8 * sizeof(vx_block_q8_0), "q8_0_r8 size");
_Static_assert(sizeof(vx_block_q2_K_r8) == 8 * sizeof(vx_block_q2_K), "q2_K_r8 size");
_Static_assert(sizeof(vx_block_q4_1_r8) == 8 * sizeof(vx_block_q4_1), "q4_1_r8 size");
_Static_assert(sizeof(vx_block_q5_1_r8) == 8 * sizeof(vx_block_q5_1), "q5_1_r8 size");
_Static_assert(sizeof(vx_block_iq4_nl_r8) == 8 * sizeof(vx_block_iq4_nl), "iq4_nl_r8 size");
_Static_assert(sizeof(vx_block_q3_K_r8) == 8 * sizeof(vx_block_q3_K) + 32, "q3_K_r8 size");
_Static_assert(sizeof(vx_block_tq2_0_r8) == 8 * sizeof(vx_block_tq2_0), "tq2_0_r8 size");

/* The packed type of a weight type (-1: none). */
int vx_repack_type(int type);
/* Bytes per row of the packed type for rows of n elements. */
size_t vx_repack_row_size(int ptype, int64_t n);
/* Repacks nrows (a multiple of 8) rows of n elements, row_stride bytes
 * apart, into dst (nrows * vx_repack_row_size bytes). */
void vx_repack_rows(int type, const void *src, size_t row_stride, int64_t nrows, int64_t n, void *dst);
/* Row r (of n elements) of a weight matrix in a file layout or a packed
 * one (rows row_stride bytes apart; for a packed type, w at a group start)
 * as floats: the reference dequantization. */
void vx_dequant_row(int type, const void *w, size_t row_stride, int64_t r, int64_t n, float *dst);
/* Reference GEMV on packed rows (nrows a multiple of 8, w at a group
 * start), in the canonical order: Q8_K activations for the K types, Q8_0
 * for the 32-element ones. */
void vx_gemv_q4_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q5_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q6_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q4_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q5_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q8_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q4_1_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q5_1_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_iq4_nl_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_mxfp4_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
/* Whether every block exponent of nblocks MXFP4 blocks is one MXFP4_R8's
 * fp16 scales hold exactly (104..143). */
bool vx_mxfp4_packable(const void *blocks, int64_t nblocks);
void vx_gemv_q3_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_q2_K_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);
void vx_gemv_tq2_0_r8_ref(int64_t n, const void *w, size_t row_stride, int nrows, const void *y, float *out);

/* IQ4_NL's non-linear 4-bit code book. */
extern const int8_t vx_iq4nl_values[16];
/* Twice the E2M1 values of the 16 FP4 codes: sign bit 3, then 0, 0.5, 1,
 * 1.5, 2, 3, 4, 6 */
extern const int8_t vx_mxfp4_values[16];

/* 2^(e - 128) as a float, exact for every E8M0 byte (e = 0 and 1 are
 * subnormal floats); e = 255 (the format's NaN) gives 2^127. */
static inline float vx_e8m0_half(uint8_t e) {
    const uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00200000u << e;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
