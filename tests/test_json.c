/*
 * test_json.c - constrained decoding to JSON (json_check.h, the sampler's
 * filter, the engine's json_object requests).
 *
 * The checker is judged against an independent parser, the server's
 * strict request-body parser (vx_oai_parse_json_object, a different code
 * path over cJSON): on random valid documents and on thousands of one-byte
 * mutations of them, "every byte accepted and the document complete" must
 * equal "the parser takes it". Then the engine: sampled json_object
 * requests on a real model must produce text that same parser accepts,
 * and stop as soon as the object closes.
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "gguf.h"
#include "json_check.h"
#include "json_schema.h"
#include "server_openai.h"
#include "testutil.h"
#include "vocab.h"

/* ------------------------------------------------------------- checker */

/* Whole text through a fresh checker: every byte accepted and complete. */
static bool check_doc(const char *s, size_t n, bool root_object) {
    vx_jcheck j;
    vx_jcheck_init(&j, root_object ? VX_JCHECK_OBJECT : 0);
    return vx_jcheck_feed(&j, s, (int32_t)n) && vx_jcheck_done(&j);
}

static bool parser_takes(const char *s, size_t n) {
    vx_oai_error e;
    void *o = vx_oai_parse_json_object(s, n, &e);
    cJSON_Delete(o);
    return o != NULL;
}

static void test_cases(void) {
    static const char *const ok_any[] = {
        "0", "-0", "12", "-1.5e+10", "0.25E-3", "1E5", "\"\"", "\"a\\\"b\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"",
        "true", "false", "null", "[]", "[ 1 , [2,[3]] ,{}]", " {\"a\" : {\"b\" : [true, null]}} ",
        "\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x7f\"", "{\"\":\"\"}", "[\"\\u0000\"]",
        "\"\\udbff\\udfff\\ud800\\udc00\\ud7ff\\ue000\"", "{\"\\ud83d\\ude00\":1}",
    };
    for (size_t i = 0; i < sizeof ok_any / sizeof *ok_any; i++)
        CHECKF(check_doc(ok_any[i], strlen(ok_any[i]), false), "valid: %s", ok_any[i]);
    static const char *const bad_any[] = {
        "01", "1.", ".5", "-", "+1", "1e", "1e+", "--1", "0x10", "1.2.3", "tru", "truex", "nul", "True",
        "[1,]", "[,1]", "{\"a\":1,}", "{\"a\"}", "{\"a\" 1}", "{a:1}", "{'a':1}", "{\"a\":1 \"b\":2}", "[1 2]",
        "\"abc", "\"\\x\"", "\"\\u12g4\"", "\"\x01\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
        "\"\xe2\x82\"", "\"\x80\"", "\"\xf5\x80\x80\x80\"", "[1]]", "{}}", "[] []", "", "   ", "/*c*/1", "[1]x",
        /* lone surrogates (found by fuzz_schema: cJSON refuses them) */
        "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83dx\"", "\"\\ud83d\\n\"", "\"\\ud83d\\ud83d\"", "\"\\ud83d\\u0041\"",
        "\"a\\uDC00\"", "{\"\\ud800\":1}",
        "{\"a\":1}\x00",
    };
    for (size_t i = 0; i < sizeof bad_any / sizeof *bad_any; i++)
        CHECKF(!check_doc(bad_any[i], strlen(bad_any[i]) + (i + 1 == sizeof bad_any / sizeof *bad_any), false),
               "invalid: %s", bad_any[i]);
    /* json_object mode: an object at the top, nothing else */
    CHECK(check_doc("{\"k\":[1,\"x\"]}", 13, true));
    CHECK(!check_doc("[1]", 3, true) && !check_doc("\"s\"", 3, true) && !check_doc("1", 1, true));
    /* the first byte is the object's with VX_JCHECK_NO_LEAD_WS; inside, whitespace as usual */
    {
        vx_jcheck k;
        vx_jcheck_init(&k, VX_JCHECK_OBJECT | VX_JCHECK_NO_LEAD_WS);
        CHECK(!vx_jcheck_feed(&k, " ", 1));
        vx_jcheck_init(&k, VX_JCHECK_OBJECT | VX_JCHECK_NO_LEAD_WS);
        CHECK(vx_jcheck_feed(&k, "{ \"a\" :\n[ ] }", 13) && vx_jcheck_done(&k));
        CHECK(check_doc(" {}", 3, true));
    }
    /* a number is complete as it stands, but may go on */
    vx_jcheck j;
    vx_jcheck_init(&j, 0);
    CHECK(vx_jcheck_feed(&j, "12", 2) && vx_jcheck_done(&j) && vx_jcheck_feed(&j, "3.5", 3) && vx_jcheck_done(&j));
    CHECK(vx_jcheck_feed(&j, "e", 1) && !vx_jcheck_done(&j));
    /* nothing but whitespace after the document */
    vx_jcheck_init(&j, VX_JCHECK_OBJECT);
    CHECK(vx_jcheck_feed(&j, "{}", 2) && vx_jcheck_done(&j) && vx_jcheck_feed(&j, " \n", 2) && vx_jcheck_done(&j));
    CHECK(!vx_jcheck_feed(&j, "{", 1));
    /* bounds: VX_JCHECK_MAX_WS whitespace bytes in a row, VX_JCHECK_MAX_DEPTH levels */
    char buf[256];
    memset(buf, ' ', sizeof buf);
    buf[0] = '{';
    vx_jcheck_init(&j, VX_JCHECK_OBJECT);
    CHECK(vx_jcheck_feed(&j, buf, 1 + VX_JCHECK_MAX_WS) && !vx_jcheck_feed(&j, " ", 1));
    vx_jcheck_init(&j, VX_JCHECK_OBJECT);
    CHECK(vx_jcheck_feed(&j, buf, 1 + VX_JCHECK_MAX_WS) && vx_jcheck_feed(&j, "\"a\"", 3) &&
          vx_jcheck_feed(&j, buf + 1, VX_JCHECK_MAX_WS) && vx_jcheck_feed(&j, ":1}", 3) && vx_jcheck_done(&j));
    memset(buf, '[', sizeof buf);
    vx_jcheck_init(&j, 0);
    CHECK(vx_jcheck_feed(&j, buf, VX_JCHECK_MAX_DEPTH) && !vx_jcheck_feed(&j, "[", 1));
    vx_jcheck_init(&j, 0);
    memset(buf + VX_JCHECK_MAX_DEPTH, ']', VX_JCHECK_MAX_DEPTH);
    CHECK(vx_jcheck_feed(&j, buf, 2 * VX_JCHECK_MAX_DEPTH) && vx_jcheck_done(&j));
}

/* A random valid JSON text (bytes appended to b, at most cap). */
typedef struct gen {
    char *b;
    size_t n, cap;
    uint64_t rng;
} gen;

static uint32_t rnd(gen *g, uint32_t n) {
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return (uint32_t)(g->rng >> 11) % n;
}

