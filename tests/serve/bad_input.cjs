// Bad input to `serve`: each case answered with an OpenAI error object and
// the right HTTP status, and the server keeps serving. Started with one
// sequence, a queue of one and a small body limit, so that "more requests
// than slots" and "a body over the limit" are easy to reach.
'use strict';
const { withServer, post, main, step, assert } = require('./harness.cjs');

function isError(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, `an error object: ${r.text}`);
  assert.equal(typeof r.json.error.message, 'string');
  assert.ok(r.json.error.message.length > 0);
  assert.ok('type' in r.json.error && 'param' in r.json.error && 'code' in r.json.error, r.text);
  if (param !== undefined) assert.equal(r.json.error.param, param, r.text);
}

main(() => withServer(['--parallel', '1', '--queue', '1', '--max-body', '4096'], 240000, async ({ baseURL, client }) => {
  const model = (await client.models.list()).data[0].id;
  const chat = (body) => post(baseURL, '/v1/chat/completions', JSON.stringify(body));
  const complete = (body) => post(baseURL, '/v1/completions', JSON.stringify(body));
  const messages = [{ role: 'user', content: 'Hello' }];

  await step('malformed JSON: 400', async () => {
    isError(await post(baseURL, '/v1/chat/completions', '{"model": "x", "messages": ['), 400);
    isError(await post(baseURL, '/v1/completions', 'not json at all'), 400);
    isError(await post(baseURL, '/v1/completions', '[1, 2, 3]'), 400);
  });
  await step('unknown model: 404 model_not_found', async () => {
    const r = await chat({ model: 'gpt-4o', messages });
    isError(r, 404, 'model');
    assert.equal(r.json.error.code, 'model_not_found');
    // The client library raises it as a NotFoundError.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages }), (e) => e.status === 404);
  });
  await step('missing or empty messages, missing prompt: 400', async () => {
    isError(await chat({ model }), 400, 'messages');
    isError(await chat({ model, messages: [] }), 400, 'messages');
    isError(await chat({ model, messages: [{ content: 'no role' }] }), 400, 'messages[0].role');
    isError(await chat({ model, messages: [{ role: 'tool', content: 'a role the template refuses' }] }), 400, 'messages');
    isError(await complete({ model }), 400, 'prompt');
  });
  await step('sampling fields out of range: 400 naming the field', async () => {
    isError(await complete({ model, prompt: 'a', temperature: 3 }), 400, 'temperature');
    isError(await complete({ model, prompt: 'a', top_p: 0 }), 400, 'top_p');
    isError(await complete({ model, prompt: 'a', presence_penalty: -2.5 }), 400, 'presence_penalty');
    isError(await complete({ model, prompt: 'a', max_tokens: 0 }), 400, 'max_tokens');
    isError(await complete({ model, prompt: 'a', stop: ['a', 'b', 'c', 'd', 'e'] }), 400, 'stop');
    isError(await complete({ model, prompt: 'a', n: 17 }), 400, 'n');
    isError(await complete({ model, prompt: 'a', n: 0 }), 400, 'n');
    isError(await complete({ model, prompt: 'a', logprobs: 9 }), 400, 'logprobs');
    isError(await complete({ model, prompt: [1, 999999] }), 400, 'prompt');
  });
  await step('max_tokens or prompt beyond the context: 400 context_length_exceeded', async () => {
    const context = (await client.models.list()).data[0].meta.context;
    let r = await complete({ model, prompt: 'And God said', max_tokens: context });
    isError(r, 400, 'max_tokens');
    assert.equal(r.json.error.code, 'context_length_exceeded');
    r = await complete({ model, prompt: Array(context).fill(261) });
    isError(r, 400, 'prompt');
    assert.equal(r.json.error.code, 'context_length_exceeded');
  });
  await step('a body over the limit: 413', async () => {
    const r = await complete({ model, prompt: 'x'.repeat(8000) });
    isError(r, 413);
  });
  await step('no such route: 404; embeddings of a decoder: 400', async () => {
    const res = await fetch(`${baseURL}/v1/images/generations`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 404);
    assert.ok((await res.json()).error);
    const embeddings = await fetch(`${baseURL}/v1/embeddings`, { method: 'POST', body: '{"input": "x"}' });
    assert.equal(embeddings.status, 400);
    assert.match((await embeddings.json()).error.message, /is a decoder: it serves completions, not \/v1\/embeddings/);
  });
  await step('more requests than slots and queue places: 503 with Retry-After', async () => {
    // The first holds the only sequence, the second waits in the queue of
    // one, the third is refused. A long stream keeps the first busy.
    const controller = new AbortController();
    const first = fetch(`${baseURL}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, signal: controller.signal,
      // </s> (id 2 of the demo's vocabulary) banned: the stream runs all its
      // max_tokens, whatever it samples.
      body: JSON.stringify({ model, prompt: 'And', max_tokens: 250, stream: true, logit_bias: { 2: -100 } }),
    });
    const metric = async (name) => {
      const text = await (await fetch(`${baseURL}/metrics`)).text();
      return Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))[1]);
    };
    const until = async (name, value) => {
      for (let i = 0; i < 400 && (await metric(name)) !== value; i++) await new Promise((r) => setTimeout(r, 25));
      assert.equal(await metric(name), value, name);
    };
    await until('lathe_active_sequences', 1);
    const second = complete({ model, prompt: 'And God', max_tokens: 2 });
    await until('lathe_queue_length', 1);
    const third = await complete({ model, prompt: 'And Moses', max_tokens: 2 });
    isError(third, 503);
    assert.ok(Number(third.headers.get('retry-after')) >= 1, 'Retry-After');
    // The client that disconnects frees its sequence: the queued one runs.
    controller.abort();
    await first.catch(() => {});
    const r = await second;
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.completion_tokens, 2);
  });
  await step('the server still serves', async () => {
    const r = await client.completions.create({ model, prompt: 'In the beginning', max_tokens: 4, temperature: 0 });
    assert.equal(r.usage.completion_tokens, 4);
    const health = await fetch(`${baseURL}/health`);
    assert.equal(health.status, 200);
  });
}));
