/*
 * fz_dayx.c — arbitrary bytes through lb_dayx_parse(), as `logbox archive import` reads a
 * catalog.json downloaded from an archive. A parse that succeeds must give an extract whose
 * invariants hold (ids inside the day, file names without '/'), and formatting it and parsing
 * that again must give the same extract.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
same(const struct lb_dayx *a, const struct lb_dayx *b)
{
	assert(strcmp(a->ls, b->ls) == 0);
	assert(memcmp(&a->day, &b->day, sizeof(a->day)) == 0 || (a->day.day == b->day.day &&
	    a->day.first_id == b->day.first_id && a->day.next_id == b->day.next_id &&
	    a->day.tmin == b->day.tmin && a->day.tmax == b->day.tmax));
	assert(a->nseg == b->nseg && a->nt == b->nt);
	for (size_t i = 0; i < a->nseg; i++) {
		assert(a->segs[i].first_id == b->segs[i].first_id);
		assert(a->segs[i].last_id == b->segs[i].last_id);
		assert(a->segs[i].count == b->segs[i].count);
		assert(a->segs[i].size == b->segs[i].size);
		assert(a->segs[i].level == b->segs[i].level);
		assert(a->segs[i].tmin == b->segs[i].tmin && a->segs[i].tmax == b->segs[i].tmax);
		assert(strcmp(a->segs[i].file, b->segs[i].file) == 0);
	}
	for (size_t i = 0; i < a->nt; i++)
		assert(a->t[i] == b->t[i] && a->ids[i] == b->ids[i]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lb_dayx	 x, y;
	char		 why[256], *text;

	if (lb_dayx_parse((const char *)data, size, &x, why, sizeof(why)) != 0) {
		assert(why[0] != '\0');
		return (0);
	}
	assert(x.day.first_id >= 1 && x.day.next_id >= x.day.first_id);
	for (size_t i = 0; i < x.nseg; i++) {
		assert(x.segs[i].first_id >= x.day.first_id);
		assert(x.segs[i].last_id < x.day.next_id);
		assert(strchr(x.segs[i].file, '/') == NULL && x.segs[i].file[0] != '\0');
		assert(x.segs[i].day == x.day.day);
	}
	for (size_t i = 0; i < x.nt; i++)
		assert(x.ids[i] >= x.day.first_id && x.ids[i] < x.day.next_id);
	assert(lb_dayx_format(&x, &text) == 0);
	assert(lb_dayx_parse(text, strlen(text), &y, why, sizeof(why)) == 0);
	same(&x, &y);
	free(text);
	lb_dayx_free(&x);
	lb_dayx_free(&y);
	return (0);
}