static void put(gen *g, const char *s, size_t n) {
    if (g->n + n < g->cap) memcpy(g->b + g->n, s, n), g->n += n;
}

static void puts_(gen *g, const char *s) { put(g, s, strlen(s)); }

static void ws(gen *g) {
    static const char w[] = " \t\n\r";
    for (uint32_t k = rnd(g, 4) == 0 ? rnd(g, 4) : 0; k > 0; k--) put(g, &w[rnd(g, 4)], 1);
}

static void gen_string(gen *g) {
    static const char *const pieces[] = {"a", "Z", "7", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\u00e9",
                                         "\\u4E2d", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbd",
                                         "{", "]", ":", ",", "'"};
    put(g, "\"", 1);
    for (uint32_t k = rnd(g, 6); k > 0; k--) puts_(g, pieces[rnd(g, sizeof pieces / sizeof *pieces)]);
    put(g, "\"", 1);
}

static void gen_value(gen *g, int depth) {
    static const char *const nums[] = {"0", "-0", "7", "-12", "3.25", "-0.5", "1e9", "2E-3", "6.02e+23", "10",
                                       "-9.75E+2"};
    static const char *const lits[] = {"true", "false", "null"};
    const uint32_t kind = depth >= 5 ? 2 + rnd(g, 3) : rnd(g, 5);
    switch (kind) {
    case 0: /* object */
    case 1: { /* array */
        const bool obj = kind == 0;
        put(g, obj ? "{" : "[", 1);
        const uint32_t n = rnd(g, 4);
        for (uint32_t i = 0; i < n; i++) {
            ws(g);
            if (i) put(g, ",", 1), ws(g);
            if (obj) gen_string(g), ws(g), put(g, ":", 1), ws(g);
            gen_value(g, depth + 1);
            ws(g);
        }
        if (!n) ws(g);
        put(g, obj ? "}" : "]", 1);
        break;
    }
    case 2: gen_string(g); break;
    case 3: puts_(g, nums[rnd(g, sizeof nums / sizeof *nums)]); break;
    default: puts_(g, lits[rnd(g, 3)]); break;
    }
}

/* Where the server's parser knowingly departs from JSON's grammar: it
 * refuses NUL characters in keys and unpaired UTF-16 surrogates in \u
 * escapes (cJSON), and takes raw control bytes in strings (as cJSON
 * does). Texts where a mutation made one of these are left out of the
 * comparison. */
static bool outside_grammar_gap(const char *s, size_t n) {
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        if (!in) {
            in = s[i] == '"';
            continue;
        }
        if ((unsigned char)s[i] < 0x20) return true;
        if (s[i] == '"') in = false;
        if (s[i] != '\\' || i + 1 >= n) continue;
        i++;
        if (s[i] == 'u' && i + 1 < n && (s[i + 1] == 'd' || s[i + 1] == 'D')) return true;
        if (s[i] == 'u' && i + 4 < n && !memcmp(s + i + 1, "0000", 4)) return true;
    }
    return false;
}

static void test_against_parser(void) {
    static const uint8_t noise[] = {'{', '}', '[', ']', ':', ',', '"', '\\', ' ', '\n', '0', '1', '9', '-', '+',
                                    '.', 'e', 'E', 't', 'f', 'n', 'u', 'a', 'x', 0x00, 0x1f, 0x7f, 0x80, 0xbf,
                                    0xc0, 0xc3, 0xe0, 0xed, 0xf0, 0xf4, 0xf5, 0xff};
    char doc[2048], mut[2050];
    int docs = 0, mutants = 0, agree = 0, taken = 0, refused = 0, prefix_ok = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        gen g = {doc, 0, sizeof doc, 0x9e3779b97f4a7c15ull * seed};
        ws(&g);
        put(&g, "{", 1);
        const uint32_t n = 1 + rnd(&g, 4);
        for (uint32_t i = 0; i < n; i++) {
            if (i) put(&g, ",", 1), ws(&g);
            gen_string(&g), ws(&g), put(&g, ":", 1), ws(&g);
            gen_value(&g, 1);
            ws(&g);
        }
        put(&g, "}", 1);
        ws(&g);
        if (g.n + 1 >= g.cap) continue; /* truncated: not a document */
        docs++;
        CHECKF(parser_takes(doc, g.n), "generated text is not JSON: %.*s", (int)g.n, doc);
        CHECKF(check_doc(doc, g.n, true), "a valid document refused: %.*s", (int)g.n, doc);
        /* every proper prefix is a live prefix, complete only from the
         * closing brace on; and fed in random pieces, the same */
        vx_jcheck j;
        vx_jcheck_init(&j, VX_JCHECK_OBJECT);
        size_t close = g.n;
        while (close > 0 && doc[close - 1] != '}') close--;
        bool live = true;
        for (size_t i = 0; i < g.n && live; i++) {
            live = vx_jcheck_feed(&j, doc + i, 1) && vx_jcheck_done(&j) == (i + 1 >= close);
        }
        prefix_ok += live;
        vx_jcheck_init(&j, VX_JCHECK_OBJECT);
        bool pieces = true;
        for (size_t i = 0; i < g.n && pieces;) {
            const size_t r = 1 + rnd(&g, 7), k = VX_MIN(g.n - i, r);
            pieces = vx_jcheck_feed(&j, doc + i, (int32_t)k);
            i += k;
        }
        CHECKF(pieces && vx_jcheck_done(&j), "fed in pieces: %.*s", (int)g.n, doc);
        /* one-byte mutations: deleted, replaced, inserted */
        for (int m = 0; m < 40; m++) {
            const size_t at = rnd(&g, (uint32_t)g.n), op = rnd(&g, 3);
            const uint8_t c = noise[rnd(&g, sizeof noise)];
            size_t len = 0;
            memcpy(mut, doc, at);
            len = at;
            if (op == 1) mut[len++] = (char)c;
            if (op == 2) mut[len++] = (char)c, mut[len++] = doc[at];
            memcpy(mut + len, doc + at + 1, g.n - at - 1);
            len += g.n - at - 1;
            if (outside_grammar_gap(mut, len)) continue;
            mutants++;
            const bool p = parser_takes(mut, len), q = check_doc(mut, len, true);
            agree += p == q;
            taken += p;
            refused += !p;
            if (p != q) fprintf(stderr, "disagree (parser %d, checker %d): %.*s\n", p, q, (int)len, mut);
        }
    }
    CHECKF(docs >= 350 && prefix_ok == docs, "prefixes: %d of %d documents", prefix_ok, docs);
    CHECKF(mutants > 10000 && agree == mutants, "checker and parser agree on %d of %d mutants", agree, mutants);
    /* the mutants exercise both sides */
    CHECKF(taken > 1000 && refused > 5000, "mutants taken %d, refused %d", taken, refused);
    printf("json: %d documents, %d mutants (%d valid), checker = parser on all\n", docs, mutants, taken);
}

/* The filter's shortcuts (plain text inside strings, the first-byte
 * table) give the answers of simulating every token, in the states along
 * generated documents; fed through the filter, they end complete. */
