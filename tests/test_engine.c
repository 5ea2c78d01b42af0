/*
 * test_engine.c - the serving engine: batching must be invisible (greedy
 * output of a request is identical alone and among many concurrent ones,
 * with chunked prefill, and after preemption in a small KV pool),
 * cancellation, queue limits, prompt limits and stats.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "gguf.h"
#include "testutil.h"

#define NREQ 12
#define NGEN 16

/* Holds the engine thread in its first token event until every request of
 * a run is submitted: the runs that must batch (and preempt) then see all
 * requests queued at once, whatever the timing of the submitting thread. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
} gate;

static gate g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, true};

static void gate_set(bool open) {
    pthread_mutex_lock(&g_gate.mu);
    g_gate.open = open;
    pthread_cond_broadcast(&g_gate.cv);
    pthread_mutex_unlock(&g_gate.mu);
}

typedef struct result {
    pthread_mutex_t mu;
    vx_token toks[64];
    int n;
    int n_cached;
    vx_finish finish;
    int cancel_after; /* return false after this many tokens (0 = never) */
    bool done;
} result;

static bool on_event(const vx_token_event *ev, void *ud) {
    result *r = ud;
    pthread_mutex_lock(&g_gate.mu);
    while (!g_gate.open) pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    pthread_mutex_unlock(&g_gate.mu);
    pthread_mutex_lock(&r->mu);
    if (ev->token >= 0 && r->n < 64) r->toks[r->n++] = ev->token;
    bool go = !(r->cancel_after > 0 && r->n >= r->cancel_after);
    if (ev->finish != VX_FINISH_NONE) {
        r->n_cached = ev->n_cached;
        r->finish = ev->finish;
        r->done = true;
    }
    pthread_mutex_unlock(&r->mu);
    return go;
}

static void wait_all(result *rs, int n) {
    for (int spins = 0; spins < 60000; spins++) {
        int done = 0;
        for (int i = 0; i < n; i++) {
            pthread_mutex_lock(&rs[i].mu);
            done += rs[i].done;
            pthread_mutex_unlock(&rs[i].mu);
        }
        if (done == n) return;
        usleep(1000);
    }
}

/* A token whose text is longer than any fixed piece buffer (StarCoder's
 * vocabulary has 256-byte ones): stories260K with token 302's text made
 * 300 bytes long, forced by logit_bias; its event carries all of it. */
static void test_long_piece(void) {
    char err[VX_ERRMSG_MAX] = "";
    const char *out = "/tmp/vx_test_engine_long_piece.gguf";
    char longtok[301];
    memset(longtok, 'y', 300);
    longtok[300] = 0;
    const bool ok = vx_test_rename_token("models/stories260K/stories260K.gguf", 302, longtok, out);
    CHECK(ok);
    vx_model *m = NULL;
    vx_model_params mp = vx_model_default_params();
    CHECKF(ok && vx_model_load(out, &mp, &m, err, sizeof err) == VX_OK, "%s", err);
    unlink(out);
    if (!m) return;
    CHECK(vx_vocab_max_piece(vx_model_get_vocab(m)) == 300);
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = 64;
    ep.n_threads = 1;
    vx_engine *e = NULL;
    CHECK(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK);
    static vx_test_text tr;
    vx_test_text_init(&tr);
    if (e) {
        const vx_token prompt[1] = {1};
        const vx_logit_bias force = {302, 100.0f};
        vx_request_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = prompt;
        rp.n_prompt = 1;
        rp.max_tokens = 1;
        rp.sampling = vx_sampler_default_params();
        rp.sampling.temperature = 0;
        rp.sampling.logit_bias = &force;
        rp.sampling.n_logit_bias = 1;
        rp.on_event = vx_test_on_text;
        rp.user_data = &tr;
        uint64_t id;
        CHECK(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK);
        vx_test_text_wait(&tr);
        CHECKF(tr.done && tr.len == 300 && !memcmp(tr.text, longtok, 300), "the 300-byte token came out as %d bytes",
               tr.len);
        vx_engine_free(e);
    }
    vx_model_free(m);
}

