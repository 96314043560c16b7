/*
 * main.c — the logbox admin tool: ingest, cat, lookup, verify, stats, dump, reindex and
 * deadletter over a data directory, and the dispatch to search (search.c). This file owns argument handling,
 * progress and output formats (text and NDJSON); every storage decision is liblogbox's. Errors
 * go to stderr as "logbox: ..." with exit status 1; usage errors exit 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "archive.h"
#include "search.h"

#define READ_CHUNK	(4 << 20)	/* bytes read from the input at a time */
#define FRAME_MAX	(64 << 20)	/* the largest frame buffered; longer ones are skipped */

static const char *usage_text =
    "usage: logbox ingest  --data DIR [--logspace L] [--framing line|octet]\n"
    "                      [--sync always|batch|none] [--batch N] [--ack]\n"
    "                      [--received now|header] [--flush-ms MS] [FILE|-]\n"
    "       logbox cat     --data DIR [--logspace L] [--from-id N] [--to-id N]\n"
    "       logbox lookup  --data DIR [--logspace L] [--prefix] [--field F] TERM\n"
    "       logbox verify  --data DIR [--logspace L] [--key HEX|@FILE] [--pubkey FILE]\n"
    "                      [--integrity] [--tsa-ca FILE] [--json [--out FILE]]\n"
    "                      (default: every logspace)\n"
    "       logbox keys init --data DIR [--interval SECONDS] [--key-file FILE]\n"
    "       logbox seal    --data DIR [--force]\n"
    "       logbox stats   --data DIR [--logspace L] [--json]\n"
    "       logbox reindex --data DIR [--logspace L]\n"
    "       logbox dump    FILE\n"
    "       logbox deadletter --data DIR\n";
static const char *usage_tail =
    "       logbox --version\n";

struct opts {
	const char	*data;
	const char	*ls;
	int		 ls_given;	/* --logspace was on the command line */
	const char	*framing;
	const char	*sync;
	const char	*field;
	const char	*received;
	uint64_t	 batch;
	uint64_t	 flush_ms;	/* ingest --flush-ms: 0 keeps the logspace's setting */
	uint64_t	 from_id;
	uint64_t	 to_id;
	uint64_t	 interval;	/* keys init --interval, in seconds */
	const char	*key;		/* verify --key */
	const char	*key_file;	/* keys init --key-file */
	const char	*pubkey;	/* verify --pubkey */
	const char	*tsa_ca;	/* verify --tsa-ca */
	const char	*out;		/* verify --json --out */
	json_t		*report;	/* verify --json: the logspace being verified's problems */
	int		 force;		/* seal --force */
	int		 integrity;	/* verify --integrity */
	uint8_t		 vkey[LB_SEAL_KEYLEN];	/* --key, parsed */
	int		 has_key;
	int		 ack;
	int		 prefix;
	int		 json;
	int		 argc;
	char		**argv;
};

static void
die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

void
cli_verr(const char *fmt, va_list ap)
{
	fputs("logbox: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void
die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_verr(fmt, ap);
	va_end(ap);
	exit(1);
}

static void
usage(void) __attribute__((noreturn));

static void
print_usage(FILE *f)
{
	fputs(usage_text, f);
	fputs(search_usage, f);
	fputs(archive_usage, f);
	fputs(usage_tail, f);
}

static void
usage(void)
{
	print_usage(stderr);
	exit(2);
}

/* Seconds on the monotonic clock, for rates and progress. */
static double
now_s(void)
{
	return ((double)now_mono_us() / 1e6);
}

static uint64_t
parse_u64(const char *s, const char *what)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || s[0] == '-')
		die("%s: not a number: %s", what, s);
	return (v);
}

