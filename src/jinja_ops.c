/*
 * jinja_ops.c - operations on values with the semantics jinja2 gets from
 * Python: the sandbox's attribute and item access (attribute first for
 * ".", key first for "[]", misses give Undefined, mutating methods are
 * hidden), slicing, arithmetic, "in", markupsafe escaping, %-formatting and
 * str.format, the methods of str/dict/list/loop, and the global functions
 * (range, namespace, dict, raise_exception, strftime_now).
 */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jinja2's sandbox refuses ranges longer than this. */
#define MAX_RANGE 100000

static const struct {
    const char *name;
    uint8_t type;
    int id;
} METHODS[] = {
    {"strip", JX_STR, JXM_STRIP},           {"lstrip", JX_STR, JXM_LSTRIP},
    {"rstrip", JX_STR, JXM_RSTRIP},         {"split", JX_STR, JXM_SPLIT},
    {"rsplit", JX_STR, JXM_RSPLIT},         {"startswith", JX_STR, JXM_STARTSWITH},
    {"endswith", JX_STR, JXM_ENDSWITH},     {"upper", JX_STR, JXM_UPPER},
    {"lower", JX_STR, JXM_LOWER},           {"title", JX_STR, JXM_TITLE},
    {"capitalize", JX_STR, JXM_CAPITALIZE}, {"swapcase", JX_STR, JXM_SWAPCASE},
    {"replace", JX_STR, JXM_REPLACE},       {"find", JX_STR, JXM_FIND},
    {"rfind", JX_STR, JXM_RFIND},           {"index", JX_STR, JXM_INDEX},
    {"rindex", JX_STR, JXM_RINDEX},         {"count", JX_STR, JXM_COUNT},
    {"join", JX_STR, JXM_JOIN},             {"format", JX_STR, JXM_FORMAT},
    {"isdigit", JX_STR, JXM_ISDIGIT},       {"isnumeric", JX_STR, JXM_ISDIGIT},
    {"isdecimal", JX_STR, JXM_ISDIGIT},     {"isalpha", JX_STR, JXM_ISALPHA},
    {"isalnum", JX_STR, JXM_ISALNUM},       {"isspace", JX_STR, JXM_ISSPACE},
    {"isupper", JX_STR, JXM_ISUPPER},       {"islower", JX_STR, JXM_ISLOWER},
    {"splitlines", JX_STR, JXM_SPLITLINES}, {"center", JX_STR, JXM_CENTER},
    {"ljust", JX_STR, JXM_LJUST},           {"rjust", JX_STR, JXM_RJUST},
    {"zfill", JX_STR, JXM_ZFILL},           {"partition", JX_STR, JXM_PARTITION},
    {"rpartition", JX_STR, JXM_RPARTITION}, {"removeprefix", JX_STR, JXM_REMOVEPREFIX},
    {"removesuffix", JX_STR, JXM_REMOVESUFFIX},
    {"items", JX_DICT, JXD_ITEMS},          {"keys", JX_DICT, JXD_KEYS},
    {"values", JX_DICT, JXD_VALUES},        {"get", JX_DICT, JXD_GET},
    {"copy", JX_DICT, JXD_COPY},            {"pop", JX_DICT, JX_HIDDEN},
    {"popitem", JX_DICT, JX_HIDDEN},         {"update", JX_DICT, JX_HIDDEN},
    {"setdefault", JX_DICT, JX_HIDDEN},      {"clear", JX_DICT, JX_HIDDEN},
    {"fromkeys", JX_DICT, JX_HIDDEN},
    {"index", JX_LIST, JXL_INDEX},          {"count", JX_LIST, JXL_COUNT},
    {"copy", JX_LIST, JXL_COPY},            {"append", JX_LIST, JX_HIDDEN},
    {"extend", JX_LIST, JX_HIDDEN},          {"insert", JX_LIST, JX_HIDDEN},
    {"pop", JX_LIST, JX_HIDDEN},             {"remove", JX_LIST, JX_HIDDEN},
    {"reverse", JX_LIST, JX_HIDDEN},         {"sort", JX_LIST, JX_HIDDEN},
    {"clear", JX_LIST, JX_HIDDEN},
    {"cycle", JX_LOOP, JXLP_CYCLE},         {"changed", JX_LOOP, JXLP_CHANGED},
};

static const jx_func GLOBALS[] = {
    {JXF_RANGE, {0, 0, {0}}},  {JXF_NAMESPACE, {0, 0, {0}}}, {JXF_DICT, {0, 0, {0}}},
    {JXF_RAISE, {0, 0, {0}}},  {JXF_STRFTIME, {0, 0, {0}}},
};
static const char *const GLOBAL_NAMES[] = {"range", "namespace", "dict", "raise_exception",
                                           "strftime_now"};

