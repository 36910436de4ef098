// Starts a model executable's `serve` on a free loopback port, waits for the
// line that names the port, and stops it when the test ends, passes or not.
// The server inherits this process's environment (the validation layer the
// test enables) and its stderr goes to ours, where CTest looks for
// validation messages.
//
//   node <test>.cjs <node_modules dir> <model executable> <serve options…>
'use strict';
const { spawn } = require('node:child_process');
const path = require('node:path');
const assert = require('node:assert/strict');

const [nodeModules, binary, ...serveArgs] = process.argv.slice(2);
if (!binary) {
  console.error('usage: node test.cjs <node_modules dir> <model executable> <serve options…>');
  process.exit(2);
}

function openai() {
  return require(path.join(nodeModules, 'openai'));
}

// Runs `body({baseURL, port, client, server, serveArgs})` against a server
// started with `extraArgs` after the common ones (`server`: the child
// process); the whole run is bounded by `limitMs`. The server must exit 0,
// whether the test or the harness stops it.
async function withServer(extraArgs, limitMs, body) {
  const args = ['serve', '--host', '127.0.0.1', '--port', '0', ...serveArgs, ...extraArgs];
  console.log(`$ ${binary} ${args.join(' ')}`);
  const server = spawn(binary, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let exited = null;
  server.on('exit', (code, signal) => { exited = { code, signal }; });
  server.exited = () => exited;
  const stop = () => { if (exited === null) server.kill('SIGTERM'); };
  process.on('exit', () => { if (exited === null) server.kill('SIGKILL'); });
  const timer = setTimeout(() => {
    console.error(`FAIL: the test did not finish within ${limitMs / 1000} s`);
    server.kill('SIGKILL');
    process.exit(1);
  }, limitMs);
  try {
    const port = await new Promise((resolve, reject) => {
      let out = '';
      server.stdout.on('data', (d) => {
        out += d;
        process.stdout.write(d);
        const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (m) resolve(Number(m[1]));
      });
      server.on('exit', (code) => reject(new Error(`the server exited (${code}) before listening:\n${out}`)));
    });
    const baseURL = `http://127.0.0.1:${port}`;
    const OpenAI = openai();
    const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
    await body({ baseURL, port, client, server, serveArgs });
  } finally {
    stop();
    // The server ends on SIGTERM once its requests are answered.
    const deadline = Date.now() + 20000;
    while (exited === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    clearTimeout(timer);
    if (exited === null) server.kill('SIGKILL');
  }
  assert.equal(exited && exited.code, 0, `the server's exit: ${JSON.stringify(exited)}`);
}

// A POST of raw bytes (not necessarily JSON); the status, headers and parsed body.
async function post(baseURL, route, body, headers = { 'content-type': 'application/json' }) {
  const res = await fetch(baseURL + route, { method: 'POST', headers, body });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

// Runs `test` and sets the exit status: 0 when it passed.
function main(test) {
  test().then(
    () => console.log('PASS'),
    (e) => {
      console.error('FAIL:', e && e.stack ? e.stack : e);
      process.exitCode = 1;
    });
}

// One step of a test, named in the output.
async function step(name, body) {
  console.log(`--- ${name}`);
  await body();
  console.log(`ok  ${name}`);
}

// Two greedy completions with logprobs are the same: their text, and each
// token's logprob within 1e-4.
function sameCompletion(a, b) {
  const x = a.choices[0].logprobs.token_logprobs, y = b.choices[0].logprobs.token_logprobs;
  assert.equal(x.length, y.length);
  for (let i = 0; i < x.length; i++) assert.ok(Math.abs(x[i] - y[i]) < 1e-4, `token ${i}: ${x[i]} vs ${y[i]}`);
  assert.equal(a.choices[0].text, b.choices[0].text);
}

module.exports = { withServer, post, main, step, assert, sameCompletion };
