/*
 * test_quant.c - tests of the type traits table and the reference kernels
 * (quant.c, quant_legacy.c, quant_k.c): table contents and name lookups,
 * quantize/dequantize round trips with per-type error bounds, edge-case
 * rows, dot products against float math, and the fixture models (every
 * tensor of every llama-*.gguf compared with the F32 source weights, byte
 * equality of re-quantized legacy blocks, fixed points of dequant->quant).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gguf.h"
#include "quant.h"
#include "quant_iq.h"
#include "quant_ref.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { /* (0, 1) */
    return ((double)(rng_next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static float rng_gauss(void) {
    double u = rng_uniform(), v = rng_uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void fill_gauss(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_gauss();
}

/* sqrt(sum (a-b)^2 / sum a^2); 0 when both are all zero. */
static double rel_rmse(const float *a, const float *b, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)a[i] * a[i];
    }
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return sqrt(num / den);
}

static bool all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* Every type the kernels implement, with the expectations the tests hold
 * them to. rt_bound: relative RMSE of a quantize/dequantize round trip on
 * Gaussian data (set a little above what the quantizers measure); dot_bound:
 * sqrt(n) |vec_dot(x, q(y)) - dot(x, y)| / (|x| |y|), the error from
 * quantizing the activations (independent rounding errors grow like sqrt(n)
 * against the norms' n, hence the scaling); fix_bound: relative RMSE of a
 * fixture tensor against the F32 weights it was quantized from. */
typedef struct {
    int type;
    const char *name;
    int64_t blck;
    size_t size;
    int vec_dot_type;
    double rt_bound;
    double dot_bound;
    double fix_bound;
} type_case;

static const type_case cases[] = {
    {VX_TYPE_F32, "F32", 1, 4, VX_TYPE_F32, 0.0, 1e-5, 0.0},
    /* half precision: at most half an ulp, 2^-11 and 2^-8 relative */
    {VX_TYPE_F16, "F16", 1, 2, VX_TYPE_F16, 4.9e-4, 1.5e-3, 4.9e-4},
    {VX_TYPE_BF16, "BF16", 1, 2, VX_TYPE_BF16, 3.9e-3, 1e-2, 3.9e-3},
    {VX_TYPE_Q4_0, "Q4_0", 32, 18, VX_TYPE_Q8_0, 0.095, 0.03, 0.095},
    {VX_TYPE_Q4_1, "Q4_1", 32, 20, VX_TYPE_Q8_1, 0.085, 0.03, 0.085},
    {VX_TYPE_Q5_0, "Q5_0", 32, 22, VX_TYPE_Q8_0, 0.047, 0.03, 0.047},
    {VX_TYPE_Q5_1, "Q5_1", 32, 24, VX_TYPE_Q8_1, 0.042, 0.03, 0.042},
    {VX_TYPE_Q8_0, "Q8_0", 32, 34, VX_TYPE_Q8_0, 0.006, 0.03, 0.006},
    {VX_TYPE_Q8_1, "Q8_1", 32, 36, VX_TYPE_Q8_1, 0.006, 0.03, 0.006},
    {VX_TYPE_Q2_K, "Q2_K", 256, 84, VX_TYPE_Q8_K, 0.28, 0.04, 0.33},
    {VX_TYPE_Q3_K, "Q3_K", 256, 110, VX_TYPE_Q8_K, 0.155, 0.04, 0.17},
    {VX_TYPE_Q4_K, "Q4_K", 256, 144, VX_TYPE_Q8_K, 0.078, 0.04, 0.08},
    {VX_TYPE_Q5_K, "Q5_K", 256, 176, VX_TYPE_Q8_K, 0.039, 0.04, 0.04},
    {VX_TYPE_Q6_K, "Q6_K", 256, 210, VX_TYPE_Q8_K, 0.019, 0.04, 0.02},
    {VX_TYPE_Q8_K, "Q8_K", 256, 292, VX_TYPE_Q8_K, 0.008, 0.04, 0.008},
    {VX_TYPE_IQ4_NL, "IQ4_NL", 32, 18, VX_TYPE_Q8_0, 0.085, 0.03, 0.085},
    {VX_TYPE_IQ4_XS, "IQ4_XS", 256, 136, VX_TYPE_Q8_0, 0.085, 0.03, 0.085},
    /* FP4 E2M1 with a power-of-two block scale: 0.5 steps near 1, 2 near 6 */
    {VX_TYPE_MXFP4, "MXFP4", 32, 17, VX_TYPE_Q8_0, 0.13, 0.04, 0.13},
    /* three levels: Gaussian data comes back with ~0.80 */
    {VX_TYPE_TQ1_0, "TQ1_0", 256, 54, VX_TYPE_Q8_K, 0.85, 0.04, 0.85},
    {VX_TYPE_TQ2_0, "TQ2_0", 256, 66, VX_TYPE_Q8_K, 0.85, 0.04, 0.85},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const type_case *case_of(int type) {
    for (int i = 0; i < N_CASES; i++)
        if (cases[i].type == type) return &cases[i];
    return NULL;
}

/* The grid i-quants: dequantization and dot product, no quantizer */
static const struct { int type; const char *name; size_t size; } grid_cases[] = {
    {VX_TYPE_IQ1_S, "IQ1_S", 50},     {VX_TYPE_IQ1_M, "IQ1_M", 56},   {VX_TYPE_IQ2_XXS, "IQ2_XXS", 66},
    {VX_TYPE_IQ2_XS, "IQ2_XS", 74},   {VX_TYPE_IQ2_S, "IQ2_S", 82},   {VX_TYPE_IQ3_XXS, "IQ3_XXS", 98},
    {VX_TYPE_IQ3_S, "IQ3_S", 110},
};
#define N_GRID ((int)(sizeof grid_cases / sizeof grid_cases[0]))

/* Quantizes n floats with type t into a fresh, exactly sized buffer (so the
 * sanitizers see any overrun) and dequantizes them into out. */
static void *round_trip(const vx_type_traits *tr, int type, const float *x, float *out, int64_t n) {
    size_t sz = vx_row_size((vx_type)type, n);
    void *q = xmalloc(sz);
    tr->from_float(x, q, n);
    tr->to_float(q, out, n);
    return q;
}

/* ------------------------------------------------------------- table */

static void test_table(void) {
    int supported = 0;
    for (int id = 0; id < VX_TYPE_COUNT; id++)
        if (vx_type_get_traits(id) && vx_type_get_traits(id)->to_float) supported++;
    CHECKF(supported == N_CASES + N_GRID, "%d types with kernels, expected %d", supported, N_CASES + N_GRID);

    for (int i = 0; i < N_CASES; i++) {
        const type_case *c = &cases[i];
        const vx_type_traits *tr = vx_type_get_traits(c->type);
        CHECKF(tr != NULL, "no traits for %s", c->name);
        if (!tr) continue;
        CHECKF(strcmp(tr->name, c->name) == 0, "name %s vs %s", tr->name, c->name);
        CHECKF(tr->blck_size == c->blck, "%s blck_size %lld", c->name, (long long)tr->blck_size);
        CHECKF(tr->type_size == c->size, "%s type_size %zu", c->name, tr->type_size);
        CHECKF(tr->is_quantized == (c->blck > 1), "%s is_quantized", c->name);
        CHECKF(tr->to_float && tr->from_float && tr->vec_dot, "%s kernels missing", c->name);
        CHECKF((int)tr->vec_dot_type == c->vec_dot_type, "%s vec_dot_type %d", c->name,
               (int)tr->vec_dot_type);
        CHECK(strcmp(vx_type_name(c->type), c->name) == 0);

        /* names parse in any case */
        char lower[16];
        size_t k;
        for (k = 0; c->name[k] && k + 1 < sizeof lower; k++)
            lower[k] = (char)(c->name[k] >= 'A' && c->name[k] <= 'Z' ? c->name[k] + 32 : c->name[k]);
        lower[k] = 0;
        CHECKF(vx_type_from_name(c->name) == c->type, "from_name(%s)", c->name);
        CHECKF(vx_type_from_name(lower) == c->type, "from_name(%s)", lower);

        CHECK(vx_row_size((vx_type)c->type, 4 * c->blck) == 4 * c->size);
        CHECK(vx_row_size((vx_type)c->type, 0) == 0);
        if (c->blck > 1) CHECK(vx_row_size((vx_type)c->type, c->blck + 1) == 0);
    }
    /* integer / F64 ids: sized (so files holding them parse) but no kernels */
    const struct { int id; const char *name; size_t size; } plain[] = {
        {VX_TYPE_I8, "I8", 1}, {VX_TYPE_I16, "I16", 2}, {VX_TYPE_I32, "I32", 4},
        {VX_TYPE_I64, "I64", 8}, {VX_TYPE_F64, "F64", 8}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const vx_type_traits *tr = vx_type_get_traits(plain[i].id);
        CHECKF(tr && strcmp(tr->name, plain[i].name) == 0 && tr->type_size == plain[i].size &&
                   tr->blck_size == 1 && !tr->to_float && !tr->vec_dot,
               "plain type %s", plain[i].name);
    }

    CHECK(vx_type_get_traits(-1) == NULL);
    CHECK(vx_type_get_traits(VX_TYPE_COUNT) == NULL);
    CHECK(vx_type_get_traits(1000) == NULL);
    CHECK(vx_type_get_traits(4) == NULL); /* removed Q4_2 */
    CHECK(vx_type_get_traits(31) == NULL); /* removed Q4_0_4_4 */
    CHECK(strcmp(vx_type_name(4), "?") == 0);
    CHECK(strcmp(vx_type_name(-5), "?") == 0);
    CHECK(vx_type_from_name("q4_k") == VX_TYPE_Q4_K);
    CHECK(vx_type_from_name("Q4_K") == VX_TYPE_Q4_K);
    CHECK(vx_type_from_name("f16") == VX_TYPE_F16);
    CHECK(vx_type_from_name("bf16") == VX_TYPE_BF16);
    CHECK(vx_type_from_name("iq4_nl") == VX_TYPE_IQ4_NL);
    CHECK(vx_type_from_name("Q4_K_M") == -1);
    CHECK(vx_type_from_name("") == -1);
    CHECK(vx_type_from_name(NULL) == -1);
    CHECK(vx_row_size(VX_TYPE_F32, 7) == 28);
    CHECK(vx_row_size(VX_TYPE_Q4_K, 512) == 288);
    CHECK(vx_row_size(VX_TYPE_Q4_0, -32) == 0);
    CHECK(vx_row_size((vx_type)99, 32) == 0);

    static const int8_t book[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};
    CHECK(memcmp(vx_iq4nl_values, book, sizeof book) == 0);
}

/* ------------------------------------------------- synthetic round trips */

static void test_round_trip(void) {
    const int64_t n = 256 * 64;
    float *x = xmalloc((size_t)n * sizeof(float));
    float *y = xmalloc((size_t)n * sizeof(float));
    float *z = xmalloc((size_t)n * sizeof(float));
    printf("round trip, Gaussian data (%lld values): relative RMSE\n", (long long)n);
    for (int i = 0; i < N_CASES; i++) {
        const type_case *c = &cases[i];
        const vx_type_traits *tr = vx_type_get_traits(c->type);
        if (!tr) continue;
        rng_state = 1234 + (uint64_t)i;
        fill_gauss(x, n, 0.02f); /* weight-like magnitude */
        void *q = round_trip(tr, c->type, x, y, n);
        double e = rel_rmse(x, y, n);
        printf("  %-7s %.5f (bound %.4g)\n", c->name, e, c->rt_bound);
        CHECKF(e <= c->rt_bound, "%s round-trip rel RMSE %.5f > %.4g", c->name, e, c->rt_bound);
        CHECKF(all_finite(y, n), "%s non-finite output", c->name);

        /* Dequantized data is (very nearly) a fixed point: quantizing it
         * again must not lose more than a sliver of extra precision. */
        void *q2 = round_trip(tr, c->type, y, z, n);
        double e2 = rel_rmse(y, z, n);
        CHECKF(e2 <= 0.25 * c->rt_bound + 1e-7, "%s requantize drift %.5f", c->name, e2);
        free(q2);

        /* values around 1e3 behave the same (no hidden absolute thresholds) */
        for (int64_t k = 0; k < n; k++) z[k] = x[k] * 5e4f;
        free(q);
        q = round_trip(tr, c->type, z, y, n);
        e = rel_rmse(z, y, n);
        CHECKF(e <= c->rt_bound, "%s round-trip (scaled) rel RMSE %.5f", c->name, e);
        free(q);
    }
    free(x);
    free(y);
    free(z);
}

/* Zeros, constants, one huge outlier, tiny and mixed magnitudes: outputs
 * must be finite, zeros must stay exactly zero, constants and the outlier
 * must come back close. */
static void test_special_rows(void) {
    const int64_t n = 512;
    float x[512], y[512];
    for (int i = 0; i < N_CASES; i++) {
        const type_case *c = &cases[i];
        const vx_type_traits *tr = vx_type_get_traits(c->type);
        if (!tr) continue;

        memset(x, 0, sizeof x);
        free(round_trip(tr, c->type, x, y, n));
        bool zero = true;
        for (int k = 0; k < n; k++) zero = zero && y[k] == 0.0f;
        CHECKF(zero, "%s: zeros do not round-trip to zeros", c->name);

        /* MXFP4 holds one value per element, no block fit: 2.5 = 5 x 2^-1
         * is no E2M1 value (4 or 6), so it comes back 20% off; its large
         * values lie up to a fifth of themselves apart (4 and 6 x 2^k) */
        const bool fp4 = c->type == VX_TYPE_MXFP4;
        const float consts[] = {1.0f, -2.5f, 0.001f, -0.0173f};
        for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
            for (int j = 0; j < n; j++) x[j] = consts[k];
            free(round_trip(tr, c->type, x, y, n));
            double e = rel_rmse(x, y, n);
            CHECKF(all_finite(y, n) && e <= (fp4 ? 0.2 + 1e-6 : c->rt_bound),
                   "%s: constant %g comes back with rel RMSE %g", c->name, (double)consts[k], e);
        }

        rng_state = 99 + (uint64_t)i;
        fill_gauss(x, n, 1.0f);
        x[37] = 1000.0f;
        x[300] = -700.0f;
        free(round_trip(tr, c->type, x, y, n));
        CHECKF(all_finite(y, n), "%s: outlier row gives non-finite output", c->name);
        CHECKF(fabsf(y[37] - 1000.0f) <= (fp4 ? 200.0f : 30.0f) && fabsf(y[300] + 700.0f) <= (fp4 ? 140.0f : 30.0f),
               "%s: outliers come back as %g, %g", c->name, (double)y[37], (double)y[300]);

        fill_gauss(x, n, 1e-6f); /* block scales fall into fp16 subnormals */
        free(round_trip(tr, c->type, x, y, n));
        CHECKF(all_finite(y, n), "%s: tiny values give non-finite output", c->name);

        /* NaN and infinities: no crash or UB (the sanitizer build checks),
         * and the damage stays inside the super-block that holds them */
        fill_gauss(x, n, 1.0f);
        x[3] = NAN;
        x[100] = INFINITY;
        x[200] = -INFINITY;
        free(round_trip(tr, c->type, x, y, n));
        CHECKF(all_finite(y + 256, 256) && rel_rmse(x + 256, y + 256, 256) <= c->rt_bound * 1.2,
               "%s: NaN/Inf in the first half spoil the second", c->name);

        /* blocks of wildly different magnitude, and all-negative blocks */
        for (int j = 0; j < n; j++) x[j] = rng_gauss() * powf(10.0f, (float)((j / 32) % 5) - 2.0f);
        for (int j = 256; j < 512; j++) x[j] = -fabsf(x[j]) - 0.5f;
        free(round_trip(tr, c->type, x, y, n));
        CHECKF(all_finite(y, n), "%s: mixed magnitudes give non-finite output", c->name);
        /* (one scale per 256 values makes Q8_K pay for the spread) */
        CHECKF(rel_rmse(x, y, n) <= 2 * c->rt_bound, "%s: mixed magnitudes rel RMSE %g", c->name,
               rel_rmse(x, y, n));
    }
}

/* ---------------------------------------------------------- dot products */

/* Checks vec_dot on x (n floats of type c) against float math: exactly
 * (up to accumulation rounding) against the dequantized operands, and
 * within dot_bound against the unquantized activations. Returns the
 * normalized error against the float activations. */
static double check_dot(const type_case *c, const void *xq, const float *xf, const float *b,
                        int64_t n, const char *what, bool vs_float) {
    const vx_type_traits *tr = vx_type_get_traits(c->type);
    const vx_type_traits *ty = vx_type_get_traits(c->vec_dot_type);
    void *yq = xmalloc(vx_row_size((vx_type)c->vec_dot_type, n));
    float *yf = xmalloc((size_t)n * sizeof(float));
    ty->from_float(b, yq, n);
    ty->to_float(yq, yf, n);
    float s = -1.0f;
    tr->vec_dot(n, &s, xq, yq);
    double exact = 0.0, mag = 0.0, ref = 0.0, nx = 0.0, ny = 0.0;
    for (int64_t i = 0; i < n; i++) {
        exact += (double)xf[i] * yf[i];
        mag += fabs((double)xf[i] * yf[i]);
        ref += (double)xf[i] * b[i];
        nx += (double)xf[i] * xf[i];
        ny += (double)b[i] * b[i];
    }
    /* float32 result plus accumulation rounding and, for the split-min
     * types, min terms taken from the rounded Q8_1 sum s */
    double tol = 2e-6 * mag + 1e-30;
    if (c->vec_dot_type == VX_TYPE_Q8_1) tol += 2e-3 * sqrt(nx * ny);
    CHECKF(fabs(s - exact) <= tol, "%s %s: vec_dot %.9g vs dequantized dot %.9g", c->name, what,
           (double)s, exact);
    double err = nx > 0 && ny > 0 ? fabs(s - ref) * sqrt((double)n / (nx * ny)) : fabs(s - ref);
    CHECKF(!vs_float || err <= c->dot_bound, "%s %s: vec_dot off the float dot by %.3g (normalized)",
           c->name, what, err);
    free(yq);
    free(yf);
    return err;
}

static void test_vec_dot(void) {
    const int64_t n = 256 * 16;
    float *a = xmalloc((size_t)n * sizeof(float));
    float *b = xmalloc((size_t)n * sizeof(float));
    float *af = xmalloc((size_t)n * sizeof(float));
    printf("vec_dot vs float dot of dequantized x and raw y: normalized error\n");
    for (int i = 0; i < N_CASES; i++) {
        const type_case *c = &cases[i];
        const vx_type_traits *tr = vx_type_get_traits(c->type);
        if (!tr) continue;
        rng_state = 777 + (uint64_t)i;
        fill_gauss(a, n, 0.05f);
        fill_gauss(b, n, 3.0f);
        for (int64_t k = 0; k < n; k += 97) b[k] = -b[k] * 4.0f; /* some larger activations */
        void *aq = round_trip(tr, c->type, a, af, n);
        double err = check_dot(c, aq, af, b, n, "random", true);
        printf("  %-7s %.3g\n", c->name, err);
        /* correlated operands: a large dot, where relative error shows (the
         * activation rounding errors correlate with x here, so only the
         * comparison with the dequantized operands applies) */
        check_dot(c, aq, af, af, n, "self", false);
        free(aq);
    }
    free(a);
    free(b);
    free(af);
}

/* ------------------------------------------------------------ fixtures */

static const char *const fixture_types[] = {"F16",  "BF16", "Q8_0",   "Q4_0",   "Q4_1",
                                            "Q5_0", "Q5_1", "Q2_K",   "Q3_K_M", "Q4_K_M",
                                            "Q5_K_M", "Q6_K", "IQ4_NL"};

typedef struct {
    int tensors;        /* tensors of this type seen */
    double worst;       /* largest rel RMSE vs F32 */
    int64_t blocks;     /* blocks re-quantized from F32 */
    int64_t same;       /* ... that came out byte-identical */
    int64_t fixed;      /* fixed-point blocks checked */
    int64_t fixed_ok;
    uint64_t hash;      /* FNV-1a of the dequantized bits, all tensors in order */
    int requantized;    /* tensors re-quantized with our own search */
    double ours, theirs; /* summed rel RMSE of ours and of the fixture's */
    double worst_ratio; /* largest ours / theirs */
} type_stats;

/* Q8_0, Q4_0 and Q5_0 blocks whose extreme code is present are fixed points
 * of dequantize -> quantize: the extreme re-derives the same fp16 scale
 * exactly (d*127 and d*-8, d*-16 are exact in float, and dividing back is
 * exact), and every other value is an exact multiple of it. Returns -1 when
 * the block does not qualify, else whether it reproduced its bytes. */
static int fixed_point_block(int type, const uint8_t *blk) {
    const vx_type_traits *tr = vx_type_get_traits(type);
    float v[32];
    uint8_t again[64];
    uint16_t d;
    memcpy(&d, blk, 2);
    float df = vx_fp16_to_fp32(d);
    if (!(df != 0.0f) || !isfinite(df)) return -1;
    bool has_extreme = false;
    if (type == VX_TYPE_Q8_0) {
        const vx_block_q8_0 *b = (const void *)blk;
        for (int j = 0; j < 32; j++) has_extreme |= b->qs[j] == 127 || b->qs[j] == -127;
    } else {
        tr->to_float(blk, v, 32);
        const float lowest = type == VX_TYPE_Q4_0 ? -8.0f : -16.0f;
        for (int j = 0; j < 32; j++) has_extreme |= v[j] == lowest * df;
    }
    if (!has_extreme) return -1;
    tr->to_float(blk, v, 32);
    tr->from_float(v, again, 32);
    return memcmp(again, blk, tr->type_size) == 0;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

/* Hashes of the exact bits that to_float produces for all fixture tensors
 * of each type (files in fixture_types order, tensors in file order). They
 * were recorded after checking every one of those 390 tensors bit for bit
 * against an independent dequantizer (gguf-py's numpy code, which the
 * fixtures' manifest checks against ggml), so any change to a dequantizer's
 * output, however small, fails here. */
static const struct {
    int type;
    uint64_t hash;
} dequant_hashes[] = {
    {VX_TYPE_F32, 0xc48598fe3e4e7a71ull},
    {VX_TYPE_F16, 0x582a20367b0bb2b1ull},
    {VX_TYPE_BF16, 0x702c0605cbeef57aull},
    {VX_TYPE_Q8_0, 0x582aa79894650aa8ull},
    {VX_TYPE_Q4_0, 0xa7f6732edc1a65a2ull},
    {VX_TYPE_Q4_1, 0x40abfa274e0c66e2ull},
    {VX_TYPE_Q5_0, 0xee401dbb85ae6497ull},
    {VX_TYPE_Q5_1, 0x5305be03cb7e7093ull},
    {VX_TYPE_Q2_K, 0xe3d54f7031e2c500ull},
    {VX_TYPE_Q3_K, 0x2f532b33d52bd950ull},
    {VX_TYPE_Q4_K, 0xa4d5f58ec9162070ull},
    {VX_TYPE_Q5_K, 0x5d6e021779ea2f07ull},
    {VX_TYPE_Q6_K, 0xde04ae0d14e14f5eull},
    {VX_TYPE_IQ4_NL, 0x667992e84116134cull},
};

static void test_fixtures(void) {
    char err[256];
    char path[512];
    vx_gguf *ref = NULL;
    snprintf(path, sizeof path, "%s", vx_test_fixture_path("models/llama/llama-F32.gguf"));
    vx_status st = vx_gguf_open(path, &ref, err, sizeof err);
    CHECKF(st == VX_OK, "cannot open %s: %s", path, err);
    if (st != VX_OK) return;

    type_stats stats[VX_TYPE_COUNT];
    memset(stats, 0, sizeof stats);
    int64_t dot_rows = 0;

    for (size_t f = 0; f < sizeof fixture_types / sizeof fixture_types[0]; f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/llama/llama-%s.gguf", fixture_types[f]);
        snprintf(path, sizeof path, "%s", vx_test_fixture_path(rel));
        vx_gguf *g = NULL;
        st = vx_gguf_open(path, &g, err, sizeof err);
        CHECKF(st == VX_OK, "cannot open %s: %s", path, err);
        if (st != VX_OK) continue;
        rng_state = 4242 + f;

        for (int64_t ti = 0; ti < vx_gguf_n_tensors(g); ti++) {
            const vx_gguf_tensor *t = vx_gguf_tensor_at(g, ti);
            const vx_type_traits *tr = vx_type_get_traits(t->type);
            CHECKF(tr && tr->to_float, "%s: tensor %s has unsupported type %d", rel, t->name,
                   t->type);
            if (!tr || !tr->to_float) continue;
            const int64_t ne0 = t->ne[0];
            const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
            const size_t rs = vx_row_size((vx_type)t->type, ne0);
            CHECKF(rs > 0 && rs * (size_t)rows == t->size, "%s: %s size %llu", rel, t->name,
                   (unsigned long long)t->size);
            const vx_gguf_tensor *r = vx_gguf_find_tensor(ref, t->name);
            CHECKF(r && r->type == VX_TYPE_F32 && r->ne[0] == ne0 &&
                       r->ne[1] * r->ne[2] * r->ne[3] == rows,
                   "%s: no matching F32 tensor for %s", rel, t->name);
            if (!r || r->type != VX_TYPE_F32 || rs == 0 || rs * (size_t)rows != t->size) continue;

            const float *src = r->data;
            float *deq = xmalloc((size_t)(ne0 * rows) * sizeof(float));
            uint8_t *requant = xmalloc(rs);
            type_stats *ts = &stats[t->type];
            for (int64_t row = 0; row < rows; row++) {
                const uint8_t *qrow = (const uint8_t *)t->data + (size_t)row * rs;
                tr->to_float(qrow, deq + row * ne0, ne0);
                /* The legacy quantizers round exactly like the tool that made
                 * the fixtures, so the F32 weights must give the same bytes. */
                if (t->type == VX_TYPE_Q8_0 || t->type == VX_TYPE_Q4_0 || t->type == VX_TYPE_Q4_1 ||
                    t->type == VX_TYPE_Q5_0 || t->type == VX_TYPE_Q5_1 || t->type == VX_TYPE_F16 ||
                    t->type == VX_TYPE_BF16) {
                    tr->from_float(src + row * ne0, requant, ne0);
                    for (int64_t bi = 0; bi < ne0 / tr->blck_size; bi++) {
                        size_t off = (size_t)bi * tr->type_size;
                        ts->blocks++;
                        ts->same += memcmp(requant + off, qrow + off, tr->type_size) == 0;
                    }
                }
                if (t->type == VX_TYPE_Q8_0 || t->type == VX_TYPE_Q4_0 || t->type == VX_TYPE_Q5_0) {
                    for (int64_t bi = 0; bi < ne0 / 32; bi++) {
                        int ok = fixed_point_block(t->type, qrow + (size_t)bi * tr->type_size);
                        if (ok < 0) continue;
                        ts->fixed++;
                        ts->fixed_ok += ok;
                    }
                }
            }
            ts->hash = fnv1a(ts->hash ? ts->hash : 0xCBF29CE484222325ull, deq,
                             (size_t)(ne0 * rows) * sizeof(float));
            CHECKF(all_finite(deq, ne0 * rows), "%s: %s dequantizes to non-finite values", rel,
                   t->name);
            double e = rel_rmse(src, deq, ne0 * rows);
            const type_case *c = case_of(t->type);
            CHECKF(c && e <= c->fix_bound, "%s: %s (%s) rel RMSE vs F32 %.5f > %.4g", rel, t->name,
                   tr->name, e, c ? c->fix_bound : 0.0);
            ts->tensors++;
            if (e > ts->worst) ts->worst = e;

            /* Our search-based quantizers (K-quants, IQ4_NL) must do at least
             * as well as the tool that made the fixtures, on the same weights
             * (the first rows of each tensor: enough for a stable figure). */
            if (tr->blck_size == VX_QK_K || t->type == VX_TYPE_IQ4_NL) {
                const int64_t nr = rows < 64 ? rows : 64;
                float *mine = xmalloc((size_t)(ne0 * nr) * sizeof(float));
                for (int64_t row = 0; row < nr; row++) {
                    tr->from_float(src + row * ne0, requant, ne0);
                    tr->to_float(requant, mine + row * ne0, ne0);
                }
                double em = rel_rmse(src, mine, ne0 * nr);
                double et = rel_rmse(src, deq, ne0 * nr);
                CHECKF(em <= et, "%s: %s re-quantized as %s: rel RMSE %.5f vs the fixture's %.5f",
                       rel, t->name, tr->name, em, et);
                ts->requantized++;
                ts->ours += em;
                ts->theirs += et;
                if (em / et > ts->worst_ratio) ts->worst_ratio = em / et;
                free(mine);
            }

            /* vec_dot on real blocks (negative scales, real min layouts) */
            if (c && t->type != VX_TYPE_F32) {
                float *b = xmalloc((size_t)ne0 * sizeof(float));
                for (int64_t row = 0; row < rows; row += rows / 3 > 0 ? rows / 3 : 1) {
                    fill_gauss(b, ne0, 1.0f);
                    check_dot(c, (const uint8_t *)t->data + (size_t)row * rs, deq + row * ne0, b,
                              ne0, t->name, true);
                    dot_rows++;
                }
                free(b);
            }
            free(deq);
            free(requant);
        }
        vx_gguf_close(g);
    }
    vx_gguf_close(ref);

    printf("fixtures: worst rel RMSE of dequantized tensors vs llama-F32.gguf\n");
    const int want[] = {VX_TYPE_F32, VX_TYPE_F16, VX_TYPE_BF16, VX_TYPE_Q8_0, VX_TYPE_Q4_0,
                        VX_TYPE_Q4_1, VX_TYPE_Q5_0, VX_TYPE_Q5_1, VX_TYPE_Q2_K, VX_TYPE_Q3_K,
                        VX_TYPE_Q4_K, VX_TYPE_Q5_K, VX_TYPE_Q6_K, VX_TYPE_IQ4_NL};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const type_stats *ts = &stats[want[k]];
        printf("  %-7s %3d tensors  worst %.5f", vx_type_name(want[k]), ts->tensors, ts->worst);
        if (ts->blocks) printf("  requantized %lld/%lld identical", (long long)ts->same,
                               (long long)ts->blocks);
        if (ts->fixed) printf("  fixed points %lld/%lld", (long long)ts->fixed_ok,
                              (long long)ts->fixed);
        if (ts->requantized)
            printf("  ours: mean %.5f vs %.5f, worst ratio %.3f", ts->ours / ts->requantized,
                   ts->theirs / ts->requantized, ts->worst_ratio);
        printf("\n");
        CHECKF(ts->tensors > 0, "no %s tensor found in the fixtures", vx_type_name(want[k]));
        for (size_t h = 0; h < sizeof dequant_hashes / sizeof dequant_hashes[0]; h++) {
            if (dequant_hashes[h].type != want[k]) continue;
            CHECKF(ts->hash == dequant_hashes[h].hash,
                   "%s: dequantized bits changed (hash %016llx, expected %016llx)",
                   vx_type_name(want[k]), (unsigned long long)ts->hash,
                   (unsigned long long)dequant_hashes[h].hash);
        }
        if (getenv("VX_QUANT_PRINT_HASHES"))
            printf("    {VX_TYPE_%s, 0x%016llxull},\n", vx_type_name(want[k]),
                   (unsigned long long)ts->hash);
        CHECKF(ts->same == ts->blocks, "%s: %lld of %lld re-quantized blocks differ",
               vx_type_name(want[k]), (long long)(ts->blocks - ts->same), (long long)ts->blocks);
        CHECKF(ts->fixed_ok == ts->fixed, "%s: %lld of %lld fixed-point blocks moved",
               vx_type_name(want[k]), (long long)(ts->fixed - ts->fixed_ok), (long long)ts->fixed);
    }
    CHECK(stats[VX_TYPE_Q8_0].fixed > 0 && stats[VX_TYPE_Q4_0].fixed > 0 &&
          stats[VX_TYPE_Q5_0].fixed > 0);
    CHECK(dot_rows > 0);
}

/* ------------------------------------------------------------ IQ4_XS */

/* The block layout, element by element as the format defines it: scale
 * j is d (ls - 32), ls = the nibble j % 2 of scales_l[j / 2] (low first)
 * | bits 2j..2j+1 of scales_h << 4; element 32 j + k takes the low nibble
 * of qs[16 j + k] (k < 16) or the high one of qs[16 j + k - 16]. Then the
 * load-time form: every sub-block as an IQ4_NL block of scale fp16(d (ls -
 * 32)) packed as IQ4_NL rows are, and dot products that move by no more
 * than that rounding. */
static void test_iq4_xs(void) {
    vx_block_iq4_xs b;
    memset(&b, 0, sizeof b);
    b.d = vx_fp32_to_fp16(0.375f);
    static const int ls[8] = {0, 63, 32, 31, 1, 17, 45, 62};
    for (int j = 0; j < 8; j++) {
        b.scales_l[j / 2] |= (uint8_t)((ls[j] & 15) << (4 * (j % 2)));
        b.scales_h |= (uint16_t)((ls[j] >> 4) << (2 * j));
    }
    for (int k = 0; k < 128; k++) b.qs[k] = (uint8_t)(k * 37 + 11);
    float got[256];
    vx_dequantize_row_iq4_xs(&b, got, 256);
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        const int j = e / 32, k = e % 32;
        const uint8_t byte = b.qs[16 * j + k % 16];
        const int code = k < 16 ? byte & 15 : byte >> 4;
        const float want = 0.375f * (float)(ls[j] - 32) * (float)vx_iq4nl_values[code];
        bad += got[e] != want;
    }
    CHECKF(bad == 0, "IQ4_XS: %d of 256 hand-built elements dequantize wrong", bad);

    enum { N = 1024, R = 16 };
    float *x = xmalloc(sizeof(float) * N * R), *y = xmalloc(sizeof(float) * N);
    rng_state = 4242;
    fill_gauss(x, N * R, 0.02f);
    fill_gauss(y, N, 1.0f);
    const size_t rs = vx_row_size(VX_TYPE_IQ4_XS, N), rn = vx_row_size(VX_TYPE_IQ4_NL, N);
    uint8_t *xs = xmalloc(rs * R), *nl = xmalloc(rn * R);
    for (int r = 0; r < R; r++) vx_quantize_row_iq4_xs(x + (size_t)r * N, xs + (size_t)r * rs, N);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N / 256; i++) {
            const vx_block_iq4_xs *s = (const vx_block_iq4_xs *)(const void *)(xs + (size_t)r * rs) + i;
            for (int j = 0; j < 8; j++) {
                vx_block_iq4_nl *o = (vx_block_iq4_nl *)(void *)(nl + (size_t)r * rn) + 8 * i + j;
                const int l = ((s->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((s->scales_h >> (2 * j)) & 3) << 4);
                o->d = vx_fp32_to_fp16(vx_fp16_to_fp32(s->d) * (float)(l - 32));
                memcpy(o->qs, s->qs + 16 * j, 16);
            }
        }
    CHECK(vx_repack_type(VX_TYPE_IQ4_XS) == VX_TYPE_IQ4_NL_R8);
    const size_t prs = vx_repack_row_size(VX_TYPE_IQ4_NL_R8, N);
    CHECK(prs == rn);
    uint8_t *p1 = xmalloc(prs * R), *p2 = xmalloc(prs * R);
    vx_repack_rows(VX_TYPE_IQ4_XS, xs, rs, R, N, p1);
    vx_repack_rows(VX_TYPE_IQ4_NL, nl, rn, R, N, p2);
    CHECKF(memcmp(p1, p2, prs * R) == 0, "IQ4_XS repacked differs from its IQ4_NL form repacked");
    vx_block_q8_0 yq[N / 32];
    vx_quantize_row_q8_0(y, yq, N);
    float deq[N];
    double worst = 0.0;
    for (int r = 0; r < R; r++) {
        float a, c;
        vx_vec_dot_iq4_xs_q8_0(N, &a, xs + (size_t)r * rs, yq);
        vx_vec_dot_iq4_nl_q8_0(N, &c, nl + (size_t)r * rn, yq);
        vx_dequantize_row_iq4_xs(xs + (size_t)r * rs, deq, N);
        double mag = 0.0;
        for (int i = 0; i < N; i++) mag += fabs((double)deq[i] * vx_fp16_to_fp32(yq[i / 32].d) * yq[i / 32].qs[i % 32]);
        const double rel = fabs((double)a - c) / mag;
        if (rel > worst) worst = rel;
        CHECKF(rel <= 0x1p-11, "IQ4_XS row %d: dot %.9g, as IQ4_NL %.9g", r, (double)a, (double)c);
    }
    printf("IQ4_XS: layout, repack as IQ4_NL_R8, dots vs the IQ4_NL form (worst %.2e of the magnitude)\n", worst);
    free(x);
    free(y);
    free(xs);
    free(nl);
    free(p1);
    free(p2);
}

/* ------------------------------------------------------------ TQ1_0, TQ2_0 */

/* Blocks built by hand from the layouts (quant.h), and exact round trips
 * of ternary data. */
static void test_ternary(void) {
    float got[256];
    /* TQ1_0: trits (2, 0, 1, 2, 1) -> v = 178 -> byte ceil(178 256 / 243) =
     * 188 in qs[0]: elements 0, 32, 64, 96, 128; (1, 1, 1, 1, 2) -> 122 ->
     * 129 in qs[35]: elements 163 + 16 n; four trits (0, 2, 2, 1) and a
     * zero fifth -> 75 -> 80 in qh[1]: elements 241, 245, 249, 253. Every
     * other byte all trits 1 (zeros): ceil(121 256 / 243) = 128 in qs,
     * ceil(120 256 / 243) = 127 in qh (fifth trit 0). */
    vx_block_tq1_0 b1;
    memset(&b1, 128, sizeof b1);
    memset(b1.qh, 127, sizeof b1.qh);
    b1.qs[0] = 188, b1.qs[35] = 129, b1.qh[1] = 80;
    b1.d = vx_fp32_to_fp16(0.5f);
    vx_dequantize_row_tq1_0(&b1, got, 256);
    float want[256] = {0};
    const int e1[] = {0, 32, 64, 96, 128, 163, 179, 195, 211, 227, 241, 245, 249, 253};
    const float v1[] = {1, -1, 0, 1, 0, 0, 0, 0, 0, 1, -1, 1, 1, 0};
    for (int k = 0; k < 14; k++) want[e1[k]] = 0.5f * v1[k];
    int bad = 0;
    for (int e = 0; e < 256; e++) bad += got[e] != want[e];
    CHECKF(bad == 0, "TQ1_0: %d of 256 hand-built elements dequantize wrong", bad);

    /* TQ2_0: element 128 h + 32 l + m in bits 2l of qs[32 h + m] */
    vx_block_tq2_0 b2;
    b2.d = vx_fp32_to_fp16(0.25f);
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < 32; m++) {
            uint8_t byte = 0;
            for (int l = 0; l < 4; l++) byte |= (uint8_t)(((h * 7 + l * 3 + m) % 3) << (2 * l));
            b2.qs[32 * h + m] = byte;
        }
    vx_dequantize_row_tq2_0(&b2, got, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, l = e % 128 / 32, m = e % 32;
        bad += got[e] != 0.25f * (float)((h * 7 + l * 3 + m) % 3 - 1);
    }
    CHECKF(bad == 0, "TQ2_0: %d of 256 hand-built elements dequantize wrong", bad);

    /* ternary rows (one element of each block at +-d, so d is the block's
     * largest magnitude) come back exactly from both types, and the
     * quantizers re-make the hand-built blocks' bytes */
    enum { N = 4 * 256 };
    float x[N], y1[N], y2[N];
    rng_state = 4242;
    for (int i = 0; i < N; i++) {
        const float d = (float)(1 + i / 256) * 0.375f; /* exact in fp16 */
        x[i] = d * (float)((int)(rng_next() % 3) - 1);
        if (i % 256 == 17) x[i] = -d;
    }
    uint8_t q1[4 * sizeof(vx_block_tq1_0)], q2[4 * sizeof(vx_block_tq2_0)];
    vx_quantize_row_tq1_0(x, q1, N);
    vx_quantize_row_tq2_0(x, q2, N);
    vx_dequantize_row_tq1_0(q1, y1, N);
    vx_dequantize_row_tq2_0(q2, y2, N);
    CHECK(memcmp(x, y1, sizeof x) == 0);
    CHECK(memcmp(x, y2, sizeof x) == 0);
    vx_block_tq1_0 r1;
    vx_block_tq2_0 r2;
    vx_dequantize_row_tq1_0(&b1, got, 256);
    vx_quantize_row_tq1_0(got, &r1, 256);
    CHECK(memcmp(&r1, &b1, sizeof b1) == 0);
    vx_dequantize_row_tq2_0(&b2, got, 256);
    vx_quantize_row_tq2_0(got, &r2, 256);
    CHECK(memcmp(&r2, &b2, sizeof b2) == 0);
    /* halves round away from zero (lroundf's rule): 0.5 d -> +d, -0.5 d -> -d */
    float h[256] = {0};
    h[0] = 1.0f, h[1] = 0.5f, h[2] = -0.5f, h[3] = 0.49f, h[4] = -0.49f;
    vx_quantize_row_tq2_0(h, &r2, 256);
    vx_dequantize_row_tq2_0(&r2, got, 256);
    CHECK(got[1] == 1.0f && got[2] == -1.0f && got[3] == 0.0f && got[4] == 0.0f);
    /* as the Q2_K blocks the SIMD tiers run them as (quant_repack.c): the
     * same values, bit for bit (the hand-built blocks and the row x) */
    for (int k = 0; k < 6; k++) {
        const int type = k % 2 ? VX_TYPE_TQ2_0 : VX_TYPE_TQ1_0;
        const uint8_t *blk = k < 2 ? (k ? (const uint8_t *)&b2 : (const uint8_t *)&b1)
                             : k % 2 ? q2 + (size_t)(k / 2) * sizeof(vx_block_tq2_0)
                                     : q1 + (size_t)(k / 2) * sizeof(vx_block_tq1_0);
        vx_block_q2_K q;
        float a[256];
        vx_tq_block_as_q2_K(type, blk, &q);
        vx_type_get_traits(type)->to_float(blk, a, 256);
        vx_dequantize_row_q2_K(&q, got, 256);
        CHECKF(memcmp(a, got, sizeof a) == 0, "%s block %d as Q2_K: other values", vx_type_name(type), k);
    }
    printf("TQ1_0, TQ2_0: hand-built layouts, exact ternary round trips, the same values as Q2_K blocks\n");
}

