/* safetensors.c — header validation, the tensor name table, shard indexes. */
#include "model/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER (100u << 20) /* the safetensors format's own limit */

static const struct {
    const char *name;
    size_t size;
} dtypes[LILAC_DT_COUNT] = {
    [LILAC_DT_F32] = {"F32", 4},  [LILAC_DT_F16] = {"F16", 2}, [LILAC_DT_BF16] = {"BF16", 2},
    [LILAC_DT_F64] = {"F64", 8},  [LILAC_DT_U8] = {"U8", 1},   [LILAC_DT_I8] = {"I8", 1},
    [LILAC_DT_U16] = {"U16", 2},  [LILAC_DT_I16] = {"I16", 2}, [LILAC_DT_U32] = {"U32", 4},
    [LILAC_DT_I32] = {"I32", 4},  [LILAC_DT_U64] = {"U64", 8}, [LILAC_DT_I64] = {"I64", 8},
    [LILAC_DT_BOOL] = {"BOOL", 1},
};

const char *lilac_dtype_name(lilac_dtype d) { return d < LILAC_DT_COUNT ? dtypes[d].name : "?"; }
size_t lilac_dtype_size(lilac_dtype d) { return d < LILAC_DT_COUNT ? dtypes[d].size : 0; }

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int slot_of(const lilac_tensors *ts, const char *name) {
    if (!ts->nslots) return -1;
    uint32_t m = (uint32_t)ts->nslots - 1;
    for (uint32_t i = hash_name(name) & m;; i = (i + 1) & m) {
        int k = ts->slots[i];
        if (k < 0 || strcmp(ts->t[k].name, name) == 0) return (int)i;
    }
}

static int rehash(lilac_tensors *ts, int nslots) {
    int *s = malloc((size_t)nslots * sizeof *s);
    if (!s) return 0;
    for (int i = 0; i < nslots; i++) s[i] = -1;
    free(ts->slots);
    ts->slots = s;
    ts->nslots = nslots;
    for (int k = 0; k < ts->n; k++) ts->slots[slot_of(ts, ts->t[k].name)] = k;
    return 1;
}

const lilac_tensor *lilac_st_find(const lilac_tensors *ts, const char *name) {
    int s = slot_of(ts, name);
    return s >= 0 && ts->slots[s] >= 0 ? &ts->t[ts->slots[s]] : NULL;
}

lilac_tensor *lilac_st_find_mut(lilac_tensors *ts, const char *name) { return (lilac_tensor *)lilac_st_find(ts, name); }

static lilac_status push(lilac_tensors *ts, lilac_tensor *t, lilac_error *e) {
    if (ts->n == ts->cap) {
        int cap = ts->cap ? ts->cap * 2 : 256;
        lilac_tensor *nt = realloc(ts->t, (size_t)cap * sizeof *nt);
        if (!nt) return lilac_fail(e, LILAC_ENOMEM, "tensor table");
        ts->t = nt;
        ts->cap = cap;
    }
    if ((ts->n + 1) * 2 > ts->nslots && !rehash(ts, ts->nslots ? ts->nslots * 2 : 512))
        return lilac_fail(e, LILAC_ENOMEM, "tensor table");
    ts->t[ts->n] = *t;
    ts->slots[slot_of(ts, t->name)] = ts->n;
    ts->n++;
    return LILAC_OK;
}

typedef struct {
    size_t begin, end;
    const char *name;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Validates one tensor entry of the header and fills t (name not set). */
static lilac_status parse_entry(const char *where, const char *name, json_t *v, size_t data_size, lilac_tensor *t,
                                lilac_error *e) {
    if (!json_is_object(v)) return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: header entry is not an object", where, name);
    const char *dt = json_string_value(json_object_get(v, "dtype"));
    if (!dt) return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: missing dtype", where, name);
    int d = -1;
    for (int i = 0; i < LILAC_DT_COUNT; i++)
        if (strcmp(dt, dtypes[i].name) == 0) d = i;
    if (d < 0) return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: unknown dtype %s", where, name, dt);
    t->dtype = (lilac_dtype)d;
    json_t *shape = json_object_get(v, "shape");
    if (!json_is_array(shape) || json_array_size(shape) > LILAC_ST_MAX_DIMS)
        return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: shape must be a list of at most %d sizes", where, name,
                          LILAC_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    size_t count = 1;
    int overflow = 0;
    for (int i = 0; i < t->ndim; i++) {
        json_t *x = json_array_get(shape, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: shape[%d] is not a non-negative integer", where, name, i);
        json_int_t s = json_integer_value(x);
        t->shape[i] = s;
        if (s && count > SIZE_MAX / (size_t)s) overflow = 1;
        else count *= (size_t)s;
    }
    size_t esz = dtypes[d].size;
    if (overflow || count > SIZE_MAX / esz)
        return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: shape is too large", where, name);
    json_t *off = json_object_get(v, "data_offsets");
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(en) ||
        json_integer_value(b) < 0 || json_integer_value(en) < json_integer_value(b))
        return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: data_offsets must be [begin, end] with 0 <= begin <= end",
                          where, name);
    size_t begin = (size_t)json_integer_value(b), end = (size_t)json_integer_value(en);
    if (end > data_size)
        return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: data_offsets [%zu, %zu] run past the end of the data (%zu bytes)",
                          where, name, begin, end, data_size);
    if (end - begin != count * esz)
        return lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: %zu bytes of data for a %s tensor of %zu elements (%zu bytes)",
                          where, name, end - begin, dt, count, count * esz);
    t->nbytes = end - begin;
    t->data = (const void *)(uintptr_t)begin; /* offset for now; rebased by the caller */
    return LILAC_OK;
}

