/*
 * server_llamacpp.c - llama-server's /completion, /infill and /props:
 * requests translated into OpenAI completion ones, replies in
 * llama-server's shapes (see server_llamacpp.h).
 */
#include "server_llamacpp.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields that mean the same in the OpenAI request (vx reads llama.cpp's
 * top_k, min_p, repeat_penalty, repeat_last_n and ignore_eos there too) */
static const char *const same_name[] = {"model",          "temperature",   "top_k",      "top_p",
                                        "min_p",          "presence_penalty", "frequency_penalty",
                                        "repeat_penalty", "repeat_last_n", "stop",       "stream",
                                        "ignore_eos",     "response_format", "grammar"};
/* llama-server's defaults (its CLI's) */
static const struct {
    const char *key;
    double value;
} defaults[] = {{"temperature", 0.8}, {"top_k", 40}, {"top_p", 0.95}, {"min_p", 0.05}};

/* Samplers vx does not have: refused when a request turns one on (the
 * value that turns it off passes: clients send whole settings objects) */
static const struct {
    const char *key;
    double off;
} inactive[] = {{"mirostat", 0}, {"typical_p", 1}, {"xtc_probability", 0}, {"dry_multiplier", 0},
                {"dynatemp_range", 0}};

static bool refuse_active(const cJSON *root, vx_oai_error *err) {
    for (size_t i = 0; i < sizeof inactive / sizeof inactive[0]; i++) {
        const cJSON *x = vx_oai_member(root, inactive[i].key);
        if (!x) continue;
        if (!cJSON_IsNumber(x)) return vx_oai_type_error(err, inactive[i].key, "a number", x);
        if (x->valuedouble != inactive[i].off && !(inactive[i].off == 1 && x->valuedouble >= 1)) {
            vx_oai_set_error(err, 400, inactive[i].key,
                             "'%s' is not supported by vx (its samplers: penalties, top_k, top_p, min_p, "
                             "temperature); leave it at %g.",
                             inactive[i].key, inactive[i].off);
            return false;
        }
    }
    const cJSON *lora = vx_oai_member(root, "lora");
    if (lora && (!cJSON_IsArray(lora) || cJSON_GetArraySize(lora) > 0)) {
        vx_oai_set_error(err, 400, "lora", "LoRA adapters are not supported.");
        return false;
    }
    return true;
}

/* logit_bias in llama-server's forms: [[token, bias], ...] (a bias false:
 * never; a token may be a string: each of its tokens) or OpenAI's object,
 * into OpenAI's object. */
static bool map_logit_bias(const cJSON *root, cJSON *o, const vx_vocab *v, vx_oai_error *err) {
    const cJSON *lb = vx_oai_member(root, "logit_bias");
    if (!lb) return true;
    if (cJSON_IsObject(lb)) return vx_oai_copy_member(o, "logit_bias", lb) || vx_oai_oom(err);
    if (!cJSON_IsArray(lb)) return vx_oai_type_error(err, "logit_bias", "an array of [token, bias] pairs", lb);
    if (cJSON_GetArraySize(lb) > VX_OAI_MAX_BIAS) { /* before the per-pair work */
        vx_oai_set_error(err, 400, "logit_bias", "'logit_bias' has more than %d entries.", VX_OAI_MAX_BIAS);
        return false;
    }
    cJSON *m = cJSON_AddObjectToObject(o, "logit_bias");
    if (!m) return vx_oai_oom(err);
    const cJSON *pair;
    cJSON_ArrayForEach(pair, lb) {
        const cJSON *t = cJSON_GetArrayItem(pair, 0), *b = cJSON_GetArrayItem(pair, 1);
        if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 || !(cJSON_IsNumber(t) || cJSON_IsString(t)) ||
            !(cJSON_IsNumber(b) || cJSON_IsBool(b)))
            return vx_oai_type_error(err, "logit_bias", "an array of [token, bias] pairs", pair);
        const double bias = cJSON_IsFalse(b) ? -100.0 : cJSON_IsTrue(b) ? 0.0 : b->valuedouble;
        if (!isfinite(bias)) {
            vx_oai_set_error(err, 400, "logit_bias", "Invalid value for 'logit_bias': a bias is out of range.");
            return false;
        }
        if (cJSON_IsNumber(t) && (t->valuedouble != floor(t->valuedouble) || !(t->valuedouble >= 0) ||
                                  t->valuedouble >= vx_vocab_n_tokens(v))) {
            vx_oai_set_error(err, 400, "logit_bias", "Invalid value for 'logit_bias': token %.17g is not an id of the "
                                                     "vocabulary (0 to %d).",
                             t->valuedouble, vx_vocab_n_tokens(v) - 1);
            return false;
        }
        vx_token one = cJSON_IsNumber(t) ? (vx_token)t->valuedouble : -1, *ids = &one;
        int32_t n = 1;
        if (cJSON_IsString(t) &&
            !vx_oai_tokenize_text(v, t->valuestring, strlen(t->valuestring), false, false, &ids, &n, err))
            return false;
        bool ok = true;
        for (int32_t i = 0; i < n && ok; i++) {
            char key[24];
            snprintf(key, sizeof key, "%d", ids[i]);
            cJSON_DeleteItemFromObjectCaseSensitive(m, key);
            ok = cJSON_AddNumberToObject(m, key, bias) != NULL;
        }
        if (ids != &one) free(ids);
        if (!ok) return vx_oai_oom(err);
    }
    return true;
}

