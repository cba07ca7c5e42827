#include "peft_folder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"
#include "session.h"

static bool make_dir(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return true;
        fprintf(stderr, "wisp: %s: exists and is not a folder (a PEFT adapter is a folder)\n", path);
        return false;
    }
    if (mkdir(path, 0777) != 0) {
        fprintf(stderr, "wisp: %s: cannot create folder: %s\n", path, strerror(errno));
        return false;
    }
    return true;
}

bool cli_peft_folder_write(const char *dir, char *cfg, size_t cfg_len, cli_safetensors_writer write, void *arg) {
    if (!make_dir(dir)) return false;
    char cfg_path[4200], st_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", dir);
    snprintf(st_path, sizeof st_path, "%s/adapter_model.safetensors", dir);
    wisp_error err = {0};
    cli_atomic_file af;
    if (!cli_atomic_open(&af, st_path)) return false;
    if (write(arg, &af.sink, &err)) {
        cli_report(st_path, &err);
        cli_atomic_abort(&af);
        return false;
    }
    if (!cli_atomic_commit(&af)) return false;
    cfg[cfg_len] = '\n';
    return cli_write_file_atomic(cfg_path, cfg, cfg_len + 1);
}
