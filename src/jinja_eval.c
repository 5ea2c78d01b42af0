/*
 * jinja_eval.c - executes the AST: statements write into the current output
 * buffer, expressions produce values. Scoping follows jinja2: {% set %}
 * writes the innermost scope; every for-loop iteration and macro call gets
 * a fresh scope (so plain assignments in a loop body do not survive the
 * iteration, which is why templates use namespace()); if-blocks share their
 * parent's scope. Work, output size, memory and macro depth are bounded.
 */
#include "jinja.h"

#include <math.h>
#include <string.h>

typedef enum flow { FL_OK, FL_BREAK, FL_CONTINUE, FL_ERR } flow;


static bool eval(jx_ctx *c, const jx_node *n, jx_val *out);
static flow exec_body(jx_ctx *c, const jx_nodes *body);

/* ----------------------------------------------------------------- scopes */

jx_scope *jx_scope_new(jx_ctx *c, jx_scope *parent) {
    jx_scope *s = jx_alloc(c, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

bool jx_scope_set(jx_ctx *c, jx_scope *s, const char *name, jx_val v) {
    if (!jx_charge(c, s->n >> 3)) return false;
    for (size_t i = 0; i < s->n; i++) {
        if (!strcmp(s->vars[i].name, name)) {
            s->vars[i].val = v;
            return true;
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        jx_var *vars = jx_alloc(c, cap * sizeof *vars);
        if (!vars) return false;
        if (s->n) memcpy(vars, s->vars, s->n * sizeof *vars);
        s->vars = vars;
        s->cap = cap;
    }
    s->vars[s->n].name = name;
    s->vars[s->n].val = v;
    s->n++;
    return true;
}

static bool lookup(jx_ctx *c, const char *name, jx_val *out) {
    for (const jx_scope *s = c->scope; s; s = s->parent) {
        if (!jx_charge(c, s->n >> 3)) return false;
        for (size_t i = s->n; i-- > 0;) {
            if (!strcmp(s->vars[i].name, name)) {
                *out = s->vars[i].val;
                return true;
            }
        }
    }
    if (!jx_global(name, out)) *out = jx_undef(name);
    return true;
}

/* ---------------------------------------------------------- assignment */

static bool assign(jx_ctx *c, const jx_node *target, jx_val v) {
    switch (target->kind) {
    case E_NAME: return jx_scope_set(c, c->scope, target->name, v);
    case E_TUPLE: {
        jx_list *items;
        if (!jx_iterate(c, v, &items)) return false;
        int want = target->list.n;
        if ((int64_t)items->n > want)
            return jx_fail(c, VX_EINVAL, "too many values to unpack (expected %d)", want);
        if ((int64_t)items->n < want)
            return jx_fail(c, VX_EINVAL, "not enough values to unpack (expected %d, got %zu)", want,
                           items->n);
        for (int i = 0; i < want; i++)
            if (!assign(c, target->list.v[i], items->v[i])) return false;
        return true;
    }
    case E_NSREF: {
        jx_val ns;
        if (!lookup(c, target->name, &ns)) return false;
        if (ns.type != JX_NS)
            return jx_fail(c, VX_EINVAL, "cannot assign attribute on non-namespace object");
        jx_val key;
        return jx_mkstr(c, target->name2, strlen(target->name2), &key) &&
               jx_dict_set(c, ns.u.d, key, v);
    }
    default: return jx_fail(c, VX_EINTERNAL, "bad assignment target");
    }
}

/* ------------------------------------------------------------- calls */

static bool eval_args(jx_ctx *c, const jx_node *n, jx_args *a, const char *extra_name,
                      jx_val extra) {
    int npos = n->list.n, nkw = n->list2.n + (extra_name ? 1 : 0);
    jx_val *pos = jx_alloc(c, (size_t)(npos ? npos : 1) * sizeof(jx_val));
    jx_val *kwv = jx_alloc(c, (size_t)(nkw ? nkw : 1) * sizeof(jx_val));
    const char **kwn = jx_alloc(c, (size_t)(nkw ? nkw : 1) * sizeof(char *));
    if (!pos || !kwv || !kwn) return false;
    for (int i = 0; i < npos; i++)
        if (!eval(c, n->list.v[i], &pos[i])) return false;
    for (int i = 0; i < n->list2.n; i++) {
        kwn[i] = n->names[i];
        if (!eval(c, n->list2.v[i], &kwv[i])) return false;
    }
    if (extra_name) {
        kwn[nkw - 1] = extra_name;
        kwv[nkw - 1] = extra;
    }
    a->npos = npos;
    a->pos = pos;
    a->nkw = nkw;
    a->kwn = kwn;
    a->kwv = kwv;
    return true;
}

/* Runs body with output captured into a string. A break/continue inside
 * (a {% set %} block in a loop) propagates without producing the string. */
static flow capture(jx_ctx *c, const jx_nodes *body, jx_val *out) {
    jx_buf buf = {0};
    jx_buf *saved = c->out;
    c->out = &buf;
    flow f = exec_body(c, body);
    c->out = saved;
    if (f == FL_OK && !jx_mkstr(c, buf.p ? buf.p : "", buf.n, out)) f = FL_ERR;
    jx_buf_free(&buf);
    return f;
}

static bool call_macro(jx_ctx *c, const jx_macro *m, const jx_args *a, jx_val *out) {
    const jx_node *def = m->def;
    const char *mname = def->name ? def->name : "caller";
    if (c->depth >= c->lim.max_depth)
        return jx_fail(c, VX_ERANGE, "macro calls nested more than %d deep", c->lim.max_depth);
    jx_scope *s = jx_scope_new(c, m->closure);
    bool *bound = jx_alloc(c, (size_t)(def->nnames ? def->nnames : 1) * sizeof(bool));
    jx_val varargs, kwargs = {JX_DICT, 0, {.d = NULL}}, caller = jx_undef("caller");
    if (!s || !bound || !jx_mklist(c, 0, &varargs) || !(kwargs.u.d = jx_dict_new(c, 0)))
        return false;
    memset(bound, 0, (size_t)(def->nnames ? def->nnames : 1) * sizeof(bool));
    for (int i = 0; i < a->npos; i++) {
        if (i < def->nnames) {
            if (!jx_scope_set(c, s, def->names[i], a->pos[i])) return false;
            bound[i] = true;
        } else if (!(def->op & JX_MACRO_VARARGS)) {
            return jx_fail(c, VX_EINVAL, "macro '%s' takes not more than %d argument(s)", mname,
                           def->nnames);
        } else if (!jx_list_push(c, varargs.u.l, a->pos[i])) {
            return false;
        }
    }
    varargs.flags = JX_F_TUPLE;
    for (int k = 0; k < a->nkw; k++) {
        int i;
        for (i = 0; i < def->nnames; i++)
            if (!strcmp(def->names[i], a->kwn[k])) break;
        if (i < def->nnames) {
            if (bound[i])
                return jx_fail(c, VX_EINVAL, "macro '%s' got multiple values for argument '%s'",
                               mname, a->kwn[k]);
            if (!jx_scope_set(c, s, def->names[i], a->kwv[k])) return false;
            bound[i] = true;
        } else if (!strcmp(a->kwn[k], "caller") && (def->op & JX_MACRO_CALLER)) {
            caller = a->kwv[k];
        } else if (!(def->op & JX_MACRO_KWARGS)) {
            return jx_fail(c, VX_EINVAL, "macro '%s' takes no keyword argument '%s'", mname,
                           a->kwn[k]);
        } else {
            jx_val key;
            if (!jx_mkstr(c, a->kwn[k], strlen(a->kwn[k]), &key) ||
                !jx_dict_set(c, kwargs.u.d, key, a->kwv[k]))
                return false;
        }
    }
    jx_scope *saved = c->scope;
    c->scope = s;
    bool ok = true;
    /* defaults are evaluated inside the macro, after the earlier parameters */
    for (int i = 0; ok && i < def->nnames; i++) {
        if (bound[i]) continue;
        jx_val v = jx_undef(def->names[i]);
        if (def->list2.v[i]) ok = eval(c, def->list2.v[i], &v);
        ok = ok && jx_scope_set(c, s, def->names[i], v);
    }
    ok = ok && jx_scope_set(c, s, "varargs", varargs) && jx_scope_set(c, s, "kwargs", kwargs);
    if (ok && caller.type != JX_UNDEF) ok = jx_scope_set(c, s, "caller", caller);
    if (ok) {
        c->depth++;
        flow f = capture(c, &def->list, out);
        c->depth--;
        ok = f == FL_OK;
        if (f == FL_BREAK || f == FL_CONTINUE)
            ok = jx_fail(c, VX_EINTERNAL, "loop control escaped a macro");
    }
    c->scope = saved;
    return ok;
}

static bool call_value(jx_ctx *c, jx_val fn, const jx_args *a, jx_val *out);

bool jx_call(jx_ctx *c, jx_val fn, const jx_args *a, jx_val *out) {
    if (!jx_enter(c)) return false;
    bool ok = call_value(c, fn, a, out);
    jx_leave(c);
    return ok;
}

static bool call_value(jx_ctx *c, jx_val fn, const jx_args *a, jx_val *out) {
    switch (fn.type) {
    case JX_FUNC: return jx_call_builtin(c, fn.u.fn, a, out);
    case JX_MACRO: return call_macro(c, fn.u.m, a, out);
    case JX_UNDEF: return jx_undef_fail(c, fn);
    case JX_LOOP: return jx_fail(c, VX_EUNSUPPORTED, "recursive loops are not supported");
    default: return jx_fail(c, VX_EINVAL, "'%s' object is not callable", jx_type_name(fn));
    }
}

static bool eval_call(jx_ctx *c, const jx_node *n, const char *extra_name, jx_val extra,
                      jx_val *out) {
    jx_val fn;
    jx_args a;
    if (!eval(c, n->a, &fn) || !eval_args(c, n, &a, extra_name, extra)) return false;
    c->line = n->line;
    return jx_call(c, fn, &a, out);
}

/* Applies a filter chain (E_FILTER nodes whose innermost operand is NULL)
 * to a value: used by {% filter %} and {% set x | f %} blocks. */
static bool apply_chain(jx_ctx *c, const jx_node *f, jx_val v, jx_val *out) {
    if (f->a && !apply_chain(c, f->a, v, &v)) return false;
    jx_args a;
    if (!eval_args(c, f, &a, NULL, jx_none())) return false;
    c->line = f->line;
    return jx_apply_filter(c, f->name, v, &a, out);
}

/* ---------------------------------------------------------- expressions */

static bool compare(jx_ctx *c, int op, jx_val a, jx_val b, bool *res) {
    int r;
    switch (op) {
    case OP_EQ: return jx_equal_c(c, a, b, res);
    case OP_NE:
        if (!jx_equal_c(c, a, b, res)) return false;
        *res = !*res;
        return true;
    case OP_IN: return jx_contains(c, b, a, res);
    case OP_NOTIN:
        if (!jx_contains(c, b, a, res)) return false;
        *res = !*res;
        return true;
    default: break;
    }
    if ((a.type == JX_FLOAT && isnan(a.u.f)) || (b.type == JX_FLOAT && isnan(b.u.f))) {
        *res = false; /* NaN is unordered */
        return true;
    }
    if (!jx_compare(c, a, b, false, &r)) return false;
    *res = op == OP_LT ? r < 0 : op == OP_LE ? r <= 0 : op == OP_GT ? r > 0 : r >= 0;
    return true;
}

static bool eval_seq(jx_ctx *c, const jx_node *n, jx_val *out) {
    if (!jx_mklist(c, (size_t)n->list.n, out)) return false;
    for (int i = 0; i < n->list.n; i++)
        if (!eval(c, n->list.v[i], &out->u.l->v[i])) return false;
    out->u.l->n = (size_t)n->list.n;
    out->flags = n->kind == E_TUPLE ? JX_F_TUPLE : 0;
    return true;
}

static bool eval_node(jx_ctx *c, const jx_node *n, jx_val *out);

static bool eval(jx_ctx *c, const jx_node *n, jx_val *out) {
    c->line = n->line;
    if (!jx_enter(c)) return false;
    bool ok = eval_node(c, n, out);
    jx_leave(c);
    return ok;
}

static bool eval_node(jx_ctx *c, const jx_node *n, jx_val *out) {
    if (!jx_step(c)) return false;
    c->line = n->line;
    jx_val a, b;
    switch ((jx_kind)n->kind) {
    case E_CONST: *out = n->cval; return true;
    case E_NAME: return lookup(c, n->name, out);
    case E_GETATTR:
        if (!eval(c, n->a, &a)) return false;
        c->line = n->line;
        return jx_getattr(c, a, n->name, out);
    case E_GETITEM:
        if (!eval(c, n->a, &a)) return false;
        if (n->b->kind == E_SLICE) {
            jx_val parts[3] = {jx_none(), jx_none(), jx_none()};
            const jx_node *pn[3] = {n->b->a, n->b->b, n->b->c};
            for (int i = 0; i < 3; i++)
                if (pn[i] && !eval(c, pn[i], &parts[i])) return false;
            c->line = n->line;
            return jx_slice(c, a, parts[0], parts[1], parts[2], out);
        }
        if (!eval(c, n->b, &b)) return false;
        c->line = n->line;
        return jx_getitem(c, a, b, out);
    case E_CALL: return eval_call(c, n, NULL, jx_none(), out);
    case E_FILTER: {
        jx_args args;
        if (!eval(c, n->a, &a) || !eval_args(c, n, &args, NULL, jx_none())) return false;
        c->line = n->line;
        return jx_apply_filter(c, n->name, a, &args, out);
    }
    case E_TEST: {
        jx_args args;
        bool r;
        if (!eval(c, n->a, &a) || !eval_args(c, n, &args, NULL, jx_none())) return false;
        c->line = n->line;
        if (!jx_apply_test(c, n->name, a, &args, &r)) return false;
        *out = jx_bool(n->op ? !r : r);
        return true;
    }
    case E_UNARY:
        if (!eval(c, n->a, &a)) return false;
        c->line = n->line;
        if (n->op == OP_NOT) {
            *out = jx_bool(!jx_truthy(a));
            return true;
        }
        if (a.type == JX_UNDEF) return jx_undef_fail(c, a);
        if (!jx_is_num(a))
            return jx_fail(c, VX_EINVAL, "bad operand type for unary %c: '%s'",
                           n->op == OP_NEG ? '-' : '+', jx_type_name(a));
        if (n->op == OP_POS) *out = a.type == JX_BOOL ? jx_int(a.u.b) : a;
        else if (a.type == JX_FLOAT) *out = jx_float(-a.u.f);
        else if (jx_int_of(a) == INT64_MIN) return jx_fail(c, VX_ERANGE, "integer overflow");
        else *out = jx_int(-jx_int_of(a));
        return true;
    case E_BINARY:
        if (!eval(c, n->a, &a) || !eval(c, n->b, &b)) return false;
        c->line = n->line;
        return jx_binop(c, n->op, a, b, out);
    case E_AND:
        if (!eval(c, n->a, &a)) return false;
        if (!jx_truthy(a)) {
            *out = a;
            return true;
        }
        return eval(c, n->b, out);
    case E_OR:
        if (!eval(c, n->a, &a)) return false;
        if (jx_truthy(a)) {
            *out = a;
            return true;
        }
        return eval(c, n->b, out);
    case E_CONCAT: {
        jx_buf buf = {0};
        bool ok = true;
        for (int i = 0; ok && i < n->list.n; i++)
            ok = eval(c, n->list.v[i], &a) && jx_write_str(c, &buf, a);
        ok = ok && jx_mkstr(c, buf.p ? buf.p : "", buf.n, out);
        jx_buf_free(&buf);
        return ok;
    }
    case E_COMPARE: {
        if (!eval(c, n->a, &a)) return false;
        for (int i = 0; i < n->list.n; i++) {
            const jx_node *o = n->list.v[i];
            bool r;
            if (!eval(c, o->a, &b)) return false;
            c->line = o->line;
            if (!compare(c, o->op, a, b, &r)) return false;
            if (!r) {
                *out = jx_bool(false);
                return true;
            }
            a = b;
        }
        *out = jx_bool(true);
        return true;
    }
    case E_COND:
        if (!eval(c, n->a, &a)) return false;
        if (jx_truthy(a)) return eval(c, n->b, out);
        if (n->c) return eval(c, n->c, out);
        *out = jx_undef(NULL);
        return true;
    case E_LIST:
    case E_TUPLE: return eval_seq(c, n, out);
    case E_DICT: {
        jx_dict *d = jx_dict_new(c, (size_t)n->list.n);
        if (!d) return false;
        for (int i = 0; i < n->list.n; i++) {
            if (!eval(c, n->list.v[i], &a) || !eval(c, n->list2.v[i], &b)) return false;
            c->line = n->line;
            if (!jx_dict_set(c, d, a, b)) return false;
        }
        out->type = JX_DICT;
        out->flags = 0;
        out->u.d = d;
        return true;
    }
    default: return jx_fail(c, VX_EINTERNAL, "unexpected node %d in an expression", n->kind);
    }
}

/* ----------------------------------------------------------- statements */

static flow exec_for(jx_ctx *c, const jx_node *n) {
    jx_val it;
    jx_list *src;
    if (!eval(c, n->b, &it)) return FL_ERR;
    c->line = n->line;
    if (!jx_iterate(c, it, &src)) return FL_ERR;
    jx_scope *outer = c->scope, *s = jx_scope_new(c, outer);
    if (!s) return FL_ERR;
    const jx_val *items = src->v;
    size_t count = src->n;
    if (n->c) { /* {% for x in xs if cond %}: the loop sees only the kept items */
        jx_list *kept = jx_list_new(c, 0);
        if (!kept) return FL_ERR;
        c->scope = s;
        for (size_t i = 0; i < count; i++) {
            jx_val t;
            s->n = 0;
            if (!jx_step(c) || !assign(c, n->a, items[i]) || !eval(c, n->c, &t) ||
                (jx_truthy(t) && !jx_list_push(c, kept, items[i]))) {
                c->scope = outer;
                return FL_ERR;
            }
        }
        c->scope = outer;
        items = kept->v;
        count = kept->n;
    }
    if (count == 0) {
        if (!n->list2.n) return FL_OK;
        s->n = 0;
        c->scope = s;
        flow f = exec_body(c, &n->list2);
        c->scope = outer;
        return f;
    }
    jx_loop *lp = jx_alloc(c, sizeof *lp);
    if (!lp) return FL_ERR;
    memset(lp, 0, sizeof *lp);
    lp->items = items;
    lp->length = count;
    jx_val loopv = {JX_LOOP, 0, {.loop = lp}};
    flow result = FL_OK;
    c->scope = s;
    for (size_t i = 0; i < count; i++) {
        s->n = 0; /* a fresh scope per iteration, as in jinja2 */
        lp->index0 = i;
        if (!jx_step(c) || !jx_scope_set(c, s, "loop", loopv) || !assign(c, n->a, items[i])) {
            result = FL_ERR;
            break;
        }
        flow f = exec_body(c, &n->list);
        if (f == FL_ERR) {
            result = FL_ERR;
            break;
        }
        if (f == FL_BREAK) break;
    }
    c->scope = outer;
    return result;
}

static bool make_macro(jx_ctx *c, const jx_node *def, jx_val *out) {
    jx_macro *m = jx_alloc(c, sizeof *m);
    if (!m) return false;
    m->def = def;
    m->closure = c->scope;
    out->type = JX_MACRO;
    out->flags = 0;
    out->u.m = m;
    return true;
}

static flow exec_stmt(jx_ctx *c, const jx_node *n);

static flow exec_node(jx_ctx *c, const jx_node *n) {
    c->line = n->line;
    if (!jx_enter(c)) return FL_ERR;
    flow f = exec_stmt(c, n);
    jx_leave(c);
    return f;
}

static flow exec_stmt(jx_ctx *c, const jx_node *n) {
    jx_val v;
    c->line = n->line;
    if (!jx_step(c)) return FL_ERR;
    switch ((jx_kind)n->kind) {
    case S_DATA:
        return jx_buf_put(c, c->out, n->cval.u.s->s, n->cval.u.s->len) ? FL_OK : FL_ERR;
    case S_OUTPUT:
        if (!eval(c, n->a, &v)) return FL_ERR;
        c->line = n->line;
        return jx_write_str(c, c->out, v) ? FL_OK : FL_ERR;
    case S_IF:
        if (!eval(c, n->a, &v)) return FL_ERR;
        return exec_body(c, jx_truthy(v) ? &n->list : &n->list2);
    case S_FOR: return exec_for(c, n);
    case S_SET:
        if (!eval(c, n->b, &v)) return FL_ERR;
        c->line = n->line;
        return assign(c, n->a, v) ? FL_OK : FL_ERR;
    case S_SETBLOCK: { /* the body gets its own scope, as in jinja2 */
        jx_scope *outer = c->scope, *s = jx_scope_new(c, outer);
        if (!s) return FL_ERR;
        c->scope = s;
        flow f = capture(c, &n->list, &v);
        c->scope = outer;
        if (f != FL_OK) return f;
        c->line = n->line;
        if (n->b && !apply_chain(c, n->b, v, &v)) return FL_ERR;
        return assign(c, n->a, v) ? FL_OK : FL_ERR;
    }
    case S_MACRO:
        return make_macro(c, n, &v) && jx_scope_set(c, c->scope, n->name, v) ? FL_OK : FL_ERR;
    case S_CALLBLOCK: {
        jx_val caller, r;
        if (!make_macro(c, n, &caller) || !eval_call(c, n->a, "caller", caller, &r)) return FL_ERR;
        return jx_write_str(c, c->out, r) ? FL_OK : FL_ERR;
    }
    case S_FILTERBLOCK: {
        jx_scope *outer = c->scope, *s = jx_scope_new(c, outer);
        if (!s) return FL_ERR;
        c->scope = s;
        flow f = capture(c, &n->list, &v);
        c->scope = outer;
        if (f != FL_OK) return f;
        c->line = n->line;
        if (!apply_chain(c, n->b, v, &v)) return FL_ERR;
        return jx_write_str(c, c->out, v) ? FL_OK : FL_ERR;
    }
    case S_WITH: {
        jx_scope *outer = c->scope, *s = jx_scope_new(c, outer);
        if (!s) return FL_ERR;
        for (int i = 0; i < n->nnames; i++) /* values see the outer scope */
            if (!eval(c, n->list2.v[i], &v) || !jx_scope_set(c, s, n->names[i], v)) return FL_ERR;
        c->scope = s;
        flow f = exec_body(c, &n->list);
        c->scope = outer;
        return f;
    }
    case S_BREAK: return FL_BREAK;
    case S_CONTINUE: return FL_CONTINUE;
    case S_BODY: return exec_body(c, &n->list);
    default: jx_fail(c, VX_EINTERNAL, "unexpected node %d in a statement", n->kind); return FL_ERR;
    }
}

static flow exec_body(jx_ctx *c, const jx_nodes *body) {
    for (int i = 0; i < body->n; i++) {
        flow f = exec_node(c, body->v[i]);
        if (f != FL_OK) return f;
    }
    return FL_OK;
}

vx_status jx_render(jx_ctx *c, const jx_nodes *body, jx_scope *root, jx_buf *out) {
    c->scope = root;
    c->out = out;
    flow f = exec_body(c, body);
    if (f == FL_ERR || c->status != VX_OK) return c->status != VX_OK ? c->status : VX_EINTERNAL;
    return VX_OK;
}
