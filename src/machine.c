/* machine.c - see machine.h. */
#include "machine.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ops.h"
#include "threadpool.h"
#include "x86/kernels_amx.h"
#include "x86/kernels_x86.h"

typedef struct lim_task {
    const uint8_t *buf;
    size_t size;
    int kind; /* 0 read, 1 fma, 2 int8, 3 AMX bf16 */
    int pat;  /* read: the read_pat entry */
    bool avx512; /* the AVX-512 loops (else AVX2) */
    int64_t iters;
    double sink[64];
} lim_task;

/* Reads this thread's share in blocks of S * L bytes, each block as S
 * interleaved streams of L bytes (L = 0: one block, S streams over the
 * whole share), with a software prefetch D bytes ahead in each stream (0:
 * none), as the gemv kernels do. The DRAM prefetchers track several
 * streams: one stream per thread leaves bandwidth unused on this kind of
 * machine, and so do streams hundreds of MiB apart (here 29-36 GB/s where
 * blocks of 4 x 128 KiB read 44-47). */
#define READ_MAX_STREAMS 8
static double read_share(const uint8_t *p, size_t n, int S, size_t L, size_t D) {
    if (L == 0) L = n / (size_t)S / 64 * 64;
    uint64_t a[READ_MAX_STREAMS] = {0};
    const size_t blk = (size_t)S * L;
    for (size_t b = 0; blk && b + blk <= n; b += blk)
        for (size_t i = 0; i < L; i += 64)
            for (int s = 0; s < S; s++) {
                const uint64_t *r = (const uint64_t *)(const void *)(p + b + (size_t)s * L + i);
                if (D) __builtin_prefetch((const char *)r + D);
                a[s] ^= r[0] + r[4];
            }
    uint64_t x = 0;
    for (int s = 0; s < S; s++) x ^= a[s];
    return (double)x;
}

/* The read patterns tried; the limit is the best pass of any (each pass
 * is timed over the bytes it read, the whole blocks of both shares). */
static const struct {
    int streams;
    size_t len, ahead;
} read_pat[] = {{4, 0, 0}, {4, 0, 512}, {4, 128 << 10, 0}, {4, 128 << 10, 512}, {8, 64 << 10, 512}};

static void lim_worker(void *arg, int ith, int nth) {
    lim_task *t = arg;
    if (t->kind == 0) {
        int64_t lo, hi;
        /* shares of whole MiB: every pattern reads all of its share */
        vx_split((int64_t)t->size, ith, nth, 1 << 20, &lo, &hi);
        t->sink[ith] = read_share(t->buf + lo, (size_t)(hi - lo), read_pat[t->pat].streams, read_pat[t->pat].len,
                                  read_pat[t->pat].ahead);
    } else if (t->kind == 1) {
        t->sink[ith] = t->avx512 ? vx_peak_fma_avx512(t->iters) : vx_peak_fma_avx2(t->iters);
    } else if (t->kind == 2) {
        t->sink[ith] = t->avx512 ? vx_peak_int8_avx512(t->iters) : vx_peak_int8_avx2(t->iters);
    } else {
        t->sink[ith] = vx_peak_amx_bf16_amx(t->iters);
    }
}

int vx_measure_limits(int n_threads, vx_limits *out) {
    memset(out, 0, sizeof *out);
    vx_pool *pool;
    if (vx_pool_init(n_threads, &pool) != VX_OK) return -1;
    const int nth = vx_pool_n_threads(pool);
    out->n_threads = nth;
    const size_t size = (size_t)1 << 30; /* 1 GiB: far beyond any L3 */
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, size) != 0) {
        vx_pool_free(pool);
        return -1;
    }
    memset(buf, 1, size);
    lim_task t;
    memset(&t, 0, sizeof t);
    t.buf = buf;
    t.size = size;
    double best = 0;
    for (int rep = 0; rep < 3 * (int)(sizeof read_pat / sizeof read_pat[0]); rep++) {
        t.pat = rep % (int)(sizeof read_pat / sizeof read_pat[0]);
        int64_t t0 = vx_time_us();
        vx_pool_run(pool, lim_worker, &t);
        double s = (double)(vx_time_us() - t0) * 1e-6;
        if (size / s / 1e9 > best) best = (double)size / s / 1e9;
    }
    out->read_gbs = best;
    free(buf);
    out->isa = "generic";
    if (vx_cpu_best_isa() >= VX_ISA_AVX2) {
        /* the peak loops of the tier the kernels use (VX_ISA caps it) */
        t.avx512 = vx_cpu_best_isa() >= VX_ISA_AVX512;
        out->isa = t.avx512 ? "avx512" : "avx2";
        t.iters = 20 * 1000 * 1000;
        for (int kind = 1; kind <= 2; kind++) {
            t.kind = kind;
            double bestk = 0;
            for (int rep = 0; rep < 3; rep++) {
                int64_t t0 = vx_time_us();
                vx_pool_run(pool, lim_worker, &t);
                double s = (double)(vx_time_us() - t0) * 1e-6;
                /* AVX2 fma: 10 vectors x 8 lanes x 2 flops; int8: 8 vectors x 32 lanes x 2 ops.
                 * AVX-512: 10 x 16 x 2; 10 vpdpbusd x 64 byte products x 2 ops */
                double ops = (double)t.iters * nth *
                             (kind == 1 ? (t.avx512 ? 320.0 : 160.0) : (t.avx512 ? 1280.0 : 512.0));
                if (ops / s / 1e9 > bestk) bestk = ops / s / 1e9;
            }
            if (kind == 1) out->fma_gflops = bestk;
            else out->int8_gops = bestk;
        }
    }
    if (vx_cpu_best_isa() >= VX_ISA_AMX) {
        out->isa = "amx";
        t.kind = 3;
        t.iters = 500 * 1000;
        for (int rep = 0; rep < 3; rep++) {
            int64_t t0 = vx_time_us();
            vx_pool_run(pool, lim_worker, &t);
            double s = (double)(vx_time_us() - t0) * 1e-6;
            const double g = (double)t.iters * nth * 65536.0 / s / 1e9;
            if (g > out->amx_bf16_gflops) out->amx_bf16_gflops = g;
        }
    }
    vx_pool_free(pool);
    return 0;
}
