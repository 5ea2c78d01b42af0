/*
 * harmony.h - OpenAI's harmony response format (gpt-oss), parsed into
 * reasoning, answer and tool calls.
 *
 * A gpt-oss reply is a sequence of messages. The prompt ends with
 * "<|start|>assistant", so the reply starts with the first message's
 * header:
 *
 *   <|channel|>analysis<|message|>the thoughts<|end|>
 *   <|start|>assistant<|channel|>final<|message|>the answer       (<|return|>)
 *   <|start|>assistant<|channel|>commentary to=functions.get_weather
 *       <|constrain|>json<|message|>{"city":"Paris"}              (<|call|>)
 *
 * (one line each here; the model writes them back to back). A header is
 * everything before "<|message|>": an optional "<|start|>" and role, the
 * channel after "<|channel|>", a recipient after "to=" (in the role part
 * or after the channel) and a content type ("json", "<|constrain|>json").
 * A message ends at "<|end|>", "<|call|>", "<|return|>" or where the next
 * one's "<|start|>" begins. <|return|> and <|call|> end the generation
 * (vocab.c), so the engine never shows them; <|end|> does not, and the
 * vocabulary renders it and the header tokens as text (as llama.cpp does),
 * so that this parser sees them.
 *
 * What each message becomes, as llama-server gives it to OpenAI clients:
 *   - channel "analysis" (no recipient): reasoning_content; without the
 *     split (reasoning_format "none") the message, markers and all
 *     ("<|channel|>analysis<|message|>...<|end|>"), goes into content;
 *   - a recipient "functions.NAME" (NAME of a-zA-Z0-9_-.:): a tool call of NAME whose arguments
 *     are the body (trimmed); a body that is not JSON (a call cut short
 *     by max_tokens) is content instead of a half call;
 *   - another recipient (a built-in tool such as "browser.search" or
 *     "python", which a client of the chat API did not offer): dropped;
 *     "to=assistant" counts as none (gpt-oss sometimes writes a stray
 *     "<|channel|>commentary to=assistant" before its real header);
 *   - any other channel ("final", a "commentary" preamble): content.
 * A reply that does not start with a header (a reply held to a JSON shape
 * from its first token, or a model that ignores the format) is content,
 * whole. Pieces are joined as they come, with nothing in between.
 */
#ifndef VX_HARMONY_H
#define VX_HARMONY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"    /* vx_sbuf */
#include "tool_call.h" /* vx_tool_calls */

/* True when a chat template's source writes harmony messages. */
bool vx_harmony_detect(const char *template_source);

typedef struct vx_harmony_stream {
    int state, kind;  /* where in a message; the current message's kind */
    bool split;       /* analysis into reasoning (else into content, verbatim) */
    bool started;     /* a header was read: the reply is harmony */
    int32_t max_calls; /* > 0: calls after that many are dropped */
    vx_sbuf held;     /* input not consumed yet */
    vx_sbuf args;     /* the current call message's body */
    char *name;       /* and its function's name */
    vx_sbuf reasoning, content; /* released by the last feed or the finish */
    vx_tool_calls calls; /* the calls read so far (content unused) */
} vx_harmony_stream;

/* split: analysis to reasoning; max_calls > 0 keeps the first max_calls
 * calls (parallel_tool_calls false: 1). */
void vx_harmony_stream_init(vx_harmony_stream *s, bool split, int32_t max_calls);
void vx_harmony_stream_free(vx_harmony_stream *s);
/* Feeds reply text. After each feed and the finish, reasoning and content
 * hold what may go out; what may still be a marker, a header or a call is
 * held back. However the reply is cut into pieces, the pieces released,
 * joined, and the calls are the same. False when memory ran out. */
bool vx_harmony_stream_feed(vx_harmony_stream *s, const char *text, size_t n);
/* The end of the reply: releases what was held; calls is complete. */
bool vx_harmony_stream_finish(vx_harmony_stream *s);
/* A whole reply: fed and finished, what was released appended to
 * reasoning (NULL: dropped) and content; calls is complete. False when
 * memory ran out. */
bool vx_harmony_stream_all(vx_harmony_stream *s, const char *text, size_t n, vx_sbuf *reasoning, vx_sbuf *content);

/* The header of the final channel's message (the answer). */
#define VX_HARMONY_FINAL "<|channel|>final<|message|>"

/* The prompt suffix that forces a call of one function in the harmony
 * format ("<|channel|>commentary to=functions.NAME <|constrain|>json
 * <|message|>"), malloc'd; NULL when out of memory. */
char *vx_harmony_call_prefix(const char *name);

#endif
