/* mbb viewer: the agent view (the "Agents" tab of a run). One worker's story in the order it
 * happened: what it saw (its prompts, from the run's LLM cache, and the private messages it
 * received), what it said and did (requests, declarations, messages, ballots, windows,
 * commands, payments, repairs of its invalid actions), what it wrote to memory, and each LLM
 * call's tokens. A scripted worker has no prompts: its actions and memory are shown.
 * Link: #run=<run path>&tab=agent&w=<worker>. */
"use strict";
(function (M) {
  var L = M._lib, S = M._state, el = L.el, str = L.str, arr = L.arr, fmt = L.fmt, isNum = L.isNum;
  // messages: the ones it sent and the private ones it received, in time order (a scripted worker's
  // conversation; they were split, its own under "actions", so the conversation read one-sided)
  var show = {prompts: true, messages: true, memory: true, actions: true};

  function item(e, what, cls, body) {
    return el("div", {cls: "story-item " + cls, "data-seq": e.seq, "data-kind": e.kind}, [
      el("span", {cls: "story-what", text: what}), el("div", {cls: "story-body"}, body)]);
  }
  function quote(text) { return el("div", {cls: "story-text"}, [L.markText(text)]); }
  function describe(e, w, r) {  // [what, class, body nodes] of one event of the worker's story, or null
    var k = e.kind;
    if (k === "llm_call") return show.prompts ? ["saw and answered", "call", [L.callDetails(e, r)]] : null;
    if (k === "message" && e.worker !== w) {
      return show.messages ? ["received", "saw", [L.chip(e.worker, r), " → ", L.chip(w, r), el("span", {cls: "tag private", text: "private"}), " turn " + fmt(e.turn), quote(e.text)]] : null;
    }
    if (k === "scratch_written") {
      return show.memory ? ["wrote to memory", "memory", [el("span", {cls: "muted", text: str(e.entry) + (e.accepted === false ? " (refused)" : "") +
        (e.dropped_chars ? " (dropped " + fmt(e.dropped_chars) + " older characters)" : "")}), quote(e.text)]] : null;
    }
    if (k === "message") {
      return show.messages ? ["said", "said", [e.to == null ? "to everyone" : el("span", null, ["to ", L.chip(e.to, r)]),
        el("span", {cls: "tag " + (e.to == null ? "public" : "private"), text: e.to == null ? "public" : "private"}), " turn " + fmt(e.turn), quote(e.text), L.labelBlock(e, r)]] : null;
    }
    if (!show.actions) return null;
    switch (k) {
      case "requested": return ["asked", "did", ["for " + fmt(e.duration) + " s on the resource"]];
      case "declared": return ["declared", "said", ["bid " + fmt(e.bid) + " for " + fmt(e.duration) + " s, asking for position " + fmt(e.position) +
        (e.revision ? " (revision, turn " + fmt(e.turn) + ")" : ""), quote(e.note), L.labelBlock(e, r)]];
      case "ballot": {
        var al = arr(e.allocations);
        return ["voted", "said", [arr(e.ranking).map(function (x, i) { return str(x) + " " + fmt(al[i] || 0) + "s"; }).join(" > ") + (e.defaulted ? " (defaulted)" : ""),
          quote(e.reasoning), L.labelBlock(e, r)]];
      }
      case "schedule_published": {
        var i = arr(e.order).indexOf(w);
        if (i < 0) return ["not scheduled", "got", ["the published schedule (" + str(e.rule) + ") has no window for it"]];
        return ["scheduled", "got", ["placed " + (i + 1) + " of " + arr(e.order).length + ", " + fmt(arr(e.allocations)[i]) + " s, bid " + fmt(arr(e.bids)[i]) + " (" + str(e.rule) + ")"]];
      }
      case "window_started": return ["window", "did", ["started in place " + fmt(e.position) + " of the schedule, for " + fmt(e.allocation) + " s, price " + fmt(e.price)]];
      case "window_ended": return ["window", "did", ["ran " + fmt(e.used, 1) + " s from t = " + fmt(e.start, 0) + " s; ended: " + str(e.reason) + "; progress after " + L.pct(e.progress, 1)]];
      case "window_dropped": return ["window dropped", "did", [str(e.reason)]];
      case "payment": return ["paid", "did", [fmt(e.amount) + " credits (" + str(e.rule) + "); balance " + fmt(e.balance)]];
      case "command": return ["ran", "did", [el("code", {text: str(e.tool)}), " ", L.markText(e.command), " → exit " + fmt(e.exit_code) + ", " + fmt(e.runtime, 2) + " s" +
        (e.killed ? ", killed" : "") + (e.refused ? ", refused" : "") + (e.truncated ? ", output cut" : "") + (e.reason ? " (" + str(e.reason) + ")" : "")]];
      case "invalid_action": return ["repaired", "bad", ["invalid " + str(e.field) + " in " + str(e.phase) + ": " + str(e.detail) + " → " + str(e.rule)]];
      case "withdrawn": return ["withdrew", "did", [str(e.reason)]];
      case "test_result": return ["hidden test", e.passed ? "good" : "bad", [str(e.task) + " · " + str(e.test) + " · " + (e.passed ? "passed" : "failed") +
        " · exit " + fmt(e.exit_code) + " (expected " + fmt(e.expected_exit) + ") · stdout " + (e.stdout_match ? "matches" : "differs") + (e.reason ? " · " + str(e.reason) : "")]];
      case "terminated": return ["terminated", "bad", ["at its deadline (" + fmt(e.deadline_s, 0) + " s), progress " + L.pct(e.progress, 1)]];
      case "completed": return ["completed", "good", ["its task (" + fmt(e.work_s, 1) + " s of work)"]];
      case "evaluation": return ["outcome", e.outcome === "completed" ? "good" : "bad", [str(e.outcome) + " · task " + str(e.task) + " · score " + L.pct(e.score, 1) +
        " (" + fmt(e.passed) + "/" + fmt(e.total) + " tests) · progress " + L.pct(e.progress, 1)]];
      default: return [k.replace(/_/g, " "), "did", []];
    }
  }
  function render(box) {
    var r = S.run;
    if (r.workerIds.indexOf(S.agent) < 0) S.agent = r.workerIds[0] || "";
    var w = S.agent;
    var pick = el("div", {cls: "round-nav", id: "agent-pick"}, [el("strong", {text: "worker"})]);
    r.workerIds.forEach(function (x) {
      pick.appendChild(el("button", {cls: x === w ? "sel" : null, "data-worker": x, onclick: function () { S.agent = x; L.renderContent(); L.writeHash(); }}, [L.chip(x, r)]));
    });
    box.appendChild(pick);
    if (!w) { box.appendChild(el("p", {cls: "muted", text: "No workers in this run."})); return; }
    var info = r.personas.get(w) || {};
    var calls = r.calls.filter(function (c) { return c.worker === w; });
    var tok = 0, cost = 0, failed = 0, unpriced = false, noUsage = 0;
    calls.forEach(function (c) {
      // a call without token counts (none reported, or it failed): unknown, never 0
      if (c.prompt_tokens == null) noUsage += 1;
      tok += (isNum(c.prompt_tokens) ? c.prompt_tokens : 0) + (isNum(c.completion_tokens) ? c.completion_tokens : 0);
      if (isNum(c.cost_usd)) cost += c.cost_usd; else unpriced = true;  // unknown, never $0
      failed += c.error ? 1 : 0;
    });
    var model = L.workerModel(r, w), persona = L.workerPersona(r, w);
    box.appendChild(el("h3", {id: "agent-title"}, [L.chip(w, r), " " + (model === "scripted" ? "scripted worker" + (persona ? " (persona " + persona + ")" : "") : "model " + model) +
      " · negotiator " + str(info.negotiator) + " · solver " + str(info.solver)]));
    box.appendChild(el("p", {cls: "muted", text: calls.length ? L.fmtMeasure("llm_calls", calls.length) + " LLM call(s), " +
      (noUsage ? L.partlyUnknown(tok ? L.fmtMeasure("tokens", tok) : null, noUsage) : L.fmtMeasure("tokens", tok)) + " tokens (prompt + completion), " +
      (noUsage ? "cost " + L.partlyUnknown(cost ? "$" + L.fmtMeasure("cost_usd", cost) : null, noUsage) : unpriced ? "cost unpriced" : "$" + L.fmtMeasure("cost_usd", cost)) +
      (failed ? ", " + failed + " failed" : "") + ". Open a call to read its prompt (what it saw) and its answer." :
      "A scripted worker: no prompts. Its story is what it did, the messages it sent and the private ones it received, and what it wrote to memory."}));
    var opts = el("div", {cls: "story-opts"});
    [["prompts", "prompts and answers"], ["messages", "messages sent and received"], ["actions", "other actions"], ["memory", "memory"]].forEach(function (o) {
      var c = el("input", {type: "checkbox", "data-opt": o[0]});
      c.checked = show[o[0]];
      c.addEventListener("change", function () { show[o[0]] = c.checked; L.renderContent(); });
      opts.appendChild(el("label", null, [c, " " + o[1]]));
    });
    box.appendChild(opts);

    var story = el("div", {id: "story"}), lastS = null, lastR, shown = 0;
    r.events.forEach(function (e) {
      var mine = e.worker === w || (e.kind === "message" && e.to === w) ||
        (e.kind === "schedule_published" && arr(e.order).indexOf(w) >= 0);
      if (e.kind === "subrun_started") {
        var mineAt = arr(e.workers).filter(function (x) { return L.isObj(x) && x.worker === w; })[0];
        if (!mineAt) return;
        lastS = e.subrun; lastR = undefined;
        story.appendChild(el("h4", {cls: "story-subrun", text: "Subrun " + fmt(e.subrun) + ": task " + str(mineAt.task) + ", " + fmt(mineAt.work_s, 1) +
          " s of work, budget " + fmt(mineAt.budget) + " credits, deadline " + fmt(mineAt.deadline_s, 0) + " s, memory " + fmt(mineAt.scratch_chars) + " characters"}));
        return;
      }
      if (!mine) return;
      var d = describe(e, w, r);
      if (!d) return;
      if (e.subrun !== lastS) { lastS = e.subrun; lastR = undefined; story.appendChild(el("h4", {cls: "story-subrun", text: e.subrun == null ? "Outside subruns" : "Subrun " + e.subrun})); }
      if (e.round !== lastR) {
        lastR = e.round;
        if (e.round != null) {
          var s = e.subrun, n = e.round;
          story.appendChild(el("div", {cls: "story-round"}, [el("a", {href: L.runLink(S.cur, "s=" + s + "&r=" + n), text: "round " + n, onclick: function (ev) { ev.preventDefault(); S.tab = "rounds"; S.subrun = s; S.round = n; L.setTab("rounds"); }})]));
        } else if (e.subrun != null) story.appendChild(el("div", {cls: "story-round muted", text: "between rounds"}));
      }
      story.appendChild(item(e, d[0], d[1], d[2]));
      shown++;
    });
    if (!shown) story.appendChild(el("p", {cls: "muted", text: "Nothing to show with these options."}));
    box.appendChild(story);
  }
  M._views.agent = {render: render, show: show};
})(MBB);
