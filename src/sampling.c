/*
 * sampling.c - the token sampler (vx_sampler): logit bias, repetition /
 * presence / frequency penalties, top-k, top-p, min-p, temperature and a
 * seeded random draw, plus the log-probabilities of the last draw.
 *
 * The sampler works on a candidate array {id, logit, p} of n_vocab entries
 * allocated at init; vx_sampler_sample never allocates. Steps run in this
 * fixed order, the order of llama.cpp's default chain (which is
 * penalties, top_k, typical, top_p, min_p, temperature, dist; we have no
 * typical-p step):
 *
 *   1. logit bias       logit += bias (a bias of -INFINITY bans the token);
 *                       a filter (vx_sampler_set_filter) bans the tokens it refuses
 *   2. penalties        over the last penalty_last_n accepted tokens:
 *                       repetition (CTRL): positive logits are divided by the
 *                       penalty, others multiplied; then
 *                       logit -= count * frequency + (count > 0) * presence
 *   3. top-k            keep the k highest logits
 *   4. top-p            keep the smallest prefix (by probability, at
 *                       temperature 1, renormalized over the survivors) whose
 *                       cumulative mass reaches top_p
 *   5. min-p            keep tokens with p >= min_p * p_max
 *   6. temperature      logit /= temperature
 *   7. softmax + draw   one uniform number from a xoshiro256** generator
 *
 * Filters never remove the most likely token, so something is always left
 * unless every logit is -inf/NaN. Because top-p and min-p run before the
 * temperature, they see the temperature-1 distribution, as in llama.cpp.
 *
 * Greedy (temperature <= 0) is argmax after steps 1-2; ties go to the lowest
 * id. Filters order by (logit descending, id ascending), a total order, so
 * the kept set never depends on the selection algorithm; the draw itself is
 * deterministic for a given seed and logits.
 *
 * NaN logits are treated as -inf; +inf is clamped to FLT_MAX so a bias of
 * +INFINITY forces a token without producing inf - inf = NaN in the softmax.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

/* One candidate token. p is scratch for the step that runs: an unnormalized
 * weight exp(logit - max), relative to the best token of that step. */
typedef struct vx_cand {
    vx_token id;
    float logit;
    float p;
} vx_cand;

struct vx_sampler {
    vx_sampler_params params; /* params.logit_bias points at bias below */
    int32_t n_vocab;
    vx_logit_bias *bias;
    int32_t n_bias;

    /* Candidates; after a sample, cand[0..n_dist) is the final distribution
     * with cand[i].logit holding the final logit shifted so that the best is
     * 0, and dist_lse = log(sum(exp(shifted))). */
    vx_cand *cand;
    int32_t n_dist; /* 0: no distribution available */
    double dist_lse;
    /* Greedy leaves the distribution unfinished (logits as they were, in
     * id order; most callers never ask): the getters shift by dist_max
     * and compute dist_lse on first use (NAN until then). */
    bool dist_raw;
    float dist_max;

    /* Penalty history: counts[t] = occurrences of t in the window. The ring
     * holds the window so the oldest token can be forgotten; with an
     * unbounded window (penalty_last_n = -1) there is no ring. */
    int32_t *counts;
    vx_token *ring;
    int32_t ring_cap, ring_len, ring_head;

    uint64_t rng[4];

    vx_token_filter filter; /* vx_sampler_set_filter: NULL or the constraint */
    void *filter_ctx;

    /* gather_top's: the tokens bias and penalties change, each once */
    uint8_t *mark;     /* [n_vocab] */
    vx_token *touched; /* [n_bias + ring_cap] */
};

/* ------------------------------------------------------------------ PRNG */

/* splitmix64: expands one 64-bit seed into the xoshiro state (xoshiro must
 * not start from all zeros, which splitmix64 never yields for four outputs). */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman & Vigna), written from the published description. */
static uint64_t rng_next(uint64_t s[4]) {
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) {
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* A seed for seed == UINT64_MAX ("random"): /dev/urandom, else time mixed
 * with an address (ASLR) so two samplers created together still differ. */
static uint64_t random_seed(const void *salt) {
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r;
        do {
            r = read(fd, &v, sizeof v);
        } while (r < 0 && errno == EINTR);
        close(fd);
        if (r == (ssize_t)sizeof v) return v;
    }
    uint64_t x = (uint64_t)vx_time_us() ^ ((uint64_t)(uintptr_t)salt << 16);
    return splitmix64(&x);
}

