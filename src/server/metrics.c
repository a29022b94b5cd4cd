/* metrics.c — GET /metrics: the server's counters in the Prometheus text
 * exposition format (version 0.0.4).
 *
 * Owns what only metrics need: answers by endpoint and status, the
 * time-to-first-token and inter-token latency histograms, prefill and decode
 * work (tokens and seconds, totals and the last request's rate), and the
 * prefix cache's snapshot count and bytes.  Token and cache counters that
 * /health reports too stay in srv_ctx.stats and are read from there.  One
 * mutex; updates are a few additions, so the engine thread's per-token call
 * costs nothing measurable. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

#define MAX_BUCKETS 16
#define MAX_PAIRS 64

typedef struct {
    const double *le; /* upper bounds, ascending */
    int n;
    unsigned long long count[MAX_BUCKETS]; /* per bucket (not cumulative) */
    unsigned long long total;
    double sum;
} hist;

static const double TTFT_LE[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
static const double GAP_LE[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

struct srv_metrics {
    pthread_mutex_t mu;
    struct {
        srv_endpoint ep;
        int status;
        unsigned long long n;
    } req[MAX_PAIRS];
    int n_req;
    hist ttft, gap;
    unsigned long long prefilled, decoded;
    double prefill_s, decode_s;
    double last_prefill_tps, last_decode_tps;
    int snaps;
    size_t snap_bytes;
};

static const char *const EP_NAME[SRV_EP_N] = {
    "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
    "/v1/models", "/health", "/metrics", "/", "other",
};

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

srv_metrics *srv_metrics_new(void) {
    srv_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->ttft.le = TTFT_LE, m->ttft.n = (int)(sizeof TTFT_LE / sizeof TTFT_LE[0]);
    m->gap.le = GAP_LE, m->gap.n = (int)(sizeof GAP_LE / sizeof GAP_LE[0]);
    return m;
}

void srv_metrics_free(srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int status) {
    if (!m || ep < 0 || ep >= SRV_EP_N) return;
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->n_req && !(m->req[i].ep == ep && m->req[i].status == status)) i++;
    if (i == m->n_req && i < MAX_PAIRS) {
        m->req[i].ep = ep, m->req[i].status = status, m->req[i].n = 0;
        m->n_req++;
    }
    if (i < m->n_req) m->req[i].n++;
    pthread_mutex_unlock(&m->mu);
}

static void observe(hist *h, double v) {
    int b = 0;
    while (b < h->n && v > h->le[b]) b++;
    if (b < h->n) h->count[b]++; /* above the last bound: only +Inf, i.e. total */
    h->total++;
    h->sum += v;
}

void srv_metrics_ttft(srv_metrics *m, double s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    observe(&m->ttft, s);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_token_gap(srv_metrics *m, double s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    observe(&m->gap, s);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_job(srv_metrics *m, int prefilled, double prefill_s, int decoded, double decode_s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->prefilled += (unsigned long long)(prefilled > 0 ? prefilled : 0);
    m->decoded += (unsigned long long)(decoded > 0 ? decoded : 0);
    m->prefill_s += prefill_s;
    m->decode_s += decode_s;
    if (prefilled > 0 && prefill_s > 0) m->last_prefill_tps = prefilled / prefill_s;
    if (decoded > 0 && decode_s > 0) m->last_decode_tps = decoded / decode_s;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_snapshots(srv_metrics *m, int n, size_t bytes) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->snaps = n;
    m->snap_bytes = bytes;
    pthread_mutex_unlock(&m->mu);
}

static void head(lilac_buf *b, const char *name, const char *type, const char *help) {
    lilac_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(lilac_buf *b, const char *name, const char *type, const char *help, double v) {
    head(b, name, type, help);
    lilac_buf_printf(b, "%s %.17g\n", name, v);
}

static void histogram(lilac_buf *b, const char *name, const char *help, const hist *h) {
    head(b, name, "histogram", help);
    unsigned long long cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->count[i];
        lilac_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], cum);
    }
    lilac_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name, h->total, name, h->sum, name,
                     h->total);
}

