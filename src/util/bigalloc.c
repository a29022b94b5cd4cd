/* bigalloc.c — large host buffers, their pages supplied up front
 * (bigalloc.h says why). */
#include <stdlib.h>
#include <sys/mman.h>

#include "util/bigalloc.h"

/* Below this malloc may reuse memory already touched, and the faults of
 * the rest cost well under a millisecond. */
#define BIG ((size_t)1 << 20)

void *lilac_big_alloc(size_t n) {
#ifdef MAP_POPULATE
    if (n >= BIG) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
#endif
    return malloc(n ? n : 1);
}

void lilac_big_free(void *p, size_t n) {
    if (!p) return;
#ifdef MAP_POPULATE
    if (n >= BIG) {
        munmap(p, n);
        return;
    }
#endif
    free(p);
}
