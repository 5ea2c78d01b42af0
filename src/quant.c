/*
 * quant.c - the tensor-type traits table (names, block geometry, reference
 * kernels) and the lookups built on it. The kernels themselves live in
 * quant_legacy.c and quant_k.c (see quant_ref.h).
 */
#include "quant.h"

#include <stdint.h>
#include <strings.h>

#include "common.h"
#include "quant_ref.h"

const int8_t vx_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
const int8_t vx_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Indexed by ggml type id; ids without a name are unknown. Q8_1 and Q8_K
 * exist as activation types for the dot products, but get a dequantizer and
 * a self-dot too so they can be tested like the others. */
static const vx_type_traits traits_table[VX_TYPE_COUNT] = {
    [VX_TYPE_F32] = {"F32", 1, sizeof(float), false, vx_dequantize_row_f32, vx_quantize_row_f32,
                     VX_TYPE_F32, vx_vec_dot_f32},
    [VX_TYPE_F16] = {"F16", 1, sizeof(uint16_t), false, vx_dequantize_row_f16, vx_quantize_row_f16,
                     VX_TYPE_F16, vx_vec_dot_f16},
    [VX_TYPE_BF16] = {"BF16", 1, sizeof(uint16_t), false, vx_dequantize_row_bf16,
                      vx_quantize_row_bf16, VX_TYPE_BF16, vx_vec_dot_bf16},
    [VX_TYPE_Q4_0] = {"Q4_0", VX_QK4_0, sizeof(vx_block_q4_0), true, vx_dequantize_row_q4_0,
                      vx_quantize_row_q4_0, VX_TYPE_Q8_0, vx_vec_dot_q4_0_q8_0},
    [VX_TYPE_Q4_1] = {"Q4_1", VX_QK4_1, sizeof(vx_block_q4_1), true, vx_dequantize_row_q4_1,
                      vx_quantize_row_q4_1, VX_TYPE_Q8_1, vx_vec_dot_q4_1_q8_1},
    [VX_TYPE_Q5_0] = {"Q5_0", VX_QK5_0, sizeof(vx_block_q5_0), true, vx_dequantize_row_q5_0,
                      vx_quantize_row_q5_0, VX_TYPE_Q8_0, vx_vec_dot_q5_0_q8_0},
    [VX_TYPE_Q5_1] = {"Q5_1", VX_QK5_1, sizeof(vx_block_q5_1), true, vx_dequantize_row_q5_1,
                      vx_quantize_row_q5_1, VX_TYPE_Q8_1, vx_vec_dot_q5_1_q8_1},
    [VX_TYPE_Q8_0] = {"Q8_0", VX_QK8_0, sizeof(vx_block_q8_0), true, vx_dequantize_row_q8_0,
                      vx_quantize_row_q8_0, VX_TYPE_Q8_0, vx_vec_dot_q8_0_q8_0},
    [VX_TYPE_Q8_1] = {"Q8_1", VX_QK8_1, sizeof(vx_block_q8_1), true, vx_dequantize_row_q8_1,
                      vx_quantize_row_q8_1, VX_TYPE_Q8_1, vx_vec_dot_q8_1_q8_1},
    [VX_TYPE_Q2_K] = {"Q2_K", VX_QK_K, sizeof(vx_block_q2_K), true, vx_dequantize_row_q2_K,
                      vx_quantize_row_q2_K, VX_TYPE_Q8_K, vx_vec_dot_q2_K_q8_K},
    [VX_TYPE_Q3_K] = {"Q3_K", VX_QK_K, sizeof(vx_block_q3_K), true, vx_dequantize_row_q3_K,
                      vx_quantize_row_q3_K, VX_TYPE_Q8_K, vx_vec_dot_q3_K_q8_K},
    [VX_TYPE_Q4_K] = {"Q4_K", VX_QK_K, sizeof(vx_block_q4_K), true, vx_dequantize_row_q4_K,
                      vx_quantize_row_q4_K, VX_TYPE_Q8_K, vx_vec_dot_q4_K_q8_K},
    [VX_TYPE_Q5_K] = {"Q5_K", VX_QK_K, sizeof(vx_block_q5_K), true, vx_dequantize_row_q5_K,
                      vx_quantize_row_q5_K, VX_TYPE_Q8_K, vx_vec_dot_q5_K_q8_K},
    [VX_TYPE_Q6_K] = {"Q6_K", VX_QK_K, sizeof(vx_block_q6_K), true, vx_dequantize_row_q6_K,
                      vx_quantize_row_q6_K, VX_TYPE_Q8_K, vx_vec_dot_q6_K_q8_K},
    [VX_TYPE_Q8_K] = {"Q8_K", VX_QK_K, sizeof(vx_block_q8_K), true, vx_dequantize_row_q8_K,
                      vx_quantize_row_q8_K, VX_TYPE_Q8_K, vx_vec_dot_q8_K_q8_K},
    [VX_TYPE_IQ4_NL] = {"IQ4_NL", VX_QK4_NL, sizeof(vx_block_iq4_nl), true,
                        vx_dequantize_row_iq4_nl, vx_quantize_row_iq4_nl, VX_TYPE_Q8_0,
                        vx_vec_dot_iq4_nl_q8_0},
    [VX_TYPE_IQ4_XS] = {"IQ4_XS", VX_QK_K, sizeof(vx_block_iq4_xs), true,
                        vx_dequantize_row_iq4_xs, vx_quantize_row_iq4_xs, VX_TYPE_Q8_0,
                        vx_vec_dot_iq4_xs_q8_0},
    [VX_TYPE_MXFP4] = {"MXFP4", VX_QK_MXFP4, sizeof(vx_block_mxfp4), true, vx_dequantize_row_mxfp4,
                       vx_quantize_row_mxfp4, VX_TYPE_Q8_0, vx_vec_dot_mxfp4_q8_0},
    [VX_TYPE_TQ1_0] = {"TQ1_0", VX_QK_K, sizeof(vx_block_tq1_0), true, vx_dequantize_row_tq1_0,
                       vx_quantize_row_tq1_0, VX_TYPE_Q8_K, vx_vec_dot_tq1_0_q8_K},
    [VX_TYPE_TQ2_0] = {"TQ2_0", VX_QK_K, sizeof(vx_block_tq2_0), true, vx_dequantize_row_tq2_0,
                       vx_quantize_row_tq2_0, VX_TYPE_Q8_K, vx_vec_dot_tq2_0_q8_K},
#define IQ(T, name, blk) [VX_TYPE_##T] = {#T, VX_QK_K, sizeof(blk), true, vx_dequantize_row_##name, NULL, \
                                         VX_TYPE_Q8_K, vx_vec_dot_##name##_q8_K}
    IQ(IQ2_XXS, iq2_xxs, vx_block_iq2_xxs),
    IQ(IQ2_XS, iq2_xs, vx_block_iq2_xs),
    IQ(IQ2_S, iq2_s, vx_block_iq2_s),
    IQ(IQ3_XXS, iq3_xxs, vx_block_iq3_xxs),
    IQ(IQ3_S, iq3_s, vx_block_iq3_s),
    IQ(IQ1_S, iq1_s, vx_block_iq1_s),
    IQ(IQ1_M, iq1_m, vx_block_iq1_m),
#undef IQ
    /* Plain integer and F64 tensors have a size so a file holding them can
     * be parsed, but no kernels: loaders refuse them for computation. */
    [VX_TYPE_I8] = {"I8", 1, sizeof(int8_t), false, NULL, NULL, VX_TYPE_I8, NULL},
    [VX_TYPE_I16] = {"I16", 1, sizeof(int16_t), false, NULL, NULL, VX_TYPE_I16, NULL},
    [VX_TYPE_I32] = {"I32", 1, sizeof(int32_t), false, NULL, NULL, VX_TYPE_I32, NULL},
    [VX_TYPE_I64] = {"I64", 1, sizeof(int64_t), false, NULL, NULL, VX_TYPE_I64, NULL},
    [VX_TYPE_F64] = {"F64", 1, sizeof(double), false, NULL, NULL, VX_TYPE_F64, NULL},
};

const vx_type_traits *vx_type_get_traits(int type) {
    if (type < 0 || type >= VX_TYPE_COUNT) return NULL;
    const vx_type_traits *t = &traits_table[type];
    return t->name ? t : NULL;
}

const char *vx_type_name(int type) {
    const vx_type_traits *t = vx_type_get_traits(type);
    return t ? t->name : "?";
}

int vx_type_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < VX_TYPE_COUNT; i++) {
        if (traits_table[i].name && strcasecmp(traits_table[i].name, name) == 0) return i;
    }
    return -1;
}

size_t vx_row_size(vx_type type, int64_t n) {
    const vx_type_traits *t = vx_type_get_traits((int)type);
    if (!t || n < 0 || n % t->blck_size != 0) return 0;
    /* n / blck_size blocks; callers pass row lengths from validated files, but
     * keep the product from wrapping all the same. */
    uint64_t bytes;
    if (vx_mul_ovf((uint64_t)(n / t->blck_size), (uint64_t)t->type_size, &bytes) || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}
