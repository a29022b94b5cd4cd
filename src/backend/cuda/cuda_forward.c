/* cuda_forward.c — the forward pass on the GPU, and generation on the device.
 *
 * A chunk of T > 1 tokens runs the prefill layers (forward_prefill.c:
 * tensor-core GEMMs, grouped expert GEMMs, chunk scans); one token runs the
 * decode step's layers (forward_decode.c: GEMVs and the fused batch-1 MoE
 * kernels).  The decode step is captured once per state as a CUDA graph: the token it
 * feeds is read from the state's control block, the argmax (or the sampler,
 * sample_topk.cu) at its end writes the next one there, so the host only
 * replays the graph and reads finished ids (and logprobs) from rings,
 * asynchronously. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "engine/sample.h"
#include "util/trace.h"

_Static_assert(LC_LP_TOP == LILAC_MAX_TOP_LOGPROBS, "the logprob ring holds every alternative the API allows");

/* LILAC_TRACE=1: summaries of intermediates in the CPU backend's layouts
 * (rows x cols taken with row stride ld), for diffing against it. */
void cuda_ctrace(lilac_backend *b, const char *name, int layer, const float *dev, int rows, int cols, int ld) {
    if (!lilac_trace_on()) return;
    enum cudaStreamCaptureStatus cs;
    if (cudaStreamIsCapturing(b->st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return;
    float *h = malloc((size_t)rows * cols * sizeof(float));
    if (!h) return;
    cudaStreamSynchronize(b->st);
    cudaMemcpy2D(h, (size_t)cols * sizeof(float), dev, (size_t)ld * sizeof(float), (size_t)cols * sizeof(float), (size_t)rows,
                 cudaMemcpyDeviceToHost);
    lilac_trace(name, layer, h, (size_t)rows * cols);
    free(h);
}

void cuda_prof_mark(cuda_prof *p, int cls, cudaStream_t st) {
    if (!p || p->n >= CUDA_PROF_MAX) return;
    cudaEventRecord(p->ev[p->n], st);
    p->cls[p->n++] = cls;
}

/* Prefill profile: the classes of the kernels recorded by the last forward. */
static lilac_status prefill_profile_collect(lilac_backend *b, lilac_error *e) {
    cuda_prof *p = b->pprof;
    for (int i = 1; i < p->n; i++) {
        float ms = 0;
        LC_CHECK(cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]));
        b->pp_ms[p->cls[i]] += ms;
    }
    b->pp_kernels += p->n - 1;
    p->n = 0;
    return LILAC_OK;
}

