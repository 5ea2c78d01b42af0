/*
 * bench_gemv_dram.c - 2-thread DRAM micro-benchmark of the packed GEMVs
 * that decode runs on (not a test: the runner only picks up
 * tests/test_*.c). Per type named on the command line: 1 GiB of packed
 * rows of 2048 elements (this host's L3 is 300 MiB: a smaller matrix read
 * again and again is partly cached) times one activation row, split over 2
 * threads in chunks of 512 rows as decode splits a matmul. The types are
 * run in turn, round after round, so the host's swings hit them alike;
 * prints the best and median GB/s of packed weight bytes. "read" is a
 * pure-read loop (4 streams per thread) over 1 GiB; TYPE@avx2 takes the
 * AVX2 tier's kernel instead of the best tier's; TYPE:T runs the GEMM
 * (batched decode) on T activation rows instead (also printed as GOP/s).
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -mavx512f -Iinclude -Isrc tests/bench_gemv_dram.c build/libvortex.a \
 *      -lm -lpthread -lpcre2-8 -lcjson -lmicrohttpd -o /tmp/bench_gemv_dram
 *   /tmp/bench_gemv_dram 12 read Q4_K Q5_K Q5_K@avx2 Q6_K
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "ops.h"
#include "quant.h"

enum { N = 2048, NTH = 2, CALL_ROWS = 512 };

typedef struct {
    const char *name;
    vx_gemv_fn f; /* NULL (and no g): the pure-read loop */
    vx_gemm_fn g; /* TYPE:T: the GEMM on ntok tokens */
    int ntok;
    size_t prs;   /* bytes per packed row */
    size_t ys;    /* bytes per activation row */
    int nr;
    uint8_t *w, *y;
    float *o;
} job;

static const job *cur;
static atomic_int next_chunk;
static int chunk_rows;
static volatile uint32_t sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        const int r0 = atomic_fetch_add(&next_chunk, 1) * chunk_rows;
        if (r0 >= cur->nr) break;
        const int r1 = r0 + chunk_rows < cur->nr ? r0 + chunk_rows : cur->nr;
        if (cur->g) {
            for (int r = r0; r < r1; r += CALL_ROWS)
                cur->g(N, cur->w + (size_t)r * cur->prs, cur->prs, r1 - r < CALL_ROWS ? r1 - r : CALL_ROWS, cur->y,
                       cur->ys, cur->ntok,
                       cur->o + r, cur->nr, 0, NULL);
            continue;
        }
        if (!cur->f) {
            const uint8_t *p = cur->w + (size_t)r0 * cur->prs;
            const size_t q = (size_t)(r1 - r0) * cur->prs / 4 / 64 * 64;
            __m512i acc = _mm512_setzero_si512();
            for (size_t o = 0; o < q; o += 64) {
                acc = _mm512_ternarylogic_epi32(acc, _mm512_loadu_si512(p + o), _mm512_loadu_si512(p + q + o), 0x96);
                acc = _mm512_ternarylogic_epi32(acc, _mm512_loadu_si512(p + 2 * q + o),
                                                _mm512_loadu_si512(p + 3 * q + o), 0x96);
            }
            sink += (uint32_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(acc));
            continue;
        }
        for (int r = r0; r < r1; r += CALL_ROWS)
            cur->f(N, cur->w + (size_t)r * cur->prs, cur->prs, r1 - r < CALL_ROWS ? r1 - r : CALL_ROWS, cur->y,
                   cur->o + r);
    }
    return NULL;
}

