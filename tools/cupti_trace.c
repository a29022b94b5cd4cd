/* cupti_trace.c — a kernel trace of any CUDA program, graph nodes included,
 * without Nsight Systems (the lent GPU machine has nsys's recorder but no
 * importer, so it cannot write a report).  Built as a shared library and
 * loaded by the CUDA driver through its injection hook:
 *
 *   CUDA_INJECTION64_PATH=$PWD/libcupti_trace.so CUPTI_TRACE_OUT=trace.csv ./lilac bench ...
 *
 * It enables CUPTI's concurrent-kernel activity (kernels keep overlapping:
 * programmatic dependent launch still lets a kernel start while its
 * predecessor drains) and writes one CSV row per kernel at exit, in the
 * columns of `nsys stats --report cuda_gpu_trace --format csv` that
 * tools/graph_trace.py reads ("Start (ns)", "Duration (ns)", "Name"), plus
 * the grid and the graph node.  Tooling only: never linked into lilac.
 *
 * Build: sh tools/build_cupti_trace.sh libcupti_trace.so (bench/kernels/run_session.sh
 * cupti does it on the GPU machine). */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUF = 8 << 20 };

static FILE *out;
static unsigned long long dropped_total;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUF);
    *size = *buffer ? BUF : 0;
    *max_records = 0;
}

/* Kernel names hold commas (template arguments): quoted as CSV. */
static void put_name(const char *s) {
    fputc('"', out);
    for (; s && *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (out && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue; /* the only kind enabled */
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        fprintf(out, "%llu,%llu,%d,%d,%d,%d,%llu,", (unsigned long long)k->start,
                (unsigned long long)(k->end - k->start), k->gridX, k->gridY, k->gridZ, k->blockX,
                (unsigned long long)k->graphNodeId);
        put_name(k->name);
        fputc('\n', out);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) dropped_total += dropped;
    free(buffer);
}

static void finish(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (!out) return;
    fclose(out);
    out = NULL;
    if (dropped_total) fprintf(stderr, "cupti_trace: %llu records dropped\n", dropped_total);
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void) {
    const char *path = getenv("CUPTI_TRACE_OUT");
    out = fopen(path ? path : "cupti_trace.csv", "w");
    if (!out) {
        perror("cupti_trace: output");
        return 0;
    }
    fprintf(out, "Start (ns),Duration (ns),GrdX,GrdY,GrdZ,BlkX,Graph node,Name\n");
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_trace: CUPTI refused the kernel activity\n");
        fclose(out);
        out = NULL;
        return 0;
    }
    atexit(finish);
    return 1;
}