bool jx_global(const char *name, jx_val *out) {
    for (size_t i = 0; i < sizeof GLOBALS / sizeof GLOBALS[0]; i++) {
        if (!strcmp(name, GLOBAL_NAMES[i])) {
            out->type = JX_FUNC;
            out->flags = 0;
            out->u.fn = (jx_func *)&GLOBALS[i]; /* never written through */
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------- arguments */

bool jx_bind(jx_ctx *c, const char *fname, const jx_args *a, const char *const *params, int np,
             jx_val *vals, bool *set) {
    for (int i = 0; i < np; i++) {
        vals[i] = jx_undef(params[i]);
        set[i] = false;
    }
    if (a->npos > np)
        return jx_fail(c, VX_EINVAL, "%s() takes at most %d argument%s (%d given)", fname, np,
                       np == 1 ? "" : "s", a->npos);
    for (int i = 0; i < a->npos; i++) {
        vals[i] = a->pos[i];
        set[i] = true;
    }
    for (int k = 0; k < a->nkw; k++) {
        int i;
        for (i = 0; i < np; i++)
            if (!strcmp(params[i], a->kwn[k])) break;
        if (i == np)
            return jx_fail(c, VX_EINVAL, "%s() got an unexpected keyword argument '%s'", fname,
                           a->kwn[k]);
        if (set[i])
            return jx_fail(c, VX_EINVAL, "%s() got multiple values for argument '%s'", fname,
                           params[i]);
        vals[i] = a->kwv[k];
        set[i] = true;
    }
    return true;
}

bool jx_undef_fail(jx_ctx *c, jx_val u) {
    if (u.u.undef_name && (u.flags & JX_F_HINT)) return jx_fail(c, VX_EINVAL, "%s", u.u.undef_name);
    if (u.u.undef_name) return jx_fail(c, VX_EINVAL, "'%s' is undefined", u.u.undef_name);
    return jx_fail(c, VX_EINVAL, "undefined value used");
}

bool jx_want_str(jx_ctx *c, jx_val v, const char *what, const jx_str **out) {
    if (v.type == JX_STR) {
        *out = v.u.s;
        return true;
    }
    if (v.type == JX_UNDEF) return jx_undef_fail(c, v);
    return jx_fail(c, VX_EINVAL, "%s must be str, not %s", what, jx_type_name(v));
}

bool jx_want_int(jx_ctx *c, jx_val v, const char *what, int64_t *out) {
    if (jx_int_like(v)) {
        *out = jx_int_of(v);
        return true;
    }
    if (v.type == JX_UNDEF) return jx_undef_fail(c, v);
    return jx_fail(c, VX_EINVAL, "%s must be an integer, not %s", what, jx_type_name(v));
}

static bool bound(jx_ctx *c, int id, jx_val self, jx_val *out) {
    jx_func *f = jx_alloc(c, sizeof *f);
    if (!f) return false;
    f->id = id;
    f->self = self;
    out->type = JX_FUNC;
    out->flags = 0;
    out->u.fn = f;
    return true;
}

bool jx_mkstr_like(jx_ctx *c, jx_val like, const char *s, size_t n, jx_val *out) {
    if (!jx_mkstr(c, s, n, out)) return false;
    out->flags = like.flags & JX_F_SAFE;
    return true;
}

bool jx_mktuple(jx_ctx *c, const jx_val *items, size_t n, jx_val *out) {
    if (!jx_mklist(c, n, out)) return false;
    jx_copy_vals(out->u.l->v, items, n);
    out->u.l->n = n;
    out->flags = JX_F_TUPLE;
    return true;
}

/* ------------------------------------------------------ attribute access */

static int method_id(jx_val obj, const char *name) {
    uint8_t t = obj.type;
    if (t == JX_LIST && (obj.flags & JX_F_ITER)) return 0;
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++) {
        if (METHODS[i].type != t || strcmp(METHODS[i].name, name)) continue;
        /* tuples have only count() and index() */
        if (t == JX_LIST && (obj.flags & JX_F_TUPLE) && METHODS[i].id != JXL_INDEX &&
            METHODS[i].id != JXL_COUNT)
            return 0;
        return METHODS[i].id;
    }
    return 0;
}

static bool loop_attr(jx_ctx *c, const jx_loop *l, const char *name, jx_val *out) {
    size_t i = l->index0, n = l->length;
    if (!strcmp(name, "index")) *out = jx_int((int64_t)i + 1);
    else if (!strcmp(name, "index0")) *out = jx_int((int64_t)i);
    else if (!strcmp(name, "revindex")) *out = jx_int((int64_t)(n - i));
    else if (!strcmp(name, "revindex0")) *out = jx_int((int64_t)(n - i - 1));
    else if (!strcmp(name, "first")) *out = jx_bool(i == 0);
    else if (!strcmp(name, "last")) *out = jx_bool(i + 1 == n);
    else if (!strcmp(name, "length")) *out = jx_int((int64_t)n);
    else if (!strcmp(name, "depth")) *out = jx_int(1);
    else if (!strcmp(name, "depth0")) *out = jx_int(0);
    else if (!strcmp(name, "previtem")) *out = i > 0 ? l->items[i - 1] : jx_undef("previtem");
    else if (!strcmp(name, "nextitem")) *out = i + 1 < n ? l->items[i + 1] : jx_undef("nextitem");
    else *out = jx_undef(name);
    (void)c;
    return true;
}

/* Python's name for the type in jinja2's "has no attribute" messages. */
static const char *obj_repr(jx_val obj) {
    switch ((jx_type)obj.type) {
    case JX_NONE: return "None";
    case JX_BOOL: return "bool object";
    case JX_INT: return "int object";
    case JX_FLOAT: return "float object";
    case JX_STR: return "str object";
    case JX_LIST:
        return obj.flags & JX_F_ITER    ? "generator object"
               : obj.flags & JX_F_TUPLE ? "tuple object"
                                        : "list object";
    case JX_DICT: return "dict object";
    case JX_NS: return "jinja2.utils.Namespace object";
    case JX_LOOP: return "jinja2.runtime.LoopContext object";
    default: return "object";
    }
}

/* An Undefined that remembers why it is undefined, for the error raised if
 * the template later uses it. Falls back to a plain Undefined if the
 * message cannot be stored (it is only a message). */
static jx_val missing(jx_ctx *c, jx_val obj, const char *attr, jx_val key) {
    char buf[200];
    if (attr && method_id(obj, attr) == JX_HIDDEN)
        snprintf(buf, sizeof buf, "access to attribute '%s' of '%s' object is unsafe", attr,
                 jx_type_name(obj));
    else if (attr)
        snprintf(buf, sizeof buf, "'%s' has no attribute '%.80s'", obj_repr(obj), attr);
    else if (jx_int_like(key))
        snprintf(buf, sizeof buf, "%s has no element %lld", obj_repr(obj),
                 (long long)jx_int_of(key));
    else
        snprintf(buf, sizeof buf, "%s has no element of type %s", obj_repr(obj), jx_type_name(key));
    size_t n = strlen(buf);
    char *msg = jx_arena_alloc(c->arena, n + 1);
    jx_val u = jx_undef(NULL);
    if (msg) {
        memcpy(msg, buf, n + 1);
        u.u.undef_name = msg;
        u.flags = JX_F_HINT;
    }
    return u;
}

bool jx_getattr(jx_ctx *c, jx_val obj, const char *name, jx_val *out) {
    /* The sandbox hides private and dunder attributes; dunders exist even on
     * Undefined, so they do not raise there either. */
    if (name[0] == '_' && (obj.type != JX_UNDEF || name[1] == '_')) {
        *out = jx_undef(name);
        return true;
    }
    if (obj.type == JX_UNDEF) return jx_undef_fail(c, obj);
    int id = method_id(obj, name);
    if (id > 0) return bound(c, id, obj, out);
    if ((obj.type == JX_DICT || obj.type == JX_NS) && !jx_charge(c, obj.u.d->n >> 3)) return false;
    if (id == 0) {
        if ((obj.type == JX_DICT || obj.type == JX_NS) && jx_dict_get_cstr(obj.u.d, name, out))
            return true;
        if (obj.type == JX_LOOP) return loop_attr(c, obj.u.loop, name, out);
        if (jx_is_num(obj) && (!strcmp(name, "real") || !strcmp(name, "imag"))) {
            *out = name[0] == 'r' ? (obj.type == JX_BOOL ? jx_int(obj.u.b) : obj)
                                  : (obj.type == JX_FLOAT ? jx_float(0.0) : jx_int(0));
            return true;
        }
    }
    *out = missing(c, obj, name, jx_none());
    return true;
}

bool jx_getitem(jx_ctx *c, jx_val obj, jx_val key, jx_val *out) {
    if (obj.type == JX_STR && obj.u.s->ncp != obj.u.s->len && !jx_charge(c, obj.u.s->len >> 6))
        return false; /* walking to a code point */
    switch ((jx_type)obj.type) {
    case JX_UNDEF: return jx_undef_fail(c, obj);
    case JX_DICT:
        if ((key.type == JX_LIST && !(key.flags & JX_F_TUPLE)) || key.type == JX_DICT ||
            key.type == JX_NS)
            break; /* unhashable: TypeError, handled as a miss */
        bool found;
        if (!jx_dict_lookup(c, obj.u.d, key, out, &found)) return false;
        if (found) return true;
        break;
    case JX_LIST:
        if (!(obj.flags & JX_F_ITER) && jx_int_like(key)) {
            int64_t i = jx_int_of(key), n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                *out = obj.u.l->v[i];
                return true;
            }
        }
        break;
    case JX_STR:
        if (jx_int_like(key)) {
            int64_t i = jx_int_of(key), n = (int64_t)obj.u.s->ncp;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t b = jx_cp_offset(obj.u.s, i), e = jx_cp_offset(obj.u.s, i + 1);
                return jx_mkstr_like(c, obj, obj.u.s->s + b, e - b, out);
            }
        }
        break;
    default: break;
    }
    if (key.type == JX_STR) {
        if (obj.type == JX_DICT) { /* the key missed: only methods are left */
            int id = method_id(obj, key.u.s->s);
            if (id > 0) return bound(c, id, obj, out);
            *out = missing(c, obj, key.u.s->s, key);
            return true;
        }
        return jx_getattr(c, obj, key.u.s->s, out);
    }
    *out = missing(c, obj, NULL, key);
    return true;
}

