/* test_sampling.c - tests of the sampler (src/sampling.c): greedy, seeding,
 * the empirical distribution, each filter, penalties, bias, temperature,
 * reset and the reported log-probabilities. */
#include "testutil.h"
#include "vortex.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic test data (independent of the sampler's own PRNG). */
static uint64_t test_rng_state = 0x12345678abcdefull;
static double test_uniform(void) {
    uint64_t z = (test_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static void random_logits(float *l, int32_t n, float scale) {
    for (int32_t i = 0; i < n; i++) l[i] = (float)((test_uniform() * 2.0 - 1.0) * scale);
}

/* Temperature 1, no filters, no penalties, fixed seed. */
static vx_sampler_params plain_params(void) {
    vx_sampler_params p = vx_sampler_default_params();
    p.seed = 1234;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

static vx_sampler *make(const vx_sampler_params *p, int32_t n_vocab) {
    vx_sampler *s = NULL;
    vx_status st = vx_sampler_init(p, n_vocab, &s);
    CHECKF(st == VX_OK && s != NULL, "init failed: %s", vx_status_str(st));
    return s;
}

static bool near(double a, double b, double tol) {
    return fabs(a - b) <= tol;
}

/* Reference log-softmax of l[0..n) at temperature t. */
static void log_softmax(const float *l, int32_t n, double t, double *out) {
    double max = -INFINITY;
    for (int32_t i = 0; i < n; i++) max = fmax(max, l[i] / t);
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp(l[i] / t - max);
    for (int32_t i = 0; i < n; i++) out[i] = l[i] / t - max - log(sum);
}

/* ------------------------------------------------------------------ tests */

static void test_defaults_and_init(void) {
    vx_sampler_params d = vx_sampler_default_params();
    CHECK(d.seed == UINT64_MAX);
    CHECK(d.temperature == 0.8f);
    CHECK(d.top_k == 40);
    CHECK(d.top_p == 0.95f);
    CHECK(d.min_p == 0.05f);
    CHECK(d.repeat_penalty == 1.0f);
    CHECK(d.presence_penalty == 0.0f && d.frequency_penalty == 0.0f);
    CHECK(d.penalty_last_n == 64);
    CHECK(d.logit_bias == NULL && d.n_logit_bias == 0);

    vx_sampler *s = (vx_sampler *)&d; /* must be overwritten with NULL on failure */
    CHECK(vx_sampler_init(&d, 0, &s) == VX_EINVAL && s == NULL);
    CHECK(vx_sampler_init(NULL, 10, &s) == VX_EINVAL && s == NULL);
    CHECK(vx_sampler_init(&d, 10, NULL) == VX_EINVAL);
    vx_sampler_params bad = d;
    bad.temperature = NAN;
    CHECK(vx_sampler_init(&bad, 10, &s) == VX_EINVAL && s == NULL);
    bad = d;
    bad.repeat_penalty = 0.0f;
    CHECK(vx_sampler_init(&bad, 10, &s) == VX_EINVAL);
    bad = d;
    bad.penalty_last_n = -2;
    CHECK(vx_sampler_init(&bad, 10, &s) == VX_EINVAL);
    vx_logit_bias lb = {10, 1.0f}; /* token out of range */
    bad = d;
    bad.logit_bias = &lb;
    bad.n_logit_bias = 1;
    CHECK(vx_sampler_init(&bad, 10, &s) == VX_EINVAL);
    bad.n_logit_bias = 1;
    bad.logit_bias = NULL;
    CHECK(vx_sampler_init(&bad, 10, &s) == VX_EINVAL);

    /* Random seed works and a fresh sampler reports nothing yet. */
    s = make(&d, 10);
    CHECK(isnan(vx_sampler_last_logprob(s, 0)));
    vx_token ids[4];
    float lps[4];
    CHECK(vx_sampler_last_top(s, 4, ids, lps) == 0);
    float l[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    vx_token t = vx_sampler_sample(s, l);
    CHECK(t >= 0 && t < 10);
    CHECK(vx_sampler_sample(s, NULL) == -1);
    CHECK(isnan(vx_sampler_last_logprob(s, 0)));
    CHECK(vx_sampler_sample(NULL, l) == -1);
    vx_sampler_accept(s, -5); /* ignored, must not crash */
    vx_sampler_accept(s, 10);
    vx_sampler_free(s);
    vx_sampler_free(NULL);
}

static void test_greedy(void) {
    vx_sampler_params p = plain_params();
    p.temperature = 0.0f;
    p.top_k = 1; /* greedy ignores the filters... */
    p.top_p = 0.1f;
    vx_sampler *s = make(&p, 6);
    float l[6] = {0.5f, 3.0f, -1.0f, 2.9f, 3.0f, 1.0f};
    /* ...and breaks the tie between ids 1 and 4 towards the lower id. */
    for (int i = 0; i < 20; i++) CHECK(vx_sampler_sample(s, l) == 1);

    /* Logprobs: log-softmax at temperature 1 over the whole vocabulary. */
    double ref[6];
    log_softmax(l, 6, 1.0, ref);
    double psum = 0.0;
    for (int32_t i = 0; i < 6; i++) {
        float lp = vx_sampler_last_logprob(s, i);
        CHECKF(near(lp, ref[i], 1e-5), "token %d: %f vs %f", i, lp, ref[i]);
        psum += exp(lp);
    }
    CHECK(near(psum, 1.0, 1e-5));
    CHECK(isnan(vx_sampler_last_logprob(s, 6)));
    CHECK(isnan(vx_sampler_last_logprob(s, -1)));

    vx_token ids[3];
    float lps[3];
    CHECK(vx_sampler_last_top(s, 3, ids, lps) == 3);
    CHECK(ids[0] == 1 && ids[1] == 4 && ids[2] == 3);
    CHECK(near(lps[0], ref[1], 1e-5) && near(lps[2], ref[3], 1e-5));

    /* Argmax over a larger random vocabulary. */
    vx_sampler_free(s);
    s = make(&p, 1000);
    float big[1000];
    for (int trial = 0; trial < 10; trial++) {
        random_logits(big, 1000, 10.0f);
        int32_t best = 0;
        for (int32_t i = 1; i < 1000; i++)
            if (big[i] > big[best]) best = i;
        CHECK(vx_sampler_sample(s, big) == best);
    }
    /* Negative temperature is greedy too; a NaN logit is never picked. */
    vx_sampler_free(s);
    p.temperature = -1.0f;
    s = make(&p, 6);
    float ln[6] = {0.0f, NAN, 1.0f, -2.0f, 0.5f, 0.9f};
    CHECK(vx_sampler_sample(s, ln) == 2);
    CHECK(vx_sampler_last_logprob(s, 1) == -INFINITY);
    /* The NaN token is not among the top entries even when asking for all. */
    CHECK(vx_sampler_last_top(s, 3, ids, lps) == 3);
    CHECK(ids[0] == 2 && ids[1] == 5 && ids[2] == 4);
    vx_token all_ids[6];
    float all_lps[6];
    CHECK(vx_sampler_last_top(s, 6, all_ids, all_lps) == 5);
    CHECK(all_ids[3] == 0 && all_ids[4] == 3);
    vx_sampler_free(s);
}

static void test_reproducibility(void) {
    enum { N = 50, DRAWS = 100 };
    float l[N];
    random_logits(l, N, 2.0f);
    vx_sampler_params p = plain_params();
    p.seed = 42;
    vx_sampler *a = make(&p, N), *b = make(&p, N);
    p.seed = 43;
    vx_sampler *c = make(&p, N);
    vx_token sa[DRAWS];
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < DRAWS; i++) {
        sa[i] = vx_sampler_sample(a, l);
        vx_token tb = vx_sampler_sample(b, l), tc = vx_sampler_sample(c, l);
        same_ab += sa[i] == tb;
        same_ac += sa[i] == tc;
    }
    CHECK(same_ab == DRAWS);
    CHECKF(same_ac < DRAWS / 2, "seeds 42 and 43 agree on %d of %d draws", same_ac, DRAWS);

    /* Reset reseeds: the same sequence again. */
    vx_sampler_reset(a);
    int same_reset = 0;
    for (int i = 0; i < DRAWS; i++) same_reset += vx_sampler_sample(a, l) == sa[i];
    CHECK(same_reset == DRAWS);
    vx_sampler_free(a);
    vx_sampler_free(b);
    vx_sampler_free(c);

    /* Two random-seed samplers should not produce the same sequence. */
    p.seed = UINT64_MAX;
    a = make(&p, N);
    b = make(&p, N);
    int same_rand = 0;
    for (int i = 0; i < DRAWS; i++) same_rand += vx_sampler_sample(a, l) == vx_sampler_sample(b, l);
    CHECKF(same_rand < DRAWS / 2, "random seeds agree on %d of %d", same_rand, DRAWS);
    vx_sampler_free(a);
    vx_sampler_free(b);
}

/* Pearson chi-square of observed counts against expected probabilities. */
static double chi_square(const int *counts, const double *prob, int n, int draws) {
    double chi = 0.0;
    for (int i = 0; i < n; i++) {
        double e = prob[i] * draws;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

static void test_distribution(void) {
    enum { N = 8, DRAWS = 20000 };
    float l[N] = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f, -0.5f, 0.2f};
    double lp[N], prob[N];
    log_softmax(l, N, 1.0, lp);
    for (int i = 0; i < N; i++) prob[i] = exp(lp[i]);
    vx_sampler_params p = plain_params();
    p.seed = 7;
    vx_sampler *s = make(&p, N);
    int counts[N] = {0};
    for (int i = 0; i < DRAWS; i++) {
        vx_token t = vx_sampler_sample(s, l);
        CHECK(t >= 0 && t < N);
        if (t >= 0 && t < N) counts[t]++;
    }
    /* 7 degrees of freedom: P(chi2 > 24.3) = 0.001. */
    double chi = chi_square(counts, prob, N, DRAWS);
    CHECKF(chi < 24.3, "chi-square %.2f", chi);
    /* The bound is tight enough to reject a slightly wrong distribution,
     * e.g. temperature 1.1 instead of 1. */
    double lp2[N], prob2[N];
    log_softmax(l, N, 1.1, lp2);
    for (int i = 0; i < N; i++) prob2[i] = exp(lp2[i]);
    double chi2 = chi_square(counts, prob2, N, DRAWS);
    CHECKF(chi2 > 24.3, "chi-square against T=1.1 only %.2f", chi2);
    /* Reported logprobs equal the softmax. */
    for (int i = 0; i < N; i++) CHECK(near(vx_sampler_last_logprob(s, i), lp[i], 1e-5));
    vx_sampler_free(s);
}

static void test_temperature(void) {
    enum { N = 5, DRAWS = 20000 };
    float l[N] = {1.0f, 0.0f, -1.0f, 0.5f, 2.0f};
    const double temps[3] = {0.5, 2.0, 1e-3};
    for (int k = 0; k < 3; k++) {
        vx_sampler_params p = plain_params();
        p.temperature = (float)temps[k];
        vx_sampler *s = make(&p, N);
        vx_sampler_sample(s, l);
        double lp[N];
        log_softmax(l, N, temps[k], lp);
        for (int i = 0; i < N; i++) {
            float got = vx_sampler_last_logprob(s, i);
            /* At T=1e-3 the others are ~-1000: compare loosely in absolute
             * terms but exactly enough to see the scaling. */
            CHECKF(near(got, lp[i], 1e-4 * fmax(1.0, fabs(lp[i]))), "T=%g token %d: %f vs %f",
                   temps[k], i, got, lp[i]);
        }
        /* Differences of logprobs are differences of logits / T. */
        double d = vx_sampler_last_logprob(s, 4) - vx_sampler_last_logprob(s, 0);
        CHECK(near(d, 1.0 / temps[k], 1e-3 / temps[k]));
        vx_sampler_free(s);
    }
    /* Empirical: two tokens, logits 1 and 0 at T=0.5: p0 = 1/(1+e^-2) = 0.8808. */
    float two[2] = {1.0f, 0.0f};
    vx_sampler_params p = plain_params();
    p.temperature = 0.5f;
    vx_sampler *s = make(&p, 2);
    int c0 = 0;
    for (int i = 0; i < DRAWS; i++) c0 += vx_sampler_sample(s, two) == 0;
    double f = (double)c0 / DRAWS, e = 1.0 / (1.0 + exp(-2.0));
    /* sd = sqrt(e(1-e)/n) = 0.0023: 5 sd. */
    CHECKF(near(f, e, 0.0115), "T=0.5 frequency %.4f vs %.4f", f, e);
    vx_sampler_free(s);
    /* At T=2: p0 = 1/(1+e^-0.5) = 0.6225. */
    p.temperature = 2.0f;
    s = make(&p, 2);
    c0 = 0;
    for (int i = 0; i < DRAWS; i++) c0 += vx_sampler_sample(s, two) == 0;
    f = (double)c0 / DRAWS;
    e = 1.0 / (1.0 + exp(-0.5));
    CHECKF(near(f, e, 0.017), "T=2 frequency %.4f vs %.4f", f, e);
    vx_sampler_free(s);
}

static void test_top_k(void) {
    enum { N = 300 };
    float l[N];
    /* top_k = 1 equals greedy on random logits. */
    vx_sampler_params p = plain_params();
    p.top_k = 1;
    vx_sampler *s = make(&p, N);
    p.temperature = 0.0f;
    vx_sampler *g = make(&p, N);
    for (int trial = 0; trial < 50; trial++) {
        random_logits(l, N, 3.0f);
        vx_token a = vx_sampler_sample(s, l), b = vx_sampler_sample(g, l);
        CHECK(a == b);
        CHECK(vx_sampler_last_logprob(s, a) == 0.0f); /* the only survivor */
    }
    vx_sampler_free(s);
    vx_sampler_free(g);

    /* top_k = 3 draws only from the three best, each of them sometimes. */
    float small[10] = {0.1f, 2.0f, 0.3f, 1.9f, -4.0f, 1.8f, 0.0f, 1.7f, 0.2f, 1.0f};
    p = plain_params();
    p.top_k = 3;
    s = make(&p, 10);
    int counts[10] = {0};
    for (int i = 0; i < 3000; i++) {
        vx_token t = vx_sampler_sample(s, small);
        if (t >= 0 && t < 10) counts[t]++;
    }
    CHECK(counts[1] > 0 && counts[3] > 0 && counts[5] > 0);
    CHECK(counts[1] + counts[3] + counts[5] == 3000);
    /* Survivors renormalized among themselves; the rest -inf. */
    float three[3] = {2.0f, 1.9f, 1.8f};
    double ref[3];
    log_softmax(three, 3, 1.0, ref);
    CHECK(near(vx_sampler_last_logprob(s, 1), ref[0], 1e-5));
    CHECK(near(vx_sampler_last_logprob(s, 3), ref[1], 1e-5));
    CHECK(near(vx_sampler_last_logprob(s, 5), ref[2], 1e-5));
    CHECK(vx_sampler_last_logprob(s, 7) == -INFINITY);
    CHECK(vx_sampler_last_logprob(s, 4) == -INFINITY);
    vx_token ids[5];
    float lps[5];
    CHECK(vx_sampler_last_top(s, 5, ids, lps) == 3);
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 5);
    vx_sampler_free(s);

    /* Heavy ties: the survivors are the first k in (logit desc, id asc). */
    enum { M = 2000, K = 150 };
    float tied[M];
    for (int32_t i = 0; i < M; i++) tied[i] = (float)((int)(test_uniform() * 10.0));
    p = plain_params();
    p.top_k = K;
    s = make(&p, M);
    vx_sampler_sample(s, tied);
    /* Expected: walk levels from 9 down, ids ascending within a level. */
    int32_t kept = 0, wrong = 0;
    for (int level = 9; level >= 0; level--) {
        for (int32_t i = 0; i < M; i++) {
            if (tied[i] != (float)level) continue;
            bool expect = kept < K;
            if (expect) kept++;
            bool got = vx_sampler_last_logprob(s, i) > -INFINITY;
            wrong += got != expect;
        }
    }
    CHECKF(wrong == 0, "%d tokens wrongly kept/dropped by top-k with ties", wrong);
    vx_sampler_free(s);

    /* k >= n_vocab keeps everything. */
    p = plain_params();
    p.top_k = 50;
    s = make(&p, 10);
    vx_sampler_sample(s, small);
    vx_token ids20[20];
    float lps20[20];
    CHECK(vx_sampler_last_top(s, 20, ids20, lps20) == 10); /* capped by the kept set */
    CHECK(ids20[0] == 1 && ids20[9] == 4);
    CHECK(vx_sampler_last_top(s, 5, ids20, lps20) == 5);
    CHECK(ids20[3] == 7 && ids20[4] == 9);
    int finite = 0;
    for (int32_t i = 0; i < 10; i++) finite += vx_sampler_last_logprob(s, i) > -INFINITY;
    CHECK(finite == 10);
    vx_sampler_free(s);
}

static vx_sampler *sample_probs(const vx_sampler_params *p, const double *prob, int32_t n) {
    float l[16];
    for (int32_t i = 0; i < n; i++) l[i] = (float)log(prob[i]);
    vx_sampler *s = make(p, n);
    vx_sampler_sample(s, l);
    return s;
}

static int kept_mask(const vx_sampler *s, int32_t n) {
    int m = 0;
    for (int32_t i = 0; i < n; i++)
        if (vx_sampler_last_logprob(s, i) > -INFINITY) m |= 1 << i;
    return m;
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void test_top_p(void) {
    /* Shuffled order so that the sort matters. */
    const double prob[5] = {0.15, 0.5, 0.05, 0.3, 0.0 + 1e-9};
    vx_sampler_params p = plain_params();
    p.top_p = 0.75f; /* 0.5 < 0.75 <= 0.8 */
    vx_sampler *s = sample_probs(&p, prob, 5);
    CHECKF(kept_mask(s, 5) == ((1 << 1) | (1 << 3)), "mask %x", kept_mask(s, 5));
    CHECK(near(vx_sampler_last_logprob(s, 1), log(0.5 / 0.8), 1e-5));
    CHECK(near(vx_sampler_last_logprob(s, 3), log(0.3 / 0.8), 1e-5));
    vx_sampler_free(s);
    p.top_p = 0.85f; /* 0.8 < 0.85 <= 0.95 */
    s = sample_probs(&p, prob, 5);
    CHECK(kept_mask(s, 5) == ((1 << 0) | (1 << 1) | (1 << 3)));
    vx_sampler_free(s);
    p.top_p = 0.4f; /* the best alone already has 0.5 */
    s = sample_probs(&p, prob, 5);
    CHECK(kept_mask(s, 5) == (1 << 1));
    CHECK(vx_sampler_last_logprob(s, 1) == 0.0f);
    vx_sampler_free(s);
    p.top_p = 0.0f; /* min_keep: the best always survives */
    s = sample_probs(&p, prob, 5);
    CHECK(kept_mask(s, 5) == (1 << 1));
    vx_sampler_free(s);

    /* top-p after top-k renormalizes over the top-k survivors (llama.cpp):
     * top_k = 2 leaves {0.5, 0.3} -> {0.625, 0.375}; top_p 0.6 keeps one. */
    p.top_k = 2;
    p.top_p = 0.6f;
    s = sample_probs(&p, prob, 5);
    CHECK(kept_mask(s, 5) == (1 << 1));
    vx_sampler_free(s);

    /* Large vocabulary: compare the kept set with a reference computed by a
     * full sort, for peaked and flat distributions, with and without a
     * preceding top-k (which changes the mass top-p normalizes over). */
    enum { N = 5000 };
    static float l[N], sorted[N];
    const struct {
        float top_p, scale;
        int32_t top_k;
    } cases[] = {
        {0.3f, 1.0f, 0},     {0.9f, 1.0f, 0},    {0.99f, 8.0f, 0},   {0.5f, 30.0f, 0},
        {0.999f, 40.0f, 0},  {0.7f, 1e-3f, 0},   {0.95f, 3.0f, 0},   {0.3f, 1.0f, 1000},
        {0.95f, 3.0f, 1000}, {0.5f, 0.1f, 4000}, {0.999f, 8.0f, 64},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        random_logits(l, N, cases[k].scale);
        memcpy(sorted, l, sizeof l);
        qsort(sorted, N, sizeof *sorted, cmp_desc);
        int32_t pool = cases[k].top_k > 0 ? cases[k].top_k : N;
        double total = 0.0;
        for (int32_t i = 0; i < pool; i++) total += exp((double)sorted[i] - sorted[0]);
        double cum = 0.0;
        int32_t want = pool;
        for (int32_t i = 0; i < pool; i++) {
            cum += exp((double)sorted[i] - sorted[0]);
            if (cum >= cases[k].top_p * total) {
                want = i + 1;
                break;
            }
        }
        p = plain_params();
        p.top_p = cases[k].top_p;
        p.top_k = cases[k].top_k;
        s = make(&p, N);
        vx_token t = vx_sampler_sample(s, l);
        int32_t got = 0, wrong = 0;
        float cutoff = sorted[want - 1];
        double psum = 0.0;
        for (int32_t i = 0; i < N; i++) {
            float lp = vx_sampler_last_logprob(s, i);
            bool in = lp > -INFINITY;
            got += in;
            wrong += in != (l[i] >= cutoff);
            if (in) psum += exp(lp);
        }
        CHECKF(got == want && wrong == 0, "case %zu: kept %d want %d (wrong %d)", k, got, want,
               wrong);
        CHECK(t >= 0 && t < N && l[t] >= cutoff);
        CHECK(near(psum, 1.0, 1e-4));
        vx_sampler_free(s);
    }

    /* All logits equal: ties resolve to the lowest ids. 0.30011 * 5000 =
     * 1500.55, so 1501 tokens are needed. */
    for (int32_t i = 0; i < N; i++) l[i] = 0.25f;
    p = plain_params();
    p.top_p = 0.30011f;
    s = make(&p, N);
    vx_sampler_sample(s, l);
    int32_t wrong = 0;
    for (int32_t i = 0; i < N; i++)
        wrong += (vx_sampler_last_logprob(s, i) > -INFINITY) != (i < 1501);
    CHECKF(wrong == 0, "%d tokens wrong with equal logits", wrong);
    vx_sampler_free(s);
}

static void test_min_p(void) {
    const double prob[4] = {0.15, 0.5, 0.05, 0.3};
    vx_sampler_params p = plain_params();
    p.min_p = 0.2f; /* threshold 0.1: drops 0.05 */
    vx_sampler *s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == ((1 << 0) | (1 << 1) | (1 << 3)));
    CHECK(near(vx_sampler_last_logprob(s, 0), log(0.15 / 0.95), 1e-5));
    vx_sampler_free(s);
    p.min_p = 0.5f; /* threshold 0.25: keeps 0.5 and 0.3 */
    s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == ((1 << 1) | (1 << 3)));
    vx_sampler_free(s);
    p.min_p = 0.61f; /* threshold 0.305: only the best */
    s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == (1 << 1));
    vx_sampler_free(s);
    /* Close to the boundary: 0.15 / 0.5 = 0.3 of p_max. */
    p.min_p = 0.29f;
    s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == ((1 << 0) | (1 << 1) | (1 << 3)));
    vx_sampler_free(s);
    p.min_p = 0.31f;
    s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == ((1 << 1) | (1 << 3)));
    vx_sampler_free(s);
    p.min_p = 5.0f; /* above 1: still keeps the best */
    s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == (1 << 1));
    vx_sampler_free(s);
    /* min-p runs before the temperature: at T=3 the same set is kept. */
    p.min_p = 0.2f;
    p.temperature = 3.0f;
    s = sample_probs(&p, prob, 4);
    CHECK(kept_mask(s, 4) == ((1 << 0) | (1 << 1) | (1 << 3)));
    vx_sampler_free(s);
}

