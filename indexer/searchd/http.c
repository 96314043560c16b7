/*
 * http.c — the event loop's side of searchd: evhttp on the unix socket, the checks every request
 * passes before any work is done (method, length of the request target, known path), handing
 * the request to the worker pool, and sending the answers back. It owns the HTTP status codes
 * and headers; it does not read parameters or the store (handlers.c does, on a worker).
 *
 * The one idea: this thread never waits. /health is answered here at once; everything else is
 * copied into a job and queued; the worker's answer comes back through pool_drain(), which
 * calls http_job_done(). On stop the listener is closed first, answers still owed are sent,
 * and the loop exits once every answer has been written out (each request's completion
 * callback counts down sd_open) or, since a client that went away never completes, at most
 * SD_DRAIN_S seconds after the last answer. A job goes to the pool under its caller's name
 * (X-Logbox-Caller, "-" without it) for the fair scheduler, and while it is in flight its
 * socket is watched: a client that hangs up sets j_gone, which drops or stops the job, and the
 * answer nobody reads is not written. GET /v1/tail is a stream (tail.c): its ticks come back
 * here as jobs too and go on to tail_job_done().
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "searchd.h"

static const struct route {
	const char	*r_path;
	int		 r_ep;
	int		 r_prefix;	/* the path continues (an id) */
} routes[] = {
	{ "/v1/search",		EP_SEARCH,	0 },
	{ "/v1/count",		EP_COUNT,	0 },
	{ "/v1/histogram",	EP_HISTOGRAM,	0 },
	{ "/v1/top",		EP_TOP,		0 },
	{ "/v1/messages/",	EP_MESSAGE,	1 },
	{ "/v1/logspaces",	EP_LOGSPACES,	0 },
	{ "/v1/tail",		EP_TAIL,	0 },
	{ "/health",		EP_HEALTH,	0 },
	{ "/metrics",		EP_METRICS,	0 },
};

static const char *ep_names[EP_N] = {
	"search", "count", "histogram", "top", "message", "logspaces", "tail", "health", "metrics",
	"other"
};

const char *
ep_name(int ep)
{
	return (ep >= 0 && ep < EP_N ? ep_names[ep] : "other");
}

static const char *
http_reason(int status)
{
	switch (status) {
	case 200: return ("OK");
	case 400: return ("Bad Request");
	case 404: return ("Not Found");
	case 405: return ("Method Not Allowed");
	case 414: return ("URI Too Long");
	case 422: return ("Unprocessable Entity");
	case 429: return ("Too Many Requests");
	case 500: return ("Internal Server Error");
	case 503: return ("Service Unavailable");
	default: return ("Unknown");
	}
}

static void
http_drain_timeout_cb(int fd, short what, void *arg)
{
	struct searchd *env = arg;

	(void)fd;
	(void)what;
	if (env->sd_open > 0)
		log_info("%s: %llu answers not confirmed written (clients gone?): exiting",
		    __func__, (unsigned long long)env->sd_open);
	event_base_loopexit(env->sd_base, NULL);
}

/*
 * Stopping: once every job is answered, exit as soon as every answer is written out. A
 * request whose client vanished never reports completion, so that wait is bounded too.
 */
void
http_maybe_exit(struct searchd *env)
{
	struct timeval tv = { SD_DRAIN_S, 0 };

	if (!env->sd_stopping || env->sd_inflight > 0)
		return;
	if (env->sd_open == 0) {
		event_base_loopexit(env->sd_base, NULL);
		return;
	}
	if (env->sd_ev_drain == NULL) {
		if ((env->sd_ev_drain = evtimer_new(env->sd_base, http_drain_timeout_cb,
		    env)) == NULL || evtimer_add(env->sd_ev_drain, &tv) == -1) {
			log_warnx("%s: cannot arm the drain timer: exiting now", __func__);
			event_base_loopexit(env->sd_base, NULL);
		}
	}
}

static void
http_complete_cb(struct evhttp_request *req, void *arg)
{
	struct searchd *env = arg;

	(void)req;
	if (env->sd_open > 0)
		env->sd_open--;
	http_maybe_exit(env);
}

static void
body_free_cb(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	free((void *)data);
}

/* Whether v is a valid X-Logbox-Caller value: 1..SCHED_NAME_MAX of [A-Za-z0-9_.:@-]. */
static int
caller_valid(const char *v)
{
	size_t n = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	    "_.:@-");

	return (n > 0 && n <= SCHED_NAME_MAX && v[n] == '\0');
}

