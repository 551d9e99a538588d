package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// linknet is a DC's cluster network made of loopback TCP proxies: one in
// front of each member's raft listener and one in front of its cluster
// API, and the members' --peers name the proxies. A partition is a set of
// blocked (from, to) member pairs; a degradation adds delay, jitter and
// loss to every link.
//
// A proxy only sees connections, so it tells which member dialled by the
// process that owns the connection's other end: the accepted connection's
// remote port is looked up in /proc/net/tcp (its socket inode) and then
// among the members' open files (/proc/<pid>/fd). hashicorp/raft's TCP
// transport cannot bind a source address, so this is the one way to cut
// A→B while B→A still flows over B's own connections. A connection of an
// unknown process (the test's own clients, `kvrouter cluster status`) is
// never blocked.
//
// Blocking is a blackhole, as in etcd's proxy: a blocked pair's open
// connections are closed at once, and new ones are accepted and then
// carry nothing until the heal closes them, so the dialler sees timeouts,
// not refusals. Loss on a TCP link cannot drop bytes without corrupting
// the stream; it is modelled as what the endpoints see of a lost segment:
// the chunk arrives after a retransmission timeout (200 ms, Linux's
// minimum RTO).
type linknet struct {
	t       *testing.T
	members func() []*member

	mu      sync.Mutex
	blocked map[[2]string]bool
	delay   time.Duration
	jitter  time.Duration
	loss    float64
	rng     *rand.Rand
	proxies []*linkProxy
}

// lossRTO is the delay a lost chunk costs (see linknet).
const lossRTO = 200 * time.Millisecond

func newLinknet(t *testing.T, members func() []*member, seed uint64) *linknet {
	return &linknet{t: t, members: members, blocked: map[[2]string]bool{}, rng: rand.New(rand.NewPCG(seed, 23))}
}

// front starts the proxies in front of m's raft and API listeners and
// makes them the addresses the other members dial.
func (n *linknet) front(m *member) {
	n.t.Helper()
	r, a := n.listen(m.id, m.raft), n.listen(m.id, m.api)
	m.peerRaft, m.peerAPI = r.addr(), a.addr()
}

func (n *linknet) listen(to, target string) *linkProxy {
	n.t.Helper()
	ln, err := net.Listen("tcp", freeAddr(n.t))
	if err != nil {
		n.t.Fatal(err)
	}
	p := &linkProxy{n: n, ln: ln, to: to, target: target, conns: map[*linkConn]bool{}}
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	p.wg.Go(p.accept)
	n.t.Cleanup(p.close)
	return p
}

// partition blocks every link between members of different groups, in
// both directions; members in no group are cut off from everyone.
func (n *linknet) partition(groups ...[]*member) {
	side := map[string]int{}
	for i, g := range groups {
		for _, m := range g {
			side[m.id] = i + 1
		}
	}
	ms := n.members()
	n.mu.Lock()
	for _, a := range ms {
		for _, b := range ms {
			if a != b && (side[a.id] == 0 || side[a.id] != side[b.id]) {
				n.blocked[[2]string{a.id, b.id}] = true
			}
		}
	}
	n.mu.Unlock()
	n.enforce()
}

// isolate cuts m off from every other member.
func (n *linknet) isolate(m *member) {
	var rest []*member
	for _, o := range n.members() {
		if o != m {
			rest = append(rest, o)
		}
	}
	n.partition(rest)
}

// heal lifts every block and closes the connections that were held
// silent, so the members dial again.
func (n *linknet) heal() {
	n.mu.Lock()
	n.blocked = map[[2]string]bool{}
	n.mu.Unlock()
	for _, p := range n.snapshot() {
		p.mu.Lock()
		for c := range p.conns {
			if c.tainted.Load() {
				c.close()
			}
		}
		p.mu.Unlock()
	}
}

// unblock lifts the blocks of every link to or from m.
func (n *linknet) unblock(m *member) {
	n.mu.Lock()
	for pair := range n.blocked {
		if pair[0] == m.id || pair[1] == m.id {
			delete(n.blocked, pair)
		}
	}
	n.mu.Unlock()
}

// degrade sets the delay ± jitter and the loss of every link.
func (n *linknet) degrade(delay, jitter time.Duration, loss float64) {
	n.mu.Lock()
	n.delay, n.jitter, n.loss = delay, jitter, loss
	n.mu.Unlock()
}

