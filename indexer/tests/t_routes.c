/*
 * t_routes.c — indexd's --routes rule file (indexd/routes.c): each condition alone (host
 * caseless, program, message on binary bytes, facility, listener), first match wins, no rules,
 * every refusal with its line, huge and binary files refused cleanly, the JIT and the
 * interpreter agreeing (also in a process that may not map executable memory, as under
 * systemd's MemoryDenyWriteExecute=), a runaway pattern giving up, and what routes_pick costs.
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "t_helper.h"
#include "indexd.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE			65
#define PR_MDWE_REFUSE_EXEC_GAIN	1
#endif

/* collector/README.md's example, and one more rule per remaining condition. */
static const char example[] =
    "bind = \"0.0.0.0\"\n"
    "[ports]\n"
    "tcp = 514\n"
    "\n"
    "[[logspace]]                 # sshd, sudo, su ... wherever they come from\n"
    "name = \"secure\"\n"
    "facility = [\"auth\", \"authpriv\"]\n"
    "\n"
    "[[logspace]]                 # the network gear, by host name\n"
    "name = \"network\"\n"
    "host = '^(sw|rtr|fw)-[0-9]+(\\.|$)'\n"
    "\n"
    "[[logspace]]                 # one application, by program\n"
    "name = \"postgres\"\n"
    "program = '^postgres'\n"
    "\n"
    "[[logspace]]                 # firewall drops from the firewalls only\n"
    "name = \"fw-drops\"\n"
    "host = '^fw-'\n"
    "message = '\\bDROP\\b'\n";

