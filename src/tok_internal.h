/*
 * tok_internal.h - shared internals of the tokenizers: the vx_vocab layout,
 * token lookup, growable buffers, and the entry points of the per-model
 * tokenizers (tok_spm.c, tok_bpe.c, tok_wpm.c) and the pre-tokenizer
 * (tok_pretok.c). Not part of the public API.
 */
#ifndef VX_TOK_INTERNAL_H
#define VX_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

/* Per-token attributes (bit flags). Derived from the GGUF token types, then
 * adjusted by name-based rules at load (EOG tokens forced to CONTROL, phi-3
 * RSTRIP, ...). */
enum {
    VX_TATTR_UNDEFINED = 0,
    VX_TATTR_UNKNOWN = 1 << 0,
    VX_TATTR_UNUSED = 1 << 1,
    VX_TATTR_NORMAL = 1 << 2,
    VX_TATTR_CONTROL = 1 << 3,
    VX_TATTR_USER_DEFINED = 1 << 4,
    VX_TATTR_BYTE = 1 << 5,
    VX_TATTR_LSTRIP = 1 << 6, /* eat whitespace left of the token when partitioning */
    VX_TATTR_RSTRIP = 1 << 7  /* eat whitespace right of the token */
};

typedef enum vx_vocab_kind {
    VX_VOCAB_SPM = 1, /* "llama": SentencePiece BPE with scores */
    VX_VOCAB_BPE = 2, /* "gpt2": byte-level BPE with merges */
    VX_VOCAB_WPM = 3, /* "bert": WordPiece */
    VX_VOCAB_UGM = 4  /* "t5": SentencePiece Unigram */
} vx_vocab_kind;

typedef struct vx_tok_entry {
    uint32_t off; /* text in vocab->text_pool (NUL-terminated) */
    uint32_t len;
    float score;
    uint32_t attr;
} vx_tok_entry;

/* String -> id hash table, open addressing with linear probing. A slot packs
 * the 32-bit hash tag (high half, skips most memcmp calls) and id + 1 (low
 * half, 0 = empty) so a probe touches one cache line. */
typedef struct vx_strmap {
    uint64_t *slots;
    uint32_t mask;
} vx_strmap;

typedef struct vx_pretok vx_pretok;
typedef struct vx_bpe_merges vx_bpe_merges;
typedef struct vx_ugm vx_ugm;

struct vx_vocab {
    vx_vocab_kind kind;
    int32_t n_tokens;
    vx_tok_entry *tok;
    char *text_pool;
    size_t text_pool_size;
    vx_strmap map;
    uint32_t max_token_len; /* bytes */

    /* Decoded piece of each token as vx_token_to_piece(special=true) gives it. */
    char *piece_pool;
    uint32_t *piece_off; /* n_tokens + 1 entries */

    vx_token bos, eos, eot, eom, unk, sep, pad, mask;
    vx_token fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    uint8_t *is_eog; /* n_tokens flags */

    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;
    /* SPM: no token has a "▁" right after another character, so text can
     * be tokenized in chunks cut before such a "▁" (see tok_spm.c) */
    bool spm_word_cut;
    /* SPM from a Hugging Face Metaspace pre-tokenizer (vortex.tokenizer.*
     * keys): the "▁" prefix only on text not already starting with a
     * space, and only at the text's start ("first"); text split before
     * every "▁", each piece tokenized alone */
    bool spm_prefix_unless_space, spm_prefix_first, spm_split;

    /* CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first: matched
     * in the text before the model tokenizer runs. */
    vx_token *special;
    int32_t n_special;
    /* The special tokens indexed by their first two bytes, so one scan of
     * a text finds those that occur in it (vocab.c, find_present). */
    uint8_t *sp_pair_bits; /* 65536-bit set of first-two-byte keys */
    uint16_t *sp_keys;     /* sorted keys ... */
    int32_t *sp_order;     /* ... of these indices into special[] */
    int32_t n_sp_order;
    int32_t *sp_single; /* indices into special[] of one-byte tokens */
    int32_t n_sp_single;

    vx_token byte_tok[256]; /* SPM: token for each raw byte (-1 if none) */

    /* UGM only: the normalizer and the scores it needs (tok_ugm.c) */
    vx_ugm *ugm;

    /* BPE only */
    vx_bpe_merges *merges;
    vx_pretok *pretok;
    char pre_name[64];
};

/* ------------------------------------------------------------ helpers */

/* 64-bit hash of a byte string, continuing from seed (chainable). */
uint64_t vx_tok_hash(const void *data, size_t len, uint64_t seed);

/* Looks a token up by its exact text. Returns the id or -1. */
vx_token vx_tok_find(const vx_vocab *v, const char *s, size_t len);

static inline const char *vx_tok_str(const vx_vocab *v, vx_token id) {
    return v->text_pool + v->tok[id].off;
}

/* Length of the UTF-8 sequence that starts with byte c, as a lead byte says
 * (1 for continuation or invalid bytes). Callers clip to the text end. */
