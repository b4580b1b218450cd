#!/usr/bin/env bash
# packaging/monitoring against the real server: promtool checks the configs and unit-tests the alert rules; the real
# gkq serve (started through packaging/container/entrypoint.sh on the demo model, on a free port) is scraped, and
# every metric name (and every label matched on) used by the Grafana dashboard and the rules must be in its
# /metrics; then a real Prometheus scrapes it and every dashboard expression must parse and return data.
# usage: test_monitoring.sh SOURCE_DIR GKQ_BINARY        exit 0 pass, 1 fail, 77 skipped (reason printed)
set -euo pipefail
src="$(cd "$1" && pwd)"
gkq="$2"
mon="$src/packaging/monitoring"
for tool in promtool prometheus curl jq; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (Debian packages prometheus, curl, jq)"; exit 77; }
done
tmp="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- configuration and rules ----
promtool check config "$mon/prometheus.yml" >"$tmp/check.log" 2>&1 || { cat "$tmp/check.log"; fail "prometheus.yml"; }
# Debian's promtool has no Kubernetes discovery: the in-cluster file is checked with a static target instead.
sed -e 's/^    kubernetes_sd_configs:/    static_configs:/' -e 's/^      - role: pod/      - targets: ["127.0.0.1:1"]/' \
    "$mon/prometheus-kubernetes.yml" >"$tmp/prometheus-kubernetes.yml"
cp "$mon/gkq-rules.yml" "$tmp/"
promtool check config "$tmp/prometheus-kubernetes.yml" >"$tmp/check.log" 2>&1 ||
    { cat "$tmp/check.log"; fail "prometheus-kubernetes.yml"; }
(cd "$mon" && promtool test rules gkq-rules.test.yml) >"$tmp/test.log" 2>&1 || { cat "$tmp/test.log"; fail "rule tests"; }
echo "promtool: both configs valid, rule unit tests pass"

# Dashboard expressions, with Grafana's variables given values Prometheus accepts.
# shellcheck disable=SC2016 # the $ are Grafana's, literally
jq -r '.panels[].targets[].expr' "$mon/grafana-dashboard.json" |
    sed -e 's/\$__rate_interval/1m/g' -e 's/\$instance/.*/g' >"$tmp/dashboard.exprs"
n_exprs=$(wc -l <"$tmp/dashboard.exprs")
{
    echo "groups:"
    echo "  - name: dashboard"
    echo "    rules:"
    i=0
    while IFS= read -r e; do
        i=$((i + 1))
        printf '      - record: dashboard:expr_%d\n        expr: %s\n' "$i" "$(jq -Rn --arg e "$e" '$e')"
    done <"$tmp/dashboard.exprs"
} >"$tmp/dashboard-rules.yml"
promtool check rules "$tmp/dashboard-rules.yml" >"$tmp/check.log" 2>&1 ||
    { cat "$tmp/check.log"; fail "a dashboard expression does not parse"; }
echo "promtool: the dashboard's $n_exprs expressions parse"

# ---- the real server ----
demo="$src/resources/demo"
env -i PATH="$PATH" GKQ_BIN="$gkq" GKQ_HOST=127.0.0.1 GKQ_PORT=0 GKQ_THREADS=1 WEIGHTS_PATH="$demo" \
    GKQ_TOKENIZER="$demo/tokenizer.bin" IO_BACKEND=auto bash "$src/packaging/container/entrypoint.sh" \
    2>"$tmp/serve.log" &
pids+=($!)
for _ in $(seq 300); do
    grep -qE "weights loaded|loading failed" "$tmp/serve.log" && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    read -rt 0.1 <> <(:) || true
done
grep -q "weights loaded" "$tmp/serve.log" || { cat "$tmp/serve.log"; fail "gkq serve did not load the demo model"; }
port="$(grep -oE 'listening on http://127\.0\.0\.1:[0-9]+' "$tmp/serve.log" | grep -oE '[0-9]+$')"
base="http://127.0.0.1:$port"
traffic() {
    curl -fsS "$base/health" >/dev/null
    curl -fsS "$base/ready" >/dev/null
    curl -fsS -X POST "$base/infer" -d '{"prompt":"A fortune","max_tokens":4,"temperature":0}' >/dev/null
    curl -s "$base/no-such-route" >/dev/null
}
traffic
curl -fsS "$base/metrics" >"$tmp/metrics.txt" || fail "GET /metrics"
# Names of the samples, with the label names each carries.
grep -v '^#' "$tmp/metrics.txt" | sed -E 's/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?.*/\1 \3/' |
    awk '{ name = $1; $1 = ""; n = split($0, kv, /,/); labels = "";
           for (i = 1; i <= n; i++) { split(kv[i], p, "="); gsub(/ /, "", p[1]); if (p[1] != "") labels = labels " " p[1] }
           print name labels }' | sort -u >"$tmp/samples"
