/*
 * vocab.c - the vocabulary: loading from GGUF metadata (tokens, scores,
 * types, special ids, per-model defaults), the text -> id hash, special
 * token partitioning, and the public tokenize / detokenize calls.
 *
 * Behaviour follows llama.cpp's llama_vocab (the reference the fixtures were
 * verified against): which tokens count as special, when BOS/EOS are added,
 * SPM's leading "▁", the decoded piece of each token type, and the
 * clean_spaces rules of detokenize. The model-specific merge loops live in
 * tok_spm.c, tok_bpe.c and tok_wpm.c.
 *
 * Deliberate differences from llama.cpp, all outside what its fixtures test:
 * invalid UTF-8 keeps its raw bytes (llama.cpp substitutes U+FFFD, so bytes
 * never round-trip); a BPE token character outside the byte alphabet
 * decodes to itself (llama.cpp writes "[UNK_BYTE_0x..]"); when several EOT
 * names exist the first in list order wins (llama.cpp: hash-map order).
 * A special id in the file that is out of range or not an integer keeps the
 * tokenizer model's default, as llama.cpp does (it warns); a default past
 * the vocabulary is -1 (none) instead of an assertion.
 */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tok_internal.h"

/* ------------------------------------------------------------ helpers */

uint64_t vx_tok_hash(const void *data, size_t len, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = seed ^ (0x9E3779B97F4A7C15ull * (len + 1));
    while (len >= 8) {
        uint64_t k;
        memcpy(&k, p, 8);
        h = (h ^ k) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        len -= 8;
    }
    uint64_t k = 0;
    for (size_t i = 0; i < len; i++) k |= (uint64_t)p[i] << (8 * i);
    h = (h ^ k) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return h;
}

#define TOKEN_SEED 0x746f6b656eull

vx_token vx_tok_find(const vx_vocab *v, const char *s, size_t len) {
    if (len > v->max_token_len) return -1;
    uint64_t h = vx_tok_hash(s, len, TOKEN_SEED);
    uint32_t tag = (uint32_t)(h >> 32), j = (uint32_t)h & v->map.mask;
    for (;; j = (j + 1) & v->map.mask) {
        uint64_t e = v->map.slots[j];
        if (e == 0) return -1;
        vx_token id = (vx_token)(uint32_t)e - 1;
        if ((uint32_t)(e >> 32) == tag && v->tok[id].len == len &&
            memcmp(v->text_pool + v->tok[id].off, s, len) == 0)
            return id;
    }
}

void vx_tokvec_push(vx_tokvec *t, vx_token id) {
    if (t->oom) return;
    if (t->n == t->cap) {
        size_t c = t->cap ? t->cap * 2 : 64;
        vx_token *p = c < SIZE_MAX / sizeof *p ? realloc(t->v, c * sizeof *p) : NULL;
        if (!p) {
            t->oom = true;
            return;
        }
        t->v = p;
        t->cap = c;
    }
    t->v[t->n++] = id;
}

void vx_tokvec_free(vx_tokvec *t) {
    free(t->v);
    memset(t, 0, sizeof *t);
}

bool vx_spanvec_push(vx_spanvec *s, size_t off, size_t len) {
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        vx_span *p = c < SIZE_MAX / sizeof *p ? realloc(s->v, c * sizeof *p) : NULL;
        if (!p) return false;
        s->v = p;
        s->cap = c;
    }
    s->v[s->n++] = (vx_span){off, len};
    return true;
}

void vx_spanvec_free(vx_spanvec *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* First occurrence of needle[0..m) (m > 0) in hay[0..n), or NULL. (memmem
 * is not standard C.) */
static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m) {
    while (n >= m) {
        const char *p = memchr(hay, needle[0], n - m + 1);
        if (!p) return NULL;
        if (memcmp(p + 1, needle + 1, m - 1) == 0) return p;
        n -= (size_t)(p - hay) + 1;
        hay = p + 1;
    }
    return NULL;
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static bool valid_id(const vx_vocab *v, vx_token id) { return id >= 0 && id < v->n_tokens; }

/* ------------------------------------------------------------ loading */

void vx_vocab_free(vx_vocab *v) {
    if (!v) return;
    free(v->tok);
    free(v->text_pool);
    free(v->map.slots);
    free(v->piece_pool);
    free(v->piece_off);
    free(v->is_eog);
    free(v->special);
    free(v->sp_pair_bits);
    free(v->sp_keys);
    free(v->sp_order);
    free(v->sp_single);
    vx_bpe_merges_free(v->merges);
    vx_pretok_free(v->pretok);
    vx_ugm_free(v->ugm);
    free(v);
}

static uint32_t attr_from_type(int64_t type) {
    switch (type) {
    case VX_TOKEN_TYPE_NORMAL: return VX_TATTR_NORMAL;
    case VX_TOKEN_TYPE_UNKNOWN: return VX_TATTR_UNKNOWN;
    case VX_TOKEN_TYPE_CONTROL: return VX_TATTR_CONTROL;
    case VX_TOKEN_TYPE_USER_DEFINED: return VX_TATTR_USER_DEFINED;
    case VX_TOKEN_TYPE_UNUSED: return VX_TATTR_UNUSED;
    case VX_TOKEN_TYPE_BYTE: return VX_TATTR_BYTE;
    default: return VX_TATTR_UNDEFINED;
    }
}

static bool is_int_type(vx_gguf_type t) {
    return t == VX_GGUF_UINT8 || t == VX_GGUF_INT8 || t == VX_GGUF_UINT16 ||
           t == VX_GGUF_INT16 || t == VX_GGUF_UINT32 || t == VX_GGUF_INT32 ||
           t == VX_GGUF_UINT64 || t == VX_GGUF_INT64;
}

/* Copies the token strings into one pool (empty ones get llama.cpp's
 * "[EMPTY_<id>]" so that every token has a findable, non-empty text). */
static vx_status load_texts(vx_vocab *v, const vx_gguf_kv *kv, char *err, size_t err_size) {
    uint64_t n = kv->v.arr.n, size = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t l = kv->v.arr.strs[i].len;
        if (l == 0) l = 32;
        if (vx_add_ovf(size, l + 1, &size) || size > UINT32_MAX)
            return vx_seterr(err, err_size, VX_EFORMAT, "token texts too large");
    }
    v->text_pool = malloc(size ? size : 1);
    if (!v->text_pool) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (tokens)");
    size_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        const vx_gguf_str *s = &kv->v.arr.strs[i];
        size_t l = (size_t)s->len;
        if (l == 0) {
            l = (size_t)snprintf(v->text_pool + o, 32, "[EMPTY_%llu]", (unsigned long long)i);
        } else {
            memcpy(v->text_pool + o, s->s, l);
            v->text_pool[o + l] = 0;
        }
        v->tok[i].off = (uint32_t)o;
        v->tok[i].len = (uint32_t)l;
        if (l > v->max_token_len) v->max_token_len = (uint32_t)l;
        o += l + 1;
    }
    v->text_pool_size = o;
    return VX_OK;
}

