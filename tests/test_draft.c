/*
 * test_draft.c - the serving engine's speculative decoding (draft.h,
 * engine.c): drafts change speed, never output. On batch-invariant
 * engines, every request (greedy; sampled at temperature 0.9 under a
 * seed, with penalties; with logprobs; under a grammar) gets the same
 * tokens, logprobs and finish reasons with n-gram drafts, with a draft
 * model (another quantization of the target, and the target itself), as
 * without speculation; so again in a KV pool small enough to preempt.
 * Drafts are verified (counted) and taken (the target as its own draft
 * takes every greedy one). The n-gram lookup alone, against a plain
 * search. Wrong set-ups are refused at init.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "draft.h"
#include "kv_cache.h"
#include "engine.h"
#include "testutil.h"

enum { NREQ = 10, NGEN = 48 };

typedef struct result {
    pthread_mutex_t mu;
    vx_token toks[NGEN + 8];
    float lps[NGEN + 8];
    int n, n_cached, first_at, done_at; /* g_events when its first token, its end came */
    int cancel_after; /* return false at this many tokens (0: never) */
    vx_finish finish;
    bool done;
} result;

static atomic_int g_events; /* events of every request so far */

/* Holds the engine thread in its first event until every request of a
 * run is submitted, so that each run batches the same way. */
static atomic_bool g_open = true;

static bool on_event(const vx_token_event *ev, void *ud) {
    result *r = ud;
    while (!atomic_load(&g_open)) usleep(100);
    const int at = atomic_fetch_add(&g_events, 1);
    pthread_mutex_lock(&r->mu);
    if (ev->token >= 0 && r->n == 0) r->first_at = at;
    if (ev->token >= 0 && !ev->prompt && r->n < NGEN + 8) {
        r->lps[r->n] = ev->logprob;
        r->toks[r->n++] = ev->token;
    }
    if (ev->finish != VX_FINISH_NONE) {
        r->done_at = at;
        r->n_cached = ev->n_cached;
        r->finish = ev->finish;
        r->done = true;
    }
    const bool go = !(r->cancel_after > 0 && r->n >= r->cancel_after);
    pthread_mutex_unlock(&r->mu);
    return go;
}

/* Prompt i: BOS and a stretch that repeats itself for some (the n-gram
 * lookup finds matches there at once), varied ids for others. */
static int make_prompt(int i, vx_token *p) {
    const int n = 6 + (i * 11) % 30;
    p[0] = 1;
    for (int j = 1; j < n; j++) p[j] = i % 2 ? 3 + (j % (2 + i % 5)) * 37 : 3 + (i * 31 + j * 17) % 500;
    return n;
}

static const char *const GRAMMAR = "root ::= [a-m ]+ \".\"";

/* Request i's kind: 0 greedy, 1 sampled with penalties and a seed, 2
 * greedy with logprobs, 3 sampled under the grammar. */
static vx_request_params params_of(int i, const vx_token *p, int n, result *r) {
    vx_request_params rp;
    memset(&rp, 0, sizeof rp);
    rp.prompt = p;
    rp.n_prompt = n;
    rp.max_tokens = NGEN - (i % 3) * 7;
    rp.sampling = vx_sampler_default_params();
    rp.sampling.temperature = 0;
    rp.ignore_eos = true;
    rp.on_event = on_event;
    rp.user_data = r;
    switch (i % 4) {
    case 1:
        rp.sampling.temperature = 0.9f;
        rp.sampling.seed = 1000 + (uint64_t)i;
        rp.sampling.repeat_penalty = 1.1f;
        rp.sampling.presence_penalty = 0.2f;
        break;
    case 2:
        rp.logprobs = true;
        rp.n_logprobs = 2;
        break;
    case 3:
        rp.sampling.temperature = 0.7f;
        rp.sampling.seed = 77 + (uint64_t)i;
        rp.grammar = GRAMMAR;
        rp.grammar_len = strlen(GRAMMAR);
        rp.ignore_eos = false;
        break;
    }
    return rp;
}

