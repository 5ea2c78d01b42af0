/*
 * server_ollama.c - ollama's native API: requests translated into OpenAI
 * ones, replies and model descriptions in ollama's shapes (see
 * server_ollama.h).
 */
#include "server_ollama.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* options: the sampling fields that have an OpenAI (or llama.cpp) name
 * take it, num_predict becomes max_tokens; the rest (num_ctx, num_thread,
 * mirostat, ...) configure what vx sets at start or does not have, and
 * are ignored, as ollama ignores options a runner does not know. Absent
 * ones get ollama's defaults. */
static const char *const same_name[] = {"temperature",      "top_p",          "top_k",        "min_p",
                                        "presence_penalty", "frequency_penalty", "repeat_penalty",
                                        "repeat_last_n",    "seed",           "stop"};
static const struct {
    const char *key;
    double value;
} defaults[] = {{"temperature", 0.8}, {"top_k", 40},           {"top_p", 0.9},
                {"min_p", 0.0},       {"repeat_penalty", 1.1}, {"repeat_last_n", 64}};

static bool map_options(const cJSON *root, cJSON *o, vx_ollama_request *out, vx_oai_error *err) {
    const cJSON *opt = vx_oai_member(root, "options");
    if (opt && !cJSON_IsObject(opt)) return vx_oai_type_error(err, "options", "an object", opt);
    for (size_t i = 0; i < sizeof same_name / sizeof same_name[0]; i++)
        if (!vx_oai_copy_member(o, same_name[i], opt ? vx_oai_member(opt, same_name[i]) : NULL)) return vx_oai_oom(err);
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (!vx_oai_member(o, defaults[i].key) && !cJSON_AddNumberToObject(o, defaults[i].key, defaults[i].value))
            return vx_oai_oom(err);
    const cJSON *np = opt ? vx_oai_member(opt, "num_predict") : NULL;
    if (np) {
        if (!cJSON_IsNumber(np) || np->valuedouble != floor(np->valuedouble))
            return vx_oai_type_error(err, "options.num_predict", "an integer", np);
        /* -1: no limit; -2 (fill the context): the same here, a sequence
         * ends when its context is full; 0 too, as ollama's runner limits
         * only from 1 on */
        out->max_tokens = np->valuedouble > 0 ? (int32_t)fmin(np->valuedouble, INT32_MAX) : -1;
    }
    return true;
}

/* format: "json" (JSON mode) or a JSON Schema (structured outputs). */
static bool map_format(const cJSON *root, cJSON *o, vx_oai_error *err) {
    const cJSON *f = vx_oai_member(root, "format");
    if (!f || (cJSON_IsString(f) && !f->valuestring[0])) return true;
    cJSON *rf = cJSON_AddObjectToObject(o, "response_format");
    if (!rf) return vx_oai_oom(err);
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "json"))
        return cJSON_AddStringToObject(rf, "type", "json_object") ? true : vx_oai_oom(err);
    if (!cJSON_IsObject(f)) {
        vx_oai_set_error(err, 400, "format", "Invalid 'format': expected \"json\" or a JSON Schema object.");
        return false;
    }
    cJSON *js = cJSON_CreateObject();
    if (!js || !cJSON_AddItemToObject(rf, "json_schema", js) || !cJSON_AddStringToObject(rf, "type", "json_schema") ||
        !cJSON_AddStringToObject(js, "name", "format") || !vx_oai_copy_member(js, "schema", f))
        return vx_oai_oom(err);
    return true;
}

/* think: true (or a level: "high", "medium", "low", which also goes to the
 * template as reasoning_effort, gpt-oss's) splits the reply's
 * thoughts off into message.thinking and asks the template to think;
 * false keeps them out of the template too (enable_thinking, as Qwen3's
 * templates read it); absent: the server's default. */
