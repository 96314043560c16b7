/*
 * searchd.h — what the files of logbox-searchd share: the one runtime state (struct searchd,
 * hung off every libevent callback and every worker), a request in flight (struct job), and the
 * prototypes of each file's entry points. One concern per file:
 *   main.c      options, socket, privileges, signals, systemd, start and stop
 *   http.c      the event loop side: evhttp, routing, limits, replies, draining on stop
 *   pool.c      worker threads, handing jobs to the scheduler and results back, store handles
 *   sched.c     the fair scheduler: per-caller queues taken in turn, the per-caller cap
 *   handlers.c  the work of each endpoint (runs on a worker): parameters, JSON bodies, dispatch
 *   query.c     the query endpoints and /v1/messages/<id>: q, lb_search, hits, their members
 *   tail.c      /v1/tail on the loop side: the streams, their timers, chunks, limits and ends
 *               (the worker side of a tick, do_tail, is in query.c)
 *   metrics.c   counters and the Prometheus text of /metrics
 *   ../daemon/  shared with indexd: log.c (one line per event on stderr), clock.c (now_mono_us,
 *               now_real_us), opt.c (numbers from options), daemon.c (socket, privileges,
 *               signals, systemd's watchdog)
 */
#ifndef SEARCHD_H
#define SEARCHD_H

#include <sys/queue.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "logbox.h"
#include "daemon.h"
#include "clock.h"
#include "log.h"
#include "sched.h"

struct event_base;
struct event;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;

#define SD_NAME			"logbox-searchd"
#define SD_URI_MAX		(64 * 1024)	/* request target, bytes; longer is 414 */
#define SD_HEADERS_MAX		(1024 * 1024)	/* request line + headers; more is evhttp's 413 */
#define SD_BODY_MAX		1024		/* a GET carries no body */
#define SD_QUEUE_MAX		1024		/* jobs waiting for a worker; more is 503 */
#define SD_CALLER_QUEUE		64		/* default --max-queued-per-caller; more is 429 */
#define SD_RETRY_AFTER		"1"		/* Retry-After (s) of a 429 or a busy 503 */
#define SD_CALLER_HEADER	"X-Logbox-Caller"
#define SD_STORES_PER_WORKER	16		/* open store handles per worker (LRU) */
#define SD_THREADS_MAX		256
#define SD_IDLE_TIMEOUT_S	60		/* idle keep-alive connections are closed */
#define SD_DRAIN_S		2		/* stopping: wait for answers to be written */
#define SD_HITS_BYTES_MAX	(32 * 1024 * 1024)	/* /v1/search: hits cut beyond this */
#define SD_TAIL_MAX		64		/* /v1/tail streams open at once; more is 503 */
#define SD_TAIL_PER_CALLER	4		/* /v1/tail streams of one caller; more is 429 */
#define SD_TAIL_TICK_MS		200		/* a stream looks for new matches this often */
#define SD_TAIL_HEARTBEAT_S	5		/* an idle stream says it is alive this often */
#define SD_TAIL_BUF_MAX		(1024 * 1024)	/* unsent bytes of a stream; beyond: skip */
#define SD_TAIL_WRITE_S		60		/* a stream whose client reads nothing this long ends */

/* Endpoints, for routing and metrics. */
enum sd_ep {
	EP_SEARCH,
	EP_COUNT,
	EP_HISTOGRAM,
	EP_TOP,
	EP_MESSAGE,
	EP_LOGSPACES,
	EP_TAIL,
	EP_HEALTH,
	EP_METRICS,
	EP_OTHER,		/* unknown paths, refused methods */
	EP_N
};

/* Error kinds counted by /metrics. */
enum sd_err {
	ERR_INTERNAL,		/* a 500 answer */
	ERR_STORE,		/* a store could not be opened or read */
	ERR_DAMAGED,		/* a damaged segment skipped by a search (one per warning) */
	ERR_MESSAGE,		/* a hit whose message could not be read */
	ERR_BUSY,		/* a request refused because the queue was full */
	ERR_CALLER_BUSY,	/* a request refused because its caller's queue was full */
	ERR_GONE,		/* a request dropped or stopped because its client went away */
	ERR_N
};

