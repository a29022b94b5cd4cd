/* test_bench_args.c — the pure parts of `lilac bench`: the length lists of
 * --prefill / --decode, the statistics of repeated runs, nvidia-smi lines. */
#include "check.h"

#include "cli/bench_prefill.h"
#include "cli/bench_stats.h"

static void test_lengths(void) {
    int v[16];
    lilac_error e = {0};
    CHECK(bench_parse_length_list("--prefill", "512,4096,32K,128k", v, 16, &e) == 4, "%s", e.msg);
    CHECK(v[0] == 512 && v[1] == 4096 && v[2] == 32768 && v[3] == 131072, "%d %d %d %d", v[0], v[1], v[2], v[3]);
    CHECK(bench_parse_length_list("--prefill", "7", v, 16, &e) == 1 && v[0] == 7, "single length");
    static const char *bad[] = {"", ",", "512,", "512,,4", "0", "-4", "4x", "12K5", "99999999", "1,2,3", "+5", " 5",
                                "99999999999999999999K", "16385K"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        lilac_error e2 = {0};
        const int cap = i == 9 ? 2 : 16; /* "1,2,3": more lengths than room */
        CHECK(bench_parse_length_list("--prefill", bad[i], v, cap, &e2) == -1, "\"%s\" accepted", bad[i]);
        CHECK(strstr(e2.msg, "--prefill") != NULL, "\"%s\": error names the option: %s", bad[i], e2.msg);
    }
    lilac_error e3 = {0};
    CHECK(bench_parse_length_list("--decode", "4K,x", v, 16, &e3) == -1 && strstr(e3.msg, "--decode") == e3.msg,
          "the error names --decode: %s", e3.msg);
    CHECK(bench_parse_length_list("--decode", "16384K", v, 16, &e3) == 1 && v[0] == 1 << 24, "16384K is the limit");
}

static void test_defaults(void) {
    /* the ten lengths, 256 .. 128K, each twice the one before */
    CHECK(bench_default_lengths[0] == 256 && bench_default_lengths[9] == 128 * 1024, "ends %d %d", bench_default_lengths[0],
          bench_default_lengths[9]);
    for (int i = 1; i < 10; i++) CHECK(bench_default_lengths[i] == 2 * bench_default_lengths[i - 1], "length %d", i);
}

static void test_stats(void) {
    const double odd[] = {3.0, 1.0, 2.0};
    bench_stat s = bench_stats(odd, 3);
    CHECK(s.median == 2.0 && s.min == 1.0 && s.max == 3.0 && s.n == 3, "odd: %g %g %g", s.median, s.min, s.max);
    CHECK(odd[0] == 3.0 && odd[1] == 1.0, "the input is not sorted in place");
    const double even[] = {10.0, 4.0, 1.0, 2.0};
    s = bench_stats(even, 4);
    CHECK(s.median == 3.0 && s.min == 1.0 && s.max == 10.0, "even: median of 2 and 4 is 3, got %g", s.median);
    const double one[] = {5.5};
    s = bench_stats(one, 1);
    CHECK(s.median == 5.5 && s.min == 5.5 && s.max == 5.5, "single: %g", s.median);
    s = bench_stats(one, 0);
    CHECK(s.n == 0 && s.median == 0, "empty gives zeros");
    double many[BENCH_MAX_REPEATS + 5];
    for (int i = 0; i < BENCH_MAX_REPEATS + 5; i++) many[i] = BENCH_MAX_REPEATS + 5 - i; /* 105 .. 1 */
    s = bench_stats(many, BENCH_MAX_REPEATS + 5);
    CHECK(s.median == 53 && s.min == 1 && s.max == BENCH_MAX_REPEATS + 5, "many: %g %g %g", s.median, s.min, s.max);
}

static void test_smi(void) {
    bench_gpu_facts f;
    CHECK(bench_parse_smi_line("NVIDIA H200, 570.86.15, 1980, 1980\n", &f) == 0, "a normal line");
    CHECK(strcmp(f.name, "NVIDIA H200") == 0 && strcmp(f.driver, "570.86.15") == 0, "'%s' '%s'", f.name, f.driver);
    CHECK(f.sm_clock_mhz == 1980 && f.sm_clock_max_mhz == 1980, "%d %d", f.sm_clock_mhz, f.sm_clock_max_mhz);
    CHECK(bench_parse_smi_line("NVIDIA H200, 570.86.15, [N/A], 1980", &f) == 0 && f.sm_clock_mhz == -1 &&
              f.sm_clock_max_mhz == 1980,
          "an unknown clock is -1");
    static const char *bad[] = {"", "\n", "NVIDIA H200", "a, b, c", "a, b, c, d, e", ", 1, 2, 3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(bench_parse_smi_line(bad[i], &f) == -1, "\"%s\" accepted", bad[i]);
    char longname[400];
    memset(longname, 'x', sizeof longname);
    memcpy(longname + 300, ", 1, 2, 3", 10);
    CHECK(bench_parse_smi_line(longname, &f) == 0 && strlen(f.name) == sizeof f.name - 1, "a long name is cut, not overrun");
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_lengths);
    RUN(test_defaults);
    RUN(test_stats);
    RUN(test_smi);
    return check_done("bench_args");
}
