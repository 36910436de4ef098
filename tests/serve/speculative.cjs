// Speculative decoding by prompt lookup in the server (--lookup): requests
// running together, each proposing from its own text, verified in shared
// passes; every greedy answer is the one a server without speculation
// gives, and /metrics counts the proposals and those kept.
'use strict';
const { withServer, main, step, assert } = require('./harness.cjs');

const verse = 'And God said, Let there be light: and there was light. ';
const prompts = [verse.repeat(3) + 'And God said', 'In the beginning God created the heaven and the earth. '.repeat(2),
                 'Blessed is the man', verse + verse + 'And God saw'];

async function answers(client) {
  const all = await Promise.all(prompts.map((prompt) =>
    client.completions.create({ model: 'demo', prompt, max_tokens: 40, temperature: 0 })));
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
  await withServer(['-P', '4'], 300000, async ({ client }) => {
    await step('answers without speculation', async () => { plain = await answers(client); });
  });
  await withServer(['-P', '4', '--lookup', '3', '--draft-max', '6'], 300000, async ({ baseURL, client }) => {
    await step('the same answers with prompt lookup, the requests verified together', async () => {
      assert.deepEqual(await answers(client), plain);
    });
    await step('/metrics counts the proposals and those kept', async () => {
      const drafted = await metric(baseURL, 'lathe_draft_tokens_total');
      const kept = await metric(baseURL, 'lathe_draft_accepted_total');
      console.log(`${kept} of ${drafted} proposed tokens kept`);
      assert.ok(drafted > 0 && kept > 0 && kept <= drafted);
    });
  });
});
