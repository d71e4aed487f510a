// The decisiond playground: read the form, send POST /v1/systemone, draw the answers. Plain JavaScript,
// no dependencies; code.js (loaded first) writes the request as JSON text, curl and Python.
"use strict";

const $ = (id) => document.getElementById(id);

const EXAMPLE = {
  state: "I was charged twice for one order and I need the duplicate refunded today.",
  questions: [
    {type: "choice", id: "department", instructions: "Which team should handle this ticket?",
      rows: [["billing", "Payments, invoicing, refunds"], ["technical", ""], ["other", "None of the above"]]},
    {type: "noul", id: "is_urgent", instructions: "Does the ticket communicate time pressure?",
      rows: [["Names a deadline, or says now or today"], ["Nothing says it must be done soon"]]},
    {type: "score", id: "frustration", instructions: "How frustrated is the customer?",
      rows: [["Calm"], ["Concerned but civil"], ["Very angry"]]},
  ],
};

const ASKS = {noul: "is this true?", choice: "which of these options?", score: "where on this ordered scale?"};

let models = [];  // the entries of GET /v1/models
let images = [];  // {name, dataUrl}
let counter = 0;  // for default question ids

// -- the form ------------------------------------------------------------------------------------

function field(cls, label, value, placeholder) {
  const input = document.createElement("input");
  input.className = cls;
  input.value = value || "";
  input.setAttribute("aria-label", label);
  if (placeholder) input.placeholder = placeholder;
  return input;
}

function addRow(fieldset, values) {
  const box = fieldset.querySelector(".criteria");
  const row = document.createElement("div");
  row.className = "row criterion";
  if (fieldset.dataset.type === "choice") {
    row.append(field("key", "", values[0], "option key"), field("description", "", values[1], "description (optional)"));
  } else {
    row.append(field("level", "", values[0], ""));
  }
  const remove = Object.assign(document.createElement("button"), {type: "button", textContent: "×"});
  remove.addEventListener("click", () => { row.remove(); labelRows(box); update(); });
  row.append(remove);
  box.append(row);
  labelRows(box);
}

/** Name each option or level by its place (levels from 0, lowest first), again after a removal. */
function labelRows(box) {
  [...box.children].forEach((row, i) => {
    const [first, second] = row.querySelectorAll("input");
    const remove = row.querySelector("button");
    if (second) {
      first.setAttribute("aria-label", `Option ${i + 1} key`);
      second.setAttribute("aria-label", `Option ${i + 1} description (optional)`);
      remove.setAttribute("aria-label", `Remove option ${i + 1}`);
    } else {
      first.setAttribute("aria-label", `Level ${i}${i === 0 ? " (lowest)" : ""}`);
      first.placeholder = `level ${i}`;
      remove.setAttribute("aria-label", `Remove level ${i}`);
    }
  });
}

function addQuestion(type, spec) {
  const fieldset = $("question-template").content.firstElementChild.cloneNode(true);
  fieldset.dataset.type = type;
  fieldset.querySelector("legend").textContent = `${type}: ${ASKS[type]}`;
  fieldset.querySelector(".qid").value = spec.id || `${type}_${++counter}`;
  fieldset.querySelector(".instructions").value = spec.instructions || "";
  fieldset.querySelector(".remove-question").addEventListener("click", () => { fieldset.remove(); update(); });
  const add = fieldset.querySelector(".add-row");
  const rows = spec.rows || (type === "noul" ? [[""], [""]] : [["", ""], ["", ""]]);
  if (type === "noul") {
    const box = fieldset.querySelector(".criteria");
    ["true", "false"].forEach((side, i) => {
      const label = Object.assign(document.createElement("label"), {className: "side", textContent: `${side} means`});
      label.append(field(side, `${side} means (optional)`, rows[i][0], "optional"));
      box.append(label);
    });
    add.remove();
  } else {
    rows.forEach((values) => addRow(fieldset, values));
    add.textContent = type === "choice" ? "Add option" : "Add level";
    add.addEventListener("click", () => { addRow(fieldset, ["", ""]); update(); });
  }
  $("questions").append(fieldset);
}

