/*
 * search.c — `logbox search`: runs one query over a logspace, either in this process on a data
 * directory (--data: lb_store_open, lb_query_parse, lb_search, lb_store_get) or through
 * logbox-searchd on its unix socket (--socket: HTTP/1.1 and JSON, PROTOCOL.md), and prints
 * hits, a count, a histogram or the top values of a field. It owns the command line, the two
 * transports and the output formats; what matches is liblogbox's business alone.
 *
 * The one idea: both transports print the same bytes for the same store and query. The CLI
 * settles every input itself (times are parsed here and sent as whole seconds, the range the
 * search would round them to anyway; --top fields are checked here), the --data path prints
 * hits with lb_msg_json() and searchd's hits are lb_msg_json() objects that are copied through
 * untouched, and every other value is decoded to bytes and printed by the same functions.
 * libcurl speaks HTTP on the unix socket and jansson reads the answers; jansson refuses the
 * lone surrogates (\udcXX) that stand for bytes that are not UTF-8, so the body is rewritten
 * for it first (sj_rewrite) and its strings are turned back into bytes (sj_bytes).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "logbox.h"
#include "search.h"

#define DAY_US		(86400LL * 1000000)
#define HITS_DEFAULT	100		/* --limit for hits */
#define HITS_MAX	10000		/* the most hits one page may ask for (searchd's limit) */
#define TOP_DEFAULT	10		/* --limit for --top */
#define IO_TIMEOUT_S	300		/* a searchd that says nothing for this long is an error */
#define CARET_WIDTH	72		/* query bytes shown around the position of an error */

const char search_usage[] =
    "       logbox search  [--data DIR | --socket PATH] [--logspace L] [--from T] [--to T]\n"
    "                      [--limit N] [--order newest|oldest] [--cursor ID] [--count]\n"
    "                      [--histogram N] [--top FIELD] [--json] QUERY\n";

enum what { W_HITS, W_COUNT, W_HIST, W_TOP };

struct sopts {
	const char	*data;		/* --data DIR */
	const char	*sock;		/* --socket PATH */
	const char	*ls;		/* --logspace, default main */
	const char	*top;		/* --top FIELD as given */
	char		*query;		/* the arguments joined by spaces (malloc'ed) */
	size_t		 qlen;
	int64_t		 from, to;	/* µs, already rounded to whole seconds */
	uint64_t	 cursor;	/* --cursor ID, 0 for none */
	uint32_t	 limit;		/* hits per page, or K for --top */
	uint32_t	 nbuckets;	/* --histogram N */
	int		 order;		/* LB_ORDER_* */
	int		 json;		/* --json */
	enum what	 what;
	uint8_t		 top_ns;	/* LB_NS_* of --top */
	const char	*top_field;	/* the canonical field name sent to searchd */
};

struct buf {
	uint8_t		*p;
	size_t		 len;
	size_t		 cap;
};

static void
errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "logbox: ..." and a newline on stderr. */
static void
errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_verr(fmt, ap);
	va_end(ap);
}

static const char usage_text[] =
    "usage: logbox search [--data DIR | --socket PATH] [--logspace L] [--from T] [--to T]\n"
    "                     [--limit N] [--order newest|oldest] [--cursor ID] [--count]\n"
    "                     [--histogram N] [--top FIELD] [--json] QUERY\n";

static int
search_usage_exit(void)
{
	fputs(usage_text, stderr);
	return (2);
}

/* ---------------------------------------------------------------- buffers */

