/*
 * follow.c — `logbox search --follow --data DIR`: a live tail read from the store in this
 * process, the terminal's counterpart of searchd's GET /v1/tail (indexer/PROTOCOL.md §4.9).
 * It owns the polling loop; the command line and the output formats are search.c's.
 *
 * The one idea: every 200 ms one lb_search of the matches after the last id covered, oldest
 * first (cursor), counted page by page with ids only; the newest --limit of them are printed
 * and the older ones are said on stderr ("N matches skipped"), so that a flood never makes
 * the output lag without saying so. It starts at the logspace's end (or after --cursor ID)
 * and runs until SIGINT or SIGTERM (exit 0).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "logbox.h"
#include "search.h"
#include "search_int.h"

#define FOLLOW_TICK_MS	200
#define FOLLOW_PAGE	4096		/* ids per lb_search while counting a tick's matches */
#define FOLLOW_COUNT_MAX (256 * FOLLOW_PAGE)	/* matches one tick counts at most (a backlog
						   is worked off over several) */
#define DAY_US		(86400LL * 1000000)

static volatile sig_atomic_t follow_stop;

static void
follow_signal(int sig)
{
	(void)sig;
	follow_stop = 1;
}

/*
 * One tick: the matches after *cursor, the newest o->limit printed (oldest first), the rest
 * counted in *skipped; *cursor moves to the last id covered. 0 or an lb_search error.
 */
static int
follow_tick(const struct sopts *o, struct lb_store *st, const struct lb_qnode *q,
    uint64_t *ring, uint64_t *cursor, uint64_t *skipped)
{
	struct lb_searchreq	 rq;
	struct lb_searchres	 res;
	struct lb_msg		 m;
	uint64_t		 n = 0, through = *cursor, c = *cursor;
	int			 rc;

	memset(&rq, 0, sizeof(rq));
	rq.q = q;
	rq.from = 0;
	rq.to = now_real_us() + DAY_US;
	rq.want = LB_WANT_HITS;
	rq.limit = FOLLOW_PAGE;
	rq.order = LB_ORDER_OLDEST;
	for (;;) {
		memset(&res, 0, sizeof(res));
		rq.cursor = c;
		if ((rc = lb_search(st, &rq, &res)) != 0)
			return (rc);
		for (size_t i = 0; i < res.n; i++, n++)
			ring[n % o->limit] = res.ids[i];
		if (res.n > 0 && res.ids[res.n - 1] > through)
			through = res.ids[res.n - 1];
		c = res.next_cursor;
		if (c == 0 && res.id_hi > 0 && res.id_hi - 1 > through)
			through = res.id_hi - 1;	/* every id below id_hi was looked at */
		lb_searchres_free(&res);
		if (c == 0 || n >= FOLLOW_COUNT_MAX)
			break;
	}
	*skipped = n > o->limit ? n - o->limit : 0;
	if (*skipped > 0)
		errmsg("%" PRIu64 " matches skipped (more than %" PRIu32 " in %d ms)", *skipped,
		    o->limit, FOLLOW_TICK_MS);
	for (uint64_t k = *skipped; k < n; k++) {
		uint64_t id = ring[k % o->limit];

		if ((rc = lb_store_get(st, id, &m)) != 0) {
			errmsg("message %" PRIu64 ": %s", id, lb_strerror(rc));
			continue;
		}
		if (o->json) {
			lb_msg_json(stdout, &m);
			putchar('\n');
		} else
			print_hit(stdout, m.received, m.host, m.program, m.pid, m.message);
	}
	*cursor = through;
	return (0);
}

int
run_follow(const struct sopts *o)
{
	struct lb_store		*st = NULL;
	struct lb_qnode		*q = NULL;
	struct lb_qerr		 qe;
	struct sigaction	 sa;
	struct timespec		 ts = { 0, FOLLOW_TICK_MS * 1000000L };
	uint64_t		*ring = NULL, first, next, cursor, skipped;
	int			 rc, status = 1;

	if ((rc = lb_store_open(o->data, o->ls, LB_RDONLY, &st)) != 0) {
		errmsg("%s: logspace %s: %s", o->data, o->ls, lb_strerror(rc));
		return (1);
	}
	memset(&qe, 0, sizeof(qe));
	rc = lb_query_parse(lb_store_tokconf(st), o->query, o->qlen, &q, &qe);
	if (rc == LB_EQUERY || rc == LB_ETOOBIG) {
		status = print_bad_query(o, qe.pos, qe.msg);
		goto done;
	}
	if (rc != 0) {
		errmsg("query: %s", lb_strerror(rc));
		goto done;
	}
	if ((ring = calloc(o->limit, sizeof(*ring))) == NULL) {
		errmsg("out of memory");
		goto done;
	}
	lb_store_range(st, &first, &next);
	cursor = o->cursor != 0 ? o->cursor : next - 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = follow_signal;	/* no SA_RESTART: the sleep ends at once */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!follow_stop) {
		if ((rc = follow_tick(o, st, q, ring, &cursor, &skipped)) != 0) {
			status = rc == ECANCELED ? 0 : (fflush(stdout), search_failed(rc));
			goto done;
		}
		if (flush_stdout() != 0)
			goto done;
		if (!follow_stop)
			nanosleep(&ts, NULL);
	}
	status = 0;
 done:
	free(ring);
	lb_query_free(q);
	lb_store_close(st);
	return (status);
}
