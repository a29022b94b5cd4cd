/* worker.c — the engine thread: runs queued jobs one at a time, in arrival
 * order, on one working session, with the prefix cache.
 *
 * For each job:
 *   1. reuse: the longest cached state whose whole token sequence starts the
 *      prompt — the working session itself when it qualifies (no copy), else
 *      a slot copied into it (recurrent state cannot be rewound, so only
 *      exact full-prefix matches count);
 *   2. prefill the rest in chunks (the client may leave between chunks),
 *      snapshotting at the job's split points (anchors: the end of the
 *      system turn, and just after the "<|im_start|>assistant\n" that
 *      follows a user message) and at the end of the prompt;
 *   3. generate with the output callback (output.c);
 *   4. finish the job, then snapshot the end of the generated text: for a chat
 *      turn that ended with <|im_end|>, after feeding <|im_end|> and "\n" —
 *      exactly what the next turn's rendering holds when the template
 *      re-renders the turn as generated; for completions, after feeding the
 *      last token (prompt + completion).
 * With --slots 0 nothing is reused and nothing is snapshotted.  With
 * --cache-ram / --cache-dir, step 1 also considers the snapshots in host
 * memory and on disk (prefix_cache.c); the tier a reused prefix came from is
 * counted for /health and /metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

struct srv_worker {
    srv_ctx *srv;
    pthread_t th;
    lilac_session *cur;
    int cur_valid; /* cur's state matches its tokens (false after a failed feed) */
    srv_pcache *pc;
    size_t snap_bytes; /* bytes of one snapshot (a session of --ctx tokens) */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Feeds prompt[from..to) in chunks, stopping between chunks when cancelled. */
static lilac_status feed_range(srv_worker *w, srv_job *j, int from, int to, lilac_error *e) {
    int step = w->srv->info.chunk > 0 ? w->srv->info.chunk : 512;
    for (int off = from; off < to; off += step) {
        if (atomic_load(&j->cancel)) return lilac_fail(e, LILAC_ECANCELLED, "cancelled");
        int m = to - off < step ? to - off : step;
        lilac_status st = lilac_session_feed(w->cur, j->prompt + off, m, NULL, 0, e);
        if (st) return st;
    }
    return LILAC_OK;
}

/* The cache's counters and sizes into /health's and /metrics' copies. */
static void publish(srv_worker *w) {
    int used = srv_pcache_used(w->pc);
    srv_metrics_snapshots(w->srv->metrics, used, (size_t)used * w->snap_bytes);
    long ev, sup;
    srv_pcache_counts(w->pc, &ev, &sup);
    srv_tier_stats tiers[SRV_TIER_N];
    srv_pcache_tier_stats(w->pc, tiers);
    pthread_mutex_lock(&w->srv->stats_mu);
    w->srv->stats.cache_evictions = ev;
    w->srv->stats.cache_superseded = sup;
    w->srv->stats.cache_snapshots = used;
    memcpy(w->srv->stats.tiers, tiers, sizeof tiers);
    pthread_mutex_unlock(&w->srv->stats_mu);
}

static void snapshot(srv_worker *w, srv_snap kind) {
    lilac_error e = {0};
    if (srv_pcache_store(w->pc, w->cur, kind, &e)) fprintf(stderr, "lilac serve: prefix cache: %s\n", e.msg);
    publish(w);
}

/* Picks the state to start from; returns the number of prompt tokens reused
 * (and in *tier where they came from). */
static int reuse(srv_worker *w, srv_job *j, srv_tier *tier, lilac_error *e) {
    *tier = SRV_TIER_DEVICE;
    if (w->srv->o.slots <= 0) {
        lilac_session_reset(w->cur);
        return 0;
    }
    int len = 0, slot = srv_pcache_find(w->pc, j->prompt, j->n_prompt, &len);
    int cl = w->cur_valid ? lilac_session_len(w->cur) : 0;
    int cur_ok = cl > 0 && cl <= j->n_prompt && memcmp(lilac_session_tokens(w->cur), j->prompt, (size_t)cl * sizeof(int32_t)) == 0;
    /* a longer prefix in RAM or on disk comes into a slot first */
    int dlen = 0, dslot = srv_pcache_fetch(w->pc, j->prompt, j->n_prompt, cur_ok && cl > len ? cl : len, &dlen, tier);
    if (dslot >= 0) slot = dslot, len = dlen;
    else *tier = SRV_TIER_DEVICE;
    if (cur_ok && cl >= len) return cl;
    if (slot >= 0 && srv_pcache_restore(w->pc, slot, w->cur, e) == LILAC_OK) {
        w->cur_valid = 1;
        return len;
    }
    if (slot >= 0) fprintf(stderr, "lilac serve: prefix cache restore: %s\n", e->msg);
    lilac_session_reset(w->cur);
    w->cur_valid = 1;
    return 0;
}

