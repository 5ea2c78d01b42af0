/*
 * model_repack.c - load-time weight layouts: every matmul weight whose type
 * has an 8-row packed form (quant.h: Q4_K, Q6_K, Q4_0, Q5_0, Q8_0) gets a packed copy in one
 * anonymous mapping (transparent huge pages where the kernel allows), which
 * the matmul kernels read instead of the file's layout. The packed records
 * keep the plain layout's canonical order, so outputs do not change (bit
 * for bit); what changes is the work per weight byte: no transposes at run
 * time, one read stream per 8 rows.
 *
 * The token embedding keeps the file layout (row lookups); with tied
 * embeddings the output matrix gets a packed copy of its own. The file's
 * pages of the other packed weights are released: they are clean mapped
 * pages, re-read from the file should anything touch them again (the f32
 * reference path, vx_context_params.f32_matmul, does). Not for weights in
 * heap memory (loaded without mmap, or copied by a Hugging Face import),
 * where releasing would zero them.
 *
 * F16 and BF16 weights of a file mapping are copied as they are into the
 * same mapping (copyable: for its huge pages), the file's pages released.
 *
 * Only the SIMD kernels have a GEMM on the packed layouts (forward.c, mm);
 * with the generic kernels forced (VX_FORCE_GENERIC) nothing is packed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "model.h"
#include "ops.h"
#include "threadpool.h"

#define WEIGHTS_PER_LAYER 14

/* Bytes of a weight's packed copy (all ne[2] matrices), 64-byte rounded. */
static size_t packed_bytes(const vx_weight *w) {
    return (w->pmat_size * (size_t)w->ne[2] + 63) & ~(size_t)63;
}

static bool packable(const vx_weight *w) {
    return w->data && vx_repack_type(w->type) >= 0 && w->ne[1] % 8 == 0 &&
           vx_repack_row_size(vx_repack_type(w->type), w->ne[0]) > 0 &&
           (w->type != VX_TYPE_MXFP4 || vx_mxfp4_packable(w->data, w->ne[0] / 32 * w->ne[1] * w->ne[2]));
}

/* F16 / BF16 weights of a file mapping get a copy in the same layout:
 * the AMX GEMM's panel builds read 16 rows at a time, a page apart, and
 * from the file's 4 KiB pages they took ~8% longer than from huge pages
 * (one thread, K 2048: 13.0 vs 12.0 ms for F16, 5.8 vs 5.5 for BF16). */
static bool copyable(const vx_model *m, const vx_weight *w) {
    return w->data && (w->type == VX_TYPE_F16 || w->type == VX_TYPE_BF16) && !m->file_buf && !m->imported;
}

/* The matmul weights of this process's layers (and the output head, which
 * the process with the first layer runs), at most 1 + n_layer *
 * WEIGHTS_PER_LAYER. */
static int list_weights(vx_model *m, vx_weight **out) {
    int n = 0;
    if (m->l0 == 0) out[n++] = &m->output;
    for (int il = m->l0; il < m->l1; il++) {
        vx_layer *l = &m->layers[il];
        vx_weight *ws[WEIGHTS_PER_LAYER] = {&l->wq,       &l->wk,     &l->wv,       &l->wqkv,
                                             &l->wo,       &l->ffn_gate, &l->ffn_up, &l->ffn_down,
                                             &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
                                             &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp};
        for (int i = 0; i < WEIGHTS_PER_LAYER; i++) out[n++] = ws[i];
    }
    return n;
}

typedef struct {
    vx_weight **w;
    int n, ith, nth;
} pack_job;

