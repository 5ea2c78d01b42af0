/*
 * grammar_parse.c - GBNF text into a compiled grammar (grammar.h,
 * grammar_impl.h): a recursive-descent parser over rules, alternatives,
 * sequences and their elements; repetitions expanded into rules of their
 * own; then the checks (every rule defined, a root, no left recursion)
 * and the flattening into one element array.
 *
 * Repetitions of an element x (a character class, a rule reference, a
 * group, or a whole literal):
 *   x*      S ::= x S |            (a new rule S, referenced in place of x*)
 *   x+      x S
 *   x?      O ::= x |
 *   x{m,n}  m copies of x, then n - m nested optionals O1 ::= x O2 | , ...
 *   x{m,}   m copies of x, then S
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "grammar_impl.h"

typedef struct gseq {
    vx_gelem *e;
    int32_t n, cap;
} gseq;

typedef struct grule {
    gseq *alts;
    int32_t n, cap;
    const char *name; /* into the text; NULL for a rule made for a group or repetition */
    int32_t name_len;
    int32_t owner;       /* the named rule whose definition made it (itself when named) */
    const char *ref;     /* its first reference, for "undefined rule" */
    bool defined;
} grule;

typedef struct parser {
    const char *s, *end, *p;
    grule *rules;
    int32_t n_rules, cap_rules;
    uint32_t *rng; /* lo, hi pairs */
    int32_t n_rng, cap_rng;
    int32_t *cls; /* [n_cls + 1] */
    int32_t n_cls, cap_cls;
    int32_t *names; /* open addressing over the named rules: rule index, or -1 */
    uint32_t names_cap, n_named;
    int64_t n_el;    /* elements so far, bounded by VX_GRAMMAR_MAX_ELEMENTS */
    int32_t current; /* the named rule being defined */
    int32_t depth;   /* groups open */
    char *err;
    size_t err_size;
    vx_status st; /* VX_OK until the first error */
} parser;

/* ---- errors ---- */

static void where(const parser *P, const char *at, int *line, int *col) {
    *line = 1, *col = 1;
    for (const char *q = P->s; q < at && q < P->end; q++) {
        if (*q == '\n') (*line)++, *col = 1;
        else if (((unsigned char)*q & 0xC0) != 0x80) (*col)++; /* a column per character */
    }
}

