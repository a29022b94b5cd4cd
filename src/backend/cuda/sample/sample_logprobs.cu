/* sample_logprobs.cu — logprobs on the GPU, as lilac_logprobs does on the
 * host: log-softmax of the RAW logits (before penalties and temperature)
 * for the n most likely ids, best first, ties to the lower id.  Runs before
 * the sampler's kernels in the same step; the chosen id's logprob is written
 * by the sampler when it emits the id (it needs the lse computed here).
 *
 *   stats  per block: max, sum of exp(x - max) in double, best key; the last
 *          block combines them into the log-sum-exp, and takes the n-th best
 *          of the blocks' best keys as a floor: at least n tokens reach it,
 *          so the n best all do.
 *   top    ids whose key reaches the floor -> candidate list; the last block
 *          sorts it (or radix-selects when long) and writes the n best. */
#include "backend/cuda/sample/sample_select.cuh"

using namespace lcs;

namespace {

__global__ void __launch_bounds__(THREADS) stats_kernel(const float *__restrict__ logits, lc_sampler s, int slice,
                                                         lc_ctrl *ctrl) {
    __shared__ u64 keys[MAXB];
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    lc_samp_work *W = s.work;
    const chunk c = chunk_of(blockIdx.x, slice, s.V);
    float m = -INFINITY;
    u64 best = 0;
    for (int i = c.lo; i < c.hi; i++) {
        const float x = logits[i];
        if (x == x) m = fmaxf(m, x), best = max(best, key_of(x, i));
    }
    const float bm = block_reduce(m, op_max_f(), -INFINITY);
    double z = 0;
    if (bm > -INFINITY)
        for (int i = c.lo; i < c.hi; i++) {
            const float x = logits[i];
            if (x == x) z += exp((double)x - (double)bm);
        }
    z = block_reduce(z, op_add_d(), 0.0);
    best = block_reduce(best, op_max_u64(), 0ull);
    if (threadIdx.x == 0) {
        u64 *p = W->part + 3 * blockIdx.x;
        p[0] = __float_as_uint(bm), p[1] = (u64)__double_as_longlong(z), p[2] = best;
    }
    if (!last_block(&W->done[4])) return;

    const int nb = gridDim.x;
    float pm = -INFINITY;
    double pz = 0;
    if ((int)threadIdx.x < nb) {
        const u64 *p = W->part + 3 * threadIdx.x;
        pm = __uint_as_float((uint32_t)__ldcg(p)), pz = __longlong_as_double((long long)__ldcg(p + 1));
    }
    const float M = block_reduce(pm, op_max_f(), -INFINITY);
    const double S = block_reduce(pz > 0 ? pz * exp((double)pm - (double)M) : 0.0, op_add_d(), 0.0);
    const int n = s.params->n_top;
    lc_tokinfo *slot = s.lp + ctrl->step % LC_LP_RING;
    if (threadIdx.x == 0) {
        W->lse = (double)M + log(S);
        slot->n_top = 0;
        W->n_cand = 0;
        W->done[4] = 0;
    }
    if (n <= 0) return;
    u64 kn = 0; /* fewer blocks than n: every token is a candidate */
    if (nb >= n) {
        int p = 1;
        while (p < nb) p <<= 1;
        for (int i = threadIdx.x; i < p; i += THREADS) keys[i] = i < nb ? __ldcg(W->part + 3 * i + 2) : 0;
        __syncthreads();
        bitonic_desc(keys, p);
        kn = keys[n - 1];
    }
    if (threadIdx.x == 0) W->kn = kn;
}

__global__ void __launch_bounds__(THREADS) top_kernel(const float *__restrict__ logits, lc_sampler s, int slice,
                                                       lc_ctrl *ctrl) {
    __shared__ u64 keys[CAP];
    __shared__ int s_n;
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    const int n = s.params->n_top;
    if (n <= 0) return;
    lc_samp_work *W = s.work;
    const u64 kn = W->kn;
    const chunk c = chunk_of(blockIdx.x, slice, s.V);
    for (int j = 0; j < c.ipt; j++) { /* the same trip count in every lane: append() is warp-wide */
        const int i = c.lo + j;
        bool take = false;
        if (i < c.hi) {
            const float x = logits[i];
            take = x == x && key_of(x, i) >= kn;
        }
        append(take, i, s.cand, &W->n_cand);
    }
    if (!last_block(&W->done[5])) return;

    const int nc = __ldcg(&W->n_cand), m = min(n, nc);
    auto key = [logits](int id) { return key_of(logits[id], id); };
    if (nc <= CAP) {
        load_sorted(keys, s.cand, nc, key);
    } else { /* a long list: the m-th best by radix select, then sort the m */
        const u64 km = list_select(s.cand, nc, 0, key, [](u64) { return 1ull; }, [m](u64 cnt) { return cnt >= (u64)m; });
        int p = 1;
        while (p < m) p <<= 1;
        for (int i = threadIdx.x; i < p; i += THREADS) keys[i] = 0;
        if (threadIdx.x == 0) s_n = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < nc; i += THREADS) {
            const u64 k = key(__ldcg(s.cand + i));
            if (k >= km) keys[atomicAdd(&s_n, 1)] = k; /* keys are unique: exactly m */
        }
        __syncthreads();
        bitonic_desc(keys, p);
    }
    lc_tokinfo *slot = s.lp + ctrl->step % LC_LP_RING;
    const double lse = W->lse;
    if ((int)threadIdx.x < m) {
        const int id = id_of(keys[threadIdx.x]);
        slot->top_ids[threadIdx.x] = id;
        slot->top_logprobs[threadIdx.x] = (float)((double)logits[id] - lse);
    }
    if (threadIdx.x == 0) slot->n_top = m, W->done[5] = 0;
}

} // namespace

extern "C" cudaError_t lc_sample_logprobs(const float *logits, const lc_sampler *s, lc_ctrl *ctrl, cudaStream_t st) {
    int nb, slice;
    geometry(s->V, &nb, &slice);
    cudaError_t err = lc_launch(stats_kernel, dim3(nb), dim3(THREADS), 0, st, logits, *s, slice, ctrl);
    if (!err) err = lc_launch(top_kernel, dim3(nb), dim3(THREADS), 0, st, logits, *s, slice, ctrl);
    return err;
}
