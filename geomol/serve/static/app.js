"use strict";
// The geomol page: submit a job to /v1/jobs, follow it, show the ranked table, the plot and the downloads.
// Everything the server sends is shown with textContent (never parsed as HTML).

const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);
let pollTimer = null;

async function api(path, options) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = (response.headers.get("content-type") || "").includes("json") ? await response.json() : null;
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `${response.status} ${response.statusText}`;
    const retry = response.headers.get("retry-after");
    throw new Error(retry ? `${message} (retry in ${retry} s)` : message);
  }
  return body;
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (className) node.className = className;
  return node;
}

// ------------------------------------------------------------------ the form
function ligandMode() {
  return document.querySelector('input[name="ligand-mode"]:checked').value;
}

function showLigandMode() {
  const smiles = ligandMode() === "smiles";
  $("posed-inputs").hidden = smiles;
  $("smiles-inputs").hidden = !smiles;
}

function formData() {
  const data = new FormData();
  const add = (name, input) => { if (input.files.length) data.append(name, input.files[0]); };
  add("receptor", $("receptor"));
  if (ligandMode() === "posed") {
    add("ligands", $("ligands"));
  } else {
    add("ligands", $("smiles-file"));
    if ($("smiles").value.trim()) data.append("smiles", $("smiles").value);
    add("reference", $("reference"));
  }
  add("measured", $("measured"));
  if ($("model").value) data.append("model", $("model").value);
  if ($("pocket-cutoff").value) data.append("pocket_cutoff", $("pocket-cutoff").value);
  return data;
}

async function submitJob(event) {
  event.preventDefault();
  $("form-error").textContent = "";
  $("submit-button").disabled = true;
  try {
    const job = await api("/v1/jobs", { method: "POST", body: formData() });
    openJob(job.id);
    loadJobs();
  } catch (error) {
    $("form-error").textContent = error.message;
  } finally {
    $("submit-button").disabled = false;
  }
}

async function loadModels() {
  try {
    const models = await api("/v1/models");
    const select = $("model");
    select.replaceChildren();
    for (const model of models) {
      const option = element("option", model.name + (model.default ? " (default)" : ""));
      option.value = model.name;
      option.title = model.description;
      option.selected = model.default;
      select.append(option);
    }
  } catch (error) {
    $("form-error").textContent = `models: ${error.message}`;
  }
}

// ------------------------------------------------------------------ one job
function openJob(id) {
  clearTimeout(pollTimer);
  window.location.hash = `job=${id}`;
  $("job").hidden = false;
  $("results").hidden = true;
  $("job-id").textContent = id;
  $("job-error").textContent = "";
  pollJob(id);
}

async function pollJob(id) {
  let job;
  try {
    job = await api(`/v1/jobs/${id}`);
  } catch (error) {
    $("job-error").textContent = error.message;
    return;
  }
  $("job-state").textContent = job.state;
  $("job-state").dataset.state = job.state;
  $("job-counts").textContent = `${job.progress.done} of ${job.progress.total} ligands`;
  $("job-progress").max = Math.max(1, job.progress.total);
  $("job-progress").value = job.progress.done;
  if (job.state === "done") {
    showResults(job);
    loadJobs();
  } else if (job.state === "failed") {
    $("job-error").textContent = job.error;
    loadJobs();
  } else {
    pollTimer = setTimeout(() => pollJob(id), POLL_MS);
  }
}

// ------------------------------------------------------------------ results
const NUMBER = (digits) => (value) => (value === null || value === undefined ? "" : Number(value).toFixed(digits));
const MOLAR = (value) => {
  // the unit is chosen for the value as shown (3 digits): 10 ** -6 computes to 9.99…e-7 and is "1.00 µM",
  // never "1.00e+3 nM"
  if (value === null || value === undefined) return "";
  const units = [[1, "M"], [1e-3, "mM"], [1e-6, "µM"], [1e-9, "nM"], [1e-12, "pM"]];
  const [scale, unit] = units.find(([s]) => Number((value / s).toPrecision(3)) >= 1) || units[units.length - 1];
  return `${(value / scale).toPrecision(3)} ${unit}`;
};
const COLUMNS = [
  { key: "rank", title: "rank", numeric: true },
  { key: "depiction", title: "ligand", sortable: false },
  { key: "name", title: "name" },
  { key: "pK", title: "pK", numeric: true, show: NUMBER(2) },
  { key: "pK_std", title: "± std", numeric: true, show: NUMBER(2) },
  { key: "dG_kcal_mol", title: "ΔG kcal/mol", numeric: true, show: NUMBER(2) },
  { key: "Kd_M", title: "Kd", numeric: true, show: MOLAR },
  { key: "measured_pK", title: "measured pK", numeric: true, show: NUMBER(2), optional: true },
  { key: "core_rmsd", title: "core RMSD Å", numeric: true, show: NUMBER(2), optional: true },
  { key: "clashes", title: "clashes", numeric: true, optional: true },
  { key: "n_pocket_blocks", title: "pocket blocks", numeric: true },
  { key: "notes", title: "error / warnings" },
];
let table = { rows: [], columns: [], sortKey: "pK", descending: true, job: null };

function rankRows(rows) {
  const ranked = rows.map((row, index) => ({ ...row, index,
    notes: row.error ? `error: ${row.error}` : (row.warnings || []).map((w) => `warning: ${w}`).join("\n") }));
  const predicted = ranked.filter((r) => r.pK !== null).sort((a, b) => b.pK - a.pK);
  predicted.forEach((row, i) => { row.rank = i + 1; });
  return ranked;
}

