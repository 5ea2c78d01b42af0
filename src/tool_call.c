/*
 * tool_call.c - the tool-call formats of tool_call.h: detection in a
 * template's source, parsing of generated text, the streaming hold-back,
 * and the forced-call schemas.
 */
#include "tool_call.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "common.h"
#include "harmony.h"
#include "json_schema.h"

static const char HERMES_OPEN[] = "<tool_call>", HERMES_CLOSE[] = "</tool_call>";
static const char PYTHON_TAG[] = "<|python_tag|>";
static const char MISTRAL_OPEN[] = "[TOOL_CALLS]";

vx_tool_format vx_tool_format_detect(const char *src) {
    if (!src || !strstr(src, "tools")) return VX_TOOL_FMT_NONE;
    /* gpt-oss: past calls as "<|start|>assistant to=" "functions." NAME */
    if (vx_harmony_detect(src) && strstr(src, " to=") && strstr(src, "functions.")) return VX_TOOL_FMT_HARMONY;
    if (strstr(src, MISTRAL_OPEN)) return VX_TOOL_FMT_MISTRAL;
    if (strstr(src, HERMES_OPEN)) return VX_TOOL_FMT_HERMES;
    /* Llama 3.1-3.3 teach {"name": function name, "parameters": ...} and
     * write past calls as such JSON (the Llama 3.x header tokens around) */
    if (strstr(src, "<|start_header_id|>") && strstr(src, "\"parameters\": ")) return VX_TOOL_FMT_LLAMA3;
    return VX_TOOL_FMT_NONE;
}

const char *vx_tool_format_name(vx_tool_format f) {
    switch (f) {
    case VX_TOOL_FMT_HERMES: return "hermes";
    case VX_TOOL_FMT_LLAMA3: return "llama3";
    case VX_TOOL_FMT_MISTRAL: return "mistral";
    case VX_TOOL_FMT_HARMONY: return "harmony";
    default: return "none";
    }
}

