/* cli.h - shared helpers of the vx command-line tool: argument parsing,
 * model loading with a progress line, and the subcommand entry points. */
#ifndef VX_CLI_H
#define VX_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "vortex.h"

/* Subcommands: return the process exit code. */
int vx_cmd_run(int argc, char **argv);
int vx_cmd_chat(int argc, char **argv);
int vx_cmd_info(int argc, char **argv);
int vx_cmd_tokenize(int argc, char **argv);
int vx_cmd_logits(int argc, char **argv);
int vx_cmd_bench(int argc, char **argv);
int vx_cmd_synth(int argc, char **argv);
int vx_cmd_quantize(int argc, char **argv);
int vx_cmd_serve(int argc, char **argv);
int vx_cmd_embed(int argc, char **argv);

/* Argument cursor: argv[*i] is the option; its value is argv[*i + 1]. */
typedef struct cli_args {
    int argc;
    char **argv;
    int i;
    bool error;
} cli_args;

/* Returns the option's value and advances, or reports a missing value. */
const char *cli_value(cli_args *a);
bool cli_int(cli_args *a, long lo, long hi, long *out);
bool cli_float(cli_args *a, double lo, double hi, float *out);
bool cli_u64(cli_args *a, uint64_t *out);

/* False (with the usage message) when no model path was given by -m or
 * $VX_MODEL. */
bool cli_model_given(const char *path);
/* Loads a model printing a progress bar on stderr when it is a terminal;
 * prints the error and returns NULL on failure. */
vx_model *cli_load_model(const char *path, bool vocab_only);
vx_model *cli_load_model_ex(const char *path, const vx_model_params *params);
/* The same, in this process alone (a draft model), when it runs in a group. */
vx_model *cli_load_local_model(const char *path, const vx_model_params *params);
/* The process group models load into (pipeline parallelism; vx.c). */
#define CLI_MAX_SPLIT 64
void cli_set_group(vx_dist *d);
/* Reads a file into a NUL-terminated buffer (malloc); NULL + message on error. */
char *cli_read_file(const char *path, size_t *len);
/* Handles a sampling option at a->argv[a->i] (--temp, --top-k, --top-p,
 * --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
 * --frequency-penalty, -s/--seed); false if it is not one. */
bool cli_sampling_option(cli_args *a, vx_sampler_params *sp);
/* llama.cpp's GPU offload options (-ngl N, --n-gpu-layers N): taken, with
 * a note that they do nothing here, so that the same command lines run;
 * and -ts/--tensor-split A,B,...: under mpirun, each process's share of
 * the layers. False if argv[a->i] is none of them. */
bool cli_gpu_option(cli_args *a);
/* llama.cpp options that name what vx always does or has no use for
 * (--jinja, -fa/--flash-attn [on|off|auto], -cb, --metrics, --mlock,
 * --no-mmap, --no-webui): taken with a note, so that command lines copied
 * from llama-cli and llama-server run; false if argv[a->i] is none. */
bool cli_llama_option(cli_args *a);
/* The text of token t (special: control tokens by name) in *buf, grown as
 * needed (*buf may start NULL; free it); its length, or -1 out of memory. */
int32_t cli_piece(const vx_vocab *v, vx_token t, bool special, char **buf, int32_t *cap);
/* Jinja source of the chat template: --chat-template NAME (built-in) or
 * FILE, else the model's tokenizer.chat_template, else chatml. malloc'd;
 * NULL (with a message) when NAME is neither. */
char *cli_chat_template_source(const vx_model *m, const char *name);
/* Tokenizes text[0..len) into a malloc'd array of at least min_cap
 * entries (grown to what the text needs: byte fallback can take several
 * tokens per character). Returns the token count, or -1 with a message. */
int32_t cli_tokenize(const vx_vocab *v, const char *text, int32_t len, bool add_special, bool parse_special,
                     int32_t min_cap, vx_token **out);
/* Whether m generates text; false with a message for an encoder
 * (embeddings only). */
bool cli_generative(const vx_model *m);
/* --pooling's value (name v, parsed as p): mean, cls or last, else false
 * with a message. */
bool cli_pooling_ok(const char *v, vx_pooling p);
/* Embeddings' pooling: the one asked (--pooling, or UNSPECIFIED), else the
 * file's pooling_type. An encoder takes any (mean by default); a causal
 * model mean or last, else last (with a note for a file's cls: its first
 * token has seen nothing else), and UNSPECIFIED with a message when cls
 * was asked. */
vx_pooling cli_model_pooling(const vx_model *m, vx_pooling asked);
/* Parses "kv type" names: f16, f32. */
bool cli_kv_type(const char *s, vx_kv_type *out);

#endif
