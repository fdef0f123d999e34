# Bash completion for cordon: verbs, subverbs, each verb's options, backend names, session
# ids (the directories of .cordon/sessions/ in the project) and files where an option takes
# a path. Installed as bash-completion/completions/cordon; the option lists follow each
# verb's --help (tests/cli/install.bats checks the man pages against the same output).

# The project's .cordon/: $CORDON_PROJECT's, else the nearest ancestor's of the working
# directory that holds one.
_cordon_state_dir() {
  if [[ -n ${CORDON_PROJECT-} ]]; then
    printf '%s\n' "$CORDON_PROJECT/.cordon"
    return
  fi
  local dir=$PWD
  while :; do
    if [[ -d $dir/.cordon ]]; then
      printf '%s\n' "$dir/.cordon"
      return
    fi
    [[ -z $dir || $dir == / ]] && return
    dir=${dir%/*}
    [[ -z $dir ]] && dir=/
  done
}

_cordon_session_ids() {
  local state
  state=$(_cordon_state_dir)
  [[ -n $state && -d $state/sessions ]] || return
  local d
  for d in "$state"/sessions/*/; do
    [[ -d $d ]] || continue
    d=${d%/}
    printf '%s\n' "${d##*/}"
  done
}

_cordon() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()

  local verbs="run session backends conformance key audit gc cas snapshot race receipt volume agent version
    gate build serve token"
  verbs="$verbs events plan"
  verbs="$verbs attest"
  verbs="$verbs pool"
  verbs="$verbs worker"
  verbs="$verbs select"
  local manifest="--backend --workspace --repo --branch --sparse --root --file --env --ro
    --hide --allow-ro --net --memory --pids --cpus --nofile --fsize --tmp-size --timeout
    --image --no-require-enforcement --quiet --json --help --volume --hide-if-exists
    --user --monitor --allow-domain --allow-cidr --resolve"
  manifest="$manifest --device --gpu"
  manifest="$manifest --require --min-tier --attestation --expected-keyid --allow-unverifiable"

  if ((COMP_CWORD == 1)); then
    COMPREPLY=($(compgen -W "$verbs --help --version -V" -- "$cur"))
    return
  fi
  local verb=${COMP_WORDS[1]} sub=""
  ((COMP_CWORD > 2)) && sub=${COMP_WORDS[2]}

  # After --, the words are the sandboxed command's.
  local i
  for ((i = 2; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} == -- ]]; then
      COMPREPLY=($(compgen -c -- "$cur"))
      return
    fi
  done

  # The value of an option.
  case $prev in
  --backend)
    COMPREPLY=($(compgen -W "ns worktree docker microvm gvisor auto" -- "$cur"))
    return
    ;;
  --min-tier)
    COMPREPLY=($(compgen -W "none process container vm" -- "$cur"))
    return
    ;;
  --require)
    COMPREPLY=($(compgen -W "exec file_rw network gpu snapshot persistent_volumes caller_stdio" -- "$cur"))
    return
    ;;
  --attestation)
    COMPREPLY=($(compgen -f -- "$cur"))
    return
    ;;
  --net)
    COMPREPLY=($(compgen -W "none loopback restricted open" -- "$cur"))
    return
    ;;
  --user)
    COMPREPLY=($(compgen -W "cordon root" -- "$cur"))
    return
    ;;
  --pool)
    COMPREPLY=($(compgen -W "$(cordon pool list 2>/dev/null | cut -f1)" -- "$cur"))
    return
    ;;
  --monitor)
    COMPREPLY=($(compgen -W "qemu firecracker libkrun fake" -- "$cur"))
    return
    ;;
  --device)
    COMPREPLY=($(compgen -f -- "${cur:-/dev/}"))
    return
    ;;
  --gpu)
    COMPREPLY=($(compgen -W "all 0 1 2 3" -- "$cur"))
    return
    ;;
  --workspace | --repo | --allow-ro | --project)
    COMPREPLY=($(compgen -d -- "$cur"))
    return
    ;;
  --stdin | --out | --profile | -o | --output | --file | --policy | --protect | --recipe)
    COMPREPLY=($(compgen -f -- "$cur"))
    return
    ;;
  -v | --volume | --rev)
    return
    ;;
  --mechanism)
    COMPREPLY=($(compgen -W "auto ns bwrap landlock gvisor off" -- "$cur"))
    return
    ;;
  --print)
    COMPREPLY=($(compgen -W "bwrap seatbelt" -- "$cur"))
    return
    ;;
  --branch | --sparse | --root | --env | --ro | --hide | --memory | --pids | --cpus | \
    --nofile | --fsize | --tmp-size | --timeout | --image | --cwd | --mode | --from | \
    --count | --max-snapshot-bytes | --exclude | --type | --meta | --base | --k | --judge | \
    --jobs | --expected-keyid | --event | --resource-type | --resource-id | --actor | \
    --details | --rotate-size | --tail | --judge-cmd | --env-allow)
    return
    ;;
  esac

  local subs="" opts=""
  case $verb in
  run) opts="$manifest --cwd --stdin --interactive --tty --pool --recipe --wait" ;;
  session)
    subs="create exec read write files list inspect shutdown snapshot destroy"
    case $sub in
    create) opts="$manifest --from --count --pool --recipe --wait" ;;
    exec) opts="--cwd --env --timeout --stdin --clear-env --json --help --interactive --tty" ;;
    write) opts="--mode --help" ;;
    files | ls) opts="--json --help" ;;
    list) opts="--long --json --help" ;;
    snapshot) opts="--max-snapshot-bytes --json --help" ;;
    inspect) opts="--json --help" ;;
    read | shutdown | destroy) opts="--help" ;;
    esac
    ;;
  backends) opts="--json --help" ;;
  conformance) opts="--json --help" ;;
  key)
    subs="init show jwks"
    opts="--json --kid --help"
    ;;
  audit)
    subs="append show verify repair"
    case $sub in
    append) opts="--event --resource-type --resource-id --actor --details --rotate-size --json" ;;
    show) opts="--tail --json" ;;
    verify) opts="--json" ;;
    repair) opts="--actor --json" ;;
    esac
    opts="$opts --help"
    ;;
  gc) opts="--dry-run --all-projects --json --help" ;;
  cas)
    subs="put get info verify prune"
    case $sub in
    put) opts="--type --meta --json" ;;
    get) opts="--output" ;;
    info | verify) opts="--json" ;;
    prune | gc) opts="--dry-run --json" ;;
    esac
    opts="$opts --help"
    ;;
  version) opts="--json --help" ;;
  snapshot)
    subs="take restore export import show list forget"
    case $sub in
    take) opts="--exclude --no-cache --max-snapshot-bytes --json" ;;
    restore) opts="--keep-setid --allow-devices --json" ;;
    export) opts="--output" ;;
    import | show | list) opts="--json" ;;
    esac
    opts="$opts --help"
    ;;
  race)
    opts="--base --k --out --backend --profile --judge --timeout --jobs --fsize
      --max-snapshot-bytes --allow-no-pass --json --help --judge-cmd --ro --hide --protect
      --logs --log-limit --stream"
    opts="$opts --env --file --allow-ro --net --memory --pids --cpus --image --candidate
      --candidate-env --patch --monitor --allow-domain --allow-cidr --resolve"
    ;;
  receipt)
    subs="verify"
    opts="--expected-keyid --json --help"
    ;;
  worker)
    subs="enrol run"
    opts="--pool --json --help"
    [[ $sub == run ]] && opts="--pool --once --wait --no-warm --poll --attestation --expected-keyid --json --help"
    ;;
  attest)
    subs="verify"
    opts="--backend --host-facts --out --json --help"
    [[ $sub == verify ]] && opts="--expected-keyid --json --help"
    ;;
  select)
    opts="--require --min-tier --net --attestation --expected-keyid --allow-unverifiable --json
      --help"
    ;;
  serve) opts="--listen --socket --token-file --help" ;;
  token)
    subs="create revoke"
    opts="--help"
    [[ $sub == create ]] && opts="--scope --ttl --sub --json --help"
    ;;
  volume)
    subs="list remove"
    opts="--json --help"
    ;;
  agent)
    opts="--project --ro --hide --policy --allow-ro --env-allow --mechanism
      --no-require-enforcement --net --tmp-size --print --host-isolation
      --host-isolation-evidence --adapter --protect --allow-domain --allow-cidr --resolve
      --help"
    ;;
  gate)
    subs="baseline check"
    opts="--out --json --help"
    ;;
  build)
    subs="show"
    opts="--rev --from --output --protect --mechanism --json --help"
    ;;
  events)
    opts="--follow --json --since --help"
    ;;
  plan)
    subs="run"
    opts="--dry-run --json --help"
    ;;
  pool)
    subs="register list show retire verify place submit warm"
    case $sub in
    place) opts="--recipe --out --attestation --expected-keyid --json --help" ;;
    submit) opts="--recipe --json --help" ;;
    warm) opts="--slots --recipe --attestation --expected-keyid --json --help" ;;
    retire) opts="--help" ;;
    *) opts="--json --help" ;;
    esac
    ;;
  esac

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  if [[ -n $subs ]] && ((COMP_CWORD == 2)); then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    return
  fi
  case $verb in
  conformance)
    ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "ns worktree docker" -- "$cur"))
    ;;
  session)
    case $sub in
    exec | read | write | ls | files | inspect | shutdown | snapshot | destroy)
      COMPREPLY=($(compgen -W "$(_cordon_session_ids)" -- "$cur"))
      ;;
    esac
    ;;
  snapshot)
    case $sub in
    take | import) COMPREPLY=($(compgen -f -- "$cur")) ;;
    restore) ((COMP_CWORD == 4)) && COMPREPLY=($(compgen -d -- "$cur")) ;;
    esac
    ;;
  cas)
    [[ $sub == put ]] && COMPREPLY=($(compgen -f -- "$cur"))
    ;;
  receipt)
    [[ $sub == verify ]] && COMPREPLY=($(compgen -f -- "$cur"))
    ;;
  attest)
    [[ $sub == verify ]] && COMPREPLY=($(compgen -f -- "$cur"))
    ;;
  pool)
    case $sub in
    register) COMPREPLY=($(compgen -f -- "$cur")) ;;
    show | retire | place | submit | warm)
      ((COMP_CWORD == 3)) && COMPREPLY=($(compgen -W "$(cordon pool list 2>/dev/null | cut -f1)" -- "$cur"))
      ;;
    esac
    ;;
  plan)
    [[ $sub == run ]] && COMPREPLY=($(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
    ;;
  esac
}

complete -F _cordon cordon