/* The sampling and output fields (both endpoints), n_predict, n_probs,
 * response_fields. */
static bool map_common(const cJSON *root, cJSON *o, const vx_vocab *v, vx_lcpp_request *out, vx_oai_error *err) {
    if (!refuse_active(root, err)) return false;
    for (size_t i = 0; i < sizeof same_name / sizeof same_name[0]; i++) {
        const cJSON *x = vx_oai_member(root, same_name[i]);
        if (cJSON_IsNumber(x) && !isfinite(x->valuedouble)) { /* 1e309: JSON's text, but no number (cJSON prints null) */
            vx_oai_set_error(err, 400, same_name[i], "Invalid value for '%s': %s is out of range.", same_name[i],
                             x->valuedouble > 0 ? "+inf" : "-inf");
            return false;
        }
        if (!vx_oai_copy_member(o, same_name[i], x)) return vx_oai_oom(err);
    }
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (!vx_oai_member(o, defaults[i].key) && !cJSON_AddNumberToObject(o, defaults[i].key, defaults[i].value))
            return vx_oai_oom(err);
    if (!vx_oai_member(o, "repeat_last_n") && !cJSON_AddNumberToObject(o, "repeat_last_n", 64)) return vx_oai_oom(err);
    /* seed: -1 (and llama.cpp's default 0xFFFFFFFF) is a random one */
    const cJSON *seed = vx_oai_member(root, "seed");
    if (cJSON_IsNumber(seed) && !isfinite(seed->valuedouble)) {
        vx_oai_set_error(err, 400, "seed", "Invalid value for 'seed': it is out of range.");
        return false;
    }
    if (seed && !(cJSON_IsNumber(seed) && (seed->valuedouble == -1 || seed->valuedouble == 4294967295.0)) &&
        !vx_oai_copy_member(o, "seed", seed))
        return vx_oai_oom(err);
    const cJSON *js = vx_oai_member(root, "json_schema");
    if (js) { /* llama-server's json_schema: the schema itself */
        if (!cJSON_IsObject(js)) return vx_oai_type_error(err, "json_schema", "an object", js);
        cJSON *rf = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(rf, "json_schema");
        cJSON_DeleteItemFromObjectCaseSensitive(o, "response_format");
        if (!rf || !in || !cJSON_AddStringToObject(rf, "type", "json_schema") ||
            !cJSON_AddItemToObject(in, "schema", cJSON_Duplicate(js, true)) ||
            !cJSON_AddItemToObject(o, "response_format", rf)) {
            cJSON_Delete(rf);
            return vx_oai_oom(err);
        }
    }
    if (!map_logit_bias(root, o, v, err)) return false;
    /* n_predict (or max_tokens): any negative value is no limit */
    out->max_tokens = -1;
    const char *npk = vx_oai_member(root, "n_predict") ? "n_predict" : "max_tokens";
    const cJSON *np = vx_oai_member(root, npk);
    if (np) {
        if (!cJSON_IsNumber(np) || np->valuedouble != floor(np->valuedouble))
            return vx_oai_type_error(err, npk, "an integer", np);
        out->max_tokens = np->valuedouble < 0 ? -1 : np->valuedouble > INT32_MAX ? INT32_MAX : (int32_t)np->valuedouble;
        /* 0: llama-server evaluates the prompt and samples one token
         * (llama.vim warms the cache with it) */
        if (out->max_tokens == 0) out->max_tokens = 1;
    }
    /* n_probs (or an OpenAI logprobs count): completion_probabilities */
    const char *pk = vx_oai_member(root, "n_probs") ? "n_probs" : "logprobs";
    const cJSON *npr = vx_oai_member(root, pk);
    if (npr) {
        if (!cJSON_IsNumber(npr) || npr->valuedouble != floor(npr->valuedouble) || npr->valuedouble < 0 ||
            npr->valuedouble > VX_OAI_MAX_TOP) {
            vx_oai_set_error(err, 400, pk, "'%s' must be an integer from 0 to %d.", pk, VX_OAI_MAX_TOP);
            return false;
        }
        out->n_probs = (int32_t)npr->valuedouble;
        if (out->n_probs > 0 && !cJSON_AddNumberToObject(o, "logprobs", out->n_probs)) return vx_oai_oom(err);
    }
    const char *bools[] = {"return_tokens", "post_sampling_probs"};
    bool *dst[] = {&out->return_tokens, &out->post_sampling_probs};
    for (int i = 0; i < 2; i++) {
        const cJSON *b = vx_oai_member(root, bools[i]);
        if (b && !cJSON_IsBool(b)) return vx_oai_type_error(err, bools[i], "a boolean", b);
        *dst[i] = cJSON_IsTrue(b);
    }
    if (out->post_sampling_probs) { /* the sampler's filtered, renormalized candidates */
        vx_oai_set_error(err, 400, "post_sampling_probs",
                         "'post_sampling_probs' is not supported: completion_probabilities are the model's own "
                         "log-probabilities (before sampling).");
        return false;
    }
    /* llama-server's speculative.n_max (0: no drafts), n_min, p_min */
    static const char *const spec[] = {"speculative.n_max", "speculative.n_min", "speculative.p_min"};
    for (int i = 0; i < 3; i++) {
        const cJSON *x = vx_oai_member(root, spec[i]);
        if (!x || cJSON_IsNull(x)) continue;
        const double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        if (!(i < 2 ? d == floor(d) && d >= 0 && d <= 1024 : d >= 0 && d <= 1))
            return vx_oai_type_error(err, spec[i], i < 2 ? "an integer from 0 to 1024" : "a number from 0 to 1", x);
        if (i == 0) out->draft_max = d == 0 ? -1 : (int32_t)d;
        else if (i == 1) out->draft_min = (int32_t)d;
        else out->draft_p_min = d == 0 ? 1e-30f : (float)d;
    }
    const cJSON *rf = vx_oai_member(root, "response_fields");
    if (rf) {
        if (!cJSON_IsArray(rf) || cJSON_GetArraySize(rf) > VX_LCPP_MAX_FIELDS)
            return vx_oai_type_error(err, "response_fields", "an array of at most 32 strings", rf);
        const cJSON *f;
        cJSON_ArrayForEach(f, rf) {
            if (!cJSON_IsString(f)) return vx_oai_type_error(err, "response_fields", "an array of strings", f);
            if (!(out->fields[out->n_fields++] = strdup(f->valuestring))) return vx_oai_oom(err);
        }
    }
    return true;
}

