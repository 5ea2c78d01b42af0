/*
 * gemv32_r8.h - the GEMV driver of the packed 8-row 32-element block types
 * (quant.h) x Q8_0 (or Q8_1) activations, shared by the
 * AVX2 kernels (avx2_gemm.c) and the AVX-512 ones (avx512_gemm.c, natively
 * and emulated: it uses only AVX2 intrinsics, which both provide).
 *
 * One 8-row group at a time, its records read front to back (one
 * sequential stream, with a software prefetch ahead: without it DRAM
 * streams stall, avx2_quant_util.h); the 8 rows' sums build up in the
 * lanes of one register, even and odd blocks in two chains of the
 * canonical step, added at the end. The activation blocks' scales and
 * offset corrections are tabulated once per call.
 *
 * A template: the including file defines, after avx2_quant_util.h, the
 * per-ISA parts as macros of the record kind k (its own enum), then
 * includes this file, which defines gemv32_r8(k, n, w, stride, nrows, y,
 * out) (vx_gemv_fn with the kind first):
 *   GEMV32_R8_REC(k)         bytes of a record (8 rows x one block)
 *   GEMV32_R8_YSIZE(k)       bytes of an activation block (optional:
 *                            Q8_0's; every block starts with its fp16 d)
 *   GEMV32_R8_CORR(k, yb)    the int32 offset correction of activation
 *                            block yb, as the step takes it
 *   GEMV32_R8_STEP(k, rec, yb, dy, c, acc)
 *                            the chain acc (__m256) after record rec
 *                            against block yb (scale dy, correction c)
 * The entry points calling gemv32_r8 need -Wmaybe-uninitialized off: the
 * tables are read only when filled, which GCC cannot always tell.
 */
#ifndef VX_GEMV32_R8_H
#define VX_GEMV32_R8_H

#ifndef GEMV32_R8_YSIZE
#define GEMV32_R8_YSIZE(k) sizeof(vx_block_q8_0)
#endif

/* Bytes the software prefetch runs ahead of the record stream. */
#ifndef PF32_R8
#define PF32_R8 2048
#endif
/* Activation blocks whose scale and correction are tabulated per call
 * (rows up to 32768 elements; longer rows compute them per block). */
#define CT32 1024

/* Groups of 8 rows that go together (GEMV32_R8_STREAMS of them, a
 * G-th of the call's groups apart, as the plain gemv's rows): G long
 * record streams, which pull more from DRAM than one, two records of each
 * in turn. Each group's sums are the same whichever groups go with it.
 * The default, 2, is the AVX2 tier's (Zen 3, 16 ymm registers): decode
 * t/s on 2 threads, medians of 4 interleaved runs, G = 4 / 2 / 8:
 * Llama-1B Q8_0 26.6 / 31.1 / 21.7 (one group: 27.4); Qwen2.5-0.5B Q8_0
 * 65.2 / 75.7; its Q4_K_M (mostly Q5_0) 89.6 / 95.9. Four and more groups
 * spill the step's registers there; one record per turn instead of two
 * was slower still. The AVX-512 tier sets 4 (avx512_gemm.c). */
#ifndef GEMV32_R8_STREAMS
#define GEMV32_R8_STREAMS 2
#endif

AINLINE void gemv32_r8_groups(int k, int G, int64_t nb, const uint8_t *const *g, const uint8_t *y,
                              const float *dyt, const int32_t *ct, int tab, float *const *out) {
    const size_t rs = GEMV32_R8_REC(k), ys = GEMV32_R8_YSIZE(k);
#define DY(b) (tab ? dyt[b] : f16(ld16(y + (size_t)(b) * ys)))
#define CT(b) (tab ? ct[b] : GEMV32_R8_CORR(k, y + (size_t)(b) * ys))
    __m256 ae[GEMV32_R8_STREAMS], ao[GEMV32_R8_STREAMS];
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) ae[s] = ao[s] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const float d0 = DY(i), d1 = DY(i + 1);
        const int32_t c0 = CT(i), c1 = CT(i + 1);
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) {
            const uint8_t *rec = g[s] + (size_t)i * rs;
            prefetch_ahead(rec, PF32_R8, 2 * rs);
            ae[s] = GEMV32_R8_STEP(k, rec, y + (size_t)i * ys, d0, c0, ae[s]);
            ao[s] = GEMV32_R8_STEP(k, rec + rs, y + (size_t)(i + 1) * ys, d1, c1, ao[s]);
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < G; s++) {
        if (i < nb) ae[s] = GEMV32_R8_STEP(k, g[s] + (size_t)i * rs, y + (size_t)i * ys, DY(i), CT(i), ae[s]);
        _mm256_storeu_ps(out[s], _mm256_add_ps(ae[s], ao[s]));
    }
#undef DY
#undef CT
}

AINLINE void gemv32_r8(int k, int64_t n, const void *w, size_t stride, int nrows, const void *vy, float *out) {
    const int64_t nb = n / 32;
    const size_t ys = GEMV32_R8_YSIZE(k);
    const uint8_t *y = vy;
    float dyt[CT32];
    int32_t ct[CT32];
    const int tab = nb <= CT32;
    for (int64_t b = 0; tab && b < nb; b++) {
        dyt[b] = f16(ld16(y + (size_t)b * ys));
        ct[b] = GEMV32_R8_CORR(k, y + (size_t)b * ys);
    }
    const uint8_t *g[GEMV32_R8_STREAMS];
    float *o[GEMV32_R8_STREAMS];
#define GEMV32_R8_RUN(n) gemv32_r8_groups(k, n, nb, g, y, dyt, ct, tab, o)
    GEMV_FAR_GROUPS(w, stride, nrows, out, GEMV32_R8_STREAMS, g, o, GEMV32_R8_RUN);
#undef GEMV32_R8_RUN
}

#endif
