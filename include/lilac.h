/* lilac.h — the public API of lilac, a single-model inference engine for
 * Qwen3.6-35B-A3B.
 *
 * The CLI and the server include only this header.  It exposes opaque
 * engines (weights + backend) and sessions (one sequence's state: the KV cache
 * of the attention layers and the conv + recurrent state of the DeltaNet
 * layers), and the status convention shared by the whole library:
 *
 *   every function that can fail returns lilac_status (LILAC_OK == 0) and, on
 *   failure, writes one human-readable line into the caller's lilac_error.
 *
 * Ownership: the _open and _new functions return objects the caller frees with
 * the matching _close or _free; freeing NULL is a no-op.
 */
#ifndef LILAC_H
#define LILAC_H

#include <stddef.h>
#include <stdint.h>

#define LILAC_VERSION "0.1.0"

typedef enum {
    LILAC_OK = 0,
    LILAC_EIO,          /* a file could not be opened, read or mapped */
    LILAC_EFORMAT,      /* a file or body is malformed */
    LILAC_EINVAL,       /* an argument or value is out of range */
    LILAC_ENOMEM,       /* an allocation failed */
    LILAC_EUNSUPPORTED, /* valid, but not something lilac implements */
    LILAC_EBACKEND,     /* the compute backend failed (CUDA error, no device) */
    LILAC_ECANCELLED,   /* the caller asked to stop */
} lilac_status;

typedef struct {
    lilac_status code;
    char msg[512];
} lilac_error;

const char *lilac_status_name(lilac_status s);

#endif