/* All NREQ requests at once on an engine of ep; its stats into st. */
static void run_all(const vx_model *m, vx_engine_params ep, result *rs, vx_engine_stats *st) {
    memset(st, 0, sizeof *st);
    vx_engine *e = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK, "engine: %s", err);
    if (!e) return;
    atomic_store(&g_open, false);
    for (int i = 0; i < NREQ; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        pthread_mutex_init(&rs[i].mu, NULL);
        vx_token p[64];
        const int n = make_prompt(i, p);
        const vx_request_params rp = params_of(i, p, n, &rs[i]);
        uint64_t id;
        CHECKF(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK, "submit: %s", err);
    }
    atomic_store(&g_open, true);
    for (int i = 0; i < NREQ; i++) vx_test_wait_done(&rs[i].mu, &rs[i].done);
    for (int spins = 0; spins < 5000; spins++) {
        vx_engine_get_stats(e, st);
        if (st->requests_finished == NREQ && st->running == 0) break;
        usleep(1000);
    }
    CHECKF(st->kv_blocks_used == 0, "%d KV blocks still in use", st->kv_blocks_used);
    vx_engine_free(e);
}

static void same(const result *want, const result *got, const char *what) {
    for (int i = 0; i < NREQ; i++) {
        const bool toks = got[i].n == want[i].n && !memcmp(got[i].toks, want[i].toks, sizeof(vx_token) * want[i].n);
        bool lps = toks;
        for (int t = 0; lps && t < want[i].n; t++)
            lps = isnan(want[i].lps[t]) ? isnan(got[i].lps[t]) : got[i].lps[t] == want[i].lps[t];
        CHECKF(toks && lps && got[i].finish == want[i].finish,
               "%s: request %d (kind %d): %d tokens (finish %d) where %d (finish %d) without drafts%s", what, i, i % 4,
               got[i].n, got[i].finish, want[i].n, want[i].finish, toks && !lps ? ", logprobs differ" : "");
    }
}

/* run_all on ep, held to want by same(); prints the drafts' counts */
static void run_same(const vx_model *m, vx_engine_params ep, const result *want, result *got, vx_engine_stats *st,
                     const char *what) {
    run_all(m, ep, got, st);
    same(want, got, what);
    printf("%-40s %5llu drafted, %4llu taken, %4llu steps, %llu preemptions\n", what,
           (unsigned long long)st->draft_tokens, (unsigned long long)st->draft_accepted,
           (unsigned long long)st->steps, (unsigned long long)st->preemptions);
}

/* vx_ngram_lookup against a plain search of every earlier occurrence. */
static void test_lookup(void) {
    const vx_token t[] = {5, 6, 7, 8, 5, 6, 9, 5, 6};
    vx_token out[8];
    CHECK(vx_ngram_lookup(t, 9, 2, 4, out) == 4 && out[0] == 9 && out[1] == 5 && out[2] == 6 && out[3] == 9);
    CHECK(vx_ngram_lookup(t, 9, 3, 4, out) == 0);         /* 9 5 6 occurs only at the end */
    CHECK(vx_ngram_lookup(t, 4, 1, 4, out) == 0);         /* 8 did not occur before */
    CHECK(vx_ngram_lookup(t, 2, 2, 4, out) == 0);         /* nothing before the key */
    CHECK(vx_ngram_lookup(t, 9, 0, 4, out) == 0 && vx_ngram_lookup(t, 9, 2, 0, out) == 0);
    const vx_token run[] = {4, 4, 4, 4};                  /* overlapping: a run of one token goes on */
    CHECK(vx_ngram_lookup(run, 4, 3, 5, out) == 5 && out[0] == 4 && out[4] == 4);
    /* random sequences over 3 ids: the draft is what follows the latest
     * earlier occurrence, continued through itself */
    uint64_t st = 12345;
    int bad = 0, found = 0;
    for (int trial = 0; trial < 2000; trial++) {
        vx_token s[40], d[6], want[6];
        const int n = 3 + (int)(vx_test_frand(&st) * 18.0f + 18.0f), key = 1 + trial % 4;
        for (int i = 0; i < n; i++) s[i] = (vx_token)((vx_test_frand(&st) + 1.0f) * 1.5f);
        int at = -1;
        for (int p = n - key - 1; p >= 0 && at < 0; p--)
            if (!memcmp(s + p, s + n - key, (size_t)key * sizeof *s)) at = p;
        const int got = vx_ngram_lookup(s, n, key, 6, d);
        if (at < 0) {
            bad += got != 0;
            continue;
        }
        found++;
        vx_token ext[64];
        memcpy(ext, s, (size_t)n * sizeof *s);
        for (int i = 0; i < 6; i++) ext[n + i] = ext[at + key + i];
        memcpy(want, ext + n, sizeof want);
        bad += got != 6 || memcmp(d, want, sizeof want) != 0;
    }
    CHECKF(bad == 0 && found > 500, "n-gram lookup: %d of 2000 wrong (%d with a match)", bad, found);
}