/* prompt i: BOS then a deterministic run of ids of varying length */
static int make_prompt(int i, vx_token *p) {
    int n = 3 + (i * 7) % 40;
    p[0] = 1;
    for (int j = 1; j < n; j++) p[j] = 3 + (i * 31 + j * 17) % 500;
    return n;
}

/* A greedy request of n prompt tokens that ignores EOS, its events to cb. */
static vx_request_params greedy_params(const vx_token *p, int n, int max_tokens, vx_event_fn cb, void *ud) {
    vx_request_params rp;
    memset(&rp, 0, sizeof rp);
    rp.prompt = p;
    rp.n_prompt = n;
    rp.max_tokens = max_tokens;
    rp.sampling = vx_sampler_default_params();
    rp.sampling.temperature = 0;
    rp.ignore_eos = true;
    rp.on_event = cb;
    rp.user_data = ud;
    return rp;
}

static void submit(vx_engine *e, const vx_request_params *rp) {
    char err[VX_ERRMSG_MAX];
    uint64_t id;
    CHECKF(vx_engine_submit(e, rp, &id, err, sizeof err) == VX_OK, "submit: %s", err);
}

/* Submits a greedy request (its events into r). */
static void submit_greedy(vx_engine *e, const vx_token *p, int n, int max_tokens, result *r) {
    const vx_request_params rp = greedy_params(p, n, max_tokens, on_event, r);
    submit(e, &rp);
}

/* The engine's stats once n requests finished and nothing runs (the final
 * event precedes the stats update). */
static void settle(vx_engine *e, uint64_t n, vx_engine_stats *st) {
    for (int spins = 0; spins < 5000; spins++) {
        vx_engine_get_stats(e, st);
        if (st->requests_finished == n && st->running == 0) break;
        usleep(1000);
    }
}

static void run_all(vx_model *m, vx_engine_params ep, result *rs, bool one_by_one) {
    vx_engine *e = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK, "engine: %s", err);
    if (!e) return;
    for (int i = 0; i < NREQ; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        pthread_mutex_init(&rs[i].mu, NULL);
    }
    if (!one_by_one) gate_set(false);
    for (int i = 0; i < NREQ; i++) {
        vx_token p[64];
        const int n = make_prompt(i, p);
        submit_greedy(e, p, n, NGEN, &rs[i]);
        if (one_by_one) wait_all(&rs[i], 1);
    }
    gate_set(true);
    wait_all(rs, NREQ);
    vx_engine_stats st;
    settle(e, NREQ, &st);
    CHECKF(st.requests_total == NREQ && st.requests_finished == NREQ, "stats: %llu/%llu",
           (unsigned long long)st.requests_total, (unsigned long long)st.requests_finished);
    CHECKF(st.tokens_generated == NREQ * NGEN, "generated %llu, steps %llu, preempt %llu", (unsigned long long)st.tokens_generated, (unsigned long long)st.steps, (unsigned long long)st.preemptions);
    CHECKF(st.queued == 0 && st.running == 0 && st.kv_blocks_used == 0, "queued %d running %d blocks %d", st.queued, st.running, st.kv_blocks_used);
    if (ep.kv_size > 0) CHECKF(st.preemptions > 0, "no preemption with kv_size %d", ep.kv_size);
    vx_engine_free(e);
}

/* Events of a prompt_logprobs request: the prompt tokens' logprobs and
 * top 3 here, the generated tokens and the end in base (on_event's). */
typedef struct lp_result {
    result base;
    vx_token ptok[64], ptop[64][3];
    float plp[64];
    int np, cancel_at; /* cancel_at: return false at that prompt event (0: never) */
    bool order_ok;
} lp_result;

