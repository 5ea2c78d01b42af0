/*
 * reasoning.h - a thinking model's reasoning, told apart from its answer.
 *
 * Thinking models (Qwen3, QwQ, DeepSeek R1 and its distills, Phi-4
 * reasoning, SmolLM3, GLM-4.5, ...) write their thoughts between <think>
 * and </think> before the answer. Some chat templates open the thought in
 * the prompt (DeepSeek R1's generation prompt ends with "<think>\n"), so
 * the reply starts inside it; others leave the model to open it, or close
 * an empty one to switch thinking off (Qwen3's enable_thinking=false).
 *
 * The split, as llama-server's "deepseek" reasoning format and vLLM's
 * reasoning parsers give it to OpenAI clients as `reasoning_content`:
 *   - a thought starts at the reply's start when the prompt left one open,
 *     else where the reply opens one with <think> (after blanks only);
 *   - it ends at the first </think>; without one (max_tokens came first),
 *     the whole rest is thought;
 *   - the reasoning is trimmed of blanks at both ends, the answer after
 *     the thought of blanks at its start;
 *   - a reply that opens no thought is all answer, unchanged.
 * Blanks: space, tab, CR, LF.
 */
#ifndef VX_REASONING_H
#define VX_REASONING_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h" /* vx_sbuf */

#define VX_THINK_OPEN "<think>"
#define VX_THINK_CLOSE "</think>"

/* True when a chat template's source writes thoughts (<think> ...
 * </think>): its model is taken to think. */
bool vx_reasoning_detect(const char *template_source);

/* True when a rendered prompt (len bytes) ends inside a thought: its last
 * <think> has nothing but blanks after it. */
bool vx_reasoning_open_at_end(const char *prompt, size_t len);

/* A continued (prefilled) assistant message's content: whether the reply
 * starts inside a thought (a <think> with no </think> after it) or after
 * one (a </think> last: the reply is all answer), or neither. */
typedef enum vx_prefill_thought {
    VX_PREFILL_NONE = 0,
    VX_PREFILL_OPEN,
    VX_PREFILL_CLOSED,
} vx_prefill_thought;

vx_prefill_thought vx_reasoning_prefill(const char *content, size_t len);

/* The one-shot split of a whole reply: reasoning = text[r_off, +r_len),
 * answer = text[c_off, +c_len). thought: the reply opened one (or began in
 * one), even an empty one. */
typedef struct vx_reasoning_parts {
    size_t r_off, r_len, c_off, c_len;
    bool thought;
} vx_reasoning_parts;

void vx_reasoning_split(const char *text, size_t len, bool open, vx_reasoning_parts *out);

/* Streaming: the same split, released as the reply comes. What may still
 * be a marker, or blanks that may end the reasoning, is held back. After
 * each feed (and the finish) reasoning and answer hold what may go out;
 * together the pieces of all calls are exactly vx_reasoning_split's parts,
 * however the reply is cut into pieces. */
typedef struct vx_reasoning_stream {
    int state;
    bool started; /* reasoning released already (its leading blanks are dropped) */
    vx_sbuf held;
    vx_sbuf reasoning, answer; /* released by the last call */
} vx_reasoning_stream;

void vx_reasoning_stream_init(vx_reasoning_stream *s, bool open);
void vx_reasoning_stream_free(vx_reasoning_stream *s);
/* False when memory ran out. */
bool vx_reasoning_stream_feed(vx_reasoning_stream *s, const char *text, size_t n);
/* The end of the reply: releases what was held. */
bool vx_reasoning_stream_finish(vx_reasoning_stream *s);

#endif
