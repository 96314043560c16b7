/*
 * archive.h — `logbox archive` (archive.c), for main.c.
 */
#ifndef LOGBOX_CLI_ARCHIVE_H
#define LOGBOX_CLI_ARCHIVE_H

/* The archive verb's usage lines, for logbox's usage text. */
extern const char archive_usage[];

/* `logbox archive VERB ...`: argv[0] is "archive". Returns the exit status. */
int	archive_main(int argc, char *argv[]);

#endif /* LOGBOX_CLI_ARCHIVE_H */
