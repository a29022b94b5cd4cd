/* greedy.cuh — the greedy pick's last step, shared by argmax_kernel
 * (sample.cu) and the lm_head with the pick fused in (decode/lm_head.cu):
 * the chosen id becomes the next token to feed and the output ring's entry,
 * a stop id or a full ring stops the loop.  One thread. */
#ifndef LILAC_CUDA_SAMPLE_GREEDY_CUH
#define LILAC_CUDA_SAMPLE_GREEDY_CUH

#include "backend/cuda/common.cuh"

__device__ __forceinline__ void lc_greedy_emit(int id, int32_t *out, const int32_t *stop_ids, int n_stop, int advance_pos,
                                               lc_ctrl *ctrl) {
    ctrl->token = id;
    if (ctrl->step < ctrl->max_steps) out[ctrl->step] = id;
    ctrl->step++;
    if (advance_pos) ctrl->pos++, ctrl->conv_flip ^= 1; /* a token went through the layers */
    for (int k = 0; k < n_stop; k++)
        if (stop_ids[k] == id) ctrl->stop = 1;
    if (ctrl->step >= ctrl->max_steps) ctrl->stop = 1;
}

#endif
