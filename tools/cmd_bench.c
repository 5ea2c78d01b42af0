/*
 * cmd_bench.c - `vx bench`: llama-bench-style throughput measurement.
 *
 * ppN: N random tokens evaluated from an empty cache in batches of -b.
 * tgN: N tokens evaluated one at a time from an empty cache.
 * tgN xP (--parallel P): P sequences decode in step, one token each per
 *   forward (P tokens per batch, all with logits), N steps; t/s counts the
 *   tokens of all P sequences, as llama-batched-bench's S_TG does.
 * Each test runs once as warm-up, then -r times; reports mean ± sd of t/s,
 * achieved weight-read bandwidth (tg) and matmul GFLOP/s (pp), and their
 * ratios to the machine limits (--no-limits skips those): measured at
 * start and again after every test, each test's ratio taken to the mean
 * of the measurements just before and just after it. On a shared host
 * the limits move by tens of percent within minutes, so a figure taken
 * once at start can put a later test anywhere from 70% to 120% of it;
 * bracketing each test compares it with the machine as it was during the
 * test (the footer gives the range seen). pp's ratio is to the int8 peak, or to
 * the fp32 FMA peak for models whose matmul FLOPs are mostly on float
 * weights (F16/BF16/F32), or to AMX bf16 where there is AMX.
 * --profile: where the measured runs spent their time, step by step of
 * the forward pass (vx_context_perf), in a second table (md) or a
 * "perf_ns" object per test (jsonl).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "machine.h"

#define MAX_LIST 16
#define VX_BENCH_MAX_PAR 256

typedef struct int_list {
    int n;
    long v[MAX_LIST];
} int_list;

/* One test's profile, for the table after the results. */
typedef struct prof_row {
    char model[64], test[32];
    vx_perf perf;
} prof_row;

/* The profile table: per test, each step's share of thread 0's time in
 * the measured runs' forward passes, and the time per forward. */
static void print_profiles(const prof_row *rows, int n) {
    printf("\ntime per step of the forward pass (--profile: thread 0, %% of its time in vx_decode)\n\n");
    printf("| %-28s | %14s |", "model", "test");
    for (int s = 0; s < VX_PERF_COUNT; s++) printf(" %9s |", vx_perf_step_name((vx_perf_step)s));
    printf(" ms/forward |\n|------------------------------|---------------:|");
    for (int s = 0; s < VX_PERF_COUNT; s++) printf("----------:|");
    printf("-----------:|\n");
    for (int i = 0; i < n; i++) {
        const vx_perf *p = &rows[i].perf; /* its steps sum to ns_decode */
        printf("| %-28s | %14s |", rows[i].model, rows[i].test);
        for (int s = 0; s < VX_PERF_COUNT; s++)
            printf(" %8.1f%% |", p->ns_decode ? 100.0 * (double)p->ns[s] / (double)p->ns_decode : 0.0);
        printf(" %10.3f |\n", p->n_decode ? 1e-6 * (double)p->ns_decode / (double)p->n_decode : 0.0);
    }
}

/* The mean of two measurements of the limits (a test's bracket). */
static vx_limits limits_mean(const vx_limits *a, const vx_limits *b) {
    vx_limits m = *b;
    m.read_gbs = (a->read_gbs + b->read_gbs) / 2;
    m.fma_gflops = (a->fma_gflops + b->fma_gflops) / 2;
    m.int8_gops = (a->int8_gops + b->int8_gops) / 2;
    m.amx_bf16_gflops = (a->amx_bf16_gflops + b->amx_bf16_gflops) / 2;
    return m;
}

static bool parse_list(const char *s, int_list *l, long lo, long hi) {
    l->n = 0;
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < lo || x > hi || l->n == MAX_LIST) return false;
        l->v[l->n++] = x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return false;
    }
    return l->n > 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Evaluates toks[0, n) at positions [p0, p0 + n) in batches of n_batch,
 * each with the last token's logits; with emb (n_batch flags: an encoder,
 * which has no logits), its embedding instead. */
