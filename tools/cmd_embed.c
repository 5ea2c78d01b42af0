/* cmd_embed.c - `vx embed`: the embedding vector of each text, as
 * llama.cpp's llama-embedding prints it (the texts split at newlines, a
 * cosine similarity matrix after several), or as JSON / a JSON array. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kv_cache.h" /* vx_kv_whole_blocks */

static void embed_usage(void) {
    printf("usage: vx embed -m MODEL.gguf -p TEXT [options]\n"
           "\n"
           "Prints the embedding of each text: the model's final hidden states (after the\n"
           "output norm) pooled over the text's tokens and normalized. The prompt is split\n"
           "at --embd-separator (default: newline), one text per piece.\n"
           "\n"
           "  -m, --model PATH            GGUF file or Hugging Face model directory (default: $VX_MODEL)\n"
           "  -p, --prompt TEXT           the texts\n"
           "  -f, --file FILE             read them from a file\n"
           "  --pooling mean|cls|last     how token vectors become one (default: the file's\n"
           "                              {arch}.pooling_type, else an encoder's mean, a causal\n"
           "                              model's last token, the one that has seen the whole\n"
           "                              text; cls: encoders only)\n"
           "  --embd-normalize N          -1 none, 0 max-abs to int16 range, 1 taxicab,\n"
           "                              2 Euclidean (default), >2 p-norm\n"
           "  --embd-separator SEP        text separator (default \"\\n\")\n"
           "  --embd-output-format FMT    '' (text, default), 'array' ([[...], ...]) or 'json'\n"
           "                              (OpenAI's list of embedding objects)\n"
           "  -c, --ctx-size N            context size (default: the longest text, capped at the model's)\n"
           "  -b, --batch-size N          tokens per forward (default 512)\n"
           "  -t, --threads N             threads (default: all cores)\n"
           "  --no-mmap                   read the model into memory instead of mapping it\n");
}

/* The texts of prompt split at sep (empty pieces dropped): pointers into
 * prompt, whose separators become NULs. */
static int32_t split_texts(char *prompt, const char *sep, char ***out) {
    const size_t sl = strlen(sep);
    int32_t n = 0, cap = 8;
    char **v = malloc((size_t)cap * sizeof *v);
    for (char *s = prompt; v && s;) {
        char *end = sl ? strstr(s, sep) : NULL;
        if (end) *end = 0;
        if (*s) {
            if (n == cap) {
                char **nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
                if (!nv) {
                    free(v);
                    v = NULL;
                    break;
                }
                v = nv;
            }
            v[n++] = s;
        }
        s = end ? end + sl : NULL;
    }
    *out = v;
    return v ? n : -1;
}

static void print_vectors(const float *e, int32_t n, int32_t E, const char *fmt) {
    const bool json = !strcmp(fmt, "json"), array = !strcmp(fmt, "array");
    if (json) printf("{\n  \"object\": \"list\",\n  \"data\": [\n");
    else if (array) printf("[");
    for (int32_t i = 0; i < n; i++) {
        const float *v = e + (size_t)i * (size_t)E;
        if (json) printf("    {\n      \"object\": \"embedding\",\n      \"index\": %d,\n      \"embedding\": [", i);
        else if (array) printf("%s[", i ? "," : "");
        else printf("embedding %d: ", i);
        for (int32_t k = 0; k < E; k++) {
            if (json || array) printf("%s%.9g", k ? "," : "", (double)v[k]);
            else printf("%9.6f ", (double)v[k]);
        }
        if (json) printf("]\n    }%s\n", i + 1 < n ? "," : "");
        else if (array) printf("]");
        else printf("\n");
    }
    if (json) printf("  ]\n}\n");
    else if (array) printf("]\n");
    if (json || array || n < 2) return;
    printf("\ncosine similarity matrix:\n\n");
    for (int32_t i = 0; i < n; i++) {
        for (int32_t j = 0; j < n; j++) {
            const float *a = e + (size_t)i * (size_t)E, *b = e + (size_t)j * (size_t)E;
            double ab = 0, aa = 0, bb = 0;
            for (int32_t k = 0; k < E; k++) {
                ab += (double)a[k] * b[k];
                aa += (double)a[k] * a[k];
                bb += (double)b[k] * b[k];
            }
            printf("%6.2f ", aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0);
        }
        printf("\n");
    }
}

