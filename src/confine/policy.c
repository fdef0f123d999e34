/* Confinement policy: pure validation and arithmetic (see policy.h). Nothing here touches the
 * file system or the kernel; every input is a string or a number. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/policy.h"

const char *const confine_default_system_paths[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", NULL,
};

/* Directories the sandbox makes itself: nothing from the host may land on or under them. */
static const char *const provided_dirs[] = {"/proc", "/dev", NULL};

bool confine_path_covers(const char *parent, const char *path) {
  size_t n = strlen(parent);
  if (n == 1 && parent[0] == '/')
    return path[0] == '/';
  return strncmp(parent, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* Shared normaliser: collapse empty and "." components, refuse "..". Keeps a leading '/'. */
static int normalize(const char *path, bool absolute, const char *what, char **out,
                     struct cordon_error **err) {
  if (!path || !*path)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s is empty", what);
  if (absolute != (path[0] == '/'))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s %s must be %s", what, path,
                            absolute ? "absolute" : "relative to the workspace");
  size_t len = strlen(path);
  if (len >= PATH_MAX)
    return cordon_error_set(err, CORDON_ERR_USAGE, ENAMETOOLONG, "%s", what);
  char *res = malloc(len + 2);
  if (!res)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  size_t o = 0;
  for (const char *p = path; *p;) {
    const char *end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      free(res);
      return cordon_error_set(err, CORDON_ERR_DENIED, 0, "%s %s contains '..'", what, path);
    }
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (o > 0 || absolute)
        res[o++] = '/';
      memcpy(res + o, p, n);
      o += n;
    }
    p = *end ? end + 1 : end;
  }
  res[o] = 0;
  if (o == 0) {
    free(res);
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s %s names the %s itself", what, path,
                            absolute ? "host root" : "workspace root");
  }
  *out = res;
  return 0;
}

bool confine_names_workspace_root(const char *path) {
  for (const char *p = path; *p; p++)
    if (*p != '/' && !(*p == '.' && (p[1] == '/' || !p[1]) && (p == path || p[-1] == '/')))
      return false;
  return path[0] == '.'; /* "/" and "" stay errors of the normaliser */
}

char **confine_without_workspace_root(const char *const *list, bool *had_root) {
  *had_root = false;
  char **out = calloc(1, sizeof(char *));
  for (size_t i = 0; out && list && list[i]; i++) {
    if (confine_names_workspace_root(list[i]))
      *had_root = true;
    else if (strv_push(&out, list[i]) < 0) {
      strv_free(out);
      return NULL;
    }
  }
  return out;
}

int confine_normalize_workspace_path(const char *path, const char *what, char **out,
                                     struct cordon_error **err) {
  return normalize(path, false, what, out, err);
}

int confine_normalize_host_path(const char *path, const char *what, char **out,
                                struct cordon_error **err) {
  return normalize(path, true, what, out, err);
}

/* No entry of `list` covers another. */
static int check_no_overlap(const char *const *list, const char *what, struct cordon_error **err) {
  for (size_t i = 0; list && list[i]; i++)
    for (size_t j = 0; list[j]; j++)
      if (i != j && confine_path_covers(list[i], list[j]))
        return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s %s overlaps %s %s", what, list[j],
                                what, list[i]);
  return 0;
}

int confine_check_workspace_lists(const char *const *read_only, const char *const *hidden,
                                  struct cordon_error **err) {
  if (check_no_overlap(read_only, "read-only path", err) < 0 ||
      check_no_overlap(hidden, "hidden path", err) < 0)
    return -1;
  /* Strictly beneath a hidden directory, a read-only path is that part shown read-only inside
   * the mask; on the hidden path itself it would ask for two things at once. */
  for (size_t i = 0; hidden && hidden[i]; i++)
    for (size_t j = 0; read_only && read_only[j]; j++)
      if (strcmp(hidden[i], read_only[j]) == 0)
        return cordon_error_set(err, CORDON_ERR_USAGE, 0, "read-only path %s is also hidden",
                                read_only[j]);
  return 0;
}

