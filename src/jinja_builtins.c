/*
 * jinja_builtins.c - jinja2's built-in filters and tests, plus HF's tojson
 * override (json.dumps with ensure_ascii=False). Each follows the jinja2
 * 3.1 implementation's observable behavior, including its quirks: sort,
 * unique, min and max ignore case by default; select/map/unique/items
 * return generators (always true, no length, printed as an object);
 * "42.5"|int is 42. (Unlike Python's, our generators can be iterated twice.)
 */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef bool (*filter_fn)(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out);

#define NARGS(p) ((int)(sizeof(p) / sizeof((p)[0])))
#define BIND(fname, params, vals, set) jx_bind(c, fname, a, params, NARGS(params), vals, set)

static bool no_args(jx_ctx *c, const char *fname, const jx_args *a) {
    if (a->npos || a->nkw) return jx_fail(c, VX_EINVAL, "%s() takes no arguments", fname);
    return true;
}

/* Python str() as a value (soft_str keeps Markup). */
static bool soft_str(jx_ctx *c, jx_val v, jx_val *out) { return jx_to_str(c, v, out); }

static bool mark_iter(jx_val *v) {
    v->flags = JX_F_ITER;
    return true;
}

/* jinja2's make_attrgetter: "a.b.0" walks getitem per part, digits as ints. */
static bool attr_get(jx_ctx *c, jx_val item, jx_val attr, jx_val *out) {
    if (attr.type != JX_STR) return jx_getitem(c, item, attr, out);
    const jx_str *s = attr.u.s;
    size_t i = 0;
    for (;;) {
        const char *dot = memchr(s->s + i, '.', s->len - i);
        size_t e = dot ? (size_t)(dot - s->s) : s->len;
        bool digits = e > i;
        for (size_t k = i; k < e; k++) digits = digits && s->s[k] >= '0' && s->s[k] <= '9';
        jx_val key;
        if (digits && e - i < 18) key = jx_int(strtoll(s->s + i, NULL, 10));
        else if (!jx_mkstr(c, s->s + i, e - i, &key)) return false;
        if (!jx_getitem(c, item, key, &item)) return false;
        if (!dot) break;
        i = e + 1;
    }
    *out = item;
    return true;
}

static bool lowered(jx_ctx *c, jx_val v, bool fold, jx_val *out) {
    if (fold && v.type == JX_STR) return jx_str_case(c, v, JX_CASE_LOWER, out);
    *out = v;
    return true;
}

/* Stable merge sort of items by keys (Python's sorted(); reverse keeps the
 * original order of equal elements, like Python). */
static bool sort_by(jx_ctx *c, jx_val *items, jx_val *keys, size_t n, bool fold, bool reverse) {
    if (n < 2) return true;
    size_t *idx = jx_alloc(c, n * sizeof(size_t)), *tmp = jx_alloc(c, n * sizeof(size_t));
    jx_val *copy = jx_alloc(c, n * sizeof(jx_val));
    if (!idx || !tmp || !copy) return false;
    for (size_t i = 0; i < n; i++) idx[i] = i;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r;
                if (!jx_step(c) || !jx_compare(c, keys[idx[j]], keys[idx[i]], fold, &r))
                    return false;
                if (reverse) r = -r;
                tmp[k++] = r < 0 ? idx[j++] : idx[i++];
            }
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof(size_t));
    }
    memcpy(copy, items, n * sizeof(jx_val));
    for (size_t i = 0; i < n; i++) items[i] = copy[idx[i]];
    return true;
}

static bool copy_list(jx_ctx *c, jx_val v, jx_val *out) {
    jx_list *src;
    if (!jx_iterate(c, v, &src) || !jx_mklist(c, src->n, out)) return false;
    if (src->n) memcpy(out->u.l->v, src->v, src->n * sizeof(jx_val));
    out->u.l->n = src->n;
    return true;
}

/* ------------------------------------------------------------- filters */

static bool f_abs(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    if (!no_args(c, "abs", a)) return false;
    if (v.type == JX_FLOAT) *out = jx_float(fabs(v.u.f));
    else if (jx_int_like(v) && jx_int_of(v) != INT64_MIN) *out = jx_int(llabs(jx_int_of(v)));
    else if (v.type == JX_UNDEF) return jx_undef_fail(c, v);
    else return jx_fail(c, VX_EINVAL, "bad operand type for abs(): '%s'", jx_type_name(v));
    return true;
}

static bool f_attr(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"name"};
    jx_val p[1];
    bool set[1];
    const jx_str *name;
    if (!BIND("attr", P, p, set) || !jx_want_str(c, p[0], "attribute name", &name)) return false;
    if (v.type == JX_DICT) { /* Python-level getattr: dict keys are not attributes */
        jx_val probe;
        if (!jx_getattr(c, v, name->s, &probe)) return false;
        *out = probe.type == JX_FUNC ? probe : jx_undef(name->s);
        return true;
    }
    return jx_getattr(c, v, name->s, out);
}

static bool f_case(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out, int mode, const char *name) {
    jx_val s;
    return no_args(c, name, a) && soft_str(c, v, &s) && jx_str_case(c, s, mode, out);
}
static bool f_upper(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return f_case(c, v, a, out, JX_CASE_UPPER, "upper");
}
static bool f_lower(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return f_case(c, v, a, out, JX_CASE_LOWER, "lower");
}
static bool f_capitalize(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return f_case(c, v, a, out, JX_CASE_CAPITALIZE, "capitalize");
}

