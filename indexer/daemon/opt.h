/*
 * opt.h — numbers from the command line and settings files (daemon/opt.c), shared by
 * logbox-indexd and logbox-searchd.
 */
#ifndef LB_DAEMON_OPT_H
#define LB_DAEMON_OPT_H

#include <stdint.h>

/*
 * The whole of s as a decimal integer in lo..hi into *out: 0, or EINVAL (then *out is
 * untouched) for a sign, a space, trailing bytes, overflow or a value out of range.
 */
int	parse_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* parse_num() for the option --name at start-up: a bad value is fatal, naming the option. */
uint64_t opt_num(const char *name, const char *s, uint64_t lo, uint64_t hi);

/* The usage error: text on stderr, exit status 2. */
void	opt_usage(const char *text) __attribute__((noreturn));

/*
 * The rest of a daemon's option switch: 'V' (--version: "<program> <version>") and 'h'
 * (--help: the usage text) on stdout with exit status 0; any other is the usage error.
 */
void	opt_other(int ch, const char *program, const char *usage) __attribute__((noreturn));

#endif
