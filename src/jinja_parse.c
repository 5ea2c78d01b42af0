/*
 * jinja_parse.c - recursive-descent parser from tokens to the AST, following
 * jinja2's grammar and operator precedence:
 *   cond-expr < or < and < not < comparisons (chained, in, not in)
 *   < + - < ~ < * / // % < ** < unary - + < postfix (.x [i] [a:b] call)
 *   then filters (|f) and tests (is [not] t) bind to the unary operand.
 * Statements: if/elif/else, for (target unpacking, "if" filter, else), set
 * (also ns.attr and block form), macro, call, filter, with, break/continue,
 * and HF's {% generation %}. Nesting is bounded so hostile input cannot
 * exhaust the C stack.
 */
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 200         /* parser recursion */
#define MAX_TREE_HEIGHT 1000 /* AST height, see check_height() */

typedef struct parser {
    jx_arena *a;
    const jx_token *t;
    size_t n, i;
    int depth;
    int loop_depth; /* for break/continue: loops enclosing the current point */
    char *err;
    size_t err_size;
    vx_status status;
} parser;

typedef struct nbuild {
    jx_node **v;
    int n, cap;
} nbuild;

static const char *OP_TEXT[] = {
    [OP_ADD] = "+",      [OP_SUB] = "-",      [OP_MUL] = "*",      [OP_DIV] = "/",
    [OP_FLOORDIV] = "//", [OP_MOD] = "%",     [OP_POW] = "**",     [OP_TILDE] = "~",
    [OP_LBRACKET] = "[", [OP_RBRACKET] = "]", [OP_LPAREN] = "(",   [OP_RPAREN] = ")",
    [OP_LBRACE] = "{",   [OP_RBRACE] = "}",   [OP_EQ] = "==",      [OP_NE] = "!=",
    [OP_GT] = ">",       [OP_GE] = ">=",      [OP_LT] = "<",       [OP_LE] = "<=",
    [OP_ASSIGN] = "=",   [OP_DOT] = ".",      [OP_COLON] = ":",    [OP_PIPE] = "|",
    [OP_COMMA] = ",",    [OP_SEMI] = ";",
};

static const jx_token *cur(const parser *P) { return &P->t[P->i < P->n ? P->i : P->n - 1]; }
static const jx_token *peek(const parser *P, size_t k) {
    size_t j = P->i + k;
    return &P->t[j < P->n ? j : P->n - 1];
}
static void advance(parser *P) {
    if (P->i + 1 < P->n) P->i++;
}

static bool is_op(const jx_token *t, jx_op op) { return t->type == T_OP && t->op == op; }
static bool is_name(const jx_token *t, const char *name) {
    return t->type == T_NAME && strcmp(t->s, name) == 0;
}

static void describe(const jx_token *t, char *buf, size_t size) {
    switch ((jx_tok_type)t->type) {
    case T_EOF: snprintf(buf, size, "end of template"); break;
    case T_DATA: snprintf(buf, size, "template data"); break;
    case T_VAR_BEGIN: snprintf(buf, size, "begin of print statement"); break;
    case T_VAR_END: snprintf(buf, size, "end of print statement"); break;
    case T_BLOCK_BEGIN: snprintf(buf, size, "begin of statement block"); break;
    case T_BLOCK_END: snprintf(buf, size, "end of statement block"); break;
    case T_NAME: snprintf(buf, size, "'%.60s'", t->s); break;
    case T_STRING: snprintf(buf, size, "string"); break;
    case T_INT: snprintf(buf, size, "integer"); break;
    case T_FLOAT: snprintf(buf, size, "float"); break;
    case T_OP:
        snprintf(buf, size, "'%s'", t->op < sizeof OP_TEXT / sizeof OP_TEXT[0] && OP_TEXT[t->op]
                                        ? OP_TEXT[t->op]
                                        : "?");
        break;
    }
}

