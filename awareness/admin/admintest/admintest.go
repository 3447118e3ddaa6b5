// Package admintest runs hostile peers of an admin socket as other uids,
// so that tests show the socket's limits hold when the kernel (SO_PEERCRED),
// not a seam, says who is calling. A peer is the running test binary run
// again as another uid; that needs root, and a kernel that can execute the
// binary (not a user-mode emulator): the tests skip without them.
//
// A test binary that uses it calls Main first thing in its TestMain.
package admintest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env, set, makes a test binary a peer (Main).
const Env = "TOBE_ADMIN_TEST_PEER"

// Main, in a binary started by Start, runs the peer and exits; otherwise
// it returns at once.
//
// The peer opens its connections to the socket one after the other,
// writes its lines on each in one write and reads the first answer; then
// it reports, a line per connection, whether the server kept it open
// ("conn I open|closed ANSWER": open when the answer is a result, or when
// a refused one was not closed within 10 s), then "ready", and holds
// every connection until its stdin closes.
func Main() {
	if os.Getenv(Env) == "" {
		return
	}
	os.Exit(peer())
}

func peer() int {
	path, lines := os.Getenv("ADMINTEST_SOCKET"), os.Getenv("ADMINTEST_LINES")
	n, err := strconv.Atoi(os.Getenv("ADMINTEST_CONNS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	conns := make([]net.Conn, n)
	answers := make([]string, n)
	for i := range conns {
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			return 1
		}
		conns[i] = c
		c.Write([]byte(lines + "\n")) // may find it closed already: the answer says why
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			line = "no answer: " + err.Error()
		}
		answers[i] = strings.TrimSpace(line)
	}
	// Open or closed. A connection whose first answer is a result has a
	// place. One refused must be closed by the server: it reads EOF (or a
	// reset) soon; one still open after 10 s was kept, which the server
	// must not do.
	state := make([]string, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		if strings.Contains(answers[i], `"result"`) {
			state[i] = "open"
			continue
		}
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := c.Read(make([]byte, 1))
			state[i] = "closed"
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				state[i] = "open"
			}
			c.SetReadDeadline(time.Time{})
		})
	}
	wg.Wait()
	for i := range conns {
		fmt.Printf("conn %d %s %s\n", i, state[i], answers[i])
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// Binary is a copy of the running test binary that other uids may run,
// in a directory they may enter (dir, 0755, and its parent made so). It
// skips the test unless it runs as root.
func Binary(t testing.TB) (bin, dir string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root, to run hostile peers as other uids")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	Enter(t, dir)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "peer")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// Under a user-mode emulator (the cross build's tests run the ARM
	// binaries with qemu-user, not through binfmt_misc) the kernel cannot
	// execute the copy; the test needs real processes, so it is skipped
	// there by name. make test runs it natively, make lab on ARM kernels.
	if err := exec.Command(bin, "-test.run=^$").Run(); errors.Is(err, syscall.ENOEXEC) {
		t.Skipf("this kernel cannot execute the test binary (%v): it runs under an emulator, and peers need real processes", err)
	}
	return bin, dir
}

// Enter lets every uid enter dir, a directory of t.TempDir's, and the
// test's directory above it (both are made 0700).
func Enter(t testing.TB, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Peer is a running peer process and what it reported.
type Peer struct {
	UID int
	// Open counts the connections the server kept open; Closed has the
	// one answer of each it closed.
	Open   int
	Closed []string
}

// Start runs bin as a peer of uid (primary group gid, no others) that
// opens conns connections to socket and sends lines on each, and returns
// once it has reported. The peer holds its connections until the test
// ends.
func Start(t testing.TB, bin, socket string, uid, gid, conns int, lines string) *Peer {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = []string{Env + "=1", "ADMINTEST_SOCKET=" + socket, "ADMINTEST_CONNS=" + strconv.Itoa(conns), "ADMINTEST_LINES=" + lines,
		"GORACE=atexit_sleep_ms=0"} // a -race binary otherwise waits a second before it exits
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("peer as uid %d: %v", uid, err)
	}
	drained := make(chan struct{})
	t.Cleanup(func() {
		stdin.Close()
		<-drained
		cmd.Wait()
	})
	p := &Peer{UID: uid}
	sc := bufio.NewScanner(out)
	defer func() {
		go func() {
			io.Copy(io.Discard, out)
			close(drained)
		}()
	}()
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		switch {
		case f[0] == "ready":
			return p
		case len(f) == 4 && f[2] == "open":
			p.Open++
		case len(f) == 4:
			p.Closed = append(p.Closed, f[3])
		}
	}
	t.Fatalf("peer as uid %d ended before it was ready: %v", uid, sc.Err())
	return nil
}

// Want checks how many connections the peer holds, and that each one the
// server closed was answered with a line holding closedWith.
func (p *Peer) Want(t testing.TB, open int, closedWith string) {
	t.Helper()
	if p.Open != open {
		t.Errorf("uid %d holds %d connections, want %d (the closed ones: %q)", p.UID, p.Open, open, p.Closed)
	}
	for _, a := range p.Closed {
		if !strings.Contains(a, closedWith) {
			t.Errorf("uid %d: a connection closed with %s, want %q", p.UID, a, closedWith)
		}
	}
}
