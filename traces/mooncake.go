package traces

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// MooncakeBlockTokens is the number of tokens behind one hash id in
// Mooncake traces.
const MooncakeBlockTokens = 512

// MaxLineBytes bounds one trace record. The longest record of the public
// traces is about 10 KiB (a 190k-token prompt); 4 MiB leaves room for
// million-token prompts while keeping a corrupt file from exhausting memory.
const MaxLineBytes = 4 << 20

// ErrBadRecord is returned for a record that is not a valid trace entry.
var ErrBadRecord = errors.New("traces: bad record")

// Request is one trace record.
type Request struct {
	// Arrival is the offset from the start of the trace.
	Arrival time.Duration
	// InputTokens and OutputTokens are the prompt and generation lengths.
	InputTokens  int
	OutputTokens int
	// HashIDs name the prompt's 512-token blocks; equal ids at equal
	// positions are a shared prefix.
	HashIDs []uint64
}

type record struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// Read parses a whole Mooncake JSONL trace. Blank lines are skipped.
func Read(r io.Reader) ([]Request, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	var out []Request
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		req, err := parseRecord(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if n := len(out); n > 0 && req.Arrival < out[n-1].Arrival {
			return nil, fmt.Errorf("line %d: %w: timestamp goes backwards", line, ErrBadRecord)
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return out, nil
}

// ReadBytes parses a trace held in memory.
func ReadBytes(b []byte) ([]Request, error) { return Read(bytes.NewReader(b)) }

func parseRecord(b []byte) (Request, error) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&rec); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	switch {
	case rec.Timestamp == nil || rec.InputLength == nil || rec.OutputLength == nil:
		return Request{}, fmt.Errorf("%w: timestamp, input_length and output_length are required", ErrBadRecord)
	case *rec.Timestamp < 0 || *rec.Timestamp > float64(365*24*time.Hour/time.Millisecond):
		return Request{}, fmt.Errorf("%w: timestamp %v out of range", ErrBadRecord, *rec.Timestamp)
	case *rec.InputLength < 0 || *rec.OutputLength < 0:
		return Request{}, fmt.Errorf("%w: negative length", ErrBadRecord)
	case len(rec.HashIDs) > (*rec.InputLength+MooncakeBlockTokens-1)/MooncakeBlockTokens:
		return Request{}, fmt.Errorf("%w: %d hash ids for %d input tokens", ErrBadRecord, len(rec.HashIDs), *rec.InputLength)
	}
	return Request{
		Arrival:      time.Duration(*rec.Timestamp * float64(time.Millisecond)),
		InputTokens:  *rec.InputLength,
		OutputTokens: *rec.OutputLength,
		HashIDs:      rec.HashIDs,
	}, nil
}
