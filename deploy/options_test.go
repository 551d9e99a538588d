package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// pendingOptions are options the manifests set that this build of
// kvrouter does not define yet; the binary ignores such variables (with a
// warning), so the manifests may carry them ahead of the flag. Remove an
// entry once the flag exists: every option the manifests set exists now.
var pendingOptions []string

var flagInHelp = regexp.MustCompile(`--([a-z0-9-]+)`)

// optionState is what a subcommand's --help-all says of a KVR_* variable.
type optionState int

const (
	unknownOption optionState = iota
	currentOption
	deprecatedOption // an old name kept for compatibility; it warns
)

// options returns the KVR_* variables the subcommand reads, from its
// --help-all, which lists every flag (--help leaves out the advanced
// ones and the other names of options).
func options(t *testing.T, sub string) map[string]optionState {
	t.Helper()
	out, err := exec.Command(binary, sub, "--help-all").Output()
	if err != nil {
		t.Fatalf("kvrouter %s --help-all: %v", sub, err)
	}
	m := map[string]optionState{"KVR_CONFIG": currentOption}
	for _, line := range strings.Split(string(out), "\n") {
		f := flagInHelp.FindStringSubmatch(line)
		if f == nil || !strings.HasPrefix(strings.TrimSpace(line), "-") {
			continue
		}
		state := currentOption
		if strings.Contains(line, " deprecated name of --") {
			state = deprecatedOption
		}
		m["KVR_"+strings.ToUpper(strings.ReplaceAll(f[1], "-", "_"))] = state
	}
	return m
}

// checkEnv fails for a KVR_* variable that names no option of sub: the
// binary would ignore it, so a misspelt option would pass unnoticed; and
// for one that names an option by its deprecated name.
func checkEnv(t *testing.T, where, sub string, names []string) {
	t.Helper()
	known := options(t, sub)
	for _, n := range names {
		switch {
		case !strings.HasPrefix(n, "KVR_") || known[n] == currentOption:
		case known[n] == deprecatedOption:
			t.Errorf("%s: %s is a deprecated name of an option of kvrouter %s", where, n, sub)
		case slices.Contains(pendingOptions, n):
			t.Logf("%s: %s names no option of this build yet (pending)", where, n)
		default:
			t.Errorf("%s: %s names no option of kvrouter %s", where, n, sub)
		}
	}
}

func TestManifestsSetOnlyKnownOptions(t *testing.T) {
	for _, dc := range []string{"dc1", "dc2"} {
		for _, w := range workloads(decodeAll(t, build(t, "kubernetes/overlays/"+dc))) {
			c := w.spec.Containers[0]
			if !strings.Contains(c.Image, "kvrouter") {
				continue
			}
			var names []string
			for _, e := range c.Env {
				names = append(names, e.Name)
			}
			checkEnv(t, dc+"/"+w.name, c.Args[0], names)
		}
	}
}

// composeService is what the tests read of a compose service.
type composeService struct {
	Image       string
	Command     []string
	Environment map[string]string
}

// composeServices reads the compose trial's services, anchors merged.
func composeServices(t *testing.T) map[string]composeService {
	t.Helper()
	b, err := os.ReadFile("compose/docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Services map[string]composeService }
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Services
}

func TestComposeSetsOnlyKnownOptions(t *testing.T) {
	n := 0
	for name, s := range composeServices(t) {
		if s.Image != "kvrouter" {
			continue
		}
		n++
		var names []string
		for k := range s.Environment {
			names = append(names, k)
		}
		slices.Sort(names)
		checkEnv(t, "compose "+name, s.Command[0], names)
	}
	if n < 6 {
		t.Fatalf("only %d kvrouter services: did the compose file's anchors merge?", n)
	}
}