static bool fail_at(parser *P, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail_at(parser *P, const char *at, const char *fmt, ...) {
    if (P->st != VX_OK) return false;
    P->st = VX_EINVAL;
    int line, col;
    where(P, at, &line, &col);
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vx_seterr(P->err, P->err_size, VX_EINVAL, "line %d, column %d: %s", line, col, msg);
    return false;
}

static bool oom(parser *P) {
    if (P->st == VX_OK) P->st = vx_seterr(P->err, P->err_size, VX_ENOMEM, "out of memory");
    return false;
}

/* Grows *buf (elements of size sz) to hold n + 1. */
static bool grow(parser *P, void **buf, int32_t *cap, int32_t n, size_t sz) {
    if (n < *cap) return true;
    const int32_t nc = *cap ? *cap * 2 : 2; /* most rules made for repetitions hold 2 alternatives of 1-2 elements */
    void *nb = realloc(*buf, (size_t)nc * sz);
    if (!nb) return oom(P);
    *buf = nb, *cap = nc;
    return true;
}

static bool push_el(parser *P, gseq *q, int32_t type, int32_t arg) {
    if (++P->n_el > VX_GRAMMAR_MAX_ELEMENTS)
        return fail_at(P, P->p, "the grammar is too large (more than %d elements once repetitions are expanded)",
                       VX_GRAMMAR_MAX_ELEMENTS);
    if (!grow(P, (void **)&q->e, &q->cap, q->n, sizeof *q->e)) return false;
    q->e[q->n++] = (vx_gelem){type, arg};
    return true;
}

/* A new rule (named by text[name .. name + len), or anonymous); -1 on failure. */
static int32_t new_rule(parser *P, const char *name, int32_t len) {
    if (!grow(P, (void **)&P->rules, &P->cap_rules, P->n_rules, sizeof *P->rules)) return -1;
    const int32_t r = P->n_rules++;
    P->rules[r] = (grule){NULL, 0, 0, name, len, name ? r : P->current, NULL, !name};
    return r;
}

static uint32_t name_hash(const char *s, int32_t len) {
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The slot of name in the table: its rule, or the empty slot for it. */
static uint32_t name_slot(const parser *P, const char *name, int32_t len) {
    uint32_t i = name_hash(name, len) & (P->names_cap - 1);
    for (;; i = (i + 1) & (P->names_cap - 1)) {
        const int32_t r = P->names[i];
        if (r < 0 || (P->rules[r].name_len == len && !memcmp(P->rules[r].name, name, (size_t)len))) return i;
    }
}

/* The rule named text[name .. name + len), made on first sight; -1 on failure. */
static int32_t named_rule(parser *P, const char *name, int32_t len) {
    if (2 * (P->n_named + 1) > P->names_cap) { /* grow, and insert the named rules again */
        const uint32_t cap = P->names_cap ? 2 * P->names_cap : 64;
        int32_t *t = malloc((size_t)cap * sizeof *t);
        if (!t) return oom(P), -1;
        free(P->names);
        P->names = t, P->names_cap = cap;
        memset(t, 0xFF, (size_t)cap * sizeof *t);
        for (int32_t r = 0; r < P->n_rules; r++)
            if (P->rules[r].name) P->names[name_slot(P, P->rules[r].name, P->rules[r].name_len)] = r;
    }
    const uint32_t i = name_slot(P, name, len);
    if (P->names[i] >= 0) return P->names[i];
    const int32_t r = new_rule(P, name, len);
    if (r >= 0) P->names[i] = r, P->n_named++;
    return r;
}

/* Adds alternative q (taken over) to rule r. */
static bool add_alt(parser *P, int32_t r, gseq *q) {
    grule *R = &P->rules[r];
    if (!grow(P, (void **)&R->alts, &R->cap, R->n, sizeof *R->alts)) {
        free(q->e);
        return false;
    }
    R->alts[R->n++] = *q;
    *q = (gseq){NULL, 0, 0};
    return true;
}

/* ---- classes ---- */

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* A class from n ranges at tmp (sorted and merged here; complemented when
 * negated); its index, or -1. */
static int32_t add_class(parser *P, uint32_t *tmp, int32_t n, bool negated) {
    if (n) qsort(tmp, (size_t)n, 2 * sizeof *tmp, cmp_range);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && tmp[2 * i] <= tmp[2 * m - 1] + 1) {
            if (tmp[2 * i + 1] > tmp[2 * m - 1]) tmp[2 * m - 1] = tmp[2 * i + 1];
        } else {
            tmp[2 * m] = tmp[2 * i], tmp[2 * m + 1] = tmp[2 * i + 1], m++;
        }
    }
    if (!grow(P, (void **)&P->cls, &P->cap_cls, P->n_cls + 1, sizeof *P->cls)) return -1;
    const int32_t c = P->n_cls++;
    P->cls[c] = P->n_rng;
    uint32_t next = 0; /* negated: the first code point not yet covered */
    for (int32_t i = 0; i <= m; i++) {
        uint32_t lo, hi;
        if (!negated) {
            if (i == m) break;
            lo = tmp[2 * i], hi = tmp[2 * i + 1];
        } else {
            if (i < m && tmp[2 * i] == 0) {
                next = tmp[2 * i + 1] + 1;
                continue;
            }
            if (next > VX_UNICODE_MAX) break;
            lo = next, hi = i < m ? tmp[2 * i] - 1 : VX_UNICODE_MAX;
            if (i < m) next = tmp[2 * i + 1] + 1;
        }
        /* surrogates are no characters: UTF-8 cannot hold them */
        const uint32_t part[2][2] = {{lo, hi < 0xD800 ? hi : 0xD7FF}, {lo > 0xE000 ? lo : 0xE000, hi}};
        for (int k = 0; k < 2; k++) {
            if (part[k][0] > part[k][1]) continue;
            if (!grow(P, (void **)&P->rng, &P->cap_rng, 2 * P->n_rng + 1, sizeof *P->rng)) return -1;
            P->rng[2 * P->n_rng] = part[k][0], P->rng[2 * P->n_rng + 1] = part[k][1];
            P->n_rng++;
        }
    }
    P->cls[c + 1] = P->n_rng;
    return c;
}

