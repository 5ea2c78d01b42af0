/*
 * test_amx.c - the AMX bf16 GEMM (src/x86/amx_gemm.c) against a double
 * precision reference, natively when the CPU has AMX and always through its
 * emulated copy (amx_emu.h + SIMDe): every weight type the forward pass sends
 * it (F16, BF16 and the packed Q4_K/Q6_K/Q4_0/Q5_0/Q8_0 layouts) and the
 * generic dequantizing path (F32, file-layout quantized types), row counts
 * that leave partial 16-row tiles and 8-row groups, token counts that leave
 * partial tiles, with and without accumulation; the rows and columns outside
 * the product must be left alone. The fused gate/up/SwiGLU kernel must give
 * the bits of its definition (glu_case).
 *
 * Tolerance: the kernel rounds weights and activations to bf16 and sums
 * exact products in fp32, so against sum_k bf16(w) bf16(x) in double it may
 * differ only by fp32 summation error: 1e-5 of sum_k |w x| (a layout error
 * is of the order of the result itself). Against the unrounded product the
 * error is that of bf16 rounding, 2^-8 of sum_k |w x| at most. With the
 * activations' remainders (split, the F16 path) both operands carry ~16
 * significant bits: 3e-5 of sum_k |w x| against the unrounded product.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ops.h"
#include "quant.h"
#include "testutil.h"
#include "x86/kernels_amx.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { return vx_test_frand(&rng); }

static double bf(float f) { return vx_bf16_to_fp32(vx_fp32_to_bf16(f)); }

typedef struct variant {
    const char *name;
    vx_gemm_bf16_fn gemm;
    size_t (*scratch)(int64_t K);
    void (*to_bf16)(const float *, uint16_t *, uint16_t *, int64_t);
    vx_gemm_glu_fn glu;
} variant;

/* The fused gate/up/SwiGLU (vx_gemm_glu_fn) against its definition: the
 * two GEMMs, vx_swiglu over their outputs and to_bf16 of every row, bit
 * for bit (with lo_out the remainders too); the values past the rows and
 * tokens are left alone. */
static void glu_case(const variant *v, int type, int packed, int K, int R, int T, int lo_in, int lo_out) {
    const int ptype = packed ? vx_repack_type(type) : type;
    const vx_type_traits *tr = vx_type_get_traits(type);
    const size_t rs = vx_row_size((vx_type)type, K);
    const size_t wrs = packed ? vx_repack_row_size(ptype, K) : rs;
    const int T32 = (T + 31) / 32 * 32, LDD = R + 9;
    uint8_t *w[2], *pw[2];
    float *row = malloc(sizeof(float) * (size_t)K), *x = malloc(sizeof(float) * (size_t)K);
    float *o[2], *part[2];
    uint16_t *xa = calloc((size_t)T32 * K, sizeof(uint16_t)), *xl = calloc((size_t)T32 * K, sizeof(uint16_t));
    uint16_t *dst = malloc(sizeof(uint16_t) * (size_t)LDD * T), *dlo = malloc(sizeof(uint16_t) * (size_t)LDD * T);
    uint16_t *want = malloc(sizeof(uint16_t) * (size_t)R), *wlo = malloc(sizeof(uint16_t) * (size_t)R);
    void *scr = malloc(v->scratch(K));
    for (int m = 0; m < 2; m++) {
        w[m] = malloc(rs * (size_t)R);
        for (int r = 0; r < R; r++) {
            for (int i = 0; i < K; i++) row[i] = frand() * 0.25f;
            tr->from_float(row, w[m] + (size_t)r * rs, K);
        }
        pw[m] = w[m];
        if (packed) {
            pw[m] = malloc(wrs * (size_t)R);
            vx_repack_rows(type, w[m], rs, R, K, pw[m]);
        }
        o[m] = malloc(sizeof(float) * (size_t)R * T);
        part[m] = malloc(sizeof(float) * (size_t)R * T);
    }
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < K; i++) x[i] = frand();
        v->to_bf16(x, xa + (size_t)t * K, lo_in ? xl + (size_t)t * K : NULL, K);
    }
    for (int i = 0; i < LDD * T; i++) dst[i] = dlo[i] = (uint16_t)(0x1234 + i % 7);
    for (int m = 0; m < 2; m++)
        v->gemm(ptype, K, pw[m], wrs, R, xa, lo_in ? xl : NULL, (size_t)K * 2, T, o[m], R, 0, scr);
    v->glu(ptype, K, pw[0], pw[1], wrs, R, xa, lo_in ? xl : NULL, (size_t)K * 2, T, part[0], part[1], R, vx_swiglu,
           dst, lo_out ? dlo : NULL, LDD, scr);
    int same = 1, kept = 1;
    for (int t = 0; t < T; t++) {
        vx_swiglu(o[0] + (size_t)t * R, o[1] + (size_t)t * R, R);
        v->to_bf16(o[0] + (size_t)t * R, want, lo_out ? wlo : NULL, R);
        for (int r = 0; r < LDD; r++) {
            const size_t i = (size_t)t * LDD + (size_t)r;
            if (r >= R) kept &= dst[i] == 0x1234 + i % 7 && dlo[i] == 0x1234 + i % 7;
            else same &= dst[i] == want[r] && (lo_out ? dlo[i] == wlo[r] : dlo[i] == 0x1234 + i % 7);
        }
    }
    CHECKF(same && kept, "%s glu type %d%s K %d rows %d tokens %d lo %d/%d: %s, outside %s", v->name, type,
           packed ? " packed" : "", K, R, T, lo_in, lo_out, same ? "same bits" : "different bits",
           kept ? "kept" : "changed");
    for (int m = 0; m < 2; m++) {
        if (pw[m] != w[m]) free(pw[m]);
        free(w[m]), free(o[m]), free(part[m]);
    }
    free(row), free(x), free(xa), free(xl), free(dst), free(dlo), free(want), free(wlo), free(scr);
}

