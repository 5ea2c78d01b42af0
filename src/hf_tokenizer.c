/*
 * hf_tokenizer.c - a Hugging Face tokenizer.json (+ tokenizer_config.json)
 * as GGUF tokenizer keys (hf_import.h), following what llama.cpp's
 * converter writes for byte-level BPE vocabularies ("gpt2" model):
 *
 *   tokens       model.vocab and added_tokens by id; ids nobody names
 *                (and ids up to the embedding's rows) become "[PAD<i>]"
 *   token_type   1 normal, 3 control (added and special, or looking
 *                special: <|...|>), 4 user-defined (other added ones),
 *                5 unused (the padding)
 *   merges       model.merges, "a b" strings (pairs [a, b] joined)
 *   pre          from the pre-tokenizer's Split regex: the regexes of
 *                Llama 3 ("llama-bpe"), Qwen2 ("qwen2") and o200k (GPT-4o,
 *                gpt-oss: "gpt-4o") are known, a
 *                lone ByteLevel with its own regex is GPT-2's ("gpt-2")
 *   bos/eos      tokenizer_config's bos_token / eos_token (unk, pad too),
 *                else config.json's bos_token_id / eos_token_id; add_bos /
 *                add_eos from the post-processor's template (a special
 *                token first / last), tokenizer_config's add_bos_token /
 *                add_eos_token over it; neither: the pre-tokenizer's
 *                default (llama.cpp's)
 *   chat_template  tokenizer_config's chat_template (of a list of named
 *                templates, "default")
 *
 * Normalizers are not applied (llama.cpp ignores them for BPE too: Qwen's
 * NFC only matters for text that is not NFC already).
 *
 * A BPE model with byte_fallback (Llama 2, Mistral: SentencePiece BPE as
 * Hugging Face's converter writes it) becomes the SentencePiece ("llama")
 * vocabulary instead: spm_json_convert.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "hf_import.h"
#include "name_index.h"

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

/* The Split regexes as Hugging Face publishes them, and their GGUF names. */
static const struct {
    const char *regex, *pre;
} k_split[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
    /* o200k (tiktoken's o200k_base / o200k_harmony: GPT-4o, gpt-oss; Llama 4's too) */
    {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
     "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
     "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "gpt-4o"},
};

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A token given as "text" or {"content": "text", ...}. */
static const char *token_text(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return str_of(v, "content");
    return NULL;
}

/* The pre-tokenizer's GGUF name, or an error. */
static vx_status find_pre(const cJSON *root, const char **pre, char *err, size_t err_size) {
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *parts = NULL;
    const char *type = cJSON_IsObject(pt) ? str_of(pt, "type") : NULL;
    if (!type)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer.json: a BPE tokenizer without a byte-level pre-tokenizer is not supported");
    if (strcmp(type, "Sequence") == 0) parts = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    const char *regex = NULL;
    int byte_level = 0, bl_regex = 0;
    const int n = parts ? cJSON_GetArraySize(parts) : 1;
    for (int i = 0; i < n; i++) {
        const cJSON *it = parts ? cJSON_GetArrayItem(parts, i) : pt;
        const char *t = cJSON_IsObject(it) ? str_of(it, "type") : NULL;
        if (!t) continue;
        if (strcmp(t, "ByteLevel") == 0) {
            byte_level = 1;
            const cJSON *ur = cJSON_GetObjectItemCaseSensitive(it, "use_regex");
            bl_regex = !cJSON_IsBool(ur) || cJSON_IsTrue(ur); /* default true */
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "add_prefix_space")))
                return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                 "tokenizer.json: ByteLevel with add_prefix_space is not supported");
        } else if (strcmp(t, "Split") == 0) {
            const cJSON *pat = cJSON_GetObjectItemCaseSensitive(it, "pattern");
            const char *rx = cJSON_IsObject(pat) ? str_of(pat, "Regex") : NULL;
            if (!rx || regex)
                return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                 "tokenizer.json: only one Split pre-tokenizer with a regex is supported");
            regex = rx;
        } else {
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "tokenizer.json: pre-tokenizer '%s' is not supported", t);
        }
    }
    if (!byte_level)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer.json: a BPE tokenizer without a ByteLevel pre-tokenizer is not supported");
    if (!regex) {
        if (!bl_regex)
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "tokenizer.json: ByteLevel without a regex and no Split is not supported");
        *pre = "gpt-2";
        return VX_OK;
    }
    if (bl_regex)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer.json: a Split regex followed by ByteLevel's own regex is not supported");
    for (size_t i = 0; i < sizeof k_split / sizeof k_split[0]; i++)
        if (strcmp(regex, k_split[i].regex) == 0) {
            *pre = k_split[i].pre;
            return VX_OK;
        }
    return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                     "tokenizer.json: the pre-tokenizer regex \"%.120s%s\" is not one vx knows (Llama 3's, Qwen2's, "
                     "o200k's, GPT-2's)",
                     regex, strlen(regex) > 120 ? "..." : "");
}

