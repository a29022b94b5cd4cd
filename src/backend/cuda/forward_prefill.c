/* forward_prefill.c — the decoder layers for a prefill chunk of T > 1
 * tokens (spec §3), every step on the GPU with no host synchronisation:
 *
 *   pack(RMSNorm(h)) -> in_proj GEMM -> DeltaNet chunk scan | attention
 *   pack(mixer out)  -> out_proj GEMM (+= h)
 *   pack(RMSNorm(h)) -> router GEMM -> top-8 -> sort slots by expert
 *                    -> grouped gate/up + SwiGLU (routed + shared expert)
 *                    -> grouped down -> combine (+= h)
 *
 * The GEMMs run on tensor cores on activations packed once per input
 * (prefill/pack.cu): on sm_90a the fp16 kernels of prefill/gemm_wgmma.cu
 * (b->f16), else the bf16 ones of prefill/gemm_mma.cu.  LILAC_PREFILL=simt
 * selects the earlier SIMT kernels instead (kept to time them side by side). */
#include "backend/cuda/cuda_internal.h"

/* prefill profile: an event after each kernel, by class */
#define MARK(cls) cuda_prof_mark(prof, cls, st)

static lilac_status prefill_simt(lilac_backend *b, lilac_state *s, const int32_t *d_ids, int T, cuda_prof *prof,
                                 lilac_error *e);

/* The attention mixer: out = gated attention of proj's q/k/v (KV appended):
 * the tensor-core kernel where the shapes allow, else the SIMT kernels. */
static lilac_status attention(lilac_backend *b, lilac_state *s, cuda_layer *cl, int slot, int T, cuda_prof *prof,
                              lilac_error *e) {
    const cudaStream_t st = b->st;
    lc_attn_params ap = cl->attn;
    ap.cap = s->cap;
    if (!b->prefill_simt && lc_attn_prefill_supported(&ap)) {
        LC_CHECK(lc_attn_prefill(&ap, b->proj, b->ldp, T, s->kc[slot], s->vc[slot], b->qbuf, b->mix, s->ctrl, st));
        MARK(PP_ATTN);
        return LILAC_OK;
    }
    LC_CHECK(lc_attn_prep(&ap, b->proj, b->ldp, T, b->qbuf, s->kc[slot], s->vc[slot], s->ctrl, st));
    LC_CHECK(lc_attn(&ap, b->qbuf, s->kc[slot], s->vc[slot], T, 1, b->part, s->ctrl, st));
    LC_CHECK(lc_attn_combine(&ap, b->part, T, 1, 0, b->proj, b->ldp, b->mix, s->ctrl, st));
    MARK(PP_ATTN);
    return LILAC_OK;
}

/* LILAC_TRACE: the projections in the CPU backend's names and layouts */
static void trace_proj(lilac_backend *b, const cuda_layer *cl, int l, int T) {
    const lilac_config *c = &b->m->cfg;
    const int C = c->conv_dim, Vd = c->lin_value_dim, Hv = c->lin_v_heads, H = c->n_heads, hd = c->head_dim;
    if (cl->is_attn) {
        cuda_ctrace(b, "attn_qg", l, b->proj, T, H * 2 * hd, b->ldp);
        cuda_ctrace(b, "attn_k", l, b->proj + H * 2 * hd, T, c->n_kv_heads * hd, b->ldp);
    } else {
        cuda_ctrace(b, "gdn_qkv", l, b->proj, T, C, b->ldp);
        cuda_ctrace(b, "gdn_z", l, b->proj + C, T, Vd, b->ldp);
        cuda_ctrace(b, "gdn_ba", l, b->proj + C + Vd, T, 2 * Hv, b->ldp);
    }
}

/* The pack a dense GEMM on W reads: fp16 where its kernel takes W. */
static lc_xpack pack_for(const lilac_backend *b, const lc_qmat *W) {
    lc_xpack p = b->xp;
    if (b->f16 && lc_qgemm_h_supported(W)) p.f16 = 1, p.xs = 1.0f, p.lo2 = NULL;
    return p;
}

static int moe_f16(const lilac_backend *b, const cuda_layer *cl) {
    return b->f16 && lc_qgemm_h_supported(&cl->gate) && lc_qgemm_h_supported(&cl->down) && cl->gate.rows % 128 == 0;
}

