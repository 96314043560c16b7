/*
 * t_format.c — lib/lb_format.h and FORMAT.md agree, and logbox.h's query limits and QUERY.md.
 * Each row of a table names a constant of the headers and its value; the document must define
 * it as "`NAME` = value" (a number in decimal or 0x hex, or a `backquoted` string: the
 * convention of FORMAT.md §2), and every such occurrence must carry the header's value. Modules
 * add their rows to the tables.
 */
#include "t_helper.h"
#include "lb_format.h"

#include <ctype.h>

struct konst {
	const char		*name;
	const char		*str;	/* a string constant, or NULL for a number */
	unsigned long long	 num;
};

#define NUM(x)	{ #x, NULL, (unsigned long long)(x) }
#define STR(x)	{ #x, x, 0 }

static const struct konst konsts[] = {
	/* directory tree and limits */
	STR(LB_DIR_CATALOG),
	STR(LB_DIR_INDEXD),
	STR(LB_DIR_SPOOL),
	STR(LB_DIR_COLLECTOR),
	STR(LB_DIR_ACCOUNTS),
	STR(LB_DIR_RUN),
	STR(LB_DIR_TLS),
	NUM(LB_MSG_MAX),
	NUM(LB_FIELD_MAX),
	NUM(LB_SD_MAX),
	NUM(LB_TOKEN_MAX),
	NUM(LB_NAME_MAX),
	NUM(LB_TIMEMAP_STEP),
	/* message file (lb_msgfile.c, the block codec lb_block.c) */
	NUM(LB_BLK_STORED),
	NUM(LB_BLK_DEFLATE),
	NUM(LB_BLK_ZSTD),
	NUM(LB_BLK_COLS),
	NUM(LB_BLK_TPL),
	NUM(LB_BLOCK_RAW_TARGET),
	NUM(LB_BLOCK_RAW_MAX),
	NUM(LB_REC_MIN),
	/* catalog (lb_catalog.c) */
	NUM(LB_CAT_VERSION),
	NUM(LB_CAT_VERSION_MIN),
	NUM(LB_CAT_MAGIC),
	NUM(LB_CAT_MAXDBS),
	NUM(LB_CAT_MAPSIZE),
	STR(LB_CAT_DB_META),
	STR(LB_CAT_DB_LOGSPACES),
	STR(LB_CAT_DB_SEGMENTS),
	STR(LB_CAT_DB_DAYS),
	STR(LB_CAT_DB_TIMEMAP),
	STR(LB_CAT_DB_STATE),
	STR(LB_CAT_META_KEY),
	NUM(LB_CAT_META_SIZE),
	NUM(LB_CAT_VALUE_V1),
	NUM(LB_CAT_LSCONF_SIZE),
	NUM(LB_CAT_SEGREF_SIZE),
	NUM(LB_CAT_DAYREF_SIZE),
	NUM(LB_CAT_TIMEMAP_SIZE),
	NUM(LB_CAT_STATE_SIZE),
	NUM(LB_CAT_TIME_BIAS),
	/* dead-letter file (lb_deadletter.c) */
	STR(LB_DL_FILE),
	NUM(LB_DL_MAGIC),
	NUM(LB_DL_VERSION),
	NUM(LB_DL_FHDR_SIZE),
	NUM(LB_DL_REC_MAGIC),
	NUM(LB_DL_RHDR_SIZE),
	NUM(LB_DL_BODY_MIN),
	NUM(LB_DL_FRAME_MAX),
	/* hash chain (lb_chain.c) */
	NUM(LB_CHAIN_MAGIC),
	NUM(LB_CHR_HDR_SIZE),
	NUM(LB_CHR_TRAILER_SIZE),
	NUM(LB_CHR_MAX),
	NUM(LB_CH_GENESIS),
	NUM(LB_CH_BLOCK),
	NUM(LB_CH_SEGMENT),
	NUM(LB_CH_TOMB),
	NUM(LB_CHF_RECOVERED),
	NUM(LB_CH_GENESIS_BODY),
	NUM(LB_CH_BLOCK_BODY),
	NUM(LB_CH_SEGMENT_BODY),
	NUM(LB_CH_TOMB_BODY),
	NUM(LB_CH_SEAL),
	NUM(LB_CH_SEAL_BODY),
	NUM(LB_CH_DAYROOT),
	NUM(LB_CH_DAYROOT_BODY),
	STR(LB_SIGN_KEY_FILE),
	STR(LB_SIGN_PUB_FILE),
	STR(LB_SIGN_TAG),
	NUM(LB_SIGN_TAG_LEN),
	NUM(LB_SIGN_MSG_LEN),
	NUM(LB_SIGN_SIG_LEN),
	STR(LB_FILE_TSR),
	NUM(LB_CHT_SIGNED),
	STR(LB_TOMB_TAG),
	NUM(LB_TOMB_MSG_LEN),
	NUM(LB_TSR_MAX),
	STR(LB_FILE_ROOT_SENT),
	/* seals (lb_seal.c) */
	STR(LB_SEAL_FILE),
	NUM(LB_SEAL_MAGIC),
	NUM(LB_SEAL_VERSION),
	NUM(LB_SEAL_SLOT_SIZE),
	STR(LB_SEAL_RATCHET_TAG),
	NUM(LB_SEAL_RATCHET_TAG_LEN),
	STR(LB_SEAL_MAC_TAG),
	NUM(LB_SEAL_MAC_TAG_LEN),
	NUM(LB_SEAL_INTERVAL_MIN),
	NUM(LB_SEAL_INTERVAL_MAX),
	NUM(LB_SEAL_INTERVAL_DEFAULT),
};

