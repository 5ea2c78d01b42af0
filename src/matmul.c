/* matmul.c - activation types and the reference GEMV kernels (see matmul.h). */
#include "matmul.h"

#include <string.h>

#include "common.h"
#include "ops.h"
#include "quant.h"

int vx_act_type(int t) {
    if (t == VX_TYPE_F32 || t == VX_TYPE_F16 || t == VX_TYPE_BF16) return VX_TYPE_F32;
    const vx_type_traits *tr = vx_type_get_traits(t);
    return tr ? (int)tr->vec_dot_type : -1;
}

size_t vx_act_row_size(int t, int64_t n) { return vx_row_size((vx_type)vx_act_type(t), n); }

size_t vx_act_tab_entries(int64_t n, int64_t ntok) { return (size_t)((ntok + 7) / 8 * 8) * (size_t)(n / 32); }

/* per entry: 32 codes, the scale, three offset sums */
size_t vx_act_tab_bytes(size_t entries) { return entries * (32 + sizeof(float) + 3 * sizeof(int32_t)); }

void vx_act_tab_bind(vx_act_tab *T, void *mem, size_t entries) {
    uint8_t *m = mem;
    T->codes = (uint8_t (*)[32])(void *)m;
    T->dy = (float *)(void *)(m + entries * 32);
    for (int i = 0; i < 3; i++)
        T->nc[i] = (int32_t *)(void *)(m + entries * (32 + sizeof(float) + (size_t)i * sizeof(int32_t)));
}

void vx_act_tab_fill(const vx_act_tab *T, int64_t t0, int64_t t1, int64_t b0, int64_t b1) {
    const int64_t nb = T->n / 32, tend = t1 == T->ntok ? (T->ntok + 7) / 8 * 8 : t1;
    for (int64_t t = t0; t < tend; t++) {
        const uint8_t *row = (const uint8_t *)T->act + (size_t)(t < T->ntok ? t : T->ntok - 1) * T->stride;
        for (int64_t b = b0; b < b1; b++) {
            const vx_block_q8_0 *y = (const vx_block_q8_0 *)(const void *)row + b;
            const size_t e = vx_act_tab_entry(nb, t, b);
            int32_t s = 0;
            for (int j = 0; j < 32; j++) s += y->qs[j];
            memcpy(T->codes[e], y->qs, 32);
            T->dy[e] = vx_fp16_to_fp32(y->d);
            T->nc[0][e] = -8 * s;
            T->nc[1][e] = -16 * s;
            T->nc[2][e] = -128 * s;
        }
    }
}

void vx_gemv_ref(int t, int64_t n, const void *w, size_t row_stride, int nrows, const void *y,
                 float *out) {
    const vx_type_traits *tr = vx_type_get_traits(t);
    for (int r = 0; r < nrows; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_stride;
        if (t == VX_TYPE_F32) {
            out[r] = vx_dot_f32_ref((const float *)(const void *)row, y, n);
        } else if (t == VX_TYPE_F16 || t == VX_TYPE_BF16) {
            /* float weights meet f32 activations: convert 256 at a time */
            float buf[256];
            float s = 0;
            const size_t es = 2;
            for (int64_t i = 0; i < n; i += 256) {
                const int64_t m = VX_MIN(256, n - i);
                tr->to_float(row + (size_t)i * es, buf, m);
                s += vx_dot_f32_ref(buf, (const float *)y + i, m);
            }
            out[r] = s;
        } else {
            tr->vec_dot(n, &out[r], row, y);
        }
    }
}

/* One wrapper per type so the kernel table holds plain function pointers. */
#define GEMV_REF(name, type)                                                                    \
    static void gemv_ref_##name(int64_t n, const void *w, size_t rs, int nr, const void *y,    \
                                float *out) {                                                  \
        vx_gemv_ref(type, n, w, rs, nr, y, out);                                               \
    }
