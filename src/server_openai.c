/*
 * server_openai.c - OpenAI API shapes for `vx serve`: request parsing and
 * validation, prompt rendering/tokenization and response/SSE JSON building
 * (the UTF-8 checks and the streaming stop-string filter: server_text.c). Pure
 * functions over their inputs (no sockets, no engine) so that every corner
 * can be unit-tested; see server_openai.h.
 *
 * Requests are parsed with cJSON; responses are written by hand into a
 * byte buffer because their shapes are fixed, texts carry lengths (and may
 * hold NUL bytes) and streaming writes one small chunk per token.
 */
#include "server_openai.h"

#include "common.h"
#include "grammar.h"
#include "json_schema.h"
#include "tool_call.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- JSON output */

/* Appends a JSON string literal of s[0..n) (valid UTF-8 expected; invalid
 * bytes are replaced so the output is always valid JSON). */
static void json_str(vx_sbuf *b, const char *s, size_t n) {
    vx_sbuf tmp = {0};
    if (!vx_utf8_valid(s, n, NULL)) {
        vx_utf8_sanitize(&tmp, s, n);
        if (tmp.oom) {
            b->oom = true;
            vx_sbuf_free(&tmp);
            return;
        }
        s = tmp.p ? tmp.p : "";
        n = tmp.len;
    }
    vx_sbuf_add(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        vx_sbuf_add(b, s + start, i - start);
        switch (c) {
        case '"': vx_sbuf_add(b, "\\\"", 2); break;
        case '\\': vx_sbuf_add(b, "\\\\", 2); break;
        case '\n': vx_sbuf_add(b, "\\n", 2); break;
        case '\r': vx_sbuf_add(b, "\\r", 2); break;
        case '\t': vx_sbuf_add(b, "\\t", 2); break;
        case '\b': vx_sbuf_add(b, "\\b", 2); break;
        case '\f': vx_sbuf_add(b, "\\f", 2); break;
        default: vx_sbuf_addf(b, "\\u%04x", c); break;
        }
        start = i + 1;
    }
    vx_sbuf_add(b, s + start, n - start);
    vx_sbuf_add(b, "\"", 1);
    vx_sbuf_free(&tmp);
}

static void json_cstr(vx_sbuf *b, const char *s) {
    if (s) json_str(b, s, strlen(s));
    else vx_sbuf_adds(b, "null");
}

/* Log-probabilities: -inf (a filtered token) becomes -9999 as OpenAI does;
 * NaN has no JSON spelling and becomes null. */
static void json_logprob(vx_sbuf *b, float x) {
    if (isnan(x)) vx_sbuf_adds(b, "null");
    else if (x < -9999.0f) vx_sbuf_adds(b, "-9999.0");
    else vx_sbuf_addf(b, "%.6g", (double)x);
}

/* ------------------------------------------------------------------ errors */

void vx_oai_set_error(vx_oai_error *e, int status, const char *param, const char *fmt, ...) {
    if (!e) return;
    e->status = status;
    e->type = status == 401   ? "authentication_error"
              : status == 404 ? "not_found_error"
              : status == 429 ? "rate_limit_error"
              : status >= 500 ? "server_error"
                              : "invalid_request_error";
    e->code = NULL;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* a quoted value cut short (%.32s) or the message cut at its size can
     * split a character: drop the pieces so the message stays valid UTF-8 */
    unsigned char *u = (unsigned char *)e->message;
    size_t n = strlen(e->message), i = 0, o = 0, bad;
    while (i < n) {
        int k = u[i] < 0x80 ? 1 : vx_utf8_char(u + i, n - i, &bad);
        if (k == 0) {
            i += bad;
            continue;
        }
        memmove(u + o, u + i, (size_t)k);
        o += (size_t)k;
        i += (size_t)k;
    }
    u[o] = 0;
}

static void error_object(vx_sbuf *b, const vx_oai_error *e) {
    vx_sbuf_adds(b, "{\"error\":{\"message\":");
    json_cstr(b, e->message);
    vx_sbuf_adds(b, ",\"type\":");
    json_cstr(b, e->type ? e->type : "invalid_request_error");
    vx_sbuf_adds(b, ",\"param\":");
    json_cstr(b, e->param[0] ? e->param : NULL);
    vx_sbuf_adds(b, ",\"code\":");
    json_cstr(b, e->code);
    vx_sbuf_adds(b, "}}");
}

char *vx_oai_error_json(const vx_oai_error *e) {
    vx_sbuf b = {0};
    error_object(&b, e);
    return vx_sbuf_take(&b);
}

void vx_oai_error_chunk(vx_sbuf *out, const vx_oai_error *e) {
    vx_sbuf_adds(out, "data: ");
    error_object(out, e);
    vx_sbuf_adds(out, "\n\n");
}

/* -------------------------------------------------------------- JSON input */

/* What cJSON lets through but JSON forbids, and what it would silently
 * get wrong: control bytes between tokens (cJSON skips every byte <= 0x20
 * as whitespace), numbers such as 01 or 1. (it hands them to strtod), and
 * NUL characters in strings (its strings end at the first NUL: the key
 * "n\u0000x" would be read as "n", a prompt would be cut short). A NUL in
 * a key, and a raw NUL byte anywhere, is an error; a \u0000 escape in a
 * value is rewritten in patch (a copy of the body, if not NULL) to \ufffd,
 * the same length, and *n_nul counts them. A \u escape without four
 * hex digits is an error (cJSON reads "\uZZZZ" as a NUL, which would cut
 * the string short). Arrays and objects nested
 * deeper than cJSON takes are an error here too, so that it is named.
 * Returns the offset of the first error (len if none) with *what saying
 * what it is. Structure and literals are left to cJSON; other raw control
 * bytes in strings are accepted. */
/* Four hex digits at s (n bytes left). */
static bool hex4(const unsigned char *s, size_t n) {
    if (n < 4) return false;
    for (int k = 0; k < 4; k++)
        if (!((s[k] >= '0' && s[k] <= '9') || ((s[k] | 0x20) >= 'a' && (s[k] | 0x20) <= 'f'))) return false;
    return true;
}

#define JSON_STR2(x) #x
#define JSON_STR(x) JSON_STR2(x) /* cJSON's nesting limit as a string literal */
static size_t json_lex_check(const char *body, size_t len, char *patch, size_t *n_nul, const char **what) {
    const unsigned char *s = (const unsigned char *)body;
    size_t i = 0, depth = 0;
    *n_nul = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c == '"') {
            size_t first_nul = SIZE_MAX;
            for (i++; i < len && s[i] != '"'; i++) {
                if (s[i] == 0) {
                    *what = "a raw NUL byte in a string";
                    return i;
                }
                if (s[i] != '\\' || i + 1 >= len) continue;
                if (s[i + 1] == 'u' && !hex4(s + i + 2, len - i - 2)) {
                    *what = "an invalid \\u escape (four hex digits must follow)";
                    return i;
                }
                if (s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4)) {
                    if (first_nul == SIZE_MAX) first_nul = i;
                    (*n_nul)++;
                    if (patch) memcpy(patch + i + 2, "fffd", 4);
                }
                i++; /* the escaped byte */
            }
            i++;
            if (first_nul != SIZE_MAX) {
                size_t k = i;
                while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r')) k++;
                if (k < len && s[k] == ':') {
                    *what = "a NUL character (\\u0000) in a key";
                    return first_nul;
                }
            }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t at = i;
            if (c == '-') i++;
            if (i < len && s[i] == '0') i++;
            else if (i < len && s[i] >= '1' && s[i] <= '9') while (i < len && s[i] >= '0' && s[i] <= '9') i++;
            else goto bad_number;
            if (i < len && s[i] >= '0' && s[i] <= '9') goto bad_number; /* a leading zero */
            if (i < len && s[i] == '.') {
                if (++i >= len || s[i] < '0' || s[i] > '9') goto bad_number;
                while (i < len && s[i] >= '0' && s[i] <= '9') i++;
            }
            if (i < len && (s[i] == 'e' || s[i] == 'E')) {
                if (++i < len && (s[i] == '+' || s[i] == '-')) i++;
                if (i >= len || s[i] < '0' || s[i] > '9') goto bad_number;
                while (i < len && s[i] >= '0' && s[i] <= '9') i++;
            }
            continue;
        bad_number:
            *what = "an invalid number";
            return at;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) i++;
        } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            *what = "a control character outside a string";
            return i;
        } else {
            if ((c == '[' || c == '{') && ++depth > CJSON_NESTING_LIMIT) {
                *what = "arrays and objects nested deeper than " JSON_STR(CJSON_NESTING_LIMIT) " levels";
                return i;
            }
            if ((c == ']' || c == '}') && depth > 0) depth--;
            i++;
        }
    }
    return len;
}

