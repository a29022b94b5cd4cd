/* forward_decode.c — one decode step on the GPU (spec §3, T = 1): the
 * decoder layers as batch-1 kernels (fused norm + GEMVs, the fused MoE
 * chain, the DeltaNet step, tensor-core decode attention), then the lm_head
 * and the choice of the next token, and the step captured once per state as
 * a CUDA graph that cuda_generate (cuda_forward.c) replays; for constrained
 * generation the same step as two graphs (feed, then pick under a mask).  Every kernel
 * reads the position from the state's control block, so one graph serves
 * every step. */
#include "backend/cuda/cuda_internal.h"

#define MARK(cls) cuda_prof_mark(prof, cls, st)

/* Layer l's mixer on b->h into b->mix: the input norm and in_proj, then the
 * gated attention or the DeltaNet step. */
static lilac_status enqueue_mixer(lilac_backend *b, lilac_state *s, int l, cuda_prof *prof, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const cudaStream_t st = b->st;
    lc_ctrl *ctrl = s->ctrl;
    cuda_layer *cl = &b->layers[l];
    const int slot = lilac_config_layer_slot(c, l), Vd = c->lin_value_dim, H = c->n_heads, hd = c->head_dim;
    /* the input norm runs inside the GEMV */
    LC_CHECK(lc_gemv_rms(&cl->in_proj, b->h, cl->input_norm, c->rms_eps, b->proj, NULL, ctrl, st));
    MARK(PROF_GEMV);
    if (cl->is_attn) {
        lc_attn_params ap = cl->attn;
        ap.cap = s->cap;
        if (lc_attn_decode_supported(&ap)) { /* fused prep, tensor cores, split by context length */
            LC_CHECK(lc_attn_decode(&ap, b->proj, s->kc[slot], s->vc[slot], b->attn_splits, b->part, ctrl, st));
            MARK(PROF_ATTN);
            LC_CHECK(lc_attn_combine(&ap, b->part, 1, b->attn_splits, LC_ATTN_CHUNK, b->proj, b->ldp, b->mix, ctrl, st));
            MARK(PROF_ATTN);
        } else {
            LC_CHECK(lc_attn_prep(&ap, b->proj, b->ldp, 1, b->qbuf, s->kc[slot], s->vc[slot], ctrl, st));
            MARK(PROF_ATTN);
            LC_CHECK(lc_attn(&ap, b->qbuf, s->kc[slot], s->vc[slot], 1, LC_NSPLIT, b->part, ctrl, st));
            MARK(PROF_ATTN);
            LC_CHECK(lc_attn_combine(&ap, b->part, 1, LC_NSPLIT, 0, b->proj, b->ldp, b->mix, ctrl, st));
            MARK(PROF_ATTN);
        }
        cuda_ctrace(b, "attn_out", l, b->mix, 1, H * hd, H * hd);
    } else {
        LC_CHECK(lc_gdn(&cl->gdn, b->proj, b->ldp, 1, s->conv[slot], s->rec[slot], b->mix, ctrl, st));
        MARK(PROF_GDN);
        cuda_ctrace(b, "gdn_scan", l, b->mix, 1, Vd, Vd);
    }
    return LILAC_OK;
}

/* Enqueues the decoder layers of one decode step (the token's id in device
 * memory); prof (may be NULL) records an event after each kernel. */
