# bash completion for airlock, airlockd and airlock-runner (installed as
# one file per program; each name sources this same script).

_airlock_words() { COMPREPLY=($(compgen -W "$1" -- "$2")); }

_airlock() {
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --url | --key) ((i++)) ;;
        -*) ;;
        *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    case $prev in
    --url | --key | --cwd | --env | --proxy | --ttl | --speed | --idle-limit | --retry-for | \
        --ping-interval | --token | --wrong-token | --token-header | --header | --idle-max | \
        --age-max | --ping-interval-ms | --pings | --bytes | --url)
        return ;;
    --token-file | --cacert) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --out) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --kind) _airlock_words "local static reverse aca" "$cur"; return ;;
    --network) _airlock_words "host none" "$cur"; return ;;
    --signal) _airlock_words "TERM INT HUP KILL QUIT USR1 USR2" "$cur"; return ;;
    --escape) _airlock_words "none" "$cur"; return ;;
    esac
    if [[ -z $cmd ]]; then
        _airlock_words "--url --key --insecure --help --version probe attach run ls kill sandbox replay" "$cur"
        return
    fi
    case $cmd in
    probe) _airlock_words "--json --token --token-file --wrong-token --token-header --header --cacert --idle-max --age-max --ping-interval-ms --pings --bytes --help" "$cur" ;;
    attach) _airlock_words "--read-only --escape --retry-for --ping-interval --help" "$cur" ;;
    run) _airlock_words "--pipe --cwd --env --proxy -- --help" "$cur" ;;
    ls) _airlock_words "--json --help" "$cur" ;;
    kill) _airlock_words "--signal --help" "$cur" ;;
    sandbox) _airlock_words "add rm ls enroll --kind --url --network --platform --ttl --out --json --help" "$cur" ;;
    replay) _airlock_words "--speed --idle-limit --help" "$cur"; COMPREPLY+=($(compgen -f -- "$cur")) ;;
    esac
}

_airlockd() {
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    if ((COMP_CWORD == 1)); then
        _airlock_words "serve user keygen token version help --help --version" "$cur"
        return
    fi
    case $prev in
    --config | --tls-cert | --tls-key | --runner) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --data | --web) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --log-level) _airlock_words "error info debug" "$cur"; return ;;
    --log-format) _airlock_words "text json" "$cur"; return ;;
    --role) _airlock_words "admin operator viewer" "$cur"; return ;;
    --sandbox-network) _airlock_words "host none" "$cur"; return ;;
    --proxy-path) _airlock_words "runner direct" "$cur"; return ;;
    esac
    case ${COMP_WORDS[1]} in
    serve) _airlock_words "--config --data --db --listen --tls-cert --tls-key --runner --no-bwrap --web --session-ttl --session-idle --log-level --log-format --verbose --sandbox-user --sandbox-network --sandbox-memory --sandbox-pids --sandbox-cpu --max-conns --max-conns-per-ip --request-timeout --audit-keep-days --audit-keep-rows --ping-interval --idle-timeout --proxy-listen --proxy-path --advertise --recordings" "$cur" ;;
    user) if ((COMP_CWORD == 2)); then _airlock_words "add ls rm" "$cur"; else _airlock_words "--role --data --db" "$cur"; fi ;;
    keygen) _airlock_words "--data --rotate" "$cur" ;;
    token) _airlock_words "--data --aud --scope --sub --iss --ttl" "$cur" ;;
    help) _airlock_words "serve user keygen token version" "$cur" ;;
    esac
}

_airlock_runner() {
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
    --jwks | --token-file | --agent-proxy-fwd | --proxy-socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --workspace) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --agent-sandbox) _airlock_words "none bwrap" "$cur"; return ;;
    --agent-network) _airlock_words "host none" "$cur"; return ;;
    --identifier-from) _airlock_words "request" "$cur"; return ;;
    --log-format) _airlock_words "text json" "$cur"; return ;;
    --listen | --connect | --identifier | --token-header | --grace | --ring | --window | \
        --screen-budget | --ping-interval | --idle-timeout | --max-age | --leeway | --env-allow | \
        --agent-user | --max-procs | --max-data | --nice | --cgroup-fd | --link-key-fd | --proxy-listen)
        return ;;
    esac
    _airlock_words "--listen --connect --identifier --identifier-from --jwks --token-file --token-header --grace --ring --window --screen-budget --ping-interval --idle-timeout --max-age --leeway --env-allow --agent-user --agent-sandbox --agent-network --workspace --max-procs --max-data --nice --cgroup-fd --link-key-fd --proxy-listen --proxy-socket --agent-proxy-fwd --log-format --verbose --version --help" "$cur"
}

complete -F _airlock airlock
complete -F _airlockd airlockd
complete -F _airlock_runner airlock-runner
