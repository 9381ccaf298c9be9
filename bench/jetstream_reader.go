// The reference reader of bench_spark_read.py: reads a stream with nats.go
// and prints the message count and the seconds it took, as JSON.
//
//	go run jetstream_reader.go -url nats://127.0.0.1:4222 -stream bench -mode pull
//
// pull:    an ephemeral pull consumer without acks, Fetch(batch) until the last sequence
// ordered: nats.go's ordered push consumer (flow control, heartbeats), as the data source reads
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	url := flag.String("url", nats.DefaultURL, "server URL")
	stream := flag.String("stream", "bench", "stream to read")
	mode := flag.String("mode", "pull", "pull or ordered")
	batch := flag.Int("batch", 5000, "pull batch size")
	creds := flag.String("creds", "", "creds file (servers in operator mode)")
	flag.Parse()
	var opts []nats.Option
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}

	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		fail(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		fail(err)
	}
	info, err := js.StreamInfo(*stream)
	if err != nil {
		fail(err)
	}
	last := info.State.LastSeq
	start := time.Now()
	count := 0
	var bytes int
	// took counts a message and tells whether it was the stream's last
	took := func(m *nats.Msg) bool {
		count++
		bytes += len(m.Data)
		meta, err := m.Metadata()
		if err != nil {
			fail(err)
		}
		return meta.Sequence.Stream >= last
	}
	switch *mode {
	case "pull":
		sub, err := js.PullSubscribe("", "", nats.BindStream(*stream), nats.AckNone(), nats.DeliverAll())
		if err != nil {
			fail(err)
		}
		for done := false; !done; {
			msgs, err := sub.Fetch(*batch, nats.MaxWait(5*time.Second))
			if err != nil {
				fail(err)
			}
			for _, m := range msgs {
				if took(m) {
					done = true
				}
			}
		}
		sub.Unsubscribe()
	case "ordered":
		sub, err := js.SubscribeSync("", nats.BindStream(*stream), nats.OrderedConsumer(), nats.DeliverAll())
		if err != nil {
			fail(err)
		}
		for {
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				fail(err)
			}
			if took(m) {
				break
			}
		}
		sub.Unsubscribe()
	default:
		fail(fmt.Errorf("unknown mode %q", *mode))
	}
	elapsed := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]interface{}{"messages": count, "bytes": bytes, "seconds": elapsed})
	fmt.Println(string(out))
}
