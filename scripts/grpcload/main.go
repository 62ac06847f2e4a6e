// Command grpcload is a lean load generator for apache.rocketmq.v2.MessagingService: raw
// grpc-go on the generated v2 stubs, no RocketMQ client logic, so that what a run measures is
// the server (Sidewinder's gRPC front), not the client.
//
//	grpcload -addr 127.0.0.1:8081 -mode send -topic T -conns 4 -window 64 -seconds 5
//	grpcload -addr 127.0.0.1:8081 -mode receive -topic T -group G -conns 4 -window 2 -budget 100000
//
// send: SendMessage, unary, one message of -body bytes per call. The request is marshalled once
// per in-flight slot; a call patches only the message id's counter digits into it (a codec that
// passes the bytes through). Each connection keeps -window calls in flight. The route is asked
// once (QueryRoute) and the calls go round robin over its queues, as the stock clients pick
// them; a v2 send names no queue, so a queue only decides the endpoint, and every queue of a
// front's route names the front.
//
// receive: -conns × -window consumers of one group, each a ReceiveMessage stream (batch
// -batch, long polling -poll, invisible -invisible), then one AckMessage per message it got,
// all at once, as the Java, Go and Python 5.x clients ack (one entry per request), then
// receiving again once every ack is answered. -budget bounds the messages handed out: a
// receive asks for no more than what is left of it.
//
// Every call carries the metadata the stock Go client sends (x-mq-client-id, x-mq-language GO,
// x-mq-protocol v2, x-mq-client-version, x-mq-namespace, x-mq-request-id, x-mq-date-time; no
// authorization). Plaintext only.
//
// Output: one JSON line (see Result): messages, seconds, latencies of the sends or of the acks,
// refusals by code (v2 status codes as their number, gRPC-level failures as "grpc-N"), and this
// process's own CPU seconds (getrusage) over the load. With -handshake it first prints
// {"event":"ready"} and waits for a line on stdin before the load starts, and prints
// {"event":"done"} the moment the load ends, so a caller can meter the server over exactly
// that window.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	sendMethod     = "/apache.rocketmq.v2.MessagingService/SendMessage"
	clientVersion  = "5.1.4" // the Go client whose stubs these are
	idCounterHex   = 12      // the message id's last 12 hex digits: the send counter
	dateTimeLayout = "20060102T150405Z"
)

type options struct {
	addr, mode, topic, group, tag string
	conns, window, body, batch    int
	budget                        int64
	seconds                       float64
	poll, invisible, timeout      time.Duration
	latencies, handshake          bool
}

// Result is the JSON line a run prints.
type Result struct {
	Mode         string            `json:"mode"`
	Messages     int64             `json:"messages"` // sends accepted, or messages acked
	Received     int64             `json:"received"` // messages receives handed out
	Requests     int64             `json:"requests"` // calls made (sends; receives and acks)
	Answered     int64             `json:"answered"` // calls that got a response, any status
	Receives     int64             `json:"receives"`
	Empty        int64             `json:"empty_receives"` // MESSAGE_NOT_FOUND after a poll
	Seconds      float64           `json:"seconds"`
	P50Ms        *float64          `json:"p50_ms"`
	P99Ms        *float64          `json:"p99_ms"`
	P999Ms       *float64          `json:"p999_ms"`
	ReceiveP50Ms *float64          `json:"receive_p50_ms,omitempty"`
	Errors       map[string]int64  `json:"errors"`
	ErrorNames   map[string]string `json:"error_names"`
	CPUSeconds   float64           `json:"cpu_s"`
	CPUCores     float64           `json:"cpu_cores"`
	Queues       int               `json:"route_queues"`
	Connections  int               `json:"connections"`
	Window       int               `json:"window"`
	LatenciesUs  []int64           `json:"latencies_us,omitempty"`
}