lilac_status cuda_forward(lilac_backend *b, lilac_state *s, const int32_t *ids, int n, const lilac_forward_out *out,
                          lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const int D = c->hidden, V = c->vocab_size;
    if (n <= 0 || n > b->T) return lilac_fail(e, LILAC_EINVAL, "forward: %d tokens (1..%d allowed per call)", n, b->T);
    if (s->pos + n > s->cap)
        return lilac_fail(e, LILAC_EINVAL, "context full: %d + %d tokens exceed the session's %d", s->pos, n, s->cap);
    if (out && out->hidden) return lilac_fail(e, LILAC_EUNSUPPORTED, "hidden-state capture needs the CPU backend");
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= V)
            return lilac_fail(e, LILAC_EINVAL, "token id %d at position %d is outside the vocabulary [0, %d)", ids[t], t, V);
    memcpy(b->host_ids, ids, (size_t)n * sizeof *ids);
    LC_CHECK(cudaMemcpyAsync(b->ids, b->host_ids, (size_t)n * sizeof *ids, cudaMemcpyHostToDevice, b->st));
    cuda_prof *prof = b->pp_on && n > 1 ? b->pprof : NULL;
    if (prof) prof->n = 0;
    lilac_status st = n > 1 ? cuda_enqueue_prefill(b, s, b->ids, n, prof, e) : cuda_enqueue_layers(b, s, b->ids, n, NULL, e);
    if (st) return st;
    LC_CHECK(lc_ctrl_advance(s->ctrl, n, b->st));

    /* final norm and lm_head: every row in LC_LOGIT_ROWS batches, or the last */
    if (out && out->logits && out->all_logits) {
        lc_xpack xp = b->xp;
        xp.lo2 = NULL;
        if (b->f16 && lc_qgemm_h_supported(&b->lm_head)) xp.f16 = 1, xp.xs = 1.0f;
        LC_CHECK(lc_pack(b->h, D, n, D, b->final_norm, c->rms_eps, &xp, b->st));
        for (int r0 = 0; r0 < n; r0 += LC_LOGIT_ROWS) {
            const int rows = n - r0 < LC_LOGIT_ROWS ? n - r0 : LC_LOGIT_ROWS;
            lc_xpack xr = xp;
            xr.hi += (size_t)r0 * xp.ld, xr.lo += (size_t)r0 * xp.ld, xr.gs += (size_t)r0 * (xp.ld / 64);
            if (xr.f16) xr.sh += (size_t)r0 * 64, xr.sl += (size_t)r0 * 64;
            LC_CHECK(lc_qgemm(&b->lm_head, &xr, rows, b->logits, V, 0, b->st));
            LC_CHECK(cudaMemcpyAsync(b->host_logits, b->logits, (size_t)rows * V * sizeof(float), cudaMemcpyDeviceToHost, b->st));
            LC_CHECK(cudaStreamSynchronize(b->st));
            memcpy(out->logits + (size_t)r0 * V, b->host_logits, (size_t)rows * V * sizeof(float));
        }
    } else if (out && out->logits) {
        const float *last = b->h + (size_t)(n - 1) * D;
        LC_CHECK(lc_lm_head(&b->lm_head, last, b->final_norm, c->rms_eps, b->logits, NULL, b->st));
        LC_CHECK(cudaMemcpyAsync(b->host_logits, b->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost, b->st));
        LC_CHECK(cudaStreamSynchronize(b->st));
        memcpy(out->logits, b->host_logits, (size_t)V * sizeof(float));
    }
    LC_CHECK(cudaStreamSynchronize(b->st));
    LC_CHECK(cudaGetLastError());
    if (prof && (st = prefill_profile_collect(b, e))) return st;
    s->pos += n;
    return LILAC_OK;
}

/* ---- generation on the device ------------------------------------------------ */

/* The sampler's parameters for p (the host sampler's rules, sample.c). */
static void samp_params(const lilac_gen_params *p, int V, lc_samp_params *o) {
    const lilac_sampling *sp = &p->sampling;
    memset(o, 0, sizeof *o);
    o->greedy = !(sp->temperature > 0);
    o->inv_t = o->greedy ? 1.0f : 1.0f / sp->temperature;
    o->log_min_p = sp->min_p > 0 ? logf(sp->min_p) : -INFINITY;
    o->top_k = sp->top_k;
    o->top_p = sp->top_p;
    o->rep = sp->repetition_penalty;
    o->freq = sp->frequency_penalty;
    o->pres = sp->presence_penalty;
    int n = p->top_logprobs < LC_LP_TOP ? p->top_logprobs : LC_LP_TOP;
    o->n_top = n < V ? n : V;
    lilac_rng r;
    lilac_rng_seed(&r, sp->seed);
    memcpy(o->rng, r.s, sizeof o->rng);
}

/* Copies the id (and logprobs) of step i from the device rings to the host's. */
static cudaError_t read_back(lilac_backend *b, lilac_state *s, int i, int lp) {
    cudaError_t err = cudaMemcpyAsync(s->host_out + i, s->out + i, sizeof(int32_t), cudaMemcpyDeviceToHost, b->st);
    if (!err && lp)
        err = cudaMemcpyAsync(b->host_lp + i % LC_LP_RING, b->samp.lp + i % LC_LP_RING, sizeof(lc_tokinfo),
                              cudaMemcpyDeviceToHost, b->st);
    return err;
}

enum { LOOKAHEAD = 4, EVENTS = 8 };
_Static_assert(LC_LP_RING > LOOKAHEAD, "a logprob slot is read back before a later step reuses it");