void *vx_oai_parse_json_object(const char *body, size_t len, vx_oai_error *err) {
    size_t bad;
    if (!vx_utf8_valid(body, len, &bad)) {
        vx_oai_set_error(err, 400, NULL, "The request body is not valid UTF-8 (byte %zu).", bad);
        return NULL;
    }
    const char *what = "syntax error";
    size_t n_nul = 0;
    size_t lex_pos = json_lex_check(body, len, NULL, &n_nul, &what);
    /* cJSON gets a NUL-terminated copy: 1.7.15 and older read one byte past
     * the end of a body that stops after a comma in an object (CVE-2023-53154,
     * fixed in 1.7.18 and in some distributions' 1.7.15). In the copy a NUL
     * character in a value becomes U+FFFD rather than the string's end. */
    char *copy = malloc(len + 1);
    if (!copy) {
        vx_oai_set_error(err, 500, NULL, "Out of memory while reading the request body.");
        return NULL;
    }
    memcpy(copy, body, len);
    copy[len] = 0;
    if (n_nul && lex_pos == len) {
        const char *unused;
        json_lex_check(body, len, copy, &n_nul, &unused);
    }
    const char *end = NULL;
    cJSON *root = len ? cJSON_ParseWithLengthOpts(copy, len, &end, false) : NULL;
    if (end) end = body + (end - copy); /* the same offsets: \u0000 and \ufffd are both 6 bytes */
    free(copy);
    size_t pos = root ? 0 : (end && end >= body && end <= body + len ? (size_t)(end - body) : 0);
    if (root) {
        /* cJSON stops after the first value: anything but whitespace after it is an error */
        pos = (size_t)(end - body);
        while (pos < len && (body[pos] == ' ' || body[pos] == '\t' || body[pos] == '\n' || body[pos] == '\r'))
            pos++;
        if (pos < len) {
            cJSON_Delete(root);
            root = NULL;
        }
    }
    /* the first error wins: cJSON's, or one it let through */
    if (!root || lex_pos < len) {
        if (root || lex_pos <= pos) pos = lex_pos;
        else what = "syntax error";
        cJSON_Delete(root);
        size_t line = 1, col = 1;
        for (size_t i = 0; i < pos && i < len; i++) {
            if (body[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        vx_oai_set_error(err, 400, NULL,
                         "Invalid JSON in the request body: %s at line %zu, column %zu (byte %zu).",
                         len == 0 ? "empty body" : what,
                         line, col, pos);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        vx_oai_set_error(err, 400, NULL, "The request body must be a JSON object.");
        return NULL;
    }
    return root;
}

/* A member, with JSON null treated as absent (clients send null for "unset"). */
const cJSON *vx_oai_member(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return x && !cJSON_IsNull(x) ? x : NULL;
}

bool vx_oai_copy_member(cJSON *dst, const char *key, const cJSON *src) {
    if (!src) return true;
    cJSON *c = cJSON_Duplicate(src, true);
    if (c && cJSON_AddItemToObject(dst, key, c)) return true;
    cJSON_Delete(c);
    return false;
}

bool vx_oai_oom(vx_oai_error *err) {
    vx_oai_set_error(err, 500, NULL, "Out of memory.");
    return false;
}

static const cJSON *member(const cJSON *o, const char *key) { return vx_oai_member(o, key); }

static const char *json_type_name(const cJSON *x) {
    if (cJSON_IsBool(x)) return "a boolean";
    if (cJSON_IsNumber(x)) return "a number";
    if (cJSON_IsString(x)) return "a string";
    if (cJSON_IsArray(x)) return "an array";
    if (cJSON_IsObject(x)) return "an object";
    return "null";
}

static bool type_error(vx_oai_error *e, const char *param, const char *want, const cJSON *got) {
    vx_oai_set_error(e, 400, param, "Invalid type for '%s': expected %s, but got %s instead.", param, want,
                     json_type_name(got));
    return false;
}

/* response_format {"type": "json_schema", "json_schema": {"schema": ...}}:
 * the schema, compiled to check it (the engine compiles it again), into
 * r->json_schema. */
static bool parse_json_schema(const cJSON *rf, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *js = member(rf, "json_schema");
    if (!cJSON_IsObject(js)) return type_error(e, "response_format.json_schema", "an object", js);
    const cJSON *sch = member(js, "schema");
    if (!cJSON_IsObject(sch) && !cJSON_IsTrue(sch))
        return type_error(e, "response_format.json_schema.schema", "an object (a JSON Schema)", sch);
    if (!(r->json_schema = cJSON_PrintUnformatted(sch))) {
        vx_oai_set_error(e, 500, NULL, "Out of memory.");
        return false;
    }
    char msg[VX_ERRMSG_MAX];
    vx_jschema *compiled = NULL;
    const vx_status st = vx_jschema_compile(r->json_schema, strlen(r->json_schema), &compiled, msg, sizeof msg);
    vx_jschema_free(compiled);
    if (st == VX_OK) return true;
    if (st == VX_ENOMEM) vx_oai_set_error(e, 500, NULL, "Out of memory.");
    else vx_oai_set_error(e, 400, "response_format.json_schema.schema", "Unsupported JSON schema: %s.", msg);
    return false;
}

/* response_format: "text" asks for nothing, "json_object" for constrained
 * decoding to one JSON object (json_check.h), "json_schema" to a schema's
 * subset (json_schema.h). Features this server does not have are refused
 * rather than ignored. */
static bool refuse_unsupported(const cJSON *root, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *rf = member(root, "response_format");
    if (rf) {
        const cJSON *t = cJSON_IsObject(rf) ? member(rf, "type") : NULL;
        if (!t || !cJSON_IsString(t))
            return type_error(e, "response_format", "an object with a string 'type'", t ? t : rf);
        if (!strcmp(t->valuestring, "json_object")) {
            r->json_object = true;
        } else if (!strcmp(t->valuestring, "json_schema")) {
            if (!parse_json_schema(rf, r, e)) return false;
        } else if (strcmp(t->valuestring, "text")) {
            vx_oai_set_error(e, 400, "response_format",
                             "response_format type '%.40s' is not supported (only 'text', 'json_object' and "
                             "'json_schema').",
                             t->valuestring);
            return false;
        }
    }
    const cJSON *g = member(root, "grammar"); /* llama-server's: GBNF (grammar.h); "" is none */
    if (g && !cJSON_IsString(g)) return type_error(e, "grammar", "a string (a GBNF grammar)", g);
    if (!g || !g->valuestring[0]) return true;
    if (r->json_object || r->json_schema) {
        vx_oai_set_error(e, 400, "grammar", "'grammar' and a JSON 'response_format' cannot be combined.");
        return false;
    }
    char msg[VX_ERRMSG_MAX];
    vx_grammar *compiled = NULL;
    const vx_status st = vx_grammar_parse(g->valuestring, strlen(g->valuestring), &compiled, msg, sizeof msg);
    vx_grammar_free(compiled);
    if (st == VX_ENOMEM) vx_oai_set_error(e, 500, NULL, "Out of memory.");
    else if (st != VX_OK) vx_oai_set_error(e, 400, "grammar", "Invalid GBNF grammar: %s.", msg);
    else if (!(r->grammar = strdup(g->valuestring))) vx_oai_set_error(e, 500, NULL, "Out of memory.");
    return r->grammar != NULL;
}

/* Optional number in [lo, hi]; *present tells whether it was given. */
static bool opt_number(const cJSON *o, const char *key, double lo, double hi, double *out, bool *present,
                       vx_oai_error *e) {
    const cJSON *x = member(o, key);
    if (present) *present = x != NULL;
    if (!x) return true;
    if (!cJSON_IsNumber(x)) return type_error(e, key, "a number", x);
    double v = x->valuedouble;
    if (!isfinite(v) || v < lo || v > hi) {
        vx_oai_set_error(e, 400, key, "Invalid value for '%s': expected a number between %g and %g, but got %g.",
                         key, lo, hi, v);
        return false;
    }
    *out = v;
    return true;
}

static bool opt_float(const cJSON *o, const char *key, double lo, double hi, float *out, vx_oai_error *e) {
    double v = *out;
    if (!opt_number(o, key, lo, hi, &v, NULL, e)) return false;
    *out = (float)v;
    return true;
}

/* Optional integer in [lo, hi]; 3.0 counts as an integer, 3.5 does not. */
static bool opt_int(const cJSON *o, const char *key, double lo, double hi, int64_t *out, bool *present,
                    vx_oai_error *e) {
    const cJSON *x = member(o, key);
    if (present) *present = x != NULL;
    if (!x) return true;
    if (!cJSON_IsNumber(x)) return type_error(e, key, "an integer", x);
    double v = x->valuedouble;
    if (!isfinite(v) || v != floor(v)) return type_error(e, key, "an integer", x);
    if (v < lo || v > hi) {
        /* 2^64 - 1 is no double: the bound rounds up to 2^64 */
        char his[32];
        if (hi >= 0x1p64) snprintf(his, sizeof his, "%llu", (unsigned long long)UINT64_MAX);
        else snprintf(his, sizeof his, "%.0f", hi);
        vx_oai_set_error(e, 400, key, "Invalid value for '%s': expected an integer between %.0f and %s, but got %.17g.",
                         key, lo, his, v);
        return false;
    }
    /* seeds may go up to 2^64: out of int64's range the caller reads the double */
    *out = v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)v;
    return true;
}

static bool opt_bool(const cJSON *o, const char *key, bool *out, vx_oai_error *e) {
    const cJSON *x = member(o, key);
    if (!x) return true;
    if (!cJSON_IsBool(x)) return type_error(e, key, "a boolean", x);
    *out = cJSON_IsTrue(x);
    return true;
}

/* The text of member key (parsed: its value) as the client wrote it in
 * the body, unless it holds NUL escapes, which the request's reader turned
 * into U+FFFD: then printed from the parse. malloc'd; NULL: out of memory. */
static char *member_text(const char *body, size_t len, const char *key, const cJSON *parsed) {
    size_t va, ve;
    if (!vx_json_member_span(body, 0, len, key, &va, &ve) || memmem(body + va, ve - va, "\\u0000", 6))
        return cJSON_PrintUnformatted(parsed);
    char *t = malloc(ve - va + 1);
    if (t) memcpy(t, body + va, ve - va), t[ve - va] = 0;
    return t;
}

/* OpenAI's rule for function names: 1-64 of a-z A-Z 0-9 _ - */
static bool function_name_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!(s[n] == '_' || s[n] == '-' || (s[n] >= '0' && s[n] <= '9') || ((s[n] | 32) >= 'a' && (s[n] | 32) <= 'z')))
            return false;
    return n >= 1 && n <= 64;
}

/* tools, tool_choice, parallel_tool_calls (tool_call.h). tool_choice
 * "none" (or no tools) leaves the request as one without tools: the
 * template gets none, the reply is text. The legacy functions /
 * function_call are refused: their reply has another shape. */
