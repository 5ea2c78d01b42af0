/*
 * json_check.h - constrained decoding to JSON: which tokens may come next
 * so that the generated text stays a prefix of a JSON document (RFC 8259),
 * and when the document is complete. This is what OpenAI's
 * response_format {"type": "json_object"} promises, and what llama.cpp's
 * json grammar and vLLM's guided decoding give.
 *
 * vx_jcheck is an incremental, allocation-free checker over bytes: a
 * container stack, what the grammar expects next, and the lexer state
 * inside a string (escapes, \u digits, UTF-8 sequences), a number or a
 * literal. A token is allowed when all its bytes are accepted from the
 * current state (vx_jcheck_allows works on a copy), so a document can
 * never take a wrong turn; the caller feeds each chosen token with
 * vx_jcheck_feed and stops when vx_jcheck_done says the root value is
 * closed.
 *
 * Bounds that keep a sampled document finite-looking: containers nest at
 * most VX_JCHECK_MAX_DEPTH deep, and at most VX_JCHECK_MAX_WS whitespace
 * bytes follow one another outside strings (llama.cpp's json grammar caps
 * indentation the same way: without it a model can emit newlines forever).
 *
 * vx_jvocab holds every token's bytes as the engine emits them
 * (vx_token_to_piece without special tokens) and which tokens can never be
 * part of the text (empty pieces: control tokens, end of generation).
 */
#ifndef VX_JSON_CHECK_H
#define VX_JSON_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "vortex.h"

#define VX_JCHECK_MAX_DEPTH 32
#define VX_JCHECK_MAX_WS 40

struct vx_jschema;

typedef struct vx_jcheck {
    const struct vx_jschema *schema;    /* NULL: any JSON text (flags) */
    int32_t vnode;                      /* the schema node of the next value */
    int32_t node[VX_JCHECK_MAX_DEPTH];  /* each open container's node */
    uint16_t cnt[VX_JCHECK_MAX_DEPTH];  /* an object's next property index; an array's items so far */
    uint64_t kmask;                     /* a key being read: the properties it may still be */
    int32_t elo, ehi;                   /* an enum value being read: the texts it may still be */
    int32_t tlen;                       /* the bytes of that key / value read so far */
    bool integer;                       /* the number being read must be an integer */
    uint8_t stack[VX_JCHECK_MAX_DEPTH]; /* 'o' object, 'a' array */
    uint8_t depth;
    uint8_t expect;   /* what the grammar wants next (json_check.c) */
    uint8_t lex;      /* inside a string / number / literal, or none */
    uint8_t aux;      /* \u digits or UTF-8 continuation bytes left; literal index */
    uint8_t lo, hi;   /* the next UTF-8 continuation byte's range */
    uint8_t lit;      /* which literal (true, false, null) */
    uint16_t hex;     /* the \u escape's digits read so far */
    bool low_next;    /* a high surrogate was escaped: a low one must follow */
    uint8_t ws;       /* whitespace bytes in a row */
    bool key;         /* the string being read is an object key */
    uint8_t flags;    /* VX_JCHECK_* */
} vx_jcheck;

enum {
    VX_JCHECK_OBJECT = 1,     /* the document is an object (else any JSON value) */
    VX_JCHECK_NO_LEAD_WS = 2, /* no whitespace before it: the first byte is its
                                 first (llama.cpp's json grammar starts so) */
};

/* A fresh checker; flags: VX_JCHECK_*. json_object requests take both. */
void vx_jcheck_init(vx_jcheck *j, unsigned flags);
/* A fresh checker whose text must conform to schema (json_schema.h; it
 * must outlive the checker), with no whitespace before it. */
void vx_jcheck_init_schema(vx_jcheck *j, const struct vx_jschema *schema);
/* Feeds bytes; false (and j unspecified) when they cannot continue a
 * document within the bounds. */
bool vx_jcheck_feed(vx_jcheck *j, const char *bytes, int32_t n);
/* The document is complete: the root value ended (an object or array
 * closed, a string or literal ended, or a number that may end here). */
bool vx_jcheck_done(const vx_jcheck *j);

typedef struct vx_jvocab vx_jvocab;

/* Every token's bytes (NULL on allocation failure). */
vx_jvocab *vx_jvocab_new(const vx_vocab *vocab);
void vx_jvocab_free(vx_jvocab *v);
/* Token t may come next after the text j has seen: its bytes are non-empty
 * and all accepted (j is not changed). */
bool vx_jcheck_allows(const vx_jcheck *j, const vx_jvocab *v, vx_token t);
/* Feeds token t's bytes (false if they are not allowed). */
bool vx_jcheck_feed_token(vx_jcheck *j, const vx_jvocab *v, vx_token t);

/* A checker and its token table as a sampler filter: pass
 * vx_jfilter_allows and the vx_jfilter to vx_sampler_set_filter, and feed
 * each drawn token with vx_jfilter_feed. It runs over the whole
 * vocabulary at every draw, so it takes shortcuts with the same answers:
 * inside a string, a token of plain text (one that leaves any string inside
 * its content) is allowed as it is; elsewhere a token
 * whose first byte cannot come next is refused before its bytes are
 * simulated. */
typedef struct vx_jfilter {
    vx_jcheck jc;
    const vx_jvocab *jv;
    bool first_known;   /* first[] is up to date with jc */
    bool first[256];    /* bytes jc accepts next */
} vx_jfilter;

/* A fresh filter over token table jv: to one JSON object (json_object,
 * llama.cpp's json grammar: VX_JCHECK_OBJECT | VX_JCHECK_NO_LEAD_WS) when
 * schema is NULL, else to a text conforming to schema. */
void vx_jfilter_init(vx_jfilter *f, const vx_jvocab *jv, const struct vx_jschema *schema);
bool vx_jfilter_allows(void *jfilter, vx_token t);
/* Feeds token t (false, and f unchanged, if it is not allowed). */
bool vx_jfilter_feed(vx_jfilter *f, vx_token t);

#endif