/*
 * Sends status with body (malloc'ed; taken over, also on failure) and counts it. A request
 * whose client went away is freed by evhttp_send_reply() without a completion callback.
 */
static void
http_reply(struct searchd *env, struct evhttp_request *req, int ep, int64_t start, int status,
    const char *ctype, char *body, size_t len)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);
	struct evbuffer		*buf;
	const char		*caller;
	int64_t			 us = now_mono_us() - start;

	metrics_request(env->sd_metrics, ep, status, us);
	caller = evhttp_find_header(evhttp_request_get_input_headers(req), SD_CALLER_HEADER);
	log_debug("%s %d %.3f ms %s %.300s", ep_name(ep), status, us / 1000.0,
	    caller == NULL ? "-" : caller_valid(caller) ? caller : "(bad caller)",
	    evhttp_request_get_uri(req));
	evhttp_add_header(h, "Content-Type", ctype);
	evhttp_add_header(h, "Cache-Control", "no-store");
	if (status == 405)
		evhttp_add_header(h, "Allow", "GET");
	if (env->sd_stopping)
		evhttp_add_header(h, "Connection", "close");
	if ((buf = evbuffer_new()) == NULL ||
	    (body != NULL && evbuffer_add_reference(buf, body, len, body_free_cb, NULL) == -1)) {
		log_warnx("%s: out of memory", __func__);
		free(body);
		if (buf != NULL)
			evbuffer_free(buf);
		buf = NULL;
		status = 503;
	}
	if (evhttp_request_get_connection(req) == NULL && env->sd_open > 0)
		env->sd_open--;
	evhttp_send_reply(req, status, http_reason(status), buf);
	if (buf != NULL)
		evbuffer_free(buf);
}

static void
http_error(struct searchd *env, struct evhttp_request *req, int ep, int64_t start, int status,
    const char *code, const char *msg)
{
	char	*body = NULL;
	size_t	 len = 0;

	if (body_error(code, msg, -1, &body, &len) != 0)
		log_warnx("%s: cannot build the error body", __func__);
	http_reply(env, req, ep, start, status, "application/json", body, len);
}

/* http_reply and http_error for tail.c. */
void
http_send(struct searchd *env, struct evhttp_request *req, int ep, int64_t start, int status,
    const char *ctype, char *body, size_t len)
{
	http_reply(env, req, ep, start, status, ctype, body, len);
}

void
http_send_error(struct searchd *env, struct evhttp_request *req, int ep, int64_t start,
    int status, const char *code, const char *msg)
{
	http_error(env, req, ep, start, status, code, msg);
}

/* Answer of a job (loop thread, from pool_drain()); a tick of a stream goes to tail.c. */
void
http_job_done(struct searchd *env, struct job *j)
{
	if (j->j_tail != NULL) {
		tail_job_done(env, j);
		goto out;
	}
	if (j->j_conn != NULL)
		evhttp_connection_set_closecb(j->j_conn, NULL, NULL);
	if (j->j_watch != NULL)
		event_free(j->j_watch);
	j->j_watch = NULL;
	if (atomic_load(&j->j_gone) && j->j_conn != NULL) {
		/*
		 * Nobody reads the answer: close the connection (freeing the request) instead of
		 * writing into it; no completion callback follows.
		 */
		metrics_request(env->sd_metrics, j->j_ep, j->j_status, now_mono_us() - j->j_start);
		evhttp_connection_free(j->j_conn);
		if (env->sd_open > 0)
			env->sd_open--;
	} else {
		http_reply(env, j->j_req, j->j_ep, j->j_start, j->j_status, j->j_ctype,
		    j->j_body, j->j_bodylen);
		j->j_body = NULL;	/* http_reply took it */
	}
	job_free(j);
 out:
	env->sd_inflight--;
	metrics_inflight(env->sd_metrics, -1);
	http_maybe_exit(env);
}

static int
http_route(const char *path, size_t len)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		size_t n = strlen(routes[i].r_path);

		if (routes[i].r_prefix ? (len > n && strncmp(path, routes[i].r_path, n) == 0) :
		    (len == n && strncmp(path, routes[i].r_path, n) == 0))
			return (routes[i].r_ep);
	}
	return (-1);
}

/*
 * The client of a job in flight went away. The job is not run if it still waits, and a search
 * that runs gives up at its next look at the clock (lb_searchreq.cancel).
 */