static void test_filter(const vx_vocab *v, const char *name) {
    vx_jvocab *jv = vx_jvocab_new(v);
    CHECK(jv != NULL);
    if (!jv) return;
    const int32_t n = vx_vocab_n_tokens(v);
    char doc[512];
    long states = 0, same = 0, allowed = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        gen g = {doc, 0, sizeof doc, 0x51ed2701ull * seed};
        put(&g, "{\"k\":", 5);
        gen_value(&g, 0);
        put(&g, "}", 1);
        vx_jfilter f;
        vx_jfilter_init(&f, jv, NULL);
        for (size_t i = 0; i <= g.n; i++) {
            if (i % 2 == 0 || i == g.n) {
                states++;
                bool all = true;
                for (vx_token t = 0; t < n; t++) {
                    const bool a = vx_jfilter_allows(&f, t);
                    all &= a == vx_jcheck_allows(&f.jc, jv, t);
                    allowed += a;
                }
                same += all;
            }
            if (i < g.n) {
                CHECK(vx_jcheck_feed(&f.jc, doc + i, 1));
                f.first_known = false;
            }
        }
        CHECK(vx_jcheck_done(&f.jc));
    }
    CHECKF(same == states && allowed > 0, "%s: shortcuts agree in %ld of %ld states", name, same, states);
    printf("json: %s: filter = simulation over %d tokens in %ld states (%.1f%% allowed)\n", name, n, states,
           100.0 * (double)allowed / ((double)states * n));
    vx_jvocab_free(jv);
}

/* -------------------------------------------------------------- schemas */

/* An independent validator of the subset's meaning (json_schema.h), over
 * cJSON: properties in the schema's order, only listed ones, required ones
 * present; enum values compared as cJSON prints them. */
static const cJSON *S_ROOT;

static bool valid(const cJSON *v, const cJSON *sch);

static bool valid_type(const cJSON *v, const cJSON *sch, const char *t) {
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble;
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "array")) {
        if (!cJSON_IsArray(v)) return false;
        const cJSON *mn = cJSON_GetObjectItem(sch, "minItems"), *mx = cJSON_GetObjectItem(sch, "maxItems"),
                    *items = cJSON_GetObjectItem(sch, "items");
        const int n = cJSON_GetArraySize(v);
        if ((mn && n < mn->valueint) || (mx && n > mx->valueint)) return false;
        for (const cJSON *e = v->child; e; e = e->next)
            if (items && !valid(e, items)) return false;
        return true;
    }
    if (!cJSON_IsObject(v)) return false; /* "object" */
    const cJSON *props = cJSON_GetObjectItem(sch, "properties"), *req = cJSON_GetObjectItem(sch, "required"),
                *addl = cJSON_GetObjectItem(sch, "additionalProperties");
    if (!props || !props->child) {
        if (cJSON_IsFalse(addl)) return !v->child;
        for (const cJSON *m = v->child; m; m = m->next)
            if (cJSON_IsObject(addl) && !valid(m, addl)) return false;
        return true;
    }
    int last = -1;
    for (const cJSON *m = v->child; m; m = m->next) {
        int k = 0;
        const cJSON *p = props->child;
        for (; p && strcmp(p->string, m->string); p = p->next) k++;
        if (!p || k <= last || !valid(m, p)) return false;
        last = k;
    }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return false;
    return true;
}

static bool same_text(const cJSON *a, const cJSON *b) {
    char *x = cJSON_PrintUnformatted(a), *y = cJSON_PrintUnformatted(b);
    const bool eq = x && y && !strcmp(x, y);
    cJSON_free(x);
    cJSON_free(y);
    return eq;
}

static bool valid(const cJSON *v, const cJSON *sch) {
    if (cJSON_IsTrue(sch)) return true;
    const cJSON *ref = cJSON_GetObjectItem(sch, "$ref");
    if (ref) {
        if (!strcmp(ref->valuestring, "#")) return valid(v, S_ROOT);
        const char *name = strrchr(ref->valuestring, '/') + 1;
        const cJSON *defs = cJSON_GetObjectItem(S_ROOT, strstr(ref->valuestring, "$defs") ? "$defs" : "definitions");
        return valid(v, cJSON_GetObjectItem(defs, name));
    }
    const cJSON *any = cJSON_GetObjectItem(sch, "anyOf");
    if (!any) any = cJSON_GetObjectItem(sch, "oneOf");
    if (any) {
        for (const cJSON *a = any->child; a; a = a->next)
            if (valid(v, a)) return true;
        return false;
    }
    const cJSON *all = cJSON_GetObjectItem(sch, "allOf");
    if (all) return valid(v, all->child);
    const cJSON *en = cJSON_GetObjectItem(sch, "enum"), *cst = cJSON_GetObjectItem(sch, "const");
    if (cst) return same_text(v, cst);
    if (en) {
        for (const cJSON *e = en->child; e; e = e->next)
            if (same_text(v, e)) return true;
        return false;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItem(sch, "nullable")) && cJSON_IsNull(v)) return true;
    const cJSON *t = cJSON_GetObjectItem(sch, "type");
    if (cJSON_IsString(t)) return valid_type(v, sch, t->valuestring);
    if (cJSON_IsArray(t)) {
        for (const cJSON *x = t->child; x; x = x->next)
            if (valid_type(v, sch, x->valuestring)) return true;
        return false;
    }
    if (cJSON_GetObjectItem(sch, "properties")) return valid_type(v, sch, "object");
    return true;
}