const char *vx_tool_format_marker(vx_tool_format f) {
    switch (f) {
    case VX_TOOL_FMT_HERMES: return HERMES_OPEN;
    case VX_TOOL_FMT_LLAMA3: return PYTHON_TAG;
    case VX_TOOL_FMT_MISTRAL: return MISTRAL_OPEN;
    case VX_TOOL_FMT_HARMONY: return " to=";
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- parsing */

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_blank(const char *s, size_t i, size_t n) {
    while (i < n && is_blank(s[i])) i++;
    return i;
}

static bool starts(const char *s, size_t i, size_t n, const char *w) {
    size_t l = strlen(w);
    return n - i >= l && memcmp(s + i, w, l) == 0;
}

static const char *find(const char *s, size_t from, size_t n, const char *w) {
    size_t l = strlen(w);
    for (size_t i = from; i + l <= n; i++)
        if (s[i] == w[0] && memcmp(s + i, w, l) == 0) return s + i;
    return NULL;
}

/* One JSON value at s[*i..n) (blanks first): parsed, *start where it
 * begins, *i after it. */
static cJSON *json_at(const char *s, size_t *i, size_t n, size_t *start) {
    size_t j = skip_blank(s, *i, n);
    const char *end = NULL;
    cJSON *x = cJSON_ParseWithLengthOpts(s + j, n - j, &end, false);
    if (!x) return NULL;
    *start = j;
    *i = (size_t)(end - s);
    return x;
}

/* Spans of the text of a JSON value that cJSON parsed: the end of the
 * string, or value, that starts at s[i] (e: the end of the text). */
static size_t skip_string(const char *s, size_t i, size_t e) {
    for (i++; i < e; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return e;
}

static size_t skip_value(const char *s, size_t i, size_t e) {
    if (i >= e) return e;
    if (s[i] == '"') return skip_string(s, i, e);
    if (s[i] == '{' || s[i] == '[') {
        for (int d = 0; i < e; i++) {
            if (s[i] == '"') i = skip_string(s, i, e) - 1;
            else if (s[i] == '{' || s[i] == '[') d++;
            else if ((s[i] == '}' || s[i] == ']') && --d == 0) return i + 1;
        }
        return e;
    }
    while (i < e && !strchr(",}] \t\r\n", s[i])) i++;
    return i;
}

bool vx_json_member_span(const char *s, size_t a, size_t e, const char *key, size_t *va, size_t *ve) {
    const size_t kl = strlen(key);
    size_t i = skip_blank(s, a, e);
    if (i >= e || s[i] != '{') return false;
    for (i++;;) {
        i = skip_blank(s, i, e);
        if (i >= e || s[i] != '"') return false;
        const size_t k0 = i + 1, k1 = skip_string(s, i, e);
        i = skip_blank(s, k1, e);
        if (i >= e || s[i] != ':') return false;
        const size_t v0 = skip_blank(s, i + 1, e), v1 = skip_value(s, v0, e);
        if (k1 - 1 - k0 == kl && !memcmp(s + k0, key, kl)) {
            *va = v0, *ve = v1;
            return true;
        }
        /* a key written with escapes may be this one decoded, which a
         * parser takes first: the span would be another value */
        if (memchr(s + k0, '\\', k1 - 1 - k0)) return false;
        i = skip_blank(s, v1, e);
        if (i >= e || s[i] != ',') return false;
        i++;
    }
}

static bool known(const char *name, char *const *names, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

typedef struct calls_acc {
    vx_tool_call *v;
    int32_t n, cap;
    bool oom;
} calls_acc;

/* A call object {"name": ..., "arguments" | "parameters": ...} (o, parsed
 * from the text s[a..e)) into acc; false when it is not one. The
 * arguments are passed on as the model wrote them (cJSON would print
 * 1.0 as 1 and big integers as doubles); given as a string, it must hold
 * a JSON object (some models write them so, as OpenAI's API has them). A
 * name with a NUL escape is no name. */
static bool take_call(const char *s, size_t a, size_t e, const cJSON *o, calls_acc *acc, bool check,
                      char *const *names, int32_t n_names) {
    if (!cJSON_IsObject(o)) return false;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    size_t na, ne, va = 0, ve = 0;
    if (!cJSON_IsString(name) || !name->valuestring[0] || !vx_json_member_span(s, a, e, "name", &na, &ne) ||
        find(s, na, ne, "\\u0000"))
        return false;
    if (check && !known(name->valuestring, names, n_names)) return false;
    const char *key = "arguments";
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, key = "parameters");
    char *text;
    if (!args) {
        text = strdup("{}");
    } else if (cJSON_IsString(args)) {
        const char *end = NULL;
        cJSON *inner = cJSON_ParseWithOpts(args->valuestring, &end, true);
        const bool obj = cJSON_IsObject(inner);
        cJSON_Delete(inner);
        if (!obj) return false;
        text = strdup(args->valuestring);
    } else if (cJSON_IsObject(args) && vx_json_member_span(s, a, e, key, &va, &ve)) {
        if ((text = malloc(ve - va + 1))) memcpy(text, s + va, ve - va), text[ve - va] = 0;
    } else {
        return false;
    }
    char *nm = strdup(name->valuestring);
    if (acc->n == acc->cap) {
        int32_t cap = acc->cap ? acc->cap * 2 : 4;
        vx_tool_call *v = realloc(acc->v, (size_t)cap * sizeof *v);
        if (v) acc->v = v, acc->cap = cap;
    }
    if (!text || !nm || acc->n == acc->cap) {
        free(text);
        free(nm);
        acc->oom = true;
        return true; /* a call: the caller sees oom */
    }
    acc->v[acc->n++] = (vx_tool_call){.name = nm, .arguments = text, .id = ""};
    return true;
}

static void acc_free(calls_acc *acc) {
    for (int32_t i = 0; i < acc->n; i++) free(acc->v[i].name), free(acc->v[i].arguments);
    free(acc->v);
    memset(acc, 0, sizeof *acc);
}

/* Blocks opened by marker, each a JSON value from s[*i] on that take()
 * turns into calls (false: they are not calls; *i: after the block); the
 * text around them is content. */
typedef bool (*take_fn)(const char *s, size_t n, size_t *i, calls_acc *acc);

static bool parse_marked(const char *s, size_t n, const char *marker, take_fn take, calls_acc *acc, vx_sbuf *content) {
    size_t i = 0;
    const char *m;
    while ((m = find(s, i, n, marker))) {
        vx_sbuf_add(content, s + i, (size_t)(m - s) - i);
        i = (size_t)(m - s) + strlen(marker);
        if (!take(s, n, &i, acc)) return false;
    }
    vx_sbuf_add(content, s + i, n - i);
    return true;
}

/* hermes: one call object, then </tool_call> (or the next block, or the
 * end: a stop string or EOS may come first) */
static bool take_hermes(const char *s, size_t n, size_t *i, calls_acc *acc) {
    size_t a = 0;
    cJSON *o = json_at(s, i, n, &a);
    const bool ok = o && take_call(s, a, *i, o, acc, false, NULL, 0);
    cJSON_Delete(o);
    if (!ok) return false;
    const size_t j = skip_blank(s, *i, n);
    if (starts(s, j, n, HERMES_CLOSE)) *i = j + strlen(HERMES_CLOSE);
    else if (j < n && !starts(s, j, n, HERMES_OPEN)) return false;
    return true;
}

/* mistral: an array of call objects */
static bool take_mistral(const char *s, size_t n, size_t *i, calls_acc *acc) {
    size_t a = 0;
    cJSON *arr = json_at(s, i, n, &a);
    bool ok = cJSON_IsArray(arr) && cJSON_GetArraySize(arr) > 0;
    size_t k = a + 1; /* the elements' texts, in step with the parsed ones */
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        if (!ok) break;
        const size_t b = skip_blank(s, k, *i), c = skip_value(s, b, *i);
        ok = take_call(s, b, c, o, acc, false, NULL, 0);
        k = skip_blank(s, c, *i) + 1; /* past the ',' */
    }
    cJSON_Delete(arr);
    return ok;
}

/* The whole reply is calls: [<|python_tag|>] {..} [; {..}] ... */
static bool parse_llama3(const char *s, size_t n, char *const *names, int32_t n_names, calls_acc *acc) {
    size_t i = skip_blank(s, 0, n);
    if (starts(s, i, n, PYTHON_TAG)) i = skip_blank(s, i + strlen(PYTHON_TAG), n);
    if (i >= n || s[i] != '{') return false;
    for (;;) {
        size_t a = 0;
        cJSON *o = json_at(s, &i, n, &a);
        const bool ok = o && take_call(s, a, i, o, acc, true, names, n_names);
        cJSON_Delete(o);
        if (!ok) return false;
        i = skip_blank(s, i, n);
        if (i == n) return true;
        if (s[i] != ';') return false;
        i = skip_blank(s, i + 1, n);
        if (i == n) return true;
    }
}

static void trimmed(const char *s, size_t n, const char **out, size_t *len) {
    size_t a = skip_blank(s, 0, n);
    while (n > a && is_blank(s[n - 1])) n--;
    *out = s + a;
    *len = n - a;
}

/* The harmony format: the calls, and the reply's content (its answer,
 * without the reasoning), trimmed. */
static vx_status parse_harmony(const char *text, size_t len, int32_t max_calls, vx_tool_calls *out) {
    vx_harmony_stream s;
    vx_harmony_stream_init(&s, true, max_calls);
    vx_sbuf content = {0};
    bool ok = vx_harmony_stream_all(&s, text, len, NULL, &content);
    const char *c = "";
    size_t cl = 0;
    if (ok) trimmed(content.p ? content.p : "", content.len, &c, &cl);
    if (ok && (out->content = malloc(cl + 1))) {
        memcpy(out->content, c, cl);
        out->content[cl] = 0;
        out->content_len = cl;
        out->v = s.calls.v;
        out->n = s.calls.n;
        s.calls.v = NULL;
        s.calls.n = 0;
    } else {
        ok = false;
    }
    vx_sbuf_free(&content);
    vx_harmony_stream_free(&s);
    return ok ? VX_OK : VX_ENOMEM;
}

vx_status vx_tool_parse(vx_tool_format f, const char *text, size_t len, char *const *names, int32_t n_names,
                        int32_t max_calls, vx_tool_calls *out) {
    memset(out, 0, sizeof *out);
    if (!text) text = "", len = 0;
    if (f == VX_TOOL_FMT_HARMONY) return parse_harmony(text, len, max_calls, out);
    calls_acc acc = {0};
    vx_sbuf content = {0};
    bool ok = false;
    switch (f) {
    case VX_TOOL_FMT_HERMES: ok = parse_marked(text, len, HERMES_OPEN, take_hermes, &acc, &content); break;
    case VX_TOOL_FMT_LLAMA3: ok = parse_llama3(text, len, names, n_names, &acc); break;
    case VX_TOOL_FMT_MISTRAL: ok = parse_marked(text, len, MISTRAL_OPEN, take_mistral, &acc, &content); break;
    default: break;
    }
    if (!acc.oom && (!ok || acc.n == 0)) { /* all of it is content */
        acc_free(&acc);
        content.len = 0;
        vx_sbuf_add(&content, text, len);
    }
    const char *c;
    size_t cl;
    trimmed(content.p ? content.p : "", content.len, &c, &cl);
    if (content.p) { /* c points into content */
        memmove(content.p, c, cl);
        content.p[cl] = 0;
    }
    content.len = cl;
    out->content = acc.oom ? NULL : vx_sbuf_take(&content);
    if (!out->content) {
        acc_free(&acc);
        vx_sbuf_free(&content);
        return VX_ENOMEM;
    }
    out->content_len = cl;
    if (max_calls > 0)
        while (acc.n > max_calls) acc.n--, free(acc.v[acc.n].name), free(acc.v[acc.n].arguments);
    for (int32_t i = 0; i < acc.n; i++) vx_tool_call_id(f, acc.v[i].id, sizeof acc.v[i].id);
    out->v = acc.v;
    out->n = acc.n;
    return VX_OK;
}

void vx_tool_calls_free(vx_tool_calls *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n; i++) free(c->v[i].name), free(c->v[i].arguments);
    free(c->v);
    free(c->content);
    memset(c, 0, sizeof *c);
}

/* -------------------------------------------------------------- streaming */

void vx_tool_stream_init(vx_tool_stream *s, vx_tool_format f) {
    memset(s, 0, sizeof *s);
    s->f = f;
}

void vx_tool_stream_free(vx_tool_stream *s) {
    vx_sbuf_free(&s->held);
    vx_sbuf_free(&s->out);
    memset(s, 0, sizeof *s);
}

bool vx_tool_stream_feed(vx_tool_stream *s, const char *text, size_t n, const char **out, size_t *out_len) {
    *out = text;
    *out_len = 0;
    if (s->f == VX_TOOL_FMT_NONE || s->f == VX_TOOL_FMT_HARMONY || (s->f == VX_TOOL_FMT_LLAMA3 && s->seen)) {
        *out_len = n; /* nothing to watch for (harmony.h streams its own): straight through */
        return true;
    }
    vx_sbuf *h = &s->held;
    if (!vx_sbuf_add(h, text, n)) return false;
    if (s->capturing) return true;
    size_t rel = 0; /* bytes of held to release */
    if (s->f == VX_TOOL_FMT_LLAMA3) {
        const size_t i = skip_blank(h->p, 0, h->len);
        if (i == h->len) return true; /* blanks only: undecided */
        const size_t tl = strlen(PYTHON_TAG);
        if (h->p[i] == '{' || starts(h->p, i, h->len, PYTHON_TAG)) {
            s->capturing = true;
            return true;
        }
        if (h->len - i < tl && memcmp(h->p + i, PYTHON_TAG, h->len - i) == 0) return true;
        s->seen = true;
        rel = h->len;
    } else {
        const char *w = vx_tool_format_marker(s->f);
        const char *m = find(h->p, 0, h->len, w);
        if (m) {
            rel = (size_t)(m - h->p);
            s->capturing = true;
        } else {
            rel = h->len - vx_partial_tail(h->p, h->len, w, strlen(w));
        }
    }
    if (rel == 0) return true;
    s->out.len = 0;
    if (!vx_sbuf_add(&s->out, h->p, rel)) return false;
    memmove(h->p, h->p + rel, h->len - rel);
    h->len -= rel;
    h->p[h->len] = 0;
    *out = s->out.p;
    *out_len = rel;
    return true;
}

const char *vx_tool_stream_held(const vx_tool_stream *s, size_t *len) {
    *len = s->held.len;
    return s->held.p ? s->held.p : "";
}

/* ------------------------------------------------------------ forced calls */

/* The schema of one call object: {"name": <names>, key: <arguments>},
 * both required, nothing else. params NULL: any object. */
static cJSON *call_schema(cJSON *names, const char *key, cJSON *params) {
    cJSON *o = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON *args = params ? params : cJSON_CreateObject();
    if (!params && args) cJSON_AddStringToObject(args, "type", "object");
    if (!o || !props || !req || !args || !cJSON_AddStringToObject(o, "type", "object")) {
        cJSON_Delete(o), cJSON_Delete(props), cJSON_Delete(req), cJSON_Delete(args), cJSON_Delete(names);
        return NULL;
    }
    cJSON_AddItemToObject(props, "name", names);
    cJSON_AddItemToObject(props, key, args);
    cJSON_AddItemToObject(o, "properties", props);
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString(key));
    cJSON_AddItemToObject(o, "required", req);
    cJSON_AddFalseToObject(o, "additionalProperties");
    return o;
}

