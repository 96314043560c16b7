/*
 * t_store.c — the store as a whole on real files: ids and receive times, lookups over flushed
 * segments and the unindexed tail, tiered merges, day rollover, reopen after close, recovery of
 * a writer that never closed, reindex, verify, the writer lock, and the field limits every
 * append applies (lb_msg_fit: cut and flagged, never an error).
 */
#include "t_helper.h"
#include "lb_format.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#define DAY_US	(86400LL * 1000000)
#define T0	(1735689600LL * 1000000)	/* 2025-01-01T00:00:00Z */

static void
mkmsg(struct lb_msg *m, char *buf, size_t len, uint64_t i, int64_t t)
{
	memset(m, 0, sizeof(*m));
	snprintf(buf, len, "seq=%llu word%llu common Tail%llu", (unsigned long long)i,
	    (unsigned long long)(i % 7), (unsigned long long)(i % 3));
	m->message.p = (const uint8_t *)buf;
	m->message.len = strlen(buf);
	m->host.p = (const uint8_t *)"Web-01";
	m->host.len = 6;
	m->facility = 3;
	m->severity = (uint8_t)(i % 8);
	m->timestamp = LB_NOTIME;
	m->received = t;
}

static void
lookup_text(struct lb_store *st, const char *tok, int prefix, struct lb_postings *p)
{
	uint8_t term[300];

	term[0] = LB_NS_TEXT;
	memcpy(term + 1, tok, strlen(tok));
	p->n = 0;
	assert_ok(lb_store_lookup(st, term, 1 + strlen(tok), prefix, p));
}

/* Checks that the ids for "wordK" are exactly those i in [1, n] with i % 7 == K. */
static void
check_words(struct lb_store *st, uint64_t n)
{
	struct lb_postings	p;
	char			tok[16];

	memset(&p, 0, sizeof(p));
	for (int k = 0; k < 7; k++) {
		size_t j = 0;

		snprintf(tok, sizeof(tok), "word%d", k);
		lookup_text(st, tok, 0, &p);
		for (uint64_t i = 1; i <= n; i++) {
			if (i % 7 != (uint64_t)k)
				continue;
			assert_true(j < p.n);
			assert_int_equal(p.ids[j], i);
			j++;
		}
		assert_int_equal(j, p.n);
	}
	lookup_text(st, "common", 0, &p);
	assert_int_equal(p.n, n);
	lookup_text(st, "wor", 1, &p);
	assert_int_equal(p.n, n);
	lookup_text(st, "tail", 1, &p);	/* folded: Tail0..Tail2 */
	assert_int_equal(p.n, n);
	lb_postings_free(&p);
}

static void
verify_ok(const char *dir)
{
	struct lb_store *st;

	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	assert_ok(lb_store_verify(st, NULL, NULL));
	lb_store_close(st);
}

static void
t_roundtrip_flush_merge(void **state)
{
	char			 dir[256], buf[128];
	struct lb_store		*st;
	struct lb_msg		 m;
	struct lb_storestats	 ss;
	const uint64_t		 n = 5000;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	for (uint64_t i = 1; i <= n; i++) {
		mkmsg(&m, buf, sizeof(buf), i, T0 + (int64_t)i * 1000);
		assert_ok(lb_store_append(st, &m));
		assert_int_equal(m.id, i);
		/* Many small intervals: forces tiered merges. */
		if (i % 100 == 0)
			assert_ok(lb_store_flush(st));
	}
	assert_ok(lb_store_commit(st, 1));
	/* The last 0..99 messages are still in the unindexed tail: search sees them too. */
	check_words(st, n);
	assert_ok(lb_store_stats(st, &ss));
	assert_int_equal(ss.messages, n);
	assert_int_equal(ss.days, 1);
	/* 50 flushes with fanout 8 merge into far fewer files. */
	assert_true(ss.segments < 15);
	assert_ok(lb_store_close(st));

	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	check_words(st, n);
	for (uint64_t i = 1; i <= n; i += 37) {
		assert_ok(lb_store_get(st, i, &m));
		mkmsg(&m, buf, sizeof(buf), i, 0);
		assert_int_equal(m.message.len, strlen(buf));
	}
	assert_ok(lb_store_get(st, n, &m));
	assert_memory_equal(m.message.p, "seq=5000 ", 9);
	assert_int_equal(lb_store_get(st, n + 1, &m), LB_ENOTFOUND);
	assert_ok(lb_store_close(st));
	verify_ok(dir);
	t_rmtree(dir);
}