static bool fail_at(parser *P, const jx_token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail_at(parser *P, const jx_token *t, const char *fmt, ...) {
    if (P->status != VX_OK) return false;
    P->status = VX_EFORMAT;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (P->err && P->err_size)
        snprintf(P->err, P->err_size, "template syntax error at %d:%d: %s", t->line, t->col, msg);
    return false;
}

static bool oom(parser *P) {
    if (P->status == VX_OK) {
        P->status = VX_ENOMEM;
        if (P->err && P->err_size) snprintf(P->err, P->err_size, "out of memory");
    }
    return false;
}

static bool unexpected(parser *P, const char *what) {
    char d[80];
    describe(cur(P), d, sizeof d);
    return fail_at(P, cur(P), "expected %s, got %s", what, d);
}

static bool expect_op(parser *P, jx_op op) {
    if (!is_op(cur(P), op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", OP_TEXT[op]);
        return unexpected(P, want);
    }
    advance(P);
    return true;
}

static bool expect_type(parser *P, jx_tok_type type) {
    if (cur(P)->type != type) {
        jx_token fake;
        memset(&fake, 0, sizeof fake);
        fake.type = (uint8_t)type;
        char want[48];
        describe(&fake, want, sizeof want);
        return unexpected(P, want);
    }
    advance(P);
    return true;
}

static jx_node *node_new(parser *P, jx_kind kind, const jx_token *t) {
    jx_node *n = jx_arena_alloc(P->a, sizeof *n);
    if (!n) {
        oom(P);
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = t->line;
    n->col = t->col;
    return n;
}

static bool nb_push(parser *P, nbuild *b, jx_node *n) {
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 4;
        jx_node **v = jx_arena_alloc(P->a, (size_t)cap * sizeof *v);
        if (!v) return oom(P);
        if (b->n) memcpy(v, b->v, (size_t)b->n * sizeof *v);
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = n;
    return true;
}

static jx_nodes nb_done(const nbuild *b) {
    jx_nodes l = {b->v, b->n};
    return l;
}

static bool enter(parser *P) {
    if (++P->depth > MAX_NEST) return fail_at(P, cur(P), "template nested too deeply");
    return true;
}

static jx_node *const_str(parser *P, const jx_token *t, const char *s, size_t n) {
    jx_node *node = node_new(P, E_CONST, t);
    if (!node) return NULL;
    jx_str *str = jx_str_new(P->a, s, n);
    if (!str) {
        oom(P);
        return NULL;
    }
    node->cval.type = JX_STR;
    node->cval.u.s = str;
    return node;
}

/* ------------------------------------------------------------ expressions */

static jx_node *parse_expression(parser *P, bool with_condexpr);
static jx_node *parse_tuple(parser *P, bool with_condexpr, const char *extra_end,
                            bool explicit_parens);
static jx_node *parse_unary(parser *P, bool with_filter);
static jx_node *parse_primary(parser *P);
static jx_node *parse_postfix(parser *P, jx_node *node);
static jx_node *parse_filter(parser *P, jx_node *node, bool start_inline);

/* Call arguments after "(": positional, then name=value keywords. */
static bool parse_call_args(parser *P, jx_node *call) {
    nbuild pos = {0}, kw = {0};
    const char *names[64];
    int nnames = 0;
    if (!expect_op(P, OP_LPAREN)) return false;
    bool need_comma = false;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (need_comma) {
            if (!expect_op(P, OP_COMMA)) return false;
            if (is_op(cur(P), OP_RPAREN)) break;
        }
        if (is_op(cur(P), OP_MUL) || is_op(cur(P), OP_POW))
            return fail_at(P, cur(P), "*args and **kwargs in calls are not supported");
        if (cur(P)->type == T_NAME && is_op(peek(P, 1), OP_ASSIGN)) {
            if (nnames >= 64) return fail_at(P, cur(P), "too many keyword arguments");
            names[nnames++] = cur(P)->s;
            advance(P);
            advance(P);
            jx_node *v = parse_expression(P, true);
            if (!v || !nb_push(P, &kw, v)) return false;
        } else {
            if (kw.n) return fail_at(P, cur(P), "positional argument follows keyword argument");
            jx_node *v = parse_expression(P, true);
            if (!v || !nb_push(P, &pos, v)) return false;
        }
        need_comma = true;
    }
    if (!expect_op(P, OP_RPAREN)) return false;
    call->list = nb_done(&pos);
    call->list2 = nb_done(&kw);
    call->nnames = nnames;
    if (nnames) {
        call->names = jx_arena_alloc(P->a, (size_t)nnames * sizeof(char *));
        if (!call->names) return oom(P);
        memcpy(call->names, names, (size_t)nnames * sizeof(char *));
    }
    return true;
}

static jx_node *parse_call(parser *P, jx_node *fn) {
    jx_node *n = node_new(P, E_CALL, cur(P));
    if (!n) return NULL;
    n->a = fn;
    return parse_call_args(P, n) ? n : NULL;
}

/* Dotted names are allowed for filters and tests, as in jinja2. */
static const char *dotted_name(parser *P) {
    if (cur(P)->type != T_NAME) {
        unexpected(P, "name");
        return NULL;
    }
    const char *name = cur(P)->s;
    advance(P);
    while (is_op(cur(P), OP_DOT) && peek(P, 1)->type == T_NAME) {
        size_t a = strlen(name), b = strlen(peek(P, 1)->s);
        char *s = jx_arena_alloc(P->a, a + b + 2);
        if (!s) {
            oom(P);
            return NULL;
        }
        memcpy(s, name, a);
        s[a] = '.';
        memcpy(s + a + 1, peek(P, 1)->s, b + 1);
        name = s;
        advance(P);
        advance(P);
    }
    return name;
}

static jx_node *parse_filter(parser *P, jx_node *node, bool start_inline) {
    while (is_op(cur(P), OP_PIPE) || start_inline) {
        if (!start_inline) advance(P);
        start_inline = false;
        jx_node *f = node_new(P, E_FILTER, cur(P));
        if (!f) return NULL;
        f->a = node;
        if (!(f->name = dotted_name(P))) return NULL;
        if (is_op(cur(P), OP_LPAREN) && !parse_call_args(P, f)) return NULL;
        node = f;
    }
    return node;
}

static jx_node *parse_test(parser *P, jx_node *node) {
    jx_node *t = node_new(P, E_TEST, cur(P));
    if (!t) return NULL;
    advance(P); /* "is" */
    t->a = node;
    if (is_name(cur(P), "not")) {
        t->op = 1;
        advance(P);
    }
    if (!(t->name = dotted_name(P))) return NULL;
    const jx_token *c = cur(P);
    if (is_op(c, OP_LPAREN)) {
        if (!parse_call_args(P, t)) return NULL;
    } else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT ||
                c->type == T_FLOAT || is_op(c, OP_LBRACKET) || is_op(c, OP_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) {
            fail_at(P, c, "you cannot chain multiple tests with is");
            return NULL;
        }
        jx_node *arg = parse_primary(P);
        if (!arg || !(arg = parse_postfix(P, arg))) return NULL;
        nbuild b = {0};
        if (!nb_push(P, &b, arg)) return NULL;
        t->list = nb_done(&b);
    }
    return t;
}

static jx_node *parse_filter_expr(parser *P, jx_node *node) {
    for (;;) {
        if (is_op(cur(P), OP_PIPE)) node = parse_filter(P, node, false);
        else if (is_name(cur(P), "is")) node = parse_test(P, node);
        else if (is_op(cur(P), OP_LPAREN)) node = parse_call(P, node);
        else return node;
        if (!node) return NULL;
    }
}

static jx_node *parse_subscribed(parser *P) {
    const jx_token *start = cur(P);
    jx_node *args[3] = {NULL, NULL, NULL};
    if (is_op(cur(P), OP_COLON)) {
        advance(P);
    } else {
        jx_node *e = parse_expression(P, true);
        if (!e) return NULL;
        if (!is_op(cur(P), OP_COLON)) return e;
        advance(P);
        args[0] = e;
    }
    if (!is_op(cur(P), OP_COLON) && !is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA)) {
        if (!(args[1] = parse_expression(P, true))) return NULL;
    }
    if (is_op(cur(P), OP_COLON)) {
        advance(P);
        if (!is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA)) {
            if (!(args[2] = parse_expression(P, true))) return NULL;
        }
    }
    jx_node *s = node_new(P, E_SLICE, start);
    if (!s) return NULL;
    s->a = args[0];
    s->b = args[1];
    s->c = args[2];
    return s;
}

