/*
 * fuzz_chat.c - libFuzzer target for the chat-template interpreter: the
 * input is template source, parsed and rendered against a fixed
 * conversation (with tool calls and tools, to reach more code) under small
 * limits. Any crash, sanitizer report, leak or hang is a bug; template
 * errors are expected and fine.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
 *       tests/fuzz/fuzz_chat.c src/chat.c src/jinja*.c src/common.c -o /tmp/fuzz_chat
 *   /tmp/fuzz_chat -dict=tests/fuzz/chat.dict -max_len=4096 CORPUS_DIR
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char MESSAGES[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi <b>&amp;</b> \\u00e9\\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": "
    "\"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": [1, 2.5, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"ok\\\": 1}\", \"tool_call_id\": \"call_1\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>hm</think>Done.\"}]";

static const char EXTRA[] =
    "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"array\"}},"
    " \"required\": [\"x\"]}}}], \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0; /* an embedded NUL just ends the template early */

    char err[512];
    vx_chat_template *t = NULL;
    if (vx_chat_template_parse(src, &t, err, sizeof err) == VX_OK) {
        struct tm now;
        memset(&now, 0, sizeof now);
        now.tm_year = 125;
        now.tm_mon = 1;
        now.tm_mday = 21;
        now.tm_hour = 12;
        vx_chat_render_params p = vx_chat_render_default_params();
        p.add_generation_prompt = size & 1;
        p.bos_token = "<s>";
        p.eos_token = "</s>";
        p.messages_json = MESSAGES;
        p.extra_vars_json = (size & 2) ? EXTRA : NULL;
        p.now = &now;
        p.max_output = 1 << 20;
        p.max_memory = 64 << 20;
        p.max_steps = 200000;
        char *out = NULL;
        vx_status st = vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err);
        if (st == VX_OK && !out) abort(); /* success must produce a string */
        if (st != VX_OK && out) abort();  /* failure must not */
        free(out);
        vx_chat_template_free(t);
    }
    free(src);
    return 0;
}