lilac_status cuda_enqueue_layers(lilac_backend *b, lilac_state *s, const int32_t *d_ids, int T, cuda_prof *prof,
                                 lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const int D = c->hidden, K = c->n_experts_per_tok;
    const cudaStream_t st = b->st;
    lc_ctrl *ctrl = s->ctrl;
    if (T != 1) return lilac_fail(e, LILAC_EINVAL, "decode layers: %d tokens (1 expected)", T);
    MARK(PROF_START);
    LC_CHECK(lc_embed(&b->embed, d_ids, 1, b->h, ctrl, st));
    MARK(PROF_NORM);
    cuda_ctrace(b, "embed", 0, b->h, 1, D, D);
    /* hearly: the last sum lets the ring lm_head launch early too */
    const int try_bits = lc_decode_try();
    const int head_early = (try_bits & LC_TRY_HEARLY) && lc_lm_head_ring_on(&b->lm_head, try_bits);
    for (int l = 0; l < c->n_layers; l++) {
        cuda_layer *cl = &b->layers[l];
        lilac_status rc = enqueue_mixer(b, s, l, prof, e);
        if (rc) return rc;
        /* residual 1: h += mixer output projected */
        LC_CHECK(lc_gemv(&cl->out_proj, 0, b->mix, b->h, b->h, ctrl, st));
        MARK(PROF_GEMV);
        cuda_ctrace(b, "h_mixer", l, b->h, 1, D, D);
        /* MoE, residual 2: one kernel (a cluster per expert slot) and the slots' sum, or
         * norm + router + top-K in one launch, then the experts */
        if (lc_moe_slots_ok(&cl->router, &cl->gate, &cl->up, &cl->sh_gate, &cl->sh_up, &cl->down, &cl->sh_down, K)) {
            LC_CHECK(lc_moe_slots(&cl->router, &cl->gate, &cl->up, &cl->sh_gate, &cl->sh_up, &cl->down, &cl->sh_down, b->h,
                                  cl->post_norm, c->rms_eps, b->eo, b->topi, b->topw, b->sgate, ctrl, st));
            MARK(PROF_MOE);
            /* the sum's successor may launch early unless it is tq_gemv's lm_head (lc_moe_slots_combine) */
            const int last = l + 1 == c->n_layers;
            if (last && head_early) lc_decode_try_note(LC_TRY_HEARLY);
            LC_CHECK(lc_moe_slots_combine(b->eo, b->h, !last || head_early, ctrl, st));
            MARK(PROF_MOE);
            cuda_ctrace(b, "h_moe", l, b->h, 1, D, D);
            continue;
        }
        LC_CHECK(lc_moe_router(&cl->router, b->h, cl->post_norm, c->rms_eps, b->xn, b->rl, K, b->topi, b->topw,
                               b->sgate, b->moe_done, ctrl, st));
        MARK(PROF_MOE);
        LC_CHECK(lc_moe_gate_up(&cl->gate, &cl->up, &cl->sh_gate, &cl->sh_up, b->topi, K, b->xn, b->act, ctrl, st));
        MARK(PROF_MOE);
        LC_CHECK(lc_moe_down(&cl->down, &cl->sh_down, b->topi, b->topw, b->sgate, K, b->act, b->h, ctrl, st));
        MARK(PROF_MOE);
        cuda_ctrace(b, "h_moe", l, b->h, 1, D, D);
    }
    return LILAC_OK;
}

/* The whole decode step: feed ctrl->token at ctrl->pos, choose the next
 * token (argmax, or the sampler for CUDA_STEP_SAMPLE), advance ctrl. */
lilac_status cuda_enqueue_step_mode(lilac_backend *b, lilac_state *s, int n_stop, int mode, cuda_prof *prof, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const cudaStream_t st = b->st;
    lilac_status rc = cuda_enqueue_layers(b, s, &s->ctrl->token, 1, prof, e);
    if (rc) return rc;
    const int try_bits = lc_decode_try();
    if (!(mode & CUDA_STEP_SAMPLE) && (try_bits & LC_TRY_PICK) && lc_lm_head_greedy_ok(&b->lm_head)) {
        /* the lm_head picks the id itself: no argmax kernel */
        const int ring = lc_lm_head_ring_on(&b->lm_head, try_bits);
        lc_decode_try_note(LC_TRY_PICK | (ring ? LC_TRY_HRING : 0));
        LC_CHECK(lc_lm_head_greedy(&b->lm_head, b->h, b->final_norm, c->rms_eps, b->logits, b->pick_key, s->out, b->stop_ids,
                                   n_stop, 1, ring, s->ctrl, st));
        MARK(PROF_HEAD);
        return LILAC_OK;
    }
    LC_CHECK(lc_lm_head(&b->lm_head, b->h, b->final_norm, c->rms_eps, b->logits, s->ctrl, st));
    MARK(PROF_HEAD);
    if (mode & CUDA_STEP_SAMPLE)
        LC_CHECK(lc_sample(b->logits, &b->samp, (mode & CUDA_STEP_LOGPROBS) != 0, s->out, b->stop_ids, n_stop, 1, NULL, s->ctrl,
                           st));
    else
        LC_CHECK(lc_argmax(b->logits, c->vocab_size, b->amax_part, b->amax_done, s->out, b->stop_ids, n_stop, 1, NULL, s->ctrl,
                           st));
    MARK(PROF_HEAD);
    return LILAC_OK;
}

