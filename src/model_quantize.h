/*
 * model_quantize.h - converting a GGUF model to another tensor type or to a
 * llama.cpp-style quantization mix (Q4_K_M, Q3_K_S, ...): the engine behind
 * `vx quantize`. The mixes follow llama.cpp's documented per-tensor policy
 * (which matrices get more bits, fallbacks for rows that are not a multiple
 * of the block size) so files are interchangeable with llama-quantize's.
 */
#ifndef VX_MODEL_QUANTIZE_H
#define VX_MODEL_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "quant.h"
#include "vortex.h"

/* llama.cpp's LLAMA_FTYPE_* ids, stored as general.file_type. */
enum {
    VX_FTYPE_ALL_F32 = 0,
    VX_FTYPE_F16 = 1,
    VX_FTYPE_Q4_0 = 2,
    VX_FTYPE_Q4_1 = 3,
    VX_FTYPE_Q8_0 = 7,
    VX_FTYPE_Q5_0 = 8,
    VX_FTYPE_Q5_1 = 9,
    VX_FTYPE_Q2_K = 10,
    VX_FTYPE_Q3_K_S = 11,
    VX_FTYPE_Q3_K_M = 12,
    VX_FTYPE_Q3_K_L = 13,
    VX_FTYPE_Q4_K_S = 14,
    VX_FTYPE_Q4_K_M = 15,
    VX_FTYPE_Q5_K_S = 16,
    VX_FTYPE_Q5_K_M = 17,
    VX_FTYPE_Q6_K = 18,
    VX_FTYPE_IQ2_XXS = 19,
    VX_FTYPE_IQ2_XS = 20,
    VX_FTYPE_IQ3_XXS = 23,
    VX_FTYPE_IQ1_S = 24,
    VX_FTYPE_IQ4_NL = 25,
    VX_FTYPE_IQ3_S = 26,
    VX_FTYPE_IQ2_M = 29,
    VX_FTYPE_IQ4_XS = 30,
    VX_FTYPE_IQ1_M = 31,
    VX_FTYPE_BF16 = 32,
    VX_FTYPE_TQ1_0 = 36,
    VX_FTYPE_TQ2_0 = 37,
    VX_FTYPE_MXFP4_MOE = 38
};

typedef struct vx_quant_mix {
    const char *name; /* "Q4_K_M" */
    int ftype;        /* VX_FTYPE_* */
    vx_type base;     /* type of most weight matrices */
    const char *desc;
} vx_quant_mix;

/* Mix by name, case-insensitive ("q4_k_m", "F16"); NULL if unknown. */
const vx_quant_mix *vx_quant_mix_find(const char *name);
/* The i-th known mix (NULL past the end), for listing. */
const vx_quant_mix *vx_quant_mix_at(int i);

/* What happened to one tensor; passed to the progress callback. */
typedef struct vx_quant_tensor_info {
    int64_t index, count; /* 0-based position, number of tensors */
    const char *name;
    uint32_t n_dims;
    int64_t ne[4];
    int src_type, dst_type;
    uint64_t src_bytes, dst_bytes;
    bool converted; /* false: copied unchanged */
    bool fallback;  /* the mix's type did not fit the row length */
} vx_quant_tensor_info;

typedef struct vx_quantize_params {
    const vx_quant_mix *mix;
    int n_threads;         /* <= 0: one per online CPU */
    bool allow_requantize; /* accept input tensors that are already quantized */
    bool pure;             /* no mix rules: every weight matrix gets the base type */
    void (*on_tensor)(const vx_quant_tensor_info *info, void *user_data); /* optional */
    void *user_data;
} vx_quantize_params;

typedef struct vx_quantize_stats {
    uint64_t src_bytes, dst_bytes; /* tensor data before and after */
    int64_t n_tensors, n_converted, n_fallback;
} vx_quantize_stats;

/* The type each tensor of g gets under mix (types[vx_gguf_n_tensors(g)]),
 * without converting anything. fallback (optional, same length) marks the
 * tensors whose row length forced a substitute type. VX_EINVAL when a
 * tensor is already quantized and allow_requantize is false. */
vx_status vx_quantize_plan(const vx_gguf *g, const vx_quant_mix *mix, bool pure,
                           bool allow_requantize, int *types, bool *fallback, char *err,
                           size_t err_size);

/* The same plan from tensor shapes alone (for files written from scratch,
 * e.g. `vx synth`): names, dims and current types, plus the hyperparameters
 * the policy reads. n_layer <= 0 counts the ffn_down tensors. */
typedef struct vx_quant_shape {
    const char *name;
    uint32_t n_dims;
    int64_t ne[4];
    int type;
} vx_quant_shape;

typedef struct vx_quant_hparams {
    const char *arch;
    int64_t n_layer, n_head, n_head_kv, n_expert;
} vx_quant_hparams;

vx_status vx_quantize_plan_shapes(const vx_quant_shape *tensors, int64_t n,
                                  const vx_quant_hparams *hp, const vx_quant_mix *mix, bool pure,
                                  bool allow_requantize, int *types, bool *fallback, char *err,
                                  size_t err_size);

/* Reads in, converts, writes out (atomically: temp file + rename). The
 * converted tensors are held in memory until the write, so it needs about
 * the output's size in RAM. stats may be NULL. */
vx_status vx_quantize_model(const char *in, const char *out, const vx_quantize_params *params,
                            vx_quantize_stats *stats, char *err, size_t err_size);

#endif
