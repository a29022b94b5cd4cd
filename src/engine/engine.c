/* engine.c — engines (model + backend) and sessions (one sequence's state).
 *
 * The engine owns the loaded model and the backend bound to it.  A session
 * owns a backend state, the tokens it has consumed, and the logits of its
 * last position (host copy), which generation samples from.  Prefill is cut
 * into chunks of at most `chunk` tokens so scratch memory stays bounded
 * whatever the prompt length. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine/engine_internal.h"
#include "engine/sample.h"
#include "lilac.h"
#include "util/err.h"

/* The CPU backend reads the mapped checkpoint lazily, so a big model's load
 * "finishes" at once and its first tokens pay for the disk.  When the caller
 * shows progress, the files are read here instead (one byte per page, into
 * the page cache), so the wait is where the bar is — unless they would not
 * fit in 3/4 of the memory: then the pages would only push each other out,
 * and reading on demand (only the experts a prompt uses) is better. */
static void read_weights(const lilac_model *m, const lilac_engine_opts *o) {
    uint64_t total = 0, done = 0;
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096, phys = sysconf(_SC_PHYS_PAGES);
    for (int f = 0; f < m->tensors.nfiles; f++) total += m->tensors.maps[f].size;
    if (phys > 0 && total > (uint64_t)phys / 4 * 3 * (uint64_t)page) return;
    volatile unsigned char sink = 0;
    for (int f = 0; f < m->tensors.nfiles; f++) {
        const lilac_mapping *mp = &m->tensors.maps[f];
        if (!mp->data) continue;
        madvise((void *)mp->data, mp->size, MADV_WILLNEED);
        for (size_t off = 0; off < mp->size; off += (size_t)page) {
            sink ^= mp->data[off];
            if ((off & ((64u << 20) - 1)) == 0) o->progress(o->progress_ctx, "reading weights", done + off, total);
        }
        done += mp->size;
    }
    o->progress(o->progress_ctx, "reading weights", done, total);
    (void)sink;
}

lilac_status lilac_engine_open(const lilac_engine_opts *o, lilac_engine **out, lilac_error *e) {
    *out = NULL;
    if (!o || !o->model_dir) return lilac_fail(e, LILAC_EINVAL, "no model directory given");
    if (o->chunk < 0 || o->chunk > 65536) return lilac_fail(e, LILAC_EINVAL, "chunk %d is outside [1, 65536]", o->chunk);
    const lilac_backend_ops *ops = lilac_backend_pick(o->backend ? o->backend : "auto", e);
    if (!ops) return e ? e->code : LILAC_EBACKEND;
    lilac_engine *g = calloc(1, sizeof *g);
    if (!g) return lilac_fail(e, LILAC_ENOMEM, "engine");
    lilac_status st;
    if (o->synthetic) {
        lilac_config c;
        if (!(st = lilac_config_load(o->model_dir, &c, e))) {
            st = lilac_model_synthetic(&c, &g->model, e);
            lilac_config_free(&c);
        }
    } else {
        st = lilac_model_load(o->model_dir, &g->model, e);
    }
    if (st) {
        free(g);
        return st;
    }
    g->ops = ops;
    g->chunk = o->chunk > 0 ? o->chunk : ops->default_chunk > 0 ? ops->default_chunk : 512;
    if (o->progress && !o->synthetic && ops == &lilac_cpu_backend) read_weights(&g->model, o);
    lilac_backend_opts bo = {o->threads, g->chunk, o->progress, o->progress_ctx};
    if ((st = ops->open(&g->model, &bo, &g->be, e))) {
        lilac_model_free(&g->model);
        free(g);
        return st;
    }
    g->model_id = lilac_model_identity(&g->model);
    *out = g;
    return LILAC_OK;
}

void lilac_engine_close(lilac_engine *g) {
    if (!g) return;
    g->ops->close(g->be);
    lilac_model_free(&g->model);
    free(g);
}