/* Python's slice.indices(): start, step and the number of items. */
static bool slice_indices(jx_val start, jx_val stop, jx_val step, int64_t len, int64_t *pstart,
                          int64_t *pstep, int64_t *pcount, bool *type_error) {
    *type_error = false;
    for (int k = 0; k < 3; k++) {
        jx_val v = k == 0 ? start : k == 1 ? stop : step;
        if (v.type != JX_NONE && !jx_int_like(v)) {
            *type_error = true;
            return true;
        }
    }
    int64_t st = step.type == JX_NONE ? 1 : jx_int_of(step);
    if (st == 0) return false;
    if (st == INT64_MIN) st = -INT64_MAX;
    int64_t lower = st < 0 ? -1 : 0, upper = st < 0 ? len - 1 : len;
    int64_t s, e;
    if (start.type == JX_NONE) {
        s = st < 0 ? upper : lower;
    } else {
        s = jx_int_of(start);
        if (s < 0) {
            s = s < -len ? lower : s + len;
            if (s < lower) s = lower;
        } else if (s > upper) {
            s = upper;
        }
    }
    if (stop.type == JX_NONE) {
        e = st < 0 ? lower : upper;
    } else {
        e = jx_int_of(stop);
        if (e < 0) {
            e = e < -len ? lower : e + len;
            if (e < lower) e = lower;
        } else if (e > upper) {
            e = upper;
        }
    }
    int64_t count = 0;
    if (st > 0 && e > s) count = (e - s - 1) / st + 1;
    if (st < 0 && s > e) count = (s - e - 1) / (-st) + 1;
    *pstart = s;
    *pstep = st;
    *pcount = count;
    return true;
}

