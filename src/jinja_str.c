/*
 * jinja_str.c - Python str behavior for the interpreter: "%" formatting,
 * str.format, and the str methods templates call (strip, split, startswith,
 * replace, find, title, ...). Indices are code points, as in Python.
 */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------- %-formatting */

/* Pads s (already formatted) to width code points; left aligns with '-'. */
static bool pad_put(jx_ctx *c, jx_buf *b, const char *s, size_t n, int64_t width, bool left,
                    char fill) {
    size_t cps = jx_utf8_count(s, n);
    size_t pad = width > 0 && (uint64_t)width > cps ? (size_t)width - cps : 0;
    if (pad > c->lim.max_output) return jx_fail(c, VX_ERANGE, "format width too large");
    if (!left)
        for (size_t i = 0; i < pad; i++)
            if (!jx_buf_putc(c, b, fill)) return false;
    if (!jx_buf_put(c, b, s, n)) return false;
    if (left)
        for (size_t i = 0; i < pad; i++)
            if (!jx_buf_putc(c, b, fill)) return false;
    return true;
}

/* One numeric conversion through snprintf with Python-compatible flags. */
static bool format_number(jx_ctx *c, jx_buf *b, char conv, const char *flags, int64_t width,
                          int64_t prec, jx_val arg) {
    char cf[32], out[512];
    int k = 0;
    cf[k++] = '%';
    for (const char *f = flags; *f && k < 10; f++) cf[k++] = *f;
    if (width > 200 || prec > 200) return jx_fail(c, VX_ERANGE, "format width too large");
    if (width > 0) k += snprintf(cf + k, sizeof cf - (size_t)k, "%d", (int)width);
    if (prec >= 0) k += snprintf(cf + k, sizeof cf - (size_t)k, ".%d", (int)prec);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    if (strchr("diuxXo", conv)) {
        int64_t v;
        if (arg.type == JX_FLOAT && strchr("diu", conv)) {
            if (!isfinite(arg.u.f)) return jx_fail(c, VX_EINVAL, "cannot convert float to integer");
            v = (int64_t)arg.u.f;
        } else if (jx_int_like(arg)) {
            v = jx_int_of(arg);
        } else {
            return jx_fail(c, VX_EINVAL, "%%%c format: a number is required, not %s", conv,
                           jx_type_name(arg));
        }
        cf[k++] = 'l';
        cf[k++] = 'l';
        cf[k++] = conv == 'i' || conv == 'u' ? 'd' : conv;
        cf[k] = 0;
        snprintf(out, sizeof out, cf, (long long)v);
    } else {
        if (!jx_is_num(arg))
            return jx_fail(c, VX_EINVAL, "must be real number, not %s", jx_type_name(arg));
        cf[k++] = conv;
        cf[k] = 0;
        snprintf(out, sizeof out, cf, jx_num_f(arg));
    }
#pragma GCC diagnostic pop
    return jx_buf_puts(c, b, out);
}

