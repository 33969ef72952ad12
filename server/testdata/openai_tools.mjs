// A tool loop through kvwarden serve with the official `openai` npm client:
// a forced call (named tool_choice), the tool's result sent back as a tool
// message, then the answer; a streamed "required" call assembled from its
// deltas. Prints one JSON line for the Go test to check.
// Usage: node openai_tools.mjs BASE_URL API_KEY MODEL
import OpenAI from 'openai';

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const out = {};

function check(cond, msg) {
  if (!cond) throw new Error('check failed: ' + msg);
}

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 10 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false },
    },
  },
];

const messages = [
  { role: 'system', content: 'You help with the weather.' },
  { role: 'user', content: 'What is the weather in Paris?' },
];

// 1. The forced call.
const first = await client.chat.completions.create({
  model,
  messages,
  tools,
  tool_choice: { type: 'function', function: { name: 'get_weather' } },
  temperature: 0.7,
  seed: 7,
  max_tokens: 200,
});
const choice = first.choices[0];
check(choice.finish_reason === 'tool_calls', 'finish_reason ' + choice.finish_reason);
const calls = choice.message.tool_calls;
check(Array.isArray(calls) && calls.length >= 1, 'tool_calls');
check(calls[0].type === 'function' && calls[0].function.name === 'get_weather', 'named call');
check(typeof calls[0].id === 'string' && calls[0].id.length > 0, 'call id');
const args = JSON.parse(calls[0].function.arguments);
out.call = { id: calls[0].id, name: calls[0].function.name, arguments: calls[0].function.arguments };

// 2. The tool result goes back; the model answers (tool_choice none).
messages.push(choice.message);
messages.push({ role: 'tool', tool_call_id: calls[0].id, content: JSON.stringify({ city: args.city, temperature: 21 }) });
const answer = await client.chat.completions.create({
  model,
  messages,
  tools,
  tool_choice: 'none',
  temperature: 0,
  max_tokens: 16,
});
check(typeof answer.choices[0].message.content === 'string', 'answer content');
check(!answer.choices[0].message.tool_calls, 'no call with tool_choice none');
check(['stop', 'length'].includes(answer.choices[0].finish_reason), 'answer finish');
out.answer = { content: answer.choices[0].message.content, finish: answer.choices[0].finish_reason };

// 3. A streamed "required" call, assembled from its deltas.
const stream = await client.chat.completions.create({
  model,
  messages: messages.slice(0, 2),
  tools,
  tool_choice: 'required',
  parallel_tool_calls: false,
  temperature: 0.7,
  seed: 3,
  max_tokens: 300,
  stream: true,
});
const streamed = [];
let finish = null;
for await (const chunk of stream) {
  for (const ch of chunk.choices) {
    for (const tc of ch.delta?.tool_calls ?? []) {
      if (!streamed[tc.index]) streamed[tc.index] = { id: tc.id, name: tc.function?.name, arguments: '' };
      streamed[tc.index].arguments += tc.function?.arguments ?? '';
    }
    check(!ch.delta?.content, 'no content with a forced call');
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
check(finish === 'tool_calls', 'stream finish ' + finish);
check(streamed.length >= 1 && streamed.every((c) => c.id && c.name), 'streamed calls');
for (const c of streamed) JSON.parse(c.arguments);
out.streamed = streamed;

// 4. Bad input: a tool_choice naming a missing tool.
try {
  await client.chat.completions.create({
    model,
    messages,
    tools,
    tool_choice: { type: 'function', function: { name: 'book_flight' } },
  });
  check(false, 'missing tool accepted');
} catch (e) {
  check(e.status === 400 && e.param === 'tool_choice', 'missing tool: ' + e.status + ' ' + e.param);
  out.missing_tool = e.message;
}

console.log(JSON.stringify(out));