static jx_node *parse_subscript(parser *P, jx_node *node) {
    const jx_token *t = cur(P);
    if (is_op(t, OP_DOT)) {
        advance(P);
        const jx_token *at = cur(P);
        if (at->type == T_NAME) {
            jx_node *g = node_new(P, E_GETATTR, t);
            if (!g) return NULL;
            g->a = node;
            g->name = at->s;
            advance(P);
            return g;
        }
        if (at->type != T_INT) {
            unexpected(P, "name or number");
            return NULL;
        }
        jx_node *k = node_new(P, E_CONST, at);
        jx_node *g = node_new(P, E_GETITEM, t);
        if (!k || !g) return NULL;
        k->cval = jx_int(at->i);
        g->a = node;
        g->b = k;
        advance(P);
        return g;
    }
    advance(P); /* [ */
    nbuild args = {0};
    while (!is_op(cur(P), OP_RBRACKET)) {
        if (args.n && !expect_op(P, OP_COMMA)) return NULL;
        if (args.n && is_op(cur(P), OP_RBRACKET)) break;
        jx_node *e = parse_subscribed(P);
        if (!e || !nb_push(P, &args, e)) return NULL;
    }
    if (!expect_op(P, OP_RBRACKET)) return NULL;
    if (args.n == 0) {
        fail_at(P, t, "expected a subscript");
        return NULL;
    }
    jx_node *g = node_new(P, E_GETITEM, t);
    if (!g) return NULL;
    g->a = node;
    if (args.n == 1) {
        g->b = args.v[0];
    } else {
        jx_node *tup = node_new(P, E_TUPLE, t);
        if (!tup) return NULL;
        tup->list = nb_done(&args);
        g->b = tup;
    }
    return g;
}

static jx_node *parse_postfix(parser *P, jx_node *node) {
    for (;;) {
        if (is_op(cur(P), OP_DOT) || is_op(cur(P), OP_LBRACKET)) node = parse_subscript(P, node);
        else if (is_op(cur(P), OP_LPAREN)) node = parse_call(P, node);
        else return node;
        if (!node) return NULL;
    }
}

