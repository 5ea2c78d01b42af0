/*
 * json_schema.c - compiles a JSON Schema (the subset of json_schema.h)
 * into nodes for the JSON checker: one node per schema (per type of a
 * type list), properties and enum values as their JSON texts.
 */
#include "json_schema.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "server_openai.h" /* vx_utf8_valid */

#define MAX_REFS 256
#define MAX_NEST 64
#define MAX_NODES 20000 /* compiled nodes: bounds the time and memory of any schema */
#define MAX_MEMBERS 256  /* members of one schema object (checked for duplicates) */

typedef struct comp {
    vx_jschema *s;
    int32_t cap_nodes, cap_props, cap_texts;
    size_t pool_len, pool_cap;
    const cJSON *root;
    const cJSON *ref_def[MAX_REFS]; /* $ref targets met so far, and their REF nodes */
    int32_t ref_node[MAX_REFS];
    int n_refs, nest;
    int32_t *ua; /* [n_ua][2]: (union node, alternative node), resolved after compiling */
    int32_t n_ua, cap_ua;
    int32_t cap_choice;
    int32_t typed_calls; /* typed()'s budget */
    bool failed, oom;
    char *err;
    size_t err_size;
} comp;

/* Records the first error (with where it is, a JSON pointer) and returns -1. */
static int32_t fail(comp *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int32_t fail(comp *c, const char *path, const char *fmt, ...) {
    if (!c->failed) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (!path) snprintf(c->err, c->err_size, "%s (in an anyOf, oneOf or type list)", msg);
        else snprintf(c->err, c->err_size, "%s (at %s)", msg, *path ? path : "the root");
    }
    c->failed = true;
    return -1;
}

static int32_t oom(comp *c) {
    c->oom = c->failed = true;
    return -1;
}

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    int32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static int32_t new_node(comp *c, int kind) {
    vx_jschema *s = c->s;
    if (s->n_nodes >= MAX_NODES) return fail(c, "", "a schema of more than %d nodes", MAX_NODES);
    if (!grow((void **)&s->nodes, &c->cap_nodes, s->n_nodes + 1, sizeof *s->nodes)) return oom(c);
    vx_jnode *n = &s->nodes[s->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->max_items = -1;
    n->choice = -1;
    for (int k = 0; k < VX_JC_COUNT; k++) n->alt[k] = -1;
    return s->n_nodes++;
}

/* A text (a property name or an enum value as JSON) into the pool. */
static int32_t add_text(comp *c, const char *t) {
    vx_jschema *s = c->s;
    const size_t len = strlen(t);
    int32_t cap = c->cap_texts;
    if (!grow((void **)&s->text_off, &cap, s->n_texts + 1, sizeof *s->text_off) ||
        !grow((void **)&s->text_len, &c->cap_texts, s->n_texts + 1, sizeof *s->text_len))
        return oom(c);
    if (c->pool_len + len > c->pool_cap) {
        size_t nc = c->pool_cap ? c->pool_cap * 2 : 1024;
        while (nc < c->pool_len + len) nc *= 2;
        char *p = realloc(s->pool, nc);
        if (!p) return oom(c);
        s->pool = p;
        c->pool_cap = nc;
    }
    memcpy(s->pool + c->pool_len, t, len);
    s->text_off[s->n_texts] = (int32_t)c->pool_len;
    s->text_len[s->n_texts] = (int32_t)len;
    c->pool_len += len;
    return s->n_texts++;
}

/* A value's JSON text (cJSON's unformatted print) into the pool. */
static int32_t add_value_text(comp *c, const cJSON *v) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return oom(c);
    const int32_t i = add_text(c, t);
    cJSON_free(t);
    return i;
}

static int text_cmp(const vx_jschema *s, int32_t a, int32_t b) {
    const int32_t la = s->text_len[a], lb = s->text_len[b];
    const int r = memcmp(s->pool + s->text_off[a], s->pool + s->text_off[b], (size_t)(la < lb ? la : lb));
    return r ? r : (la > lb) - (la < lb);
}