/* The token of step i as the host read it back (after its event). */
static void token_info(const lilac_backend *b, const lilac_state *s, int i, int lp, lilac_token_info *t) {
    memset(t, 0, sizeof *t);
    t->id = s->host_out[i];
    t->index = i;
    if (lp) {
        const lc_tokinfo *ti = &b->host_lp[i % LC_LP_RING];
        t->logprob = ti->logprob;
        t->n_top = ti->n_top > 0 && ti->n_top <= LC_LP_TOP ? ti->n_top : 0;
        memcpy(t->top_ids, ti->top_ids, (size_t)t->n_top * sizeof *t->top_ids);
        memcpy(t->top_logprobs, ti->top_logprobs, (size_t)t->n_top * sizeof *t->top_logprobs);
    }
}

static int is_stop_id(const int32_t *stops, int n_stop, int32_t id) {
    for (int k = 0; k < n_stop; k++)
        if (stops[k] == id) return 1;
    return 0;
}

/* Unconstrained: token 0 from the prompt's logits, then up to LOOKAHEAD
 * whole-step graph replays queued ahead of the host. */
static lilac_status run_ahead(lilac_backend *b, lilac_state *s, int lp, int sampled, const int32_t *stops, int n_stop,
                              int max_tokens, lilac_token_cb cb, void *ctx, int32_t *out, int *delivered, lilac_finish *why,
                              lilac_error *e) {
    const int V = b->m->cfg.vocab_size;
    if (sampled) /* token 0 from the prompt's logits (the prompt is already fed) */
        LC_CHECK(lc_sample(b->logits, &b->samp, lp, s->out, b->stop_ids, n_stop, 0, NULL, s->ctrl, b->st));
    else
        LC_CHECK(lc_argmax(b->logits, V, b->amax_part, b->amax_done, s->out, b->stop_ids, n_stop, 0, NULL, s->ctrl, b->st));
    cudaEvent_t ev[EVENTS];
    int nev = 0;
    lilac_status st = LILAC_OK;
    for (; nev < EVENTS; nev++)
        if (cudaEventCreateWithFlags(&ev[nev], cudaEventDisableTiming) != cudaSuccess) {
            st = lilac_fail(e, LILAC_EBACKEND, "CUDA: events for generation");
            break;
        }
    int launched = 1; /* tokens enqueued */
    cudaError_t err = st ? cudaSuccess : read_back(b, s, 0, lp);
    if (!err && !st) err = cudaEventRecord(ev[0], b->st);
    while (!err && !st && *delivered < launched) {
        /* keep up to LOOKAHEAD steps queued ahead of the host */
        while (!err && launched < max_tokens && launched - *delivered < LOOKAHEAD) {
            err = cudaGraphLaunch(s->graph, b->st);
            if (!err) err = read_back(b, s, launched, lp);
            if (!err) err = cudaEventRecord(ev[launched % EVENTS], b->st);
            launched++;
        }
        if (!err) err = cudaEventSynchronize(ev[*delivered % EVENTS]);
        if (err) break;
        lilac_token_info t;
        token_info(b, s, *delivered, lp, &t);
        out[(*delivered)++] = t.id;
        if (cb && cb(ctx, &t)) {
            *why = LILAC_FINISH_CALLBACK;
            break;
        }
        if (is_stop_id(stops, n_stop, t.id)) {
            *why = LILAC_FINISH_EOS;
            break;
        }
    }
    if (err && !st) st = lilac_fail(e, LILAC_EBACKEND, "CUDA: device generation failed: %s", cudaGetErrorString(err));
    cudaStreamSynchronize(b->st); /* before the events go */
    for (int i = 0; i < nev; i++) cudaEventDestroy(ev[i]);
    return st;
}

/* Constrained: no step runs ahead of the host, which must see token i to
 * make token i+1's mask.  Per token, on the stream: (mask upload, waited
 * for) -> pick -> read back -> feed; while the feed graph runs the layers
 * on token i, the host accepts token i, makes the next mask and uploads it
 * on st_copy, so the mask costs the step only where it takes longer than
 * the layers.  A mask equal to the last one uploaded (the reasoning block)
 * is not uploaded again.  The constraint's calls come in the engine's host
 * loop's order (mask for token i, accept(token i), mask for token i+1, ...),
 * but token i is fed before mask i+1 is known: when that says LILAC_MASK_NONE
 * (the grammar is complete) the state holds the run's last token too. */