static int
buf_add(struct buf *b, const void *p, size_t n)
{
	if (n > b->cap - b->len) {
		size_t	 cap = b->cap ? b->cap : 4096;
		uint8_t	*np;

		while (cap - b->len < n) {
			if (cap > SIZE_MAX / 2)
				return (ENOMEM);
			cap *= 2;
		}
		if ((np = realloc(b->p, cap)) == NULL)
			return (ENOMEM);
		b->p = np;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return (0);
}

static int
buf_str(struct buf *b, const char *s)
{
	return (buf_add(b, s, strlen(s)));
}

static void
buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---------------------------------------------------------------- output */

/* The length of the valid UTF-8 sequence at p[0..len), or 0 (the rule of lb_json_bytes). */
static size_t
utf8_seq(const uint8_t *p, size_t len)
{
	uint8_t	c = p[0];
	size_t	n = 0;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	if (n == 0 || n > len)
		return (0);
	for (size_t k = 1; k < n; k++)
		if ((p[k] & 0xc0) != 0x80)
			return (0);
	if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
		return (0);
	if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
		return (0);
	return (n);
}

/*
 * Writes bytes for a human: printable ASCII and valid UTF-8 as they are, a backslash as "\\",
 * tab, newline and carriage return as \t \n \r, every other byte as \xNN.
 */
static void
put_text(FILE *f, const uint8_t *p, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		uint8_t c = p[i];

		if (c >= 0x80) {
			if ((n = utf8_seq(p + i, len - i)) > 0) {
				fwrite(p + i, 1, n, f);
				i += n;
			} else
				fprintf(f, "\\x%02x", p[i++]);
			continue;
		}
		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
		i++;
	}
}

/* One hit for a human: "<received> <host> <program>[<pid>]: <message>". */
static void
print_hit(FILE *f, int64_t received, struct lb_slice host, struct lb_slice program,
    struct lb_slice pid, struct lb_slice message)
{
	char t[64];

	lb_time_fmt(t, sizeof(t), received, 0);
	fprintf(f, "%s ", t);
	if (host.len > 0)
		put_text(f, host.p, host.len);
	else
		fputc('-', f);
	fputc(' ', f);
	if (program.len > 0)
		put_text(f, program.p, program.len);
	else
		fputc('-', f);
	if (pid.len > 0) {
		fputc('[', f);
		put_text(f, pid.p, pid.len);
		fputc(']', f);
	}
	fputs(": ", f);
	put_text(f, message.p, message.len);
	fputc('\n', f);
}

static void
print_bucket(const struct sopts *o, int64_t from, uint64_t count)
{
	char t[64];

	lb_time_fmt(t, sizeof(t), from, 0);
	if (o->json)
		printf("{\"from\":\"%s\",\"from_us\":%" PRId64 ",\"count\":%" PRIu64 "}\n", t,
		    from, count);
	else
		printf("%s %" PRIu64 "\n", t, count);
}

static void
print_top(const struct sopts *o, const uint8_t *v, size_t len, uint64_t count)
{
	if (o->json) {
		fputs("{\"value\":\"", stdout);
		lb_json_bytes(stdout, v, len);
		printf("\",\"count\":%" PRIu64 "}\n", count);
	} else {
		printf("%" PRIu64 " ", count);
		put_text(stdout, v, len);
		putchar('\n');
	}
}

static void
print_summary(size_t n, uint64_t total, uint64_t next)
{
	fprintf(stderr, "%zu of %" PRIu64 " matches", n, total);
	if (next != 0)
		fprintf(stderr, "; next page: --cursor %" PRIu64, next);
	fputc('\n', stderr);
}

/*
 * "logbox: bad query at <pos>: <msg>", then the query (a window of it around pos when it is
 * long; control bytes shown as '.') and a caret under the byte at pos.
 */