static bool map_think(const cJSON *root, cJSON *o, vx_oai_error *err) {
    const cJSON *t = vx_oai_member(root, "think");
    if (!t) return true; /* o NULL: only checked (a raw completion has no template) */
    bool on;
    if (cJSON_IsBool(t)) on = cJSON_IsTrue(t);
    else if (cJSON_IsString(t) && (!strcmp(t->valuestring, "high") || !strcmp(t->valuestring, "medium") ||
                                   !strcmp(t->valuestring, "low")))
        on = true;
    else
        return vx_oai_type_error(err, "think", "a boolean or \"high\", \"medium\", \"low\"", t);
    if (!o) return true;
    cJSON *kw = cJSON_AddObjectToObject(o, "chat_template_kwargs");
    if (!kw || !cJSON_AddBoolToObject(kw, "enable_thinking", on) ||
        (cJSON_IsString(t) && !cJSON_AddStringToObject(kw, "reasoning_effort", t->valuestring)) ||
        !cJSON_AddStringToObject(o, "reasoning_format", on ? "deepseek" : "none"))
        return vx_oai_oom(err);
    return true;
}

static bool no_images(const cJSON *x, const char *param, vx_oai_error *err) {
    const cJSON *im = vx_oai_member(x, "images");
    if (!im || (cJSON_IsArray(im) && cJSON_GetArraySize(im) == 0)) return true;
    vx_oai_set_error(err, 400, param, "'%s': images are not supported (vx serves text models).", param);
    return false;
}

/* Chat messages as they are, but for images (refused) and an assistant
 * message's thinking, which chat templates read as reasoning_content. */
static bool map_messages(const cJSON *msgs, cJSON *o, vx_oai_error *err) {
    if (!cJSON_IsArray(msgs)) return vx_oai_type_error(err, "messages", "an array", msgs);
    cJSON *arr = cJSON_AddArrayToObject(o, "messages");
    if (!arr) return vx_oai_oom(err);
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char param[48];
        snprintf(param, sizeof param, "messages[%d].images", i++);
        if (cJSON_IsObject(m) && !no_images(m, param, err)) return false;
        cJSON *c = cJSON_Duplicate(m, true);
        if (!c || !cJSON_AddItemToArray(arr, c)) return vx_oai_oom(err);
        cJSON *th = cJSON_GetObjectItemCaseSensitive(c, "thinking");
        if (th && !cJSON_GetObjectItemCaseSensitive(c, "reasoning_content"))
            cJSON_AddItemToObject(c, "reasoning_content", cJSON_DetachItemViaPointer(c, th));
    }
    return true;
}

static bool opt_string(const cJSON *root, const char *key, const char **out, vx_oai_error *err) {
    const cJSON *x = vx_oai_member(root, key);
    *out = "";
    if (!x) return true;
    if (!cJSON_IsString(x)) return vx_oai_type_error(err, key, "a string", x);
    *out = x->valuestring;
    return true;
}

/* /api/generate: with a suffix, fill in the middle (a completion with the
 * OpenAI suffix: the model's FIM tokens around prompt and suffix); raw, a
 * completion of the prompt as it is; otherwise a chat of the system text
 * and the prompt through the model's template. template (a Go template)
 * has no counterpart here and is refused rather than ignored. */