static lilac_status run_masked(lilac_backend *b, lilac_state *s, const lilac_constraint *k, int lp, const int32_t *stops,
                               int n_stop, int max_tokens, lilac_token_cb cb, void *ctx, int32_t *out, int *delivered,
                               lilac_finish *why, lilac_error *e) {
    const size_t wb = (size_t)(b->m->cfg.vocab_size + 31) / 32 * sizeof(uint32_t);
    int last = -1;                        /* the host buffer whose mask b->mask holds; -1: none yet */
    int nxt = 0;                          /* the host buffer the next mask goes to */
    int mk = k->mask(k->ctx, b->host_mask[nxt]);
    for (int i = 0; i < max_tokens; i++) {
        if (mk == LILAC_MASK_ERROR) return lilac_fail(e, LILAC_EINVAL, "constrained decoding: the constraint failed");
        if (mk == LILAC_MASK_NONE) {
            *why = LILAC_FINISH_EOS;
            return LILAC_OK;
        }
        uint32_t *m = b->host_mask[nxt];
        if (mk != LILAC_MASK_SOME) memset(m, 0xff, wb); /* LILAC_MASK_ALL */
        if (last < 0 || memcmp(m, b->host_mask[last], wb) != 0) {
            LC_CHECK(cudaMemcpyAsync(b->mask, m, wb, cudaMemcpyHostToDevice, b->st_copy));
            LC_CHECK(cudaEventRecord(b->ev_mask, b->st_copy));
            LC_CHECK(cudaStreamWaitEvent(b->st, b->ev_mask, 0));
            last = nxt;
            nxt ^= 1;
        }
        LC_CHECK(cudaGraphLaunch(s->graph_pick, b->st));
        LC_CHECK(read_back(b, s, i, lp));
        LC_CHECK(cudaEventRecord(b->ev_token, b->st));
        LC_CHECK(cudaGraphLaunch(s->graph_feed, b->st)); /* a no-op after a stop id or the last token */
        LC_CHECK(cudaEventSynchronize(b->ev_token));
        lilac_token_info t;
        token_info(b, s, i, lp, &t);
        out[(*delivered)++] = t.id;
        if (k->accept(k->ctx, t.id)) return lilac_fail(e, LILAC_EINVAL, "constrained decoding: token %d was not allowed", t.id);
        const int stop = is_stop_id(stops, n_stop, t.id);
        if (!stop && i + 1 < max_tokens) mk = k->mask(k->ctx, b->host_mask[nxt]); /* overlaps the feed graph */
        if (cb && cb(ctx, &t)) {
            *why = LILAC_FINISH_CALLBACK;
            return LILAC_OK;
        }
        if (stop) {
            *why = LILAC_FINISH_EOS;
            return LILAC_OK;
        }
    }
    *why = LILAC_FINISH_LENGTH;
    return LILAC_OK;
}

