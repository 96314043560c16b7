/*
 * t_deadletter.c — the dead-letter file (lb_deadletter.c, FORMAT.md §12): records read back as
 * written, a missing file, a torn last record (a kill in the middle of the write) stops a reader
 * and is cut off by the next writer, a damaged header is refused.
 */
#include "t_helper.h"
#include "lb_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static void
rec(struct lb_dlrec *r, int i, const char *frame)
{
	memset(r, 0, sizeof(*r));
	r->when = 1795359974000000LL + i;
	r->received = i == 2 ? LB_NOTIME : 253402300800000000LL;
	r->code = LB_EBADMSG;
	r->batch = (uint64_t)i * 10;
	r->batch_crc = 0xdeadbeef;
	r->index = (uint32_t)i;
	snprintf(r->ls, sizeof(r->ls), "ls%d", i);
	r->input.p = (const uint8_t *)"fifo fd 3";
	r->input.len = 9;
	r->reason.p = (const uint8_t *)"logspace main: bad";
	r->reason.len = 18;
	r->frame.p = (const uint8_t *)frame;
	r->frame.len = strlen(frame);
}

static void
t_roundtrip_and_torn_tail(void **state)
{
	char		 dir[256], path[300];
	struct lb_dl	*dl;
	struct lb_dlrec	 r, w;
	struct stat	 sb;
	off_t		 good;
	int		 fd;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/deadletter", dir);
	assert_int_equal(lb_dl_open(path, LB_RDONLY, &dl), LB_ENOTFOUND);
	assert_ok(lb_dl_open(path, LB_RDWR, &dl));
	for (int i = 1; i <= 3; i++) {
		rec(&w, i, i == 3 ? "" : "LB1 1 - - - - 4 0 0 0 0 0 1\nmainx\n");
		assert_ok(lb_dl_append(dl, &w));
	}
	lb_dl_close(dl);
	assert_int_equal(stat(path, &sb), 0);
	good = sb.st_size;

	assert_ok(lb_dl_open(path, LB_RDONLY, &dl));
	for (int i = 1; i <= 3; i++) {
		assert_ok(lb_dl_next(dl, &r));
		rec(&w, i, i == 3 ? "" : "LB1 1 - - - - 4 0 0 0 0 0 1\nmainx\n");
		assert_int_equal(r.when, w.when);
		assert_int_equal(r.received, w.received);
		assert_int_equal(r.code, LB_EBADMSG);
		assert_int_equal(r.batch, w.batch);
		assert_int_equal(r.batch_crc, w.batch_crc);
		assert_int_equal(r.index, w.index);
		assert_string_equal(r.ls, w.ls);
		assert_int_equal(r.frame.len, w.frame.len);
		assert_memory_equal(r.frame.p, w.frame.p, w.frame.len);
		assert_memory_equal(r.reason.p, "logspace main: bad", 18);
		assert_memory_equal(r.input.p, "fifo fd 3", 9);
	}
	assert_int_equal(lb_dl_next(dl, &r), LB_ENOTFOUND);
	lb_dl_close(dl);

	/* A torn record: a reader stops at it, a writer cuts it off and appends after the good. */
	assert_true((fd = open(path, O_WRONLY | O_APPEND)) >= 0);
	assert_int_equal(write(fd, "LBDR\x40\x00\x00\x00xx", 10), 10);
	close(fd);
	assert_ok(lb_dl_open(path, LB_RDONLY, &dl));
	for (int i = 1; i <= 3; i++)
		assert_ok(lb_dl_next(dl, &r));
	assert_int_equal(lb_dl_next(dl, &r), LB_ECORRUPT);
	lb_dl_close(dl);
	assert_ok(lb_dl_open(path, LB_RDWR, &dl));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, good);
	rec(&w, 4, "four");
	assert_ok(lb_dl_append(dl, &w));
	lb_dl_close(dl);
	assert_ok(lb_dl_open(path, LB_RDONLY, &dl));
	for (int i = 1; i <= 4; i++)
		assert_ok(lb_dl_next(dl, &r));
	assert_int_equal(r.offset, (uint64_t)good);
	assert_memory_equal(r.frame.p, "four", 4);
	assert_int_equal(lb_dl_next(dl, &r), LB_ENOTFOUND);
	lb_dl_close(dl);

	/* A damaged file header: not a dead-letter file. */
	assert_true((fd = open(path, O_WRONLY)) >= 0);
	assert_int_equal(pwrite(fd, "X", 1, LB_DL_FHDR_VERSION), 1);
	close(fd);
	assert_int_equal(lb_dl_open(path, LB_RDONLY, &dl), LB_EFORMAT);
	assert_int_equal(lb_dl_open(path, LB_RDWR, &dl), LB_EFORMAT);
	t_rmtree(dir);
}

T_MAIN(
	cmocka_unit_test(t_roundtrip_and_torn_tail))
