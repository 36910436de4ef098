// The chat page `serve` answers at GET / (runtime/serve/chat.html), in
// Debian's headless chromium driven by playwright-core: the model's name,
// Enter sends and Shift+Enter does not, an answer that streams into its
// bubble (the same text as the API's), tokens/s, a second turn sent with the
// first, Stop (the answer stops growing, the server frees the sequence, the
// page is ready again), an error's message, text that stays text, and no
// request to another origin.
//
//   node chat_page.cjs <node_modules> <decoder executable> <serve options…>
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { withServer, post, main, step, assert } = require('./harness.cjs');

// Exit status CTest reads as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt).
const kSkip = 77;
// Debian's chromium: the binary itself, not /usr/bin/chromium's wrapper script.
const browsers = ['/usr/lib/chromium/chromium', '/usr/bin/chromium'];
const findBrowser = () => browsers.find((p) => fs.existsSync(p));

let executablePath = findBrowser();
if (!executablePath) {
  // scripts/install-deps is where the project's packages are installed; it
  // says why when it cannot (not root, no sudo).
  console.log('chromium is missing: running scripts/install-deps');
  spawnSync(path.join(__dirname, '..', '..', 'scripts', 'install-deps'), { stdio: 'inherit' });
  executablePath = findBrowser();
  if (!executablePath) {
    console.log(`SKIP: no chromium (${browsers.join(', ')}), and scripts/install-deps could not install it`);
    process.exit(kSkip);
  }
}
const { chromium } = require(path.join(process.argv[2], 'playwright-core'));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

