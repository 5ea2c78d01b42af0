/*
 * dist.h - the inside of pipeline parallelism over MPI (vortex.h's
 * vx_dist): the messages between process 0, which the program drives, and
 * the others, which carry out its calls (vx_dist_serve).
 *
 * The group is a replicated state machine. Every call that changes a
 * model or a context of the group (load, free, vx_decode, the KV cache's
 * sequence operations) runs on process 0 first, is checked there, and is
 * then sent to every other process, which makes the same call on its own
 * copy: their block tables and sequence lengths stay equal, so a batch's
 * KV rows land in the same blocks everywhere without ever being sent.
 * Only the hidden states travel: process 0 embeds the batch and runs its
 * share of layers, each process takes the states from the one before,
 * runs its share and passes them on, and the last one sends them back to
 * process 0 for the output head. A status travels with them: a process
 * that failed passes the failure on instead of states.
 *
 * Process 0 holds a lock from a command to the end of its reply (and a
 * decode's whole pipeline), so that one thread at a time talks to the
 * group. Waits poll (spinning briefly, then sleeping 50 us) so that idle
 * processes leave the cores to the busy ones.
 */
#ifndef VX_DIST_H
#define VX_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

/* A group of more than one process. */
bool vx_dist_multi(const vx_dist *d);

/* first[0..size]: process r holds layers [first[r], first[r + 1]) of
 * n_layer, in proportion to split[r] (NULL: even shares, the larger ones
 * last: process 0 also runs the embeddings and the output head). Every
 * process gets at least one layer. */
vx_status vx_dist_split(const vx_dist *d, int32_t n_layer, const float *split, int32_t *first, char *err,
                        size_t err_size);

/* ---- process 0: commands (each takes and releases the lock) */

/* Loads path on every other process, each its share (first[], as
 * vx_dist_split gave); *id names the model in later commands. Fails with
 * the first failing process's message. */
vx_status vx_dist_model_load(vx_dist *d, const char *path, const vx_model_params *p, const int32_t *first,
                             int32_t *id, char *err, size_t err_size);
void vx_dist_model_free(vx_dist *d, int32_t id);
vx_status vx_dist_ctx_init(vx_dist *d, int32_t model_id, const vx_context_params *p, int32_t *id, char *err,
                           size_t err_size);
void vx_dist_ctx_free(vx_dist *d, int32_t id);
void vx_dist_kv_rm(vx_dist *d, int32_t ctx, vx_seq_id seq, vx_pos p0, vx_pos p1);
void vx_dist_kv_fork(vx_dist *d, int32_t ctx, vx_seq_id src, vx_seq_id dst);
void vx_dist_kv_reuse(vx_dist *d, int32_t ctx, vx_seq_id seq, const vx_token *tokens, int32_t n);

/* A decode: process 0 takes the lock, sends the batch (tokens, positions,
 * sequences) and runs the pipeline (vx_dist_send / vx_dist_recv) before
 * releasing it. */
void vx_dist_lock(vx_dist *d);
void vx_dist_unlock(vx_dist *d);
void vx_dist_decode(vx_dist *d, int32_t ctx, const vx_batch *b);

/* ---- the pipeline, on every process */

/* Sends n floats of hidden states (st == VX_OK) or the failure st alone to
 * process to. */
void vx_dist_send(vx_dist *d, int32_t to, vx_status st, const float *x, size_t n);
/* Receives what vx_dist_send sent from process from: VX_OK with the n
 * floats in x, or the failure passed on. */
vx_status vx_dist_recv(vx_dist *d, int32_t from, float *x, size_t n);

#endif
