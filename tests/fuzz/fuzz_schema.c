/* fuzz_schema.c — libFuzzer target: any bytes as a JSON Schema (first byte
 * even) or a tools array (odd), compiled into a grammar; when that succeeds,
 * a short walk of masks and accepts over a small vocabulary, picking ids
 * with the input's bytes.  Finds crashes, leaks and masks that allow an id
 * the matcher then rejects. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "text/grammar.h"

static lg_vocab *vocab(void) {
    static lg_vocab *v;
    if (v) return v;
    static const char *const toks[] = {"{", "}", "[", "]", "\"", ",", ":", " ", "\n", "0", "1", "9", "-", ".", "e",
                                       "true", "false", "null", "a", "b", "\\", "\\n", "\\u00e9", "\xc3", "\xa9", "\xc3\xa9",
                                       "\"a\"", "\":", "\",", "<", "</parameter>", "<parameter=", ">", "\n</", "x",
                                       "2024-01-02", "T", "Z", "@", "<tool_call>", "</tool_call>", "<|im_end|>"};
    enum { N = sizeof toks / sizeof toks[0] };
    size_t len[N];
    uint8_t special[N] = {0};
    for (int i = 0; i < N; i++) len[i] = __builtin_strlen(toks[i]);
    special[N - 3] = special[N - 2] = special[N - 1] = 1;
    lg_vocab_new_raw(N, toks, len, special, &v, NULL);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    lg_vocab *v = vocab();
    if (!v) return 0;
    const int V = lg_vocab_size(v);
    json_t *doc = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
    if (!doc) return 0;
    lg_grammar *g = lg_new();
    lilac_error e;
    lg_tokens tk = {V - 3, V - 2};
    int r = data[0] & 1 ? lg_tool_calls(g, doc, data[0] & 2, &tk, "tools", &e) : lg_json_schema(g, doc, "schema", &e);
    lg_matcher *m = NULL;
    int32_t end = V - 1;
    if (r >= 0 && lg_finalize(g, lg_answer_root(g, r), &e) == LILAC_OK && lg_matcher_new(g, v, &end, 1, &m, &e) == LILAC_OK) {
        uint32_t bits[(64 + 31) / 32];
        for (size_t step = 0; step < 48; step++) {
            int n = lg_matcher_mask(m, bits, &e);
            if (n <= 0) break;
            int k = (int)(data[step % size] % (unsigned)n), id = 0;
            for (; id < V; id++)
                if ((bits[id >> 5] >> (id & 31) & 1) && k-- == 0) break;
            if (lg_matcher_accept(m, id) != 0) __builtin_trap(); /* the mask allowed it */
            if (lg_matcher_finished(m)) break;
        }
    }
    lg_matcher_free(m);
    lg_free(g);
    json_decref(doc);
    return 0;
}
