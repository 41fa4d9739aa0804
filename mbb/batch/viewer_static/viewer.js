/* mbb viewer: plain JavaScript, no library, no network.
 * Data arrive as script files: data/index.js calls MBB.index(...), data/runs/<n>.js calls
 * MBB.run(n, ...). Every piece of run text is put into the page with textContent (never as HTML).
 */
"use strict";
var MBB = (function () {
  var PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2",
    "#ff9da6", "#9d755d", "#bab0ac", "#eeca3b"];
  var S = {index: null, runs: {}, pending: {}, cur: null, run: null, tab: "rounds",
    subrun: null, round: null, worker: "", channel: "", label: "", q: "", cond: "",
    runFilter: ""};
  var $ = function (id) { return document.getElementById(id); };

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
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function fmt(v, d) {
    if (v == null) return "";
    if (typeof v === "number") return d == null ? String(v) : v.toFixed(d);
    return String(v);
  }
  function markText(text) {  // text with the search phrase wrapped in <mark> (as DOM nodes)
    var span = el("span", {cls: "text"});
    text = text == null ? "" : String(text);
    var q = S.q.toLowerCase();
    if (!q) { span.textContent = text; return span; }
    var low = text.toLowerCase(), i = 0, j;
    while ((j = low.indexOf(q, i)) >= 0) {
      span.appendChild(document.createTextNode(text.slice(i, j)));
      span.appendChild(el("mark", {text: text.slice(j, j + q.length)}));
      i = j + q.length;
    }
    span.appendChild(document.createTextNode(text.slice(i)));
    return span;
  }
  function colourOf(w) {
    var ws = S.run ? S.run.workerIds : [];
    var i = ws.indexOf(w);
    return i < 0 ? "#777" : PALETTE[i % PALETTE.length];
  }
  function chip(w) { return el("span", {cls: "chip", style: "background:" + colourOf(w), text: w || "—"}); }
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
    if (v instanceof Node) c.appendChild(v); else c.textContent = v == null ? "" : String(v);
    return c;
  }

  // --- routing --------------------------------------------------------------------------------
  function readHash() {
    var h = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var p = kv.split("=");
      h[decodeURIComponent(p[0])] = decodeURIComponent(p.slice(1).join("=") || "");
    });
    return h;
  }
  function writeHash() {
    var parts = [];
    if (S.cur != null) parts.push("run=" + S.cur);
    if (S.subrun != null) parts.push("s=" + S.subrun);
    if (S.round != null) parts.push("r=" + S.round);
    if (S.tab !== "rounds") parts.push("tab=" + S.tab);
    if (S.cond) parts.push("cond=" + encodeURIComponent(S.cond));
    var h = "#" + parts.join("&");
    if (location.hash !== h) history.replaceState(null, "", h);
  }

  // --- loading ----------------------------------------------------------------------------------
  function loadRun(n) {
    if (S.runs[n]) return Promise.resolve(S.runs[n]);
    if (S.pending[n]) return S.pending[n].promise;
    var entry = S.index.runs[n], p = {};
    p.promise = new Promise(function (resolve, reject) { p.resolve = resolve; p.reject = reject; });
    S.pending[n] = p;
    var s = document.createElement("script");
    s.src = entry.file;
    s.onerror = function () {
      delete S.pending[n];
      p.reject(new Error("the data file " + entry.file + " is missing (rebuild with mbb view)"));
    };
    document.body.appendChild(s);
    return p.promise;
  }
  function prepare(data) {  // index a run's events once: rounds, subruns, utterances, labels
    var r = {data: data, events: data.events, subruns: [], bySub: {}, workerIds: [],
      personas: {}, utter: [], labels: data.labels || {}, llm: data.llm || {}, windows: {},
      scratch: [], calls: [], categories: {}};
    function sub(s) {
      if (!r.bySub[s]) {
        r.bySub[s] = {subrun: s, rounds: [], byRound: {}, start: null, ended: null, evals: [],
          other: []};
        r.subruns.push(s);
      }
      return r.bySub[s];
    }
    function rnd(sb, n) {
      if (!sb.byRound[n]) {
        sb.byRound[n] = {round: n, t: null, candidates: [], decl: [], msgs: [], ballots: [],
          schedule: null, windows: [], dropped: [], invalid: [], commands: [], calls: [], other: []};
        sb.rounds.push(n);
      }
      return sb.byRound[n];
    }
    data.events.forEach(function (e) {
      if (e.kind === "run_started") {
        (e.workers || []).forEach(function (w) {
          if (r.workerIds.indexOf(w.id) < 0) r.workerIds.push(w.id);
          r.personas[w.id] = w;
        });
        r.started = e;
        return;
      }
      if (e.kind === "run_ended") { r.ended = e; return; }
      if (e.worker && r.workerIds.indexOf(e.worker) < 0) r.workerIds.push(e.worker);
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
        case "round_started": rd.t = e.t; rd.candidates = e.candidates || []; break;
        case "declared": rd.decl.push(e); u = {src: "declaration", text: e.note}; break;
        case "message": rd.msgs.push(e);
          u = {src: e.to == null ? "public" : "private", text: e.text}; break;
        case "ballot": rd.ballots.push(e); u = {src: "ballot", text: e.reasoning}; break;
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
    r.subruns.forEach(function (s) { r.bySub[s].rounds.sort(function (a, b) { return a - b; }); });
    Object.keys(r.labels).forEach(function (seq) {
      r.labels[seq].forEach(function (l) { r.categories[l[0]] = (r.categories[l[0]] || 0) + 1; });
    });
    return r;
  }

  // --- filters --------------------------------------------------------------------------------
  function labelsOf(e) { return S.run.labels[String(e.seq)] || []; }
  function passes(u) {  // worker / channel / label filters on one utterance
    if (S.worker && u.worker !== S.worker && u.to !== S.worker) return false;
    if (S.channel && u.src !== S.channel) return false;
    if (S.label && !labelsOf(u.e).some(function (l) { return l[0] === S.label; })) return false;
    return true;
  }
  function matches(text) { return !S.q || String(text || "").toLowerCase().indexOf(S.q.toLowerCase()) >= 0; }
  function labelBlock(e) {
    var ls = labelsOf(e);
    if (!ls.length) return null;
    var box = el("div");
    var seen = {};
    ls.forEach(function (l) {
      if (seen[l[0]]) return;
      seen[l[0]] = true;
      box.appendChild(el("span", {cls: "lab", title: l[1] + ": " + l[2], text: l[0]}));
    });
    ls.forEach(function (l) {
      if (S.label && l[0] !== S.label) return;
      if (!S.label) return;
      box.appendChild(el("div", {cls: "evidence"}, [el("b", {text: l[0] + " (" + l[1] + "): "}), l[2]]));
    });
    if (!S.label) {
      var d = el("details", {cls: "evidence"}, [el("summary", {text: "evidence"})]);
      ls.forEach(function (l) { d.appendChild(el("div", null, [el("b", {text: l[0] + " (" + l[1] + "): "}), l[2]])); });
      box.appendChild(d);
    }
    return box;
  }

  // --- sidebar ----------------------------------------------------------------------------------
  function renderRunList() {
    var list = clear($("run-list")), q = S.runFilter.toLowerCase(), shown = 0;
    var frag = document.createDocumentFragment();
    S.index.runs.forEach(function (r) {
      if (S.cond && r.condition !== S.cond) return;
      var hay = (r.id + " " + r.seed + " " + r.status + " " + r.condition).toLowerCase();
      if (q && hay.indexOf(q) < 0) return;
      shown++;
      var b = el("button", {"data-n": r.n, cls: r.n === S.cur ? "sel" : null,
        title: r.error || (r.problems && r.problems.length ? r.problems.join("\n") : r.path),
        onclick: function () { selectRun(r.n); }},
      [r.id, el("span", {cls: "st " + r.status, text: r.status + ((r.problems && r.problems.length) ? " ⚠" : "")})]);
      frag.appendChild(el("li", null, [b]));
    });
    list.appendChild(frag);
    $("run-count").textContent = shown + " of " + S.index.runs.length + " run(s)";
  }
  function renderNotices() {
    var box = clear($("notices")), idx = S.index;
    if (idx.message) box.appendChild(el("div", {cls: "box bad"}, [el("strong", {text: idx.message})]));
    var bad = idx.runs.filter(function (r) { return r.status === "unreadable"; });
    var warn = idx.runs.filter(function (r) { return r.problems && r.problems.length; });
    if (bad.length) {
      var ul = el("ul");
      bad.forEach(function (r) { ul.appendChild(el("li", null, [el("code", {text: r.path}), ": " + r.error])); });
      box.appendChild(el("div", {cls: "box bad", id: "bad-runs"}, [
        el("strong", {text: bad.length + " run(s) cannot be shown:"}), ul]));
    }
    if (warn.length) {
      var ul2 = el("ul");
      warn.slice(0, 20).forEach(function (r) {
        ul2.appendChild(el("li", null, [el("code", {text: r.path}), ": " + r.problems.join("; ")]));
      });
      if (warn.length > 20) ul2.appendChild(el("li", {text: "… and " + (warn.length - 20) + " more"}));
      box.appendChild(el("details", {cls: "box", id: "warn-runs"}, [
        el("summary", {text: warn.length + " run(s) shown in part (open for details)"}), ul2]));
    }
  }

  // --- run header and tabs ----------------------------------------------------------------
  function renderHead() {
    var h = clear($("run-head")), r = S.run, sm = r.data.summary;
    h.appendChild(el("h2", {text: sm.id}));
    var p = r.started ? r.started.params || {} : {};
    h.appendChild(el("div", {cls: "muted", text: "condition " + sm.condition + " · seed " + fmt(sm.seed) +
      " · " + sm.status + " · " + sm.events + " events · " + sm.subruns + " subrun(s) · " + sm.rounds +
      " round(s)" + (p.description ? " · " + p.description : "")}));
    if (sm.problems && sm.problems.length) {
      var ul = el("ul", {cls: "warn"});
      sm.problems.forEach(function (x) { ul.appendChild(el("li", {text: x})); });
      h.appendChild(el("div", {cls: "box", id: "run-problems"}, [el("strong", {text: "This run is shown in part:"}), ul]));
    }
    var rows = r.workerIds.map(function (w) {
      var info = r.personas[w] || {};
      return el("tr", null, [td(chip(w), "t"), td(info.persona, "t"), td(info.negotiator, "t"),
        td(info.solver, "t"), td(info.model || "", "t"), td(info.budget), td(info.deadline_s)]);
    });
    h.appendChild(table(["~worker", "~persona", "~negotiator", "~solver", "~model", "budget", "deadline (s)"], rows));
  }
  var TABS = [["rounds", "Rounds"], ["timeline", "Timeline"], ["memory", "Memory & reports"],
    ["llm", "LLM calls"], ["events", "All events"]];
  function renderTabs() {
    var nav = clear($("tabs"));
    TABS.forEach(function (t) {
      var label = t[1];
      if (t[0] === "llm") label += " (" + S.run.calls.length + ")";
      nav.appendChild(el("button", {cls: S.tab === t[0] ? "sel" : null, "data-tab": t[0],
        onclick: function () { S.tab = t[0]; renderTabs(); renderContent(); writeHash(); }, text: label}));
    });
  }
  function fillFilters() {
    var w = clear($("f-worker"));
    w.appendChild(el("option", {value: "", text: "all"}));
    S.run.workerIds.forEach(function (id) { w.appendChild(el("option", {value: id, text: id})); });
    if (S.run.workerIds.indexOf(S.worker) < 0) S.worker = "";
    w.value = S.worker;
    var l = clear($("f-label"));
    l.appendChild(el("option", {value: "", text: "any"}));
    Object.keys(S.run.categories).sort().forEach(function (c) {
      l.appendChild(el("option", {value: c, text: c + " (" + S.run.categories[c] + ")"}));
    });
    if (!S.run.categories[S.label]) S.label = "";
    l.value = S.label;
  }

  // --- the round view -------------------------------------------------------------------------
  function goRound(s, n) {
    S.subrun = s; S.round = n; S.tab = "rounds";
    renderTabs(); renderContent(); writeHash();
    window.scrollTo(0, 0);
  }
  function timelineSvg(s, compact) {
    var sb = S.run.bySub[s], ws = S.run.workerIds, rowH = compact ? 16 : 22, left = 44;
    var W = Math.max(480, Math.min(1100, ($("content").clientWidth || 900) - 20)), plot = W - left - 10;
    var end = 0, wins = [];
    sb.rounds.forEach(function (n) {
      sb.byRound[n].windows.forEach(function (w) {
        if (!w.end) return;
        wins.push({round: n, worker: w.start.worker, start: w.end.start, used: w.end.used, reason: w.end.reason,
          progress: w.end.progress, allocation: w.end.allocation});
        end = Math.max(end, w.end.start + w.end.used);
      });
    });
    (sb.start ? sb.start.workers : []).forEach(function (w) { end = Math.max(end, w.deadline_s || 0); });
    end = end || 1;
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
    (sb.start ? sb.start.workers : []).forEach(function (w) {
      var i = ws.indexOf(w.worker);
      if (i >= 0 && w.deadline_s) sv("line", {x1: x(w.deadline_s), x2: x(w.deadline_s), y1: i * rowH + 1, y2: (i + 1) * rowH - 1, stroke: "#b00020", "stroke-width": 2});
    });
    wins.forEach(function (w) {
      var i = ws.indexOf(w.worker);
      var cur = compact && w.round === S.round;
      var r = sv("rect", {x: x(w.start), y: i * rowH + 2, width: Math.max(1.5, plot * w.used / end), height: rowH - 4,
        fill: colourOf(w.worker), opacity: compact && !cur ? 0.45 : 0.95,
        "class": "win" + (cur ? " cur" : ""), "data-round": w.round});
      var title = document.createElementNS(NS, "title");
      title.textContent = w.worker + " · round " + w.round + " · " + w.start.toFixed(0) + "–" + (w.start + w.used).toFixed(0) +
        " s · " + w.reason + " · progress " + (100 * w.progress).toFixed(0) + "% (click: open the round)";
      r.appendChild(title);
      r.addEventListener("click", function () { goRound(s, w.round); });
    });
    return svg;
  }
  function renderRound(box) {
    var r = S.run;
    if (!r.subruns.length) { box.appendChild(el("p", {cls: "muted", text: "This run has no subrun events."})); return; }
    if (r.subruns.indexOf(S.subrun) < 0) S.subrun = r.subruns[0];
    var sb = r.bySub[S.subrun];
    if (sb.rounds.indexOf(S.round) < 0) S.round = sb.rounds.length ? sb.rounds[0] : null;
    var nav = el("div", {cls: "round-nav"}, [el("strong", {text: "subrun"})]);
    r.subruns.forEach(function (s) {
      nav.appendChild(el("button", {cls: s === S.subrun ? "sel" : null, "data-subrun": s, text: String(s),
        onclick: function () { goRound(s, (r.bySub[s].rounds[0] != null) ? r.bySub[s].rounds[0] : null); }}));
    });
    box.appendChild(nav);
    var nav2 = el("div", {cls: "round-nav"}, [el("strong", {text: "round"})]);
    sb.rounds.forEach(function (n) {
      nav2.appendChild(el("button", {cls: n === S.round ? "sel" : null, "data-round": n, text: String(n),
        onclick: function () { goRound(S.subrun, n); }}));
    });
    box.appendChild(nav2);
    if (sb.start) {
      var ev = {};
      sb.evals.forEach(function (e) { ev[e.worker] = e; });
      box.appendChild(el("h4", {text: "Subrun " + S.subrun + ": tasks, deadlines and outcomes" +
        (sb.ended ? " (ended after " + sb.ended.rounds + " round(s): " + sb.ended.reason + ")" : "")}));
      box.appendChild(table(["~worker", "~task", "work (s)", "budget", "deadline (s)", "scratch chars", "~outcome", "score", "progress"],
        sb.start.workers.map(function (w) {
          var e = ev[w.worker] || {};
          return el("tr", null, [td(chip(w.worker), "t"), td(w.task, "t"), td(fmt(w.work_s, 1)), td(w.budget),
            td(fmt(w.deadline_s, 0)), td(w.scratch_chars), td(e.outcome || "", "t"), td(fmt(e.score, 2)), td(fmt(e.progress, 2))]);
        })));
    }
    box.appendChild(el("h4", {text: "Resource timeline of subrun " + S.subrun + " (each window links to its round; red ticks: deadlines)"}));
    box.appendChild(timelineSvg(S.subrun, true));
    if (S.round == null) { box.appendChild(el("p", {cls: "muted", text: "No rounds in this subrun."})); return; }
    var rd = sb.byRound[S.round];
    box.appendChild(el("h3", {id: "round-title", text: "Subrun " + S.subrun + " · round " + S.round +
      (rd.t != null ? " · t = " + fmt(rd.t, 0) + " s" : "") + (rd.candidates.length ? " · queue: " + rd.candidates.join(", ") : "")}));

    var decl = rd.decl.filter(function (e) { return passes({src: "declaration", e: e, worker: e.worker, to: null}); });
    box.appendChild(el("h4", {text: "Declarations (" + decl.length + ")"}));
    if (decl.length) {
      box.appendChild(table(["~worker", "bid", "duration (s)", "position", "~note", "~labels"], decl.map(function (e) {
        var note = el("div", null, [markText(e.note), e.revision ? el("span", {cls: "tag public", text: "revision, turn " + e.turn}) : null]);
        return el("tr", {"data-seq": e.seq}, [td(chip(e.worker), "t"), td(e.bid), td(e.duration), td(e.position), td(note, "text"), td(labelBlock(e) || "", "t")]);
      })));
    }
    var msgs = rd.msgs.filter(function (e) { return passes({src: e.to == null ? "public" : "private", e: e, worker: e.worker, to: e.to}); });
    box.appendChild(el("h4", {text: "Conversation (" + msgs.length + " message(s); private ones highlighted)"}));
    msgs.forEach(function (e) {
      var priv = e.to != null;
      box.appendChild(el("div", {cls: "msg" + (priv ? " private" : ""), "data-seq": e.seq}, [
        el("div", {cls: "who"}, [chip(e.worker), " → ", priv ? chip(e.to) : "everyone",
          el("span", {cls: "tag " + (priv ? "private" : "public"), text: priv ? "private" : "public"}),
          " turn " + fmt(e.turn)]),
        markText(e.text), labelBlock(e)]));
    });
    if (!rd.msgs.length) box.appendChild(el("p", {cls: "muted", text: "No conversation in this round."}));
    var ballots = rd.ballots.filter(function (e) { return passes({src: "ballot", e: e, worker: e.worker, to: null}); });
    box.appendChild(el("h4", {text: "Ballots (" + ballots.length + ")"}));
    if (ballots.length) {
      box.appendChild(table(["~worker", "~ranking (seconds)", "~reasoning", "~labels"], ballots.map(function (e) {
        var rk = (e.ranking || []).map(function (w, i) { return w + " " + ((e.allocations || [])[i] || 0) + "s"; }).join(" > ");
        return el("tr", {"data-seq": e.seq}, [td(chip(e.worker), "t"), td(rk + (e.defaulted ? " (defaulted)" : ""), "t"),
          td(markText(e.reasoning), "text"), td(labelBlock(e) || "", "t")]);
      })));
    }
    box.appendChild(el("h4", {text: "Schedule"}));
    if (rd.schedule) {
      var sc = rd.schedule;
      box.appendChild(el("div", {cls: "muted", text: "rule " + sc.rule + (sc.ballots_unanimous ? " · ballots unanimous" : "")}));
      box.appendChild(table(["position", "~worker", "allocation (s)", "bid"], (sc.order || []).map(function (w, i) {
        return el("tr", null, [td(i + 1), td(chip(w), "t"), td((sc.allocations || [])[i]), td((sc.bids || [])[i])]);
      })));
    } else box.appendChild(el("p", {cls: "muted", text: "No schedule was published."}));
    box.appendChild(el("h4", {text: "Windows: what each achieved"}));
    var wrows = rd.windows.map(function (w) {
      var e = w.end || {};
      return el("tr", null, [td(w.start.position), td(chip(w.start.worker), "t"), td(w.start.price), td(w.start.allocation),
        td(fmt(e.start, 0)), td(fmt(e.used, 1)), td(e.reason || "(did not end)", "t"), td(e.progress != null ? (100 * e.progress).toFixed(1) + "%" : "")]);
    }).concat(rd.dropped.map(function (e) {
      return el("tr", null, [td(e.position), td(chip(e.worker), "t"), td(""), td(e.allocation), td(""), td(""), td("dropped: " + e.reason, "t"), td("")]);
    }));
    if (wrows.length) box.appendChild(table(["position", "~worker", "price", "allocation (s)", "start (s)", "used (s)", "~ended", "progress after"], wrows));
    else box.appendChild(el("p", {cls: "muted", text: "No windows."}));
    if (rd.commands.length) {
      box.appendChild(el("h4", {text: "Commands on the resource (" + rd.commands.length + ")"}));
      box.appendChild(table(["~worker", "~tool", "~command", "exit", "runtime (s)", "~notes"], rd.commands.filter(function (c) {
        return !S.worker || c.worker === S.worker;
      }).map(function (c) {
        return el("tr", null, [td(chip(c.worker), "t"), td(c.tool, "t"), td(markText(c.command), "text"), td(c.exit_code),
          td(fmt(c.runtime, 2)), td([c.killed ? "killed" : "", c.refused ? "refused" : "", c.truncated ? "output cut" : "", c.reason || ""].filter(Boolean).join(", "), "t")]);
      })));
    }
    if (rd.invalid.length) {
      box.appendChild(el("h4", {text: "Invalid actions and how they were repaired"}));
      box.appendChild(table(["~worker", "~phase", "~field", "~rule", "~detail"], rd.invalid.map(function (e) {
        return el("tr", null, [td(chip(e.worker), "t"), td(e.phase, "t"), td(e.field, "t"), td(e.rule, "t"), td(e.detail, "text")]);
      })));
    }
    if (rd.calls.length) {
      box.appendChild(el("p", null, [el("a", {href: "#", text: rd.calls.length + " LLM call(s) in this round: open them",
        onclick: function (ev) { ev.preventDefault(); S.tab = "llm"; renderTabs(); renderContent(); writeHash(); }})]));
    }
  }

  // --- other tabs ---------------------------------------------------------------------------------
  function renderTimeline(box) {
    if (!S.run.subruns.length) { box.appendChild(el("p", {cls: "muted", text: "No windows."})); return; }
    box.appendChild(el("p", {cls: "muted", text: "Every window on the shared resource, per subrun (x: simulated seconds). Click a window to open its round; red ticks are deadlines."}));
    S.run.subruns.forEach(function (s) {
      box.appendChild(el("h4", {text: "Subrun " + s}));
      box.appendChild(timelineSvg(s, false));
    });
  }
  function renderMemory(box) {
    var r = S.run, ws = S.worker ? [S.worker] : r.workerIds, any = false;
    box.appendChild(el("p", {cls: "muted", text: "Each worker's scratch memory, in the order it was written, across subruns: notes, rules, debts and after-action reports." +
      (r.started && r.started.params && r.started.params.memory && r.started.params.memory.enabled === false ? " Memory is off in this condition: scratch was wiped at every subrun." : "")}));
    ws.forEach(function (w) {
      var rows = r.scratch.filter(function (e) { return e.worker === w && matches(e.text); });
      if (!rows.length) return;
      any = true;
      box.appendChild(el("h4", null, [chip(w), " " + rows.length + " entr" + (rows.length === 1 ? "y" : "ies")]));
      box.appendChild(table(["subrun", "round", "~entry", "~text", "~kept"], rows.map(function (e) {
        return el("tr", {cls: e.entry === "report" ? "report" : null}, [td(e.subrun), td(e.round), td(e.entry, "t"), td(markText(e.text), "text"),
          td((e.accepted === false ? "refused" : "yes") + (e.dropped_chars ? " (dropped " + e.dropped_chars + " older chars)" : ""), "t")]);
      })));
    });
    if (!any) box.appendChild(el("p", {cls: "muted", text: "No scratch entries" + (S.q ? " match the search." : ".")}));
  }
  function renderLlm(box) {
    var r = S.run, calls = r.calls.filter(function (c) { return !S.worker || c.worker === S.worker; });
    if (!r.calls.length) { box.appendChild(el("p", {cls: "muted", text: "No LLM calls in this run (scripted workers)."})); return; }
    var by = {};
    calls.forEach(function (c) {
      var m = by[c.model] || (by[c.model] = {n: 0, p: 0, c: 0, cost: 0, lat: 0});
      m.n++; m.p += c.prompt_tokens || 0; m.c += c.completion_tokens || 0; if (c.cost_usd == null) m.unpriced = true; else m.cost += c.cost_usd; m.lat += c.latency_s || 0;
    });
    box.appendChild(el("h4", {text: "Per model"}));
    box.appendChild(table(["~model", "calls", "prompt tokens", "completion tokens", "cost (USD)", "mean latency (s)"], Object.keys(by).sort().map(function (m) {
      var x = by[m];
      return el("tr", null, [td(m, "t"), td(x.n), td(x.p), td(x.c), td(x.unpriced ? "unpriced" : x.cost.toFixed(4)), td((x.lat / x.n).toFixed(2))]);
    })));
    box.appendChild(el("h4", {text: "Calls (" + calls.length + "); open one for its prompt and answer (API keys are never stored or shown)"}));
    calls.forEach(function (c) {
      var txt = r.llm[String(c.seq)];
      var head = "S" + fmt(c.subrun) + " R" + fmt(c.round) + " · " + (c.worker || "—") + " · " + c.role + "/" + c.phase + " · " + c.model +
        " · " + (c.prompt_tokens || 0) + "+" + (c.completion_tokens || 0) + " tokens" + (c.reasoning_tokens ? " (" + c.reasoning_tokens + " reasoning)" : "") +
        " · " + fmt(c.latency_s, 2) + " s · " + (c.cost_usd == null ? "unpriced" : "$" + fmt(c.cost_usd, 5)) + (c.cache_hit ? " · cache hit" : "") +
        (c.attempts > 1 ? " · " + c.attempts + " attempts" : "") + (c.repair ? " · repair" : "") + (c.error ? " · error: " + c.error : "");
      var d = el("details", {cls: "call", "data-seq": c.seq}, [el("summary", {text: head})]);
      if (txt) {
        d.appendChild(el("div", {cls: "muted", text: "prompt"}));
        d.appendChild(el("pre", null, [markText(txt.prompt)]));
        d.appendChild(el("div", {cls: "muted", text: "answer"}));
        d.appendChild(el("pre", null, [markText(txt.answer)]));
      } else d.appendChild(el("p", {cls: "muted", text: "Prompt and answer not found: the run's LLM cache file was not next to the runs when the viewer was built."}));
      box.appendChild(d);
    });
  }
  function renderEvents(box) {
    var ev = S.run.events.filter(function (e) { return (!S.worker || e.worker === S.worker) && (!S.q || matches(JSON.stringify(e))); });
    box.appendChild(el("p", {cls: "muted", text: ev.length + " event(s)" + (ev.length > 2000 ? "; the first 2,000 are shown" : "")}));
    box.appendChild(table(["seq", "~kind", "subrun", "round", "~worker", "t (s)", "~fields"], ev.slice(0, 2000).map(function (e) {
      var rest = {};
      for (var k in e) if (["seq", "kind", "subrun", "round", "worker", "t"].indexOf(k) < 0) rest[k] = e[k];
      var s = JSON.stringify(rest);
      return el("tr", null, [td(e.seq), td(e.kind, "t"), td(e.subrun), td(e.round), td(e.worker || "", "t"), td(fmt(e.t, 1)), td(s.length > 400 ? s.slice(0, 400) + "…" : s, "text")]);
    })));
  }
  function renderSearch() {
    var box = clear($("search-results"));
    if (!S.run || !S.q) return;
    var hits = S.run.utter.filter(function (u) { return passes(u) && matches(u.text); });
    var inner = el("div", {cls: "box"}, [el("strong", {text: hits.length + " match(es) for “" + S.q + "” in this run" + (hits.length > 200 ? " (first 200)" : "") + " — click one to open its round"})]);
    hits.slice(0, 200).forEach(function (u) {
      inner.appendChild(el("div", {cls: "result", "data-seq": u.e.seq, onclick: function () { goRound(u.subrun, u.round); }}, [
        el("span", {cls: "muted", text: "S" + u.subrun + " R" + u.round + " · " + u.src + " · "}), chip(u.worker),
        u.to ? " → " : "", u.to ? chip(u.to) : null, " ", markText(u.text)]));
    });
    box.appendChild(inner);
  }
  function renderContent() {
    var box = clear($("content"));
    renderSearch();
    if (!S.run) return;
    ({rounds: renderRound, timeline: renderTimeline, memory: renderMemory, llm: renderLlm, events: renderEvents}[S.tab] || renderRound)(box);
  }

  // --- selection -------------------------------------------------------------------------------
  function selectRun(n, keep) {
    S.cur = n;
    var entry = S.index.runs[n];
    [].forEach.call(document.querySelectorAll("#run-list button"), function (b) {
      b.classList.toggle("sel", Number(b.getAttribute("data-n")) === n);
    });
    if (!entry) return;
    if (entry.status === "unreadable") {
      S.run = null;
      clear($("run-head")).appendChild(el("div", {cls: "box bad"}, [el("h2", {text: entry.path}),
        el("p", {text: "This run cannot be shown: " + entry.error})]));
      clear($("tabs")); clear($("content")); clear($("search-results"));
      writeHash();
      return;
    }
    clear($("content")).appendChild(el("p", {cls: "muted", text: "Loading " + entry.id + "…"}));
    loadRun(n).then(function (data) {
      if (S.cur !== n) return;
      S.run = data.prepared || (data.prepared = prepare(data));
      if (!keep) { S.subrun = null; S.round = null; }
      fillFilters(); renderHead(); renderTabs(); renderContent(); writeHash();
    }).catch(function (err) {
      clear($("content")).appendChild(el("p", {cls: "bad", text: String(err.message || err)}));
    });
  }

  function start() {
    var h = readHash();
    $("root-name").textContent = S.index.root + " · " + S.index.runs.length + " run(s) · built " + S.index.built;
    var conds = {};
    S.index.runs.forEach(function (r) { conds[r.condition] = 1; });
    Object.keys(conds).sort().forEach(function (c) { $("cond-filter").appendChild(el("option", {value: c, text: c})); });
    if (h.cond && conds[h.cond]) { S.cond = h.cond; $("cond-filter").value = h.cond; }
    if (h.tab) S.tab = h.tab;
    $("cond-filter").addEventListener("change", function () { S.cond = this.value; renderRunList(); writeHash(); });
    $("run-filter").addEventListener("input", function () { S.runFilter = this.value; renderRunList(); });
    $("f-worker").addEventListener("change", function () { S.worker = this.value; renderContent(); });
    $("f-channel").addEventListener("change", function () { S.channel = this.value; renderContent(); });
    $("f-label").addEventListener("change", function () { S.label = this.value; renderContent(); });
    var timer = null;
    $("search").addEventListener("input", function () {
      var v = this.value.trim();
      clearTimeout(timer);
      timer = setTimeout(function () { S.q = v.length >= 2 ? v : ""; renderContent(); }, 120);
    });
    renderNotices();
    renderRunList();
    var first = null;
    if (h.run != null && S.index.runs[Number(h.run)]) first = Number(h.run);
    if (first == null) {
      for (var i = 0; i < S.index.runs.length; i++) {
        var r = S.index.runs[i];
        if (r.status !== "unreadable" && (!S.cond || r.condition === S.cond)) { first = i; break; }
      }
    }
    if (first == null) {
      clear($("content")).appendChild(el("p", {cls: "muted", text: S.index.runs.length ? "No run can be shown." : "No runs to show."}));
      document.body.setAttribute("data-ready", "1");
      return;
    }
    if (h.s != null) S.subrun = Number(h.s);
    if (h.r != null) S.round = Number(h.r);
    selectRun(first, true);
    var done = function () { document.body.setAttribute("data-ready", "1"); };
    loadRun(first).then(done, done);
  }

  return {
    index: function (idx) { S.index = idx; start(); },
    run: function (n, data) {
      S.runs[n] = data;
      if (S.pending[n]) { S.pending[n].resolve(data); delete S.pending[n]; }
    },
    indexMissing: function () {
      clear($("content")).appendChild(el("p", {cls: "bad", text: "data/index.js is missing next to this page: rebuild it with mbb view."}));
    },
    _state: S
  };
})();