static const cJSON *member(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static void sub(char *dst, size_t n, const char *path, const char *k) { snprintf(dst, n, "%s/%s", path, k); }

/* Keywords that only annotate (taken and ignored), and those the subset
 * implements; anything else is refused. */
bool vx_jschema_keyword_known(const char *k) {
    static const char *const kw[] = {
        "title", "description", "default", "examples", "$schema", "$id", "$comment", "format", "deprecated",
        "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$defs", "definitions", "discriminator",
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
        "anyOf", "oneOf", "allOf", "$ref", "nullable"};
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
        if (!strcmp(k, kw[i])) return true;
    return false;
}

static int32_t compile(comp *c, const cJSON *sch, const char *path);

/* Keywords beside the one a schema is compiled by ($ref, allOf, anyOf,
 * oneOf, enum / const) that would constrain it further: refused, since
 * only the first would be enforced (the annotations and nullable may
 * stand beside anything, and type beside enum / const, whose values it
 * must then allow). */
static bool alone(comp *c, const cJSON *sch, const char *by, const char *path) {
    static const char *const kw[] = {"type", "properties", "required", "additionalProperties", "items", "minItems",
                                     "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};
    const bool is_enum = !strcmp(by, "enum") || !strcmp(by, "const");
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++) {
        if (!strcmp(kw[i], by) || !member(sch, kw[i])) continue;
        if (is_enum && (!strcmp(kw[i], "type") || !strcmp(kw[i], "enum") || !strcmp(kw[i], "const"))) continue;
        return fail(c, path, "'%s' beside '%s' is not supported", kw[i], by) >= 0;
    }
    return true;
}

/* Whether value v is of JSON Schema type name t. */
static bool of_type(const cJSON *v, const char *t) {
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    return !strcmp(t, "object") && cJSON_IsObject(v);
}

/* An enum's values (and a const) must be of the schema's type, if any. */
static bool enum_typed(comp *c, const cJSON *sch, const cJSON *values, const char *path) {
    const cJSON *t = member(sch, "type");
    if (!t) return true;
    for (const cJSON *v = values; v; v = v->next) {
        bool ok = false;
        if (cJSON_IsString(t)) ok = of_type(v, t->valuestring);
        for (const cJSON *x = cJSON_IsArray(t) ? t->child : NULL; x && !ok; x = x->next)
            ok = cJSON_IsString(x) && of_type(v, x->valuestring);
        if (!ok) return fail(c, path, "an 'enum' / 'const' value is not of the schema's 'type'") >= 0;
    }
    return true;
}

/* The first-byte classes of node id's values (a bit each), for unions. */
static unsigned classes(const comp *c, int32_t id) {
    const vx_jnode *n = &c->s->nodes[id];
    switch (n->kind) {
    case VX_JN_OBJECT: return 1u << VX_JC_OBJ;
    case VX_JN_ARRAY: return 1u << VX_JC_ARR;
    case VX_JN_STRING: return 1u << VX_JC_STR;
    case VX_JN_NUMBER: case VX_JN_INTEGER: return 1u << VX_JC_NUM;
    case VX_JN_BOOLEAN: return 1u << VX_JC_BOOL;
    case VX_JN_NULL: return 1u << VX_JC_NULL;
    case VX_JN_ENUM: {
        unsigned m = 0;
        for (int32_t i = 0; i < n->n; i++) {
            const char f = c->s->pool[c->s->text_off[n->a + i]];
            m |= 1u << vx_jclass((unsigned char)f); /* a JSON text: always a value's first byte */
        }
        return m;
    }
    case VX_JN_UNION: {
        unsigned m = 0;
        for (int k = 0; k < VX_JC_COUNT; k++)
            if (n->alt[k] >= 0) m |= 1u << k;
        return m;
    }
    default: return 0;
    }
}

/* Records alternative id of union u, added once every node is compiled
 * (a $ref's target may not be yet). */
static bool union_alt(comp *c, int32_t u, int32_t id) {
    if (u < 0 || id < 0) return false;
    int32_t cap = c->cap_ua;
    if (!grow((void **)&c->ua, &cap, 2 * (c->n_ua + 1), sizeof *c->ua)) return oom(c) >= 0;
    c->cap_ua = cap;
    c->ua[2 * c->n_ua] = u;
    c->ua[2 * c->n_ua + 1] = id;
    c->n_ua++;
    return true;
}

static int32_t final(const comp *c, int32_t id);

/* The objects a union's object alternative stands for: itself, or those
 * of a head (vx_jnode.choice), appended to v (at most max). */
static int objects_of(const vx_jschema *s, int32_t id, int32_t *v, int n, int max) {
    const vx_jnode *h = &s->nodes[id];
    if (h->choice < 0) {
        if (n < max) v[n++] = id;
        return n;
    }
    const vx_jnode *e = &s->nodes[s->props[h->a].node];
    for (int32_t k = 0; k < e->n && n < max; k++) { /* an object of several values: once */
        const int32_t o = s->choice[h->choice + k];
        int i = 0;
        while (i < n && v[i] != o) i++;
        if (i == n) v[n++] = o;
    }
    return n;
}

#define MAX_CHOICE 256 /* objects in one union of objects */

/* Two object alternatives of one union (a, an object or a head, and b):
 * one head for all their objects, when each one's first property is
 * required, named alike, and a const / enum of strings no other object
 * has; its property's value then picks the object (json_check.c). */
static int32_t union_objects(comp *c, int32_t a, int32_t b, const char *path) {
    vx_jschema *s = c->s;
    int32_t obj[MAX_CHOICE];
    int n = objects_of(s, b, obj, objects_of(s, a, obj, 0, MAX_CHOICE), MAX_CHOICE);
    if (n == MAX_CHOICE) return fail(c, path, "a union of more than %d objects", MAX_CHOICE - 1);
    int32_t n_texts = 0, key = -1;
    for (int i = 0; i < n; i++) {
        const vx_jnode *o = &s->nodes[obj[i]];
        const int32_t e = o->kind == VX_JN_OBJECT && o->n > 0 && s->props[o->a].required ? final(c, s->props[o->a].node)
                                                                                          : -1;
        const vx_jnode *en = e > 0 ? &s->nodes[e] : NULL;
        bool ok = en && en->kind == VX_JN_ENUM && (key < 0 || text_cmp(s, key, s->props[o->a].key) == 0);
        for (int32_t t = 0; ok && t < en->n; t++) ok = s->pool[s->text_off[en->a + t]] == '"';
        if (!ok)
            return fail(c, path, "anyOf / oneOf / type alternatives must be of different JSON types (two start "
                                 "alike), or objects told apart by their first property (required in each, named "
                                 "alike, a const or enum of strings)");
        key = s->props[o->a].key;
        n_texts += en->n;
    }
    /* (each merge copies the values: bounded, as one enum is) */
    if (n_texts > VX_JSCHEMA_MAX_ENUM)
        return fail(c, path, "a union of objects whose first properties take more than %d values", VX_JSCHEMA_MAX_ENUM);
    /* the values of all, sorted as an enum's (a shared one: no telling apart) */
    const int32_t e = new_node(c, VX_JN_ENUM), h = new_node(c, VX_JN_OBJECT);
    if (e < 0 || h < 0) return -1;
    if (!grow((void **)&s->choice, &c->cap_choice, s->n_choice + n_texts, sizeof *s->choice) ||
        !grow((void **)&s->props, &c->cap_props, s->n_props + 1, sizeof *s->props))
        return oom(c);
    const int32_t t0 = s->n_texts, c0 = s->n_choice;
    for (int i = 0; i < n; i++) {
        const vx_jnode *en = &s->nodes[final(c, s->props[s->nodes[obj[i]].a].node)];
        for (int32_t t = 0; t < en->n; t++) {
            const int32_t at = en->a + t;
            char *copy = strndup(s->pool + s->text_off[at], (size_t)s->text_len[at]);
            const int32_t x = copy ? add_text(c, copy) : oom(c);
            free(copy);
            if (x < 0) return -1;
            int32_t j = x - t0;
            while (j > 0 && text_cmp(s, t0 + j - 1, x) > 0) j--;
            if (j > 0 && text_cmp(s, t0 + j - 1, x) == 0)
                return fail(c, path, "anyOf / oneOf objects whose first property can have the same value");
            const int32_t off = s->text_off[x], len = s->text_len[x], m = x - t0 - j;
            memmove(&s->text_off[t0 + j + 1], &s->text_off[t0 + j], (size_t)m * sizeof *s->text_off);
            memmove(&s->text_len[t0 + j + 1], &s->text_len[t0 + j], (size_t)m * sizeof *s->text_len);
            memmove(&s->choice[c0 + j + 1], &s->choice[c0 + j], (size_t)m * sizeof *s->choice);
            s->text_off[t0 + j] = off, s->text_len[t0 + j] = len, s->choice[c0 + j] = obj[i];
        }
    }
    s->n_choice += n_texts;
    s->nodes[e].a = t0, s->nodes[e].n = n_texts;
    s->props[s->n_props] = (vx_jprop){key, e, true};
    s->nodes[h].a = s->n_props++, s->nodes[h].n = 1, s->nodes[h].choice = c0;
    return h;
}

/* Adds alternative id (resolved: no REF, a union already filled) to union
 * u: its classes must be free, but for objects told apart by their first
 * property (union_objects). */
static bool union_add(comp *c, int32_t u, int32_t id, const char *path) {
    const vx_jnode node = c->s->nodes[id], *n = &node; /* a copy: union_objects adds nodes (realloc) */
    if (n->kind == VX_JN_ANY) return fail(c, path, "an alternative that allows any value cannot be told apart") >= 0;
    const unsigned m = classes(c, id);
    for (int k = 0; k < VX_JC_COUNT; k++) {
        if (!(m >> k & 1)) continue;
        const int32_t alt = n->kind == VX_JN_UNION ? n->alt[k] : id, had = c->s->nodes[u].alt[k];
        if (had >= 0 && k == VX_JC_OBJ && c->s->nodes[had].kind == VX_JN_OBJECT &&
            c->s->nodes[alt].kind == VX_JN_OBJECT) {
            const int32_t h = union_objects(c, had, alt, path);
            if (h < 0) return false;
            c->s->nodes[u].alt[k] = h;
            continue;
        }
        if (had >= 0)
            return fail(c, path, "anyOf / oneOf / type alternatives must be of different JSON types (two start alike)") >= 0;
        c->s->nodes[u].alt[k] = alt;
    }
    return true;
}

static bool nonneg_int(const cJSON *v, int32_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 65535 || v->valuedouble != (double)(int32_t)v->valuedouble)
        return false;
    *out = (int32_t)v->valuedouble;
    return true;
}

