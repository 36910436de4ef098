// A server whose build has a draft model (the demo drafting for itself):
// requests running together, each drafted for in the draft's batched
// steps and verified in the model's shared passes; every greedy answer is
// the one the same server gives with drafting held off (--draft-min-p 1:
// no proposal is that sure), and /metrics counts what was proposed and kept.
'use strict';
const { withServer, main, step, assert } = require('./harness.cjs');

const prompts = ['And God said', 'In the beginning God created the heaven and the earth.', 'Blessed is the man',
                 'The LORD is my shepherd'];

async function answers(client) {
  const all = await Promise.all(prompts.map((prompt) =>
    client.completions.create({ model: 'demo', prompt, max_tokens: 32, temperature: 0 })));
  return all.map((r) => r.choices[0].text);
}

async function metric(baseURL, name) {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

main(async () => {
  let plain;
  await withServer(['-P', '4', '--draft-min-p', '1'], 300000, async ({ baseURL, client }) => {
    await step('answers with drafting held off', async () => { plain = await answers(client); });
    assert.equal(await metric(baseURL, 'lathe_draft_tokens_total'), 0);
  });
  await withServer(['-P', '4', '--draft-min-p', '0'], 300000, async ({ baseURL, client }) => {
    await step('the same answers drafted for', async () => {
      assert.deepEqual(await answers(client), plain);
    });
    await step('/metrics counts the proposals and those kept', async () => {
      const drafted = await metric(baseURL, 'lathe_draft_tokens_total');
      const kept = await metric(baseURL, 'lathe_draft_accepted_total');
      console.log(`${kept} of ${drafted} proposed tokens kept`);
      assert.ok(drafted > 0 && kept > drafted * 0.9, 'the model drafting for itself keeps nearly all');
    });
  });
});
