/*
 * test_dist.c - pipeline parallelism over MPI (vx_dist): a model split over
 * a group of processes gives the single process's outputs bit for bit.
 *
 * Run plainly, the test starts itself under mpirun, as a group of 2 and
 * then of 3 processes (every process single-threaded, so that the one
 * process it is compared with runs the same kernels on the same rows).
 * In the group, process 0 runs the checks and the others serve it:
 *  - fixture models of four architectures (Llama, Mixtral-style MoE,
 *    Qwen3, Qwen2): the logits of a batch of three sequences, then decode
 *    steps, a suffix removed and recomputed, a sequence forked, a prefix
 *    reused from the cache, embeddings beside logits; with even shares
 *    and with a 1:3 split;
 *  - the serving engine (continuous batching, prefix cache, preemption
 *    under a small KV cache, n-gram speculation): every request's text;
 *  - errors: a split that leaves a process no layer, a zero share, a
 *    truncated file, a full KV cache (the group goes on after each).
 * Built without MPI: vx_dist_init refuses a launcher's group of several
 * processes, with the reason, and gives NULL outside one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "testutil.h"
#include "vortex.h"

#define NV_MAX 4096

static vx_model *load(const char *rel, vx_dist *d, const float *split, char *err) {
    vx_model_params mp = vx_model_default_params();
    mp.dist = d;
    mp.layer_split = split;
    vx_model *m = NULL;
    const char *p = vx_test_fixture_path(rel);
    if (vx_model_load(p, &mp, &m, err, VX_ERRMSG_MAX) != VX_OK) return NULL;
    return m;
}

static vx_context *context(vx_model *m, uint32_t kv_size) {
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = 256;
    cp.kv_size = kv_size;
    cp.n_batch = 64;
    cp.n_seq_max = 4;
    cp.n_threads = 1;
    vx_context *c = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_context_init(m, &cp, &c, err, sizeof err) == VX_OK, "context: %s", err);
    return c;
}

/* One decode of n tokens: ids t0.., positions from p0, sequence s; logits
 * for every token; embeddings for the last. */
static vx_status step(vx_context *c, int n, vx_token t0, vx_pos p0, vx_seq_id s) {
    vx_token tok[64];
    vx_pos pos[64];
    vx_seq_id sq[64];
    int8_t lg[64], em[64];
    for (int i = 0; i < n; i++) tok[i] = (t0 + 37 * i) % 200 + 1, pos[i] = p0 + i, sq[i] = s, lg[i] = 1, em[i] = i == n - 1;
    const vx_batch b = {n, tok, pos, sq, lg, em};
    return vx_decode(c, &b);
}

/* A batch of three sequences' prompts (5, 9 and 3 tokens). */
static vx_status prompts(vx_context *c) {
    vx_token tok[17];
    vx_pos pos[17];
    vx_seq_id sq[17];
    int8_t lg[17];
    const int len[3] = {5, 9, 3};
    int k = 0;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < len[s]; i++, k++) tok[k] = (s * 13 + i * 7) % 150 + 2, pos[k] = i, sq[k] = s, lg[k] = 1;
    const vx_batch b = {k, tok, pos, sq, lg, NULL};
    return vx_decode(c, &b);
}

/* Whether the logits (and embeddings) of the last decode's n tokens agree. */
static bool same_out(vx_context *a, vx_context *b, int n, const char *what, const char *model) {
    const int V = vx_context_n_vocab(a);
    const int E = vx_model_n_embd(vx_context_get_model(a));
    for (int i = 0; i < n; i++) {
        const float *la = vx_get_logits_ith(a, i), *lb = vx_get_logits_ith(b, i);
        if (!la || !lb || memcmp(la, lb, (size_t)V * sizeof(float)) != 0) {
            int at = -1;
            for (int v = 0; la && lb && v < V && at < 0; v++)
                if (la[v] != lb[v]) at = v;
            CHECKF(false, "%s, %s: token %d's logits differ (at %d: %g vs %g)", model, what, i, at,
                   at >= 0 ? (double)la[at] : 0.0, at >= 0 ? (double)lb[at] : 0.0);
            return false;
        }
        const float *ea = vx_get_embeddings_ith(a, i), *eb = vx_get_embeddings_ith(b, i);
        if ((ea == NULL) != (eb == NULL) ||
            (ea && memcmp(ea, eb, (size_t)E * sizeof(float)))) {
            CHECKF(false, "%s, %s: token %d's embeddings differ", model, what, i);
            return false;
        }
    }
    CHECK(true);
    return true;
}