static void rng_seed(vx_sampler *s) {
    uint64_t x = s->params.seed == UINT64_MAX ? random_seed(s) : s->params.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* ------------------------------------------------------------- helpers */

/* NaN -> -inf (never chosen), +inf -> FLT_MAX (chosen, but finite so that
 * subtracting the max stays well defined). -inf and finite values pass. */
static float sanitize(float x) {
    if (isnan(x)) return -INFINITY;
    if (x > FLT_MAX) return FLT_MAX;
    return x;
}

/* Total order on candidates: higher logit first, then lower id. */
static bool cand_better(const vx_cand *a, const vx_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Sift-down in a heap whose root is the WORST element (a min-heap under
 * cand_better), over h[0..n). */
static void heap_sift_down(vx_cand *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, worst = i;
        if (l < n && cand_better(&h[worst], &h[l])) worst = l;
        if (l + 1 < n && cand_better(&h[worst], &h[l + 1])) worst = l + 1;
        if (worst == i) return;
        vx_cand t = h[i];
        h[i] = h[worst];
        h[worst] = t;
        i = worst;
    }
}

/* Moves the k best of c[0..n) to c[0..k), sorted best first; the others end
 * up in c[k..n) in no particular order. O(n log k), in place: a heap of the
 * k best seen so far whose root is the worst of them, then a heapsort of it
 * (popping the worst to the end leaves the prefix sorted best first). */
static void select_top(vx_cand *c, int32_t n, int32_t k) {
    if (k <= 0) return;
    if (k > n) k = n;
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (cand_better(&c[i], &c[0])) {
            vx_cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            heap_sift_down(c, k, 0);
        }
    }
    for (int32_t m = k - 1; m > 0; m--) {
        vx_cand t = c[0];
        c[0] = c[m];
        c[m] = t;
        heap_sift_down(c, m, 0);
    }
}

/* Index of the best candidate of c[0..n), n > 0. */
static int32_t find_best(const vx_cand *c, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (cand_better(&c[i], &c[b])) b = i;
    return b;
}

/* Largest logit of c[0..n), n > 0 (cheaper than find_best: no tie-break). */
static float max_logit(const vx_cand *c, int32_t n) {
    float m = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > m) m = c[i].logit;
    return m;
}

/* Unnormalized probability relative to the best token. expf rather than exp:
 * it is about twice as fast and this runs over the whole vocabulary. */
static float weight(float logit, float max) {
    return expf(logit - max);
}

/* ------------------------------------------------------------ the steps */

/* Whether the repetition penalties change any logit. */
static bool penalizing(const vx_sampler_params *p) {
    return p->penalty_last_n != 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

/* Logit l of a token seen cnt times in the penalty window, penalized
 * (-inf, banned, stays so). */
static float penalize(const vx_sampler_params *p, float l, int32_t cnt) {
    if (l == -INFINITY) return l;
    l = l > 0.0f ? l / p->repeat_penalty : l * p->repeat_penalty;
    l -= (float)cnt * p->frequency_penalty + p->presence_penalty;
    return sanitize(l);
}

/* Steps 1-2: fills cand[0..n_vocab) in id order with biased, penalized,
 * sanitized logits. Penalties use the per-token counts, so this is one pass
 * whatever the window size. */
static void build_candidates(vx_sampler *s, const float *logits) {
    vx_cand *c = s->cand;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = sanitize(logits[i]);
    }
    /* Candidates are still in id order, so a bias is a direct index. */
    for (int32_t j = 0; j < s->n_bias; j++) {
        vx_cand *x = &c[s->bias[j].token];
        x->logit = sanitize(x->logit + s->bias[j].bias);
    }
    if (s->filter)
        for (int32_t i = 0; i < n; i++)
            if (c[i].logit != -INFINITY && !s->filter(s->filter_ctx, i)) c[i].logit = -INFINITY;

    if (!penalizing(&s->params)) return;
    const int32_t *counts = s->counts;
    for (int32_t i = 0; i < n; i++)
        if (counts[i] != 0) c[i].logit = penalize(&s->params, c[i].logit, counts[i]);
}

/* The most logit_bias entries gather_top takes (it looks each touched
 * token's up in the list). */
#define GATHER_MAX_BIAS 256

