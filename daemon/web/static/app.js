// Chorus web page: Ask, Timeline, Now. Uses only the daemon's HTTP API; every piece of memory is
// put on the page as text (textContent), never as HTML.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const state = { status: null, day1: null, offsetMs: 0, tl: null, selected: null, nowTimer: null };
const COLORS = ["#2563eb", "#059669", "#d97706", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"];

function el(tag, props = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "style") Object.assign(e.style, v);
    else e.setAttribute(k, v);
  }
  for (const kid of kids) if (kid != null) e.append(kid);
  return e;
}

async function api(path, opts = {}) {
  const res = await fetch(path, { credentials: "same-origin", ...opts });
  const body = await res.json().catch(() => ({ status: "error", code: "internal", error: res.statusText }));
  if (!res.ok) throw Object.assign(new Error(body.error || res.statusText), { code: body.code, body });
  return body;
}

// -- time: the house's local time, as the API gives it (ISO with offset) ---------------------
function dayOf(dateStr) {
  if (!state.day1) return null;
  return Math.round((Date.parse(dateStr + "T00:00:00Z") - Date.parse(state.day1 + "T00:00:00Z")) / 86400000) + 1;
}
function labelIso(iso, withDay = true) {
  const d = iso.slice(0, 10), t = iso.slice(11, 19);
  const n = dayOf(d);
  return withDay && n != null ? `DAY${n} ${t}` : t;
}
function isoOfMs(ms) {  // house-local ISO-like text of an epoch ms (the offset of the day shown)
  return new Date(ms + state.offsetMs).toISOString().slice(0, 19);
}
function labelMs(ms, withDay = true) { return labelIso(isoOfMs(ms), withDay); }
function offsetOf(iso) {
  const m = /([+-])(\d\d):(\d\d)$/.exec(iso);
  return m ? (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) * 60000 : 0;
}
function agentColor(name) {
  const names = state.status ? state.status.agents.map(a => a.agent) : [];
  const i = names.indexOf(name);
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return COLORS[(i >= 0 ? i : h) % COLORS.length];
}
function agentChip(name) {
  return el("span", {}, el("span", { class: "agent-chip", style: { background: agentColor(name) } }),
            el("span", { class: "who", text: name }));
}
const frameUrl = (agent, ms, within) =>
  `/api/frames/${encodeURIComponent(agent)}/${Math.round(ms)}.jpg${within ? "?within=" + within : ""}`;

// -- views ---------------------------------------------------------------------------------
function route() {
  const [view, query] = (location.hash.slice(1) || "ask").split("?");
  const name = ["ask", "timeline", "now"].includes(view) ? view : "ask";
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + name;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === name);
  clearInterval(state.nowTimer);
  if (name === "timeline") openTimeline(new URLSearchParams(query || ""));
  if (name === "now") { refreshNow(); state.nowTimer = setInterval(refreshNow, 3000); }
}

async function loadStatus() {
  try {
    state.status = await api("/api/status");
    state.day1 = state.status.info.house ? state.status.info.house.day1 : null;
    const pill = $("#daemon-state");
    const up = state.status.mqtt.connected;
    pill.textContent = up ? "online" : "MQTT link down";
    pill.className = "pill " + (up ? "online" : "offline");
  } catch (e) {
    $("#daemon-state").textContent = e.code === "unauthorized" ? "token needed" : "unreachable";
    $("#daemon-state").className = "pill offline";
  }
}

// -- Ask -----------------------------------------------------------------------------------
const EXAMPLE = { q: "Who used the screwdriver first?", options: ["Tasha", "Alice", "Shure", "Lucia"], as_of: "DAY1 13:00" };

function stage(name) {
  const order = ["working", "evidence", "answer"];
  for (const li of document.querySelectorAll("#progress li")) {
    const i = order.indexOf(li.dataset.stage), j = order.indexOf(name);
    li.className = i < j ? "done" : i === j ? "now" : "";
  }
}

