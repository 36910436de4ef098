// SIGTERM with requests in flight: the server stops accepting, lets a
// stream and a whole completion already running finish (the stream with its
// finish_reason chunk and [DONE]), then exits 0; a second signal cuts what
// is left at once, and it still exits 0.
'use strict';
const { withServer, main, step, assert } = require('./harness.cjs');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitExit(server, ms) {
  const deadline = Date.now() + ms;
  while (server.exited() === null && Date.now() < deadline) await sleep(50);
  return server.exited();
}

// Reads a server-sent event stream to its end: the data lines' payloads.
async function events(response, onFirst) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let first = true;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      break;  // cut off
    }
    if (chunk.done) break;
    text += decoder.decode(chunk.value, { stream: true });
    if (first && text.includes('data: ')) {
      first = false;
      onFirst();
    }
  }
  return text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
}

main(async () => {
  await withServer(['--parallel', '2', '--grace', '60'], 240000, async ({ baseURL, client, server }) => {
    const model = (await client.models.list()).data[0].id;
    await step('SIGTERM: the requests in flight finish, new ones are refused, exit 0', async () => {
      const post = (body) => fetch(`${baseURL}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      let whole = null;
      let signal;
      const signalled = new Promise((resolve) => { signal = resolve; });
      const streamed = post({ model, prompt: 'And God said', max_tokens: 120, temperature: 0, stream: true })
        .then((res) => {
          assert.equal(res.status, 200);
          return events(res, () => {
            // The stream has begun: start a whole completion, then signal.
            whole = post({ model, prompt: 'In the beginning', max_tokens: 80, temperature: 0 });
            setTimeout(() => { server.kill('SIGTERM'); signal(); }, 100);
          });
        });
      await signalled;
      await sleep(300);
      await assert.rejects(fetch(`${baseURL}/health`), 'a new connection after SIGTERM is refused');
      const res = await whole;
      assert.equal(res.status, 200);
      const body = await res.json();
      assert.equal(body.usage.completion_tokens, 80, JSON.stringify(body));
      const exited = await waitExit(server, 60000);
      assert.deepEqual(exited, { code: 0, signal: null });
      const stream = await streamed;
      assert.equal(stream[stream.length - 1], '[DONE]', stream.slice(-3).join('\n'));
      const last = JSON.parse(stream[stream.length - 2]);
      assert.equal(last.choices[0].finish_reason, 'length');
      const text = stream.slice(0, -1).map((d) => JSON.parse(d).choices[0].text).join('');
      assert.ok(text.length > 100, `the stream's text: ${JSON.stringify(text)}`);
    });
  });
  await withServer(['--parallel', '1', '--grace', '60'], 120000, async ({ baseURL, client, server }) => {
    const model = (await client.models.list()).data[0].id;
    await step('a second signal cuts the requests in flight at once, exit 0', async () => {
      const res = await fetch(`${baseURL}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, prompt: 'And', max_tokens: 250, temperature: 0, stream: true }) });
      const reading = events(res, () => {});
      server.kill('SIGTERM');
      await sleep(20);
      server.kill('SIGINT');
      const exited = await waitExit(server, 10000);
      assert.deepEqual(exited, { code: 0, signal: null });
      await reading;
    });
  });
});
