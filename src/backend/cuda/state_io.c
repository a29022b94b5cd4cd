/* state_io.c — a CUDA session state to and from a snapshot stream (the
 * payload "cuda-bf16-1" of backend.h), through two pinned host staging
 * buffers of IO_STAGE bytes that the backend keeps once allocated.
 *
 * Saving, the device copies chunk k+1 into one buffer while the sink
 * (the snapshot's hash, then a memcpy into a RAM image or a file write)
 * takes chunk k from the other; loading, the source fills one buffer while
 * the other's chunk uploads.  A chunk packs consecutive device buffers up
 * to IO_STAGE bytes (a DeltaNet layer's conv windows are a few hundred KB).
 * The pageable buffer with a synchronous cudaMemcpy per chunk that this
 * replaced ran copy and sink one after the other, at pageable-copy speed.
 *
 * Every copy is on the backend's stream, after the state's last forward,
 * and none outlives the call: whatever fails, the stream is synchronised
 * before returning (the caller resets a state whose load failed).  The
 * buffers are the backend's, like its stream: one thread at a time. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

#define IO_STAGE ((size_t)8 << 20)

/* Device buffer j of the payload in order (0: the control block; then K
 * and V of each attention layer; then the conv windows and the recurrent
 * matrices of each DeltaNet layer): *dev and *n; 0 past the last one. */