static bool parse_tools(const cJSON *root, const char *body, size_t len, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *fx = member(root, "functions");
    if (fx && !cJSON_IsNull(fx) && (!cJSON_IsArray(fx) || cJSON_GetArraySize(fx) > 0)) {
        vx_oai_set_error(e, 400, "functions",
                         "The deprecated 'functions' parameter is not supported; send the functions as 'tools'.");
        return false;
    }
    r->parallel_tool_calls = true;
    if (!opt_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, e)) return false;
    const cJSON *tools = member(root, "tools"), *tc = member(root, "tool_choice");
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (tc && cJSON_IsNull(tc)) tc = NULL;
    if (tools && !cJSON_IsArray(tools)) return type_error(e, "tools", "an array", tools);
    const int32_t n = tools ? cJSON_GetArraySize(tools) : 0;
    if (n > VX_OAI_MAX_TOOLS) {
        vx_oai_set_error(e, 400, "tools", "Invalid 'tools': array too long. Expected an array with maximum length %d, "
                                          "but got an array with length %d instead.", VX_OAI_MAX_TOOLS, (int)n);
        return false;
    }
    const char *choice = "auto", *named = NULL;
    if (tc && cJSON_IsString(tc)) {
        choice = tc->valuestring;
        if (strcmp(choice, "none") && strcmp(choice, "auto") && strcmp(choice, "required")) {
            vx_oai_set_error(e, 400, "tool_choice",
                             "Invalid value for 'tool_choice': '%.40s'. Expected 'none', 'auto', 'required' or an "
                             "object naming a function.", choice);
            return false;
        }
    } else if (tc) {
        const cJSON *ty = cJSON_IsObject(tc) ? member(tc, "type") : NULL, *fn = cJSON_IsObject(tc) ? member(tc, "function") : NULL;
        const cJSON *nm = cJSON_IsObject(fn) ? member(fn, "name") : NULL;
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(nm))
            return type_error(e, "tool_choice", "'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}", tc);
        choice = "named";
        named = nm->valuestring;
    }
    if (!strcmp(choice, "none")) return true;
    if (n == 0) {
        if (strcmp(choice, "auto")) {
            vx_oai_set_error(e, 400, "tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when "
                                                    "'tools' are specified.");
            return false;
        }
        return true;
    }
    if (!(r->tool_names = calloc((size_t)n, sizeof *r->tool_names))) goto oom;
    char param[96];
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const int32_t i = r->n_tools;
        snprintf(param, sizeof param, "tools[%d]", (int)i);
        if (!cJSON_IsObject(t)) return type_error(e, param, "an object", t);
        const cJSON *ty = member(t, "type"), *fn = member(t, "function");
        snprintf(param, sizeof param, "tools[%d].type", (int)i);
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function")) return type_error(e, param, "'function'", ty);
        snprintf(param, sizeof param, "tools[%d].function", (int)i);
        if (!cJSON_IsObject(fn)) return type_error(e, param, "an object", fn);
        const cJSON *nm = member(fn, "name"), *ds = member(fn, "description"), *pa = member(fn, "parameters");
        snprintf(param, sizeof param, "tools[%d].function.name", (int)i);
        if (!cJSON_IsString(nm)) return type_error(e, param, "a string", nm);
        if (!function_name_ok(nm->valuestring)) {
            vx_oai_set_error(e, 400, param, "Invalid '%s': '%.64s'. Function names are 1 to 64 letters, digits, "
                                            "underscores or dashes.", param, nm->valuestring);
            return false;
        }
        for (int32_t k = 0; k < i; k++)
            if (!strcmp(r->tool_names[k], nm->valuestring)) {
                vx_oai_set_error(e, 400, param, "Duplicate function name '%s' in 'tools'.", nm->valuestring);
                return false;
            }
        snprintf(param, sizeof param, "tools[%d].function.description", (int)i);
        if (ds && !cJSON_IsString(ds)) return type_error(e, param, "a string", ds);
        snprintf(param, sizeof param, "tools[%d].function.parameters", (int)i);
        if (pa && !cJSON_IsObject(pa)) return type_error(e, param, "an object (a JSON Schema)", pa);
        if (!(r->tool_names[i] = strdup(nm->valuestring))) goto oom;
        r->n_tools++;
    }
    if (named) {
        int32_t k = 0;
        while (k < n && strcmp(r->tool_names[k], named)) k++;
        if (k == n) {
            vx_oai_set_error(e, 400, "tool_choice", "Invalid value for 'tool_choice': no function named '%.64s' in "
                                                    "'tools'.", named);
            return false;
        }
        if (!(r->tool_name = strdup(named))) goto oom;
    }
    r->tool_choice = named ? VX_OAI_TOOLS_NAMED : !strcmp(choice, "required") ? VX_OAI_TOOLS_REQUIRED : VX_OAI_TOOLS_AUTO;
    if (r->tool_choice != VX_OAI_TOOLS_AUTO && (r->json_object || r->json_schema || r->grammar)) {
        vx_oai_set_error(e, 400, "tool_choice", "A forced tool call ('tool_choice' '%s') cannot be combined with a JSON "
                                                "'response_format' or a 'grammar'.", named ? "function" : "required");
        return false;
    }
    /* the template gets the tools as the client wrote them (as vLLM's
     * Python does: printed again by cJSON, 1.0 would be 1) */
    if (!(r->tools_json = member_text(body, len, "tools", tools))) goto oom;
    return true;
oom:
    vx_oai_set_error(e, 500, NULL, "Out of memory.");
    return false;
}

/* ---------------------------------------------------------------- requests */

void vx_oai_request_free(vx_oai_request *r) {
    if (!r) return;
    free(r->model);
    free(r->messages_json);
    free(r->prompt);
    free(r->prompt_ids);
    free(r->suffix);
    free(r->logit_bias);
    free(r->json_schema);
    free(r->grammar);
    free(r->tools_json);
    free(r->template_kwargs);
    for (int32_t i = 0; i < r->n_tools; i++) free(r->tool_names[i]);
    free(r->tool_names);
    free(r->tool_name);
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

/* The text of a message's content: a string, an array of {"type":"text",
 * "text":...} parts (joined with newlines, as vLLM does), or null/absent
 * (an assistant turn with tool calls) which becomes "". */
static bool content_text(const cJSON *content, int32_t mi, vx_sbuf *out, vx_oai_error *e) {
    char param[96];
    snprintf(param, sizeof param, "messages[%d].content", (int)mi);
    if (!content) return true;
    if (cJSON_IsString(content)) {
        vx_sbuf_adds(out, content->valuestring); /* out of memory: the caller sees out->oom */
        return true;
    }
    if (!cJSON_IsArray(content)) return type_error(e, param, "a string or an array of content parts", content);
    int32_t j = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        snprintf(param, sizeof param, "messages[%d].content[%d]", (int)mi, (int)j);
        if (!cJSON_IsObject(part)) return type_error(e, param, "an object", part);
        const cJSON *type = member(part, "type"), *text = member(part, "text");
        if (!cJSON_IsString(type)) {
            snprintf(param, sizeof param, "messages[%d].content[%d].type", (int)mi, (int)j);
            if (!type) {
                vx_oai_set_error(e, 400, param, "Missing required parameter: '%s'.", param);
                return false;
            }
            return type_error(e, param, "a string", type);
        }
        if (strcmp(type->valuestring, "text") != 0) {
            snprintf(param, sizeof param, "messages[%d].content[%d].type", (int)mi, (int)j);
            vx_oai_set_error(e, 400, param, "Unsupported content part type '%.64s': only 'text' parts are supported.",
                             type->valuestring);
            return false;
        }
        if (!cJSON_IsString(text)) {
            snprintf(param, sizeof param, "messages[%d].content[%d].text", (int)mi, (int)j);
            if (!text) {
                vx_oai_set_error(e, 400, param, "Missing required parameter: '%s'.", param);
                return false;
            }
            return type_error(e, param, "a string", text);
        }
        if (j > 0) vx_sbuf_add(out, "\n", 1);
        vx_sbuf_adds(out, text->valuestring);
        j++;
    }
    return true;
}

/* Levels of nesting of x, counting up to limit + 1. */
static int json_depth(const cJSON *x, int limit) {
    if (!cJSON_IsArray(x) && !cJSON_IsObject(x)) return 0;
    if (limit <= 0) return 1;
    int d = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, x) {
        int cd = json_depth(c, limit - 1);
        if (cd > d) d = cd;
        if (d >= limit) break;
    }
    return d + 1;
}

/* Nesting a message field may have: deeper ones are dropped (ignored like
 * unknown fields): no template reads them and the template's JSON reader
 * stops at 128 levels. */
#define MAX_FIELD_DEPTH 64

/* An assistant message's tool_calls[].function.arguments, a JSON text in
 * OpenAI's API, become the object they hold (when they hold one), as vLLM
 * passes them: templates write them with tojson (Qwen, Hermes, Llama 3.x,
 * Mistral), and a string would come out quoted. False: out of memory. */
static bool arguments_as_objects(cJSON *msg) {
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *c;
    if (!cJSON_IsArray(calls)) return true;
    cJSON_ArrayForEach(c, calls) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        if (!cJSON_IsString(args)) continue;
        /* held to the request's own strict JSON rules; then its text goes
         * on as it is (cJSON would print 1.5e3 or 1500.0 as 1500, where
         * vLLM's Python keeps the float) unless it has NUL escapes, which
         * the strict reader turns into U+FFFD */
        vx_oai_error ignored;
        const size_t len = strlen(args->valuestring);
        cJSON *obj = vx_oai_parse_json_object(args->valuestring, len, &ignored);
        if (!obj || json_depth(obj, MAX_FIELD_DEPTH) > MAX_FIELD_DEPTH) {
            cJSON_Delete(obj);
            continue;
        }
        cJSON *raw = strstr(args->valuestring, "\\u0000") ? obj : cJSON_CreateRaw(args->valuestring);
        if (raw != obj) cJSON_Delete(obj);
        if (!raw || !cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", raw)) {
            cJSON_Delete(raw);
            return false;
        }
    }
    return true;
}