static int32_t object_node(comp *c, const cJSON *sch, const char *path) {
    char p[512];
    const cJSON *props = member(sch, "properties"), *req = member(sch, "required"),
                *addl = member(sch, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, path, "'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return fail(c, path, "'required' must be an array");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return fail(c, path, "'additionalProperties' must be a boolean or a schema");
    const int np = props ? cJSON_GetArraySize(props) : 0;
    if (np > VX_JSCHEMA_MAX_PROPS) return fail(c, path, "more than %s properties in one object", "64");
    const int32_t id = new_node(c, VX_JN_OBJECT);
    if (id < 0) return -1;
    if (np == 0 && req && req->child)
        return fail(c, path, "'required' needs its properties listed in 'properties' (no other may appear)");
    if (np == 0) { /* free-form: any members, their values by additionalProperties */
        sub(p, sizeof p, path, "additionalProperties");
        const int32_t child = addl && cJSON_IsObject(addl) ? compile(c, addl, p) : 0;
        if (child < 0) return -1;
        if (addl && cJSON_IsFalse(addl)) c->s->nodes[id].n = 0, c->s->nodes[id].child = -1; /* only {} */
        else c->s->nodes[id].child = child;
        return id;
    }
    vx_jschema *s = c->s;
    if (!grow((void **)&s->props, &c->cap_props, s->n_props + np, sizeof *s->props)) return oom(c);
    const int32_t a = s->n_props;
    s->n_props += np;
    s->nodes[id].a = a;
    s->nodes[id].n = np;
    int i = 0;
    for (const cJSON *m = props->child; m; m = m->next, i++) {
        /* (a name twice was refused with every repeated key, unique_keys) */
        cJSON *name = cJSON_CreateString(m->string);
        if (!name) return oom(c);
        const int32_t key = add_value_text(c, name);
        cJSON_Delete(name);
        if (key < 0) return -1;
        snprintf(p, sizeof p, "%s/properties/%.200s", path, m->string);
        const int32_t node = compile(c, m, p);
        if (node < 0) return -1;
        c->s->props[a + i] = (vx_jprop){key, node, false};
    }
    if (req)
        for (const cJSON *r = req->child; r; r = r->next) {
            if (!cJSON_IsString(r)) return fail(c, path, "'required' must list property names");
            int k = 0;
            for (const cJSON *m = props->child; m && strcmp(m->string, r->valuestring); m = m->next) k++;
            if (k == np)
                return fail(c, path, "the required property '%.80s' is not in 'properties' (no other may appear)",
                            r->valuestring);
            c->s->props[a + k].required = true;
        }
    return id;
}

static int32_t type_node(comp *c, const cJSON *sch, const char *type, const char *path) {
    if (!strcmp(type, "object")) return object_node(c, sch, path);
    if (!strcmp(type, "array")) {
        char p[512];
        const cJSON *items = member(sch, "items"), *mn = member(sch, "minItems"), *mx = member(sch, "maxItems");
        int32_t lo = 0, hi = -1;
        if (mn && !nonneg_int(mn, &lo)) return fail(c, path, "'minItems' must be an integer from 0 to 65535");
        if (mx && !nonneg_int(mx, &hi)) return fail(c, path, "'maxItems' must be an integer from 0 to 65535");
        if (hi >= 0 && hi < lo) return fail(c, path, "'maxItems' is below 'minItems'");
        if (items && !cJSON_IsObject(items) && !cJSON_IsTrue(items))
            return fail(c, path, "'items' must be a schema (tuples, 'prefixItems', are not supported)");
        sub(p, sizeof p, path, "items");
        const int32_t child = items ? compile(c, items, p) : 0;
        if (child < 0) return -1;
        const int32_t id = new_node(c, VX_JN_ARRAY);
        if (id < 0) return -1;
        c->s->nodes[id].child = child;
        c->s->nodes[id].min_items = lo;
        c->s->nodes[id].max_items = hi;
        return id;
    }
    static const struct {
        const char *name;
        int kind;
    } prim[] = {{"string", VX_JN_STRING}, {"number", VX_JN_NUMBER}, {"integer", VX_JN_INTEGER},
                {"boolean", VX_JN_BOOLEAN}, {"null", VX_JN_NULL}};
    for (size_t i = 0; i < sizeof prim / sizeof *prim; i++)
        if (!strcmp(type, prim[i].name)) return new_node(c, prim[i].kind);
    return fail(c, path, "unknown type '%.40s'", type);
}

static int32_t enum_node(comp *c, const cJSON *values, const char *path) {
    const int n = cJSON_GetArraySize(values);
    if (n == 0) return fail(c, path, "an empty 'enum' allows no value");
    if (n > VX_JSCHEMA_MAX_ENUM) return fail(c, path, "an 'enum' of more than %d values", VX_JSCHEMA_MAX_ENUM);
    for (const cJSON *v = values->child; v; v = v->next) /* as cJSON prints them: exact doubles only */
        if (cJSON_IsNumber(v) && (!isfinite(v->valuedouble) || (fabs(v->valuedouble) >= 9007199254740992.0)))
            return fail(c, path, "an 'enum' / 'const' number beyond 2^53 or a double's range");
    const int32_t id = new_node(c, VX_JN_ENUM);
    if (id < 0) return -1;
    const int32_t a = c->s->n_texts;
    for (const cJSON *v = values->child; v; v = v->next)
        if (add_value_text(c, v) < 0) return -1;
    /* sorted bytewise (a prefix first), duplicates dropped */
    vx_jschema *s = c->s;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t j = m;
        while (j > 0 && text_cmp(s, a + j - 1, a + i) > 0) j--;
        if (j > 0 && text_cmp(s, a + j - 1, a + i) == 0) continue;
        const int32_t off = s->text_off[a + i], len = s->text_len[a + i];
        memmove(&s->text_off[a + j + 1], &s->text_off[a + j], (size_t)(m - j) * sizeof *s->text_off);
        memmove(&s->text_len[a + j + 1], &s->text_len[a + j], (size_t)(m - j) * sizeof *s->text_len);
        s->text_off[a + j] = off, s->text_len[a + j] = len;
        m++;
    }
    s->n_texts = a + m;
    s->nodes[id].a = a;
    s->nodes[id].n = m;
    return id;
}