static bool map_generate(const cJSON *root, cJSON *o, int32_t n_vocab, vx_ollama_request *out, vx_oai_error *err) {
    const char *prompt, *system, *suffix, *tmpl;
    if (!opt_string(root, "prompt", &prompt, err) || !opt_string(root, "system", &system, err) ||
        !opt_string(root, "suffix", &suffix, err) || !opt_string(root, "template", &tmpl, err) ||
        !no_images(root, "images", err))
        return false;
    if (tmpl[0]) {
        vx_oai_set_error(err, 400, "template",
                         "'template' is not supported: vx renders the model's own chat template (Jinja); send "
                         "raw: true with a formatted prompt instead.");
        return false;
    }
    const cJSON *raw = vx_oai_member(root, "raw"), *ctx = vx_oai_member(root, "context");
    if (raw && !cJSON_IsBool(raw)) return vx_oai_type_error(err, "raw", "a boolean", raw);
    if (ctx && !cJSON_IsArray(ctx)) return vx_oai_type_error(err, "context", "an array of token ids", ctx);
    if (ctx && !vx_oai_parse_ids(ctx, "context", n_vocab, &out->context, &out->n_context, err)) return false;
    /* no prompt and no system text: ollama's load answer (a context alone
     * too: ollama checks the texts only) */
    if (!prompt[0] && !system[0]) {
        out->load_only = true;
        return true;
    }
    if (cJSON_IsTrue(raw) || suffix[0]) {
        /* a completion: with a suffix, filling in the middle (the model's
         * FIM tokens around the two texts); raw, the prompt as it is, any
         * suffix unused, as ollama */
        const bool fim = suffix[0] && !cJSON_IsTrue(raw);
        out->oai_kind = VX_OAI_COMPLETION;
        return cJSON_AddStringToObject(o, "prompt", prompt) && (!fim || cJSON_AddStringToObject(o, "suffix", suffix))
                   ? true
                   : vx_oai_oom(err);
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "messages");
    cJSON *sys = system[0] ? cJSON_CreateObject() : NULL, *user = cJSON_CreateObject();
    if (!arr || (system[0] && !sys) || !user) {
        cJSON_Delete(sys);
        cJSON_Delete(user);
        return vx_oai_oom(err);
    }
    if (sys) {
        cJSON_AddItemToArray(arr, sys);
        if (!cJSON_AddStringToObject(sys, "role", "system") || !cJSON_AddStringToObject(sys, "content", system))
            return vx_oai_oom(err);
    }
    cJSON_AddItemToArray(arr, user);
    if (!cJSON_AddStringToObject(user, "role", "user") || !cJSON_AddStringToObject(user, "content", prompt))
        return vx_oai_oom(err);
    return true;
}

/* The first number in x that is no double (1e309: cJSON reads infinity,
 * which it would print back as null, the translation silently dropping
 * the value), else NULL; its path's last key in *key. ollama's own JSON
 * reader refuses such numbers too. */
static const cJSON *non_finite(const cJSON *x, const char **key) {
    if (cJSON_IsNumber(x) && !isfinite(x->valuedouble)) {
        *key = x->string ? x->string : "";
        return x;
    }
    for (const cJSON *c = x->child; c; c = c->next) {
        const cJSON *bad = non_finite(c, key);
        if (bad) return bad;
    }
    return NULL;
}

static bool finite_numbers(const cJSON *root, vx_oai_error *err) {
    const char *key = "";
    if (!non_finite(root, &key)) return true;
    vx_oai_set_error(err, 400, key, "Invalid value for '%.64s': a number beyond the range of a double.", key);
    return false;
}

/* The start of every translation: the body parsed (*root), its numbers
 * finite, its model a string (*model, NULL: not given), copied into the
 * new request *o. False with err set and nothing held. */
static bool open_request(const char *body, size_t len, cJSON **root, cJSON **o, const cJSON **model,
                         vx_oai_error *err) {
    *o = NULL;
    if (!(*root = vx_oai_parse_json_object(body, len, err))) return false;
    *model = vx_oai_member(*root, "model");
    if (finite_numbers(*root, err) && (!*model || cJSON_IsString(*model) ||
                                       vx_oai_type_error(err, "model", "a string", *model))) {
        if ((*o = cJSON_CreateObject()) && vx_oai_copy_member(*o, "model", *model)) return true;
        vx_oai_oom(err);
    }
    cJSON_Delete(*o);
    cJSON_Delete(*root);
    *o = *root = NULL;
    return false;
}

/* keep_alive 0: a number, or a Go duration such as "0", "0s", "0m", "0.0h" */
static bool zero_duration(const cJSON *ka) {
    if (cJSON_IsNumber(ka)) return ka->valuedouble == 0;
    if (!cJSON_IsString(ka)) return false;
    char *end;
    const double d = strtod(ka->valuestring, &end);
    static const char *const units[] = {"", "ns", "us", "\xc2\xb5s", "ms", "s", "m", "h"};
    if (end == ka->valuestring || d != 0) return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i])) return true;
    return false;
}

