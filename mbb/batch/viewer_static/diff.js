/* mbb viewer: the run diff. Two runs side by side (the same seed under two conditions, or two
 * models): their measures, then per subrun the outcomes, the two resource timelines on one time
 * scale, every round's schedule and bids aligned by round, and one round's declarations,
 * conversation, ballots, schedule and windows next to each other. Reached from the runs table
 * (select two rows) or by a link: #diff=<run path>&with=<run path>&s=<subrun>&r=<round>. */
"use strict";
(function (M) {
  var L = M._lib, S = M._state, el = L.el, str = L.str, arr = L.arr, isNum = L.isNum, td = L.td;
  var D = {a: null, b: null, A: null, B: null, va: null, vb: null, subrun: null, round: null, t0: 0, lastMs: null};

  function ready() { return D.a != null && D.b != null && S.byN.has(D.a) && S.byN.has(D.b); }
  function open(a, b, at) {
    if (a != null && b != null) {
      if (a !== D.a || b !== D.b) { D.subrun = null; D.round = null; }
      D.a = a; D.b = b;
    }
    if (at) { D.subrun = at.subrun; D.round = at.round; }
    if (!ready()) return;
    L.show("diff");
    load();
  }
  function load() {
    var box = L.clear(L.$("diff-view"));
    box.removeAttribute("data-ready");
    D.t0 = performance.now();
    var ea = S.byN.get(D.a), eb = S.byN.get(D.b);
    box.appendChild(el("p", {cls: "muted", text: "Loading " + str(ea.id) + " and " + str(eb.id) + "…"}));
    Promise.all([L.prepared(D.a), L.prepared(D.b)]).then(function (rs) {
      D.A = rs[0]; D.B = rs[1]; D.va = ea.v; D.vb = eb.v;
      if (S.view !== "diff") return;
      render();
    }).catch(function (err) {
      L.clear(box).appendChild(el("p", {cls: "bad", text: "Cannot diff these runs: " + String(err.message || err)}));
      document.body.setAttribute("data-ready", "1");
    });
  }
  // The two runs' measures as three rows (A, B, B - A), one column per measure; differences marked.
  // A measure reads as the runs table shows it (L.fmtMeasure: one formatter for both views).
  function measureTable(A, B) {
    var a = A.entry, b = B.entry;
    var valid = function (e) { return e.valid === false ? "invalid" : "valid"; };
    var pair = function (label, key) { return [label, a[key], b[key], key]; };  // key: a number, formatted as a measure
    var cols = [
      ["run", a.id, b.id], ["condition", a.condition, b.condition], ["model", a.model, b.model], pair("seed", "seed"),
      ["status", a.status, b.status], ["valid", valid(a), valid(b)],
      pair("score", "score"), pair("completion", "completion"), pair("deadline misses", "deadline_miss"),
      pair("credits spent", "credits"), pair("invalid actions", "invalid_actions"),
      pair("LLM calls", "llm_calls"), pair("failed calls", "failed_calls"),
      pair("repaired calls", "repaired_calls"), pair("LLM cost ($)", "cost_usd"), pair("tokens", "tokens"),
      pair("rounds", "rounds")
    ];
    var show = function (key, v) { return key != null ? L.fmtMeasure(key, v) : str(v); };
    var delta = function (c) {
      var key = c[3], x = c[1], y = c[2];
      if (key == null) return str(x) === str(y) ? "" : "≠";
      if (L.measureNA(key, a) || L.measureNA(key, b)) return "";  // nothing to subtract
      if (!isNum(x) || !isNum(y)) return "";
      return L.fmtMeasureDelta(key, y - x);
    };
    var t = el("table", {id: "diff-measures"}, [el("tr", null, [el("th", {cls: "t"})].concat(cols.map(function (c) {
      return el("th", {cls: c[3] == null ? "t" : null, text: c[0]});
    })))]);
    [["A", 1, "side a"], ["B", 2, "side b"]].forEach(function (row) {
      t.appendChild(el("tr", {"data-side": row[0]}, [td(el("span", {cls: row[2], text: row[0]}), "t")].concat(cols.map(function (c) {
        var e = row[1] === 1 ? a : b, na = c[3] != null ? L.measureNA(c[3], e) : null;
        var cell = na ? el("td", {cls: "na", title: na, text: L.NA}) : td(show(c[3], c[row[1]]), c[3] == null ? "t" : null);
        if (c[0] === "valid" && c[row[1]] === "invalid") { cell.className += " bad"; cell.title = str((row[1] === 1 ? a : b).invalid_reason); }
        return cell;
      }))));
    });
    t.appendChild(el("tr", {"data-side": "delta"}, [td("B − A", "t")].concat(cols.map(function (c) {
      var dt = delta(c);
      return el("td", {cls: (c[3] == null ? "t" : "") + (dt && dt !== "0" ? " differs" : ""), text: dt});
    }))));
    return t;
  }
  // Rows matched by their first cell (the worker); a cell whose text differs from the other
  // side's is marked on both (`td.differs`), with the other side's value as its title.
  function markDiffering(ta, tb) {
    var rowsOf = function (t) {
      var m = new Map();
      [].forEach.call(t.querySelectorAll("tr"), function (tr) {
        var cells = tr.querySelectorAll("td");
        if (cells.length) m.set(cells[0].textContent, cells);
      });
      return m;
    };
    var ra = rowsOf(ta), rb = rowsOf(tb);
    ra.forEach(function (ca, key) {
      var cb = rb.get(key);
      if (!cb) return;
      for (var j = 1; j < Math.min(ca.length, cb.length); j++) {
        if (ca[j].textContent === cb[j].textContent) continue;
        ca[j].classList.add("differs"); cb[j].classList.add("differs");
        ca[j].title = "B: " + cb[j].textContent; cb[j].title = "A: " + ca[j].textContent;
      }
    });
  }
  function orderText(rd) {
    if (!rd || !rd.schedule) return "";
    var al = arr(rd.schedule.allocations);
    return arr(rd.schedule.order).map(function (w, i) { return str(w) + " " + L.fmt(al[i]) + "s"; }).join(" > ");
  }
  function bidsText(rd) {
    if (!rd) return "";
    var last = new Map();
    rd.decl.forEach(function (e) { last.set(e.worker, e.bid); });  // after revisions
    return Array.from(last.keys()).sort().map(function (w) { return str(w) + " " + L.fmt(last.get(w)); }).join(", ");
  }
  function render() {
    var A = D.A, B = D.B, box = L.clear(L.$("diff-view"));
    var subs = Array.from(new Set(A.subruns.concat(B.subruns))).sort(function (x, y) { return x - y; });
    if (subs.indexOf(D.subrun) < 0) D.subrun = subs.length ? subs[0] : null;
    var sa = A.bySub.get(D.subrun), sb = B.bySub.get(D.subrun);
    var rounds = Array.from(new Set((sa ? sa.rounds : []).concat(sb ? sb.rounds : []))).sort(function (x, y) { return x - y; });
    if (rounds.indexOf(D.round) < 0) D.round = rounds.length ? rounds[0] : null;

    box.appendChild(el("h2", {id: "diff-title"}, ["Diff: ", el("span", {cls: "side a", text: "A " + str(A.entry.id)}), " ⇄ ",
      el("span", {cls: "side b", text: "B " + str(B.entry.id)})]));
    box.appendChild(el("div", {cls: "diff-actions"}, [
      el("button", {text: "swap A and B", onclick: function () { open(D.b, D.a, {subrun: D.subrun, round: D.round}); }}),
      el("button", {text: "open A", onclick: function () { L.selectRun(D.a, {subrun: D.subrun, round: D.round, tab: "rounds"}); }}),
      el("button", {text: "open B", onclick: function () { L.selectRun(D.b, {subrun: D.subrun, round: D.round, tab: "rounds"}); }}),
      el("button", {text: "back to the runs table", onclick: function () { L.goView("runs"); }})]));
    var note = el("div", {cls: "scroll-note", text: "more measures: scroll →", hidden: true});
    var mbox = el("div", {cls: "scroll-box", id: "diff-measures-box"}, [el("div", {cls: "diff-measures"}, [measureTable(A, B)])]);
    box.appendChild(note);
    box.appendChild(mbox);
    L.scrollCue(mbox, note);
    if (A.entry.seed !== B.entry.seed) box.appendChild(el("p", {cls: "warn", text: "The two runs have different seeds: their tasks, deadlines and seating differ, not only their condition or model."}));

    var nav = el("div", {cls: "round-nav"}, [el("strong", {text: "subrun"})]);
    subs.forEach(function (s) {
      nav.appendChild(el("button", {cls: s === D.subrun ? "sel" : null, "data-subrun": s, text: String(s), onclick: function () { go(s, null); }}));
    });
    box.appendChild(nav);
    if (D.subrun == null) { box.appendChild(el("p", {cls: "muted", text: "Neither run has subruns."})); done(); return; }

    // outcomes of the subrun, side by side, the cells that differ marked on both sides
    var grid = el("div", {cls: "diff-grid"}), outcomeTables = [];
    [[A, sa, "A"], [B, sb, "B"]].forEach(function (x) {
      var col = el("div", {cls: "diff-col"}, [el("h4", {text: x[2] + " · " + str(x[0].entry.id) + " · subrun " + D.subrun +
        (x[1] && x[1].ended ? " (" + L.fmt(x[1].ended.rounds) + " rounds: " + str(x[1].ended.reason) + ")" : "")})]);
      var t = x[1] && x[1].start ? L.subrunTable(x[1], x[0]) : null;
      if (t) outcomeTables.push(t);
      col.appendChild(t || el("p", {cls: "muted", text: "No such subrun."}));
      grid.appendChild(col);
    });
    if (outcomeTables.length === 2) markDiffering(outcomeTables[0], outcomeTables[1]);
    box.appendChild(grid);

    // both timelines on one time scale
    var end = Math.max(L.subrunEnd(A, D.subrun), L.subrunEnd(B, D.subrun)) || 1;
    var width = Math.max(480, Math.min(1200, (box.clientWidth || 1000) - 40));
    box.appendChild(el("h4", {text: "Resource timelines of subrun " + D.subrun + " on one time scale (click a window to open its round)"}));
    [[A, "A"], [B, "B"]].forEach(function (x) {
      box.appendChild(el("div", {cls: "muted", text: x[1] + " · " + str(x[0].entry.id)}));
      box.appendChild(L.timelineSvg(x[0], D.subrun, {compact: true, end: end, width: width, current: D.round, onclick: function (n) { go(D.subrun, n); }}));
    });

    // every round, aligned
    box.appendChild(el("h4", {text: "Rounds of subrun " + D.subrun + ", aligned (schedule after the vote; bids after revisions); click a row to compare the round"}));
    var rt = L.table(["round", "~A schedule", "~A bids", "~B schedule", "~B bids", "~"], rounds.map(function (n) {
      var ra = sa ? sa.byRound.get(n) : null, rb = sb ? sb.byRound.get(n) : null;
      var oa = orderText(ra), ob = orderText(rb), same = oa === ob;
      var tr = el("tr", {cls: "pick" + (n === D.round ? " sel" : "") + (same ? "" : " differs"), "data-round": n}, [td(n),
        td(ra ? oa || "—" : "(no round)", "t"), td(bidsText(ra), "t"), td(rb ? ob || "—" : "(no round)", "t"), td(bidsText(rb), "t"),
        td(same ? "same schedule" : "differs", "t")]);
      tr.addEventListener("click", function () { go(D.subrun, n); });
      return tr;
    }));
    rt.id = "diff-rounds";
    box.appendChild(rt);

    // the round, side by side
    if (D.round != null) {
      var ra = sa ? sa.byRound.get(D.round) : null, rb = sb ? sb.byRound.get(D.round) : null;
      box.appendChild(el("h3", {id: "diff-round-title", text: "Subrun " + D.subrun + " · round " + D.round}));
      var ws = Array.from(new Set(A.workerIds.concat(B.workerIds)));
      var bid = function (rd, w) { var x = rd ? rd.decl.filter(function (e) { return e.worker === w; }) : []; return x.length ? x[x.length - 1] : null; };
      box.appendChild(L.table(["~worker", "A bid", "A duration (s)", "B bid", "B duration (s)", "B − A bid"], ws.map(function (w) {
        var x = bid(ra, w), y = bid(rb, w);
        var d = x && y && isNum(x.bid) && isNum(y.bid) ? y.bid - x.bid : null;
        return el("tr", {cls: d ? "differs" : null}, [td(L.chip(w, A), "t"), td(x ? x.bid : ""), td(x ? x.duration : ""), td(y ? y.bid : ""),
          td(y ? y.duration : ""), td(d == null ? "" : (d > 0 ? "+" : "") + d)]);
      })));
      var g2 = el("div", {cls: "diff-grid", id: "diff-round"});
      [[A, ra, "A"], [B, rb, "B"]].forEach(function (x) {
        var col = el("div", {cls: "diff-col", "data-side": x[2]}, [el("h4", {cls: "side-title", text: x[2] + " · " + str(x[0].entry.id) +
          (x[1] && x[1].candidates.length ? " · queue: " + x[1].candidates.join(", ") : "")})]);
        if (!x[1]) { col.appendChild(el("p", {cls: "muted", text: "This run has no round " + D.round + " in subrun " + D.subrun + "."})); g2.appendChild(col); return; }
        col.appendChild(L.scheduleTable(x[1], x[0]));
        col.appendChild(L.declTable(x[1], x[0], false));
        col.appendChild(L.msgList(x[1], x[0], false));
        col.appendChild(L.ballotTable(x[1], x[0], false));
        col.appendChild(L.windowTable(x[1], x[0]));
        var c = L.commandTable(x[1], x[0], ""); if (c) col.appendChild(c);
        var inv = L.invalidTable(x[1], x[0]); if (inv) col.appendChild(inv);
        g2.appendChild(col);
      });
      box.appendChild(g2);
    }
    done();
  }
  function done() {
    var box = L.$("diff-view");
    D.lastMs = performance.now() - D.t0;
    box.setAttribute("data-ready", D.a + "," + D.b);
    $toDiff();
    L.writeHash();
    document.body.setAttribute("data-ready", "1");
  }
  function $toDiff() { L.$("to-diff").disabled = false; }
  function go(s, r) {
    D.subrun = s; D.round = r;
    D.t0 = performance.now();
    render();
  }
  function hashParts() {
    var ea = S.byN.get(D.a), eb = S.byN.get(D.b), p = [];
    if (!ea || !eb) return p;
    p.push("diff=" + encodeURIComponent(str(ea.path)).replace(/%2F/g, "/"), "with=" + encodeURIComponent(str(eb.path)).replace(/%2F/g, "/"));
    if (D.subrun != null) p.push("s=" + D.subrun);
    if (D.round != null) p.push("r=" + D.round);
    return p;
  }
  function route(h) {
    var a = L.entryOf(h.diff), b = L.entryOf(h["with"]);
    if (!a || !b) return false;
    open(a.n, b.n, {subrun: h.s != null ? Number(h.s) : null, round: h.r != null ? Number(h.r) : null});
    return true;
  }
  function refresh() {
    if (!ready()) return;
    if (S.byN.get(D.a).v !== D.va || S.byN.get(D.b).v !== D.vb) load();
  }
  M._views.diff = {open: function (a, b) { if (a == null) open(null, null); else open(a, b); }, ready: ready, route: route,
    hashParts: hashParts, refresh: refresh, state: D};
})(MBB);
