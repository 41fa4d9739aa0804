/* mbb viewer: plain JavaScript, no library, no network.
 * Data arrive as script files: data/index.js calls MBB.index(...), data/runs/<n>.js calls
 * MBB.run(n, ...), data/text/<k>.js calls MBB.text(k, ...). Every piece of run text is put into
 * the page with textContent (never as HTML). Values read from the data are untrusted: lookups
 * keyed by them use Maps or null-prototype objects, and types are checked before use.
 * This file: state, helpers, routing, loading, and the run view. runs_table.js (the runs table
 * and the search over every run), diff.js (two runs side by side) and agent.js (one worker's
 * story) add their views through MBB._views.
 */
"use strict";
var MBB = (function () {
  var PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2",
    "#ff9da6", "#9d755d", "#bab0ac", "#eeca3b"];
  var S = {index: null, byN: new Map(), byPath: new Map(), runs: new Map(), pending: new Map(),
    texts: new Map(), textPending: new Map(), view: "runs", cur: null, run: null, tab: "rounds",
    subrun: null, round: null, worker: "", channel: "", label: "", q: "", scope: "all", cond: "",
    runFilter: "", agent: "", started: false, loads: 0,
    place: null, written: null, routing: false};  // the history step shown, the hash written
  var views = Object.create(null);  // other files register {render, ...} here
  var $ = function (id) { return document.getElementById(id); };

  // --- checks for untrusted values -------------------------------------------------------------
  function isInt(v) { return typeof v === "number" && isFinite(v) && Math.floor(v) === v; }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function isStr(v) { return typeof v === "string"; }
  function isObj(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function str(v) { return v == null ? "" : (typeof v === "string" ? v : (typeof v === "object" ? JSON.stringify(v) : String(v))); }
  function own(o, k) { return o != null && typeof o === "object" && Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined; }
  function dict() { return Object.create(null); }

  // --- tiny DOM helpers (text only) ---------------------------------------------------------
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === "text") e.textContent = String(attrs[k]);
        else if (k === "cls") e.className = attrs[k];
        else if (k === "onclick") e.addEventListener("click", attrs[k]);
        else e.setAttribute(k, attrs[k]);
      }
    }
    (children || []).forEach(function (c) {
      if (c == null) return;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }
  function clear(node) { node.textContent = ""; return node; }
  function fmt(v, d) {
    if (v == null) return "";
    if (typeof v === "number") return d == null || !isFinite(v) ? String(v) : v.toFixed(d);
    return str(v);
  }
  // A share in [0, 1] as a percentage with d decimals, never rounded onto 0 % or 100 % when it
  // is not 0 or 1 (a progress of 0.9992 next to "terminated" reads 99.9%, not 100.0%).
  function pct(v, d) {
    if (!isNum(v)) return v == null ? "" : str(v);
    d = d == null ? 1 : d;
    var s = (100 * v).toFixed(d), k = d;
    while (k < 4 && ((v < 1 && Number(s) >= 100) || (v > 0 && Number(s) <= 0))) { k++; s = (100 * v).toFixed(k); }
    return s + "%";
  }
  // The text of a per-run measure, wherever it is shown: the runs table, the diff and the agent
  // story call this one formatter, so a column reads the same in each (the diff wrote 4830 and
  // 0.0000 where the table wrote 4,830 and 0.000).
  function fmtInt(v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") : str(v); }
  function fmtCost(v) { return isNum(v) ? v.toFixed(v && Math.abs(v) < 0.01 ? 5 : 3) : str(v); }  // dollars, no sign
  // A sum some of whose calls reported no usage (none reported, or the call failed), in the
  // report's wording (mbb.analysis.tokens.cost_text, tokens_text): "≥ X + unknown (N calls
  // without usage)", X the others' sum (a lower bound; left out when nothing is known).
  function partlyUnknown(known, n) { var u = "unknown (" + n + " calls without usage)"; return known ? "≥ " + known + " + " + u : u; }
  var MEASURE_FMT = {seed: fmtInt, credits: fmtInt, invalid_actions: fmtInt, llm_calls: fmtInt, failed_calls: fmtInt,
    repaired_calls: fmtInt, tokens: fmtInt, rounds: fmtInt, cost_usd: fmtCost,
    score: function (v) { return pct(v, 1); }, completion: function (v) { return pct(v, 1); },
    deadline_miss: function (v) { return pct(v, 1); }, bad_call_share: function (v) { return pct(v, 1); }};
  // shares read in percent everywhere, as in the report ("Mean score 81.2%"): the score had read
  // 0.742 beside a completion of 66.7% (a reviewer's find)
  var PCT_MEASURES = {score: true, completion: true, deadline_miss: true, bad_call_share: true};
  function isMeasure(key) { return Object.prototype.hasOwnProperty.call(MEASURE_FMT, key); }
  function fmtMeasure(key, v) { return isMeasure(key) ? MEASURE_FMT[key](v) : str(v); }
  // A run that makes no API call (a scripted run) has no LLM measures: its entry says why
  // (llm_na), and those columns show a mark with that reason, never 0 nor a bare blank.
  var LLM_ONLY = {llm_calls: true, failed_calls: true, repaired_calls: true, bad_call_share: true, cost_usd: true, tokens: true};
  var NA = "–";
  function measureNA(key, entry) { return LLM_ONLY[key] === true && isObj(entry) && isStr(entry.llm_na) ? entry.llm_na : null; }
  function fmtMeasureDelta(key, d) {  // B - A of a measure, signed, in the measure's own format
    if (!isNum(d)) return "";
    if (Math.abs(d) < 1e-12) return "0";
    var sign = d > 0 ? "+" : "-";
    if (PCT_MEASURES[key]) return sign + (100 * Math.abs(d)).toFixed(1) + " pts";
    return sign + fmtMeasure(key, Math.abs(d));
  }
  // A search's terms: its words, lower-cased, to be found in any order (each one a substring; a
  // "quoted phrase" is one term). A text matches when it holds every term, so a phrase typed
  // whole still matches where it occurs, and "quay zebra" finds "zebra crossing at the quay".
  function searchTerms(q) {
    var out = [], re = /"([^"]+)"|(\S+)/g, m;
    q = str(q).toLowerCase();
    while ((m = re.exec(q)) !== null) {
      var t = m[1] != null ? m[1].trim() : m[2];
      if (t && out.indexOf(t) < 0) out.push(t);
    }
    return out;
  }
  function querySaid(q) {  // the query as the count says it: “a b” (every word, any order)
    return "“" + q + "”" + (searchTerms(q).length > 1 ? " (every word, any order)" : "");
  }
  function holdsAll(low, terms) {  // low: a lower-cased text
    for (var i = 0; i < terms.length; i++) if (low.indexOf(terms[i]) < 0) return false;
    return terms.length > 0;
  }
  function ranges(low, needle, out) {  // [start, end) of every occurrence of needle in low
    for (var j = low.indexOf(needle); needle && j >= 0; j = low.indexOf(needle, j + needle.length)) out.push([j, j + needle.length]);
    return out;
  }
  // text with the search marked (as DOM nodes): the query where it occurs whole, else each term
  function markText(text, q) {
    var span = el("span", {cls: "text"});
    text = str(text);
    q = (q == null ? S.q : q).trim().toLowerCase();
    if (!q) { span.textContent = text; return span; }
    var low = text.toLowerCase(), marks = ranges(low, q, []);
    if (!marks.length) searchTerms(q).forEach(function (t) { ranges(low, t, marks); });
    marks.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var i = 0;
    marks.forEach(function (r) {
      if (r[1] <= i) return;  // inside a longer mark
      var from = Math.max(r[0], i);
      span.appendChild(document.createTextNode(text.slice(i, from)));
      span.appendChild(el("mark", {text: text.slice(from, r[1])}));
      i = r[1];
    });
    span.appendChild(document.createTextNode(text.slice(i)));
    return span;
  }
  function colourOf(w, run) {
    var ws = (run || S.run) ? (run || S.run).workerIds : [];
    var i = ws.indexOf(w);
    return i < 0 ? "#777" : PALETTE[i % PALETTE.length];
  }
  function chip(w, run) { return el("span", {cls: "chip", style: "background:" + colourOf(w, run), text: str(w) || "—"}); }
  // A visible cue that a box scrolls sideways (a wide table gave none): the box gets more-left /
  // more-right while columns lie past that edge (CSS shades the edge), and `note` ("scroll →")
  // shows only while columns lie past the right edge. box: a .scroll-box whose first child scrolls.
  function scrollCue(box, note) {
    var inner = box.firstElementChild;
    function update() {
      var max = inner.scrollWidth - inner.clientWidth;
      var right = max > 1 && inner.scrollLeft < max - 1, left = max > 1 && inner.scrollLeft > 1;
      box.classList.toggle("more-right", right);
      box.classList.toggle("more-left", left);
      // the right shade stops at the vertical scroll bar, where there is one
      box.style.setProperty("--bar", Math.max(0, inner.offsetWidth - inner.clientWidth - 2) + "px");
      if (note) note.hidden = !right;
    }
    inner.addEventListener("scroll", update, {passive: true});
    if (typeof ResizeObserver === "function") {
      var ro = new ResizeObserver(update);
      ro.observe(inner);
      if (inner.firstElementChild) ro.observe(inner.firstElementChild);
    }
    window.addEventListener("resize", update);
    update();
    return update;
  }
  function table(head, rows) {
    var t = el("table");
    t.appendChild(el("tr", null, head.map(function (h) {
      return el("th", {cls: h.charAt(0) === "~" ? "t" : null, text: h.replace(/^~/, "")});
    })));
    rows.forEach(function (r) { t.appendChild(r); });
    return t;
  }
  function td(v, cls) {
    var c = el("td", {cls: cls || null});
    if (v instanceof Node) c.appendChild(v); else c.textContent = str(v);
    return c;
  }

  // --- routing --------------------------------------------------------------------------------
  function readHash() {
    var h = dict();
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var p = kv.split("=");
      try { h[decodeURIComponent(p[0])] = decodeURIComponent(p.slice(1).join("=") || ""); } catch (e) { /* a bad escape: ignored */ }
    });
    return h;
  }
  function enc(v) { return encodeURIComponent(v).replace(/%2F/g, "/"); }
  function writeHash() {
    var parts = [];
    if (S.view === "runs") parts = views.runs ? views.runs.hashParts() : [];
    else if (S.view === "diff") parts = views.diff ? views.diff.hashParts() : [];
    else {
      var e = S.byN.get(S.cur);
      if (e) parts.push("run=" + enc(e.path));
      if (S.tab === "agent") { if (S.agent) parts.push("w=" + enc(S.agent)); }
      else {
        if (S.subrun != null) parts.push("s=" + S.subrun);
        if (S.round != null) parts.push("r=" + S.round);
      }
      if (S.tab !== "rounds") parts.push("tab=" + S.tab);
      if (S.cond) parts.push("cond=" + enc(S.cond));
    }
    if (S.q) parts.push("q=" + enc(S.q) + (S.scope === "all" ? "&scope=all" : ""));
    var h = "#" + parts.join("&");
    // a new place (another view, run or pair of runs) is a step the browser's Back undoes;
    // a sort, a filter, a round within the place replaces the current step
    var place = S.view === "run" ? "run:" + S.cur : S.view === "diff" ? "diff:" + parts.slice(0, 2).join("&") : S.view;
    var following = S.routing;  // the first write after following a link is that link's step
    S.routing = false;
    if (location.hash !== h) {
      if (S.place != null && place !== S.place && !following) history.pushState(null, "", h);
      else history.replaceState(null, "", h);
    }
    S.place = place;
    S.written = location.hash;
  }
  // The page follows its link: at the start, and when it changes (a link pasted into the
  // address bar, Back and Forward). done: called once the view is drawn (a diff says so itself).
  function route(h, done) {
    var entry;
    if (h.diff != null && views.diff && views.diff.route(h)) return;  // the diff says when it is drawn
    if (h.run != null && (entry = entryOf(h.run))) {
      if (!h.q) S.scope = "run";
      selectRun(entry.n, {subrun: h.s != null ? Number(h.s) : null, round: h.r != null ? Number(h.r) : null, tab: h.tab || "rounds", worker: h.w || ""}).then(done, done);
      return;
    }
    if (views.runs) views.runs.route(h);
    goView("runs");
    done();
  }
  function followLink() {
    if (location.hash === S.written) return;  // a step this page wrote itself
    var h = readHash();
    S.q = h.q || ""; $("search").value = S.q; S.scope = h.scope === "all" ? "all" : "run";
    if (h.cond !== undefined || S.cond) { S.cond = h.cond || ""; $("cond-filter").value = S.cond; renderRunList(); }
    S.routing = true;
    route(h, function () {});
  }
  // A link to run n at a place ("s=2&r=3", "tab=agent&w=W1"): what a click does in place, and
  // what opening the link in a new tab or copying it gives.
  function runLink(n, rest) {
    var e = S.byN.get(n);
    return e ? "#run=" + enc(e.path) + (rest ? "&" + rest : "") : "#";
  }
  function entryOf(ref) {  // an index entry from a path (or its number n)
    if (ref == null || ref === "") return null;
    var n = S.byPath.get(ref);
    if (n == null && /^\d+$/.test(ref)) n = Number(ref);
    return S.byN.get(n) || null;
  }

  // --- loading ----------------------------------------------------------------------------------
  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = function () { s.remove(); resolve(); };
      s.onerror = function () { s.remove(); reject(new Error("the data file " + src.replace(/\?.*/, "") + " is missing (rebuild with mbb view)")); };
      document.body.appendChild(s);
    });
  }
  function versioned(file, v) { return file + (isInt(v) && v > 1 ? "?v=" + v : ""); }
  function loadRun(n) {
    var got = S.runs.get(n);
    if (got) return Promise.resolve(got);
    if (S.pending.has(n)) return S.pending.get(n).promise;
    var entry = S.byN.get(n), p = {};
    if (!entry || !isStr(entry.file)) return Promise.reject(new Error(entry && entry.status === "running" ? "this run has no events yet (it is running)" : "this run has no data file"));
    p.promise = new Promise(function (resolve, reject) { p.resolve = resolve; p.reject = reject; });
    p.v = entry.v;
    S.pending.set(n, p);
    loadScript(versioned(entry.file, entry.v)).then(function () {
      if (S.pending.get(n) === p) { S.pending.delete(n); p.reject(new Error("the data file " + entry.file + " did not hold run " + n)); }
    }, function (err) { S.pending.delete(n); p.reject(err); });
    return p.promise;
  }
  function prepared(n) {  // the run, loaded and indexed
    return loadRun(n).then(function (data) { return data.prepared || (data.prepared = prepare(data, n)); });
  }
  function prepare(data, n) {  // index a run's events once: rounds, subruns, utterances, labels
    var r = {n: n, data: data, entry: S.byN.get(n) || {}, events: [], subruns: [], bySub: new Map(), workerIds: [],
      personas: new Map(), utter: [], labels: isObj(data.labels) ? data.labels : dict(), llm: isObj(data.llm) ? data.llm : dict(),
      scratch: [], calls: [], categories: new Map(), skipped: 0, params: {}, models: dict()};
    function sub(s) {
      var sb = r.bySub.get(s);
      if (!sb) {
        sb = {subrun: s, rounds: [], byRound: new Map(), start: null, ended: null, evals: [], other: []};
        r.bySub.set(s, sb);
        r.subruns.push(s);
      }
      return sb;
    }
    function rnd(sb, k) {
      var rd = sb.byRound.get(k);
      if (!rd) {
        rd = {round: k, t: null, candidates: [], decl: [], msgs: [], ballots: [], schedule: null, windows: [],
          dropped: [], invalid: [], commands: [], calls: [], other: []};
        sb.byRound.set(k, rd);
        sb.rounds.push(k);
      }
      return rd;
    }
    function addWorker(w) { if (isStr(w) && w && r.workerIds.indexOf(w) < 0) r.workerIds.push(w); }
    arr(data.events).forEach(function (e) {
      // the fields every view relies on, with their types; anything else is left out (counted)
      if (!isObj(e) || !isStr(e.kind) || !isInt(e.seq) || (e.subrun != null && !isInt(e.subrun)) ||
          (e.round != null && !isInt(e.round)) || (e.worker != null && !isStr(e.worker)) ||
          (e.to != null && !isStr(e.to)) || (e.t != null && !isNum(e.t))) { r.skipped++; return; }
      r.events.push(e);
      if (e.kind === "run_started") {
        arr(e.workers).forEach(function (w) {
          if (!isObj(w) || !isStr(w.id)) return;
          addWorker(w.id);
          r.personas.set(w.id, w);
        });
        r.started = e;
        r.params = isObj(e.params) ? e.params : {};
        r.models = isObj(own(r.params, "models")) ? r.params.models : dict();
        return;
      }
      if (e.kind === "run_ended") { r.ended = e; return; }
      addWorker(e.worker);
      if (e.kind === "scratch_written") r.scratch.push(e);
      if (e.kind === "llm_call") r.calls.push(e);
      if (e.subrun == null) return;
      var sb = sub(e.subrun);
      if (e.kind === "subrun_started") { sb.start = e; return; }
      if (e.kind === "subrun_ended") { sb.ended = e; return; }
      if (e.kind === "evaluation") { sb.evals.push(e); return; }
      if (e.round == null) { sb.other.push(e); return; }
      var rd = rnd(sb, e.round);
      var u = null;
      switch (e.kind) {
        case "round_started": rd.t = e.t; rd.candidates = arr(e.candidates).filter(isStr); break;
        case "declared": rd.decl.push(e); u = {src: "declaration", text: str(e.note)}; break;
        case "message": rd.msgs.push(e);
          u = {src: e.to == null ? "public" : "private", text: str(e.text)}; break;
        case "ballot": rd.ballots.push(e); u = {src: "ballot", text: str(e.reasoning)}; break;
        case "schedule_published": rd.schedule = e; break;
        case "window_started": rd.windows.push({start: e, end: null}); break;
        case "window_ended":
          for (var i = rd.windows.length - 1; i >= 0; i--) {
            if (rd.windows[i].start.worker === e.worker && rd.windows[i].start.position === e.position && !rd.windows[i].end) {
              rd.windows[i].end = e; break;
            }
          }
          break;
        case "window_dropped": rd.dropped.push(e); break;
        case "invalid_action": rd.invalid.push(e); break;
        case "command": rd.commands.push(e); break;
        case "llm_call": rd.calls.push(e); break;
        default: rd.other.push(e);
      }
      if (u) {
        u.e = e; u.subrun = e.subrun; u.round = e.round; u.worker = e.worker; u.to = e.to;
        r.utter.push(u);
      }
    });
    r.subruns.sort(function (a, b) { return a - b; });
    r.subruns.forEach(function (s) { r.bySub.get(s).rounds.sort(function (a, b) { return a - b; }); });
    Object.keys(r.labels).forEach(function (seq) {
      arr(r.labels[seq]).forEach(function (l) {
        if (!Array.isArray(l) || !isStr(l[0]) || l[1] === "withheld") return;
        r.categories.set(l[0], (r.categories.get(l[0]) || 0) + 1);
      });
    });
    return r;
  }
  // The model a worker used (its LLM's model name) or "scripted"; the persona only where it acts.
  function workerModel(r, w) {
    var info = r.personas.get(w) || {};
    var llm = info.negotiator === "llm" || info.solver === "llm";
    if (!llm) return "scripted";
    var cfg = own(r.models, info.model);
    var name = isObj(cfg) && isStr(cfg.model) ? cfg.model : "";
    return name ? name + (isStr(info.model) && info.model !== name ? " (" + info.model + ")" : "") : str(info.model) || "llm";
  }
  function workerPersona(r, w) {
    var info = r.personas.get(w) || {};
    return info.negotiator === "llm" ? "" : str(info.persona);
  }

  // --- filters --------------------------------------------------------------------------------
  function labelsOf(e, run, withheld) {  // its labels, or (withheld) the labels the evidence classifier withheld
    return arr(own((run || S.run).labels, String(e.seq))).filter(function (l) { return Array.isArray(l) && isStr(l[0]) && (l[1] === "withheld") === !!withheld; });
  }
  function passes(u) {  // worker / channel / label filters on one utterance
    if (S.worker && u.worker !== S.worker && u.to !== S.worker) return false;
    if (S.channel && u.src !== S.channel) return false;
    if (S.label && !labelsOf(u.e).some(function (l) { return l[0] === S.label; })) return false;
    return true;
  }
  function matches(text) { return !S.q || holdsAll(str(text).toLowerCase(), searchTerms(S.q)); }
  function labelBlock(e, run) {
    var ls = labelsOf(e, run), held = labelsOf(e, run, true);
    if (!ls.length && !held.length) return null;
    var box = el("div");
    held.forEach(function (l) {
      box.appendChild(el("span", {cls: "lab withheld", title: "withheld: " + str(l[2]), text: l[0] + " (withheld)"}));
    });
    var seen = new Set();
    ls.forEach(function (l) {
      if (seen.has(l[0])) return;
      seen.add(l[0]);
      box.appendChild(el("span", {cls: "lab", title: str(l[1]) + ": " + str(l[2]), text: l[0]}));
    });
    if (S.label) {
      ls.forEach(function (l) {
        if (l[0] !== S.label) return;
        box.appendChild(el("div", {cls: "evidence"}, [el("b", {text: l[0] + " (" + str(l[1]) + "): "}), str(l[2])]));
      });
    } else {
      var d = el("details", {cls: "evidence"}, [el("summary", {text: "evidence"})]);
      ls.concat(held).forEach(function (l) { d.appendChild(el("div", null, [el("b", {text: l[0] + " (" + str(l[1]) + "): "}), str(l[2])])); });
      box.appendChild(d);
    }
    return box;
  }

  // --- views ------------------------------------------------------------------------------------
  function show(view) {
    S.view = view;
    $("runs-view").hidden = view !== "runs";
    $("app").hidden = view !== "run";
    $("diff-view").hidden = view !== "diff";
    [].forEach.call(document.querySelectorAll("#views button"), function (b) {
      b.classList.toggle("sel", b.getAttribute("data-view") === view);
    });
    $("to-run").disabled = S.cur == null;
    $("to-diff").disabled = !(views.diff && views.diff.ready());
    var scope = $("search-scope");
    scope.options[1].disabled = view !== "run";
    if (view !== "run" && S.scope === "run") { S.scope = "all"; }
    scope.value = S.scope;
  }
  function goView(view) {
    if (view === "runs") { show("runs"); if (views.runs) views.runs.render(); renderSearch(); writeHash(); window.scrollTo(0, 0); }
    else if (view === "run" && S.cur != null) { show("run"); renderSearch(); writeHash(); }
    else if (view === "diff" && views.diff) views.diff.open();
  }

  // --- sidebar ----------------------------------------------------------------------------------
  function renderRunList() {
    var list = clear($("run-list")), q = S.runFilter.toLowerCase(), shown = 0;
    var frag = document.createDocumentFragment();
    S.index.runs.forEach(function (r) {
      if (S.cond && r.condition !== S.cond) return;
      var hay = (str(r.id) + " " + str(r.seed) + " " + str(r.status) + " " + str(r.condition)).toLowerCase();
      if (q && hay.indexOf(q) < 0) return;
      shown++;
      var b = el("button", {"data-n": r.n, cls: r.n === S.cur ? "sel" : null,
        title: str(r.error) || (arr(r.problems).length ? arr(r.problems).map(str).join("\n") : str(r.path)),
        onclick: function () { selectRun(r.n); }},
      [str(r.id), el("span", {cls: "st " + str(r.status), text: str(r.status) + (r.valid === false ? " · invalid" : "") + (arr(r.problems).length ? " ⚠" : "")})]);
      frag.appendChild(el("li", null, [b]));
    });
    list.appendChild(frag);
    $("run-count").textContent = shown + " of " + S.index.runs.length + " run(s)";
  }
  function renderNotices() {
    var box = clear($("notices")), idx = S.index;
    if (idx.message) box.appendChild(el("div", {cls: "box bad"}, [el("strong", {text: str(idx.message)})]));
    var bad = idx.runs.filter(function (r) { return r.status === "unreadable"; });
    var warn = idx.runs.filter(function (r) { return arr(r.problems).length; });
    if (bad.length) {
      var ul = el("ul");
      bad.forEach(function (r) { ul.appendChild(el("li", null, [el("code", {text: str(r.path)}), ": " + str(r.error)])); });
      box.appendChild(el("div", {cls: "box bad", id: "bad-runs"}, [
        el("strong", {text: bad.length + " run(s) cannot be shown:"}), ul]));
    }
    if (warn.length) {
      var ul2 = el("ul");
      warn.slice(0, 20).forEach(function (r) {
        ul2.appendChild(el("li", null, [el("code", {text: str(r.path)}), ": " + arr(r.problems).map(str).join("; ")]));
      });
      if (warn.length > 20) ul2.appendChild(el("li", {text: "… and " + (warn.length - 20) + " more"}));
      box.appendChild(el("details", {cls: "box", id: "warn-runs"}, [
        el("summary", {text: warn.length + " run(s) shown in part (open for details)"}), ul2]));
    }
    var cp = arr(idx.column_problems);
    if (cp.length) {
      var ul3 = el("ul");
      cp.forEach(function (p) { ul3.appendChild(el("li", {text: str(p)})); });
      box.appendChild(el("details", {cls: "box", id: "column-problems"}, [el("summary", {text: "The columns file(s): " + cp.length + " problem(s)"}), ul3]));
    }
  }

  // --- run header and tabs ----------------------------------------------------------------
  function renderHead() {
    var h = clear($("run-head")), r = S.run, sm = r.entry;
    h.appendChild(el("h2", {text: str(sm.id)}));
    var p = r.params;
    h.appendChild(el("div", {cls: "muted", text: "condition " + str(sm.condition) + " · model " + str(sm.model) + " · seed " + fmt(sm.seed) +
      " · " + str(sm.status) + " · " + fmt(sm.events) + " events · " + fmt(sm.subruns) + " subrun(s) · " + fmt(sm.rounds) +
      " round(s)" + (isStr(own(p, "description")) ? " · " + p.description : "")}));
    if (sm.valid === false) h.appendChild(el("div", {cls: "box bad", id: "run-invalid"}, [el("strong", {text: "Invalid run: "}), str(sm.invalid_reason)]));
    if (sm.status === "running") h.appendChild(el("div", {cls: "box", text: "This run is still being written: what is shown is what was written when the data were read" + (S.index.live ? " (it is refreshed as it grows)." : " (reload to see more).")}));
    var problems = arr(sm.problems).slice();
    if (r.skipped) problems.push(r.skipped + " event(s) in the data file have fields of the wrong type: left out");
    if (problems.length) {
      var ul = el("ul", {cls: "warn"});
      problems.forEach(function (x) { ul.appendChild(el("li", {text: str(x)})); });
      h.appendChild(el("div", {cls: "box", id: "run-problems"}, [el("strong", {text: "This run is shown in part:"}), ul]));
    }
    var rows = r.workerIds.map(function (w) {
      var info = r.personas.get(w) || {};
      return el("tr", null, [td(chip(w), "t"), td(workerModel(r, w), "t"), td(workerPersona(r, w) || "—", "t"), td(info.negotiator, "t"),
        td(info.solver, "t"), td(info.budget), td(info.deadline_s),
        td(el("a", {href: runLink(r.n, "tab=agent&w=" + enc(w)), text: "story", onclick: function (ev) { ev.preventDefault(); openAgent(w); }}), "t")]);
    });
    h.appendChild(table(["~worker", "~model", "~persona (scripted negotiation)", "~negotiator", "~solver", "budget", "deadline (s)", "~agent view"], rows));
  }
  var TABS = [["rounds", "Rounds"], ["timeline", "Timeline"], ["agent", "Agents"], ["memory", "Memory & reports"],
    ["llm", "LLM calls"], ["events", "All events"]];
  function setTab(t) { S.tab = t; renderTabs(); renderContent(); writeHash(); }
  function renderTabs() {
    var nav = clear($("tabs"));
    TABS.forEach(function (t) {
      var label = t[1];
      if (t[0] === "llm") label += " (" + S.run.calls.length + ")";
      nav.appendChild(el("button", {cls: S.tab === t[0] ? "sel" : null, "data-tab": t[0],
        onclick: function () { setTab(t[0]); }, text: label}));
    });
    $("filters").hidden = S.tab === "agent";
  }
  function openAgent(w) { S.agent = w; setTab("agent"); window.scrollTo(0, $("tabs").offsetTop - 60); }
  function fillFilters() {
    var w = clear($("f-worker"));
    w.appendChild(el("option", {value: "", text: "all"}));
    S.run.workerIds.forEach(function (id) { w.appendChild(el("option", {value: id, text: id})); });
    if (S.run.workerIds.indexOf(S.worker) < 0) S.worker = "";
    w.value = S.worker;
    var l = clear($("f-label"));
    l.appendChild(el("option", {value: "", text: "any"}));
    Array.from(S.run.categories.keys()).sort().forEach(function (c) {
      l.appendChild(el("option", {value: c, text: c + " (" + S.run.categories.get(c) + ")"}));
    });
    if (!S.run.categories.has(S.label)) S.label = "";
    l.value = S.label;
  }

  // --- the round view -------------------------------------------------------------------------
  // After opening a search hit: the first marked phrase of the run's page, scrolled into view
  // (it can sit far below the results and the run's header).
  function showMark() {
    var m = document.querySelector("#content mark");
    if (m) m.scrollIntoView({block: "center"});
  }
  function goRound(s, n) {
    S.subrun = s; S.round = n; S.tab = "rounds";
    renderTabs(); renderContent(); writeHash();
    window.scrollTo(0, 0);
  }
  // The windows of subrun `s` of `run` as an SVG: opts.compact (smaller rows, the current round
  // highlighted), opts.end (a common time scale), opts.onclick(round), opts.current (round).
  function timelineSvg(run, s, opts) {
    opts = opts || {};
    var sb = run.bySub.get(s), ws = run.workerIds, rowH = opts.compact ? 16 : 22, left = 44;
    var W = opts.width || Math.max(480, Math.min(1100, ($("content").clientWidth || 900) - 20)), plot = W - left - 10;
    var end = 0, wins = [];
    if (!sb) return el("p", {cls: "muted", text: "No subrun " + s + " in " + str(run.entry.id) + "."});
    sb.rounds.forEach(function (n) {
      sb.byRound.get(n).windows.forEach(function (w) {
        if (!w.end || !isNum(w.end.start) || !isNum(w.end.used)) return;
        wins.push({round: n, worker: w.start.worker, start: w.end.start, used: w.end.used, reason: str(w.end.reason),
          progress: w.end.progress});
        end = Math.max(end, w.end.start + w.end.used);
      });
    });
    var starts = sb.start ? arr(sb.start.workers).filter(isObj) : [];
    starts.forEach(function (w) { if (isNum(w.deadline_s)) end = Math.max(end, w.deadline_s); });
    end = opts.end || end || 1;
    var H = ws.length * rowH + 24, NS = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "timeline"); svg.setAttribute("width", W); svg.setAttribute("height", H);
    function sv(tag, a, text) {
      var e = document.createElementNS(NS, tag);
      for (var k in a) e.setAttribute(k, a[k]);
      if (text != null) e.textContent = text;
      svg.appendChild(e); return e;
    }
    var x = function (t) { return left + plot * t / end; };
    ws.forEach(function (w, i) { sv("text", {x: 2, y: i * rowH + rowH * 0.72}, w); });
    sv("line", {x1: left, x2: left + plot, y1: ws.length * rowH + 2, y2: ws.length * rowH + 2, "class": "axis"});
    for (var k = 0; k <= 5; k++) {
      var tt = end * k / 5;
      sv("text", {x: x(tt) - (k === 5 ? 30 : 0), y: ws.length * rowH + 17}, Math.round(tt) + " s");
    }
    starts.forEach(function (w) {
      var i = ws.indexOf(w.worker);
      if (i >= 0 && isNum(w.deadline_s)) sv("line", {x1: x(w.deadline_s), x2: x(w.deadline_s), y1: i * rowH + 1, y2: (i + 1) * rowH - 1, stroke: "#b00020", "stroke-width": 2});
    });
    wins.forEach(function (w) {
      var i = ws.indexOf(w.worker);
      if (i < 0) return;
      var cur = opts.current != null && w.round === opts.current;
      var r = sv("rect", {x: x(w.start), y: i * rowH + 2, width: Math.max(1.5, plot * w.used / end), height: rowH - 4,
        fill: colourOf(w.worker, run), opacity: opts.current != null && !cur ? 0.45 : 0.95,
        "class": "win" + (cur ? " cur" : ""), "data-round": w.round});
      var title = document.createElementNS(NS, "title");
      title.textContent = w.worker + " · round " + w.round + " · " + w.start.toFixed(0) + "–" + (w.start + w.used).toFixed(0) +
        " s · " + w.reason + " · progress " + pct(w.progress, 0) + " (click: open the round)";
      r.appendChild(title);
      if (opts.onclick) r.addEventListener("click", function () { opts.onclick(w.round); });
    });
    return svg;
  }
  function subrunEnd(run, s) {  // the last second shown on subrun s's timeline
    var sb = run.bySub.get(s), end = 0;
    if (!sb) return 0;
    sb.rounds.forEach(function (n) {
      sb.byRound.get(n).windows.forEach(function (w) { if (w.end && isNum(w.end.start) && isNum(w.end.used)) end = Math.max(end, w.end.start + w.end.used); });
    });
    (sb.start ? arr(sb.start.workers) : []).forEach(function (w) { if (isObj(w) && isNum(w.deadline_s)) end = Math.max(end, w.deadline_s); });
    return end;
  }
  // The parts of one round, for the run view and for each side of the diff.
  function declTable(rd, run, filter) {
    var decl = rd.decl.filter(function (e) { return !filter || passes({src: "declaration", e: e, worker: e.worker, to: null}); });
    var box = el("div", null, [el("h4", {text: "Declarations (" + decl.length + ")"})]);
    if (decl.length) {
      box.appendChild(table(["~worker", "bid", "duration (s)", "position asked", "~note", "~labels"], decl.map(function (e) {
        var note = el("div", null, [markText(e.note), e.revision ? el("span", {cls: "tag public", text: "revision, turn " + fmt(e.turn)}) : null]);
        return el("tr", {"data-seq": e.seq}, [td(chip(e.worker, run), "t"), td(e.bid), td(e.duration), td(e.position), td(note, "text"), td(labelBlock(e, run) || "", "t")]);
      })));
    }
    return box;
  }
  function msgList(rd, run, filter) {
    var msgs = rd.msgs.filter(function (e) { return !filter || passes({src: e.to == null ? "public" : "private", e: e, worker: e.worker, to: e.to}); });
    var box = el("div", null, [el("h4", {text: "Conversation (" + msgs.length + " message(s); private ones highlighted)"})]);
    msgs.forEach(function (e) {
      var priv = e.to != null;
      box.appendChild(el("div", {cls: "msg" + (priv ? " private" : ""), "data-seq": e.seq}, [
        el("div", {cls: "who"}, [chip(e.worker, run), " → ", priv ? chip(e.to, run) : "everyone",
          el("span", {cls: "tag " + (priv ? "private" : "public"), text: priv ? "private" : "public"}),
          " turn " + fmt(e.turn)]),
        markText(e.text), labelBlock(e, run)]));
    });
    if (!rd.msgs.length) box.appendChild(el("p", {cls: "muted", text: "No conversation in this round."}));
    return box;
  }
  function ballotTable(rd, run, filter) {
    var ballots = rd.ballots.filter(function (e) { return !filter || passes({src: "ballot", e: e, worker: e.worker, to: null}); });
    var box = el("div", null, [el("h4", {text: "Ballots (" + ballots.length + ")"})]);
    if (ballots.length) {
      box.appendChild(table(["~worker", "~ranking (seconds)", "~reasoning", "~labels"], ballots.map(function (e) {
        var al = arr(e.allocations);
        var rk = arr(e.ranking).map(function (w, i) { return str(w) + " " + fmt(al[i] || 0) + "s"; }).join(" > ");
        return el("tr", {"data-seq": e.seq}, [td(chip(e.worker, run), "t"), td(rk + (e.defaulted ? " (defaulted)" : ""), "t"),
          td(markText(e.reasoning), "text"), td(labelBlock(e, run) || "", "t")]);
      })));
    }
    return box;
  }
  function scheduleTable(rd, run) {
    var box = el("div", null, [el("h4", {text: "Schedule"})]);
    if (rd.schedule) {
      var sc = rd.schedule, al = arr(sc.allocations), bids = arr(sc.bids);
      box.appendChild(el("div", {cls: "muted", text: "rule " + str(sc.rule) + (sc.ballots_unanimous ? " · ballots unanimous" : "")}));
      box.appendChild(table(["place", "~worker", "allocation (s)", "bid"], arr(sc.order).map(function (w, i) {
        return el("tr", null, [td(i + 1), td(chip(w, run), "t"), td(al[i]), td(bids[i])]);
      })));
    } else box.appendChild(el("p", {cls: "muted", text: "No schedule was published."}));
    return box;
  }
  function windowTable(rd, run) {
    var box = el("div", null, [el("h4", {text: "Windows: what each achieved"})]);
    var wrows = rd.windows.map(function (w) {
      var e = w.end || {};
      return el("tr", null, [td(w.start.position), td(chip(w.start.worker, run), "t"), td(w.start.price), td(w.start.allocation),
        td(fmt(e.start, 0)), td(fmt(e.used, 1)), td(e.reason || "(did not end)", "t"), td(pct(e.progress, 1))]);
    }).concat(rd.dropped.map(function (e) {
      return el("tr", null, [td(e.position), td(chip(e.worker, run), "t"), td(""), td(e.allocation), td(""), td(""), td("dropped: " + str(e.reason), "t"), td("")]);
    }));
    if (wrows.length) box.appendChild(table(["place", "~worker", "price", "allocation (s)", "start (s)", "used (s)", "~ended", "progress after"], wrows));
    else box.appendChild(el("p", {cls: "muted", text: "No windows."}));
    return box;
  }
  function commandTable(rd, run, worker) {
    var cmds = rd.commands.filter(function (c) { return !worker || c.worker === worker; });
    if (!cmds.length) return null;
    return el("div", null, [el("h4", {text: "Commands on the resource (" + cmds.length + ")"}),
      table(["~worker", "~tool", "~command", "exit", "runtime (s)", "~notes"], cmds.map(function (c) {
        return el("tr", null, [td(chip(c.worker, run), "t"), td(c.tool, "t"), td(markText(c.command), "text"), td(c.exit_code),
          td(fmt(c.runtime, 2)), td([c.killed ? "killed" : "", c.refused ? "refused" : "", c.truncated ? "output cut" : "", str(c.reason)].filter(Boolean).join(", "), "t")]);
      }))]);
  }
  function invalidTable(rd, run) {
    if (!rd.invalid.length) return null;
    return el("div", null, [el("h4", {text: "Invalid actions and how they were repaired"}),
      table(["~worker", "~phase", "~field", "~rule", "~detail"], rd.invalid.map(function (e) {
        return el("tr", null, [td(chip(e.worker, run), "t"), td(e.phase, "t"), td(e.field, "t"), td(e.rule, "t"), td(e.detail, "text")]);
      }))]);
  }
  function subrunTable(sb, run) {
    var ev = new Map();
    sb.evals.forEach(function (e) { ev.set(e.worker, e); });
    return table(["~worker", "~task", "work (s)", "budget", "deadline (s)", "scratch chars", "~outcome", "score", "progress"],
      arr(sb.start.workers).filter(isObj).map(function (w) {
        var e = ev.get(w.worker) || {};
        return el("tr", null, [td(chip(w.worker, run), "t"), td(w.task, "t"), td(fmt(w.work_s, 1)), td(w.budget),
          td(fmt(w.deadline_s, 0)), td(w.scratch_chars), td(e.outcome || "", "t"), td(pct(e.score, 1)), td(pct(e.progress, 1))]);
      }));
  }
  function renderRound(box) {
    var r = S.run;
    if (!r.subruns.length) { box.appendChild(el("p", {cls: "muted", text: "This run has no subrun events."})); return; }
    if (r.subruns.indexOf(S.subrun) < 0) S.subrun = r.subruns[0];
    var sb = r.bySub.get(S.subrun);
    if (sb.rounds.indexOf(S.round) < 0) S.round = sb.rounds.length ? sb.rounds[0] : null;
    var nav = el("div", {cls: "round-nav"}, [el("strong", {text: "subrun"})]);
    r.subruns.forEach(function (s) {
      nav.appendChild(el("button", {cls: s === S.subrun ? "sel" : null, "data-subrun": s, text: String(s),
        onclick: function () { var rs = r.bySub.get(s).rounds; goRound(s, rs.length ? rs[0] : null); }}));
    });
    box.appendChild(nav);
    var nav2 = el("div", {cls: "round-nav"}, [el("strong", {text: "round"})]);
    sb.rounds.forEach(function (n) {
      nav2.appendChild(el("button", {cls: n === S.round ? "sel" : null, "data-round": n, text: String(n),
        onclick: function () { goRound(S.subrun, n); }}));
    });
    box.appendChild(nav2);
    if (sb.start) {
      box.appendChild(el("h4", {text: "Subrun " + S.subrun + ": tasks, deadlines and outcomes" +
        (sb.ended ? " (ended after " + fmt(sb.ended.rounds) + " round(s): " + str(sb.ended.reason) + ")" : "")}));
      box.appendChild(subrunTable(sb, r));
    }
    box.appendChild(el("h4", {text: "Resource timeline of subrun " + S.subrun + " (each window links to its round; red ticks: deadlines)"}));
    box.appendChild(timelineSvg(r, S.subrun, {compact: true, current: S.round, onclick: function (n) { goRound(S.subrun, n); }}));
    if (S.round == null) { box.appendChild(el("p", {cls: "muted", text: "No rounds in this subrun."})); return; }
    var rd = sb.byRound.get(S.round);
    box.appendChild(el("h3", {id: "round-title", text: "Subrun " + S.subrun + " · round " + S.round +
      (rd.t != null ? " · t = " + fmt(rd.t, 0) + " s" : "") + (rd.candidates.length ? " · queue: " + rd.candidates.join(", ") : "")}));
    box.appendChild(declTable(rd, r, true));
    box.appendChild(msgList(rd, r, true));
    box.appendChild(ballotTable(rd, r, true));
    box.appendChild(scheduleTable(rd, r));
    box.appendChild(windowTable(rd, r));
    var c = commandTable(rd, r, S.worker);
    if (c) box.appendChild(c);
    var inv = invalidTable(rd, r);
    if (inv) box.appendChild(inv);
    if (rd.calls.length) {
      box.appendChild(el("p", null, [el("a", {href: runLink(S.cur, "s=" + S.subrun + "&r=" + S.round + "&tab=llm"), text: rd.calls.length + " LLM call(s) in this round: open them",
        onclick: function (ev) { ev.preventDefault(); setTab("llm"); }})]));
    }
  }

  // --- other tabs ---------------------------------------------------------------------------------
  function renderTimeline(box) {
    if (!S.run.subruns.length) { box.appendChild(el("p", {cls: "muted", text: "No windows."})); return; }
    box.appendChild(el("p", {cls: "muted", text: "Every window on the shared resource, per subrun (x: simulated seconds). Click a window to open its round; red ticks are deadlines."}));
    S.run.subruns.forEach(function (s) {
      box.appendChild(el("h4", {text: "Subrun " + s}));
      box.appendChild(timelineSvg(S.run, s, {onclick: function (n) { goRound(s, n); }}));
    });
  }
  function renderMemory(box) {
    var r = S.run, ws = S.worker ? [S.worker] : r.workerIds, any = false;
    var mem = own(r.params, "memory");
    box.appendChild(el("p", {cls: "muted", text: "Each worker's scratch memory, in the order it was written, across subruns: notes, rules, debts and after-action reports." +
      (isObj(mem) && mem.enabled === false ? " Memory is off in this condition: scratch was wiped at every subrun." : "")}));
    ws.forEach(function (w) {
      var rows = r.scratch.filter(function (e) { return e.worker === w && matches(e.text); });
      if (!rows.length) return;
      any = true;
      box.appendChild(el("h4", null, [chip(w), " " + rows.length + " entr" + (rows.length === 1 ? "y" : "ies")]));
      box.appendChild(table(["subrun", "round", "~entry", "~text", "~kept"], rows.map(function (e) {
        return el("tr", {cls: e.entry === "report" ? "report" : null, "data-seq": e.seq}, [td(e.subrun), td(e.round), td(e.entry, "t"), td(markText(e.text), "text"),
          td((e.accepted === false ? "refused" : "yes") + (e.dropped_chars ? " (dropped " + fmt(e.dropped_chars) + " older chars)" : ""), "t")]);
      })));
    });
    if (!any) box.appendChild(el("p", {cls: "muted", text: "No scratch entries" + (S.q ? " match the search." : ".")}));
  }
  function callHead(c) {
    return "S" + fmt(c.subrun) + " R" + fmt(c.round) + " · " + (str(c.worker) || "—") + " · " + str(c.role) + "/" + str(c.phase) + " · " + str(c.model) +
      (c.prompt_tokens == null ? " · tokens unknown (" + (c.error ? "failed call" : "no usage reported") + ")" :  // never 0+0
        " · " + fmt(c.prompt_tokens) + "+" + fmt(c.completion_tokens) + " tokens") + (c.cached_tokens ? " (" + fmt(c.cached_tokens) + " cached)" : "") +
      (c.reasoning_tokens ? " (" + fmt(c.reasoning_tokens) + " reasoning)" : "") +
      " · " + fmt(c.latency_s, 2) + " s · " + (isNum(c.cost_usd) ? "$" + fmt(c.cost_usd, 5) : c.prompt_tokens == null ? "cost unknown" : "unpriced") + (c.cache_hit ? " · cache hit" : "") +
      (c.attempts > 1 ? " · " + fmt(c.attempts) + " attempts" : "") + (c.repair ? " · repair" : "") + (c.error ? " · error: " + str(c.error) : "");
  }
  function callDetails(c, run, open) {
    var txt = own(run.llm, String(c.seq));
    var d = el("details", {cls: "call" + (c.error ? " failed" : ""), "data-seq": c.seq}, [el("summary", {text: callHead(c)})]);
    if (open) d.open = true;
    if (isObj(txt)) {
      var prompt = str(txt.prompt), at = isInt(txt.new_at) && txt.new_at > 0 && txt.new_at < prompt.length ? txt.new_at : 0;
      if (at) {  // most of a prompt repeats the worker's previous one: show what is new, the rest on demand
        d.appendChild(el("div", {cls: "muted", text: "new in this prompt (the first " + at.toLocaleString("en-US") + " characters repeat this worker's previous prompt)"}));
        d.appendChild(el("pre", {cls: "prompt-new"}, [markText(prompt.slice(at))]));
        var full = el("details", {cls: "full-prompt"}, [el("summary", {text: "the whole prompt (what it saw)"})]);
        full.addEventListener("toggle", function () { if (full.open && full.childNodes.length < 2) full.appendChild(el("pre", null, [markText(prompt)])); });
        d.appendChild(full);
      } else {
        d.appendChild(el("div", {cls: "muted", text: "prompt (what it saw)"}));
        d.appendChild(el("pre", null, [markText(prompt)]));
      }
      d.appendChild(el("div", {cls: "muted", text: "answer"}));
      d.appendChild(el("pre", null, [markText(txt.answer)]));
    } else d.appendChild(el("p", {cls: "muted", text: "Prompt and answer not found: the run's LLM cache file was not next to the runs when the viewer was built."}));
    return d;
  }
  function renderLlm(box) {
    var r = S.run, calls = r.calls.filter(function (c) { return !S.worker || c.worker === S.worker; });
    if (!r.calls.length) { box.appendChild(el("p", {cls: "muted", text: "No LLM calls in this run (scripted workers)."})); return; }
    var by = new Map();
    calls.forEach(function (c) {
      var key = str(c.model);
      var m = by.get(key);
      if (!m) { m = {n: 0, p: 0, c: 0, cost: 0, lat: 0, failed: 0, noUsage: 0}; by.set(key, m); }
      m.n++; m.p += isNum(c.prompt_tokens) ? c.prompt_tokens : 0; m.c += isNum(c.completion_tokens) ? c.completion_tokens : 0;
      if (c.prompt_tokens == null) m.noUsage += 1;  // its tokens and cost are unknown, not 0
      if (isNum(c.cost_usd)) m.cost += c.cost_usd; else m.unpriced = true;  // unknown, never $0
      m.lat += isNum(c.latency_s) ? c.latency_s : 0; m.failed += c.error ? 1 : 0;
    });
    box.appendChild(el("h4", {text: "Per model"}));
    box.appendChild(table(["~model", "calls", "failed", "prompt tokens", "completion tokens", "cost (USD)", "mean latency (s)"], Array.from(by.keys()).sort().map(function (m) {
      var x = by.get(m);
      var sum = function (v, text) { return x.noUsage ? partlyUnknown(v ? text : null, x.noUsage) : text; };
      return el("tr", null, [td(m, "t"), td(x.n), td(x.failed), td(sum(x.p, fmtInt(x.p))), td(sum(x.c, fmtInt(x.c))),
        td(x.noUsage ? sum(x.cost, "$" + x.cost.toFixed(4)) : x.unpriced ? "unpriced" : x.cost.toFixed(4)), td((x.lat / x.n).toFixed(2))]);
    })));
    box.appendChild(el("h4", {text: "Calls (" + calls.length + "); open one for its prompt and answer (API keys are never stored or shown)"}));
    calls.forEach(function (c) { box.appendChild(callDetails(c, r)); });
  }
  function renderEvents(box) {
    var ev = S.run.events.filter(function (e) { return (!S.worker || e.worker === S.worker) && (!S.q || matches(JSON.stringify(e))); });
    box.appendChild(el("p", {cls: "muted", text: ev.length + " event(s)" + (ev.length > 2000 ? "; the first 2,000 are shown" : "")}));
    var skip = new Set(["seq", "kind", "subrun", "round", "worker", "t"]);
    box.appendChild(table(["seq", "~kind", "subrun", "round", "~worker", "t (s)", "~fields"], ev.slice(0, 2000).map(function (e) {
      var rest = {};
      Object.keys(e).forEach(function (k) { if (!skip.has(k)) Object.defineProperty(rest, k, {value: e[k], enumerable: true}); });
      var s = JSON.stringify(rest);
      return el("tr", null, [td(e.seq), td(e.kind, "t"), td(e.subrun), td(e.round), td(e.worker || "", "t"), td(fmt(e.t, 1)), td(s.length > 400 ? s.slice(0, 400) + "…" : s, "text")]);
    })));
  }
  function renderSearch() {
    var box = clear($("search-results"));
    if (!S.q) return;
    if (S.scope === "all") { if (views.runs) views.runs.renderSearchAll(box); return; }
    if (!S.run || S.view !== "run") return;
    var hits = S.run.utter.filter(function (u) { return passes(u) && matches(u.text); });
    var inner = el("div", {cls: "box"}, [el("strong", {text: hits.length ? hits.length + " match(es) for " + querySaid(S.q) + " in this run" + (hits.length > 200 ? " (first 200)" : "") + " — click one to open its round" : "No match for " + querySaid(S.q) + " in this run"})]);
    hits.slice(0, 200).forEach(function (u) {
      inner.appendChild(el("div", {cls: "result", "data-seq": u.e.seq, onclick: function () { goRound(u.subrun, u.round); showMark(); }}, [
        el("span", {cls: "muted", text: "S" + u.subrun + " R" + u.round + " · " + u.src + " · "}), chip(u.worker),
        u.to ? " → " : "", u.to ? chip(u.to) : null, " ", markText(u.text)]));
    });
    box.appendChild(inner);
  }
  function renderContent() {
    var box = clear($("content"));
    renderSearch();
    if (!S.run) return;
    if (S.tab === "agent" && views.agent) { views.agent.render(box); return; }
    ({rounds: renderRound, timeline: renderTimeline, memory: renderMemory, llm: renderLlm, events: renderEvents}[S.tab] || renderRound)(box);
  }

  // --- selection -------------------------------------------------------------------------------
  // Open run n (in the run view); `at` = {subrun, round, tab, worker} to open it at a place.
  function selectRun(n, at) {
    S.cur = n;
    if (!S.q) S.scope = "run";
    var entry = S.byN.get(n);
    show("run");
    if (!$("run-list").firstChild) renderRunList();
    [].forEach.call(document.querySelectorAll("#run-list button"), function (b) {
      b.classList.toggle("sel", Number(b.getAttribute("data-n")) === n);
    });
    if (!entry) return Promise.resolve();
    if (!at) { S.subrun = null; S.round = null; if (S.tab === "agent") S.agent = ""; }
    else {
      if (at.subrun !== undefined) S.subrun = at.subrun;
      if (at.round !== undefined) S.round = at.round;
      if (at.tab) S.tab = at.tab;
      if (at.worker !== undefined) S.agent = at.worker;
    }
    if (entry.status === "unreadable" || !isStr(entry.file)) {
      S.run = null;
      clear($("run-head")).appendChild(el("div", {cls: "box bad"}, [el("h2", {text: str(entry.path)}),
        el("p", {text: entry.status === "unreadable" ? "This run cannot be shown: " + str(entry.error) : "This run has no events yet (it is " + str(entry.status) + ")."})]));
      clear($("tabs")); clear($("content")); clear($("search-results"));
      writeHash();
      return Promise.resolve();
    }
    clear($("content")).appendChild(el("p", {cls: "muted", text: "Loading " + str(entry.id) + "…"}));
    return prepared(n).then(function (run) {
      if (S.cur !== n) return;
      S.run = run;
      fillFilters(); renderHead(); renderTabs(); renderContent(); writeHash();
    }).catch(function (err) {
      clear($("content")).appendChild(el("p", {cls: "bad", text: String(err.message || err)}));
    });
  }

  // --- the index: first load, and reloads (live mode, or the reload button) --------------------------
  function takeIndex(idx) {
    if (!isObj(idx) || !Array.isArray(idx.runs)) throw new Error("data/index.js holds no index");
    idx.runs = idx.runs.filter(function (r) { return isObj(r) && isInt(r.n) && isStr(r.path); });
    var old = S.byN;
    S.index = idx; S.byN = new Map(); S.byPath = new Map();
    idx.runs.forEach(function (r) {
      if (!isStr(r.id)) r.id = r.path;
      S.byN.set(r.n, r); S.byPath.set(r.path, r.n);
      var before = old.get(r.n);
      if (before && before.v !== r.v) { S.runs.delete(r.n); S.pending.delete(r.n); }  // rewritten: load again
    });
    arr(idx.text).forEach(function (t) {
      var got = S.texts.get(t.k);
      if (got && got.v !== t.v) S.texts.delete(t.k);
    });
    $("root-name").textContent = str(idx.root) + " · " + idx.runs.length + " run(s) · " + (idx.live ? "live, read " : "built ") + str(idx.built);
  }
  function refresh(idx) {  // a newer index: redraw what is open, keeping the user's place
    var cur = S.cur, curV = S.run ? S.run.entry.v : null;
    takeIndex(idx);
    renderNotices();
    if ($("run-list").firstChild) renderRunList();
    if (views.runs) views.runs.refresh();
    if (S.view === "run" && cur != null && S.byN.has(cur) && S.byN.get(cur).v !== curV) selectRun(cur, {});
    if (S.view === "diff" && views.diff) views.diff.refresh();
  }
  function reload() {
    S.loads++;
    return loadScript("data/index.js?v=" + Date.now() + "-" + S.loads).catch(function () { /* a rewrite in progress: next time */ });
  }
  function start() {
    var h = readHash();
    S.started = true;
    var conds = new Set();
    S.index.runs.forEach(function (r) { conds.add(str(r.condition)); });
    Array.from(conds).sort().forEach(function (c) { $("cond-filter").appendChild(el("option", {value: c, text: c})); });
    if (h.cond && conds.has(h.cond)) { S.cond = h.cond; $("cond-filter").value = h.cond; }
    $("cond-filter").addEventListener("change", function () { S.cond = this.value; renderRunList(); writeHash(); });
    $("run-filter").addEventListener("input", function () { S.runFilter = this.value; renderRunList(); });
    $("f-worker").addEventListener("change", function () { S.worker = this.value; renderContent(); });
    $("f-channel").addEventListener("change", function () { S.channel = this.value; renderContent(); });
    $("f-label").addEventListener("change", function () { S.label = this.value; renderContent(); });
    [].forEach.call(document.querySelectorAll("#views button"), function (b) {
      b.addEventListener("click", function () { goView(b.getAttribute("data-view")); });
    });
    $("reload").addEventListener("click", function () { reload(); });
    var timer = null;
    function searchNow() { clearTimeout(timer); var v = $("search").value.trim(); S.q = v.length >= 2 ? v : ""; renderContent(); if (S.view !== "run") renderSearch(); writeHash(); }
    $("search").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(searchNow, 150); });
    $("search-scope").addEventListener("change", function () { S.scope = this.value; searchNow(); });
    renderNotices();
    if (h.q) { S.q = h.q; $("search").value = h.q; S.scope = h.scope === "all" ? "all" : "run"; }
    if (S.index.live) setInterval(reload, Math.max(1, Number(S.index.live) || 2) * 1000);
    window.addEventListener("hashchange", followLink);
    route(h, function () { document.body.setAttribute("data-ready", "1"); });
  }

  return {
    index: function (idx) {
      if (S.started) { refresh(idx); return; }
      try { takeIndex(idx); } catch (err) { clear($("notices")).appendChild(el("p", {cls: "bad", text: String(err.message || err)})); return; }
      start();
    },
    run: function (n, data) {
      if (!isInt(n) || !isObj(data)) return;
      S.runs.set(n, data);
      var p = S.pending.get(n);
      if (p) { S.pending.delete(n); p.resolve(data); }
    },
    text: function (k, data) {
      if (!isInt(k) || !isObj(data)) return;
      var t = arr(S.index && S.index.text).filter(function (x) { return x.k === k; })[0];
      S.texts.set(k, {v: t ? t.v : null, runs: data, low: null});
      var p = S.textPending.get(k);
      if (p) { S.textPending.delete(k); p.resolve(); }
    },
    indexMissing: function () {
      clear($("notices")).appendChild(el("p", {cls: "bad", text: "data/index.js is missing next to this page: rebuild it with mbb view."}));
    },
    _state: S,
    _views: views,
    _lib: {el: el, clear: clear, scrollCue: scrollCue, searchTerms: searchTerms, holdsAll: holdsAll, querySaid: querySaid, fmt: fmt, pct: pct, fmtInt: fmtInt, fmtCost: fmtCost, fmtMeasure: fmtMeasure, partlyUnknown: partlyUnknown,
      fmtMeasureDelta: fmtMeasureDelta, isMeasure: isMeasure, measureNA: measureNA, NA: NA, markText: markText, chip: chip, colourOf: colourOf,
      table: table, td: td, isInt: isInt, isNum: isNum, isStr: isStr, isObj: isObj, arr: arr, str: str, own: own, dict: dict,
      $: $, show: show, goView: goView, writeHash: writeHash, entryOf: entryOf, runLink: runLink, loadScript: loadScript, versioned: versioned,
      prepared: prepared, selectRun: selectRun, renderSearch: renderSearch, showMark: showMark, timelineSvg: timelineSvg, subrunEnd: subrunEnd,
      declTable: declTable, msgList: msgList, ballotTable: ballotTable, scheduleTable: scheduleTable, windowTable: windowTable,
      commandTable: commandTable, invalidTable: invalidTable, subrunTable: subrunTable, callDetails: callDetails,
      labelBlock: labelBlock, workerModel: workerModel, workerPersona: workerPersona, setTab: setTab, renderContent: renderContent}
  };
})();