/* A random canonical text that conforms to sch. */
static void gen_schema(gen *g, const cJSON *sch, int depth) {
    if (cJSON_IsTrue(sch) || (!sch->child)) {
        gen_value(g, depth + 3);
        return;
    }
    const cJSON *ref = cJSON_GetObjectItem(sch, "$ref");
    if (ref) {
        const char *name = strrchr(ref->valuestring, '/') + 1;
        const cJSON *defs = cJSON_GetObjectItem(S_ROOT, strstr(ref->valuestring, "$defs") ? "$defs" : "definitions");
        gen_schema(g, strcmp(ref->valuestring, "#") ? cJSON_GetObjectItem(defs, name) : S_ROOT, depth);
        return;
    }
    const cJSON *any = cJSON_GetObjectItem(sch, "anyOf"), *en = cJSON_GetObjectItem(sch, "enum"),
                *cst = cJSON_GetObjectItem(sch, "const"), *t = cJSON_GetObjectItem(sch, "type"),
                *all = cJSON_GetObjectItem(sch, "allOf");
    if (all) {
        gen_schema(g, all->child, depth);
        return;
    }
    if (any) {
        const cJSON *a = any->child;
        for (uint32_t k = rnd(g, (uint32_t)cJSON_GetArraySize(any)); k > 0; k--) a = a->next;
        gen_schema(g, a, depth);
        return;
    }
    if (en || cst) {
        const cJSON *e = cst;
        if (en)
            for (e = en->child, cst = NULL; e && rnd(g, 3) == 0 && e->next;) e = e->next;
        char *txt = cJSON_PrintUnformatted(e);
        if (txt) puts_(g, txt);
        cJSON_free(txt);
        return;
    }
    const char *type = cJSON_IsString(t) ? t->valuestring : cJSON_IsArray(t) ? cJSON_GetArrayItem(t, (int)rnd(g, (uint32_t)cJSON_GetArraySize(t)))->valuestring : "object";
    static const char *const ints[] = {"0", "-7", "42", "1000000", "-0"};
    static const char *const nums[] = {"0.5", "-2.25e3", "17", "1E-9"};
    if (!strcmp(type, "string")) gen_string(g);
    else if (!strcmp(type, "integer")) puts_(g, ints[rnd(g, 5)]);
    else if (!strcmp(type, "number")) puts_(g, nums[rnd(g, 4)]);
    else if (!strcmp(type, "boolean")) puts_(g, rnd(g, 2) ? "true" : "false");
    else if (!strcmp(type, "null")) puts_(g, "null");
    else if (!strcmp(type, "array")) {
        const cJSON *mn = cJSON_GetObjectItem(sch, "minItems"), *mx = cJSON_GetObjectItem(sch, "maxItems"),
                    *items = cJSON_GetObjectItem(sch, "items");
        const int lo = mn ? mn->valueint : 0, hi = mx ? mx->valueint : lo + (depth > 3 ? 0 : 3);
        const int n = lo + (int)rnd(g, (uint32_t)(hi - lo + 1));
        put(g, "[", 1);
        for (int i = 0; i < n; i++) {
            if (i) put(g, ",", 1), ws(g);
            if (items) gen_schema(g, items, depth + 1);
            else gen_value(g, depth + 3);
        }
        put(g, "]", 1);
    } else {
        const cJSON *props = cJSON_GetObjectItem(sch, "properties"), *req = cJSON_GetObjectItem(sch, "required"),
                    *addl = cJSON_GetObjectItem(sch, "additionalProperties");
        put(g, "{", 1);
        ws(g);
        int n = 0;
        if (props && props->child) {
            for (const cJSON *p = props->child; p; p = p->next) {
                bool need = false;
                for (const cJSON *r = req ? req->child : NULL; r; r = r->next) need |= !strcmp(r->valuestring, p->string);
                if (!need && (depth > 3 || rnd(g, 2))) continue;
                if (n++) put(g, ",", 1), ws(g);
                cJSON *k = cJSON_CreateString(p->string);
                char *kt = cJSON_PrintUnformatted(k);
                puts_(g, kt);
                cJSON_free(kt);
                cJSON_Delete(k);
                ws(g), put(g, ":", 1), ws(g);
                gen_schema(g, p, depth + 1);
            }
        } else if (!cJSON_IsFalse(addl)) {
            for (uint32_t i = rnd(g, 3); i > 0; i--) {
                if (n++) put(g, ",", 1), ws(g);
                gen_string(g), put(g, ":", 1);
                if (cJSON_IsObject(addl)) gen_schema(g, addl, depth + 1);
                else gen_value(g, depth + 3);
            }
        }
        ws(g);
        put(g, "}", 1);
    }
}

static bool schema_doc(const vx_jschema *s, const char *d, size_t n) {
    vx_jcheck j;
    vx_jcheck_init_schema(&j, s);
    return vx_jcheck_feed(&j, d, (int32_t)n) && vx_jcheck_done(&j);
}

static const char *const SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"description\":\"who\"},\"age\":{\"type\":"
    "\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3},\"kind\":{\"enum\":"
    "[\"cat\",\"dog\",1,12,null,{\"a\":[true]}]},\"score\":{\"type\":[\"number\",\"null\"]},\"meta\":{\"type\":"
    "\"object\",\"additionalProperties\":{\"type\":\"boolean\"}}},\"required\":[\"name\",\"age\"],"
    "\"additionalProperties\":false}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":"
    "\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
    "{\"type\":\"array\",\"minItems\":1,\"maxItems\":4,\"items\":{\"anyOf\":[{\"type\":\"object\",\"properties\":"
    "{\"x\":{\"const\":\"y\"},\"w\":{\"type\":\"number\",\"nullable\":true}},\"required\":[\"x\"]},{\"type\":"
    "\"string\"},{\"type\":\"integer\"}]}}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},\"c\":{\"type\":"
    "\"object\",\"properties\":{},\"additionalProperties\":false},\"d\":{\"allOf\":[{\"type\":\"array\"}]},"
    "\"e\\\"q\":{\"type\":\"integer\"},\"f\":{}}}",
    /* a union of objects told apart by their first property (tool calls) */
    "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"
    "\"get_weather\"},\"arguments\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Rome\"]}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}},\"required\":[\"name\",\"arguments\"]},{\"type\":"
    "\"object\",\"properties\":{\"name\":{\"enum\":[\"get_time\",\"time\"]},\"arguments\":{\"type\":\"object\","
    "\"properties\":{\"zone\":{\"type\":\"string\"}},\"required\":[\"zone\"]}},\"required\":[\"name\","
    "\"arguments\"]},{\"$ref\":\"#/$defs/nop\"},{\"type\":\"string\"}]},\"$defs\":{\"nop\":{\"type\":\"object\","
    "\"properties\":{\"name\":{\"const\":\"nop\"}},\"required\":[\"name\"]}}}",
};