func main() {
	o := parseFlags()
	res, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcload:", err)
		os.Exit(2)
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8081", "the gRPC front, host:port (plaintext)")
	flag.StringVar(&o.mode, "mode", "send", "send or receive")
	flag.StringVar(&o.topic, "topic", "", "the topic")
	flag.StringVar(&o.group, "group", "grpcload", "the consumer group (receive)")
	flag.StringVar(&o.tag, "tag", "TagA", "the messages' tag (send)")
	flag.IntVar(&o.conns, "conns", 4, "HTTP/2 connections")
	flag.IntVar(&o.window, "window", 64, "calls in flight per connection (receive: consumers)")
	flag.IntVar(&o.body, "body", 1024, "body bytes (send)")
	flag.IntVar(&o.batch, "batch", 32, "messages a receive asks for")
	flag.Int64Var(&o.budget, "budget", 0, "receive: stop after this many messages (0: no bound)")
	flag.Float64Var(&o.seconds, "seconds", 5, "how long calls are started")
	flag.DurationVar(&o.poll, "poll", 5*time.Second, "receive: long polling timeout")
	flag.DurationVar(&o.invisible, "invisible", 60*time.Second, "receive: invisible duration")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "a unary call's deadline")
	flag.BoolVar(&o.latencies, "latencies", false, "also print every latency (µs)")
	flag.BoolVar(&o.handshake, "handshake", false, "ready/go on stdout/stdin, then done")
	flag.Parse()
	if o.topic == "" || (o.mode != "send" && o.mode != "receive") || o.conns < 1 || o.window < 1 {
		fmt.Fprintln(os.Stderr, "grpcload: -topic, -mode send|receive, -conns and -window >= 1")
		os.Exit(2)
	}
	if o.conns > 255 {
		o.conns = 255
	}
	return o
}

// -- per-call metadata ---------------------------------------------------------------------

// caller holds one client's fixed metadata; each call adds a request id and the date-time.
type caller struct {
	base   metadata.MD
	prefix string
	next   atomic.Uint64
}

var dateTime atomic.Value // string, refreshed every second

func newCaller(index int) *caller {
	host, _ := os.Hostname()
	clientID := fmt.Sprintf("%s@%d@%d@%s", host, os.Getpid(), index, randomHex(5))
	md := metadata.Pairs(
		"x-mq-client-id", clientID,
		"x-mq-language", "GO",
		"x-mq-protocol", "v2",
		"x-mq-client-version", clientVersion,
		"x-mq-namespace", "",
	)
	return &caller{base: md, prefix: randomHex(8) + "-"}
}

func (c *caller) ctx(parent context.Context) context.Context {
	md := make(metadata.MD, len(c.base)+2)
	for k, v := range c.base {
		md[k] = v
	}
	md["x-mq-request-id"] = []string{c.prefix + strconv.FormatUint(c.next.Add(1), 16)}
	md["x-mq-date-time"] = []string{dateTime.Load().(string)}
	return metadata.NewOutgoingContext(parent, md)
}

func keepDateTime(stop <-chan struct{}) {
	dateTime.Store(time.Now().UTC().Format(dateTimeLayout))
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				dateTime.Store(now.UTC().Format(dateTimeLayout))
			}
		}
	}()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

// -- the pass-through codec ----------------------------------------------------------------

// frame is a request already marshalled; rawCodec sends it as it is and decodes replies as
// protobuf (the content-subtype stays "proto").
type frame struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.CodecV2 = rawCodec{}

// -- counters ------------------------------------------------------------------------------

type tally struct {
	mu       sync.Mutex
	errors   map[string]int64
	names    map[string]string
	messages atomic.Int64
	received atomic.Int64
	requests atomic.Int64
	answered atomic.Int64
	receives atomic.Int64
	empty    atomic.Int64
}

func newTally() *tally {
	return &tally{errors: map[string]int64{}, names: map[string]string{}}
}

// refused counts a v2 status other than OK.
func (t *tally) refused(code v2.Code) {
	key := strconv.Itoa(int(code))
	t.mu.Lock()
	t.errors[key]++
	t.names[key] = code.String()
	t.mu.Unlock()
}

// failed counts a call that got no response: a gRPC-level status.
func (t *tally) failed(err error) {
	code := status.Code(err)
	key := "grpc-" + strconv.Itoa(int(code))
	t.mu.Lock()
	t.errors[key]++
	t.names[key] = code.String()
	t.mu.Unlock()
}

// -- the run -------------------------------------------------------------------------------

