/*
 * query.c — the query endpoints, run on a worker thread: /v1/search, /v1/count,
 * /v1/histogram and /v1/top, and /v1/messages/<id> (PROTOCOL.md is the contract). It owns
 * their own parameters (q, from, to, time, and each endpoint's), parsing q with the logspace's
 * tokenizer settings, lb_search(), reading the hits' messages (with their spans,
 * lb_query_spans, when asked) and the members of their answers. It does not own reading the
 * query string, the body text and the error envelope, or the store handles (handlers.c,
 * req.h), and never touches libevent.
 *
 * The one idea: the four query endpoints share one run (do_query: open, parse, search, write
 * the envelope, close) and differ only in their part of it (query_eps). Bodies are text built
 * as handlers.c says: a jansson object for the plain members, bytes appended after.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "req.h"

#define DAY_US		(86400LL * 1000000)
#define LIMIT_MAX	10000
#define LIMIT_DEFAULT	100
#define BUCKETS_DEFAULT	100
#define TOPK_DEFAULT	10

/* ---------------------------------------------------------------- parameters */

/* after and upto (an id or "indexed") of the four query endpoints. */
static int
id_params(struct req *r)
{
	const char *u = r->r_val[P_UPTO];

	if (r->r_val[P_AFTER] != NULL &&
	    req_uint(r, P_AFTER, 0, UINT64_MAX - 1, &r->r_after) != 0)
		return (-1);
	if (u != NULL && strcmp(u, "indexed") == 0)
		r->r_indexed = 1;
	else if (u != NULL && req_uint(r, P_UPTO, 1, UINT64_MAX - 1, &r->r_upto) != 0)
		return (req_fail(r, 400, "bad_parameter", "upto: expected an id 1..%llu or "
		    "indexed, got '%.64s'", (unsigned long long)(UINT64_MAX - 1), u));
	return (0);
}

/* q, from, to and time (and the id window) of the four query endpoints. */
static int
query_params(struct req *r)
{
	int64_t		 now = now_real_us();
	const char	*t = r->r_val[P_TIME];

	if (r->r_val[P_Q] == NULL)
		return (req_fail(r, 400, "bad_parameter", "q: missing (the query is required)"));
	if (id_params(r) != 0)
		return (-1);
	r->r_time = LB_TIME_RECEIVED;
	if (t != NULL && strcmp(t, "event") == 0)
		r->r_time = LB_TIME_EVENT;
	else if (t != NULL && strcmp(t, "received") != 0)
		return (req_fail(r, 400, "bad_parameter", "time: expected received or event, "
		    "got '%.64s'", t));
	/*
	 * Without from, the day before to (now - 24 h when to is now too). An id window (after)
	 * is not cut by time unless asked: from the epoch to a day ahead.
	 */
	if (r->r_after != 0) {
		if (req_time(r, P_TO, now, now + DAY_US, &r->r_to) != 0 ||
		    req_time(r, P_FROM, now, 0, &r->r_from) != 0)
			return (-1);
	} else if (req_time(r, P_TO, now, now, &r->r_to) != 0 ||
	    req_time(r, P_FROM, now, r->r_to - DAY_US, &r->r_from) != 0)
		return (-1);
	if (r->r_from > r->r_to)
		return (req_fail(r, 400, "bad_parameter", "from: after to"));
	return (0);
}

/* limit, order, cursor, total and highlight of /v1/search. */
static int
search_params(struct req *r)
{
	uint32_t v;

	if (req_opt_uint(r, P_LIMIT, 1, LIMIT_MAX, LIMIT_DEFAULT, &r->r_limit) != 0)
		return (-1);
	r->r_order = LB_ORDER_NEWEST;
	if (r->r_val[P_ORDER] != NULL) {
		if (strcmp(r->r_val[P_ORDER], "oldest") == 0)
			r->r_order = LB_ORDER_OLDEST;
		else if (strcmp(r->r_val[P_ORDER], "newest") != 0)
			return (req_fail(r, 400, "bad_parameter", "order: expected newest or "
			    "oldest, got '%.64s'", r->r_val[P_ORDER]));
	}
	if (r->r_val[P_CURSOR] != NULL &&
	    req_uint(r, P_CURSOR, 0, UINT64_MAX, &r->r_cursor) != 0)
		return (-1);
	if (req_opt_uint(r, P_TOTAL, 0, 1, 1, &v) != 0)
		return (-1);
	r->r_total = (int)v;
	if (req_opt_uint(r, P_HIGHLIGHT, 0, 1, 0, &v) != 0)
		return (-1);
	r->r_highlight = (int)v;
	return (0);
}