/* jinja2's title: words start after runs of -, whitespace, (, {, [ or <. */
static bool f_title(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_val s;
    if (!no_args(c, "title", a) || !soft_str(c, v, &s)) return false;
    const jx_str *str = s.u.s;
    char *buf = jx_alloc(c, str->len * 2 + 1);
    if (!buf) return false;
    size_t k = 0;
    bool word_start = true;
    for (size_t i = 0; i < str->len;) {
        size_t l;
        uint32_t cp = jx_utf8_dec(str->s + i, str->len - i, &l);
        bool sep = jx_is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        uint32_t r = sep ? cp : word_start ? jx_to_upper(cp) : jx_to_lower(cp);
        word_start = sep;
        k += jx_utf8_enc(r, buf + k);
        i += l;
    }
    return jx_mkstr_like(c, s, buf, k, out);
}

static bool f_center(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"width"};
    jx_val p[1], s;
    bool set[1];
    if (!BIND("center", P, p, set) || !soft_str(c, v, &s)) return false;
    jx_val width = set[0] ? p[0] : jx_int(80);
    jx_args ma = {1, &width, 0, NULL, NULL};
    jx_func fn = {JXM_CENTER, s};
    return jx_call_builtin(c, &fn, &ma, out);
}

static bool f_length(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    if (!no_args(c, "length", a)) return false;
    switch (v.type) {
    case JX_STR: *out = jx_int((int64_t)v.u.s->ncp); return true;
    case JX_LIST:
        if (v.flags & JX_F_ITER) break;
        *out = jx_int((int64_t)v.u.l->n);
        return true;
    case JX_DICT: *out = jx_int((int64_t)v.u.d->n); return true;
    case JX_UNDEF: *out = jx_int(0); return true;
    default: break;
    }
    return jx_fail(c, VX_EINVAL, "object of type '%s' has no len()", jx_type_name(v));
}

static bool f_default(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"default_value", "boolean"};
    jx_val p[2];
    bool set[2];
    if (!BIND("default", P, p, set)) return false;
    jx_val def = p[0];
    if (!set[0] && !jx_mkstr(c, "", 0, &def)) return false;
    *out = (v.type == JX_UNDEF || (jx_truthy(p[1]) && !jx_truthy(v))) ? def : v;
    return true;
}

static bool f_dictsort(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"case_sensitive", "by", "reverse"};
    jx_val p[3];
    bool set[3];
    if (!BIND("dictsort", P, p, set)) return false;
    int pos = 0;
    if (set[1]) {
        const jx_str *by;
        if (!jx_want_str(c, p[1], "by", &by)) return false;
        if (!strcmp(by->s, "value")) pos = 1;
        else if (strcmp(by->s, "key"))
            return jx_fail(c, VX_EINVAL, "You can only sort by either \"key\" or \"value\"");
    }
    if (v.type != JX_DICT)
        return jx_fail(c, VX_EINVAL, "dictsort expects a mapping, got %s", jx_type_name(v));
    const jx_dict *d = v.u.d;
    if (!jx_mklist(c, d->n, out)) return false;
    jx_val *keys = jx_alloc(c, (d->n ? d->n : 1) * sizeof(jx_val));
    if (!keys) return false;
    for (size_t i = 0; i < d->n; i++) {
        jx_val pair[2] = {d->k[i], d->v[i]};
        if (!jx_mktuple(c, pair, 2, &out->u.l->v[i])) return false;
        keys[i] = pair[pos];
    }
    out->u.l->n = d->n;
    return sort_by(c, out->u.l->v, keys, d->n, !jx_truthy(p[0]), jx_truthy(p[2]));
}

static bool f_escape(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return no_args(c, "escape", a) && jx_escape(c, v, out);
}

static bool f_forceescape(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_val s;
    if (!no_args(c, "forceescape", a) || !soft_str(c, v, &s)) return false;
    s.flags = 0;
    return jx_escape(c, s, out);
}

static bool f_safe(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    if (!no_args(c, "safe", a) || !soft_str(c, v, out)) return false;
    out->flags = JX_F_SAFE;
    return true;
}

static bool f_string(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return no_args(c, "string", a) && soft_str(c, v, out);
}

static bool f_first(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_list *l;
    if (!no_args(c, "first", a) || !jx_iterate(c, v, &l)) return false;
    *out = l->n ? l->v[0] : jx_undef("first");
    return true;
}

static bool f_last(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_list *l;
    if (!no_args(c, "last", a)) return false;
    if (v.type == JX_LIST && (v.flags & JX_F_ITER))
        return jx_fail(c, VX_EINVAL, "'generator' object is not reversible");
    if (!jx_iterate(c, v, &l)) return false;
    *out = l->n ? l->v[l->n - 1] : jx_undef("last");
    return true;
}

/* Python's float(str): optional whitespace, sign, digits with single
 * underscores, inf/nan. */