static void run(srv_worker *w, srv_job *j) {
    srv_ctx *srv = w->srv;
    lilac_error e = {0};
    double t0 = now_ms();
    const int slots = srv->o.slots;
    int n = j->n_prompt, n_out = 0;
    lilac_finish why = LILAC_FINISH_LENGTH;
    lilac_status st = LILAC_OK;

    srv_tier tier;
    int start = reuse(w, j, &tier, &e);
    j->cached = start;
    if (slots > 0) {
        srv_pcache_touch_anchors(w->pc, j->prompt, start); /* the anchors inside the reused prefix were used too */
        srv_pcache_hit(w->pc, tier, start);
        publish(w);
    }
    if (j->api == SRV_API_ANTHROPIC && j->stream) srv_anth_stream_start(j); /* message_start carries the cached count */
    for (int k = 0; slots > 0 && !st && k < j->n_split; k++) {
        if (j->split[k] <= start || j->split[k] >= n) continue;
        if (!(st = feed_range(w, j, start, j->split[k], &e))) {
            snapshot(w, SRV_SNAP_ANCHOR);
            start = j->split[k];
        }
    }
    if (!st && start < n && !(st = feed_range(w, j, start, n, &e)) && slots > 0) snapshot(w, SRV_SNAP_PROMPT);
    double t_prefill = now_ms();
    if (!st && srv_output_begin(j)) st = lilac_fail(&e, LILAC_ENOMEM, "output state");
    if (!st) st = lilac_session_generate(w->cur, &j->gen, srv_output_token, j, &n_out, &why, &e);
    j->why = why;
    int cancel = atomic_load(&j->cancel);
    int cut = st == LILAC_ECANCELLED || (!st && why == LILAC_FINISH_CALLBACK && !j->stop_hit && cancel);
    if (st && st != LILAC_ECANCELLED) {
        w->cur_valid = 0; /* the state may be partly advanced */
        fprintf(stderr, "lilac serve: %s: engine: %s\n", j->id, e.msg);
        srv_err err;
        srv_errf(&err, 500, NULL, "internal error while generating");
        srv_job_fail(j, &err);
        if (j->stream) srv_resp_stream_error(j, &err);
    } else if (cut) {
        if (cancel == 2) { /* the server is stopping; a client that is still there gets 503 */
            srv_err err;
            srv_errf(&err, 503, NULL, "the server is shutting down");
            err.code = "shutting_down";
            srv_job_fail(j, &err);
            if (j->stream) srv_resp_stream_error(j, &err);
        }
    } else {
        srv_output_end(j);
    }
    double t_end = now_ms();
    if (!st && !cut) srv_metrics_job(srv->metrics, n - j->cached, (t_prefill - t0) * 1e-3, n_out, (t_end - t_prefill) * 1e-3);
    int32_t last = j->last_id;
    int ended_turn = !st && !cut && j->kind == SRV_CHAT && j->chat_snapshot_end && why == LILAC_FINISH_EOS &&
                     last == srv->im_end && srv->n_nl > 0;
    int completion = !st && !cut && j->kind == SRV_COMPLETION && n_out > 0;
    /* counters and the log line before finishing: the job may be freed after */
    pthread_mutex_lock(&srv->stats_mu);
    srv->stats.cache_lookups += slots > 0;
    srv->stats.cache_hits += j->cached > 0;
    srv->stats.prompt_tokens += n;
    srv->stats.cached_tokens += j->cached;
    srv->stats.generated_tokens += n_out;
    srv->stats.reasoning_tokens += j->reasoning_tokens;
    if (cut) srv->stats.cancelled++;
    else if (st) srv->stats.errors++;
    else srv->stats.completed++;
    pthread_mutex_unlock(&srv->stats_mu);
    if (!srv->o.quiet) {
        double t1 = now_ms();
        char gram[64] = ""; /* constrained decoding: the masks' time */
        long masks = 0;
        double mask_s = 0;
        if (j->constraint) lg_constraint_stats(j->constraint, &masks, &mask_s);
        if (masks) snprintf(gram, sizeof gram, " masks=%ld mask=%.1fms", masks, mask_s * 1e3);
        fprintf(stderr, "lilac serve: %s %s prompt=%d cached=%d gen=%d finish=%s prefill=%.0fms total=%.0fms%s\n",
                j->id, !cut ? (st ? "failed" : "done") : cancel == 2 ? "cancelled: shutting down" : "cancelled: client closed",
                n, j->cached, n_out,
                cut || st ? "-" : srv_finish_reason(j), t_prefill - t0, t1 - t0, gram);
        if (st && j->constraint && lg_constraint_error(j->constraint)[0])
            fprintf(stderr, "lilac serve: %s: constrained decoding: %s\n", j->id, lg_constraint_error(j->constraint));
    }
    srv_job_finish(j);

    /* end-of-generation snapshot, after the client has its answer */
    if (slots > 0 && (ended_turn || completion)) {
        int32_t ids[8];
        int k = 0;
        ids[k++] = last; /* generate() does not feed the last token */
        if (ended_turn)
            for (int i = 0; i < srv->n_nl && k < 8; i++) ids[k++] = srv->nl_ids[i];
        if (lilac_session_len(w->cur) + k <= lilac_session_capacity(w->cur)) {
            if (lilac_session_feed(w->cur, ids, k, NULL, 0, &e)) {
                w->cur_valid = 0;
                fprintf(stderr, "lilac serve: end snapshot: %s\n", e.msg);
            } else {
                snapshot(w, SRV_SNAP_GEN);
            }
        }
    }
}

