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
 * searchd's JSON is read by a small scanner rather than jansson because message bytes that
 * are not UTF-8 arrive as lone surrogates (\udcXX), which jansson refuses.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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

/* ---------------------------------------------------------------- JSON scanner */

/*
 * A JSON value as a span of the response text. The scanner checks bounds everywhere and is
 * lax about the grammar: searchd is trusted to send JSON, not to send it without bugs.
 */
struct jv {
	const char	*p;
	size_t		 len;
};

static const char *
j_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return (p);
}

/* The end of the string whose opening quote is at p, just past its closing quote, or NULL. */
static const char *
j_strend(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return (p + 1);
	}
	return (NULL);
}

/* Skips the value at p (no leading white space); returns its end or NULL. */
static const char *
j_skip(const char *p, const char *e)
{
	size_t depth = 0;

	if (p >= e)
		return (NULL);
	if (*p == '"')
		return (j_strend(p, e));
	if (*p != '{' && *p != '[') {
		const char *s = p;

		while (p < e && strchr(",]}: \t\r\n", *p) == NULL)
			p++;
		return (p > s ? p : NULL);
	}
	while (p < e) {
		if (*p == '"') {
			if ((p = j_strend(p, e)) == NULL)
				return (NULL);
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return (p + 1);
		}
		p++;
	}
	return (NULL);
}

/* The member key of object obj. Returns 0 and *out, or -1 when absent or malformed. */
static int
j_member(struct jv obj, const char *key, struct jv *out)
{
	const char	*p = obj.p, *e = obj.p + obj.len, *k, *ke, *v;
	size_t		 klen = strlen(key);

	if (obj.len == 0 || *p != '{')
		return (-1);
	p = j_ws(p + 1, e);
	while (p < e && *p != '}') {
		if (*p != '"' || (ke = j_strend(p, e)) == NULL)
			return (-1);
		k = p + 1;
		p = j_ws(ke, e);
		if (p >= e || *p != ':')
			return (-1);
		v = j_ws(p + 1, e);
		if ((p = j_skip(v, e)) == NULL)
			return (-1);
		if ((size_t)(ke - 1 - k) == klen && memcmp(k, key, klen) == 0) {
			out->p = v;
			out->len = (size_t)(p - v);
			return (0);
		}
		p = j_ws(p, e);
		if (p < e && *p == ',')
			p = j_ws(p + 1, e);
	}
	return (-1);
}

/*
 * The next element of array arr: *it is NULL at the start. Returns 1 and *out for an element,
 * 0 at the end, -1 when arr is not an array.
 */
static int
j_next(struct jv arr, const char **it, struct jv *out)
{
	const char *p, *e = arr.p + arr.len, *v;

	if (arr.len == 0 || arr.p[0] != '[')
		return (-1);
	p = j_ws(*it == NULL ? arr.p + 1 : *it, e);
	if (p < e && *p == ',')
		p = j_ws(p + 1, e);
	if (p >= e || *p == ']')
		return (0);
	v = p;
	if ((p = j_skip(v, e)) == NULL)
		return (-1);
	out->p = v;
	out->len = (size_t)(p - v);
	*it = p;
	return (1);
}

static int
j_hex4(const char *p, const char *e, uint32_t *out)
{
	uint32_t v = 0;

	if (e - p < 4)
		return (-1);
	for (int i = 0; i < 4; i++) {
		int c = (unsigned char)p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return (-1);
	}
	*out = v;
	return (0);
}

/*
 * Decodes string v into bytes (appended to out): the inverse of lb_json_bytes, so \udc80 to
 * \udcff that stand alone are the bytes 0x80 to 0xff. Returns 0 or -1.
 */