lilac_status lilac_st_add_buffer(lilac_tensors *ts, const unsigned char *data, size_t size, const char *where,
                                 int file_index, lilac_error *e) {
    if (size < 8) return lilac_fail(e, LILAC_EFORMAT, "%s: %zu bytes is too short for a safetensors file", where, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
    if (hlen > MAX_HEADER) return lilac_fail(e, LILAC_EFORMAT, "%s: header length %llu exceeds 100 MB", where, (unsigned long long)hlen);
    if (hlen > size - 8)
        return lilac_fail(e, LILAC_EFORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", where,
                          (unsigned long long)hlen, size);
    json_error_t je;
    json_t *h = json_loadb((const char *)data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!h) return lilac_fail(e, LILAC_EFORMAT, "%s: header is not valid JSON (byte %d of the header): %s", where, je.position, je.text);
    lilac_status st = LILAC_OK;
    const unsigned char *base = data + 8 + hlen;
    size_t data_size = size - 8 - (size_t)hlen;
    span *spans = NULL;
    int nspans = 0;
    if (!json_is_object(h)) {
        st = lilac_fail(e, LILAC_EFORMAT, "%s: header is not a JSON object", where);
        goto done;
    }
    spans = malloc((json_object_size(h) + 1) * sizeof *spans);
    if (!spans) {
        st = lilac_fail(e, LILAC_ENOMEM, "%s: header", where);
        goto done;
    }
    const char *name;
    json_t *v;
    json_object_foreach(h, name, v) {
        if (strcmp(name, "__metadata__") == 0) {
            if (!json_is_object(v)) {
                st = lilac_fail(e, LILAC_EFORMAT, "%s: __metadata__ is not an object", where);
                goto done;
            }
            continue;
        }
        if (lilac_st_find(ts, name)) {
            st = lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s is defined in more than one file", where, name);
            goto done;
        }
        lilac_tensor t = {0};
        if ((st = parse_entry(where, name, v, data_size, &t, e))) goto done;
        size_t begin = (size_t)(uintptr_t)t.data;
        spans[nspans++] = (span){begin, begin + t.nbytes, NULL};
        t.data = base + begin;
        t.file = file_index;
        size_t align = lilac_dtype_size(t.dtype);
        if (t.nbytes && ((uintptr_t)t.data % align)) {
            /* The format does not promise alignment; copy rather than read
             * misaligned words. */
            void *copy = aligned_alloc(16, (t.nbytes + 15) / 16 * 16);
            void **nc = copy ? realloc(ts->copies, (size_t)(ts->ncopies + 1) * sizeof *nc) : NULL;
            if (!nc) {
                free(copy);
                st = lilac_fail(e, LILAC_ENOMEM, "%s: tensor %s", where, name);
                goto done;
            }
            memcpy(copy, t.data, t.nbytes);
            ts->copies = nc;
            ts->copies[ts->ncopies++] = copy;
            t.data = copy;
        }
        t.name = strdup(name);
        if (!t.name) {
            st = lilac_fail(e, LILAC_ENOMEM, "%s: tensor names", where);
            goto done;
        }
        if ((st = push(ts, &t, e))) {
            free(t.name);
            goto done;
        }
        spans[nspans - 1].name = ts->t[ts->n - 1].name;
    }
    qsort(spans, (size_t)nspans, sizeof *spans, cmp_span);
    for (int i = 1; i < nspans; i++)
        if (spans[i].begin < spans[i - 1].end && spans[i].end > spans[i].begin) {
            st = lilac_fail(e, LILAC_EFORMAT, "%s: tensors %s and %s overlap (bytes %zu..%zu and %zu..%zu of the data)", where,
                            spans[i - 1].name, spans[i].name, spans[i - 1].begin, spans[i - 1].end, spans[i].begin,
                            spans[i].end);
            goto done;
        }
done:
    free(spans);
    json_decref(h);
    return st;
}

static lilac_status add_path(lilac_tensors *ts, const char *path, lilac_error *e) {
    char **nf = realloc(ts->files, (size_t)(ts->nfiles + 1) * sizeof *nf);
    if (!nf) return lilac_fail(e, LILAC_ENOMEM, "file table");
    ts->files = nf;
    lilac_mapping *nm = realloc(ts->maps, (size_t)(ts->nfiles + 1) * sizeof *nm);
    if (!nm) return lilac_fail(e, LILAC_ENOMEM, "file table");
    ts->maps = nm;
    ts->files[ts->nfiles] = strdup(path);
    ts->maps[ts->nfiles] = (lilac_mapping){0};
    if (!ts->files[ts->nfiles]) return lilac_fail(e, LILAC_ENOMEM, "file table");
    ts->nfiles++;
    return LILAC_OK;
}

lilac_status lilac_st_add_file(lilac_tensors *ts, const char *path, lilac_error *e) {
    lilac_status st = add_path(ts, path, e);
    if (st) return st;
    int fi = ts->nfiles - 1;
    if ((st = lilac_map_file(path, &ts->maps[fi], e))) return st;
    return lilac_st_add_buffer(ts, ts->maps[fi].data, ts->maps[fi].size, path, fi, e);
}

/* Sharded checkpoints: the index's weight_map names each tensor's file; every
 * listed file is opened once and every listed name must be in its file. */
static lilac_status open_index(lilac_tensors *ts, const char *dir, const char *index_path, lilac_error *e) {
    char *text;
    size_t len;
    lilac_status st = lilac_read_file(index_path, 64u << 20, &text, &len, e);
    if (st) return st;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) return lilac_fail(e, LILAC_EFORMAT, "%s: invalid JSON at line %d column %d: %s", index_path, je.line, je.column, je.text);
    json_t *wm = json_object_get(root, "weight_map");
    const char *name;
    json_t *v;
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        st = lilac_fail(e, LILAC_EFORMAT, "%s: weight_map must be a non-empty object", index_path);
        goto done;
    }
    json_object_foreach(wm, name, v) {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/') || strcmp(file, "..") == 0 || strcmp(file, ".") == 0) {
            st = lilac_fail(e, LILAC_EFORMAT, "%s: weight_map[%s] must be a file name in the model directory", index_path, name);
            goto done;
        }
        char path[4096];
        if ((st = lilac_path_join(path, sizeof path, dir, file, e))) goto done;
        int known = 0;
        for (int i = 0; i < ts->nfiles; i++) known |= strcmp(ts->files[i], path) == 0;
        if (!known && (st = lilac_st_add_file(ts, path, e))) goto done;
    }
    json_object_foreach(wm, name, v) {
        const lilac_tensor *t = lilac_st_find(ts, name);
        char path[4096];
        lilac_path_join(path, sizeof path, dir, json_string_value(v), NULL);
        if (!t || strcmp(ts->files[t->file], path) != 0) {
            st = lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s is listed in %s but that file does not hold it", index_path,
                            name, json_string_value(v));
            goto done;
        }
    }
