/*
 * jinja_lex.c - turns template source into tokens the way jinja2's lexer does
 * with HF's settings: newlines normalized to "\n" and one trailing newline
 * dropped (keep_trailing_newline=False), "{%- -%}" / "{{- -}}" / "{#- -#}"
 * whitespace control, trim_blocks (a block or comment tag eats the newline
 * right after it), lstrip_blocks (spaces and tabs before a block or comment
 * tag at the start of a line are dropped), {% raw %}, and bracket balancing
 * so that "}}" inside a dict literal does not end a {{ ... }} tag.
 */
#include "jinja.h"
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BRACKETS 256

typedef struct lexer {
    jx_arena *a;
    const char *src; /* normalized source */
    size_t n;
    size_t pos;
    size_t lpos; /* line/column bookkeeping cursor, only moves forward */
    int line;
    size_t line_start;
    jx_token *toks;
    size_t ntok, cap;
    char *err;
    size_t err_size;
    vx_status status;
} lexer;

static void locate(lexer *L, size_t pos, int *line, int *col) {
    if (pos < L->lpos) { /* rare: rescan from the start */
        L->lpos = 0;
        L->line = 1;
        L->line_start = 0;
    }
    for (; L->lpos < pos && L->lpos < L->n; L->lpos++) {
        if (L->src[L->lpos] == '\n') {
            L->line++;
            L->line_start = L->lpos + 1;
        }
    }
    *line = L->line;
    *col = (int)(pos - L->line_start) + 1;
}