/* MXFP4's values as the OCP MX spec defines them: E2M1 codes (sign bit 3;
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^(e - 127), E8M0 scales 0 and 1 the
 * subnormal 2^-127 and 2^-126 */
static void test_mxfp4(void) {
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    const int es[] = {0, 1, 2, 100, 127, 128, 200, 250}; /* 2^123 x 6: within float range */
    for (size_t k = 0; k < sizeof es / sizeof es[0]; k++) {
        vx_block_mxfp4 b;
        b.e = (uint8_t)es[k];
        for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
        float y[32];
        vx_type_get_traits(VX_TYPE_MXFP4)->to_float(&b, y, 32);
        const double sc = ldexp(1.0, es[k] - 127);
        for (int j = 0; j < 16; j++) {
            CHECKF((double)y[j] == e2m1[j] * sc, "MXFP4 e %d code %d: %g, want %g", es[k], j, (double)y[j],
                   e2m1[j] * sc);
            CHECKF((double)y[j + 16] == e2m1[15 - j] * sc, "MXFP4 e %d code %d (high nibble): %g", es[k], 15 - j,
                   (double)y[j + 16]);
        }
    }
    /* values on the grid come back exactly, through the quantizer */
    float x[32], y[32];
    for (int j = 0; j < 32; j++) x[j] = e2m1[(j * 7) % 16] * 0.25f;
    vx_block_mxfp4 q;
    vx_type_get_traits(VX_TYPE_MXFP4)->from_float(x, &q, 32);
    vx_type_get_traits(VX_TYPE_MXFP4)->to_float(&q, y, 32);
    for (int j = 0; j < 32; j++) CHECKF(y[j] == x[j], "MXFP4 grid value %g came back as %g", (double)x[j], (double)y[j]);
    printf("MXFP4: E2M1 x E8M0 values, subnormal scales, grid values exact through the quantizer\n");
}