int confine_check_no_reshown(const char *const *read_only, const char *const *hidden,
                             struct cordon_error **err) {
  for (size_t i = 0; hidden && hidden[i]; i++)
    for (size_t j = 0; read_only && read_only[j]; j++)
      if (confine_path_covers(hidden[i], read_only[j]))
        return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                                "read-only path %s lies under hidden path %s", read_only[j],
                                hidden[i]);
  return 0;
}

bool confine_reshown(const char *path, const char *const *hidden_dirs) {
  for (size_t i = 0; hidden_dirs && hidden_dirs[i]; i++)
    if (strcmp(hidden_dirs[i], path) != 0 && confine_path_covers(hidden_dirs[i], path))
      return true;
  return false;
}

int confine_check_private_reshown(const char *const *read_only, const char *const *private_hidden,
                                  struct cordon_error **err) {
  static const char cordon_dir[] = ".cordon";
  for (size_t i = 0; private_hidden && private_hidden[i]; i++) {
    const char *h = private_hidden[i];
    const char *base = strrchr(h, '/');
    base = base ? base + 1 : h;
    size_t hl = strlen(h);
    for (size_t j = 0; read_only && read_only[j]; j++) {
      const char *r = read_only[j];
      if (!confine_path_covers(h, r))
        continue;
      if (strcmp(base, cordon_dir) == 0 && r[hl] == '/' &&
          strcmp(r + hl + 1, CONFINE_AGENT_VISIBLE) == 0)
        continue;
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "read-only path %s lies in cordon's private state %s, which stays "
                              "hidden (only .cordon/" CONFINE_AGENT_VISIBLE " may be shown)",
                              r, h);
    }
  }
  return 0;
}

static bool listed(const char *const *list, const char *path) {
  for (size_t i = 0; list && list[i]; i++)
    if (strcmp(list[i], path) == 0)
      return true;
  return false;
}

static bool covered_by(const char *const *list, const char *path) {
  for (size_t i = 0; list && list[i]; i++)
    if (confine_path_covers(list[i], path))
      return true;
  return false;
}

int confine_protected_ancestors(const char *const *read_only, const char *const *hidden_dirs,
                                const char *const *hidden_files, char ***out,
                                struct cordon_error **err) {
  const char *const *lists[] = {read_only, hidden_dirs, hidden_files};
  _cleanup_(strv_freep) char **dirs = strv_copy(NULL);
  if (!dirs)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
    for (size_t i = 0; lists[l] && lists[l][i]; i++)
      for (const char *p = lists[l][i]; (p = strchr(p, '/')); p++) {
        char *dir = strndup(lists[l][i], (size_t)(p - lists[l][i]));
        /* A read-only path is a mount point of its own already; a hidden directory becomes
         * one (its mask), and what lies inside the mask is read-only. */
        if (dir && (listed(read_only, dir) || listed((const char *const *)dirs, dir) ||
                    covered_by(hidden_dirs, dir))) {
          free(dir);
          continue;
        }
        if (!dir || strv_push_take(&dirs, dir) < 0)
          return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
      }
  /* A parent is a prefix of what lies under it, so it sorts first. */
  strv_sort(dirs);
  *out = steal_ptr(&dirs);
  return 0;
}