/* Builds the text -> id map. A repeated text maps to its last id. */
static vx_status build_map(vx_vocab *v, char *err, size_t err_size) {
    uint32_t n = (uint32_t)v->n_tokens, cap = 16;
    while (cap < n + n / 2 + 16) cap <<= 1; /* load factor <= 2/3 */
    v->map.slots = calloc(cap, sizeof *v->map.slots);
    uint64_t *hashes = malloc((size_t)n * sizeof *hashes);
    if (!v->map.slots || !hashes) {
        free(hashes);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (token map)");
    }
    v->map.mask = cap - 1;
    for (uint32_t id = 0; id < n; id++)
        hashes[id] = vx_tok_hash(vx_tok_str(v, (vx_token)id), v->tok[id].len, TOKEN_SEED);
    for (uint32_t id = 0; id < n; id++) {
        /* prefetch a few inserts ahead: the table is larger than the cache */
        if (id + 8 < n) __builtin_prefetch(&v->map.slots[(uint32_t)hashes[id + 8] & v->map.mask]);
        const char *s = vx_tok_str(v, (vx_token)id);
        size_t len = v->tok[id].len;
        uint32_t tag = (uint32_t)(hashes[id] >> 32), j = (uint32_t)hashes[id] & v->map.mask;
        for (;; j = (j + 1) & v->map.mask) {
            uint64_t e = v->map.slots[j];
            vx_token old = (vx_token)(uint32_t)e - 1;
            if (e == 0 || ((uint32_t)(e >> 32) == tag && v->tok[old].len == len &&
                           memcmp(vx_tok_str(v, old), s, len) == 0)) {
                v->map.slots[j] = ((uint64_t)tag << 32) | (id + 1);
                break;
            }
        }
    }
    free(hashes);
    return VX_OK;
}

/* Reads an optional token id key; ids outside the vocab keep the default. */
static void read_id(const vx_gguf *g, const vx_vocab *v, const char *key, vx_token *id) {
    int64_t x;
    if (vx_gguf_get_i64(g, key, &x) == 1 && x >= 0 && x < v->n_tokens) *id = (vx_token)x;
}

static void read_bool(const vx_gguf *g, const char *key, bool *b) {
    bool x;
    if (vx_gguf_get_bool(g, key, &x) == 1) *b = x;
}

/* First of the given names present in the vocab (in list order), or -1. */
static vx_token find_any(const vx_vocab *v, const char *const *names) {
    for (; *names; names++) {
        vx_token id = vx_tok_find(v, *names, strlen(*names));
        if (id >= 0) return id;
    }
    return -1;
}

/* Tokens recognised by name get the CONTROL type, as in llama.cpp. */
static void force_control(vx_vocab *v, vx_token id) {
    if (id >= 0 && !(v->tok[id].attr & VX_TATTR_CONTROL)) v->tok[id].attr = VX_TATTR_CONTROL;
}

/* OpenAI's harmony format (gpt-oss's o200k_harmony vocabulary): a reply
 * is several messages, each closed by <|end|>, the last by <|return|> (the
 * answer) or <|call|> (a tool call). With both of those, <|end|> does not
 * end the generation, and it and the header tokens (<|start|>, <|channel|>,
 * <|message|>, <|constrain|>) are rendered as text (USER_DEFINED, as
 * llama.cpp makes them), so that the reply's parser (harmony.h) sees the
 * message structure. */
