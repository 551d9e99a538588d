package tokenize

import (
	"errors"
	"fmt"
)

var (
	// ErrUnsupported marks a tokenizer.json feature outside the byte-level
	// BPE family this package implements (a WordPiece model, a Metaspace
	// pre-tokenizer, an unknown normalizer...). It arrives wrapped in a
	// *FileError naming the key.
	ErrUnsupported = errors.New("tokenize: unsupported tokenizer feature")
	// ErrInvalid marks a file that parses as JSON but breaks the format's
	// rules: a merge of tokens that are not in the vocabulary, an id that
	// does not fit, a pattern that does not compile.
	ErrInvalid = errors.New("tokenize: invalid tokenizer file")
	// ErrNoChatTemplate is returned by chat rendering for a model whose
	// tokenizer_config.json (or chat_template.jinja) carries no template.
	ErrNoChatTemplate = errors.New("tokenize: model has no chat template")
	// ErrTemplate wraps a chat template that fails to compile or render,
	// including one that calls raise_exception: the template refused the
	// conversation.
	ErrTemplate = errors.New("tokenize: chat template failed")
	// ErrMessages marks a messages or tools argument that is not the JSON
	// the chat API expects (an array of objects).
	ErrMessages = errors.New("tokenize: malformed chat messages")
)

// FileError is a tokenizer file that could not be read or understood. File
// is the path (or base name) and Key the JSON key where the problem is, ""
// for the file as a whole.
type FileError struct {
	File string
	Key  string
	Err  error
}

func (e *FileError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("tokenize: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("tokenize: %s: %s: %v", e.File, e.Key, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// unsupported builds the error of an unsupported value at key.
func unsupported(key, what string) error {
	return &FileError{Key: key, Err: fmt.Errorf("%w: %s", ErrUnsupported, what)}
}

// invalid builds the error of an invalid value at key.
func invalid(key, format string, args ...any) error {
	return &FileError{Key: key, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
}

// inFile names the file of a *FileError raised while parsing it.
func inFile(err error, file string) error {
	var fe *FileError
	if errors.As(err, &fe) && fe.File == "" {
		fe.File = file
		return err
	}
	if err != nil && !errors.As(err, &fe) {
		return &FileError{File: file, Err: err}
	}
	return err
}