/* Builds the template's message list: every field kept, content flattened. */
static bool parse_messages(const cJSON *root, int32_t n_ctx, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!msgs || cJSON_IsNull(msgs)) {
        vx_oai_set_error(e, 400, "messages", "Missing required parameter: 'messages'.");
        return false;
    }
    if (!cJSON_IsArray(msgs)) return type_error(e, "messages", "an array", msgs);
    int32_t n = cJSON_GetArraySize(msgs);
    if (n == 0) {
        vx_oai_set_error(e, 400, "messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.");
        return false;
    }
    /* every message renders to a token at least: more than the context
     * holds cannot fit, and copying, rendering and tokenizing a body of many
     * tiny messages took tens of times its size in memory (a 7 MB body of
     * 225,001 messages: 330-490 MB) */
    if (n_ctx > 0 && n > n_ctx) {
        vx_oai_set_error(e, 400, "messages",
                         "This model's maximum context length is %d tokens. However, you sent %d messages, and every "
                         "message takes at least one token. Please reduce the length of the messages.",
                         (int)n_ctx, (int)n);
        e->code = "context_length_exceeded";
        return false;
    }
    cJSON *out = cJSON_CreateArray();
    if (!out) goto oom;
    int32_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char param[96];
        snprintf(param, sizeof param, "messages[%d]", (int)i);
        if (!cJSON_IsObject(m)) {
            cJSON_Delete(out);
            return type_error(e, param, "an object", m);
        }
        const cJSON *role = member(m, "role");
        snprintf(param, sizeof param, "messages[%d].role", (int)i);
        if (!role) {
            cJSON_Delete(out);
            vx_oai_set_error(e, 400, param, "Missing required parameter: '%s'.", param);
            return false;
        }
        if (!cJSON_IsString(role) || !role->valuestring[0]) {
            cJSON_Delete(out);
            return type_error(e, param, "a non-empty string", role);
        }
        vx_sbuf text = {0};
        if (!content_text(member(m, "content"), i, &text, e)) {
            vx_sbuf_free(&text);
            cJSON_Delete(out);
            return false;
        }
        cJSON *copy = cJSON_Duplicate(m, true);
        cJSON *str = text.oom ? NULL : cJSON_CreateString(text.p ? text.p : "");
        vx_sbuf_free(&text);
        if (!copy || !str) {
            cJSON_Delete(copy);
            cJSON_Delete(str);
            cJSON_Delete(out);
            goto oom;
        }
        /* A key given twice counts once, the first time, as everywhere in the
         * request (the template's JSON reader would keep the last one): the
         * template must see the role and content checked above. */
        bool seen_role = false;
        for (cJSON *f = copy->child, *next; f; f = next) {
            next = f->next;
            bool is_role = f->string && !strcmp(f->string, "role");
            if ((f->string && !strcmp(f->string, "content")) || (is_role && seen_role) ||
                json_depth(f, MAX_FIELD_DEPTH) > MAX_FIELD_DEPTH)
                cJSON_Delete(cJSON_DetachItemViaPointer(copy, f));
            else if (is_role) seen_role = true;
        }
        cJSON_AddItemToObject(copy, "content", str);
        /* a past reply's reasoning where gpt-oss's template reads it (as
         * llama-server passes it on): message.thinking */
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(copy, "reasoning_content");
        if (cJSON_IsString(rc) && !cJSON_GetObjectItemCaseSensitive(copy, "thinking") &&
            !cJSON_AddStringToObject(copy, "thinking", rc->valuestring)) {
            cJSON_Delete(copy);
            cJSON_Delete(out);
            goto oom;
        }
        if (!arguments_as_objects(copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(out);
            goto oom;
        }
        cJSON_AddItemToArray(out, copy);
        i++;
    }
    r->messages_json = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    if (!r->messages_json) goto oom;
    r->n_messages = n;
    return true;
oom:
    vx_oai_set_error(e, 500, NULL, "Out of memory while reading the messages.");
    return false;
}

/* Variables the server sets itself: chat_template_kwargs may not replace
 * them (tools come validated from 'tools'). */
static const char *const RESERVED_VARS[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};

/* chat_template_kwargs: an object that sets no reserved variable, not
 * nested beyond what messages may be. */
static bool check_kwargs(const cJSON *kw, vx_oai_error *e) {
    if (!cJSON_IsObject(kw)) return type_error(e, "chat_template_kwargs", "an object", kw);
    for (const cJSON *f = kw->child; f; f = f->next) {
        /* the template's reader would take a key's last value, the
         * request's rule is the first: neither, a 400 */
        for (const cJSON *g = kw->child; g != f; g = g->next)
            if (!strcmp(g->string, f->string)) {
                vx_oai_set_error(e, 400, "chat_template_kwargs", "'chat_template_kwargs' has the key '%.64s' twice.",
                                 f->string);
                return false;
            }
        for (size_t i = 0; i < sizeof RESERVED_VARS / sizeof RESERVED_VARS[0]; i++)
            if (!strcmp(f->string, RESERVED_VARS[i])) {
                vx_oai_set_error(e, 400, "chat_template_kwargs",
                                 "'chat_template_kwargs' cannot set '%s': the server sets it from the request.",
                                 RESERVED_VARS[i]);
                return false;
            }
        if (json_depth(f, MAX_FIELD_DEPTH) > MAX_FIELD_DEPTH) {
            vx_oai_set_error(e, 400, "chat_template_kwargs", "'chat_template_kwargs.%.64s' is nested too deeply.",
                             f->string);
            return false;
        }
    }
    return true;
}

bool vx_oai_check_kwargs(const char *json, vx_oai_error *err) {
    cJSON *kw = vx_oai_parse_json_object(json, strlen(json), err);
    if (!kw) return false;
    const bool ok = check_kwargs(kw, err);
    cJSON_Delete(kw);
    return ok;
}

/* reasoning_format: where thoughts go (reasoning.h). */
static bool parse_reasoning(const cJSON *root, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *rf = member(root, "reasoning_format");
    if (rf) {
        if (!cJSON_IsString(rf)) return type_error(e, "reasoning_format", "a string", rf);
        const char *v = rf->valuestring;
        if (!strcmp(v, "none")) {
            r->reasoning = VX_OAI_REASONING_NONE;
        } else if (!strcmp(v, "deepseek")) {
            r->reasoning = VX_OAI_REASONING_SPLIT;
        } else if (!strcmp(v, "auto")) {
            r->reasoning = VX_OAI_REASONING_DEFAULT; /* as the server decided for its template */
        } else {
            vx_oai_set_error(e, 400, "reasoning_format",
                             "Invalid value for 'reasoning_format': '%.40s'. Expected 'none', 'auto' or 'deepseek'.", v);
            return false;
        }
    }
    return true;
}

/* vLLM's add_generation_prompt / continue_final_message; a final
 * assistant message with text and no explicit add_generation_prompt is
 * continued (assistant prefill, as llama-server and ollama do). */
static bool parse_prefill(const cJSON *root, vx_oai_request *r, vx_oai_error *e) {
    const bool agp_given = member(root, "add_generation_prompt") != NULL;
    r->add_generation_prompt = true;
    if (!opt_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) ||
        !opt_bool(root, "continue_final_message", &r->continue_final, e))
        return false;
    if (r->continue_final && agp_given && r->add_generation_prompt) {
        vx_oai_set_error(e, 400, "continue_final_message",
                         "'continue_final_message' and 'add_generation_prompt' cannot both be true.");
        return false;
    }
    const cJSON *msgs = member(root, "messages");
    const cJSON *last = cJSON_IsArray(msgs) ? cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1) : NULL;
    const cJSON *role = last ? member(last, "role") : NULL, *content = last ? member(last, "content") : NULL;
    if (!agp_given && !r->continue_final && cJSON_IsString(role) && !strcmp(role->valuestring, "assistant") &&
        ((cJSON_IsString(content) && content->valuestring[0]) || cJSON_IsArray(content)) && !member(last, "tool_calls"))
        r->continue_final = true;
    if (r->continue_final) r->add_generation_prompt = false;
    return true;
}

static char *kwargs_merge(const char *base, const char *over);

/* chat_template_kwargs, kept as written; OpenAI's reasoning_effort
 * ("minimal", "low", "medium", "high"; gpt-oss's template reads it) as a
 * template variable under them (one they set wins, as in vLLM). */
static bool parse_kwargs(const cJSON *root, const char *body, size_t len, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *kw = member(root, "chat_template_kwargs"), *re = member(root, "reasoning_effort");
    if (re && cJSON_IsNull(re)) re = NULL;
    if (re) {
        static const char *const levels[] = {"minimal", "low", "medium", "high"};
        bool ok = false;
        for (size_t i = 0; cJSON_IsString(re) && i < sizeof levels / sizeof *levels; i++)
            ok |= !strcmp(re->valuestring, levels[i]);
        if (!cJSON_IsString(re)) return type_error(e, "reasoning_effort", "a string", re);
        if (!ok) {
            vx_oai_set_error(e, 400, "reasoning_effort",
                             "Invalid value for 'reasoning_effort': '%.32s'. Supported values are: 'minimal', 'low', "
                             "'medium', and 'high'.",
                             re->valuestring);
            return false;
        }
    }
    if (kw && !check_kwargs(kw, e)) return false;
    if (kw && !(r->template_kwargs = member_text(body, len, "chat_template_kwargs", kw))) goto oom;
    if (re) {
        vx_sbuf b = {0};
        vx_sbuf_addf(&b, "{\"reasoning_effort\":\"%s\"}", re->valuestring);
        char *merged = b.oom ? NULL : kwargs_merge(b.p, r->template_kwargs);
        vx_sbuf_free(&b);
        if (!merged) goto oom;
        free(r->template_kwargs);
        r->template_kwargs = merged;
    }
    return true;
oom:
    vx_oai_set_error(e, 500, NULL, "Out of memory.");
    return false;
}

/* Token ids: integers in [0, n_vocab). */
static bool parse_ids(const cJSON *arr, const char *param, int32_t n_vocab, vx_token **out, int32_t *n_out,
                      vx_oai_error *e) {
    int32_t n = cJSON_GetArraySize(arr), i = 0;
    vx_token *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) {
        vx_oai_set_error(e, 500, NULL, "Out of memory.");
        return false;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (!cJSON_IsNumber(x) || v != floor(v) || v < 0 || v >= n_vocab) {
            char p[96];
            snprintf(p, sizeof p, "%s[%d]", param, (int)i);
            free(ids);
            if (!cJSON_IsNumber(x) || v != floor(v)) return type_error(e, p, "an integer token id", x);
            vx_oai_set_error(e, 400, p, "Invalid token id %.17g in '%s': the vocabulary has %d tokens.", v, p,
                             (int)n_vocab);
            return false;
        }
        ids[i++] = (vx_token)v;
    }
    *out = ids;
    *n_out = n;
    return true;
}

bool vx_oai_parse_ids(const void *arr, const char *param, int32_t n_vocab, vx_token **out, int32_t *n_out,
                      vx_oai_error *err) {
    return parse_ids(arr, param, n_vocab, out, n_out, err);
}

bool vx_oai_opt_int(const void *obj, const char *key, double lo, double hi, int64_t *out, bool *present,
                    vx_oai_error *err) {
    return opt_int(obj, key, lo, hi, out, present, err);
}

bool vx_oai_type_error(vx_oai_error *err, const char *param, const char *want, const void *got) {
    return type_error(err, param, want, got);
}

