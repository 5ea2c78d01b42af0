/* cli.c - argument and loading helpers shared by the subcommands. */
#include "cli.h"

#include "chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_value(cli_args *a) {
    if (a->i + 1 >= a->argc) {
        fprintf(stderr, "error: option %s needs a value\n", a->argv[a->i]);
        a->error = true;
        return NULL;
    }
    a->i++;
    return a->argv[a->i];
}

bool cli_int(cli_args *a, long lo, long hi, long *out) {
    const char *opt = a->argv[a->i];
    const char *v = cli_value(a);
    if (!v) return false;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "error: %s expects an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, v);
        a->error = true;
        return false;
    }
    *out = x;
    return true;
}

bool cli_float(cli_args *a, double lo, double hi, float *out) {
    const char *opt = a->argv[a->i];
    const char *v = cli_value(a);
    if (!v) return false;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "error: %s expects a number in [%g, %g], got '%s'\n", opt, lo, hi, v);
        a->error = true;
        return false;
    }
    *out = (float)x;
    return true;
}

bool cli_u64(cli_args *a, uint64_t *out) {
    const char *opt = a->argv[a->i];
    const char *v = cli_value(a);
    if (!v) return false;
    char *end;
    errno = 0;
    long long sx = strtoll(v, &end, 10);
    if (errno || *end || end == v) {
        fprintf(stderr, "error: %s expects an integer, got '%s'\n", opt, v);
        a->error = true;
        return false;
    }
    *out = sx < 0 ? UINT64_MAX : (uint64_t)sx; /* -1 = random, as in llama.cpp */
    return true;
}

static bool progress_cb(float p, void *ud) {
    (void)ud;
    fprintf(stderr, "\rloading model %3d%%", (int)(p * 100));
    if (p >= 1.0f) fprintf(stderr, "\r\033[K");
    return true;
}

bool cli_generative(const vx_model *m) {
    if (!vx_model_is_encoder(m)) return true;
    fprintf(stderr, "error: this is an embedding model (%s, an encoder without an output head): it does not "
                    "generate text; use vx embed, or vx serve's /v1/embeddings\n",
            vx_model_arch(m));
    return false;
}

vx_model *cli_load_model(const char *path, bool vocab_only) {
    vx_model_params mp = vx_model_default_params();
    mp.vocab_only = vocab_only;
    return cli_load_model_ex(path, &mp);
}

bool cli_model_given(const char *path) {
    if (path) return true;
    fprintf(stderr, "error: no model given: use -m FILE.gguf (or set VX_MODEL)\n");
    return false;
}

/* The process group the program runs in (vx.c), and -ts's shares: the
 * process's own state, as MPI's world is. */
static struct {
    vx_dist *dist;
    float split[CLI_MAX_SPLIT];
    int n_split;
} group;

void cli_set_group(vx_dist *d) { group.dist = d; }

static vx_model *load_model(const char *path, const vx_model_params *params, bool in_group) {
    if (!path) {
        fprintf(stderr, "error: no model given (use -m FILE.gguf)\n");
        return NULL;
    }
    vx_model_params mp = *params;
    if (in_group && !mp.vocab_only && vx_dist_size(group.dist) > 1) {
        if (group.n_split && group.n_split != vx_dist_size(group.dist)) {
            fprintf(stderr, "error: --tensor-split gives %d shares for %d processes\n", group.n_split,
                    vx_dist_size(group.dist));
            return NULL;
        }
        mp.dist = group.dist;
        mp.layer_split = group.n_split ? group.split : NULL;
    }
    if (isatty(2)) mp.progress = progress_cb;
    vx_model *m = NULL;
    char err[VX_ERRMSG_MAX];
    vx_status st = vx_model_load(path, &mp, &m, err, sizeof err);
    if (st != VX_OK) {
        if (isatty(2)) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "error: cannot load model: %s\n", err);
        return NULL;
    }
    return m;
}

vx_model *cli_load_model_ex(const char *path, const vx_model_params *params) {
    return load_model(path, params, true);
}