bool vx_ollama_translate(vx_ollama_kind kind, const char *body, size_t len, int32_t n_vocab,
                         vx_ollama_request *out, vx_oai_error *err) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->oai_kind = VX_OAI_CHAT;
    out->max_tokens = -1;
    cJSON *root, *o;
    const cJSON *model;
    if (!open_request(body, len, &root, &o, &model, err)) return false;
    bool ok = false;
    const cJSON *stream = vx_oai_member(root, "stream");
    if (model && !(out->model = strdup(model->valuestring))) {
        vx_oai_oom(err);
        goto done;
    }
    if (stream && !cJSON_IsBool(stream)) {
        vx_oai_type_error(err, "stream", "a boolean", stream);
        goto done;
    }
    /* ollama streams unless told not to */
    if (!cJSON_AddBoolToObject(o, "stream", !stream || cJSON_IsTrue(stream))) {
        vx_oai_oom(err);
        goto done;
    }
    if (kind == VX_OLLAMA_CHAT) {
        const cJSON *msgs = vx_oai_member(root, "messages");
        if (!msgs || (cJSON_IsArray(msgs) && cJSON_GetArraySize(msgs) == 0)) out->load_only = true;
        else if (!map_messages(msgs, o, err)) goto done;
        if (!vx_oai_copy_member(o, "tools", vx_oai_member(root, "tools"))) {
            vx_oai_oom(err);
            goto done;
        }
    } else if (!map_generate(root, o, n_vocab, out, err)) {
        goto done;
    }
    out->unload = out->load_only && zero_duration(vx_oai_member(root, "keep_alive"));
    if (!map_options(root, o, out, err) || !map_format(root, o, err)) goto done;
    if (!map_think(root, out->oai_kind == VX_OAI_CHAT ? o : NULL, err)) goto done;
    /* logprobs: a boolean and top_logprobs, as OpenAI's chat; a completion
     * (raw) counts the alternatives in logprobs itself */
    const cJSON *lp = vx_oai_member(root, "logprobs"), *top = vx_oai_member(root, "top_logprobs");
    if (lp && !cJSON_IsBool(lp)) {
        vx_oai_type_error(err, "logprobs", "a boolean", lp);
        goto done;
    }
    if (out->oai_kind == VX_OAI_CHAT) {
        if (!vx_oai_copy_member(o, "logprobs", lp) || !vx_oai_copy_member(o, "top_logprobs", top)) {
            vx_oai_oom(err);
            goto done;
        }
    } else if (cJSON_IsTrue(lp)) {
        if (top && !cJSON_IsNumber(top)) {
            vx_oai_type_error(err, "top_logprobs", "an integer", top);
            goto done;
        }
        if (!cJSON_AddNumberToObject(o, "logprobs", top ? top->valuedouble : 0)) {
            vx_oai_oom(err);
            goto done;
        }
    }
    char *text = cJSON_PrintUnformatted(o);
    if (!text) {
        vx_oai_oom(err);
        goto done;
    }
    out->oai_body = text;
    out->oai_len = strlen(text);
    ok = true;
done:
    cJSON_Delete(o);
    cJSON_Delete(root);
    if (!ok) vx_ollama_request_free(out);
    return ok;
}

void vx_ollama_request_free(vx_ollama_request *r) {
    free(r->model);
    free(r->oai_body);
    free(r->context);
    memset(r, 0, sizeof *r);
}

char *vx_ollama_error_json(const vx_oai_error *e) {
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "{\"error\":");
    vx_oai_json_cstr(&b, e->message);
    vx_sbuf_adds(&b, "}");
    return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
}

/* ---------------------------------------------------------------- replies */

static void time_rfc3339(char *buf, size_t size, time_t sec, long nsec) {
    struct tm tm;
    gmtime_r(&sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    if (nsec >= 0) snprintf(buf, size, "%s.%09ldZ", day, nsec);
    else snprintf(buf, size, "%sZ", day);
}

void vx_ollama_time(char *buf, size_t size) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_rfc3339(buf, size, ts.tv_sec, ts.tv_nsec);
}

/* A tool call's arguments as a JSON object (ollama's shape); text that is
 * no JSON value goes as a string. */
static void json_arguments(vx_sbuf *b, const char *args) {
    cJSON *v = cJSON_Parse(args ? args : "{}");
    char *p = v ? cJSON_PrintUnformatted(v) : NULL;
    if (p) vx_sbuf_adds(b, p);
    else vx_oai_json_cstr(b, args ? args : "");
    free(p);
    cJSON_Delete(v);
}