void vx_oai_json_cstr(vx_sbuf *b, const char *s) { json_cstr(b, s); }
void vx_oai_json_str(vx_sbuf *b, const char *s, size_t n) { json_str(b, s, n); }

static bool all_numbers(const cJSON *arr) {
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) if (!cJSON_IsNumber(x)) return false;
    return true;
}

/* prompt: "text", [ids...], ["text"] or [[ids...]] (one prompt per request). */
static bool parse_prompt(const cJSON *root, int32_t n_vocab, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *p = member(root, "prompt");
    if (!p) {
        vx_oai_set_error(e, 400, "prompt", "Missing required parameter: 'prompt'.");
        return false;
    }
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 0) {
        vx_oai_set_error(e, 400, "prompt", "Invalid 'prompt': empty array.");
        return false;
    }
    if (cJSON_IsArray(p) && !all_numbers(p)) {
        if (cJSON_GetArraySize(p) > 1) {
            vx_oai_set_error(e, 400, "prompt", "Invalid 'prompt': only one prompt per request is supported.");
            return false;
        }
        const cJSON *only = cJSON_GetArrayItem(p, 0);
        if (cJSON_IsString(only)) p = only;
        else if (cJSON_IsArray(only) && all_numbers(only) && cJSON_GetArraySize(only) > 0)
            return parse_ids(only, "prompt[0]", n_vocab, &r->prompt_ids, &r->n_prompt_ids, e);
        else return type_error(e, "prompt[0]", "a string or an array of token ids", only);
    }
    if (cJSON_IsString(p)) {
        r->prompt_len = strlen(p->valuestring);
        r->prompt = strdup(p->valuestring);
        if (!r->prompt) {
            vx_oai_set_error(e, 500, NULL, "Out of memory.");
            return false;
        }
        return true;
    }
    if (cJSON_IsArray(p)) return parse_ids(p, "prompt", n_vocab, &r->prompt_ids, &r->n_prompt_ids, e);
    return type_error(e, "prompt", "a string, an array of token ids or an array of one string", p);
}

static bool add_stop(vx_oai_request *r, const char *s, const char *param, vx_oai_error *e) {
    if (!s[0]) return true; /* an empty stop string would stop at once: ignore it */
    if (r->n_stop >= VX_OAI_MAX_STOP) {
        vx_oai_set_error(e, 400, "stop", "Invalid 'stop': at most %d stop sequences are supported.", VX_OAI_MAX_STOP);
        return false;
    }
    if (strlen(s) > VX_OAI_MAX_STOP_LEN) {
        vx_oai_set_error(e, 400, param, "Invalid '%s': a stop sequence may be at most %d bytes long.", param,
                         VX_OAI_MAX_STOP_LEN);
        return false;
    }
    if (!(r->stop[r->n_stop] = strdup(s))) {
        vx_oai_set_error(e, 500, NULL, "Out of memory.");
        return false;
    }
    r->n_stop++;
    return true;
}

static bool parse_stop(const cJSON *root, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *s = member(root, "stop");
    if (!s) return true;
    if (cJSON_IsString(s)) return add_stop(r, s->valuestring, "stop", e);
    if (!cJSON_IsArray(s)) return type_error(e, "stop", "a string or an array of strings", s);
    int32_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, s) {
        char param[32];
        snprintf(param, sizeof param, "stop[%d]", (int)i++);
        if (!cJSON_IsString(x)) return type_error(e, param, "a string", x);
        if (!add_stop(r, x->valuestring, param, e)) return false;
    }
    return true;
}

/* True (with e filled) if the biases ban every token of a small
 * vocabulary: nothing could be sampled, which is the client's error. */
static bool bans_every_token(const vx_logit_bias *lb, int32_t n, int32_t n_vocab, vx_oai_error *e) {
    int32_t n_ban = 0;
    for (int32_t i = 0; i < n; i++) n_ban += lb[i].bias == -INFINITY;
    if (n_ban < n_vocab) return false;
    unsigned char *banned = calloc((size_t)n_vocab, 1);
    if (!banned) return false; /* the sampler reports it then */
    int32_t distinct = 0;
    for (int32_t i = 0; i < n; i++)
        if (lb[i].bias == -INFINITY && !banned[lb[i].token]) {
            banned[lb[i].token] = 1;
            distinct++;
        }
    free(banned);
    if (distinct < n_vocab) return false;
    vx_oai_set_error(e, 400, "logit_bias", "Invalid 'logit_bias': it bans all %d tokens of the vocabulary.", (int)n_vocab);
    return true;
}

/* logit_bias: {"token id": bias in [-100, 100]}; -100 bans the token. */
static bool parse_logit_bias(const cJSON *root, int32_t n_vocab, vx_oai_request *r, vx_oai_error *e) {
    const cJSON *lb = member(root, "logit_bias");
    if (!lb) return true;
    if (!cJSON_IsObject(lb)) return type_error(e, "logit_bias", "an object", lb);
    int32_t n = cJSON_GetArraySize(lb);
    if (n > VX_OAI_MAX_BIAS) {
        vx_oai_set_error(e, 400, "logit_bias", "Invalid 'logit_bias': at most %d entries are supported.", VX_OAI_MAX_BIAS);
        return false;
    }
    if (n == 0) return true;
    r->logit_bias = calloc((size_t)n, sizeof *r->logit_bias);
    if (!r->logit_bias) {
        vx_oai_set_error(e, 500, NULL, "Out of memory.");
        return false;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, lb) {
        const char *k = x->string ? x->string : "";
        char *end = NULL;
        long id = -1;
        if (k[0] >= '0' && k[0] <= '9' && strlen(k) <= 10) id = strtol(k, &end, 10);
        if (id < 0 || !end || *end || id >= n_vocab) {
            vx_oai_set_error(e, 400, "logit_bias",
                             "Invalid 'logit_bias': key '%.32s' is not a token id in [0, %d).", k, (int)n_vocab);
            return false;
        }
        if (!cJSON_IsNumber(x)) return type_error(e, "logit_bias", "numbers as values", x);
        double v = x->valuedouble;
        if (!isfinite(v) || v < -100 || v > 100) {
            vx_oai_set_error(e, 400, "logit_bias", "Invalid 'logit_bias' for token %ld: expected a value between -100 and 100, but got %g.",
                             id, v);
            return false;
        }
        r->logit_bias[r->n_logit_bias].token = (vx_token)id;
        r->logit_bias[r->n_logit_bias].bias = v <= -100 ? -INFINITY : (float)v;
        r->n_logit_bias++;
    }
    return !bans_every_token(r->logit_bias, r->n_logit_bias, n_vocab, e);
}

static bool parse_sampling(const cJSON *root, int32_t n_vocab, vx_oai_request *r, vx_oai_error *e) {
    vx_sampler_params *sp = &r->sampling;
    int64_t iv = 0;
    double dv = 0;
    bool present;
    if (!opt_float(root, "temperature", 0, 2, &sp->temperature, e)) return false;
    if (!opt_float(root, "top_p", 0, 1, &sp->top_p, e)) return false;
    if (!opt_float(root, "min_p", 0, 1, &sp->min_p, e)) return false;
    if (!opt_float(root, "presence_penalty", -2, 2, &sp->presence_penalty, e)) return false;
    if (!opt_float(root, "frequency_penalty", -2, 2, &sp->frequency_penalty, e)) return false;
    if (!opt_int(root, "top_k", -1, INT32_MAX, &iv, &present, e)) return false;
    if (present) sp->top_k = (int32_t)iv;
    /* repetition_penalty (vLLM, HF) and repeat_penalty (llama.cpp): > 0 */
    const char *rp_keys[2] = {"repetition_penalty", "repeat_penalty"};
    for (int k = 0; k < 2; k++) {
        if (!opt_number(root, rp_keys[k], 0, 10, &dv, &present, e)) return false;
        if (present && !((float)dv > 0.0f)) { /* 1e-300 is 0 as a float */
            vx_oai_set_error(e, 400, rp_keys[k], "Invalid value for '%s': expected a number greater than 0 and at most 10.",
                             rp_keys[k]);
            return false;
        }
        if (present) sp->repeat_penalty = (float)dv;
    }
    if (!opt_int(root, "repeat_last_n", -1, INT32_MAX, &iv, &present, e)) return false;
    if (present) sp->penalty_last_n = (int32_t)iv;
    /* seed: any 64-bit integer; -1 (and no seed) means random */
    if (!opt_int(root, "seed", -9223372036854775808.0, 18446744073709551615.0, &iv, &present, e)) return false;
    if (present) {
        /* JSON numbers arrive as doubles: exact up to 2^53. The values
         * from 2^64 - 1024 up round to 2^64, which wraps to 0 like the
         * integers beyond; only -1 (and no seed) asks for a random seed */
        double s = member(root, "seed")->valuedouble;
        sp->seed = s < 0 ? (uint64_t)(int64_t)s : s >= 0x1p64 ? 0 : (uint64_t)s;
    }
    if (!parse_logit_bias(root, n_vocab, r, e)) return false;
    sp->logit_bias = r->logit_bias;
    sp->n_logit_bias = r->n_logit_bias;
    return true;
}

