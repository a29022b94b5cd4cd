/* llama_logits.c — a small libllama client for checking lilac's GGUF export
 * against llama.cpp itself (tools/gguf_check.py builds and runs it; it is
 * never part of lilac).
 *
 *   llama_logits logits MODEL.gguf IDS OUT.bin [GPU_LAYERS [THREADS]]
 *       teacher-forced logits of the token ids (comma-separated, or @FILE
 *       with whitespace-separated ids), one batch,
 *       every position: float32 [n, vocab] to OUT.bin (K/V cache in F32,
 *       flash attention off, so only the weights and the arithmetic differ).
 *       GPU_LAYERS 0 (the default) is the CPU alone, even in a CUDA build: no
 *       GPU device, no operation offload, K/V on the host; THREADS defaults
 *       to the online cores
 *   llama_logits info
 *       llama.cpp's system info and its devices, one "device:" line each
 *   llama_logits dequant A.gguf B.gguf
 *       every tensor of A dequantised by ggml's own to_float and compared bit
 *       for bit with B's tensor of the same name; exit 1 on any difference */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml.h"
#include "gguf.h"
#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* the text of @FILE (ids separated by whitespace, as `lilac score --ids @FILE`
 * reads them) with every whitespace character made a comma */
static char *ids_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "llama_logits: %s: cannot open\n", path), NULL;
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    for (int c; s && (c = fgetc(f)) != EOF;) {
        if (len + 2 > cap) s = realloc(s, cap *= 2);
        if (s) s[len++] = (c == ' ' || c == '\n' || c == '\t' || c == '\r') ? ',' : (char)c;
    }
    fclose(f);
    if (!s) return fprintf(stderr, "llama_logits: out of memory\n"), NULL;
    while (len && s[len - 1] == ',') len--;
    s[len] = 0;
    return s;
}

static int logits(const char *model_path, const char *ids_arg, const char *out, int gpu_layers, int threads) {
    int cap = 16, n = 0;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    char *text = ids_arg[0] == '@' ? ids_file(ids_arg + 1) : NULL;
    if (ids_arg[0] == '@' && !text) return 2;
    for (const char *p = text ? text + strspn(text, ",") : ids_arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) return fprintf(stderr, "llama_logits: bad id at \"%.20s\"\n", p), 2;
        if (n == cap) ids = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
        ids[n++] = (llama_token)v;
        while (*end == ',' && end[1] == ',') end++; /* runs of whitespace in a file */
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return fprintf(stderr, "llama_logits: unexpected \"%.20s\"\n", end), 2;
    }
    free(text);
    if (!n) return fprintf(stderr, "llama_logits: no ids\n"), 2;
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = gpu_layers;
    if (gpu_layers == 0) mp.split_mode = LLAMA_SPLIT_MODE_NONE, mp.main_gpu = -1; /* no GPU device at all */
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) return fprintf(stderr, "llama_logits: %s: llama.cpp cannot load it\n", model_path), 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n + 16;
    cp.n_batch = cp.n_ubatch = (uint32_t)n;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    if (gpu_layers == 0) cp.offload_kqv = false, cp.op_offload = false;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "llama_logits: no context\n"), 1;
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i], b.pos[i] = i, b.n_seq_id[i] = 1, b.seq_id[i][0] = 0, b.logits[i] = 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    if (rc) return fprintf(stderr, "llama_logits: llama_decode returned %d\n", rc), 1;
    FILE *f = fopen(out, "wb");
    if (!f) return fprintf(stderr, "llama_logits: %s: cannot create\n", out), 1;
    for (int i = 0; i < n; i++) {
        const float *l = llama_get_logits_ith(ctx, i);
        if (!l || fwrite(l, sizeof *l, (size_t)vocab, f) != (size_t)vocab) return fprintf(stderr, "llama_logits: row %d\n", i), 1;
    }
    if (fclose(f)) return fprintf(stderr, "llama_logits: %s: write failed\n", out), 1;
    printf("%d %d\n", n, vocab);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    free(ids);
    return 0;
}

