/* lineedit.c — the raw-mode line editor of `lilac chat` (see lineedit.h).
 *
 * The line is a byte buffer with a cursor on a character boundary.  Every
 * change redraws the whole prompt + line: the cursor goes up to the row the
 * prompt started on, the screen below is cleared, everything is written
 * again, and the cursor is put back (rows and columns computed from display
 * widths and the terminal's width), so wrapped lines stay correct. */
#include "cli/lineedit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <utf8proc.h>

#include "util/buf.h"

typedef struct {
    int in, out;
    const char *prompt;
    lilac_buf b;    /* the line */
    size_t cur;     /* cursor, a byte offset on a character boundary */
    int rows_above; /* rows between the prompt's first row and the cursor's, as last drawn */
    int cols;
} ed;

static void put(ed *e, const char *s, size_t n) {
    while (n) {
        ssize_t w = write(e->out, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

static void puts_(ed *e, const char *s) { put(e, s, strlen(s)); }

/* Display columns of s[0..n): escape sequences (ESC [ ... letter, as in a
 * coloured prompt) take none; control bytes and invalid UTF-8 count 1. */
static int width(const char *s, size_t n) {
    int w = 0;
    size_t i = 0;
    while (i < n) {
        if (s[i] == '\x1b' && i + 1 < n && s[i + 1] == '[') {
            i += 2;
            while (i < n && !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) i++;
            i++;
            continue;
        }
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) {
            w++, i++;
            continue;
        }
        int cw = utf8proc_charwidth(c);
        w += cw < 0 ? 1 : cw;
        i += (size_t)k;
    }
    return w;
}

static size_t prev_char(const char *s, size_t i) {
    if (i == 0) return 0;
    i--;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
    return i;
}

static size_t next_char(const char *s, size_t n, size_t i) {
    if (i >= n) return n;
    i++;
    while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80) i++;
    return i;
}

static int term_cols(int fd) {
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

static void refresh(ed *e) {
    char tmp[64];
    lilac_buf o = LILAC_BUF_INIT;
    if (e->rows_above > 0) {
        snprintf(tmp, sizeof tmp, "\x1b[%dA", e->rows_above);
        lilac_buf_puts(&o, tmp);
    }
    lilac_buf_puts(&o, "\r\x1b[J");
    lilac_buf_puts(&o, e->prompt);
    if (e->b.len) lilac_buf_append(&o, e->b.data, e->b.len);
    const int pw = width(e->prompt, strlen(e->prompt));
    const int total = pw + width(e->b.data, e->b.len), at = pw + width(e->b.data, e->cur);
    const int cols = e->cols;
    /* at the very end of a full row the terminal has not wrapped yet: make it */
    if (total > 0 && total % cols == 0) lilac_buf_puts(&o, "\r\n");
    const int end_row = total / cols, cur_row = at / cols, cur_col = at % cols;
    if (end_row > cur_row) {
        snprintf(tmp, sizeof tmp, "\x1b[%dA", end_row - cur_row);
        lilac_buf_puts(&o, tmp);
    }
    lilac_buf_puts(&o, "\r");
    if (cur_col > 0) {
        snprintf(tmp, sizeof tmp, "\x1b[%dC", cur_col);
        lilac_buf_puts(&o, tmp);
    }
    e->rows_above = cur_row;
    if (!o.oom) put(e, o.data, o.len);
    lilac_buf_free(&o);
}

static void set_line(ed *e, const char *s) {
    lilac_buf_clear(&e->b);
    lilac_buf_puts(&e->b, s);
    e->cur = e->b.len;
}

static void erase(ed *e, size_t from, size_t to) {
    if (to <= from) return;
    memmove(e->b.data + from, e->b.data + to, e->b.len - to + 1);
    e->b.len -= to - from;
    if (e->cur > to) e->cur -= to - from;
    else if (e->cur > from) e->cur = from;
}

static void insert(ed *e, const char *p, size_t n) {
    lilac_buf_append(&e->b, p, n); /* grow, then move the tail */
    if (e->b.oom) return;
    memmove(e->b.data + e->cur + n, e->b.data + e->cur, e->b.len - n - e->cur);
    memcpy(e->b.data + e->cur, p, n);
    e->cur += n;
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

static size_t word_left(const ed *e) {
    size_t i = e->cur;
    while (i > 0 && is_space(e->b.data[i - 1])) i--;
    while (i > 0 && !is_space(e->b.data[i - 1])) i--;
    return i;
}

static size_t word_right(const ed *e) {
    size_t i = e->cur;
    while (i < e->b.len && is_space(e->b.data[i])) i++;
    while (i < e->b.len && !is_space(e->b.data[i])) i++;
    return i;
}

static int read_byte(int fd, unsigned char *c) {
    for (;;) {
        ssize_t r = read(fd, c, 1);
        if (r == 1) return 1;
        if (r < 0 && errno == EINTR) continue;
        return 0;
    }
}

int cli_readline(int in, int out, const char *prompt, cli_history *h, char **line) {
    *line = NULL;
    struct termios old, raw;
    if (tcgetattr(in, &old) < 0) return CLI_LINE_ERROR;
    raw = old;
    raw.c_iflag &= ~(unsigned)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_lflag &= ~(unsigned)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(in, TCSAFLUSH, &raw) < 0) return CLI_LINE_ERROR;
    ed e = {.in = in, .out = out, .prompt = prompt, .cols = term_cols(out)};
    lilac_buf_puts(&e.b, ""); /* data is never NULL */
    int hi = h ? h->n : 0;    /* history index; h->n = the line being edited */
    char *editing = NULL;     /* the new line, kept while browsing history */
    int rc = CLI_LINE_ERROR;
    refresh(&e);
    for (;;) {
        unsigned char c;
        if (!read_byte(in, &c)) {
            rc = e.b.len ? CLI_LINE_OK : CLI_LINE_EOF;
            break;
        }
        if (c == '\r' || c == '\n') {
            rc = CLI_LINE_OK;
            break;
        }
        if (c == 3) { /* Ctrl-C */
            e.cur = e.b.len;
            refresh(&e);
            puts_(&e, "^C");
            rc = CLI_LINE_INTERRUPT;
            break;
        }
        if (c == 4) { /* Ctrl-D */
            if (!e.b.len) {
                rc = CLI_LINE_EOF;
                break;
            }
            erase(&e, e.cur, next_char(e.b.data, e.b.len, e.cur));
        } else if (c == 127 || c == 8) {
            erase(&e, prev_char(e.b.data, e.cur), e.cur);
        } else if (c == 1) {
            e.cur = 0;
        } else if (c == 5) {
            e.cur = e.b.len;
        } else if (c == 2) {
            e.cur = prev_char(e.b.data, e.cur);
        } else if (c == 6) {
            e.cur = next_char(e.b.data, e.b.len, e.cur);
        } else if (c == 11) {
            erase(&e, e.cur, e.b.len);
        } else if (c == 21) {
            erase(&e, 0, e.cur);
        } else if (c == 23) {
            erase(&e, word_left(&e), e.cur);
        } else if (c == 12) {
            puts_(&e, "\x1b[H\x1b[2J");
            e.rows_above = 0;
        } else if (c == 16 || c == 14) { /* Ctrl-P / Ctrl-N */
            goto history;
        } else if (c == 27) { /* escape sequences */
            unsigned char s0, s1, s2;
            if (!read_byte(in, &s0)) continue;
            if (s0 == 'b' || s0 == 'f') { /* Alt-B / Alt-F */
                e.cur = s0 == 'b' ? word_left(&e) : word_right(&e);
            } else if (s0 == '[' || s0 == 'O') {
                if (!read_byte(in, &s1)) continue;
                if (s1 >= '0' && s1 <= '9') {
                    if (!read_byte(in, &s2)) continue;
                    while (s2 != '~' && (s2 < 'A' || s2 > 'z')) /* parameters, e.g. 1;5 */
                        if (!read_byte(in, &s2)) break;
                    if (s2 == '~' && s1 == '3') erase(&e, e.cur, next_char(e.b.data, e.b.len, e.cur));
                    else if (s2 == '~' && (s1 == '1' || s1 == '7')) e.cur = 0;
                    else if (s2 == '~' && (s1 == '4' || s1 == '8')) e.cur = e.b.len;
                } else if (s1 == 'C') {
                    e.cur = next_char(e.b.data, e.b.len, e.cur);
                } else if (s1 == 'D') {
                    e.cur = prev_char(e.b.data, e.cur);
                } else if (s1 == 'H') {
                    e.cur = 0;
                } else if (s1 == 'F') {
                    e.cur = e.b.len;
                } else if (s1 == 'A' || s1 == 'B') {
                    c = s1 == 'A' ? 16 : 14;
                    goto history;
                }
            }
        } else if (c >= 32 || c == '\t') {
            insert(&e, (const char *)&c, 1);
        }
        refresh(&e);
        continue;
    history:
        if (h && h->n) {
            if (hi == h->n) {
                free(editing);
                editing = strdup(e.b.data);
            }
            int nh = c == 16 ? hi - 1 : hi + 1;
            if (nh >= 0 && nh <= h->n) {
                hi = nh;
                set_line(&e, hi == h->n ? (editing ? editing : "") : h->lines[hi]);
            }
        }
        refresh(&e);
    }
    if (rc == CLI_LINE_OK) {
        e.cur = e.b.len;
        refresh(&e);
    }
    puts_(&e, "\r\n");
    tcsetattr(in, TCSAFLUSH, &old);
    free(editing);
    if (rc == CLI_LINE_OK) {
        if (e.b.oom) {
            lilac_buf_free(&e.b);
            return CLI_LINE_ERROR;
        }
        *line = lilac_buf_take(&e.b);
    }
    lilac_buf_free(&e.b);
    return rc;
}

void cli_history_add(cli_history *h, const char *line) {
    if (!h || !line || !*line || (h->n && !strcmp(h->lines[h->n - 1], line))) return;
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        char **nl = realloc(h->lines, (size_t)cap * sizeof *nl);
        if (!nl) return;
        h->lines = nl, h->cap = cap;
    }
    char *c = strdup(line);
    if (c) h->lines[h->n++] = c;
}

void cli_history_free(cli_history *h) {
    if (!h) return;
    for (int i = 0; i < h->n; i++) free(h->lines[i]);
    free(h->lines);
    memset(h, 0, sizeof *h);
}
