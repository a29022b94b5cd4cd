/* sample.c — host-side sampling (see sample.h for the order of operations). */
#include "engine/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* splitmix64 expands the seed into xoshiro256**'s state. */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void lilac_rng_seed(lilac_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lilac_rng_next(lilac_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return out;
}

double lilac_rng_uniform(lilac_rng *r) { return (double)(lilac_rng_next(r) >> 11) * 0x1.0p-53; }

lilac_status lilac_sampler_init(lilac_sampler *s, int vocab, lilac_error *e) {
    memset(s, 0, sizeof *s);
    s->vocab = vocab;
    s->work = malloc((size_t)vocab * sizeof *s->work);
    s->idx = malloc((size_t)vocab * sizeof *s->idx);
    s->counts = calloc((size_t)vocab, sizeof *s->counts);
    s->seen = calloc((size_t)vocab, 1);
    if (!s->work || !s->idx || !s->counts || !s->seen) {
        lilac_sampler_free(s);
        return lilac_fail(e, LILAC_ENOMEM, "sampler for %d tokens", vocab);
    }
    return LILAC_OK;
}

void lilac_sampler_free(lilac_sampler *s) {
    if (!s) return;
    free(s->work);
    free(s->idx);
    free(s->counts);
    free(s->seen);
    memset(s, 0, sizeof *s);
}

void lilac_sampler_begin(lilac_sampler *s, const lilac_sampling *p, const int32_t *prompt, int n_prompt) {
    memset(s->counts, 0, (size_t)s->vocab * sizeof *s->counts);
    memset(s->seen, 0, (size_t)s->vocab);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= 0 && prompt[i] < s->vocab) s->seen[prompt[i]] = 1;
    lilac_rng_seed(&s->rng, p->seed);
}

void lilac_sampler_accept(lilac_sampler *s, int32_t id) {
    if (id < 0 || id >= s->vocab) return;
    s->counts[id]++;
    s->seen[id] = 1;
}

/* Orders candidates by value descending, then id ascending (deterministic). */
static int before(const float *v, int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); }

/* Moves the k best of idx[0..n) to the front (unordered), O(n) on average. */
static void select_top(const float *v, int32_t *idx, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int32_t pivot = idx[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (before(v, idx[i], pivot)) i++;
            while (before(v, pivot, idx[j])) j--;
            if (i <= j) {
                int32_t t = idx[i];
                idx[i++] = idx[j];
                idx[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

static int cmp_desc(const void *a, const void *b, void *ctx) {
    const float *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return before(v, x, y) ? -1 : before(v, y, x) ? 1 : 0;
}

static void sort_prefix(const float *v, int32_t *idx, int n) { qsort_r(idx, (size_t)n, sizeof *idx, cmp_desc, (void *)v); }

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int32_t lilac_sampler_pick(lilac_sampler *s, const lilac_sampling *p, const float *logits) {
    return lilac_sampler_pick_masked(s, p, logits, NULL);
}

int32_t lilac_sampler_pick_masked(lilac_sampler *s, const lilac_sampling *p, const float *logits, const uint32_t *allow) {
    const int V = s->vocab;
    float *w = s->work;
    memcpy(w, logits, (size_t)V * sizeof *w);
    if (allow) /* constrained decoding: first, so nothing below sees a disallowed id */
        for (int k = 0; k < (V + 31) / 32; k++) {
            uint32_t m = allow[k];
            if (m == 0xffffffffu) continue;
            for (int b = 0; b < 32 && k * 32 + b < V; b++)
                if (!(m >> b & 1)) w[k * 32 + b] = -INFINITY;
        }
    if (p->repetition_penalty > 0 && p->repetition_penalty != 1.0f)
        for (int i = 0; i < V; i++)
            if (s->seen[i]) w[i] = w[i] > 0 ? w[i] / p->repetition_penalty : w[i] * p->repetition_penalty;
    if (p->frequency_penalty != 0 || p->presence_penalty != 0)
        for (int i = 0; i < V; i++)
            if (s->counts[i]) w[i] -= p->frequency_penalty * (float)s->counts[i] + p->presence_penalty;
    if (!(p->temperature > 0)) return argmax(w, V);

    const float inv_t = 1.0f / p->temperature;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) {
        w[i] *= inv_t;
        if (w[i] > mx) mx = w[i];
    }
    /* min_p: exp(w - max) >= min_p  <=>  w >= max + log(min_p) */
    const float floor_w = p->min_p > 0 ? mx + logf(p->min_p) : -INFINITY;
    int n = 0;
    for (int i = 0; i < V; i++)
        if (w[i] >= floor_w && w[i] > -INFINITY) s->idx[n++] = i;
    if (n == 0) return argmax(w, V); /* every logit -inf: nothing to draw from */
    if (p->top_k > 0 && p->top_k < n) {
        select_top(w, s->idx, n, p->top_k);
        n = p->top_k;
    }
    double z = 0;
    for (int i = 0; i < n; i++) z += exp((double)w[s->idx[i]] - mx);
    if (p->top_p > 0 && p->top_p < 1) {
        /* Sort growing prefixes until one holds top_p of the mass. */
        int m = n < 64 ? n : 64, cut = n;
        for (;;) {
            select_top(w, s->idx, n, m);
            sort_prefix(w, s->idx, m);
            double acc = 0;
            int found = 0;
            for (int i = 0; i < m; i++) {
                acc += exp((double)w[s->idx[i]] - mx) / z;
                if (acc >= p->top_p) {
                    cut = i + 1;
                    found = 1;
                    break;
                }
            }
            if (found || m == n) break;
            m = m * 4 < n ? m * 4 : n;
        }
        n = cut;
        z = 0;
        for (int i = 0; i < n; i++) z += exp((double)w[s->idx[i]] - mx);
    }
    double u = lilac_rng_uniform(&s->rng) * z, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += exp((double)w[s->idx[i]] - mx);
        if (u < acc) return s->idx[i];
    }
    return s->idx[n - 1]; /* rounding left u at the very top */
}

void lilac_logprobs(const float *logits, int vocab, int32_t id, int n, lilac_token_info *t, int32_t *scratch) {
    float mx = logits[0];
    for (int i = 1; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double z = 0;
    for (int i = 0; i < vocab; i++) z += exp((double)logits[i] - mx);
    const double lse = mx + log(z);
    t->logprob = (float)(logits[id] - lse);
    if (n > LILAC_MAX_TOP_LOGPROBS) n = LILAC_MAX_TOP_LOGPROBS;
    if (n > vocab) n = vocab;
    t->n_top = n;
    if (!n) return;
    for (int i = 0; i < vocab; i++) scratch[i] = i;
    select_top(logits, scratch, vocab, n);
    sort_prefix(logits, scratch, n);
    for (int i = 0; i < n; i++) {
        t->top_ids[i] = scratch[i];
        t->top_logprobs[i] = (float)(logits[scratch[i]] - lse);
    }
}
