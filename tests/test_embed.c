/*
 * test_embed.c - embeddings (vx_batch.embd, vx_embed_texts, the engine's
 * embedding requests) against the model fixtures:
 *  - a token's embedding is the vector its logits come from: the
 *    embeddings of the 48 prompt positions times the file's output matrix
 *    (dequantized, float64 sums) must meet the fixtures' logits bar
 *    against ref64 (normalized RMSE <= max(1.25 x llama.cpp's, 1e-5), as
 *    test_models), and agree with the engine's own logits of the same pass
 *    to the final matmul's rounding;
 *  - asking for embeddings alone, or for some tokens only, gives the same
 *    bits (the rows map to their tokens);
 *  - vx_embed_texts' mean / cls / last over batches of 16 equals the
 *    pooling of the one-batch embeddings (batch-invariant contexts: same
 *    bits), and refuses what it cannot do;
 *  - the engine's embedding requests, mixed with a generation, give
 *    vx_embed_texts' vectors bit for bit;
 *  - vx_embd_normalize's norms, the pooling names.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "gguf.h"
#include "quant.h"
#include "server_embed.h"
#include "testutil.h"
#include "vortex.h"

#define NPOS 48

static double rel_rmse(const double *a, const float *ref, size_t n) {
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = a[i] - (double)ref[i];
        se += d * d;
        sr += (double)ref[i] * ref[i];
    }
    return sqrt(se / sr);
}

static vx_context *new_ctx(vx_model *m, int n_ctx, int n_batch, bool invariant) {
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = 2;
    cp.kv_type = VX_KV_F32;
    cp.batch_invariant = invariant;
    vx_context *c = NULL;
    char err[VX_ERRMSG_MAX];
    if (vx_context_init(m, &cp, &c, err, sizeof err) != VX_OK) fprintf(stderr, "context: %s\n", err);
    return c;
}

/* The output matrix of the file (output.weight, or the tied token_embd)
 * as floats [nv][E]. */
static float *output_matrix(const char *path, int nv, int E) {
    vx_gguf *g = NULL;
    char err[VX_ERRMSG_MAX];
    if (vx_gguf_open(path, &g, err, sizeof err) != VX_OK) return NULL;
    const vx_gguf_tensor *t = vx_gguf_find_tensor(g, "output.weight");
    if (!t) t = vx_gguf_find_tensor(g, "token_embd.weight");
    const vx_type_traits *tr = t ? vx_type_get_traits(t->type) : NULL;
    float *w = NULL;
    if (tr && t->ne[0] == E && t->ne[1] == nv && (w = malloc((size_t)nv * (size_t)E * sizeof *w))) {
        const size_t rs = vx_row_size((vx_type)t->type, E);
        for (int v = 0; v < nv; v++) tr->to_float((const uint8_t *)t->data + (size_t)v * rs, w + (size_t)v * E, E);
    }
    vx_gguf_close(g);
    return w;
}

/* One forward pass over the prompt with the given flags; copies the
 * embeddings [NPOS][E] (rows of tokens that asked; others untouched) and,
 * when logits is given, the logits [NPOS][nv]. */
static bool pass(vx_model *m, bool invariant, const vx_token *ids, const int8_t *want_l, const int8_t *want_e,
                 float *embd, float *logits) {
    vx_context *c = new_ctx(m, NPOS, NPOS, invariant);
    if (!c) return false;
    vx_pos pos[NPOS];
    vx_seq_id seq[NPOS] = {0};
    for (int i = 0; i < NPOS; i++) pos[i] = i;
    const vx_batch b = {NPOS, ids, pos, seq, want_l, want_e};
    bool ok = vx_decode(c, &b) == VX_OK;
    const int E = vx_model_n_embd(m), nv = vx_context_n_vocab(c);
    for (int i = 0; ok && i < NPOS; i++) {
        const float *e = vx_get_embeddings_ith(c, i), *l = vx_get_logits_ith(c, i);
        CHECK((e != NULL) == (want_e && want_e[i]));
        CHECK((l != NULL) == (want_l ? want_l[i] != 0 : !want_e && i == NPOS - 1));
        if (e) memcpy(embd + (size_t)i * E, e, (size_t)E * sizeof *e);
        if (l && logits) memcpy(logits + (size_t)i * nv, l, (size_t)nv * sizeof *l);
    }
    vx_context_free(c);
    return ok;
}

static const cJSON *manifest_entry(const cJSON *man, const char *rel) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(man, "models")) {
        const cJSON *p = cJSON_GetObjectItem(e, "path");
        if (cJSON_IsString(p) && !strcmp(p->valuestring, rel)) return e;
    }
    return NULL;
}

