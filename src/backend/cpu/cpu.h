/* cpu.h — internals of the CPU backend (the fp32 reference).
 *
 * Activations and accumulation are fp32; weights are dequantised a row at a
 * time, never expanded as a whole.  Work is spread over a thread pool by
 * output rows, heads and experts.  All scratch is sized for max_chunk tokens
 * at open; nothing is allocated inside forward(). */
#ifndef LILAC_CPU_CPU_H
#define LILAC_CPU_CPU_H

#include "backend/backend.h"
#include "util/threadpool.h"

struct lilac_backend {
    const lilac_model *m;
    lilac_pool *pool;
    int nthreads;
    int T;         /* max tokens per forward (max_chunk) */
    float *rowbuf; /* [nthreads, maxcols]: one dequantised weight row per thread */
    int maxcols;

    /* per-chunk activations, [T, ...] row-major */
    float *h;      /* [T, D] residual stream */
    float *xn;     /* [T, D] normed block input */
    float *blk;    /* [T, D] block output */
    /* attention */
    float *qg;     /* [T, H*2*hd] query|gate per head */
    float *kk;     /* [T, Hkv*hd] */
    float *vv;     /* [T, Hkv*hd] */
    float *ao;     /* [T, H*hd] attention output (gated) */
    /* DeltaNet */
    float *qkv;    /* [T, C] projections, then conv+SiLU in place */
    float *z;      /* [T, Vd] */
    float *ba;     /* [T, 2*Hv] beta | decay inputs, then beta | g */
    float *go;     /* [T, Vd] recurrence output, then gated-normed */
    float *convin; /* [(K-1) + T, C] conv window: state rows then the chunk */
    /* MoE */
    float *rlog;   /* [T, E] router logits -> probabilities */
    int *topi;     /* [T, K] expert ids */
    float *topw;   /* [T, K] routing weights */
    int *ecount;   /* [E + 1] offsets of each expert's slots in the sorted order */
    int *ecursor;  /* [E] fill cursors of the counting sort */
    int *slot_t;   /* [T*K] token of sorted slot p */
    int *slot_of;  /* [T*K] sorted slot of (t, j) */
    float *xg;     /* [T*K, D] gathered inputs, sorted by expert */
    float *act;    /* [T*K, I] SwiGLU activations */
    float *eo;     /* [T*K, D] expert outputs */
    float *sg;     /* [T, Is] shared gate -> activation */
    float *su;     /* [T, Is] shared up */
    float *sd;     /* [T, D] shared down */
    float *sgate;  /* [T] shared-expert gate logit */
    float *logit_h;/* [T, D] final-normed rows for the lm_head */
    float *rope_inv; /* [rotary_dim/2] inverse frequencies */
};

struct lilac_state {
    int pos, cap;
    float **k, **v;   /* per attention layer (indexed by layer): [cap, Hkv, hd] */
    float **conv;     /* per DeltaNet layer: [K-1, C] last pre-conv rows, oldest first */
    float **rec;      /* per DeltaNet layer: [Hv, dk, dv] recurrent matrices */
};

/* Y[t, r] = sum_c X[t, c] * W_e[r, c] for t < T and every row r; threaded. */
void cpu_matmul(lilac_backend *b, const lilac_matrix *W, int e, const float *X, int ldx, int T, float *Y, int ldy);
/* The same for rows [r0, r1) on the calling thread, using rowbuf[cols]. */
void cpu_matmul_rows(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                     float *rowbuf);
/* The portable implementation, and the AVX2 one (matmul_avx2.c: returns 0,
 * having done nothing, when the CPU or the weight type does not suit it). */
void cpu_matmul_rows_generic(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                             float *rowbuf);
int cpu_matmul_rows_avx2(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                         float *rowbuf);
/* Row r of matrix e dequantised to f32 (lilac_matrix_row_f32, with AVX2
 * when it suits: the same values). */
void cpu_row_f32(const lilac_matrix *W, int e, int r, float *out);
int cpu_row_f32_avx2(const lilac_matrix *W, int e, int r, float *out);

void cpu_attention(lilac_backend *b, lilac_state *s, int layer, int T);
void cpu_deltanet(lilac_backend *b, lilac_state *s, int layer, int T);
void cpu_moe(lilac_backend *b, int layer, int T);


#endif