static bool on_lp(const vx_token_event *ev, void *ud) {
    lp_result *r = ud;
    if (!ev->prompt) return on_event(ev, &r->base);
    pthread_mutex_lock(&r->base.mu);
    if (r->base.n > 0) r->order_ok = false; /* prompt events come first */
    if (r->np < 64) {
        r->ptok[r->np] = ev->token;
        r->plp[r->np] = ev->logprob;
        for (int k = 0; k < 3; k++) r->ptop[r->np][k] = k < ev->n_top ? ev->top_ids[k] : -1;
    }
    r->np++;
    const bool go = r->np != r->cancel_at;
    pthread_mutex_unlock(&r->base.mu);
    return go;
}

static void lp_submit(vx_engine *e, const vx_token *p, int n, int max_tokens, lp_result *r, int cancel_at) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->base.mu, NULL);
    r->order_ok = true;
    r->cancel_at = cancel_at;
    vx_request_params rp = greedy_params(p, n, max_tokens, on_lp, r);
    rp.logprobs = true;
    rp.n_logprobs = 3;
    rp.prompt_logprobs = true;
    submit(e, &rp);
}

/* prompt_logprobs: each prompt token's logprob and top 3 given the tokens
 * before it, against one batch of the whole prompt with every position's
 * logits in a plain context (batch-invariant on both sides: the same bits
 * though the engine takes the prompt in chunks of 8), the prompt taken
 * whole although a prefix of it is cached, max_tokens 0 (nothing
 * generated), a generation after them, and a cancel among them. */
static void test_prompt_logprobs(vx_model *m) {
    enum { N = 30 };
    vx_token p[N];
    p[0] = 1;
    for (int j = 1; j < N; j++) p[j] = 3 + (j * 29) % 400;
    char err[VX_ERRMSG_MAX];
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.batch_invariant = true;
    vx_context *c = NULL;
    CHECKF(vx_context_init(m, &cp, &c, err, sizeof err) == VX_OK, "context: %s", err);
    if (!c) return;
    vx_pos pos[N];
    vx_seq_id seq[N];
    int8_t want[N];
    for (int j = 0; j < N; j++) pos[j] = j, seq[j] = 0, want[j] = 1;
    vx_batch b = {N, p, pos, seq, want, NULL};
    CHECK(vx_decode(c, &b) == VX_OK);
    const int32_t nv = vx_context_n_vocab(c);
    float ref_lp[N];
    vx_token ref_top[N][3], greedy = -1;
    for (int j = 1; j < N; j++) {
        float tl[3];
        CHECK(vx_logprobs(vx_get_logits_ith(c, j - 1), nv, p[j], &ref_lp[j], 3, ref_top[j], tl) == 3);
    }
    float glp;
    vx_logprobs(vx_get_logits_ith(c, N - 1), nv, 0, &glp, 1, &greedy, &glp);
    vx_context_free(c);

    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = 64;
    ep.n_parallel = 2;
    ep.n_batch = 8;
    ep.n_threads = 2;
    ep.batch_invariant = true;
    vx_engine *e = NULL;
    CHECKF(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK, "engine: %s", err);
    if (!e) return;
    static result warm;
    memset(&warm, 0, sizeof warm);
    pthread_mutex_init(&warm.mu, NULL);
    submit_greedy(e, p, N - 4, 1, &warm); /* its blocks stay in the prefix cache */
    wait_all(&warm, 1);
    static lp_result r[3];
    const int max_tokens[3] = {0, 3, 4}, cancel_at[3] = {0, 0, 10};
    for (int x = 0; x < 3; x++) {
        lp_submit(e, p, N, max_tokens[x], &r[x], cancel_at[x]);
        wait_all(&r[x].base, 1);
        const int want_np = cancel_at[x] ? cancel_at[x] : N - 1;
        CHECKF(r[x].np == want_np && r[x].order_ok, "prompt logprobs %d: %d prompt events (want %d)", x, r[x].np,
               want_np);
        CHECKF(r[x].base.n_cached == 0, "prompt logprobs %d: %d prompt positions from the prefix cache", x,
               r[x].base.n_cached);
        for (int i = 0; i < r[x].np && i < N - 1; i++) {
            const int j = i + 1;
            CHECKF(r[x].ptok[i] == p[j] && memcmp(&r[x].plp[i], &ref_lp[j], sizeof(float)) == 0 &&
                       r[x].ptop[i][0] == ref_top[j][0] && r[x].ptop[i][1] == ref_top[j][1] &&
                       r[x].ptop[i][2] == ref_top[j][2],
                   "prompt logprobs %d, token %d: %d %.9g top %d, want %d %.9g top %d", x, j, r[x].ptok[i],
                   r[x].plp[i], r[x].ptop[i][0], p[j], ref_lp[j], ref_top[j][0]);
        }
        if (cancel_at[x]) {
            CHECKF(r[x].base.finish == VX_FINISH_CANCELED && r[x].base.n == 0,
                   "prompt logprobs canceled: finish %d, %d generated", r[x].base.finish, r[x].base.n);
        } else {
            CHECKF(r[x].base.finish == VX_FINISH_LENGTH && r[x].base.n == max_tokens[x],
                   "prompt logprobs %d: finish %d, %d generated (want %d)", x, r[x].base.finish, r[x].base.n,
                   max_tokens[x]);
            CHECKF(r[x].base.n == 0 || r[x].base.toks[0] == greedy, "prompt logprobs %d: first token %d, greedy %d", x,
                   r[x].base.toks[0], greedy);
        }
    }
    vx_engine_stats st;
    settle(e, 4, &st);
    CHECKF(st.requests_finished == 4 && st.running == 0, "prompt logprobs: %llu finished",
           (unsigned long long)st.requests_finished);
    vx_engine_free(e);
}