struct metrics;
struct worker;

/* A logspace's archive as last read (pool_archive). */
struct sd_archive {
	char			 a_ls[LB_NAME_MAX + 1];
	struct lb_archive	*a_ar;		/* NULL: none (a_why says why) */
	int64_t			 a_checked;	/* monotonic µs of the last look for changes */
	int			 a_failed;	/* the last look could not read it (a_why) */
	char			 a_why[512];
};
struct tail;

/*
 * A request on its way from the loop to a worker and back. The loop thread owns j_req; a
 * worker only reads the copied path and query and fills the answer fields. j_gone is set by
 * the loop when the client goes away, and read by the worker (and the search) to give up.
 */
struct job {
	TAILQ_ENTRY(job)	 j_entry;	/* the done queue */
	struct sched_item	 j_item;	/* waiting and running (sched.c) */
	struct evhttp_request	*j_req;		/* loop thread only */
	struct evhttp_connection *j_conn;	/* loop thread only: its close callback is ours */
	struct event		*j_watch;	/* loop thread only: its socket read, for EOF */
	atomic_int		 j_gone;	/* the client went away: the answer is not wanted */
	int			 j_ep;		/* enum sd_ep */
	char			*j_path;	/* the path, as received */
	char			*j_query;	/* the query string without '?', or NULL */
	int64_t			 j_start;	/* monotonic µs when it arrived */
	int			 j_status;	/* answer: HTTP status */
	const char		*j_ctype;	/* answer: Content-Type (static) */
	char			*j_body;	/* answer: malloc'ed body */
	size_t			 j_bodylen;
	/* a tick of a /v1/tail stream (tail.c): j_req is the stream's, not the job's own */
	struct tail		*j_tail;	/* loop thread only; NULL for other jobs */
	int			 j_started;	/* in: j_cursor holds the last id sent */
	uint64_t		 j_cursor;	/* in: the last id sent; out: the last id covered */
	uint64_t		 j_skipped;	/* out: matches of the tick not sent (over limit) */
};
TAILQ_HEAD(jobq, job);

/* The daemon. Configuration first (read-only once serving), then per-thread-group state. */
struct searchd {
	/* configuration */
	const char		*sd_data;	/* --data */
	const char		*sd_sock;	/* --socket */
	const char		*sd_user;	/* --user, or NULL */
	int			 sd_allow_root;	/* --allow-root */
	int			 sd_threads;	/* --threads */
	int			 sd_max_per_caller; /* --max-per-caller: running at once */
	int			 sd_max_queued_per_caller; /* --max-queued-per-caller: waiting */
	uint64_t		 sd_term_cache_mb; /* --term-cache-mb: wildcard term blobs, all workers */
	int64_t			 sd_deadline_ms; /* --deadline-ms; 0 = none */
	uint64_t		 sd_max_terms;	/* --max-terms; 0 = the library's default */
	uint64_t		 sd_cache_segments; /* --cache-segments (see PROTOCOL.md) */
	int			 sd_verbose;	/* -v: log every request */
	const char		*sd_ar_settings; /* --archive-settings: archived days in place */
	const char		*sd_ar_state;	/* --archive-state */
	const char		*sd_ar_cache;	/* --archive-cache */
	uint64_t		 sd_ar_cache_mb; /* --archive-cache-mb */