/* One text's embedding (vx_embed_texts of one). */
static vx_status embed1(vx_context *c, const vx_token *t, int32_t n, vx_pooling p, float *out) {
    return vx_embed_texts(c, &t, &n, 1, p, out);
}

/* vx_embed_texts in batches of 16 on a batch-invariant context against
 * the one-batch embeddings of the same (batch-invariant) pass; several
 * texts in three sequences at once against each alone. */
static void check_pooling(vx_model *m, const vx_token *ids, const float *embd) {
    const int E = vx_model_n_embd(m);
    vx_context *c = new_ctx(m, NPOS, 16, true);
    CHECK(c != NULL);
    if (!c) return;
    float *out = malloc((size_t)E * sizeof *out), *want = malloc((size_t)E * sizeof *want);
    const vx_pooling pools[] = {VX_POOLING_MEAN, VX_POOLING_CLS, VX_POOLING_LAST};
    for (int k = 0; k < 3; k++) {
        const vx_pooling p = pools[k];
        CHECK(embed1(c, ids, NPOS, p, out) == VX_OK);
        CHECK(vx_kv_seq_len(c, 0) == 0); /* the sequence is gone again */
        memset(want, 0, (size_t)E * sizeof *want);
        for (int i = 0; i < NPOS; i++)
            for (int d = 0; d < E; d++)
                if (p == VX_POOLING_MEAN) want[d] += embd[(size_t)i * E + d];
        for (int d = 0; d < E; d++) {
            if (p == VX_POOLING_MEAN) want[d] /= (float)NPOS;
            else want[d] = embd[(size_t)(p == VX_POOLING_CLS ? 0 : NPOS - 1) * E + d];
        }
        CHECKF(!memcmp(out, want, (size_t)E * sizeof *out), "pooling %s", vx_pooling_name(p));
    }
    /* a prefix of 5 tokens: its last is position 4 */
    CHECK(embed1(c, ids, 5, VX_POOLING_LAST, out) == VX_OK);
    vx_embd_normalize(out, E, 2);
    double dot = 0, n4 = 0;
    for (int d = 0; d < E; d++) dot += (double)out[d] * embd[4 * (size_t)E + d], n4 += (double)embd[4 * (size_t)E + d] * embd[4 * (size_t)E + d];
    CHECKF(fabs(dot / sqrt(n4) - 1.0) < 1e-6, "cosine %.9f", dot / sqrt(n4));
    /* refused: too long, no pooling, a sequence in use */
    vx_token many[NPOS + 1];
    for (int i = 0; i <= NPOS; i++) many[i] = ids[i % NPOS];
    CHECK(embed1(c, many, NPOS + 1, VX_POOLING_MEAN, out) == VX_ERANGE);
    CHECK(embed1(c, ids, NPOS, VX_POOLING_NONE, out) == VX_EINVAL);
    CHECK(embed1(c, ids, 0, VX_POOLING_MEAN, out) == VX_EINVAL);
    vx_pos p0 = 0;
    vx_seq_id s0 = 0;
    const vx_batch one = {1, ids, &p0, &s0, NULL, NULL};
    CHECK(vx_decode(c, &one) == VX_OK);
    CHECK(embed1(c, ids, NPOS, VX_POOLING_MEAN, out) == VX_EINVAL);
    vx_context_free(c);

    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = NPOS;
    cp.n_batch = 16;
    cp.n_seq_max = 3;
    cp.kv_size = 3 * NPOS;
    cp.n_threads = 2;
    cp.kv_type = VX_KV_F32;
    cp.batch_invariant = true;
    char err[VX_ERRMSG_MAX];
    c = NULL;
    CHECK(vx_context_init(m, &cp, &c, err, sizeof err) == VX_OK);
    enum { NT = 6 };
    const int32_t lens[NT] = {NPOS, 5, 20, 33, 1, 17};
    const vx_token *texts[NT];
    for (int t = 0; t < NT; t++) texts[t] = ids + (t * 7) % 11;
    float *all = malloc((size_t)NT * E * sizeof *all);
    for (int k = 0; c && all && k < 3; k++) {
        const vx_pooling p = pools[k];
        const int32_t l0 = lens[0] - 10; /* the texts start at offsets up to 10 */
        int32_t l[NT];
        memcpy(l, lens, sizeof l);
        l[0] = l0;
        CHECK(vx_embed_texts(c, texts, l, NT, p, all) == VX_OK);
        bool same = true;
        for (int t = 0; t < NT; t++) {
            CHECK(vx_embed_texts(c, &texts[t], &l[t], 1, p, out) == VX_OK);
            same &= !memcmp(out, all + (size_t)t * E, (size_t)E * sizeof *out);
        }
        CHECKF(same, "several texts at once, pooling %s", vx_pooling_name(p));
        for (int s = 0; s < 3; s++) CHECK(vx_kv_seq_len(c, s) == 0);
    }
    free(all);
    free(out);
    free(want);
    vx_context_free(c);
}