/* add_bos / add_eos from a TemplateProcessing post-processor: -1 unknown. */
static void template_flags(const cJSON *root, int *bos, int *eos) {
    *bos = *eos = -1;
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (!cJSON_IsObject(pp)) return;
    const char *type = str_of(pp, "type");
    if (type && strcmp(type, "Sequence") == 0) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(pp, "processors");
        const cJSON *it;
        cJSON_ArrayForEach(it, ps) {
            const char *t = str_of(it, "type");
            if (t && strcmp(t, "TemplateProcessing") == 0) {
                pp = it;
                type = t;
                break;
            }
        }
    }
    if (!type || strcmp(type, "TemplateProcessing") != 0) return;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const int n = cJSON_IsArray(single) ? cJSON_GetArraySize(single) : 0;
    if (n == 0) return;
    *bos = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken") != NULL;
    *eos = n > 1 && cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, n - 1), "SpecialToken") != NULL;
}

typedef struct tokbuf {
    char **tok;   /* [n] (NULL: unnamed yet) */
    int32_t *type;
    int64_t n;
} tokbuf;

static vx_status put_token(tokbuf *b, int64_t id, const char *text, int32_t type, bool replace, char *err,
                           size_t err_size) {
    if (id < 0 || id >= b->n)
        return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: token id %lld out of range",
                         (long long)id);
    if (b->tok[id]) {
        if (!replace && strcmp(b->tok[id], text) != 0)
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: id %lld names both '%s' and '%s'",
                             (long long)id, b->tok[id], text);
        free(b->tok[id]);
    }
    if (!(b->tok[id] = strdup(text))) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    b->type[id] = type;
    return VX_OK;
}

/* Ids nobody names become unused "[PAD<id>]" tokens (score -10000 when
 * there are scores), as the converter pads a vocabulary to the embedding. */
static vx_status pad_holes(tokbuf *b, float *scores, char *err, size_t err_size) {
    char pad[32];
    for (int64_t i = 0; i < b->n; i++)
        if (!b->tok[i]) {
            snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
            vx_status st = put_token(b, i, pad, TT_UNUSED, false, err, err_size);
            if (st) return st;
            if (scores) scores[i] = -10000.0f;
        }
    return VX_OK;
}

/* id of the token whose text is s, by a scan (a few lookups per import) */
static int64_t find_token(const tokbuf *b, const char *s) {
    for (int64_t i = 0; s && i < b->n; i++)
        if (b->tok[i] && strcmp(b->tok[i], s) == 0) return i;
    return -1;
}

/* an integral JSON number in [0, hi) */
static bool id_of(const cJSON *v, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    const double d = v->valuedouble;
    if (!(d >= 0 && d < (double)hi) || d != (double)(int64_t)d) return false;
    *out = (int64_t)d;
    return true;
}

/* The special token ids, add_bos / add_eos (add_bos, add_eos: the
 * tokenizer's own defaults, -1 none) and the chat template, from
 * tokenizer_config.json (cfg) and config.json (mcfg), either may be NULL. */
static vx_status special_keys(const cJSON *cfg, const cJSON *mcfg, const tokbuf *b, int add_bos, int add_eos,
                              vx_gguf_writer *w, char *err, size_t err_size) {
    vx_status st;
    const cJSON *it;
    static const struct {
        const char *cfg_key, *gguf_key;
    } ids[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
               {"eos_token", "tokenizer.ggml.eos_token_id"},
               {"unk_token", "tokenizer.ggml.unknown_token_id"},
               {"pad_token", "tokenizer.ggml.padding_token_id"}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *text = cfg ? token_text(cJSON_GetObjectItemCaseSensitive(cfg, ids[i].cfg_key)) : NULL;
        int64_t tid = find_token(b, text);
        if (text && tid < 0)
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer_config.json: %s '%s' is not in the vocabulary",
                             ids[i].cfg_key, text);
        if (!text && mcfg) { /* config.json's <name>_id, as the converter falls back to */
            char key[32];
            snprintf(key, sizeof key, "%s_id", ids[i].cfg_key);
            if (!id_of(cJSON_GetObjectItemCaseSensitive(mcfg, key), b->n, &tid)) tid = -1;
        }
        if (tid >= 0 && (st = vx_gguf_set_u32(w, ids[i].gguf_key, (uint32_t)tid))) return st;
    }
    if (cfg) {
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        const cJSON *ae = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
        if (cJSON_IsBool(ab)) add_bos = cJSON_IsTrue(ab);
        if (cJSON_IsBool(ae)) add_eos = cJSON_IsTrue(ae);
    }
    if (add_bos >= 0 && (st = vx_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos))) return st;
    if (add_eos >= 0 && (st = vx_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos))) return st;
    const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
    const char *tmpl = cJSON_IsString(ct) ? ct->valuestring : NULL;
    if (cJSON_IsArray(ct)) {
        cJSON_ArrayForEach(it, ct) {
            const char *name = str_of(it, "name"), *t = str_of(it, "template");
            if (t && (!tmpl || (name && strcmp(name, "default") == 0))) tmpl = t;
        }
    }
    if (tmpl && (st = vx_gguf_set_str(w, "tokenizer.chat_template", tmpl))) return st;
    return VX_OK;
}

