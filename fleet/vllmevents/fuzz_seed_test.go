package vllmevents

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"encoding/json"
)

// fuzzSeeds returns every fixture batch as a seed.
func fuzzSeeds(f *testing.F) [][]byte {
	files, _ := filepath.Glob("testdata/*.json")
	var out [][]byte
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var fx fixture
		if err := json.Unmarshal(data, &fx); err != nil {
			f.Fatal(err)
		}
		for _, h := range fx.Batches {
			b, _ := hex.DecodeString(h)
			out = append(out, b)
		}
	}
	return out
}
