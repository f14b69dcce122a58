// dcplace's cluster page: what `dcplace serve` holds, read from its own HTTP API every few seconds (docs/engine.md,
// "The cluster page"). It only reads: nothing here changes the cluster. Every value from the service is put into the
// page as text (textContent, attributes), never as HTML: machine and VM ids are the clients' strings.
"use strict";

const API = new URL("../", location.href); // the service's root, under whatever prefix a proxy serves it
const TOKEN_KEY = "dcplace-token";
const DENSE_FROM = 600; // machines: smaller tiles from here on
const VM_ROWS = 200; // VMs listed for the selected machine
const EVENT_ROWS = 20; // the newest journal entries shown for the selected machine, and for a VM found

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const every = Number(params.get("every"));
const everyMs = (Number.isFinite(every) && every >= 1 ? Math.min(every, 3600) : 5) * 1000; // ?every=Infinity polled
const TOKEN_CHARS = /^[A-Za-z0-9._~+/=-]+$/; // what may follow "Bearer" (RFC 6750); others fail in fetch itself

let token = sessionStorage.getItem(TOKEN_KEY);
let paused = false;
let timer = null;
let selected = null; // the id of the machine whose detail is shown
let lastGood = null; // when the page was last brought up to date
let lastMachines = [];
let network = true; // whether the service serves network jobs (serve --network): false after GET /network's 404
let eventsOf = ""; // the machine (and its VM count and status) whose events are shown: read again when it changes
const tiles = new Map(); // machine id -> its tile, kept between refreshes
const racks = new Map(); // rack name -> its section

class Refused extends Error {}

const NUMBER = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 }); // one: each made anew cost 0.1 ms

function fmt(x) {
  return NUMBER.format(x);
}

function height(used, total) {
  return total > 0 ? `${((100 * used) / total).toFixed(1)}%` : "0%";
}

const MAX_BARS = 4; // NUMA nodes drawn apart; past that one machine-wide pair (at 8 nodes a bar was 0.6 px wide)

function bars(m) {
  // [cores used, cores, GB used, GB] per pair of bars drawn
  const u = used(m);
  if (m.cpu.length <= MAX_BARS) return m.cpu.map((c, i) => [u.cpu[i], c, u.mem[i], m.mem[i]]);
  return [[sum(u.cpu), sum(m.cpu), sum(u.mem), sum(m.mem)]];
}

function pct(used, total) {
  return total > 0 ? `${fmt((100 * used) / total)} %` : "-";
}

function sum(xs) {
  return xs.reduce((a, b) => a + b, 0);
}

async function get(path) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  let answer;
  try {
    // a redirect would be another resource than asked for (an id "." resolved to the whole listing)
    answer = await fetch(new URL(path, API), { headers, cache: "no-store", redirect: "error" });
  } catch (e) {
    throw new Error(`the service did not answer (${e.message})`);
  }
  if (answer.status === 401) {
    askForToken(token ? "The token was refused; give another." : null);
    throw new Refused("this service needs a bearer token");
  }
  const body = await answer.json().catch(() => null);
  if (!answer.ok) {
    const said = body && typeof body.detail === "string" ? body.detail : `HTTP ${answer.status}`;
    const error = new Error(said);
    error.status = answer.status;
    throw error;
  }
  return { body, next: answer.headers.get("Link") };
}

function askForToken(why) {
  const form = $("login");
  form.hidden = false;
  if (why) showProblem(why);
  $("token").focus();
}

function showProblem(text) {
  const box = $("problem");
  box.textContent = text;
  box.hidden = !text;
}

// -- totals --------------------------------------------------------------------------------------------------------
function item(list, name, value) {
  const div = document.createElement("div");
  const dt = document.createElement("dt");
  const dd = document.createElement("dd");
  dt.textContent = name;
  dd.textContent = value;
  div.append(dt, dd);
  list.append(div);
}

