/*
 * vortex.h - public API of Vortex (vx), an LLM inference engine in C.
 *
 * Handles are opaque. Every fallible call returns a vx_status; calls that
 * create a handle also fill a caller-provided message buffer (may be NULL)
 * with a precise, human-readable reason on failure. The library never calls
 * exit() or abort() on bad input.
 *
 *   vx_model    read-only weights + vocabulary, shared by any number of contexts
 *   vx_context  per-engine state: KV cache, scratch buffers, thread pool
 *   vx_batch    tokens to evaluate, each with a position and a sequence id
 *   vx_sampler  a chain of sampling steps (penalties, top-k, top-p, ...)
 *
 * Typical use:
 *   vx_model *m; vx_context *c;
 *   vx_model_params mp = vx_model_default_params();
 *   if (vx_model_load("model.gguf", &mp, &m, err, sizeof err) != VX_OK) ...
 *   vx_context_params cp = vx_context_default_params();
 *   vx_context_init(m, &cp, &c, err, sizeof err);
 *   ... vx_tokenize, vx_decode, vx_get_logits, vx_sampler_sample ...
 */
#ifndef VORTEX_H
#define VORTEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VX_VERSION "0.1.0"
#define VX_ERRMSG_MAX 512

typedef enum vx_status {
    VX_OK = 0,
    VX_EINVAL = -1,       /* invalid argument */
    VX_ENOMEM = -2,       /* out of memory */
    VX_EIO = -3,          /* file or system I/O error */
    VX_EFORMAT = -4,      /* malformed or corrupt input (file, JSON, ...) */
    VX_EUNSUPPORTED = -5, /* well-formed but not supported (type, architecture) */
    VX_ERANGE = -6,       /* value out of range (position beyond context, ...) */
    VX_EFULL = -7,        /* no room left (KV cache, queue) */
    VX_ECANCELED = -8,    /* canceled by the caller */
    VX_EINTERNAL = -9     /* internal invariant broken (a bug: please report) */
} vx_status;

/* Name of a status code ("ok", "invalid argument", ...). */
const char *vx_status_str(vx_status s);

typedef int32_t vx_token;
typedef int32_t vx_pos;
typedef int32_t vx_seq_id;

typedef struct vx_model vx_model;
typedef struct vx_vocab vx_vocab;
typedef struct vx_context vx_context;
typedef struct vx_sampler vx_sampler;
typedef struct vx_dist vx_dist;

/* ----------------------------------------------------------- processes */

/* A group of processes started together by an MPI launcher (mpirun -np N
 * vx ...), for pipeline parallelism: a model loaded with the group
 * (vx_model_params.dist) is split into N contiguous shares of layers;
 * process 0 holds the embeddings, the output head and the first share, and
 * is the only one the program drives: every call on its models and
 * contexts runs the other processes' shares too, the hidden states of a
 * batch passing from one process to the next. Its KV cache is split the
 * same way, so a model and its cache need only 1/N of the memory on each
 * machine. Outputs are the single process's, bit for bit, for the same
 * number of threads per process.
 * Outside a launcher vx_dist_init gives NULL and VX_OK: one process, no MPI.
 * Built without MPI it fails under a launcher of more than one process. */
vx_status vx_dist_init(int *argc, char ***argv, vx_dist **out, char *errmsg, size_t errmsg_size);
int32_t vx_dist_rank(const vx_dist *d); /* this process, 0..size-1 (NULL: 0) */
int32_t vx_dist_size(const vx_dist *d); /* processes in the group (NULL: 1) */
/* Processes 1..size-1: carries out process 0's calls until it frees its
 * handle. VX_EINVAL on process 0. */
vx_status vx_dist_serve(vx_dist *d);
/* Process 0 first ends the others' vx_dist_serve; then every process
 * leaves MPI. Every model and context of the group must be freed first. */
void vx_dist_free(vx_dist *d);

/* ------------------------------------------------------------------ model */

