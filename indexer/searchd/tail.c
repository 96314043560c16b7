/*
 * tail.c — GET /v1/tail on the event loop's side: the streams open, each one's timer, the
 * chunks of its chunked reply, its limits (streams per caller and in all, unsent bytes) and
 * its end (the client went away, SIGTERM, a failed tick). The work of a tick (lb_search after
 * the last id sent, the NDJSON lines) is do_tail in query.c, run on a worker like any job.
 *
 * The one idea: a stream is a timer that submits an ordinary job to the pool, under the
 * stream's caller (the fair scheduler sees a tail as one more request now and then), at most
 * one at a time; the loop writes the job's lines as one chunk and moves the stream's cursor to
 * the last id the tick covered. Nothing waits on the client: while the client has not read
 * SD_TAIL_BUF_MAX bytes no tick runs, so the next one finds everything that matched
 * meanwhile and says how many it skipped, and the unsent bytes never grow without bound.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "searchd.h"

struct tail {
	TAILQ_ENTRY(tail)	 t_entry;
	struct searchd		*t_env;
	struct evhttp_request	*t_req;
	struct evhttp_connection *t_conn;	/* NULL once evhttp freed it (client gone) */
	struct event		*t_timer;
	struct job		*t_job;		/* the tick in flight, or NULL */
	char			*t_path;
	char			*t_query;
	char			 t_caller[SCHED_NAME_MAX + 1];
	int64_t			 t_start;	/* monotonic µs of the request */
	int64_t			 t_lastwrite;	/* monotonic µs of the last line written */
	uint64_t		 t_cursor;	/* the last id covered (sent or skipped) */
	int			 t_started;	/* the 200 and its headers are sent */
	int			 t_gone;	/* the client went away */
	int			 t_ending;	/* end after the tick in flight (stopping, error) */
};

static void	tail_tick_cb(evutil_socket_t fd, short what, void *arg);

/* Frees t (no tick in flight); its request is evhttp's or already freed. */
static void
tail_free(struct tail *t)
{
	struct searchd *env = t->t_env;

	TAILQ_REMOVE(&env->sd_tails, t, t_entry);
	env->sd_ntails--;
	metrics_tail(env->sd_metrics, -1, 0, 0);
	if (t->t_timer != NULL)
		event_free(t->t_timer);
	if (t->t_conn != NULL)
		evhttp_connection_set_closecb(t->t_conn, NULL, NULL);
	free(t->t_path);
	free(t->t_query);
	free(t);
}

/*
 * Ends t now (no tick in flight): the last chunk when the reply was started, a 503 when it
 * was not, nothing when the client went away (the request evhttp let go of is freed here).
 */
static void
tail_end(struct tail *t)
{
	struct searchd *env = t->t_env;

	if (t->t_gone) {
		/* evhttp detached the request when it freed the connection: it is ours. */
		evhttp_request_free(t->t_req);
		if (env->sd_open > 0)
			env->sd_open--;
	} else if (!t->t_started)
		http_send_error(env, t->t_req, EP_TAIL, t->t_start, 503, "unavailable",
		    "shutting down");
	else {
		evhttp_connection_set_closecb(t->t_conn, NULL, NULL);
		t->t_conn = NULL;
		evhttp_send_reply_end(t->t_req);	/* http_complete_cb counts it written */
	}
	tail_free(t);
	http_maybe_exit(env);
}

/* evhttp freed the connection of t: the client closed it, broke it or read nothing for long. */
static void
tail_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct tail *t = arg;

	(void)evcon;
	t->t_conn = NULL;
	t->t_gone = 1;
	log_debug("%s: the client of a tail stream went away", __func__);
	if (t->t_job != NULL)
		atomic_store(&t->t_job->j_gone, 1);	/* its search stops; then tail_end */
	else
		tail_end(t);
}

/* Writes len bytes of s as one chunk of t's reply. */
static void
tail_write(struct tail *t, const char *s, size_t len)
{
	struct evbuffer *b;

	if (len == 0 || t->t_conn == NULL)
		return;
	if ((b = evbuffer_new()) == NULL || evbuffer_add(b, s, len) == -1) {
		log_warnx("%s: out of memory: %zu bytes of a tail stream dropped", __func__, len);
		if (b != NULL)
			evbuffer_free(b);
		return;
	}
	evhttp_send_reply_chunk(t->t_req, b);
	evbuffer_free(b);
	t->t_lastwrite = now_mono_us();
}

