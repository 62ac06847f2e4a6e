// Command go-driver drives the stock Go client github.com/apache/rocketmq-client-go/v2 (v2.1.2)
// through the interop driver protocol (interop/drivers/PROTOCOL.md): one JSON object per line on
// stdout, client logs to a file under $HOME.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

type propList []kv

func (p *propList) String() string { return "" }
func (p *propList) Set(s string) error {
	i := strings.Index(s, "=")
	if i <= 0 {
		return fmt.Errorf("--prop wants K=V, got %q", s)
	}
	*p = append(*p, kv{s[:i], s[i+1:]})
	return nil
}

type options struct {
	cmd      string
	namesrv  string
	topic    string
	group    string
	timeout  float64
	instance string

	// ACL: both or neither (primitive.Credentials, signed by the client)
	accessKey string
	secretKey string

	// produce / transact
	count      int
	mode       string
	batchSize  int
	tag        string
	keysPrefix string
	bodyPrefix string
	bodySize   int
	props      propList
	delayLevel int
	queue      int // -1 = none
	start      int
	answer     string

	// consume
	expect         int
	model          string
	tags           string
	sql            string
	sqlSet         bool
	from           string
	seek           int64
	seekSet        bool
	reconsumeLater int
	linger         float64
}

// progress counters reported with a timeout error.
var (
	nSent     int64
	nReceived int64
	nChecked  int64
)

func usage(msg string) {
	fail("usage", msg, 2)
}

func parseArgs(args []string) *options {
	if len(args) < 1 {
		usage("usage: go-driver produce|consume|transact --namesrv HOST:PORT --topic T --group G ...")
	}
	o := &options{cmd: args[0], queue: -1}
	fs := flag.NewFlagSet(o.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.namesrv, "namesrv", "", "")
	fs.StringVar(&o.topic, "topic", "", "")
	fs.StringVar(&o.group, "group", "", "")
	fs.Float64Var(&o.timeout, "timeout", 60, "")
	fs.StringVar(&o.instance, "instance", strconv.Itoa(os.Getpid()), "")
	fs.StringVar(&o.accessKey, "access-key", "", "")
	fs.StringVar(&o.secretKey, "secret-key", "", "")
	switch o.cmd {
	case "produce", "transact":
		fs.IntVar(&o.count, "count", -1, "")
		fs.StringVar(&o.mode, "mode", "sync", "")
		fs.IntVar(&o.batchSize, "batch-size", 10, "")
		fs.StringVar(&o.tag, "tag", "", "")
		fs.StringVar(&o.keysPrefix, "keys-prefix", "k-", "")
		fs.StringVar(&o.bodyPrefix, "body-prefix", "body-", "")
		fs.IntVar(&o.bodySize, "body-size", -1, "")
		fs.Var(&o.props, "prop", "")
		fs.IntVar(&o.delayLevel, "delay-level", 0, "")
		fs.IntVar(&o.queue, "queue", -1, "")
		fs.IntVar(&o.start, "start", 0, "")
		fs.StringVar(&o.answer, "answer", "", "")
	case "consume":
		fs.IntVar(&o.expect, "expect", -1, "")
		fs.StringVar(&o.mode, "mode", "push", "")
		fs.StringVar(&o.model, "model", "clustering", "")
		fs.StringVar(&o.tags, "tags", "*", "")
		fs.Func("sql", "", func(s string) error { o.sql = s; o.sqlSet = true; return nil })
		fs.StringVar(&o.from, "from", "first", "")
		fs.Func("seek", "", func(s string) error {
			v, err := strconv.ParseInt(s, 10, 64)
			o.seek, o.seekSet = v, true
			return err
		})
		fs.IntVar(&o.reconsumeLater, "reconsume-later", 0, "")
		fs.Float64Var(&o.linger, "linger", 0, "")
	default:
		usage("unknown command " + strconv.Quote(o.cmd) + " (produce, consume, transact)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		usage(err.Error())
	}
	if fs.NArg() > 0 {
		usage("unexpected argument " + strconv.Quote(fs.Arg(0)))
	}
	if o.namesrv == "" || o.topic == "" || o.group == "" {
		usage("--namesrv, --topic and --group are required")
	}
	if o.timeout <= 0 {
		usage("--timeout must be > 0")
	}
	switch o.cmd {
	case "produce", "transact":
		if o.count < 0 {
			usage("--count N is required")
		}
		if o.batchSize < 1 {
			usage("--batch-size must be >= 1")
		}
		if o.cmd == "produce" {
			switch o.mode {
			case "sync", "async", "oneway", "batch":
			default:
				usage("--mode must be sync, async, oneway or batch")
			}
		} else {
			switch o.answer {
			case "commit", "rollback", "unknown-commit", "unknown-rollback":
			default:
				usage("--answer must be commit, rollback, unknown-commit or unknown-rollback")
			}
		}
	case "consume":
		if o.expect < 0 {
			usage("--expect N is required")
		}
		switch o.mode {
		case "push", "orderly", "pull", "lite-pull":
		default:
			usage("--mode must be push, orderly, pull or lite-pull")
		}
		if o.model != "clustering" && o.model != "broadcasting" {
			usage("--model must be clustering or broadcasting")
		}
		if o.from != "first" && o.from != "last" {
			usage("--from must be first or last")
		}
		if o.seekSet && o.mode != "lite-pull" {
			usage("--seek is for --mode lite-pull only")
		}
	}
	return o
}

func (o *options) nameServers() []string {
	var res []string
	for _, a := range strings.Split(o.namesrv, ";") {
		if a = strings.TrimSpace(a); a != "" {
			res = append(res, a)
		}
	}
	return res
}

func (o *options) resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver(o.nameServers())
}

