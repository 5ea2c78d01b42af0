/*
 * test_attention.c - vx_attention() (every kernel-table variant this CPU
 * supports) against a direct double-precision attention over the same
 * cache contents: random Q/K/V, F32/F16/Q8_0 caches, GQA ratios 1/2/7,
 * head dims with and without SIMD tails, context lengths that are and are
 * not multiples of 16, query tiles (prefill), single tokens (decode) and
 * several sequences in one batch. Also the block kernels against their
 * references, and that any thread split gives bit-identical results.
 * The fused decode kernel (attn_dec_f16) gives the same bits as the block
 * kernels it stands for, and one-token decode the same bits as the old
 * per-chunk decode path and as the token's row in a batched prefill, over
 * long contexts, partial chunks, fragmented block tables and GQA groups
 * 1..8. The tile attentions (AMX natively and emulated, AVX-512 fp32) against the same
 * reference and bound: GQA groups 1/4/7/16, head dims 32/64/96/128,
 * partial and whole 64-position steps, prefixes, mixed batches, 1100
 * positions (lazy rescaling), and the cases it must leave to the block
 * kernels (Q8_0 cache, head dim 40).
 *
 * Tolerance: outputs are convex combinations of V rows in [-1, 1]; the
 * f32 arithmetic (and the AVX2 exp, relative error ~2e-7) stays within
 * 2e-5 absolute of the double reference over the same dequantized K/V.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "common.h"
#include "kv_cache.h"
#include "ops.h"
#include "quant.h"
#include "quant_ref.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return vx_test_frand(&rng); }

static const double TOL = 2e-5;
/* The tile attention splits Q, K, V and the softmax numerators into bf16
 * hi + lo (about 16 significant bits; K and V exactly) and sums three of
 * the four products in fp32: measured max 1.3e-5 and rms 1.5e-6 against
 * the double reference (plain bf16 operands: max 5.1e-3, rms 6.4e-4). The
 * block kernels' bound holds, and the rms one catches a lost product. */
static const double TOL_TILES = TOL, TOL_TILES_RMS = 3e-6;

/* A row of the cache as f32 (what the kernels see). */
static void row_f32(vx_kv_type t, const void *src, float *dst, int n) {
    switch (t) {
    case VX_KV_F32: memcpy(dst, src, (size_t)n * 4); break;
    case VX_KV_F16:
        for (int i = 0; i < n; i++) dst[i] = vx_fp16_to_fp32(((const uint16_t *)src)[i]);
        break;
    case VX_KV_Q8_0: vx_dequantize_row_q8_0(src, dst, n); break;
    }
}

static void row_store(vx_kv_type t, void *dst, const float *src, int n) {
    switch (t) {
    case VX_KV_F32: memcpy(dst, src, (size_t)n * 4); break;
    case VX_KV_F16:
        for (int i = 0; i < n; i++) ((uint16_t *)dst)[i] = vx_fp32_to_fp16(src[i]);
        break;
    case VX_KV_Q8_0: vx_quantize_row_q8_0(src, dst, n); break;
    }
}

typedef struct scase {
    int n_seq;          /* sequences in the batch */
    int len[2];         /* cached positions of each sequence after the batch */
    int nq[2];          /* query tokens of each (the last nq positions) */
} scase;

/* Three threads at once on units from a shared counter (vx_attn_args
 * next): each its own scratch. */
typedef struct dyn_thread {
    const vx_kernels *k;
    const vx_attn_args *a;
    int ith;
    float *scr;
} dyn_thread;

static void *dyn_run(void *p) {
    const dyn_thread *d = p;
    vx_attention(d->k, d->a, d->ith, 3, d->scr);
    return NULL;
}

/* tiles: 0, or 1 with the flag for the tile attention (attn_tiles_*)
 * set, whose bf16 operands get TOL_TILES, or 2 with the flag set for a
 * case it must not take (TOL) */
/* Gemma 2's score shaping for run_case (0: none): the reference caps
 * scale q.k at g_softcap tanh(. / g_softcap) and sees positions
 * pos - g_window < p <= pos */
static float g_softcap;

/* Segments for a's calls (vx_attn_args seg): seg positions each, with
 * buffers for splitting a decode over up to three threads (n_tiles < 3 of
 * n_head_kv groups each); seg 0: none. Returns the buffer (free it). */
static float *set_segments(vx_attn_args *a, int seg, int n_pos_max, atomic_int *done, int n_done) {
    a->seg = seg;
    a->seg_buf = NULL;
    a->seg_done = NULL;
    a->seg_groups = a->seg_max = 0;
    if (!seg) return NULL;
    const int g = a->n_head / a->n_head_kv, groups = 2 * a->n_head_kv;
    CHECK(groups <= n_done);
    a->seg_max = n_pos_max / seg + 2;
    a->seg_buf = malloc(vx_attn_seg_floats(a->seg_max, g, a->head_dim) * (size_t)groups * sizeof(float));
    for (int i = 0; i < n_done; i++) atomic_init(&done[i], 0);
    a->seg_done = done;
    a->seg_groups = groups;
    return a->seg_buf;
}
static int g_window;
/* gpt-oss's sinks: head h's logit 0.4 h - 0.5 (scaled units) joins every
 * row's softmax with no value */
static bool g_sinks;
static float sink_of(int h) { return 0.4f * (float)h - 0.5f; }

/* seg: segments of that many positions (vx_attn_args seg), decodes split
 * by them over the three threads where kv heads are fewer */
