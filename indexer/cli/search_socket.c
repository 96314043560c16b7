/*
 * search_socket.c — `logbox search --socket`: the search through logbox-searchd on its unix
 * socket (PROTOCOL.md). It owns the request (one GET, with libcurl) and reading the answer (with
 * jansson); the output is search.c's, so both transports print the same bytes for the same
 * store and query: searchd's hits are lb_msg_json() objects, copied through untouched for
 * --json, and every other value is decoded to bytes and printed by search.c's functions.
 * jansson refuses the lone surrogates (\udcXX) that stand for bytes that are not UTF-8, so the
 * body is rewritten for it first (sj_rewrite) and its strings are turned back into bytes
 * (sj_bytes).
 */
#include <sys/un.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "logbox.h"
#include "search_int.h"

#define IO_TIMEOUT_S	300		/* a searchd that says nothing for this long is an error */

/*
 * searchd's strings carry bytes (PROTOCOL.md): a byte that is not UTF-8 arrives as a lone
 * surrogate \udcXX, which jansson refuses, and NUL as \u0000, which it takes only with
 * JSON_ALLOW_NUL. So before jansson reads the body, every \udcXX becomes \u0000\u00XX and every
 * \u0000 becomes \u0000\u0000: a NUL in a decoded string is then an escape only this rewrite
 * writes, and sj_bytes() undoes it. A backslash stands in JSON text only inside strings, so
 * the rewrite needs no parser.
 */
static int
sj_rewrite(const uint8_t *p, size_t len, struct buf *out)
{
	char		 hex[5];
	unsigned long	 v;
	int		 rc = 0;

	for (size_t i = 0; i < len && rc == 0; i++) {
		if (p[i] != '\\' || i + 1 >= len) {
			rc = buf_add(out, p + i, 1);
			continue;
		}
		if (p[i + 1] != 'u' || len - i < 6 || !isxdigit(p[i + 2]) || !isxdigit(p[i + 3]) ||
		    !isxdigit(p[i + 4]) || !isxdigit(p[i + 5])) {
			rc = buf_add(out, p + i, 2);	/* (jansson judges the rest) */
			i++;
			continue;
		}
		memcpy(hex, p + i + 2, 4);
		hex[4] = '\0';
		v = strtoul(hex, NULL, 16);
		if (v == 0)
			rc = buf_str(out, "\\u0000\\u0000");
		else if (v >= 0xdc80 && v <= 0xdcff) {
			if ((rc = buf_str(out, "\\u0000\\u00")) == 0)
				rc = buf_add(out, p + i + 4, 2);
		} else
			rc = buf_add(out, p + i, 6);
		i += 5;
	}
	return (rc);
}

/* The bytes of string s (appended to out), sj_rewrite() undone. Returns 0 or -1. */
static int
sj_bytes(const json_t *s, struct buf *out)
{
	const uint8_t	*p = (const uint8_t *)json_string_value(s);
	size_t		 n = json_string_length(s);
	uint8_t		 c;

	if (p == NULL)
		return (-1);
	for (size_t i = 0; i < n; i++) {
		c = p[i];
		if (c == 0) {
			/* NUL NUL is a NUL; NUL and U+0080..U+00FF (C2/C3 xx) is that byte. */
			if (i + 1 < n && p[i + 1] == 0)
				i++;
			else if (i + 2 < n && (p[i + 1] == 0xc2 || p[i + 1] == 0xc3)) {
				c = (uint8_t)((p[i + 1] & 0x03) << 6 | (p[i + 2] & 0x3f));
				i += 2;
			} else
				return (-1);
		}
		if (buf_add(out, &c, 1) != 0)
			return (-1);
	}
	return (0);
}

/* The string member key of obj as bytes into b (emptied first). Returns 0 or -1. */
static int
sj_str(const json_t *obj, const char *key, struct buf *b)
{
	b->len = 0;
	return (sj_bytes(json_object_get(obj, key), b));
}

/* An integer member (a JSON number, or a string of digits as next_cursor is). */
static int
sj_int(const json_t *obj, const char *key, int64_t *out)
{
	const json_t	*v = json_object_get(obj, key);
	const char	*s;
	char		*end;

	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return (0);
	}
	if ((s = json_string_value(v)) == NULL || *s < '0' || *s > '9')
		return (-1);
	errno = 0;
	*out = (int64_t)strtoll(s, &end, 10);
	return (errno != 0 || *end != '\0' ? -1 : 0);
}

