/*
 * jinja.h - internal interface of the Jinja-subset interpreter behind chat.h.
 *
 * Owns the shared types: the bump arena every value and AST node lives in,
 * the value model (Python-like: none, bool, int, float, str, list/tuple,
 * ordered dict, namespace, callables), tokens, AST nodes and the evaluation
 * context. The pieces:
 *   jinja_lex.c      source -> tokens (whitespace control, trim/lstrip_blocks)
 *   jinja_parse.c    tokens -> AST
 *   jinja_value.c    arena, strings, containers, equality/ordering, str/repr/JSON
 *   jinja_builtins.c filters, tests, Python methods, global functions
 *   jinja_eval.c     statements, expressions, scopes, macros, rendering
 * Errors never abort: every fallible function returns false (or NULL) after
 * recording the first error in the context.
 */
#ifndef VX_JINJA_H
#define VX_JINJA_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "vortex.h"

/* ------------------------------------------------------------------ arena */

typedef struct jx_chunk jx_chunk;

/* A bump allocator freed all at once. cap bounds the total bytes requested so
 * a runaway template hits a clean error instead of exhausting the machine. */
typedef struct jx_arena {
    jx_chunk *head;
    size_t used; /* bytes handed out (including alignment) */
    size_t cap;  /* 0 = unlimited */
    bool over;   /* the last failure was the cap, not malloc */
} jx_arena;

void jx_arena_init(jx_arena *a, size_t cap);
void jx_arena_free(jx_arena *a);
void *jx_arena_alloc(jx_arena *a, size_t n); /* 16-byte aligned, NULL on failure */

/* ----------------------------------------------------------------- values */

typedef enum jx_type {
    JX_UNDEF = 0, /* jinja2's default Undefined: prints "", iterates empty */
    JX_NONE,
    JX_BOOL,
    JX_INT,
    JX_FLOAT,
    JX_STR,
    JX_LIST, /* also tuples and one-shot iterators, see flags */
    JX_DICT,
    JX_NS,    /* namespace(): a dict with attribute syntax, mutable */
    JX_FUNC,  /* builtin function or bound method */
    JX_MACRO, /* template macro (or the caller of a call block) */
    JX_LOOP   /* the `loop` object of a for loop */
} jx_type;

enum {
    JX_F_SAFE = 1,  /* str: markupsafe.Markup (|safe, |escape) */
    JX_F_TUPLE = 2, /* list: a Python tuple */
    JX_F_ITER = 4,  /* list: a generator/iterator (select, map, ...): no len, always true */
    JX_F_HINT = 8   /* undefined: undef_name is a whole message, not a name */
};

typedef struct jx_str {
    size_t len; /* bytes */
    size_t ncp; /* code points (invalid UTF-8 bytes count one each) */
    char s[];   /* NUL-terminated */
} jx_str;

typedef struct jx_list jx_list;
typedef struct jx_dict jx_dict;
typedef struct jx_func jx_func;
typedef struct jx_macro jx_macro;
typedef struct jx_loop jx_loop;

typedef struct jx_val {
    uint8_t type;
    uint8_t flags;
    union {
        bool b;
        int64_t i;
        double f;
        jx_str *s;
        jx_list *l;
        jx_dict *d; /* JX_DICT and JX_NS */
        jx_func *fn;
        jx_macro *m;
        jx_loop *loop;
        const char *undef_name; /* JX_UNDEF: what was looked up (or why, JX_F_HINT); may be NULL */
    } u;
} jx_val;

struct jx_list {
    size_t n, cap;
    jx_val *v;
};

struct jx_dict {
    size_t n, cap;
    jx_val *k;
    jx_val *v;
};

struct jx_func {
    int id;      /* builtin id (jinja_builtins.c) */
    jx_val self; /* bound object for methods */
};

typedef struct jx_node jx_node;
typedef struct jx_scope jx_scope;

struct jx_macro {
    const jx_node *def; /* S_MACRO or S_CALLBLOCK */
    jx_scope *closure;  /* scope the macro was defined in */
};

struct jx_loop {
    size_t index0, length;
    const jx_val *items;
    jx_val last_changed; /* loop.changed() state */
    bool has_changed;
};