/* With greedy, logprob differences expose the penalized logits: returns
 * logit(a) - logit(ref) as the sampler saw it. */
static double seen_diff(const vx_sampler *s, vx_token a, vx_token ref) {
    return (double)vx_sampler_last_logprob(s, a) - (double)vx_sampler_last_logprob(s, ref);
}

static void test_penalties(void) {
    /* Token 3 is never accepted: the reference at logit 1.0. */
    float l[4] = {2.0f, -1.0f, 0.5f, 1.0f};
    const vx_token hist[3] = {0, 1, 0};
    vx_sampler_params p = plain_params();
    p.temperature = 0.0f;

    /* Repetition 2: 2 -> 1 (divided), -1 -> -2 (multiplied), 0.5 untouched. */
    p.repeat_penalty = 2.0f;
    vx_sampler *s = make(&p, 4);
    for (int i = 0; i < 3; i++) vx_sampler_accept(s, hist[i]);
    vx_token t = vx_sampler_sample(s, l);
    CHECK(t == 0); /* ties with token 3 at 1.0: lowest id */
    CHECK(near(seen_diff(s, 0, 3), 0.0, 1e-5));
    CHECK(near(seen_diff(s, 1, 3), -3.0, 1e-5));
    CHECK(near(seen_diff(s, 2, 3), -0.5, 1e-5));
    /* Reset clears the history: back to the raw logits. */
    vx_sampler_reset(s);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), 1.0, 1e-5));
    CHECK(near(seen_diff(s, 1, 3), -2.0, 1e-5));
    vx_sampler_free(s);

    /* Presence 0.5: once per present token, whatever the count. */
    p = plain_params();
    p.temperature = 0.0f;
    p.presence_penalty = 0.5f;
    s = make(&p, 4);
    for (int i = 0; i < 3; i++) vx_sampler_accept(s, hist[i]);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), 0.5, 1e-5));  /* 2 - 0.5 */
    CHECK(near(seen_diff(s, 1, 3), -2.5, 1e-5)); /* -1 - 0.5 */
    CHECK(near(seen_diff(s, 2, 3), -0.5, 1e-5));
    vx_sampler_free(s);

    /* Frequency 0.75: count * penalty (token 0 twice). */
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.75f;
    s = make(&p, 4);
    for (int i = 0; i < 3; i++) vx_sampler_accept(s, hist[i]);
    CHECK(vx_sampler_sample(s, l) == 3); /* token 0 now 0.5 */
    CHECK(near(seen_diff(s, 0, 3), -0.5, 1e-5));  /* 2 - 1.5 */
    CHECK(near(seen_diff(s, 1, 3), -2.75, 1e-5)); /* -1 - 0.75 */
    vx_sampler_free(s);

    /* All three: repetition first, then subtract. token 0: 2/2 - 2*0.25 - 0.5
     * = 0; token 1: -1*2 - 0.25 - 0.5 = -2.75. */
    p.repeat_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    s = make(&p, 4);
    for (int i = 0; i < 3; i++) vx_sampler_accept(s, hist[i]);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), -1.0, 1e-5));
    CHECK(near(seen_diff(s, 1, 3), -3.75, 1e-5));
    vx_sampler_free(s);

    /* Window: penalty_last_n = 2 only remembers the last two (1, 2) after
     * accepting 0, 1, 2. */
    p = plain_params();
    p.temperature = 0.0f;
    p.frequency_penalty = 1.0f;
    p.penalty_last_n = 2;
    s = make(&p, 4);
    vx_sampler_accept(s, 0);
    vx_sampler_accept(s, 1);
    vx_sampler_accept(s, 2);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), 1.0, 1e-5));  /* forgotten */
    CHECK(near(seen_diff(s, 1, 3), -3.0, 1e-5)); /* -1 - 1 */
    CHECK(near(seen_diff(s, 2, 3), -1.5, 1e-5)); /* 0.5 - 1 */
    /* Sliding further: accept 2 again -> window (2, 2). */
    vx_sampler_accept(s, 2);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 1, 3), -2.0, 1e-5));
    CHECK(near(seen_diff(s, 2, 3), -2.5, 1e-5)); /* 0.5 - 2 */
    vx_sampler_free(s);

    /* penalty_last_n = 0: off; -1: everything ever accepted. */
    p.penalty_last_n = 0;
    s = make(&p, 4);
    for (int i = 0; i < 3; i++) vx_sampler_accept(s, hist[i]);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), 1.0, 1e-5));
    vx_sampler_free(s);
    p.penalty_last_n = -1;
    s = make(&p, 4);
    for (int i = 0; i < 100; i++) vx_sampler_accept(s, 0);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), -99.0, 1e-3)); /* 2 - 100 */
    vx_sampler_reset(s);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), 1.0, 1e-5));
    vx_sampler_free(s);

    /* Penalties also shape random sampling: a heavily penalized token that
     * would otherwise dominate is (almost) never drawn. */
    p = plain_params();
    p.presence_penalty = 20.0f;
    float dom[3] = {10.0f, 0.0f, 0.0f};
    s = make(&p, 3);
    vx_sampler_accept(s, 0);
    int n0 = 0;
    for (int i = 0; i < 1000; i++) n0 += vx_sampler_sample(s, dom) == 0;
    CHECKF(n0 < 10, "penalized token drawn %d times", n0);
    vx_sampler_free(s);
}