static struct routes *
load(const char *text, int flags)
{
	struct routes	*r = NULL;
	char		 err[512] = "";
	int		 rc;

	rc = routes_parse("t.toml", (const uint8_t *)text, strlen(text), flags, &r, err,
	    sizeof(err));
	if (rc != 0)
		print_error("%s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(r);
	return (r);
}

static struct lb_slice
sl(const char *s, size_t len)
{
	struct lb_slice v = { (const uint8_t *)s, s == NULL ? 0 : (len ? len : strlen(s)) };

	return (v);
}

static struct lb_msg
msg(const char *host, const char *program, int facility, const char *text, size_t textlen)
{
	struct lb_msg m;

	memset(&m, 0, sizeof(m));
	m.facility = (uint8_t)facility;
	m.severity = 5;
	m.host = sl(host, 0);
	m.program = sl(program, 0);
	m.message = sl(text, textlen);
	return (m);
}

static void
pick_is(const struct routes *r, const struct lb_msg *m, const char *listener, const char *want)
{
	assert_string_equal(routes_pick(r, m, listener), want);
}

static void
t_each_condition(void **state)
{
	for (int flags = 0; flags <= ROUTES_NOJIT; flags += ROUTES_NOJIT) {
		struct routes	*r = load(example, flags);
		struct lb_msg	 m;

		(void)state;
		assert_int_equal(routes_count(r), 4);
		m = msg("web-1", "sshd", 4, "Accepted publickey", 0);	/* auth */
		pick_is(r, &m, "tcp", "secure");
		m.facility = 10;					/* authpriv */
		pick_is(r, &m, "tcp", "secure");
		m.facility = 3;						/* daemon */
		pick_is(r, &m, "tcp", "main");
		m.facility = LB_NOVALUE;
		pick_is(r, &m, "tcp", "main");
		m = msg("sw-12.lan", "kernel", 0, "link up", 0);
		pick_is(r, &m, "udp", "network");
		m = msg("sw-12x", "kernel", 0, "link up", 0);		/* (\.|$) fails */
		pick_is(r, &m, "udp", "main");
		m = msg("db1", "postgres", 3, "checkpoint", 0);
		pick_is(r, &m, "tcp", "postgres");
		m = msg("db1", "xpostgres", 3, "checkpoint", 0);	/* anchored */
		pick_is(r, &m, "tcp", "main");
		m = msg("db1", "POSTGRES", 3, "checkpoint", 0);		/* program keeps case */
		pick_is(r, &m, "tcp", "main");
		/* message: unanchored, both conditions needed */
		m = msg("fw-a", "pf", 3, "rule 7 DROP in on em0", 0);
		pick_is(r, &m, "tcp", "fw-drops");
		m = msg("fw-a", "pf", 3, "rule 7 DROPPED", 0);
		pick_is(r, &m, "tcp", "main");
		m = msg("gw-a", "pf", 3, "rule 7 DROP in on em0", 0);
		pick_is(r, &m, "tcp", "main");
		/* absent fields are empty */
		m = msg(NULL, NULL, 3, NULL, 0);
		pick_is(r, &m, "tcp", "main");
		routes_free(r);
	}
}

static void
t_caseless_host(void **state)
{
	struct routes	*r = load("[[logspace]]\nname = \"web\"\nhost = '^web-[0-9]+$'\n", 0);
	struct lb_msg	 m = msg("WEB-7", "x", 1, "y", 0);

	(void)state;
	pick_is(r, &m, "tcp", "web");
	m.host = sl("Web-7", 0);
	pick_is(r, &m, "tcp", "web");
	m.host = sl("web-7.example", 0);
	pick_is(r, &m, "tcp", "main");
	routes_free(r);
}

static void
t_first_match_wins(void **state)
{
	struct routes	*r = load(
	    "[[logspace]]\nname = \"a\"\nprogram = 'x'\n"
	    "[[logspace]]\nname = \"b\"\nprogram = 'x'\nhost = 'h'\n"
	    "[[logspace]]\nname = \"c\"\n"				/* everything */
	    "[[logspace]]\nname = \"d\"\nprogram = 'never-reached'\n", 0);
	struct lb_msg	 m = msg("h", "x", 1, "", 0);

	(void)state;
	assert_int_equal(routes_count(r), 4);
	pick_is(r, &m, "tcp", "a");
	m.program = sl("y", 0);
	pick_is(r, &m, "tcp", "c");
	m.program = sl("never-reached", 0);
	pick_is(r, &m, "tcp", "c");
	routes_free(r);
}

static void
t_no_rules(void **state)
{
	struct routes	*r;
	struct lb_msg	 m = msg("h", "p", 1, "m", 0);
	char		 line[200];

	(void)state;
	pick_is(NULL, &m, "tcp", "main");
	assert_int_equal(routes_count(NULL), 0);
	routes_describe(NULL, line, sizeof(line));
	assert_string_equal(line, "no rules: everything to main");
	r = load("", 0);
	assert_int_equal(routes_count(r), 0);
	pick_is(r, &m, "tcp", "main");
	routes_free(r);
	/* the appliance's settings: every other table read and ignored */
	assert_ok(routes_load("../../collector/appliance.toml", &r, line, sizeof(line)));
	assert_int_equal(routes_count(r), 0);
	pick_is(r, &m, "udp", "main");
	routes_free(r);
}

static void
t_listener(void **state)
{
	struct routes	*r = load(
	    "[[logspace]]\nname = \"secure-in\"\nlistener = [\"tls\", \"octet\"]\n"
	    "[[logspace]]\nname = \"udp-auth\"\nlistener = \"udp\"\nfacility = \"auth\"\n", 0);
	struct lb_msg	 m = msg("h", "p", 4, "m", 0);

	(void)state;
	pick_is(r, &m, "tls", "secure-in");
	pick_is(r, &m, "octet", "secure-in");
	pick_is(r, &m, "tcp", "main");
	pick_is(r, &m, "udp", "udp-auth");
	m.facility = 1;
	pick_is(r, &m, "udp", "main");
	pick_is(r, &m, "bogus", "main");
	pick_is(r, &m, "", "main");
	pick_is(r, &m, NULL, "main");
	routes_free(r);
}

/* Messages are bytes: NUL and invalid UTF-8 are matched as they are, with their lengths. */
static void
t_binary_message(void **state)
{
	static const char bin[] = "ab\0cd\xff\xfe tail";
	struct routes	*r = load(
	    "[[logspace]]\nname = \"nul\"\nmessage = 'b\\x00c'\n"
	    "[[logspace]]\nname = \"ff\"\nmessage = '\\xff.\\x20t'\n"
	    "[[logspace]]\nname = \"utf\"\nmessage = \"caf\\u00e9\"\n", 0);
	struct lb_msg	 m = msg("h", "p", 1, bin, sizeof(bin) - 1);

	(void)state;
	pick_is(r, &m, "tcp", "nul");
	m.message = sl(bin + 3, sizeof(bin) - 4);		/* "cd\xff\xfe tail" */
	pick_is(r, &m, "tcp", "ff");
	m.message = sl("un caf\xc3\xa9 \xc3", 0);		/* UTF-8 bytes, then a cut one */
	pick_is(r, &m, "tcp", "utf");
	m.message = sl("ab", 1);				/* the length counts, not a NUL */
	pick_is(r, &m, "tcp", "main");
	routes_free(r);
}

struct ecase {
	const char	*text;
	int		 line;
	const char	*why;		/* a part of the message after "t.toml:LINE: " */
};

static void
t_errors(void **state)
{
	static const struct ecase cases[] = {
		/* in [[logspace]] */
		{ "[[logspace]]\nname = \"a\"\ncolour = \"red\"\n", 3, "unknown key 'colour'" },
		{ "[[logspace]]\nname = 5\n", 2, "name: expected a string" },
		{ "[[logspace]]\nname = \"Main\"\n", 2, "not [a-z0-9_-]" },
		{ "[[logspace]]\nname = \"../x\"\n", 2, "not [a-z0-9_-]" },
		{ "[[logspace]]\nname = \"a\\nb\\u00e9\"\n", 2,
		    "name 'a\\x0ab\\xc3\\xa9': logspace name not [a-z0-9_-]" },
		{ "[[logspace]]\nname = \"\"\n", 2, "length not 1..64" },
		{ "[[logspace]]\nname = \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxx\"\n", 2, "length not 1..64" },
		{ "[[logspace]]\nname = \"indexd\"\n", 2, "reserved logspace name" },
		{ "[[logspace]]\nname = \"catalog\"\n", 2, "reserved logspace name" },
		{ "# c\n\n[[logspace]]\nhost = 'x'\n", 3, "[[logspace]] without a name" },
		{ "[[logspace]]\nname = \"a\"\nprogram = 'a(b'\n", 3,
		    "program: bad regular expression at offset 3: missing closing parenthesis" },
		{ "[[logspace]]\nname = \"a\"\nhost = '[z-a]'\n", 3,
		    "host: bad regular expression at offset 3: range out of order" },
		{ "[[logspace]]\nname = \"a\"\nmessage = '(*UTF)x'\n", 3,
		    "message: bad regular expression at offset 6: using UTF is disabled" },
		{ "[[logspace]]\nname = \"a\"\nmessage = \"a\\u0000b\"\n", 3, "contains a NUL" },
		{ "[[logspace]]\nname = \"a\"\nhost = ['x']\n", 3, "host: expected a string" },
		{ "[[logspace]]\nname = \"a\"\nfacility = [\"auth\", \"nope\"]\n", 3,
		    "facility: 'nope' is not one of kern, user, mail" },
		{ "[[logspace]]\nname = \"a\"\nfacility = []\n", 3, "facility: empty list" },
		{ "[[logspace]]\nname = \"a\"\nfacility = 4\n", 3, "facility: expected a list" },
		{ "[[logspace]]\nname = \"a\"\nfacility = [\n  \"auth\",\n  4,\n]\n", 3,
		    "facility: expected a list of names" },
		{ "[[logspace]]\nname = \"a\"\nlistener = [\"tcp\", \"ssh\"]\n", 3,
		    "listener: 'ssh' is not one of tcp, octet, tls, udp" },
		{ "[[logspace]]\nname = \"a\"\nname = \"b\"\n", 3, "key 'name' defined twice" },
		{ "[logspace]\nname = \"a\"\n", 1, "[logspace] must be [[logspace]]" },
		/* syntax, anywhere */
		{ "bind = \"0.0.0.0\n", 1, "unterminated string" },
		{ "[ports]\ntcp = 514\n[ports]\n", 3, "table [ports] defined twice" },
		{ "[ports]\ntcp = 514\ntcp = 1\n", 3, "key 'tcp' defined twice" },
		{ "x = \"a\\qb\"\n", 1, "unknown escape \\q" },
		{ "x = \"a\\u12\"\n", 1, "bad \\u or \\U escape" },
		{ "x = \"\\ud800\"\n", 1, "bad \\u or \\U escape" },
		{ "x = 1.5\n", 1, "floats, dates and times are not supported" },
		{ "x = 1979-05-27\n", 1, "floats, dates and times are not supported" },
		{ "x = 0x1f\n", 1, "only decimal integers" },
		{ "x = 012\n", 1, "leading zero" },
		{ "x = 1__0\n", 1, "underscore" },
		{ "x = 99999999999999999999\n", 1, "out of range" },
		{ "x = nan\n", 1, "floats (inf, nan) are not supported" },
		{ "x = yes\n", 1, "expected a value" },
		{ "x =\n", 1, "expected a value" },
		{ "x = {a = 1}\n", 1, "inline tables are not supported" },
		{ "x = '''a'''\n", 1, "multi-line strings" },
		{ "x = \"\"\"a\"\"\"\n", 1, "multi-line strings" },
		{ "a.b = 1\n", 1, "dotted keys are not supported" },
		{ "\"a\" = 1\n", 1, "quoted keys are not supported" },
		{ "[a.b]\n", 1, "dotted table names are not supported" },
		{ "x 1\n", 1, "expected '=' after the key 'x'" },
		{ "x = 1 2\n", 1, "expected the end of the line" },
		{ "[ports\n", 1, "expected ']' after the table name" },
		{ "[[logspace]\nname = \"a\"\n", 1, "expected ']]' after the table name" },
		{ "x = [1,\n2\n", 3, "unterminated array" },
		{ "x = [1 2]\n", 1, "expected ',' or ']' in an array" },
		{ "x = [[[[[[[[[1]]]]]]]]]\n", 1, "arrays nested deeper than 8" },
		{ "=1\n", 1, "expected a key, found '='" },
		{ "\xc3\xa9 = 1\n", 1, "expected a key, found '\\xc3'" },
		/* not text */
		{ "a = 1\nb = 2\x01\n", 2, "control character 0x01" },
		{ "a = 1\r\rb = 2\n", 1, "a CR not followed by LF" },
		{ "# ok\n# \xc3\x28\n", 2, "invalid UTF-8" },
		{ "# \xed\xa0\x80\n", 1, "invalid UTF-8 (overlong or surrogate)" },
		{ "# \xe2\x82\n", 1, "invalid UTF-8 (byte 0xe2)" },
		{ "# \xe2\x82", 1, "invalid UTF-8 (cut short at the end)" },
	};
	char		 err[512], want[300];
	struct routes	*r;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = (struct routes *)0x1;
		err[0] = '\0';
		if (routes_parse("t.toml", (const uint8_t *)cases[i].text, strlen(cases[i].text),
		    0, &r, err, sizeof(err)) == 0)
			fail_msg("case %zu accepted: %s", i, cases[i].text);
		assert_ptr_equal(r, (struct routes *)0x1);	/* untouched on failure */
		snprintf(want, sizeof(want), "t.toml:%d: ", cases[i].line);
		if (strncmp(err, want, strlen(want)) != 0 || strstr(err, cases[i].why) == NULL)
			fail_msg("case %zu: got \"%s\", want \"%s...%s\"", i, err, want,
			    cases[i].why);
	}
}

