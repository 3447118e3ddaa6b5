package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
)

// startFails runs the daemon on data and returns its error, which it
// must give before it is up.
func startFails(t *testing.T, data string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"run", "--board", "sim", "--data", data}, nil, &out, &errOut)
	if err == nil {
		t.Fatalf("the daemon ran on %s: %s%s", data, out.String(), errOut.String())
	}
	return err
}

// The attacks on the data directory the daemon's files live in, each
// refused before the daemon writes anything there.
func TestTheDataDirectoryIsTheDaemonsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes files of another user")
	}
	t.Run("a symbolic link planted at the lock is not written through", func(t *testing.T) {
		top := t.TempDir()
		data := filepath.Join(top, "data")
		os.Mkdir(data, 0o750)
		victim := filepath.Join(top, "victim")
		os.WriteFile(victim, []byte("precious\n"), 0o644)
		if err := os.Symlink(victim, filepath.Join(data, "tobe-body.lock")); err != nil {
			t.Fatal(err)
		}
		err := startFails(t, data)
		if want := "lock " + data + "/tobe-body.lock: a symbolic link is there; not following it (remove it)"; err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Fatalf("the link's target was written: %q", b)
		}
	})
	t.Run("a lock of another user is not taken", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		os.Mkdir(data, 0o750)
		lock := filepath.Join(data, "tobe-body.lock")
		os.WriteFile(lock, nil, 0o666)
		os.Chown(lock, 12345, 12345)
		err := startFails(t, data)
		if want := "lock " + lock + ": owned by uid 12345, not by this daemon's user (uid 0); remove it"; err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
	})
	t.Run("a FIFO at the lock does not block", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		os.Mkdir(data, 0o750)
		if err := mkfifo(filepath.Join(data, "tobe-body.lock")); err != nil {
			t.Fatal(err)
		}
		if err := startFails(t, data); !strings.Contains(err.Error(), "tobe-body.lock: not a regular file") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a data directory another user owns", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		os.Mkdir(data, 0o750)
		os.Chown(data, 12345, 12345)
		err := startFails(t, data)
		if want := "data directory " + data + ": owned by uid 12345, not by this daemon's user (uid 0); chown it, or choose another with --data"; err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
		assertEmpty(t, data)
	})
	t.Run("a data directory others may write to", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		os.Mkdir(data, 0o750)
		os.Chmod(data, 0o777)
		err := startFails(t, data)
		if want := "data directory " + data + ": writable by its group or by others (mode 0777); chmod go-w " + data; err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
		assertEmpty(t, data)
	})
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("the daemon wrote into %s: %v", dir, es)
	}
}

// The files the daemon makes are its own and its group's: the identity
// is 0640 whatever the umask (it was 0644), and so is the lock.
func TestTheDaemonsFilesArePrivate(t *testing.T) {
	old := umask(0)
	defer umask(old)
	d := startDaemon(t, "")
	defer d.stop(t)
	for name, want := range map[string]os.FileMode{body.IdentityFile: 0o640, "tobe-body.lock": 0o640, "ledger.db": 0o640, "admin.sock": 0o660} {
		fi, err := os.Lstat(filepath.Join(d.data, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", name, got, want)
		}
	}
}