/*
 * The objects of the "hits" array in searchd's body text: --json copies them (lb_msg_json()'s
 * bytes) through untouched, and jansson keeps no positions, so these find them, braces counted
 * outside strings. hits_start() gives the array's '[' (the key "hits" cannot stand inside a
 * string: a quote there is escaped). hit_next() takes *p at the '[' or just past the object
 * before; it returns 1 and the object's span, 0 at the end of the array, -1 when the text is
 * not what searchd writes.
 */
static const char *
hits_start(const char *p, const char *e)
{
	static const char	 key[] = "\"hits\":[";
	const char		*k = memmem(p, (size_t)(e - p), key, sizeof(key) - 1);

	return (k == NULL ? NULL : k + sizeof(key) - 2);
}

static int
hit_next(const char **p, const char *e, const char **start, size_t *len)
{
	const char	*q = *p;
	int		 depth = 0;

	if (q == NULL || q >= e || (*q != '[' && *q != ',' && *q != ']'))
		return (-1);
	if (*q == ']' || (*q == '[' && q + 1 < e && q[1] == ']'))
		return (0);
	if (++q >= e || *q != '{')
		return (-1);
	*start = q;
	for (; q < e; q++) {
		if (*q == '"') {
			for (q++; q < e && *q != '"'; q++)
				if (*q == '\\')
					q++;
		} else if (*q == '{')
			depth++;
		else if (*q == '}' && --depth == 0) {
			*len = (size_t)(q + 1 - *start);
			*p = q + 1;
			return (1);
		}
	}
	return (-1);
}

/* Collects the body libcurl reads. */
static size_t
curl_body(char *p, size_t size, size_t n, void *arg)
{
	return (buf_add(arg, p, size * n) == 0 ? size * n : 0);
}

/*
 * GET url (NUL-terminated) with handle c from the searchd listening on sock. On success
 * *status is the HTTP status and body holds the body. On failure prints why and returns 1.
 */
static int
http_get(CURL *c, const char *sock, const struct buf *url, long *status, struct buf *body)
{
	CURLcode	 cc;
	char		 err[CURL_ERROR_SIZE] = "";

	if (strlen(sock) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
		errmsg("%s: socket path too long", sock);
		return (1);
	}
	/* Plain HTTP on the unix socket alone: no proxy from the environment, no other scheme. */
	if (curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_URL, (const char *)url->p) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_USERAGENT, "logbox/" LB_VERSION) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_body) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_WRITEDATA, body) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)IO_TIMEOUT_S) != CURLE_OK) {
		errmsg("libcurl: cannot set the request up");
		return (1);
	}
	if ((cc = curl_easy_perform(c)) != CURLE_OK) {
		if (cc == CURLE_COULDNT_CONNECT)
			errmsg("searchd unavailable at %s: %s", sock,
			    err[0] ? err : curl_easy_strerror(cc));
		else
			errmsg("searchd at %s: %s", sock, err[0] ? err : curl_easy_strerror(cc));
		return (1);
	}
	if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status) != CURLE_OK) {
		errmsg("searchd at %s: not an HTTP response", sock);
		return (1);
	}
	return (0);
}

/* Appends "&key=value" (the first "?key=value") to url, value percent-encoded. */
static int
url_add(CURL *c, struct buf *url, const char *key, const char *val, size_t len)
{
	char	*e;
	int	 rc;

	if ((e = curl_easy_escape(c, val, (int)len)) == NULL)
		return (ENOMEM);
	if ((rc = buf_str(url, memchr(url->p, '?', url->len) ? "&" : "?")) == 0 &&
	    (rc = buf_str(url, key)) == 0 && (rc = buf_str(url, "=")) == 0)
		rc = buf_str(url, e);
	curl_free(e);
	return (rc);
}

static int
url_num(CURL *c, struct buf *url, const char *key, int64_t v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%" PRId64, v);
	return (url_add(c, url, key, tmp, strlen(tmp)));
}