/* Called while a model loads with progress in [0, 1]; return false to cancel. */
typedef bool (*vx_progress_fn)(float progress, void *user_data);

typedef struct vx_model_params {
    bool use_mmap;           /* map tensor data instead of reading it (default true) */
    bool vocab_only;         /* load only metadata and the tokenizer */
    bool check_tensors;      /* validate tensor data (NaN/Inf in scales); slower */
    bool repack;             /* move Q4_K/Q6_K matmul weights at load into the
                                8-row interleaved layouts the SIMD kernels read
                                faster (default true; same results bit for bit;
                                not done when only the generic kernels run) */
    vx_progress_fn progress; /* optional */
    void *progress_user_data;
    /* Pipeline parallelism (vx_dist_init): with a group of several
       processes, each one holds and runs a contiguous share of the layers,
       and every context of the model spans the group. NULL: this process
       alone. */
    vx_dist *dist;
    /* The share of the layers of each process (dist's size of them, as
       llama.cpp's --tensor-split), e.g. {1, 3}; NULL: even shares. */
    const float *layer_split;
} vx_model_params;

vx_model_params vx_model_default_params(void);

/* Loads a GGUF model. On failure *out is NULL and errmsg (if given) says why. */
vx_status vx_model_load(const char *path, const vx_model_params *params, vx_model **out,
                        char *errmsg, size_t errmsg_size);
void vx_model_free(vx_model *model);

const vx_vocab *vx_model_get_vocab(const vx_model *model);
const char *vx_model_arch(const vx_model *model); /* "llama", "qwen2", ... */
int32_t vx_model_n_embd(const vx_model *model);
int32_t vx_model_n_layer(const vx_model *model);
int32_t vx_model_n_ctx_train(const vx_model *model);
uint64_t vx_model_n_params(const vx_model *model);
uint64_t vx_model_size(const vx_model *model);
/* Whether the model is a BERT-style encoder (bert, nomic-bert: embedding
 * models such as bge, all-MiniLM, mxbai-embed, nomic-embed-text): its
 * attention sees the whole sequence, so each sequence must come whole in
 * one batch, starting at position 0 of an empty sequence; it has no
 * output head, so it gives embeddings (vx_batch.embd) and no logits. */
bool vx_model_is_encoder(const vx_model *model);

/* How a sequence's token embeddings become one vector (GGUF's
 * {arch}.pooling_type values): their mean, the first token's (CLS) or the
 * last token's. */
typedef enum vx_pooling {
    VX_POOLING_UNSPECIFIED = -1,
    VX_POOLING_NONE = 0,
    VX_POOLING_MEAN = 1,
    VX_POOLING_CLS = 2,
    VX_POOLING_LAST = 3
} vx_pooling;
/* The file's {arch}.pooling_type, or VX_POOLING_UNSPECIFIED without one
 * (or with a value this engine does not compute, such as rank). */
vx_pooling vx_model_pooling(const vx_model *model);
/* "none", "mean", "cls", "last"; NULL for others. */
const char *vx_pooling_name(vx_pooling pooling);
/* The pooling named s, or VX_POOLING_UNSPECIFIED. */
vx_pooling vx_pooling_from_name(const char *s);
/* Normalizes v[0, n) in place as llama.cpp's --embd-normalize: -1 none, 0
 * max-absolute scaled to int16 range (32760), 1 taxicab, 2 Euclidean (the
 * default of the OpenAI API), p > 2 the p-norm. A zero vector stays zero. */
void vx_embd_normalize(float *v, int32_t n, int32_t norm);
/* Weights repacked at load (vx_model_params.repack) and their bytes. */
int32_t vx_model_n_repacked(const vx_model *model, uint64_t *bytes); /* bytes of tensor data */

/* Weight bytes one token reads and matmul FLOPs it costs (2 per weight of
 * every matrix it multiplies; MoE counts only the experts used; attention
 * and the token-embedding row are not included). For bandwidth reports. */