static int cmpd(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int setup(job *j, const char *arg, const vx_kernels *best, const vx_kernels *avx2) {
    char base[16];
    const char *at = strchr(arg, '@'), *colon = strchr(arg, ':');
    const char *end = at ? at : colon;
    snprintf(base, sizeof base, "%.*s", end ? (int)(end - arg) : (int)strlen(arg), arg);
    j->ntok = colon ? atoi(colon + 1) : 1;
    j->name = arg;
    if (!strcmp(base, "read")) {
        j->prs = 1024;
        j->nr = (int)((1u << 30) / j->prs);
        j->w = aligned_alloc(64, (size_t)j->prs * j->nr);
        memset(j->w, 1, (size_t)j->prs * j->nr);
        return 0;
    }
    int ty = -1;
    for (int t = 0; t < VX_TYPE_COUNT; t++)
        if (vx_type_get_traits(t) && !strcmp(vx_type_name(t), base)) ty = t;
    const int pty = ty < 0 ? -1 : vx_repack_type(ty);
    if (pty < 0) {
        fprintf(stderr, "%s: not a type with a packed layout\n", base);
        return -1;
    }
    const vx_type_traits *tr = vx_type_get_traits(ty), *ta = vx_type_get_traits(tr->vec_dot_type);
    const vx_kernels *kk = at && !strncmp(at + 1, "avx2", 4) ? avx2 : best;
    j->f = kk->gemv[pty];
    j->ys = vx_row_size(tr->vec_dot_type, N);
    if (j->ntok > 1) j->g = kk->gemm[pty];
    const size_t rs = vx_row_size(ty, N);
    j->prs = vx_repack_row_size(pty, N);
    j->nr = (int)((1u << 30) / j->prs) / 64 * 64;
    float *x = malloc(N * sizeof(float));
    uint8_t *src = malloc(rs * 8);
    for (int r = 0; r < 8; r++) {
        for (int i = 0; i < N; i++) x[i] = (float)(((i + 13 * r) * 2654435761u) % 2000) / 1000.0f - 1.0f;
        tr->from_float(x, src + (size_t)r * rs, N);
    }
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    j->y = malloc(vx_row_size(tr->vec_dot_type, N) * (size_t)j->ntok);
    for (int t = 0; t < j->ntok; t++) {
        for (int i = 0; i < N; i++) x[i] = (float)((i * 7919 + 31 * t) % 1000) / 500.0f - 1.0f;
        ta->from_float(x, j->y + (size_t)t * vx_row_size(tr->vec_dot_type, N), N);
    }
    j->w = aligned_alloc(64, j->prs * (size_t)j->nr);
    j->o = malloc((size_t)j->nr * (size_t)j->ntok * sizeof(float));
    for (int g = 0; g < j->nr / 8; g++) vx_repack_rows(ty, src, rs, 8, N, j->w + (size_t)g * 8 * j->prs);
    free(x);
    free(src);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ROUNDS read|TYPE[@avx2] ...\n", argv[0]);
        return 2;
    }
    const int rounds = atoi(argv[1]), nj = argc - 2;
    vx_kernels best, avx2;
    vx_kernels_init_best(&best);
    vx_kernels_init(&avx2, VX_ISA_AVX2);
    printf("kernels %s, %d threads, rows of %d, 1 GiB per matrix\n", best.name, NTH, N);
    job *js = calloc((size_t)nj, sizeof(job));
    double *t = malloc(sizeof(double) * (size_t)rounds * (size_t)nj);
    for (int j = 0; j < nj; j++)
        if (setup(&js[j], argv[2 + j], &best, &avx2)) return 1;
    for (int k = 0; k < rounds; k++)
        for (int j = 0; j < nj; j++) {
            cur = &js[j];
            chunk_rows = ((cur->nr + NTH * 6 - 1) / (NTH * 6) + 15) / 16 * 16;
            atomic_store(&next_chunk, 0);
            pthread_t th[NTH];
            const double t0 = now();
            for (int i = 0; i < NTH; i++) pthread_create(&th[i], NULL, worker, NULL);
            for (int i = 0; i < NTH; i++) pthread_join(th[i], NULL);
            t[(size_t)j * rounds + k] = now() - t0;
        }
    for (int j = 0; j < nj; j++) {
        double *tt = t + (size_t)j * rounds;
        qsort(tt, (size_t)rounds, sizeof(double), cmpd);
        const double bytes = (double)js[j].prs * js[j].nr;
        printf("%-10s best %6.2f GB/s  median %6.2f GB/s", js[j].name, bytes / tt[0] * 1e-9,
               bytes / tt[rounds / 2] * 1e-9);
        if (js[j].g)
            printf("  (%.0f / %.0f GOP/s)", 2.0 * N * js[j].nr * js[j].ntok / tt[0] * 1e-9,
                   2.0 * N * js[j].nr * js[j].ntok / tt[rounds / 2] * 1e-9);
        printf("\n");
    }
    return 0;
}
