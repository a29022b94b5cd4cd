/* cuda_backend.c — the CUDA backend's lifecycle: device checks, the one-time
 * weight upload (or on-device generation of synthetic weights), scratch,
 * and session states (KV cache, DeltaNet state, control block).
 *
 * Supported: MLX affine checkpoints (4/8-bit, group 64) whose dimensions
 * have kernels (cuda_ops.h); anything else is refused at load with the
 * reason, never run on a slow fallback. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "util/bf16.h"

/* Whether the NVIDIA driver's library is installed at all: the static CUDA
 * runtime reports a missing driver as "insufficient", like an old one. */
static int driver_installed(void) {
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return 0;
    dlclose(h);
    return 1;
}

int lilac_cuda_available(char *why, size_t cap) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaErrorInsufficientDriver && !driver_installed()) {
        snprintf(why, cap, "no NVIDIA driver found (libcuda.so.1 is not installed)");
        return 0;
    }
    if (err == cudaErrorInsufficientDriver) {
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        snprintf(why, cap, "the NVIDIA driver (CUDA %d.%d) is older than this build's CUDA runtime (%d.%d)", drv / 1000,
                 (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
        return 0;
    }
    if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
        snprintf(why, cap, "no CUDA device found (the NVIDIA driver is installed)");
        return 0;
    }
    if (err != cudaSuccess) {
        snprintf(why, cap, "no usable CUDA device (%s)", cudaGetErrorString(err));
        return 0;
    }
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major < 8) {
        snprintf(why, cap, "the GPU has compute capability %d.%d; lilac needs 8.0 or newer", p.major, p.minor);
        return 0;
    }
    return 1;
}

void lilac_cuda_describe(char *out, size_t cap) {
    struct cudaDeviceProp p;
    int drv = 0, n = 0;
    cudaGetDeviceCount(&n);
    cudaDriverGetVersion(&drv);
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        snprintf(out, cap, "unknown");
        return;
    }
    snprintf(out, cap, "%.200s (compute %d.%d, %d SMs, %.0f GiB; %d device%s; CUDA driver %d.%d)", p.name, p.major, p.minor,
             p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, n, n == 1 ? "" : "s", drv / 1000, (drv % 1000) / 10);
}

static void *dalloc(lilac_backend *b, size_t n, lilac_error *e) {
    void *p = NULL;
    if (b->nallocs == b->capallocs) {
        int cap = b->capallocs ? 2 * b->capallocs : 256;
        void **na = realloc(b->allocs, (size_t)cap * sizeof *na);
        if (!na) {
            lilac_fail(e, LILAC_ENOMEM, "allocation table");
            return NULL;
        }
        b->allocs = na;
        b->capallocs = cap;
    }
    cudaError_t err = cudaMalloc(&p, n ? n : 16);
    if (err != cudaSuccess) {
        lilac_fail(e, LILAC_ENOMEM, "cudaMalloc of %zu bytes failed: %s (%.1f GiB allocated so far)", n,
                   cudaGetErrorString(err), b->device_bytes / 1073741824.0);
        return NULL;
    }
    b->allocs[b->nallocs++] = p;
    b->device_bytes += n;
    return p;
}

static lilac_status upload(void *dst, const void *src, size_t n, lilac_error *e) {
    LC_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    return LILAC_OK;
}

static float *upload_f32(lilac_backend *b, const float *src, size_t n, lilac_error *e) {
    float *d = dalloc(b, n * sizeof(float), e);
    if (d && upload(d, src, n * sizeof(float), e)) return NULL;
    return d;
}

static uint64_t seed_counter = 1;

/* Matrices parts[0..np) fused by rows into one lc_qmat (same type, columns
 * and stacking). */