void vx_model_token_cost(const vx_model *model, uint64_t *bytes, uint64_t *flops);
/* Of those FLOPs, the ones on float weights (F32/F16/BF16), which run on
 * fp32 FMA (or AMX bf16) rather than int8 dot products. */
uint64_t vx_model_token_float_flops(const vx_model *model);

/* Metadata as text (numbers formatted, arrays summarized). Returns the length
 * the full value needs (like snprintf) or -1 if the key does not exist. */
int32_t vx_model_meta_str(const vx_model *model, const char *key, char *buf, size_t size);

/* A multi-line human-readable description: architecture, hyperparameters,
 * tensor type histogram, sizes. Returns the length needed (like snprintf). */
int32_t vx_model_describe(const vx_model *model, char *buf, size_t size);

/* ------------------------------------------------------------------ vocab */

int32_t vx_vocab_n_tokens(const vx_vocab *vocab);
vx_token vx_vocab_bos(const vx_vocab *vocab); /* -1 when none */
vx_token vx_vocab_eos(const vx_vocab *vocab);
vx_token vx_vocab_eot(const vx_vocab *vocab);
bool vx_vocab_add_bos(const vx_vocab *vocab);
bool vx_vocab_add_eos(const vx_vocab *vocab);
/* The fill-in-the-middle tokens (prefix, suffix, middle: the file's
 * tokenizer.ggml.fim_*_token_id, or found by their text, e.g. Qwen2.5-Coder's
 * <|fim_prefix|>, CodeLlama's <PRE>); false when any of the three is missing. */
bool vx_vocab_fim(const vx_vocab *vocab, vx_token *pre, vx_token *suf, vx_token *mid);
/* Repository-level FIM tokens (Qwen2.5-Coder's <|repo_name|> and
 * <|file_sep|>, StarCoder's <reponame> and <file_sep>, ...): -1 where the
 * vocabulary has none; true when it has either. */
bool vx_vocab_fim_repo(const vx_vocab *vocab, vx_token *rep, vx_token *sep);
bool vx_vocab_is_eog(const vx_vocab *vocab, vx_token token); /* end of generation */
/* The longest text vx_token_to_piece writes for any token (special ones
 * included): a buffer of this size holds every piece. */
int32_t vx_vocab_max_piece(const vx_vocab *vocab);
bool vx_vocab_is_control(const vx_vocab *vocab, vx_token token);
const char *vx_vocab_text(const vx_vocab *vocab, vx_token token); /* raw piece; NULL if out of range */

/* Tokenizes text[0..len). add_special adds BOS/EOS as the vocabulary asks;
 * parse_special matches control-token text such as "<|im_start|>".
 * len < 0 means text is NUL-terminated.
 * Returns the number of tokens written, or -(needed) if n_max is too small,
 * or INT32_MIN when memory runs out. Invalid UTF-8 is tokenized bytewise. */
int32_t vx_tokenize(const vx_vocab *vocab, const char *text, int32_t len, vx_token *tokens,
                    int32_t n_max, bool add_special, bool parse_special);

/* Writes the text of one token (byte-fallback tokens become their byte,
 * "▁" becomes a space). Control tokens are rendered only when special is true.
 * Returns the length, or -(needed) if size is too small. Not NUL-terminated. */
int32_t vx_token_to_piece(const vx_vocab *vocab, vx_token token, char *buf, int32_t size,
                          bool special);

/* Detokenizes a sequence (handles the leading space of SentencePiece, and
 * the vocabulary's clean-up rules). Returns length or -(needed). */
int32_t vx_detokenize(const vx_vocab *vocab, const vx_token *tokens, int32_t n_tokens, char *buf,
                      int32_t size, bool remove_special, bool unparse_special);

/* ---------------------------------------------------------------- context */

/* KV cache element type. Q8_0: blocks of 32 int8 with an fp16 scale (about
 * half of F16's memory, a little less accurate). */
