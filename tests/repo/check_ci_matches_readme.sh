#!/usr/bin/env bash
# The README opens with exactly two shell commands (launch, then test), and .ci/run runs the second verbatim.
set -euo pipefail
root="$1"
mapfile -t cmds < <(awk '/^```sh$/{inblock=1; next} /^```$/{inblock=0} inblock' "$root/README.md" | head -n 2)
[ "${#cmds[@]}" -eq 2 ] || { echo "README: expected two commands at the top, found ${#cmds[@]}"; exit 1; }
[[ "${cmds[0]}" == *gkq-workbench* ]] || { echo "README: the first command must launch gkq-workbench: ${cmds[0]}"; exit 1; }
[[ "${cmds[1]}" == *ctest* ]] || { echo "README: the second command must run ctest: ${cmds[1]}"; exit 1; }
[[ "${cmds[0]}" == ./packaging/setup-deps.sh* && "${cmds[1]}" == ./packaging/setup-deps.sh* ]] ||
    { echo "README: both commands must start with ./packaging/setup-deps.sh"; exit 1; }
last=$(grep -v '^\s*#' "$root/.ci/run" | grep -v '^\s*$' | tail -n 1)
[ "$last" == "${cmds[1]}" ] || { printf '.ci/run does not run the README test command:\n  ci:     %s\n  readme: %s\n' "$last" "${cmds[1]}"; exit 1; }
echo "README commands and .ci/run agree"
