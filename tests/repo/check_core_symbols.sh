#!/usr/bin/env bash
# The engine's libraries link no server code: no liburing (io_uring*), llhttp (llhttp*) or socket symbol, defined or
# undefined, in any of them; and gkq_server, which owns that code, does reference it (so this check can fail).
# usage: check_core_symbols.sh NM --core LIB... [--server LIB [--with-http-server]]
#   --with-http-server: the build has the HTTP endpoint (GKQ_WITH_SERVER), so gkq_server must use liburing and
#   llhttp; without it gkq_server holds only the weight cache, whose range client still opens sockets.
set -uo pipefail
nm_tool="$1"
shift
core=()
server=""
with_http=0
mode=""
for a in "$@"; do
    case "$a" in
        --core) mode=core ;;
        --server) mode=server ;;
        --with-http-server) with_http=1 ;;
        *) if [ "$mode" = core ]; then core+=("$a"); elif [ "$mode" = server ]; then server="$a"; fi ;;
    esac
done
[ ${#core[@]} -gt 0 ] || { echo "usage: $0 NM --core LIB... [--server LIB [--with-http-server]]"; exit 2; }

# symbol names (defined and undefined) of one static library, one a line, mangled as the linker sees them
symbols() { "$nm_tool" -P "$1" 2>/dev/null | awk 'NF >= 2 && $1 !~ /:$/ && $1 !~ /\]:$/ {print $1}'; }
server_pattern='io_uring|llhttp'
socket_pattern='^(socket|connect|accept|accept4|listen|bind|getaddrinfo)$'

fail=0
for lib in "${core[@]}"; do
    if [ ! -f "$lib" ]; then
        echo "FAIL: $lib does not exist"
        fail=1
        continue
    fi
    n=$(symbols "$lib" | wc -l)
    if [ "$n" -eq 0 ]; then
        echo "FAIL: $nm_tool lists no symbols in $lib"
        fail=1
        continue
    fi
    hits=$(symbols "$lib" | grep -E "$server_pattern|$socket_pattern" | sort -u)
    if [ -n "$hits" ]; then
        echo "FAIL: $(basename "$lib") references server code (liburing, llhttp or sockets):"
        printf '  %s\n' $hits | head -n 20
        fail=1
    else
        echo "ok: $(basename "$lib"): $n symbols, none of liburing, llhttp or sockets"
    fi
done

if [ -n "$server" ]; then
    expect=("socket")
    [ $with_http -eq 1 ] && expect+=("io_uring_" "llhttp_")
    for e in "${expect[@]}"; do
        if [ "$e" = socket ]; then
            n=$(symbols "$server" | grep -cE "$socket_pattern")
        else
            n=$(symbols "$server" | grep -c "^$e")
        fi
        if [ "$n" -eq 0 ]; then
            echo "FAIL: $(basename "$server") has no $e symbol: the check above would not see that code either"
            fail=1
        else
            echo "ok: $(basename "$server") references $n ${e%_}* symbols (the code the engine must not link)"
        fi
    done
fi
exit $fail