static bool push_class(parser *P, gseq *q, uint32_t lo, uint32_t hi) {
    uint32_t r[2] = {lo, hi};
    const int32_t c = add_class(P, r, 1, false);
    return c >= 0 && push_el(P, q, VX_GE_CHAR, c);
}

/* ---- lexing ---- */

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips blanks and comments, and line ends when newlines is set. */
static void skip_space(parser *P, bool newlines) {
    while (P->p < P->end) {
        const char c = *P->p;
        if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) P->p++;
        else if (c == '#')
            while (P->p < P->end && *P->p != '\n') P->p++;
        else break;
    }
}

/* One character of a literal or class at P->p (an escape, or a UTF-8
 * character of the text) into *cp. */
static bool parse_char(parser *P, uint32_t *cp) {
    const char *at = P->p;
    const unsigned char c = (unsigned char)*P->p;
    if (c == '\\') {
        if (P->end - P->p < 2) return fail_at(P, at, "an escape at the end of the grammar");
        const char e = P->p[1];
        P->p += 2;
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++, P->p++) {
                const int h = P->p < P->end ? vx_hex_digit(*P->p) : -1;
                if (h < 0) return fail_at(P, at, "'\\%c' takes %d hexadecimal digits", e, digits);
                v = v << 4 | (uint32_t)h;
            }
            if (v > VX_UNICODE_MAX) return fail_at(P, at, "U+%X is past the last Unicode code point", v);
            *cp = v;
            return true;
        }
        switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        default:
            if ((e >= 0x21 && e <= 0x2F) || (e >= 0x3A && e <= 0x40) || (e >= 0x5B && e <= 0x60) ||
                (e >= 0x7B && e <= 0x7E)) { /* \\ \" \[ \] \- \^ ...: the punctuation itself */
                *cp = (uint32_t)e;
                return true;
            }
            return fail_at(P, at, "unknown escape '\\%c' (known: \\n \\r \\t \\xHH \\uHHHH \\UHHHHHHHH, and "
                                  "\\ before punctuation)", e);
        }
    }
    int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || P->end - P->p < n) return fail_at(P, at, "invalid UTF-8 in the grammar");
    uint32_t v = n == 1 ? c : c & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        const unsigned char k = (unsigned char)P->p[i];
        if ((k & 0xC0) != 0x80) return fail_at(P, at, "invalid UTF-8 in the grammar");
        v = v << 6 | (k & 0x3Fu);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of[n] || v > VX_UNICODE_MAX || (v >= 0xD800 && v <= 0xDFFF))
        return fail_at(P, at, "invalid UTF-8 in the grammar");
    P->p += n;
    *cp = v;
    return true;
}

/* "..." : a class per character. */
static bool parse_literal(parser *P, gseq *q) {
    const char *open = P->p++;
    while (P->p < P->end && *P->p != '"') {
        if (*P->p == '\n') break;
        uint32_t cp;
        if (!parse_char(P, &cp) || !push_class(P, q, cp, cp)) return false;
    }
    if (P->p >= P->end || *P->p != '"') return fail_at(P, open, "a literal without its closing '\"'");
    P->p++;
    return true;
}

/* [...] or [^...]. */
static bool parse_class(parser *P, gseq *q) {
    const char *open = P->p++;
    const bool negated = P->p < P->end && *P->p == '^';
    if (negated) P->p++;
    uint32_t *tmp = NULL;
    int32_t n = 0, cap = 0;
    while (P->p < P->end && *P->p != ']' && *P->p != '\n') {
        uint32_t lo, hi;
        const char *at = P->p;
        if (!parse_char(P, &lo)) goto bad;
        hi = lo;
        if (P->end - P->p >= 2 && *P->p == '-' && P->p[1] != ']') {
            P->p++;
            if (!parse_char(P, &hi)) goto bad;
            if (hi < lo) {
                fail_at(P, at, "the range's end comes before its start");
                goto bad;
            }
        }
        if (!grow(P, (void **)&tmp, &cap, 2 * n + 1, sizeof *tmp)) goto bad;
        tmp[2 * n] = lo, tmp[2 * n + 1] = hi, n++;
    }
    if (P->p >= P->end || *P->p != ']') {
        fail_at(P, open, "a character class without its closing ']'");
        goto bad;
    }
    P->p++;
    const int32_t c = add_class(P, tmp, n, negated);
    free(tmp);
    return c >= 0 && push_el(P, q, VX_GE_CHAR, c);
bad:
    free(tmp);
    return false;
}