/* A NUL byte in a file, binary files, huge files, a directory, a missing file. */
static void
t_files(void **state)
{
	static const char nul[] = "a = 1\n\n[[logspace]]\nname = \"x\0y\"\n";
	char		 dir[256], path[300], err[512];
	struct routes	*r = NULL;
	uint8_t		*big;
	FILE		*f;
	uint8_t		 junk[4096];

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/nul.toml", dir);
	t_write_file(path, nul, sizeof(nul) - 1);
	assert_int_equal(routes_load(path, &r, err, sizeof(err)), EINVAL);
	assert_non_null(strstr(err, "nul.toml:4: a NUL byte"));

	/* a binary file: refused at its first bad byte, whatever comes after */
	srandom(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)random();
	junk[0] = 0xff;
	snprintf(path, sizeof(path), "%s/bin.toml", dir);
	t_write_file(path, junk, sizeof(junk));
	assert_int_equal(routes_load(path, &r, err, sizeof(err)), EINVAL);
	assert_non_null(strstr(err, "bin.toml:1: invalid UTF-8 (byte 0xff)"));

	/* 1 MiB + 1 of comments: refused without being read */
	snprintf(path, sizeof(path), "%s/huge.toml", dir);
	assert_non_null(f = fopen(path, "wb"));
	for (int i = 0; i < 1024 * 1024 / 16; i++)
		fputs("# fifteen bytes\n", f);
	fputs("x", f);
	fclose(f);
	assert_int_equal(routes_load(path, &r, err, sizeof(err)), EFBIG);
	assert_non_null(strstr(err, "huge.toml: 1048577 bytes, more than a rule file may have"));
	assert_int_equal(truncate(path, 1024 * 1024), 0);
	assert_ok(routes_load(path, &r, err, sizeof(err)));	/* exactly 1 MiB is fine */
	routes_free(r);
	r = NULL;
	/* and the bytes a caller hands over */
	assert_non_null(big = calloc(1, 1024 * 1024 + 1));
	assert_int_equal(routes_parse("m", big, 1024 * 1024 + 1, 0, &r, err, sizeof(err)),
	    EFBIG);
	assert_string_equal(err, "m: 1048577 bytes, more than a rule file may have (1048576)");
	free(big);

	assert_int_equal(routes_load(dir, &r, err, sizeof(err)), EINVAL);
	assert_non_null(strstr(err, ": not a regular file"));
	snprintf(path, sizeof(path), "%s/none.toml", dir);
	assert_int_equal(routes_load(path, &r, err, sizeof(err)), ENOENT);
	assert_non_null(strstr(err, "none.toml: No such file or directory"));
	assert_null(r);
	t_rmtree(dir);
}