function renderTotals(state) {
  const list = $("totals");
  list.replaceChildren();
  const m = state.machines;
  item(list, "machines active / drained / failed", `${m.active} / ${m.drained} / ${m.failed}`);
  item(list, "machines in use", fmt(state.machines_in_use));
  item(list, "VMs", fmt(state.vms));
  const cap = state.capacity;
  const used = state.allocated;
  item(list, "cores allocated", `${fmt(used.cpu)} of ${fmt(cap.cpu)} (${pct(used.cpu, cap.cpu)})`);
  item(list, "memory allocated, GB", `${fmt(used.mem)} of ${fmt(cap.mem)} (${pct(used.mem, cap.mem)})`);
  const c = state.counters;
  item(list, "placed / rejected since start", `${fmt(c.placed)} / ${fmt(c.rejected)}`);
  item(list, "released / dropped", `${fmt(c.released)} / ${fmt(c.dropped)}`);
  item(list, "migrated / re-optimisations", `${fmt(c.migrated)} / ${fmt(c.reoptimisations)}`);
}

function renderReopt(report) {
  const p = $("reopt");
  if (!report || Object.keys(report).length === 0) {
    p.textContent = "none yet (serve --reoptimise-every or --reoptimise-below runs them)";
  } else if (report.error) {
    p.textContent = `could not re-optimise: ${report.error}`;
  } else {
    const at = report.time ? `${when(report.time)} ` : ""; // UTC, as the journal beside it (it was local time)
    p.textContent =
      `${at}(${report.trigger}): ${report.applied} of ${report.planned} moves applied, ` +
      `machines in use ${report.machines_before} -> ${report.machines_after} (target ${report.machines_target}), ` +
      `${fmt(report.gb_moved)} GB moved; plan ${report.verified ? "verified" : "NOT verified"}. ${report.reason}`;
  }
}

// -- network jobs (serve --network) --------------------------------------------------------------------------------
async function getNetwork() {
  if (!network) return null;
  try {
    return (await get("network")).body;
  } catch (e) {
    if (e instanceof Refused) throw e;
    if (e.status === 404) {
      network = false; // a service without network jobs: not asked again
      return null;
    }
    return { failed: e.message }; // said in its own section: the VMs' view goes on (their database is another)
  }
}

function renderNetwork(n) {
  $("network-section").hidden = !n;
  if (!n) return;
  const list = $("network");
  list.replaceChildren();
  $("tiers").tBodies[0].replaceChildren();
  $("tiers").hidden = Boolean(n.failed);
  if (n.failed) {
    $("network-where").textContent = "";
    item(list, "network jobs not read", n.failed);
    return;
  }
  $("network-where").textContent = `on ${n.topology}, placed by ${n.policy}`;
  item(list, "jobs running", fmt(n.jobs));
  item(list, "servers / links", `${fmt(n.servers)} / ${fmt(n.links)}`);
  item(list, "CPU units in use", `${fmt(n.cpu_used)} of ${fmt(n.cpu_capacity)} (${pct(n.cpu_used, n.cpu_capacity)})`);
  item(list, "memory units in use", `${fmt(n.mem_used)} of ${fmt(n.mem_capacity)} (${pct(n.mem_used, n.mem_capacity)})`);
  if (n.drained && n.drained.length) {
    const some = n.drained.slice(0, 8).join(", ");
    const names = n.drained.length > 8 ? `${some} and ${fmt(n.drained.length - 8)} more` : some;
    const held = `${fmt(n.cpu_drained)} CPU, ${fmt(n.mem_drained)} memory units held apart`;
    item(list, "servers drained", `${names} (${held})`);
  }
  const c = n.counters;
  item(list, "placed / rejected / released since start", `${fmt(c.placed)} / ${fmt(c.rejected)} / ${fmt(c.released)}`);
  const body = $("tiers").tBodies[0];
  body.replaceChildren();
  for (const [tier, share] of Object.entries(n.bw_share_by_tier)) {
    const bar = document.createElement("meter");
    Object.assign(bar, { min: 0, max: 1, value: share });
    bar.setAttribute("aria-label", `${tier} bandwidth in use`);
    const tr = row(body, [tier, pct(share, 1)]);
    tr.insertCell().append(bar);
  }
}

// -- the machine map -----------------------------------------------------------------------------------------------
function used(m) {
  return { cpu: m.cpu.map((c, i) => c - m.free_cpu[i]), mem: m.mem.map((g, i) => g - m.free_mem[i]) };
}

function share(m) {
  const u = used(m);
  return Math.max(sum(u.cpu) / Math.max(sum(m.cpu), 1e-9), sum(u.mem) / Math.max(sum(m.mem), 1e-9));
}