static int
j_bytes(struct jv v, struct buf *out)
{
	const char	*p = v.p, *e = v.p + v.len;
	uint8_t		 u[4];

	if (v.len < 2 || *p != '"' || e[-1] != '"')
		return (-1);
	p++;
	e--;
	while (p < e) {
		const char	*s = p;
		uint32_t	 cp, lo;
		size_t		 n;

		while (p < e && *p != '\\')
			p++;
		if (p > s && buf_add(out, s, (size_t)(p - s)) != 0)
			return (-1);
		if (p >= e)
			break;
		if (++p >= e)
			return (-1);
		switch (*p++) {
		case '"': u[0] = '"'; n = 1; break;
		case '\\': u[0] = '\\'; n = 1; break;
		case '/': u[0] = '/'; n = 1; break;
		case 'b': u[0] = '\b'; n = 1; break;
		case 'f': u[0] = '\f'; n = 1; break;
		case 'n': u[0] = '\n'; n = 1; break;
		case 'r': u[0] = '\r'; n = 1; break;
		case 't': u[0] = '\t'; n = 1; break;
		case 'u':
			if (j_hex4(p, e, &cp) != 0)
				return (-1);
			p += 4;
			if (cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\' &&
			    p[1] == 'u' && j_hex4(p + 2, e, &lo) == 0 && lo >= 0xdc00 &&
			    lo <= 0xdfff) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			} else if (cp >= 0xdc80 && cp <= 0xdcff) {
				u[0] = (uint8_t)(cp & 0xff);
				n = 1;
				break;
			} else if (cp >= 0xd800 && cp <= 0xdfff)
				return (-1);
			if (cp < 0x80) {
				u[0] = (uint8_t)cp;
				n = 1;
			} else if (cp < 0x800) {
				u[0] = (uint8_t)(0xc0 | cp >> 6);
				u[1] = (uint8_t)(0x80 | (cp & 0x3f));
				n = 2;
			} else if (cp < 0x10000) {
				u[0] = (uint8_t)(0xe0 | cp >> 12);
				u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
				u[2] = (uint8_t)(0x80 | (cp & 0x3f));
				n = 3;
			} else {
				u[0] = (uint8_t)(0xf0 | cp >> 18);
				u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
				u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
				u[3] = (uint8_t)(0x80 | (cp & 0x3f));
				n = 4;
			}
			break;
		default:
			return (-1);
		}
		if (buf_add(out, u, n) != 0)
			return (-1);
	}
	return (0);
}

/* An integer member (a JSON number, or a string of digits as next_cursor is). */
static int
j_int(struct jv obj, const char *key, int64_t *out)
{
	struct jv	 v;
	char		 tmp[32], *end;
	long long	 n;

	if (j_member(obj, key, &v) != 0)
		return (-1);
	if (v.len >= 2 && v.p[0] == '"') {
		v.p++;
		v.len -= 2;
	}
	if (v.len == 0 || v.len >= sizeof(tmp))
		return (-1);
	memcpy(tmp, v.p, v.len);
	tmp[v.len] = '\0';
	errno = 0;
	n = strtoll(tmp, &end, 10);
	if (errno != 0 || *end != '\0')
		return (-1);
	*out = n;
	return (0);
}

static int
j_isnull(struct jv v)
{
	return (v.len == 4 && memcmp(v.p, "null", 4) == 0);
}

/* ---------------------------------------------------------------- HTTP over a unix socket */

static int
url_add(struct buf *b, const char *key, const char *val, size_t len)
{
	static const char	hex[] = "0123456789ABCDEF";
	int			rc;

	if ((rc = buf_str(b, b->len > 0 && memchr(b->p, '?', b->len) ? "&" : "?")) != 0 ||
	    (rc = buf_str(b, key)) != 0 || (rc = buf_str(b, "=")) != 0)
		return (rc);
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)val[i];
		char	e[3] = { '%', hex[c >> 4], hex[c & 15] };

		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
			rc = buf_add(b, &c, 1);
		else
			rc = buf_add(b, e, 3);
		if (rc != 0)
			return (rc);
	}
	return (0);
}

static int
url_num(struct buf *b, const char *key, int64_t v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%" PRId64, v);
	return (url_add(b, key, tmp, strlen(tmp)));
}

/* Finds header name (case-insensitive) in hdr[0..len); returns its value or NULL. */
static const char *
http_header(const char *hdr, size_t len, const char *name, size_t *vlen)
{
	const char	*p = hdr, *e = hdr + len, *nl;
	size_t		 n = strlen(name);

	while (p < e) {
		if ((nl = memchr(p, '\n', (size_t)(e - p))) == NULL)
			nl = e;
		if ((size_t)(nl - p) > n && p[n] == ':' && strncasecmp(p, name, n) == 0) {
			const char *v = p + n + 1, *ve = nl;

			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			*vlen = (size_t)(ve - v);
			return (v);
		}
		p = nl + 1;
	}
	return (NULL);
}

