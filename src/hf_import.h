/*
 * hf_import.h - Hugging Face model directories (config.json,
 * tokenizer.json, tokenizer_config.json, *.safetensors) opened as GGUF
 * readers, so every command that takes a GGUF file takes such a directory
 * too.
 *
 * What the import produces is what llama.cpp's convert_hf_to_gguf.py
 * would write for the same directory (without quantizing): the
 * architecture's metadata keys, the tokenizer as tokenizer.ggml.* keys,
 * tensors under GGUF names, the Q and K projections of Llama-family
 * models permuted to GGUF's rotary order. F32/F16/BF16 weights are used in
 * place from the mapped safetensors files (nothing is copied but the
 * permuted projections and the norms and biases, which become F32).
 */
#ifndef VX_HF_IMPORT_H
#define VX_HF_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "vortex.h"

/* Whether path is a directory: read as a Hugging Face model directory
 * (vx_hf_open says what is missing when it is not one). */
bool vx_hf_is_model_dir(const char *path);

/* Opens the model directory dir as a reader (vx_gguf_open_detached): close
 * it with vx_gguf_close, which releases the mappings and copies. */
vx_status vx_hf_open(const char *dir, vx_gguf **out, char *err, size_t err_size);

/* The tokenizer keys (tokenizer.ggml.*, tokenizer.chat_template) of the
 * tokenizer.json text json (len bytes), the optional tokenizer_config.json
 * text cfg and config.json text model_cfg (NULL: none), with at least n_vocab
 * tokens (the embedding's rows; 0: as many as the tokenizer has; more:
 * padded with unused [PAD<i>] tokens, as the converter does). Byte-level
 * BPE tokenizers (GPT-2, Llama 3, Qwen2/2.5/3, ...) are supported. */
vx_status vx_hf_tokenizer_to_gguf(const char *json, size_t len, const char *cfg, size_t cfg_len,
                                  const char *model_cfg, size_t model_cfg_len, int64_t n_vocab, vx_gguf_writer *w,
                                  char *err, size_t err_size);

/* The same keys of a SentencePiece tokenizer.model (protobuf bytes model,
 * len), as the converter writes them for Llama 2, Mistral and Phi-3
 * ("llama" model: pieces, scores and types as stored; a Unigram model, as
 * T5's and XLM-RoBERTa's: "t5" with the normalizer's precompiled charsmap
 * and remove_extra_whitespaces), with the optional
 * added_tokens.json text added and tokenizer_config.json's
 * added_tokens_decoder applied over them. */
vx_status vx_hf_spm_to_gguf(const uint8_t *model, size_t len, const char *cfg, size_t cfg_len,
                            const char *model_cfg, size_t model_cfg_len, const char *added_json, size_t added_len,
                            int64_t n_vocab, vx_gguf_writer *w, char *err, size_t err_size);

#endif
