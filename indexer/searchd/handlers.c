/*
 * handlers.c — the work behind each endpoint, run on a worker thread: reading and checking the
 * query-string parameters, parsing q with the logspace's tokenizer settings, lb_search(),
 * reading the hits' messages (with their spans, lb_query_spans, when asked), and writing the
 * JSON answer (PROTOCOL.md is the contract). The four query endpoints share one run (do_query)
 * and differ only in their part of it (query_eps). It owns the mapping of library errors to
 * HTTP statuses and error codes; it never touches libevent (the job comes back to the loop
 * with a status and a body).
 *
 * The one idea about bodies: messages are bytes and lb_msg_json() writes them with \udcXX
 * escapes that jansson cannot hold, so a body is text. The plain members of an envelope are a
 * jansson object dumped compactly with its closing brace left off; the members holding bytes
 * (the canonical query, messages, top values, warnings, error messages) are then appended as
 * text written by lb_msg_json() / lb_json_bytes(), and the brace closed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "searchd.h"

/* Query-string parameters, one bit each. */
enum {
	P_LOGSPACE, P_Q, P_FROM, P_TO, P_LIMIT, P_ORDER, P_CURSOR, P_TOTAL, P_BUCKETS, P_FIELD,
	P_K, P_HIGHLIGHT, P_N
};
static const char *p_names[P_N] = {
	"logspace", "q", "from", "to", "limit", "order", "cursor", "total", "buckets", "field", "k",
	"highlight"
};
#define B(p)		(1u << (p))
#define P_QUERY		(B(P_LOGSPACE) | B(P_Q) | B(P_FROM) | B(P_TO))

static const unsigned ep_params[EP_N] = {
	[EP_SEARCH] = P_QUERY | B(P_LIMIT) | B(P_ORDER) | B(P_CURSOR) | B(P_TOTAL) |
	    B(P_HIGHLIGHT),
	[EP_COUNT] = P_QUERY,
	[EP_HISTOGRAM] = P_QUERY | B(P_BUCKETS),
	[EP_TOP] = P_QUERY | B(P_FIELD) | B(P_K),
	[EP_MESSAGE] = B(P_LOGSPACE) | B(P_Q),
};

#define PARAM_MAX	256		/* bytes of a decoded parameter other than q */
#define DAY_US		(86400LL * 1000000)
#define LIMIT_MAX	10000
#define LIMIT_DEFAULT	100
#define BUCKETS_DEFAULT	100
#define TOPK_DEFAULT	10


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

static int
req_fail(struct req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
req_fail(struct req *r, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	r->r_status = status;
	r->r_code = code;
	r->r_pos = -1;
	va_start(ap, fmt);
	vsnprintf(r->r_msg, sizeof(r->r_msg), fmt, ap);
	va_end(ap);
	return (-1);
}

static int
req_warn(struct req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
req_warn(struct req *r, const char *fmt, ...)
{
	va_list	 ap;
	char	*s, **p;

	if ((p = realloc(r->r_warn, (r->r_nwarn + 1) * sizeof(*p))) == NULL)
		return (ENOMEM);
	r->r_warn = p;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1) {
		va_end(ap);
		return (ENOMEM);
	}
	va_end(ap);
	r->r_warn[r->r_nwarn++] = s;
	return (0);
}

static void
req_free(struct req *r)
{
	for (int i = 0; i < P_N; i++)
		free(r->r_val[i]);
	for (size_t i = 0; i < r->r_nwarn; i++)
		free(r->r_warn[i]);
	free(r->r_warn);
}

/* ---------------------------------------------------------------- parameters */

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (c - 'A' + 10);
	return (-1);
}

/*
 * application/x-www-form-urlencoded: '+' is a space, %XX a byte. The result may hold NUL
 * bytes; it is NUL-terminated for convenience. EINVAL for a bad escape.
 */
