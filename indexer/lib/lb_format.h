/*
 * lb_format.h — every on-disk name, magic number, version and fixed offset of the logbox store,
 * in one place. It mirrors indexer/FORMAT.md; tests/t_format.c checks that the two agree.
 * Constants stored on disk are fixed: change one only with a new format version.
 */
#ifndef LB_FORMAT_H
#define LB_FORMAT_H

/* ---------------------------------------------------------------- directory tree */
#define LB_DIR_CATALOG		"catalog"	/* <data>/catalog/: the LMDB environment */
#define LB_FILE_LOCK		"writer.lock"	/* <data>/<logspace>/writer.lock: one writer */
#define LB_FILE_MESSAGES	"messages"	/* <day>/messages: sealed blocks */
#define LB_FILE_WAL		"messages.wal"	/* <day>/messages.wal: the open block */
#define LB_DIR_INDEX		"index"		/* <day>/index/: segment files */
#define LB_SEG_SUFFIX		".seg"		/* <day>/index/<first>-<last>.seg, ids in hex */

/* ---------------------------------------------------------------- limits */
#define LB_MSG_MAX		(256 * 1024)	/* message bytes kept; longer ones are cut */
#define LB_FIELD_MAX		255		/* host, program, pid, msgid bytes kept */
#define LB_SD_MAX		(16 * 1024)	/* structured-data bytes kept */

/* ---------------------------------------------------------------- message file (lb_msgfile.c) */
/* (section owned by lb_msgfile.c) */

/* ---------------------------------------------------------------- segment file (lb_segment.c) */
/* (section owned by lb_segment.c) */

/* ---------------------------------------------------------------- catalog (lb_catalog.c) */
/* (section owned by lb_catalog.c) */

/* ---------------------------------------------------------------- time map */
#define LB_TIMEMAP_STEP		(1000000LL)	/* µs of receive time per time→id entry */

#endif /* LB_FORMAT_H */