/* The same calls on a single process's context (a) and the group's (b). */
static void compare_model(vx_dist *d, const char *rel, const float *split) {
    char err[VX_ERRMSG_MAX];
    vx_model *ma = load(rel, NULL, NULL, err);
    CHECKF(ma, "%s: %s", rel, err);
    vx_model *mb = load(rel, d, split, err);
    if (ma && vx_model_n_layer(ma) < vx_dist_size(d)) /* MoE's 2 layers over 3 processes */
        CHECKF(!mb && strstr(err, "cannot be shared by"), "%s: %s", rel, mb ? "loaded" : err);
    else
        CHECKF(mb, "%s in the group: %s", rel, err);
    vx_context *a = ma ? context(ma, 0) : NULL, *b = mb ? context(mb, 0) : NULL;
    if (!a || !b) goto done;
    CHECK(prompts(a) == VX_OK && prompts(b) == VX_OK);
    same_out(a, b, 17, "three prompts", rel);
    /* decode steps of sequence 1, then a batch of 4 to sequence 0 */
    for (int i = 0; i < 3; i++) {
        CHECK(step(a, 1, 40 + i, 9 + i, 1) == VX_OK && step(b, 1, 40 + i, 9 + i, 1) == VX_OK);
        same_out(a, b, 1, "decode", rel);
    }
    CHECK(step(a, 4, 77, 5, 0) == VX_OK && step(b, 4, 77, 5, 0) == VX_OK);
    same_out(a, b, 4, "4 more tokens", rel);
    /* the last 6 positions of sequence 1 removed and recomputed otherwise */
    CHECK(vx_kv_seq_rm(a, 1, 6, -1) == VX_OK && vx_kv_seq_rm(b, 1, 6, -1) == VX_OK);
    CHECK(vx_kv_seq_len(b, 1) == 6);
    CHECK(step(a, 5, 90, 6, 1) == VX_OK && step(b, 5, 90, 6, 1) == VX_OK);
    same_out(a, b, 5, "after a suffix was removed", rel);
    /* sequence 0 forked into 3 (copy-on-write of its partial block) */
    CHECK(vx_kv_seq_rm(a, 2, 0, -1) == VX_OK && vx_kv_seq_rm(b, 2, 0, -1) == VX_OK);
    CHECK(vx_kv_seq_fork(a, 0, 3) == VX_OK && vx_kv_seq_fork(b, 0, 3) == VX_OK);
    CHECK(step(a, 2, 11, 9, 3) == VX_OK && step(b, 2, 11, 9, 3) == VX_OK);
    same_out(a, b, 2, "a forked sequence", rel);
    /* sequence 0's first 16 positions (a full block) reused by sequence 2 */
    CHECK(step(a, 12, 5, 9, 0) == VX_OK && step(b, 12, 5, 9, 0) == VX_OK);
    vx_token pre[21];
    for (int i = 0; i < 5; i++) pre[i] = (i * 7) % 150 + 2;
    for (int i = 0; i < 4; i++) pre[5 + i] = (77 + 37 * i) % 200 + 1;
    for (int i = 0; i < 12; i++) pre[9 + i] = (5 + 37 * i) % 200 + 1;
    const int32_t ra = vx_kv_seq_reuse_prefix(a, 2, pre, 21), rb = vx_kv_seq_reuse_prefix(b, 2, pre, 21);
    CHECKF(ra == 16 && rb == 16, "prefix reuse: %d and %d positions (16 expected)", ra, rb);
    CHECK(step(a, 3, 60, 16, 2) == VX_OK && step(b, 3, 60, 16, 2) == VX_OK);
    same_out(a, b, 3, "after a reused prefix", rel);
done:
    vx_context_free(a);
    vx_context_free(b);
    vx_model_free(ma);
    vx_model_free(mb);
}

