// Package mosquittotest runs Debian's Mosquitto for tests: on a free port
// of 127.0.0.1, with a password file, without persistence or with it (a
// home server's broker), killed or stopped and started again on the same
// port at will, and its users changed while it runs (a SIGHUP reloads
// the password file). Tests skip without it; .ci/run
// installs it (scripts/deps.sh).
package mosquittotest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// Binary is where Debian installs the broker.
const Binary = "/usr/sbin/mosquitto"

// Mosquitto is one broker.
type Mosquitto struct {
	t      testing.TB
	dir    string
	scheme string // "" for tcp
	Addr   string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Start starts a broker whose users are users (name → password), or
// skips the test when Mosquitto is not installed. It is killed when the
// test ends.
func Start(t testing.TB, users map[string]string) *Mosquitto { return start(t, users, nil, false) }

// StartPersistent starts a broker like Start that keeps its state across
// a Stop and a Restart, as a home server's does: persistence on (saved
// when it stops), and no limit on what it queues for a client, so a
// subscriber's persistent session (SubscribeSession) gets everything
// published while the broker was away and it was not.
func StartPersistent(t testing.TB, users map[string]string) *Mosquitto {
	return start(t, users, nil, true)
}

// TLS is a listener's TLS: PEM files of the CA, the broker's certificate
// and key; RequireCert makes the broker ask for a client certificate the
// CA signed.
type TLS struct {
	CAFile, CertFile, KeyFile string
	RequireCert               bool
}

// StartTLS starts a broker like Start whose listener speaks TLS.
func StartTLS(t testing.TB, users map[string]string, tls TLS) *Mosquitto {
	return start(t, users, &tls, false)
}

func start(t testing.TB, users map[string]string, tls *TLS, persist bool) *Mosquitto {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("no Mosquitto here (%v): scripts/deps.sh installs it", err)
	}
	if os.Getenv("TOBE_BODY_EMULATED") != "" {
		// The cross build's tests run under qemu-user, many times slower
		// than any board, beside a native broker: their waits are for a
		// machine. make test runs them natively.
		t.Skip("under emulation (TOBE_BODY_EMULATED): the tests against a real Mosquitto run natively in make test")
	}
	m := &Mosquitto{t: t, dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Addr = l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(m.Addr)
	conf := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous false\npassword_file %s\nlog_dest file %s\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n",
		port, filepath.Join(m.dir, "passwd"), filepath.Join(m.dir, "log"))
	if persist {
		conf += fmt.Sprintf("persistence true\npersistence_location %s/\nmax_queued_messages 0\n", m.dir)
	} else {
		conf += "persistence false\n"
	}
	if tls != nil {
		m.scheme = "ssl"
		conf += fmt.Sprintf("cafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate %v\n", tls.CAFile, tls.CertFile, tls.KeyFile, tls.RequireCert)
	}
	if os.Getuid() == 0 {
		// As root it would become the user mosquitto, who cannot read
		// the test's files.
		conf += "user root\n"
	}
	if err := os.WriteFile(filepath.Join(m.dir, "mosquitto.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.writeUsers(users)
	m.Restart()
	t.Cleanup(m.Kill)
	return m
}

// URL is the broker's URL.
func (m *Mosquitto) URL() string {
	if m.scheme != "" {
		return m.scheme + "://" + m.Addr
	}
	return "tcp://" + m.Addr
}

func (m *Mosquitto) writeUsers(users map[string]string) {
	m.t.Helper()
	path := filepath.Join(m.dir, "passwd")
	os.Remove(path)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		m.t.Fatal(err)
	}
	for u, p := range users {
		if out, err := exec.Command("mosquitto_passwd", "-b", path, u, p).CombinedOutput(); err != nil {
			m.t.Fatalf("mosquitto_passwd: %v: %s", err, out)
		}
	}
}

// SetUsers replaces the users; the running broker reloads them.
func (m *Mosquitto) SetUsers(users map[string]string) {
	m.t.Helper()
	m.writeUsers(users)
	if m.cmd != nil {
		m.cmd.Process.Signal(syscall.SIGHUP)
	}
}

// Restart starts the broker (again) and waits until it accepts
// connections.
func (m *Mosquitto) Restart() {
	m.t.Helper()
	if m.cmd != nil {
		return
	}
	cmd := exec.Command(Binary, "-c", filepath.Join(m.dir, "mosquitto.conf"))
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(m.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", m.Addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-m.done:
			m.t.Fatalf("mosquitto exited at its start: %s", m.Log())
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mosquitto does not listen on %s: %v\n%s", m.Addr, err, m.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop stops the broker with SIGTERM, as `systemctl restart mosquitto`
// does (a persistent one saves its state first), and waits for it to be
// gone.
func (m *Mosquitto) Stop() {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	<-m.done
	m.cmd = nil
}

// Kill kills the broker with SIGKILL, as a crash or a pulled plug would,
// and waits for it to be gone.
func (m *Mosquitto) Kill() {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
}

// Log is what the broker logged.
func (m *Mosquitto) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "log"))
	return strings.TrimSpace(string(b))
}

