/*
 * json_check.c - the incremental JSON checker and the token table of
 * constrained decoding (see json_check.h).
 *
 * The grammar is RFC 8259's: values are objects, arrays, strings, numbers
 * (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?) and the literals true,
 * false and null; strings hold no raw control bytes (< 0x20), only the
 * escapes \" \\ \/ \b \f \n \r \t and \uXXXX, and well-formed UTF-8 (no
 * overlong forms, no surrogates, nothing past U+10FFFF); whitespace is
 * space, tab, newline and carriage return.
 */
#include "json_check.h"

#include "json_schema.h"

#include <stdlib.h>
#include <string.h>

/* what the grammar expects next (outside a string, number or literal) */
enum {
    X_VALUE,          /* a value: the document's start, after ':' or after ',' in an array */
    X_VALUE_OR_CLOSE, /* after '[' */
    X_KEY,            /* after ',' in an object */
    X_KEY_OR_CLOSE,   /* after '{' */
    X_COLON,          /* after a key */
    X_COMMA_OR_CLOSE, /* after a member or an element */
    X_DONE            /* the root value ended */
};

/* the lexer: none, inside a string, a literal or a number (by what came last) */
enum {
    L_NONE,
    L_STR,   /* a string's content */
    L_ESC,   /* after a backslash */
    L_HEX,   /* aux \u digits left */
    L_UTF8,  /* aux continuation bytes left, the next within [lo, hi] */
    L_LIT,   /* literal lit, aux bytes of it read */
    L_KEY,   /* a key of a schema's properties: kmask, tlen */
    L_ENUM,  /* a schema's enum value: texts [elo, ehi), tlen */
    N_MINUS, /* '-' */
    N_ZERO,  /* a leading 0 */
    N_INT,   /* integer digits */
    N_DOT,   /* '.' */
    N_FRAC,  /* fraction digits */
    N_EXP,   /* 'e' or 'E' */
    N_ESIGN, /* the exponent's sign */
    N_EXPD   /* exponent digits */
};

static const char *const LITS[3] = {"true", "false", "null"};

void vx_jcheck_init(vx_jcheck *j, unsigned flags) {
    memset(j, 0, sizeof *j);
    j->expect = X_VALUE;
    j->lex = L_NONE;
    j->flags = (uint8_t)flags;
}

void vx_jcheck_init_schema(vx_jcheck *j, const vx_jschema *schema) {
    vx_jcheck_init(j, VX_JCHECK_NO_LEAD_WS);
    j->schema = schema;
    j->vnode = schema->root;
}

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static bool num_final(uint8_t lex) { return lex == N_ZERO || lex == N_INT || lex == N_FRAC || lex == N_EXPD; }

/* A value ended: the document, or the member / element it was. */
static void value_end(vx_jcheck *j) {
    if (j->depth == 0) {
        j->expect = X_DONE;
        return;
    }
    const vx_jnode *h = j->schema && j->stack[j->depth - 1] == 'o' ? &j->schema->nodes[j->node[j->depth - 1]] : NULL;
    if (h && h->choice >= 0 && j->cnt[j->depth - 1] == 1) {
        /* the first property of a union of objects: its value (text elo
         * of the head's enum) picks the object the rest keeps to */
        const vx_jnode *e = &j->schema->nodes[j->schema->props[h->a].node];
        j->node[j->depth - 1] = j->schema->choice[h->choice + j->elo - e->a];
    }
    if (j->stack[j->depth - 1] == 'a' && j->cnt[j->depth - 1] < UINT16_MAX) j->cnt[j->depth - 1]++;
    j->expect = X_COMMA_OR_CLOSE;
}

/* The schema node of the innermost open container when it constrains
 * its members (an object or an array node), else NULL. */
static const vx_jnode *container(const vx_jcheck *j) {
    if (!j->schema || !j->depth) return NULL;
    const vx_jnode *n = &j->schema->nodes[j->node[j->depth - 1]];
    return n->kind == VX_JN_OBJECT || n->kind == VX_JN_ARRAY ? n : NULL;
}

/* The node of the values in a container without a schema for them. */
static int32_t child_of(const vx_jnode *n) { return n && n->child > 0 ? n->child : 0; }

static bool push(vx_jcheck *j, uint8_t kind, int32_t node) {
    if (j->depth >= VX_JCHECK_MAX_DEPTH) return false;
    j->node[j->depth] = node;
    j->cnt[j->depth] = 0;
    j->stack[j->depth++] = kind;
    j->expect = kind == 'o' ? X_KEY_OR_CLOSE : X_VALUE_OR_CLOSE;
    if (kind == 'a') j->vnode = child_of(container(j));
    return true;
}