typedef enum vx_kv_type { VX_KV_F32 = 0, VX_KV_F16 = 1, VX_KV_Q8_0 = 2 } vx_kv_type;

typedef struct vx_context_params {
    uint32_t n_ctx;     /* max positions per sequence (0 = model's training context) */
    uint32_t kv_size;   /* positions the KV cache holds over all sequences (0 = n_ctx) */
    uint32_t n_batch;   /* max tokens per vx_decode call */
    uint32_t n_seq_max; /* max distinct sequence ids [0, n_seq_max) */
    int32_t n_threads;  /* 0 = number of online cores */
    vx_kv_type kv_type; /* KV cache storage type */
    bool f32_matmul;    /* dequantize weight rows and multiply in f32 instead of
                           quantizing activations to 8 bits: slower, closest to
                           exact math (for accuracy work) */
    bool batch_invariant; /* a token's logits are the same bits whatever else is
                           in its batch (alone, with other sequences, in a
                           prompt chunk of any size, recomputed after
                           preemption or read from the prefix cache): the
                           integer kernels only. Off (default), matmuls of 64+
                           tokens may take the AMX bf16 GEMM, and BF16 weights
                           of 16+ tokens vdpbf16ps where the CPU has it (faster
                           prefill, bf16-rounded activations), as llama.cpp and
                           vLLM do by default */
    bool profile;       /* time every step of the forward pass (vx_context_perf):
                           two clock reads per step, by thread 0 only */
} vx_context_params;

vx_context_params vx_context_default_params(void);

vx_status vx_context_init(const vx_model *model, const vx_context_params *params,
                          vx_context **out, char *errmsg, size_t errmsg_size);
void vx_context_free(vx_context *ctx);
const char *vx_context_errmsg(const vx_context *ctx); /* reason of the last failure */
const vx_model *vx_context_get_model(const vx_context *ctx);
uint32_t vx_context_n_ctx(const vx_context *ctx);
int32_t vx_context_n_threads(const vx_context *ctx);
int32_t vx_context_n_vocab(const vx_context *ctx);

/* A batch of tokens: parallel arrays of n_tokens entries owned by the caller.
 * logits[i] != 0 asks for the logits of token i (NULL: only the last token,
 * unless embd is given). embd[i] != 0 asks for its embedding: the output
 * norm of its final hidden state, the vector the logits are computed from
 * (NULL: none). A token may ask for both, or neither. */
typedef struct vx_batch {
    int32_t n_tokens;
    const vx_token *token;
    const vx_pos *pos;
    const vx_seq_id *seq_id;
    const int8_t *logits;
    const int8_t *embd;
} vx_batch;

/* Runs the model on a batch. Each token attends to the cached positions of
 * its own sequence and to earlier tokens of that sequence in the batch.
 * Positions of a sequence must continue where its cache ends. */
vx_status vx_decode(vx_context *ctx, const vx_batch *batch);

/* Logits of the i-th batch token of the last vx_decode ([n_vocab] floats),
 * or NULL if that token did not ask for logits. */
const float *vx_get_logits_ith(const vx_context *ctx, int32_t i);
/* Embedding of the i-th batch token of the last vx_decode ([n_embd]
 * floats, not normalized), or NULL if that token did not ask for it. */
const float *vx_get_embeddings_ith(const vx_context *ctx, int32_t i);

/* The embeddings of texts (texts[t]: n_tokens[t] tokens): each evaluated
 * as its own sequence, several in one batch as n_batch and n_seq_max allow
 * (sequence ids [0, min(n_seq_max, n_texts)), which must be empty, and are
 * empty again after), its token embeddings pooled as pooling says (mean,
 * cls or last) into out[t][n_embd] (not normalized). VX_ERANGE if a text
 * exceeds the context (an encoder's: n_batch, as it goes in one batch). The KV cache must hold the texts under way at once
 * (kv_size of n_seq_max x the longest text, each rounded up to the cache's
 * block of positions (vx_kv_usage), always does). */