static bool parse_float(const jx_str *s, double *out) {
    char buf[128];
    size_t b = 0, e = s->len, k = 0;
    while (b < e && jx_is_space((unsigned char)s->s[b])) b++;
    while (e > b && jx_is_space((unsigned char)s->s[e - 1])) e--;
    if (b == e || e - b >= sizeof buf) return false;
    for (size_t i = b; i < e; i++) {
        char ch = s->s[i];
        if (ch == '_') {
            if (i == b || i + 1 == e || !(s->s[i - 1] >= '0' && s->s[i - 1] <= '9') ||
                !(s->s[i + 1] >= '0' && s->s[i + 1] <= '9'))
                return false;
            continue;
        }
        if (!strchr("0123456789+-.eEinfatyINFATY", ch)) return false;
        buf[k++] = ch;
    }
    buf[k] = 0;
    if (!strncmp(buf, "0x", 2) || !strncmp(buf, "0X", 2)) return false;
    char *end;
    *out = strtod(buf, &end);
    return *end == 0;
}

/* Python's int(str, base): whitespace, sign, digits with single underscores,
 * an optional matching prefix (0x for base 16, ...). */
static bool parse_int(const jx_str *s, int base, int64_t *out) {
    size_t b = 0, e = s->len;
    while (b < e && jx_is_space((unsigned char)s->s[b])) b++;
    while (e > b && jx_is_space((unsigned char)s->s[e - 1])) e--;
    bool neg = false;
    if (b < e && (s->s[b] == '+' || s->s[b] == '-')) neg = s->s[b++] == '-';
    if (e - b >= 2 && s->s[b] == '0') {
        char p = (char)(s->s[b + 1] | 0x20);
        if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) {
            b += 2;
            if (b < e && s->s[b] == '_') b++;
        }
    }
    if (b == e) return false;
    uint64_t v = 0;
    for (size_t i = b; i < e; i++) {
        char ch = s->s[i];
        if (ch == '_' && i > b && i + 1 < e && s->s[i - 1] != '_') continue;
        int d = ch >= '0' && ch <= '9'                     ? ch - '0'
                : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10
                                                           : 99;
        if (d >= base) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0)) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool f_int(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"default", "base"};
    jx_val p[2];
    bool set[2];
    if (!BIND("int", P, p, set)) return false;
    int64_t base = 10;
    if (set[1] && !jx_want_int(c, p[1], "base", &base)) return false;
    jx_val def = set[0] ? p[0] : jx_int(0);
    if (v.type == JX_UNDEF) return jx_undef_fail(c, v);
    if (jx_int_like(v)) {
        *out = jx_int(jx_int_of(v));
        return true;
    }
    double f;
    if (v.type == JX_FLOAT) {
        f = v.u.f;
    } else if (v.type == JX_STR) {
        int64_t i;
        if (base >= 2 && base <= 36 && parse_int(v.u.s, (int)base, &i)) {
            *out = jx_int(i);
            return true;
        }
        if (!parse_float(v.u.s, &f)) {
            *out = def;
            return true;
        }
    } else {
        *out = def;
        return true;
    }
    if (isnan(f)) {
        *out = def;
        return true;
    }
    if (isinf(f) || f >= 9223372036854775808.0 || f < -9223372036854775808.0)
        return jx_fail(c, VX_ERANGE, "cannot convert float %s to integer",
                       isinf(f) ? "infinity" : "value");
    *out = jx_int((int64_t)f);
    return true;
}

static bool f_float(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"default"};
    jx_val p[1];
    bool set[1];
    if (!BIND("float", P, p, set)) return false;
    double f;
    if (v.type == JX_UNDEF) return jx_undef_fail(c, v);
    if (jx_is_num(v)) *out = jx_float(jx_num_f(v));
    else if (v.type == JX_STR && parse_float(v.u.s, &f)) *out = jx_float(f);
    else *out = set[0] ? p[0] : jx_float(0.0);
    return true;
}

static bool f_format(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_val s, args;
    if (!soft_str(c, v, &s)) return false;
    if (a->npos && a->nkw)
        return jx_fail(c, VX_EINVAL,
                       "can't handle positional and keyword arguments at the same time");
    if (a->nkw) {
        jx_dict *d = jx_dict_new(c, (size_t)a->nkw);
        if (!d) return false;
        for (int i = 0; i < a->nkw; i++) {
            jx_val k;
            if (!jx_mkstr(c, a->kwn[i], strlen(a->kwn[i]), &k) || !jx_dict_set(c, d, k, a->kwv[i]))
                return false;
        }
        args.type = JX_DICT;
        args.flags = 0;
        args.u.d = d;
    } else if (!jx_mktuple(c, a->pos, (size_t)a->npos, &args)) {
        return false;
    }
    return jx_percent_format(c, s, args, out);
}

static bool put_indent(jx_ctx *c, jx_buf *b, jx_val ind) {
    if (ind.type == JX_STR) return jx_buf_put(c, b, ind.u.s->s, ind.u.s->len);
    for (int64_t i = 0; i < jx_int_of(ind); i++)
        if (!jx_buf_putc(c, b, ' ')) return false;
    return true;
}

