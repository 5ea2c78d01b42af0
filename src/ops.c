/* ops.c - reference float ops and the generic matmul (dequantize a row,
 * then dot it with every token). */
#include "ops.h"

#include <math.h>
#include <stdlib.h>

#include "common.h"

float vx_dot_f32_ref(const float *a, const float *b, int64_t n) {
    /* 8 partial sums: the same association order the SIMD variants use,
     * and less rounding error than one running sum */
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

void vx_axpy_f32_ref(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

float vx_exp_shift_sum_ref(float *x, int64_t n, float m) {
    float sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    return sum;
}

void vx_f16_to_f32_ref(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = vx_fp16_to_fp32(src[i]);
}

void vx_f32_to_f16_ref(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = vx_fp32_to_fp16(src[i]);
}

void vx_q8_0_to_f32_ref(const void *src, float *dst, int64_t n) {
    vx_type_get_traits(VX_TYPE_Q8_0)->to_float(src, dst, n);
}

/* c = a b (+ alpha-scaled c) with b f32 or fp16 (half) rows. */
static void gemm_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const void *b, int half,
                     int64_t ldb, float *c, int64_t ldc, const float *alpha) {
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        for (int64_t j = 0; j < n; j++) ci[j] = alpha ? alpha[i] * ci[j] : 0.0f;
        for (int64_t p = 0; p < kd; p++) {
            const float aip = a[i * lda + p];
            for (int64_t j = 0; j < n; j++)
                ci[j] += aip * (half ? vx_fp16_to_fp32(((const uint16_t *)b)[p * ldb + j])
                                     : ((const float *)b)[p * ldb + j]);
        }
    }
}

void vx_gemm_f32_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc, const float *alpha) {
    gemm_ref(m, n, kd, a, lda, b, 0, ldb, c, ldc, alpha);
}

void vx_gemm_f16b_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const uint16_t *b,
                      int64_t ldb, float *c, int64_t ldc, const float *alpha) {
    gemm_ref(m, n, kd, a, lda, b, 1, ldb, c, ldc, alpha);
}

void vx_gemm_abt_f32_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c[i * ldc + j] = vx_dot_f32_ref(a + i * lda, b + j * ldb, kd);
}

void vx_gemm_abt_f16b_ref(int64_t m, int64_t n, int64_t kd, const float *a, int64_t lda,
                          const uint16_t *b, int64_t ldb, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const float *ai = a + i * lda;
            const uint16_t *bj = b + j * ldb;
            float s[8] = {0}; /* dot_f32's association */
            int64_t p = 0;
            for (; p + 8 <= kd; p += 8)
                for (int q = 0; q < 8; q++) s[q] += ai[p + q] * vx_fp16_to_fp32(bj[p + q]);
            float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
            for (; p < kd; p++) r += ai[p] * vx_fp16_to_fp32(bj[p]);
            c[i * ldc + j] = r;
        }
}

void vx_attn_softmax16_ref(float *s, int64_t m, const int32_t *nv, float scale, float *mx, float *l,
                           float *corr) {
    for (int64_t i = 0; i < m; i++) {
        float *si = s + i * 16;
        const int n = nv[i];
        if (n <= 0) {
            for (int j = 0; j < 16; j++) si[j] = 0;
            corr[i] = 1;
            continue;
        }
        for (int j = 0; j < 16; j++) si[j] *= scale;
        float mb = mx[i];
        for (int j = 0; j < n; j++) mb = si[j] > mb ? si[j] : mb;
        corr[i] = expf(mx[i] - mb); /* exp(-inf) = 0 on a row's first chunk */
        float sum = 0;
        for (int j = 0; j < 16; j++) {
            si[j] = j < n ? expf(si[j] - mb) : 0.0f;
            sum += si[j];
        }
        l[i] = l[i] * corr[i] + sum;
        mx[i] = mb;
    }
}

void vx_softcap_ref(float *x, int64_t n, float in, float out) {
    for (int64_t i = 0; i < n; i++) x[i] = out * tanhf(x[i] * in);
}

/* The composition the fused kernel stands for, chunk by chunk and head by
 * head, with the reference blocks (kx, vx are prefetch hints). */