/* A batch-invariant engine (kv_size 0: every slot its whole context). */
static vx_engine *new_engine(vx_model *m, int n_ctx, int kv_size, int n_parallel, int n_batch) {
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = n_ctx;
    ep.kv_size = kv_size;
    ep.n_parallel = n_parallel;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    ep.kv_type = VX_KV_F32;
    ep.batch_invariant = true;
    vx_engine *e = NULL;
    char err[VX_ERRMSG_MAX];
    if (vx_engine_init(m, &ep, &e, err, sizeof err) != VX_OK) fprintf(stderr, "engine: %s\n", err);
    return e;
}

typedef struct embd_result {
    pthread_mutex_t mu;
    float v[1024];
    int n, n_cached;
    vx_finish finish;
    bool done;
} embd_result;

static bool on_embd(const vx_token_event *ev, void *ud) {
    embd_result *r = ud;
    pthread_mutex_lock(&r->mu);
    if (ev->embd && ev->n_embd <= 1024) {
        memcpy(r->v, ev->embd, (size_t)ev->n_embd * sizeof *r->v);
        r->n = ev->n_embd;
    }
    if (ev->finish != VX_FINISH_NONE) r->finish = ev->finish, r->done = true, r->n_cached = ev->n_cached;
    pthread_mutex_unlock(&r->mu);
    return true;
}

/* An engine embedding request of prompt[0, n) into r. */
static vx_request_params embed_req(const vx_token *prompt, int32_t n, vx_pooling pooling, embd_result *r) {
    vx_request_params rp;
    memset(&rp, 0, sizeof rp);
    rp.prompt = prompt;
    rp.n_prompt = n;
    rp.embed = true;
    rp.pooling = pooling;
    rp.on_event = on_embd;
    rp.user_data = r;
    return rp;
}

static void check_preempted(vx_model *m, const vx_token *ids, const float *want);

/* Embedding requests of every pooling, and one of the whole context, in
 * a batch-invariant engine beside a generation: vx_embed_texts' bits. */
static void check_engine(vx_model *m, const vx_token *ids) {
    const int E = vx_model_n_embd(m);
    if (E > 1024) return;
    vx_engine *e = new_engine(m, NPOS, 0, 4, 20); /* the 48-token prompts go in chunks */
    char err[VX_ERRMSG_MAX];
    CHECK(e != NULL);
    if (!e) return;
    vx_context *c = new_ctx(m, NPOS, 16, true);
    const vx_pooling pools[] = {VX_POOLING_MEAN, VX_POOLING_CLS, VX_POOLING_LAST};
    embd_result rs[3];
    vx_test_text gen;
    vx_test_text_init(&gen);
    vx_request_params gp;
    memset(&gp, 0, sizeof gp);
    gp.prompt = ids;
    gp.n_prompt = 20;
    gp.max_tokens = 8;
    gp.sampling = vx_sampler_default_params();
    gp.sampling.temperature = 0;
    gp.on_event = vx_test_on_text;
    gp.user_data = &gen;
    CHECK(vx_engine_submit(e, &gp, NULL, err, sizeof err) == VX_OK);
    for (int k = 0; k < 3; k++) {
        memset(&rs[k], 0, sizeof rs[k]);
        pthread_mutex_init(&rs[k].mu, NULL);
        /* the whole context: no room is kept for a generated token */
        const vx_request_params rp = embed_req(ids, NPOS, pools[k], &rs[k]);
        CHECK(vx_engine_submit(e, &rp, NULL, err, sizeof err) == VX_OK);
    }
    float want[1024];
    for (int k = 0; k < 3; k++) {
        vx_test_wait_done(&rs[k].mu, &rs[k].done);
        CHECK(rs[k].finish == VX_FINISH_STOP && rs[k].n == E);
        CHECK(c && embed1(c, ids, NPOS, pools[k], want) == VX_OK);
        CHECKF(!memcmp(rs[k].v, want, (size_t)E * sizeof *want), "engine pooling %s", vx_pooling_name(pools[k]));
    }
    vx_test_text_wait(&gen);
    CHECK(gen.finish == VX_FINISH_LENGTH && gen.n_gen == 8);
    CHECK(c && embed1(c, ids, 16, VX_POOLING_MEAN, want) == VX_OK);
    check_preempted(m, ids, want);
    /* the prompt again, pooled by its last token: its KV blocks come from
     * the prefix cache (all but the last token's), the same bits */
    for (int k = 0; k < 3; k++) {
        embd_result *again = &rs[k];
        pthread_mutex_lock(&again->mu);
        again->done = false, again->n = 0, again->n_cached = 0;
        pthread_mutex_unlock(&again->mu);
        const vx_request_params lp = embed_req(ids, NPOS, pools[k], again);
        CHECK(vx_engine_submit(e, &lp, NULL, err, sizeof err) == VX_OK);
        vx_test_wait_done(&again->mu, &again->done);
        CHECK(c && embed1(c, ids, NPOS, pools[k], want) == VX_OK);
        CHECKF(!memcmp(again->v, want, (size_t)E * sizeof *want), "again, pooling %s", vx_pooling_name(pools[k]));
        /* last reuses the cached prefix; mean and cls compute it all */
        CHECKF(pools[k] == VX_POOLING_LAST ? again->n_cached >= 32 : again->n_cached == 0, "%s: %d cached",
               vx_pooling_name(pools[k]), again->n_cached);
    }
    /* refused at submit */
    vx_request_params rp = embed_req(ids, NPOS, VX_POOLING_NONE, &rs[0]);
    CHECK(vx_engine_submit(e, &rp, NULL, err, sizeof err) == VX_EINVAL);
    vx_token many[NPOS + 1];
    for (int i = 0; i <= NPOS; i++) many[i] = ids[i % NPOS];
    rp.prompt = many;
    rp.n_prompt = NPOS + 1;
    rp.pooling = VX_POOLING_MEAN;
    CHECK(vx_engine_submit(e, &rp, NULL, err, sizeof err) == VX_ERANGE);
    vx_context_free(c);
    vx_engine_free(e);
    for (int k = 0; k < 3; k++) pthread_mutex_destroy(&rs[k].mu);
}

