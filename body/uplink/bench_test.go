package uplink

import (
	"context"
	"fmt"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/tobe-body/tobe-body/body/uplink/mosquittotest"
)

// BenchmarkRelay is the relay's throughput against a real Mosquitto on
// this machine, side by side in one run with its peer: a plain paho loop
// publishing the same payloads, at QoS 1, with the same window of
// publishes in flight, from memory, removing nothing. Each runs b.N
// events; the relay's time runs from its start until every row is
// removed from the ledger (with the default ack commit).
//
//	go test -run XXX -bench Relay -benchtime 100000x ./body/uplink/
func BenchmarkRelay(b *testing.B) {
	m := mosquittotest.Start(b, map[string]string{"body": "body-pass"})
	const window = 64
	var records [][]byte
	var topics []string
	b.Run("relay", func(b *testing.B) {
		s := openStore(b)
		appendN(b, s, 0, b.N, motion)
		r, err := New(s, Options{Broker: m.URL(), Username: "body", Password: "body-pass",
			AgentID: agentID.String(), BodyID: bodyID.String(), Window: window})
		if err != nil {
			b.Fatal(err)
		}
		{
			// The peer's payloads: the same records, on the same topics.
			records, topics = records[:0], topics[:0]
			for after := uint64(0); ; {
				items, err := s.OutboxNext(after, 1000)
				if err != nil {
					b.Fatal(err)
				}
				if len(items) == 0 {
					break
				}
				for _, it := range items {
					records = append(records, it.Record)
					topics = append(topics, r.opts.EventTopic(it.Event.Type))
					after = it.Seq
				}
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.ResetTimer()
		start := time.Now()
		go func() { r.Run(ctx); close(done) }()
		for r.Status().Acked < uint64(b.N) {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		cancel()
		<-done
		if n := outboxRows(b, s); n != 0 {
			b.Fatalf("%d rows left", n)
		}
		b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
	})
	b.Run("paho", func(b *testing.B) {
		// The relay's last run's records, again and again where the peer
		// runs more of them than it did (b.N grows separately for each).
		if len(records) == 0 {
			b.Skip("the relay ran no events")
		}
		c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(m.URL()).SetClientID("plain").
			SetUsername("body").SetPassword("body-pass").SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(false))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		defer c.Disconnect(100)
		inflight := make([]mqtt.Token, 0, window)
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if len(inflight) == window {
				if err := waitToken(inflight[0]); err != nil {
					b.Fatal(err)
				}
				inflight = inflight[1:]
			}
			inflight = append(inflight, c.Publish(topics[i%len(topics)], 1, false, records[i%len(records)]))
		}
		for _, t := range inflight {
			if err := waitToken(t); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
	})
}

func waitToken(t mqtt.Token) error {
	if !t.WaitTimeout(10 * time.Second) {
		return fmt.Errorf("no PUBACK within 10 s")
	}
	return t.Error()
}