static void pop(vx_jcheck *j) {
    j->depth--;
    value_end(j);
}

/* May the open container take another member / element (a comma)? */
static bool more_ok(const vx_jcheck *j, const vx_jnode *n) {
    if (!n) return true;
    const uint16_t k = j->cnt[j->depth - 1];
    if (n->kind == VX_JN_ARRAY) return n->max_items < 0 || k < n->max_items;
    return n->n == 0 ? n->child >= 0 : k < n->n;
}

/* May it close here? */
static bool close_ok(const vx_jcheck *j, const vx_jnode *n) {
    if (!n) return true;
    const uint16_t k = j->cnt[j->depth - 1];
    if (n->kind == VX_JN_ARRAY) return k >= n->min_items;
    for (int32_t i = k; i < n->n; i++)
        if (j->schema->props[n->a + i].required) return false;
    return true;
}

/* An object's key starts (its opening quote). */
static bool key_start(vx_jcheck *j) {
    const vx_jnode *n = container(j);
    if (n && n->n > 0) {
        /* the next properties up to the first required one */
        uint64_t m = 0;
        for (int32_t i = j->cnt[j->depth - 1]; i < n->n; i++) {
            m |= 1ull << i;
            if (j->schema->props[n->a + i].required) break;
        }
        if (!m) return false;
        j->lex = L_KEY, j->kmask = m, j->tlen = 1;
        return true;
    }
    if (n && n->child < 0) return false; /* additionalProperties false, no properties: {} */
    j->lex = L_STR, j->key = true;
    return true;
}

/* A byte of a schema key (lex L_KEY): the candidates it continues. */
static bool key_byte(vx_jcheck *j, uint8_t c) {
    const vx_jnode *n = container(j);
    const vx_jschema *s = j->schema;
    uint64_t m = 0;
    for (uint64_t r = j->kmask; r; r &= r - 1) {
        const int i = __builtin_ctzll(r);
        int32_t len;
        const char *t = vx_jschema_text(s, s->props[n->a + i].key, &len);
        if (j->tlen < len && (uint8_t)t[j->tlen] == c) m |= 1ull << i;
    }
    if (!m) return false;
    j->kmask = m;
    j->tlen++;
    for (uint64_t r = m; r; r &= r - 1) { /* a whole name: the key ends (a closing quote ends only one) */
        const int i = __builtin_ctzll(r);
        int32_t len;
        vx_jschema_text(s, s->props[n->a + i].key, &len);
        if (len == j->tlen) {
            j->cnt[j->depth - 1] = (uint16_t)(i + 1);
            j->vnode = s->props[n->a + i].node;
            j->lex = L_NONE;
            j->expect = X_COLON;
            break;
        }
    }
    return true;
}

/* A byte of an enum value (lex L_ENUM): true when it continues one of the
 * texts; false with lex L_NONE when one ended right before it (the byte is
 * then read as structure); false with lex L_ENUM when neither. */
static bool enum_byte(vx_jcheck *j, uint8_t c) {
    const vx_jschema *s = j->schema;
    int32_t lo = -1, hi = -1, len;
    for (int32_t i = j->elo; i < j->ehi; i++) {
        const char *t = vx_jschema_text(s, i, &len);
        if (j->tlen < len && (uint8_t)t[j->tlen] == c) {
            if (lo < 0) lo = i;
            hi = i + 1;
        }
    }
    if (lo >= 0) {
        j->elo = lo, j->ehi = hi, j->tlen++;
        return true;
    }
    vx_jschema_text(s, j->elo, &len); /* a complete value sorts first */
    if (len == j->tlen) j->lex = L_NONE;
    return false;
}

/* The first byte of a value of schema node id (not ANY): -1 when it
 * cannot start one, 0 when it started it (a container pushed, an enum
 * value begun), 1 when the byte starts a scalar the plain lexer reads
 * (j->integer set for integers). */
