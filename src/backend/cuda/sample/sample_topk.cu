/* sample_topk.cu — sampling on the GPU with the host sampler's rules
 * (src/engine/sample.h): penalties, temperature, min_p, top_k, top_p and one
 * xoshiro256** draw per token, for the decode graph (no host work per token).
 *
 * Four kernels per token, each multi-block over slices of the vocabulary
 * and finished by its last block (see sample_select.cuh for keys and masses):
 *   prep    w = penalised, scaled logits -> s.w; the max and argmax.  Greedy
 *           (or a max that is not finite): emits the argmax; the rest exit.
 *           Else advances the RNG and sets the min_p floor.
 *   hist    (top_k or top_p on) counts and masses of the tokens above the
 *           floor per bin of d = max - w (1/32 nat; bins are runs of the
 *           sorted order); the last block finds the bins where top_k's k-th
 *           token and top_p's crossing token can lie: [c_lo, c_hi].
 *   gather  ids in bins [c_lo, c_hi] -> candidate list; the last block sorts
 *           it (or radix-selects when long) and finds the exact cut: the kept
 *           tokens are those whose key is >= kcut.
 *   draw    mass of the kept tokens per block; the last block maps the
 *           uniform draw onto them in id order and emits the id.
 * Every sum is an exact integer, so results do not depend on the order the
 * blocks finish in.  The logprob kernels (sample_logprobs.cu) run first.
 * Constrained decoding: prep sets the ids outside the allowed mask to -inf
 * first, as the host sampler does; the logprobs stay the raw logits'. */
#include <float.h>

#include "backend/cuda/sample/sample_select.cuh"
#include "backend/cuda/sample/greedy.cuh"

using namespace lcs;

namespace {

/* Writes the chosen id as argmax_kernel (sample.cu) does (greedy.cuh),
 * plus its logprob and the penalty counts.  One thread. */
__device__ void emit(int id, const float *logits, const lc_sampler &s, int lp, int32_t *out, const int32_t *stop_ids,
                     int n_stop, int advance_pos, lc_ctrl *ctrl) {
    if (lp) s.lp[ctrl->step % LC_LP_RING].logprob = (float)((double)logits[id] - s.work->lse); /* the step before it advances */
    s.counts[id]++;
    s.seen[id] = 1;
    lc_greedy_emit(id, out, stop_ids, n_stop, advance_pos, ctrl);
}

__global__ void __launch_bounds__(THREADS) prep_kernel(const float *__restrict__ logits, lc_sampler s, int slice, int lp,
                                                        int32_t *out, const int32_t *stop_ids, int n_stop, int advance_pos,
                                                        const uint32_t *__restrict__ allow, lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    lc_samp_work *W = s.work;
    const lc_samp_params P = *s.params;
    const bool rep_on = P.rep > 0 && P.rep != 1.0f, fp_on = P.freq != 0 || P.pres != 0;
    const chunk c = chunk_of(blockIdx.x, slice, s.V);
    u64 best = 0; /* key_of: the max, ties to the lowest id */
    for (int i = c.lo; i < c.hi; i++) {
        /* constrained decoding: a disallowed id is -inf before everything
         * else (it stays -inf through the penalties and the temperature) */
        float x = lc_allowed(allow, i) ? logits[i] : -INFINITY;
        /* the host's float operations, uncontracted, so greedy ids match it */
        if (rep_on && s.seen[i]) x = x > 0 ? __fdiv_rn(x, P.rep) : __fmul_rn(x, P.rep);
        if (fp_on) {
            const int n = s.counts[i];
            if (n) x = __fsub_rn(x, __fadd_rn(__fmul_rn(P.freq, (float)n), P.pres));
        }
        if (!P.greedy) x = __fmul_rn(x, P.inv_t);
        s.w[i] = x;
        if (x == x) best = max(best, key_of(x, i));
    }
    best = block_reduce(best, op_max_u64(), 0ull);
    if (threadIdx.x == 0) W->part[blockIdx.x] = best;
    if (!last_block(&W->done[0])) return;
    u64 k = threadIdx.x < gridDim.x ? __ldcg(&W->part[threadIdx.x]) : 0;
    k = block_reduce(k, op_max_u64(), 0ull);
    if (threadIdx.x != 0) return;
    const float M = k ? w_of(k) : NAN;
    const int amax = k ? id_of(k) : 0; /* all NaN: a defined answer */
    u64 draw = 0;
    if (!P.greedy) draw = rng_next(s.params->rng);
    W->done[0] = 0;
    if (P.greedy || !isfinite(M)) {
        W->emitted = 1;
        emit(amax, logits, s, lp, out, stop_ids, n_stop, advance_pos, ctrl);
        return;
    }
    W->emitted = 0;
    W->M = M;
    /* exp(w - M) >= min_p <=> w >= M + log(min_p); never below the lowest
     * finite value, so -inf ids (masked) are no candidates, as on the host */
    W->floor_w = fmaxf(__fadd_rn(M, P.log_min_p), -FLT_MAX);
    W->draw = draw;
    W->sel = P.top_k > 0 || P.top_p < 1.0f;
    W->kcut = 0;
}

__global__ void __launch_bounds__(THREADS) hist_kernel(lc_sampler s, int slice, lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    lc_samp_work *W = s.work;
    if (W->emitted || !W->sel) return;
    __shared__ unsigned hn[BINS];
    __shared__ u64 hm[BINS];
    __shared__ int s_ck, s_clo;
    for (int b = threadIdx.x; b < BINS; b += THREADS) hn[b] = 0, hm[b] = 0;
    __syncthreads();
    const float M = W->M, fl = W->floor_w;
    const chunk c = chunk_of(blockIdx.x, slice, s.V);
    u64 on = 0, om = 0; /* the last bin, where most of a peaked vocabulary lands, in registers */
    for (int i = c.lo; i < c.hi; i++) {
        const float x = s.w[i];
        if (!(x >= fl)) continue;
        const int b = bin_of(x, M);
        const u64 q = mass(x, M);
        if (b == BINS - 1) {
            on++, om += q;
        } else {
            atomicAdd(&hn[b], 1u);
            atomicAdd(&hm[b], q);
        }
    }
    on = block_reduce(on, op_add_u64(), 0ull);
    om = block_reduce(om, op_add_u64(), 0ull);
    if (threadIdx.x == 0) hn[BINS - 1] += (unsigned)on, hm[BINS - 1] += om;
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += THREADS)
        if (hn[b]) atomicAdd(&W->hist_n[b], hn[b]), atomicAdd(&W->hist_m[b], hm[b]);
    if (!last_block(&W->done[1])) return;