async function showResults(job) {
  const [summary, rows] = await Promise.all([api(`/v1/jobs/${job.id}/summary`), api(`/v1/jobs/${job.id}/results.json`)]);
  table = { rows: rankRows(rows), sortKey: "pK", descending: true, job, depictions: summary.depictions,
            columns: COLUMNS.filter((c) => !c.optional || rows.some((r) => r[c.key] !== undefined && r[c.key] !== null)) };
  const counts = summary.counts;
  $("results-summary").textContent = `${counts.predicted} of ${counts.ligands} ligands predicted with ${summary.model}` +
    (counts.failed ? `, ${counts.failed} failed` : "") + (counts.warned ? `, ${counts.warned} with warnings` : "") + ".";
  $("job-notes").replaceChildren(...(summary.notes || []).map((note) => element("li", note)));
  showDownloads(job, summary.comparison);
  showPlot(job, summary.comparison);
  renderTable();
  $("results").hidden = false;
}

function showDownloads(job, comparison) {
  const links = [["results.csv", "table (CSV)"], ["results.json", "table (JSON)"], ["poses.sdf", "poses (SDF)"]];
  if (comparison && comparison.plot) links.push(["plot.png", "plot (PNG)"]);
  const box = $("downloads");
  box.replaceChildren(element("span", "Download: "));
  for (const [file, label] of links) {
    const link = element("a", label);
    link.href = `/v1/jobs/${job.id}/${file}`;
    link.setAttribute("download", "");
    box.append(link, " ");
  }
}

function showPlot(job, comparison) {
  const figure = $("plot-figure");
  figure.hidden = !(comparison && comparison.plot);
  if (!comparison) return;
  if (comparison.plot) {
    $("plot").src = `/v1/jobs/${job.id}/plot.png`;
    $("plot-caption").textContent = `Predicted vs measured pK for ${comparison.n} ligands: Pearson ` +
      `${comparison.pearson.toFixed(2)}, Spearman ${comparison.spearman.toFixed(2)}, RMSE ${comparison.rmse.toFixed(2)} pK.`;
  } else {
    $("results-summary").append(" " + comparison.note);
  }
}

function sortedRows() {
  const { sortKey, descending } = table;
  const column = COLUMNS.find((c) => c.key === sortKey);
  const value = (row) => row[sortKey];
  return [...table.rows].sort((a, b) => {
    const x = value(a), y = value(b);
    if (x === null || x === undefined) return 1;   // missing values last, whatever the direction
    if (y === null || y === undefined) return -1;
    const order = column.numeric ? x - y : String(x).localeCompare(String(y));
    return descending ? -order : order;
  });
}

function headerCell(column) {
  const cell = element("th", column.title);
  cell.scope = "col";
  if (column.sortable === false) return cell;
  cell.classList.add("sortable");
  cell.dataset.key = column.key;
  if (column.key === table.sortKey) cell.setAttribute("aria-sort", table.descending ? "descending" : "ascending");
  cell.addEventListener("click", () => {
    table.descending = column.key === table.sortKey ? !table.descending : column.numeric;
    table.sortKey = column.key;
    renderTable();
  });
  return cell;
}

function bodyCell(column, row) {
  if (column.key === "depiction") {
    const cell = element("td", null, "depiction");
    if (table.depictions[row.index]) {
      const image = element("img");
      image.src = `/v1/jobs/${table.job.id}/depictions/${row.index}.svg`;
      image.alt = `2D structure of ${row.name}`;
      image.loading = "lazy";
      cell.append(image);
    }
    return cell;
  }
  const value = row[column.key];
  const cell = element("td", column.show ? column.show(value) : (value === null || value === undefined ? "" : value));
  if (column.numeric) cell.classList.add("number");
  if (column.key === "notes") cell.classList.add(row.error ? "error" : "warning");
  return cell;
}

function renderTable() {
  const head = element("tr");
  table.columns.forEach((c) => head.append(headerCell(c)));
  $("results-table").tHead.replaceChildren(head);
  const body = $("results-table").tBodies[0];
  body.replaceChildren();
  for (const row of sortedRows()) {
    const line = element("tr");
    line.dataset.name = row.name;
    table.columns.forEach((c) => line.append(bodyCell(c, row)));
    body.append(line);
  }
}

// ------------------------------------------------------------------ the job list
async function loadJobs() {
  let jobs;
  try {
    jobs = await api("/v1/jobs?limit=20");
  } catch (error) {
    return;
  }
  const body = $("jobs-table").tBodies[0];
  body.replaceChildren();
  for (const job of jobs) {
    const line = element("tr");
    const link = element("a", job.id.slice(0, 8));
    link.href = `#job=${job.id}`;
    link.addEventListener("click", (event) => { event.preventDefault(); openJob(job.id); });
    const first = element("td");
    first.append(link);
    const state = element("td", job.state, "state");
    state.dataset.state = job.state;
    if (job.error) state.title = job.error;
    line.append(first, state, element("td", job.model), element("td", String(job.ligands)),
                element("td", new Date(job.created * 1000).toLocaleString()));
    body.append(line);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll('input[name="ligand-mode"]').forEach((r) => r.addEventListener("change", showLigandMode));
  $("job-form").addEventListener("submit", submitJob);
  loadModels();
  loadJobs();
  const match = window.location.hash.match(/job=([0-9a-f]{32})/);
  if (match) openJob(match[1]);
});