/* TOML that collector.toml may hold: every construct the subset takes. */
static void
t_syntax(void **state)
{
	struct routes	*r = load(
	    "\xef\xbb\xbf# a BOM, then comments and blank lines\r\n"
	    "\r\n"
	    "top = -5_000   # integers, signs, underscores\n"
	    "flag = true\n"
	    "other = false\n"
	    "list = [ [1, 2], [\"a\", 'b'], ]  # nested, trailing comma\n"
	    "[ tls ]\n"
	    "cert = \"/x/\\\"quoted\\\"\\\\\\t\\u00e9\\U0001F600\"\n"
	    "[[other]]\n"
	    "a = 1\n"
	    "[[other]]\n"
	    "a = 2\n"
	    "[[logspace]]\n"
	    "\tname = \"t1\"\t# tabs\n"
	    "  facility = [   # a list over lines\n"
	    "    \"local0\",  # with comments\n"
	    "\n"
	    "    \"local7\"\n"
	    "  ]\n"
	    "  message = \"\\\\d{3} \\\"x\\\"\"\n"
	    "[[logspace]]\n"
	    "name = \"t2\"\n"
	    "program = ''\n", 0);
	struct lb_msg	 m = msg("h", "p", 23, "code 404 \"x\"", 0);
	char		 line[400];

	(void)state;
	assert_int_equal(routes_count(r), 2);
	pick_is(r, &m, "tcp", "t1");
	m.facility = 17;
	pick_is(r, &m, "tcp", "t2");
	routes_describe(r, line, sizeof(line));
	assert_string_equal(line, "2 rules: t1 (facility local0,local7 message '\\d{3} "
	    "\"x\"'), t2 (program '')");
	routes_free(r);
}