// silenceClientLog sends the client's logrus output to a file under $HOME (never stdout).
func silenceClientLog(instance string) {
	rlog.SetLogLevel("warn")
	home := os.Getenv("HOME")
	if home == "" {
		home = os.TempDir()
	}
	dir := filepath.Join(home, "logs", "rocketmq-go")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		rlog.SetOutputPath(filepath.Join(dir, "driver-"+instance+".log"))
	} else {
		rlog.SetLogger(nopLogger{})
	}
}

type nopLogger struct{}

func (nopLogger) Debug(string, map[string]interface{})   {}
func (nopLogger) Info(string, map[string]interface{})    {}
func (nopLogger) Warning(string, map[string]interface{}) {}
func (nopLogger) Error(string, map[string]interface{})   {}
func (nopLogger) Fatal(string, map[string]interface{})   {}
func (nopLogger) Level(string)                           {}
func (nopLogger) OutputPath(string) error                { return nil }

var deadline time.Time

func armTimeout(o *options) {
	d := time.Duration(o.timeout * float64(time.Second))
	deadline = time.Now().Add(d)
	time.AfterFunc(d, func() {
		e := errorEvent("timeout", fmt.Sprintf("no result within %gs", o.timeout))
		switch o.cmd {
		case "produce":
			e = e.add("sent", atomic.LoadInt64(&nSent))
		case "transact":
			e = e.add("sent", atomic.LoadInt64(&nSent)).add("checked", atomic.LoadInt64(&nChecked))
		case "consume":
			e = e.add("received", atomic.LoadInt64(&nReceived))
		}
		final(e, 3)
	})
}

// shutdownBounded runs f (a client Shutdown) but gives up when the deadline is near; the
// timeout timer then ends the run.
func shutdownBounded(f func() error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f()
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		select {} // the timeout timer exits the process
	}
}

func unsupported(msg string) {
	fail("unsupported", msg, 2)
}

func main() {
	o := parseArgs(os.Args[1:])
	silenceClientLog(o.instance)
	armTimeout(o)
	switch o.cmd {
	case "produce":
		runProduce(o)
	case "transact":
		runTransact(o)
	case "consume":
		runConsume(o)
	}
}
