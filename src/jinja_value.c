/*
 * jinja_value.c - the value model of the Jinja interpreter: the per-render
 * arena, strings and UTF-8, lists and ordered dicts, Python truthiness,
 * equality and ordering, and the three ways a value becomes text: str(),
 * repr() and json.dumps() (HF's tojson). Everything follows CPython's
 * observable behavior because the reference renderings come from jinja2.
 */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deepest container nesting printed or compared; a namespace can contain
 * itself, and jinja2 would recurse until Python's own limit. */
#define JX_MAX_NEST 200

/* ------------------------------------------------------------------ arena */

struct jx_chunk {
    jx_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
};

#define JX_CHUNK_HDR ((sizeof(jx_chunk) + 15) & ~(size_t)15)
#define JX_CHUNK_MIN ((size_t)64 * 1024)

void jx_arena_init(jx_arena *a, size_t cap) {
    a->head = NULL;
    a->used = 0;
    a->cap = cap;
    a->over = false;
}

void jx_arena_free(jx_arena *a) {
    jx_chunk *c = a->head;
    while (c) {
        jx_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *jx_arena_alloc(jx_arena *a, size_t n) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + 15) & ~(size_t)15;
    if (a->cap && (a->used + n > a->cap || a->used + n < a->used)) {
        a->over = true;
        return NULL;
    }
    jx_chunk *h = a->head;
    if (!h || h->size - h->used < n) {
        /* Big requests get a chunk of their own behind the current one so
         * the space left in the bump chunk is not wasted. */
        size_t size = n > JX_CHUNK_MIN / 4 ? n : JX_CHUNK_MIN;
        jx_chunk *c = malloc(JX_CHUNK_HDR + size);
        if (!c) {
            a->over = false;
            return NULL;
        }
        c->size = size;
        c->used = 0;
        if (h && size == n) {
            c->next = h->next;
            h->next = c;
        } else {
            c->next = h;
            a->head = c;
        }
        h = c;
    }
    void *p = (unsigned char *)h + JX_CHUNK_HDR + h->used;
    h->used += n;
    a->used += n;
    return p;
}

/* ----------------------------------------------------------------- errors */

bool jx_fail(jx_ctx *c, vx_status code, const char *fmt, ...) {
    if (c->status != VX_OK) return false; /* the first error is the real one */
    c->status = code;
    int k = 0;
    if (c->line > 0) k = snprintf(c->msg, sizeof c->msg, "line %d: ", c->line);
    if (k < 0 || (size_t)k >= sizeof c->msg) k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg + k, sizeof c->msg - (size_t)k, fmt, ap);
    va_end(ap);
    return false;
}

void *jx_alloc(jx_ctx *c, size_t n) {
    if (!jx_charge(c, n >> 6)) return NULL; /* filling it costs about this much */
    void *p = jx_arena_alloc(c->arena, n);
    if (!p) {
        if (c->arena->over)
            jx_fail(c, VX_ERANGE, "template used more than %zu bytes of memory", c->arena->cap);
        else
            jx_fail(c, VX_ENOMEM, "out of memory");
    }
    return p;
}

bool jx_enter(jx_ctx *c) {
    if (c->nest >= JX_MAX_EVAL_DEPTH)
        return jx_fail(c, VX_ERANGE, "template nested too deeply (more than %d levels)",
                       JX_MAX_EVAL_DEPTH);
    c->nest++;
    return true;
}

bool jx_charge(jx_ctx *c, uint64_t units) {
    c->steps += units;
    if (c->steps > c->lim.max_steps)
        return jx_fail(c, VX_ERANGE, "template exceeded %llu evaluation steps (runaway loop?)",
                       (unsigned long long)c->lim.max_steps);
    return true;
}

/* ---------------------------------------------------------------- buffers */

bool jx_buf_put(jx_ctx *c, jx_buf *b, const char *s, size_t n) {
    if (n == 0) return true;
    if (n >= 64 && !jx_charge(c, n >> 6)) return false;
    if (n > c->lim.max_output || b->n > c->lim.max_output - n)
        return jx_fail(c, VX_ERANGE, "template output exceeds %zu bytes", c->lim.max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return jx_fail(c, VX_ENOMEM, "out of memory");
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool jx_buf_putc(jx_ctx *c, jx_buf *b, char ch) { return jx_buf_put(c, b, &ch, 1); }
bool jx_buf_puts(jx_ctx *c, jx_buf *b, const char *s) { return jx_buf_put(c, b, s, strlen(s)); }

void jx_buf_free(jx_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

const char *jx_find(const char *hay, size_t hn, const char *needle, size_t nn) {
    if (nn == 0) return hay;
    if (nn > hn) return NULL;
    const char *end = hay + (hn - nn) + 1;
    for (const char *p = hay; p < end;) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, needle, nn) == 0) return p;
        p++;
    }
    return NULL;
}