static void
t_describe(void **state)
{
	struct routes	*r = load(example, 0);
	char		 line[400], small[40];

	(void)state;
	routes_describe(r, line, sizeof(line));
	assert_string_equal(line, "4 rules: secure (facility auth,authpriv), network (host "
	    "'^(sw|rtr|fw)-[0-9]+(\\.|$)'), postgres (program '^postgres'), fw-drops (host "
	    "'^fw-' message '\\bDROP\\b')");
	routes_describe(r, small, sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_string_equal(small + sizeof(small) - 4, "...");
	routes_free(r);
	r = load("[[logspace]]\nname = \"all\"\n[[logspace]]\nname = \"l\"\nlistener = ['udp']\n"
	    "message = \"a'\\tb\"\n", ROUTES_NOJIT);
	routes_describe(r, line, sizeof(line));
	assert_string_equal(line, "2 rules: all (everything), l (listener udp message "
	    "'a\\'\\x09b'); regular expressions interpreted (no PCRE2 JIT)");
	routes_free(r);
}

/* A pattern that backtracks without end gives up at the match limit: no match, counted. */
static void
t_runaway(void **state)
{
	char		 text[64];
	struct lb_msg	 m;

	(void)state;
	memset(text, 'a', sizeof(text) - 2);
	text[sizeof(text) - 2] = 'b';
	text[sizeof(text) - 1] = '\0';
	m = msg("h", "p", 1, text, 0);
	for (int flags = 0; flags <= ROUTES_NOJIT; flags += ROUTES_NOJIT) {
		struct routes *r = load("[[logspace]]\nname = \"x\"\nmessage = '^(a+)+$'\n", flags);

		pick_is(r, &m, "tcp", "main");
		assert_int_equal(routes_errors(r), 1);
		routes_free(r);
	}
}

/*
 * Where executable memory cannot be mapped (systemd's MemoryDenyWriteExecute=, the same
 * kernel rule as PR_SET_MDWE), the JIT fails and every pattern is interpreted: same picks.
 * In a new program (exec): a forked child would reuse the JIT memory its parent mapped.
 */
static int
no_jit_memory_child(void)
{
	struct routes	*r;
	struct lb_msg	 m = msg("fw-a", "pf", 3, "x DROP y", 0);
	char		 line[600];

	int		 rc = 0;

	r = load(example, 0);
	routes_describe(r, line, sizeof(line));
	if (strstr(line, "interpreted (no PCRE2 JIT)") == NULL) {
		fprintf(stderr, "JIT where it should fail: %s\n", line);
		rc = 1;
	}
	if (strcmp(routes_pick(r, &m, "tcp"), "fw-drops") != 0)
		rc = 2;
	routes_free(r);
	return (rc);
}

static void
t_no_jit_memory(void **state)
{
	char	*argv[] = { "t_routes", "no-jit-memory", NULL };
	pid_t	 pid;
	int	 st;

	(void)state;
	if ((pid = fork()) == 0) {
		if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) != 0)
			_exit(77);		/* an older kernel: nothing to check */
		execv("/proc/self/exe", argv);
		_exit(78);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		print_message("PR_SET_MDWE not supported: skipped\n");
	else
		assert_int_equal(WEXITSTATUS(st), 0);
}