/* ---- structure ---- */

static bool parse_alternates(parser *P, int32_t r, bool nested);

/* Appends sub[0 .. n) to q. */
static bool append(parser *P, gseq *q, const vx_gelem *sub, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!push_el(P, q, sub[i].type, sub[i].arg)) return false;
    return true;
}

/* A rule of the alternatives (x, then tail when tail >= 0) and the empty
 * one: x* when tail is the rule itself, x? when tail < 0. */
static int32_t maybe_rule(parser *P, const vx_gelem *x, int32_t nx, bool star, int32_t tail) {
    const int32_t r = new_rule(P, NULL, 0);
    if (r < 0) return -1;
    gseq a = {NULL, 0, 0}, empty = {NULL, 0, 0};
    if (!append(P, &a, x, nx) || (star && !push_el(P, &a, VX_GE_RULE, r)) ||
        (!star && tail >= 0 && !push_el(P, &a, VX_GE_RULE, tail)) || !add_alt(P, r, &a) || !add_alt(P, r, &empty)) {
        free(a.e);
        return -1;
    }
    return r;
}

/* Reads a count of {m,n}. */
static bool parse_count(parser *P, long *v) {
    const char *at = P->p;
    *v = 0;
    if (P->p >= P->end || *P->p < '0' || *P->p > '9') return fail_at(P, at, "a repetition count must be a number");
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
        *v = *v * 10 + (*P->p++ - '0');
        if (*v > VX_GRAMMAR_MAX_REPEAT)
            return fail_at(P, at, "a repetition count is at most %d", VX_GRAMMAR_MAX_REPEAT);
    }
    return true;
}

/* The repetition operator at P->p applied to q's elements from start on. */
static bool repeat(parser *P, gseq *q, int32_t start) {
    const char *at = P->p;
    char op = *P->p++;
    while (op != '{') { /* x+* x?+ ...: one repetition (nested ones multiply the parses of a text) */
        const char *nx = P->p;
        while (nx < P->end && (*nx == ' ' || *nx == '\t')) nx++;
        if (nx >= P->end || (*nx != '*' && *nx != '+' && *nx != '?')) break;
        op = op == *nx && op != '*' ? op : '*'; /* ++ is +, ?? is ?, any other pair * */
        P->p = nx + 1;
    }
    long m = 0, n = -1; /* n < 0: no bound */
    if (op == '+') m = 1;
    else if (op == '?') n = 1;
    else if (op == '{') {
        skip_space(P, true);
        if (P->p < P->end && *P->p != ',' && !parse_count(P, &m)) return false;
        skip_space(P, true);
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            skip_space(P, true);
            if (P->p < P->end && *P->p != '}' && !parse_count(P, &n)) return false;
            skip_space(P, true);
        } else {
            n = m;
        }
        if (P->p >= P->end || *P->p != '}') return fail_at(P, at, "a repetition '{' without its closing '}'");
        P->p++;
        if (n >= 0 && n < m) return fail_at(P, at, "a repetition {%ld,%ld} whose maximum is below its minimum", m, n);
    }
    /* x: the elements from start on, as one element ("" repeated: nothing) */
    vx_gelem x[1];
    const int32_t nx = q->n - start;
    if (!nx) return true;
    if (nx == 1) {
        x[0] = q->e[start];
    } else {
        const int32_t g = new_rule(P, NULL, 0);
        gseq body = {NULL, 0, 0};
        if (g < 0 || !append(P, &body, q->e + start, nx) || !add_alt(P, g, &body)) {
            free(body.e);
            return false;
        }
        x[0] = (vx_gelem){VX_GE_RULE, g};
    }
    q->n = start;
    P->n_el -= nx;
    for (long i = 0; i < m; i++)
        if (!append(P, q, x, 1)) return false;
    if (n < 0) {
        const int32_t s = maybe_rule(P, x, 1, true, -1);
        return s >= 0 && push_el(P, q, VX_GE_RULE, s);
    }
    int32_t tail = -1; /* the optionals, built from the innermost out */
    for (long i = m; i < n; i++)
        if ((tail = maybe_rule(P, x, 1, false, tail)) < 0) return false;
    return tail < 0 || push_el(P, q, VX_GE_RULE, tail);
}

