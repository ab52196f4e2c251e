/* outpath: how every command claims its output path (docs/reliability.md "Inputs and outputs").
 *
 * Nothing that exists at an output path is ever replaced or followed, whatever it is (file, directory, symlink,
 * FIFO). The command writes a temporary beside the output, named PATH.tmp-<host>-<pid>-<random> (the owner is in
 * the name), and claims PATH in one atomic step that fails when anything is there: renameat2(RENAME_NOREPLACE),
 * or where the filesystem lacks it link() for a file and mkdir() then rename over that empty directory for a
 * directory. Two commands racing for one path: exactly one wins, the other gets "already exists".
 *
 * A temporary whose owner is gone (same host, no such process) is litter of a killed run: making a new temporary
 * for PATH first removes those of PATH. A temporary of a live process, of another host or without an owner in its
 * name (an older lcextend) is left alone and named in a warning. */
#ifndef LCX_OUTPATH_H
#define LCX_OUTPATH_H

#include "src/core/status.h"

/* LCX_ERR_INVALID "PATH: already exists (refusing to overwrite)" when anything is at path (lstat: a dangling
 * symlink counts). An early refusal before any work; lcx_out_claim is what decides. */
lcx_status lcx_out_absent(const char *path);
/* PATH.tmp-<host>-<pid>-<random> (heap; NULL when out of memory). */
char *lcx_out_temp_name(const char *path);
/* Remove the stale temporaries of path (see above). Returns how many it removed; *kept (may be NULL) gets a heap
 * line naming the temporaries of other runs it left and why (owner running, another host, no owner in the name),
 * NULL when none. Not named: this process's own and those of a live process running this same program (a
 * concurrent run at work); a live owner running another program may hold a killed run's reused pid. */
int lcx_out_sweep(const char *path, char **kept);
/* lcx_out_sweep, and the kept line as a warning through the process's warning reporter (src/core/report.h): what
 * every command does before it makes a temporary for an output, so each output path warns at most once. */
void lcx_out_sweep_warn(const char *path);
/* 1 if NAME (an entry of some directory) is a temporary (".tmp-" in it) whose owner is known to be gone. */
int lcx_out_temp_stale(const char *name);
/* Sweep, then create a fresh temporary directory (mode 0777 less the umask) for path: *tmp (heap). */
lcx_status lcx_out_temp_dir(const char *path, char **tmp);
/* Claim path with the finished temporary tmp (file or directory) and fsync path's directory. On failure tmp
 * is left for the caller to remove; an existing path gives LCX_ERR_INVALID "already exists". */
lcx_status lcx_out_claim(const char *tmp, const char *path);
/* Remove a temporary: a file or symlink is unlinked, a directory emptied of its files (never following a link,
 * never descending) and removed. Best effort, errors ignored. */
void lcx_out_remove_temp(const char *path);

#endif