function describe(m) {
  const u = used(m);
  const vms = m.vms === 1 ? "1 VM" : `${fmt(m.vms)} VMs`;
  return (
    `${m.id}, ${m.status}${m.rack ? `, rack ${m.rack}` : ""}: ` +
    `cores ${fmt(sum(u.cpu))} of ${fmt(sum(m.cpu))} used, memory ${fmt(sum(u.mem))} of ${fmt(sum(m.mem))} GB, ${vms}`
  );
}

function newTile(id) {
  const tile = document.createElement("button");
  tile.type = "button";
  tile.className = "m";
  tile.dataset.id = id;
  tile.addEventListener("click", () => select(id));
  return tile;
}

function fill(tile, m) {
  const key = `${m.status}|${m.vms}|${m.free_cpu}|${m.free_mem}|${m.cpu}|${m.mem}|${m.rack}`;
  tile.classList.toggle("selected", m.id === selected);
  if (tile.dataset.key === key) return; // as drawn already
  tile.dataset.key = key;
  const pairs = bars(m);
  if (tile.childElementCount !== pairs.length) {
    tile.replaceChildren();
    for (let i = 0; i < pairs.length; i++) {
      const node = document.createElement("span");
      node.className = "node";
      for (const kind of ["cpu", "mem"]) {
        const bar = document.createElement("span");
        bar.className = `bar ${kind}`;
        bar.append(document.createElement("i"));
        node.append(bar);
      }
      tile.append(node);
    }
  }
  [...tile.children].forEach((node, i) => {
    const [cpuUsed, cpu, memUsed, mem] = pairs[i];
    node.children[0].firstChild.style.height = height(cpuUsed, cpu);
    node.children[1].firstChild.style.height = height(memUsed, mem);
  });
  tile.classList.toggle("drained", m.status === "drained");
  tile.classList.toggle("failed", m.status === "failed");
  const text = describe(m);
  tile.setAttribute("aria-label", text);
  tile.title = text;
}

function rackSection(name) {
  let section = racks.get(name);
  if (!section) {
    section = document.createElement("div");
    section.className = "rack";
    const heading = document.createElement("h3");
    const row = document.createElement("div");
    row.className = "tiles";
    section.append(heading, row);
    racks.set(name, section);
  }
  return section;
}

function same(children, wanted) {
  return children.length === wanted.length && wanted.every((x, i) => children[i] === x);
}

function renderMap(machines) {
  lastMachines = machines;
  const byRack = new Map(); // racks in the order policies see their first machine
  for (const m of machines) {
    const name = m.rack ?? "";
    if (!byRack.has(name)) byRack.set(name, []);
    byRack.get(name).push(m);
  }
  const order = $("order").value;
  if (order !== "policy") {
    const sign = order === "most" ? -1 : 1;
    for (const members of byRack.values()) members.sort((a, b) => sign * (share(a) - share(b)));
  }
  const map = $("map");
  map.classList.toggle("dense", machines.length >= DENSE_FROM);
  const seen = new Set();
  const sections = [];
  for (const [name, members] of byRack) {
    const section = rackSection(name);
    const inUse = members.filter((m) => m.vms > 0).length;
    const count = members.length === 1 ? "1 machine" : `${members.length} machines`;
    section.firstChild.textContent = `${name ? `rack ${name}` : "no rack"}: ${count}, ${inUse} in use`;
    const row = section.lastChild;
    const wanted = members.map((m) => {
      seen.add(m.id);
      let tile = tiles.get(m.id);
      if (!tile) {
        tile = newTile(m.id);
        tiles.set(m.id, tile);
      }
      fill(tile, m);
      return tile;
    });
    if (!same(row.children, wanted)) row.replaceChildren(...wanted); // moving every tile lays them all out again
    sections.push(section);
  }
  for (const id of [...tiles.keys()]) if (!seen.has(id)) tiles.delete(id);
  for (const name of [...racks.keys()]) if (!byRack.has(name)) racks.delete(name);
  if (!same(map.children, sections)) map.replaceChildren(...sections);
  applyFind();
}

function applyFind() {
  const text = $("find").value.trim().toLowerCase();
  let hits = 0;
  for (const [id, tile] of tiles) {
    const hit = !text || id.toLowerCase().includes(text);
    tile.classList.toggle("dim", !hit);
    hits += hit ? 1 : 0;
  }
  if ($("found").dataset.vm) return; // a VM's whereabouts stay until the box changes
  if (!text) $("found").textContent = "";
  else if (hits) $("found").textContent = `${hits} machine(s) match`;
  else $("found").textContent = "no machine matches; Enter looks for a VM of that id";
}