bool jx_slice(jx_ctx *c, jx_val obj, jx_val start, jx_val stop, jx_val step, jx_val *out) {
    if (obj.type == JX_UNDEF) return jx_undef_fail(c, obj);
    bool is_list = obj.type == JX_LIST && !(obj.flags & JX_F_ITER);
    if (!is_list && obj.type != JX_STR) {
        *out = jx_undef(NULL);
        return true;
    }
    int64_t len = is_list ? (int64_t)obj.u.l->n : (int64_t)obj.u.s->ncp;
    if (!jx_charge(c, is_list ? 0 : obj.u.s->len >> 6)) return false;
    int64_t s, st, n;
    bool type_error;
    if (!slice_indices(start, stop, step, len, &s, &st, &n, &type_error))
        return jx_fail(c, VX_EINVAL, "slice step cannot be zero");
    if (type_error) {
        *out = jx_undef(NULL);
        return true;
    }
    if (is_list) {
        if (!jx_mklist(c, (size_t)n, out)) return false;
        for (int64_t k = 0; k < n; k++) out->u.l->v[k] = obj.u.l->v[s + k * st];
        out->u.l->n = (size_t)n;
        out->flags = obj.flags & JX_F_TUPLE;
        return true;
    }
    const jx_str *str = obj.u.s;
    if (st == 1) {
        size_t b = jx_cp_offset(str, s), e = jx_cp_offset(str, s + n);
        return jx_mkstr_like(c, obj, str->s + b, e - b, out);
    }
    /* general step: index the code points once */
    size_t *off = jx_alloc(c, (str->ncp + 1) * sizeof(size_t));
    char *buf = jx_alloc(c, str->len + 1);
    if (!off || !buf) return false;
    size_t i = 0, k = 0;
    while (i < str->len) {
        size_t l;
        off[k++] = i;
        jx_utf8_dec(str->s + i, str->len - i, &l);
        i += l;
    }
    off[k] = str->len;
    size_t m = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t idx = s + j * st;
        size_t b = off[idx], e = off[idx + 1];
        memcpy(buf + m, str->s + b, e - b);
        m += e - b;
    }
    return jx_mkstr_like(c, obj, buf, m, out);
}

/* ------------------------------------------------------------- operators */