static void
parse_opts(int argc, char *argv[], struct opts *o)
{
	static const struct option longopts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "logspace", required_argument, NULL, 'l' },
		{ "framing", required_argument, NULL, 'f' },
		{ "sync", required_argument, NULL, 's' },
		{ "batch", required_argument, NULL, 'b' },
		{ "ack", no_argument, NULL, 'a' },
		{ "from-id", required_argument, NULL, 'F' },
		{ "to-id", required_argument, NULL, 'T' },
		{ "prefix", no_argument, NULL, 'p' },
		{ "field", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "received", required_argument, NULL, 'r' },
		{ "flush-ms", required_argument, NULL, 'M' },
		{ "key", required_argument, NULL, 'K' },
		{ "key-file", required_argument, NULL, 'Q' },
		{ "pubkey", required_argument, NULL, 'P' },
		{ "tsa-ca", required_argument, NULL, 'A' },
		{ "out", required_argument, NULL, 'O' },
		{ "interval", required_argument, NULL, 'I' },
		{ "force", no_argument, NULL, 'G' },
		{ "integrity", no_argument, NULL, 'Y' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->ls = "main";
	o->framing = "line";
	o->sync = "batch";
	o->field = "text";
	o->received = "now";
	o->batch = 1000;
	o->to_id = UINT64_MAX;
	while ((c = getopt_long(argc, argv, "d:l:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': o->data = optarg; break;
		case 'l': o->ls = optarg; o->ls_given = 1; break;
		case 'f': o->framing = optarg; break;
		case 's': o->sync = optarg; break;
		case 'b': o->batch = parse_u64(optarg, "--batch"); break;
		case 'a': o->ack = 1; break;
		case 'F': o->from_id = parse_u64(optarg, "--from-id"); break;
		case 'T': o->to_id = parse_u64(optarg, "--to-id"); break;
		case 'p': o->prefix = 1; break;
		case 'e': o->field = optarg; break;
		case 'j': o->json = 1; break;
		case 'r': o->received = optarg; break;
		case 'M':
			if ((o->flush_ms = parse_u64(optarg, "--flush-ms")) == 0 ||
			    o->flush_ms > UINT32_MAX)
				die("--flush-ms: 1 to %u", UINT32_MAX);
			break;
		case 'K': o->key = optarg; break;
		case 'Q': o->key_file = optarg; break;
		case 'P': o->pubkey = optarg; break;
		case 'A': o->tsa_ca = optarg; break;
		case 'O': o->out = optarg; break;
		case 'I': o->interval = parse_u64(optarg, "--interval"); break;
		case 'G': o->force = 1; break;
		case 'Y': o->integrity = 1; break;
		case 'h': print_usage(stdout); exit(0);
		default: usage();
		}
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	if (o->batch == 0)
		o->batch = 1;
}

static struct lb_store *
open_store(const struct opts *o, int mode)
{
	struct lb_store	*st;
	int		 rc;

	if (o->data == NULL)
		usage();
	if ((rc = lb_store_open(o->data, o->ls, mode, &st)) != 0)
		die("%s: logspace %s: %s", o->data, o->ls, lb_strerror(rc));
	return (st);
}

/* ---------------------------------------------------------------- ingest */

/*
 * ingest --flush-ms: stores the logspace's segment interval (creating the logspace with the
 * default settings otherwise) before the store opens it. The catalog is closed again first: a
 * process opens a data directory's catalog once at a time.
 */
static void
set_flush_ms(const struct opts *o)
{
	struct lb_catalog	*cat;
	struct lb_lsconf	 conf;
	int			 rc;

	if (o->data == NULL)
		usage();
	if ((rc = lb_mkdirs(o->data)) != 0 ||
	    (rc = lb_catalog_open(o->data, LB_RDWR, &cat)) != 0)
		die("%s: %s", o->data, lb_strerror(rc));
	if ((rc = lb_catalog_logspace_get(cat, o->ls, &conf)) == LB_ENOTFOUND) {
		lb_lsconf_default(&conf);
		conf.flush_ms = (uint32_t)o->flush_ms;
		rc = lb_catalog_logspace_create(cat, o->ls, &conf);
	} else if (rc == 0 && conf.flush_ms != o->flush_ms) {
		conf.flush_ms = (uint32_t)o->flush_ms;
		rc = lb_catalog_logspace_set(cat, o->ls, &conf);
	}
	lb_catalog_close(cat);
	if (rc != 0)
		die("%s: logspace %s: --flush-ms: %s", o->data, o->ls, lb_strerror(rc));
}

struct ingest {
	struct lb_store	*st;
	int		 sync;		/* 0 none, 1 batch, 2 always */
	int		 ack;
	int		 header_time;	/* --received header */
	uint64_t	 batch;
	uint64_t	 n, bytes, bad, first, last, pending;
	uint64_t	 unstored;	/* messages that can never be stored, skipped */
	double		 t0, last_sync, last_progress;
	int		 tty;
};

static void
ingest_commit(struct ingest *in, int final)
{
	double	now = now_s();
	int	sync = in->sync == 2 || (in->sync == 1 && (final || now - in->last_sync >= 0.1));
	int	rc;

	if ((rc = lb_store_commit(in->st, sync)) != 0)
		die("commit: %s", lb_strerror(rc));
	if (sync)
		in->last_sync = now;
	in->pending = 0;
	if (in->ack && in->n > 0) {
		printf("ack %llu\n", (unsigned long long)in->last);
		fflush(stdout);
	}
	if (in->tty && (final || now - in->last_progress >= 0.5)) {
		fprintf(stderr, "\r%llu messages, %.0f msg/s   ", (unsigned long long)in->n,
		    in->n / (now - in->t0 > 0 ? now - in->t0 : 1));
		in->last_progress = now;
	}
}

static void
ingest_one(struct ingest *in, const uint8_t *p, size_t len)
{
	struct lb_msg	m;
	uint64_t	first, next;
	int		rc;

	lb_syslog_parse(p, len, now_real_us(), &m);
	if (in->header_time && m.timestamp != LB_NOTIME)
		m.received = m.timestamp;
	if ((rc = lb_store_append(in->st, &m)) != 0) {
		/* (Ids start at 1: m.id is 0 unless the store got as far as giving one.) */
		lb_store_range(in->st, &first, &next);
		if (lb_errclass(rc) != LB_ERRC_MESSAGE || (m.id != 0 && next > m.id))
			die("storing message %llu: %s", (unsigned long long)in->n + 1,
			    lb_strerror(rc));
		/* This message can never be stored (fields are cut, so hardly ever): skip it. */
		fprintf(stderr, "logbox: message %llu not stored: %s\n",
		    (unsigned long long)in->n + in->unstored + 1, lb_strerror(rc));
		in->unstored++;
		return;
	}
	if (in->n++ == 0)
		in->first = m.id;
	in->last = m.id;
	in->bytes += len;
	if (++in->pending >= in->batch)
		ingest_commit(in, 0);
}

static int
cmd_ingest(struct opts *o)
{
	struct ingest	 in;
	uint8_t		*buf;
	size_t		 cap = READ_CHUNK * 2, len = 0, pos = 0, used;
	uint64_t	 off = 0;
	struct lb_slice	 fr;
	int		 fd = 0, framing, eof = 0, rc;
	ssize_t		 r;
	double		 el;

	if (o->argc > 1)
		usage();
	if (strcmp(o->framing, "line") == 0)
		framing = LB_FRAMING_LINE;
	else if (strcmp(o->framing, "octet") == 0)
		framing = LB_FRAMING_OCTET;
	else
		usage();
	memset(&in, 0, sizeof(in));
	if (strcmp(o->sync, "none") == 0)
		in.sync = 0;
	else if (strcmp(o->sync, "batch") == 0)
		in.sync = 1;
	else if (strcmp(o->sync, "always") == 0)
		in.sync = 2;
	else
		usage();
	if (o->argc == 1 && strcmp(o->argv[0], "-") != 0 &&
	    (fd = open(o->argv[0], O_RDONLY | O_CLOEXEC)) == -1)
		die("%s: %s", o->argv[0], strerror(errno));
	if (o->flush_ms != 0)
		set_flush_ms(o);
	in.st = open_store(o, LB_RDWR);
	in.ack = o->ack;
	if (strcmp(o->received, "header") == 0)
		in.header_time = 1;
	else if (strcmp(o->received, "now") != 0)
		usage();
	in.batch = o->batch;
	in.tty = isatty(2);
	in.t0 = in.last_sync = now_s();
	if ((buf = malloc(cap)) == NULL)
		die("out of memory");
	for (;;) {
		while (pos < len) {
			rc = lb_syslog_frame_next(framing, buf + pos, len - pos, eof, FRAME_MAX,
			    &fr, &used);
			if (rc == EAGAIN)
				break;
			if (rc == 0) {
				ingest_one(&in, fr.p, fr.len);
				pos += used;
				continue;
			}
			/* A bad frame: say where, skip it (or to the next line), go on. */
			in.bad++;
			fprintf(stderr, "logbox: input byte %llu: %s: skipped\n",
			    (unsigned long long)(off + pos), lb_strerror(rc));
			if (rc == LB_ETOOBIG && used > 0) {
				pos += used;
				continue;
			}
			{
				uint8_t *nl = memchr(buf + pos, '\n', len - pos);

				if (nl == NULL && !eof) {
					/* Drop what we have and resynchronise on the next line. */
					off += len;
					pos = len = 0;
					goto read_more;
				}
				pos = nl == NULL ? len : (size_t)(nl - buf) + 1;
			}
		}
		if (eof)
			break;
		/* Keep the unconsumed tail at the front; grow for a frame larger than a chunk. */
		memmove(buf, buf + pos, len - pos);
		off += pos;
		len -= pos;
		pos = 0;
 read_more:
		if (cap - len < READ_CHUNK) {
			if (cap >= FRAME_MAX + READ_CHUNK) {
				fprintf(stderr, "logbox: input byte %llu: frame longer than %d "
				    "bytes: skipped\n", (unsigned long long)off, FRAME_MAX);
				in.bad++;
				off += len;
				len = 0;
			} else {
				cap *= 2;
				if ((buf = realloc(buf, cap)) == NULL)
					die("out of memory");
			}
		}
		if ((r = read(fd, buf + len, cap - len)) == -1) {
			if (errno == EINTR)
				continue;
			die("read: %s", strerror(errno));
		}
		if (r == 0)
			eof = 1;
		len += (size_t)r;
	}
	ingest_commit(&in, 1);
	if ((rc = lb_store_close(in.st)) != 0)
		die("closing the store: %s", lb_strerror(rc));
	el = now_s() - in.t0;
	if (in.tty)
		fputc('\n', stderr);
	fprintf(stderr, "logbox: ingested %llu messages (ids %llu-%llu) in %.3f s: %.0f msg/s, "
	    "%.1f MB/s", (unsigned long long)in.n, (unsigned long long)in.first,
	    (unsigned long long)in.last, el, in.n / (el > 0 ? el : 1),
	    in.bytes / 1e6 / (el > 0 ? el : 1));
	if (in.bad > 0)
		fprintf(stderr, "; %llu malformed frames skipped", (unsigned long long)in.bad);
	if (in.unstored > 0)
		fprintf(stderr, "; %llu messages not storable skipped",
		    (unsigned long long)in.unstored);
	fputc('\n', stderr);
	free(buf);
	if (fd > 0)
		close(fd);
	return (0);
}

/* ---------------------------------------------------------------- cat (NDJSON) */

static int
cmd_cat(struct opts *o)
{
	struct lb_store	*st;
	struct lb_msg	 m;
	uint64_t	 first, next;
	int		 rc;

	if (o->argc != 0)
		usage();
	st = open_store(o, LB_RDONLY);
	lb_store_range(st, &first, &next);
	if (o->from_id > first)
		first = o->from_id;
	if (o->to_id < next - 1)
		next = o->to_id + 1;
	for (uint64_t id = first; id < next; id++) {
		if ((rc = lb_store_get(st, id, &m)) != 0)
			die("message %llu: %s", (unsigned long long)id, lb_strerror(rc));
		if (lb_msg_json(stdout, &m) == 0)
			putchar('\n');
	}
	if (fflush(stdout) != 0)
		die("write: %s", strerror(errno));
	lb_store_close(st);
	return (0);
}

/* ---------------------------------------------------------------- deadletter (NDJSON) */

/* The dead-letter file (FORMAT.md §12) as NDJSON, one object per record, oldest first. */
static int
cmd_deadletter(struct opts *o)
{
	struct lb_dl	*dl;
	struct lb_dlrec	 r;
	char		 path[PATH_MAX], t[64];
	uint64_t	 n = 0;
	int		 rc;

	if (o->argc != 0 || o->data == NULL)
		usage();
	if ((rc = lb_path(path, sizeof(path), "%s/%s", o->data, LB_DL_FILE)) != 0)
		die("%s: %s", o->data, lb_strerror(rc));
	if ((rc = lb_dl_open(path, LB_RDONLY, &dl)) == LB_ENOTFOUND) {
		fprintf(stderr, "logbox: %s: no dead-letter file: 0 records\n", path);
		return (0);
	}
	if (rc != 0)
		die("%s: %s", path, lb_strerror(rc));
	while ((rc = lb_dl_next(dl, &r)) == 0) {
		lb_time_fmt(t, sizeof(t), r.when, 0);
		printf("{\"offset\":%llu,\"when\":\"%s\",\"when_us\":%lld,",
		    (unsigned long long)r.offset, t, (long long)r.when);
		if (r.received != LB_NOTIME) {
			lb_time_fmt(t, sizeof(t), r.received, 0);
			printf("\"received\":\"%s\",\"received_us\":%lld,", t,
			    (long long)r.received);
		} else
			fputs("\"received\":null,\"received_us\":null,", stdout);
		fputs("\"logspace\":\"", stdout);
		lb_json_bytes(stdout, (const uint8_t *)r.ls, strlen(r.ls));
		fputs("\",\"input\":\"", stdout);
		lb_json_bytes(stdout, r.input.p, r.input.len);
		fputs("\",\"reason\":\"", stdout);
		lb_json_bytes(stdout, r.reason.p, r.reason.len);
		printf("\",\"code\":%d,\"error\":\"%s\",\"batch\":%llu,\"index\":%u,"
		    "\"frame_bytes\":%zu,\"frame\":\"", (int)r.code, lb_strerror(r.code),
		    (unsigned long long)r.batch, (unsigned)r.index, r.frame.len);
		lb_json_bytes(stdout, r.frame.p, r.frame.len);
		fputs("\"}\n", stdout);
		n++;
	}
	if (fflush(stdout) != 0)
		die("write: %s", strerror(errno));
	lb_dl_close(dl);
	if (rc != LB_ENOTFOUND)
		die("%s: after %llu records: %s (a record torn by a kill is cut off when indexd "
		    "next writes the file)", path, (unsigned long long)n, lb_strerror(rc));
	fprintf(stderr, "logbox: %s: %llu records\n", path, (unsigned long long)n);
	return (0);
}

/* ---------------------------------------------------------------- lookup */

static int
cmd_lookup(struct opts *o)
{
	static const struct { const char *name; uint8_t ns; } fields[] = {
		{ "text", LB_NS_TEXT }, { "host", LB_NS_HOST }, { "program", LB_NS_PROGRAM },
		{ "pid", LB_NS_PID }, { "msgid", LB_NS_MSGID }, { "facility", LB_NS_FACILITY },
		{ "severity", LB_NS_SEVERITY }, { "sd", LB_NS_SD }, { "peer", LB_NS_PEER },
	};
	struct lb_store		*st;
	struct lb_postings	 p;
	uint8_t			 term[1 + 512];
	const char		*arg;
	size_t			 len, n = 0;
	int			 ns = -1, rc;

	if (o->argc != 1)
		usage();
	arg = o->argv[0];
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strcmp(o->field, fields[i].name) == 0)
			ns = fields[i].ns;
	if (ns < 0)
		die("unknown field %s", o->field);
	term[n++] = (uint8_t)ns;
	if (ns == LB_NS_FACILITY || ns == LB_NS_SEVERITY) {
		uint64_t v = parse_u64(arg, o->field);

		if (v > 23)
			die("%s: out of range: %s", o->field, arg);
		term[n++] = (uint8_t)v;
	} else {
		len = strlen(arg);
		if (len > sizeof(term) - 1)
			die("term too long");
		for (size_t i = 0; i < len; i++) {
			uint8_t c = (uint8_t)arg[i];

			/* sd terms are "sdid.param=value": the '=' is the 0x00 separator. */
			if (ns == LB_NS_SD && c == '=' && memchr(term + 1, 0, n - 1) == NULL)
				c = 0;
			else if (c >= 'A' && c <= 'Z' && !(ns == LB_NS_SD &&
			    memchr(term + 1, 0, n - 1) == NULL))
				c += 32;
			term[n++] = c;
		}
		if (ns == LB_NS_TEXT && n > 1 + LB_TOKEN_MAX)
			n = 1 + LB_TOKEN_MAX;
	}
	st = open_store(o, LB_RDONLY);
	memset(&p, 0, sizeof(p));
	if ((rc = lb_store_lookup(st, term, n, o->prefix, &p)) != 0)
		die("lookup: %s", lb_strerror(rc));
	for (size_t i = 0; i < p.n; i++)
		printf("%llu\n", (unsigned long long)p.ids[i]);
	lb_postings_free(&p);
	lb_store_close(st);
	if (fflush(stdout) != 0)
		die("write: %s", strerror(errno));
	return (0);
}

/* ---------------------------------------------------------------- keys and seals */

/* RFC 3339 UTC with seconds, of µs since the epoch. */
static void
fmt_time(char *buf, size_t len, int64_t us)
{
	time_t		t = (time_t)(us / 1000000);
	struct tm	tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --key HEX, or @FILE holding it: the verification key. */
static void
read_key(struct opts *o)
{
	char	buf[256];
	FILE	*f;
	int	 rc;

	if (o->key[0] == '@') {
		if ((f = fopen(o->key + 1, "r")) == NULL)
			die("--key: %s: %s", o->key + 1, strerror(errno));
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = '\0';
		fclose(f);
	} else
		snprintf(buf, sizeof(buf), "%s", o->key);
	if ((rc = lb_seal_key_parse(buf, o->vkey)) != 0)
		die("--key: not a verification key (64 hex digits)");
	o->has_key = 1;
	memset(buf, 0, sizeof(buf));
}

/*
 * keys init: sets sealing up and shows the verification key once (stdout, and with
 * --key-file FILE also that file, mode 0600, for automation). It is not kept on the box.
 */
static int
cmd_keys(struct opts *o)
{
	uint8_t		k[LB_SEAL_KEYLEN];
	char		hex[2 * LB_SEAL_KEYLEN + 1];
	uint64_t	interval = o->interval ? o->interval : LB_SEAL_INTERVAL_DEFAULT / 1000000;
	FILE		*f;
	int		 rc, fd;

	if (o->argc != 1 || strcmp(o->argv[0], "init") != 0 || o->data == NULL)
		usage();
	if (interval > UINT64_MAX / 1000000)
		die("--interval: too long");
	if ((rc = lb_seal_init(o->data, interval * 1000000, k)) == EEXIST)
		die("%s: sealing is set up already (%s): its verification key was shown when it "
		    "was", o->data, LB_SEAL_FILE);
	else if (rc == LB_EBADCONF)
		die("--interval: %llu to %llu seconds", LB_SEAL_INTERVAL_MIN / 1000000,
		    LB_SEAL_INTERVAL_MAX / 1000000);
	else if (rc != 0)
		die("%s: setting sealing up: %s", o->data, lb_strerror(rc));
	if ((rc = lb_sign_init(o->data)) != 0 && rc != EEXIST)
		die("%s: making the signing key: %s", o->data, lb_strerror(rc));
	for (int i = 0; i < LB_SEAL_KEYLEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", k[i]);
	memset(k, 0, sizeof(k));
	if (o->key_file != NULL) {
		if ((fd = open(o->key_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1 ||
		    (f = fdopen(fd, "w")) == NULL)
			die("--key-file: %s: %s", o->key_file, strerror(errno));
		fprintf(f, "%s\n", hex);
		if (fclose(f) != 0)
			die("--key-file: %s: %s", o->key_file, strerror(errno));
	}
	printf("Sealing is set up: %s, a new epoch every %llu s.\n"
	    "The verification key, shown this once and not kept on this box:\n\n"
	    "    %s\n\n"
	    "Keep it off the box. `logbox verify --key KEY` checks every seal with it.\n"
	    "Days are signed with %s/%s; keep a copy of its public key, %s/%s\n"
	    "(`logbox verify --pubkey FILE` checks the day roots with your copy).\n",
	    LB_SEAL_FILE, (unsigned long long)interval, hex, o->data, LB_SIGN_KEY_FILE, o->data,
	    LB_SIGN_PUB_FILE);
	memset(hex, 0, sizeof(hex));
	return (fflush(stdout) == 0 ? 0 : 1);
}

/* seal: the seal of the epoch now, when it is due (or --force). */
static int
cmd_seal(struct opts *o)
{
	struct lb_catalog	*cat;
	uint64_t		 e;
	int			 rc;

	if (o->argc != 0 || o->data == NULL)
		usage();
	if ((rc = lb_catalog_open(o->data, LB_RDONLY, &cat)) != 0)
		die("%s: catalog: %s", o->data, lb_strerror(rc));
	rc = lb_seal_run(o->data, cat, o->force, &e);
	lb_catalog_close(cat);
	if (rc == ENOENT)
		die("%s: sealing is not set up (logbox keys init)", o->data);
	if (rc != 0)
		die("%s: seal: %s", o->data, lb_strerror(rc));
	if (e == 0)
		printf("not due\n");
	else
		printf("sealed epoch %llu\n", (unsigned long long)e);
	return (0);
}

/* ---------------------------------------------------------------- verify, stats */

struct vrep {
	int	*problems;
	json_t	*list;		/* --json: the problems, else NULL (stderr) */
};

/* The day (YYYY-MM-DD) a path under a day's folder names, or "" (FORMAT.md §1). */
static void
path_day(const char *path, char out[11])
{
	out[0] = '\0';
	for (const char *p = path; *p != '\0'; p++) {
		if (p[0] == '/' && strlen(p) >= 11 && p[5] == '/' && p[8] == '-' &&
		    (p[11] == '\0' || p[11] == '/')) {
			int ok = 1;

			for (int k = 1; k <= 10; k++)
				if (k != 5 && k != 8 && (p[k] < '0' || p[k] > '9'))
					ok = 0;
			if (ok) {
				snprintf(out, 11, "%.4s-%.2s-%.2s", p + 1, p + 6, p + 9);
				return;
			}
		}
	}
}

static void
verify_report(void *arg, const char *path, const char *what)
{
	struct vrep	*r = arg;
	char		 day[11];

	(*r->problems)++;
	if (r->list == NULL) {
		fprintf(stderr, "logbox: verify: %s: %s\n", path, what);
		return;
	}
	path_day(path, day);
	json_array_append_new(r->list, json_pack("{s:s, s:s, s:s?}", "path", path, "what", what,
	    "day", day[0] != '\0' ? day : NULL));
}

static json_t *
jtime(int64_t us)
{
	char t[40];

	if (us == 0)
		return (json_null());
	lb_time_fmt(t, sizeof(t), us, 0);
	return (json_string(t));
}

/* verify --json: logspace ls's object (st verified, with problems). */
static json_t *
verify_json(const struct opts *o, struct lb_store *st, const char *ls, json_t *problems,
    int ok)
{
	struct lb_storestats	 ss;
	struct lb_sealinfo	 si;
	struct lb_dayinfo	 di;
	json_t			*days = json_array(), *obj;
	char			 d[16];

	memset(&ss, 0, sizeof(ss));
	(void)lb_store_stats(st, &ss);
	lb_store_seal_info(st, &si);
	for (size_t i = 0; i < lb_store_day_count(st); i++) {
		lb_store_day_info(st, i, &di);
		snprintf(d, sizeof(d), "%04u-%02u-%02u", di.day / 10000 % 10000,
		    di.day / 100 % 100, di.day % 100);
		json_array_append_new(days, json_pack("{s:s, s:I, s:b, s:b, s:o, s:o, s:s, s:s, s:I}",
		    "day", d, "messages", (json_int_t)di.messages, "intact", di.problems == 0,
		    "chained", di.records > 0, "sealed_epoch", di.seal_epoch ?
		    json_integer((json_int_t)di.seal_epoch) : json_null(), "sealed_through",
		    jtime(di.sealed_time), "signed", di.signed_ > 0 ? "yes" : di.signed_ < 0 ? "bad" :
		    "no", "timestamped", di.stamped > 0 ? "yes" : di.stamped < 0 ? "bad" : "no",
		    "problems", (json_int_t)di.problems));
	}
	obj = json_pack("{s:s, s:b, s:I, s:I, s:I, s:{s:b, s:o, s:o, s:o, s:o, s:I, s:b}, "
	    "s:I, s:I, s:o, s:o}", "logspace", ls, "ok", ok, "messages", (json_int_t)ss.messages,
	    "day_count", (json_int_t)ss.days, "segments", (json_int_t)ss.segments,
	    "sealing", "setup", si.setup, "key_epoch", si.setup ?
	    json_integer((json_int_t)si.key_epoch) : json_null(), "first_epoch", si.seals ?
	    json_integer((json_int_t)si.first) : json_null(), "last_epoch", si.seals ?
	    json_integer((json_int_t)si.last) : json_null(), "last_sealed", jtime(si.last_time),
	    "seals", (json_int_t)si.seals, "checked_with_key", o->has_key,
	    "days_signed", (json_int_t)si.days_signed, "days_timestamped",
	    (json_int_t)si.days_stamped, "problems", problems, "days", days);
	return (obj);
}

/*
 * Verifies one logspace: its problems are reported on stderr and added to *problems. 0 when
 * it is sound, 1 when a problem was found.
 */
static int
verify_one(struct opts *o, const char *ls, int *problems)
{
	struct lb_store		*st;
	struct lb_storestats	 ss;
	struct lb_sealinfo	 si;
	struct vrep		 rep = { problems, NULL };
	int			 rc, before = *problems;

	if ((rc = lb_store_open(o->data, ls, LB_RDONLY, &st)) != 0) {
		(*problems)++;
		if (o->json) {
			char what[256];

			snprintf(what, sizeof(what), "cannot open: %s", lb_strerror(rc));
			json_array_append_new(o->report, json_pack("{s:s, s:b, s:[{s:s, s:s}]}",
			    "logspace", ls, "ok", 0, "problems", "path", o->data, "what", what));
			return (1);
		}
		fprintf(stderr, "logbox: verify: %s/%s: cannot open: %s\n", o->data, ls,
		    lb_strerror(rc));
		return (1);
	}
	if (o->json)
		rep.list = json_array();
	if (o->has_key)
		lb_store_set_verify_key(st, o->vkey);
	if (o->pubkey != NULL)
		lb_store_set_verify_pubkey(st, o->pubkey);
	lb_store_set_verify_fast(st, o->integrity);
	if (o->tsa_ca != NULL)
		lb_store_set_verify_tsa_ca(st, o->tsa_ca);
	rc = lb_store_verify(st, verify_report, &rep);
	if (rc != 0 && rc != LB_ECORRUPT) {
		char path[PATH_MAX + 80];

		snprintf(path, sizeof(path), "%s/%s", o->data, ls);
		verify_report(&rep, path, lb_strerror(rc));
	} else if (rc == LB_ECORRUPT && *problems == before)
		(*problems)++;
	if (o->json) {
		json_array_append_new(o->report, verify_json(o, st, ls, rep.list,
		    *problems == before));
		lb_store_close(st);
		return (*problems == before ? 0 : 1);
	}
	if (*problems == before) {
		if ((rc = lb_store_stats(st, &ss)) != 0)
			die("stats: %s", lb_strerror(rc));
		lb_store_seal_info(st, &si);
		printf("ok: %s/%s: %llu messages in %llu days, %llu segments", o->data, ls,
		    (unsigned long long)ss.messages, (unsigned long long)ss.days,
		    (unsigned long long)ss.segments);
		if (si.days_signed > 0)
			printf("; %llu days signed", (unsigned long long)si.days_signed);
		if (si.days_stamped > 0)
			printf("; %llu days time-stamped%s", (unsigned long long)si.days_stamped,
			    o->tsa_ca != NULL ? "" : " (their TSA not checked: no --tsa-ca)");
		if (!si.setup)
			printf("; not sealed (no sealing key)\n");
		else if (si.seals == 0)
			printf("; no seal yet (the key is at epoch %llu)\n",
			    (unsigned long long)si.key_epoch);
		else {
			char when[40];

			fmt_time(when, sizeof(when), si.last_time);
			printf("; sealed through epoch %llu at %s, %s\n",
			    (unsigned long long)si.last, when, o->has_key ?
			    "every seal checked with the verification key" :
			    "seals not checked (no --key)");
		}
	}
	lb_store_close(st);
	return (*problems == before ? 0 : 1);
}

struct verify_names {
	char	**v;
	size_t	  n;
};

static int
verify_name_add(void *arg, const char *name)
{
	struct verify_names	*ns = arg;
	char			**v;

	if ((v = reallocarray(ns->v, ns->n + 1, sizeof(*v))) == NULL)
		return (errno);
	ns->v = v;
	if ((ns->v[ns->n] = strdup(name)) == NULL)
		return (errno);
	ns->n++;
	return (0);
}

/* verify --json: the document, to stdout, and with --out to FILE (FILE.tmp, then rename). */
static void
verify_json_out(struct opts *o, int bad, int problems)
{
	json_t	*doc;
	char	*text, tmp[PATH_MAX];
	FILE	*f;

	doc = json_pack("{s:o, s:s, s:b, s:b, s:s?, s:s?, s:b, s:i, s:o}", "time",
	    jtime(now_real_us()), "data", o->data, "integrity_only", o->integrity,
	    "checked_with_key", o->has_key, "pubkey", o->pubkey, "tsa_ca", o->tsa_ca, "ok", !bad,
	    "problems", problems, "logspaces", o->report);
	if (doc == NULL || (text = json_dumps(doc, JSON_COMPACT)) == NULL)
		die("verify --json: out of memory");
	json_decref(doc);
	o->report = NULL;
	if (o->out != NULL) {
		if (snprintf(tmp, sizeof(tmp), "%s.tmp", o->out) >= (int)sizeof(tmp))
			die("--out: path too long");
		if ((f = fopen(tmp, "we")) == NULL)
			die("--out: %s: %s", tmp, strerror(errno));
		if (fprintf(f, "%s\n", text) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0 ||
		    fclose(f) != 0 || rename(tmp, o->out) != 0)
			die("--out: %s: %s", o->out, strerror(errno));
	} else
		printf("%s\n", text);
	free(text);
}

/*
 * verify: --logspace L checks L; without it every logspace the catalog knows is checked, and
 * the exit status is 1 when any of them has a problem.
 */
static int
cmd_verify(struct opts *o)
{
	struct lb_catalog	*cat;
	struct verify_names	 ns = { NULL, 0 };
	size_t			 i;
	int			 rc, problems = 0, bad = 0;

	if (o->argc != 0 || o->data == NULL || (o->out != NULL && !o->json))
		usage();
	if (o->key != NULL)
		read_key(o);
	if (o->json)
		o->report = json_array();
	if (o->ls_given)
		bad = verify_one(o, o->ls, &problems);
	else {
		if ((rc = lb_catalog_open(o->data, LB_RDONLY, &cat)) != 0)
			die("%s: catalog: %s", o->data, lb_strerror(rc));
		rc = lb_catalog_logspaces(cat, verify_name_add, &ns);
		lb_catalog_close(cat);
		if (rc != 0) {
			problems++;
			fprintf(stderr, "logbox: verify: %s/catalog: listing logspaces: %s\n",
			    o->data, lb_strerror(rc));
			bad = 1;
		}
		for (i = 0; i < ns.n; i++) {
			bad |= verify_one(o, ns.v[i], &problems);
			free(ns.v[i]);
		}
		free(ns.v);
	}
	if (o->json)
		verify_json_out(o, bad, problems);
	if (bad) {
		fprintf(stderr, "logbox: verify: %d problem%s found\n", problems,
		    problems == 1 ? "" : "s");
		return (1);
	}
	return (0);
}

static int
cmd_stats(struct opts *o)
{
	struct lb_store		*st;
	struct lb_storestats	 ss;
	uint64_t		 disk;
	int			 rc;

	if (o->argc != 0)
		usage();
	st = open_store(o, LB_RDONLY);
	if ((rc = lb_store_stats(st, &ss)) != 0)
		die("stats: %s", lb_strerror(rc));
	disk = ss.messages_bytes + ss.index_bytes + ss.catalog_bytes;
	if (o->json)
		printf("{\"logspace\":\"%s\",\"messages\":%llu,\"days\":%llu,\"segments\":%llu,"
		    "\"raw_bytes\":%llu,\"disk_bytes\":%llu,\"messages_bytes\":%llu,"
		    "\"index_bytes\":%llu,\"catalog_bytes\":%llu}\n", o->ls,
		    (unsigned long long)ss.messages, (unsigned long long)ss.days,
		    (unsigned long long)ss.segments, (unsigned long long)ss.raw_bytes,
		    (unsigned long long)disk, (unsigned long long)ss.messages_bytes,
		    (unsigned long long)ss.index_bytes, (unsigned long long)ss.catalog_bytes);
	else
		printf("logspace     %s\nmessages     %llu\ndays         %llu\nsegments     %llu\n"
		    "raw bytes    %llu\non disk      %llu (%.1f %% of raw: messages %llu, "
		    "index %llu, catalog %llu)\n", o->ls, (unsigned long long)ss.messages,
		    (unsigned long long)ss.days, (unsigned long long)ss.segments,
		    (unsigned long long)ss.raw_bytes, (unsigned long long)disk,
		    ss.raw_bytes ? 100.0 * disk / ss.raw_bytes : 0.0,
		    (unsigned long long)ss.messages_bytes, (unsigned long long)ss.index_bytes,
		    (unsigned long long)ss.catalog_bytes);
	lb_store_close(st);
	return (0);
}

/* ---------------------------------------------------------------- reindex */

static void
reindex_progress(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	if (isatty(2))
		fprintf(stderr, "\rreindexing: %llu / %llu messages (%.0f %%)   ",
		    (unsigned long long)done, (unsigned long long)total,
		    total ? 100.0 * done / total : 100.0);
}

static int
cmd_reindex(struct opts *o)
{
	struct lb_store	*st;
	uint64_t	 first, next;
	double		 t0 = now_s();
	int		 rc;

	if (o->argc != 0)
		usage();
	st = open_store(o, LB_RDWR);
	if ((rc = lb_store_reindex(st, reindex_progress, NULL)) != 0)
		die("reindex: %s", lb_strerror(rc));
	lb_store_range(st, &first, &next);
	if ((rc = lb_store_close(st)) != 0)
		die("closing the store: %s", lb_strerror(rc));
	if (isatty(2))
		fputc('\n', stderr);
	fprintf(stderr, "logbox: reindexed %llu messages in %.3f s\n",
	    (unsigned long long)(next - first), now_s() - t0);
	return (0);
}

/* ---------------------------------------------------------------- dump */

static void
print_term(FILE *f, const uint8_t *t, size_t len)
{
	static const char *ns[] = { "?", "text", "host", "program", "pid", "msgid", "facility",
	    "severity", "sd", "peer", "template", "no-template" };

	if (len == 0)
		return;
	fprintf(f, "%s:", t[0] < sizeof(ns) / sizeof(ns[0]) ? ns[t[0]] : "?");
	if (t[0] == LB_NS_FACILITY || t[0] == LB_NS_SEVERITY) {
		fprintf(f, "%u", len > 1 ? t[1] : 0);
		return;
	}
	fputc('"', f);
	for (size_t i = 1; i < len; i++) {
		if (t[i] == 0)
			fputs("\\0", f);
		else if (t[i] < 0x20 || t[i] >= 0x7f || t[i] == '"' || t[i] == '\\')
			fprintf(f, "\\x%02x", t[i]);
		else
			fputc(t[i], f);
	}
	fputc('"', f);
}

struct dumpctx {
	struct lb_segment	*sg;
	struct lb_postings	 p;
	int			 rc;
};

static int
dump_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct dumpctx *d = arg;

	print_term(stdout, term, len);
	printf(" df=%u ids=", df);
	d->p.n = 0;
	if ((d->rc = lb_segment_postings(d->sg, cookie, &d->p)) != 0) {
		printf("<%s>\n", lb_strerror(d->rc));
		return (d->rc);
	}
	for (size_t i = 0; i < d->p.n && i < 16; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)d->p.ids[i]);
	printf("%s\n", d->p.n > 16 ? ",..." : "");
	return (0);
}

static int
cmd_dump(struct opts *o)
{
	char			 path[PATH_MAX], dir[PATH_MAX], *base;
	size_t			 blen;
	int			 rc;

	if (o->argc != 1)
		usage();
	snprintf(path, sizeof(path), "%s", o->argv[0]);
	snprintf(dir, sizeof(dir), "%s", o->argv[0]);
	base = basename(path);
	blen = strlen(base);
	if (strcmp(base, LB_FILE_MESSAGES) == 0 || strcmp(base, LB_FILE_WAL) == 0) {
		struct lb_msgfile	*mf;
		struct lb_msg		 m;
		uint64_t		 first, next, disk, raw;

		if ((rc = lb_msgfile_open(dirname(dir), LB_RDONLY, 1, &mf)) != 0)
			die("%s: %s", o->argv[0], lb_strerror(rc));
		lb_msgfile_range(mf, &first, &next);
		lb_msgfile_sizes(mf, &disk, &raw);
		printf("message file %s\nids %llu-%llu (%llu messages), %llu bytes on disk, "
		    "%llu raw\n", o->argv[0], (unsigned long long)first,
		    (unsigned long long)next - 1, (unsigned long long)(next - first),
		    (unsigned long long)disk, (unsigned long long)raw);
		for (uint64_t id = first; id < next; id++) {
			if ((rc = lb_msgfile_get(mf, id, &m)) != 0)
				die("message %llu: %s", (unsigned long long)id, lb_strerror(rc));
			if (lb_msg_json(stdout, &m) == 0)
				putchar('\n');
		}
		lb_msgfile_close(mf);
		return (0);
	}
	if (blen > strlen(LB_SEG_SUFFIX) &&
	    strcmp(base + blen - strlen(LB_SEG_SUFFIX), LB_SEG_SUFFIX) == 0) {
		struct dumpctx		 d;
		struct lb_seginfo	 si;

		memset(&d, 0, sizeof(d));
		if ((rc = lb_segment_open(o->argv[0], &d.sg)) != 0)
			die("%s: %s", o->argv[0], lb_strerror(rc));
		lb_segment_info(d.sg, &si);
		printf("segment %s\nids %llu-%llu, %llu messages, %llu terms, %llu bytes, "
		    "version %u\n", o->argv[0], (unsigned long long)si.first_id,
		    (unsigned long long)si.last_id, (unsigned long long)si.count,
		    (unsigned long long)si.nterms, (unsigned long long)si.size, si.version);
		rc = lb_segment_terms(d.sg, NULL, 0, NULL, 0, dump_term, &d);
		lb_postings_free(&d.p);
		lb_segment_close(d.sg);
		if (rc != 0)
			die("%s: %s", o->argv[0], lb_strerror(rc));
		return (0);
	}
	die("%s: not a file logbox dumps (messages, messages.wal, *%s)", o->argv[0],
	    LB_SEG_SUFFIX);
}

int
main(int argc, char *argv[])
{
	static const struct {
		const char	*name;
		int		(*fn)(struct opts *);
	} cmds[] = {
		{ "ingest", cmd_ingest }, { "cat", cmd_cat }, { "lookup", cmd_lookup },
		{ "verify", cmd_verify }, { "stats", cmd_stats }, { "reindex", cmd_reindex },
		{ "dump", cmd_dump }, { "deadletter", cmd_deadletter }, { "keys", cmd_keys },
		{ "seal", cmd_seal },
	};
	struct opts o;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("logbox %s\n", LB_VERSION);
		return (0);
	}
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		print_usage(stdout);
		return (0);
	}
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "search") == 0)
		return (search_main(argc - 1, argv + 1));
	if (strcmp(argv[1], "archive") == 0)
		return (archive_main(argc - 1, argv + 1));
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) == 0) {
			parse_opts(argc - 1, argv + 1, &o);
			return (cmds[i].fn(&o));
		}
	}
	usage();
}