static jx_node *parse_primary(parser *P) {
    if (!enter(P)) return NULL;
    const jx_token *t = cur(P);
    jx_node *n = NULL;
    if (t->type == T_NAME) {
        n = node_new(P, E_CONST, t);
        if (!n) return NULL;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->cval = jx_bool(true);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->cval = jx_bool(false);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->cval = jx_none();
        else {
            n->kind = E_NAME;
            n->name = t->s;
        }
        advance(P);
    } else if (t->type == T_STRING) {
        size_t total = 0;
        size_t j;
        for (j = P->i; j < P->n && P->t[j].type == T_STRING; j++) total += P->t[j].n;
        if (j == P->i + 1) {
            n = const_str(P, t, t->s, t->n);
        } else { /* adjacent literals concatenate: "a" "b" */
            char *s = jx_arena_alloc(P->a, total + 1);
            if (!s) {
                oom(P);
                return NULL;
            }
            size_t k = 0;
            for (size_t m = P->i; m < j; m++) {
                memcpy(s + k, P->t[m].s, P->t[m].n);
                k += P->t[m].n;
            }
            n = const_str(P, t, s, total);
        }
        P->i = j;
        if (P->i >= P->n) P->i = P->n - 1;
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        n = node_new(P, E_CONST, t);
        if (!n) return NULL;
        n->cval = t->type == T_INT ? jx_int(t->i) : jx_float(t->f);
        advance(P);
    } else if (is_op(t, OP_LPAREN)) {
        advance(P);
        n = parse_tuple(P, true, NULL, true);
        if (!n || !expect_op(P, OP_RPAREN)) return NULL;
    } else if (is_op(t, OP_LBRACKET)) {
        advance(P);
        nbuild items = {0};
        while (!is_op(cur(P), OP_RBRACKET)) {
            if (items.n && !expect_op(P, OP_COMMA)) return NULL;
            if (is_op(cur(P), OP_RBRACKET)) break;
            jx_node *e = parse_expression(P, true);
            if (!e || !nb_push(P, &items, e)) return NULL;
        }
        if (!expect_op(P, OP_RBRACKET)) return NULL;
        if (!(n = node_new(P, E_LIST, t))) return NULL;
        n->list = nb_done(&items);
    } else if (is_op(t, OP_LBRACE)) {
        advance(P);
        nbuild keys = {0}, vals = {0};
        while (!is_op(cur(P), OP_RBRACE)) {
            if (keys.n && !expect_op(P, OP_COMMA)) return NULL;
            if (is_op(cur(P), OP_RBRACE)) break;
            jx_node *k = parse_expression(P, true);
            if (!k || !expect_op(P, OP_COLON)) return NULL;
            jx_node *v = parse_expression(P, true);
            if (!v || !nb_push(P, &keys, k) || !nb_push(P, &vals, v)) return NULL;
        }
        if (!expect_op(P, OP_RBRACE)) return NULL;
        if (!(n = node_new(P, E_DICT, t))) return NULL;
        n->list = nb_done(&keys);
        n->list2 = nb_done(&vals);
    } else {
        char d[80];
        describe(t, d, sizeof d);
        fail_at(P, t, "unexpected %s", d);
        return NULL;
    }
    P->depth--;
    return n;
}