bool jx_escape(jx_ctx *c, jx_val v, jx_val *out) {
    if (v.type == JX_STR && (v.flags & JX_F_SAFE)) {
        *out = v;
        return true;
    }
    jx_val s;
    if (!jx_to_str(c, v, &s)) return false;
    jx_buf b = {0};
    bool ok = true;
    size_t start = 0;
    for (size_t i = 0; i < s.u.s->len && ok; i++) {
        const char *e = NULL;
        switch (s.u.s->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '\'': e = "&#39;"; break;
        case '"': e = "&#34;"; break;
        default: continue;
        }
        ok = jx_buf_put(c, &b, s.u.s->s + start, i - start) && jx_buf_puts(c, &b, e);
        start = i + 1;
    }
    ok = ok && jx_buf_put(c, &b, s.u.s->s + start, s.u.s->len - start) &&
         jx_mkstr(c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    if (ok) out->flags = JX_F_SAFE;
    return ok;
}


static const char *op_symbol(int op) {
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "** or pow()";
    default: return "?";
    }
}

static bool concat(jx_ctx *c, jx_val a, jx_val b, jx_val *out) {
    /* Markup + str escapes the plain side and stays Markup. */
    if ((a.flags ^ b.flags) & JX_F_SAFE) {
        if (!(a.flags & JX_F_SAFE) && !jx_escape(c, a, &a)) return false;
        if (!(b.flags & JX_F_SAFE) && !jx_escape(c, b, &b)) return false;
    }
    size_t n = a.u.s->len + b.u.s->len;
    if (n > c->lim.max_output) return jx_fail(c, VX_ERANGE, "string too long");
    char *buf = jx_alloc(c, n + 1);
    if (!buf) return false;
    memcpy(buf, a.u.s->s, a.u.s->len);
    memcpy(buf + a.u.s->len, b.u.s->s, b.u.s->len);
    if (!jx_mkstr(c, buf, n, out)) return false;
    out->flags = a.flags & JX_F_SAFE;
    return true;
}

static bool repeat(jx_ctx *c, jx_val seq, int64_t times, jx_val *out) {
    if (times < 0) times = 0;
    if (seq.type == JX_STR) {
        size_t len = seq.u.s->len;
        if (len && (uint64_t)times > c->lim.max_output / len)
            return jx_fail(c, VX_ERANGE, "string repetition too long");
        char *buf = jx_alloc(c, len * (size_t)times + 1);
        if (!buf) return false;
        for (int64_t i = 0; i < times; i++) memcpy(buf + (size_t)i * len, seq.u.s->s, len);
        return jx_mkstr_like(c, seq, buf, len * (size_t)times, out);
    }
    size_t n = seq.u.l->n;
    if (n && (uint64_t)times > (c->lim.max_output / sizeof(jx_val)) / n)
        return jx_fail(c, VX_ERANGE, "list repetition too long");
    if (!jx_mklist(c, n * (size_t)times, out)) return false;
    for (int64_t i = 0; n && i < times; i++)
        jx_copy_vals(out->u.l->v + (size_t)i * n, seq.u.l->v, n);
    out->u.l->n = n * (size_t)times;
    out->flags = seq.flags & JX_F_TUPLE;
    return true;
}

static bool int_pow(jx_ctx *c, int64_t base, int64_t e, int64_t *out) {
    int64_t r = 1;
    while (e > 0) {
        if (e & 1) {
            if (__builtin_mul_overflow(r, base, &r))
                return jx_fail(c, VX_ERANGE, "integer overflow");
        }
        e >>= 1;
        if (e && __builtin_mul_overflow(base, base, &base))
            return jx_fail(c, VX_ERANGE, "integer overflow");
    }
    *out = r;
    return true;
}

/* Python's float divmod(), which floors toward negative infinity. */
static void float_divmod(double a, double b, double *fdiv, double *fmodv) {
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, b);
    }
    double fl;
    if (div != 0.0) {
        fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
    } else {
        fl = copysign(0.0, a / b);
    }
    *fdiv = fl;
    *fmodv = mod;
}