static lilac_status fused(lilac_backend *b, const lilac_matrix *const *parts, int np, lc_qmat *out, lilac_error *e) {
    const lilac_matrix *p0 = parts[0];
    int rows = 0;
    for (int i = 0; i < np; i++) {
        const lilac_matrix *p = parts[i];
        if (p->type != LILAC_MAT_Q4 && p->type != LILAC_MAT_Q8)
            return lilac_fail(e, LILAC_EUNSUPPORTED,
                              "the CUDA backend runs MLX 4-bit checkpoints (mlx-community/Qwen3.6-35B-A3B-4bit); "
                              "this model has unquantised (bf16/f32) matrices");
        if (p->group != LC_GROUP || p->type != p0->type || p->cols != p0->cols || p->n_mat != p0->n_mat ||
            (np > 1 && p->n_mat != 1))
            return lilac_fail(e, LILAC_EUNSUPPORTED, "CUDA: cannot fuse matrices of different formats (group %d, %d bits)",
                              p->group, p->type == LILAC_MAT_Q4 ? 4 : 8);
        rows += p->rows;
    }
    const int bits = p0->type == LILAC_MAT_Q4 ? 4 : 8;
    const size_t wpr = (size_t)p0->cols * bits / 32, gpr = (size_t)p0->cols / LC_GROUP, nm = (size_t)p0->n_mat;
    uint32_t *w = dalloc(b, nm * rows * wpr * 4, e);
    uint16_t *s = w ? dalloc(b, nm * rows * gpr * 2, e) : NULL, *bb = s ? dalloc(b, nm * rows * gpr * 2, e) : NULL;
    if (!bb) return e->code;
    if (b->m->synthetic) {
        /* zero-mean weights of standard deviation ~0.02: w = s*q + b with q uniform */
        const float s0 = bits == 4 ? 0.02f / 4.6f : 0.02f / 73.9f, mid = bits == 4 ? 7.5f : 127.5f;
        LC_CHECK(lc_fill_u32(w, nm * rows * wpr, seed_counter++, b->st));
        LC_CHECK(lc_fill_bf16(s, nm * rows * gpr, seed_counter++, 0.9f * s0, 1.1f * s0, b->st));
        LC_CHECK(lc_fill_bf16(bb, nm * rows * gpr, seed_counter++, -mid * 1.1f * s0, -mid * 0.9f * s0, b->st));
    } else {
        size_t ro = 0;
        for (int i = 0; i < np; i++) {
            const lilac_matrix *p = parts[i];
            const size_t r = (size_t)p->rows * nm; /* stacked experts are contiguous [E][rows] */
            lilac_status st;
            if ((st = upload(w + ro * wpr, p->w, r * wpr * 4, e)) || (st = upload(s + ro * gpr, p->scales, r * gpr * 2, e)) ||
                (st = upload(bb + ro * gpr, p->biases, r * gpr * 2, e)))
                return st;
            ro += r;
            b->uploaded += r * (wpr * 4 + gpr * 4);
            if (b->progress) b->progress(b->progress_ctx, "uploading to the GPU", b->uploaded, b->m->weight_bytes);
        }
    }
    *out = (lc_qmat){w, s, bb, rows, p0->cols, bits, p0->n_mat};
    return LILAC_OK;
}

static lilac_status one(lilac_backend *b, const lilac_matrix *m, lc_qmat *out, lilac_error *e) {
    return fused(b, &m, 1, out, e);
}

static lilac_status need_gemv(const lc_qmat *m, const char *what, lilac_error *e) {
    if (lc_gemv_supported(m->bits, m->cols) && lc_qgemm_supported(m)) return LILAC_OK;
    return lilac_fail(e, LILAC_EUNSUPPORTED, "CUDA: no kernel for %s with %d inputs at %d bits", what, m->cols, m->bits);
}

static lilac_status check_shapes(const lilac_config *c, lilac_error *e) {
    if (c->n_heads != 8 * c->n_kv_heads)
        return lilac_fail(e, LILAC_EUNSUPPORTED, "CUDA: attention kernels need 8 query heads per kv head (have %d/%d)",
                          c->n_heads, c->n_kv_heads);
    if (c->head_dim != 32 && c->head_dim != 64 && c->head_dim != 128 && c->head_dim != 256)
        return lilac_fail(e, LILAC_EUNSUPPORTED, "CUDA: no attention kernel for head_dim %d", c->head_dim);
    if ((c->lin_k_dim != 32 && c->lin_k_dim != 64 && c->lin_k_dim != 128) || c->lin_v_dim % 32 ||
        c->lin_v_dim * (c->lin_k_dim / 32) > 512 || 2 * c->lin_k_dim + c->lin_v_dim > 512)
        return lilac_fail(e, LILAC_EUNSUPPORTED, "CUDA: no DeltaNet kernel for head dims %d/%d", c->lin_k_dim, c->lin_v_dim);
    if (c->conv_kernel < 2 || c->conv_kernel > 4)
        return lilac_fail(e, LILAC_EUNSUPPORTED, "CUDA: no conv kernel for %d taps", c->conv_kernel);
    if (c->shared_inter != c->moe_inter || c->n_experts > 1024 || c->n_experts_per_tok != 8)
        return lilac_fail(e, LILAC_EUNSUPPORTED,
                          "CUDA: MoE kernels need 8 experts per token, at most 1024 experts and equal shared/routed sizes");
    return LILAC_OK;
}