static int schema_value_start(vx_jcheck *j, int32_t id, uint8_t c) {
    const vx_jschema *s = j->schema;
    const vx_jnode *n = &s->nodes[id];
    if (n->kind == VX_JN_UNION) {
        const int k = vx_jclass(c);
        if (k < 0 || n->alt[k] < 0) return -1;
        id = n->alt[k];
        n = &s->nodes[id];
    }
    switch (n->kind) {
    case VX_JN_OBJECT: return c == '{' && push(j, 'o', id) ? 0 : -1;
    case VX_JN_ARRAY: return c == '[' && push(j, 'a', id) ? 0 : -1;
    case VX_JN_STRING: return c == '"' ? 1 : -1;
    case VX_JN_NUMBER: case VX_JN_INTEGER:
        j->integer = n->kind == VX_JN_INTEGER;
        return c == '-' || is_digit(c) ? 1 : -1;
    case VX_JN_BOOLEAN: return c == 't' || c == 'f' ? 1 : -1;
    case VX_JN_NULL: return c == 'n' ? 1 : -1;
    case VX_JN_ENUM: {
        int32_t lo = -1, hi = -1, len;
        for (int32_t i = n->a; i < n->a + n->n; i++)
            if ((uint8_t)vx_jschema_text(s, i, &len)[0] == c) {
                if (lo < 0) lo = i;
                hi = i + 1;
            }
        if (lo < 0) return -1;
        j->lex = L_ENUM, j->elo = lo, j->ehi = hi, j->tlen = 1;
        return 0;
    }
    default: return 1; /* VX_JN_ANY (a $ref's own node before its body): any value */
    }
}

/* The first byte of a value. */
static bool value_start(vx_jcheck *j, uint8_t c) {
    if (j->depth == 0 && (j->flags & VX_JCHECK_OBJECT) && c != '{') return false;
    j->integer = false;
    if (j->schema && j->vnode > 0) {
        const int r = schema_value_start(j, j->vnode, c);
        if (r <= 0) return r == 0;
    }
    switch (c) {
    case '{': return push(j, 'o', 0);
    case '[': return push(j, 'a', 0);
    case '"': j->lex = L_STR, j->key = false; return true;
    case '-': j->lex = N_MINUS; return true;
    case '0': j->lex = N_ZERO; return true;
    case 't': case 'f': case 'n':
        j->lex = L_LIT, j->lit = c == 't' ? 0 : c == 'f' ? 1 : 2, j->aux = 1;
        return true;
    default:
        if (c >= '1' && c <= '9') {
            j->lex = N_INT;
            return true;
        }
        return false;
    }
}

/* A byte of a string's content (lex L_STR). */
static bool str_byte(vx_jcheck *j, uint8_t c) {
    if (j->low_next && c != '\\') return false; /* only the low surrogate's \u may come */
    if (c == '"') {
        j->lex = L_NONE;
        if (j->key) j->key = false, j->expect = X_COLON, j->vnode = child_of(container(j));
        else value_end(j);
        return true;
    }
    if (c == '\\') {
        j->lex = L_ESC;
        return true;
    }
    if (c < 0x20) return false;
    if (c < 0x80) return true;
    /* a UTF-8 lead byte: continuation bytes and the first one's range */
    uint8_t n, lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c >= 0xe0 && c <= 0xef) n = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return false;
    j->lex = L_UTF8, j->aux = n, j->lo = lo, j->hi = hi;
    return true;
}

/* A byte that continues the number being read (false: it does not). */
static bool num_byte(vx_jcheck *j, uint8_t c) {
    const bool d = is_digit(c), e = c == 'e' || c == 'E';
    uint8_t next = L_NONE;
    switch (j->lex) {
    case N_MINUS: next = c == '0' ? N_ZERO : d ? N_INT : L_NONE; break;
    case N_ZERO: next = j->integer ? L_NONE : c == '.' ? N_DOT : e ? N_EXP : L_NONE; break;
    case N_INT: next = d ? N_INT : j->integer ? L_NONE : c == '.' ? N_DOT : e ? N_EXP : L_NONE; break;
    case N_DOT: next = d ? N_FRAC : L_NONE; break;
    case N_FRAC: next = d ? N_FRAC : e ? N_EXP : L_NONE; break;
    case N_EXP: next = c == '+' || c == '-' ? N_ESIGN : d ? N_EXPD : L_NONE; break;
    case N_ESIGN: case N_EXPD: next = d ? N_EXPD : L_NONE; break;
    default: break;
    }
    if (next == L_NONE) return false;
    j->lex = next;
    return true;
}