static inline size_t vx_utf8_len(unsigned char c) {
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* Length of the UTF-8 character at s[0..n) (n > 0): the lead byte's length
 * when that many continuation bytes follow, else 1, so an invalid byte is a
 * character of its own and never swallows the bytes after it. */
static inline size_t vx_utf8_seq_len(const char *s, size_t n) {
    size_t l = vx_utf8_len((unsigned char)s[0]);
    if (l > n) return 1;
    for (size_t i = 1; i < l; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;
    return l;
}

/* Growable token list. oom latches on the first failed allocation. */
typedef struct vx_tokvec {
    vx_token *v;
    size_t n, cap;
    bool oom;
} vx_tokvec;

void vx_tokvec_push(vx_tokvec *t, vx_token id);
void vx_tokvec_free(vx_tokvec *t);

/* Growable list of byte spans. */
typedef struct vx_span {
    size_t off, len;
} vx_span;

typedef struct vx_spanvec {
    vx_span *v;
    size_t n, cap;
} vx_spanvec;

bool vx_spanvec_push(vx_spanvec *s, size_t off, size_t len);
void vx_spanvec_free(vx_spanvec *s);

/* ----------------------------------------------------- model tokenizers */

/* SPM: tokenizes one text fragment (already with "▁" for spaces). */
bool vx_spm_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out);

/* BPE: loads tokenizer.ggml.merges. */
vx_status vx_bpe_merges_load(const vx_gguf_kv *kv, vx_bpe_merges **out, char *err,
                             size_t err_size);
void vx_bpe_merges_free(vx_bpe_merges *m);
size_t vx_bpe_merges_count(const vx_bpe_merges *m);
/* BPE: pre-tokenizes and tokenizes one text fragment. */
bool vx_bpe_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out);
/* BPE: appends the raw bytes a byte-level token text stands for. Characters
 * outside the byte alphabet are copied unchanged. Returns bytes written
 * (buf may be NULL to measure). */
size_t vx_bpe_decode_text(const char *s, size_t len, char *buf);

/* Unicode data for WPM (tok_unicode.c, generated). */
enum { VX_UCD_PUNCT = 1, VX_UCD_SYMBOL = 2, VX_UCD_CONTROL = 4, VX_UCD_SPACE = 8 };
unsigned vx_ucd_flags(uint32_t cp);
uint32_t vx_ucd_nfd_first(uint32_t cp); /* first code point of the NFD form */
uint32_t vx_ucd_tolower(uint32_t cp);

/* WPM: tokenizes one text fragment. */
bool vx_wpm_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out);

/* UGM: the normalizer of a loaded vocabulary (its tokens, attributes and
 * byte_tok set): charsmap[0..n) as tokenizer.ggml.precompiled_charsmap
 * holds it (n = 0: none). */
vx_status vx_ugm_create(const vx_vocab *v, const uint8_t *charsmap, size_t n, bool remove_ws, bool dummy_prefix,
                        vx_ugm **out, char *err, size_t err_size);
void vx_ugm_free(vx_ugm *u);
/* UGM: normalizes and tokenizes one text fragment (raw text). */
bool vx_ugm_tokenize(const vx_vocab *v, const char *text, size_t len, vx_tokvec *out);

/* -------------------------------------------------------- pre-tokenizer */

/* Flags a tokenizer.ggml.pre name implies (llama.cpp's per-pre defaults). */
typedef struct vx_pretok_info {
    const char *name;
    int regex_set;      /* index into the regex table of tok_pretok.c */
    bool clean_spaces;  /* detokenize applies the HF clean-up rules */
    bool ignore_merges; /* a whole word found in the vocab is one token */
    bool add_bos;       /* default when add_bos_token is absent */
    bool no_bos;        /* the vocab has no BOS token */
} vx_pretok_info;

/* Finds the info for a pre-tokenizer name (NULL or "" = "default").
 * Returns NULL if the name is unknown. */
const vx_pretok_info *vx_pretok_lookup(const char *name);

/* Compiles the regexes of a set. */
vx_status vx_pretok_create(int regex_set, vx_pretok **out, char *err, size_t err_size);
void vx_pretok_free(vx_pretok *p);

/* Splits text[0..len) into words, appending their spans to out. Every byte
 * of the text ends up in exactly one span, in order. Returns false on OOM. */
bool vx_pretok_split(const vx_pretok *p, const char *text, size_t len, vx_spanvec *out);

/* ------------------------------------------------------------ tok_heap.c */

/* A candidate merge of adjacent symbols left+right (size bytes together):
 * higher prio first (SPM: the merged piece's score; BPE: minus the merge
 * rank), ties leftmost first. */
typedef struct vx_bigram {
    float prio;
    int32_t left, right;
    uint32_t size;
} vx_bigram;

typedef struct vx_bigram_heap {
    vx_bigram *a;
    size_t n, cap;
} vx_bigram_heap;

/* false when memory runs out (the heap is unchanged) */
bool vx_bigram_push(vx_bigram_heap *h, vx_bigram b);
/* the best bigram; h->n must be > 0 */
vx_bigram vx_bigram_pop(vx_bigram_heap *h);

#endif
