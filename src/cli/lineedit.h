/* lineedit.h — a small line editor for `lilac chat` on a terminal: raw
 * mode, cursor movement by UTF-8 character (wide characters counted by
 * utf8proc), lines longer than the terminal wrap and are redrawn in place,
 * history (up/down).
 *
 * Keys: Enter; Left/Right, Ctrl-B/F; Home/End, Ctrl-A/E; Alt-B/F word left/right;
 * Backspace, Delete, Ctrl-D on a non-empty line; Ctrl-K / Ctrl-U kill to the
 * end / start; Ctrl-W the word before the cursor; Up/Down, Ctrl-P/N history;
 * Ctrl-L clears the screen; Ctrl-C drops the line; Ctrl-D on an empty line is
 * the end of input.  Not a terminal: use getline() instead. */
#ifndef LILAC_CLI_LINEEDIT_H
#define LILAC_CLI_LINEEDIT_H

typedef struct {
    char **lines; /* oldest first, [n] malloc'd */
    int n, cap;
} cli_history;

enum { CLI_LINE_OK = 0, CLI_LINE_EOF = 1, CLI_LINE_INTERRUPT = 2, CLI_LINE_ERROR = -1 };

/* Shows prompt on fd out and reads one line from the terminal in. CLI_LINE_OK:
 * *line is a malloc'd NUL-terminated string without the newline; otherwise
 * *line is NULL. */
int cli_readline(int in, int out, const char *prompt, cli_history *h, char **line);

/* Adds a line (copied) unless it is empty or repeats the last one. */
void cli_history_add(cli_history *h, const char *line);
void cli_history_free(cli_history *h);

#endif