done:
    json_decref(root);
    return st;
}

lilac_status lilac_st_open_dir(const char *dir, lilac_tensors *ts, lilac_error *e) {
    memset(ts, 0, sizeof *ts);
    char path[4096];
    lilac_status st = lilac_path_join(path, sizeof path, dir, "model.safetensors.index.json", e);
    if (st) return st;
    if (lilac_file_exists(path)) st = open_index(ts, dir, path, e);
    else {
        if ((st = lilac_path_join(path, sizeof path, dir, "model.safetensors", e))) return st;
        if (!lilac_file_exists(path))
            return lilac_fail(e, LILAC_EIO, "%s: no model.safetensors or model.safetensors.index.json", dir);
        st = lilac_st_add_file(ts, path, e);
    }
    if (st) lilac_st_close(ts);
    return st;
}

void lilac_st_close(lilac_tensors *ts) {
    if (!ts) return;
    for (int i = 0; i < ts->n; i++) free(ts->t[i].name);
    for (int i = 0; i < ts->nfiles; i++) {
        lilac_unmap_file(&ts->maps[i]);
        free(ts->files[i]);
    }
    for (int i = 0; i < ts->ncopies; i++) free(ts->copies[i]);
    free(ts->t);
    free(ts->slots);
    free(ts->maps);
    free(ts->files);
    free(ts->copies);
    memset(ts, 0, sizeof *ts);
}
