/*
 * bench_attention.c - single-thread micro-benchmark of vx_attention() on
 * the current kernel table (not a test: the runner only picks up
 * tests/test_*.c).
 *
 * A Llama-3.2-1B-shaped layer (32 query heads, 8 kv heads, head dim 64;
 * other shapes by arguments) with an F16 cache holding `depth + n`
 * positions of random K/V; a prefill batch of n tokens at positions depth
 * .. depth + n - 1 (on the block kernels, and on the tile attention
 * where the table has one), and a one-token decode at the last position. Prints
 * the best time over the repetitions (robust to a shared machine) and the
 * achieved GFLOP/s of the q.k and p.v products (4 hd flops per visible
 * position and query head).
 *
 * Build (from the repository root, after `make`):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests tests/bench_attention.c tests/testutil.c \
 *      build/libvortex.a -lm -lpthread -lpcre2-8 -lcjson -lmicrohttpd -lutf8proc -o /tmp/bench_attention
 * Run: /tmp/bench_attention [depth=3584] [n=512] [reps=5] [n_head=32] [n_head_kv=8] [hd=64] [softcap=0]
 *      [layers=1] [threads=1]
 * With layers > 1, a last line times decodes through `layers` layers of
 * the cache in turn (their K/V far larger than the caches, as in a model's
 * decode at depth) on `threads` threads (wall time, one barrier a layer),
 * and prints the cache bytes read per second. Several threads split each
 * layer's positions by segments, as a context's decode does.
 * VX_FORCE_GENERIC / VX_ISA select the kernel table as everywhere else.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "kv_cache.h"
#include "ops.h"
#include "quant.h"
#include "testutil.h"
#include "common.h"

/* seconds on a clock: this thread's CPU time (robust to time slicing on a
 * shared machine) or, for the multi-thread decode, wall time */