int main(void) {
    char err[VX_ERRMSG_MAX];
    vx_model *m = NULL;
    vx_model_params mp = vx_model_default_params();
    CHECKF(vx_model_load(vx_test_fixture_path("models/llama/llama-Q4_K_M.gguf"), &mp, &m, err, sizeof err) == VX_OK,
           "%s", err);
    if (!m) return vx_test_finish("test_engine");
    test_long_piece();
    test_prompt_logprobs(m);

    /* an idle engine takes n_parallel + queue_max requests (with no queue,
     * as many as it has slots); a KV cache smaller than the context is
     * refused at init (a request of the whole context could never run) */
    {
        vx_engine_params qp = vx_engine_default_params();
        qp.n_ctx = 64;
        qp.n_parallel = 2;
        qp.queue_max = 0;
        qp.n_threads = 1;
        vx_engine *e = NULL;
        CHECK(vx_engine_init(m, &qp, &e, err, sizeof err) == VX_OK);
        static result qr[3];
        vx_status st[3] = {VX_OK, VX_OK, VX_OK};
        uint64_t ids[3] = {0, 0, 0};
        vx_token p[64];
        for (int i = 0; e && i < 3; i++) {
            memset(&qr[i], 0, sizeof qr[i]);
            pthread_mutex_init(&qr[i].mu, NULL);
            vx_request_params rp;
            memset(&rp, 0, sizeof rp);
            rp.prompt = p;
            rp.n_prompt = make_prompt(i, p);
            rp.max_tokens = 40;
            rp.sampling = vx_sampler_default_params();
            rp.ignore_eos = true;
            rp.on_event = on_event;
            rp.user_data = &qr[i];
            st[i] = vx_engine_submit(e, &rp, &ids[i], err, sizeof err);
        }
        CHECKF(!e || (st[0] == VX_OK && st[1] == VX_OK && st[2] == VX_EFULL), "queue 0: %d %d %d", st[0], st[1], st[2]);
        for (int i = 0; e && i < 2; i++) vx_engine_cancel(e, ids[i]);
        if (e) wait_all(qr, 2);
        vx_engine_free(e);
        qp.kv_size = 48;
        e = NULL;
        CHECK(vx_engine_init(m, &qp, &e, err, sizeof err) == VX_EINVAL && e == NULL && strstr(err, "smaller than the context"));
        vx_engine_free(e);
    }

    /* the default pool holds every slot's whole context in whole blocks:
     * with a context of 40 positions (3 blocks of 16) and 4 slots full at
     * once, 12 blocks, never a preemption (n_ctx x n_parallel positions
     * would make 10) */
    {
        vx_engine_params fp = vx_engine_default_params();
        fp.n_ctx = 40;
        fp.n_parallel = 4;
        fp.n_threads = 1;
        vx_engine *e = NULL;
        CHECKF(vx_engine_init(m, &fp, &e, err, sizeof err) == VX_OK, "engine: %s", err);
        static result fr[4];
        vx_token p[64];
        gate_set(false);
        for (int i = 0; e && i < 4; i++) {
            memset(&fr[i], 0, sizeof fr[i]);
            pthread_mutex_init(&fr[i].mu, NULL);
            p[0] = 1;
            for (int j = 1; j < 20; j++) p[j] = 3 + (i * 13 + j * 7) % 500;
            submit_greedy(e, p, 20, 20, &fr[i]); /* 20 + 20: the whole context */
        }
        gate_set(true);
        if (e) {
            wait_all(fr, 4);
            vx_engine_stats st;
            settle(e, 4, &st);
            CHECKF(st.requests_finished == 4 && st.tokens_generated == 80, "full slots: %llu finished, %llu tokens",
                   (unsigned long long)st.requests_finished, (unsigned long long)st.tokens_generated);
            CHECKF(st.preemptions == 0, "full slots: %llu preemptions with the default pool",
                   (unsigned long long)st.preemptions);
            /* all four at once: the first prompt, then one step with the
             * other three prompts, then 19 decode steps (a slot kept
             * waiting for blocks would take ~20 more) */
            CHECKF(st.steps <= 24, "full slots: %llu steps, so not all four slots ran at once",
                   (unsigned long long)st.steps);
        }
        vx_engine_free(e);
    }

    static result alone[NREQ], together[NREQ], chunked[NREQ], preempted[NREQ];
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = 128;
    ep.n_threads = 2;
    ep.n_parallel = 1;
    /* the same bits whatever the batch: integer kernels only (on AMX
     * machines the default runs prompts of 32+ tokens through bf16 tiles) */
    ep.batch_invariant = true;
    run_all(m, ep, alone, true);
    ep.n_parallel = 8;
    run_all(m, ep, together, false);
    ep.n_batch = 7; /* prompts are fed in chunks of a few tokens */
    run_all(m, ep, chunked, false);
    ep.n_batch = 512;
    ep.kv_size = 160; /* 10 blocks for 8 sequences of up to ~56 positions: preemption */
    run_all(m, ep, preempted, false);
    for (int i = 0; i < NREQ; i++) {
        CHECKF(alone[i].n == NGEN && alone[i].finish == VX_FINISH_LENGTH, "req %d: %d tokens, finish %d", i,
               alone[i].n, alone[i].finish);
        CHECKF(memcmp(alone[i].toks, together[i].toks, sizeof(vx_token) * NGEN) == 0,
               "req %d differs when batched", i);
        CHECKF(memcmp(alone[i].toks, chunked[i].toks, sizeof(vx_token) * NGEN) == 0,
               "req %d differs with chunked prefill", i);
        CHECKF(memcmp(alone[i].toks, preempted[i].toks, sizeof(vx_token) * NGEN) == 0,
               "req %d differs after preemption", i);
    }

    /* prefix cache: a prompt sharing 32 tokens (2 blocks) with an earlier one
     * reuses them and still produces what a cold engine produces */
    {
        vx_token a[48], b[45];
        for (int i = 0; i < 48; i++) a[i] = i == 0 ? 1 : 3 + (i * 13) % 400;
        memcpy(b, a, 32 * sizeof *b);
        for (int i = 32; i < 45; i++) b[i] = 7 + (i * 29) % 300;
        static result warm[3], cold[1];
        for (int pass = 0; pass < 2; pass++) {
            vx_engine_params pp = vx_engine_default_params();
            pp.n_ctx = 128;
            pp.n_threads = 2;
            pp.n_parallel = 2;
            pp.batch_invariant = true;
            vx_engine *pe = NULL;
            CHECK(vx_engine_init(m, &pp, &pe, err, sizeof err) == VX_OK);
            if (!pe) break;
            /* pass 0: a, then b, then b again (warm); pass 1: b alone (cold) */
            const vx_token *ps[3] = {a, b, b};
            const int ns[3] = {48, 45, 45};
            const int nreq = pass == 0 ? 3 : 1;
            result *rs = pass == 0 ? warm : cold;
            for (int i = 0; i < nreq; i++) {
                memset(&rs[i], 0, sizeof rs[i]);
                pthread_mutex_init(&rs[i].mu, NULL);
                vx_request_params rp;
                memset(&rp, 0, sizeof rp);
                rp.prompt = pass == 0 ? ps[i] : b;
                rp.n_prompt = pass == 0 ? ns[i] : 45;
                rp.max_tokens = NGEN;
                rp.sampling = vx_sampler_default_params();
                rp.sampling.temperature = 0;
                rp.ignore_eos = true;
                rp.on_event = on_event;
                rp.user_data = &rs[i];
                uint64_t id;
                CHECK(vx_engine_submit(pe, &rp, &id, err, sizeof err) == VX_OK);
                wait_all(&rs[i], 1);
            }
            if (pass == 0) {
                vx_engine_stats st;
                vx_engine_get_stats(pe, &st);
                CHECKF(st.prefix_hits >= 2 + 2, "prefix hits %llu", (unsigned long long)st.prefix_hits);
            }
            vx_engine_free(pe);
        }
        CHECKF(warm[0].n_cached == 0, "first request reused %d", warm[0].n_cached);
        CHECKF(warm[1].n_cached == 32, "shared system prefix: %d cached, expected 32", warm[1].n_cached);
        CHECKF(warm[2].n_cached == 32, "repeat: %d cached, expected 32 (44 usable, block-aligned)", warm[2].n_cached);
        CHECK(cold[0].n_cached == 0);
        CHECKF(memcmp(warm[1].toks, cold[0].toks, sizeof(vx_token) * NGEN) == 0 &&
                   memcmp(warm[2].toks, cold[0].toks, sizeof(vx_token) * NGEN) == 0,
               "warm prefix cache changes the output");
    }

    /* copy-on-write: fork a sequence mid-block, extend both differently, and
     * compare with fresh contexts evaluating each whole sequence */
    {
        vx_context_params cp = vx_context_default_params();
        cp.n_ctx = 64;
        cp.n_seq_max = 2;
        cp.n_batch = 64;
        cp.n_threads = 1;
        cp.kv_type = VX_KV_F32;
        vx_context *c = NULL, *f = NULL;
        CHECK(vx_context_init(m, &cp, &c, err, sizeof err) == VX_OK);
        CHECK(vx_context_init(m, &cp, &f, err, sizeof err) == VX_OK);
        vx_token base[24], ext[2][4] = {{11, 12, 13, 14}, {21, 22, 23, 24}};
        vx_pos pos[28];
        vx_seq_id s0[28] = {0}, s1[28];
        for (int i = 0; i < 28; i++) { pos[i] = i; s1[i] = 1; }
        for (int i = 0; i < 24; i++) base[i] = i == 0 ? 1 : 5 + i * 9;
        vx_batch bb = {20, base, pos, s0, NULL, NULL}; /* 20 = one full block + 4 */
        CHECK(c && vx_decode(c, &bb) == VX_OK);
        CHECK(c && vx_kv_seq_fork(c, 0, 1) == VX_OK);
        float got[2][512];
        for (int k = 0; c && k < 2; k++) {
            vx_batch eb = {4, ext[k], pos + 20, k ? s1 : s0, NULL, NULL};
            CHECK(vx_decode(c, &eb) == VX_OK);
            memcpy(got[k], vx_get_logits_ith(c, 3), sizeof got[k]);
        }
        for (int k = 0; f && k < 2; k++) {
            vx_token full[24];
            memcpy(full, base, 20 * sizeof *full);
            memcpy(full + 20, ext[k], 4 * sizeof *full);
            vx_kv_seq_rm(f, 0, 0, -1);
            vx_batch fb = {24, full, pos, s0, NULL, NULL};
            CHECK(vx_decode(f, &fb) == VX_OK);
            CHECKF(memcmp(vx_get_logits_ith(f, 23), got[k], sizeof got[k]) == 0,
                   "forked sequence %d differs from a fresh evaluation", k);
        }
        int32_t used = 0;
        if (c) vx_kv_usage(c, NULL, &used, NULL, NULL);
        CHECKF(used == 3, "fork shares the full block: %d blocks used, expected 3", used);
        vx_context_free(c);
        vx_context_free(f);
    }

    /* the profile (vx_context_perf): the steps add up to about the time in
     * vx_decode, a prompt and a single token (the per-thread "solo" path)
     * both fill the steps they run, and timing changes no result */
    {
        vx_context_params cp = vx_context_default_params();
        cp.n_ctx = 64;
        cp.n_batch = 64;
        cp.n_threads = 2;
        vx_context *c[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            cp.profile = k == 1;
            CHECK(vx_context_init(m, &cp, &c[k], err, sizeof err) == VX_OK);
        }
        vx_token toks[21];
        vx_pos pos[21];
        vx_seq_id seq[21] = {0};
        for (int i = 0; i < 21; i++) toks[i] = i == 0 ? 1 : 7 + i * 11, pos[i] = i;
        const float *lg[2][2] = {{NULL, NULL}, {NULL, NULL}};
        vx_perf pf[2][2];
        memset(pf, 0, sizeof pf);
        for (int k = 0; k < 2 && c[0] && c[1]; k++) {
            vx_batch pb = {20, toks, pos, seq, NULL, NULL}, tb = {1, toks + 20, pos + 20, seq, NULL, NULL};
            CHECK(vx_decode(c[k], &pb) == VX_OK);
            vx_context_perf(c[k], &pf[k][0]);
            lg[k][0] = vx_get_logits_ith(c[k], 19);
            static float keep[2][512];
            if (lg[k][0]) memcpy(keep[k], lg[k][0], sizeof keep[k]), lg[k][0] = keep[k];
            vx_context_perf_reset(c[k]);
            CHECK(vx_decode(c[k], &tb) == VX_OK);
            vx_context_perf(c[k], &pf[k][1]);
            lg[k][1] = vx_get_logits_ith(c[k], 0);
        }
        if (c[0] && c[1] && lg[0][0] && lg[1][0] && lg[0][1] && lg[1][1]) {
            CHECKF(memcmp(lg[0][0], lg[1][0], 512 * sizeof(float)) == 0 &&
                       memcmp(lg[0][1], lg[1][1], 512 * sizeof(float)) == 0,
                   "profiling changes the logits");
            for (int j = 0; j < 2; j++) {
                const vx_perf *off = &pf[0][j], *on = &pf[1][j];
                uint64_t sum_off = 0, sum = 0;
                for (int s = 0; s < VX_PERF_COUNT; s++) sum_off += off->ns[s], sum += on->ns[s];
                CHECKF(off->n_decode == 1 && on->n_decode == 1 && on->n_tokens == (j ? 1u : 20u) &&
                           off->ns_decode > 0 && sum_off == 0,
                       "counters %d: %llu decodes, %llu tokens, %llu ns unprofiled", j,
                       (unsigned long long)on->n_decode, (unsigned long long)on->n_tokens,
                       (unsigned long long)sum_off);
                CHECKF(sum == on->ns_decode && on->ns[VX_PERF_OTHER] < on->ns_decode,
                       "steps %d: %llu ns of %llu in vx_decode (other %llu)", j, (unsigned long long)sum,
                       (unsigned long long)on->ns_decode, (unsigned long long)on->ns[VX_PERF_OTHER]);
                const vx_perf_step ran[] = {VX_PERF_EMBED, VX_PERF_NORM, VX_PERF_QKV, VX_PERF_ROPE, VX_PERF_ATTN,
                                            VX_PERF_OUT_PROJ, VX_PERF_FFN_UP, VX_PERF_FFN_ACT, VX_PERF_FFN_DOWN,
                                            VX_PERF_LOGITS};
                for (size_t s = 0; s < sizeof ran / sizeof ran[0]; s++)
                    CHECKF(on->ns[ran[s]] > 0, "%s: step %s has no time", j ? "token" : "prompt",
                           vx_perf_step_name(ran[s]));
                CHECKF(on->ns[VX_PERF_MOE] == 0, "dense model with MoE time");
            }
        }
        CHECK(!strcmp(vx_perf_step_name(VX_PERF_ATTN), "attention") && !strcmp(vx_perf_step_name(VX_PERF_COUNT), "?"));
        vx_context_free(c[0]);
        vx_context_free(c[1]);
    }

    /* cancellation, queue limit, prompt limit */
    ep = vx_engine_default_params();
    ep.n_ctx = 64;
    ep.n_parallel = 1;
    ep.queue_max = 2;
    ep.n_threads = 1;
    vx_engine *e = NULL;
    CHECK(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK);
    if (e) {
        static result rs[4];
        vx_token p[64];
        int n = make_prompt(3, p);
        vx_request_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = p;
        rp.n_prompt = n;
        rp.max_tokens = 40;
        rp.sampling = vx_sampler_default_params();
        rp.ignore_eos = true;
        rp.on_event = on_event;
        for (int i = 0; i < 4; i++) {
            memset(&rs[i], 0, sizeof rs[i]);
            pthread_mutex_init(&rs[i].mu, NULL);
        }
        rs[0].cancel_after = 3;
        uint64_t ids[4];
        vx_status st[4];
        /* the gate holds the engine at request 0's first token: it could
         * otherwise finish request 0 (canceled after 3 tokens) between two
         * submits and make room for all four (seen once under load) */
        gate_set(false);
        for (int i = 0; i < 4; i++) {
            rp.user_data = &rs[i];
            st[i] = vx_engine_submit(e, &rp, &ids[i], err, sizeof err);
        }
        gate_set(true);
        /* 1 running + 2 waiting at most: of 4 quick submits at least one is
         * refused (which one depends on when the engine admits the first) */
        int n_ok = 0, n_full = 0;
        for (int i = 0; i < 4; i++) {
            n_ok += st[i] == VX_OK;
            n_full += st[i] == VX_EFULL;
        }
        CHECKF(st[0] == VX_OK && st[1] == VX_OK && n_full >= 1 && n_ok + n_full == 4 && n_ok <= 3,
               "queue: %d %d %d %d", st[0], st[1], st[2], st[3]);
        vx_engine_cancel(e, ids[1]);
        for (int i = 0; i < 4; i++)
            if (st[i] == VX_OK) wait_all(&rs[i], 1);
        CHECKF(rs[0].finish == VX_FINISH_CANCELED && rs[0].n == 3, "cancel from callback: finish %d after %d",
               rs[0].finish, rs[0].n);
        CHECKF(rs[1].finish == VX_FINISH_CANCELED && rs[1].n < 40, "vx_engine_cancel: finish %d", rs[1].finish);
        for (int i = 2; i < 4; i++)
            if (st[i] == VX_OK)
                CHECKF(rs[i].finish == VX_FINISH_LENGTH && rs[i].n == 40, "survivor %d: finish %d, %d tokens", i,
                       rs[i].finish, rs[i].n);
        vx_token big[80];
        for (int i = 0; i < 80; i++) big[i] = 5;
        rp.prompt = big;
        rp.n_prompt = 80;
        CHECK(vx_engine_submit(e, &rp, &ids[0], err, sizeof err) == VX_ERANGE && strstr(err, "80"));
        big[3] = 100000;
        rp.n_prompt = 10;
        CHECK(vx_engine_submit(e, &rp, &ids[0], err, sizeof err) == VX_EINVAL);
        vx_engine_free(e);
    }
    vx_model_free(m);
    return vx_test_finish("test_engine");
}