static bool f_indent(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"width", "first", "blank"};
    jx_val p[3], s, nl, text, lines;
    bool set[3];
    if (!BIND("indent", P, p, set) || !soft_str(c, v, &s)) return false;
    jx_val ind = set[0] ? p[0] : jx_int(4);
    if (ind.type != JX_STR && !jx_int_like(ind))
        return jx_fail(c, VX_EINVAL, "indent width must be an int or str");
    if (jx_int_like(ind) && jx_int_of(ind) > 10000) return jx_fail(c, VX_ERANGE, "indent too wide");
    /* jinja2 appends "\n" before splitlines() so a trailing newline survives */
    if (!jx_mkstr(c, "\n", 1, &nl) || !jx_binop(c, OP_ADD, s, nl, &text)) return false;
    jx_func split = {JXM_SPLITLINES, text};
    jx_args none = {0, NULL, 0, NULL, NULL};
    if (!jx_call_builtin(c, &split, &none, &lines)) return false;
    const jx_list *l = lines.u.l;
    jx_buf b = {0};
    bool ok = !jx_truthy(p[1]) || put_indent(c, &b, ind);
    for (size_t i = 0; ok && i < l->n; i++) {
        const jx_str *line = l->v[i].u.s;
        if (i > 0) ok = jx_buf_putc(c, &b, '\n');
        if (ok && i > 0 && (jx_truthy(p[2]) || line->len)) ok = put_indent(c, &b, ind);
        ok = ok && jx_buf_put(c, &b, line->s, line->len);
    }
    ok = ok && jx_mkstr_like(c, s, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

static bool f_items(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    if (!no_args(c, "items", a)) return false;
    if (v.type == JX_UNDEF) return jx_mklist(c, 0, out) && mark_iter(out);
    if (v.type != JX_DICT) return jx_fail(c, VX_EINVAL, "Can only get item pairs from a mapping.");
    jx_val fn, list;
    jx_args none = {0, NULL, 0, NULL, NULL};
    if (!jx_getattr(c, v, "items", &fn) || !jx_call(c, fn, &none, &list)) return false;
    *out = list;
    return mark_iter(out);
}

static bool f_join(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"d", "attribute"};
    jx_val p[2], sep;
    bool set[2];
    jx_list *l;
    if (!BIND("join", P, p, set) || !jx_iterate(c, v, &l)) return false;
    if (set[0]) {
        if (!soft_str(c, p[0], &sep)) return false;
    } else if (!jx_mkstr(c, "", 0, &sep)) {
        return false;
    }
    jx_buf b = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < l->n; i++) {
        jx_val item = l->v[i];
        if (set[1] && p[1].type != JX_NONE) ok = attr_get(c, item, p[1], &item);
        if (ok && i) ok = jx_buf_put(c, &b, sep.u.s->s, sep.u.s->len);
        ok = ok && jx_write_str(c, &b, item);
    }
    ok = ok && jx_mkstr(c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

static bool f_list(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return no_args(c, "list", a) && copy_list(c, v, out);
}

static bool f_map(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_list *l;
    if (!jx_mklist(c, 0, out)) return false;
    mark_iter(out);
    if (!jx_truthy(v)) return true;
    if (!jx_iterate(c, v, &l)) return false;
    if (a->npos == 0) {
        jx_val attr = jx_undef(NULL), def = jx_none();
        for (int k = 0; k < a->nkw; k++) {
            if (!strcmp(a->kwn[k], "attribute")) attr = a->kwv[k];
            else if (!strcmp(a->kwn[k], "default")) def = a->kwv[k];
            else return jx_fail(c, VX_EINVAL, "Unexpected keyword argument '%s'", a->kwn[k]);
        }
        if (attr.type == JX_UNDEF)
            return jx_fail(c, VX_EINVAL, "map requires a filter name or attribute=");
        for (size_t i = 0; i < l->n; i++) {
            jx_val r;
            if (!attr_get(c, l->v[i], attr, &r)) return false;
            if (r.type == JX_UNDEF && def.type != JX_NONE) r = def;
            if (!jx_list_push(c, out->u.l, r)) return false;
        }
        return true;
    }
    const jx_str *name;
    if (!jx_want_str(c, a->pos[0], "filter name", &name)) return false;
    jx_args rest = {a->npos - 1, a->pos + 1, a->nkw, a->kwn, a->kwv};
    for (size_t i = 0; i < l->n; i++) {
        jx_val r;
        if (!jx_step(c) || !jx_apply_filter(c, name->s, l->v[i], &rest, &r) ||
            !jx_list_push(c, out->u.l, r))
            return false;
    }
    return true;
}

static bool select_impl(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out, bool attr, bool keep) {
    jx_list *l;
    if (!jx_mklist(c, 0, out)) return false;
    mark_iter(out);
    if (!jx_truthy(v)) return true;
    if (!jx_iterate(c, v, &l)) return false;
    int off = attr ? 1 : 0;
    if (attr && a->npos < 1) return jx_fail(c, VX_EINVAL, "Missing parameter for attribute name");
    const jx_str *test = NULL;
    if (a->npos > off && !jx_want_str(c, a->pos[off], "test name", &test)) return false;
    jx_args rest = {a->npos > off + 1 ? a->npos - off - 1 : 0, a->pos + off + 1, a->nkw, a->kwn,
                    a->kwv};
    for (size_t i = 0; i < l->n; i++) {
        jx_val item = l->v[i], probe = item;
        bool r;
        if (!jx_step(c)) return false;
        if (attr && !attr_get(c, item, a->pos[0], &probe)) return false;
        if (test) {
            if (!jx_apply_test(c, test->s, probe, &rest, &r)) return false;
        } else {
            r = jx_truthy(probe);
        }
        if (r == keep && !jx_list_push(c, out->u.l, item)) return false;
    }
    return true;
}
static bool f_select(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return select_impl(c, v, a, out, false, true);
}
static bool f_reject(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return select_impl(c, v, a, out, false, false);
}
static bool f_selectattr(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return select_impl(c, v, a, out, true, true);
}
static bool f_rejectattr(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return select_impl(c, v, a, out, true, false);
}

/* Keys for sort/unique/min/max: the attribute (comma-separated for sort) of
 * each item, lowercased unless case_sensitive. */
static bool make_keys(jx_ctx *c, const jx_list *l, jx_val attr, bool fold, bool multi,
                      jx_val **out) {
    jx_val *keys = jx_alloc(c, (l->n ? l->n : 1) * sizeof(jx_val));
    if (!keys) return false;
    bool has_attr = attr.type != JX_UNDEF && attr.type != JX_NONE;
    for (size_t i = 0; i < l->n; i++) {
        jx_val k = l->v[i];
        if (has_attr && multi && attr.type == JX_STR && memchr(attr.u.s->s, ',', attr.u.s->len)) {
            jx_val parts, list;
            jx_func split = {JXM_SPLIT, attr};
            jx_val comma;
            if (!jx_mkstr(c, ",", 1, &comma)) return false;
            jx_args sa = {1, &comma, 0, NULL, NULL};
            if (!jx_call_builtin(c, &split, &sa, &parts) || !jx_mklist(c, parts.u.l->n, &list))
                return false;
            for (size_t j = 0; j < parts.u.l->n; j++) {
                jx_val part;
                if (!attr_get(c, k, parts.u.l->v[j], &part) || !lowered(c, part, fold, &part) ||
                    !jx_list_push(c, list.u.l, part))
                    return false;
            }
            k = list;
        } else {
            if (has_attr && !attr_get(c, k, attr, &k)) return false;
            if (!lowered(c, k, fold, &k)) return false;
        }
        keys[i] = k;
    }
    *out = keys;
    return true;
}

static bool f_sort(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"reverse", "case_sensitive", "attribute"};
    jx_val p[3], *keys;
    bool set[3];
    if (!BIND("sort", P, p, set) || !copy_list(c, v, out)) return false;
    if (!make_keys(c, out->u.l, p[2], !jx_truthy(p[1]), true, &keys)) return false;
    return sort_by(c, out->u.l->v, keys, out->u.l->n, false, jx_truthy(p[0]));
}

