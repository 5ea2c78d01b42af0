/*
 * server_metrics.h - GET /metrics of `vx serve`: the HTTP layer's and the
 * engine's counters in Prometheus' text format, as a pure function of a
 * snapshot (the server takes it under its lock).
 */
#ifndef VX_SERVER_METRICS_H
#define VX_SERVER_METRICS_H

#include <stdint.h>

#include "engine.h"

typedef struct vx_http_counters {
    const uint64_t *status_count; /* requests answered, by status code [n_status] */
    int n_status;
    uint64_t aborted, tokens_prompt, tokens_generated, header_timeouts, body_timeouts;
    int in_flight; /* generation and embedding requests being served */
} vx_http_counters;

/* The metrics text (malloc'd; NULL when memory runs out). */
char *vx_server_metrics_text(const vx_http_counters *h, const vx_engine_stats *e);

#endif
