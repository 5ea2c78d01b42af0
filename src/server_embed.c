/*
 * server_embed.c - POST /v1/embeddings (see server_embed.h).
 *
 * The inputs of a request become engine embedding requests, submitted a
 * window at a time so that a request of 2,048 inputs neither fills the
 * engine's queue nor starves other clients for long. Their final events
 * (engine thread) copy each vector into the run's table under its mutex;
 * the connection thread waits there. The run is reference-counted (one for
 * the connection thread, one per request in the engine), so a client that
 * leaves early cancels what is in flight and the last event frees it.
 */
#include "server_embed.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

/* ---------------------------------------------------------------- request */

void vx_oai_embed_request_free(vx_oai_embed_request *r) {
    for (int32_t i = 0; r->inputs && i < r->n_inputs; i++) free(r->inputs[i]);
    free(r->inputs);
    free(r->n_tokens);
    free(r->model);
    memset(r, 0, sizeof *r);
}

/* Input i: a string (tokenized) or an array of ids. */
static bool parse_input(const cJSON *x, int32_t i, bool one, const vx_vocab *v, vx_oai_embed_request *r,
                        vx_oai_error *err) {
    char param[48];
    if (one) snprintf(param, sizeof param, "input");
    else snprintf(param, sizeof param, "input[%d]", (int)i);
    bool ok;
    if (cJSON_IsString(x) && !x->valuestring[0]) {
        vx_oai_set_error(err, 400, param, "Invalid '%s': the input is an empty string.", param);
        return false;
    }
    if (cJSON_IsString(x))
        ok = vx_oai_tokenize_text(v, x->valuestring, strlen(x->valuestring), true, true, &r->inputs[i],
                                  &r->n_tokens[i], err);
    else if (cJSON_IsArray(x))
        ok = vx_oai_parse_ids(x, param, vx_vocab_n_tokens(v), &r->inputs[i], &r->n_tokens[i], err);
    else
        return vx_oai_type_error(err, param, "a string or an array of token ids", x);
    if (ok && r->n_tokens[i] == 0) {
        vx_oai_set_error(err, 400, param, "Invalid '%s': the input is empty.", param);
        return false;
    }
    r->n_tokens_total += ok ? r->n_tokens[i] : 0;
    return ok;
}

static bool parse_inputs(const cJSON *in, const vx_vocab *v, int32_t n_ctx, vx_oai_embed_request *r,
                         vx_oai_error *err) {
    if (!in) {
        vx_oai_set_error(err, 400, "input", "Missing required parameter: 'input'.");
        return false;
    }
    /* one input: a string or an array of ids; else an array of them */
    bool one = cJSON_IsString(in);
    if (cJSON_IsArray(in)) {
        const cJSON *first = cJSON_GetArrayItem(in, 0);
        one = cJSON_IsNumber(first);
        if (!first) {
            vx_oai_set_error(err, 400, "input", "Invalid 'input': empty array.");
            return false;
        }
    } else if (!one) {
        return vx_oai_type_error(err, "input", "a string or an array", in);
    }
    const int32_t n = one ? 1 : cJSON_GetArraySize(in);
    if (n > VX_OAI_MAX_INPUTS) {
        vx_oai_set_error(err, 400, "input", "Invalid 'input': %d inputs; at most %d are allowed per request.", (int)n,
                         VX_OAI_MAX_INPUTS);
        return false;
    }
    r->inputs = calloc((size_t)n, sizeof *r->inputs);
    r->n_tokens = calloc((size_t)n, sizeof *r->n_tokens);
    if (!r->inputs || !r->n_tokens) {
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
        return false;
    }
    r->n_inputs = n;
    for (int32_t i = 0; i < n; i++) {
        if (!parse_input(one ? in : cJSON_GetArrayItem(in, i), i, one, v, r, err)) return false;
        if (r->n_tokens[i] > n_ctx && r->truncate) { /* its start kept */
            r->n_tokens_total -= r->n_tokens[i] - n_ctx;
            r->n_tokens[i] = n_ctx;
        }
        if (r->n_tokens[i] > n_ctx) {
            char param[48];
            if (one) snprintf(param, sizeof param, "input");
            else snprintf(param, sizeof param, "input[%d]", (int)i);
            vx_oai_set_error(err, 400, param,
                             "This model's maximum context length is %d tokens, however you requested %d tokens "
                             "in input %d. Please reduce the length of the input.",
                             (int)n_ctx, (int)r->n_tokens[i], (int)i);
            err->code = "context_length_exceeded";
            return false;
        }
    }
    return true;
}