static void test_schema_compile(void) {
    static const struct {
        const char *schema, *error; /* NULL: compiles */
    } cases[] = {
        {"{\"type\":\"object\"}", NULL},
        {"{}", NULL}, /* any object */
        {"{\"type\":\"string\"}", "root must be an object or an array"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}", "'pattern'"},
        {"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0}}}", "/properties/n"},
        {"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"object\"},{\"properties\":{}}]}}", "different JSON types"},
        /* objects told apart: the first property required, named alike, its
         * strings not shared */
#define OBJ(k, v, req) "{\"type\":\"object\",\"properties\":{\"" k "\":" v "}" req "}"
        {"{\"anyOf\":[" OBJ("n", "{\"const\":\"a\"}", ",\"required\":[\"n\"]") "," OBJ("m", "{\"const\":\"b\"}",
         ",\"required\":[\"m\"]") "]}", "told apart"},
        {"{\"anyOf\":[" OBJ("n", "{\"const\":\"a\"}", ",\"required\":[\"n\"]") "," OBJ("n", "{\"const\":\"b\"}",
         "") "]}", "told apart"},
        {"{\"anyOf\":[" OBJ("n", "{\"const\":\"a\"}", ",\"required\":[\"n\"]") "," OBJ("n", "{\"const\":1}",
         ",\"required\":[\"n\"]") "]}", "told apart"},
        {"{\"anyOf\":[" OBJ("n", "{\"enum\":[\"a\",\"b\"]}", ",\"required\":[\"n\"]") "," OBJ("n",
         "{\"const\":\"b\"}", ",\"required\":[\"n\"]") "]}", "the same value"},
        {"{\"anyOf\":[" OBJ("n", "{\"type\":\"string\"}", ",\"required\":[\"n\"]") "," OBJ("n",
         "{\"const\":\"b\"}", ",\"required\":[\"n\"]") "]}", "told apart"},
#undef OBJ
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'b'"},
        {"{\"$ref\":\"#/$defs/nope\"}", "does not name"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"wat\"}}}", "unknown type"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "below"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[]}}}", "empty 'enum'"},
        {"{\"type\": ", "not valid JSON"},
        {"[1]", "an object"},
        /* keywords beside $ref / anyOf would not be enforced: refused */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/x\",\"type\":\"string\"}},\"$defs\":"
         "{\"x\":{\"type\":\"string\"}}}", "'type' beside '$ref'"},
        {"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\"}],\"enum\":[\"a\"]}}", "beside 'anyOf'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[\"x\",1]}}}", "not of the schema's"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"string\",\"integer\"],\"enum\":[\"x\",1]},"
         "\"b\":{\"description\":\"d\",\"nullable\":true,\"$ref\":\"#\"}}}", NULL},
        /* found in review: required without the properties listed, oneOf of untyped schemas, $ref
         * cycles, huge enums, NUL and invalid UTF-8, over-long $ref names */
        {"{\"type\":\"object\",\"required\":[\"a\"]}", "'required' needs"},
        {"{\"required\":[\"a\"]}", "'required' needs"},
        {"{\"type\":\"object\",\"properties\":{\"v\":{\"oneOf\":[{\"properties\":{\"x\":{}}},{\"type\":\"number\"}]}}}",
         "'oneOf' needs"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"type\":\"object\","
         "\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}}}", "cycle of '$ref's"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[\"x\\u0000y\"]}}}", "NUL"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[\"\xff\"]}}}", "UTF-8"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}}",
         "longer than 255"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"const\":1e19}}}", "beyond 2^53"},
        /* found in the second review */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\",\"enum\":[1e400]}}}", "beyond 2^53"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"type\":\"integer\"}}}", "twice"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"$id\":\"http://x/y\",\"type\":\"object\"}}}", "'$id' below"},
        {"{\"type\":\"object\",\"$defs\":{\"a\":{\"properties\":{\"b\":{\"type\":\"integer\"}}}},\"properties\":"
         "{\"x\":{\"$ref\":\"#/$defs/a/properties/b\"}}}", "does not name"},
        {"{\"type\":[\"object\",\"object\"]}", "two types of one kind"},
        {"{\"type\":\"array\",\"items\":{\"type\":[\"number\",\"integer\"]}}", "two types of one kind"},
    };
    /* an enum past VX_JSCHEMA_MAX_ENUM values */
    static char big[16 + 8 * (VX_JSCHEMA_MAX_ENUM + 1)];
    int o = snprintf(big, sizeof big, "{\"type\":\"array\",\"items\":{\"enum\":[");
    for (int i = 0; i <= VX_JSCHEMA_MAX_ENUM; i++) o += snprintf(big + o, sizeof big - (size_t)o, "%s%d", i ? "," : "", i);
    snprintf(big + o, sizeof big - (size_t)o, "]}}");
    {
        char err[VX_ERRMSG_MAX] = "";
        vx_jschema *s = NULL;
        CHECKF(vx_jschema_compile(big, strlen(big), &s, err, sizeof err) == VX_EINVAL && strstr(err, "more than 1024"),
               "a big enum: %s", err);
        vx_jschema_free(s);
    }
    /* the node budget: 64 x 64 objects of 6 properties each (28,737 nodes) */
    {
        const size_t cap = 1 << 20;
        char *big2 = malloc(cap);
        size_t o2 = 0;
        if (big2) {
            o2 += (size_t)snprintf(big2 + o2, cap - o2, "{\"type\":\"object\",\"properties\":{");
            for (int i = 0; i < 64; i++) {
                o2 += (size_t)snprintf(big2 + o2, cap - o2, "%s\"p%d\":{\"type\":\"object\",\"properties\":{", i ? "," : "", i);
                for (int k = 0; k < 64; k++) {
                    o2 += (size_t)snprintf(big2 + o2, cap - o2, "%s\"q%d\":{\"type\":\"object\",\"properties\":{", k ? "," : "", k);
                    for (int r = 0; r < 6; r++) o2 += (size_t)snprintf(big2 + o2, cap - o2, "%s\"r%d\":{\"type\":\"string\"}", r ? "," : "", r);
                    o2 += (size_t)snprintf(big2 + o2, cap - o2, "}}");
                }
                o2 += (size_t)snprintf(big2 + o2, cap - o2, "}}");
            }
            o2 += (size_t)snprintf(big2 + o2, cap - o2, "}}");
            char err[VX_ERRMSG_MAX] = "";
            vx_jschema *s = NULL;
            CHECKF(o2 < cap && vx_jschema_compile(big2, o2, &s, err, sizeof err) == VX_EINVAL && strstr(err, "nodes"),
                   "a schema of 28,737 nodes: %s", err);
            vx_jschema_free(s);
            free(big2);
        }
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[VX_ERRMSG_MAX] = "";
        vx_jschema *s = NULL;
        const vx_status st = vx_jschema_compile(cases[i].schema, strlen(cases[i].schema), &s, err, sizeof err);
        if (cases[i].error)
            CHECKF(st == VX_EINVAL && !s && strstr(err, cases[i].error), "%s: %s", cases[i].schema, err);
        else
            CHECKF(st == VX_OK && s, "%s: %s", cases[i].schema, err);
        vx_jschema_free(s);
    }
}