static bool f_unique(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"case_sensitive", "attribute"};
    jx_val p[2], *keys;
    bool set[2];
    jx_list *l;
    if (!BIND("unique", P, p, set) || !jx_iterate(c, v, &l)) return false;
    if (!make_keys(c, l, p[1], !jx_truthy(p[0]), false, &keys) || !jx_mklist(c, 0, out))
        return false;
    mark_iter(out);
    for (size_t i = 0; i < l->n; i++) {
        if (keys[i].type == JX_DICT || (keys[i].type == JX_LIST && !(keys[i].flags & JX_F_TUPLE)))
            return jx_fail(c, VX_EINVAL, "unhashable type: '%s'", jx_type_name(keys[i]));
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            if (!jx_equal_c(c, keys[i], keys[j], &seen)) return false;
        if (!seen && !jx_list_push(c, out->u.l, l->v[i])) return false;
        if (!jx_step(c)) return false;
    }
    return true;
}

static bool min_max(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out, bool want_max) {
    static const char *const P[] = {"case_sensitive", "attribute"};
    jx_val p[2], *keys;
    bool set[2];
    jx_list *l;
    if (!BIND(want_max ? "max" : "min", P, p, set) || !jx_iterate(c, v, &l)) return false;
    if (l->n == 0) {
        *out = jx_undef("No aggregated item, sequence was empty.");
        return true;
    }
    bool fold = !jx_truthy(p[0]);
    if (!make_keys(c, l, p[1], false, false, &keys)) return false;
    size_t best = 0;
    for (size_t i = 1; i < l->n; i++) {
        int r;
        if (!jx_compare(c, keys[i], keys[best], fold, &r)) return false;
        if (want_max ? r > 0 : r < 0) best = i;
    }
    *out = l->v[best];
    return true;
}
static bool f_max(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return min_max(c, v, a, out, true);
}
static bool f_min(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    return min_max(c, v, a, out, false);
}

static bool f_replace(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"old", "new", "count"};
    jx_val p[3], s, o, n;
    bool set[3];
    int64_t count = -1;
    if (!BIND("replace", P, p, set) || !soft_str(c, v, &s) || !soft_str(c, p[0], &o) ||
        !soft_str(c, p[1], &n))
        return false;
    if (set[2] && p[2].type != JX_NONE && !jx_want_int(c, p[2], "count", &count)) return false;
    s.flags = 0; /* str(s).replace(...) */
    return jx_str_replace(c, s, o, n, count, out);
}

