// looprail ui: follows the journal through server-sent events and draws it.
// Everything shown comes from manifests and project files, so text only ever goes in through
// textContent / createTextNode: this file never assigns HTML.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);

  // el("td", {cls: "x", title: "…", data: {key: "…"}}, "text", child, …)
  function el(tag, opts, ...children) {
    const node = document.createElement(tag);
    if (opts) {
      if (opts.cls) node.className = opts.cls;
      if (opts.title) node.title = String(opts.title);
      if (opts.data) for (const [k, v] of Object.entries(opts.data)) node.dataset[k] = String(v);
      if (opts.type) node.type = opts.type;
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function badge(text, kind) {
    return el("span", { cls: "badge " + (kind || "b-" + String(text).replace(/[^a-z]/g, "")) }, text);
  }
  function fmtMs(ms) {
    if (ms === null || ms === undefined) return "-";
    if (ms < 1000) return ms + "ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    const m = Math.floor(s / 60), r = Math.floor(s % 60);
    if (m < 60) return m + "m" + String(r).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }
  function shortTs(ts) { return ts ? ts.replace("T", " ").replace(/\.\d+Z$/, "Z") : "-"; }

  let selectedRun = null;   // from the URL hash; null follows the latest run
  let snap = null;
  let receivedAt = 0;
  let source = null;
  let stopped = false;      // the server said goodbye
  let openTask = null;      // key of the task whose detail is shown
  let chartVersion = null;
  let pendingFocus = null;  // where the current state sits across the chart (0..1)

  function readHash() {
    const m = /(?:^#|&)run=([0-9A-Za-z]+)/.exec(location.hash);
    selectedRun = m ? m[1] : null;
    const t = /(?:^#|&)task=([^&]+)/.exec(location.hash);
    openTask = t ? decodeURIComponent(t[1]) : null;
  }
  function writeHash() {
    const parts = [];
    if (selectedRun) parts.push("run=" + selectedRun);
    if (openTask) parts.push("task=" + encodeURIComponent(openTask));
    history.replaceState(null, "", location.pathname + location.search + (parts.length ? "#" + parts.join("&") : ""));
  }
  // The per-launch token `looprail ui` printed in the address (`?token=…`): every request for
  // data carries it, and the answer form sends it in its body. It stays in the address, so a
  // reload keeps working; the page sends no Referer, so it never leaves through a link.
  const TOKEN = new URLSearchParams(location.search).get("token") || "";
  // `/api/…?token=…&k=v…` (EventSource and <img> cannot send a header)
  function api(path, params) {
    const q = new URLSearchParams();
    if (TOKEN) q.set("token", TOKEN);
    for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined) q.set(k, v);
    const query = q.toString();
    return path + (query ? "?" + query : "");
  }
  function runParams() { return selectedRun ? { run: selectedRun } : {}; }

  function connect() {
    if (source) source.close();
    stopped = false;
    const conn = $("conn");
    conn.textContent = "connecting…";
    conn.className = "conn";
    source = new EventSource(api("/api/events", runParams()));
    source.addEventListener("state", (ev) => {
      conn.textContent = "connected";
      conn.className = "conn ok";
      snap = JSON.parse(ev.data);
      receivedAt = Date.now();
      render();
    });
    source.addEventListener("bye", () => {
      stopped = true;  // nothing more to ask a server that is gone
      clearTimeout(logTimer);
      source.close();
      conn.textContent = "server stopped";
      conn.className = "conn bad";
    });
    source.onerror = () => {
      conn.textContent = "reconnecting…";
      conn.className = "conn bad";
    };
  }

  // -- rendering ------------------------------------------------------------------------------

  function render() {
    renderNotice();
    const run = snap.run;
    renderRunbar(run);
    renderCheckpoints();
    renderAnswers(run);
    renderHalt(run);
    renderChart(run);
    renderPath(run);
    renderPoints(run);
    renderWaves(run);
    renderPhases();
    renderHistory();
    if (openTask) renderTaskDetail(true);
  }

  function renderNotice() {
    const box = $("notice");
    clear(box);
    box.hidden = !snap.hint;
    if (snap.hint) {
      box.appendChild(el("strong", null, snap.project.isProject ? "Nothing to show yet. " : "Not a project. "));
      box.appendChild(el("span", { cls: "hint" }, snap.hint));
    }
    const w = $("warnings");
    clear(w);
    const warnings = (snap.warnings || []).slice();
    for (const n of (snap.run && snap.run.warnings) || []) {
      const where = [n.point, n.capId, n.taskId].filter(Boolean).join(" · ");
      warnings.push((where ? where + ": " : "") + (n.message || ""));
    }
    w.hidden = warnings.length === 0;
    for (const text of warnings) w.appendChild(el("div", { cls: "warning" }, "⚠ ", text));
  }

  function renderRunbar(run) {
    const bar = $("runbar");
    clear(bar);
    bar.hidden = !run;
    if (!run) return;
    const counts = run.tasks;
    bar.append(
      el("span", { cls: "runid", title: "run id" }, "run ", el("code", null, run.id)),
      el("span", null, "phase ", el("b", null, run.phase)),
      badge(run.display),
      el("span", { cls: "state" }, "state ", el("code", { cls: "current-state" }, (run.state || []).join(" / ") || "-")),
      el("span", { cls: "muted" }, "started ", shortTs(run.startedAt)),
      el("span", { cls: "muted" }, run.endedAt ? "took " + run.took : ""),
      el("span", { cls: "counts" },
        counts.done + " done · " + counts.running + " running · " + counts.pending + " pending · " + counts.failed + " failed"),
    );
    if (run.live) bar.appendChild(el("span", { cls: "muted" }, "pid " + run.pid + " on " + run.host));
  }

  // -- checkpoints: what the waiting run needs answered, and the form that answers it ----------

  // The forms are rebuilt only when what is asked changes, so a state update never throws
  // away what is being typed.
  let checkpointsKey = null;
  const results = {};  // task → the last answer's outcome shown under its form

  function renderCheckpoints() {
    const box = $("checkpoints");
    const cps = snap.checkpoints;
    const items = cps ? cps.items : [];
    const key = JSON.stringify([cps ? cps.runId : null, snap.writable, items.map((c) => [c.task_id, c.text])]);
    box.hidden = items.length === 0;
    if (key === checkpointsKey) return;
    checkpointsKey = key;
    // an outcome belongs to its checkpoint while it is pending: one asked again starts clean
    for (const task of Object.keys(results)) if (!items.some((c) => c.task_id === task)) delete results[task];
    clear(box);
    for (const cp of items) box.appendChild(checkpointBlock(cps.runId, cp));
  }

  function checkpointBlock(runId, cp) {
    const block = el("div", { cls: "checkpoint k-" + cp.kind, data: { task: cp.task_id, kind: cp.kind } },
      el("div", { cls: "checkpoint-head" }, "Run ", el("code", null, runId), " waits for an answer: ",
        el("code", null, cp.task_id), " ", cp.title),
      el("pre", { cls: "checkpoint-text" }, cp.text));
    if (!snap.writable) {
      block.appendChild(el("p", { cls: "muted" }, "Answer it in the terminal, or with ", el("code", { cls: "cmd" }, cp.command)));
      return block;
    }
    block.appendChild(answerForm(cp));
    return block;
  }

  function input(type, name, opts) {
    const node = document.createElement(type === "textarea" ? "textarea" : "input");
    if (type !== "textarea") node.type = type;
    node.name = name;
    for (const [k, v] of Object.entries(opts || {})) node.setAttribute(k, v);
    return node;
  }

  function answerForm(cp) {
    const form = el("form", { cls: "answer-form" });
    form.setAttribute("autocomplete", "off");
    const token = input("hidden", "token");
    token.value = TOKEN;  // the dashboard's token travels in the form's body, never a cookie
    const task = input("hidden", "task");
    task.value = cp.task_id;
    form.append(token, task);
    const result = el("div", { cls: "answer-result", data: { task: cp.task_id } });
    result.hidden = true;
    const send = (answer) => submitAnswer(form, cp, answer, result);
    const word = cp.words.length > 1 ? cp.words[cp.words.length - 1] : "approved";
    if (cp.kind === "decision" && cp.options.length) {
      const list = el("div", { cls: "options" });
      cp.options.forEach((o, i) => {
        const radio = input("radio", "answer", { value: o.id });
        if (i === 0) radio.required = true;
        list.appendChild(el("label", { cls: "option", data: { option: o.id } }, radio, " " + (i + 1) + ". ",
          el("code", null, o.id), o.name ? " — " + o.name : ""));
      });
      form.append(list, el("div", { cls: "row" }, el("button", { type: "submit", cls: "choose" }, "Choose")));
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        const picked = form.querySelector("input[name=answer]:checked");
        if (picked) send(picked.value);
      });
    } else if (cp.secret) {
      const field = input("password", "answer", { autocomplete: "new-password", spellcheck: "false", "aria-label": "the secret answer" });
      field.required = true;
      form.append(el("label", null, "The answer is a secret: it is not shown, and the journal records \u201canswer withheld\u201d."),
        el("div", { cls: "row" }, field, el("button", { type: "submit", cls: "send" }, "Send")));
      form.addEventListener("submit", (ev) => { ev.preventDefault(); send(field.value); });
    } else {
      const approve = el("button", { type: "button", cls: "approve" }, cp.kind === "human-action" ? word : "approved");
      approve.addEventListener("click", () => send(approve.textContent));
      const free = cp.kind === "human-verify" || cp.kind === "tdd-review" || (cp.kind === "human-action" && cp.words.length <= 1) || cp.kind === "decision";
      const row = el("div", { cls: "row" }, approve);
      form.appendChild(row);
      if (free) {
        const what = cp.kind === "human-verify" ? "or describe the issues to fix" : cp.kind === "tdd-review" ? "or write review notes" : "or type the answer";
        const text = input("textarea", "answer", { rows: "3", "aria-label": what, placeholder: what });
        form.append(text, el("div", { cls: "row" }, el("button", { type: "submit", cls: "send" }, cp.kind === "human-verify" ? "Send the issues" : "Send")));
        form.addEventListener("submit", (ev) => { ev.preventDefault(); if (text.value.trim()) send(text.value); });
      } else {
        form.addEventListener("submit", (ev) => { ev.preventDefault(); send(approve.textContent); });
      }
    }
    form.appendChild(result);
    if (results[cp.task_id]) showResult(result, results[cp.task_id]);
    return form;
  }

  function showResult(node, r) {
    node.hidden = false;
    node.className = "answer-result " + (r.ok ? "ok" : "refused");
    node.textContent = r.text;
  }

  function submitAnswer(form, cp, answer, result) {
    const body = new URLSearchParams(new FormData(form));
    body.set("answer", answer);
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    fetch("/api/answer", { method: "POST", body: body, headers: { "Content-Type": "application/x-www-form-urlencoded" }, cache: "no-store", credentials: "omit" })
      .then((r) => r.json().then((j) => [r.ok, j]), () => [false, { error: "the dashboard did not answer" }])
      .then(([ok, j]) => {
        const r = ok && j.ok
          ? { ok: true, text: "Recorded for " + j.task + ": " + j.recorded + (j.withheld ? "" : " (" + j.kind + ")") }
          : { ok: false, text: (j && j.error) || "refused" };
        results[cp.task_id] = r;
        lastAnswer = r.ok ? r : lastAnswer;
        showResult(result, r);
        if (r.ok) { form.reset(); renderAnswers(snap && snap.run); }
      })
      .catch(() => showResult(result, { ok: false, text: "the dashboard did not answer" }))
      .finally(() => { for (const b of form.querySelectorAll("button")) b.disabled = false; });
  }

  let lastAnswer = null;  // the latest answer this page recorded (its form is gone once taken)
  function renderAnswers(run) {
    const box = $("answers");
    clear(box);
    const rows = run && run.answers ? run.answers : [];
    box.hidden = rows.length === 0 && !lastAnswer;
    if (lastAnswer) box.appendChild(el("div", { cls: "answer-result ok last-answer" }, lastAnswer.text));
    if (!rows.length) return;
    box.appendChild(el("div", { cls: "halt-title" }, "Answers"));
    for (const a of rows) {
      box.appendChild(el("div", { cls: "answer-row", data: { task: a.taskId || "" } },
        el("code", null, a.taskId || "-"), badge(a.kind || "?", "o-" + String(a.kind || "none").replace(/[^a-z]/g, "")),
        el("span", { cls: "answer-text" }, a.text || ""),
        a.source ? el("span", { cls: "muted" }, "from " + a.source) : null,
        el("span", { cls: "muted" }, shortTs(a.ts))));
    }
  }

  function renderHalt(run) {
    const box = $("halt");
    clear(box);
    const show = run && (run.haltReason || run.interrupted || run["continue"] || (run.halt && run.status !== "shipped"));
    box.hidden = !show;
    if (!show) return;
    box.className = "halt " + (run.interrupted ? "interrupted" : run.status);
    let title = run.display === "interrupted"
      ? "Interrupted: pid " + run.pid + " on " + run.host + " is gone; the run stopped without finishing."
      : run.display.charAt(0).toUpperCase() + run.display.slice(1);
    box.appendChild(el("div", { cls: "halt-title" }, title));
    if (run.halt) {
      const where = [run.halt.point, run.halt.capId, run.halt.taskId].filter(Boolean).join(" · ");
      if (where) box.appendChild(el("div", { cls: "halt-where" }, "at ", el("code", null, where)));
    }
    if (run.haltReason) box.appendChild(el("div", { cls: "halt-reason" }, run.haltReason));
    if (run["continue"]) {
      box.appendChild(el("div", { cls: "continue" }, "Continue with ", el("code", { cls: "cmd" }, run["continue"])));
    }
  }

  function renderChart(run) {
    const img = $("chart");
    $("chart-missing").hidden = !!snap.chart;
    if (!snap.chart && snap.chartError) $("chart-missing").textContent = "No chart: " + snap.chartError;
    $("chart-box").hidden = !snap.chart;
    if (!snap.chart) return;
    const version = (run ? run.id : "-") + ":" + snap.version;
    if (version === chartVersion) {
      if (pendingFocus !== snap.chartFocus) { pendingFocus = snap.chartFocus; placeChart(); }
      return;
    }
    chartVersion = version;
    const url = api("/api/chart.svg", { run: run ? run.id : null, v: snap.version });
    // load off-screen, then swap: no flicker while a run moves
    const next = new Image();
    const focus = snap.chartFocus;
    next.onload = () => {
      if (chartVersion !== version) return;
      pendingFocus = focus;
      img.src = url;
      img.dataset.version = version;
    };
    next.src = url;
  }

  function renderPath(run) {
    const list = $("path");
    clear(list);
    if (!run) return;
    for (const t of run.path) {
      const src = (t.source || []).join("/"), dst = (t.target || []).join("/");
      list.appendChild(el("li", null, src + " → " + dst, t.event ? el("span", { cls: "muted" }, " (" + t.event + ")") : null));
    }
  }

  function resultRow(hook, r, haltedHere) {
    const refused = ["blocked", "block", "failed", "error", "halted"].includes(r.outcome);
    return el("div", { cls: "result" + (refused ? " refused" : "") + (haltedHere && refused ? " halted-here" : "") },
      badge(r.outcome || "?", "o-" + String(r.outcome || "none").replace(/[^a-z]/g, "")),
      r.verdict ? el("span", { cls: "muted" }, "verdict") : null,
      el("span", { cls: "dur" }, r.took || fmtMs(r.durationMs)),
      r.wave !== null && r.wave !== undefined ? el("span", { cls: "muted" }, "wave " + r.wave) : null,
      r.message ? el("span", { cls: "msg" }, r.message) : null,
    );
  }

  function renderPoints(run) {
    const box = $("points");
    clear(box);
    const points = run ? run.points : [];
    if (!points.length) { box.appendChild(el("p", { cls: "muted" }, "No run yet.")); return; }
    const haltPoint = run && run.halt ? run.halt.point : null;
    for (const p of points) {
      const halted = haltPoint === p.point && run.status !== "shipped";
      const block = el("div", { cls: "point" + (p.hooks.length ? "" : " empty") + (halted ? " halted-point" : "") + (p.dispatches ? " dispatched" : ""), data: { point: p.point } });
      block.appendChild(el("div", { cls: "point-head" },
        el("code", { cls: "point-name" }, p.point),
        el("span", { cls: "muted" }, p.dispatches ? p.dispatches + " dispatch" + (p.dispatches === 1 ? "" : "es") : "not reached"),
        p.hooks.length ? null : el("span", { cls: "muted" }, "· no active hooks"),
        halted ? badge("refused here", "b-halted") : null,
      ));
      for (const h of p.hooks) {
        const row = el("div", { cls: "hook k-" + String(h.kind).replace(/[^a-z]/g, "") },
          el("span", { cls: "order" }, String(h.order)),
          badge(h.kind, "k-badge"),
          el("span", { cls: "cap", title: h.capId || "" }, h.capId || "?"),
          el("span", { cls: "summary" }, h.summary || ""),
          h.kind === "gate" ? el("span", { cls: "muted" }, h.blocking ? "blocking" : "advisory") : null,
          h.onError ? el("span", { cls: "muted" }, "onError " + h.onError) : null,
        );
        block.appendChild(row);
        for (const r of h.results) block.appendChild(resultRow(h, r, halted));
      }
      box.appendChild(block);
    }
    // native hooks (hooks.json) fire at loop events, not at the twelve points
    const natives = run ? run.nativeHooks : [];
    if (natives.length) {
      const block = el("div", { cls: "point dispatched native" },
        el("div", { cls: "point-head" }, el("code", { cls: "point-name" }, "native hooks"),
          el("span", { cls: "muted" }, natives.length + " result" + (natives.length === 1 ? "" : "s"))));
      for (const h of natives) {
        block.appendChild(el("div", { cls: "hook k-native" }, badge("native", "k-badge"),
          el("span", { cls: "cap", title: h.capId || "" }, h.capId || "?")));
        block.appendChild(resultRow(h, { outcome: h.outcome, durationMs: h.durationMs, message: h.message }, false));
      }
      box.appendChild(block);
    }
  }

  const running = [];  // [node, task] pairs whose elapsed time ticks
  function renderWaves(run) {
    const box = $("waves");
    clear(box);
    running.length = 0;
    if (!run || !run.waves.length) {
      box.appendChild(el("p", { cls: "muted" }, run ? "No wave has started yet." : "No run yet."));
      return;
    }
    for (const w of run.waves) {
      const wave = el("div", { cls: "wave" },
        el("div", { cls: "wave-head" }, el("b", null, w.wave === null ? "no wave" : "wave " + w.wave),
          w.outcome ? badge(w.outcome) : null, el("span", { cls: "muted" }, w.endedAt ? w.took : "")));
      for (const p of w.plans) {
        const plan = el("div", { cls: "plan" }, el("div", { cls: "plan-head" }, "plan ", el("code", null, p.planId || "-")));
        for (const t of p.tasks) {
          const elapsed = el("span", { cls: "elapsed" }, t.elapsed);
          if (t.status === "running") running.push([elapsed, t]);
          // a task in flight when its run's process died is not running any more
          const shown = t.status === "running" && run.interrupted ? "interrupted" : t.status;
          const btn = el("button", { cls: "task s-" + t.status + (openTask === t.key ? " open" : ""), type: "button", data: { key: t.key }, title: "show " + t.key },
            badge(shown),
            el("code", { cls: "task-key" }, t.key),
            elapsed,
            t.attempts > 1 ? el("span", { cls: "muted" }, "attempt " + t.attempts) : null,
            t.resolver ? el("span", { cls: "tracker" }, t.resolver.trackerId || "", " ", t.resolver.outcome || "") : null,
            t.tokens !== null && t.tokens !== undefined ? el("span", { cls: "muted" }, t.tokens + " tok") : null,
            t.cost !== null && t.cost !== undefined ? el("span", { cls: "muted" }, "$" + Number(t.cost).toFixed(4)) : null,
            t.logFiles.length ? el("span", { cls: "muted" }, "log") : null,
          );
          btn.addEventListener("click", () => {
            openTask = openTask === t.key ? null : t.key;
            writeHash();
            renderWaves(snap.run);
            renderTaskDetail(false);
          });
          plan.appendChild(btn);
        }
        wave.appendChild(plan);
      }
      box.appendChild(wave);
    }
  }

  function findTask(key) {
    if (!snap || !snap.run) return null;
    for (const w of snap.run.waves) for (const p of w.plans) for (const t of p.tasks) if (t.key === key) return t;
    return null;
  }

  let logTimer = null;
  let logSeq = 0;
  function renderTaskDetail(refresh) {
    const box = $("task-detail");
    const task = openTask ? findTask(openTask) : null;
    if (!task) { box.hidden = true; clear(box); return; }
    box.hidden = false;
    if (!refresh || !box.firstChild || box.dataset.key !== task.key) {
      clear(box);
      box.dataset.key = task.key;
      box.append(el("h3", null, "task ", el("code", null, task.key)), el("dl", { cls: "facts" }), el("div", { cls: "log" }, el("p", { cls: "muted" }, "loading log…")));
    }
    const facts = box.querySelector("dl");
    clear(facts);
    const fact = (k, v) => { facts.append(el("dt", null, k), el("dd", null, ...[].concat(v))); };
    const interrupted = task.status === "running" && snap.run.interrupted;
    fact("status", interrupted ? [badge("interrupted"), " in flight when the run's process died; runs again on resume"] : badge(task.status));
    fact("attempts", String(task.attempts));
    const elapsed = el("span", null, task.elapsed);
    if (task.status === "running") running.push([elapsed, task]);
    fact("elapsed", elapsed);
    fact("started", shortTs(task.startedAt));
    if (task.resolver) {
      fact("tracker", el("code", null, task.resolver.trackerId || "-"));
      fact("resolver", [task.resolver.outcome, task.resolver.message].filter(Boolean).join(": ") || "-");
    }
    fact("tokens", task.tokens === null || task.tokens === undefined ? "unknown" : String(task.tokens));
    fact("cost", task.cost === null || task.cost === undefined ? "unknown" : "$" + Number(task.cost).toFixed(4));
    loadLog(task);
  }

  function loadLog(task) {
    const my = ++logSeq;
    const url = api("/api/log", { run: snap.run.id, task: task.key });
    fetch(url).then((r) => r.json()).then((log) => {
      if (my !== logSeq) return;
      const box = $("task-detail").querySelector(".log");
      if (!box) return;
      clear(box);
      if (!log.files || !log.files.length) {
        box.appendChild(el("p", { cls: "muted no-log" }, "no log"));
      }
      for (const f of log.files || []) {
        const pre = el("pre", { cls: "log-text" }, f.text || "(empty)");
        box.appendChild(el("div", { cls: "log-file" },
          el("div", { cls: "log-name" }, el("code", null, f.name), f.truncated ? el("span", { cls: "muted" }, " (last lines)") : null),
          pre));
        pre.scrollTop = pre.scrollHeight;
      }
    }).catch(() => {});
    clearTimeout(logTimer);
    if (task.status === "running" && snap.run.live && !stopped) logTimer = setTimeout(() => { const t = findTask(task.key); if (t && openTask === t.key) loadLog(t); }, 2000);
  }

  // The project's phases (ROADMAP order): where each stands, the one `looprail run` runs
  // next, the one of the run shown; a click on a phase with a run shows that run.
  function renderPhases() {
    const phases = (snap.project && snap.project.roadmap) || [];
    $("phases-panel").hidden = phases.length === 0;
    const body = $("phases").querySelector("tbody");
    clear(body);
    const latest = snap.runs.length ? snap.runs[0].id : null;
    for (const p of phases) {
      const cls = [p.current ? "selected" : "", p.next ? "next" : ""].filter(Boolean).join(" ");
      const row = el("tr", { cls: cls, data: p.runId ? { run: p.runId, phase: p.number } : { phase: p.number } },
        el("td", null, p.number),
        el("td", null, p.name, p.next ? el("span", { cls: "muted small" }, " · next") : null),
        el("td", null, badge(p.status)),
        el("td", null, p.plans ? p.summaries + "/" + p.plans + " summaries" : "-"),
        el("td", null, p.runId ? el("code", null, p.runId) : "-"),
        el("td", { cls: "reason" }, p.why || ""),
      );
      if (p.runId) {
        row.addEventListener("click", () => {
          selectedRun = p.runId === latest ? null : p.runId;
          openTask = null;
          writeHash();
          connect();
        });
      }
      body.appendChild(row);
    }
  }

  function renderHistory() {
    const body = $("history").querySelector("tbody");
    clear(body);
    const current = snap.run ? snap.run.id : null;
    for (const r of snap.runs) {
      const total = r.tasks.pending + r.tasks.running + r.tasks.done + r.tasks.failed;
      const row = el("tr", { cls: r.id === current ? "selected" : "", data: { run: r.id } },
        el("td", null, el("code", null, r.id)),
        el("td", null, r.phase),
        el("td", null, badge(r.display)),
        el("td", null, shortTs(r.startedAt)),
        el("td", null, r.endedAt ? r.took : "-"),
        el("td", null, r.tasks.done + "/" + total + " done"),
        el("td", { cls: "reason" }, el("div", { cls: "clamp", title: r.haltReason || "" }, r.haltReason || "")),
      );
      row.addEventListener("click", () => {
        const latest = snap.runs.length ? snap.runs[0].id : null;
        selectedRun = r.id === latest ? null : r.id;
        openTask = null;
        writeHash();
        connect();
      });
      body.appendChild(row);
    }
    if (!snap.runs.length) body.appendChild(el("tr", null, el("td", { cls: "muted" }, "no runs yet")));
  }

  setInterval(() => {
    if (!snap || !snap.run || !snap.run.live) return;  // only a live run's clock moves
    const extra = Date.now() - receivedAt;
    for (const [node, t] of running) node.textContent = fmtMs((t.elapsedMs || 0) + extra);
  }, 1000);

  // The chart runs top to bottom: shown at CHART_SCALE of its natural size but never wider
  // than its box (nothing cut off on the right), the box scrolls down to the current state; a
  // click shows it at its natural size (scrolling both ways) and back.
  const CHART_SCALE = 0.75;
  function placeChart() {
    const img = $("chart"), box = $("chart-box");
    if (!img.naturalWidth) return;
    const zoomed = box.classList.contains("zoomed");
    const fitted = Math.min(img.naturalWidth * CHART_SCALE, box.clientWidth);
    img.style.width = Math.round(zoomed ? img.naturalWidth : fitted) + "px";
    if (pendingFocus !== null && pendingFocus !== undefined) {
      box.scrollTop = Math.max(0, pendingFocus * img.clientHeight - box.clientHeight / 2);
    }
  }
  $("chart").addEventListener("load", placeChart);
  $("chart").addEventListener("click", () => { $("chart-box").classList.toggle("zoomed"); placeChart(); });
  window.addEventListener("resize", placeChart);
  window.addEventListener("hashchange", () => { readHash(); connect(); });
  readHash();
  connect();
})();