static void run_case_seg(const vx_kernels *kset, int nk, vx_kv_type type, int n_head_kv, int g, int hd,
                         const scase *sc, int tiles, int seg) {
    const int n_head = n_head_kv * g, KD = n_head_kv * hd, QD = n_head * hd;
    const int n_ctx = VX_MAX(256, VX_MAX(sc->len[0], sc->len[1]));
    vx_kv_params kp = {1, KD, 2, n_ctx, 2 * n_ctx, 16, type, 0, hd};
    vx_kv_cache *kv;
    CHECK(vx_kv_init(&kp, &kv) == VX_OK);
    float *tmp = malloc((size_t)KD * 4);
    for (int s = 0; s < sc->n_seq; s++) {
        CHECK(vx_kv_reserve(kv, s, sc->len[s]) == VX_OK);
        for (int p = 0; p < sc->len[s]; p++)
            for (int h = 0; h < n_head_kv; h++) {
                for (int i = 0; i < hd; i++) tmp[i] = frand();
                row_store(type, vx_kv_k_head(kv, 0, s, p, h), tmp, hd);
                for (int i = 0; i < hd; i++) tmp[i] = frand();
                row_store(type, vx_kv_v_head(kv, 0, s, p, h), tmp, hd);
            }
    }
    /* batch: sequences interleaved token by token, as a server batch would be */
    int n_tok = 0, pos[600], seq[600];
    for (int i = 0; i < 300; i++)
        for (int s = 0; s < sc->n_seq; s++)
            if (i < sc->nq[s]) {
                pos[n_tok] = sc->len[s] - sc->nq[s] + i;
                seq[n_tok++] = s;
            }
    float *q = malloc((size_t)n_tok * QD * 4), *out = malloc((size_t)n_tok * QD * 4);
    float *out1 = malloc((size_t)n_tok * QD * 4);
    for (int i = 0; i < n_tok * QD; i++) q[i] = 3 * frand();
    const float scale = 1.0f / sqrtf((float)hd);
    /* reference */
    double *ref = malloc((size_t)n_tok * QD * sizeof(double));
    float *kr = malloc((size_t)KD * 4), *vr = malloc((size_t)KD * 4);
    double *sco = malloc((size_t)n_ctx * sizeof(double));
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++) {
            const int kvh = h / g;
            double mx = g_sinks ? sink_of(h) : -INFINITY, sum = 0;
            const int p_lo = g_window ? VX_MAX(0, pos[t] - g_window + 1) : 0;
            for (int p = p_lo; p <= pos[t]; p++) {
                row_f32(type, vx_kv_k_head(kv, 0, seq[t], p, kvh), kr, hd);
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)q[t * QD + h * hd + i] * kr[i];
                sco[p] = d * scale;
                if (g_softcap) sco[p] = g_softcap * tanh(sco[p] / g_softcap);
                mx = sco[p] > mx ? sco[p] : mx;
            }
            double *o = ref + (size_t)t * QD + h * hd;
            if (g_sinks) sum = exp(sink_of(h) - mx);
            for (int i = 0; i < hd; i++) o[i] = 0;
            for (int p = p_lo; p <= pos[t]; p++) {
                const double w = exp(sco[p] - mx);
                sum += w;
                row_f32(type, vx_kv_v_head(kv, 0, seq[t], p, kvh), vr, hd);
                for (int i = 0; i < hd; i++) o[i] += w * vr[i];
            }
            for (int i = 0; i < hd; i++) o[i] /= sum;
        }
    const size_t nsf = vx_attn_scratch_floats(n_head, n_head_kv, hd);
    float *scr = aligned_alloc(64, (nsf * 4 + 63) / 64 * 64);
    float sinks[64];
    for (int h = 0; h < n_head && h < 64; h++) sinks[h] = sink_of(h);
    vx_attn_args a = {kv, 0, n_head, n_head_kv, hd, scale, q, out, pos, seq, n_tok, tiles != 0, NULL, g_softcap, g_window,
                      0, NULL, NULL, 0, 0, NULL, g_sinks ? sinks : NULL};
    atomic_int done[16];
    float *seg_buf = set_segments(&a, seg, n_ctx, done, 16);
    for (int ki = 0; ki < nk; ki++) {
        const vx_kernels *k = &kset[ki];
        /* whole batch on one thread, then split three ways */
        for (int i = 0; i < n_tok * QD; i++) out[i] = NAN;
        vx_attention(k, &a, 0, 1, scr);
        double worst = 0, sq = 0;
        for (int i = 0; i < n_tok * QD; i++) {
            const double e = fabs(out[i] - ref[i]);
            worst = e > worst || isnan(e) ? e : worst;
            sq += e * e;
        }
        const double rms = sqrt(sq / (n_tok * QD));
        CHECKF(worst <= (tiles == 1 ? TOL_TILES : TOL) && (tiles != 1 || rms <= TOL_TILES_RMS),
               "%s%s kv %d hkv %d g %d hd %d len %d/%d nq %d/%d seg %d: max error %g, rms %g", k->name,
               tiles ? " (tiles flag)" : "", (int)type, n_head_kv, g, hd, sc->len[0], sc->len[1], sc->nq[0], sc->nq[1],
               seg, worst, rms);
        if (tiles == 1 && getenv("VX_TEST_VERBOSE"))
            printf("%s tiles g %d hd %d len %d/%d nq %d/%d: max error %.2e rms %.2e\n", k->name, g, hd, sc->len[0],
                   sc->len[1], sc->nq[0], sc->nq[1], worst, rms);
        a.out = out1;
        for (int ith = 0; ith < 3; ith++) vx_attention(k, &a, ith, 3, scr);
        CHECKF(memcmp(out, out1, (size_t)n_tok * QD * 4) == 0, "%s: thread split changes results",
               k->name);
        /* units handed out from a counter: one thread taking them all,
         * then three threads racing for them */
        atomic_int next;
        atomic_init(&next, 0);
        a.next = &next;
        for (int i = 0; i < n_tok * QD; i++) out1[i] = NAN;
        vx_attention(k, &a, 0, 3, scr);
        CHECKF(memcmp(out, out1, (size_t)n_tok * QD * 4) == 0, "%s: units from a counter change results",
               k->name);
        atomic_store(&next, 0);
        for (int i = 0; i < n_tok * QD; i++) out1[i] = NAN;
        pthread_t th[3];
        dyn_thread d[3];
        bool started[3] = {false, false, false};
        for (int i = 0; i < 3; i++) {
            d[i] = (dyn_thread){k, &a, i, i ? aligned_alloc(64, (nsf * 4 + 63) / 64 * 64) : scr};
            started[i] = d[i].scr && pthread_create(&th[i], NULL, dyn_run, &d[i]) == 0;
            if (!started[i]) dyn_run(&d[i]); /* no thread: inline, the counter still decides */
        }
        for (int i = 0; i < 3; i++) {
            if (started[i]) pthread_join(th[i], NULL);
            if (i) free(d[i].scr);
        }
        CHECKF(memcmp(out, out1, (size_t)n_tok * QD * 4) == 0, "%s: three threads on a counter change results",
               k->name);
        a.next = NULL;
        a.out = out;
        for (int i = 0; i < a.seg_groups; i++)
            CHECKF(atomic_load(&done[i]) == 0, "%s: split counter %d left at %d", k->name, i, atomic_load(&done[i]));
    }
    free(seg_buf);
    free(scr);
    free(sco);
    free(kr);
    free(vr);
    free(ref);
    free(q);
    free(out);
    free(out1);
    free(tmp);
    vx_kv_free(kv);
}