/* all of tensor i of g (from file f) as floats, by ggml's own dequantiser */
static float *tensor_f32(FILE *fp, struct gguf_context *g, int64_t i, int64_t *n) {
    const enum ggml_type t = gguf_get_tensor_type(g, i);
    const size_t sz = gguf_get_tensor_size(g, i);
    void *raw = malloc(sz);
    if (!raw || fseeko(fp, (off_t)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i)), SEEK_SET) ||
        fread(raw, 1, sz, fp) != sz)
        return free(raw), NULL;
    *n = (int64_t)(sz / ggml_type_size(t)) * ggml_blck_size(t);
    float *v = malloc((size_t)*n * sizeof *v);
    if (t == GGML_TYPE_F32) memcpy(v, raw, sz);
    else if (ggml_get_type_traits(t)->to_float) ggml_get_type_traits(t)->to_float(raw, v, *n);
    else return free(raw), free(v), NULL;
    free(raw);
    return v;
}

static int dequant(const char *pa, const char *pb) {
    struct gguf_init_params ip = {true, NULL};
    struct gguf_context *a = gguf_init_from_file(pa, ip), *b = gguf_init_from_file(pb, ip);
    if (!a || !b) return fprintf(stderr, "llama_logits: ggml cannot read %s\n", !a ? pa : pb), 1;
    FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
    if (!fa || !fb) return fprintf(stderr, "llama_logits: cannot open the files\n"), 1;
    int bad = 0, quant = 0;
    const int64_t nt = gguf_get_n_tensors(a);
    for (int64_t i = 0; i < nt; i++) {
        const char *name = gguf_get_tensor_name(a, i);
        const int64_t j = gguf_find_tensor(b, name);
        int64_t na = 0, nb = 0;
        float *va = tensor_f32(fa, a, i, &na), *vb = j >= 0 ? tensor_f32(fb, b, j, &nb) : NULL;
        quant += gguf_get_tensor_type(a, i) != GGML_TYPE_F32;
        if (!va || !vb || na != nb || memcmp(va, vb, (size_t)na * sizeof *va)) {
            fprintf(stderr, "differs: %s (%s)\n", name, ggml_type_name(gguf_get_tensor_type(a, i)));
            bad++;
        }
        free(va);
        free(vb);
    }
    printf("%lld tensors (%d quantised): %d differ\n", (long long)nt, quant, bad);
    fclose(fa);
    fclose(fb);
    gguf_free(a);
    gguf_free(b);
    return bad ? 1 : 0;
}

static int info(void) {
    static const char *kind[] = {"cpu", "gpu", "igpu", "accel", "meta"};
    llama_backend_init();
    printf("system: %s\n", llama_print_system_info());
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        const unsigned t = (unsigned)ggml_backend_dev_type(d);
        printf("device: %s (%s) type=%s\n", ggml_backend_dev_name(d), ggml_backend_dev_description(d),
               t < sizeof kind / sizeof kind[0] ? kind[t] : "other");
    }
    return 0;
}

int main(int argc, char **argv) {
    llama_log_set(quiet_log, NULL);
    if (argc >= 5 && argc <= 7 && strcmp(argv[1], "logits") == 0) {
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        const int gl = argc > 5 ? atoi(argv[5]) : 0, th = argc > 6 ? atoi(argv[6]) : cores > 0 ? (int)cores : 1;
        if (gl < 0 || th < 1) return fprintf(stderr, "llama_logits: GPU_LAYERS >= 0, THREADS >= 1\n"), 2;
        return logits(argv[2], argv[3], argv[4], gl, th);
    }
    if (argc == 4 && strcmp(argv[1], "dequant") == 0) return dequant(argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "info") == 0) return info();
    fprintf(stderr, "usage: llama_logits logits MODEL.gguf IDS OUT.bin [GPU_LAYERS [THREADS]] | dequant A.gguf B.gguf | info\n");
    return 2;
}