/* Decodes a chunked body in place: b[0..*len) becomes the payload. Returns 0 or -1. */
static int
http_unchunk(uint8_t *b, size_t *len)
{
	size_t	in = 0, out = 0, n = *len;

	for (;;) {
		size_t	size = 0, digits = 0;
		uint8_t	*nl;

		while (in < n && isxdigit(b[in])) {
			int c = b[in++];

			if (size > (SIZE_MAX >> 4))
				return (-1);
			size = size * 16 + (size_t)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
			digits++;
		}
		if (digits == 0 || (nl = memchr(b + in, '\n', n - in)) == NULL)
			return (-1);
		in = (size_t)(nl - b) + 1;	/* chunk extensions are ignored */
		if (size == 0)
			break;
		if (size > n - in)
			return (-1);
		memmove(b + out, b + in, size);
		out += size;
		in += size;
		if (in < n && b[in] == '\r')
			in++;
		if (in >= n || b[in] != '\n')
			return (-1);
		in++;
	}
	*len = out;
	return (0);
}

/*
 * GET target from the searchd listening on sock. On success *status is the HTTP status and
 * body holds the (de-chunked) body. On failure prints why and returns 1.
 */
static int
http_get(const char *sock, const struct buf *target, int *status, struct buf *body)
{
	struct sockaddr_un	 sun;
	struct timeval		 tv = { IO_TIMEOUT_S, 0 };
	struct buf		 req = { 0 }, resp = { 0 };
	const char		*hdr_end, *v;
	size_t			 off, vlen, hlen;
	ssize_t			 r;
	int			 fd = -1, rc = 1, code;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(sock) >= sizeof(sun.sun_path)) {
		errmsg("%s: socket path too long", sock);
		return (1);
	}
	memcpy(sun.sun_path, sock, strlen(sock));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		errmsg("socket: %s", strerror(errno));
		return (1);
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		errmsg("searchd unavailable at %s: %s", sock, strerror(errno));
		goto done;
	}
	if (buf_str(&req, "GET ") != 0 || buf_add(&req, target->p, target->len) != 0 ||
	    buf_str(&req, " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: logbox/" LB_VERSION
	    "\r\nAccept: application/json\r\nConnection: close\r\n\r\n") != 0) {
		errmsg("out of memory");
		goto done;
	}
	for (off = 0; off < req.len; off += (size_t)r) {
		if ((r = send(fd, req.p + off, req.len - off, MSG_NOSIGNAL)) == -1) {
			if (errno == EINTR) {
				r = 0;
				continue;
			}
			errmsg("searchd at %s: sending the request: %s", sock, strerror(errno));
			goto done;
		}
	}
	for (;;) {
		if (resp.cap - resp.len < 65536) {
			uint8_t *np;
			size_t	 cap = resp.cap ? resp.cap * 2 : 65536 * 2;

			if ((np = realloc(resp.p, cap)) == NULL) {
				errmsg("out of memory");
				goto done;
			}
			resp.p = np;
			resp.cap = cap;
		}
		if ((r = read(fd, resp.p + resp.len, resp.cap - resp.len)) == -1) {
			if (errno == EINTR)
				continue;
			errmsg("searchd at %s: reading the response: %s", sock,
			    errno == EAGAIN ? "timed out" : strerror(errno));
			goto done;
		}
		if (r == 0)
			break;
		resp.len += (size_t)r;
	}
	/* Status line and headers. */
	hdr_end = resp.len > 0 ? memmem(resp.p, resp.len, "\r\n\r\n", 4) : NULL;
	if (hdr_end == NULL || resp.len < 12 || memcmp(resp.p, "HTTP/1.", 7) != 0 ||
	    sscanf((const char *)resp.p + 8, " %3d", &code) != 1) {
		errmsg("searchd at %s: not an HTTP response", sock);
		goto done;
	}
	hlen = (size_t)(hdr_end - (const char *)resp.p) + 4;
	off = hlen;
	vlen = 0;
	if ((v = http_header((const char *)resp.p, hlen, "Transfer-Encoding", &vlen)) != NULL &&
	    vlen >= 7 && strncasecmp(v + vlen - 7, "chunked", 7) == 0) {
		size_t blen = resp.len - hlen;

		if (http_unchunk(resp.p + hlen, &blen) != 0) {
			errmsg("searchd at %s: a malformed chunked body", sock);
			goto done;
		}
		resp.len = hlen + blen;
	} else if ((v = http_header((const char *)resp.p, hlen, "Content-Length", &vlen)) !=
	    NULL) {
		char			 tmp[24], *end;
		unsigned long long	 cl;

		if (vlen == 0 || vlen >= sizeof(tmp))
			goto badlen;
		memcpy(tmp, v, vlen);
		tmp[vlen] = '\0';
		errno = 0;
		cl = strtoull(tmp, &end, 10);
		if (errno != 0 || *end != '\0' || cl > resp.len - hlen) {
 badlen:
			errmsg("searchd at %s: the response is shorter than its Content-Length",
			    sock);
			goto done;
		}
		resp.len = hlen + (size_t)cl;
	}
	buf_free(body);
	if (buf_add(body, resp.p + off, resp.len - off) != 0 || buf_add(body, "", 1) != 0) {
		errmsg("out of memory");
		goto done;
	}
	body->len--;	/* a NUL after the body, not part of it */
	*status = code;
	rc = 0;
 done:
	if (fd != -1)
		close(fd);
	buf_free(&req);
	buf_free(&resp);
	return (rc);
}

