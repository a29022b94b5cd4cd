/* sample.h — choosing the next token from logits on the host.
 *
 * Order of operations (as vLLM applies them):
 *   1. penalties: repetition (HF rule, over prompt + generated ids), then
 *      frequency and presence (OpenAI rule, over generated ids only);
 *   2. temperature 0 -> argmax (ties to the lowest id), else logits / T;
 *   3. min_p: drop tokens with p < min_p * p(best);
 *   4. top_k, then top_p over the renormalised survivors (the smallest set of
 *      most likely tokens whose mass reaches top_p, crossing token included);
 *   5. one uniform draw from the xoshiro256** stream seeded by `seed`.
 * A 248K vocabulary is never fully sorted unless top_p needs it: candidates
 * are found by selection and sorted in growing prefixes. */
#ifndef LILAC_ENGINE_SAMPLE_H
#define LILAC_ENGINE_SAMPLE_H

#include <stdint.h>

#include "lilac.h"

typedef struct {
    uint64_t s[4];
} lilac_rng;

void lilac_rng_seed(lilac_rng *r, uint64_t seed);
uint64_t lilac_rng_next(lilac_rng *r);
double lilac_rng_uniform(lilac_rng *r); /* [0, 1) with 53 random bits */

typedef struct {
    int vocab;
    float *work;      /* [vocab] penalised, scaled logits */
    int32_t *idx;     /* [vocab] candidate ids */
    int32_t *counts;  /* [vocab] occurrences in the generated text */
    uint8_t *seen;    /* [vocab] id occurs in prompt or generated text */
    lilac_rng rng;
} lilac_sampler;

lilac_status lilac_sampler_init(lilac_sampler *s, int vocab, lilac_error *e);
void lilac_sampler_free(lilac_sampler *s);
/* Starts a generation: seeds the stream and marks the prompt's ids as seen. */
void lilac_sampler_begin(lilac_sampler *s, const lilac_sampling *p, const int32_t *prompt, int n_prompt);
/* Records a generated id (for the penalties). */
void lilac_sampler_accept(lilac_sampler *s, int32_t id);
/* The next id from raw logits [vocab]. */
int32_t lilac_sampler_pick(lilac_sampler *s, const lilac_sampling *p, const float *logits);
/* The same among the ids set in allow ((vocab + 31) / 32 words; NULL: all),
 * which must hold at least one: the others are -inf before everything else. */
int32_t lilac_sampler_pick_masked(lilac_sampler *s, const lilac_sampling *p, const float *logits, const uint32_t *allow);
/* log-softmax of the raw logits for `id`, and the n most likely alternatives. */
void lilac_logprobs(const float *logits, int vocab, int32_t id, int n, lilac_token_info *t, int32_t *scratch);

#endif
