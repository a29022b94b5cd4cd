/* backend.c — the registry of compiled-in backends. */
#include "backend/backend.h"

#include <stdio.h>
#include <string.h>

#ifdef LILAC_CUDA
extern const lilac_backend_ops lilac_cuda_backend;
int lilac_cuda_available(char *why, size_t cap);
void lilac_cuda_describe(char *out, size_t cap);
#endif

const char *lilac_backends_compiled(void) {
#ifdef LILAC_CUDA
    return "cpu, cuda";
#else
    return "cpu";
#endif
}

void lilac_backend_describe_gpu(char *out, size_t cap) {
#ifdef LILAC_CUDA
    char why[256];
    if (!lilac_cuda_available(why, sizeof why)) {
        snprintf(out, cap, "none: %s", why);
        return;
    }
    lilac_cuda_describe(out, cap);
#else
    snprintf(out, cap, "not probed (built without CUDA)");
#endif
}

const lilac_backend_ops *lilac_backend_pick(const char *name, lilac_error *e) {
    if (!name || strcmp(name, "cpu") == 0) return &lilac_cpu_backend;
#ifdef LILAC_CUDA
    char why[256];
    if (strcmp(name, "cuda") == 0) {
        if (lilac_cuda_available(why, sizeof why)) return &lilac_cuda_backend;
        lilac_fail(e, LILAC_EBACKEND, "the CUDA backend cannot run here: %s", why);
        return NULL;
    }
    if (strcmp(name, "auto") == 0) return lilac_cuda_available(why, sizeof why) ? &lilac_cuda_backend : &lilac_cpu_backend;
#else
    if (strcmp(name, "cuda") == 0) {
        lilac_fail(e, LILAC_EBACKEND, "this lilac was built without the CUDA backend (build with nvcc installed)");
        return NULL;
    }
    if (strcmp(name, "auto") == 0) return &lilac_cpu_backend;
#endif
    lilac_fail(e, LILAC_EINVAL, "unknown backend '%s' (auto, cpu, cuda)", name);
    return NULL;
}