static bool step(vx_jcheck *j, uint8_t c) {
    if (j->lex != L_NONE || !is_ws(c)) j->ws = 0;
    switch (j->lex) {
    case L_NONE: break;
    case L_STR: return str_byte(j, c);
    case L_ESC:
        if (c == 'u') j->lex = L_HEX, j->aux = 4, j->hex = 0;
        else if (j->low_next) return false;
        else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') j->lex = L_STR;
        else return false;
        return true;
    case L_HEX: {
        /* surrogates come in pairs (a high one, then a low one), as a
         * text's UTF-16 has them: a lone one is no character, and many
         * parsers (cJSON, Python's UTF-8 encoder) refuse it. Checked as
         * the digits come, so that no accepted prefix is a dead end. */
        if (!is_digit(c) && !((c | 0x20) >= 'a' && (c | 0x20) <= 'f')) return false;
        j->hex = (uint16_t)(j->hex * 16 + (is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10));
        const int k = 4 - --j->aux; /* digits read */
        if (j->low_next && k == 1 && j->hex != 0xd) return false;
        if (k == 2 && j->hex >= 0xdc && j->hex <= 0xdf) {
            if (!j->low_next) return false; /* a low surrogate alone */
        } else if (k == 2 && j->low_next) {
            return false;
        }
        if (j->aux == 0) {
            j->lex = L_STR;
            j->low_next = !j->low_next && j->hex >= 0xd800 && j->hex <= 0xdbff;
        }
        return true;
    }
    case L_UTF8:
        if (c < j->lo || c > j->hi) return false;
        j->lo = 0x80, j->hi = 0xbf;
        if (--j->aux == 0) j->lex = L_STR;
        return true;
    case L_KEY: return key_byte(j, c);
    case L_ENUM:
        if (enum_byte(j, c)) return true;
        if (j->lex != L_NONE) return false;
        value_end(j); /* the value ended before c: read it below */
        break;
    case L_LIT: {
        const char *w = LITS[j->lit];
        if (c != (uint8_t)w[j->aux]) return false;
        if (w[++j->aux] == '\0') {
            j->lex = L_NONE;
            value_end(j);
        }
        return true;
    }
    default: /* a number: this byte continues it, or ends it and is read below */
        if (num_byte(j, c)) return true;
        if (!num_final(j->lex)) return false;
        j->lex = L_NONE;
        value_end(j);
        break;
    }
    if (is_ws(c)) {
        if (j->ws >= VX_JCHECK_MAX_WS) return false;
        if ((j->flags & VX_JCHECK_NO_LEAD_WS) && j->depth == 0 && j->expect == X_VALUE) return false;
        j->ws++;
        return true;
    }
    const uint8_t top = j->depth ? j->stack[j->depth - 1] : 0;
    const vx_jnode *n = container(j); /* NULL: nothing constrains the members */
    switch (j->expect) {
    case X_COLON:
        if (c != ':') return false;
        j->expect = X_VALUE;
        return true;
    case X_COMMA_OR_CLOSE:
        if (c == ',') {
            if (!more_ok(j, n)) return false;
            j->expect = top == 'o' ? X_KEY : X_VALUE;
            if (top == 'a') j->vnode = child_of(n);
            return true;
        }
        if (c != (top == 'o' ? '}' : ']') || !close_ok(j, n)) return false;
        pop(j);
        return true;
    case X_KEY_OR_CLOSE:
        if (c == '}') {
            if (!close_ok(j, n)) return false;
            pop(j);
            return true;
        }
        /* fall through */
    case X_KEY: return c == '"' && key_start(j);
    case X_VALUE_OR_CLOSE:
        if (c == ']') {
            if (!close_ok(j, n)) return false;
            pop(j);
            return true;
        }
        if (n && n->max_items == 0) return false;
        /* fall through */
    case X_VALUE: return value_start(j, c);
    default: return false; /* X_DONE */
    }
}

bool vx_jcheck_feed(vx_jcheck *j, const char *bytes, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!step(j, (uint8_t)bytes[i])) return false;
    return true;
}

bool vx_jcheck_done(const vx_jcheck *j) {
    if (j->lex == L_ENUM && j->depth == 0) { /* a root enum's value (an object or array: nothing extends it) */
        int32_t len;
        vx_jschema_text(j->schema, j->elo, &len);
        return len == j->tlen;
    }
    return (j->lex == L_NONE && j->expect == X_DONE) || (j->depth == 0 && num_final(j->lex));
}

/* ------------------------------------------------------------ the tokens */

struct vx_jvocab {
    int32_t n;
    int32_t *off; /* [n + 1]: token t's bytes are bytes[off[t] .. off[t + 1]) */
    char *bytes;
    uint8_t *plain; /* [n]: string content as it is (plain_text) */
};

