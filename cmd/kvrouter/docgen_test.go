package main

import (
	"os"
	"strings"
	"testing"
)

const configDoc = "../../docs/configuration.md"

// TestConfigurationDocIsGenerated fails when an options table in
// docs/configuration.md differs from the code's options. Regenerate them
// with KVRTEST_UPDATE_DOCS=1 go test -run TestConfigurationDocIsGenerated ./cmd/kvrouter.
func TestConfigurationDocIsGenerated(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc, stale := string(raw), false
	for _, d := range documented {
		begin, end := docMarkers(d.sub)
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s: generated-table markers of %s missing", configDoc, d.sub)
		}
		j += len(end) + 1
		if want := optionsTable(d.sub, d.register); doc[i:j] != want {
			doc, stale = doc[:i]+want+doc[j:], true
		}
	}
	if !stale {
		return
	}
	if os.Getenv("KVRTEST_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(configDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s: an options table is stale; regenerate them with KVRTEST_UPDATE_DOCS=1 go test -run TestConfigurationDocIsGenerated ./cmd/kvrouter", configDoc)
}
