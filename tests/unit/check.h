/* check.h — the assertion helpers of lilac's unit tests.
 *
 * A test binary is a list of named groups:
 *
 *     static void test_thing(void) { CHECK(x == 1, "x is %d", x); }
 *     int main(int argc, char **argv) {
 *         RUN(test_thing);
 *         return check_done("thing");
 *     }
 *
 * Running the binary with group names runs only those groups.  A failing CHECK
 * prints the file, line, expression and message and the run goes on, so one
 * run reports every failure.  SKIP() says loudly that something did not run. */
#ifndef LILAC_TEST_CHECK_H
#define LILAC_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_total, check_failed, check_skipped;
static int check_argc;
static char **check_argv;

#define CHECK(cond, ...) CHECK_AS(cond, #cond, __VA_ARGS__)

/* CHECK with the expression's text given apart (ok is evaluated once). */
#define CHECK_AS(ok, text, ...)                                                      \
    do {                                                                             \
        check_total++;                                                               \
        if (!(ok)) {                                                                 \
            check_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, text);           \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

/* CHECK, then leave the test function when it failed.  cond is evaluated
 * once, so it may have side effects (REQUIRE((f = fopen(...)) != NULL, ...)). */
#define REQUIRE(cond, ...)                                                           \
    do {                                                                             \
        const int require_ok_ = !!(cond);                                            \
        CHECK_AS(require_ok_, #cond, __VA_ARGS__);                                   \
        if (!require_ok_) return;                                                    \
    } while (0)

#define SKIP(...)                                                                    \
    do {                                                                             \
        check_skipped++;                                                             \
        printf("  SKIP: ");                                                          \
        printf(__VA_ARGS__);                                                         \
        printf("\n");                                                                \
    } while (0)

static inline int check_selected(const char *name) {
    if (check_argc <= 1) return 1;
    for (int i = 1; i < check_argc; i++)
        if (strcmp(check_argv[i], name) == 0) return 1;
    return 0;
}

#define CHECK_INIT(argc, argv) (check_argc = (argc), check_argv = (argv))

#define RUN(fn)                                                                      \
    do {                                                                             \
        if (check_selected(#fn)) {                                                   \
            int before = check_failed;                                               \
            fn();                                                                    \
            printf("  %-44s %s\n", #fn, check_failed == before ? "ok" : "FAILED");   \
            fflush(stdout);                                                          \
        }                                                                            \
    } while (0)

static inline int check_done(const char *suite) {
    printf("%s: %d checks, %d failed, %d skipped\n", suite, check_total, check_failed, check_skipped);
    if (check_skipped && getenv("LILAC_REQUIRE_GPU")) {
        printf("%s: skips are failures under LILAC_REQUIRE_GPU\n", suite);
        return 1;
    }
    return check_failed ? 1 : 0;
}

#endif
