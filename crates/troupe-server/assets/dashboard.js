// troupe's dashboard, live: follows /ui/events (GET /events, each task event
// with its card as the server renders it) from the event id the page was
// rendered at (body[data-last-event]) and refreshes what an event touched
// with server-rendered fragments, so the server stays the only place that
// renders. Events are applied in id order, each once: an id not above the
// last one applied is ignored, and a dropped stream is reopened from that id
// (?after=, the same cursor as Last-Event-ID). Actions go through the REST
// API. Without this script every page is still a complete, refreshable view.
"use strict";
(() => {
  const body = document.body;
  const live = document.querySelector("[data-testid=live-status]");
  const page = document.querySelector("[data-page]");
  const kind = page ? page.dataset.page : "";
  // What tests and benchmarks read: applied event ids, and for each task
  // event its commit time, when it arrived and when it became visible (ms since epoch).
  const api = { last: Number(body.dataset.lastEvent || 0), applied: [], shown: [], connects: 0 };
  window.troupeDashboard = api;
  let stream = null;
  let retry = null;

  const say = (sel, text) => { const el = document.querySelector(sel); if (el) el.textContent = text; };
  const enc = encodeURIComponent;

  async function call(method, url, payload) {
    const res = await fetch(url, {
      method, headers: { "content-type": "application/json" },
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    const json = await res.json().catch(() => null);
    if (!res.ok) {
      const e = (json && json.error) || {};
      throw new Error((e.message || res.statusText) + (e.hint ? " (" + e.hint + ")" : ""));
    }
    return json;
  }

  async function html(url) {
    const res = await fetch(url, { cache: "no-store" });
    return { ok: res.ok, status: res.status, text: await res.text(), res };
  }

  // Coalesce bursts: one refresh per animation frame at most.
  function debounced(fn) {
    let queued = false;
    return () => { if (!queued) { queued = true; setTimeout(() => { queued = false; fn(); }, 30); } };
  }

  function connect() {
    api.connects += 1;
    stream = new EventSource("/ui/events?after=" + api.last);
    stream.onopen = () => { if (live) live.textContent = "live"; };
    stream.onmessage = (m) => {
      const id = Number(m.lastEventId);
      if (!(id > api.last)) return;
      api.last = id;
      api.applied.push(id);
      let event = null;
      try { event = JSON.parse(m.data); } catch (_) { return; }
      event.arrived = Date.now();
      onEvent(event);
    };
    stream.onerror = () => {
      if (live) live.textContent = "reconnecting";
      stream.close();
      clearTimeout(retry);
      retry = setTimeout(connect, 200);
    };
  }
  // A forced disconnect, for tests: the stream is dropped and reopened.
  api.drop = () => { stream.close(); clearTimeout(retry); retry = setTimeout(connect, 200); };

  // ---- board
  const board = document.getElementById("board");
  const activity = document.getElementById("activity");
  // While the board or a group is fetched again, task events wait and are
  // placed after it, in order, so an older fragment never covers a newer card.
  let fetching = 0;
  const held = [];
  async function refetch(fn) {
    fetching += 1;
    try { await fn(); } finally {
      fetching -= 1;
      if (fetching === 0) for (const e of held.splice(0)) placeTask(e);
    }
  }
  const refreshBoard = debounced(() => refetch(async () => {
    const r = await html("/ui/fragment/board" + location.search);
    if (r.ok) board.innerHTML = r.text;
  }));
  const seen = (event, now) =>
    ({ id: event.id, task: event.subject, kind: event.kind, at: Date.parse(event.at), arrived: event.arrived, shown: now });
  const recount = (group) => {
    for (const col of group.querySelectorAll(".col")) {
      const count = col.querySelector(".count");
      if (count) count.textContent = col.querySelectorAll(".task").length;
    }
  };
  const bump = (col, n) => { const c = col.querySelector(".count"); c.textContent = Number(c.textContent) + n; };
  // A task event from /ui/events carries its card as the server renders it
  // now (null: the task is gone), so the card moves the moment it arrives.
  function placeTask(event) {
    if (fetching > 0) { held.push(event); return; }
    const id = event.subject;
    const old = board.querySelector('article[data-task="' + CSS.escape(id) + '"]');
    if (event.card === null) { if (old) old.remove(); return; }
    const tpl = document.createElement("template");
    tpl.innerHTML = event.card;
    const card = tpl.content.querySelector("article[data-task]");
    const key = card ? card.dataset.group : "";
    const group = card && board.querySelector('section[data-group="' + CSS.escape(key) + '"]');
    if (!group) { refreshBoard(); return; }
    const into = group.querySelector('.col[data-col="' + card.dataset.col + '"]');
    if (group.dataset.cut === "true") {
      // Some column shows only its first cards. A card moving into a column
      // shown whole is placed, and the counts move by one; it came from where
      // its old card was, else from the one cut column (a new task's origin
      // is nowhere). Anything else fetches the group.
      const cuts = [...group.querySelectorAll('.col[data-cut="true"]')];
      const from = old ? old.closest(".col") : (cuts.length === 1 && event.kind !== "task_created" ? cuts[0] : null);
      const [feature, wave] = key.split("|");
      if (into.dataset.cut === "true" || !from || !feature || !wave) {
        refetch(() => refreshGroup(key, event));
        return;
      }
      if (old) old.remove();
      bump(from, -1);
      into.appendChild(card);
      bump(into, 1);
    } else {
      if (old) old.remove();
      into.appendChild(card);
      recount(group);
    }
    api.shown.push(seen(event, Date.now()));
  }
  async function refreshGroup(key, event) {
    const [feature, wave] = key.split("|");
    const r = await html("/ui/fragment/board?feature=" + enc(feature) + "&wave=" + enc(wave)).catch(() => null);
    const now = board.querySelector('section[data-group="' + CSS.escape(key) + '"]');
    if (!r || !r.ok || !now) { refreshBoard(); return; }
    now.outerHTML = r.text;
    api.shown.push(seen(event, Date.now()));
  }
  function onBoardEvent(event) {
    if (activity) {
      const li = document.createElement("li");
      li.dataset.event = event.id;
      li.textContent = "#" + event.id + " " + event.kind + " " + (event.subject || "") + (event.actor ? " by " + event.actor : "");
      activity.prepend(li);
      while (activity.children.length > 5000) activity.lastElementChild.remove();
    }
    if (event.kind.startsWith("plan_") || board.dataset.filtered === "true") { refreshBoard(); return; }
    if (event.kind.startsWith("task_") && event.subject && "card" in event) placeTask(event);
  }
  if (board) {
    board.addEventListener("click", async (e) => {
      const button = e.target.closest("button[data-act]");
      if (!button) return;
      const task = button.closest("[data-task]").dataset.task;
      const actor = document.getElementById("actor").value.trim() || "user";
      const act = button.dataset.act;
      const payload = act === "release" ? { by: actor } : act === "assign" ? { agent: actor, by: "user" } : { agent: actor };
      try {
        await call("POST", "/tasks/board/" + enc(task) + "/" + act, payload);
        say("[data-testid=action-status]", act + " " + task + ": done");
      } catch (err) { say("[data-testid=action-status]", act + " " + task + ": " + err.message); }
    });
  }

  // ---- agents
  const agents = document.getElementById("agents");
  const refreshAgents = debounced(async () => {
    const r = await html("/ui/fragment/agents");
    if (r.ok) agents.innerHTML = r.text;
  });

  // ---- a teammate's log: its lines are a file, not events, so it is read
  // from the last line shown whenever anything happens and twice a second.
  const log = document.getElementById("log");
  let reading = false;
  async function readLog() {
    if (reading) return;
    reading = true;
    try {
      const r = await html("/ui/fragment/log/" + enc(log.dataset.agent) + "?offset=" + log.dataset.next);
      const next = r.res.headers.get("x-troupe-next");
      if (r.ok && next !== null && Number(next) >= Number(log.dataset.next)) {
        log.insertAdjacentHTML("beforeend", r.text);
        log.dataset.next = next;
      }
    } finally { reading = false; }
  }
  if (log) setInterval(readLog, 500);
  const form = document.querySelector("form.send");
  if (form) {
    const send = async (kind, text) => {
      try {
        await call("POST", "/messages", { from: "user", to: form.dataset.agent, kind, body: text });
        say("[data-testid=message-status]", kind === "text" ? "sent" : "shutdown requested");
      } catch (err) { say("[data-testid=message-status]", err.message); }
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const text = form.querySelector("textarea").value;
      send("text", text).then(() => { form.querySelector("textarea").value = ""; });
    });
    form.querySelector("[data-act=shutdown]").addEventListener("click", () =>
      send("shutdown_request", "The user asks you to shut down: finish your current step, then approve this request."));
  }

  // ---- approvals
  const approvals = document.getElementById("approvals");
  const refreshApprovals = debounced(async () => {
    const r = await html("/ui/fragment/approvals");
    if (r.ok) approvals.innerHTML = r.text;
  });
  if (approvals) {
    approvals.addEventListener("click", async (e) => {
      const button = e.target.closest("button[data-act]");
      if (!button) return;
      const plan = button.closest("[data-plan]").dataset.plan;
      const reason = document.getElementById("reason-" + plan).value;
      try {
        await call("POST", "/tasks/" + plan + "/" + button.dataset.act, { by: "user", reason });
        say("[data-testid=approval-status]", "plan " + plan + ": " + button.dataset.act + "d");
        refreshApprovals();
      } catch (err) { say("[data-testid=approval-status]", "plan " + plan + ": " + err.message); }
    });
  }

  // ---- engine settings: a section sets every one of its phases.
  const engines = document.querySelector("form.engines");
  if (engines) {
    engines.addEventListener("submit", (e) => e.preventDefault());
    engines.addEventListener("change", async (e) => {
      const select = e.target;
      let change;
      if (select.name === "engine-default") {
        change = { default: select.value };
      } else {
        const phases = {};
        for (const p of select.closest("fieldset").dataset.phases.split(",")) phases[p] = select.value || null;
        change = { phases };
      }
      try {
        await call("PUT", "/engines", change);
        say("[data-testid=engines-status]", "saved: applies to the next teammate spawned");
      } catch (err) { say("[data-testid=engines-status]", err.message); }
    });
  }
  const override = document.querySelector("form.override");
  if (override) {
    override.addEventListener("submit", async (e) => {
      e.preventDefault();
      const phases = {};
      for (const s of override.querySelectorAll("select")) phases[s.name.replace(/^override-/, "")] = s.value || null;
      try {
        await call("PUT", "/specs/" + enc(override.dataset.feature) + "/engine_override", { phases });
        say("[data-testid=override-status]", "saved");
      } catch (err) { say("[data-testid=override-status]", err.message); }
    });
  }

  function onEvent(event) {
    if (board) onBoardEvent(event);
    if (agents && (event.kind.startsWith("agent_") || event.kind.startsWith("task_"))) refreshAgents();
    if (approvals && event.kind === "message_sent") refreshApprovals();
    if (log && (event.actor === log.dataset.agent || event.subject === log.dataset.agent)) readLog();
  }

  connect();
})();
