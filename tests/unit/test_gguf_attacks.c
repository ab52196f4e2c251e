/* Hand-made broken GGUFs (tests/attack/make_gguf_attacks.py): each must be rejected as a format error whose
 * message names the file and contains the substring listed in tests/attack/gguf/expected.txt. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "src/core/fileio.h"
#include "test_util.h"

#define DIR_ LCX_SOURCE_DIR "/tests/attack/gguf"

int main(void) {
    FILE *fp = fopen(DIR_ "/expected.txt", "r");
    CHECK(fp != NULL);
    if (!fp) return test_summary("test_gguf_attacks");
    char line[1024];
    char listed[256][1024];
    size_t n = 0;
    while (fgets(line, sizeof line, fp) && n < 256) {
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        CHECK(tab != NULL);
        if (!tab) continue;
        *tab = 0;
        const char *fn = line, *needle = tab + 1;
        memcpy(listed[n++], fn, strlen(fn) + 1);
        char *path = lcx_path_join(DIR_, fn);
        lcx_gguf_file *f = NULL;
        lcx_clear_error();
        lcx_status st = lcx_gguf_open(path, &f);
        CHECK_MSG(st == LCX_ERR_FORMAT, "%s: accepted or wrong code (%s)", fn, lcx_status_name(st));
        CHECK_MSG(strstr(lcx_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", fn, lcx_last_error(),
                  needle);
        CHECK_MSG(strncmp(lcx_last_error(), path, strlen(path)) == 0, "%s: message does not start with the path", fn);
        CHECK(f == NULL);
        lcx_gguf_close(f);

        /* The same bytes through the in-memory parser (what the fuzzer drives) give the same verdict. */
        char *buf = NULL;
        size_t len = 0;
        CHECK_OK(lcx_read_file(path, 1 << 20, &buf, &len));
        st = lcx_gguf_parse(fn, (const uint8_t *)buf, len, &f);
        CHECK_MSG(st == LCX_ERR_FORMAT && strstr(lcx_last_error(), needle), "%s: parse: %s", fn, lcx_last_error());
        lcx_gguf_close(f);
        free(buf);
        free(path);
    }
    fclose(fp);
    CHECK_MSG(n >= 12, "only %zu attack files", n);

    /* Every .gguf in the directory is listed (a file without an expected message would go untested). */
    DIR *d = opendir(DIR_);
    CHECK(d != NULL);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf") != 0) continue;
        int found = 0;
        for (size_t i = 0; i < n; i++) found |= strcmp(listed[i], e->d_name) == 0;
        CHECK_MSG(found, "%s is not in expected.txt", e->d_name);
    }
    if (d) closedir(d);
    return test_summary("test_gguf_attacks");
}