/* One token of logprobs: its text, logprob and bytes. */
static void json_token(vx_sbuf *b, const vx_vocab *v, vx_token t, float lp) {
    char piece[512];
    int32_t n = v ? vx_token_to_piece(v, t, piece, sizeof piece, false) : 0;
    if (n < 0) n = 0;
    vx_sbuf_adds(b, "{\"token\":");
    vx_oai_json_str(b, piece, (size_t)n);
    vx_sbuf_addf(b, isfinite(lp) ? ",\"logprob\":%.9g,\"bytes\":[" : ",\"logprob\":null,\"bytes\":[", (double)lp);
    for (int32_t i = 0; i < n; i++) vx_sbuf_addf(b, "%s%u", i ? "," : "", (unsigned)(unsigned char)piece[i]);
    vx_sbuf_adds(b, "]");
}

static void json_logprobs(vx_sbuf *b, const vx_ollama_reply *r) {
    vx_sbuf_adds(b, ",\"logprobs\":[");
    for (int32_t i = 0; i < r->n_lp; i++) {
        const vx_oai_logprob *l = &r->lp[i];
        if (i) vx_sbuf_adds(b, ",");
        json_token(b, r->vocab, l->token, l->logprob);
        vx_sbuf_adds(b, ",\"top_logprobs\":[");
        for (int32_t k = 0; k < l->n_top; k++) {
            if (k) vx_sbuf_adds(b, ",");
            json_token(b, r->vocab, l->top_id[k], l->top_logprob[k]);
            vx_sbuf_adds(b, "}");
        }
        vx_sbuf_adds(b, "]}");
    }
    vx_sbuf_adds(b, "]");
}

void vx_ollama_reply_json(vx_sbuf *out, const vx_ollama_reply *r) {
    char when[48];
    vx_ollama_time(when, sizeof when);
    vx_sbuf_adds(out, "{\"model\":");
    vx_oai_json_cstr(out, r->model ? r->model : "");
    vx_sbuf_addf(out, ",\"created_at\":\"%s\"", when);
    const bool chat = r->kind == VX_OLLAMA_CHAT;
    vx_sbuf_adds(out, chat ? ",\"message\":{\"role\":\"assistant\",\"content\":" : ",\"response\":");
    vx_oai_json_str(out, r->text ? r->text : "", r->text ? r->text_len : 0);
    if (r->thinking_len) {
        vx_sbuf_adds(out, ",\"thinking\":");
        vx_oai_json_str(out, r->thinking, r->thinking_len);
    }
    if (chat && r->n_calls > 0) {
        vx_sbuf_adds(out, ",\"tool_calls\":[");
        for (int32_t i = 0; i < r->n_calls; i++) {
            vx_sbuf_addf(out, "%s{\"function\":{\"index\":%d,\"name\":", i ? "," : "", (int)i);
            vx_oai_json_cstr(out, r->calls[i].name);
            vx_sbuf_adds(out, ",\"arguments\":");
            json_arguments(out, r->calls[i].arguments);
            vx_sbuf_adds(out, "}}");
        }
        vx_sbuf_adds(out, "]");
    }
    if (chat) vx_sbuf_adds(out, "}");
    if (r->lp) json_logprobs(out, r);
    if (!r->done_reason) {
        vx_sbuf_adds(out, ",\"done\":false}\n");
        return;
    }
    vx_sbuf_adds(out, ",\"done\":true,\"done_reason\":");
    vx_oai_json_cstr(out, r->done_reason);
    if (r->context) {
        vx_sbuf_adds(out, ",\"context\":[");
        for (int32_t i = 0; i < r->n_context; i++) vx_sbuf_addf(out, "%s%d", i ? "," : "", (int)r->context[i]);
        vx_sbuf_adds(out, "]");
    }
    vx_sbuf_addf(out,
                 ",\"total_duration\":%lld,\"load_duration\":%lld,\"prompt_eval_count\":%d,"
                 "\"prompt_eval_duration\":%lld,\"eval_count\":%d,\"eval_duration\":%lld}\n",
                 (long long)r->total_ns, (long long)r->load_ns, (int)r->prompt_count, (long long)r->prompt_ns,
                 (int)r->eval_count, (long long)r->eval_ns);
}

