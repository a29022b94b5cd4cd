/* test_gpu_pcache.c — the prefix cache's save/restore on the CUDA backend:
 * test_pcache_tiers.c's checks (included below, PCACHE_GPU 1) with the
 * tiny model on the GPU.  Snapshots stored through the cache are evicted to
 * RAM and to disk (a temp directory) and restored from RAM, from disk, and
 * from disk by a new cache on the same directory (the restart); a restored
 * session's greedy continuation and every logit equal a cold session's on
 * the same backend, bit for bit; corrupt and truncated files and RAM images
 * are ignored with a warning, never loaded; the tiers' bounds, order and
 * counters hold as on the CPU.  Prints the snapshot size and the save and
 * restore wall times per snapshot of each tier (no timing asserts).  Skips,
 * saying so, without a usable GPU; `make test-gpu` turns skips into
 * failures.  LILAC_TEST_BACKEND=cpu runs it with the CPU backend instead (a
 * check of the test itself). */
#define PCACHE_GPU 1
#include "test_pcache_tiers.c"