/* ------------------------------------------------------------------ UTF-8 */

uint32_t jx_utf8_dec(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned b = u[0];
    if (b < 0x80) {
        *len = 1;
        return b;
    }
    size_t need;
    uint32_t cp, min;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1, cp = b & 0x1F, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2, cp = b & 0x0F, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3, cp = b & 0x07, min = 0x10000;
    } else {
        goto bad;
    }
    if (n <= need) goto bad;
    for (size_t i = 1; i <= need; i++) {
        if ((u[i] & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
    *len = need + 1;
    return cp;
bad:
    /* Like Python's surrogateescape: the raw byte maps to U+DC80..U+DCFF and
     * jx_utf8_enc writes it back unchanged. */
    *len = 1;
    return 0xDC00 + b;
}

size_t jx_utf8_enc(uint32_t cp, char out[4]) {
    if (cp >= 0xDC80 && cp <= 0xDCFF) {
        out[0] = (char)(cp - 0xDC00);
        return 1;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t jx_utf8_count(const char *s, size_t n) {
    size_t count = 0, i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
        } else {
            size_t l;
            jx_utf8_dec(s + i, n - i, &l);
            i += l;
        }
        count++;
    }
    return count;
}

size_t jx_cp_offset(const jx_str *s, int64_t cp) {
    if (cp <= 0) return 0;
    if ((uint64_t)cp >= s->ncp) return s->len;
    if (s->ncp == s->len) return (size_t)cp;
    size_t i = 0;
    for (int64_t k = 0; k < cp && i < s->len; k++) {
        size_t l;
        jx_utf8_dec(s->s + i, s->len - i, &l);
        i += l;
    }
    return i;
}

bool jx_is_space(uint32_t cp) {
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Simple case mapping for the scripts chat text meets most: ASCII, Latin-1,
 * Latin Extended-A, Greek, Cyrillic and fullwidth Latin. Other characters
 * are left as they are. */
uint32_t jx_to_upper(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
    if (cp == 0xFF) return 0x178;
    if (cp == 0xB5) return 0x39C;
    if (cp >= 0x100 && cp <= 0x17F) {
        if (cp == 0x131) return 'I';
        if (cp == 0x17F) return 'S';
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
            return (cp & 1) ? cp : cp - 1;
        if (cp == 0x138 || cp == 0x149) return cp;
        return (cp & 1) ? cp - 1 : cp;
    }
    if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
    if (cp == 0x3C2) return 0x3A3;
    if (cp >= 0x3AC && cp <= 0x3AF) return cp == 0x3AC ? 0x386 : cp - 37;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    if (cp >= 0x460 && cp <= 0x4FF && cp != 0x482 && !(cp >= 0x483 && cp <= 0x489))
        return (cp & 1) ? cp - 1 : cp;
    if (cp >= 0xFF41 && cp <= 0xFF5A) return cp - 32;
    return cp;
}

uint32_t jx_to_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
    if (cp == 0x178) return 0xFF;
    if (cp >= 0x100 && cp <= 0x17F) {
        if (cp == 0x130) return 'i';
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
            return (cp & 1) ? cp + 1 : cp;
        if (cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
        return (cp & 1) ? cp : cp + 1;
    }
    if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
    if (cp == 0x386) return 0x3AC;
    if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    if (cp >= 0x460 && cp <= 0x4FF && cp != 0x482 && !(cp >= 0x483 && cp <= 0x489))
        return (cp & 1) ? cp : cp + 1;
    if (cp >= 0xFF21 && cp <= 0xFF3A) return cp + 32;
    return cp;
}

/* ---------------------------------------------------------- constructors */

jx_str *jx_str_new(jx_arena *a, const char *s, size_t n) {
    if (n > SIZE_MAX - sizeof(jx_str) - 16) return NULL;
    jx_str *r = jx_arena_alloc(a, sizeof(jx_str) + n + 1);
    if (!r) return NULL;
    if (n) memcpy(r->s, s, n);
    r->s[n] = 0;
    r->len = n;
    r->ncp = jx_utf8_count(s, n);
    return r;
}

bool jx_mkstr(jx_ctx *c, const char *s, size_t n, jx_val *out) {
    if (n > SIZE_MAX / 4) return jx_fail(c, VX_ERANGE, "string too long");
    jx_str *r = jx_alloc(c, sizeof(jx_str) + n + 1);
    if (!r) return false;
    if (n) memcpy(r->s, s, n);
    r->s[n] = 0;
    r->len = n;
    r->ncp = jx_utf8_count(s, n);
    out->type = JX_STR;
    out->flags = 0;
    out->u.s = r;
    return true;
}

bool jx_mkstr_buf(jx_ctx *c, const jx_buf *b, jx_val *out) { return jx_mkstr(c, b->p, b->n, out); }

jx_list *jx_list_new(jx_ctx *c, size_t cap) {
    jx_list *l = jx_alloc(c, sizeof *l);
    if (!l) return NULL;
    l->n = 0;
    l->cap = cap;
    l->v = NULL;
    if (cap) {
        if (cap > SIZE_MAX / sizeof(jx_val) / 2) {
            jx_fail(c, VX_ERANGE, "list too large");
            return NULL;
        }
        l->v = jx_alloc(c, cap * sizeof(jx_val));
        if (!l->v) return NULL;
    }
    return l;
}

bool jx_list_push(jx_ctx *c, jx_list *l, jx_val v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        if (cap > SIZE_MAX / sizeof(jx_val) / 2) return jx_fail(c, VX_ERANGE, "list too large");
        jx_val *nv = jx_alloc(c, cap * sizeof(jx_val));
        if (!nv) return false;
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jx_val));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return true;
}

bool jx_mklist(jx_ctx *c, size_t cap, jx_val *out) {
    jx_list *l = jx_list_new(c, cap);
    if (!l) return false;
    out->type = JX_LIST;
    out->flags = 0;
    out->u.l = l;
    return true;
}

jx_dict *jx_dict_new(jx_ctx *c, size_t cap) {
    jx_dict *d = jx_alloc(c, sizeof *d);
    if (!d) return NULL;
    d->n = 0;
    d->cap = 0;
    d->k = d->v = NULL;
    if (cap) {
        if (cap > SIZE_MAX / sizeof(jx_val) / 4) {
            jx_fail(c, VX_ERANGE, "dict too large");
            return NULL;
        }
        d->k = jx_alloc(c, cap * sizeof(jx_val));
        d->v = jx_alloc(c, cap * sizeof(jx_val));
        if (!d->k || !d->v) return NULL;
        d->cap = cap;
    }
    return d;
}

static bool key_hashable(jx_ctx *c, jx_val k) {
    if (k.type == JX_LIST && !(k.flags & JX_F_TUPLE))
        return jx_fail(c, VX_EINVAL, "unhashable type: 'list'");
    if (k.type == JX_DICT) return jx_fail(c, VX_EINVAL, "unhashable type: 'dict'");
    return true;
}

static bool equal_depth(jx_val a, jx_val b, int depth, uint64_t *work);

/* Linear key search; *work counts the comparisons and bytes it took. */
static bool dict_find(const jx_dict *d, jx_val k, size_t *at, uint64_t *work) {
    for (size_t i = 0; i < d->n; i++) {
        if (equal_depth(d->k[i], k, 0, work)) {
            *at = i;
            return true;
        }
    }
    return false;
}

bool jx_dict_set(jx_ctx *c, jx_dict *d, jx_val k, jx_val v) {
    if (!key_hashable(c, k)) return false;
    uint64_t work = 0;
    size_t at;
    bool found = dict_find(d, k, &at, &work);
    if (!jx_charge(c, work >> 2)) return false;
    if (found) {
        d->v[at] = v;
        return true;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        if (cap > SIZE_MAX / sizeof(jx_val) / 4) return jx_fail(c, VX_ERANGE, "dict too large");
        jx_val *nk = jx_alloc(c, cap * sizeof(jx_val));
        jx_val *nv = jx_alloc(c, cap * sizeof(jx_val));
        if (!nk || !nv) return false;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jx_val));
            memcpy(nv, d->v, d->n * sizeof(jx_val));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return true;
}