bool vx_oai_parse_request(vx_oai_kind kind, const char *body, size_t len, int32_t n_vocab, int32_t n_ctx,
                          vx_oai_request *out, vx_oai_error *err) {
    memset(out, 0, sizeof *out);
    cJSON *root = vx_oai_parse_json_object(body, len, err);
    if (!root) return false;
    vx_oai_request *r = out;
    r->kind = kind;
    r->n = 1;
    r->sampling = vx_sampler_default_params();
    r->max_tokens = kind == VX_OAI_COMPLETION ? 16 : -1; /* OpenAI's defaults */
    int64_t iv = 0;
    bool present, ok = false;

    const cJSON *model = member(root, "model");
    if (model && !cJSON_IsString(model)) {
        type_error(err, "model", "a string", model);
        goto done;
    }
    if (model && !(r->model = strdup(model->valuestring))) {
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
        goto done;
    }
    if (kind == VX_OAI_CHAT ? !parse_messages(root, n_ctx, r, err) : !parse_prompt(root, n_vocab, r, err)) goto done;

    /* max_completion_tokens replaces max_tokens in the newer API; either works */
    if (!opt_int(root, "max_tokens", 0, INT32_MAX, &iv, &present, err)) goto done;
    if (present) r->max_tokens = (int32_t)iv;
    if (!opt_int(root, "max_completion_tokens", 0, INT32_MAX, &iv, &present, err)) goto done;
    if (present) r->max_tokens = (int32_t)iv;
    if (!opt_int(root, "n", 1, VX_OAI_MAX_N, &iv, &present, err)) goto done;
    if (present) r->n = (int32_t)iv;
    if (!parse_sampling(root, n_vocab, r, err)) goto done;
    if (!parse_stop(root, r, err)) goto done;
    if (!opt_bool(root, "stream", &r->stream, err)) goto done;
    const cJSON *so = member(root, "stream_options");
    if (so && !cJSON_IsObject(so)) {
        type_error(err, "stream_options", "an object", so);
        goto done;
    }
    if (so && !opt_bool(so, "include_usage", &r->include_usage, err)) {
        snprintf(err->param, sizeof err->param, "stream_options.include_usage");
        goto done;
    }
    if (!r->stream) r->include_usage = false;
    if (!opt_bool(root, "ignore_eos", &r->ignore_eos, err)) goto done;
    if (!refuse_unsupported(root, r, err)) goto done;
    if (kind == VX_OAI_CHAT && !parse_tools(root, body, len, r, err)) goto done;
    if (kind == VX_OAI_CHAT && (!parse_reasoning(root, r, err) || !parse_prefill(root, r, err) ||
                                !parse_kwargs(root, body, len, r, err)))
        goto done;
    if (kind == VX_OAI_COMPLETION) { /* a text completion cannot answer with calls */
        const char *keys[2] = {"tools", "functions"};
        const cJSON *tc = member(root, "tool_choice");
        const bool none = cJSON_IsString(tc) && !strcmp(tc->valuestring, "none");
        for (int i = 0; i < 2 && !none; i++) {
            const cJSON *x = member(root, keys[i]);
            if (x && !cJSON_IsNull(x) && (!cJSON_IsArray(x) || cJSON_GetArraySize(x) > 0)) {
                vx_oai_set_error(err, 400, keys[i], "'%s' is not supported by /v1/completions; tool calls come from "
                                                    "/v1/chat/completions.", keys[i]);
                goto done;
            }
        }
    }

    if (kind == VX_OAI_CHAT) {
        if (!opt_bool(root, "logprobs", &r->logprobs, err)) goto done;
        if (!opt_int(root, "top_logprobs", 0, VX_OAI_MAX_TOP, &iv, &present, err)) goto done;
        if (present) r->top_logprobs = (int32_t)iv;
        if (!r->logprobs) r->top_logprobs = 0;
    } else {
        /* legacy completions: logprobs is the number of alternatives */
        if (!opt_int(root, "logprobs", 0, VX_OAI_MAX_TOP, &iv, &present, err)) goto done;
        if (present) {
            r->logprobs = true;
            r->top_logprobs = (int32_t)iv;
        }
        if (!opt_bool(root, "echo", &r->echo, err)) goto done;
        /* suffix: fill in the middle (OpenAI's legacy insert mode, ollama's suffix) */
        const cJSON *sfx = member(root, "suffix");
        if (sfx && !cJSON_IsString(sfx)) {
            type_error(err, "suffix", "a string", sfx);
            goto done;
        }
        if (sfx && sfx->valuestring[0] && !(r->suffix = strdup(sfx->valuestring))) {
            vx_oai_set_error(err, 500, NULL, "Out of memory.");
            goto done;
        }
        if (r->suffix && r->echo) { /* the prompt is no longer the text before the reply */
            vx_oai_set_error(err, 400, "echo", "'echo' cannot be used with 'suffix'.");
            goto done;
        }
    }
    ok = true;
done:
    cJSON_Delete(root);
    if (!ok) vx_oai_request_free(r);
    return ok;
}

/* ------------------------------------------------------------ tokenization */

bool vx_oai_tokenize_text(const vx_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                          vx_token **out, int32_t *n_out, vx_oai_error *err) {
    *out = NULL;
    *n_out = 0;
    if (len > (size_t)INT32_MAX / 2) {
        vx_oai_set_error(err, 413, NULL, "The prompt is too long.");
        return false;
    }
    int32_t cap = (int32_t)len + 16;
    for (int attempt = 0; attempt < 2; attempt++) {
        vx_token *t = malloc((size_t)cap * sizeof *t);
        if (!t) break;
        int32_t n = vx_tokenize(v, text, (int32_t)len, t, cap, add_special, parse_special);
        if (n >= 0) {
            *out = t;
            *n_out = n;
            return true;
        }
        free(t);
        if (n == INT32_MIN) break;
        cap = -n;
    }
    vx_oai_set_error(err, 500, NULL, "Out of memory while tokenizing the prompt.");
    return false;
}

bool vx_oai_fim_prompt(const vx_vocab *v, const vx_oai_request *r, vx_token **out, int32_t *n_out, vx_oai_error *err) {
    *out = NULL;
    *n_out = 0;
    vx_token pre, suf, mid;
    if (!vx_vocab_fim(v, &pre, &suf, &mid)) {
        vx_oai_set_error(err, 400, "suffix",
                         "This model has no fill-in-the-middle tokens (such as <|fim_prefix|>, <|fim_suffix|>, "
                         "<|fim_middle|>), so 'suffix' cannot be used with it.");
        return false;
    }
    vx_token *a = NULL, *b = NULL;
    int32_t na = 0, nb = 0;
    if (r->prompt && !vx_oai_tokenize_text(v, r->prompt, r->prompt_len, false, false, &a, &na, err)) return false;
    if (!vx_oai_tokenize_text(v, r->suffix ? r->suffix : "", r->suffix ? strlen(r->suffix) : 0, false, false, &b, &nb,
                              err)) {
        free(a);
        return false;
    }
    const int32_t bos = vx_vocab_add_bos(v) ? 1 : 0;
    const vx_token *head = r->prompt ? a : r->prompt_ids;
    int32_t nh = r->prompt ? na : r->n_prompt_ids;
    if (bos && nh > 0 && head[0] == vx_vocab_bos(v)) { /* ids that start with BOS: it goes before PRE, once */
        head++;
        nh--;
    }
    vx_token *t = malloc(((size_t)bos + 3 + (size_t)nh + (size_t)nb) * sizeof *t);
    if (!t) {
        free(a);
        free(b);
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
        return false;
    }
    int32_t n = 0;
    if (bos) t[n++] = vx_vocab_bos(v);
    t[n++] = pre;
    if (nh) memcpy(t + n, head, (size_t)nh * sizeof *t);
    n += nh;
    t[n++] = suf;
    if (nb) memcpy(t + n, b, (size_t)nb * sizeof *t);
    n += nb;
    t[n++] = mid;
    free(a);
    free(b);
    *out = t;
    *n_out = n;
    return true;
}

bool vx_oai_chat_prompt(const vx_chat_template *t, const vx_vocab *v, const char *messages_json, vx_token **out,
                        int32_t *n_out, vx_oai_error *err) {
    return vx_oai_chat_prompt_ex(t, v, messages_json, NULL, NULL, out, n_out, err);
}

/* The members of a JSON object's text, without its braces and the blanks
 * around them (*n = 0: none). */
static const char *object_members(const char *obj, size_t *n) {
    const char *a = strchr(obj, '{'), *b = strrchr(obj, '}');
    if (!a || !b || b < a) {
        *n = 0;
        return obj;
    }
    a++;
    while (a < b && strchr(" \t\r\n", *a)) a++;
    while (b > a && strchr(" \t\r\n", b[-1])) b--;
    *n = (size_t)(b - a);
    return a;
}

/* One object of the members of base's and then over's (either NULL),
 * malloc'd: the template's JSON reader keeps a key's last value. */
static char *kwargs_merge(const char *base, const char *over) {
    size_t bn = 0, on = 0;
    const char *bm = base ? object_members(base, &bn) : NULL, *om = over ? object_members(over, &on) : NULL;
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "{");
    vx_sbuf_add(&b, bm, bn);
    if (bn && on) vx_sbuf_adds(&b, ",");
    vx_sbuf_add(&b, om, on);
    vx_sbuf_adds(&b, "}");
    return vx_sbuf_take(&b);
}

/* The rendering: tools (NULL: None) and the members of kwargs_json (NULL:
 * none) as extra template variables. */
static bool render(const vx_chat_template *t, const vx_vocab *v, const char *messages_json, const char *tools_json,
                   const char *kwargs_json, bool add_generation_prompt, char **text, vx_oai_error *err) {
    *text = NULL;
    vx_token bos = vx_vocab_bos(v), eos = vx_vocab_eos(v);
    const char *bos_s = bos >= 0 ? vx_vocab_text(v, bos) : NULL;
    const char *eos_s = eos >= 0 ? vx_vocab_text(v, eos) : NULL;
    vx_chat_render_params p = vx_chat_render_default_params();
    p.add_generation_prompt = add_generation_prompt;
    p.bos_token = bos_s ? bos_s : "";
    p.eos_token = eos_s ? eos_s : "";
    p.messages_json = messages_json;
    /* one object of extra variables: the kwargs' members, then tools */
    vx_sbuf tools = {0};
    if (tools_json) vx_sbuf_adds(&tools, "{\"tools\":"), vx_sbuf_adds(&tools, tools_json), vx_sbuf_adds(&tools, "}");
    char *extra = tools.oom ? NULL : kwargs_merge(kwargs_json, tools.p);
    vx_sbuf_free(&tools);
    if (!extra) {
        vx_oai_set_error(err, 500, NULL, "Out of memory while rendering the chat template.");
        return false;
    }
    p.extra_vars_json = extra;
    char msg[VX_ERRMSG_MAX];
    vx_status st = vx_chat_template_render_ex(t, NULL, 0, &p, text, msg, sizeof msg);
    free(extra);
    if (st == VX_OK) return true;
    if (st == VX_ENOMEM) vx_oai_set_error(err, 500, NULL, "Out of memory while rendering the chat template.");
    else vx_oai_set_error(err, 400, "messages", "The chat template cannot render these messages: %s", msg);
    return false;
}

/* Continuing the final message: the conversation rendered with a random
 * marker as that message's content, the text cut where the marker is and
 * the content put there as sent, so that a template that drops or moves
 * part of an assistant message (the thoughts of DeepSeek R1's and Qwen3's)
 * still continues the client's text. *off: where that content starts. */