static void harmony_tokens(vx_vocab *v) {
    const vx_token ret = vx_tok_find(v, "<|return|>", 10), call = vx_tok_find(v, "<|call|>", 8);
    if (ret < 0 || call < 0) return;
    static const char *const shown[] = {"<|end|>", "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"};
    for (size_t i = 0; i < sizeof shown / sizeof *shown; i++) {
        const vx_token id = vx_tok_find(v, shown[i], strlen(shown[i]));
        if (id < 0) continue;
        v->tok[id].attr = VX_TATTR_USER_DEFINED;
        v->is_eog[id] = 0;
        if (v->eos == id) v->eos = ret;
        if (v->eot == id) v->eot = ret;
    }
}

static void detect_special(vx_vocab *v) {
    static const char *const eot_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "\xe2\x96\x81<EOT>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", /* DeepSeek */
        NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const pre_names[] = {
        "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
        "<PRE>", "\xe2\x96\x81<PRE>", NULL}; /* CodeLlama's SentencePiece spelling: "\u2581<PRE>" */
    static const char *const suf_names[] = {
        "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
        "<SUF>", "\xe2\x96\x81<SUF>", NULL}; /* CodeLlama's SentencePiece spelling: "\u2581<SUF>" */
    static const char *const mid_names[] = {
        "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
        "<MID>", "\xe2\x96\x81<MID>", NULL}; /* CodeLlama's SentencePiece spelling: "\u2581<MID>" */
    static const char *const pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
    static const char *const rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", NULL};
    static const char *const sep_names[] = {"<|file_sep|>", NULL};
    static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>",
                                            "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                            "<EOT>", "\xe2\x96\x81<EOT>",
                                            "<|return|>", "<|call|>", NULL}; /* o200k_harmony */
    struct {
        vx_token *id;
        const char *const *names;
    } finds[] = {{&v->eot, eot_names},     {&v->eom, eom_names},     {&v->fim_pre, pre_names},
                 {&v->fim_suf, suf_names}, {&v->fim_mid, mid_names}, {&v->fim_pad, pad_names},
                 {&v->fim_rep, rep_names}, {&v->fim_sep, sep_names}};
    for (size_t i = 0; i < sizeof finds / sizeof finds[0]; i++) {
        if (*finds[i].id >= 0) continue;
        *finds[i].id = find_any(v, finds[i].names);
        force_control(v, *finds[i].id);
    }
    /* end-of-generation set */
    vx_token fixed[] = {v->fim_pad, v->fim_rep, v->fim_sep, v->eos, v->eot, v->eom};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i] >= 0) v->is_eog[fixed[i]] = 1;
    for (const char *const *n = eog_names; *n; n++) {
        vx_token id = vx_tok_find(v, *n, strlen(*n));
        if (id >= 0) {
            v->is_eog[id] = 1;
            force_control(v, id);
        }
    }
    harmony_tokens(v);
}

/* Orders the packed (inverted length, id) keys of build_special. */
static int cmp_special(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static vx_status build_special(vx_vocab *v, char *err, size_t err_size) {
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & (VX_TATTR_CONTROL | VX_TATTR_USER_DEFINED | VX_TATTR_UNKNOWN)) n++;
    /* longest text first, ties by id; packed keys keep qsort context-free */
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    uint64_t *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!v->special || !keys) {
        free(keys);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (special tokens)");
    }
    int32_t k = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & (VX_TATTR_CONTROL | VX_TATTR_USER_DEFINED | VX_TATTR_UNKNOWN))
            /* key: inverted length in the high half, id in the low half */
            keys[k++] = ((uint64_t)(UINT32_MAX - v->tok[id].len) << 32) | (uint32_t)id;
    qsort(keys, (size_t)n, sizeof *keys, cmp_special);
    for (int32_t i = 0; i < n; i++) v->special[i] = (vx_token)(uint32_t)keys[i];
    v->n_special = n;
    free(keys);
    return VX_OK;
}

static uint16_t pair_key(const char *s) {
    return (uint16_t)((unsigned char)s[0] << 8 | (unsigned char)s[1]);
}

/* Orders packed (key << 32 | index) values. */
static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static vx_status build_special_index(vx_vocab *v, char *err, size_t err_size) {
    int32_t n = v->n_special, n2 = 0, n1 = 0;
    for (int32_t i = 0; i < n; i++) (v->tok[v->special[i]].len >= 2 ? n2++ : n1++);
    v->sp_pair_bits = calloc(65536 / 8, 1);
    v->sp_keys = malloc((size_t)(n2 ? n2 : 1) * sizeof *v->sp_keys);
    v->sp_order = malloc((size_t)(n2 ? n2 : 1) * sizeof *v->sp_order);
    v->sp_single = malloc((size_t)(n1 ? n1 : 1) * sizeof *v->sp_single);
    uint64_t *tmp = malloc((size_t)(n2 ? n2 : 1) * sizeof *tmp);
    if (!v->sp_pair_bits || !v->sp_keys || !v->sp_order || !v->sp_single || !tmp) {
        free(tmp);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (special tokens)");
    }
    for (int32_t i = 0; i < n; i++) {
        vx_token id = v->special[i];
        if (v->tok[id].len < 2) {
            v->sp_single[v->n_sp_single++] = i;
            continue;
        }
        uint16_t k = pair_key(vx_tok_str(v, id));
        v->sp_pair_bits[k >> 3] |= (uint8_t)(1u << (k & 7));
        tmp[v->n_sp_order++] = (uint64_t)k << 32 | (uint32_t)i;
    }
    qsort(tmp, (size_t)v->n_sp_order, sizeof *tmp, cmp_u64);
    for (int32_t i = 0; i < v->n_sp_order; i++) {
        v->sp_keys[i] = (uint16_t)(tmp[i] >> 32);
        v->sp_order[i] = (int32_t)(uint32_t)tmp[i];
    }
    free(tmp);
    return VX_OK;
}