/* llama.cpp's converter makes added tokens that look special control
 * tokens even when tokenizer.json says special: false (Qwen's FIM tokens,
 * deepseek-coder's, Gemma's <unused..>) */
static bool looks_special(const char *t) {
    const size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    /* U+FF5C FULLWIDTH VERTICAL LINE: EF BD 9C */
    if (n >= 8 && !strncmp(t, "<\xEF\xBD\x9C", 4) && !strcmp(t + n - 4, "\xEF\xBD\x9C>")) return true;
    return n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>';
}

/* The token count: one past the largest id of model.vocab and the added
 * tokens, at least n_vocab (the embedding rows; 0: unknown), which it must
 * not exceed. */
static vx_status count_ids(const cJSON *vocab, const cJSON *added, int64_t n_vocab, int64_t *n_out, char *err,
                           size_t err_size) {
    const int64_t id_cap = (int64_t)1 << 24;
    int64_t n = n_vocab > 0 ? n_vocab : 0, id = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!id_of(it, id_cap, &id))
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: token '%s' has no valid id", it->string);
        if (id + 1 > n) n = id + 1;
    }
    cJSON_ArrayForEach(it, added) {
        if (!id_of(cJSON_GetObjectItemCaseSensitive(it, "id"), id_cap, &id) || !str_of(it, "content"))
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: an added token lacks its id or content");
        if (id + 1 > n) n = id + 1;
    }
    if (n_vocab > 0 && n > n_vocab)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tokenizer.json has %lld tokens, more than the model's %lld embedding rows", (long long)n,
                         (long long)n_vocab);
    *n_out = n;
    return VX_OK;
}

/* ---------------------------------- SentencePiece-style BPE in tokenizer.json */

/* The normalizer / pre-tokenizer of a byte-fallback BPE tokenizer.json
 * (Llama 2's: Prepend "▁" and Replace " " -> "▁" normalizers; later
 * conversions': a Metaspace pre-tokenizer). *prefix: whether text starts
 * with "▁" (add_space_prefix); *scheme: Metaspace's prepend_scheme when it
 * prefixes ("first", "always": unlike the Prepend normalizer, not text that
 * already starts with a space, and "first" not after a special token);
 * *split: Metaspace splits the text before every "▁" (its default).
 * Anything else is refused. */
static vx_status metaspace_of(const cJSON *root, bool *prefix, const char **scheme, bool *split, char *err,
                              size_t err_size) {
    static const char *const ws = "\xE2\x96\x81"; /* U+2581 */
    bool spaces = false, prepend = false;
    *prefix = *split = false;
    *scheme = NULL;
    const char *what[2] = {"normalizer", "pre_tokenizer"};
    for (int k = 0; k < 2; k++) {
        const cJSON *top = cJSON_GetObjectItemCaseSensitive(root, what[k]);
        if (!top || cJSON_IsNull(top)) continue;
        const char *tt = cJSON_IsObject(top) ? str_of(top, "type") : NULL;
        if (!tt) return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: %s has no type", what[k]);
        const cJSON *parts = !strcmp(tt, "Sequence")
                                 ? cJSON_GetObjectItemCaseSensitive(top, k ? "pretokenizers" : "normalizers")
                                 : NULL;
        const int n = parts ? cJSON_GetArraySize(parts) : 1;
        for (int i = 0; i < n; i++) {
            const cJSON *it = parts ? cJSON_GetArrayItem(parts, i) : top;
            const char *t = cJSON_IsObject(it) ? str_of(it, "type") : NULL;
            const char *rep = t ? str_of(it, k ? "replacement" : "prepend") : NULL;
            if (t && !k && !strcmp(t, "Prepend") && rep && !strcmp(rep, ws)) {
                prepend = true;
            } else if (t && !k && !strcmp(t, "Replace")) {
                const cJSON *pat = cJSON_GetObjectItemCaseSensitive(it, "pattern");
                const char *from = cJSON_IsObject(pat) ? str_of(pat, "String") : NULL, *to = str_of(it, "content");
                if (!from || !to || strcmp(from, " ") != 0 || strcmp(to, ws) != 0)
                    return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                     "tokenizer.json: a Replace normalizer other than ' ' -> U+2581 is not supported");
                spaces = true;
            } else if (t && k && !strcmp(t, "Metaspace") && rep && !strcmp(rep, ws)) {
                /* prepend_scheme "always" / "first" / "never"; older
                 * files: add_prefix_space (as "always"); split: true
                 * unless false */
                const char *ps = str_of(it, "prepend_scheme");
                const cJSON *aps = cJSON_GetObjectItemCaseSensitive(it, "add_prefix_space");
                if (ps && strcmp(ps, "first") != 0 && strcmp(ps, "always") != 0 && strcmp(ps, "never") != 0)
                    return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                     "tokenizer.json: Metaspace prepend_scheme '%.40s' is not supported", ps);
                if (ps ? strcmp(ps, "never") != 0 : !cJSON_IsBool(aps) || cJSON_IsTrue(aps)) {
                    *prefix = true;
                    *scheme = ps && !strcmp(ps, "first") ? "first" : "always";
                }
                *split = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(it, "split"));
                spaces = true;
            } else {
                return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                                 "tokenizer.json: %s '%s' is not supported with byte_fallback BPE (Prepend and "
                                 "Replace of spaces with U+2581, or Metaspace, are)",
                                 k ? "pre-tokenizer" : "normalizer", t ? t : "?");
            }
        }
    }
    if (prepend) { /* the text already starts with "▁" when Metaspace sees it */
        *prefix = true;
        *scheme = NULL;
    }
    if (!spaces)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer.json: byte_fallback BPE that keeps spaces as they are is not supported "
                         "(SentencePiece-style vocabularies write them as U+2581)");
    return VX_OK;
}