static bool render_continued(const vx_chat_template *t, const vx_vocab *v, const vx_oai_request *r, const char *kw,
                             char **text, size_t *off, vx_oai_error *err) {
    *text = NULL;
    char mark[40] = "vxcontinue";
    vx_random_alnum(mark + 10, 24);
    cJSON *msgs = cJSON_Parse(r->messages_json);
    cJSON *last = msgs ? cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1) : NULL;
    const cJSON *content = last ? cJSON_GetObjectItemCaseSensitive(last, "content") : NULL;
    char *sent = cJSON_IsString(content) ? strdup(content->valuestring) : NULL, *marked = NULL, *out = NULL;
    bool ok = false;
    if (sent && cJSON_ReplaceItemInObjectCaseSensitive(last, "content", cJSON_CreateString(mark)) &&
        (marked = cJSON_PrintUnformatted(msgs))) {
        if (render(t, v, marked, r->tools_json, kw, false, &out, err)) {
            char *at = strstr(out, mark);
            if (!at) {
                vx_oai_set_error(err, 400, "messages", "The chat template does not write the final message's content, "
                                                       "so it cannot be continued (continue_final_message).");
            } else {
                vx_sbuf b = {0};
                vx_sbuf_add(&b, out, (size_t)(at - out));
                vx_sbuf_adds(&b, sent);
                *off = (size_t)(at - out);
                if (!(*text = vx_sbuf_take(&b))) vx_oai_set_error(err, 500, NULL, "Out of memory.");
                ok = *text != NULL;
            }
        }
    } else {
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
    }
    free(out);
    free(marked);
    free(sent);
    cJSON_Delete(msgs);
    return ok;
}

bool vx_oai_request_render(const vx_chat_template *t, const vx_vocab *v, const vx_oai_request *r,
                           const char *server_kwargs, char **text, size_t *cont_off, vx_oai_error *err) {
    *text = NULL;
    char *kw = kwargs_merge(server_kwargs, r->template_kwargs);
    if (!kw) {
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
        return false;
    }
    bool ok = r->continue_final ? render_continued(t, v, r, kw, text, cont_off, err)
                                : render(t, v, r->messages_json, r->tools_json, kw, r->add_generation_prompt, text, err);
    free(kw);
    if (ok && !r->continue_final) *cont_off = strlen(*text);
    return ok;
}

bool vx_oai_chat_tokenize(const vx_vocab *v, const char *text, const char *suffix, vx_token **out, int32_t *n_out,
                          vx_oai_error *err) {
    *out = NULL;
    *n_out = 0;
    vx_sbuf full = {0};
    if (suffix && suffix[0]) {
        vx_sbuf_adds(&full, text);
        vx_sbuf_adds(&full, suffix);
        if (full.oom) {
            vx_sbuf_free(&full);
            vx_oai_set_error(err, 500, NULL, "Out of memory while rendering the chat template.");
            return false;
        }
        text = full.p;
    }
    /* The template writes the BOS text itself when it wants it and the
     * tokenizer adds the BOS token too: drop the text so BOS is not doubled. */
    vx_token bos = vx_vocab_bos(v);
    const char *bos_s = bos >= 0 ? vx_vocab_text(v, bos) : NULL;
    size_t bl = bos_s ? strlen(bos_s) : 0;
    if (bl && vx_vocab_add_bos(v) && strncmp(text, bos_s, bl) == 0) text += bl;
    const bool ok = vx_oai_tokenize_text(v, text, strlen(text), true, true, out, n_out, err);
    vx_sbuf_free(&full);
    return ok;
}

bool vx_oai_chat_prompt_ex(const vx_chat_template *t, const vx_vocab *v, const char *messages_json,
                           const char *tools_json, const char *suffix, vx_token **out, int32_t *n_out,
                           vx_oai_error *err) {
    *out = NULL;
    *n_out = 0;
    char *text;
    if (!render(t, v, messages_json, tools_json, NULL, true, &text, err)) return false;
    bool ok = vx_oai_chat_tokenize(v, text, suffix, out, n_out, err);
    free(text);
    return ok;
}

char *vx_oai_apply_template_json(const vx_chat_template *t, const vx_vocab *v, const char *server_kwargs,
                                 int32_t n_ctx, const char *body, size_t len, vx_oai_error *err) {
    vx_oai_request r;
    if (!vx_oai_parse_request(VX_OAI_CHAT, body, len, vx_vocab_n_tokens(v), n_ctx, &r, err)) return NULL;
    char *text = NULL, *res = NULL;
    size_t cont;
    if (vx_oai_request_render(t, v, &r, server_kwargs, &text, &cont, err)) {
        vx_sbuf b = {0};
        vx_sbuf_adds(&b, "{\"prompt\":");
        json_cstr(&b, text);
        vx_sbuf_adds(&b, "}");
        if (!(res = vx_sbuf_take(&b))) vx_oai_set_error(err, 500, NULL, "Out of memory.");
    }
    free(text);
    vx_oai_request_free(&r);
    return res;
}

/* --------------------------------------------------------------- responses */

void vx_oai_make_id(vx_oai_kind kind, char *buf, size_t size) {
    char tail[25];
    vx_random_alnum(tail, 24);
    snprintf(buf, size, "%s-%s", kind == VX_OAI_CHAT ? "chatcmpl" : "cmpl", tail);
}

/* A token's text for logprobs: control tokens shown by name. */
static int32_t token_piece(const vx_vocab *v, vx_token t, char *buf, int32_t size) {
    int32_t n = vx_token_to_piece(v, t, buf, size, true);
    return n < 0 ? 0 : n; /* longer than the buffer: shown as empty */
}

static void json_bytes(vx_sbuf *b, const char *s, int32_t n) {
    vx_sbuf_add(b, "[", 1);
    for (int32_t i = 0; i < n; i++) vx_sbuf_addf(b, i ? ",%u" : "%u", (unsigned)(unsigned char)s[i]);
    vx_sbuf_add(b, "]", 1);
}

/* Chat logprobs: {"content":[{token, logprob, bytes, top_logprobs}], "refusal":null} */
static void chat_logprobs(vx_sbuf *b, const vx_vocab *v, const vx_oai_logprob *lp, int32_t n) {
    char piece[512];
    vx_sbuf_adds(b, "{\"content\":[");
    for (int32_t i = 0; i < n; i++) {
        int32_t pl = token_piece(v, lp[i].token, piece, sizeof piece);
        vx_sbuf_adds(b, i ? ",{\"token\":" : "{\"token\":");
        json_str(b, piece, (size_t)pl);
        vx_sbuf_adds(b, ",\"logprob\":");
        json_logprob(b, lp[i].logprob);
        vx_sbuf_adds(b, ",\"bytes\":");
        json_bytes(b, piece, pl);
        vx_sbuf_adds(b, ",\"top_logprobs\":[");
        for (int32_t j = 0; j < lp[i].n_top; j++) {
            int32_t tl = token_piece(v, lp[i].top_id[j], piece, sizeof piece);
            vx_sbuf_adds(b, j ? ",{\"token\":" : "{\"token\":");
            json_str(b, piece, (size_t)tl);
            vx_sbuf_adds(b, ",\"logprob\":");
            json_logprob(b, lp[i].top_logprob[j]);
            vx_sbuf_adds(b, ",\"bytes\":");
            json_bytes(b, piece, tl);
            vx_sbuf_adds(b, "}");
        }
        vx_sbuf_adds(b, "]}");
    }
    vx_sbuf_adds(b, "],\"refusal\":null}");
}

/* Legacy completion logprobs: parallel arrays. */
static void completion_logprobs(vx_sbuf *b, const vx_vocab *v, const vx_oai_logprob *lp, int32_t n,
                                size_t offset) {
    char piece[512];
    vx_sbuf_adds(b, "{\"tokens\":[");
    for (int32_t i = 0; i < n; i++) {
        int32_t pl = token_piece(v, lp[i].token, piece, sizeof piece);
        if (i) vx_sbuf_add(b, ",", 1);
        json_str(b, piece, (size_t)pl);
    }
    vx_sbuf_adds(b, "],\"token_logprobs\":[");
    for (int32_t i = 0; i < n; i++) {
        if (i) vx_sbuf_add(b, ",", 1);
        json_logprob(b, lp[i].logprob);
    }
    vx_sbuf_adds(b, "],\"top_logprobs\":[");
    for (int32_t i = 0; i < n; i++) {
        if (lp[i].n_top < 0) { /* an echoed prompt's first token: nothing precedes it */
            vx_sbuf_adds(b, i ? ",null" : "null");
            continue;
        }
        vx_sbuf_adds(b, i ? ",{" : "{");
        for (int32_t j = 0; j < lp[i].n_top; j++) {
            int32_t tl = token_piece(v, lp[i].top_id[j], piece, sizeof piece);
            if (j) vx_sbuf_add(b, ",", 1);
            json_str(b, piece, (size_t)tl);
            vx_sbuf_add(b, ":", 1);
            json_logprob(b, lp[i].top_logprob[j]);
        }
        vx_sbuf_adds(b, "}");
    }
    vx_sbuf_adds(b, "],\"text_offset\":[");
    for (int32_t i = 0; i < n; i++) {
        vx_sbuf_addf(b, i ? ",%zu" : "%zu", offset);
        /* offsets advance by the bytes each token adds to the text */
        int32_t pl = vx_token_to_piece(v, lp[i].token, piece, sizeof piece, false);
        if (pl > 0) offset += (size_t)pl;
    }
    vx_sbuf_adds(b, "]}");
}

static void choice_logprobs(vx_sbuf *b, const vx_oai_meta *m, const vx_oai_choice *c) {
    vx_sbuf_adds(b, ",\"logprobs\":");
    if (!c->lp) vx_sbuf_adds(b, "null");
    else if (m->kind == VX_OAI_CHAT) chat_logprobs(b, m->vocab, c->lp, c->n_lp);
    else completion_logprobs(b, m->vocab, c->lp, c->n_lp, c->text_offset);
}

static void head(vx_sbuf *b, const vx_oai_meta *m, const char *object) {
    vx_sbuf_adds(b, "{\"id\":");
    json_cstr(b, m->id);
    vx_sbuf_addf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, (long long)m->created);
    json_cstr(b, m->model ? m->model : "");
    vx_sbuf_adds(b, ",\"system_fingerprint\":\"vx-" VX_VERSION "\"");
}