async function findVm() {
  const text = $("find").value.trim();
  if (!text) return;
  if (tiles.has(text)) return select(text);
  $("found").dataset.vm = text;
  if (text === "." || text === "..") {
    // a URL takes "." and ".." (and their %2e spellings) as path steps: GET /vms/. is the listing
    $("found").textContent = `a VM called ${text} cannot be looked up from this page; GET /vms lists it`;
    return;
  }
  try {
    const { body } = await get(`vms/${encodeURIComponent(text)}`);
    if (!body || body.id !== text) throw Object.assign(new Error("not found"), { status: 404 });
    const where = body.node === null ? "spread over every NUMA node" : `NUMA node ${body.node}`;
    const said = `VM ${body.id} is on machine ${body.machine}, ${where} (${fmt(body.cpu)} cores, ${fmt(body.mem)} GB)`;
    $("found").textContent = said;
    select(body.machine);
    const history = await vmHistory(text);
    if ($("found").dataset.vm === text && history) $("found").textContent = `${said}. Its history: ${history}`;
  } catch (e) {
    if (e instanceof Refused) return;
    if (e.status !== 404) {
      $("found").textContent = e.message;
      return;
    }
    $("found").textContent = `no machine and no VM is called ${text}`;
    const history = await vmHistory(text); // a VM that was here once
    if ($("found").dataset.vm === text && history) $("found").textContent += `; the journal has: ${history}`;
  }
}

