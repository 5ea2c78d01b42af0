/*
 * bench_amx_overlap.c - does vector work run beside the AMX tile unit?
 * Single-thread micro-benchmark (not a test: the runner only picks up
 * tests/test_*.c).
 *
 * One iteration: four tile loads and four tdpbf16ps on fixed L1 operands
 * (the prefill GEMM's 2x2 step), and/or 8 x V independent 512-bit FMAs.
 * Prints the best cycles per iteration (at the nominal 2.2 GHz of
 * ANCHORS.md; the host's speed moves, so run it several times) of tiles
 * alone, FMAs alone and both in one loop. If the tile products left the
 * vector ports free, "both" would be the larger of the two alone.
 *
 * Sapphire Rapids here (session 15, the quiet runs of a dozen): tiles
 * alone 62-65 cycles; FMAs alone 18 / 34 / 67 (V = 4 / 8 / 16); both
 * 69 / 79 / 130. The FMAs beside the tiles run at one per cycle, not two:
 * while tdpbf16ps runs, one of the two 512-bit ports is taken, so
 * AVX-512 work beside the tiles gets half the vector throughput (and
 * work that only that port can do waits). This is why
 * building the next weight panels between a GEMM block's tile steps, and
 * the tile attention's softmax interleaved with its products, did not
 * make either faster (README, session 15).
 *
 * Build (from the repository root):
 *   cc -O2 -mavx512f -mamx-tile -mamx-bf16 tests/bench_amx_overlap.c -o /tmp/bench_amx_overlap
 * Run: /tmp/bench_amx_overlap [V=8]
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* palette 1, eight tiles of 16 rows x 64 bytes */
static const uint8_t tile_cfg[64] __attribute__((aligned(64))) = {
    1,  0, 0,  0, 0,  0, 0,  0, 0,  0, 0,  0, 0,  0, 0,  0, 64, 0, 64, 0, 64, 0,
    64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 0,  0, 0,  0, 0,  0, 0,  0, 0,  0, 0,  0,
    0,  0, 0,  0, 16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0};

static uint16_t operands[4][16][32] __attribute__((aligned(64)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}


/* cycles per iteration (best of 5) of tiles and/or v x 8 FMAs */
static double run(int tiles, int v, long n) {
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        /* eight independent chains (FMA latency 4, two per cycle) in
         * named registers */
        __m512 a0 = _mm512_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
        const double t0 = now();
        for (long i = 0; i < n; i++) {
            if (tiles) {
                _tile_loadd(4, operands[0], 64);
                _tile_loadd(5, operands[1], 64);
                _tile_loadd(6, operands[2], 64);
                _tile_loadd(7, operands[3], 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            for (int k = 0; k < v; k++) {
                a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c);
                a2 = _mm512_fmadd_ps(a2, m, c), a3 = _mm512_fmadd_ps(a3, m, c);
                a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
                a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c);
            }
            __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));
        }
        const double dt = now() - t0;
        best = dt < best ? dt : best;
        float sink[16];
        _mm512_storeu_ps(sink, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))));
        if (sink[0] == 12345.0f) printf("%g\n", (double)sink[1]); /* keep the work */
    }
    return best / (double)n * 2.2e9;
}

int main(int argc, char **argv) {
    const int v = argc > 1 ? atoi(argv[1]) : 8;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        fprintf(stderr, "AMX tile data not granted by the OS\n");
        return 1;
    }
    uint32_t r = 0x2545f491u;
    for (int i = 0; i < 4 * 16 * 32; i++) { /* random bf16 in (-1, 1): the tiles' speed depends on the data */
        r = r * 1664525u + 1013904223u;
        (&operands[0][0][0])[i] = (uint16_t)((r >> 31) << 15 | (118u + (r >> 8) % 9u) << 7 | (r & 0x7fu));
    }
    _tile_loadconfig(tile_cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const long n = 2000000;
    const double t = run(1, 0, n), f = run(0, v, n), b = run(1, v, n);
    _tile_release();
    printf("cycles per iteration (2.2 GHz): tiles %.1f, %d FMAs %.1f, both %.1f (sum %.1f, max %.1f)\n", t, 8 * v, f, b,
           t + f, t > f ? t : f);
    return 0;
}