static void usage_object(vx_sbuf *b, const vx_oai_usage *u) {
    vx_sbuf_addf(b,
                 "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%lld,"
                 "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
                 (int)u->prompt_tokens, (int)u->completion_tokens,
                 (long long)u->prompt_tokens + u->completion_tokens, (int)u->cached_tokens);
}

/* [{"id", "type": "function", "function": {"name", "arguments"}}], with
 * each call's "index" first in streaming deltas */
static void tool_calls_json(vx_sbuf *b, const vx_tool_call *calls, int32_t n, bool indexed) {
    vx_sbuf_add(b, "[", 1);
    for (int32_t i = 0; i < n; i++) {
        vx_sbuf_adds(b, i ? ",{" : "{");
        if (indexed) vx_sbuf_addf(b, "\"index\":%d,", (int)i);
        vx_sbuf_adds(b, "\"id\":");
        json_cstr(b, calls[i].id);
        vx_sbuf_adds(b, ",\"type\":\"function\",\"function\":{\"name\":");
        json_cstr(b, calls[i].name);
        vx_sbuf_adds(b, ",\"arguments\":");
        json_cstr(b, calls[i].arguments);
        vx_sbuf_adds(b, "}}");
    }
    vx_sbuf_add(b, "]", 1);
}

char *vx_oai_response_json(const vx_oai_meta *m, const vx_oai_choice *choices, int32_t n, const vx_oai_usage *u) {
    vx_sbuf b = {0};
    bool chat = m->kind == VX_OAI_CHAT;
    head(&b, m, chat ? "chat.completion" : "text_completion");
    vx_sbuf_adds(&b, ",\"choices\":[");
    for (int32_t i = 0; i < n; i++) {
        const vx_oai_choice *c = &choices[i];
        vx_sbuf_addf(&b, "%s{\"index\":%d,", i ? "," : "", (int)c->index);
        if (chat) {
            vx_sbuf_adds(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
            if (c->n_calls > 0 && c->text_len == 0) vx_sbuf_adds(&b, "null"); /* as OpenAI */
            else json_str(&b, c->text ? c->text : "", c->text_len);
            if (c->reasoning_len > 0) {
                vx_sbuf_adds(&b, ",\"reasoning_content\":");
                json_str(&b, c->reasoning, c->reasoning_len);
            }
            if (c->n_calls > 0) {
                vx_sbuf_adds(&b, ",\"tool_calls\":");
                tool_calls_json(&b, c->calls, c->n_calls, false);
            }
            vx_sbuf_adds(&b, ",\"refusal\":null}");
        } else {
            vx_sbuf_adds(&b, "\"text\":");
            json_str(&b, c->text ? c->text : "", c->text_len);
        }
        choice_logprobs(&b, m, c);
        vx_sbuf_adds(&b, ",\"finish_reason\":");
        json_cstr(&b, c->finish_reason);
        vx_sbuf_adds(&b, "}");
    }
    vx_sbuf_adds(&b, "],\"usage\":");
    usage_object(&b, u);
    vx_sbuf_adds(&b, "}");
    return vx_sbuf_take(&b);
}

void vx_oai_chunk(vx_sbuf *out, const vx_oai_meta *m, const vx_oai_choice *c, bool role_only, bool usage_null) {
    bool chat = m->kind == VX_OAI_CHAT;
    vx_sbuf_adds(out, "data: ");
    head(out, m, chat ? "chat.completion.chunk" : "text_completion");
    vx_sbuf_addf(out, ",\"choices\":[{\"index\":%d,", (int)c->index);
    if (chat) {
        vx_sbuf_adds(out, "\"delta\":{");
        if (role_only) {
            vx_sbuf_adds(out, "\"role\":\"assistant\",\"content\":\"\"");
        } else {
            if (c->reasoning_len > 0) {
                vx_sbuf_adds(out, "\"reasoning_content\":");
                json_str(out, c->reasoning, c->reasoning_len);
            }
            if (c->text_len > 0 || (!c->finish_reason && !c->reasoning_len)) {
                vx_sbuf_adds(out, c->reasoning_len > 0 ? ",\"content\":" : "\"content\":");
                json_str(out, c->text ? c->text : "", c->text_len);
            }
        }
        vx_sbuf_adds(out, "}");
    } else {
        vx_sbuf_adds(out, "\"text\":");
        json_str(out, c->text ? c->text : "", c->text_len);
    }
    choice_logprobs(out, m, c);
    vx_sbuf_adds(out, ",\"finish_reason\":");
    json_cstr(out, role_only ? NULL : c->finish_reason);
    vx_sbuf_adds(out, "}]");
    if (usage_null) vx_sbuf_adds(out, ",\"usage\":null");
    vx_sbuf_adds(out, "}\n\n");
}

void vx_oai_tool_calls_chunk(vx_sbuf *out, const vx_oai_meta *m, int32_t index, const vx_tool_call *calls,
                             int32_t n, bool usage_null) {
    vx_sbuf_adds(out, "data: ");
    head(out, m, "chat.completion.chunk");
    vx_sbuf_addf(out, ",\"choices\":[{\"index\":%d,\"delta\":{\"tool_calls\":", (int)index);
    tool_calls_json(out, calls, n, true);
    vx_sbuf_adds(out, "},\"logprobs\":null,\"finish_reason\":null}]");
    if (usage_null) vx_sbuf_adds(out, ",\"usage\":null");
    vx_sbuf_adds(out, "}\n\n");
}

void vx_oai_usage_chunk(vx_sbuf *out, const vx_oai_meta *m, const vx_oai_usage *u) {
    vx_sbuf_adds(out, "data: ");
    head(out, m, m->kind == VX_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    vx_sbuf_adds(out, ",\"choices\":[],\"usage\":");
    usage_object(out, u);
    vx_sbuf_adds(out, "}\n\n");
}

/* ------------------------------------------------- models, (de)tokenize */

char *vx_oai_models_json(const char *name, int64_t created, int32_t n_ctx, int32_t n_vocab) {
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    json_cstr(&b, name);
    vx_sbuf_addf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"vortex\",\"meta\":{\"n_ctx\":%d,\"n_vocab\":%d}}]}",
                 (long long)created, (int)n_ctx, (int)n_vocab);
    return vx_sbuf_take(&b);
}

char *vx_oai_tokenize_json(const vx_vocab *v, const char *body, size_t len, vx_oai_error *err) {
    cJSON *root = vx_oai_parse_json_object(body, len, err);
    if (!root) return NULL;
    char *res = NULL;
    bool add_special = false, with_pieces = false;
    const cJSON *content = member(root, "content");
    if (!content) {
        vx_oai_set_error(err, 400, "content", "Missing required parameter: 'content'.");
        goto done;
    }
    if (!cJSON_IsString(content)) {
        type_error(err, "content", "a string", content);
        goto done;
    }
    if (!opt_bool(root, "add_special", &add_special, err) || !opt_bool(root, "with_pieces", &with_pieces, err))
        goto done;
    vx_token *toks;
    int32_t n;
    if (!vx_oai_tokenize_text(v, content->valuestring, strlen(content->valuestring), add_special, true, &toks, &n, err))
        goto done;
    vx_sbuf b = {0};
    char piece[512];
    vx_sbuf_adds(&b, "{\"tokens\":[");
    for (int32_t i = 0; i < n && !b.oom; i++) {
        if (i) vx_sbuf_add(&b, ",", 1);
        if (!with_pieces) {
            vx_sbuf_addf(&b, "%d", (int)toks[i]);
            continue;
        }
        vx_sbuf_addf(&b, "{\"id\":%d,\"piece\":", (int)toks[i]);
        int32_t pl = token_piece(v, toks[i], piece, sizeof piece);
        /* a piece that is not valid UTF-8 on its own is shown as its bytes */
        if (vx_utf8_valid(piece, (size_t)pl, NULL)) json_str(&b, piece, (size_t)pl);
        else json_bytes(&b, piece, pl);
        vx_sbuf_add(&b, "}", 1);
    }
    vx_sbuf_adds(&b, "]}");
    free(toks);
    res = vx_sbuf_take(&b);
    if (!res) vx_oai_set_error(err, 500, NULL, "Out of memory.");
done:
    cJSON_Delete(root);
    return res;
}

char *vx_oai_detokenize_json(const vx_vocab *v, const char *body, size_t len, vx_oai_error *err) {
    cJSON *root = vx_oai_parse_json_object(body, len, err);
    if (!root) return NULL;
    char *res = NULL, *text = NULL;
    vx_token *ids = NULL;
    int32_t n = 0;
    const cJSON *tokens = member(root, "tokens");
    if (!tokens) {
        vx_oai_set_error(err, 400, "tokens", "Missing required parameter: 'tokens'.");
        goto done;
    }
    if (!cJSON_IsArray(tokens)) {
        type_error(err, "tokens", "an array of token ids", tokens);
        goto done;
    }
    if (!parse_ids(tokens, "tokens", vx_vocab_n_tokens(v), &ids, &n, err)) goto done;
    /* 16 bytes a token to start with; huge id lists (a big --max-body)
     * must not overflow the int32 sizes of vx_detokenize */
    if (n > (INT32_MAX - 16) / 16) {
        vx_oai_set_error(err, 413, "tokens", "Invalid 'tokens': at most %d token ids per request.",
                         (int)((INT32_MAX - 16) / 16));
        goto done;
    }
    int32_t cap = n * 16 + 16, tl = -1;
    for (int attempt = 0; attempt < 2 && tl < 0; attempt++) {
        free(text);
        text = malloc((size_t)cap);
        if (!text) break;
        tl = vx_detokenize(v, ids, n, text, cap, false, false);
        if (tl < 0) cap = -tl;
    }
    if (!text || tl < 0) {
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
        goto done;
    }
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "{\"content\":");
    json_str(&b, text, (size_t)tl); /* partial characters become U+FFFD */
    vx_sbuf_adds(&b, "}");
    res = vx_sbuf_take(&b);
    if (!res) vx_oai_set_error(err, 500, NULL, "Out of memory.");
done:
    free(ids);
    free(text);
    cJSON_Delete(root);
    return res;
}
