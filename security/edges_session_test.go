package security

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestUnauthenticatedSessionDeleteFails attacks a real `kvrouter node`
// process configured with a client key and an operator token: deleting
// or reading a session binding without the operator's credential must
// fail (401, or 403 with a client key), every attempt must show up in
// kvrouter_edge_auth_refusals_total, the operator must still succeed,
// and no credential may appear in the node's logs.
func TestUnauthenticatedSessionDeleteFails(t *testing.T) {
	const (
		clientKey = "edges-client-key-0123456789"
		operator  = "edges-operator-token-0123456789"
	)
	tokens := filepath.Join(t.TempDir(), "operators")
	if err := os.WriteFile(tokens, []byte(operator+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startEdgesNode(t, binary, "--api-key", clientKey, "--operator-token-file", tokens,
		"--session-affinity-ttl", "1m")
	attacks := []struct {
		name, method, bearer string
		status               int
	}{
		{"delete without credentials", "DELETE", "", 401},
		{"delete with a forged token", "DELETE", "forged-operator-token-0123456789", 401},
		{"delete with a client key", "DELETE", clientKey, 403},
		{"read without credentials", "GET", "", 401},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			status, body := n.call(t, a.method, "/v1/sessions/victim", a.bearer)
			if status != a.status || !strings.Contains(body, `"error"`) {
				t.Fatalf("status %d body %s, want %d with an OpenAI error", status, body, a.status)
			}
		})
	}
	if status, body := n.call(t, "DELETE", "/v1/sessions/victim", operator); status != 204 {
		t.Fatalf("the operator's delete: status %d body %s", status, body)
	}
	_, page := n.call(t, "GET", "/metrics", operator)
	if got := refusals(t, page, "admin", "missing") + refusals(t, page, "admin", "invalid") +
		refusals(t, page, "admin", "not_operator"); got != len(attacks) {
		t.Fatalf("%d admin refusals counted, want %d", got, len(attacks))
	}
	for _, secret := range []string{clientKey, operator} {
		if strings.Contains(n.logs.String(), secret) || strings.Contains(page, secret) {
			t.Fatal("a credential appears in the node's logs or metrics")
		}
	}
}

// refusals reads one series of kvrouter_edge_auth_refusals_total from a
// metrics page.
func refusals(t *testing.T, page, scope, reason string) int {
	t.Helper()
	re := regexp.MustCompile(`kvrouter_edge_auth_refusals_total\{[^}]*reason="` + reason + `",[^}]*scope="` + scope + `"[^}]*\} (\d+)`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no %s/%s series on the metrics page", scope, reason)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}
