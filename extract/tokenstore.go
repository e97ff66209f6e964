package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sepipe/sepipe/internal/flock"
)

// StoredToken is what a TokenStore keeps: the newest refresh token, the
// access token that came with it and its expiry. It is written to disk only
// by a TokenStore and never logged (LogValue and Format hide the tokens).
type StoredToken struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Seed identifies (by a hash prefix) the configured refresh token this
	// chain of tokens started from, so that a new configured token (a
	// person authorized again) replaces the chain.
	Seed string `json:"seed,omitempty"`
	// Source says how the chain started: "environment" or "login".
	Source  string    `json:"source,omitempty"`
	Updated time.Time `json:"updated,omitzero"`
}

// Format prints the token without its secrets, for every verb.
func (t StoredToken) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "StoredToken{access: %s, refresh: %s, expiry: %s, source: %s}",
		redacted, redacted, t.Expiry.Format(time.RFC3339), t.Source)
}

// TokenStore keeps the newest OAuth tokens between runs. Lock serialises
// refreshes across the processes sharing the store; it returns once the
// lock is held (or ctx ends).
type TokenStore interface {
	Load() (StoredToken, bool, error)
	Save(StoredToken) error
	Lock(ctx context.Context) (unlock func(), err error)
	String() string // where the store is, for messages
}

// FileTokenStore keeps the tokens in one JSON file, mode 0600, replaced
// atomically (written beside, fsynced, renamed, directory fsynced), so a
// crash leaves the old or the new tokens, never a torn file.
type FileTokenStore struct {
	Path string // e.g. <out>/.sepipe/token.json
}

var _ TokenStore = (*FileTokenStore)(nil)

func (s *FileTokenStore) String() string { return s.Path }

// Load reads the store; ok is false when it does not exist yet.
func (s *FileTokenStore) Load() (StoredToken, bool, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return StoredToken{}, false, nil
	}
	if err != nil {
		return StoredToken{}, false, fmt.Errorf("token store %s: %w", s.Path, err)
	}
	var t StoredToken
	if err := json.Unmarshal(b, &t); err != nil {
		// Never quote the file: it holds tokens.
		return StoredToken{}, false, fmt.Errorf("token store %s: not a token file (remove it and run sepipe auth login): %s", s.Path, jsonErrorKind(err))
	}
	// The store is the owner's alone (0600, as Save writes it): a file
	// restored from a backup or copied readable by others is made so
	// again, not used as it is for as long as its access token lasts.
	if fi, err := os.Stat(s.Path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(s.Path, 0o600); err != nil {
			return StoredToken{}, false, fmt.Errorf("token store %s is readable by others (mode %v) and cannot be made the owner's alone: %w", s.Path, fi.Mode().Perm(), err)
		}
	}
	return t, true, nil
}

func jsonErrorKind(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return "unexpected JSON shape"
}

// Save replaces the store with t.
func (s *FileTokenStore) Save(t StoredToken) error {
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("token store %s: %w", s.Path, err)
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("token store %s: %w", s.Path, err)
	}
	f, err := os.CreateTemp(dir, ".token-*.tmp")
	if err != nil {
		return fmt.Errorf("token store %s: %w", s.Path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("token store %s: %w", s.Path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("token store %s: %w", s.Path, err)
	}
	if err := os.Rename(tmp, s.Path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("token store %s: %w", s.Path, err)
	}
	return syncDir(dir)
}

// Lock takes an exclusive lock on <path>.lock, waiting for another
// process's refresh to finish.
func (s *FileTokenStore) Lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return nil, fmt.Errorf("token store %s: %w", s.Path, err)
	}
	return flock.Lock(ctx, s.Path+".lock", flock.Options{Wait: -1, Perm: 0o600})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