static lilac_status upload_layer(lilac_backend *b, int l, lilac_error *e) {
    const lilac_model *m = b->m;
    const lilac_config *c = &m->cfg;
    const lilac_layer *ly = &m->layers[l];
    cuda_layer *cl = &b->layers[l];
    const int D = c->hidden;
    lilac_status st;
    cl->is_attn = ly->is_attn;
    if (!(cl->input_norm = upload_f32(b, ly->input_norm, (size_t)D, e)) || !(cl->post_norm = upload_f32(b, ly->post_norm, (size_t)D, e)))
        return e->code;
    if (ly->is_attn) {
        const lilac_matrix *qkv[] = {&ly->q_proj, &ly->k_proj, &ly->v_proj};
        if ((st = fused(b, qkv, 3, &cl->in_proj, e)) || (st = one(b, &ly->o_proj, &cl->out_proj, e))) return st;
        if (!(cl->q_norm = upload_f32(b, ly->q_norm, (size_t)c->head_dim, e)) ||
            !(cl->k_norm = upload_f32(b, ly->k_norm, (size_t)c->head_dim, e)))
            return e->code;
        cl->attn = (lc_attn_params){c->n_heads, c->n_kv_heads, c->head_dim, c->rotary_dim, c->rms_eps,
                                    cl->q_norm, cl->k_norm, b->rope_inv, 0};
    } else {
        const lilac_matrix *in[] = {&ly->in_qkv, &ly->in_z, &ly->in_b, &ly->in_a};
        if ((st = fused(b, in, 4, &cl->in_proj, e)) || (st = one(b, &ly->out_proj, &cl->out_proj, e))) return st;
        cl->gdn = (lc_gdn_params){c->lin_k_heads, c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel, c->rms_eps,
                                  NULL, NULL, NULL, NULL};
        if (!(cl->gdn.conv_w = upload_f32(b, ly->conv_w, (size_t)c->conv_dim * c->conv_kernel, e)) ||
            !(cl->gdn.A_log = upload_f32(b, ly->A_log, (size_t)c->lin_v_heads, e)) ||
            !(cl->gdn.dt_bias = upload_f32(b, ly->dt_bias, (size_t)c->lin_v_heads, e)) ||
            !(cl->gdn.norm_w = upload_f32(b, ly->lin_norm, (size_t)c->lin_v_dim, e)))
            return e->code;
    }
    const lilac_matrix *router[] = {&ly->router, &ly->sh_gate_proj}, *sgu[] = {&ly->sh_gate, &ly->sh_up};
    if ((st = fused(b, router, 2, &cl->router, e)) || (st = one(b, &ly->exp_gate, &cl->gate, e)) ||
        (st = one(b, &ly->exp_up, &cl->up, e)) || (st = one(b, &ly->exp_down, &cl->down, e)) ||
        (st = fused(b, sgu, 2, &cl->sh_gu, e)) || (st = one(b, &ly->sh_down, &cl->sh_down, e)))
        return st;
    /* views of the fused shared gate|up */
    const int Is = c->shared_inter;
    cl->sh_gate = lc_qmat_rows(&cl->sh_gu, 0, Is);
    cl->sh_up = lc_qmat_rows(&cl->sh_gu, Is, Is);
    const lc_qmat *gv[] = {&cl->in_proj, &cl->out_proj, &cl->router, &cl->gate, &cl->down, &cl->sh_gu, &cl->sh_down};
    const char *names[] = {"the input projection", "the output projection", "the router", "the expert gate/up",
                           "the expert down projection", "the shared expert", "the shared expert's down projection"};
    for (int i = 0; i < 7; i++)
        if ((st = need_gemv(gv[i], names[i], e))) return st;
    return LILAC_OK;
}

static void cuda_close(lilac_backend *b) {
    if (!b) return;
    cudaSetDevice(b->device);
    if (b->st) cudaStreamSynchronize(b->st);
    if (b->st_copy) cudaStreamSynchronize(b->st_copy);
    for (int i = 0; i < b->nallocs; i++) cudaFree(b->allocs[i]);
    if (b->host_logits) cudaFreeHost(b->host_logits);
    if (b->host_ids) cudaFreeHost(b->host_ids);
    if (b->host_lp) cudaFreeHost(b->host_lp);
    if (b->pprof) {
        for (int i = 0; i < CUDA_PROF_MAX; i++)
            if (b->pprof->ev[i]) cudaEventDestroy(b->pprof->ev[i]);
        free(b->pprof);
    }
    free(b->host_seen);
    for (int i = 0; i < 2; i++)
        if (b->host_mask[i]) cudaFreeHost(b->host_mask[i]);
    if (b->ev_mask) cudaEventDestroy(b->ev_mask);
    if (b->ev_token) cudaEventDestroy(b->ev_token);
    cuda_state_io_free(b);
    if (b->st_copy) cudaStreamDestroy(b->st_copy);
    if (b->st) cudaStreamDestroy(b->st);
    free(b->allocs);
    free(b->layers);
    free(b);
}

