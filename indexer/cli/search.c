/*
 * search.c — `logbox search`: runs one query over a logspace, either in this process on a data
 * directory (--data: lb_store_open, lb_query_parse, lb_search, lb_store_get) or through
 * logbox-searchd on its unix socket (--socket: search_socket.c), and prints hits, a count, a
 * histogram or the top values of a field. It owns the command line, the search in this process
 * and the output formats; what matches is liblogbox's business alone.
 *
 * --follow (a live tail on --data) is follow.c's.
 *
 * The one idea: both transports print the same bytes for the same store and query. The CLI
 * settles every input itself (times are parsed here and sent as whole seconds, the range the
 * search would round them to anyway; --top fields are checked here), the --data path prints
 * hits with lb_msg_json() and searchd's hits are lb_msg_json() objects that are copied through
 * untouched, and every other value is decoded to bytes and printed by the functions here.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "logbox.h"
#include "search.h"
#include "search_int.h"

#define DAY_US		(86400LL * 1000000)
#define HITS_DEFAULT	100		/* --limit for hits */
#define HITS_MAX	10000		/* the most hits one page may ask for (searchd's limit) */
#define TOP_DEFAULT	10		/* --limit for --top */
#define CARET_WIDTH	72		/* query bytes shown around the position of an error */

const char search_usage[] =
    "       logbox search  [--data DIR | --socket PATH] [--logspace L] [--from T] [--to T]\n"
    "                      [--time received|event] [--limit N] [--order newest|oldest]\n"
    "                      [--cursor ID] [--count] [--histogram N] [--top FIELD] [--json]\n"
    "                      [--archive-settings FILE --archive-state DIR\n"
    "                       --archive-cache DIR [--archive-cache-mb N]] QUERY\n"
    "       logbox search  --follow --data DIR [--logspace L] [--limit N] [--cursor ID]\n"
    "                      [--json] QUERY\n";

void
errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_verr(fmt, ap);
	va_end(ap);
}

static const char usage_text[] =
    "usage: logbox search [--data DIR | --socket PATH] [--logspace L] [--from T] [--to T]\n"
    "                     [--time received|event] [--limit N] [--order newest|oldest]\n"
    "                     [--cursor ID] [--count] [--histogram N] [--top FIELD] [--json]\n"
    "                     [--archive-settings FILE --archive-state DIR\n"
    "                      --archive-cache DIR [--archive-cache-mb N]] QUERY\n"
    "       logbox search --follow --data DIR [--logspace L] [--limit N] [--cursor ID]\n"
    "                     [--json] QUERY\n";

static int
search_usage_exit(void)
{
	fputs(usage_text, stderr);
	return (2);
}

/* ---------------------------------------------------------------- buffers */

int
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

int
buf_str(struct buf *b, const char *s)
{
	return (buf_add(b, s, strlen(s)));
}

void
buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---------------------------------------------------------------- output */

/*
 * Writes bytes for a human: printable ASCII and valid UTF-8 as they are, a backslash as "\\",
 * tab, newline and carriage return as \t \n \r, every other byte as \xNN.
 */