enum confine_protection confine_protection_of(const char *path, const char *const *read_only,
                                              const char *const *hidden, const char **by) {
  /* The innermost covering entry decides: a hidden path inside a read-only tree is masked on
   * top of it, a read-only path inside a hidden directory is shown inside the mask. Neither
   * list overlaps itself, so the two lists hold at most one covering entry each. */
  const char *h = NULL, *r = NULL;
  for (size_t i = 0; hidden && hidden[i] && !h; i++)
    if (confine_path_covers(hidden[i], path))
      h = hidden[i];
  for (size_t i = 0; read_only && read_only[i] && !r; i++)
    if (confine_path_covers(read_only[i], path))
      r = read_only[i];
  enum confine_protection p = CONFINE_UNPROTECTED;
  const char *which = NULL;
  if (h && (!r || strlen(h) >= strlen(r))) {
    p = CONFINE_HIDDEN;
    which = h;
  } else if (r) {
    p = CONFINE_READ_ONLY;
    which = r;
  }
  if (by)
    *by = which;
  return p;
}

int confine_check_linked_file(const struct confine_linked_file *f, const char *const *read_only,
                              const char *const *hidden, struct cordon_error **err) {
  /* The name that asks the most of the others, and the policy path that protects it. */
  enum confine_protection need = CONFINE_UNPROTECTED;
  const char *name = NULL, *by = NULL;
  size_t found = 0;
  for (size_t i = 0; f->names && f->names[i]; i++, found++) {
    const char *b = NULL;
    enum confine_protection p = confine_protection_of(f->names[i], read_only, hidden, &b);
    if (p > need) {
      need = p;
      name = f->names[i];
      by = b;
    }
  }
  if (need == CONFINE_UNPROTECTED)
    return 0; /* nothing protected is among them */
  const char *what = need == CONFINE_HIDDEN ? "hidden path" : "read-only path";
  const char *verb = need == CONFINE_HIDDEN ? "read" : "write";
  const char *fix = need == CONFINE_HIDDEN ? "hide that name too" : "protect that name too";
  for (size_t i = 0; f->names[i]; i++) {
    if (confine_protection_of(f->names[i], read_only, hidden, NULL) >= need)
      continue;
    if (strcmp(by, name) == 0)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "%s %s has another name, %s, through which the sandbox could %s it "
                              "(a hard link): %s or remove the link",
                              what, by, f->names[i], verb, fix);
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s holds %s, which has another name, %s, through which the "
                            "sandbox could %s it (a hard link): %s or remove the link",
                            what, by, name, f->names[i], verb, fix);
  }
  if (found >= f->nlink)
    return 0;
  if (!f->searched)
    return 1;
  /* Outside the workspace nothing is writable from the sandbox; it may be readable. */
  if (need == CONFINE_READ_ONLY && f->complete)
    return 0;
  unsigned long missing = f->nlink - found;
  const char *where = f->complete ? "outside the workspace"
                                  : "outside the workspace or beyond the bounded search for them";
  if (strcmp(by, name) == 0)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s has %lu other name%s (hard links) %s: remove the links", what,
                            by, missing, missing == 1 ? "" : "s", where);
  return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                          "%s %s holds %s, which has %lu other name%s (hard links) %s: remove the "
                          "links",
                          what, by, name, missing, missing == 1 ? "" : "s", where);
}

int confine_check_host_lists(const char *const *system_paths, const char *const *allow_ro,
                             const char *sandbox_root, struct cordon_error **err) {
  if (check_no_overlap(system_paths, "system path", err) < 0)
    return -1;
  /* A system path replaces what the sandbox makes itself (/proc, /dev, its own /tmp). */
  static const char *const own[] = {"/proc", "/dev", "/tmp", NULL};
  for (size_t j = 0; system_paths && system_paths[j]; j++)
    for (size_t k = 0; own[k]; k++)
      if (confine_path_covers(system_paths[j], own[k]) ||
          confine_path_covers(own[k], system_paths[j]))
        return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                                "system path %s overlaps %s, which the sandbox provides",
                                system_paths[j], own[k]);
  for (size_t i = 0; allow_ro && allow_ro[i]; i++) {
    const char *a = allow_ro[i];
    for (size_t j = 0; system_paths && system_paths[j]; j++)
      if (confine_path_covers(a, system_paths[j]) && strcmp(a, system_paths[j]) != 0)
        return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                                "read-only grant %s covers the system path %s", a, system_paths[j]);
    if (confine_path_covers(a, sandbox_root) || confine_path_covers(sandbox_root, a))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "read-only grant %s overlaps the workspace at %s", a, sandbox_root);
    for (size_t k = 0; provided_dirs[k]; k++)
      if (confine_path_covers(a, provided_dirs[k]) || confine_path_covers(provided_dirs[k], a))
        return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                                "read-only grant %s overlaps %s, which the sandbox provides", a,
                                provided_dirs[k]);
  }
  return 0;
}