#define ALLOC(ptr, n)                                                  \
    do {                                                               \
        if (!((ptr) = dalloc(b, (size_t)(n) * sizeof *(ptr), e))) goto fail; \
    } while (0)

/* Whether prefill runs the sm_90a fp16 GEMMs: an sm_90 GPU, not turned off
 * (LILAC_QGEMM=bf16 or mma), and every 4-bit matrix's scales in range
 * (lc_qgemm_h_check).  -1 when the check itself failed. */
static int use_f16(lilac_backend *b, int major, lilac_error *e) {
    const char *q = getenv("LILAC_QGEMM");
    if (major != 9 || (q && (strcmp(q, "bf16") == 0 || strcmp(q, "mma") == 0))) return 0;
    const lilac_config *c = &b->m->cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const cuda_layer *cl = &b->layers[l];
        const lc_qmat *ms[] = {&cl->in_proj, &cl->out_proj, &cl->gate, &cl->up, &cl->down, &cl->sh_gate, &cl->sh_up, &cl->sh_down};
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
            int ok = 1;
            if (lc_qgemm_h_supported(ms[i]) && lc_qgemm_h_check(ms[i], &ok, b->st) != cudaSuccess) {
                lilac_fail(e, LILAC_EBACKEND, "CUDA: checking the weights' scale range");
                return -1;
            }
            if (!ok && lc_qgemm_h_supported(ms[i])) return 0;
        }
    }
    return 1;
}

