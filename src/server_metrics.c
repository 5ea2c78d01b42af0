/*
 * server_metrics.c - GET /metrics' text (see server_metrics.h).
 */
#include "server_metrics.h"

#include "common.h"

char *vx_server_metrics_text(const vx_http_counters *h, const vx_engine_stats *e) {
    const vx_engine_stats st = *e;
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "# HELP vortex_http_requests_total HTTP requests answered, by status code.\n"
                     "# TYPE vortex_http_requests_total counter\n");
    for (int i = 0; i < h->n_status; i++)
        if (h->status_count[i])
            vx_sbuf_addf(&b, "vortex_http_requests_total{status=\"%d\"} %llu\n", i,
                         (unsigned long long)h->status_count[i]);
    vx_sbuf_addf(&b,
                 "# HELP vortex_http_requests_aborted_total Requests whose client went away before the answer.\n"
                 "# TYPE vortex_http_requests_aborted_total counter\n"
                 "vortex_http_requests_aborted_total %llu\n"
                 "# HELP vortex_prompt_tokens_total Prompt tokens of answered requests.\n"
                 "# TYPE vortex_prompt_tokens_total counter\n"
                 "vortex_prompt_tokens_total %llu\n"
                 "# HELP vortex_generated_tokens_total Tokens generated for answered requests.\n"
                 "# TYPE vortex_generated_tokens_total counter\n"
                 "vortex_generated_tokens_total %llu\n"
                 "# HELP vortex_requests_in_flight Generation requests being served.\n"
                 "# TYPE vortex_requests_in_flight gauge\n"
                 "vortex_requests_in_flight %d\n"
                 "# HELP vortex_http_header_timeouts_total Connections closed for sending no complete request headers in time.\n"
                 "# TYPE vortex_http_header_timeouts_total counter\n"
                 "vortex_http_header_timeouts_total %llu\n"
                 "# HELP vortex_http_body_timeouts_total Connections closed for sending a request body too slowly.\n"
                 "# TYPE vortex_http_body_timeouts_total counter\n"
                 "vortex_http_body_timeouts_total %llu\n",
                 (unsigned long long)h->aborted, (unsigned long long)h->tokens_prompt,
                 (unsigned long long)h->tokens_generated, h->in_flight, (unsigned long long)h->header_timeouts,
                 (unsigned long long)h->body_timeouts);
    const double hit = st.prefix_lookups ? (double)st.prefix_hits / (double)st.prefix_lookups : 0.0;
    const double tps = st.busy_seconds > 0 ? (double)st.tokens_generated / st.busy_seconds : 0.0;
    vx_sbuf_addf(&b,
                 "# HELP vortex_queue_depth Engine requests waiting to run.\n"
                 "# TYPE vortex_queue_depth gauge\n"
                 "vortex_queue_depth %d\n"
                 "# HELP vortex_requests_running Engine requests running.\n"
                 "# TYPE vortex_requests_running gauge\n"
                 "vortex_requests_running %d\n"
                 "# HELP vortex_kv_blocks_total KV cache blocks.\n"
                 "# TYPE vortex_kv_blocks_total gauge\n"
                 "vortex_kv_blocks_total %d\n"
                 "# HELP vortex_kv_blocks_used KV cache blocks in use by running sequences.\n"
                 "# TYPE vortex_kv_blocks_used gauge\n"
                 "vortex_kv_blocks_used %d\n"
                 "# HELP vortex_kv_blocks_cached KV cache blocks kept for prefix reuse.\n"
                 "# TYPE vortex_kv_blocks_cached gauge\n"
                 "vortex_kv_blocks_cached %d\n",
                 st.queued, st.running, st.kv_blocks_total, st.kv_blocks_used, st.kv_blocks_cached);
    vx_sbuf_addf(&b,
                 "# HELP vortex_engine_requests_total Requests submitted to the engine.\n"
                 "# TYPE vortex_engine_requests_total counter\n"
                 "vortex_engine_requests_total %llu\n"
                 "# HELP vortex_engine_prompt_tokens_total Prompt tokens evaluated (recomputed ones included, "
                 "prefix-cache hits not).\n"
                 "# TYPE vortex_engine_prompt_tokens_total counter\n"
                 "vortex_engine_prompt_tokens_total %llu\n"
                 "# HELP vortex_engine_prompt_tokens_cached_total Prompt tokens served from the prefix cache.\n"
                 "# TYPE vortex_engine_prompt_tokens_cached_total counter\n"
                 "vortex_engine_prompt_tokens_cached_total %llu\n"
                 "# HELP vortex_engine_generated_tokens_total Tokens sampled by the engine.\n"
                 "# TYPE vortex_engine_generated_tokens_total counter\n"
                 "vortex_engine_generated_tokens_total %llu\n",
                 (unsigned long long)st.requests_total, (unsigned long long)st.tokens_prompt,
                 (unsigned long long)st.tokens_prompt_cached, (unsigned long long)st.tokens_generated);
    vx_sbuf_addf(&b,
                 "# HELP vortex_prefix_cache_hit_ratio Share of looked-up KV blocks found in the prefix cache.\n"
                 "# TYPE vortex_prefix_cache_hit_ratio gauge\n"
                 "vortex_prefix_cache_hit_ratio %.6f\n"
                 "# HELP vortex_generation_tokens_per_second Generated tokens per second of engine busy time.\n"
                 "# TYPE vortex_generation_tokens_per_second gauge\n"
                 "vortex_generation_tokens_per_second %.3f\n"
                 "# HELP vortex_prefix_cache_lookups_total KV blocks looked up in the prefix cache.\n"
                 "# TYPE vortex_prefix_cache_lookups_total counter\n"
                 "vortex_prefix_cache_lookups_total %llu\n"
                 "# HELP vortex_prefix_cache_hits_total KV blocks reused from the prefix cache.\n"
                 "# TYPE vortex_prefix_cache_hits_total counter\n"
                 "vortex_prefix_cache_hits_total %llu\n"
                 "# HELP vortex_preemptions_total Sequences preempted for lack of KV blocks.\n"
                 "# TYPE vortex_preemptions_total counter\n"
                 "vortex_preemptions_total %llu\n"
                 "# HELP vortex_engine_steps_total Forward passes.\n"
                 "# TYPE vortex_engine_steps_total counter\n"
                 "vortex_engine_steps_total %llu\n"
                 "# HELP vortex_engine_busy_seconds_total Time spent in forward passes.\n"
                 "# TYPE vortex_engine_busy_seconds_total counter\n"
                 "vortex_engine_busy_seconds_total %.6f\n"
                 "# HELP vortex_draft_tokens_total Speculative decoding: drafted tokens verified.\n"
                 "# TYPE vortex_draft_tokens_total counter\n"
                 "vortex_draft_tokens_total %llu\n"
                 "# HELP vortex_draft_tokens_accepted_total Drafted tokens the sampler drew.\n"
                 "# TYPE vortex_draft_tokens_accepted_total counter\n"
                 "vortex_draft_tokens_accepted_total %llu\n",
                 hit, tps, (unsigned long long)st.prefix_lookups, (unsigned long long)st.prefix_hits,
                 (unsigned long long)st.preemptions, (unsigned long long)st.steps, st.busy_seconds,
                 (unsigned long long)st.draft_tokens, (unsigned long long)st.draft_accepted);
    return vx_sbuf_take(&b);
}
