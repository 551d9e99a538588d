package deploy

import (
	"os"
	"os/exec"
	"testing"
)

// TestRulesPassPromtool runs promtool's checks on the alert rules. CI
// installs promtool (Debian package prometheus, see .ci/run); a machine
// without it skips this test, saying so.
func TestRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("KVRTEST_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found; CI installs it (Debian package prometheus)")
		}
		t.Skip("promtool not found: install Debian's prometheus package to check the rules")
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus/kvrouter-rules.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
