/*
 * bench_kernels.c - single-thread micro-benchmark of the AVX2 quantization
 * kernels (not a test: the runner only picks up tests/test_*.c).
 *
 * For every weight type: a 64 MiB weight matrix (twice the 32 MiB L3) of
 * rows of n (default 4096) random-byte blocks with sane fp16 scales (every
 * page distinct, the kernels' work does not depend on the codes), times one
 * quantized activation row, with the type's gemv and row by row with
 * vec_dot; printed as GB/s of weight bytes and ns (and core cycles) per
 * block (32 elements for F16/BF16). The same gemv on a 512 KiB matrix
 * (L2-resident) shows the compute ceiling, and a plain read of the 64 MiB
 * a single stream's DRAM rate. Then the activation quantizers, reference
 * vs AVX2, per row of n floats.
 *
 * The machine may be shared: each pass is timed in ~1 MiB chunks (in
 * order, so the memory system sees the real stream) and each chunk keeps
 * its best time over the repetitions; the L2 figures are the best of many
 * short passes.
 *
 * Build (from the repository root):
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc tests/bench_kernels.c src/quant*.c \
 *       src/common.c avx2_quant.o avx2_quant_k.o -lm -o bench_kernels
 * Usage: bench_kernels [reps [n [type...]]]: reps default 7, n default 4096
 * (K-quants are skipped unless n is a multiple of 256); naming types (e.g.
 * q4_k f16) runs only those and skips the quantizer timings.
 */
#include <emmintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "ops.h"
#include "quant.h"
#include "quant_ref.h"
#include "x86/kernels_x86.h"

#define BIG_BYTES ((size_t)64 << 20)
#define SMALL_BYTES ((size_t)512 << 10)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float gauss(uint64_t *s) {
    double u = ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void *xalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

typedef struct {
    int type;
    vx_gemv_fn gemv;
    vx_vec_dot_fn dot; /* NULL for F16/BF16 (f32 activations) */
    int nf16;          /* fp16 factors per block and their offsets */
    size_t f16_off[2];
    int avx512; /* the AVX-512 tier's kernel: run only where the CPU has it */
} bcase;

/* Fills the matrix with random bytes, every block's fp16 factors then set
 * to sane values: every page distinct (no cache or page-merging help),
 * and the kernels do the same work whatever the codes. */
static void fill_random(const bcase *b, uint8_t *w, size_t bytes, uint64_t *seed) {
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t v = splitmix(seed);
        memcpy(w + i, &v, 8);
    }
    const vx_type_traits *tr = vx_type_get_traits(b->type);
    if (!tr->is_quantized) { /* F16/BF16: Gaussian weights */
        uint16_t *h = (uint16_t *)(void *)w;
        for (size_t i = 0; i < bytes / 2; i++) {
            float f = 0.02f * gauss(seed);
            h[i] = b->type == VX_TYPE_F16 ? vx_fp32_to_fp16(f) : vx_fp32_to_bf16(f);
        }
        return;
    }
    for (size_t blk = 0; blk < bytes / tr->type_size; blk++)
        for (int k = 0; k < b->nf16; k++) {
            uint16_t h = vx_fp32_to_fp16(0.001f + 0.01f * (float)(splitmix(seed) % 100));
            memcpy(w + blk * tr->type_size + b->f16_off[k], &h, 2);
        }
}

/* Rows [r0, r1) with gemv, or row by row with vec_dot (use_dot). */
static void run_rows(const bcase *b, int ncols, const uint8_t *w, size_t rs, int r0, int r1, const void *y,
                     float *out, int use_dot) {
    if (!use_dot) {
        b->gemv(ncols, w + (size_t)r0 * rs, rs, r1 - r0, y, out + r0);
    } else if (b->dot) {
        for (int r = r0; r < r1; r++) b->dot(ncols, &out[r], w + (size_t)r * rs, y);
    } else {
        for (int r = r0; r < r1; r++) {
            const uint16_t *wr = (const uint16_t *)(const void *)(w + (size_t)r * rs);
            out[r] = b->type == VX_TYPE_F16 ? vx_dot_f16_f32_avx2(ncols, wr, y)
                                            : vx_dot_bf16_f32_avx2(ncols, wr, y);
        }
    }
}

/* One pass over all rows in chunks of about 1 MiB, in order (the stream
 * the prefetchers see is the real one), each chunk's time kept as the
 * minimum over passes: the machine is shared, and a pass of several
 * milliseconds is often preempted; 100-microsecond chunks mostly are not. */
