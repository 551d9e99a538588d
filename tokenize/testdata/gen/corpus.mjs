// Deterministic prompt corpus shared with tokenize/corpus_test.go: both build
// every prompt from ../pieces.json with the same 32-bit generator, so the
// prompts themselves need not be committed.
import { readFileSync } from 'node:fs';

const here = new URL('.', import.meta.url);
export const { pieces, separators } = JSON.parse(readFileSync(new URL('../pieces.json', here), 'utf8'));

// CorpusSeed seeds prompt i with CorpusSeed+i; LongSeed does the same for the long prompts.
export const CorpusSeed = 20261203;
export const CorpusCount = 2000;
export const LongSeed = 77000;
export const LongCount = 3;
export const LongPieces = 2150;
export const BenchSeed = 12288;
export const BenchPieces = 820;

// rng is mulberry32: a 32-bit state advanced by a constant, returning a uint32.
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a) >>> 0;
    t = ((t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t) >>> 0;
    return (t ^ (t >>> 14)) >>> 0;
  };
}

// prompt joins pieces and separators chosen by the generator; a quarter of
// the pieces are cut to a random code-point range so that boundaries fall
// inside words, numbers, emoji sequences and special tokens.
export function prompt(seed, n) {
  const r = rng(seed);
  if (n === 0) n = 1 + (r() % 12);
  let out = '';
  for (let k = 0; k < n; k++) {
    let p = pieces[r() % pieces.length];
    if (r() % 4 === 0) {
      const cps = Array.from(p);
      const a = r() % (cps.length + 1);
      const b = a + (r() % (cps.length - a + 1));
      p = cps.slice(a, b).join('');
    }
    out += p + separators[r() % separators.length];
  }
  return out;
}