/* The Q4_0 fixture with token 300's text changed. */
static vx_model *renamed_token_model(void) {
    char err[VX_ERRMSG_MAX] = "";
    const char *out = "/tmp/vx_test_draft_renamed.gguf";
    const bool ok = vx_test_rename_token("models/llama/llama-Q4_0.gguf", 300, "renamed", out);
    vx_model *m = NULL;
    CHECKF(ok && vx_model_load(out, NULL, &m, err, sizeof err) == VX_OK, "%s", err);
    unlink(out);
    return m;
}

/* An engine on m with m as its own draft model (every greedy draft
 * taken), drafting whatever the draft's confidence. */
static vx_engine *self_drafting(vx_model *m, int32_t n_ctx, int32_t kv_size, int32_t n_parallel, int32_t n_batch) {
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = n_ctx;
    ep.kv_size = kv_size;
    ep.n_threads = 2;
    ep.n_parallel = n_parallel;
    ep.n_batch = n_batch;
    ep.draft_model = m;
    ep.draft_p_min = 0;
    vx_engine *e = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK, "%s", err);
    return e;
}

/* Long requests drafting at most every step leave half the batch to a
 * prompt arriving meanwhile: its first token comes long before they end. */
static void test_prefill_room(vx_model *m) {
    vx_engine *e = self_drafting(m, 256, 0, 3, 32);
    char err[VX_ERRMSG_MAX];
    if (!e) return;
    static result rs[3];
    vx_token p[3][128];
    uint64_t id;
    for (int i = 0; i < 3; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        pthread_mutex_init(&rs[i].mu, NULL);
    }
    for (int i = 0; i < 2; i++) {
        const int n = make_prompt(2 * i, p[i]);
        vx_request_params rp = params_of(0, p[i], n, &rs[i]);
        rp.max_tokens = 200;
        CHECK(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK);
    }
    for (int spins = 0; spins < 20000; spins++) { /* until they decode */
        pthread_mutex_lock(&rs[0].mu);
        const int n0 = rs[0].n;
        pthread_mutex_unlock(&rs[0].mu);
        if (n0 >= 4) break;
        usleep(100);
    }
    for (int j = 0; j < 100; j++) p[2][j] = 3 + (j * 13) % 500;
    vx_request_params rp = params_of(0, p[2], 100, &rs[2]);
    rp.max_tokens = 4;
    CHECK(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK);
    for (int i = 0; i < 3; i++) vx_test_wait_done(&rs[i].mu, &rs[i].done);
    /* its first token came while the others had more than half to go */
    const int mid = (rs[0].first_at + rs[0].done_at) / 2;
    CHECKF(rs[2].n == 4 && rs[0].finish == VX_FINISH_LENGTH && rs[1].finish == VX_FINISH_LENGTH && rs[2].first_at < mid,
           "a prompt beside drafting requests: its first token at event %d, the others' from %d to %d", rs[2].first_at,
           rs[0].first_at, rs[0].done_at);
    vx_engine_free(e);
}

/* A prompt's blocks in the prefix cache stay there while another request
 * drafts in a pool with no other free blocks: drafts use free blocks only. */
static void test_prefix_kept(vx_model *m) {
    vx_engine *e = self_drafting(m, 128, 128, 1, 512);
    char err[VX_ERRMSG_MAX];
    if (!e) return;
    /* a: 4 blocks cached at its end; b: 20 + 40 positions in the 4 free
     * blocks (stopped by its callback, its drafts run past them) */
    vx_token a[65], b[20];
    for (int j = 0; j < 65; j++) a[j] = 3 + (j * 7) % 400;
    for (int j = 0; j < 20; j++) b[j] = 5 + (j * 11) % 300;
    static result rs[3];
    const vx_token *ps[3] = {a, b, a};
    const int ns[3] = {65, 20, 65}, gen[3] = {4, 100, 4};
    for (int i = 0; i < 3; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        pthread_mutex_init(&rs[i].mu, NULL);
        rs[i].cancel_after = i == 1 ? 40 : 0;
        vx_request_params rp = params_of(0, ps[i], ns[i], &rs[i]);
        rp.max_tokens = gen[i];
        uint64_t id;
        CHECK(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK);
        vx_test_wait_done(&rs[i].mu, &rs[i].done);
    }
    vx_engine_stats st;
    vx_engine_get_stats(e, &st);
    CHECKF(rs[2].n_cached == 64 && st.draft_tokens > 0, "the prompt again: %d tokens from the prefix cache (64 before "
           "the drafting request), %llu drafted", rs[2].n_cached, (unsigned long long)st.draft_tokens);
    vx_engine_free(e);
}

