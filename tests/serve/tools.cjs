// Tool calls through the official OpenAI client for Node, on a tiny model of
// random weights whose chat template is Qwen2.5's (Hermes-style
// <tool_call>): the tools reach the template, `auto` on random weights
// answers with text and no call, `required` and a named function force
// calls whose arguments validate against the function's `parameters`
// (Ajv, a JSON Schema validator independent of the server's compiler),
// whole and streamed (OpenAI's deltas: index, id, type and name first,
// then the arguments), `parallel_tool_calls: false` gives one call, the
// calls go back through the template in the next turn, and bad tools are
// 400s naming the field.
'use strict';
const path = require('node:path');
const { withServer, post, main, step, assert } = require('./harness.cjs');

const [nodeModules] = process.argv.slice(2);
const Ajv = require(path.join(nodeModules, 'ajv'));
const ajv = new Ajv({ strict: false });

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 12 },
        unit: { enum: ['celsius', 'fahrenheit'] },
      },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const add = {
  type: 'function',
  function: {
    name: 'add',
    description: 'The sum of two small integers',
    parameters: {
      type: 'object',
      properties: {
        a: { type: 'integer', minimum: 0, maximum: 100 },
        b: { type: 'integer', minimum: -5, maximum: 5 },
        note: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 6 }] },
      },
      required: ['a', 'b', 'note'],
      additionalProperties: false,
    },
  },
};
const tools = [weather, add];
const schemaOf = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const messages = [{ role: 'user', content: 'What is the weather in Paris, and what is 2 + 3?' }];

// A call as OpenAI returns it: an id, type function, a known name, and
// arguments (a string of JSON) that validate against its schema.
function checkCall(call, names, what) {
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/, `${what}: id ${call.id}`);
  assert.equal(call.type, 'function');
  assert.ok(names.includes(call.function.name), `${what}: ${call.function.name} is not among ${names}`);
  assert.equal(typeof call.function.arguments, 'string');
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch (e) {
    assert.fail(`${what}: arguments are not JSON: ${JSON.stringify(call.function.arguments)}`);
  }
  const validate = schemaOf[call.function.name];
  assert.ok(validate(args), `${what}: ${call.function.arguments} does not validate: ${ajv.errorsText(validate.errors)}`);
  return args;
}

// A stream's chunks put together as OpenAI's deltas build a message.
async function collect(stream) {
  let content = '', finish = null;
  const calls = [];
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) content += choice.delta.content;
    for (const d of choice.delta.tool_calls || []) {
      assert.equal(typeof d.index, 'number');
      if (d.index === calls.length) {
        // A call's first delta: id, type, name, arguments "".
        assert.equal(d.type, 'function');
        assert.ok(d.id && d.function && d.function.name, `first delta ${JSON.stringify(d)}`);
        assert.equal(d.function.arguments, '');
        calls.push({ id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } });
      } else {
        assert.ok(d.index === calls.length - 1, `delta for call ${d.index} after ${calls.length}`);
        assert.equal(d.id, undefined);
        calls[d.index].function.arguments += d.function.arguments;
      }
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { content, calls, finish };
}