static bool f_reverse(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    if (!no_args(c, "reverse", a)) return false;
    if (v.type == JX_STR) {
        jx_val step = jx_int(-1);
        return jx_slice(c, v, jx_none(), jx_none(), step, out);
    }
    bool was_iter = v.type == JX_LIST && (v.flags & JX_F_ITER);
    if (!copy_list(c, v, out)) return false;
    jx_list *l = out->u.l;
    for (size_t i = 0; i < l->n / 2; i++) {
        jx_val t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    /* reversed() gives an iterator; a generator falls back to a list */
    out->flags = was_iter ? 0 : JX_F_ITER;
    return true;
}

static bool f_round(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"precision", "method"};
    jx_val p[2];
    bool set[2];
    int64_t prec = 0;
    if (!BIND("round", P, p, set)) return false;
    if (set[0] && !jx_want_int(c, p[0], "precision", &prec)) return false;
    const char *method = "common";
    if (set[1]) {
        const jx_str *m;
        if (!jx_want_str(c, p[1], "method", &m)) return false;
        method = m->s;
    }
    bool common = !strcmp(method, "common");
    if (!common && strcmp(method, "ceil") && strcmp(method, "floor"))
        return jx_fail(c, VX_EINVAL, "method must be common, ceil or floor");
    if (v.type == JX_UNDEF) return jx_undef_fail(c, v);
    if (!jx_is_num(v))
        return jx_fail(c, VX_EINVAL, "type %s doesn't define __round__ method", jx_type_name(v));
    if (prec > 300) prec = 300;
    if (prec < -300) prec = -300;
    if (common && v.type != JX_FLOAT && prec >= 0) {
        *out = jx_int(jx_int_of(v));
        return true;
    }
    double x = jx_num_f(v), r;
    if (common && prec >= 0 && isfinite(x)) {
        /* correctly rounded decimal, ties to even: what Python's round() does */
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        r = strtod(buf, NULL);
    } else {
        double scale = pow(10.0, (double)prec);
        r = common ? nearbyint(x * scale) / scale
                   : (method[0] == 'c' ? ceil(x * scale) : floor(x * scale)) / scale;
    }
    *out = (common && v.type != JX_FLOAT) ? jx_int((int64_t)r) : jx_float(r);
    return true;
}

static bool f_sum(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"attribute", "start"};
    jx_val p[2];
    bool set[2];
    jx_list *l;
    if (!BIND("sum", P, p, set) || !jx_iterate(c, v, &l)) return false;
    jx_val acc = set[1] ? p[1] : jx_int(0);
    for (size_t i = 0; i < l->n; i++) {
        jx_val item = l->v[i];
        if (set[0] && p[0].type != JX_NONE && !attr_get(c, item, p[0], &item)) return false;
        if (!jx_binop(c, OP_ADD, acc, item, &acc)) return false;
    }
    *out = acc;
    return true;
}

/* HF's override: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False). */
static bool f_tojson(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
    jx_val p[4];
    bool set[4];
    if (!BIND("tojson", P, p, set)) return false;
    jx_buf b = {0};
    const char *item_sep = NULL, *key_sep = NULL, *indent = NULL;
    bool ok = true;
    if (set[1] && p[1].type == JX_STR) {
        indent = p[1].u.s->s;
    } else if (set[1] && jx_int_like(p[1])) { /* json.dumps: that many spaces */
        int64_t width = jx_int_of(p[1]) < 0 ? 0 : jx_int_of(p[1]);
        if (width > 1000) return jx_fail(c, VX_ERANGE, "tojson indent too wide");
        char *spaces = jx_alloc(c, (size_t)width + 1);
        if (!spaces) return false;
        memset(spaces, ' ', (size_t)width);
        spaces[width] = 0;
        indent = spaces;
    } else if (set[1] && p[1].type != JX_NONE) {
        return jx_fail(c, VX_EINVAL, "tojson indent must be an int or a string");
    }
    if (ok && set[2] && p[2].type != JX_NONE) {
        jx_list *seps;
        ok = jx_iterate(c, p[2], &seps);
        if (ok && (seps->n != 2 || seps->v[0].type != JX_STR || seps->v[1].type != JX_STR))
            ok = jx_fail(c, VX_EINVAL, "separators must be a pair of strings");
        if (ok) {
            item_sep = seps->v[0].u.s->s;
            key_sep = seps->v[1].u.s->s;
        }
    }
    ok = ok && jx_write_json(c, &b, v, indent, item_sep, key_sep, jx_truthy(p[3]),
                             jx_truthy(p[0]));
    ok = ok && jx_mkstr(c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

static bool f_trim(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"chars"};
    jx_val p[1], s;
    bool set[1];
    return BIND("trim", P, p, set) && soft_str(c, v, &s) && jx_str_strip(c, s, p[0], 3, out);
}

static bool f_truncate(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"length", "killwords", "end", "leeway"};
    jx_val p[4], s, end;
    bool set[4];
    int64_t length = 255, leeway = 5;
    if (!BIND("truncate", P, p, set) || !soft_str(c, v, &s)) return false;
    if (set[0] && !jx_want_int(c, p[0], "length", &length)) return false;
    if (set[3] && p[3].type != JX_NONE && !jx_want_int(c, p[3], "leeway", &leeway)) return false;
    if (set[2]) {
        if (!soft_str(c, p[2], &end)) return false;
    } else if (!jx_mkstr(c, "...", 3, &end)) {
        return false;
    }
    if (length < (int64_t)end.u.s->ncp || leeway < 0)
        return jx_fail(c, VX_EINVAL, "truncate: length must be >= len(end) and leeway >= 0");
    if ((int64_t)s.u.s->ncp - leeway <= length) { /* not length + leeway: it may pass INT64_MAX */
        *out = s;
        return true;
    }
    jx_val head;
    if (!jx_slice(c, s, jx_none(), jx_int(length - (int64_t)end.u.s->ncp), jx_none(), &head))
        return false;
    if (!jx_truthy(p[1])) { /* drop the last partial word: rsplit(" ", 1)[0] */
        const char *sp = NULL;
        for (size_t i = head.u.s->len; i-- > 0;)
            if (head.u.s->s[i] == ' ') {
                sp = head.u.s->s + i;
                break;
            }
        if (sp && !jx_mkstr(c, head.u.s->s, (size_t)(sp - head.u.s->s), &head)) return false;
    }
    return jx_binop(c, OP_ADD, head, end, out);
}