/* Hand-picked texts per schema of SCHEMAS: taken or not. */
static void test_schema_cases(void) {
    static const struct {
        int schema;
        bool ok;
        const char *doc;
    } cases[] = {
        {0, true, "{\"name\":\"x\",\"age\":1}"},
        {0, false, "{\"name\":\"x\"}"},                 /* age is required */
        {0, false, "{\"age\":1,\"name\":\"x\"}"},         /* the schema's order */
        {0, false, "{\"name\":\"x\",\"age\":1.5}"},       /* an integer */
        {0, false, "{\"name\":\"x\",\"age\":1e3}"},       /* written as one */
        {0, false, "{\"name\":\"x\",\"age\":1,\"extra\":1}"},
        {0, true, "{\"name\":\"x\",\"age\":-0,\"tags\":[\"a\",\"b\",\"c\"]}"},
        {0, false, "{\"name\":\"x\",\"age\":1,\"tags\":[\"a\",\"b\",\"c\",\"d\"]}"},
        {0, false, "{\"name\":\"x\",\"age\":1,\"kind\":\"cow\"}"},
        {0, false, "{\"name\":\"x\",\"age\":1,\"kind\":2}"},
        {0, true, "{\"name\":\"x\",\"age\":1,\"kind\":12}"},
        {0, true, "{\"name\":\"x\",\"age\":1,\"kind\":1 }"},
        {0, true, "{\"name\":\"x\",\"age\":1,\"kind\":{\"a\":[true]}}"},
        {0, false, "{\"name\":\"x\",\"age\":1,\"kind\":{\"a\":[false]}}"},
        {0, true, "{\"name\":\"x\",\"age\":1,\"score\":null,\"meta\":{\"k\":true,\"j\":false}}"},
        {0, false, "{\"name\":\"x\",\"age\":1,\"score\":\"1\"}"},
        {0, false, "{\"name\":\"x\",\"age\":1,\"meta\":{\"k\":1}}"},
        {0, false, "{\"name\":\"x\",\"name\":\"y\",\"age\":1}"}, /* once */
        {1, true, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}"},
        {1, false, "{\"kids\":[]}"},
        {1, false, "{\"v\":1,\"kids\":[{}]}"},
        {2, false, "[]"},                                  /* minItems 1 */
        {2, true, "[1,\"a\",{\"x\":\"y\"}]"},
        {2, false, "[{\"x\":\"z\"}]"},
        {2, false, "[1.5]"},
        {2, false, "[1,2,3,4,5]"},                        /* maxItems 4 */
        {2, true, "[{\"x\":\"y\",\"w\":null},{\"x\":\"y\",\"w\":2.5}]"},
        {2, false, "[{\"w\":1,\"x\":\"y\"}]"},
        {2, false, "[true]"},
        {3, true, "{}"},
        {3, false, "{\"c\":{\"a\":1}}"},
        {3, false, "{\"d\":{}}"},
        {3, true, "{\"d\":[1,{\"a\":2}],\"e\\\"q\":5,\"f\":[null]}"},
        {3, false, "{\"e\\\"q\":5,\"d\":[]}"},
        {4, true, "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]"},
        {4, false, "[{\"name\":\"get_weather\",\"arguments\":{\"zone\":\"x\"}}]"}, /* another's arguments */
        {4, true, "[{\"name\":\"time\",\"arguments\":{\"zone\":\"UTC\"}},{\"name\":\"get_time\",\"arguments\":"
                  "{\"zone\":\"CET\"}}]"},
        {4, false, "[{\"name\":\"get_time\",\"arguments\":{\"city\":\"Paris\"}}]"},
        {4, true, "[{\"name\":\"nop\"}, \"s\"]"},
        {4, false, "[{\"name\":\"nop\",\"arguments\":{}}]"},
        {4, false, "[{\"name\":\"other\"}]"},
        {4, false, "[{\"name\":\"get_weathe\"}]"},
        {4, false, "[{\"arguments\":{},\"name\":\"nop\"}]"}, /* the telling property first */
        {4, false, "[{}]"},
    };
    /* and schemas of their own (found in review) */
    static const struct {
        const char *schema, *doc;
        bool ok;
    } own[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"maxItems\":0}}}", "{\"a\":[1]}", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"maxItems\":0}}}", "{\"a\":[]}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"minItems\":2}}}", "{\"a\":[]}", false},
        {"{\"$defs\":{\"A\":{\"type\":\"object\",\"properties\":{\"b\":{\"$ref\":\"#/$defs/B\"}}},\"B\":{\"$ref\":"
         "\"#/$defs/A\"}},\"$ref\":\"#/$defs/A\"}", "{\"b\":5}", false},
        {"{\"$defs\":{\"A\":{\"type\":\"object\",\"properties\":{\"b\":{\"$ref\":\"#/$defs/B\"}}},\"B\":{\"$ref\":"
         "\"#/$defs/A\"}},\"$ref\":\"#/$defs/A\"}", "{\"b\":{\"b\":{}}}", true},
        {"{\"$ref\":\"#/$defs/A\",\"$defs\":{\"A\":{\"type\":\"object\",\"properties\":{\"b\":{\"$ref\":\"#\"}}}}}",
         "{\"b\":5}", false},
        {"{\"$ref\":\"#/$defs/A\",\"$defs\":{\"A\":{\"type\":\"object\",\"properties\":{\"b\":{\"$ref\":\"#\"}}}}}",
         "{\"b\":{}}", true},
        {"{\"const\":{\"a\":1}}", "{\"a\":1}", true},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\",\"nullable\":true}}}},"
         "\"$ref\":\"#/$defs/n\"}", "{\"next\":{\"next\":null}}", true},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
         "{\"type\":\"null\"}]}}}},\"$ref\":\"#/$defs/n\"}", "{\"next\":{\"next\":null}}", true},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
         "{\"type\":\"null\"}]}}}},\"$ref\":\"#/$defs/n\"}", "{\"next\":{\"next\":1}}", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"string\",\"null\"],\"nullable\":true}}}",
         "{\"a\":null}", true},
        /* nested unions of objects (found by fuzzing: nodes added while a
         * union resolved were read through a stale pointer) */
        {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"x\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]},{\"nullable\":true,\"properties\":{\"k\":{\"const\":\"c\"},\"y\":{\"$ref\":\"#\"}},\"required\":[\"k\"]}]}},\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[\"d\",\"e\"]}},\"required\":[\"k\"]}]}", "{\"k\":\"a\",\"x\":{\"k\":\"c\",\"y\":{\"k\":\"d\"}}}", true},
        {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"x\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]},{\"nullable\":true,\"properties\":{\"k\":{\"const\":\"c\"},\"y\":{\"$ref\":\"#\"}},\"required\":[\"k\"]}]}},\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[\"d\",\"e\"]}},\"required\":[\"k\"]}]}", "{\"k\":\"a\",\"x\":{\"k\":\"b\",\"y\":{}}}", false},
    };
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
        char err[VX_ERRMSG_MAX];
        vx_jschema *s = NULL;
        CHECKF(vx_jschema_compile(own[i].schema, strlen(own[i].schema), &s, err, sizeof err) == VX_OK, "%s: %s",
               own[i].schema, err);
        if (s)
            CHECKF(schema_doc(s, own[i].doc, strlen(own[i].doc)) == own[i].ok, "%s: %s should be %s", own[i].schema,
                   own[i].doc, own[i].ok ? "taken" : "refused");
        vx_jschema_free(s);
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *sc = SCHEMAS[cases[i].schema];
        char err[VX_ERRMSG_MAX];
        vx_jschema *s = NULL;
        if (vx_jschema_compile(sc, strlen(sc), &s, err, sizeof err) != VX_OK) continue;
        CHECKF(schema_doc(s, cases[i].doc, strlen(cases[i].doc)) == cases[i].ok, "schema %d: %s should be %s",
               cases[i].schema, cases[i].doc, cases[i].ok ? "taken" : "refused");
        vx_jschema_free(s);
    }
}

/* Every text the checker completes under a schema is JSON (the server's
 * parser) that conforms (the validator above): on canonical documents
 * generated from the schema (all taken, every proper prefix live) and on
 * one-byte mutations of them (whatever the checker completes). */