static bool never_gone(void *ud) { return ud != NULL; }
static bool gone_now(void *ud) { (void)ud; return true; }

static int b64(char c) {
    const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(tab, c) : NULL;
    return p ? (int)(p - tab) : -1;
}

/* Holds the engine thread in a request's events until released. */
typedef struct hold {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool held, released;
} hold;

static bool on_hold(const vx_token_event *ev, void *ud) {
    hold *h = ud;
    (void)ev;
    pthread_mutex_lock(&h->mu);
    h->held = true;
    while (!h->released) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    return true;
}

/* A mean-pooled embedding request preempted halfway (its KV dropped, its
 * sum restarted) and run again gives the bits of one never preempted: two
 * generations outgrow a pool of 5 blocks while it prefills one token a step
 * (n_batch 3), and the newest running request, it, is preempted first. */
static void check_preempted(vx_model *m, const vx_token *ids, const float *want) {
    const int E = vx_model_n_embd(m);
    vx_engine *e = new_engine(m, 80, 80, 3, 3);
    char err[VX_ERRMSG_MAX];
    CHECK(e != NULL);
    if (!e) return;
    /* a first request holds the engine until the others are all queued,
     * so that they are admitted together */
    hold h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
    vx_request_params hp;
    memset(&hp, 0, sizeof hp);
    hp.prompt = ids;
    hp.n_prompt = 1;
    hp.max_tokens = 1;
    hp.sampling = vx_sampler_default_params();
    hp.on_event = on_hold;
    hp.user_data = &h;
    CHECK(vx_engine_submit(e, &hp, NULL, err, sizeof err) == VX_OK);
    vx_test_wait_done(&h.mu, &h.held);
    vx_test_text g[2];
    for (int k = 0; k < 2; k++) {
        vx_test_text_init(&g[k]);
        vx_request_params gp;
        memset(&gp, 0, sizeof gp);
        gp.prompt = ids + 1 + k;
        gp.n_prompt = 15;
        gp.max_tokens = 40;
        gp.ignore_eos = true;
        gp.sampling = vx_sampler_default_params();
        gp.sampling.temperature = 0;
        gp.on_event = vx_test_on_text;
        gp.user_data = &g[k];
        CHECK(vx_engine_submit(e, &gp, NULL, err, sizeof err) == VX_OK);
    }
    embd_result r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    const vx_request_params rp = embed_req(ids, 16, VX_POOLING_MEAN, &r);
    CHECK(vx_engine_submit(e, &rp, NULL, err, sizeof err) == VX_OK);
    pthread_mutex_lock(&h.mu);
    h.released = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    vx_test_wait_done(&r.mu, &r.done);
    for (int k = 0; k < 2; k++) vx_test_text_wait(&g[k]);
    vx_engine_stats st;
    vx_engine_get_stats(e, &st);
    CHECKF(st.preemptions >= 1, "%llu preemptions", (unsigned long long)st.preemptions);
    CHECK(r.finish == VX_FINISH_STOP && r.n == E);
    CHECKF(!memcmp(r.v, want, (size_t)E * sizeof *want), "preempted mean (%llu preemptions)",
           (unsigned long long)st.preemptions);
    CHECK(g[0].n_gen == 40 && g[1].n_gen == 40);
    vx_engine_free(e);
    pthread_mutex_destroy(&r.mu);
}