static void *thread_main(void *arg) {
    srv_worker *w = arg;
    srv_job *j;
    while ((j = srv_queue_pop(w->srv->q))) {
        run(w, j);
        srv_queue_clear_running(w->srv->q);
        srv_job_release(j);
    }
    return NULL;
}

lilac_status srv_worker_start(srv_ctx *srv, srv_worker **out, lilac_error *e) {
    *out = NULL;
    srv_worker *w = calloc(1, sizeof *w);
    if (!w) return lilac_fail(e, LILAC_ENOMEM, "worker");
    w->srv = srv;
    w->snap_bytes = lilac_session_bytes(srv->eng, srv->o.ctx);
    lilac_status st = lilac_session_new(srv->eng, srv->o.ctx, &w->cur, e);
    if (!st) st = srv_pcache_new(srv->eng, srv->o.slots, srv->o.ctx, &w->pc, e);
    if (!st) srv_pcache_set_ram(w->pc, srv->o.cache_ram);
    if (!st && srv->o.cache_dir && srv->o.slots > 0) st = srv_pcache_open_dir(w->pc, srv->o.cache_dir, srv->o.cache_disk, e);
    if (!st && srv->o.cache_dir && srv->o.slots > 0) {
        uint64_t bytes = 0;
        int nf = srv_pcache_disk_count(w->pc, &bytes);
        fprintf(stderr, "lilac serve: prefix cache on disk: %s: %d snapshot%s (%.1f MiB; at most %.1f MiB)\n",
                srv->o.cache_dir, nf, nf == 1 ? "" : "s", bytes / 1048576.0, srv->o.cache_disk / 1048576.0);
    }
    if (!st && srv->o.cache_ram && srv->o.slots > 0)
        fprintf(stderr, "lilac serve: prefix cache in RAM: at most %.1f MiB of snapshots evicted from the slots\n",
                srv->o.cache_ram / 1048576.0);
    if (!st) publish(w);
    w->cur_valid = 1;
    if (!st && pthread_create(&w->th, NULL, thread_main, w)) st = lilac_fail(e, LILAC_ENOMEM, "cannot start the engine thread");
    if (st) {
        srv_pcache_free(w->pc);
        lilac_session_free(w->cur);
        free(w);
        return st;
    }
    *out = w;
    return LILAC_OK;
}

void srv_worker_join(srv_worker *w) {
    if (!w) return;
    pthread_join(w->th, NULL);
    srv_pcache_free(w->pc);
    lilac_session_free(w->cur);
    free(w);
}
