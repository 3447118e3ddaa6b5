package awareness

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/act"
)

// closeCounter is a Streaming output that counts its Closes.
type closeCounter struct{ closed *int }

func (c closeCounter) Content() (io.Reader, int64) { return strings.NewReader("x"), 1 }
func (c closeCounter) Close() error                { *c.closed++; return nil }

// A handler that returns a streaming output with an error has it closed
// for it: nobody else would.
func TestAStreamReturnedWithAnErrorIsClosed(t *testing.T) {
	var closed int
	op := Op[None, closeCounter]{Name: "s", Kind: Observe, Least: Anyone, Description: "s"}
	tb, err := NewTable(Bind(op, func(context.Context, act.Principal, None) (closeCounter, error) {
		return closeCounter{closed: &closed}, refuse(ReasonFailed, "no")
	}))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := tb.Lookup("s")
	if !e.Streams {
		t.Error("Streams not set for a Streaming output")
	}
	if out, err := e.Call(context.Background(), maxAdmin, nil); out != nil || ReasonOf(err) != ReasonFailed || closed != 1 {
		t.Errorf("got %v, %v and %d closes; want nil, failed and 1", out, err, closed)
	}
}