void vx_attn_dec_f16_ref(int64_t nh, int64_t g, int64_t hd, const float *q, const uint16_t *k,
                         const uint16_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint16_t *kx,
                         const uint16_t *vx, float scale, float cap, float *mx, float *l, float *o) {
    (void)kx;
    (void)vx;
    VX_ASSERT(g >= 1 && g <= 8 && n % 16 == 0);
    float s[8 * 16], corr[8];
    const int32_t nv[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    for (int64_t c0 = 0; c0 < n; c0 += 16)
        for (int64_t h = 0; h < nh; h++) {
            const int64_t r0 = h * g;
            vx_gemm_abt_f16b_ref(g, 16, hd, q + r0 * hd, hd, k + c0 / 16 * cs + h * hs, ld, s, 16);
            if (cap > 0) vx_softcap_ref(s, 16 * g, scale / cap, cap / scale);
            vx_attn_softmax16_ref(s, g, nv, scale, mx + r0, l + r0, corr);
            vx_gemm_f16b_ref(g, hd, 16, s, 16, v + c0 / 16 * cs + h * hs, ld, o + r0 * hd, hd, corr);
        }
}

int vx_attn_dec_q8_0_ref(int64_t nh, int64_t g, int64_t hd, const float *q, const uint8_t *k,
                         const uint8_t *v, int64_t ld, int64_t hs, int64_t cs, int64_t n, const uint8_t *kx,
                         const uint8_t *vx, float scale, float cap, float *mx, float *l, float *o) {
    (void)kx;
    (void)vx;
    if (g < 1 || g > 8 || n % 16 != 0 || hd % 32 != 0 || hd > 256) return 0;
    float s[8 * 16], corr[8], kr[16 * 256], vr[16 * 256];
    const int32_t nv[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    for (int64_t c0 = 0; c0 < n; c0 += 16)
        for (int64_t h = 0; h < nh; h++) {
            const int64_t r0 = h * g;
            for (int j = 0; j < 16; j++) {
                vx_q8_0_to_f32_ref(k + c0 / 16 * cs + h * hs + j * ld, kr + j * hd, hd);
                vx_q8_0_to_f32_ref(v + c0 / 16 * cs + h * hs + j * ld, vr + j * hd, hd);
            }
            vx_gemm_abt_f32_ref(g, 16, hd, q + r0 * hd, hd, kr, hd, s, 16);
            if (cap > 0) vx_softcap_ref(s, 16 * g, scale / cap, cap / scale);
            vx_attn_softmax16_ref(s, g, nv, scale, mx + r0, l + r0, corr);
            vx_gemm_f32_ref(g, hd, 16, s, 16, vr, hd, o + r0 * hd, hd, corr);
        }
    return 1;
}

void vx_matmul_ref(const vx_kernels *k, const vx_weight *w, size_t mat_offset, int64_t r0,
                   int64_t r1, const float *x, int64_t n, int64_t ldx, float *y, int64_t ldy,
                   bool accumulate, float *scratch) {
    const vx_type_traits *tr = vx_type_get_traits(w->type);
    const uint8_t *base = (const uint8_t *)w->data + mat_offset;
    const int64_t ne0 = w->ne[0];
    for (int64_t r = r0; r < r1; r++) {
        const float *row;
        if (w->type == VX_TYPE_F32) {
            row = (const float *)(const void *)(base + (size_t)r * w->row_size);
        } else {
            tr->to_float(base + (size_t)r * w->row_size, scratch, ne0);
            row = scratch;
        }
        for (int64_t t = 0; t < n; t++) {
            float d = k->dot_f32(row, x + t * ldx, ne0);
            if (accumulate) y[t * ldy + r] += d;
            else y[t * ldy + r] = d;
        }
    }
}

void vx_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    /* double: n_embd up to 16k squares of values up to ~1e3; four chains
     * (element i into chain i % 4), so the adds do not wait on each other:
     * with one chain a decode step's norms took ~4 cycles per element */
    double s4[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s4[j] += (double)x[i + j] * x[i + j];
    for (int j = 0; i < n; i++, j++) s4[j] += (double)x[i] * x[i];
    const double ss = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    if (w)
        for (i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
    else
        for (i = 0; i < n; i++) out[i] = x[i] * scale;
}

void vx_layernorm(float *out, const float *x, const float *w, const float *b, int64_t n, float eps) {
    /* double sums, two passes (mean, then the centred squares): BERT's
     * residual streams carry offsets in the tens, where E[x^2] - E[x]^2
     * would cancel */
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    const double mean = s / (double)n;
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    const float scale = (float)(1.0 / sqrt(ss / (double)n + eps)), mf = (float)mean;
    for (int64_t i = 0; i < n; i++) {
        const float y = (x[i] - mf) * scale;
        out[i] = (w ? y * w[i] : y) + (b ? b[i] : 0.0f);
    }
}

void vx_rope_apply(float *v, const float *cs, int32_t n_rot, vx_rope_kind kind) {
    const int32_t half = n_rot / 2;
    for (int32_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const int32_t a = kind == VX_ROPE_NEOX ? i : 2 * i;
        const int32_t b = kind == VX_ROPE_NEOX ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

void vx_rope_ref(float *v, const float *cs, int32_t n_rot, int kind) { vx_rope_apply(v, cs, n_rot, (vx_rope_kind)kind); }

void vx_swiglu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void vx_geglu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        /* 0.5 (1 + tanh(y)) = 1 / (1 + exp(-2 y)), without 1 + tanh's
         * cancellation for negative y */
        const double x = g[i], y = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        g[i] = (float)(x / (1.0 + exp(-2.0 * y)) * u[i]);
    }
}

void vx_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] / sum);
}