static double
ns_per_pick(const struct routes *r, const struct lb_msg *m, const char *want, long n)
{
	struct timespec	 a, b;
	const char	*got = NULL;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		got = routes_pick(r, m, "tcp");
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_string_equal(got, want);
	return (((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
	    (double)n);
}

/*
 * What routes_pick costs on the example's 4 rules, a 150-byte message: one that no rule takes
 * (every rule tried), and one that the last rule takes after scanning the whole message for
 * \bDROP\b. Printed, not asserted (timing belongs in benchmarks): under the sanitizers the
 * figures are several times the release build's (indexd/README.md "Routing" has those).
 */
static void
t_cost(void **state)
{
	static const char line[] =
	    "<30>Nov 25 21:53:28 web-42 nginx[1234]: 192.0.2.7 - - \"GET /api/v1/items?page=3 "
	    "HTTP/1.1\" 200 5123 \"-\" \"curl/7.88.1\" rt=0.004 uct=0.001 uht=0.003 up=a";
	static const char drop[] =
	    "<30>Nov 25 21:53:28 fw-ed pf[1234]: rule 7 in on em0 from 192.0.2.7 port 51234 to "
	    "198.51.100.9 port 443 proto tcp flags S len 60 ttl 52 then DROP now.";
	long		 n = getenv("T_ROUTES_N") ? atol(getenv("T_ROUTES_N")) : 200000;
	struct lb_msg	 m, d;

	(void)state;
	assert_int_equal(strlen(line), 150);
	assert_int_equal(strlen(drop), 150);
	lb_syslog_parse((const uint8_t *)line, strlen(line), 1, &m);
	lb_syslog_parse((const uint8_t *)drop, strlen(drop), 1, &d);
	for (int flags = 0; flags <= ROUTES_NOJIT; flags += ROUTES_NOJIT) {
		struct routes *r = load(example, flags);

		print_message("routes_pick, 4 rules, 150-byte message, %s: %.0f ns to main, "
		    "%.0f ns to fw-drops\n", flags ? "interpreted" : "JIT",
		    ns_per_pick(r, &m, "main", n), ns_per_pick(r, &d, "fw-drops", n));
		routes_free(r);
	}
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_each_condition),
		cmocka_unit_test(t_caseless_host),
		cmocka_unit_test(t_first_match_wins),
		cmocka_unit_test(t_no_rules),
		cmocka_unit_test(t_listener),
		cmocka_unit_test(t_binary_message),
		cmocka_unit_test(t_errors),
		cmocka_unit_test(t_files),
		cmocka_unit_test(t_syntax),
		cmocka_unit_test(t_describe),
		cmocka_unit_test(t_runaway),
		cmocka_unit_test(t_no_jit_memory),
		cmocka_unit_test(t_cost),
	};
	if (argc == 2 && strcmp(argv[1], "no-jit-memory") == 0)
		return (no_jit_memory_child());
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
