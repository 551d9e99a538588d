package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/extproc"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/node/selection"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// selectionEdges are the node's selection API and endpoint picker: built
// before the frontend (which serves the API's HTTP/JSON mirror) and
// stopped after it.
type selectionEdges struct {
	api     *selection.Service
	servers []*grpc.Server
	wg      sync.WaitGroup
}

// selectionAddrs are the gRPC listeners' addresses once open.
type selectionAddrs struct {
	api, extProc atomic.Pointer[net.TCPAddr]
}

// startSelection builds the selection API, mounts its mirror on fcfg's
// routes, and serves the gRPC listeners that are configured. serving is
// the frontend's gate (nil: always).
func (n *Node) startSelection(disp *dispatch.Dispatcher, fcfg *frontend.Config, serving func() bool) (*selectionEdges, error) {
	sc := n.cfg.Selection
	reqs, err := frontend.NewRequests(*fcfg, n.metrics, n.log)
	if err != nil {
		return nil, err
	}
	sc.API.Serving, sc.API.OverloadStatus = serving, fcfg.OverloadStatus
	e := &selectionEdges{}
	if e.api, err = selection.New(sc.API, disp, reqs, n.metrics, n.log); err != nil {
		return nil, err
	}
	fcfg.Routes = append(fcfg.Routes, e.api.Routes(oaiedge.BodyReader{MaxBytes: bodyLimit(fcfg), Timeout: oaiedge.BodyReadTimeout})...)
	fcfg.NoProxy = sc.NoFrontend
	creds, err := n.selectionCreds()
	if err != nil {
		return nil, err
	}
	if sc.Addr != "" {
		g := e.grpcServer(creds, bodyLimit(fcfg))
		kvrpb.RegisterSelectionServer(g, e.api.GRPC())
		if err := e.listen(n, g, "select_addr", sc.Addr, &n.selAddrs.api); err != nil {
			e.stop(0)
			return nil, err
		}
	}
	if sc.ExtProcAddr != "" {
		sc.ExtProc.Serving = serving
		picker, err := extproc.New(sc.ExtProc, disp, reqs, n.metrics, n.log)
		if err != nil {
			e.stop(0)
			return nil, err
		}
		g := e.grpcServer(creds, bodyLimit(fcfg))
		picker.Register(g)
		if err := e.listen(n, g, "ext_proc_addr", sc.ExtProcAddr, &n.selAddrs.extProc); err != nil {
			e.stop(0)
			return nil, err
		}
	}
	return e, nil
}

// bodyLimit is the largest body the frontend accepts, which bounds the
// selection edges' bodies and gRPC messages too.
func bodyLimit(fcfg *frontend.Config) int64 {
	if fcfg.MaxBodyBytes > 0 {
		return fcfg.MaxBodyBytes
	}
	return oaiedge.MaxBodyBytes
}

// grpcServer is a gRPC server whose messages may carry a whole body (an
// OpenAI body in a Select, a BUFFERED body in ext_proc), or a prompt of
// token ids: messageCodec decodes them.
func (e *selectionEdges) grpcServer(creds credentials.TransportCredentials, maxBody int64) *grpc.Server {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(maxBody) + 1<<20), grpc.ForceServerCodecV2(messageCodec{})}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	g := grpc.NewServer(opts...)
	e.servers = append(e.servers, g)
	return g
}

// listen serves g on addr until stop.
func (e *selectionEdges) listen(n *Node, g *grpc.Server, key, addr string, bound *atomic.Pointer[net.TCPAddr]) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", key, addr, err)
	}
	bound.Store(ln.Addr().(*net.TCPAddr))
	e.wg.Go(func() {
		if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.log.Warn("selection listener stopped", "listener", key, "err", err)
		}
	})
	n.log.Info("selection edge serving", "listener", key, "addr", ln.Addr().String(), "tls", n.tls != nil)
	return nil
}

// stop lets the gRPC calls in flight finish for up to grace (an ext_proc
// stream lasts as long as its response), then ends them, and frees the
// outstanding reservations.
func (e *selectionEdges) stop(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, g := range e.servers {
		stopped := make(chan struct{})
		go func() { g.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			g.Stop()
			<-stopped
		}
	}
	e.wg.Wait()
	if e.api != nil {
		e.api.Close()
	}
}

// selectionCreds is the gRPC listeners' TLS: the client-facing
// certificate, and with select_client_ca a client certificate that CA
// signed required of every caller. Nil without tls_cert.
func (n *Node) selectionCreds() (credentials.TransportCredentials, error) {
	if n.tls == nil {
		return nil, nil
	}
	cfg := n.tls.Clone()
	cfg.NextProtos = []string{"h2"}
	if ca := n.cfg.Selection.ClientCA; ca != "" {
		pool, err := mtls.CAPool("select_client_ca", ca)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}

// SelectAddr is the selection API's gRPC address once Run has opened it,
// nil when it is off.
func (n *Node) SelectAddr() *net.TCPAddr { return n.selAddrs.api.Load() }

// ExtProcAddr is the endpoint picker's address once Run has opened it,
// nil when it is off.
func (n *Node) ExtProcAddr() *net.TCPAddr { return n.selAddrs.extProc.Load() }