lilac_status cuda_generate(lilac_backend *b, lilac_state *s, const lilac_gen_params *p, const int32_t *prompt, int n_prompt,
                           const float *logits_in, lilac_token_cb cb, void *ctx, int32_t *out, int *n_gen, int *n_fed,
                           lilac_finish *why, float *logits_out, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const int V = c->vocab_size;
    *n_gen = *n_fed = 0;
    *why = LILAC_FINISH_LENGTH;
    /* Greedy without penalties or logprobs ends the step in argmax; anything
     * else in the sampler (its parameters are device memory, set below). */
    const lilac_sampling *sp = &p->sampling;
    const lilac_constraint *k = p->constraint;
    const int lp = p->logprobs || p->top_logprobs;
    const int rep_on = sp->repetition_penalty > 0 && sp->repetition_penalty != 1.0f;
    const int sampled = sp->temperature > 0 || rep_on || sp->presence_penalty != 0 || sp->frequency_penalty != 0 || lp;
    const int mode = (sampled ? CUDA_STEP_SAMPLE : CUDA_STEP_ARGMAX) | (lp ? CUDA_STEP_LOGPROBS : 0);
    if (k && (!k->mask || !k->accept)) return lilac_fail(e, LILAC_EINVAL, "constrained decoding: a constraint without functions");
    int32_t stops[LC_MAX_STOP];
    int n_stop = 0;
    if (p->stop_at_eos)
        for (int j = 0; j < c->n_eos && n_stop < LC_MAX_STOP; j++) stops[n_stop++] = c->eos[j];
    for (int j = 0; j < p->n_stop_ids; j++) {
        if (n_stop == LC_MAX_STOP) return LILAC_EUNSUPPORTED;
        stops[n_stop++] = p->stop_ids[j];
    }
    int max_tokens = p->max_tokens;
    if (max_tokens <= 0) return LILAC_OK;
    /* each generated token but the last is fed: capacity bounds the count */
    if (max_tokens > s->cap - s->pos + 1) max_tokens = s->cap - s->pos + 1;
    const int pos0 = s->pos;
    lilac_status st = k ? cuda_capture_split(b, s, n_stop, mode, e) : cuda_capture_step_mode(b, s, n_stop, mode, e);
    if (st) return st;
    if (n_stop) LC_CHECK(cudaMemcpyAsync(b->stop_ids, stops, (size_t)n_stop * sizeof *stops, cudaMemcpyHostToDevice, b->st));
    memcpy(b->host_logits, logits_in, (size_t)V * sizeof(float));
    LC_CHECK(cudaMemcpyAsync(b->logits, b->host_logits, (size_t)V * sizeof(float), cudaMemcpyHostToDevice, b->st));
    LC_CHECK(lc_ctrl_begin(s->ctrl, max_tokens, b->st));
    if (sampled) {
        lc_samp_params sprm;
        samp_params(p, V, &sprm);
        if (rep_on) {
            memset(b->host_seen, 0, (size_t)V);
            for (int i = 0; i < n_prompt; i++)
                if (prompt[i] >= 0 && prompt[i] < V) b->host_seen[prompt[i]] = 1;
        }
        LC_CHECK(lc_sampler_begin(&b->samp, &sprm, rep_on ? b->host_seen : NULL, b->st));
        if (p->n_prior_gen > 0 && (sp->frequency_penalty != 0 || sp->presence_penalty != 0)) {
            /* a resumed answer (after the reasoning budget's closing
             * sequence): its earlier tokens count for the penalties */
            int32_t *cnt = calloc((size_t)V, sizeof *cnt);
            if (!cnt) return lilac_fail(e, LILAC_ENOMEM, "penalty counts of %d tokens", V);
            for (int i = n_prompt - p->n_prior_gen; i < n_prompt; i++)
                if (i >= 0 && prompt[i] >= 0 && prompt[i] < V) cnt[prompt[i]]++;
            cudaError_t err = cudaMemcpyAsync(b->samp.counts, cnt, (size_t)V * sizeof *cnt, cudaMemcpyHostToDevice, b->st);
            if (!err) err = cudaStreamSynchronize(b->st); /* before cnt is freed */
            free(cnt);
            if (err) return lilac_fail(e, LILAC_EBACKEND, "CUDA: penalty counts upload failed: %s", cudaGetErrorString(err));
        }
    }

    int delivered = 0; /* tokens handed to the caller */
    st = k ? run_masked(b, s, k, lp, stops, n_stop, max_tokens, cb, ctx, out, &delivered, why, e)
           : run_ahead(b, s, lp, sampled, stops, n_stop, max_tokens, cb, ctx, out, &delivered, why, e);
    /* Let queued steps finish (after a stop id they are no-ops), then read
     * back how far the state advanced (also after a failure, so the host
     * mirror of the position stays true). */
    LC_CHECK(cudaMemcpyAsync(s->host_ctrl, s->ctrl, sizeof(lc_ctrl), cudaMemcpyDeviceToHost, b->st));
    LC_CHECK(cudaMemcpyAsync(b->host_logits, b->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost, b->st));
    LC_CHECK(lc_ctrl_end(s->ctrl, b->st));
    LC_CHECK(cudaStreamSynchronize(b->st));
    s->pos = s->host_ctrl->pos;
    *n_fed = s->pos - pos0;
    /* tokens the device generated past what the caller took were fed too */
    for (int i = delivered; i < *n_fed; i++) out[i] = s->host_out[i];
    *n_gen = delivered;
    if (logits_out) memcpy(logits_out, b->host_logits, (size_t)V * sizeof(float));
    return st;
}