static bool lex_fail(lexer *L, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool lex_fail(lexer *L, size_t pos, const char *fmt, ...) {
    if (L->status != VX_OK) return false;
    int line, col;
    locate(L, pos, &line, &col);
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->status = VX_EFORMAT;
    if (L->err && L->err_size)
        snprintf(L->err, L->err_size, "template syntax error at %d:%d: %s", line, col, msg);
    return false;
}

static bool oom(lexer *L) {
    if (L->status == VX_OK) {
        L->status = VX_ENOMEM;
        if (L->err && L->err_size) snprintf(L->err, L->err_size, "out of memory");
    }
    return false;
}

static jx_token *push(lexer *L, jx_tok_type type, size_t pos) {
    if (L->ntok == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jx_token *t = jx_arena_alloc(L->a, cap * sizeof(jx_token));
        if (!t) {
            oom(L);
            return NULL;
        }
        if (L->ntok) memcpy(t, L->toks, L->ntok * sizeof(jx_token));
        L->toks = t;
        L->cap = cap;
    }
    jx_token *t = &L->toks[L->ntok++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    locate(L, pos, &t->line, &t->col);
    return t;
}

/* Python's \s: ASCII whitespace plus the Unicode spaces. */
static size_t space_len(const lexer *L, size_t p) {
    if (p >= L->n) return 0;
    unsigned char ch = (unsigned char)L->src[p];
    if (ch < 0x80) return jx_is_space(ch) ? 1 : 0;
    size_t len;
    uint32_t cp = jx_utf8_dec(L->src + p, L->n - p, &len);
    return jx_is_space(cp) ? len : 0;
}

static size_t skip_space(const lexer *L, size_t p) {
    size_t k;
    while ((k = space_len(L, p)) > 0) p += k;
    return p;
}

static bool at(const lexer *L, size_t p, const char *lit) {
    size_t k = strlen(lit);
    return p <= L->n && L->n - p >= k && memcmp(L->src + p, lit, k) == 0;
}

/* End of text[from, to) once trailing whitespace (Python str.rstrip) is removed. */
static size_t rstrip_end(const lexer *L, size_t from, size_t to) {
    size_t end = to;
    while (end > from) {
        /* find the start of the last code point */
        size_t s = end - 1;
        while (s > from && ((unsigned char)L->src[s] & 0xC0) == 0x80 && end - s < 4) s--;
        size_t len;
        uint32_t cp = jx_utf8_dec(L->src + s, end - s, &len);
        if (s + len != end) { /* not a whole character: treat the last byte alone */
            s = end - 1;
            cp = (unsigned char)L->src[s];
        }
        if (!jx_is_space(cp)) break;
        end = s;
    }
    return end;
}

/* Applies the whitespace control jinja2 gives the text before a tag: "-"
 * strips all trailing whitespace; otherwise lstrip_blocks drops the spaces
 * and tabs between the last newline (or a line start) and a block tag. */
static size_t text_end(const lexer *L, size_t from, size_t to, char sign, bool block_like,
                       bool line_starting) {
    if (sign == '-') return rstrip_end(L, from, to);
    if (sign == '+' || !block_like) return to;
    size_t lp = from;
    bool has_nl = false;
    for (size_t i = to; i > from; i--) {
        if (L->src[i - 1] == '\n') {
            lp = i;
            has_nl = true;
            break;
        }
    }
    if (!has_nl && !line_starting) return to;
    for (size_t i = lp; i < to; i++)
        if (L->src[i] != ' ' && L->src[i] != '\t') return to;
    return lp;
}

static bool emit_data(lexer *L, size_t from, size_t to) {
    if (to <= from) return true;
    jx_token *t = push(L, T_DATA, from);
    if (!t) return false;
    t->s = L->src + from;
    t->n = to - from;
    return true;
}

/* ------------------------------------------------------------ literals */

static size_t scan_digits(const lexer *L, size_t p) {
    /* (\d+_)*\d+ : digit runs joined by single underscores */
    if (p >= L->n || L->src[p] < '0' || L->src[p] > '9') return 0;
    size_t q = p;
    for (;;) {
        while (q < L->n && L->src[q] >= '0' && L->src[q] <= '9') q++;
        if (q + 1 < L->n && L->src[q] == '_' && L->src[q + 1] >= '0' && L->src[q + 1] <= '9')
            q++;
        else
            break;
    }
    return q - p;
}

static bool is_digit_base(char ch, int base) {
    if (base == 2) return ch == '0' || ch == '1';
    if (base == 8) return ch >= '0' && ch <= '7';
    if (base == 16)
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
    return ch >= '0' && ch <= '9';
}

/* Copies [p, q) without underscores into buf (size >= 64); false if too long. */
static bool plain_digits(const lexer *L, size_t p, size_t q, char *buf, size_t size) {
    size_t k = 0;
    for (size_t i = p; i < q; i++) {
        if (L->src[i] == '_') continue;
        if (k + 1 >= size) return false;
        buf[k++] = L->src[i];
    }
    buf[k] = 0;
    return true;
}

static bool lex_number(lexer *L, bool *matched) {
    size_t p = L->pos;
    *matched = false;
    size_t d = scan_digits(L, p);
    if (d == 0) return true;
    char buf[128];
    /* float first, unless right after a dot (so foo.0.1 is foo[0][1]) */
    if (p == 0 || L->src[p - 1] != '.') {
        size_t q = p + d;
        bool frac = false, expo = false;
        if (q < L->n && L->src[q] == '.') {
            size_t f = scan_digits(L, q + 1);
            if (f) {
                q += 1 + f;
                frac = true;
            }
        }
        if (q < L->n && (L->src[q] == 'e' || L->src[q] == 'E')) {
            size_t r = q + 1;
            if (r < L->n && (L->src[r] == '+' || L->src[r] == '-')) r++;
            size_t e = scan_digits(L, r);
            if (e) {
                q = r + e;
                expo = true;
            }
        }
        if (frac || expo) {
            if (!plain_digits(L, p, q, buf, sizeof buf))
                return lex_fail(L, p, "number literal too long");
            jx_token *t = push(L, T_FLOAT, p);
            if (!t) return false;
            t->f = strtod(buf, NULL);
            L->pos = q;
            *matched = true;
            return true;
        }
    }
    int base = 10;
    size_t q = p;
    char c1 = p + 1 < L->n ? L->src[p + 1] : 0;
    if (L->src[p] == '0' && (c1 == 'b' || c1 == 'B' || c1 == 'o' || c1 == 'O' || c1 == 'x' ||
                             c1 == 'X')) {
        base = (c1 == 'b' || c1 == 'B') ? 2 : (c1 == 'o' || c1 == 'O') ? 8 : 16;
        size_t r = p + 2;
        for (;;) {
            size_t s = r;
            if (s < L->n && L->src[s] == '_') s++;
            if (s < L->n && is_digit_base(L->src[s], base)) r = s + 1;
            else break;
        }
        if (r > p + 2) q = r;
        else base = 10;
    }
    if (base == 10) {
        if (L->src[p] == '0') { /* 0(_?0)* */
            q = p + 1;
            while (q < L->n && (L->src[q] == '0' || (L->src[q] == '_' && q + 1 < L->n &&
                                                      L->src[q + 1] == '0')))
                q += L->src[q] == '_' ? 2 : 1;
        } else {
            q = p + d;
        }
    }
    size_t from = base == 10 ? p : p + 2;
    if (!plain_digits(L, from, q, buf, sizeof buf))
        return lex_fail(L, p, "integer literal too large");
    errno = 0;
    char *endp;
    unsigned long long v = strtoull(buf, &endp, base);
    if (errno || v > (unsigned long long)INT64_MAX)
        return lex_fail(L, p, "integer literal too large");
    jx_token *t = push(L, T_INT, p);
    if (!t) return false;
    t->i = (int64_t)v;
    L->pos = q;
    *matched = true;
    return true;
}

/* A string literal, unescaped like Python's "unicode_escape" codec (which is
 * what jinja2 applies after encoding non-ASCII text with backslashreplace). */
static bool lex_string(lexer *L) {
    size_t p = L->pos;
    char q = L->src[p];
    size_t i = p + 1;
    while (i < L->n && L->src[i] != q) i += (L->src[i] == '\\' && i + 1 < L->n) ? 2 : 1;
    if (i >= L->n) return lex_fail(L, p, "unterminated string literal");
    size_t end = i;
    char *out = jx_arena_alloc(L->a, (end - p) * 3 + 1);
    if (!out) return oom(L);
    size_t k = 0;
    for (i = p + 1; i < end;) {
        char ch = L->src[i];
        if (ch != '\\') {
            out[k++] = ch;
            i++;
            continue;
        }
        char e = L->src[i + 1];
        i += 2;
        uint32_t cp;
        switch (e) {
        case '\n': continue;
        case '\\': out[k++] = '\\'; continue;
        case '\'': out[k++] = '\''; continue;
        case '"': out[k++] = '"'; continue;
        case 'a': out[k++] = '\a'; continue;
        case 'b': out[k++] = '\b'; continue;
        case 'f': out[k++] = '\f'; continue;
        case 'n': out[k++] = '\n'; continue;
        case 'r': out[k++] = '\r'; continue;
        case 't': out[k++] = '\t'; continue;
        case 'v': out[k++] = '\v'; continue;
        case 'x':
        case 'u':
        case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            cp = 0;
            for (int j = 0; j < digits; j++) {
                int h = i < end ? vx_hex_digit(L->src[i]) : -1;
                if (h < 0) return lex_fail(L, i, "truncated \\%c escape in string literal", e);
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
            if (cp > 0x10FFFF) return lex_fail(L, i, "illegal Unicode character in string literal");
            break;
        }
        case 'N': return lex_fail(L, i - 2, "\\N{...} escapes are not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int j = 0; j < 2 && i < end && L->src[i] >= '0' && L->src[i] <= '7'; j++)
                    cp = cp * 8 + (uint32_t)(L->src[i++] - '0');
                break;
            }
            if ((unsigned char)e >= 0x80) {
                /* backslashreplace turned the character into \xNN / \uNNNN /
                 * \UNNNNNNNN first, so the backslash escapes only itself. */
                size_t len;
                uint32_t c2 = jx_utf8_dec(L->src + i - 1, end - (i - 1), &len);
                if (c2 >= 0xDC80 && c2 <= 0xDCFF) c2 -= 0xDC00;
                k += (size_t)sprintf(out + k, c2 < 0x100 ? "\\x%02x" : c2 < 0x10000 ? "\\u%04x"
                                                                                   : "\\U%08x",
                                     c2);
                i += len - 1;
                continue;
            }
            out[k++] = '\\'; /* unknown escapes keep the backslash */
            out[k++] = e;
            continue;
        }
        char enc[4];
        size_t m = jx_utf8_enc(cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp, enc);
        memcpy(out + k, enc, m);
        k += m;
    }
    out[k] = 0;
    jx_token *t = push(L, T_STRING, p);
    if (!t) return false;
    t->s = out;
    t->n = k;
    L->pos = end + 1;
    return true;
}

static bool name_char(unsigned char ch, bool first) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80)
        return true;
    return !first && ch >= '0' && ch <= '9';
}