/* A sequence of elements into q, up to '|', ')', the end of the line (not
 * nested) or of the text. */
static bool parse_sequence(parser *P, gseq *q, bool nested) {
    int32_t last = -1; /* the start of the last element, for a repetition */
    for (;;) {
        skip_space(P, nested);
        if (P->p >= P->end) return true;
        const char c = *P->p;
        const int32_t start = q->n;
        if (c == '"') {
            if (!parse_literal(P, q)) return false;
        } else if (c == '[') {
            if (!parse_class(P, q)) return false;
        } else if (c == '.') {
            P->p++;
            if (!push_class(P, q, 0, VX_UNICODE_MAX)) return false;
        } else if (c == '(') {
            const char *open = P->p++;
            if (++P->depth > VX_GRAMMAR_MAX_DEPTH)
                return fail_at(P, open, "groups nested more than %d deep", VX_GRAMMAR_MAX_DEPTH);
            const int32_t g = new_rule(P, NULL, 0);
            if (g < 0 || !parse_alternates(P, g, true)) return false;
            P->depth--;
            if (P->p >= P->end || *P->p != ')') return fail_at(P, open, "a '(' without its closing ')'");
            P->p++;
            if (!push_el(P, q, VX_GE_RULE, g)) return false;
        } else if (is_name_char(c)) {
            const char *name = P->p;
            while (P->p < P->end && is_name_char(*P->p)) P->p++;
            const int32_t r = named_rule(P, name, (int32_t)(P->p - name));
            if (r < 0) return false;
            if (!P->rules[r].ref) P->rules[r].ref = name;
            if (!push_el(P, q, VX_GE_RULE, r)) return false;
            const char *after = P->p;
            skip_space(P, false);
            if (P->end - P->p >= 3 && !memcmp(P->p, "::=", 3))
                return fail_at(P, name, "a rule definition inside another rule (a missing line break?)");
            P->p = after;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return fail_at(P, P->p, "'%c' repeats nothing", c);
            if (!repeat(P, q, last)) return false;
            continue; /* x*? repeats x* */
        } else if (c == '|' || c == ')' || c == '\n') {
            return true;
        } else if (c == '<' || c == '!') {
            return fail_at(P, P->p, "token references ('<[id]>', '<token>', '!<...>') are not supported");
        } else {
            return fail_at(P, P->p, "unexpected '%c'", c);
        }
        last = start;
    }
}

/* Alternatives into rule r: sequences separated by '|'. */
static bool parse_alternates(parser *P, int32_t r, bool nested) {
    for (;;) {
        gseq q = {NULL, 0, 0};
        if (!parse_sequence(P, &q, nested)) {
            free(q.e);
            return false;
        }
        if (!add_alt(P, r, &q)) return false;
        if (!nested && P->p < P->end && *P->p == '\n') { /* a next line starting with '|' continues */
            const char *save = P->p;
            skip_space(P, true);
            if (P->p >= P->end || *P->p != '|') {
                P->p = save;
                return true;
            }
        }
        if (P->p >= P->end || *P->p != '|') return true;
        P->p++;
        skip_space(P, true);
    }
}

static bool parse_rules(parser *P) {
    skip_space(P, true);
    while (P->p < P->end) {
        const char *name = P->p;
        while (P->p < P->end && is_name_char(*P->p)) P->p++;
        if (P->p == name) return fail_at(P, name, "expected a rule name, found '%c'", *name);
        const int32_t len = (int32_t)(P->p - name);
        skip_space(P, false);
        if (P->end - P->p < 3 || memcmp(P->p, "::=", 3)) return fail_at(P, P->p, "expected '::=' after the rule name");
        P->p += 3;
        skip_space(P, true);
        const int32_t r = named_rule(P, name, len);
        if (r < 0) return false;
        if (P->rules[r].defined) return fail_at(P, name, "rule '%.*s' is defined twice", (int)len, name);
        P->rules[r].defined = true;
        P->current = r;
        if (!parse_alternates(P, r, false)) return false;
        if (P->p < P->end && *P->p != '\n') return fail_at(P, P->p, "unexpected '%c'", *P->p);
        skip_space(P, true);
    }
    return true;
}

/* ---- checks ---- */

static const grule *owner_of(const parser *P, int32_t r) { return &P->rules[P->rules[r].owner]; }