/* Bytes of t's reply not yet taken by the client. */
static size_t
tail_unsent(struct tail *t)
{
	struct bufferevent *bev;

	if (t->t_conn == NULL || (bev = evhttp_connection_get_bufferevent(t->t_conn)) == NULL)
		return (0);
	return (evbuffer_get_length(bufferevent_get_output(bev)));
}

/* Submits the next tick of t unless one is in flight or the client is behind. */
static void
tail_tick(struct tail *t)
{
	struct searchd	*env = t->t_env;
	struct job	*j;
	char		 line[96];
	int		 rc, n;

	if (t->t_job != NULL || t->t_gone || t->t_ending)
		return;
	if (t->t_started && tail_unsent(t) > SD_TAIL_BUF_MAX)
		return;		/* the next tick counts what matched meanwhile as skipped */
	if (t->t_started && now_mono_us() - t->t_lastwrite >= SD_TAIL_HEARTBEAT_S * 1000000LL) {
		n = snprintf(line, sizeof(line), "{\"through\":\"%llu\",\"time\":%lld}\n",
		    (unsigned long long)t->t_cursor, (long long)now_real_us());
		tail_write(t, line, (size_t)n);
	}
	if ((j = calloc(1, sizeof(*j))) == NULL || (j->j_path = strdup(t->t_path)) == NULL ||
	    (t->t_query != NULL && (j->j_query = strdup(t->t_query)) == NULL)) {
		job_free(j);
		rc = ENOMEM;
		goto refused;
	}
	j->j_ep = EP_TAIL;
	j->j_start = now_mono_us();
	j->j_req = t->t_req;
	j->j_tail = t;
	j->j_started = t->t_started;
	j->j_cursor = t->t_cursor;
	atomic_init(&j->j_gone, 0);
	if ((rc = pool_submit(env, j, t->t_caller)) != 0) {
		job_free(j);
		goto refused;
	}
	t->t_job = j;
	env->sd_inflight++;
	metrics_inflight(env->sd_metrics, 1);
	return;
 refused:
	if (t->t_started)
		return;		/* busy: the next tick tries again, and skips nothing */
	if (rc == EBUSY) {
		metrics_error(env->sd_metrics, ERR_CALLER_BUSY, 1);
		evhttp_add_header(evhttp_request_get_output_headers(t->t_req), "Retry-After",
		    SD_RETRY_AFTER);
		http_send_error(env, t->t_req, EP_TAIL, t->t_start, 429, "too_many_requests",
		    "too many requests of this caller queued: wait for its answers, then retry");
	} else {
		if (rc == EAGAIN) {
			metrics_error(env->sd_metrics, ERR_BUSY, 1);
			evhttp_add_header(evhttp_request_get_output_headers(t->t_req),
			    "Retry-After", SD_RETRY_AFTER);
		}
		http_send_error(env, t->t_req, EP_TAIL, t->t_start, 503, "unavailable",
		    rc == EAGAIN ? "too many requests queued" : "out of memory");
	}
	tail_free(t);
}

static void
tail_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tail_tick(arg);
}

/* Opens a stream for req (GET /v1/tail), or refuses it (429 per caller, 503 in all). */
void
tail_start(struct searchd *env, struct evhttp_request *req, const char *caller,
    const char *path, size_t plen, const char *query, int64_t start)
{
	struct timeval	 tv = { 0, SD_TAIL_TICK_MS * 1000 };
	struct tail	*t;
	int		 mine = 0;

	TAILQ_FOREACH(t, &env->sd_tails, t_entry)
		if (strcmp(t->t_caller, caller) == 0)
			mine++;
	if (mine >= SD_TAIL_PER_CALLER) {
		metrics_error(env->sd_metrics, ERR_CALLER_BUSY, 1);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
		    SD_RETRY_AFTER);
		http_send_error(env, req, EP_TAIL, start, 429, "too_many_requests", "this caller "
		    "has 4 tail streams open already: close one first");
		return;
	}
	if (env->sd_ntails >= SD_TAIL_MAX) {
		metrics_error(env->sd_metrics, ERR_BUSY, 1);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
		    SD_RETRY_AFTER);
		http_send_error(env, req, EP_TAIL, start, 503, "unavailable", "64 tail streams "
		    "are open already");
		return;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL || (t->t_path = strndup(path, plen)) == NULL ||
	    (query != NULL && (t->t_query = strdup(query)) == NULL) ||
	    (t->t_timer = event_new(env->sd_base, -1, EV_PERSIST, tail_tick_cb, t)) == NULL ||
	    event_add(t->t_timer, &tv) == -1) {
		if (t != NULL) {
			if (t->t_timer != NULL)
				event_free(t->t_timer);
			free(t->t_path);
			free(t->t_query);
			free(t);
		}
		http_send_error(env, req, EP_TAIL, start, 503, "unavailable", "out of memory");
		return;
	}
	t->t_env = env;
	t->t_req = req;
	t->t_start = start;
	snprintf(t->t_caller, sizeof(t->t_caller), "%s", caller);
	TAILQ_INSERT_TAIL(&env->sd_tails, t, t_entry);
	env->sd_ntails++;
	metrics_tail(env->sd_metrics, 1, 0, 0);
	if ((t->t_conn = evhttp_request_get_connection(req)) != NULL)
		evhttp_connection_set_closecb(t->t_conn, tail_closed_cb, t);
	tail_tick(t);	/* the first tick at once: it checks the parameters */
}

