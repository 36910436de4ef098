// The official OpenAI client for Node against `serve` of a decoder whose
// sequences keep something other than a KV cache of their own heads: a
// Mamba model's fixed state, latent attention's one cached head, or a
// hybrid's KV caches in some layers and Mamba-2 states in the others. Each
// request holds a sequence; greedy completions with logprobs are the same
// alone, again, beside another request, and in a slot another request has
// just left (its state or cache starts afresh).
//
//   node state.cjs <node_modules> <decoder executable> <serve options…>
'use strict';
const { withServer, main, step, assert, sameCompletion } = require('./harness.cjs');

main(() => withServer(['--parallel', '2'], 240000, async ({ client }) => {
  let model;
  await step('GET /v1/models lists the model', async () => {
    const list = await client.models.list();
    assert.equal(list.data.length, 1);
    model = list.data[0].id;
  });

  const ask = (prompt) => client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
  const close = sameCompletion;

  let a, b, c;
  await step('three prompts alone: eight new tokens each, with logprobs', async () => {
    a = await ask([3, 4, 5, 6, 7]);
    b = await ask([9, 9, 10]);
    c = await ask([11, 2, 8, 8, 12, 13, 1]);
    for (const r of [a, b, c]) {
      assert.equal(r.usage.completion_tokens, 8);
      assert.equal(r.choices[0].logprobs.token_logprobs.length, 8);
    }
    const differ = a.choices[0].logprobs.token_logprobs.some((v, i) => Math.abs(v - b.choices[0].logprobs.token_logprobs[i]) > 1e-4);
    assert.ok(differ, 'another prompt, other logprobs');
  });

  await step('the same prompt again gives the same completion', async () => {
    close(await ask([3, 4, 5, 6, 7]), a);
  });

  await step('two requests at once: each as alone', async () => {
    const [x, y] = await Promise.all([ask([3, 4, 5, 6, 7]), ask([9, 9, 10])]);
    close(x, a);
    close(y, b);
  });

  await step('three at once on two sequences: the third takes a freed one and starts afresh', async () => {
    const [x, y, z] = await Promise.all([ask([9, 9, 10]), ask([11, 2, 8, 8, 12, 13, 1]), ask([3, 4, 5, 6, 7])]);
    close(x, b);
    close(y, c);
    close(z, a);
  });
}));
