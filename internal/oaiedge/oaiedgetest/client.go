package oaiedgetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client is a minimal OpenAI client for tests: it posts a JSON body and
// decodes the answer, or reads a stream of server-sent events chunk by
// chunk, with the field names of OpenAI's wire format. It stands in for
// the official SDK in `make test`, whose compile is the largest in the
// tree; the SDK's own tests are behind the sdk build tag (`make
// test-sdk`, docs/testing.md).
type Client struct {
	// Base is the server's URL up to and excluding /v1.
	Base string
	// HTTP is the client to send with; nil means http.DefaultClient.
	HTTP *http.Client
	// Header is sent with every request (an API key, a session).
	Header http.Header
}

// Usage is the usage object of a completion or of a stream's last chunk.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// Message is a chat message or a streamed chat delta.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Choice is one choice of a chat or text completion, whole or streamed.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	Delta        Message `json:"delta"`
	Text         string  `json:"text"`
	FinishReason string  `json:"finish_reason"`
}

// Completion is a chat or text completion, or one chunk of a stream of
// them.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
}

// Content is the text of a whole completion's first choice: the message
// of a chat completion or the text of a text completion.
func (c *Completion) Content() string {
	if len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Message.Content + c.Choices[0].Text
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("status %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// Create posts body (marshalled to JSON unless it is a string or []byte)
// to path (for example "/v1/chat/completions") and decodes the answer.
func (c *Client) Create(ctx context.Context, path string, body any) (*Completion, error) {
	resp, err := c.send(ctx, path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out Completion
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding the answer: %w", err)
	}
	return &out, nil
}

// Stream posts body to path and returns the stream of its answer's
// events; the body must ask for a stream.
func (c *Client) Stream(ctx context.Context, path string, body any) *Stream {
	resp, err := c.send(ctx, path, body)
	if err != nil {
		return &Stream{err: err}
	}
	return &Stream{body: resp.Body, sc: bufio.NewScanner(resp.Body)}
}

// Models lists the ids of GET /v1/models.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var page struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, err
	}
	if page.Object != "list" {
		return nil, fmt.Errorf("models page object %q, want list", page.Object)
	}
	ids := make([]string, len(page.Data))
	for i, m := range page.Data {
		if m.Object != "model" {
			return nil, fmt.Errorf("model %q object %q", m.ID, m.Object)
		}
		ids[i] = m.ID
	}
	return ids, nil
}

func (c *Client) send(ctx context.Context, path string, body any) (*http.Response, error) {
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req)
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, &StatusError{Status: resp.StatusCode, Body: string(data)}
	}
	return resp, nil
}

// Stream reads server-sent events: each `data:` line is one JSON chunk,
// and `data: [DONE]` ends the stream. A stream that ends without [DONE],
// or is cut, ends with an error.
type Stream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	cur  Completion
	done bool
	err  error
}

// Next reads the next chunk; it returns false at the end of the stream
// or on an error (see Err).
func (s *Stream) Next() bool {
	if s.err != nil || s.done {
		return false
	}
	for s.sc.Scan() {
		line := s.sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			s.done = true
			s.body.Close()
			return false
		}
		var chunk struct {
			Completion
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			s.fail(fmt.Errorf("chunk %q: %w", data, err))
			return false
		}
		if chunk.Error != nil {
			s.fail(fmt.Errorf("error event: %s", chunk.Error.Message))
			return false
		}
		s.cur = chunk.Completion
		return true
	}
	err := s.sc.Err()
	if err == nil {
		err = errors.New("the stream ended without data: [DONE]")
	}
	s.fail(err)
	return false
}

func (s *Stream) fail(err error) {
	s.err = err
	if s.body != nil {
		s.body.Close()
	}
}

// Current is the chunk Next read.
func (s *Stream) Current() Completion { return s.cur }

// Err is the error that ended the stream, nil after [DONE].
func (s *Stream) Err() error { return s.err }

// Close stops reading the stream.
func (s *Stream) Close() {
	if s.body != nil && !s.done && s.err == nil {
		s.fail(errors.New("closed"))
	}
}