/* field and k of /v1/top. */
static int
top_params(struct req *r)
{
	const char *f = r->r_val[P_FIELD];

	if (req_opt_uint(r, P_K, 1, LB_TOP_MAX, TOPK_DEFAULT, &r->r_k) != 0)
		return (-1);
	if (f == NULL)
		return (req_fail(r, 400, "bad_parameter", "field: missing"));
	r->r_field = f;
	if (!lb_field_name(f, strlen(f), &r->r_top_ns, &r->r_field)) {
		if (!lb_sdname_ok(f, strlen(f)))
			return (req_fail(r, 400, "bad_parameter", "field: '%.64s' is not host, "
			    "peer, program, pid, msgid, facility, severity, message or an SD "
			    "name <sd-id>.<param>", f));
		r->r_top_ns = LB_NS_SD;
	}
	return (0);
}

/* ---------------------------------------------------------------- the run */

static const char *
top_value_name(uint8_t ns, const struct lb_topval *tv)
{
	if (tv->len != 1)
		return (NULL);
	if (ns == LB_NS_FACILITY)
		return (lb_facility_name(tv->value[0]));
	if (ns == LB_NS_SEVERITY)
		return (lb_severity_name(tv->value[0]));
	return (NULL);
}

/*
 * One query being answered: the shared steps of the four query endpoints (do_query runs them
 * around each endpoint's part, query_eps), after query_params and the endpoint's own
 * parameters were read. query_begin opens the logspace and parses q; query_search runs
 * lb_search; query_envelope and query_head write the envelope's members up to "query";
 * query_tail adds the warnings and closes the body; query_end frees.
 */
struct qrun {
	struct lb_store		*st;
	struct lb_qnode		*qn;
	char			*canon;
	size_t			 canonlen;
	struct lb_searchreq	 rq;
	struct lb_searchres	 res;
	char			*hits;		/* search: the hits' JSON, comma-separated */
	size_t			 hitslen;
	uint64_t		 next_cursor;
	struct lb_astat		 as;		/* what it read of archived days */
};

/*
 * A read of an archived day failed (rc, or the reason the archive gave): 503
 * archive_unavailable with that reason, else 1 (not the archive's failure).
 */
static int
archive_failed(struct req *r, struct qrun *qr, int rc)
{
	lb_store_archive_take(qr->st, &qr->as);
	if (rc != LB_EARCHIVE && qr->as.why[0] == '\0')
		return (1);
	log_warnx("%s: %s: %s", r->r_ls, lb_strerror(rc), qr->as.why);
	/* (a reader that failed may keep a half-read piece: open a fresh handle next time) */
	worker_store_drop(r->r_w, r->r_ls);
	qr->st = NULL;
	return (req_fail(r, 503, "archive_unavailable", "%s: %s", lb_strerror(rc),
	    qr->as.why[0] ? qr->as.why : "no reason given"));
}

/* "archive": the archived days read, the time reading them took, the bytes fetched. */
static int
archive_member(struct req *r, struct qrun *qr, json_t *o)
{
	json_t	*a, *days;
	char	 d[16], why[512];

	lb_store_archive_take(qr->st, &qr->as);
	if (pool_archive_problem(r->r_env, r->r_ls, why, sizeof(why)) &&
	    req_warn(r, "archive: cannot be read now (%s): its days not on local disk are "
	    "searched as they were known before, or not at all", why) != 0)
		return (ENOMEM);
	if (qr->as.ndays == 0)
		return (0);
	/* What was skipped as damaged is in the warnings already; here is why. */
	if (qr->as.why[0] != '\0' && req_warn(r, "archive: %s", qr->as.why) != 0)
		return (ENOMEM);
	if ((days = json_array()) == NULL)
		return (ENOMEM);
	for (size_t i = 0; i < qr->as.ndays; i++) {
		snprintf(d, sizeof(d), "%04u-%02u-%02u", qr->as.days[i] / 10000,
		    qr->as.days[i] / 100 % 100, qr->as.days[i] % 100);
		if (json_array_append_new(days, json_string(d)) != 0) {
			json_decref(days);
			return (ENOMEM);
		}
	}
	a = json_pack("{s:o,s:f,s:I,s:I,s:I}", "days", days, "ms", qr->as.us / 1000.0,
	    "fetched_bytes", (json_int_t)qr->as.fetched, "requests", (json_int_t)qr->as.gets,
	    "cached_bytes", (json_int_t)qr->as.cached);
	if (a == NULL || json_object_set_new(o, "archive", a) != 0)
		return (ENOMEM);
	return (0);
}