static void test_logit_bias(void) {
    float l[5] = {1.0f, 3.0f, 2.0f, 0.0f, -1.0f};
    vx_logit_bias ban[1] = {{1, -INFINITY}};
    vx_sampler_params p = plain_params();
    p.temperature = 0.0f;
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    vx_sampler *s = make(&p, 5);
    ban[0].token = 4; /* the sampler keeps its own copy */
    CHECK(vx_sampler_sample(s, l) == 2);
    CHECK(vx_sampler_last_logprob(s, 1) == -INFINITY);
    vx_sampler_free(s);

    /* Random sampling never draws a banned token. */
    ban[0].token = 1;
    p.temperature = 1.0f;
    s = make(&p, 5);
    int n1 = 0;
    for (int i = 0; i < 5000; i++) n1 += vx_sampler_sample(s, l) == 1;
    CHECK(n1 == 0);
    CHECK(vx_sampler_last_logprob(s, 1) == -INFINITY);
    vx_sampler_free(s);

    /* Positive bias moves the argmax; +INFINITY forces a token. */
    vx_logit_bias up[2] = {{3, 3.5f}, {4, 0.5f}};
    p.temperature = 0.0f;
    p.logit_bias = up;
    p.n_logit_bias = 2;
    s = make(&p, 5);
    CHECK(vx_sampler_sample(s, l) == 3);
    CHECK(near(seen_diff(s, 4, 0), -1.5, 1e-5)); /* -1 + 0.5 vs 1 */
    vx_sampler_free(s);
    vx_logit_bias force[1] = {{4, INFINITY}};
    p.temperature = 1.0f;
    p.logit_bias = force;
    p.n_logit_bias = 1;
    s = make(&p, 5);
    for (int i = 0; i < 20; i++) CHECK(vx_sampler_sample(s, l) == 4);
    CHECK(vx_sampler_last_logprob(s, 4) == 0.0f);
    vx_sampler_free(s);

    /* Bias comes before the repetition penalty: (1 + 1) / 2 = 1, whereas
     * penalty-then-bias would give 1.5. */
    vx_logit_bias b0[1] = {{0, 1.0f}};
    p = plain_params();
    p.temperature = 0.0f;
    p.repeat_penalty = 2.0f;
    p.logit_bias = b0;
    p.n_logit_bias = 1;
    s = make(&p, 5);
    vx_sampler_accept(s, 0);
    vx_sampler_sample(s, l);
    CHECK(near(seen_diff(s, 0, 3), 1.0, 1e-5));
    vx_sampler_free(s);

    /* Everything banned: no token. */
    vx_logit_bias all[3] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    float l3[3] = {0.0f, 1.0f, 2.0f};
    p = plain_params();
    p.logit_bias = all;
    p.n_logit_bias = 3;
    s = make(&p, 3);
    CHECK(vx_sampler_sample(s, l3) == -1);
    CHECK(isnan(vx_sampler_last_logprob(s, 0)));
    vx_sampler_free(s);
    p.temperature = 0.0f;
    s = make(&p, 3);
    CHECK(vx_sampler_sample(s, l3) == -1);
    vx_sampler_free(s);
}