func (n *linknet) snapshot() []*linkProxy {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*linkProxy(nil), n.proxies...)
}

func (n *linknet) isBlocked(from, to string) bool {
	if from == "" {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.blocked[[2]string{from, to}]
}

// hold is how long the next chunk waits: the delay ± jitter, plus a
// retransmission timeout when it is "lost".
func (n *linknet) hold() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.delay
	if n.jitter > 0 {
		d += time.Duration(n.rng.Int64N(int64(2*n.jitter))) - n.jitter
	}
	if n.loss > 0 && n.rng.Float64() < n.loss {
		d += lossRTO
	}
	return max(d, 0)
}

// enforce closes the open connections of blocked pairs.
func (n *linknet) enforce() {
	for _, p := range n.snapshot() {
		p.mu.Lock()
		for c := range p.conns {
			if n.isBlocked(c.from, p.to) {
				c.close()
			}
		}
		p.mu.Unlock()
	}
}

// linkProxy is the proxy in front of one listener of member to.
type linkProxy struct {
	n      *linknet
	ln     net.Listener
	to     string
	target string
	mu     sync.Mutex
	conns  map[*linkConn]bool
	wg     sync.WaitGroup
}

// linkConn is one proxied connection: from is the dialling member.
type linkConn struct {
	from    string
	down    net.Conn
	tainted atomic.Bool

	mu     sync.Mutex
	up     net.Conn
	closed bool
}

// close closes both ends. A close that comes while the upstream is still
// being dialled marks the pair closed, so attach refuses the new
// connection instead of leaving it open with nobody to close it (which
// kept the proxy's close waiting on a pipe forever).
func (c *linkConn) close() {
	c.mu.Lock()
	c.closed = true
	up := c.up
	c.mu.Unlock()
	_ = c.down.Close()
	if up != nil {
		_ = up.Close()
	}
}

// attach sets the upstream end, unless the pair was closed meanwhile.
func (c *linkConn) attach(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.up = up
	return true
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *linkProxy) serve(down net.Conn) {
	lc := &linkConn{down: down, from: p.dialler(down)}
	p.mu.Lock()
	p.conns[lc] = true
	p.mu.Unlock()
	defer func() {
		lc.close()
		p.mu.Lock()
		delete(p.conns, lc)
		p.mu.Unlock()
	}()
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	if !lc.attach(up) {
		_ = up.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(lc, up, down) })
	wg.Go(func() { p.pipe(lc, down, up) })
	wg.Wait()
}

// pipe copies src to dst chunk by chunk, holding each as the link's
// degradation says and discarding it while the pair is blocked.
func (p *linkProxy) pipe(lc *linkConn, dst, src net.Conn) {
	defer lc.close()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if p.n.isBlocked(lc.from, p.to) {
				lc.tainted.Store(true)
				continue
			}
			if d := p.n.hold(); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// dialler names the member whose process owns the other end of c, or "".
func (p *linkProxy) dialler(c net.Conn) string {
	ra, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	inode := socketInode(ra.Port, p.ln.Addr().(*net.TCPAddr).Port)
	if inode == "" {
		return ""
	}
	for _, m := range p.n.members() {
		if pid := m.pid(); pid != 0 && ownsSocket(pid, inode) {
			return m.id
		}
	}
	return ""
}

// socketInode finds the inode of the IPv4 socket whose local port is
// local and remote port is remote, in this network namespace.
func socketInode(local, remote int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", local)
	wantRem := fmt.Sprintf(":%04X", remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		if strings.HasSuffix(fs[1], want) && strings.HasSuffix(fs[2], wantRem) {
			return fs[9]
		}
	}
	return ""
}

// ownsSocket reports whether process pid has socket inode open.
func ownsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

func (p *linkProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// startProxiedDC starts DC name like startNamedDC, with a linknet in front
// of every member's cluster links.
func startProxiedDC(t *testing.T, name string, nodes, engines int, extra ...string) *dc {
	t.Helper()
	return startDCWith(t, name, nodes, func(d *dc, ctx context.Context, wg *sync.WaitGroup) {
		d.net = newLinknet(t, func() []*member { d.mu.Lock(); defer d.mu.Unlock(); return append([]*member(nil), d.members...) }, seed())
		for id := range engines {
			startEngine(t, ctx, wg, d.nats, name, uint64(id+1))
		}
	}, extra...)
}
