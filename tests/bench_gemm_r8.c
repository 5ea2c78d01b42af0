/*
 * bench_gemm_r8.c - single-thread micro-benchmark of the packed (8-row
 * interleaved, *_R8) GEMM kernels that prefill runs on (not a test: the
 * runner only picks up tests/test_*.c).
 *
 * Per type: a weight matrix of n x nrows (quantized by the reference
 * quantizer, packed with vx_repack_rows) times ntok activation rows; the
 * best thread CPU time of several calls, printed as GOP/s (2 ops per
 * multiply-add) and as int8 multiply-adds per nanosecond.
 *
 * Usage: bench_gemm_r8 [n nrows ntok reps]   (default 896 4864 64 20: a
 * Qwen2.5-0.5B FFN gate at a 64-token tile)
 *
 * Build (from the repository root, after `make`):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tests/bench_gemm_r8.c build/libvortex.a \
 *      -lm -lpthread -lpcre2-8 -lcjson -lmicrohttpd -o /tmp/bench_gemm_r8
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"
#include "matmul.h"
#include "quant.h"
#include "x86/kernels_x86.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 896, nrows = argc > 2 ? atoi(argv[2]) : 4864;
    const int ntok = argc > 3 ? atoi(argv[3]) : 64, reps = argc > 4 ? atoi(argv[4]) : 20;
    struct {
        const char *name;
        int type, act;
        vx_gemm_fn f;
    } T[] = {
        {"Q4_0_R8", VX_TYPE_Q4_0, VX_TYPE_Q8_0, vx_gemm_q4_0_r8_avx2},
        {"Q5_0_R8", VX_TYPE_Q5_0, VX_TYPE_Q8_0, vx_gemm_q5_0_r8_avx2},
        {"Q8_0_R8", VX_TYPE_Q8_0, VX_TYPE_Q8_0, vx_gemm_q8_0_r8_avx2},
        {"Q4_K_R8", VX_TYPE_Q4_K, VX_TYPE_Q8_K, vx_gemm_q4_K_r8_avx2},
        {"Q6_K_R8", VX_TYPE_Q6_K, VX_TYPE_Q8_K, vx_gemm_q6_K_r8_avx2},
        {"Q4_0_R8/512", VX_TYPE_Q4_0, VX_TYPE_Q8_0, vx_gemm_q4_0_r8_avx512},
        {"Q8_0_R8/512", VX_TYPE_Q8_0, VX_TYPE_Q8_0, vx_gemm_q8_0_r8_avx512},
        {"Q4_K_R8/512", VX_TYPE_Q4_K, VX_TYPE_Q8_K, vx_gemm_q4_K_r8_avx512},
        {"Q6_K_R8/512", VX_TYPE_Q6_K, VX_TYPE_Q8_K, vx_gemm_q6_K_r8_avx512},
    };
    float *x = malloc((size_t)n * 4), *row = malloc((size_t)n * 4);
    float *out = malloc((size_t)ntok * nrows * 4);
    uint32_t s = 1;
    for (unsigned t = 0; t < sizeof T / sizeof T[0]; t++) {
        if (n % vx_type_get_traits(T[t].type)->blck_size) continue;
        const vx_type_traits *tr = vx_type_get_traits(T[t].type), *ta = vx_type_get_traits(T[t].act);
        const size_t rs = vx_row_size(T[t].type, n), prs = vx_repack_row_size(vx_repack_type(T[t].type), n);
        const size_t ys = vx_row_size(T[t].act, n);
        uint8_t *y = malloc(ys * ntok), *src = malloc(rs * 8), *w = aligned_alloc(64, prs * nrows);
        for (int k = 0; k < ntok; k++) {
            for (int i = 0; i < n; i++) x[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / (1 << 24) * 2 - 1;
            ta->from_float(x, y + (size_t)k * ys, n);
        }
        for (int g = 0; g < nrows / 8; g++) {
            for (int r = 0; r < 8; r++) {
                for (int i = 0; i < n; i++) row[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / (1 << 24) * 2 - 1;
                tr->from_float(row, src + r * rs, n);
            }
            vx_repack_rows(T[t].type, src, rs, 8, n, w + (size_t)g * 8 * prs);
        }
        double best = 1e9;
        for (int k = 0; k < reps; k++) {
            const double t0 = cpu_now();
            T[t].f(n, w, prs, nrows, y, ys, ntok, out, nrows, 0, NULL);
            const double dt = cpu_now() - t0;
            if (dt < best) best = dt;
        }
        const double macs = (double)n * nrows * ntok;
        printf("%s n=%d rows=%d tok=%d: %.2f ms, %.1f GOP/s, %.1f MAC/ns\n", T[t].name, n, nrows, ntok, best * 1e3,
               2 * macs / best * 1e-9, macs / best * 1e-9);
        free(y), free(src), free(w);
    }
    free(x), free(row), free(out);
    return 0;
}