static lilac_status cuda_open(const lilac_model *m, const lilac_backend_opts *o, lilac_backend **out, lilac_error *e) {
    *out = NULL;
    const lilac_config *c = &m->cfg;
    lilac_status st = check_shapes(c, e);
    if (st) return st;
    lilac_backend *b = calloc(1, sizeof *b);
    if (!b) return lilac_fail(e, LILAC_ENOMEM, "CUDA backend");
    b->m = m;
    b->T = o->max_chunk > 0 ? o->max_chunk : 512;
    b->progress = m->synthetic ? NULL : o->progress;
    b->progress_ctx = o->progress_ctx;
    struct cudaDeviceProp prop;
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
        cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking) != cudaSuccess) {
        free(b);
        return lilac_fail(e, LILAC_EBACKEND, "CUDA: cannot initialise device 0");
    }
    /* decode attention: one block (of a kv head's key ranges) per SM */
    b->attn_splits = prop.multiProcessorCount / (c->n_kv_heads > 0 ? c->n_kv_heads : 1);
    if (b->attn_splits < 1) b->attn_splits = 1;
    const char *splits = getenv("LILAC_ATTN_SPLITS"); /* tests: force few ranges, so each block walks many chunks */
    if (splits && atoi(splits) > 0) b->attn_splits = atoi(splits);
    if (b->attn_splits > LC_NSPLIT) b->attn_splits = LC_NSPLIT;
    int drv = 0;
    cudaDriverGetVersion(&drv);
    snprintf(b->name, sizeof b->name, "%.255s (sm_%d%d, %d SMs, %.0f GiB, driver %d.%d)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, drv / 1000, (drv % 1000) / 10);
    b->layers = calloc((size_t)c->n_layers, sizeof *b->layers);
    if (!b->layers) {
        cuda_close(b);
        return lilac_fail(e, LILAC_ENOMEM, "CUDA layers");
    }
    /* weights */
    {
        float inv[512];
        for (int j = 0; j < c->rotary_dim / 2 && j < 512; j++)
            inv[j] = 1.0f / powf((float)c->rope_theta, (float)(2 * j) / (float)c->rotary_dim);
        if (!(b->rope_inv = upload_f32(b, inv, (size_t)c->rotary_dim / 2, e))) goto fail;
    }
    if ((st = one(b, &m->embed, &b->embed, e)) || (st = one(b, &m->lm_head, &b->lm_head, e)) ||
        (st = need_gemv(&b->lm_head, "the lm_head", e)))
        goto fail;
    if (!(b->final_norm = upload_f32(b, m->final_norm, (size_t)c->hidden, e))) goto fail;
    for (int l = 0; l < c->n_layers; l++)
        if ((st = upload_layer(b, l, e))) goto fail;

    /* scratch */
    {
        const int T = b->T, D = c->hidden, E = c->n_experts, K = c->n_experts_per_tok, I = c->moe_inter;
        const int Kd = c->lin_key_dim, Vd = c->lin_value_dim, Hv = c->lin_v_heads, H = c->n_heads, hd = c->head_dim;
        const int gdn_rows = 2 * Kd + 2 * Vd + 2 * Hv, attn_rows = H * 2 * hd + 2 * c->n_kv_heads * hd;
        b->ldp = ((gdn_rows > attn_rows ? gdn_rows : attn_rows) + 3) & ~3; /* rows stay 16-byte aligned */
        const size_t mixw = (size_t)(Vd > H * hd ? Vd : H * hd);
        /* LILAC_PREFILL=simt: the SIMT prefill kernels (A/B timing) and their buffers */
        const char *pf = getenv("LILAC_PREFILL");
        b->prefill_simt = pf && strcmp(pf, "simt") == 0;
        const int Ts = b->prefill_simt ? T : 1; /* rows of the SIMT-only buffers */
        /* prefill attention partials only where the SIMT attention runs */
        int simt_attn = b->prefill_simt;
        for (int l = 0; l < c->n_layers; l++)
            if (b->layers[l].is_attn && !lc_attn_prefill_supported(&b->layers[l].attn)) simt_attn = 1;
        const size_t part_prefill = simt_attn ? (size_t)T * c->n_kv_heads * 8 * (hd + 2) : 0,
                     part_decode = (size_t)c->n_kv_heads * LC_NSPLIT * 8 * (hd + 2);
        const size_t slots = (size_t)Ts * K > (size_t)K + 1 ? (size_t)Ts * K : (size_t)K + 1;
        ALLOC(b->ids, T);
        ALLOC(b->h, (size_t)T * D);
        ALLOC(b->xn, (size_t)T * D);
        ALLOC(b->proj, (size_t)T * b->ldp);
        ALLOC(b->mix, (size_t)T * mixw);
        ALLOC(b->qbuf, (size_t)T * H * hd);
        ALLOC(b->part, part_prefill > part_decode ? part_prefill : part_decode);
        ALLOC(b->rl, (size_t)T * (E + 1));
        ALLOC(b->topi, (size_t)T * K);
        ALLOC(b->topw, (size_t)T * K);
        ALLOC(b->sgate, T);
        ALLOC(b->act, slots * I);
        ALLOC(b->eo, (size_t)(T * K + T) * D);
        ALLOC(b->sgu, (size_t)Ts * 2 * I);
        ALLOC(b->sact, (size_t)Ts * I);
        ALLOC(b->sout, (size_t)Ts * D);
        ALLOC(b->sort.count, E);
        ALLOC(b->sort.offset, E + 1);
        ALLOC(b->sort.cursor, E);
        ALLOC(b->sort.slot_tok, (size_t)Ts * K);
        ALLOC(b->sort.slot_of, (size_t)Ts * K);
        ALLOC(b->sort.tiles, (size_t)Ts * K / 16 + E + 1);
        ALLOC(b->sort.ntiles, 1);
        /* the tensor-core prefill: packed inputs, packed expert activations, routing */
        {
            int ldx = D > (int)mixw ? D : (int)mixw;
            ldx = (ldx + 63) / 64 * 64;
            const int ldi = (I + 63) / 64 * 64;
            const size_t xs = (size_t)(T > LC_LOGIT_ROWS ? T : LC_LOGIT_ROWS) * ldx, as = (size_t)(T * K + T) * ldi;
            b->xp.ld = ldx;
            b->ap.ld = ldi;
            ALLOC(b->xp.hi, xs);
            ALLOC(b->xp.lo, xs);
            ALLOC(b->xp.lo2, xs);
            ALLOC(b->xp.gs, xs / 64);
            ALLOC(b->ap.hi, as);
            ALLOC(b->ap.lo, as);
            ALLOC(b->ap.gs, as / 64);
            if ((b->f16 = use_f16(b, prop.major, e)) < 0) goto fail;
            if (b->f16) {
                /* the experts' fp16 input beside the router's bf16 one (sums shared),
                 * and the fp16 group-sum planes of each fp16 pack */
                const size_t xrows = xs / ldx, arows = as / ldi;
                b->xh = (lc_xpack){.ld = ldx, .gs = b->xp.gs, .f16 = 1, .xs = 1.0f};
                ALLOC(b->xh.hi, (size_t)T * ldx);
                ALLOC(b->xh.lo, (size_t)T * ldx);
                ALLOC(b->xh.sh, (size_t)T * 64);
                ALLOC(b->xh.sl, (size_t)T * 64);
                ALLOC(b->xp.sh, xrows * 64);
                ALLOC(b->xp.sl, xrows * 64);
                ALLOC(b->ap.sh, arows * 64);
                ALLOC(b->ap.sl, arows * 64);
                b->ap.f16 = 1;
                b->ap.xs = 1.0f / 16; /* SwiGLU outputs: fp16 overflows only past 2^20 */
            }
            ALLOC(b->route.count, E + 1);
            ALLOC(b->route.offset, E + 2);
            ALLOC(b->route.cursor, E + 1);
            ALLOC(b->route.slot_tok, (size_t)T * K + T);
            ALLOC(b->route.slot_of, (size_t)T * K);
            ALLOC(b->route.tiles, (size_t)T * K / LC_MOE_TILE + T / LC_MOE_TILE + E + 2);
            ALLOC(b->route.ntiles, 1);
            for (int l = 0; l < c->n_layers; l++)
                if (!b->layers[l].is_attn && lc_gdn_prefill_supported(&b->layers[l].gdn)) {
                    b->gdn_scratch_bytes = lc_gdn_prefill_scratch(&b->layers[l].gdn, T);
                    ALLOC(b->gdn_scratch, b->gdn_scratch_bytes / sizeof(float) + 4);
                    break;
                }
            if (!(b->pprof = calloc(1, sizeof *b->pprof))) {
                lilac_fail(e, LILAC_ENOMEM, "prefill profile");
                goto fail;
            }
            for (int i = 0; i < CUDA_PROF_MAX; i++)
                if (cudaEventCreate(&b->pprof->ev[i]) != cudaSuccess) {
                    lilac_fail(e, LILAC_EBACKEND, "CUDA: events for the prefill profile");
                    goto fail;
                }
        }
        ALLOC(b->logits, (size_t)LC_LOGIT_ROWS * c->vocab_size);
        ALLOC(b->amax_part, 1024);
        ALLOC(b->amax_done, 1);
        ALLOC(b->pick_key, 2);
        ALLOC(b->moe_done, 1);
        ALLOC(b->stop_ids, LC_MAX_STOP);
        ALLOC(b->mask, (c->vocab_size + 31) / 32);
        /* the sampler: one generation at a time per backend, so one set */
        void *samp = dalloc(b, lc_sampler_bytes(c->vocab_size), e);
        if (!samp) goto fail;
        lc_sampler_carve(samp, c->vocab_size, &b->samp);
        if (!(b->host_seen = malloc((size_t)c->vocab_size))) {
            lilac_fail(e, LILAC_ENOMEM, "sampler bitmap");
            goto fail;
        }
        if (cudaMemset(b->amax_done, 0, sizeof(unsigned)) != cudaSuccess ||
            cudaMemset(b->pick_key, 0, 2 * sizeof *b->pick_key) != cudaSuccess ||
            cudaMemset(b->moe_done, 0, sizeof(unsigned)) != cudaSuccess ||
            lc_sampler_clear(&b->samp, b->st) != cudaSuccess ||
            cudaMallocHost((void **)&b->host_logits, (size_t)LC_LOGIT_ROWS * c->vocab_size * sizeof(float)) != cudaSuccess ||
            cudaMallocHost((void **)&b->host_ids, (size_t)T * sizeof(int32_t)) != cudaSuccess ||
            cudaMallocHost((void **)&b->host_lp, LC_LP_RING * sizeof(lc_tokinfo)) != cudaSuccess ||
            cudaMallocHost((void **)&b->host_mask[0], (size_t)(c->vocab_size + 31) / 32 * 4) != cudaSuccess ||
            cudaMallocHost((void **)&b->host_mask[1], (size_t)(c->vocab_size + 31) / 32 * 4) != cudaSuccess) {
            lilac_fail(e, LILAC_ENOMEM, "CUDA pinned host buffers");
            goto fail;
        }
        if (cudaStreamCreateWithFlags(&b->st_copy, cudaStreamNonBlocking) != cudaSuccess ||
            cudaEventCreateWithFlags(&b->ev_mask, cudaEventDisableTiming) != cudaSuccess ||
            cudaEventCreateWithFlags(&b->ev_token, cudaEventDisableTiming) != cudaSuccess) {
            lilac_fail(e, LILAC_EBACKEND, "CUDA: the constrained decoding's stream and events");
            goto fail;
        }
    }
    /* the whole device, not b->st: upload() and the memsets above ran on the
     * legacy stream, which b->st (non-blocking) does not wait for, and a
     * pageable cudaMemcpy may return before its DMA has landed */
    if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) {
        lilac_fail(e, LILAC_EBACKEND, "CUDA: weight upload failed");
        goto fail;
    }
    *out = b;
    return LILAC_OK;
