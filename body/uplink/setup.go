package uplink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// maxPEM bounds a TLS file read from the config.
const maxPEM = 1 << 20

// LoadTLS builds the client's TLS from PEM files: the CAs that may sign
// the broker's certificate (the system's when caFile is empty), the
// body's own certificate and key (none when both are empty), and the name
// the broker's certificate must carry (its URL's host when empty).
func LoadTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := readPEM(caFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt.tls.ca_file %s: no PEM certificate in it", caFile)
		}
	}
	if certFile != "" || keyFile != "" {
		cert, err := readPEM(certFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.cert_file: %w", err)
		}
		key, err := readPEM(keyFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.key_file: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls: %s and %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

func readPEM(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEM {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxPEM)
	}
	return b, nil
}

// InClear says why a broker URL would carry the body's events (and its
// password, if it has one) unencrypted off the device: "" when it is a
// TLS URL or the broker is on this machine's loopback.
func InClear(broker string) string {
	u, err := url.Parse(broker)
	if err != nil {
		return ""
	}
	switch u.Scheme {
	case "ssl", "tls", "wss", "mqtts":
		return ""
	}
	host := u.Hostname()
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("%s is a %s:// broker off this machine: events and credentials go unencrypted (use ssl:// and mqtt.tls)", broker, u.Scheme)
}

// loopbackHook lets every client on the machine connect, read
// everything and publish anything but a command: commands act as the
// broker's principal, and on a broker without users that would be
// whoever has a shell here.
//
// It also counts the connections it let in that the broker has not yet
// counted as connected (see Broker.Close), and once the broker closes it
// lets none in.
type loopbackHook struct {
	mochi.HookBase
	log *slog.Logger

	mu        sync.Mutex
	closing   bool
	admitting int
}

func (h *loopbackHook) ID() string { return "tobe-body-loopback" }

func (h *loopbackHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck || b == mochi.OnSessionEstablish
}

func (h *loopbackHook) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.admitting++
	return true
}

// OnSessionEstablish: the broker counts the connection as connected (it
// does so right after it is let in, and calls this after).
func (h *loopbackHook) OnSessionEstablish(*mochi.Client, packets.Packet) {
	h.mu.Lock()
	h.admitting--
	h.mu.Unlock()
}

// close lets no more connections in.
func (h *loopbackHook) close() {
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
}

// uncounted is how many connections were let in and are not yet counted
// as connected.
func (h *loopbackHook) uncounted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.admitting
}

func (h *loopbackHook) OnACLCheck(cl *mochi.Client, topic string, write bool) bool {
	if write && strings.Contains(topic, "/cmd/") {
		h.log.Warn("the embedded broker takes no commands: they would act as the broker's principal for anyone on this machine", "topic", topic, "client", cl.ID)
		return false
	}
	return true
}

// mochi's packets package builds the cases of its own tests into a map at
// init, in a file that is not a test (TPacketData: about 350 KB of heap);
// nothing outside its tests reads it. Linked for the embedded broker, it
// would be kept by every body for its whole run, broker or none.
func init() { packets.TPacketData = nil }

// Broker is the embedded broker: mochi, on 127.0.0.1 only.
type Broker struct {
	srv    *mochi.Server
	hook   *loopbackHook
	closed *gate
}

// StartBroker serves MQTT on 127.0.0.1:port. Every client on this machine
// may connect and read: it is for a first look without a server. It
// takes no commands (see loopbackHook).
func StartBroker(port int, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	// Listen first, to say plainly when the port is taken.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mqtt.embedded_broker on %s: %w", addr, err)
	}
	l.Close()
	// Its connects and disconnects are its own business; warnings are the
	// body's.
	//
	// mochi's Close does not wait for the goroutines of its connections,
	// which log as they end: after Close they log nothing here.
	closed := new(gate)
	srv := mochi.New(&mochi.Options{Logger: slog.New(atLeast{log.Handler(), slog.LevelWarn, closed}).With("part", "embedded broker")})
	hook := &loopbackHook{log: log}
	if err := srv.AddHook(hook, nil); err != nil {
		return nil, err
	}
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "loopback", Address: addr})); err != nil {
		return nil, err
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, errors.Join(fmt.Errorf("mqtt.embedded_broker on %s", addr), err)
	}
	return &Broker{srv: srv, hook: hook, closed: closed}, nil
}

// closeWait bounds how long Close waits for the broker's connections to
// end before it closes it.
const closeWait = 5 * time.Second

// Close stops the broker and drops its clients.
//
// mochi's own Close lists each listener's clients under a read lock it
// takes twice (Clients.GetByListener calls Len): a client added or
// removed between the two, one connecting or leaving as the broker
// stops, deadlocks it for good (mochi-mqtt/server issue 488, open in
// v2.7.9). So the broker first lets no one in, drops its connections and
// waits until every one has ended (each has left the list of clients),
// and only then closes: nothing is left to add or remove a client.
func (b *Broker) Close() error {
	b.hook.close()
	for _, cl := range b.srv.Clients.GetAll() {
		if !cl.Closed() {
			_ = b.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
	for deadline := time.Now().Add(closeWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b.hook.uncounted() == 0 && atomic.LoadInt64(&b.srv.Info.ClientsConnected) == 0 {
			break
		}
	}
	err := b.srv.Close()
	b.closed.shut()
	return err
}

// gate is shut once; what passes it holds it open while it passes, so
// after shut returns nothing is passing.
type gate struct {
	mu     sync.RWMutex
	closed bool
}

func (g *gate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// pass runs fn unless the gate is shut.
func (g *gate) pass(fn func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return fn()
}

// atLeast passes records of level or above to its handler, until its
// gate is shut.
type atLeast struct {
	slog.Handler
	level slog.Level
	gate  *gate
}

func (a atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= a.level && a.Handler.Enabled(ctx, l)
}

func (a atLeast) Handle(ctx context.Context, r slog.Record) error {
	return a.gate.pass(func() error { return a.Handler.Handle(ctx, r) })
}

func (a atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{a.Handler.WithAttrs(as), a.level, a.gate}
}

func (a atLeast) WithGroup(g string) slog.Handler {
	return atLeast{a.Handler.WithGroup(g), a.level, a.gate}
}