func run(o options) (*Result, error) {
	stop := make(chan struct{})
	defer close(stop)
	keepDateTime(stop)
	conns := make([]*grpc.ClientConn, o.conns)
	for i := range conns {
		// One ClientConn each: its own HTTP/2 connection.
		conn, err := grpc.NewClient(o.addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<20),
			grpc.WithInitialConnWindowSize(1<<22),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		conn.Connect()
		conns[i] = conn
	}
	callers := make([]*caller, o.conns)
	for i := range callers {
		callers[i] = newCaller(i)
	}
	t := newTally()
	queues := queryRoute(conns[0], callers[0], o, t)
	res := &Result{Mode: o.mode, Queues: len(queues), Connections: o.conns, Window: o.window}

	var load func(deadline time.Time) ([]int64, []int64)
	if o.mode == "send" {
		load = sender(conns, callers, o, t)
	} else {
		load = receiver(conns, callers, queues, o, t)
	}
	if o.handshake {
		fmt.Println(`{"event":"ready"}`)
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	cpu0 := cpuSeconds()
	started := time.Now()
	lat, recvLat := load(started.Add(time.Duration(o.seconds * float64(time.Second))))
	res.Seconds = time.Since(started).Seconds()
	res.CPUSeconds = cpuSeconds() - cpu0
	if o.handshake {
		fmt.Println(`{"event":"done"}`)
	}
	if res.Seconds > 0 {
		res.CPUCores = res.CPUSeconds / res.Seconds
	}
	res.Messages, res.Received = t.messages.Load(), t.received.Load()
	res.Requests, res.Answered = t.requests.Load(), t.answered.Load()
	res.Receives, res.Empty = t.receives.Load(), t.empty.Load()
	res.Errors, res.ErrorNames = t.errors, t.names
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.P50Ms, res.P99Ms, res.P999Ms = pct(lat, 50), pct(lat, 99), pct(lat, 99.9)
	if len(recvLat) > 0 {
		sort.Slice(recvLat, func(i, j int) bool { return recvLat[i] < recvLat[j] })
		res.ReceiveP50Ms = pct(recvLat, 50)
	}
	if o.latencies {
		res.LatenciesUs = make([]int64, len(lat))
		for i, ns := range lat {
			res.LatenciesUs[i] = ns / 1000
		}
	}
	return res, nil
}

// queryRoute asks the topic's route once; a refusal is counted and the run goes on (its calls
// are then refused too, and counted).
func queryRoute(conn *grpc.ClientConn, c *caller, o options, t *tally) []*v2.MessageQueue {
	host, port := splitAddr(o.addr)
	req := &v2.QueryRouteRequest{
		Topic: &v2.Resource{Name: o.topic},
		Endpoints: &v2.Endpoints{
			Scheme:    v2.AddressScheme_IPv4,
			Addresses: []*v2.Address{{Host: host, Port: port}},
		},
	}
	ctx, cancel := context.WithTimeout(c.ctx(context.Background()), o.timeout)
	defer cancel()
	resp, err := v2.NewMessagingServiceClient(conn).QueryRoute(ctx, req)
	if err != nil {
		t.failed(err)
		return nil
	}
	if code := resp.GetStatus().GetCode(); code != v2.Code_OK {
		t.refused(code)
		return nil
	}
	return resp.GetMessageQueues()
}

func splitAddr(addr string) (string, int32) {
	i := strings.LastIndexByte(addr, ':')
	port, _ := strconv.Atoi(addr[i+1:])
	return addr[:i], int32(port)
}

// sender: conns × window goroutines, each a closed loop of SendMessage calls on its own
// copy of the marshalled request.
func sender(conns []*grpc.ClientConn, callers []*caller, o options,
	t *tally) func(time.Time) ([]int64, []int64) {
	template, idAt := sendTemplate(o)
	return func(deadline time.Time) ([]int64, []int64) {
		var wg sync.WaitGroup
		all := make([][]int64, len(conns)*o.window)
		for c := range conns {
			for w := 0; w < o.window; w++ {
				slot := c*o.window + w
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := append([]byte(nil), template...)
					// The id: "01", 18 digits fixed per run, the connection, then the counter.
					copy(buf[idAt+20:], fmt.Sprintf("%02X", c))
					req := &frame{buf}
					lat := make([]int64, 0, 4096)
					var counter uint64 = uint64(w) << 40
					for time.Now().Before(deadline) {
						counter++
						putHex(buf[idAt+22:idAt+22+idCounterHex], counter)
						resp := new(v2.SendMessageResponse)
						ctx, cancel := context.WithTimeout(callers[c].ctx(context.Background()), o.timeout)
						t.requests.Add(1)
						sent := time.Now()
						err := conns[c].Invoke(ctx, sendMethod, req, resp, grpc.ForceCodecV2(rawCodec{}))
						elapsed := time.Since(sent)
						cancel()
						if err != nil {
							t.failed(err)
							continue
						}
						t.answered.Add(1)
						lat = append(lat, elapsed.Nanoseconds())
						code := resp.GetStatus().GetCode()
						if code == v2.Code_OK && len(resp.GetEntries()) == 1 {
							code = resp.GetEntries()[0].GetStatus().GetCode()
						}
						if code == v2.Code_OK {
							t.messages.Add(1)
						} else {
							t.refused(code)
						}
					}
					all[slot] = lat
				}()
			}
		}
		wg.Wait()
		return flatten(all), nil
	}
}