static int
form_decode(const char *s, size_t n, char **out, size_t *outlen)
{
	char	*d;
	size_t	 k = 0;

	if ((d = malloc(n + 1)) == NULL)
		return (ENOMEM);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+')
			d[k++] = ' ';
		else if (s[i] == '%') {
			int hi, lo;

			if (i + 2 >= n) {
				free(d);
				return (EINVAL);
			}
			if ((hi = hexval((unsigned char)s[i + 1])) < 0 ||
			    (lo = hexval((unsigned char)s[i + 2])) < 0) {
				free(d);
				return (EINVAL);
			}
			d[k++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			d[k++] = s[i];
	}
	d[k] = '\0';
	*out = d;
	*outlen = k;
	return (0);
}

/* Splits the query string into r->r_val[], refusing unknown, repeated and overlong ones. */
static int
req_split(struct req *r, const char *qs, unsigned allowed)
{
	const char	*p, *amp, *eq;
	char		*key, *val;
	size_t		 klen, vlen;
	int		 i, rc;

	for (p = qs; p != NULL && *p != '\0'; p = amp != NULL ? amp + 1 : NULL) {
		amp = strchr(p, '&');
		size_t n = amp != NULL ? (size_t)(amp - p) : strlen(p);
		if (n == 0)
			continue;
		eq = memchr(p, '=', n);
		if ((rc = form_decode(p, eq != NULL ? (size_t)(eq - p) : n, &key, &klen)) != 0)
			return (rc == EINVAL ? req_fail(r, 400, "bad_parameter",
			    "bad %%-escape in a parameter name") : req_fail(r, 503, "unavailable",
			    "out of memory"));
		for (i = 0; i < P_N; i++)
			if ((allowed & B(i)) && strcmp(key, p_names[i]) == 0 &&
			    strlen(key) == klen)
				break;
		if (i == P_N) {
			req_fail(r, 400, "bad_parameter", "unknown parameter '%.64s'", key);
			free(key);
			return (-1);
		}
		free(key);
		if (r->r_val[i] != NULL)
			return (req_fail(r, 400, "bad_parameter", "%s: given more than once",
			    p_names[i]));
		if (eq != NULL)
			rc = form_decode(eq + 1, n - (eq + 1 - p), &val, &vlen);
		else
			rc = form_decode("", 0, &val, &vlen);
		if (rc != 0)
			return (rc == EINVAL ? req_fail(r, 400, "bad_parameter",
			    "%s: bad %%-escape", p_names[i]) : req_fail(r, 503, "unavailable",
			    "out of memory"));
		r->r_val[i] = val;
		r->r_len[i] = vlen;
		if (i != P_Q && (vlen > PARAM_MAX || strlen(val) != vlen))
			return (req_fail(r, 400, "bad_parameter", "%s: longer than %d bytes or "
			    "holds a NUL byte", p_names[i], PARAM_MAX));
	}
	return (0);
}

/* A decimal number in [lo, hi]: digits only. */
static int
req_uint(struct req *r, int p, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char	*s = r->r_val[p];
	uint64_t	 v = 0;

	if (*s == '\0')
		goto bad;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			goto bad;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v < lo || v > hi)
		goto bad;
	*out = v;
	return (0);
 bad:
	return (req_fail(r, 400, "bad_parameter", "%s: expected an integer %llu..%llu, got "
	    "'%.64s'", p_names[p], (unsigned long long)lo, (unsigned long long)hi, r->r_val[p]));
}

/* An SD parameter name as the query language takes it: <sd-id>.<param>. */
static int
sdname_ok(const char *s)
{
	const char *dot = strchr(s, '.');
	size_t idlen;

	if (dot == NULL || dot[1] == '\0' || dot == s)
		return (0);
	idlen = (size_t)(dot - s);
	if (memchr(s, '@', idlen) != NULL)
		return (1);
	return ((idlen == 11 && strncmp(s, "timeQuality", 11) == 0) ||
	    (idlen == 6 && strncmp(s, "origin", 6) == 0) ||
	    (idlen == 4 && strncmp(s, "meta", 4) == 0));
}

static int
req_time(struct req *r, int p, int64_t now, int64_t dflt, int64_t *out)
{
	if (r->r_val[p] == NULL) {
		*out = dflt;
		return (0);
	}
	if (lb_time_parse(r->r_val[p], now, out) != 0)
		return (req_fail(r, 400, "bad_parameter", "%s: cannot read '%.64s' as a time "
		    "(RFC 3339, -15m/-2h/-1d/-1w, now, or epoch seconds)", p_names[p],
		    r->r_val[p]));
	return (0);
}

/* Reads the parameters the endpoint takes and checks the logspace name; the rest is the
 * endpoint's to read (query_params and the do_* functions). */
