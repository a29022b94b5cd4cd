/* test_stop_match.c — the server's stop-string matcher (src/server/stop_match.c).
 *
 * Every run feeds a text in pieces the way output.c does (push, release what
 * the matcher allows, consume; stop feeding at a stop; release the held rest
 * at the end) and checks after every piece against a naive reference that
 * searches the whole text received so far: the output is cut at the earliest
 * complete stop string in it, and otherwise exactly the text before the
 * first byte from which the text could still grow into a stop string has
 * been released, the rest is held.  When no stop string occurs inside
 * another one (other than as its prefix or suffix), the final output does not
 * depend on how the text was split and equals the whole-text answer. */
#include <stdint.h>

#include "check.h"
#include "server/stop_match.h"

#define MAX_STOPS 8

typedef struct {
    char buf[MAX_STOPS][64];
    char *str[MAX_STOPS];
    size_t len[MAX_STOPS];
    srv_stops st;
} stopset;

static void stops_of(stopset *ss, const char *const *strs, int n) {
    memset(ss, 0, sizeof *ss);
    for (int k = 0; k < n; k++) {
        size_t l = strlen(strs[k]);
        memcpy(ss->buf[k], strs[k], l + 1);
        ss->str[k] = ss->buf[k];
        ss->len[k] = l;
        if (l > ss->st.max) ss->st.max = l;
    }
    ss->st.str = ss->str;
    ss->st.len = ss->len;
    ss->st.n = n;
}

/* ------------------------------------------------------------- reference */

/* Earliest start of a complete non-empty stop string in t[0..e), or -1. */
static long ref_first_stop(const stopset *ss, const char *t, size_t e) {
    long best = -1;
    for (int k = 0; k < ss->st.n; k++) {
        if (!ss->len[k]) continue;
        const char *p = memmem(t, e, ss->str[k], ss->len[k]);
        if (p && (best < 0 || p - t < best)) best = p - t;
    }
    return best;
}

/* The first i from which t[i..e) is a proper prefix of a stop string, else e. */
static size_t ref_hold_from(const stopset *ss, const char *t, size_t e) {
    for (size_t i = 0; i < e; i++)
        for (int k = 0; k < ss->st.n; k++)
            if (e - i < ss->len[k] && memcmp(t + i, ss->str[k], e - i) == 0) return i;
    return e;
}

/* 1 when some stop string occurs inside another at an offset > 0 without
 * ending with it: only then can the split of the text change the output (a
 * piece may complete the inner one before the outer, earlier one is whole). */
