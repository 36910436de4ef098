// What an attacker or a broken client sends to `serve`, below the HTTP
// client libraries: raw bytes on a socket. Each case must get an answer (or
// a closed connection) within its limit, the server must not grow for good,
// and it must keep serving everyone else. Started with small limits so that
// each is quick to reach: a 256 KiB body limit, 600,000 bytes of bodies read
// at once, 2 s to send a request, 1 s of keep-alive idleness, 6 HTTP threads.
'use strict';
const net = require('node:net');
const fs = require('node:fs');
const { withServer, post, main, step, assert } = require('./harness.cjs');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Writes `chunks` (strings or Buffers; a function is awaited between them)
// to a fresh connection and collects what comes back until the server
// closes it or `limitMs` passes. `{text, closed, ms, error}`.
function raw(port, chunks, limitMs = 10000) {
  return new Promise((resolve) => {
    const start = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let done = false;
    const finish = (closed, error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, ms: Date.now() - start, error });
    };
    const timer = setTimeout(() => finish(false), limitMs);
    socket.on('data', (d) => { text += d.toString('latin1'); });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (e) => finish(true, e.code));
    socket.on('connect', async () => {
      for (const c of chunks) {
        if (done) return;
        if (typeof c === 'function') await c();
        else if (!socket.write(c)) await new Promise((r) => socket.once('drain', r));
      }
    });
  });
}

const statusLines = (text) => text.match(/HTTP\/1\.[01] \d{3}/g) || [];  // a body need not end its line

function rssKiB(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return Number(m[1]);
}