GEMV_REF(f32, VX_TYPE_F32)
GEMV_REF(f16, VX_TYPE_F16)
GEMV_REF(bf16, VX_TYPE_BF16)
GEMV_REF(q4_0, VX_TYPE_Q4_0)
GEMV_REF(q4_1, VX_TYPE_Q4_1)
GEMV_REF(q5_0, VX_TYPE_Q5_0)
GEMV_REF(q5_1, VX_TYPE_Q5_1)
GEMV_REF(q8_0, VX_TYPE_Q8_0)
GEMV_REF(q2_K, VX_TYPE_Q2_K)
GEMV_REF(q3_K, VX_TYPE_Q3_K)
GEMV_REF(q4_K, VX_TYPE_Q4_K)
GEMV_REF(q5_K, VX_TYPE_Q5_K)
GEMV_REF(q6_K, VX_TYPE_Q6_K)
GEMV_REF(iq4_nl, VX_TYPE_IQ4_NL)
GEMV_REF(iq4_xs, VX_TYPE_IQ4_XS)
GEMV_REF(mxfp4, VX_TYPE_MXFP4)
GEMV_REF(tq1_0, VX_TYPE_TQ1_0)
GEMV_REF(tq2_0, VX_TYPE_TQ2_0)
GEMV_REF(iq2_xxs, VX_TYPE_IQ2_XXS)
GEMV_REF(iq2_xs, VX_TYPE_IQ2_XS)
GEMV_REF(iq2_s, VX_TYPE_IQ2_S)
GEMV_REF(iq3_xxs, VX_TYPE_IQ3_XXS)
GEMV_REF(iq3_s, VX_TYPE_IQ3_S)
GEMV_REF(iq1_s, VX_TYPE_IQ1_S)
GEMV_REF(iq1_m, VX_TYPE_IQ1_M)
#undef GEMV_REF

void vx_matmul_kernels_ref(vx_gemv_fn *gemv, vx_act_fn *act) {
    gemv[VX_TYPE_F32] = gemv_ref_f32;
    gemv[VX_TYPE_F16] = gemv_ref_f16;
    gemv[VX_TYPE_BF16] = gemv_ref_bf16;
    gemv[VX_TYPE_Q4_0] = gemv_ref_q4_0;
    gemv[VX_TYPE_Q4_1] = gemv_ref_q4_1;
    gemv[VX_TYPE_Q5_0] = gemv_ref_q5_0;
    gemv[VX_TYPE_Q5_1] = gemv_ref_q5_1;
    gemv[VX_TYPE_Q8_0] = gemv_ref_q8_0;
    gemv[VX_TYPE_Q2_K] = gemv_ref_q2_K;
    gemv[VX_TYPE_Q3_K] = gemv_ref_q3_K;
    gemv[VX_TYPE_Q4_K] = gemv_ref_q4_K;
    gemv[VX_TYPE_Q5_K] = gemv_ref_q5_K;
    gemv[VX_TYPE_Q6_K] = gemv_ref_q6_K;
    gemv[VX_TYPE_IQ4_NL] = gemv_ref_iq4_nl;
    gemv[VX_TYPE_IQ4_XS] = gemv_ref_iq4_xs;
    gemv[VX_TYPE_MXFP4] = gemv_ref_mxfp4;
    gemv[VX_TYPE_TQ1_0] = gemv_ref_tq1_0;
    gemv[VX_TYPE_TQ2_0] = gemv_ref_tq2_0;
    gemv[VX_TYPE_IQ2_XXS] = gemv_ref_iq2_xxs;
    gemv[VX_TYPE_IQ2_XS] = gemv_ref_iq2_xs;
    gemv[VX_TYPE_IQ2_S] = gemv_ref_iq2_s;
    gemv[VX_TYPE_IQ3_XXS] = gemv_ref_iq3_xxs;
    gemv[VX_TYPE_IQ3_S] = gemv_ref_iq3_s;
    gemv[VX_TYPE_IQ1_S] = gemv_ref_iq1_s;
    gemv[VX_TYPE_IQ1_M] = gemv_ref_iq1_m;
    gemv[VX_TYPE_Q4_K_R8] = vx_gemv_q4_K_r8_ref;
    gemv[VX_TYPE_Q6_K_R8] = vx_gemv_q6_K_r8_ref;
    gemv[VX_TYPE_Q5_K_R8] = vx_gemv_q5_K_r8_ref;
    gemv[VX_TYPE_Q3_K_R8] = vx_gemv_q3_K_r8_ref;
    gemv[VX_TYPE_Q2_K_R8] = vx_gemv_q2_K_r8_ref;
    gemv[VX_TYPE_TQ2_0_R8] = vx_gemv_tq2_0_r8_ref;
    gemv[VX_TYPE_Q4_0_R8] = vx_gemv_q4_0_r8_ref;
    gemv[VX_TYPE_Q5_0_R8] = vx_gemv_q5_0_r8_ref;
    gemv[VX_TYPE_Q8_0_R8] = vx_gemv_q8_0_r8_ref;
    gemv[VX_TYPE_Q4_1_R8] = vx_gemv_q4_1_r8_ref;
    gemv[VX_TYPE_Q5_1_R8] = vx_gemv_q5_1_r8_ref;
    gemv[VX_TYPE_IQ4_NL_R8] = vx_gemv_iq4_nl_r8_ref;
    gemv[VX_TYPE_MXFP4_R8] = vx_gemv_mxfp4_r8_ref;
    const int acts[] = {VX_TYPE_Q8_0, VX_TYPE_Q8_1, VX_TYPE_Q8_K};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        act[acts[i]] = vx_type_get_traits(acts[i])->from_float;
}