/* Every case without segments, then with 32-position ones (the same
 * bounds; the threads' split of decodes by segments where kv heads are
 * fewer than three). */
static void run_case(const vx_kernels *kset, int nk, vx_kv_type type, int n_head_kv, int g, int hd,
                     const scase *sc, int tiles) {
    run_case_seg(kset, nk, type, n_head_kv, g, hd, sc, tiles, 0);
    if (!tiles) run_case_seg(kset, nk, type, n_head_kv, g, hd, sc, tiles, 32);
}

/* The block kernels against the reference ones, with odd shapes. */
/* softcap against tanh in double: x = out tanh(in x), over the range (0,
 * tiny, where the bend is, where tanh saturates, past exp's underflow,
 * both signs). Absolute error in the capped values' units over out: 2e-7
 * (the formula's 1 - e near 0), relative 4e-7 elsewhere. A value's bits
 * do not depend on n or on its place (the vector tail). */
static void test_softcap(const vx_kernels *k) {
    enum { N = 5 * 16 + 5 };
    float s[N], want[N], one[N];
    const float in = 0.0625f / 1.5f, out = 1.5f / 0.0625f; /* scale 1/16, cap 1.5 */
    const float fixed[] = {0.0f, -0.0f, 1e-30f, -1e-7f, 3e-4f, 1.0f, -7.5f, 24.0f, -36.0f, 60.0f, 200.0f,
                           -1500.0f, 3000.0f, -1e6f, 1e30f, -1e30f};
    for (int i = 0; i < N; i++) s[i] = i < 16 ? fixed[i] : 80 * frand();
    for (int i = 0; i < N; i++) want[i] = (float)(out * tanh((double)s[i] * in));
    for (int i = 0; i < N; i++) {
        one[i] = s[i];
        k->softcap(one + i, 1, in, out);
    }
    k->softcap(s, N, in, out);
    for (int i = 0; i < N; i++) {
        const double err = fabs((double)s[i] - want[i]);
        CHECKF(err <= 2e-7 * out + 4e-7 * fabs(want[i]) && (want[i] != 0 || s[i] == 0),
               "%s softcap value %d: %.9g, tanh gives %.9g", k->name, i, s[i], want[i]);
        CHECKF(memcmp(&s[i], &one[i], sizeof(float)) == 0, "%s softcap value %d: %.9g alone, %.9g in a row",
               k->name, i, one[i], s[i]);
    }
}

static void test_blocks(const vx_kernels *k, const vx_kernels *r) {
    enum { MX = 13, NX = 70, KX = 66 };
    float a[MX * KX], b[KX * NX], c0[MX * NX], c1[MX * NX], al[MX];
    for (int i = 0; i < MX * KX; i++) a[i] = frand();
    for (int i = 0; i < KX * NX; i++) b[i] = frand();
    for (int i = 0; i < MX; i++) al[i] = frand();
    const int ms[] = {1, 3, 4, 5, 8, 13}, ns[] = {1, 8, 15, 16, 24, 64, 70}, ks[] = {0, 1, 7, 16, 64, 66};
    for (size_t mi = 0; mi < 6; mi++)
        for (size_t ni = 0; ni < 7; ni++)
            for (size_t ki = 0; ki < 6; ki++)
                for (int useal = 0; useal < 2; useal++) {
                    const int m = ms[mi], n = ns[ni], kd = ks[ki];
                    for (int i = 0; i < MX * NX; i++) c0[i] = c1[i] = frand();
                    r->gemm_f32(m, n, kd, a, KX, b, NX, c0, NX, useal ? al : NULL);
                    k->gemm_f32(m, n, kd, a, KX, b, NX, c1, NX, useal ? al : NULL);
                    double worst = 0;
                    for (int i = 0; i < MX * NX; i++) worst = fmax(worst, fabs(c0[i] - c1[i]));
                    CHECKF(worst <= 1e-5, "%s gemm %dx%dx%d alpha %d: %g", k->name, m, n, kd, useal,
                           worst);
                }
    /* scores A B^T, f32 and fp16 rows of b */
    float bt[20 * KX];
    uint16_t bh[20 * KX];
    for (int i = 0; i < 20 * KX; i++) {
        bt[i] = frand();
        bh[i] = vx_fp32_to_fp16(bt[i]);
    }
    const int ns2[] = {1, 2, 7, 16, 20}, ks2[] = {8, 20, 64, 66};
    for (size_t mi = 0; mi < 6; mi++)
        for (size_t ni = 0; ni < 5; ni++)
            for (size_t ki = 0; ki < 4; ki++) {
                const int m = ms[mi], n = ns2[ni], kd = ks2[ki];
                for (int f16 = 0; f16 < 2; f16++) {
                    if (f16) {
                        r->gemm_abt_f16b(m, n, kd, a, KX, bh, KX, c0, NX);
                        k->gemm_abt_f16b(m, n, kd, a, KX, bh, KX, c1, NX);
                    } else {
                        r->gemm_abt_f32(m, n, kd, a, KX, bt, KX, c0, NX);
                        k->gemm_abt_f32(m, n, kd, a, KX, bt, KX, c1, NX);
                    }
                    double worst = 0;
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++) worst = fmax(worst, fabs(c0[i * NX + j] - c1[i * NX + j]));
                    CHECKF(worst <= 1e-5, "%s gemm_abt%s %dx%dx%d: %g", k->name, f16 ? "_f16b" : "", m, n,
                           kd, worst);
                }
            }
    /* P.V from fp16 rows */
    for (size_t mi = 0; mi < 6; mi++)
        for (size_t ni = 0; ni < 7; ni++)
            for (int useal = 0; useal < 2; useal++) {
                const int m = ms[mi], n = ns[ni] > 66 ? 66 : ns[ni], kd = 16;
                for (int i = 0; i < MX * NX; i++) c0[i] = c1[i] = frand();
                r->gemm_f16b(m, n, kd, a, KX, bh, KX, c0, NX, useal ? al : NULL);
                k->gemm_f16b(m, n, kd, a, KX, bh, KX, c1, NX, useal ? al : NULL);
                double worst = 0;
                for (int i = 0; i < MX * NX; i++) worst = fmax(worst, fabs(c0[i] - c1[i]));
                CHECKF(worst <= 1e-5, "%s gemm_f16b %dx%dx%d alpha %d: %g", k->name, m, n, kd, useal, worst);
            }
    /* q8_0 rows: exact */
    uint8_t qb[34 * 4];
    float qf0[128], qf1[128];
    for (int i = 0; i < 128; i++) qf0[i] = 5 * frand();
    vx_quantize_row_q8_0(qf0, qb, 128);
    r->q8_0_to_f32(qb, qf0, 128);
    k->q8_0_to_f32(qb, qf1, 128);
    CHECKF(memcmp(qf0, qf1, sizeof qf0) == 0, "%s q8_0_to_f32", k->name);
    /* softmax update: rows with every visible count, first and later chunks */
    enum { R = 18 };
    float s0[R * 16], s1[R * 16], m0[R], m1[R], l0[R], l1[R], cr0[R], cr1[R];
    int32_t nv[R];
    for (int i = 0; i < R; i++) {
        nv[i] = i % 17;
        m0[i] = m1[i] = i < 6 ? -INFINITY : 10 * frand();
        l0[i] = l1[i] = i < 6 ? 0 : 1 + frand();
    }
    for (int i = 0; i < R * 16; i++) s0[i] = s1[i] = 12 * frand();
    r->attn_softmax16(s0, R, nv, 0.7f, m0, l0, cr0);
    k->attn_softmax16(s1, R, nv, 0.7f, m1, l1, cr1);
    for (int i = 0; i < R; i++) {
        CHECKF(m0[i] == m1[i] || (isinf(m0[i]) && isinf(m1[i])), "%s softmax max row %d", k->name, i);
        CHECKF(fabsf(cr0[i] - cr1[i]) <= 1e-6f * cr0[i] + 1e-30f, "%s softmax corr row %d: %g vs %g",
               k->name, i, cr1[i], cr0[i]);
        CHECKF(fabsf(l0[i] - l1[i]) <= 1e-6f * l0[i], "%s softmax l row %d: %g vs %g", k->name, i, l1[i],
               l0[i]);
        for (int j = 0; j < 16; j++)
            CHECKF(fabsf(s0[i * 16 + j] - s1[i * 16 + j]) <= 1e-6f * s0[i * 16 + j] + 1e-30f,
                   "%s softmax p row %d col %d: %g vs %g", k->name, i, j, s1[i * 16 + j], s0[i * 16 + j]);
    }
}