/* /v1/embeddings' parts: the parser, the windowed run (vx_embed_texts'
 * bits on a batch-invariant engine; a client that left), the response. */
static void check_server_embed(vx_model *m, const vx_token *ids) {
    const vx_vocab *v = vx_model_get_vocab(m);
    const int E = vx_model_n_embd(m);
    vx_oai_embed_request q;
    vx_oai_error err;
    const char *bad[][2] = {
        {"{}", "input"}, {"{\"input\":\"\"}", "input"}, {"{\"input\":[]}", "input"}, {"{\"input\":3}", "input"},
        {"{\"input\":[\"a\",[]]}", "input[1]"}, {"{\"input\":[\"a\",{}]}", "input[1]"},
        {"{\"input\":[[1,99999]]}", "input[0][1]"}, {"{\"input\":\"a\",\"dimensions\":0}", "dimensions"},
        {"{\"input\":\"a\",\"dimensions\":1.5}", "dimensions"}, {"{\"input\":\"a\",\"encoding_format\":1}", "encoding_format"},
        {"{\"input\":\"a\",\"model\":[]}", "model"}, {"{\"input\":\"a\",\"embd_normalize\":-2}", "embd_normalize"},
        {"{\"input\":\"a\",\"user\":1}", "user"}, {"[1]", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bool ok = vx_oai_parse_embeddings(bad[i][0], strlen(bad[i][0]), v, NPOS, E, false, &q, &err);
        CHECKF(!ok && err.status == 400 && !strcmp(err.param, bad[i][1]), "%s: %s", bad[i][0], err.message);
        CHECK(q.inputs == NULL && q.n_inputs == 0); /* freed */
    }
    char big[4 * NPOS + 64];
    snprintf(big, sizeof big, "{\"input\":\"%.*s\"}", 2 * NPOS, "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z ");
    CHECK(!vx_oai_parse_embeddings(big, strlen(big), v, NPOS, E, false, &q, &err) && err.code &&
          !strcmp(err.code, "context_length_exceeded"));
    /* 2049 inputs */
    vx_sbuf many = {0};
    vx_sbuf_adds(&many, "{\"input\":[");
    for (int i = 0; i <= VX_OAI_MAX_INPUTS; i++) vx_sbuf_adds(&many, i ? ",\"a\"" : "\"a\"");
    vx_sbuf_adds(&many, "]}");
    CHECK(!vx_oai_parse_embeddings(many.p, many.len, v, NPOS, E, false, &q, &err) && !strcmp(err.param, "input"));
    vx_sbuf_free(&many);

    /* five inputs: the prompt's prefixes of 48, 8, 20 tokens as ids, a text twice */
    vx_sbuf body = {0};
    vx_sbuf_adds(&body, "{\"model\":\"m\",\"dimensions\":8,\"encoding_format\":\"base64\",\"input\":[");
    const int lens[3] = {NPOS, 8, 20};
    for (int k = 0; k < 3; k++) {
        vx_sbuf_adds(&body, "[");
        for (int i = 0; i < lens[k]; i++) vx_sbuf_addf(&body, "%s%d", i ? "," : "", (int)ids[i]);
        vx_sbuf_adds(&body, "],");
    }
    vx_sbuf_adds(&body, "\"the cat\",\"the cat\"]}");
    CHECKF(vx_oai_parse_embeddings(body.p, body.len, v, NPOS, E, false, &q, &err), "%s", err.message);
    vx_sbuf_free(&body);
    CHECK(q.n_inputs == 5 && q.base64 && q.dimensions == 8 && q.normalize == 2 && q.model && !strcmp(q.model, "m"));
    CHECK(q.n_tokens[0] == NPOS && q.n_tokens[1] == 8 && q.n_tokens[2] == 20 && q.n_tokens[3] == q.n_tokens[4]);
    CHECK(q.n_tokens_total == NPOS + 28 + 2 * q.n_tokens[3]);

    vx_engine *e = new_engine(m, NPOS, 0, 2, 24);
    char msg[VX_ERRMSG_MAX];
    CHECK(e != NULL);
    vx_context *c = new_ctx(m, NPOS, 16, true);
    float *vecs = NULL, *want = malloc((size_t)E * sizeof *want);
    if (e && c && want && q.n_inputs == 5) {
        CHECK(vx_embed_run(e, &q, VX_POOLING_MEAN, 2, E, never_gone, NULL, &vecs, msg, sizeof msg) == VX_OK);
        for (int k = 0; vecs && k < 5; k++) {
            CHECK(embed1(c, q.inputs[k], q.n_tokens[k], VX_POOLING_MEAN, want) == VX_OK);
            CHECKF(!memcmp(vecs + (size_t)k * E, want, (size_t)E * sizeof *want), "input %d", k);
        }
        /* the response: base64 of the first 8 values, normalized */
        float head[8];
        memcpy(head, vecs, sizeof head);
        vx_embd_normalize(head, 8, 2);
        char *json = vx_oai_embeddings_json(&q, "m", vecs, E);
        cJSON *root = json ? cJSON_Parse(json) : NULL;
        const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0);
        const char *s64 = cJSON_GetStringValue(cJSON_GetObjectItem(d0, "embedding"));
        CHECK(s64 && strlen(s64) == 44); /* 32 bytes */
        unsigned char bytes[33] = {0};
        for (int i = 0, o = 0; s64 && i + 3 < 44; i += 4) {
            const int a0 = b64(s64[i]), a1 = b64(s64[i + 1]), a2 = b64(s64[i + 2]), a3 = b64(s64[i + 3]);
            bytes[o++] = (unsigned char)(a0 << 2 | a1 >> 4);
            if (a2 >= 0) bytes[o++] = (unsigned char)(a1 << 4 | a2 >> 2);
            if (a3 >= 0) bytes[o++] = (unsigned char)(a2 << 6 | a3);
        }
        CHECK(!memcmp(bytes, head, sizeof head));
        const cJSON *u = cJSON_GetObjectItem(root, "usage");
        CHECK(cJSON_GetObjectItem(u, "prompt_tokens") &&
              cJSON_GetObjectItem(u, "prompt_tokens")->valuedouble == (double)q.n_tokens_total);
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(root, "model")), "m"));
        cJSON_Delete(root);
        free(json);
        /* llama-server's own format: "content", or a legacy route */
        vx_oai_embed_request ql;
        const char *lb[2] = {"{\"content\":[\"x y\",[1,2]]}", "{\"input\":[\"x y\",[1,2]],\"encoding_format\":\"base64\"}"};
        for (int k = 0; k < 2; k++) {
            CHECK(vx_oai_parse_embeddings(lb[k], strlen(lb[k]), v, NPOS, E, k == 1, &ql, &err) && ql.legacy);
            char *lj = ql.n_inputs == 2 ? vx_oai_embeddings_json(&ql, "m", vecs, E) : NULL;
            cJSON *arr = lj ? cJSON_Parse(lj) : NULL;
            const cJSON *e1 = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "embedding");
            double n2 = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, cJSON_GetArrayItem(e1, 0)) n2 += x->valuedouble * x->valuedouble;
            CHECKF(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2 && cJSON_GetArraySize(e1) == 1 &&
                       cJSON_GetArraySize(cJSON_GetArrayItem(e1, 0)) == E && fabs(n2 - 1) < 1e-5 &&
                       cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "index")->valueint == 1,
                   "legacy: %.200s", lj ? lj : "(null)");
            cJSON_Delete(arr);
            free(lj);
            vx_oai_embed_request_free(&ql);
        }
        free(vecs);
        vecs = NULL;
        /* a client that left: canceled, nothing returned; the engine serves on */
        CHECK(vx_embed_run(e, &q, VX_POOLING_LAST, 2, E, gone_now, NULL, &vecs, msg, sizeof msg) == VX_ECANCELED);
        CHECK(vecs == NULL);
        CHECK(vx_embed_run(e, &q, VX_POOLING_LAST, 5, E, never_gone, NULL, &vecs, msg, sizeof msg) == VX_OK);
        CHECK(embed1(c, q.inputs[1], q.n_tokens[1], VX_POOLING_LAST, want) == VX_OK);
        CHECK(vecs && !memcmp(vecs + (size_t)E, want, (size_t)E * sizeof *want));
        free(vecs);
    }
    free(want);
    vx_context_free(c);
    vx_engine_free(e);
    vx_oai_embed_request_free(&q);
}