/* Byte value of an SPM byte token "<0xXX>" (hex digits after "<0x"). */
static unsigned token_byte(const char *s, size_t len) {
    unsigned val = 0;
    for (size_t i = 3; i < len && i < 5; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else break;
        val = val * 16 + d;
    }
    return val & 0xFF;
}

/* Writes the piece of a token as token_to_piece(special=true) renders it;
 * buf NULL measures. */
static size_t make_piece(const vx_vocab *v, vx_token id, char *buf) {
    const char *s = vx_tok_str(v, id);
    size_t len = v->tok[id].len;
    uint32_t a = v->tok[id].attr;
    if (a & (VX_TATTR_UNKNOWN | VX_TATTR_CONTROL | VX_TATTR_USER_DEFINED)) {
        if (buf) memcpy(buf, s, len);
        return len;
    }
    if (v->kind == VX_VOCAB_BPE) {
        if (a & VX_TATTR_NORMAL) return vx_bpe_decode_text(s, len, buf);
        return 0;
    }
    if (a & VX_TATTR_NORMAL) { /* "▁" -> " " */
        size_t o = 0;
        for (size_t i = 0; i < len;) {
            if (i + 3 <= len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                if (buf) buf[o] = ' ';
                o++;
                i += 3;
            } else {
                if (buf) buf[o] = s[i];
                o++;
                i++;
            }
        }
        return o;
    }
    if (a & VX_TATTR_BYTE) {
        if (buf) buf[0] = (char)token_byte(s, len);
        return 1;
    }
    return 0;
}

static vx_status build_pieces(vx_vocab *v, char *err, size_t err_size) {
    v->piece_off = malloc(((size_t)v->n_tokens + 1) * sizeof *v->piece_off);
    if (!v->piece_off) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (pieces)");
    uint64_t total = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        total += make_piece(v, id, NULL);
        if (total > UINT32_MAX) return vx_seterr(err, err_size, VX_EFORMAT, "pieces too large");
    }
    v->piece_pool = malloc(total ? (size_t)total : 1);
    if (!v->piece_pool) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (pieces)");
    uint32_t o = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        v->piece_off[id] = o;
        o += (uint32_t)make_piece(v, id, v->piece_pool + o);
    }
    v->piece_off[v->n_tokens] = o;
    return VX_OK;
}

/* llama.cpp's per-model token attributes that GGUF does not store. */
static void apply_name_rules(vx_vocab *v, const vx_gguf *g) {
    const char *name = NULL;
    char lower[256];
    lower[0] = 0;
    if (vx_gguf_get_str(g, "general.name", &name) == 1 && name) {
        size_t i = 0;
        for (; name[i] && i + 1 < sizeof lower; i++) {
            char c = name[i];
            lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        lower[i] = 0;
    }
    const char *pre = v->pre_name;
    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code")) {
        vx_token id = vx_tok_find(v, "<mask>", 6);
        if (id >= 0) v->tok[id].attr |= VX_TATTR_LSTRIP;
    } else if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
        for (int32_t i = 0; i < v->n_special; i++) v->tok[v->special[i]].attr |= VX_TATTR_RSTRIP;
        vx_token id = vx_tok_find(v, "</s>", 4);
        if (id >= 0) v->tok[id].attr |= VX_TATTR_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < 3; i++) {
            id = vx_tok_find(v, keep[i], strlen(keep[i]));
            if (id >= 0) v->tok[id].attr &= ~(uint32_t)VX_TATTR_RSTRIP;
        }
    }
}

