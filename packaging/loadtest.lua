-- wrk script for packaging/loadtest.sh: a fixed mix of GET /health, GET /metrics and POST /infer, in a repeating
-- order of 10 requests per connection cycle (MIX_HEALTH / MIX_METRICS / MIX_INFER of them, default 6 / 1 / 3).
-- Counts responses by status class; done() prints the totals and latency percentiles as key=value lines.
local n_health = tonumber(os.getenv("MIX_HEALTH") or "6")
local n_metrics = tonumber(os.getenv("MIX_METRICS") or "1")
local n_infer = tonumber(os.getenv("MIX_INFER") or "3")
local max_tokens = tonumber(os.getenv("INFER_MAX_TOKENS") or "16")

local threads = {}
function setup(thread)
    table.insert(threads, thread)
end

local requests = {}
local i = 0
counts = {}  -- global: done() reads it from each thread (thread:get)
function init(args)
    local body = string.format('{"prompt":"A fortune","max_tokens":%d,"temperature":0}', max_tokens)
    local infer = wrk.format("POST", "/infer", {["Content-Type"] = "application/json"}, body)
    for _ = 1, n_health do table.insert(requests, wrk.format("GET", "/health")) end
    for _ = 1, n_metrics do table.insert(requests, wrk.format("GET", "/metrics")) end
    for _ = 1, n_infer do table.insert(requests, infer) end
    counts = {["2xx"] = 0, ["4xx"] = 0, ["5xx"] = 0, ["other"] = 0, ["429"] = 0, ["503"] = 0}
end

function request()
    i = i % #requests + 1
    return requests[i]
end

function response(status, headers, body)
    local class = status >= 200 and status < 300 and "2xx" or status >= 400 and status < 500 and "4xx"
        or status >= 500 and status < 600 and "5xx" or "other"
    counts[class] = counts[class] + 1
    if status == 429 or status == 503 then counts[tostring(status)] = counts[tostring(status)] + 1 end
end

function done(summary, latency, _)
    local total = {}
    for _, t in ipairs(threads) do
        local c = t:get("counts")
        for k, v in pairs(c) do total[k] = (total[k] or 0) + v end
    end
    local e = summary.errors
    print(string.format("result requests=%d duration_s=%.3f requests_per_s=%.1f bytes=%d",
        summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6), summary.bytes))
    print(string.format("result status_2xx=%d status_4xx=%d status_5xx=%d status_other=%d status_429=%d status_503=%d",
        total["2xx"] or 0, total["4xx"] or 0, total["5xx"] or 0, total["other"] or 0, total["429"] or 0,
        total["503"] or 0))
    print(string.format("result non_2xx=%d socket_connect=%d socket_read=%d socket_write=%d socket_timeout=%d",
        e.status, e.connect, e.read, e.write, e.timeout))
    print(string.format("result latency_ms p50=%.3f p90=%.3f p99=%.3f p99.9=%.3f max=%.3f mean=%.3f",
        latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
        latency:percentile(99.9) / 1e3, latency.max / 1e3, latency.mean / 1e3))
end