void
put_text(FILE *f, const uint8_t *p, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		uint8_t c = p[i];

		if (c >= 0x80) {
			if ((n = lb_utf8_len(p + i, len - i)) > 0) {
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
void
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

void
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

void
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

void
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
int
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

int
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
	if (lb_field_name(f, strlen(f), &o->top_ns, &o->top_field))
		return (0);
	if (lb_sdname_ok(f, strlen(f))) {
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
		{ "time", required_argument, NULL, 'B' },
		{ "cursor", required_argument, NULL, 'c' },
		{ "count", no_argument, NULL, 'C' },
		{ "histogram", required_argument, NULL, 'H' },
		{ "top", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "follow", no_argument, NULL, 'F' },
		{ "archive-settings", required_argument, NULL, 'A' },
		{ "archive-state", required_argument, NULL, 'E' },
		{ "archive-cache", required_argument, NULL, 'K' },
		{ "archive-cache-mb", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*from = NULL, *to = NULL, *limit = NULL;
	uint64_t	 v;
	int64_t		 now = now_real_us();
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
		case 'B':
			if (strcmp(optarg, "received") == 0)
				o->time = LB_TIME_RECEIVED;
			else if (strcmp(optarg, "event") == 0)
				o->time = LB_TIME_EVENT;
			else {
				errmsg("--time: received or event, not '%s'", optarg);
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
		case 'F': o->follow = 1; break;
		case 'A': o->ar_settings = optarg; break;
		case 'E': o->ar_state = optarg; break;
		case 'K': o->ar_cache = optarg; break;
		case 'M':
			if (parse_count(optarg, "--archive-cache-mb", UINT64_MAX >> 20,
			    &o->ar_cache_mb) != 0 || o->ar_cache_mb == 0) {
				errmsg("--archive-cache-mb: 1 MiB or more");
				return (2);
			}
			break;
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
	if (((o->ar_settings != NULL) + (o->ar_state != NULL) + (o->ar_cache != NULL)) % 3 != 0) {
		errmsg("search: --archive-settings, --archive-state and --archive-cache go together");
		return (2);
	}
	if (o->ar_settings != NULL && (o->data == NULL || o->follow)) {
		errmsg("search: archived days are read in place with --data (not --socket or "
		    "--follow)");
		return (2);
	}
	if (o->ar_cache_mb == 0)
		o->ar_cache_mb = 1024;
	if (o->follow && (o->data == NULL || o->what != W_HITS)) {
		errmsg("search: --follow reads the store: it needs --data, and lists hits (not "
		    "--count, --histogram or --top); through the API: logbox-remote search --follow");
		return (2);
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

int
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

/* On stderr: the archived days a search read, and what reading them took. */
static void
print_archive(const struct lb_astat *as)
{
	if (as->ndays == 0)
		return;
	fprintf(stderr, "archive: %zu day%s read in place (", as->ndays, as->ndays == 1 ? "" : "s");
	for (size_t i = 0; i < as->ndays; i++)
		fprintf(stderr, "%s%04u-%02u-%02u", i > 0 ? " " : "", as->days[i] / 10000,
		    as->days[i] / 100 % 100, as->days[i] % 100);
	fprintf(stderr, ") in %.1f ms, %" PRIu64 " bytes fetched in %" PRIu64 " requests, %"
	    PRIu64 " from the cache\n", (double)as->us / 1000.0, as->fetched, as->gets,
	    as->cached);
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
	struct lb_acache	*ac = NULL;
	struct lb_archive	*ar = NULL;
	struct lb_astat		 as;
	char			 why[512];
	int			 rc, status = 1;

	memset(&res, 0, sizeof(res));
	memset(&as, 0, sizeof(as));
	if ((rc = lb_store_open(o->data, o->ls, LB_RDONLY, &st)) != 0) {
		errmsg("%s: logspace %s: %s", o->data, o->ls, lb_strerror(rc));
		return (1);
	}
	if (o->ar_settings != NULL) {
		if ((rc = lb_acache_open(o->ar_cache, o->ar_cache_mb << 20, &ac)) != 0) {
			errmsg("--archive-cache %s: %s", o->ar_cache, lb_strerror(rc));
			goto done;
		}
		rc = lb_archive_open(ac, o->ar_settings, o->ar_state, o->ls, &ar, why, sizeof(why));
		if (rc == LB_ENOTFOUND)
			errmsg("warning: no archived days: %s", why);
		else if (rc != 0) {
			errmsg("archive: %s: %s", why[0] ? why : "", lb_strerror(rc));
			goto done;
		} else if ((rc = lb_store_set_archive(st, ar)) != 0) {
			errmsg("archive: %s", lb_strerror(rc));
			goto done;
		}
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
	rq.time = o->time;
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
		if (ar != NULL) {
			lb_store_archive_take(st, &as);
			if (as.why[0] != '\0')
				errmsg("archive: %s", as.why);
		}
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
				if (ar != NULL) {
					lb_store_archive_take(st, &as);
					if (as.why[0] != '\0')
						errmsg("archive: %s", as.why);
				}
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
	if (ar != NULL) {
		lb_store_archive_take(st, &as);
		print_archive(&as);
	}
	status = 0;
 done:
	lb_searchres_free(&res);
	lb_query_free(q);
	lb_store_close(st);
	lb_archive_unref(ar);
	lb_acache_close(ac);
	free(as.days);
	return (status);
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
	if (o.follow)
		rc = run_follow(&o);
	else
		rc = o.data != NULL ? run_data(&o) : run_socket(&o);
	free(o.query);
	return (rc);
}
