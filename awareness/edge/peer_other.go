//go:build !linux

package edge

import "net"

// PeerCred cannot read a peer's credentials off Linux: -1, -1, so no
// caller has a principal and every call is refused.
func PeerCred(net.Conn) (uid, gid int) { return -1, -1 }

// HungUp cannot tell off Linux: false, and a call waiting for a place
// runs when it gets one.
func HungUp(net.Conn) bool { return false }
