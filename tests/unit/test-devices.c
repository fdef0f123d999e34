/* Unit tests of devices (src/confine/devices.c): manifest entries, GPU selection (pure), the
 * scan of a directory of fake nodes (plain files: the scan goes by name only), and the docker
 * backend's HostConfig for granted nodes (src/backends/docker/config.c). No root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "backends/docker/config.h"
#include "base/fs.h"
#include "base/strv.h"
#include "confine/devices.h"

static void expect_parse(const char *entry, const char *host, const char *target) {
  struct cordon_error *err = NULL;
  char *h = NULL, *t = NULL;
  int r = confine_device_parse(entry, &h, &t, &err);
  if (!host) {
    assert_int_equal(r, -1);
    assert_non_null(err);
    assert_null(h);
    cordon_error_free(err);
    return;
  }
  assert_int_equal(r, 0);
  assert_string_equal(h, host);
  assert_string_equal(t, target);
  free(h);
  free(t);
}

static void test_parse(void **state) {
  (void)state;
  expect_parse("/dev/fuse", "/dev/fuse", "/dev/fuse");
  expect_parse("/dev/dri/card0", "/dev/dri/card0", "/dev/dri/card0");
  expect_parse("/tmp/x/mydev", "/tmp/x/mydev", "/dev/mydev");
  expect_parse("/tmp/x/nvidia0:/dev/nvidia0", "/tmp/x/nvidia0", "/dev/nvidia0");
  expect_parse("/tmp/x/c:/dev/dri/card1", "/tmp/x/c", "/dev/dri/card1");
  const char *bad[] = {"dev/fuse",
                       "",
                       "/",
                       "/x:/etc/x",
                       "/x:/dev/",
                       "/x:/dev",
                       "/x:/dev/../etc",
                       "/x:/dev/a//b",
                       "/x:/dev/a/",
                       "/x:/dev/./a",
                       "/dev/null",
                       "/x:/dev/shm/a",
                       "/x:/dev/pts/0",
                       "/x:relative",
                       NULL};
  for (size_t i = 0; bad[i]; i++)
    expect_parse(bad[i], NULL, NULL);
}

static char **select_ok(const char *const *names, const char *spec) {
  struct cordon_error *err = NULL;
  char **out = NULL;
  assert_int_equal(confine_gpu_select(names, spec, "/d", &out, &err), 0);
  assert_null(err);
  return out;
}

static void select_fails(const char *const *names, const char *spec, const char *says) {
  struct cordon_error *err = NULL;
  char **out = NULL;
  assert_int_equal(confine_gpu_select(names, spec, "/d", &out, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err->message, says));
  cordon_error_free(err);
  strv_free(out);
}

static void test_select(void **state) {
  (void)state;
  const char *const nv[] = {"dri/card0", "dri/renderD128", "nvidia-uvm", "nvidia0",
                            "nvidia1",   "nvidiactl",      NULL};
  char **all = select_ok(nv, "all");
  assert_int_equal(strv_length((const char *const *)all), 6);
  assert_string_equal(all[0], "/d/dri/card0:/dev/dri/card0");
  strv_free(all);
  char **one = select_ok(nv, "1");
  const char *const want1[] = {"/d/nvidia1:/dev/nvidia1", "/d/nvidiactl:/dev/nvidiactl",
                               "/d/nvidia-uvm:/dev/nvidia-uvm", NULL};
  assert_int_equal(strv_length((const char *const *)one), 3);
  for (size_t i = 0; want1[i]; i++)
    assert_string_equal(one[i], want1[i]);
  strv_free(one);
  /* 0 is nvidia0 and card0 with its render node; control nodes once, even for "0,1" */
  char **both = select_ok(nv, "0,1");
  assert_int_equal(strv_length((const char *const *)both), 6);
  strv_free(both);
  select_fails(nv, "2", "no GPU 2");
  select_fails(nv, "0,7", "no GPU 7");
  select_fails(nv, "x", "expected all or GPU indices");
  select_fails(nv, "1,", "expected all or GPU indices");
  select_fails(nv, "-1", "expected all or GPU indices");
  const char *const none[] = {"nvidiactl", "null", NULL};
  select_fails(none, "all", "has no GPU");
  select_fails(NULL, "0", "has no GPU");
}

static void touch(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
}