/* The default chain on a realistic vocabulary: the drawn token is in the
 * kept set, probabilities over the kept set sum to 1, top list is sorted
 * and consistent with last_logprob. */
/* A filter (vx_sampler_set_filter) bans what it refuses, as a bias of
 * -inf would: greedy takes the best allowed token, draws never take a
 * refused one, the distribution renormalizes over the rest, and a filter
 * that allows nothing makes the draw fail. NULL removes it. */
static bool even_only(void *ctx, vx_token t) {
    (*(int *)ctx)++;
    return t % 2 == 0;
}

static bool nothing(void *ctx, vx_token t) {
    (void)ctx, (void)t;
    return false;
}

static void test_filter(void) {
    float l[5] = {1.0f, 3.0f, 2.0f, 0.0f, -1.0f};
    vx_sampler_params p = plain_params();
    p.temperature = 0.0f;
    vx_sampler *s = make(&p, 5);
    int calls = 0;
    vx_sampler_set_filter(s, even_only, &calls);
    CHECK(vx_sampler_sample(s, l) == 2 && calls == 5);
    CHECK(vx_sampler_last_logprob(s, 1) == -INFINITY && vx_sampler_last_logprob(s, 3) == -INFINITY);
    /* over the allowed tokens 0, 2, 4: softmax of (1, 2, -1) */
    const double z = exp(1.0) + exp(2.0) + exp(-1.0);
    CHECK(near(vx_sampler_last_logprob(s, 2), log(exp(2.0) / z), 1e-5));
    vx_sampler_set_filter(s, NULL, NULL);
    CHECK(vx_sampler_sample(s, l) == 1);
    vx_sampler_free(s);

    p.temperature = 1.0f;
    s = make(&p, 5);
    vx_sampler_set_filter(s, even_only, &calls);
    int odd = 0, seen[5] = {0};
    for (int i = 0; i < 3000; i++) {
        const vx_token t = vx_sampler_sample(s, l);
        odd += t % 2 != 0;
        if (t >= 0 && t < 5) seen[t]++;
    }
    CHECK(odd == 0 && seen[0] > 0 && seen[2] > seen[0] && seen[4] > 0);
    vx_sampler_set_filter(s, nothing, NULL);
    CHECK(vx_sampler_sample(s, l) == -1);
    vx_sampler_free(s);
}

