// The official OpenAI client for Node against a vision model's `serve` (a
// tiny model on random weights, its checkpoint directory holding the
// tokenizer, the chat template and the image processor's settings: LLaVA-1.5's
// with CLIP's; Gemma 3's, whose images are written between tokens of
// their own and see each other both ways; or Mistral 3's, whose images keep
// their size, a row end after each row of features; or Llama 3.2 Vision's,
// whose decoder cross-attends to the image's tiles): an image sent as a data: URL
// gives the first token's log-probabilities that `logits --image` gives for
// the same prompt, as the template renders it; another image, others; an
// image sent twice in a request is encoded once (/metrics); streaming; a
// text-only chat; the errors a client can cause (a URL the server would
// have to fetch, a payload that is not base64, an image for a model without
// a tower is cli.image_without_vision's).
//
//   node vision.cjs <node_modules> <vision model executable> <dir> <images dir> <llava | gemma3 | pixtral | mllama>
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const [binary, dir, images, family] = process.argv.slice(3, 7);
process.argv.splice(4, 3, '-w', dir);  // the harness serves -w <dir>
const { withServer, main, step, assert } = require('./harness.cjs');
const vocab = 211;
// How the family's template renders a user's question followed by an image
// (BOS aside), and the rows that image takes in the prompt.
const families = {
  llava: { prompt: (question) => `USER: <image>\n${question} ASSISTANT:`, rows: 16 },
  gemma3: {
    prompt: (question) => `<start_of_turn>user\n${question}<start_of_image><end_of_turn>\n<start_of_turn>model\n`,
    rows: 2 + 16 + 2,  // "\n\n<start_of_image>", 16 rows, "<end_of_image>\n\n"
  },
  // baseline.jpg, 16 × 8 pixels, kept: 2 × 4 patches of 4, merged into one
  // row of 2, then [IMG_END].
  pixtral: { prompt: (question) => `[INST]${question}[IMG][/INST]`, rows: 2 + 1 },
  // Llama 3.2 Vision's: the marker stays a row; the decoder's layers read the image.
  mllama: {
    prompt: (question) =>
      `<|start_header_id|>user<|end_header_id|>\n\n${question}<|image|><|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`,
    rows: 1,
  },
};
const { prompt: render, rows: imageRows } = families[family];

const dataUrl = (file) => 'data:image/jpeg;base64,' + fs.readFileSync(path.join(images, file)).toString('base64');
const imagePart = (url) => ({ type: 'image_url', image_url: { url } });
const ask = (content, extra = {}) => ({
  messages: [{ role: 'user', content }], max_tokens: 1, temperature: 0, logprobs: true, top_logprobs: 5, ...extra,
});

// The CLI's log-probabilities of the token after the prompt the template
// renders for one image and `question`: the 5 greatest, greatest first.
function cliTop(question, file) {
  const prompt = render(question);
  const ids = execFileSync(binary, ['tokenize', '-w', dir, '-p', prompt, '--ids']).toString().trim();
  const out = path.join(os.tmpdir(), `lathe-vision-${process.pid}.bin`);
  execFileSync(binary, ['logits', '-w', dir, '-t', ids.replace(/[[\] ]/g, ''), '-n', '0', '-o', out,
                        '--image', path.join(images, file)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const floats = new Float32Array(fs.readFileSync(out).buffer.slice(0));
  fs.unlinkSync(out);
  const last = Array.from(floats.subarray(floats.length - vocab));
  const max = Math.max(...last);
  const total = max + Math.log(last.reduce((s, x) => s + Math.exp(x - max), 0));
  return last.map((x) => x - total).sort((a, b) => b - a).slice(0, 5);
}

async function metric(baseURL, name) {
  const text = await (await fetch(baseURL + '/metrics')).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

main(() => withServer(['--parallel', '2'], 300000, async ({ client, baseURL }) => {
  const model = (await client.models.list()).data[0].id;
  const baseline = dataUrl('baseline.jpg');

  let first;
  await step('an image and a question: the first token as logits --image gives it', async () => {
    const r = await client.chat.completions.create({ model, ...ask([{ type: 'text', text: 'What is this?' }, imagePart(baseline)]) });
    first = r.choices[0].logprobs.content[0].top_logprobs.map((t) => t.logprob);
    const expected = cliTop('What is this?', 'baseline.jpg');
    first.forEach((x, i) => assert.ok(Math.abs(x - expected[i]) < 1e-3, `top ${i}: ${x} vs ${expected[i]}`));
    // The prompt's tokens count the image's rows in place of its marker.
    const ids = execFileSync(binary, ['tokenize', '-w', dir, '-p', render('What is this?'), '--ids'])
      .toString().split(',').length;
    assert.equal(r.usage.prompt_tokens, ids - 1 + imageRows);
  });

  await step('another image: other log-probabilities', async () => {
    const r = await client.chat.completions.create({ model, ...ask([{ type: 'text', text: 'What is this?' }, imagePart(dataUrl('gray.jpg'))]) });
    const other = r.choices[0].logprobs.content[0].top_logprobs.map((t) => t.logprob);
    assert.ok(other.some((x, i) => Math.abs(x - first[i]) > 1e-4), 'the image changes the answer');
    const expected = cliTop('What is this?', 'gray.jpg');
    other.forEach((x, i) => assert.ok(Math.abs(x - expected[i]) < 1e-3, `top ${i}: ${x} vs ${expected[i]}`));
  });

  await step('the same image twice in a request: encoded once', async () => {
    const before = await metric(baseURL, 'lathe_images_total');
    const r = await client.chat.completions.create({
      model, ...ask([imagePart(baseline), { type: 'text', text: 'And these?' }, imagePart(baseline)], { max_tokens: 4, logprobs: false, top_logprobs: undefined }),
    });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(await metric(baseURL, 'lathe_images_total'), before + 1);
  });

  await step('streamed: the same first token as whole', async () => {
    const stream = await client.chat.completions.create({
      model, stream: true, ...ask([{ type: 'text', text: 'What is this?' }, imagePart(baseline)]),
    });
    let top = null;
    for await (const chunk of stream) {
      const lp = chunk.choices[0] && chunk.choices[0].logprobs;
      if (lp && lp.content && lp.content.length) top = lp.content[0].top_logprobs.map((t) => t.logprob);
    }
    assert.ok(top, 'a chunk with logprobs');
    top.forEach((x, i) => assert.ok(Math.abs(x - first[i]) < 1e-5, `top ${i}: ${x} vs ${first[i]}`));
  });

  await step('a text-only chat to the vision model', async () => {
    const r = await client.chat.completions.create({ model, ...ask('Hello there', { max_tokens: 3 }) });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 3);
  });

  await step('a URL the server would fetch, and a payload not in base64: 400s naming the part', async () => {
    for (const [url, says] of [['https://example.com/cat.png', 'the server fetches nothing'], ['data:image/png;base64,@@@@', 'is not base64']]) {
      await assert.rejects(client.chat.completions.create({ model, ...ask([imagePart(url), { type: 'text', text: 'x' }]) }), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, 'messages[0].content[0].image_url.url');
        assert.ok(e.message.includes(says), e.message);
        return true;
      });
    }
  });
}));
