// The official JavaScript SDK (@typesafe-ai/sdk) pointed at a live decisiond.
// Usage: node sdk_check.mjs '<config JSON>' scenario...
// config: {"url": base URL, "png_base64": a PNG, "model": a pinned id, "vision": a model that reads
// images}; prints one JSON object,
// scenario -> what the SDK returned or raised, for tests/test_official_sdks.py to check.
import { APIError, TypeSafeClient, choice, noul, score } from "@typesafe-ai/sdk";

const config = JSON.parse(process.argv[2]);
const client = new TypeSafeClient({
  apiKey: "offline-test", // decisiond needs none; the SDK insists on one
  baseURL: config.url,
  retry: { maxRetries: 0 },
  logLevel: "off",
});

const questions = {
  team: choice("Which team should handle this?", { billing: "Payments and refunds", technical: null }),
  urgent: noul("Does it need an answer today?"),
  mood: score("How upset is the customer?", ["Calm", "Annoyed", "Furious"]),
};
const photo = () => ({
  "<image:a>": { type: "image", format: "png", data_base64: config.png_base64 },
});

const failure = (err) => {
  if (!(err instanceof APIError)) throw err;
  return {
    error: err.constructor.name,
    status: err.status,
    requestId: err.requestId ?? null,
    retryAfter: err.headers.get("retry-after"),
    message: err.message,
  };
};

const answered = async (promise) => {
  try {
    const { data, requestId, response } = await promise.withResponse();
    return { model: data.model, answers: data.answers, usage: data.usage, requestId: requestId ?? null,
             xRequestId: response.headers.get("x-request-id") };
  } catch (err) {
    return failure(err);
  }
};

const scenarios = {
  plain: () => answered(client.systemOne({ state: "I was charged twice; refund me today.", questions })),
  pinned: () => answered(client.systemOne({ model: config.model, state: "I was charged twice.", questions })),
  unknown: () => answered(client.systemOne({ model: "jev-0.0-does-not-exist", state: "x", questions })),
  assets: () =>
    answered(client.systemOne({ model: config.vision, state: "<image:a> A product photo.", questions, assets: photo() })),
  box: () =>
    answered(client.systemOne({
      model: config.vision,
      state: "<image:a>",
      questions: { where: { type: "box", instructions: "the product" } },
      assets: photo(),
    })),
  models: async () => {
    try {
      return { models: await client.models.list() };
    } catch (err) {
      return failure(err);
    }
  },
};

const out = {};
for (const name of process.argv.slice(3)) out[name] = await scenarios[name]();
process.stdout.write(JSON.stringify(out));