static jx_node *parse_unary(parser *P, bool with_filter) {
    if (!enter(P)) return NULL;
    const jx_token *t = cur(P);
    jx_node *n;
    if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
        advance(P);
        n = node_new(P, E_UNARY, t);
        if (!n) return NULL;
        n->op = is_op(t, OP_SUB) ? OP_NEG : OP_POS;
        if (!(n->a = parse_unary(P, false))) return NULL;
    } else {
        n = parse_primary(P);
    }
    if (n) n = parse_postfix(P, n);
    if (n && with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static jx_node *binary(parser *P, const jx_token *t, jx_kind kind, int op, jx_node *a, jx_node *b) {
    if (!a || !b) return NULL;
    jx_node *n = node_new(P, kind, t);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jx_node *parse_pow(parser *P) {
    jx_node *left = parse_unary(P, true);
    while (left && is_op(cur(P), OP_POW)) {
        const jx_token *t = cur(P);
        advance(P);
        left = binary(P, t, E_BINARY, OP_POW, left, parse_unary(P, true));
    }
    return left;
}

static jx_node *parse_math2(parser *P) {
    jx_node *left = parse_pow(P);
    while (left && (is_op(cur(P), OP_MUL) || is_op(cur(P), OP_DIV) ||
                    is_op(cur(P), OP_FLOORDIV) || is_op(cur(P), OP_MOD))) {
        const jx_token *t = cur(P);
        advance(P);
        left = binary(P, t, E_BINARY, t->op, left, parse_pow(P));
    }
    return left;
}

static jx_node *parse_concat(parser *P) {
    const jx_token *t = cur(P);
    jx_node *first = parse_math2(P);
    if (!first || !is_op(cur(P), OP_TILDE)) return first;
    nbuild items = {0};
    if (!nb_push(P, &items, first)) return NULL;
    while (is_op(cur(P), OP_TILDE)) {
        advance(P);
        jx_node *e = parse_math2(P);
        if (!e || !nb_push(P, &items, e)) return NULL;
    }
    jx_node *n = node_new(P, E_CONCAT, t);
    if (!n) return NULL;
    n->list = nb_done(&items);
    return n;
}

static jx_node *parse_math1(parser *P) {
    jx_node *left = parse_concat(P);
    while (left && (is_op(cur(P), OP_ADD) || is_op(cur(P), OP_SUB))) {
        const jx_token *t = cur(P);
        advance(P);
        left = binary(P, t, E_BINARY, t->op, left, parse_concat(P));
    }
    return left;
}

static jx_node *parse_compare(parser *P) {
    const jx_token *start = cur(P);
    jx_node *expr = parse_math1(P);
    if (!expr) return NULL;
    nbuild ops = {0};
    for (;;) {
        const jx_token *t = cur(P);
        int op;
        if (t->type == T_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT ||
                                t->op == OP_LE || t->op == OP_GT || t->op == OP_GE)) {
            op = t->op;
            advance(P);
        } else if (is_name(t, "in")) {
            op = OP_IN;
            advance(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = OP_NOTIN;
            advance(P);
            advance(P);
        } else {
            break;
        }
        jx_node *o = node_new(P, E_OPERAND, t);
        if (!o) return NULL;
        o->op = (uint8_t)op;
        if (!(o->a = parse_math1(P)) || !nb_push(P, &ops, o)) return NULL;
    }
    if (!ops.n) return expr;
    jx_node *n = node_new(P, E_COMPARE, start);
    if (!n) return NULL;
    n->a = expr;
    n->list = nb_done(&ops);
    return n;
}

static jx_node *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        if (!enter(P)) return NULL;
        const jx_token *t = cur(P);
        advance(P);
        jx_node *n = node_new(P, E_UNARY, t);
        if (!n) return NULL;
        n->op = OP_NOT;
        if (!(n->a = parse_not(P))) return NULL;
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jx_node *parse_and(parser *P) {
    jx_node *left = parse_not(P);
    while (left && is_name(cur(P), "and")) {
        const jx_token *t = cur(P);
        advance(P);
        left = binary(P, t, E_AND, 0, left, parse_not(P));
    }
    return left;
}

static jx_node *parse_or(parser *P) {
    jx_node *left = parse_and(P);
    while (left && is_name(cur(P), "or")) {
        const jx_token *t = cur(P);
        advance(P);
        left = binary(P, t, E_OR, 0, left, parse_and(P));
    }
    return left;
}

static jx_node *parse_condexpr(parser *P) {
    if (!enter(P)) return NULL;
    jx_node *e1 = parse_or(P);
    while (e1 && is_name(cur(P), "if")) {
        const jx_token *t = cur(P);
        advance(P);
        jx_node *n = node_new(P, E_COND, t);
        if (!n) return NULL;
        n->b = e1;
        if (!(n->a = parse_or(P))) return NULL;
        if (is_name(cur(P), "else")) {
            advance(P);
            if (!(n->c = parse_condexpr(P))) return NULL;
        }
        e1 = n;
    }
    P->depth--;
    return e1;
}

static jx_node *parse_expression(parser *P, bool with_condexpr) {
    return with_condexpr ? parse_condexpr(P) : parse_or(P);
}

static bool tuple_end(parser *P, const char *extra_end) {
    const jx_token *t = cur(P);
    if (t->type == T_VAR_END || t->type == T_BLOCK_END || is_op(t, OP_RPAREN)) return true;
    return extra_end && is_name(t, extra_end);
}

static jx_node *parse_tuple(parser *P, bool with_condexpr, const char *extra_end,
                            bool explicit_parens) {
    const jx_token *start = cur(P);
    nbuild items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n && !expect_op(P, OP_COMMA)) return NULL;
        if (tuple_end(P, extra_end)) break;
        jx_node *e = parse_expression(P, with_condexpr);
        if (!e || !nb_push(P, &items, e)) return NULL;
        if (is_op(cur(P), OP_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) {
            unexpected(P, "an expression");
            return NULL;
        }
    }
    jx_node *n = node_new(P, E_TUPLE, start);
    if (!n) return NULL;
    n->list = nb_done(&items);
    return n;
}

/* Assignment targets: a name, or a tuple of targets for unpacking. */
static bool assignable(parser *P, const jx_node *n) {
    if (n->kind == E_NAME) return true;
    if (n->kind == E_TUPLE) {
        for (int i = 0; i < n->list.n; i++)
            if (!assignable(P, n->list.v[i])) return false;
        return true;
    }
    return false;
}

static jx_node *parse_target(parser *P, const char *extra_end) {
    const jx_token *start = cur(P);
    nbuild items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n && !expect_op(P, OP_COMMA)) return NULL;
        if (tuple_end(P, extra_end)) break;
        jx_node *e = parse_primary(P);
        if (!e || !nb_push(P, &items, e)) return NULL;
        if (is_op(cur(P), OP_COMMA)) is_tuple = true;
        else break;
    }
    jx_node *n;
    if (!is_tuple && items.n == 1) {
        n = items.v[0];
    } else {
        if (!(n = node_new(P, E_TUPLE, start))) return NULL;
        n->list = nb_done(&items);
    }
    if (items.n == 0 || !assignable(P, n)) {
        fail_at(P, start, "can't assign to this expression");
        return NULL;
    }
    return n;
}

/* ------------------------------------------------------------- statements */

static bool parse_body(parser *P, const char *const *ends, int nends, const jx_token *opener,
                       jx_nodes *out);

static bool end_tag(parser *P, const char *name) {
    if (!is_name(cur(P), name)) return unexpected(P, name);
    advance(P);
    return true;
}

/* Macro-style parameter list "(a, b=1)": names plus defaults (NULL if none). */
static bool parse_signature(parser *P, jx_node *n) {
    const char *names[64];
    nbuild defs = {0};
    int count = 0;
    bool any_default = false;
    if (!expect_op(P, OP_LPAREN)) return false;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (count && !expect_op(P, OP_COMMA)) return false;
        if (cur(P)->type != T_NAME) return unexpected(P, "parameter name");
        if (count >= 64) return fail_at(P, cur(P), "too many parameters");
        names[count++] = cur(P)->s;
        advance(P);
        jx_node *def = NULL;
        if (is_op(cur(P), OP_ASSIGN)) {
            advance(P);
            if (!(def = parse_expression(P, true))) return false;
            any_default = true;
        } else if (any_default) {
            return fail_at(P, cur(P), "non-default argument follows default argument");
        }
        if (!nb_push(P, &defs, def)) return false;
    }
    advance(P);
    n->nnames = count;
    n->list2 = nb_done(&defs);
    if (count) {
        n->names = jx_arena_alloc(P->a, (size_t)count * sizeof(char *));
        if (!n->names) return oom(P);
        memcpy(n->names, names, (size_t)count * sizeof(char *));
    }
    return true;
}