/* Steps 1-3 at once, when top-k applies and the tokens bias and penalties
 * change are known (a bounded penalty window): one pass over the raw
 * logits keeps the best k + T + 1 filter-allowed tokens in a heap (T: the
 * changed tokens; the 1: below), mostly one comparison each; the changed
 * tokens' raw entries then make way for their adjusted logits. An unchanged token's
 * logit is its raw one and at most T entries of the heap are changed
 * ones, so the k best of the result are the k best of the whole adjusted
 * vocabulary, as build_candidates, drop_banned and select_top find them.
 * Returns how many candidates cand[0..) holds: the k best, sorted best
 * first (*sorted), or, when no more than k tokens are drawable, all of
 * them in id order, as the full path leaves them; -1 when this does not
 * apply (then nothing changed). */
static int32_t gather_top(vx_sampler *s, const float *logits, int32_t k, bool *sorted) {
    const bool pen = penalizing(&s->params);
    if ((pen && s->ring_cap == 0) || s->n_bias > GATHER_MAX_BIAS) return -1;
    int32_t T = 0;
    for (int32_t j = 0; j < s->n_bias; j++) {
        const vx_token t = s->bias[j].token;
        if (!s->mark[t]) s->mark[t] = 1, s->touched[T++] = t;
    }
    for (int32_t i = 0; pen && i < s->ring_len; i++) {
        const vx_token t = s->ring[i];
        if (!s->mark[t]) s->mark[t] = 1, s->touched[T++] = t;
    }
    /* one more than k + T: a heap that fills then holds more than k
     * untouched tokens, so more than k are drawable (int64: top_k may be
     * near INT32_MAX) */
    if ((int64_t)k + T + 1 > s->n_vocab / 4) {
        for (int32_t j = 0; j < T; j++) s->mark[s->touched[j]] = 0;
        return -1;
    }
    const int32_t K = k + T + 1;
    vx_cand *h = s->cand;
    int32_t hn = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        const float x = logits[i];
        if (hn == K && !(x > h[0].logit)) continue; /* ids rise: a tie with the worst kept loses */
        const vx_cand v = {i, sanitize(x), 0.0f};
        if (v.logit == -INFINITY || (s->filter && !s->filter(s->filter_ctx, i))) continue;
        if (hn < K) {
            h[hn++] = v;
            if (hn == K)
                for (int32_t j = K / 2 - 1; j >= 0; j--) heap_sift_down(h, K, j);
        } else if (cand_better(&v, &h[0])) {
            h[0] = v;
            heap_sift_down(h, K, 0);
        }
    }
    int32_t n = 0;
    for (int32_t i = 0; i < hn; i++)
        if (!s->mark[h[i].id]) h[n++] = h[i];
    for (int32_t j = 0; j < T; j++) {
        const vx_token t = s->touched[j];
        s->mark[t] = 0;
        float l = sanitize(logits[t]);
        for (int32_t b = 0; b < s->n_bias; b++) /* in order, as build_candidates adds them */
            if (s->bias[b].token == t) l = sanitize(l + s->bias[b].bias);
        if (l == -INFINITY || (s->filter && !s->filter(s->filter_ctx, t))) continue;
        if (pen && s->counts[t] != 0) l = penalize(&s->params, l, s->counts[t]);
        if (l != -INFINITY) h[n++] = (vx_cand){t, l, 0.0f};
    }
    if (n > k) { /* more drawable tokens than k (the heap was full, or touched ones filled it up) */
        select_top(h, n, k);
        *sorted = true;
        return k;
    }
    /* all the drawable tokens: id order (an insertion sort of at most k) */
    for (int32_t i = 1; i < n; i++) {
        const vx_cand v = h[i];
        int32_t j = i;
        for (; j > 0 && h[j - 1].id > v.id; j--) h[j] = h[j - 1];
        h[j] = v;
    }
    *sorted = false;
    return n;
}

/* Drops -inf candidates (banned, NaN, or pushed there by penalties) so that
 * every later step sees only drawable tokens. Returns the new count. */
static int32_t drop_banned(vx_cand *c, int32_t n) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit != -INFINITY) c[m++] = c[i];
    return m;
}

/* Step 4 (top-p) needs the candidates in order until the cumulative mass
 * reaches top_p. Sorting the vocabulary costs tens of milliseconds, so the
 * unsorted case is bucketed instead: logits are binned by distance below the
 * max (monotone, so a bin holds a contiguous run of the sorted order), the
 * bin where the mass crosses the target is found from per-bin sums, and only
 * that bin is sorted. Bins span at most TOP_P_RANGE logits; anything lower
 * (relative weight < e^-32) shares the last bin. */
#define TOP_P_BINS 512
#define TOP_P_RANGE 32.0f