/* Appends n ids to the array a. */
static bool add_ids(cJSON *a, const vx_token *ids, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]))) return false;
    return true;
}

/* A growing token array (for /infill's pieces). */
typedef struct toks {
    vx_token *v;
    int32_t n, cap;
} toks;

static bool toks_add(toks *t, const vx_token *ids, int32_t n) {
    if (t->n + n > t->cap) {
        int32_t cap = VX_MAX(64, t->cap);
        while (cap < t->n + n) cap *= 2;
        vx_token *p = realloc(t->v, (size_t)cap * sizeof *p);
        if (!p) return false;
        t->v = p;
        t->cap = cap;
    }
    if (n) memcpy(t->v + t->n, ids, (size_t)n * sizeof *ids);
    t->n += n;
    return true;
}

/* The tokens of text appended to t (no BOS; special tokens parsed when
 * special). */
static bool toks_text(toks *t, const vx_vocab *v, const char *text, size_t len, bool special, vx_oai_error *err) {
    vx_token *ids = NULL;
    int32_t n = 0;
    if (len && !vx_oai_tokenize_text(v, text, len, false, special, &ids, &n, err)) return false;
    const bool ok = toks_add(t, ids, n);
    free(ids);
    return ok || vx_oai_oom(err);
}

/* /completion's prompt: a string or ids as OpenAI takes them; a mixed
 * array of strings and ids (llama-server's) as ids, the first string with
 * the vocabulary's BOS, special tokens parsed. */