lilac_status cuda_enqueue_prefill(lilac_backend *b, lilac_state *s, const int32_t *d_ids, int T, cuda_prof *prof,
                                  lilac_error *e) {
    if (b->prefill_simt) return prefill_simt(b, s, d_ids, T, prof, e);
    const lilac_config *c = &b->m->cfg;
    const int D = c->hidden, E = c->n_experts, K = c->n_experts_per_tok;
    const cudaStream_t st = b->st;
    lc_ctrl *ctrl = s->ctrl;
    MARK(PROF_START);
    LC_CHECK(lc_embed(&b->embed, d_ids, T, b->h, ctrl, st));
    MARK(PP_OTHER);
    for (int l = 0; l < c->n_layers; l++) {
        cuda_layer *cl = &b->layers[l];
        const int slot = lilac_config_layer_slot(c, l);
        const lc_xpack xin = pack_for(b, &cl->in_proj), xout = pack_for(b, &cl->out_proj);
        LC_CHECK(lc_pack(b->h, D, T, D, cl->input_norm, c->rms_eps, &xin, st));
        MARK(PP_OTHER);
        LC_CHECK(lc_qgemm(&cl->in_proj, &xin, T, b->proj, b->ldp, 0, st));
        MARK(PP_DENSE);
        trace_proj(b, cl, l, T);
        if (cl->is_attn) {
            lilac_status rc = attention(b, s, cl, slot, T, prof, e);
            if (rc) return rc;
        } else if (b->gdn_scratch) {
            LC_CHECK(lc_gdn_prefill(&cl->gdn, b->proj, b->ldp, T, s->conv[slot], s->rec[slot], b->mix, b->gdn_scratch,
                                    b->gdn_scratch_bytes, ctrl, st));
            MARK(PP_GDN);
        } else {
            LC_CHECK(lc_gdn(&cl->gdn, b->proj, b->ldp, T, s->conv[slot], s->rec[slot], b->mix, ctrl, st));
            MARK(PP_GDN);
        }
        cuda_ctrace(b, cl->is_attn ? "attn_out" : "gdn_scan", l, b->mix, T, cl->out_proj.cols, cl->out_proj.cols);
        /* residual 1: h += out_proj(mixer output) */
        LC_CHECK(lc_pack(b->mix, cl->out_proj.cols, T, cl->out_proj.cols, NULL, 0.0f, &xout, st));
        MARK(PP_OTHER);
        LC_CHECK(lc_qgemm(&cl->out_proj, &xout, T, b->h, D, 1, st));
        MARK(PP_DENSE);
        cuda_ctrace(b, "h_mixer", l, b->h, T, D, D);
        /* MoE, residual 2: the router reads the exact bf16 pack, the experts the fp16 one when f16 */
        const int mf = moe_f16(b, cl);
        /* the router's last row (the shared-expert gate) is a dot taken in the pack;
         * the GEMM runs the E expert rows, two whole 128-row tiles */
        const lc_qmat rexp = lc_qmat_rows(&cl->router, 0, E), rgate = lc_qmat_rows(&cl->router, E, 1);
        LC_CHECK(lc_pack_dot(b->h, D, T, D, cl->post_norm, c->rms_eps, &b->xp, mf ? &b->xh : NULL, &rgate, b->rl + E,
                             E + 1, st));
        MARK(PP_OTHER);
        LC_CHECK(rexp.bits == 8 ? lc_qgemm_exact(&rexp, &b->xp, T, b->rl, E + 1, st)
                                : lc_qgemm(&rexp, &b->xp, T, b->rl, E + 1, 0, st));
        LC_CHECK(lc_moe_topk(b->rl, T, E, K, b->topi, b->topw, b->sgate, ctrl, st));
        b->route.tile = mf ? lc_moe_h_tile() : LC_MOE_TILE;
        LC_CHECK(lc_moe_route_sort(b->topi, T, E, K, &b->route, st));
        MARK(PP_ROUTE);
        cuda_ctrace(b, "moe_logits", l, b->rl, T, E, E + 1);
        cuda_ctrace(b, "moe_w", l, b->topw, T, K, K);
        if (mf) {
            LC_CHECK(lc_moe_h_gate_up(&cl->gate, &cl->up, &cl->sh_gate, &cl->sh_up, &b->route, T, K, &b->xh, &b->ap, st));
            LC_CHECK(lc_moe_h_down(&cl->down, &cl->sh_down, &b->route, T, K, &b->ap, b->eo, st));
        } else {
            lc_xpack ap = b->ap;
            ap.f16 = 0, ap.xs = 1.0f;
            LC_CHECK(lc_moe_mma_gate_up(&cl->gate, &cl->up, &cl->sh_gate, &cl->sh_up, &b->route, T, K, &b->xp, &ap, st));
            LC_CHECK(lc_moe_mma_down(&cl->down, &cl->sh_down, &b->route, T, K, &ap, b->eo, st));
        }
        MARK(PP_EXPERT);
        cuda_ctrace(b, "moe_shared", l, b->eo + (size_t)T * K * D, T, D, D);
        LC_CHECK(lc_moe_route_combine(b->eo, &b->route, b->topw, b->sgate, T, K, D, b->h, st));
        MARK(PP_OTHER);
        cuda_ctrace(b, "h_moe", l, b->h, T, D, D);
    }
    return LILAC_OK;
}