// sendTemplate is one SendMessageRequest marshalled, and where its message id starts.
func sendTemplate(o options) ([]byte, int) {
	placeholder := "01" + randomHex(9) + strings.Repeat("0", 14) // 34 hex digits, like the clients'
	body := make([]byte, o.body)
	for i := range body {
		body[i] = 'x'
	}
	host, _ := os.Hostname()
	tag := o.tag
	req := &v2.SendMessageRequest{Messages: []*v2.Message{{
		Topic: &v2.Resource{Name: o.topic},
		SystemProperties: &v2.SystemProperties{
			Tag:           &tag,
			MessageId:     placeholder,
			BornTimestamp: timestamppb.Now(),
			BornHost:      host,
			BodyEncoding:  v2.Encoding_IDENTITY,
			MessageType:   v2.MessageType_NORMAL,
		},
		Body: body,
	}}}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	at := strings.Index(string(b), placeholder)
	if at < 0 {
		panic("the message id is not in the marshalled request")
	}
	return b, at
}

const hexDigits = "0123456789ABCDEF"

func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = hexDigits[v&0xF]
		v >>= 4
	}
}

// receiver: conns × window consumers of one group: receive, ack every message (one call each,
// all at once), receive again.
func receiver(conns []*grpc.ClientConn, callers []*caller, queues []*v2.MessageQueue, o options,
	t *tally) func(time.Time) ([]int64, []int64) {
	readable := make([]*v2.MessageQueue, 0, len(queues))
	for _, q := range queues {
		if q.GetPermission() == v2.Permission_READ || q.GetPermission() == v2.Permission_READ_WRITE {
			readable = append(readable, q)
		}
	}
	if len(readable) == 0 { // no route: ask anyway, and count what the front answers
		readable = append(readable, &v2.MessageQueue{Topic: &v2.Resource{Name: o.topic}, Id: -1,
			Broker: &v2.Broker{Name: ""}})
	}
	var left atomic.Int64
	left.Store(o.budget)
	reserve := func() int64 {
		if o.budget <= 0 {
			return int64(o.batch)
		}
		for {
			l := left.Load()
			if l <= 0 {
				return 0
			}
			n := min(l, int64(o.batch))
			if left.CompareAndSwap(l, l-n) {
				return n
			}
		}
	}
	group := &v2.Resource{Name: o.group}
	topic := &v2.Resource{Name: o.topic}
	return func(deadline time.Time) ([]int64, []int64) {
		var wg sync.WaitGroup
		var turn atomic.Uint64
		acks := make([][]int64, len(conns)*o.window)
		recvs := make([][]int64, len(conns)*o.window)
		for c := range conns {
			client := v2.NewMessagingServiceClient(conns[c])
			for w := 0; w < o.window; w++ {
				slot := c*o.window + w
				wg.Add(1)
				go func() {
					defer wg.Done()
					var ackLat, recvLat []int64
					var mu sync.Mutex
					for time.Now().Before(deadline) {
						n := reserve()
						if n == 0 {
							break
						}
						q := readable[turn.Add(1)%uint64(len(readable))]
						req := &v2.ReceiveMessageRequest{
							Group: group,
							MessageQueue: &v2.MessageQueue{Topic: topic, Id: q.GetId(),
								Permission: q.GetPermission(), Broker: q.GetBroker()},
							FilterExpression:   &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
							BatchSize:          int32(n),
							InvisibleDuration:  durationpb.New(o.invisible),
							LongPollingTimeout: durationpb.New(o.poll),
						}
						sent := time.Now()
						got, ok := receiveOnce(client, callers[c], req, o, t)
						recvLat = append(recvLat, time.Since(sent).Nanoseconds())
						if o.budget > 0 && int64(len(got)) < n {
							left.Add(n - int64(len(got)))
						}
						if !ok {
							break // refused: this consumer stops, as the remoting pop's does
						}
						var acked sync.WaitGroup
						for _, m := range got {
							acked.Add(1)
							go func() {
								defer acked.Done()
								ns := ackOnce(client, callers[c], group, topic, m, o, t)
								if ns > 0 {
									mu.Lock()
									ackLat = append(ackLat, ns)
									mu.Unlock()
								}
							}()
						}
						acked.Wait()
					}
					acks[slot], recvs[slot] = ackLat, recvLat
				}()
			}
		}
		wg.Wait()
		return flatten(acks), flatten(recvs)
	}
}