static void
http_gone(struct job *j, const char *why)
{
	atomic_store(&j->j_gone, 1);
	if (j->j_watch != NULL)
		event_free(j->j_watch);
	j->j_watch = NULL;
	log_debug("%s: the client of %s %s", __func__, ep_name(j->j_ep), why);
}

/* evhttp freed the connection of a job in flight (its socket is closed). */
static void
http_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct job *j = arg;

	(void)evcon;
	j->j_conn = NULL;
	http_gone(j, "closed the connection");
}

/*
 * The socket of a job in flight is readable: evhttp reads nothing more until it answers, so
 * this is the end of the stream (the client closed or shut down its side), an error, or the
 * start of a pipelined request (then the watch ends: nothing can be told from it).
 */
static void
http_watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job	*j = arg;
	char		 c;
	ssize_t		 n;

	(void)what;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		http_gone(j, "went away");
	else if (n == -1 && errno != EAGAIN && errno != EINTR)
		http_gone(j, "broke the connection");
	else if (n > 0) {
		event_free(j->j_watch);
		j->j_watch = NULL;
	}
}

/* Watches the client of j while it is in flight (best effort: without memory, it is not). */
static void
http_watch(struct searchd *env, struct job *j, struct evhttp_request *req)
{
	struct bufferevent	*bev;
	evutil_socket_t		 fd;

	if ((j->j_conn = evhttp_request_get_connection(req)) == NULL)
		return;
	evhttp_connection_set_closecb(j->j_conn, http_closed_cb, j);
	if ((bev = evhttp_connection_get_bufferevent(j->j_conn)) == NULL ||
	    (fd = bufferevent_getfd(bev)) == -1)
		return;
	if ((j->j_watch = event_new(env->sd_base, fd, EV_READ | EV_PERSIST, http_watch_cb,
	    j)) != NULL && event_add(j->j_watch, NULL) == -1) {
		event_free(j->j_watch);
		j->j_watch = NULL;
	}
}

static void
http_request_cb(struct evhttp_request *req, void *arg)
{
	struct searchd	*env = arg;
	struct job	*j;
	const char	*uri, *q, *caller;
	size_t		 urilen, plen;
	int64_t		 start = now_mono_us();
	int		 ep, rc;
	char		*body;

	env->sd_open++;
	evhttp_request_set_on_complete_cb(req, http_complete_cb, env);
	if ((uri = evhttp_request_get_uri(req)) == NULL)
		uri = "";
	urilen = strlen(uri);
	q = strchr(uri, '?');
	plen = q != NULL ? (size_t)(q - uri) : urilen;
	ep = http_route(uri, plen);

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		http_error(env, req, ep < 0 ? EP_OTHER : ep, start, 405, "method_not_allowed",
		    "only GET is allowed");
		return;
	}
	if (urilen > SD_URI_MAX) {
		http_error(env, req, ep < 0 ? EP_OTHER : ep, start, 414, "uri_too_long",
		    "the request target is longer than 65536 bytes");
		return;
	}
	if (ep < 0) {
		http_error(env, req, EP_OTHER, start, 404, "not_found", "no such endpoint");
		return;
	}
	if (env->sd_stopping) {
		http_error(env, req, ep, start, 503, "unavailable", "shutting down");
		return;
	}
	if (ep == EP_HEALTH) {
		if ((body = strdup("{\"status\":\"ok\"}")) == NULL) {
			http_error(env, req, ep, start, 503, "unavailable", "out of memory");
			return;
		}
		http_reply(env, req, ep, start, 200, "application/json", body, strlen(body));
		return;
	}

	/* Who asks (the apps say; requests without the header are one caller, "-"). */
	caller = evhttp_find_header(evhttp_request_get_input_headers(req), SD_CALLER_HEADER);
	if (caller == NULL)
		caller = "-";
	else if (!caller_valid(caller)) {
		http_error(env, req, ep, start, 400, "bad_parameter", SD_CALLER_HEADER
		    ": expected 1..128 bytes of A-Z a-z 0-9 _ . : @ -");
		return;
	}

	if (ep == EP_TAIL) {
		tail_start(env, req, caller, uri, plen, q != NULL ? q + 1 : NULL, start);
		return;
	}

	if ((j = calloc(1, sizeof(*j))) == NULL ||
	    (j->j_path = strndup(uri, plen)) == NULL ||
	    (q != NULL && (j->j_query = strdup(q + 1)) == NULL)) {
		job_free(j);
		http_error(env, req, ep, start, 503, "unavailable", "out of memory");
		return;
	}
	j->j_req = req;
	j->j_ep = ep;
	j->j_start = start;
	atomic_init(&j->j_gone, 0);
	if ((rc = pool_submit(env, j, caller)) != 0) {
		job_free(j);
		if (rc == EBUSY) {
			metrics_error(env->sd_metrics, ERR_CALLER_BUSY, 1);
			log_debug("%s: caller %s has %d requests queued: 429", __func__, caller,
			    env->sd_max_queued_per_caller);
			evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
			    SD_RETRY_AFTER);
			http_error(env, req, ep, start, 429, "too_many_requests", "too many "
			    "requests of this caller queued: wait for its answers, then retry");
			return;
		}
		if (rc == EAGAIN) {
			metrics_error(env->sd_metrics, ERR_BUSY, 1);
			log_warnx("%s: %d requests queued: refusing more", __func__, SD_QUEUE_MAX);
			evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
			    SD_RETRY_AFTER);
			http_error(env, req, ep, start, 503, "unavailable",
			    "too many requests queued");
			return;
		}
		http_error(env, req, ep, start, 503, "unavailable", "out of memory");
		return;
	}
	/* From here the job may run on a worker: the loop touches only j_conn, j_watch, j_gone. */
	http_watch(env, j, req);
	env->sd_inflight++;
	metrics_inflight(env->sd_metrics, 1);
}