function readState() {
  const text = $("state").value;
  const trimmed = text.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      JSON.parse(trimmed);
      return {json: true, text: trimmed};
    } catch (_) { /* not JSON: sent as text */ }
  }
  return {json: false, text};
}

function readQuestion(fieldset, problems) {
  const type = fieldset.dataset.type;
  const id = fieldset.querySelector(".qid").value;
  const instructions = fieldset.querySelector(".instructions").value;
  const question = {id, type, instructions: instructions.trim() ? instructions : null};
  if (type === "noul") {
    const sides = [["true", fieldset.querySelector(".true").value], ["false", fieldset.querySelector(".false").value]];
    question.criteria = sides.filter(([, text]) => text.trim());
  } else if (type === "choice") {
    question.criteria = [...fieldset.querySelectorAll(".criterion")].map((row) => {
      const description = row.querySelector(".description").value;
      return [row.querySelector(".key").value, description.trim() ? description : null];
    });
    const keys = question.criteria.map(([key]) => key);
    const repeated = keys.filter((key, i) => keys.indexOf(key) !== i);
    if (repeated.length) problems.push(`question ${quote(id)} names the option ${quote(repeated[0])} twice`);
  } else {
    question.criteria = [...fieldset.querySelectorAll(".level")].map((input) => input.value);
  }
  return question;
}

/** The request the form describes, and what keeps it from being sent (repeated ids or option keys). */
function readForm() {
  const problems = [];
  const questions = [...document.querySelectorAll("#questions .question")].map((f) => readQuestion(f, problems));
  const ids = questions.map((q) => q.id);
  ids.forEach((id, i) => {
    if (ids.indexOf(id) !== i) problems.push(`two questions have the id ${quote(id)}; ids must differ`);
  });
  if (!questions.length) problems.push("add at least one question");
  const model = models.find((m) => m.name === $("model").value);
  const readsImages = Boolean(model && (model.modalities || []).includes("image"));
  return {
    model: $("model").value,
    state: readState(),
    questions,
    images: readsImages ? images : [],
    key: $("api-key").value.trim(),
    problems,
  };
}

function update() {
  const request = readForm();
  $("state-kind").textContent = request.state.json ? "Sent as JSON." : "Sent as text.";
  $("curl").textContent = curlCommand(request);
  $("python").textContent = pythonCode(request);
}

// -- talking to the server -----------------------------------------------------------------------

function headers(extra) {
  const key = $("api-key").value.trim();
  return key ? {...extra, authorization: `Bearer ${key}`} : extra;
}

/** A readable message for an error response: the wire's `detail` (a message, or 422's list of problems). */
function describeError(status, body, retryAfter) {
  const detail = body && body.detail;
  const lines = [];
  if (status === 401) lines.push("401: the server has API keys and the key sent is not one of them. Check the API key field.");
  if (status === 403) lines.push("403: the server has API keys and none was sent. Enter one in the API key field.");
  if (Array.isArray(detail)) {
    lines.push(`${status}: the request does not fit the wire:`);
    detail.forEach((e) => lines.push(`${(e.loc || []).join(" → ")}: ${e.msg}`));
  } else if (detail && typeof detail === "object" && detail.message) {
    lines.push(`${status} ${detail.error_type || "error"}: ${detail.message}`);
  } else if (!lines.length) {
    lines.push(`${status}: the server answered without a readable message`);
  }
  if (retryAfter) lines.push(`Retry after ${retryAfter} s.`);
  return lines;
}

function showError(lines) {
  const box = $("error");
  box.replaceChildren(...lines.map((line) => Object.assign(document.createElement("p"), {textContent: line})));
  box.hidden = !lines.length;
}

async function call(method, path, body) {
  let response;
  try {
    response = await fetch(path, {method, body, headers: headers(body ? {"content-type": "application/json"} : {})});
  } catch (error) {
    return {ok: false, lines: [`Cannot reach the server (${error.message}). Is decisiond still running?`]};
  }
  let parsed = null;
  try { parsed = await response.json(); } catch (_) { /* not JSON */ }
  if (response.ok) return {ok: true, body: parsed};
  return {ok: false, status: response.status, retryAfter: response.headers.get("retry-after"),
    lines: describeError(response.status, parsed, response.headers.get("retry-after"))};
}