// receiveOnce runs one ReceiveMessage stream: the messages it handed out, and false when it
// was refused (any status but OK or MESSAGE_NOT_FOUND, or a gRPC-level failure).
func receiveOnce(client v2.MessagingServiceClient, c *caller, req *v2.ReceiveMessageRequest,
	o options, t *tally) ([]*v2.Message, bool) {
	ctx, cancel := context.WithTimeout(c.ctx(context.Background()), o.poll+o.timeout)
	defer cancel()
	t.requests.Add(1)
	t.receives.Add(1)
	stream, err := client.ReceiveMessage(ctx, req)
	if err != nil {
		t.failed(err)
		return nil, false
	}
	var got []*v2.Message
	answered, ok := false, true
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.failed(err)
			return got, false
		}
		if !answered {
			answered = true
			t.answered.Add(1)
		}
		switch content := resp.GetContent().(type) {
		case *v2.ReceiveMessageResponse_Status:
			switch code := content.Status.GetCode(); code {
			case v2.Code_OK:
			case v2.Code_MESSAGE_NOT_FOUND:
				t.empty.Add(1)
			default:
				t.refused(code)
				ok = false
			}
		case *v2.ReceiveMessageResponse_Message:
			got = append(got, content.Message)
		}
	}
	t.received.Add(int64(len(got)))
	return got, ok
}

// ackOnce acks one message with its own AckMessage; its round trip in ns, 0 if it failed.
func ackOnce(client v2.MessagingServiceClient, c *caller, group, topic *v2.Resource,
	m *v2.Message, o options, t *tally) int64 {
	req := &v2.AckMessageRequest{Group: group, Topic: topic, Entries: []*v2.AckMessageEntry{{
		MessageId:     m.GetSystemProperties().GetMessageId(),
		ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(),
	}}}
	ctx, cancel := context.WithTimeout(c.ctx(context.Background()), o.timeout)
	defer cancel()
	t.requests.Add(1)
	sent := time.Now()
	resp, err := client.AckMessage(ctx, req)
	elapsed := time.Since(sent).Nanoseconds()
	if err != nil {
		t.failed(err)
		return 0
	}
	t.answered.Add(1)
	code := resp.GetStatus().GetCode()
	if code == v2.Code_OK && len(resp.GetEntries()) == 1 {
		code = resp.GetEntries()[0].GetStatus().GetCode()
	}
	if code != v2.Code_OK {
		t.refused(code)
		return elapsed
	}
	t.messages.Add(1)
	return elapsed
}

func flatten(parts [][]int64) []int64 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]int64, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// pct is the p-th percentile (nearest rank) of sorted nanoseconds, in ms.
func pct(sorted []int64, p float64) *float64 {
	if len(sorted) == 0 {
		return nil
	}
	i := min(len(sorted)-1, int(p/100*float64(len(sorted))))
	ms := float64(sorted[i]) / 1e6
	return &ms
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
