/* fuzz_gguf.c — libFuzzer target: any bytes as a GGUF file, parsed and
 * validated, then the first row of every tensor dequantised. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lilac_gguf g;
    lilac_error e;
    if (lilac_gguf_parse(data, size, "fuzz", &g, &e) != LILAC_OK) return 0;
    for (int i = 0; i < g.n_tensors; i++) {
        if (g.t[i].ne[0] > 65536) continue;
        float *row = malloc((size_t)g.t[i].ne[0] * sizeof *row);
        if (row) lilac_gguf_row_f32(&g.t[i], 0, row);
        free(row);
    }
    (void)lilac_gguf_find_kv(&g, "general.architecture");
    lilac_gguf_free(&g);
    return 0;
}
