/* file.c — whole-file reads and read-only mappings, with errors that name the path. */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

lilac_status lilac_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                             lilac_error *e) {
    *out = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return lilac_fail(e, LILAC_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lilac_fail(e, LILAC_EIO, "%s: not a regular file", path);
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        close(fd);
        return lilac_fail(e, LILAC_EFORMAT, "%s: file is %lld bytes, more than the %zu allowed",
                          path, (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return lilac_fail(e, LILAC_ENOMEM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            return lilac_fail(e, LILAC_EIO, "%s: read failed at byte %zu", path, got);
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return LILAC_OK;
}

lilac_status lilac_map_file(const char *path, lilac_mapping *m, lilac_error *e) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return lilac_fail(e, LILAC_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lilac_fail(e, LILAC_EIO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return lilac_fail(e, LILAC_EFORMAT, "%s: file is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file alive */
    if (p == MAP_FAILED) return lilac_fail(e, LILAC_EIO, "%s: mmap failed: %s", path, strerror(errno));
    m->data = p;
    m->size = (size_t)st.st_size;
    return LILAC_OK;
}

void lilac_unmap_file(lilac_mapping *m) {
    if (m && m->data) munmap((void *)m->data, m->size);
    if (m) {
        m->data = NULL;
        m->size = 0;
    }
}

lilac_status lilac_path_join(char *out, size_t cap, const char *dir, const char *name,
                             lilac_error *e) {
    int n = (dir && *dir) ? snprintf(out, cap, "%s/%s", dir, name) : snprintf(out, cap, "%s", name);
    if (n < 0 || (size_t)n >= cap) return lilac_fail(e, LILAC_EINVAL, "path too long: %s/%s", dir, name);
    return LILAC_OK;
}

int lilac_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