/* Parses q with the logspace's settings. */
static int
query_parse(struct req *r, struct lb_store *st, struct lb_qnode **qn)
{
	struct lb_qerr	 qerr;
	int		 rc;

	rc = lb_query_parse(lb_store_tokconf(st), r->r_val[P_Q], r->r_len[P_Q], qn, &qerr);
	if (rc == LB_EQUERY || rc == LB_ETOOBIG) {
		req_fail(r, 400, "bad_query", "%s", qerr.msg);
		r->r_pos = (long long)qerr.pos;
		return (-1);
	}
	if (rc != 0)
		return (req_fail(r, 503, "unavailable", "lb_query_parse: %s", lb_strerror(rc)));
	return (0);
}

static int
query_begin(struct req *r, struct qrun *qr)
{
	struct searchd	*env = r->r_env;
	struct job	*j = r->r_job;
	int64_t		 waited;
	int		 rc;

	if (req_store(r, &qr->st) != 0 || query_parse(r, qr->st, &qr->qn) != 0)
		return (-1);
	/* (what other reads of this handle took from the archive is not this query's) */
	lb_store_archive_take(qr->st, &qr->as);
	free(qr->as.days);
	memset(&qr->as, 0, sizeof(qr->as));
	if ((rc = lb_query_fmt(lb_store_tokconf(qr->st), qr->qn, &qr->canon,
	    &qr->canonlen)) != 0)
		return (req_fail(r, 503, "unavailable", "lb_query_fmt: %s", lb_strerror(rc)));
	qr->rq.q = qr->qn;
	qr->rq.from = r->r_from;
	qr->rq.to = r->r_to;
	qr->rq.after = r->r_after;
	qr->rq.upto = r->r_upto;
	qr->rq.indexed = r->r_indexed;
	qr->rq.time = r->r_time;
	qr->rq.max_terms = env->sd_max_terms;
	qr->rq.cancel = &j->j_gone;
	if (env->sd_deadline_ms > 0) {
		waited = (now_mono_us() - j->j_start) / 1000;
		if (waited >= env->sd_deadline_ms)
			return (req_fail(r, 503, "unavailable", "waited %lld ms for a worker, "
			    "past the deadline of %lld ms", (long long)waited,
			    (long long)env->sd_deadline_ms));
		qr->rq.deadline_ms = env->sd_deadline_ms - waited;
	}
	return (0);
}

/* lb_search with qr->rq (want and the endpoint's members filled in); errors as answers. */
static int
query_search(struct req *r, struct qrun *qr)
{
	struct searchd	*env = r->r_env;
	int		 rc;

	switch ((rc = lb_search(qr->st, &qr->rq, &qr->res))) {
	case 0:
		break;
	case LB_ETOOBROAD:
		return (req_fail(r, 422, "too_broad", "too broad: the query's wildcards match "
		    "more than %llu terms; make them longer", (unsigned long long)
		    (env->sd_max_terms ? env->sd_max_terms : LB_MAX_TERMS)));
	case LB_EDEADLINE:
		return (req_fail(r, 422, "too_broad", "deadline: the query ran past %lld ms; "
		    "narrow the query or the time range", (long long)qr->rq.deadline_ms));
	case ECANCELED:
		/* Nobody reads this answer: the client went away (http_gone_cb). */
		metrics_error(env->sd_metrics, ERR_GONE, 1);
		log_debug("%s: %s: the client went away: search stopped", __func__, r->r_ls);
		return (req_fail(r, 503, "unavailable", "the client went away"));
	case ENOMEM:
		return (req_fail(r, 503, "unavailable", "out of memory"));
	default:
		if (archive_failed(r, qr, rc) != 1)
			return (-1);
		log_warnx("%s: lb_search %s: %s", __func__, r->r_ls, lb_strerror(rc));
		/* A handle that failed may hold stale state: open a fresh one next time. */
		worker_store_drop(r->r_w, r->r_ls);
		return (req_fail(r, 500, "internal", "search failed: %s", lb_strerror(rc)));
	}
	for (size_t i = 0; i < qr->res.nwarnings; i++)
		log_warnx("%s: %s: %s", __func__, r->r_ls, qr->res.warnings[i]);
	if (qr->res.nwarnings > 0)
		metrics_error(env->sd_metrics, ERR_DAMAGED, qr->res.nwarnings);
	return (0);
}