// -- the journal ---------------------------------------------------------------------------------------------------
function when(at) {
  return new Date(at * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function what(e) {
  // one entry as a person reads it; every value is text, put in with textContent
  const on = e.machine === null ? "" : ` ${e.machine}${e.node === null ? "" : ` node ${e.node}`}`;
  const by = e.detail && typeof e.detail.by === "string" ? ` (${e.detail.by})` : ""; // why, where not a client's call
  if (e.event === "placed") return `placed on${on}${by}`;
  if (e.event === "moved") return `moved from ${e.detail.from} to${on}${by}`;
  if (e.event === "released" || e.event === "dropped") return `${e.event} from${on}${by}`;
  if (e.event === "rejected") return `rejected (${e.detail.reason})`;
  if (e.event === "pinned" || e.event === "unpinned") return `${e.event} on${on}`;
  return e.event.replace("machine-", "machine ");
}

async function renderEvents(m) {
  const body = $("events").tBodies[0];
  try {
    const { body: page } = await get(`journal?machine=${encodeURIComponent(m.id)}&tail=${EVENT_ROWS}`);
    if (selected !== m.id) return;
    body.replaceChildren();
    for (const e of page.entries.reverse()) {
      const size = e.cpu === null ? "" : `${fmt(e.cpu)} cores, ${fmt(e.mem)} GB`;
      row(body, [when(e.at), e.vm ?? "", what(e), size]);
    }
    $("events-note").textContent = page.entries.length
      ? `the newest ${page.entries.length}, newest first`
      : "none in the journal";
  } catch (e) {
    if (selected !== m.id) return;
    body.replaceChildren();
    eventsOf = ""; // read again at the next refresh
    if (!(e instanceof Refused)) $("events-note").textContent = `its events could not be read: ${e.message}`;
  }
}

async function vmHistory(id) {
  // the newest entries of the VM found, oldest first, as one line
  try {
    const { body } = await get(`journal?vm=${encodeURIComponent(id)}&tail=${EVENT_ROWS}`);
    return body.entries.map((e) => `${what(e)} at ${when(e.at)}`).join("; ");
  } catch (e) {
    return e instanceof Refused ? "" : `its history could not be read: ${e.message}`;
  }
}

// -- one machine ---------------------------------------------------------------------------------------------------
function row(body, cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    td.textContent = c;
    tr.append(td);
  }
  body.append(tr);
  return tr;
}

function select(id) {
  if (id !== selected) {
    $("vms").tBodies[0].replaceChildren(); // not the machine before's VMs (or events) under this one's title
    $("vms-note").textContent = "";
    $("events").tBodies[0].replaceChildren();
    $("events-note").textContent = "";
    eventsOf = "";
  }
  selected = id;
  for (const [key, tile] of tiles) tile.classList.toggle("selected", key === id);
  renderDetail();
}

async function renderDetail() {
  const m = lastMachines.find((x) => x.id === selected);
  const panel = $("detail");
  if (!m) {
    panel.hidden = true;
    selected = null; // the machine is gone: one registered later under its id is not selected by that
    return;
  }
  panel.hidden = false;
  $("detail-title").textContent = describe(m);
  const u = used(m);
  const nodes = $("nodes").tBodies[0];
  nodes.replaceChildren();
  m.cpu.forEach((c, i) =>
    row(nodes, [String(i), `${fmt(u.cpu[i])} / ${fmt(c)}`, `${fmt(u.mem[i])} / ${fmt(m.mem[i])}`]),
  );
  const seen = JSON.stringify([m.id, m.vms, m.status]);
  if (seen !== eventsOf) {
    // a machine's events cost a scan of the journal: read when it is chosen or changes, not on every refresh
    eventsOf = seen;
    renderEvents(m);
  }
  const vms = $("vms").tBodies[0];
  try {
    const { body, next } = await get(`vms?machine=${encodeURIComponent(m.id)}&limit=${VM_ROWS}`);
    if (selected !== m.id) return; // another machine was chosen meanwhile
    vms.replaceChildren();
    for (const v of body) {
      const node = v.node === null ? "all" : String(v.node);
      row(vms, [v.id, fmt(v.cpu), fmt(v.mem), node, v.pinned ? "yes" : "", v.uid ?? ""]);
    }
    $("vms-note").textContent = next ? `the first ${body.length} of ${fmt(m.vms)} VMs` : `${body.length} VM(s)`;
  } catch (e) {
    if (selected !== m.id) return;
    vms.replaceChildren();
    if (!(e instanceof Refused)) $("vms-note").textContent = `its VMs could not be listed: ${e.message}`;
  }
}

// -- the refresh loop ----------------------------------------------------------------------------------------------
async function refresh() {
  clearTimeout(timer);
  const t0 = performance.now();
  let took = 0;
  try {
    const [state, machines, reopt, net] = await Promise.all([
      get("state"),
      get("machines"),
      get("reoptimise/last?moves=false"),
      getNetwork(),
    ]);
    const read = performance.now() - t0;
    $("login").hidden = true;
    showProblem("");
    renderTotals(state.body);
    renderReopt(reopt.body);
    renderNetwork(net);
    renderMap(machines.body);
    if (selected) renderDetail();
    void $("map").offsetHeight; // the layout too, in the time drawn (painting follows)
    took = performance.now() - t0;
    lastGood = new Date().toLocaleTimeString();
    $("status").textContent =
      `${fmt(machines.body.length)} machines; updated ${lastGood} ` +
      `(read in ${fmt(read)} ms, drawn in ${fmt(took - read)} ms)` + (paused ? "; paused" : "");
    Object.assign(document.body.dataset, { loaded: "yes", readMs: read, drawMs: took - read });
  } catch (e) {
    took = performance.now() - t0;
    $("status").textContent = lastGood ? `not updated since ${lastGood}` : "not loaded";
    if (e instanceof Refused) return; // no polling without a token: a token given refreshes
    showProblem(`Not updated: ${e.message}`);
  }
  // a big cluster's listing is not fetched more than a tenth of the time
  if (!paused) timer = setTimeout(refresh, Math.max(everyMs, 10 * took));
}

document.addEventListener("DOMContentLoaded", () => {
  if (token && !TOKEN_CHARS.test(token)) token = null;
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const given = $("token").value.trim();
    $("token").value = "";
    if (!TOKEN_CHARS.test(given)) {
      showProblem("That is not a token: a token has letters, digits and . _ ~ + / = - only.");
      return;
    }
    token = given;
    sessionStorage.setItem(TOKEN_KEY, token);
    refresh();
  });
  $("pause").addEventListener("click", () => {
    paused = !paused;
    $("pause").textContent = paused ? "resume" : "pause";
    $("pause").setAttribute("aria-pressed", String(paused));
    if (paused) {
      clearTimeout(timer);
      $("status").textContent += "; paused";
    } else refresh();
  });
  $("order").addEventListener("change", () => renderMap(lastMachines));
  $("find").addEventListener("input", () => {
    delete $("found").dataset.vm;
    applyFind();
  });
  $("find").addEventListener("keydown", (event) => {
    if (event.key === "Enter") findVm();
  });
  refresh();
});