bool jx_percent_format(jx_ctx *c, jx_val fmt, jx_val args, jx_val *out) {
    const jx_str *f = fmt.u.s;
    const jx_val *argv = &args;
    size_t argc = 1, ai = 0;
    bool mapping = args.type == JX_DICT;
    if (args.type == JX_LIST && (args.flags & JX_F_TUPLE)) {
        argv = args.u.l->v;
        argc = args.u.l->n;
    }
    jx_buf b = {0};
    bool ok = true;
    size_t i = 0;
    while (ok && i < f->len) {
        const char *pct = memchr(f->s + i, '%', f->len - i);
        size_t stop = pct ? (size_t)(pct - f->s) : f->len;
        ok = jx_buf_put(c, &b, f->s + i, stop - i);
        i = stop;
        if (!ok || i >= f->len) break;
        i++;
        if (i >= f->len) {
            ok = jx_fail(c, VX_EINVAL, "incomplete format");
            break;
        }
        if (f->s[i] == '%') {
            ok = jx_buf_putc(c, &b, '%');
            i++;
            continue;
        }
        jx_val arg = jx_none();
        bool have_arg = false;
        if (f->s[i] == '(') {
            const char *close = memchr(f->s + i, ')', f->len - i);
            if (!close || !mapping) {
                ok = jx_fail(c, VX_EINVAL,
                             close ? "format requires a mapping" : "incomplete format key");
                break;
            }
            jx_val key;
            if (!(ok = jx_mkstr(c, f->s + i + 1, (size_t)(close - f->s) - i - 1, &key))) break;
            if (!jx_dict_get(args.u.d, key, &arg)) {
                ok = jx_fail(c, VX_EINVAL, "format key '%s' not found", key.u.s->s);
                break;
            }
            have_arg = true;
            i = (size_t)(close - f->s) + 1;
        }
        char flags[8];
        int nf = 0;
        while (i < f->len && strchr("-+ 0#", f->s[i]) && nf < 7) flags[nf++] = f->s[i++];
        flags[nf] = 0;
        int64_t width = -1, prec = -1;
        for (int part = 0; part < 2 && ok; part++) {
            int64_t *dst = part ? &prec : &width;
            if (part) {
                if (i >= f->len || f->s[i] != '.') break;
                i++;
                *dst = 0;
            }
            if (i < f->len && f->s[i] == '*') {
                i++;
                if (ai >= argc || mapping) {
                    ok = jx_fail(c, VX_EINVAL, "not enough arguments for format string");
                    break;
                }
                ok = jx_want_int(c, argv[ai++], "* width", dst);
            } else {
                while (i < f->len && f->s[i] >= '0' && f->s[i] <= '9' && *dst < 100000)
                    *dst = (*dst < 0 ? 0 : *dst) * 10 + (f->s[i++] - '0');
            }
        }
        if (!ok) break;
        while (i < f->len && strchr("hlL", f->s[i])) i++;
        if (i >= f->len) {
            ok = jx_fail(c, VX_EINVAL, "incomplete format");
            break;
        }
        char conv = f->s[i++];
        if (!have_arg) {
            if (mapping && argc == 1) {
                arg = args;
            } else if (ai < argc) {
                arg = argv[ai++];
            } else {
                ok = jx_fail(c, VX_EINVAL, "not enough arguments for format string");
                break;
            }
        }
        bool left = strchr(flags, '-') != NULL;
        if (conv == 's' || conv == 'r' || conv == 'a') {
            jx_buf tmp = {0};
            ok = conv == 's' ? jx_write_str(c, &tmp, arg) : jx_write_repr(c, &tmp, arg);
            size_t n = tmp.n;
            if (ok && prec >= 0) {
                size_t cut = 0, k = 0;
                while (cut < n && (int64_t)k < prec) {
                    size_t l;
                    jx_utf8_dec(tmp.p + cut, n - cut, &l);
                    cut += l;
                    k++;
                }
                n = cut;
            }
            ok = ok && pad_put(c, &b, tmp.p ? tmp.p : "", n, width, left, ' ');
            jx_buf_free(&tmp);
        } else if (conv == 'c') {
            char enc[4];
            size_t n;
            if (jx_int_like(arg) && jx_int_of(arg) >= 0 && jx_int_of(arg) <= 0x10FFFF) {
                n = jx_utf8_enc((uint32_t)jx_int_of(arg), enc);
                ok = pad_put(c, &b, enc, n, width, left, ' ');
            } else if (arg.type == JX_STR && arg.u.s->ncp == 1) {
                ok = pad_put(c, &b, arg.u.s->s, arg.u.s->len, width, left, ' ');
            } else {
                ok = jx_fail(c, VX_EINVAL, "%%c requires int or char");
            }
        } else if (strchr("diuxXoeEfFgG", conv)) {
            ok = format_number(c, &b, conv, flags, width, prec, arg);
        } else {
            ok = jx_fail(c, VX_EINVAL, "unsupported format character '%c'", conv);
        }
    }
    if (ok && !mapping && ai < argc && !(args.type == JX_LIST && !(args.flags & JX_F_TUPLE)))
        ok = jx_fail(c, VX_EINVAL, "not all arguments converted during string formatting");
    ok = ok && jx_mkstr(c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

/* str.format: "{}", "{0}", "{name}", "{{", "}}", optional "!r"/"!s" and a
 * format spec of [[fill]align][0][width][.precision][type]. */
static bool format_field(jx_ctx *c, jx_buf *b, jx_val v, const char *spec, size_t n) {
    char fill = ' ', align = 0, type = 0;
    size_t i = 0;
    if (n >= 2 && strchr("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (n >= 1 && strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < n && spec[i] == '0' && !align) {
        fill = '0';
        align = '=';
        i++;
    }
    int64_t width = 0, prec = -1;
    char group = 0;
    while (i < n && spec[i] >= '0' && spec[i] <= '9' && width < 100000)
        width = width * 10 + spec[i++] - '0';
    if (i < n && (spec[i] == ',' || spec[i] == '_')) group = spec[i++];
    if (i < n && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < n && spec[i] >= '0' && spec[i] <= '9' && prec < 1000)
            prec = prec * 10 + spec[i++] - '0';
    }
    if (i < n) type = spec[i++];
    if (i != n || (type && !strchr("sdxXofFeEgG%", type)))
        return jx_fail(c, VX_EINVAL, "unsupported format spec '%.*s'", (int)n, spec);
    if (!type && v.type == JX_FLOAT && prec >= 0) type = 'g';
    if (!type && jx_int_like(v) && v.type != JX_BOOL && group) type = 'd';
    jx_buf tmp = {0};
    bool ok;
    if (type && type != 's') {
        if (!jx_is_num(v)) {
            ok = jx_fail(c, VX_EINVAL, "unknown format code '%c' for object of type '%s'", type,
                         jx_type_name(v));
        } else if (type == '%') {
            ok = format_number(c, &tmp, 'f', "", 0, prec < 0 ? 6 : prec,
                               jx_float(jx_num_f(v) * 100.0)) &&
                 jx_buf_putc(c, &tmp, '%');
        } else if (strchr("dxXo", type) && !jx_int_like(v)) {
            ok = jx_fail(c, VX_EINVAL, "unknown format code '%c' for object of type 'float'",
                         type);
        } else {
            if (strchr("fFeE", type) && prec < 0) prec = 6;
            ok = format_number(c, &tmp, type, "", 0, prec, v);
        }
        if (ok && group && tmp.n) { /* thousands separators in the integer part */
            size_t start = (tmp.p[0] == '-' || tmp.p[0] == '+') ? 1 : 0, end = start;
            while (end < tmp.n && tmp.p[end] >= '0' && tmp.p[end] <= '9') end++;
            jx_buf g = {0};
            ok = jx_buf_put(c, &g, tmp.p, start);
            for (size_t k = start; ok && k < end; k++) {
                if (k > start && (end - k) % 3 == 0) ok = jx_buf_putc(c, &g, group);
                ok = ok && jx_buf_putc(c, &g, tmp.p[k]);
            }
            ok = ok && jx_buf_put(c, &g, tmp.p + end, tmp.n - end);
            jx_buf_free(&tmp);
            tmp = g;
        }
        if (!align) align = '>';
    } else if (type == 's' && v.type != JX_STR) {
        ok = jx_fail(c, VX_EINVAL, "unknown format code 's' for object of type '%s'",
                     jx_type_name(v));
    } else {
        ok = jx_write_str(c, &tmp, v);
        if (ok && prec >= 0 && v.type == JX_STR) {
            size_t cut = 0;
            for (int64_t k = 0; k < prec && cut < tmp.n; k++) {
                size_t l;
                jx_utf8_dec(tmp.p + cut, tmp.n - cut, &l);
                cut += l;
            }
            tmp.n = cut;
        }
        if (!align) align = jx_is_num(v) ? '>' : '<';
    }
    if (ok && align == '=' && tmp.n && (tmp.p[0] == '-' || tmp.p[0] == '+')) {
        ok = jx_buf_putc(c, b, tmp.p[0]); /* "=" pads between the sign and the digits */
        memmove(tmp.p, tmp.p + 1, --tmp.n);
        if (width > 0) width--;
    }
    if (ok) {
        size_t cps = jx_utf8_count(tmp.p ? tmp.p : "", tmp.n);
        size_t pad = (uint64_t)width > cps ? (size_t)width - cps : 0;
        size_t before = align == '<' ? 0 : align == '^' ? pad / 2 : pad;
        for (size_t k = 0; ok && k < before; k++) ok = jx_buf_putc(c, b, fill);
        ok = ok && jx_buf_put(c, b, tmp.p ? tmp.p : "", tmp.n);
        for (size_t k = before; ok && k < pad; k++) ok = jx_buf_putc(c, b, fill);
    }
    jx_buf_free(&tmp);
    return ok;
}

static bool str_format(jx_ctx *c, const jx_str *f, const jx_args *a, jx_val *out) {
    jx_buf b = {0};
    bool ok = true;
    int auto_idx = 0;
    size_t i = 0;
    while (ok && i < f->len) {
        char ch = f->s[i];
        if (ch == '}') {
            if (i + 1 < f->len && f->s[i + 1] == '}') {
                ok = jx_buf_putc(c, &b, '}');
                i += 2;
                continue;
            }
            ok = jx_fail(c, VX_EINVAL, "single '}' encountered in format string");
            break;
        }
        if (ch != '{') {
            ok = jx_buf_putc(c, &b, ch);
            i++;
            continue;
        }
        if (i + 1 < f->len && f->s[i + 1] == '{') {
            ok = jx_buf_putc(c, &b, '{');
            i += 2;
            continue;
        }
        const char *close = memchr(f->s + i, '}', f->len - i);
        if (!close) {
            ok = jx_fail(c, VX_EINVAL, "single '{' encountered in format string");
            break;
        }
        const char *field = f->s + i + 1;
        size_t flen = (size_t)(close - field);
        i = (size_t)(close - f->s) + 1;
        const char *colon = memchr(field, ':', flen);
        size_t nlen = colon ? (size_t)(colon - field) : flen;
        char conv = 0;
        if (nlen >= 2 && field[nlen - 2] == '!') {
            conv = field[nlen - 1];
            nlen -= 2;
        }
        jx_val v = jx_undef(NULL);
        if (nlen == 0 || (field[0] >= '0' && field[0] <= '9')) {
            int idx = nlen == 0 ? auto_idx++ : atoi(field);
            if (idx < 0 || idx >= a->npos) {
                ok = jx_fail(c, VX_EINVAL, "Replacement index %d out of range", idx);
                break;
            }
            v = a->pos[idx];
        } else {
            int k;
            for (k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == nlen && !memcmp(a->kwn[k], field, nlen)) break;
            if (k == a->nkw) {
                ok = jx_fail(c, VX_EINVAL, "format key '%.*s' not given", (int)nlen, field);
                break;
            }
            v = a->kwv[k];
        }
        if (conv == 'r' || conv == 'a') {
            jx_buf tmp = {0};
            ok = jx_write_repr(c, &tmp, v) && jx_mkstr(c, tmp.p ? tmp.p : "", tmp.n, &v);
            jx_buf_free(&tmp);
            if (!ok) break;
        }
        ok =
            format_field(c, &b, v, colon ? colon + 1 : "", colon ? (size_t)(close - colon - 1) : 0);
    }
    ok = ok && jx_mkstr(c, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

/* ------------------------------------------------------- string methods */

bool jx_str_case(jx_ctx *c, jx_val s, int mode, jx_val *out) {
    const jx_str *str = s.u.s;
    char *buf = jx_alloc(c, str->len * 2 + 1); /* case changes can grow a character by a byte */
    if (!buf) return false;
    size_t k = 0;
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < str->len;) {
        size_t l;
        uint32_t cp = jx_utf8_dec(str->s + i, str->len - i, &l), r = cp;
        uint32_t up = jx_to_upper(cp), lo = jx_to_lower(cp);
        bool cased = up != cp || lo != cp;
        switch (mode) {
        case JX_CASE_UPPER: r = up; break;
        case JX_CASE_LOWER: r = lo; break;
        case JX_CASE_SWAP: r = up != cp ? up : lo; break;
        case JX_CASE_CAPITALIZE: r = first ? up : lo; break;
        case JX_CASE_TITLE: r = cased ? (prev_cased ? lo : up) : cp; break;
        }
        prev_cased = cased;
        first = false;
        char enc[4];
        size_t m = r == cp ? l : jx_utf8_enc(r, enc);
        memcpy(buf + k, r == cp ? str->s + i : enc, m);
        k += m;
        i += l;
    }
    return jx_mkstr_like(c, s, buf, k, out);
}

static bool in_set(uint32_t cp, const jx_str *chars) {
    if (!chars) return jx_is_space(cp);
    for (size_t i = 0; i < chars->len;) {
        size_t l;
        if (jx_utf8_dec(chars->s + i, chars->len - i, &l) == cp) return true;
        i += l;
    }
    return false;
}

/* Start of the code point that ends at `end`. */
static size_t prev_start(const char *s, size_t from, size_t end) {
    size_t st = end - 1;
    while (st > from && end - st < 4 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
    size_t l;
    jx_utf8_dec(s + st, end - st, &l);
    return st + l == end ? st : end - 1;
}

bool jx_str_strip(jx_ctx *c, jx_val s, jx_val chars, int which, jx_val *out) {
    const jx_str *set = NULL;
    if (chars.type != JX_UNDEF && chars.type != JX_NONE &&
        !jx_want_str(c, chars, "strip arg", &set))
        return false;
    const jx_str *str = s.u.s;
    size_t b = 0, e = str->len;
    if (which & 1) {
        while (b < e) {
            size_t l;
            if (!in_set(jx_utf8_dec(str->s + b, e - b, &l), set)) break;
            b += l;
        }
    }
    if (which & 2) {
        while (e > b) {
            size_t st = prev_start(str->s, b, e), l;
            if (!in_set(jx_utf8_dec(str->s + st, e - st, &l), set)) break;
            e = st;
        }
    }
    if (b == 0 && e == str->len) {
        *out = s;
        return true;
    }
    return jx_mkstr_like(c, s, str->s + b, e - b, out);
}

bool jx_str_replace(jx_ctx *c, jx_val s, jx_val old, jx_val rep, int64_t count, jx_val *out) {
    const jx_str *str = s.u.s, *o, *r;
    if (!jx_want_str(c, old, "replace() argument 1", &o) ||
        !jx_want_str(c, rep, "replace() argument 2", &r))
        return false;
    if (count < 0) count = INT64_MAX;
    jx_buf b = {0};
    bool ok = true;
    int64_t done = 0;
    if (o->len == 0) { /* Python inserts at every character boundary */
        size_t i = 0;
        while (ok) {
            if (done < count) {
                ok = jx_buf_put(c, &b, r->s, r->len);
                done++;
            }
            if (i >= str->len) break;
            size_t l;
            jx_utf8_dec(str->s + i, str->len - i, &l);
            ok = ok && jx_buf_put(c, &b, str->s + i, l);
            i += l;
        }
    } else {
        size_t i = 0;
        while (ok && i <= str->len) {
            const char *hit = done < count ? jx_find(str->s + i, str->len - i, o->s, o->len) : NULL;
            if (!hit) {
                ok = jx_buf_put(c, &b, str->s + i, str->len - i);
                break;
            }
            size_t at = (size_t)(hit - str->s);
            ok = jx_buf_put(c, &b, str->s + i, at - i) && jx_buf_put(c, &b, r->s, r->len);
            i = at + o->len;
            done++;
        }
    }
    ok = ok && jx_mkstr_like(c, s, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

/* Byte range of s[start:end] with Python's clamping of code point indices. */
static void sub_range(const jx_str *s, jx_val start, jx_val end, size_t *b, size_t *e) {
    int64_t n = (int64_t)s->ncp, st = 0, en = n;
    if (jx_int_like(start)) {
        st = jx_int_of(start);
        if (st < 0) st = st + n < 0 ? 0 : st + n;
    }
    if (jx_int_like(end)) {
        en = jx_int_of(end);
        if (en < 0) en = en + n < 0 ? 0 : en + n;
    }
    if (en > n) en = n;
    if (st > en) st = en + 1; /* empty, and even an empty needle must not match */
    *b = st > n ? s->len + 1 : jx_cp_offset(s, st);
    *e = jx_cp_offset(s, en);
}

static bool str_split(jx_ctx *c, jx_val s, jx_val sepv, int64_t maxsplit, bool from_right,
                      jx_val *out) {
    const jx_str *str = s.u.s, *sep = NULL;
    if (sepv.type != JX_UNDEF && sepv.type != JX_NONE && !jx_want_str(c, sepv, "separator", &sep))
        return false;
    if (sep && sep->len == 0) return jx_fail(c, VX_EINVAL, "empty separator");
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (!jx_mklist(c, 0, out)) return false;
    jx_list *l = out->u.l;
    jx_val piece;
    if (!from_right) {
        size_t i = 0;
        int64_t splits = 0;
        if (sep) {
            for (;;) {
                const char *hit =
                    splits < maxsplit ? jx_find(str->s + i, str->len - i, sep->s, sep->len) : NULL;
                size_t end = hit ? (size_t)(hit - str->s) : str->len;
                if (!jx_mkstr_like(c, s, str->s + i, end - i, &piece) || !jx_list_push(c, l, piece))
                    return false;
                if (!hit) return true;
                i = end + sep->len;
                splits++;
            }
        }
        for (;;) {
            size_t k;
            while (i < str->len && jx_is_space(jx_utf8_dec(str->s + i, str->len - i, &k))) i += k;
            if (i >= str->len) return true;
            size_t j = i;
            if (splits >= maxsplit) j = str->len;
            while (j < str->len && !jx_is_space(jx_utf8_dec(str->s + j, str->len - j, &k))) j += k;
            if (!jx_mkstr_like(c, s, str->s + i, j - i, &piece) || !jx_list_push(c, l, piece))
                return false;
            splits++;
            i = j;
        }
    }
    /* from the right: collect pieces backwards, then reverse */
    size_t e = str->len;
    int64_t splits = 0;
    if (sep) {
        for (;;) {
            const char *hit = NULL;
            if (splits < maxsplit && e >= sep->len) {
                for (size_t p = e - sep->len + 1; p-- > 0;) {
                    if (!memcmp(str->s + p, sep->s, sep->len)) {
                        hit = str->s + p;
                        break;
                    }
                }
            }
            size_t start = hit ? (size_t)(hit - str->s) + sep->len : 0;
            if (!jx_mkstr_like(c, s, str->s + start, e - start, &piece) ||
                !jx_list_push(c, l, piece))
                return false;
            if (!hit) break;
            e = (size_t)(hit - str->s);
            splits++;
        }
    } else {
        for (;;) {
            size_t k;
            while (e > 0) {
                size_t st = prev_start(str->s, 0, e);
                if (!jx_is_space(jx_utf8_dec(str->s + st, e - st, &k))) break;
                e = st;
            }
            if (e == 0) break;
            size_t b = e;
            if (splits >= maxsplit) b = 0;
            while (b > 0) {
                size_t st = prev_start(str->s, 0, b);
                if (jx_is_space(jx_utf8_dec(str->s + st, b - st, &k))) break;
                b = st;
            }
            if (!jx_mkstr_like(c, s, str->s + b, e - b, &piece) || !jx_list_push(c, l, piece))
                return false;
            splits++;
            e = b;
        }
    }
    for (size_t i = 0; i < l->n / 2; i++) {
        jx_val t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    return true;
}

static bool is_line_break(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static bool str_splitlines(jx_ctx *c, jx_val s, bool keepends, jx_val *out) {
    const jx_str *str = s.u.s;
    if (!jx_mklist(c, 0, out)) return false;
    size_t i = 0;
    while (i < str->len) {
        size_t j = i, l = 0;
        while (j < str->len && !is_line_break(jx_utf8_dec(str->s + j, str->len - j, &l))) j += l;
        size_t eol = j;
        if (j < str->len) {
            j += l;
            if (str->s[eol] == '\r' && j < str->len && str->s[j] == '\n') j++;
        }
        jx_val piece;
        if (!jx_mkstr_like(c, s, str->s + i, (keepends ? j : eol) - i, &piece) ||
            !jx_list_push(c, out->u.l, piece))
            return false;
        i = j;
    }
    return true;
}

static bool str_test(const jx_str *s, int id) {
    if (s->len == 0) return false;
    bool any_cased = false;
    for (size_t i = 0; i < s->len;) {
        size_t l;
        uint32_t cp = jx_utf8_dec(s->s + i, s->len - i, &l);
        i += l;
        bool digit = cp >= '0' && cp <= '9';
        bool upper = jx_to_lower(cp) != cp, lower = jx_to_upper(cp) != cp;
        bool alpha =
            upper || lower || (cp >= 0x3400 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3);
        switch (id) {
        case JXM_ISDIGIT: if (!digit) return false; break;
        case JXM_ISALPHA: if (!alpha) return false; break;
        case JXM_ISALNUM: if (!alpha && !digit) return false; break;
        case JXM_ISSPACE: if (!jx_is_space(cp)) return false; break;
        case JXM_ISUPPER: if (lower) return false; any_cased |= upper; break;
        case JXM_ISLOWER: if (upper) return false; any_cased |= lower; break;
        }
    }
    return (id == JXM_ISUPPER || id == JXM_ISLOWER) ? any_cased : true;
}

static bool find_sub(jx_ctx *c, const jx_str *s, jx_val subv, jx_val start, jx_val end, bool rev,
                     int64_t *out) {
    if (!jx_charge(c, s->len >> 6)) return false;
    const jx_str *sub;
    if (!jx_want_str(c, subv, "substring", &sub)) return false;
    size_t b, e;
    sub_range(s, start, end, &b, &e);
    *out = -1;
    if (b > e || e - b < sub->len) return true;
    const char *hit = NULL;
    if (!rev) {
        hit = sub->len ? jx_find(s->s + b, e - b, sub->s, sub->len) : s->s + b;
    } else {
        for (size_t p = e - sub->len + 1; p-- > b;) {
            if (!memcmp(s->s + p, sub->s, sub->len)) {
                hit = s->s + p;
                break;
            }
        }
    }
    if (hit) *out = (int64_t)jx_utf8_count(s->s, (size_t)(hit - s->s));
    return true;
}

static bool starts_ends(jx_ctx *c, const jx_str *s, jx_val what, jx_val start, jx_val end,
                        bool ends, bool *out) {
    size_t b, e;
    sub_range(s, start, end, &b, &e);
    size_t n = 1;
    const jx_val *items = &what;
    if (what.type == JX_LIST && (what.flags & JX_F_TUPLE)) {
        n = what.u.l->n;
        items = what.u.l->v;
    }
    *out = false;
    for (size_t i = 0; i < n; i++) {
        const jx_str *p;
        if (!jx_want_str(c, items[i], ends ? "endswith arg" : "startswith arg", &p)) return false;
        if (b > e || e - b < p->len) continue;
        if (!memcmp(ends ? s->s + e - p->len : s->s + b, p->s, p->len)) {
            *out = true;
            return true;
        }
    }
    return true;
}

static bool str_pad(jx_ctx *c, jx_val s, int64_t width, jx_val fillv, int mode, jx_val *out) {
    const jx_str *str = s.u.s, *fill = NULL;
    char fb[4] = {' '};
    size_t fl = 1;
    if (fillv.type != JX_UNDEF) {
        if (!jx_want_str(c, fillv, "fill character", &fill)) return false;
        if (fill->ncp != 1)
            return jx_fail(c, VX_EINVAL, "the fill character must be exactly one character long");
        memcpy(fb, fill->s, fill->len);
        fl = fill->len;
    }
    if (width <= (int64_t)str->ncp) {
        *out = s;
        return true;
    }
    size_t pad = (size_t)width - str->ncp;
    if (pad > c->lim.max_output) return jx_fail(c, VX_ERANGE, "width too large");
    size_t left = mode == 0 ? pad / 2 + (pad & (size_t)width & 1) : mode == 1 ? 0 : pad;
    jx_buf b = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < left; i++) ok = jx_buf_put(c, &b, fb, fl);
    ok = ok && jx_buf_put(c, &b, str->s, str->len);
    for (size_t i = left; ok && i < pad; i++) ok = jx_buf_put(c, &b, fb, fl);
    ok = ok && jx_mkstr_like(c, s, b.p ? b.p : "", b.n, out);
    jx_buf_free(&b);
    return ok;
}

bool jx_str_method(jx_ctx *c, int id, jx_val self, const jx_args *a, jx_val *out) {
    static const char *const P2[] = {"a", "b"};
    static const char *const P3[] = {"a", "b", "c"};
    jx_val v[3];
    bool set[3];
    const jx_str *s = self.u.s;
    if (!jx_charge(c, s->len >> 6)) return false; /* every method scans the string */
    int np = 0; /* how many positional parameters the method takes */
    switch (id) {
    case JXM_STRIP: case JXM_LSTRIP: case JXM_RSTRIP: case JXM_ZFILL: case JXM_JOIN:
    case JXM_PARTITION: case JXM_RPARTITION: case JXM_REMOVEPREFIX: case JXM_REMOVESUFFIX:
    case JXM_SPLITLINES:
        np = 1;
        break;
    case JXM_SPLIT: case JXM_RSPLIT: case JXM_CENTER: case JXM_LJUST: case JXM_RJUST:
        np = 2;
        break;
    case JXM_STARTSWITH: case JXM_ENDSWITH: case JXM_REPLACE: case JXM_FIND: case JXM_RFIND:
    case JXM_INDEX: case JXM_RINDEX: case JXM_COUNT:
        np = 3;
        break;
    case JXM_FORMAT: return str_format(c, s, a, out);
    default: break;
    }
    if (id == JXM_SPLIT || id == JXM_RSPLIT) {
        static const char *const SP[] = {"sep", "maxsplit"};
        if (!jx_bind(c, id == JXM_SPLIT ? "split" : "rsplit", a, SP, 2, v, set)) return false;
    } else if (id == JXM_SPLITLINES) {
        static const char *const KP[] = {"keepends"};
        if (!jx_bind(c, "splitlines", a, KP, 1, v, set)) return false;
    } else if (id == JXM_REPLACE) {
        static const char *const RP[] = {"old", "new", "count"};
        if (!jx_bind(c, "replace", a, RP, 3, v, set)) return false;
    } else if (!jx_bind(c, "str method", a, np == 3 ? P3 : P2, np, v, set)) {
        return false;
    }
    int64_t n = -1;
    bool flag;
    switch (id) {
    case JXM_STRIP: return jx_str_strip(c, self, v[0], 3, out);
    case JXM_LSTRIP: return jx_str_strip(c, self, v[0], 1, out);
    case JXM_RSTRIP: return jx_str_strip(c, self, v[0], 2, out);
    case JXM_SPLIT:
    case JXM_RSPLIT:
        if (set[1] && !jx_want_int(c, v[1], "maxsplit", &n)) return false;
        return str_split(c, self, v[0], n, id == JXM_RSPLIT, out);
    case JXM_SPLITLINES: return str_splitlines(c, self, jx_truthy(v[0]), out);
    case JXM_STARTSWITH:
    case JXM_ENDSWITH:
        if (!set[0]) return jx_fail(c, VX_EINVAL, "startswith/endswith need an argument");
        if (!starts_ends(c, s, v[0], v[1], v[2], id == JXM_ENDSWITH, &flag)) return false;
        *out = jx_bool(flag);
        return true;
    case JXM_UPPER: return jx_str_case(c, self, JX_CASE_UPPER, out);
    case JXM_LOWER: return jx_str_case(c, self, JX_CASE_LOWER, out);
    case JXM_TITLE: return jx_str_case(c, self, JX_CASE_TITLE, out);
    case JXM_CAPITALIZE: return jx_str_case(c, self, JX_CASE_CAPITALIZE, out);
    case JXM_SWAPCASE: return jx_str_case(c, self, JX_CASE_SWAP, out);
    case JXM_REPLACE:
        if (set[2] && !jx_want_int(c, v[2], "count", &n)) return false;
        return jx_str_replace(c, self, v[0], v[1], n, out);
    case JXM_FIND:
    case JXM_RFIND:
    case JXM_INDEX:
    case JXM_RINDEX:
        if (!find_sub(c, s, v[0], v[1], v[2], id == JXM_RFIND || id == JXM_RINDEX, &n))
            return false;
        if (n < 0 && (id == JXM_INDEX || id == JXM_RINDEX))
            return jx_fail(c, VX_EINVAL, "substring not found");
        *out = jx_int(n);
        return true;
    case JXM_COUNT: {
        const jx_str *sub;
        if (!jx_want_str(c, v[0], "count arg", &sub)) return false;
        size_t b, e;
        sub_range(s, v[1], v[2], &b, &e);
        int64_t k = 0;
        if (b <= e) {
            if (sub->len == 0) {
                k = (int64_t)jx_utf8_count(s->s + b, e - b) + 1;
            } else {
                for (size_t p = b; p + sub->len <= e;) {
                    const char *hit = jx_find(s->s + p, e - p, sub->s, sub->len);
                    if (!hit) break;
                    k++;
                    p = (size_t)(hit - s->s) + sub->len;
                }
            }
        }
        *out = jx_int(k);
        return true;
    }
    case JXM_JOIN: {
        jx_list *items;
        if (!jx_iterate(c, v[0], &items)) return false;
        jx_buf b = {0};
        bool ok = true;
        for (size_t i = 0; ok && i < items->n; i++) {
            if (items->v[i].type != JX_STR) {
                ok = jx_fail(c, VX_EINVAL, "sequence item %zu: expected str instance, %s found", i,
                             jx_type_name(items->v[i]));
                break;
            }
            ok = (i == 0 || jx_buf_put(c, &b, s->s, s->len)) &&
                 jx_buf_put(c, &b, items->v[i].u.s->s, items->v[i].u.s->len);
        }
        ok = ok && jx_mkstr_like(c, self, b.p ? b.p : "", b.n, out);
        jx_buf_free(&b);
        return ok;
    }
    case JXM_ISDIGIT: case JXM_ISALPHA: case JXM_ISALNUM: case JXM_ISSPACE: case JXM_ISUPPER:
    case JXM_ISLOWER:
        *out = jx_bool(str_test(s, id));
        return true;
    case JXM_CENTER:
    case JXM_LJUST:
    case JXM_RJUST:
        if (!jx_want_int(c, v[0], "width", &n)) return false;
        return str_pad(c, self, n, v[1], id == JXM_CENTER ? 0 : id == JXM_LJUST ? 1 : 2, out);
    case JXM_ZFILL: {
        if (!jx_want_int(c, v[0], "width", &n)) return false;
        if (n <= (int64_t)s->ncp) {
            *out = self;
            return true;
        }
        size_t pad = (size_t)n - s->ncp;
        if (pad > c->lim.max_output) return jx_fail(c, VX_ERANGE, "width too large");
        char *buf = jx_alloc(c, s->len + pad + 1);
        if (!buf) return false;
        size_t sign = s->len && (s->s[0] == '+' || s->s[0] == '-');
        memcpy(buf, s->s, sign);
        memset(buf + sign, '0', pad);
        memcpy(buf + sign + pad, s->s + sign, s->len - sign);
        return jx_mkstr_like(c, self, buf, s->len + pad, out);
    }
    case JXM_PARTITION:
    case JXM_RPARTITION: {
        const jx_str *sep;
        if (!jx_want_str(c, v[0], "separator", &sep)) return false;
        if (sep->len == 0) return jx_fail(c, VX_EINVAL, "empty separator");
        int64_t at;
        if (!find_sub(c, s, v[0], jx_none(), jx_none(), id == JXM_RPARTITION, &at)) return false;
        jx_val parts[3];
        bool ok;
        if (at < 0) {
            jx_val empty;
            ok = jx_mkstr_like(c, self, "", 0, &empty);
            parts[0] = id == JXM_PARTITION ? self : empty;
            parts[1] = empty;
            parts[2] = id == JXM_PARTITION ? empty : self;
        } else {
            size_t b = jx_cp_offset(s, at);
            ok = jx_mkstr_like(c, self, s->s, b, &parts[0]) &&
                 jx_mkstr_like(c, self, sep->s, sep->len, &parts[1]) &&
                 jx_mkstr_like(c, self, s->s + b + sep->len, s->len - b - sep->len, &parts[2]);
        }
        return ok && jx_mktuple(c, parts, 3, out);
    }
    case JXM_REMOVEPREFIX:
    case JXM_REMOVESUFFIX: {
        const jx_str *p;
        if (!jx_want_str(c, v[0], "affix", &p)) return false;
        if (p->len > s->len || p->len == 0 ||
            memcmp(id == JXM_REMOVEPREFIX ? s->s : s->s + s->len - p->len, p->s, p->len)) {
            *out = self;
            return true;
        }
        return jx_mkstr_like(c, self, id == JXM_REMOVEPREFIX ? s->s + p->len : s->s,
                             s->len - p->len, out);
    }
    }
    return jx_fail(c, VX_EINTERNAL, "unknown str method");
}