/* The URL of o's request (c escapes the values), NUL-terminated. */
static int
request_url(CURL *c, const struct sopts *o, struct buf *url)
{
	const char	*path;
	int		 rc;

	switch (o->what) {
	case W_HITS: path = "/v1/search"; break;
	case W_COUNT: path = "/v1/count"; break;
	case W_HIST: path = "/v1/histogram"; break;
	default: path = "/v1/top"; break;
	}
	rc = buf_str(url, "http://localhost");
	if (rc == 0)
		rc = buf_str(url, path);
	if (rc == 0)
		rc = url_add(c, url, "logspace", o->ls, strlen(o->ls));
	if (rc == 0)
		rc = url_add(c, url, "q", o->query, o->qlen);
	if (rc == 0)
		rc = url_num(c, url, "from", o->from / 1000000);
	if (rc == 0)
		rc = url_num(c, url, "to", o->to / 1000000);
	if (rc == 0 && o->time == LB_TIME_EVENT)
		rc = url_add(c, url, "time", "event", 5);
	if (rc == 0 && o->what == W_HITS) {
		rc = url_num(c, url, "limit", o->limit);
		if (rc == 0)
			rc = url_add(c, url, "order", o->order == LB_ORDER_OLDEST ? "oldest" :
			    "newest", 6);
		if (rc == 0 && o->cursor != 0)
			rc = url_num(c, url, "cursor", (int64_t)o->cursor);
	}
	if (rc == 0 && o->what == W_HIST)
		rc = url_num(c, url, "buckets", o->nbuckets);
	if (rc == 0 && o->what == W_TOP) {
		rc = url_add(c, url, "field", o->top_field, strlen(o->top_field));
		if (rc == 0)
			rc = url_num(c, url, "k", o->limit);
	}
	if (rc == 0)
		rc = buf_add(url, "", 1);
	return (rc);
}

/* Prints searchd's error body; returns the exit status. */
static int
searchd_error(const struct sopts *o, long status, const json_t *body)
{
	const json_t	*err = json_object_get(body, "error");
	struct buf	 c = { 0 }, m = { 0 };
	int64_t		 pos;
	int		 rc = 1;

	if (sj_str(err, "code", &c) != 0 || sj_str(err, "message", &m) != 0 ||
	    buf_add(&c, "", 1) != 0 || buf_add(&m, "", 1) != 0) {
		errmsg("searchd at %s: HTTP status %ld", o->sock, status);
		goto done;
	}
	if (strcmp((char *)c.p, "bad_query") == 0 && sj_int(err, "position", &pos) == 0 &&
	    pos >= 0)
		rc = print_bad_query(o, (size_t)pos, (char *)m.p);
	else if (strcmp((char *)c.p, "too_broad") == 0)
		errmsg("query too broad: %s", (char *)m.p);
	else if (strcmp((char *)c.p, "unavailable") == 0)
		errmsg("searchd unavailable at %s: %s", o->sock, (char *)m.p);
	else
		errmsg("searchd: %s: %s", (char *)c.p, (char *)m.p);
 done:
	buf_free(&c);
	buf_free(&m);
	return (rc);
}

/* The hits of searchd's answer root, printed; body is its text (for --json). */
static int
print_hits(const struct sopts *o, const json_t *root, const struct buf *body, size_t *n)
{
	const json_t	*arr = json_object_get(root, "hits"), *hit;
	const char	*e = (const char *)body->p + body->len, *p, *start = NULL;
	struct buf	 tmp[4];
	struct lb_slice	 s[4];
	static const char *const keys[4] = { "host", "program", "pid", "message" };
	int64_t		 received;
	size_t		 i, len = 0;
	int		 rc = -1;

	if (!json_is_array(arr))
		return (-1);
	p = hits_start((const char *)body->p, e);
	memset(tmp, 0, sizeof(tmp));
	json_array_foreach(arr, i, hit) {
		if (o->json) {
			if (hit_next(&p, e, &start, &len) != 1)
				goto done;
			fwrite(start, 1, len, stdout);
			putchar('\n');
			continue;
		}
		if (sj_int(hit, "received_us", &received) != 0)
			goto done;
		for (int k = 0; k < 4; k++) {
			if (sj_str(hit, keys[k], &tmp[k]) != 0)
				goto done;
			s[k].p = tmp[k].p;
			s[k].len = tmp[k].len;
		}
		print_hit(stdout, received, s[0], s[1], s[2], s[3]);
	}
	if (o->json && hit_next(&p, e, &start, &len) != 0)
		goto done;
	*n = json_array_size(arr);
	rc = 0;
 done:
	for (int k = 0; k < 4; k++)
		buf_free(&tmp[k]);
	return (rc);
}