// Subscriber is an MQTT client that keeps everything it is sent on a
// filter, across reconnects the test makes.
type Subscriber struct {
	t          testing.TB
	url        string
	user, pass string
	filter     string
	session    string // the client id of a persistent session; "" for a clean one
	mu         sync.Mutex
	client     mqtt.Client
	messages   []Message
}

// Message is one message a Subscriber got.
type Message struct {
	Topic   string
	Payload []byte
	Retain  bool
}

// Subscribe connects and subscribes at QoS 1 to filter.
func (m *Mosquitto) Subscribe(user, pass, filter string) *Subscriber {
	m.t.Helper()
	s := &Subscriber{t: m.t, url: m.URL(), user: user, pass: pass, filter: filter}
	s.Connect()
	m.t.Cleanup(s.Close)
	return s
}

// SubscribeSession is Subscribe with a persistent session (clean session
// off, one client id throughout): what the broker queued for it while it
// was away comes when it connects again, as a home server's consumer
// would have it.
func (m *Mosquitto) SubscribeSession(user, pass, filter string) *Subscriber {
	m.t.Helper()
	s := &Subscriber{t: m.t, url: m.URL(), user: user, pass: pass, filter: filter, session: fmt.Sprintf("sub-%d", time.Now().UnixNano())}
	s.Connect()
	m.t.Cleanup(s.Close)
	return s
}

// Connect connects (again) and subscribes; it returns once the broker
// has granted the subscription.
func (s *Subscriber) Connect() {
	s.t.Helper()
	s.Close()
	keep := func(_ mqtt.Client, msg mqtt.Message) {
		s.mu.Lock()
		s.messages = append(s.messages, Message{msg.Topic(), append([]byte(nil), msg.Payload()...), msg.Retained()})
		s.mu.Unlock()
	}
	id := s.session
	if id == "" {
		id = fmt.Sprintf("sub-%d", time.Now().UnixNano())
	}
	// A persistent session's queued messages come right after the
	// CONNACK, before the subscription is made again: the default
	// handler takes them.
	o := mqtt.NewClientOptions().AddBroker(s.url).SetClientID(id).
		SetUsername(s.user).SetPassword(s.pass).SetCleanSession(s.session == "").SetAutoReconnect(false).SetOrderMatters(true).
		SetDefaultPublishHandler(keep)
	c := mqtt.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		s.t.Fatalf("subscriber connect: %v", tok.Error())
	}
	tok := c.Subscribe(s.filter, 1, keep)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		s.t.Fatalf("subscribe %s: %v", s.filter, tok.Error())
	}
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
}

// Close disconnects, keeping what was got.
func (s *Subscriber) Close() {
	s.mu.Lock()
	c := s.client
	s.client = nil
	s.mu.Unlock()
	if c != nil {
		c.Disconnect(100)
	}
}

