/* base: path normalisation, anchored opens (both modes), temp files and atomic writes, tree
 * removal and hand-over (fs_chown_tree), env merging, and /proc/PID/stat parsing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/anchor.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/strv.h"

static char *make_tmpdir(void) {
  char tmpl[] = "/tmp/cordon-test-fs.XXXXXX";
  char *d = mkdtemp(tmpl);
  assert_non_null(d);
  return strdup(d);
}

static void expect_normalized(const char *in, const char *want) {
  char *out = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(fs_normalize_relative(in, &out, &err), 0);
  assert_string_equal(out, want);
  free(out);
}

static void expect_refused(const char *in) {
  char *out = NULL;
  struct cordon_error *err = NULL;
  assert_true(fs_normalize_relative(in, &out, &err) < 0);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  assert_null(out);
  cordon_error_free(err);
}

static void test_normalize(void **state) {
  expect_normalized("", "");
  expect_normalized(".", "");
  expect_normalized("a//b/./c/", "a/b/c");
  expect_normalized("./x", "x");
  expect_normalized("..a/b..", "..a/b..");
  expect_refused("..");
  expect_refused("a/../b");
  expect_refused("a/..");
  expect_refused("/etc/passwd");
}

static void test_atomic_write_and_read(void **state) {
  char *dir = make_tmpdir();
  char path[512];
  snprintf(path, sizeof(path), "%s/file", dir);
  struct cordon_error *err = NULL;
  assert_int_equal(fs_write_atomic(path, "one", 3, 0600, &err), 0);
  assert_int_equal(fs_write_atomic(path, "second", 6, 0640, &err), 0);
  unsigned char *data = NULL;
  size_t len = 0;
  assert_int_equal(fs_read_file(path, 100, &data, &len, &err), 0);
  assert_int_equal(len, 6);
  assert_string_equal((char *)data, "second");
  free(data);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  /* The bound is enforced. */
  assert_true(fs_read_file(path, 3, &data, &len, &err) < 0);
  assert_int_equal(err->errnum, E2BIG);
  cordon_error_free(err);
  err = NULL;
  /* No temp file is left behind. */
  int entries = 0;
  DIR *d = opendir(dir);
  for (struct dirent *de; (de = readdir(d));)
    entries += de->d_name[0] != '.';
  closedir(d);
  assert_int_equal(entries, 1);
  /* A symlink at the final name is replaced, never written through. */
  char target[512], link[512];
  snprintf(target, sizeof(target), "%s/target", dir);
  snprintf(link, sizeof(link), "%s/link", dir);
  assert_int_equal(fs_write_atomic(target, "keep", 4, 0644, &err), 0);
  assert_int_equal(symlink(target, link), 0);
  assert_int_equal(fs_write_atomic(link, "new", 3, 0644, &err), 0);
  assert_int_equal(fs_read_file(target, 100, &data, &len, &err), 0);
  assert_string_equal((char *)data, "keep");
  free(data);
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  assert_int_equal(access(dir, F_OK), -1);
  free(dir);
}