/* The schema a $ref names within the document ("#", "#/$defs/NAME" or
 * "#/definitions/NAME"), NULL if none; *too_long for names past 255 bytes. */
static const cJSON *def_of(const comp *c, const char *ref, bool *too_long) {
    *too_long = false;
    if (!strcmp(ref, "#")) return c->root;
    const char *pre[2] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++) {
        const size_t k = strlen(pre[i]);
        if (strncmp(ref, pre[i], k)) continue;
        char name[256];
        size_t o = 0;
        const char *q = ref + k;
        for (; *q && o + 1 < sizeof name; q++) { /* JSON pointer: ~1 is '/', ~0 '~' */
            if (*q == '/' || *q == '%') return NULL; /* deeper pointers and URI escapes: not taken */
            name[o++] = q[0] == '~' && (q[1] == '0' || q[1] == '1') ? (*++q == '1' ? '/' : '~') : *q;
        }
        name[o] = 0;
        if (*q) {
            *too_long = true;
            return NULL;
        }
        return member(member(c->root, i == 0 ? "$defs" : "definitions"), name);
    }
    return NULL;
}

static int32_t ref_node(comp *c, const char *ref, const char *path) {
    bool too_long;
    const cJSON *def = def_of(c, ref, &too_long);
    if (too_long) return fail(c, path, "'$ref' %.60s...: a name longer than 255 bytes", ref);
    if (!def) return fail(c, path, "'$ref' %.120s does not name a schema in this document ($defs, definitions)", ref);
    for (int i = 0; i < c->n_refs; i++)
        if (c->ref_def[i] == def) return c->ref_node[i];
    if (c->n_refs == MAX_REFS) return fail(c, path, "more than %s referenced schemas", "256");
    /* an alias node that exists before its body: a recursive $ref finds it;
     * every alias is replaced by its target once all is compiled */
    const int32_t id = new_node(c, VX_JN_REF);
    if (id < 0) return -1;
    c->s->nodes[id].child = -1;
    c->ref_def[c->n_refs] = def;
    c->ref_node[c->n_refs++] = id;
    const int32_t body = compile(c, def, ref + 1);
    if (body < 0) return -1;
    c->s->nodes[id].child = body;
    return id;
}