function evidenceItem(u, frames, pending) {
  const near = frames.find(f => f.agent === u.agent && f.ts_ms >= u.start_ms - 60000 && f.ts_ms <= u.end_ms + 60000);
  const thumb = near ? el("img", { class: "thumb", src: frameUrl(near.agent, near.ts_ms), alt: `frame of ${u.agent}`, loading: "lazy" })
                     : el("div", { class: "nothumb", title: "no frame stored near this moment" });
  const when = `${labelIso(u.start)}–${u.end.slice(11, 19)}`;
  const link = el("a", { href: `#timeline?t=${u.start_ms}&agent=${encodeURIComponent(u.agent)}`, class: "small", text: "on the timeline" });
  return el("li", { class: pending ? "pending" : "" }, thumb,
    el("div", {}, agentChip(u.agent), el("span", { class: "when", text: when }),
       u.cited ? el("span", { class: "cited", text: "cited" }) : null, " ", link,
       u.lines && u.lines.length ? el("div", { class: "bears", text: u.lines.join(" / "), title: "the lines that bear out the answer" }) : null,
       el("div", { class: "text", text: u.text })));
}

function renderAnswer(a) {
  $("#answer").hidden = false; $("#reading").hidden = true;
  $("#answer-text").textContent = a.answer || "(no answer)";
  const t = a.timings_ms || {};
  $("#answer-meta").textContent = `as of ${labelIso(a.as_of)} · ${a.mode === "timed" ? "the time of the excerpt that holds the question's words" : a.mode === "quoted" ? "a few of the things said in that span, quoted from the evidence" : a.cited ? "cited evidence first" : "no citation: the first units shown"}`
    + ` · ${a.context.units} units, ${a.context.tokens} tokens · ${((t.total || 0) / 1000).toFixed(1)} s`;
  const frames = a.frames || [];
  const strip = $("#frames");
  strip.replaceChildren(...frames.map(f => el("figure", {},
    el("img", { src: frameUrl(f.agent, f.ts_ms), alt: `frame of ${f.agent}`, loading: "lazy" }),
    el("figcaption", { text: `${f.agent} ${labelIso(f.ts)}` }))));
  const cited = a.evidence.filter(u => u.cited || !a.cited).slice(0, a.cited ? undefined : 3);
  const rest = a.evidence.filter(u => !cited.includes(u));
  $("#evidence").replaceChildren(...cited.map(u => evidenceItem(u, frames, false)));
  $("#more-evidence summary span").textContent = rest.length;
  $("#more-evidence ul").replaceChildren(...rest.map(u => evidenceItem(u, frames, false)));
  $("#more-evidence").hidden = !rest.length;
  const plan = a.plan || { requests: [] };
  $("#plan div").replaceChildren(el("p", { class: "small", text: `planner: ${plan.planner}` }),
    el("ul", {}, ...plan.requests.map(r => el("li", {}, agentChip(r.agent), el("span", { text: ` — ${r.query}` })))));
  $("#events-used summary span").textContent = (a.events || []).length;
  $("#events-used ul").replaceChildren(...(a.events || []).map(eventItem));
}

function eventItem(e) {
  const where = e.where ? ` at ${e.where}` : "", how = e.how ? ` (${e.how})` : "";
  return el("li", { class: "event" }, el("span", { class: "when", text: `${labelIso(e.start)}–${e.end.slice(11, 16)}` }), " ",
    el("b", { text: (e.who || []).join(", ") }), el("span", { text: `: ${e.what}${where}${how}` }));
}

async function ask(ev) {
  ev.preventDefault();
  const question = $("#q").value.trim();
  if (!question) return;
  const options = [...document.querySelectorAll(".opt")].map(i => i.value.trim()).filter(Boolean);
  const body = { id: "web-" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8), question, options };
  if ($("#as-of").value.trim()) body.as_of = $("#as-of").value.trim();
  if ($("#asker").value.trim()) body.asker = $("#asker").value.trim();
  $("#ask-error").hidden = true; $("#answer").hidden = true; $("#progress").hidden = false; $("#reading").hidden = true;
  $("#evidence").replaceChildren(); $("#ask-button").disabled = true;
  stage("working");
  const t0 = performance.now();
  const tick = setInterval(() => { $("#elapsed").textContent = `${((performance.now() - t0) / 1000).toFixed(0)} s`; }, 500);
  try {
    const res = await fetch("/api/ask?stream=1", { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw Object.assign(new Error(err.error || res.statusText), { code: err.code });
    }
    const reader = res.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const chunk = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        onChunk(chunk);
      }
    }
  } catch (e) {
    showError(e);
  } finally {
    clearInterval(tick); $("#ask-button").disabled = false;
  }
}