async function loadModels() {
  const result = await call("GET", "v1/models");
  if (!result.ok) {
    showError(result.lines);
    if (result.status === 503) setTimeout(loadModels, 1000 * Math.min(Number(result.retryAfter) || 2, 10));
    return;
  }
  showError([]);
  const chosen = $("model").value;
  models = result.body.models || [];
  $("model").replaceChildren(...models.map((m) => new Option(m.name, m.name)));
  if (models.some((m) => m.name === chosen)) $("model").value = chosen;
  modelChanged();
}

function modelChanged() {
  const model = models.find((m) => m.name === $("model").value);
  const modalities = (model && model.modalities) || ["text"];
  const aliases = model && model.aliases && model.aliases.length ? ` · also answers ${model.aliases.join(", ")}` : "";
  $("model-info").textContent = model
    ? `${model.description || ""} · backend ${model.backend || "?"} · reads ${modalities.join(", ")}${aliases}` : "";
  $("images-block").hidden = !modalities.includes("image");
  if (!modalities.includes("image") && images.length) {  // never kept out of sight, unsent
    images = [];
    renderImages();
  }
  update();
}

async function ask(event) {
  event.preventDefault();
  const request = readForm();
  if (request.problems.length) {
    showError(request.problems);
    return;
  }
  $("ask").disabled = true;
  $("busy").textContent = "Asking…";
  const result = await call("POST", "v1/systemone", bodyJson(request));
  $("ask").disabled = false;
  $("busy").textContent = "";
  $("results").hidden = !result.ok;
  showError(result.ok ? [] : result.lines);
  if (result.ok) renderAnswers(request, result.body);
}

// -- the answers ---------------------------------------------------------------------------------

const percent = (p) => `${(100 * p).toFixed(1)}%`;

function bar(key, label, probability, winner) {
  const row = document.createElement("div");
  row.className = winner ? "bar winner" : "bar";
  row.dataset.key = key;
  row.dataset.probability = String(probability);
  const name = Object.assign(document.createElement("span"), {className: "bar-label", textContent: label});
  const track = Object.assign(document.createElement("span"), {className: "bar-track"});
  track.setAttribute("role", "meter");
  track.setAttribute("aria-valuemin", "0");
  track.setAttribute("aria-valuemax", "1");
  track.setAttribute("aria-valuenow", String(probability));
  track.setAttribute("aria-label", `${label}: ${percent(probability)}`);
  const fill = Object.assign(document.createElement("span"), {className: "bar-fill"});
  fill.style.width = `${Math.max(0, Math.min(1, probability)) * 100}%`;
  track.append(fill);
  const value = Object.assign(document.createElement("span"), {className: "bar-value", textContent: percent(probability)});
  row.append(name, track, value);
  return row;
}

const asText = (value) => (typeof value === "string" ? value : JSON.stringify(value));