/* ----------------------------------------------------------------- tokens */

typedef enum jx_tok_type {
    T_EOF = 0,
    T_DATA,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP
} jx_tok_type;

typedef enum jx_op {
    OP_NONE = 0,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_EQ,
    OP_NE,
    OP_GT,
    OP_GE,
    OP_LT,
    OP_LE,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMI,
    /* not lexer operators: used by the AST */
    OP_IN,
    OP_NOTIN,
    OP_NEG,
    OP_POS,
    OP_NOT
} jx_op;

typedef struct jx_token {
    uint8_t type; /* jx_tok_type */
    uint8_t op;   /* jx_op for T_OP */
    int line, col;
    const char *s; /* T_DATA, T_NAME, T_STRING: text (NUL-terminated) */
    size_t n;
    int64_t i; /* T_INT */
    double f;  /* T_FLOAT */
} jx_token;

typedef struct jx_tokens {
    jx_token *v;
    size_t n;
} jx_tokens;

/* Tokenizes a template with HF's settings (trim_blocks, lstrip_blocks, no
 * trailing newline). Strings live in the arena. Errors: VX_EFORMAT with "line:col". */
vx_status jx_lex(jx_arena *a, const char *src, size_t len, jx_tokens *out, char *err,
                 size_t err_size);

/* -------------------------------------------------------------------- AST */

typedef enum jx_kind {
    /* expressions */
    E_CONST,
    E_NAME,
    E_GETATTR, /* a.name */
    E_GETITEM, /* a[b]; b may be E_SLICE */
    E_SLICE,   /* a:b:c, each may be NULL */
    E_CALL,    /* a(args) */
    E_FILTER,  /* a|name(args); a NULL for filter blocks */
    E_TEST,    /* a is [not] name(args); op = 1 when negated */
    E_UNARY,   /* op a */
    E_BINARY,  /* a op b */
    E_AND,
    E_OR,
    E_CONCAT,  /* list joined with ~ */
    E_COMPARE, /* a, then list of E_OPERAND (op, a) */
    E_OPERAND,
    E_COND, /* b if a else c */
    E_LIST,
    E_TUPLE,
    E_DICT,  /* list = keys, list2 = values */
    E_NSREF, /* name.name2 as an assignment target */
    /* statements */
    S_DATA,
    S_OUTPUT,
    S_IF,  /* a test, list body, list2 else */
    S_FOR, /* a target, b iterable, c filter, list body, list2 else */
    S_SET, /* a target, b value */
    S_SETBLOCK,    /* a target, b filter chain or NULL, list body */
    S_MACRO,       /* name, names/list2 params+defaults, list body, op JX_MACRO_* */
    S_CALLBLOCK,   /* a call, names/list2 caller params, list body */
    S_FILTERBLOCK, /* b filter chain, list body */
    S_WITH,        /* names/list2 assignments, list body */
    S_BREAK,
    S_CONTINUE,
    S_BODY /* {% generation %}: just its body */
} jx_kind;

/* S_MACRO / S_CALLBLOCK op bits: implicit variables the body reads. */
enum { JX_MACRO_VARARGS = 1, JX_MACRO_KWARGS = 2, JX_MACRO_CALLER = 4 };

typedef struct jx_nodes {
    jx_node **v;
    int n;
} jx_nodes;

struct jx_node {
    uint8_t kind;
    uint8_t op;
    int line, col;
    const char *name;
    const char *name2;
    jx_val cval;
    jx_node *a, *b, *c;
    jx_nodes list, list2;
    const char **names; /* keyword / parameter names, aligned with list2 */
    int nnames;
};

/* Parses tokens into a statement list. Errors: VX_EFORMAT with "line:col". */
vx_status jx_parse(jx_arena *a, const jx_tokens *toks, jx_nodes *out, char *err,
                   size_t err_size);

/* --------------------------------------------------------------- runtime */

/* Growable malloc'd byte buffer (output and captures). */
typedef struct jx_buf {
    char *p;
    size_t n, cap;
} jx_buf;

typedef struct jx_var {
    const char *name;
    jx_val val;
} jx_var;