static int32_t top_p_bin(float logit, float max, float scale) {
    float d = (max - logit) * scale;
    return d < (float)(TOP_P_BINS - 1) ? (int32_t)d : TOP_P_BINS - 1;
}

/* Returns the number of survivors, moved to c[0..result) (not necessarily
 * in order). sorted: c[0..n) is already sorted best first (after top-k). */
static int32_t apply_top_p(vx_cand *c, int32_t n, float top_p, bool sorted) {
    if (n <= 1) return n;
    if (sorted) {
        float max = c[0].logit;
        double total = 0.0;
        for (int32_t i = 0; i < n; i++) total += (c[i].p = weight(c[i].logit, max));
        double target = (double)top_p * total, cum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= target) return i + 1;
        }
        return n; /* rounding left the sum just short of the target */
    }

    float max = c[0].logit, min = c[0].logit;
    for (int32_t i = 1; i < n; i++) {
        if (c[i].logit > max) max = c[i].logit;
        if (c[i].logit < min) min = c[i].logit;
    }
    float range = VX_MIN(max - min, TOP_P_RANGE);
    float scale = range > 0.0f ? (float)(TOP_P_BINS - 1) / range : 0.0f;
    if (!isfinite(scale)) scale = 0.0f; /* range denormal: one bin */

    double mass[TOP_P_BINS] = {0};
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) {
        float w = weight(c[i].logit, max);
        c[i].p = w;
        mass[top_p_bin(c[i].logit, max, scale)] += w;
        total += w;
    }
    double target = (double)top_p * total, before = 0.0;
    int32_t cross = 0;
    while (cross < TOP_P_BINS && before + mass[cross] < target) before += mass[cross++];
    if (cross == TOP_P_BINS) return n; /* rounding: keep everything */

    /* Bins above the crossing one go to the front, then the crossing bin. */
    int32_t head = 0;
    for (int32_t i = 0; i < n; i++) {
        if (top_p_bin(c[i].logit, max, scale) < cross) {
            vx_cand t = c[head];
            c[head++] = c[i];
            c[i] = t;
        }
    }
    int32_t end = head;
    for (int32_t i = head; i < n; i++) {
        if (top_p_bin(c[i].logit, max, scale) == cross) {
            vx_cand t = c[end];
            c[end++] = c[i];
            c[i] = t;
        }
    }
    select_top(c + head, end - head, end - head);
    double cum = before;
    for (int32_t i = head; i < end; i++) {
        cum += c[i].p;
        if (cum >= target) return i + 1;
    }
    return end;
}

/* Step 5: keeps p >= min_p * p_max, i.e. logit - max >= log(min_p). The best
 * token always stays (min_p > 1 would otherwise empty the set). */
static int32_t apply_min_p(vx_cand *c, int32_t n, float min_p) {
    if (n <= 1) return n;
    int32_t best = find_best(c, n);
    float max = c[best].logit;
    double lmin = log((double)min_p);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (i == best || (double)c[i].logit - (double)max >= lmin) c[m++] = c[i];
    return m;
}

/* Final distribution over c[0..n): shifts logits so the best is 0 (after
 * dividing by temp), sets p to the unnormalized weight exp(shifted) and
 * records the normalizer; returns sum of the weights. max is the largest
 * logit of c[0..n). The weights stay unnormalized because the draw can
 * scale its uniform number instead, saving a pass over the vocabulary. */
static double finalize_dist(vx_sampler *s, int32_t n, float temp, float max) {
    vx_cand *c = s->cand;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        /* (l - max) / temp <= 0: no overflow however small temp is, and
         * l - max = -inf (only in greedy's full vocabulary) stays -inf. */
        float z = (c[i].logit - max) / temp;
        float w = expf(z);
        c[i].logit = z;
        c[i].p = w;
        sum += w;
    }
    s->n_dist = n;
    s->dist_raw = false;
    s->dist_lse = log(sum);
    return sum;
}

/* ------------------------------------------------------------ public API */

vx_sampler_params vx_sampler_default_params(void) {
    vx_sampler_params p;
    memset(&p, 0, sizeof p);
    p.seed = UINT64_MAX;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.penalty_last_n = 64;
    p.logit_bias = NULL;
    p.n_logit_bias = 0;
    return p;
}

