/*
 * tok_wpm.c - WordPiece ("bert" tokenizer model), as llama.cpp runs it on
 * converted BERT vocabularies, where word-initial pieces carry a "▁" prefix
 * and continuation pieces are bare (the converter drops "##").
 *
 * Pre-processing: each code point is reduced to the first code point of its
 * NFD form (strips accents), whitespace ends a word, control characters and
 * U+FFFD are dropped, the rest is lowercased; punctuation, ASCII symbols and
 * CJK ideographs become one-character words. Each word, with "▁" prepended,
 * is then cut greedily into the longest vocab pieces from the left; a word
 * with an unmatched position becomes [UNK].
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tok_internal.h"

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) || /* HF's bound, not the block's 0x2B820 */
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Decodes one code point; malformed input gives U+FFFD for one byte. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    size_t len = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t v = len == 1 ? c : c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    /* overlong, surrogate or out of range */
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
        (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = v;
    return len;
}

static size_t utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Cuts "▁" + word (in w[0..n), the prefix included) into pieces. */
static void wpm_word(const vx_vocab *v, const char *w, size_t n, vx_tokvec *out) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = VX_MIN(n, i + v->max_token_len);
        vx_token id = -1;
        for (; j > i; j--)
            if ((id = vx_tok_find(v, w + i, j - i)) >= 0) break;
        if (id < 0) { /* one position without a piece: the whole word is unknown */
            out->n = start;
            break;
        }
        vx_tokvec_push(out, id);
        i = j;
    }
    if (out->n == start && v->unk >= 0) vx_tokvec_push(out, v->unk);
}

bool vx_wpm_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out) {
    const unsigned char *u = (const unsigned char *)text;
    /* the word buffer: "▁" + lowercased characters (at most 4 bytes each) */
    if (len > (SIZE_MAX - 8) / 4) return false;
    char *w = malloc(4 * len + 8);
    if (!w) return false;
    memcpy(w, "\xe2\x96\x81", 3);
    size_t wn = 3;
    for (size_t i = 0; i < len && !out->oom;) {
        uint32_t cp;
        i += utf8_next(u + i, len - i, &cp);
        cp = vx_ucd_nfd_first(cp);
        unsigned f = vx_ucd_flags(cp);
        if (f & VX_UCD_SPACE) {
            if (wn > 3) wpm_word(v, w, wn, out);
            wn = 3;
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || (f & VX_UCD_CONTROL)) continue;
        size_t l = utf8_put(vx_ucd_tolower(cp), w + wn);
        if ((f & VX_UCD_PUNCT) || (cp < 0x7F && (f & VX_UCD_SYMBOL)) || is_cjk(cp)) {
            if (wn > 3) wpm_word(v, w, wn, out); /* finish the word before it */
            memmove(w + 3, w + wn, l);
            wpm_word(v, w, 3 + l, out); /* the character alone */
            wn = 3;
        } else {
            wn += l;
        }
    }
    if (wn > 3 && !out->oom) wpm_word(v, w, wn, out);
    free(w);
    return true;
}