bool vx_oai_parse_embeddings(const char *body, size_t len, const vx_vocab *v, int32_t n_ctx, int32_t n_embd,
                             bool legacy, vx_oai_embed_request *out, vx_oai_error *err) {
    memset(out, 0, sizeof *out);
    cJSON *root = vx_oai_parse_json_object(body, len, err);
    if (!root) return false;
    bool ok = false;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model)) {
            vx_oai_type_error(err, "model", "a string", model);
            goto done;
        }
        if (!(out->model = strdup(model->valuestring))) {
            vx_oai_set_error(err, 500, NULL, "Out of memory.");
            goto done;
        }
    }
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64"))) {
            vx_oai_set_error(err, 400, "encoding_format",
                             "Invalid 'encoding_format': expected 'float' or 'base64'.");
            goto done;
        }
        out->base64 = !strcmp(fmt->valuestring, "base64");
    }
    if (user && !cJSON_IsNull(user) && !cJSON_IsString(user)) {
        vx_oai_type_error(err, "user", "a string", user);
        goto done;
    }
    int64_t dims = 0, norm = 2; /* absent: all values, Euclidean */
    if (!vx_oai_opt_int(root, "dimensions", 1, n_embd, &dims, NULL, err) ||
        !vx_oai_opt_int(root, "embd_normalize", -1, 1 << 16, &norm, NULL, err))
        goto done;
    out->dimensions = (int32_t)dims;
    out->normalize = (int32_t)norm;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (!in || cJSON_IsNull(in)) { /* llama-server's name, and its format */
        in = cJSON_GetObjectItemCaseSensitive(root, "content");
        legacy |= in && !cJSON_IsNull(in);
    }
    out->legacy = legacy;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "truncate");
    if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr)) {
        vx_oai_type_error(err, "truncate", "a boolean", tr);
        goto done;
    }
    out->truncate = cJSON_IsTrue(tr);
    ok = parse_inputs(in && !cJSON_IsNull(in) ? in : NULL, v, n_ctx, out, err);
done:
    cJSON_Delete(root);
    if (!ok) vx_oai_embed_request_free(out);
    return ok;
}

/* -------------------------------------------------------------------- run */

typedef struct run run;
typedef struct slot {
    run *run;
    int32_t index;
} slot;

struct run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int32_t n, n_done, n_embd;
    float *vecs;      /* [n][n_embd] */
    slot *slots;      /* [n]: the events' user data */
    uint64_t *ids;    /* [n] engine ids of the submitted */
    bool abandoned;   /* the connection thread left: drop the vectors */
    bool failed;
    vx_status fail_st; /* ECANCELED (the engine canceled one: shutting down) or EINTERNAL */
    char error[VX_ERRMSG_MAX];
};

static void run_unref(run *r) {
    pthread_mutex_lock(&r->mu);
    const bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last) return;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->vecs);
    free(r->slots);
    free(r->ids);
    free(r);
}

/* Engine thread: an embedding request's one (final) event. */
static bool on_event(const vx_token_event *ev, void *ud) {
    slot *s = ud;
    run *r = s->run;
    if (ev->finish == VX_FINISH_NONE) return true;
    pthread_mutex_lock(&r->mu);
    if (ev->finish == VX_FINISH_STOP && ev->embd && ev->n_embd == r->n_embd) {
        if (!r->abandoned) memcpy(r->vecs + (size_t)s->index * (size_t)r->n_embd, ev->embd,
                                  (size_t)r->n_embd * sizeof *r->vecs);
    } else if (!r->failed) {
        r->failed = true;
        r->fail_st = ev->finish == VX_FINISH_CANCELED ? VX_ECANCELED : VX_EINTERNAL;
        snprintf(r->error, sizeof r->error, "%s",
                 ev->finish == VX_FINISH_CANCELED ? "The request was canceled."
                                                  : ev->error ? ev->error : "the embedding failed");
    }
    r->n_done++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    run_unref(r);
    return true;
}

/* Cancels the submitted requests [0, n_sub) that have not finished, leaves
 * the run to their events, and returns st. */
static vx_status abandon(vx_engine *e, run *r, int32_t n_sub, vx_status st) {
    pthread_mutex_lock(&r->mu);
    r->abandoned = true;
    pthread_mutex_unlock(&r->mu);
    for (int32_t i = 0; i < n_sub; i++) vx_engine_cancel(e, r->ids[i]); /* finished ids are ignored */
    run_unref(r);
    return st;
}