/* The envelope's first members: logspace, from, to and, when counted, total. */
static json_t *
query_envelope(struct req *r, struct qrun *qr)
{
	json_t	*o;
	char	 through[24];

	snprintf(through, sizeof(through), "%llu", (unsigned long long)qr->res.through);
	o = json_pack("{s:s,s:I,s:I,s:s,s:s}", "logspace", r->r_ls, "from",
	    (json_int_t)r->r_from, "to", (json_int_t)r->r_to, "time",
	    r->r_time == LB_TIME_EVENT ? "event" : "received", "through", through);
	if (o != NULL && (qr->rq.want & LB_WANT_TOTAL) && json_object_set_new(o, "total",
	    json_integer((json_int_t)qr->res.total)) != 0) {
		json_decref(o);
		return (NULL);
	}
	return (o);
}

/*
 * Opens *body and writes o (which it takes) with took_ms, segments and tail added, then the
 * canonical query; the endpoint then writes its own byte members and calls query_tail.
 */
static FILE *
query_head(struct req *r, struct qrun *qr, json_t *o, char **body, size_t *len)
{
	FILE *f;

	if (o == NULL || archive_member(r, qr, o) != 0 || json_object_set_new(o, "took_ms",
	    json_real((now_mono_us() - r->r_job->j_start) / 1000.0)) != 0 ||
	    json_object_set_new(o, "segments", json_integer((json_int_t)qr->res.segments)) != 0 ||
	    json_object_set_new(o, "tail", json_integer((json_int_t)qr->res.tail)) != 0 ||
	    (f = open_memstream(body, len)) == NULL) {
		json_decref(o);
		req_fail(r, 503, "unavailable", "out of memory");
		return (NULL);
	}
	if (body_begin(f, o) != 0) {
		json_decref(o);
		fclose(f);
		free(*body);
		*body = NULL;
		req_fail(r, 503, "unavailable", "out of memory");
		return (NULL);
	}
	json_decref(o);
	body_bytes(f, "query", qr->canon, qr->canonlen);
	return (f);
}

/* Adds the warnings, closes the object and f. */
static int
query_tail(struct req *r, struct qrun *qr, FILE *f, char **body)
{
	body_warnings(f, r, &qr->res);
	fputc('}', f);
	if (fclose(f) != 0) {
		free(*body);
		*body = NULL;
		return (req_fail(r, 503, "unavailable", "out of memory"));
	}
	return (0);
}

static void
query_end(struct qrun *qr)
{
	free(qr->hits);
	free(qr->canon);
	free(qr->as.days);
	lb_searchres_free(&qr->res);
	lb_query_free(qr->qn);
}