static int buffer_at(const lilac_backend *b, const lilac_state *s, int pos, int j, unsigned char **dev, size_t *n) {
    const lilac_config *c = &b->m->cfg;
    const int na = c->n_attn_layers, nl = c->n_lin_layers;
    if (j == 0) {
        *dev = (unsigned char *)s->ctrl, *n = sizeof(lc_ctrl);
        return 1;
    }
    j -= 1;
    if (j < 2 * na) {
        *dev = (unsigned char *)(j % 2 ? s->vc[j / 2] : s->kc[j / 2]);
        *n = (size_t)pos * c->n_kv_heads * c->head_dim * 2;
        return 1;
    }
    j -= 2 * na;
    if (j < 2 * nl) {
        *dev = (unsigned char *)(j % 2 ? s->rec[j / 2] : s->conv[j / 2]);
        *n = j % 2 ? (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * 4
                   : 2 * (size_t)(c->conv_kernel - 1) * c->conv_dim * 4;
        return 1;
    }
    return 0;
}

typedef struct {
    int j;      /* the buffer */
    size_t off; /* bytes of it done */
} cursor;

/* The next chunk from c: up to IO_STAGE bytes of the buffers, in order.
 * With host, its copies are queued (kind: to or from host) on the stream;
 * without, nothing is copied (the chunk's size).  c advances; the chunk's
 * bytes are returned (0 at the end, or when a copy could not be queued:
 * then *err says why). */
static size_t chunk(const lilac_backend *b, const lilac_state *s, int pos, cursor *c, unsigned char *host,
                    enum cudaMemcpyKind kind, cudaError_t *err) {
    size_t k = 0, n;
    unsigned char *dev;
    while (k < IO_STAGE && buffer_at(b, s, pos, c->j, &dev, &n)) {
        const size_t t = n - c->off < IO_STAGE - k ? n - c->off : IO_STAGE - k;
        if (host && t) {
            cudaError_t r = kind == cudaMemcpyDeviceToHost ? cudaMemcpyAsync(host + k, dev + c->off, t, kind, b->st)
                                                           : cudaMemcpyAsync(dev + c->off, host + k, t, kind, b->st);
            if (r != cudaSuccess) {
                *err = r;
                return 0;
            }
        }
        k += t, c->off += t;
        if (c->off == n) c->j++, c->off = 0;
    }
    return k;
}

/* The staging buffers and their events, made on first use: pinned, or
 * pageable when pinned memory is refused (then the copies are synchronous,
 * as before, but saves and loads still work). */
static lilac_status stage_ready(lilac_backend *b, lilac_error *e) {
    for (int i = 0; i < 2; i++) {
        if (!b->io_ev[i] && cudaEventCreateWithFlags(&b->io_ev[i], cudaEventDisableTiming) != cudaSuccess) {
            b->io_ev[i] = NULL;
            return lilac_fail(e, LILAC_EBACKEND, "CUDA: state save/load: cannot create an event");
        }
        if (b->io_stage[i]) continue;
        if (cudaMallocHost((void **)&b->io_stage[i], IO_STAGE) == cudaSuccess) {
            b->io_pinned[i] = 1;
            continue;
        }
        cudaGetLastError();
        b->io_stage[i] = malloc(IO_STAGE), b->io_pinned[i] = 0;
        if (!b->io_stage[i])
            return lilac_fail(e, LILAC_ENOMEM, "state save/load: %zu MiB of staging", 2 * IO_STAGE >> 20);
    }
    return LILAC_OK;
}

void cuda_state_io_free(lilac_backend *b) {
    for (int i = 0; i < 2; i++) {
        if (b->io_stage[i]) {
            if (b->io_pinned[i]) cudaFreeHost(b->io_stage[i]);
            else free(b->io_stage[i]);
        }
        if (b->io_ev[i]) cudaEventDestroy(b->io_ev[i]);
        b->io_stage[i] = NULL, b->io_ev[i] = NULL;
    }
}

/* Waits for every copy queued; the first error of err (the call's) and the wait's. */
static cudaError_t drain(lilac_backend *b, cudaError_t err) {
    cudaError_t w = cudaStreamSynchronize(b->st);
    return err != cudaSuccess ? err : w;
}

static lilac_status cuda_fail(cudaError_t err, const char *what, lilac_error *e) {
    return lilac_fail(e, LILAC_EBACKEND, "CUDA: state %s: %s", what, cudaGetErrorString(err));
}

lilac_status cuda_state_save_io(lilac_backend *b, const lilac_state *s, lilac_write_fn w, void *ctx, lilac_error *e) {
    lilac_status st = stage_ready(b, e);
    if (st) return st;
    const int pos = s->pos;
    cursor c = {0, 0};
    cudaError_t err = cudaSuccess;
    size_t len[2];
    len[0] = chunk(b, s, pos, &c, b->io_stage[0], cudaMemcpyDeviceToHost, &err);
    if (len[0] && err == cudaSuccess) err = cudaEventRecord(b->io_ev[0], b->st);
    for (int k = 0; err == cudaSuccess && !st && len[k & 1]; k++) {
        const int cur = k & 1, nxt = cur ^ 1; /* the sink is done with nxt (chunk k - 1) */
        len[nxt] = chunk(b, s, pos, &c, b->io_stage[nxt], cudaMemcpyDeviceToHost, &err);
        if (len[nxt] && err == cudaSuccess) err = cudaEventRecord(b->io_ev[nxt], b->st);
        if (err == cudaSuccess) err = cudaEventSynchronize(b->io_ev[cur]);
        if (err == cudaSuccess) st = w(ctx, b->io_stage[cur], len[cur], e);
    }
    err = drain(b, err);
    if (st) return st;
    return err == cudaSuccess ? LILAC_OK : cuda_fail(err, "save", e);
}

lilac_status cuda_state_load_io(lilac_backend *b, lilac_state *s, int pos, lilac_read_fn r, void *ctx, lilac_error *e) {
    lilac_status st = stage_ready(b, e);
    if (st) return st;
    /* the control block first: it must agree with the header's position */
    if ((st = r(ctx, s->host_ctrl, sizeof(lc_ctrl), e))) return st;
    if (s->host_ctrl->pos != pos)
        return lilac_fail(e, LILAC_EFORMAT, "state load: the control block says position %d, not %d", s->host_ctrl->pos,
                          pos);
    cudaError_t err = cudaMemcpyAsync(s->ctrl, s->host_ctrl, sizeof(lc_ctrl), cudaMemcpyHostToDevice, b->st);
    cursor c = {1, 0};
    for (int k = 0; err == cudaSuccess && !st; k++) {
        const int cur = k & 1;
        cursor next = c;
        const size_t len = chunk(b, s, pos, &next, NULL, cudaMemcpyHostToDevice, &err);
        if (!len) break;
        if (k >= 2 && (err = cudaEventSynchronize(b->io_ev[cur])) != cudaSuccess) break; /* chunk k - 2 is uploaded */
        if ((st = r(ctx, b->io_stage[cur], len, e))) break;
        chunk(b, s, pos, &c, b->io_stage[cur], cudaMemcpyHostToDevice, &err);
        if (err == cudaSuccess) err = cudaEventRecord(b->io_ev[cur], b->st);
    }
    err = drain(b, err);
    if (st) return st;
    return err == cudaSuccess ? LILAC_OK : cuda_fail(err, "load", e);
}
