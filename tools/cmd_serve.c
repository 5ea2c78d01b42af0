/*
 * cmd_serve.c - `vx serve`: loads a model, starts the serving engine and
 * the OpenAI-compatible HTTP server (src/server.h), and runs until SIGINT
 * or SIGTERM. The first signal stops accepting connections and lets the
 * requests in flight finish (up to a grace period); a second one cancels
 * them. Either way the process exits 0.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "cli.h"
#include "engine.h"
#include "harmony.h"
#include "reasoning.h"
#include "server.h"

#define GRACE_SECONDS 30

/* The only global: what the signal handler may touch. */
static volatile sig_atomic_t g_signals;

static void on_signal(int sig) {
    (void)sig;
    if (g_signals < 100) g_signals++;
}

static void serve_usage(void) {
    printf("usage: vx serve -m MODEL.gguf [options]\n"
           "\n"
           "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions,\n"
           "/v1/embeddings, /tokenize, /detokenize; GET /v1/models, /health, /metrics\n"
           "(Prometheus); and ollama's API: POST /api/chat, /api/generate, /api/embed,\n"
           "/api/show; GET /api/tags, /api/ps, /api/version (use --port 11434 for ollama's clients).\n"
           "  -m, --model PATH        GGUF file or Hugging Face model directory (default: $VX_MODEL)\n"
           "  --host ADDR             address to listen on (default 127.0.0.1)\n"
           "  --port N                port (default 8080; 0 = any free port)\n"
           "  --api-key KEY           require 'Authorization: Bearer KEY' (default: $VX_API_KEY)\n"
           "  -a, --alias NAME        model name reported by /v1/models (default: file name)\n"
           "  -ngl N                  accepted for llama.cpp's command lines, ignored (CPU only)\n"
           "  -c, --ctx-size N        context per sequence (default 4096, at most the model's)\n"
           "  -np, --parallel N       sequences generated at once (default 4)\n"
           "  -b, --batch-size N      tokens per forward pass (default 512)\n"
           "  -t, --threads N         threads (default: all cores)\n"
           "  --no-repack             keep weights in the file's layout (no 8-row packing)\n"
           "  --batch-invariant       outputs never depend on the other requests, the prompt's\n"
           "                          chunking or the prefix cache (integer kernels only: no AMX\n"
           "                          bf16 prefill)\n"
           "  --queue N               waiting requests before 429 (default 64)\n"
           "speculative decoding (the tokens a request's sampler would draw without it, bit for bit\n"
           "with --batch-invariant; elsewhere as any change of batch shape may move them):\n"
           "  --spec-type none|ngram-simple  ngram-simple: drafts by prompt lookup, the tokens that\n"
           "                          followed the latest earlier occurrence of the sequence's last\n"
           "                          N tokens (default none; llama-server's other ngram-* types\n"
           "                          are taken as ngram-simple)\n"
           "  --spec-ngram-size-n N   N for ngram-simple (default 4)\n"
           "  -md, --model-draft PATH a smaller model with the same vocabulary drafts\n"
           "  --draft-max N           most tokens drafted per sequence and step (default 16;\n"
           "                          also --draft, --draft-n, --spec-draft-n-max)\n"
           "  --draft-min N           shorter drafts are not verified (default 0)\n"
           "  --draft-p-min P         the draft model drafts while its top token's probability\n"
           "                          is at least P (default 0.8)\n"
           "                          (the draft model runs with the model's context, KV type and\n"
           "                          threads: llama-server's -cd, -td, -ctkd, -ctvd are ignored)\n"
           "  --kv-size N             KV positions over all sequences (default ctx x parallel)\n"
           "  --kv-type f16|f32|q8_0 KV cache type (default f16)\n"
           "  --chat-template NAME    chatml, llama3, llama2, mistral, phi3, gemma, ... or a\n"
           "                          file with Jinja source (default: the model's);\n"
           "                          --chat-template-file FILE as llama-server\n"
           "  --chat-template-kwargs JSON  template variables for every request, under each\n"
           "                          request's chat_template_kwargs, e.g. '{\"enable_thinking\":false}'\n"
           "  --reasoning-format F    auto: a thinking model's <think> text goes to\n"
           "                          reasoning_content when its template writes thoughts;\n"
           "                          deepseek: always; none: left in the content (default auto;\n"
           "                          a request's reasoning_format overrides it)\n"
           "  --pooling mean|cls|last /v1/embeddings: how the tokens' vectors become one (default:\n"
           "                          the file's {arch}.pooling_type, else an encoder's mean, a\n"
           "                          causal model's last token, the one that has seen the whole\n"
           "                          text; cls: encoders only)\n"
           "  --embedding(s)          accepted for llama-server's command lines: /v1/embeddings\n"
           "                          is always served, beside the completions endpoints\n"
           "  --max-body BYTES        request body limit (default 8388608)\n"
           "  --timeout SECONDS       idle connection timeout (default 600)\n"
           "  --header-timeout SECONDS  a request's headers must be complete this long after the\n"
           "                          connection opened or its last request ended, and its body\n"
           "                          must arrive at 1000 B/s on average from then on, else the\n"
           "                          connection is closed (default 30; 0 = no limit)\n"
           "  --max-connections N     open connections beyond which requests get 503 (default 256)\n"
           "  --max-buffer BYTES      output a request may buffer for a client that does not\n"
           "                          read; beyond it the request is canceled (default 8388608)\n"
           "  --quiet                 no per-request log lines\n");
}


