package vllmevents

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// pythonWithZMQ finds a Python that has Debian's python3-zmq and
// python3-msgpack, or skips the test.
func pythonWithZMQ(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import zmq, msgpack").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with zmq and msgpack: apt-get install -y python3-zmq python3-msgpack to run the libzmq interoperability test")
	return ""
}

// TestInteropLibzmq subscribes to a publisher on real libzmq that skips
// two batches on the PUB socket: the subscriber replays them over the
// ROUTER socket and ends with every block.
func TestInteropLibzmq(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Python publisher")
	}
	py := pythonWithZMQ(t)
	const n = 20
	cmd := exec.Command(py, "testdata/pyzmq_publisher.py", "20", "20", "7,8")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	eps := strings.Fields(line)
	if err != nil || len(eps) != 2 {
		t.Fatalf("publisher said %q: %v", line, err)
	}
	idx := index.NewExact()
	w := routing.Worker{ID: 3}
	sub, err := New(Config{Worker: w, Endpoint: eps[0], ReplayEndpoint: eps[1], Topic: "kv", BlockSize: 4}, idx, nil, testLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sub.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "connect", func() bool { return sub.Stats().Connects > 0 })
	_, _ = io.WriteString(stdin, "go\n")
	waitFor(t, "all blocks", func() bool { return depth(idx, n) == n })
	if st := sub.Stats(); st.Gaps != 1 || st.Rejected != 0 {
		t.Fatalf("stats %+v, want one gap and nothing refused", st)
	}
}