char *srv_metrics_render(srv_ctx *srv) {
    srv_metrics *m = srv->metrics;
    pthread_mutex_lock(&srv->stats_mu);
    srv_stats st = srv->stats;
    pthread_mutex_unlock(&srv->stats_mu);
    srv_metrics c;
    pthread_mutex_lock(&m->mu);
    memcpy(&c, m, sizeof c);
    pthread_mutex_unlock(&m->mu);

    lilac_buf b = LILAC_BUF_INIT;
    head(&b, "lilac_http_requests_total", "counter", "HTTP answers by endpoint and status code.");
    for (int i = 0; i < c.n_req; i++)
        lilac_buf_printf(&b, "lilac_http_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", EP_NAME[c.req[i].ep],
                         c.req[i].status, c.req[i].n);
    head(&b, "lilac_requests_total", "counter", "Generation requests the engine finished, by outcome.");
    lilac_buf_printf(&b, "lilac_requests_total{outcome=\"completed\"} %ld\n", st.completed);
    lilac_buf_printf(&b, "lilac_requests_total{outcome=\"cancelled\"} %ld\n", st.cancelled);
    lilac_buf_printf(&b, "lilac_requests_total{outcome=\"error\"} %ld\n", st.errors);
    lilac_buf_printf(&b, "lilac_requests_total{outcome=\"rejected_busy\"} %ld\n", st.rejected_busy);
    scalar(&b, "lilac_prompt_tokens_total", "counter", "Prompt tokens of requests the engine ran.", (double)st.prompt_tokens);
    scalar(&b, "lilac_cached_tokens_total", "counter", "Prompt tokens reused from the prefix cache instead of computed.",
           (double)st.cached_tokens);
    scalar(&b, "lilac_generated_tokens_total", "counter", "Tokens generated.", (double)st.generated_tokens);
    scalar(&b, "lilac_reasoning_tokens_total", "counter", "Generated tokens inside think blocks (before </think>).",
           (double)st.reasoning_tokens);
    scalar(&b, "lilac_prefill_tokens_total", "counter", "Prompt tokens computed (prefilled).", (double)c.prefilled);
    scalar(&b, "lilac_prefill_seconds_total", "counter", "Time spent prefilling.", c.prefill_s);
    scalar(&b, "lilac_decode_tokens_total", "counter", "Tokens decoded by finished requests.", (double)c.decoded);
    scalar(&b, "lilac_decode_seconds_total", "counter", "Time spent decoding.", c.decode_s);
    scalar(&b, "lilac_prefill_tokens_per_second", "gauge", "Prefill speed of the last request that prefilled.",
           c.last_prefill_tps);
    scalar(&b, "lilac_decode_tokens_per_second", "gauge", "Decode speed of the last request that decoded.", c.last_decode_tps);
    histogram(&b, "lilac_time_to_first_token_seconds", "From a request's arrival to its first generated token.", &c.ttft);
    histogram(&b, "lilac_inter_token_latency_seconds", "Between consecutive generated tokens of a request.", &c.gap);
    scalar(&b, "lilac_queue_waiting", "gauge", "Requests waiting for the engine.", srv_queue_waiting(srv->q));
    scalar(&b, "lilac_queue_running", "gauge", "Requests the engine is running (0 or 1).", srv_queue_busy(srv->q));
    scalar(&b, "lilac_queue_capacity", "gauge", "Waiting requests accepted before 429 (--queue).", srv->o.queue);
    scalar(&b, "lilac_prefix_cache_lookups_total", "counter", "Requests that looked in the prefix cache.",
           (double)st.cache_lookups);
    scalar(&b, "lilac_prefix_cache_hits_total", "counter", "Requests that reused a cached prefix.", (double)st.cache_hits);
    scalar(&b, "lilac_prefix_cache_reused_tokens_total", "counter", "Prompt tokens reused from the prefix cache.",
           (double)st.cached_tokens);
    scalar(&b, "lilac_prefix_cache_evictions_total", "counter", "Snapshots the LRU replaced to make room.",
           (double)st.cache_evictions);
    scalar(&b, "lilac_prefix_cache_superseded_total", "counter",
           "Snapshots dropped because a longer prompt end of the same conversation extends them.",
           (double)st.cache_superseded);
    scalar(&b, "lilac_prefix_cache_slots", "gauge", "Prefix-cache slots (--slots).", srv->o.slots);
    scalar(&b, "lilac_prefix_cache_snapshots", "gauge", "Snapshots the prefix cache holds.", c.snaps);
    scalar(&b, "lilac_prefix_cache_snapshot_bytes", "gauge", "Memory the held snapshots occupy on the backend.",
           (double)c.snap_bytes);
    /* per tier: device (the slots and the working session), ram (--cache-ram), disk (--cache-dir) */
    static const struct {
        const char *name, *type, *help;
    } TIER_METRIC[6] = {
        {"lilac_prefix_cache_tier_hits_total", "counter", "Requests whose reused prefix came from this tier."},
        {"lilac_prefix_cache_tier_reused_tokens_total", "counter", "Prompt tokens reused from this tier."},
        {"lilac_prefix_cache_tier_evictions_total", "counter",
         "Snapshots this tier's bound pushed out (to the next tier, or dropped)."},
        {"lilac_prefix_cache_tier_snapshots", "gauge", "Snapshots this tier holds."},
        {"lilac_prefix_cache_tier_bytes", "gauge", "Bytes the snapshots of this tier occupy."},
        {"lilac_prefix_cache_tier_capacity_bytes", "gauge", "This tier's bound in bytes (0: off)."},
    };
    for (int k = 0; k < 6; k++) {
        head(&b, TIER_METRIC[k].name, TIER_METRIC[k].type, TIER_METRIC[k].help);
        for (int t = 0; t < SRV_TIER_N; t++) {
            const srv_tier_stats *ts = &st.tiers[t];
            const double v[6] = {(double)ts->hits, (double)ts->reused_tokens, (double)ts->evictions,
                                 (double)ts->snapshots, (double)ts->bytes, (double)ts->capacity};
            lilac_buf_printf(&b, "%s{tier=\"%s\"} %.17g\n", TIER_METRIC[k].name, srv_tier_name[t], v[k]);
        }
    }
    scalar(&b, "lilac_session_bytes", "gauge", "Memory of one session of --ctx tokens on the backend.",
           (double)lilac_session_bytes(srv->eng, srv->o.ctx));
    scalar(&b, "lilac_weight_bytes", "gauge", "Bytes of the model's weight matrices as stored.", (double)srv->info.weight_bytes);
    size_t used = 0, total = 0;
    if (lilac_engine_device_memory(srv->eng, &used, &total) == LILAC_OK) {
        scalar(&b, "lilac_gpu_memory_used_bytes", "gauge", "GPU memory in use (whole device).", (double)used);
        scalar(&b, "lilac_gpu_memory_total_bytes", "gauge", "GPU memory of the device.", (double)total);
    }
    scalar(&b, "lilac_context_tokens", "gauge", "Tokens per session (--ctx).", srv->o.ctx);
    scalar(&b, "lilac_start_time_seconds", "gauge", "Start time of the server, seconds since the epoch.",
           (double)srv->started);
    if (b.oom) {
        lilac_buf_free(&b);
        return NULL;
    }
    return lilac_buf_take(&b);
}
