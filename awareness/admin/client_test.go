package admin

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

// A refused action comes to Call as the refusal, with its code and
// reason, and the runner's record of the action both as the output and
// as the error's Record, typed.
func TestCallARefusedAction(t *testing.T) {
	op := awareness.Op[awareness.None, act.Result]{Name: "act", Kind: awareness.Interact, Least: awareness.AnyAdmin, Description: "refused"}
	rec := act.Result{ActionID: "a-1", Status: act.Refused, Reason: act.ReasonNoGrant, Detail: "no grant covers it"}
	tb, err := awareness.NewTable(awareness.Bind(op, func(context.Context, act.Principal, awareness.None) (act.Result, error) {
		return rec, &awareness.Error{Reason: rec.Reason, Detail: rec.Detail, Record: rec}
	}))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(tb, func(int, int) (act.Principal, error) {
		return act.Principal{Kind: act.LocalAdmin, Subject: "admin:test", Session: "admin", Trust: ledger.Max}, nil
	})
	t.Cleanup(s.run(ln))

	out, err := Call(t.Context(), &Client{Path: path, Timeout: 10 * time.Second}, op, awareness.None{})
	var oe *awareness.Error
	if !errors.As(err, &oe) || oe.Op != "act" || oe.Reason != act.ReasonNoGrant || oe.Detail != rec.Detail {
		t.Fatalf("got %v, want act: no_grant: %s", err, rec.Detail)
	}
	if got, ok := oe.Record.(act.Result); !ok || got.ActionID != "a-1" || got.Status != act.Refused {
		t.Errorf("the error's record %#v, want the action's", oe.Record)
	}
	if out.ActionID != "a-1" || out.Status != act.Refused || out.Reason != act.ReasonNoGrant {
		t.Errorf("out %+v, want the refused action's record", out)
	}

	// On the wire: the refusal's code, the error in data, the record in it.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"act"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"code":-32000`, `"data":{"op":"act","reason":"no_grant","detail":"no grant covers it","record":{"action_id":"a-1","status":"refused"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the answer %s lacks %s", line, want)
		}
	}
}
