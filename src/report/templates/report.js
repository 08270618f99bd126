// The report's script: recomputes the model in the page, draws the trade-off, shows hover
// values and turns the scenarios into tabs. Everything it computes comes from the embedded
// model JSON: the formula strings are those of `idemcalc estimate`, never copied here.
(function () {
  "use strict";
  var errors = [];
  function fail(message) {
    errors.push(String(message));
    document.body.setAttribute("data-errors", errors.join(" | "));
  }
  window.addEventListener("error", function (e) { fail("error: " + e.message); });
  var consoleError = console.error.bind(console);
  console.error = function () {
    fail(Array.prototype.join.call(arguments, " "));
    consoleError.apply(null, arguments);
  };

  var M = JSON.parse(document.getElementById("idemcalc-model").textContent);

  // ---- Formatting: ports of src/format.rs, checked against Rust's output at load. ----

  // Rust's `format!("{:.d$}")`: exact decimal rounding, ties to even. JS's toFixed rounds
  // exact ties up, so ties are detected on the exact expansion and rounded to even here.
  function toFixedRust(x, d) {
    if (!isFinite(x)) return String(x);
    var neg = x < 0 || Object.is(x, -0);
    var a = Math.abs(x);
    var s = a.toFixed(d);
    var exact = a.toFixed(Math.min(100, d + 60));
    var rest = exact.slice(exact.indexOf(".") + 1 + d);
    if (d === 0) rest = exact.slice(exact.indexOf(".") + 1);
    if (/^50*$/.test(rest)) {
      // A tie: toFixed went up; go down instead if that makes the last digit even.
      var down = Number(s) - Math.pow(10, -d);
      var digits = s.replace(".", "");
      var last = Number(digits[digits.length - 1]);
      if (last % 2 === 1) s = down.toFixed(d);
    }
    return (neg && Number(s) !== 0 ? "-" : (neg ? "-" : "")) + s;
  }
  function trim(t) {
    if (t.indexOf(".") < 0) return t;
    return t.replace(/0+$/, "").replace(/\.$/, "");
  }
  function significant(v, digits) {
    if (v === 0 || !isFinite(v)) return trim(rustDisplay(v));
    var mag = Math.floor(Math.log10(Math.abs(v)));
    var dec = Math.max(0, digits - 1 - mag);
    var text = toFixedRust(v, dec);
    var rounded = Number(text);
    var nmag = Math.floor(Math.log10(Math.abs(rounded)));
    if (nmag !== mag) return trim(toFixedRust(rounded, Math.max(0, digits - 1 - nmag)));
    return trim(text);
  }
  function rustDisplay(v) {
    if (Number.isNaN(v)) return "NaN";
    if (v === Infinity) return "inf";
    if (v === -Infinity) return "-inf";
    return String(v);
  }
  function roundAway(v) { return v < 0 ? -Math.round(-v) : Math.round(v); }
  function thousands(v) {
    if (!isFinite(v)) return rustDisplay(v);
    var r = roundAway(v);
    var digits = Math.abs(r).toFixed(0);
    var out = r < 0 ? "-" : "";
    for (var i = 0; i < digits.length; i++) {
      if (i > 0 && (digits.length - i) % 3 === 0) out += ",";
      out += digits[i];
    }
    return out;
  }
  var BYTE_UNITS = ["B", "kB", "MB", "GB", "TB", "PB"];
  function humanBytes(b) {
    if (!isFinite(b)) return rustDisplay(b) + " B";
    var v = b, u = 0;
    while (Math.abs(v) >= 999.5 && u + 1 < BYTE_UNITS.length) { v /= 1000; u++; }
    if (u === 0) return trim(toFixedRust(v, 1)) + " B";
    return significant(v, 3) + " " + BYTE_UNITS[u];
  }
  function humanCount(c) {
    if (!isFinite(c)) return rustDisplay(c);
    var m = Math.abs(c);
    var units = [[1e12, "T"], [1e9, "B"], [1e6, "M"]];
    for (var i = 0; i < units.length; i++) {
      if (m >= units[i][0] * 0.99995) return significant(c / units[i][0], 4) + units[i][1];
    }
    if (m >= 999.5) return thousands(c);
    return significant(c, 3);
  }
  function usd(a) {
    if (!isFinite(a)) return "$" + rustDisplay(a);
    var sign = a < 0 ? "-" : "";
    var m = Math.abs(a);
    if (m >= 99.995) return sign + "$" + thousands(m);
    return sign + "$" + toFixedRust(m, 2);
  }
  function percent(f) {
    var p = f * 100;
    if (!isFinite(p)) return rustDisplay(p) + "%";
    if (Math.abs(p) >= 10) return trim(toFixedRust(p, 1)) + "%";
    return significant(p, 3) + "%";
  }
  function ratePerS(r) {
    return r >= 999.5 ? thousands(r) + "/s" : significant(r, 4) + "/s";
  }
  function formatSecs(secs) {
    var units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
    for (var i = 0; i < units.length; i++) {
      var n = secs / units[i][1];
      if (n >= 1 && Math.abs(n - roundAway(n)) < 1e-9) return roundAway(n) + units[i][0];
    }
    if (secs < 1 && secs > 0) {
      var ms = secs * 1000;
      if (Math.abs(ms - roundAway(ms)) < 1e-9) return roundAway(ms) + "ms";
    }
    return rustDisplay(secs) + "s";
  }
  // `duration::four_figures`: four significant figures, trailing zeros dropped.
  function fourFigures(v) {
    var mag = Math.floor(Math.log10(Math.abs(v)));
    var dec = Math.max(0, 3 - mag);
    var text = toFixedRust(v, dec);
    var rounded = Number(text);
    if (Math.floor(Math.log10(Math.abs(rounded))) > mag && dec > 0) text = toFixedRust(rounded, dec - 1);
    return trim(text);
  }
  // `duration::format_approx`: the largest unit that keeps it at 1 or above.
  function formatApprox(secs) {
    if (!(isFinite(secs) && secs > 0)) return "0s";
    var units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
    var u = units.find(function (u) { return secs >= u[1]; }) || ["ms", 1e-3];
    return fourFigures(secs / u[1]) + u[0];
  }
  // `duration::format_readable`: a round unit when one divides it, else four figures.
  function humanDuration(secs) {
    var h = secs / 3600;
    if (h >= 1 && h < 48 && Math.abs(h - roundAway(h)) < 1e-9) return roundAway(h) + "h";
    var exact = formatSecs(secs);
    return /^[0-9]+(d|h|m|s|ms)$/.test(exact) ? exact : formatApprox(secs);
  }
  var FORMAT = {
    bytes: humanBytes,
    gigabytes: function (v) { return humanBytes(v * 1e9); },
    count: humanCount,
    per_day: function (v) { return humanCount(v) + "/day"; },
    usd: usd,
    usd_per_day: function (v) { return usd(v) + "/day"; },
    percent: percent,
    duration: humanDuration,
    rate: ratePerS
  };

  // ---- The model: RetryDelay::cdf from src/traffic.rs, and the formula strings. ----

  var D = M.distribution;
  var PTS = D.points.map(function (p) { return [p.delay_s, p.cdf]; });
  function cdf(t) {
    if (Number.isNaN(t)) return NaN;
    var first = PTS[0], last = PTS[PTS.length - 1];
    if (t < first[0]) {
      if (D.head.kind === "at_first_point") return 0;
      var m = D.head.min_delay_s;
      if (t > m) return first[1] * Math.log(t / m) / Math.log(first[0] / m);
      return 0;
    }
    if (t > last[0]) {
      var horizon = D.tail.max_horizon_s;
      if (last[1] >= 1 || t >= horizon) return 1;
      if (D.tail.kind === "log_linear") {
        return last[1] + (1 - last[1]) * Math.log(t / last[0]) / Math.log(horizon / last[0]);
      }
      return last[1];
    }
    for (var i = 0; i < PTS.length; i++) {
      if (PTS[i][0] === t) return PTS[i][1];
      if (PTS[i][0] > t) {
        var a = PTS[i - 1], b = PTS[i];
        return a[1] + (b[1] - a[1]) * Math.log(t / a[0]) / Math.log(b[0] / a[0]);
      }
    }
    return last[1];
  }
  var FUNCTIONS = {
    max: function (a, b) { return Math.max(a, b); },
    min: function (a, b) { return Math.min(a, b); },
    survival: function (t) { return 1 - cdf(t); }
  };
  var known = M.inputs.map(function (i) { return i.name; });
  var compiled = M.formulas.map(function (f) {
    var args = M.functions.concat(known);
    var fn = Function.apply(null, args.concat(['"use strict"; return (' + f.expr + ");"]));
    var c = { name: f.name, names: known.slice(), fn: fn };
    known.push(f.name);
    return c;
  });
  function evaluate(params) {
    var v = {};
    Object.keys(params).forEach(function (k) { v[k] = params[k]; });
    var fns = M.functions.map(function (n) { return FUNCTIONS[n]; });
    compiled.forEach(function (c) {
      v[c.name] = c.fn.apply(null, fns.concat(c.names.map(function (n) { return v[n]; })));
    });
    return v;
  }
  // `model::candidate_retentions_s`: the standard retentions, the current one and the horizon,
  // none beyond the horizon, sorted. The sweep and the decision weigh the same set, so the
  // cheapest has one answer.
  function retentions(params) {
    var rs = M.sweep_retentions_s.concat([params.retention_s, M.horizon_s])
      .filter(function (r) { return isFinite(r) && r > 0 && r <= M.horizon_s; });
    rs.sort(function (a, b) { return a - b; });
    return rs.filter(function (r, i) { return i === 0 || r !== rs[i - 1]; });
  }
  // The sweep of `model::estimate`; the cheapest is the first minimum (the shorter retention on
  // a tie).
  function sweep(params) {
    var rows = retentions(params).map(function (r) {
      var p = Object.assign({}, params, { retention_s: r });
      var v = evaluate(p);
      return { retention_s: r, store_bytes: v.store_bytes, duplicates_per_day: v.duplicate_labels_per_day,
        storage_cost_per_day: v.storage_cost_per_day, duplicate_cost_per_day: v.duplicate_cost_per_day,
        total_cost_per_day: v.total_cost_per_day };
    });
    var best = null;
    rows.forEach(function (r) { if (best === null || r.total_cost_per_day < best.total_cost_per_day) best = r; });
    return { rows: rows, best: best };
  }

  // The inputs the page starts at: the run's model inputs, its payload sizes and its decision
  // targets, an unset store or cost budget at its control's "none".
  var SPEC = {};
  M.controls.forEach(function (c) { SPEC[c.name] = c; });
  function startParams() {
    var T = M.targets;
    return Object.assign({
      max_duplicates_per_day: T.max_duplicates_per_day,
      max_store_gb: T.max_store_gb != null ? T.max_store_gb : SPEC.max_store_gb.none,
      max_cost_per_day: T.max_cost_per_day != null ? T.max_cost_per_day : SPEC.max_cost_per_day.none,
      key_bytes: M.payload.key_bytes, response_bytes: M.payload.response_bytes
    }, M.base);
  }
  // A budget control at the top of its range means no budget ("none").
  function atNone(spec, v) { return spec.none != null && v >= spec.none; }
  // A budget's limit, or null when the control sits at "none".
  function budget(params, name) {
    var v = params[name];
    return v == null || atNone(SPEC[name], v) ? null : v;
  }
  // One formula of the table at `vars` (the names it reads), as `evaluate` runs the chain.
  function formulaAt(name, vars) {
    var c = compiled.find(function (c) { return c.name === name; });
    var fns = M.functions.map(function (n) { return FUNCTIONS[n]; });
    return c.fn.apply(null, fns.concat(c.names.map(function (n) { return vars[n]; })));
  }
  // The daily cost of a store and its duplicates, through the model's formulas.
  function costAt(params, storeBytes, duplicates) {
    var storage = formulaAt("storage_cost_per_day", { store_bytes: storeBytes, replicas: params.replicas,
      storage_usd_per_gb_month: params.storage_usd_per_gb_month });
    var dupCost = formulaAt("duplicate_cost_per_day", { duplicate_labels_per_day: duplicates,
      label_price_usd: params.label_price_usd });
    return formulaAt("total_cost_per_day", { storage_cost_per_day: storage, duplicate_cost_per_day: dupCost });
  }
  // The run's counts (M.evidence: the decision's own figures at each retention it weighed)
  // stand while the traffic is the run's: the rate scales records and duplicates alike, prices,
  // budgets, copies and record sizes are arithmetic on them; any other control of the traffic
  // leaves the model alone to decide (null).
  function evidenceScale(params) {
    if (!M.evidence.length) return null;
    var same = ["timeout_fraction", "done_fraction", "carrier_window_s"].every(function (n) {
      return params[n] === M.base[n];
    });
    return same ? params.rate_per_s / M.base.rate_per_s : null;
  }
  // Each retention weighed, with the figures the rule reads: `src/decision.rs`'s `choice`.
  function candidates(params) {
    var k = evidenceScale(params);
    var gb = budget(params, "max_store_gb"), usdDay = budget(params, "max_cost_per_day");
    return retentions(params).map(function (r) {
      var v = evaluate(Object.assign({}, params, { retention_s: r }));
      var e = k === null ? null : M.evidence.find(function (e) { return e.retention_s === r; });
      var f;
      if (e) {
        var store = e.records * k * params.bytes_per_record;
        var low = store * e.store_ci95_rel[0], high = store * e.store_ci95_rel[1];
        var dup = e.duplicates * k;
        f = { store_bytes: store, peak_top: high * e.peak_ratio, duplicates: dup,
          total: costAt(params, store, dup),
          low: costAt(params, low, e.duplicates_ci95[0] * k),
          high: costAt(params, high, e.duplicates_ci95[1] * k),
          worst: costAt(params, high, dup) };
      } else {
        f = { store_bytes: v.store_bytes, peak_top: v.store_bytes, duplicates: v.duplicate_labels_per_day,
          total: v.total_cost_per_day, low: v.total_cost_per_day, high: v.total_cost_per_day,
          worst: v.total_cost_per_day };
      }
      return { retention_s: r, v: v, f: f,
        dup: f.duplicates <= params.max_duplicates_per_day,
        store: gb === null || f.peak_top <= gb * 1e9,
        cost: usdDay === null || f.worst <= usdDay };
    });
  }

  // The decision rule of src/decision.rs: the cheapest retention up to the horizon whose real
  // duplicates stay under the target and whose store and cost fit the budgets; a shorter one
  // whose cost interval reaches the cheapest's wins the tie. The check at load below compares
  // it with Rust's answer at the page's starting inputs.
  function decide(params) {
    var feasible = candidates(params).filter(function (c) { return c.dup && c.store && c.cost; });
    if (!feasible.length) return null;
    var best = feasible[0];
    feasible.forEach(function (c) { if (c.f.total < best.f.total) best = c; });
    var tied = feasible.find(function (c) { return c.retention_s < best.retention_s && c.f.low <= best.f.high; });
    var c = tied || best;
    return { retention_s: c.retention_s, v: c.v, f: c.f };
  }

  // Why no retention is recommended, naming the budget that blocks it: the target no retention
  // meets, or the budgets the shortest retention under the target breaks.
  function whyNone(params) {
    var cs = candidates(params), target = params.max_duplicates_per_day;
    var under = cs.find(function (c) { return c.dup; });
    if (!under) {
      return "no retention up to " + humanDuration(M.horizon_s) + " keeps duplicates under " +
        humanCount(target) + "/day (the duplicates target blocks it)";
    }
    var broken = [];
    if (!under.store) broken.push("the store budget of " + humanBytes(budget(params, "max_store_gb") * 1e9) + " (it needs " + humanBytes(under.f.peak_top) + " per copy)");
    if (!under.cost) broken.push("the cost budget of " + usd(budget(params, "max_cost_per_day")) + "/day (it costs " + usd(under.f.worst) + "/day)");
    // The same sentence as `report::html::whatif::why_none`.
    return humanDuration(under.retention_s) + " is the shortest retention under " + humanCount(target) +
      " duplicates/day, and every one that is breaks " + broken.join(" and ");
  }

  // ---- Checks at load: the script must agree with Rust, or say so loudly. ----
  M.check_formats.forEach(function (c) {
    var got = FORMAT[c[0]](c[1]);
    if (got !== c[2]) console.error("format " + c[0] + "(" + c[1] + "): page shows " + got + ", idemcalc " + c[2]);
  });
  (function () {
    var v = evaluate(M.base);
    Object.keys(M.check_figures).forEach(function (k) {
      var want = M.check_figures[k], got = v[k];
      var ok = want === got || Math.abs(got - want) <= 1e-9 * Math.max(1, Math.abs(want));
      if (!ok) console.error("formula " + k + ": page computes " + got + ", idemcalc " + want);
    });
    var s = sweep(M.base);
    if (s.best && s.best.retention_s !== M.check_cheapest_s) {
      console.error("cheapest retention: page " + s.best.retention_s + " s, idemcalc " + M.check_cheapest_s + " s");
    }
    var d = decide(startParams());
    var got = d ? d.retention_s : null;
    if (got !== M.check_decision_s) {
      console.error("recommended retention: page " + got + " s, idemcalc " + M.check_decision_s + " s");
    }
    // At the card's inputs the page computes the card's numbers.
    var want = M.check_decision;
    if (d && want) {
      [["store_bytes", d.f.store_bytes], ["duplicate_labels_per_day", d.f.duplicates],
        ["total_cost_per_day", d.f.total]].forEach(function (pair) {
        var w = want[pair[0]], g = pair[1];
        if (!(Math.abs(g - w) <= 1e-9 * Math.max(1, Math.abs(w)))) {
          console.error("decision " + pair[0] + ": page computes " + g + ", idemcalc " + w);
        }
      });
    }
  })();

  // ---- The trade-off chart, redrawn like the plotters one. ----
  var SVGNS = "http://www.w3.org/2000/svg";
  function el(name, attrs, parent, text) {
    var e = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    var raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step, i = 0; v <= hi + step * 1e-9 && i < 4 * n + 4; v += step, i++) out.push(v);
    return out;
  }
  function niceTop(max) {
    if (!(max > 0) || !isFinite(max)) return 1;
    var t = niceTicks(0, max * 1.08, 5), step = t.length > 1 ? t[1] : max;
    return Math.ceil(max * 1.08 / step) * step;
  }
  // Labels go where nothing is drawn: each tries its positions in turn and takes the first one
  // inside the panel that touches no line, ring, point or other text (boxes measured as drawn).
  // They are drawn after everything else, with a white halo, so even the fallback (the
  // position crossing the fewest marks) is never struck through.
  function obstacles() {
    var segs = [], rings = [], boxes = [];
    function hitsBox(b) {
      var n = 0;
      segs.forEach(function (s) { if (segmentInBox(s, b)) n++; });
      rings.forEach(function (c) { if (ringInBox(c, b)) n++; });
      boxes.forEach(function (o) { if (!(b[2] <= o[0] || b[0] >= o[2] || b[3] <= o[1] || b[1] >= o[3])) n++; });
      return n;
    }
    return {
      line: function (x1, y1, x2, y2) { segs.push([x1, y1, x2, y2]); },
      ring: function (cx, cy, r) { rings.push([cx, cy, r]); },
      box: function (b) { boxes.push(b); },
      text: function (t) { var r = t.getBBox(); boxes.push([r.x, r.y, r.x + r.width, r.y + r.height]); },
      hits: hitsBox
    };
  }
  // Liang–Barsky: does the segment s cross the box b (x0, y0, x1, y1)?
  function segmentInBox(s, b) {
    var x = s[0], y = s[1], dx = s[2] - s[0], dy = s[3] - s[1], t0 = 0, t1 = 1;
    var p = [-dx, dx, -dy, dy], q = [x - b[0], b[2] - x, y - b[1], b[3] - y];
    for (var i = 0; i < 4; i++) {
      if (p[i] === 0) { if (q[i] < 0) return false; continue; }
      var r = q[i] / p[i];
      if (p[i] < 0) { if (r > t1) return false; if (r > t0) t0 = r; } else { if (r < t0) return false; if (r < t1) t1 = r; }
    }
    return true;
  }
  // Does the circle c (cx, cy, r, stroke included) touch the box b?
  function ringInBox(c, b) {
    var nx = Math.max(b[0], Math.min(c[0], b[2])), ny = Math.max(b[1], Math.min(c[1], b[3]));
    return (nx - c[0]) * (nx - c[0]) + (ny - c[1]) * (ny - c[1]) <= (c[2] + 1.5) * (c[2] + 1.5);
  }
  // Places the panels' labels, `layers` being [obstacles, bounds, labels] per panel: first
  // every label that has a clear position; then each left over is dropped when another panel
  // already shows the same words (the retention lines repeat on all three), or else takes the
  // position that crosses the fewest marks.
  function placeLabels(layer, layers) {
    var shown = {}, left = [];
    function measure(w) {
      var t = el("text", { x: 0, y: 0, "text-anchor": "start", "font-size": 11, "font-family": "sans-serif", fill: w.colour,
        "class": "label", "paint-order": "stroke", stroke: "#fff", "stroke-width": 3, "stroke-linejoin": "round" }, layer, w.text);
      return [t, t.getComputedTextLength()];
    }
    function best(w, obs, bounds, width) {
      var pick = null;
      w.at.forEach(function (c) {
        if (pick && pick.hits === 0) return;
        var x0 = c[2] === "end" ? c[0] - width : c[0];
        // The text's own box, one pixel of air around it; a vertical label (c[3]) reads
        // upwards from (x, y), its baseline at x.
        var box = c[3] ? [c[0] - 10, c[1] - width - 1, c[0] + 3, c[1] + 1] : [x0 - 1, c[1] - 10, x0 + width + 1, c[1] + 3];
        var inside = box[0] >= bounds[0] && box[2] <= bounds[2] && box[1] >= bounds[1] && box[3] <= bounds[3];
        if (!inside) return;
        var hits = obs.hits(box);
        if (pick === null || hits < pick.hits) pick = { y: c[1], box: box, hits: hits, x0: c[3] ? c[0] : x0, up: !!c[3] };
      });
      return pick;
    }
    function put(t, obs, pick) {
      if (pick.up) {
        t.setAttribute("transform", "translate(" + pick.x0 + "," + pick.y + ") rotate(-90)");
      } else {
        t.setAttribute("x", pick.x0);
        t.setAttribute("y", pick.y);
      }
      obs.box(pick.box);
    }
    layers.forEach(function (l) {
      l[2].forEach(function (w) {
        var m = measure(w), pick = best(w, l[0], l[1], m[1]);
        if (pick && pick.hits === 0) { put(m[0], l[0], pick); shown[w.text] = true; } else left.push([m[0], l, w, m[1]]);
      });
    });
    left.forEach(function (x) {
      var pick = shown[x[2].text] ? null : best(x[2], x[1][0], x[1][1], x[3]);
      if (pick) { put(x[0], x[1][0], pick); shown[x[2].text] = true; } else layer.removeChild(x[0]);
    });
  }
  // Positions beside a vertical line at x, from the top down, right side first; then along
  // it, reading upwards, where a narrow panel leaves no room across.
  function besideVertical(x, top, bottom) {
    var out = [], along = [];
    for (var y = top + 12; y <= bottom - 4; y += 14) {
      out.push([x + 5, y, "start"], [x - 5, y, "end"]);
      along.push([x + 14, y, "start", true], [x - 4, y, "start", true]);
    }
    return out.concat(along.reverse());
  }
  // Positions just above and below a horizontal line at y, from the right end leftwards.
  function alongHorizontal(y, left, right) {
    var out = [];
    for (var x = right - 2; x >= left + 40; x -= 24) out.push([x, y - 4, "end"], [x, y + 13, "end"]);
    return out;
  }
  // Positions around a point, nearest first, then above it against the panel's right edge
  // (`edge`), where a point at the last retention leaves room.
  function aroundPoint(px, py, edge) {
    var out = [];
    [14, 20, 26, 40, 56].forEach(function (d) {
      out.push([px - 12, py - d, "end"], [px + 12, py - d, "start"], [px - 12, py + d + 8, "end"], [px + 12, py + d + 8, "start"],
        [edge, py - d, "end"]);
    });
    return out;
  }
  // The caption of what is drawn: the words of the chart drawn in Rust (`charts::tradeoff`'s
  // legend), for what this drawing shows.
  function legendText(d) {
    var parts = [];
    var line = "The line in each panel is the model at the inputs above";
    if (d.parts === true) line += " (on the cost panel, dashed: its two parts, storage grey and duplicates red)";
    if (d.parts === false) line += " (the cost's two parts are not drawn: at every retention one of them is too small to tell apart from the axis, so the other lies on the total; storage reaches " +
      usd(d.storageMax) + "/day, duplicates " + usd(d.duplicatesMax) + "/day)";
    parts.push(line);
    if (d.limits.length) {
      var l = d.limits.length === 1 ? d.limits[0] : d.limits.slice(0, -1).join(", ") + " and " + d.limits[d.limits.length - 1];
      parts.push("the long purple dashes are " + l);
    }
    if (d.recommended !== null && d.recommended === d.now) {
      parts.push("the green line is the recommended retention, " + humanDuration(d.recommended) + ", which the inputs are at");
    } else if (d.recommended !== null) {
      parts.push("the grey dashed line is the retention the inputs are at, " + humanDuration(d.now));
      parts.push("the green line the recommended one, " + humanDuration(d.recommended));
    } else {
      parts.push("the grey dashed line is the retention the inputs are at, " + humanDuration(d.now) + " (none is recommended at these inputs)");
    }
    parts.push("the green ring is the cheapest retention, " + humanDuration(d.cheapest));
    var out = parts.join("; ") + ".";
    if (d.sims) out += " Black whiskers are simulated runs at the same traffic with their 95% interval (at the bytes per record they measured); they stay while only the retention moves.";
    return out;
  }
  var COLOURS = { line: "#2563eb", limit: "#7c3aed", ok: "#16a34a", okText: "#15803d", muted: "#6b7280", bad: "#dc2626", badText: "#b91c1c", grid: "#e5e7eb", ink: "#1f2937" };
  function drawTradeoff(params) {
    var s = sweep(params);
    // Simulated runs stay on the chart while only the retention differs from the run's inputs.
    var simsComparable = Object.keys(M.base).every(function (k) {
      return k === "retention_s" || k === "peak_rate_per_s" || params[k] === M.base[k];
    });
    var sims = simsComparable ? (M.sim_points || []) : [];
    var wrap = document.getElementById("tradeoff");
    // Drawn at the container's own width, one pixel per unit, so text keeps its size on a
    // phone; below 640 px the three panels stack.
    var avail = Math.max(300, Math.floor(wrap.clientWidth || 1000));
    var stacked = avail < 640;
    var PW = stacked ? avail : avail / 3, PH = stacked ? 240 : 300;
    var W = avail, H = stacked ? PH * 3 : PH;
    var svg = el("svg", { "class": "chart", role: "img", width: W, height: H, viewBox: "0 0 " + W + " " + H,
      "aria-label": "Retention trade-off: store size, duplicates and daily cost (recomputed; the values are in the table below)" });
    // In the page from the start, so labels can be measured as they are drawn.
    wrap.textContent = "";
    wrap.appendChild(svg);
    el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff" }, svg);
    var xs = s.rows.map(function (r) { return Math.log10(r.retention_s); });
    var xlo = xs[0] - 0.08, xhi = xs[xs.length - 1] + 0.08;
    var xticks = (stacked ? [3600, 86400, 604800, 2592000] : [3600, 21600, 86400, 259200, 604800, 2592000]).filter(function (t) {
      return Math.log10(t) >= xlo && Math.log10(t) <= xhi;
    });
    var gb = budget(params, "max_store_gb");
    var panels = [
      ["Store size", "Store size (bytes)", "store_bytes", humanBytes, gb !== null ? gb * 1e9 : null, "budget", "the store budget"],
      ["Duplicate labels per day", "Duplicate labels per day", "duplicates_per_day", humanCount, params.max_duplicates_per_day, "target", "the duplicates target"],
      ["Total daily cost", "Cost per day (USD)", "total_cost_per_day", usd, budget(params, "max_cost_per_day"), "budget", "the cost budget"]
    ];
    var decided = decide(params);
    var nowIsDecided = decided !== null && decided.retention_s === params.retention_s;
    var drawn = { parts: null, limits: [], now: params.retention_s, recommended: decided ? decided.retention_s : null,
      cheapest: s.best ? s.best.retention_s : null, sims: sims.length > 0, storageMax: 0, duplicatesMax: 0 };
    var layers = [];
    panels.forEach(function (p, pi) {
      var ox = stacked ? 0 : pi * PW, oy = stacked ? pi * PH : 0;
      // The x axis sits a little below the plot's zero, so a ring or point at zero never
      // reaches its tick labels.
      var left = ox + 68, right = ox + PW - 18, top = oy + 30, bottom = oy + PH - 56, axisY = bottom + 10;
      var obs = obstacles();
      var values = s.rows.map(function (r) { return r[p[2]]; });
      sims.forEach(function (sp) { values.push(sp[p[2]][2]); });
      var max = Math.max.apply(null, values);
      // A limit far above the data would flatten it: draw it only when it is in view.
      var limit = p[4], limitShown = limit !== null && limit !== undefined && isFinite(limit) && limit <= max * 3;
      var yTop = niceTop(limitShown ? Math.max(max, limit) : max);
      var X = function (v) { return left + (v - xlo) / (xhi - xlo) * (right - left); };
      var Y = function (v) { return bottom - v / yTop * (bottom - top); };
      var line = function (x1, y1, x2, y2, attrs) {
        var a = Object.assign({ x1: x1, x2: x2, y1: y1, y2: y2 }, attrs);
        el("line", a, svg);
        obs.line(x1, y1, x2, y2);
      };
      obs.text(el("text", { x: ox + PW / 2, y: oy + 18, "text-anchor": "middle", "font-size": 14, "font-family": "sans-serif", fill: COLOURS.ink }, svg, p[0]));
      niceTicks(0, yTop, 4).forEach(function (t) {
        el("line", { "class": "grid", x1: left, x2: right, y1: Y(t), y2: Y(t), stroke: COLOURS.grid }, svg);
        obs.text(el("text", { x: left - 6, y: Y(t) + 4, "text-anchor": "end", "font-size": 11, "font-family": "sans-serif", fill: COLOURS.muted }, svg, p[3](t)));
      });
      xticks.forEach(function (t) {
        var x = X(Math.log10(t));
        el("line", { "class": "grid", x1: x, x2: x, y1: top, y2: bottom, stroke: COLOURS.grid }, svg);
        obs.text(el("text", { x: x, y: axisY + 14, "text-anchor": "middle", "font-size": 11, "font-family": "sans-serif", fill: COLOURS.muted }, svg, humanDuration(t)));
      });
      line(left, top, left, axisY, { stroke: COLOURS.muted });
      line(left, axisY, right, axisY, { stroke: COLOURS.muted });
      obs.text(el("text", { x: (left + right) / 2, y: oy + PH - 8, "text-anchor": "middle", "font-size": 12, "font-family": "sans-serif", fill: COLOURS.ink }, svg, "Retention (log scale)"));
      el("text", { x: 0, y: 0, transform: "translate(" + (ox + 12) + "," + ((top + bottom) / 2) + ") rotate(-90)", "text-anchor": "middle", "font-size": 11, "font-family": "sans-serif", fill: COLOURS.ink }, svg, p[1]);
      // Labels with the fewest places to go are placed first; the limit's can go anywhere along
      // its line, so it comes last.
      var wanted = [], limitLabel = null;
      var path = function (key, colour, width, dash, cls) {
        var pts = s.rows.map(function (r, i) { return [X(xs[i]), Y(r[key])]; });
        var d = pts.map(function (q, i) { return (i ? "L" : "M") + q[0].toFixed(1) + " " + q[1].toFixed(1); }).join(" ");
        var a = { "class": cls, d: d, fill: "none", stroke: colour, "stroke-width": width };
        if (dash) a["stroke-dasharray"] = dash;
        el("path", a, svg);
        for (var i = 1; i < pts.length; i++) obs.line(pts[i - 1][0], pts[i - 1][1], pts[i][0], pts[i][1]);
      };
      if (pi === 2) {
        // The parts only where they can be told apart (`charts::parts_shown`).
        drawn.parts = s.rows.some(function (r) { return Math.min(r.storage_cost_per_day, r.duplicate_cost_per_day) >= M.parts_min_share * yTop; });
        s.rows.forEach(function (r) {
          drawn.storageMax = Math.max(drawn.storageMax, r.storage_cost_per_day);
          drawn.duplicatesMax = Math.max(drawn.duplicatesMax, r.duplicate_cost_per_day);
        });
        if (drawn.parts) {
          path("storage_cost_per_day", COLOURS.muted, 1, "4 3", "part");
          path("duplicate_cost_per_day", COLOURS.bad, 1, "4 3", "part");
        }
      }
      path(p[2], COLOURS.line, 2, null, "curve");
      if (limitShown) {
        var ly = Y(limit);
        line(left, ly, right, ly, { "class": "limit", stroke: COLOURS.limit, "stroke-width": 1.5, "stroke-dasharray": "8 4" });
        drawn.limits.push(p[6]);
        limitLabel = { at: alongHorizontal(ly, left, right), text: p[5] + " " + p[3](limit), colour: COLOURS.limit };
      }
      var cx = X(Math.log10(params.retention_s));
      if (!nowIsDecided) {
        line(cx, top, cx, bottom, { "class": "marker", stroke: COLOURS.muted, "stroke-dasharray": "5 4" });
        wanted.push({ at: besideVertical(cx, top, bottom), text: "now " + humanDuration(params.retention_s), colour: COLOURS.muted });
      }
      sims.forEach(function (sp) {
        var v = sp[p[2]], x = X(Math.log10(sp.retention_s));
        line(x, Y(v[0]), x, Y(v[2]), { "class": "whisker", stroke: COLOURS.ink, "stroke-width": 2 });
        var c = el("circle", { "class": "pt", cx: x, cy: Y(v[1]), r: 5, fill: COLOURS.ink, stroke: "#fff" }, svg);
        obs.ring(x, Y(v[1]), 5);
        c.setAttribute("data-tip", "simulated at " + humanDuration(sp.retention_s) + ": " + p[3](v[1]) +
          " (95%: " + p[3](v[0]) + " – " + p[3](v[2]) + ")");
      });
      if (decided) {
        var dx = X(Math.log10(decided.retention_s));
        line(dx, top, dx, bottom, { "class": "marker", stroke: COLOURS.okText, "stroke-width": 2 });
        // From the bottom up: the "now" label starts at the top.
        var across = besideVertical(dx, top, bottom).filter(function (c) { return !c[3]; }).reverse();
        var along = besideVertical(dx, top, bottom).filter(function (c) { return c[3]; });
        wanted.push({ at: across.concat(along), text: "recommended " + humanDuration(decided.retention_s) + (nowIsDecided ? " (now)" : ""), colour: COLOURS.okText });
      }
      s.rows.forEach(function (r, i) {
        var cheapest = pi === 2 && s.best && r.retention_s === s.best.retention_s;
        var chosen = decided && r.retention_s === decided.retention_s;
        var px = X(xs[i]), py = Y(r[p[2]]), rad = cheapest || chosen ? 6 : 3;
        var c = el("circle", { "class": "pt", cx: px, cy: py, r: rad, fill: cheapest ? COLOURS.ok : COLOURS.line, stroke: "#fff" }, svg);
        obs.ring(px, py, rad);
        c.setAttribute("data-tip", humanDuration(r.retention_s) + ": " + p[3](r[p[2]]) + (cheapest ? " (cheapest)" : "") + (chosen ? " (recommended)" : ""));
        if (cheapest) {
          el("circle", { "class": "ring", cx: px, cy: py, r: 9, fill: "none", stroke: COLOURS.ok, "stroke-width": 2 }, svg);
          obs.ring(px, py, 10);
          wanted.unshift({ at: aroundPoint(px, py, ox + PW - 2), text: "cheapest " + humanDuration(r.retention_s), colour: COLOURS.okText });
        }
      });
      if (limitLabel) wanted.push(limitLabel);
      layers.push([obs, [left + 2, top - 2, ox + PW - 1, axisY], wanted]);
    });
    // Every label after every line, in a layer of its own at the end of the drawing.
    placeLabels(el("g", { "class": "labels" }, svg), layers);
    var legend = document.getElementById("tradeoff-legend");
    if (legend) legend.textContent = legendText(drawn);
    // The same values as a table, for keyboards and screen readers.
    var body = document.querySelector("#tradeoff-data tbody");
    if (body) {
      body.textContent = "";
      s.rows.forEach(function (r) {
        var tr = document.createElement("tr");
        [humanDuration(r.retention_s), humanBytes(r.store_bytes), humanCount(r.duplicates_per_day) + "/day", usd(r.total_cost_per_day) + "/day"].forEach(function (t, i) {
          var td = document.createElement("td");
          if (i) td.className = "num";
          td.textContent = t;
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
    }
    s.decided = decided;
    return s;
  }

  // ---- The controls. ----
  var params = startParams();
  var start = Object.assign({}, params);
  var controls = {};
  M.controls.forEach(function (c) {
    var input = document.getElementById("ctl-" + c.name);
    if (!input) return;
    controls[c.name] = { spec: c, input: input, values: c.values.slice() };
    input.disabled = false;
    input.addEventListener("input", function () {
      var ctl = controls[c.name];
      params[c.name] = ctl.values[Number(input.value)];
      update();
      writeFragment();
    });
  });
  var note = document.getElementById("script-note");
  if (note) note.hidden = true;

  function controlText(c, v) {
    return atNone(c, v) ? "none" : FORMAT[c.kind](v);
  }
  function setText(id, text, value) {
    var e = document.getElementById(id);
    if (!e) return;
    e.textContent = text;
    if (value !== undefined) e.setAttribute("data-value", String(value));
  }
  // The decision card as written: the headline's decision at the run's inputs.
  var startDecision = (function () {
    var e = document.getElementById("out-decision"), n = document.getElementById("out-decision-note");
    return { text: e ? e.textContent : "", note: n ? n.textContent : "",
      value: e ? (e.getAttribute("data-value") || "") : "", blocked: !!(e && e.textContent === "none") };
  })();
  function update() {
    // The worst case assumes the peak lasts all day; it cannot be below the average.
    // Key and response sizes move the bytes per record by what they add to a record (model::
    // record_bytes is key + hash + response + overhead), from the run's own sizes.
    var p = Object.assign({}, params, {
      peak_rate_per_s: Math.max(M.base.peak_rate_per_s, params.rate_per_s),
      bytes_per_record: params.bytes_per_record + (params.key_bytes - M.payload.key_bytes) +
        (params.response_bytes - M.payload.response_bytes)
    });
    var v = evaluate(p);
    M.controls.forEach(function (c) { setText("val-" + c.name, controlText(c, p[c.name])); });
    M.outputs.forEach(function (o) { setText("out-" + o.name, FORMAT[o.kind](v[o.name]), v[o.name]); });
    var s = drawTradeoff(p);
    if (s.best) {
      setText("out-cheapest", humanDuration(s.best.retention_s), s.best.retention_s);
      setText("out-cheapest-cost", usd(s.best.total_cost_per_day) + "/day");
    }
    // At the run's own inputs the card keeps the headline's decision as the page was written
    // (it weighs the run's measurements, which the script cannot move); once a control moves,
    // the model decides.
    var atStart = Object.keys(controls).every(function (n) { return params[n] === start[n]; });
    if (atStart) {
      setText("out-decision", startDecision.text, startDecision.value);
      setText("out-decision-note", startDecision.note);
    } else if (s.decided) {
      setText("out-decision", humanDuration(s.decided.retention_s), s.decided.retention_s);
      setText("out-decision-note", humanBytes(s.decided.f.store_bytes) + " per copy, " +
        humanCount(s.decided.f.duplicates) + " duplicates/day, " + usd(s.decided.f.total) + "/day");
    } else {
      setText("out-decision", "none", "");
      setText("out-decision-note", whyNone(p));
    }
    var card = document.getElementById("out-decision");
    var blocked = atStart ? startDecision.blocked : !s.decided;
    if (card && card.parentNode) card.parentNode.classList.toggle("blocked", blocked);
    document.body.setAttribute("data-updated", "1");
  }

  // URL fragment: #retention=259200&rate=2000&scenario=baseline-400 sets the controls (firing
  // their `input` events, the path a user's slider move takes) and the open tabs; every change
  // is written back, so a copied link reproduces the view. A value not on a control's list is
  // added to it.
  var shortName = {};
  M.fragment.slice().reverse().forEach(function (a) { shortName[a[1]] = a[0]; });
  var openTabs = {};
  var applying = false;
  function writeFragment() {
    if (applying) return;
    var parts = [];
    Object.keys(controls).forEach(function (name) {
      if (params[name] === start[name]) return;
      var text = atNone(controls[name].spec, params[name]) ? "none" : String(params[name]);
      parts.push((shortName[name] || name) + "=" + encodeURIComponent(text));
    });
    Object.keys(openTabs).sort().forEach(function (list) {
      if (openTabs[list] !== firstTab[list]) parts.push("scenario=" + encodeURIComponent(openTabs[list].replace(/^sc-/, "")));
    });
    var hash = parts.length ? "#" + parts.join("&") : " ";
    try { history.replaceState(null, "", hash === " " ? window.location.pathname + window.location.search : hash); } catch (e) { /* file:// in some browsers */ }
  }
  function applyFragment() {
    var frag = window.location.hash.replace(/^#/, "");
    if (!frag || frag.indexOf("=") < 0) return;
    var aliases = {};
    M.fragment.forEach(function (a) { aliases[a[0]] = a[1]; });
    applying = true;
    var refused = [];
    frag.split("&").forEach(function (kv) {
      var parts = kv.split("=");
      var name = aliases[parts[0]] || parts[0];
      if (parts[0] === "scenario") { showTab("sc-" + decodeURIComponent(parts[1] || "")); return; }
      var ctl = controls[name];
      var raw = decodeURIComponent(parts[1] || "");
      var value = ctl && raw === "none" && ctl.spec.none != null ? ctl.spec.none : Number(raw);
      if (!ctl) { if (parts[0]) console.warn("unknown report parameter " + parts[0]); return; }
      if (!isFinite(value) || value < ctl.spec.min || value > ctl.spec.max) {
        refused.push(decodeURIComponent(kv) + " (" + ctl.spec.label + ": " + ctl.spec.min + " to " + ctl.spec.max + ")");
        return;
      }
      var i = ctl.values.indexOf(value);
      if (i < 0) {
        ctl.values.push(value);
        ctl.values.sort(function (a, b) { return a - b; });
        i = ctl.values.indexOf(value);
        ctl.input.max = String(ctl.values.length - 1);
      }
      ctl.input.value = String(i);
      ctl.input.dispatchEvent(new Event("input", { bubbles: true }));
    });
    applying = false;
    var note = document.getElementById("fragment-note");
    if (note && refused.length) {
      note.textContent = "Ignored from the link, out of range: " + refused.join("; ") + ".";
      note.hidden = false;
    }
    // The link keeps what was applied only.
    if (refused.length) writeFragment();
  }

  // ---- Tabs (WAI-ARIA tabs: arrow keys, Home, End): without script every scenario is shown,
  // one after the other, and printing shows them all. ----
  var firstTab = {};
  var lists = Array.prototype.slice.call(document.querySelectorAll(".scenarios [role=tablist]"));
  function tabsOf(list) { return Array.prototype.slice.call(list.querySelectorAll("[role=tab]")); }
  function showTab(id, focus) {
    var found = false;
    lists.forEach(function (list, li) {
      var tabs = tabsOf(list);
      if (!tabs.some(function (t) { return t.getAttribute("data-tab") === id; })) return;
      found = true;
      tabs.forEach(function (t) {
        var on = t.getAttribute("data-tab") === id;
        t.classList.toggle("active", on);
        t.setAttribute("aria-selected", on ? "true" : "false");
        t.setAttribute("tabindex", on ? "0" : "-1");
        if (on && focus) t.focus();
        var a = document.getElementById(t.getAttribute("data-tab"));
        if (a) a.classList.toggle("active", on);
      });
      openTabs[li] = id;
    });
    return found;
  }
  lists.forEach(function (list, li) {
    var tabs = tabsOf(list);
    if (!tabs.length) return;
    list.parentNode.classList.add("js-tabs");
    firstTab[li] = tabs[0].getAttribute("data-tab");
    tabs.forEach(function (t, i) {
      t.addEventListener("click", function (e) { e.preventDefault(); showTab(t.getAttribute("data-tab")); writeFragment(); });
      t.addEventListener("keydown", function (e) {
        var j = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
        if (j === undefined) return;
        e.preventDefault();
        j = (j + tabs.length) % tabs.length;
        showTab(tabs[j].getAttribute("data-tab"), true);
        writeFragment();
      });
    });
    showTab(firstTab[li]);
  });
  document.querySelectorAll('a[href^="#sc-"]').forEach(function (a) {
    if (a.classList.contains("tab")) return;
    a.addEventListener("click", function () { showTab(a.getAttribute("href").slice(1)); });
  });

  // ---- Tooltips: the SVG <title> of each point, restyled. ----
  var tipEl = document.getElementById("tip");
  document.querySelectorAll("circle.pt").forEach(function (c) {
    var t = c.querySelector("title");
    if (t) { c.setAttribute("data-tip", t.textContent); t.remove(); }
  });
  document.addEventListener("mouseover", function (e) {
    var t = e.target;
    if (t && t.getAttribute && t.getAttribute("data-tip")) {
      tipEl.textContent = t.getAttribute("data-tip");
      tipEl.hidden = false;
    }
  });
  document.addEventListener("mousemove", function (e) {
    if (!tipEl.hidden) { tipEl.style.left = (e.clientX + 12) + "px"; tipEl.style.top = (e.clientY + 12) + "px"; }
  });
  document.addEventListener("mouseout", function (e) {
    if (e.target && e.target.getAttribute && e.target.getAttribute("data-tip")) tipEl.hidden = true;
  });

  var lastWidth = 0;
  update();
  lastWidth = document.getElementById("tradeoff").clientWidth;
  applyFragment();
  window.addEventListener("hashchange", applyFragment);
  window.addEventListener("resize", function () {
    var w = document.getElementById("tradeoff").clientWidth;
    if (Math.abs(w - lastWidth) > 20) { lastWidth = w; update(); }
  });
  document.body.setAttribute("data-ready", "1");
})();