int
run_socket(const struct sopts *o)
{
	struct buf	 url = { 0 }, body = { 0 }, text = { 0 }, val = { 0 };
	CURL		*c = NULL;
	json_t		*root = NULL;
	const json_t	*arr, *el;
	json_error_t	 jerr;
	int64_t		 total = 0, next = 0, n64;
	size_t		 n = 0, i;
	long		 status;
	int		 res = 1;

	/* A query over the size limit never leaves: the same error as in process. */
	if (o->qlen > LB_QUERY_MAX) {
		struct lb_tokconf	 tc;
		struct lb_qnode		*q = NULL;
		struct lb_qerr		 qe;
		int			 rc;

		lb_tokconf_default(&tc);
		memset(&qe, 0, sizeof(qe));
		rc = lb_query_parse(&tc, o->query, o->qlen, &q, &qe);
		lb_query_free(q);
		if (rc == LB_EQUERY || rc == LB_ETOOBIG)
			return (print_bad_query(o, qe.pos, qe.msg));
	}
	if (curl_global_init(CURL_GLOBAL_NOTHING) != 0 || (c = curl_easy_init()) == NULL) {
		errmsg("libcurl: cannot start");
		goto done;
	}
	if (request_url(c, o, &url) != 0) {
		errmsg("out of memory");
		goto done;
	}
	if (http_get(c, o->sock, &url, &status, &body) != 0)
		goto done;
	if (sj_rewrite(body.p, body.len, &text) != 0) {
		errmsg("out of memory");
		goto done;
	}
	if ((root = json_loadb((const char *)text.p, text.len, JSON_ALLOW_NUL, &jerr)) == NULL ||
	    !json_is_object(root)) {
		if (status != 200)
			errmsg("searchd at %s: HTTP status %ld", o->sock, status);
		else
			goto bad;
		goto done;
	}
	if (status != 200) {
		res = searchd_error(o, status, root);
		goto done;
	}
	json_array_foreach(json_object_get(root, "warnings"), i, el) {
		val.len = 0;
		if (sj_bytes(el, &val) == 0) {
			fputs("logbox: warning: ", stderr);
			put_text(stderr, val.p, val.len);
			fputc('\n', stderr);
		}
	}
	switch (o->what) {
	case W_HITS:
		/* next_cursor: null on the last page, else a string of digits */
		if (sj_int(root, "total", &total) != 0 ||
		    (!json_is_null(json_object_get(root, "next_cursor")) &&
		    sj_int(root, "next_cursor", &next) != 0) ||
		    print_hits(o, root, &body, &n) != 0)
			goto bad;
		break;
	case W_COUNT:
		if (sj_int(root, "total", &total) != 0)
			goto bad;
		printf("%" PRId64 "\n", total);
		break;
	case W_HIST:
		if (!json_is_array(arr = json_object_get(root, "buckets")))
			goto bad;
		json_array_foreach(arr, i, el) {
			if (sj_int(el, "from", &n64) != 0 || sj_int(el, "count", &total) != 0)
				goto bad;
			print_bucket(o, n64, (uint64_t)total);
		}
		break;
	case W_TOP:
		if (!json_is_array(arr = json_object_get(root, "values")))
			goto bad;
		json_array_foreach(arr, i, el) {
			if (sj_str(el, "value", &val) != 0 || sj_int(el, "count", &total) != 0)
				goto bad;
			print_top(o, val.p, val.len, (uint64_t)total);
		}
		break;
	}
	if ((res = flush_stdout()) != 0)
		goto done;
	if (o->what == W_HITS)
		print_summary(n, (uint64_t)total, (uint64_t)next);
	res = 0;
	goto done;
 bad:
	fflush(stdout);
	errmsg("searchd at %s: an answer logbox does not understand", o->sock);
	res = 1;
 done:
	curl_easy_cleanup(c);
	json_decref(root);
	buf_free(&val);
	buf_free(&text);
	buf_free(&url);
	buf_free(&body);
	return (res);
}