static double secs(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the multi-layer decode: each thread runs its share of every layer,
 * DRAM_REPS times per timed repetition */
enum { DRAM_REPS = 4, DRAM_MAX_THREADS = 16 };
typedef struct dram_job {
    const vx_kernels *k;
    vx_attn_args a;
    int layers, reps, ith, nth;
    float *scr;
    pthread_barrier_t *bar;
} dram_job;

static void *dram_run(void *arg) {
    dram_job *j = arg;
    for (int r = 0; r < j->reps; r++)
        for (int l = 0; l < j->layers; l++) {
            j->a.layer = l;
            vx_attention(j->k, &j->a, j->ith, j->nth, j->scr);
            pthread_barrier_wait(j->bar);
        }
    return NULL;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return vx_test_frand(&rng); }

int main(int argc, char **argv) {
    const int depth = argc > 1 ? atoi(argv[1]) : 3584, n = argc > 2 ? atoi(argv[2]) : 512;
    const int reps = argc > 3 ? atoi(argv[3]) : 5;
    const int n_head = argc > 4 ? atoi(argv[4]) : 32, n_head_kv = argc > 5 ? atoi(argv[5]) : 8;
    const int hd = argc > 6 ? atoi(argv[6]) : 64;
    const float cap = argc > 7 ? (float)atof(argv[7]) : 0; /* Gemma 2's soft cap (50) */
    const int layers = argc > 8 ? atoi(argv[8]) : 1, nth = argc > 9 ? atoi(argv[9]) : 1;
    const int total = depth + n, KD = n_head_kv * hd, QD = n_head * hd;
    vx_kernels k;
    vx_kernels_init_best(&k);
    vx_kv_params kp = {layers, KD, 1, total + 16, total + 16, 16, VX_KV_F16, 0, hd};
    vx_kv_cache *kv = NULL;
    if (vx_kv_init(&kp, &kv) != VX_OK || vx_kv_reserve(kv, 0, total) != VX_OK) {
        fprintf(stderr, "kv cache init failed\n");
        return 1;
    }
    for (int ly = 0; ly < layers; ly++) {
        for (int p = 0; p < total; p++)
            for (int h = 0; h < n_head_kv; h++) {
                uint16_t *kr = vx_kv_k_head(kv, ly, 0, p, h), *vr = vx_kv_v_head(kv, ly, 0, p, h);
                for (int i = 0; i < hd; i++) {
                    kr[i] = vx_fp32_to_fp16(frand());
                    vr[i] = vx_fp32_to_fp16(frand());
                }
            }
    }
    float *q = malloc((size_t)n * QD * 4), *out = malloc((size_t)n * QD * 4);
    int32_t *pos = malloc((size_t)n * 4), *seq = calloc((size_t)n, 4);
    for (int i = 0; i < n * QD; i++) q[i] = 3 * frand();
    for (int i = 0; i < n; i++) pos[i] = depth + i;
    const size_t nsf = vx_attn_scratch_floats(n_head, n_head_kv, hd);
    float *scr = aligned_alloc(64, (nsf * 4 + 63) / 64 * 64);
    const float scale = 1.0f / sqrtf((float)hd);
    printf("kernels %s, n_head %d, n_head_kv %d, hd %d, soft cap %g\n", k.name, n_head, n_head_kv, hd, cap);
    /* mode 0: prefill on the block kernels, 1: prefill on the tiles, 2: decode */
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 1 && !k.attn_tiles_step) continue;
        const int nt = mode < 2 ? n : 1;
        vx_attn_args a = {kv, 0, n_head, n_head_kv, hd, scale, mode < 2 ? q : q + (size_t)(n - 1) * QD,
                          out, mode < 2 ? pos : pos + n - 1, seq, nt, mode == 1, NULL, cap, 0, vx_attn_seg_len(total), NULL, NULL,
                          0, 0, NULL, NULL};
        double best = 1e30, flops = 0;
        for (int t = 0; t < nt; t++) flops += 4.0 * hd * n_head * (a.pos[t] + 1);
        for (int r = 0; r < (mode < 2 ? reps : 20 * reps); r++) {
            const double t0 = secs(CLOCK_THREAD_CPUTIME_ID);
            vx_attention(&k, &a, 0, 1, scr);
            const double dt = secs(CLOCK_THREAD_CPUTIME_ID) - t0;
            best = dt < best ? dt : best;
        }
        printf("%-8s %4d tok @ depth %5d: %9.3f ms  %6.1f GFLOP/s\n",
               mode == 0 ? "prefill" : mode == 1 ? "tiles" : "decode", nt, mode < 2 ? depth : total - 1, best * 1e3,
               flops / best * 1e-9);
    }
    if (layers > 1 && nth >= 1) {
        const int T = nth < DRAM_MAX_THREADS ? nth : DRAM_MAX_THREADS;
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)T);
        dram_job jobs[DRAM_MAX_THREADS];
        pthread_t th[DRAM_MAX_THREADS];
        double best = 1e30;
        /* the segment split's buffers, sized as a context's (forward.c) */
        const int32_t seg = vx_attn_seg_len(total), slots = (T - 1) * n_head_kv, seg_max = (total - 1) / seg + 2;
        float *seg_buf = malloc(vx_attn_seg_floats(seg_max, n_head / n_head_kv, hd) * (size_t)VX_MAX(1, slots) * 4);
        atomic_int *seg_done = calloc((size_t)VX_MAX(1, slots), sizeof(atomic_int));
        for (int r = 0; r < reps; r++) {
            for (int i = 0; i < T; i++) {
                jobs[i] = (dram_job){&k,
                                     {kv, 0, n_head, n_head_kv, hd, scale, q + (size_t)(n - 1) * QD, out, pos + n - 1,
                                      seq, 1, false, NULL, cap, 0, seg, T > 1 ? seg_buf : NULL, seg_done, slots,
                                      seg_max, NULL},
                                     layers, DRAM_REPS, i, T, i ? aligned_alloc(64, (nsf * 4 + 63) / 64 * 64) : scr, &bar};
            }
            const double t0 = secs(CLOCK_MONOTONIC);
            for (int i = 1; i < T; i++) pthread_create(&th[i], NULL, dram_run, &jobs[i]);
            dram_run(&jobs[0]);
            for (int i = 1; i < T; i++) pthread_join(th[i], NULL);
            const double dt = (secs(CLOCK_MONOTONIC) - t0) / DRAM_REPS;
            for (int i = 1; i < T; i++) free(jobs[i].scr);
            best = dt < best ? dt : best;
        }
        const double bytes = 2.0 * layers * (double)total * KD * 2;
        printf("decode x%d layers, %d threads: %9.3f ms a token, %6.1f GB/s of K/V, %6.1f GFLOP/s\n", layers, T,
               best * 1e3, bytes / best * 1e-9, 4.0 * hd * n_head * total * layers / best * 1e-9);
        pthread_barrier_destroy(&bar);
        free(seg_buf);
        free(seg_done);
    }
    free(q);
    free(out);
    free(pos);
    free(seq);
    free(scr);
    vx_kv_free(kv);
    return 0;
}