static bool params_valid(const vx_sampler_params *p, int32_t n_vocab) {
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p)) return false;
    /* +inf would turn (l - max) / temp into -inf / inf = NaN. */
    if (p->temperature == INFINITY) return false;
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty)) return false;
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty)) return false;
    if (p->penalty_last_n < -1) return false;
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias)) return false;
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= n_vocab) return false;
        if (isnan(p->logit_bias[i].bias)) return false;
    }
    return true;
}

vx_status vx_sampler_init(const vx_sampler_params *params, int32_t n_vocab, vx_sampler **out) {
    if (!out) return VX_EINVAL;
    *out = NULL;
    if (!params || n_vocab <= 0 || !params_valid(params, n_vocab)) return VX_EINVAL;

    vx_sampler *s = calloc(1, sizeof *s);
    if (!s) return VX_ENOMEM;
    s->params = *params;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->mark = calloc((size_t)n_vocab, 1);
    s->touched = malloc(((size_t)VX_MAX(params->n_logit_bias, 0) + (size_t)VX_MAX(params->penalty_last_n, 0) + 1) *
                        sizeof *s->touched);
    if (params->n_logit_bias > 0) {
        s->bias = malloc((size_t)params->n_logit_bias * sizeof *s->bias);
        if (s->bias) {
            memcpy(s->bias, params->logit_bias, (size_t)params->n_logit_bias * sizeof *s->bias);
            s->n_bias = params->n_logit_bias;
        }
    }
    if (params->penalty_last_n > 0) {
        s->ring = malloc((size_t)params->penalty_last_n * sizeof *s->ring);
        s->ring_cap = params->penalty_last_n;
    }
    if (!s->cand || !s->counts || !s->mark || !s->touched || (params->n_logit_bias > 0 && !s->bias) ||
        (params->penalty_last_n > 0 && !s->ring)) {
        vx_sampler_free(s);
        return VX_ENOMEM;
    }
    s->params.logit_bias = s->bias; /* never keep the caller's pointer */
    rng_seed(s);
    *out = s;
    return VX_OK;
}

void vx_sampler_free(vx_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->counts);
    free(s->bias);
    free(s->ring);
    free(s->mark);
    free(s->touched);
    free(s);
}

vx_token vx_sampler_sample(vx_sampler *s, const float *logits) {
    if (!s) return -1;
    s->n_dist = 0;
    if (!logits) return -1;
    vx_cand *c = s->cand;
    const vx_sampler_params *p = &s->params;

    if (!(p->temperature > 0.0f)) {
        build_candidates(s, logits);
        /* Greedy. The reported distribution is the full temperature-1
         * softmax of the biased/penalized logits, so logprobs stay
         * meaningful (a one-hot distribution would say nothing). */
        int32_t best = 0; /* id order + strict '>': ties go to the lowest id */
        for (int32_t i = 1; i < s->n_vocab; i++)
            if (c[i].logit > c[best].logit) best = i;
        float max = c[best].logit;
        if (max == -INFINITY) return -1; /* everything banned */
        s->n_dist = s->n_vocab, s->dist_raw = true, s->dist_max = max, s->dist_lse = NAN;
        return best;
    }

    /* top-k keeps the k best, sorted (all of them, in id order, when
     * there are no more: a sort of the whole vocabulary would cost more
     * than the draw) */
    bool sorted = false;
    int32_t n = p->top_k > 0 ? gather_top(s, logits, p->top_k, &sorted) : -1;
    if (n < 0) {
        build_candidates(s, logits);
        n = drop_banned(c, s->n_vocab);
        if (p->top_k > 0 && p->top_k < n) {
            select_top(c, n, p->top_k);
            n = p->top_k;
            sorted = true;
        }
    }
    if (n == 0) return -1;
    if (p->top_p < 1.0f) n = apply_top_p(c, n, p->top_p, sorted);
    if (p->min_p > 0.0f) n = apply_min_p(c, n, p->min_p);
    double total = finalize_dist(s, n, p->temperature, max_logit(c, n));

    /* Inverse CDF over the unnormalized weights. If rounding leaves u beyond
     * the running sum, take the last candidate with nonzero weight (the best
     * one always has weight 1). */
    double u = rng_uniform(s->rng) * total;
    double cum = 0.0;
    int32_t pick = -1;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].p <= 0.0f) continue;
        pick = i;
        cum += (double)c[i].p;
        if (u < cum) break;
    }
    VX_ASSERT(pick >= 0);
    return c[pick].id;
}

void vx_sampler_set_filter(vx_sampler *s, vx_token_filter filter, void *ctx) {
    if (!s) return;
    s->filter = filter;
    s->filter_ctx = ctx;
}