static int
print_bad_query(const struct sopts *o, size_t pos, const char *msg)
{
	const uint8_t	*q = (const uint8_t *)o->query;
	size_t		 a = 0, b = o->qlen, col = 0;

	errmsg("bad query at %zu: %s", pos, msg);
	if (pos > o->qlen)
		pos = o->qlen;
	if (b - a > CARET_WIDTH) {
		a = pos > CARET_WIDTH / 2 ? pos - CARET_WIDTH / 2 : 0;
		b = a + CARET_WIDTH < o->qlen ? a + CARET_WIDTH : o->qlen;
	}
	fputs(a > 0 ? "  ..." : "  ", stderr);
	for (size_t i = a; i < b; i++)
		fputc(q[i] < 0x20 || q[i] == 0x7f ? '.' : q[i], stderr);
	fputs(b < o->qlen ? "...\n" : "\n", stderr);
	/* One column per character: UTF-8 continuation bytes take none. */
	for (size_t i = a; i < pos; i++)
		if ((q[i] & 0xc0) != 0x80)
			col++;
	fprintf(stderr, "  %*s^\n", (int)(col + (a > 0 ? 3 : 0)), "");
	return (2);
}

static int
flush_stdout(void)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		errmsg("writing the results: %s", strerror(errno ? errno : EIO));
		return (1);
	}
	return (0);
}

/* ---------------------------------------------------------------- options */

/* The field --top names: LB_NS_* and the name searchd takes, or -1 when it is unknown. */
static int
top_field(struct sopts *o, const char *f)
{
	static const struct { const char *name; uint8_t ns; } fields[] = {
		{ "host", LB_NS_HOST }, { "program", LB_NS_PROGRAM }, { "pid", LB_NS_PID },
		{ "msgid", LB_NS_MSGID }, { "facility", LB_NS_FACILITY },
		{ "severity", LB_NS_SEVERITY }, { "message", LB_NS_TEXT }, { "peer", LB_NS_PEER },
	};
	const char *dot;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (strcasecmp(f, fields[i].name) == 0) {
			o->top_ns = fields[i].ns;
			o->top_field = fields[i].name;
			return (0);
		}
	}
	/* A structured-data name "<sd-id>.<param>" as the query language knows them. */
	if ((dot = strchr(f, '.')) != NULL && dot > f && dot[1] != '\0' &&
	    (memchr(f, '@', (size_t)(dot - f)) != NULL ||
	    (dot - f == 11 && strncmp(f, "timeQuality", 11) == 0) ||
	    (dot - f == 6 && strncmp(f, "origin", 6) == 0) ||
	    (dot - f == 4 && strncmp(f, "meta", 4) == 0))) {
		o->top_ns = LB_NS_SD;
		o->top_field = f;
		return (0);
	}
	return (-1);
}

static int
parse_count(const char *s, const char *what, uint64_t max, uint64_t *out)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || !isdigit((unsigned char)s[0]) || v > max) {
		errmsg("%s: expected a number up to %" PRIu64 ", not '%s'", what, max, s);
		return (-1);
	}
	*out = v;
	return (0);
}

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

static int64_t
floor_s(int64_t us)
{
	int64_t s = us / 1000000;

	if (us % 1000000 < 0)
		s--;
	return (s * 1000000);
}

static int64_t
ceil_s(int64_t us)
{
	int64_t f = floor_s(us);

	return (f == us ? f : f + 1000000);
}

/*
 * Fills o from the command line. Returns 0, or the exit status for a usage error (2) or a
 * value that is wrong (1), the message printed.
 */