static bool feed(vx_context *c, const vx_token *toks, int n, int p0, int n_batch, vx_pos *pos,
                 vx_seq_id *seq, int8_t *emb) {
    for (int i0 = 0; i0 < n; i0 += n_batch) {
        int nb = n - i0 < n_batch ? n - i0 : n_batch;
        for (int j = 0; j < nb; j++) pos[j] = p0 + i0 + j;
        for (int j = 0; emb && j < nb; j++) emb[j] = j == nb - 1;
        vx_batch b = {nb, toks + i0, pos, seq, NULL, emb};
        if (vx_decode(c, &b) != VX_OK) return false;
    }
    return true;
}

/* timed += after - before, field by field (the profile of a timed part) */
static void perf_add_diff(vx_perf *timed, const vx_perf *before, const vx_perf *after) {
    timed->n_decode += after->n_decode - before->n_decode;
    timed->n_tokens += after->n_tokens - before->n_tokens;
    timed->ns_decode += after->ns_decode - before->ns_decode;
    for (int s = 0; s < VX_PERF_COUNT; s++) timed->ns[s] += after->ns[s] - before->ns[s];
}

/* Runs one pp or tg pass after `depth` tokens of context (not timed);
 * returns seconds or a negative value on error. With timed, adds the
 * context's perf counters of the timed part to it: the forwards that
 * fill the depth are not the test's (they made a tg64 @ d4096 profile
 * read 146 ms per forward against the 36 ms the t/s gave). emb: feed's. */
static double run_once(vx_context *c, int depth, int n_prompt, int n_gen, int n_par, int n_batch,
                       int n_vocab, vx_token *toks, vx_pos *pos, vx_seq_id *seq, int8_t *emb, uint64_t *rng,
                       vx_perf *timed) {
    for (int s = 0; s < n_par; s++) vx_kv_seq_rm(c, s, 0, -1);
    int n = depth + (n_prompt > 0 ? n_prompt : n_gen * n_par);
    for (int i = 0; i < n; i++) toks[i] = (vx_token)(rng_next(rng) % (uint64_t)n_vocab);
    for (int s = 0; s < n_par && depth > 0; s++) { /* every sequence gets the same context */
        for (int j = 0; j < n_batch; j++) seq[j] = s;
        if (!feed(c, toks, depth, 0, n_batch, pos, seq, emb)) return -1;
    }
    for (int j = 0; j < n_batch; j++) seq[j] = 0;
    vx_perf before;
    if (timed) vx_context_perf(c, &before);
    double t0 = now_s();
    if (n_prompt > 0) {
        if (!feed(c, toks + depth, n_prompt, depth, n_batch, pos, seq, emb)) return -1;
    } else if (n_par == 1) {
        for (int i = 0; i < n_gen; i++)
            if (!feed(c, toks + depth + i, 1, depth + i, 1, pos, seq, emb)) return -1;
    } else {
        int8_t want[VX_BENCH_MAX_PAR];
        for (int s = 0; s < n_par; s++) {
            seq[s] = s;
            want[s] = 1;
        }
        for (int i = 0; i < n_gen; i++) {
            for (int s = 0; s < n_par; s++) pos[s] = depth + i;
            vx_batch b = {n_par, toks + depth + (size_t)i * n_par, pos, seq, want, NULL};
            if (vx_decode(c, &b) != VX_OK) return -1;
        }
    }
    const double secs = now_s() - t0;
    if (timed) {
        vx_perf after;
        vx_context_perf(c, &after);
        perf_add_diff(timed, &before, &after);
    }
    return secs;
}

/* -o json: an array's opening or separator before each object, and its
 * end (on every way out once the output started); returns rc. */
static void json_next(bool array, int *n_obj) {
    if (array) printf((*n_obj)++ ? "," : "[");
}

static int json_end(bool array, int n_obj, int rc) {
    if (array) printf(n_obj ? "]\n" : "[]\n");
    return rc;
}

/* s as a JSON string (file names may hold quotes, backslashes, control
 * bytes) */