static vx_status load(vx_vocab *v, const vx_gguf *g, char *err, size_t err_size) {
    const char *model = NULL, *pre = NULL;
    int r = vx_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (r == 0) return vx_seterr(err, err_size, VX_EFORMAT, "missing tokenizer.ggml.model");
    if (r < 0) return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.ggml.model is not a string");
    r = vx_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    if (r < 0) return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.ggml.pre is not a string");
    if (r == 0) pre = NULL;

    /* defaults of each tokenizer model */
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    const vx_pretok_info *pinfo = NULL;
    if (strcmp(model, "llama") == 0) {
        v->kind = VX_VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (strcmp(model, "gpt2") == 0) {
        v->kind = VX_VOCAB_BPE;
        v->bos = 11, v->eos = 11;
        pinfo = vx_pretok_lookup(pre);
        if (!pinfo)
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "unknown pre-tokenizer '%s' (tokenizer.ggml.pre)", pre);
        v->clean_spaces = pinfo->clean_spaces;
        v->ignore_merges = pinfo->ignore_merges;
        v->add_bos = pinfo->add_bos;
        if (pinfo->no_bos) v->bos = -1;
    } else if (strcmp(model, "bert") == 0) {
        v->kind = VX_VOCAB_WPM;
        v->bos = 101, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
        v->clean_spaces = true;
        v->add_bos = true;
    } else if (strcmp(model, "t5") == 0) { /* llama.cpp's defaults for T5 */
        v->kind = VX_VOCAB_UGM;
        v->eos = 1, v->unk = 2, v->pad = 0;
        v->add_space_prefix = true;
        v->add_eos = true;
    } else {
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tokenizer model '%s' is not supported (llama, gpt2, bert and t5 are)",
                         model);
    }
    snprintf(v->pre_name, sizeof v->pre_name, "%s", pre ? pre : "default");
    read_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    const char *scheme = NULL;
    r = vx_gguf_get_str(g, "vortex.tokenizer.prepend_scheme", &scheme);
    if (r < 0 || (r > 0 && strcmp(scheme, "first") != 0 && strcmp(scheme, "always") != 0))
        return vx_seterr(err, err_size, VX_EFORMAT, "vortex.tokenizer.prepend_scheme is not \"first\" or \"always\"");
    v->spm_prefix_unless_space = r > 0;
    v->spm_prefix_first = r > 0 && !strcmp(scheme, "first");
    read_bool(g, "vortex.tokenizer.split_on_space", &v->spm_split);

    /* tokens, scores, types */
    vx_gguf_type t;
    uint64_t n;
    const vx_gguf_kv *kv_tok = NULL, *kv_score = NULL, *kv_type = NULL;
    r = vx_gguf_get_arr(g, "tokenizer.ggml.tokens", &t, &n, &kv_tok);
    if (r == 0) return vx_seterr(err, err_size, VX_EFORMAT, "missing tokenizer.ggml.tokens");
    if (r < 0 || t != VX_GGUF_STRING)
        return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.ggml.tokens is not a string array");
    if (n == 0 || n > (1u << 26))
        return vx_seterr(err, err_size, VX_EFORMAT, "bad vocabulary size %llu",
                         (unsigned long long)n);
    v->n_tokens = (int32_t)n;
    uint64_t n2;
    r = vx_gguf_get_arr(g, "tokenizer.ggml.scores", &t, &n2, &kv_score);
    if (r < 0 || (r == 1 && (n2 != n || (t != VX_GGUF_FLOAT32 && t != VX_GGUF_FLOAT64))))
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tokenizer.ggml.scores must be %llu floats", (unsigned long long)n);
    if (r == 0) kv_score = NULL;
    r = vx_gguf_get_arr(g, "tokenizer.ggml.token_type", &t, &n2, &kv_type);
    if (r < 0 || (r == 1 && (n2 != n || !is_int_type(t))))
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tokenizer.ggml.token_type must be %llu integers",
                         (unsigned long long)n);
    if (r == 0) kv_type = NULL;

    v->tok = calloc((size_t)n, sizeof *v->tok);
    v->is_eog = calloc((size_t)n, 1);
    if (!v->tok || !v->is_eog) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (vocab)");
    vx_status st = load_texts(v, kv_tok, err, err_size);
    if (st != VX_OK) return st;
    for (uint64_t i = 0; i < n; i++) {
        double sc = kv_score ? vx_gguf_arr_f64(kv_score, i) : 0.0;
        if (sc != sc) sc = 0; /* NaN would break the merge order */
        if (sc > 3.0e38) sc = 3.0e38;
        if (sc < -3.0e38 && isfinite(sc)) sc = -3.0e38; /* -inf: never merged into (tok_spm.c) */
        v->tok[i].score = (float)sc;
        v->tok[i].attr = kv_type ? attr_from_type(vx_gguf_arr_i64(kv_type, i)) : VX_TATTR_NORMAL;
    }
    st = build_map(v, err, err_size);
    if (st != VX_OK) return st;

    if (v->kind == VX_VOCAB_BPE) {
        const vx_gguf_kv *kv_m = NULL;
        r = vx_gguf_get_arr(g, "tokenizer.ggml.merges", &t, &n2, &kv_m);
        if (r == 0) return vx_seterr(err, err_size, VX_EFORMAT, "missing tokenizer.ggml.merges");
        st = vx_bpe_merges_load(r > 0 ? kv_m : NULL, &v->merges, err, err_size);
        if (st != VX_OK) return st;
        st = vx_pretok_create(pinfo->regex_set, &v->pretok, err, err_size);
        if (st != VX_OK) return st;
    }

    /* special ids: defaults above stay unless the key names a valid id */
    struct {
        const char *key;
        vx_token *id;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos},
        {"tokenizer.ggml.eos_token_id", &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},
        {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk},
        {"tokenizer.ggml.seperator_token_id", &v->sep},
        {"tokenizer.ggml.padding_token_id", &v->pad},
        {"tokenizer.ggml.mask_token_id", &v->mask},
        {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
        {"tokenizer.ggml.prefix_token_id", &v->fim_pre}, /* deprecated names */
        {"tokenizer.ggml.suffix_token_id", &v->fim_suf},
        {"tokenizer.ggml.middle_token_id", &v->fim_mid},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) read_id(g, v, ids[i].key, ids[i].id);
    /* built-in defaults can exceed a small vocabulary */
    vx_token *all[] = {&v->bos,     &v->eos,     &v->eot,     &v->eom,     &v->unk,
                       &v->sep,     &v->pad,     &v->mask,    &v->fim_pre, &v->fim_suf,
                       &v->fim_mid, &v->fim_pad, &v->fim_rep, &v->fim_sep};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!valid_id(v, *all[i])) *all[i] = -1;
    read_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    read_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos);

    detect_special(v);
    st = build_special(v, err, err_size);
    if (st != VX_OK) return st;
    st = build_special_index(v, err, err_size);
    if (st != VX_OK) return st;
    st = build_pieces(v, err, err_size);
    if (st != VX_OK) return st;
    apply_name_rules(v, g);

    if (v->kind == VX_VOCAB_SPM) {
        v->spm_word_cut = true;
        for (int32_t id = 0; id < v->n_tokens && v->spm_word_cut; id++) {
            const char *s = vx_tok_str(v, id);
            size_t len = v->tok[id].len;
            for (size_t i = 1; i + 3 <= len; i++)
                if (memcmp(s + i, "\xe2\x96\x81", 3) == 0 &&
                    (i < 3 || memcmp(s + i - 3, "\xe2\x96\x81", 3) != 0)) {
                    v->spm_word_cut = false;
                    break;
                }
        }
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        vx_token id = vx_tok_find(v, name, 6);
        if (id < 0) {
            char c = (char)b;
            id = vx_tok_find(v, &c, 1);
        }
        v->byte_tok[b] = id;
    }
    if (v->kind == VX_VOCAB_UGM) {
        const vx_gguf_kv *kv_cm = NULL;
        r = vx_gguf_get_arr(g, "tokenizer.ggml.precompiled_charsmap", &t, &n2, &kv_cm);
        if (r < 0 || (r == 1 && t != VX_GGUF_UINT8 && t != VX_GGUF_INT8))
            return vx_seterr(err, err_size, VX_EFORMAT, "tokenizer.ggml.precompiled_charsmap is not a byte array");
        bool remove_ws = false; /* llama.cpp's default when the key is absent */
        read_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &remove_ws);
        st = vx_ugm_create(v, r == 1 ? kv_cm->v.arr.data : NULL, r == 1 ? (size_t)n2 : 0, remove_ws,
                           v->add_space_prefix, &v->ugm, err, err_size);
        if (st != VX_OK) return st;
    }
    return VX_OK;
}