bool jx_dict_get(const jx_dict *d, jx_val k, jx_val *out) {
    uint64_t work = 0;
    size_t at;
    if (!dict_find(d, k, &at, &work)) return false;
    *out = d->v[at];
    return true;
}

bool jx_dict_lookup(jx_ctx *c, const jx_dict *d, jx_val k, jx_val *out, bool *found) {
    uint64_t work = 0;
    size_t at;
    *found = dict_find(d, k, &at, &work);
    if (*found) *out = d->v[at];
    return jx_charge(c, work >> 2);
}

bool jx_dict_get_cstr(const jx_dict *d, const char *k, jx_val *out) {
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++) {
        const jx_val *kv = &d->k[i];
        if (kv->type == JX_STR && kv->u.s->len == n && memcmp(kv->u.s->s, k, n) == 0) {
            *out = d->v[i];
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------ truth and order */

const char *jx_type_name(jx_val v) {
    switch ((jx_type)v.type) {
    case JX_UNDEF: return "Undefined";
    case JX_NONE: return "NoneType";
    case JX_BOOL: return "bool";
    case JX_INT: return "int";
    case JX_FLOAT: return "float";
    case JX_STR: return (v.flags & JX_F_SAFE) ? "Markup" : "str";
    case JX_LIST:
        if (v.flags & JX_F_ITER) return "generator";
        return (v.flags & JX_F_TUPLE) ? "tuple" : "list";
    case JX_DICT: return "dict";
    case JX_NS: return "Namespace";
    case JX_FUNC: return "builtin_function_or_method";
    case JX_MACRO: return "Macro";
    case JX_LOOP: return "LoopContext";
    }
    return "object";
}

bool jx_truthy(jx_val v) {
    switch ((jx_type)v.type) {
    case JX_UNDEF:
    case JX_NONE: return false;
    case JX_BOOL: return v.u.b;
    case JX_INT: return v.u.i != 0;
    case JX_FLOAT: return v.u.f != 0.0;
    case JX_STR: return v.u.s->len > 0;
    case JX_LIST: return (v.flags & JX_F_ITER) || v.u.l->n > 0;
    case JX_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

static bool is_num(jx_val v) { return v.type == JX_BOOL || v.type == JX_INT || v.type == JX_FLOAT; }

static int64_t as_i64(jx_val v) { return v.type == JX_BOOL ? (int64_t)v.u.b : v.u.i; }

/* Exact comparison of mixed ints and floats like Python: -1, 0, 1, or 2 when
 * a NaN makes them unordered. */
static int num_cmp(jx_val a, jx_val b) {
    if (a.type != JX_FLOAT && b.type != JX_FLOAT) {
        int64_t x = as_i64(a), y = as_i64(b);
        return x < y ? -1 : x > y;
    }
    if (a.type == JX_FLOAT && b.type == JX_FLOAT) {
        double x = a.u.f, y = b.u.f;
        if (isnan(x) || isnan(y)) return 2;
        return x < y ? -1 : x > y;
    }
    bool flip = a.type == JX_FLOAT;
    int64_t i = as_i64(flip ? b : a);
    double d = flip ? a.u.f : b.u.f;
    int r;
    if (isnan(d)) return 2;
    if (d >= 9223372036854775808.0) {
        r = -1;
    } else if (d < -9223372036854775808.0) {
        r = 1;
    } else {
        double fl = floor(d);
        int64_t t = (int64_t)fl;
        if (i != t) r = i < t ? -1 : 1;
        else r = d > fl ? -1 : 0;
    }
    return flip ? -r : r;
}

static bool equal_depth(jx_val a, jx_val b, int depth, uint64_t *work) {
    (*work)++;
    if (is_num(a) && is_num(b)) return num_cmp(a, b) == 0;
    if (a.type != b.type) return false;
    if (depth > JX_MAX_NEST) return false;
    switch ((jx_type)a.type) {
    case JX_UNDEF:
    case JX_NONE: return true;
    case JX_STR:
        if (a.u.s->len != b.u.s->len) return false;
        *work += a.u.s->len >> 6;
        return memcmp(a.u.s->s, b.u.s->s, a.u.s->len) == 0;
    case JX_LIST: {
        if ((a.flags | b.flags) & JX_F_ITER) return a.u.l == b.u.l;
        if ((a.flags & JX_F_TUPLE) != (b.flags & JX_F_TUPLE)) return false;
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_depth(a.u.l->v[i], b.u.l->v[i], depth + 1, work)) return false;
        return true;
    }
    case JX_DICT: {
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            size_t at;
            if (!dict_find(b.u.d, a.u.d->k[i], &at, work)) return false;
            if (!equal_depth(a.u.d->v[i], b.u.d->v[at], depth + 1, work)) return false;
        }
        return true;
    }
    case JX_FUNC: return a.u.fn == b.u.fn;
    case JX_NS: return a.u.d == b.u.d;
    case JX_MACRO: return a.u.m == b.u.m;
    case JX_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

bool jx_equal(jx_val a, jx_val b) {
    uint64_t work = 0;
    return equal_depth(a, b, 0, &work);
}

bool jx_equal_c(jx_ctx *c, jx_val a, jx_val b, bool *res) {
    uint64_t work = 0;
    *res = equal_depth(a, b, 0, &work);
    return jx_charge(c, work);
}

static int str_cmp(const jx_str *a, const jx_str *b, bool fold) {
    if (!fold) {
        size_t n = a->len < b->len ? a->len : b->len;
        int r = memcmp(a->s, b->s, n);
        if (r) return r < 0 ? -1 : 1;
        return a->len < b->len ? -1 : a->len > b->len;
    }
    size_t i = 0, j = 0;
    while (i < a->len && j < b->len) {
        size_t la, lb;
        uint32_t x = jx_to_lower(jx_utf8_dec(a->s + i, a->len - i, &la));
        uint32_t y = jx_to_lower(jx_utf8_dec(b->s + j, b->len - j, &lb));
        if (x != y) return x < y ? -1 : 1;
        i += la;
        j += lb;
    }
    return (i < a->len) ? 1 : (j < b->len) ? -1 : 0;
}

static bool compare_depth(jx_ctx *c, jx_val a, jx_val b, bool fold, int *res, int depth) {
    if (is_num(a) && is_num(b)) {
        int r = num_cmp(a, b);
        *res = r == 2 ? 0 : r;
        return true;
    }
    if (a.type == JX_STR && b.type == JX_STR) {
        *res = str_cmp(a.u.s, b.u.s, fold);
        return jx_charge(c, (a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len) >> 6);
    }
    if (a.type == JX_LIST && b.type == JX_LIST && !((a.flags | b.flags) & JX_F_ITER) &&
        (a.flags & JX_F_TUPLE) == (b.flags & JX_F_TUPLE)) {
        if (depth > JX_MAX_NEST) return jx_fail(c, VX_ERANGE, "values nested too deeply");
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            bool same;
            if (!jx_equal_c(c, a.u.l->v[i], b.u.l->v[i], &same)) return false;
            if (same) continue;
            return compare_depth(c, a.u.l->v[i], b.u.l->v[i], fold, res, depth + 1);
        }
        *res = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return true;
    }
    if (a.type == JX_UNDEF || b.type == JX_UNDEF) {
        return jx_undef_fail(c, a.type == JX_UNDEF ? a : b);
    }
    return jx_fail(c, VX_EINVAL, "'<' not supported between instances of '%s' and '%s'",
                   jx_type_name(a), jx_type_name(b));
}

bool jx_compare(jx_ctx *c, jx_val a, jx_val b, bool fold_case, int *res) {
    return compare_depth(c, a, b, fold_case, res, 0);
}

/* ------------------------------------------------------------- str/repr */

void jx_fmt_float(double f, char out[40]) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0.0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digits that round-trip, as Python's repr. */
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp + 1;
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            memcpy(o, digits, (size_t)nd);
            o += nd;
        } else if (decpt >= nd) {
            memcpy(o, digits, (size_t)nd);
            o += nd;
            for (int i = nd; i < decpt; i++) *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else {
            memcpy(o, digits, (size_t)decpt);
            o += decpt;
            *o++ = '.';
            memcpy(o, digits + decpt, (size_t)(nd - decpt));
            o += nd - decpt;
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(nd - 1));
            o += nd - 1;
        }
        int ax = exp < 0 ? -exp : exp; /* |exp| <= 324 */
        *o++ = 'e';
        *o++ = exp < 0 ? '-' : '+';
        if (ax >= 100) *o++ = (char)('0' + ax / 100);
        *o++ = (char)('0' + ax / 10 % 10);
        *o++ = (char)('0' + ax % 10);
        *o = 0;
    }
}

