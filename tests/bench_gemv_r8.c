/*
 * bench_gemv_r8.c - single-thread micro-benchmark of the packed (8-row
 * interleaved, *_R8) GEMV kernels that decode runs on (not a test: the
 * runner only picks up tests/test_*.c). tests/bench_kernels.c covers the
 * file layouts.
 *
 * Per type: rows of 2048 elements quantized by the reference quantizer,
 * packed with vx_repack_rows, as a 512 KiB matrix (L2-resident: the
 * kernel's compute ceiling) and a 64 MiB one (DRAM), times one activation
 * row; the best time of many calls, printed as GB/s of packed weight bytes.
 * A kernel whose L2 figure is close to the DRAM one is near its compute
 * ceiling.
 *
 * Build (from the repository root, after `make`):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tests/bench_gemv_r8.c build/libvortex.a \
 *      -lm -lpthread -lpcre2-8 -lcjson -lmicrohttpd -o /tmp/bench_gemv_r8
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "quant.h"
#include "common.h"
#include "x86/kernels_x86.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
typedef void (*gv)(int64_t, const void *, size_t, int, const void *, float *);
int main(void) {
  const int n = 2048;
  struct { const char *name; int type; gv f; int act; } T[] = {
    {"Q4_0_R8", VX_TYPE_Q4_0, vx_gemv_q4_0_r8_avx2, VX_TYPE_Q8_0},
    {"Q5_0_R8", VX_TYPE_Q5_0, vx_gemv_q5_0_r8_avx2, VX_TYPE_Q8_0},
    {"Q8_0_R8", VX_TYPE_Q8_0, vx_gemv_q8_0_r8_avx2, VX_TYPE_Q8_0},
    {"Q4_K_R8", VX_TYPE_Q4_K, vx_gemv_q4_K_r8_avx2, VX_TYPE_Q8_K},
    {"Q6_K_R8", VX_TYPE_Q6_K, vx_gemv_q6_K_r8_avx2, VX_TYPE_Q8_K},
  };
  float *x = malloc(n * 4); for (int i = 0; i < n; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
  for (unsigned t = 0; t < sizeof T / sizeof T[0]; t++) {
    const vx_type_traits *tr = vx_type_get_traits(T[t].type), *ta = vx_type_get_traits(T[t].act);
    const size_t rs = vx_row_size(T[t].type, n), prs = vx_repack_row_size(vx_repack_type(T[t].type), n);
    uint8_t *y = malloc(vx_row_size(T[t].act, n)); ta->from_float(x, y, n);
    for (int big = 0; big < 2; big++) {
      const int nrows = (int)((big ? (64u << 20) : (512u << 10)) / prs) / 8 * 8;
      uint8_t *src = malloc(rs * 8), *w = aligned_alloc(64, prs * nrows);
      float *row = malloc(n * 4), *out = malloc(nrows * 4);
      for (int r = 0; r < 8; r++) { for (int i = 0; i < n; i++) row[i] = (float)(((i + 13 * r) * 2654435761u) % 2000) / 1000.0f - 1.0f; tr->from_float(row, src + r * rs, n); }
      for (int g = 0; g < nrows / 8; g++) vx_repack_rows(T[t].type, src, rs, 8, n, w + (size_t)g * 8 * prs);
      double best = 1e9; const int reps = big ? 10 : 400;
      for (int k = 0; k < reps; k++) { double t0 = now(); T[t].f(n, w, prs, nrows, y, out); double dt = now() - t0; if (dt < best) best = dt; }
      printf("%s %s: %.2f GB/s\n", T[t].name, big ? "DRAM 64MiB" : "L2 512KiB", (double)prs * nrows / best * 1e-9);
      free(src); free(w); free(row); free(out);
    }
  }
}