#define CHUNK_BYTES ((size_t)1 << 20)

static void timed_pass(const bcase *b, int ncols, const uint8_t *w, size_t rs, int rows, const void *y,
                       float *out, int use_dot, double *chunk_min) {
    const int per = (int)(CHUNK_BYTES / rs) & ~3; /* whole groups of 4 rows */
    for (int c = 0, r0 = 0; r0 < rows; c++, r0 += per) {
        const int r1 = r0 + per < rows ? r0 + per : rows;
        double t0 = now_s();
        run_rows(b, ncols, w, rs, r0, r1, y, out, use_dot);
        double t = now_s() - t0;
        if (t < chunk_min[c]) chunk_min[c] = t;
    }
}

static double sum_d(const double *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

/* Core clock from a chain of dependent adds (one per cycle), best of many
 * short runs. */
static double clock_ghz(void) {
    double best = INFINITY;
    for (int r = 0; r < 500; r++) {
        long n = 100000, x = 0;
        double t0 = now_s();
        __asm__ volatile("1: add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n sub $1, %1\n jnz 1b"
                         : "+r"(x), "+r"(n));
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    return 4e5 / best * 1e-9;
}

/* Plain streaming read of the buffer (SSE2 loads, two per cycle: far
 * above DRAM speed): the DRAM ceiling for one thread. */
static void read_pass(const uint8_t *p, size_t bytes, double *chunk_min, __m128i *sink) {
    __m128i a = _mm_setzero_si128(), b = _mm_setzero_si128();
    for (size_t c = 0, o = 0; o < bytes; c++, o += CHUNK_BYTES) {
        double t0 = now_s();
        for (size_t i = o; i < o + CHUNK_BYTES; i += 64) {
            a = _mm_add_epi32(a, _mm_add_epi32(_mm_load_si128((const __m128i *)(const void *)(p + i)),
                                               _mm_load_si128((const __m128i *)(const void *)(p + i + 16))));
            b = _mm_add_epi32(b, _mm_add_epi32(_mm_load_si128((const __m128i *)(const void *)(p + i + 32)),
                                               _mm_load_si128((const __m128i *)(const void *)(p + i + 48))));
        }
        double t = now_s() - t0;
        if (t < chunk_min[c]) chunk_min[c] = t;
    }
    *sink = _mm_add_epi32(*sink, _mm_add_epi32(a, b));
}

static void bench_quantizers(int reps, int ncols) {
    const struct {
        int type;
        vx_from_float_fn avx2;
    } q[] = {{VX_TYPE_Q8_0, vx_quantize_row_q8_0_avx2},
             {VX_TYPE_Q8_1, vx_quantize_row_q8_1_avx2},
             {VX_TYPE_Q8_K, vx_quantize_row_q8_K_avx2}};
    uint64_t seed = 5;
    float *x = xalloc((size_t)ncols * sizeof(float));
    for (int i = 0; i < ncols; i++) x[i] = gauss(&seed);
    uint8_t *dst = xalloc(vx_row_size(VX_TYPE_Q8_K, ncols) + vx_row_size(VX_TYPE_Q8_1, ncols));
    printf("\nactivation quantizers, one row of %d floats (ns per row, best of %d x 1000):\n", ncols, reps);
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        const vx_type_traits *tr = vx_type_get_traits(q[k].type);
        if (ncols % tr->blck_size != 0) continue;
        double best_ref = INFINITY, best_avx = INFINITY;
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            for (int i = 0; i < 1000; i++) tr->from_float(x, dst, ncols);
            double t1 = now_s();
            for (int i = 0; i < 1000; i++) q[k].avx2(x, dst, ncols);
            double t2 = now_s();
            if (t1 - t0 < best_ref) best_ref = t1 - t0;
            if (t2 - t1 < best_avx) best_avx = t2 - t1;
        }
        printf("  %-5s ref %8.0f ns   avx2 %7.0f ns   (%.1fx)\n", tr->name, best_ref * 1e6, best_avx * 1e6,
               best_ref / best_avx);
    }
    free(x);
    free(dst);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 7;
    const int ncols = argc > 2 && atoi(argv[2]) >= 32 ? atoi(argv[2]) / 32 * 32 : 4096;
    const bcase cases[] = {
        {VX_TYPE_Q4_0, vx_gemv_q4_0_avx2, vx_vec_dot_q4_0_q8_0_avx2, 1, {0, 0}, 0},
        {VX_TYPE_Q4_1, vx_gemv_q4_1_avx2, vx_vec_dot_q4_1_q8_1_avx2, 2, {0, 2}, 0},
        {VX_TYPE_Q5_0, vx_gemv_q5_0_avx2, vx_vec_dot_q5_0_q8_0_avx2, 1, {0, 0}, 0},
        {VX_TYPE_Q5_1, vx_gemv_q5_1_avx2, vx_vec_dot_q5_1_q8_1_avx2, 2, {0, 2}, 0},
        {VX_TYPE_Q8_0, vx_gemv_q8_0_avx2, vx_vec_dot_q8_0_q8_0_avx2, 1, {0, 0}, 0},
        {VX_TYPE_IQ4_NL, vx_gemv_iq4_nl_avx2, vx_vec_dot_iq4_nl_q8_0_avx2, 1, {0, 0}, 0},
        {VX_TYPE_Q2_K,
         vx_gemv_q2_K_avx2,
         vx_vec_dot_q2_K_q8_K_avx2,
         2,
         {offsetof(vx_block_q2_K, d), offsetof(vx_block_q2_K, dmin)}, 0},
        {VX_TYPE_Q3_K, vx_gemv_q3_K_avx2, vx_vec_dot_q3_K_q8_K_avx2, 1, {offsetof(vx_block_q3_K, d), 0}, 0},
        {VX_TYPE_Q4_K, vx_gemv_q4_K_avx2, vx_vec_dot_q4_K_q8_K_avx2, 2, {0, 2}, 0},
        {VX_TYPE_Q5_K, vx_gemv_q5_K_avx2, vx_vec_dot_q5_K_q8_K_avx2, 2, {0, 2}, 0},
        {VX_TYPE_Q6_K, vx_gemv_q6_K_avx2, vx_vec_dot_q6_K_q8_K_avx2, 1, {offsetof(vx_block_q6_K, d), 0}, 0},
        /* the grid i-quants (avx2_iq.c): gemv only; IQ1_M's scale is in nibbles (left random) */
        {VX_TYPE_IQ2_XXS, vx_gemv_iq2_xxs_avx2, NULL, 1, {0, 0}, 0},
        {VX_TYPE_IQ2_XS, vx_gemv_iq2_xs_avx2, NULL, 1, {0, 0}, 0},
        {VX_TYPE_IQ2_S, vx_gemv_iq2_s_avx2, NULL, 1, {0, 0}, 0},
        {VX_TYPE_IQ3_XXS, vx_gemv_iq3_xxs_avx2, NULL, 1, {0, 0}, 0},
        {VX_TYPE_IQ3_S, vx_gemv_iq3_s_avx2, NULL, 1, {0, 0}, 0},
        {VX_TYPE_IQ1_S, vx_gemv_iq1_s_avx2, NULL, 1, {0, 0}, 0},
        {VX_TYPE_IQ1_M, vx_gemv_iq1_m_avx2, NULL, 0, {0, 0}, 0},
        /* their AVX-512 kernels (avx512_iq.c) */
        {VX_TYPE_IQ2_XXS, vx_gemv_iq2_xxs_avx512, NULL, 1, {0, 0}, 1},
        {VX_TYPE_IQ2_XS, vx_gemv_iq2_xs_avx512, NULL, 1, {0, 0}, 1},
        {VX_TYPE_IQ2_S, vx_gemv_iq2_s_avx512, NULL, 1, {0, 0}, 1},
        {VX_TYPE_IQ3_XXS, vx_gemv_iq3_xxs_avx512, NULL, 1, {0, 0}, 1},
        {VX_TYPE_IQ3_S, vx_gemv_iq3_s_avx512, NULL, 1, {0, 0}, 1},
        {VX_TYPE_IQ1_S, vx_gemv_iq1_s_avx512, NULL, 1, {0, 0}, 1},
        {VX_TYPE_IQ1_M, vx_gemv_iq1_m_avx512, NULL, 0, {0, 0}, 1},
        {VX_TYPE_F16, vx_gemv_f16_avx2, NULL, 0, {0, 0}, 0},
        {VX_TYPE_BF16, vx_gemv_bf16_avx2, NULL, 0, {0, 0}, 0},
    };
    uint8_t *w = xalloc(BIG_BYTES);
    uint8_t *small = xalloc(SMALL_BYTES);
    float *out = xalloc(BIG_BYTES / 64 * sizeof(float)); /* rows are >= 64 bytes */
    float *x = xalloc((size_t)ncols * sizeof(float));
    void *y = xalloc((size_t)ncols * 2 * sizeof(float)); /* f32 row or any quantized row */
    uint64_t seed = 1;
    const double ghz = clock_ghz();

    for (size_t i = 0; i + 8 <= BIG_BYTES; i += 8) {
        uint64_t v = splitmix(&seed);
        memcpy(w + i, &v, 8);
    }
    {
        const int nchunks = (int)(BIG_BYTES / CHUNK_BYTES);
        double *cm = xalloc((size_t)nchunks * sizeof(double));
        for (int k = 0; k < nchunks; k++) cm[k] = INFINITY;
        __m128i sink = _mm_setzero_si128();
        for (int k = 0; k < reps + 1; k++) read_pass(w, BIG_BYTES, cm, &sink);
        printf("single thread, rows of %d, weights 64 MiB (DRAM) and 512 KiB (L2); core clock %.2f GHz\n",
               ncols, ghz);
        printf("plain 64 MiB read: %.2f GB/s%s\n\n", (double)BIG_BYTES / sum_d(cm, nchunks) * 1e-9,
               _mm_cvtsi128_si32(sink) == 42 ? " " : "");
        free(cm);
    }
    printf("%-11s %6s %10s %9s %9s %10s %12s %10s\n", "type", "B/blk", "gemv GB/s", "ns/blk", "cyc/blk",
           "dot GB/s", "L2 gemv GB/s", "L2 cyc/blk");

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bcase *b = &cases[c];
        const vx_type_traits *tr = vx_type_get_traits(b->type);
        bool wanted = argc <= 3;
        for (int a = 3; a < argc; a++) wanted |= vx_type_from_name(argv[a]) == b->type;
        if (!wanted || ncols % tr->blck_size != 0 || (b->avx512 && vx_cpu_best_isa() < VX_ISA_AVX512)) continue;
        const size_t rs = vx_row_size((vx_type)b->type, ncols);
        const int rows = (int)(BIG_BYTES / rs), srows = (int)(SMALL_BYTES / rs);
        fill_random(b, w, (size_t)rows * rs, &seed);
        memcpy(small, w, (size_t)srows * rs);
        for (int i = 0; i < ncols; i++) x[i] = gauss(&seed);
        if (tr->is_quantized) {
            const vx_type_traits *ty = vx_type_get_traits(tr->vec_dot_type);
            ty->from_float(x, y, ncols);
        } else {
            memcpy(y, x, (size_t)ncols * sizeof(float));
        }
        const int64_t bl = tr->blck_size == 1 ? 32 : tr->blck_size; /* F16/BF16: per 32 */
        const double nblk = (double)rows * (double)(ncols / bl);
        const double nblk_s = (double)srows * (double)(ncols / bl);
        /* gemv and vec_dot passes alternate, so drifts in machine load hit
         * both alike */
        const int per = (int)(CHUNK_BYTES / rs) & ~3;
        const int nchunks = (rows + per - 1) / per;
        double *cg = xalloc((size_t)nchunks * sizeof(double)), *cd = xalloc((size_t)nchunks * sizeof(double));
        for (int k = 0; k < nchunks; k++) cg[k] = cd[k] = INFINITY;
        run_rows(b, ncols, w, rs, 0, rows, y, out, 0); /* warm-up: page faults, clocks */
        for (int k = 0; k < reps; k++) {
            timed_pass(b, ncols, w, rs, rows, y, out, 0, cg);
            timed_pass(b, ncols, w, rs, rows, y, out, 1, cd);
        }
        const double tg = sum_d(cg, nchunks), td = sum_d(cd, nchunks);
        free(cg);
        free(cd);
        double ts = INFINITY; /* short passes: the best of many */
        for (int k = 0; k < 64 * reps; k++) {
            double t0 = now_s();
            b->gemv(ncols, small, rs, srows, y, out);
            double t = now_s() - t0;
            if (t < ts) ts = t;
        }
        char name[24];
        snprintf(name, sizeof name, "%s%s", tr->name, b->avx512 ? "/512" : "");
        printf("%-11s %6zu %10.2f %9.2f %9.2f %10.2f %12.2f %10.2f\n", name, tr->type_size,
               (double)rows * rs / tg * 1e-9, tg / nblk * 1e9, tg / nblk * 1e9 * ghz,
               (double)rows * rs / td * 1e-9, (double)srows * rs / ts * 1e-9, ts / nblk_s * 1e9 * ghz);
    }
    if (argc <= 3) bench_quantizers(reps, ncols);
    free(w);
    free(small);
    free(out);
    free(x);
    free(y);
    return 0;
}