/* Characters Python's repr() escapes besides the ASCII controls (a close
 * approximation of "not str.isprintable()"). */
static bool cp_unprintable(uint32_t cp) {
    if (cp < 0x20 || cp == 0x7F) return true;
    if (cp < 0x80) return false;
    return (cp <= 0xA0) || cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
           (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 ||
           (cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF0 && cp <= 0xFFFB) ||
           cp == 0xFFFE || cp == 0xFFFF || (cp >= 0xE0000 && cp <= 0xE007F) || cp >= 0xF0000;
}

static bool write_str_repr(jx_ctx *c, jx_buf *b, const jx_str *s) {
    bool has_sq = memchr(s->s, '\'', s->len) != NULL;
    bool has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    if (!jx_buf_putc(c, b, q)) return false;
    size_t i = 0, start = 0;
    while (i < s->len) {
        size_t l;
        uint32_t cp = jx_utf8_dec(s->s + i, s->len - i, &l);
        char esc[16];
        const char *e = NULL;
        if (cp == (uint32_t)q) e = q == '"' ? "\\\"" : "\\'";
        else if (cp == '\\') e = "\\\\";
        else if (cp == '\n') e = "\\n";
        else if (cp == '\r') e = "\\r";
        else if (cp == '\t') e = "\\t";
        else if (cp >= 0xDC80 && cp <= 0xDCFF) {
            snprintf(esc, sizeof esc, "\\x%02x", cp - 0xDC00);
            e = esc;
        } else if (cp_unprintable(cp)) {
            if (cp < 0x100) snprintf(esc, sizeof esc, "\\x%02x", cp);
            else if (cp < 0x10000) snprintf(esc, sizeof esc, "\\u%04x", cp);
            else snprintf(esc, sizeof esc, "\\U%08x", cp);
            e = esc;
        }
        if (e) {
            if (!jx_buf_put(c, b, s->s + start, i - start) || !jx_buf_puts(c, b, e)) return false;
            start = i + l;
        }
        i += l;
    }
    return jx_buf_put(c, b, s->s + start, s->len - start) && jx_buf_putc(c, b, q);
}

static bool write_repr_depth(jx_ctx *c, jx_buf *b, jx_val v, int depth);

static bool write_dict_repr(jx_ctx *c, jx_buf *b, const jx_dict *d, int depth) {
    if (!jx_buf_putc(c, b, '{')) return false;
    for (size_t i = 0; i < d->n; i++) {
        if (i && !jx_buf_put(c, b, ", ", 2)) return false;
        if (!write_repr_depth(c, b, d->k[i], depth + 1) || !jx_buf_put(c, b, ": ", 2) ||
            !write_repr_depth(c, b, d->v[i], depth + 1))
            return false;
    }
    return jx_buf_putc(c, b, '}');
}

static bool write_scalar(jx_ctx *c, jx_buf *b, jx_val v, int depth) {
    char tmp[48];
    switch ((jx_type)v.type) {
    case JX_NONE: return jx_buf_put(c, b, "None", 4);
    case JX_BOOL: return v.u.b ? jx_buf_put(c, b, "True", 4) : jx_buf_put(c, b, "False", 5);
    case JX_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return jx_buf_puts(c, b, tmp);
    case JX_FLOAT:
        jx_fmt_float(v.u.f, tmp);
        return jx_buf_puts(c, b, tmp);
    case JX_NS:
        return jx_buf_puts(c, b, "<Namespace ") && write_dict_repr(c, b, v.u.d, depth) &&
               jx_buf_putc(c, b, '>');
    case JX_FUNC: return jx_buf_puts(c, b, "<built-in function>");
    case JX_MACRO: {
        const char *name = v.u.m->def->name ? v.u.m->def->name : "caller";
        return jx_buf_puts(c, b, "<Macro '") && jx_buf_puts(c, b, name) && jx_buf_puts(c, b, "'>");
    }
    case JX_LOOP:
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v.u.loop->index0 + 1, v.u.loop->length);
        return jx_buf_puts(c, b, tmp);
    default: return true;
    }
}

