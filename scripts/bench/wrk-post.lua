-- wrk script for the benchmark: POSTs one fixed JSON body with fixed headers, and prints
-- a machine-readable summary as the last line of its output.
--   BENCH_BODY_FILE  path of the request body
--   BENCH_HEADERS    "name: value" lines, separated by "\n"
--   BENCH_USERS      optional N: requests go round-robin to the users BENCH_USER_PREFIX0 ..
--                    BENCH_USER_PREFIX(N-1) (x-service-user), each request built once in init
--   BENCH_STOP_AFTER optional N: after sending N requests the thread stops and prints
--                    BENCH_STOPPED; wrk's main thread sleeps out -d regardless, so the caller
--                    sends SIGINT on that line (wrk then prints its summary as usual). The
--                    requests still in flight are cut: count calls where they were served
local function read_file(path)
  local f = assert(io.open(path, "rb"), "cannot open " .. tostring(path))
  local content = f:read("*a")
  f:close()
  return content
end

wrk.method = "POST"
wrk.body = read_file(os.getenv("BENCH_BODY_FILE"))
wrk.headers["Content-Type"] = "application/json"
for line in string.gmatch(os.getenv("BENCH_HEADERS") or "", "[^\n]+") do
  local name, value = string.match(line, "^([^:]+):%s*(.*)$")
  if name then wrk.headers[name] = value end
end

-- Only defined with BENCH_USERS or BENCH_STOP_AFTER: without a `request` function wrk sends
-- one static request, the cheapest way, which every other run keeps.
local users = tonumber(os.getenv("BENCH_USERS") or "0")
local stop_after = tonumber(os.getenv("BENCH_STOP_AFTER") or "0")
if users > 0 or stop_after > 0 then
  local prefix = os.getenv("BENCH_USER_PREFIX") or "bench-user-"
  local prepared = {}
  local turn = 0
  local sent = 0
  function init(args)
    if users == 0 then
      prepared[1] = wrk.format()
      return
    end
    for i = 0, users - 1 do
      local headers = {}
      for name, value in pairs(wrk.headers) do headers[name] = value end
      headers["x-service-user"] = prefix .. i
      prepared[i + 1] = wrk.format(nil, nil, headers, nil)
    end
  end
  function request()
    sent = sent + 1
    if stop_after > 0 and sent == stop_after then
      io.write("BENCH_STOPPED\n")
      io.flush()
      wrk.thread:stop()
    end
    turn = turn % #prepared + 1
    return prepared[turn]
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