vx_status vx_vocab_load(const vx_gguf *g, vx_vocab **out, char *err, size_t err_size) {
    if (!out) return vx_seterr(err, err_size, VX_EINVAL, "vx_vocab_load: out is NULL");
    *out = NULL;
    if (!g) return vx_seterr(err, err_size, VX_EINVAL, "vx_vocab_load: no GGUF file");
    vx_vocab *v = calloc(1, sizeof *v);
    if (!v) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory (vocab)");
    vx_status st = load(v, g, err, err_size);
    if (st != VX_OK) {
        vx_vocab_free(v);
        return st;
    }
    *out = v;
    return VX_OK;
}

/* ------------------------------------------------------------ getters */

int32_t vx_vocab_n_tokens(const vx_vocab *v) { return v ? v->n_tokens : 0; }
vx_token vx_vocab_bos(const vx_vocab *v) { return v ? v->bos : -1; }
vx_token vx_vocab_eos(const vx_vocab *v) { return v ? v->eos : -1; }
vx_token vx_vocab_eot(const vx_vocab *v) { return v ? v->eot : -1; }
bool vx_vocab_add_bos(const vx_vocab *v) { return v && v->add_bos && v->bos >= 0; }
bool vx_vocab_add_eos(const vx_vocab *v) { return v && v->add_eos && v->eos >= 0; }
bool vx_vocab_fim(const vx_vocab *v, vx_token *pre, vx_token *suf, vx_token *mid) {
    *pre = v ? v->fim_pre : -1;
    *suf = v ? v->fim_suf : -1;
    *mid = v ? v->fim_mid : -1;
    return *pre >= 0 && *suf >= 0 && *mid >= 0;
}

bool vx_vocab_fim_repo(const vx_vocab *v, vx_token *rep, vx_token *sep) {
    *rep = v ? v->fim_rep : -1;
    *sep = v ? v->fim_sep : -1;
    return *rep >= 0 || *sep >= 0;
}

bool vx_vocab_is_eog(const vx_vocab *v, vx_token t) {
    return v && valid_id(v, t) && v->is_eog[t];
}

bool vx_vocab_is_control(const vx_vocab *v, vx_token t) {
    return v && valid_id(v, t) && (v->tok[t].attr & VX_TATTR_CONTROL);
}

const char *vx_vocab_text(const vx_vocab *v, vx_token t) {
    return v && valid_id(v, t) ? vx_tok_str(v, t) : NULL;
}

/* --------------------------------------------------------- tokenizing */

typedef struct frag {
    vx_token tok; /* -1: raw text */
    size_t off, len;
} frag;

typedef struct fragvec {
    frag *v;
    size_t n, cap;
} fragvec;

static bool frag_push(fragvec *f, vx_token tok, size_t off, size_t len) {
    if (f->n == f->cap) {
        size_t c = f->cap ? f->cap * 2 : 16;
        frag *p = c < SIZE_MAX / sizeof *p ? realloc(f->v, c * sizeof *p) : NULL;
        if (!p) return false;
        f->v = p;
        f->cap = c;
    }
    f->v[f->n++] = (frag){tok, off, len};
    return true;
}

/* Whether a special token takes part in partitioning: CONTROL and UNKNOWN
 * tokens only with parse_special, USER_DEFINED ones always. */
static bool special_active(const vx_vocab *v, vx_token id, bool parse_special) {
    return parse_special || !(v->tok[id].attr & (VX_TATTR_CONTROL | VX_TATTR_UNKNOWN));
}