static bool write_repr_depth(jx_ctx *c, jx_buf *b, jx_val v, int depth) {
    if (depth > JX_MAX_NEST) return jx_fail(c, VX_ERANGE, "values nested too deeply to print");
    switch ((jx_type)v.type) {
    case JX_UNDEF: return jx_buf_put(c, b, "Undefined", 9);
    case JX_STR:
        if ((v.flags & JX_F_SAFE) && !jx_buf_puts(c, b, "Markup(")) return false;
        return write_str_repr(c, b, v.u.s) && (!(v.flags & JX_F_SAFE) || jx_buf_putc(c, b, ')'));
    case JX_LIST: {
        if (v.flags & JX_F_ITER) return jx_buf_puts(c, b, "<generator object>");
        bool tuple = v.flags & JX_F_TUPLE;
        if (!jx_buf_putc(c, b, tuple ? '(' : '[')) return false;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && !jx_buf_put(c, b, ", ", 2)) return false;
            if (!write_repr_depth(c, b, v.u.l->v[i], depth + 1)) return false;
        }
        if (tuple && v.u.l->n == 1 && !jx_buf_putc(c, b, ',')) return false;
        return jx_buf_putc(c, b, tuple ? ')' : ']');
    }
    case JX_DICT: return write_dict_repr(c, b, v.u.d, depth);
    default: return write_scalar(c, b, v, depth);
    }
}