/* Greedy requests with shared prefixes through an engine of model m: the
 * texts into out[i]. */
#define NREQ 6
static void engine_texts(vx_model *m, int32_t kv_size, int32_t ngram, vx_test_text *out) {
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = 64;
    ep.n_parallel = 4;
    ep.n_batch = 32;
    ep.n_threads = 1;
    ep.kv_size = kv_size;
    ep.spec_ngram = ngram;
    vx_engine *e = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_engine_init(m, &ep, &e, err, sizeof err) == VX_OK, "engine: %s", err);
    if (!e) return;
    for (int i = 0; i < NREQ; i++) {
        vx_test_text_init(&out[i]);
        vx_token p[40];
        const int n = 20 + i * 3;
        for (int j = 0; j < n; j++) p[j] = j < 18 ? 1 + (j * 29) % 300 : 1 + (i * 31 + j * 17) % 300;
        vx_request_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = p;
        rp.n_prompt = n;
        rp.max_tokens = 24;
        rp.sampling = vx_sampler_default_params();
        rp.sampling.temperature = 0;
        rp.ignore_eos = true;
        rp.on_event = vx_test_on_text;
        rp.user_data = &out[i];
        uint64_t id;
        CHECKF(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK, "submit: %s", err);
    }
    for (int i = 0; i < NREQ; i++) vx_test_text_wait(&out[i]);
    vx_engine_stats st;
    vx_engine_get_stats(e, &st);
    if (kv_size) CHECKF(st.preemptions > 0, "no preemption with kv_size %d", kv_size);
    vx_engine_free(e);
}

static void compare_engine(vx_dist *d) {
    const char *rel = "models/stories260K/stories260K.gguf";
    char err[VX_ERRMSG_MAX];
    vx_model *ma = load(rel, NULL, NULL, err), *mb = load(rel, d, NULL, err);
    CHECKF(ma && mb, "%s: %s", rel, err);
    static vx_test_text ta[NREQ], tb[NREQ];
    const struct {
        int32_t kv_size, ngram;
    } runs[] = {{0, 0}, {128, 0}, {0, 3}};
    for (size_t r = 0; ma && mb && r < sizeof runs / sizeof runs[0]; r++) {
        engine_texts(ma, runs[r].kv_size, runs[r].ngram, ta);
        engine_texts(mb, runs[r].kv_size, runs[r].ngram, tb);
        for (int i = 0; i < NREQ; i++)
            CHECKF(ta[i].done && tb[i].done && ta[i].n_gen == 24 && tb[i].n_gen == 24 && ta[i].len == tb[i].len &&
                       !memcmp(ta[i].text, tb[i].text, (size_t)ta[i].len),
                   "engine (kv_size %d, ngram %d): request %d: '%.*s' vs '%.*s'", runs[r].kv_size, runs[r].ngram,
                   i, ta[i].len, ta[i].text, tb[i].len, tb[i].text);
    }
    vx_model_free(ma);
    vx_model_free(mb);
}