static void
t_day_rollover_and_time(void **state)
{
	char			 dir[256], buf[128], path[512];
	struct lb_store		*st;
	struct lb_msg		 m;
	struct lb_storestats	 ss;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	for (uint64_t i = 1; i <= 300; i++) {
		/* 100 messages a day for three days; one goes back in time and is raised. */
		int64_t t = T0 + (int64_t)((i - 1) / 100) * DAY_US + (int64_t)i;

		if (i == 150)
			t = T0;
		mkmsg(&m, buf, sizeof(buf), i, t);
		assert_ok(lb_store_append(st, &m));
		if (i == 150)
			assert_true(m.received >= T0 + DAY_US);
	}
	assert_ok(lb_store_close(st));
	snprintf(path, sizeof(path), "%s/main/2025/01-02/messages", dir);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/main/2025/01-03/messages", dir);
	assert_int_equal(access(path, F_OK), 0);
	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	assert_ok(lb_store_stats(st, &ss));
	assert_int_equal(ss.days, 3);
	assert_int_equal(ss.messages, 300);
	check_words(st, 300);
	assert_ok(lb_store_get(st, 250, &m));
	assert_true(m.received == T0 + 2 * DAY_US + 250);
	lb_store_close(st);
	verify_ok(dir);
	t_rmtree(dir);
}

/*
 * Merges run beside the appends (the merge thread): an interval every millisecond over three
 * days makes tiered merges while messages keep coming, and each day's end a whole-day merge.
 * Checked while still open (lookups over segments a merge may be replacing) and after close:
 * every message found, each ended day one segment, verify clean.
 */
static void
t_background_merges(void **state)
{
	char			 dir[256], buf[128];
	struct lb_catalog	*cat;
	struct lb_store		*st;
	struct lb_lsconf	 conf;
	struct lb_msg		 m;
	struct lb_storestats	 ss;
	struct lb_segref	*refs = NULL;
	size_t			 nrefs = 0, perday[3] = { 0 };
	const uint64_t		 n = 4500;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	lb_lsconf_default(&conf);
	conf.flush_ms = 1;
	assert_ok(lb_catalog_logspace_create(cat, "main", &conf));
	assert_ok(lb_store_open_writer(cat, dir, "main", &st));
	for (uint64_t i = 1; i <= n; i++) {
		mkmsg(&m, buf, sizeof(buf), i, T0 + (int64_t)((i - 1) / (n / 3)) * DAY_US +
		    (int64_t)i);
		assert_ok(lb_store_append(st, &m));
		assert_int_equal(m.id, i);
		if (i % 1000 == 0) {
			assert_ok(lb_store_commit(st, 0));
			check_words(st, i);
		}
	}
	assert_ok(lb_store_close(st));
	assert_ok(lb_catalog_segments(cat, "main", 0, UINT64_MAX, &refs, &nrefs));
	for (size_t i = 0; i < nrefs; i++) {
		assert_true(refs[i].day >= 20250101 && refs[i].day <= 20250103);
		perday[refs[i].day - 20250101]++;
	}
	assert_int_equal(perday[0], 1);
	assert_int_equal(perday[1], 1);
	assert_true(perday[2] >= 1);
	free(refs);
	lb_catalog_close(cat);
	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	assert_ok(lb_store_stats(st, &ss));
	assert_int_equal(ss.messages, n);
	assert_int_equal(ss.days, 3);
	check_words(st, n);
	lb_store_close(st);
	verify_ok(dir);
	t_rmtree(dir);
}

