/*
 * threadpool.h - persistent worker threads. vx_pool_run() runs one task on
 * all threads (the caller is thread 0); inside it, kernels split work by
 * (ith, nth) and meet at vx_pool_barrier(). Workers spin briefly between
 * tasks (a decode step runs hundreds of ops) and then sleep.
 */
#ifndef VX_THREADPOOL_H
#define VX_THREADPOOL_H

#include <stdatomic.h>

#include "vortex.h"

typedef struct vx_pool vx_pool;
typedef void (*vx_task_fn)(void *arg, int ith, int nth);

vx_status vx_pool_init(int n_threads, vx_pool **out);
void vx_pool_free(vx_pool *pool);
int vx_pool_n_threads(const vx_pool *pool);
/* Runs fn(arg, ith, nth) on every thread and returns when all are done. */
void vx_pool_run(vx_pool *pool, vx_task_fn fn, void *arg);
/* Waits until every thread of the running task has arrived. */
void vx_pool_barrier(vx_pool *pool);

/* Splits [0, n) into nth nearly equal ranges, aligned to `align` items. */
static inline void vx_split(int64_t n, int ith, int nth, int64_t align, int64_t *lo, int64_t *hi) {
    int64_t chunks = (n + align - 1) / align;
    int64_t per = chunks / nth, rem = chunks % nth;
    int64_t c0 = ith * per + (ith < rem ? ith : rem);
    int64_t c1 = c0 + per + (ith < rem ? 1 : 0);
    *lo = c0 * align < n ? c0 * align : n;
    *hi = c1 * align < n ? c1 * align : n;
}

/* Number of online CPUs. */
int vx_n_cpus(void);

#endif