static int
parse_search_opts(int argc, char *argv[], struct sopts *o)
{
	static const struct option longopts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 'S' },
		{ "logspace", required_argument, NULL, 'l' },
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'n' },
		{ "order", required_argument, NULL, 'o' },
		{ "cursor", required_argument, NULL, 'c' },
		{ "count", no_argument, NULL, 'C' },
		{ "histogram", required_argument, NULL, 'H' },
		{ "top", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*from = NULL, *to = NULL, *limit = NULL;
	uint64_t	 v;
	int64_t		 now = now_us();
	int		 c, nwhat = 0;
	size_t		 len = 0;

	memset(o, 0, sizeof(*o));
	o->ls = "main";
	o->order = LB_ORDER_NEWEST;
	o->what = W_HITS;
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:l:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': o->data = optarg; break;
		case 'S': o->sock = optarg; break;
		case 'l': o->ls = optarg; break;
		case 'f': from = optarg; break;
		case 't': to = optarg; break;
		case 'n': limit = optarg; break;
		case 'o':
			if (strcmp(optarg, "newest") == 0)
				o->order = LB_ORDER_NEWEST;
			else if (strcmp(optarg, "oldest") == 0)
				o->order = LB_ORDER_OLDEST;
			else {
				errmsg("--order: newest or oldest, not '%s'", optarg);
				return (2);
			}
			break;
		case 'c':
			if (parse_count(optarg, "--cursor", UINT64_MAX, &o->cursor) != 0)
				return (2);
			break;
		case 'C': o->what = W_COUNT; nwhat++; break;
		case 'H':
			if (parse_count(optarg, "--histogram", LB_HIST_MAX, &v) != 0)
				return (2);
			if (v == 0) {
				errmsg("--histogram: 1 to %d buckets", LB_HIST_MAX);
				return (2);
			}
			o->nbuckets = (uint32_t)v;
			o->what = W_HIST;
			nwhat++;
			break;
		case 'T': o->top = optarg; o->what = W_TOP; nwhat++; break;
		case 'j': o->json = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		default:
			return (search_usage_exit());
		}
	}
	if (optind >= argc || nwhat > 1 || (o->data == NULL) == (o->sock == NULL)) {
		if (nwhat > 1)
			errmsg("search: --count, --histogram and --top exclude each other");
		else if (o->data != NULL && o->sock != NULL)
			errmsg("search: --data or --socket, not both");
		else if (optind < argc)
			errmsg("search: --data DIR or --socket PATH is required");
		return (search_usage_exit());
	}
	if (o->what == W_TOP && top_field(o, o->top) != 0) {
		errmsg("--top: unknown field '%s' (host, peer, program, pid, msgid, facility, "
		    "severity, message or an SD name like exampleSDID@32473.iut)", o->top);
		return (1);
	}
	if (limit != NULL) {
		uint64_t max = o->what == W_TOP ? LB_TOP_MAX : HITS_MAX;

		if (parse_count(limit, "--limit", max, &v) != 0)
			return (2);
		if (v == 0) {
			errmsg("--limit: 1 to %" PRIu64, max);
			return (2);
		}
		o->limit = (uint32_t)v;
	} else
		o->limit = o->what == W_TOP ? TOP_DEFAULT : HITS_DEFAULT;

	/*
	 * Times: to defaults to now, from to 24 hours before to (rounded up to a second first, so
	 * that the default range is exactly 24 hours and histogram steps come out round).
	 */
	o->to = now;
	if (to != NULL && lb_time_parse(to, now, &o->to) != 0) {
		errmsg("--to: not a time: '%s' (RFC 3339, -15m, -2h, -1d, now, or epoch seconds)",
		    to);
		return (1);
	}
	o->from = ceil_s(o->to) - DAY_US;
	if (from != NULL && lb_time_parse(from, now, &o->from) != 0) {
		errmsg("--from: not a time: '%s' (RFC 3339, -15m, -2h, -1d, now, or epoch "
		    "seconds)", from);
		return (1);
	}
	if (o->from > o->to) {
		errmsg("inverted time range: --from is after --to");
		return (1);
	}
	o->from = floor_s(o->from);
	o->to = ceil_s(o->to);

	/* The query: the remaining arguments joined by single spaces. */
	for (int i = optind; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if ((o->query = malloc(len)) == NULL) {
		errmsg("out of memory");
		return (1);
	}
	o->qlen = 0;
	for (int i = optind; i < argc; i++) {
		size_t n = strlen(argv[i]);

		if (i > optind)
			o->query[o->qlen++] = ' ';
		memcpy(o->query + o->qlen, argv[i], n);
		o->qlen += n;
	}
	o->query[o->qlen] = '\0';
	return (0);
}

/* ---------------------------------------------------------------- in process (--data) */