/* A writer killed without closing: the next writer recovers every committed message. */
static void
t_recover_unclosed_writer(void **state)
{
	char			 dir[256], buf[128];
	struct lb_store		*st;
	struct lb_msg		 m;
	pid_t			 pid;
	int			 status;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	if ((pid = fork()) == 0) {
		if (lb_store_open(dir, "main", LB_RDWR, &st) != 0)
			_exit(1);
		for (uint64_t i = 1; i <= 1000; i++) {
			mkmsg(&m, buf, sizeof(buf), i, T0 + (int64_t)i);
			if (lb_store_append(st, &m) != 0)
				_exit(1);
			if (i == 500 && lb_store_flush(st) != 0)
				_exit(1);
		}
		if (lb_store_commit(st, 0) != 0)
			_exit(1);
		_exit(0);	/* no close: the tail 501..1000 is only in the message file */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	check_words(st, 1000);	/* a reader sees the tail before any recovery */
	lb_store_close(st);
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	mkmsg(&m, buf, sizeof(buf), 1001, T0 + 2000);
	assert_ok(lb_store_append(st, &m));
	assert_int_equal(m.id, 1001);
	assert_ok(lb_store_close(st));
	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	check_words(st, 1001);
	lb_store_close(st);
	verify_ok(dir);
	t_rmtree(dir);
}

static void
t_reindex_and_lock(void **state)
{
	char			 dir[256], buf[128];
	struct lb_store		*st, *st2;
	struct lb_msg		 m;
	struct lb_storestats	 ss;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	/* The lock is per open file description: a second writer is refused. */
	assert_int_equal(lb_store_open(dir, "main", LB_RDWR, &st2), LB_ELOCKED);
	for (uint64_t i = 1; i <= 2000; i++) {
		mkmsg(&m, buf, sizeof(buf), i, T0 + (int64_t)i);
		assert_ok(lb_store_append(st, &m));
		if (i % 300 == 0)
			assert_ok(lb_store_flush(st));
	}
	assert_ok(lb_store_reindex(st, NULL, NULL));
	assert_ok(lb_store_stats(st, &ss));
	assert_int_equal(ss.segments, 1);
	check_words(st, 2000);
	assert_ok(lb_store_close(st));
	verify_ok(dir);
	assert_int_equal(lb_store_open(dir, "no such!", LB_RDONLY, &st), LB_EBADCONF);
	t_rmtree(dir);
}

/*
 * One process writing several logspaces through one catalog (lb_store_open_writer, as indexd
 * does): interleaved appends with flushes, each logspace's own ids, every lookup right after
 * a reopen, and the per-logspace writer lock still held.
 */
static void
t_writers_one_catalog(void **state)
{
	static const char	*ls[3] = { "main", "secure", "net-fw" };
	char			 dir[256], buf[128];
	struct lb_catalog	*cat;
	struct lb_store		*st[3], *other;
	struct lb_msg		 m;
	uint64_t		 first, next;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	for (int k = 0; k < 3; k++)
		assert_ok(lb_store_open_writer(cat, dir, ls[k], &st[k]));
	assert_int_equal(lb_store_open(dir, "secure", LB_RDWR, &other), LB_ELOCKED);
	assert_int_equal(lb_store_open_writer(NULL, dir, "main", &other), EINVAL);
	for (uint64_t i = 1; i <= 1500; i++) {
		for (int k = 0; k < 3; k++) {
			if (k > 0 && i > 1000 + 100 * (uint64_t)k)
				continue;
			mkmsg(&m, buf, sizeof(buf), i, T0 + (int64_t)i);
			assert_ok(lb_store_append(st[k], &m));
			assert_int_equal(m.id, i);
		}
		if (i % 400 == 0)
			assert_ok(lb_store_flush(st[i / 400 % 3]));
		if (i % 97 == 0)
			for (int k = 0; k < 3; k++)
				assert_ok(lb_store_commit(st[k], 0));
	}
	for (int k = 0; k < 3; k++)
		assert_ok(lb_store_close(st[k]));
	lb_catalog_close(cat);
	for (int k = 0; k < 3; k++) {
		uint64_t n = k == 0 ? 1500 : 1000 + 100 * (uint64_t)k;

		assert_ok(lb_store_open(dir, ls[k], LB_RDONLY, &st[k]));
		lb_store_range(st[k], &first, &next);
		assert_int_equal(first, 1);
		assert_int_equal(next, n + 1);
		check_words(st[k], n);
		assert_ok(lb_store_verify(st[k], NULL, NULL));
		lb_store_close(st[k]);
	}
	t_rmtree(dir);
}

/*
 * Every header field longer than its limit is cut there and flagged LB_MSG_FIELDCUT, the
 * message at LB_MSG_MAX and flagged LB_MSG_TRUNCATED: the append succeeds, and the next one
 * too. A receive time past LB_RECEIVED_MAX is LB_EBADMSG (the message's fault: lb_errclass)
 * and takes no id.
 */
static void
t_fields_cut_and_flagged(void **state)
{
	char		 dir[256];
	struct lb_store	*st;
	struct lb_msg	 m;
	uint8_t		*big;
	const size_t	 bigl = LB_MSG_MAX + 100;
	struct lb_slice	*fld[5];
	char		 sd2[64 + LB_SD_MAX];
	size_t		 n;

	(void)state;
	assert_non_null(big = malloc(bigl));
	memset(big, 'x', bigl);
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	fld[0] = &m.host;
	fld[1] = &m.program;
	fld[2] = &m.pid;
	fld[3] = &m.msgid;
	fld[4] = &m.peer;
	/* One field at a time, at the limit (kept whole, no flag) and one byte over (cut). */
	for (int f = 0; f < 5; f++) {
		for (size_t over = 0; over <= 1; over++) {
			memset(&m, 0, sizeof(m));
			m.received = T0;
			m.timestamp = LB_NOTIME;
			m.message.p = (const uint8_t *)"x";
			m.message.len = 1;
			fld[f]->p = big;
			fld[f]->len = LB_FIELD_MAX + over;
			assert_ok(lb_store_append(st, &m));
			assert_int_equal(fld[f]->len, LB_FIELD_MAX);
			assert_int_equal(!!(m.flags & LB_MSG_FIELDCUT), over);
		}
	}
	/* lb_msg_fit alone: a 300-byte peer is cut like a host. */
	memset(&m, 0, sizeof(m));
	m.peer.p = big;
	m.peer.len = 300;
	lb_msg_fit(&m);
	assert_true(m.peer.len == LB_FIELD_MAX && m.flags == LB_MSG_FIELDCUT);
	/* The whole 4 KiB a frame may carry, every field at once, and a message too long. */
	memset(&m, 0, sizeof(m));
	m.received = T0;
	m.timestamp = LB_NOTIME;
	m.host.p = m.program.p = m.pid.p = m.msgid.p = m.peer.p = big;
	m.host.len = m.program.len = m.pid.len = m.msgid.len = m.peer.len = 4096;
	m.sd.p = big;
	m.sd.len = 65536;
	m.message.p = big;
	m.message.len = bigl;
	assert_ok(lb_store_append(st, &m));
	assert_int_equal(m.flags & (LB_MSG_FIELDCUT | LB_MSG_TRUNCATED),
	    LB_MSG_FIELDCUT | LB_MSG_TRUNCATED);
	/* SD: the elements that fit whole; a "]" inside a quoted value does not end one. */
	memset(&m, 0, sizeof(m));
	m.received = T0;
	m.timestamp = LB_NOTIME;
	n = (size_t)snprintf(sd2, sizeof(sd2), "[a@1 x=\"]\\\"]\"][b@1 v=\"");
	memset(sd2 + n, 'v', sizeof(sd2) - n - 2);
	memcpy(sd2 + sizeof(sd2) - 2, "\"]", 2);
	m.sd.p = (const uint8_t *)sd2;
	m.sd.len = sizeof(sd2);
	assert_ok(lb_store_append(st, &m));
	assert_int_equal(m.sd.len, strlen("[a@1 x=\"]\\\"]\"]"));
	assert_true(m.flags & LB_MSG_FIELDCUT);
	/* One element alone longer than LB_SD_MAX: cut at LB_SD_MAX. */
	m.flags = 0;
	m.sd.p = (const uint8_t *)sd2 + strlen("[a@1 x=\"]\\\"]\"]");
	m.sd.len = sizeof(sd2) - strlen("[a@1 x=\"]\\\"]\"]");
	assert_ok(lb_store_append(st, &m));
	assert_int_equal(m.sd.len, LB_SD_MAX);
	assert_true(m.flags & LB_MSG_FIELDCUT);
	/* A receive time the store cannot name a day directory for: the message's error. */
	memset(&m, 0, sizeof(m));
	m.received = LB_RECEIVED_MAX + 1;
	m.timestamp = LB_NOTIME;
	assert_int_equal(lb_store_append(st, &m), LB_EBADMSG);
	assert_int_equal(lb_errclass(LB_EBADMSG), LB_ERRC_MESSAGE);
	assert_int_equal(lb_errclass(LB_EPARSE), LB_ERRC_MESSAGE);
	assert_int_equal(lb_errclass(LB_ETOOBIG), LB_ERRC_ENV);
	assert_int_equal(lb_errclass(EINVAL), LB_ERRC_ENV);
	assert_int_equal(lb_errclass(ENOSPC), LB_ERRC_ENV);
	assert_int_equal(lb_errclass(EDQUOT), LB_ERRC_ENV);
	assert_int_equal(lb_errclass(EIO), LB_ERRC_ENV);
	assert_int_equal(lb_errclass(LB_ELOCKED), LB_ERRC_ENV);
	assert_int_equal(lb_errclass(0), LB_ERRC_NONE);
	m.received = T0;
	assert_ok(lb_store_append(st, &m));
	assert_int_equal(m.id, 14);	/* 13 above: the refused one took no id */
	assert_ok(lb_store_close(st));
	/* Read back: cut bytes, flags on disk. */
	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	assert_ok(lb_store_get(st, 2, &m));
	assert_int_equal(m.host.len, LB_FIELD_MAX);
	assert_true(m.flags & LB_MSG_FIELDCUT);
	assert_ok(lb_store_get(st, 1, &m));
	assert_false(m.flags & LB_MSG_FIELDCUT);
	assert_ok(lb_store_get(st, 10, &m));
	assert_true(m.peer.len == LB_FIELD_MAX && m.peer.p[0] == 'x' && m.host.len == 0);
	assert_true(m.flags & LB_MSG_FIELDCUT);
	assert_ok(lb_store_get(st, 11, &m));
	assert_int_equal(m.peer.len, LB_FIELD_MAX);
	assert_int_equal(m.sd.len, LB_SD_MAX);
	assert_int_equal(m.message.len, LB_MSG_MAX);
	assert_int_equal(m.flags & (LB_MSG_FIELDCUT | LB_MSG_TRUNCATED),
	    LB_MSG_FIELDCUT | LB_MSG_TRUNCATED);
	assert_ok(lb_store_verify(st, NULL, NULL));
	lb_store_close(st);
	free(big);
	t_rmtree(dir);
}

/* The parser flags what it cuts too (logbox ingest's path). */
static void
t_parse_flags_cut(void **state)
{
	char		 line[1024];
	struct lb_msg	 m;

	(void)state;
	snprintf(line, sizeof(line), "<13>1 2026-11-25T16:00:00Z h %0300d 42 - - x", 7);
	lb_syslog_parse((const uint8_t *)line, strlen(line), T0, &m);
	assert_int_equal(m.program.len, LB_FIELD_MAX);
	assert_true(m.flags & LB_MSG_FIELDCUT);
	snprintf(line, sizeof(line), "<13>1 2026-11-25T16:00:00Z h app 42 - - x");
	lb_syslog_parse((const uint8_t *)line, strlen(line), T0, &m);
	assert_false(m.flags & LB_MSG_FIELDCUT);
}

T_MAIN(
	cmocka_unit_test(t_roundtrip_flush_merge),
	cmocka_unit_test(t_background_merges),
	cmocka_unit_test(t_day_rollover_and_time),
	cmocka_unit_test(t_recover_unclosed_writer),
	cmocka_unit_test(t_reindex_and_lock),
	cmocka_unit_test(t_writers_one_catalog),
	cmocka_unit_test(t_fields_cut_and_flagged),
	cmocka_unit_test(t_parse_flags_cut))
