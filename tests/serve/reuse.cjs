// Prompt reuse and several choices (n) through the official OpenAI client
// for Node. The same conversation runs against a server that prefills every
// prompt whole (--no-prompt-reuse) and one that reuses cached prefixes: a
// chat's second turn after its first, a shared system prompt in a new
// request, the same again while another request holding it still runs, and
// a seeded sample. Every answer must be the cold server's, token for token;
// usage.prompt_tokens_details.cached_tokens and lathe_prompt_tokens_cached_total
// say what was reused. n = 3 gives three choices, each the single request
// with seed + i, whole and streamed, the prompt counted once.
'use strict';
const { withServer, main, step, assert } = require('./harness.cjs');

const system =
  'In the beginning God created the heaven and the earth. And the earth was without form, and void; and ' +
  'darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God ' +
  'said, Let there be light: and there was light. And God saw the light, that it was good: and God divided ' +
  'the light from the darkness. And God called the light Day, and the darkness he called Night. And the ' +
  'evening and the morning were the first day.';

const model = 'demo';

function chat(messages, extra = {}) {
  return { model, messages, max_tokens: 12, temperature: 0, ...extra };
}

async function metric(baseURL, name) {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

// The conversation; every answer, and each request's cached tokens.
async function conversation({ baseURL, client }) {
  const out = { cached: {} };
  const ask = async (name, body) => {
    const r = await client.chat.completions.create(body);
    out[name] = r.choices.map((c) => c.message.content);
    out.cached[name] = r.usage.prompt_tokens_details.cached_tokens;
    return r;
  };
  const first = [{ role: 'system', content: system }, { role: 'user', content: 'And Moses said unto the LORD' }];
  await step('a first turn', () => ask('first', chat(first)));
  const second = [...first, { role: 'assistant', content: out.first[0] }, { role: 'user', content: 'And he said' }];
  await step('its second turn', () => ask('second', chat(second)));
  await step('the system prompt in a new conversation', () =>
    ask('other', chat([{ role: 'system', content: system }, { role: 'user', content: 'Blessed is the man' }])));
  await step('the system prompt while a request that holds it still runs', async () => {
    const running = await client.chat.completions.create(chat(first, { max_tokens: 80, stream: true }));
    const it = running[Symbol.asyncIterator]();
    await it.next();  // it holds its sequence, its prompt prefilled
    await ask('beside', chat([{ role: 'system', content: system }, { role: 'user', content: 'Hear, O Israel' }]));
    running.controller.abort();
  });
  await step('a seeded sample of the second turn', () =>
    ask('seeded', chat(second, { temperature: 0.9, seed: 17, max_tokens: 16 })));
  await step('n = 3: three choices, each the request with seed + i', async () => {
    const r = await ask('three', chat(first, { temperature: 0.9, seed: 5, n: 3, max_tokens: 10 }));
    assert.equal(r.choices.length, 3);
    r.choices.forEach((c, i) => assert.equal(c.index, i));
    const single = await client.chat.completions.create(chat(first, { temperature: 0.9, seed: 5, max_tokens: 10 }));
    assert.equal(r.usage.prompt_tokens, single.usage.prompt_tokens, 'the prompt counted once');
    assert.equal(r.usage.completion_tokens, r.choices.length * 10);
    for (let i = 0; i < 3; i++) {
      const one = await client.chat.completions.create(chat(first, { temperature: 0.9, seed: 5 + i, max_tokens: 10 }));
      assert.equal(r.choices[i].message.content, one.choices[0].message.content, `choice ${i}`);
    }
    assert.ok(new Set(out.three).size > 1, `the choices differ: ${JSON.stringify(out.three)}`);
  });
  await step('n = 3 streamed: each index its own deltas, the same texts', async () => {
    const stream = await client.chat.completions.create(
      chat(first, { temperature: 0.9, seed: 5, n: 3, max_tokens: 10, stream: true, stream_options: { include_usage: true } }));
    const texts = ['', '', ''], finishes = [null, null, null];
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        texts[c.index] += c.delta.content || '';
        if (c.finish_reason) finishes[c.index] = c.finish_reason;
      }
    }
    assert.deepEqual(texts, out.three);
    assert.deepEqual(finishes, ['length', 'length', 'length']);
    assert.equal(usage.completion_tokens, 30);
  });
  out.metric = await metric(baseURL, 'lathe_prompt_tokens_cached_total');
  return out;
}

main(async () => {
  let cold;
  await withServer(['-P', '2', '--no-prompt-reuse'], 300000, async (s) => {
    cold = await conversation(s);
  });
  for (const [name, n] of Object.entries(cold.cached)) assert.equal(n, 0, `${name}: nothing cached without reuse`);
  assert.equal(cold.metric, 0);
  await withServer(['-P', '2'], 300000, async (s) => {
    const warm = await conversation(s);
    await step('every answer is the cold server\'s, token for token', async () => {
      for (const name of ['first', 'second', 'other', 'beside', 'seeded', 'three'])
        assert.deepEqual(warm[name], cold[name], name);
    });
    await step('the reused tokens are counted: whole chunks of the shared prefix', async () => {
      console.log(JSON.stringify(warm.cached));
      assert.equal(warm.cached.first, 0);
      for (const name of ['second', 'other', 'beside']) {
        assert.ok(warm.cached[name] > 0, `${name} reuses its prefix`);
        assert.equal(warm.cached[name] % 64, 0, `${name}: whole chunks of 64`);
      }
      const sum = Object.values(warm.cached).reduce((a, b) => a + b, 0);
      assert.ok(warm.metric >= sum, `lathe_prompt_tokens_cached_total ${warm.metric} counts them (${sum})`);
    });
  });
});