/* Whether schema sch restricts the JSON type by itself (type, enum, const,
 * or only such alternatives / references): oneOf's alternatives must, or
 * a value could match two of them (a schema without a type matches every
 * non-object, say), which oneOf forbids and the compiled union would let
 * through. */
static bool typed(comp *c, const cJSON *sch, int depth) {
    if (depth > 16 || !cJSON_IsObject(sch) || ++c->typed_calls > 10000) return false;
    if (member(sch, "type") || member(sch, "enum") || member(sch, "const")) return true;
    const cJSON *ref = member(sch, "$ref"), *all = member(sch, "allOf"), *any = member(sch, "anyOf");
    if (!any) any = member(sch, "oneOf");
    bool too_long;
    if (cJSON_IsString(ref)) return typed(c, def_of(c, ref->valuestring, &too_long), depth + 1);
    if (cJSON_IsArray(all) && all->child) return typed(c, all->child, depth + 1);
    if (!cJSON_IsArray(any) || !any->child) return false;
    for (const cJSON *a = any->child; a; a = a->next)
        if (!typed(c, a, depth + 1)) return false;
    return true;
}

static int32_t compile(comp *c, const cJSON *sch, const char *path) {
    char p[512];
    if (cJSON_IsTrue(sch)) return 0;
    if (!cJSON_IsObject(sch)) return fail(c, path, "a schema must be an object (or true)");
    if (++c->nest > MAX_NEST) return fail(c, path, "schemas nested more than %s deep", "64");
    int32_t id = -1;
    for (const cJSON *m = sch->child; m; m = m->next)
        if (!vx_jschema_keyword_known(m->string))
            return fail(c, path, "the keyword '%.60s' is not supported: constrained decoding would not enforce it",
                        m->string);
    if (sch != c->root && member(sch, "$id"))
        return fail(c, path, "'$id' below the root is not supported (it would move what '$ref' names)");
    const cJSON *ref = member(sch, "$ref"), *all = member(sch, "allOf"), *any = member(sch, "anyOf"),
                *one = member(sch, "oneOf"), *en = member(sch, "enum"), *cst = member(sch, "const"),
                *type = member(sch, "type"), *nullable = member(sch, "nullable");
    const char *by = ref ? "$ref" : all ? "allOf" : any ? "anyOf" : one ? "oneOf" : en ? "enum" : cst ? "const" : NULL;
    if (by && !alone(c, sch, by, path)) return -1;
    if (en && cst) return fail(c, path, "'enum' beside 'const' is not supported");
    if (ref) {
        if (!cJSON_IsString(ref)) return fail(c, path, "'$ref' must be a string");
        id = ref_node(c, ref->valuestring, path);
    } else if (all) {
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1)
            return fail(c, path, "'allOf' is supported with one schema only");
        sub(p, sizeof p, path, "allOf/0");
        id = compile(c, all->child, p);
    } else if (any || one) {
        const cJSON *alts = any ? any : one;
        if (!cJSON_IsArray(alts) || !alts->child) return fail(c, path, "'anyOf' / 'oneOf' must be a non-empty array");
        if (one && !typed(c, sch, 0))
            return fail(c, path, "'oneOf' needs alternatives with a 'type' (or enum, const), so that at most one "
                                 "matches");
        id = new_node(c, VX_JN_UNION);
        int k = 0;
        for (const cJSON *a = alts->child; a && id >= 0; a = a->next, k++) {
            snprintf(p, sizeof p, "%s/%s/%d", path, any ? "anyOf" : "oneOf", k);
            if (!union_alt(c, id, compile(c, a, p))) id = -1;
        }
    } else if (en || cst) {
        if (en && !cJSON_IsArray(en)) return fail(c, path, "'enum' must be an array");
        cJSON *one_value = NULL;
        if (!en) {
            one_value = cJSON_CreateArray();
            cJSON *dup = one_value ? cJSON_Duplicate(cst, true) : NULL;
            if (!dup || !cJSON_AddItemToArray(one_value, dup)) {
                cJSON_Delete(dup);
                cJSON_Delete(one_value);
                return oom(c);
            }
        }
        id = enum_typed(c, sch, (en ? en : one_value)->child, path) ? enum_node(c, en ? en : one_value, path) : -1;
        cJSON_Delete(one_value);
    } else if (type && cJSON_IsArray(type)) {
        for (const cJSON *t = type->child; t; t = t->next)
            for (const cJSON *u = type->child; u != t; u = u->next) {
                const bool num = cJSON_IsString(t) && cJSON_IsString(u) && (!strcmp(t->valuestring, "number") ||
                                 !strcmp(t->valuestring, "integer")) && (!strcmp(u->valuestring, "number") ||
                                 !strcmp(u->valuestring, "integer"));
                if (num || (cJSON_IsString(t) && cJSON_IsString(u) && !strcmp(t->valuestring, u->valuestring)))
                    return fail(c, path, "a 'type' list with two types of one kind");
            }
        id = new_node(c, VX_JN_UNION);
        for (const cJSON *t = type->child; t && id >= 0; t = t->next) {
            if (!cJSON_IsString(t)) return fail(c, path, "'type' must name types");
            if (!union_alt(c, id, type_node(c, sch, t->valuestring, path))) id = -1;
        }
    } else if (type) {
        if (!cJSON_IsString(type)) return fail(c, path, "'type' must be a string or a list of strings");
        id = type_node(c, sch, type->valuestring, path);
    } else if (member(sch, "properties") || member(sch, "additionalProperties") || member(sch, "required")) {
        id = object_node(c, sch, path); /* only objects, then: fewer texts than the schema takes, all conforming */
    } else if (member(sch, "items") || member(sch, "minItems") || member(sch, "maxItems")) {
        id = type_node(c, sch, "array", path);
    } else {
        id = 0; /* no constraint */
    }
    if (id > 0 && cJSON_IsTrue(nullable) && !(c->s->nodes[id].kind == VX_JN_NULL)) {
        const int32_t u = new_node(c, VX_JN_UNION), nul = new_node(c, VX_JN_NULL);
        if (!union_alt(c, u, id) || !union_alt(c, u, nul)) return -1;
        c->s->nodes[u].n = -1; /* nullable: a null alternative already there is no clash */
        id = u;
    }
    c->nest--;
    return id;
}