bool jx_write_repr(jx_ctx *c, jx_buf *b, jx_val v) { return write_repr_depth(c, b, v, 0); }

bool jx_write_str(jx_ctx *c, jx_buf *b, jx_val v) {
    if (v.type == JX_UNDEF) return true;
    if (v.type == JX_STR) return jx_buf_put(c, b, v.u.s->s, v.u.s->len);
    return write_repr_depth(c, b, v, 0);
}

bool jx_to_str(jx_ctx *c, jx_val v, jx_val *out) {
    if (v.type == JX_STR) {
        *out = v;
        return true;
    }
    jx_buf b = {0};
    bool ok = jx_write_str(c, &b, v) && jx_mkstr(c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

/* ------------------------------------------------------------------ JSON */

typedef struct json_opts {
    const char *indent; /* NULL: single line */
    const char *item_sep, *key_sep;
    bool sort_keys;
    bool ensure_ascii;
} json_opts;

/* ensure_ascii=True: everything outside ASCII as \uXXXX (surrogate pairs above
 * the BMP), like Python's json module. */
static bool json_string_ascii(jx_ctx *c, jx_buf *b, const char *s, size_t n) {
    if (!jx_buf_putc(c, b, '"')) return false;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = jx_utf8_dec(s + i, n - i, &l);
        char esc[16];
        if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\') {
            esc[0] = (char)cp;
            esc[1] = 0;
        } else if (cp == '"') strcpy(esc, "\\\"");
        else if (cp == '\\') strcpy(esc, "\\\\");
        else if (cp == '\n') strcpy(esc, "\\n");
        else if (cp == '\r') strcpy(esc, "\\r");
        else if (cp == '\t') strcpy(esc, "\\t");
        else if (cp == '\b') strcpy(esc, "\\b");
        else if (cp == '\f') strcpy(esc, "\\f");
        else if (cp < 0x10000) snprintf(esc, sizeof esc, "\\u%04x", cp);
        else {
            uint32_t v = cp - 0x10000;
            snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        }
        if (!jx_buf_puts(c, b, esc)) return false;
        i += l;
    }
    return jx_buf_putc(c, b, '"');
}

