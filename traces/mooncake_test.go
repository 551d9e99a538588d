package traces

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReadBundled(t *testing.T) {
	reqs, err := ReadBytes(MooncakeSynthetic)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3993 {
		t.Fatalf("got %d requests, want 3993", len(reqs))
	}
	if reqs[0].InputTokens != 40160 || len(reqs[0].HashIDs) != 79 {
		t.Fatalf("first record = %+v", reqs[0])
	}
	if last := reqs[len(reqs)-1].Arrival; last != 1022025*time.Millisecond {
		t.Fatalf("last arrival %v", last)
	}
}

func TestReadRejects(t *testing.T) {
	tests := []struct{ name, in, wantLine string }{
		{"not json", "{", "line 1"},
		{"missing field", `{"timestamp":0,"input_length":5}`, "line 1"},
		{"negative", `{"timestamp":0,"input_length":-5,"output_length":1}`, "line 1"},
		{"too many blocks", `{"timestamp":0,"input_length":512,"output_length":1,"hash_ids":[1,2]}`, "line 1"},
		{"backwards", "{\"timestamp\":5,\"input_length\":1,\"output_length\":1}\n\n{\"timestamp\":4,\"input_length\":1,\"output_length\":1}", "line 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.wantLine) {
				t.Fatalf("err = %v, want ErrBadRecord at %s", err, tc.wantLine)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"timestamp":0,"input_length":600,"output_length":3,"hash_ids":[1,2]}`))
	f.Add([]byte("{\"timestamp\":1.5}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := ReadBytes(b)
		if err != nil {
			return
		}
		for _, r := range reqs {
			if r.InputTokens < 0 || r.OutputTokens < 0 || len(r.HashIDs)*MooncakeBlockTokens >= r.InputTokens+MooncakeBlockTokens {
				t.Fatalf("accepted invalid record %+v", r)
			}
		}
	})
}