function renderAnswer(question, answer) {
  const section = document.createElement("section");
  section.className = "answer";
  section.dataset.questionId = question.id;
  section.dataset.type = answer.type;
  const title = Object.assign(document.createElement("h3"), {textContent: `${question.id} (${answer.type})`});
  const summary = Object.assign(document.createElement("p"), {className: "summary"});
  section.append(title, summary);
  if (answer.type === "noul") {
    section.dataset.noul = String(answer.noul);
    summary.textContent = `probability of true: ${answer.noul}`;
    section.append(bar("true", "true", answer.noul, false));
  } else if (answer.type === "choice") {
    section.dataset.winner = answer.choice;
    section.dataset.confidence = String(answer.confidence);
    summary.textContent = `winner: ${answer.choice} · confidence ${answer.confidence}`;
    question.criteria.forEach(([key]) => section.append(bar(key, key, answer.probabilities[key], key === answer.choice)));
  } else if (answer.type === "score") {
    const n = question.criteria.length;
    section.dataset.score = String(answer.score);
    section.dataset.confidence = String(answer.confidence);
    summary.textContent = `score ${answer.score} on 0 to ${n - 1} · confidence ${answer.confidence}`;
    const row = Object.assign(document.createElement("div"), {className: "bar position"});
    const scale = Object.assign(document.createElement("span"), {className: "scale"});
    scale.setAttribute("role", "img");
    scale.setAttribute("aria-label", `score position ${answer.score} on 0 to ${n - 1}`);
    const marker = Object.assign(document.createElement("span"), {className: "scale-marker"});
    marker.style.left = `${n > 1 ? (100 * answer.score) / (n - 1) : 50}%`;
    scale.append(marker);
    row.append(Object.assign(document.createElement("span"), {className: "bar-label", textContent: "position"}), scale,
      Object.assign(document.createElement("span"), {className: "bar-value", textContent: answer.score.toFixed(2)}));
    section.append(row);
    const p = question.criteria.map((_, i) => answer.probabilities[String(i)]);
    const top = p.indexOf(Math.max(...p));
    question.criteria.forEach((_, i) => {
      const legend = answer.legend ? answer.legend[String(i)] : question.criteria[i];
      section.append(bar(String(i), `${i} · ${asText(legend)}`, p[i], i === top));
    });
  } else {
    summary.textContent = JSON.stringify(answer);
  }
  return section;
}

function renderAnswers(request, body) {
  const usage = body.usage || {};
  $("results-meta").textContent =
    `model ${body.model} · ${usage.input_tokens} input tokens · ${body.x_latency_ms} ms`;
  $("results").dataset.model = body.model;
  $("results").dataset.inputTokens = String(usage.input_tokens);
  $("answers").replaceChildren(...request.questions.map((q) => renderAnswer(q, body.answers[q.id])));
}

// -- images and copying --------------------------------------------------------------------------

function renderImages() {
  $("image-list").replaceChildren(...images.map((img, i) => {
    const item = document.createElement("li");
    const thumb = Object.assign(document.createElement("img"), {src: img.dataUrl, alt: img.name});
    const remove = Object.assign(document.createElement("button"), {type: "button", textContent: "Remove"});
    remove.setAttribute("aria-label", `Remove image ${img.name}`);
    remove.addEventListener("click", () => { images.splice(i, 1); renderImages(); update(); });
    item.append(thumb, document.createTextNode(img.name), remove);
    return item;
  }));
}

function readImages(event) {
  const files = [...event.target.files];
  event.target.value = "";
  Promise.all(files.map((file) => new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve({name: file.name, dataUrl: reader.result});
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  }))).then((read) => { images.push(...read); renderImages(); update(); },
    (error) => showError([`Cannot read the image: ${error.message}`]));
}

function copy(event) {
  const target = $(event.target.dataset.copy);
  const button = event.target;
  button.dataset.label ||= button.textContent;
  const done = () => {
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = button.dataset.label; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(target.textContent).then(done, () => select(target));
  } else {
    select(target);
  }
}

function select(element) {  // no clipboard (plain http on another host): select the text for Ctrl+C
  const range = document.createRange();
  range.selectNodeContents(element);
  window.getSelection().removeAllRanges();
  window.getSelection().addRange(range);
}

// -- start ---------------------------------------------------------------------------------------

function start() {
  $("state").value = EXAMPLE.state;
  EXAMPLE.questions.forEach((q) => addQuestion(q.type, q));
  document.querySelectorAll("[data-add]").forEach((button) =>
    button.addEventListener("click", () => { addQuestion(button.dataset.add, {}); update(); }));
  document.querySelectorAll("[data-copy]").forEach((button) => button.addEventListener("click", copy));
  $("ask-form").addEventListener("input", update);
  $("ask-form").addEventListener("submit", ask);
  $("model").addEventListener("change", modelChanged);
  $("api-key").addEventListener("change", loadModels);
  $("reload-models").addEventListener("click", loadModels);
  $("images").addEventListener("change", readImages);
  update();
  loadModels();
}

start();