vx_status vx_embed_texts(vx_context *ctx, const vx_token *const *texts, const int32_t *n_tokens, int32_t n_texts,
                         vx_pooling pooling, float *out);

/* Removes positions [p0, p1) of a sequence from the cache (p1 < 0: to the end).
 * Only removing a suffix is supported by the contiguous cache. */
vx_status vx_kv_seq_rm(vx_context *ctx, vx_seq_id seq, vx_pos p0, vx_pos p1);
/* Number of positions cached for a sequence. */
vx_pos vx_kv_seq_len(const vx_context *ctx, vx_seq_id seq);
/* KV cache blocks in the pool, in use, kept only for prefix reuse, and
 * positions per block (any pointer may be NULL). */
void vx_kv_usage(const vx_context *ctx, int32_t *blocks_total, int32_t *blocks_used,
                 int32_t *blocks_cached, int32_t *block_size);
/* Prefix caching: for an empty sequence, attaches cached KV blocks holding
 * the longest block-aligned prefix of tokens[0, n) and returns how many
 * positions are now cached (evaluate the rest from there). Pass n - 1 to
 * keep at least one token to evaluate for fresh logits. */
int32_t vx_kv_seq_reuse_prefix(vx_context *ctx, vx_seq_id seq, const vx_token *tokens, int32_t n);
/* Makes empty sequence dst share src's cache (copy-on-write when either
 * later writes into a shared block): n completions of one prompt. */
vx_status vx_kv_seq_fork(vx_context *ctx, vx_seq_id src, vx_seq_id dst);
/* Prefix blocks looked up and found so far. */
void vx_kv_prefix_counts(const vx_context *ctx, uint64_t *lookups, uint64_t *hits);

/* Where the forward pass spends its time (like llama.cpp's perf counters,
 * finer): the steps of a layer, as thread 0 runs them. Its share of a
 * split step ends where it waits at the barrier after it; that wait is
 * VX_PERF_WAIT (the other threads' extra time on the step before). */
typedef enum vx_perf_step {
    VX_PERF_EMBED,    /* token embeddings, rotary tables */
    VX_PERF_NORM,     /* RMSNorms and the activations' conversions for the matmuls */
    VX_PERF_QKV,      /* q/k/v projections */
    VX_PERF_ROPE,     /* their biases and norms, RoPE, K/V into the cache */
    VX_PERF_ATTN,     /* attention */
    VX_PERF_OUT_PROJ, /* attention output projection */
    VX_PERF_FFN_UP,   /* FFN gate and up projections (and the SwiGLU fused with them) */
    VX_PERF_FFN_ACT,  /* SwiGLU and the down projection's input */
    VX_PERF_FFN_DOWN, /* FFN down projection */
    VX_PERF_MOE,      /* mixture-of-experts FFN: router, routing, experts */
    VX_PERF_LOGITS,   /* final norm and output projection */
    VX_PERF_WAIT,     /* thread 0 waiting at barriers for the other threads */
    VX_PERF_OTHER,    /* the rest of vx_decode: checking the batch, waking the
                         threads, waiting for the last of them to finish */
    VX_PERF_COUNT
} vx_perf_step;

typedef struct vx_perf {
    uint64_t n_decode;          /* vx_decode calls that ran the model */
    uint64_t n_tokens;          /* tokens in them */
    uint64_t ns_decode;         /* wall time spent in them */
    uint64_t ns[VX_PERF_COUNT]; /* thread 0's time per step, adding up to
                                   ns_decode (all 0 unless
                                   vx_context_params.profile) */
} vx_perf;

/* Counters since the context was made or last reset. */
void vx_context_perf(const vx_context *ctx, vx_perf *out);
void vx_context_perf_reset(vx_context *ctx);
/* Short name of a step ("attention", ...); "?" outside the enum. */
const char *vx_perf_step_name(vx_perf_step step);