main(() => withServer(['--parallel', '2'], 420000, async ({ baseURL }) => {
  const origin = new URL(baseURL).origin;
  const model = (await (await fetch(`${baseURL}/v1/models`)).json()).data[0].id;

  await step('GET / and /index.html: the page, HTML, with a policy that allows this origin alone', async () => {
    for (const route of ['/', '/index.html']) {
      const res = await fetch(baseURL + route);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
      const policy = res.headers.get('content-security-policy');
      assert.match(policy, /default-src 'none'/);
      assert.match(policy, /connect-src 'self'/);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      const html = await res.text();
      assert.match(html, /^<!doctype html>/);
      assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//, 'nothing from another origin');
    }
  });

  // The server's environment turns the Vulkan validation layer on; chromium
  // (whose GPU process is off anyway) is not this project's to validate.
  const env = { ...process.env };
  delete env.VK_INSTANCE_LAYERS;
  const browser = await chromium.launch({
    executablePath, env, timeout: 60000,
    // Root in a container: no sandbox; no GPU; /dev/shm may be small.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(120000);
    const requests = [];  // every URL the page asked for
    const bodies = [];    // the chat requests' bodies
    const problems = [];  // script errors, console errors (a CSP violation is one)
    page.on('request', (r) => {
      requests.push(r.url());
      if (r.url().endsWith('/v1/chat/completions')) bodies.push(JSON.parse(r.postData()));
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });

    const answers = () => page.locator('#log li.assistant .text');
    const idle = () => page.waitForFunction(() => !document.getElementById('send').disabled);
    // The lengths an answer's text takes from here on, each time the page
    // writes it (from the mutation records: several writes between two
    // calls of the observer are each counted).
    const watch = () => page.evaluate(() => {
      if (window.watcher) window.watcher.disconnect();
      window.lengths = [];
      window.watcher = new MutationObserver((records) => {
        for (const r of records) {
          if (!r.target.matches('#log li.assistant .text')) continue;
          for (const node of r.addedNodes) if (node.nodeType === Node.TEXT_NODE) window.lengths.push(node.data.length);
        }
      });
      window.watcher.observe(document.getElementById('log'), { childList: true, subtree: true });
    });
    const grew = async () => {
      const lengths = (await page.evaluate(() => window.lengths)).filter((n) => n > 0);
      console.log(`    the answer's lengths as it came: ${lengths.join(' ')}`);
      assert.ok(lengths.length >= 2, `the answer grew over several updates (${lengths.join(' ')})`);
      for (let i = 1; i < lengths.length; i++) assert.ok(lengths[i] > lengths[i - 1], `it only grew: ${lengths.join(' ')}`);
    };

    await step('the page shows the model\'s name', async () => {
      await page.goto(`${baseURL}/`);
      await page.waitForFunction((m) => document.getElementById('model').textContent === m, model);
      assert.equal(await page.title(), `${model} - lathe chat`);
    });

    const first = 'Who made the <i>light</i>?';
    await step('Shift+Enter is a new line, Enter sends; the answer streams in, as the API answers', async () => {
      await page.click('summary');  // the settings
      await page.fill('#max-tokens', '24');
      await page.fill('#temperature', '0');
      await page.fill('#prompt', 'Who made');
      await page.press('#prompt', 'Shift+Enter');
      assert.equal(await page.inputValue('#prompt'), 'Who made\n');
      assert.equal(bodies.length, 0, 'Shift+Enter sent nothing');
      await watch();
      await page.fill('#prompt', first);
      await page.press('#prompt', 'Enter');
      assert.equal(await page.inputValue('#prompt'), '', 'the box is emptied');
      await idle();
      await grew();
      const shown = await answers().last().textContent();
      assert.ok(shown.length > 0);
      assert.equal(bodies.length, 1);
      assert.equal(bodies[0].stream, true);
      assert.deepEqual(bodies[0].messages, [{ role: 'user', content: first }]);
      const api = await post(baseURL, '/v1/chat/completions', JSON.stringify(
        { model, messages: bodies[0].messages, max_tokens: 24, temperature: 0 }));
      assert.equal(api.status, 200, api.text);
      assert.equal(shown, api.json.choices[0].message.content);
    });

    await step('the text is shown as text, never as HTML', async () => {
      assert.equal(await page.locator('#log li.user .text').first().textContent(), first);
      assert.equal(await page.locator('#log i').count(), 0);
    });

    await step('tokens/s is shown, from the usage at the end', async () => {
      const status = await page.textContent('#status');
      console.log(`    ${status}`);
      const m = status.match(/^(\d+\.\d) tokens\/s \((\d+) tokens in (\d+\.\d) s\)$/);
      assert.ok(m, `status: ${status}`);
      assert.ok(Number(m[1]) > 0 && Number(m[2]) >= 1 && Number(m[2]) <= 24, status);
    });

    await step('a second turn is sent with the first; the page holds both', async () => {
      const answer = await answers().last().textContent();
      await watch();
      await page.fill('#prompt', 'And what did he say?');
      await page.click('#send');
      await idle();
      await grew();
      assert.equal(await page.locator('#log li.user').count(), 2);
      assert.equal(await answers().count(), 2);
      assert.ok((await answers().last().textContent()).length > 0);
      assert.deepEqual(bodies[1].messages, [
        { role: 'user', content: first },
        { role: 'assistant', content: answer },
        { role: 'user', content: 'And what did he say?' },
      ]);
    });

    await step('an error shows the server\'s message; the turn is not kept', async () => {
      await page.fill('#max-tokens', '100000');
      await page.fill('#prompt', 'Say more');
      await page.press('#prompt', 'Enter');
      await idle();
      const error = page.locator('#log li.error');
      await error.waitFor();
      assert.match(await error.textContent(), /context/);
      assert.equal(await page.inputValue('#prompt'), 'Say more', 'the text is back in the box');
      await page.fill('#prompt', '');
    });

    await step('Stop on a long answer: it stops growing, the sequence is freed, the page is ready', async () => {
      await page.click('#clear');
      assert.equal(await page.locator('#log li').count(), 0);
      await page.fill('#max-tokens', '');  // the rest of the context
      await watch();
      // Stop is clicked from inside the page once the answer has come in
      // three updates: a click from here, a round trip or two away, may come
      // after the whole answer (225 tokens took under a second on lavapipe).
      await page.evaluate(() => new MutationObserver((_, observer) => {
        if (window.lengths.filter((n) => n > 0).length < 3) return;
        observer.disconnect();
        document.getElementById('stop').click();
      }).observe(document.getElementById('log'), { childList: true, subtree: true }));
      await page.fill('#prompt', 'Tell me of all the generations of Adam.');
      await page.press('#prompt', 'Enter');
      assert.equal(await page.isEnabled('#stop'), true, 'Stop can be clicked while the answer comes');
      await idle();
      assert.equal(await page.isEnabled('#stop'), false);
      assert.match(await page.textContent('#status'), /stopped$/);
      const stopped = await answers().last().textContent();
      console.log(`    stopped after ${stopped.length} characters: ${await page.textContent('#status')}`);
      await sleep(1500);
      assert.equal(await answers().last().textContent(), stopped, 'the answer stopped growing');
      const metric = async () => (await (await fetch(`${baseURL}/metrics`)).text()).match(/^lathe_active_sequences (\S+)$/m)[1];
      for (let i = 0; i < 200 && (await metric()) !== '0'; i++) await sleep(25);
      assert.equal(await metric(), '0', 'the server freed the sequence');
      const request = bodies[bodies.length - 1];
      assert.equal(request.max_tokens, undefined);
      // Greedy: the whole answer goes on past what was shown.
      const whole = await post(baseURL, '/v1/chat/completions', JSON.stringify(
        { model, messages: request.messages, temperature: 0 }));
      const full = whole.json.choices[0].message.content;
      console.log(`    the whole answer: ${full.length} characters, ${whole.json.usage.completion_tokens} tokens`);
      assert.ok(full.startsWith(stopped) && full.length > stopped.length, 'stopped before its end');
      // Ready again: the next turn holds the stopped answer.
      await page.fill('#max-tokens', '4');
      await page.fill('#prompt', 'Go on');
      await page.press('#prompt', 'Enter');
      await idle();
      assert.equal(await answers().count(), 2);
      assert.deepEqual(bodies[bodies.length - 1].messages.slice(1),
                       [{ role: 'assistant', content: stopped }, { role: 'user', content: 'Go on' }]);
    });

    await step('no request to another origin, no script or policy error', async () => {
      assert.ok(requests.length >= 5, `requests: ${requests.join(' ')}`);
      for (const url of requests) assert.equal(new URL(url).origin, origin, url);
      assert.deepEqual(problems.filter((p) => !/status of 400/.test(p)), []);
    });
  } finally {
    await browser.close();
  }
}));
