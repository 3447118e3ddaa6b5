// Package body is the body's own state: its identity (agent_id and body_id,
// made on first start and kept under the data directory), the channel
// registry with the capability lifecycle, and the structured log.
//
// Later parts of the body live here too: SelfState, the clocks, the MQTT
// uplink (see the design's layout).
package body

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
)

// IdentityFile is the identity's file name in the data directory.
const IdentityFile = "identity.json"

// Identity names this body and the agent it belongs to. Both are UUIDs made
// once, on first start; they never change while the data directory lives.
type Identity struct {
	AgentID   string    `json:"agent_id"`
	BodyID    string    `json:"body_id"`
	CreatedAt time.Time `json:"created_at"`
}

// ErrIdentity is wrapped by LoadIdentity when the file exists but is not a
// valid identity. The body does not make a new one over it: events already
// sent under the old id would be orphaned.
var ErrIdentity = errors.New("body: identity file is damaged")

// LoadIdentity reads the identity from dataDir, making and saving a new one
// when there is none. created tells which happened. The file is written
// atomically: a crash leaves either no identity or a whole one.
func LoadIdentity(dataDir string, now time.Time) (id Identity, created bool, err error) {
	path := filepath.Join(dataDir, IdentityFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &id); err != nil {
			return id, false, fmt.Errorf("%w: %s: %v; move it aside to make a new identity", ErrIdentity, path, err)
		}
		for name, v := range map[string]string{"agent_id": id.AgentID, "body_id": id.BodyID} {
			if _, err := uuid.Parse(v); err != nil {
				return Identity{}, false, fmt.Errorf("%w: %s: %s is not a UUID; move it aside to make a new identity", ErrIdentity, path, name)
			}
		}
		return id, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return id, false, fmt.Errorf("body: %w", err)
	}
	agent, err := uuid.NewV7()
	if err != nil {
		return id, false, fmt.Errorf("body: agent id: %w", err)
	}
	bodyID, err := uuid.NewV7()
	if err != nil {
		return id, false, fmt.Errorf("body: body id: %w", err)
	}
	id = Identity{AgentID: agent.String(), BodyID: bodyID.String(), CreatedAt: now.UTC()}
	data, err = json.MarshalIndent(id, "", "  ")
	if err != nil {
		return id, false, err
	}
	// Readable by the daemon's group (its administrators), whatever the
	// umask: WriteFileAtomic sets the mode itself.
	if err := WriteFileAtomic(path, append(data, '\n'), 0o640); err != nil {
		return Identity{}, false, err
	}
	return id, true, nil
}

// WriteFileAtomic writes data to path so that a crash leaves the old file
// or the new one, never a mix: a temporary file in the same directory,
// synced, renamed over path, then the directory synced.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("body: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("body: write %s: %w", f.Name(), err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("body: sync %s: %w", f.Name(), err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("body: %w", err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("body: sync %s: %w", dir, err)
	}
	return nil
}