static void test_open_beneath(void **state) {
  char *dir = make_tmpdir();
  struct cordon_error *err = NULL;
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(root >= 0);
  int sub = fs_mkdirs_beneath(root, "a/b/c", "test", &err);
  assert_true(sub >= 0);
  close(sub);
  char p[512];
  snprintf(p, sizeof(p), "%s/a/in-link", dir);
  assert_int_equal(symlink("b", p), 0); /* relative, stays inside */
  snprintf(p, sizeof(p), "%s/out-abs", dir);
  assert_int_equal(symlink("/etc", p), 0);
  snprintf(p, sizeof(p), "%s/out-rel", dir);
  assert_int_equal(symlink("../../../../../../../etc", p), 0);

  int fd = fs_open_beneath(root, "a/in-link/c", O_RDONLY | O_DIRECTORY, 0, "test", &err);
  assert_true(fd >= 0);
  close(fd);
  const char *escapes[] = {"out-abs/passwd", "out-rel/passwd", "../x", "/etc/passwd"};
  for (size_t i = 0; i < 4; i++) {
    fd = fs_open_beneath(root, escapes[i], O_RDONLY, 0, "test", &err);
    assert_true(fd < 0);
    assert_int_equal(err->kind, CORDON_ERR_DENIED);
    cordon_error_free(err);
    err = NULL;
  }
  /* fs_mkdirs_beneath never follows a symlink, even one that stays inside. */
  assert_true(fs_mkdirs_beneath(root, "out-abs/new", "test", &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(access("/etc/new", F_OK), -1);
  fd = fs_open_beneath(root, "missing", O_RDONLY, 0, "test", &err);
  assert_true(fd < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);
  err = NULL;
  close(root);
  /* Removal does not follow the symlinks out. */
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  assert_int_equal(access("/etc/passwd", F_OK), 0);
  free(dir);
}

/* Entries of dir other than . and .. */
static size_t count_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      n++;
  closedir(d);
  return n;
}

static void read_whole(int dirfd, const char *name, char *buf, size_t size) {
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  ssize_t n = read(fd, buf, size - 1);
  assert_true(n >= 0);
  buf[n] = 0;
  close(fd);
}

/* A writer that dies between create and commit leaves its hidden temp name, never the
 * target; a discarded temp file leaves nothing. */
static void test_temp_crash_leaves_no_target(void **state) {
  char *dir = make_tmpdir();
  struct cordon_error *err = NULL;
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct fs_temp t = FS_TEMP_INIT;
  assert_int_equal(fs_temp_create(dirfd, "target", 0600, &t, &err), 0);
  assert_int_equal(strncmp(t.name, ".target.tmp-", 12), 0);
  assert_int_equal(fs_write_all(t.fd, "half", 4), 0);
  close(t.fd); /* the crash: no commit, no discard */
  assert_int_equal(faccessat(dirfd, "target", F_OK, 0), -1);
  assert_int_equal(count_entries(dir), 1);
  unlinkat(dirfd, t.name, 0);
  {
    _cleanup_fs_temp_ struct fs_temp u = FS_TEMP_INIT;
    assert_int_equal(fs_temp_create(dirfd, "target", 0600, &u, &err), 0);
  }
  assert_int_equal(count_entries(dir), 0);
  /* A name too long for a prefix and a suffix still gets a temp file. */
  char longname[NAME_MAX + 1];
  memset(longname, 'n', NAME_MAX);
  longname[NAME_MAX] = 0;
  assert_int_equal(fs_write_atomic_at(dirfd, longname, "x", 1, 0600, &err), 0);
  assert_int_equal(count_entries(dir), 1);
  close(dirfd);
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

/* The target is replaced in one step: a reader holding the old file keeps the old bytes, a
 * new open sees all of the new ones; mode is exact whatever the umask. */
static void test_temp_replaces_atomically(void **state) {
  char *dir = make_tmpdir();
  struct cordon_error *err = NULL;
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal(fs_write_atomic_at(dirfd, "f", "old", 3, 0600, &err), 0);
  int old = openat(dirfd, "f", O_RDONLY | O_CLOEXEC);
  assert_true(old >= 0);
  mode_t saved_umask = umask(077);
  struct fs_temp t = FS_TEMP_INIT;
  assert_int_equal(fs_temp_create(dirfd, "f", 0644, &t, &err), 0);
  assert_int_equal(fs_write_all(t.fd, "new bytes", 9), 0);
  char buf[64];
  read_whole(dirfd, "f", buf, sizeof(buf));
  assert_string_equal(buf, "old");
  assert_int_equal(fs_temp_commit(&t, "f", 0, &err), 1);
  umask(saved_umask);
  assert_int_equal(t.fd, -1);
  read_whole(dirfd, "f", buf, sizeof(buf));
  assert_string_equal(buf, "new bytes");
  ssize_t n = pread(old, buf, sizeof(buf) - 1, 0);
  assert_int_equal(n, 3);
  close(old);
  struct stat st;
  assert_int_equal(fstatat(dirfd, "f", &st, 0), 0);
  assert_int_equal(st.st_mode & 07777, 0644);
  assert_int_equal(count_entries(dir), 1);
  /* Not durable, still atomic; the mode again exact. */
  assert_int_equal(fs_write_replace_at(dirfd, "f", "x", 1, 0640, false, &err), 0);
  assert_int_equal(fstatat(dirfd, "f", &st, 0), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  close(dirfd);
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

/* A symlink at the target is replaced by the file, never written through; with
 * FS_COMMIT_NO_REPLACE an existing target (a symlink too) is kept and the temp file goes. */
static void test_temp_symlink_and_no_replace(void **state) {
  char *dir = make_tmpdir();
  struct cordon_error *err = NULL;
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal(fs_write_atomic_at(dirfd, "victim", "keep", 4, 0600, &err), 0);
  assert_int_equal(symlinkat("victim", dirfd, "link"), 0);
  assert_int_equal(fs_write_atomic_at(dirfd, "link", "mine", 4, 0600, &err), 0);
  struct stat st;
  assert_int_equal(fstatat(dirfd, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_true(S_ISREG(st.st_mode));
  char buf[64];
  read_whole(dirfd, "victim", buf, sizeof(buf));
  assert_string_equal(buf, "keep");

  assert_int_equal(symlinkat("victim", dirfd, "link2"), 0);
  struct fs_temp t = FS_TEMP_INIT;
  assert_int_equal(fs_temp_create(dirfd, "link2", 0600, &t, &err), 0);
  assert_int_equal(fs_write_all(t.fd, "other", 5), 0);
  assert_int_equal(fs_temp_commit(&t, "link2", FS_COMMIT_NO_REPLACE, &err), 0);
  assert_int_equal(fstatat(dirfd, "link2", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_true(S_ISLNK(st.st_mode));
  read_whole(dirfd, "victim", buf, sizeof(buf));
  assert_string_equal(buf, "keep");
  assert_int_equal(fs_temp_create(dirfd, "fresh", 0600, &t, &err), 0);
  assert_int_equal(fs_temp_commit(&t, "fresh", FS_COMMIT_NO_REPLACE, &err), 1);
  assert_int_equal(count_entries(dir), 4); /* victim, link, link2, fresh: no temp names */
  close(dirfd);
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

/* anchor_open refuses every symlink; anchor_open_beneath follows those that stay inside.
 * Both refuse to leave the anchor. */
static void test_anchor_modes(void **state) {
  char *dir = make_tmpdir();
  struct cordon_error *err = NULL;
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int sub = fs_mkdirs_beneath(root, "a/b", "test", &err);
  assert_true(sub >= 0);
  close(sub);
  assert_int_equal(symlinkat("b", root, "a/in-link"), 0);
  assert_int_equal(symlinkat("/etc", root, "out"), 0);

  int fd = anchor_open(root, "a/b", O_RDONLY | O_DIRECTORY, 0);
  assert_true(fd >= 0);
  close(fd);
  fd = anchor_open(root, "a/in-link", O_RDONLY | O_DIRECTORY, 0);
  assert_true(fd < 0);
  assert_true(errno == ELOOP || errno == ENOTDIR); /* ENOTDIR: O_DIRECTORY met the link */
  fd = anchor_open_beneath(root, "a/in-link", O_RDONLY | O_DIRECTORY, 0);
  assert_true(fd >= 0);
  close(fd);
  const char *escapes[] = {"out/passwd", "../x", "a/../../x"};
  for (size_t i = 0; i < 3; i++) {
    assert_true(anchor_open(root, escapes[i], O_RDONLY, 0) < 0);
    assert_true(anchor_open_beneath(root, escapes[i], O_RDONLY, 0) < 0);
    assert_true(errno == EXDEV || errno == ELOOP);
  }
  /* A symlink on the way is ELOOP (the fallback walk says the same: anchor_fallback_checks). */
  assert_true(anchor_open(root, "a/in-link/x", O_RDONLY, 0) < 0);
  assert_int_equal(errno, ELOOP);
  assert_true(anchor_open_beneath(root, "/etc/passwd", O_RDONLY, 0) < 0);
  fd = anchor_open(root, "", O_RDONLY | O_DIRECTORY, 0);
  assert_true(fd >= 0);
  close(fd);
  const char *name = NULL;
  fd = anchor_open_parent(root, "a/b/new", &name);
  assert_true(fd >= 0);
  assert_string_equal(name, "new");
  close(fd);
  assert_true(anchor_open_parent(root, "a/in-link/new", &name) < 0);
  close(root);
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

/* Make openat2 fail with ENOSYS in this process, as on a kernel before 5.6. */
static int refuse_openat2(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* Without openat2 both modes walk one component at a time: no symlink is followed (so
 * anchor_open_beneath is stricter, never looser), ".." is refused, "a//b" still works. */
static int anchor_fallback_checks(int root) {
  if (refuse_openat2() < 0)
    return 10;
  int fd = anchor_open(root, "a//b", O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0)
    return 11;
  close(fd);
  fd = anchor_open_beneath(root, "a/b", O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0)
    return 12;
  close(fd);
  if (anchor_open_beneath(root, "a/in-link", O_RDONLY | O_DIRECTORY, 0) >= 0)
    return 13;
  if (anchor_open(root, "out/passwd", O_RDONLY, 0) >= 0 ||
      anchor_open_beneath(root, "out/passwd", O_RDONLY, 0) >= 0)
    return 14;
  if (anchor_open(root, "a/../../x", O_RDONLY, 0) >= 0 || errno != EXDEV)
    return 15;
  /* A symlink on the way is ELOOP, as openat2 says it (not ENOTDIR). */
  if (anchor_open(root, "out/passwd", O_PATH, 0) >= 0 || errno != ELOOP ||
      anchor_open(root, "a/in-link/x", O_RDONLY, 0) >= 0 || errno != ELOOP)
    return 17;
  struct cordon_error *err = NULL;
  fd = fs_open_beneath(root, "a/in-link", O_RDONLY, 0, "test", &err);
  if (fd >= 0 || err->kind != CORDON_ERR_DENIED)
    return 16;
  cordon_error_free(err);
  return 0;
}

static void test_anchor_without_openat2(void **state) {
  char *dir = make_tmpdir();
  struct cordon_error *err = NULL;
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int sub = fs_mkdirs_beneath(root, "a/b", "test", &err);
  assert_true(sub >= 0);
  close(sub);
  assert_int_equal(symlinkat("b", root, "a/in-link"), 0);
  assert_int_equal(symlinkat("/etc", root, "out"), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(anchor_fallback_checks(root));
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  close(root);
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

static void test_remove_readonly_tree(void **state) {
  char *dir = make_tmpdir();
  char p[512];
  snprintf(p, sizeof(p), "%s/ro", dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/ro/f", dir);
  int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  close(fd);
  snprintf(p, sizeof(p), "%s/ro", dir);
  assert_int_equal(chmod(p, 0500), 0);
  struct cordon_error *err = NULL;
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  assert_int_equal(access(dir, F_OK), -1);
  assert_int_equal(fs_remove_tree(dir, &err), 0); /* missing is fine */
  free(dir);
}

/* ---- fs_chown_tree: the one-shot workspace handed to the sandbox uid ------------------------ */

#define SANDBOX_UID 12345
#define SANDBOX_GID 12346

static uid_t owner_of(const char *path) {
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  return st.st_uid;
}

static void make_file(const char *path) {
  int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  close(fd);
}

static bool chown_tree_needs_root(void) {
  if (geteuid() == 0)
    return false;
  print_message("SKIP: fs_chown_tree hands files to another uid, which needs root\n");
  return true;
}

static void test_chown_tree(void **state) {
  if (chown_tree_needs_root())
    skip();
  char *dir = make_tmpdir(), p[512], outside[512];
  snprintf(outside, sizeof(outside), "%s/outside", dir);
  make_file(outside);
  snprintf(p, sizeof(p), "%s/ws", dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/ws/a", dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/ws/a/b", dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/ws/a/f", dir);
  make_file(p);
  snprintf(p, sizeof(p), "%s/ws/link", dir);
  assert_int_equal(symlink(outside, p), 0);
  snprintf(p, sizeof(p), "%s/ws", dir);
  int ws = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(ws >= 0);
  assert_int_equal(fs_chown_tree(ws, SANDBOX_UID, SANDBOX_GID), 0);
  close(ws);
  const char *handed[] = {"ws", "ws/a", "ws/a/b", "ws/a/f", "ws/link"};
  for (size_t i = 0; i < sizeof(handed) / sizeof(handed[0]); i++) {
    snprintf(p, sizeof(p), "%s/%s", dir, handed[i]);
    assert_int_equal(owner_of(p), SANDBOX_UID);
  }
  /* The symlink itself, never what it names. */
  assert_int_equal(owner_of(outside), 0);
  struct cordon_error *err = NULL;
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

/* Deeper than the bound: ELOOP, not a stack that grows with the tree. */
static void test_chown_tree_depth(void **state) {
  if (chown_tree_needs_root())
    skip();
  char *dir = make_tmpdir();
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(fd >= 0);
  int top = dup(fd);
  for (int i = 0; i <= FS_CHOWN_TREE_MAX_DEPTH + 1; i++) {
    assert_int_equal(mkdirat(fd, "d", 0755), 0);
    int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(sub >= 0);
    close(fd);
    fd = sub;
  }
  close(fd);
  errno = 0;
  assert_int_equal(fs_chown_tree(top, SANDBOX_UID, SANDBOX_GID), -1);
  assert_int_equal(errno, ELOOP);
  close(top);
  struct cordon_error *err = NULL;
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

/* Something mounted inside the tree (a directory, or a file) is another tree's: the hand-over
 * stops with EXDEV and what is mounted keeps its owner. In a mount namespace of a child of
 * ours, so nothing of the test's mounts reaches the host. Exit codes: 0 pass, 1 fail, 77 skip. */
static int chown_across_mount(const char *dir, const char *name) {
  char target[512], source[512];
  snprintf(source, sizeof(source), "%s/source-%s", dir, name);
  snprintf(target, sizeof(target), "%s/ws-%s/m", dir, name);
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return 77;
  if (mount(source, target, NULL, MS_BIND, NULL) < 0)
    return 77;
  char ws[512];
  snprintf(ws, sizeof(ws), "%s/ws-%s", dir, name);
  int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return 1;
  errno = 0;
  int r = fs_chown_tree(fd, SANDBOX_UID, SANDBOX_GID);
  int e = errno;
  close(fd);
  struct stat st;
  if (r != -1 || e != EXDEV || lstat(target, &st) < 0 || st.st_uid != 0)
    return 1;
  return 0;
}

static void test_chown_tree_stops_at_mounts(void **state) {
  if (chown_tree_needs_root())
    skip();
  char *dir = make_tmpdir(), p[512];
  struct {
    const char *name;
    bool file;
  } cases[] = {{"dir", false}, {"file", true}};
  for (size_t i = 0; i < 2; i++) {
    snprintf(p, sizeof(p), "%s/source-%s", dir, cases[i].name);
    if (cases[i].file)
      make_file(p);
    else
      assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/ws-%s", dir, cases[i].name);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/ws-%s/m", dir, cases[i].name);
    if (cases[i].file)
      make_file(p);
    else
      assert_int_equal(mkdir(p, 0755), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
      _exit(chown_across_mount(dir, cases[i].name));
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
      print_message("SKIP: no private mount namespace for the test's bind mount here\n");
      fs_remove_tree(dir, NULL); /* skip() does not return */
      free(dir);
      skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
    /* The source, seen from here, kept its owner too. */
    snprintf(p, sizeof(p), "%s/source-%s", dir, cases[i].name);
    assert_int_equal(owner_of(p), 0);
  }
  struct cordon_error *err = NULL;
  assert_int_equal(fs_remove_tree(dir, &err), 0);
  free(dir);
}

static void test_env_merge(void **state) {
  const char *base[] = {"PATH=/bin", "HOME=/w", NULL};
  const char *over[] = {"HOME=/other", "NEW=1", "PATH=/usr/bin", NULL};
  char **m = strv_env_merge(base, over);
  assert_int_equal(strv_length((const char *const *)m), 3);
  assert_string_equal(strv_env_get((const char *const *)m, "HOME"), "/other");
  assert_string_equal(strv_env_get((const char *const *)m, "PATH"), "/usr/bin");
  assert_string_equal(strv_env_get((const char *const *)m, "NEW"), "1");
  assert_null(strv_env_get((const char *const *)m, "HOM"));
  strv_free(m);
}

static void test_random_hex(void **state) {
  char *a = NULL, *b = NULL;
  assert_int_equal(fs_random_hex(8, &a, NULL), 0);
  assert_int_equal(fs_random_hex(8, &b, NULL), 0);
  assert_int_equal(strlen(a), 16);
  assert_true(strspn(a, "0123456789abcdef") == 16);
  assert_string_not_equal(a, b);
  free(a);
  free(b);
}

/* A child whose command name is built to mislead a parser that splits on spaces or on the first
 * ')': its fields must still come out right, alive and as a zombie. */
static void test_proc_stat(void **state) {
  struct proc_stat self;
  assert_int_equal(proc_stat_read(0, &self), 0);
  assert_int_equal(self.parent, getppid());
  assert_int_equal(self.threads, 1);
  assert_true(self.start_time > 0);
  assert_true(self.arg_start > 0 && self.arg_end > self.arg_start);
  assert_int_equal(proc_start_time(getpid()), self.start_time);

  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_NAME, ") S 1 2 ) (", 0, 0, 0);
    char c;
    close(go[1]);
    (void)!read(go[0], &c, 1); /* until the parent has looked */
    _exit(0);
  }
  close(go[0]);
  assert_true(child > 0);
  struct proc_stat st;
  for (int i = 0; i < 200; i++) { /* until the new name shows */
    assert_int_equal(proc_stat_read(child, &st), 0);
    char path[64], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)child);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(comm, sizeof(comm), f));
    fclose(f);
    if (strncmp(comm, ") S 1 2 ) (", 11) == 0)
      break;
    usleep(5000);
  }
  assert_int_equal(proc_stat_read(child, &st), 0);
  assert_int_equal(st.parent, getpid());
  assert_int_equal(st.threads, 1);
  assert_true(st.start_time >= self.start_time);
  assert_int_equal(proc_start_time(child), st.start_time);
  close(go[1]);
  /* A zombie does not run: no start time. */
  for (int i = 0; i < 400; i++) {
    assert_int_equal(proc_stat_read(child, &st), 0);
    if (st.state == 'Z')
      break;
    usleep(5000);
  }
  assert_int_equal(st.state, 'Z');
  assert_int_equal(proc_start_time(child), 0);
  assert_int_equal(waitpid(child, NULL, 0), child);
  /* Gone. */
  assert_int_equal(proc_stat_read(child, &st), -1);
  assert_int_equal(proc_start_time(child), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_normalize),
      cmocka_unit_test(test_atomic_write_and_read),
      cmocka_unit_test(test_open_beneath),
      cmocka_unit_test(test_remove_readonly_tree),
      cmocka_unit_test(test_chown_tree),
      cmocka_unit_test(test_chown_tree_depth),
      cmocka_unit_test(test_chown_tree_stops_at_mounts),
      cmocka_unit_test(test_env_merge),
      cmocka_unit_test(test_random_hex),
      cmocka_unit_test(test_proc_stat),
      cmocka_unit_test(test_temp_crash_leaves_no_target),
      cmocka_unit_test(test_temp_replaces_atomically),
      cmocka_unit_test(test_temp_symlink_and_no_replace),
      cmocka_unit_test(test_anchor_modes),
      cmocka_unit_test(test_anchor_without_openat2),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