static void test_schema_docs(void) {
    char doc[4096], mut[4100];
    for (size_t si = 0; si < sizeof SCHEMAS / sizeof *SCHEMAS; si++) {
        char err[VX_ERRMSG_MAX];
        vx_jschema *s = NULL;
        cJSON *sch = cJSON_Parse(SCHEMAS[si]);
        CHECKF(vx_jschema_compile(SCHEMAS[si], strlen(SCHEMAS[si]), &s, err, sizeof err) == VX_OK && sch,
               "schema %zu: %s", si, err);
        if (!s || !sch) {
            vx_jschema_free(s);
            cJSON_Delete(sch);
            continue;
        }
        S_ROOT = sch;
        int docs = 0, ok = 0, prefix_ok = 0, mutants = 0, completed = 0, sound = 0;
        for (uint64_t seed = 1; seed <= 300; seed++) {
            gen g = {doc, 0, sizeof doc, 0x2545f4914f6cdd1dull * seed + si};
            gen_schema(&g, sch, 0);
            if (g.n + 1 >= g.cap) continue;
            docs++;
            cJSON *v = cJSON_ParseWithLength(doc, g.n);
            const bool good = parser_takes(doc, g.n) || (v && !cJSON_IsObject(v)); /* arrays: cJSON alone */
            ok += good && v && valid(v, sch) && schema_doc(s, doc, g.n);
            if (!(good && v && valid(v, sch) && schema_doc(s, doc, g.n)))
                fprintf(stderr, "schema %zu: generated document refused: %.*s\n", si, (int)g.n, doc);
            cJSON_Delete(v);
            vx_jcheck j;
            vx_jcheck_init_schema(&j, s);
            bool live = true;
            for (size_t i = 0; i < g.n && live; i++) live = vx_jcheck_feed(&j, doc + i, 1) && vx_jcheck_done(&j) == (i + 1 == g.n);
            prefix_ok += live;
            for (int m = 0; m < 30; m++) {
                const size_t at = rnd(&g, (uint32_t)g.n), op = rnd(&g, 3);
                static const char noise[] = "{}[]:,\"\\ 0129-.etfnuxyavw";
                const char c = noise[rnd(&g, sizeof noise - 1)];
                size_t len = at;
                memcpy(mut, doc, at);
                if (op == 1) mut[len++] = c;
                if (op == 2) mut[len++] = c, mut[len++] = doc[at];
                memcpy(mut + len, doc + at + 1, g.n - at - 1);
                len += g.n - at - 1;
                mutants++;
                if (!schema_doc(s, mut, len)) continue;
                completed++;
                cJSON *w = cJSON_ParseWithLength(mut, len);
                const bool json = cJSON_IsObject(w) ? parser_takes(mut, len) : w != NULL;
                if (json && valid(w, sch)) sound++;
                else fprintf(stderr, "schema %zu: completed but %s: %.*s\n", si, json ? "not valid" : "not JSON", (int)len, mut);
                cJSON_Delete(w);
            }
        }
        CHECKF(docs >= 250 && ok == docs && prefix_ok == docs, "schema %zu: %d documents, %d taken, %d prefixes live", si,
               docs, ok, prefix_ok);
        CHECKF(sound == completed && completed > 100, "schema %zu: %d of %d completed mutants conform", si, sound,
               completed);
        printf("json: schema %zu: %d documents taken; %d of %d mutants completed, all conform\n", si, docs, completed,
               mutants);
        vx_jschema_free(s);
        cJSON_Delete(sch);
    }
}

/* ---------------------------------------------------------------- engine */

/* The token whose whole text is s (-1: none). */
static vx_token token_of(const vx_vocab *v, const char *s) {
    char buf[256];
    for (vx_token t = 0; t < vx_vocab_n_tokens(v); t++) {
        const int32_t k = vx_token_to_piece(v, t, buf, sizeof buf, false);
        if (k == (int32_t)strlen(s) && !memcmp(buf, s, (size_t)k)) return t;
    }
    return -1;
}

/* Sampled json_object requests on a model: every finished text is one
 * JSON object the server's parser takes, ending at its closing brace;
 * with logit_bias leaning on the closing characters most of them close
 * within max_tokens. And the same requests without the constraint do not
 * make JSON (the filter is what does it). */
/* A fixture model (rel) and an engine on it for the requests below
 * (batch-invariant: the same texts whatever runs beside them); NULL when
 * either fails (*m NULL or to free). */
static vx_engine *json_engine(const char *rel, vx_model **m) {
    char err[VX_ERRMSG_MAX];
    vx_model_params mp = vx_model_default_params();
    *m = NULL;
    CHECKF(vx_model_load(vx_test_fixture_path(rel), &mp, m, err, sizeof err) == VX_OK, "%s: %s", rel, err);
    if (!*m) return NULL;
    vx_engine_params ep = vx_engine_default_params();
    ep.n_ctx = 512;
    ep.n_parallel = 4;
    ep.n_threads = 2;
    ep.batch_invariant = true;
    vx_engine *e = NULL;
    CHECKF(vx_engine_init(*m, &ep, &e, err, sizeof err) == VX_OK, "engine: %s", err);
    return e;
}