int confine_check_sandbox_root(const char *root, const char *const *system_paths,
                               struct cordon_error **err) {
  if (!root || root[0] != '/' || strcmp(root, "/") == 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "workspace root %s must be an absolute path other than /",
                            root ? root : "(none)");
  _cleanup_free_ char *norm = NULL;
  if (confine_normalize_host_path(root, "workspace root", &norm, err) < 0)
    return -1;
  if (strcmp(norm, root) != 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "workspace root %s is not normalised (%s)",
                            root, norm);
  for (size_t k = 0; provided_dirs[k]; k++)
    if (confine_path_covers(provided_dirs[k], root) || confine_path_covers(root, provided_dirs[k]))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "workspace root %s overlaps %s", root,
                              provided_dirs[k]);
  for (size_t j = 0; system_paths && system_paths[j]; j++)
    if (confine_path_covers(system_paths[j], root) || confine_path_covers(root, system_paths[j]))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "workspace root %s overlaps the system path %s", root,
                              system_paths[j]);
  return 0;
}

int confine_check_workspace_dir(const char *path, struct cordon_error **err) {
  static const char *const protected_dirs[] = {
      "/usr",  "/etc",  "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
      "/boot", "/proc", "/sys", "/dev",  "/run", "/var",   NULL,
  };
  if (!path || path[0] != '/')
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "workspace %s is not an absolute path",
                            path ? path : "(none)");
  for (size_t i = 0; protected_dirs[i]; i++)
    if (confine_path_covers(path, protected_dirs[i]))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "workspace %s covers the system directory %s: it would be "
                              "writable from the sandbox",
                              path, protected_dirs[i]);
  return 0;
}