function onChunk(c) {
  if (c.status === "working" && c.stage === "answering") {  // what the model reads, while it reads
    stage("evidence");
    $("#reading").hidden = false;
    $("#reading summary span").textContent = `The model is reading ${c.context.length} moments and ${c.events} shared-memory events…`;
    $("#reading ul").replaceChildren(...c.context.map(u => evidenceItem(u, [], true)));
  } else if (c.status === "working") stage("working");
  else if (c.status === "partial") {
    stage("evidence");
    $("#evidence").append(evidenceItem(c.evidence, [], true));
  } else if (c.status === "ok") { stage("answer"); renderAnswer(c); $("#progress li[data-stage=answer]").className = "done"; }
  else if (c.status === "error") showError(Object.assign(new Error(c.error), { code: c.code }));
}

function showError(e) {
  $("#progress").hidden = true;
  const box = $("#ask-error");
  box.hidden = false;
  box.textContent = `${e.code || "error"}: ${e.message}`;
}

// -- Timeline --------------------------------------------------------------------------------
async function openTimeline(params) {
  if (!state.status) await loadStatus();
  const days = state.status.memory.days;
  const t = params.get("t") ? Number(params.get("t")) : null;
  let day = t != null ? days.find(d => d.from_ms <= t && t < d.to_ms) : null;
  day = day || (state.tl && state.tl.day) || days[days.length - 1];
  $("#days").replaceChildren(...days.map(d => el("button", { type: "button", text: d.label, title: d.date,
    class: day && d.day === day.day ? "active" : "", onclick: () => { state.selected = null; showSpan(d, null); } })));
  if (!day) { $("#timeline").replaceChildren(el("p", { class: "muted", text: "Nothing in the memory yet." })); return; }
  const hour = t != null ? t - ((t - day.from_ms) % 3600000) : (state.tl && state.tl.day === day ? state.tl.hour : null);
  await showSpan(day, hour);
  if (t != null && params.get("agent")) select(params.get("agent"), t);
}

async function showSpan(day, hour) {
  for (const b of document.querySelectorAll("#days button")) b.classList.toggle("active", b.textContent === day.label);
  const from = hour != null ? hour : day.from_ms, to = hour != null ? hour + 3600000 : day.to_ms;
  const tl = await api(`/api/timeline?from=${from}&to=${to}`);
  state.offsetMs = offsetOf(tl.from);
  state.tl = { day, hour, data: tl };
  $("#zoom-label").textContent = hour != null ? `${day.label} ${labelMs(hour, false).slice(0, 5)}–${labelMs(hour + 3600000, false).slice(0, 5)}, 1-minute blocks`
                                              : `${day.label} (${day.date}), 10-minute windows`;
  $("#zoom-out").hidden = hour == null;
  drawTimeline();
}

function pct(ms) { const { from_ms, to_ms } = state.tl.data; return ((ms - from_ms) / (to_ms - from_ms)) * 100; }

