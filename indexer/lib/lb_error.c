/*
 * lb_error.c — lb_strerror(): one place that turns any code the library returns (errno, LMDB,
 * LB_E*) into text, and lb_errclass(): whether an error belongs to one message or to the
 * environment.
 */
#include <lmdb.h>
#include <string.h>

#include "logbox.h"

const char *
lb_strerror(int rc)
{
	switch (rc) {
	case 0:
		return ("success");
	case LB_EFORMAT:
		return ("not a logbox file or unknown format version");
	case LB_ECORRUPT:
		return ("data is corrupt (checksum or cross-reference mismatch)");
	case LB_ENOTFOUND:
		return ("not found");
	case LB_ETOOBIG:
		return ("input exceeds a size limit");
	case LB_EPARSE:
		return ("malformed syslog frame or header");
	case LB_ELOCKED:
		return ("the logspace is locked by another writer");
	case LB_EBADCONF:
		return ("invalid setting");
	case LB_EQUERY:
		return ("invalid query");
	case LB_ETOOBROAD:
		return ("query too broad");
	case LB_EDEADLINE:
		return ("query deadline exceeded");
	case LB_EBADMSG:
		return ("a message the store cannot hold (receive time out of range)");
	case LB_EARCHIVE:
		return ("an archived day could not be read from its object store");
	}
	if (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE)
		return (mdb_strerror(rc));
	if (rc > 0)
		return (strerror(rc));
	return ("unknown error");
}

int
lb_errclass(int rc)
{
	switch (rc) {
	case 0:
		return (LB_ERRC_NONE);
	case LB_EBADMSG:
	case LB_EPARSE:
		return (LB_ERRC_MESSAGE);
	default:
		/*
		 * ENOSPC, EDQUOT, EIO, ENOMEM, EMFILE, LB_ELOCKED, LMDB's, and the rest: retry.
		 * Not LB_ETOOBIG or EINVAL: a store returns them for its own state too (a WAL too
		 * long to recover, an id out of step), and setting every later message aside for
		 * that would be worse than holding. A store says LB_EBADMSG for the message.
		 */
		return (LB_ERRC_ENV);
	}
}