static jx_node *parse_if(parser *P, const jx_token *opener) {
    static const char *const ends[] = {"elif", "else", "endif"};
    jx_node *top = node_new(P, S_IF, opener), *n = top;
    if (!top) return NULL;
    for (;;) {
        if (!(n->a = parse_tuple(P, false, NULL, false))) return NULL;
        if (!expect_type(P, T_BLOCK_END)) return NULL;
        if (!parse_body(P, ends, 3, opener, &n->list)) return NULL;
        if (is_name(cur(P), "elif")) {
            jx_node *e = node_new(P, S_IF, cur(P));
            nbuild b = {0};
            if (!e || !nb_push(P, &b, e)) return NULL;
            advance(P);
            n->list2 = nb_done(&b);
            n = e;
            continue;
        }
        if (is_name(cur(P), "else")) {
            static const char *const endif[] = {"endif"};
            advance(P);
            if (!expect_type(P, T_BLOCK_END)) return NULL;
            if (!parse_body(P, endif, 1, opener, &n->list2)) return NULL;
        }
        return end_tag(P, "endif") ? top : NULL;
    }
}

static jx_node *parse_for(parser *P, const jx_token *opener) {
    static const char *const ends[] = {"endfor", "else"};
    static const char *const endfor[] = {"endfor"};
    jx_node *n = node_new(P, S_FOR, opener);
    if (!n) return NULL;
    if (!(n->a = parse_target(P, "in"))) return NULL;
    if (!is_name(cur(P), "in")) {
        unexpected(P, "'in'");
        return NULL;
    }
    advance(P);
    if (!(n->b = parse_tuple(P, false, "recursive", false))) return NULL;
    if (is_name(cur(P), "if")) {
        advance(P);
        if (!(n->c = parse_expression(P, true))) return NULL;
    }
    if (is_name(cur(P), "recursive")) {
        fail_at(P, cur(P), "recursive loops are not supported");
        return NULL;
    }
    if (!expect_type(P, T_BLOCK_END)) return NULL;
    P->loop_depth++;
    bool ok = parse_body(P, ends, 2, opener, &n->list);
    P->loop_depth--;
    if (!ok) return NULL;
    if (is_name(cur(P), "else")) {
        advance(P);
        if (!expect_type(P, T_BLOCK_END) || !parse_body(P, endfor, 1, opener, &n->list2))
            return NULL;
    }
    return end_tag(P, "endfor") ? n : NULL;
}

static jx_node *parse_set(parser *P, const jx_token *opener) {
    static const char *const ends[] = {"endset"};
    jx_node *target;
    if (cur(P)->type == T_NAME && is_op(peek(P, 1), OP_DOT)) {
        if (!(target = node_new(P, E_NSREF, cur(P)))) return NULL;
        target->name = cur(P)->s;
        advance(P);
        advance(P);
        if (cur(P)->type != T_NAME) {
            unexpected(P, "attribute name");
            return NULL;
        }
        target->name2 = cur(P)->s;
        advance(P);
    } else if (!(target = parse_target(P, NULL))) {
        return NULL;
    }
    if (is_op(cur(P), OP_ASSIGN)) {
        advance(P);
        jx_node *n = node_new(P, S_SET, opener);
        if (!n) return NULL;
        n->a = target;
        return (n->b = parse_tuple(P, true, NULL, false)) ? n : NULL;
    }
    jx_node *n = node_new(P, S_SETBLOCK, opener);
    if (!n) return NULL;
    n->a = target;
    if (is_op(cur(P), OP_PIPE) && !(n->b = parse_filter(P, NULL, false))) return NULL;
    if (!expect_type(P, T_BLOCK_END) || !parse_body(P, ends, 1, opener, &n->list)) return NULL;
    return end_tag(P, "endset") ? n : NULL;
}

/* Bodies of macros and call blocks run as functions: loops outside them do
 * not make break/continue legal inside. */
static bool parse_function_body(parser *P, const char *end, const jx_token *opener, jx_nodes *out) {
    const char *ends[1] = {end};
    int saved = P->loop_depth;
    P->loop_depth = 0;
    bool ok = expect_type(P, T_BLOCK_END) && parse_body(P, ends, 1, opener, out);
    P->loop_depth = saved;
    return ok && end_tag(P, end);
}

static jx_node *parse_macro(parser *P, const jx_token *opener) {
    jx_node *n = node_new(P, S_MACRO, opener);
    if (!n) return NULL;
    if (cur(P)->type != T_NAME) {
        unexpected(P, "macro name");
        return NULL;
    }
    n->name = cur(P)->s;
    advance(P);
    if (!parse_signature(P, n)) return NULL;
    return parse_function_body(P, "endmacro", opener, &n->list) ? n : NULL;
}

