// The request the playground sends, written three ways: the JSON text it posts (bodyJson), the curl
// command (curlCommand) and the decisiond.client code (pythonCode). Pure functions of the request that
// app.js reads from the form: {model, state: {json, text}, questions: [{id, type, instructions, criteria}],
// images: [{name, dataUrl}], key}. The body is built as JSON text, not JSON.stringify of an object, so
// that keys keep the order typed (JavaScript objects put integer-like keys first) and a JSON state is
// sent exactly as pasted.
"use strict";

const BASE = new URL(".", location.href).href.replace(/\/$/, "");  // this server, as the page reached it
const quote = (text) => JSON.stringify(text);  // a JSON string literal, also a valid Python literal
const shellQuote = (text) => "'" + text.replace(/'/g, "'\\''") + "'";

function questionJson(question) {
  const parts = [`"type": ${quote(question.type)}`];
  if (question.instructions !== null) parts.push(`"instructions": ${quote(question.instructions)}`);
  if (question.type === "score") {
    parts.push(`"criteria": [${question.criteria.map(quote).join(", ")}]`);
  } else if (question.type === "choice" || question.criteria.length) {
    const pairs = question.criteria.map(([key, text]) => `${quote(key)}: ${text === null ? "null" : quote(text)}`);
    parts.push(`"criteria": {${pairs.join(", ")}}`);
  }
  return `{${parts.join(", ")}}`;
}

/** The body of POST /v1/systemone as JSON text; `image(img, i)` writes each image's JSON value. */
function bodyJson(request, image = (img) => quote(img.dataUrl)) {
  const lines = [];
  if (request.model) lines.push(`"model": ${quote(request.model)}`);
  lines.push(`"state": ${request.state.json ? request.state.text : quote(request.state.text)}`);
  const questions = request.questions.map((q) => `    ${quote(q.id)}: ${questionJson(q)}`);
  lines.push(`"questions": {\n${questions.join(",\n")}\n  }`);
  if (request.images.length) lines.push(`"images": [${request.images.map(image).join(", ")}]`);
  return `{\n  ${lines.join(",\n  ")}\n}`;
}

function mediaType(img) {
  return img.dataUrl.slice(5, img.dataUrl.indexOf(";"));
}

function curlCommand(request) {
  // Each image is read from its file by the shell, so the command stays short: '..."data:...,'"$(base64 ...)"'"...'
  const marker = (img, i) => `\u0000${i}\u0000`;
  let body = shellQuote(bodyJson(request, marker));
  request.images.forEach((img, i) => {
    const read = `'"$(base64 < ${shellQuote(img.name)} | tr -d '\\n')"'`;
    body = body.replace(`\u0000${i}\u0000`, `"data:${mediaType(img)};base64,${read}"`);
  });
  const lines = [`curl -s ${BASE}/v1/systemone`, "-H 'content-type: application/json'"];
  if (request.key) lines.push(`-H "Authorization: Bearer $DECISIOND_API_KEY"`);
  lines.push(`-d ${body}`);
  return lines.join(" \\\n  ");
}

function pythonQuestion(q) {
  const instructions = quote(q.instructions === null ? "" : q.instructions);
  if (q.type === "choice") {
    const options = q.criteria.map(([key, text]) => `${quote(key)}: ${text === null ? "None" : quote(text)}`);
    return `Choice(${instructions}, {${options.join(", ")}})`;
  }
  if (q.type === "score") return `Score(${instructions}, [${q.criteria.map(quote).join(", ")}])`;
  const sides = q.criteria.map(([side, text]) => `${side === "true" ? "yes" : "no"}=${quote(text)}`);
  return `Noul(${[instructions, ...sides].join(", ")})`;
}

function pythonCode(request) {
  const kinds = {choice: "Choice", noul: "Noul", score: "Score"};
  const used = [...new Set(request.questions.map((q) => kinds[q.type]))];
  const names = [...used, "DecisionClient", "DecisionRequest"].sort();
  const imports = [];
  if (request.images.length) imports.push("import base64");
  if (request.state.json) imports.push("import json");
  if (request.key) imports.push("import os");
  if (request.images.length) imports.push("from pathlib import Path");
  const lines = imports.length ? [...imports, ""] : [];
  lines.push(`from decisiond.client import ${names.join(", ")}`, "");
  if (request.state.json) {
    const text = request.state.text.replace(/\\/g, "\\\\").replace(/"""/g, '\\"\\"\\"');
    lines.push(`state = json.loads("""\n${text}\n""")`);
  } else {
    lines.push(`state = ${quote(request.state.text)}`);
  }
  lines.push("request = DecisionRequest(", "    state,", "    {");
  request.questions.forEach((q) => lines.push(`        ${quote(q.id)}: ${pythonQuestion(q)},`));
  lines.push("    },", ")");
  let extra = "";
  if (request.images.length) {
    const read = request.images.map((img) =>
      `    "data:${mediaType(img)};base64," + base64.b64encode(Path(${quote(img.name)}).read_bytes()).decode(),`);
    lines.push("images = [", ...read, "]");
    extra = ', extra={"images": images}';
  }
  const key = request.key ? ', api_key=os.environ["DECISIOND_API_KEY"]' : "";
  lines.push(`with DecisionClient(${quote(BASE)}${key}) as client:`);
  lines.push(`    response = client.decide(${request.model ? quote(request.model) : "None"}, request${extra})`);
  lines.push("for question_id, answer in response.answers.items():", "    print(question_id, answer)");
  return lines.join("\n");
}