static int
req_params(struct req *r)
{
	struct job *j = r->r_job;

	if (req_split(r, j->j_query, ep_params[j->j_ep]) != 0)
		return (-1);
	r->r_ls = r->r_val[P_LOGSPACE] != NULL ? r->r_val[P_LOGSPACE] : "main";
	if (!lb_logspace_name_ok(r->r_ls, strlen(r->r_ls), NULL))
		return (req_fail(r, 400, "bad_parameter", "logspace: '%.64s' is not a logspace "
		    "name ([a-z0-9_-]{1,64})", r->r_ls));
	return (0);
}

/* q, from and to of the four query endpoints. */
static int
query_params(struct req *r)
{
	int64_t now = now_real_us();

	if (r->r_val[P_Q] == NULL)
		return (req_fail(r, 400, "bad_parameter", "q: missing (the query is required)"));
	/* Without from, the day before to (now - 24 h when to is now too). */
	if (req_time(r, P_TO, now, now, &r->r_to) != 0 ||
	    req_time(r, P_FROM, now, r->r_to - DAY_US, &r->r_from) != 0)
		return (-1);
	if (r->r_from > r->r_to)
		return (req_fail(r, 400, "bad_parameter", "from: after to"));
	return (0);
}

/* An optional number parameter in [lo, hi], dflt when absent. */
static int
req_opt_uint(struct req *r, int p, uint64_t lo, uint64_t hi, uint32_t dflt, uint32_t *out)
{
	uint64_t v;

	*out = dflt;
	if (r->r_val[p] == NULL)
		return (0);
	if (req_uint(r, p, lo, hi, &v) != 0)
		return (-1);
	*out = (uint32_t)v;
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
	static const struct { const char *name; uint8_t ns; } fields[] = {
		{ "host", LB_NS_HOST }, { "program", LB_NS_PROGRAM },
		{ "pid", LB_NS_PID }, { "msgid", LB_NS_MSGID },
		{ "facility", LB_NS_FACILITY }, { "severity", LB_NS_SEVERITY },
		{ "message", LB_NS_TEXT }, { "peer", LB_NS_PEER },
	};
	const char *f = r->r_val[P_FIELD];

	if (req_opt_uint(r, P_K, 1, LB_TOP_MAX, TOPK_DEFAULT, &r->r_k) != 0)
		return (-1);
	if (f == NULL)
		return (req_fail(r, 400, "bad_parameter", "field: missing"));
	r->r_field = f;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strcasecmp(f, fields[i].name) == 0) {
			r->r_top_ns = fields[i].ns;
			r->r_field = fields[i].name;
		}
	if (r->r_top_ns == 0) {
		if (!sdname_ok(f))
			return (req_fail(r, 400, "bad_parameter", "field: '%.64s' is not host, "
			    "peer, program, pid, msgid, facility, severity, message or an SD "
			    "name <sd-id>.<param>", f));
		r->r_top_ns = LB_NS_SD;
	}
	return (0);
}

/* ---------------------------------------------------------------- bodies */

/* Writes the members of o (a non-empty object of plain values) without the closing brace. */
static int
body_begin(FILE *f, json_t *o)
{
	char	*s;
	size_t	 n;

	if (o == NULL || (s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER |
	    JSON_REAL_PRECISION(6))) == NULL)
		return (ENOMEM);
	n = strlen(s);
	fwrite(s, 1, n > 0 ? n - 1 : 0, f);
	free(s);
	return (0);
}

/* ,"key":"<bytes>" */
static void
body_bytes(FILE *f, const char *key, const void *p, size_t len)
{
	fprintf(f, ",\"%s\":\"", key);
	lb_json_bytes(f, p, len);
	fputc('"', f);
}

static void
body_warnings(FILE *f, struct req *r, const struct lb_searchres *res)
{
	size_t n = 0;

	fputs(",\"warnings\":[", f);
	for (size_t i = 0; res != NULL && i < res->nwarnings; i++, n++) {
		fputs(n ? ",\"" : "\"", f);
		lb_json_bytes(f, (const uint8_t *)res->warnings[i], strlen(res->warnings[i]));
		fputc('"', f);
	}
	for (size_t i = 0; i < r->r_nwarn; i++, n++) {
		fputs(n ? ",\"" : "\"", f);
		lb_json_bytes(f, (const uint8_t *)r->r_warn[i], strlen(r->r_warn[i]));
		fputc('"', f);
	}
	fputc(']', f);
}