static jx_node *parse_call_block(parser *P, const jx_token *opener) {
    jx_node *n = node_new(P, S_CALLBLOCK, opener);
    if (!n) return NULL;
    if (is_op(cur(P), OP_LPAREN) && !parse_signature(P, n)) return NULL;
    const jx_token *t = cur(P);
    if (!(n->a = parse_expression(P, true))) return NULL;
    if (n->a->kind != E_CALL) {
        fail_at(P, t, "expected a call after {%% call %%}");
        return NULL;
    }
    return parse_function_body(P, "endcall", opener, &n->list) ? n : NULL;
}

static jx_node *parse_with(parser *P, const jx_token *opener) {
    static const char *const ends[] = {"endwith"};
    jx_node *n = node_new(P, S_WITH, opener);
    if (!n) return NULL;
    const char *names[64];
    int count = 0;
    nbuild vals = {0};
    while (cur(P)->type != T_BLOCK_END) {
        if (count && !expect_op(P, OP_COMMA)) return NULL;
        if (cur(P)->type != T_NAME) {
            unexpected(P, "name");
            return NULL;
        }
        if (count >= 64) {
            fail_at(P, cur(P), "too many assignments");
            return NULL;
        }
        names[count++] = cur(P)->s;
        advance(P);
        if (!expect_op(P, OP_ASSIGN)) return NULL;
        jx_node *v = parse_expression(P, true);
        if (!v || !nb_push(P, &vals, v)) return NULL;
    }
    n->nnames = count;
    n->list2 = nb_done(&vals);
    if (count) {
        if (!(n->names = jx_arena_alloc(P->a, (size_t)count * sizeof(char *)))) {
            oom(P);
            return NULL;
        }
        memcpy(n->names, names, (size_t)count * sizeof(char *));
    }
    if (!expect_type(P, T_BLOCK_END) || !parse_body(P, ends, 1, opener, &n->list)) return NULL;
    return end_tag(P, "endwith") ? n : NULL;
}

static jx_node *parse_statement(parser *P) {
    const jx_token *t = cur(P);
    if (t->type != T_NAME) {
        unexpected(P, "tag name");
        return NULL;
    }
    if (!enter(P)) return NULL;
    const char *name = t->s;
    advance(P);
    jx_node *n = NULL;
    if (!strcmp(name, "if")) {
        n = parse_if(P, t);
    } else if (!strcmp(name, "for")) {
        n = parse_for(P, t);
    } else if (!strcmp(name, "set")) {
        n = parse_set(P, t);
    } else if (!strcmp(name, "macro")) {
        n = parse_macro(P, t);
    } else if (!strcmp(name, "call")) {
        n = parse_call_block(P, t);
    } else if (!strcmp(name, "filter")) {
        static const char *const ends[] = {"endfilter"};
        n = node_new(P, S_FILTERBLOCK, t);
        if (n && !(n->b = parse_filter(P, NULL, true))) n = NULL;
        if (n && (!expect_type(P, T_BLOCK_END) || !parse_body(P, ends, 1, t, &n->list) ||
                  !end_tag(P, "endfilter")))
            n = NULL;
    } else if (!strcmp(name, "with")) {
        n = parse_with(P, t);
    } else if (!strcmp(name, "generation")) {
        static const char *const ends[] = {"endgeneration"};
        n = node_new(P, S_BODY, t);
        if (n && (!expect_type(P, T_BLOCK_END) || !parse_body(P, ends, 1, t, &n->list) ||
                  !end_tag(P, "endgeneration")))
            n = NULL;
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (P->loop_depth == 0) {
            fail_at(P, t, "'%s' outside of a loop", name);
            return NULL;
        }
        n = node_new(P, name[0] == 'b' ? S_BREAK : S_CONTINUE, t);
    } else if (!strcmp(name, "include") || !strcmp(name, "import") || !strcmp(name, "from") ||
               !strcmp(name, "extends") || !strcmp(name, "block") ||
               !strcmp(name, "autoescape") || !strcmp(name, "do")) {
        fail_at(P, t, "the '%s' tag is not supported", name);
        return NULL;
    } else {
        fail_at(P, t, "unknown tag '%.60s'", name);
        return NULL;
    }
    P->depth--;
    return n;
}

static bool in_ends(const jx_token *t, const char *const *ends, int nends) {
    if (t->type != T_NAME) return false;
    for (int i = 0; i < nends; i++)
        if (!strcmp(t->s, ends[i])) return true;
    return false;
}

/* Statements up to one of `ends` (left as the current token) or EOF (only
 * allowed at the top level, where ends is NULL). */