/* Drops from schema s (in place) every keyword the schema subset does not
 * take (pattern, minimum, minLength, not, ...), in s and in the schemas
 * below it: a forced call then keeps the parameters' structure (names,
 * types, required, enums) with their bounds unchecked. */
static void relax(cJSON *s, int depth) {
    if (!cJSON_IsObject(s) || depth > 64) return;
    for (cJSON *m = s->child, *next; m; m = next) {
        next = m->next;
        const char *k = m->string;
        if (!vx_jschema_keyword_known(k)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(s, m));
        } else if (!strcmp(k, "properties") || !strcmp(k, "$defs") || !strcmp(k, "definitions")) {
            for (cJSON *c = m->child; c; c = c->next) relax(c, depth + 1);
        } else if (!strcmp(k, "anyOf") || !strcmp(k, "oneOf") || !strcmp(k, "allOf")) {
            for (cJSON *c = m->child; c; c = c->next) relax(c, depth + 1);
        } else if (!strcmp(k, "items") || !strcmp(k, "additionalProperties")) {
            relax(m, depth + 1);
        }
    }
}

/* The function object of tools[i] with this name (NULL: none). */
static const cJSON *function_named(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) return fn;
    }
    return NULL;
}

/* The function's parameters as the arguments' schema, at a level of
 * exactness: 2 as given, 1 without the keywords the subset does not take,
 * 0 any object. NULL with *oom false: not usable at this level (it would
 * allow other values than objects, which are no call, or it names the
 * document's root, "#", which the wrapping moves). A function without
 * parameters takes none: {}. */
