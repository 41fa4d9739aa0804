/* mbb viewer: the runs table (the landing view: one row per run, every per-run measure and the
 * user's columns; sort by any column, filter per column and over the text of the row, select two
 * rows to diff them) and the search over the text of every run (data/text/<k>.js, loaded on the
 * first such search). */
"use strict";
(function (M) {
  var L = M._lib, S = M._state, el = L.el, str = L.str, arr = L.arr, isNum = L.isNum, isInt = L.isInt;
  var T = {sort: "id", desc: false, filters: new Map(), free: "", selected: [], only: null, onlyQ: "", onlyPending: null,
    rows: new Map(), cols: null, colsKey: "", pending: false, lastMs: null};
  var SRC = {declaration: "declaration", "public": "public post", "private": "private message", ballot: "ballot", memory: "memory", command: "command"};

  // --- columns ----------------------------------------------------------------------------------
  function measure(key) { return function (v) { return L.fmtMeasure(key, v); }; }  // as the diff and the story show it
  var BUILTIN = [
    {key: "id", label: "run", kind: "text"},
    {key: "condition", label: "condition", kind: "text", pick: true},
    {key: "model", label: "model", kind: "text", pick: true},
    {key: "seed", label: "seed", kind: "num", fmt: measure("seed")},
    {key: "status", label: "status", kind: "text", pick: true},
    {key: "valid", label: "valid", kind: "text", pick: true, get: function (e) { return e.valid === false ? "invalid" : e.valid === true ? "valid" : ""; },
      title: "invalid: more than the threshold of its LLM calls failed or needed a repair (or its meta.json says so); hover a cell for the reason"},
    {key: "score", pct: true, label: "score", kind: "num", fmt: measure("score"), title: "mean evaluation score (share of hidden tests passed) over worker-subruns"},
    {key: "completion", pct: true, label: "completion", kind: "num", fmt: measure("completion"), title: "share of worker-subruns completed"},
    {key: "deadline_miss", pct: true, label: "deadline misses", kind: "num", fmt: measure("deadline_miss"), title: "share of worker-subruns terminated at their deadline"},
    {key: "credits", label: "credits spent", kind: "num", fmt: measure("credits"), title: "credits paid to the operator by all workers of the run"},
    {key: "invalid_actions", label: "invalid actions", kind: "num", fmt: measure("invalid_actions"), title: "actions that broke a rule and were repaired (invalid_action events)"},
    {key: "llm_calls", label: "LLM calls", kind: "num", fmt: measure("llm_calls")},
    {key: "failed_calls", label: "failed calls", kind: "num", fmt: measure("failed_calls"), title: "LLM calls that ended in an error"},
    {key: "repaired_calls", label: "repaired calls", kind: "num", fmt: measure("repaired_calls"), title: "LLM calls whose answer needed a repair round-trip"},
    {key: "bad_call_share", pct: true, label: "failed or repaired", kind: "num", fmt: measure("bad_call_share"), title: "share of LLM calls that failed or needed a repair"},
    {key: "cost_usd", label: "LLM cost ($)", kind: "num", fmt: measure("cost_usd")},
    {key: "tokens", label: "tokens", kind: "num", fmt: measure("tokens"), title: "prompt + completion tokens of its LLM calls"}
  ];
  function columns() {
    var user = arr(S.index.columns).filter(function (c) { return L.isObj(c) && L.isStr(c.name); });
    var key = JSON.stringify(user);
    if (T.cols && key === T.colsKey) return T.cols;
    T.colsKey = key;
    T.cols = BUILTIN.concat(user.map(function (c) {
      var num = c.kind === "number";
      return {key: "col:" + c.name, label: c.name, kind: num ? "num" : "text", user: true, title: "from " + str(c.file),
        get: function (e) { return L.own(e.cols, c.name); }, fmt: num ? function (v) { return isNum(v) ? String(+v.toPrecision(6)) : str(v); } : null};
    }));
    T.rows.clear();
    return T.cols;
  }
  function raw(col, e) { return col.get ? col.get(e) : e[col.key]; }
  function shown(col, v) { return v == null ? "" : (col.fmt ? col.fmt(v) : str(v)); }

  // --- rows (built once per run and version, reordered by sort and filter) ---------------------------
  function rowOf(e, cols) {  // a run's values for sorting and filtering (its <tr> is made when first drawn)
    var got = T.rows.get(e.n);
    if (got && got.v === e.v && got.e.path === e.path && got.e.status === e.status) { got.e = e; return got; }
    var raws = cols.map(function (c) { return raw(c, e); });
    var na = cols.map(function (c) { return c.user ? null : L.measureNA(c.key, e); });  // why it does not apply, or null
    var vals = raws.map(function (v, i) { return na[i] ? null : cols[i].kind === "num" ? (isNum(v) ? v : null) : (v == null ? "" : str(v)); });
    // a number column's text where its value is not a number ("unknown (2 calls without usage)")
    var shownText = cols.map(function (c, i) {
      return na[i] ? L.NA : c.kind === "num" && vals[i] == null && L.isStr(raws[i]) ? raws[i] : shown(c, vals[i]); });
    var texts = shownText.map(function (t) { return t.toLowerCase(); });
    var row = {n: e.n, v: e.v, e: e, tr: null, box: null, vals: vals, shown: shownText, texts: texts, na: na,
      hay: texts.join(" ") + " " + str(e.path).toLowerCase() + " " + str(e.invalid_reason).toLowerCase()};
    T.rows.set(e.n, row);
    return row;
  }
  function trOf(row, cols) {
    if (row.tr) return row.tr;
    var e = row.e;
    var tr = el("tr", {"data-n": e.n, cls: (e.valid === false ? "invalid " : "") + "st-" + str(e.status)});
    var box = el("input", {type: "checkbox", "aria-label": "select " + str(e.id)});
    box.checked = T.selected.indexOf(e.n) >= 0;
    box.addEventListener("change", function () { toggle(e.n, box.checked); });
    tr.appendChild(el("td", {cls: "sel"}, [box]));
    cols.forEach(function (c, i) {
      var text = row.shown[i];
      var td;
      if (c.key === "id") {
        td = el("td", {cls: "t", title: str(e.path)}, [el("a", {href: "#run=" + encodeURIComponent(str(e.path)), text: text,
          onclick: function (ev) { ev.preventDefault(); L.selectRun(e.n); }})]);
        if (arr(e.problems).length) td.insertBefore(el("span", {cls: "warn", title: arr(e.problems).map(str).join("\n"), text: "⚠ "}), td.firstChild);
      } else {
        td = el("td", {cls: c.kind === "num" ? null : "t", text: text});
        if (row.na[i]) { td.className = "na"; td.title = row.na[i]; }
        else if (c.key === "valid" && e.valid === false) { td.className = "t bad"; td.title = str(e.invalid_reason); }
        else if (c.key === "status" && e.status === "unreadable") td.title = str(e.error);
        else if (c.kind !== "num" && text.length > 18) td.title = text;
      }
      tr.appendChild(td);
    });
    row.tr = tr; row.box = box;
    return tr;
  }

  // --- filters ----------------------------------------------------------------------------------
  function numTest(f, isPct) {  // ">0.5", "<= 10", "!=0", "3..5", "50%" on a share column
    var m = /^(<=|>=|<|>|=|!=)?\s*(-?\d*\.?\d+)\s*(%?)\s*(?:\.\.\s*(-?\d*\.?\d+)\s*%?)?$/.exec(f);
    if (!m) return null;
    var scale = isPct || m[3] ? 0.01 : 1;  // a share shown as a percentage is filtered in percent
    var a = Number(m[2]) * scale, b = m[4] != null ? Number(m[4]) * scale : null;
    var op = m[1] || (b != null ? ".." : null);
    if (!op) return null;  // a bare number is matched as text (what the cell shows)
    return function (v) {
      if (v == null) return false;
      switch (op) {
        case "<": return v < a; case "<=": return v <= a; case ">": return v > a; case ">=": return v >= a;
        case "=": return v === a; case "!=": return v !== a; default: return v >= a && v <= b;
      }
    };
  }
  function tests(cols) {
    var out = [];
    cols.forEach(function (c, i) {
      var f = (T.filters.get(c.key) || "").trim();
      if (!f) return;
      if (c.kind === "num") {
        var t = numTest(f, !!c.pct);
        if (t) {
          var test = function (row) { return t(row.vals[i]); };
          test.col = i;  // a row without a number here is left out, and counted (draw)
          out.push(test); return;
        }
      }
      var low = f.toLowerCase();
      if (c.pick) { out.push(function (row) { return row.vals[i].toLowerCase() === low; }); return; }
      if (low.charAt(0) === "!" && low.length > 1) { var no = low.slice(1); out.push(function (row) { return row.texts[i].indexOf(no) < 0; }); return; }
      if (low.charAt(0) === "=") { var eq = low.slice(1); out.push(function (row) { return row.texts[i] === eq; }); return; }
      out.push(function (row) { return row.texts[i].indexOf(low) >= 0; });
    });
    var free = T.free.trim().toLowerCase();
    if (free) free.split(/\s+/).forEach(function (w) { out.push(function (row) { return row.hay.indexOf(w) >= 0; }); });
    if (T.only) { var only = T.only; out.push(function (row) { return only.has(row.n); }); }
    return out;
  }

  // --- drawing ------------------------------------------------------------------------------------
  function head(cols) {
    var thead = L.clear(document.querySelector("#runs-table thead"));
    var tr = el("tr", null, [el("th", {cls: "sel", title: "select two runs to diff them"}, ["⇄"])]);
    var fr = el("tr", {cls: "filters"}, [el("th", {cls: "sel"})]);
    cols.forEach(function (c) {
      // the whole header cell sorts, not only its label
      tr.appendChild(el("th", {cls: (c.kind === "num" ? "" : "t") + (c.user ? " user" : ""), "data-col": c.key, title: c.title || null,
        onclick: function (ev) { if (ev.target === ev.currentTarget) sortBy(c.key); }}, [
        el("button", {text: c.label, onclick: function () { sortBy(c.key); }})]));
      var input;
      if (c.pick) {
        var seen = new Set();
        S.index.runs.forEach(function (e) { var v = raw(c, e); if (v != null && v !== "") seen.add(str(v)); });
        input = el("select", {"data-col": c.key, "aria-label": "filter " + c.label}, [el("option", {value: "", text: "all"})]);
        Array.from(seen).sort().forEach(function (v) { input.appendChild(el("option", {value: v, text: v})); });
        input.value = T.filters.get(c.key) || "";
        input.addEventListener("change", function () { setFilter(c.key, input.value); });
      } else {
        // a share is filtered in percent, as it is shown: ">50" keeps runs over half
        input = el("input", {type: "search", "data-col": c.key, "aria-label": "filter " + c.label, size: 4,
          placeholder: c.pct ? ">50" : c.kind === "num" ? ">0.5" : "filter",
          title: c.pct ? "in percent, as shown: >50, <=10, 20..40" : c.kind === "num" ? "a number or a range: >0.5, <=10, 2..4" : "text the cell holds; !text: does not hold; =text: is"});
        input.value = T.filters.get(c.key) || "";
        input.addEventListener("input", function () { setFilter(c.key, input.value); });
      }
      fr.appendChild(el("th", {cls: c.kind === "num" ? "" : "t"}, [input]));
    });
    thead.appendChild(tr);
    thead.appendChild(fr);
    T.widths = false;
    arrows();
  }
  function updatePicks(cols) {  // the value lists of the pick filters (a new condition appears)
    cols.forEach(function (c) {
      if (!c.pick) return;
      var sel = document.querySelector('#runs-table select[data-col="' + c.key + '"]');
      if (!sel) return;
      var seen = new Set();
      S.index.runs.forEach(function (e) { var v = raw(c, e); if (v != null && v !== "") seen.add(str(v)); });
      var have = [].map.call(sel.options, function (o) { return o.value; }).slice(1);
      var want = Array.from(seen).sort();
      if (have.join("\u0000") === want.join("\u0000")) return;
      var value = sel.value;
      while (sel.options.length > 1) sel.remove(1);
      want.forEach(function (v) { sel.appendChild(el("option", {value: v, text: v})); });
      sel.value = value;
    });
  }
  function arrows() {
    [].forEach.call(document.querySelectorAll("#runs-table thead th[data-col] button"), function (b) {
      var key = b.parentNode.getAttribute("data-col"), c = T.cols.filter(function (x) { return x.key === key; })[0];
      b.textContent = c.label + (T.sort === key ? (T.desc ? " ▼" : " ▲") : "");
    });
  }
  // Column widths, fixed once from the widest cell of every column (the table then lays out in
  // constant time whatever rows are drawn, and scrolling never makes columns jump).
  function lockWidths(cols, all) {
    var tbl = L.$("runs-table"), body = document.querySelector("#runs-table tbody");
    tbl.style.tableLayout = "auto"; tbl.style.width = "auto";
    [].forEach.call(document.querySelectorAll("#runs-table thead tr:first-child th"), function (th) { th.style.width = ""; });
    var widest = new Set();
    cols.forEach(function (c, i) {
      var best = null, len = -1;
      all.forEach(function (r) { if (r.shown[i].length > len) { len = r.shown[i].length; best = r; } });
      if (best) widest.add(best);
    });
    body.textContent = "";
    widest.forEach(function (r) { body.appendChild(trOf(r, cols)); });
    var ths = document.querySelectorAll("#runs-table thead tr:first-child th"), total = 0;
    var ws = [].map.call(ths, function (th) { return Math.ceil(th.getBoundingClientRect().width) + 2; });
    [].forEach.call(ths, function (th, i) { th.style.width = ws[i] + "px"; total += ws[i]; });
    tbl.style.width = total + "px";
    tbl.style.tableLayout = "fixed";
    T.widths = true;
    T.lockedFor = all.length;
  }
  var ROW_H = 25, BUFFER = 30;
  function windowRows(force) {  // draw the rows in view (and some around), spacers for the rest
    var wrap = L.$("table-wrap"), list = T.list || [], cols = T.cols;
    var top = wrap.scrollTop, h = wrap.clientHeight || 800;
    var start = Math.max(0, Math.floor(top / ROW_H) - BUFFER);
    var end = Math.min(list.length, Math.ceil((top + h) / ROW_H) + BUFFER);
    if (!force && start === T.from && end === T.to) return;
    T.from = start; T.to = end;
    var body = document.querySelector("#runs-table tbody");
    var frag = document.createDocumentFragment();
    var span = cols.length + 1;
    if (start > 0) frag.appendChild(el("tr", {cls: "spacer"}, [el("td", {colspan: span, style: "height:" + start * ROW_H + "px"})]));
    for (var i = start; i < end; i++) frag.appendChild(trOf(list[i], cols));
    if (end < list.length) frag.appendChild(el("tr", {cls: "spacer"}, [el("td", {colspan: span, style: "height:" + (list.length - end) * ROW_H + "px"})]));
    body.textContent = "";
    body.appendChild(frag);
    if (!T.rowH && end > start) {  // the drawn height of a row, once (fonts differ)
      T.rowH = list[start].tr.getBoundingClientRect().height;
      if (T.rowH > 0 && Math.abs(T.rowH - ROW_H) > 0.5) { ROW_H = T.rowH; windowRows(true); }
    }
  }
  var scrolling = false;
  function onScroll() {
    if (scrolling) return;
    scrolling = true;
    requestAnimationFrame(function () { scrolling = false; windowRows(false); });
  }
  var B = null;  // the bar's elements, made once (the filter box keeps its focus while typing)
  function bar(count, total) {
    if (!B) {
      var b = L.clear(L.$("table-bar"));
      B = {free: el("input", {id: "table-find", type: "search", placeholder: "filter rows by any text (run, condition, model, status, reason)", "aria-label": "filter rows"}),
        count: el("span", {id: "table-count"}),
        clear: el("button", {id: "clear-filters", text: "clear filters", onclick: function () {
          T.filters.clear(); T.free = ""; T.only = null; T.onlyQ = ""; B.free.value = ""; clearInputs(); draw(); }}),
        cmp: el("button", {id: "compare", onclick: function () {
          var sel = selectedEntries();
          if (sel.length === 2 && M._views.diff) M._views.diff.open(sel[0].n, sel[1].n);
        }}),
        unsel: el("button", {text: "clear selection", onclick: function () {
          T.selected = []; T.rows.forEach(function (r) { if (r.box) r.box.checked = false; }); bar(T.list ? T.list.length : 0, S.index.runs.length); }}),
        invalid: el("span", {cls: "bad"}),
        scroll: el("span", {id: "scroll-note", cls: "scroll-note", text: "more columns: scroll →", title: "the table is wider than the window: scroll it sideways (shift + wheel, or the scroll bar)", hidden: true})};
      B.free.addEventListener("input", function () { T.free = B.free.value; schedule(); });
      [B.free, B.count, B.clear, B.cmp, B.unsel, B.invalid, B.scroll].forEach(function (x) { b.appendChild(x); });
    }
    if (document.activeElement !== B.free) B.free.value = T.free;
    B.count.textContent = count + " of " + total + " run(s)" + (T.only ? " · only runs matching “" + T.onlyQ + "”" : "") +
      (T.noNumber ? " · " + T.noNumber + " left out whose filtered value is not a number (e.g. ≥ X + unknown)" : "");
    B.clear.hidden = !(T.free || T.only || Array.from(T.filters.values()).some(Boolean));
    var sel = selectedEntries();
    B.cmp.textContent = sel.length === 2 ? "Diff " + str(sel[0].id) + " ⇄ " + str(sel[1].id) : "select two runs (⇄) to diff them";
    B.cmp.disabled = sel.length !== 2;
    B.unsel.hidden = !sel.length;
    var inv = S.index.runs.filter(function (e) { return e.valid === false; }).length;
    B.invalid.textContent = inv ? inv + " invalid run(s) (threshold " + L.pct(S.index.invalid_share, 0) + " failed or repaired LLM calls)" : "";
  }
  function selectedEntries() { return T.selected.map(function (n) { return S.byN.get(n); }).filter(Boolean); }
  function draw(keepScroll) {
    var t0 = performance.now();
    var cols = columns(), idx = cols.map(function (c) { return c.key; }).indexOf(T.sort);
    if (idx < 0) { T.sort = "id"; idx = 0; arrows(); }
    var ts = tests(cols);
    var all = S.index.runs.map(function (e) { return rowOf(e, cols); });
    if (!T.widths) lockWidths(cols, all);
    var noNumber = 0;  // runs left out by a number filter on a cell that holds no number
    var rows = all.filter(function (row) {
      for (var i = 0; i < ts.length; i++) {
        if (ts[i](row)) continue;
        var c = ts[i].col;  // not a "–" (does not apply): an unknown or partly known value
        if (c != null && row.vals[c] == null && !row.na[c] && row.shown[c] !== "") noNumber++;
        return false;
      }
      return true;
    });
    T.noNumber = noNumber;
    var dir = T.desc ? -1 : 1;
    rows.sort(function (a, b) {
      var x = a.vals[idx], y = b.vals[idx];
      var xn = x == null || x === "", yn = y == null || y === "";
      if (xn || yn) return xn === yn ? a.n - b.n : (xn ? 1 : -1);  // empty cells last, both ways
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.n - b.n;
    });
    T.list = rows;
    if (!keepScroll) L.$("table-wrap").scrollTop = 0;
    windowRows(true);
    bar(rows.length, S.index.runs.length);
    var tbl = L.$("runs-table");
    tbl.setAttribute("data-sort", T.sort + (T.desc ? ":desc" : ":asc"));
    tbl.setAttribute("data-rows", String(rows.length));
    if (T.cue) T.cue();
    T.lastMs = performance.now() - t0;
    if (S.view === "runs") L.writeHash();
  }
  function clearInputs() {
    [].forEach.call(document.querySelectorAll("#runs-table thead [data-col]"), function (x) { if ("value" in x && x.tagName !== "TH") x.value = ""; });
  }
  function schedule() {  // typing in a filter: draw once per frame
    if (T.pending) return;
    T.pending = true;
    requestAnimationFrame(function () { T.pending = false; draw(); });
  }
  function sortBy(key) {
    if (T.sort === key) T.desc = !T.desc; else { T.sort = key; T.desc = false; }
    arrows();
    draw();
  }
  function setFilter(key, v) { if (v) T.filters.set(key, v); else T.filters.delete(key); schedule(); }
  function toggle(n, on) {
    T.selected = T.selected.filter(function (x) { return x !== n; });
    if (on) T.selected.push(n);
    while (T.selected.length > 2) {
      var out = T.selected.shift(), r = T.rows.get(out);
      if (r && r.box) r.box.checked = false;
    }
    bar(T.list ? T.list.length : 0, S.index.runs.length);
  }
  var drawnOnce = false;
  function render() {
    if (!drawnOnce) {
      head(columns());
      drawnOnce = true;
      L.$("table-wrap").addEventListener("scroll", onScroll);
      bar(0, S.index.runs.length);  // the bar (and its scroll note) exist before the cue is set
      T.cue = L.scrollCue(L.$("table-box"), B.scroll);
    }
    draw();
  }

  // --- the search over every run's text ------------------------------------------------------------
  var loading = null;
  function loadTexts(progress) {
    var want = arr(S.index.text).filter(function (t) { return L.isObj(t) && isInt(t.k) && L.isStr(t.file); });
    var missing = want.filter(function (t) { var got = S.texts.get(t.k); return !got || got.v !== t.v; });
    if (!missing.length) return Promise.resolve(want.length);
    if (loading) return loading;
    var done = want.length - missing.length;
    progress(done, want.length);
    loading = Promise.all(missing.map(function (t) {
      var p = {};
      var pr = new Promise(function (res, rej) { p.resolve = res; p.reject = rej; });
      S.textPending.set(t.k, p);
      L.loadScript(L.versioned(t.file, t.v)).then(function () {
        done++; progress(done, want.length);
        if (S.textPending.get(t.k) === p) { S.textPending.delete(t.k); p.resolve(); }
      }, function (err) { S.textPending.delete(t.k); p.reject(err); });
      return pr;
    })).then(function () { loading = null; return want.length; }, function (err) { loading = null; throw err; });
    return loading;
  }
  function searchTexts(q) {  // n -> [[seq, subrun, round, worker, to, source, text], ...] holding q's every term
    var hits = new Map(), terms = L.searchTerms(q), total = 0;
    S.texts.forEach(function (t) {
      if (!t.low) {  // each distinct text lower-cased once per file
        var strings = arr(t.runs.strings);
        t.low = strings.map(function (x) { return str(x).toLowerCase(); });
        t.strings = strings;
        t.rows = new Map();
        var runs = L.isObj(t.runs.runs) ? t.runs.runs : {};
        Object.keys(runs).forEach(function (n) {
          t.rows.set(Number(n), arr(runs[n]).filter(function (r) { return Array.isArray(r) && isInt(r[0]) && isInt(r[6]) && r[6] < strings.length; }));
        });
      }
      var found = new Uint8Array(t.low.length), any = false;
      for (var i = 0; i < t.low.length; i++) if (L.holdsAll(t.low[i], terms)) { found[i] = 1; any = true; }
      if (!any) return;
      t.rows.forEach(function (rows, n) {
        if (!S.byN.has(n)) return;
        for (var j = 0; j < rows.length; j++) {
          var r = rows[j];
          if (!found[r[6]]) continue;
          var h = hits.get(n);
          if (!h) { h = []; hits.set(n, h); }
          h.push([r[0], r[1], r[2], r[3], r[4], r[5], t.strings[r[6]]]);
          total++;
        }
      });
    });
    return {hits: hits, total: total};
  }
  function openHit(n, r) {
    var src = r[5], s = isInt(r[1]) ? r[1] : null, rd = isInt(r[2]) ? r[2] : null;
    S.scope = "run";
    L.selectRun(n, {subrun: s, round: rd, tab: src === "memory" || rd == null ? "memory" : "rounds"}).then(L.showMark);
  }
  var generation = 0, current = null;
  function renderSearchAll(box) {
    var q = S.q, gen = ++generation;
    var inner = el("div", {cls: "box", id: "search-all"}, [el("strong", {text: "Searching every run for “" + q + "”…"})]);
    box.appendChild(inner);
    current = inner;
    loadTexts(function (done, all) {  // progress: shown in the newest results box while it waits
      if (current && !current.hasAttribute("data-runs")) {
        current.firstChild.textContent = "Searching every run for “" + S.q + "”: reading the text of runs (" + done + " of " + all + " file(s))…";
      }
    }).then(function () {
      if (gen !== generation || S.q !== q || S.scope !== "all") return;
      var res = searchTexts(q), order = [];
      res.hits.forEach(function (h, n) { order.push(n); });
      order.sort(function (a, b) { return res.hits.get(b).length - res.hits.get(a).length || a - b; });
      L.clear(inner);
      if (T.onlyPending != null) {
        if (T.onlyPending === q) { T.only = new Set(order); T.onlyQ = q; draw(); }
        T.onlyPending = null;
      }
      inner.setAttribute("data-runs", String(order.length));
      inner.appendChild(el("strong", {text: order.length ? res.total + " match(es) for " + L.querySaid(q) + " in " + order.length + " of " + S.index.runs.length + " run(s)" +
        (order.length > 50 ? " (the 50 runs with most matches listed)" : "") + " — click one to open the run at its round" :
        "No match for " + L.querySaid(q) + " in the " + S.index.runs.length + " run(s)"}));
      if (order.length) {
        inner.appendChild(el("button", {id: "only-matching", text: "show only these runs in the table", onclick: function () {
          T.only = new Set(order); T.onlyQ = q; M._lib.goView("runs"); draw(); }}));
      }
      order.slice(0, 50).forEach(function (n) {
        var e = S.byN.get(n), h = res.hits.get(n);
        var grp = el("div", {cls: "hit-run", "data-n": n}, [el("div", {cls: "hit-head"}, [el("strong", {text: str(e.id)}),
          el("span", {cls: "muted", text: " · " + str(e.condition) + " · " + str(e.model) + " · seed " + str(e.seed) + " · " + h.length + " match(es)"})])]);
        h.slice(0, 3).forEach(function (r) {
          grp.appendChild(el("div", {cls: "result", "data-n": n, "data-seq": r[0], onclick: function () { openHit(n, r); }}, [
            el("span", {cls: "muted", text: "S" + str(r[1]) + (r[2] != null ? " R" + str(r[2]) : "") + " · " + (SRC[r[5]] || str(r[5])) + " · " + str(r[3]) + (r[4] ? " → " + str(r[4]) : "") + " · "}),
            L.markText(r[6], q)]));
        });
        if (h.length > 3) grp.appendChild(el("div", {cls: "result more", text: "… " + (h.length - 3) + " more in this run (open it and search there)",
          onclick: function () { S.scope = "run"; L.selectRun(n, {}); }}));
        inner.appendChild(grp);
      });
    }).catch(function (err) {
      L.clear(inner).appendChild(el("p", {cls: "bad", text: String(err.message || err)}));
    });
  }

  // --- routing ------------------------------------------------------------------------------------
  function hashParts() {
    var p = [];
    if (T.sort !== "id" || T.desc) p.push("sort=" + encodeURIComponent(T.sort) + (T.desc ? ":desc" : ""));
    T.filters.forEach(function (v, k) { if (v) p.push("f." + encodeURIComponent(k) + "=" + encodeURIComponent(v)); });
    if (T.free) p.push("find=" + encodeURIComponent(T.free));
    if (T.only) p.push("only=1");  // the runs matching the search (q), found again on opening
    return p;
  }
  function route(h) {  // the table's state is the link's: what it does not say is reset
    T.sort = "id"; T.desc = false; T.filters.clear(); T.free = ""; T.only = null; T.onlyQ = "";
    T.onlyPending = h.only && h.q ? h.q : null;  // set once the search over every run is done
    if (h.sort) { var s = h.sort.split(":"); T.sort = s[0]; T.desc = s[1] === "desc"; }
    Object.keys(h).forEach(function (k) { if (k.indexOf("f.") === 0 && h[k]) T.filters.set(k.slice(2), h[k]); });
    if (h.find) T.free = h.find;
    if (drawnOnce) head(columns());  // the filter boxes show the new state
    if (h.cond) T.filters.set("condition", h.cond);  // the report links a condition's runs
  }
  function refresh() {  // a newer index (live mode): new columns or values, redrawn in place
    if (!drawnOnce) return;
    var before = T.cols;
    var cols = columns();
    if (cols !== before) head(cols);
    else updatePicks(cols);
    T.widths = T.widths && S.index.runs.length === T.lockedFor;
    if (S.view === "runs") draw(true);
    if (S.q && S.scope === "all") L.renderSearch();
  }

  M._views.runs = {render: render, refresh: refresh, route: route, hashParts: hashParts, renderSearchAll: renderSearchAll,
    sortBy: sortBy, setFilter: function (k, v) { T.filters.set(k, v); head(columns()); draw(); }, state: T, select: toggle};
})(MBB);