int vx_cmd_embed(int argc, char **argv) {
    const char *path = getenv("VX_MODEL"), *prompt = NULL, *pfile = NULL, *sep = "\n", *fmt = "";
    long n_ctx = 0, n_batch = 512, threads = 0, norm = 2;
    vx_pooling pooling = VX_POOLING_UNSPECIFIED;
    vx_model_params mp = vx_model_default_params();
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            embed_usage();
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) path = cli_value(&a);
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) prompt = cli_value(&a), pfile = NULL;
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) pfile = cli_value(&a), prompt = NULL;
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) cli_int(&a, 0, 1 << 24, &n_ctx);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) cli_int(&a, 1, 1 << 16, &n_batch);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) cli_int(&a, 0, 512, &threads);
        else if (!strcmp(o, "--embd-normalize")) cli_int(&a, -1, 1 << 16, &norm);
        else if (!strcmp(o, "--embd-separator")) sep = cli_value(&a);
        else if (!strcmp(o, "--no-mmap")) mp.use_mmap = false;
        else if (!strcmp(o, "--embd-output-format")) {
            fmt = cli_value(&a);
            if (fmt && strcmp(fmt, "") && strcmp(fmt, "array") && strcmp(fmt, "json")) {
                fprintf(stderr, "error: --embd-output-format takes '', 'array' or 'json', not '%s'\n", fmt);
                return 2;
            }
        } else if (!strcmp(o, "--pooling")) {
            const char *v = cli_value(&a);
            pooling = vx_pooling_from_name(v);
            if (v && !cli_pooling_ok(v, pooling)) return 2;
        } else if (cli_gpu_option(&a) || cli_llama_option(&a)) {
        } else {
            fprintf(stderr, "error: unknown option '%s'\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if (!cli_model_given(path)) return 2;
    if (!prompt && !pfile) {
        fprintf(stderr, "error: give the texts with -p TEXT or -f FILE\n");
        return 2;
    }
    char *text = pfile ? cli_read_file(pfile, NULL) : strdup(prompt);
    if (!text) return 1;
    char **texts = NULL;
    const int32_t n = split_texts(text, *sep ? sep : "\n", &texts);
    if (n <= 0) {
        fprintf(stderr, n < 0 ? "error: out of memory\n" : "error: no text to embed\n");
        free(texts);
        free(text);
        return n < 0 ? 1 : 2;
    }
    int rc = 1;
    vx_token **toks = calloc((size_t)n, sizeof *toks);
    int32_t *nt = calloc((size_t)n, sizeof *nt), longest = 0;
    float *out = NULL;
    vx_context *c = NULL;
    vx_model *m = toks && nt ? cli_load_model_ex(path, &mp) : NULL;
    if (!m) goto done;
    const vx_vocab *v = vx_model_get_vocab(m);
    for (int32_t i = 0; i < n; i++) {
        /* as llama-embedding: the vocabulary's BOS / EOS (an embedding model's EOS is its pooled token) */
        if ((nt[i] = cli_tokenize(v, texts[i], (int32_t)strlen(texts[i]), true, true, 0, &toks[i])) < 0) goto done;
        if (nt[i] > longest) longest = nt[i];
    }
    if ((pooling = cli_model_pooling(m, pooling)) == VX_POOLING_UNSPECIFIED) {
        rc = 2;
        goto done;
    }
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = (uint32_t)(n_ctx ? n_ctx : longest);
    if (cp.n_ctx > (uint32_t)vx_model_n_ctx_train(m)) cp.n_ctx = (uint32_t)vx_model_n_ctx_train(m);
    cp.n_batch = (uint32_t)n_batch;
    /* an encoder's texts go whole into a batch (a longer one than the
     * context is refused below, with its length) */
    if (vx_model_is_encoder(m) && cp.n_batch < (uint32_t)longest)
        cp.n_batch = (uint32_t)longest < cp.n_ctx ? (uint32_t)longest : cp.n_ctx;
    cp.n_seq_max = (uint32_t)(n < 8 ? n : 8); /* short texts share a batch, as llama-embedding's */
    cp.kv_size = cp.n_seq_max * (uint32_t)vx_kv_whole_blocks(cp.n_ctx); /* whole blocks each */
    cp.n_threads = (int32_t)threads;
    char err[VX_ERRMSG_MAX];
    if (vx_context_init(m, &cp, &c, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    const int32_t E = vx_model_n_embd(m);
    out = malloc((size_t)n * (size_t)E * sizeof *out);
    if (!out) goto done;
    fprintf(stderr, "pooling: %s, normalization: %ld, %d text%s\n", vx_pooling_name(pooling), norm, n,
            n == 1 ? "" : "s");
    for (int32_t i = 0; i < n; i++)
        if ((uint32_t)nt[i] > vx_context_n_ctx(c)) {
            fprintf(stderr, "error: text %d has %d tokens; the context holds %u (-c)\n", i, nt[i],
                    vx_context_n_ctx(c));
            goto done;
        }
    const vx_status st = vx_embed_texts(c, (const vx_token *const *)toks, nt, n, pooling, out);
    if (st != VX_OK) {
        fprintf(stderr, "error: %s%s%s\n", vx_status_str(st), vx_context_errmsg(c)[0] ? ": " : "",
                vx_context_errmsg(c));
        goto done;
    }
    for (int32_t i = 0; i < n; i++) vx_embd_normalize(out + (size_t)i * (size_t)E, E, (int32_t)norm);
    print_vectors(out, n, E, fmt ? fmt : "");
    rc = 0;
done:
    for (int32_t i = 0; toks && i < n; i++) free(toks[i]);
    free(toks);
    free(nt);
    free(out);
    free(texts);
    free(text);
    vx_context_free(c);
    vx_model_free(m);
    return rc;
}