static void errors(vx_dist *d) {
    char err[VX_ERRMSG_MAX];
    const int R = vx_dist_size(d);
    /* every process needs a layer: 4 layers over a split of 100:1:... */
    float split[8] = {100, 1, 1, 1, 1, 1, 1, 1};
    vx_model *m = load("models/llama/llama-Q4_K_M.gguf", d, split, err);
    CHECKF(m, "a lopsided split still gives each process a layer: %s", err);
    vx_model_free(m);
    split[1] = 0;
    m = load("models/llama/llama-Q4_K_M.gguf", d, split, err);
    CHECKF(!m && strstr(err, "split 1: 0"), "a zero share: %s", m ? "loaded" : err);
    vx_model_free(m);
    /* a truncated file (process 0 finds it first; nothing reaches the others) */
    const char *tmp = "/tmp/vx_test_dist_trunc.gguf";
    size_t size = 0;
    char *data = vx_test_read_file(vx_test_fixture_path("models/llama/llama-Q4_K_M.gguf"), &size);
    FILE *f = data ? fopen(tmp, "wb") : NULL;
    if (f) fwrite(data, 1, size / 2, f), fclose(f);
    free(data);
    vx_model_params mp = vx_model_default_params();
    mp.dist = d;
    CHECK(vx_model_load(tmp, &mp, &m, err, sizeof err) != VX_OK && !m && strstr(err, "vx_test_dist_trunc"));
    unlink(tmp);
    /* a full KV cache: the batch is refused on process 0 and the group goes on */
    m = load("models/llama/llama-Q4_K_M.gguf", d, NULL, err);
    CHECKF(m, "%s", err);
    vx_context *c = m ? context(m, 32) : NULL;
    if (c) {
        CHECK(step(c, 20, 1, 0, 0) == VX_OK);
        CHECK(step(c, 20, 1, 0, 1) == VX_EFULL && strstr(vx_context_errmsg(c), "KV cache is full"));
        CHECK(vx_kv_seq_rm(c, 0, 0, -1) == VX_OK);
        CHECK(step(c, 20, 1, 0, 1) == VX_OK);
    }
    vx_context_free(c);
    vx_model_free(m);
    /* more processes than layers (stories260K has 5) */
    if (R > 5) {
        m = load("models/stories260K/stories260K.gguf", d, NULL, err);
        CHECKF(!m && strstr(err, "cannot be shared"), "%s", err);
    }
}

#ifdef VX_TEST_HAVE_MPI
/* Outside a group: starts this program under mpirun with np processes. */
static int launch(const char *self, int np) {
    char n[16];
    snprintf(n, sizeof n, "%d", np);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        setenv("VX_TEST_DIST_CHILD", "1", 1);
        /* Open MPI keeps some allocations to the end: not ours to report */
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        execlp("mpirun", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", n, "-x", "VX_TEST_DIST_CHILD",
               "-x", "ASAN_OPTIONS", self, (char *)NULL);
        perror("mpirun");
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
#endif

int main(int argc, char **argv) {
    vx_dist *d = NULL;
    char err[VX_ERRMSG_MAX];
    if (!getenv("VX_TEST_DIST_CHILD")) {
        /* outside a launcher: no group, MPI untouched */
        CHECK(vx_dist_init(&argc, &argv, &d, err, sizeof err) == VX_OK && !d && vx_dist_size(d) == 1 &&
              vx_dist_rank(d) == 0);
#ifndef VX_TEST_HAVE_MPI
        /* a launcher's group without MPI: refused, with the reason */
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
        const vx_status st = vx_dist_init(&argc, &argv, &d, err, sizeof err);
        unsetenv("OMPI_COMM_WORLD_SIZE");
        CHECKF(st == VX_EUNSUPPORTED && !d && strstr(err, "without MPI"), "built without MPI: %d %s", st, err);
        return vx_test_finish("test_dist (built without MPI)");
#else
        for (int np = 2; np <= 3; np++) {
            const int rc = launch(argv[0], np);
            CHECKF(rc == 0, "the group of %d processes: exit status %d", np, rc);
            printf("group of %d: %s\n", np, rc == 0 ? "passed" : "FAILED");
        }
        return vx_test_finish("test_dist");
#endif
    }
    if (vx_dist_init(&argc, &argv, &d, err, sizeof err) != VX_OK || !d) {
        fprintf(stderr, "vx_dist_init: %s\n", d ? "" : err);
        return 1;
    }
    int rc = 0;
    if (vx_dist_rank(d) > 0) {
        rc = vx_dist_serve(d) == VX_OK ? 0 : 1;
    } else {
        CHECK(vx_dist_size(d) >= 2 && vx_dist_serve(d) == VX_EINVAL);
        const char *models[] = {"models/llama/llama-Q4_K_M.gguf", "models/moe/moe-Q8_0.gguf",
                                "models/qwen3/qwen3-F16.gguf", "models/qwen2/qwen2-Q4_K_M.gguf"};
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) compare_model(d, models[i], NULL);
        const float split[3] = {1, 3, 3};
        compare_model(d, models[0], split);
        compare_engine(d);
        errors(d);
        char name[64];
        snprintf(name, sizeof name, "test_dist (group of %d)", vx_dist_size(d));
        rc = vx_test_finish(name);
    }
    vx_dist_free(d);
    return rc;
}