static void gemm_case(const variant *v, int type, int packed, int K, int R, int T, int acc, int split) {
    const int ptype = packed ? vx_repack_type(type) : type;
    const vx_type_traits *tr = vx_type_get_traits(type);
    const size_t rs = vx_row_size((vx_type)type, K);
    const int LDO = R + 5, T32 = (T + 31) / 32 * 32;
    uint8_t *w = malloc(rs * (size_t)R);
    float *wf = malloc(sizeof(float) * (size_t)K * R), *deq = malloc(sizeof(float) * (size_t)K * R);
    float *x = malloc(sizeof(float) * (size_t)K * T), *out = malloc(sizeof(float) * (size_t)LDO * T);
    uint16_t *xa = calloc((size_t)T32 * K, sizeof(uint16_t)), *xl = calloc((size_t)T32 * K, sizeof(uint16_t));
    void *scr = malloc(v->scratch(K));
    for (int i = 0; i < K * R; i++) wf[i] = frand() * (1 + (i % 7));
    for (int r = 0; r < R; r++) tr->from_float(wf + (size_t)r * K, w + (size_t)r * rs, K);
    for (int r = 0; r < R; r++) tr->to_float(w + (size_t)r * rs, deq + (size_t)r * K, K);
    const void *wk = w;
    size_t wrs = rs;
    void *pw = NULL;
    if (packed) {
        wrs = vx_repack_row_size(ptype, K);
        pw = malloc(wrs * (size_t)R);
        vx_repack_rows(type, w, rs, R, K, pw);
        wk = pw;
    }
    for (int i = 0; i < K * T; i++) x[i] = frand();
    for (int t = 0; t < T; t++)
        v->to_bf16(x + (size_t)t * K, xa + (size_t)t * K, split ? xl + (size_t)t * K : NULL, K);
    for (int i = 0; i < LDO * T; i++) out[i] = 0.25f * (float)(i % 5);
    v->gemm(ptype, K, wk, wrs, R, xa, split ? xl : NULL, (size_t)K * 2, T, out, LDO, acc, scr);
    double worst = 0, worst_unrounded = 0;
    int untouched = 1;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < LDO; r++) {
            const double init = 0.25 * ((t * LDO + r) % 5);
            const float got = out[(size_t)t * LDO + r];
            if (r >= R) {
                untouched &= got == (float)init;
                continue;
            }
            double ref = 0, exact = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double a = deq[(size_t)r * K + k], b = x[(size_t)t * K + k];
                ref += bf((float)a) * bf((float)b);
                exact += a * b;
                mag += fabs(a * b);
            }
            if (acc) ref += init, exact += init;
            worst = fmax(worst, fabs(got - ref) / (mag + 1e-30));
            worst_unrounded = fmax(worst_unrounded, fabs(got - exact) / (mag + 1e-30));
        }
    /* split: ~16 significant bits of both operands (BF16 weights are exact) */
    const bool ok = split ? worst_unrounded <= 3e-5 : worst <= 1e-5 && worst_unrounded <= 1.0 / 256;
    CHECKF(ok && untouched,
           "%s type %d%s%s K %d rows %d tokens %d acc %d: error %g (vs unrounded %g), outside rows %s", v->name,
           type, packed ? " packed" : "", split ? " split" : "", K, R, T, acc, worst, worst_unrounded,
           untouched ? "kept" : "changed");
    free(w), free(wf), free(deq), free(x), free(out), free(xa), free(xl), free(scr), free(pw);
}