struct jx_scope {
    jx_scope *parent;
    jx_var *vars;
    size_t n, cap;
};

typedef struct jx_limits {
    size_t max_output;  /* bytes in any one output or capture buffer */
    size_t max_memory;  /* arena bytes per render */
    uint64_t max_steps; /* evaluated nodes + loop iterations */
    int max_depth;      /* nested macro calls */
} jx_limits;

typedef struct jx_ctx {
    jx_arena *arena;
    vx_status status;
    char msg[VX_ERRMSG_MAX];
    int line; /* source line being evaluated, for messages */
    jx_scope *scope;
    jx_buf *out;
    uint64_t steps;
    int depth; /* macro calls in progress */
    int nest;  /* evaluation recursion, see jinja_eval.c */
    jx_limits lim;
    struct tm now; /* what strftime_now() formats */
} jx_ctx;

typedef struct jx_args {
    int npos;
    const jx_val *pos;
    int nkw;
    const char *const *kwn;
    const jx_val *kwv;
} jx_args;

jx_scope *jx_scope_new(jx_ctx *c, jx_scope *parent);
/* Binds name in s (name must outlive the render). */
bool jx_scope_set(jx_ctx *c, jx_scope *s, const char *name, jx_val v);
/* Evaluates a parsed template with the variables already in root. */
vx_status jx_render(jx_ctx *c, const jx_nodes *body, jx_scope *root, jx_buf *out);
/* Calls a macro or builtin value (used by map()/select() and the evaluator). */
bool jx_call(jx_ctx *c, jx_val fn, const jx_args *a, jx_val *out);

/* ------------------------------------------------------- value helpers */

