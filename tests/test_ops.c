/*
 * test_ops.c - every kernel-table variant of the float ops (dot, axpy,
 * exp_shift_sum, swiglu, fp16 conversions) against the reference kernels, for
 * every ISA this CPU supports; plus the reference ops themselves (rmsnorm,
 * rope, swiglu, softmax) against direct double-precision formulas.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ops.h"
#include "testutil.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { return vx_test_frand(&rng); }

/* A large-magnitude gate value: +-120 alternating with n. */
static float i_big(int64_t n) { return n % 2 ? 120.0f : -120.0f; }

static void test_variant(const vx_kernels *k, const vx_kernels *ref) {
    enum { N = 1000 };
    float a[N], b[N], y0[N], y1[N];
    for (int i = 0; i < N; i++) {
        a[i] = frand() * 3;
        b[i] = frand() * 3;
    }
    const int64_t sizes[] = {0, 1, 7, 8, 9, 31, 32, 33, 64, 100, 1000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int64_t n = sizes[si];
        double mag = 0;
        for (int64_t i = 0; i < n; i++) mag += fabs((double)a[i] * b[i]);
        float d0 = ref->dot_f32(a, b, n), d1 = k->dot_f32(a, b, n);
        CHECKF(fabs(d0 - d1) <= 1e-6 * mag + 1e-30, "%s dot n=%lld: %g vs %g", k->name, (long long)n, d1, d0);
        memcpy(y0, b, sizeof b);
        memcpy(y1, b, sizeof b);
        ref->axpy_f32(y0, 0.37f, a, n);
        k->axpy_f32(y1, 0.37f, a, n);
        for (int64_t i = 0; i < n; i++) CHECKF(fabsf(y0[i] - y1[i]) <= 1e-6f * (fabsf(y0[i]) + 1), "%s axpy", k->name);
        /* exp(x - m) for scores below their max, including far below */
        for (int64_t i = 0; i < n; i++) y0[i] = y1[i] = a[i] * 40 - (i % 3 == 0 ? 90 : 0);
        const float m = 125.0f;
        float s0 = ref->exp_shift_sum(y0, n, m), s1 = k->exp_shift_sum(y1, n, m);
        CHECKF(fabsf(s0 - s1) <= 1e-6f * s0 + 1e-37f, "%s exp sum n=%lld: %g vs %g", k->name, (long long)n, s1, s0);
        for (int64_t i = 0; i < n; i++)
            CHECKF(fabsf(y0[i] - y1[i]) <= 4e-7f * y0[i] + 1e-37f, "%s exp(%g): %g vs %g", k->name,
                   a[i] * 40 - (i % 3 == 0 ? 90 : 0) - m, y1[i], y0[i]);
        /* swiglu over a wide range (|g| up to 120: exp(-g) overflows in a
         * naive form) against the reference's expf form: a few ulps */
        for (int64_t i = 0; i < n; i++) {
            y0[i] = y1[i] = a[i] * (i % 4 == 0 ? 40.0f : 3.0f);
        }
        if (n > 3) y0[3] = y1[3] = i_big(n);
        ref->swiglu(y0, b, n);
        k->swiglu(y1, b, n);
        for (int64_t i = 0; i < n; i++)
            CHECKF(fabsf(y0[i] - y1[i]) <= 5e-7f * fabsf(y0[i]) + 1e-30f, "%s swiglu n=%lld [%lld]: %.9g vs %.9g",
                   k->name, (long long)n, (long long)i, y1[i], y0[i]);
        /* GeGLU over the same range against the reference's double tanh
         * form: the sigmoid form's few ulps; past |g| ~ 10 below zero
         * gelu(g) is under 1e-30 and the SIMD exp flushes it to 0 */
        for (int64_t i = 0; i < n; i++) y0[i] = y1[i] = a[i] * (i % 4 == 0 ? 40.0f : 3.0f);
        if (n > 3) y0[3] = y1[3] = i_big(n);
        float gin[N];
        memcpy(gin, y0, sizeof gin);
        ref->geglu(y0, b, n);
        k->geglu(y1, b, n);
        for (int64_t i = 0; i < n; i++) {
            /* the float argument z = 2 sqrt(2 / pi) (g + 0.044715 g^3) carries a
             * few ulps, and sigmoid(z) ~ exp(z) for negative z turns them into
             * |z| times as much relative error */
            const double gz = gin[i], z = 1.5957691216057308 * (gz + 0.044715 * gz * gz * gz);
            const double tol = (1e-6 + (z < 0 ? 6e-7 * -z : 0)) * fabs(y0[i]) + 1e-30;
            CHECKF(fabs((double)y0[i] - y1[i]) <= tol, "%s geglu n=%lld [%lld] (g %g): %.9g vs %.9g", k->name,
                   (long long)n, (long long)i, gz, y1[i], y0[i]);
        }
        /* RMSNorm: the same bits as the reference (one summation order),
         * with and without weights, and in place */
        for (int64_t i = 0; i < n; i++) y0[i] = a[i] * (i % 7 == 0 ? 300.0f : 1.0f);
        ref->rmsnorm(y1, y0, b, n, 1e-6f);
        float yr[N];
        k->rmsnorm(yr, y0, b, n, 1e-6f);
        CHECKF(n == 0 || memcmp(yr, y1, (size_t)n * 4) == 0, "%s rmsnorm n=%lld", k->name, (long long)n);
        ref->rmsnorm(y1, y0, NULL, n, 1e-5f);
        memcpy(yr, y0, sizeof yr);
        k->rmsnorm(yr, yr, NULL, n, 1e-5f);
        CHECKF(n == 0 || memcmp(yr, y1, (size_t)n * 4) == 0, "%s rmsnorm in place, no weights, n=%lld", k->name,
               (long long)n);
        /* RoPE of a head vector (n_rot = n rounded down to even, both
         * kinds, the rest of the row untouched): the same bits */
        for (int kind = 0; kind < 2; kind++) {
            float cs[N];
            const int32_t nr = (int32_t)(n & ~(int64_t)1);
            for (int64_t i = 0; i < nr; i += 2) {
                const double th = 0.37 * (double)(i + 1) * (1 + i % 3);
                cs[i] = (float)cos(th), cs[i + 1] = (float)sin(th);
            }
            for (int64_t i = 0; i < n; i++) y0[i] = y1[i] = a[i] * (i % 3 == 0 ? 50.0f : 1.0f);
            ref->rope(y0, cs, nr, kind);
            k->rope(y1, cs, nr, kind);
            CHECKF(n == 0 || memcmp(y0, y1, (size_t)n * 4) == 0, "%s rope kind %d n_rot %d", k->name, kind, (int)nr);
        }
        /* fp16 round trip: identical bits in both directions */
        uint16_t h0[N], h1[N];
        for (int64_t i = 0; i < n; i++) y0[i] = a[i] * (i % 5 == 0 ? 7e4f : i % 5 == 1 ? 1e-6f : 100.0f);
        ref->f32_to_f16(y0, h0, n);
        k->f32_to_f16(y0, h1, n);
        CHECKF(n == 0 || memcmp(h0, h1, (size_t)n * 2) == 0, "%s f32->f16 n=%lld", k->name, (long long)n);
        ref->f16_to_f32(h0, y0, n);
        k->f16_to_f32(h0, y1, n);
        CHECKF(n == 0 || memcmp(y0, y1, (size_t)n * 4) == 0, "%s f16->f32 n=%lld", k->name, (long long)n);
    }
    /* exp of exactly 0 is 1, and of the very negative is 0 */
    float z[9] = {125.0f, 125.0f - 200.0f, -1e30f, 125.0f, 124.0f, 0, 0, 0, 0};
    float s = k->exp_shift_sum(z, 5, 125.0f);
    CHECKF(z[0] == 1.0f && z[1] == 0.0f && z[2] == 0.0f && fabsf(z[4] - expf(-1)) < 1e-7f &&
               fabsf(s - (2 + expf(-1))) < 1e-6f,
           "%s exp edge cases: %g %g %g %g sum %g", k->name, z[0], z[1], z[2], z[4], s);
}