static bool f_wordcount(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    jx_val s;
    if (!no_args(c, "wordcount", a) || !soft_str(c, v, &s)) return false;
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.u.s->len;) {
        size_t l;
        uint32_t cp = jx_utf8_dec(s.u.s->s + i, s.u.s->len - i, &l);
        bool w = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
                 cp == '_' || (cp >= 0xAA && !jx_is_space(cp) && cp != 0xD7 && cp != 0xF7 &&
                               !(cp >= 0x2000 && cp <= 0x2BFF) && !(cp >= 0x3000 && cp <= 0x303F));
        if (w && !in_word) words++;
        in_word = w;
        i += l;
    }
    *out = jx_int(words);
    return true;
}

static bool f_batch(jx_ctx *c, jx_val v, const jx_args *a, jx_val *out) {
    static const char *const P[] = {"linecount", "fill_with"};
    jx_val p[2], cur;
    bool set[2];
    int64_t n;
    jx_list *l;
    if (!BIND("batch", P, p, set) || !jx_want_int(c, p[0], "linecount", &n) ||
        !jx_iterate(c, v, &l))
        return false;
    if (n <= 0) return jx_fail(c, VX_EINVAL, "batch size must be positive");
    if (!jx_mklist(c, 0, out) || !jx_mklist(c, 0, &cur)) return false;
    mark_iter(out);
    for (size_t i = 0; i < l->n; i++) {
        if (!jx_list_push(c, cur.u.l, l->v[i])) return false;
        if ((int64_t)cur.u.l->n == n) {
            if (!jx_list_push(c, out->u.l, cur) || !jx_mklist(c, 0, &cur)) return false;
        }
    }
    if (cur.u.l->n) {
        while (set[1] && p[1].type != JX_NONE && (int64_t)cur.u.l->n < n)
            if (!jx_list_push(c, cur.u.l, p[1])) return false;
        if (!jx_list_push(c, out->u.l, cur)) return false;
    }
    return true;
}