static void test_variant(const variant *v) {
    const int types[] = {VX_TYPE_F16, VX_TYPE_BF16, VX_TYPE_F32, VX_TYPE_Q8_0, VX_TYPE_Q4_0,
                         VX_TYPE_Q5_0, VX_TYPE_Q4_1, VX_TYPE_Q5_1, VX_TYPE_IQ4_NL, VX_TYPE_Q2_K,
                         VX_TYPE_Q3_K, VX_TYPE_Q4_K, VX_TYPE_Q5_K, VX_TYPE_Q6_K, VX_TYPE_TQ2_0, VX_TYPE_TQ1_0};
    const int Ks[] = {256, 768}, Rs[] = {8, 16, 40, 64}, Ts[] = {1, 16, 17, 33, 70};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int pk = 0; pk < 2; pk++) {
            if (pk && vx_repack_type(types[ti]) < 0) continue;
            for (int ki = 0; ki < 2; ki++)
                for (int ri = 0; ri < 4; ri++)
                    for (int tj = 0; tj < 5; tj++)
                        gemm_case(v, types[ti], pk, Ks[ki], Rs[ri], Ts[tj], (ri + tj + ki) % 2,
                                  (ri + tj) % 3 == 0);
        }
    /* the kernel's blocks: K in chunks of 2048 (F16: 8 of them, with the
     * remainders; Q6_K: 2048 + 768), rows in blocks of 256 (Q8_0: 264 rows, the
     * last block of 8) */
    gemm_case(v, VX_TYPE_Q8_0, 1, 4096, 264, 40, 1, 0);
    gemm_case(v, VX_TYPE_F16, 0, 16384, 72, 33, 0, 1);
    gemm_case(v, VX_TYPE_Q6_K, 1, 2816, 48, 20, 1, 0);
    /* gate/up/SwiGLU fused: partial blocks of rows and tokens, K in two
     * chunks (2048 + 768: the partial sums), both remainders */
    glu_case(v, VX_TYPE_BF16, 0, 256, 40, 17, 0, 0);
    glu_case(v, VX_TYPE_F16, 0, 256, 96, 70, 1, 1);
    glu_case(v, VX_TYPE_F16, 0, 2816, 72, 33, 1, 0);
    glu_case(v, VX_TYPE_Q4_0, 1, 512, 264, 33, 0, 1);
    glu_case(v, VX_TYPE_Q8_0, 1, 2816, 48, 40, 0, 0);
    glu_case(v, VX_TYPE_Q4_K, 1, 768, 136, 64, 0, 0);
    glu_case(v, VX_TYPE_Q5_K, 1, 2816, 40, 33, 0, 0);
    glu_case(v, VX_TYPE_Q6_K, 1, 2816, 40, 20, 0, 0);
    glu_case(v, VX_TYPE_Q3_K, 0, 256, 24, 9, 0, 0);
    glu_case(v, VX_TYPE_Q3_K, 1, 768, 40, 20, 0, 0);
    glu_case(v, VX_TYPE_Q2_K, 1, 2816, 72, 33, 0, 0);
    glu_case(v, VX_TYPE_TQ2_0, 1, 2816, 72, 33, 0, 0);
    glu_case(v, VX_TYPE_Q5_1, 1, 512, 40, 17, 0, 0);
    glu_case(v, VX_TYPE_IQ4_NL, 1, 256, 48, 20, 0, 0);
    /* the activation conversion: nearest even, ties included */
    float src[70];
    uint16_t dst[70];
    for (int i = 0; i < 70; i++) src[i] = frand() * 1000;
    src[3] = 1.00390625f;   /* 1 + 2^-8: a tie, rounds down to even */
    src[40] = 1.01171875f;  /* 1 + 3 * 2^-8: a tie, rounds up to even */
    uint16_t rem[70];
    v->to_bf16(src, dst, rem, 70);
    int same = 1;
    for (int i = 0; i < 70; i++)
        same &= dst[i] == vx_fp32_to_bf16(src[i]) &&
                rem[i] == vx_fp32_to_bf16(src[i] - vx_bf16_to_fp32(vx_fp32_to_bf16(src[i])));
    CHECKF(same && dst[3] == 0x3f80 && dst[40] == 0x3f82, "%s f32_to_bf16", v->name);
}

int main(void) {
    const variant emu = {"amx-emu", vx_gemm_amx_amxemu, vx_gemm_amx_scratch_amxemu, vx_f32_to_bf16_amxemu,
                         vx_gemm_amx_glu_amxemu};
    if (vx_cpu_best_isa() >= VX_ISA_AVX2 && !vx_test_skip_emulated(vx_cpu_best_isa() >= VX_ISA_AMX, "amx-emu"))
        test_variant(&emu);
    const variant native = {"amx", vx_gemm_amx_amx, vx_gemm_amx_scratch_amx, vx_f32_to_bf16_amx,
                            vx_gemm_amx_glu_amx};
    if (vx_cpu_best_isa() >= VX_ISA_AMX) test_variant(&native);
    return vx_test_finish("test_amx");
}
