// Continuous batching under load: a greedy request's text is the same alone
// and amid 15 others; then 64 requests from 16 concurrent clients (streamed
// and not, chat and completions), every response checked, none left hanging.
'use strict';
const { withServer, main, step, assert } = require('./harness.cjs');

const prompts = [
  'In the beginning', 'And God said', 'And the LORD spake unto Moses', 'Blessed is the man',
  'The LORD is my shepherd', 'And it came to pass', 'Now these are the generations', 'Hear, O Israel',
];

main(() => withServer(['--parallel', '16'], 420000, async ({ client, baseURL }) => {
  const model = (await client.models.list()).data[0].id;
  const greedy = (prompt, max_tokens) => client.completions.create({ model, prompt, max_tokens, temperature: 0 });

  await step('greedy output alone equals greedy output beside 15 others', async () => {
    const alone = await greedy('And God said', 24);
    const others = [];
    for (let i = 0; i < 15; i++) {
      others.push(i % 2
        ? greedy(prompts[i % prompts.length] + ' ' + 'and '.repeat(i), 8 + i)
        : client.chat.completions.create({
          model, messages: [{ role: 'user', content: prompts[i % prompts.length] }], max_tokens: 8 + i,
          temperature: 0.8, seed: i,
        }));
    }
    // Joins while the others are prefilling and decoding.
    await new Promise((r) => setTimeout(r, 50));
    const beside = await greedy('And God said', 24);
    await Promise.all(others);
    assert.equal(beside.choices[0].text, alone.choices[0].text);
    assert.deepEqual(beside.usage, alone.usage);
  });

  await step('64 requests from 16 concurrent clients', async () => {
    const started = Date.now();
    let next = 0;
    let done = 0;
    let tokens = 0;
    const client16 = async (c) => {
      while (next < 64) {
        const i = next++;
        const prompt = prompts[i % prompts.length];
        const max_tokens = 4 + (i % 9);
        if (i % 4 === 0) {
          const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }], max_tokens, seed: i });
          assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
          assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= max_tokens);
          tokens += r.usage.completion_tokens;
        } else if (i % 4 === 1) {
          const stream = await client.completions.create({ model, prompt, max_tokens, stream: true, seed: i,
            stream_options: { include_usage: true } });
          let usage = null;
          let finish = null;
          for await (const chunk of stream) {
            if (chunk.usage) usage = chunk.usage;
            if (chunk.choices.length && chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
          }
          assert.ok(['stop', 'length'].includes(finish));
          assert.ok(usage && usage.completion_tokens >= 1 && usage.completion_tokens <= max_tokens);
          tokens += usage.completion_tokens;
        } else {
          const r = await client.completions.create({ model, prompt, max_tokens, temperature: i % 4 === 2 ? 0 : 0.7, seed: i });
          assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
          assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= max_tokens);
          if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, max_tokens);
          tokens += r.usage.completion_tokens;
        }
        done++;
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, c) => client16(c)));
    assert.equal(done, 64);
    const seconds = (Date.now() - started) / 1000;
    console.log(`64 requests, ${tokens} tokens in ${seconds.toFixed(1)} s: ${(tokens / seconds).toFixed(1)} tok/s`);
    const metrics = await (await fetch(`${baseURL}/metrics`)).text();
    assert.match(metrics, /^lathe_queue_length 0$/m);
    assert.match(metrics, /^lathe_active_sequences 0$/m);
  });
}));