static bool map_prompt(const cJSON *root, cJSON *o, const vx_vocab *v, vx_oai_error *err) {
    const cJSON *p = vx_oai_member(root, "prompt");
    if (!p) {
        vx_oai_set_error(err, 400, "prompt", "'prompt' is required.");
        return false;
    }
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
        (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        p = p->child; /* one prompt in an array */
    bool mixed = false, ints = cJSON_IsArray(p), strs = cJSON_IsArray(p);
    const cJSON *x;
    cJSON_ArrayForEach(x, (cJSON_IsArray(p) ? p : NULL)) {
        mixed |= cJSON_IsString(x);
        ints &= cJSON_IsNumber(x);
        strs &= cJSON_IsString(x); /* several strings: several prompts */
        if ((!cJSON_IsString(x) && !cJSON_IsNumber(x)) || (strs && x->next == NULL && x != p->child)) {
            vx_oai_set_error(err, 400, "prompt",
                             "'prompt' must be a string, token ids, or one array of strings and ids (several "
                             "prompts in one request are not supported).");
            return false;
        }
    }
    if (cJSON_IsString(p) || ints || cJSON_GetArraySize(p) == 0 || !mixed)
        return vx_oai_copy_member(o, "prompt", p) || vx_oai_oom(err);
    cJSON *ids = cJSON_AddArrayToObject(o, "prompt");
    if (!ids) return vx_oai_oom(err);
    bool first = true;
    cJSON_ArrayForEach(x, p) {
        if (cJSON_IsNumber(x)) {
            if (!cJSON_AddItemToArray(ids, cJSON_CreateNumber(x->valuedouble))) return vx_oai_oom(err);
        } else {
            vx_token *t = NULL;
            int32_t n = 0;
            if (!vx_oai_tokenize_text(v, x->valuestring, strlen(x->valuestring), first, true, &t, &n, err))
                return false;
            const bool ok = add_ids(ids, t, n);
            free(t);
            if (!ok) return vx_oai_oom(err);
        }
        first = false;
    }
    return true;
}

/* A string member (required or not) as bytes. */
static bool str_member(const cJSON *root, const char *key, bool required, const char **s, vx_oai_error *err) {
    const cJSON *x = vx_oai_member(root, key);
    *s = "";
    if (!x && required) {
        vx_oai_set_error(err, 400, key, "\"%s\" is required.", key);
        return false;
    }
    if (x && !cJSON_IsString(x)) return vx_oai_type_error(err, key, "a string", x);
    if (x) *s = x->valuestring;
    return true;
}

/* /infill's prompt, llama-server's repo-level FIM layout (see the header),
 * its extra chunks' budget from the server's n_predict (-1) as llama-server
 * computes it, then cut so that the prompt fits the context. */
static bool map_infill(const cJSON *root, cJSON *o, const vx_vocab *v, int32_t n_ctx, int32_t n_batch,
                       vx_oai_error *err) {
    vx_token pre, suf, mid, rep, sep;
    if (!vx_vocab_fim(v, &pre, &suf, &mid)) {
        vx_oai_set_error(err, 400, NULL, "Infill is not supported by this model: it has no fill-in-the-middle "
                                         "tokens (prefix, suffix, middle).");
        return false;
    }
    vx_vocab_fim_repo(v, &rep, &sep);
    const char *prefix, *suffix, *prompt;
    if (!str_member(root, "input_prefix", true, &prefix, err) || !str_member(root, "input_suffix", true, &suffix, err) ||
        !str_member(root, "prompt", false, &prompt, err))
        return false;
    const cJSON *extra = vx_oai_member(root, "input_extra");
    if (extra && !cJSON_IsArray(extra))
        return vx_oai_type_error(err, "input_extra", "an array of {\"filename\": string, \"text\": string}", extra);
    toks ex = {0}, pa = {0}, sa = {0}, ma = {0}, all = {0};
    bool ok = true;
    if (rep >= 0) ok = toks_add(&ex, &rep, 1) && toks_text(&ex, v, "myproject\n", 10, false, err);
    const cJSON *chunk;
    cJSON_ArrayForEach(chunk, (ok ? extra : NULL)) {
        const cJSON *t = vx_oai_member(chunk, "text"), *f = vx_oai_member(chunk, "filename");
        if (!cJSON_IsObject(chunk) || !cJSON_IsString(t) || (f && !cJSON_IsString(f))) {
            ok = vx_oai_type_error(err, "input_extra", "an array of {\"filename\": string, \"text\": string}", chunk);
            break;
        }
        if (sep >= 0) {
            const char *name = f ? f->valuestring : "tmp";
            ok = toks_add(&ex, &sep, 1) && toks_text(&ex, v, name, strlen(name), false, err) &&
                 toks_text(&ex, v, "\n", 1, false, err);
        } else {
            ok = toks_text(&ex, v, "\n\n--- snippet ---\n\n", 19, false, err);
        }
        ok = ok && toks_text(&ex, v, t->valuestring, strlen(t->valuestring), false, err);
        if (!ok) break;
    }
    if (ok && sep >= 0) ok = toks_add(&ex, &sep, 1) && toks_text(&ex, v, "filename\n", 9, false, err);
    ok = ok && toks_text(&pa, v, prefix, strlen(prefix), false, err) &&
         toks_text(&sa, v, suffix, strlen(suffix), false, err) && toks_text(&ma, v, prompt, strlen(prompt), true, err);
    if (ok) {
        /* prefix : suffix = 3 : 1 of a batch; the extra chunks' last tokens
         * fill n_ctx - n_batch - 2 n_predict (llama-server's budget, with
         * its server-wide n_predict -1), then what the context leaves */
        const vx_token bos = vx_vocab_bos(v);
        const int32_t n_bos = vx_vocab_add_bos(v) && bos >= 0;
        const int32_t take_p = VX_MIN(pa.n, 3 * (n_batch / 4));
        const int32_t take_s = VX_MIN(sa.n, VX_MAX(0, n_batch / 4 - (2 + ma.n)));
        const int64_t core = (int64_t)n_bos + take_p + ma.n + take_s + 3;
        int64_t take_x = VX_MIN((int64_t)ex.n, VX_MAX(0, (int64_t)n_ctx - n_batch + 2));
        take_x = VX_MAX(0, VX_MIN(take_x, (int64_t)n_ctx - 1 - core));
        ok = toks_add(&all, ex.v + ex.n - take_x, (int32_t)take_x) && toks_add(&all, &bos, n_bos) &&
             toks_add(&all, &pre, 1) && toks_add(&all, pa.v + pa.n - take_p, take_p) && toks_add(&all, ma.v, ma.n) &&
             toks_add(&all, &suf, 1) && toks_add(&all, sa.v, take_s) && toks_add(&all, &mid, 1);
        cJSON *ids = ok ? cJSON_AddArrayToObject(o, "prompt") : NULL;
        for (int32_t i = 0; ids && i < all.n; i++)
            if (!cJSON_AddItemToArray(ids, cJSON_CreateNumber(all.v[i]))) ids = NULL;
        if (!ids) ok = vx_oai_oom(err);
    }
    free(ex.v);
    free(pa.v);
    free(sa.v);
    free(ma.v);
    free(all.v);
    return ok;
}

bool vx_lcpp_translate(vx_lcpp_kind kind, const char *body, size_t len, const vx_vocab *v, int32_t n_ctx,
                       int32_t n_batch, vx_lcpp_request *out, vx_oai_error *err) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        vx_oai_set_error(err, 400, NULL, "The request body is not a JSON object.");
        cJSON_Delete(root);
        return false;
    }
    cJSON *o = cJSON_CreateObject();
    bool ok = o && map_common(root, o, v, out, err);
    if (ok) ok = kind == VX_LCPP_INFILL ? map_infill(root, o, v, n_ctx, n_batch, err) : map_prompt(root, o, v, err);
    if (ok && !(out->oai_body = cJSON_PrintUnformatted(o))) ok = vx_oai_oom(err);
    if (ok) out->oai_len = strlen(out->oai_body);
    if (!o && !ok) vx_oai_oom(err);
    cJSON_Delete(o);
    cJSON_Delete(root);
    if (!ok) vx_lcpp_request_free(out);
    return ok;
}