static void check_file(const cJSON *man, const char *rel, const vx_token *ids, bool full) {
    const cJSON *ent = manifest_entry(man, rel);
    CHECKF(ent != NULL, "%s not in the manifest", rel);
    if (!ent) return;
    const double lc = cJSON_GetObjectItem(cJSON_GetObjectItem(ent, "llamacpp_vs_ref64"), "rel_rmse")->valuedouble;
    char path[4096];
    snprintf(path, sizeof path, "%s", vx_test_fixture_path(rel)); /* a static buffer, reused below */
    vx_model_params mp = vx_model_default_params();
    vx_model *m = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_model_load(path, &mp, &m, err, sizeof err) == VX_OK, "%s: %s", rel, err);
    if (!m) return;
    CHECK(vx_model_pooling(m) == VX_POOLING_UNSPECIFIED); /* the fixtures have no pooling_type */
    const int E = vx_model_n_embd(m), nv = vx_vocab_n_tokens(vx_model_get_vocab(m));
    float *ref = vx_test_read_f32(cJSON_GetObjectItem(cJSON_GetObjectItem(ent, "refs"), "ref64")->valuestring, (size_t)NPOS * nv);
    float *w = output_matrix(path, nv, E);
    float *embd = calloc((size_t)NPOS * E, sizeof *embd), *embd2 = calloc((size_t)NPOS * E, sizeof *embd2);
    float *logits = malloc((size_t)NPOS * nv * sizeof *logits);
    double *prod = malloc((size_t)NPOS * nv * sizeof *prod);
    int8_t all[NPOS], none[NPOS], some[NPOS];
    for (int i = 0; i < NPOS; i++) all[i] = 1, none[i] = 0, some[i] = i % 3 == 1;
    CHECK(ref && w && embd && embd2 && logits && prod);
    if (!(ref && w && embd && embd2 && logits && prod)) goto done;

    /* embeddings and logits of every position in one pass */
    CHECK(pass(m, false, ids, all, all, embd, logits));
    for (int i = 0; i < NPOS; i++)
        for (int v = 0; v < nv; v++) {
            double s = 0;
            for (int d = 0; d < E; d++) s += (double)embd[(size_t)i * E + d] * w[(size_t)v * E + d];
            prod[(size_t)i * nv + v] = s;
        }
    const double bar = fmax(1.25 * lc, 1e-5), r_ref = rel_rmse(prod, ref, (size_t)NPOS * nv);
    const double r_own = rel_rmse(prod, logits, (size_t)NPOS * nv);
    printf("  %-28s embeddings x output: rel_rmse vs ref64 %.3e (bar %.3e), vs own logits %.3e\n", rel, r_ref, bar,
           r_own);
    CHECKF(r_ref <= bar, "%s: %.3e > %.3e", rel, r_ref, bar);
    /* the logits matmul rounds its activations (8-bit codes for quantized
     * output matrices, bf16 or exact for float ones): far below the 1.4
     * of unrelated vectors */
    CHECKF(r_own <= 1e-2, "%s: %.3e", rel, r_own);

    /* embeddings alone, and of some tokens only: the same bits */
    CHECK(pass(m, false, ids, none, all, embd2, NULL));
    CHECK(!memcmp(embd, embd2, (size_t)NPOS * E * sizeof *embd));
    memset(embd2, 0, (size_t)NPOS * E * sizeof *embd2);
    CHECK(pass(m, false, ids, NULL, some, embd2, NULL));
    bool same = true;
    for (int i = 0; i < NPOS; i++)
        if (some[i]) same &= !memcmp(embd + (size_t)i * E, embd2 + (size_t)i * E, (size_t)E * sizeof *embd);
    CHECK(same);

    if (full) {
        CHECK(pass(m, true, ids, none, all, embd, NULL));
        check_pooling(m, ids, embd);
        check_engine(m, ids);
        check_server_embed(m, ids);
    }