/* Serves HTTP on fd, a listening unix socket (taken over). */
int
http_init(struct searchd *env, int fd)
{
	TAILQ_INIT(&env->sd_tails);
	if ((env->sd_http = evhttp_new(env->sd_base)) == NULL) {
		close(fd);
		return (ENOMEM);
	}
	/* Every method reaches http_request_cb(), which answers 405 in JSON itself. */
	evhttp_set_allowed_methods(env->sd_http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(env->sd_http, SD_HEADERS_MAX);
	evhttp_set_max_body_size(env->sd_http, SD_BODY_MAX);
	evhttp_set_timeout(env->sd_http, SD_IDLE_TIMEOUT_S);
	evhttp_set_gencb(env->sd_http, http_request_cb, env);
	if ((env->sd_bound = evhttp_accept_socket_with_handle(env->sd_http, fd)) == NULL) {
		close(fd);
		return (EINVAL);
	}
	return (0);
}

static void
http_stop_timeout_cb(int fd, short what, void *arg)
{
	struct searchd *env = arg;

	(void)fd;
	(void)what;
	log_warnx("%s: %llu answers still owed after the grace period: exiting", __func__,
	    (unsigned long long)(env->sd_inflight + env->sd_open));
	event_base_loopexit(env->sd_base, NULL);
}

/*
 * Stops accepting connections and removes the socket; the loop exits once every request
 * taken has been answered, or after the deadline plus 5 s.
 */
void
http_stop(struct searchd *env)
{
	struct timeval tv;

	if (env->sd_stopping)
		return;
	env->sd_stopping = 1;
	if (env->sd_bound != NULL) {
		evhttp_del_accept_socket(env->sd_http, env->sd_bound);
		env->sd_bound = NULL;
	}
	if (unlink(env->sd_sock) == -1 && errno != ENOENT)
		log_warn("%s: unlink %s", __func__, env->sd_sock);
	tail_stop(env);
	tv.tv_sec = (env->sd_deadline_ms > 0 ? env->sd_deadline_ms / 1000 : 30) + 5;
	tv.tv_usec = 0;
	if ((env->sd_ev_stop = evtimer_new(env->sd_base, http_stop_timeout_cb, env)) == NULL ||
	    evtimer_add(env->sd_ev_stop, &tv) == -1)
		log_warnx("%s: cannot arm the grace timer", __func__);
	http_maybe_exit(env);
}

void
http_free(struct searchd *env)
{
	if (env->sd_ev_stop != NULL)
		event_free(env->sd_ev_stop);
	env->sd_ev_stop = NULL;
	if (env->sd_ev_drain != NULL)
		event_free(env->sd_ev_drain);
	env->sd_ev_drain = NULL;
	tail_free_all(env);
	if (env->sd_http != NULL)
		evhttp_free(env->sd_http);
	env->sd_http = NULL;
}