/* The error envelope {"error":{"code","message"[,"position"]}} into a malloc'ed *body. */
int
body_error(const char *code, const char *msg, long long pos, char **body, size_t *len)
{
	FILE	*f;
	json_t	*o;
	int	 rc;

	if ((f = open_memstream(body, len)) == NULL)
		return (errno);
	if (pos >= 0)
		o = json_pack("{s:s,s:I}", "code", code, "position", (json_int_t)pos);
	else
		o = json_pack("{s:s}", "code", code);
	fputs("{\"error\":", f);
	rc = body_begin(f, o);
	json_decref(o);
	body_bytes(f, "message", msg, strlen(msg));
	fputs("}}", f);
	if (fclose(f) != 0 && rc == 0)
		rc = EIO;
	if (rc != 0) {
		free(*body);
		*body = NULL;
		*len = 0;
	}
	return (rc);
}

static void
job_answer(struct job *j, int status, const char *ctype, char *body, size_t len)
{
	j->j_status = status;
	j->j_ctype = ctype;
	j->j_body = body;
	j->j_bodylen = len;
}

static void
job_error(struct searchd *env, struct job *j, int status, const char *code, const char *msg,
    long long pos)
{
	char	*body = NULL;
	size_t	 len = 0;

	if (status >= 500)
		metrics_error(env->sd_metrics, ERR_INTERNAL, 1);
	if (body_error(code, msg, pos, &body, &len) != 0) {
		body = NULL;
		len = 0;
	}
	job_answer(j, status, "application/json", body, len);
}

/* ---------------------------------------------------------------- the store */

