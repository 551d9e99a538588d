// Package tokenize turns request text into the token ids an inference
// engine computes for it, so that routing's block hashes line up with the
// engine's KV blocks. It reads a model's Hugging Face tokenizer files and
// renders its chat template; it is pure Go.
//
// Guarantees. For byte-level BPE tokenizers (Llama 3, Qwen 2.5 and 3,
// DeepSeek V3, GPT-OSS and the GPT-2 lineage) Encode returns the ids the
// reference implementation returns: added and special tokens written in
// the text are cut out first (leftmost, then longest; lstrip, rstrip and
// single_word honoured), the normalizer runs (NFC, NFKC, ...), the
// pre-tokenizer's Split patterns and ByteLevel step cut the text into
// pieces, and each piece is merged by rank. testdata holds 2,000 generated
// prompts and three of about 32,000 tokens per family with the reference's
// ids, and the tests compare every one. ApplyChatTemplate renders the
// model's Jinja chat template with the variables the reference passes, and
// its output is compared byte for byte with the reference's on a set of
// conversations (system prompts, several turns, tools, tool calls and
// results, with and without the generation prompt).
//
// What it refuses. Any other model kind (WordPiece, Unigram, SentencePiece
// BPE with Metaspace or byte fallback), pre-tokenizer, normalizer or
// post-processor is refused at load with ErrUnsupported inside a
// *FileError naming the file and key, rather than approximated: a wrong
// id sequence would silently ruin cache matching. A file that is not the
// JSON it should be is refused with ErrInvalid the same way.
//
// Why some of it is written here. The Split patterns rely on look-ahead
// (\s+(?!\S)), which Go's regexp lacks. The known patterns (patterns.go)
// are hand-written matchers that run the regex's alternatives the way a
// backtracking engine would, because a general backtracking engine costs
// several times more per character and routing tokenizes every prompt.
// Any other pattern runs on github.com/dlclark/regexp2, and the tests
// check the hand-written matchers against it. Chat templates run on
// github.com/ardanlabs/jinja, a Jinja engine written for chat templates;
// this package supplies what the reference adds around it (the special
// token variables, raise_exception, strftime_now, template choice by
// name) and passes messages with their key order intact.
//
// Where it knowingly follows the engine rather than a JavaScript port: the
// Llama tokenizer classes add the beginning-of-text token on Encode with
// addSpecial unless add_bos_token is false, as the Python library does.
//
// Concurrency. A *Tokenizer is immutable after Load or New and safe for
// concurrent use; per-call working memory comes from a pool, and words that
// needed merges are remembered in a bounded, sharded cache, so that encoding
// allocates nothing per token in steady state.
package tokenize