/* Starts t's reply: 200 and the headers of a stream. */
static void
tail_begin(struct tail *t)
{
	struct searchd		*env = t->t_env;
	struct evkeyvalq	*h = evhttp_request_get_output_headers(t->t_req);
	struct bufferevent	*bev;
	struct timeval		 wtv = { SD_TAIL_WRITE_S, 0 };

	evhttp_add_header(h, "Content-Type", "application/x-ndjson");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	evhttp_add_header(h, "Connection", "close");
	evhttp_send_reply_start(t->t_req, 200, "OK");
	metrics_request(env->sd_metrics, EP_TAIL, 200, now_mono_us() - t->t_start);
	log_debug("tail 200 %.3f ms %s %.300s", (now_mono_us() - t->t_start) / 1000.0,
	    t->t_caller, evhttp_request_get_uri(t->t_req));
	/* No read timeout (the client sends nothing while it reads); a write one ends a
	 * stream whose client stopped reading. */
	if (t->t_conn != NULL && (bev = evhttp_connection_get_bufferevent(t->t_conn)) != NULL)
		bufferevent_set_timeouts(bev, NULL, &wtv);
	t->t_started = 1;
}

/* A tick of a stream is back (loop thread, from http_job_done; frees j). */
void
tail_job_done(struct searchd *env, struct job *j)
{
	struct tail *t = j->j_tail;

	t->t_job = NULL;
	if (t->t_gone) {
		job_free(j);
		tail_end(t);
		return;
	}
	if (!t->t_started && j->j_status != 200) {
		/* The first tick checks the parameters: its error is the answer. */
		http_send(env, t->t_req, EP_TAIL, t->t_start, j->j_status, j->j_ctype, j->j_body,
		    j->j_bodylen);
		j->j_body = NULL;
		job_free(j);
		tail_free(t);
		return;
	}
	if (!t->t_started)
		tail_begin(t);
	if (j->j_status != 200) {
		/* A later tick failed (the store, the deadline): the error is the last line. */
		if (j->j_body != NULL) {
			tail_write(t, j->j_body, j->j_bodylen);
			tail_write(t, "\n", 1);
		}
		t->t_ending = 1;
	} else {
		tail_write(t, j->j_body, j->j_bodylen);
		t->t_cursor = j->j_cursor;
	}
	job_free(j);
	if (t->t_ending)
		tail_end(t);
}

/* Stopping: every stream ends (after its tick in flight). */
void
tail_stop(struct searchd *env)
{
	struct tail *t, *next;

	for (t = TAILQ_FIRST(&env->sd_tails); t != NULL; t = next) {
		next = TAILQ_NEXT(t, t_entry);
		t->t_ending = 1;
		if (t->t_job == NULL)
			tail_end(t);
	}
}

/* The loop has exited: frees what is left (evhttp_free frees the requests it holds). */
void
tail_free_all(struct searchd *env)
{
	struct tail *t;

	if (env->sd_tails.tqh_first == NULL && env->sd_tails.tqh_last == NULL)
		return;		/* http_init did not run */
	while ((t = TAILQ_FIRST(&env->sd_tails)) != NULL) {
		if (t->t_gone)
			evhttp_request_free(t->t_req);
		tail_free(t);
	}
}
