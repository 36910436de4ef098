// Structured output through the official OpenAI client for Node: chat and
// completions constrained by response_format (json_schema, json_object) and
// by a GBNF `grammar`, whole and streamed, at several seeds; every answer
// parses and validates against its schema (Ajv, a JSON Schema validator
// independent of the server's compiler), and unsupported schema keywords
// are 400s naming them.
'use strict';
const path = require('node:path');
const { withServer, post, main, step, assert } = require('./harness.cjs');

const [nodeModules] = process.argv.slice(2);
const Ajv = require(path.join(nodeModules, 'ajv'));
const ajv = new Ajv({ strict: false });

// A person with nested objects, arrays of objects, enums, bounded integers,
// a nullable field (anyOf) and booleans: OpenAI's strict-mode shape (every
// property required, no others).
const person = {
  type: 'object',
  properties: {
    name: { type: "string", maxLength: 10 },
    age: { type: 'integer', minimum: 18, maximum: 99 },
    role: { enum: ['admin', 'editor', 'viewer'] },
    active: { type: 'boolean' },
    score: { type: 'number' },
    manager: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 8 }] },
    address: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, zip: { type: 'integer', minimum: 10000, maximum: 99999 } },
      required: ['city', 'zip'],
      additionalProperties: false,
    },
    skills: {
      type: 'array',
      maxItems: 2,
      items: {
        type: 'object',
        properties: { skill: { type: 'string', maxLength: 10 }, level: { type: 'integer', minimum: 1, maximum: 5 } },
        required: ['skill', 'level'],
        additionalProperties: false,
      },
    },
  },
  required: ['name', 'age', 'role', 'active', 'score', 'manager', 'address', 'skills'],
  additionalProperties: false,
};

// A tree through $ref and $defs (recursion).
const tree = {
  $defs: {
    node: {
      type: 'object',
      properties: {
        label: { enum: ['a', 'b', 'c'] },
        children: { type: 'array', maxItems: 2, items: { $ref: '#/$defs/node' } },
      },
      required: ['label', 'children'],
      additionalProperties: false,
    },
  },
  $ref: '#/$defs/node',
};

function checkValid(schema, text, what) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    assert.fail(`${what}: not JSON: ${JSON.stringify(text)}`);
  }
  const validate = ajv.compile(schema);
  assert.ok(validate(doc), `${what}: ${JSON.stringify(text)} does not validate: ${ajv.errorsText(validate.errors)}`);
  return doc;
}

const format = (name, schema) => ({ type: 'json_schema', json_schema: { name, strict: true, schema } });

main(() => withServer(['--parallel', '4'], 420000, async ({ client, baseURL }) => {
  const model = (await client.models.list()).data[0].id;
  const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];

  await step('chat: json_schema at several seeds, beside each other, every answer valid', async () => {
    const answers = await Promise.all([1, 2, 3, 4, 5, 6].map((seed) => client.chat.completions.create({
      model, messages, temperature: 1, seed, max_tokens: 220, response_format: format('person', person),
    })));
    for (const [i, r] of answers.entries()) {
      assert.equal(r.choices[0].finish_reason, 'stop', `seed ${i + 1}: ${r.choices[0].message.content}`);
      const doc = checkValid(person, r.choices[0].message.content, `seed ${i + 1}`);
      assert.ok(doc.age >= 18 && doc.age <= 99);
    }
  });

  await step('chat: greedy json_schema is the same twice', async () => {
    const a = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 220,
      response_format: format('person', person) });
    const b = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 220,
      response_format: format('person', person) });
    checkValid(person, a.choices[0].message.content, 'greedy');
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  await step('chat: a recursive schema ($ref into $defs)', async () => {
    for (const seed of [7, 8, 9]) {
      const r = await client.chat.completions.create({ model, messages, temperature: 1, seed, max_tokens: 220,
        response_format: format('tree', tree) });
      assert.equal(r.choices[0].finish_reason, 'stop');
      checkValid(tree, r.choices[0].message.content, `tree seed ${seed}`);
    }
  });

  await step('chat: streamed json_schema, the deltas make a valid document', async () => {
    const stream = await client.chat.completions.create({ model, messages, temperature: 1, seed: 11, max_tokens: 220,
      response_format: format('person', person), stream: true });
    let text = '';
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        if (c.delta.content) text += c.delta.content;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(finish, 'stop');
    checkValid(person, text, 'streamed');
  });

  await step('chat: json_object gives an object', async () => {
    for (const seed of [21, 22]) {
      const r = await client.chat.completions.create({ model, messages, temperature: 1, seed, max_tokens: 200,
        response_format: { type: 'json_object' } });
      if (r.choices[0].finish_reason === 'stop') {
        const doc = JSON.parse(r.choices[0].message.content);
        assert.equal(typeof doc, 'object');
        assert.ok(!Array.isArray(doc) && doc !== null);
      } else {
        assert.equal(r.choices[0].finish_reason, 'length');  // free-form keys may run long: a prefix then
      }
    }
  });

  await step('completions: a GBNF grammar', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await client.completions.create({ model, prompt: 'And God said', temperature: 1, seed, max_tokens: 20,
        grammar: 'root ::= ("yes" | "no") ", " [0-9] [0-9]?\n' });
      assert.match(r.choices[0].text, /^(yes|no), [0-9][0-9]?$/);
    }
  });

  await step('unsupported keywords and bad grammars are 400s naming them', async () => {
    const keyword = await post(baseURL, '/v1/chat/completions', JSON.stringify({ model, messages,
      response_format: format('p', { type: 'string', pattern: '^a+$' }) }));
    assert.equal(keyword.status, 400);
    assert.equal(keyword.json.error.param, 'response_format');
    assert.match(keyword.json.error.message, /pattern/);
    const gbnf = await post(baseURL, '/v1/completions', JSON.stringify({ model, prompt: 'a', grammar: 'root ::= [a-' }));
    assert.equal(gbnf.status, 400);
    assert.equal(gbnf.json.error.param, 'grammar');
    assert.match(gbnf.json.error.message, /grammar:1:/);
    const type = await post(baseURL, '/v1/chat/completions', JSON.stringify({ model, messages,
      response_format: { type: 'yaml' } }));
    assert.equal(type.status, 400);
  });
}));