static bool json_string(jx_ctx *c, jx_buf *b, const char *s, size_t n) {
    if (!jx_buf_putc(c, b, '"')) return false;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        char esc[8];
        switch (ch) {
        case '"': strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        case '\b': strcpy(esc, "\\b"); break;
        case '\f': strcpy(esc, "\\f"); break;
        default: snprintf(esc, sizeof esc, "\\u%04x", ch); break;
        }
        if (!jx_buf_put(c, b, s + start, i - start) || !jx_buf_puts(c, b, esc)) return false;
        start = i + 1;
    }
    return jx_buf_put(c, b, s + start, n - start) && jx_buf_putc(c, b, '"');
}

static bool json_newline(jx_ctx *c, jx_buf *b, const json_opts *o, int level) {
    if (!jx_buf_putc(c, b, '\n')) return false;
    for (int i = 0; i < level; i++)
        if (!jx_buf_puts(c, b, o->indent)) return false;
    return true;
}

static bool json_value(jx_ctx *c, jx_buf *b, jx_val v, const json_opts *o, int level);

/* json.dumps turns non-string keys into strings; anything else is a TypeError. */
static bool json_key(jx_ctx *c, jx_buf *b, jx_val k, const json_opts *o) {
    char tmp[48];
    switch (k.type) {
    case JX_STR:
        return o->ensure_ascii ? json_string_ascii(c, b, k.u.s->s, k.u.s->len)
                               : json_string(c, b, k.u.s->s, k.u.s->len);
    case JX_NONE: return jx_buf_puts(c, b, "\"null\"");
    case JX_BOOL: return jx_buf_puts(c, b, k.u.b ? "\"true\"" : "\"false\"");
    case JX_INT:
        snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i);
        return jx_buf_puts(c, b, tmp);
    case JX_FLOAT:
        if (isnan(k.u.f)) return jx_buf_puts(c, b, "\"NaN\"");
        if (isinf(k.u.f)) return jx_buf_puts(c, b, k.u.f < 0 ? "\"-Infinity\"" : "\"Infinity\"");
        tmp[0] = '"';
        jx_fmt_float(k.u.f, tmp + 1);
        strcat(tmp, "\"");
        return jx_buf_puts(c, b, tmp);
    default:
        return jx_fail(c, VX_EINVAL, "keys must be str, int, float, bool or None, not %s",
                       jx_type_name(k));
    }
}