static const char *tok_name(const void *ctx, int64_t i) { return ((const tokbuf *)ctx)->tok[i]; }

/* UTF-8 characters in s (bytes that do not continue one) */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* "<0xAB>": a byte token */
static bool is_byte_token(const char *s) {
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && strchr("0123456789ABCDEF", s[3]) &&
           strchr("0123456789ABCDEF", s[4]) && s[3] && s[4];
}

/* A byte-fallback BPE tokenizer.json (Llama 2, Mistral 7B, TinyLlama, ...:
 * SentencePiece BPE vocabularies as Hugging Face's converter writes them)
 * as the SentencePiece ("llama") vocabulary they came from, as llama.cpp's
 * converter writes such models: tokens, types (the unknown token, <0xXX>
 * bytes, special added tokens as control), and scores from the merges: a
 * token's score is minus the rank of the first merge that makes it, so
 * SentencePiece's highest-score-first merging applies the merges in
 * tokenizer.json's order (HF's converter lists the merges by the piece's
 * score, all of a piece's splits together: the same order). A token no
 * merge makes scores -inf, which the SentencePiece tokenizer never merges
 * into. Exact for merge lists as that converter makes them; a hand-made
 * list that makes one token by two merges far apart in rank would give
 * the token the better rank for both. */
static vx_status spm_json_convert(const cJSON *root, const cJSON *model, const cJSON *cfg, const cJSON *mcfg,
                                  int64_t n_vocab, vx_gguf_writer *w, tokbuf *b, float **scores, char *err,
                                  size_t err_size) {
    bool prefix, split;
    const char *scheme;
    vx_status st = metaspace_of(root, &prefix, &scheme, &split, err, err_size);
    if (st) return st;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab) || !cJSON_GetArraySize(vocab))
        return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: model.vocab is not a non-empty object");
    const int64_t id_cap = (int64_t)1 << 24;
    int64_t n = 0, id = 0;
    const cJSON *it;
    if ((st = count_ids(vocab, added, n_vocab, &n, err, err_size))) return st;
    b->n = n;
    b->tok = calloc((size_t)n, sizeof *b->tok);
    b->type = calloc((size_t)n, sizeof *b->type);
    *scores = calloc((size_t)n, sizeof **scores);
    if (!b->tok || !b->type || !*scores) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    const char *unk = str_of(model, "unk_token");
    cJSON_ArrayForEach(it, vocab) {
        id_of(it, id_cap, &id);
        if (b->tok[id])
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: id %lld is given to '%s' and '%s'",
                             (long long)id, b->tok[id], it->string);
        const int32_t type = unk && !strcmp(it->string, unk) ? 2 : is_byte_token(it->string) ? 6 : TT_NORMAL;
        if ((st = put_token(b, id, it->string, type, false, err, err_size))) return st;
    }
    /* the ranks: a name index over the vocabulary's tokens */
    vx_name_index ix = {0};
    for (int64_t i = 0; i < n && st == VX_OK; i++)
        if (b->tok[i] && vx_name_index_add(&ix, i, tok_name, b) < 0)
            st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) (*scores)[i] = NAN; /* no merge yet */
    int64_t rank = 0;
    size_t buf_cap = 256;
    char *buf = malloc(buf_cap);
    if (!buf && st == VX_OK) st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    if (!cJSON_IsArray(ms)) ms = NULL;
    cJSON_ArrayForEach(it, ms) {
        if (st) break;
        const char *l = NULL, *r = NULL, *sp = NULL;
        size_t ll = 0;
        if (cJSON_IsString(it) && (sp = strchr(it->valuestring, ' ')) && !strchr(sp + 1, ' ')) {
            l = it->valuestring, ll = (size_t)(sp - l), r = sp + 1;
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            l = cJSON_GetArrayItem(it, 0)->valuestring, ll = strlen(l), r = cJSON_GetArrayItem(it, 1)->valuestring;
        } else {
            st = vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: merge %lld is neither \"a b\" nor [a, b]",
                           (long long)rank);
            break;
        }
        const size_t lr = strlen(r);
        if (ll + lr >= buf_cap) {
            char *nb = realloc(buf, ll + lr + 1);
            if (!nb) {
                st = vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
                break;
            }
            buf = nb, buf_cap = ll + lr + 1;
        }
        memcpy(buf, l, ll), memcpy(buf + ll, r, lr + 1);
        const int64_t t = vx_name_index_find(&ix, buf, tok_name, b);
        if (t < 0) {
            st = vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: merge %lld makes '%.100s', which is not in the vocabulary",
                           (long long)rank, buf);
            break;
        }
        if (isnan((*scores)[t])) (*scores)[t] = -(float)rank;
        rank++;
    }
    vx_name_index_free(&ix);
    free(buf);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        if (isnan((*scores)[i])) /* single characters, bytes, holes: none made by a merge */
            (*scores)[i] = b->tok[i] && b->type[i] == TT_NORMAL && utf8_chars(b->tok[i]) > 1 ? -INFINITY : 0.0f;
    cJSON_ArrayForEach(it, added) {
        id_of(cJSON_GetObjectItemCaseSensitive(it, "id"), id_cap, &id);
        const char *content = str_of(it, "content");
        const bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) || looks_special(content);
        if (id < n && b->tok[id] && !strcmp(b->tok[id], content) && b->type[id] == 2) continue; /* <unk> */
        if ((st = put_token(b, id, content, special ? TT_CONTROL : TT_USER, true, err, err_size))) return st;
        (*scores)[id] = -1000.0f;
    }
    if ((st = pad_holes(b, *scores, err, err_size))) return st;
    if ((st = vx_gguf_set_str(w, "tokenizer.ggml.model", "llama")) ||
        (st = vx_gguf_set_str(w, "tokenizer.ggml.pre", "default")) ||
        (st = vx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)b->tok, (uint64_t)n)) ||
        (st = vx_gguf_set_arr(w, "tokenizer.ggml.scores", VX_GGUF_FLOAT32, *scores, (uint64_t)n)) ||
        (st = vx_gguf_set_arr(w, "tokenizer.ggml.token_type", VX_GGUF_INT32, b->type, (uint64_t)n)))
        return vx_seterr(err, err_size, st, "tokenizer.json: storing the vocabulary failed");
    if (!prefix && (st = vx_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", false))) return st;
    /* Metaspace's own rules, which llama.cpp's "llama" tokenizer does not
     * know (it prefixes the text and every piece after a special token
     * even when it starts with a space, as the Prepend normalizer does) */
    if (scheme && (st = vx_gguf_set_str(w, "vortex.tokenizer.prepend_scheme", scheme))) return st;
    if (split && (st = vx_gguf_set_bool(w, "vortex.tokenizer.split_on_space", true))) return st;
    int add_bos, add_eos;
    template_flags(root, &add_bos, &add_eos);
    return special_keys(cfg, mcfg, b, add_bos, add_eos, w, err, err_size);
}

static vx_status convert(const cJSON *root, const cJSON *cfg, const cJSON *mcfg, int64_t n_vocab, vx_gguf_writer *w, tokbuf *b,
                         char **merges, int64_t *n_merges, float **scores, char *err, size_t err_size) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = cJSON_IsObject(model) ? str_of(model, "type") : NULL;
    if (!mtype) return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: no model.type");
    if (strcmp(mtype, "BPE") != 0)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer.json: tokenizer model '%s' is not supported (BPE is: byte-level, or with "
                         "byte_fallback as SentencePiece-style vocabularies have it)", mtype);
    *n_merges = 0;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
        return spm_json_convert(root, model, cfg, mcfg, n_vocab, w, b, scores, err, err_size);
    const char *pre = NULL;
    vx_status st = find_pre(root, &pre, err, err_size);
    if (st) return st;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: model.vocab is not an object");
    const int64_t id_cap = (int64_t)1 << 24;
    int64_t n = 0, id = 0;
    const cJSON *it;
    if ((st = count_ids(vocab, added, n_vocab, &n, err, err_size))) return st;
    if (!cJSON_GetArraySize(vocab) && !cJSON_GetArraySize(added))
        return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: the vocabulary is empty");
    b->n = n;
    b->tok = calloc((size_t)n, sizeof *b->tok);
    b->type = calloc((size_t)n, sizeof *b->type);
    if (!b->tok || !b->type) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, vocab) {
        id_of(it, id_cap, &id);
        if (b->tok[id])
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: id %lld is given to '%s' and '%s'",
                             (long long)id, b->tok[id], it->string);
        if ((st = put_token(b, id, it->string, TT_NORMAL, false, err, err_size))) return st;
    }
    cJSON_ArrayForEach(it, added) {
        id_of(cJSON_GetObjectItemCaseSensitive(it, "id"), id_cap, &id);
        const bool special =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) || looks_special(str_of(it, "content"));
        if ((st = put_token(b, id, str_of(it, "content"), special ? TT_CONTROL : TT_USER, true, err, err_size)))
            return st;
    }
    if ((st = pad_holes(b, NULL, err, err_size))) return st;

    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(model, "merges");
    *n_merges = 0;
    const cJSON *m;
    if (!cJSON_IsArray(ms)) ms = NULL;
    /* cJSON arrays are lists: GetArrayItem(i) in a loop was quadratic (280k merges: minutes) */
    cJSON_ArrayForEach(m, ms) {
        const int64_t i = *n_merges;
        char *s = NULL;
        if (cJSON_IsString(m)) {
            s = strdup(m->valuestring);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
            const char *x = cJSON_GetArrayItem(m, 0)->valuestring, *y = cJSON_GetArrayItem(m, 1)->valuestring;
            const size_t lx = strlen(x), ly = strlen(y);
            if ((s = malloc(lx + ly + 2))) {
                memcpy(s, x, lx);
                s[lx] = ' ';
                memcpy(s + lx + 1, y, ly + 1);
            }
        } else {
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json: merge %lld is neither \"a b\" nor [a, b]",
                             (long long)i);
        }
        if (!s) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        merges[(*n_merges)++] = s;
    }

    if ((st = vx_gguf_set_str(w, "tokenizer.ggml.model", "gpt2")) || (st = vx_gguf_set_str(w, "tokenizer.ggml.pre", pre)) ||
        (st = vx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)b->tok, (uint64_t)n)) ||
        (st = vx_gguf_set_arr(w, "tokenizer.ggml.token_type", VX_GGUF_INT32, b->type, (uint64_t)n)) ||
        (st = vx_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)*n_merges)))
        return vx_seterr(err, err_size, st, "tokenizer.json: storing the vocabulary failed");

    int add_bos, add_eos;
    template_flags(root, &add_bos, &add_eos);
    return special_keys(cfg, mcfg, b, add_bos, add_eos, w, err, err_size);
}