/* ---- speculative decoding (speculative.c) ----
 * Speculative decoding: a draft model proposes tokens one by one,
 * the target checks them all in one batch and keeps the longest prefix it
 * agrees with, plus its own next token. The output is the target's greedy
 * output (or, vx_spec_step_sample, its sampled output) (bit for bit with batch_invariant contexts; otherwise up to the
 * last bits of near-tied logits), in fewer target passes. */
typedef struct vx_spec_stats {
    int32_t n_steps;    /* verification batches run on the target */
    int32_t n_drafted;  /* tokens the draft proposed */
    int32_t n_accepted; /* of those, the target's own choices */
} vx_spec_stats;
/* One step on sequence 0 of both contexts, which hold positions [0,
 * n_past) of the same tokens; cur is the next token (position n_past, in
 * neither cache). Drafts n_draft tokens (1..64), verifies them, and
 * writes the tokens it emits to out (at most n_draft + 1: the accepted
 * drafts, then the target's next token) and their count to *n_out. Both
 * caches then hold [0, n_past + *n_out), and out[*n_out - 1] is the next
 * cur. VX_EINVAL: n_draft out of range, vocabularies of different sizes,
 * or no room for n_draft + 1 more positions in either context; another
 * status: a decode failed (vx_context_errmsg of either context says why). */
vx_status vx_spec_step(vx_context *tgt, vx_context *dft, vx_token cur, vx_pos n_past, int32_t n_draft, vx_token *out,
                       int32_t *n_out, vx_spec_stats *stats);
/* vx_spec_step with the target's tokens drawn by smp (its temperature,
 * truncations, penalties and seed; NULL: greedy) instead of its argmax: the
 * draw at each verified position is kept while it equals the draft token
 * that went in there, and each kept draw is taken into smp's history
 * (vx_sampler_accept) before the next. smp must have taken every token up
 * to cur, cur included. So the output is what the target alone samples,
 * one draw per token, in the same order: for the same seed the same
 * tokens as without a draft (bit for bit with batch_invariant contexts).
 * A draw that finds no token (vx_sampler_sample's -1) ends the step:
 * out[*n_out - 1] is then -1. A sampler with a filter is refused
 * (VX_EINVAL): the step draws several tokens and cannot advance the
 * filter's state between them (the serving engine does). */
vx_status vx_spec_step_sample(vx_context *tgt, vx_context *dft, vx_sampler *smp, vx_token cur, vx_pos n_past,
                              int32_t n_draft, vx_token *out, int32_t *n_out, vx_spec_stats *stats);
/* The index of the largest of n logits (the first of equals): greedy. */
vx_token vx_argmax(const float *logits, int32_t n);

/* ---------------------------------------------------------------- sampler */

typedef struct vx_logit_bias {
    vx_token token;
    float bias;
} vx_logit_bias;

typedef struct vx_sampler_params {
    uint64_t seed;            /* RNG seed; same seed + same logits = same tokens */
    float temperature;        /* <= 0: greedy */
    int32_t top_k;            /* <= 0: disabled */
    float top_p;              /* >= 1: disabled */
    float min_p;              /* <= 0: disabled */
    float repeat_penalty;     /* 1: disabled */
    float presence_penalty;   /* 0: disabled */
    float frequency_penalty;  /* 0: disabled */
    int32_t penalty_last_n;   /* penalty window in accepted tokens (-1 = all, 0 = off) */
    const vx_logit_bias *logit_bias; /* copied at init; -INFINITY bans a token */
    int32_t n_logit_bias;
} vx_sampler_params;

/* llama.cpp's CLI defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * no penalties (repeat 1, presence 0, frequency 0) over a 64-token window,
 * seed UINT64_MAX (random: drawn from /dev/urandom at init and at reset). */
