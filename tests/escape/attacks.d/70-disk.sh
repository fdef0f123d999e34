# Finding 12 (issue 14): a candidate filled the host's disk with one 100 GiB sparse file. Without
# any --fsize, a sandboxed command cannot make a file larger than the default RLIMIT_FSIZE
# (4 GiB; a sparse file's apparent size counts), on ns (root and rootless) and docker; with
# --fsize unlimited it can (the control: proves the probe and the workspace could).
attack "a 5 GiB sparse file without --fsize (the default file-size limit)" -- big-file /workspace/big 5
control "a 5 GiB sparse file with --fsize unlimited" --fsize unlimited -- big-file /workspace/big 5