void vx_lcpp_request_free(vx_lcpp_request *r) {
    if (!r) return;
    free(r->oai_body);
    for (int32_t i = 0; i < r->n_fields; i++) free(r->fields[i]);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- replies */

/* {"id":..,"token":..,"bytes":[..],"logprob":..} without its close (the
 * token's text without control tokens', as llama-server shows them) */
static void json_prob(vx_sbuf *b, const vx_vocab *v, vx_token t, float lp) {
    char piece[256];
    int32_t n = vx_token_to_piece(v, t, piece, sizeof piece, false);
    if (n < 0) n = 0;
    vx_sbuf_addf(b, "{\"id\":%d,\"token\":", t);
    vx_oai_json_str(b, piece, (size_t)n);
    vx_sbuf_adds(b, ",\"bytes\":[");
    for (int32_t i = 0; i < n; i++) vx_sbuf_addf(b, i ? ",%u" : "%u", (unsigned char)piece[i]);
    vx_sbuf_addf(b, "],\"logprob\":%.9g", (double)lp);
}

static void json_probs(vx_sbuf *b, const vx_lcpp_reply *r) {
    vx_sbuf_adds(b, ",\"completion_probabilities\":[");
    for (int32_t i = 0; i < r->n_lp; i++) {
        const vx_oai_logprob *l = &r->lp[i];
        if (i) vx_sbuf_adds(b, ",");
        json_prob(b, r->vocab, l->token, l->logprob);
        vx_sbuf_adds(b, ",\"top_logprobs\":[");
        for (int32_t k = 0; k < l->n_top; k++) {
            if (k) vx_sbuf_adds(b, ",");
            json_prob(b, r->vocab, l->top_id[k], l->top_logprob[k]);
            vx_sbuf_adds(b, "}");
        }
        vx_sbuf_adds(b, "]}");
    }
    vx_sbuf_adds(b, "]");
}

static void json_ids(vx_sbuf *b, const vx_token *ids, int32_t n) {
    vx_sbuf_adds(b, "[");
    for (int32_t i = 0; i < n; i++) vx_sbuf_addf(b, i ? ",%d" : "%d", ids[i]);
    vx_sbuf_adds(b, "]");
}

static void json_settings(vx_sbuf *b, const vx_oai_request *q, const vx_lcpp_request *l) {
    const vx_sampler_params *s = &q->sampling;
    vx_sbuf_addf(b,
                 "{\"n_predict\":%d,\"seed\":%llu,\"temperature\":%.9g,\"dynatemp_range\":0,\"dynatemp_exponent\":1,"
                 "\"top_k\":%d,\"top_p\":%.9g,\"min_p\":%.9g,\"xtc_probability\":0,\"typical_p\":1,"
                 "\"repeat_last_n\":%d,\"repeat_penalty\":%.9g,\"presence_penalty\":%.9g,\"frequency_penalty\":%.9g,"
                 "\"dry_multiplier\":0,\"mirostat\":0,\"stop\":[",
                 l ? l->max_tokens : q->max_tokens,
                 /* random: llama.cpp's LLAMA_DEFAULT_SEED */
                 s->seed == UINT64_MAX ? 4294967295ull : (unsigned long long)s->seed, s->temperature, s->top_k, s->top_p,
                 s->min_p, s->penalty_last_n, s->repeat_penalty, s->presence_penalty, s->frequency_penalty);
    for (int32_t i = 0; i < q->n_stop; i++) {
        if (i) vx_sbuf_adds(b, ",");
        vx_oai_json_cstr(b, q->stop[i]);
    }
    vx_sbuf_addf(b,
                 "],\"max_tokens\":%d,\"n_keep\":0,\"n_discard\":0,\"ignore_eos\":%s,\"stream\":%s,\"n_probs\":%d,"
                 "\"min_keep\":0,\"grammar\":",
                 l ? l->max_tokens : q->max_tokens, q->ignore_eos ? "true" : "false", q->stream ? "true" : "false",
                 l ? l->n_probs : q->top_logprobs);
    vx_oai_json_cstr(b, q->grammar ? q->grammar : "");
    vx_sbuf_addf(b,
                 ",\"samplers\":[\"penalties\",\"top_k\",\"top_p\",\"min_p\",\"temperature\"],"
                 "\"post_sampling_probs\":%s,\"lora\":[]}",
                 l && l->post_sampling_probs ? "true" : "false");
}

static void json_timings(vx_sbuf *b, const vx_lcpp_reply *r) {
    const int32_t pn = VX_MAX(0, r->n_evaluated - r->n_reused), gn = r->n_predicted;
    const double ppt = pn ? r->prompt_ms / pn : 0, gpt = gn ? r->predicted_ms / gn : 0;
    vx_sbuf_addf(b,
                 ",\"timings\":{\"prompt_n\":%d,\"prompt_ms\":%.3f,\"prompt_per_token_ms\":%.6f,"
                 "\"prompt_per_second\":%.6f,\"predicted_n\":%d,\"predicted_ms\":%.3f,"
                 "\"predicted_per_token_ms\":%.6f,\"predicted_per_second\":%.6f",
                 pn, r->prompt_ms, ppt, ppt > 0 ? 1e3 / ppt : 0.0, gn, r->predicted_ms, gpt, gpt > 0 ? 1e3 / gpt : 0.0);
    if (r->draft_n > 0) /* as llama-server: only when drafts were verified */
        vx_sbuf_addf(b, ",\"draft_n\":%d,\"draft_n_accepted\":%d", r->draft_n, r->draft_n_accepted);
    vx_sbuf_adds(b, "}");
}

/* The final object, with response_fields' paths only when it names some
 * (each under its whole path, "timings/prompt_n": 12, as llama-server). */
static void final_json(vx_sbuf *out, const vx_lcpp_reply *r) {
    vx_sbuf b = {0};
    const bool stream = r->req->stream;
    vx_sbuf_adds(&b, "{\"index\":0,\"content\":");
    const char *text = r->text ? r->text : "";
    const size_t tlen = r->text ? r->text_len : 0;
    vx_oai_json_str(&b, stream ? "" : text, stream ? 0 : tlen);
    vx_sbuf_adds(&b, ",\"tokens\":");
    json_ids(&b, r->tokens, stream || !r->lreq->return_tokens ? 0 : r->n_tokens);
    vx_sbuf_adds(&b, ",\"id_slot\":0,\"stop\":true,\"model\":");
    vx_oai_json_cstr(&b, r->model ? r->model : "");
    vx_sbuf_addf(&b, ",\"tokens_predicted\":%d,\"tokens_evaluated\":%d,\"generation_settings\":", r->n_predicted,
                 r->n_evaluated);
    json_settings(&b, r->req, r->lreq);
    vx_sbuf_adds(&b, ",\"prompt\":");
    vx_oai_json_str(&b, r->prompt ? r->prompt : "", r->prompt ? r->prompt_len : 0);
    vx_sbuf_addf(&b, ",\"has_new_line\":%s,\"truncated\":false,\"stop_type\":\"%s\",\"stopping_word\":",
                 r->new_line || (tlen && memchr(text, '\n', tlen)) ? "true" : "false",
                 r->stop_type ? r->stop_type : "none");
    vx_oai_json_cstr(&b, r->stopping_word ? r->stopping_word : "");
    vx_sbuf_addf(&b, ",\"tokens_cached\":%d", r->n_cached);
    json_timings(&b, r);
    if (!stream && r->lreq->n_probs > 0) json_probs(&b, r);
    vx_sbuf_adds(&b, "}");
    if (r->lreq->n_fields == 0 || b.oom) {
        if (b.oom) out->oom = true;
        vx_sbuf_add(out, b.p, b.len);
        vx_sbuf_free(&b);
        return;
    }
    cJSON *full = cJSON_ParseWithLength(b.p, b.len), *sel = cJSON_CreateObject();
    vx_sbuf_free(&b);
    for (int32_t i = 0; full && sel && i < r->lreq->n_fields; i++) {
        const cJSON *cur = full;
        char path[256];
        snprintf(path, sizeof path, "%s", r->lreq->fields[i]);
        /* keys split at '/', an empty one (a leading, doubled or trailing
         * '/') naming nothing; a path named twice answered once */
        for (char *k = path, *end; cur && k; k = end ? end + 1 : NULL) {
            if ((end = strchr(k, '/'))) *end = 0;
            cur = cJSON_IsObject(cur) && *k ? cJSON_GetObjectItemCaseSensitive(cur, k) : NULL;
        }
        if (cur && cur != full && !cJSON_GetObjectItemCaseSensitive(sel, r->lreq->fields[i]))
            cJSON_AddItemToObject(sel, r->lreq->fields[i], cJSON_Duplicate(cur, true));
    }
    char *txt = sel ? cJSON_PrintUnformatted(sel) : NULL;
    if (!txt || !vx_sbuf_adds(out, txt)) out->oom = true;
    free(txt);
    cJSON_Delete(full);
    cJSON_Delete(sel);
}

void vx_lcpp_reply_json(vx_sbuf *out, const vx_lcpp_reply *r) {
    if (r->final) {
        final_json(out, r);
        return;
    }
    vx_sbuf_adds(out, "{\"index\":0,\"content\":");
    vx_oai_json_str(out, r->text ? r->text : "", r->text ? r->text_len : 0);
    vx_sbuf_adds(out, ",\"tokens\":");
    json_ids(out, r->tokens, r->n_tokens); /* a piece's tokens, always (llama-server's) */
    vx_sbuf_addf(out, ",\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%d,\"tokens_evaluated\":%d", r->n_predicted,
                 r->n_evaluated);
    if (r->lreq->n_probs > 0 && r->n_lp > 0) json_probs(out, r);
    vx_sbuf_adds(out, "}");
}

char *vx_lcpp_props_json(const vx_lcpp_props *p) {
    vx_sbuf b = {0};
    vx_sbuf_addf(&b, "{\"default_generation_settings\":{\"id\":0,\"id_task\":-1,\"n_ctx\":%d,\"speculative\":false,"
                     "\"is_processing\":false,\"params\":",
                 p->n_ctx);
    vx_oai_request d;
    memset(&d, 0, sizeof d);
    d.sampling = vx_sampler_default_params();
    d.max_tokens = -1;
    json_settings(&b, &d, NULL);
    vx_sbuf_addf(&b, ",\"prompt\":\"\"},\"total_slots\":%d,\"model_path\":", p->total_slots);
    vx_oai_json_cstr(&b, p->model_path ? p->model_path : "");
    vx_sbuf_adds(&b, ",\"chat_template\":");
    vx_oai_json_cstr(&b, p->chat_template ? p->chat_template : "");
    vx_sbuf_adds(&b, ",\"bos_token\":");
    vx_oai_json_cstr(&b, p->bos_token ? p->bos_token : "");
    vx_sbuf_adds(&b, ",\"eos_token\":");
    vx_oai_json_cstr(&b, p->eos_token ? p->eos_token : "");
    vx_sbuf_adds(&b, ",\"build_info\":\"vx (vortex)\"}");
    if (b.oom) {
        vx_sbuf_free(&b);
        return NULL;
    }
    return vx_sbuf_take(&b);
}
