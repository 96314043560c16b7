/*
 * fz_archrec.c — arbitrary bytes through lb_archive_record_parse(), as logbox-searchd and
 * `logbox search` read logbox-archive's verified records to search archived days in place. A
 * record that parses must hold what the readers rely on: ids in order, every piece list as
 * long as its file needs, file names that fit.
 */
#include <assert.h>
#include <string.h>

#include "logbox.h"
#include "lb_archive.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aday d;

	if (lb_archive_record_parse((const char *)data, size, 20260101, &d) != 0)
		return (0);
	assert(d.day == 20260101 && d.ref.day == 20260101);
	assert(d.ref.first_id > 0 && d.ref.next_id >= d.ref.first_id);
	for (size_t i = 0; i < d.nfiles; i++) {
		const struct afile *f = &d.files[i];

		assert(strlen(f->name) < sizeof(f->name));
		if (f->pieces != NULL) {
			assert(f->piece > 0 && f->piece <= (64u << 20) && f->size <= (1ULL << 53));
			assert(f->npieces == f->size / f->piece + (f->size % f->piece != 0));
			assert(f->npieces * f->piece >= f->size &&
			    (f->npieces == 0 || (f->npieces - 1) * f->piece < f->size));
		}
	}
	lb_archive_record_free(&d);
	return (0);
}
