/* test_synth.c — `lilac synth` checkpoints: --gguf-exact makes every 4-bit
 * group's bias exactly -8 x its scale in bf16 (two llama.cpp Q4_0 blocks per
 * group, the same codes), leaves the 8-bit router and shared-expert gate and
 * every code as the default writer has them, and the result loads and runs. */
#include "check.h"

#include <stdint.h>
#include <unistd.h>

#include "lilac.h"
#include "model/safetensors.h"
#include "model/synth_write.h"
#include "util/bf16.h"

static char dir_exact[64], dir_plain[64];

static void write_both(void) {
    lilac_error e = {0};
    snprintf(dir_exact, sizeof dir_exact, "/tmp/lilac-synth-exact-XXXXXX");
    snprintf(dir_plain, sizeof dir_plain, "/tmp/lilac-synth-plain-XXXXXX");
    if (!mkdtemp(dir_exact) || !mkdtemp(dir_plain)) {
        CHECK(0, "mkdtemp");
        return;
    }
    CHECK(lilac_synth_write_ex("tests/fixtures/tiny", 0, dir_exact, 5, 1, NULL, NULL, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_synth_write_ex("tests/fixtures/tiny", 0, dir_plain, 5, 0, NULL, NULL, &e) == LILAC_OK, "%s", e.msg);
}

/* bits of a quantised linear from its packed weight and scales shapes */
static int bits_of(const lilac_tensors *ts, const char *scales_name) {
    char w[256];
    size_t n = strlen(scales_name) - strlen(".scales");
    snprintf(w, sizeof w, "%.*s.weight", (int)n, scales_name);
    const lilac_tensor *tw = lilac_st_find(ts, w), *ts_ = lilac_st_find(ts, scales_name);
    if (!tw || !ts_) return -1;
    return (int)(tw->shape[tw->ndim - 1] * 32 / (ts_->shape[ts_->ndim - 1] * 64));
}

static int fp16_exact(float f) {
    /* a bf16 value in the normal fp16 range has at most 8 significant bits: exact in fp16 */
    const float a = fabsf(f);
    return a == 0 || (a >= 6.103515625e-05f && a <= 65504.0f);
}

static void test_gguf_exact_biases(void) {
    lilac_tensors ex = {0}, pl = {0};
    lilac_error e = {0};
    lilac_status st1 = lilac_st_open_dir(dir_exact, &ex, &e);
    REQUIRE(st1 == LILAC_OK, "%s", e.msg);
    lilac_status st2 = lilac_st_open_dir(dir_plain, &pl, &e);
    REQUIRE(st2 == LILAC_OK, "%s", e.msg);
    int n4 = 0, n8 = 0;
    long groups = 0, bad = 0, plain_exact = 0, not16 = 0;
    for (int i = 0; i < ex.n; i++) {
        const lilac_tensor *t = &ex.t[i];
        const char *dot = strrchr(t->name, '.');
        if (!dot || strcmp(dot, ".scales") != 0) continue;
        char bname[256];
        snprintf(bname, sizeof bname, "%.*s.biases", (int)(dot - t->name), t->name);
        const lilac_tensor *b = lilac_st_find(&ex, bname), *pb = lilac_st_find(&pl, bname);
        CHECK(b && pb && t->dtype == LILAC_DT_BF16 && b->dtype == LILAC_DT_BF16 && b->nbytes == t->nbytes, "%s", bname);
        if (!b || !pb) continue;
        const int bits = bits_of(&ex, t->name);
        const uint16_t *s = t->data, *bb = b->data, *pbb = pb->data;
        const size_t ng = t->nbytes / 2;
        if (bits == 4) {
            n4++;
            for (size_t g = 0; g < ng; g++) {
                const float sf = lilac_bf16_to_f32(s[g]), bf = lilac_bf16_to_f32(bb[g]);
                groups++;
                bad += bf != -8.0f * sf;
                not16 += !fp16_exact(sf);
                plain_exact += lilac_bf16_to_f32(pbb[g]) == -8.0f * sf;
            }
        } else {
            CHECK(bits == 8, "%s: %d bits", t->name, bits);
            n8++;
            CHECK(memcmp(b->data, pb->data, b->nbytes) == 0, "%s: 8-bit biases changed by --gguf-exact", bname);
        }
    }
    CHECK(n4 > 0 && n8 > 0 && groups > 1000, "%d 4-bit and %d 8-bit tensors, %ld groups", n4, n8, groups);
    CHECK(bad == 0, "%ld of %ld 4-bit groups have b != -8 s", bad, groups);
    CHECK(not16 == 0, "%ld scales not exact in fp16 (Q4_0's d)", not16);
    CHECK(plain_exact < groups / 10, "the default writer is not -8 s (%ld of %ld): the check discriminates", plain_exact, groups);
    /* the same codes and scales in both: only the 4-bit biases differ */
    CHECK(ex.n == pl.n, "%d vs %d tensors", ex.n, pl.n);
    for (int i = 0; i < ex.n; i++) {
        const lilac_tensor *t = &ex.t[i], *u = lilac_st_find(&pl, t->name);
        CHECK(u && u->nbytes == t->nbytes, "%s", t->name);
        const char *dot = strrchr(t->name, '.');
        if (u && u->nbytes == t->nbytes && !(dot && strcmp(dot, ".biases") == 0))
            CHECK(memcmp(t->data, u->data, t->nbytes) == 0, "%s differs between the two writes", t->name);
    }
    lilac_st_close(&ex);
    lilac_st_close(&pl);
}

static void test_gguf_exact_loads(void) {
    lilac_engine_opts o = {.model_dir = dir_exact, .backend = "cpu", .threads = 1};
    lilac_engine *g = NULL;
    lilac_session *s = NULL;
    lilac_error e = {0};
    lilac_status st3 = lilac_engine_open(&o, &g, &e);
    REQUIRE(st3 == LILAC_OK, "%s", e.msg);
    lilac_engine_info info;
    lilac_engine_get_info(g, &info);
    CHECK(strcmp(info.layout, "mlx") == 0 && info.n_layers == 8, "%s, %d layers", info.layout, info.n_layers);
    int32_t ids[6] = {1, 2, 3, 4, 5, 6}, out[4];
    int got = 0;
    float *logits = malloc((size_t)info.vocab_size * sizeof *logits);
    CHECK(lilac_session_new(g, 64, &s, &e) == LILAC_OK && lilac_session_feed(s, ids, 6, logits, 0, &e) == LILAC_OK, "%s", e.msg);
    int finite = 1;
    for (int i = 0; i < info.vocab_size; i++) finite &= isfinite(logits[i]) != 0;
    CHECK(finite, "logits are finite");
    CHECK(lilac_session_generate_greedy(s, 4, 0, out, &got, &e) == LILAC_OK && got == 4, "%s", e.msg);
    free(logits);
    lilac_session_free(s);
    lilac_engine_close(g);
}

static void cleanup(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir_exact, dir_plain);
    if (dir_exact[0] && system(cmd) != 0) fprintf(stderr, "note: could not remove the temporary models\n");
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    write_both();
    RUN(test_gguf_exact_biases);
    RUN(test_gguf_exact_loads);
    cleanup();
    return check_done("synth");
}
