#!/usr/bin/env python3
"""Writes a synthetic request log (CSV) of about N rows for timing `idemcalc fit` at scale.

Poisson arrivals spread over a day, 20 callers, UUID-length keys, log-normal response sizes
(median 300 B, p99 2 kB), 0.1 % timed out (no status), each timed-out call retried after a delay
drawn from the seed's late-retry table (interpolated in log-time), 60 % of retries answered by a
replay. Deterministic: the same N gives the same file.

    python3 scripts/gen-request-log.py 10000000 /tmp/requests-10m.csv
"""

import math
import random
import sys

SEED_POINTS = [(0.25, 0.0), (10, 0.62), (60, 0.85), (600, 0.91), (3600, 0.94),
               (21600, 0.975), (86400, 0.992), (259200, 0.999), (2592000, 1.0)]


def retry_delay(u):
    for (t0, c0), (t1, c1) in zip(SEED_POINTS, SEED_POINTS[1:]):
        if u <= c1:
            f = 0.0 if c1 == c0 else (u - c0) / (c1 - c0)
            return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
    return SEED_POINTS[-1][0]


def main():
    rows = int(sys.argv[1])
    out = sys.argv[2]
    rng = random.Random(1)
    timeout = 0.001
    intents = int(rows / (1 + timeout))
    rate = intents / 86400.0
    sigma = math.log(2000 / 300) / 2.326348
    t = 1764633600.0  # 2025-12-02T00:00:00Z
    with open(out, "w") as f:
        f.write("time,caller,idempotency_key,status,response_bytes,replayed\n")
        for i in range(intents):
            t += rng.expovariate(rate)
            caller = "caller-%d" % (i % 20)
            key = "%08x-%04x-4%03x-8%03x-%012x" % (i, i & 0xFFFF, i & 0xFFF, (i >> 12) & 0xFFF, i * 2654435761 & 0xFFFFFFFFFFFF)
            size = int(300 * math.exp(sigma * rng.gauss(0, 1)))
            if rng.random() < timeout:
                f.write("%.3f,%s,%s,,,\n" % (t, caller, key))
                d = retry_delay(rng.random())
                replayed = "true" if rng.random() < 0.6 else "false"
                f.write("%.3f,%s,%s,201,%d,%s\n" % (t + d, caller, key, size, replayed))
            else:
                f.write("%.3f,%s,%s,201,%d,false\n" % (t, caller, key, size))


if __name__ == "__main__":
    main()