void lilac_engine_get_info(const lilac_engine *g, lilac_engine_info *info) {
    const lilac_config *c = &g->model.cfg;
    memset(info, 0, sizeof *info);
    info->vocab_size = c->vocab_size;
    info->hidden = c->hidden;
    info->n_layers = c->n_layers;
    info->n_attn_layers = c->n_attn_layers;
    info->max_pos = c->max_pos;
    info->n_experts = c->n_experts;
    info->n_experts_per_tok = c->n_experts_per_tok;
    info->moe_inter = c->moe_inter;
    info->n_eos = c->n_eos;
    info->eos = c->eos;
    info->backend = g->ops->name;
    info->device = g->ops->device_name ? g->ops->device_name(g->be) : g->ops->name;
    info->layout = g->model.layout == LILAC_LAYOUT_MLX ? "mlx" : "hf";
    info->weight_bytes = g->model.weight_bytes;
    info->chunk = g->chunk;
}

lilac_status lilac_engine_device_memory(const lilac_engine *g, size_t *used, size_t *total) {
    if (!g || !g->ops->device_memory || g->ops->device_memory(g->be, used, total)) return LILAC_EUNSUPPORTED;
    return LILAC_OK;
}

size_t lilac_session_bytes(const lilac_engine *g, int max_ctx) { return g->ops->state_bytes(g->be, max_ctx); }

lilac_status lilac_session_new(lilac_engine *g, int max_ctx, lilac_session **out, lilac_error *e) {
    *out = NULL;
    const lilac_config *c = &g->model.cfg;
    if (max_ctx == 0) max_ctx = c->max_pos;
    if (max_ctx < 1 || max_ctx > c->max_pos)
        return lilac_fail(e, LILAC_EINVAL, "context size %d is outside [1, %d] (max_position_embeddings)", max_ctx, c->max_pos);
    lilac_session *s = calloc(1, sizeof *s);
    if (!s) return lilac_fail(e, LILAC_ENOMEM, "session");
    s->g = g;
    s->cap = max_ctx;
    s->tokens = malloc((size_t)max_ctx * sizeof *s->tokens);
    s->logits = malloc((size_t)c->vocab_size * sizeof *s->logits);
    lilac_status st = LILAC_OK;
    if (!s->tokens || !s->logits) st = lilac_fail(e, LILAC_ENOMEM, "session of %d tokens", max_ctx);
    else if (!(st = lilac_sampler_init(&s->sampler, c->vocab_size, e))) st = g->ops->state_new(g->be, max_ctx, &s->st, e);
    if (st) {
        lilac_session_free(s);
        return st;
    }
    *out = s;
    return LILAC_OK;
}

void lilac_session_free(lilac_session *s) {
    if (!s) return;
    if (s->st) s->g->ops->state_free(s->g->be, s->st);
    free(s->tokens);
    free(s->logits);
    free(s->allow);
    lilac_sampler_free(&s->sampler);
    free(s);
}

void lilac_session_reset(lilac_session *s) {
    s->g->ops->state_reset(s->g->be, s->st);
    s->have_logits = 0;
}

int lilac_session_len(const lilac_session *s) { return s->g->ops->state_pos(s->st); }
int lilac_session_capacity(const lilac_session *s) { return s->cap; }
const int32_t *lilac_session_tokens(const lilac_session *s) { return s->tokens; }

