// Drives kvwarden serve with the official `openai` npm client.
// Usage: node openai_client.mjs BASE_URL API_KEY MODEL
import OpenAI from 'openai';

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const out = {};

function check(cond, msg) {
  if (!cond) throw new Error('check failed: ' + msg);
}

const models = await client.models.list();
out.models = models.data.map((m) => m.id);
check(out.models.includes(model), 'model listed');

const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
check(c.choices.length === 1 && typeof c.choices[0].text === 'string', 'completion text');
check(c.usage.completion_tokens > 0 && c.usage.completion_tokens <= 8, 'completion usage');
out.completion = { text: c.choices[0].text, finish: c.choices[0].finish_reason, usage: c.usage };

const chat = await client.chat.completions.create({
  model,
  messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me a story.' }],
  max_tokens: 8,
  temperature: 0,
});
check(chat.choices[0].message.role === 'assistant', 'chat role');
out.chat = { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage };

const stream = await client.chat.completions.create({
  model,
  messages: [{ role: 'user', content: 'Once upon a time' }],
  max_tokens: 8,
  temperature: 0,
  stream: true,
  stream_options: { include_usage: true },
});
let text = '';
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  for (const ch of chunk.choices) {
    text += ch.delta?.content ?? '';
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
check(finish === 'length' || finish === 'stop', 'stream finish ' + finish);
check(usage && usage.completion_tokens > 0, 'stream usage');
out.stream = { text, finish, chunks, usage };

const cstream = await client.completions.create({ model, prompt: 'The cat', max_tokens: 6, temperature: 0, stream: true });
let ctext = '';
for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? '';
out.completion_stream = ctext;

// Structured output: a strict json_schema request returns JSON of the
// schema's shape (the Go test validates it with a JSON Schema validator).
const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pets: { type: 'array', items: { enum: ['cat', 'dog', 'fish'] }, maxItems: 3 },
  },
  required: ['name', 'age', 'pets'],
  additionalProperties: false,
};
const structured = await client.chat.completions.create({
  model,
  messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
  max_tokens: 200,
  temperature: 0.7,
  seed: 3,
  response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } },
});
check(structured.choices[0].finish_reason === 'stop', 'json_schema finish ' + structured.choices[0].finish_reason);
const person = JSON.parse(structured.choices[0].message.content);
check(typeof person.name === 'string' && Number.isInteger(person.age) && Array.isArray(person.pets), 'json_schema shape');
out.json_schema = { schema: personSchema, content: structured.choices[0].message.content };

try {
  await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema: { type: 'integer', multipleOf: 2 } } },
  });
  throw new Error('an unsupported schema keyword was accepted');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && /multipleOf/.test(e.message), 'unsupported keyword is a 400 naming it: ' + e);
  out.bad_schema = { status: e.status, param: e.param, message: e.message };
}

// Log-probabilities and n choices, streamed: every token's record arrives
// in the chunk of its text, and each choice under its own index.
const lpstream = await client.chat.completions.create({
  model,
  messages: [{ role: 'user', content: 'Once upon a time' }],
  max_tokens: 10,
  temperature: 0.9,
  seed: 4,
  n: 2,
  logprobs: true,
  top_logprobs: 2,
  stream: true,
  stream_options: { include_usage: true },
});
const records = [0, 0];
let lpusage = null;
for await (const chunk of lpstream) {
  for (const ch of chunk.choices) {
    for (const c of ch.logprobs?.content ?? []) {
      check(c.logprob <= 0 && Array.isArray(c.bytes) && c.top_logprobs.length === 2, 'logprob record ' + JSON.stringify(c));
      records[ch.index]++;
    }
  }
  if (chunk.usage) lpusage = chunk.usage;
}
check(records[0] + records[1] === lpusage.completion_tokens, 'a record per token: ' + records + ' vs ' + lpusage.completion_tokens);
const legacy = await client.completions.create({ model, prompt: 'The cat', max_tokens: 4, temperature: 0, logprobs: 1, echo: true });
const llp = legacy.choices[0].logprobs;
check(llp.token_logprobs[0] === null && llp.tokens.length === legacy.usage.prompt_tokens + 4, 'echo logprobs');
out.logprobs = { records, usage: lpusage, legacy_tokens: llp.tokens.length };

try {
  await client.completions.create({ model, prompt: 'word '.repeat(2000), max_tokens: 4 });
  throw new Error('an over-length prompt was accepted');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError, 'over-length is a BadRequestError: ' + e);
  check(e.status === 400 && e.code === 'context_length_exceeded', 'context_length_exceeded, got ' + e.code);
  out.too_long = { status: e.status, code: e.code, message: e.message };
}

try {
  await new OpenAI({ baseURL, apiKey: 'wrong-key-123', maxRetries: 0 }).models.list();
  throw new Error('a wrong key was accepted');
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError && e.status === 401, 'wrong key is a 401: ' + e);
  out.bad_key = { status: e.status, code: e.code };
}

try {
  await client.completions.create({ model, prompt: 'hi', temperature: 7 });
  throw new Error('temperature 7 was accepted');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.param === 'temperature', 'bad temperature is a 400 naming the param: ' + e);
  out.bad_param = { status: e.status, param: e.param };
}

console.log(JSON.stringify(out));