vx_status vx_hf_tokenizer_to_gguf(const char *json, size_t len, const char *cfg_text, size_t cfg_len,
                                  const char *model_cfg, size_t model_cfg_len, int64_t n_vocab, vx_gguf_writer *w,
                                  char *err, size_t err_size) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.json is not a JSON object");
    }
    cJSON *cfg = NULL;
    if (cfg_text) {
        cfg = cJSON_ParseWithLength(cfg_text, cfg_len);
        if (!cJSON_IsObject(cfg)) {
            cJSON_Delete(root);
            cJSON_Delete(cfg);
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer_config.json is not a JSON object");
        }
    }
    cJSON *mcfg = model_cfg ? cJSON_ParseWithLength(model_cfg, model_cfg_len) : NULL;
    tokbuf b = {0};
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "merges");
    const int nm = cJSON_IsArray(ms) ? cJSON_GetArraySize(ms) : 0;
    char **merges = calloc((size_t)nm + 1, sizeof *merges);
    int64_t n_merges = 0;
    float *scores = NULL;
    vx_status st = merges ? convert(root, cfg, mcfg, n_vocab, w, &b, merges, &n_merges, &scores, err, err_size)
                          : vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    free(scores);
    for (int64_t i = 0; i < b.n && b.tok; i++) free(b.tok[i]);
    free(b.tok);
    free(b.type);
    for (int64_t i = 0; i < n_merges; i++) free(merges[i]);
    free(merges);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    cJSON_Delete(mcfg);
    return st;
}