static cJSON *params_for(const cJSON *fn, int exact, bool *oom) {
    *oom = false;
    cJSON *p = NULL;
    const cJSON *given = fn ? cJSON_GetObjectItemCaseSensitive(fn, "parameters") : NULL;
    if (exact == 0) {
        if ((p = cJSON_CreateObject())) cJSON_AddStringToObject(p, "type", "object");
    } else if (!cJSON_IsObject(given)) {
        if ((p = cJSON_CreateObject()))
            cJSON_AddStringToObject(p, "type", "object"), cJSON_AddFalseToObject(p, "additionalProperties");
    } else {
        if (!(p = cJSON_Duplicate(given, true))) return *oom = true, NULL;
        if (exact == 1) relax(p, 0);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
        bool usable = t ? cJSON_IsString(t) && !strcmp(t->valuestring, "object") : true;
        static const char *const alts[] = {"$ref", "anyOf", "oneOf", "allOf", "enum", "const"};
        for (size_t k = 0; k < sizeof alts / sizeof *alts; k++)
            if (cJSON_GetObjectItemCaseSensitive(p, alts[k])) usable = false;
        cJSON_DeleteItemFromObjectCaseSensitive(p, "nullable");
        if (usable && !t) cJSON_AddStringToObject(p, "type", "object");
        char *text = usable ? cJSON_PrintUnformatted(p) : NULL;
        if (usable && !text) {
            cJSON_Delete(p);
            return *oom = true, NULL;
        }
        if (text && strstr(text, "\"$ref\":\"#\"")) usable = false;
        free(text);
        if (!usable) {
            cJSON_Delete(p);
            return NULL;
        }
        return p;
    }
    if (!p) *oom = true;
    return p;
}