vx_status vx_embed_run(vx_engine *e, const vx_oai_embed_request *q, vx_pooling pooling, int32_t window,
                       int32_t n_embd, bool (*gone)(void *ud), void *ud, float **out, char *err, size_t err_size) {
    *out = NULL;
    run *r = calloc(1, sizeof *r);
    const size_t n = (size_t)q->n_inputs;
    if (r) {
        r->vecs = malloc(n * (size_t)n_embd * sizeof *r->vecs);
        r->slots = malloc(n * sizeof *r->slots);
        r->ids = malloc(n * sizeof *r->ids);
    }
    if (!r || !r->vecs || !r->slots || !r->ids) {
        if (r) free(r->vecs), free(r->slots), free(r->ids), free(r);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->n = q->n_inputs;
    r->n_embd = n_embd;
    if (window < 1) window = 1;
    int32_t n_sub = 0;
    for (;;) {
        /* keep the window full */
        pthread_mutex_lock(&r->mu);
        const int32_t seen = r->n_done;
        int32_t in_flight = n_sub - seen;
        const bool failed = r->failed, all = seen == r->n;
        pthread_mutex_unlock(&r->mu);
        if (failed) {
            snprintf(err, err_size, "%s", r->error);
            return abandon(e, r, n_sub, r->fail_st);
        }
        if (all) break;
        while (n_sub < r->n && in_flight < window) {
            vx_request_params rp;
            memset(&rp, 0, sizeof rp);
            rp.prompt = q->inputs[n_sub];
            rp.n_prompt = q->n_tokens[n_sub];
            rp.embed = true;
            rp.pooling = pooling;
            rp.on_event = on_event;
            r->slots[n_sub] = (slot){r, n_sub};
            rp.user_data = &r->slots[n_sub];
            pthread_mutex_lock(&r->mu);
            r->refs++; /* the engine's, until the final event */
            pthread_mutex_unlock(&r->mu);
            const vx_status st = vx_engine_submit(e, &rp, &r->ids[n_sub], err, err_size);
            if (st != VX_OK) {
                pthread_mutex_lock(&r->mu);
                r->refs--; /* no event will come */
                pthread_mutex_unlock(&r->mu);
                /* the queue is full: retry when one of ours finishes, or
                 * (none in flight) in a while, unless nothing started yet */
                if (st == VX_EFULL && n_sub > 0) break;
                return abandon(e, r, n_sub, st);
            }
            n_sub++;
            in_flight++;
        }
        if (gone && gone(ud)) return abandon(e, r, n_sub, VX_ECANCELED);
        /* wait for an event (or 100 ms, to ask about the client again) */
        pthread_mutex_lock(&r->mu);
        if (r->n_done == seen) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000L;
            ts.tv_sec += ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        }
        pthread_mutex_unlock(&r->mu);
    }
    *out = r->vecs;
    r->vecs = NULL;
    run_unref(r);
    return VX_OK;
}

/* --------------------------------------------------------------- response */

static void base64(vx_sbuf *b, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        const char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63], i + 1 < n ? tab[v >> 6 & 63] : '=',
                           i + 2 < n ? tab[v & 63] : '='};
        vx_sbuf_add(b, q, 4);
    }
}

/* A vector's first dims values as a JSON array (NaN and infinities have
 * no JSON spelling: null). */
static void json_floats(vx_sbuf *b, const float *v, int32_t dims) {
    vx_sbuf_adds(b, "[");
    for (int32_t k = 0; k < dims; k++) vx_sbuf_addf(b, isfinite(v[k]) ? "%s%.9g" : "%snull", k ? "," : "", (double)v[k]);
    vx_sbuf_adds(b, "]");
}

/* ollama's /api/embed and /api/embeddings answers. */
static char *ollama_json(const vx_oai_embed_request *r, const char *model, float *vecs, int32_t n_embd, int32_t dims) {
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, r->ollama == 2 ? "{\"embedding\":" : "{\"model\":");
    if (r->ollama == 1) {
        vx_oai_json_cstr(&b, model);
        vx_sbuf_adds(&b, ",\"embeddings\":[");
    }
    for (int32_t i = 0; i < r->n_inputs; i++) {
        float *v = vecs + (size_t)i * (size_t)n_embd;
        vx_embd_normalize(v, dims, r->normalize);
        if (i) vx_sbuf_adds(&b, ",");
        json_floats(&b, v, dims);
        if (r->ollama == 2) break; /* one prompt */
    }
    if (r->ollama == 2) vx_sbuf_adds(&b, "}");
    else
        vx_sbuf_addf(&b, "],\"total_duration\":%lld,\"load_duration\":0,\"prompt_eval_count\":%lld}",
                     (long long)r->elapsed_ns, (long long)r->n_tokens_total);
    return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
}

char *vx_oai_embeddings_json(const vx_oai_embed_request *r, const char *model, float *vecs, int32_t n_embd) {
    const int32_t dims = r->dimensions > 0 && r->dimensions < n_embd ? r->dimensions : n_embd;
    if (r->ollama) return ollama_json(r, model, vecs, n_embd, dims);
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, r->legacy ? "[" : "{\"object\":\"list\",\"data\":[");
    for (int32_t i = 0; i < r->n_inputs; i++) {
        float *v = vecs + (size_t)i * (size_t)n_embd;
        vx_embd_normalize(v, dims, r->normalize);
        if (r->legacy) vx_sbuf_addf(&b, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", (int)i);
        else vx_sbuf_addf(&b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", (int)i);
        if (r->base64 && !r->legacy) { /* the bytes of little-endian float32 values (x86) */
            vx_sbuf_adds(&b, "\"");
            base64(&b, (const unsigned char *)v, (size_t)dims * sizeof *v);
            vx_sbuf_adds(&b, "\"}");
            continue;
        }
        json_floats(&b, v, dims);
        vx_sbuf_adds(&b, r->legacy ? "]}" : "}");
    }
    if (r->legacy) {
        vx_sbuf_adds(&b, "]");
        return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
    }
    vx_sbuf_adds(&b, "],\"model\":");
    vx_oai_json_cstr(&b, model);
    vx_sbuf_addf(&b, ",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}", (long long)r->n_tokens_total,
                 (long long)r->n_tokens_total);
    return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
}
