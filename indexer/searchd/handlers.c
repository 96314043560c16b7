/*
 * handlers.c — the work behind each endpoint, run on a worker thread, but for the query
 * endpoints' own part (query.c): reading and checking the query-string parameters (which
 * endpoint takes which, the logspace name, numbers and times), the body text and the error
 * envelope, the worker's store of a logspace, /v1/logspaces and /metrics, and the dispatch of
 * a job to its endpoint (handle_job). It owns the mapping of library errors to HTTP statuses
 * and error codes; it never touches libevent (the job comes back to the loop with a status and
 * a body).
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

#include <jansson.h>

#include "lb_util.h"
#include "req.h"

static const char *p_names[P_N] = {
	"logspace", "q", "from", "to", "limit", "order", "cursor", "total", "buckets", "field", "k",
	"highlight", "after", "upto", "time"
};
#define B(p)		(1u << (p))
#define P_QUERY		(B(P_LOGSPACE) | B(P_Q) | B(P_FROM) | B(P_TO) | B(P_AFTER) | B(P_UPTO) | \
			    B(P_TIME))

static const unsigned ep_params[EP_N] = {
	[EP_SEARCH] = P_QUERY | B(P_LIMIT) | B(P_ORDER) | B(P_CURSOR) | B(P_TOTAL) |
	    B(P_HIGHLIGHT),
	[EP_COUNT] = P_QUERY,
	[EP_HISTOGRAM] = P_QUERY | B(P_BUCKETS),
	[EP_TOP] = P_QUERY | B(P_FIELD) | B(P_K),
	[EP_MESSAGE] = B(P_LOGSPACE) | B(P_Q),
	[EP_TAIL] = B(P_LOGSPACE) | B(P_Q) | B(P_AFTER) | B(P_LIMIT),
};

#define PARAM_MAX	256		/* bytes of a decoded parameter other than q */

int
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

int
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
			if ((hi = lb_hexval((unsigned char)s[i + 1])) < 0 ||
			    (lo = lb_hexval((unsigned char)s[i + 2])) < 0) {
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
int
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

int
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

/* An optional number parameter in [lo, hi], dflt when absent. */
int
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

/* ---------------------------------------------------------------- bodies */

/* Writes the members of o (a non-empty object of plain values) without the closing brace. */
int
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
void
body_bytes(FILE *f, const char *key, const void *p, size_t len)
{
	fprintf(f, ",\"%s\":\"", key);
	lb_json_bytes(f, p, len);
	fputc('"', f);
}

void
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
int
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

/* ---------------------------------------------------------------- the other endpoints */

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
		case EP_TAIL:
			ctype = "application/x-ndjson";
			rc = do_tail(&r, &body, &len);
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
