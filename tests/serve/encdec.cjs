// The official OpenAI client for Node against an encoder-decoder's `serve`
// (the tiny T5 with the Unigram fixture's vocabulary): each prompt is its
// request's source, encoded into the sequence the request holds, and the
// decoder generates from the start token. Greedy completions with logprobs
// are the same alone, again, and beside another request with a source of
// its own; text prompts get the tokenizer's </s>; a source over the
// context is a 400.
//
//   node encdec.cjs <node_modules> <encoder-decoder executable> <serve options…>
'use strict';
const { withServer, post, main, step, assert, sameCompletion } = require('./harness.cjs');

main(() => withServer(['--parallel', '2'], 240000, async ({ client, baseURL }) => {
  let model;
  await step('GET /v1/models lists the encoder-decoder', async () => {
    const list = await client.models.list();
    assert.equal(list.data.length, 1);
    model = list.data[0].id;
  });

  const ask = (prompt) => client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, logprobs: 2 });
  const close = sameCompletion;

  let a, b;
  await step('token ids as the source: usage counts the source, six new tokens with logprobs', async () => {
    a = await ask([3, 4, 5, 6, 7]);
    assert.equal(a.usage.prompt_tokens, 5);
    assert.equal(a.usage.completion_tokens, 6);
    assert.equal(a.choices[0].finish_reason, 'length');
    assert.equal(a.choices[0].logprobs.token_logprobs.length, 6);
    b = await ask([9, 9, 10]);
    const differ = a.choices[0].logprobs.token_logprobs.some((v, i) => Math.abs(v - b.choices[0].logprobs.token_logprobs[i]) > 1e-4);
    assert.ok(differ, 'another source, other logprobs');
  });

  await step('the same source again gives the same completion', async () => {
    close(await ask([3, 4, 5, 6, 7]), a);
  });

  await step('two requests at once, each with its own source: each as alone', async () => {
    const [x, y] = await Promise.all([ask([3, 4, 5, 6, 7]), ask([9, 9, 10])]);
    close(x, a);
    close(y, b);
  });

  await step('a text prompt goes through the tokenizer, </s> added', async () => {
    const r = await client.completions.create({ model, prompt: 'the ab', max_tokens: 3, temperature: 0 });
    // "▁the", "▁", "ab" (the fixture's scores make ▁ + ab likelier than ▁ab), "</s>"
    assert.equal(r.usage.prompt_tokens, 4);
    assert.equal(r.usage.completion_tokens, 3);
  });

  await step('a source over the context: 400', async () => {
    const res = await post(baseURL, '/v1/completions',
                           JSON.stringify({ prompt: Array(49).fill(4), max_tokens: 1, temperature: 0 }));
    assert.equal(res.status, 400);
  });
}));