/* Objects in the schema with a key twice (cJSON reads the first, most
 * parsers the last: which one was meant?) or with too many members to
 * check; arrays and objects within, depth first. */
static bool unique_keys(comp *c, const cJSON *v, int depth) {
    if (depth > 200) return fail(c, "", "a schema nested more than %d deep", 200) >= 0;
    int n = 0;
    for (const cJSON *m = v ? v->child : NULL; m; m = m->next, n++) {
        if (cJSON_IsObject(v)) {
            if (n >= MAX_MEMBERS) return fail(c, "", "an object of more than %d members in the schema", MAX_MEMBERS) >= 0;
            for (const cJSON *q = v->child; q != m; q = q->next)
                if (!strcmp(q->string, m->string))
                    return fail(c, "", "the key '%.60s' appears twice in one object of the schema", m->string) >= 0;
        }
        if ((cJSON_IsObject(m) || cJSON_IsArray(m)) && !unique_keys(c, m, depth + 1)) return false;
    }
    return true;
}

/* The node a chain of $ref aliases ends at; -1 for a cycle of them. */
static int32_t final(const comp *c, int32_t id) {
    for (int32_t steps = 0; id > 0 && c->s->nodes[id].kind == VX_JN_REF; steps++) {
        if (steps > c->n_refs) return -1;
        id = c->s->nodes[id].child;
    }
    return id;
}