static void test_full_chain(void) {
    enum { N = 32000 };
    static float l[N];
    vx_sampler_params p = vx_sampler_default_params();
    p.seed = 99;
    p.repeat_penalty = 1.1f;
    p.presence_penalty = 0.2f;
    p.frequency_penalty = 0.1f;
    vx_sampler *s = make(&p, N);
    for (int step = 0; step < 20; step++) {
        random_logits(l, N, 6.0f);
        vx_token t = vx_sampler_sample(s, l);
        CHECK(t >= 0 && t < N);
        if (t < 0) break;
        CHECK(vx_sampler_last_logprob(s, t) > -INFINITY);
        double psum = 0.0;
        int kept = 0;
        for (int32_t i = 0; i < N; i++) {
            float lp = vx_sampler_last_logprob(s, i);
            if (lp > -INFINITY) {
                psum += exp(lp);
                kept++;
            }
        }
        CHECKF(near(psum, 1.0, 1e-4), "step %d: mass %f", step, psum);
        CHECK(kept >= 1 && kept <= 40);
        vx_token ids[50];
        float lps[50];
        int32_t m = vx_sampler_last_top(s, 50, ids, lps);
        CHECK(m == kept);
        for (int32_t i = 0; i < m; i++) {
            CHECK(lps[i] == vx_sampler_last_logprob(s, ids[i]));
            if (i > 0) CHECK(lps[i] <= lps[i - 1]);
        }
        vx_token top2[2];
        float lp2[2];
        if (m >= 2) {
            CHECK(vx_sampler_last_top(s, 2, top2, lp2) == 2);
            CHECK(top2[0] == ids[0] && top2[1] == ids[1]);
        }
        vx_sampler_accept(s, t);
    }
    vx_sampler_free(s);
}