static bool arith(jx_ctx *c, int op, jx_val a, jx_val b, jx_val *out) {
    if (a.type != JX_FLOAT && b.type != JX_FLOAT && op != OP_DIV) {
        int64_t x = jx_int_of(a), y = jx_int_of(b), r = 0;
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r)) return jx_fail(c, VX_ERANGE, "integer overflow");
            break;
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) return jx_fail(c, VX_ERANGE, "integer overflow");
            break;
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) return jx_fail(c, VX_ERANGE, "integer overflow");
            break;
        case OP_FLOORDIV:
        case OP_MOD:
            if (y == 0)
                return jx_fail(c, VX_EINVAL, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return jx_fail(c, VX_ERANGE, "integer overflow");
            if (op == OP_FLOORDIV) {
                r = x / y;
                if (x % y != 0 && ((x < 0) != (y < 0))) r--;
            } else {
                r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
            }
            break;
        case OP_POW:
            if (y >= 0) {
                if (!int_pow(c, x, y, &r)) return false;
                break;
            }
            if (x == 0) return jx_fail(c, VX_EINVAL, "0.0 cannot be raised to a negative power");
            *out = jx_float(pow((double)x, (double)y));
            return true;
        default: return jx_fail(c, VX_EINTERNAL, "bad operator");
        }
        *out = jx_int(r);
        return true;
    }
    double x = jx_num_f(a), y = jx_num_f(b), r;
    switch (op) {
    case OP_ADD: r = x + y; break;
    case OP_SUB: r = x - y; break;
    case OP_MUL: r = x * y; break;
    case OP_DIV:
        if (y == 0.0) return jx_fail(c, VX_EINVAL, "division by zero");
        r = x / y;
        break;
    case OP_FLOORDIV:
    case OP_MOD: {
        if (y == 0.0) return jx_fail(c, VX_EINVAL, "float division by zero");
        double d, m;
        float_divmod(x, y, &d, &m);
        r = op == OP_FLOORDIV ? d : m;
        break;
    }
    case OP_POW:
        if (x == 0.0 && y < 0)
            return jx_fail(c, VX_EINVAL, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y))
            return jx_fail(c, VX_EINVAL, "complex results are not supported");
        r = pow(x, y);
        if (isinf(r) && isfinite(x) && isfinite(y))
            return jx_fail(c, VX_ERANGE, "numerical result out of range");
        break;
    default: return jx_fail(c, VX_EINTERNAL, "bad operator");
    }
    *out = jx_float(r);
    return true;
}

bool jx_binop(jx_ctx *c, int op, jx_val a, jx_val b, jx_val *out) {
    if (a.type == JX_UNDEF) return jx_undef_fail(c, a);
    if (b.type == JX_UNDEF) return jx_undef_fail(c, b);
    if (jx_is_num(a) && jx_is_num(b)) return arith(c, op, a, b, out);
    bool seq_a = a.type == JX_STR || (a.type == JX_LIST && !(a.flags & JX_F_ITER));
    bool seq_b = b.type == JX_STR || (b.type == JX_LIST && !(b.flags & JX_F_ITER));
    if (op == OP_ADD) {
        if (a.type == JX_STR && b.type == JX_STR) return concat(c, a, b, out);
        if (a.type == JX_LIST && b.type == JX_LIST && seq_a && seq_b &&
            (a.flags & JX_F_TUPLE) == (b.flags & JX_F_TUPLE)) {
            size_t n = a.u.l->n + b.u.l->n;
            if (!jx_mklist(c, n, out)) return false;
            jx_copy_vals(out->u.l->v, a.u.l->v, a.u.l->n);
            jx_copy_vals(out->u.l->v + a.u.l->n, b.u.l->v, b.u.l->n);
            out->u.l->n = n;
            out->flags = a.flags & JX_F_TUPLE;
            return true;
        }
        if (a.type == JX_STR)
            return jx_fail(c, VX_EINVAL, "can only concatenate str (not \"%s\") to str",
                           jx_type_name(b));
        if (a.type == JX_LIST && seq_a)
            return jx_fail(c, VX_EINVAL, "can only concatenate %s (not \"%s\") to %s",
                           jx_type_name(a), jx_type_name(b), jx_type_name(a));
    } else if (op == OP_MUL) {
        if (seq_a && jx_int_like(b)) return repeat(c, a, jx_int_of(b), out);
        if (seq_b && jx_int_like(a)) return repeat(c, b, jx_int_of(a), out);
    } else if (op == OP_MOD && a.type == JX_STR) {
        return jx_percent_format(c, a, b, out);
    }
    return jx_fail(c, VX_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'",
                   op_symbol(op), jx_type_name(a), jx_type_name(b));
}

bool jx_contains(jx_ctx *c, jx_val container, jx_val item, bool *out) {
    if (container.type == JX_STR && !jx_charge(c, container.u.s->len >> 6)) return false;
    switch ((jx_type)container.type) {
    case JX_UNDEF: *out = false; return true;
    case JX_STR: {
        if (item.type != JX_STR)
            return jx_fail(c, VX_EINVAL, "'in <string>' requires string as left operand, not %s",
                           jx_type_name(item));
        *out = item.u.s->len == 0 || jx_find(container.u.s->s, container.u.s->len, item.u.s->s,
                                            item.u.s->len) != NULL;
        return true;
    }
    case JX_LIST:
        for (size_t i = 0; i < container.u.l->n; i++) {
            bool same;
            if (!jx_equal_c(c, container.u.l->v[i], item, &same)) return false;
            if (same) {
                *out = true;
                return true;
            }
        }
        *out = false;
        return true;
    case JX_DICT: {
        if ((item.type == JX_LIST && !(item.flags & JX_F_TUPLE)) || item.type == JX_DICT)
            return jx_fail(c, VX_EINVAL, "unhashable type: '%s'", jx_type_name(item));
        jx_val dummy;
        return jx_dict_lookup(c, container.u.d, item, &dummy, out);
    }
    default:
        return jx_fail(c, VX_EINVAL, "argument of type '%s' is not iterable",
                       jx_type_name(container));
    }
}