/* Stable insertion order of indices by key, for sort_keys. */
static bool sorted_keys(jx_ctx *c, const jx_dict *d, size_t **out) {
    size_t *idx = jx_alloc(c, (d->n ? d->n : 1) * sizeof(size_t));
    if (!idx) return false;
    for (size_t i = 0; i < d->n; i++) {
        size_t j = i;
        while (j > 0) {
            int r;
            if (!jx_compare(c, d->k[idx[j - 1]], d->k[i], false, &r)) return false;
            if (r <= 0) break;
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    *out = idx;
    return true;
}

static bool json_value(jx_ctx *c, jx_buf *b, jx_val v, const json_opts *o, int level) {
    char tmp[48];
    if (level > JX_MAX_NEST) return jx_fail(c, VX_ERANGE, "values nested too deeply for tojson");
    switch ((jx_type)v.type) {
    case JX_NONE: return jx_buf_put(c, b, "null", 4);
    case JX_BOOL: return v.u.b ? jx_buf_put(c, b, "true", 4) : jx_buf_put(c, b, "false", 5);
    case JX_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); return jx_buf_puts(c, b, tmp);
    case JX_FLOAT:
        if (isnan(v.u.f)) return jx_buf_puts(c, b, "NaN");
        if (isinf(v.u.f)) return jx_buf_puts(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        jx_fmt_float(v.u.f, tmp);
        return jx_buf_puts(c, b, tmp);
    case JX_STR:
        return o->ensure_ascii ? json_string_ascii(c, b, v.u.s->s, v.u.s->len)
                               : json_string(c, b, v.u.s->s, v.u.s->len);
    case JX_LIST: {
        if (v.flags & JX_F_ITER) break;
        const jx_list *l = v.u.l;
        if (l->n == 0) return jx_buf_put(c, b, "[]", 2);
        if (!jx_buf_putc(c, b, '[')) return false;
        if (o->indent && !json_newline(c, b, o, level + 1)) return false;
        for (size_t i = 0; i < l->n; i++) {
            if (i) {
                if (!jx_buf_puts(c, b, o->item_sep)) return false;
                if (o->indent && !json_newline(c, b, o, level + 1)) return false;
            }
            if (!json_value(c, b, l->v[i], o, level + 1)) return false;
        }
        if (o->indent && !json_newline(c, b, o, level)) return false;
        return jx_buf_putc(c, b, ']');
    }
    case JX_DICT: {
        const jx_dict *d = v.u.d;
        if (d->n == 0) return jx_buf_put(c, b, "{}", 2);
        size_t *order = NULL;
        if (o->sort_keys && !sorted_keys(c, d, &order)) return false;
        if (!jx_buf_putc(c, b, '{')) return false;
        if (o->indent && !json_newline(c, b, o, level + 1)) return false;
        for (size_t i = 0; i < d->n; i++) {
            size_t k = order ? order[i] : i;
            if (i) {
                if (!jx_buf_puts(c, b, o->item_sep)) return false;
                if (o->indent && !json_newline(c, b, o, level + 1)) return false;
            }
            if (!json_key(c, b, d->k[k], o) || !jx_buf_puts(c, b, o->key_sep) ||
                !json_value(c, b, d->v[k], o, level + 1))
                return false;
        }
        if (o->indent && !json_newline(c, b, o, level)) return false;
        return jx_buf_putc(c, b, '}');
    }
    default: break;
    }
    return jx_fail(c, VX_EINVAL, "Object of type %s is not JSON serializable", jx_type_name(v));
}

bool jx_write_json(jx_ctx *c, jx_buf *b, jx_val v, const char *indent, const char *item_sep,
                   const char *key_sep, bool sort_keys, bool ensure_ascii) {
    json_opts o;
    o.ensure_ascii = ensure_ascii;
    o.indent = indent;
    o.item_sep = item_sep ? item_sep : (indent ? "," : ", ");
    o.key_sep = key_sep ? key_sep : ": ";
    o.sort_keys = sort_keys;
    return json_value(c, b, v, &o, 0);
}

/* ------------------------------------------------------------- iteration */

bool jx_iterate(jx_ctx *c, jx_val v, jx_list **out) {
    /* callers walk the result: charge for it here */
    if (v.type == JX_LIST && !jx_charge(c, v.u.l->n)) return false;
    if (v.type == JX_DICT && !jx_charge(c, v.u.d->n)) return false;
    switch ((jx_type)v.type) {
    case JX_LIST: *out = v.u.l; return true;
    case JX_UNDEF: return (*out = jx_list_new(c, 0)) != NULL;
    case JX_DICT: {
        jx_list *l = jx_list_new(c, v.u.d->n);
        if (!l) return false;
        for (size_t i = 0; i < v.u.d->n; i++) l->v[i] = v.u.d->k[i];
        l->n = v.u.d->n;
        *out = l;
        return true;
    }
    case JX_STR: {
        const jx_str *s = v.u.s;
        jx_list *l = jx_list_new(c, s->ncp);
        if (!l) return false;
        for (size_t i = 0; i < s->len;) {
            size_t n;
            jx_utf8_dec(s->s + i, s->len - i, &n);
            jx_val ch;
            if (!jx_mkstr(c, s->s + i, n, &ch) || !jx_list_push(c, l, ch)) return false;
            i += n;
        }
        *out = l;
        return true;
    }
    default:
        return jx_fail(c, VX_EINVAL, "'%s' object is not iterable", jx_type_name(v));
    }
}