/* The step split in two for constrained generation, so the host can make
 * the next token's mask while the layers run:
 *   feed: the layers and the lm_head on ctrl->token, then pos += 1 (none of
 *         it when ctrl->stop is set);
 *   pick: the choice of the next token from b->logits under the allowed
 *         mask b->mask (argmax or the sampler, by mode); pos stays. */
static lilac_status enqueue_feed(lilac_backend *b, lilac_state *s, lilac_error *e) {
    lilac_status rc = cuda_enqueue_layers(b, s, &s->ctrl->token, 1, NULL, e);
    if (rc) return rc;
    LC_CHECK(lc_lm_head(&b->lm_head, b->h, b->final_norm, b->m->cfg.rms_eps, b->logits, s->ctrl, b->st));
    LC_CHECK(lc_ctrl_fed(s->ctrl, b->st));
    return LILAC_OK;
}

static lilac_status enqueue_pick(lilac_backend *b, lilac_state *s, int n_stop, int mode, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    if (mode & CUDA_STEP_SAMPLE)
        LC_CHECK(lc_sample(b->logits, &b->samp, (mode & CUDA_STEP_LOGPROBS) != 0, s->out, b->stop_ids, n_stop, 0, b->mask,
                           s->ctrl, b->st));
    else
        LC_CHECK(lc_argmax(b->logits, c->vocab_size, b->amax_part, b->amax_done, s->out, b->stop_ids, n_stop, 0, b->mask,
                           s->ctrl, b->st));
    return LILAC_OK;
}

lilac_status cuda_enqueue_step(lilac_backend *b, lilac_state *s, int n_stop, cuda_prof *prof, lilac_error *e) {
    return cuda_enqueue_step_mode(b, s, n_stop, CUDA_STEP_ARGMAX, prof, e);
}

/* Captures what `which` enqueues (the whole step, or the feed or the pick
 * half) into *x, keyed by the stop-id count and the mode; kept while the key
 * matches. */
static lilac_status capture(lilac_backend *b, lilac_state *s, int which, int n_stop, int mode, cudaGraphExec_t *x,
                            int *key_stops, int *key_mode, lilac_error *e) {
    if (*x) {
        if (*key_stops == n_stop && *key_mode == mode) return LILAC_OK;
        cudaGraphExecDestroy(*x);
        *x = NULL;
    }
    cudaGraph_t g;
    LC_CHECK(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
    lilac_status st = which == CUDA_GRAPH_FEED   ? enqueue_feed(b, s, e)
                      : which == CUDA_GRAPH_PICK ? enqueue_pick(b, s, n_stop, mode, e)
                                                 : cuda_enqueue_step_mode(b, s, n_stop, mode, NULL, e);
    cudaError_t err = cudaStreamEndCapture(b->st, &g);
    if (st) {
        if (!err) cudaGraphDestroy(g);
        return st;
    }
    if (err) return lilac_fail(e, LILAC_EBACKEND, "CUDA: graph capture failed: %s", cudaGetErrorString(err));
    err = cudaGraphInstantiate(x, g, 0);
    cudaGraphDestroy(g);
    if (err) {
        *x = NULL;
        return lilac_fail(e, LILAC_EBACKEND, "CUDA: graph instantiation failed: %s", cudaGetErrorString(err));
    }
    *key_stops = n_stop;
    *key_mode = mode;
    return LILAC_OK;
}

/* The decode step captured once per state (and stop-id count and mode), replayed per token. */
lilac_status cuda_capture_step_mode(lilac_backend *b, lilac_state *s, int n_stop, int mode, lilac_error *e) {
    return capture(b, s, CUDA_GRAPH_STEP, n_stop, mode, &s->graph, &s->graph_stops, &s->graph_mode, e);
}

/* The split step's halves (constrained generation): s->graph_feed, s->graph_pick. */
lilac_status cuda_capture_split(lilac_backend *b, lilac_state *s, int n_stop, int mode, lilac_error *e) {
    lilac_status st = capture(b, s, CUDA_GRAPH_FEED, 0, 0, &s->graph_feed, &s->feed_stops, &s->feed_mode, e);
    return st ? st : capture(b, s, CUDA_GRAPH_PICK, n_stop, mode, &s->graph_pick, &s->pick_stops, &s->pick_mode, e);
}

lilac_status cuda_capture_step(lilac_backend *b, lilac_state *s, int n_stop, lilac_error *e) {
    return cuda_capture_step_mode(b, s, n_stop, CUDA_STEP_ARGMAX, e);
}
