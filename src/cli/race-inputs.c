/* `cordon race`'s candidate inputs (see race-inputs.h). The shared options go through
 * cmd-manifest.c exactly as `cordon run` parses them; the per-candidate ones are checked and
 * read here, all before any session starts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "cli/cli.h"
#include "cli/cmd-manifest.h"
#include "cli/race-inputs.h"
#include "race/forms.h"
#include "race/patch.h"

struct cli_race_inputs {
  struct manifest_opts shared;
  bool has_shared;
  char **files, **env, **patches; /* "I:..." as given */
  struct cordon_manifest manifest;
  struct cordon_repo_spec repo;
  struct cordon_race_inputs *per; /* k entries */
  unsigned k;
  char ***per_env; /* k vectors, "KEY=VALUE" */
  unsigned char **blobs;
  size_t n_blobs;
};

static const struct {
  const char *name;
  int code;
} shared_options[] = {
    {"env", OPT_ENV},
    {"file", OPT_FILE},
    {"allow-ro", OPT_ALLOW_RO},
    {"net", OPT_NET},
    {"memory", OPT_MEMORY},
    {"pids", OPT_PIDS},
    {"cpus", OPT_CPUS},
    {"image", OPT_IMAGE},
    {"monitor", OPT_MONITOR},
    {"allow-domain", OPT_ALLOW_DOMAIN},
    {"allow-cidr", OPT_ALLOW_CIDR},
    {"resolve", OPT_RESOLVE},
};

int cli_race_inputs_option(const char *name, const char *arg, struct cli_race_inputs **inp) {
  if (!*inp && !(*inp = calloc(1, sizeof(**inp))))
    return EXIT_FAILURE_;
  struct cli_race_inputs *in = *inp;
  for (size_t i = 0; i < ARRAY_SIZE(shared_options); i++)
    if (!strcmp(name, shared_options[i].name)) {
      in->has_shared = true;
      return manifest_option("race", shared_options[i].code, arg, &in->shared);
    }
  char ***list = !strcmp(name, "candidate")       ? &in->files
                 : !strcmp(name, "candidate-env") ? &in->env
                                                  : &in->patches;
  return strv_push(list, arg) < 0 ? EXIT_FAILURE_ : 0;
}

/* One per-candidate option's value (race/forms.c); a malformed one is a usage error. */
static int form_of(enum race_form form, const char *arg, unsigned k, struct race_form_value *v) {
  struct cordon_error *err = NULL;
  if (race_form_parse(form, arg, k, v, &err) == 0)
    return 0;
  int r = err && err->kind == CORDON_ERR_USAGE
              ? cli_usage_error("race", "%s", err->message ? err->message : arg)
              : EXIT_FAILURE_;
  cordon_error_free(err);
  return r;
}

static int keep_blob(struct cli_race_inputs *in, unsigned char *data) {
  unsigned char **grown = realloc(in->blobs, (in->n_blobs + 1) * sizeof(*grown));
  if (!grown) {
    free(data);
    return EXIT_FAILURE_;
  }
  in->blobs = grown;
  in->blobs[in->n_blobs++] = data;
  return 0;
}

static int read_input(struct cli_race_inputs *in, const char *option, const char *arg,
                      const char *src, size_t max, const void **data, size_t *length) {
  unsigned char *bytes = NULL;
  struct cordon_error *err = NULL;
  if (fs_read_file(src, max, &bytes, length, &err) < 0) {
    int r = cli_usage_error("race", "%s '%s': %s", option, arg,
                            err && err->message ? err->message : "cannot read it");
    cordon_error_free(err);
    return r;
  }
  *data = bytes;
  return keep_blob(in, bytes);
}

static int prepare_file(struct cli_race_inputs *in, const char *arg) {
  struct race_form_value v;
  int r = form_of(RACE_FORM_FILE, arg, in->k, &v);
  if (r)
    return r;
  struct cordon_race_inputs *c = &in->per[v.index];
  struct cordon_file_spec *grown = realloc((void *)c->files, (c->n_files + 1) * sizeof(*grown));
  if (!grown)
    return EXIT_FAILURE_;
  c->files = grown;
  struct cordon_file_spec *f = &grown[c->n_files];
  memset(f, 0, sizeof(*f));
  char *path = strndup(v.name, v.name_length);
  if (!path || keep_blob(in, (unsigned char *)path))
    return EXIT_FAILURE_;
  f->path = path;
  c->n_files++;
  return read_input(in, "--candidate", arg, v.value, STDIN_MAX, &f->content, &f->length);
}

static int prepare_env(struct cli_race_inputs *in, const char *arg) {
  struct race_form_value v;
  int r = form_of(RACE_FORM_ENV, arg, in->k, &v);
  if (r)
    return r;
  if (strv_push(&in->per_env[v.index], v.value) < 0)
    return EXIT_FAILURE_;
  in->per[v.index].env = (const char *const *)in->per_env[v.index];
  return 0;
}

static int prepare_patch(struct cli_race_inputs *in, const char *arg) {
  struct race_form_value v;
  int r = form_of(RACE_FORM_PATCH, arg, in->k, &v);
  if (r)
    return r;
  if (in->per[v.index].patch)
    return cli_usage_error("race", "--patch '%s': candidate %u has a patch already (one each)", arg,
                           v.index);
  return read_input(in, "--patch", arg, v.value, RACE_PATCH_MAX_BYTES, &in->per[v.index].patch,
                    &in->per[v.index].patch_length);
}

int cli_race_inputs_prepare(struct cli_race_inputs *in, unsigned k) {
  if (!in || (!in->files && !in->env && !in->patches))
    return 0;
  in->k = k;
  in->per = calloc(k, sizeof(*in->per));
  in->per_env = calloc(k, sizeof(*in->per_env));
  if (!in->per || !in->per_env)
    return EXIT_FAILURE_;
  int r = 0;
  for (size_t i = 0; !r && in->files && in->files[i]; i++)
    r = prepare_file(in, in->files[i]);
  for (size_t i = 0; !r && in->env && in->env[i]; i++)
    r = prepare_env(in, in->env[i]);
  for (size_t i = 0; !r && in->patches && in->patches[i]; i++)
    r = prepare_patch(in, in->patches[i]);
  return r;
}

int cli_race_inputs_resolve(struct cli_race_inputs *in, const struct cordon_backend *backend,
                            const struct cordon_manifest **manifest,
                            const struct cordon_race_inputs **per) {
  *manifest = NULL;
  *per = in ? in->per : NULL;
  if (!in || !in->has_shared)
    return 0;
  int r = cli_build_manifest(&in->shared, &in->manifest, &in->repo);
  if (r)
    return r; /* said already */
  struct cordon_error *err = NULL;
  if (apply_backend(backend, &in->shared, &in->manifest, &err) < 0)
    return cli_fail(err);
  *manifest = &in->manifest;
  return 0;
}

void cli_race_inputs_free(struct cli_race_inputs *in) {
  if (!in)
    return;
  manifest_opts_free(&in->shared);
  strv_free(in->files);
  strv_free(in->env);
  strv_free(in->patches);
  for (unsigned i = 0; in->per && i < in->k; i++)
    free((void *)in->per[i].files);
  for (unsigned i = 0; in->per_env && i < in->k; i++)
    strv_free(in->per_env[i]);
  for (size_t i = 0; i < in->n_blobs; i++)
    free(in->blobs[i]);
  free(in->blobs);
  free(in->per);
  free(in->per_env);
  free(in);
}