    /* the plan: inclusive prefix sums over the bins, best bin first */
    constexpr int PER = BINS / THREADS;
    const int b0 = threadIdx.x * PER;
    u64 ln = 0, lm = 0;
    for (int j = 0; j < PER; j++) {
        hn[b0 + j] = __ldcg(&W->hist_n[b0 + j]);
        hm[b0 + j] = __ldcg(&W->hist_m[b0 + j]);
        W->hist_n[b0 + j] = 0, W->hist_m[b0 + j] = 0; /* zero for the next step */
        ln += hn[b0 + j], lm += hm[b0 + j];
    }
    u64 N0, Z0;
    u64 en = block_scan_excl(ln, &N0), em = block_scan_excl(lm, &Z0);
    for (int j = 0; j < PER; j++) {
        en += hn[b0 + j], em += hm[b0 + j];
        hn[b0 + j] = (unsigned)en, hm[b0 + j] = em;
    }
    const lc_samp_params P = *s.params;
    const bool ka = P.top_k > 0 && (u64)P.top_k < N0, pa = P.top_p < 1.0f;
    if (threadIdx.x == 0) s_ck = s_clo = BINS - 1;
    __syncthreads();
    if (!ka && !pa) { /* top_k keeps everything: the draw takes all tokens above the floor */
        if (threadIdx.x == 0) W->sel = 0, W->done[1] = 0;
        return;
    }
    const unsigned k = (unsigned)P.top_k;
    if (ka)
        for (int b = b0; b < b0 + PER; b++)
            if (hn[b] >= k && (b == 0 || hn[b - 1] < k)) s_ck = b;
    __syncthreads();
    const int ck = s_ck;
    /* top_p's crossing lies at or after the first bin whose prefix reaches
     * top_p of a lower bound of the kept mass (exact when top_k is off) */
    const u64 A = ka ? (ck ? hm[ck - 1] : 0) : Z0;
    if (pa) {
        const double tl = (double)P.top_p * (double)A;
        for (int b = b0; b < b0 + PER; b++)
            if ((double)hm[b] >= tl && (b == 0 || (double)hm[b - 1] < tl)) s_clo = b;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    const int clo = pa ? (ka && s_clo > ck ? ck : s_clo) : ck;
    const u64 pre_n = clo ? hn[clo - 1] : 0;
    W->k_active = ka, W->p_active = pa;
    W->c_lo = clo;
    W->c_hi = ka ? ck : clo;
    W->r = ka ? k - pre_n : 0;
    W->pre_mass = clo ? hm[clo - 1] : 0;
    W->Z0 = Z0;
    W->n_cand = 0;
    W->done[1] = 0;
}

/* The last block of gather_kernel: the exact cut on the candidates. */
__device__ void resolve(const lc_sampler &s, lc_samp_work *W, float top_p) {
    __shared__ u64 keys[CAP];
    __shared__ u64 s_z1;
    const int n = __ldcg(&W->n_cand);
    const float M = W->M;
    const bool ka = W->k_active, pa = W->p_active;
    const u64 pre = W->pre_mass, r = ka ? W->r : (u64)n;
    const float *w = s.w;
    auto key = [w](int id) { return key_of(w[id], id); };
    auto q = [M](u64 k) { return mass(w_of(k), M); };
    if (n <= CAP) {
        const int p = load_sorted(keys, s.cand, n, key);
        const int per = p < THREADS ? 1 : p / THREADS, j0 = threadIdx.x * per;
        const int j1 = min(j0 + per, n);
        u64 local = 0, tot;
        for (int j = j0; j < j1; j++) local += q(keys[j]);
        const u64 excl = block_scan_excl(local, &tot);
        if (threadIdx.x == 0) s_z1 = W->Z0;
        __syncthreads();
        if (ka && (u64)j0 < r && r <= (u64)j1) { /* this thread holds the k-th */
            u64 acc = excl;
            for (int j = j0; (u64)j < r; j++) acc += q(keys[j]);
            s_z1 = pre + acc;
        }
        __syncthreads();
        int cut = INT_MAX;
        if (pa) {
            const double tgt = (double)top_p * (double)s_z1;
            u64 acc = excl;
            for (int j = j0; j < j1 && (u64)j < r; j++) {
                acc += q(keys[j]);
                if ((double)(pre + acc) >= tgt) {
                    cut = j + 1;
                    break;
                }
            }
        }
        cut = block_reduce(cut, op_min_int(), INT_MAX);
        if (threadIdx.x == 0) W->kcut = keys[(cut == INT_MAX ? (int)r : cut) - 1];
        return;
    }
    /* a long list (huge top_k, or many near-equal logits): radix select */
    auto one = [](u64) { return 1ull; };
    u64 kk = 0, z1 = W->Z0;
    if (ka) {
        kk = list_select(s.cand, n, 0, key, one, [r](u64 c) { return c >= r; });
        u64 local = 0;
        for (int i = threadIdx.x; i < n; i += THREADS) {
            const u64 k = key(__ldcg(s.cand + i));
            if (k >= kk) local += q(k);
        }
        z1 = pre + block_reduce(local, op_add_u64(), 0ull);
    }
    u64 kcut = kk;
    if (pa) {
        const double tgt = (double)top_p * (double)z1;
        const u64 kp = list_select(s.cand, n, kk, key, q, [pre, tgt](u64 c) { return (double)(pre + c) >= tgt; });
        if (kp) kcut = kp; /* never reached (rounding): top_k's set */
    }
    if (threadIdx.x == 0) W->kcut = kcut;
}

__global__ void __launch_bounds__(THREADS) gather_kernel(lc_sampler s, int slice, lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    lc_samp_work *W = s.work;
    if (W->emitted || !W->sel) return;
    const float M = W->M, fl = W->floor_w;
    const int clo = W->c_lo, chi = W->c_hi;
    const chunk c = chunk_of(blockIdx.x, slice, s.V);
    for (int j = 0; j < c.ipt; j++) { /* the same trip count in every lane: append() is warp-wide */
        const int i = c.lo + j;
        bool take = false;
        if (i < c.hi) {
            const float x = s.w[i];
            if (x >= fl) {
                const int b = bin_of(x, M);
                take = b >= clo && b <= chi;
            }
        }
        append(take, i, s.cand, &W->n_cand);
    }
    if (!last_block(&W->done[2])) return;
    resolve(s, W, s.params->top_p);
    if (threadIdx.x == 0) W->done[2] = 0;
}

__global__ void __launch_bounds__(THREADS) draw_kernel(const float *__restrict__ logits, lc_sampler s, int slice, int lp,
                                                        int32_t *out, const int32_t *stop_ids, int n_stop, int advance_pos,
                                                        lc_ctrl *ctrl) {
    __shared__ int s_blk, s_id;
    __shared__ u64 s_off;
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    lc_samp_work *W = s.work;
    if (W->emitted) return;
    const float M = W->M, fl = W->floor_w;
    const u64 kcut = W->kcut;
    const int V = s.V;
    auto kept_mass = [&](int i) -> u64 {
        const float x = s.w[i];
        return x >= fl && key_of(x, i) >= kcut ? mass(x, M) : 0;
    };
    chunk c = chunk_of(blockIdx.x, slice, V);
    u64 local = 0;
    for (int i = c.lo; i < c.hi; i++) local += kept_mass(i);
    local = block_reduce(local, op_add_u64(), 0ull);
    if (threadIdx.x == 0) W->part[blockIdx.x] = local;
    if (!last_block(&W->done[3])) return;

    /* the block whose mass interval holds the draw, then the id within it */
    const u64 v = threadIdx.x < gridDim.x ? __ldcg(&W->part[threadIdx.x]) : 0;
    u64 total;
    const u64 excl = block_scan_excl(v, &total);
    const u64 target = __umul64hi(W->draw & ~0x7ffull, total); /* floor(u * total), u = 53 bits / 2^53 */
    if (threadIdx.x == 0) s_blk = -1, s_id = -1;
    __syncthreads();
    if (v && excl <= target && target < excl + v) s_blk = threadIdx.x, s_off = target - excl;
    __syncthreads();
    if (s_blk >= 0) {
        c = chunk_of(s_blk, slice, V);
        local = 0;
        for (int i = c.lo; i < c.hi; i++) local += kept_mass(i);
        u64 tot;
        u64 acc = block_scan_excl(local, &tot);
        const u64 off = s_off;
        if (local && acc <= off && off < acc + local)
            for (int i = c.lo; i < c.hi; i++) {
                acc += kept_mass(i);
                if (off < acc) {
                    s_id = i;
                    break;
                }
            }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    W->done[3] = 0;
    int id = s_id;
    if (id < 0) id = 0; /* unreachable: the max always carries mass */
    emit(id, logits, s, lp, out, stop_ids, n_stop, advance_pos, ctrl);
}

} // namespace

extern "C" size_t lc_sampler_bytes(int V) {
    const size_t a = 256;
    auto up = [a](size_t n) { return (n + a - 1) / a * a; };
    return up(sizeof(lc_samp_work)) + up(sizeof(lc_samp_params)) + 3 * up((size_t)V * 4) + up(sizeof(lc_tokinfo) * LC_LP_RING) +
           up((size_t)V);
}

extern "C" void lc_sampler_carve(void *base, int V, lc_sampler *s) {
    const size_t a = 256;
    auto up = [a](size_t n) { return (n + a - 1) / a * a; };
    char *p = (char *)base;
    s->V = V;
    s->work = (lc_samp_work *)p, p += up(sizeof(lc_samp_work));
    s->params = (lc_samp_params *)p, p += up(sizeof(lc_samp_params));
    s->w = (float *)p, p += up((size_t)V * 4);
    s->counts = (int32_t *)p, p += up((size_t)V * 4);
    s->cand = (int32_t *)p, p += up((size_t)V * 4);
    s->lp = (lc_tokinfo *)p, p += up(sizeof(lc_tokinfo) * LC_LP_RING);
    s->seen = (uint8_t *)p;
}

extern "C" cudaError_t lc_sampler_clear(const lc_sampler *s, cudaStream_t st) {
    return cudaMemsetAsync(s->work, 0, lc_sampler_bytes(s->V), st);
}

extern "C" cudaError_t lc_sampler_begin(const lc_sampler *s, const lc_samp_params *p, const uint8_t *seen_host,
                                        cudaStream_t st) {
    cudaError_t err = cudaMemcpyAsync(s->params, p, sizeof *p, cudaMemcpyHostToDevice, st);
    if (!err) err = cudaMemsetAsync(s->counts, 0, (size_t)s->V * sizeof(int32_t), st);
    if (!err)
        err = seen_host ? cudaMemcpyAsync(s->seen, seen_host, (size_t)s->V, cudaMemcpyHostToDevice, st)
                        : cudaMemsetAsync(s->seen, 0, (size_t)s->V, st);
    return err;
}

extern "C" cudaError_t lc_sample(const float *logits, const lc_sampler *s, int logprobs, int32_t *out,
                                 const int32_t *stop_ids, int n_stop, int advance_pos, const uint32_t *allow, lc_ctrl *ctrl,
                                 cudaStream_t st) {
    int nb, slice;
    geometry(s->V, &nb, &slice);
    cudaError_t err = logprobs ? lc_sample_logprobs(logits, s, ctrl, st) : cudaSuccess;
    if (!err)
        err = lc_launch(prep_kernel, dim3(nb), dim3(THREADS), 0, st, logits, *s, slice, logprobs, out, stop_ids, n_stop,
                        advance_pos, allow, ctrl);
    if (!err) err = lc_launch(hist_kernel, dim3(nb), dim3(THREADS), 0, st, *s, slice, ctrl);
    if (!err) err = lc_launch(gather_kernel, dim3(nb), dim3(THREADS), 0, st, *s, slice, ctrl);
    if (!err)
        err = lc_launch(draw_kernel, dim3(nb), dim3(THREADS), 0, st, logits, *s, slice, logprobs, out, stop_ids, n_stop,
                        advance_pos, ctrl);
    return err;
}
