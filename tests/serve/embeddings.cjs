// The official OpenAI client for Node against an encoder's `serve`:
// /v1/embeddings with token-id inputs and text, one input and a batch larger
// than a device pass, float and base64 answers of the same vectors, usage,
// the pooled vectors' L2 norm, and the errors a client can cause (an input
// over the context, an unknown encoding, completions asked of an encoder),
// and GET / (no chat page on an encoder).
//
// Waiting requests past the sequences and queue places get a 503.
//
//   node embeddings.cjs <node_modules> <encoder executable> <serve options…>
'use strict';
const { withServer, post, main, step, assert } = require('./harness.cjs');

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

main(() => withServer(['--parallel', '3', '--queue', '1'], 240000, async ({ client, baseURL }) => {
  let model;
  await step('GET /v1/models lists the encoder', async () => {
    const list = await client.models.list();
    model = list.data[0].id;
    assert.equal(list.data.length, 1);
  });

  let one;
  await step('one input of token ids: a vector of the model width, normalized', async () => {
    const r = await client.embeddings.create({ model, input: [5, 0, 17], encoding_format: 'float' });
    assert.equal(r.object, 'list');
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0].object, 'embedding');
    assert.equal(r.data[0].index, 0);
    one = r.data[0].embedding;
    assert.equal(one.length, 96);
    assert.ok(Math.abs(norm(one) - 1) < 1e-4, `the L2 norm is 1 (${norm(one)})`);
    assert.deepEqual(r.usage, { prompt_tokens: 3, total_tokens: 3 });
  });

  await step('a batch of 7 inputs (3 passes of 3): each the vector it gets alone', async () => {
    const inputs = [[5, 0, 17], [1], [2, 3], [4, 5, 6, 7], [8], [9, 10], [11, 12, 13]];
    const r = await client.embeddings.create({ model, input: inputs, encoding_format: 'float' });
    assert.equal(r.data.length, 7);
    r.data.forEach((d, i) => assert.equal(d.index, i));
    assert.equal(r.usage.prompt_tokens, 16);
    for (let i = 0; i < one.length; i++) assert.ok(Math.abs(r.data[0].embedding[i] - one[i]) < 1e-5);
    const alone = await client.embeddings.create({ model, input: inputs[3], encoding_format: 'float' });
    for (let i = 0; i < one.length; i++) assert.ok(Math.abs(r.data[3].embedding[i] - alone.data[0].embedding[i]) < 1e-5);
  });

  await step('base64: the same vector, as the client decodes it', async () => {
    // The client asks for base64 and decodes it when no format is given.
    const r = await client.embeddings.create({ model, input: [5, 0, 17] });
    assert.equal(r.data[0].embedding.length, 96);
    for (let i = 0; i < one.length; i++) assert.equal(r.data[0].embedding[i], one[i]);
    const raw = await post(baseURL, '/v1/embeddings', JSON.stringify({ input: [5, 0, 17], encoding_format: 'base64' }));
    assert.equal(raw.status, 200);
    const bytes = Buffer.from(raw.json.data[0].embedding, 'base64');
    assert.equal(bytes.length, 96 * 4);
    for (let i = 0; i < one.length; i++) assert.equal(bytes.readFloatLE(4 * i), one[i]);
  });

  await step('text inputs go through the tokenizer, [CLS] and [SEP] added', async () => {
    // The WordPiece fixture (tests/data/tokenizers/bert-wordpiece.json):
    // "Hello, world!" is [CLS] hello , world ! [SEP] = 2 5 7 6 8 3.
    const r = await client.embeddings.create({ model, input: ['Hello, world!', 'unwanted'], encoding_format: 'float' });
    assert.equal(r.data.length, 2);
    assert.equal(r.usage.prompt_tokens, 6 + 5);  // [CLS] un ##want ##ed [SEP]
    const ids = await client.embeddings.create({ model, input: [2, 5, 7, 6, 8, 3], encoding_format: 'float' });
    for (let i = 0; i < one.length; i++) assert.ok(Math.abs(r.data[0].embedding[i] - ids.data[0].embedding[i]) < 1e-6);
  });

  await step('errors: too long, an unknown encoding, an empty input, completions of an encoder', async () => {
    const long = await post(baseURL, '/v1/embeddings', JSON.stringify({ input: [[1], Array(41).fill(1)] }));
    assert.equal(long.status, 400);
    assert.equal(long.json.error.param, 'input');
    assert.equal(long.json.error.code, 'context_length_exceeded');
    assert.match(long.json.error.message, /input\[1\] is 41 tokens; this model's maximum context length is 40 tokens/);
    const hex = await post(baseURL, '/v1/embeddings', JSON.stringify({ input: [1], encoding_format: 'hex' }));
    assert.equal(hex.status, 400);
    assert.equal(hex.json.error.param, 'encoding_format');
    const empty = await post(baseURL, '/v1/embeddings', JSON.stringify({ input: [[1], []] }));
    assert.equal(empty.status, 400);
    assert.match(empty.json.error.message, /input\[1\] is empty/);
    const completion = await post(baseURL, '/v1/completions', JSON.stringify({ prompt: [1, 2], max_tokens: 2 }));
    assert.equal(completion.status, 400);
    assert.match(completion.json.error.message, /is an encoder: it serves \/v1\/embeddings, not completions/);
  });

  await step('more waiting requests than sequences and queue places: 503 with Retry-After, then served again', async () => {
    // Each request is 100 passes of 3 inputs; 12 at once exceed the 3 + 1 that may wait.
    const big = JSON.stringify({ input: Array.from({ length: 300 }, (_, i) => Array(40).fill(i % 100)) });
    const answers = await Promise.all(Array.from({ length: 12 }, () => post(baseURL, '/v1/embeddings', big)));
    const busy = answers.filter((a) => a.status === 503);
    assert.ok(busy.length >= 1, `some were refused (${answers.map((a) => a.status).join(' ')})`);
    for (const a of busy) assert.equal(a.headers.get('retry-after'), '1');
    for (const a of answers) assert.ok(a.status === 200 || a.status === 503, `status ${a.status}`);
    assert.ok(answers.some((a) => a.status === 200));
    const after = await client.embeddings.create({ model, input: [5, 0, 17], encoding_format: 'float' });
    assert.equal(after.data[0].embedding.length, 96);
  });

  await step('GET /: no chat page on an encoder (a 404 naming /v1/embeddings)', async () => {
    const res = await fetch(`${baseURL}/`);
    assert.equal(res.status, 404);
    assert.match((await res.json()).error.message, /is an encoder: it serves \/v1\/embeddings, and no chat page/);
  });

  await step('/metrics counts the inputs embedded', async () => {
    const text = await (await fetch(`${baseURL}/metrics`)).text();
    const m = text.match(/^lathe_embedding_inputs_total (\d+)/m);
    assert.ok(m && Number(m[1]) >= 11, `inputs counted: ${m && m[1]}`);
  });
}));