vx_sampler_params vx_sampler_default_params(void);
/* The chain, in this order (llama.cpp's default order): logit bias,
 * penalties, top-k, top-p, min-p, temperature, softmax + seeded draw.
 * top-p and min-p see the temperature-1 probabilities of the tokens that
 * survived the previous steps. VX_EINVAL for n_vocab <= 0, NaN parameters,
 * temperature +inf, repeat_penalty <= 0, penalty_last_n < -1 or a logit_bias
 * token outside [0, n_vocab). Allocates everything vx_sampler_sample needs. */
vx_status vx_sampler_init(const vx_sampler_params *params, int32_t n_vocab, vx_sampler **out);
void vx_sampler_free(vx_sampler *s);
/* Picks a token from logits [n_vocab]. Does not modify logits and never
 * allocates. Greedy (temperature <= 0) is the argmax after bias and
 * penalties, ties to the lowest id. NaN logits count as -inf. Returns -1 if
 * s or logits is NULL or every token is banned (all logits -inf). */
vx_token vx_sampler_sample(vx_sampler *s, const float *logits);
/* A constraint on the next token: true when token may be drawn. */
typedef bool (*vx_token_filter)(void *ctx, vx_token token);
/* From the next draw on, only tokens filter allows are drawn: the others are
 * banned after the logit bias, as a bias of -INFINITY would ban them
 * (constrained decoding: json_check.h). NULL removes the filter. The
 * filter runs over the vocabulary at every draw; when it allows nothing,
 * vx_sampler_sample returns -1. */
void vx_sampler_set_filter(vx_sampler *s, vx_token_filter filter, void *ctx);
/* Whether a filter is set. */
bool vx_sampler_has_filter(const vx_sampler *s);
/* Records a token in the penalty history (sampled or from the prompt).
 * Tokens outside [0, n_vocab) are ignored. */
void vx_sampler_accept(vx_sampler *s, vx_token token);
/* Forgets the penalty history and the last distribution, and reseeds the
 * RNG (same seed: the same draws as a fresh sampler; random: a new seed). */
void vx_sampler_reset(vx_sampler *s);
/* Natural-log probability of token t under the final distribution of the
 * last vx_sampler_sample call (after all filters and the temperature);
 * -INFINITY for a token that was filtered out or banned; NaN if there was
 * no successful sample since init/reset or t is out of range. For greedy
 * sampling it is the log-softmax of the biased/penalized logits at
 * temperature 1 (top-k/top-p/min-p are not applied). */
float vx_sampler_last_logprob(const vx_sampler *s, vx_token t);
/* The (at most) n most likely tokens of that same distribution, most likely
 * first (ties: lower id first), with their log-probabilities, for OpenAI's
 * top_logprobs. Returns how many were written (0 if none available); never
 * more than the tokens that survived the filters. */
int32_t vx_sampler_last_top(const vx_sampler *s, int32_t n, vx_token *ids, float *logprobs);
/* Log-probabilities under the model's own distribution: the log-softmax of
 * the raw logits (no bias, penalties, temperature or filters), which is
 * what OpenAI's logprobs, vLLM and llama-server report. *token_logprob (if
 * not NULL) gets token's (NaN outside [0, n_vocab)); ids / logprobs the n
 * most likely tokens, most likely first, ties to the lower id. NaN logits
 * count as -inf. Returns how many were written (0 for bad arguments or
 * when every logit is -inf). */
int32_t vx_logprobs(const float *logits, int32_t n_vocab, vx_token token, float *token_logprob, int32_t n,
                    vx_token *ids, float *logprobs);

/* ------------------------------------------------------------------ misc */

/* Features of this CPU the kernels use, e.g. "AVX2 FMA F16C". */
const char *vx_cpu_features(void);
/* The kernel tier a new context runs: "generic", "avx2", "avx512" or
 * "avx512-emu" (after VX_FORCE_GENERIC, VX_ISA and VX_EMULATE, see README). */
const char *vx_kernels_name(void);

#ifdef __cplusplus
}
#endif

#endif /* VORTEX_H */