static void test_engine_json(const char *rel, int max_tokens, float lean, int min_closed) {
    char err[VX_ERRMSG_MAX];
    vx_model *m = NULL;
    vx_engine *e = json_engine(rel, &m);
    if (!e) {
        vx_model_free(m);
        return;
    }
    const vx_vocab *v = vx_model_get_vocab(m);
    test_filter(v, rel);
    vx_logit_bias bias[4];
    int nb = 0;
    const char *closers[4] = {"\"", "}", "]", ","};
    for (int i = 0; i < 4; i++) {
        const vx_token t = token_of(v, closers[i]);
        if (t >= 0) bias[nb++] = (vx_logit_bias){t, i == 3 ? -2.0f : lean};
    }
    CHECKF(nb >= 2, "%s: no tokens for the closing characters", rel);
    vx_token prompt[32];
    const int np = vx_tokenize(v, "Here is a JSON object: ", 23, prompt, 32, true, false);
    CHECK(np > 0);
    enum { N = 16 };
    static vx_test_text rs[2][N];
    int closed = 0, parsed = 0, json_without = 0;
    for (int constrained = 1; constrained >= 0; constrained--)
        for (int i = 0; i < N; i++) {
            vx_test_text *r = &rs[constrained][i];
            vx_test_text_init(r);
            vx_request_params rp;
            memset(&rp, 0, sizeof rp);
            rp.prompt = prompt;
            rp.n_prompt = np;
            rp.max_tokens = max_tokens;
            rp.sampling = vx_sampler_default_params();
            rp.sampling.seed = 1000 + (uint64_t)i;
            rp.sampling.temperature = i % 4 == 0 ? 0.0f : 0.6f + 0.2f * (float)(i % 4);
            rp.sampling.top_k = 0;
            rp.sampling.top_p = 1.0f;
            rp.sampling.min_p = 0.0f;
            rp.sampling.logit_bias = bias;
            rp.sampling.n_logit_bias = nb;
            rp.json_object = constrained;
            rp.on_event = vx_test_on_text;
            rp.user_data = r;
            uint64_t id;
            CHECKF(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK, "submit: %s", err);
        }
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < N; i++) vx_test_text_wait(&rs[c][i]);
    for (int i = 0; i < N; i++) {
        const vx_test_text *r = &rs[1][i];
        CHECKF(r->done && (r->finish == VX_FINISH_STOP || r->finish == VX_FINISH_LENGTH), "%s #%d: finish %d", rel, i,
               r->finish);
        if (r->finish == VX_FINISH_STOP) {
            closed++;
            const bool ok = parser_takes(r->text, (size_t)r->len);
            parsed += ok;
            /* it stopped at the closing brace: nothing after it */
            CHECKF(ok && r->len > 0 && r->text[0] == '{' && r->text[r->len - 1] == '}',
                   "%s #%d: not one JSON object from { to }: %.*s", rel, i, r->len, r->text);
        } else {
            CHECKF(r->n_gen == max_tokens, "%s #%d: %d tokens", rel, i, r->n_gen);
            vx_jcheck j;
            vx_jcheck_init(&j, VX_JCHECK_OBJECT | VX_JCHECK_NO_LEAD_WS);
            CHECKF(vx_jcheck_feed(&j, r->text, r->len), "%s #%d: not a JSON prefix: %.*s", rel, i, r->len, r->text);
        }
        if (getenv("VX_JSON_SHOW")) printf("%d %d: [%.*s]\n", i, r->finish, r->len, r->text);
        json_without += rs[0][i].len > 0 && parser_takes(rs[0][i].text, (size_t)rs[0][i].len);
    }
    CHECKF(closed >= min_closed && parsed == closed, "%s: %d of %d closed, %d parsed", rel, closed, N, parsed);
    CHECKF(json_without == 0, "%s: %d unconstrained texts are JSON objects", rel, json_without);
    printf("json: %s: %d of %d objects closed within %d tokens, e.g. %.*s\n", rel, closed, N, max_tokens,
           rs[1][1].len > 160 ? 160 : rs[1][1].len, rs[1][1].text);
    vx_engine_free(e);
    vx_model_free(m);
}

/* json_schema requests: every finished text conforms (the validator), and
 * a schema the subset does not take is refused at submit with its reason. */
static void test_engine_schema(void) {
    static const char sch[] = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":"
                              "{\"type\":\"integer\"},\"pet\":{\"enum\":[\"cat\",\"dog\"]},\"ok\":{\"type\":"
                              "\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
                              "\"maxItems\":3}},\"required\":[\"name\",\"age\",\"pet\",\"ok\",\"tags\"]}";
    char err[VX_ERRMSG_MAX];
    vx_model *m = NULL;
    vx_engine *e = json_engine("models/stories260K/stories260K.gguf", &m);
    if (!e) {
        vx_model_free(m);
        return;
    }
    cJSON *schema = cJSON_Parse(sch);
    const vx_vocab *v = vx_model_get_vocab(m);
    const vx_token q = token_of(v, "\"");
    const vx_logit_bias bias = {q, 4.0f};
    vx_token prompt[32];
    const int np = vx_tokenize(v, "A pet: ", 7, prompt, 32, true, false);
    enum { N = 12 };
    static vx_test_text rs[N];
    vx_request_params rp;
    memset(&rp, 0, sizeof rp);
    rp.prompt = prompt;
    rp.n_prompt = np;
    rp.max_tokens = 300;
    rp.sampling = vx_sampler_default_params();
    rp.sampling.top_k = 0, rp.sampling.top_p = 1.0f, rp.sampling.min_p = 0.0f;
    rp.sampling.logit_bias = &bias;
    rp.sampling.n_logit_bias = q >= 0;
    rp.json_schema = sch;
    rp.json_schema_len = sizeof sch - 1;
    rp.on_event = vx_test_on_text;
    for (int i = 0; e && schema && i < N; i++) {
        vx_test_text_init(&rs[i]);
        rp.sampling.seed = 77 + (uint64_t)i;
        rp.sampling.temperature = i % 3 == 0 ? 0.0f : 0.9f;
        rp.user_data = &rs[i];
        uint64_t id;
        CHECKF(vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_OK, "submit: %s", err);
    }
    int closed = 0, conform = 0;
    S_ROOT = schema;
    for (int i = 0; e && schema && i < N; i++) {
        vx_test_text_wait(&rs[i]);
        if (rs[i].finish != VX_FINISH_STOP) continue;
        closed++;
        cJSON *d = cJSON_ParseWithLength(rs[i].text, (size_t)rs[i].len);
        const bool ok = d && parser_takes(rs[i].text, (size_t)rs[i].len) && valid(d, schema);
        conform += ok;
        CHECKF(ok, "schema request #%d: %.*s", i, rs[i].len, rs[i].text);
        cJSON_Delete(d);
    }
    CHECKF(closed >= N / 2 && conform == closed, "schema requests: %d of %d closed, %d conform", closed, N, conform);
    printf("json: schema requests: %d of %d closed within 300 tokens, all conform, e.g. %.*s\n", closed, N,
           rs[1].len > 200 ? 200 : rs[1].len, rs[1].text);
    /* refused at submit, with the keyword named */
    static const char bad[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":2}}}";
    rp.json_schema = bad;
    rp.json_schema_len = sizeof bad - 1;
    uint64_t id;
    CHECK(!e || (vx_engine_submit(e, &rp, &id, err, sizeof err) == VX_EINVAL && strstr(err, "minLength")));
    cJSON_Delete(schema);
    vx_engine_free(e);
    vx_model_free(m);
}

/* test_filter on real vocabularies: llama.cpp's test files (128k and
 * 151k BPE tokens, a 32k SentencePiece one). */
static void test_filter_vocab(const char *name) {
    char rel[256], err[VX_ERRMSG_MAX];
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf", name);
    vx_gguf *g = NULL;
    vx_vocab *v = NULL;
    CHECKF(vx_gguf_open(vx_test_fixture_path(rel), &g, err, sizeof err) == VX_OK, "%s: %s", rel, err);
    if (g) CHECKF(vx_vocab_load(g, &v, err, sizeof err) == VX_OK, "%s: %s", rel, err);
    vx_gguf_close(g);
    if (v) test_filter(v, rel);
    vx_vocab_free(v);
}

int main(void) {
    test_cases();
    test_against_parser();
    test_schema_compile();
    test_schema_cases();
    test_schema_docs();
    test_filter_vocab("llama-bpe");
    test_filter_vocab("qwen2");
    test_filter_vocab("llama-spm");
    test_engine_json("models/stories260K/stories260K.gguf", 200, 4.0f, 12);
    test_engine_schema();
    test_engine_json("models/llama3/llama3-Q8_0.gguf", 300, 10.0f, 8);
    return vx_test_finish("test_json");
}