/* A draft the engine did not verify (no keep) is not built upon: the
 * next proposal is what a fresh drafter proposes. */
static void test_stale_drafts(vx_model *dm) {
    vx_draft_params dp = vx_draft_default_params();
    dp.model = dm;
    dp.n_ctx = 64;
    dp.n_max = 4;
    dp.n_threads = 1;
    vx_drafter *d1 = NULL, *d2 = NULL;
    char err[VX_ERRMSG_MAX];
    const vx_vocab *v = vx_model_get_vocab(dm);
    CHECKF(vx_drafter_init(&dp, v, &d1, err, sizeof err) == VX_OK && vx_drafter_init(&dp, v, &d2, err, sizeof err) == VX_OK,
           "%s", err);
    if (!d1 || !d2) {
        vx_drafter_free(d1);
        vx_drafter_free(d2);
        return;
    }
    vx_token t[32], o1[4], o2[4];
    for (int j = 0; j < 32; j++) t[j] = 3 + (j * 37) % 500;
    vx_draft_job j1 = {0, t, 20, 4, 0, o1, 0};
    vx_drafter_propose(d1, &j1, 1);
    CHECK(j1.n_out == 4);
    /* the sequence went on with other tokens than the draft */
    for (int j = 20; j < 26; j++) t[j] = (o1[0] + 1 + j) % 500;
    j1 = (vx_draft_job){0, t, 26, 4, 0, o1, 0};
    vx_draft_job j2 = {0, t, 26, 4, 0, o2, 0};
    vx_drafter_propose(d1, &j1, 1);
    vx_drafter_propose(d2, &j2, 1);
    CHECKF(j1.n_out == 4 && j2.n_out == 4 && !memcmp(o1, o2, sizeof o1),
           "after an unverified draft: %d %d %d %d, a fresh drafter %d %d %d %d", o1[0], o1[1], o1[2], o1[3], o2[0],
           o2[1], o2[2], o2[3]);
    vx_drafter_free(d1);
    vx_drafter_free(d2);
    /* the draft cache's size: every sequence's whole context, or with a
     * target cache of kv_size positions as many plus a draft per sequence */
    dp.n_seq = 4;
    dp.n_ctx = 1000;
    dp.n_max = 16;
    const int32_t want[3] = {4 * 1008 / VX_KV_BLOCK, (1504 + 4 * 32) / VX_KV_BLOCK, 4 * 1008 / VX_KV_BLOCK};
    const int32_t kv[3] = {0, 1500, 100000};
    for (int i = 0; i < 3; i++) {
        dp.kv_size = kv[i];
        CHECKF(vx_drafter_init(&dp, v, &d1, err, sizeof err) == VX_OK, "%s", err);
        CHECKF(vx_drafter_kv_blocks(d1) == want[i], "kv_size %d: the draft cache has %d blocks, want %d", kv[i],
               vx_drafter_kv_blocks(d1), want[i]);
        vx_drafter_free(d1);
        d1 = NULL;
    }
}

