/* fuzz_safetensors.c — libFuzzer target: any bytes as a safetensors file. */
#include <stddef.h>
#include <stdint.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lilac_tensors ts = {0};
    lilac_error e;
    lilac_st_add_buffer(&ts, data, size, "fuzz", 0, &e);
    lilac_st_close(&ts);
    return 0;
}
