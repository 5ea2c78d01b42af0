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

/* Tokens a gemv32_r8_tokens call takes at most (batched decoding of two
 * sequences, a speculative draft's pair). */
#define GEMV32_R8_NT 2

/* One turn of G groups against nt tokens' activation rows y[u] (their
 * scales and corrections tabulated in dyt[u], ct[u] when tab); group s's
 * results for token u go to out[s] + u ldo (added to what is there with
 * accumulate). A record's loads and codes serve all the tokens (the
 * compiler shares them between the steps, which read the same bytes). */
AINLINE void gemv32_r8_groups(int k, int G, int nt, int64_t nb, const uint8_t *const *g, const uint8_t *const *y,
                              float (*dyt)[CT32], int32_t (*ct)[CT32], int tab, float *const *out, int64_t ldo,
                              int accumulate) {
    const size_t rs = GEMV32_R8_REC(k), ys = GEMV32_R8_YSIZE(k);
#define DY(u, b) (tab ? dyt[u][b] : f16(ld16(y[u] + (size_t)(b) * ys)))
#define CT(u, b) (tab ? ct[u][b] : GEMV32_R8_CORR(k, y[u] + (size_t)(b) * ys))
    __m256 ae[GEMV32_R8_STREAMS][GEMV32_R8_NT], ao[GEMV32_R8_STREAMS][GEMV32_R8_NT];
#pragma GCC unroll 8
    for (int s = 0; s < G; s++)
        for (int u = 0; u < nt; u++) ae[s][u] = ao[s][u] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        float d0[GEMV32_R8_NT], d1[GEMV32_R8_NT];
        int32_t c0[GEMV32_R8_NT], c1[GEMV32_R8_NT];
        for (int u = 0; u < nt; u++) d0[u] = DY(u, i), d1[u] = DY(u, i + 1), c0[u] = CT(u, i), c1[u] = CT(u, i + 1);
#pragma GCC unroll 8
        for (int s = 0; s < G; s++) {
            const uint8_t *rec = g[s] + (size_t)i * rs;
            prefetch_ahead(rec, PF32_R8, 2 * rs);
            for (int u = 0; u < nt; u++) {
                ae[s][u] = GEMV32_R8_STEP(k, rec, y[u] + (size_t)i * ys, d0[u], c0[u], ae[s][u]);
                ao[s][u] = GEMV32_R8_STEP(k, rec + rs, y[u] + (size_t)(i + 1) * ys, d1[u], c1[u], ao[s][u]);
            }
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < G; s++)
        for (int u = 0; u < nt; u++) {
            if (i < nb)
                ae[s][u] = GEMV32_R8_STEP(k, g[s] + (size_t)i * rs, y[u] + (size_t)i * ys, DY(u, i), CT(u, i), ae[s][u]);
            const __m256 r = _mm256_add_ps(ae[s][u], ao[s][u]);
            float *o = out[s] + u * ldo;
            _mm256_storeu_ps(o, accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), r) : r);
        }
#undef DY
#undef CT
}

/* nt tokens (1 .. GEMV32_R8_NT; rows of act, act_stride bytes apart)
 * against nrows rows, G (1 .. GEMV32_R8_STREAMS) far groups per turn:
 * token u's results at out + u ldo. Per token the gemv's integer sums and
 * float steps: its bits, whatever G. */
AINLINE void gemv32_r8_tokens(int k, int G, int nt, int64_t n, const void *w, size_t stride, int nrows, const void *act,
                              size_t act_stride, float *out, int64_t ldo, int accumulate) {
    const int64_t nb = n / 32;
    const size_t ys = GEMV32_R8_YSIZE(k);
    const uint8_t *y[GEMV32_R8_NT];
    float dyt[GEMV32_R8_NT][CT32];
    int32_t ct[GEMV32_R8_NT][CT32];
    const int tab = nb <= CT32;
    for (int u = 0; u < nt; u++) {
        y[u] = (const uint8_t *)act + (size_t)u * act_stride;
        for (int64_t b = 0; tab && b < nb; b++) {
            dyt[u][b] = f16(ld16(y[u] + (size_t)b * ys));
            ct[u][b] = GEMV32_R8_CORR(k, y[u] + (size_t)b * ys);
        }
    }
    const uint8_t *g[GEMV32_R8_STREAMS];
    float *o[GEMV32_R8_STREAMS];
#define GEMV32_R8_RUN(n) gemv32_r8_groups(k, n, nt, nb, g, y, dyt, ct, tab, o, ldo, accumulate)
    GEMV_FAR_GROUPS(w, stride, nrows, out, G, g, o, GEMV32_R8_RUN);
#undef GEMV32_R8_RUN
}

AINLINE void gemv32_r8(int k, int64_t n, const void *w, size_t stride, int nrows, const void *vy, float *out) {
    gemv32_r8_tokens(k, GEMV32_R8_STREAMS, 1, n, w, stride, nrows, vy, 0, out, 0, 0);
}

/* The same with two far groups per turn (a tier whose default is more,
 * for the CPUs that read two faster: cpu.c). */
AINLINE void gemv32_r8_two(int k, int64_t n, const void *w, size_t stride, int nrows, const void *vy, float *out) {
    gemv32_r8_tokens(k, 2, 1, n, w, stride, nrows, vy, 0, out, 0, 0);
}

#endif