main(() => withServer(['--parallel', '2'], 480000, async ({ client, baseURL }) => {
  const model = (await client.models.list()).data[0].id;
  const names = tools.map((t) => t.function.name);

  await step('auto: random weights answer with text, no call', async () => {
    for (const seed of [1, 2]) {
      const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 12, seed });
      const choice = r.choices[0];
      assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
      assert.equal(choice.message.tool_calls, undefined);
      assert.equal(typeof choice.message.content, 'string');
    }
  });

  await step('tool_choice none: the tools reach the template, the answer is text', async () => {
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', max_tokens: 8, seed: 3 });
    assert.equal(r.choices[0].message.tool_calls, undefined);
    const plain = await client.chat.completions.create({ model, messages, max_tokens: 8, seed: 3 });
    assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 50, 'the template wrote the tools into the prompt');
  });

  let first = null;
  await step('required, one call: forced, its arguments validate', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const r = await client.chat.completions.create({
        model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 300, seed,
      });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', `seed ${seed}: ${JSON.stringify(choice)}`);
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      checkCall(choice.message.tool_calls[0], names, `seed ${seed}`);
      first = first || r;
    }
  });

  await step('required, parallel: one or more calls, each validates', async () => {
    for (const seed of [5, 6]) {
      const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 600, seed });
      const choice = r.choices[0];
      assert.ok(['tool_calls', 'length'].includes(choice.finish_reason), choice.finish_reason);
      assert.ok(choice.message.tool_calls.length >= 1);
      const ids = new Set();
      for (const call of choice.message.tool_calls) {
        checkCall(call, names, `seed ${seed}`);
        ids.add(call.id);
      }
      assert.equal(ids.size, choice.message.tool_calls.length, 'each call its own id');
    }
  });

  await step('a named function: every call is that function', async () => {
    for (const seed of [7, 8]) {
      const r = await client.chat.completions.create({
        model, messages, tools, tool_choice: { type: 'function', function: { name: 'add' } }, max_tokens: 600, seed,
      });
      const calls = r.choices[0].message.tool_calls;
      assert.ok(calls.length >= 1);
      for (const call of calls) {
        assert.equal(call.function.name, 'add');
        checkCall(call, ['add'], `seed ${seed}`);
      }
    }
  });

  await step('streamed: OpenAI deltas build the same calls as the whole answer', async () => {
    const request = { model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 300, seed: 1 };
    const whole = await client.chat.completions.create(request);
    const streamed = await collect(await client.chat.completions.create({ ...request, stream: true }));
    assert.equal(streamed.finish, 'tool_calls');
    assert.equal(streamed.content, '');
    assert.equal(streamed.calls.length, 1);
    checkCall(streamed.calls[0], names, 'stream');
    const expected = whole.choices[0].message.tool_calls[0].function;
    assert.deepEqual(streamed.calls[0].function, expected);
    // auto, streamed: text alone.
    const text = await collect(await client.chat.completions.create({ model, messages, tools, max_tokens: 10, seed: 2, stream: true }));
    assert.equal(text.calls.length, 0);
    assert.ok(['stop', 'length'].includes(text.finish));
  });

  await step('the calls and their results go back through the template', async () => {
    const call = first.choices[0].message.tool_calls[0];
    const next = [...messages, first.choices[0].message,
      { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ result: 'sunny, 21 C' }) }];
    const r = await client.chat.completions.create({ model, messages: next, tools, max_tokens: 8, seed: 9 });
    assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens, 'the call and its result are in the prompt');
    assert.equal(typeof r.choices[0].message.content, 'string');
  });

  await step('bad tools are 400s naming the field', async () => {
    const cases = [
      [{ tools: [weather, { type: 'function', function: { name: 'bad name' } }] }, 'tools[1].function.name'],
      [{ tools: [weather, weather] }, 'tools[1].function.name'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: 5 } }] }, 'tools[0].function.parameters'],
      [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
      [{ tools, tool_choice: 'sometimes' }, 'tool_choice'],
      [{ tool_choice: 'required' }, 'tool_choice'],
      [{ tools, parallel_tool_calls: 'no' }, 'parallel_tool_calls'],
      [{ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'response_format'],
      [{
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { type: 'string', pattern: 'a+' } } } } }],
        tool_choice: 'required',
      }, 'tools[0].function.parameters'],
      [{ messages: [...messages, { role: 'assistant', tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{' } }] }] },
        'messages[1].tool_calls[0].function.arguments'],
    ];
    for (const [fields, param] of cases) {
      const r = await post(baseURL, '/v1/chat/completions', JSON.stringify({ model, messages, max_tokens: 4, ...fields }));
      assert.equal(r.status, 400, `${JSON.stringify(fields)}: ${r.text}`);
      assert.equal(r.json.error.param, param, r.text);
    }
    // The client's own error object carries the same.
    await assert.rejects(
      client.chat.completions.create({ model, messages, tools: [{ type: 'function', function: { name: '' } }] }),
      (e) => e.status === 400 && e.param === 'tools[0].function.name');
    // The server still answers.
    const r = await client.chat.completions.create({ model, messages, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
  });
}));