/* Whether a schema text compiles (for the subset). */
static bool compiles(const char *text) {
    vx_jschema *js = NULL;
    char msg[VX_ERRMSG_MAX];
    const bool ok = text && vx_jschema_compile(text, strlen(text), &js, msg, sizeof msg) == VX_OK;
    vx_jschema_free(js);
    return ok;
}

/* One function's call object (its name a const), its parameters at the
 * most exact level that compiles and whose $defs / definitions do not
 * clash with those taken so far (defs: where they go). NULL: out of
 * memory. */
static cJSON *union_call(const cJSON *fn, const char *key, cJSON *defs[2]) {
    static const char *const def_keys[2] = {"$defs", "definitions"};
    for (int exact = 2; exact >= 0; exact--) {
        bool oom;
        cJSON *params = params_for(fn, exact, &oom), *d[2] = {NULL, NULL};
        if (!params) {
            if (oom) return NULL;
            continue;
        }
        bool clash = false;
        for (int k = 0; k < 2; k++) {
            d[k] = cJSON_DetachItemFromObjectCaseSensitive(params, def_keys[k]);
            for (const cJSON *m = d[k] ? d[k]->child : NULL; m; m = m->next)
                if (cJSON_GetObjectItemCaseSensitive(defs[k], m->string)) clash = true;
        }
        cJSON *names = cJSON_CreateObject();
        if (names) cJSON_AddStringToObject(names, "const", cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring);
        cJSON *call = names ? call_schema(names, key, params) : (cJSON_Delete(params), NULL);
        if (!call) {
            cJSON_Delete(d[0]), cJSON_Delete(d[1]);
            return NULL;
        }
        /* alone, with its own definitions, it must compile */
        for (int k = 0; k < 2; k++)
            if (d[k]) cJSON_AddItemToObject(call, def_keys[k], d[k]);
        char *text = cJSON_PrintUnformatted(call);
        const bool ok = !clash && compiles(text);
        free(text);
        for (int k = 0; k < 2; k++) d[k] = cJSON_DetachItemFromObjectCaseSensitive(call, def_keys[k]);
        if (!ok) {
            cJSON_Delete(call), cJSON_Delete(d[0]), cJSON_Delete(d[1]);
            continue;
        }
        for (int k = 0; k < 2; k++) {
            while (d[k] && d[k]->child) {
                cJSON *m = cJSON_DetachItemViaPointer(d[k], d[k]->child);
                cJSON_AddItemToObject(defs[k], m->string, m);
            }
            cJSON_Delete(d[k]);
        }
        return call;
    }
    return NULL; /* exact 0 always compiles: not reached but out of memory */
}