static void test_reference_ops(void) {
    float x[64], w[64], o[64];
    for (int i = 0; i < 64; i++) {
        x[i] = frand();
        w[i] = frand() + 1.5f;
    }
    vx_rmsnorm(o, x, w, 64, 1e-5f);
    double ss = 0;
    for (int i = 0; i < 64; i++) ss += (double)x[i] * x[i];
    const double sc = 1 / sqrt(ss / 64 + 1e-5);
    for (int i = 0; i < 64; i++) CHECK(fabs(o[i] - x[i] * sc * w[i]) < 1e-6);
    /* rope: rotating by theta keeps norms; NORM pairs (0,1), NEOX pairs (0, n/2) */
    float cs[2] = {cosf(0.3f), sinf(0.3f)}, v[4] = {1, 2, 3, 4}, u[4] = {1, 2, 3, 4};
    float cs2[4] = {cs[0], cs[1], 1, 0};
    vx_rope_apply(v, cs2, 4, VX_ROPE_NORM);
    CHECK(fabsf(v[0] - (1 * cs[0] - 2 * cs[1])) < 1e-6f && fabsf(v[1] - (1 * cs[1] + 2 * cs[0])) < 1e-6f);
    CHECK(v[2] == 3 && v[3] == 4);
    vx_rope_apply(u, cs2, 4, VX_ROPE_NEOX);
    CHECK(fabsf(u[0] - (1 * cs[0] - 3 * cs[1])) < 1e-6f && fabsf(u[2] - (1 * cs[1] + 3 * cs[0])) < 1e-6f);
    float g[3] = {0, 1, -2}, up[3] = {2, 2, 2};
    vx_swiglu(g, up, 3);
    CHECK(g[0] == 0 && fabsf(g[1] - 2 / (1 + expf(-1))) < 1e-6f && fabsf(g[2] - 2 * -2 / (1 + expf(2))) < 1e-6f);
    /* GeGLU: PyTorch's gelu(approximate="tanh") values times u */
    float gg[4] = {0, 1, -2, 3}, gu[4] = {2, 2, 2, -1};
    vx_geglu(gg, gu, 4);
    CHECK(gg[0] == 0 && fabsf(gg[1] - 2 * 0.841191990607f) < 1e-6f && fabsf(gg[2] - 2 * -0.0454023059f) < 1e-7f &&
          fabsf(gg[3] + 2.99636261f) < 1e-6f);
    float sm[3] = {1, 2, 3};
    vx_softmax(sm, 3);
    const double z = exp(1) + exp(2) + exp(3);
    CHECK(fabs(sm[2] - exp(3) / z) < 1e-6 && fabs(sm[0] + sm[1] + sm[2] - 1) < 1e-6);
}

