/*
 * tool_call.h - OpenAI tool calling over a model's own tool-call format.
 *
 * A chat template that supports tools renders the request's `tools` into
 * the prompt and teaches the model one way of writing a call. This module
 * knows three of them, named after the families that use them, and finds
 * which one a template teaches from its source:
 *   hermes   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
 *            one block per call (Qwen2.5, Qwen3, QwQ, Hermes 2 Pro / 3)
 *   llama3   {"name": ..., "parameters": {...}} as the whole reply, after
 *            an optional <|python_tag|>; calls separated by ';' (Llama
 *            3.1, 3.2, 3.3)
 *   mistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
 *            (Mistral 7B v0.3, Mistral Nemo, Mistral Small)
 *   harmony  <|channel|>commentary to=functions.NAME <|constrain|>json
 *            <|message|>{...}, a message of OpenAI's harmony format
 *            (gpt-oss), parsed with the rest of the reply by harmony.h
 * It turns a generated text into calls and the content around them, holds
 * back a streamed call until it is complete, and gives the prompt suffix
 * and JSON Schema (json_schema.h) that force a call when tool_choice asks
 * for one ("required", or a named function).
 */
#ifndef VX_TOOL_CALL_H
#define VX_TOOL_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h" /* vx_sbuf */
#include "vortex.h"

typedef enum vx_tool_format {
    VX_TOOL_FMT_NONE = 0, /* the template renders no tools, or in no way we know */
    VX_TOOL_FMT_HERMES,
    VX_TOOL_FMT_LLAMA3,
    VX_TOOL_FMT_MISTRAL,
    VX_TOOL_FMT_HARMONY,
} vx_tool_format;

/* The format a chat template's source teaches (NONE when it never reads
 * `tools` or writes calls in another way). */
vx_tool_format vx_tool_format_detect(const char *template_source);
const char *vx_tool_format_name(vx_tool_format f);
/* The text that opens a call: "<tool_call>", "<|python_tag|>" (llama3,
 * optional there), "[TOOL_CALLS]", " to=" (harmony: the recipient). NULL
 * for NONE. */
const char *vx_tool_format_marker(vx_tool_format f);

#define VX_TOOL_ID_MAX 32

typedef struct vx_tool_call {
    char *name;
    char *arguments; /* a JSON text, as OpenAI's function.arguments */
    char id[VX_TOOL_ID_MAX]; /* vx_tool_call_id's */
} vx_tool_call;

typedef struct vx_tool_calls {
    vx_tool_call *v;
    int32_t n;
    char *content; /* the text outside the calls, trimmed; "" if none */
    size_t content_len;
} vx_tool_calls;

/* The calls in a generated text (len bytes). names (n_names) are the
 * request's functions: the llama3 format, whose calls are bare JSON,
 * takes an object as a call only when its name is one of them; the
 * marked formats take any name. A text whose calls do not all parse is
 * content, whole (no calls): a malformed call is never half-reported.
 * max_calls > 0 keeps the first max_calls calls (parallel_tool_calls
 * false: 1). VX_ENOMEM is the only error. */
vx_status vx_tool_parse(vx_tool_format f, const char *text, size_t len, char *const *names, int32_t n_names,
                        int32_t max_calls, vx_tool_calls *out);
void vx_tool_calls_free(vx_tool_calls *c);

/* Streaming: content is released as it comes, except what may begin a
 * call. From a marker on (llama3: from a first non-blank '{' or the python
 * tag), everything is held until the end, then parsed. */
typedef struct vx_tool_stream {
    vx_tool_format f;
    vx_sbuf held;   /* not released yet */
    vx_sbuf out;    /* the text handed out by the last feed */
    bool capturing; /* a call may have begun: hold everything */
    bool seen;      /* llama3: non-blank text already released */
} vx_tool_stream;

void vx_tool_stream_init(vx_tool_stream *s, vx_tool_format f);
void vx_tool_stream_free(vx_tool_stream *s);
/* Feeds released text; *out / *out_len: the part that may go out now (a
 * pointer into text or into the stream's buffer, valid until the next
 * call). False when memory ran out. */
bool vx_tool_stream_feed(vx_tool_stream *s, const char *text, size_t n, const char **out, size_t *out_len);
/* The text held at the end (possibly a call; parse it with vx_tool_parse). */
const char *vx_tool_stream_held(const vx_tool_stream *s, size_t *len);

/* A forced call (tool_choice "required" or a named function): the text to
 * append to the rendered prompt (*prefix, may be "") and a JSON Schema for
 * the rest of the reply (*schema), so that what comes out is a call of
 * `name` (NULL: any of tools_json's functions) that vx_tool_parse takes.
 * tools_json: the request's validated tools array. Keywords of a
 * function's `parameters` that json_schema.h does not take (pattern,
 * minimum, minLength, ...) are dropped: names, types, required properties
 * and enums are kept, those bounds go unchecked. Parameters it refuses
 * even so become {"type":"object"} (any object of arguments). Without a
 * name among several functions, the call is any of them with that one's
 * arguments (an anyOf of call objects told apart by their name; a
 * function whose $defs share a name with an earlier one's gets any
 * object). One call
 * in the hermes and llama3 formats; mistral's array takes parallel calls
 * unless parallel is false. harmony: the header names the function, so a
 * call of one (named, or the only one) only: *prefix is that header and
 * *schema its arguments' (VX_EUNSUPPORTED for any of several). Both
 * malloc'd. VX_ENOMEM, VX_EINVAL (no such function, bad tools_json). */
vx_status vx_tool_force(vx_tool_format f, const char *tools_json, const char *name, bool parallel, char **prefix,
                        char **schema);

/* The text s[*va..*ve) of member key's value in the JSON object text at
 * s[a..e), which must be valid JSON (parsed already): the first member of
 * that name, as cJSON and the server's request parser take it; a key
 * written with escapes is not found, and after one (it may be the same
 * key, which a parser takes first) nothing is. For passing values on as written
 * (cJSON prints 1.0 as 1, big integers as doubles). */
bool vx_json_member_span(const char *s, size_t a, size_t e, const char *key, size_t *va, size_t *ve);

/* Writes a call id: "call_" and 24 alphanumerics, or 9 alphanumerics for
 * the mistral format (its templates refuse any other). */
void vx_tool_call_id(vx_tool_format f, char *buf, size_t size);

#endif
