// Stock-client driver for the RocketMQ 5 gRPC client in Go,
// github.com/apache/rocketmq-clients/golang/v5 v5.1.4.
//
// Speaks the protocol of interop/drivers/PROTOCOL.md (JSON event lines on stdout, the same exit
// statuses) over a RocketMQ 5 gRPC endpoint; its actions, options and events are the python5
// driver's (PROTOCOL.md, sections "python5" and "go5"). Built by `python -m interop.install go5`.
//
// The client's public API is used throughout. It talks plaintext (its TLS default is turned
// off: EnableSsl = false). What the client does not expose (a received message's queue, offset,
// store time and host and message type; the answer to QueryRoute; an ack's status, which the
// client drops) is read beside it from the wire, through gRPC interceptors added with the
// client's own NewRpcClient hook, never changed.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

const clientName = "go5"

// ---------------------------------------------------------------------------------------------
// stdout discipline: keep our own copy of fd 1 for the JSON events and point fd 1 at a log file
// under $HOME, so nothing the client or grpc prints can reach the caller's stdout.

var (
	out      *os.File
	outLock  sync.Mutex
	finished bool
)

func redirectStdout() {
	fd, err := syscall.Dup(1)
	if err != nil {
		out = os.Stdout
		return
	}
	out = os.NewFile(uintptr(fd), "events")
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	logDir := filepath.Join(home, "logs")
	_ = os.MkdirAll(logDir, 0o755)
	name := filepath.Join(logDir, fmt.Sprintf("go5-driver-stdout-%d.log", os.Getpid()))
	logFile, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		logFile, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return
		}
	}
	_ = syscall.Dup3(int(logFile.Fd()), 1, 0)
	os.Stdout = logFile
}

type event map[string]any

// emit writes one JSON event line to the original stdout; false once the run is over.
func emit(e event, final bool) bool {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		fmt.Fprintf(os.Stderr, "go5 driver: cannot encode %v: %v\n", e, err)
		return false
	}
	outLock.Lock()
	defer outLock.Unlock()
	if finished {
		return false
	}
	if final {
		finished = true
	}
	_, _ = out.Write(buf.Bytes())
	return true
}

// fail prints an error event as the last line and exits at once (no clean-up).
func fail(kind string, message string, status int, extra event) {
	e := event{"event": "error", "error": kind, "message": message}
	for k, v := range extra {
		e[k] = v
	}
	if emit(e, true) {
		os.Exit(status)
	}
	// Another goroutine is finishing the run: let it.
	select {}
}

func failErr(kind string, err error, status int, extra event) {
	e := describeError(err)
	for k, v := range extra {
		e[k] = v
	}
	msg, _ := e["message"].(string)
	delete(e, "message")
	fail(kind, msg, status, e)
}

type stopper interface{ GracefulStop() error }

// finish shuts the clients down (bounded: a dead server must not hold the run), prints `done`
// and exits 0.
func finish(summary event, grace time.Duration, clients ...stopper) {
	closed := make(chan struct{})
	go func() {
		for _, c := range clients {
			if err := c.GracefulStop(); err != nil {
				fmt.Fprintf(os.Stderr, "go5 driver: shutdown: %v\n", err)
			}
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "go5 driver: shutdown still running after %v\n", grace)
	}
	e := event{"event": "done"}
	for k, v := range summary {
		e[k] = v
	}
	if emit(e, true) {
		os.Exit(0)
	}
	select {}
}

func startWatchdog(timeout float64) {
	time.AfterFunc(time.Duration(timeout*float64(time.Second)), func() {
		fail("timeout", fmt.Sprintf("no result within %ss", strconv.FormatFloat(timeout, 'g', -1, 64)), 3, nil)
	})
}

// ---------------------------------------------------------------------------------------------
// command line

var actions = []string{"produce", "transact", "simple-consume", "push-consume", "route"}

var answers = []string{"commit", "rollback", "unknown-commit", "unknown-rollback", "unknown"}