static void test_scan(void **state) {
  (void)state;
  char dir[] = "/tmp/cordon-devices-XXXXXX";
  assert_non_null(mkdtemp(dir));
  struct cordon_error *err = NULL;
  char **names = NULL;
  assert_int_equal(confine_gpu_scan(dir, &names, &err), 0);
  assert_int_equal(strv_length((const char *const *)names), 0);
  strv_free(names);
  char sub[600];
  snprintf(sub, sizeof(sub), "%s/dri", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  touch(dir, "nvidia0");
  touch(dir, "nvidiactl");
  touch(dir, "nvidia-caps"); /* not a node the grant takes */
  touch(dir, "null");
  touch(sub, "card0");
  touch(sub, "renderD128");
  touch(sub, "by-path");
  assert_int_equal(confine_gpu_scan(dir, &names, &err), 0);
  const char *const want[] = {"dri/card0", "dri/renderD128", "nvidia0", "nvidiactl", NULL};
  assert_int_equal(strv_length((const char *const *)names), 4);
  for (size_t i = 0; want[i]; i++)
    assert_string_equal(names[i], want[i]);
  strv_free(names);
  setenv("CORDON_DEV_ROOT", dir, 1);
  assert_string_equal(confine_devices_root(), dir);
  assert_true(confine_gpu_present());
  unsetenv("CORDON_DEV_ROOT");
  assert_string_equal(confine_devices_root(), "/dev");
  assert_int_equal(fs_remove_tree(dir, &err), 0);
}

/* docker: HostConfig.Devices for every node; NVIDIA nodes add a device request, and need the
 * engine's nvidia runtime (refused by name without it). /dev/null stands in for each node. */
static void test_docker_config(void **state) {
  (void)state;
  struct docker_paths paths = {0};
  struct cordon_limits limits = {0};
  struct docker_engine_features features = {0};
  const char *const plain[] = {"/dev/null:/dev/fake", NULL};
  const char *const gpu[] = {"/dev/null:/dev/nvidia1", "/dev/null:/dev/nvidiactl", NULL};
  struct docker_container_spec spec = {
      .image = "img",
      .session_id = "s",
      .project_state_dir = "/p/.cordon",
      .workspace = "/p/ws",
      .root = "/workspace",
      .init_path = "/init",
      .empty_file = "/p/empty",
      .user = "1000:1000",
      .network = "none",
      .paths = &paths,
      .limits = &limits,
      .features = &features,
      .devices = plain,
  };
  json_t *config = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(docker_container_config(&spec, &config, &err), 0);
  json_t *host = json_object_get(config, "HostConfig");
  json_t *d = json_array_get(json_object_get(host, "Devices"), 0);
  assert_string_equal(json_string_value(json_object_get(d, "PathOnHost")), "/dev/null");
  assert_string_equal(json_string_value(json_object_get(d, "PathInContainer")), "/dev/fake");
  assert_string_equal(json_string_value(json_object_get(d, "CgroupPermissions")), "rwm");
  assert_null(json_object_get(host, "DeviceRequests"));
  json_decref(config);

  assert_false(docker_devices_need_nvidia(plain));
  assert_true(docker_devices_need_nvidia(gpu));
  assert_true(docker_devices_need_nvidia((const char *const[]){"/dev/nvidia0", NULL}));
  assert_true(docker_devices_need_nvidia((const char *const[]){"/x/nvidia0", NULL}));
  assert_false(docker_devices_need_nvidia((const char *const[]){"/x/nvidia0:/dev/gpu", NULL}));
  spec.devices = gpu;
  config = NULL;
  assert_true(docker_container_config(&spec, &config, &err) < 0);
  assert_non_null(strstr(err->message, "nvidia runtime"));
  cordon_error_free(err);
  err = NULL;
  features.nvidia_runtime = true;
  assert_int_equal(docker_container_config(&spec, &config, &err), 0);
  host = json_object_get(config, "HostConfig");
  assert_int_equal(json_array_size(json_object_get(host, "Devices")), 2);
  json_t *req = json_array_get(json_object_get(host, "DeviceRequests"), 0);
  assert_string_equal(json_string_value(json_object_get(req, "Driver")), "nvidia");
  json_t *ids = json_object_get(req, "DeviceIDs");
  assert_int_equal(json_array_size(ids), 1);
  assert_string_equal(json_string_value(json_array_get(ids, 0)), "1");
  json_t *caps = json_array_get(json_object_get(req, "Capabilities"), 0);
  assert_string_equal(json_string_value(json_array_get(caps, 0)), "gpu");
  json_decref(config);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_select),
      cmocka_unit_test(test_scan),
      cmocka_unit_test(test_docker_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
