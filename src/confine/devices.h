/* Devices in a sandbox (`--device`, `--gpu`): what a manifest's device entry means, which GPU
 * nodes this host has, and the detached mount of one granted node.
 *
 * A manifest entry is "HOST" or "HOST:TARGET": a character device node on the host and the path
 * it appears at inside, always beneath /dev (the sandbox's own read-only /dev: a grant can cover
 * nothing else). Without TARGET a node under /dev keeps its path and any other node appears as
 * /dev/BASENAME. GPU discovery reads one directory (/dev, or CORDON_DEV_ROOT, for tests only):
 * NVIDIA nodes nvidiaN with their control nodes, and DRI nodes dri/cardN and dri/renderDM.
 * Parsing and selection are pure; the scan, the checks on the host and the clone are the calls
 * that touch it. */
#ifndef CORDON_CONFINE_DEVICES_H
#define CORDON_CONFINE_DEVICES_H

#include <stdbool.h>

#include <cordon/error.h>

/* The directory GPU discovery reads: $CORDON_DEV_ROOT when set (tests), else "/dev". */
const char *confine_devices_root(void);

/* Pure: split a manifest entry into the host node and its target inside (malloc'd), refusing a
 * relative host path, a target outside /dev, with "." or ".." or an empty component, and the
 * nodes the sandbox always has (null, zero, full, random, urandom, fd, stdin, stdout, stderr,
 * shm, pts). */
int confine_device_parse(const char *entry, char **host, char **target, struct cordon_error **err);

/* Pure: the GPUs of `spec` ("all" or "N[,N...]") among `names` (the scan's, relative to
 * dev_root), as manifest entries "DEV_ROOT/NAME:/dev/NAME" appended to *out. A GPU index is
 * nvidiaN (with every control node found) where NVIDIA nodes exist, and dri/cardN (with
 * dri/renderD(128+N)) otherwise or besides; "all" takes every node found. Refused by name: no
 * GPU at all, an index not found, a malformed spec. */
int confine_gpu_select(const char *const *names, const char *spec, const char *dev_root,
                       char ***out, struct cordon_error **err);

/* The GPU nodes in dev_root (relative names, sorted; an empty vector when none). */
int confine_gpu_scan(const char *dev_root, char ***names, struct cordon_error **err);

/* Whether this host (confine_devices_root()) has any GPU node: what the gpu capability says. */
bool confine_gpu_present(void);

/* Scan confine_devices_root() and select `spec` into *out (manifest entries). */
int confine_gpu_resolve(const char *spec, char ***out, struct cordon_error **err);

/* Refuse, by name, a host path that is not a character device node (symlinks not followed). */
int confine_device_check(const char *host, struct cordon_error **err);

/* A detached clone of the node at `host` (checked again through the fd that is cloned, so it
 * cannot be swapped for something else in between), nosuid and noexec but not nodev. */
int confine_device_prepare(const char *host, struct cordon_error **err);

#endif
