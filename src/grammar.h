/*
 * grammar.h - GBNF grammars (llama.cpp's format) and constrained decoding
 * to them: llama-server's "grammar" request field, llama-cli's --grammar
 * and --grammar-file.
 *
 * The format (llama.cpp's grammars/README.md):
 *
 *   root   ::= greeting " " name "!"          # a rule per definition
 *   greeting ::= "hello" | "hi"               # alternatives
 *   name   ::= [A-Z] [a-z]* ("-" [A-Z] [a-z]*)?
 *
 *   "text"        a literal (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH)
 *   [a-z0-9_]     a character class; [^...] its complement; . any character
 *   name          a rule reference (names: letters, digits, '-', '_')
 *   ( ... )       a group;  x* x+ x?  x{m} x{m,} x{m,n} x{,n} repetitions
 *   # ...         a comment to the end of the line
 *
 * A rule ends at the end of its line; inside parentheses, and after '::='
 * or '|', lines continue (a line starting with '|' continues the rule
 * above, a superset of llama.cpp). Generation starts at the rule "root".
 * Characters are Unicode code points; the text is matched as UTF-8, and a
 * token may end inside a character.
 *
 * Refused with a message naming the line and column (all but the size of
 * the text, VX_GRAMMAR_MAX_TEXT): syntax errors, a rule defined twice, a
 * reference to a rule never defined, no root, a root that derives no text,
 * llama.cpp's token references (<[id]>, <token>), grammars past the size
 * bounds (VX_GRAMMAR_MAX_*), and left recursion: a rule that can reach
 * itself before reading a character through a reference with more after
 * it ("a ::= a "x" | "y""; write it "a ::= "y" "x"*"). Where every
 * reference on such a cycle ends its alternative ("a ::= "x"* a | "y"",
 * or ("x"?)* ), matching ends, and vx takes the grammar (llama.cpp refuses
 * some of these). Alternatives that can never finish (a class without
 * characters, such as surrogates, or a rule that never ends) are dropped,
 * so that the text never walks into a dead end; x+* and the like are one
 * repetition.
 *
 * Matching is a pushdown recognizer over every parse at once: a set of
 * stacks of "where to continue" positions, shared and deduplicated
 * (hash-consed), so ambiguous grammars stay linear in the text. The token
 * filter walks a trie of the vocabulary's token bytes, so a token prefix
 * the grammar refuses rules out every token that starts with it, and
 * remembers the allowed set of the last few grammar states it met (the
 * state inside a free-text rule repeats from token to token).
 */
#ifndef VX_GRAMMAR_H
#define VX_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

#define VX_GRAMMAR_MAX_TEXT (1 << 20)     /* bytes of grammar text */
#define VX_GRAMMAR_MAX_ELEMENTS (1 << 18) /* after repetitions are expanded */
#define VX_GRAMMAR_MAX_REPEAT 10000       /* m and n of x{m,n} */
#define VX_GRAMMAR_MAX_DEPTH 256          /* groups nested in groups */

typedef struct vx_grammar vx_grammar;

/* Compiles GBNF text[0..len) (not NUL-terminated); on failure *out is NULL,
 * VX_EINVAL with the reason in err ("line L, column C: ..."), or
 * VX_ENOMEM. The grammar is immutable: matchers on many threads may share
 * it. */
vx_status vx_grammar_parse(const char *text, size_t len, vx_grammar **out, char *err, size_t err_size);
void vx_grammar_free(vx_grammar *g);

/* ---- matching bytes ---- */
typedef struct vx_gmatch vx_gmatch;

/* A matcher at the start of root (NULL when out of memory); g must outlive
 * it. */
vx_gmatch *vx_gmatch_new(const vx_grammar *g);
void vx_gmatch_free(vx_gmatch *m);
/* Feeds bytes: true when the text so far is still a prefix of a sentence
 * of the grammar (bytes may end inside a UTF-8 character); false, and m
 * unchanged, otherwise (invalid UTF-8 included). */
bool vx_gmatch_feed(vx_gmatch *m, const char *bytes, int32_t n);
/* The text so far is a whole sentence of the grammar. */
bool vx_gmatch_complete(const vx_gmatch *m);
/* Some byte may still follow (false: the text can only end here, or is
 * dead, which feeding never leaves it). */
bool vx_gmatch_can_continue(const vx_gmatch *m);

/* ---- constraining tokens ---- */
typedef struct vx_gvocab vx_gvocab;

/* The vocabulary's tokens as the engine emits them (vx_token_to_piece
 * without special tokens) in a byte trie, and its end-of-generation
 * tokens; NULL when out of memory. Immutable: filters share it. */
vx_gvocab *vx_gvocab_new(const vx_vocab *vocab);
void vx_gvocab_free(vx_gvocab *gv);

typedef struct vx_gfilter vx_gfilter;

/* A filter at the start of g's root over gv's tokens (both must outlive
 * it); NULL when out of memory. */
vx_gfilter *vx_gfilter_new(const vx_grammar *g, const vx_gvocab *gv);
void vx_gfilter_free(vx_gfilter *f);
/* For vx_sampler_set_filter (ctx: the vx_gfilter): token t may come next.
 * A token with text is allowed when its bytes continue the sentence; an
 * end-of-generation token when the text so far is a whole sentence; other
 * tokens without text (control tokens) never. */
bool vx_gfilter_allows(void *gfilter, vx_token t);
/* Feeds the chosen token (false, and f unchanged, if it is not allowed). */
bool vx_gfilter_feed(vx_gfilter *f, vx_token t);
/* The text is a whole sentence and nothing may follow it: generation
 * stops here (as a JSON object's does when it closes). */
bool vx_gfilter_done(const vx_gfilter *f);
/* A bound was hit (more than 4096 parses alive at once, 8M stack nodes,
 * or a token mask's work budget): some tokens the grammar allows may have
 * been refused. Callers end the generation with an error. */
bool vx_gfilter_limited(const vx_gfilter *f);

#endif
