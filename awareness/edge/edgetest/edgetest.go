// Package edgetest makes peers of other uids for tests of a socket of
// package edge, without running them as other users: a peer binds its
// end of the socket to an abstract address that carries its uid, and
// Cred, the socket's credentials seam, reads it back. The hostile tests
// with real uids (package admintest) show the same through SO_PEERCRED.
package edgetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

var seq atomic.Int64

const prefix = "@tobe-edge-test-"

// Cred is the uid of a peer that Dial connected, as its gid too; a peer
// that did not come through Dial is this process's uid and gid.
func Cred(c net.Conn) (uid, gid int) {
	name := ""
	if a := c.RemoteAddr(); a != nil {
		name = a.String()
	}
	i := strings.LastIndex(name, "-uid-")
	if !strings.HasPrefix(name, prefix) || i < 0 {
		return os.Getuid(), os.Getgid()
	}
	uid, err := strconv.Atoi(name[i+len("-uid-"):])
	if err != nil {
		return -1, -1
	}
	return uid, uid
}

// Dial connects to the socket at path as a peer of uid, as Cred reads it.
func Dial(path string, uid int) (*net.UnixConn, error) {
	local := &net.UnixAddr{Net: "unix", Name: fmt.Sprintf("%s%d-%d-uid-%d", prefix, os.Getpid(), seq.Add(1), uid)}
	return net.DialUnix("unix", local, &net.UnixAddr{Net: "unix", Name: path})
}

// ErrorLine says why line is not one JSON-RPC 2.0 error response with
// code -32700 or -32600 (what a socket answers a bad line with) whose id
// is a string, an integer within 2^53-1, or null; nil if it is one.
func ErrorLine(line []byte) error {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || dec.More() {
		return fmt.Errorf("%q is not one JSON-RPC error response: %v", line, err)
	}
	if r.JSONRPC != "2.0" || r.Error == nil || (r.Error.Code != -32700 && r.Error.Code != -32600) || !ValidID(r.ID) {
		return fmt.Errorf("%q is not a -32700 or -32600 error response with a valid id", line)
	}
	return nil
}

// ValidID tells whether id is null, a string or an integer within
// 2^53-1: an id a socket may answer with.
func ValidID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' || string(id) == "null" {
		var s *string
		return json.Unmarshal(id, &s) == nil
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && n <= 1<<53-1 && n >= -(1<<53-1)
}
