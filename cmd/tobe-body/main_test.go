package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin/admintest"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
)

func TestMain(m *testing.M) {
	admintest.Main() // a hostile peer of TestAdminSocketUnderHostilePeers, run as another uid, stops here
	// TestSignal runs this test binary as the real command.
	if os.Getenv("TOBE_BODY_TEST_MAIN") == "1" {
		main()
		return
	}
	if path := os.Getenv("TOBE_BODY_TEST_PEER"); path != "" {
		os.Exit(peerMain(path, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// daemon is a `tobe-body run` started by a test.
type testDaemon struct {
	data   string
	cancel context.CancelFunc
	done   chan error
	lines  *bufio.Scanner
	stderr *bytes.Buffer
	pr     *io.PipeReader
}

// startDaemon runs the sim body in dir and returns once it printed its
// first report, which it does after the admin socket listens.
func startDaemon(t *testing.T, extraConfig string) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}`+extraConfig+`}`), 0o600)
	return startDaemonIn(t, filepath.Join(dir, "data"), cfg)
}

// startDaemonIn runs the sim body with the data directory and config given.
func startDaemonIn(t *testing.T, data, cfg string) *testDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &testDaemon{data: data, cancel: cancel, done: make(chan error, 1),
		lines: bufio.NewScanner(pr), stderr: &bytes.Buffer{}, pr: pr}
	go func() {
		d.done <- run(ctx, []string{"run", "--board", "sim", "--data", d.data, "--config", cfg}, nil, pw, d.stderr)
		pw.Close()
	}()
	if !d.lines.Scan() {
		cancel()
		t.Fatalf("the daemon printed nothing: %v\n%s", <-d.done, d.stderr)
	}
	return d
}

// stop cancels the daemon as Ctrl-C does and returns its result and how
// long it took.
func (d *testDaemon) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	d.cancel()
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, d.pr); close(drained) }() // what it still prints
	err := <-d.done
	<-drained
	return time.Since(start), err
}

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, nil, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestRunStatusAndCleanStop(t *testing.T) {
	d := startDaemon(t, "")
	out, err := runCmd(t, "status", "--data", d.data)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{"board     sim:", "channels  19, 19 healthy", "env.air", "light.act", "camera.front", "body.self", "body.notify", "audio.mic", "estop.main", "gpio.relay1", "input.keypad"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = runCmd(t, "status", "--json", "--socket", filepath.Join(d.data, cli.AdminSocket))
	if err != nil {
		t.Fatal(err)
	}
	var st awareness.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(st.Channels) != 19 || st.Board != "sim" || st.BodyID == "" {
		t.Errorf("status %+v", st)
	}
	if st.Self == nil || st.Events["body.self"].Queued == 0 || st.Events["gpio.button"].Shed != 0 {
		t.Errorf("status has no self-state or sense channel counts: %+v %+v", st.Self, st.Events)
	}
	for _, ch := range st.Channels {
		if ch.Driver != "Loaded" || ch.State != "enabled" || ch.Health != "ok" {
			t.Errorf("channel %s: %s %s %s, want Loaded enabled ok", ch.ID, ch.Driver, ch.State, ch.Health)
		}
	}
	// A second daemon on the same data directory is refused.
	if out, err := runCmd(t, "run", "--board", "sim", "--data", d.data); err == nil || !strings.Contains(err.Error(), "another tobe-body") {
		t.Errorf("second daemon: %v %s", err, out)
	}
	took, err := d.stop(t)
	if err != nil {
		t.Fatalf("run returned %v after cancel\n%s", err, d.stderr)
	}
	// A hang detector, not a benchmark: scripts/bench/footprint.sh
	// measures the stop time of the real process.
	if took > 10*time.Second {
		t.Errorf("stopping took %v", took)
	}
	t.Logf("stopped in %v", took)
	if _, err := os.Stat(filepath.Join(d.data, cli.AdminSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("admin socket left behind: %v", err)
	}
}

func TestRunPrintsWhatTheBodySees(t *testing.T) {
	d := startDaemon(t, "")
	seen := map[string]bool{}
	for d.lines.Scan() && len(seen) < 5 {
		f := strings.Fields(d.lines.Text())
		if len(f) > 2 {
			seen[f[2]] = true
		}
	}
	d.stop(t)
	// Streams the sense channels do not read yet are summarised; what
	// the channels write to the ledger is printed as events (the first is
	// the self-state's level at start).
	for _, want := range []string{"camera.front", "audio.mic", "estop", "outputs", "event"} {
		if !seen[want] {
			t.Errorf("run printed nothing about %s (saw %v)", want, seen)
		}
	}
}

func TestStatusWithoutDaemon(t *testing.T) {
	out, err := runCmd(t, "status", "--data", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no tobe-body is running") {
		t.Errorf("got %v %s", err, out)
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	const canary = "CANARY-9d2c"
	for _, tc := range []struct {
		name, doc string
		code      int
		want      string
	}{
		{"valid", `{"version": 1, "board": "pi5", "mqtt": {"password": "` + canary + `"}}`, 0, "valid"},
		{"unknown key", `{"version": 1, "mqtt": {"passwd": "` + canary + `"}}`, 1, `$.mqtt.passwd: unknown key "passwd"`},
		{"wrong type", `{"version": 1, "log": {"level": 3}}`, 1, `$.log.level: wrong type: got number, want string`},
		{"out of range", `{"version": 1, "mqtt": {"keepalive_s": 99999}}`, 1, `$.mqtt.keepalive_s: out of range: 99999 is more than the maximum 3600`},
		{"secret in a field not marked sensitive", `{"version": 1, "mqtt": {"client_id": "` + canary + ` x"}}`, 1, `$.mqtt.client_id: does not match the pattern`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			os.WriteFile(p, []byte(tc.doc), 0o600)
			var out, errOut bytes.Buffer
			err := run(t.Context(), []string{"config", "check", p}, nil, &out, &errOut)
			code := cli.ExitCode(err, &errOut)
			all := out.String() + errOut.String()
			if code != tc.code || !strings.Contains(all, tc.want) {
				t.Errorf("exit %d, output %q; want %d and %q", code, all, tc.code, tc.want)
			}
			if tc.code != 0 && !strings.Contains(all, p) {
				t.Errorf("%q does not name the file", all)
			}
			if strings.Contains(all, canary) {
				t.Errorf("output shows the secret: %q", all)
			}
		})
	}
}

func TestConfigShow(t *testing.T) {
	const canary = "CANARY-5e1b"
	p := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(p, []byte(`{"version": 1, "mqtt": {"password": "`+canary+`"}, "act": {"outputs": {"relay1": {"max_on_s": 2}}}}`), 0o600)
	out, err := runCmd(t, "config", "show", "--config", p, "--section", "act")
	if err != nil {
		t.Fatalf("config show: %v\n%s", err, out)
	}
	var a config.Act
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if a.Outputs["relay1"].MaxOn() != 2*time.Second || a.RateLimits.Default.Burst != 20 || len(a.Principals) != 3 {
		t.Errorf("act section %+v", a)
	}
	out, err = runCmd(t, "config", "show", "--config", p)
	if err != nil || strings.Contains(out, canary) || !strings.Contains(out, `"password": "[redacted]"`) || !strings.Contains(out, p) {
		t.Errorf("config show: %v\n%s", err, out)
	}
}

func TestConfigSchema(t *testing.T) {
	out, err := runCmd(t, "config", "schema")
	if err != nil || out != string(config.SchemaJSON()) {
		t.Errorf("config schema: %v, %d bytes", err, len(out))
	}
}

func TestBoardPi5IsSkippedHere(t *testing.T) {
	if _, err := os.Stat("/dev/gpiochip0"); err == nil {
		t.Skip("this machine has GPIO chips")
	}
	out, err := runCmd(t, "board", "--board", "pi5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Profile struct{ Name string }
		Devices []struct{ Kind, Name, Status, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Profile.Name != "pi5" || len(rep.Devices) < 15 {
		t.Fatalf("report %+v", rep)
	}
	// Everything is absent here but the watcher of every input device as
	// it is plugged, which is the same walk the daemon opens devices with.
	for _, d := range rep.Devices {
		if d.Kind == "input" && d.Name == "all" {
			if d.Status != "Loaded" {
				t.Errorf("input all: %s %q, want Loaded: the hotplug watcher", d.Status, d.Reason)
			}
			continue
		}
		if d.Status != "Skipped" || d.Reason == "" {
			t.Errorf("%s %s: %s %q, want Skipped with a reason", d.Kind, d.Name, d.Status, d.Reason)
		}
	}
	out, _ = runCmd(t, "board", "--board", "pi5")
	if !strings.Contains(out, "1 Loaded, 19 Skipped, 0 Failed") {
		t.Errorf("board summary:\n%s", out)
	}
}

func TestVersionAndUsage(t *testing.T) {
	out, err := runCmd(t, "version")
	if err != nil || !strings.Contains(out, "tobe-body dev") || !strings.Contains(out, "commit") || !strings.Contains(out, "tags") || !strings.Contains(out, "\naudio     ") {
		t.Errorf("version: %v %q", err, out)
	}
	for _, args := range [][]string{{}, {"fly"}, {"status", "extra"}, {"config"}, {"config", "check"}, {"run", "--nope"}} {
		var errOut bytes.Buffer
		err := run(t.Context(), args, nil, io.Discard, &errOut)
		if code := cli.ExitCode(err, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
	if out, err := runCmd(t, "board", "--board", "no-such"); err == nil || !strings.Contains(out+err.Error(), "known:") {
		t.Errorf("unknown board: %v %s", err, out)
	}
}

// startProcess runs this test binary as the real command with args, in
// a process of its own; it skips the test where the binary cannot run
// itself.
func startProcess(t *testing.T, args ...string) (cmd *exec.Cmd, stdout io.Reader, stderr *bytes.Buffer) {
	t.Helper()
	return startProcessEnv(t, nil, args...)
}

// startProcessEnv is startProcess with more environment variables.
func startProcessEnv(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, stdout io.Reader, stderr *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "TOBE_BODY_TEST_MAIN=1"), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.ENOEXEC) {
			// A test binary of another architecture run by qemu-user
			// cannot exec itself without binfmt_misc.
			t.Skipf("cannot re-exec the test binary here: %v", err)
		}
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

func TestSignalStopsTheProcessCleanly(t *testing.T) {
	dir := t.TempDir()
	// The monitor's line even to a pipe: its first is the sign the body is up.
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"print": "always"}}`), 0o600)
	cmd, stdout, stderr := startProcess(t, "run", "--board", "sim", "--data", filepath.Join(dir, "data"), "--config", cfg)
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() { // the first report: the body is up
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no output; stderr:\n%s", stderr.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, stdout)
	err := cmd.Wait()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("exit after SIGINT: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping") {
		t.Errorf("stderr does not say it stopped:\n%s", stderr.String())
	}
	t.Logf("SIGINT to exit 0 in %v", took)
}