/* Fills union u's alternatives (first / alts: its recorded ones), unions
 * among them first; state per node: 1 in progress, 2 done. */
static bool resolve_union(comp *c, int32_t u, uint8_t *state, const int32_t *first, const int32_t *alts) {
    if (state[u] == 2) return true;
    if (state[u] == 1) return fail(c, NULL, "alternatives that lead back to their own anyOf / oneOf") >= 0;
    state[u] = 1;
    for (int32_t i = first[u]; i < first[u + 1]; i++) {
        const int32_t t = final(c, alts[i]);
        if (t < 0) return fail(c, NULL, "a cycle of '$ref's that never reaches a schema") >= 0;
        const int kind = c->s->nodes[t].kind; /* (resolving adds nodes: no pointer into them kept) */
        if (kind == VX_JN_UNION && !resolve_union(c, t, state, first, alts)) return false;
        /* nullable: a null its schema already allows is no clash */
        if (c->s->nodes[u].n == -1 && kind == VX_JN_NULL && c->s->nodes[u].alt[VX_JC_NULL] >= 0) continue;
        if (!union_add(c, u, t, NULL)) return false;
    }
    c->s->nodes[u].n = 0;
    state[u] = 2;
    return true;
}

/* After compiling: unions filled, every reference to a $ref alias
 * replaced by its target. */