/* The alternatives, numbered across rules: rule r's are first[r] .. first[r + 1). */
typedef struct altmap {
    int32_t *first; /* [n_rules + 1] */
    int32_t n;
} altmap;

static bool class_empty(const parser *P, int32_t c) { return P->cls[c] == P->cls[c + 1]; }

/* Which rules derive some text (productive: chars set, every class but
 * an empty one reads a character) or the empty text (nullable: chars
 * false, no class does); ok_alt[a]: alternative a does. A worklist over
 * the references, linear in the grammar. False when out of memory. */
static bool derive(const parser *P, const altmap *am, bool chars, bool *ok_rule, bool *ok_alt) {
    const int32_t n = P->n_rules;
    int32_t *pending = calloc((size_t)am->n + 1, sizeof *pending), *ofirst = calloc((size_t)n + 1, sizeof *ofirst);
    int32_t *occ = NULL, *rule_of = malloc(((size_t)am->n + 1) * sizeof *rule_of);
    int32_t *queue = malloc(((size_t)n + 1) * sizeof *queue), head = 0, tail = 0;
    bool ok = pending && ofirst && queue && rule_of;
#define REFS(...)                                                                                 \
    for (int32_t r = 0; r < n; r++)                                                               \
        for (int32_t a = 0; a < P->rules[r].n; a++)                                               \
            for (int32_t i = 0; i < P->rules[r].alts[a].n; i++) {                                 \
                const vx_gelem e = P->rules[r].alts[a].e[i];                                      \
                const int32_t alt = am->first[r] + a;                                             \
                __VA_ARGS__;                                                                           \
            }
    if (ok)
        REFS(if (e.type == VX_GE_RULE) pending[alt]++, ofirst[e.arg + 1]++;
             else if (!chars || class_empty(P, e.arg)) pending[alt] = INT32_MAX / 2) /* never */
    for (int32_t r = 0; ok && r < n; r++) ofirst[r + 1] += ofirst[r];
    ok = ok && (occ = malloc(((size_t)ofirst[n] + 1) * sizeof *occ)) != NULL;
    if (ok) REFS(if (e.type == VX_GE_RULE) occ[ofirst[e.arg]++] = alt) /* the alternatives referring to each rule */
#undef REFS
    for (int32_t r = n; ok && r > 0; r--) ofirst[r] = ofirst[r - 1]; /* the fill moved each start to the next's */
    if (ok) ofirst[0] = 0;
    for (int32_t r = 0; ok && r < n; r++) {
        ok_rule[r] = false;
        for (int32_t a = am->first[r]; a < am->first[r + 1]; a++) {
            rule_of[a] = r;
            ok_alt[a] = !pending[a];
            if (ok_alt[a] && !ok_rule[r]) ok_rule[r] = true, queue[tail++] = r;
        }
    }
    while (ok && head < tail) {
        const int32_t s = queue[head++];
        for (int32_t k = ofirst[s]; k < ofirst[s + 1]; k++) {
            const int32_t a = occ[k];
            if (--pending[a] || ok_alt[a]) continue;
            ok_alt[a] = true;
            if (!ok_rule[rule_of[a]]) ok_rule[rule_of[a]] = true, queue[tail++] = rule_of[a];
        }
    }
    free(pending), free(ofirst), free(occ), free(queue), free(rule_of);
    return ok;
}

/* Left edges r -> s: s can come first in r (after rules that may match
 * nothing). Expanding along a cycle of them never ends unless every
 * reference on it closes its alternative (the continuation is then the
 * same stack, which matching dedupes: "s ::= x s |" with x nullable is
 * fine). So a reference with more after it is refused inside one
 * strongly connected component (Tarjan's algorithm, iteratively).
 * Returns such a reference's rule, -1 if none, -2 when out of memory. */
