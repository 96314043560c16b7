/*
 * search_int.h — what the two halves of `logbox search` share: search.c (the command line, the
 * output formats, the search in this process) and search_socket.c (the search through
 * logbox-searchd). main.c sees only search.h.
 */
#ifndef LOGBOX_CLI_SEARCH_INT_H
#define LOGBOX_CLI_SEARCH_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "logbox.h"

enum what { W_HITS, W_COUNT, W_HIST, W_TOP };

struct sopts {
	const char	*data;		/* --data DIR */
	const char	*sock;		/* --socket PATH */
	const char	*ls;		/* --logspace, default main */
	const char	*top;		/* --top FIELD as given */
	char		*query;		/* the arguments joined by spaces (malloc'ed) */
	size_t		 qlen;
	int64_t		 from, to;	/* µs, already rounded to whole seconds */
	uint64_t	 cursor;	/* --cursor ID, 0 for none */
	uint32_t	 limit;		/* hits per page, or K for --top */
	uint32_t	 nbuckets;	/* --histogram N */
	int		 order;		/* LB_ORDER_* */
	int		 time;		/* --time: LB_TIME_RECEIVED or LB_TIME_EVENT */
	int		 json;		/* --json */
	int		 follow;	/* --follow: a live tail (follow.c) */
	enum what	 what;
	uint8_t		 top_ns;	/* LB_NS_* of --top */
	const char	*top_field;	/* the canonical field name sent to searchd */
	/* archived days read in place (--data only) */
	const char	*ar_settings;	/* --archive-settings FILE */
	const char	*ar_state;	/* --archive-state DIR */
	const char	*ar_cache;	/* --archive-cache DIR */
	uint64_t	 ar_cache_mb;	/* --archive-cache-mb N */
};

struct buf {
	uint8_t		*p;
	size_t		 len;
	size_t		 cap;
};

/* A growing byte buffer; {0} is empty. buf_add and buf_str return 0 or ENOMEM. */
int	buf_add(struct buf *b, const void *p, size_t n);
int	buf_str(struct buf *b, const char *s);
void	buf_free(struct buf *b);

/* Prints "logbox: ..." and a newline on stderr. */
void	errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The output, the same for both transports: bytes for a human (put_text), one hit, one
 * histogram bucket, one top value, the "N of TOTAL matches" summary on stderr, a bad query with
 * its caret (returns the exit status, 2), and stdout flushed (returns 0, or 1 with the error
 * printed).
 */
void	put_text(FILE *f, const uint8_t *p, size_t len);
void	print_hit(FILE *f, int64_t received, struct lb_slice host, struct lb_slice program,
	    struct lb_slice pid, struct lb_slice msg);
void	print_bucket(const struct sopts *o, int64_t from, uint64_t count);
void	print_top(const struct sopts *o, const uint8_t *v, size_t len, uint64_t count);
void	print_summary(size_t n, uint64_t total, uint64_t next);
int	print_bad_query(const struct sopts *o, size_t pos, const char *msg);
int	flush_stdout(void);

/* search.c: reports an lb_search error; the exit status (1). */
int	search_failed(int rc);

/* follow.c: --follow on o->data until SIGINT or SIGTERM; the exit status. */
int	run_follow(const struct sopts *o);

/* search_socket.c: runs o through the searchd on o->sock and prints it; the exit status. */
int	run_socket(const struct sopts *o);

#endif /* LOGBOX_CLI_SEARCH_INT_H */