/* The SIMT prefill (the path before the tensor-core kernels), for A/B timing. */
static lilac_status prefill_simt(lilac_backend *b, lilac_state *s, const int32_t *d_ids, int T, cuda_prof *prof,
                                 lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const int D = c->hidden, E = c->n_experts, K = c->n_experts_per_tok, I = c->moe_inter;
    const cudaStream_t st = b->st;
    lc_ctrl *ctrl = s->ctrl;
    MARK(PROF_START);
    LC_CHECK(lc_embed(&b->embed, d_ids, T, b->h, ctrl, st));
    MARK(PP_OTHER);
    for (int l = 0; l < c->n_layers; l++) {
        cuda_layer *cl = &b->layers[l];
        const int slot = lilac_config_layer_slot(c, l);
        LC_CHECK(lc_rmsnorm(b->h, cl->input_norm, b->xn, T, D, c->rms_eps, ctrl, st));
        LC_CHECK(lc_gemm(&cl->in_proj, 0, b->xn, D, T, b->proj, b->ldp, 0, st));
        MARK(PP_DENSE);
        if (cl->is_attn) {
            lilac_status rc = attention(b, s, cl, slot, T, prof, e);
            if (rc) return rc;
        } else {
            LC_CHECK(lc_gdn(&cl->gdn, b->proj, b->ldp, T, s->conv[slot], s->rec[slot], b->mix, ctrl, st));
            MARK(PP_GDN);
        }
        LC_CHECK(lc_gemm(&cl->out_proj, 0, b->mix, cl->out_proj.cols, T, b->h, D, 1, st));
        MARK(PP_DENSE);
        LC_CHECK(lc_rmsnorm(b->h, cl->post_norm, b->xn, T, D, c->rms_eps, ctrl, st));
        LC_CHECK(lc_gemm(&cl->router, 0, b->xn, D, T, b->rl, E + 1, 0, st));
        LC_CHECK(lc_moe_topk(b->rl, T, E, K, b->topi, b->topw, b->sgate, ctrl, st));
        LC_CHECK(lc_moe_sort_slots(b->topi, T, E, K, &b->sort, st));
        MARK(PP_ROUTE);
        LC_CHECK(lc_moe_grouped_gate_up(&cl->gate, &cl->up, &b->sort, T, K, b->xn, b->act, st));
        LC_CHECK(lc_moe_grouped_down(&cl->down, &b->sort, T, K, b->act, b->eo, st));
        LC_CHECK(lc_gemm(&cl->sh_gu, 0, b->xn, D, T, b->sgu, 2 * I, 0, st));
        LC_CHECK(lc_swiglu(b->sgu, T, I, b->sact, st));
        LC_CHECK(lc_gemm(&cl->sh_down, 0, b->sact, I, T, b->sout, D, 0, st));
        MARK(PP_EXPERT);
        LC_CHECK(lc_moe_combine(b->eo, &b->sort, b->topw, b->sgate, b->sout, T, K, D, b->h, st));
        MARK(PP_OTHER);
    }
    return LILAC_OK;
}