/* "dir/name.gguf" -> "name" */
static void model_name(const char *path, char *buf, size_t size) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(buf, size, "%s", base);
    size_t n = strlen(buf);
    if (n > 5 && !strcmp(buf + n - 5, ".gguf")) buf[n - 5] = 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int vx_cmd_serve(int argc, char **argv) {
    const char *path = getenv("VX_MODEL"), *tmpl_name = NULL, *alias = NULL, *reasoning = "auto";
    vx_server_params sp = vx_server_default_params();
    sp.pooling = VX_POOLING_UNSPECIFIED; /* --pooling, else the file's (below) */
    vx_engine_params ep = vx_engine_default_params();
    sp.api_key = getenv("VX_API_KEY");
    bool repack = true;
    long n_ctx = 4096, parallel = ep.n_parallel, batch = ep.n_batch, threads = 0, queue = ep.queue_max;
    long port = 8080, max_body = (long)sp.max_body, timeout = sp.timeout_s, kv_size = 0;
    long header_timeout = sp.header_timeout_s;
    long draft_max = ep.draft_max, draft_min = ep.draft_min;
    int32_t ngram_n = 0;
    const char *draft_path = NULL;
    long max_buffer = (long)sp.max_buffered, max_conns = (long)sp.max_connections;
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            serve_usage();
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) path = cli_value(&a);
        else if (!strcmp(o, "--host")) sp.host = cli_value(&a);
        else if (!strcmp(o, "--port")) cli_int(&a, 0, 65535, &port);
        else if (!strcmp(o, "--api-key")) sp.api_key = cli_value(&a);
        else if (!strcmp(o, "-a") || !strcmp(o, "--alias")) alias = cli_value(&a);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) cli_int(&a, 0, 1 << 24, &n_ctx);
        else if (!strcmp(o, "-np") || !strcmp(o, "--parallel")) cli_int(&a, 1, 256, &parallel);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) cli_int(&a, 1, 1 << 16, &batch);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) cli_int(&a, 0, 512, &threads);
        else if (!strcmp(o, "--no-repack")) repack = false;
        else if (!strcmp(o, "--batch-invariant")) ep.batch_invariant = true;
        else if (!strcmp(o, "--queue")) cli_int(&a, 0, 1 << 16, &queue);
        else if (!strcmp(o, "--kv-size")) cli_int(&a, 0, 1 << 28, &kv_size);
        else if (!strcmp(o, "--kv-type")) {
            const char *v = cli_value(&a);
            if (v && !cli_kv_type(v, &ep.kv_type)) return 2;
        } else if (!strcmp(o, "--chat-template") || !strcmp(o, "--chat-template-file")) tmpl_name = cli_value(&a);
        else if (!strcmp(o, "--chat-template-kwargs")) sp.template_kwargs = cli_value(&a);
        else if (!strcmp(o, "--reasoning-format")) {
            reasoning = cli_value(&a);
            if (reasoning && strcmp(reasoning, "auto") && strcmp(reasoning, "deepseek") && strcmp(reasoning, "none")) {
                fprintf(stderr, "error: --reasoning-format takes auto, deepseek or none, not '%s'\n", reasoning);
                return 2;
            }
        }
        else if (!strcmp(o, "--pooling")) {
            const char *v = cli_value(&a);
            sp.pooling = vx_pooling_from_name(v);
            if (v && !cli_pooling_ok(v, sp.pooling)) return 2;
        } else if (!strcmp(o, "--embedding") || !strcmp(o, "--embeddings")) {
            fprintf(stderr, "note: %s: /v1/embeddings is always served\n", o);
        }
        else if (!strcmp(o, "--max-body")) cli_int(&a, 1024, 1L << 30, &max_body);
        else if (!strcmp(o, "--timeout")) cli_int(&a, 1, 86400, &timeout);
        else if (!strcmp(o, "--header-timeout")) cli_int(&a, 0, 86400, &header_timeout);
        else if (!strcmp(o, "--max-buffer")) cli_int(&a, 4096, 1L << 32, &max_buffer);
        else if (!strcmp(o, "--max-connections")) cli_int(&a, 1, 1 << 16, &max_conns);
        else if (!strcmp(o, "--quiet")) sp.log_requests = false;
        else if (!strcmp(o, "--spec-type")) {
            const char *v = cli_value(&a);
            if (!v) continue;
            if (!strcmp(v, "none")) ep.spec_ngram = 0;
            else if (!strncmp(v, "ngram-", 6)) {
                if (strcmp(v, "ngram-simple"))
                    fprintf(stderr, "note: --spec-type %s is taken as ngram-simple (prompt lookup)\n", v);
                if (ep.spec_ngram <= 0) ep.spec_ngram = 4;
            } else {
                fprintf(stderr, "error: --spec-type takes none or ngram-simple, not '%s' (a draft model: -md)\n", v);
                return 2;
            }
        } else if (!strcmp(o, "--spec-ngram-size-n") || !strcmp(o, "--spec-ngram-simple-size-n")) {
            long v = 0;
            if (cli_int(&a, 1, 1024, &v)) ngram_n = (int32_t)v;
        } else if (!strcmp(o, "--spec-ngram-size-m") || !strcmp(o, "--spec-ngram-simple-size-m") ||
                   !strcmp(o, "--draft-max") || !strcmp(o, "--draft") || !strcmp(o, "--draft-n") ||
                   !strcmp(o, "--spec-draft-n-max"))
            cli_int(&a, 1, 256, &draft_max);
        else if (!strcmp(o, "--draft-min") || !strcmp(o, "--spec-draft-n-min")) cli_int(&a, 0, 256, &draft_min);
        else if (!strcmp(o, "--draft-p-min") || !strcmp(o, "--spec-draft-p-min")) cli_float(&a, 0, 1, &ep.draft_p_min);
        else if (!strcmp(o, "-md") || !strcmp(o, "--model-draft")) draft_path = cli_value(&a);
        else if (!strcmp(o, "-cd") || !strcmp(o, "--ctx-size-draft") || !strcmp(o, "-td") ||
                 !strcmp(o, "--threads-draft") || !strcmp(o, "-ctkd") || !strcmp(o, "--cache-type-k-draft") ||
                 !strcmp(o, "-ctvd") || !strcmp(o, "--cache-type-v-draft")) {
            if (cli_value(&a))
                fprintf(stderr, "note: %s ignored: the draft model runs with the model's context, threads and KV type\n",
                        o);
        }
        else if (cli_gpu_option(&a) || cli_llama_option(&a)) continue;
        else {
            fprintf(stderr, "error: unknown option '%s' (see vx serve --help)\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if (!cli_model_given(path)) return 2;
    if (ep.spec_ngram > 0 && ngram_n > 0) ep.spec_ngram = ngram_n;
    ep.draft_max = (int32_t)draft_max;
    ep.draft_min = (int32_t)draft_min;
    if (ep.draft_min > ep.draft_max) {
        fprintf(stderr, "error: --draft-min %ld is more than --draft-max %ld\n", draft_min, draft_max);
        return 2;
    }

    int rc = 1;
    vx_engine *engine = NULL;
    vx_server *server = NULL;
    vx_chat_template *tmpl = NULL;
    char *src = NULL, err[VX_ERRMSG_MAX], name[256];
    vx_model_params mp = vx_model_default_params();
    mp.repack = repack;
    vx_model *m = cli_load_model_ex(path, &mp), *dm = NULL;
    if (!m) return 1;
    if ((draft_path || ep.spec_ngram > 0) && vx_model_is_encoder(m)) {
        fprintf(stderr, "note: speculative decoding ignored: an embedding model generates nothing to draft\n");
        draft_path = NULL;
        ep.spec_ngram = 0;
    }
    if (draft_path && (!(dm = cli_load_local_model(draft_path, &mp)) || !cli_generative(dm))) goto done;
    ep.draft_model = dm;
    if (!(src = cli_chat_template_source(m, tmpl_name))) goto done;
    if (vx_chat_template_parse(src, &tmpl, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: the chat template cannot be parsed: %s\n(use --chat-template NAME)\n", err);
        goto done;
    }
    sp.tool_format = vx_tool_format_detect(src);
    if ((sp.pooling = cli_model_pooling(m, sp.pooling)) == VX_POOLING_UNSPECIFIED) {
        rc = 2;
        goto done;
    }
    sp.reasoning = !strcmp(reasoning, "deepseek") ||
                   (!strcmp(reasoning, "auto") && (vx_reasoning_detect(src) || vx_harmony_detect(src)));
    ep.n_ctx = (int32_t)(n_ctx > 0 ? n_ctx : vx_model_n_ctx_train(m));
    ep.n_parallel = (int32_t)parallel;
    ep.n_batch = (int32_t)batch;
    /* an encoder's input goes whole in one batch: let it hold a context */
    if (vx_model_is_encoder(m)) {
        const int32_t most = ep.n_ctx < vx_model_n_ctx_train(m) ? ep.n_ctx : vx_model_n_ctx_train(m);
        if (ep.n_batch < most) ep.n_batch = most;
    }
    ep.n_threads = (int32_t)threads;
    ep.queue_max = (int32_t)queue;
    ep.kv_size = (int32_t)kv_size;
    if (vx_engine_init(m, &ep, &engine, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: cannot start the engine: %s\n", err);
        goto done;
    }
    model_name(path, name, sizeof name);
    sp.model_name = alias ? alias : name;
    sp.port = (int)port;
    n_ctx = vx_engine_n_ctx(engine); /* the engine caps it at the model's */
    sp.n_ctx = (int32_t)n_ctx;
    sp.max_body = (size_t)max_body;
    sp.timeout_s = (unsigned)timeout;
    sp.header_timeout_s = (unsigned)header_timeout;
    sp.max_buffered = (size_t)max_buffer;
    sp.max_connections = (unsigned)max_conns;
    sp.n_parallel = (int32_t)parallel;
    sp.model_path = path;
    sp.template_src = src;
    sp.n_batch = ep.n_batch;

    /* a client closing its socket must not kill the process */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (vx_server_start(&sp, m, engine, tmpl, &server, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    const char *host = sp.host ? sp.host : "127.0.0.1";
    const bool v6 = strchr(host, ':') != NULL;
    fprintf(stderr,
            "vx serve: listening on http://%s%s%s:%d (model %s, context %ld per sequence, %ld parallel, tool calls: "
            "%s, reasoning: %s, embeddings: %s pooling%s)\n",
            v6 ? "[" : "", host, v6 ? "]" : "", vx_server_port(server), sp.model_name, n_ctx, parallel,
            vx_tool_format_name(sp.tool_format), sp.reasoning ? "reasoning_content" : "in content",
            vx_pooling_name(sp.pooling), sp.api_key && sp.api_key[0] ? ", API key required" : "");
    if (ep.spec_ngram > 0 || dm)
        fprintf(stderr, "vx serve: speculative decoding: %s%s%s, up to %d tokens drafted per step\n",
                ep.spec_ngram > 0 ? "n-gram lookup" : "", ep.spec_ngram > 0 && dm ? ", then " : "",
                dm ? "the draft model" : "", ep.draft_max);

    while (g_signals == 0) sleep_ms(100);
    vx_server_shutdown(server);
    int active = vx_server_active(server);
    if (active > 0)
        fprintf(stderr, "vx serve: shutting down; finishing %d request(s) (signal again to cancel them)\n", active);
    else fprintf(stderr, "vx serve: shutting down\n");
    for (int waited = 0; vx_server_active(server) > 0 && g_signals < 2 && waited < GRACE_SECONDS * 10; waited++)
        sleep_ms(100);
    vx_server_cancel_all(server);
    /* let the canceled requests tell their clients (503) before the
     * connections are closed */
    for (int waited = 0; vx_server_active(server) > 0 && waited < 30; waited++) sleep_ms(100);
    rc = 0;
done:
    vx_server_free(server);
    vx_engine_free(engine);
    vx_chat_template_free(tmpl);
    free(src);
    vx_model_free(dm);
    vx_model_free(m);
    return rc;
}