static void *pack_worker(void *arg) {
    const pack_job *j = arg;
    for (int i = 0; i < j->n; i++) {
        vx_weight *w = j->w[i];
        const int64_t rows = w->ne[1] * w->ne[2];
        int64_t r0, r1; /* this thread's groups of 8 rows */
        vx_split(rows, j->ith, j->nth, 8, &r0, &r1);
        if (r0 < r1 && w->ptype == w->type) /* a copy */
            memcpy((uint8_t *)(uintptr_t)w->pdata + (size_t)r0 * w->row_size,
                   (const uint8_t *)w->data + (size_t)r0 * w->row_size, (size_t)(r1 - r0) * w->row_size);
        else if (r0 < r1)
            vx_repack_rows(w->type, (const uint8_t *)w->data + (size_t)r0 * w->row_size, w->row_size, r1 - r0,
                           w->ne[0], (uint8_t *)(uintptr_t)w->pdata + (size_t)r0 * w->prow_size);
    }
    return NULL;
}

/* Releases the whole pages inside [p, p + n) of a file mapping. */
static void release_pages(const void *p, size_t n) {
    const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + ps - 1) & ~(ps - 1), b = ((uintptr_t)p + n) & ~(ps - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

vx_status vx_model_repack(vx_model *m, char *err, size_t err_size) {
    if (m->pack_buf || vx_cpu_best_isa() < VX_ISA_AVX2) return VX_OK;
    vx_weight **ws = malloc(sizeof *ws * (size_t)(1 + m->hp.n_layer * WEIGHTS_PER_LAYER));
    if (!ws) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    const int nall = list_weights(m, ws);
    int n = 0;
    size_t total = 0;
    void *buf = MAP_FAILED;
    /* the copies are only for speed: without the memory for them, the
     * packed layouts alone (which the fast kernels need) */
    for (int with_copies = 1; with_copies >= 0 && buf == MAP_FAILED; with_copies--) {
        n = 0, total = 0;
        for (int i = 0; i < nall; i++) {
            vx_weight *w = ws[i];
            const bool copy = with_copies && copyable(m, w);
            if (!copy && !packable(w)) { /* as loaded (a first pass may have set them) */
                w->ptype = 0, w->prow_size = w->pmat_size = 0;
                continue;
            }
            w->ptype = copy ? (int)w->type : vx_repack_type(w->type);
            w->prow_size = copy ? w->row_size : vx_repack_row_size(w->ptype, w->ne[0]);
            w->pmat_size = w->prow_size * (size_t)w->ne[1];
            total += packed_bytes(w);
            ws[n++] = w;
        }
        if (n == 0) {
            free(ws);
            return VX_OK;
        }
        buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (buf == MAP_FAILED) {
        free(ws);
        return vx_seterr(err, err_size, VX_ENOMEM, "cannot allocate %zu MiB for packed weights", total >> 20);
    }
#ifdef MADV_HUGEPAGE
    madvise(buf, total, MADV_HUGEPAGE); /* fewer TLB misses while streaming */
#endif
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        ws[i]->pdata = (uint8_t *)buf + off;
        off += packed_bytes(ws[i]);
    }
    /* every thread packs its share of each weight's rows */
    int nth = vx_n_cpus();
    if (nth > 16) nth = 16;
    pack_job jobs[16];
    pthread_t tids[16];
    int started = 0;
    for (int t = 0; t < nth; t++) {
        jobs[t] = (pack_job){ws, n, t, nth};
        if (t > 0 && pthread_create(&tids[t], NULL, pack_worker, &jobs[t]) == 0) started |= 1 << t;
    }
    pack_worker(&jobs[0]);
    for (int t = 1; t < nth; t++) {
        if (started & (1 << t)) pthread_join(tids[t], NULL);
        else pack_worker(&jobs[t]); /* no thread: do its share here */
    }
    mprotect(buf, total, PROT_READ);
    /* only file mappings: on heap memory (no mmap, or an imported model's
     * copies) MADV_DONTNEED zero-fills, and the f32 reference path read
     * zeros there afterwards */
    if (!m->file_buf && !m->imported)
        for (int i = 0; i < n; i++)
            if (ws[i]->data != m->tok_embd.data)
                release_pages(ws[i]->data, ws[i]->mat_size * (size_t)ws[i]->ne[2]);
    m->pack_buf = buf;
    m->pack_size = total;
    m->n_packed = n;
    free(ws);
    return VX_OK;
}