done:
    free(ref);
    free(w);
    free(embd);
    free(embd2);
    free(logits);
    free(prod);
    vx_model_free(m);
}

/* The qwen3 fixture rewritten as an "embedding model": its pooling_type
 * (set by kind: an integer, or a string when str) and add_eos_token. */
static bool write_pooled(const char *out, int64_t pooling, bool str) {
    char err[VX_ERRMSG_MAX];
    vx_gguf *g = NULL;
    if (vx_gguf_open(vx_test_fixture_path("models/qwen3/qwen3-Q8_0.gguf"), &g, err, sizeof err) != VX_OK) return false;
    vx_gguf_writer *w = vx_gguf_writer_init();
    bool ok = w && vx_gguf_copy_kv(w, g) == VX_OK && vx_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", true) == VX_OK &&
              (str ? vx_gguf_set_str(w, "qwen3.pooling_type", "last") : vx_gguf_set_u32(w, "qwen3.pooling_type", (uint32_t)pooling)) ==
                  VX_OK;
    for (int64_t i = 0; ok && i < vx_gguf_n_tensors(g); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        ok = vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, true) == VX_OK;
    }
    ok = ok && vx_gguf_write_file(w, out, err, sizeof err) == VX_OK;
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
    return ok;
}

/* A file's pooling_type is read (mean, cls, last), a value of another
 * type or one not computed here (rank) goes unused without failing the
 * load; with add_eos_token the texts end in EOS, the token pooled. */
