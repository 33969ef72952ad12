// The official openai npm client against /v1/embeddings: its default
// request (encoding_format base64, decoded by the client), float,
// dimensions, and the 400 for an empty input list.
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const byDefault = await client.embeddings.create({ model, input: ["hello world", "second"] });
const float = await client.embeddings.create({ model, input: "hello world", encoding_format: "float" });
const dims = await client.embeddings.create({ model, input: "hello world", dimensions: 8 });
let bad = null;
try {
  await client.embeddings.create({ model, input: [] });
} catch (e) {
  bad = { status: e.status, param: e.param };
}
console.log(JSON.stringify({
  default: byDefault.data.map((d) => d.embedding),
  index: byDefault.data.map((d) => d.index),
  float: float.data[0].embedding,
  dims: dims.data[0].embedding.length,
  usage: byDefault.usage,
  bad,
}));