/* Bytes any string takes, leaving it inside its content: simulated from
 * within a top-level string, where a closing quote would end the document
 * (so that nothing but whitespace could follow), they must end inside the
 * string, not within an escape or a UTF-8 character. String content does
 * not depend on what encloses the string, so this holds in every string. */
static bool plain_text(const char *b, int32_t n) {
    vx_jcheck j;
    vx_jcheck_init(&j, 0);
    j.lex = L_STR;
    for (int32_t i = 0; i < n; i++)
        if (!step(&j, (uint8_t)b[i])) return false;
    return n > 0 && j.lex == L_STR;
}

vx_jvocab *vx_jvocab_new(const vx_vocab *vocab) {
    const int32_t n = vx_vocab_n_tokens(vocab), max = vx_vocab_max_piece(vocab) + 1;
    vx_jvocab *v = calloc(1, sizeof *v);
    char *buf = malloc((size_t)max);
    size_t cap = (size_t)n * 8 + 64, len = 0;
    if (v) v->off = malloc(((size_t)n + 1) * sizeof *v->off), v->bytes = malloc(cap);
    if (!v || !buf || !v->off || !v->bytes) goto fail;
    v->n = n;
    for (int32_t t = 0; t < n; t++) {
        v->off[t] = (int32_t)len;
        /* end-of-generation tokens stay empty: never part of the text */
        const int32_t k = vx_vocab_is_eog(vocab, t) ? 0 : vx_token_to_piece(vocab, t, buf, max, false);
        if (k <= 0) continue;
        if (len + (size_t)k > cap) {
            cap = (len + (size_t)k) * 2;
            char *nb = realloc(v->bytes, cap);
            if (!nb) goto fail;
            v->bytes = nb;
        }
        memcpy(v->bytes + len, buf, (size_t)k);
        len += (size_t)k;
    }
    v->off[n] = (int32_t)len;
    if (!(v->plain = malloc((size_t)n ? (size_t)n : 1))) goto fail;
    for (int32_t t = 0; t < n; t++) v->plain[t] = plain_text(v->bytes + v->off[t], v->off[t + 1] - v->off[t]);
    free(buf);
    return v;
fail:
    free(buf);
    vx_jvocab_free(v);
    return NULL;
}

void vx_jvocab_free(vx_jvocab *v) {
    if (!v) return;
    free(v->off);
    free(v->bytes);
    free(v->plain);
    free(v);
}

bool vx_jcheck_allows(const vx_jcheck *j, const vx_jvocab *v, vx_token t) {
    if (t < 0 || t >= v->n || v->off[t + 1] == v->off[t]) return false;
    vx_jcheck c = *j;
    return vx_jcheck_feed(&c, v->bytes + v->off[t], v->off[t + 1] - v->off[t]);
}

bool vx_jcheck_feed_token(vx_jcheck *j, const vx_jvocab *v, vx_token t) {
    if (!vx_jcheck_allows(j, v, t)) return false;
    return vx_jcheck_feed(j, v->bytes + v->off[t], v->off[t + 1] - v->off[t]);
}

void vx_jfilter_init(vx_jfilter *f, const vx_jvocab *jv, const vx_jschema *schema) {
    if (schema) vx_jcheck_init_schema(&f->jc, schema);
    else vx_jcheck_init(&f->jc, VX_JCHECK_OBJECT | VX_JCHECK_NO_LEAD_WS);
    f->jv = jv;
    f->first_known = false;
}

bool vx_jfilter_allows(void *jfilter, vx_token t) {
    vx_jfilter *f = jfilter;
    const vx_jvocab *v = f->jv;
    if (t < 0 || t >= v->n || v->off[t + 1] == v->off[t]) return false;
    if (f->jc.lex == L_STR && v->plain[t]) return true;
    if (!f->first_known) {
        for (int c = 0; c < 256; c++) {
            vx_jcheck k = f->jc;
            f->first[c] = step(&k, (uint8_t)c);
        }
        f->first_known = true;
    }
    if (!f->first[(uint8_t)v->bytes[v->off[t]]]) return false;
    return vx_jcheck_allows(&f->jc, v, t);
}

bool vx_jfilter_feed(vx_jfilter *f, vx_token t) {
    if (!vx_jcheck_feed_token(&f->jc, f->jv, t)) return false;
    f->first_known = false;
    return true;
}