static bool finish(comp *c) {
    vx_jschema *s = c->s;
    const int32_t nn = s->n_nodes;
    /* the recorded alternatives by union: alts[first[u] .. first[u + 1]) */
    int32_t *first = calloc((size_t)nn + 1, sizeof *first), *fill = calloc((size_t)nn + 1, sizeof *fill);
    int32_t *alts = malloc(((size_t)c->n_ua + 1) * sizeof *alts);
    uint8_t *state = calloc((size_t)nn, 1);
    bool ok = first && fill && alts && state;
    if (!ok) oom(c);
    for (int32_t i = 0; ok && i < c->n_ua; i++) first[c->ua[2 * i] + 1]++;
    for (int32_t i = 0; ok && i < nn; i++) first[i + 1] += first[i];
    for (int32_t i = 0; ok && i < c->n_ua; i++) {
        const int32_t u = c->ua[2 * i];
        alts[first[u] + fill[u]++] = c->ua[2 * i + 1];
    }
    free(fill);
    for (int32_t u = 0; ok && u < nn; u++)
        if (s->nodes[u].kind == VX_JN_UNION) ok = resolve_union(c, u, state, first, alts);
    for (int32_t i = 0; ok && i < nn; i++) {
        vx_jnode *n = &s->nodes[i];
        if (n->kind != VX_JN_REF && n->child > 0 && (n->child = final(c, n->child)) < 0) ok = false;
    }
    for (int32_t i = 0; ok && i < s->n_props; i++)
        if ((s->props[i].node = final(c, s->props[i].node)) < 0) ok = false;
    if (ok && (s->root = final(c, s->root)) < 0) ok = false;
    if (!ok && !c->failed) fail(c, "", "a cycle of '$ref's that never reaches a schema");
    free(first);
    free(alts);
    free(state);
    return ok;
}

vx_status vx_jschema_compile(const char *json, size_t len, vx_jschema **out, char *err, size_t err_size) {
    *out = NULL;
    size_t bad;
    if (!vx_utf8_valid(json, len, &bad))
        return vx_seterr(err, err_size, VX_EINVAL, "the schema is not valid UTF-8 (byte %zu)", bad);
    for (size_t i = 0; i + 6 <= len; i++)
        if (!memcmp(json + i, "\\u0000", 6))
            return vx_seterr(err, err_size, VX_EINVAL, "the schema holds a NUL character (\\u0000, byte %zu)", i);
    char *text = malloc(len + 1); /* cJSON 1.7.15 may read one byte past a length */
    if (!text) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    memcpy(text, json, len);
    text[len] = 0;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return vx_seterr(err, err_size, VX_EINVAL, "the schema is not valid JSON");
    vx_jschema *s = calloc(1, sizeof *s);
    comp c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.root = root;
    c.err = err;
    c.err_size = err_size;
    if (!s || new_node(&c, VX_JN_ANY) != 0) { /* node 0: any value */
        cJSON_Delete(root);
        vx_jschema_free(s);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    s->root = unique_keys(&c, root, 0) ? compile(&c, root, "") : -1;
    if (s->root >= 0 && !finish(&c)) s->root = -1;
    free(c.ua);
    if (s->root == 0) { /* no constraint: any object, as json_object */
        s->root = new_node(&c, VX_JN_OBJECT);
        if (s->root > 0) s->nodes[s->root].child = 0;
    }
    const unsigned m = s->root >= 0 ? classes(&c, s->root) : 0;
    if (s->root >= 0 && (m == 0 || (m & ~((1u << VX_JC_OBJ) | (1u << VX_JC_ARR)))))
        s->root = fail(&c, "", "the root must be an object or an array");
    cJSON_Delete(root);
    if (s->root < 0) {
        const bool no_mem = c.oom;
        vx_jschema_free(s);
        if (no_mem) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        return VX_EINVAL;
    }
    *out = s;
    return VX_OK;
}

void vx_jschema_free(vx_jschema *s) {
    if (!s) return;
    free(s->nodes);
    free(s->props);
    free(s->text_off);
    free(s->text_len);
    free(s->pool);
    free(s->choice);
    free(s);
}
