package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/awareness/agent"
	"github.com/tobe-body/tobe-body/body/config"
)

// stdioDrain is how long the bridge waits, once its stdin has ended, for
// the daemon to answer what it was sent and close. The daemon bounds that
// itself: it answers what it read before the end within the session's
// heartbeat window (agent.heartbeat_ms, at most 60 s) and a second, then
// closes. This only bounds a daemon that does not; it was 5 s, which cut
// off the answers of a daemon with a longer window.
const stdioDrain = 65 * time.Second

// Stdio is `tobe-body stdio`: the bridge an SSH forced command runs.
// It connects to the agent socket and copies bytes both ways, stdin to
// the socket and the socket to stdout, so stdout carries only the
// protocol; it says nothing on stderr unless it ends with an error. When
// stdin ends it half-closes the socket and goes on copying until the
// daemon has answered what it was sent and closed. It exits 0 when stdin
// ends (after the daemon has answered and closed), and
// 1 with a message when the daemon goes away first. --principal NAME
// sends the preface that narrows the connection to that agent principal.
func Stdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet("stdio", stderr, &c, false)
	sock := fs.String("socket", "", "the daemon's agent socket `PATH` (default DIR/agent.sock)")
	principal := fs.String("principal", "", "narrow the connection to the agent principal `NAME` (what an SSH forced command sets); it can only choose one the caller may be")
	if _, err := Parse(fs, args, 0); err != nil {
		return err
	}
	path := *sock
	if path == "" {
		dir := c.data
		if dir == "" {
			src := config.DeviceSources()
			src.File, src.Lenient = c.config, true
			cfg, err := config.Load(src)
			if err != nil {
				return err
			}
			dir = cfg.DataDir
		}
		path = filepath.Join(dir, agent.SocketName)
	}
	if stdin == nil {
		stdin = eofReader{}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("the body's agent socket %s: %w (is tobe-body running, and is this user in the socket's group?)", path, err)
	}
	uc := conn.(*net.UnixConn)
	defer uc.Close()
	if *principal != "" {
		line, _ := json.Marshal(agent.Preface{Tobe: "principal", Name: *principal})
		if _, err := uc.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("the body's agent socket %s: %w", path, err)
		}
	}
	in := make(chan error, 1)
	var ended atomic.Bool // stdin ended: the daemon closing after it is the end of a session, not a failure
	go func() {
		r := &readErr{r: stdin}
		_, err := io.Copy(uc, r)
		switch {
		case err == nil:
			ended.Store(true) // stdin ended; a daemon that went away is another matter
		case r.err == nil:
			err = nil // the socket took no more: the daemon closed, which the copy out tells
		}
		uc.CloseWrite()
		in <- err
	}()
	out := make(chan error, 1)
	sw := &stdoutWriter{w: stdout}
	go func() {
		_, err := io.Copy(sw, uc)
		out <- err
	}()
	select {
	case err := <-in:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("reading stdin: %w", err)
		}
		if !ended.Load() {
			return bodyClosed(path, <-out, sw)
		}
		// The daemon answers what it has and closes when it reads the end.
		select {
		case <-out:
		case <-time.After(stdioDrain):
		case <-ctx.Done():
		}
		return nil
	case err := <-out:
		if ended.Load() {
			return nil // the daemon read the end of stdin and closed, as it does
		}
		return bodyClosed(path, err, sw)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bodyClosed is why the bridge ends when the daemon closed first, err
// being what copying its output met.
func bodyClosed(path string, err error, sw *stdoutWriter) error {
	switch {
	case sw.err != nil:
		return nil // the client went away (its end of stdout closed): done
	case err != nil:
		return fmt.Errorf("the body's agent socket %s: %w", path, err)
	}
	return errors.New("the body closed the connection: its daemon stopped or restarted, it refused this caller (its answer is the last line on stdout), " +
		"or it ended the session, which answered no ping or fell silent while it ran an action (`tobe-body ledger events --type action.session_ended` says which)")
}

// readErr is a reader that keeps its own error, so that a copy's failure
// is told from the writer's.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// eofReader is a stdin that has ended.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// stdoutWriter remembers that writing stdout failed: the client is gone,
// which ends the bridge as well as stdin's end does.
type stdoutWriter struct {
	w   io.Writer
	err error
}

func (s *stdoutWriter) Write(b []byte) (int, error) {
	n, err := s.w.Write(b)
	if err != nil {
		s.err = err
	}
	return n, err
}