/* ,"spans":[[start,end],...]: the bytes of m's text that q matched (lb_query_spans). */
static int
hit_spans(FILE *f, struct lb_store *st, const struct lb_qnode *q, const struct lb_msg *m)
{
	struct lb_span	*sp;
	size_t		 n;
	int		 rc;

	if ((rc = lb_query_spans(q, lb_store_tokconf(st), m->message.p, m->message.len, &sp,
	    &n)) != 0)
		return (rc);
	fputs(",\"spans\":[", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s[%zu,%zu]", i ? "," : "", sp[i].off, sp[i].off + sp[i].len);
	fputc(']', f);
	free(sp);
	return (0);
}

/* The message object, with the spans of q in it unless q is NULL. */
static int
msg_json(FILE *f, struct lb_store *st, const struct lb_qnode *q, const struct lb_msg *m)
{
	int rc;

	lb_msg_json(f, m);
	if (q == NULL)
		return (0);
	/* Reopens the object lb_msg_json closed: its last byte is the '}'. */
	if (fseek(f, -1, SEEK_CUR) != 0)
		return (EIO);
	if ((rc = hit_spans(f, st, q, m)) != 0)
		return (rc);
	fputc('}', f);
	return (0);
}

/*
 * The hits' messages as JSON array members into qr->hits; qr->next_cursor is where the page
 * ends (earlier when huge messages cut it). Messages that cannot be read are left out with a
 * warning.
 */
static int
search_hits(struct req *r, struct qrun *qr)
{
	struct lb_searchres	*res = &qr->res;
	struct lb_msg		 m;
	FILE			*hf;
	int			 rc;

	qr->next_cursor = res->next_cursor;
	if ((hf = open_memstream(&qr->hits, &qr->hitslen)) == NULL)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	for (size_t i = 0, n = 0; i < res->n; i++) {
		if ((rc = lb_store_get(qr->st, res->ids[i], &m)) != 0) {
			if (archive_failed(r, qr, rc) != 1) {
				fclose(hf);
				return (-1);
			}
			log_warnx("%s: lb_store_get %s %llu: %s", __func__, r->r_ls,
			    (unsigned long long)res->ids[i], lb_strerror(rc));
			metrics_error(r->r_env->sd_metrics, ERR_MESSAGE, 1);
			if (req_warn(r, "message %llu skipped: %s",
			    (unsigned long long)res->ids[i], lb_strerror(rc)) != 0)
				goto nomem;
			continue;
		}
		if (n++ > 0)
			fputc(',', hf);
		if (msg_json(hf, qr->st, r->r_highlight ? qr->qn : NULL, &m) != 0)
			goto nomem;
		/* Huge messages: cut the page, the client continues from here. */
		if (i + 1 < res->n && ftell(hf) > SD_HITS_BYTES_MAX) {
			qr->next_cursor = res->ids[i];
			if (req_warn(r, "hits cut after %zu messages (a page holds at most %d "
			    "bytes): continue with next_cursor", n, SD_HITS_BYTES_MAX) != 0)
				goto nomem;
			break;
		}
	}
	if (fclose(hf) != 0)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	return (0);
 nomem:
	fclose(hf);
	return (req_fail(r, 503, "unavailable", "out of memory"));
}

/* /v1/search: hits after the cursor, read before the envelope (took_ms covers reading). */
static void
search_want(struct req *r, struct lb_searchreq *rq)
{
	rq->want = LB_WANT_HITS | (r->r_total ? LB_WANT_TOTAL : 0);
	rq->limit = r->r_limit;
	rq->order = r->r_order;
	rq->cursor = r->r_cursor;
}

static int
search_members(struct req *r, struct qrun *qr, json_t *o)
{
	char cur[24];

	if (search_hits(r, qr) != 0)
		return (-1);
	snprintf(cur, sizeof(cur), "%llu", (unsigned long long)qr->next_cursor);
	if ((!r->r_total && json_object_set_new(o, "total", json_null()) != 0) ||
	    json_object_set_new(o, "next_cursor", qr->next_cursor ? json_string(cur) :
	    json_null()) != 0)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	return (0);
}

static void
search_bytes(struct req *r, struct qrun *qr, FILE *f)
{
	(void)r;
	fputs(",\"hits\":[", f);
	fwrite(qr->hits, 1, qr->hitslen, f);
	fputc(']', f);
}

/* /v1/count: the envelope alone. */
static void
count_want(struct req *r, struct lb_searchreq *rq)
{
	(void)r;
	rq->want = LB_WANT_TOTAL;
}

/* /v1/histogram */
static int
histogram_params(struct req *r)
{
	return (req_opt_uint(r, P_BUCKETS, 1, LB_HIST_MAX, BUCKETS_DEFAULT, &r->r_buckets));
}

static void
histogram_want(struct req *r, struct lb_searchreq *rq)
{
	rq->want = LB_WANT_HIST | LB_WANT_TOTAL;
	rq->nbuckets = r->r_buckets;
}

static int
histogram_members(struct req *r, struct qrun *qr, json_t *o)
{
	if (json_object_set_new(o, "step_us", json_integer((json_int_t)qr->res.hist_step)) != 0)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	return (0);
}

static void
histogram_bytes(struct req *r, struct qrun *qr, FILE *f)
{
	(void)r;
	fputs(",\"buckets\":[", f);
	for (uint32_t k = 0; k < qr->res.nhist; k++)
		fprintf(f, "%s{\"from\":%lld,\"count\":%llu}", k ? "," : "",
		    (long long)(qr->res.hist_from + (int64_t)k * qr->res.hist_step),
		    (unsigned long long)qr->res.hist[k]);
	fputc(']', f);
}

/* /v1/top */
static void
top_want(struct req *r, struct lb_searchreq *rq)
{
	rq->want = LB_WANT_TOP | LB_WANT_TOTAL;
	rq->top_ns = r->r_top_ns;
	rq->top_sdname = r->r_top_ns == LB_NS_SD ? r->r_field : NULL;
	rq->topk = r->r_k;
}

static void
top_bytes(struct req *r, struct qrun *qr, FILE *f)
{
	body_bytes(f, "field", r->r_field, strlen(r->r_field));
	fputs(",\"values\":[", f);
	for (size_t k = 0; k < qr->res.ntop; k++) {
		const char *name = top_value_name(r->r_top_ns, &qr->res.top[k]);

		fputs(k ? ",{\"value\":\"" : "{\"value\":\"", f);
		if (name != NULL)
			fputs(name, f);
		else
			lb_json_bytes(f, qr->res.top[k].value, qr->res.top[k].len);
		fprintf(f, "\",\"count\":%llu}", (unsigned long long)qr->res.top[k].count);
	}
	fputc(']', f);
}

/*
 * What each query endpoint adds to the shared steps: its own parameters (after q, from and
 * to), what it wants of lb_search, the plain members of its envelope (after total) and the
 * members it writes as text (after query). NULL: nothing.
 */
static const struct query_ep {
	int	(*params)(struct req *);
	void	(*want)(struct req *, struct lb_searchreq *);
	int	(*members)(struct req *, struct qrun *, json_t *);
	void	(*bytes)(struct req *, struct qrun *, FILE *);
} query_eps[EP_N] = {
	[EP_SEARCH] = { search_params, search_want, search_members, search_bytes },
	[EP_COUNT] = { NULL, count_want, NULL, NULL },
	[EP_HISTOGRAM] = { histogram_params, histogram_want, histogram_members, histogram_bytes },
	[EP_TOP] = { top_params, top_want, NULL, top_bytes },
};

/* /v1/search, /v1/count, /v1/histogram, /v1/top: the shared steps around query_eps[ep]. */
int
do_query(struct req *r, int ep, char **body, size_t *len)
{
	const struct query_ep	*e = &query_eps[ep];
	struct qrun		 qr;
	json_t			*o = NULL;
	FILE			*f;
	int			 ret = -1;

	memset(&qr, 0, sizeof(qr));
	if (query_params(r) != 0 || (e->params != NULL && e->params(r) != 0) ||
	    query_begin(r, &qr) != 0)
		goto done;
	e->want(r, &qr.rq);
	if (query_search(r, &qr) != 0)
		goto done;
	if ((o = query_envelope(r, &qr)) == NULL) {
		req_fail(r, 503, "unavailable", "out of memory");
		goto done;
	}
	if (e->members != NULL && e->members(r, &qr, o) != 0)
		goto done;
	f = query_head(r, &qr, o, body, len);
	o = NULL;
	if (f == NULL)
		goto done;
	if (e->bytes != NULL)
		e->bytes(r, &qr, f);
	ret = query_tail(r, &qr, f, body);
 done:
	json_decref(o);
	query_end(&qr);
	return (ret);
}

/* /v1/messages/<id> */
int
do_message(struct req *r, char **body, size_t *len)
{
	const char	*s = r->r_job->j_path + strlen("/v1/messages/");
	struct lb_store	*st;
	struct lb_qnode	*qn = NULL;
	struct lb_msg	 m;
	struct lb_astat	 as;
	uint64_t	 id = 0;
	FILE		*f;
	int		 rc;

	if (*s == '\0' || strlen(s) > 20)
		goto badid;
	for (const char *p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || id > (UINT64_MAX - 9) / 10)
			goto badid;
		id = id * 10 + (uint64_t)(*p - '0');
	}
	if (id == 0)
		goto badid;
	if (req_store(r, &st) != 0 ||
	    (r->r_val[P_Q] != NULL && query_parse(r, st, &qn) != 0))
		return (-1);
	if ((rc = lb_store_get(st, id, &m)) == LB_ENOTFOUND) {
		req_fail(r, 404, "not_found", "no message %llu in logspace '%s'",
		    (unsigned long long)id, r->r_ls);
		goto fail;
	}
	memset(&as, 0, sizeof(as));
	lb_store_archive_take(st, &as);
	free(as.days);
	if (rc != 0 && (rc == LB_EARCHIVE || as.why[0] != '\0')) {
		log_warnx("%s: %s %llu: %s: %s", __func__, r->r_ls, (unsigned long long)id,
		    lb_strerror(rc), as.why);
		worker_store_drop(r->r_w, r->r_ls);
		req_fail(r, 503, "archive_unavailable", "message %llu: %s: %s",
		    (unsigned long long)id, lb_strerror(rc), as.why[0] ? as.why : "no reason given");
		goto fail;
	}
	if (rc != 0) {
		log_warnx("%s: lb_store_get %s %llu: %s", __func__, r->r_ls,
		    (unsigned long long)id, lb_strerror(rc));
		metrics_error(r->r_env->sd_metrics, ERR_MESSAGE, 1);
		worker_store_drop(r->r_w, r->r_ls);
		req_fail(r, 500, "internal", "message %llu cannot be read: %s",
		    (unsigned long long)id, lb_strerror(rc));
		goto fail;
	}
	if ((f = open_memstream(body, len)) == NULL)
		goto nomem;
	rc = msg_json(f, st, qn, &m);
	if (fclose(f) != 0 || rc != 0) {
		free(*body);
		*body = NULL;
		goto nomem;
	}
	lb_query_free(qn);
	return (0);
 nomem:
	req_fail(r, 503, "unavailable", "out of memory");
 fail:
	lb_query_free(qn);
	return (-1);
 badid:
	return (req_fail(r, 400, "bad_parameter", "id: expected a message id 1..%llu, got "
	    "'%.64s'", (unsigned long long)UINT64_MAX, s));
}

