/*
 * handlers.c — the work behind each endpoint, run on a worker thread: reading and checking the
 * query-string parameters, parsing q with the logspace's tokenizer settings, lb_search(),
 * reading the hits' messages, and writing the JSON answer (PROTOCOL.md is the contract). It
 * owns the mapping of library errors to HTTP statuses and error codes; it never touches
 * libevent (the job comes back to the loop with a status and a body).
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
	P_K, P_N
};
static const char *p_names[P_N] = {
	"logspace", "q", "from", "to", "limit", "order", "cursor", "total", "buckets", "field", "k"
};
#define B(p)		(1u << (p))
#define P_QUERY		(B(P_LOGSPACE) | B(P_Q) | B(P_FROM) | B(P_TO))

static const unsigned ep_params[EP_N] = {
	[EP_SEARCH] = P_QUERY | B(P_LIMIT) | B(P_ORDER) | B(P_CURSOR) | B(P_TOTAL),
	[EP_COUNT] = P_QUERY,
	[EP_HISTOGRAM] = P_QUERY | B(P_BUCKETS),
	[EP_TOP] = P_QUERY | B(P_FIELD) | B(P_K),
	[EP_MESSAGE] = B(P_LOGSPACE),
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

/* Reads and checks every parameter the endpoint takes; fills the defaults. */
static int
req_params(struct req *r)
{
	struct job	*j = r->r_job;
	int64_t		 now = now_real_us();
	uint64_t	 v;

	if (req_split(r, j->j_query, ep_params[j->j_ep]) != 0)
		return (-1);
	r->r_ls = r->r_val[P_LOGSPACE] != NULL ? r->r_val[P_LOGSPACE] : "main";
	if (!lb_logspace_name_ok(r->r_ls, strlen(r->r_ls), NULL))
		return (req_fail(r, 400, "bad_parameter", "logspace: '%.64s' is not a logspace "
		    "name ([a-z0-9_-]{1,64})", r->r_ls));
	if (!(ep_params[j->j_ep] & B(P_Q)))
		return (0);
	if (r->r_val[P_Q] == NULL)
		return (req_fail(r, 400, "bad_parameter", "q: missing (the query is required)"));
	/* Without from, the day before to (now - 24 h when to is now too). */
	if (req_time(r, P_TO, now, now, &r->r_to) != 0 ||
	    req_time(r, P_FROM, now, r->r_to - DAY_US, &r->r_from) != 0)
		return (-1);
	if (r->r_from > r->r_to)
		return (req_fail(r, 400, "bad_parameter", "from: after to"));

	r->r_limit = LIMIT_DEFAULT;
	if (r->r_val[P_LIMIT] != NULL) {
		if (req_uint(r, P_LIMIT, 1, LIMIT_MAX, &v) != 0)
			return (-1);
		r->r_limit = (uint32_t)v;
	}
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
	r->r_total = 1;
	if (r->r_val[P_TOTAL] != NULL) {
		if (req_uint(r, P_TOTAL, 0, 1, &v) != 0)
			return (-1);
		r->r_total = (int)v;
	}
	r->r_buckets = BUCKETS_DEFAULT;
	if (r->r_val[P_BUCKETS] != NULL) {
		if (req_uint(r, P_BUCKETS, 1, LB_HIST_MAX, &v) != 0)
			return (-1);
		r->r_buckets = (uint32_t)v;
	}
	r->r_k = TOPK_DEFAULT;
	if (r->r_val[P_K] != NULL) {
		if (req_uint(r, P_K, 1, LB_TOP_MAX, &v) != 0)
			return (-1);
		r->r_k = (uint32_t)v;
	}
	if (j->j_ep == EP_TOP) {
		static const struct { const char *name; uint8_t ns; } fields[] = {
			{ "host", LB_NS_HOST }, { "program", LB_NS_PROGRAM },
			{ "pid", LB_NS_PID }, { "msgid", LB_NS_MSGID },
			{ "facility", LB_NS_FACILITY }, { "severity", LB_NS_SEVERITY },
			{ "message", LB_NS_TEXT }, { "peer", LB_NS_PEER },
		};
		const char *f = r->r_val[P_FIELD];

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
				return (req_fail(r, 400, "bad_parameter", "field: '%.64s' is not "
				    "host, peer, program, pid, msgid, facility, severity, message or "
				    "an SD name <sd-id>.<param>", f));
			r->r_top_ns = LB_NS_SD;
		}
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

/* /v1/search, /v1/count, /v1/histogram, /v1/top */
static int
do_query(struct req *r, char **body, size_t *len)
{
	struct searchd		*env = r->r_env;
	struct job		*j = r->r_job;
	struct lb_store		*st;
	struct lb_qnode		*qn = NULL;
	struct lb_qerr		 qerr;
	struct lb_searchreq	 rq;
	struct lb_searchres	 res;
	struct lb_msg		 m;
	char			*canon = NULL, *hits = NULL;
	size_t			 canonlen = 0, hitslen = 0;
	FILE			*f = NULL, *hf = NULL;
	json_t			*o = NULL;
	int64_t			 waited;
	uint64_t		 next_cursor;
	int			 rc, ret = -1;

	memset(&res, 0, sizeof(res));
	if (req_store(r, &st) != 0)
		return (-1);
	rc = lb_query_parse(lb_store_tokconf(st), r->r_val[P_Q], r->r_len[P_Q], &qn, &qerr);
	if (rc == LB_EQUERY || rc == LB_ETOOBIG) {
		req_fail(r, 400, "bad_query", "%s", qerr.msg);
		r->r_pos = (long long)qerr.pos;
		return (-1);
	}
	if (rc != 0)
		return (req_fail(r, 503, "unavailable", "lb_query_parse: %s", lb_strerror(rc)));
	if ((rc = lb_query_fmt(lb_store_tokconf(st), qn, &canon, &canonlen)) != 0) {
		req_fail(r, 503, "unavailable", "lb_query_fmt: %s", lb_strerror(rc));
		goto done;
	}

	memset(&rq, 0, sizeof(rq));
	rq.q = qn;
	rq.from = r->r_from;
	rq.to = r->r_to;
	rq.max_terms = env->sd_max_terms;
	rq.cancel = &j->j_gone;
	if (env->sd_deadline_ms > 0) {
		waited = (now_mono_us() - j->j_start) / 1000;
		if (waited >= env->sd_deadline_ms) {
			req_fail(r, 503, "unavailable", "waited %lld ms for a worker, past the "
			    "deadline of %lld ms", (long long)waited,
			    (long long)env->sd_deadline_ms);
			goto done;
		}
		rq.deadline_ms = env->sd_deadline_ms - waited;
	}
	switch (j->j_ep) {
	case EP_SEARCH:
		rq.want = LB_WANT_HITS | (r->r_total ? LB_WANT_TOTAL : 0);
		rq.limit = r->r_limit;
		rq.order = r->r_order;
		rq.cursor = r->r_cursor;
		break;
	case EP_COUNT:
		rq.want = LB_WANT_TOTAL;
		break;
	case EP_HISTOGRAM:
		rq.want = LB_WANT_HIST | LB_WANT_TOTAL;
		rq.nbuckets = r->r_buckets;
		break;
	case EP_TOP:
		rq.want = LB_WANT_TOP | LB_WANT_TOTAL;
		rq.top_ns = r->r_top_ns;
		rq.top_sdname = r->r_top_ns == LB_NS_SD ? r->r_field : NULL;
		rq.topk = r->r_k;
		break;
	}

	rc = lb_search(st, &rq, &res);
	switch (rc) {
	case 0:
		break;
	case LB_ETOOBROAD:
		req_fail(r, 422, "too_broad", "too broad: the query's wildcards match more than "
		    "%llu terms; make them longer", (unsigned long long)(env->sd_max_terms ?
		    env->sd_max_terms : LB_MAX_TERMS));
		goto done;
	case LB_EDEADLINE:
		req_fail(r, 422, "too_broad", "deadline: the query ran past %lld ms; narrow the "
		    "query or the time range", (long long)rq.deadline_ms);
		goto done;
	case ECANCELED:
		/* Nobody reads this answer: the client went away (http_gone_cb). */
		metrics_error(env->sd_metrics, ERR_GONE, 1);
		log_debug("%s: %s: the client went away: search stopped", __func__, r->r_ls);
		req_fail(r, 503, "unavailable", "the client went away");
		goto done;
	case ENOMEM:
		req_fail(r, 503, "unavailable", "out of memory");
		goto done;
	default:
		log_warnx("%s: lb_search %s: %s", __func__, r->r_ls, lb_strerror(rc));
		/* A handle that failed may hold stale state: open a fresh one next time. */
		worker_store_drop(r->r_w, r->r_ls);
		req_fail(r, 500, "internal", "search failed: %s", lb_strerror(rc));
		goto done;
	}
	for (size_t i = 0; i < res.nwarnings; i++)
		log_warnx("%s: %s: %s", __func__, r->r_ls, res.warnings[i]);
	if (res.nwarnings > 0)
		metrics_error(env->sd_metrics, ERR_DAMAGED, res.nwarnings);

	/* The hits' messages first: took_ms covers reading them. */
	next_cursor = res.next_cursor;
	if (j->j_ep == EP_SEARCH) {
		if ((hf = open_memstream(&hits, &hitslen)) == NULL) {
			req_fail(r, 503, "unavailable", "out of memory");
			goto done;
		}
		for (size_t i = 0, n = 0; i < res.n; i++) {
			if ((rc = lb_store_get(st, res.ids[i], &m)) != 0) {
				log_warnx("%s: lb_store_get %s %llu: %s", __func__, r->r_ls,
				    (unsigned long long)res.ids[i], lb_strerror(rc));
				metrics_error(env->sd_metrics, ERR_MESSAGE, 1);
				if (req_warn(r, "message %llu skipped: %s",
				    (unsigned long long)res.ids[i], lb_strerror(rc)) != 0) {
					req_fail(r, 503, "unavailable", "out of memory");
					goto done;
				}
				continue;
			}
			if (n++ > 0)
				fputc(',', hf);
			lb_msg_json(hf, &m);
			/* Huge messages: cut the page, the client continues from here. */
			if (i + 1 < res.n && ftell(hf) > SD_HITS_BYTES_MAX) {
				next_cursor = res.ids[i];
				if (req_warn(r, "hits cut after %zu messages (a page holds at "
				    "most %d bytes): continue with next_cursor", n,
				    SD_HITS_BYTES_MAX) != 0) {
					req_fail(r, 503, "unavailable", "out of memory");
					goto done;
				}
				break;
			}
		}
		rc = fclose(hf);
		hf = NULL;
		if (rc != 0) {
			req_fail(r, 503, "unavailable", "out of memory");
			goto done;
		}
	}

	if ((f = open_memstream(body, len)) == NULL) {
		req_fail(r, 503, "unavailable", "out of memory");
		goto done;
	}
	o = json_pack("{s:s,s:I,s:I}", "logspace", r->r_ls, "from", (json_int_t)r->r_from,
	    "to", (json_int_t)r->r_to);
	if (o == NULL)
		goto nomem;
	if ((rq.want & LB_WANT_TOTAL) && json_object_set_new(o, "total",
	    json_integer((json_int_t)res.total)) != 0)
		goto nomem;
	if (j->j_ep == EP_SEARCH) {
		char cur[24];

		snprintf(cur, sizeof(cur), "%llu", (unsigned long long)next_cursor);
		if ((!r->r_total && json_object_set_new(o, "total", json_null()) != 0) ||
		    json_object_set_new(o, "next_cursor", next_cursor ? json_string(cur) :
		    json_null()) != 0)
			goto nomem;
	}
	if (j->j_ep == EP_HISTOGRAM && json_object_set_new(o, "step_us",
	    json_integer((json_int_t)res.hist_step)) != 0)
		goto nomem;
	if (json_object_set_new(o, "took_ms",
	    json_real((now_mono_us() - j->j_start) / 1000.0)) != 0 ||
	    json_object_set_new(o, "segments", json_integer((json_int_t)res.segments)) != 0 ||
	    json_object_set_new(o, "tail", json_integer((json_int_t)res.tail)) != 0)
		goto nomem;
	if (body_begin(f, o) != 0)
		goto nomem;
	body_bytes(f, "query", canon, canonlen);
	switch (j->j_ep) {
	case EP_SEARCH:
		fputs(",\"hits\":[", f);
		fwrite(hits, 1, hitslen, f);
		fputc(']', f);
		break;
	case EP_HISTOGRAM:
		fputs(",\"buckets\":[", f);
		for (uint32_t k = 0; k < res.nhist; k++)
			fprintf(f, "%s{\"from\":%lld,\"count\":%llu}", k ? "," : "",
			    (long long)(res.hist_from + (int64_t)k * res.hist_step),
			    (unsigned long long)res.hist[k]);
		fputc(']', f);
		break;
	case EP_TOP:
		body_bytes(f, "field", r->r_field, strlen(r->r_field));
		fputs(",\"values\":[", f);
		for (size_t k = 0; k < res.ntop; k++) {
			const char *name = top_value_name(r->r_top_ns, &res.top[k]);

			fputs(k ? ",{\"value\":\"" : "{\"value\":\"", f);
			if (name != NULL)
				fputs(name, f);
			else
				lb_json_bytes(f, res.top[k].value, res.top[k].len);
			fprintf(f, "\",\"count\":%llu}", (unsigned long long)res.top[k].count);
		}
		fputc(']', f);
		break;
	}
	body_warnings(f, r, &res);
	fputc('}', f);
	rc = fclose(f);
	f = NULL;
	if (rc != 0)
		goto nomem;
	ret = 0;
	goto done;
 nomem:
	req_fail(r, 503, "unavailable", "out of memory");
 done:
	if (hf != NULL)
		fclose(hf);
	if (f != NULL)
		fclose(f);
	if (ret != 0) {
		free(*body);
		*body = NULL;
	}
	json_decref(o);
	free(hits);
	free(canon);
	lb_searchres_free(&res);
	lb_query_free(qn);
	return (ret);
}

/* /v1/messages/<id> */
static int
do_message(struct req *r, char **body, size_t *len)
{
	const char	*s = r->r_job->j_path + strlen("/v1/messages/");
	struct lb_store	*st;
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
	if (req_store(r, &st) != 0)
		return (-1);
	if ((rc = lb_store_get(st, id, &m)) == LB_ENOTFOUND)
		return (req_fail(r, 404, "not_found", "no message %llu in logspace '%s'",
		    (unsigned long long)id, r->r_ls));
	if (rc != 0) {
		log_warnx("%s: lb_store_get %s %llu: %s", __func__, r->r_ls,
		    (unsigned long long)id, lb_strerror(rc));
		metrics_error(r->r_env->sd_metrics, ERR_MESSAGE, 1);
		worker_store_drop(r->r_w, r->r_ls);
		return (req_fail(r, 500, "internal", "message %llu cannot be read: %s",
		    (unsigned long long)id, lb_strerror(rc)));
	}
	if ((f = open_memstream(body, len)) == NULL)
		return (req_fail(r, 503, "unavailable", "out of memory"));
	lb_msg_json(f, &m);
	if (fclose(f) != 0) {
		free(*body);
		*body = NULL;
		return (req_fail(r, 503, "unavailable", "out of memory"));
	}
	return (0);
 badid:
	return (req_fail(r, 400, "bad_parameter", "id: expected a message id 1..%llu, got "
	    "'%.64s'", (unsigned long long)UINT64_MAX, s));
}

static int
ls_add(void *arg, const char *name)
{
	return (json_array_append_new(arg, json_string(name)) != 0 ? ENOMEM : 0);
}

/* /v1/logspaces */
static int
do_logspaces(struct req *r, char **body, size_t *len)
{
	struct lb_catalog	*cat;
	struct lb_store		*st;
	json_t			*names, *out = NULL, *list, *o;
	uint64_t		 first, next;
	size_t			 i;
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
	if ((out = json_object()) == NULL || (list = json_array()) == NULL ||
	    json_object_set_new(out, "logspaces", list) != 0)
		goto nomem;
	for (i = 0; i < json_array_size(names); i++) {
		const char *name = json_string_value(json_array_get(names, i));

		if ((rc = worker_store(r->r_w, name, &st)) != 0) {
			log_warnx("%s: lb_store_open_reader %s: %s", __func__, name,
			    lb_strerror(rc));
			metrics_error(r->r_env->sd_metrics, ERR_STORE, 1);
			continue;
		}
		lb_store_range(st, &first, &next);
		o = json_pack("{s:s,s:I,s:I,s:I}", "name", name, "first_id", (json_int_t)first,
		    "next_id", (json_int_t)next, "messages", (json_int_t)(next - first));
		if (o == NULL || json_array_append_new(list, o) != 0)
			goto nomem;
	}
	if ((*body = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL)
		goto nomem;
	*len = strlen(*body);
	json_decref(names);
	json_decref(out);
	return (0);
 nomem:
	req_fail(r, 503, "unavailable", "out of memory");
 fail:
	json_decref(names);
	json_decref(out);
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
			rc = do_query(&r, &body, &len);
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