fail:
    st = e ? e->code : LILAC_EBACKEND;
    cuda_close(b);
    return st ? st : LILAC_EBACKEND;
}

static size_t cuda_state_bytes(const lilac_backend *b, int max_ctx) {
    const lilac_config *c = &b->m->cfg;
    size_t kv = 2 * (size_t)max_ctx * c->n_kv_heads * c->head_dim * 2;
    size_t lin = (2 * (size_t)(c->conv_kernel - 1) * c->conv_dim + (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim) * 4;
    return kv * c->n_attn_layers + lin * c->n_lin_layers + ((size_t)max_ctx + 1) * 4 + sizeof(lc_ctrl);
}

static void cuda_state_free(lilac_backend *b, lilac_state *s) {
    if (!s) return;
    const lilac_config *c = &b->m->cfg;
    cudaStreamSynchronize(b->st);
    for (int i = 0; s->kc && i < c->n_attn_layers; i++) cudaFree(s->kc[i]), cudaFree(s->vc[i]);
    for (int i = 0; s->conv && i < c->n_lin_layers; i++) cudaFree(s->conv[i]), cudaFree(s->rec[i]);
    if (s->graph) cudaGraphExecDestroy(s->graph);
    if (s->graph_feed) cudaGraphExecDestroy(s->graph_feed);
    if (s->graph_pick) cudaGraphExecDestroy(s->graph_pick);
    cudaFree(s->ctrl);
    cudaFree(s->out);
    if (s->host_out) cudaFreeHost(s->host_out);
    if (s->host_ctrl) cudaFreeHost(s->host_ctrl);
    free(s->kc);
    free(s->vc);
    free(s->conv);
    free(s->rec);
    free(s);
}

static void cuda_state_reset(lilac_backend *b, lilac_state *s) {
    const lilac_config *c = &b->m->cfg;
    for (int i = 0; i < c->n_lin_layers; i++) {
        cudaMemsetAsync(s->conv[i], 0, 2 * (size_t)(c->conv_kernel - 1) * c->conv_dim * 4, b->st);
        cudaMemsetAsync(s->rec[i], 0, (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * 4, b->st);
    }
    cudaMemsetAsync(s->ctrl, 0, sizeof(lc_ctrl), b->st);
    cudaStreamSynchronize(b->st);
    s->pos = 0;
}

static lilac_status cuda_state_new(lilac_backend *b, int max_ctx, lilac_state **out, lilac_error *e) {
    *out = NULL;
    const lilac_config *c = &b->m->cfg;
    if (max_ctx < 1) return lilac_fail(e, LILAC_EINVAL, "context size %d must be positive", max_ctx);
    lilac_state *s = calloc(1, sizeof *s);
    if (!s) return lilac_fail(e, LILAC_ENOMEM, "session state");
    s->cap = max_ctx;
    s->kc = calloc((size_t)c->n_attn_layers + 1, sizeof *s->kc);
    s->vc = calloc((size_t)c->n_attn_layers + 1, sizeof *s->vc);
    s->conv = calloc((size_t)c->n_lin_layers + 1, sizeof *s->conv);
    s->rec = calloc((size_t)c->n_lin_layers + 1, sizeof *s->rec);
    int ok = s->kc && s->vc && s->conv && s->rec;
    const size_t kv = (size_t)max_ctx * c->n_kv_heads * c->head_dim * 2;
    for (int i = 0; ok && i < c->n_attn_layers; i++)
        ok = cudaMalloc((void **)&s->kc[i], kv) == cudaSuccess && cudaMalloc((void **)&s->vc[i], kv) == cudaSuccess;
    for (int i = 0; ok && i < c->n_lin_layers; i++)
        ok = cudaMalloc((void **)&s->conv[i], 2 * (size_t)(c->conv_kernel - 1) * c->conv_dim * 4) == cudaSuccess &&
             cudaMalloc((void **)&s->rec[i], (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * 4) == cudaSuccess;
    ok = ok && cudaMalloc((void **)&s->ctrl, sizeof(lc_ctrl)) == cudaSuccess &&
         cudaMalloc((void **)&s->out, ((size_t)max_ctx + 1) * 4) == cudaSuccess &&
         cudaMallocHost((void **)&s->host_out, ((size_t)max_ctx + 1) * 4) == cudaSuccess &&
         cudaMallocHost((void **)&s->host_ctrl, sizeof(lc_ctrl)) == cudaSuccess;
    if (!ok) {
        cudaGetLastError(); /* clear the allocation error */
        cuda_state_free(b, s);
        return lilac_fail(e, LILAC_ENOMEM, "GPU memory for a %d-token session (%.1f MiB)", max_ctx,
                          cuda_state_bytes(b, max_ctx) / 1048576.0);
    }
    cuda_state_reset(b, s);
    *out = s;
    return LILAC_OK;
}

static int cuda_state_pos(const lilac_state *s) { return s->pos; }
static int cuda_state_capacity(const lilac_state *s) { return s->cap; }

static lilac_status cuda_state_copy(lilac_backend *b, lilac_state *dst, const lilac_state *src, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    if (src->pos > dst->cap)
        return lilac_fail(e, LILAC_EINVAL, "state copy: %d tokens do not fit a %d-token state", src->pos, dst->cap);
    const size_t kv = (size_t)src->pos * c->n_kv_heads * c->head_dim * 2;
    for (int i = 0; i < c->n_attn_layers; i++) {
        LC_CHECK(cudaMemcpyAsync(dst->kc[i], src->kc[i], kv, cudaMemcpyDeviceToDevice, b->st));
        LC_CHECK(cudaMemcpyAsync(dst->vc[i], src->vc[i], kv, cudaMemcpyDeviceToDevice, b->st));
    }
    for (int i = 0; i < c->n_lin_layers; i++) {
        LC_CHECK(cudaMemcpyAsync(dst->conv[i], src->conv[i], 2 * (size_t)(c->conv_kernel - 1) * c->conv_dim * 4,
                                 cudaMemcpyDeviceToDevice, b->st));
        LC_CHECK(cudaMemcpyAsync(dst->rec[i], src->rec[i], (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * 4,
                                 cudaMemcpyDeviceToDevice, b->st));
    }
    LC_CHECK(cudaMemcpyAsync(dst->ctrl, src->ctrl, sizeof(lc_ctrl), cudaMemcpyDeviceToDevice, b->st));
    LC_CHECK(cudaStreamSynchronize(b->st));
    dst->pos = src->pos;
    return LILAC_OK;
}

/* Serialisation: the layout is in backend.h ("cuda-bf16-1"); the copies
 * through pinned staging are state_io.c's. */
static size_t cuda_payload_bytes(const lilac_backend *b, int pos) {
    const lilac_config *c = &b->m->cfg;
    size_t kv = 2 * (size_t)pos * c->n_kv_heads * c->head_dim * 2;
    size_t lin = (2 * (size_t)(c->conv_kernel - 1) * c->conv_dim + (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim) * 4;
    return sizeof(lc_ctrl) + kv * c->n_attn_layers + lin * c->n_lin_layers;
}

static lilac_status cuda_state_load(lilac_backend *b, lilac_state *s, int pos, lilac_read_fn r, void *ctx,
                                    lilac_error *e) {
    if (pos < 0 || pos > s->cap)
        return lilac_fail(e, LILAC_EINVAL, "state load: %d tokens do not fit a %d-token state", pos, s->cap);
    lilac_status st = cuda_state_load_io(b, s, pos, r, ctx, e);
    if (st) {
        cudaGetLastError();
        cuda_state_reset(b, s);
        return st;
    }
    s->pos = pos;
    return LILAC_OK;
}

static const char *cuda_device_name(const lilac_backend *b) { return b->name; }

/* Benchmarks: per-class times of the prefill chunks run while on. */
static lilac_status cuda_prefill_profile(lilac_backend *b, int on, lilac_profile *p, lilac_error *e) {
    (void)e;
    if (on) {
        memset(b->pp_ms, 0, sizeof b->pp_ms);
        b->pp_kernels = 0;
    } else if (p) {
        static const char *names[PP_NCLASS] = {"expert GEMMs", "dense GEMMs", "DeltaNet", "attention", "routing",
                                               "other (norms, packs, combine)"};
        memset(p, 0, sizeof *p);
        p->nclass = PP_NCLASS;
        for (int k = 0; k < PP_NCLASS; k++) p->class_name[k] = names[k], p->class_ms[k] = b->pp_ms[k];
        p->kernels = b->pp_kernels;
    }
    b->pp_on = on;
    return LILAC_OK;
}

/* The prefill chunk: the tensor-core GEMMs stream every expert's weights
 * once per chunk, so long chunks amortise them (docs/PERFORMANCE.md has the
 * measurements); scratch grows linearly with it (about 0.25 MB per token). */
#define CUDA_DEFAULT_CHUNK 4096

static int cuda_device_memory(const lilac_backend *b, size_t *used, size_t *total) {
    (void)b;
    size_t fr = 0, all = 0;
    if (cudaMemGetInfo(&fr, &all) != cudaSuccess) return -1;
    *used = all - fr;
    *total = all;
    return 0;
}

const lilac_backend_ops lilac_cuda_backend = {
    .name = "cuda",
    .default_chunk = CUDA_DEFAULT_CHUNK,
    .open = cuda_open,
    .close = cuda_close,
    .state_new = cuda_state_new,
    .state_free = cuda_state_free,
    .state_reset = cuda_state_reset,
    .state_pos = cuda_state_pos,
    .state_capacity = cuda_state_capacity,
    .state_copy = cuda_state_copy,
    .state_bytes = cuda_state_bytes,
    .state_format = "cuda-bf16-1",
    .state_payload_bytes = cuda_payload_bytes,
    .state_save = cuda_state_save_io,
    .state_load = cuda_state_load,
    .forward = cuda_forward,
    .device_name = cuda_device_name,
    .device_memory = cuda_device_memory,
    .generate = cuda_generate,
    .state_fill_random = cuda_state_fill_random,
    .profile = cuda_profile,
    .prefill_profile = cuda_prefill_profile,
};