static void check_file_pooling(void) {
    const char *out = "/tmp/vx_test_embed_pooled.gguf";
    const struct { int64_t v; bool str; vx_pooling want; } cases[] = {
        {1, false, VX_POOLING_MEAN}, {2, false, VX_POOLING_CLS}, {3, false, VX_POOLING_LAST},
        {4, false, VX_POOLING_UNSPECIFIED}, {0, true, VX_POOLING_UNSPECIFIED}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        CHECK(write_pooled(out, cases[k].v, cases[k].str));
        vx_model_params mp = vx_model_default_params();
        vx_model *m = NULL;
        char err[VX_ERRMSG_MAX];
        CHECKF(vx_model_load(out, &mp, &m, err, sizeof err) == VX_OK, "pooling_type case %zu: %s", k, err);
        if (!m) continue;
        CHECKF(vx_model_pooling(m) == cases[k].want, "pooling_type case %zu: %d", k, (int)vx_model_pooling(m));
        const vx_vocab *v = vx_model_get_vocab(m);
        vx_token t[16];
        const int32_t n = vx_tokenize(v, "the cat", 7, t, 16, true, false);
        CHECK(n >= 3 && vx_vocab_add_eos(v) && t[n - 1] == vx_vocab_eos(v));
        vx_model_free(m);
    }
    unlink(out);
}

static void check_normalize(void) {
    float v[4] = {3, -4, 0, 0}, z[3] = {0, 0, 0};
    vx_embd_normalize(v, 4, 2);
    CHECK(fabsf(v[0] - 0.6f) < 1e-7f && fabsf(v[1] + 0.8f) < 1e-7f);
    float t[3] = {1, -2, 1};
    vx_embd_normalize(t, 3, 1);
    CHECK(fabsf(t[0] - 0.25f) < 1e-7f && fabsf(t[1] + 0.5f) < 1e-7f);
    float a[2] = {0.5f, -2};
    vx_embd_normalize(a, 2, 0);
    CHECK(fabsf(a[1] + 32760.0f) < 1e-2f && fabsf(a[0] - 8190.0f) < 1e-2f);
    float p[2] = {1, 1};
    vx_embd_normalize(p, 2, 3);
    CHECK(fabsf(p[0] - powf(0.5f, 1.0f / 3.0f)) < 1e-6f);
    float big[3] = {1e-3f, -2e-3f, 5e-4f}; /* a p-norm whose powers underflow / overflow without scaling */
    vx_embd_normalize(big, 3, 65536);
    CHECK(fabsf(big[1] + 1.0f) < 1e-4f && fabsf(big[0] - 0.5f) < 1e-4f);
    float u[2] = {7, 9};
    vx_embd_normalize(u, 2, -1);
    CHECK(u[0] == 7 && u[1] == 9);
    vx_embd_normalize(z, 3, 2);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    CHECK(!strcmp(vx_pooling_name(VX_POOLING_LAST), "last") && !vx_pooling_name(VX_POOLING_UNSPECIFIED));
    CHECK(vx_pooling_from_name("mean") == VX_POOLING_MEAN && vx_pooling_from_name("cls") == VX_POOLING_CLS &&
          vx_pooling_from_name("rank") == VX_POOLING_UNSPECIFIED && vx_pooling_from_name(NULL) == VX_POOLING_UNSPECIFIED);
}

int main(void) {
    check_normalize();
    check_file_pooling();
    size_t sz = 0;
    char *mtext = vx_test_read_file(vx_test_fixture_path("models/manifest.json"), &sz);
    cJSON *man = mtext ? cJSON_ParseWithLength(mtext, sz) : NULL;
    CHECK(man != NULL);
    const cJSON *pids = man ? cJSON_GetObjectItem(man, "prompt_ids") : NULL;
    vx_token ids[NPOS];
    CHECK(cJSON_GetArraySize(pids) == NPOS);
    for (int i = 0; i < NPOS && pids; i++) ids[i] = cJSON_GetArrayItem(pids, i)->valueint;
    if (man && cJSON_GetArraySize(pids) == NPOS) {
        /* a separate output matrix (quantized and float), tied ones, q/k norms, fused qkv */
        check_file(man, "models/llama/llama-Q8_0.gguf", ids, true);
        check_file(man, "models/llama/llama-F16.gguf", ids, false);
        check_file(man, "models/llama3/llama3-Q4_K_M.gguf", ids, false);
        check_file(man, "models/qwen3/qwen3-Q8_0.gguf", ids, true);
        check_file(man, "models/phi3/phi3-F16.gguf", ids, false);
    }
    cJSON_Delete(man);
    free(mtext);
    return vx_test_finish("test_embed");
}
