/* test_bench_args.c — the prompt-length list of `lilac bench --prefill`. */
#include "check.h"

#include "cli/bench_prefill.h"

static void test_lengths(void) {
    int v[16];
    lilac_error e = {0};
    CHECK(bench_parse_lengths("512,4096,32K,128k", v, 16, &e) == 4, "%s", e.msg);
    CHECK(v[0] == 512 && v[1] == 4096 && v[2] == 32768 && v[3] == 131072, "%d %d %d %d", v[0], v[1], v[2], v[3]);
    CHECK(bench_parse_lengths("7", v, 16, &e) == 1 && v[0] == 7, "single length");
    static const char *bad[] = {"", ",", "512,", "512,,4", "0", "-4", "4x", "12K5", "99999999", "1,2,3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        lilac_error e2 = {0};
        const int cap = i == 9 ? 2 : 16; /* the last one: more lengths than room */
        CHECK(bench_parse_lengths(bad[i], v, cap, &e2) == -1, "\"%s\" accepted", bad[i]);
        CHECK(strstr(e2.msg, "--prefill") != NULL, "\"%s\": error names the option: %s", bad[i], e2.msg);
    }
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_lengths);
    return check_done("bench_args");
}
