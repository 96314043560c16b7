/*
 * req.h — one request being worked on by a worker, shared by handlers.c (parameters, bodies,
 * errors, the store, the other endpoints and the dispatch) and query.c (the query endpoints
 * and /v1/messages/<id>). Not seen by the loop side (http.c, pool.c): a job goes back to the
 * loop with a status and a body only.
 */
#ifndef SEARCHD_REQ_H
#define SEARCHD_REQ_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "searchd.h"

/* Query-string parameters, one bit each in an endpoint's set (handlers.c's ep_params). */
enum {
	P_LOGSPACE, P_Q, P_FROM, P_TO, P_LIMIT, P_ORDER, P_CURSOR, P_TOTAL, P_BUCKETS, P_FIELD,
	P_K, P_HIGHLIGHT, P_AFTER, P_UPTO, P_TIME, P_N
};

/* One request being worked on. */
struct req {
	struct worker	*r_w;
	struct searchd	*r_env;
	struct job	*r_job;
	char		*r_val[P_N];	/* decoded values (NUL-terminated), NULL when absent */
	size_t		 r_len[P_N];
	const char	*r_ls;		/* logspace */
	int64_t		 r_from, r_to;	/* µs */
	uint32_t	 r_limit, r_buckets, r_k;
	int		 r_order;
	uint64_t	 r_cursor;
	uint64_t	 r_after, r_upto;	/* the id window; 0: none */
	int		 r_indexed;	/* upto=indexed */
	int		 r_time;	/* LB_TIME_*: time=received (default) or time=event */
	int		 r_total;
	int		 r_highlight;	/* search: spans per hit */
	uint8_t		 r_top_ns;
	const char	*r_field;	/* as the client wrote it */
	/* the answer when it is an error */
	int		 r_status;
	const char	*r_code;
	long long	 r_pos;		/* bad_query: position, else -1 */
	char		 r_msg[512];
	/* warnings beyond those of lb_search (unreadable hits) */
	char		**r_warn;
	size_t		 r_nwarn;
};

/* handlers.c: the answer when it is an error (returns -1), and warnings (0 or ENOMEM). */
int	req_fail(struct req *r, int status, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
int	req_warn(struct req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * handlers.c: parameter p read and checked, 0 or req_fail's -1: a number in [lo, hi]; the same
 * optional (dflt when absent); a time (lb_time_parse, dflt when absent).
 */
int	req_uint(struct req *r, int p, uint64_t lo, uint64_t hi, uint64_t *out);
int	req_opt_uint(struct req *r, int p, uint64_t lo, uint64_t hi, uint32_t dflt,
	    uint32_t *out);
int	req_time(struct req *r, int p, int64_t now, int64_t dflt, int64_t *out);

/* handlers.c: the worker's store of logspace r->r_ls (owned by the worker), or req_fail's -1. */
int	req_store(struct req *r, struct lb_store **st);

/*
 * handlers.c: body text. body_begin writes o's members without the closing brace (ENOMEM);
 * body_bytes adds ,"key":"<bytes>"; body_warnings adds ,"warnings":[...] from res and r.
 */
int	body_begin(FILE *f, json_t *o);
void	body_bytes(FILE *f, const char *key, const void *p, size_t len);
void	body_warnings(FILE *f, struct req *r, const struct lb_searchres *res);

/* query.c: /v1/search, /v1/count, /v1/histogram and /v1/top (ep), and /v1/messages/<id>. */
int	do_query(struct req *r, int ep, char **body, size_t *len);
int	do_message(struct req *r, char **body, size_t *len);

/* query.c: one tick of a /v1/tail stream (tail.c): NDJSON lines after r->r_job->j_cursor. */
int	do_tail(struct req *r, char **body, size_t *len);

#endif