main(() => withServer(['--parallel', '1', '--queue', '0', '--max-body', '262144', '--max-bodies', '600000',
                       '--read-timeout', '2',
                       '--keep-alive', '1', '--http-threads', '6', '--cors', 'https://app.example'], 300000,
                      async ({ baseURL, port, client, server, serveArgs }) => {
  const model = (await client.models.list()).data[0].id;
  const health = async () => (await fetch(`${baseURL}/health`)).status;
  const complete = (body) => post(baseURL, '/v1/completions', JSON.stringify(body));
  const chat = (body) => post(baseURL, '/v1/chat/completions', JSON.stringify(body));
  const servesAgain = async () => {
    const r = await complete({ model, prompt: 'And God said', max_tokens: 2, temperature: 0 });
    assert.equal(r.status, 200, r.text);
  };

  await step('a body nested 100,000 deep: 400, and the server still serves', async () => {
    const depth = 100000;
    const body = `{"model":"${model}","messages":[{"role":"user","content":${'['.repeat(depth)}${']'.repeat(depth)}}]}`;
    assert.ok(body.length > 200000);
    const r = await post(baseURL, '/v1/chat/completions', body);
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.error.message, /nests arrays and objects more than 64 deep/);
    await servesAgain();
  });

  await step('numbers beyond their field: 400 naming the field, never 500 or a wrapped echo', async () => {
    let r = await post(baseURL, '/v1/completions', `{"model":"${model}","prompt":"a","max_tokens":1e400}`);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'max_tokens', r.text);
    r = await post(baseURL, '/v1/completions', `{"model":"${model}","prompt":"a","max_tokens":18446744073709551615}`);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'max_tokens', r.text);
    assert.match(r.json.error.message, /18446744073709551615/);
    assert.doesNotMatch(r.json.error.message, /-1\b/);
    r = await post(baseURL, '/v1/chat/completions',
                   `{"messages":[{"role":"user","content":"a"}],"temperature":-1e999}`);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'temperature', r.text);
  });

  await step('echoed values: control bytes escaped, long ones cut', async () => {
    const r = await complete({ model: 'evil\u0001\u001b[31m' + 'x'.repeat(5000), prompt: 'a' });
    assert.equal(r.status, 404, r.text);
    const message = r.json.error.message;
    assert.ok(!/[\u0000-\u001f]/.test(message), message);
    assert.match(message, /evil\\x01\\x1b\[31m/);
    assert.ok(message.length < 600, `${message.length} characters`);
  });

  await step('error messages name none of the server\'s files', async () => {
    const weights = serveArgs[serveArgs.indexOf('-w') + 1];
    const dir = require('node:path').resolve(weights);
    const r = await chat({ model, messages: [{ role: 'tool', content: 'a role the template refuses' }] });
    assert.equal(r.status, 400, r.text);
    assert.ok(!r.text.includes(dir) && !r.text.includes(weights), r.text);
    assert.match(r.json.error.message, /^the chat template/);
  });

  await step('a body over --max-body: 413 for Content-Length and for chunked framing', async () => {
    // Content-Length over the limit: refused before a byte of the body is read.
    let r = await raw(port, [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                             `Content-Length: 50000000\r\n\r\n`]);
    assert.deepEqual(statusLines(r.text), ['HTTP/1.1 413'], r.text);
    assert.ok(r.closed, 'the connection is closed after a 413');
    // Chunked: 48 MB offered in 64 KiB chunks; the server answers 413 once
    // it has read past the limit, closes, and does not grow.
    const before = rssKiB(server.pid);
    const chunk = Buffer.alloc(65536, 'x');
    const chunks = [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                    `Transfer-Encoding: chunked\r\n\r\n`];
    for (let i = 0; i < 768; i++) chunks.push(`10000\r\n`, chunk, '\r\n');
    chunks.push('0\r\n\r\n');
    r = await raw(port, chunks, 30000);
    assert.deepEqual(statusLines(r.text), ['HTTP/1.1 413'], r.text.slice(0, 400));
    assert.ok(r.closed, 'the connection is closed after a 413');
    const after = rssKiB(server.pid);
    console.log(`resident: ${before} KiB before, ${after} KiB after the chunked 48 MB`);
    assert.ok(after - before < 32768, `the server grew by ${after - before} KiB`);
    // A chunked body within the limit is read whole.
    const body = JSON.stringify({ model, prompt: 'And God said', max_tokens: 2, temperature: 0 });
    const half = Math.floor(body.length / 2);
    r = await raw(port, [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                         `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
                         `${half.toString(16)}\r\n${body.slice(0, half)}\r\n`,
                         `${(body.length - half).toString(16)}\r\n${body.slice(half)}\r\n0\r\n\r\n`]);
    assert.deepEqual(statusLines(r.text), ['HTTP/1.1 200'], r.text);
    assert.match(r.text, /"completion_tokens":2/);
  });

  await step('bodies read at once are bounded over every connection: past --max-bodies, 503', async () => {
    // Two connections declare 256 KiB bodies and send nothing more: they
    // hold 512 KiB of the 600,000 until --read-timeout cuts them off.
    const head = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                 `Content-Length: 262144\r\n\r\n{`;
    const holders = [raw(port, [head], 10000), raw(port, [head], 10000)];
    await sleep(500);
    const r = await raw(port, [head], 10000);
    assert.deepEqual(statusLines(r.text), ['HTTP/1.1 503'], r.text);
    assert.match(r.text, /Retry-After: 1/i);
    assert.match(r.text, /too many large request bodies/);
    assert.ok(r.closed, 'the connection is closed after the 503');
    assert.ok(r.ms < 1500, `the third body waited ${r.ms} ms for its answer`);
    for (const h of await Promise.all(holders)) assert.deepEqual(statusLines(h.text), ['HTTP/1.1 408'], h.text);
    // Their shares are given back: a body as large is read again.
    const body = JSON.stringify({ model, prompt: 'And God said', max_tokens: 2, temperature: 0, user: 'x'.repeat(200000) });
    const again = await complete(JSON.parse(body));
    assert.equal(again.status, 200, again.text);
  });

  await step('a malformed request line: a 400 status line', async () => {
    for (const line of ['GARBAGE\r\n\r\n', 'GET /health HTTP/9.9\r\n\r\n', 'GET\r\n\r\n',
                        'GET /health\u0000 HTTP/1.1\r\n\r\n', '\u0001\u0002\u0003\r\n\r\n']) {
      const r = await raw(port, [line]);
      assert.deepEqual(statusLines(r.text), ['HTTP/1.1 400'], `${JSON.stringify(line)}: ${r.text}`);
    }
  });

  await step('pipelined requests on one connection: each answered, in order', async () => {
    const get = (path) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
    const body = JSON.stringify({ model, prompt: 'And', max_tokens: 1, temperature: 0 });
    const r = await raw(port, [get('/health') + get('/v1/models') + get('/nowhere') +
                               `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                               `Content-Length: ${body.length}\r\n\r\n${body}` +
                               `GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`], 15000);
    assert.deepEqual(statusLines(r.text), ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 404', 'HTTP/1.1 200',
                                           'HTTP/1.1 200'], r.text);
    assert.ok(r.closed);
  });

  await step('slow and idle clients are cut off and do not starve the rest', async () => {
    // Twice as many connections as HTTP threads: half send nothing, half a
    // byte every 300 ms (never done within the 2 s --read-timeout).
    const slow = [];
    for (let i = 0; i < 6; i++) slow.push(raw(port, [], 15000));
    const drip = [];
    const request = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789';
    for (const c of request) drip.push(() => sleep(300), c);
    for (let i = 0; i < 6; i++) slow.push(raw(port, drip, 15000));
    await sleep(200);
    const start = Date.now();
    assert.equal(await health(), 200);
    const waited = Date.now() - start;
    console.log(`/health answered after ${waited} ms beside 12 slow connections`);
    assert.ok(waited < 5000, `/health waited ${waited} ms`);
    const results = await Promise.all(slow);
    for (const r of results.slice(0, 6)) {
      assert.ok(r.closed, 'an idle connection is closed');
      assert.ok(r.ms < 4000, `an idle connection lived ${r.ms} ms`);
    }
    for (const r of results.slice(6)) {
      assert.ok(r.closed, 'a slow connection is closed');
      assert.ok(r.ms < 6000, `a slow connection lived ${r.ms} ms`);
      const lines = statusLines(r.text);
      assert.ok(lines.length === 0 || lines[0] === 'HTTP/1.1 408', r.text);
    }
    await servesAgain();
  });

  await step('a huge prompt is refused without encoding it whole, and the server does not grow', async () => {
    const before = rssKiB(server.pid);
    const words = 'and the LORD said unto Moses '.repeat(2200);  // about 64 KB
    for (let i = 0; i < 8; i++) {
      const r = await complete({ model, prompt: words.slice(0, 65000) });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.code, 'context_length_exceeded');
      assert.match(r.json.error.message, /more than 256 tokens/);
    }
    const after = rssKiB(server.pid);
    console.log(`resident: ${before} KiB before, ${after} KiB after 8 huge prompts`);
    assert.ok(after - before < 16384, `the server grew by ${after - before} KiB`);
  });

  await step('GET /v1/models/{id}', async () => {
    const r = await fetch(`${baseURL}/v1/models/${encodeURIComponent(model)}`);
    assert.equal(r.status, 200);
    assert.equal((await r.json()).id, model);
    const missing = await fetch(`${baseURL}/v1/models/gpt-4o`);
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, 'model_not_found');
  });

  await step('CORS: the allowed origin gets its headers and preflight, another none', async () => {
    const pre = await fetch(`${baseURL}/v1/chat/completions`, { method: 'OPTIONS', headers: {
      origin: 'https://app.example', 'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type' } });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), 'https://app.example');
    assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
    const allowed = await fetch(`${baseURL}/health`, { headers: { origin: 'https://app.example' } });
    assert.equal(allowed.headers.get('access-control-allow-origin'), 'https://app.example');
    const other = await fetch(`${baseURL}/health`, { headers: { origin: 'https://evil.example' } });
    assert.equal(other.status, 200);
    assert.equal(other.headers.get('access-control-allow-origin'), null);
  });

  await step('the server still serves', async () => {
    await servesAgain();
    assert.equal(await health(), 200);
  });
}));