	/* loop thread */
	struct event_base	*sd_base;
	struct evhttp		*sd_http;
	struct evhttp_bound_socket *sd_bound;
	struct event		*sd_ev_done;	/* the workers' pipe is readable */
	struct event		*sd_ev_sig[3];	/* SIGTERM, SIGINT, SIGHUP */
	struct event		*sd_ev_wd;	/* systemd watchdog */
	struct event		*sd_ev_stop;	/* stopping: give up on jobs after a while */
	struct event		*sd_ev_drain;	/* stopping: give up on writes after a while */
	int			 sd_stopping;
	uint64_t		 sd_inflight;	/* jobs handed to the pool, not yet answered */
	uint64_t		 sd_open;	/* requests not yet completely written */
	TAILQ_HEAD(, tail)	 sd_tails;	/* /v1/tail streams open (tail.c) */
	int			 sd_ntails;
	int64_t			 sd_started;	/* monotonic µs at start */

	/* pool (pool.c): the queues are under sd_mtx */
	pthread_mutex_t		 sd_mtx;
	pthread_cond_t		 sd_cond;
	struct sched		 sd_sched;	/* waiting for a worker, per caller, and running */
	struct jobq		 sd_done;	/* answered, waiting for the loop */
	int			 sd_quit;	/* workers exit when the queue is empty */
	int			 sd_pipe[2];	/* worker -> loop wake-up */
	struct worker		*sd_workers;
	int			 sd_nworkers;	/* threads started */
	atomic_uint_least64_t	 sd_generation;	/* SIGHUP bumps it: workers reopen stores */

	/* the one catalog of the process (LMDB: open once), opened lazily if missing at start */
	pthread_mutex_t		 sd_catmtx;
	struct lb_catalog	*sd_cat;
	int64_t			 sd_cat_tried;	/* monotonic µs of the last failed attempt */

	struct metrics		*sd_metrics;

	/* archived days read in place (pool.c): one cache, each logspace's archive */
	struct lb_acache	*sd_acache;
	pthread_mutex_t		 sd_armtx;
	struct sd_archive	*sd_archives;	/* under sd_armtx */
	size_t			 sd_narchives;
};

/* http.c */
int	http_init(struct searchd *env, int fd);
void	http_stop(struct searchd *env);
void	http_free(struct searchd *env);
void	http_job_done(struct searchd *env, struct job *j);
void	http_maybe_exit(struct searchd *env);
const char *ep_name(int ep);

/* tail.c */
void	tail_start(struct searchd *env, struct evhttp_request *req, const char *caller,
	    const char *path, size_t plen, const char *query, int64_t start);
void	tail_job_done(struct searchd *env, struct job *j);
void	tail_stop(struct searchd *env);
void	tail_free_all(struct searchd *env);
void	http_send(struct searchd *env, struct evhttp_request *req, int ep, int64_t start,
	    int status, const char *ctype, char *body, size_t len);
void	http_send_error(struct searchd *env, struct evhttp_request *req, int ep, int64_t start,
	    int status, const char *code, const char *msg);

/* pool.c */
int	pool_start(struct searchd *env);
struct lb_archive *pool_archive(struct searchd *env, const char *ls);
int	pool_archive_problem(struct searchd *env, const char *ls, char *buf, size_t len);
int	pool_submit(struct searchd *env, struct job *j, const char *caller);
void	pool_stop(struct searchd *env);
void	pool_drain(struct searchd *env);
int	pool_catalog(struct searchd *env, struct lb_catalog **out);
int	worker_store(struct worker *w, const char *ls, struct lb_store **out);
void	worker_store_drop(struct worker *w, const char *ls);
struct searchd *worker_env(struct worker *w);
void	job_free(struct job *j);

/* handlers.c */
void	handle_job(struct worker *w, struct job *j);
int	body_error(const char *code, const char *msg, long long pos, char **body, size_t *len);

/* metrics.c */
int	metrics_new(struct metrics **out);
void	metrics_free(struct metrics *m);
void	metrics_request(struct metrics *m, int ep, int status, int64_t us);
void	metrics_inflight(struct metrics *m, int delta);
void	metrics_error(struct metrics *m, int kind, uint64_t n);
void	metrics_tail(struct metrics *m, int delta, uint64_t sent, uint64_t skipped);
int	metrics_write(struct searchd *env, struct worker *w, FILE *f);

#endif /* SEARCHD_H */