int confine_hidden_beneath(const char *const *hidden, const char *root, char ***out,
                           struct cordon_error **err) {
  size_t rl = strlen(root);
  if (rl == 1 && root[0] == '/')
    rl = 0; /* "/" covers everything: entries are relative to it without a leading slash */
  for (size_t i = 0; hidden && hidden[i]; i++) {
    const char *h = hidden[i];
    if (!confine_path_covers(root, h) || h[rl] != '/' || !h[rl + 1])
      continue;
    const char *rel = h + rl + 1;
    bool covered = false;
    size_t o = 0;
    for (size_t j = 0; *out && (*out)[j]; j++) {
      char *e = (*out)[j];
      if (confine_path_covers(e, rel)) {
        covered = true;
      } else if (confine_path_covers(rel, e)) {
        free(e); /* the new entry hides this one already */
        continue;
      }
      (*out)[o++] = e;
    }
    if (*out)
      (*out)[o] = NULL;
    if (!covered && strv_push(out, rel) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden paths");
  }
  return 0;
}

int confine_check_not_private(const char *path, const char *what, const char *const *private_dirs,
                              struct cordon_error **err) {
  for (size_t i = 0; private_dirs && private_dirs[i]; i++)
    if (confine_path_covers(private_dirs[i], path))
      return cordon_error_set(
          err, CORDON_ERR_DENIED, 0,
          "%s %s is or lies inside cordon's state directory %s: the sandbox would "
          "see cordon's state",
          what, path, private_dirs[i]);
  for (const char *p = strstr(path, "/.cordon"); p; p = strstr(p + 1, "/.cordon"))
    if (p[8] == 0 || p[8] == '/')
      return cordon_error_set(
          err, CORDON_ERR_DENIED, 0,
          "%s %s is or lies inside cordon's state directory %.*s: the sandbox would "
          "see cordon's state",
          what, path, (int)(p + 8 - path), path);
  return 0;
}

uint64_t confine_cpu_quota_us(double cpus) {
  double q = cpus * (double)CONFINE_CPU_PERIOD_US;
  if (q < 1000.0)
    q = 1000.0; /* the kernel's minimum quota is 1 ms */
  if (q > 1e15)
    q = 1e15;
  return (uint64_t)(q + 0.5);
}

uint64_t confine_tmp_bytes(const struct cordon_limits *l) {
  return l->tmp_bytes ? l->tmp_bytes : l->memory_bytes ? l->memory_bytes : CORDON_DEFAULT_TMP_BYTES;
}

int confine_check_limits(const struct cordon_limits *l, struct cordon_error **err) {
  if (l->memory_bytes && l->memory_bytes < (1u << 20))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "memory limit of %llu bytes is below the 1 MiB minimum",
                            (unsigned long long)l->memory_bytes);
  if (l->tmp_bytes && l->tmp_bytes < 4096)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "/tmp size of %llu bytes is below one page (4 KiB)",
                            (unsigned long long)l->tmp_bytes);
  if (l->pids > (1u << 22))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "pids limit %llu is above the kernel's",
                            (unsigned long long)l->pids);
  if (l->cpus < 0 || l->cpus != l->cpus)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "cpu limit must be a positive number");
  if (l->cpus > 0 && l->cpus * CONFINE_CPU_PERIOD_US < 1000.0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "cpu limit %g is below the minimum of 0.01 cores", l->cpus);
  if (l->cpus > 4096)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "cpu limit %g is too large", l->cpus);
  if (l->nofile && l->nofile < 8)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "open-file limit %llu leaves no room for stdio and libraries",
                            (unsigned long long)l->nofile);
  return 0;
}

int confine_check_egress(enum cordon_egress egress, struct cordon_error **err) {
  switch (egress) {
  case CORDON_EGRESS_NONE:
  case CORDON_EGRESS_LOOPBACK:
  case CORDON_EGRESS_RESTRICTED: /* lo, and the host-side proxy (backends/ns/egress.h) */
  case CORDON_EGRESS_OPEN: return 0;
  }
  return cordon_error_set(err, CORDON_ERR_USAGE, 0, "unknown egress class %d", (int)egress);
}

int confine_format_id_map(unsigned inner, unsigned outer, char *buf, size_t size) {
  int n = snprintf(buf, size, "%u %u 1\n", inner, outer);
  if (n < 0 || (size_t)n >= size)
    return -1;
  return n;
}

/* ---- cgroups ------------------------------------------------------------------------------ */

int confine_cgroup_own_path(const char *text, const char *controller, char **path) {
  for (const char *line = text; line && *line;) {
    const char *end = strchrnul(line, '\n');
    /* "ID:CONTROLLERS:PATH" */
    const char *c1 = memchr(line, ':', (size_t)(end - line));
    const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
    if (c2) {
      const char *list = c1 + 1;
      size_t list_len = (size_t)(c2 - list);
      bool match = false;
      if (!controller) {
        match = list_len == 0 && c1 - line == 1 && line[0] == '0';
      } else {
        size_t cl = strlen(controller);
        for (const char *p = list; p < c2;) {
          const char *comma = memchr(p, ',', (size_t)(c2 - p));
          const char *stop = comma ? comma : c2;
          if ((size_t)(stop - p) == cl && strncmp(p, controller, cl) == 0)
            match = true;
          p = stop + 1;
        }
      }
      if (match) {
        *path = strndup(c2 + 1, (size_t)(end - c2 - 1));
        return *path ? 0 : -1;
      }
    }
    line = *end ? end + 1 : end;
  }
  return -1;
}