/* The grid i-quants: the traits, blocks of known codes (the books' first
 * entries: IQ2's all 8, IQ3_XXS's all 4, IQ3_S's all 1, IQ1's all -1),
 * signs and scales decoded by the layouts' rules, and the dot product
 * against float64 sums of the dequantized rows on random blocks */
static void test_grid(void) {
    for (int i = 0; i < N_GRID; i++) {
        const vx_type_traits *tr = vx_type_get_traits(grid_cases[i].type);
        CHECKF(tr && !strcmp(tr->name, grid_cases[i].name) && tr->blck_size == 256 &&
                   tr->type_size == grid_cases[i].size && tr->to_float && tr->vec_dot && !tr->from_float &&
                   tr->vec_dot_type == VX_TYPE_Q8_K && vx_iq_is_grid(grid_cases[i].type),
               "traits of %s", grid_cases[i].name);
        CHECK(vx_type_from_name(grid_cases[i].name) == grid_cases[i].type);
    }
    CHECK(!vx_iq_is_grid(VX_TYPE_IQ4_XS) && !vx_iq_is_grid(VX_TYPE_Q2_K));
    float y[256];
    uint8_t blk[128];
    /* IQ2_XXS: codes 0, signs7 1 on group 0 (elements 0 and 7 negative: an
     * odd count gets the eighth sign), scale 15 in sub-block 1: d 31 / 8 x 8 */
    memset(blk, 0, sizeof blk);
    vx_iq_set_scale(VX_TYPE_IQ2_XXS, blk, 0x3C00);
    blk[2 + 4] = 1;            /* sub-block 0's u32: signs7 of group 0 */
    blk[2 + 8 + 7] = 15 << 4;  /* sub-block 1's u32, bits 28..31 */
    vx_type_get_traits(VX_TYPE_IQ2_XXS)->to_float(blk, y, 256);
    CHECKF(y[0] == -1.0f && y[7] == -1.0f && y[1] == 1.0f && y[8] == 1.0f && y[32] == 31.0f && y[255] == 1.0f,
           "IQ2_XXS known block: %g %g %g %g %g %g", y[0], y[7], y[1], y[8], y[32], y[255]);
    /* IQ3_S: codes 0 (all 1), sign byte 0x81 on group 0, scale nibbles 3 / 0 */
    memset(blk, 0, sizeof blk);
    vx_iq_set_scale(VX_TYPE_IQ3_S, blk, 0x4000); /* 2.0 */
    blk[2 + 64 + 8] = 0x81;                      /* signs[0] */
    blk[2 + 64 + 8 + 32] = 3;                    /* scales[0]: sub-block 0 -> 7, 1 -> 1 */
    vx_type_get_traits(VX_TYPE_IQ3_S)->to_float(blk, y, 256);
    CHECKF(y[0] == -14.0f && y[7] == -14.0f && y[1] == 14.0f && y[32] == 2.0f, "IQ3_S known block: %g %g %g %g", y[0],
           y[7], y[1], y[32]);
    /* IQ3_XXS: codes 0 (all 4), scale 0: d 4 / 4 */
    memset(blk, 0, sizeof blk);
    vx_iq_set_scale(VX_TYPE_IQ3_XXS, blk, 0x3C00);
    vx_type_get_traits(VX_TYPE_IQ3_XXS)->to_float(blk, y, 256);
    CHECKF(y[0] == 1.0f && y[255] == 1.0f, "IQ3_XXS known block: %g %g", y[0], y[255]);
    /* IQ1_S: codes 0 (all -1), shift +1/8, then -1/8 with scale 7 in
     * sub-block 1: d (2 s + 1) (g + shift) */
    memset(blk, 0, sizeof blk);
    vx_iq_set_scale(VX_TYPE_IQ1_S, blk, 0x3C00);
    blk[2 + 32 + 2] = 0x00, blk[2 + 32 + 3] = 0xF0; /* qh[1]: bit 15 and scale 7 */
    vx_type_get_traits(VX_TYPE_IQ1_S)->to_float(blk, y, 256);
    CHECKF(y[0] == -0.875f && y[32] == -15.0f * 1.125f, "IQ1_S known block: %g %g", y[0], y[32]);
    /* IQ1_M: the fp16 scale in the scale words' top nibbles (0x3C00 = 1.0) */
    memset(blk, 0, sizeof blk);
    vx_iq_set_scale(VX_TYPE_IQ1_M, blk, 0x3C00);
    CHECK(vx_iq1_m_scale((const vx_block_iq1_m *)(const void *)blk) == 0x3C00);
    blk[32 + 16] = 0x3F; /* sub-block 0: first 16 scale 7, second 16 scale 7 */
    vx_type_get_traits(VX_TYPE_IQ1_M)->to_float(blk, y, 256);
    CHECKF(y[0] == -15.0f * 0.875f && y[16] == -15.0f * 0.875f && y[32] == -0.875f, "IQ1_M known block: %g %g %g",
           y[0], y[16], y[32]);

    /* dot products against float64 sums over the dequantized rows */
    enum { N = 1024 };
    float x[N], xd[N], yd[N];
    uint8_t w[4 * 110], q[4 * 292];
    for (int i = 0; i < N_GRID; i++) {
        const int t = grid_cases[i].type;
        const vx_type_traits *tr = vx_type_get_traits(t);
        double worst = 0;
        for (int rep = 0; rep < 50; rep++) {
            for (size_t b = 0; b < vx_row_size((vx_type)t, N); b++) w[b] = (uint8_t)rng_next();
            for (int b = 0; b < N / 256; b++)
                vx_iq_set_scale(t, w + (size_t)b * tr->type_size, vx_fp32_to_fp16(0.01f * (float)(rep + 1)));
            fill_gauss(x, N, 1.0f);
            vx_type_get_traits(VX_TYPE_Q8_K)->from_float(x, q, N);
            tr->to_float(w, xd, N);
            vx_type_get_traits(VX_TYPE_Q8_K)->to_float(q, yd, N);
            double ref = 0, mag = 0;
            for (int e = 0; e < N; e++) ref += (double)xd[e] * yd[e], mag += fabs((double)xd[e] * yd[e]);
            float s;
            tr->vec_dot(N, &s, w, q);
            const double err = fabs(s - ref) / mag;
            worst = err > worst ? err : worst;
        }
        CHECKF(worst < 1e-6, "%s dot vs float64 sum: %.3g", tr->name, worst);
    }
    printf("grid i-quants: traits, known blocks, dots vs float64 (1e-6 of sum |x y|)\n");
}

int main(void) {
    test_table();
    test_grid();
    test_round_trip();
    test_special_rows();
    test_vec_dot();
    test_iq4_xs();
    test_ternary();
    test_mxfp4();
    test_fixtures();
    return vx_test_finish("test_quant");
}
