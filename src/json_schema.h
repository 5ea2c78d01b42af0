/*
 * json_schema.h - a JSON Schema, compiled for constrained decoding
 * (json_check.h): OpenAI's response_format json_schema, llama.cpp's -j.
 *
 * Every text the checker lets through conforms to the schema. The
 * converse does not hold, by design (as in llama.cpp's and vLLM's
 * grammars): an object's properties come in the schema's order, required
 * ones always, optional ones or not; only listed properties appear when
 * there are any (whatever additionalProperties says); numbers and enum
 * values are written as JSON's shortest form would have them (an enum's
 * values exactly as cJSON prints them).
 *
 * The subset: type (a name or a list), properties, required,
 * additionalProperties (false, true, or a schema for objects without
 * properties), items, minItems, maxItems, enum, const, anyOf and oneOf
 * (alternatives of different JSON types: object, array, string, number
 * or integer, boolean, null; several objects when their first property
 * tells them apart: required in each, the same name, a const or enum of
 * strings that no two share, as a tool call's name does: at most 255
 * objects and 1,024 such values in one union), allOf of one
 * schema, $ref to "#/$defs/..."
 * or "#/definitions/..." (recursion included), OpenAPI's nullable, and
 * the annotations (title, description, default, examples, format, ...),
 * which constrain nothing. Any other keyword that constrains values
 * (pattern, minLength, minimum, multipleOf, not, ...) is refused with an
 * error that names it, rather than ignored; so are constraining keywords
 * beside $ref, allOf, anyOf or oneOf (only the first would be enforced),
 * oneOf alternatives without a type of their own (two could match),
 * 'required' without those properties listed, cycles of $refs that never
 * reach a schema, enums of more than VX_JSCHEMA_MAX_ENUM values (and
 * numbers in them past 2^53: printed, they would not be the same number),
 * a key twice in one object (which one was meant?), $id below the root,
 * $refs deeper than "#/$defs/NAME", type lists naming one kind twice, more
 * than 20,000 nodes, NUL characters and invalid UTF-8. The root must be an
 * object or an array.
 * Schema keywords without a type take the type they imply (required and
 * additionalProperties objects, minItems arrays): fewer texts, all
 * conforming.
 */
#ifndef VX_JSON_SCHEMA_H
#define VX_JSON_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

enum {
    VX_JN_ANY, /* any JSON value (node 0) */
    VX_JN_OBJECT,
    VX_JN_ARRAY,
    VX_JN_STRING,
    VX_JN_NUMBER,
    VX_JN_INTEGER,
    VX_JN_BOOLEAN,
    VX_JN_NULL,
    VX_JN_ENUM,  /* one of the texts [a, a + n) (sorted bytewise) */
    VX_JN_UNION, /* alt[class of the first byte] */
    VX_JN_REF,   /* while compiling only: a $ref, the same as node child */
};

/* A value's first byte class: which alternative of a union it starts. */
enum { VX_JC_OBJ, VX_JC_ARR, VX_JC_STR, VX_JC_NUM, VX_JC_BOOL, VX_JC_NULL, VX_JC_COUNT };

/* The class of a value starting with byte c, -1 if none starts so. */
static inline int vx_jclass(unsigned char c) {
    switch (c) {
    case '{': return VX_JC_OBJ;
    case '[': return VX_JC_ARR;
    case '"': return VX_JC_STR;
    case 't': case 'f': return VX_JC_BOOL;
    case 'n': return VX_JC_NULL;
    default: return c == '-' || (c >= '0' && c <= '9') ? VX_JC_NUM : -1;
    }
}

#define VX_JSCHEMA_MAX_PROPS 64  /* properties of one object */
#define VX_JSCHEMA_MAX_ENUM 1024 /* values of one enum */

typedef struct vx_jnode {
    uint8_t kind;
    int32_t a, n;   /* OBJECT: properties [a, a + n); ENUM: texts [a, a + n) */
    int32_t child;  /* OBJECT without properties: its values' node; ARRAY: the items' */
    int32_t min_items, max_items; /* ARRAY (max -1: no bound) */
    int32_t alt[VX_JC_COUNT];     /* UNION: a node per class, -1 for none */
    int32_t choice; /* OBJECT heading a union of objects (its one property is
                       theirs, told apart by its value): the object text k of
                       that property's enum picks is choice[this + k - enum a];
                       -1 for any other node */
} vx_jnode;

typedef struct vx_jprop {
    int32_t key; /* text index: the name as a JSON string, quotes included */
    int32_t node;
    bool required;
} vx_jprop;

typedef struct vx_jschema {
    vx_jnode *nodes;
    int32_t n_nodes;
    vx_jprop *props;
    int32_t n_props;
    int32_t *text_off, *text_len; /* texts (property names, enum values) in pool */
    int32_t n_texts;
    char *pool;
    int32_t *choice; /* the objects of the unions of objects (vx_jnode.choice) */
    int32_t n_choice;
    int32_t root;
} vx_jschema;

/* Compiles a schema (JSON text). VX_EINVAL with err naming the keyword and
 * where it is (a JSON pointer) for what the subset does not take. */
vx_status vx_jschema_compile(const char *json, size_t len, vx_jschema **out, char *err, size_t err_size);
/* Whether a schema keyword is one the subset takes (implemented, or an
 * annotation); the compiler refuses any other. */
bool vx_jschema_keyword_known(const char *keyword);
void vx_jschema_free(vx_jschema *s);

static inline const char *vx_jschema_text(const vx_jschema *s, int32_t i, int32_t *len) {
    *len = s->text_len[i];
    return s->pool + s->text_off[i];
}

#endif