/* ---------------------------------------------------------------- /v1/tail */

#define TAIL_LIMIT_DEFAULT	100
#define TAIL_PAGE		4096	/* ids per lb_search while counting a tick's matches */
#define TAIL_COUNT_MAX		(256 * TAIL_PAGE) /* matches one tick counts at most */

/*
 * One tick of a /v1/tail stream (tail.c owns the stream): the matches of q with ids after
 * j_cursor (the last id covered), oldest first. All of them are counted, the newest `limit`
 * are written, one message object a line, after a {"skipped":K,"through":"N"} line when K
 * older ones were left out (also those beyond SD_TAIL_BUF_MAX bytes of the tick, and
 * unreadable ones). The first tick without `after` starts at the logspace's end; the
 * first tick always ends with {"through":"N","time":µs}. j_cursor becomes the last id the tick
 * covered (through); j_skipped is K.
 */
int
do_tail(struct req *r, char **body, size_t *len)
{
	struct job	*j = r->r_job;
	struct qrun	 qr;
	uint64_t	*ring = NULL, after = 0, first, next, cursor, through, n = 0, skipped;
	uint64_t	 sent = 0;
	uint32_t	 limit;
	char		**lines = NULL;
	size_t		*lens = NULL, used = 0;
	struct lb_msg	 m;
	FILE		*f = NULL;
	int		 ret = -1, rc;

	memset(&qr, 0, sizeof(qr));
	if (r->r_val[P_Q] == NULL)
		return (req_fail(r, 400, "bad_parameter", "q: missing (the query is required)"));
	if (req_opt_uint(r, P_LIMIT, 1, LIMIT_MAX, TAIL_LIMIT_DEFAULT, &limit) != 0 ||
	    (r->r_val[P_AFTER] != NULL && req_uint(r, P_AFTER, 0, UINT64_MAX, &after) != 0))
		return (-1);
	/* Every receive time: the ids decide (cursor, oldest first). */
	r->r_from = 0;
	r->r_to = now_real_us() + DAY_US;
	if (query_begin(r, &qr) != 0)
		goto done;
	if (j->j_started)
		cursor = j->j_cursor;
	else if (r->r_val[P_AFTER] != NULL)
		cursor = after;
	else {
		lb_store_range(qr.st, &first, &next);
		cursor = next > 0 ? next - 1 : 0;
	}
	through = cursor;
	if ((ring = calloc(limit, sizeof(*ring))) == NULL) {
		req_fail(r, 503, "unavailable", "out of memory");
		goto done;
	}
	/* The first tick without after only finds the end. */
	while (j->j_started || r->r_val[P_AFTER] != NULL) {
		lb_searchres_free(&qr.res);
		memset(&qr.res, 0, sizeof(qr.res));
		qr.rq.want = LB_WANT_HITS;
		qr.rq.limit = TAIL_PAGE;
		qr.rq.order = LB_ORDER_OLDEST;
		qr.rq.cursor = cursor;
		if (query_search(r, &qr) != 0)
			goto done;
		for (size_t i = 0; i < qr.res.n; i++, n++)
			ring[n % limit] = qr.res.ids[i];
		if (qr.res.n > 0 && qr.res.ids[qr.res.n - 1] > through)
			through = qr.res.ids[qr.res.n - 1];
		if (qr.res.next_cursor == 0) {
			/* Every id below id_hi was looked at. */
			if (qr.res.id_hi > 0 && qr.res.id_hi - 1 > through)
				through = qr.res.id_hi - 1;
			break;
		}
		/* A huge backlog (an old after) is worked off over several ticks. */
		if (n >= TAIL_COUNT_MAX)
			break;
		cursor = qr.res.next_cursor;
	}
	/*
	 * The newest first, while the tick's bytes stay within SD_TAIL_BUF_MAX (the newest one
	 * always): the older ones beyond, and unreadable ones, are skipped too, so that a few huge
	 * messages never make a stream's buffer balloon.
	 */
	skipped = n > limit ? n - limit : 0;
	if (n > skipped && ((lines = calloc(n - skipped, sizeof(*lines))) == NULL ||
	    (lens = calloc(n - skipped, sizeof(*lens))) == NULL))
		goto nomem;
	for (uint64_t k = n; k-- > skipped;) {
		uint64_t	 id = ring[k % limit];
		size_t		 i = (size_t)(k - skipped);
		FILE		*lf;

		if ((rc = lb_store_get(qr.st, id, &m)) != 0) {
			log_warnx("%s: lb_store_get %s %llu: %s", __func__, r->r_ls,
			    (unsigned long long)id, lb_strerror(rc));
			metrics_error(r->r_env->sd_metrics, ERR_MESSAGE, 1);
			continue;
		}
		if ((lf = open_memstream(&lines[i], &lens[i])) == NULL)
			goto nomem;
		rc = msg_json(lf, qr.st, NULL, &m);
		fputc('\n', lf);
		if (fclose(lf) != 0 || rc != 0)
			goto nomem;
		if (used > 0 && used + lens[i] > SD_TAIL_BUF_MAX) {
			free(lines[i]);
			lines[i] = NULL;
			break;
		}
		used += lens[i];
		sent++;
	}
	skipped = n - sent;
	if ((f = open_memstream(body, len)) == NULL)
		goto nomem;
	if (skipped > 0)
		fprintf(f, "{\"skipped\":%llu,\"through\":\"%llu\"}\n", (unsigned long long)skipped,
		    (unsigned long long)through);
	for (uint64_t k = n > limit ? n - limit : 0, i = 0; k < n; k++, i++)
		if (lines[i] != NULL)
			fwrite(lines[i], 1, lens[i], f);
	if (!j->j_started)
		fprintf(f, "{\"through\":\"%llu\",\"time\":%lld}\n", (unsigned long long)through,
		    (long long)now_real_us());
	if (fclose(f) != 0) {
		f = NULL;
		goto nomem;
	}
	f = NULL;
	metrics_tail(r->r_env->sd_metrics, 0, sent, skipped);
	j->j_cursor = through;
	j->j_skipped = skipped;
	ret = 0;
	goto done;
 nomem:
	if (f != NULL)
		fclose(f);
	free(*body);
	*body = NULL;
	req_fail(r, 503, "unavailable", "out of memory");
 done:
	if (lines != NULL)
		for (uint64_t k = 0; k < n - (n > limit ? n - limit : 0); k++)
			free(lines[k]);
	free(lines);
	free(lens);
	free(ring);
	query_end(&qr);
	return (ret);
}