/* vx_logprobs: the model's distribution, whatever a sampler would do. */
static void test_raw_logprobs(void) {
    float l[7] = {0.5f, 3.0f, -INFINITY, 2.9f, 3.0f, NAN, 1.0f};
    double ref[7];
    const float fin[5] = {0.5f, 3.0f, 2.9f, 3.0f, 1.0f}; /* the finite ones */
    double lse = 0.0;
    for (int i = 0; i < 5; i++) lse += exp((double)fin[i] - 3.0);
    lse = 3.0 + log(lse);
    for (int i = 0; i < 7; i++) ref[i] = isfinite(l[i]) ? (double)l[i] - lse : -INFINITY;
    float lp = 0;
    vx_token ids[8];
    float lps[8];
    CHECK(vx_logprobs(l, 7, 3, &lp, 3, ids, lps) == 3);
    CHECKF(near(lp, ref[3], 1e-6), "token 3: %f vs %f", lp, ref[3]);
    CHECK(ids[0] == 1 && ids[1] == 4 && ids[2] == 3); /* tie 1 / 4: lower id first */
    CHECK(near(lps[0], ref[1], 1e-6) && near(lps[1], ref[4], 1e-6) && near(lps[2], ref[3], 1e-6));
    /* asking for more than there are: only the finite ones, NaN as -inf */
    CHECK(vx_logprobs(l, 7, 5, &lp, 8, ids, lps) == 5 && lp == -INFINITY);
    CHECK(ids[3] == 6 && ids[4] == 0 && near(lps[4], ref[0], 1e-6));
    CHECK(vx_logprobs(l, 7, 2, &lp, 0, NULL, NULL) == 0 && lp == -INFINITY);
    CHECK(vx_logprobs(l, 7, 7, &lp, 0, NULL, NULL) == 0 && isnan(lp));
    CHECK(vx_logprobs(l, 7, -1, &lp, 2, ids, lps) == 2 && isnan(lp));
    const float banned[3] = {-INFINITY, -INFINITY, NAN};
    CHECK(vx_logprobs(banned, 3, 0, &lp, 2, ids, lps) == 0 && isnan(lp));
    CHECK(vx_logprobs(NULL, 7, 0, &lp, 2, ids, lps) == 0 && vx_logprobs(l, 7, 0, &lp, 2, NULL, lps) == 0);

    /* a sampler at any temperature, with penalties and a bias, changes
     * what it draws from but not these: the same numbers after sampling */
    vx_sampler_params p = plain_params();
    p.temperature = 0.5f;
    p.top_k = 2;
    p.frequency_penalty = 1.0f;
    vx_sampler *s = make(&p, 7);
    vx_sampler_accept(s, 1);
    float before[3], after[3];
    vx_token bi[3], ai[3];
    CHECK(vx_logprobs(l, 7, 0, NULL, 3, bi, before) == 3);
    CHECK(vx_sampler_sample(s, l) >= 0);
    CHECK(vx_logprobs(l, 7, 0, NULL, 3, ai, after) == 3);
    CHECK(!memcmp(bi, ai, sizeof bi) && !memcmp(before, after, sizeof before));
    /* ... while the sampler's own view (temperature 0.5, top-2, token 1
     * penalized) differs */
    CHECK(vx_sampler_last_top(s, 3, ai, after) == 2 && ai[0] == 4);
    vx_sampler_free(s);
}

