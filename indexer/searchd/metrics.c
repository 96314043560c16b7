/*
 * metrics.c — searchd's counters and their Prometheus text (GET /metrics, format 0.0.4). It
 * owns the metric names and labels (documented in PROTOCOL.md); the loop thread counts
 * requests, workers count errors, and a worker renders the text, so everything here is under
 * one mutex held only for a few additions or one copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "searchd.h"

static const int m_statuses[] = { 200, 400, 404, 405, 414, 422, 429, 500, 503 };
#define M_NSTATUS	(int)(sizeof(m_statuses) / sizeof(m_statuses[0]) + 1)	/* + other */

/* Latency histogram bounds, seconds. */
static const double m_bounds[] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
};
#define M_NBOUNDS	(int)(sizeof(m_bounds) / sizeof(m_bounds[0]))

static const char *m_errnames[ERR_N] = {
	"internal", "store", "damaged_segment", "message_read", "busy", "caller_busy",
	"client_gone"
};

/* One caller's counts, copied under sd_mtx. */
struct mcaller {
	char	name[SCHED_NAME_MAX + 1];
	size_t	running, queued;
};

struct metrics {
	pthread_mutex_t	 m_mtx;
	uint64_t	 m_req[EP_N][M_NSTATUS];
	uint64_t	 m_lat[EP_N][M_NBOUNDS + 1];	/* per bucket, not cumulative; last +Inf */
	uint64_t	 m_latsum_us[EP_N];
	int64_t		 m_inflight;
	uint64_t	 m_err[ERR_N];
	int64_t		 m_started;			/* monotonic µs */
	int64_t		 m_tails;			/* /v1/tail streams open */
	uint64_t	 m_tails_total;			/* /v1/tail streams started */
	uint64_t	 m_tail_lines;			/* messages sent by streams */
	uint64_t	 m_tail_skipped;		/* matches streams did not send */
};

int
metrics_new(struct metrics **out)
{
	struct metrics *m;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return (errno);
	pthread_mutex_init(&m->m_mtx, NULL);
	m->m_started = now_mono_us();
	*out = m;
	return (0);
}

void
metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->m_mtx);
	free(m);
}

void
metrics_request(struct metrics *m, int ep, int status, int64_t us)
{
	int s, b;

	if (ep < 0 || ep >= EP_N)
		ep = EP_OTHER;
	for (s = 0; s < M_NSTATUS - 1; s++)
		if (m_statuses[s] == status)
			break;
	for (b = 0; b < M_NBOUNDS; b++)
		if (us <= m_bounds[b] * 1e6)
			break;
	pthread_mutex_lock(&m->m_mtx);
	m->m_req[ep][s]++;
	m->m_lat[ep][b]++;
	m->m_latsum_us[ep] += us > 0 ? (uint64_t)us : 0;
	pthread_mutex_unlock(&m->m_mtx);
}

void
metrics_inflight(struct metrics *m, int delta)
{
	pthread_mutex_lock(&m->m_mtx);
	m->m_inflight += delta;
	pthread_mutex_unlock(&m->m_mtx);
}

void
metrics_error(struct metrics *m, int kind, uint64_t n)
{
	pthread_mutex_lock(&m->m_mtx);
	m->m_err[kind] += n;
	pthread_mutex_unlock(&m->m_mtx);
}

/* A tail stream opened (delta 1) or ended (-1); a tick sent and skipped so many matches. */
void
metrics_tail(struct metrics *m, int delta, uint64_t sent, uint64_t skipped)
{
	pthread_mutex_lock(&m->m_mtx);
	m->m_tails += delta;
	if (delta > 0)
		m->m_tails_total += (uint64_t)delta;
	m->m_tail_lines += sent;
	m->m_tail_skipped += skipped;
	pthread_mutex_unlock(&m->m_mtx);
}