/* ---------------------------------------------------------------- through searchd (--socket) */

/* Prints searchd's error body; returns the exit status. */
static int
searchd_error(const struct sopts *o, int status, struct jv body)
{
	struct jv	 err, code, msg;
	struct buf	 c = { 0 }, m = { 0 };
	int64_t		 pos;
	int		 rc = 1;

	if (j_member(body, "error", &err) != 0 || j_member(err, "code", &code) != 0 ||
	    j_member(err, "message", &msg) != 0 || j_bytes(code, &c) != 0 ||
	    j_bytes(msg, &m) != 0 || buf_add(&c, "", 1) != 0 || buf_add(&m, "", 1) != 0) {
		errmsg("searchd at %s: HTTP status %d", o->sock, status);
		goto done;
	}
	if (strcmp((char *)c.p, "bad_query") == 0 && j_int(err, "position", &pos) == 0 &&
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

/* The string member key of obj decoded as bytes into b (emptied first). */
static int
j_strmember(struct jv obj, const char *key, struct buf *b)
{
	struct jv v;

	b->len = 0;
	return (j_member(obj, key, &v) != 0 ? -1 : j_bytes(v, b));
}

static int
print_hits_json_obj(const struct sopts *o, struct jv hit, struct buf *tmp)
{
	struct buf	*host = &tmp[0], *prog = &tmp[1], *pid = &tmp[2], *msg = &tmp[3];
	struct lb_slice	 s[4];
	int64_t		 received;

	if (o->json) {
		fwrite(hit.p, 1, hit.len, stdout);
		putchar('\n');
		return (0);
	}
	if (j_int(hit, "received_us", &received) != 0 || j_strmember(hit, "host", host) != 0 ||
	    j_strmember(hit, "program", prog) != 0 || j_strmember(hit, "pid", pid) != 0 ||
	    j_strmember(hit, "message", msg) != 0)
		return (-1);
	for (int i = 0; i < 4; i++) {
		s[i].p = tmp[i].p;
		s[i].len = tmp[i].len;
	}
	print_hit(stdout, received, s[0], s[1], s[2], s[3]);
	return (0);
}

static int
run_socket(const struct sopts *o)
{
	struct buf	 target = { 0 }, body = { 0 }, tmp[4], val = { 0 };
	struct jv	 root, arr, el, v;
	const char	*it = NULL, *path;
	int64_t		 total = 0, next = 0, n64;
	size_t		 n = 0;
	int		 status, rc, res = 1, r;

	memset(tmp, 0, sizeof(tmp));
	/* A query over the size limit never leaves: the same error as in process. */
	if (o->qlen > LB_QUERY_MAX) {
		struct lb_tokconf	 tc;
		struct lb_qnode		*q = NULL;
		struct lb_qerr		 qe;

		lb_tokconf_default(&tc);
		memset(&qe, 0, sizeof(qe));
		rc = lb_query_parse(&tc, o->query, o->qlen, &q, &qe);
		lb_query_free(q);
		if (rc == LB_EQUERY || rc == LB_ETOOBIG)
			return (print_bad_query(o, qe.pos, qe.msg));
	}
	switch (o->what) {
	case W_HITS: path = "/v1/search"; break;
	case W_COUNT: path = "/v1/count"; break;
	case W_HIST: path = "/v1/histogram"; break;
	default: path = "/v1/top"; break;
	}
	rc = buf_str(&target, path);
	if (rc == 0)
		rc = url_add(&target, "logspace", o->ls, strlen(o->ls));
	if (rc == 0)
		rc = url_add(&target, "q", o->query, o->qlen);
	if (rc == 0)
		rc = url_num(&target, "from", o->from / 1000000);
	if (rc == 0)
		rc = url_num(&target, "to", o->to / 1000000);
	if (rc == 0 && o->what == W_HITS) {
		rc = url_num(&target, "limit", o->limit);
		if (rc == 0)
			rc = url_add(&target, "order", o->order == LB_ORDER_OLDEST ? "oldest" :
			    "newest", 6);
		if (rc == 0 && o->cursor != 0) {
			char c[24];

			snprintf(c, sizeof(c), "%" PRIu64, o->cursor);
			rc = url_add(&target, "cursor", c, strlen(c));
		}
	}
	if (rc == 0 && o->what == W_HIST)
		rc = url_num(&target, "buckets", o->nbuckets);
	if (rc == 0 && o->what == W_TOP) {
		rc = url_add(&target, "field", o->top_field, strlen(o->top_field));
		if (rc == 0)
			rc = url_num(&target, "k", o->limit);
	}
	if (rc != 0) {
		errmsg("out of memory");
		goto done;
	}
	if (http_get(o->sock, &target, &status, &body) != 0)
		goto done;
	root.p = (const char *)body.p;
	root.len = body.len;
	root.p = j_ws(root.p, root.p + root.len);
	root.len = (size_t)((const char *)body.p + body.len - root.p);
	if (status != 200) {
		res = searchd_error(o, status, root);
		goto done;
	}
	if (j_member(root, "warnings", &arr) == 0) {
		while ((r = j_next(arr, &it, &el)) == 1) {
			val.len = 0;
			if (j_bytes(el, &val) == 0) {
				fputs("logbox: warning: ", stderr);
				put_text(stderr, val.p, val.len);
				fputc('\n', stderr);
			}
		}
		it = NULL;
	}
	switch (o->what) {
	case W_HITS:
		if (j_member(root, "hits", &arr) != 0 || j_int(root, "total", &total) != 0 ||
		    j_member(root, "next_cursor", &v) != 0 ||
		    (!j_isnull(v) && j_int(root, "next_cursor", &next) != 0))
			goto bad;
		while ((r = j_next(arr, &it, &el)) == 1) {
			if (print_hits_json_obj(o, el, tmp) != 0)
				goto bad;
			n++;
		}
		if (r != 0)
			goto bad;
		break;
	case W_COUNT:
		if (j_int(root, "total", &total) != 0)
			goto bad;
		printf("%" PRId64 "\n", total);
		break;
	case W_HIST:
		if (j_member(root, "buckets", &arr) != 0)
			goto bad;
		while ((r = j_next(arr, &it, &el)) == 1) {
			if (j_int(el, "from", &n64) != 0 || j_int(el, "count", &total) != 0)
				goto bad;
			print_bucket(o, n64, (uint64_t)total);
		}
		if (r != 0)
			goto bad;
		break;
	case W_TOP:
		if (j_member(root, "values", &arr) != 0)
			goto bad;
		while ((r = j_next(arr, &it, &el)) == 1) {
			if (j_strmember(el, "value", &val) != 0 ||
			    j_int(el, "count", &total) != 0)
				goto bad;
			print_top(o, val.p, val.len, (uint64_t)total);
		}
		if (r != 0)
			goto bad;
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
	for (int i = 0; i < 4; i++)
		buf_free(&tmp[i]);
	buf_free(&val);
	buf_free(&target);
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