/* Where a decode kernel check's K/V rows lie (ops.h: position 16 c + j
 * of head h at c cs + h hs + j ld): lay 0 position-major (each position's
 * row holds every head, L wide), lay 1 head-major as the cache's blocks,
 * with gaps between heads and between chunks. */
typedef struct dec_layout {
    int64_t ld, hs, cs;
} dec_layout;
static dec_layout dec_lay(int lay, int64_t L, int64_t hd, int64_t nh, int64_t gap) {
    if (lay == 0) return (dec_layout){L, hd, 16 * L};
    const int64_t hs = 16 * hd + gap;
    return (dec_layout){hd, hs, nh * hs + 3 * gap};
}

/* The fused decode kernel against the per-chunk composition of the same
 * table's blocks (gemm_abt_f16b, attn_softmax16 with all 16 visible,
 * gemm_f16b with alpha = corr): bit for bit. */
static void dec_compose(const vx_kernels *k, int64_t nh, int64_t g, int64_t hd, const float *q,
                        const uint16_t *kc, const uint16_t *vc, dec_layout y, int64_t n, float scale, float cap,
                        float *mx, float *l, float *o) {
    float s[8 * 16], corr[8];
    const int32_t nv[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    for (int64_t c0 = 0; c0 < n; c0 += 16)
        for (int64_t h = 0; h < nh; h++) {
            const int64_t r0 = h * g;
            const int64_t at = c0 / 16 * y.cs + h * y.hs;
            k->gemm_abt_f16b(g, 16, hd, q + r0 * hd, hd, kc + at, y.ld, s, 16);
            if (cap > 0) k->softcap(s, 16 * g, scale / cap, cap / scale);
            k->attn_softmax16(s, g, nv, scale, mx + r0, l + r0, corr);
            k->gemm_f16b(g, hd, 16, s, 16, vc + at, y.ld, o + r0 * hd, hd, corr);
        }
}

/* A decode kernel check's start: query rows with large scores (so the
 * running max moves from chunk to chunk) and nc copies of the state, fresh
 * (O = 0, m = -inf, l = 0) or continuing (random). */
enum { DEC_ROWS = 24 };
static void dec_start(int fresh, int rows, int hd, float *q, int nc, float (*mx)[DEC_ROWS], float (*l)[DEC_ROWS],
                      float **o) {
    for (int i = 0; i < rows * hd; i++) q[i] = 4 * frand();
    for (int i = 0; i < rows; i++) {
        const float m0 = fresh ? -INFINITY : 2 * frand(), l0 = fresh ? 0 : 1 + frand();
        for (int c = 0; c < nc; c++) {
            mx[c][i] = m0;
            l[c][i] = l0;
        }
    }
    for (int i = 0; i < rows * hd; i++) {
        const float o0 = fresh ? 0 : frand();
        for (int c = 0; c < nc; c++) o[c][i] = o0;
    }
}

static void test_dec_kernel(const vx_kernels *k, const vx_kernels *r) {
    enum { NH = 3, GM = 8, HM = 256, NP = 64 };
    const int64_t ld = NH * HM + 8; /* K/V rows wider than the heads read */
    uint16_t *kc = malloc((size_t)NP * ld * 2), *vc = malloc((size_t)NP * ld * 2);
    float *q = malloc((size_t)NH * GM * HM * 4), *o[3], mx[3][NH * GM], l[3][NH * GM];
    for (int i = 0; i < 3; i++) o[i] = malloc((size_t)NH * GM * HM * 4);
    for (int64_t i = 0; i < NP * ld; i++) {
        kc[i] = vx_fp32_to_fp16(frand());
        vc[i] = vx_fp32_to_fp16(frand());
    }
    const int hds[] = {64, 128, 40, 20, 96, 136, 256};
    for (int g = 1; g <= GM; g++)
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (int nh = 1; nh <= NH; nh += 2)
                for (int fc = 0; fc < 8; fc++) {
                    /* fresh or continuing state; with Gemma 2's soft cap
                     * (at 1.5: the capped scores' range is where tanh bends);
                     * position- or head-major rows (the buffer holds either) */
                    const int fresh = fc & 1, hd = hds[hi], n = fresh ? NP : 32, rows = nh * g;
                    const float cap = fc & 2 ? 1.5f : 0;
                    const dec_layout y = dec_lay(fc >> 2, ld, hd, NH, 8);
                    dec_start(fresh, rows, hd, q, 3, mx, l, o);
                    const float scale = 1.0f / sqrtf((float)hd);
                    dec_compose(k, nh, g, hd, q, kc, vc, y, n, scale, cap, mx[0], l[0], o[0]);
                    /* prefetch hints: the run's own first rows (any readable rows do) */
                    k->attn_dec_f16(nh, g, hd, q, kc, vc, y.ld, y.hs, y.cs, n, kc, vc, scale, cap, mx[1], l[1], o[1]);
                    r->attn_dec_f16(nh, g, hd, q, kc, vc, y.ld, y.hs, y.cs, n, NULL, NULL, scale, cap, mx[2], l[2],
                                    o[2]);
                    CHECKF(memcmp(o[0], o[1], (size_t)rows * hd * 4) == 0 &&
                               memcmp(l[0], l[1], (size_t)rows * 4) == 0 &&
                               memcmp(mx[0], mx[1], (size_t)rows * 4) == 0,
                           "%s attn_dec_f16 g %d hd %d nh %d n %d cap %g layout %d: not the blocks' bits", k->name, g,
                           hd, nh, n, cap, fc >> 2);
                    double worst = 0;
                    for (int i = 0; i < rows * hd; i++)
                        worst = fmax(worst, fabs(o[1][i] / l[1][i / hd] - o[2][i] / l[2][i / hd]));
                    CHECKF(worst <= 1e-5, "%s attn_dec_f16 g %d hd %d nh %d n %d cap %g layout %d vs reference: %g",
                           k->name, g, hd, nh, n, cap, fc >> 2, worst);
                }
    for (int i = 0; i < 3; i++) free(o[i]);
    free(q);
    free(kc);
    free(vc);
}

/* The fused Q8_0 decode kernel (tables that have one) against the
 * per-chunk composition of the same table's blocks (q8_0_to_f32 of the K
 * and V rows, gemm_abt_f32, attn_softmax16, gemm_f32): bit for bit; and
 * the reference composition against the generic blocks, bit for bit. */
static void dec_compose_q8_0(const vx_kernels *k, int64_t nh, int64_t g, int64_t hd, const float *q,
                             const uint8_t *kc, const uint8_t *vc, dec_layout y, int64_t n, float scale, float cap,
                             float *mx, float *l, float *o) {
    float s[8 * 16], corr[8], kr[16 * 128], vr[16 * 128];
    const int32_t nv[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    for (int64_t c0 = 0; c0 < n; c0 += 16)
        for (int64_t h = 0; h < nh; h++) {
            const int64_t r0 = h * g;
            for (int j = 0; j < 16; j++) {
                k->q8_0_to_f32(kc + c0 / 16 * y.cs + h * y.hs + j * y.ld, kr + j * hd, hd);
                k->q8_0_to_f32(vc + c0 / 16 * y.cs + h * y.hs + j * y.ld, vr + j * hd, hd);
            }
            k->gemm_abt_f32(g, 16, hd, q + r0 * hd, hd, kr, hd, s, 16);
            if (cap > 0) k->softcap(s, 16 * g, scale / cap, cap / scale);
            k->attn_softmax16(s, g, nv, scale, mx + r0, l + r0, corr);
            k->gemm_f32(g, hd, 16, s, 16, vr, hd, o + r0 * hd, hd, corr);
        }
}

static void test_dec_kernel_q8_0(const vx_kernels *k) {
    /* tables without the kernel: the reference, checked once (generic blocks) */
    if (!k->attn_dec_q8_0 && strcmp(k->name, "generic") != 0) return;
    enum { NH = 3, GM = 8, HM = 128, NP = 64 };
    const int64_t ld = NH * HM / 32 * 34 + 6; /* rows wider than the heads read */
    uint8_t *kc = malloc((size_t)NP * ld), *vc = malloc((size_t)NP * ld);
    float *q = malloc((size_t)NH * GM * HM * 4), *o[2], mx[2][NH * GM], l[2][NH * GM], row[NH * HM];
    for (int i = 0; i < 2; i++) o[i] = malloc((size_t)NH * GM * HM * 4);
    const vx_type_traits *tr = vx_type_get_traits(VX_TYPE_Q8_0);
    const int hds[] = {64, 128, 32, 96};
    for (int g = 1; g <= GM; g++)
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (int nh = 1; nh <= NH; nh += 2)
                for (int fc = 0; fc < 8; fc++) {
                    const int fresh = fc & 1, hd = hds[hi], n = fresh ? NP : 32, rows = nh * g;
                    const float cap = fc & 2 ? 1.5f : 0;
                    /* rows in bytes: position-major, or head-major with gaps */
                    const dec_layout y = dec_lay(fc >> 2, ld, hd / 32 * 34, NH, 6);
                    for (int c = 0; c < NP / 16; c++)
                        for (int h = 0; h < NH; h++)
                            for (int j = 0; j < 16; j++) {
                                const int64_t at = c * y.cs + h * y.hs + j * y.ld;
                                for (int i = 0; i < hd; i++) row[i] = 2 * frand();
                                tr->from_float(row, kc + at, hd);
                                for (int i = 0; i < hd; i++) row[i] = frand();
                                tr->from_float(row, vc + at, hd);
                            }
                    dec_start(fresh, rows, hd, q, 2, mx, l, o);
                    const float scale = 1.0f / sqrtf((float)hd);
                    if (k->attn_dec_q8_0) {
                        dec_compose_q8_0(k, nh, g, hd, q, kc, vc, y, n, scale, cap, mx[0], l[0], o[0]);
                        const int took = k->attn_dec_q8_0(nh, g, hd, q, kc, vc, y.ld, y.hs, y.cs, n, kc, vc, scale,
                                                          cap, mx[1], l[1], o[1]);
                        CHECKF(took == ((hd == 64 || hd == 128) && g <= 8),
                               "%s attn_dec_q8_0 g %d hd %d: took %d", k->name, g, hd, took);
                        if (!took) continue;
                    } else {
                        dec_compose_q8_0(k, nh, g, hd, q, kc, vc, y, n, scale, cap, mx[0], l[0], o[0]);
                        CHECK(vx_attn_dec_q8_0_ref(nh, g, hd, q, kc, vc, y.ld, y.hs, y.cs, n, NULL, NULL, scale, cap,
                                                   mx[1], l[1], o[1]) == 1);
                    }
                    CHECKF(memcmp(o[0], o[1], (size_t)rows * hd * 4) == 0 &&
                               memcmp(l[0], l[1], (size_t)rows * 4) == 0 &&
                               memcmp(mx[0], mx[1], (size_t)rows * 4) == 0,
                           "%s attn_dec_q8_0 g %d hd %d nh %d n %d cap %g layout %d: not the blocks' bits", k->name, g,
                           hd, nh, n, cap, fc >> 2);
                }
    for (int i = 0; i < 2; i++) free(o[i]);
    free(q);
    free(kc);
    free(vc);
}

/* Decode (one token) over an F16 cache: bit for bit the old per-chunk path
 * (the block kernels on each 16-position chunk, a partial last one
 * included) and the token's row of a batched prefill of the last positions.
 * frag 1: the sequence's blocks alternate with another sequence's, so runs
 * of contiguous blocks are one block long; frag 2: its blocks are in
 * descending order (the cache hands out ascending runs, kv_order_case, but
 * the kernels must not depend on it). */
static void decode_bits_case(const vx_kernels *k, int n_head_kv, int g, int hd, int n_pos, int frag) {
    const int n_head = n_head_kv * g, KD = n_head_kv * hd, QD = n_head * hd;
    const int n_blk = (n_pos + 15) / 16;
    vx_kv_params kp = {1, KD, frag == 2 ? n_blk + 1 : 2, 4224, frag == 2 ? n_blk * 16 : 8448, 16,
                       VX_KV_F16, 0, hd};
    vx_kv_cache *kv;
    CHECK(vx_kv_init(&kp, &kv) == VX_OK);
    for (int p = 16; frag == 1 && p < n_pos; p += 16) {
        CHECK(vx_kv_reserve(kv, 0, p) == VX_OK);
        CHECK(vx_kv_reserve(kv, 1, p) == VX_OK);
    }
    if (frag == 2) { /* one block to each of sequences 1.., released in that order */
        for (int b = 0; b < n_blk; b++) CHECK(vx_kv_reserve(kv, 1 + b, 16) == VX_OK);
        for (int b = 0; b < n_blk; b++) vx_kv_truncate(kv, 1 + b, 0);
    }
    for (int p = 16; frag == 2 && p < n_pos; p += 16) CHECK(vx_kv_reserve(kv, 0, p) == VX_OK);
    CHECK(vx_kv_reserve(kv, 0, n_pos) == VX_OK);
    if (frag == 2 && n_blk > 1) CHECK(vx_kv_blocks(kv, 0)[0] > vx_kv_blocks(kv, 0)[1]);
    for (int p = 0; p < n_pos; p++)
        for (int h = 0; h < n_head_kv; h++) {
            uint16_t *kr = vx_kv_k_head(kv, 0, 0, p, h), *vr = vx_kv_v_head(kv, 0, 0, p, h);
            for (int i = 0; i < hd; i++) {
                kr[i] = vx_fp32_to_fp16(frand());
                vr[i] = vx_fp32_to_fp16(frand());
            }
        }
    enum { NB = 20 }; /* batched prefill of the last NB positions */
    const int nb = n_pos < NB ? n_pos : NB;
    float *q = malloc((size_t)nb * QD * 4), *out = malloc((size_t)QD * 4);
    float *outb = malloc((size_t)nb * QD * 4), *ref = malloc((size_t)QD * 4);
    for (int i = 0; i < nb * QD; i++) q[i] = 3 * frand();
    const float *qd = q + (size_t)(nb - 1) * QD; /* the decoded token's query */
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t nsf = vx_attn_scratch_floats(n_head, n_head_kv, hd);
    float *scr = aligned_alloc(64, (nsf * 4 + 63) / 64 * 64);
    int32_t pos[NB], seq[NB] = {0};
    for (int i = 0; i < nb; i++) pos[i] = n_pos - nb + i;
    /* decode */
    vx_attn_args a = {kv, 0, n_head, n_head_kv, hd, scale, qd, out, &pos[nb - 1], seq, 1, false, NULL, 0, 0,
                      0, NULL, NULL, 0, 0, NULL, NULL};
    vx_attention(k, &a, 0, 1, scr);
    /* the old path: per chunk, the blocks on fp16 rows read in place */
    const int64_t ld = (int64_t)(vx_kv_head_bytes(kv) / 2);
    float m[8], l[8], corr[8], s[8 * 16], o[8 * 256];
    int32_t nv[8];
    for (int h = 0; h < n_head_kv; h++) {
        for (int i = 0; i < g; i++) {
            m[i] = -INFINITY;
            l[i] = 0;
        }
        memset(o, 0, (size_t)g * hd * 4);
        for (int c0 = 0; c0 < n_pos; c0 += 16) {
            const int nj = n_pos - c0 < 16 ? n_pos - c0 : 16;
            const uint16_t *kr = vx_kv_k_head(kv, 0, 0, c0, h), *vr = vx_kv_v_head(kv, 0, 0, c0, h);
            for (int i = 0; i < g; i++) nv[i] = nj;
            k->gemm_abt_f16b(g, nj, hd, qd + h * g * hd, hd, kr, ld, s, 16);
            k->attn_softmax16(s, g, nv, scale, m, l, corr);
            k->gemm_f16b(g, hd, nj, s, 16, vr, ld, o, hd, corr);
        }
        for (int i = 0; i < g; i++) {
            const float inv = 1.0f / l[i];
            for (int d = 0; d < hd; d++) ref[(h * g + i) * hd + d] = o[i * hd + d] * inv;
        }
    }
    CHECKF(memcmp(out, ref, (size_t)QD * 4) == 0,
           "%s decode g %d hd %d n_pos %d frag %d: not the per-chunk bits", k->name, g, hd, n_pos, frag);
    /* batched: the last token's row */
    vx_attn_args b = {kv, 0, n_head, n_head_kv, hd, scale, q, outb, pos, seq, nb, false, NULL, 0, 0,
                      0, NULL, NULL, 0, 0, NULL, NULL};
    vx_attention(k, &b, 0, 1, scr);
    CHECKF(memcmp(out, outb + (size_t)(nb - 1) * QD, (size_t)QD * 4) == 0,
           "%s decode g %d hd %d n_pos %d frag %d: batched and decode differ", k->name, g, hd, n_pos,
           frag);
    /* and split over threads */
    for (int i = 0; i < QD; i++) outb[i] = NAN;
    a.out = outb;
    for (int ith = 0; ith < 3; ith++) vx_attention(k, &a, ith, 3, scr);
    CHECKF(memcmp(out, outb, (size_t)QD * 4) == 0, "%s decode g %d hd %d n_pos %d: thread split differs",
           k->name, g, hd, n_pos);
    /* with segments of 64 positions: the decode within rounding of the
     * above, and bit for bit the batched row's and that of the decode
     * split over three threads by segments (kv heads fewer than three) */
    atomic_int done[16];
    float *seg_buf = set_segments(&a, 64, n_pos, done, 16);
    b.seg = a.seg, b.seg_buf = a.seg_buf, b.seg_done = a.seg_done, b.seg_groups = a.seg_groups, b.seg_max = a.seg_max;
    float *outs = malloc((size_t)QD * 4);
    a.out = outs;
    vx_attention(k, &a, 0, 1, scr);
    double worst = 0;
    for (int i = 0; i < QD; i++) worst = fmax(worst, fabs((double)outs[i] - out[i]));
    CHECKF(worst <= 1e-5, "%s decode g %d hd %d n_pos %d: segments move the result by %g", k->name, g, hd, n_pos,
           worst);
    vx_attention(k, &b, 0, 1, scr);
    CHECKF(memcmp(outs, outb + (size_t)(nb - 1) * QD, (size_t)QD * 4) == 0,
           "%s decode g %d hd %d n_pos %d: batched and decode differ with segments", k->name, g, hd, n_pos);
    for (int i = 0; i < QD; i++) outb[i] = NAN;
    a.out = outb;
    for (int ith = 0; ith < 3; ith++) vx_attention(k, &a, ith, 3, scr);
    CHECKF(memcmp(outs, outb, (size_t)QD * 4) == 0, "%s decode hkv %d g %d hd %d n_pos %d: split by segments differs",
           k->name, n_head_kv, g, hd, n_pos);
    free(outs);
    free(seg_buf);
    free(scr);
    free(q);
    free(out);
    free(outb);
    free(ref);
    vx_kv_free(kv);
}

static void test_decode_bits(const vx_kernels *k) {
    const int gs[] = {1, 2, 4, 7, 8}, pos[] = {1, 15, 16, 17, 100, 128, 1000, 4101};
    for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
        for (int hd = 64; hd <= 128; hd += 64)
            for (size_t pi = 0; pi < sizeof pos / sizeof pos[0]; pi++) {
                if (pos[pi] > 1000 && gs[gi] != 4 && gs[gi] != 7) continue; /* long contexts: Llama, Qwen */
                decode_bits_case(k, 2, gs[gi], hd, pos[pi], 0);
            }
    decode_bits_case(k, 2, 4, 64, 333, 1);
    decode_bits_case(k, 3, 7, 128, 200, 1);
    /* one kv head (Gemma 1, MQA): split by segments over the threads */
    decode_bits_case(k, 1, 8, 128, 1000, 0);
    decode_bits_case(k, 1, 8, 64, 4101, 1);
    decode_bits_case(k, 1, 8, 256, 70, 0);
    decode_bits_case(k, 2, 4, 64, 333, 2);
    decode_bits_case(k, 2, 8, 128, 1000, 2);
    decode_bits_case(k, 8, 4, 64, 4096, 0);
}

/* The cache hands out blocks in ascending runs even when they come back
 * from the LRU list (where a released sequence's blocks sit last first),
 * while evicting in LRU order: a released sequence's leading blocks stay
 * cached. */
static void kv_order_case(void) {
    vx_kv_params kp = {1, 64, 3, 64 * 16, 64 * 16, 16, VX_KV_F16, 0, 64};
    vx_kv_cache *kv;
    CHECK(vx_kv_init(&kp, &kv) == VX_OK);
    enum { N = 64 * 16 };
    vx_token toks[N];
    for (int p = 0; p < N; p++) toks[p] = (p * 7919) % 30011 + 1;
    CHECK(vx_kv_reserve(kv, 1, N) == VX_OK);
    for (int p = 0; p < N; p++) vx_kv_set_token(kv, 1, p, toks[p]);
    vx_kv_set_len(kv, 1, N);
    vx_kv_truncate(kv, 1, 0);
    CHECK(vx_kv_cached_blocks(kv) == 64);
    CHECK(vx_kv_reserve(kv, 0, 20 * 16) == VX_OK); /* one reserve of 20 blocks */
    for (int p = 21 * 16; p <= 30 * 16; p += 16) CHECK(vx_kv_reserve(kv, 0, p) == VX_OK); /* decode */
    const int32_t *bl = vx_kv_blocks(kv, 0);
    int desc = 0;
    for (int i = 0; i + 1 < 30; i++) desc += bl[i + 1] < bl[i];
    /* two evicted batches, each handed out ascending: one step back at most
     * (the LRU order alone gives 29) */
    CHECKF(desc <= 1, "%d descending steps in a block table built from the LRU list", desc);
    /* 30 blocks evicted in batches of 16: seq 1's first 32 are still cached */
    CHECKF(vx_kv_attach_prefix(kv, 2, toks, N) == 32 * 16, "cached prefix %d positions",
           vx_kv_len(kv, 2));
    vx_kv_free(kv);
}

int main(void) {
    kv_order_case();
    vx_kernels ks[4];
    vx_kernels_init(&ks[0], VX_ISA_GENERIC);
    const vx_isa best = vx_cpu_best_isa();
    int nk = 1;
    if (best >= VX_ISA_AVX2) vx_kernels_init(&ks[nk++], VX_ISA_AVX2);
    /* the AVX-512 tier's decode kernels (F16 and Q8_0 caches, g <= 8, hd
     * 64 / 128; avx512_attn.c), natively and emulated: the same bits */
    if (best >= VX_ISA_AVX512) vx_kernels_init(&ks[nk++], VX_ISA_AVX512);
    if (best >= VX_ISA_AVX2 && !vx_test_skip_emulated(best >= VX_ISA_AVX512, "avx512-emu"))
        vx_kernels_init_emulated(&ks[nk++]);
    for (int i = 0; i < nk; i++) {
        test_blocks(&ks[i], &ks[0]);
        test_softcap(&ks[i]);
        test_dec_kernel(&ks[i], &ks[0]);
        test_dec_kernel_q8_0(&ks[i]);
        test_decode_bits(&ks[i]);
    }

    const scase cases[] = {
        {1, {1, 0}, {1, 0}},       /* first token */
        {1, {17, 0}, {1, 0}},      /* decode, one position into the second block */
        {1, {100, 0}, {1, 0}},     /* decode, partial last block */
        {1, {128, 0}, {1, 0}},     /* decode, full blocks */
        {1, {33, 0}, {33, 0}},     /* prefill from empty */
        {1, {150, 0}, {70, 0}},    /* prefill chunk after a prefix, several tiles */
        {2, {45, 90}, {1, 1}},     /* two sequences decoding */
        {2, {40, 77}, {13, 1}},    /* prefill of one sequence next to a decode */
    };
    const vx_kv_type types[] = {VX_KV_F32, VX_KV_F16, VX_KV_Q8_0};
    const int gs[] = {1, 2, 7};
    const int hds[] = {64, 40, 20, 128};
    for (int ti = 0; ti < 3; ti++)
        for (int gi = 0; gi < 3; gi++)
            for (int hi = 0; hi < 4; hi++) {
                const int hd = hds[hi];
                if (types[ti] == VX_KV_Q8_0 && hd % 32 != 0) continue;
                for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
                    run_case(ks, nk, types[ti], 2, gs[gi], hd, &cases[ci], 0);
            }
    /* one kv head (MQA): a prefill, and decodes (split by segments) */
    run_case(ks, nk, VX_KV_F16, 1, 7, 64, &cases[5], 0);
    for (int ti = 0; ti < 3; ti++) run_case(ks, nk, types[ti], 1, 8, 64, &cases[2], 0);
    /* Gemma 2: soft-capped scores and a sliding window, through the
     * per-chunk path (the fused decode kernels step aside), for decodes,
     * prefills after a prefix and mixed batches; then each alone */
    g_softcap = 0.5f, g_window = 20;
    for (int ti = 0; ti < 3; ti++) {
        static const int cis[] = {1, 2, 5, 6, 7};
        for (int i = 0; i < 5; i++) run_case(ks, nk, types[ti], 2, 2, 64, &cases[cis[i]], 0);
    }
    g_window = 0;
    run_case(ks, nk, VX_KV_F16, 2, 4, 128, &cases[2], 0);
    g_softcap = 0, g_window = 16;
    run_case(ks, nk, VX_KV_F16, 1, 7, 64, &cases[5], 0);
    g_softcap = 0.5f, g_window = 40;
    run_case(ks, nk, VX_KV_F16, 1, 4, 64, &cases[2], 0);
    g_window = 0, g_softcap = 0;
    /* gpt-oss: sinks in every softmax (the fused decode kernels, the
     * per-chunk path, split decodes folded by segments), alone and with a
     * window */
    g_sinks = true;
    for (int ti = 0; ti < 3; ti++) {
        static const int cis[] = {1, 2, 5, 6, 7};
        for (int i = 0; i < 5; i++) run_case(ks, nk, types[ti], 2, 2, 64, &cases[cis[i]], 0);
    }
    run_case(ks, nk, VX_KV_F16, 2, 8, 64, &cases[2], 0);
    g_window = 16;
    run_case(ks, nk, VX_KV_F16, 2, 4, 64, &cases[2], 0);
    run_case(ks, nk, VX_KV_F16, 1, 7, 64, &cases[5], 0);
    g_sinks = false, g_window = 0;

    /* The tile attention (AMX natively and emulated, AVX-512 fp32
     * natively): tiles of 16+ rows over F16 caches, the other units on the
     * block kernels. */
    vx_kernels kt[3];
    int nt = 0;
    if (best >= VX_ISA_AMX) vx_kernels_init(&kt[nt++], VX_ISA_AMX);
    if (best >= VX_ISA_AVX512) vx_kernels_init(&kt[nt++], VX_ISA_AVX512);
    const int n_native = nt;
    if (best >= VX_ISA_AVX2 && !vx_test_skip_emulated(best >= VX_ISA_AMX, "amx-emu"))
        vx_kernels_init_emulated_amx(&kt[nt++]);
    if (nt == 0) return vx_test_finish("test_attention");
    const scase tcases[] = {
        {1, {33, 0}, {33, 0}},     /* prefill from empty: one partial step */
        {1, {64, 0}, {64, 0}},     /* exactly one step */
        {1, {300, 0}, {100, 0}},   /* after a prefix: full steps, the diagonal, a partial step */
        {1, {200, 0}, {1, 0}},     /* decode (block kernels), for the mix */
        {2, {130, 90}, {40, 1}},   /* prefill next to a decode */
        {2, {97, 211}, {97, 120}}, /* two prefills, tiles of both */
    };
    const int tgs[] = {1, 4, 7, 16};
    const int thds[] = {64, 128, 96, 32};
    /* every group x head dim natively (under the sanitizers, and for the
     * emulated tiles, whose scalar tile products are slow: the diagonal of
     * that grid, which still takes every group and every head dim) */
    const bool grid = n_native > 0 && !vx_test_sanitized();
    for (size_t ci = 0; ci < sizeof tcases / sizeof tcases[0]; ci++)
        for (int gi = 0; gi < 4; gi++)
            for (int hi = 0; hi < 4; hi++) {
                if (gi == hi) run_case(kt, nt, VX_KV_F16, 2, tgs[gi], thds[hi], &tcases[ci], 1);
                else if (grid) run_case(kt, n_native, VX_KV_F16, 2, tgs[gi], thds[hi], &tcases[ci], 1);
            }
    /* a long context: steps where the running maximum moves (lazy
     * rescaling) after many where it does not */
    const scase longc = {1, {1100, 0}, {40, 0}};
    run_case(kt, nt, VX_KV_F16, 2, 4, 64, &longc, 1);
    /* the flag is ignored over F32 / Q8_0 caches and for head dims the
     * tiles do not take: the block kernels' bound holds */
    run_case(kt, nt, VX_KV_Q8_0, 2, 4, 64, &tcases[2], 2);
    run_case(kt, nt, VX_KV_F16, 2, 4, 40, &tcases[2], 2);
    /* Gemma 2 on the tiles: soft caps and windows shorter than a step,
     * across steps, and past a long context (skipped steps) */
    g_softcap = 0.5f, g_window = 20;
    run_case(kt, nt, VX_KV_F16, 2, 4, 64, &tcases[2], 1);
    run_case(kt, nt, VX_KV_F16, 2, 1, 128, &tcases[5], 1);
    g_window = 200;
    run_case(kt, nt, VX_KV_F16, 2, 4, 64, &longc, 1);
    g_softcap = 0;
    run_case(kt, nt, VX_KV_F16, 2, 7, 96, &tcases[4], 1);
    g_softcap = 30.0f, g_window = 0;
    run_case(kt, nt, VX_KV_F16, 2, 4, 256, &tcases[0], 1);
    g_softcap = 0, g_window = 0;
    return vx_test_finish("test_attention");
}
