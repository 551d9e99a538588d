package tokenize

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text exactly as the Hugging Face tokenizer of one
// model does, and renders that model's chat template. It is immutable
// after Load or New, and safe for concurrent use.
type Tokenizer struct {
	added      []addedToken
	rawAdded   *addedMatcher // tokens matched in the raw text
	normAdded  *addedMatcher // tokens matched after normalization
	normalizer normalizer
	steps      []splitter
	model      *bpe
	post       affixes
	cfg        config
	chat       *chatTemplates
	now        func() time.Time
	pool       sync.Pool
}

// Option adjusts a Tokenizer at construction.
type Option func(*Tokenizer)

// WithClock sets the clock that the strftime_now template function reads
// (time.Now by default). Tests pin it to render dated templates
// reproducibly.
func WithClock(now func() time.Time) Option { return func(t *Tokenizer) { t.now = now } }

// Files named inside a model directory.
const (
	TokenizerFile    = "tokenizer.json"
	ConfigFile       = "tokenizer_config.json"
	ChatTemplateFile = "chat_template.jinja"
)

// Load reads a model's tokenizer from path: a directory holding
// tokenizer.json and, optionally, tokenizer_config.json and
// chat_template.jinja (which, when present, wins over the config's
// template), or the path of a tokenizer.json whose directory holds the
// others.
func Load(path string, opts ...Option) (*Tokenizer, error) {
	dir, file := path, filepath.Join(path, TokenizerFile)
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir, file = filepath.Dir(path), path
	}
	tj, err := readTokenizerFile(file)
	if err != nil {
		return nil, err
	}
	cj, err := readOptional(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	tmpl, err := readOptional(filepath.Join(dir, ChatTemplateFile))
	if err != nil {
		return nil, err
	}
	t, err := newTokenizer(tj, cj, tmpl, opts)
	if err != nil {
		var fe *FileError
		if errors.As(err, &fe) && fe.File != "" && !filepath.IsAbs(fe.File) {
			fe.File = filepath.Join(dir, fe.File)
		}
		return nil, err
	}
	return t, nil
}

// readTokenizerFile reads tokenizer.json, or its gzip-compressed copy
// tokenizer.json.gz when only that exists (model directories shipped
// compressed: a tokenizer.json is 5 to 15 MB of highly compressible JSON).
func readTokenizerFile(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return nil, &FileError{File: file, Err: err}
		}
		return b, nil
	}
	f, gzErr := os.Open(file + ".gz")
	if gzErr != nil {
		return nil, &FileError{File: file, Err: err}
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err == nil {
		b, err = io.ReadAll(zr)
	}
	if err != nil {
		return nil, &FileError{File: file + ".gz", Err: err}
	}
	return b, nil
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &FileError{File: path, Err: err}
	}
	return b, nil
}

// New builds a Tokenizer from the contents of tokenizer.json and of
// tokenizer_config.json (nil when the model has none).
func New(tokenizerJSON, configJSON []byte, opts ...Option) (*Tokenizer, error) {
	return newTokenizer(tokenizerJSON, configJSON, nil, opts)
}

func newTokenizer(tj, cj, tmpl []byte, opts []Option) (*Tokenizer, error) {
	t := &Tokenizer{now: time.Now}
	for _, o := range opts {
		o(t)
	}
	if err := t.parseFile(tj); err != nil {
		return nil, inFile(err, TokenizerFile)
	}
	if cj != nil {
		cfg, err := parseConfig(cj)
		if err != nil {
			return nil, inFile(err, ConfigFile)
		}
		t.cfg = cfg
	}
	if tmpl != nil {
		if t.cfg.templates == nil {
			t.cfg.templates = map[string]string{}
		}
		t.cfg.templates["default"] = string(tmpl)
	}
	if err := t.finish(); err != nil {
		return nil, inFile(err, ConfigFile)
	}
	return t, nil
}

// parseFile reads tokenizer.json.
func (t *Tokenizer) parseFile(data []byte) error {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return invalid("", "%v", err)
	}
	var err error
	if t.added, err = parseAdded(f.AddedTokens); err != nil {
		return err
	}
	if t.normalizer, err = parseNormalizer(f.Normalizer, "normalizer"); err != nil {
		return err
	}
	steps, byteLevelSeen, err := parsePreTokenizer(f.PreTokenizer, "pre_tokenizer")
	if err != nil {
		return err
	}
	if !byteLevelSeen {
		return unsupported("pre_tokenizer", "no ByteLevel step: only byte-level BPE tokenizers are supported")
	}
	t.steps = steps
	if t.model, err = parseBPE(f.Model); err != nil {
		return err
	}
	t.post, err = parsePost(f.PostProcessor, "post_processor")
	return err
}