/* Marks in present[] (indexed like v->special) the active special tokens
 * that occur in the text, with one scan over it. Returns how many. */
static int32_t find_present(const vx_vocab *v, const char *text, size_t len, bool parse_special,
                            uint8_t *present) {
    int32_t found = 0;
    for (int32_t k = 0; k < v->n_sp_single; k++) {
        int32_t si = v->sp_single[k];
        vx_token id = v->special[si];
        if (special_active(v, id, parse_special) && memchr(text, vx_tok_str(v, id)[0], len)) {
            present[si] = 1;
            found++;
        }
    }
    for (size_t p = 0; p + 1 < len; p++) {
        uint16_t key = pair_key(text + p);
        if (!(v->sp_pair_bits[key >> 3] & (1u << (key & 7)))) continue;
        size_t lo = 0, hi = (size_t)v->n_sp_order; /* first index with this key */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (v->sp_keys[mid] < key) lo = mid + 1;
            else hi = mid;
        }
        for (size_t k = lo; k < (size_t)v->n_sp_order && v->sp_keys[k] == key; k++) {
            int32_t si = v->sp_order[k];
            vx_token id = v->special[si];
            size_t sl = v->tok[id].len;
            if (present[si] || sl > len - p || !special_active(v, id, parse_special)) continue;
            if (memcmp(text + p, vx_tok_str(v, id), sl) == 0) {
                present[si] = 1;
                found++;
            }
        }
    }
    return found;
}

/* Splits the text on special tokens, longest token first: each one is cut
 * out of every raw fragment left by the previous ones (the order decides
 * overlaps, as in llama.cpp). */
static bool partition(const vx_vocab *v, const char *text, size_t len, bool parse_special,
                      fragvec *f) {
    fragvec tmp = {0};
    bool ok = frag_push(f, -1, 0, len);
    if (v->n_special == 0) return ok;
    uint8_t *present = calloc((size_t)v->n_special, 1);
    if (!present) return false;
    if (ok && find_present(v, text, len, parse_special, present) == 0) {
        free(present);
        return ok;
    }
    for (int32_t si = 0; ok && si < v->n_special; si++) {
        if (!present[si]) continue;
        vx_token id = v->special[si];
        uint32_t attr = v->tok[id].attr;
        const char *s = vx_tok_str(v, id);
        size_t sl = v->tok[id].len;
        tmp.n = 0;
        for (size_t fi = 0; ok && fi < f->n; fi++) {
            frag fr = f->v[fi];
            if (fr.tok >= 0) {
                ok = frag_push(&tmp, fr.tok, 0, 0);
                continue;
            }
            size_t base = fr.off, rem = fr.len;
            while (ok && rem > 0) {
                const char *m = find_bytes(text + base, rem, s, sl);
                if (!m) {
                    ok = frag_push(&tmp, -1, base, rem);
                    break;
                }
                size_t mo = (size_t)(m - text);
                size_t left = mo - base;
                if (attr & VX_TATTR_LSTRIP)
                    while (left > 0 && is_space(text[base + left - 1])) left--;
                if (left > 0) ok = ok && frag_push(&tmp, -1, base, left);
                ok = ok && frag_push(&tmp, id, 0, 0);
                size_t roff = mo + sl, rlen = base + rem - roff;
                if (attr & VX_TATTR_RSTRIP)
                    while (rlen > 0 && is_space(text[roff])) roff++, rlen--;
                base = roff;
                rem = rlen;
            }
        }
        fragvec sw = *f;
        *f = tmp;
        tmp = sw;
    }
    free(tmp.v);
    free(present);
    return ok;
}

/* SPM: " " -> "▁", with the leading "▁" when asked. */
static bool spm_fragment(const vx_vocab *v, const char *s, size_t len, bool prefix,
                         vx_tokvec *out) {
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) spaces += s[i] == ' ';
    if (len > (SIZE_MAX - 3) / 3) return false;
    char *buf = malloc(len + 2 * spaces + 3);
    if (!buf) return false;
    size_t o = 0;
    if (prefix) {
        memcpy(buf, "\xe2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(buf + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            buf[o++] = s[i];
        }
    }
    bool ok = vx_spm_tokenize(v, buf, o, out);
    free(buf);
    return ok;
}

/* len < 0 means text is NUL-terminated. Returns INT32_MIN if memory runs out
 * (the only failure). */