static bool parse_body(parser *P, const char *const *ends, int nends, const jx_token *opener,
                       jx_nodes *out) {
    nbuild body = {0};
    if (!enter(P)) return false;
    for (;;) {
        const jx_token *t = cur(P);
        jx_node *n = NULL;
        switch ((jx_tok_type)t->type) {
        case T_EOF:
            if (ends) {
                char want[160];
                int k = 0;
                for (int i = 0; i < nends && k < (int)sizeof want - 40; i++)
                    k += snprintf(want + k, sizeof want - (size_t)k, "%s'%s'", i ? " or " : "",
                                  ends[i]);
                return fail_at(P, t, "unexpected end of template, expected %s to close the "
                                     "block opened at %d:%d",
                               want, opener->line, opener->col);
            }
            *out = nb_done(&body);
            P->depth--;
            return true;
        case T_DATA:
            n = const_str(P, t, t->s, t->n);
            if (n) n->kind = S_DATA;
            advance(P);
            break;
        case T_VAR_BEGIN: {
            advance(P);
            n = node_new(P, S_OUTPUT, t);
            if (n && (!(n->a = parse_tuple(P, true, NULL, false)) || !expect_type(P, T_VAR_END)))
                n = NULL;
            break;
        }
        case T_BLOCK_BEGIN:
            if (ends && in_ends(peek(P, 1), ends, nends)) {
                advance(P);
                *out = nb_done(&body);
                P->depth--;
                return true;
            }
            advance(P);
            n = parse_statement(P);
            if (n && !expect_type(P, T_BLOCK_END)) n = NULL;
            break;
        default: {
            char d[80];
            describe(t, d, sizeof d);
            return fail_at(P, t, "unexpected %s", d);
        }
        }
        if (!n || !nb_push(P, &body, n)) return false;
    }
}

/* Which of the implicit macro variables a body reads: jinja2 only accepts
 * extra positional arguments when the macro uses varargs, unknown keywords
 * when it uses kwargs, and a caller when it uses caller. */
static int implicit_names(const jx_node *n) {
    if (!n) return 0;
    int f = 0;
    if (n->kind == E_NAME) {
        if (!strcmp(n->name, "varargs")) f |= JX_MACRO_VARARGS;
        else if (!strcmp(n->name, "kwargs")) f |= JX_MACRO_KWARGS;
        else if (!strcmp(n->name, "caller")) f |= JX_MACRO_CALLER;
    }
    f |= implicit_names(n->a) | implicit_names(n->b) | implicit_names(n->c);
    for (int i = 0; i < n->list.n; i++) f |= implicit_names(n->list.v[i]);
    for (int i = 0; i < n->list2.n; i++) f |= implicit_names(n->list2.v[i]);
    return f;
}

static int body_names(const jx_nodes *body) {
    int f = 0;
    for (int i = 0; i < body->n; i++) f |= implicit_names(body->v[i]);
    return f;
}

/* Sets the JX_MACRO_* flags of every macro and call block. */
static void mark_macros(jx_node *n) {
    if (!n) return;
    if (n->kind == S_MACRO || n->kind == S_CALLBLOCK) n->op = (uint8_t)body_names(&n->list);
    mark_macros(n->a);
    mark_macros(n->b);
    mark_macros(n->c);
    for (int i = 0; i < n->list.n; i++) mark_macros(n->list.v[i]);
    for (int i = 0; i < n->list2.n; i++) mark_macros(n->list2.v[i]);
}

/* Left-associative operators and postfix chains (a.b.c, x|f|g, 1+1+1) are
 * built by loops, so the recursion bound of the parser does not limit how
 * tall the tree gets. This iterative pass does, before anything walks the
 * tree recursively. */
static bool check_height(parser *P, const jx_nodes *body) {
    typedef struct item {
        const jx_node *n;
        int depth;
    } item;
    size_t cap = 256 + (size_t)body->n, top = 0;
    item *stack = malloc(cap * sizeof *stack);
    if (!stack) return oom(P);
    for (int i = 0; i < body->n; i++) stack[top++] = (item){body->v[i], 1};
    bool ok = true;
    while (ok && top > 0) {
        item it = stack[--top];
        if (it.depth > MAX_TREE_HEIGHT) {
            jx_token at;
            memset(&at, 0, sizeof at);
            at.line = it.n->line;
            at.col = it.n->col;
            ok = fail_at(P, &at, "expression nested too deeply");
            break;
        }
        const jx_node *kids[3] = {it.n->a, it.n->b, it.n->c};
        size_t need = top + 3 + (size_t)it.n->list.n + (size_t)it.n->list2.n;
        if (need > cap) {
            while (cap < need) cap *= 2;
            item *grown = realloc(stack, cap * sizeof *stack);
            if (!grown) {
                ok = oom(P);
                break;
            }
            stack = grown;
        }
        for (int k = 0; k < 3; k++)
            if (kids[k]) stack[top++] = (item){kids[k], it.depth + 1};
        for (int k = 0; k < it.n->list.n; k++)
            if (it.n->list.v[k]) stack[top++] = (item){it.n->list.v[k], it.depth + 1};
        for (int k = 0; k < it.n->list2.n; k++)
            if (it.n->list2.v[k]) stack[top++] = (item){it.n->list2.v[k], it.depth + 1};
    }
    free(stack);
    return ok;
}

vx_status jx_parse(jx_arena *a, const jx_tokens *toks, jx_nodes *out, char *err,
                   size_t err_size) {
    parser P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.t = toks->v;
    P.n = toks->n;
    P.err = err;
    P.err_size = err_size;
    if (P.n == 0) {
        out->v = NULL;
        out->n = 0;
        return VX_OK;
    }
    if (!parse_body(&P, NULL, 0, NULL, out) || !check_height(&P, out))
        return P.status != VX_OK ? P.status : VX_EFORMAT;
    for (int i = 0; i < out->n; i++) mark_macros(out->v[i]);
    return VX_OK;
}