// finish applies the config: which added tokens are matched, the Llama
// classes' special tokens, and the chat templates.
func (t *Tokenizer) finish() error {
	matchable := func(a addedToken) bool { return !(t.cfg.splitSpecial && a.special) }
	t.rawAdded = newAddedMatcher(t.added, func(a addedToken) bool { return !a.normalized && matchable(a) })
	t.normAdded = newAddedMatcher(t.added, func(a addedToken) bool { return a.normalized && matchable(a) })
	if a, ok, err := t.cfg.llamaAffixes(t); err != nil {
		return err
	} else if ok {
		t.post = a
	}
	chat, err := compileTemplates(t.cfg.templates)
	if err != nil {
		return err
	}
	t.chat = chat
	return nil
}

// specialID returns the id of the special token named by a config key.
func (t *Tokenizer) specialID(key string) (uint32, bool) {
	content, ok := t.cfg.specialTokens[key]
	if !ok {
		return 0, false
	}
	return t.TokenID(content)
}

// TokenID returns the id of a token given by its text: an added token, or
// a vocabulary entry spelled as the bytes it stands for.
func (t *Tokenizer) TokenID(content string) (uint32, bool) {
	for _, a := range t.added {
		if a.content == content {
			return a.id, true
		}
	}
	id, ok := t.model.vocab[content]
	return id, ok
}

// scratch holds an encode call's working memory; it is pooled so that
// steady-state encoding allocates nothing per token.
type scratch struct {
	segs, norm []segment
	pieces     [2][]string
	syms       []uint32
	prev, next []int32
	alive      []bool
	heap       []cand
	normBuf    []byte // the normalized text of the current segment
	normIter   norm.Iter
}

// Encode appends the token ids of text to dst and returns the result. With
// addSpecial it adds the tokens the model's post-processor puts around a
// sequence (a beginning-of-text token, for most); a chat prompt rendered by
// ApplyChatTemplate already holds them, and is encoded without. Added and
// special tokens written in the text are recognised, as the reference
// does. Invalid UTF-8 is read as U+FFFD, as a JSON decoder would have.
func (t *Tokenizer) Encode(text string, addSpecial bool, dst []uint32) []uint32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	sc, _ := t.pool.Get().(*scratch)
	if sc == nil {
		sc = new(scratch)
	}
	if addSpecial {
		dst = append(dst, t.post.prefix...)
	}
	sc.segs = t.splitAdded(t.rawAdded, text, sc.segs[:0])
	for _, s := range sc.segs {
		if s.token >= 0 {
			dst = append(dst, t.added[s.token].id)
			continue
		}
		dst = t.encodeNormalized(s.text, sc, dst)
	}
	if addSpecial {
		dst = append(dst, t.post.suffix...)
	}
	t.pool.Put(sc)
	return dst
}

func (t *Tokenizer) splitAdded(m *addedMatcher, s string, dst []segment) []segment {
	if m == nil {
		return append(dst, segment{text: s, token: -1})
	}
	return m.split(s, t.added, dst)
}

// encodeNormalized normalizes a text segment, cuts out the added tokens
// that are matched in normalized text, and encodes the rest.
func (t *Tokenizer) encodeNormalized(s string, sc *scratch, dst []uint32) []uint32 {
	if t.normalizer != nil {
		s = normalizeScratch(t.normalizer, s, sc)
	}
	if t.normAdded == nil {
		return t.encodePlain(s, sc, dst)
	}
	sc.norm = t.normAdded.split(s, t.added, sc.norm[:0])
	for _, seg := range sc.norm {
		if seg.token >= 0 {
			dst = append(dst, t.added[seg.token].id)
		} else {
			dst = t.encodePlain(seg.text, sc, dst)
		}
	}
	return dst
}

// encodePlain pre-tokenizes s through every step and encodes the pieces.
func (t *Tokenizer) encodePlain(s string, sc *scratch, dst []uint32) []uint32 {
	if s == "" {
		return dst
	}
	cur := append(sc.pieces[0][:0], s)
	next := sc.pieces[1][:0]
	for _, step := range t.steps {
		next = next[:0]
		for _, p := range cur {
			next = step.split(p, next)
		}
		cur, next = next, cur
	}
	for _, p := range cur {
		if p != "" {
			dst = t.model.encodeWord(p, sc, dst)
		}
	}
	sc.pieces[0], sc.pieces[1] = cur, next
	return dst
}

// LoadModels loads MODEL=PATH entries (the --tokenizer options) into a
// map by model name; an error names the entry.
func LoadModels(entries []string) (map[string]*Tokenizer, error) {
	out := make(map[string]*Tokenizer, len(entries))
	for _, e := range entries {
		model, path, ok := strings.Cut(e, "=")
		if !ok || model == "" || path == "" {
			return nil, fmt.Errorf("%q: want MODEL=DIR", e)
		}
		if _, dup := out[model]; dup {
			return nil, fmt.Errorf("%q: model %s given twice", e, model)
		}
		tok, err := Load(path)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		out[model] = tok
	}
	return out, nil
}