cut -d' ' -f1 "$tmp/samples" | sort -u >"$tmp/names"
echo "/metrics: $(wc -l <"$tmp/names") metric names ($(grep -c '^# TYPE' "$tmp/metrics.txt") families)"

# check_names FILE...: every gkq_* name in the expressions is a sample name, every label matched on it is one of its
# labels. Prints each problem; returns 1 if any.
check_names() {
    local bad=0 name label
    while IFS= read -r name; do
        grep -qxF "$name" "$tmp/names" || { echo "  $name: not in /metrics"; bad=1; }
    done < <(cat "$@" | grep -oE 'gkq_[a-z0-9_]+' | sort -u)
    while read -r name label; do
        grep -qE "^$name( [^ ]+)* $label( |$)" "$tmp/samples" ||
            { echo "  $name{$label...}: no such label on it in /metrics"; bad=1; }
    done < <(cat "$@" | grep -oE 'gkq_[a-z0-9_]+\{[^}]*\}' |
        sed -E 's/^(gkq_[a-z0-9_]+)\{(.*)\}$/\1 \2/' |
        awk '{ n = split($2, m, /,/); for (i = 1; i <= n; i++) { sub(/[!=~].*/, "", m[i]);
                  if (m[i] !~ /^(job|instance|deployment|namespace|pod)$/) print $1, m[i] } }' | sort -u)
    return $bad
}
grep -E '^\s+expr:' "$mon/gkq-rules.yml" >"$tmp/rule.exprs"
check_names "$tmp/dashboard.exprs" "$tmp/rule.exprs" || fail "the dashboard or the rules use metrics gkq does not export"
n_used=$(cat "$tmp/dashboard.exprs" "$tmp/rule.exprs" | grep -oE 'gkq_[a-z0-9_]+' | sort -u | wc -l)
echo "dashboard + rules: all $n_used metric names they use are in /metrics, with the labels they match on"
# The check itself must catch a wrong name and a wrong label.
echo 'sum(rate(gkq_http_request_total[5m]))' >"$tmp/typo.exprs"
check_names "$tmp/typo.exprs" >"$tmp/typo.out" && fail "check_names accepted gkq_http_request_total"
grep -qF "gkq_http_request_total: not in /metrics" "$tmp/typo.out" || fail "check_names: wrong message for a typo"
echo 'gkq_cache_evictions_total{cause="budget"}' >"$tmp/typo.exprs"
check_names "$tmp/typo.exprs" >"$tmp/typo.out" && fail "check_names accepted a wrong label"
grep -qF 'gkq_cache_evictions_total{cause...}: no such label' "$tmp/typo.out" || fail "check_names: wrong label message"

# ---- a real Prometheus scrapes it; every dashboard expression returns data ----
prom_port=""
for p in $(shuf -i 20000-60000 -n 20); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then prom_port=$p; break; fi
done
[[ -n "$prom_port" ]] || fail "no free port for Prometheus"
sed -e "s/127.0.0.1:8080/127.0.0.1:$port/" -e 's/scrape_interval: 15s/scrape_interval: 1s/' \
    -e 's/evaluation_interval: 15s/evaluation_interval: 1s/' -e 's/scrape_timeout: 5s/scrape_timeout: 1s/' \
    "$mon/prometheus.yml" >"$tmp/prometheus.yml"
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
prom="http://127.0.0.1:$prom_port"
query() { curl -fsS --get "$prom/api/v1/query" --data-urlencode "query=$1"; }
# Ready once it has scraped gkq at least 5 times (rate() needs two samples in its window).
for _ in $(seq 200); do
    traffic
    n="$(query 'count_over_time(up{job="gkq"}[1m])' 2>/dev/null | jq -r '.data.result[0].value[1] // 0' 2>/dev/null || echo 0)"
    [[ "$n" -ge 5 ]] 2>/dev/null && break
    read -rt 0.2 <> <(:) || true
done
[[ "${n:-0}" -ge 5 ]] 2>/dev/null || { tail -20 "$tmp/prometheus.log"; fail "Prometheus did not scrape gkq"; }
[[ "$(query 'up{job="gkq"}' | jq -r '.data.result[0].value[1]')" == 1 ]] || fail "up{job=\"gkq\"} is not 1"
i=0
while IFS= read -r e; do
    i=$((i + 1))
    r="$(query "$e")" || fail "Prometheus refused dashboard expression $i: $e"
    [[ "$(jq -r '.status' <<<"$r")" == success ]] || fail "expression $i: $(jq -c . <<<"$r")"
    [[ "$(jq '.data.result | length' <<<"$r")" -gt 0 ]] || fail "expression $i returned no series: $e"
done <"$tmp/dashboard.exprs"
echo "prometheus (127.0.0.1:$prom_port) scraped gkq serve ($base): all $n_exprs dashboard expressions return data"
backend="$(query 'gkq_server_info' | jq -r '.data.result[0].metric.backend')"
echo "backend reported by gkq_server_info: $backend"
echo "PASS"
