/* bigalloc.h — host buffers of megabytes that are filled right after they
 * are allocated (the prefix cache's RAM-tier snapshot images).
 *
 * A fresh malloc'd buffer that size is new anonymous memory whose first
 * touch takes a page fault per 4 KiB page: copying a snapshot into one ran
 * at 1.4-1.5 GB/s on the dev machine, against 3.5-4 GB/s into memory
 * touched before.  From 1 MiB these buffers are mapped with MAP_POPULATE
 * (Linux; elsewhere plain malloc), so the kernel supplies every page in one
 * call instead of one trap per page (2.0-2.6 GB/s there).
 *
 * Not transparent huge pages: on a VM whose balloon takes back free memory
 * (the dev machine's) a new huge page must be backed by the host first, and
 * the copy ran at 0.26 GB/s, four times slower than small pages.  Not a pool
 * of reused buffers: simpler, and memory the tier no longer holds goes back. */
#ifndef LILAC_UTIL_BIGALLOC_H
#define LILAC_UTIL_BIGALLOC_H

#include <stddef.h>

/* n bytes (NULL when there is no memory); released by lilac_big_free(p, n). */
void *lilac_big_alloc(size_t n);
void lilac_big_free(void *p, size_t n);

#endif