/* The schema of a forced call: of function fn, or (fn NULL) of any of
 * the tools, whose arguments keep to that function's parameters (an anyOf
 * of call objects told apart by their name, json_schema.h), their $defs /
 * definitions lifted to the root so that "#/$defs/" pointers still reach
 * them; mistral's array of calls around it. NULL with *st VX_ENOMEM, or
 * VX_EINVAL for a union the subset refused. */
static char *force_union(vx_tool_format f, const cJSON *tools, const cJSON *fn, bool parallel, vx_status *st) {
    const char *key = f == VX_TOOL_FMT_LLAMA3 ? "parameters" : "arguments";
    cJSON *alts = cJSON_CreateArray(), *defs[2] = {cJSON_CreateObject(), cJSON_CreateObject()};
    cJSON *root = cJSON_CreateObject();
    bool ok = alts && defs[0] && defs[1] && root;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *tf = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (fn && tf != fn) continue;
        cJSON *call = ok ? union_call(tf, key, defs) : NULL;
        if (!call || !cJSON_AddItemToArray(alts, call)) ok = false;
    }
    cJSON *calls = root;
    if (ok && f == VX_TOOL_FMT_MISTRAL) {
        cJSON_AddStringToObject(root, "type", "array");
        cJSON_AddNumberToObject(root, "minItems", 1);
        if (!parallel) cJSON_AddNumberToObject(root, "maxItems", 1);
        if (!(calls = cJSON_AddObjectToObject(root, "items"))) ok = false;
    }
    if (ok) {
        cJSON_AddItemToObject(calls, "anyOf", alts);
        alts = NULL;
        if (defs[0]->child) cJSON_AddItemToObject(root, "$defs", defs[0]), defs[0] = NULL;
        if (defs[1]->child) cJSON_AddItemToObject(root, "definitions", defs[1]), defs[1] = NULL;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(alts), cJSON_Delete(defs[0]), cJSON_Delete(defs[1]), cJSON_Delete(root);
    *st = text ? VX_OK : VX_ENOMEM;
    if (text && !compiles(text)) free(text), text = NULL, *st = VX_EINVAL;
    return text;
}