/* The limits of the query language and of a search (QUERY.md). */
static const struct konst query_konsts[] = {
	NUM(LB_QUERY_MAX),
	NUM(LB_QUERY_DEPTH),
	NUM(LB_QUERY_NODES),
	NUM(LB_MAX_TERMS),
};

/*
 * Checks doc for k. Returns the number of occurrences found with the right value, or -1 (and
 * prints where) when one carries another value.
 */
static int
check_one(const char *name, const char *doc, const struct konst *k, int quiet)
{
	char		 pat[128];
	const char	*p = doc;
	int		 found = 0;

	snprintf(pat, sizeof(pat), "`%s` = ", k->name);
	while ((p = strstr(p, pat)) != NULL) {
		const char *v = p + strlen(pat);
		int line = 1;

		for (const char *q = doc; q < p; q++)
			line += *q == '\n';
		if (k->str != NULL) {
			size_t n = strlen(k->str);

			if (v[0] != '`' || strncmp(v + 1, k->str, n) != 0 || v[n + 1] != '`') {
				if (!quiet)
					print_error("%s:%d: %s is not `%s`\n", name, line,
					    k->name, k->str);
				return (-1);
			}
		} else {
			char *end;
			unsigned long long x;

			if (!isdigit((unsigned char)v[0])) {
				if (!quiet)
					print_error("%s:%d: %s: no number\n", name, line,
					    k->name);
				return (-1);
			}
			x = strtoull(v, &end, 0);
			if (x != k->num || isalnum((unsigned char)*end)) {
				if (!quiet)
					print_error("%s:%d: %s is not %llu\n", name, line,
					    k->name, k->num);
				return (-1);
			}
		}
		found++;
		p = v;
	}
	return (found);
}

static char *
slurp(const char *path)
{
	FILE	*fp;
	char	*buf;
	long	 n;

	assert_non_null(fp = fopen(path, "r"));
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	assert_true(n > 0);
	rewind(fp);
	assert_non_null(buf = malloc((size_t)n + 1));
	assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
	buf[n] = '\0';
	fclose(fp);
	return (buf);
}

/* Every row of ks is defined in the document name (read from ../name) with its value. */
static void
check_doc(const char *name, const struct konst *ks, size_t nks)
{
	char	 path[64];
	char	*doc;
	int	 bad = 0;

	snprintf(path, sizeof(path), "../%s", name);
	doc = slurp(path);
	for (size_t i = 0; i < nks; i++) {
		int n = check_one(name, doc, &ks[i], 0);

		if (n == 0)
			print_error("%s does not define `%s` = ...\n", name, ks[i].name);
		if (n <= 0)
			bad++;
	}
	free(doc);
	assert_int_equal(bad, 0);
}

static void
t_constants(void **state)
{
	(void)state;
	check_doc("FORMAT.md", konsts, sizeof(konsts) / sizeof(konsts[0]));
	check_doc("QUERY.md", query_konsts, sizeof(query_konsts) / sizeof(query_konsts[0]));
}

/* The checker itself: it finds the convention, and catches wrong or missing values. */
static void
t_checker(void **state)
{
	static const struct konst n = { "X_NUM", NULL, 0x2a };
	static const struct konst s = { "X_STR", "abc", 0 };

	(void)state;
	assert_int_equal(check_one("X.md", "a `X_NUM` = 42 b `X_NUM` = 0x2a.", &n, 1), 2);
	assert_int_equal(check_one("X.md", "`X_NUM` = 43", &n, 1), -1);
	assert_int_equal(check_one("X.md", "`X_NUM` = 42x", &n, 1), -1);
	assert_int_equal(check_one("X.md", "`X_NUM` = many", &n, 1), -1);
	assert_int_equal(check_one("X.md", "`X_NUM` is 42", &n, 1), 0);
	assert_int_equal(check_one("X.md", "`X_STR` = `abc` and `X_STR` = `abc`", &s, 1), 2);
	assert_int_equal(check_one("X.md", "`X_STR` = `abcd`", &s, 1), -1);
	assert_int_equal(check_one("X.md", "`X_STR` = abc", &s, 1), -1);
}

T_MAIN(
	cmocka_unit_test(t_checker),
	cmocka_unit_test(t_constants))