/* Writes the Prometheus text to f. The per-logspace gauges need a store handle of w. */
int
metrics_write(struct searchd *env, struct worker *w, FILE *f)
{
	struct metrics		*m = env->sd_metrics, c;
	struct lb_catalog	*cat;
	struct lb_store		*st;
	char			(*names)[LB_NAME_MAX + 1] = NULL;
	struct sched_caller	*sc;
	struct mcaller		*mc = NULL;
	uint64_t		 first, next, cum;
	size_t			 queued, running, nmc = 0, nnames = 0;
	int			 rc;

	pthread_mutex_lock(&m->m_mtx);
	memcpy(&c, m, sizeof(c));
	pthread_mutex_unlock(&m->m_mtx);
	pthread_mutex_lock(&env->sd_mtx);
	queued = env->sd_sched.s_nqueued;
	running = env->sd_sched.s_nrunning;
	if (env->sd_sched.s_ncallers > 0 &&
	    (mc = calloc(env->sd_sched.s_ncallers, sizeof(*mc))) != NULL)
		TAILQ_FOREACH(sc, &env->sd_sched.s_all, sc_all) {
			memcpy(mc[nmc].name, sc->sc_name, sizeof(mc[nmc].name));
			mc[nmc].running = sc->sc_nrunning;
			mc[nmc].queued = sc->sc_nqueued;
			nmc++;
		}
	pthread_mutex_unlock(&env->sd_mtx);

	fprintf(f, "# HELP logbox_searchd_requests_total HTTP requests answered.\n"
	    "# TYPE logbox_searchd_requests_total counter\n");
	for (int e = 0; e < EP_N; e++)
		for (int s = 0; s < M_NSTATUS; s++) {
			if (c.m_req[e][s] == 0)
				continue;
			if (s < M_NSTATUS - 1)
				fprintf(f, "logbox_searchd_requests_total{endpoint=\"%s\","
				    "status=\"%d\"} %llu\n", ep_name(e), m_statuses[s],
				    (unsigned long long)c.m_req[e][s]);
			else
				fprintf(f, "logbox_searchd_requests_total{endpoint=\"%s\","
				    "status=\"other\"} %llu\n", ep_name(e),
				    (unsigned long long)c.m_req[e][s]);
		}

	fprintf(f, "# HELP logbox_searchd_request_duration_seconds Time from a request's "
	    "arrival to its answer.\n"
	    "# TYPE logbox_searchd_request_duration_seconds histogram\n");
	for (int e = 0; e < EP_N; e++) {
		cum = 0;
		for (int b = 0; b <= M_NBOUNDS; b++) {
			cum += c.m_lat[e][b];
			if (b < M_NBOUNDS)
				fprintf(f, "logbox_searchd_request_duration_seconds_bucket"
				    "{endpoint=\"%s\",le=\"%g\"} %llu\n", ep_name(e), m_bounds[b],
				    (unsigned long long)cum);
			else
				fprintf(f, "logbox_searchd_request_duration_seconds_bucket"
				    "{endpoint=\"%s\",le=\"+Inf\"} %llu\n", ep_name(e),
				    (unsigned long long)cum);
		}
		fprintf(f, "logbox_searchd_request_duration_seconds_sum{endpoint=\"%s\"} %.6f\n",
		    ep_name(e), c.m_latsum_us[e] / 1e6);
		fprintf(f, "logbox_searchd_request_duration_seconds_count{endpoint=\"%s\"} %llu\n",
		    ep_name(e), (unsigned long long)cum);
	}

	fprintf(f, "# HELP logbox_searchd_queries_in_flight Requests handed to the workers and "
	    "not yet answered.\n# TYPE logbox_searchd_queries_in_flight gauge\n"
	    "logbox_searchd_queries_in_flight %lld\n", (long long)c.m_inflight);
	fprintf(f, "# HELP logbox_searchd_queue_length Requests waiting for a worker.\n"
	    "# TYPE logbox_searchd_queue_length gauge\nlogbox_searchd_queue_length %zu\n",
	    queued);
	fprintf(f, "# HELP logbox_searchd_running Requests a worker is running.\n"
	    "# TYPE logbox_searchd_running gauge\nlogbox_searchd_running %zu\n", running);
	fprintf(f, "# HELP logbox_searchd_threads Worker threads.\n"
	    "# TYPE logbox_searchd_threads gauge\nlogbox_searchd_threads %d\n",
	    env->sd_threads);
	fprintf(f, "# HELP logbox_searchd_max_per_caller Requests of one caller run at once "
	    "at most.\n# TYPE logbox_searchd_max_per_caller gauge\n"
	    "logbox_searchd_max_per_caller %d\n", env->sd_max_per_caller);
	/* Caller names are X-Logbox-Caller values: [A-Za-z0-9_.:@-], nothing to escape. */
	fprintf(f, "# HELP logbox_searchd_caller_running Requests of a caller a worker is "
	    "running (callers with requests only).\n"
	    "# TYPE logbox_searchd_caller_running gauge\n");
	for (size_t i = 0; i < nmc; i++)
		fprintf(f, "logbox_searchd_caller_running{caller=\"%s\"} %zu\n", mc[i].name,
		    mc[i].running);
	fprintf(f, "# HELP logbox_searchd_caller_queued Requests of a caller waiting for a "
	    "worker (callers with requests only).\n"
	    "# TYPE logbox_searchd_caller_queued gauge\n");
	for (size_t i = 0; i < nmc; i++)
		fprintf(f, "logbox_searchd_caller_queued{caller=\"%s\"} %zu\n", mc[i].name,
		    mc[i].queued);
	free(mc);
	fprintf(f, "# HELP logbox_searchd_errors_total Errors by kind.\n"
	    "# TYPE logbox_searchd_errors_total counter\n");
	for (int k = 0; k < ERR_N; k++)
		fprintf(f, "logbox_searchd_errors_total{kind=\"%s\"} %llu\n", m_errnames[k],
		    (unsigned long long)c.m_err[k]);
	fprintf(f, "# HELP logbox_searchd_tail_streams /v1/tail streams open.\n"
	    "# TYPE logbox_searchd_tail_streams gauge\nlogbox_searchd_tail_streams %lld\n",
	    (long long)c.m_tails);
	fprintf(f, "# HELP logbox_searchd_tail_streams_total /v1/tail streams started.\n"
	    "# TYPE logbox_searchd_tail_streams_total counter\n"
	    "logbox_searchd_tail_streams_total %llu\n", (unsigned long long)c.m_tails_total);
	fprintf(f, "# HELP logbox_searchd_tail_sent_total Messages sent by /v1/tail streams.\n"
	    "# TYPE logbox_searchd_tail_sent_total counter\n"
	    "logbox_searchd_tail_sent_total %llu\n", (unsigned long long)c.m_tail_lines);
	fprintf(f, "# HELP logbox_searchd_tail_skipped_total Matches /v1/tail streams reported "
	    "as skipped instead of sending them.\n"
	    "# TYPE logbox_searchd_tail_skipped_total counter\n"
	    "logbox_searchd_tail_skipped_total %llu\n", (unsigned long long)c.m_tail_skipped);
	fprintf(f, "# HELP logbox_searchd_uptime_seconds Seconds since searchd started.\n"
	    "# TYPE logbox_searchd_uptime_seconds gauge\nlogbox_searchd_uptime_seconds %.3f\n",
	    (now_mono_us() - c.m_started) / 1e6);

	if (pool_catalog(env, &cat) != 0)
		return (0);	/* no store yet: no logspace gauges */
	if ((rc = lb_catalog_logspace_names(cat, &names, &nnames)) != 0) {
		log_warnx("%s: lb_catalog_logspaces: %s", __func__, lb_strerror(rc));
		metrics_error(m, ERR_STORE, 1);
		return (0);
	}
	fprintf(f, "# HELP logbox_logspace_next_id The id the next message of the logspace "
	    "will get.\n# TYPE logbox_logspace_next_id gauge\n");
	for (size_t i = 0; i < nnames; i++) {
		if ((rc = worker_store(w, names[i], &st)) != 0) {
			log_warnx("%s: lb_store_open_reader %s: %s", __func__, names[i],
			    lb_strerror(rc));
			metrics_error(m, ERR_STORE, 1);
			names[i][0] = '\0';
			continue;
		}
		lb_store_range(st, &first, &next);
		fprintf(f, "logbox_logspace_next_id{logspace=\"%s\"} %llu\n", names[i],
		    (unsigned long long)next);
	}
	fprintf(f, "# HELP logbox_logspace_messages Messages stored in the logspace.\n"
	    "# TYPE logbox_logspace_messages gauge\n");
	for (size_t i = 0; i < nnames; i++) {
		if (names[i][0] == '\0' || worker_store(w, names[i], &st) != 0)
			continue;
		lb_store_range(st, &first, &next);
		fprintf(f, "logbox_logspace_messages{logspace=\"%s\"} %llu\n", names[i],
		    (unsigned long long)(next - first));
	}
	free(names);
	return (0);
}
