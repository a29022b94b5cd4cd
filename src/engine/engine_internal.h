/* engine_internal.h — the engine's and the session's insides, shared by
 * engine.c (lifecycle, feeding, generation) and snapshot.c (snapshot files).
 * Nothing outside src/engine/ includes it. */
#ifndef LILAC_ENGINE_INTERNAL_H
#define LILAC_ENGINE_INTERNAL_H

#include "backend/backend.h"
#include "engine/sample.h"
#include "lilac.h"

struct lilac_engine {
    lilac_model model;
    const lilac_backend_ops *ops;
    lilac_backend *be;
    int chunk;
    uint64_t model_id; /* lilac_model_identity(&model) */
};

struct lilac_session {
    lilac_engine *g;
    lilac_state *st;
    int32_t *tokens; /* [cap] */
    int cap;
    float *logits;   /* [vocab] logits after the last token */
    int have_logits;
    lilac_sampler sampler;
    uint32_t *allow; /* [(vocab + 31) / 32] constrained decoding's mask, made on first use */
};

/* A 64-bit identity of the model: the config's numbers, the layout, every
 * tensor's name, dtype and shape, and the weight files' sizes (cheap: no
 * weight byte is read).  Snapshots carry it; a different one is another model. */
uint64_t lilac_model_identity(const lilac_model *m);

#endif