/* ------------------------------------------------- SentencePiece models */

/* A protobuf reader over [p, end): the few wire types a SentencePiece
 * ModelProto uses. */
typedef struct pbuf {
    const uint8_t *p, *end;
} pbuf;

static bool pb_varint(pbuf *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        const uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* The next field: number, wire type, and for length-delimited ones the
 * bytes (sub), for 32-bit ones the value (u32), for varints v. */
static bool pb_field(pbuf *b, uint32_t *field, int *wt, pbuf *sub, uint64_t *v) {
    uint64_t key;
    if (!pb_varint(b, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX) return false;
    *field = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(b, v);
    case 1:
        if (b->end - b->p < 8) return false;
        b->p += 8;
        return true;
    case 2: {
        uint64_t n;
        if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return false;
        sub->p = b->p;
        sub->end = b->p + n;
        b->p += n;
        return true;
    }
    case 5:
        if (b->end - b->p < 4) return false;
        *v = (uint64_t)b->p[0] | (uint64_t)b->p[1] << 8 | (uint64_t)b->p[2] << 16 | (uint64_t)b->p[3] << 24;
        b->p += 4;
        return true;
    default: return false;
    }
}

/* SentencePiece's piece types are GGUF's token types (1 normal, 2 unknown,
 * 3 control, 4 user-defined, 5 unused, 6 byte). */
static vx_status spm_convert(const uint8_t *model, size_t len, const cJSON *cfg, const cJSON *mcfg,
                             const cJSON *added, int64_t n_vocab, vx_gguf_writer *w, tokbuf *b, float **scores,
                             char *err, size_t err_size) {
    /* pass 1: count the pieces, read the model type and add_dummy_prefix */
    pbuf top = {model, model + len}, sub;
    uint32_t f;
    int wt;
    uint64_t v;
    int64_t n_pieces = 0, model_type = 1; /* UNIGRAM by default */
    bool dummy_prefix = true, remove_ws = true;
    pbuf charsmap = {NULL, NULL}; /* normalizer_spec.precompiled_charsmap */
    int64_t spec_ids[4] = {0, 1, 2, -1}; /* trainer_spec's unk_id, bos_id, eos_id, pad_id (its defaults) */
    while (top.p < top.end) {
        if (!pb_field(&top, &f, &wt, &sub, &v))
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model: not a SentencePiece model (bad protobuf at byte %td)",
                             top.p - model);
        if (f == 1 && wt == 2) n_pieces++;
        if ((f != 2 && f != 3) || wt != 2) continue;
        const uint32_t spec = f; /* 2 TrainerSpec, 3 NormalizerSpec */
        while (sub.p < sub.end) {
            pbuf s2;
            uint64_t x = 0;
            if (!pb_field(&sub, &f, &wt, &s2, &x))
                return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model: a malformed trainer or normalizer spec");
            if (f == 3 && wt == 0) {
                if (spec == 2) model_type = (int64_t)x; /* model_type */
                else dummy_prefix = x != 0;            /* add_dummy_prefix */
            }
            if (spec == 3 && f == 2 && wt == 2) charsmap = s2;
            if (spec == 2 && f >= 40 && f <= 43 && wt == 0) spec_ids[f - 40] = (int32_t)(uint32_t)x; /* int32: -1 none */
            if (spec == 3 && f == 4 && wt == 0) remove_ws = x != 0; /* remove_extra_whitespaces */
        }
    }
    if (n_pieces == 0) return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model has no pieces");
    if (model_type != 1 && model_type != 2)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer.model: SentencePiece model type %lld is not supported (unigram and BPE are)",
                         (long long)model_type);
    int64_t n = n_pieces > n_vocab ? n_pieces : n_vocab, id = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, added) {
        if (id_of(it, (int64_t)1 << 24, &id) && id + 1 > n && (n_vocab <= 0 || id < n_vocab)) n = id + 1;
    }
    if (n_vocab > 0 && n > n_vocab)
        return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model has %lld pieces, more than the model's %lld embedding rows",
                         (long long)n, (long long)n_vocab);
    b->n = n;
    b->tok = calloc((size_t)n, sizeof *b->tok);
    b->type = calloc((size_t)n, sizeof *b->type);
    *scores = calloc((size_t)n, sizeof **scores);
    if (!b->tok || !b->type || !*scores) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    /* pass 2: the pieces */
    top = (pbuf){model, model + len};
    id = 0;
    while (top.p < top.end && pb_field(&top, &f, &wt, &sub, &v)) {
        if (f != 1 || wt != 2) continue;
        const uint8_t *text = NULL;
        size_t tlen = 0;
        float score = 0;
        int32_t type = TT_NORMAL;
        pbuf s2;
        uint64_t x = 0;
        while (sub.p < sub.end) {
            if (!pb_field(&sub, &f, &wt, &s2, &x))
                return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model: piece %lld is malformed", (long long)id);
            if (f == 1 && wt == 2) {
                text = s2.p;
                tlen = (size_t)(s2.end - s2.p);
            } else if (f == 2 && wt == 5) {
                const uint32_t u = (uint32_t)x;
                memcpy(&score, &u, 4);
            } else if (f == 3 && wt == 0) {
                if (x < 1 || x > 6)
                    return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model: piece %lld has type %llu", (long long)id,
                                     (unsigned long long)x);
                type = (int32_t)x;
            }
        }
        if (!text || tlen == 0 || memchr(text, 0, tlen))
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.model: piece %lld has no text (or a NUL in it)",
                             (long long)id);
        if (!(b->tok[id] = strndup((const char *)text, tlen))) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        b->type[id] = type;
        (*scores)[id] = score;
        id++;
    }
    vx_status st = pad_holes(b, *scores, err, err_size);
    if (st) return st;
    /* added_tokens.json, then tokenizer_config's added_tokens_decoder, as
     * the converter applies them */
    cJSON_ArrayForEach(it, added) {
        if (!id_of(it, n, &id)) continue;
        st = put_token(b, id, it->string, TT_USER, true, err, err_size);
        if (st) return st;
        (*scores)[id] = -1000.0f;
    }
    const cJSON *dec = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder") : NULL;
    if (!cJSON_IsObject(dec)) dec = NULL;
    cJSON_ArrayForEach(it, dec) {
        /* keys are ids: decimal digits only ("", "+5", " 6" are not); ids
         * past the vocabulary are skipped, as the converter does */
        long long tid = 0;
        const char *k = it->string;
        for (; *k >= '0' && *k <= '9'; k++) tid = tid < n ? tid * 10 + (*k - '0') : n;
        const char *content = str_of(it, "content");
        if (!it->string[0] || *k || !content)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tokenizer_config.json: added_tokens_decoder entry '%s' is not an id with a content",
                             it->string);
        if (tid >= n) continue;
        const bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) || looks_special(content);
        char *text = strdup(content);
        if (!text) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        if (!special) { /* user-defined spaces pre-normalized: U+2581 to ' ' */
            char *o = text;
            for (const char *q = content; *q;)
                if (!strncmp(q, "\xE2\x96\x81", 3)) *o++ = ' ', q += 3;
                else *o++ = *q++;
            *o = 0;
        }
        st = put_token(b, tid, text, special ? TT_CONTROL : TT_USER, true, err, err_size);
        free(text);
        if (st) return st;
        (*scores)[tid] = -1000.0f;
    }
    /* Unigram: llama.cpp's "t5" model with the normalizer's rules; BPE
     * (Llama's, Gemma's): "llama" */
    const bool ugm = model_type == 1;
    if (ugm && ((st = vx_gguf_set_arr(w, "tokenizer.ggml.precompiled_charsmap", VX_GGUF_UINT8, charsmap.p,
                                      (uint64_t)(charsmap.end - charsmap.p))) ||
                (st = vx_gguf_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", remove_ws))))
        return vx_seterr(err, err_size, st, "tokenizer.model: storing the normalizer failed");
    /* its special ids as the trainer set them (tokenizer_config.json's,
     * below, win): T5 and XLM-RoBERTa differ from "t5"'s defaults */
    static const char *const id_keys[4] = {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id",
                                           "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"};
    for (int k = 0; ugm && k < 4; k++)
        if (spec_ids[k] >= 0 && spec_ids[k] < n && (st = vx_gguf_set_u32(w, id_keys[k], (uint32_t)spec_ids[k])))
            return vx_seterr(err, err_size, st, "tokenizer.model: storing the special ids failed");
    if ((st = vx_gguf_set_str(w, "tokenizer.ggml.model", ugm ? "t5" : "llama")) ||
        (st = vx_gguf_set_str(w, "tokenizer.ggml.pre", "default")) ||
        (st = vx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)b->tok, (uint64_t)n)) ||
        (st = vx_gguf_set_arr(w, "tokenizer.ggml.scores", VX_GGUF_FLOAT32, *scores, (uint64_t)n)) ||
        (st = vx_gguf_set_arr(w, "tokenizer.ggml.token_type", VX_GGUF_INT32, b->type, (uint64_t)n)))
        return vx_seterr(err, err_size, st, "tokenizer.model: storing the vocabulary failed");
    if (!dummy_prefix && (st = vx_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", false))) return st;
    return special_keys(cfg, mcfg, b, -1, -1, w, err, err_size);
}

vx_status vx_hf_spm_to_gguf(const uint8_t *model, size_t len, const char *cfg_text, size_t cfg_len,
                            const char *model_cfg, size_t model_cfg_len, const char *added_json, size_t added_len,
                            int64_t n_vocab, vx_gguf_writer *w, char *err, size_t err_size) {
    cJSON *cfg = cfg_text ? cJSON_ParseWithLength(cfg_text, cfg_len) : NULL;
    cJSON *mcfg = model_cfg ? cJSON_ParseWithLength(model_cfg, model_cfg_len) : NULL;
    cJSON *added = added_json ? cJSON_ParseWithLength(added_json, added_len) : NULL;
    tokbuf b = {0};
    float *scores = NULL;
    vx_status st;
    if ((cfg_text && !cJSON_IsObject(cfg)) || (added_json && !cJSON_IsObject(added)))
        st = vx_seterr(err, err_size, VX_EFORMAT, "%s is not a JSON object",
                       cfg_text && !cJSON_IsObject(cfg) ? "tokenizer_config.json" : "added_tokens.json");
    else
        st = spm_convert(model, len, cfg, cJSON_IsObject(mcfg) ? mcfg : NULL, added, n_vocab, w, &b, &scores, err,
                         err_size);
    for (int64_t i = 0; i < b.n && b.tok; i++) free(b.tok[i]);
    free(b.tok);
    free(b.type);
    free(scores);
    cJSON_Delete(cfg);
    cJSON_Delete(mcfg);
    cJSON_Delete(added);
    return st;
}