static int
search_failed(int rc)
{
	if (rc == LB_ETOOBROAD)
		errmsg("query too broad: %s; narrow the wildcards or the time range",
		    lb_strerror(rc));
	else if (rc == LB_EDEADLINE)
		errmsg("query too broad: %s; narrow the query or the time range", lb_strerror(rc));
	else
		errmsg("search: %s", lb_strerror(rc));
	return (1);
}

static int
run_data(const struct sopts *o)
{
	struct lb_store		*st = NULL;
	struct lb_qnode		*q = NULL;
	struct lb_qerr		 qe;
	struct lb_searchreq	 rq;
	struct lb_searchres	 res;
	struct lb_msg		 m;
	int			 rc, status = 1;

	memset(&res, 0, sizeof(res));
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
	memset(&rq, 0, sizeof(rq));
	rq.q = q;
	rq.from = o->from;
	rq.to = o->to;
	rq.order = o->order;
	rq.cursor = o->cursor;
	switch (o->what) {
	case W_HITS:
		rq.want = LB_WANT_HITS | LB_WANT_TOTAL;
		rq.limit = o->limit;
		break;
	case W_COUNT:
		rq.want = LB_WANT_TOTAL;
		break;
	case W_HIST:
		rq.want = LB_WANT_HIST;
		rq.nbuckets = o->nbuckets;
		break;
	case W_TOP:
		rq.want = LB_WANT_TOP;
		rq.top_ns = o->top_ns;
		rq.top_sdname = o->top_ns == LB_NS_SD ? o->top_field : NULL;
		rq.topk = o->limit;
		break;
	}
	if ((rc = lb_search(st, &rq, &res)) != 0) {
		status = search_failed(rc);
		goto done;
	}
	for (size_t i = 0; i < res.nwarnings; i++)
		errmsg("warning: %s", res.warnings[i]);
	switch (o->what) {
	case W_HITS:
		for (size_t i = 0; i < res.n; i++) {
			if ((rc = lb_store_get(st, res.ids[i], &m)) != 0) {
				fflush(stdout);
				errmsg("message %" PRIu64 ": %s", res.ids[i], lb_strerror(rc));
				goto done;
			}
			if (o->json) {
				lb_msg_json(stdout, &m);
				putchar('\n');
			} else
				print_hit(stdout, m.received, m.host, m.program, m.pid, m.message);
		}
		break;
	case W_COUNT:
		printf("%" PRIu64 "\n", res.total);
		break;
	case W_HIST:
		for (uint32_t k = 0; k < res.nhist; k++)
			print_bucket(o, res.hist_from + (int64_t)k * res.hist_step, res.hist[k]);
		break;
	case W_TOP:
		for (size_t i = 0; i < res.ntop; i++) {
			const struct lb_topval	*tv = &res.top[i];
			const char		*name = NULL;

			if (o->top_ns == LB_NS_FACILITY && tv->len == 1)
				name = lb_facility_name(tv->value[0]);
			else if (o->top_ns == LB_NS_SEVERITY && tv->len == 1)
				name = lb_severity_name(tv->value[0]);
			if (name != NULL)
				print_top(o, (const uint8_t *)name, strlen(name), tv->count);
			else
				print_top(o, tv->value, tv->len, tv->count);
		}
		break;
	}
	if ((status = flush_stdout()) != 0)
		goto done;
	if (o->what == W_HITS)
		print_summary(res.n, res.total, res.next_cursor);
	status = 0;
 done:
	lb_searchres_free(&res);
	lb_query_free(q);
	lb_store_close(st);
	return (status);
}

/* ---------------------------------------------------------------- through searchd (--socket) */

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

static int
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

int
search_main(int argc, char *argv[])
{
	struct sopts	o;
	int		rc;

	if ((rc = parse_search_opts(argc, argv, &o)) != 0) {
		free(o.query);
		return (rc);
	}
	rc = o.data != NULL ? run_data(&o) : run_socket(&o);
	free(o.query);
	return (rc);
}