function drawTimeline() {
  const tl = state.tl.data, span = tl.to_ms - tl.from_ms, hourView = span <= 3 * 3600000;
  const step = hourView ? 600000 : 3600000;
  const axis = el("div", { class: "tl-lane" });
  for (let t = tl.from_ms; t < tl.to_ms; t += step)
    axis.append(el("span", { class: "tick", style: { left: pct(t) + "%" }, text: labelMs(t, false).slice(0, 5) }));
  const rows = [el("div", { class: "tl-row tl-axis" }, el("div", { class: "name" }), axis)];
  const evLane = el("div", { class: "tl-lane", id: "events-lane" });
  for (const w of tl.windows) {
    if (!w.events && w.state !== "pending") continue;
    const cell = el("div", { class: "cell win" + (w.events ? "" : " pending"), "data-start": w.start_ms,
      title: `${labelMs(w.start_ms)}: ${w.events} events (${w.state})`, text: w.events ? String(w.events) : "",
      style: { left: pct(Math.max(w.start_ms, tl.from_ms)) + "%", width: Math.max(0.3, pct(Math.min(w.end_ms, tl.to_ms)) - pct(Math.max(w.start_ms, tl.from_ms)) - 0.1) + "%" },
      onclick: (ev) => { ev.stopPropagation(); selectWindow(w.start_ms); } });
    evLane.append(cell);
  }
  rows.push(el("div", { class: "tl-row" }, el("div", { class: "name", text: "shared memory" }), evLane));
  for (const agent of tl.agents) {
    const lane = el("div", { class: "tl-lane agent-lane", "data-agent": agent, onclick: (ev) => {
      const r = lane.getBoundingClientRect();
      select(agent, tl.from_ms + ((ev.clientX - r.left) / r.width) * span);
    } });
    const cells = tl.coverage[agent] || [];
    const maxOf = k => Math.max(1, ...cells.map(c => c[k]));
    const max = { caption: maxOf("caption") , transcript: maxOf("transcript"), frame: maxOf("frame") };
    for (const c of cells) {
      for (const k of ["caption", "transcript", "frame"]) {
        const n = c[k] + (k === "caption" ? c.frame_caption : 0);
        if (!n) continue;
        lane.append(el("div", { class: "cell " + k, title: `${labelMs(c.t)} ${k}: ${n}`,
          style: { left: pct(c.t) + "%", width: Math.max(0.25, (tl.bucket_ms / span) * 100 - 0.08) + "%", opacity: 0.35 + 0.65 * Math.min(1, n / max[k]) } }));
      }
    }
    rows.push(el("div", { class: "tl-row" }, el("div", { class: "name" }, agentChip(agent)), lane));
  }
  $("#timeline").replaceChildren(...rows);
  if (state.selected) drawCursor(state.selected.t);
}

function drawCursor(t) {
  for (const c of document.querySelectorAll(".cursor")) c.remove();
  if (t < state.tl.data.from_ms || t >= state.tl.data.to_ms) return;
  for (const lane of document.querySelectorAll(".tl-lane:not(#events-lane)"))
    if (!lane.closest(".tl-axis")) lane.append(el("div", { class: "cursor", style: { left: pct(t) + "%" } }));
}

async function select(agent, t) {
  t = Math.round(t);
  state.selected = { agent, t };
  drawCursor(t);
  const ws = t - (t % 600000), we = ws + 600000;
  const hourView = state.tl.data.to_ms - state.tl.data.from_ms <= 3 * 3600000;
  const [from, to] = hourView ? [t - 90000, t + 90000] : [ws, we];
  $("#detail").hidden = false;
  $("#detail-title").replaceChildren(agentChip(agent), el("span", { class: "when", text: `${labelMs(t)} · window ${labelMs(ws, false).slice(0, 5)}–${labelMs(we, false).slice(0, 5)}` }),
    " ", el("button", { type: "button", class: "link", text: "zoom to this hour", onclick: () => showSpan(state.tl.day, t - ((t - state.tl.day.from_ms) % 3600000)) }));
  const img = $("#detail-frame img"), cap = $("#detail-frame figcaption");
  img.hidden = true; cap.textContent = "looking for a frame…";
  img.onload = () => { img.hidden = false; cap.textContent = `nearest frame of ${agent}`; };
  img.onerror = () => { img.hidden = true; cap.textContent = "no frame stored within 10 minutes of this moment"; };
  img.src = frameUrl(agent, t, 600);
  const [lines, events] = await Promise.all([
    api(`/api/lines?agent=${encodeURIComponent(agent)}&from=${from}&to=${to}`),
    api(`/api/events?from=${ws}&to=${we}`)]);
  let nearest = null, best = Infinity;
  const items = lines.lines.map(l => {
    const li = el("li", { class: "line" }, el("span", { class: "when", text: labelIso(l.start, false) }), " ",
      el("span", { class: "kind", text: l.kind === "transcript" ? "said" : l.kind === "frame_caption" ? "saw" : "" }),
      el("span", { text: l.speaker ? `${l.speaker}: ${l.text}` : l.text }));
    if (Math.abs(l.start_ms - t) < best) { best = Math.abs(l.start_ms - t); nearest = li; }
    return li;
  });
  $("#detail-lines").replaceChildren(...(items.length ? items : [el("li", { class: "muted", text: "no lines here" })]));
  if (nearest) { nearest.classList.add("near"); nearest.scrollIntoView({ block: "nearest" }); }
  $("#detail-events").replaceChildren(...(events.events.length ? events.events.map(eventItem)
    : [el("li", { class: "muted", text: "no events for this window (yet)" })]));
}