/* Records the first error ("line N: ..." once a line is known); returns false. */
bool jx_fail(jx_ctx *c, vx_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *jx_alloc(jx_ctx *c, size_t n); /* NULL (error recorded) on failure */
/* Work accounting against lim.max_steps: one step per evaluated node or
 * loop iteration, plus charges proportional to bulk work (bytes copied,
 * elements scanned or compared) so no single operation runs unbounded. */
bool jx_charge(jx_ctx *c, uint64_t units);
static inline bool jx_step(jx_ctx *c) { return jx_charge(c, 1); }
/* Bounds recursion through the evaluator, filters and calls so the C stack
 * stays small (a few hundred bytes per level) even on small thread stacks.
 * Every successful jx_enter is paired with jx_leave. */
#define JX_MAX_EVAL_DEPTH 600
bool jx_enter(jx_ctx *c);
static inline void jx_leave(jx_ctx *c) { c->nest--; }

static inline jx_val jx_undef(const char *name) {
    jx_val v = {JX_UNDEF, 0, {.undef_name = name}};
    return v;
}
static inline jx_val jx_none(void) {
    jx_val v = {JX_NONE, 0, {.i = 0}};
    return v;
}
static inline jx_val jx_bool(bool b) {
    jx_val v = {JX_BOOL, 0, {.b = b}};
    return v;
}
static inline jx_val jx_int(int64_t i) {
    jx_val v = {JX_INT, 0, {.i = i}};
    return v;
}
static inline jx_val jx_float(double f) {
    jx_val v = {JX_FLOAT, 0, {.f = f}};
    return v;
}

jx_str *jx_str_new(jx_arena *a, const char *s, size_t n); /* NULL on failure */
bool jx_mkstr(jx_ctx *c, const char *s, size_t n, jx_val *out);
bool jx_mkstr_buf(jx_ctx *c, const jx_buf *b, jx_val *out);
jx_list *jx_list_new(jx_ctx *c, size_t cap);
bool jx_list_push(jx_ctx *c, jx_list *l, jx_val v);
bool jx_mklist(jx_ctx *c, size_t cap, jx_val *out); /* empty list value */
jx_dict *jx_dict_new(jx_ctx *c, size_t cap);
bool jx_dict_set(jx_ctx *c, jx_dict *d, jx_val k, jx_val v);
bool jx_dict_get(const jx_dict *d, jx_val k, jx_val *out);
/* jx_dict_get that charges the search to the step budget. */
bool jx_dict_lookup(jx_ctx *c, const jx_dict *d, jx_val k, jx_val *out, bool *found);
bool jx_dict_get_cstr(const jx_dict *d, const char *k, jx_val *out);

/* First occurrence of needle in hay (portable memmem); an empty needle is at hay. */
const char *jx_find(const char *hay, size_t hn, const char *needle, size_t nn);

bool jx_buf_put(jx_ctx *c, jx_buf *b, const char *s, size_t n);
bool jx_buf_putc(jx_ctx *c, jx_buf *b, char ch);
bool jx_buf_puts(jx_ctx *c, jx_buf *b, const char *s);
void jx_buf_free(jx_buf *b);

/* UTF-8: decodes one code point at s[0..n) (n > 0); invalid bytes decode as
 * themselves with length 1, so every byte string round-trips. */
uint32_t jx_utf8_dec(const char *s, size_t n, size_t *len);
size_t jx_utf8_enc(uint32_t cp, char out[4]);
size_t jx_utf8_count(const char *s, size_t n);
size_t jx_cp_offset(const jx_str *s, int64_t cp); /* byte offset of code point cp (clamped) */
bool jx_is_space(uint32_t cp);                    /* Python str.isspace() */
uint32_t jx_to_upper(uint32_t cp);
uint32_t jx_to_lower(uint32_t cp);

const char *jx_type_name(jx_val v); /* Python type name for messages */
bool jx_truthy(jx_val v);
bool jx_equal(jx_val a, jx_val b);
bool jx_equal_c(jx_ctx *c, jx_val a, jx_val b, bool *res); /* charges the work */
/* Python ordering; fold_case lowercases strings (jinja2 sort/unique). Fails on
 * unorderable types. *res is <0, 0, >0. */
bool jx_compare(jx_ctx *c, jx_val a, jx_val b, bool fold_case, int *res);

/* Python str() / repr() appended to b. */
bool jx_write_str(jx_ctx *c, jx_buf *b, jx_val v);
bool jx_write_repr(jx_ctx *c, jx_buf *b, jx_val v);
/* str() as a value (strings are returned as is). */
bool jx_to_str(jx_ctx *c, jx_val v, jx_val *out);
/* json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
 * indent NULL = compact line; item_sep/key_sep NULL = Python's defaults. */
bool jx_write_json(jx_ctx *c, jx_buf *b, jx_val v, const char *indent, const char *item_sep,
                   const char *key_sep, bool sort_keys, bool ensure_ascii);
void jx_fmt_float(double f, char out[40]); /* Python repr(float) */

/* Materializes anything iterable as an array: list/tuple items, dict keys,
 * string characters, nothing for undefined. None and numbers fail like Python. */
bool jx_iterate(jx_ctx *c, jx_val v, jx_list **out);

/* ------------------------------------------------------------- builtins */

/* Binds call arguments to named parameters: positionals in order, then
 * keywords by name. Slots not given keep vals[i] = undefined, set[i] = false.
 * Too many positionals or unknown keywords fail with fname in the message. */
bool jx_bind(jx_ctx *c, const char *fname, const jx_args *a, const char *const *params, int np,
             jx_val *vals, bool *set);
/* A str argument (Markup included); fails with a TypeError-style message. */
bool jx_want_str(jx_ctx *c, jx_val v, const char *what, const jx_str **out);
/* Python str helpers shared by filters and methods. A result keeps the
 * Markup flag of s. which: 1 left, 2 right, 3 both. chars undefined/none =
 * whitespace. */
enum { JX_CASE_UPPER, JX_CASE_LOWER, JX_CASE_TITLE, JX_CASE_CAPITALIZE, JX_CASE_SWAP };
bool jx_str_case(jx_ctx *c, jx_val s, int mode, jx_val *out);
bool jx_str_strip(jx_ctx *c, jx_val s, jx_val chars, int which, jx_val *out);
bool jx_str_replace(jx_ctx *c, jx_val s, jx_val old, jx_val rep, int64_t count, jx_val *out);
/* Python "fmt % args". */
bool jx_percent_format(jx_ctx *c, jx_val fmt, jx_val args, jx_val *out);
/* A str method (id JXM_STRIP..JXM_REMOVESUFFIX) called on self. */
bool jx_str_method(jx_ctx *c, int id, jx_val self, const jx_args *a, jx_val *out);
bool jx_undef_fail(jx_ctx *c, jx_val u); /* "'x' is undefined"; returns false */
bool jx_want_int(jx_ctx *c, jx_val v, const char *what, int64_t *out);
bool jx_mkstr_like(jx_ctx *c, jx_val like, const char *s, size_t n, jx_val *out); /* keeps Markup */
bool jx_mktuple(jx_ctx *c, const jx_val *items, size_t n, jx_val *out);

static inline bool jx_int_like(jx_val v) { return v.type == JX_INT || v.type == JX_BOOL; }
static inline int64_t jx_int_of(jx_val v) { return v.type == JX_BOOL ? (int64_t)v.u.b : v.u.i; }
static inline bool jx_is_num(jx_val v) {
    return v.type == JX_BOOL || v.type == JX_INT || v.type == JX_FLOAT;
}
/* memcpy of values that tolerates the NULL arrays of empty containers. */
static inline void jx_copy_vals(jx_val *dst, const jx_val *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}
static inline double jx_num_f(jx_val v) {
    return v.type == JX_FLOAT ? v.u.f : (double)jx_int_of(v);
}

/* Builtin function ids (jx_func.id): globals, then methods by receiver type. */
enum {
    JXF_RANGE = 1,
    JXF_NAMESPACE,
    JXF_DICT,
    JXF_RAISE,
    JXF_STRFTIME,
    JXM_STRIP,
    JXM_LSTRIP,
    JXM_RSTRIP,
    JXM_SPLIT,
    JXM_RSPLIT,
    JXM_STARTSWITH,
    JXM_ENDSWITH,
    JXM_UPPER,
    JXM_LOWER,
    JXM_TITLE,
    JXM_CAPITALIZE,
    JXM_SWAPCASE,
    JXM_REPLACE,
    JXM_FIND,
    JXM_RFIND,
    JXM_INDEX,
    JXM_RINDEX,
    JXM_COUNT,
    JXM_JOIN,
    JXM_FORMAT,
    JXM_ISDIGIT,
    JXM_ISALPHA,
    JXM_ISALNUM,
    JXM_ISSPACE,
    JXM_ISUPPER,
    JXM_ISLOWER,
    JXM_SPLITLINES,
    JXM_CENTER,
    JXM_LJUST,
    JXM_RJUST,
    JXM_ZFILL,
    JXM_PARTITION,
    JXM_RPARTITION,
    JXM_REMOVEPREFIX,
    JXM_REMOVESUFFIX,
    JXD_ITEMS,
    JXD_KEYS,
    JXD_VALUES,
    JXD_GET,
    JXD_COPY,
    JXL_INDEX,
    JXL_COUNT,
    JXL_COPY,
    JXLP_CYCLE,
    JXLP_CHANGED,
    JX_HIDDEN = -1 /* exists in Python but the immutable sandbox refuses it */
};

/* Global names (range, namespace, dict, raise_exception, strftime_now). */
bool jx_global(const char *name, jx_val *out);
/* Attribute and item access with jinja2's sandboxed getattr/getitem rules. */
bool jx_getattr(jx_ctx *c, jx_val obj, const char *name, jx_val *out);
bool jx_getitem(jx_ctx *c, jx_val obj, jx_val key, jx_val *out);
bool jx_slice(jx_ctx *c, jx_val obj, jx_val start, jx_val stop, jx_val step, jx_val *out);
bool jx_call_builtin(jx_ctx *c, const jx_func *f, const jx_args *a, jx_val *out);
bool jx_apply_filter(jx_ctx *c, const char *name, jx_val v, const jx_args *a, jx_val *out);
bool jx_apply_test(jx_ctx *c, const char *name, jx_val v, const jx_args *a, bool *out);
bool jx_binop(jx_ctx *c, int op, jx_val a, jx_val b, jx_val *out);
bool jx_contains(jx_ctx *c, jx_val container, jx_val item, bool *out);
bool jx_escape(jx_ctx *c, jx_val v, jx_val *out); /* markupsafe.escape */

#endif
