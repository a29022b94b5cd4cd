/* version.h — the commit this build comes from (generated at build time by
 * tools/commit.sh into build/.../gen/commit.c; "unknown" when neither git
 * nor a git-archive tarball tells). */
#ifndef LILAC_UTIL_VERSION_H
#define LILAC_UTIL_VERSION_H

extern const char lilac_commit[];

#endif
