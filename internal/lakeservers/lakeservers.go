package lakeservers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// VersityVersion is the versitygw release the tests build.
const VersityVersion = "v1.8.0"

// unavailable skips t, or fails it under CI.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and %s", msg)
	}
	t.Skip(msg)
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitTCP(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var buildMu sync.Mutex

// VersityBinary returns versitygw's path, building it on first use into
// <user cache>/sepipe/versitygw-<version>/ (SEPIPE_VERSITYGW names a
// binary to use instead).
func VersityBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SEPIPE_VERSITYGW"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "sepipe", "versitygw-"+VersityVersion)
	bin := filepath.Join(dir, "versitygw")
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// Build into a private folder and rename, so two test processes
	// building at once never run a half-written binary.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-") // parent may not exist yet
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			unavailable(t, "versitygw cannot be built: %v", err)
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), ".build-"); err != nil {
			unavailable(t, "versitygw cannot be built: %v", err)
		}
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "install", "github.com/versity/versitygw/cmd/versitygw@"+VersityVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	t.Logf("building versitygw %s (once; cached in %s)", VersityVersion, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		unavailable(t, "versitygw %s cannot be built: %v\n%s", VersityVersion, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		unavailable(t, "versitygw cannot be cached: %v", err)
	}
	if err := os.Rename(filepath.Join(tmp, "versitygw"), bin); err != nil {
		unavailable(t, "versitygw cannot be cached: %v", err)
	}
	return bin
}

// S3 is a running versitygw.
type S3 struct {
	Endpoint  string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
	Dir       string // the POSIX backend's folder: buckets are its subfolders
}

// StartS3 starts versitygw on a free port with the POSIX backend in a
// temporary folder, and sets the standard AWS environment variables of
// the test process to its keys (so nothing passes them in a config).
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := VersityBinary(t)
	s := &S3{Region: "us-east-1", AccessKey: "sepipe-test", SecretKey: "sepipe-test-secret", Dir: t.TempDir()}
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.Endpoint = "http://" + addr
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", addr, "--access", s.AccessKey, "--secret", s.SecretKey, "--quiet", "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		unavailable(t, "versitygw does not start: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	if err := waitTCP(addr, 20*time.Second); err != nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("versitygw did not listen on %s: %v\n%s", addr, err, b)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_REGION", s.Region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(s.Dir, "no-aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(s.Dir, "no-aws-credentials"))
	return s
}

// CreateBucket creates a bucket through the S3 API.
func (s *S3) CreateBucket(t testing.TB, name string) {
	t.Helper()
	c := s3.New(s3.Options{Region: s.Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Objects lists the object keys under prefix in bucket, straight from
// the POSIX backend's folder.
func (s *S3) Objects(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(s.Dir, bucket)
	_ = filepath.WalkDir(filepath.Join(root, prefix), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// Postgres is a running PostgreSQL cluster.
type Postgres struct {
	DSN  string // postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable (trust auth: no password)
	Port int
	Dir  string
	bin  string
}

// PostgresBin finds initdb and pg_ctl: on PATH, or in Debian's
// /usr/lib/postgresql/<version>/bin (the newest).
func PostgresBin() (string, bool) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, true
		}
	}
	return "", false
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartPostgres initialises a cluster in a temporary folder and starts it
// on 127.0.0.1 and a free port. Run as root, it runs the server as the
// postgres user (PostgreSQL refuses root).
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, ok := PostgresBin()
	if !ok {
		unavailable(t, "PostgreSQL binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; apt-get install postgresql")
	}
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("", "sepipe-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable(t, "running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out, log)
		}
	}
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	p := &Postgres{Port: freePort(t), Dir: dir, bin: bin}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=50", p.Port, dir)
	run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start")
	t.Cleanup(func() { run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") })
	p.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
	return p
}
