package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// rootfs is the file tree of an image: image path -> where its content comes from on this host
// (a regular file), or a symlink target. Building it from the host's installed Debian packages
// is what makes the image offline: nothing is downloaded, and the same host gives the same tree.
type rootfs struct {
	files map[string]string // image path -> host path (regular file, or directory when dir)
	links map[string]string // image path -> link target
	dirs  map[string]bool
	modes map[string]os.FileMode
	texts map[string][]byte // image path -> content written by the builder itself
}

func newRootfs() *rootfs {
	return &rootfs{files: map[string]string{}, links: map[string]string{}, dirs: map[string]bool{}, modes: map[string]os.FileMode{},
		texts: map[string][]byte{}}
}

// addText puts content the builder writes at an image path (/etc/passwd, a script).
func (r *rootfs) addText(imagePath string, content []byte, mode os.FileMode) {
	r.texts[imagePath], r.modes[imagePath] = content, mode
}

// skipped are package paths an image has no use for.
var skipped = []string{"/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/", "/usr/share/bug/", "/etc/init.d/",
	"/lib/systemd/", "/usr/lib/systemd/", "/etc/logrotate.d/", "/usr/share/bash-completion/", "/etc/default/", "/usr/share/info/"}

// addPackages adds every file of the installed Debian packages (dpkg -L), following symlinks
// (Debian's alternatives: /usr/sbin/iptables -> /etc/alternatives/iptables -> ...).
func (r *rootfs) addPackages(pkgs []string) error {
	for _, pkg := range pkgs {
		out, err := exec.Command("dpkg", "-L", pkg).Output()
		if err != nil {
			return fmt.Errorf("package %s is not installed (hack/install-deps.sh installs it): %v", pkg, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			p := sc.Text()
			if !strings.HasPrefix(p, "/") || p == "/." || skip(p) {
				continue
			}
			fi, err := os.Lstat(p)
			if err != nil || fi.IsDir() {
				continue // a diversion or a directory: directories come with their files
			}
			if err := r.addHostPath(p); err != nil {
				return fmt.Errorf("package %s: %w", pkg, err)
			}
		}
	}
	return nil
}

func skip(p string) bool {
	for _, s := range skipped {
		if strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// addHostPath adds a host path as it is: a regular file, or a symlink and (recursively) what
// it points to.
func (r *rootfs) addHostPath(p string) error {
	for depth := 0; depth < 16; depth++ {
		// Files live under their real directories; a symlinked directory on the way (Debian's
		// merged /usr: /bin -> usr/bin, /lib -> usr/lib) becomes that symlink in the image.
		if dir := path.Dir(p); dir != "/" {
			realDir, err := filepath.EvalSymlinks(dir)
			if err != nil {
				return err
			}
			if realDir != dir {
				if err := r.addDirLinks(dir); err != nil {
					return err
				}
				p = path.Join(realDir, path.Base(p))
			}
		}
		if _, done := r.files[p]; done {
			return nil
		}
		if _, done := r.links[p]; done {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() {
				return nil // sockets, devices: not image content
			}
			r.files[p], r.modes[p] = p, fi.Mode().Perm()
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		r.links[p] = target
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		p = target
	}
	return fmt.Errorf("%s: too many symlinks", p)
}

// addDirLinks records every symlink among dir and its ancestors.
func (r *rootfs) addDirLinks(dir string) error {
	for d := dir; d != "/"; d = path.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if _, done := r.links[d]; !done {
			target, err := os.Readlink(d)
			if err != nil {
				return err
			}
			r.links[d] = target
		}
	}
	return nil
}

// addFile puts a host file at an image path (kovn's own binaries).
func (r *rootfs) addFile(imagePath, hostPath string, mode os.FileMode) {
	r.files[imagePath], r.modes[imagePath] = hostPath, mode
}

// addSharedLibraries adds, for every ELF file in the tree, its interpreter and the shared
// libraries it needs, found as the loader finds them (the multiarch directories), recursively.
func (r *rootfs) addSharedLibraries() error {
	queue := make([]string, 0, len(r.files))
	for img := range r.files {
		queue = append(queue, img)
	}
	sort.Strings(queue)
	seen := map[string]bool{}
	for len(queue) > 0 {
		img := queue[0]
		queue = queue[1:]
		if seen[img] {
			continue
		}
		seen[img] = true
		needs, err := elfNeeds(r.files[img])
		if err != nil {
			return err
		}
		for _, lib := range needs {
			host, err := findLibrary(lib)
			if err != nil {
				return fmt.Errorf("%s needs %s: %w", img, lib, err)
			}
			if err := r.addHostPath(host); err != nil {
				return err
			}
			real, err := filepath.EvalSymlinks(host)
			if err != nil {
				return err
			}
			queue = append(queue, real)
		}
	}
	return nil
}

// elfNeeds is an ELF file's interpreter and DT_NEEDED libraries; nothing for other files.
func elfNeeds(hostPath string) ([]string, error) {
	f, err := elf.Open(hostPath)
	if err != nil {
		return nil, nil // not ELF
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, err
			}
			out = append(out, strings.TrimRight(string(b), "\x00"))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return out, nil // static
	}
	return append(out, libs...), nil
}

// libraryDirs are where Debian's loader looks (amd64 multiarch, then the plain ones).
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

func findLibrary(name string) (string, error) {
	if path.IsAbs(name) {
		_, err := os.Stat(name)
		return name, err
	}
	for _, d := range libraryDirs {
		p := path.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %v", libraryDirs)
}

// writeTar writes the tree as one layer: entries sorted, owned by root, dated at the epoch, so
// the same tree always gives the same bytes (and the same digest).
func (r *rootfs) writeTar(w io.Writer) error {
	entries := map[string]bool{}
	for p := range r.files {
		entries[p] = true
	}
	for p := range r.links {
		entries[p] = true
	}
	for p := range r.texts {
		entries[p] = true
	}
	for p := range entries {
		for d := path.Dir(p); d != "/" && !entries[d]; d = path.Dir(d) {
			r.dirs[d] = true
		}
	}
	for d := range r.dirs {
		entries[d] = true
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, p := range names {
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case r.dirs[p]:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case r.links[p] != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, r.links[p], 0o777
		case r.texts[p] != nil:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, int64(r.modes[p]), int64(len(r.texts[p]))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(r.texts[p]); err != nil {
				return err
			}
			continue
		default:
			if err := writeFile(tw, h, r.files[p], r.modes[p]); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeFile(tw *tar.Writer, h *tar.Header, hostPath string, mode os.FileMode) error {
	b, err := os.ReadFile(hostPath)
	if err != nil {
		return err
	}
	h.Typeflag, h.Mode, h.Size = tar.TypeReg, int64(mode), int64(len(b))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}