static void json_string(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void bench_usage(void) {
    printf("usage: vx bench -m MODEL.gguf [-m MODEL2.gguf ...] [options]\n"
           "\n"
           "  -p, --n-prompt LIST   prompt lengths (default 512; 0 = skip)\n"
           "  -n, --n-gen LIST      generated lengths (default 128; 0 = skip)\n"
           "  -t, --threads LIST    thread counts (default: all cores)\n"
           "  -b, --batch-size N    tokens per forward for pp (default 512)\n"
           "  -d, --n-depth LIST    tokens already in the context before each test (default 0)\n"
           "  -np, --parallel LIST  sequences decoding in step in tg tests (default 1)\n"
           "  -r, --repetitions N   measured runs per test (default 5)\n"
           "  --kv-type f16|f32|q8_0 KV cache type (default f16)\n"
           "  --no-repack           keep weights in the file's layout (no 8-row packing)\n"
           "  -o, --output md|jsonl|json  table (default), one JSON object per line, or a\n"
           "                        JSON array of them (llama-bench's -o json)\n"
           "  --json                same as -o jsonl\n"
           "  --no-limits           do not measure the machine's limits (at start and after every\n"
           "                        test: each ratio is to the best of the run so far)\n"
           "  --limits              only measure and print the machine's limits\n"
           "  -ngl LIST             accepted for llama-bench's command lines, ignored (CPU only)\n"
           "  --profile             also time each step of the forward pass (norms, q/k/v,\n"
           "                        attention, FFN, ..., barrier waits) and print where the\n"
           "                        measured runs spent their time\n"
           "LISTs are comma-separated, e.g. -p 128,512 -t 1,2.\n");
}

int vx_cmd_bench(int argc, char **argv) {
    const char *models[MAX_LIST];
    int n_models = 0;
    int_list np = {1, {512}}, ng = {1, {128}}, nt = {1, {0}}, nd = {1, {0}}, npl = {1, {1}};
    long n_batch = 512, reps = 5;
    bool jsonl = false, limits = true, limits_only = false, repack = true, profile = false;
    bool array = false; /* -o json: the objects as one JSON array */
    int n_obj = 0;
    vx_kv_type kvt = VX_KV_F16;
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i], *v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            bench_usage();
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) {
            if ((v = cli_value(&a)) && n_models < MAX_LIST) models[n_models++] = v;
        } else if (!strcmp(o, "-p") || !strcmp(o, "--n-prompt")) {
            if ((v = cli_value(&a)) && !parse_list(v, &np, 0, 1 << 20)) a.error = true;
        } else if (!strcmp(o, "-n") || !strcmp(o, "--n-gen")) {
            if ((v = cli_value(&a)) && !parse_list(v, &ng, 0, 1 << 20)) a.error = true;
        } else if (!strcmp(o, "-d") || !strcmp(o, "--n-depth")) {
            if ((v = cli_value(&a)) && !parse_list(v, &nd, 0, 1 << 20)) a.error = true;
        } else if (!strcmp(o, "-np") || !strcmp(o, "--parallel")) {
            if ((v = cli_value(&a)) && !parse_list(v, &npl, 1, VX_BENCH_MAX_PAR)) a.error = true;
        } else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            if ((v = cli_value(&a)) && !parse_list(v, &nt, 0, 512)) a.error = true;
        } else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) cli_int(&a, 1, 1 << 16, &n_batch);
        else if (!strcmp(o, "-r") || !strcmp(o, "--repetitions")) cli_int(&a, 1, 1000, &reps);
        else if (!strcmp(o, "--json")) jsonl = true;
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if ((v = cli_value(&a))) {
                if (!strcmp(v, "jsonl") || !strcmp(v, "json")) jsonl = true, array = !strcmp(v, "json");
                else if (strcmp(v, "md")) a.error = true;
            }
        } else if (!strcmp(o, "--no-limits")) limits = false;
        else if (!strcmp(o, "--limits")) limits_only = true;
        else if (!strcmp(o, "--profile")) profile = true;
        else if (cli_gpu_option(&a) || cli_llama_option(&a)) continue;
        else if (!strcmp(o, "--no-repack")) repack = false;
        else if (!strcmp(o, "--kv-type")) {
            if ((v = cli_value(&a)) && !cli_kv_type(v, &kvt)) return 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see vx bench --help)\n", o);
            return 2;
        }
        if (a.error) fprintf(stderr, "error: bad value for %s\n", o);
    }
    if (a.error) return 2;
    /* the arguments' errors before the limits' seconds of measuring */
    if (n_models == 0 && !limits_only) {
        fprintf(stderr, "error: no model given (use -m FILE.gguf)\n");
        return 2;
    }
    for (int mi = 0; mi < n_models && !limits_only; mi++)
        if (access(models[mi], R_OK) != 0) {
            fprintf(stderr, "error: cannot read model file '%s'\n", models[mi]);
            return 1;
        }

    vx_limits lim, prev;
    memset(&lim, 0, sizeof lim);
    double read_lo = 0, read_hi = 0; /* the range of read figures seen */
    if (limits || limits_only) {
        fprintf(stderr, "measuring machine limits...\n");
        vx_measure_limits((int)nt.v[nt.n - 1], &lim);
        read_lo = read_hi = lim.read_gbs;
        if (jsonl) {
            json_next(array, &n_obj);
            printf("{\"limits\": true, \"n_threads\": %d, \"read_gbs\": %.2f, \"fp32_gflops\": %.1f, "
                   "\"int8_gops\": %.1f, \"amx_bf16_gflops\": %.1f, \"isa\": \"%s\"}\n",
                   lim.n_threads, lim.read_gbs, lim.fma_gflops, lim.int8_gops, lim.amx_bf16_gflops, lim.isa);
        } else {
            printf("machine limits (%d threads, %s): read %.1f GB/s, fp32 FMA %.0f GFLOP/s, "
                   "int8 %.0f GOP/s\n\n",
                   lim.n_threads, lim.isa, lim.read_gbs, lim.fma_gflops, lim.int8_gops);
        }
        if (!jsonl && lim.amx_bf16_gflops > 0)
            printf("AMX bf16 tiles: %.0f GFLOP/s (prefill ratios below are to this peak)\n\n",
                   lim.amx_bf16_gflops);
        if (limits_only) return json_end(array, n_obj, 0);
    }
    if (!jsonl) printf("kernels: %s (CPU: %s)\n\n", vx_kernels_name(), vx_cpu_features());
    if (!jsonl)
        printf("| %-28s | %10s | %8s | %7s | %14s | %16s | %22s |\n"
               "|%s|%s|%s|%s|%s|%s|%s|\n",
               "model", "size", "params", "threads", "test", "t/s", "achieved",
               "------------------------------", "-----------:", "---------:", "--------:",
               "---------------:", "-----------------:", "-----------------------:");
    int rc = 0;
    prof_row *profs = NULL;
    int n_prof = 0;
    for (int mi = 0; mi < n_models && rc == 0; mi++) {
        vx_model_params mp = vx_model_default_params();
        mp.repack = repack;
        vx_model *m = cli_load_model_ex(models[mi], &mp);
        if (!m) return json_end(array, n_obj, 1);
        uint64_t bytes_tok, flops_tok;
        vx_model_token_cost(m, &bytes_tok, &flops_tok);
        const bool float_mm = 2 * vx_model_token_float_flops(m) > flops_tok;
        char mname[64];
        const char *base = strrchr(models[mi], '/');
        base = base ? base + 1 : models[mi];
        snprintf(mname, sizeof mname, "%.63s", base);
        const double size_mib = (double)vx_model_size(m) / (1 << 20);
        const bool enc = vx_model_is_encoder(m); /* embeddings only */
        bool enc_noted = false;
        const double params_b = (double)vx_model_n_params(m) / 1e9;
        for (int ti = 0; ti < nt.n && rc == 0; ti++) {
          for (int di = 0; di < nd.n && rc == 0; di++) {
            const int depth = (int)nd.v[di];
            for (int kind = 0; kind < 2 && rc == 0; kind++) {
                const int_list *lens = kind == 0 ? &np : &ng;
                for (int li = 0; li < lens->n * (kind == 0 ? 1 : npl.n) && rc == 0; li++) {
                    const int n = (int)lens->v[kind == 0 ? li : li / npl.n];
                    const int n_par = kind == 0 ? 1 : (int)npl.v[li % npl.n];
                    if (n == 0) continue;
                    if (enc && (kind == 1 || depth > 0)) {
                        /* an embedding model reads whole texts: no generation, no depth */
                        if (!enc_noted)
                            fprintf(stderr, "note: %s is an embedding model (an encoder): only pp tests at depth 0 "
                                            "run\n", vx_model_arch(m));
                        enc_noted = true;
                        continue;
                    }
                    const int n_prompt = kind == 0 ? n : 0, n_gen = kind == 1 ? n : 0;
                    vx_context_params cp = vx_context_default_params();
                    cp.n_ctx = (uint32_t)(depth + n);
                    cp.n_seq_max = (uint32_t)n_par;
                    /* each sequence's last KV block (16 positions) is its own */
                    cp.kv_size = (uint32_t)(depth + n + 15) / 16 * 16 * (uint32_t)n_par;
                    cp.n_batch = (uint32_t)(n_batch < depth + n ? n_batch : depth + n);
                    if (enc) cp.n_batch = (uint32_t)n; /* its prompt goes whole into one batch */
                    if (cp.n_batch < (uint32_t)n_par) cp.n_batch = (uint32_t)n_par;
                    cp.n_threads = (int32_t)nt.v[ti];
                    cp.kv_type = kvt;
                    cp.profile = profile;
                    vx_context *c = NULL;
                    char err[VX_ERRMSG_MAX];
                    if (vx_context_init(m, &cp, &c, err, sizeof err) != VX_OK) {
                        fprintf(stderr, "error: %s\n", err);
                        rc = 1;
                        break;
                    }
                    const int threads = vx_context_n_threads(c);
                    vx_token *toks = malloc(((size_t)depth + (size_t)n * n_par) * sizeof *toks);
                    vx_pos *pos = malloc((size_t)cp.n_batch * sizeof *pos);
                    vx_seq_id *seq = calloc((size_t)cp.n_batch, sizeof *seq);
                    int8_t *emb = enc ? calloc((size_t)cp.n_batch, 1) : NULL; /* feed's */
                    double *ts = malloc((size_t)reps * sizeof *ts);
                    uint64_t rng = 42;
                    const int nv = vx_context_n_vocab(c);
                    if (!toks || !pos || !seq || !ts || (enc && !emb) ||
                        run_once(c, 0, n_prompt > 0 ? (n_prompt < 32 ? n_prompt : 32) : 0,
                                 n_gen > 0 ? (n_gen < 16 ? n_gen : 16) : 0, n_par, (int)cp.n_batch, nv,
                                 toks, pos, seq, emb, &rng, NULL) < 0) {
                        fprintf(stderr, "error: warm-up failed: %s\n", vx_context_errmsg(c));
                        rc = 1;
                    }
                    double sum = 0, sum2 = 0;
                    vx_perf timed; /* the measured runs' timed parts only */
                    memset(&timed, 0, sizeof timed);
                    for (long r = 0; r < reps && rc == 0; r++) {
                        double s = run_once(c, depth, n_prompt, n_gen, n_par, (int)cp.n_batch, nv, toks, pos, seq,
                                            emb, &rng, &timed);
                        if (s <= 0) {
                            fprintf(stderr, "error: %s\n", vx_context_errmsg(c));
                            rc = 1;
                            break;
                        }
                        ts[r] = (double)n * n_par / s;
                        sum += ts[r];
                        sum2 += ts[r] * ts[r];
                    }
                    if (rc == 0) {
                        const double mean = sum / (double)reps;
                        const double sd = reps > 1 ? sqrt(fmax(0, (sum2 - sum * mean) / (double)(reps - 1))) : 0;
                        /* weights are read once per forward, whatever the batch */
                        const double gbs = mean / n_par * (double)bytes_tok / 1e9;
                        const double gflops = mean * (double)flops_tok / 1e9;
                        if (limits) { /* the limits again, right after the test */
                            vx_limits now;
                            prev = lim;
                            if (vx_measure_limits((int)nt.v[nt.n - 1], &now) == 0) {
                                read_lo = fmin(read_lo, now.read_gbs);
                                read_hi = fmax(read_hi, now.read_gbs);
                                lim = now;
                            }
                        }
                        /* this test's ratios: to the limits just before and after it */
                        const vx_limits bl = limits ? limits_mean(&prev, &lim) : lim;
                        char test[32], ach[64];
                        snprintf(test, sizeof test, "%s%d", kind == 0 ? "pp" : "tg", n);
                        if (n_par > 1) snprintf(test + strlen(test), sizeof test - strlen(test), " x%d", n_par);
                        if (depth > 0) snprintf(test + strlen(test), sizeof test - strlen(test), " @ d%d", depth);
                        if (kind == 1 && n_par > 1)
                            snprintf(ach, sizeof ach, "%.0f GFLOP/s", gflops);
                        else if (kind == 1)
                            snprintf(ach, sizeof ach, "%.1f GB/s", gbs);
                        else
                            snprintf(ach, sizeof ach, "%.0f GFLOP/s", gflops);
                        if (kind == 1 && n_par == 1 && bl.read_gbs > 0)
                            snprintf(ach + strlen(ach), sizeof ach - strlen(ach), " (%.0f%%)",
                                     100 * gbs / bl.read_gbs);
                        if (kind == 0 && bl.amx_bf16_gflops > 0)
                            snprintf(ach + strlen(ach), sizeof ach - strlen(ach), " (%.0f%% amx)",
                                     100 * gflops / bl.amx_bf16_gflops);
                        else if ((kind == 0 || n_par > 1) && float_mm && bl.fma_gflops > 0)
                            snprintf(ach + strlen(ach), sizeof ach - strlen(ach), " (%.0f%% fp32)",
                                     100 * gflops / bl.fma_gflops);
                        else if ((kind == 0 || n_par > 1) && bl.int8_gops > 0)
                            snprintf(ach + strlen(ach), sizeof ach - strlen(ach), " (%.0f%% i8)",
                                     100 * gflops / bl.int8_gops);
                        if (jsonl) {
                            json_next(array, &n_obj);
                            printf("{\"kernels\": \"%s\", \"model_filename\": ", vx_kernels_name());
                            json_string(models[mi]);
                            printf(", \"model_size\": %llu, "
                                   "\"model_n_params\": %llu, \"n_threads\": %d, \"n_batch\": %u, "
                                   "\"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"n_parallel\": %d, \"avg_ts\": %.6f, "
                                   "\"stddev_ts\": %.6f, \"samples_ts\": [",
                                   (unsigned long long)vx_model_size(m),
                                   (unsigned long long)vx_model_n_params(m), threads, cp.n_batch,
                                   n_prompt, n_gen, depth, n_par, mean, sd);
                            for (long r = 0; r < reps; r++) printf(r ? ", %.6f" : "%.6f", ts[r]);
                            printf("], \"avg_ns\": %.0f, \"weight_gbs\": %.3f, \"matmul_gflops\": %.3f",
                                   1e9 * n * n_par / mean, gbs, gflops);
                            if (bl.read_gbs > 0)
                                printf(", \"read_gbs_limit\": %.3f, \"int8_gops_limit\": %.3f, "
                                       "\"fp32_gflops_limit\": %.3f, \"amx_bf16_gflops_limit\": %.3f",
                                       bl.read_gbs, bl.int8_gops, bl.fma_gflops, bl.amx_bf16_gflops);
                            if (profile) {
                                printf(", \"perf_ns_decode\": %llu, \"perf_ns\": {",
                                       (unsigned long long)timed.ns_decode);
                                for (int st = 0; st < VX_PERF_COUNT; st++)
                                    printf("%s\"%s\": %llu", st ? ", " : "", vx_perf_step_name((vx_perf_step)st),
                                           (unsigned long long)timed.ns[st]);
                                printf("}");
                            }
                            printf("}\n");
                        } else {
                            printf("| %-28s | %6.2f MiB | %6.3f B | %7d | %14s | %8.2f ± %5.2f | %22s |\n",
                                   mname, size_mib, params_b, threads, test, mean, sd, ach);
                            prof_row *pr = profile ? realloc(profs, (size_t)(n_prof + 1) * sizeof *profs) : NULL;
                            if (pr) {
                                profs = pr;
                                snprintf(pr[n_prof].model, sizeof pr[n_prof].model, "%s", mname);
                                snprintf(pr[n_prof].test, sizeof pr[n_prof].test, "%s", test);
                                pr[n_prof].perf = timed;
                                n_prof++;
                            }
                        }
                        fflush(stdout);
                    }
                    free(toks); free(pos); free(seq); free(ts); free(emb);
                    vx_context_free(c);
                }
            }
          }
        }
        vx_model_free(m);
    }
    if (rc == 0 && limits && !jsonl)
        printf("\nratios are to the mean of the limits measured just before and after each test; "
               "read bandwidth seen in this run: %.1f-%.1f GB/s\n",
               read_lo, read_hi);
    if (n_prof > 0) print_profiles(profs, n_prof);
    free(profs);
    return json_end(array, n_obj, rc);
}