/* ------------------------------------------------------------------ models */

/* "1.2B", "494.0M": the parameter count as ollama's details show it. */
static void param_size(char *buf, size_t size, uint64_t n) {
    if (n >= 1000000000ull) snprintf(buf, size, "%.1fB", (double)n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, size, "%.1fM", (double)n / 1e6);
    else snprintf(buf, size, "%.1fK", (double)n / 1e3);
}

/* A 64-hex-digit identifier of the file (its name, size and time), in the
 * place of ollama's sha256 digest of the blob: hashing gigabytes at start
 * would delay the server by seconds for a field clients only compare. */
static void digest(char *buf, size_t size, const vx_ollama_model *m) {
    char key[512];
    snprintf(key, sizeof key, "%s|%llu|%lld", m->name ? m->name : "", (unsigned long long)m->size,
             (long long)m->mtime);
    size_t o = 0;
    for (uint64_t round = 0; round < 4 && o + 16 < size; round++) {
        uint64_t h = 14695981039346656037ull ^ (round * 0x9E3779B97F4A7C15ull);
        for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
        o += (size_t)snprintf(buf + o, size - o, "%016llx", (unsigned long long)h);
    }
}

static void details_json(vx_sbuf *b, const vx_ollama_model *m) {
    char ps[32];
    param_size(ps, sizeof ps, m->n_params);
    vx_sbuf_adds(b, "\"details\":{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":");
    vx_oai_json_cstr(b, m->arch);
    vx_sbuf_adds(b, ",\"families\":[");
    vx_oai_json_cstr(b, m->arch);
    vx_sbuf_addf(b, "],\"parameter_size\":\"%s\",\"quantization_level\":", ps);
    vx_oai_json_cstr(b, m->quant ? m->quant : "unknown");
    vx_sbuf_adds(b, "}");
}

static void model_head(vx_sbuf *b, const vx_ollama_model *m) {
    char when[48], dg[80];
    time_rfc3339(when, sizeof when, (time_t)m->mtime, -1);
    digest(dg, sizeof dg, m);
    vx_sbuf_adds(b, "{\"name\":");
    vx_oai_json_cstr(b, m->name);
    vx_sbuf_adds(b, ",\"model\":");
    vx_oai_json_cstr(b, m->name);
    vx_sbuf_addf(b, ",\"modified_at\":\"%s\",\"size\":%llu,\"digest\":\"%s\",", when, (unsigned long long)m->size, dg);
    details_json(b, m);
}

char *vx_ollama_tags_json(const vx_ollama_model *m, bool ps) {
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "{\"models\":[");
    model_head(&b, m);
    /* loaded for as long as the server runs: ollama's keep_alive -1 */
    if (ps)
        vx_sbuf_addf(&b, ",\"expires_at\":\"2318-08-31T16:00:00Z\",\"size_vram\":0,\"context_length\":%d",
                     (int)m->n_ctx);
    vx_sbuf_adds(&b, "}]}");
    return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
}

bool vx_ollama_show_body(const char *body, size_t len, vx_oai_error *err) {
    cJSON *root = vx_oai_parse_json_object(body, len, err);
    if (!root) return false;
    bool ok = true;
    const char *keys[2] = {"model", "name"}; /* "name": older clients' */
    for (int i = 0; i < 2 && ok; i++) {
        const cJSON *x = vx_oai_member(root, keys[i]);
        if (x && !cJSON_IsString(x)) ok = vx_oai_type_error(err, keys[i], "a string", x);
    }
    cJSON_Delete(root);
    return ok;
}