// Messages returns what came on topics that start with prefix.
func (s *Subscriber) Messages(prefix string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if strings.HasPrefix(m.Topic, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// Cut is a TCP relay in front of a broker that a test can cut: cut, the
// broker is unreachable (every connection through it is closed and new
// ones are refused) while it keeps running, as on a network that went
// away; frozen, the connections through it stay open and carry nothing
// (what a board that lost its power leaves behind), and new ones are
// refused; mended, it passes connections again.
type Cut struct {
	t      testing.TB
	Addr   string
	target string

	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]bool
	frozen bool
	wg     sync.WaitGroup
}

// NewCut listens on a free port of 127.0.0.1 and passes to target.
func NewCut(t testing.TB, target string) *Cut {
	t.Helper()
	c := &Cut{t: t, target: target, conns: map[net.Conn]bool{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = l.Addr().String()
	c.serve(l)
	t.Cleanup(func() { c.Cut(); c.wg.Wait() })
	return c
}

// URL is the broker's URL through the cut.
func (c *Cut) URL() string { return "tcp://" + c.Addr }

func (c *Cut) serve(l net.Listener) {
	c.mu.Lock()
	c.l = l
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", c.target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns[in], c.conns[out] = true, true
			c.mu.Unlock()
			for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
				c.wg.Add(1)
				go func(dst, src net.Conn) {
					defer c.wg.Done()
					buf := make([]byte, 32<<10)
					for {
						n, err := src.Read(buf)
						c.mu.Lock()
						frozen := c.frozen
						c.mu.Unlock()
						if n > 0 && !frozen {
							if _, werr := dst.Write(buf[:n]); werr != nil {
								break
							}
						}
						if err != nil {
							break
						}
					}
					c.mu.Lock()
					frozen := c.frozen
					c.mu.Unlock()
					if frozen {
						// A board without power closes nothing: the far
						// end learns of it from the silence alone.
						src.Close()
						return
					}
					dst.Close()
					src.Close()
				}(p[0], p[1])
			}
		}
	}()
}

// Freeze stops carrying anything on the connections there are, leaving
// them open, and refuses new ones.
func (c *Cut) Freeze() {
	c.mu.Lock()
	c.frozen = true
	if c.l != nil {
		c.l.Close()
		c.l = nil
	}
	c.mu.Unlock()
}

// Cut closes every connection and refuses new ones.
func (c *Cut) Cut() {
	c.mu.Lock()
	c.frozen = false
	if c.l != nil {
		c.l.Close()
		c.l = nil
	}
	for conn := range c.conns {
		conn.Close()
	}
	clear(c.conns)
	c.mu.Unlock()
}

// Mend passes connections again, on the same port.
func (c *Cut) Mend() {
	c.t.Helper()
	l, err := net.Listen("tcp", c.Addr)
	if err != nil {
		c.t.Fatalf("mend %s: %v", c.Addr, err)
	}
	c.serve(l)
}

// SilentTimeout connects a client that says nothing after its CONNECT
// (MQTT 3.1.1, the keep-alive given, no Will) and returns how long the
// broker takes to close its connection: the broker's own keep-alive
// timeout, which MQTT puts at 1.5 × the keep-alive.
func (m *Mosquitto) SilentTimeout(user, pass string, keepalive time.Duration) (time.Duration, error) {
	c, err := net.Dial("tcp", m.Addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	str := func(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }
	k := int(keepalive / time.Second)
	vh := append(str("MQTT"), 4, 0xC2, byte(k>>8), byte(k)) // level 4; user, password, clean session
	body := append(append(append(vh, str(fmt.Sprintf("silent-%d", time.Now().UnixNano()))...), str(user)...), str(pass)...)
	if _, err := c.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		return 0, err
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		return 0, fmt.Errorf("CONNACK %x: %v", ack, err)
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * keepalive))
	_, err = c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, fmt.Errorf("the broker kept a silent client for %v", 10*keepalive)
	}
	return time.Since(start), nil
}

// Publish publishes payload on topic at QoS 1 from the subscriber's
// connection and waits for the broker's PUBACK.
func (s *Subscriber) Publish(topic string, payload []byte, retained bool) {
	s.t.Helper()
	s.mu.Lock()
	c := s.client
	s.mu.Unlock()
	if c == nil {
		s.t.Fatal("publish: the subscriber is not connected")
	}
	if tok := c.Publish(topic, 1, retained, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		s.t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}