int32_t vx_tokenize(const vx_vocab *v, const char *text, int32_t len, vx_token *tokens,
                    int32_t n_max, bool add_special, bool parse_special) {
    if (!v) return 0;
    if (!text) len = 0;
    size_t n = len >= 0 ? (size_t)len : strlen(text);
    vx_tokvec out = {0};
    fragvec f = {0};
    bool ok = n == 0 || partition(v, text, n, parse_special, &f);
    if (ok && add_special && v->add_bos && v->bos >= 0 && v->kind != VX_VOCAB_WPM)
        vx_tokvec_push(&out, v->bos);
    if (ok && add_special && v->kind == VX_VOCAB_WPM && v->bos >= 0)
        vx_tokvec_push(&out, v->bos);
    bool prev_special = true; /* SPM: the first text fragment gets the prefix */
    for (size_t i = 0; ok && i < f.n; i++) {
        const frag *fr = &f.v[i];
        if (fr->tok >= 0) {
            vx_tokvec_push(&out, fr->tok);
            prev_special = true;
            continue;
        }
        const char *s = text + fr->off;
        switch (v->kind) {
        case VX_VOCAB_SPM: {
            /* llama.cpp: the text's start and each piece after a special
             * token get the prefix; HF's Metaspace: not on a piece that
             * starts with a space, and "first" only at the start */
            const bool spaced = fr->len > 0 && (s[0] == ' ' || (fr->len >= 3 && !memcmp(s, "\xe2\x96\x81", 3)));
            const bool prefix = v->add_space_prefix && prev_special && !(v->spm_prefix_unless_space && spaced) &&
                                !(v->spm_prefix_first && fr->off != 0);
            ok = spm_fragment(v, s, fr->len, prefix, &out);
            break;
        }
        case VX_VOCAB_BPE: ok = vx_bpe_tokenize(v, s, fr->len, &out); break;
        case VX_VOCAB_WPM: ok = vx_wpm_tokenize(v, s, fr->len, &out); break;
        case VX_VOCAB_UGM: ok = vx_ugm_tokenize(v, s, fr->len, &out); break;
        }
        prev_special = false;
    }
    if (ok && add_special) {
        if (v->kind == VX_VOCAB_WPM) {
            if (v->sep >= 0) vx_tokvec_push(&out, v->sep);
        } else if (v->add_eos && v->eos >= 0) {
            vx_tokvec_push(&out, v->eos);
        }
    }
    free(f.v);
    if (!ok || out.oom) {
        vx_tokvec_free(&out);
        return INT32_MIN; /* out of memory */
    }
    if (out.n > (size_t)INT32_MAX) {
        vx_tokvec_free(&out);
        return INT32_MIN;
    }
    int32_t cnt = (int32_t)out.n;
    if (!tokens || n_max < cnt) {
        vx_tokvec_free(&out);
        return -cnt;
    }
    if (cnt) memcpy(tokens, out.v, (size_t)cnt * sizeof *tokens);
    vx_tokvec_free(&out);
    return cnt;
}

/* ------------------------------------------------------- detokenizing */

/* Piece of a token after the special filter, with up to lstrip leading
 * spaces removed. */
static const char *piece_of(const vx_vocab *v, vx_token t, bool special, int lstrip,
                            size_t *len) {
    *len = 0;
    if (!valid_id(v, t)) return "";
    if (!special && (v->tok[t].attr & (VX_TATTR_UNKNOWN | VX_TATTR_CONTROL))) return "";
    const char *p = v->piece_pool + v->piece_off[t];
    size_t l = v->piece_off[t + 1] - v->piece_off[t];
    for (int i = 0; i < lstrip && l > 0 && *p == ' '; i++) p++, l--;
    *len = l;
    return p;
}

int32_t vx_vocab_max_piece(const vx_vocab *v) {
    uint32_t m = 0;
    for (int32_t t = 0; v && t < v->n_tokens; t++)
        if (v->piece_off[t + 1] - v->piece_off[t] > m) m = v->piece_off[t + 1] - v->piece_off[t];
    return (int32_t)m;
}

int32_t vx_token_to_piece(const vx_vocab *v, vx_token token, char *buf, int32_t size,
                          bool special) {
    if (!v) return 0;
    size_t l;
    const char *p = piece_of(v, token, special, 0, &l);
    if (!buf || size < 0 || (size_t)size < l) return -(int32_t)l;
    memcpy(buf, p, l);
    return (int32_t)l;
}

/* HF clean_up_tokenization_spaces, three in-place passes over t[0..n). */
static size_t clean_spaces(char *t, size_t n) {
    /* 1: drop the space before ? ! . , */
    size_t o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) o--;
        t[o++] = x;
    }
    /* 2: " ' " -> "'" (the skipped space is zeroed so it can't pair again) */
    n = o;
    o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            o--;
            t[++i] = 0;
        }
        t[o++] = x;
    }
    /* 3: drop the space before 's 'm 're 've */
    n = o;
    o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') o--;
            else if (i + 2 < n && (x1 == 'r' || x1 == 'v') && t[i + 2] == 'e')
                o--;
        }
        t[o++] = x;
    }
    return o;
}

int32_t vx_detokenize(const vx_vocab *v, const vx_token *tokens, int32_t n_tokens, char *buf,
                      int32_t size, bool remove_special, bool unparse_special) {
    if (!v || !tokens || n_tokens <= 0) return 0;
    if (size < 0 || !buf) size = 0;
    /* the leading space SPM added, unless a BOS we drop comes first */
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n_tokens > 0 && tokens[0] == v->bos && v->bos >= 0) {
        remove_space = false;
        tokens++;
        n_tokens--;
    }
    if (remove_special && v->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == v->eos &&
        v->eos >= 0)
        n_tokens--;
    uint64_t total = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        size_t l;
        piece_of(v, tokens[i], unparse_special, i == 0 && remove_space, &l);
        total += l;
    }
    if (total > (uint64_t)INT32_MAX) return -INT32_MAX;
    if (total > (uint64_t)size) return -(int32_t)total;
    if (total == 0) return 0; /* buf may be NULL */
    size_t o = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        size_t l;
        const char *p = piece_of(v, tokens[i], unparse_special, i == 0 && remove_space, &l);
        memcpy(buf + o, p, l);
        o += l;
    }
    if (v->clean_spaces) o = clean_spaces(buf, o);
    return (int32_t)o;
}