/* Decode mountinfo's octal escapes (\040 for a space, ...). */
static char *unescape_field(const char *s, size_t n) {
  char *out = malloc(n + 1);
  if (!out)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out[o++] = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out[o++] = s[i];
    }
  }
  out[o] = 0;
  return out;
}

int confine_cgroup_find_mount(const char *text, const char *controller, char **mountpoint,
                              char **root) {
  for (const char *line = text; line && *line;) {
    const char *end = strchrnul(line, '\n');
    /* id parent major:minor root mountpoint options [optional fields] - fstype source superopts */
    const char *fields[5];
    size_t lens[5];
    const char *p = line;
    int nf = 0;
    while (nf < 5 && p < end) {
      const char *sp = memchr(p, ' ', (size_t)(end - p));
      const char *stop = sp ? sp : end;
      fields[nf] = p;
      lens[nf] = (size_t)(stop - p);
      nf++;
      p = sp ? sp + 1 : end;
    }
    const char *dash = NULL;
    for (const char *q = p; q + 2 < end; q++)
      if (q[0] == ' ' && q[1] == '-' && q[2] == ' ') {
        dash = q + 3;
        break;
      }
    if (p < end && p[0] == '-' && p + 1 < end && p[1] == ' ')
      dash = p + 2;
    if (nf == 5 && dash) {
      const char *fstype = dash;
      const char *sp = memchr(fstype, ' ', (size_t)(end - fstype));
      size_t fl = sp ? (size_t)(sp - fstype) : (size_t)(end - fstype);
      bool match = false;
      if (!controller) {
        match = fl == 7 && strncmp(fstype, "cgroup2", 7) == 0;
      } else if (fl == 6 && strncmp(fstype, "cgroup", 6) == 0 && sp) {
        /* super options: the last field, comma-separated, naming the controllers */
        const char *src_end = memchr(sp + 1, ' ', (size_t)(end - sp - 1));
        const char *opts = src_end ? src_end + 1 : end;
        size_t cl = strlen(controller);
        for (const char *o = opts; o < end;) {
          const char *comma = memchr(o, ',', (size_t)(end - o));
          const char *stop = comma ? comma : end;
          if ((size_t)(stop - o) == cl && strncmp(o, controller, cl) == 0)
            match = true;
          o = stop + 1;
        }
      }
      if (match) {
        *mountpoint = unescape_field(fields[4], lens[4]);
        *root = unescape_field(fields[3], lens[3]);
        if (!*mountpoint || !*root) {
          free(*mountpoint);
          free(*root);
          return -1;
        }
        return 0;
      }
    }
    line = *end ? end + 1 : end;
  }
  return -1;
}

char *confine_cgroup_dir(const char *mountpoint, const char *mount_root, const char *cgroup_path,
                         const char *leaf) {
  if (!confine_path_covers(mount_root, cgroup_path))
    return NULL;
  const char *rel = cgroup_path + (strcmp(mount_root, "/") == 0 ? 0 : strlen(mount_root));
  /* rel is "" or starts with '/' */
  size_t ml = strlen(mountpoint);
  while (ml > 1 && mountpoint[ml - 1] == '/')
    ml--;
  if (strcmp(rel, "/") == 0)
    rel = "";
  char *out = NULL;
  if (asprintf(&out, "%.*s%s%s%s", (int)ml, mountpoint, rel, leaf ? "/" : "", leaf ? leaf : "") < 0)
    return NULL;
  return out;
}

bool confine_cgroup_list_has(const char *list, const char *controller) {
  size_t cl = strlen(controller);
  for (const char *p = list; p && *p;) {
    while (*p == ' ' || *p == '\n')
      p++;
    const char *stop = p;
    while (*stop && *stop != ' ' && *stop != '\n')
      stop++;
    if ((size_t)(stop - p) == cl && strncmp(p, controller, cl) == 0)
      return true;
    p = stop;
  }
  return false;
}
