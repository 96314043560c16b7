/*
 * framecheck — counts the hand-off frames in a file with liblogbox's decoder (lb_frame_decode),
 * for the end-to-end ingest benchmark (tests/bench/ingest_e2e.py): the frames syslog-ng wrote
 * with the collector's template are checked before indexd is fed with them. Prints one JSON
 * line {"frames", "malformed", "bytes", "message_bytes", "first_error"}; exit 0 when every
 * byte belongs to a well-formed frame, 1 otherwise, 2 on a usage or I/O error.
 * Built by the benchmark: cc -O2 -Iindexer/lib framecheck.c build/liblogbox.a -l...
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "logbox.h"

int
main(int argc, char **argv)
{
	struct lb_frame	 f;
	struct stat	 sb;
	const uint8_t	*p = NULL;
	const char	*why, *first = "";
	size_t		 off = 0, len, need, frames = 0, mainf = 0, bad = 0, msgb = 0;
	int		 fd, rc;

	if (argc != 2) {
		fprintf(stderr, "usage: framecheck FILE\n");
		return 2;
	}
	if ((fd = open(argv[1], O_RDONLY)) == -1 || fstat(fd, &sb) == -1) {
		fprintf(stderr, "framecheck: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	len = (size_t)sb.st_size;
	if (len > 0) {
		p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "framecheck: mmap: %s\n", strerror(errno));
			return 2;
		}
	}
	while (off < len) {
		why = "";
		rc = lb_frame_decode(p + off, len - off, LB_FRAME_MAX, &f, &need, &why);
		if (rc == 0) {
			frames++;
			if (f.ls.len == 4 && memcmp(f.ls.p, "main", 4) == 0)
				mainf++;
			msgb += f.msg.message.len;
			off += f.size;
			continue;
		}
		if (bad++ == 0)
			first = rc == EAGAIN ? "truncated frame at the end" :
			    rc == LB_ETOOBIG ? "frame larger than LB_FRAME_MAX" : why;
		if (rc == EAGAIN)
			break;
		off += lb_frame_resync(p + off, len - off, 1);
	}
	printf("{\"frames\": %zu, \"main_frames\": %zu, \"malformed\": %zu, \"bytes\": %zu, "
	    "\"message_bytes\": %zu, \"first_error\": \"%s\"}\n", frames, mainf, bad, len, msgb,
	    first);
	close(fd);
	return bad ? 1 : 0;
}
