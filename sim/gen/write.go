package gen

import (
	"bufio"
	"encoding/json"
	"io"

	"github.com/kvrouter/kvrouter/traces"
)

// record is one Mooncake JSONL line; the key order is the published one.
type record struct {
	Timestamp    int64    `json:"timestamp"`
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// Write writes reqs as Mooncake JSONL, timestamps in whole milliseconds.
func Write(w io.Writer, reqs []traces.Request) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, r := range reqs {
		rec := record{Timestamp: r.Arrival.Milliseconds(), InputLength: r.InputTokens, OutputLength: r.OutputTokens, HashIDs: r.HashIDs}
		if rec.HashIDs == nil {
			rec.HashIDs = []uint64{}
		}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	return bw.Flush()
}