vx_model *cli_load_local_model(const char *path, const vx_model_params *params) {
    return load_model(path, params, false);
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0) break;
        n += r;
    }
    const int rerr = ferror(f) ? errno : 0; /* a directory: EISDIR */
    fclose(f);
    if (!buf) {
        fprintf(stderr, "error: %s: out of memory\n", path);
        return NULL;
    }
    if (rerr) {
        fprintf(stderr, "error: %s: %s\n", path, strerror(rerr));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

bool cli_kv_type(const char *s, vx_kv_type *out) {
    if (strcmp(s, "f16") == 0 || strcmp(s, "F16") == 0) *out = VX_KV_F16;
    else if (strcmp(s, "f32") == 0 || strcmp(s, "F32") == 0) *out = VX_KV_F32;
    else if (strcmp(s, "q8_0") == 0 || strcmp(s, "Q8_0") == 0) *out = VX_KV_Q8_0;
    else {
        fprintf(stderr, "error: unknown KV cache type '%s' (use f16, f32 or q8_0)\n", s);
        return false;
    }
    return true;
}

bool cli_sampling_option(cli_args *a, vx_sampler_params *sp) {
    const char *o = a->argv[a->i];
    long k;
    if (!strcmp(o, "--temp")) cli_float(a, 0, 100, &sp->temperature);
    else if (!strcmp(o, "--top-k")) { /* <= 0: off, as in llama.cpp and the server's top_k */
        if (cli_int(a, -1, 1 << 24, &k)) sp->top_k = (int32_t)k;
    } else if (!strcmp(o, "--top-p")) cli_float(a, 0, 1, &sp->top_p);
    else if (!strcmp(o, "--min-p")) cli_float(a, 0, 1, &sp->min_p);
    else if (!strcmp(o, "--repeat-penalty")) cli_float(a, 0, 100, &sp->repeat_penalty);
    else if (!strcmp(o, "--repeat-last-n")) {
        if (cli_int(a, -1, 1 << 24, &k)) sp->penalty_last_n = (int32_t)k;
    } else if (!strcmp(o, "--presence-penalty")) cli_float(a, -100, 100, &sp->presence_penalty);
    else if (!strcmp(o, "--frequency-penalty")) cli_float(a, -100, 100, &sp->frequency_penalty);
    else if (!strcmp(o, "-s") || !strcmp(o, "--seed")) cli_u64(a, &sp->seed);
    else return false;
    return true;
}

int32_t cli_piece(const vx_vocab *v, vx_token t, bool special, char **buf, int32_t *cap) {
    int32_t n = vx_token_to_piece(v, t, *buf, *buf ? *cap : 0, special);
    if (n >= 0) return n;
    char *nb = realloc(*buf, (size_t)-n);
    if (!nb) return -1;
    *buf = nb;
    *cap = -n;
    return vx_token_to_piece(v, t, *buf, *cap, special);
}

/* -ts / --tensor-split A,B,...: each process's share of the layers. */
static bool split_option(cli_args *a) {
    const char *o = a->argv[a->i], *v = cli_value(a);
    if (!v) return true;
    int n = 0;
    for (const char *p = v; *p && !a->error; n++) {
        char *end;
        errno = 0;
        const double x = strtod(p, &end);
        if (errno || end == p || !(x > 0) || x > 1e6 || n == CLI_MAX_SPLIT || (*end && *end != ',' && *end != '/')) {
            fprintf(stderr, "error: %s expects up to %d positive shares such as 1,3, got '%s'\n", o,
                    CLI_MAX_SPLIT, v);
            a->error = true;
            break;
        }
        group.split[n] = (float)x;
        p = *end ? end + 1 : end;
    }
    group.n_split = a->error ? 0 : n;
    if (!a->error && vx_dist_size(group.dist) <= 1)
        fprintf(stderr, "note: %s ignored: one process runs the whole model (start several with mpirun)\n", o);
    return true;
}

bool cli_gpu_option(cli_args *a) {
    const char *o = a->argv[a->i];
    if (!strcmp(o, "-ts") || !strcmp(o, "--tensor-split")) return split_option(a);
    if (strcmp(o, "-ngl") && strcmp(o, "--n-gpu-layers") && strcmp(o, "--gpu-layers") && strcmp(o, "-ngld") &&
        strcmp(o, "--n-gpu-layers-draft") && strcmp(o, "--gpu-layers-draft"))
        return false;
    if (cli_value(a)) fprintf(stderr, "note: %s ignored: vx runs on the CPU\n", o);
    return true;
}

bool cli_llama_option(cli_args *a) {
    static const struct {
        const char *opt[3];
        bool value; /* takes an optional value: on / off / auto / 0 / 1 */
        const char *why;
    } known[] = {
        {{"--jinja"}, false, "chat templates are always Jinja here"},
        {{"-fa", "--flash-attn"}, true, "attention is always tiled with an online softmax here"},
        {{"-cb", "--cont-batching"}, false, "batching is always continuous here"},
        {{"--metrics"}, false, "/metrics is always served"},
        {{"--mlock", "--no-mmap"}, false, "vx holds the weights its own way (packed copies in memory, else the file mapped)"},
        {{"--no-webui"}, false, "there is no web UI"},
    };
    const char *o = a->argv[a->i];
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        for (int i = 0; i < 3 && known[k].opt[i]; i++) {
            if (strcmp(o, known[k].opt[i])) continue;
            const char *v = a->i + 1 < a->argc ? a->argv[a->i + 1] : NULL;
            if (known[k].value && v &&
                (!strcmp(v, "on") || !strcmp(v, "off") || !strcmp(v, "auto") || !strcmp(v, "0") || !strcmp(v, "1")))
                a->i++;
            fprintf(stderr, "note: %s ignored: %s\n", o, known[k].why);
            return true;
        }
    return false;
}

char *cli_chat_template_source(const vx_model *m, const char *name) {
    if (name) {
        const char *builtin = vx_chat_template_builtin(name);
        if (builtin) return strdup(builtin);
        char *src = cli_read_file(name, NULL);
        if (!src)
            fprintf(stderr, "error: '%s' is neither a built-in chat template nor a readable file\n", name);
        return src;
    }
    int32_t n = vx_model_meta_str(m, "tokenizer.chat_template", NULL, 0);
    if (n >= 0) {
        char *src = malloc((size_t)n + 1);
        if (src) vx_model_meta_str(m, "tokenizer.chat_template", src, (size_t)n + 1);
        return src;
    }
    if (!vx_model_is_encoder(m)) fprintf(stderr, "note: the model has no chat template; using chatml\n");
    return strdup(vx_chat_template_builtin("chatml"));
}

int32_t cli_tokenize(const vx_vocab *v, const char *text, int32_t len, bool add_special, bool parse_special,
                     int32_t min_cap, vx_token **out) {
    int32_t cap = len < INT32_MAX - 16 ? len + 16 : len;
    if (cap < min_cap) cap = min_cap;
    for (int attempt = 0; attempt < 2; attempt++) {
        vx_token *t = malloc((size_t)cap * sizeof *t);
        if (!t) break;
        const int32_t n = vx_tokenize(v, text, len, t, cap, add_special, parse_special);
        if (n >= 0) {
            *out = t;
            return n;
        }
        free(t);
        if (n == INT32_MIN) break;
        cap = -n > min_cap ? -n : min_cap; /* what it needs */
    }
    fprintf(stderr, "error: out of memory while tokenizing\n");
    *out = NULL;
    return -1;
}

bool cli_pooling_ok(const char *v, vx_pooling p) {
    if (p == VX_POOLING_MEAN || p == VX_POOLING_LAST || p == VX_POOLING_CLS) return true;
    fprintf(stderr, "error: --pooling takes mean, cls or last, not '%s'\n", v);
    return false;
}

vx_pooling cli_model_pooling(const vx_model *m, vx_pooling asked) {
    const vx_pooling p = asked != VX_POOLING_UNSPECIFIED ? asked : vx_model_pooling(m);
    if (vx_model_is_encoder(m)) /* its every token sees the whole text: any pooling, mean by default */
        return p == VX_POOLING_CLS || p == VX_POOLING_LAST ? p : VX_POOLING_MEAN;
    if (p == VX_POOLING_MEAN || p == VX_POOLING_LAST) return p;
    if (asked == VX_POOLING_CLS) {
        fprintf(stderr, "error: --pooling cls pools the first token, which in a causal model has seen nothing after "
                        "it: every text would get the same vector; use last or mean\n");
        return VX_POOLING_UNSPECIFIED;
    }
    if (p == VX_POOLING_CLS)
        fprintf(stderr, "note: the file pools by cls, which a causal model cannot use (its first token sees "
                        "nothing else); pooling by last\n");
    return VX_POOLING_LAST;
}