int main(void) {
    char err[VX_ERRMSG_MAX];
    test_lookup();
    vx_model *m = NULL, *q4 = NULL;
    CHECKF(vx_model_load(vx_test_fixture_path("models/llama/llama-Q4_K_M.gguf"), NULL, &m, err, sizeof err) == VX_OK,
           "%s", err);
    CHECKF(vx_model_load(vx_test_fixture_path("models/llama/llama-Q4_0.gguf"), NULL, &q4, err, sizeof err) == VX_OK,
           "%s", err);
    if (!m || !q4) return vx_test_finish("test_draft");

    static result plain[NREQ], got[NREQ];
    vx_engine_stats st;
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = 128;
    ep.n_threads = 2;
    ep.n_parallel = 4;
    ep.batch_invariant = true;
    run_all(m, ep, plain, &st);
    CHECK(st.draft_tokens == 0);
    int n_len = 0;
    for (int i = 0; i < NREQ; i++) n_len += plain[i].finish == VX_FINISH_LENGTH;
    CHECKF(n_len >= NREQ / 2, "only %d requests ran to max_tokens", n_len);

    ep.spec_ngram = 2;
    run_same(m, ep, plain, got, &st, "n-gram drafts");
    CHECK(st.draft_tokens > 0 && st.draft_accepted > 0);

    ep.spec_ngram = 0;
    ep.draft_model = q4;
    ep.draft_p_min = 0;
    ep.draft_max = 3;
    ep.draft_min = 2; /* a rejection does not cap the next draft below 2 (which would end drafting) */
    run_same(m, ep, plain, got, &st, "draft-model drafts of 2-3");
    CHECKF(st.draft_tokens >= st.tokens_generated, "drafts of 2-3: %llu drafted for %llu tokens",
           (unsigned long long)st.draft_tokens, (unsigned long long)st.tokens_generated);

    ep.draft_max = 16;
    ep.draft_min = 0;
    run_same(m, ep, plain, got, &st, "the Q4_0 draft model");
    CHECK(st.draft_tokens > 0 && st.draft_accepted > 0);

    ep.draft_p_min = 0.8f;
    ep.spec_ngram = 3; /* both: the lookup first */
    run_same(m, ep, plain, got, &st, "n-gram then the draft model, p_min 0.8");

    /* the target drafting for itself: every greedy draft is taken */
    {
        static result self[NREQ];
        vx_engine_params sp = ep;
        sp.spec_ngram = 0;
        sp.draft_model = m;
        sp.draft_p_min = 0;
        sp.n_parallel = 1;
        vx_engine *e = NULL;
        CHECKF(vx_engine_init(m, &sp, &e, err, sizeof err) == VX_OK, "%s", err);
        vx_token p[64];
        const int n = make_prompt(0, p);
        memset(&self[0], 0, sizeof self[0]);
        pthread_mutex_init(&self[0].mu, NULL);
        const vx_request_params rp = params_of(0, p, n, &self[0]);
        uint64_t id;
        CHECK(e && vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK);
        vx_test_wait_done(&self[0].mu, &self[0].done);
        for (int spins = 0; e && spins < 5000; spins++) {
            vx_engine_get_stats(e, &st);
            if (st.requests_finished == 1) break;
            usleep(1000);
        }
        CHECKF(self[0].n == plain[0].n && !memcmp(self[0].toks, plain[0].toks, sizeof(vx_token) * plain[0].n),
               "the target as its own draft: other tokens");
        CHECKF(st.draft_tokens > 0 && st.draft_accepted == st.draft_tokens && st.steps < (uint64_t)NGEN / 2,
               "the target as its own draft: %llu of %llu taken in %llu steps", (unsigned long long)st.draft_accepted,
               (unsigned long long)st.draft_tokens, (unsigned long long)st.steps);
        vx_engine_free(e);
    }

    /* a pool of 11 blocks for 4 sequences of up to ~84 positions: drafts
     * never take the blocks others need, preemption still replays exactly */
    ep.kv_size = 176;
    ep.draft_model = q4;
    ep.draft_p_min = 0;
    ep.spec_ngram = 2;
    run_same(m, ep, plain, got, &st, "drafts in a small KV pool");
    CHECK(st.draft_tokens > 0 && st.preemptions > 0);

    test_prefill_room(m);
    test_prefix_kept(m);
    test_stale_drafts(q4);

    /* refused: a draft model of another vocabulary, draft sizes */
    {
        vx_model *other = NULL;
        const char *tiny = "/tmp/vx_test_draft_tiny.gguf";
        CHECK(vx_test_synth("tiny", "F32", tiny));
        CHECKF(vx_model_load(tiny, NULL, &other, err, sizeof err) == VX_OK, "%s", err);
        remove(tiny);
        vx_engine_params bp = vx_engine_default_params();
        bp.n_ctx = 64;
        bp.n_threads = 1;
        bp.draft_model = other;
        vx_engine *e = NULL;
        CHECKF(other && vx_engine_init(m, &bp, &e, err, sizeof err) == VX_EINVAL && !e && strstr(err, "vocabulary"),
               "another vocabulary: %s", err);
        vx_model *renamed = renamed_token_model(); /* 512 tokens too, one of another text */
        bp.draft_model = renamed;
        CHECKF(renamed && vx_engine_init(m, &bp, &e, err, sizeof err) == VX_EINVAL && !e && strstr(err, "token 300 "),
               "a vocabulary of the same size: %s", err);
        vx_engine_free(e);
        e = NULL;
        vx_model_free(renamed);
        bp.draft_model = NULL;
        bp.spec_ngram = 3;
        bp.draft_min = 5;
        bp.draft_max = 4;
        CHECK(vx_engine_init(m, &bp, &e, err, sizeof err) == VX_EINVAL && !e);
        bp.draft_min = 0;
        bp.draft_max = 0;
        CHECK(vx_engine_init(m, &bp, &e, err, sizeof err) == VX_EINVAL && !e);
        vx_model_free(other);
    }
    vx_model_free(q4);
    vx_model_free(m);
    return vx_test_finish("test_draft");
}