static int32_t left_cycle(const parser *P, const bool *nullable) {
    const int32_t n = P->n_rules;
    int32_t *first = calloc((size_t)n + 1, sizeof *first), *to = NULL, *idx = malloc(((size_t)n + 1) * sizeof *idx);
    int32_t *low = malloc(((size_t)n + 1) * sizeof *low), *stk = malloc(((size_t)n + 1) * sizeof *stk);
    int32_t *cs = malloc(((size_t)n + 1) * sizeof *cs), *it = malloc(((size_t)n + 1) * sizeof *it), bad = -2;
    bool *on = calloc((size_t)n + 1, sizeof *on), *tl = NULL;
    if (!first || !idx || !low || !stk || !cs || !it || !on) goto done;
#define LEFT_EDGES(...)                                                                           \
    for (int32_t r = 0; r < n; r++)                                                               \
        for (int32_t a = 0; a < P->rules[r].n; a++)                                               \
            for (int32_t i = 0; i < P->rules[r].alts[a].n; i++) {                                 \
                const vx_gelem e = P->rules[r].alts[a].e[i];                                      \
                if (e.type != VX_GE_RULE) break;                                                  \
                const bool last = i + 1 == P->rules[r].alts[a].n;                                 \
                __VA_ARGS__;                                                                             \
                if (!nullable[e.arg]) break;                                                      \
            }
    LEFT_EDGES((void)last; first[r + 1]++)
    for (int32_t r = 0; r < n; r++) first[r + 1] += first[r];
    if (!(to = malloc(((size_t)first[n] + 1) * sizeof *to)) || !(tl = malloc((size_t)first[n] + 1))) goto done;
    LEFT_EDGES(tl[first[r]] = last; to[first[r]++] = e.arg)
#undef LEFT_EDGES
    for (int32_t r = n; r > 0; r--) first[r] = first[r - 1];
    first[0] = 0;
    for (int32_t r = 0; r < n; r++) idx[r] = -1;
    int32_t counter = 0, sp = 0;
    for (int32_t start = 0; start < n; start++) {
        if (idx[start] >= 0) continue;
        int32_t depth = 0;
        cs[0] = start, it[0] = first[start];
        idx[start] = low[start] = counter++, stk[sp++] = start, on[start] = true;
        while (depth >= 0) {
            const int32_t v = cs[depth];
            if (it[depth] < first[v + 1]) {
                const int32_t w = to[it[depth]++];
                if (idx[w] < 0) {
                    idx[w] = low[w] = counter++, stk[sp++] = w, on[w] = true;
                    cs[++depth] = w, it[depth] = first[w];
                } else if (on[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            if (low[v] == idx[v]) { /* v roots a component: pop it; low[] becomes the component's id */
                int32_t w;
                do {
                    w = stk[--sp];
                    on[w] = false;
                    low[w] = idx[v];
                } while (w != v);
            }
            if (--depth >= 0 && low[v] < low[cs[depth]]) low[cs[depth]] = low[v];
        }
    }
    bad = -1;
    for (int32_t r = 0; r < n && bad == -1; r++)
        for (int32_t k = first[r]; k < first[r + 1]; k++)
            if (!tl[k] && low[to[k]] == low[r]) {
                bad = r;
                break;
            }
done:
    free(first), free(to), free(tl), free(idx), free(low), free(stk), free(cs), free(it), free(on);
    return bad;
}

/* Every rule defined, a root that derives some text, no left recursion
 * that expansion could not finish. (*alt_ok)[a]: alternative a derives
 * some text (the others are dropped: a parse never walks into a dead
 * end). */
static bool check(parser *P, int32_t *root, altmap *am, bool **alt_ok) {
    *root = -1;
    for (int32_t r = 0; r < P->n_rules; r++) {
        const grule *R = &P->rules[r];
        if (!R->defined) return fail_at(P, R->ref, "rule '%.*s' is used but never defined", (int)R->name_len, R->name);
        if (R->name && R->name_len == 4 && !memcmp(R->name, "root", 4)) *root = r;
    }
    if (*root < 0) return fail_at(P, P->end, "the grammar has no 'root' rule (generation starts there)");
    const int32_t n = P->n_rules;
    if (!(am->first = malloc(((size_t)n + 1) * sizeof *am->first))) return oom(P);
    am->first[0] = 0;
    for (int32_t r = 0; r < n; r++) am->first[r + 1] = am->first[r] + P->rules[r].n;
    am->n = am->first[n];
    bool *nullable = malloc((size_t)n + 1), *productive = malloc((size_t)n + 1), *scratch = malloc((size_t)am->n + 1);
    *alt_ok = malloc((size_t)am->n + 1);
    bool ok = nullable && productive && scratch && *alt_ok && derive(P, am, false, nullable, scratch) &&
              derive(P, am, true, productive, *alt_ok);
    if (!ok) {
        oom(P);
    } else if (!productive[*root]) {
        ok = fail_at(P, P->rules[*root].name, "no text is a sentence of this grammar: every way through 'root' "
                                              "needs a character no class holds, or never ends");
    } else {
        const int32_t bad = left_cycle(P, nullable);
        if (bad == -2) {
            ok = oom(P);
        } else if (bad >= 0) {
            const grule *R = owner_of(P, bad);
            ok = fail_at(P, R->name, "rule '%.*s' is left-recursive: it can reach itself before reading a character "
                                     "(rewrite 'a ::= a x | y' as 'a ::= y x*')",
                         (int)R->name_len, R->name);
        }
    }
    free(nullable), free(productive), free(scratch);
    return ok;
}

/* ---- the compiled form ---- */

/* The grammar in one element array, with the alternatives keep says. */
static vx_grammar *flatten(parser *P, int32_t root, const altmap *am, const bool *keep) {
    vx_grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    int32_t n_alt = 0, n_el = 0;
    for (int32_t r = 0; r < P->n_rules; r++)
        for (int32_t a = 0; a < P->rules[r].n; a++)
            if (keep[am->first[r] + a]) n_alt++, n_el += P->rules[r].alts[a].n + 1;
    g->el = malloc(((size_t)n_el + 1) * sizeof *g->el);
    g->alt = malloc((size_t)(n_alt ? n_alt : 1) * sizeof *g->alt);
    g->rule_alt = malloc((size_t)(P->n_rules + 1) * sizeof *g->rule_alt);
    g->rng = malloc((size_t)(P->n_rng ? 2 * P->n_rng : 1) * sizeof *g->rng);
    g->cls = malloc((size_t)(P->n_cls + 1) * sizeof *g->cls);
    if (!g->el || !g->alt || !g->rule_alt || !g->rng || !g->cls) {
        vx_grammar_free(g);
        return NULL;
    }
    int32_t k = 0, j = 0;
    for (int32_t r = 0; r < P->n_rules; r++) {
        g->rule_alt[r] = j;
        for (int32_t a = 0; a < P->rules[r].n; a++) {
            if (!keep[am->first[r] + a]) continue;
            g->alt[j++] = k;
            if (P->rules[r].alts[a].n)
                memcpy(g->el + k, P->rules[r].alts[a].e, (size_t)P->rules[r].alts[a].n * sizeof *g->el);
            k += P->rules[r].alts[a].n;
            g->el[k++] = (vx_gelem){VX_GE_END, 0};
        }
    }
    g->rule_alt[P->n_rules] = j;
    if (P->n_rng) memcpy(g->rng, P->rng, (size_t)P->n_rng * 2 * sizeof *g->rng);
    if (P->n_cls) memcpy(g->cls, P->cls, (size_t)(P->n_cls + 1) * sizeof *g->cls);
    else g->cls[0] = 0;
    g->n_el = n_el, g->n_alt = n_alt, g->n_rules = P->n_rules, g->n_cls = P->n_cls, g->n_rng = P->n_rng;
    g->root = root;
    return g;
}

vx_status vx_grammar_parse(const char *text, size_t len, vx_grammar **out, char *err, size_t err_size) {
    if (!out) return VX_EINVAL;
    *out = NULL;
    if (!text) return vx_seterr(err, err_size, VX_EINVAL, "no grammar");
    if (len > VX_GRAMMAR_MAX_TEXT)
        return vx_seterr(err, err_size, VX_EINVAL, "the grammar has %zu bytes; at most %d are taken", len,
                         VX_GRAMMAR_MAX_TEXT);
    parser P = {text, text + len, text, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, err, err_size, VX_OK};
    int32_t root = -1;
    altmap am = {NULL, 0};
    bool *keep = NULL;
    if (parse_rules(&P) && check(&P, &root, &am, &keep) && !(*out = flatten(&P, root, &am, keep))) oom(&P);
    free(am.first);
    free(keep);
    for (int32_t r = 0; r < P.n_rules; r++) {
        for (int32_t a = 0; a < P.rules[r].n; a++) free(P.rules[r].alts[a].e);
        free(P.rules[r].alts);
    }
    free(P.rules);
    free(P.names);
    free(P.rng);
    free(P.cls);
    return P.st;
}

void vx_grammar_free(vx_grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->alt);
    free(g->rule_alt);
    free(g->rng);
    free(g->cls);
    free(g);
}