type options struct {
	command           string
	endpoints         string
	topic             string
	group             string
	timeout           float64
	requestTimeout    int
	namespace         string
	accessKey         string
	secretKey         string
	count             int
	mode              string
	tag               string
	hasTag            bool
	keysPrefix        string
	bodyPrefix        string
	bodySize          int
	props             map[string]string
	propOrder         []string
	start             int
	messageGroup      string
	deliverAfterMs    int64
	keepGoing         bool
	answer            string
	expect            int
	tags              string
	sql               string
	linger            float64
	batchSize         int
	invisibleDuration int
	awaitDuration     int
	noAck             bool
	reconsumeLater    int
	threads           int
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

var boolFlags = map[string]bool{"keep-going": true, "no-ack": true}

func parseBool(name, text string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, usagef("--%s: expected true or false, got %q", name, text)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func parseArgs(argv []string) (*options, error) {
	o := &options{
		timeout: 60, requestTimeout: 3, count: -1, mode: "sync", keysPrefix: "k-",
		bodyPrefix: "body-", bodySize: -1, props: map[string]string{}, expect: -1, tags: "*",
		batchSize: 16, invisibleDuration: 15, awaitDuration: 5, threads: 20,
	}
	if len(argv) == 0 || !contains(actions, argv[0]) {
		return nil, usagef("the first argument is the action, one of %s", strings.Join(actions, ", "))
	}
	o.command = argv[0]
	seen := map[string]bool{}
	for i := 1; i < len(argv); i++ {
		arg := argv[i]
		if !strings.HasPrefix(arg, "--") || len(arg) < 3 {
			return nil, usagef("unexpected argument %q", arg)
		}
		name, value, hasValue := strings.Cut(arg[2:], "=")
		if boolFlags[name] {
			flag := true
			if hasValue {
				b, err := parseBool(name, value)
				if err != nil {
					return nil, err
				}
				flag = b
			} else if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				b, err := parseBool(name, argv[i+1])
				if err != nil {
					return nil, err
				}
				flag = b
				i++
			}
			if name == "keep-going" {
				o.keepGoing = flag
			} else {
				o.noAck = flag
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(argv) {
				return nil, usagef("--%s needs a value", name)
			}
			i++
			value = argv[i]
		}
		seen[name] = true
		var err error
		switch name {
		case "endpoints":
			o.endpoints = value
		case "topic":
			o.topic = value
		case "group":
			o.group = value
		case "timeout":
			o.timeout, err = strconv.ParseFloat(value, 64)
		case "request-timeout":
			o.requestTimeout, err = strconv.Atoi(value)
		case "namespace":
			o.namespace = value
		case "access-key":
			o.accessKey = value
		case "secret-key":
			o.secretKey = value
		case "count":
			o.count, err = strconv.Atoi(value)
		case "mode":
			o.mode = value
		case "tag":
			o.tag, o.hasTag = value, true
		case "keys-prefix":
			o.keysPrefix = value
		case "body-prefix":
			o.bodyPrefix = value
		case "body-size":
			o.bodySize, err = strconv.Atoi(value)
		case "prop":
			k, v, ok := strings.Cut(value, "=")
			if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
				return nil, usagef("--prop needs K=V with neither blank, got %q", value)
			}
			if _, dup := o.props[k]; !dup {
				o.propOrder = append(o.propOrder, k)
			}
			o.props[k] = v
		case "start":
			o.start, err = strconv.Atoi(value)
		case "message-group":
			o.messageGroup = value
		case "deliver-after-ms":
			o.deliverAfterMs, err = strconv.ParseInt(value, 10, 64)
		case "answer":
			o.answer = value
		case "expect":
			o.expect, err = strconv.Atoi(value)
		case "tags":
			o.tags = value
		case "sql":
			o.sql = value
		case "linger":
			o.linger, err = strconv.ParseFloat(value, 64)
		case "batch-size":
			o.batchSize, err = strconv.Atoi(value)
		case "invisible-duration":
			o.invisibleDuration, err = strconv.Atoi(value)
		case "await-duration":
			o.awaitDuration, err = strconv.Atoi(value)
		case "reconsume-later":
			o.reconsumeLater, err = strconv.Atoi(value)
		case "threads":
			o.threads, err = strconv.Atoi(value)
		default:
			return nil, usagef("unknown option --%s", name)
		}
		if err != nil {
			return nil, usagef("--%s: bad value %q", name, value)
		}
	}
	if o.endpoints == "" {
		return nil, usagef("--endpoints is required")
	}
	if o.topic == "" {
		return nil, usagef("--topic is required")
	}
	if (o.accessKey != "") != (o.secretKey != "") {
		return nil, usagef("--access-key and --secret-key go together")
	}
	if o.command == "produce" || o.command == "transact" {
		if o.count < 0 {
			return nil, usagef("%s needs --count N (N >= 0)", o.command)
		}
		if o.messageGroup != "" && o.deliverAfterMs != 0 {
			return nil, usagef("--message-group and --deliver-after-ms exclude each other")
		}
		if o.hasTag && (strings.Contains(o.tag, "|") || strings.TrimSpace(o.tag) == "") {
			return nil, usagef("--tag must not be blank nor contain '|'")
		}
	}
	if o.command == "transact" && !contains(answers, o.answer) {
		return nil, usagef("transact needs --answer, one of %s", strings.Join(answers, ", "))
	}
	if o.command == "simple-consume" || o.command == "push-consume" {
		if o.group == "" {
			return nil, usagef("%s needs --group G", o.command)
		}
		if o.expect < 0 {
			return nil, usagef("%s needs --expect N (N >= 0)", o.command)
		}
	}
	if o.command == "simple-consume" && o.batchSize <= 0 {
		return nil, usagef("--batch-size must be > 0")
	}
	return o, nil
}

// ---------------------------------------------------------------------------------------------

func main() {
	redirectStdout()
	o, err := parseArgs(os.Args[1:])
	if err != nil {
		fail("usage", err.Error(), 2, nil)
	}
	startWatchdog(o.timeout)
	// Plaintext: the client's TLS default is on (also its env rocketmq.client.enableSsl).
	rmq.EnableSsl = false
	installWireTap()
	switch o.command {
	case "produce":
		produce(o)
	case "transact":
		transact(o)
	case "simple-consume":
		simpleConsume(o)
	case "push-consume":
		pushConsume(o)
	case "route":
		route(o)
	}
	fail("client", "the action returned without a result", 1, nil)
}