/* Token filter for test_fast_top_k: ids that are multiples of ctx's
 * modulus (3000 / 75: exactly 40 tokens, top-k's usual k). */
static bool multiple_of(void *ctx, vx_token t) { return t % *(const int *)ctx == 0; }

/* Top-k's one-pass gathering against the full candidate path it stands
 * for (the same settings plus 260 zero logit_bias entries, which change no
 * logit but exceed what the one pass takes): the same tokens drawn and
 * the same final distributions, over random logits with ties, NaN and
 * infinities, bias lists that repeat and ban tokens, penalties over a
 * window that fills and forgets, filters leaving many, exactly k or a few
 * more than k tokens, and top-k from 1 to INT32_MAX. */
static void test_fast_top_k(void) {
    enum { N = 3000, ZERO = 260 };
    static float l[N];
    int bad = 0, cases = 0;
    for (int trial = 0; trial < 160; trial++) {
        vx_sampler_params p = plain_params();
        static const int ks[] = {1, 2, 7, 40, 300, N + 5, INT32_MAX, 41};
        p.top_k = ks[trial % 8];
        p.top_p = trial % 4 == 0 ? 1.0f : 0.9f;
        p.min_p = trial % 3 == 0 ? 0.0f : 0.05f;
        p.temperature = 0.5f + (float)(trial % 5) * 0.3f;
        p.seed = 99 + (uint64_t)trial;
        p.repeat_penalty = trial % 2 ? 1.3f : 1.0f;
        p.presence_penalty = trial % 7 == 1 ? 0.5f : 0.0f;
        p.frequency_penalty = trial % 5 == 2 ? 0.25f : 0.0f;
        p.penalty_last_n = 16; /* 40 steps: the window forgets */
        static vx_logit_bias bias[12 + ZERO];
        const int nb = trial % 4 == 3 ? 0 : 12;
        for (int j = 0; j < nb; j++) {
            bias[j].token = (vx_token)(test_uniform() * 40); /* repeats, near the top */
            bias[j].bias = j % 5 == 0 ? -INFINITY : (float)(test_uniform() * 6.0 - 3.0);
        }
        for (int j = nb; j < nb + ZERO; j++) bias[j].token = (vx_token)(j % N), bias[j].bias = 0.0f;
        p.logit_bias = bias;
        p.n_logit_bias = nb;
        vx_sampler_params q = p;
        q.n_logit_bias = nb + ZERO;
        vx_sampler *a = make(&p, N), *b = make(&q, N);
        static const int mods[] = {3, 75, 50};
        int mod = mods[trial % 3];
        if (trial % 4 != 0) {
            vx_sampler_set_filter(a, multiple_of, &mod);
            vx_sampler_set_filter(b, multiple_of, &mod);
        }
        for (int step = 0; a && b && step < 40; step++) {
            random_logits(l, N, 4.0f);
            for (int i = 0; i < N; i += 17) l[i] = l[i / 2]; /* ties */
            if (step % 9 == 0) l[5] = NAN, l[6] = INFINITY, l[7] = -INFINITY, l[150] = NAN;
            const vx_token ta = vx_sampler_sample(a, l), tb = vx_sampler_sample(b, l);
            vx_token ia[8], ib[8];
            float la[8], lb[8];
            const int32_t na = vx_sampler_last_top(a, 8, ia, la), nbt = vx_sampler_last_top(b, 8, ib, lb);
            cases++;
            bad += ta != tb || na != nbt || memcmp(ia, ib, (size_t)na * sizeof *ia) != 0 ||
                   memcmp(la, lb, (size_t)na * sizeof *la) != 0 ||
                   vx_sampler_last_logprob(a, 0) != vx_sampler_last_logprob(b, 0);
            vx_sampler_accept(a, ta);
            vx_sampler_accept(b, tb);
        }
        vx_sampler_free(a);
        vx_sampler_free(b);
    }
    CHECKF(bad == 0, "top-k one pass vs the full path: %d of %d draws differ", bad, cases);
}

int main(void) {
    test_defaults_and_init();
    test_fast_top_k();
    test_raw_logprobs();
    test_greedy();
    test_reproducibility();
    test_distribution();
    test_temperature();
    test_top_k();
    test_top_p();
    test_min_p();
    test_penalties();
    test_logit_bias();
    test_filter();
    test_full_chain();
    return vx_test_finish("test_sampling");
}