char *vx_ollama_show_json(const vx_ollama_model *m) {
    char when[48];
    time_rfc3339(when, sizeof when, (time_t)m->mtime, -1);
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "{\"license\":\"\",\"modelfile\":");
    vx_sbuf mf = {0};
    vx_sbuf_addf(&mf, "# served by vx serve\nFROM %s\n", m->name ? m->name : "");
    vx_oai_json_str(&b, mf.p ? mf.p : "", mf.len);
    vx_sbuf_free(&mf);
    /* the defaults this API applies (server_ollama.h) */
    vx_sbuf_adds(&b, ",\"parameters\":\"temperature 0.8\\ntop_k 40\\ntop_p 0.9\\nmin_p 0\\nrepeat_penalty "
                     "1.1\\nrepeat_last_n 64\",\"template\":");
    vx_oai_json_cstr(&b, m->template_src ? m->template_src : "");
    vx_sbuf_adds(&b, ",\"system\":\"\",");
    details_json(&b, m);
    vx_sbuf_adds(&b, ",\"model_info\":{\"general.architecture\":");
    vx_oai_json_cstr(&b, m->arch);
    vx_sbuf_addf(&b, ",\"general.parameter_count\":%llu", (unsigned long long)m->n_params);
    const struct {
        const char *key;
        int32_t v;
    } info[] = {{"context_length", m->n_ctx_train}, {"embedding_length", m->n_embd}, {"block_count", m->n_layer}};
    for (size_t i = 0; i < sizeof info / sizeof info[0]; i++) {
        vx_sbuf_adds(&b, ",");
        vx_sbuf key = {0};
        vx_sbuf_addf(&key, "%s.%s", m->arch ? m->arch : "", info[i].key);
        vx_oai_json_str(&b, key.p ? key.p : "", key.len);
        vx_sbuf_free(&key);
        vx_sbuf_addf(&b, ":%d", (int)info[i].v);
    }
    vx_sbuf_adds(&b, "},\"capabilities\":[\"completion\"");
    if (m->tools) vx_sbuf_adds(&b, ",\"tools\"");
    if (m->thinking) vx_sbuf_adds(&b, ",\"thinking\"");
    if (m->embedding) vx_sbuf_adds(&b, ",\"embedding\"");
    vx_sbuf_addf(&b, "],\"modified_at\":\"%s\"}", when);
    return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
}

/* -------------------------------------------------------------- embeddings */

bool vx_ollama_embed_body(const char *body, size_t len, bool legacy, char **oai, bool *empty, vx_oai_error *err) {
    *oai = NULL;
    *empty = false;
    cJSON *root, *o;
    const cJSON *model;
    if (!open_request(body, len, &root, &o, &model, err)) return false;
    bool ok = false;
    if (legacy) { /* one prompt, its vector as the model gives it */
        const cJSON *p = vx_oai_member(root, "prompt");
        if (p && !cJSON_IsString(p)) {
            vx_oai_type_error(err, "prompt", "a string", p);
            goto done;
        }
        *empty = !p || !p->valuestring[0];
        if (!vx_oai_copy_member(o, "input", p) || !cJSON_AddNumberToObject(o, "embd_normalize", -1) || !cJSON_AddBoolToObject(o, "truncate", true)) {
            vx_oai_oom(err);
            goto done;
        }
    } else {
        const cJSON *in = vx_oai_member(root, "input"), *tr = vx_oai_member(root, "truncate");
        if (in && cJSON_IsArray(in)) { /* strings only (OpenAI's token-id inputs are not ollama's) */
            const cJSON *x;
            cJSON_ArrayForEach(x, in) if (!cJSON_IsString(x)) {
                vx_oai_type_error(err, "input", "a string or an array of strings", x);
                goto done;
            }
        } else if (in && !cJSON_IsString(in)) {
            vx_oai_type_error(err, "input", "a string or an array of strings", in);
            goto done;
        }
        if (tr && !cJSON_IsBool(tr)) {
            vx_oai_type_error(err, "truncate", "a boolean", tr);
            goto done;
        }
        *empty = !in || (cJSON_IsArray(in) && cJSON_GetArraySize(in) == 0);
        if (!vx_oai_copy_member(o, "input", in) || !vx_oai_copy_member(o, "dimensions", vx_oai_member(root, "dimensions")) ||
            !cJSON_AddBoolToObject(o, "truncate", !tr || cJSON_IsTrue(tr))) {
            vx_oai_oom(err);
            goto done;
        }
    }
    if (!(*oai = cJSON_PrintUnformatted(o))) {
        vx_oai_oom(err);
        goto done;
    }
    ok = true;
done:
    cJSON_Delete(o);
    cJSON_Delete(root);
    return ok;
}