/* ----------------------------------------------------- other methods */

static bool dict_items(jx_ctx *c, const jx_dict *d, int what, jx_val *out) {
    if (!jx_mklist(c, d->n, out)) return false;
    for (size_t i = 0; i < d->n; i++) {
        if (what == JXD_KEYS) {
            out->u.l->v[i] = d->k[i];
        } else if (what == JXD_VALUES) {
            out->u.l->v[i] = d->v[i];
        } else {
            jx_val pair[2] = {d->k[i], d->v[i]};
            if (!jx_mktuple(c, pair, 2, &out->u.l->v[i])) return false;
        }
    }
    out->u.l->n = d->n;
    return true;
}

static bool make_dict(jx_ctx *c, const char *fname, const jx_args *a, jx_dict **out) {
    jx_dict *d = jx_dict_new(c, 0);
    if (!d) return false;
    if (a->npos > 1)
        return jx_fail(c, VX_EINVAL, "%s expected at most 1 positional argument", fname);
    if (a->npos == 1) {
        jx_val src = a->pos[0];
        if (src.type == JX_DICT || src.type == JX_NS) {
            for (size_t i = 0; i < src.u.d->n; i++)
                if (!jx_dict_set(c, d, src.u.d->k[i], src.u.d->v[i])) return false;
        } else {
            jx_list *items;
            if (!jx_iterate(c, src, &items)) return false;
            for (size_t i = 0; i < items->n; i++) {
                jx_list *pair;
                if (!jx_iterate(c, items->v[i], &pair)) return false;
                if (pair->n != 2)
                    return jx_fail(
                        c, VX_EINVAL,
                        "dictionary update sequence element has length %zu; 2 is required",
                        pair->n);
                if (!jx_dict_set(c, d, pair->v[0], pair->v[1])) return false;
            }
        }
    }
    for (int k = 0; k < a->nkw; k++) {
        jx_val key;
        if (!jx_mkstr(c, a->kwn[k], strlen(a->kwn[k]), &key) || !jx_dict_set(c, d, key, a->kwv[k]))
            return false;
    }
    *out = d;
    return true;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
/* strftime_now(fmt) formats the render's clock with the C library, like
 * Python's datetime.strftime on glibc; %f (microseconds) is always 000000. */
static bool do_strftime(jx_ctx *c, const jx_str *fmt, jx_val *out) {
    jx_buf f = {0};
    bool ok = jx_buf_putc(c, &f, ' '); /* keeps the result non-empty, see below */
    for (size_t i = 0; ok && i < fmt->len; i++) {
        if (fmt->s[i] == '%' && i + 1 < fmt->len) {
            ok = fmt->s[i + 1] == 'f' ? jx_buf_puts(c, &f, "000000")
                                      : jx_buf_put(c, &f, fmt->s + i, 2);
            i++;
        } else {
            ok = jx_buf_putc(c, &f, fmt->s[i]);
        }
    }
    size_t cap = 128;
    char *buf = NULL;
    while (ok) {
        if (cap > (size_t)1 << 20) {
            ok = jx_fail(c, VX_ERANGE, "strftime result too long");
            break;
        }
        if (!(buf = jx_alloc(c, cap))) {
            ok = false;
            break;
        }
        size_t n = strftime(buf, cap, f.p, &c->now);
        if (n > 0) { /* 0 means "did not fit": the leading space rules out "empty" */
            ok = jx_mkstr(c, buf + 1, n - 1, out);
            break;
        }
        cap *= 4;
    }
    jx_buf_free(&f);
    return ok;
}
#pragma GCC diagnostic pop

bool jx_call_builtin(jx_ctx *c, const jx_func *f, const jx_args *a, jx_val *out) {
    jx_val self = f->self;
    if (f->id >= JXM_STRIP && f->id <= JXM_REMOVESUFFIX)
        return jx_str_method(c, f->id, self, a, out);
    jx_val v[3];
    bool set[3];
    switch (f->id) {
    case JXF_RANGE: {
        static const char *const P[] = {"start", "stop", "step"};
        if (a->nkw) return jx_fail(c, VX_EINVAL, "range() takes no keyword arguments");
        if (!jx_bind(c, "range", a, P, 3, v, set)) return false;
        if (!set[0]) return jx_fail(c, VX_EINVAL, "range expected at least 1 argument, got 0");
        int64_t start = 0, stop, step = 1;
        if (!jx_want_int(c, v[0], "range() argument", set[1] ? &start : &stop)) return false;
        if (set[1] && !jx_want_int(c, v[1], "range() argument", &stop)) return false;
        if (set[2] && !jx_want_int(c, v[2], "range() argument", &step)) return false;
        if (step == 0) return jx_fail(c, VX_EINVAL, "range() arg 3 must not be zero");
        int64_t n = 0;
        if (step > 0 && stop > start)
            n = (int64_t)(((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step) + 1;
        if (step < 0 && start > stop)
            n = (int64_t)(((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step)) + 1;
        if (n > MAX_RANGE)
            return jx_fail(c, VX_ERANGE, "range too big, maximum size for range is %d", MAX_RANGE);
        if (!jx_mklist(c, (size_t)n, out)) return false;
        /* in uint64: i * step may pass INT64_MAX where start + i * step does not */
        for (int64_t i = 0; i < n; i++)
            out->u.l->v[i] = jx_int((int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step));
        out->u.l->n = (size_t)n;
        return true;
    }
    case JXF_NAMESPACE:
    case JXF_DICT: {
        jx_dict *d = NULL;
        if (!make_dict(c, f->id == JXF_DICT ? "dict" : "namespace", a, &d)) return false;
        out->type = f->id == JXF_DICT ? JX_DICT : JX_NS;
        out->flags = 0;
        out->u.d = d;
        return true;
    }
    case JXF_RAISE: {
        jx_val msg = a->npos ? a->pos[0] : jx_undef(NULL);
        jx_buf b = {0};
        if (!jx_write_str(c, &b, msg)) {
            jx_buf_free(&b);
            return false;
        }
        jx_fail(c, VX_EINVAL, "%s", b.p ? b.p : "");
        jx_buf_free(&b);
        return false;
    }
    case JXF_STRFTIME: {
        const jx_str *fmt = NULL;
        if (a->npos != 1 || a->nkw)
            return jx_fail(c, VX_EINVAL, "strftime_now() takes one argument");
        if (!jx_want_str(c, a->pos[0], "strftime_now() format", &fmt)) return false;
        return do_strftime(c, fmt, out);
    }
    case JXD_ITEMS:
    case JXD_KEYS:
    case JXD_VALUES:
        if (a->npos || a->nkw) return jx_fail(c, VX_EINVAL, "dict method takes no arguments");
        return dict_items(c, self.u.d, f->id, out);
    case JXD_GET: {
        static const char *const P[] = {"key", "default"};
        if (!jx_bind(c, "get", a, P, 2, v, set)) return false;
        if (!set[0]) return jx_fail(c, VX_EINVAL, "get expected at least 1 argument, got 0");
        bool found;
        if (!jx_dict_lookup(c, self.u.d, v[0], out, &found)) return false;
        if (!found) *out = set[1] ? v[1] : jx_none();
        return true;
    }
    case JXD_COPY: {
        jx_dict *d = jx_dict_new(c, self.u.d->n);
        if (!d) return false;
        jx_copy_vals(d->k, self.u.d->k, self.u.d->n);
        jx_copy_vals(d->v, self.u.d->v, self.u.d->n);
        d->n = self.u.d->n;
        out->type = JX_DICT;
        out->flags = 0;
        out->u.d = d;
        return true;
    }
    case JXL_INDEX:
    case JXL_COUNT: {
        if (a->npos < 1) return jx_fail(c, VX_EINVAL, "method expects an argument");
        int64_t k = 0;
        for (size_t i = 0; i < self.u.l->n; i++) {
            bool same;
            if (!jx_equal_c(c, self.u.l->v[i], a->pos[0], &same)) return false;
            if (!same) continue;
            if (f->id == JXL_INDEX) {
                *out = jx_int((int64_t)i);
                return true;
            }
            k++;
        }
        if (f->id == JXL_INDEX) return jx_fail(c, VX_EINVAL, "value is not in list");
        *out = jx_int(k);
        return true;
    }
    case JXL_COPY:
        if (!jx_mklist(c, self.u.l->n, out)) return false;
        jx_copy_vals(out->u.l->v, self.u.l->v, self.u.l->n);
        out->u.l->n = self.u.l->n;
        return true;
    case JXLP_CYCLE:
        if (a->npos == 0) return jx_fail(c, VX_EINVAL, "no items for cycling given");
        *out = a->pos[self.u.loop->index0 % (size_t)a->npos];
        return true;
    case JXLP_CHANGED: {
        jx_val now;
        if (!jx_mktuple(c, a->pos, (size_t)a->npos, &now)) return false;
        jx_loop *l = self.u.loop;
        bool same = false;
        if (l->has_changed && !jx_equal_c(c, l->last_changed, now, &same)) return false;
        bool changed = !same;
        l->last_changed = now;
        l->has_changed = true;
        *out = jx_bool(changed);
        return true;
    }
    }
    return jx_fail(c, VX_EINTERNAL, "unknown builtin function");
}