static const struct {
    const char *name;
    filter_fn fn;
} FILTERS[] = {
    {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
    {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
    {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},
    {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
    {"float", f_float},       {"forceescape", f_forceescape}, {"format", f_format},
    {"indent", f_indent},     {"int", f_int},           {"items", f_items},
    {"join", f_join},         {"last", f_last},         {"length", f_length},
    {"list", f_list},         {"lower", f_lower},       {"map", f_map},
    {"max", f_max},           {"min", f_min},           {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},         {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},
    {"sum", f_sum},           {"title", f_title},       {"tojson", f_tojson},
    {"trim", f_trim},         {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper},       {"wordcount", f_wordcount},
};

static filter_fn find_filter(const char *name) {
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, name)) return FILTERS[i].fn;
    return NULL;
}

bool jx_apply_filter(jx_ctx *c, const char *name, jx_val v, const jx_args *a, jx_val *out) {
    filter_fn fn = find_filter(name);
    if (!fn) return jx_fail(c, VX_EUNSUPPORTED, "no filter named '%s'", name);
    if (!jx_enter(c)) return false; /* map('map', 'map', ...) recurses */
    bool ok = fn(c, v, a, out);
    jx_leave(c);
    return ok;
}

/* --------------------------------------------------------------- tests */

static bool one_arg(jx_ctx *c, const char *name, const jx_args *a, jx_val *arg) {
    if (a->npos + a->nkw != 1) return jx_fail(c, VX_EINVAL, "test '%s' takes one argument", name);
    *arg = a->npos ? a->pos[0] : a->kwv[0];
    return true;
}

static bool t_compare(jx_ctx *c, jx_val v, const jx_args *a, bool *out, int op) {
    jx_val other;
    if (!one_arg(c, "comparison", a, &other)) return false;
    if (op == OP_EQ || op == OP_NE) {
        if (!jx_equal_c(c, v, other, out)) return false;
        *out = *out == (op == OP_EQ);
        return true;
    }
    if ((v.type == JX_FLOAT && isnan(v.u.f)) || (other.type == JX_FLOAT && isnan(other.u.f))) {
        *out = false;
        return true;
    }
    int r;
    if (!jx_compare(c, v, other, false, &r)) return false;
    *out = op == OP_LT ? r < 0 : op == OP_LE ? r <= 0 : op == OP_GT ? r > 0 : r >= 0;
    return true;
}

static bool t_parity(jx_ctx *c, jx_val v, int64_t div, bool *out) {
    jx_val r;
    if (!jx_binop(c, OP_MOD, v, jx_int(div), &r)) return false;
    *out = jx_num_f(r) == 0.0;
    return true;
}

static bool t_str_case(jx_ctx *c, jx_val v, int id, bool *out) {
    jx_val s, r;
    jx_func fn;
    jx_args none = {0, NULL, 0, NULL, NULL};
    if (!soft_str(c, v, &s)) return false;
    fn.id = id;
    fn.self = s;
    if (!jx_call_builtin(c, &fn, &none, &r)) return false;
    *out = r.u.b;
    return true;
}

static bool apply_test(jx_ctx *c, const char *name, jx_val v, const jx_args *a, bool *out);

bool jx_apply_test(jx_ctx *c, const char *name, jx_val v, const jx_args *a, bool *out) {
    if (!jx_enter(c)) return false;
    bool ok = apply_test(c, name, v, a, out);
    jx_leave(c);
    return ok;
}

static bool apply_test(jx_ctx *c, const char *name, jx_val v, const jx_args *a, bool *out) {
    jx_type t = (jx_type)v.type;
    bool iter = t == JX_LIST && (v.flags & JX_F_ITER);
    jx_val arg;
    if (!strcmp(name, "defined")) *out = t != JX_UNDEF;
    else if (!strcmp(name, "undefined")) *out = t == JX_UNDEF;
    else if (!strcmp(name, "none")) *out = t == JX_NONE;
    else if (!strcmp(name, "boolean")) *out = t == JX_BOOL;
    else if (!strcmp(name, "true")) *out = t == JX_BOOL && v.u.b;
    else if (!strcmp(name, "false")) *out = t == JX_BOOL && !v.u.b;
    else if (!strcmp(name, "integer")) *out = t == JX_INT;
    else if (!strcmp(name, "float")) *out = t == JX_FLOAT;
    else if (!strcmp(name, "number")) *out = jx_is_num(v);
    else if (!strcmp(name, "string")) *out = t == JX_STR;
    else if (!strcmp(name, "mapping")) *out = t == JX_DICT;
    else if (!strcmp(name, "iterable"))
        *out = t == JX_STR || t == JX_LIST || t == JX_DICT || t == JX_UNDEF || t == JX_LOOP;
    else if (!strcmp(name, "sequence"))
        *out = t == JX_STR || (t == JX_LIST && !iter) || t == JX_DICT || t == JX_UNDEF;
    else if (!strcmp(name, "callable"))
        *out = t == JX_FUNC || t == JX_MACRO || t == JX_UNDEF || t == JX_LOOP;
    else if (!strcmp(name, "escaped")) *out = t == JX_STR && (v.flags & JX_F_SAFE);
    else if (!strcmp(name, "lower")) return t_str_case(c, v, JXM_ISLOWER, out);
    else if (!strcmp(name, "upper")) return t_str_case(c, v, JXM_ISUPPER, out);
    else if (!strcmp(name, "even") || !strcmp(name, "odd")) {
        if (!t_parity(c, v, 2, out)) return false;
        if (name[0] == 'o') *out = !*out;
    } else if (!strcmp(name, "divisibleby")) {
        if (!one_arg(c, name, a, &arg)) return false;
        jx_val r;
        if (!jx_binop(c, OP_MOD, v, arg, &r)) return false;
        *out = jx_num_f(r) == 0.0;
    } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "=="))
        return t_compare(c, v, a, out, OP_EQ);
    else if (!strcmp(name, "ne") || !strcmp(name, "!=")) return t_compare(c, v, a, out, OP_NE);
    else if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<"))
        return t_compare(c, v, a, out, OP_LT);
    else if (!strcmp(name, "le") || !strcmp(name, "<=")) return t_compare(c, v, a, out, OP_LE);
    else if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">"))
        return t_compare(c, v, a, out, OP_GT);
    else if (!strcmp(name, "ge") || !strcmp(name, ">=")) return t_compare(c, v, a, out, OP_GE);
    else if (!strcmp(name, "in")) {
        return one_arg(c, name, a, &arg) && jx_contains(c, arg, v, out);
    } else if (!strcmp(name, "sameas")) {
        if (!one_arg(c, name, a, &arg)) return false;
        if (v.type != arg.type) *out = false;
        else if (t == JX_NONE || t == JX_UNDEF) *out = true;
        else if (t == JX_BOOL) *out = v.u.b == arg.u.b;
        else if (t == JX_INT)
            *out = v.u.i == arg.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython's small ints */
        else if (t == JX_STR) *out = v.u.s == arg.u.s;
        else if (t == JX_FLOAT) *out = v.u.f == arg.u.f;
        else *out = v.u.l == arg.u.l; /* containers: the same object */
    } else if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        arg = v; /* "upper" is filter: the value is the name */
        if (arg.type != JX_STR) {
            *out = false;
        } else if (name[0] == 'f') {
            *out = find_filter(arg.u.s->s) != NULL;
        } else {
            static const char *const TESTS[] = {
                "defined", "undefined", "none", "boolean", "true", "false", "integer", "float",
                "number", "string", "mapping", "iterable", "sequence", "callable", "escaped",
                "lower", "upper", "even", "odd", "divisibleby", "eq", "equalto", "==", "ne",
                "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=",
                "in", "sameas", "filter", "test"};
            *out = false;
            for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
                if (!strcmp(TESTS[i], arg.u.s->s)) *out = true;
        }
    } else {
        return jx_fail(c, VX_EUNSUPPORTED, "no test named '%s'", name);
    }
    return true;
}