/* Maps an error opening logspace r->r_ls to the answer; logs what is not the client's fault. */
static int
req_store(struct req *r, struct lb_store **st)
{
	int rc;

	if ((rc = worker_store(r->r_w, r->r_ls, st)) == 0)
		return (0);
	switch (rc) {
	case LB_ENOTFOUND:
		return (req_fail(r, 404, "not_found", "no logspace '%s'", r->r_ls));
	case LB_EBADCONF:
		return (req_fail(r, 400, "bad_parameter", "logspace: '%s' is not a logspace name",
		    r->r_ls));
	case ENOENT:
		return (req_fail(r, 503, "unavailable", "no store in %s yet",
		    r->r_env->sd_data));
	default:
		log_warnx("%s: lb_store_open_reader %s: %s", __func__, r->r_ls, lb_strerror(rc));
		metrics_error(r->r_env->sd_metrics, ERR_STORE, 1);
		return (req_fail(r, 503, "unavailable", "cannot open logspace '%s': %s",
		    r->r_ls, lb_strerror(rc)));
	}
}

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
};

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
	if ((rc = lb_query_fmt(lb_store_tokconf(qr->st), qr->qn, &qr->canon,
	    &qr->canonlen)) != 0)
		return (req_fail(r, 503, "unavailable", "lb_query_fmt: %s", lb_strerror(rc)));
	qr->rq.q = qr->qn;
	qr->rq.from = r->r_from;
	qr->rq.to = r->r_to;
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
	json_t *o;

	o = json_pack("{s:s,s:I,s:I}", "logspace", r->r_ls, "from", (json_int_t)r->r_from,
	    "to", (json_int_t)r->r_to);
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

	if (o == NULL || json_object_set_new(o, "took_ms",
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
static int
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
static int
do_message(struct req *r, char **body, size_t *len)
{
	const char	*s = r->r_job->j_path + strlen("/v1/messages/");
	struct lb_store	*st;
	struct lb_qnode	*qn = NULL;
	struct lb_msg	 m;
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

static int
ls_add(void *arg, const char *name)
{
	return (json_array_append_new(arg, json_string(name)) != 0 ? ENOMEM : 0);
}

/* /v1/logspaces: each logspace's ids and the delimiters the catalog holds for it. */
static int
do_logspaces(struct req *r, char **body, size_t *len)
{
	struct lb_catalog	*cat;
	struct lb_store		*st;
	struct lb_lsconf	 conf;
	json_t			*names, *o;
	uint64_t		 first, next;
	FILE			*f = NULL;
	size_t			 i, n = 0;
	int			 rc;

	if ((rc = pool_catalog(r->r_env, &cat)) != 0)
		return (req_fail(r, 503, "unavailable", "no store in %s yet", r->r_env->sd_data));
	if ((names = json_array()) == NULL)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	if ((rc = lb_catalog_logspaces(cat, ls_add, names)) != 0) {
		log_warnx("%s: lb_catalog_logspaces: %s", __func__, lb_strerror(rc));
		metrics_error(r->r_env->sd_metrics, ERR_STORE, 1);
		req_fail(r, 500, "internal", "cannot list logspaces: %s", lb_strerror(rc));
		goto fail;
	}
	if ((f = open_memstream(body, len)) == NULL)
		goto nomem;
	fputs("{\"logspaces\":[", f);
	for (i = 0; i < json_array_size(names); i++) {
		const char *name = json_string_value(json_array_get(names, i));

		if ((rc = worker_store(r->r_w, name, &st)) != 0 ||
		    (rc = lb_catalog_logspace_get(cat, name, &conf)) != 0) {
			log_warnx("%s: logspace %s: %s", __func__, name, lb_strerror(rc));
			metrics_error(r->r_env->sd_metrics, ERR_STORE, 1);
			continue;
		}
		lb_store_range(st, &first, &next);
		o = json_pack("{s:s,s:I,s:I,s:I}", "name", name, "first_id", (json_int_t)first,
		    "next_id", (json_int_t)next, "messages", (json_int_t)(next - first));
		if (n++ > 0)
			fputc(',', f);
		rc = body_begin(f, o);
		json_decref(o);
		if (rc != 0)
			goto nomem;
		body_bytes(f, "delimiters", conf.delims, strnlen(conf.delims,
		    sizeof(conf.delims)));
		fputc('}', f);
	}
	fputs("]}", f);
	rc = fclose(f);
	f = NULL;
	if (rc != 0)
		goto nomem;
	json_decref(names);
	return (0);
 nomem:
	req_fail(r, 503, "unavailable", "out of memory");
 fail:
	if (f != NULL)
		fclose(f);
	free(*body);
	*body = NULL;
	json_decref(names);
	return (-1);
}

/* /metrics */
static int
do_metrics(struct req *r, char **body, size_t *len)
{
	FILE *f;

	if ((f = open_memstream(body, len)) == NULL)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	metrics_write(r->r_env, r->r_w, f);
	if (fclose(f) != 0) {
		free(*body);
		*body = NULL;
		return (req_fail(r, 503, "unavailable", "out of memory"));
	}
	return (0);
}

/* Does the work of job j on worker w and fills its answer. Never fails: errors are answers. */
void
handle_job(struct worker *w, struct job *j)
{
	struct searchd	*env = worker_env(w);
	struct req	 r;
	char		*body = NULL;
	size_t		 len = 0;
	const char	*ctype = "application/json";
	int		 rc;

	memset(&r, 0, sizeof(r));
	r.r_w = w;
	r.r_env = env;
	r.r_job = j;
	r.r_pos = -1;
	if ((rc = req_params(&r)) == 0) {
		switch (j->j_ep) {
		case EP_SEARCH:
		case EP_COUNT:
		case EP_HISTOGRAM:
		case EP_TOP:
			rc = do_query(&r, j->j_ep, &body, &len);
			break;
		case EP_MESSAGE:
			rc = do_message(&r, &body, &len);
			break;
		case EP_LOGSPACES:
			rc = do_logspaces(&r, &body, &len);
			break;
		case EP_METRICS:
			ctype = "text/plain; version=0.0.4; charset=utf-8";
			rc = do_metrics(&r, &body, &len);
			break;
		default:
			rc = req_fail(&r, 404, "not_found", "no such endpoint");
		}
	}
	if (rc == 0)
		job_answer(j, 200, ctype, body, len);
	else {
		if (r.r_status == 422 || r.r_status >= 500)
			log_info("%s %s: %d %s: %s", ep_name(j->j_ep), r.r_ls ? r.r_ls : "-",
			    r.r_status, r.r_code, r.r_msg);
		job_error(env, j, r.r_status, r.r_code, r.r_msg, r.r_pos);
	}
	req_free(&r);
}