static lilac_status feed(lilac_session *s, const int32_t *ids, int n, float *logits, int all, float *hidden, lilac_error *e) {
    lilac_engine *g = s->g;
    const int V = g->model.cfg.vocab_size;
    int pos = lilac_session_len(s);
    if (n <= 0) return lilac_fail(e, LILAC_EINVAL, "no tokens to feed");
    if (n > s->cap - pos)
        return lilac_fail(e, LILAC_EINVAL, "%d tokens do not fit: the session holds %d of %d", n, pos, s->cap);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return lilac_fail(e, LILAC_EINVAL, "token id %d (index %d) is outside the vocabulary [0, %d)", ids[i], i, V);
    int step = hidden ? n : g->chunk;
    for (int off = 0; off < n; off += step) {
        int m = n - off < step ? n - off : step;
        int last = off + m == n;
        lilac_forward_out fo = {0};
        if (all && logits) {
            fo.logits = logits + (size_t)off * V;
            fo.all_logits = 1;
        } else if (last) {
            fo.logits = s->logits;
        }
        fo.hidden = hidden;
        s->have_logits = 0;
        lilac_status st = g->ops->forward(g->be, s->st, ids + off, m, &fo, e);
        if (st) return st; /* the state may be partly advanced; callers reset on error */
        memcpy(s->tokens + pos + off, ids + off, (size_t)m * sizeof *ids);
    }
    if (all && logits) memcpy(s->logits, logits + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    else if (logits) memcpy(logits, s->logits, (size_t)V * sizeof(float));
    s->have_logits = 1;
    return LILAC_OK;
}

lilac_status lilac_session_feed(lilac_session *s, const int32_t *ids, int n, float *logits, int all, lilac_error *e) {
    return feed(s, ids, n, logits, all, NULL, e);
}

lilac_status lilac_session_feed_hidden(lilac_session *s, const int32_t *ids, int n, float *logits_all, float *hidden,
                                       lilac_error *e) {
    if (strcmp(s->g->ops->name, "cpu") != 0)
        return lilac_fail(e, LILAC_EUNSUPPORTED, "hidden-state capture needs the CPU backend");
    if (n > s->g->chunk) return lilac_fail(e, LILAC_EINVAL, "hidden-state capture takes at most one chunk (%d tokens)", s->g->chunk);
    return feed(s, ids, n, logits_all, 1, hidden, e);
}

lilac_status lilac_session_copy(lilac_session *dst, const lilac_session *src, lilac_error *e) {
    if (dst->g != src->g) return lilac_fail(e, LILAC_EINVAL, "session copy across engines");
    int n = lilac_session_len(src);
    if (n > dst->cap) return lilac_fail(e, LILAC_EINVAL, "session copy: %d tokens do not fit %d", n, dst->cap);
    lilac_status st = src->g->ops->state_copy(src->g->be, dst->st, src->st, e);
    if (st) return st;
    memcpy(dst->tokens, src->tokens, (size_t)n * sizeof *src->tokens);
    memcpy(dst->logits, src->logits, (size_t)src->g->model.cfg.vocab_size * sizeof(float));
    dst->have_logits = src->have_logits;
    return LILAC_OK;
}

lilac_sampling lilac_sampling_greedy(void) {
    lilac_sampling p = {0};
    p.top_p = 1.0f;
    p.repetition_penalty = 1.0f;
    return p;
}

static int is_stop(const lilac_config *c, const lilac_gen_params *p, int32_t id) {
    if (p->stop_at_eos)
        for (int k = 0; k < c->n_eos; k++)
            if (c->eos[k] == id) return 1;
    for (int k = 0; k < p->n_stop_ids; k++)
        if (p->stop_ids[k] == id) return 1;
    return 0;
}

/* Where constrained decoding applies its mask: "device" (the default: the
 * backend's generate op when it has one, else the host loop) or "host"
 * (always the host loop: LILAC_MASK=host, for comparisons and as a way out).
 * Returns 1 for the device, 0 for the host; anything else is the default. */
static int mask_on_device(const char *env) { return !(env && strcmp(env, "host") == 0); }

/* One uninterrupted generation: on the device when the backend takes p,
 * else the host loop over forward(). */
static lilac_status gen_run(lilac_session *s, const lilac_gen_params *p, lilac_token_cb cb, void *ctx, int *n_out,
                            lilac_finish *why, lilac_error *e) {
    const lilac_config *c = &s->g->model.cfg;
    const lilac_sampling *sp = &p->sampling;
    *n_out = 0;
    *why = LILAC_FINISH_LENGTH;
    if (s->g->ops->generate && p->max_tokens > 0 && (!p->constraint || mask_on_device(getenv("LILAC_MASK")))) {
        /* Generation on the device: no per-token round trip (with a
         * constraint, one per token for the mask, overlapped with the
         * layers).  It declines (EUNSUPPORTED) what it does not do, and the
         * host loop runs. */
        int32_t *out = malloc((size_t)(s->cap + 1) * sizeof *out);
        if (!out) return lilac_fail(e, LILAC_ENOMEM, "generation buffer");
        int n_gen = 0, n_fed = 0, pos = lilac_session_len(s);
        lilac_status st = s->g->ops->generate(s->g->be, s->st, p, s->tokens, pos, s->logits, cb, ctx, out, &n_gen, &n_fed, why,
                                              s->logits, e);
        if (st != LILAC_EUNSUPPORTED) {
            if (n_fed > 0) memcpy(s->tokens + pos, out, (size_t)n_fed * sizeof *out);
            free(out);
            *n_out = n_gen;
            return st;
        }
        free(out);
    }
    const int len = lilac_session_len(s);
    const lilac_constraint *k = p->constraint;
    if (k && !s->allow && !(s->allow = malloc((size_t)(c->vocab_size + 31) / 32 * sizeof *s->allow)))
        return lilac_fail(e, LILAC_ENOMEM, "constraint mask");
    lilac_sampler_begin(&s->sampler, sp, s->tokens, len);
    for (int i = len - p->n_prior_gen; i < len; i++) lilac_sampler_accept(&s->sampler, s->tokens[i]);
    /* The mask for the next token is asked before the previous one is fed,
     * so a complete constraint (MASK_NONE: no end id allowed) ends the run
     * with that token unfed, as an end id would. */
    int mk = k && p->max_tokens > 0 ? k->mask(k->ctx, s->allow) : LILAC_MASK_ALL;
    for (int i = 0; i < p->max_tokens; i++) {
        lilac_token_info t = {0};
        if (mk == LILAC_MASK_ERROR) return lilac_fail(e, LILAC_EINVAL, "constrained decoding: the constraint failed");
        if (mk == LILAC_MASK_NONE) {
            *why = LILAC_FINISH_EOS;
            return LILAC_OK;
        }
        t.id = lilac_sampler_pick_masked(&s->sampler, sp, s->logits, mk == LILAC_MASK_SOME ? s->allow : NULL);
        if (k && k->accept(k->ctx, t.id))
            return lilac_fail(e, LILAC_EINVAL, "constrained decoding: token %d was not allowed", t.id);
        t.index = i;
        if (p->logprobs || p->top_logprobs)
            lilac_logprobs(s->logits, c->vocab_size, t.id, p->top_logprobs, &t, s->sampler.idx);
        lilac_sampler_accept(&s->sampler, t.id);
        (*n_out)++;
        if (cb && cb(ctx, &t)) {
            *why = LILAC_FINISH_CALLBACK;
            return LILAC_OK;
        }
        if (is_stop(c, p, t.id)) {
            *why = LILAC_FINISH_EOS;
            return LILAC_OK;
        }
        if (i == p->max_tokens - 1 || lilac_session_len(s) >= s->cap) break;
        if (k && ((mk = k->mask(k->ctx, s->allow)) == LILAC_MASK_NONE || mk == LILAC_MASK_ERROR)) continue;
        lilac_status st = feed(s, &t.id, 1, NULL, 0, NULL, e);
        if (st) return st;
    }
    *why = LILAC_FINISH_LENGTH;
    return LILAC_OK;
}

/* Passes a run's tokens on with their index in the whole answer, and
 * remembers the last one (a run does not feed its last token). */
typedef struct {
    lilac_token_cb cb;
    void *ctx;
    int base;     /* tokens the answer had before this run */
    int32_t last; /* the last id passed on; -1 none */
} relay;

static int relay_cb(void *c, const lilac_token_info *t) {
    relay *r = c;
    r->last = t->id;
    if (!r->cb) return 0;
    lilac_token_info u = *t;
    u.index += r->base;
    return r->cb(r->ctx, &u);
}

/* A different random stream for the answer after a forced close (the same
 * seed would replay the reasoning's draws). */
static uint64_t reseed(uint64_t x) {
    x ^= 0x7468696e6b656e64ull; /* "thinkend" */
    x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
    x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The answer after the reasoning: the rest of max_tokens from the state that
 * now holds all n tokens generated so far. */
static lilac_status gen_answer(lilac_session *s, const lilac_gen_params *p, relay *r, int n, int *n_out, lilac_finish *why,
                               lilac_error *e) {
    lilac_gen_params p2 = *p;
    p2.n_think_end = 0;
    p2.think_end = NULL;
    p2.max_tokens = p->max_tokens - n;
    p2.n_prior_gen = p->n_prior_gen + n;
    p2.sampling.seed = reseed(p->sampling.seed);
    r->base = n;
    int n2 = 0;
    lilac_status st = gen_run(s, &p2, relay_cb, r, &n2, why, e);
    *n_out = n + n2;
    return st;
}

/* Generation with a reasoning budget (lilac.h).  The budget is a token limit
 * on a first run, which stops early on think_close; no backend needs to know
 * about it, so the device loop (which runs ahead of the host) is used
 * unchanged for both runs:
 *   1. run with max_tokens = min(budget, max_tokens) and think_close as an
 *      extra stop id;
 *   2. the model closed the reasoning itself: feed its think_close, go on;
 *      else, at the budget: feed the run's last token and the closing
 *      sequence (all of it but its last token, the state's rule for a
 *      generated token), hand the closing tokens to the callback, feed the
 *      last one;
 *   3. run the answer with the rest of max_tokens (penalties count the
 *      tokens before it as generated). */
static lilac_status gen_budget(lilac_session *s, const lilac_gen_params *p, lilac_token_cb cb, void *ctx, int *n_out,
                               lilac_finish *why, lilac_error *e) {
    const int V = s->g->model.cfg.vocab_size, pos0 = lilac_session_len(s);
    relay r = {cb, ctx, 0, -1};
    int n = 0, closed = 0;
    lilac_status st;
    *why = LILAC_FINISH_LENGTH;
    if (p->think_budget > 0) {
        int32_t *stops = malloc((size_t)(p->n_stop_ids + 1) * sizeof *stops);
        if (!stops) return lilac_fail(e, LILAC_ENOMEM, "stop ids");
        if (p->n_stop_ids) memcpy(stops, p->stop_ids, (size_t)p->n_stop_ids * sizeof *stops);
        stops[p->n_stop_ids] = p->think_close;
        lilac_gen_params p1 = *p;
        p1.n_think_end = 0;
        p1.think_end = NULL;
        p1.stop_ids = stops;
        p1.n_stop_ids = p->n_stop_ids + 1;
        p1.max_tokens = p->max_tokens < p->think_budget ? p->max_tokens : p->think_budget;
        st = gen_run(s, &p1, relay_cb, &r, &n, why, e);
        free(stops);
        *n_out = n;
        if (st || *why == LILAC_FINISH_CALLBACK) return st;
        if (*why == LILAC_FINISH_EOS && r.last != p->think_close) return LILAC_OK; /* an end id */
        closed = *why == LILAC_FINISH_EOS;
        if (!closed && n < p1.max_tokens) return LILAC_OK; /* the session is full */
        if (n >= p->max_tokens) {
            *why = LILAC_FINISH_LENGTH;
            return LILAC_OK;
        }
    }
    /* the state holds the first `fed` generated tokens; the run's last one is pending */
    int fed = lilac_session_len(s) - pos0;
    if (fed != n && fed != n - 1)
        return lilac_fail(e, LILAC_EBACKEND, "reasoning budget: the state holds %d of %d generated tokens", fed, n);
    const int32_t pend = fed < n ? r.last : -1;
    if (closed) {
        if (pend >= 0 && lilac_session_len(s) >= s->cap) {
            *why = LILAC_FINISH_LENGTH; /* no room for the answer */
            return LILAC_OK;
        }
        if (pend >= 0 && (st = feed(s, &pend, 1, NULL, 0, NULL, e))) return st;
        return gen_answer(s, p, &r, n, n_out, why, e);
    }
    /* the closing sequence, as far as max_tokens and the session allow */
    int k = p->n_think_end, m = k < p->max_tokens - n ? k : p->max_tokens - n;
    int room = s->cap - lilac_session_len(s) - (pend >= 0); /* positions for the closing tokens but the last */
    if (m - 1 > room) m = room + 1;
    if (m <= 0) {
        *why = LILAC_FINISH_LENGTH;
        return LILAC_OK;
    }
    int32_t ids[LILAC_MAX_THINK_END + 1];
    int f = 0;
    if (pend >= 0) ids[f++] = pend;
    for (int i = 0; i < m - 1; i++) ids[f++] = p->think_end[i];
    lilac_token_info ti[LILAC_MAX_THINK_END];
    memset(ti, 0, sizeof ti);
    const int lp = p->logprobs || p->top_logprobs;
    /* logprobs of the closing tokens under the model: token i's logits are
     * the row after the token before it */
    if (lp && pend < 0) lilac_logprobs(s->logits, V, p->think_end[0], p->top_logprobs, &ti[0], s->sampler.idx);
    if (f > 0) {
        float *all = lp ? malloc((size_t)f * (size_t)V * sizeof *all) : NULL;
        if (lp && !all) return lilac_fail(e, LILAC_ENOMEM, "logits of the closing sequence");
        st = feed(s, ids, f, all, lp, NULL, e);
        for (int row = 0; !st && lp && row < f; row++) {
            int i = pend >= 0 ? row : row + 1;
            if (i < m) lilac_logprobs(all + (size_t)row * V, V, p->think_end[i], p->top_logprobs, &ti[i], s->sampler.idx);
        }
        free(all);
        if (st) return st;
    }
    for (int i = 0; i < m; i++) {
        ti[i].id = p->think_end[i];
        ti[i].index = n;
        ti[i].forced = 1;
        if (p->constraint && p->constraint->accept(p->constraint->ctx, ti[i].id))
            return lilac_fail(e, LILAC_EINVAL, "constrained decoding: the closing token %d was not allowed", ti[i].id);
        n++;
        *n_out = n;
        if (cb && cb(ctx, &ti[i])) {
            *why = LILAC_FINISH_CALLBACK;
            return LILAC_OK;
        }
    }
    if (m < k || n >= p->max_tokens || lilac_session_len(s) >= s->cap) {
        *why = LILAC_FINISH_LENGTH;
        return LILAC_OK;
    }
    if ((st = feed(s, &p->think_end[k - 1], 1, NULL, 0, NULL, e))) return st;
    return gen_answer(s, p, &r, n, n_out, why, e);
}

lilac_status lilac_session_generate(lilac_session *s, const lilac_gen_params *p, lilac_token_cb cb, void *ctx, int *n_out,
                                    lilac_finish *why, lilac_error *e) {
    const lilac_config *c = &s->g->model.cfg;
    *n_out = 0;
    *why = LILAC_FINISH_LENGTH;
    if (!s->have_logits) return lilac_fail(e, LILAC_EINVAL, "generate needs a prompt of at least one token");
    const lilac_sampling *sp = &p->sampling;
    if (!(sp->temperature >= 0) || !(sp->top_p > 0 && sp->top_p <= 1) || !(sp->min_p >= 0 && sp->min_p <= 1) ||
        sp->top_k < 0 || !(sp->repetition_penalty > 0) || p->top_logprobs < 0 || p->top_logprobs > LILAC_MAX_TOP_LOGPROBS)
        return lilac_fail(e, LILAC_EINVAL, "sampling parameters out of range");
    if (p->n_prior_gen < 0 || p->n_prior_gen > lilac_session_len(s))
        return lilac_fail(e, LILAC_EINVAL, "n_prior_gen %d is outside [0, %d] (the session's tokens)", p->n_prior_gen,
                          lilac_session_len(s));
    if (p->n_think_end <= 0) return gen_run(s, p, cb, ctx, n_out, why, e);
    if (p->n_think_end > LILAC_MAX_THINK_END || !p->think_end || p->think_budget < 0)
        return lilac_fail(e, LILAC_EINVAL, "reasoning budget: %d closing tokens (at most %d) and budget %d (>= 0)",
                          p->n_think_end, LILAC_MAX_THINK_END, p->think_budget);
    for (int i = 0; i <= p->n_think_end; i++) {
        int32_t id = i < p->n_think_end ? p->think_end[i] : p->think_close;
        if (id < 0 || id >= c->vocab_size)
            return lilac_fail(e, LILAC_EINVAL, "reasoning budget: token id %d is outside the vocabulary [0, %d)", id,
                              c->vocab_size);
    }
    return gen_budget(s, p, cb, ctx, n_out, why, e);
}

lilac_status lilac_session_fill_random(lilac_session *s, int n, uint64_t seed, lilac_error *e) {
    lilac_engine *g = s->g;
    if (!g->ops->state_fill_random) return lilac_fail(e, LILAC_EUNSUPPORTED, "the %s backend cannot fake a context", g->ops->name);
    if (n < 0 || n + 1 > s->cap) return lilac_fail(e, LILAC_EINVAL, "%d positions do not fit a %d-token session", n, s->cap);
    lilac_status st = g->ops->state_fill_random(g->be, s->st, n, seed, e);
    if (st) return st;
    memset(s->tokens, 0, (size_t)n * sizeof *s->tokens);
    int32_t one = 0;
    return feed(s, &one, 1, NULL, 0, NULL, e);
}

lilac_status lilac_session_profile(lilac_session *s, lilac_profile *p, lilac_error *e) {
    lilac_engine *g = s->g;
    if (!g->ops->profile) return lilac_fail(e, LILAC_EUNSUPPORTED, "the %s backend has no profiler", g->ops->name);
    memset(p, 0, sizeof *p);
    int before = lilac_session_len(s);
    lilac_status st = g->ops->profile(g->be, s->st, p, e);
    int after = lilac_session_len(s);
    if (after > before) memset(s->tokens + before, 0, (size_t)(after - before) * sizeof *s->tokens);
    s->have_logits = 0; /* the host copy no longer matches the state */
    return st;
}

lilac_status lilac_engine_prefill_profile(lilac_engine *g, int on, lilac_profile *p, lilac_error *e) {
    if (!g->ops->prefill_profile) return lilac_fail(e, LILAC_EUNSUPPORTED, "the %s backend has no prefill profiler", g->ops->name);
    return g->ops->prefill_profile(g->be, on, p, e);
}

typedef struct {
    int32_t *out;
} greedy_ctx;

static int collect(void *ctx, const lilac_token_info *t) {
    ((greedy_ctx *)ctx)->out[t->index] = t->id;
    return 0;
}

lilac_status lilac_session_generate_greedy(lilac_session *s, int n, int stop_at_eos, int32_t *out, int *n_out,
                                           lilac_error *e) {
    lilac_gen_params p = {0};
    p.max_tokens = n;
    p.sampling = lilac_sampling_greedy();
    p.stop_at_eos = stop_at_eos;
    greedy_ctx ctx = {out};
    lilac_finish why;
    return lilac_session_generate(s, &p, collect, &ctx, n_out, &why, e);
}
