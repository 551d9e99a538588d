package vllmevents

import (
	"testing"

	"go.uber.org/goleak"
)

// zmqPubWriter is the goroutine of every zmq4 PUB socket, which its Close
// never stops (zmq4 v0.17.0 closes the connections but not the writer).
// Only the mocker's publisher in these tests has PUB sockets; the
// subscriber uses SUB and DEALER sockets, which stop cleanly.
const zmqPubWriter = "github.com/go-zeromq/zmq4.(*pubMWriter).run"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(zmqPubWriter)) }