/* The SIMD tiers' SwiGLU and GeGLU give the AVX2 kernels' bits (the
 * AVX-512 ones are their arithmetic lane for lane), whole vectors and
 * partial last ones, and at the exp's flush-to-zero edge (|g| past ~87). */
static void test_swiglu_bits(const vx_kernels *k, const vx_kernels *avx2) {
    enum { N = 1000 };
    float g0[N], g1[N], u[N];
    for (int i = 0; i < N; i++) {
        g0[i] = frand() * (i % 5 == 0 ? 60.0f : 4.0f);
        u[i] = frand() * 3;
    }
    g0[7] = 87.5f, g0[8] = -87.5f, g0[9] = -0.0f, g0[10] = 0.0f, g0[11] = 1e-30f;
    const int64_t sizes[] = {1, 7, 15, 16, 17, 31, 33, 100, 1000};
    typedef void (*glu_fn)(float *, const float *, int64_t);
    const struct {
        const char *name;
        glu_fn want, got;
    } fns[2] = {{"swiglu", avx2->swiglu, k->swiglu}, {"geglu", avx2->geglu, k->geglu}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int f = 0; f < 2; f++) {
            const int64_t n = sizes[si];
            float gk[N];
            memcpy(g1, g0, sizeof g0);
            memcpy(gk, g0, sizeof g0);
            fns[f].want(g1, u, n);
            fns[f].got(gk, u, n);
            CHECKF(memcmp(g1, gk, (size_t)n * sizeof(float)) == 0, "%s %s n=%lld: not the AVX2 kernel's bits",
                   k->name, fns[f].name, (long long)n);
            CHECKF(n == N || memcmp(gk + n, g0 + n, (size_t)(N - n) * sizeof(float)) == 0,
                   "%s %s n=%lld wrote past n", k->name, fns[f].name, (long long)n);
        }
}

int main(void) {
    vx_kernels ref, k, avx2;
    vx_kernels_init(&ref, VX_ISA_GENERIC);
    test_reference_ops();
    const vx_isa best = vx_cpu_best_isa();
    for (int isa = VX_ISA_GENERIC; isa <= (int)best; isa++) {
        vx_kernels_init(&k, (vx_isa)isa);
        test_variant(&k, &ref);
        printf("kernels %s: checked\n", k.name);
    }
    if (best >= VX_ISA_AVX2) {
        vx_kernels_init(&avx2, VX_ISA_AVX2);
        for (int isa = VX_ISA_AVX2 + 1; isa <= (int)best; isa++) {
            vx_kernels_init(&k, (vx_isa)isa);
            test_swiglu_bits(&k, &avx2);
        }
        /* the AVX-512 tier through SIMDe: the same source on any AVX2 CPU */
        vx_kernels_init_emulated(&k);
        test_variant(&k, &ref);
        test_swiglu_bits(&k, &avx2);
        printf("kernels %s: checked\n", k.name);
    }
    return vx_test_finish("test_ops");
}