/* The arguments' schema of a forced call of fn alone: its parameters at
 * the most exact level that compiles. */
static char *force_params(const cJSON *fn, vx_status *st) {
    *st = VX_OK;
    for (int exact = 2; exact >= 0; exact--) {
        bool oom;
        cJSON *p = params_for(fn, exact, &oom);
        if (!p) {
            if (oom) break;
            continue;
        }
        char *text = cJSON_PrintUnformatted(p);
        cJSON_Delete(p);
        if (!text) break;
        if (compiles(text)) return text;
        free(text);
    }
    *st = VX_ENOMEM; /* exact 0 always compiles */
    return NULL;
}

vx_status vx_tool_force(vx_tool_format f, const char *tools_json, const char *name, bool parallel, char **prefix,
                        char **schema) {
    *prefix = *schema = NULL;
    if (f == VX_TOOL_FMT_NONE) return VX_EINVAL;
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    /* one function: "required" names it */
    const cJSON *only = cJSON_GetArraySize(tools) == 1 ? cJSON_GetArrayItem(tools, 0) : NULL;
    const cJSON *fn = name ? function_named(tools, name) : cJSON_GetObjectItemCaseSensitive(only, "function");
    const cJSON *t;
    bool named_all = cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (!cJSON_IsString(nm)) named_all = false;
    }
    if (!named_all || (name && !fn)) {
        cJSON_Delete(tools);
        return VX_EINVAL;
    }
    vx_status st;
    if (f == VX_TOOL_FMT_HARMONY) { /* the name is in the header: one function only */
        const char *fname = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring : NULL;
        char *text = fname ? force_params(fn, &st) : NULL;
        if (!fname) st = VX_EUNSUPPORTED;
        else if (st == VX_OK && !(*prefix = vx_harmony_call_prefix(fname))) st = VX_ENOMEM;
        cJSON_Delete(tools);
        if (st != VX_OK) {
            free(text);
            return st;
        }
        *schema = text;
        return VX_OK;
    }
    char *text = force_union(f, tools, fn, parallel, &st);
    cJSON_Delete(tools);
    const char *pre = f == VX_TOOL_FMT_HERMES ? "<tool_call>\n" : f == VX_TOOL_FMT_MISTRAL ? MISTRAL_OPEN : "";
    if (st == VX_OK && !(*prefix = strdup(pre))) st = VX_ENOMEM;
    if (st != VX_OK) {
        free(text);
        return st;
    }
    *schema = text;
    return VX_OK;
}

void vx_tool_call_id(vx_tool_format f, char *buf, size_t size) {
    char tail[25];
    vx_random_alnum(tail, f == VX_TOOL_FMT_MISTRAL ? 9 : 24);
    snprintf(buf, size, "%s%s", f == VX_TOOL_FMT_MISTRAL ? "" : "call_", tail);
}
