/*
 * search.h — the one entry point search.c gives main.c.
 */
#ifndef LOGBOX_CLI_SEARCH_H
#define LOGBOX_CLI_SEARCH_H

#include <stdarg.h>

/* Prints "logbox: <message>" and a newline on stderr (main.c; every verb's errors). */
void	cli_verr(const char *fmt, va_list ap);

/* The search verb's usage lines, for logbox's usage text. */
extern const char search_usage[];

/*
 * `logbox search ...`: argv[0] is "search". Parses its own options, prints the results and
 * returns the exit status (0, 1 on errors, 2 on usage or a bad query).
 */
int	search_main(int argc, char *argv[]);

#endif /* LOGBOX_CLI_SEARCH_H */