static const struct {
    const char *s;
    jx_op op;
} OPS[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW},     {"==", OP_EQ},       {"!=", OP_NE},
    {">=", OP_GE},       {"<=", OP_LE},      {"+", OP_ADD},       {"-", OP_SUB},
    {"/", OP_DIV},       {"*", OP_MUL},      {"%", OP_MOD},       {"~", OP_TILDE},
    {"[", OP_LBRACKET},  {"]", OP_RBRACKET}, {"(", OP_LPAREN},    {")", OP_RPAREN},
    {"{", OP_LBRACE},    {"}", OP_RBRACE},   {">", OP_GT},        {"<", OP_LT},
    {"=", OP_ASSIGN},    {".", OP_DOT},      {":", OP_COLON},     {"|", OP_PIPE},
    {",", OP_COMMA},     {";", OP_SEMI},
};

/* Tokens inside {{ }} or {% %} up to and including the end tag. */
static bool lex_tag(lexer *L, bool block, size_t tag_pos, bool *line_starting) {
    char stack[MAX_BRACKETS];
    int depth = 0;
    for (;;) {
        size_t p = L->pos;
        if (p >= L->n) {
            int line, col;
            locate(L, tag_pos, &line, &col);
            return lex_fail(L, p, "unexpected end of template: '%s' opened at %d:%d is not closed",
                            block ? "{%" : "{{", line, col);
        }
        if (depth == 0) {
            size_t end = 0;
            if (block) {
                if (at(L, p, "+%}")) end = p + 3;
                else if (at(L, p, "-%}")) end = skip_space(L, p + 3);
                else if (at(L, p, "%}")) end = p + 2 + (at(L, p + 2, "\n") ? 1 : 0);
            } else {
                if (at(L, p, "-}}")) end = skip_space(L, p + 3);
                else if (at(L, p, "}}")) end = p + 2;
            }
            if (end) {
                if (!push(L, block ? T_BLOCK_END : T_VAR_END, p)) return false;
                *line_starting = L->src[end - 1] == '\n';
                L->pos = end;
                return true;
            }
        }
        size_t sp = space_len(L, p);
        if (sp) {
            L->pos = skip_space(L, p);
            continue;
        }
        bool matched;
        if (!lex_number(L, &matched)) return false;
        if (matched) continue;
        unsigned char ch = (unsigned char)L->src[p];
        if (name_char(ch, true)) {
            size_t q = p + 1;
            while (q < L->n && name_char((unsigned char)L->src[q], false)) q++;
            char *s = jx_arena_alloc(L->a, q - p + 1);
            if (!s) return oom(L);
            memcpy(s, L->src + p, q - p);
            s[q - p] = 0;
            jx_token *t = push(L, T_NAME, p);
            if (!t) return false;
            t->s = s;
            t->n = q - p;
            L->pos = q;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            if (!lex_string(L)) return false;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
            if (at(L, p, OPS[k].s)) break;
        if (k == sizeof OPS / sizeof OPS[0]) {
            if (ch >= 0x20 && ch < 0x7F) return lex_fail(L, p, "unexpected char '%c'", ch);
            return lex_fail(L, p, "unexpected char 0x%02x", ch);
        }
        jx_op op = OPS[k].op;
        if (op == OP_LBRACE || op == OP_LPAREN || op == OP_LBRACKET) {
            if (depth >= MAX_BRACKETS) return lex_fail(L, p, "brackets nested too deeply");
            stack[depth++] = op == OP_LBRACE ? '}' : op == OP_LPAREN ? ')' : ']';
        } else if (op == OP_RBRACE || op == OP_RPAREN || op == OP_RBRACKET) {
            if (depth == 0) return lex_fail(L, p, "unexpected '%c'", ch);
            if (stack[depth - 1] != (char)ch)
                return lex_fail(L, p, "unexpected '%c', expected '%c'", ch, stack[depth - 1]);
            depth--;
        }
        jx_token *t = push(L, T_OP, p);
        if (!t) return false;
        t->op = (uint8_t)op;
        L->pos = p + strlen(OPS[k].s);
    }
}

/* {%[-+]? raw [-]%} at p (just after "{%" and its sign): end of the tag or 0. */
static size_t match_raw_begin(const lexer *L, size_t p) {
    p = skip_space(L, p);
    if (!at(L, p, "raw")) return 0;
    p = skip_space(L, p + 3);
    if (at(L, p, "-%}")) return skip_space(L, p + 3);
    if (at(L, p, "%}")) return p + 2;
    return 0;
}

/* Finds {%[-+]? endraw ... %} from p: sets its start, sign and end. */
static bool find_endraw(const lexer *L, size_t p, size_t *start, char *sign, size_t *end) {
    for (size_t i = p; i + 1 < L->n; i++) {
        if (L->src[i] != '{' || L->src[i + 1] != '%') continue;
        size_t q = i + 2;
        char s = 0;
        if (q < L->n && (L->src[q] == '-' || L->src[q] == '+')) s = L->src[q++];
        q = skip_space(L, q);
        if (!at(L, q, "endraw")) continue;
        q = skip_space(L, q + 6);
        size_t e = 0;
        if (at(L, q, "+%}")) e = q + 3;
        else if (at(L, q, "-%}")) e = skip_space(L, q + 3);
        else if (at(L, q, "%}")) e = q + 2 + (at(L, q + 2, "\n") ? 1 : 0);
        if (!e) continue;
        *start = i;
        *sign = s;
        *end = e;
        return true;
    }
    return false;
}

static bool lex_root(lexer *L) {
    bool line_starting = true;
    while (L->pos < L->n) {
        size_t pos = L->pos, i;
        for (i = pos; i + 1 < L->n; i++)
            if (L->src[i] == '{' && (L->src[i + 1] == '{' || L->src[i + 1] == '%' ||
                                     L->src[i + 1] == '#'))
                break;
        if (i + 1 >= L->n) {
            if (!emit_data(L, pos, L->n)) return false;
            L->pos = L->n;
            break;
        }
        char kind = L->src[i + 1];
        size_t after = i + 2;
        char sign = 0;
        if (after < L->n && (L->src[after] == '-' || L->src[after] == '+')) sign = L->src[after++];
        size_t raw_end = kind == '%' ? match_raw_begin(L, after) : 0;
        if (!emit_data(L, pos, text_end(L, pos, i, sign, kind != '{', line_starting))) return false;

        if (kind == '#') {
            size_t p, end = 0;
            for (p = after; p + 1 < L->n; p++) {
                if (at(L, p, "+#}")) end = p + 3;
                else if (at(L, p, "-#}")) end = skip_space(L, p + 3);
                else if (at(L, p, "#}")) end = p + 2 + (at(L, p + 2, "\n") ? 1 : 0);
                if (end) break;
            }
            if (!end) return lex_fail(L, i, "missing end of comment tag");
            line_starting = L->src[end - 1] == '\n';
            L->pos = end;
            continue;
        }
        if (raw_end) {
            size_t start, end;
            char esign;
            if (!find_endraw(L, raw_end, &start, &esign, &end))
                return lex_fail(L, i, "missing end of raw directive");
            bool ls = L->src[raw_end - 1] == '\n';
            if (!emit_data(L, raw_end, text_end(L, raw_end, start, esign, true, ls))) return false;
            line_starting = L->src[end - 1] == '\n';
            L->pos = end;
            continue;
        }
        bool block = kind == '%';
        if (!push(L, block ? T_BLOCK_BEGIN : T_VAR_BEGIN, i)) return false;
        L->pos = after;
        if (!lex_tag(L, block, i, &line_starting)) return false;
    }
    return push(L, T_EOF, L->n) != NULL;
}

vx_status jx_lex(jx_arena *a, const char *src, size_t len, jx_tokens *out, char *err,
                 size_t err_size) {
    lexer L;
    memset(&L, 0, sizeof L);
    L.a = a;
    L.err = err;
    L.err_size = err_size;
    L.line = 1;
    /* Normalize \r\n and \r to \n, then drop one trailing newline. */
    char *s = jx_arena_alloc(a, len + 1);
    if (!s) {
        oom(&L);
        return L.status;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k > 0 && s[k - 1] == '\n') k--;
    s[k] = 0;
    L.src = s;
    L.n = k;
    if (!lex_root(&L)) return L.status;
    out->v = L.toks;
    out->n = L.ntok;
    return VX_OK;
}
