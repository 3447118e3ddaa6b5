package agent

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall is one tools/call round trip of a trivial tool over a
// Unix socket pair, through this package's Transport and, side by side,
// through the SDK's own IOTransport.
func BenchmarkToolCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		make func(c net.Conn) mcp.Transport
	}{
		{"Transport", func(c net.Conn) mcp.Transport { return NewTransport(c, TransportOptions{}) }},
		{"sdk.IOTransport", func(c net.Conn) mcp.Transport { return &mcp.IOTransport{Reader: c, Writer: c} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srvEnd, cliEnd := unixPair(b)
			srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "nothing", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"success"}`}}}, nil
				})
			ss, err := srv.Connect(context.Background(), tc.make(srvEnd), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer ss.Close()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: cliEnd, Writer: cliEnd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			var each []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nothing"}); err != nil {
					b.Fatal(err)
				}
				each = append(each, time.Since(start))
			}
			slices.Sort(each)
			b.ReportMetric(float64(each[len(each)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(each[len(each)*99/100].Microseconds()), "p99-µs")
		})
	}
}

func unixPair(b *testing.B) (net.Conn, net.Conn) {
	b.Helper()
	ln, err := net.Listen("unix", b.TempDir()+"/s")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return <-got, c
}