static int has_inner_stop(const stopset *ss) {
    for (int a = 0; a < ss->st.n; a++)
        for (int b = 0; b < ss->st.n; b++) {
            size_t la = ss->len[a], lb = ss->len[b];
            if (!la || la + 2 > lb) continue;
            for (size_t o = 1; o + la < lb; o++)
                if (memcmp(ss->str[b] + o, ss->str[a], la) == 0) return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------- runner */

typedef struct {
    size_t out_len; /* bytes released in all */
    int stopped;
    char why[256];  /* the first disagreement with the reference, "" if none */
} run_result;

/* Feeds t[0..n) in pieces ending at cuts[0..ncuts) (ascending, the last one
 * n; equal neighbours give empty pieces) and compares every step with the
 * reference. */
static run_result run_split(const stopset *ss, const char *t, size_t n, const size_t *cuts, int ncuts) {
    run_result r = {0};
    lilac_buf hold = LILAC_BUF_INIT, out = LILAC_BUF_INIT;
    size_t prev = 0;
    for (int c = 0; c < ncuts && !r.stopped; c++) {
        size_t e = cuts[c];
        size_t k = srv_stop_push(&ss->st, &hold, t + prev, e - prev, &r.stopped);
        if (k > hold.len) {
            snprintf(r.why, sizeof r.why, "piece %d: releases %zu of %zu held bytes", c, k, hold.len);
            break;
        }
        lilac_buf_append(&out, hold.data, k);
        srv_stop_consume(&hold, k, r.stopped);
        long at = ref_first_stop(ss, t, e);
        if (at >= 0) {
            if (!r.stopped || out.len != (size_t)at || hold.len)
                snprintf(r.why, sizeof r.why, "piece %d (to byte %zu): stopped %d, out %zu, hold %zu; want a stop at %ld",
                         c, e, r.stopped, out.len, hold.len, at);
            else if (memcmp(out.data ? out.data : "", t, out.len))
                snprintf(r.why, sizeof r.why, "piece %d: released bytes differ from the text", c);
            break;
        }
        size_t want = ref_hold_from(ss, t, e);
        if (r.stopped || out.len != want || hold.len != e - want) {
            snprintf(r.why, sizeof r.why, "piece %d (to byte %zu): stopped %d, out %zu, hold %zu; want out %zu, hold %zu",
                     c, e, r.stopped, out.len, hold.len, want, e - want);
            break;
        }
        if ((out.len && memcmp(out.data, t, out.len)) || (hold.len && memcmp(hold.data, t + want, hold.len))) {
            snprintf(r.why, sizeof r.why, "piece %d: released or held bytes differ from the text", c);
            break;
        }
        if (hold.len && hold.len >= ss->st.max) {
            snprintf(r.why, sizeof r.why, "piece %d: holds %zu bytes, longest stop is %zu", c, hold.len, ss->st.max);
            break;
        }
        prev = e;
    }
    if (!r.why[0] && !r.stopped) { /* the text ended without a stop: the held rest is output */
        lilac_buf_append(&out, hold.data, hold.len);
        lilac_buf_clear(&hold);
        if (out.len != n || (n && memcmp(out.data, t, n)))
            snprintf(r.why, sizeof r.why, "no stop: output %zu bytes, text %zu", out.len, n);
    }
    r.out_len = out.len;
    lilac_buf_free(&hold);
    lilac_buf_free(&out);
    return r;
}

/* The final output length when the whole text is searched at once. */
static size_t whole_text_output(const stopset *ss, const char *t, size_t n) {
    long at = ref_first_stop(ss, t, n);
    return at >= 0 ? (size_t)at : n;
}

static size_t run_pieces(const stopset *ss, const char *t, const size_t *cuts, int ncuts, int *stopped) {
    run_result r = run_split(ss, t, strlen(t), cuts, ncuts);
    CHECK(!r.why[0], "\"%s\": %s", t, r.why);
    *stopped = r.stopped;
    return r.out_len;
}

/* Output length and stop flag for t split into pieces of `step` bytes. */
static size_t run_steps(const stopset *ss, const char *t, size_t step, int *stopped) {
    size_t n = strlen(t), cuts[512];
    int nc = 0;
    for (size_t e = step; e < n && nc < 511; e += step) cuts[nc++] = e;
    cuts[nc++] = n;
    return run_pieces(ss, t, cuts, nc, stopped);
}

/* ------------------------------------------------------------------ tests */

static void test_find_and_releasable(void) {
    stopset ss;
    const char *s[] = {"abc", "xy"};
    stops_of(&ss, s, 2);
    CHECK(srv_stop_find(&ss.st, "zzabcz", 6) == 2, "abc at 2");
    CHECK(srv_stop_find(&ss.st, "zxyabc", 6) == 1, "the earliest of two");
    CHECK(srv_stop_find(&ss.st, "zzab", 4) == -1, "a partial match is no match");
    CHECK(srv_stop_find(&ss.st, "", 0) == -1, "empty text");
    CHECK(srv_stop_releasable(&ss.st, "zzab", 4) == 2, "hold \"ab\"");
    CHECK(srv_stop_releasable(&ss.st, "zzax", 4) == 3, "hold \"x\" (\"ax\" starts nothing)");
    CHECK(srv_stop_releasable(&ss.st, "zzzz", 4) == 4, "nothing to hold");
    CHECK(srv_stop_releasable(&ss.st, "", 0) == 0, "empty text");
    CHECK(srv_stop_releasable(&ss.st, "abc", 3) == 3, "a complete stop is not a proper prefix");
}

static void test_no_stop_strings(void) {
    stopset ss;
    stops_of(&ss, NULL, 0);
    lilac_buf hold = LILAC_BUF_INIT;
    int stopped = 1;
    size_t k = srv_stop_push(&ss.st, &hold, "anything at all", 15, &stopped);
    CHECK(k == 15 && !stopped, "no stop strings: all of it goes at once (k %zu)", k);
    srv_stop_consume(&hold, k, stopped);
    CHECK(hold.len == 0, "nothing held");
    k = srv_stop_push(&ss.st, &hold, "x", 0, &stopped);
    CHECK(k == 0 && !stopped && hold.len == 0, "an empty piece changes nothing");
    lilac_buf_free(&hold);

    /* empty stop strings match nothing and hold nothing */
    const char *e[] = {"", "zz"};
    stops_of(&ss, e, 2);
    int st;
    CHECK(run_steps(&ss, "abcdef", 1, &st) == 6 && !st, "an empty stop string never stops");
    CHECK(run_steps(&ss, "abzzcd", 2, &st) == 2 && st, "the other stop string still works");
    const char *only_empty[] = {""};
    stops_of(&ss, only_empty, 1);
    CHECK(run_steps(&ss, "abc", 1, &st) == 3 && !st, "only an empty stop string");
}

static void test_empty_pieces_keep_state(void) {
    stopset ss;
    const char *s[] = {"END"};
    stops_of(&ss, s, 1);
    lilac_buf hold = LILAC_BUF_INIT;
    int stopped;
    size_t k = srv_stop_push(&ss.st, &hold, "xxEN", 4, &stopped);
    CHECK(k == 2 && !stopped, "releases \"xx\", holds \"EN\" (k %zu)", k);
    srv_stop_consume(&hold, k, stopped);
    k = srv_stop_push(&ss.st, &hold, "", 0, &stopped);
    CHECK(k == 0 && !stopped && hold.len == 2 && memcmp(hold.data, "EN", 2) == 0, "an empty piece keeps \"EN\"");
    k = srv_stop_push(&ss.st, &hold, "D tail", 6, &stopped);
    CHECK(k == 0 && stopped, "the stop completes across pieces, nothing before it left to release");
    srv_stop_consume(&hold, k, stopped);
    CHECK(hold.len == 0, "after a stop nothing is held");
    lilac_buf_free(&hold);
}

/* One stop string, the text cut at every byte position and every pair of
 * positions, including inside multi-byte UTF-8 characters of the text and of
 * the stop string. */
static void test_split_everywhere_utf8(void) {
    static const struct {
        const char *stop, *text, *want;
    } cases[] = {
        {"\xe2\x86\x92" "ENDE", "Gr\xc3\xbc\xc3\x9f" "e \xe2\x86\x92" "END w\xc3\xb6rld \xe2\x86\x92" "ENDE! tail \xe2\x86\x92" "ENDE",
         "Gr\xc3\xbc\xc3\x9f" "e \xe2\x86\x92" "END w\xc3\xb6rld "},
        {"\xc3\xa9", "caf\xc3\xa8 caf\xc3\xa9 au lait", "caf\xc3\xa8 caf"}, /* è shares é's lead byte */
        {"\xf0\x9f\x98\x80!", "a\xf0\x9f\x98\x80 b\xf0\x9f\x98\x80!c", "a\xf0\x9f\x98\x80 b"},
        {"</s>", "</s", "</s"}, /* ends inside a partial match: released at the end */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        stopset ss;
        stops_of(&ss, &cases[ci].stop, 1);
        const char *t = cases[ci].text;
        size_t n = strlen(t), want = strlen(cases[ci].want);
        int want_stop = strstr(t, cases[ci].stop) != NULL, bad = 0, runs = 0;
        for (size_t a = 0; a <= n; a++)
            for (size_t b = a; b <= n; b++) {
                size_t cuts[3] = {a, b, n};
                run_result r = run_split(&ss, t, n, cuts, 3);
                runs++;
                if (r.why[0] || r.out_len != want || r.stopped != want_stop) {
                    if (!bad++)
                        CHECK(0, "case %zu cut at %zu,%zu: out %zu (want %zu) stopped %d: %s", ci, a, b, r.out_len, want,
                              r.stopped, r.why);
                }
            }
        CHECK(bad == 0, "case %zu: %d of %d splits wrong", ci, bad, runs);
        int st;
        CHECK(run_steps(&ss, t, 1, &st) == want && st == want_stop, "case %zu byte by byte", ci);
    }
}

static void test_prefix_sharing_and_overlap(void) {
    stopset ss;
    int st;
    const char *ab_abc[] = {"abc", "ab"};
    stops_of(&ss, ab_abc, 2);
    CHECK(run_steps(&ss, "xxabcxx", 1, &st) == 2 && st, "\"ab\" completes first, same start as \"abc\"");
    CHECK(run_steps(&ss, "xxabcxx", 7, &st) == 2 && st, "all at once");

    /* "aab": each new 'a' releases one 'a', since only the last two can start it */
    const char *aab[] = {"aab"};
    stops_of(&ss, aab, 1);
    lilac_buf hold = LILAC_BUF_INIT;
    const size_t want_k[] = {0, 0, 1, 1, 1};
    const char *pieces = "aaaab";
    size_t released = 0;
    for (int i = 0; i < 5; i++) {
        size_t k = srv_stop_push(&ss.st, &hold, pieces + i, 1, &st);
        if (i < 4)
            CHECK(k == want_k[i] && !st, "\"aab\" piece %d: k %zu, want %zu", i, k, want_k[i]);
        else
            CHECK(st && k == 0, "\"aab\" completes: nothing more released (k %zu)", k);
        released += k;
        srv_stop_consume(&hold, k, st);
    }
    CHECK(released == 2, "\"aaaab\" releases \"aa\" (%zu)", released);
    lilac_buf_free(&hold);

    /* self-overlapping: the second try starts inside the first */
    const char *abab[] = {"abab"};
    stops_of(&ss, abab, 1);
    CHECK(run_steps(&ss, "abaababab", 1, &st) == 3 && st, "\"aba\" + \"abab\"");
    const char *aba[] = {"aba", "bab"};
    stops_of(&ss, aba, 2);
    CHECK(run_steps(&ss, "xbabax", 1, &st) == 1 && st, "\"bab\" completes before \"aba\"");
    CHECK(run_steps(&ss, "xbabax", 6, &st) == 1 && st, "both complete in one piece: the earliest start");
}

static void test_stop_at_start(void) {
    stopset ss;
    const char *s[] = {"STOP"};
    stops_of(&ss, s, 1);
    for (size_t step = 1; step <= 9; step++) {
        int st;
        CHECK(run_steps(&ss, "STOPafter", step, &st) == 0 && st, "pieces of %zu: nothing released", step);
    }
}

static void test_partial_match_at_end(void) {
    stopset ss;
    const char *s[] = {"<|end|>", "###"};
    stops_of(&ss, s, 2);
    int st;
    for (size_t step = 1; step <= 12; step++) {
        CHECK(run_steps(&ss, "text <|end", step, &st) == 10 && !st, "pieces of %zu: held \"<|end\" comes out", step);
        CHECK(run_steps(&ss, "text ##", step, &st) == 7 && !st, "pieces of %zu: held \"##\" comes out", step);
    }
}

static void test_earliest_wins(void) {
    stopset ss;
    int st;
    const char *s1[] = {"zz", "y", "q"}, *s2[] = {"q", "y", "zz"};
    for (int order = 0; order < 2; order++) {
        stops_of(&ss, order ? s2 : s1, 3);
        for (size_t step = 1; step <= 8; step++)
            CHECK(run_steps(&ss, "ab zz y q", step, &st) == 3 && st, "order %d, pieces of %zu", order, step);
    }
    /* one piece completes two: the earlier start wins, whatever the list order */
    const char *s3[] = {"cd", "bcd"};
    stops_of(&ss, s3, 2);
    size_t cut[1] = {5};
    CHECK(run_pieces(&ss, "abcde", cut, 1, &st) == 1 && st, "\"bcd\" starts before \"cd\"");
}

/* Documents the one split-dependent case: a stop string inside a longer one. */
static void test_inner_stop_depends_on_pieces(void) {
    stopset ss;
    const char *s[] = {"abcd", "bc"};
    stops_of(&ss, s, 2);
    int st;
    size_t two[2] = {3, 4}, one[1] = {4};
    CHECK(run_pieces(&ss, "abcd", two, 2, &st) == 1 && st, "\"bc\" completes in the first piece: cut there");
    CHECK(run_pieces(&ss, "abcd", one, 1, &st) == 0 && st, "\"abcd\" in one piece: its earlier start wins");
}

static void test_long_text_stop_at_end(void) {
    enum { N = 30000 }; /* the reference rescans the whole text at every piece */
    char *t = malloc(N + 16);
    REQUIRE(t, "out of memory");
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t[i] = "<|im_nd>\n xyz"[x % 13]; /* every byte of the stop string, never all of it */
    }
    memcpy(t + N, "<|im_end|>", 11);
    stopset ss;
    const char *s[] = {"<|im_end|>"};
    stops_of(&ss, s, 1);
    size_t n = N + 10, *cuts = malloc((n + 1) * sizeof *cuts);
    REQUIRE(cuts, "out of memory");
    int nc = 0;
    for (size_t e = 0;;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        e += 1 + x % 7;
        if (e >= n) break;
        cuts[nc++] = e;
    }
    cuts[nc++] = n;
    run_result r = run_split(&ss, t, n, cuts, nc);
    CHECK(!r.why[0], "%s", r.why);
    CHECK(r.stopped && r.out_len == N, "out %zu of %d, stopped %d", r.out_len, N, r.stopped);
    free(cuts);
    free(t);
}

/* Random stop strings and texts over tiny alphabets (one with a two-byte
 * UTF-8 character), split at random byte positions. */
static void test_random_against_reference(void) {
    static const char *alphabets[][3] = {{"a", "b", NULL}, {"a", "b", "c"}, {"a", "\xc3\xa9", NULL}};
    uint64_t x = 20240607;
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    int runs = 0, bad = 0, stopped_runs = 0, held_at_end = 0, split_free = 0, split_mismatch = 0;
    for (int it = 0; it < 30000; it++) {
        const char *const *al = alphabets[RND() % 3];
        int na = al[2] ? 3 : 2;
        const char *strs[4];
        char sb[4][32];
        int n_stop = (int)(RND() % 5);
        for (int k = 0; k < n_stop; k++) {
            int l = 1 + (int)(RND() % 4);
            sb[k][0] = 0;
            for (int i = 0; i < l; i++) strcat(sb[k], al[RND() % (uint64_t)na]);
            strs[k] = sb[k];
        }
        stopset ss;
        stops_of(&ss, strs, n_stop);
        char t[128] = "";
        int tl = (int)(RND() % 30);
        for (int i = 0; i < tl; i++) strcat(t, al[RND() % (uint64_t)na]);
        size_t n = strlen(t);
        size_t whole = whole_text_output(&ss, t, n);
        int inner = has_inner_stop(&ss);
        split_free += !inner;
        for (int sp = 0; sp < 6; sp++) {
            size_t cuts[130];
            int nc = 0;
            uint64_t p = sp == 0 ? 0 : sp == 1 ? 100 : RND() % 100; /* whole, bytes, random */
            for (size_t e = 1; e < n; e++)
                if (RND() % 100 < p) cuts[nc++] = e;
            if (RND() % 4 == 0 && nc) { /* an empty piece */
                cuts[nc] = cuts[nc - 1];
                nc++;
            }
            cuts[nc++] = n;
            run_result r = run_split(&ss, t, n, cuts, nc);
            runs++;
            stopped_runs += r.stopped;
            if (!r.why[0] && !r.stopped && n && ref_hold_from(&ss, t, n) < n) held_at_end++;
            if (r.why[0] && !bad++) CHECK(0, "stops %d, text \"%s\": %s", n_stop, t, r.why);
            if (!inner && r.out_len != whole && !split_mismatch++)
                CHECK(0, "text \"%s\": output %zu bytes, whole-text search says %zu", t, r.out_len, whole);
        }
    }
#undef RND
    CHECK(bad == 0, "%d of %d runs disagree with the reference", bad, runs);
    CHECK(split_mismatch == 0, "%d runs differ from the whole-text search", split_mismatch);
    /* the cases must actually be exercised */
    CHECK(stopped_runs > runs / 4 && stopped_runs < runs * 3 / 4, "%d of %d runs stopped", stopped_runs, runs);
    CHECK(held_at_end > runs / 50, "%d runs ended holding a partial match", held_at_end);
    CHECK(split_free > 20000, "%d stop sets without an inner stop string", split_free);
    printf("    %d random runs, %d stopped, %d ended with a partial match held\n", runs, stopped_runs, held_at_end);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_find_and_releasable);
    RUN(test_no_stop_strings);
    RUN(test_empty_pieces_keep_state);
    RUN(test_split_everywhere_utf8);
    RUN(test_prefix_sharing_and_overlap);
    RUN(test_stop_at_start);
    RUN(test_partial_match_at_end);
    RUN(test_earliest_wins);
    RUN(test_inner_stop_depends_on_pieces);
    RUN(test_long_text_stop_at_end);
    RUN(test_random_against_reference);
    return check_done("stop_match");
}