async function selectWindow(ws) {
  const tl = state.tl;
  if (tl.hour == null) await showSpan(tl.day, ws - ((ws - tl.day.from_ms) % 3600000));
  const agent = (state.selected && state.selected.agent) || state.tl.data.agents[0];
  if (agent) await select(agent, ws + 300000);
}

// -- Now -----------------------------------------------------------------------------------
function dl(target, pairs) {
  $(target).replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v == null ? "–" : String(v) })]));
}
function mb(bytes) { return bytes == null ? null : `${(bytes / 1048576).toFixed(1)} MB`; }
function ago(s) { if (!s) return null; const d = Date.now() / 1000 - s; return d < 90 ? `${d.toFixed(0)} s` : d < 5400 ? `${(d / 60).toFixed(0)} min` : `${(d / 3600).toFixed(1)} h`; }

async function refreshNow() {
  let st, stats;
  try { [st, stats] = await Promise.all([api("/api/status"), api("/api/stats")]); } catch (e) { return; }
  state.status = st;
  const i = st.info, m = st.memory, q = stats.queues || {}, sp = stats.speech, fr = stats.frames;
  const asked = (stats.questions || {}).answered, webAsked = ((stats.web || {}).questions || {}).answered;
  dl("#now-daemon", [["version", i.version], ["model", i.model], ["up for", ago(i.started)], ["MQTT", st.mqtt.connected ? `connected (${st.mqtt.host})` : `down: ${st.mqtt.last_error || ""}`],
    ["memory file", i.db], ["house", i.house ? `DAY1 = ${i.house.day1}, ${i.house.timezone}` : null]]);
  dl("#now-memory", [["captions and lines", m.observations], ["agents", m.agents], ["events", m.events],
    ["windows waiting for consolidation", (stats.backlog || {}).windows_pending], ["frames kept", fr ? fr.kept : m.frames], ["frames on disk", mb(fr ? fr.kept_bytes : m.frame_bytes)]]);
  dl("#now-flow", [["captions/s", stats.captions_per_s], ["stored since start", (stats.captions || {}).stored], ["queues (captions / questions / outbox)", `${q.captions} / ${q.questions} / ${q.outbox}`],
    ["questions answered (MQTT / web)", `${asked ?? "–"} / ${webAsked ?? "–"}`], ["answer p50", stats.answer_ms_p50 ? `${(stats.answer_ms_p50 / 1000).toFixed(1)} s` : null],
    ["speech real-time factor", sp ? sp.rtf : "off"], ["speech backlog", sp ? `${sp.backlog_s} s` : null]]);
  $("#now-agents tbody").replaceChildren(...st.agents.map(a => el("tr", {}, el("td", {}, agentChip(a.agent)),
    el("td", { class: a.status, text: a.status + (a.since ? ` (${ago(a.since)})` : "") }), el("td", { text: a.watermark ? labelIso(a.watermark) : "–" }))));
  $("#now-errors tbody").replaceChildren(...(st.errors.length ? st.errors.map(e => el("tr", {},
    el("td", { text: new Date(e.time * 1000).toLocaleTimeString() }), el("td", {}, el("code", { text: e.code })),
    el("td", { text: e.message }), el("td", { text: [e.agent, e.topic, e.id].filter(Boolean).join(" ") }))) : [el("tr", {}, el("td", { colspan: 4, class: "muted", text: "none" }))]));
}

// -- start ------------------------------------------------------------------------------------
document.addEventListener("DOMContentLoaded", async () => {
  if (new URLSearchParams(location.search).has("token")) history.replaceState(null, "", location.pathname + location.hash);
  $("#ask-form").addEventListener("submit", ask);
  $("#example").addEventListener("click", () => {
    $("#q").value = EXAMPLE.q;
    document.querySelectorAll(".opt").forEach((o, i) => { o.value = EXAMPLE.options[i] || ""; });
    $("#as-of").value = EXAMPLE.as_of;
  });
  $("#zoom-out").addEventListener("click", () => showSpan(state.tl.day, null));
  window.addEventListener("hashchange", route);
  await loadStatus();
  route();
});