bool vx_sampler_has_filter(const vx_sampler *s) { return s && s->filter; }

void vx_sampler_accept(vx_sampler *s, vx_token token) {
    if (!s || token < 0 || token >= s->n_vocab) return;
    if (s->params.penalty_last_n == 0) return;
    if (s->ring_cap > 0) {
        if (s->ring_len == s->ring_cap) {
            s->counts[s->ring[s->ring_head]]--;
        } else {
            s->ring_len++;
        }
        s->ring[s->ring_head] = token;
        s->ring_head = (s->ring_head + 1) % s->ring_cap;
    }
    if (s->counts[token] < INT32_MAX) s->counts[token]++; /* unbounded window may saturate */
}

void vx_sampler_reset(vx_sampler *s) {
    if (!s) return;
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    s->ring_len = 0;
    s->ring_head = 0;
    s->n_dist = 0;
    rng_seed(s);
}

/* Candidate i's log-probability in the last distribution. */
static double cand_logprob(const vx_sampler *s, int32_t i) {
    if (!s->dist_raw) return (double)s->cand[i].logit - s->dist_lse;
    if (isnan(s->dist_lse)) { /* greedy's, first asked: the temperature-1 softmax's normalizer, kept */
        double sum = 0.0;
        for (int32_t k = 0; k < s->n_dist; k++) sum += expf(s->cand[k].logit - s->dist_max);
        ((vx_sampler *)s)->dist_lse = log(sum); /* a cache: the sampler is the caller's, never const */
    }
    return (double)(s->cand[i].logit - s->dist_max) - s->dist_lse;
}

float vx_sampler_last_logprob(const vx_sampler *s, vx_token t) {
    if (!s || s->n_dist == 0 || t < 0 || t >= s->n_vocab) return NAN;
    /* Greedy (and unfiltered sampling) leave the candidates in id order. */
    int32_t at = -1;
    if (t < s->n_dist && s->cand[t].id == t) {
        at = t;
    } else {
        for (int32_t i = 0; i < s->n_dist && at < 0; i++)
            if (s->cand[i].id == t) at = i;
    }
    return at < 0 ? -INFINITY : (float)cand_logprob(s, at);
}

/* Inserts (id, lp) into the n-long best list ids/lps holding *m entries,
 * most likely first, ties to the lower id. */
static void top_insert(vx_token id, float lp, int32_t n, vx_token *ids, float *lps, int32_t *m) {
    /* most candidates fail the first comparison, against the n-th */
    if (*m == n && !(lp > lps[n - 1] || (lp == lps[n - 1] && id < ids[n - 1]))) return;
    int32_t j = *m < n ? (*m)++ : n - 1;
    for (; j > 0 && (lp > lps[j - 1] || (lp == lps[j - 1] && id < ids[j - 1])); j--) {
        ids[j] = ids[j - 1];
        lps[j] = lps[j - 1];
    }
    ids[j] = id;
    lps[j] = lp;
}

int32_t vx_sampler_last_top(const vx_sampler *s, int32_t n, vx_token *ids, float *logprobs) {
    if (!s || n <= 0 || !ids || !logprobs || s->n_dist == 0) return 0;
    int32_t m = 0;
    for (int32_t i = 0; i < s->n_dist; i++) {
        const vx_cand *x = &s->cand[i];
        if (x->logit == -INFINITY) continue; /* banned (greedy keeps them) */
        top_insert(x->id, (float)cand_logprob(s, i), n, ids, logprobs, &m);
    }
    return m;
}

int32_t vx_logprobs(const float *logits, int32_t n_vocab, vx_token token, float *token_logprob, int32_t n,
                    vx_token *ids, float *logprobs) {
    if (token_logprob) *token_logprob = NAN;
    if (!logits || n_vocab <= 0 || (n > 0 && (!ids || !logprobs))) return 0;
    float max = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i]; /* NaN compares false */
    if (max == -INFINITY) return 0; /* every logit -inf or NaN */
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > -INFINITY) sum += exp((double)logits[i] - (double)max);
    const double lse = (double)max + log(sum);
    if (token_logprob && token >= 0 && token < n_vocab)
        *token_logprob = logits[token] > -INFINITY ? (float)((double)logits[token] - lse) : -INFINITY;
    int32_t m = 0;
    for (int32_t i = 0; i < n_vocab && n > 0; i++)
        if (logits[i] > -INFINITY) top_insert(i, (float)((double)logits[i] - lse), n, ids, logprobs, &m);
    return m;
}
