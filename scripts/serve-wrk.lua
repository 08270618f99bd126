-- wrk script for `idemcalc serve`: every request a first run (a fresh key and order per request),
-- authenticated with the token `load`, optionally throttled to a total rate.
--
--   wrk -t2 -c32 -d20s --latency -s scripts/serve-wrk.lua http://127.0.0.1:8080 -- RATE CONNS BASE
--
-- RATE: total requests per second over all connections (0: flat out). wrk is closed-loop, so a
-- rate is approximated by a pause of CONNS / RATE seconds between a connection's answer and its
-- next request: latency is then measured per request, without the queueing an open-loop client
-- would add when the server falls behind. BASE: first order id, so runs against one store never
-- reuse a key (order ids are at most 9 digits).

local thread_no = 0

function setup(thread)
  thread:set("no", thread_no)
  thread_no = thread_no + 1
end

function init(args)
  rate = tonumber(args[1] or "0")
  conns = tonumber(args[2] or "1")
  base = tonumber(args[3] or "1")
  n = 0
end

function delay()
  if rate > 0 then
    return conns * 1000 / rate
  end
  return 0
end

function request()
  n = n + 1
  local order = base + no * 10000000 + n
  local body = string.format(
    '{"order_id":%d,"parcel_no":1,"weight_g":1450,"service":"ground"}', order)
  return wrk.format("POST", "/labels", {
    ["Authorization"] = "Bearer load",
    ["Idempotency-Key"] = string.format('"label:%d:1:v1"', order),
    ["Content-Type"] = "application/json",
  }, body)
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    "requests %d in %.1f s: %.0f/s; non-2xx %d, socket errors %d; latency p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
    summary.requests, s, summary.requests / s, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
end
