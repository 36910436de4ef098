// The official OpenAI client for Node against `serve`: completions and chat,
// whole and streamed, the model list, usage counts, logprobs with
// top_logprobs, stop strings and seeded sampling.
'use strict';
const { withServer, main, step, assert } = require('./harness.cjs');

main(() => withServer(['--parallel', '4'], 240000, async ({ client, baseURL }) => {
  let model;
  await step('GET /v1/models lists the model', async () => {
    const list = await client.models.list();
    assert.equal(list.data.length, 1);
    model = list.data[0].id;
    assert.equal(list.data[0].object, 'model');
  });

  await step('GET /health', async () => {
    const res = await fetch(`${baseURL}/health`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok' });
  });

  let whole;
  await step('completions: greedy, whole', async () => {
    whole = await client.completions.create({ model, prompt: 'And God said', max_tokens: 12, temperature: 0 });
    assert.equal(whole.object, 'text_completion');
    assert.equal(whole.choices.length, 1);
    assert.ok(whole.choices[0].text.length > 0, 'some text');
    assert.equal(whole.choices[0].finish_reason, 'length');
    assert.equal(whole.usage.completion_tokens, 12);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 12);
    assert.ok(whole.usage.prompt_tokens >= 3);
  });

  await step('completions: token ids as the prompt count exactly', async () => {
    const r = await client.completions.create({ model, prompt: [1, 1043, 261, 2072], max_tokens: 5, temperature: 0 });
    assert.equal(r.usage.prompt_tokens, 4);
    assert.equal(r.usage.completion_tokens, 5);
  });

  await step('completions: streamed, the same text, usage in the last chunk', async () => {
    const stream = await client.completions.create({
      model, prompt: 'And God said', max_tokens: 12, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.text;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(chunks > 2, `several chunks (${chunks})`);
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'length');
    assert.deepEqual(usage, whole.usage);
  });

  await step('completions: logprobs with top alternatives', async () => {
    const r = await client.completions.create({ model, prompt: 'In the beginning', max_tokens: 6, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 6);
    assert.equal(lp.token_logprobs.length, 6);
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    for (let i = 0; i < 6; i++) {
      const top = Object.entries(lp.top_logprobs[i]);
      assert.ok(top.length >= 1 && top.length <= 3);
      assert.ok(lp.token_logprobs[i] <= 0);
      // Greedy: the sampled token is the most likely one.
      const best = Math.max(...top.map(([, v]) => v));
      assert.ok(Math.abs(best - lp.token_logprobs[i]) < 1e-6, `token ${i}: ${lp.token_logprobs[i]} vs best ${best}`);
    }
  });

  await step('completions: a stop string ends the text before it', async () => {
    const text = whole.choices[0].text;
    const stop = text.slice(4, 7);
    const r = await client.completions.create({ model, prompt: 'And God said', max_tokens: 12, temperature: 0, stop: [stop] });
    assert.equal(r.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  await step('completions: the same seed, the same sample; penalties accepted', async () => {
    const ask = (seed) => client.completions.create({
      model, prompt: 'And the LORD', max_tokens: 16, temperature: 0.9, top_p: 0.95, top_k: 40, min_p: 0.02, seed,
      presence_penalty: 0.5, frequency_penalty: 0.5,
    });
    const [a, b] = [await ask(7), await ask(7)];
    assert.equal(a.choices[0].text, b.choices[0].text);
    assert.equal(a.usage.completion_tokens, b.usage.completion_tokens);
  });

  let chat;
  const messages = [
    { role: 'system', content: 'The words of the book.' },
    { role: 'user', content: 'Who said let there be light?' },
  ];
  await step('chat: greedy, whole, with logprobs', async () => {
    chat = await client.chat.completions.create({
      model, messages, max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 2,
    });
    assert.equal(chat.object, 'chat.completion');
    const c = chat.choices[0];
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    assert.equal(c.logprobs.content.length, chat.usage.completion_tokens);
    for (const t of c.logprobs.content) {
      assert.equal(t.top_logprobs.length, 2);
      assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
    }
    assert.ok(chat.usage.prompt_tokens > 10);
    assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);
  });

  await step('chat: streamed, the same text', async () => {
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, stream: true });
    let text = '';
    let role = null;
    let finish = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      const d = chunk.choices[0].delta;
      if (d.role) role = d.role;
      if (d.content) text += d.content;
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    assert.equal(role, 'assistant');
    assert.equal(text, chat.choices[0].message.content);
    assert.equal(finish, chat.choices[0].finish_reason);
  });

  await step('streams end with data: [DONE]', async () => {
    const res = await fetch(`${baseURL}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages, max_tokens: 3, stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    const body = await res.text();
    assert.match(body, /^data: \{/);
    assert.ok(body.endsWith('data: [DONE]\n\n'), body.slice(-80));
  });

  await step('GET /metrics counts what was served', async () => {
    const text = await (await fetch(`${baseURL}/metrics`)).text();
    const value = (name) => Number((text.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1]);
    assert.ok(value('lathe_requests_total') >= 10, text);
    assert.ok(value('lathe_completion_tokens_total') >= 80, text);
    assert.equal(value('lathe_queue_length'), 0);
    assert.ok(value('lathe_tokens_per_second') > 0);
    assert.match(text, /lathe_http_requests_total\{status="200"\} \d+/);
  });
}));
