package main

import (
	"os"
	"strings"
	"testing"
)

const configDoc = "../../docs/configuration.md"

// TestConfigurationDocIsGenerated fails when the options table in
// docs/configuration.md differs from the code's options. Regenerate it
// with KVRTEST_UPDATE_DOCS=1 go test -run TestConfigurationDocIsGenerated ./cmd/kvrouter.
func TestConfigurationDocIsGenerated(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: generated-table markers missing", configDoc)
	}
	j += len(docEnd) + 1
	want := optionsTable()
	if doc[i:j] == want {
		return
	}
	if os.Getenv("KVRTEST_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(configDoc, []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s: the options table is stale; regenerate it with KVRTEST_UPDATE_DOCS=1 go test -run TestConfigurationDocIsGenerated ./cmd/kvrouter", configDoc)
}
