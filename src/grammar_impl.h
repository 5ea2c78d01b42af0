/*
 * grammar_impl.h - a compiled GBNF grammar (grammar_parse.c builds it,
 * grammar.c matches with it). Private to those two files.
 *
 * Every rule is a list of alternatives; an alternative is a run of
 * elements in el[] closed by an END element. Groups and repetitions were
 * turned into rules of their own, literals into one class per character,
 * and every class into sorted, disjoint, inclusive code point ranges
 * (a negated class is stored as its complement), so matching needs only
 * "does class c hold code point x".
 */
#ifndef VX_GRAMMAR_IMPL_H
#define VX_GRAMMAR_IMPL_H

#include <stdint.h>

#include "grammar.h"

enum { VX_GE_END = 0, VX_GE_CHAR = 1, VX_GE_RULE = 2 };

typedef struct vx_gelem {
    int32_t type; /* VX_GE_* */
    int32_t arg;  /* CHAR: the class; RULE: the rule */
} vx_gelem;

struct vx_grammar {
    vx_gelem *el;      /* [n_el] */
    int32_t *alt;      /* [n_alt] the first element of each alternative */
    int32_t *rule_alt; /* [n_rules + 1] rule r's alternatives: alt[rule_alt[r] .. rule_alt[r + 1]) */
    uint32_t *rng;     /* [2 * n_rng] lo, hi pairs */
    int32_t *cls;      /* [n_cls + 1] class c's ranges: rng pairs cls[c] .. cls[c + 1] */
    int32_t n_el, n_alt, n_rules, n_cls, n_rng;
    int32_t root;
};

#define VX_UNICODE_MAX 0x10FFFFu

#endif
