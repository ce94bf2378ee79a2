// OpenAI's JavaScript client against `fpgallm serve`: a chat request, then a streamed
// completion whose pieces must join to the same text as the unstreamed one at temperature 0.
// Usage: node client.mjs FPGALLM MODEL. Exit 77 (ctest's skip) when the client is not installed.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(import.meta.url);
let OpenAI;
try {
  OpenAI = require("openai").default ?? require("openai");
} catch {
  console.log("SKIP: the npm package openai is not installed here (scripts/install-deps.sh installs it)");
  process.exit(77);
}

const [fpgallm, model] = process.argv.slice(2);
const server = spawn(fpgallm, ["serve", model, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
const failAfter = setTimeout(() => { console.error("the server did not answer within 60 s"); server.kill(); process.exit(1); }, 60000);

const baseURL = await new Promise((resolve, reject) => {
  let out = "";
  server.stdout.on("data", (d) => {
    out += d;
    const m = out.match(/on (http:\/\/[0-9.]+:[0-9]+)/);
    if (m) resolve(m[1] + "/v1");
  });
  server.on("exit", (code) => reject(new Error(`fpgallm serve exited with ${code} before listening`)));
});

try {
  const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 });
  const models = await client.models.list();
  const id = models.data[0].id;

  const chat = await client.chat.completions.create({
    model: id, messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 12, temperature: 0,
  });
  assert.equal(chat.object, "chat.completion");
  assert.equal(chat.choices[0].message.role, "assistant");
  assert.ok(chat.choices[0].message.content.length > 0, "an empty chat answer");
  assert.equal(chat.usage.completion_tokens, 12);

  const whole = await client.completions.create({ model: id, prompt: "Once upon a time", max_tokens: 24, temperature: 0 });
  const stream = await client.completions.create({
    model: id, prompt: "Once upon a time", max_tokens: 24, temperature: 0, stream: true,
  });
  let text = "", chunks = 0, finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0].text;
    finish = chunk.choices[0].finish_reason ?? finish;
    ++chunks;
  }
  assert.ok(chunks >= 24, `${chunks} chunks for 24 tokens`);
  assert.equal(finish, "length");
  assert.equal(text, whole.choices[0].text, "the stream joins to another text than the unstreamed answer");
  console.log(`chat: ${JSON.stringify(chat.choices[0].message.content)}; stream of ${chunks} chunks equals the unstreamed text`);
} finally {
  clearTimeout(failAfter);
  server.kill("SIGTERM");
}
